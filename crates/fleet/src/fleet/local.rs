//! Fleet `local`: one supervised chromedriver on this machine. Every viewer shares the
//! host's address, and only HTTP can be throttled (CDP network conditions do nothing to
//! WebRTC); the report says so.

use super::chromedriver::{self, ChromeDriver};
use super::{Fleet, StartPolicy, TargetPlacement};
use crate::model::kinds::FleetKind;
use crate::model::rawdata::FleetDescription;
use crate::model::scenario::fleet::LocalFleetPlan;
use crate::model::scenario::{Plan, ViewerPlan};
use crate::viewer::{TcCoverage, ViewerSlot};

pub struct LocalFleet {
    driver: ChromeDriver,
    chromium: String,
    max_parallel: usize,
}

impl LocalFleet {
    pub async fn start(plan: &LocalFleetPlan) -> anyhow::Result<Self> {
        chromedriver::preflight(&plan.chromedriver, &plan.chromium)?;
        let driver = ChromeDriver::start(&plan.chromedriver).await?;
        Ok(Self {
            driver,
            chromium: plan.chromium.display().to_string(),
            max_parallel: plan.max_parallel_starts,
        })
    }
}

#[async_trait::async_trait]
impl Fleet for LocalFleet {
    fn start_policy(&self) -> StartPolicy {
        StartPolicy {
            max_parallel: self.max_parallel,
            ..StartPolicy::default()
        }
    }

    fn description(&self, plan: &Plan) -> FleetDescription {
        let t = super::throttling(plan, None);
        FleetDescription {
            kind: FleetKind::Local,
            own_address_per_viewer: false,
            http_shaped: t.http,
            p2p_shaped: t.p2p,
            shaping: t.text,
            throttling: t.mode,
            notes: vec![
                "All viewers share this machine's address: platforms that deduplicate views by address count them as one viewer.".into(),
                "Peers on one host talk over loopback: no per-viewer link lies between them unless the browser emulates one.".into(),
                "Viewers and the target share the same CPU cores.".into(),
            ],
            packing: None,
            browsers_on_this_host: Some(true),
        }
    }

    fn target_placement(&self) -> TargetPlacement {
        TargetPlacement {
            listen: "127.0.0.1:0".parse().expect("valid address"),
            netns: None,
            internet: None,
            reports_from: Vec::new(),
        }
    }

    async fn open_viewer(&self, _viewer: &ViewerPlan) -> anyhow::Result<ViewerSlot> {
        Ok(ViewerSlot {
            webdriver_url: self.driver.url(),
            grid_auth: None,
            chrome_binary: Some(self.chromium.clone()),
            extra_args: vec!["--remote-debugging-pipe".into()],
            node: "local".into(),
            address: None,
            public_addresses: Vec::new(),
            nat: Some(crate::model::kinds::NatKind::None),
            tc: TcCoverage::NONE,
            viewers: 1,
        })
    }

    async fn close_viewer(&self, _slot: &ViewerSlot) {}

    fn runs_local_processes(&self) -> bool {
        true
    }

    fn process_prefix(&self, _slot: &ViewerSlot) -> Option<Vec<String>> {
        Some(Vec::new())
    }

    async fn shutdown(&self) -> anyhow::Result<()> {
        self.driver.shutdown().await;
        Ok(())
    }
}
