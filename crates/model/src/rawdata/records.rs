//! The records of `raw/*.jsonl`: run and viewer events, the players', exporter's, hosts',
//! nodes' and light peers' samples.

use crate::isolation::IsolationCount;
use crate::kinds::named_enum;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
/// A milestone of the whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunEvent {
    pub t: f64,
    pub event: RunEventKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Viewers released so far (`ramp_step`, `ramp_settled` of a headroom-governed ramp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub viewers: Option<u32>,
    /// The host's mean busy share the ramp measured with them, 0..=1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_busy: Option<f64>,
}

named_enum! {
    /// A milestone's name in `run_events.jsonl`.
    pub enum RunEventKind {
        Started = "started",
        TargetReady = "target_ready",
        TargetUnreachable = "target_unreachable",
        RampDone = "ramp_done",
        /// A headroom-governed ramp measured the host with the viewers released so far.
        RampStep = "ramp_step",
        /// A headroom-governed ramp stopped releasing viewers (`viewers`, and why).
        RampSettled = "ramp_settled",
        MeasurePoint = "measure_point",
        Interrupted = "interrupted",
        /// A threshold with `abort_on_fail` failed while the run went (`detail`: which, its
        /// live value); the run ended early and tore down as at its planned end.
        Aborted = "aborted",
        Finished = "finished",
        Error = "error",
        /// A page of light peers started (`detail`: which peers, where, how shaped).
        LightStarted = "light_started",
        /// A page of light peers could not start or was lost (`detail`: which and why).
        LightFailed = "light_failed",
        /// A record could not be written (`detail`: the error, e.g. a full disk): the run
        /// stopped there.
        RecordLost = "record_lost",
    }
}

/// A change in one viewer's life.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ViewerEvent {
    pub t: f64,
    pub viewer: u32,
    pub event: ViewerEventKind,
    /// Whether this viewer was asked to use P2P.
    pub p2p: bool,
    /// Why it failed or was lost; the WebDriver or page error as received.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Fleet node or slot that hosts it (e.g. `local`, `vf-s3`, a Grid node URI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The viewer's own network address where the fleet gives it one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Time to first frame in ms, on `playing`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttff_ms: Option<f64>,
    /// When the plan asked for this viewer (seconds on the run's clock: the ramp's arrival
    /// time, or the moment a governed ramp released it), on the viewer's first event. The
    /// report draws the arrivals asked for against the sessions and first frames obtained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due_s: Option<f64>,
}

named_enum! {
    /// A change in a viewer's life, as named in `viewer_events.jsonl`.
    pub enum ViewerEventKind {
        /// Asked the fleet for a session.
        Creating = "creating",
        /// WebDriver session exists.
        SessionCreated = "session_created",
        /// The viewer page was opened.
        PageOpened = "page_opened",
        /// First frame played.
        Playing = "playing",
        /// Never started, or stopped with an error (see `reason`).
        Failed = "failed",
        /// Its browser or node went away mid-run.
        Lost = "lost",
        /// Stopped cleanly at the end of the run.
        Stopped = "stopped",
        /// Left the video on its own before the end (`viewers.churn`) and closed its tab and
        /// session cleanly; `reason` says after how long.
        Left = "left",
    }
}

/// One read of a player's stats. Counters are cumulative since the page was opened.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ViewerSample {
    pub t: f64,
    pub viewer: u32,
    pub http_down_bytes: u64,
    pub p2p_down_bytes: u64,
    pub p2p_up_bytes: u64,
    /// Connected P2P peers now.
    pub peers: u32,
    /// The video element is advancing (not paused, not waiting).
    pub playing: bool,
    pub current_time_s: f64,
    /// Seconds behind the live edge, as the player estimates it (live, where the page
    /// exposes hls.js).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_latency_s: Option<f64>,
    /// Rebuffering events after the first frame.
    pub stalls: u32,
    /// Total time spent rebuffering after the first frame, ms.
    pub stalled_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<u32>,
    pub dropped_frames: u64,
    pub errors: u32,
    /// Segment requests by outcome (absent in raw data of older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpOutcomes>,
    /// WebRTC's own byte counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtc: Option<RtcCounts>,
    /// The P2P engine's peer events, where the page exposes its engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<EngineEvents>,
    /// How late the page's timers ran: a starved page, on any fleet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag: Option<PageLag>,
    /// Media segments the player asked for and got, where the page counts them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segments: Option<SegmentCounts>,
    /// Every video track of the element is deselected (the decode lever took hold); absent
    /// where the browser does not expose video tracks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video_track_off: Option<bool>,
    /// The page's P2P connections and how ICE fared with each (the connectivity table).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ice: Option<IceLinks>,
}

/// The page's WebRTC peer connections that got an answer (so their peer is known), as the
/// probe followed them since the page opened (the latest few hundred).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct IceLinks {
    pub links: Vec<IceLink>,
}

