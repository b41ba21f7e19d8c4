//! One run, start to finish: fleet and target up, viewers along the ramp, samplers, the
//! timeline (ramp end, measure point, end), and a teardown that runs on every exit path.

use super::recorder::{Recorder, RecorderHandle};
use super::shared::Shared;
use super::target_process::{self, StartedTarget};
use super::{manifest, progress, samplers, viewer_task, RunOutcome};
use crate::fleet::{self, Fleet};
use crate::metrics::controller::ControllerMetrics;
use crate::metrics::scrape::Scraper;
use crate::rawdata::{self, RunEventKind};
use crate::scenario::{Plan, TargetKind};
use crate::shutdown::Shutdown;
use crate::target::Target;
use crate::viewer::ViewerTimeouts;
use anyhow::Context;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Everything a run needs besides the plan.
pub struct RunContext {
    pub out: PathBuf,
    /// The command that re-runs exactly this run.
    pub rerun_command: Vec<String>,
    pub shutdown: Shutdown,
    /// Show progress on stderr.
    pub progress: bool,
    /// Serve the controller's metrics here during the run (loopback only).
    pub metrics_listen: Option<SocketAddr>,
    pub metrics: ControllerMetrics,
    /// Cloud fleets: leave the servers running after the run.
    pub keep: bool,
}

pub async fn execute(plan: Plan, ctx: RunContext) -> anyhow::Result<RunOutcome> {
    prepare_out_dir(&ctx.out)?;
    std::fs::write(ctx.out.join(rawdata::SCENARIO_COPY), &plan.yaml)
        .with_context(|| format!("writing {}", ctx.out.display()))?;
    let started_wall = chrono::Utc::now();
    let (recorder, rec) = Recorder::start(&ctx.out, Instant::now())
        .with_context(|| format!("opening raw data files in {}", ctx.out.display()))?;
    rec.run_event(RunEventKind::Started, Some(plan.summary_line()));
    let metrics_stop = tokio_util::sync::CancellationToken::new();
    if let Some(listen) = ctx.metrics_listen {
        let addr =
            crate::metrics::controller::serve(ctx.metrics.clone(), listen, metrics_stop.clone())
                .await?;
        tracing::info!("controller metrics on http://{addr}/metrics");
    }

    let fleet = match open_fleet(&plan, &ctx).await {
        Ok(fleet) => fleet,
        Err(err) => {
            rec.run_event(RunEventKind::Error, Some(format!("{err:#}")));
            drop(rec);
            recorder.finish().await.ok();
            metrics_stop.cancel();
            return Err(err.context("starting the fleet"));
        }
    };
    let mut target: Option<StartedTarget> = None;
    let result = run_with_fleet(&plan, &ctx, fleet.clone(), &mut target, &rec, started_wall).await;

    // Teardown, whatever happened above.
    if let Err(err) = fleet.shutdown().await {
        tracing::error!("releasing the fleet: {err:#}");
    }
    crate::viewer::remove_own_profiles();
    if let Some(t) = target.as_mut() {
        t.stop().await;
    }
    metrics_stop.cancel();
    let interrupted = ctx.shutdown.is_triggered();
    let interrupted_code = ctx.shutdown.exit_code();
    let (code, summary, error) = match &result {
        Ok((code, summary)) => (*code, summary.clone(), None),
        Err(_) if interrupted => (
            interrupted_code,
            "interrupted before viewers started".to_string(),
            None,
        ),
        Err(err) => (2, String::new(), Some(format!("{err:#}"))),
    };
    let (event, detail) = match (&error, interrupted) {
        (_, true) => (
            RunEventKind::Interrupted,
            ctx.shutdown.signal().map(str::to_string),
        ),
        (Some(err), false) => (RunEventKind::Error, Some(err.clone())),
        (None, false) => (RunEventKind::Finished, None),
    };
    rec.run_event(event, detail);
    drop(rec);
    recorder.finish().await.context("writing raw data")?;
    manifest::finish_manifest(&ctx.out, code, interrupted, ctx.shutdown.signal())?;
    if let (Err(err), false) = (result, interrupted) {
        return Err(err);
    }
    Ok(RunOutcome {
        run_dir: ctx.out.clone(),
        ok: code == 0,
        interrupted,
        exit_code: code,
        summary,
    })
}

fn prepare_out_dir(out: &Path) -> anyhow::Result<()> {
    if out.exists() {
        let non_empty = std::fs::read_dir(out)
            .with_context(|| format!("reading {}", out.display()))?
            .next()
            .is_some();
        if non_empty {
            anyhow::bail!(
                "output folder {} is not empty; choose another --out or remove it (runs never overwrite data)",
                out.display()
            );
        }
    }
    std::fs::create_dir_all(out.join("raw"))
        .with_context(|| format!("creating output folder {}", out.display()))
}

/// The viewer-slot set-up that cloud nodes run from their bootstrap (one place for slots).
const VIEWER_SLOTS_SCRIPT: &str = include_str!("../../grid/viewer-slots.sh");

async fn open_fleet(plan: &Plan, ctx: &RunContext) -> anyhow::Result<Arc<dyn Fleet>> {
    match &plan.fleet {
        fleet::FleetSpec::Hcloud(_) => Ok(Arc::new(
            crate::cloud::HcloudFleet::open(
                plan,
                ctx.keep,
                Some(VIEWER_SLOTS_SCRIPT.to_string()),
                &ctx.shutdown.token(),
            )
            .await?,
        )),
        fleet::FleetSpec::Local(spec) => Ok(Arc::new(fleet::local::LocalFleet::start(spec).await?)),
        fleet::FleetSpec::Grid(spec) => Ok(Arc::new(fleet::grid::GridFleet::start(spec).await?)),
        fleet::FleetSpec::Netns(spec) => Ok(Arc::new(fleet::netns::NetnsFleet::start(spec).await?)),
    }
}

