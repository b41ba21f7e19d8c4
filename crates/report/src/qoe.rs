//! Quality of experience and viewer accounting: who started, who failed and why, time to
//! first frame, stalls per viewer-minute, stalled time share, viewers active over time.

use super::arrival::ViewerArrival;
use super::load::RunData;
use super::stats::percentile;
use super::summary::{FailedViewer, FailureKind, Qoe, ViewerCounts, ViewerRow};
use super::traffic::ViewerTotals;
use crate::model::rawdata::{RunEvent, ViewerEventKind};
use std::collections::BTreeMap;

/// One viewer's life as told by its events and samples.
#[derive(Debug, Clone, Default)]
struct Life {
    p2p: Option<bool>,
    node: Option<String>,
    address: Option<String>,
    playing_t: Option<f64>,
    ttff_ms: Option<f64>,
    end: Option<(f64, ViewerEventKind, Option<String>)>,
    /// Requested, but not one event in the raw data.
    silent: bool,
}

/// Why a requested viewer without an event at all never started.
pub(crate) const NO_EVENT: &str =
    "never started: no event recorded for it (the run ended, or was cut \
     short, before it was asked for)";
/// Why a viewer that began but has neither a first frame nor an end never started.
pub(crate) const NO_END: &str =
    "never started: no first frame and no end recorded (the run was cut \
     short while it started)";

/// Viewer counts, QoE numbers, per-viewer rows and the viewers-active intervals.
pub(crate) struct QoeResult {
    pub counts: ViewerCounts,
    pub qoe: Qoe,
    pub rows: Vec<ViewerRow>,
    /// `(start, end)` of each viewer's watching, for the viewers-active series.
    pub watching: Vec<(f64, f64)>,
    /// The same by viewer, for the headroom of the viewers in the steady window.
    pub watching_by_viewer: BTreeMap<u32, (f64, f64)>,
}

/// Counts every requested viewer: started, failed (those that never started included, with
/// their reasons) or lost.
pub fn compute(
    run: &RunData,
    per_viewer: &BTreeMap<u32, ViewerTotals>,
    arrivals: &BTreeMap<u32, ViewerArrival>,
    data_end_s: f64,
) -> QoeResult {
    // A governed ramp asked for the viewers it released, not its maximum.
    let requested =
        RunEvent::released_viewers(&run.run_events).unwrap_or(run.manifest.plan.viewers);
    let mut tally = Tally::new(requested);
    let mut lives = lives(run, per_viewer);
    // The viewers of a plan are numbered 0..requested: one without an event never started.
    for viewer in 0..requested {
        lives.entry(viewer).or_insert_with(|| Life {
            silent: true,
            ..Life::default()
        });
    }
    for (viewer, life) in &lives {
        let arrival = arrivals.get(viewer).copied().unwrap_or_default();
        tally.add(*viewer, life, per_viewer.get(viewer), arrival, data_end_s);
    }
    tally.finish()
}

/// Every viewer's life from its events, in viewer order; a viewer with samples but no
/// events gets an empty one.
fn lives(run: &RunData, per_viewer: &BTreeMap<u32, ViewerTotals>) -> BTreeMap<u32, Life> {
    let mut lives: BTreeMap<u32, Life> = BTreeMap::new();
    for event in &run.viewer_events {
        let life = lives.entry(event.viewer).or_default();
        life.p2p.get_or_insert(event.p2p);
        if event.node.is_some() {
            life.node.clone_from(&event.node);
        }
        if event.address.is_some() {
            life.address.clone_from(&event.address);
        }
        match event.event {
            ViewerEventKind::Playing if life.playing_t.is_none() => {
                life.playing_t = Some(event.t);
                life.ttff_ms = event.ttff_ms;
            }
            ViewerEventKind::Failed
            | ViewerEventKind::Lost
            | ViewerEventKind::Stopped
            | ViewerEventKind::Left
                if life.end.is_none() =>
            {
                life.end = Some((event.t, event.event, event.reason.clone()));
            }
            _ => {}
        }
    }
    for viewer in per_viewer.keys() {
        lives.entry(*viewer).or_default();
    }
    lives
}

/// The sums over viewers that the QoE numbers are made of, one viewer at a time.
struct Tally {
    counts: ViewerCounts,
    qoe: Qoe,
    rows: Vec<ViewerRow>,
    watching: Vec<(f64, f64)>,
    watching_by_viewer: BTreeMap<u32, (f64, f64)>,
    ttffs: Vec<f64>,
    /// Each viewer's stalled time over its watch time, of the viewers that watched.
    stalled_shares: Vec<f64>,
    watch_total_s: f64,
    stalled_total_ms: f64,
}

impl Tally {
    fn new(requested: u32) -> Self {
        Self {
            counts: ViewerCounts {
                requested,
                ..Default::default()
            },
            qoe: Qoe::default(),
            rows: Vec::new(),
            watching: Vec::new(),
            watching_by_viewer: BTreeMap::new(),
            ttffs: Vec::new(),
            stalled_shares: Vec::new(),
            watch_total_s: 0.0,
            stalled_total_ms: 0.0,
        }
    }

