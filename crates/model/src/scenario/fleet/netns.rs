//! `fleet: kind: netns`: viewers in network namespaces on this machine, each its own IPv6
//! address and tc-shaped link.

use super::{binary, DEFAULT_CHROMEDRIVER, DEFAULT_CHROMIUM};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Most viewers one `netns` fleet makes (interface names are limited to 15 characters).
pub const MAX_VIEWERS: u32 = 9999;

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NetnsFleetSpec {
    /// IPv6 prefix for the slots, ending in `::`, /48../112, e.g. `fd00:5f::/64`
    /// [default: a random ULA /64 per run]. `::1` is the bridge, `::2` the target.
    #[serde(default)]
    pub prefix: Option<String>,
    /// chromedriver binary [default: /usr/bin/chromedriver, then PATH].
    #[serde(default)]
    pub chromedriver: Option<String>,
    /// Chromium binary run inside each slot [default: /usr/lib/chromium/chromium].
    #[serde(default)]
    pub chromium: Option<String>,
    /// Port the target listens on inside its namespace [default: 8080].
    #[serde(default)]
    pub target_port: Option<u16>,
}

/// Port the target listens on inside its namespace unless told otherwise.
pub(crate) const DEFAULT_TARGET_PORT: u16 = 8080;

/// `fleet: kind: netns`, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct NetnsFleetPlan {
    /// The slots' prefix; `None`: a random ULA /64 per run.
    pub prefix: Option<String>,
    pub chromedriver: PathBuf,
    pub chromium: PathBuf,
    pub target_port: u16,
    /// The emulated internet (with `viewers.networks`): the bridge also carries the public
    /// IPv4 segment, the target runs a STUN server and viewers reach it by name, each over
    /// a family its slot has; slots sit behind their class's NAT.
    pub internet: bool,
}

impl Default for NetnsFleetPlan {
    fn default() -> Self {
        NetnsFleetSpec::default()
            .plan(1)
            .expect("the defaults are valid")
    }
}

impl NetnsFleetSpec {
    pub fn plan(&self, viewers: u32) -> Result<NetnsFleetPlan, (String, String)> {
        if let Some(prefix) = &self.prefix {
            crate::net::parse_prefix(prefix).map_err(|err| ("prefix".to_string(), err))?;
        }
        if viewers > MAX_VIEWERS {
            return Err((
                "kind".into(),
                format!("the netns fleet makes at most {MAX_VIEWERS} slots on one machine"),
            ));
        }
        if self.target_port == Some(0) {
            return Err((
                "target_port".into(),
                "must be a fixed port (1-65535): the viewers' insecure-origin flag names it".into(),
            ));
        }
        Ok(NetnsFleetPlan {
            prefix: self.prefix.clone(),
            chromedriver: binary(&self.chromedriver, DEFAULT_CHROMEDRIVER),
            chromium: binary(&self.chromium, DEFAULT_CHROMIUM),
            target_port: self.target_port.unwrap_or(DEFAULT_TARGET_PORT),
            internet: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_validation_names_fields() {
        let spec = NetnsFleetSpec {
            prefix: Some("fd00::1/64".into()),
            ..Default::default()
        };
        let (field, message) = spec.plan(4).unwrap_err();
        assert_eq!(field, "prefix");
        assert!(message.contains("::"), "{message}");
        let spec = NetnsFleetSpec {
            target_port: Some(0),
            ..Default::default()
        };
        assert_eq!(spec.plan(4).unwrap_err().0, "target_port");
        assert!(NetnsFleetSpec::default().plan(MAX_VIEWERS + 1).is_err());
        assert!(NetnsFleetSpec::default().plan(8).is_ok());
    }
}
