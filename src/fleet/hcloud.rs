//! Fleet `hcloud`: a Selenium Grid on Hetzner Cloud made for the run (`cloud::CloudFleet`),
//! with viewers handed to its hub; `shutdown` deletes every server.

use super::{Fleet, OpenOptions, TargetPlacement};
use crate::cloud::up::CloudFleet;
use crate::model::kinds::FleetKind;
use crate::model::rawdata::FleetDescription;
use crate::model::scenario::{Plan, ViewerPlan};
use crate::viewer::{SlotShaping, ViewerSlot};

/// The run's cloud fleet, as the engine sees it.
#[derive(Debug)]
pub struct HcloudFleet {
    cloud: CloudFleet,
}

/// The viewer-slot set-up that cloud nodes run from their bootstrap (one place for slots).
const VIEWER_SLOTS_SCRIPT: &str = include_str!("../../grid/viewer-slots.sh");

impl HcloudFleet {
    /// The engine's view of a fleet that is already up.
    pub fn new(cloud: CloudFleet) -> Self {
        Self { cloud }
    }

    /// Provisions the plan's cloud fleet (API and hub override from the environment, see
    /// `CloudFleet::open`); tears down before returning an error.
    pub async fn open(plan: &Plan, options: &OpenOptions) -> anyhow::Result<Self> {
        let cloud = CloudFleet::open(
            plan,
            options.keep,
            Some(VIEWER_SLOTS_SCRIPT.to_string()),
            &options.cancel,
        )
        .await?;
        Ok(Self { cloud })
    }
}

#[async_trait::async_trait]
impl Fleet for HcloudFleet {
    fn description(&self, _plan: &Plan) -> FleetDescription {
        let mut notes = vec![
            format!("{} × {} Hetzner Cloud nodes (IPv6-only) behind a Selenium Grid 4 hub, run {}", self.cloud.nodes.len(), self.cloud.node_type, self.cloud.run_id),
            "the Grid's distributor places each viewer on a node; viewers per node from the per-viewer CPU/memory budget".into(),
        ];
        if !self.cloud.tc_slots {
            notes.push("no viewer-slot script: viewers on one node share its address and are not tc-shaped".into());
        }
        if let Some(s) = &self.cloud.shortfall {
            notes.push(s.clone());
        }
        FleetDescription {
            kind: FleetKind::Hcloud,
            own_address_per_viewer: self.cloud.tc_slots,
            http_shaped: self.cloud.shaped,
            p2p_shaped: self.cloud.shaped && self.cloud.tc_slots,
            shaping: super::throttling(
                _plan,
                self.cloud
                    .tc_slots
                    .then_some("tc on each viewer slot (viewer-slots.sh)"),
            )
            .text,
            throttling: super::throttling(_plan, None).mode,
            notes,
        }
    }

    fn target_placement(&self) -> TargetPlacement {
        // Cloud viewers reach the target over the internet: listen on every address.
        TargetPlacement {
            listen: std::net::SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0)),
            netns: None,
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
        let node = &self.cloud.nodes
            [(viewer.index / self.cloud.viewers_per_node) as usize % self.cloud.nodes.len()];
        Ok(ViewerSlot {
            webdriver_url: self.cloud.hub_url.clone(),
            chrome_binary: None,
            extra_args: Vec::new(),
            node: format!("{} (via hub)", node.name),
            address: None,
            // Whether the node's slots shape is known only to the node (its Grid stereotype).
            shaping: SlotShaping {
                rates: self.cloud.tc_slots && self.cloud.shaped,
                latency: false,
            },
        })
    }

    async fn close_viewer(&self, _slot: &ViewerSlot) {}

    async fn shutdown(&self) -> anyhow::Result<()> {
        Ok(self.cloud.teardown().await?)
    }
}
