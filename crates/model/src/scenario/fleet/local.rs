//! `fleet: kind: local`: one supervised chromedriver on this machine.

use super::{binary, DEFAULT_CHROMEDRIVER, DEFAULT_CHROMIUM};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LocalFleetSpec {
    /// chromedriver binary [default: /usr/bin/chromedriver].
    #[serde(default)]
    pub chromedriver: Option<String>,
    /// Chromium binary [default: /usr/lib/chromium/chromium].
    #[serde(default)]
    pub chromium: Option<String>,
    /// Sessions created at the same time [default: 2].
    #[serde(default)]
    pub max_parallel_starts: Option<u32>,
}

/// Sessions a local fleet creates at once unless told otherwise: more only slows each
/// start on a small machine.
pub(crate) const DEFAULT_MAX_PARALLEL: u32 = 2;

/// `fleet: kind: local`, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalFleetPlan {
    pub chromedriver: PathBuf,
    pub chromium: PathBuf,
    pub max_parallel_starts: usize,
}

impl Default for LocalFleetPlan {
    fn default() -> Self {
        LocalFleetSpec::default()
            .plan()
            .expect("the defaults are valid")
    }
}

impl LocalFleetSpec {
    pub fn plan(&self) -> Result<LocalFleetPlan, (String, String)> {
        if self.max_parallel_starts == Some(0) {
            return Err(("max_parallel_starts".into(), "must be at least 1".into()));
        }
        Ok(LocalFleetPlan {
            chromedriver: binary(&self.chromedriver, DEFAULT_CHROMEDRIVER),
            chromium: binary(&self.chromium, DEFAULT_CHROMIUM),
            max_parallel_starts: self.max_parallel_starts.unwrap_or(DEFAULT_MAX_PARALLEL) as usize,
        })
    }
}
