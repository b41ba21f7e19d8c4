//! Measuring one profile: K viewers play the target through one chromedriver (a browser
//! each, or `per_browser` to a browser); after a warm-up, the browsers' PSS (sampled) and
//! CPU time (delta) over a window are summed over every process below the driver, and the
//! players' own counters say what they fetched, which segments they asked for over time
//! and at which renditions, so `fidelity` can check a cheaper profile behaves the same.

use super::fidelity::Fidelity;
use super::profiles::BrowserProfile;
use crate::model::kinds::VideoKind;
use crate::model::scenario::ViewerPlan;
use crate::sys::hostinfo;
use crate::sys::shutdown::Shutdown;
use crate::target::{PlayerStats, Target};
use crate::viewer::{SharedBrowser, SlotShaping, Viewer, ViewerError, ViewerSlot, ViewerTimeouts};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the bytes, segments, renditions and P2P share of a profile are counted over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BytesBasis {
    /// The window (live: the player fetches as the stream goes).
    #[default]
    Window,
    /// Each viewer's first T seconds after its page opened, T the same for the profiles
    /// compared (VOD: the player and the P2P engine fetch ahead as fast as the link
    /// allows, so a window of wall-clock time would depend on how fast viewers started).
    SinceOpen,
}

impl BytesBasis {
    pub fn for_video(video: VideoKind) -> Self {
        match video {
            VideoKind::Live => BytesBasis::Window,
            VideoKind::Vod => BytesBasis::SinceOpen,
        }
    }

    pub fn words(self) -> &'static str {
        match self {
            BytesBasis::Window => "bytes of the window",
            BytesBasis::SinceOpen => "bytes in each viewer's first seconds",
        }
    }
}

fn live() -> VideoKind {
    VideoKind::Live
}

/// Seconds between the points of `ProfileFigures::over_time`.
pub const OVER_TIME_STEP_S: f64 = 5.0;

/// What a viewer had done `t_s` seconds after its page opened, mean over the viewers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TimePoint {
    pub t_s: f64,
    /// HTTP + P2P bytes downloaded.
    pub download_bytes: f64,
    pub p2p_bytes: f64,
    /// Media segments requested.
    pub segments: f64,
}

/// What one profile cost, per playing viewer, over the window, and what its viewers did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileFigures {
    pub profile: BrowserProfile,
    /// The video played (older files: live).
    #[serde(default = "live")]
    pub video: VideoKind,
    /// 0-based round of `--repeat`.
    #[serde(default)]
    pub round: u32,
    pub viewers: u32,
    /// Viewers that played and were read at both ends of the window.
    pub viewers_measured: u32,
    /// Browsers (WebDriver sessions) the viewers played in.
    #[serde(default)]
    pub browsers: u32,
    /// Why others were not (session refused, no first frame, …).
    pub failures: Vec<String>,
    pub processes_per_viewer: f64,
    /// Mean of the PSS samples taken during the window.
    pub pss_mb_per_viewer: f64,
    pub pss_mb_per_viewer_max: f64,
    /// CPU cores (CPU seconds per second) per viewer.
    pub cpu_cores_per_viewer: f64,
    pub http_kbps_per_viewer: f64,
    pub p2p_down_kbps_per_viewer: f64,
    pub p2p_up_kbps_per_viewer: f64,
    pub stalls: u32,
    pub ttff_ms_median: Option<f64>,
    pub window_s: f64,
    /// What the fidelity figures below are counted over.
    #[serde(default)]
    pub bytes_basis: BytesBasis,
    /// Bytes downloaded per viewer (HTTP + P2P) over the basis.
    #[serde(default)]
    pub download_bytes_per_viewer: f64,
    /// P2P downloaded / (HTTP + P2P downloaded) over the basis, in percent.
    #[serde(default)]
    pub p2p_share_pct: f64,
    /// Media segments requested per viewer over the basis.
    #[serde(default)]
    pub segments_per_viewer: f64,
    /// Mean bytes of one loaded segment.
    #[serde(default)]
    pub segment_bytes_mean: f64,
    /// Share (percent) of the segments loaded over the basis at each rendition height.
    #[serde(default)]
    pub renditions: BTreeMap<String, f64>,
    /// Every `OVER_TIME_STEP_S` seconds after each page opened: what the viewers had
    /// downloaded and requested by then (means over the viewers measured).
    #[serde(default)]
    pub over_time: Vec<TimePoint>,
    /// Every measured viewer had its video track deselected (`None`: not exposed).
    #[serde(default)]
    pub video_track_off: Option<bool>,
    /// Against the default profile of the same video and round (none for the default).
    #[serde(default)]
    pub fidelity: Option<Fidelity>,
}