    /// Counts one viewer and adds its row. It watched from its first frame to its end: its
    /// end event, else its last sample, else the end of the data.
    fn add(
        &mut self,
        viewer: u32,
        life: &Life,
        samples: Option<&ViewerTotals>,
        arrival: ViewerArrival,
        data_end_s: f64,
    ) {
        let totals = samples.cloned().unwrap_or_default();
        let start = life.playing_t.or(totals.first_playing_t);
        if start.is_some() {
            self.counts.started += 1;
        } else {
            self.counts.not_started += 1;
        }
        if life.p2p == Some(false) {
            self.counts.p2p_off += 1;
        }
        if let Some(ttff) = life.ttff_ms {
            self.ttffs.push(ttff);
        }
        let end_t = match (&life.end, samples.is_some()) {
            (Some((t, _, _)), _) => *t,
            (None, true) => totals.last_t,
            (None, false) => data_end_s,
        };
        let watch_s = start.map(|s| (end_t - s).max(0.0)).unwrap_or(0.0);
        if let Some(s) = start {
            self.watching.push((s, end_t));
            self.watching_by_viewer.insert(viewer, (s, end_t));
        }
        self.watch_total_s += watch_s;
        self.stalled_total_ms += totals.stalled_ms;
        if watch_s > 0.0 {
            self.stalled_shares
                .push((totals.stalled_ms / 1000.0 / watch_s).min(1.0));
        }
        self.qoe.stalls += totals.stalls.round() as u64;
        let (end, reason) = self.end_of(viewer, life, start.is_some());
        self.rows.push(ViewerRow {
            viewer,
            p2p: life.p2p.unwrap_or(true),
            node: life.node.clone(),
            address: life.address.clone(),
            ttff_ms: life.ttff_ms,
            http_bytes: totals.http.round() as u64,
            p2p_bytes: totals.p2p.round() as u64,
            p2p_up_bytes: totals.up.round() as u64,
            stalls: totals.stalls.round() as u64,
            stalled_ms: totals.stalled_ms,
            watch_s,
            due_s: arrival.due_s,
            creating_s: arrival.creating_s,
            session_s: arrival.session_s,
            playing_s: arrival.playing_s.or(start),
            end,
            reason,
            ..Default::default()
        });
    }

    /// How the viewer's life ended (`failed`, `lost`, `stopped` or `running`) and why; a
    /// failed or lost viewer is counted with its reason. A viewer with no end that never
    /// started is failed: the run asked for it and it never played.
    fn end_of(&mut self, viewer: u32, life: &Life, started: bool) -> (String, Option<String>) {
        let Some((t, kind, reason)) = &life.end else {
            if started {
                return ("running".to_string(), None);
            }
            let reason = if life.silent { NO_EVENT } else { NO_END };
            self.fail(viewer, None, FailureKind::Failed, reason.to_string());
            return ("failed".to_string(), Some(reason.to_string()));
        };
        let kind_name = match kind {
            ViewerEventKind::Failed => "failed",
            ViewerEventKind::Lost => "lost",
            _ => "stopped",
        };
        let failure = match kind {
            ViewerEventKind::Failed => Some(FailureKind::Failed),
            ViewerEventKind::Lost => Some(FailureKind::Lost),
            _ => None,
        };
        if let Some(failure) = failure {
            let reason_text = reason
                .clone()
                .unwrap_or_else(|| "(no reason recorded)".into());
            self.fail(viewer, Some(*t), failure, reason_text);
        }
        (kind_name.to_string(), reason.clone())
    }

    /// Counts a failed or lost viewer under its reason.
    fn fail(&mut self, viewer: u32, t: Option<f64>, kind: FailureKind, reason: String) {
        match kind {
            FailureKind::Failed => self.counts.failed += 1,
            FailureKind::Lost => self.counts.lost += 1,
        }
        *self.qoe.failure_reasons.entry(reason.clone()).or_default() += 1;
        self.qoe.failed.push(FailedViewer {
            viewer,
            t,
            kind,
            reason,
        });
    }

    /// The QoE numbers from the sums: TTFF percentiles, viewer-minutes, stall rates.
    fn finish(self) -> QoeResult {
        let mut qoe = self.qoe;
        qoe.ttff_count = self.ttffs.len() as u32;
        qoe.ttff_median_ms = percentile(&self.ttffs, 50.0);
        qoe.ttff_p90_ms = percentile(&self.ttffs, 90.0);
        qoe.ttff_p95_ms = percentile(&self.ttffs, 95.0);
        qoe.ttff_p99_ms = percentile(&self.ttffs, 99.0);
        qoe.ttff_max_ms = percentile(&self.ttffs, 100.0);
        let finite: Vec<f64> = self
            .ttffs
            .iter()
            .copied()
            .filter(|v| v.is_finite())
            .collect();
        qoe.ttff_avg_ms =
            (!finite.is_empty()).then(|| finite.iter().sum::<f64>() / finite.len() as f64);
        qoe.viewer_stalled_share = super::summary::Distribution::of(&self.stalled_shares);
        qoe.viewer_minutes = self.watch_total_s / 60.0;
        if self.watch_total_s > 0.0 {
            qoe.stalls_per_viewer_minute = Some(qoe.stalls as f64 / qoe.viewer_minutes);
            qoe.stalled_time_share =
                Some((self.stalled_total_ms / 1000.0 / self.watch_total_s).min(1.0));
        }
        QoeResult {
            counts: self.counts,
            qoe,
            rows: self.rows,
            watching: self.watching,
            watching_by_viewer: self.watching_by_viewer,
        }
    }
}

/// Number of viewers watching at each bin end.
pub(crate) fn active_series(watching: &[(f64, f64)], bin_s: f64, end_s: f64) -> Vec<(f64, f64)> {
    let n = (end_s / bin_s).ceil() as usize;
    (1..=n)
        .map(|i| {
            let t = i as f64 * bin_s;
            let active = watching.iter().filter(|(s, e)| *s <= t && t <= *e).count();
            (t, active as f64)
        })
        .collect()
}
