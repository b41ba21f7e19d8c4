//! The run engine: takes a `Plan`, starts the target and the fleet, brings viewers up along
//! the ramp, samples players, exporter and host, appends raw data as it arrives, and
//! releases everything on every exit path (success, error, Ctrl-C, SIGTERM).

mod browsers;
mod manifest;
mod node_sampler;
mod progress;
mod recorder;
mod run;
mod samplers;
mod shared;
mod viewer_task;

use crate::model::scenario::{self, Overrides};
use crate::sys::shutdown::Shutdown;
use std::path::{Path, PathBuf};

/// How a run ended, for `suite` and the exit code.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub run_dir: PathBuf,
    /// False when viewers failed beyond the threshold, the target never answered, or the
    /// run was interrupted.
    pub ok: bool,
    pub interrupted: bool,
    /// 0 ok; 1 too many failed viewers; 130/143 interrupted by SIGINT/SIGTERM.
    pub exit_code: u8,
    /// Short summary printed at the end.
    pub summary: String,
}

/// How a run is carried out, beyond its scenario.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Show progress on stderr.
    pub progress: bool,
    /// Serve the controller's metrics here during the run (loopback only).
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Build the report from raw data at the end.
    pub write_report: bool,
    /// Cloud fleets: leave the servers running (delete them later with `viewerfleet down`).
    pub keep: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            progress: true,
            metrics_listen: None,
            write_report: true,
            keep: false,
        }
    }
}

/// Runs one scenario into `out` (created; must be empty or absent): the one scenario
/// runner of `run`, `suite` and `ladder`. Stops at `shutdown` (the caller listens for
/// signals, so a suite or ladder stops at the run it is in).
pub async fn run_scenario(
    scenario: &Path,
    out: &Path,
    overrides: &Overrides,
    shutdown: Shutdown,
    options: RunOptions,
) -> anyhow::Result<RunOutcome> {
    let plan = scenario::load(scenario, overrides)?;
    let ctx = run::RunContext {
        out: out.to_path_buf(),
        rerun_command: rerun_command(scenario, out, overrides),
        shutdown,
        progress: options.progress,
        metrics_listen: options.metrics_listen,
        metrics: crate::metrics::controller::ControllerMetrics::new(),
        keep: options.keep,
        write_report: options.write_report,
    };
    tracing::info!("run {}: {}", plan.name, plan.summary_line());
    run::execute(plan, ctx).await
}

/// The command that re-runs this run, as written into the manifest.
fn rerun_command(scenario: &Path, out: &Path, overrides: &Overrides) -> Vec<String> {
    let mut cmd = vec![
        "viewerfleet".to_string(),
        "run".to_string(),
        scenario.display().to_string(),
        "--out".to_string(),
        format!("{}-rerun", out.display()),
    ];
    cmd.extend(overrides.flags());
    cmd
}
