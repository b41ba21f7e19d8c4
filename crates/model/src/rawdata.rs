//! The run folder's raw data: record types and the append-only writer.
//!
//! Everything a report needs is written here as it arrives, one JSON object per line, so a
//! run killed with `kill -9` still leaves every sample up to the last one. Reports are built
//! from these files only (see `report`), never from in-memory state.
//!
//! Layout of a run folder:
//! ```text
//! RUN_DIR/
//!   scenario.yaml              the scenario as run (after CLI overrides)
//!   manifest.json              tool/host/versions/fleet/command; `ended_at` unset = cut short
//!   raw/run_events.jsonl       RunEvent
//!   raw/viewer_events.jsonl    ViewerEvent
//!   raw/viewer_samples.jsonl   ViewerSample (cumulative counters per viewer)
//!   raw/exporter_samples.jsonl ExporterSample (sums of the target's Prometheus counters)
//!   raw/host_samples.jsonl     HostSample (load generator and target processes)
//!   raw/light_samples.jsonl    LightSample (cumulative counters per light peer)
//! ```
//! Times (`t`) are seconds since the run's start (`manifest.started_at_unix_ms`).

use crate::kinds::{named_enum, FleetKind, Latency, TargetKind, Throttling, VideoKind};
use crate::scenario::BrowserSetup;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

pub const RUN_EVENTS: &str = "raw/run_events.jsonl";
pub const VIEWER_EVENTS: &str = "raw/viewer_events.jsonl";
pub const VIEWER_SAMPLES: &str = "raw/viewer_samples.jsonl";
pub const EXPORTER_SAMPLES: &str = "raw/exporter_samples.jsonl";
pub const HOST_SAMPLES: &str = "raw/host_samples.jsonl";
pub const NODE_SAMPLES: &str = "raw/node_samples.jsonl";
/// Light peers' reads (`swarm.light_peers`): one record per peer per read.
pub const LIGHT_SAMPLES: &str = "raw/light_samples.jsonl";
/// Where each viewer sits on the (emulated) internet: its class, NAT and addresses.
pub const VIEWER_NETWORKS: &str = "raw/viewer_networks.jsonl";
pub const MANIFEST: &str = "manifest.json";
pub const SCENARIO_COPY: &str = "scenario.yaml";

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
}

/// What a report needs to say how the numbers were measured and on what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub tool_version: String,
    #[serde(default)]
    pub git_commit: Option<String>,
    /// The exact command line, to re-run.
    pub command_line: Vec<String>,
    pub scenario_name: String,
    pub started_at: String,
    pub started_at_unix_ms: u64,
    /// Unset while running or when the run was killed: the report then says it is partial.
    #[serde(default)]
    pub ended_at: Option<String>,
    #[serde(default)]
    pub exit_status: Option<String>,
    /// Why the run ended early: a threshold with `abort_on_fail` failed while it went
    /// (absent: it was not ended early this way).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aborted: Option<String>,
    pub host: HostInfo,
    #[serde(default)]
    pub versions: BTreeMap<String, String>,
    pub fleet: FleetDescription,
    /// How the browsers were started (absent in manifests of older versions, which all
    /// used viewerfleet's own set-up of their day).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browser: Option<BrowserSetup>,
    pub target: TargetDescription,
    pub plan: PlanSummary,
}

