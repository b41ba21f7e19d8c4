//! The cloud commands: `plan`, `up`, `down`, the cloud part of `gc`, and the hidden
//! `fake-hcloud` for dry runs. They turn CLI arguments into calls on the modules beside.

use super::api::HcloudApi;
use super::fake_api::{FakeConfig, FakeHcloud};
use super::fleet::{HcloudFleet, UpOptions};
use super::spec::HcloudFleetSpec;
use super::{gc, guard, pricing, provision, sizing, CloudError};
use crate::cli::{DownArgs, FakeHcloudArgs, GcArgs, PlanArgs, UpArgs};
use crate::fleet::FleetSpec;
use crate::scenario::{self, Overrides, Plan};
use anyhow::Context;
use std::process::ExitCode;
use tokio_util::sync::CancellationToken;

/// Exit code after Ctrl-C / SIGTERM (128 + SIGINT).
const INTERRUPTED: u8 = 130;

fn hcloud_spec(plan: &Plan) -> Option<HcloudFleetSpec> {
    match &plan.fleet {
        FleetSpec::Hcloud(spec) => Some((**spec).clone()),
        _ => None,
    }
}

/// `viewerfleet plan`: node counts and costs for each scenario.
pub async fn cli_plan(args: PlanArgs) -> anyhow::Result<ExitCode> {
    let overrides = Overrides {
        viewers: args.viewers,
        duration: None,
    };
    let calibrated = match &args.calibration {
        Some(path) => {
            let calibration = crate::calibrate::Calibration::load(path)?;
            let figures = calibration.profile("project").cloned().with_context(|| {
                format!(
                    "{}: no `project` profile with a playing viewer; run `viewerfleet calibrate` with --profiles including project",
                    path.display()
                )
            })?;
            println!(
                "budget from {} (measured {} on {} cores): {:.3} cores and {:.0} MB PSS per viewer",
                path.display(),
                calibration.created,
                calibration.host.cpus,
                figures.cpu_cores_per_viewer,
                figures.pss_mb_per_viewer_max
            );
            Some(figures)
        }
        None => None,
    };
    let mut api: Option<(Option<String>, HcloudApi)> = None;
    let mut out = std::io::stdout();
    for path in &args.scenarios {
        let plan = scenario::load(path, &overrides)?;
        let mut spec = match hcloud_spec(&plan) {
            Some(spec) => spec,
            None => {
                println!(
                    "{}: the scenario's fleet is `{}`; estimating with the hcloud defaults",
                    path.display(),
                    plan.fleet.kind_name()
                );
                HcloudFleetSpec::default()
            }
        };
        if let Some(figures) = &calibrated {
            spec.budget.cpu_per_viewer = figures.cpu_cores_per_viewer;
            // The window's peak, not its mean: nodes must hold the worst moment.
            spec.budget.memory_mb_per_viewer = figures.pss_mb_per_viewer_max;
        }
        if let Some(cpu) = args.cpu_per_viewer {
            spec.budget.cpu_per_viewer = cpu;
        }
        if let Some(mem) = args.memory_mb_per_viewer {
            spec.budget.memory_mb_per_viewer = mem;
        }
        spec.validate(plan.viewers)
            .map_err(|(field, message)| CloudError::Invalid { field, message })
            .with_context(|| format!("{}", path.display()))?;
        if api
            .as_ref()
            .is_none_or(|(file, _)| *file != spec.token_file)
        {
            api = Some((
                spec.token_file.clone(),
                HcloudApi::from_env(spec.token_file.as_deref())?,
            ));
        }
        let client = &api
            .as_ref()
            .map(|(_, a)| a.clone())
            .context("no API client")?;
        let catalogue = pricing::fetch(client, &spec.location).await?;
        let fleet = sizing::plan(&spec, plan.viewers, plan.duration, &catalogue)?;
        let label = format!("{} ({})", plan.name, path.display());
        sizing::render(&mut out, &label, &fleet, &spec.budget)?;
        println!();
    }
    Ok(ExitCode::SUCCESS)
}

fn viewer_slots_script(args: &UpArgs) -> anyhow::Result<Option<String>> {
    match &args.viewer_slots {
        Some(path) => {
            Ok(Some(std::fs::read_to_string(path).with_context(|| {
                format!("--viewer-slots {}", path.display())
            })?))
        }
        None => Ok(std::fs::read_to_string("grid/viewer-slots.sh").ok()),
    }
}

