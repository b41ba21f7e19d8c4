//! `viewerfleet gc`: removes what earlier crashes left behind: browsers and profiles,
//! viewer slots, local Grids and their sessions, and (unless `--local`) cloud runs.

use crate::cli::GcArgs;
use crate::cloud::api::HcloudApi;
use crate::cloud::{gc, CloudError};
use std::process::ExitCode;

pub async fn run(args: GcArgs) -> anyhow::Result<ExitCode> {
    if !args.local {
        gc_hcloud(&args).await?;
    }
    let mut removed = crate::viewer::gc::collect_leftovers(args.dry_run)?;
    removed.extend(crate::netns::gc::leftover_lines(args.dry_run));
    removed.extend(crate::grid::local::gc(args.dry_run).await);
    removed.extend(crate::fleet::grid::gc_sessions(args.dry_run).await);
    for line in &removed {
        println!(
            "{}{line}",
            if args.dry_run {
                "would remove: "
            } else {
                "removed: "
            }
        );
    }
    if removed.is_empty() {
        println!("nothing left over from earlier runs");
    }
    Ok(ExitCode::SUCCESS)
}

/// The cloud part: deletes expired runs' servers, firewalls and SSH keys.
async fn gc_hcloud(args: &GcArgs) -> anyhow::Result<()> {
    let older_than = match &args.older_than {
        Some(v) => Some(
            humantime::parse_duration(v)
                .map_err(|e| anyhow::anyhow!("--older-than `{v}`: {e}; write e.g. 2h"))?,
        ),
        None => None,
    };
    let api = match HcloudApi::from_env(std::env::var("HCLOUD_TOKEN_FILE").ok().as_deref()) {
        Ok(api) => api,
        Err(CloudError::NoToken) => {
            println!("hcloud: no HCLOUD_TOKEN, skipping cloud leftovers");
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    let (runs, deleted) = gc::gc(&api, older_than, args.dry_run).await?;
    for r in &runs {
        println!(
            "hcloud: run {} expired ({} servers, {} firewalls, {} SSH keys){}",
            r.run,
            r.servers,
            r.firewalls,
            r.ssh_keys,
            if args.dry_run {
                " — would delete"
            } else {
                " — deleted"
            }
        );
    }
    if !args.dry_run {
        println!("hcloud: deleted {}", deleted.summary());
    }
    Ok(())
}
