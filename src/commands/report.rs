//! `viewerfleet report`: builds a run's report from its raw data, and judges the
//! scenario's thresholds again (exit code 99 when one fails, as `run` gave).

use super::Done;
use crate::cli::ReportArgs;
use crate::model::exit::Exit;

pub async fn run(args: ReportArgs) -> anyhow::Result<Done> {
    let report = crate::report::build_and_write(&args.run_dir)?;
    print!("{}", crate::report::render::run_text(&report));
    println!(
        "HTML report: {}",
        args.run_dir.join("report.html").display()
    );
    let exit = if report.summary.thresholds_failed() {
        Exit::ThresholdsFailed
    } else {
        Exit::Ok
    };
    Ok(Done {
        exit,
        figures: args
            .json
            .then(|| super::json::report(&args.run_dir, &report.summary)),
    })
}
