//! The report's data model: `ReportSummary` is `report.json` (numbers only, no paths, no
//! clock time, so rebuilding from a copied run folder gives identical bytes); `RunReport`
//! adds the time series and per-viewer rows that the plots and CSV files need.

use super::rates::Gap;
use crate::model::kinds::{FleetKind, Latency, RateSource, TargetKind, VideoKind};
use crate::model::rawdata::HostInfo;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of `report.json`'s layout; bumped when a field changes meaning.
pub const SCHEMA_VERSION: u32 = 1;

/// `report.json`: one run's numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportSummary {
    pub schema_version: u32,
    pub scenario: String,
    pub started_at: String,
    /// The run was cut short (killed, interrupted, or still running): numbers cover what
    /// was recorded.
    pub partial: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_reason: Option<String>,
    pub target: TargetLine,
    pub measured_on: MeasuredOn,
    pub viewers: ViewerCounts,
    /// Which source the top-level rates and totals come from: `exporter` (the platform's
    /// Prometheus counters, as in the PeerTube 2023 post) or `players` (the viewers' stats).
    pub source: RateSource,
    pub http_peak_mbps: Option<f64>,
    pub http_peak_at_s: Option<f64>,
    pub http_at_mbps: Option<f64>,
    pub p2p_at_mbps: Option<f64>,
    pub p2p_up_at_mbps: Option<f64>,
    /// HTTP / (HTTP + P2P) over the steady window, 0..1.
    pub http_share: Option<f64>,
    /// P2P / (HTTP + P2P) = 1 − http_share: the share of bandwidth the server did not send.
    pub p2p_savings: Option<f64>,
    /// HTTP / P2P: the "ratio HTTP/P2P" column of the PeerTube post (its 25% is 90/350).
    pub http_to_p2p_ratio: Option<f64>,
    pub http_bytes: Option<u64>,
    pub p2p_bytes: Option<u64>,
    pub p2p_uploaded_bytes: Option<u64>,
    /// Media segment bytes the reference site's origin really sent (ground truth).
    pub origin_bytes: Option<u64>,
    /// (players' HTTP bytes − origin bytes) / origin bytes × 100, players' own stats.
    pub origin_deviation_pct: Option<f64>,
    /// Same with the exporter's HTTP bytes (lags by up to one playback-metrics interval).
    pub exporter_origin_deviation_pct: Option<f64>,
    /// The origin's segment bytes against the players' counts, aborted and in-flight bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_reconciliation: Option<HttpReconciliation>,
    /// P2P uploaded vs delivered across the swarm, with WebRTC's own count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p2p_reconciliation: Option<P2pReconciliation>,
    pub exporter: Option<SourceTable>,
    pub players: Option<SourceTable>,
    /// Ground-truth origin rates (refsite only).
    pub origin: Option<OriginTable>,
    pub windows: Windows,
    pub qoe: Qoe,
    pub honesty: Honesty,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetLine {
    pub kind: TargetKind,
    pub video: VideoKind,
    pub latency: Option<Latency>,
    pub fleet: FleetKind,
}

/// The host (as the manifest recorded it) and the versions of what ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasuredOn {
    #[serde(flatten)]
    pub host: HostInfo,
    pub tool_version: String,
    pub git_commit: Option<String>,
    pub versions: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ViewerCounts {
    /// Viewers the plan asked for.
    pub requested: u32,
    /// Viewers that played a first frame.
    pub started: u32,
    /// Viewers that never started or stopped with an error.
    pub failed: u32,
    /// Viewers whose browser or node went away mid-run.
    pub lost: u32,
    /// Viewers asked to play with P2P off.
    pub p2p_off: u32,
}

/// The PeerTube post's table for one source.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SourceTable {
    pub http_peak_mbps: Option<f64>,
    pub http_peak_at_s: Option<f64>,
    pub http_at_mbps: Option<f64>,
    pub p2p_at_mbps: Option<f64>,
    pub p2p_up_at_mbps: Option<f64>,
    pub http_share: Option<f64>,
    pub p2p_savings: Option<f64>,
    pub http_to_p2p_ratio: Option<f64>,
    pub http_bytes: u64,
    pub p2p_bytes: u64,
    pub p2p_uploaded_bytes: u64,
    /// Counter resets seen (target or page restarted), handled like Prometheus `rate()`.
    pub counter_resets: u32,
    /// Time span the source's data covers, seconds since start.
    pub data_from_s: f64,
    pub data_to_s: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OriginTable {
    pub peak_mbps: Option<f64>,
    pub at_mbps: Option<f64>,
    pub segment_bytes: u64,
    pub sent_bytes: Option<u64>,
}

/// Where the origin's media-segment bytes went (see `report::reconcile`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpReconciliation {
    /// Compared up to this time (the players' last sample).
    pub at_s: f64,
    pub origin_segment_bytes: u64,
    /// Segment bytes of responses the client left before their last byte, as the origin saw.
    pub origin_cut_short_bytes: Option<u64>,
    pub playlist_bytes: Option<u64>,
    /// Pages, front-end files, API answers.
    pub other_bytes: Option<u64>,
    /// The players' HTTP figure (their own count, e.g. PeerTube's `network-info`).
    pub players_bytes: u64,
    /// Segment responses the pages read to the end, counted at the same instant as the
    /// aborted and in-flight ones.
    pub completed_bytes: u64,
    /// Announced length of the segment responses the pages aborted.
    pub aborted_bytes: u64,
    /// Of those, what reached the pages before the abort.
    pub aborted_delivered_bytes: u64,
    pub aborts: u64,
    /// Announced length of responses still being read at the last sample.
    pub in_flight_bytes: u64,
    /// Requests without headers yet at the last sample.
    pub waiting_requests: u64,
    /// Requests aborted before their headers arrived.
    pub aborted_waiting: u64,
    /// The likely size of both: their count × the mean completed response (an estimate;
    /// the origin may have sent all of it while the browser held the headers).
    pub waiting_estimate_bytes: u64,
    /// Origin − (completed + aborted + in flight + waiting estimate).
    pub rest_bytes: i64,
    pub rest_share: Option<f64>,
}