/// `viewerfleet up`: provisions the fleet and leaves it running; tears down on any failure.
pub async fn cli_up(args: UpArgs) -> anyhow::Result<ExitCode> {
    let plan = scenario::load(
        &args.scenario,
        &Overrides {
            viewers: args.viewers,
            duration: None,
        },
    )?;
    let spec = hcloud_spec(&plan).with_context(|| {
        format!(
            "{}: `viewerfleet up` needs `fleet: kind: hcloud` (this scenario's fleet is `{}`)",
            args.scenario.display(),
            plan.fleet.kind_name()
        )
    })?;
    super::fleet::check_up(&spec)?;
    let api = HcloudApi::from_env(spec.token_file.as_deref())?;
    let hub_url = std::env::var(super::hub::HUB_URL_ENV).ok();
    let opts = UpOptions {
        keep: true,
        viewer_slots_script: viewer_slots_script(&args)?,
        // A tunnel or the fake's simulated hub answers at once: poll it more often.
        hub_poll: hub_url
            .as_ref()
            .map(|_| std::time::Duration::from_millis(500)),
        hub_url,
    };
    if opts.viewer_slots_script.is_none() {
        tracing::warn!("no grid/viewer-slots.sh (or --viewer-slots): viewers will share each node's address, without tc shaping");
    }
    let cancel = CancellationToken::new();
    let signals = guard::cancel_on_signals(cancel.clone());
    let result = HcloudFleet::up(&api, &plan, &spec, opts, &cancel).await;
    signals.abort();
    match result {
        Ok(fleet) => {
            let inventory = serde_json::to_string_pretty(&fleet.inventory())?;
            match &args.inventory {
                Some(path) => std::fs::write(path, inventory + "\n")
                    .with_context(|| format!("--inventory {}", path.display()))?,
                None => println!("{inventory}"),
            }
            eprintln!(
                "run {} is up: hub {} with {} nodes ({} viewers). It bills until you run `viewerfleet down {}`.",
                fleet.run_id, fleet.hub_url, fleet.nodes.len(), fleet.capacity(), fleet.run_id
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(CloudError::Cancelled) => {
            eprintln!("interrupted: every server of the run was deleted");
            Ok(ExitCode::from(INTERRUPTED))
        }
        Err(e) => Err(e.into()),
    }
}

/// `viewerfleet down RUN`.
pub async fn cli_down(args: DownArgs) -> anyhow::Result<ExitCode> {
    provision::check_run_id(&args.run)?;
    let api = HcloudApi::from_env(std::env::var("HCLOUD_TOKEN_FILE").ok().as_deref())?;
    let deleted = provision::teardown(&api, &args.run).await?;
    println!("run {}: deleted {}", args.run, deleted.summary());
    for name in deleted
        .servers
        .iter()
        .chain(&deleted.firewalls)
        .chain(&deleted.ssh_keys)
    {
        println!("  {name}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The cloud part of `viewerfleet gc` (to be called by the `gc` command unless `--local`):
/// deletes expired runs' servers, firewalls and SSH keys.
pub async fn gc_hcloud(args: &GcArgs) -> anyhow::Result<()> {
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

/// `viewerfleet fake-hcloud`.
pub async fn cli_fake(args: FakeHcloudArgs) -> anyhow::Result<ExitCode> {
    let node_boot = match args.node_boot.as_str() {
        "never" => None,
        v => Some(
            humantime::parse_duration(v).map_err(|e| anyhow::anyhow!("--node-boot `{v}`: {e}"))?,
        ),
    };
    let config = FakeConfig {
        server_limit: args.server_limit,
        rate_limit: args.rate_limit,
        fail_every: args.fail_every,
        node_boot,
        ..FakeConfig::default()
    };
    let fake = FakeHcloud::start(config, args.listen).await?;
    println!("export HCLOUD_ENDPOINT={}", fake.endpoint());
    println!("export HCLOUD_TOKEN=fake-token");
    println!("export {}={}", super::hub::HUB_URL_ENV, fake.hub_url());
    eprintln!("fake Hetzner Cloud API listening; Ctrl-C to stop");
    tokio::signal::ctrl_c().await?;
    Ok(ExitCode::SUCCESS)
}
