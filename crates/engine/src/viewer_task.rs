//! One viewer's life in a run: wait for its arrival time, get a slot and a session (or,
//! with several viewers per browser, join its browser and open a tab), throttle, open the
//! page, wait for the first frame, sample until the run ends, and release session (tab)
//! and slot on every path. Every change is a raw-data event.

use super::browsers::{self, Browsers};
use super::recorder::Record;
use super::shared::Shared;
use crate::model::rawdata::{
    SegmentCounts, ViewerEvent, ViewerEventKind, ViewerNetwork, ViewerSample,
};
use crate::model::scenario::networks::ViewerAccess;
use crate::model::scenario::ViewerPlan;
use crate::target::PlayerStats;
use crate::viewer::ViewerSlot;
use crate::viewer::{Viewer, ViewerError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a shared browser may take to answer before it counts as gone.
const BROWSER_ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a churn replacement that had not played when the run ended is stopped, not failed.
const LATE_REPLACEMENT: &str =
    "a churn replacement that had not played yet when the run ended (not a failure: the plan did not ask for it)";

/// Consecutive failed stats reads after which a viewer counts as lost.
const LOST_AFTER_FAILED_READS: u32 = 3;

pub(super) async fn viewer_task(vp: ViewerPlan, shared: Arc<Shared>) {
    // The plan asks for it now plus its place on the ramp (a governed ramp: now).
    let due_s = shared.rec.now() + vp.start_after.as_secs_f64();
    let events = ViewerEvents::new(&vp, shared.clone(), due_s);
    tokio::select! {
        _ = tokio::time::sleep(vp.start_after) => {}
        _ = shared.run_end.cancelled() => {
            events.not_started(NotStarted::NotDue, None);
            return;
        }
    }
    let mut vp = vp;
    let mut events = events;
    // With churn, a viewer that leaves hands its place to a new one, here in the same loop.
    while let Some(left) = one_viewer(&vp, &events, &shared).await {
        if shared.run_end.is_cancelled() || !shared.churn.as_ref().is_some_and(|c| c.replace) {
            return;
        }
        vp = replacement(&left, &shared);
        events = ViewerEvents::new(&vp, shared.clone(), shared.rec.now());
        events.replaces(Some(left.index));
    }
}

/// The viewer who arrives in place of `left`: a new index, at once, the same network class
/// and P2P setting (so the mix stays as planned).
fn replacement(left: &ViewerPlan, shared: &Shared) -> ViewerPlan {
    let index = shared
        .next_viewer
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    ViewerPlan {
        index,
        start_after: Duration::ZERO,
        browser: index,
        ..left.clone()
    }
}

/// One viewer, all its lives; `Some(itself)` when it left on its own (churn).
async fn one_viewer(
    vp: &ViewerPlan,
    events: &ViewerEvents,
    shared: &Arc<Shared>,
) -> Option<ViewerPlan> {
    let policy = shared.fleet.start_policy();
    // One pass per life of the viewer: a viewer lost mid-run (its node died) is created
    // again when the fleet asks for it, as long as the run goes on.
    loop {
        let life = match &shared.browsers {
            Some(browsers) => shared_life(vp, shared, events, browsers).await,
            None => viewer_life(vp, shared, events, &policy).await,
        };
        match life {
            Life::Over => return None,
            Life::Left => return Some(vp.clone()),
            Life::Lost(reason, slot) => {
                events.emit(ViewerEventKind::Lost, Some(reason), Some(&slot));
                if !policy.recreate_lost || shared.run_end.is_cancelled() {
                    return None;
                }
            }
        }
    }
}

/// How far a viewer got when the run ended before its first frame. Every requested viewer
/// ends played, failed or lost: one that never played is failed with one of these reasons
/// (fixed sentences, so the report counts viewers per reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NotStarted {
    /// Its arrival time had not come (the run was cut short).
    NotDue,
    /// Due, but `max_parallel_starts` session requests were in flight until the end.
    WaitingToAsk,
    /// Its session request was queued at the Grid or being created (retries included).
    BeingCreated,
    /// Its shared browser (several viewers per browser) was still being created.
    WaitingForBrowser,
    /// The page opened, no first frame yet.
    NoFirstFrame,
}

