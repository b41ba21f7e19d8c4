//! Selenium Grid 4, as the fleets see it: the hub's `/status` (nodes, slots, sessions),
//! placing new sessions on nodes with few `/status` requests, a real Grid on this
//! machine (`local`: hub and nodes from the npm-shipped jar, browsers in viewer slots), the
//! nodes' load endpoints (`load`), and which Selenium server every Grid of viewerfleet runs
//! (`selenium`).

pub mod auth;
pub mod load;
pub mod local;
pub mod local_state;
pub(crate) mod placement;
pub mod selenium;

use anyhow::Context;
use std::time::Duration;

/// What the Grid's `/status` says, the parts viewerfleet uses.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct GridStatus {
    #[serde(default)]
    pub ready: bool,
    #[serde(default)]
    pub nodes: Vec<GridNodeStatus>,
}

#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GridNodeStatus {
    #[serde(default)]
    pub uri: String,
    #[serde(default)]
    pub availability: String,
    #[serde(default)]
    pub max_sessions: u32,
    #[serde(default)]
    pub slots: Vec<GridSlotStatus>,
}

#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct GridSlotStatus {
    #[serde(default)]
    pub session: Option<GridSessionStatus>,
    /// The capabilities this slot offers, as the node's configuration declares them.
    #[serde(default)]
    pub stereotype: serde_json::Value,
}

/// The stereotype capability in which nodes set up by this project's `grid/` files (cloud
/// bootstrap, Terraform, `grid up --local`) say what their viewer slots are.
pub(crate) const SLOTS_CAPABILITY: &str = "viewerfleet:slots";

/// The stereotype capability in which those nodes name their load endpoint
/// (`grid/node-load.py`): `"http://…/metrics"`, or `""` when they serve none.
pub(crate) const LOAD_CAPABILITY: &str = "viewerfleet:load";

/// What one node reports about its viewer slots (`"viewerfleet:slots"` of its stereotype).
/// Written by `grid/node-bootstrap.sh` from the slots as `viewer-slots.sh` applied them, or
/// by the local Grid from the same script's output.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize, serde::Serialize)]
pub struct NodeSlots {
    /// Viewer slots up on the node; 0 when it has none (then `reason` says why).
    #[serde(default)]
    pub count: u32,
    /// The slots' IPv6 prefix (each browser an address from it).
    #[serde(default)]
    pub prefix: String,
    /// tc rate limits as applied; 0 = not limited.
    #[serde(default)]
    pub down_kbit: u32,
    #[serde(default)]
    pub up_kbit: u32,
    /// Delay as applied, e.g. `none`, `netem:250ms`, `not-applied(netem-missing)`.
    #[serde(default)]
    pub delay: String,
    /// The slots have IPv4 too (NAT44 through the node).
    #[serde(default)]
    pub ipv4: bool,
    /// The NAT type each slot is behind (`none`, `home`, `cgnat`, `symmetric`; empty from
    /// nodes of earlier versions: none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub nat: String,
    /// Why there are no slots.
    #[serde(default)]
    pub reason: String,
}

impl NodeSlots {
    /// Every browser of the node runs in a slot with its own address.
    pub fn own_addresses(&self) -> bool {
        self.count > 0
    }

    /// The slots' links are rate-limited with tc (which shapes WebRTC too).
    pub fn rate_shaped(&self) -> bool {
        self.own_addresses() && (self.down_kbit > 0 || self.up_kbit > 0)
    }

    /// One phrase for notes: `3 slots in 2001:db8::/80, tc 2000/300 kbit/s, delay none`.
    pub fn describe(&self) -> String {
        if !self.own_addresses() {
            return format!(
                "no viewer slots ({})",
                if self.reason.is_empty() {
                    "no reason given"
                } else {
                    &self.reason
                }
            );
        }
        let rate = |k: u32| {
            if k == 0 {
                "unlimited".to_string()
            } else {
                k.to_string()
            }
        };
        let nat = match self.nat.as_str() {
            "" | "none" => String::new(),
            nat => format!(", each behind a {nat} NAT"),
        };
        format!(
            "{} viewer slots in {}, tc {}/{} kbit/s down/up, delay {}{}{nat}",
            self.count,
            self.prefix,
            rate(self.down_kbit),
            rate(self.up_kbit),
            if self.delay.is_empty() {
                "none"
            } else {
                &self.delay
            },
            if self.ipv4 { ", IPv4 by NAT44" } else { "" }
        )
    }
}

