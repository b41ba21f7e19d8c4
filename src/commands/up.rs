//! `viewerfleet up`: provisions a scenario's cloud fleet and leaves it running.

use super::Done;
use crate::cli::UpArgs;
use crate::cloud::api::HcloudApi;
use crate::cloud::up::{check_up, CloudFleet, UpOptions};
use crate::cloud::{hub, CloudError};
use crate::model::exit::bad_input;
use crate::model::exit::Exit;
use crate::model::scenario::{self, Overrides};
use crate::sys::shutdown::Shutdown;
use crate::target::start;
use anyhow::Context;

fn viewer_slots_script(args: &UpArgs) -> anyhow::Result<Option<String>> {
    match &args.viewer_slots {
        Some(path) => {
            let bytes = crate::model::rawdata::read_regular_file(path, 1 << 20)
                .with_context(|| format!("--viewer-slots {}", path.display()))
                .map_err(bad_input)?;
            let text = String::from_utf8(bytes).map_err(|_| {
                bad_input(anyhow::anyhow!(
                    "--viewer-slots {}: is not text; give the viewer-slots.sh shell script",
                    path.display()
                ))
            })?;
            Ok(Some(text))
        }
        // The script built into this binary: the one its netns fleet and local Grid run.
        None => Ok(Some(crate::netns::slots::SLOT_SCRIPT.to_string())),
    }
}

/// Checks the target, provisions the fleet and leaves it running (handed over to its TTL);
/// tears down on any failure.
pub async fn run(args: UpArgs) -> anyhow::Result<Done> {
    let plan = scenario::load(
        &args.scenario,
        &Overrides {
            viewers: args.viewers.into(),
            canary: args.canary,
            ..Default::default()
        },
    )?;
    let spec = super::plan::hcloud_spec(&plan)
        .with_context(|| {
            format!(
                "{}: `viewerfleet up` needs `fleet: kind: hcloud` (this scenario's fleet is `{}`)",
                args.scenario.display(),
                plan.fleet.kind()
            )
        })
        .map_err(bad_input)?;
    // Every file given is read before anything is checked against the API.
    let viewer_slots = viewer_slots_script(&args)?;
    check_up(&spec)?;
    let api = HcloudApi::from_env(spec.token_file.as_deref())?;
    let hub_url = std::env::var(hub::HUB_URL_ENV).ok();
    let shutdown = Shutdown::new();
    shutdown.listen_for_signals()?;
    // The canary's run goes next to the other runs (`up` has no run folder of its own).
    let canary_dir = std::path::PathBuf::from("runs").join(format!(
        "{}-canary-{}",
        plan.name,
        chrono::Utc::now().format("%Y%m%dT%H%M%SZ")
    ));
    let canary = crate::engine::canary::for_plan(&plan, &canary_dir, &shutdown).map(|probe| {
        crate::cloud::up::Canary {
            probe,
            viewers: plan.viewers,
            per_browser: plan.per_browser,
        }
    });
    let opts = UpOptions {
        keep: true,
        viewer_slots_script: viewer_slots,
        // A tunnel or the fake's simulated hub answers at once: poll it more often.
        hub_poll: hub_url
            .as_ref()
            .map(|_| std::time::Duration::from_millis(500)),
        hub_url,
        canary,
        confirm: super::confirm_paid(args.paid.yes),
    };
    // A target that does not answer costs no server.
    tokio::select! {
        r = start::check_before_fleet(&plan) => r.with_context(|| format!("{}: the target", args.scenario.display()))?,
        _ = shutdown.wait() => {
            eprintln!("interrupted before any server was created");
            return Ok(shutdown.exit().into());
        }
    }
    let result = CloudFleet::up(&api, &plan, &spec, opts, &shutdown.token()).await;
    match result {
        Ok(fleet) => {
            #[cfg(debug_assertions)]
            panic_if_asked("up-fleet-ready");
            if let Err(e) = fleet.hand_over().await {
                tracing::error!(
                    "the hub's heartbeat label could not be removed ({e}): `viewerfleet gc` will take run {} for a crashed one 10 minutes from now; remove the label {} from {} (Console or `hcloud server remove-label`)",
                    fleet.run_id, crate::cloud::provision::LABEL_HEARTBEAT, fleet.hub.name
                );
            }
            match &args.inventory {
                // The file carries the hubs' router credentials for later runs
                // (`fleet: {kind: grid, inventory: FILE}`): readable by its owner only.
                Some(path) => {
                    let inventory =
                        serde_json::to_string_pretty(&fleet.inventory_with_credentials())?;
                    crate::grid::auth::write_private(path, (inventory + "\n").as_bytes())
                        .with_context(|| format!("--inventory {}", path.display()))?
                }
                // Under --json the inventory (without the password) is in the document.
                None if args.stdout.json => {}
                None => {
                    println!("{}", serde_json::to_string_pretty(&fleet.inventory())?);
                    eprintln!(
                        "the hub's password is not printed; to run against this fleet later, write the inventory to a file with --inventory FILE (mode 0600, with the password) and name that file in `fleet: {{kind: grid, inventory: FILE}}`"
                    );
                }
            }
            if let Some(c) = &fleet.canary {
                eprintln!("{}", c.verdict);
            }
            eprintln!(
                "run {} is up: hub {} with {} nodes ({} viewers), {} Hetzner API requests. It bills until you run `viewerfleet down {}` (or `viewerfleet gc` once its TTL passed).",
                fleet.run_id, fleet.hub_url, fleet.nodes.len(), fleet.capacity(), api.requests(), fleet.run_id
            );
            Ok(Done {
                exit: Exit::Ok,
                figures: args.stdout.json.then(|| {
                    super::json::up(
                        fleet.inventory(),
                        args.inventory.as_deref(),
                        fleet.nodes.len(),
                        fleet.capacity(),
                        api.requests(),
                    )
                }),
            })
        }
        Err(CloudError::Cancelled) => {
            eprintln!("interrupted: every server of the run was deleted");
            Ok(shutdown.exit().into())
        }
        Err(e) => Err(e.into()),
    }
}

/// A test hook of debug builds (compiled out of release builds): with
/// `VIEWERFLEET_TEST_PANIC=up-fleet-ready`, `up` panics once its fleet is up, before handing
/// it over, so that the fast tier can show what a panic on a command's main path does to a
/// cloud run (`crate::run` catches it and `cloud::reaper::after_panic` deletes the run).
#[cfg(debug_assertions)]
fn panic_if_asked(point: &str) {
    if std::env::var("VIEWERFLEET_TEST_PANIC").is_ok_and(|v| v == point) {
        panic!("VIEWERFLEET_TEST_PANIC={point} (a test hook of debug builds)");
    }
}
