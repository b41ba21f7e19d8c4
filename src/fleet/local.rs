//! Fleet `local`: one supervised chromedriver on this machine. Every viewer shares the
//! host's address, and only HTTP can be throttled (CDP network conditions do nothing to
//! WebRTC); the report says so.

use super::chromedriver::{self, ChromeDriver, DEFAULT_CHROMEDRIVER, DEFAULT_CHROMIUM};
use super::{Fleet, TargetPlacement, ViewerSlot};
use crate::rawdata::FleetDescription;
use crate::scenario::{Plan, ViewerPlan};
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

impl LocalFleetSpec {
    pub fn validate(&self, _viewers: u32) -> Result<(), (String, String)> {
        if self.max_parallel_starts == Some(0) {
            return Err(("max_parallel_starts".into(), "must be at least 1".into()));
        }
        Ok(())
    }
}

pub struct LocalFleet {
    driver: ChromeDriver,
    chromium: String,
}

impl LocalFleet {
    pub async fn start(spec: &LocalFleetSpec) -> anyhow::Result<Self> {
        let driver_path =
            PathBuf::from(spec.chromedriver.as_deref().unwrap_or(DEFAULT_CHROMEDRIVER));
        let chromium = spec
            .chromium
            .as_deref()
            .unwrap_or(DEFAULT_CHROMIUM)
            .to_string();
        chromedriver::preflight(&driver_path, chromium.as_ref())?;
        let driver = ChromeDriver::start(&driver_path).await?;
        Ok(Self { driver, chromium })
    }
}

#[async_trait::async_trait]
impl Fleet for LocalFleet {
    fn description(&self, plan: &Plan) -> FleetDescription {
        let shaped = plan.network.is_some();
        FleetDescription {
            kind: "local".into(),
            own_address_per_viewer: false,
            http_shaped: shaped,
            p2p_shaped: false,
            shaping: if shaped {
                "CDP network conditions (HTTP only)".into()
            } else {
                "none".into()
            },
            notes: vec![
                "All viewers share this machine's address: platforms that deduplicate views by address count them as one viewer.".into(),
                "P2P traffic is not throttled: CDP network conditions do not apply to WebRTC, and peers on one host talk over loopback.".into(),
                "Viewers and the target share the same CPU cores.".into(),
            ],
        }
    }

    fn target_placement(&self) -> TargetPlacement {
        TargetPlacement {
            listen: "127.0.0.1:0".parse().expect("valid address"),
            netns: None,
        }
    }

    async fn open_viewer(&self, _viewer: &ViewerPlan) -> anyhow::Result<ViewerSlot> {
        Ok(ViewerSlot {
            webdriver_url: self.driver.url(),
            chrome_binary: Some(self.chromium.clone()),
            extra_args: vec!["--remote-debugging-pipe".into()],
            node: "local".into(),
            address: None,
            tc_shaped: false,
        })
    }

    async fn close_viewer(&self, _slot: &ViewerSlot) {}

    async fn shutdown(&self) -> anyhow::Result<()> {
        self.driver.shutdown().await;
        Ok(())
    }
}
