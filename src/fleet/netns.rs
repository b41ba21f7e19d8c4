//! Fleet `netns`: one machine emulating many hosts. Each viewer runs in its own network
//! namespace (slot) with its own IPv6 address and a tc-shaped link, so HTTP and WebRTC are
//! shaped alike; the target runs in a namespace of its own on the same bridge (traffic
//! between the root namespace and the slots is not relied on).
//!
//! One ChromeDriver runs in the root namespace; each viewer's "browser binary" is a wrapper
//! that enters the viewer's slot, and DevTools goes over `--remote-debugging-pipe`.

use crate::netns::gc::OWNER_DIR;
use crate::netns::preflight::HostTools;
use crate::netns::wrapper::{slot_chromium_args, write_chromium_wrapper};
use crate::netns::{check_host, Shaping, SlotInfo, SlotNetwork, SystemHostEnv};
use crate::rawdata::FleetDescription;
use crate::scenario::{NetworkProfile, Plan, ShapingLayer, ViewerPlan};
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::chromedriver::{self, ChromeDriver, DEFAULT_CHROMEDRIVER, DEFAULT_CHROMIUM};
use super::{Fleet, TargetPlacement, ViewerSlot};

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

impl NetnsFleetSpec {
    pub fn validate(&self, viewers: u32) -> Result<(), (String, String)> {
        if let Some(prefix) = &self.prefix {
            crate::netns::slots::parse_prefix(prefix)
                .map_err(|err| ("prefix".to_string(), err.to_string()))?;
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
        Ok(())
    }
}

/// The tc shaping a viewer gets: none when the profile asks for CDP only.
pub fn tc_shaping(profile: Option<&NetworkProfile>) -> Shaping {
    match profile {
        Some(p) if p.apply != Some(ShapingLayer::Cdp) => Shaping {
            down_kbit: p.download_kbps.unwrap_or(0),
            up_kbit: p.upload_kbps.unwrap_or(0),
            delay_ms: p.latency_ms.unwrap_or(0),
        },
        _ => Shaping::default(),
    }
}

/// A running `netns` fleet: the bridge, the target's namespace, ChromeDriver, the slots.
pub struct NetnsFleet {
    net: SlotNetwork,
    tools: HostTools,
    chromium: PathBuf,
    server: SlotInfo,
    target_port: u16,
    netem: bool,
    dir: tempfile::TempDir,
    chromedriver: std::sync::Arc<ChromeDriver>,
    open: Mutex<BTreeMap<u32, SlotInfo>>,
    shut: AtomicBool,
}

impl NetnsFleet {
    /// Checks the host, makes the bridge and the target's namespace, starts ChromeDriver.
    /// On error everything made so far is removed again.
    pub async fn start(spec: &NetnsFleetSpec) -> anyhow::Result<Self> {
        let tools = check_host(&SystemHostEnv)?;
        let chromium = PathBuf::from(spec.chromium.as_deref().unwrap_or(DEFAULT_CHROMIUM));
        let driver_binary =
            PathBuf::from(spec.chromedriver.as_deref().unwrap_or(DEFAULT_CHROMEDRIVER));
        chromedriver::preflight(&driver_binary, &chromium)?;
        let tag: u16 = rand::random();
        let name_prefix = format!("vf{tag:04x}-");
        let prefix = spec
            .prefix
            .clone()
            .unwrap_or_else(|| format!("fd76:6600:{tag:x}::/64"));
        let net = SlotNetwork::new(
            &prefix,
            &name_prefix,
            tools.bash.clone(),
            Some(std::process::id()),
        )?;
        let server = net
            .up(0, 1, Shaping::default())
            .await
            .context("cannot make the target's namespace")?
            .remove(0);
        let rest = async {
            let dir = tempfile::Builder::new()
                .prefix("viewerfleet-netns-")
                .tempdir()?;
            let driver = ChromeDriver::start(&driver_binary).await?;
            anyhow::Ok((dir, driver))
        };
        let (dir, chromedriver) = match rest.await {
            Ok(parts) => parts,
            Err(err) => {
                let _ = net.down(0, 1).await;
                return Err(err);
            }
        };
        Ok(Self {
            netem: probe_netem(&tools, &server.name).await,
            dir,
            net,
            tools,
            chromium,
            server,
            target_port: spec.target_port.unwrap_or(8080),
            chromedriver: std::sync::Arc::new(chromedriver),
            open: Mutex::new(BTreeMap::new()),
            shut: AtomicBool::new(false),
        })
    }

