//! Thin entry point: parse the command line, hand it to the library, print errors.
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match viewerfleet::parse_cli(std::env::args_os()) {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    match viewerfleet::run(cli) {
        Ok(code) => code,
        Err(err) => viewerfleet::print_error(&err),
    }
}
