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
mod fidelity;
mod gc;
mod grid;
pub mod json;
mod ladder;
pub mod output;
mod overrides;
mod plan;
mod reaper;
mod refsite;
mod report;
mod run;
mod suite;
mod up;
mod validate;

use crate::cli::Command;
use crate::model::exit::{self, Exit};

/// What a command ended with: its exit, and under `--json` its figures.
pub struct Done {
    pub exit: Exit,
    pub figures: Option<serde_json::Value>,
}

impl From<Exit> for Done {
    fn from(exit: Exit) -> Self {
        Done {
            exit,
            figures: None,
        }
    }
}

/// The name of `command` when it was given `--json` (see `json`).
fn json_command(command: &Command) -> Option<&'static str> {
    let (name, json) = match command {
        Command::Run(a) => ("run", a.stdout.json),
        Command::Suite(a) => ("suite", a.stdout.json),
        Command::Compare(a) => ("compare", a.stdout.json),
        Command::Plan(a) => ("plan", a.stdout.json),
        Command::Calibrate(a) => ("calibrate", a.stdout.json),
        Command::Fidelity(a) => ("fidelity", a.stdout.json),
        Command::Report(a) => ("report", a.stdout.json),
        Command::Validate(a) => ("validate", a.stdout.json),
        Command::Ladder(a) => ("ladder", a.stdout.json),
        Command::Up(a) => ("up", a.stdout.json),
        Command::Down(a) => ("down", a.stdout.json),
        Command::Gc(a) => ("gc", a.stdout.json),
        Command::Grid(a) => ("grid", a.stdout.json),
        Command::Refsite(a) => ("refsite", a.stdout.json),
        // Internal: started by the cloud commands, its stderr is its log.
        Command::Reaper(_) => return None,
    };
    json.then_some(name)
}

/// Runs one subcommand. Under `--json`, its document goes to stdout (also when it ends on
/// an error, which `main` then prints on stderr as usual); every command but the hidden
/// `reaper` has `--json`.
pub async fn dispatch(command: Command, quiet: bool) -> anyhow::Result<Exit> {
    let json = json_command(&command);
    if json.is_some() {
        output::text_to_stderr();
    }
    let result: anyhow::Result<Done> = match command {
        Command::Run(args) => run::run(args, quiet).await,
        Command::Refsite(args) => refsite::run(args).await,
        Command::Report(args) => report::run(args).await,
        Command::Compare(args) => compare::run(args).await,
        Command::Suite(args) => suite::run(args, quiet).await,
        Command::Gc(args) => gc::run(args).await,
        Command::Plan(args) => plan::run(args).await,
        Command::Up(args) => up::run(args).await,
        Command::Down(args) => down::run(args).await,
        Command::Validate(args) => validate::run(args).await,
        Command::Grid(args) => grid::run(args).await,
        Command::Ladder(args) => ladder::run(args, quiet).await,
        Command::Calibrate(args) => calibrate::run(args).await,
        Command::Fidelity(args) => fidelity::run(args, quiet).await,
        Command::Reaper(args) => reaper::run(args).await.map(Done::from),
    };
    // `refsite` prints its document as soon as it listens: one document, never two.
    if let Some(name) = json.filter(|_| !output::json_written()) {
        let text = match &result {
            Ok(done) => json::document(name, done.exit, done.figures.clone(), None),
            Err(err) => json::document(name, exit_for(err), None, Some(format!("{err:#}"))),
        };
        output::json(&text);
    }
    result.map(|done| done.exit)
}

/// The run engine for commands that run several scenarios (`suite`, `fidelity`), with the
/// stop signal it shares: Ctrl-C or SIGTERM ends the current run and the command alike.
pub fn engine_runner(
    quiet: bool,
    yes: bool,
) -> anyhow::Result<(crate::sys::shutdown::Shutdown, crate::suite::EngineRunner)> {
    let shutdown = crate::sys::shutdown::Shutdown::new();
    shutdown.listen_for_signals()?;
    let runner = crate::suite::EngineRunner {
        shutdown: shutdown.clone(),
        progress: !quiet,
        confirm_paid: confirm_paid(yes),
    };
    Ok((shutdown, runner))
}

/// What asks before a cloud fleet's servers are bought: nothing with `--yes`; else a prompt
/// on a terminal, and a refusal where nobody can answer (stdin not a terminal).
pub fn confirm_paid(yes: bool) -> Option<crate::cloud::up::Confirm> {
    if yes {
        return None;
    }
    Some(crate::cloud::up::Confirm(std::sync::Arc::new(
        |what: &str| {
            use std::io::{BufRead, IsTerminal, Write};
            if !std::io::stdin().is_terminal() {
                output::err(format_args!(
                "viewerfleet is about to create {what}; nobody can confirm it here (stdin is not a terminal)\n"
            ));
                return false;
            }
            output::err(format_args!(
                "viewerfleet is about to create {what}.\nCreate them? [y/N] "
            ));
            let _ = std::io::stderr().flush();
            let mut answer = String::new();
            let _ = std::io::stdin().lock().read_line(&mut answer);
            matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
        },
    )))
}

/// The exit category of an error that reached the top: the first marker found from the
/// outermost cause inwards (see `model::exit`); `Internal` when none says otherwise.
pub fn exit_for(err: &anyhow::Error) -> Exit {
    use crate::cloud::CloudError;
    for cause in err.chain() {
        if cause.downcast_ref::<exit::Unavailable>().is_some() {
            return Exit::Unavailable;
        }
        if cause.downcast_ref::<exit::BadInput>().is_some()
            || cause
                .downcast_ref::<crate::model::scenario::ScenarioError>()
                .is_some()
            || cause.downcast_ref::<crate::report::LoadError>().is_some()
            || cause.downcast_ref::<crate::suite::SuiteError>().is_some()
        {
            return Exit::BadInput;
        }
        if let Some(cloud) = cause.downcast_ref::<CloudError>() {
            return match cloud {
                CloudError::NoToken
                | CloudError::TokenFile { .. }
                | CloudError::Unauthorized
                | CloudError::Invalid { .. }
                | CloudError::NotConfirmed { .. } => Exit::BadInput,
                // The API refused what was asked (a location or type it does not know, a
                // quota): the request is the input; 408/409/423/429 are the service's state.
                CloudError::Api { status, .. }
                    if (400..500).contains(status) && ![408, 409, 423, 429].contains(status) =>
                {
                    Exit::BadInput
                }
                CloudError::Cancelled => Exit::Interrupted { sigterm: false },
                CloudError::Panicked(_) | CloudError::NoReaper(_) => Exit::Internal,
                _ => Exit::Unavailable,
            };
        }
    }
    Exit::Internal
}
