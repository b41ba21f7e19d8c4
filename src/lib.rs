//! viewerfleet: real headless Chrome viewers on a P2P video stream, measuring how much the
//! server sends over HTTP and how much the viewers share over P2P.
//!
//! The loop: scenario → fleet → viewers → target → samples → raw data → report.
//! Each part of that loop has one module here.

pub mod calibrate;
pub mod cli;
pub mod cloud;
mod commands;
pub mod engine;
pub mod fleet;
pub mod grid;
pub mod ladder;
pub mod metrics;
pub mod model;
pub mod netns;
pub mod refsite;
pub mod report;
pub mod suite;
pub mod sys;
pub mod target;
pub mod viewer;

use std::process::ExitCode;

/// Runs one command line. `main` only prints the error this returns.
pub fn run(cli: cli::Cli) -> anyhow::Result<ExitCode> {
    init_logging(cli.quiet);
    sys::hostinfo::raise_open_files_limit();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(commands::dispatch(cli.command, cli.quiet))
}

fn init_logging(quiet: bool) {
    use tracing_subscriber::EnvFilter;
    let default = if quiet { "warn" } else { "info" };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
