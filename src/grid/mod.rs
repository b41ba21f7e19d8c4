//! Selenium Grid 4, as the fleets see it: the hub's `/status` (nodes, slots, sessions),
//! placing new sessions on nodes with few `/status` requests, and a real Grid on this
//! machine (`local`: hub and nodes from the npm-shipped jar, browsers in viewer slots).

pub mod local;
pub mod local_state;
pub mod placement;

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
    pub fn sessions_tagged(&self, tag: &str) -> Vec<String> {
        self.nodes
            .iter()
            .flat_map(|n| n.slots.iter())
            .filter_map(|s| s.session.as_ref())
            .filter(|s| s.capabilities.to_string().contains(tag))
            .map(|s| s.session_id.clone())
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

/// `GET <hub>/status` of any Selenium Grid 4.
pub async fn grid_status(client: &reqwest::Client, hub_url: &str) -> anyhow::Result<GridStatus> {
    let url = format!("{}/status", hub_url.trim_end_matches('/'));
    let body: serde_json::Value = client
        .get(&url)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .with_context(|| format!("GET {url}"))?
        .json()
        .await
        .with_context(|| format!("GET {url}: not JSON"))?;
    serde_json::from_value(body["value"].clone())
        .with_context(|| format!("GET {url}: unexpected answer"))
}
