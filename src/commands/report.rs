//! `viewerfleet report`: builds a run's report from its raw data.

use crate::cli::ReportArgs;
use std::process::ExitCode;

pub async fn run(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let report = crate::report::build_and_write(&args.run_dir)?;
    print!("{}", crate::report::render::run_text(&report));
    println!(
        "HTML report: {}",
        args.run_dir.join("report.html").display()
    );
    Ok(ExitCode::SUCCESS)
}
