//! One run, start to finish: fleet and target up, viewers along the ramp, samplers, the
//! timeline (ramp end, measure point, end), and a teardown that runs on every exit path.

use super::recorder::{Recorder, RecorderHandle};
use super::shared::Shared;
use super::{governor, light_task, manifest, progress, samplers, viewer_task, RunOutcome};
use crate::fleet::{self, Fleet};
use crate::metrics::controller::ControllerMetrics;
use crate::metrics::scrape::Scraper;
use crate::model::exit::Exit;
use crate::model::rawdata::{self, RunEventKind, ViewerEventKind};
use crate::model::scenario::{Plan, RunClock};
use crate::report::ReportSummary;
use crate::sys::shutdown::Shutdown;
use crate::target::start::{self, StartedTarget};
use crate::target::{Target, TargetPlacement};
use crate::viewer::ViewerTimeouts;
use anyhow::Context;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long one scrape of the exporter may take.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long viewers get to close their sessions at the end.
const VIEWERS_CLOSE_TIMEOUT: Duration = Duration::from_secs(90);

/// Everything a run needs besides the plan.
pub(crate) struct RunContext {
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
    /// Build the report from raw data at the end.
    pub write_report: bool,
    /// Cloud fleets: asked before servers are bought.
    pub confirm_paid: Option<crate::cloud::up::Confirm>,
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
    let opened = async {
        if let Some(listen) = ctx.metrics_listen {
            let addr = crate::metrics::controller::serve(
                ctx.metrics.clone(),
                listen,
                metrics_stop.clone(),
            )
            .await?;
            tracing::info!("controller metrics on http://{addr}/metrics");
        }
        open_fleet(&plan, &ctx, &rec).await
    };
    let fleet = match opened.await {
        Ok(fleet) => fleet,
        Err(err) => {
            rec.run_event(RunEventKind::Error, Some(format!("{err:#}")));
            drop(rec);
            recorder.finish().await.ok();
            metrics_stop.cancel();
            return Err(err);
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
    let has_thresholds = !plan.thresholds.is_empty();
    finish(&ctx, result, rec, recorder, has_thresholds).await
}

/// Records how the run ended, closes the raw data, stamps the manifest, and judges the
/// scenario's thresholds from the report (exit code 99 when one fails and nothing worse
/// happened).
async fn finish(
    ctx: &RunContext,
    result: anyhow::Result<(u8, progress::Summary)>,
    rec: RecorderHandle,
    recorder: Recorder,
    has_thresholds: bool,
) -> anyhow::Result<RunOutcome> {
    let interrupted = ctx.shutdown.is_triggered();
    let (code, error) = match &result {
        Ok((code, _)) => (*code, None),
        Err(_) if interrupted => (ctx.shutdown.exit_code(), None),
        // The manifest records the code the process will end with (`commands::exit_for`
        // knows more types; what reaches here is marked or this machine's).
        Err(err) => (
            Exit::marked(err).unwrap_or(Exit::Internal).code(),
            Some(format!("{err:#}")),
        ),
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
    let lost = recorder.finish().await.context("writing raw data")?;
    let code = match &lost {
        Some(_) if !interrupted => Exit::RecordLost.code(),
        _ => code,
    };
    let aborted = match &result {
        Ok((_, summary)) => summary.aborted().map(str::to_string),
        Err(_) => None,
    };
    manifest::finish_manifest(
        &ctx.out,
        code,
        interrupted,
        ctx.shutdown.signal(),
        lost.as_deref(),
        aborted.as_deref(),
    )?;
    let mut code = code;
    let (summary, (settled_viewers, fitting_viewers), report) = match result {
        Ok((_, mut summary)) => {
            let report = if ctx.write_report {
                write_report(&ctx.out, &mut summary)
            } else if has_thresholds {
                judge_without_report(&ctx.out)
            } else {
                None
            };
            let mut text = summary.text();
            if let Some(reason) = &lost {
                text.push_str(&format!(
                    "\nRUN STOPPED: {reason}; what was recorded before is kept (exit code {code})"
                ));
            } else if let Some(why) = &aborted {
                text.push_str(&format!("\nABORTED: {why} (exit code 99)"));
            }
            if let Some(report) = &report {
                for line in crate::report::thresholds::lines(&report.thresholds) {
                    text.push('\n');
                    text.push_str(&line);
                }
                if code == Exit::SUCCESS && report.thresholds_failed() {
                    code = Exit::THRESHOLDS_FAILED;
                    manifest::restamp_exit_code(&ctx.out, code)?;
                }
            } else if has_thresholds && !interrupted {
                // Without a report nothing was judged: a threshold never passes unseen.
                text.push_str("\nTHRESHOLDS FAILED: the report could not be built, so none was judged (exit code 99); run `viewerfleet report` on the run folder to judge them");
                if code == Exit::SUCCESS {
                    code = Exit::THRESHOLDS_FAILED;
                    manifest::restamp_exit_code(&ctx.out, code)?;
                }
            }
            (
                text,
                (summary.settled_viewers(), summary.fitting_viewers()),
                report,
            )
        }
        Err(_) if interrupted => (
            "interrupted before viewers started".to_string(),
            (None, None),
            None,
        ),
        Err(err) => return Err(err),
    };
    Ok(RunOutcome {
        run_dir: ctx.out.clone(),
        ok: code == Exit::SUCCESS,
        interrupted,
        exit_code: code,
        summary,
        settled_viewers,
        fitting_viewers,
        report,
    })
}

fn prepare_out_dir(out: &Path) -> anyhow::Result<()> {
    if out.exists() {
        let non_empty = std::fs::read_dir(out)
            .with_context(|| format!("reading {}", out.display()))?
            .next()
            .is_some();
        if non_empty {
            return Err(crate::model::exit::bad_input(anyhow::anyhow!(
                "output folder {} is not empty; choose another --out or remove it (runs never overwrite data)",
                out.display()
            )));
        }
    }
    std::fs::create_dir_all(out.join("raw"))
        .with_context(|| format!("creating output folder {}", out.display()))
}

/// Builds the report from the raw data just written; the summary then quotes its figures.
/// A failure here loses nothing: `viewerfleet report` rebuilds it any time.
fn write_report(out: &Path, summary: &mut progress::Summary) -> Option<ReportSummary> {
    match crate::report::write_report(out) {
        Ok(report) => {
            summary.use_report(&report, &out.join("report.html"));
            Some(report)
        }
        Err(err) => {
            tracing::error!(
                "building the report failed ({err:#}); run `viewerfleet report {}` to retry",
                out.display()
            );
            None
        }
    }
}

/// `--no-report` with thresholds: the report is built in memory to judge them, not written.
fn judge_without_report(out: &Path) -> Option<ReportSummary> {
    match crate::report::build(out) {
        Ok(report) => Some(report.summary),
        Err(err) => {
            tracing::error!("judging the thresholds failed: building the report: {err:#}");
            None
        }
    }
}

/// Checks a remote target, then opens the fleet: a target that does not answer costs no
/// browser and no cloud server.
async fn open_fleet(
    plan: &Plan,
    ctx: &RunContext,
    rec: &RecorderHandle,
) -> anyhow::Result<Arc<dyn Fleet>> {
    tokio::select! {
        r = start::check_before_fleet(plan) => r,
        _ = ctx.shutdown.wait() => anyhow::bail!("interrupted while checking the target"),
    }
    .inspect_err(|err| rec.run_event(RunEventKind::TargetUnreachable, Some(format!("{err:#}"))))?;
    let options = fleet::OpenOptions {
        keep: ctx.keep,
        cancel: ctx.shutdown.token(),
        canary: super::canary::for_plan(plan, &ctx.out.join("canary"), &ctx.shutdown),
        confirm: ctx.confirm_paid.clone(),
    };
    fleet::open(plan, &options)
        .await
        .context("starting the fleet")
}

/// Starts the target where the fleet says, runs the timeline, returns the exit code and
/// the live summary.
async fn run_with_fleet(
    plan: &Plan,
    ctx: &RunContext,
    fleet: Arc<dyn Fleet>,
    target_slot: &mut Option<StartedTarget>,
    rec: &RecorderHandle,
    started_wall: chrono::DateTime<chrono::Utc>,
) -> anyhow::Result<(u8, progress::Summary)> {
    let placement = fleet.target_placement();
    let started = tokio::select! {
        t = start::start(plan, &placement) => t,
        _ = ctx.shutdown.wait() => anyhow::bail!("interrupted while starting the target"),
    }
    .inspect_err(|err| rec.run_event(RunEventKind::TargetUnreachable, Some(format!("{err:#}"))))?;
    let target_pid = started.pid();
    let target = started.target();
    let viewer_url = started.viewer_url();
    *target_slot = Some(started);
    rec.run_event(RunEventKind::TargetReady, Some(viewer_url.clone()));
    let light_host = light_task::choose_host(plan, fleet.as_ref())?;
    let light_host = light_task::for_target(light_host, plan, &viewer_url).await?;
    manifest::write_manifest(
        plan,
        ctx,
        fleet.as_ref(),
        target.as_ref(),
        &viewer_url,
        started_wall,
        light_host.as_ref(),
    )?;
    let shared = Arc::new(
        Shared::new(
            rec.clone(),
            ctx.metrics.clone(),
            fleet.clone(),
            target.clone(),
            plan.sampling_interval,
            ViewerTimeouts::default(),
            plan.browser.clone(),
            fleet.start_policy().max_parallel,
            (plan.per_browser > 1).then(|| super::browsers::Browsers::new(plan)),
        )
        .with_networks(plan.networks.clone())
        .with_churn(plan.churn.clone(), plan.viewers),
    );
    shared.metrics.viewers_requested.set(plan.viewers as i64);
    shared.metrics.fleet_nodes.with_label_values(&["up"]).set(1);
    let mut background =
        start_samplers(plan, ctx, &shared, target.as_ref(), &placement, target_pid);
    background.spawn(super::abort::watch(
        plan.thresholds.clone(),
        shared.clone(),
        plan.viewers,
    ));
    let mut light_pages =
        light_task::release(plan, light_host.as_ref(), &ctx.out.join("raw"), &shared);
    let release = tokio::spawn(release_viewers(plan.clone(), shared.clone()));
    follow_timeline(plan, ctx, &shared, &mut background).await;
    shared.run_end.cancel();
    let mut viewers = release.await.unwrap_or_else(|err| {
        tracing::error!("releasing viewers: {err}");
        tokio::task::JoinSet::new()
    });
    close_viewers(&mut viewers).await;
    close_viewers(&mut light_pages).await;
    while background.join_next().await.is_some() {}
    let aborted = shared
        .aborted
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let live = shared.live();
    let summary = progress::summarize(plan, &live).with_aborted(aborted.clone());
    let failed = live.failed_or_lost(live.requested(plan.viewers)) as u32;
    let code = if ctx.shutdown.is_triggered() {
        ctx.shutdown.exit_code()
    } else if failed > plan.max_failed_viewers {
        1
    } else if aborted.is_some() {
        Exit::THRESHOLDS_FAILED
    } else {
        0
    };
    Ok((code, summary))
}

/// The viewers' tasks: all of them, each waiting for its arrival time; or, with
/// `viewers.count: auto`, as many as the host has room for (`governor`).
async fn release_viewers(plan: Plan, shared: Arc<Shared>) -> tokio::task::JoinSet<()> {
    if let Some(auto) = plan.auto {
        let gauge = Box::new(crate::sys::hostinfo::CpuMeter::default());
        return governor::governed_ramp(plan, auto, shared, gauge).await;
    }
    let mut viewers = tokio::task::JoinSet::new();
    for vp in plan.viewer_plans() {
        viewers.spawn(viewer_task::viewer_task(vp, shared.clone()));
    }
    viewers
}

/// Host, node and exporter samplers and the progress display, until the run ends.
fn start_samplers(
    plan: &Plan,
    ctx: &RunContext,
    shared: &Arc<Shared>,
    target: &dyn Target,
    placement: &TargetPlacement,
    target_pid: Option<u32>,
) -> tokio::task::JoinSet<()> {
    let mut background = tokio::task::JoinSet::new();
    background.spawn(samplers::sample_host(shared.clone(), target_pid));
    background.spawn(super::node_sampler::sample_nodes(shared.clone()));
    if let Some(url) = target.exporter_url() {
        let scraper = match placement.netns.clone() {
            // The controller cannot reach the target's namespace directly: fetch from inside.
            Some(ns) => Scraper::with_fetch(
                url,
                SCRAPE_TIMEOUT,
                Arc::new(move |url: String, timeout| {
                    let ns = ns.clone();
                    Box::pin(
                        async move { crate::netns::http_get_in_netns(&ns, &url, timeout).await },
                    )
                }),
            ),
            None => Scraper::http(url, SCRAPE_TIMEOUT),
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
    background
}

/// The timeline: ramp end, measure point, end of run; any of them cut short by a signal
/// or by a threshold with `abort_on_fail` that failed (`engine::abort`).
/// With `RunClock::FromEveryFirstFrame` it starts once every viewer played (or failed),
/// which is then recorded as the ramp's end.
async fn follow_timeline(
    plan: &Plan,
    ctx: &RunContext,
    shared: &Arc<Shared>,
    background: &mut tokio::task::JoinSet<()>,
) {
    let began = tokio::time::Instant::now();
    let ticking = shared.clone();
    background.spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = tick.tick() => ticking.metrics.run_elapsed_seconds.set(began.elapsed().as_secs_f64()),
                _ = ticking.run_end.cancelled() => return,
            }
        }
    });
    let mut marks = Vec::new();
    let start = match plan.clock {
        RunClock::FromStart => {
            // A governed ramp marks its own end, when it settles.
            if plan.auto.is_none() {
                marks.push((plan.ramp, RunEventKind::RampDone));
            }
            began
        }
        RunClock::FromEveryFirstFrame { limit } => {
            let detail = tokio::select! {
                d = every_first_frame(plan, shared, limit) => d,
                _ = stopped(ctx, shared) => return,
            };
            shared.rec.run_event(RunEventKind::RampDone, Some(detail));
            tokio::time::Instant::now()
        }
    };
    marks.push((plan.measure_at, RunEventKind::MeasurePoint));
    marks.sort_by_key(|(d, _)| *d);
    for (at, kind) in marks {
        tokio::select! {
            _ = tokio::time::sleep_until(start + at) => shared.rec.run_event(kind, None),
            _ = stopped(ctx, shared) => return,
        }
    }
    tokio::select! {
        _ = tokio::time::sleep_until(start + plan.duration) => {}
        _ = stopped(ctx, shared) => {}
    }
}

/// Resolves when the run must end before its time: a signal, a record that could not be
/// written (a run that cannot record stops rather than going on, and billing, for nothing),
/// or a threshold with `abort_on_fail` that failed.
async fn stopped(ctx: &RunContext, shared: &Shared) {
    tokio::select! {
        _ = ctx.shutdown.wait() => {}
        _ = shared.rec.lost().cancelled() => {}
        _ = shared.abort.cancelled() => {}
    }
}

/// Waits until every viewer has played its first frame or ended, at most `limit`; says
/// how it was.
async fn every_first_frame(plan: &Plan, shared: &Shared, limit: Duration) -> String {
    let deadline = tokio::time::Instant::now() + limit;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    loop {
        tick.tick().await;
        let (playing, ended) = {
            let live = shared.live();
            (
                live.count(ViewerEventKind::Playing),
                live.ended_badly() + live.count(ViewerEventKind::Stopped),
            )
        };
        let all = playing + ended >= plan.viewers as usize;
        if all || tokio::time::Instant::now() >= deadline {
            let how = if all {
                "every viewer played its first frame or ended"
            } else {
                "not every viewer played within the start-up limit"
            };
            return format!(
                "{how}: {playing} of {} playing, {ended} ended; the timeline starts here",
                plan.viewers
            );
        }
    }
}

/// Viewers close their sessions; the wait is bounded so a hung driver cannot keep the run
/// here (the fleet's shutdown kills whatever is left).
async fn close_viewers(viewers: &mut tokio::task::JoinSet<()>) {
    let joined = tokio::time::timeout(VIEWERS_CLOSE_TIMEOUT, async {
        while viewers.join_next().await.is_some() {}
    })
    .await;
    if joined.is_err() {
        tracing::warn!(
            "some viewers did not close within {VIEWERS_CLOSE_TIMEOUT:?}; the fleet shutdown kills them"
        );
        viewers.abort_all();
        while viewers.join_next().await.is_some() {}
    }
}
