//! One run, start to finish: fleet and target up, viewers along the ramp, samplers, the
//! timeline (measure point, end), and a teardown that runs on every exit path.

use super::recorder::{Record, Recorder, RecorderHandle};
use super::target_process::{self, StartedTarget};
use super::RunOutcome;
use crate::fleet::{self, Fleet};
use crate::hostinfo;
use crate::metrics::scrape::Scraper;
use crate::rawdata::{
    self, ExporterSample, HostSample, Manifest, NetworkProfileSummary, PlanSummary, RunEventKind,
    TargetDescription, ViewerEvent, ViewerEventKind, ViewerSample,
};
use crate::scenario::{Latency, Plan, TargetKind, VideoKind, ViewerPlan};
use crate::shutdown::Shutdown;
use crate::target::{PlayerStats, Target};
use crate::viewer::{self, Viewer, ViewerTimeouts};
use anyhow::Context;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Everything a run needs besides the plan.
pub struct RunContext {
    pub out: PathBuf,
    /// The command that re-runs exactly this run.
    pub rerun_command: Vec<String>,
    pub shutdown: Shutdown,
    /// Print a progress line every few seconds.
    pub progress: bool,
}

/// Live state shared by viewer tasks, for progress lines and the summary (the report is
/// built from the raw files, not from this).
#[derive(Default)]
struct LiveState {
    latest: HashMap<u32, ViewerSample>,
    states: HashMap<u32, ViewerEventKind>,
    failures: Vec<(u32, String)>,
    max_peers: u32,
    last_exporter: Option<ExporterSample>,
}

type Live = Arc<Mutex<LiveState>>;

