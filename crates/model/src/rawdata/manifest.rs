//! `manifest.json`: what a report needs to say how the numbers were measured and on what.

use crate::kinds::{FleetKind, Latency, TargetKind, Throttling, VideoKind};
use crate::scenario::BrowserSetup;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
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
