//! Bytes over time from the two sources: the platform's exporter (sums of Prometheus
//! counters the players POSTed) and the players' own stats (per-viewer cumulative counters,
//! and the light peers' own: they are members of the same swarm, so the swarm's figures
//! count them, while per-viewer QoE does not).

use super::load::RunData;
use super::rates::{accumulate, find_gaps, Bins, CounterStart, Gap};
use crate::model::rawdata::{LightSample, ViewerEventKind, ViewerSample};
use std::collections::BTreeMap;

pub(crate) const HTTP_DOWN: &str = "peertube_playback_http_downloaded_bytes_total";
pub(crate) const P2P_DOWN: &str = "peertube_playback_p2p_downloaded_bytes_total";
pub(crate) const P2P_UP: &str = "peertube_playback_p2p_uploaded_bytes_total";
pub(crate) const ORIGIN_SEGMENTS: &str = "refsite_origin_segment_bytes_total";
pub(crate) const ORIGIN_SENT: &str = "refsite_origin_sent_bytes_total";
pub(crate) const ORIGIN_CUT_SHORT: &str = "refsite_origin_segment_aborted_bytes_total";
pub(crate) const ORIGIN_PLAYLISTS: &str = "refsite_origin_playlist_bytes_total";
pub(crate) const ORIGIN_OTHER: &str = "refsite_origin_other_bytes_total";

/// HTTP down, P2P down and P2P up bytes per bin from one source.
#[derive(Debug, Clone)]
pub(crate) struct Traffic {
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

    /// Adds another part of the swarm (same bins) to this one.
    fn absorb(&mut self, other: &Traffic) {
        for (mine, theirs) in [
            (&mut self.http, &other.http),
            (&mut self.p2p, &other.p2p),
            (&mut self.up, &other.up),
        ] {
            for (a, b) in mine.values.iter_mut().zip(&theirs.values) {
                *a += b;
            }
        }
        self.http_total += other.http_total;
        self.p2p_total += other.p2p_total;
        self.up_total += other.up_total;
        self.resets += other.resets;
        self.data_from_s = self.data_from_s.min(other.data_from_s);
        self.data_to_s = self.data_to_s.max(other.data_to_s);
    }

    /// Spreads one member's cumulative HTTP, P2P down and P2P up counters (`(t, http, p2p,
    /// up)` in time order) into the bins, the counters starting at zero at `zero_at`: the
    /// same rule for a viewer and a light peer. Returns the member's increases.
    fn add_member(&mut self, points: &[(f64, [u64; 3])], zero_at: f64) -> [f64; 3] {
        let start = CounterStart::ZeroAt(zero_at);
        let series = |k: usize| -> Vec<(f64, f64)> {
            points.iter().map(|(t, v)| (*t, v[k] as f64)).collect()
        };
        let h = accumulate(&series(0), start, &mut self.http);
        let p = accumulate(&series(1), start, &mut self.p2p);
        let u = accumulate(&series(2), start, &mut self.up);
        self.http_total += h.increase;
        self.p2p_total += p.increase;
        self.up_total += u.increase;
        self.resets += h.resets + p.resets + u.resets;
        if let Some((last_t, _)) = points.last() {
            self.data_from_s = self.data_from_s.min(zero_at);
            self.data_to_s = self.data_to_s.max(*last_t);
        }
        [h.increase, p.increase, u.increase]
    }
}

/// What the exporter gave.
#[derive(Debug, Clone)]
pub(crate) struct ExporterTraffic {
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
pub(crate) struct ViewerTotals {
    pub http: f64,
    pub p2p: f64,
    pub up: f64,
    pub stalls: f64,
    pub stalled_ms: f64,
    pub last_t: f64,
    pub max_peers: u32,
    pub first_playing_t: Option<f64>,
}

/// One light peer's totals over the run (its own counters' increases).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LightPeerTotals {
    /// The page (browser session) that hosts it.
    pub group: u32,
    pub http: f64,
    pub p2p: f64,
    pub up: f64,
}