impl Manifest {
    /// A manifest of a local refsite live run with every other field empty, for tests
    /// that build raw data by hand.
    pub fn example() -> Self {
        Manifest {
            tool_version: String::new(),
            git_commit: None,
            command_line: Vec::new(),
            scenario_name: String::new(),
            started_at: String::new(),
            started_at_unix_ms: 0,
            ended_at: None,
            exit_status: None,
            aborted: None,
            host: HostInfo::default(),
            versions: BTreeMap::new(),
            fleet: FleetDescription {
                kind: FleetKind::Local,
                own_address_per_viewer: false,
                http_shaped: false,
                p2p_shaped: false,
                shaping: String::new(),
                throttling: None,
                notes: Vec::new(),
                packing: None,
                browsers_on_this_host: None,
            },
            browser: None,
            target: TargetDescription {
                kind: TargetKind::Refsite,
                video: VideoKind::Live,
                latency: None,
                viewer_url: String::new(),
                exporter_url: None,
                playback_metrics_interval_s: None,
            },
            plan: PlanSummary::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct HostInfo {
    pub hostname: String,
    pub cpus: u32,
    pub cpu_model: String,
    pub mem_total_bytes: u64,
    pub kernel: String,
    pub os: String,
}

/// What a fleet implies for the measurements (the report's honesty section).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetDescription {
    pub kind: FleetKind,
    /// Every viewer has its own network address.
    pub own_address_per_viewer: bool,
    /// HTTP is shaped (CDP and/or tc).
    pub http_shaped: bool,
    /// P2P (WebRTC) is shaped: only a per-viewer interface qdisc does that.
    pub p2p_shaped: bool,
    /// How shaping is applied, in words naming the mode and its mechanism.
    pub shaping: String,
    /// The throttling mode of the run's network profile (absent in older manifests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttling: Option<Throttling>,
    /// Further caveats, one sentence each.
    #[serde(default)]
    pub notes: Vec<String>,
    /// Several viewers per browser (`viewers.per_browser` > 1); absent: one browser each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packing: Option<Packing>,
    /// The browsers run on the controller's machine (fleets `local` and `netns`, a Grid on
    /// this machine), so its host samples measure the viewers' headroom; false: they run
    /// elsewhere and only node samples and the pages' lag meters do. Absent in manifests of
    /// older versions: `local` and `netns` did, other fleets did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browsers_on_this_host: Option<bool>,
}

impl FleetDescription {
    /// Whether the controller's host samples describe the viewers' machine.
    pub fn browsers_on_this_host(&self) -> bool {
        self.browsers_on_this_host
            .unwrap_or(self.kind.browsers_on_this_host())
    }
}

/// What several viewers per browser share, for the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Packing {
    /// Viewers per browser (the last browser may hold fewer).
    pub per_browser: u32,
    /// Viewers seen from each network address, when browsers have addresses of their own
    /// (netns slots, Grid nodes with viewer slots); `None`: all of a host's viewers share
    /// its address, or it is unknown.
    pub viewers_per_address: Option<u32>,
    /// Viewers sharing each tc-shaped link, when browsers have links of their own.
    pub viewers_per_link: Option<u32>,
    /// Rates of each shared link, as the fleet applies them (e.g. `8000/1200 kbit/s`).
    pub link: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetDescription {
    pub kind: TargetKind,
    pub video: VideoKind,
    /// Live only.
    #[serde(default)]
    pub latency: Option<Latency>,
    pub viewer_url: String,
    #[serde(default)]
    pub exporter_url: Option<String>,
    /// How often players POST playback metrics to the platform (PeerTube: 15 s). Exporter
    /// counters move in steps of this size, so exporter rates need windows at least this long.
    #[serde(default)]
    pub playback_metrics_interval_s: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PlanSummary {
    pub viewers: u32,
    pub p2p_off_share: f64,
    pub ramp_s: f64,
    pub duration_s: f64,
    pub sampling_interval_s: f64,
    /// The "HTTP after 5 minutes" point of the PeerTube report, in seconds since start.
    pub measure_at_s: f64,
    /// Width of the steady-state window centred before `measure_at_s`, seconds.
    pub steady_window_s: f64,
    /// `viewers.network`'s link (its `apply` is not recorded here: how the fleet applied
    /// the profiles is the fleet description's `throttling`).
    pub network: crate::scenario::LinkProfile,
    #[serde(default)]
    pub max_failed_viewers: u32,
    /// `viewers.count: auto`: the busy share the governed ramp stayed below; `viewers` is
    /// then its maximum and the `ramp_settled` run event says how many it released.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_cpu_below: Option<f64>,
    /// The scenario's `thresholds`, as written; the report judges them (absent in
    /// manifests of older versions and of scenarios without thresholds).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<crate::scenario::ThresholdText>,
    /// `viewers.churn`, in words (absent without churn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub churn: Option<String>,
    /// `swarm.light_peers`: light peers beside the viewers (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub light: Option<LightSummary>,
}

/// The light peers of a run, as planned and how they were shaped.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LightSummary {
    pub peers: u32,
    /// Peers per page (one browser session or host process each).
    pub per_page: u32,
    /// What ran the pages: `node` (a Node.js process each) or `browser` (a Chromium page
    /// each); absent in manifests written before light peers could run in Node.js.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// How their HTTP and P2P were shaped, in words.
    pub shaping: String,
    /// The fidelity verdict the scenario's `swarm.fidelity` named: light peers against an
    /// all-real swarm (absent: the run relied on none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fidelity: Option<crate::scenario::light::FidelityRecord>,
}

impl RunEvent {
    /// The viewers a governed ramp released: where it settled, else (a run that ended
    /// while it measured) its last step; `None` without a governed ramp.
    pub fn released_viewers(events: &[RunEvent]) -> Option<u32> {
        let last = |kind| events.iter().rev().find(|e| e.event == kind)?.viewers;
        last(RunEventKind::RampSettled).or_else(|| last(RunEventKind::RampStep))
    }
}

/// Appends records to one JSON-lines file, flushing after every record so nothing is lost
/// when the process dies. Samples arrive every few seconds, so a flush per line is cheap.
pub struct JsonlWriter {
    path: PathBuf,
    out: BufWriter<std::fs::File>,
}

impl JsonlWriter {
    pub fn append(path: &Path) -> std::io::Result<Self> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Self {
            path: path.to_path_buf(),
            out: BufWriter::new(file),
        })
    }