impl NotStarted {
    pub(super) fn reason(self) -> &'static str {
        match self {
            NotStarted::NotDue => "never started: the run ended before its arrival time",
            NotStarted::WaitingToAsk => {
                "never started: still waiting to ask the fleet for a session when the run ended \
                 (max_parallel_starts requests were in flight all along)"
            }
            NotStarted::BeingCreated => {
                "never started: its session was still queued or being created by the fleet \
                 when the run ended"
            }
            NotStarted::WaitingForBrowser => {
                "never started: its shared browser was still being created when the run ended"
            }
            NotStarted::NoFirstFrame => {
                "never started: the page opened but played no first frame before the run ended"
            }
        }
    }
}

enum Life {
    /// Ended for good (stopped, failed, or the run ended); already recorded.
    Over,
    /// Left on its own before the end (churn); already recorded.
    Left,
    /// Lost mid-run; the caller records it and may start a new life.
    Lost(String, ViewerSlot),
}

/// One session of a viewer, from asking for it to closing it.
async fn viewer_life(
    vp: &ViewerPlan,
    shared: &Arc<Shared>,
    events: &ViewerEvents,
    policy: &crate::fleet::StartPolicy,
) -> Life {
    // The run's end first: a permit freed by the end must not start a request.
    let permit = tokio::select! {
        biased;
        _ = shared.run_end.cancelled() => {
            events.not_started(NotStarted::WaitingToAsk, None);
            return Life::Over;
        }
        p = shared.starts.acquire() => p.ok(),
    };
    events.creating();
    let mut slot = match shared.fleet.open_viewer(vp).await {
        Ok(slot) => slot,
        Err(err) => {
            events.emit(
                ViewerEventKind::Failed,
                Some(format!("no slot: {err:#}")),
                None,
            );
            return Life::Over;
        }
    };
    let began = Instant::now();
    let created = create_with_retries(
        || Viewer::create_with(&slot, shared.timeouts.clone(), &shared.browser),
        shared,
        policy,
        events,
    )
    .await;
    let viewer = match created {
        Created::RunEnded(late) => {
            if let Some(late) = late {
                late.close().await;
            }
            shared.fleet.close_viewer(&slot).await;
            return Life::Over;
        }
        Created::Ok(v) => v,
        Created::Failed(reason) => {
            events.emit(ViewerEventKind::Failed, Some(reason), Some(&slot));
            shared.fleet.close_viewer(&slot).await;
            return Life::Over;
        }
    };
    shared
        .metrics
        .session_create_seconds
        .observe(began.elapsed().as_secs_f64());
    if let Some(id) = &viewer.session_id {
        shared.fleet.session_placed(&mut slot, id).await;
    }
    events.emit(ViewerEventKind::SessionCreated, None, Some(&slot));
    events.network(&slot);
    let outcome = drive(&viewer, vp, &slot, shared, permit, events).await;
    let session_id = viewer.session_id.clone();
    viewer.close().await;
    if let Some(id) = &session_id {
        shared.fleet.session_closed(id);
    }
    shared.fleet.close_viewer(&slot).await;
    ended(outcome, slot, events)
}

/// Records how a life ended; a lost viewer's caller records the loss.
fn ended(outcome: Drive, slot: ViewerSlot, events: &ViewerEvents) -> Life {
    match outcome {
        Drive::Finished => events.emit(ViewerEventKind::Stopped, None, Some(&slot)),
        // Recorded when it left, before its session was closed.
        Drive::Left => return Life::Left,
        Drive::Failed(reason) => events.emit(ViewerEventKind::Failed, Some(reason), Some(&slot)),
        Drive::Unstarted(stage) => events.not_started(stage, Some(&slot)),
        // `drive` turns a browser's loss into the browser's words before this.
        Drive::Lost(reason) | Drive::BrowserLost(reason) => return Life::Lost(reason, slot),
    }
    Life::Over
}

