//! Targets: adapters for video platforms. An adapter knows the viewer page URL (and how to
//! turn P2P off for one viewer), the JavaScript that reads the player's stats, and the
//! exporter to scrape. PeerTube's adapter also serves refsite, which speaks the same
//! interfaces.
//!
//! To add a platform: a type implementing `Target` in its own file, a variant in
//! `model::kinds::TargetKind`, and a branch in `start::start`.

pub mod ipv6;
pub mod peertube;
pub mod start;

use std::net::SocketAddr;

use crate::model::kinds::HttpByteSource;
use crate::model::rawdata::{EngineEvents, HttpOutcomes, IceLinks, PageLag, RtcCounts};
use serde::Deserialize;

/// Where the target (refsite) must run so that the viewers reach it.
#[derive(Debug, Clone)]
pub struct TargetPlacement {
    /// Address refsite listens on (port 0: any free port).
    pub listen: SocketAddr,
    /// Network namespace to start refsite in, if any.
    pub netns: Option<String>,
    /// Its side of an emulated internet, where the fleet makes one.
    pub internet: Option<TargetInternet>,
    /// Networks (CIDR) whose playback reports and tracker announces refsite takes; all when
    /// empty. A cloud fleet names its nodes' /64s: its site faces the internet.
    pub reports_from: Vec<String>,
}

/// A target on the emulated internet (the `netns` fleet with `viewers.networks`).
#[derive(Debug, Clone, PartialEq)]
pub struct TargetInternet {
    /// Further addresses refsite serves on (its public IPv4 beside its IPv6).
    pub also_listen: Vec<SocketAddr>,
    /// Where refsite runs its STUN Binding server, on the public side of every NAT.
    pub stun: Vec<SocketAddr>,
    /// The host name viewers open the site at (each viewer's browser resolves it to an
    /// address of a family its slot has); `None`: its IPv6 address, as without.
    pub viewer_host: Option<String>,
}

/// A video platform as seen by one viewer and by the scraper.
pub trait Target: Send + Sync {
    /// Page a viewer opens, with P2P on or off.
    fn viewer_url(&self, p2p: bool) -> String;
    /// JavaScript installed before any page script runs (CDP
    /// `Page.addScriptToEvaluateOnNewDocument`); it collects stats into the page.
    fn probe_script(&self) -> &'static str;
    /// JavaScript that returns the collected stats as a `PlayerStats` JSON object.
    fn read_script(&self) -> &'static str;
    /// The platform's Prometheus exporter, if it has one.
    fn exporter_url(&self) -> Option<String>;
    /// The page that hosts light peers (`swarm.light_peers`), if the platform has one; the
    /// engine adds the page's query (`peers`, `first`, the link) to it.
    fn light_url(&self) -> Option<String> {
        None
    }
}

/// The player's media segments since the page opened: asked for, loaded (from HTTP or
/// P2P), their bytes, and how many were loaded at each rendition height (`"720"`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct SegmentCounts {
    pub requested: u64,
    pub loaded: u64,
    pub bytes: u64,
    pub by_height: std::collections::BTreeMap<String, u64>,
}

/// What the probe reports. Byte counters are cumulative since the page opened.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct PlayerStats {
    pub http_bytes: u64,
    pub p2p_down_bytes: u64,
    pub p2p_up_bytes: u64,
    pub peers: u32,
    /// The player's own `network-info` event has fired at least once.
    pub network_info_seen: bool,
    /// Where `http_bytes` came from.
    pub http_source: Option<HttpByteSource>,
    pub has_video: bool,
    pub playing: bool,
    pub current_time: f64,
    /// Seconds behind the live edge (live streams, where the page exposes hls.js).
    pub live_latency_s: Option<f64>,
    /// ms from navigation start to the first `playing` event.
    pub first_frame_ms: Option<f64>,
    pub stalls: u32,
    pub stalled_ms: f64,
    /// Height of the rendition playing (the player's current level where it says).
    pub resolution: Option<u32>,
    /// Always 0 with the decode lever: nothing is decoded, so nothing is dropped.
    pub dropped_frames: u64,
    /// Every video track of the element is deselected (the decode lever took hold);
    /// `None` when the browser does not expose `videoTracks`.
    pub video_track_off: Option<bool>,
    /// Media segments the player asked for and got (refsite's player, hls.js events).
    pub segments: Option<SegmentCounts>,
    pub errors: u32,
    pub last_error: Option<String>,
    pub http: Option<HttpOutcomes>,
    pub rtc: Option<RtcCounts>,
    pub engine: Option<EngineEvents>,
    /// The page's lag meter.
    pub lag: Option<PageLag>,
    /// Its peer connections and how ICE fared with each.
    pub ice: Option<IceLinks>,
}