impl GridNodeStatus {
    /// The node's slot report, if it has one (nodes not set up by `grid/` have none: what
    /// is below their browsers is unknown). A malformed report reads as no slots.
    pub fn viewer_slots(&self) -> Option<NodeSlots> {
        let value = self
            .slots
            .iter()
            .find_map(|s| s.stereotype.get(SLOTS_CAPABILITY))?;
        Some(
            serde_json::from_value(value.clone()).unwrap_or_else(|e| NodeSlots {
                reason: format!("unreadable {SLOTS_CAPABILITY} report {value}: {e}"),
                ..Default::default()
            }),
        )
    }

    /// The node's load endpoint, if its stereotype names one (an `http(s)://` URL).
    pub fn load_url(&self) -> Option<String> {
        self.slots
            .iter()
            .find_map(|s| s.stereotype.get(LOAD_CAPABILITY)?.as_str())
            .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
            .map(str::to_string)
    }
}

#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GridSessionStatus {
    #[serde(default)]
    pub session_id: String,
    /// The session's capabilities (the Grid echoes the requested `goog:chromeOptions`).
    #[serde(default)]
    pub capabilities: serde_json::Value,
}

impl GridStatus {
    /// Node URI → session ids running there.
    pub fn sessions_by_node(&self) -> Vec<(String, Vec<String>)> {
        self.nodes
            .iter()
            .map(|n| {
                (
                    n.uri.clone(),
                    n.slots
                        .iter()
                        .filter_map(|s| s.session.as_ref().map(|x| x.session_id.clone()))
                        .collect(),
                )
            })
            .collect()
    }

    /// Sessions whose capabilities mention `tag` (e.g. a run's marker argument).
    pub(crate) fn sessions_tagged(&self, tag: &str) -> Vec<String> {
        self.nodes
            .iter()
            .flat_map(|n| n.slots.iter())
            .filter_map(|s| s.session.as_ref())
            .filter(|s| s.capabilities.to_string().contains(tag))
            .map(|s| s.session_id.clone())
            .collect()
    }

    /// Node URI → its slot report (`None`: the node does not report one).
    pub fn slots_by_node(&self) -> Vec<(String, Option<NodeSlots>)> {
        self.nodes
            .iter()
            .map(|n| (n.uri.clone(), n.viewer_slots()))
            .collect()
    }

    /// The load endpoints the nodes name in their stereotypes, by node URI.
    pub fn load_endpoints(&self) -> Vec<load::LoadEndpoint> {
        self.nodes
            .iter()
            .filter_map(|n| {
                Some(load::LoadEndpoint {
                    node: n.uri.clone(),
                    url: n.load_url()?,
                })
            })
            .collect()
    }

    /// Node URI running `session`, if any.
    pub fn node_of(&self, session: &str) -> Option<String> {
        self.sessions_by_node()
            .into_iter()
            .find(|(_, s)| s.iter().any(|x| x == session))
            .map(|(n, _)| n)
    }
}

/// A hub answered 401: its router asks for a user name and password that were not sent or
/// not accepted.
#[derive(Debug, thiserror::Error)]
#[error("the Grid at {hub} asks for a user name and password ({why}); set {user} and {password} to the hub's router credentials (GUIDE.md, \"What protects a cloud run\")", user = auth::USER_ENV, password = auth::PASSWORD_ENV)]
pub struct Unauthorized {
    pub hub: String,
    pub why: &'static str,
}

/// `GET <hub>/status` of any Selenium Grid 4. `client` carries the hub's credentials, if
/// it asks for some (`auth::http_client`).
pub async fn grid_status(client: &reqwest::Client, hub_url: &str) -> anyhow::Result<GridStatus> {
    let url = format!("{}/status", hub_url.trim_end_matches('/'));
    let resp = client
        .get(&url)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .with_context(|| format!("GET {url}"))?;
    if resp.status() == reqwest::StatusCode::UNAUTHORIZED {
        return Err(Unauthorized {
            hub: hub_url.to_string(),
            why: "none were sent or they were refused",
        }
        .into());
    }
    let body: serde_json::Value = resp
        .json()
        .await
        .with_context(|| format!("GET {url}: not JSON"))?;
    serde_json::from_value(body["value"].clone())
        .with_context(|| format!("GET {url}: unexpected answer"))
}
