//! The PeerTube post's table for one source: HTTP at its peak, HTTP and P2P over the steady
//! window ending at the measurement point, HTTP share and P2P savings, plus totals.

use super::rates::mbps;
use super::summary::{SourceTable, Windows};
use super::traffic::Traffic;

/// Which steady window a source uses.
#[derive(Debug, Clone, Copy)]
pub struct Steady {
    pub from_s: f64,
    pub to_s: f64,
}

/// Chooses the windows: the rate window is twice the playback-metrics interval (exporter
/// counters move in steps of that interval) and at least two sampling intervals; the steady
/// window ends at `measure_at` (or at the data's end when the run stopped before it).
pub fn windows(
    measure_at_s: f64,
    (measure_point_s, measure_point_source): (f64, String),
    steady_window_s: f64,
    sampling_s: f64,
    interval_s: Option<f64>,
    data_end_s: f64,
    bin_s: f64,
) -> Windows {
    let interval = interval_s.filter(|v| *v > 0.0).unwrap_or(15.0);
    let rate_window_s = (2.0 * interval).max(2.0 * sampling_s).max(bin_s).round();
    let len = steady_window_s.max(bin_s);
    let (to, clipped, note) = if data_end_s + 1e-9 < measure_point_s {
        (
            data_end_s,
            true,
            Some(format!(
                "the data ends at {data_end_s:.0} s, before the measurement point \
                 ({measure_point_s:.0} s): values are over the last {len:.0} s recorded instead"
            )),
        )
    } else {
        (measure_point_s, false, None)
    };
    let from = (to - len).max(0.0);
    Windows {
        bin_s,
        rate_window_s,
        rate_window_rule: format!(
            "trailing {rate_window_s:.0} s = max(2 × playback-metrics interval ({interval:.0} s), \
             2 × sampling interval ({sampling_s:.0} s)); exporter counters only move when \
             players POST, so shorter windows would show the POST rhythm, not the traffic"
        ),
        measure_at_s,
        measure_point_s,
        measure_point_source,
        steady_from_s: from,
        steady_to_s: to,
        exporter_steady_from_s: (to - len.max(interval)).max(0.0),
        playback_metrics_interval_s: interval,
        steady_clipped: clipped,
        steady_note: note,
    }
}

/// Fills the table for one source over `steady`, with peaks over `rate_window_s`.
pub(crate) fn source_table(traffic: &Traffic, steady: Steady, rate_window_s: f64) -> SourceTable {
    let peak = traffic
        .http
        .trailing_rates(rate_window_s, traffic.data_from_s, traffic.data_to_s)
        .into_iter()
        .fold(None::<(f64, f64)>, |best, (t, r)| match best {
            Some((_, br)) if br >= r => best,
            _ => Some((t, r)),
        });
    let at = |bins: &super::rates::Bins| bins.rate_between(steady.from_s, steady.to_s).map(mbps);
    let http_at = at(&traffic.http);
    let p2p_at = at(&traffic.p2p);
    let (share, savings, ratio) = shares(http_at, p2p_at);
    SourceTable {
        http_peak_mbps: peak.map(|(_, r)| mbps(r)),
        http_peak_at_s: peak.map(|(t, _)| t),
        http_at_mbps: http_at,
        p2p_at_mbps: p2p_at,
        p2p_up_at_mbps: at(&traffic.up),
        http_share: share,
        p2p_savings: savings,
        http_to_p2p_ratio: ratio,
        http_bytes: traffic.http_total.round() as u64,
        p2p_bytes: traffic.p2p_total.round() as u64,
        p2p_uploaded_bytes: traffic.up_total.round() as u64,
        counter_resets: traffic.resets,
        data_from_s: if traffic.data_from_s.is_finite() {
            traffic.data_from_s
        } else {
            0.0
        },
        data_to_s: traffic.data_to_s,
    }
}

/// (HTTP share, P2P savings, HTTP/P2P ratio) from the two rates.
pub fn shares(http: Option<f64>, p2p: Option<f64>) -> (Option<f64>, Option<f64>, Option<f64>) {
    match (http, p2p) {
        (Some(h), Some(p)) if h + p > 0.0 => (
            Some(h / (h + p)),
            Some(p / (h + p)),
            (p > 0.0).then(|| h / p),
        ),
        _ => (None, None, None),
    }
}
