//! Fleet `grid`: any Selenium Grid 4 endpoint (docker-selenium, Selenoid/Moon, a dedicated
//! server, the project's own hub from `grid/`, or `viewerfleet grid up --local`).
//!
//! Viewers are created through the hub with the same capabilities, throttling commands and
//! stats reads as `local` (the viewer layer is shared; only the endpoint differs). The hub
//! queues requests; this fleet limits how many are in flight, retries `SessionNotCreated`
//! and queue timeouts with exponential back-off, asks the hub's `/status` which node a
//! session landed on (one request per batch of new sessions, see `placement`), deletes
//! sessions that outlive the run, and records every session id in a journal so `gc` can
//! delete sessions left by a crashed controller.
//!
//! What the run's manifest says about addresses and shaping comes from the nodes: each node
//! set up with `grid/` reports its viewer slots in its stereotype (`"viewerfleet:slots"`,
//! see `grid::NodeSlots`), read from `/status` at the start (`describe_nodes`). A provider
//! that makes the Grid (e.g. `hcloud`) takes this description and sets its own kind. The
//! same nodes name their load endpoint (`"viewerfleet:load"`), which the engine samples.
//!
//! Inventory files (`inventory:`): JSON or YAML, either a plain list of hub URLs or the
//! object printed by `terraform output -json` with a `hub_urls` (list) or `hub_url`
//! (string) output, e.g. `{"hub_urls": {"value": ["http://10.0.0.2:4444"]}}`. Viewers are
//! spread over the hubs by capacity: each new session goes to the hub with the lowest share
//! of its nodes' slots in use (round-robin when the hubs are alike).

use super::{Fleet, LoadEndpoint, StartPolicy, TargetPlacement};
use crate::grid::auth::GridCredentials;
use crate::grid::local_state::{self as localstate, LocalGridState};
use crate::grid::placement::PlacementCache;
use crate::grid::{grid_status, GridStatus, NodeSlots};
use crate::model::exit::{bad_input, unavailable};
use crate::model::kinds::{FleetKind, Throttling};
use crate::model::rawdata::FleetDescription;
use crate::model::scenario::fleet::{GridFleetPlan, GridHubs};
use crate::model::scenario::{BrowserPlan, NetworkProfile, Plan, ViewerPlan};
use crate::viewer::{TcCoverage, ViewerSlot};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Runs in progress, recorded on disk (one file per controller PID, `hub tag` lines) so
/// `gc` can delete the sessions of a controller that crashed: every session of a run
/// carries the run's tag as a (harmless) Chromium argument, which the Grid echoes in
/// `/status` and in its queue.
fn journal_dir() -> PathBuf {
    std::env::temp_dir().join("viewerfleet-grid-sessions")
}

fn journal_write(hubs: &[String], tag: &str) {
    let dir = journal_dir();
    let _ = std::fs::create_dir_all(&dir);
    let lines: String = hubs.iter().map(|h| format!("{h} {tag}\n")).collect();
    let _ = std::fs::write(dir.join(format!("{}.txt", std::process::id())), lines);
}

/// The Chromium argument that marks a run's sessions.
fn tag_arg(tag: &str) -> String {
    format!("--viewerfleet-run={tag}")
}

