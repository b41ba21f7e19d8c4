//! The top layer: one file per subcommand. Only this layer sees the command-line types
//! (`crate::cli`); each command turns its arguments into the options of the layer below,
//! calls it, prints what users read, and returns the exit code (see README, "Exit codes").

mod calibrate;
mod compare;
mod down;
mod gc;
mod grid;
mod ladder;
mod plan;
mod refsite;
mod report;
mod run;
mod suite;
mod up;
mod validate;

use crate::cli::Command;
use std::process::ExitCode;
use std::time::Duration;

/// Runs one subcommand.
pub async fn dispatch(command: Command, quiet: bool) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run(args) => run::run(args, quiet).await,
        Command::Refsite(args) => refsite::run(args).await,
        Command::Report(args) => report::run(args).await,
        Command::Compare(args) => compare::run(args).await,
        Command::Suite(args) => suite::run(args, quiet).await,
        Command::Gc(args) => gc::run(args).await,
        Command::Plan(args) => plan::run(args).await,
        Command::Up(args) => up::run(args).await,
        Command::Down(args) => down::run(args).await,
        Command::Validate(args) => validate::run(args),
        Command::Grid(args) => grid::run(args).await,
        Command::Ladder(args) => ladder::run(args, quiet).await,
        Command::Calibrate(args) => calibrate::run(args).await,
    }
}

/// A duration flag, or an error that names the flag and shows the form.
fn parse_duration(flag: &str, text: &str) -> anyhow::Result<Duration> {
    humantime::parse_duration(text)
        .map_err(|e| anyhow::anyhow!("{flag} {text:?}: {e}; write e.g. 30s or 1m"))
}
