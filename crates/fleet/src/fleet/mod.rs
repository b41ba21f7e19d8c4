//! Fleets: where the browsers run, behind one small trait.
//!
//! Providers, one file each: `local` (chromedriver on this machine, the default),
//! `netns` (viewers in network namespaces, each its own IPv6 and tc-shaped link),
//! `grid` (any Selenium Grid 4), `hcloud` (Hetzner Cloud nodes made for the run).
//!
//! To add a provider: its scenario section and plan in `model::scenario::fleet`, a file
//! here with a type implementing `Fleet`, and a line in `open`.

pub mod chromedriver;
pub mod grid;
pub mod hcloud;
pub mod local;
pub mod netns;

pub(crate) use crate::grid::load::LoadEndpoint;
use crate::model::kinds::Throttling;
use crate::model::rawdata::{FleetDescription, Packing};
use crate::model::scenario::fleet::FleetPlan;
use crate::model::scenario::{BrowserPlan, NetworkProfile, Plan, ViewerPlan};
use crate::target::TargetPlacement;
use crate::viewer::ViewerSlot;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// What the plan's network profiles do to HTTP and P2P on a fleet, for its description:
/// the one place that words the throttling modes for reports.
pub struct ThrottlingSummary {
    pub mode: Option<Throttling>,
    pub http: bool,
    pub p2p: bool,
    pub text: String,
}

/// `tc_text`: how this fleet's slots apply tc (None when it has no slots).
pub fn throttling(plan: &Plan, tc_text: Option<&str>) -> ThrottlingSummary {
    let all = plan.all_profiles();
    let profiles: Vec<&NetworkProfile> = all.iter().filter(|p| !p.link.is_unlimited()).collect();
    // Unset on a fleet whose slots shape (a Grid's fleet-best): tc; else the 2023 conditions.
    let effective = |p: &&NetworkProfile| {
        p.apply.unwrap_or(if tc_text.is_some() {
            Throttling::Tc
        } else {
            Throttling::HttpOnly
        })
    };
    let mode = profiles.first().map(effective);
    let mixed = profiles.iter().any(|p| Some(effective(p)) != mode);
    let (http, p2p, text) = match (mode, tc_text) {
        (None, _) => (false, false, "none".to_string()),
        (Some(Throttling::HttpOnly), _) => (
            true,
            false,
            "http-only: HTTP and WebSocket requests throttled in the browser, per request \
             (CDP Network.emulateNetworkConditionsByRule); WebRTC not throttled, as in the \
             PeerTube 2023 test"
                .to_string(),
        ),
        (Some(Throttling::CdpAll), _) => (
            true,
            true,
            "cdp-all: Chromium's whole-browser network emulation (Network.emulateNetworkConditions): \
             HTTP as configured, WebRTC data channels far below the configured link"
                .to_string(),
        ),
        (Some(Throttling::Tc), Some(tc)) => (true, true, format!("tc: {tc}")),
        (Some(Throttling::Tc), None) => (
            false,
            false,
            "tc asked for, but this fleet has no per-viewer interfaces: not applied".to_string(),
        ),
    };
    let text = if mixed {
        format!("{text} (another network profile of the plan uses another mode)")
    } else {
        text
    };
    ThrottlingSummary {
        mode,
        http,
        p2p,
        text,
    }
}

pub use crate::model::scenario::packing::link_profile;

/// The plan as the browsers' links see it: every profile at `per_browser` times its rates.
pub(crate) fn link_plan(plan: &Plan) -> Plan {
    let mut links = plan.clone();
    links.network = plan.network.map(|p| link_profile(&p, plan.per_browser));
    links.alt_network = plan
        .alt_network
        .map(|(share, p)| (share, link_profile(&p, plan.per_browser)));
    for class in &mut links.networks {
        class.profile = class.profile.map(|p| link_profile(&p, plan.per_browser));
    }
    links
}

/// What several viewers per browser share, added to any fleet's description: with
/// `per_browser` > 1 no viewer has an address of its own; where browsers have one (a
/// namespace, a Grid viewer slot), it is seen by `per_browser` viewers, and where browsers
/// have tc-shaped links, that many viewers share each, at that many times the profile.
pub fn with_packing(mut description: FleetDescription, plan: &Plan) -> FleetDescription {
    let n = plan.per_browser;
    if let Some(written) = plan.per_browser_not_applied {
        description.notes.push(format!(
            "One viewer per browser although the scenario says viewers.per_browser: {written}: under tc, viewers of one browser would exchange P2P inside their network namespace, past the shaped link, and the swarm would share more than its links allow. `--per-browser {written}` packs it anyway."
        ));
    }
    if n <= 1 {
        return description;
    }
    let own_addresses = description.own_address_per_viewer;
    let own_links = description.throttling == Some(Throttling::Tc) && description.p2p_shaped;
    let link = own_links
        .then(|| plan.network.map(|p| link_profile(&p, n)))
        .flatten()
        .map(|p| {
            let rate = |k: Option<u32>| k.map_or("-".into(), |k| k.to_string());
            format!(
                "{}/{} kbit/s",
                rate(p.link.download_kbps),
                rate(p.link.upload_kbps)
            )
        });
    description.own_address_per_viewer = false;
    description.notes.push(format!(
        "{n} viewers per browser (viewers.per_browser): each browser is one WebDriver session whose viewers each have their own browser context (storage, cookies, cache and connections, so their own P2P peer id), tab, throttling and stats; they share the browser's processes (a tab crash loses one viewer, a browser crash all of its viewers)."
    ));
    description.notes.push(if own_addresses {
        format!("Each browser has its own address, so each address is seen by {n} viewers: a platform that counts views or rate-limits per address sees {n} times fewer clients.")
    } else {
        "Viewers share their host's address, as without packing.".to_string()
    });
    if let Some(link) = &link {
        description.notes.push(format!(
            "Each browser's tc-shaped link ({link}: {n} times the profile) is shared by its {n} viewers: together they have what {n} links of the profile give, but one viewer may use more than its own share of the uplink while the others send less; each viewer's HTTP is held to the profile in its tab. P2P between viewers of one browser crosses no link at all (they share its network namespace), so the P2P share is higher than with one viewer per browser."
        ));
    }
    description.packing = Some(Packing {
        per_browser: n,
        viewers_per_address: own_addresses.then_some(n),
        viewers_per_link: own_links.then_some(n),
        link,
    });
    description
}