impl ProfileFigures {
    /// Everything a viewer downloaded (HTTP + P2P) per second of the window.
    pub fn download_kbps_per_viewer(&self) -> f64 {
        self.http_kbps_per_viewer + self.p2p_down_kbps_per_viewer
    }

    /// The last point of `over_time` at or before `t_s`.
    pub fn at(&self, t_s: f64) -> Option<&TimePoint> {
        self.over_time
            .iter()
            .take_while(|p| p.t_s <= t_s + 1e-6)
            .last()
    }

    /// Figures of a profile whose viewers measured nothing (yet).
    pub fn empty(profile: BrowserProfile, viewers: u32) -> Self {
        Self {
            profile,
            video: VideoKind::Live,
            round: 0,
            viewers,
            viewers_measured: 0,
            browsers: 0,
            failures: Vec::new(),
            processes_per_viewer: 0.0,
            pss_mb_per_viewer: 0.0,
            pss_mb_per_viewer_max: 0.0,
            cpu_cores_per_viewer: 0.0,
            http_kbps_per_viewer: 0.0,
            p2p_down_kbps_per_viewer: 0.0,
            p2p_up_kbps_per_viewer: 0.0,
            stalls: 0,
            ttff_ms_median: None,
            window_s: 0.0,
            bytes_basis: BytesBasis::Window,
            download_bytes_per_viewer: 0.0,
            p2p_share_pct: 0.0,
            segments_per_viewer: 0.0,
            segment_bytes_mean: 0.0,
            renditions: BTreeMap::new(),
            over_time: Vec::new(),
            video_track_off: None,
            fidelity: None,
        }
    }
}

/// How a profile is measured.
pub struct MeasureSpec<'a> {
    pub webdriver_url: String,
    pub chromium: String,
    pub driver_pid: u32,
    pub viewers: &'a [ViewerPlan],
    pub video: VideoKind,
    pub warmup: Duration,
    pub window: Duration,
    pub pss_every: Duration,
}

/// One viewer of a profile: its index, its viewer, when its page was opened.
struct Started {
    index: u32,
    viewer: Viewer,
    opened: Instant,
}

/// The viewers and shared browsers of one profile, closed on every path.
#[derive(Default)]
struct Running {
    viewers: Vec<Started>,
    browsers: Vec<Arc<SharedBrowser>>,
}

impl Running {
    async fn close(self) {
        for Started { viewer, .. } in self.viewers {
            // A tab goes with its browser's session below.
            if viewer.shared_browser().is_none() {
                viewer.close().await;
            }
        }
        for browser in self.browsers {
            browser.close().await;
        }
    }
}

/// Plays, measures and closes every viewer of `profile`. Viewers are closed on every path,
/// including a shutdown signal (then the figures are `None`).
pub async fn measure_profile(
    spec: &MeasureSpec<'_>,
    profile: &BrowserProfile,
    target: &dyn Target,
    shutdown: &Shutdown,
) -> Option<ProfileFigures> {
    // Outside the measurement, so a shutdown that drops it still closes every viewer.
    let mut running = Running::default();
    let figures = tokio::select! {
        f = play_and_measure(spec, profile, target, &mut running) => Some(f),
        _ = shutdown.wait() => None,
    };
    running.close().await;
    wait_for_browsers_gone(spec.driver_pid, Duration::from_secs(20)).await;
    figures
}

async fn play_and_measure(
    spec: &MeasureSpec<'_>,
    profile: &BrowserProfile,
    target: &dyn Target,
    running: &mut Running,
) -> ProfileFigures {
    let mut failures = Vec::new();
    start_viewers(spec, profile, target, running, &mut failures).await;
    let playing = first_frames(&running.viewers, target, &mut failures).await;
    let window = sample(spec, &running.viewers, &playing, target).await;
    let mut figures = figures(spec, profile, &playing, &window, failures);
    figures.browsers = if profile.per_browser > 1 {
        running.browsers.len() as u32
    } else {
        running.viewers.len() as u32
    };
    figures
}

fn local_slot(spec: &MeasureSpec<'_>, viewers: u32) -> ViewerSlot {
    ViewerSlot {
        webdriver_url: spec.webdriver_url.clone(),
        chrome_binary: Some(spec.chromium.clone()),
        extra_args: vec!["--remote-debugging-pipe".into()],
        node: "local".into(),
        address: None,
        shaping: SlotShaping::NONE,
        viewers,
    }
}

