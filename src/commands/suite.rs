//! `viewerfleet suite`: several scenarios (and repeats) and their comparison.

use crate::cli::SuiteArgs;
use crate::model::exit::Exit;
use crate::model::scenario::Overrides;
use crate::report::comparison_text;
use crate::suite::{run_suite, EngineRunner, SuitePlan};
use crate::sys::shutdown::Shutdown;

pub async fn run(args: SuiteArgs, quiet: bool) -> anyhow::Result<super::Done> {
    let overrides = Overrides {
        viewers: args.viewers.and_then(|v| v.count()),
        auto_viewers: args.viewers.is_some_and(|v| v.is_auto()),
        auto_max: args.max_viewers,
        canary: false,
        duration: args.duration.clone(),
        fleet: args.fleet,
        apply: None,
        per_browser: args.per_browser,
        light_peers: args.light_peers,
    };
    let plan = SuitePlan::new(
        &args.scenarios,
        &args.apply,
        args.repeat,
        &args.out,
        overrides,
    )?
    .with_run_repeats(&args.repeat_run)?;
    let plan = match &args.swarm_size_file {
        Some(path) => plan.with_size_file(path)?,
        None => plan,
    };
    let shutdown = Shutdown::new();
    shutdown.listen_for_signals()?;
    let runner = EngineRunner {
        shutdown: shutdown.clone(),
        progress: !quiet,
        confirm_paid: super::confirm_paid(args.yes),
    };
    let mut err = std::io::stderr();
    let result = run_suite(&plan, &runner, &shutdown, &mut err).await?;
    println!();
    print!("{}", comparison_text(&result.comparison));
    println!("HTML comparison: {}", result.html.display());
    for name in &result.over_failure_limit {
        eprintln!("{name}: more viewers failed than its max_failed_viewers allows");
    }
    let thresholds_failed = result.thresholds_failed();
    for name in &thresholds_failed {
        eprintln!("{name}: THRESHOLDS FAILED (see its report.md)");
    }
    // Interrupted, then a run that failed or went over its failure limit, then thresholds.
    let exit = if result.interrupted {
        shutdown.exit()
    } else if !result.comparison.failed.is_empty() || !result.over_failure_limit.is_empty() {
        Exit::Failed
    } else if !thresholds_failed.is_empty() {
        Exit::ThresholdsFailed
    } else {
        Exit::Ok
    };
    Ok(super::Done {
        exit,
        figures: args.json.then(|| super::json::suite(&result, &args.out)),
    })
}
