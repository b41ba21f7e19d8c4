//! Thin entry point: parse the command line, hand it to the library, print errors.
use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = viewerfleet::cli::Cli::parse();
    match viewerfleet::run(cli) {
        Ok(code) => code,
        Err(err) => viewerfleet::print_error(&err),
    }
}