/// Sessions (or shared browsers) one at a time (chromedriver starts browsers serially
/// anyway), pages opened as soon as each viewer exists.
async fn start_viewers(
    spec: &MeasureSpec<'_>,
    profile: &BrowserProfile,
    target: &dyn Target,
    running: &mut Running,
    failures: &mut Vec<String>,
) {
    let setup = profile.setup();
    for group in spec.viewers.chunks(profile.per_browser.max(1) as usize) {
        let slot = local_slot(spec, group.len() as u32);
        if profile.per_browser <= 1 {
            let plan = &group[0];
            let created = Viewer::create_with(&slot, ViewerTimeouts::default(), &setup).await;
            match prepare(created, &slot, plan, target).await {
                Ok((viewer, opened)) => running.viewers.push(Started {
                    index: plan.index,
                    viewer,
                    opened,
                }),
                Err(err) => failures.push(format!("viewer {}: {err}", plan.index)),
            }
            continue;
        }
        let browser = match SharedBrowser::create(&slot, ViewerTimeouts::default(), &setup).await {
            Ok(browser) => browser,
            Err(err) => {
                failures.extend(group.iter().map(|p| format!("viewer {}: {err}", p.index)));
                continue;
            }
        };
        running.browsers.push(browser.clone());
        for plan in group {
            match prepare(browser.open_viewer().await, &slot, plan, target).await {
                Ok((viewer, opened)) => running.viewers.push(Started {
                    index: plan.index,
                    viewer,
                    opened,
                }),
                Err(err) => failures.push(format!("viewer {}: {err}", plan.index)),
            }
        }
    }
}

/// Throttles a new viewer and opens its page (returned with when it was opened); a viewer
/// that cannot is closed.
async fn prepare(
    created: Result<Viewer, ViewerError>,
    slot: &ViewerSlot,
    plan: &ViewerPlan,
    target: &dyn Target,
) -> Result<(Viewer, Instant), ViewerError> {
    let viewer = created?;
    let prepared = async {
        if let Some(network) = &plan.network {
            viewer.throttle(network, slot).await?;
        }
        viewer.open(target, plan.p2p).await
    }
    .await;
    match prepared {
        Ok(opened) => Ok((viewer, opened)),
        Err(err) => {
            viewer.close().await;
            Err(err)
        }
    }
}

/// A viewer that played: its place in `Running::viewers` and its time to first frame.
struct Playing {
    at: usize,
    ttff_ms: f64,
}

async fn first_frames(
    viewers: &[Started],
    target: &dyn Target,
    failures: &mut Vec<String>,
) -> Vec<Playing> {
    let results = futures::future::join_all(viewers.iter().map(|s| {
        s.viewer
            .wait_first_frame(target, Duration::from_millis(500))
    }))
    .await;
    let mut playing = Vec::new();
    for (at, result) in results.into_iter().enumerate() {
        match result {
            Ok(ttff_ms) => playing.push(Playing { at, ttff_ms }),
            Err(err) => failures.push(format!("viewer {}: {err}", viewers[at].index)),
        }
    }
    playing
}

/// What the warm-up and the window recorded.
struct Window {
    before: Vec<Result<PlayerStats, ViewerError>>,
    after: Vec<Result<PlayerStats, ViewerError>>,
    pss: Vec<u64>,
    processes: Vec<u64>,
    cpu_s: f64,
    window_s: f64,
    /// What the viewers had done, every `OVER_TIME_STEP_S` after their own page opened.
    over_time: Vec<TimePoint>,
}

/// One viewer's reads: (s since its page opened, HTTP + P2P, P2P, segments requested).
type Trace = Vec<(f64, f64, f64, f64)>;

