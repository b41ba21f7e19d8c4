//! The `fleet:` section of a scenario: one YAML struct per provider (unknown fields are
//! errors), each validated into a typed plan with every default filled in, so the fleets
//! never see a string they have to parse again.
//!
//! To add a provider: a `<name>.rs` here with its spec and plan, a variant in `FleetSpec`,
//! `FleetPlan` and `FleetKind`, and its `Fleet` in `crate::fleet` (opened by `fleet::open`).

pub mod grid;
mod hcloud;
mod local;
pub mod netns;

use crate::model::kinds::FleetKind;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

pub use grid::{GridFleetPlan, GridFleetSpec, GridHubs};
pub use hcloud::{HcloudFleetSpec, OnLimit, OnNodeFailure, ViewerBudget};
pub use local::{LocalFleetPlan, LocalFleetSpec};
pub use netns::{NetnsFleetPlan, NetnsFleetSpec};

/// Debian's chromedriver, the default driver of every fleet that runs one.
pub const DEFAULT_CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// Debian's Chromium binary (not the `/usr/bin/chromium` wrapper script, which adds flags
/// and prints a shell error here), the default browser of every fleet.
pub const DEFAULT_CHROMIUM: &str = "/usr/lib/chromium/chromium";

/// The `fleet:` section as written.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum FleetSpec {
    Local(LocalFleetSpec),
    Netns(NetnsFleetSpec),
    Grid(GridFleetSpec),
    Hcloud(Box<HcloudFleetSpec>),
}

/// The `fleet:` section, validated.
#[derive(Debug, Clone)]
pub enum FleetPlan {
    Local(LocalFleetPlan),
    Netns(NetnsFleetPlan),
    Grid(GridFleetPlan),
    /// Hetzner's settings are checked field by field and read through typed accessors.
    Hcloud(Box<HcloudFleetSpec>),
}

impl FleetSpec {
    pub fn kind(&self) -> FleetKind {
        match self {
            FleetSpec::Local(_) => FleetKind::Local,
            FleetSpec::Netns(_) => FleetKind::Netns,
            FleetSpec::Grid(_) => FleetKind::Grid,
            FleetSpec::Hcloud(_) => FleetKind::Hcloud,
        }
    }

    /// Checks the provider's fields and fills in defaults; errors are
    /// `(field below fleet., message)`.
    pub fn plan(&self, viewers: u32) -> Result<FleetPlan, (String, String)> {
        Ok(match self {
            FleetSpec::Local(spec) => FleetPlan::Local(spec.plan()?),
            FleetSpec::Netns(spec) => FleetPlan::Netns(spec.plan(viewers)?),
            FleetSpec::Grid(spec) => FleetPlan::Grid(spec.plan()?),
            FleetSpec::Hcloud(spec) => {
                spec.validate(viewers)?;
                FleetPlan::Hcloud(spec.clone())
            }
        })
    }
}

impl FleetPlan {
    pub fn kind(&self) -> FleetKind {
        match self {
            FleetPlan::Local(_) => FleetKind::Local,
            FleetPlan::Netns(_) => FleetKind::Netns,
            FleetPlan::Grid(_) => FleetKind::Grid,
            FleetPlan::Hcloud(_) => FleetKind::Hcloud,
        }
    }
}

/// A binary path from the scenario, or the default.
fn binary(value: &Option<String>, default: &str) -> PathBuf {
    PathBuf::from(value.as_deref().unwrap_or(default))
}