named_enum! {
    /// How far ICE got on one peer connection.
    pub enum IceState {
        /// Checking, not connected yet.
        Pending = "pending",
        /// Connected (a candidate pair was selected).
        Connected = "connected",
        /// Failed, or closed before it ever connected.
        Failed = "failed",
    }
}

/// One peer connection, from the page that made it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IceLink {
    /// When it got its remote description, seconds after the page opened.
    pub at_s: f64,
    pub state: IceState,
    /// The remote's candidate addresses, from its description or trickled.
    #[serde(default)]
    pub remote: Vec<String>,
    /// The selected pair, once connected: candidate types (`host`, `srflx`, `prflx`,
    /// `relay`), address family (`ipv4`, `ipv6`), transport and the remote's address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_address: Option<String>,
    /// Seconds from the answer to the connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connected_after_s: Option<f64>,
}

/// Where one viewer (one life of it) sits: written when its session exists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ViewerNetwork {
    pub t: f64,
    pub viewer: u32,
    /// Its class of `viewers.networks` (absent without).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// The link profile's library name, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    #[serde(default)]
    pub nat: crate::kinds::NatKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<crate::kinds::IpStack>,
    /// Its slot, node or browser.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The addresses other viewers see it at (IPv6, its NAT's public IPv4).
    #[serde(default)]
    pub addresses: Vec<String>,
}

/// A player's media-segment requests, cumulative since the page opened.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SegmentCounts {
    /// Segments asked for (HTTP or P2P).
    pub requested: u64,
    /// Segments loaded.
    pub loaded: u64,
    /// Bytes of the segments loaded.
    pub bytes: u64,
    /// Segments loaded at each rendition height (`"720"`).
    pub by_height: BTreeMap<String, u64>,
}

/// The page's own lag meter (a timer due every 250 ms), cumulative since the page opened
/// except `max_ms`. A page whose host is out of CPU runs its timers, its player and its P2P
/// engine late alike; this is the one measure of starvation that needs nothing of the host.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PageLag {
    /// Ticks while the page was visible.
    pub ticks: u64,
    /// Their lateness summed, ms.
    pub late_ms: f64,
    /// Ticks later than 100 ms.
    pub late_ticks: u64,
    /// The worst lateness since the previous sample, ms.
    pub max_ms: f64,
    /// Ticks while the page was hidden (the browser throttles those timers on purpose).
    pub hidden_ticks: u64,
}

/// A page's media-segment requests by how they ended, cumulative since the page opened: what
/// lets the origin's bytes be reconciled with what the players counted.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct HttpOutcomes {
    /// Bodies read to the end.
    pub completed_bytes: u64,
    /// Responses read to the end.
    pub responses: u32,
    /// Announced length (Content-Length) of responses the page aborted: what the origin sent
    /// or started to send for them.
    pub aborted_announced_bytes: u64,
    /// Of those, what reached the page before the abort.
    pub aborted_delivered_bytes: u64,
    /// Announced length of responses still being read.
    pub in_flight_bytes: u64,
    /// Requests sent whose headers have not arrived yet.
    pub waiting_requests: u32,
    /// Segment requests that ended without their last byte.
    pub aborts: u32,
    /// Of those, requests aborted before their headers arrived (size unknown to the page).
    pub aborted_waiting: u32,
}

/// WebRTC's own count: data-channel bytes summed over the page's peer connections.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RtcCounts {
    /// Bytes that arrived (the receiver's view: delivered P2P bytes).
    pub received_bytes: u64,
    /// Bytes handed to `send()` (counted before delivery, like the engine's uploads).
    pub sent_bytes: u64,
    /// Peer connections the page opened.
    pub connections: u32,
}

/// The P2P engine's peer events, cumulative.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct EngineEvents {
    /// Peers the engine closed or destroyed.
    pub peer_closes: u32,
    pub peer_errors: u32,
    /// P2P segment downloads that timed out (`bytes-receiving-timeout`).
    pub p2p_timeouts: u32,
    /// P2P segment downloads that failed for any reason.
    pub p2p_failures: u32,
}

