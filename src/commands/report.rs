//! `viewerfleet report`: builds a run's report from its raw data, and judges the
//! scenario's thresholds again (exit code 99 when one fails, as `run` gave).

use crate::cli::ReportArgs;
use crate::model::exit::Exit;

pub async fn run(args: ReportArgs) -> anyhow::Result<Exit> {
    let report = crate::report::build_and_write(&args.run_dir)?;
    print!("{}", crate::report::render::run_text(&report));
    println!(
        "HTML report: {}",
        args.run_dir.join("report.html").display()
    );
    Ok(if report.summary.thresholds_failed() {
        Exit::ThresholdsFailed
    } else {
        Exit::Ok
    })
}