pub async fn execute(plan: Plan, ctx: RunContext) -> anyhow::Result<RunOutcome> {
    prepare_out_dir(&ctx.out)?;
    std::fs::write(ctx.out.join(rawdata::SCENARIO_COPY), &plan.yaml)
        .with_context(|| format!("writing {}", ctx.out.display()))?;
    let started = Instant::now();
    let started_wall = chrono::Utc::now();
    let (recorder, rec) = Recorder::start(&ctx.out, started)
        .with_context(|| format!("opening raw data files in {}", ctx.out.display()))?;
    rec.run_event(RunEventKind::Started, Some(plan.summary_line()));

    let fleet = match open_fleet(&plan).await {
        Ok(fleet) => fleet,
        Err(err) => {
            rec.run_event(RunEventKind::Error, Some(format!("{err:#}")));
            drop(rec);
            recorder.finish().await.ok();
            return Err(err.context("starting the fleet"));
        }
    };
    let mut target: Option<StartedTarget> = None;
    let result = run_with_fleet(&plan, &ctx, fleet.clone(), &mut target, &rec, started_wall).await;

    // Teardown, whatever happened above.
    if let Err(err) = fleet.shutdown().await {
        tracing::error!("releasing the fleet: {err:#}");
    }
    if let Some(t) = target.as_mut() {
        t.stop().await;
    }
    let interrupted = ctx.shutdown.is_triggered();
    let interrupted_code = match ctx.shutdown.signal() {
        Some("SIGTERM") => 143,
        _ => 130,
    };
    let (outcome_code, summary, error) = match &result {
        Ok((code, summary)) => (*code, summary.clone(), None),
        Err(_) if interrupted => (
            interrupted_code,
            "interrupted before viewers started".to_string(),
            None,
        ),
        Err(err) => (2, String::new(), Some(format!("{err:#}"))),
    };
    let event = if interrupted {
        RunEventKind::Interrupted
    } else if error.is_some() {
        RunEventKind::Error
    } else {
        RunEventKind::Finished
    };
    rec.run_event(
        event,
        error
            .clone()
            .or_else(|| ctx.shutdown.signal().map(str::to_string)),
    );
    drop(rec);
    recorder.finish().await.context("writing raw data")?;
    finish_manifest(&ctx.out, outcome_code, interrupted, ctx.shutdown.signal())?;
    if let (Err(err), false) = (result, interrupted) {
        return Err(err);
    }
    Ok(RunOutcome {
        run_dir: ctx.out.clone(),
        ok: outcome_code == 0,
        interrupted,
        exit_code: outcome_code,
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

async fn open_fleet(plan: &Plan) -> anyhow::Result<Arc<dyn Fleet>> {
    match &plan.fleet {
        fleet::FleetSpec::Local(spec) => Ok(Arc::new(fleet::local::LocalFleet::start(spec).await?)),
        fleet::FleetSpec::Grid(spec) => Ok(Arc::new(fleet::grid::GridFleet::start(spec).await?)),
        other => anyhow::bail!("fleet `{}` is not available yet", other.kind_name()),
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
    };
    let started_target = match started_target {
        Ok(t) => t,
        Err(err) => {
            rec.run_event(RunEventKind::TargetUnreachable, Some(format!("{err:#}")));
            return Err(err.context("starting the target"));
        }
    };
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
    write_manifest(
        plan,
        ctx,
        fleet.as_ref(),
        target.as_ref(),
        &viewer_url,
        started_wall,
    )?;

    let live: Live = Arc::default();
    let run_end = CancellationToken::new();
    let mut background = tokio::task::JoinSet::new();
    background.spawn(sample_host(
        rec.clone(),
        plan.sampling_interval,
        target_pid,
        run_end.clone(),
    ));
    if let Some(url) = target.exporter_url() {
        let scraper = Scraper::http(url, Duration::from_secs(10));
        background.spawn(sample_exporter(
            rec.clone(),
            scraper,
            plan.sampling_interval,
            live.clone(),
            run_end.clone(),
        ));
    }
    if ctx.progress {
        background.spawn(print_progress(
            live.clone(),
            rec.clone(),
            plan.viewers,
            run_end.clone(),
        ));
    }

    let max_parallel = match &plan.fleet {
        fleet::FleetSpec::Local(spec) => spec.max_parallel_starts.unwrap_or(2) as usize,
        _ => fleet.start_policy().max_parallel.unwrap_or(4),
    };
    let starts = Arc::new(Semaphore::new(max_parallel));
    let mut viewers = tokio::task::JoinSet::new();
    for vp in plan.viewer_plans() {
        viewers.spawn(viewer_task(
            vp,
            fleet.clone(),
            target.clone(),
            plan.clone_for_viewer(),
            rec.clone(),
            live.clone(),
            starts.clone(),
            run_end.clone(),
        ));
    }

    // The timeline: ramp end, measure point, end of run; any of them cut short by a signal.
    let start = tokio::time::Instant::now();
    let mut marks = vec![
        (plan.ramp, RunEventKind::RampDone),
        (plan.measure_at, RunEventKind::MeasurePoint),
    ];
    marks.sort_by_key(|(d, _)| *d);
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
    run_end.cancel();
    // Viewers close their sessions; bound the wait so a hung driver cannot keep us here
    // (the fleet's shutdown kills whatever is left).
    if tokio::time::timeout(Duration::from_secs(90), async {
        while viewers.join_next().await.is_some() {}
    })
    .await
    .is_err()
    {
        tracing::warn!("some viewers did not close within 90s; the fleet shutdown will kill them");
        viewers.abort_all();
        while viewers.join_next().await.is_some() {}
    }
    while background.join_next().await.is_some() {}

    let state = live.lock().expect("live state lock");
    let failed = state
        .states
        .values()
        .filter(|s| matches!(s, ViewerEventKind::Failed | ViewerEventKind::Lost))
        .count() as u32;
    let summary = summarize(plan, &state, failed);
    let code = if ctx.shutdown.is_triggered() {
        match ctx.shutdown.signal() {
            Some("SIGTERM") => 143,
            _ => 130,
        }
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

#[allow(clippy::too_many_arguments)]
async fn viewer_task(
    vp: ViewerPlan,
    fleet: Arc<dyn Fleet>,
    target: Arc<dyn Target>,
    plan: ViewerRunPlan,
    rec: RecorderHandle,
    live: Live,
    starts: Arc<Semaphore>,
    run_end: CancellationToken,
) {
    tokio::select! {
        _ = tokio::time::sleep(vp.start_after) => {}
        _ = run_end.cancelled() => return,
    }
    let events = ViewerEvents {
        viewer: vp.index,
        p2p: vp.p2p,
        rec: rec.clone(),
        live: live.clone(),
    };
    let event = |kind, reason, node, address, ttff| events.emit(kind, reason, node, address, ttff);
    let policy = fleet.start_policy();
    // One pass per life of the viewer: a viewer lost mid-run (its node died) is created
    // again when the fleet asks for it, as long as the run goes on.
    loop {
        let Some(outcome) = viewer_life(
            &vp,
            &fleet,
            target.as_ref(),
            &plan,
            &rec,
            &live,
            &starts,
            &run_end,
            &events,
            &policy,
        )
        .await
        else {
            return;
        };
        let (outcome, node, address) = outcome;
        match outcome {
            Drive::Finished => {
                event(ViewerEventKind::Stopped, None, node, address, None);
                return;
            }
            Drive::Failed(reason) => {
                event(ViewerEventKind::Failed, Some(reason), node, address, None);
                return;
            }
            Drive::Lost(reason) => {
                event(ViewerEventKind::Lost, Some(reason), node, address, None);
                if !policy.recreate_lost || run_end.is_cancelled() {
                    return;
                }
            }
        }
    }
}

/// Session creation with the fleet's retries: a refused session (`SessionNotCreated`, a
/// queue timeout) is asked for again after a back-off that doubles up to 60 s.
async fn create_with_retries(
    slot: &crate::fleet::ViewerSlot,
    plan: &ViewerRunPlan,
    policy: &crate::fleet::StartPolicy,
    run_end: &CancellationToken,
    events: &ViewerEvents,
) -> Option<Result<Viewer, String>> {
    let mut wait = policy.retry_backoff;
    let mut attempt = 0;
    loop {
        let created = tokio::select! {
            v = Viewer::create(slot, plan.timeouts.clone()) => v,
            _ = run_end.cancelled() => return None,
        };
        match created {
            Ok(v) => return Some(Ok(v)),
            Err(err) if attempt < policy.session_retries => {
                attempt += 1;
                events.emit(
                    ViewerEventKind::Creating,
                    Some(format!("attempt {} after refusal: {err}", attempt + 1)),
                    None,
                    None,
                    None,
                );
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = run_end.cancelled() => return None,
                }
                wait = (wait * 2).min(Duration::from_secs(60));
            }
            Err(err) if attempt > 0 => {
                return Some(Err(format!(
                    "refused by the fleet after {} attempts: {err}",
                    attempt + 1
                )))
            }
            Err(err) => return Some(Err(err.to_string())),
        }
    }
}

type LifeOutcome = (Drive, Option<String>, Option<String>);

/// One session of a viewer, from asking for it to closing it. `None`: the run ended first,
/// or the viewer failed before it had a session (already recorded).
#[allow(clippy::too_many_arguments)]
async fn viewer_life(
    vp: &ViewerPlan,
    fleet: &Arc<dyn Fleet>,
    target: &dyn Target,
    plan: &ViewerRunPlan,
    rec: &RecorderHandle,
    live: &Live,
    starts: &Arc<Semaphore>,
    run_end: &CancellationToken,
    events: &ViewerEvents,
    policy: &crate::fleet::StartPolicy,
) -> Option<LifeOutcome> {
    let event = |kind, reason, node, address, ttff| events.emit(kind, reason, node, address, ttff);
    let permit = tokio::select! {
        p = starts.acquire() => p.ok(),
        _ = run_end.cancelled() => return None,
    };
    event(ViewerEventKind::Creating, None, None, None, None);
    let mut slot = match fleet.open_viewer(vp).await {
        Ok(slot) => slot,
        Err(err) => {
            event(
                ViewerEventKind::Failed,
                Some(format!("no slot: {err:#}")),
                None,
                None,
                None,
            );
            return None;
        }
    };
    let viewer = match create_with_retries(&slot, plan, policy, run_end, events).await {
        None => {
            fleet.close_viewer(&slot).await;
            return None;
        }
        Some(Ok(v)) => v,
        Some(Err(reason)) => {
            let (node, address) = (Some(slot.node.clone()), slot.address.clone());
            fleet.close_viewer(&slot).await;
            return Some((Drive::Failed(reason), node, address));
        }
    };
    if let Some(id) = &viewer.session_id {
        fleet.session_placed(&mut slot, id).await;
    }
    let (node, address) = (Some(slot.node.clone()), slot.address.clone());
    event(
        ViewerEventKind::SessionCreated,
        None,
        node.clone(),
        address.clone(),
        None,
    );
    let outcome = drive(
        &viewer, vp, &slot, target, plan, rec, live, run_end, permit, events,
    )
    .await;
    let session_id = viewer.session_id.clone();
    viewer.close().await;
    if let Some(id) = &session_id {
        fleet.session_closed(id);
    }
    fleet.close_viewer(&slot).await;
    Some((outcome, node, address))
}

/// Records one viewer's life events in raw data and in the live state.
struct ViewerEvents {
    viewer: u32,
    p2p: bool,
    rec: RecorderHandle,
    live: Live,
}

impl ViewerEvents {
    fn emit(
        &self,
        kind: ViewerEventKind,
        reason: Option<String>,
        node: Option<String>,
        address: Option<String>,
        ttff_ms: Option<f64>,
    ) {
        let mut live = self.live.lock().expect("live state lock");
        live.states.insert(self.viewer, kind);
        if let (Some(r), ViewerEventKind::Failed | ViewerEventKind::Lost) = (&reason, kind) {
            tracing::warn!(viewer = self.viewer, "viewer {} {kind:?}: {r}", self.viewer);
            live.failures.push((self.viewer, r.clone()));
        }
        drop(live);
        self.rec.send(Record::ViewerEvent(ViewerEvent {
            t: self.rec.now(),
            viewer: self.viewer,
            event: kind,
            p2p: self.p2p,
            reason,
            node,
            address,
            ttff_ms,
        }));
    }
}

enum Drive {
    Finished,
    Failed(String),
    Lost(String),
}

#[allow(clippy::too_many_arguments)]
async fn drive(
    viewer: &Viewer,
    vp: &ViewerPlan,
    slot: &crate::fleet::ViewerSlot,
    target: &dyn Target,
    plan: &ViewerRunPlan,
    rec: &RecorderHandle,
    live: &Live,
    run_end: &CancellationToken,
    permit: Option<tokio::sync::SemaphorePermit<'_>>,
    events: &ViewerEvents,
) -> Drive {
    let event = |kind, reason, node, address, ttff| events.emit(kind, reason, node, address, ttff);
    if let Some(profile) = &vp.network {
        if viewer::wants_cdp(profile, slot) {
            if let Err(err) = viewer.throttle_http(profile).await {
                return Drive::Failed(err.to_string());
            }
        }
    }
    if let Err(err) = viewer.open(target, vp.p2p).await {
        return Drive::Failed(err.to_string());
    }
    event(
        ViewerEventKind::PageOpened,
        None,
        Some(slot.node.clone()),
        slot.address.clone(),
        None,
    );
    let ttff = tokio::select! {
        r = viewer.wait_first_frame(target, Duration::from_millis(250)) => r,
        _ = run_end.cancelled() => return Drive::Finished,
    };
    drop(permit);
    match ttff {
        Ok(ms) => event(
            ViewerEventKind::Playing,
            None,
            Some(slot.node.clone()),
            slot.address.clone(),
            Some(ms),
        ),
        Err(err) => return Drive::Failed(err.to_string()),
    }
    let mut consecutive_errors = 0;
    let mut ticker = tokio::time::interval(plan.sampling_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = run_end.cancelled() => return Drive::Finished,
        }
        match viewer.read(target).await {
            Ok(stats) => {
                consecutive_errors = 0;
                let sample = to_sample(rec.now(), vp.index, &stats);
                {
                    let mut state = live.lock().expect("live state lock");
                    state.max_peers = state.max_peers.max(sample.peers);
                    state.latest.insert(vp.index, sample.clone());
                }
                rec.send(Record::ViewerSample(sample));
            }
            Err(err) => {
                if run_end.is_cancelled() {
                    return Drive::Finished;
                }
                consecutive_errors += 1;
                if consecutive_errors >= 3 {
                    return Drive::Lost(format!("stats unreadable 3 times in a row: {err}"));
                }
            }
        }
    }
}

fn to_sample(t: f64, viewer: u32, s: &PlayerStats) -> ViewerSample {
    ViewerSample {
        t,
        viewer,
        http_down_bytes: s.http_bytes,
        p2p_down_bytes: s.p2p_down_bytes,
        p2p_up_bytes: s.p2p_up_bytes,
        peers: s.peers,
        playing: s.playing,
        current_time_s: s.current_time,
        stalls: s.stalls,
        stalled_ms: s.stalled_ms,
        resolution: s.resolution,
        dropped_frames: s.dropped_frames,
        errors: s.errors,
    }
}

/// The parts of the plan a viewer task needs, owned.
#[derive(Clone)]
pub(crate) struct ViewerRunPlan {
    sampling_interval: Duration,
    timeouts: ViewerTimeouts,
}

impl Plan {
    pub(crate) fn clone_for_viewer(&self) -> ViewerRunPlan {
        ViewerRunPlan {
            sampling_interval: self.sampling_interval,
            timeouts: ViewerTimeouts::default(),
        }
    }
}

async fn sample_host(
    rec: RecorderHandle,
    interval: Duration,
    target_pid: Option<u32>,
    stop: CancellationToken,
) {
    let mut cpu = hostinfo::CpuMeter::default();
    cpu.sample();
    let mut browsers_before = hostinfo::cpu_seconds_of("chromium");
    let cores = hostinfo::host_info().cpus;
    let mut ticker = tokio::time::interval(interval);
    ticker.tick().await;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stop.cancelled() => return,
        }
        let sample = tokio::task::spawn_blocking({
            let t = rec.now();
            move || {
                let busy = cpu.sample().unwrap_or(0.0);
                let (total, available) = hostinfo::meminfo();
                let target = target_pid.and_then(hostinfo::process_tree_usage);
                let browsers_now = hostinfo::cpu_seconds_of("chromium");
                let sample = HostSample {
                    t,
                    cpu_busy: busy,
                    cores,
                    mem_used_bytes: total.saturating_sub(available),
                    mem_total_bytes: total,
                    load1: hostinfo::load1(),
                    target_cpu_s: target.map(|(c, _)| c),
                    target_rss_bytes: target.map(|(_, r)| r),
                    browsers_cpu_s: Some((browsers_now - browsers_before).max(0.0)),
                };
                (cpu, browsers_now, sample)
            }
        })
        .await;
        match sample {
            Ok((meter, browsers_now, sample)) => {
                cpu = meter;
                browsers_before = browsers_now;
                rec.send(Record::Host(sample));
            }
            Err(err) => {
                tracing::error!("host sampler: {err}");
                return;
            }
        }
    }
}

async fn sample_exporter(
    rec: RecorderHandle,
    scraper: Scraper,
    interval: Duration,
    live: Live,
    stop: CancellationToken,
) {
    let mut ticker = tokio::time::interval(interval);
    let mut last_error: Option<String> = None;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stop.cancelled() => return,
        }
        let sample = scraper.scrape(rec.now()).await;
        if let Some(err) = &sample.error {
            if last_error.as_deref() != Some(err) {
                tracing::warn!("scraping {}: {err}", scraper.url());
            }
            last_error = Some(err.clone());
        } else {
            last_error = None;
            live.lock().expect("live state lock").last_exporter = Some(sample.clone());
        }
        rec.send(Record::Exporter(sample));
    }
}

