//! The run engine: takes a `Plan`, starts the target and the fleet, brings viewers up along
//! the ramp, samples players, exporter and host, appends raw data, and releases everything
//! on every exit path.

use crate::scenario::Overrides;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// How a run ended, for `suite` and the exit code.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub run_dir: PathBuf,
    /// False when viewers failed beyond the threshold, the target never answered, or the
    /// run was interrupted.
    pub ok: bool,
    pub interrupted: bool,
    /// One-paragraph summary printed at the end.
    pub summary: String,
}

/// Runs one scenario into `out` (created; must be empty or absent).
pub async fn run_scenario(
    _scenario: &Path,
    _out: &Path,
    _overrides: &Overrides,
) -> anyhow::Result<RunOutcome> {
    anyhow::bail!("`viewerfleet run` is not available yet")
}

/// `viewerfleet run`.
pub async fn cli_run(_args: crate::cli::RunArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`viewerfleet run` is not available yet")
}

/// `viewerfleet gc`.
pub async fn cli_gc(_args: crate::cli::GcArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`viewerfleet gc` is not available yet")
}
