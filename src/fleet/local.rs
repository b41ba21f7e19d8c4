//! Fleet `local`: chromedriver processes on this machine. Every viewer shares the host's
//! address, and only HTTP can be throttled (CDP); the report says so.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LocalFleetSpec {
    /// chromedriver binary [default: /usr/bin/chromedriver, then PATH].
    #[serde(default)]
    pub chromedriver: Option<String>,
    /// Chromium binary [default: /usr/lib/chromium/chromium].
    #[serde(default)]
    pub chromium: Option<String>,
    /// Sessions created at the same time [default: 2].
    #[serde(default)]
    pub max_parallel_starts: Option<u32>,
}

impl LocalFleetSpec {
    pub fn validate(&self, _viewers: u32) -> Result<(), (String, String)> {
        if self.max_parallel_starts == Some(0) {
            return Err(("max_parallel_starts".into(), "must be at least 1".into()));
        }
        Ok(())
    }
}
