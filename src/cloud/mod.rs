//! Hetzner Cloud: planning (node counts and cost) and fleets of cloud nodes made for a run.

use serde::{Deserialize, Serialize};
use std::process::ExitCode;

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HcloudFleetSpec {}

impl HcloudFleetSpec {
    pub fn validate(&self, _viewers: u32) -> Result<(), (String, String)> {
        Err((
            "kind".into(),
            "the hcloud fleet is not available yet; use `kind: local`".into(),
        ))
    }
}

/// `viewerfleet plan`.
pub async fn cli_plan(_args: crate::cli::PlanArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`viewerfleet plan` is not available yet")
}