/// Players' stats → bins (sum over viewers of each viewer's own deltas, so a viewer that
/// vanishes simply stops adding), plus stall bins and per-viewer totals. `traffic` is the
/// whole swarm: viewers and light peers; `per_viewer`, the stalls and `light` keep the two
/// apart (QoE is the real viewers'; the light section is the light peers').
pub(crate) struct PlayerTraffic {
    /// The swarm's bytes: every viewer's and every light peer's.
    pub traffic: Option<Traffic>,
    pub stalls: Bins,
    pub stalled_ms: Bins,
    /// Real viewers only.
    pub per_viewer: BTreeMap<u32, ViewerTotals>,
    /// The light peers' part of `traffic` (`None` without light samples).
    pub light: Option<Traffic>,
    /// Each light peer's totals, by peer.
    pub per_light_peer: BTreeMap<u32, LightPeerTotals>,
}

pub fn players(run: &RunData, bin_s: f64, end_s: f64, sampling_s: f64) -> PlayerTraffic {
    let mut by_viewer: BTreeMap<u32, Vec<&ViewerSample>> = BTreeMap::new();
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
        let points: Vec<_> = samples
            .iter()
            .map(|s| (s.t, [s.http_down_bytes, s.p2p_down_bytes, s.p2p_up_bytes]))
            .collect();
        let [http, p2p, up] = traffic.add_member(&points, zero_at);
        let pts = |f: &dyn Fn(&ViewerSample) -> f64| -> Vec<(f64, f64)> {
            samples.iter().map(|s| (s.t, f(s))).collect()
        };
        let st = accumulate(&pts(&|s| s.stalls as f64), start, &mut stalls);
        let sm = accumulate(&pts(&|s| s.stalled_ms), start, &mut stalled_ms);
        per_viewer.insert(
            *viewer,
            ViewerTotals {
                http,
                p2p,
                up,
                stalls: st.increase,
                stalled_ms: sm.increase,
                last_t: samples[samples.len() - 1].t,
                max_peers: samples.iter().map(|s| s.peers).max().unwrap_or(0),
                first_playing_t: samples.iter().find(|s| s.playing).map(|s| s.t),
            },
        );
    }
    let (light, per_light_peer) = light_peers(run, bin_s, end_s, sampling_s);
    if let Some(light) = &light {
        traffic.absorb(light);
    }
    PlayerTraffic {
        traffic: (!by_viewer.is_empty() || light.is_some()).then_some(traffic),
        stalls,
        stalled_ms,
        per_viewer,
        light,
        per_light_peer,
    }
}