/// The warm-up, then the window: PSS every `pss_every`, CPU time across it, the players'
/// stats at both ends, and what each viewer had fetched over time throughout.
async fn sample(
    spec: &MeasureSpec<'_>,
    viewers: &[Started],
    playing: &[Playing],
    target: &dyn Target,
) -> Window {
    let read_all = || async {
        futures::future::join_all(playing.iter().map(|p| viewers[p.at].viewer.read(target))).await
    };
    let mut traces: Vec<Trace> = vec![Vec::new(); playing.len()];
    let mut record = |stats: &[Result<PlayerStats, ViewerError>]| {
        for ((trace, p), s) in traces.iter_mut().zip(playing).zip(stats) {
            if let Ok(s) = s {
                let requested = s.segments.as_ref().map_or(0, |c| c.requested);
                trace.push((
                    viewers[p.at].opened.elapsed().as_secs_f64(),
                    (s.http_bytes + s.p2p_down_bytes) as f64,
                    s.p2p_down_bytes as f64,
                    requested as f64,
                ));
            }
        }
    };
    let warm = Instant::now();
    while let Some(left) = spec
        .warmup
        .checked_sub(warm.elapsed())
        .filter(|d| !d.is_zero())
    {
        tokio::time::sleep(left.min(spec.pss_every)).await;
        record(&read_all().await);
    }
    let cpu_before = cpu_by_pid(spec.driver_pid);
    let before = read_all().await;
    record(&before);
    let started = Instant::now();
    let (mut pss, mut processes) = (Vec::new(), Vec::new());
    loop {
        let (bytes, count) = tree_pss(spec.driver_pid);
        pss.push(bytes);
        processes.push(count);
        let left = spec.window.saturating_sub(started.elapsed());
        if left.is_zero() {
            break;
        }
        tokio::time::sleep(left.min(spec.pss_every)).await;
        if !spec.window.saturating_sub(started.elapsed()).is_zero() {
            record(&read_all().await);
        }
    }
    let after = read_all().await;
    record(&after);
    let window_s = started.elapsed().as_secs_f64();
    let cpu_after = cpu_by_pid(spec.driver_pid);
    let cpu_s = cpu_after
        .iter()
        .map(|(pid, after)| after - cpu_before.get(pid).copied().unwrap_or(0.0))
        .filter(|d| *d > 0.0)
        .sum();
    Window {
        before,
        after,
        pss,
        processes,
        cpu_s,
        window_s,
        over_time: align(&traces, OVER_TIME_STEP_S),
    }
}

/// The viewers' traces on one time grid (every `step` seconds after each page opened, as
/// long as every viewer was read beyond it), interpolated linearly and averaged.
fn align(traces: &[Trace], step: f64) -> Vec<TimePoint> {
    let end = traces
        .iter()
        .map(|t| t.last().map_or(0.0, |p| p.0))
        .fold(f64::INFINITY, f64::min);
    if traces.is_empty() || !end.is_finite() {
        return Vec::new();
    }
    let value = |trace: &Trace, t: f64| -> (f64, f64, f64) {
        let after = trace.iter().position(|p| p.0 >= t);
        match after {
            Some(0) | None => {
                let p = if after.is_none() {
                    trace.last()
                } else {
                    trace.first()
                };
                p.map_or((0.0, 0.0, 0.0), |p| {
                    // Before the first read: from zero at the page's opening.
                    let k = if after == Some(0) && p.0 > 0.0 {
                        t / p.0
                    } else {
                        1.0
                    };
                    (p.1 * k, p.2 * k, p.3 * k)
                })
            }
            Some(i) => {
                let (a, b) = (trace[i - 1], trace[i]);
                let k = if b.0 > a.0 {
                    (t - a.0) / (b.0 - a.0)
                } else {
                    1.0
                };
                let mix = |x: f64, y: f64| x + (y - x) * k;
                (mix(a.1, b.1), mix(a.2, b.2), mix(a.3, b.3))
            }
        }
    };
    let n = traces.len() as f64;
    (1..)
        .map(|k| k as f64 * step)
        .take_while(|t| *t <= end)
        .map(|t| {
            let (mut d, mut p2p, mut seg) = (0.0, 0.0, 0.0);
            for trace in traces {
                let (a, b, c) = value(trace, t);
                d += a;
                p2p += b;
                seg += c;
            }
            TimePoint {
                t_s: t,
                download_bytes: d / n,
                p2p_bytes: p2p / n,
                segments: seg / n,
            }
        })
        .collect()
}

