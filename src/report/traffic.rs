//! Bytes over time from the two sources: the platform's exporter (sums of Prometheus
//! counters the players POSTed) and the players' own stats (per-viewer cumulative counters).

use super::load::RunData;
use super::rates::{accumulate, find_gaps, Bins, CounterStart, Gap};
use crate::model::rawdata::ViewerEventKind;
use std::collections::BTreeMap;

pub const HTTP_DOWN: &str = "peertube_playback_http_downloaded_bytes_total";
pub const P2P_DOWN: &str = "peertube_playback_p2p_downloaded_bytes_total";
pub const P2P_UP: &str = "peertube_playback_p2p_uploaded_bytes_total";
pub const ORIGIN_SEGMENTS: &str = "refsite_origin_segment_bytes_total";
pub const ORIGIN_SENT: &str = "refsite_origin_sent_bytes_total";
pub const ORIGIN_CUT_SHORT: &str = "refsite_origin_segment_aborted_bytes_total";
pub const ORIGIN_PLAYLISTS: &str = "refsite_origin_playlist_bytes_total";
pub const ORIGIN_OTHER: &str = "refsite_origin_other_bytes_total";

/// HTTP down, P2P down and P2P up bytes per bin from one source.
#[derive(Debug, Clone)]
pub struct Traffic {
    pub http: Bins,
    pub p2p: Bins,
    pub up: Bins,
    pub http_total: f64,
    pub p2p_total: f64,
    pub up_total: f64,
    pub resets: u32,
    pub data_from_s: f64,
    pub data_to_s: f64,
}

impl Traffic {
    fn new(bin_s: f64, end_s: f64) -> Self {
        Self {
            http: Bins::new(bin_s, end_s),
            p2p: Bins::new(bin_s, end_s),
            up: Bins::new(bin_s, end_s),
            http_total: 0.0,
            p2p_total: 0.0,
            up_total: 0.0,
            resets: 0,
            data_from_s: f64::INFINITY,
            data_to_s: 0.0,
        }
    }
}

/// What the exporter gave.
#[derive(Debug, Clone)]
pub struct ExporterTraffic {
    /// `None` when no successful scrape carried the HTTP counter.
    pub traffic: Option<Traffic>,
    pub origin_segments: Option<(Bins, f64)>,
    /// Segment bytes of responses the clients left before their last byte.
    pub origin_aborted: Option<(Bins, f64)>,
    pub origin_playlists: Option<u64>,
    pub origin_other: Option<u64>,
    pub origin_sent: Option<f64>,
    pub gaps: Vec<Gap>,
    pub ok_scrapes: u32,
    pub failed_scrapes: u32,
}

/// Exporter counters → bins. Failed scrapes are left out (their bytes spread over the gap);
/// a name missing from a good scrape counts as 0 (PeerTube creates a series on first use).
pub fn exporter(run: &RunData, bin_s: f64, end_s: f64, sampling_s: f64) -> ExporterTraffic {
    let ok: Vec<_> = run.exporter_samples.iter().filter(|s| s.ok).collect();
    let reads: Vec<(f64, bool, Option<&str>)> = run
        .exporter_samples
        .iter()
        .map(|s| (s.t, s.ok, s.error.as_deref()))
        .collect();
    let gaps = find_gaps(&reads, (sampling_s * 2.5).max(1.0));
    let mut names: BTreeMap<&str, ()> = BTreeMap::new();
    for sample in &ok {
        for name in sample.sums.keys() {
            names.insert(name, ());
        }
    }
    let seen = |name: &str| names.contains_key(name);
    let points = |name: &str| -> Vec<(f64, f64)> {
        ok.iter()
            .map(|s| (s.t, s.sums.get(name).copied().unwrap_or(0.0)))
            .collect()
    };
    let counter =
        |name: &str, bins: &mut Bins| accumulate(&points(name), CounterStart::Baseline, bins);

    let traffic = seen(HTTP_DOWN).then(|| {
        let mut t = Traffic::new(bin_s, end_s);
        let h = counter(HTTP_DOWN, &mut t.http);
        let p = counter(P2P_DOWN, &mut t.p2p);
        let u = counter(P2P_UP, &mut t.up);
        t.http_total = h.increase;
        t.p2p_total = p.increase;
        t.up_total = u.increase;
        t.resets = h.resets + p.resets + u.resets;
        t.data_from_s = h.first_t.unwrap_or(0.0);
        t.data_to_s = h.last_t.unwrap_or(0.0);
        t
    });
    let binned = |name: &str| {
        seen(name).then(|| {
            let mut bins = Bins::new(bin_s, end_s);
            let stats = counter(name, &mut bins);
            (bins, stats.increase)
        })
    };
    let total = |name: &str| binned(name).map(|(_, t)| t.round().max(0.0) as u64);
    // A refsite that has not cut a response short yet prints the name without a series.
    let origin_aborted = seen(ORIGIN_SEGMENTS)
        .then(|| binned(ORIGIN_CUT_SHORT).unwrap_or_else(|| (Bins::new(bin_s, end_s), 0.0)));
    let origin_segments = binned(ORIGIN_SEGMENTS);
    let origin_sent = binned(ORIGIN_SENT).map(|(_, t)| t);
    ExporterTraffic {
        traffic,
        origin_aborted: origin_aborted.filter(|_| seen(ORIGIN_PLAYLISTS)),
        origin_playlists: total(ORIGIN_PLAYLISTS),
        origin_other: total(ORIGIN_OTHER),
        origin_segments,
        origin_sent,
        gaps,
        ok_scrapes: ok.len() as u32,
        failed_scrapes: (run.exporter_samples.len() - ok.len()) as u32,
    }
}

