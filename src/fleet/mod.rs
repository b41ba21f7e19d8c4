//! Fleets: where the browsers run, behind one small trait.
//!
//! Providers, one file each: `local` (chromedriver on this machine, the default),
//! `netns` (viewers in network namespaces, each its own IPv6 and tc-shaped link),
//! `grid` (any Selenium Grid 4), `hcloud` (Hetzner Cloud nodes made for the run).
//!
//! To add a provider: a spec struct (YAML fields, `deny_unknown_fields`) with `validate`,
//! a variant in `FleetSpec`, a type implementing `Fleet`, and a line in `open`.

pub mod chromedriver;
pub mod grid;
pub mod local;
pub mod netns;
mod placement;

use crate::rawdata::FleetDescription;
use crate::scenario::{Plan, ViewerPlan};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

/// The `fleet:` section of a scenario.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum FleetSpec {
    Local(local::LocalFleetSpec),
    Netns(netns::NetnsFleetSpec),
    Grid(grid::GridFleetSpec),
    Hcloud(Box<crate::cloud::HcloudFleetSpec>),
}

impl FleetSpec {
    pub fn kind_name(&self) -> &'static str {
        match self {
            FleetSpec::Local(_) => "local",
            FleetSpec::Netns(_) => "netns",
            FleetSpec::Grid(_) => "grid",
            FleetSpec::Hcloud(_) => "hcloud",
        }
    }

    /// Checks provider fields; errors are `(field below fleet., message)`.
    pub fn validate(&self, viewers: u32) -> Result<(), (String, String)> {
        match self {
            FleetSpec::Local(spec) => spec.validate(viewers),
            FleetSpec::Netns(spec) => spec.validate(viewers),
            FleetSpec::Grid(spec) => spec.validate(viewers),
            FleetSpec::Hcloud(spec) => spec.validate(viewers),
        }
    }
}

/// Where one viewer's browser is to be created.
#[derive(Debug, Clone)]
pub struct ViewerSlot {
    /// WebDriver endpoint (chromedriver or Grid hub), ending in `/`.
    pub webdriver_url: String,
    /// Chromium binary for `goog:chromeOptions.binary` (a wrapper that enters a namespace
    /// for `netns`), or `None` to leave it to the node.
    pub chrome_binary: Option<String>,
    /// Extra Chromium arguments this slot needs (e.g. `--remote-debugging-pipe`).
    pub extra_args: Vec<String>,
    /// Node or slot name, for raw data.
    pub node: String,
    /// The viewer's own address, where it has one.
    pub address: Option<String>,
    /// Shaping is already applied below the browser (tc); CDP throttling then is optional.
    pub tc_shaped: bool,
}

/// Where the target (refsite) must run so that the viewers reach it.
#[derive(Debug, Clone)]
pub struct TargetPlacement {
    /// Address refsite listens on (port 0: any free port).
    pub listen: SocketAddr,
    /// Network namespace to start refsite in, if any.
    pub netns: Option<String>,
}

/// How the engine creates sessions on a fleet.
#[derive(Debug, Clone)]
pub struct StartPolicy {
    /// Sessions being created at once [None: the engine's default].
    pub max_parallel: Option<usize>,
    /// Further attempts after a refused session (`SessionNotCreated`, timeout).
    pub session_retries: u32,
    /// First wait before a retry; doubles each time up to 60 s.
    pub retry_backoff: std::time::Duration,
    /// Whether a viewer lost mid-run is created again.
    pub recreate_lost: bool,
}

impl Default for StartPolicy {
    fn default() -> Self {
        Self {
            max_parallel: None,
            session_retries: 0,
            retry_backoff: std::time::Duration::from_secs(2),
            recreate_lost: false,
        }
    }
}

/// A fleet for one run. `shutdown` must release everything `open_viewer` created, and is
/// called on every exit path (success, error, Ctrl-C, SIGTERM).
#[async_trait::async_trait]
pub trait Fleet: Send + Sync {
    /// What this fleet implies for the measurements (goes into the manifest and report).
    fn description(&self, plan: &Plan) -> FleetDescription;
    /// Where refsite must listen for this fleet's viewers to reach it.
    fn target_placement(&self) -> TargetPlacement;
    /// Makes a slot for one viewer (network identity, shaping, endpoint).
    async fn open_viewer(&self, viewer: &ViewerPlan) -> anyhow::Result<ViewerSlot>;
    /// Releases one viewer's slot after its session has been deleted.
    async fn close_viewer(&self, slot: &ViewerSlot);
    /// How the engine starts sessions here: parallelism, retries, re-creation after loss.
    fn start_policy(&self) -> StartPolicy {
        StartPolicy::default()
    }
    /// Called once a session exists, so the fleet can record it and say where it landed
    /// (e.g. the Grid node) by updating `slot.node` / `slot.address`.
    async fn session_placed(&self, _slot: &mut ViewerSlot, _session_id: &str) {}
    /// Called after the engine deleted a session itself.
    fn session_closed(&self, _session_id: &str) {}
    /// Releases everything: drivers, namespaces, qdiscs, servers. Idempotent.
    async fn shutdown(&self) -> anyhow::Result<()>;
}