/// The figures of a profile from what its viewers recorded.
fn figures(
    spec: &MeasureSpec<'_>,
    profile: &BrowserProfile,
    playing: &[Playing],
    w: &Window,
    mut failures: Vec<String>,
) -> ProfileFigures {
    let basis = BytesBasis::for_video(spec.video);
    let mut deltas = Vec::new();
    let mut totals = Vec::new();
    for (before, after) in w.before.iter().zip(&w.after) {
        match (before, after) {
            (Ok(b), Ok(a)) => {
                deltas.push(delta(b, a));
                totals.push(delta(&PlayerStats::default(), a));
            }
            (Err(err), _) | (_, Err(err)) => failures.push(format!("reading stats: {err}")),
        }
    }
    let measured = deltas.len().max(1) as f64;
    let window_s = w.window_s.max(1e-3);
    let per_viewer_kbps = |bytes: u64| bytes as f64 * 8.0 / 1000.0 / window_s / measured;
    let sum = |list: &[StatsDelta], f: fn(&StatsDelta) -> u64| list.iter().map(f).sum::<u64>();
    let on_basis = match basis {
        BytesBasis::Window => &deltas,
        BytesBasis::SinceOpen => &totals,
    };
    let loaded = sum(on_basis, |d| d.segments_loaded);
    let n_playing = playing.len().max(1) as f64;
    let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len().max(1) as f64;
    let mut ttff: Vec<f64> = playing.iter().map(|p| p.ttff_ms).collect();
    ttff.sort_by(f64::total_cmp);
    let mut figures = ProfileFigures::empty(profile.clone(), spec.viewers.len() as u32);
    figures.video = spec.video;
    figures.viewers_measured = deltas.len() as u32;
    figures.failures = failures;
    figures.processes_per_viewer = mean(&w.processes) / n_playing;
    figures.pss_mb_per_viewer = mean(&w.pss) / 1e6 / n_playing;
    figures.pss_mb_per_viewer_max =
        w.pss.iter().copied().max().unwrap_or(0) as f64 / 1e6 / n_playing;
    figures.cpu_cores_per_viewer = w.cpu_s / window_s / n_playing;
    figures.http_kbps_per_viewer = per_viewer_kbps(sum(&deltas, |d| d.http));
    figures.p2p_down_kbps_per_viewer = per_viewer_kbps(sum(&deltas, |d| d.p2p_down));
    figures.p2p_up_kbps_per_viewer = per_viewer_kbps(sum(&deltas, |d| d.p2p_up));
    figures.stalls = deltas.iter().map(|d| d.stalls).sum();
    figures.ttff_ms_median = (!ttff.is_empty()).then(|| ttff[ttff.len() / 2]);
    figures.window_s = w.window_s;
    figures.bytes_basis = basis;
    figures.over_time = w.over_time.clone();
    let (down, p2p, requested) = match (basis, w.over_time.last()) {
        // The viewers' first T seconds, T the longest every one of them played.
        (BytesBasis::SinceOpen, Some(last)) => (last.download_bytes, last.p2p_bytes, last.segments),
        _ => (
            sum(&deltas, |d| d.http + d.p2p_down) as f64 / measured,
            sum(&deltas, |d| d.p2p_down) as f64 / measured,
            sum(&deltas, |d| d.segments_requested) as f64 / measured,
        ),
    };
    figures.download_bytes_per_viewer = down;
    figures.p2p_share_pct = 100.0 * p2p / down.max(1.0);
    figures.segments_per_viewer = requested;
    figures.segment_bytes_mean = if loaded > 0 {
        sum(on_basis, |d| d.segment_bytes) as f64 / loaded as f64
    } else {
        0.0
    };
    figures.renditions = rendition_shares(on_basis);
    figures.video_track_off = track_off(&w.after);
    figures
}

/// Percent of the segments loaded at each height.
fn rendition_shares(list: &[StatsDelta]) -> BTreeMap<String, f64> {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for d in list {
        for (height, n) in &d.by_height {
            *counts.entry(height.clone()).or_default() += n;
        }
    }
    let total = counts.values().sum::<u64>().max(1) as f64;
    counts
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(h, n)| (h, 100.0 * n as f64 / total))
        .collect()
}

fn track_off(stats: &[Result<PlayerStats, ViewerError>]) -> Option<bool> {
    let seen: Vec<bool> = stats
        .iter()
        .filter_map(|s| s.as_ref().ok()?.video_track_off)
        .collect();
    (!seen.is_empty()).then(|| seen.iter().all(|off| *off))
}

struct StatsDelta {
    http: u64,
    p2p_down: u64,
    p2p_up: u64,
    stalls: u32,
    segments_requested: u64,
    segments_loaded: u64,
    segment_bytes: u64,
    by_height: BTreeMap<String, u64>,
}