async fn print_progress(live: Live, rec: RecorderHandle, requested: u32, stop: CancellationToken) {
    let mut ticker = tokio::time::interval(Duration::from_secs(10));
    ticker.tick().await;
    let mut previous: Option<(f64, u64, u64)> = None;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stop.cancelled() => return,
        }
        let (line, totals) = {
            let s = live.lock().expect("live state lock");
            let count = |k: ViewerEventKind| s.states.values().filter(|v| **v == k).count();
            let http: u64 = s.latest.values().map(|v| v.http_down_bytes).sum();
            let p2p: u64 = s.latest.values().map(|v| v.p2p_down_bytes).sum();
            (
                format!(
                    "{} playing, {} failed/lost of {requested}",
                    count(ViewerEventKind::Playing),
                    count(ViewerEventKind::Failed) + count(ViewerEventKind::Lost)
                ),
                (http, p2p),
            )
        };
        let now = rec.now();
        let rates = match previous {
            Some((t0, h0, p0)) if now > t0 => format!(
                ", players: HTTP {:.2} Mbit/s, P2P {:.2} Mbit/s",
                totals.0.saturating_sub(h0) as f64 * 8.0 / (now - t0) / 1e6,
                totals.1.saturating_sub(p0) as f64 * 8.0 / (now - t0) / 1e6
            ),
            _ => String::new(),
        };
        previous = Some((now, totals.0, totals.1));
        eprintln!("[{:>5.0}s] viewers: {line}{rates}", now);
    }
}

