//! State shared by the tasks of one run: the recorder, live figures for progress and the
//! summary, the controller's metrics, and the run's end signal. The report is built from
//! raw files, never from this.

use super::browsers::Browsers;
use super::recorder::RecorderHandle;
use crate::fleet::Fleet;
use crate::metrics::controller::ControllerMetrics;
use crate::model::rawdata::{ExporterSample, ViewerEventKind, ViewerSample};
use crate::target::Target;
use crate::viewer::{BrowserSetup, ViewerTimeouts};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

#[derive(Default)]
pub(super) struct LiveState {
    pub latest: HashMap<u32, ViewerSample>,
    pub states: HashMap<u32, ViewerEventKind>,
    pub failures: Vec<(u32, String)>,
    pub max_peers: u32,
    pub first_exporter: Option<ExporterSample>,
    pub last_exporter: Option<ExporterSample>,
    /// A headroom-governed ramp: viewers released so far, and where it settled.
    pub released: Option<u32>,
    pub settled: Option<super::governor::Settled>,
}

impl LiveState {
    pub fn count(&self, kind: ViewerEventKind) -> usize {
        self.states.values().filter(|k| **k == kind).count()
    }

    /// Viewers whose last event so far is `failed` or `lost` (the progress line).
    pub(crate) fn ended_badly(&self) -> usize {
        self.count(ViewerEventKind::Failed) + self.count(ViewerEventKind::Lost)
    }

    /// Viewers that failed (never-started ones included) or were lost, plus those of the
    /// `requested` that left no event at all: every requested viewer is accounted for.
    pub(crate) fn failed_or_lost(&self, requested: u32) -> usize {
        let silent = (requested as usize).saturating_sub(self.states.len());
        self.ended_badly() + silent
    }

    /// What the run asked for: every viewer of the plan, or what a governed ramp released.
    pub fn requested(&self, plan_viewers: u32) -> u32 {
        self.released.unwrap_or(plan_viewers)
    }
}

pub(super) struct Shared {
    pub rec: RecorderHandle,
    live: Mutex<LiveState>,
    pub metrics: ControllerMetrics,
    /// Cancelled when the run's duration is over or a stop was requested.
    pub run_end: CancellationToken,
    /// Cancelled when a threshold with `abort_on_fail` failed while the run went: the
    /// timeline ends early (`engine::abort`).
    pub abort: CancellationToken,
    /// Why the run was ended early, for the manifest and the summary.
    pub aborted: Mutex<Option<String>>,
    pub fleet: Arc<dyn Fleet>,
    pub target: Arc<dyn Target>,
    pub sampling_interval: Duration,
    pub timeouts: ViewerTimeouts,
    /// How every browser of the run is started (the plan's set-up).
    pub browser: BrowserSetup,
    /// Bounds concurrent session creations (drivers and Grids choke on bursts).
    pub starts: Semaphore,
    /// The shared browsers, with several viewers per browser; `None`: one each.
    pub browsers: Option<Browsers>,
    /// The plan's network classes (`viewers.networks`), for each viewer's network record.
    pub networks: Vec<crate::model::scenario::networks::NetworkClass>,
    /// `viewers.churn`: how long each viewer watches, whether leavers are replaced.
    pub churn: Option<crate::model::scenario::churn::ChurnPlan>,
    /// The index the next replacement viewer gets (after the plan's viewers).
    pub next_viewer: std::sync::atomic::AtomicU32,
}

impl Shared {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        rec: RecorderHandle,
        metrics: ControllerMetrics,
        fleet: Arc<dyn Fleet>,
        target: Arc<dyn Target>,
        sampling_interval: Duration,
        timeouts: ViewerTimeouts,
        browser: BrowserSetup,
        max_parallel_starts: usize,
        browsers: Option<Browsers>,
    ) -> Self {
        Self {
            rec,
            live: Mutex::default(),
            metrics,
            run_end: CancellationToken::new(),
            abort: CancellationToken::new(),
            aborted: Mutex::default(),
            fleet,
            target,
            sampling_interval,
            timeouts,
            browser,
            starts: Semaphore::new(max_parallel_starts.max(1)),
            browsers,
            networks: Vec::new(),
            churn: None,
            next_viewer: std::sync::atomic::AtomicU32::new(0),
        }
    }

    /// `viewers.churn`; replacements are numbered from `viewers` on.
    pub(crate) fn with_churn(
        mut self,
        churn: Option<crate::model::scenario::churn::ChurnPlan>,
        viewers: u32,
    ) -> Self {
        self.churn = churn;
        self.next_viewer = std::sync::atomic::AtomicU32::new(viewers);
        self
    }

    /// The plan's network classes (`viewers.networks`).
    pub(crate) fn with_networks(
        mut self,
        networks: Vec<crate::model::scenario::networks::NetworkClass>,
    ) -> Self {
        self.networks = networks;
        self
    }

    pub fn live(&self) -> MutexGuard<'_, LiveState> {
        // A panic while holding this lock is a bug; keep going with the data as it is.
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }
}