    pub fn write<T: Serialize>(&mut self, record: &T) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.out, record)?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flushes and puts what was written on disk (fsync).
    pub fn sync(&mut self) -> std::io::Result<()> {
        self.out.flush()?;
        self.out.get_ref().sync_all()
    }
}

/// Why a raw-data file could not be read; each names the file (and the line) and the fix.
#[derive(Debug, thiserror::Error)]
pub enum RawDataError {
    /// A line other than the last is not a record.
    #[error(
        "{path}:{line}: not a valid record ({reason}); the line is damaged before the end of the file: fix or delete that line and re-run `viewerfleet report`"
    )]
    DamagedLine {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    /// The folder that should hold the file is a file.
    #[error(
        "{folder} is a file, not a folder: a run folder keeps its raw data in raw/*.jsonl; restore raw/ from a copy of the run folder"
    )]
    FolderIsAFile { folder: PathBuf },
    /// The path is a folder, a device, a FIFO or a socket.
    #[error("{path} is {kind}, not a raw-data file; restore it from a copy of the run folder")]
    NotAFile { path: PathBuf, kind: &'static str },
    #[error("{path}: cannot read: {source}")]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What kind of thing a path is, for messages ("a folder", "a FIFO (named pipe)", …).
pub fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_file() {
        "a file"
    } else if t.is_dir() {
        "a folder"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Reads a regular file, refusing devices, FIFOs and folders (which would never end or
/// never start) and files above `max_bytes`. `NotFound` stays `NotFound`.
pub fn read_regular_file(path: &Path, max_bytes: u64) -> std::io::Result<Vec<u8>> {
    use std::io::{Error, ErrorKind, Read};
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!("is {}, not a regular file", file_kind(&meta)),
        ));
    }
    let too_large = |size: u64| {
        Error::new(
            ErrorKind::InvalidData,
            format!("is {size} bytes, more than the {max_bytes} bytes such a file may have"),
        )
    };
    if meta.len() > max_bytes {
        return Err(too_large(meta.len()));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// Largest `manifest.json` read (a real one is a few KiB).
pub const MAX_MANIFEST_BYTES: u64 = 16 * 1024 * 1024;

/// Reads `manifest.json` as text: a regular file of at most [`MAX_MANIFEST_BYTES`] of
/// UTF-8. `NotFound` stays `NotFound`, so a caller can tell "no manifest" apart.
pub fn read_manifest_text(path: &Path) -> std::io::Result<String> {
    let bytes = read_regular_file(path, MAX_MANIFEST_BYTES)?;
    String::from_utf8(bytes).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("is not UTF-8 text ({e})"),
        )
    })
}

