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

use crate::kinds::FleetKind;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

pub use grid::{GridFleetPlan, GridFleetSpec, GridHubs};
pub use hcloud::{CanarySetting, HcloudFleetSpec, OnLimit, OnNodeFailure, ViewerBudget};
pub use local::{LocalFleetPlan, LocalFleetSpec};
pub use netns::{NetnsFleetPlan, NetnsFleetSpec};

/// Debian's chromedriver, the default driver of every fleet that runs one.
pub const DEFAULT_CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// Debian's Chromium binary (not the `/usr/bin/chromium` wrapper script, which adds flags
/// and prints a shell error here), the default browser of every fleet.
pub const DEFAULT_CHROMIUM: &str = "/usr/lib/chromium/chromium";

/// The `fleet:` section as written: `kind:` and that provider's fields.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum FleetSpec {
    Local(LocalFleetSpec),
    Netns(NetnsFleetSpec),
    Grid(GridFleetSpec),
    Hcloud(Box<HcloudFleetSpec>),
}

/// By hand rather than `#[serde(tag = "kind")]`: a tagged enum buffers the section first,
/// and its errors then lose the field's name and line (`fleet.target_port: 70000 …` became
/// `(file): invalid value` at the wrong line). Here, when `kind:` comes first (as in every
/// example), the rest of the section goes straight to the provider's struct, so each error
/// keeps its field and line; a `kind:` written later costs only that precision.
impl<'de> Deserialize<'de> for FleetSpec {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(FleetVisitor)
    }
}

struct FleetVisitor;

impl<'de> serde::de::Visitor<'de> for FleetVisitor {
    type Value = FleetSpec;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "a `fleet:` section with `kind:` {} and that fleet's fields",
            crate::kinds::one_of(FleetKind::NAMES)
        )
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<FleetSpec, A::Error> {
        use serde::de::value::MapAccessDeserializer;
        use serde::de::Error;
        let mut before_kind = yaml_serde::Mapping::new();
        loop {
            let Some(key) = map.next_key::<String>()? else {
                return Err(A::Error::custom(format!(
                    "missing `kind:`; write one of {}",
                    crate::kinds::one_of(FleetKind::NAMES)
                )));
            };
            if key == "kind" {
                let kind: FleetKind = map.next_value()?;
                if before_kind.is_empty() {
                    let rest = MapAccessDeserializer::new(map);
                    return Ok(match kind {
                        FleetKind::Local => FleetSpec::Local(LocalFleetSpec::deserialize(rest)?),
                        FleetKind::Netns => FleetSpec::Netns(NetnsFleetSpec::deserialize(rest)?),
                        FleetKind::Grid => FleetSpec::Grid(GridFleetSpec::deserialize(rest)?),
                        FleetKind::Hcloud => {
                            FleetSpec::Hcloud(Box::new(HcloudFleetSpec::deserialize(rest)?))
                        }
                    });
                }
                while let Some((k, v)) = map.next_entry::<String, yaml_serde::Value>()? {
                    before_kind.insert(yaml_serde::Value::String(k), v);
                }
                let fields = yaml_serde::Value::Mapping(before_kind);
                let spec = match kind {
                    FleetKind::Local => yaml_serde::from_value(fields).map(FleetSpec::Local),
                    FleetKind::Netns => yaml_serde::from_value(fields).map(FleetSpec::Netns),
                    FleetKind::Grid => yaml_serde::from_value(fields).map(FleetSpec::Grid),
                    FleetKind::Hcloud => {
                        yaml_serde::from_value(fields).map(|spec| FleetSpec::Hcloud(Box::new(spec)))
                    }
                };
                return spec.map_err(|e| {
                    A::Error::custom(format!(
                        "{} (write `kind:` as the first line of `fleet:` to have the field and line named)",
                        super::spec::humanize(&e.to_string())
                    ))
                });
            }
            let value: yaml_serde::Value = map.next_value()?;
            before_kind.insert(yaml_serde::Value::String(key), value);
        }
    }
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
