//! The report's data model: `ReportSummary` is `report.json` (numbers only, no paths, no
//! clock time, so rebuilding from a copied run folder gives identical bytes); `RunReport`
//! adds the time series and per-viewer rows that the plots and CSV files need.

use super::rates::Gap;
use crate::model::kinds::{named_enum, FleetKind, Latency, RateSource, TargetKind, VideoKind};
use crate::model::rawdata::HostInfo;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of `report.json`'s layout; bumped when a field changes meaning.
///
/// 2: `headroom` (which viewers were starved, the figures of those that were not, whether
/// the P2P figure is a finding); `honesty.cpu` says whose machine it measured
/// (`viewers_machine`) and adds mean steal and CPU pressure.
///
/// 3: every requested viewer is counted: `viewers.failed` includes those that never started
/// (no event at all, or the run ended while they waited, were queued or had no first frame),
/// `viewers.not_started` counts them; `arrival` (the arrivals asked for against the sessions
/// and first frames obtained).
///
/// Light peers (`light`, and their bytes in the `players` table) came as an optional
/// addition: a reader of schema 3 that ignores `light` still reads every field it knew.
pub const SCHEMA_VERSION: u32 = 3;

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
    /// Whether the viewers had CPU headroom in the steady window, per machine and per
    /// viewer, and the players' figures of the viewers that had it (absent in reports of
    /// schema 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headroom: Option<Headroom>,
    /// The arrivals the run asked for against the sessions and first frames it got (absent
    /// when the raw data has no arrival times: runs recorded before schema 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival: Option<Arrival>,
    pub honesty: Honesty,
    /// The scenario's `thresholds`, each judged against the figures above (absent when the
    /// scenario has none): metric, condition, value, pass.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<super::thresholds::ThresholdResult>,
    /// Who reached whom over P2P, by network class (runs that recorded their viewers'
    /// networks or peer connections).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connectivity: Option<super::connectivity::Connectivity>,
    /// Who left, who replaced them, who came late (runs with `viewers.churn`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub churn: Option<super::churn::Churn>,
    /// The light peers (`swarm.light_peers`): what they moved, their P2P upload against the
    /// viewers', their pages' starvation (absent in runs without light peers). Their bytes
    /// are also in the `players` table, which is the whole swarm's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub light: Option<super::light::LightReport>,
}

impl ReportSummary {
    /// The run's P2P figure is not a finding: its steady window was starved.
    pub fn not_a_finding(&self) -> bool {
        self.headroom
            .as_ref()
            .is_some_and(|h| h.verdict == HeadroomVerdict::NotAFinding)
    }

    /// At least one of the scenario's thresholds failed (the run exits 99).
    pub fn thresholds_failed(&self) -> bool {
        super::thresholds::any_failed(&self.thresholds)
    }
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
    /// Viewers that never started or stopped with an error: every requested viewer that did
    /// not play and was not lost is here, with its reason.
    pub failed: u32,
    /// Viewers whose browser or node went away mid-run.
    pub lost: u32,
    /// Of the requested viewers, those that never played a first frame (counted in `failed`).
    #[serde(default)]
    pub not_started: u32,
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
    /// The light peers' own HTTP count up to the same time (they have no figures by
    /// outcome, so their bytes are taken as read to the end); absent without light peers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub light_bytes: Option<u64>,
    /// Origin − (completed + aborted + in flight + waiting estimate + light peers').
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
    /// Of the downloads, the light peers' (absent without light peers): WebRTC's own
    /// counts below come from the viewers' pages only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub light_downloaded_bytes: Option<u64>,
    /// WebRTC data-channel bytes that arrived, summed over the viewers' pages.
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

/// A per-viewer figure's spread: percentiles (interpolated), the largest and the mean.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Distribution {
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
    pub avg: f64,
    /// How many viewers it is made of.
    pub n: u32,
}

