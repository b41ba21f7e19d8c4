//! The canary measurement of a cloud fleet (`cloud::canary`), done the way every viewer
//! cost is measured: a run of this engine. The scenario's own target, video, network and
//! browser set-up play on the canary node through its hub, all viewers at once; the
//! timeline starts when every viewer has played, then a warm-up and the window. The node's
//! load endpoint, read before the first viewer and sampled by the run, says what the
//! viewers added; the run's folder keeps everything for the report and for re-reading.

use super::{run_scenario, RunOptions, RunSource};
use crate::cloud::canary::{CanaryCost, CanaryProbe, CANARY_BUSY_LIMIT};
use crate::fleet::grid::GridFleet;
use crate::fleet::Fleet;
use crate::grid::load::{self, NodeLoadMeter};
use crate::model::scenario::fleet::{FleetPlan, GridFleetPlan};
use crate::model::scenario::{Plan, RunClock};
use crate::report::cost::{self, Window};
use crate::report::RunData;
use crate::sys::shutdown::Shutdown;
use anyhow::Context;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The longest the canary's viewers may take to play their first frame.
const STARTUP_LIMIT: Duration = Duration::from_secs(240);
/// The node's load before any viewer is read over this long.
const IDLE_WINDOW: Duration = Duration::from_secs(5);

/// How long the canary plays.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct CanaryTiming {
    /// After the last viewer's first frame, before the window.
    pub warmup: Duration,
    pub window: Duration,
}

/// The engine as a `CanaryProbe`: `plan` is the scenario, `dir` the canary's run folder.
pub(crate) struct EngineCanary {
    pub plan: Plan,
    pub dir: PathBuf,
    pub timing: CanaryTiming,
    pub shutdown: Shutdown,
}

/// The canary's plan: the scenario on the hub's only node, every viewer at once, a
/// timeline from the last first frame through the warm-up to the end of the window.
pub(crate) fn canary_plan(
    base: &Plan,
    grid: GridFleetPlan,
    viewers: u32,
    timing: CanaryTiming,
) -> Plan {
    let mut plan = base.clone();
    plan.name = format!("{}-canary", base.name);
    plan.viewers = viewers;
    plan.auto = None;
    plan.ramp = Duration::ZERO;
    plan.clock = RunClock::FromEveryFirstFrame {
        limit: STARTUP_LIMIT,
    };
    let mut grid = grid;
    grid.max_parallel_starts = viewers.div_ceil(plan.per_browser.max(1)).max(1) as usize;
    plan.fleet = FleetPlan::Grid(grid);
    plan.sampling_interval = plan
        .sampling_interval
        .min(timing.window / 4)
        .max(Duration::from_secs(1));
    plan.measure_at = timing.warmup + timing.window;
    plan.steady_window = timing.window;
    plan.duration = plan.measure_at + plan.sampling_interval * 2;
    plan.max_failed_viewers = viewers;
    plan.yaml.push_str(&format!(
        "# canary: {viewers} viewers at once on the canary node of a cloud fleet, measured over {} after {} of warm-up once every viewer played\n",
        humantime::format_duration(timing.window),
        humantime::format_duration(timing.warmup),
    ));
    plan
}

/// The probe a plan's cloud fleet measures its canary with, when `fleet.canary` asks for
/// one: the run lands in `dir`.
pub fn for_plan(
    plan: &Plan,
    dir: &std::path::Path,
    shutdown: &Shutdown,
) -> Option<std::sync::Arc<dyn CanaryProbe>> {
    let FleetPlan::Hcloud(spec) = &plan.fleet else {
        return None;
    };
    let (warmup, window) = spec.canary()?;
    Some(std::sync::Arc::new(EngineCanary {
        plan: plan.clone(),
        dir: dir.to_path_buf(),
        timing: CanaryTiming { warmup, window },
        shutdown: shutdown.clone(),
    }))
}

#[async_trait::async_trait]
impl CanaryProbe for EngineCanary {
    async fn measure(
        &self,
        hub_url: &str,
        credentials: &crate::model::secret::GridCredentials,
        node_type: &str,
        viewers: u32,
    ) -> anyhow::Result<CanaryCost> {
        let mut grid = GridFleetPlan::with_url(hub_url)
            .map_err(|m| anyhow::anyhow!("the canary's hub {hub_url}: {m}"))?;
        grid.credentials = Some(credentials.clone());
        let (node_cores, idle_cores) = idle_load(&grid).await?;
        let plan = canary_plan(&self.plan, grid, viewers, self.timing);
        tracing::info!(
            "canary: {viewers} viewers on one {node_type} node for {} (its run: {})",
            humantime::format_duration(plan.measure_at),
            self.dir.display()
        );
        let per_browser = plan.per_browser;
        let outcome = run_scenario(
            plan,
            &RunSource::Command(vec!["(canary of a cloud fleet)".into()]),
            &self.dir,
            self.shutdown.clone(),
            RunOptions {
                progress: false,
                ..RunOptions::default()
            },
        )
        .await
        .context("the canary run")?;
        if outcome.interrupted {
            anyhow::bail!("interrupted during the canary run");
        }
        let run = RunData::load(&self.dir)
            .with_context(|| format!("reading the canary run in {}", self.dir.display()))?;
        cost_of(
            &run,
            node_type,
            per_browser,
            node_cores,
            idle_cores,
            &self.dir,
        )
    }
}