fn delta(before: &PlayerStats, after: &PlayerStats) -> StatsDelta {
    let segments = |s: &PlayerStats| s.segments.clone().unwrap_or_default();
    let (b, a) = (segments(before), segments(after));
    StatsDelta {
        http: after.http_bytes.saturating_sub(before.http_bytes),
        p2p_down: after.p2p_down_bytes.saturating_sub(before.p2p_down_bytes),
        p2p_up: after.p2p_up_bytes.saturating_sub(before.p2p_up_bytes),
        stalls: after.stalls.saturating_sub(before.stalls),
        segments_requested: a.requested.saturating_sub(b.requested),
        segments_loaded: a.loaded.saturating_sub(b.loaded),
        segment_bytes: a.bytes.saturating_sub(b.bytes),
        by_height: a
            .by_height
            .iter()
            .map(|(h, n)| {
                (
                    h.clone(),
                    n.saturating_sub(b.by_height.get(h).copied().unwrap_or(0)),
                )
            })
            .collect(),
    }
}

fn cpu_by_pid(root: u32) -> HashMap<u32, f64> {
    hostinfo::descendants_cpu(root).into_iter().collect()
}

/// PSS summed over every process below the driver (the browsers), and how many there are.
fn tree_pss(root: u32) -> (u64, u64) {
    let members = hostinfo::descendants_cpu(root);
    let pss = members
        .iter()
        .filter_map(|(pid, _)| hostinfo::pss_bytes(*pid))
        .sum();
    (pss, members.len() as u64)
}

/// Waits until the driver has no browser left, so the next profile starts from zero.
async fn wait_for_browsers_gone(root: u32, limit: Duration) {
    let deadline = Instant::now() + limit;
    while !hostinfo::descendants_cpu(root).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::SegmentCounts;

    #[test]
    fn deltas_never_go_negative() {
        let a = PlayerStats {
            http_bytes: 100,
            p2p_down_bytes: 50,
            stalls: 2,
            ..Default::default()
        };
        let b = PlayerStats {
            http_bytes: 300,
            p2p_down_bytes: 40,
            stalls: 3,
            ..Default::default()
        };
        let d = delta(&a, &b);
        assert_eq!((d.http, d.p2p_down, d.p2p_up, d.stalls), (200, 0, 0, 1));
    }

    #[test]
    fn renditions_are_shares_of_the_segments_loaded_on_the_basis() {
        let at = |by: &[(&str, u64)]| PlayerStats {
            segments: Some(SegmentCounts {
                requested: by.iter().map(|(_, n)| n).sum(),
                loaded: by.iter().map(|(_, n)| n).sum(),
                bytes: 0,
                by_height: by.iter().map(|(h, n)| (h.to_string(), *n)).collect(),
            }),
            ..Default::default()
        };
        // Two viewers: the window saw 1 + 3 segments at 720p and 0 + 4 at 480p.
        let deltas = [
            delta(
                &at(&[("240", 2), ("720", 5)]),
                &at(&[("240", 2), ("720", 6)]),
            ),
            delta(&at(&[("480", 1)]), &at(&[("480", 5), ("720", 3)])),
        ];
        let shares = rendition_shares(&deltas);
        assert_eq!(shares.len(), 2, "{shares:?}");
        assert_eq!(shares["720"], 50.0);
        assert_eq!(shares["480"], 50.0);
        assert_eq!(deltas[1].segments_requested, 7);
    }

    #[test]
    fn traces_are_aligned_on_each_viewers_own_clock() {
        // Viewer A read at 4, 8, 12 s after its page opened; viewer B at 6 and 11 s.
        let a: Trace = vec![
            (4.0, 400.0, 100.0, 2.0),
            (8.0, 800.0, 200.0, 4.0),
            (12.0, 1200.0, 300.0, 6.0),
        ];
        let b: Trace = vec![(6.0, 300.0, 0.0, 3.0), (11.0, 800.0, 50.0, 5.0)];
        let points = align(&[a, b], 5.0);
        // Up to 11 s (B's last read): points at 5 and 10 s.
        assert_eq!(points.len(), 2, "{points:?}");
        // At 5 s: A 500 (between 4 and 8 s), B 250 (from zero at its opening to 300 at 6 s).
        assert!(
            (points[0].download_bytes - 375.0).abs() < 1e-9,
            "{points:?}"
        );
        // At 10 s: A 1000, B 700.
        assert!(
            (points[1].download_bytes - 850.0).abs() < 1e-9,
            "{points:?}"
        );
        assert!((points[1].segments - 4.8).abs() < 1e-9, "{points:?}");
        assert!(align(&[], 5.0).is_empty());
    }
}
