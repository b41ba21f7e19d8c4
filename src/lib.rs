//! viewerfleet: real headless Chrome viewers on a P2P video stream, measuring how much the
//! server sends over HTTP and how much the viewers share over P2P.
//!
//! The loop: scenario → fleet → viewers → target → samples → raw data → report.
//! Each part of that loop has one module here.

pub mod cli;
mod commands;

pub use viewerfleet_engine as engine;
pub use viewerfleet_engine::{calibrate, ladder, suite};
pub use viewerfleet_fleet::{cloud, fleet, grid, metrics, netns, target, viewer};
pub use viewerfleet_model as model;
pub use viewerfleet_refsite as refsite;
pub use viewerfleet_report as report;
pub use viewerfleet_stun as stun;
pub use viewerfleet_sys as sys;

use std::process::ExitCode;

/// Parses the command line (`args` with the program's name first). A usage error (a flag
/// or value clap refuses, a missing argument) prints clap's message and usage on stderr and
/// returns exit code 2 for `main` to end with; when the command line asks for `--json`,
/// stdout also gets the JSON envelope of the error (`outcome: bad-input`), so a script's
/// `jq` reads a typo as an error instead of failing on empty input. `--help` and
/// `--version` print as usual and return 0.
pub fn parse_cli<I, T>(args: I) -> Result<cli::Cli, ExitCode>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::{CommandFactory, Parser};
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    let err = match cli::Cli::try_parse_from(&args) {
        Ok(cli) => return Ok(cli),
        Err(err) => err,
    };
    // Flags after `--` are values, not flags.
    let flags = args.iter().skip(1).take_while(|a| *a != "--");
    if err.use_stderr() && flags.clone().any(|a| a == "--json") {
        let commands = cli::Cli::command();
        let command = flags
            .filter_map(|a| a.to_str())
            .find(|a| !a.starts_with('-'))
            .and_then(|name| commands.find_subcommand(name))
            .map_or("viewerfleet", |c| c.get_name())
            .to_string();
        let message = err.render().to_string();
        commands::output::json(&commands::json::usage_error(&command, &message));
    }
    let _ = err.print();
    Err(ExitCode::from(u8::try_from(err.exit_code()).unwrap_or(2)))
}

/// Runs one command line. `main` only prints the error this returns (with `print_error`).
/// A panic on the command's main path deletes the cloud runs it had not finished (their
/// reapers would, too) before it ends the command as an internal error.
pub fn run(cli: cli::Cli) -> anyhow::Result<ExitCode> {
    commands::output::guard_standard_streams();
    init_logging(cli.quiet);
    sys::hostinfo::raise_open_files_limit();
    // Cloud fleets made by this binary start their reaper as `<this binary> reaper`.
    if let Ok(me) = std::env::current_exe() {
        cloud::reaper::enable(me);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let exit = runtime.block_on(async {
        use futures::FutureExt;
        match std::panic::AssertUnwindSafe(commands::dispatch(cli.command, cli.quiet))
            .catch_unwind()
            .await
        {
            Ok(result) => result,
            Err(panic) => Err(after_panic(panic).await),
        }
    })?;
    Ok(ExitCode::from(exit.code()))
}

/// Tears down the cloud runs a panicking command left, and says so in its error.
async fn after_panic(panic: Box<dyn std::any::Any + Send>) -> anyhow::Error {
    let text = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into());
    let runs = cloud::reaper::after_panic().await;
    let torn = if runs.is_empty() {
        String::new()
    } else {
        format!("; cloud runs torn down: {}", runs.join("; "))
    };
    anyhow::anyhow!("internal error (a bug): {text}{torn}")
}

/// Prints `Error: …` on stderr and returns the exit code of the error's category (see
/// `model::exit` and README, "Exit codes": 2 bad input, 69 the outside world, 70 anything
/// else), except for an error that only says stdout's reader went away (`viewerfleet plan
/// … | head -1`): that ends quietly with 0, as the rest of the output was not wanted.
pub fn print_error(err: &anyhow::Error) -> ExitCode {
    if commands::output::is_closed_pipe_error(err) {
        return ExitCode::SUCCESS;
    }
    commands::output::err(format_args!("Error: {err:#}\n"));
    ExitCode::from(commands::exit_for(err).code())
}

pub use model::exit::Exit;

fn init_logging(quiet: bool) {
    use tracing_subscriber::EnvFilter;
    let default = if quiet { "warn" } else { "info" };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    use std::io::IsTerminal;
    let colour = log_colour(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

/// Whether log lines carry ANSI colour: only on a terminal (a pipe, a file or a CI log gets
/// plain text), and never when `NO_COLOR` is set to anything but the empty string
/// (<https://no-color.org>), a terminal included.
fn log_colour(stderr_is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    #[test]
    fn logs_are_coloured_only_on_a_terminal_and_never_under_no_color() {
        assert!(super::log_colour(true, None));
        assert!(!super::log_colour(false, None), "a pipe or a file");
        assert!(
            !super::log_colour(true, Some(OsStr::new("1"))),
            "NO_COLOR wins"
        );
        assert!(!super::log_colour(false, Some(OsStr::new("1"))));
        // An empty NO_COLOR is unset, as no-color.org defines it.
        assert!(super::log_colour(true, Some(OsStr::new(""))));
    }
}