/// The light peers' counters → their own bins and totals. A light peer has no page-opened
/// event of its own: its counters start at zero one sampling interval before its first
/// read, as a viewer's do when its event is missing.
fn light_peers(
    run: &RunData,
    bin_s: f64,
    end_s: f64,
    sampling_s: f64,
) -> (Option<Traffic>, BTreeMap<u32, LightPeerTotals>) {
    let mut by_peer: BTreeMap<u32, Vec<&LightSample>> = BTreeMap::new();
    for sample in &run.light_samples {
        by_peer.entry(sample.peer).or_default().push(sample);
    }
    let mut traffic = Traffic::new(bin_s, end_s);
    let mut totals = BTreeMap::new();
    for (peer, samples) in &by_peer {
        let zero_at = (samples[0].t - sampling_s).max(0.0);
        let points: Vec<_> = samples
            .iter()
            .map(|s| (s.t, [s.http_down_bytes, s.p2p_down_bytes, s.p2p_up_bytes]))
            .collect();
        let [http, p2p, up] = traffic.add_member(&points, zero_at);
        totals.insert(
            *peer,
            LightPeerTotals {
                group: samples[samples.len() - 1].group,
                http,
                p2p,
                up,
            },
        );
    }
    ((!by_peer.is_empty()).then_some(traffic), totals)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::rawdata::{Manifest, ViewerEvent};

    fn run(viewer_samples: Vec<ViewerSample>, light_samples: Vec<LightSample>) -> RunData {
        RunData {
            dir: "/nowhere/run".into(),
            manifest: Manifest::example(),
            run_events: vec![],
            viewer_events: vec![ViewerEvent {
                t: 1.0,
                viewer: 0,
                event: ViewerEventKind::PageOpened,
                p2p: true,
                reason: None,
                node: None,
                address: None,
                ttff_ms: None,
                due_s: None,
            }],
            viewer_samples,
            exporter_samples: vec![],
            host_samples: vec![],
            node_samples: vec![],
            light_samples,
            truncated_files: vec![],
        }
    }

    /// A light peer's read at `t` with cumulative HTTP, P2P down and P2P up bytes.
    fn light(t: f64, peer: u32, group: u32, [http, p2p, up]: [u64; 3]) -> LightSample {
        LightSample {
            t,
            peer,
            group,
            http_down_bytes: http,
            p2p_down_bytes: p2p,
            p2p_up_bytes: up,
            ..Default::default()
        }
    }

    #[test]
    fn light_peers_add_to_the_swarm_but_not_to_the_viewers() {
        // Viewer 0 (page opened at 1 s): 1000 B HTTP by 3 s, 3000 by 5 s.
        let viewers = [(3.0, 1000), (5.0, 3000)]
            .into_iter()
            .map(|(t, http)| ViewerSample {
                t,
                viewer: 0,
                http_down_bytes: http,
                ..Default::default()
            })
            .collect();
        // Peer 7 from 4 s (zero at 2 s); peer 8's page restarted its counters at 8 s.
        let peers = vec![
            light(4.0, 7, 1, [400, 800, 100]),
            light(6.0, 7, 1, [600, 1600, 300]),
            light(4.0, 8, 2, [0, 0, 0]),
            light(6.0, 8, 2, [200, 0, 500]),
            light(8.0, 8, 2, [50, 0, 0]),
        ];
        let mut data = run(viewers, peers);
        data.light_samples.sort_by(|a, b| a.t.total_cmp(&b.t));
        let p = players(&data, 1.0, 10.0, 2.0);
        let swarm = p.traffic.as_ref().unwrap();
        let light = p.light.as_ref().unwrap();
        assert_eq!(
            (light.http_total, light.p2p_total, light.up_total),
            (600.0 + 250.0, 1600.0, 300.0 + 500.0)
        );
        assert_eq!(
            light.resets, 2,
            "peer 8's HTTP and upload counters went down"
        );
        assert_eq!(swarm.http_total, 3000.0 + 850.0);
        assert_eq!(swarm.p2p_total, 1600.0);
        assert_eq!(swarm.resets, 2);
        // Peer 7's first 400 B are spread over 2–4 s, the viewer's first 1000 B over 1–3 s.
        assert_eq!(swarm.http.values[2], 500.0 + 200.0);
        assert_eq!(swarm.http.values[1], 500.0);
        assert_eq!((swarm.data_from_s, swarm.data_to_s), (1.0, 8.0));
        // The viewers' totals are the viewers' alone.
        assert_eq!(p.per_viewer.len(), 1);
        assert_eq!(p.per_viewer[&0].http, 3000.0);
        assert_eq!(
            p.per_light_peer[&7],
            LightPeerTotals {
                group: 1,
                http: 600.0,
                p2p: 1600.0,
                up: 300.0
            }
        );
        assert_eq!(p.per_light_peer[&8].up, 500.0);
    }

    #[test]
    fn light_peers_alone_make_a_swarm_and_none_make_no_light_part() {
        let p = players(
            &run(vec![], vec![light(2.0, 0, 0, [10, 20, 30])]),
            1.0,
            4.0,
            2.0,
        );
        let swarm = p.traffic.unwrap();
        assert_eq!((swarm.http_total, swarm.up_total), (10.0, 30.0));
        assert!(p.per_viewer.is_empty());
        assert!(players(&run(vec![], vec![]), 1.0, 4.0, 2.0).light.is_none());
    }
}