    /// The target's namespace (refsite and tracker run there).
    pub fn server_namespace(&self) -> &str {
        &self.server.name
    }

    /// `http://[addr]:port`, the origin viewers treat as secure.
    pub fn target_origin(&self) -> String {
        format!("http://[{}]:{}", self.server.address, self.target_port)
    }

    /// Whether this kernel has netem (added latency); without it only rates are shaped.
    pub fn netem_available(&self) -> bool {
        self.netem
    }

    /// What was set up for viewer `index`, while its slot is open.
    pub fn slot_info(&self, viewer_index: u32) -> Option<SlotInfo> {
        self.open.lock().unwrap().get(&(viewer_index + 1)).cloned()
    }

    /// The slot prefix (e.g. `fd76:6600:1a2b::/64`) and name prefix (e.g. `vf1a2b-`).
    pub fn names(&self) -> (&str, &str) {
        (self.net.prefix(), self.net.name_prefix())
    }

    fn describe_tc(&self) -> String {
        let delay = if self.netem {
            "latency with netem (half each way)"
        } else {
            "latency not applied by tc (this kernel has no netem)"
        };
        format!(
            "tc tbf on each slot's veth (download: bridge side, upload: inside the slot); {delay}"
        )
    }

    fn teardown_blocking(&self) {
        if self.shut.swap(true, Ordering::SeqCst) {
            return;
        }
        // Slots' `down` ends their browsers; chromedriver goes on the runtime if one is left
        // (it also has PDEATHSIG, so it never outlives this process).
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let driver = self.chromedriver.clone();
            runtime.spawn(async move { driver.shutdown().await });
        }
        let indices: Vec<u32> = self.open.lock().unwrap().keys().copied().collect();
        for index in indices.into_iter().chain([0]) {
            if let Err(err) = self.net.down_blocking(index, 1) {
                tracing::warn!("netns fleet: removing slot {index}: {err}");
            }
        }
    }
}

impl Drop for NetnsFleet {
    fn drop(&mut self) {
        self.teardown_blocking();
    }
}

#[async_trait::async_trait]
impl Fleet for NetnsFleet {
    fn description(&self, plan: &Plan) -> FleetDescription {
        let profiles: Vec<&NetworkProfile> = plan
            .network
            .iter()
            .chain(plan.alt_network.iter().map(|(_, p)| p))
            .collect();
        let limits = |p: &&NetworkProfile| p.download_kbps.is_some() || p.upload_kbps.is_some();
        let tc = profiles
            .iter()
            .any(|p| limits(p) && p.apply != Some(ShapingLayer::Cdp));
        let cdp = profiles
            .iter()
            .any(|p| limits(p) && matches!(p.apply, Some(ShapingLayer::Cdp | ShapingLayer::Both)));
        let shaping = match (tc, cdp) {
            (true, true) => format!("{} plus CDP network conditions", self.describe_tc()),
            (true, false) => self.describe_tc(),
            (false, true) => "CDP network conditions only (HTTP; WebRTC is not shaped)".into(),
            (false, false) => "none".into(),
        };
        let mut notes = vec![format!(
            "Each viewer runs in its own network namespace with its own IPv6 address from {}; the target runs in namespace {} at [{}]",
            self.net.prefix(), self.server.name, self.server.address
        )];
        if tc && !self.netem && profiles.iter().any(|p| p.latency_ms.is_some()) {
            notes.push(
                "latency_ms was not applied by tc: this kernel has no netem qdisc".to_string(),
            );
        }
        FleetDescription {
            kind: "netns".into(),
            own_address_per_viewer: true,
            http_shaped: tc || cdp,
            p2p_shaped: tc,
            shaping,
            notes,
        }
    }

    fn target_placement(&self) -> TargetPlacement {
        TargetPlacement {
            listen: SocketAddr::new(IpAddr::V6(self.server.address), self.target_port),
            netns: Some(self.server.name.clone()),
        }
    }