/// Deletes every session of `hub` tagged `tag`. Session requests abandoned by the run
/// (`expect` of them) may still be queued or being started by a node: waits (up to
/// `limit`) until that many late sessions were deleted and none of the run's requests is
/// queued, so no session is created after we leave. Returns the ids deleted and whether
/// requests were still pending at the end.
pub async fn sweep(
    client: &reqwest::Client,
    hub: &str,
    tag: &str,
    expect: usize,
    limit: Duration,
) -> (Vec<String>, bool) {
    let deadline = tokio::time::Instant::now() + limit;
    // A request that just left the queue may still be starting on a node: only stop after
    // the queue has shown none of the run's requests for a while.
    let quiet = Duration::from_secs(20).min(limit);
    let mut last_queued = tokio::time::Instant::now();
    let mut deleted = Vec::new();
    loop {
        if let Ok(status) = grid_status(client, hub).await {
            for id in status.sessions_tagged(tag) {
                let _ = client
                    .delete(format!("{hub}session/{id}"))
                    .timeout(Duration::from_secs(30))
                    .send()
                    .await;
                last_queued = tokio::time::Instant::now();
                deleted.push(id);
            }
        }
        let queued = match client
            .get(format!("{hub}se/grid/newsessionqueue/queue"))
            .timeout(Duration::from_secs(10))
            .send()
            .await
        {
            Ok(resp) => resp.text().await.unwrap_or_default().contains(tag),
            Err(_) => false,
        };
        let now = tokio::time::Instant::now();
        if queued {
            last_queued = now;
        }
        let pending = queued || deleted.len() < expect;
        if (!pending && now >= last_queued + quiet) || (expect == 0 && !queued) {
            return (deleted, false);
        }
        if now >= deadline {
            return (deleted, pending);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The router credentials an inventory written by `viewerfleet up --inventory FILE` holds
/// (`grid_credentials`: `username`, `password`); `None` for inventories without them
/// (Terraform's, lists of URLs). Such a file must not be readable by others.
pub fn inventory_credentials(path: &Path) -> anyhow::Result<Option<GridCredentials>> {
    use anyhow::Context as _;
    use std::os::unix::fs::PermissionsExt as _;
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the inventory {}", path.display()))?;
    let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Ok(None);
    };
    let creds = &value["grid_credentials"];
    if creds.is_null() {
        return Ok(None);
    }
    let mode = std::fs::metadata(path)?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        anyhow::bail!(
            "the inventory {} holds the hub's password but others may read it (mode {mode:o}); run `chmod 600 {}`",
            path.display(),
            path.display()
        );
    }
    let field = |name: &str| {
        creds[name]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    match GridCredentials::from_values(field("username"), field("password")) {
        Ok(Some(c)) => Ok(Some(c)),
        _ => anyhow::bail!(
            "the inventory {}: grid_credentials must hold a username and a password (as `viewerfleet up --inventory` writes them)",
            path.display()
        ),
    }
}

/// A Grid fleet for one run.
pub struct GridFleet {
    hubs: Vec<String>,
    plan: GridFleetPlan,
    /// The local Grid behind the hub, when it was made by `grid up --local`.
    local: Option<LocalGridState>,
    /// Sends the routers' credentials, when the hubs ask for them.
    client: reqwest::Client,
    /// The hubs' router credentials (every WebDriver request and BiDi handshake sends them).
    credentials: Option<GridCredentials>,
    /// Live sessions: id → hub.
    sessions: Mutex<HashMap<String, String>>,
    /// Marks this run's sessions (see `sweep`).
    tag: String,
    /// Session requests made and sessions obtained: the difference may turn into late
    /// sessions after the run gave up on them.
    requested: AtomicUsize,
    obtained: AtomicUsize,
    /// Requests the Grid answered with a refusal: they leave no late session behind.
    refused: AtomicUsize,
    /// Node of each new session, from as few `/status` requests as the ramp allows.
    placement: PlacementCache,
    /// Every node registered when the run started, with what it reports about its viewer
    /// slots (`None`: it reports nothing).
    nodes: Vec<(String, Option<NodeSlots>)>,
    /// The load endpoints those nodes name (`"viewerfleet:load"`).
    load_endpoints: Vec<LoadEndpoint>,
    /// Per hub: its nodes' slots when the run started, and sessions asked of it and not
    /// closed yet.
    capacity: Vec<usize>,
    load: Mutex<Vec<usize>>,
}

/// The hub with the lowest share of its capacity in use after one more session (the first
/// of equals).
fn least_loaded(load: &[usize], capacity: &[usize]) -> usize {
    (0..load.len())
        .min_by(|&a, &b| {
            let share = |k: usize| (load[k] + 1) as f64 / capacity[k].max(1) as f64;
            share(a).total_cmp(&share(b)).then(a.cmp(&b))
        })
        .unwrap_or(0)
}

/// What a Grid fleet learns from its hubs before any session: who they are, the credentials
/// they take, and their nodes (each hub's `/status`). `validate --check-grid` asks the same.
pub struct Reached {
    pub hubs: Vec<String>,
    local: Option<localstate::LocalGridState>,
    credentials: Option<GridCredentials>,
    client: reqwest::Client,
    pub nodes: Vec<(String, Option<NodeSlots>)>,
    load_endpoints: Vec<LoadEndpoint>,
    /// Slots per hub, in the order of `hubs`.
    pub capacity: Vec<usize>,
}

/// Resolves the hubs and their credentials and asks each hub's `/status`; an error is bad
/// input (a hub that asks for a password not given) or the Grid's (down, no node, an
/// untrusted certificate), marked so.
pub async fn reach(plan: &GridFleetPlan) -> anyhow::Result<Reached> {
    let hubs = match &plan.hubs {
        GridHubs::Url(url) => vec![url.clone()],
        GridHubs::Urls(urls) => urls.clone(),
        GridHubs::Inventory(path) => {
            crate::model::scenario::fleet::grid::read_inventory(path).map_err(bad_input)?
        }
    };
    let local = hubs
        .first()
        .and_then(|h| localstate::find_by_hub(Path::new(localstate::DEFAULT_STATE_DIR), h));
    let from_inventory = match &plan.hubs {
        GridHubs::Inventory(path) => inventory_credentials(path).map_err(bad_input)?,
        _ => None,
    };
    let credentials = match plan.credentials.clone().or(from_inventory) {
        Some(c) => Some(c),
        None => match local.as_ref().and_then(|l| l.secrets.as_ref()) {
            Some(secrets) => Some(secrets.controller.clone()),
            None => GridCredentials::from_env().map_err(bad_input)?,
        },
    };
    let client = crate::grid::auth::http_client(credentials.as_ref());
    let mut nodes = Vec::new();
    let mut load_endpoints = Vec::new();
    let mut capacity = Vec::new();
    for hub in &hubs {
        let status = grid_status(&client, hub).await.map_err(|e| {
            if let Some(refused) = e.downcast_ref::<crate::grid::Unauthorized>() {
                return bad_input(anyhow::anyhow!("{refused}"));
            }
            unavailable(anyhow::anyhow!(
                "the Grid at {hub} does not answer /status: {e:#}; {}",
                crate::sys::tls::hint(&e)
                    .unwrap_or("is the hub up (e.g. `viewerfleet grid up --local`)?")
            ))
        })?;
        if status.nodes.is_empty() {
            return Err(unavailable(anyhow::anyhow!(
                "the Grid at {hub} has no node registered; start nodes first (they register with the hub's event bus)"
            )));
        }
        nodes.extend(status.slots_by_node());
        load_endpoints.extend(status.load_endpoints());
        capacity.push(status.nodes.iter().map(|n| n.max_sessions as usize).sum());
    }
    Ok(Reached {
        hubs,
        local,
        credentials,
        client,
        nodes,
        load_endpoints,
        capacity,
    })
}

impl GridFleet {
    /// Resolves the hubs and checks each answers `/status` with at least one node.
    /// Credentials for the hubs' routers: the plan's (a Grid this tool made), those of the
    /// local Grid behind the first hub, else `VIEWERFLEET_GRID_USER` /
    /// `VIEWERFLEET_GRID_PASSWORD`, else none.
    pub async fn start(plan: &GridFleetPlan) -> anyhow::Result<Self> {
        let Reached {
            hubs,
            local,
            credentials,
            client,
            nodes,
            load_endpoints,
            capacity,
        } = reach(plan).await?;
        let tag = format!("vf{}-{:08x}", std::process::id(), rand::random::<u32>());
        journal_write(&hubs, &tag);
        Ok(Self {
            requested: AtomicUsize::new(0),
            obtained: AtomicUsize::new(0),
            refused: AtomicUsize::new(0),
            placement: PlacementCache::new(&hubs),
            tag,
            hubs,
            plan: plan.clone(),
            local,
            client,
            credentials,
            sessions: Mutex::new(HashMap::new()),
            nodes,
            load_endpoints,
            load: Mutex::new(vec![0; capacity.len()]),
            capacity,
        })
    }

    /// The nodes registered when the run started, with their slot reports.
    pub fn nodes(&self) -> &[(String, Option<NodeSlots>)] {
        &self.nodes
    }

    /// `/status` of the first hub.
    pub async fn status(&self) -> anyhow::Result<GridStatus> {
        grid_status(&self.client, &self.hubs[0]).await
    }

    async fn delete_session(&self, hub: &str, id: &str) {
        let url = format!("{hub}session/{id}");
        match self
            .client
            .delete(&url)
            .timeout(Duration::from_secs(30))
            .send()
            .await
        {
            Ok(_) => {}
            Err(err) => tracing::warn!("deleting Grid session {id}: {err}"),
        }
    }
}

#[async_trait::async_trait]
impl Fleet for GridFleet {
    fn description(&self, plan: &Plan) -> FleetDescription {
        let mut notes = vec![format!(
            "Viewers were created through Selenium Grid 4 at {}; which node ran each viewer is in the raw viewer events.",
            self.hubs.join(", ")
        )];
        if let Some(local) = self.local.as_ref().filter(|l| !l.name_prefix.is_empty()) {
            notes.push(format!(
                "Local Grid on this machine: hub and node processes on loopback, browsers in their node's viewer slots (namespaces {}n00.. in {}); all nodes share this machine's CPU cores.",
                local.name_prefix, local.prefix
            ));
        }
        // A node's viewer slot holds one browser: its link is what that browser's viewers share.
        let mut description = describe_nodes(&self.nodes, &super::link_plan(plan));
        notes.append(&mut description.notes);
        description.notes = notes;
        // A Grid made by `grid up --local` runs its browsers here; any other's run elsewhere.
        description.browsers_on_this_host = Some(self.local.is_some());
        description
    }

    fn target_placement(&self) -> TargetPlacement {
        match &self.local {
            Some(local) if !local.target_namespace.is_empty() => TargetPlacement {
                listen: format!("[{}]:{}", local.target_address, local.target_port)
                    .parse()
                    .unwrap_or_else(|_| "127.0.0.1:0".parse().expect("valid address")),
                netns: Some(local.target_namespace.clone()),
                internet: local_internet(local),
                reports_from: Vec::new(),
            },
            _ => TargetPlacement {
                listen: "127.0.0.1:0".parse().expect("valid address"),
                netns: None,
                internet: None,
                reports_from: Vec::new(),
            },
        }
    }

    async fn open_viewer(&self, viewer: &ViewerPlan) -> anyhow::Result<ViewerSlot> {
        self.open_browser(&BrowserPlan::single(viewer)).await
    }

    /// One session (one of a node's Grid slots) per browser; with several viewers per
    /// browser, a node's viewer slot holds them all and its tc link is theirs together.
    async fn open_browser(&self, browser: &BrowserPlan) -> anyhow::Result<ViewerSlot> {
        self.requested.fetch_add(1, Ordering::SeqCst);
        let first = browser
            .viewers
            .first()
            .ok_or_else(|| anyhow::anyhow!("browser {} holds no viewer", browser.index))?;
        let viewers = browser.viewers.len() as u32;
        let hub = {
            let mut load = self.load.lock().expect("load lock");
            let k = least_loaded(&load, &self.capacity);
            load[k] += 1;
            self.hubs[k].clone()
        };
        let mut extra_args = match &self.local {
            Some(local) if !local.target_namespace.is_empty() => {
                crate::netns::wrapper::slot_chromium_args(&local.target_origin())
            }
            _ => vec!["--remote-debugging-pipe".into()],
        };
        extra_args.push(tag_arg(&self.tag));
        Ok(ViewerSlot {
            webdriver_url: hub,
            grid_auth: self.credentials.clone().map(std::sync::Arc::new),
            // The node's stereotype names its browser (a slot wrapper on viewerfleet nodes).
            chrome_binary: None,
            extra_args,
            node: "grid".into(),
            address: None,
            public_addresses: Vec::new(),
            nat: None,
            // Wherever the Grid puts it, tc gives it this profile (then the browser only
            // adds what tc could not: latency without netem).
            tc: TcCoverage {
                rates: nodes_shape(&self.nodes)
                    && first.network.as_ref().is_none_or(|p| {
                        p.apply == Some(Throttling::Tc)
                            || tc_matches(&self.nodes, &super::link_profile(p, viewers))
                    }),
                latency: nodes_delay(&self.nodes),
            },
            viewers,
        })
    }

    async fn session_placed(&self, slot: &mut ViewerSlot, session_id: &str) {
        self.obtained.fetch_add(1, Ordering::SeqCst);
        self.sessions
            .lock()
            .expect("sessions lock")
            .insert(session_id.to_string(), slot.webdriver_url.clone());
        let created = std::time::Instant::now();
        let hub = slot.webdriver_url.clone();
        if let Some(node) = self
            .placement
            .node_of(&hub, session_id, created, || {
                grid_status(&self.client, &hub)
            })
            .await
        {
            // A node that joined after the start and does not shape its slots: a `tc`
            // profile cannot be applied there (the viewer says so and fails).
            let slots = self.placement.slots_of(&hub, &node).await;
            if slots
                .as_ref()
                .is_some_and(|r| !r.as_ref().is_some_and(NodeSlots::rate_shaped))
            {
                slot.tc = TcCoverage::NONE;
            }
            // The NAT its node's slots are behind, as the node says (`viewerfleet:slots`).
            slot.nat = slots.flatten().map(|r| r.nat.parse().unwrap_or_default());
            slot.node = node;
        }
    }

    async fn close_viewer(&self, slot: &ViewerSlot) {
        if let Some(k) = self.hubs.iter().position(|h| *h == slot.webdriver_url) {
            let mut load = self.load.lock().expect("load lock");
            load[k] = load[k].saturating_sub(1);
        }
    }

    fn start_policy(&self) -> StartPolicy {
        StartPolicy {
            max_parallel: self.plan.max_parallel_starts,
            session_retries: self.plan.session_retries,
            retry_backoff: self.plan.retry_backoff,
            recreate_lost: self.plan.recreate_lost,
        }
    }

    fn session_refused(&self) {
        self.refused.fetch_add(1, Ordering::SeqCst);
    }

    /// Read from the nodes' stereotypes when the run started; a node that joins later is
    /// not sampled.
    fn load_endpoints(&self) -> Vec<LoadEndpoint> {
        self.load_endpoints.clone()
    }

    fn session_closed(&self, session_id: &str) {
        self.sessions
            .lock()
            .expect("sessions lock")
            .remove(session_id);
    }

    async fn shutdown(&self) -> anyhow::Result<()> {
        tracing::debug!(
            "placed {} sessions with {} /status requests",
            self.obtained.load(Ordering::SeqCst),
            self.placement.requests()
        );
        let left: Vec<(String, String)> = self
            .sessions
            .lock()
            .expect("sessions lock")
            .drain()
            .collect();
        for (id, hub) in &left {
            self.delete_session(hub, id).await;
        }
        // Requests still queued when the run ended would become sessions nobody uses.
        let abandoned = self
            .requested
            .load(Ordering::SeqCst)
            .saturating_sub(self.obtained.load(Ordering::SeqCst))
            .saturating_sub(self.refused.load(Ordering::SeqCst));
        for hub in &self.hubs {
            let expect = if self.hubs.len() == 1 { abandoned } else { 0 };
            let (deleted, still_queued) = sweep(
                &self.client,
                hub,
                &self.tag,
                expect,
                Duration::from_secs(45),
            )
            .await;
            if !deleted.is_empty() {
                tracing::info!(
                    "deleted {} late Grid session(s) of this run at {hub}",
                    deleted.len()
                );
            }
            if still_queued {
                tracing::warn!("requests of this run are still queued at {hub}; `viewerfleet gc` deletes their sessions once they start (or they expire with the hub's session-request-timeout)");
                return Ok(());
            }
        }
        let _ = std::fs::remove_file(journal_dir().join(format!("{}.txt", std::process::id())));
        Ok(())
    }
}

/// Every node reports slots tc-shaped at exactly `profile`'s rates.
/// Every node runs its browsers in rate-limited slots.
fn nodes_shape(nodes: &[(String, Option<NodeSlots>)]) -> bool {
    !nodes.is_empty()
        && nodes
            .iter()
            .all(|(_, r)| r.as_ref().is_some_and(NodeSlots::rate_shaped))
}

/// Every node's slots add latency (netem).
fn nodes_delay(nodes: &[(String, Option<NodeSlots>)]) -> bool {
    !nodes.is_empty()
        && nodes
            .iter()
            .all(|(_, r)| r.as_ref().is_some_and(|r| r.delay.starts_with("netem")))
}

fn tc_matches(nodes: &[(String, Option<NodeSlots>)], profile: &NetworkProfile) -> bool {
    profile.link.limits_rate()
        && !nodes.is_empty()
        && nodes.iter().all(|(_, r)| {
            r.as_ref().is_some_and(|r| {
                r.rate_shaped()
                    && r.down_kbit == profile.link.download_kbps.unwrap_or(0)
                    && r.up_kbit == profile.link.upload_kbps.unwrap_or(0)
            })
        })
}

/// What a Grid's nodes imply for the measurements, from what each node reports about its
/// viewer slots (`"viewerfleet:slots"` in its stereotype, as the hub's `/status` shows it):
/// own addresses only if every node runs its browsers in slots, P2P shaped only if every
/// node's slots are rate-limited with tc. A node that reports nothing (a Grid not set up
/// with `grid/`) counts as neither. `kind` is `grid`; a provider that made the Grid (e.g.
/// `hcloud`) sets its own kind and adds its notes.
pub(crate) fn describe_nodes(
    nodes: &[(String, Option<NodeSlots>)],
    plan: &Plan,
) -> FleetDescription {
    let total = nodes.len();
    let reports: Vec<&NodeSlots> = nodes.iter().filter_map(|(_, r)| r.as_ref()).collect();
    let with_slots = reports.iter().filter(|r| r.own_addresses()).count();
    let shaped: Vec<&NodeSlots> = reports.into_iter().filter(|r| r.rate_shaped()).collect();
    let own = total > 0 && with_slots == total;
    let p2p_shaped = total > 0 && shaped.len() == total;
    let profiles: Vec<&NetworkProfile> = plan
        .network
        .iter()
        .chain(plan.alt_network.iter().map(|(_, p)| p))
        .collect();
    let cdp = browser_throttles(&profiles, nodes);

    let mut notes = node_group_notes(nodes);
    if !own && total > 0 {
        notes.push(format!(
            "Not every viewer had its own address: {} of {total} node(s) ran their browsers in viewer slots; the others' viewers share their node's address (platforms that count or rate-limit per address see fewer clients).",
            with_slots
        ));
    }
    for p in profiles.iter().filter(|p| p.link.limits_rate()) {
        notes.extend(profile_notes(p, nodes, &shaped, p2p_shaped, cdp));
    }
    let tc = slots_tc(&shaped, total);
    let browser = super::throttling(plan, tc.as_deref().filter(|_| !cdp));
    let shaping = match (&tc, cdp) {
        (Some(tc), true) => format!("{tc} plus, in the browser, {}", browser.text),
        (Some(tc), false) => tc.clone(),
        (None, true) => browser.text.clone(),
        (None, false) => "none applied by viewerfleet".into(),
    };
    FleetDescription {
        kind: FleetKind::Grid,
        own_address_per_viewer: own,
        http_shaped: cdp || p2p_shaped,
        p2p_shaped: p2p_shaped || browser.mode == Some(Throttling::CdpAll),
        shaping,
        throttling: browser.mode,
        notes,
        packing: None,
        browsers_on_this_host: None,
    }
}

/// Whether the browser throttles: for a profile that limits rates, unless the profile says
/// tc, or leaves it to the fleet and tc already gives it exactly its profile (see
/// `open_viewer`).
fn browser_throttles(profiles: &[&NetworkProfile], nodes: &[(String, Option<NodeSlots>)]) -> bool {
    profiles.iter().any(|p| {
        p.link.limits_rate()
            && match p.apply {
                Some(Throttling::HttpOnly | Throttling::CdpAll) => true,
                Some(Throttling::Tc) => false,
                None => !tc_matches(nodes, p),
            }
    })
}

/// One note per group of nodes that report the same slots, naming up to three of them.
fn node_group_notes(nodes: &[(String, Option<NodeSlots>)]) -> Vec<String> {
    let total = nodes.len();
    let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
    for (uri, report) in nodes {
        let what = match report {
            Some(r) => r.describe(),
            None => "no slot report (not set up with viewerfleet's grid/ files): addresses and shaping below the browser are unknown".to_string(),
        };
        match groups.iter_mut().find(|(w, _)| *w == what) {
            Some((_, uris)) => uris.push(uri),
            None => groups.push((what, vec![uri])),
        }
    }
    groups
        .iter()
        .map(|(what, uris)| {
            let shown: Vec<&str> = uris.iter().take(3).copied().collect();
            let more = if uris.len() > 3 {
                format!(" and {} more", uris.len() - 3)
            } else {
                String::new()
            };
            format!(
                "{} of {total} node(s) ({}{more}) at the start of the run: {what}.",
                uris.len(),
                shown.join(", ")
            )
        })
        .collect()
}

/// Where the nodes' slots do not give a rate-limiting profile what it asks for.
fn profile_notes(
    p: &NetworkProfile,
    nodes: &[(String, Option<NodeSlots>)],
    shaped: &[&NodeSlots],
    p2p_shaped: bool,
    cdp: bool,
) -> Vec<String> {
    let mut notes = Vec::new();
    let asked = format!(
        "{}/{} kbit/s",
        p.link.download_kbps.map_or("-".into(), |k| k.to_string()),
        p.link.upload_kbps.map_or("-".into(), |k| k.to_string())
    );
    if p.apply == Some(Throttling::Tc) && !p2p_shaped {
        notes.push(format!("The scenario asks for tc shaping ({asked}) but not every node's slots are rate-limited: viewers placed on those nodes failed."));
    } else if !shaped.is_empty() && !tc_matches(nodes, p) {
        notes.push(format!("The nodes' slot rates differ from the scenario's profile ({asked}): tc limits each browser to its node's slot rate{}.", if cdp { ", and the browser throttles to the profile on top" } else { "" }));
    }
    if p.link.latency_ms.is_some() && shaped.iter().any(|r| !r.delay.starts_with("netem")) {
        notes.push("latency_ms was not applied by tc on every node (no netem there, or no delay asked of the slots); the browser adds it to HTTP and WebSocket requests only.".into());
    }
    notes
}

/// The shaping tc gives, from the rate-limited nodes' reports; `None` when no node shapes.
fn slots_tc(shaped: &[&NodeSlots], total: usize) -> Option<String> {
    let mut rates: Vec<(u32, u32)> = shaped.iter().map(|r| (r.down_kbit, r.up_kbit)).collect();
    rates.sort_unstable();
    rates.dedup();
    match (shaped.len(), rates.as_slice()) {
        (0, _) => None,
        (n, [(d, u)]) if n == total => Some(format!(
            "tc on each node's viewer slots ({d}/{u} kbit/s down/up, as the nodes report them; WebRTC included)"
        )),
        (n, _) => Some(format!(
            "tc on the viewer slots of {n} of {total} node(s) (rates as each node reports them)"
        )),
    }
}

/// `gc`: deletes Grid sessions recorded by controllers that are no longer running.
pub async fn gc_sessions(dry_run: bool) -> Vec<String> {
    let mut lines = Vec::new();
    let Ok(entries) = std::fs::read_dir(journal_dir()) else {
        return lines;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(pid) = path
            .file_stem()
            .and_then(|s| s.to_str())
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for line in text.lines() {
            let Some((hub, tag)) = line.split_once(' ') else {
                continue;
            };
            // A local Grid's own credentials, else the environment's (the journal holds none).
            let credentials =
                localstate::find_by_hub(Path::new(localstate::DEFAULT_STATE_DIR), hub)
                    .and_then(|l| l.controller_credentials())
                    .or_else(|| GridCredentials::from_env().ok().flatten());
            let client = crate::grid::auth::http_client(credentials.as_ref());
            if dry_run {
                if let Ok(status) = grid_status(&client, hub).await {
                    for id in status.sessions_tagged(tag) {
                        lines.push(format!(
                            "Grid session {id} at {hub} (run {tag}, controller {pid} gone)"
                        ));
                    }
                }
                continue;
            }
            let (deleted, _) = sweep(&client, hub, tag, 0, Duration::from_secs(5)).await;
            for id in deleted {
                lines.push(format!(
                    "Grid session {id} at {hub} (run {tag}, controller {pid} gone)"
                ));
            }
        }
        if !dry_run {
            let _ = std::fs::remove_file(&path);
        }
    }
    lines
}

/// A local Grid whose slots sit behind NATs (`grid up --local --nat`): refsite also serves
/// its IPv4 address and runs a STUN server on both, so viewers gather server-reflexive
/// candidates; they open it at its IPv6 address as ever (the slots are dual-stack).
fn local_internet(
    local: &crate::grid::local_state::LocalGridState,
) -> Option<crate::target::TargetInternet> {
    if local.nat.unwrap_or_default() == crate::model::kinds::NatKind::None {
        return None;
    }
    let port = local.target_port;
    let v6: Option<std::net::IpAddr> = local.target_address.parse().ok();
    let v4: Option<std::net::IpAddr> = local.target_ipv4.parse().ok();
    Some(crate::target::TargetInternet {
        also_listen: v4
            .map(|ip| std::net::SocketAddr::new(ip, port))
            .into_iter()
            .collect(),
        stun: [v6, v4]
            .into_iter()
            .flatten()
            .map(|ip| std::net::SocketAddr::new(ip, crate::stun::DEFAULT_PORT))
            .collect(),
        viewer_host: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inventory_with_credentials_is_read_only_when_others_cannot_read_it() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("inv.json");
        std::fs::write(&path, r#"{"hub_url": "http://1.2.3.4:4444/"}"#).unwrap();
        assert!(inventory_credentials(&path).unwrap().is_none());
        std::fs::write(
            &path,
            r#"{"hub_url": "http://1.2.3.4:4444/", "grid_credentials": {"username": "viewerfleet", "password": "pw"}}"#,
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = inventory_credentials(&path).unwrap_err().to_string();
        assert!(err.contains("chmod 600") && !err.contains("pw\""), "{err}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let creds = inventory_credentials(&path).unwrap().unwrap();
        assert_eq!(
            (creds.username.as_str(), creds.password.expose()),
            ("viewerfleet", "pw")
        );
        std::fs::write(
            &path,
            r#"{"grid_credentials": {"username": "viewerfleet"}}"#,
        )
        .unwrap();
        assert!(inventory_credentials(&path).is_err());
    }

    /// Two hubs, one with 4 nodes' slots (600) and one with 3 (450): sessions go where the
    /// share in use is lowest, so neither overflows before the other is full.
    #[test]
    fn sessions_are_spread_over_hubs_by_capacity() {
        let capacity = [600, 450];
        let mut load = vec![0, 0];
        for _ in 0..1050 {
            let k = least_loaded(&load, &capacity);
            load[k] += 1;
        }
        assert_eq!(load, [600, 450]);
        // Alike hubs: round-robin.
        let mut load = vec![0, 0];
        let picks: Vec<usize> = (0..4)
            .map(|_| {
                let k = least_loaded(&load, &[10, 10]);
                load[k] += 1;
                k
            })
            .collect();
        assert_eq!(picks, [0, 1, 0, 1]);
        // A hub that reports no slots counts as one.
        assert_eq!(least_loaded(&[0], &[0]), 0);
    }

    fn plan(network: &str) -> Plan {
        let yaml = format!(
            "name: t\ntarget: {{kind: refsite, video: live}}\nviewers:\n  count: 4\n{network}duration: 30s\nfleet: {{kind: grid, url: 'http://127.0.0.1:4444/'}}\n"
        );
        crate::model::scenario::parse(&yaml, "t.yaml", &Default::default()).unwrap()
    }

    fn slots(down: u32, up: u32) -> Option<NodeSlots> {
        Some(NodeSlots {
            count: 3,
            prefix: "2001:db8:c17:0:1::/80".into(),
            down_kbit: down,
            up_kbit: up,
            delay: "none".into(),
            ..Default::default()
        })
    }

    fn nodes(reports: &[Option<NodeSlots>]) -> Vec<(String, Option<NodeSlots>)> {
        reports
            .iter()
            .enumerate()
            .map(|(i, r)| (format!("http://[2001:db8:{i}::1]:5555"), r.clone()))
            .collect()
    }

    const SEED: &str = "  network: {download_kbps: 2000, upload_kbps: 300}\n";

    #[test]
    fn nodes_with_shaped_slots_give_own_addresses_and_shaped_p2p() {
        let d = describe_nodes(&nodes(&[slots(2000, 300), slots(2000, 300)]), &plan(SEED));
        assert!(
            d.own_address_per_viewer && d.p2p_shaped && d.http_shaped,
            "{d:?}"
        );
        assert_eq!(
            d.shaping,
            "tc on each node's viewer slots (2000/300 kbit/s down/up, as the nodes report them; WebRTC included)"
        );
        assert!(d.notes[0].starts_with("2 of 2 node(s)"), "{:?}", d.notes);
        assert!(d.notes[0].contains("3 viewer slots in 2001:db8:c17:0:1::/80"));
        // tc gives the profile exactly: CDP is not added by default.
        assert!(tc_matches(
            &nodes(&[slots(2000, 300)]),
            &plan(SEED).network.unwrap()
        ));
    }

    #[test]
    fn a_foreign_grid_is_unknown_and_only_cdp_shaped() {
        let d = describe_nodes(&nodes(&[None]), &plan(SEED));
        assert!(!d.own_address_per_viewer && !d.p2p_shaped && d.http_shaped);
        assert!(d.shaping.starts_with("http-only: "), "{}", d.shaping);
        assert!(
            d.notes.iter().any(|n| n.contains("unknown")),
            "{:?}",
            d.notes
        );
        let d = describe_nodes(&nodes(&[None]), &plan(""));
        assert!(!d.http_shaped);
        assert_eq!(d.shaping, "none applied by viewerfleet");
    }

    #[test]
    fn a_node_without_slots_makes_the_claims_false_and_says_why() {
        let none = Some(NodeSlots {
            reason: "VIEWER_SLOTS=off in /etc/viewerfleet/node.env".into(),
            ..Default::default()
        });
        let d = describe_nodes(&nodes(&[slots(2000, 300), none]), &plan(SEED));
        assert!(!d.own_address_per_viewer && !d.p2p_shaped, "{d:?}");
        assert!(
            d.shaping
                .starts_with("tc on the viewer slots of 1 of 2 node(s)"),
            "{}",
            d.shaping
        );
        assert!(
            d.shaping.contains("plus, in the browser, http-only: "),
            "{}",
            d.shaping
        );
        let text = d.notes.join("\n");
        assert!(text.contains("no viewer slots (VIEWER_SLOTS=off"), "{text}");
        assert!(
            text.contains("1 of 2 node(s) ran their browsers in viewer slots"),
            "{text}"
        );
    }

    #[test]
    fn unshaped_slots_give_addresses_but_not_shaped_p2p() {
        let d = describe_nodes(&nodes(&[slots(0, 0)]), &plan(""));
        assert!(
            d.own_address_per_viewer && !d.p2p_shaped && !d.http_shaped,
            "{d:?}"
        );
        let d = describe_nodes(
            &nodes(&[slots(0, 0)]),
            &plan("  network: {download_kbps: 2000, upload_kbps: 300, apply: tc}\n"),
        );
        assert!(!d.p2p_shaped);
        assert!(
            d.notes
                .iter()
                .any(|n| n.contains("viewers placed on those nodes failed")),
            "{:?}",
            d.notes
        );
    }

    #[test]
    fn slot_rates_other_than_the_profile_are_named_and_cdp_added() {
        let d = describe_nodes(&nodes(&[slots(5000, 1000)]), &plan(SEED));
        assert!(
            d.p2p_shaped && d.shaping.contains("plus, in the browser, http-only"),
            "{d:?}"
        );
        assert!(
            d.notes
                .iter()
                .any(|n| n.contains("differ from the scenario's profile (2000/300 kbit/s)")),
            "{:?}",
            d.notes
        );
        assert!(!tc_matches(
            &nodes(&[slots(5000, 1000)]),
            &plan(SEED).network.unwrap()
        ));
    }

    #[test]
    fn slot_reports_parse_from_a_status_stereotype() {
        let body = serde_json::json!({"ready": true, "nodes": [
            {"uri": "http://[2001:db8::1]:5555", "availability": "UP", "maxSessions": 3,
             "slots": [{"session": null, "stereotype": {"browserName": "chrome",
                "viewerfleet:slots": {"count": 3, "prefix": "2001:db8:0:0:1::/80",
                  "down_kbit": 2000, "up_kbit": 300, "delay": "none", "ipv4": false},
                "viewerfleet:load": "http://[2001:db8::1]:9465/metrics"}}]},
            {"uri": "http://[2001:db8::2]:5555", "availability": "UP", "maxSessions": 3,
             "slots": [{"session": null, "stereotype": {"browserName": "chrome",
                "viewerfleet:load": ""}}]},
            {"uri": "http://[2001:db8::3]:5555", "availability": "UP", "maxSessions": 3,
             "slots": [{"session": null, "stereotype": {"viewerfleet:slots": "garbage",
                "viewerfleet:load": 7}}]}]});
        let status: GridStatus = serde_json::from_value(body).unwrap();
        // Only a URL names an endpoint; an empty one (a node serving none) or garbage does not.
        assert_eq!(
            status.load_endpoints(),
            vec![LoadEndpoint {
                node: "http://[2001:db8::1]:5555".into(),
                url: "http://[2001:db8::1]:9465/metrics".into()
            }]
        );
        let by_node = status.slots_by_node();
        assert_eq!(
            by_node[0].1,
            slots(2000, 300).map(|s| NodeSlots {
                prefix: "2001:db8:0:0:1::/80".into(),
                ..s
            })
        );
        assert_eq!(by_node[1].1, None);
        let bad = by_node[2].1.as_ref().unwrap();
        assert!(
            !bad.own_addresses() && bad.reason.contains("unreadable"),
            "{bad:?}"
        );
    }
}
