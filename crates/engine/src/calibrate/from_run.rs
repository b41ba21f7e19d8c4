//! The figures of one calibration measurement, from its run folder's raw data only, so a
//! measurement can be computed again and audited from the folder any time.
//!
//! The window is the run's steady window (ending at its measurement point). Per viewer,
//! the players' cumulative counters are read at the window's edges (linearly between the
//! samples around each edge), so every viewer and every profile is measured over the same
//! seconds; stalls and renditions are counted between the last samples at or before each
//! edge (whole counts over a window of the same length). The browsers' CPU and memory come
//! from `cost` (host samples here; node samples for browsers elsewhere) and are divided by
//! the viewers that played.

use super::measure::{BytesBasis, ProfileFigures, TimePoint, OVER_TIME_STEP_S};
use super::profiles::BrowserProfile;
use crate::model::rawdata::{SegmentCounts, ViewerEventKind, ViewerSample};
use crate::report::cost::{self, Window};
use crate::report::RunData;
use std::collections::{BTreeMap, BTreeSet};

/// The figures of `profile` from the run in `run`. Viewers that did not play, were lost,
/// or were not read across the whole window are not measured, and `failures` says why.
pub fn figures(run: &RunData, profile: &BrowserProfile) -> ProfileFigures {
    let window = Window::of_run(run);
    let viewers = Viewers::of(run, window);
    let basis = BytesBasis::for_video(run.manifest.target.video);
    let mut figures = ProfileFigures::empty(profile.clone(), run.manifest.plan.viewers);
    figures.video = run.manifest.target.video;
    figures.failures = viewers.failures.clone();
    figures.browsers = viewers.browsers(run);
    figures.window_s = window.len_s();
    figures.bytes_basis = basis;
    let n_playing = viewers.playing.len().max(1) as f64;
    match cost::browser_cost(run, window) {
        Ok(cost) => {
            figures.processes_per_viewer = cost.processes_mean / n_playing;
            figures.pss_mb_per_viewer = cost.pss_mean_bytes / 1e6 / n_playing;
            figures.pss_mb_per_viewer_max = cost.pss_max_bytes / 1e6 / n_playing;
            figures.cpu_cores_per_viewer = cost.cores / n_playing;
        }
        Err(err) => figures.failures.push(format!("browser cost: {err}")),
    }
    let measured = &viewers.measured;
    figures.viewers_measured = measured.len() as u32;
    let count = measured.len().max(1) as f64;
    let window_s = window.len_s().max(1e-3);
    let per_viewer_kbps = |f: fn(&Measured) -> f64| {
        measured.iter().map(f).sum::<f64>() * 8.0 / 1000.0 / window_s / count
    };
    figures.http_kbps_per_viewer = per_viewer_kbps(|m| m.http);
    figures.p2p_down_kbps_per_viewer = per_viewer_kbps(|m| m.p2p_down);
    figures.p2p_up_kbps_per_viewer = per_viewer_kbps(|m| m.p2p_up);
    figures.stalls = measured.iter().map(|m| m.stalls).sum();
    let mut ttff: Vec<f64> = viewers.playing.values().map(|p| p.ttff_ms).collect();
    ttff.sort_by(f64::total_cmp);
    figures.ttff_ms_median = (!ttff.is_empty()).then(|| ttff[ttff.len() / 2]);
    figures.over_time = align(&viewers.traces(run, window), OVER_TIME_STEP_S);
    let sum = |f: fn(&Measured) -> f64| measured.iter().map(f).sum::<f64>();
    let (down, p2p, requested) = match (basis, figures.over_time.last()) {
        // The viewers' first T seconds, T the longest every one of them was read.
        (BytesBasis::SinceOpen, Some(last)) => (last.download_bytes, last.p2p_bytes, last.segments),
        _ => (
            sum(|m| m.http + m.p2p_down) / count,
            sum(|m| m.p2p_down) / count,
            sum(|m| m.requested) / count,
        ),
    };
    figures.download_bytes_per_viewer = down;
    figures.p2p_share_pct = 100.0 * p2p / down.max(1.0);
    figures.segments_per_viewer = requested;
    let (loaded, bytes, by_height) = match basis {
        BytesBasis::Window => (
            sum(|m| m.loaded),
            sum(|m| m.segment_bytes),
            heights(measured.iter().map(|m| &m.by_height)),
        ),
        BytesBasis::SinceOpen => {
            let totals: Vec<SegmentCounts> = measured.iter().map(|m| m.total.clone()).collect();
            (
                totals.iter().map(|c| c.loaded as f64).sum(),
                totals.iter().map(|c| c.bytes as f64).sum(),
                heights(totals.iter().map(|c| &c.by_height)),
            )
        }
    };
    figures.segment_bytes_mean = if loaded > 0.0 { bytes / loaded } else { 0.0 };
    figures.renditions = shares(by_height);
    let track: Vec<bool> = measured.iter().filter_map(|m| m.video_track_off).collect();
    figures.video_track_off = (!track.is_empty()).then(|| track.iter().all(|off| *off));
    figures
}