    async fn open_viewer(&self, viewer: &ViewerPlan) -> anyhow::Result<ViewerSlot> {
        if self.shut.load(Ordering::SeqCst) {
            anyhow::bail!("the netns fleet is shut down");
        }
        if viewer.index >= MAX_VIEWERS {
            anyhow::bail!(
                "viewer {}: the netns fleet makes at most {MAX_VIEWERS} slots",
                viewer.index
            );
        }
        let index = viewer.index + 1;
        let shaping = tc_shaping(viewer.network.as_ref());
        let info = self
            .net
            .up(index, 1, shaping)
            .await
            .with_context(|| format!("viewer {}: cannot make its slot", viewer.index))?
            .remove(0);
        self.open.lock().unwrap().insert(index, info.clone());
        let wrapper =
            write_chromium_wrapper(self.dir.path(), &info.name, &self.tools.ip, &self.chromium)
                .with_context(|| {
                    format!("viewer {}: cannot write the Chromium wrapper", viewer.index)
                })?;
        tracing::debug!("netns slot {}", info.describe());
        Ok(ViewerSlot {
            webdriver_url: self.chromedriver.url(),
            chrome_binary: Some(wrapper.to_string_lossy().into_owned()),
            extra_args: slot_chromium_args(&self.target_origin()),
            node: info.name.clone(),
            address: Some(info.address.to_string()),
            tc_shaped: info.rate_shaped(),
        })
    }

    async fn close_viewer(&self, slot: &ViewerSlot) {
        let Some(index) = slot
            .node
            .strip_prefix(self.net.name_prefix())
            .and_then(|i| i.parse::<u32>().ok())
            .filter(|i| *i > 0)
        else {
            return;
        };
        if self.open.lock().unwrap().remove(&index).is_none() {
            return;
        }
        if let Err(err) = self.net.down(index, 1).await {
            tracing::warn!("netns fleet: removing slot {}: {err}", slot.node);
        }
        let _ = std::fs::remove_file(self.dir.path().join(format!("chromium-{}", slot.node)));
    }

    async fn shutdown(&self) -> anyhow::Result<()> {
        if self.shut.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        self.chromedriver.shutdown().await;
        let indices: Vec<u32> = std::mem::take(&mut *self.open.lock().unwrap())
            .into_keys()
            .collect();
        let mut first_error = None;
        for index in indices.into_iter().chain([0]) {
            if let Err(err) = self.net.down(index, 1).await {
                first_error.get_or_insert(err);
            }
        }
        match first_error {
            Some(err) => Err(anyhow::Error::from(err).context(format!(
                "netns fleet: some slots could not be removed; `viewerfleet gc --local` removes them (owner records in {OWNER_DIR})"
            ))),
            None => Ok(()),
        }
    }
}

/// Tries a netem qdisc on the target namespace's loopback.
async fn probe_netem(tools: &HostTools, ns: &str) -> bool {
    let tc = tools.tc.to_string_lossy().into_owned();
    let added = tokio::process::Command::new(&tools.ip)
        .args([
            "netns", "exec", ns, &tc, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms",
        ])
        .output()
        .await
        .is_ok_and(|o| o.status.success());
    if added {
        let _ = tokio::process::Command::new(&tools.ip)
            .args([
                "netns", "exec", ns, &tc, "qdisc", "del", "dev", "lo", "root",
            ])
            .output()
            .await;
    }
    added
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdp_only_profiles_get_no_tc() {
        let mut profile = NetworkProfile {
            download_kbps: Some(2000),
            upload_kbps: Some(300),
            latency_ms: Some(500),
            apply: None,
        };
        assert_eq!(
            tc_shaping(Some(&profile)),
            Shaping {
                down_kbit: 2000,
                up_kbit: 300,
                delay_ms: 500
            }
        );
        profile.apply = Some(ShapingLayer::Cdp);
        assert!(tc_shaping(Some(&profile)).is_none());
        profile.apply = Some(ShapingLayer::Both);
        assert_eq!(tc_shaping(Some(&profile)).up_kbit, 300);
        assert!(tc_shaping(None).is_none());
    }

    #[test]
    fn spec_validation_names_fields() {
        let spec = NetnsFleetSpec {
            prefix: Some("fd00::1/64".into()),
            ..Default::default()
        };
        let (field, message) = spec.validate(4).unwrap_err();
        assert_eq!(field, "prefix");
        assert!(message.contains("::"), "{message}");
        let spec = NetnsFleetSpec {
            target_port: Some(0),
            ..Default::default()
        };
        assert_eq!(spec.validate(4).unwrap_err().0, "target_port");
        assert!(NetnsFleetSpec::default().validate(MAX_VIEWERS + 1).is_err());
        assert!(NetnsFleetSpec::default().validate(8).is_ok());
    }
}
