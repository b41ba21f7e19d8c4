//! `viewerfleet grid`: a local Selenium Grid 4 (hub and nodes) on this machine.

use super::Done;
use crate::cli::{GridAction, GridArgs};
use crate::grid::local::{
    default_state_file, down, find_jar, slot_address, up, GridConfig, LocalGridOptions, NodeCpus,
};
use crate::model::exit::Exit;
use crate::model::kinds::NatKind;
use crate::model::scenario::LinkProfile;
use tokio_util::sync::CancellationToken;

pub async fn run(args: GridArgs) -> anyhow::Result<Done> {
    let json = args.stdout.json;
    let done = |figures: serde_json::Value| Done {
        exit: Exit::Ok,
        figures: json.then_some(figures),
    };
    match args.action {
        GridAction::Up(a) => {
            if !a.local {
                return Err(crate::model::exit::bad_input(anyhow::anyhow!(
                    "`grid up` only makes a local Grid: pass --local (for cloud nodes use `fleet: hcloud` or terraform/)"
                )));
            }
            let state_file = a.state.unwrap_or_else(default_state_file);
            let mut opts = LocalGridOptions::new(a.nodes, a.slots, state_file.clone());
            opts.jar = a.jar;
            opts.config_dir = a.config_dir;
            // 0 on the command line: no limit that way.
            let limit = |kbit: u32| (kbit > 0).then_some(kbit);
            opts.slot_link = LinkProfile {
                download_kbps: limit(a.down_kbit),
                upload_kbps: limit(a.up_kbit),
                latency_ms: None,
            };
            opts.target_port = a.target_port;
            opts.node_cpus = NodeCpus::parse(&a.node_cpus)?;
            opts.nat = a
                .nat
                .parse()
                .map_err(|e| crate::model::exit::bad_input(anyhow::anyhow!("--nat: {e}")))?;
            let shutdown = crate::sys::shutdown::Shutdown::new();
            shutdown.listen_for_signals()?;
            let cancel = CancellationToken::new();
            let watch = {
                let (s, c) = (shutdown.clone(), cancel.clone());
                tokio::spawn(async move {
                    s.wait().await;
                    c.cancel();
                })
            };
            let st = up(&opts, &cancel).await;
            watch.abort();
            let st = match st {
                Ok(st) => st,
                // 130/143 like `run` and `up`; `up` released what it had made.
                Err(_) if shutdown.is_triggered() => {
                    eprintln!("interrupted: everything the local Grid had started was released");
                    return Ok(shutdown.exit().into());
                }
                Err(err) => return Err(err),
            };
            println!("hub: {}", st.hub_url);
            for n in &st.nodes {
                println!(
                    "node {}: {} — slots {}{}..{}{} ({} .. {})",
                    n.number,
                    n.url,
                    st.name_prefix,
                    n.first_slot,
                    st.name_prefix,
                    n.first_slot + n.slots - 1,
                    slot_address(&st, n.first_slot),
                    slot_address(&st, n.first_slot + n.slots - 1),
                );
                let cpus = match n.cgroup.as_ref() {
                    Some(c) => format!(
                        "cgroup {}{}",
                        c.dir().display(),
                        c.cores.map(|c| format!(", {c} cores")).unwrap_or_default()
                    ),
                    None => "no cgroup of its own".into(),
                };
                println!("  load: {} ({cpus})", n.load_url);
            }
            println!(
                "target namespace: {} at {} (refsite runs there)",
                st.target_namespace,
                st.target_origin()
            );
            if let Some(nat) = st.nat.filter(|n| *n != NatKind::None) {
                println!(
                    "every viewer slot is behind a {nat} NAT; the target is also at {} on the emulated internet and runs a STUN server",
                    st.target_ipv4
                );
            }
            println!("use it with `fleet: {{kind: grid, url: {}}}`; stop it with `viewerfleet grid down`", st.hub_url);
            Ok(done(super::json::grid_up(&st, &state_file)))
        }
        GridAction::Files(a) => {
            let mut opts = LocalGridOptions::new(1, 1, default_state_file());
            opts.jar = a.jar;
            opts.config_dir = a.config_dir;
            let config = GridConfig::of(&opts);
            println!("config: {}", config.describe());
            println!("slot wrapper, load endpoint, viewer-slot script: built into this binary");
            let (jar, origin) = find_jar(&opts)?;
            println!("jar: {} ({})", jar.display(), origin.as_str());
            Ok(done(super::json::grid_files(
                &config.describe(),
                &jar,
                origin.as_str(),
            )))
        }
        GridAction::Down(a) => {
            let path = a.state.unwrap_or_else(default_state_file);
            let stopped = down(&path).await?;
            if stopped {
                println!("local Grid stopped and released");
            } else {
                println!("no local Grid recorded in {}", path.display());
            }
            Ok(done(super::json::grid_down(&path, stopped)))
        }
    }
}