fn summarize(plan: &Plan, s: &LiveState, failed: u32) -> String {
    let started = s
        .states
        .iter()
        .filter(|(_, k)| !matches!(k, ViewerEventKind::Creating))
        .count()
        - s.states
            .values()
            .filter(|k| matches!(k, ViewerEventKind::Failed))
            .count();
    let http: u64 = s.latest.values().map(|v| v.http_down_bytes).sum();
    let p2p: u64 = s.latest.values().map(|v| v.p2p_down_bytes).sum();
    let share = if http + p2p > 0 {
        format!("{:.1}%", http as f64 * 100.0 / (http + p2p) as f64)
    } else {
        "n/a".into()
    };
    let mut text = format!(
        "viewers: {} requested, {} started, {} failed or lost\nplayers: HTTP {:.1} MB, P2P {:.1} MB, HTTP share {share}",
        plan.viewers,
        started,
        failed,
        http as f64 / 1e6,
        p2p as f64 / 1e6,
    );
    if let Some(e) = &s.last_exporter {
        let get = |k: &str| e.sums.get(k).copied().unwrap_or(0.0);
        let eh = get("peertube_playback_http_downloaded_bytes_total");
        let ep = get("peertube_playback_p2p_downloaded_bytes_total");
        if eh + ep > 0.0 {
            text.push_str(&format!(
                "\nexporter: HTTP {:.1} MB, P2P {:.1} MB, HTTP share {:.1}%",
                eh / 1e6,
                ep / 1e6,
                eh * 100.0 / (eh + ep)
            ));
        }
    }
    let p2p_viewers = plan.viewer_plans().iter().filter(|v| v.p2p).count();
    if p2p_viewers >= 2 && s.max_peers == 0 && started >= 2 {
        text.push_str("\nwarning: no P2P peer ever connected; the P2P share of this run is not a finding (check ICE candidates, tracker reachability, or the fleet's network)");
    }
    for (viewer, reason) in s.failures.iter().take(5) {
        text.push_str(&format!("\nviewer {viewer}: {reason}"));
    }
    text
}

