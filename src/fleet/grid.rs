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
//! Inventory files (`inventory:`): JSON or YAML, either a plain list of hub URLs or the
//! object printed by `terraform output -json` with a `hub_urls` (list) or `hub_url`
//! (string) output, e.g. `{"hub_urls": {"value": ["http://10.0.0.2:4444"]}}`. Viewers are
//! spread over the hubs round-robin.

use super::{Fleet, StartPolicy, TargetPlacement};
use crate::grid::local_state::{self as localstate, LocalGridState};
use crate::grid::placement::PlacementCache;
use crate::grid::{grid_status, GridStatus};
use crate::model::kinds::FleetKind;
use crate::model::rawdata::FleetDescription;
use crate::model::scenario::fleet::{GridFleetPlan, GridHubs};
use crate::model::scenario::{Plan, ViewerPlan};
use crate::viewer::{SlotShaping, ViewerSlot};
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

/// A Grid fleet for one run.
pub struct GridFleet {
    hubs: Vec<String>,
    plan: GridFleetPlan,
    /// The local Grid behind the hub, when it was made by `grid up --local`.
    local: Option<LocalGridState>,
    client: reqwest::Client,
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
}

impl GridFleet {
    /// Resolves the hubs and checks each answers `/status` with at least one node.
    pub async fn start(plan: &GridFleetPlan) -> anyhow::Result<Self> {
        let hubs = match &plan.hubs {
            GridHubs::Url(url) => vec![url.clone()],
            GridHubs::Inventory(path) => crate::model::scenario::fleet::grid::read_inventory(path)?,
        };
        let client = reqwest::Client::new();
        for hub in &hubs {
            let status = grid_status(&client, hub).await.map_err(|e| {
                anyhow::anyhow!("the Grid at {hub} does not answer /status: {e:#}; is the hub up (e.g. `viewerfleet grid up --local`)?")
            })?;
            if status.nodes.is_empty() {
                anyhow::bail!("the Grid at {hub} has no node registered; start nodes first (they register with the hub's event bus)");
            }
        }
        let local = hubs
            .first()
            .and_then(|h| localstate::find_by_hub(Path::new(localstate::DEFAULT_STATE_DIR), h));
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
            sessions: Mutex::new(HashMap::new()),
        })
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
        let slots = self
            .local
            .as_ref()
            .is_some_and(|l| !l.name_prefix.is_empty());
        let t = super::throttling(
            plan,
            slots.then_some("tc on each viewer slot, as set by `grid up --down-kbit/--up-kbit`"),
        );
        let cdp = t.http;
        let mut notes = vec![format!(
            "Viewers were created through Selenium Grid 4 at {}; which node ran each viewer is in the raw viewer events.",
            self.hubs.join(", ")
        )];
        let (own, p2p_shaped, shaping) = match &self.local {
            Some(local) if !local.name_prefix.is_empty() => {
                notes.push(format!(
                    "Local Grid on this machine: hub and node processes on loopback; every browser runs in one of its node's viewer slots (own network namespace and IPv6 address from {}; node n owns slots {}n00..). All nodes share this machine's CPU cores.",
                    local.prefix, local.name_prefix
                ));
                (
                    true,
                    false,
                    if cdp {
                        "CDP network conditions (HTTP only); slot tc shaping as set by `grid up --down-kbit/--up-kbit`".to_string()
                    } else {
                        "slot tc shaping as set by `grid up --down-kbit/--up-kbit` (none by default)".to_string()
                    },
                )
            }
            _ => {
                notes.push("Addresses and shaping below the browser depend on how the Grid's nodes were set up (viewer slots of grid/viewer-slots.sh give each browser its own address and tc shaping); viewerfleet cannot see that from the hub.".into());
                (
                    false,
                    false,
                    if cdp {
                        "CDP network conditions (HTTP only)".to_string()
                    } else {
                        "none applied by viewerfleet".to_string()
                    },
                )
            }
        };
        FleetDescription {
            kind: FleetKind::Grid,
            own_address_per_viewer: own,
            http_shaped: cdp,
            p2p_shaped: p2p_shaped || t.p2p,
            shaping: if t.mode.is_some() { t.text } else { shaping },
            throttling: t.mode,
            notes,
        }
    }

    fn target_placement(&self) -> TargetPlacement {
        match &self.local {
            Some(local) if !local.target_namespace.is_empty() => TargetPlacement {
                listen: format!("[{}]:{}", local.target_address, local.target_port)
                    .parse()
                    .unwrap_or_else(|_| "127.0.0.1:0".parse().expect("valid address")),
                netns: Some(local.target_namespace.clone()),
            },
            _ => TargetPlacement {
                listen: "127.0.0.1:0".parse().expect("valid address"),
                netns: None,
            },
        }
    }

    async fn open_viewer(&self, viewer: &ViewerPlan) -> anyhow::Result<ViewerSlot> {
        self.requested.fetch_add(1, Ordering::SeqCst);
        let hub = self.hubs[viewer.index as usize % self.hubs.len()].clone();
        let mut extra_args = match &self.local {
            Some(local) if !local.target_namespace.is_empty() => {
                crate::netns::wrapper::slot_chromium_args(&local.target_origin())
            }
            _ => vec!["--remote-debugging-pipe".into()],
        };
        extra_args.push(tag_arg(&self.tag));
        Ok(ViewerSlot {
            webdriver_url: hub,
            // The node's stereotype names its browser (a slot wrapper on viewerfleet nodes).
            chrome_binary: None,
            extra_args,
            node: "grid".into(),
            address: None,
            shaping: SlotShaping::NONE,
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
            slot.node = node;
        }
    }

    async fn close_viewer(&self, slot: &ViewerSlot) {
        let _ = slot;
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

/// `gc`: deletes Grid sessions recorded by controllers that are no longer running.
pub async fn gc_sessions(dry_run: bool) -> Vec<String> {
    let mut lines = Vec::new();
    let Ok(entries) = std::fs::read_dir(journal_dir()) else {
        return lines;
    };
    let client = reqwest::Client::new();
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
