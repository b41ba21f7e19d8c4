//! viewerfleet: real headless Chrome viewers on a P2P video stream, measuring how much the
//! server sends over HTTP and how much the viewers share over P2P.
//!
//! The loop: scenario → fleet → viewers → target → samples → raw data → report.
//! Each part of that loop has one module here.

pub mod bench;
pub mod calibrate;
pub mod cli;
pub mod cloud;
pub mod engine;
pub mod fleet;
pub mod gridlocal;
pub mod hostinfo;
pub mod ladder;
pub mod metrics;
pub mod netns;
pub mod rawdata;
pub mod refsite;
pub mod report;
pub mod scenario;
pub mod shutdown;
pub mod target;
pub mod viewer;

use std::process::ExitCode;

/// Runs one command line. `main` only prints the error this returns.
pub fn run(cli: cli::Cli) -> anyhow::Result<ExitCode> {
    init_logging(cli.quiet);
    hostinfo::raise_open_files_limit();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(dispatch(cli.command, cli.quiet))
}

async fn dispatch(command: cli::Command, quiet: bool) -> anyhow::Result<ExitCode> {
    use cli::Command;
    match command {
        Command::Run(args) => engine::cli_run(args, quiet).await,
        Command::Refsite(args) => refsite::cli_refsite(args).await,
        Command::Report(args) => report::cli_report(args).await,
        Command::Compare(args) => report::cli_compare(args).await,
        Command::Suite(args) => report::cli_suite(args, quiet).await,
        Command::Gc(args) => {
            if !args.local {
                cloud::gc_hcloud(&args).await?;
            }
            engine::cli_gc(args).await
        }
        Command::Plan(args) => cloud::cli_plan(args).await,
        Command::Up(args) => cloud::cli_up(args).await,
        Command::Down(args) => cloud::cli_down(args).await,
        Command::FakeHcloud(args) => cloud::cli_fake(args).await,
        Command::Validate(args) => scenario::cli_validate(args),
        Command::Grid(args) => gridlocal::cli_grid(args).await,
        Command::Ladder(args) => ladder::cli_ladder(args).await,
        Command::Calibrate(args) => calibrate::cli_calibrate(args).await,
        Command::StubWebdriver(args) => bench::cli_stub_webdriver(args).await,
    }
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