impl Distribution {
    /// The spread of the finite `values`; `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Distribution> {
        use super::stats::percentile;
        let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        Some(Distribution {
            p50: percentile(&finite, 50.0)?,
            p90: percentile(&finite, 90.0)?,
            p95: percentile(&finite, 95.0)?,
            p99: percentile(&finite, 99.0)?,
            max: percentile(&finite, 100.0)?,
            avg: finite.iter().sum::<f64>() / finite.len() as f64,
            n: finite.len() as u32,
        })
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Qoe {
    pub ttff_median_ms: Option<f64>,
    #[serde(default)]
    pub ttff_p90_ms: Option<f64>,
    pub ttff_p95_ms: Option<f64>,
    #[serde(default)]
    pub ttff_p99_ms: Option<f64>,
    /// The longest time to first frame of the viewers that played.
    #[serde(default)]
    pub ttff_max_ms: Option<f64>,
    /// The mean time to first frame of the viewers that played.
    #[serde(default)]
    pub ttff_avg_ms: Option<f64>,
    pub ttff_count: u32,
    pub stalls: u64,
    pub viewer_minutes: f64,
    pub stalls_per_viewer_minute: Option<f64>,
    /// Time spent rebuffering / time watched (after first frame), 0..1.
    pub stalled_time_share: Option<f64>,
    /// Each viewer's own share of time rebuffering (stalled / watched), over the viewers
    /// that watched: how the rebuffering spread (absent when none watched).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub viewer_stalled_share: Option<Distribution>,
    pub failed: Vec<FailedViewer>,
    /// Reason → number of viewers.
    pub failure_reasons: BTreeMap<String, u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailedViewer {
    pub viewer: u32,
    /// When it failed or was lost; `None` for a viewer with no event recorded.
    pub t: Option<f64>,
    pub kind: FailureKind,
    pub reason: String,
}

named_enum! {
    /// How a viewer left the run before its end.
    pub enum FailureKind {
        /// It never played, or a command of its session failed.
        Failed = "failed",
        /// Its browser or node went away under it.
        Lost = "lost",
    }
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
    /// The browsers ran on this machine (fleets `local`, `netns`, a Grid on this machine),
    /// so this check judges the viewers' headroom; false: it measured the controller's
    /// machine only (absent in reports of schema 1, which judged only such fleets' hosts).
    #[serde(default = "yes")]
    pub viewers_machine: bool,
    pub saturated: bool,
    pub mean_busy: f64,
    pub max_busy: f64,
    /// Share of the sampled time with the host above the busy threshold, 0..1.
    pub saturated_share: f64,
    /// Same inside the steady window.
    pub steady_saturated_share: Option<f64>,
    pub samples: u32,
    /// Mean share of the cores the hypervisor gave to other guests (included in busy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_steal: Option<f64>,
    /// Mean share of the time some task waited for a CPU (pressure stall information):
    /// shown, not judged (on 2 cores it is high well below saturation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_pressure: Option<f64>,
}

fn yes() -> bool {
    true
}

named_enum! {
    /// Whether a run's P2P figure can be quoted, as far as CPU headroom goes.
    pub enum HeadroomVerdict {
        /// The viewers had headroom in the steady window.
        Finding = "finding",
        /// The steady window was starved: the P2P figure is biased towards HTTP.
        NotAFinding = "not-a-finding",
        /// Nothing measured the viewers' machines or pages.
        Unknown = "unknown",
    }
}

named_enum! {
    /// One viewer's headroom in the steady window.
    pub enum ViewerHeadroomStatus {
        /// Its page kept time and its machine was not saturated.
        Headroom = "headroom",
        /// Its page was starved or its machine saturated.
        Starved = "starved",
        /// Neither its page nor its machine was measured.
        Unknown = "unknown",
        /// It did not watch during the steady window (not in the figures at T).
        NotWatching = "not-watching",
    }
}

/// `report.json` `headroom`: saturation judged per machine and per viewer (see
/// `report::headroom` for the rules), and the players' figures at T with and without the
/// viewers that were starved. Nothing is left out silently: both sets of figures are given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Headroom {
    pub verdict: HeadroomVerdict,
    /// One line saying what the verdict rests on (what `viewerfleet run` prints).
    pub headline: String,
    /// Why the P2P figure is not a finding, one sentence each (empty for a finding).
    pub not_a_finding_because: Vec<String>,
    /// The rules, as applied.
    pub rules: Vec<String>,
    pub steady_from_s: f64,
    pub steady_to_s: f64,
    /// This machine (the controller's), with the rule applied to its samples.
    pub host: Option<MachineHeadroom>,
    /// The browsers ran on this machine, so `host` judges every viewer.
    pub host_judges_viewers: bool,
    /// Viewer nodes with samples of their load endpoint.
    pub nodes: Vec<MachineHeadroom>,
    /// Nodes viewers ran on without any sample: their load is unknown, their viewers are
    /// judged by their pages alone (and kept in the figures).
    pub unsampled_nodes: Vec<UnsampledNode>,
    pub viewers: HeadroomViewers,
    /// The players' figures at T over all viewers and over those with headroom.
    pub figures: HeadroomFigures,
    /// Shared-CPU warnings (steal).
    pub warnings: Vec<String>,
}

/// One machine's CPU against the rule: this host or a viewer node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineHeadroom {
    /// The node as viewer events name it; `this machine` for the host.
    pub name: String,
    /// Samples with CPU figures.
    pub samples: u32,
    /// Reads that failed (nodes).
    pub failed_samples: u32,
    /// Cores its browsers may use (a node's CPU allowance).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<f64>,
    /// Mean busy share (steal counted as busy), weighted by the time each sample covers.
    pub mean_busy: f64,
    pub max_busy: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_steal: Option<f64>,
    /// Mean share of cgroup periods that hit the CPU quota (nodes with a quota).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_throttled: Option<f64>,
    /// Mean CPU pressure (shown, not judged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_pressure: Option<f64>,
    /// Largest proportional set size of its browsers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_browsers_pss_bytes: Option<u64>,
    /// Share of the sampled time it was hot, 0..1.
    pub hot_share: f64,
    /// Same inside the steady window (`None`: no sample covers it).
    pub steady_hot_share: Option<f64>,
    /// Hot for more than the rule's share of the sampled time or of the steady window.
    pub saturated: bool,
    /// Hot for more than the rule's share of the steady window: its viewers had no headroom.
    pub saturated_in_steady: bool,
    /// Viewers it carried in the steady window.
    pub viewers: u32,
    /// When it was hot: adjacent hot sample intervals merged, the first few listed.
    pub hot_spans: Vec<Span>,
    pub hot_spans_total: u32,
}