/// One life of a viewer in a shared browser: join the browser (the first viewer creates
/// it), open a tab, drive it, leave (the last viewer deletes the session). Tabs need no
/// start permit: only creating the browser takes one.
async fn shared_life(
    vp: &ViewerPlan,
    shared: &Arc<Shared>,
    events: &ViewerEvents,
    browsers: &Browsers,
) -> Life {
    events.creating();
    let entry = match browsers.join(vp, shared, events).await {
        Ok(entry) => entry,
        Err(err) => {
            browsers::record_failure(events, err);
            return Life::Over;
        }
    };
    let slot = entry.slot.clone();
    let viewer = match entry.browser.open_viewer().await {
        Ok(viewer) => viewer,
        Err(err) => {
            count_error(shared, &err);
            let reason = if entry.browser.is_gone() {
                entry.mark_lost(&err.to_string())
            } else {
                format!("opening its tab: {err}")
            };
            browsers.leave(&entry, None, shared).await;
            events.emit(ViewerEventKind::Failed, Some(reason), Some(&slot));
            return Life::Over;
        }
    };
    events.emit(ViewerEventKind::SessionCreated, None, Some(&slot));
    events.network(&slot);
    let outcome = match drive(&viewer, vp, &slot, shared, None, events).await {
        Drive::BrowserLost(detail) => Drive::Lost(entry.mark_lost(&detail)),
        Drive::Failed(reason) if entry.browser.is_gone() => Drive::Failed(entry.mark_lost(&reason)),
        other => other,
    };
    browsers.leave(&entry, Some(viewer), shared).await;
    ended(outcome, slot, events)
}

/// How a session (or shared browser) creation ended.
pub(super) enum Created<T> {
    Ok(T),
    /// Refused after the fleet's retries: why.
    Failed(String),
    /// The run ended first; the viewer's failure is recorded. A request in flight then was
    /// let finish (the Grid would start it anyway): its session, if any, is here to close.
    RunEnded(Option<T>),
}

/// Session (or shared browser) creation with the fleet's retries: a refused session
/// (`SessionNotCreated`, a queue timeout) is asked for again after a back-off that doubles
/// up to 60 s. When the run ends first, the viewer is recorded as never started and a
/// request in flight is waited for (the run's close bounds the wait), so its session is
/// closed by the run, not left to the Grid.
pub(super) async fn create_with_retries<T, F, Fut>(
    make: F,
    shared: &Shared,
    policy: &crate::fleet::StartPolicy,
    events: &ViewerEvents,
) -> Created<T>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, ViewerError>>,
{
    let mut backoff =
        crate::sys::backoff::Backoff::new(policy.retry_backoff, Duration::from_secs(60));
    let mut attempt = 0;
    // Nothing of this life is in flight at the fleet (before the first request, or after a
    // refusal): if the run ends now, no late session can come of it.
    let mut nothing_in_flight = true;
    let run_ended = |nothing_in_flight: bool| {
        events.not_started(NotStarted::BeingCreated, None);
        if nothing_in_flight {
            shared.fleet.session_refused();
        }
    };
    loop {
        if shared.run_end.is_cancelled() {
            run_ended(nothing_in_flight);
            return Created::RunEnded(None);
        }
        // The request goes out before the run's end is looked at again.
        let request = make();
        tokio::pin!(request);
        let created = tokio::select! {
            biased;
            v = &mut request => v,
            _ = shared.run_end.cancelled() => {
                events.not_started(NotStarted::BeingCreated, None);
                let late = request.await;
                // Closed by the caller (or refused): nothing of this life is left to sweep.
                if late.is_ok() || matches!(late, Err(ViewerError::Session(_))) {
                    shared.fleet.session_refused();
                }
                return Created::RunEnded(late.ok());
            }
        };
        match created {
            Ok(v) => return Created::Ok(v),
            Err(err) => {
                // The fleet counts one request per life (open_viewer): a life that ends on a
                // refusal, or waits out a back-off when the run ends, has none in flight.
                let refused = matches!(err, ViewerError::Session(_));
                nothing_in_flight = refused;
                count_error(shared, &err);
                if attempt >= policy.session_retries {
                    if refused {
                        shared.fleet.session_refused();
                    }
                    return Created::Failed(if attempt > 0 {
                        format!("refused by the fleet after {} attempts: {err}", attempt + 1)
                    } else {
                        err.to_string()
                    });
                }
                attempt += 1;
                events.emit(
                    ViewerEventKind::Creating,
                    Some(format!("attempt {} after refusal: {err}", attempt + 1)),
                    None,
                );
                tokio::select! {
                    _ = tokio::time::sleep(backoff.next_wait()) => {}
                    _ = shared.run_end.cancelled() => {
                        run_ended(refused);
                        return Created::RunEnded(None);
                    }
                }
            }
        }
    }
}

