//! The run engine: takes a `Plan`, starts the target and the fleet, brings viewers up along
//! the ramp, samples players, exporter and host, appends raw data as it arrives, and
//! releases everything on every exit path (success, error, Ctrl-C, SIGTERM).

mod abort;
mod browsers;
pub mod canary;
mod governor;
mod light_inject;
mod light_task;
mod manifest;
mod node_sampler;
mod progress;
mod recorder;
mod run;
mod samplers;
mod shared;
mod viewer_task;

pub mod calibrate;
pub mod ladder;
pub mod suite;

use viewerfleet_fleet::{cloud, fleet, grid, metrics, netns, target, viewer};
use viewerfleet_model as model;
use viewerfleet_refsite as refsite;
use viewerfleet_report as report;
use viewerfleet_sys as sys;

use crate::model::scenario::{Overrides, Plan};
use crate::sys::shutdown::Shutdown;
use std::path::{Path, PathBuf};

/// How a run ended, for `suite` and the exit code.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub run_dir: PathBuf,
    /// False when viewers failed beyond `max_failed_viewers`, a threshold failed, or the
    /// run was interrupted.
    pub ok: bool,
    pub interrupted: bool,
    /// 0 ok; 1 too many failed viewers; 99 a threshold failed; 130/143 interrupted by
    /// SIGINT/SIGTERM (`crate::model::exit::Exit`).
    pub exit_code: u8,
    /// Short summary printed at the end.
    pub summary: String,
    /// With `viewers.count: auto`: the viewers the governed ramp settled on.
    pub settled_viewers: Option<u32>,
    /// With `viewers.count: auto`: the most viewers it measured below its limit (one step
    /// fewer than `settled_viewers` when the last step took the host over it).
    pub fitting_viewers: Option<u32>,
    /// The run's report (`report.json`), when one was built: its figures and thresholds.
    pub report: Option<crate::report::ReportSummary>,
}

/// How a run is carried out, beyond its scenario.
#[derive(Clone)]
pub struct RunOptions {
    /// Show progress on stderr.
    pub progress: bool,
    /// Serve the controller's metrics here during the run (loopback only).
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Build the report from raw data at the end.
    pub write_report: bool,
    /// Cloud fleets: leave the servers running (delete them later with `viewerfleet down`).
    pub keep: bool,
    /// Cloud fleets: asked before servers are bought (`None`: go ahead, as `--yes`).
    pub confirm_paid: Option<crate::cloud::up::Confirm>,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            progress: true,
            metrics_listen: None,
            write_report: true,
            keep: false,
            confirm_paid: None,
        }
    }
}

/// Where a run's plan came from: what the manifest's re-run command is made of.
#[derive(Debug, Clone)]
pub enum RunSource {
    /// A scenario file and the command-line overrides applied to it (`run`, `suite`,
    /// `ladder`): re-run with `viewerfleet run FILE --out OUT-rerun FLAGS…`.
    Scenario { path: PathBuf, overrides: Overrides },
    /// The command, word by word, that makes exactly this run again (one measurement of
    /// `calibrate`, whose browser profile a scenario file cannot name).
    Command(Vec<String>),
}

impl RunSource {
    /// A scenario file run with `overrides`.
    pub fn scenario(path: &Path, overrides: &Overrides) -> Self {
        RunSource::Scenario {
            path: path.to_path_buf(),
            overrides: overrides.clone(),
        }
    }

    /// The command that re-runs a run written into `out`, as the manifest records it: a
    /// scenario's run goes to a new folder beside `out`.
    pub fn rerun_command(&self, out: &Path) -> Vec<String> {
        match self {
            RunSource::Scenario { path, overrides } => {
                let mut cmd = vec![
                    "viewerfleet".to_string(),
                    "run".to_string(),
                    path.display().to_string(),
                    "--out".to_string(),
                    format!("{}-rerun", out.display()),
                ];
                cmd.extend(overrides.flags());
                cmd
            }
            RunSource::Command(words) => words.clone(),
        }
    }
}

/// Runs one validated plan into `out` (created; must be empty or absent): the one scenario
/// runner of `run`, `suite`, `ladder` and `calibrate`. `source` says where the plan came
/// from, for the manifest's re-run command. Stops at `shutdown` (the caller listens for
/// signals, so a suite, ladder or calibration stops at the run it is in).
pub async fn run_scenario(
    plan: Plan,
    source: &RunSource,
    out: &Path,
    shutdown: Shutdown,
    options: RunOptions,
) -> anyhow::Result<RunOutcome> {
    let ctx = run::RunContext {
        out: out.to_path_buf(),
        rerun_command: source.rerun_command(out),
        shutdown,
        progress: options.progress,
        metrics_listen: options.metrics_listen,
        metrics: crate::metrics::controller::ControllerMetrics::new(
            &crate::metrics::controller::run_label(out),
        ),
        keep: options.keep,
        write_report: options.write_report,
        confirm_paid: options.confirm_paid,
    };
    // A cloud fleet's reaper writes what it did next to this run's data: each run of a
    // suite, ladder or calibration in its own folder.
    crate::cloud::reaper::log_into(out);
    tracing::info!("run {}: {}", plan.name, plan.summary_line());
    run::execute(plan, ctx).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scenarios_rerun_command_names_its_file_a_new_folder_and_the_overrides() {
        let overrides = Overrides {
            viewers: crate::model::scenario::ViewersOverride::Fixed(8),
            duration: Some(std::time::Duration::from_secs(90)),
            ..Default::default()
        };
        let source = RunSource::scenario(Path::new("scenarios/a.yaml"), &overrides);
        assert_eq!(
            source.rerun_command(Path::new("runs/a")),
            [
                "viewerfleet",
                "run",
                "scenarios/a.yaml",
                "--out",
                "runs/a-rerun",
                "--viewers",
                "8",
                "--duration",
                "1m30s"
            ]
        );
        let words = vec!["viewerfleet".to_string(), "calibrate".to_string()];
        assert_eq!(
            RunSource::Command(words.clone()).rerun_command(Path::new("x")),
            words
        );
    }
}
