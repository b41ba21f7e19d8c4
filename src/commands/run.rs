//! `viewerfleet run`: one scenario into a run folder.

use crate::cli::RunArgs;
use crate::engine::{run_scenario, RunOptions, RunSource};
use crate::model::exit::Exit;
use crate::model::scenario::{self, Overrides};
use crate::sys::shutdown::Shutdown;
use anyhow::Context;
use std::path::PathBuf;

pub async fn run(args: RunArgs, quiet: bool) -> anyhow::Result<super::Done> {
    let overrides = Overrides {
        fleet: args.fleet,
        apply: args.apply,
        canary: args.canary,
        ..args.scale.overrides(&args.swarm)?
    };
    // Validate before anything else, so a bad file costs nothing; the engine runs this plan.
    let plan = scenario::load(&args.scenario, &overrides)?;
    let name = plan.name.clone();
    let out = match args.output.out {
        Some(out) => out,
        None => PathBuf::from("runs").join(format!(
            "{}-{}",
            name,
            chrono::Utc::now().format("%Y%m%dT%H%M%SZ")
        )),
    };
    let shutdown = Shutdown::new();
    shutdown.listen_for_signals()?;
    let outcome = run_scenario(
        plan,
        &RunSource::scenario(&args.scenario, &overrides),
        &out,
        shutdown,
        RunOptions {
            confirm_paid: super::confirm_paid(args.paid.yes),
            progress: !quiet,
            metrics_listen: args.metrics_listen,
            write_report: !args.no_report,
            keep: args.keep,
        },
    )
    .await
    .with_context(|| format!("run {name}"))?;
    println!("{}", outcome.summary);
    println!("raw data: {}", outcome.run_dir.display());
    let exit = Exit::from_code(outcome.exit_code).unwrap_or(Exit::Internal);
    Ok(super::Done {
        exit,
        figures: args.stdout.json.then(|| super::json::run(&outcome)),
    })
}