enum Drive {
    Finished,
    /// The run ended before its first frame.
    Unstarted(NotStarted),
    /// Left on its own (churn); already recorded.
    Left,
    Failed(String),
    Lost(String),
    /// The viewer's shared browser is gone (with every viewer in it).
    BrowserLost(String),
}

async fn drive(
    viewer: &Viewer,
    vp: &ViewerPlan,
    slot: &ViewerSlot,
    shared: &Shared,
    permit: Option<tokio::sync::SemaphorePermit<'_>>,
    events: &ViewerEvents,
) -> Drive {
    let target = shared.target.as_ref();
    let failed = |err: ViewerError| {
        count_error(shared, &err);
        Drive::Failed(err.to_string())
    };
    if let Some(profile) = &vp.network {
        if let Err(err) = viewer.throttle(profile, slot).await {
            return failed(err);
        }
    }
    if let Err(err) = viewer.open(target, vp.p2p).await {
        return failed(err);
    }
    events.emit(ViewerEventKind::PageOpened, None, Some(slot));
    let ttff = tokio::select! {
        r = viewer.wait_first_frame(target, Duration::from_millis(250)) => r,
        _ = shared.run_end.cancelled() => return Drive::Unstarted(NotStarted::NoFirstFrame),
    };
    // The next viewer may start its session while this one plays.
    drop(permit);
    match ttff {
        Ok(ms) => events.playing(slot, ms),
        Err(err) => return failed(err),
    }
    let mut failed_reads = 0;
    let mut previous: Option<ViewerSample> = None;
    let mut last_ice = None;
    let mut ticker = tokio::time::interval(shared.sampling_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // With churn, the viewer leaves once it has watched its drawn time.
    let watch = shared.churn.as_ref().and_then(|c| c.watch_for(vp.index));
    let leave_at = watch.map(|w| tokio::time::Instant::now() + w);
    let leave = async {
        match leave_at {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(leave);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = shared.run_end.cancelled() => return Drive::Finished,
            _ = &mut leave => {
                let watched = watch.unwrap_or_default();
                events.emit(
                    ViewerEventKind::Left,
                    Some(format!(
                        "left after watching {:.1} s, as drawn (viewers.churn)",
                        watched.as_secs_f64()
                    )),
                    Some(slot),
                );
                return Drive::Left;
            }
        }
        match viewer.read(target).await {
            Ok(stats) => {
                failed_reads = 0;
                let mut sample = to_sample(shared.rec.now(), vp.index, &stats);
                // The connection list is written when it changed: it only grows.
                if sample.ice.is_some() && sample.ice == last_ice {
                    sample.ice = None;
                } else if sample.ice.is_some() {
                    last_ice = sample.ice.clone();
                }
                account(shared, previous.as_ref(), &sample);
                events.set_stalled(!sample.playing);
                {
                    let mut live = shared.live();
                    live.max_peers = live.max_peers.max(sample.peers);
                    live.latest.insert(vp.index, sample.clone());
                }
                shared.rec.send(Record::ViewerSample(sample.clone()));
                previous = Some(sample);
            }
            Err(err) => {
                if shared.run_end.is_cancelled() {
                    return Drive::Finished;
                }
                count_error(shared, &err);
                if let Some(lost) = tab_loss(viewer, &err).await {
                    return lost;
                }
                failed_reads += 1;
                if failed_reads >= LOST_AFTER_FAILED_READS {
                    return Drive::Lost(format!(
                        "stats unreadable {LOST_AFTER_FAILED_READS} times in a row: {err}"
                    ));
                }
            }
        }
    }
}

/// For a viewer in a shared browser: whether a failed read lost only its tab (it crashed)
/// or the whole browser (its socket closed, or it no longer answers). `None`: neither, or
/// a viewer with a browser of its own (counted by failed reads as ever).
async fn tab_loss(viewer: &Viewer, err: &ViewerError) -> Option<Drive> {
    let browser = viewer.shared_browser()?;
    match err {
        ViewerError::TabCrashed => Some(Drive::Lost("tab crashed".into())),
        ViewerError::BrowserGone(_) => Some(Drive::BrowserLost(err.to_string())),
        _ if !browser.answers(BROWSER_ANSWER_TIMEOUT).await => Some(Drive::BrowserLost(format!(
            "{err}, and the browser no longer answers"
        ))),
        _ => None,
    }
}

/// Adds this sample's progress over the previous one to the controller's counters.
fn account(shared: &Shared, previous: Option<&ViewerSample>, now: &ViewerSample) {
    let (h, p, u, s) = previous
        .map(|p| {
            (
                p.http_down_bytes,
                p.p2p_down_bytes,
                p.p2p_up_bytes,
                p.stalls,
            )
        })
        .unwrap_or_default();
    let m = &shared.metrics;
    m.player_http_bytes
        .inc_by(now.http_down_bytes.saturating_sub(h));
    m.player_p2p_down_bytes
        .inc_by(now.p2p_down_bytes.saturating_sub(p));
    m.player_p2p_up_bytes
        .inc_by(now.p2p_up_bytes.saturating_sub(u));
    m.player_stalls.inc_by(now.stalls.saturating_sub(s) as u64);
    let peers_before = previous.map(|p| p.peers as i64).unwrap_or(0);
    m.player_peers.add(now.peers as i64 - peers_before);
}

fn count_error(shared: &Shared, err: &ViewerError) {
    let kind = match err {
        ViewerError::Session(_) => "session_not_created",
        ViewerError::Timeout { .. } => "timeout",
        ViewerError::Command { .. } => "command",
        ViewerError::NeverPlayed { .. } => "never_played",
        ViewerError::Profile(_) => "profile",
        ViewerError::TabCrashed => "tab_crashed",
        ViewerError::BrowserGone(_) => "browser_gone",
    };
    shared
        .metrics
        .webdriver_errors
        .with_label_values(&[kind])
        .inc();
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
        live_latency_s: s.live_latency_s,
        stalls: s.stalls,
        stalled_ms: s.stalled_ms,
        resolution: s.resolution,
        dropped_frames: s.dropped_frames,
        errors: s.errors,
        http: s.http,
        rtc: s.rtc,
        engine: s.engine,
        lag: s.lag,
        segments: s.segments.as_ref().map(|c| SegmentCounts {
            requested: c.requested,
            loaded: c.loaded,
            bytes: c.bytes,
            by_height: c.by_height.clone(),
        }),
        video_track_off: s.video_track_off,
        ice: s.ice.clone(),
    }
}