/// What opening a fleet needs besides its plan.
#[derive(Clone, Default)]
pub struct OpenOptions {
    /// Cloud fleets: leave the servers running after the run (`run --keep`).
    pub keep: bool,
    /// Cancels a slow start (cloud provisioning) on Ctrl-C/SIGTERM.
    pub cancel: CancellationToken,
    /// Cloud fleets with `fleet.canary`: what measures the canary node.
    pub canary: Option<Arc<dyn crate::cloud::canary::CanaryProbe>>,
    /// Cloud fleets: asked before servers are bought (`None`: go ahead).
    pub confirm: Option<crate::cloud::up::Confirm>,
}

/// Opens the fleet a plan asks for: the one place that maps a fleet kind to its provider.
pub async fn open(plan: &Plan, options: &OpenOptions) -> anyhow::Result<Arc<dyn Fleet>> {
    Ok(match &plan.fleet {
        FleetPlan::Local(local) => Arc::new(local::LocalFleet::start(local).await?),
        FleetPlan::Netns(netns) => Arc::new(netns::NetnsFleet::start(netns).await?),
        FleetPlan::Grid(grid) => Arc::new(grid::GridFleet::start(grid).await?),
        FleetPlan::Hcloud(_) => Arc::new(hcloud::HcloudFleet::open(plan, options).await?),
    })
}

/// How the engine creates sessions on a fleet.
#[derive(Debug, Clone)]
pub struct StartPolicy {
    /// Sessions being created at once.
    pub max_parallel: usize,
    /// Further attempts after a refused session (`SessionNotCreated`, timeout).
    pub session_retries: u32,
    /// First wait before a retry; doubles each time up to 60 s, each wait jittered.
    pub retry_backoff: std::time::Duration,
    /// Whether a viewer lost mid-run is created again.
    pub recreate_lost: bool,
}

impl Default for StartPolicy {
    fn default() -> Self {
        Self {
            max_parallel: 4,
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
    /// Makes the slot of one browser and its viewers (`viewers.per_browser`), which share
    /// it. The default: its first viewer's slot, marked as shared.
    async fn open_browser(&self, browser: &BrowserPlan) -> anyhow::Result<ViewerSlot> {
        let first = browser
            .viewers
            .first()
            .ok_or_else(|| anyhow::anyhow!("browser {} holds no viewer", browser.index))?;
        let mut slot = self.open_viewer(first).await?;
        slot.viewers = browser.viewers.len() as u32;
        Ok(slot)
    }
    /// Releases one viewer's slot after its session has been deleted.
    async fn close_viewer(&self, slot: &ViewerSlot);
    /// Whether this fleet runs processes other than browsers on this machine (the Node.js
    /// host of light peers). Default: no (remote nodes run browsers only).
    fn runs_local_processes(&self) -> bool {
        false
    }
    /// The command prefix that puts a process into `slot`'s network (empty: this host's
    /// own); `None` where [`Fleet::runs_local_processes`] is false.
    fn process_prefix(&self, _slot: &ViewerSlot) -> Option<Vec<String>> {
        None
    }
    /// How the engine starts sessions here: parallelism, retries, re-creation after loss.
    fn start_policy(&self) -> StartPolicy {
        StartPolicy::default()
    }
    /// Called once a session exists, so the fleet can record it and say where it landed
    /// (e.g. the Grid node) by updating `slot.node` / `slot.address`.
    async fn session_placed(&self, _slot: &mut ViewerSlot, _session_id: &str) {}
    /// Called after the engine deleted a session itself.
    fn session_closed(&self, _session_id: &str) {}
    /// Called once when a viewer's life ends without a session of its own because its last
    /// request was refused, or because the run ended and the session that came late was
    /// closed by the run: nothing of that life can turn into a late session (unlike a
    /// request the engine gave up waiting for).
    fn session_refused(&self) {}
    /// The load endpoints of the machines this fleet's browsers run on, which the engine
    /// samples into `raw/node_samples.jsonl`. Default: none (the controller's own host
    /// samples cover fleets on this machine).
    fn load_endpoints(&self) -> Vec<LoadEndpoint> {
        Vec::new()
    }
    /// Releases everything: drivers, namespaces, qdiscs, servers. Idempotent.
    async fn shutdown(&self) -> anyhow::Result<()>;
}