fn write_manifest(
    plan: &Plan,
    ctx: &RunContext,
    fleet: &dyn Fleet,
    target: &dyn Target,
    viewer_url: &str,
    started_wall: chrono::DateTime<chrono::Utc>,
) -> anyhow::Result<()> {
    let manifest = Manifest {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        git_commit: hostinfo::git_commit(),
        command_line: ctx.rerun_command.clone(),
        scenario_name: plan.name.clone(),
        started_at: started_wall.to_rfc3339(),
        started_at_unix_ms: started_wall.timestamp_millis() as u64,
        ended_at: None,
        exit_status: None,
        host: hostinfo::host_info(),
        versions: hostinfo::tool_versions(&[
            ("chromium", "/usr/lib/chromium/chromium", &["--version"]),
            ("chromedriver", "chromedriver", &["--version"]),
            ("ffmpeg", "ffmpeg", &["-version"]),
            ("kernel", "uname", &["-r"]),
        ]),
        fleet: fleet.description(plan),
        target: TargetDescription {
            kind: match plan.target.kind {
                TargetKind::Refsite => "refsite".into(),
                TargetKind::Peertube => "peertube".into(),
            },
            video: match plan.target.video {
                VideoKind::Live => "live".into(),
                VideoKind::Vod => "vod".into(),
            },
            latency: (plan.target.video == VideoKind::Live).then(|| {
                match plan.target.latency {
                    Latency::Normal => "normal",
                    Latency::High => "high",
                }
                .to_string()
            }),
            viewer_url: viewer_url.to_string(),
            exporter_url: target.exporter_url(),
            playback_metrics_interval_s: Some(plan.target.metrics_interval.as_secs_f64()),
        },
        plan: PlanSummary {
            viewers: plan.viewers,
            p2p_off_share: plan.p2p_off_share,
            ramp_s: plan.ramp.as_secs_f64(),
            duration_s: plan.duration.as_secs_f64(),
            sampling_interval_s: plan.sampling_interval.as_secs_f64(),
            measure_at_s: plan.measure_at.as_secs_f64(),
            steady_window_s: plan.steady_window.as_secs_f64(),
            network: NetworkProfileSummary {
                download_kbps: plan.network.and_then(|n| n.download_kbps),
                upload_kbps: plan.network.and_then(|n| n.upload_kbps),
                latency_ms: plan.network.and_then(|n| n.latency_ms),
            },
            max_failed_viewers: plan.max_failed_viewers,
        },
    };
    let json = serde_json::to_vec_pretty(&manifest)?;
    rawdata::write_atomic(&ctx.out.join(rawdata::MANIFEST), &json)
        .with_context(|| format!("writing the manifest in {}", ctx.out.display()))
}

/// Stamps the end time and exit status on the manifest (if it was written at all).
fn finish_manifest(
    out: &Path,
    code: u8,
    interrupted: bool,
    signal: Option<&str>,
) -> anyhow::Result<()> {
    let path = out.join(rawdata::MANIFEST);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(());
    };
    let mut manifest: Manifest = serde_json::from_str(&text)?;
    manifest.ended_at = Some(chrono::Utc::now().to_rfc3339());
    manifest.exit_status = Some(if interrupted {
        format!("interrupted by {}", signal.unwrap_or("a stop request"))
    } else {
        format!("exit code {code}")
    });
    rawdata::write_atomic(&path, &serde_json::to_vec_pretty(&manifest)?)?;
    Ok(())
}
