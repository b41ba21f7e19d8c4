//! The scenario file as written (serde types). Validation lives in `plan.rs`.

use super::fleet::FleetSpec;
use super::ScenarioError;
use crate::model::kinds::{Latency, TargetKind, Throttling, VideoKind};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioSpec {
    /// Short name, used in output folder names and reports.
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    pub target: TargetSpec,
    pub viewers: ViewersSpec,
    /// Total length of the run from the first viewer's arrival, e.g. `3m`.
    pub duration: String,
    /// How often players and the exporter are sampled [default: 2s].
    #[serde(default)]
    pub sampling_interval: Option<String>,
    /// The measurement point ("HTTP after 5 minutes") [default: the end of the run].
    #[serde(default)]
    pub measure_at: Option<String>,
    /// Steady-state window that ends at `measure_at`, averaged for the table [default: 30s].
    #[serde(default)]
    pub steady_window: Option<String>,
    /// How many viewers may fail before the run exits non-zero [default: 0].
    #[serde(default)]
    pub max_failed_viewers: Option<FailedThreshold>,
    pub fleet: FleetSpec,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TargetSpec {
    pub kind: TargetKind,
    pub video: VideoKind,
    /// Live latency mode; PeerTube's normal (default) or high latency.
    #[serde(default)]
    pub latency: Option<Latency>,
    /// peertube: the video's watch or embed URL, e.g. `https://peertube.example/w/<uuid>`.
    #[serde(default)]
    pub url: Option<String>,
    /// peertube: the Prometheus exporter, e.g. `http://127.0.0.1:9091/metrics`.
    #[serde(default)]
    pub exporter: Option<String>,
    /// refsite: interval of the players' playback-metrics POSTs [default: 15s like PeerTube].
    #[serde(default)]
    pub metrics_interval: Option<String>,
    /// refsite: length of the generated VOD [default: 2m].
    #[serde(default)]
    pub vod_length: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ViewersSpec {
    pub count: u32,
    /// All viewers arrive within this time, spread evenly, e.g. `3m` [default: 0s].
    #[serde(default)]
    pub ramp: Option<String>,
    /// Share of viewers with P2P off, 0.0..=1.0 [default: 0].
    #[serde(default)]
    pub p2p_off_share: Option<f64>,
    /// Each viewer's link. The PeerTube 2023 test used 2000/300 kbit/s and 500 ms.
    #[serde(default)]
    pub network: Option<NetworkProfile>,
    /// A second profile for part of the viewers, to study mixed swarms.
    #[serde(default)]
    pub alt_network: Option<AltNetwork>,
}

#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkProfile {
    #[serde(default)]
    pub download_kbps: Option<u32>,
    #[serde(default)]
    pub upload_kbps: Option<u32>,
    #[serde(default)]
    pub latency_ms: Option<u32>,
    /// How the profile is applied: `http-only` (the PeerTube 2023 conditions: HTTP
    /// throttled, P2P free), `tc` (HTTP and P2P on each viewer's own link; needs a fleet with
    /// per-viewer interfaces) or `cdp-all` (Chromium's whole-browser emulation, WebRTC
    /// included) [default: `tc` on the netns fleet, `http-only` elsewhere].
    #[serde(default)]
    pub apply: Option<Throttling>,
}

#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AltNetwork {
    /// Share of viewers that get this profile, 0.0..=1.0.
    pub share: f64,
    pub profile: NetworkProfile,
}

/// A failure threshold: a count (`2`) or a share of the viewers (`"5%"`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum FailedThreshold {
    Count(u32),
    Share(String),
}

pub(super) fn parse_spec(text: &str, file: &str) -> Result<ScenarioSpec, ScenarioError> {
    yaml_serde::from_str::<ScenarioSpec>(text).map_err(|err| {
        let line = err.location().map(|l| l.line());
        let message = err.to_string();
        // yaml_serde prefixes the dotted path ("viewers.count: ...") when it knows it.
        let (field, message) = match message.split_once(": ") {
            Some((path, rest))
                if !path.contains(' ') && !path.is_empty() && path != "invalid type" =>
            {
                (path.to_string(), rest.to_string())
            }
            _ => ("(file)".to_string(), message),
        };
        let line = line.or_else(|| super::locate(text, &field));
        ScenarioError {
            file: file.to_string(),
            line,
            field,
            message: strip_location(&message) + renamed_value_hint(&message),
        }
    })
}

/// What a value of an earlier version means today, for a file written for it.
fn renamed_value_hint(message: &str) -> &'static str {
    if message.contains("unknown variant `cdp`") || message.contains("unknown variant `both`") {
        "; `cdp` meant HTTP-only throttling until Chromium began throttling WebRTC with it \
         too: write `http-only` for the PeerTube 2023 conditions (HTTP throttled, P2P free), \
         `tc` for real per-viewer links, or `cdp-all` for Chromium's whole-browser emulation"
    } else {
        ""
    }
}

/// Drops yaml_serde's " at line L column C" suffix: the line is reported separately.
fn strip_location(message: &str) -> String {
    match message.find(" at line ") {
        Some(pos) => message[..pos].to_string(),
        None => message.to_string(),
    }
}