/// A stretch of time, seconds since the run's start.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Span {
    pub from_s: f64,
    pub to_s: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnsampledNode {
    pub node: String,
    /// Viewers it carried in the steady window.
    pub viewers: u32,
}

/// Viewer counts by headroom, and the viewers that were starved at some time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HeadroomViewers {
    /// Viewers that played a first frame.
    pub started: u32,
    /// Viewers watching during the steady window (the players' figures at T cover them).
    pub in_steady: u32,
    /// Of those, without headroom there.
    pub starved: u32,
    /// Of those, with headroom (their page kept time and their machine was not saturated).
    pub with_headroom: u32,
    /// Of those, neither page nor machine measured: kept in the figures with headroom.
    pub unknown: u32,
    /// Starved viewers by reason (a viewer can have several).
    pub starved_by_page_lag: u32,
    pub starved_by_node: u32,
    pub starved_by_host: u32,
    /// Viewers without headroom in the steady window or with starved spans at any time, in
    /// viewer order, the first few (`viewers.csv` has every viewer).
    pub listed: Vec<ViewerHeadroom>,
    pub not_listed: u32,
}

/// One viewer's headroom.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ViewerHeadroom {
    pub viewer: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub status: ViewerHeadroomStatus,
    /// Why it had no headroom (`page lag`, `node X saturated`, `host saturated`), or what
    /// is unknown about it.
    pub reasons: Vec<String>,
    /// Its page's lag meter over the steady window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<PageLagWindow>,
    /// When its page was starved: adjacent starved sample intervals merged, the first few.
    pub starved_spans: Vec<Span>,
    pub starved_spans_total: u32,
    /// Time its page was starved over the run, seconds.
    pub starved_s: f64,
}

/// A page's lag meter over a window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PageLagWindow {
    /// Visible timer ticks in the window.
    pub ticks: f64,
    /// Mean lateness of a tick, ms.
    pub mean_late_ms: f64,
    /// Share of ticks more than 100 ms late, 0..1.
    pub late_ticks_share: f64,
    /// Worst lateness of a tick, ms.
    pub max_ms: f64,
    /// Starved by the page rule.
    pub starved: bool,
}

/// The players' figures at T over all viewers and over the viewers with headroom.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HeadroomFigures {
    pub all: Option<FiguresAtT>,
    /// `None` when no viewer had headroom.
    pub with_headroom: Option<FiguresAtT>,
    /// Why the exporter's figures have no such split.
    pub exporter_note: String,
}

/// The players' figures over the steady window, as the `players` table computes them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FiguresAtT {
    /// Viewers the figures cover (watching in the steady window).
    pub viewers: u32,
    pub http_at_mbps: Option<f64>,
    pub p2p_at_mbps: Option<f64>,
    pub http_share: Option<f64>,
    pub p2p_savings: Option<f64>,
}