/// The node's cores and busy cores with no viewer on it, from its load endpoint.
async fn idle_load(grid: &GridFleetPlan) -> anyhow::Result<(f64, f64)> {
    let fleet = GridFleet::start(grid).await?;
    let endpoints = fleet.load_endpoints();
    fleet.shutdown().await.ok();
    let endpoint = match endpoints.as_slice() {
        [one] => one.clone(),
        [] => anyhow::bail!(
            "the canary node advertises no load endpoint (\"viewerfleet:load\" in its stereotype): its cost cannot be measured"
        ),
        more => anyhow::bail!(
            "the canary's hub has {} nodes; a canary is measured on one",
            more.len()
        ),
    };
    let client = load::client(Duration::from_secs(5));
    let mut meter = NodeLoadMeter::new(&endpoint.node);
    let began = Instant::now();
    let at = |i: Instant| i.duration_since(began).as_secs_f64();
    meter.sample(0.0, load::read_endpoint(&client, &endpoint.url).await, 0.0);
    tokio::time::sleep(IDLE_WINDOW).await;
    let now = Instant::now();
    let sample = meter.sample(
        at(now),
        load::read_endpoint(&client, &endpoint.url).await,
        at(now),
    );
    match (sample.ok, sample.cores, sample.cpu_busy) {
        (true, Some(cores), Some(busy)) => Ok((cores, cores * busy)),
        _ => anyhow::bail!(
            "the canary node's load endpoint {} did not answer: {}",
            endpoint.url,
            sample.error.unwrap_or_else(|| "no CPU figures".into())
        ),
    }
}

/// What the canary's viewers cost, from its run's raw data.
fn cost_of(
    run: &RunData,
    node_type: &str,
    per_browser: u32,
    node_cores: f64,
    idle_cores: f64,
    dir: &std::path::Path,
) -> anyhow::Result<CanaryCost> {
    let window = Window::of_run(run);
    let browsers = cost::browser_cost(run, window)
        .map_err(|e| anyhow::anyhow!("the canary run measured no cost: {e}"))?;
    let in_window: Vec<_> = run
        .node_samples
        .iter()
        .filter(|s| s.ok && s.t >= window.from_s && s.t <= window.to_s)
        .collect();
    let mean = |f: &dyn Fn(&crate::model::rawdata::NodeSample) -> Option<f64>| {
        let v: Vec<f64> = in_window.iter().filter_map(|s| f(s)).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let busy_share = mean(&|s| s.cpu_busy).unwrap_or(browsers.cores / node_cores.max(1e-9));
    let played = played_through(run, window);
    if played == 0 {
        anyhow::bail!("no canary viewer played through the window: nothing to measure");
    }
    let n = f64::from(played);
    Ok(CanaryCost {
        node_type: node_type.to_string(),
        viewers: played,
        per_browser,
        node_cores,
        idle_cores,
        busy_cores: browsers.cores,
        steal: mean(&|s| s.cpu_steal),
        cpu_per_viewer: (browsers.cores - idle_cores).max(0.0) / n,
        memory_mb_per_viewer: browsers.pss_mean_bytes / n / 1e6,
        saturated: busy_share > CANARY_BUSY_LIMIT,
        run_dir: dir.display().to_string(),
    })
}

/// Viewers that played before the window and had not ended by its start.
fn played_through(run: &RunData, window: Window) -> u32 {
    use crate::model::rawdata::ViewerEventKind;
    let mut playing = std::collections::BTreeMap::new();
    for e in &run.viewer_events {
        match e.event {
            ViewerEventKind::Playing if e.t <= window.from_s => {
                playing.insert(e.viewer, true);
            }
            ViewerEventKind::Failed | ViewerEventKind::Lost if e.t < window.to_s => {
                playing.insert(e.viewer, false);
            }
            _ => {}
        }
    }
    playing.values().filter(|p| **p).count() as u32
}