/// Records one viewer's life events in raw data, the live state and the metrics.
pub(super) struct ViewerEvents {
    viewer: u32,
    p2p: bool,
    access: ViewerAccess,
    /// The viewer this one replaces (churn): named in its first `creating` event.
    replaces: std::sync::Mutex<Option<u32>>,
    /// A churn replacement: the plan did not ask for it, so the run's end before its first
    /// frame is not a failure.
    replacement: std::sync::atomic::AtomicBool,
    shared: Arc<Shared>,
    /// When the plan asked for it; written on its first event.
    due_s: f64,
    announced: std::sync::atomic::AtomicBool,
    /// It played a first frame in some life.
    played: std::sync::atomic::AtomicBool,
    /// The state as exported (`viewerfleet_viewers{state}`), which also knows `stalled`.
    exported: std::sync::Mutex<Option<&'static str>>,
}

impl ViewerEvents {
    fn new(vp: &ViewerPlan, shared: Arc<Shared>, due_s: f64) -> Self {
        Self {
            viewer: vp.index,
            p2p: vp.p2p,
            access: vp.access,
            replaces: std::sync::Mutex::new(None),
            replacement: Default::default(),
            shared,
            due_s,
            announced: Default::default(),
            played: Default::default(),
            exported: std::sync::Mutex::new(None),
        }
    }

    fn replaces(&self, viewer: Option<u32>) {
        self.replacement
            .store(viewer.is_some(), std::sync::atomic::Ordering::Relaxed);
        *self.replaces.lock().unwrap_or_else(|e| e.into_inner()) = viewer;
    }