/// Per-viewer totals from the players' stats.
#[derive(Debug, Clone, Default)]
pub struct ViewerTotals {
    pub http: f64,
    pub p2p: f64,
    pub up: f64,
    pub stalls: f64,
    pub stalled_ms: f64,
    pub last_t: f64,
    pub max_peers: u32,
    pub first_playing_t: Option<f64>,
}

/// Players' stats → bins (sum over viewers of each viewer's own deltas, so a viewer that
/// vanishes simply stops adding), plus stall bins and per-viewer totals.
pub struct PlayerTraffic {
    pub traffic: Option<Traffic>,
    pub stalls: Bins,
    pub stalled_ms: Bins,
    pub per_viewer: BTreeMap<u32, ViewerTotals>,
}

pub fn players(run: &RunData, bin_s: f64, end_s: f64, sampling_s: f64) -> PlayerTraffic {
    let mut by_viewer: BTreeMap<u32, Vec<&crate::model::rawdata::ViewerSample>> = BTreeMap::new();
    for sample in &run.viewer_samples {
        by_viewer.entry(sample.viewer).or_default().push(sample);
    }
    let mut opened: BTreeMap<u32, f64> = BTreeMap::new();
    for event in &run.viewer_events {
        if event.event == ViewerEventKind::PageOpened {
            opened.entry(event.viewer).or_insert(event.t);
        }
    }
    let mut traffic = Traffic::new(bin_s, end_s);
    let mut stalls = Bins::new(bin_s, end_s);
    let mut stalled_ms = Bins::new(bin_s, end_s);
    let mut per_viewer = BTreeMap::new();
    for (viewer, samples) in &by_viewer {
        let first_t = samples[0].t;
        let zero_at = opened
            .get(viewer)
            .copied()
            .filter(|t| *t <= first_t)
            .unwrap_or((first_t - sampling_s).max(0.0));
        let start = CounterStart::ZeroAt(zero_at);
        let pts = |f: &dyn Fn(&crate::model::rawdata::ViewerSample) -> f64| -> Vec<(f64, f64)> {
            samples.iter().map(|s| (s.t, f(s))).collect()
        };
        let h = accumulate(
            &pts(&|s| s.http_down_bytes as f64),
            start,
            &mut traffic.http,
        );
        let p = accumulate(&pts(&|s| s.p2p_down_bytes as f64), start, &mut traffic.p2p);
        let u = accumulate(&pts(&|s| s.p2p_up_bytes as f64), start, &mut traffic.up);
        let st = accumulate(&pts(&|s| s.stalls as f64), start, &mut stalls);
        let sm = accumulate(&pts(&|s| s.stalled_ms), start, &mut stalled_ms);
        traffic.http_total += h.increase;
        traffic.p2p_total += p.increase;
        traffic.up_total += u.increase;
        traffic.resets += h.resets + p.resets + u.resets;
        let last_t = samples[samples.len() - 1].t;
        traffic.data_from_s = traffic.data_from_s.min(zero_at);
        traffic.data_to_s = traffic.data_to_s.max(last_t);
        per_viewer.insert(
            *viewer,
            ViewerTotals {
                http: h.increase,
                p2p: p.increase,
                up: u.increase,
                stalls: st.increase,
                stalled_ms: sm.increase,
                last_t,
                max_peers: samples.iter().map(|s| s.peers).max().unwrap_or(0),
                first_playing_t: samples.iter().find(|s| s.playing).map(|s| s.t),
            },
        );
    }
    PlayerTraffic {
        traffic: (!by_viewer.is_empty()).then_some(traffic),
        stalls,
        stalled_ms,
        per_viewer,
    }
}