fn max_parallel_starts(plan: &Plan, fleet: &dyn Fleet) -> usize {
    match &plan.fleet {
        fleet::FleetSpec::Local(spec) => spec.max_parallel_starts.unwrap_or(2) as usize,
        _ => fleet.start_policy().max_parallel.unwrap_or(4),
    }
}

/// Returns (exit code, summary).
async fn run_with_fleet(
    plan: &Plan,
    ctx: &RunContext,
    fleet: Arc<dyn Fleet>,
    target_slot: &mut Option<StartedTarget>,
    rec: &RecorderHandle,
    started_wall: chrono::DateTime<chrono::Utc>,
) -> anyhow::Result<(u8, String)> {
    let placement = fleet.target_placement();
    let started_target = tokio::select! {
        t = target_process::start(plan, &placement) => t,
        _ = ctx.shutdown.wait() => anyhow::bail!("interrupted while starting the target"),
    }
    .inspect_err(|err| rec.run_event(RunEventKind::TargetUnreachable, Some(format!("{err:#}"))))?;
    let target_pid = started_target.pid();
    let viewer_url = started_target.viewer_url_example.clone();
    let target: Arc<dyn Target> = Arc::new(started_target.adapter.clone());
    *target_slot = Some(started_target);
    if plan.target.kind == TargetKind::Peertube {
        check_reachable(&viewer_url).await.inspect_err(|err| {
            rec.run_event(RunEventKind::TargetUnreachable, Some(format!("{err:#}")));
        })?;
    }
    rec.run_event(RunEventKind::TargetReady, Some(viewer_url.clone()));
    manifest::write_manifest(
        plan,
        ctx,
        fleet.as_ref(),
        target.as_ref(),
        &viewer_url,
        started_wall,
    )?;

    let max_parallel = max_parallel_starts(plan, fleet.as_ref());
    let shared = Arc::new(Shared::new(
        rec.clone(),
        ctx.metrics.clone(),
        fleet,
        target.clone(),
        plan.sampling_interval,
        ViewerTimeouts::default(),
        max_parallel,
    ));
    shared.metrics.viewers_requested.set(plan.viewers as i64);
    shared.metrics.fleet_nodes.with_label_values(&["up"]).set(1);
    let mut background = tokio::task::JoinSet::new();
    background.spawn(samplers::sample_host(shared.clone(), target_pid));
    if let Some(url) = target.exporter_url() {
        let scraper = match placement.netns.clone() {
            // The controller cannot reach the target's namespace directly: fetch from inside.
            Some(ns) => Scraper::with_fetch(
                url,
                Duration::from_secs(10),
                Arc::new(move |url: String, timeout| {
                    let ns = ns.clone();
                    Box::pin(
                        async move { crate::netns::http_get_in_netns(&ns, &url, timeout).await },
                    )
                }),
            ),
            None => Scraper::http(url, Duration::from_secs(10)),
        };
        background.spawn(samplers::sample_exporter(shared.clone(), scraper));
    }
    if ctx.progress {
        background.spawn(progress::show_progress(
            shared.clone(),
            plan.viewers,
            plan.duration,
        ));
    }
    let mut viewers = tokio::task::JoinSet::new();
    for vp in plan.viewer_plans() {
        viewers.spawn(viewer_task::viewer_task(vp, shared.clone()));
    }

    // The timeline: ramp end, measure point, end of run; any of them cut short by a signal.
    let start = tokio::time::Instant::now();
    let mut marks = [
        (plan.ramp, RunEventKind::RampDone),
        (plan.measure_at, RunEventKind::MeasurePoint),
    ];
    marks.sort_by_key(|(d, _)| *d);
    let ticking = shared.clone();
    background.spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = tick.tick() => ticking.metrics.run_elapsed_seconds.set(start.elapsed().as_secs_f64()),
                _ = ticking.run_end.cancelled() => return,
            }
        }
    });
    for (at, kind) in marks {
        tokio::select! {
            _ = tokio::time::sleep_until(start + at) => rec.run_event(kind, None),
            _ = ctx.shutdown.wait() => break,
        }
    }
    tokio::select! {
        _ = tokio::time::sleep_until(start + plan.duration) => {}
        _ = ctx.shutdown.wait() => {}
    }
    shared.run_end.cancel();
    // Viewers close their sessions; bound the wait so a hung driver cannot keep us here
    // (the fleet's shutdown kills whatever is left).
    let joined = tokio::time::timeout(Duration::from_secs(90), async {
        while viewers.join_next().await.is_some() {}
    })
    .await;
    if joined.is_err() {
        tracing::warn!("some viewers did not close within 90s; the fleet shutdown kills them");
        viewers.abort_all();
        while viewers.join_next().await.is_some() {}
    }
    while background.join_next().await.is_some() {}

    let live = shared.live();
    let summary = progress::summarize(plan, &live);
    let failed = live.failed_or_lost() as u32;
    let code = if ctx.shutdown.is_triggered() {
        ctx.shutdown.exit_code()
    } else if failed > plan.max_failed_viewers {
        1
    } else {
        0
    };
    Ok((code, summary))
}

async fn check_reachable(url: &str) -> anyhow::Result<()> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .build()?;
    let resp = client
        .get(url)
        .send()
        .await
        .with_context(|| format!("the target did not answer at {url}"))?;
    if !resp.status().is_success() {
        anyhow::bail!("the target answered {} at {url}", resp.status());
    }
    Ok(())
}