    /// `creating`; a replacement's first says whom it replaces.
    fn creating(&self) {
        let replaces = self
            .replaces
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let reason = replaces.map(|v| format!("replaces viewer {v}, who left (viewers.churn)"));
        self.emit(ViewerEventKind::Creating, reason, None);
    }

    /// Where this life of the viewer sits (`raw/viewer_networks.jsonl`).
    fn network(&self, slot: &ViewerSlot) {
        let class = self
            .access
            .class
            .and_then(|k| self.shared.networks.get(k as usize));
        let rec = &self.shared.rec;
        rec.send(Record::Network(ViewerNetwork {
            t: rec.now(),
            viewer: self.viewer,
            class: class.map(|c| c.name.clone()),
            profile: class.and_then(|c| c.profile_name.clone()),
            nat: slot.nat.unwrap_or(self.access.nat),
            stack: self.access.stack,
            node: Some(slot.node.clone()),
            addresses: slot.public_addresses.clone(),
        }));
    }

    fn playing(&self, slot: &ViewerSlot, ttff_ms: f64) {
        self.played
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.record(ViewerEventKind::Playing, None, Some(slot), Some(ttff_ms));
    }

    /// The run ended before this life's first frame: a viewer that never played is failed
    /// with the stage it was at; a re-creation after a loss (already counted lost) stops.
    pub(super) fn not_started(&self, stage: NotStarted, slot: Option<&ViewerSlot>) {
        if self.played.load(std::sync::atomic::Ordering::Relaxed) {
            self.emit(ViewerEventKind::Stopped, None, slot);
        } else if self.replacement.load(std::sync::atomic::Ordering::Relaxed) {
            self.emit(
                ViewerEventKind::Stopped,
                Some(LATE_REPLACEMENT.into()),
                slot,
            );
        } else {
            self.emit(ViewerEventKind::Failed, Some(stage.reason().into()), slot);
        }
    }

    pub(super) fn emit(
        &self,
        kind: ViewerEventKind,
        reason: Option<String>,
        slot: Option<&ViewerSlot>,
    ) {
        self.record(kind, reason, slot, None);
    }

    fn set_stalled(&self, stalled: bool) {
        let current = *self.exported.lock().unwrap_or_else(|e| e.into_inner());
        match (current, stalled) {
            (Some("playing"), true) => self.export("stalled"),
            (Some("stalled"), false) => self.export("playing"),
            _ => {}
        }
    }

    fn export(&self, state: &'static str) {
        let mut current = self.exported.lock().unwrap_or_else(|e| e.into_inner());
        self.shared.metrics.move_viewer(*current, Some(state));
        *current = Some(state);
    }

    fn record(
        &self,
        kind: ViewerEventKind,
        reason: Option<String>,
        slot: Option<&ViewerSlot>,
        ttff_ms: Option<f64>,
    ) {
        {
            let mut live = self.shared.live();
            live.states.insert(self.viewer, kind);
            if let (Some(r), ViewerEventKind::Failed | ViewerEventKind::Lost) = (&reason, kind) {
                tracing::warn!(viewer = self.viewer, "viewer {} {kind:?}: {r}", self.viewer);
                live.failures.push((self.viewer, r.clone()));
            }
        }
        let state = match kind {
            ViewerEventKind::Creating
            | ViewerEventKind::SessionCreated
            | ViewerEventKind::PageOpened => "starting",
            ViewerEventKind::Playing => "playing",
            ViewerEventKind::Failed => "failed",
            ViewerEventKind::Lost => "lost",
            ViewerEventKind::Stopped | ViewerEventKind::Left => "stopped",
        };
        let current = *self.exported.lock().unwrap_or_else(|e| e.into_inner());
        if current != Some(state) {
            self.export(state);
        }
        let rec = &self.shared.rec;
        rec.send(Record::ViewerEvent(ViewerEvent {
            t: rec.now(),
            viewer: self.viewer,
            event: kind,
            p2p: self.p2p,
            reason,
            node: slot.map(|s| s.node.clone()),
            address: slot.and_then(|s| s.address.clone()),
            ttff_ms,
            due_s: (!self
                .announced
                .swap(true, std::sync::atomic::Ordering::Relaxed))
            .then_some(self.due_s),
        }));
    }
}