/// The arrivals asked for against those obtained (`report::arrival`). Times are seconds on
/// the run's clock; rates are viewers per minute.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Arrival {
    /// One sentence: kept up, or fell behind from when and by how much.
    pub headline: String,
    /// Viewers with an arrival time (the plan asked for them).
    pub asked: u32,
    /// Of those, viewers whose session was asked of the fleet.
    pub requested_from_fleet: u32,
    pub sessions: u32,
    pub first_frames: u32,
    /// First and last arrival time asked for.
    pub asked_from_s: f64,
    pub asked_to_s: f64,
    /// Arrivals per minute over the span asked for.
    pub asked_per_min: Option<f64>,
    /// Sessions per minute from the first arrival time to the last session.
    pub sessions_per_min: Option<f64>,
    /// When half and all of the asked viewers were asked for, had sessions, played.
    pub milestones: Vec<ArrivalMilestone>,
    /// A session later than this after its arrival time counts as behind the ramp.
    pub lag_tolerance_s: f64,
    /// The first arrival time whose session (k-th session for the k-th arrival) came later
    /// than the tolerance; `None`: the fleet kept up.
    pub behind_from_s: Option<f64>,
    /// The largest such lag, seconds (a lower bound when `still_behind_at_end`).
    pub max_lag_s: Option<f64>,
    /// Some viewers asked for never had a session before the data ended.
    pub still_behind_at_end: bool,
    /// The most viewers asked for but without a session at one moment, and when.
    pub max_behind: u32,
    pub max_behind_at_s: Option<f64>,
    /// Each viewer's session time minus its arrival time.
    pub session_delay: Option<ArrivalDelay>,
    /// Arrivals asked for, sessions and first frames per minute of the run.
    pub per_minute: Vec<ArrivalMinute>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ArrivalMilestone {
    /// Share of the asked viewers, 0..1.
    pub share: f64,
    pub viewers: u32,
    pub asked_s: Option<f64>,
    pub sessions_s: Option<f64>,
    pub first_frames_s: Option<f64>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ArrivalDelay {
    pub median_s: f64,
    pub p95_s: f64,
    pub max_s: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ArrivalMinute {
    /// Start of the minute, seconds.
    pub from_s: f64,
    pub asked: u32,
    pub sessions: u32,
    pub first_frames: u32,
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
    /// When the plan asked for it, its session was asked of the fleet, existed, and played.
    pub due_s: Option<f64>,
    pub creating_s: Option<f64>,
    pub session_s: Option<f64>,
    pub playing_s: Option<f64>,
    /// `stopped`, `failed`, `lost`, or `running` (started, no end recorded).
    pub end: String,
    pub reason: Option<String>,
    /// Headroom in the steady window, with the reasons and the page's lag meter there.
    pub headroom: Option<ViewerHeadroomStatus>,
    pub headroom_reasons: Vec<String>,
    pub page: Option<PageLagWindow>,
}

/// Everything one run's renderers need.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub summary: ReportSummary,
    /// Run folder's name (for titles; not in `report.json`).
    pub name: String,
    pub series: Vec<Series>,
    /// This machine's samples: time, busy, steal, pressure.
    pub host_cpu: Vec<HostCpu>,
    /// Each sampled viewer node's busy share (steal included) over time.
    pub node_busy: Vec<(String, Vec<(f64, f64)>)>,
    pub viewers: Vec<ViewerRow>,
}

/// One host sample's CPU figures, for `host.csv` and the plot.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HostCpu {
    pub t: f64,
    pub busy: f64,
    pub steal: Option<f64>,
    pub pressure: Option<f64>,
}

impl RunReport {
    pub fn series(&self, name: &str) -> Option<&Series> {
        self.series.iter().find(|s| s.name == name)
    }
}

/// Series names (also the CSV columns).
pub(crate) mod names {
    pub(crate) const EXPORTER_HTTP: &str = "exporter_http_mbps";
    pub(crate) const EXPORTER_P2P: &str = "exporter_p2p_mbps";
    pub(crate) const EXPORTER_UP: &str = "exporter_p2p_up_mbps";
    pub(crate) const PLAYERS_HTTP: &str = "players_http_mbps";
    pub(crate) const PLAYERS_P2P: &str = "players_p2p_mbps";
    pub(crate) const PLAYERS_UP: &str = "players_p2p_up_mbps";
    pub const ORIGIN: &str = "origin_segments_mbps";
    pub(crate) const ACTIVE: &str = "viewers_active";
    pub(crate) const STALLS_PER_MIN: &str = "stalls_per_minute";
    pub(crate) const STALLED_SHARE: &str = "stalled_share";
    pub(crate) const PAGE_LATE_MS: &str = "page_mean_late_ms";
}
