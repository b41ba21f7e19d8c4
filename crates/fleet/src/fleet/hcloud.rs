//! Fleet `hcloud`: a Selenium Grid on Hetzner Cloud made for the run. Two parts:
//! `cloud::CloudFleet` provisions it (servers, firewalls, heartbeat) and deletes it;
//! the `grid` fleet, pointed at the hub, runs the viewers — so session retries, placement
//! (which node each viewer landed on), the session journal, node loss and re-creation are
//! the same code as for any Grid. What the measurements can claim (own address per viewer,
//! P2P shaped) is what the Grid's nodes report, as for any Grid.

use super::grid::GridFleet;
use super::{Fleet, LoadEndpoint, OpenOptions, StartPolicy, TargetPlacement};
use crate::cloud::up::CloudFleet;
use crate::model::kinds::FleetKind;
use crate::model::rawdata::FleetDescription;
use crate::model::scenario::fleet::GridFleetPlan;
use crate::model::scenario::{BrowserPlan, Plan, ViewerPlan};
use crate::viewer::ViewerSlot;

/// The run's cloud fleet, as the engine sees it.
pub struct HcloudFleet {
    cloud: CloudFleet,
    grid: GridFleet,
}

impl std::fmt::Debug for HcloudFleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HcloudFleet")
            .field("cloud", &self.cloud)
            .finish()
    }
}

/// The viewer-slot set-up that cloud nodes run from their bootstrap (one place for slots).
const VIEWER_SLOTS_SCRIPT: &str = include_str!("../../../../grid/viewer-slots.sh");

/// The Grid fleet on the run's hubs. Session requests in flight: as many as the hubs'
/// measured creation rate keeps busy from request to first frame (`cloud::hub_sizing`).
fn grid_plan(cloud: &CloudFleet) -> anyhow::Result<GridFleetPlan> {
    let mut plan = GridFleetPlan::with_urls(&cloud.hub_urls)
        .map_err(|m| anyhow::anyhow!("the hub URLs of run {}: {m}", cloud.run_id))?;
    plan.max_parallel_starts = cloud.max_parallel_starts.max(1) as usize;
    plan.credentials = Some(cloud.credentials.clone());
    Ok(plan)
}

impl HcloudFleet {
    /// The engine's view of a fleet that is already up: the Grid fleet on its hub. If the
    /// hub does not answer as a Grid, the cloud fleet is deleted (`--keep` or not) before the
    /// error returns.
    pub async fn on(cloud: CloudFleet) -> anyhow::Result<Self> {
        let grid = match grid_plan(&cloud) {
            Ok(plan) => GridFleet::start(&plan).await,
            Err(e) => Err(e),
        };
        match grid {
            Ok(grid) => Ok(Self { cloud, grid }),
            Err(err) => {
                if let Err(e) = cloud.discard().await {
                    tracing::error!("{e}");
                }
                Err(err.context(format!("the hub of run {} is not usable", cloud.run_id)))
            }
        }
    }

    /// Provisions the plan's cloud fleet (API and hub override from the environment, see
    /// `CloudFleet::open`); tears down before returning an error.
    pub async fn open(plan: &Plan, options: &OpenOptions) -> anyhow::Result<Self> {
        let cloud = CloudFleet::open(
            plan,
            options.keep,
            Some(VIEWER_SLOTS_SCRIPT.to_string()),
            options.canary.clone(),
            options.confirm.clone(),
            &options.cancel,
        )
        .await?;
        Self::on(cloud).await
    }

    /// The cloud part (run id, nodes, heartbeat).
    pub fn cloud(&self) -> &CloudFleet {
        &self.cloud
    }
}

#[async_trait::async_trait]
impl Fleet for HcloudFleet {
    fn description(&self, plan: &Plan) -> FleetDescription {
        let grid = self.grid.description(plan);
        let mut notes = vec![format!(
            "{} × {} Hetzner Cloud nodes (IPv6-only) behind {} Selenium Grid 4 hub(s), run {}; viewers per node from the per-viewer CPU/memory budget, hubs and session requests in flight ({}) from a hub's measured cost",
            self.cloud.nodes.len(),
            self.cloud.node_type,
            self.cloud.hubs.len(),
            self.cloud.run_id,
            self.cloud.max_parallel_starts
        )];
        if let Some(c) = &self.cloud.canary {
            notes.push(format!(
                "The fleet was sized from a canary node: {}. Planned {} viewers per node on {} nodes, made {} on {} (the canary's run: {}).",
                c.verdict, c.planned.0, c.planned.1, c.made.0, c.made.1, c.cost.run_dir
            ));
        }
        notes.extend(grid.notes);
        notes.push(
            "On the nodes, browsers run as user viewerfleet-browser, with Chromium's sandbox where the node's kernel lets that user make a user namespace (the nodes count how their browsers ran, and the report says it)".to_string(),
        );
        if let Some(s) = &self.cloud.shortfall {
            notes.push(s.clone());
        }
        FleetDescription {
            kind: FleetKind::Hcloud,
            notes,
            ..grid
        }
    }

    fn target_placement(&self) -> TargetPlacement {
        // Cloud viewers reach the target over the internet: listen on every address, and
        // take playback reports and tracker announces from the fleet's nodes only.
        TargetPlacement {
            listen: std::net::SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0)),
            netns: None,
            internet: None,
            reports_from: self
                .cloud
                .nodes
                .iter()
                .filter_map(|n| n.ipv6_net.clone())
                .collect(),
        }
    }

    async fn open_viewer(&self, viewer: &ViewerPlan) -> anyhow::Result<ViewerSlot> {
        if viewer.index >= self.cloud.capacity() {
            anyhow::bail!(
                "viewer {} has no slot: the hcloud fleet holds {} viewers ({} nodes × {}){}",
                viewer.index,
                self.cloud.capacity(),
                self.cloud.nodes.len(),
                self.cloud.viewers_per_node,
                self.cloud
                    .shortfall
                    .as_deref()
                    .map(|s| format!("; {s}"))
                    .unwrap_or_default()
            );
        }
        self.grid.open_viewer(viewer).await
    }

    /// The fleet holds viewers, not sessions: a browser fits while its viewers do.
    async fn open_browser(&self, browser: &BrowserPlan) -> anyhow::Result<ViewerSlot> {
        if let Some(first) = browser.viewers.first() {
            if first.index >= self.cloud.capacity() {
                return self.open_viewer(first).await;
            }
        }
        self.grid.open_browser(browser).await
    }

    async fn close_viewer(&self, slot: &ViewerSlot) {
        self.grid.close_viewer(slot).await
    }

    fn start_policy(&self) -> StartPolicy {
        self.grid.start_policy()
    }

    async fn session_placed(&self, slot: &mut ViewerSlot, session_id: &str) {
        self.grid.session_placed(slot, session_id).await
    }

    fn session_closed(&self, session_id: &str) {
        self.grid.session_closed(session_id)
    }

    fn session_refused(&self) {
        self.grid.session_refused()
    }

    fn load_endpoints(&self) -> Vec<LoadEndpoint> {
        self.grid.load_endpoints()
    }

    async fn shutdown(&self) -> anyhow::Result<()> {
        // Sessions first (the Grid's browsers), then the servers, whatever the first says.
        let sessions = self.grid.shutdown().await;
        self.cloud.teardown().await?;
        sessions
    }
}
