//! Reports built from a run folder's raw data only: the seed's table, rates over time, QoE,
//! the honesty section; Markdown, HTML with SVG plots, JSON and CSV; comparisons of runs
//! and suites of runs.
//!
//! Pipeline: `load` (read the folder) → `traffic` + `rates` (counter deltas → bytes per bin)
//! → `table`, `qoe`, `headroom`, `honesty`, `light` (numbers) → `thresholds` (the scenario's
//! conditions judged on those numbers) → `analysis` (one `RunReport`) → renderers
//! (`json`, `csv`, `markdown`, `html` + `svg`, behind `render::Renderer`). `compare` and
//! `suite` put several runs side by side; `swarm_curve` draws a suite's P2P offload against
//! swarm size (`suite --swarm-sizes`).

mod analysis;
pub(crate) mod arrival;
pub(crate) mod churn;
pub mod compare;
pub mod connectivity;
pub mod cost;
mod csv;
pub mod format;
pub(crate) mod headroom;
pub mod honesty;
mod html;
mod json;
pub mod light;
mod load;
mod markdown;
mod plausibility;
mod prose;
mod qoe;
mod rates;
mod reconcile;
pub mod render;
pub mod sections;
pub mod stats;
mod summary;
mod svg;
pub mod swarm_curve;
mod table;
pub mod text_table;
pub mod thresholds;
mod traffic;

use viewerfleet_model as model;

pub(crate) use compare::Comparison;
pub use load::{LoadError, RunData};
pub use summary::{
    Headroom, HeadroomVerdict, ReportSummary, RunReport, SourceTable, ViewerHeadroom,
    ViewerHeadroomStatus,
};

use std::path::Path;

/// Builds the report of one run folder and writes its files into it.
pub fn build_and_write(run_dir: &Path) -> anyhow::Result<RunReport> {
    let run = load::RunData::load(run_dir)?;
    let report = analysis::build(&run);
    render::write_run(&report, run_dir)?;
    Ok(report)
}

/// Builds the report of one run folder without writing anything (to judge its thresholds
/// when the run writes no report).
pub fn build(run_dir: &Path) -> anyhow::Result<RunReport> {
    let run = load::RunData::load(run_dir)?;
    Ok(analysis::build(&run))
}

/// Judges `thresholds` (given on the command line) in place of those the run's manifest
/// froze: the command line wins over the manifest.
pub fn rejudge(report: &mut RunReport, thresholds: &[crate::model::scenario::ThresholdText]) {
    report.summary.thresholds = thresholds::evaluate(thresholds, &report.summary);
}

/// The thresholds of every `--thresholds` argument, in order (`bad input` on an error).
pub fn thresholds_from_cli(
    args: &[String],
) -> anyhow::Result<Option<Vec<crate::model::scenario::ThresholdText>>> {
    if args.is_empty() {
        return Ok(None);
    }
    let mut out = Vec::new();
    for arg in args {
        out.extend(
            crate::model::scenario::thresholds::parse_cli(arg)
                .map_err(|e| crate::model::exit::bad_input(anyhow::anyhow!(e)))?,
        );
    }
    Ok(Some(out))
}

/// Builds `report.{json,md,html}` and the CSV files in `run_dir` from its raw data (the run
/// engine calls this at the end of every run; `viewerfleet report` calls it any time later).
pub fn write_report(run_dir: &Path) -> anyhow::Result<ReportSummary> {
    Ok(build_and_write(run_dir)?.summary)
}

/// The comparison table as plain text, for the terminal.
pub fn comparison_text(cmp: &Comparison) -> String {
    cmp.text()
}