/// Reads a JSON-lines file. A last line cut short by a crash is skipped (and counted), any
/// other bad line is an error naming the file and line. A missing file has no records; a
/// folder, device or FIFO in its place, or a `raw` that is a file, is an error saying so.
pub fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> anyhow::Result<JsonlContents<T>> {
    Ok(read_records(path)?)
}

/// [`read_jsonl`] with its typed error.
pub fn read_records<T: for<'de> Deserialize<'de>>(
    path: &Path,
) -> Result<JsonlContents<T>, RawDataError> {
    if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        if std::fs::metadata(folder).is_ok_and(|m| !m.is_dir()) {
            return Err(RawDataError::FolderIsAFile {
                folder: folder.to_path_buf(),
            });
        }
    }
    let bytes = match std::fs::metadata(path) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Ok(JsonlContents {
                records: Vec::new(),
                line_numbers: Vec::new(),
                truncated_last_line: false,
            })
        }
        Ok(meta) if !meta.is_file() => {
            return Err(RawDataError::NotAFile {
                path: path.to_path_buf(),
                kind: file_kind(&meta),
            })
        }
        _ => std::fs::read(path).map_err(|source| RawDataError::Unreadable {
            path: path.to_path_buf(),
            source,
        })?,
    };
    let mut records = Vec::new();
    let mut line_numbers = Vec::new();
    let mut truncated_last_line = false;
    let ends_with_newline = bytes.last() == Some(&b'\n');
    let body = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
    let count = if bytes.is_empty() {
        0
    } else {
        body.split(|&b| b == b'\n').count()
    };
    for (index, raw) in body.split(|&b| b == b'\n').enumerate().take(count) {
        let parsed = std::str::from_utf8(raw)
            .map_err(|e| format!("not UTF-8 text: {e}"))
            .and_then(|line| {
                if line.trim().is_empty() {
                    Ok(None)
                } else {
                    serde_json::from_str(line)
                        .map(Some)
                        .map_err(|e| e.to_string())
                }
            });
        match parsed {
            Ok(Some(record)) => {
                records.push(record);
                line_numbers.push(index + 1);
            }
            Ok(None) => {}
            Err(_) if index + 1 == count && !ends_with_newline => {
                truncated_last_line = true;
            }
            Err(reason) => {
                return Err(RawDataError::DamagedLine {
                    path: path.to_path_buf(),
                    line: index + 1,
                    reason,
                })
            }
        }
    }
    Ok(JsonlContents {
        records,
        line_numbers,
        truncated_last_line,
    })
}

pub struct JsonlContents<T> {
    pub records: Vec<T>,
    /// The 1-based line of each record, in the same order.
    pub line_numbers: Vec<usize>,
    /// The file ended in a partial line (the writer was killed mid-write).
    pub truncated_last_line: bool,
}

/// Writes a file atomically (temp file + rename) so a reader never sees half of it.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(bytes)?;
    // On disk before it replaces the old file, and the rename on disk before we go on: a
    // crash leaves the old manifest or the new one, never an empty one.
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncated_last_line_is_skipped_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.jsonl");
        let mut w = JsonlWriter::append(&path).unwrap();
        w.write(&RunEvent {
            t: 1.0,
            event: RunEventKind::Started,
            detail: None,
            viewers: None,
            cpu_busy: None,
        })
        .unwrap();
        drop(w);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"{\"t\":2.0,\"ev").unwrap();
        let got: JsonlContents<RunEvent> = read_jsonl(&path).unwrap();
        assert_eq!(got.records.len(), 1);
        assert!(got.truncated_last_line);
    }

    #[test]
    fn corrupt_middle_line_names_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.jsonl");
        std::fs::write(&path, "{\"t\":1}\nnot json\n{\"t\":2}\n").unwrap();
        let err = read_jsonl::<serde_json::Value>(&path)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("x.jsonl:2"), "{err}");
    }
}
