//! Reports built from a run folder's raw data only: the seed's table, rates over time, QoE,
//! the honesty section; Markdown, HTML with SVG plots, JSON and CSV; comparisons of runs.

use std::process::ExitCode;

/// `viewerfleet report`.
pub async fn cli_report(_args: crate::cli::ReportArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`viewerfleet report` is not available yet")
}

/// `viewerfleet compare`.
pub async fn cli_compare(_args: crate::cli::CompareArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`viewerfleet compare` is not available yet")
}

/// `viewerfleet suite`.
pub async fn cli_suite(_args: crate::cli::SuiteArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`viewerfleet suite` is not available yet")
}