/// What the swarm's uploaders counted against what its receivers got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct P2pReconciliation {
    pub uploaded_bytes: u64,
    /// The P2P figure: what receivers got.
    pub downloaded_bytes: u64,
    /// Uploads − downloads (negative when peers outside the run uploaded to ours).
    pub undelivered_bytes: i64,
    pub undelivered_share: Option<f64>,
    /// WebRTC data-channel bytes that arrived, summed over receivers.
    pub rtc_received_bytes: Option<u64>,
    pub rtc_sent_bytes: Option<u64>,
    pub p2p_timeouts: Option<u64>,
    pub p2p_failures: Option<u64>,
    pub peer_closes: Option<u64>,
}

/// The windows every number was computed over, so the report can state them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Windows {
    /// Width of the time bins counter deltas are spread into.
    pub bin_s: f64,
    /// Trailing window of every rate time series and of the peak.
    pub rate_window_s: f64,
    pub rate_window_rule: String,
    /// The plan's measurement point, seconds after the target was ready (the plan's clock).
    pub measure_at_s: f64,
    /// T on the raw data's clock (seconds since the run started): where the steady window ends.
    pub measure_point_s: f64,
    /// How T was found: the engine's `measure_point` event, or `target_ready` + `measure_at`.
    pub measure_point_source: String,
    /// Steady-state window (players, origin): `steady_from_s..steady_to_s`.
    pub steady_from_s: f64,
    pub steady_to_s: f64,
    /// Exporter's steady window start: never shorter than one playback-metrics interval.
    pub exporter_steady_from_s: f64,
    /// The players' playback-metrics interval used (PeerTube: 15 s).
    pub playback_metrics_interval_s: f64,
    /// The planned window was moved because the data ended before it.
    pub steady_clipped: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_note: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Qoe {
    pub ttff_median_ms: Option<f64>,
    pub ttff_p95_ms: Option<f64>,
    pub ttff_count: u32,
    pub stalls: u64,
    pub viewer_minutes: f64,
    pub stalls_per_viewer_minute: Option<f64>,
    /// Time spent rebuffering / time watched (after first frame), 0..1.
    pub stalled_time_share: Option<f64>,
    pub failed: Vec<FailedViewer>,
    /// Reason → number of viewers.
    pub failure_reasons: BTreeMap<String, u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailedViewer {
    pub viewer: u32,
    pub t: f64,
    /// `failed` or `lost`.
    pub kind: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Honesty {
    pub fleet_kind: FleetKind,
    pub shaping: String,
    /// What the fleet implies for the numbers, one sentence each.
    pub implications: Vec<String>,
    pub cpu: Option<CpuCheck>,
    pub scrape_gaps: Vec<Gap>,
    pub exporter_status: String,
    /// Raw files whose last line was cut short.
    pub truncated_files: Vec<String>,
    /// Other warnings about the numbers.
    pub warnings: Vec<String>,
    pub rerun_command: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuCheck {
    pub rule: String,
    pub saturated: bool,
    pub mean_busy: f64,
    pub max_busy: f64,
    /// Share of the sampled time with the host above the busy threshold, 0..1.
    pub saturated_share: f64,
    /// Same inside the steady window.
    pub steady_saturated_share: Option<f64>,
    pub samples: u32,
}

/// A named time series (`t` in seconds since start).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: &'static str,
    pub unit: &'static str,
    pub points: Vec<(f64, f64)>,
}

/// One viewer's totals, for distributions and `viewers.csv`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ViewerRow {
    pub viewer: u32,
    pub p2p: bool,
    pub node: Option<String>,
    pub address: Option<String>,
    pub ttff_ms: Option<f64>,
    pub http_bytes: u64,
    pub p2p_bytes: u64,
    pub p2p_up_bytes: u64,
    pub stalls: u64,
    pub stalled_ms: f64,
    pub watch_s: f64,
    /// `stopped`, `failed`, `lost`, `running` (no end recorded) or `never-started`.
    pub end: String,
    pub reason: Option<String>,
}

/// Everything one run's renderers need.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub summary: ReportSummary,
    /// Run folder's name (for titles; not in `report.json`).
    pub name: String,
    pub series: Vec<Series>,
    pub host_cpu: Vec<(f64, f64)>,
    pub viewers: Vec<ViewerRow>,
}

impl RunReport {
    pub fn series(&self, name: &str) -> Option<&Series> {
        self.series.iter().find(|s| s.name == name)
    }
}

/// Series names (also the CSV columns).
pub mod names {
    pub const EXPORTER_HTTP: &str = "exporter_http_mbps";
    pub const EXPORTER_P2P: &str = "exporter_p2p_mbps";
    pub const EXPORTER_UP: &str = "exporter_p2p_up_mbps";
    pub const PLAYERS_HTTP: &str = "players_http_mbps";
    pub const PLAYERS_P2P: &str = "players_p2p_mbps";
    pub const PLAYERS_UP: &str = "players_p2p_up_mbps";
    pub const ORIGIN: &str = "origin_segments_mbps";
    pub const ACTIVE: &str = "viewers_active";
    pub const STALLS_PER_MIN: &str = "stalls_per_minute";
    pub const STALLED_SHARE: &str = "stalled_share";
}
