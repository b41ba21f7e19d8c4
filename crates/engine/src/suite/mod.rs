//! `viewerfleet suite`: runs several scenarios in sequence (each `--repeat K` times, round
//! robin so slow drifts of the host spread over all scenarios), keeps going after a failed
//! run, stops starting runs on Ctrl-C/SIGTERM (the engine ends the current one and says
//! `interrupted`), then compares what finished: mean and 95% CI per scenario with repeats.
//! With `--swarm-sizes` (`sizes`), every scenario runs once per swarm size and the
//! comparison draws P2P offload against swarm size.

mod kept_sizes;
mod plan;
mod run;
mod sweep;

pub use kept_sizes::{SwarmSize, SwarmSizeError, SwarmSizes};
pub use plan::{RunRepeat, SuitePlan, SuiteRun, SuiteScenario};
pub use run::run_suite;
pub use sweep::{SweepError, SweepSizes};

use crate::report::compare::Comparison;
use crate::sys::shutdown::Shutdown;
use crate::{RunOutcome, RunSource};
use std::path::PathBuf;

/// Runs one validated plan into a folder: the engine, or a stand-in in tests.
#[async_trait::async_trait]
pub trait ScenarioRunner: Send + Sync {
    async fn run(&self, run: &SuiteRun) -> anyhow::Result<RunOutcome>;
}

/// The real run engine, sharing the suite's stop signal so Ctrl-C ends the current run and
/// the suite alike.
pub struct EngineRunner {
    pub shutdown: Shutdown,
    pub progress: bool,
    /// Cloud fleets: asked before servers are bought (`None`: go ahead).
    pub confirm_paid: Option<crate::cloud::up::Confirm>,
}

#[async_trait::async_trait]
impl ScenarioRunner for EngineRunner {
    async fn run(&self, run: &SuiteRun) -> anyhow::Result<RunOutcome> {
        crate::run_scenario(
            run.plan.clone(),
            &RunSource::scenario(&run.path, &run.overrides),
            &run.dir,
            self.shutdown.clone(),
            crate::RunOptions {
                progress: self.progress,
                confirm_paid: self.confirm_paid.clone(),
                ..crate::RunOptions::default()
            },
        )
        .await
    }
}
/// What a suite did.
#[derive(Debug)]
pub struct SuiteResult {
    pub comparison: Comparison,
    pub interrupted: bool,
    pub runs_started: usize,
    pub html: PathBuf,
    /// Run folders whose run ended with more failed viewers than `max_failed_viewers`
    /// allows (compared with the others, and the reason the suite exits 1).
    pub over_failure_limit: Vec<String>,
}

impl SuiteResult {
    /// Names of the compared runs at least one of whose thresholds failed.
    pub fn thresholds_failed(&self) -> Vec<String> {
        self.comparison
            .groups
            .iter()
            .flat_map(|g| &g.runs)
            .filter(|r| r.summary.thresholds_failed())
            .map(|r| r.name.clone())
            .collect()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    #[error("--repeat must be at least 1")]
    Repeat,
    #[error("two scenarios are named `{0}` (run folders are named after the file stem): rename one of the files")]
    DuplicateName(String),
    #[error("{0}: already holds files; give `suite --out` a new or empty folder so no earlier run is mixed in")]
    OutNotEmpty(PathBuf),
    #[error("--repeat-run {name}=…: no run of this suite is named `{name}`; its runs are {known} (or give a file stem for all its modes and sizes)")]
    UnknownRun { name: String, known: String },
    #[error(transparent)]
    Sweep(#[from] SweepError),
}
#[cfg(test)]
mod tests;
