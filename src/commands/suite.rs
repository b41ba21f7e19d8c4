//! `viewerfleet suite`: several scenarios (and repeats) and their comparison.

use crate::cli::SuiteArgs;
use crate::model::scenario::Overrides;
use crate::report::comparison_text;
use crate::suite::{run_suite, EngineRunner, SuitePlan};
use crate::sys::shutdown::Shutdown;
use std::process::ExitCode;

pub async fn run(args: SuiteArgs, quiet: bool) -> anyhow::Result<ExitCode> {
    let overrides = Overrides {
        viewers: args.viewers.and_then(|v| v.count()),
        auto_viewers: args.viewers.is_some_and(|v| v.is_auto()),
        auto_max: args.max_viewers,
        duration: args.duration.clone(),
        fleet: args.fleet,
        apply: None,
        per_browser: args.per_browser,
    };
    let plan = SuitePlan::new(
        &args.scenarios,
        &args.apply,
        args.repeat,
        &args.out,
        overrides,
    )?;
    let shutdown = Shutdown::new();
    shutdown.listen_for_signals()?;
    let runner = EngineRunner {
        shutdown: shutdown.clone(),
        progress: !quiet,
    };
    let mut err = std::io::stderr();
    let result = run_suite(&plan, &runner, &shutdown, &mut err).await?;
    println!();
    print!("{}", comparison_text(&result.comparison));
    println!("HTML comparison: {}", result.html.display());
    Ok(if result.interrupted {
        ExitCode::from(shutdown.exit_code())
    } else if result.comparison.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
