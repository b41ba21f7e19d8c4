//! The top layer: one file per subcommand. Only this layer sees the command-line types
//! (`crate::cli`); each command turns its arguments into the options of the layer below,
//! calls it, prints what users read, and returns the exit code (see README, "Exit codes").
//!
//! Every command prints through the macros below (they shadow std's in this module and its
//! children): a reader that closed the pipe (`… | head -1`) ends the output, never the
//! command (see `output`).

/// `print!` that survives a closed pipe (see `output`).
macro_rules! print {
    ($($arg:tt)*) => { $crate::commands::output::out(format_args!($($arg)*)) };
}
/// `println!` that survives a closed pipe (see `output`).
macro_rules! println {
    () => { $crate::commands::output::out(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::commands::output::out(format_args!("{}\n", format_args!($($arg)*))) };
}
/// `eprint!` that survives a closed pipe (see `output`).
#[allow(unused_macros)]
macro_rules! eprint {
    ($($arg:tt)*) => { $crate::commands::output::err(format_args!($($arg)*)) };
}
/// `eprintln!` that survives a closed pipe (see `output`).
macro_rules! eprintln {
    () => { $crate::commands::output::err(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::commands::output::err(format_args!("{}\n", format_args!($($arg)*))) };
}

mod calibrate;
mod compare;
mod down;
mod gc;
mod grid;
mod ladder;
pub mod output;
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