/// Seconds from the window's start back to the last viewer's first frame: the warm-up it
/// had (`None` when no viewer played).
pub fn warmup_of_last_viewer(run: &RunData) -> Option<f64> {
    let window = Window::of_run(run);
    run.viewer_events
        .iter()
        .filter(|e| e.event == ViewerEventKind::Playing)
        .map(|e| e.t)
        .fold(None, |last: Option<f64>, t| {
            Some(last.map_or(t, |l| l.max(t)))
        })
        .map(|last| window.from_s - last)
}

/// A viewer that played: when its page opened and its time to first frame.
struct Playing {
    opened_s: f64,
    ttff_ms: f64,
}

/// What one viewer did over the window.
struct Measured {
    http: f64,
    p2p_down: f64,
    p2p_up: f64,
    requested: f64,
    loaded: f64,
    segment_bytes: f64,
    stalls: u32,
    by_height: BTreeMap<String, u64>,
    /// Its counts at the window's end (the last sample at or before it).
    total: SegmentCounts,
    video_track_off: Option<bool>,
}

/// The run's viewers as the calibration sees them.
struct Viewers {
    playing: BTreeMap<u32, Playing>,
    measured: Vec<Measured>,
    failures: Vec<String>,
}

impl Viewers {
    fn of(run: &RunData, window: Window) -> Self {
        let mut playing = BTreeMap::new();
        let mut opened: BTreeMap<u32, f64> = BTreeMap::new();
        let mut ended_early = BTreeSet::new();
        let mut failures = Vec::new();
        for e in &run.viewer_events {
            match e.event {
                ViewerEventKind::PageOpened => {
                    opened.entry(e.viewer).or_insert(e.t);
                }
                ViewerEventKind::Playing => {
                    if let (Some(ttff_ms), Some(opened_s)) = (e.ttff_ms, opened.get(&e.viewer)) {
                        playing.entry(e.viewer).or_insert(Playing {
                            opened_s: *opened_s,
                            ttff_ms,
                        });
                    }
                }
                ViewerEventKind::Failed | ViewerEventKind::Lost => {
                    if e.t <= window.to_s {
                        ended_early.insert(e.viewer);
                    }
                    failures.push(format!(
                        "viewer {}: {}",
                        e.viewer,
                        e.reason.as_deref().unwrap_or(e.event.as_str())
                    ));
                }
                _ => {}
            }
        }
        let mut measured = Vec::new();
        for viewer in playing.keys() {
            if ended_early.contains(viewer) {
                continue;
            }
            let samples = samples_of(run, *viewer);
            match measure(&samples, window) {
                Some(m) => measured.push(m),
                None => failures.push(format!(
                    "viewer {viewer}: not read across the whole window ({:.0}–{:.0} s)",
                    window.from_s, window.to_s
                )),
            }
        }
        Self {
            playing,
            measured,
            failures,
        }
    }

    /// Browsers the viewers that got a session played in.
    fn browsers(&self, run: &RunData) -> u32 {
        let per_browser = run
            .manifest
            .fleet
            .packing
            .as_ref()
            .map_or(1, |p| p.per_browser.max(1));
        run.viewer_events
            .iter()
            .filter(|e| e.event == ViewerEventKind::SessionCreated)
            .map(|e| e.viewer / per_browser)
            .collect::<BTreeSet<_>>()
            .len() as u32
    }

    /// Every playing viewer's reads up to the window's end, on its own clock (seconds
    /// since its page opened).
    fn traces(&self, run: &RunData, window: Window) -> Vec<Trace> {
        self.playing
            .iter()
            .map(|(viewer, p)| {
                samples_of(run, *viewer)
                    .into_iter()
                    .filter(|s| s.t <= window.to_s + 1e-9)
                    .map(|s| {
                        (
                            s.t - p.opened_s,
                            (s.http_down_bytes + s.p2p_down_bytes) as f64,
                            s.p2p_down_bytes as f64,
                            s.segments.as_ref().map_or(0, |c| c.requested) as f64,
                        )
                    })
                    .collect()
            })
            .collect()
    }
}

fn samples_of(run: &RunData, viewer: u32) -> Vec<&ViewerSample> {
    let mut samples: Vec<&ViewerSample> = run
        .viewer_samples
        .iter()
        .filter(|s| s.viewer == viewer)
        .collect();
    samples.sort_by(|a, b| a.t.total_cmp(&b.t));
    samples
}