/// One read of one light peer (`swarm.light_peers`): a swarm member that runs the page's own
/// P2P engine against a simulated playhead, with nothing decoded. Counters are cumulative
/// since its page opened; `group` is the page (one browser session) that hosts it, whose
/// timers (`lag`) all of its peers share.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LightSample {
    pub t: f64,
    /// Its number among the run's light peers, 0-based.
    pub peer: u32,
    pub group: u32,
    pub http_down_bytes: u64,
    pub p2p_down_bytes: u64,
    pub p2p_up_bytes: u64,
    /// Connected P2P peers now.
    pub peers: u32,
    /// The simulated playhead has started (its first segment arrived).
    pub playing: bool,
    /// Where the playhead is, seconds on the stream's timeline.
    pub position_s: f64,
    /// Seconds behind the live edge, computed as hls.js does for a player (live only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_latency_s: Option<f64>,
    /// Time the playhead was held to stay as far behind the live edge as the run's real
    /// viewers (the latency they follow), ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_ms: Option<f64>,
    /// Segments loaded (HTTP or P2P).
    pub segments_loaded: u64,
    /// Times the playhead reached a segment that had not arrived (a real player would stall).
    pub segments_late: u32,
    /// Time the playhead spent waiting for late segments, ms.
    pub waited_ms: f64,
    pub errors: u32,
    /// The page's lag meter, shared by the group's peers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag: Option<PageLag>,
    /// The last error the peer saw, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// One scrape of the target's Prometheus exporter.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ExporterSample {
    pub t: f64,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub latency_ms: f64,
    /// Sum over all series of each scraped metric name (PeerTube has no per-viewer label,
    /// so sums are what its dashboards show too). Keys are metric names as scraped.
    #[serde(default)]
    pub sums: BTreeMap<String, f64>,
}

/// One sample of host resources: the load generator and, where known, the target's processes.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct HostSample {
    pub t: f64,
    /// Busy share of all cores since the previous sample, 0..=1.
    pub cpu_busy: f64,
    pub cores: u32,
    pub mem_used_bytes: u64,
    pub mem_total_bytes: u64,
    pub load1: f64,
    /// CPU seconds used by the target's processes since they started (local targets only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_cpu_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_rss_bytes: Option<u64>,
    /// CPU seconds used by all browser processes (chromium) since the previous sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browsers_cpu_s: Option<f64>,
    /// Share of all cores the hypervisor gave to other guests (steal) since the previous
    /// sample, 0..=1: time this host wanted and did not get.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_steal: Option<f64>,
    /// Share of the time at least one task waited for a CPU (Linux pressure stall
    /// information, `/proc/pressure/cpu` "some"), since the previous sample, 0..=1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_pressure: Option<f64>,
    /// Proportional set size of all browser processes (chromium), bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browsers_pss_bytes: Option<u64>,
    /// Browser processes (chromium) now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browser_processes: Option<u32>,
    /// CPU seconds since the previous sample of this controller's own browsers (chromium
    /// processes below its process: the run's, without any other program's Chromium).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_browsers_cpu_s: Option<f64>,
    /// Proportional set size of this controller's own browsers, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_browsers_pss_bytes: Option<u64>,
    /// This controller's own browser processes now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_browser_processes: Option<u32>,
    /// CPU seconds since the previous sample of this controller's Node.js light-peer hosts
    /// (`node` processes below it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub light_hosts_cpu_s: Option<f64>,
    /// Their proportional set size, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub light_hosts_pss_bytes: Option<u64>,
    /// Light-peer host processes now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub light_host_processes: Option<u32>,
}

/// One read of a viewer node's load endpoint (a Grid node set up by viewerfleet: local
/// Grid, cloud bootstrap, Terraform): the CPU, memory and browsers of a machine that runs
/// viewers, where the controller cannot measure it itself. Shares cover the time since
/// the node's previous sample.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NodeSample {
    pub t: f64,
    /// The node as viewer events name it (its Grid URI).
    pub node: String,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Cores the node's browsers may use: its cgroup's CPU quota where it has one, else
    /// the machine's cores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<f64>,
    /// Busy share of those cores, 0..=1 (can pass 1 briefly under a quota's bursts): of the
    /// machine's cores, steal included (time the node wanted and did not get); of a
    /// cgroup's quota, what its processes used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_busy: Option<f64>,
    /// Share of the machine's cores taken by the hypervisor for other guests, 0..=1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_steal: Option<f64>,
    /// Share of the cgroup's scheduling periods in which its quota ran out, 0..=1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_throttled: Option<f64>,
    /// Share of the time some task of the node waited for a CPU (pressure stall
    /// information), 0..=1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_pressure: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_used_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_total_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load1: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browsers_pss_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browser_processes: Option<u32>,
    /// The node's browsers (top-level processes) by the user they ran as and whether with
    /// Chromium's sandbox, as its load endpoint counted them; empty when it counted none
    /// (no browser running, or an endpoint older than this count).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub browsers_by_isolation: Vec<IsolationCount>,
}

impl RunEvent {
    /// The viewers a governed ramp released: where it settled, else (a run that ended
    /// while it measured) its last step; `None` without a governed ramp.
    pub fn released_viewers(events: &[RunEvent]) -> Option<u32> {
        let last = |kind| events.iter().rev().find(|e| e.event == kind)?.viewers;
        last(RunEventKind::RampSettled).or_else(|| last(RunEventKind::RampStep))
    }
}
