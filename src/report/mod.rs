//! Reports built from a run folder's raw data only: the seed's table, rates over time, QoE,
//! the honesty section; Markdown, HTML with SVG plots, JSON and CSV; comparisons of runs
//! and suites of runs.
//!
//! Pipeline: `load` (read the folder) → `traffic` + `rates` (counter deltas → bytes per bin)
//! → `table`, `qoe`, `honesty` (numbers) → `analysis` (one `RunReport`) → renderers
//! (`json`, `csv`, `markdown`, `html` + `svg`, behind `render::Renderer`). `compare` and
//! `suite` put several runs side by side.

pub mod analysis;
pub mod compare;
pub mod csv;
pub mod honesty;
pub mod html;
pub mod json;
pub mod load;
pub mod markdown;
pub mod model;
pub mod prose;
pub mod qoe;
pub mod rates;
pub mod render;
pub mod stats;
pub mod suite;
pub mod svg;
pub mod table;
pub mod traffic;

pub use compare::Comparison;
pub use model::{ReportSummary, RunReport};

use std::path::Path;
use std::process::ExitCode;

/// Builds the report of one run folder and writes its files into it.
pub fn build_and_write(run_dir: &Path) -> anyhow::Result<RunReport> {
    let run = load::RunData::load(run_dir)?;
    let report = analysis::build(&run);
    render::write_run(&report, run_dir)?;
    Ok(report)
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

/// `viewerfleet report`.
pub async fn cli_report(args: crate::cli::ReportArgs) -> anyhow::Result<ExitCode> {
    let report = build_and_write(&args.run_dir)?;
    print!("{}", render::run_text(&report));
    println!(
        "HTML report: {}",
        args.run_dir.join("report.html").display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `viewerfleet compare`.
pub async fn cli_compare(args: crate::cli::CompareArgs) -> anyhow::Result<ExitCode> {
    let out = args.out.clone().unwrap_or_else(|| ".".into());
    let cmp = compare::compare_dirs(&args.run_dirs, args.group);
    if cmp.groups.is_empty() {
        for f in &cmp.failed {
            eprintln!("{}: {}", f.dir, f.error);
        }
        anyhow::bail!(
            "none of the {} run folders could be read",
            args.run_dirs.len()
        );
    }
    render::write_compare(&cmp, &out)?;
    print!("{}", comparison_text(&cmp));
    println!("HTML comparison: {}", out.join("compare.html").display());
    Ok(if cmp.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `viewerfleet suite`.
pub async fn cli_suite(args: crate::cli::SuiteArgs) -> anyhow::Result<ExitCode> {
    suite::cli_suite(args).await
}