/// A viewer's counters over the window, or `None` when it was not read at or before the
/// window's start and at or after its end.
fn measure(samples: &[&ViewerSample], window: Window) -> Option<Measured> {
    let first = samples.first()?;
    let last = samples.last()?;
    if first.t > window.from_s + 1e-9 || last.t < window.to_s - 1e-9 {
        return None;
    }
    let at = |t: f64, f: &dyn Fn(&ViewerSample) -> f64| -> f64 {
        let after = samples
            .iter()
            .position(|s| s.t >= t)
            .unwrap_or(samples.len() - 1);
        let b = samples[after];
        let a = samples[after.saturating_sub(1)];
        if b.t <= a.t {
            return f(b);
        }
        let k = ((t - a.t) / (b.t - a.t)).clamp(0.0, 1.0);
        f(a) + (f(b) - f(a)) * k
    };
    let over =
        |f: &dyn Fn(&ViewerSample) -> f64| (at(window.to_s, f) - at(window.from_s, f)).max(0.0);
    let seg = |s: &ViewerSample| s.segments.clone().unwrap_or_default();
    // The last samples at or before each edge: whole counts over a window of its length.
    let before = |t: f64| {
        samples
            .iter()
            .rev()
            .find(|s| s.t <= t + 1e-9)
            .copied()
            .unwrap_or(first)
    };
    let (start, end) = (before(window.from_s), before(window.to_s));
    let (a, b) = (seg(start), seg(end));
    Some(Measured {
        http: over(&|s| s.http_down_bytes as f64),
        p2p_down: over(&|s| s.p2p_down_bytes as f64),
        p2p_up: over(&|s| s.p2p_up_bytes as f64),
        requested: over(&|s| seg(s).requested as f64),
        loaded: over(&|s| seg(s).loaded as f64),
        segment_bytes: over(&|s| seg(s).bytes as f64),
        stalls: end.stalls.saturating_sub(start.stalls),
        by_height: b
            .by_height
            .iter()
            .map(|(h, n)| {
                let was = a.by_height.get(h).copied().unwrap_or(0);
                (h.clone(), n.saturating_sub(was))
            })
            .collect(),
        video_track_off: end.video_track_off,
        total: b,
    })
}

/// Segments loaded at each height, summed.
fn heights<'a>(each: impl Iterator<Item = &'a BTreeMap<String, u64>>) -> BTreeMap<String, u64> {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for by_height in each {
        for (height, n) in by_height {
            *counts.entry(height.clone()).or_default() += n;
        }
    }
    counts
}

/// Percent of the segments loaded at each height.
fn shares(counts: BTreeMap<String, u64>) -> BTreeMap<String, f64> {
    let total = counts.values().sum::<u64>().max(1) as f64;
    counts
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(h, n)| (h, 100.0 * n as f64 / total))
        .collect()
}

/// One viewer's reads: (s since its page opened, HTTP + P2P, P2P, segments requested).
type Trace = Vec<(f64, f64, f64, f64)>;

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

#[cfg(test)]
mod tests {
    use super::*;

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

    fn sample(t: f64, http: u64, stalls: u32, by: &[(&str, u64)]) -> ViewerSample {
        let n: u64 = by.iter().map(|(_, n)| n).sum();
        ViewerSample {
            t,
            http_down_bytes: http,
            stalls,
            segments: Some(SegmentCounts {
                requested: n,
                loaded: n,
                bytes: n * 1000,
                by_height: by.iter().map(|(h, n)| (h.to_string(), *n)).collect(),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn counters_are_read_at_the_windows_edges_and_whole_counts_between_samples() {
        let samples = [
            sample(8.0, 800, 0, &[("240", 2)]),
            sample(12.0, 1200, 1, &[("240", 2), ("720", 1)]),
            sample(16.0, 1600, 1, &[("240", 2), ("720", 3)]),
            sample(20.0, 2000, 2, &[("240", 2), ("720", 5)]),
            sample(24.0, 2400, 2, &[("240", 2), ("720", 7)]),
        ];
        let refs: Vec<&ViewerSample> = samples.iter().collect();
        let window = Window {
            from_s: 10.0,
            to_s: 22.0,
        };
        let m = measure(&refs, window).unwrap();
        // 1000 B at 10 s, 2200 B at 22 s.
        assert!((m.http - 1200.0).abs() < 1e-9);
        // Between the samples at 8 and 20 s: two stalls, five 720p segments.
        assert_eq!(m.stalls, 2);
        assert_eq!(m.by_height["720"], 5);
        assert_eq!(m.by_height["240"], 0);
        assert_eq!(m.total.loaded, 7);
        // Not read before the window's start, or not up to its end: not measured.
        assert!(measure(&refs[1..], window).is_none());
        assert!(measure(&refs[..4], window).is_none());
    }
}
