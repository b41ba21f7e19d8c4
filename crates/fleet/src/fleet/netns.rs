//! Fleet `netns`: one machine emulating many hosts. Each viewer runs in its own network
//! namespace (slot) with its own IPv6 address and a tc-shaped link, so HTTP and WebRTC are
//! shaped alike; the target runs in a namespace of its own on the same bridge (traffic
//! between the root namespace and the slots is not relied on).
//!
//! One ChromeDriver runs in the root namespace; each viewer's "browser binary" is a wrapper
//! that enters the viewer's slot, and DevTools goes over `--remote-debugging-pipe`.

use crate::model::isolation::BrowserIsolation;
use crate::model::kinds::FleetKind;
use crate::model::kinds::Throttling;
use crate::model::rawdata::FleetDescription;
use crate::model::scenario::fleet::netns::{NetnsFleetPlan, MAX_VIEWERS};
use crate::model::scenario::packing::shared_link;
use crate::model::scenario::{BrowserPlan, LinkProfile, NetworkProfile, Plan, ViewerPlan};
use crate::netns::gc::OWNER_DIR;
use crate::netns::preflight::HostTools;
use crate::netns::wrapper::{probe_isolation, slot_chromium_args, write_chromium_wrapper};
use crate::netns::{
    check_host, SlotAccess, SlotInfo, SlotNetwork, SystemHostEnv, EMULATED_PUBLIC_IPV4,
};
use anyhow::Context;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::chromedriver::{self, ChromeDriver};
use super::{Fleet, TargetPlacement};
use crate::model::kinds::IpStack;
use crate::target::TargetInternet;
use crate::viewer::{TcCoverage, ViewerSlot};

/// The name viewers open the target at on the emulated internet (`.test`: reserved, RFC
/// 2606); each browser maps it to an address with `--host-resolver-rules`.
pub(crate) const TARGET_HOST: &str = "target.viewerfleet.test";

/// The link tc gives a viewer: its profile's, or an unlimited one when the profile asks for
/// browser throttling only.
pub(crate) fn tc_link(profile: Option<&NetworkProfile>) -> LinkProfile {
    match profile {
        // Unset is this fleet's best: tc (a plan fills it in; direct users of the fleet may not).
        Some(p) if p.apply.is_none_or(|a| a == Throttling::Tc) => p.link,
        _ => LinkProfile::UNLIMITED,
    }
}

/// The link tc gives the slot of a browser holding `viewers`: their tc links pooled by the
/// model's one rule (`packing::shared_link`: rates summed, the largest latency).
pub(crate) fn browser_link(viewers: &[ViewerPlan]) -> LinkProfile {
    shared_link(viewers.iter().map(|v| tc_link(v.network.as_ref())))
}

/// A running `netns` fleet: the bridge, the target's namespace, ChromeDriver, the slots.
pub struct NetnsFleet {
    net: SlotNetwork,
    tools: HostTools,
    chromium: PathBuf,
    server: SlotInfo,
    target_port: u16,
    /// The emulated internet (`viewers.networks`): see `NetnsFleetPlan::internet`.
    internet: bool,
    netem: bool,
    dir: tempfile::TempDir,
    chromedriver: std::sync::Arc<ChromeDriver>,
    open: Mutex<BTreeMap<u32, SlotInfo>>,
    shut: AtomicBool,
    /// How the slots' browsers run (their user, Chromium's sandbox), for the report.
    isolation: Option<BrowserIsolation>,
}

impl NetnsFleet {
    /// Checks the host, makes the bridge and the target's namespace, starts ChromeDriver.
    /// On error everything made so far is removed again.
    pub async fn start(spec: &NetnsFleetPlan) -> anyhow::Result<Self> {
        let tools = check_host(&SystemHostEnv)?;
        let chromium = spec.chromium.clone();
        let driver_binary = spec.chromedriver.clone();
        chromedriver::preflight(&driver_binary, &chromium)?;
        let tag: u16 = rand::random();
        let name_prefix = format!("vf{tag:04x}-");
        let prefix = spec
            .prefix
            .clone()
            .unwrap_or_else(|| format!("fd76:6600:{tag:x}::/64"));
        let mut net = SlotNetwork::new(
            &prefix,
            &name_prefix,
            tools.bash.clone(),
            Some(std::process::id()),
        )?;
        let mut server_access = SlotAccess::default();
        if spec.internet {
            net = net.with_ipv4(EMULATED_PUBLIC_IPV4);
            server_access.stack = Some(IpStack::Dual);
        }
        let server = net
            .up_with(0, 1, LinkProfile::UNLIMITED, server_access)
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
        // As root, the first probe makes the browsers' user, before any browser starts.
        let isolation = tokio::task::spawn_blocking(probe_isolation)
            .await
            .ok()
            .flatten();
        Ok(Self {
            isolation,
            netem: probe_netem(&tools, &server.name).await,
            dir,
            net,
            tools,
            chromium,
            server,
            target_port: spec.target_port,
            internet: spec.internet,
            chromedriver: std::sync::Arc::new(chromedriver),
            open: Mutex::new(BTreeMap::new()),
            shut: AtomicBool::new(false),
        })
    }

    /// The target namespace's IPv6 address (it always has one).
    fn server_address(&self) -> std::net::Ipv6Addr {
        self.server.address.unwrap_or_else(|| self.net.address(0))
    }

    /// `http://[addr]:port` (on the emulated internet `http://<TARGET_HOST>:port`), the
    /// origin viewers treat as secure.
    pub fn target_origin(&self) -> String {
        if self.internet {
            format!("http://{TARGET_HOST}:{}", self.target_port)
        } else {
            format!("http://[{}]:{}", self.server_address(), self.target_port)
        }
    }

    /// Chromium arguments for a browser in `slot`: the target's origin treated as secure
    /// and, on the emulated internet, the target's name resolved to an address of a family
    /// the slot has (as a dual-stack resolver would prefer IPv6).
    fn browser_args(&self, slot: &SlotInfo) -> anyhow::Result<Vec<String>> {
        let mut args = slot_chromium_args(&self.target_origin());
        if self.internet {
            let reach = slot
                .reaches(self.server.address, self.server.ipv4)
                .with_context(|| {
                    format!("slot {} has no address family the target has", slot.name)
                })?;
            let host = match reach {
                IpAddr::V6(v6) => format!("[{v6}]"),
                IpAddr::V4(v4) => v4.to_string(),
            };
            args.push(format!("--host-resolver-rules=MAP {TARGET_HOST} {host}"));
        }
        Ok(args)
    }

    /// The slot prefix (e.g. `fd76:6600:1a2b::/64`) and name prefix (e.g. `vf1a2b-`).
    pub fn names(&self) -> (&str, &str) {
        (self.net.prefix(), self.net.name_prefix())
    }

    fn describe_tc(&self) -> String {
        let delay = if self.netem {
            "latency with netem (half each way)"
        } else {
            "latency applied in the browser to HTTP and WebSocket requests only (this kernel has no netem)"
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
        let t = super::throttling(plan, Some(&self.describe_tc()));
        let tc = t.mode == Some(Throttling::Tc);
        let profiles = plan.all_profiles();
        let who = if plan.per_browser > 1 {
            "browser (with its viewers)"
        } else {
            "viewer"
        };
        let mut notes = if self.internet {
            internet_notes(plan, who, &self.net, &self.server)
        } else {
            vec![format!(
                "Each {who} runs in its own network namespace with its own IPv6 address from {}; the target runs in namespace {} at [{}]",
                self.net.prefix(), self.server.name, self.server_address()
            )]
        };
        if tc && !self.netem && profiles.iter().any(|p| p.link.latency_ms.is_some()) {
            notes.push(
                "latency_ms was not applied by tc (this kernel has no netem qdisc): it was applied to HTTP and WebSocket requests in the browser instead, so WebRTC ran without it".to_string(),
            );
        }
        notes.push(self.isolation.as_ref().map_or_else(
            || "How the browsers were isolated (their user, Chromium's sandbox) could not be checked".to_string(),
            |i| i.sentence(),
        ));
        FleetDescription {
            kind: FleetKind::Netns,
            own_address_per_viewer: true,
            http_shaped: t.http,
            p2p_shaped: t.p2p,
            shaping: t.text,
            throttling: t.mode,
            notes,
            packing: None,
            browsers_on_this_host: Some(true),
        }
    }

    fn target_placement(&self) -> TargetPlacement {
        let v6 = IpAddr::V6(self.server_address());
        let internet = self.internet.then(|| {
            let v4 = self.server.ipv4.map(IpAddr::V4);
            TargetInternet {
                also_listen: v4
                    .map(|ip| SocketAddr::new(ip, self.target_port))
                    .into_iter()
                    .collect(),
                stun: [Some(v6), v4]
                    .into_iter()
                    .flatten()
                    .map(|ip| SocketAddr::new(ip, crate::stun::DEFAULT_PORT))
                    .collect(),
                viewer_host: Some(TARGET_HOST.to_string()),
            }
        });
        TargetPlacement {
            listen: SocketAddr::new(v6, self.target_port),
            netns: Some(self.server.name.clone()),
            internet,
            reports_from: Vec::new(),
        }
    }

    async fn open_viewer(&self, viewer: &ViewerPlan) -> anyhow::Result<ViewerSlot> {
        self.open_browser(&BrowserPlan::single(viewer)).await
    }

    /// One slot per browser: slot `browser + 1`, shaped for all of its viewers.
    async fn open_browser(&self, browser: &BrowserPlan) -> anyhow::Result<ViewerSlot> {
        if self.shut.load(Ordering::SeqCst) {
            anyhow::bail!("the netns fleet is shut down");
        }
        let who = match browser.viewers.as_slice() {
            [one] => format!("viewer {}", one.index),
            _ => format!(
                "browser {} (viewers {})",
                browser.index,
                browser.viewer_range()
            ),
        };
        if browser.index >= MAX_VIEWERS {
            anyhow::bail!("{who}: the netns fleet makes at most {MAX_VIEWERS} slots");
        }
        let index = browser.index + 1;
        let link = browser_link(&browser.viewers);
        let access = match (self.internet, browser.viewers.first()) {
            (true, Some(first)) => SlotAccess {
                nat: first.access.nat,
                stack: Some(first.access.stack.unwrap_or(IpStack::Dual)),
                alternate: false,
            },
            _ => SlotAccess::default(),
        };
        let info = self
            .net
            .up_with(index, 1, link, access)
            .await
            .with_context(|| format!("{who}: cannot make its slot"))?
            .remove(0);
        self.open.lock().unwrap().insert(index, info.clone());
        if self.shut.load(Ordering::SeqCst) {
            // `shutdown` ran while this slot was being made: it did not see it.
            self.open.lock().unwrap().remove(&index);
            let _ = self.net.down(index, 1).await;
            anyhow::bail!("the netns fleet is shut down");
        }
        let wrapper =
            write_chromium_wrapper(self.dir.path(), &info.name, &self.tools.ip, &self.chromium)
                .with_context(|| format!("{who}: cannot write the Chromium wrapper"))?;
        tracing::debug!("netns slot {}", info.describe());
        Ok(ViewerSlot {
            webdriver_url: self.chromedriver.url(),
            grid_auth: None,
            chrome_binary: Some(wrapper.to_string_lossy().into_owned()),
            extra_args: self.browser_args(&info)?,
            node: info.name.clone(),
            address: info
                .address
                .map(|a| a.to_string())
                .or(info.ipv4.map(|a| a.to_string())),
            public_addresses: info
                .address
                .map(|a| a.to_string())
                .into_iter()
                .chain(info.public_ipv4.map(|a| a.to_string()))
                .collect(),
            nat: Some(info.nat),
            tc: TcCoverage {
                rates: info.rate_shaped(),
                latency: info.delay_applied(),
            },
            viewers: browser.viewers.len() as u32,
        })
    }

    /// Not on the emulated internet: there the target is a name only browsers map (their
    /// host-resolver rules), and each page's address family is chosen per slot.
    fn runs_local_processes(&self) -> bool {
        !self.internet
    }

    fn process_prefix(&self, slot: &ViewerSlot) -> Option<Vec<String>> {
        self.runs_local_processes().then(|| {
            vec![
                self.tools.ip.to_string_lossy().into_owned(),
                "netns".into(),
                "exec".into(),
                slot.node.clone(),
            ]
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

/// What the emulated internet was: its address space, where the target and its STUN server
/// were, each class's NAT and families, and what is not emulated.
fn internet_notes(plan: &Plan, who: &str, net: &SlotNetwork, server: &SlotInfo) -> Vec<String> {
    let mut notes = vec![format!(
        "Emulated internet: each {who} runs in its own network namespace; the bridge carries IPv6 {} and the public IPv4 {}; the target (and its STUN server, port {}) runs in namespace {} at [{}] and {}, and viewers open it as {TARGET_HOST}, each over IPv6 where its slot has it, else IPv4. No TURN relay was offered.",
        net.prefix(),
        net.ipv4().unwrap_or("-"),
        crate::stun::DEFAULT_PORT,
        server.name,
        server.address.map(|a| a.to_string()).unwrap_or_default(),
        server.ipv4.map(|a| a.to_string()).unwrap_or_default(),
    )];
    for class in plan.networks.iter().filter(|_| plan.emulates_internet()) {
        let nat = match class.nat {
            crate::model::kinds::NatKind::None => "public addresses".to_string(),
            crate::model::kinds::NatKind::Home => "each behind its own home router (NAT44: endpoint-independent mapping, address- and port-dependent filtering; IPv6 stateful firewall)".to_string(),
            crate::model::kinds::NatKind::Symmetric => "each behind a symmetric NAT (a new port per destination; address- and port-dependent filtering; IPv6 stateful firewall)".to_string(),
            crate::model::kinds::NatKind::Cgnat => "each behind a home router whose WAN sits behind one carrier-grade NAT shared by the class's viewers (no hairpinning)".to_string(),
        };
        notes.push(format!(
            "Class {} ({:.0}% of the browsers): {nat}, {}",
            class.name,
            class.share * 100.0,
            match class.stack {
                IpStack::Dual => "IPv4 and IPv6",
                IpStack::Ipv4 => "IPv4 only",
                IpStack::Ipv6 => "IPv6 only",
            }
        ));
    }
    notes.push("Not emulated: jitter and packet loss (this kernel has no netem; tbf drops only when its queue is full).".to_string());
    notes
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
    use crate::model::scenario::packing::link_profile;

    fn profile(down: u32, up: u32, latency: u32, apply: Throttling) -> NetworkProfile {
        NetworkProfile {
            link: LinkProfile {
                download_kbps: Some(down),
                upload_kbps: Some(up),
                latency_ms: Some(latency),
            },
            apply: Some(apply),
        }
    }

    fn viewer(index: u32, network: NetworkProfile) -> ViewerPlan {
        ViewerPlan {
            index,
            start_after: std::time::Duration::ZERO,
            p2p: true,
            network: Some(network),
            browser: 0,
            access: Default::default(),
        }
    }

    #[test]
    fn only_tc_profiles_get_tc() {
        let mut p = profile(2000, 300, 500, Throttling::Tc);
        assert_eq!(tc_link(Some(&p)), p.link);
        for other in [Throttling::HttpOnly, Throttling::CdpAll] {
            p.apply = Some(other);
            assert!(tc_link(Some(&p)).is_unlimited());
        }
        assert!(tc_link(None).is_unlimited());
    }

    #[test]
    fn a_shared_slot_is_shaped_for_all_of_its_viewers() {
        let dsl = profile(2000, 300, 500, Throttling::Tc);
        let four: Vec<ViewerPlan> = (0..4).map(|i| viewer(i, dsl)).collect();
        assert_eq!(
            browser_link(&four),
            LinkProfile {
                download_kbps: Some(8000),
                upload_kbps: Some(1200),
                latency_ms: Some(500),
            }
        );
        // The packing path (the plan's profile times the viewers per browser) agrees.
        assert_eq!(browser_link(&four), link_profile(&dsl, 4).link);
        assert_eq!(browser_link(&four[..1]), tc_link(four[0].network.as_ref()));
        let http_only: Vec<ViewerPlan> = (0..4)
            .map(|i| viewer(i, profile(2000, 300, 500, Throttling::HttpOnly)))
            .collect();
        assert!(browser_link(&http_only).is_unlimited());
    }

    #[test]
    fn mixed_viewers_get_the_same_link_here_as_on_the_packing_path() {
        let dsl = profile(10_000, 1_000, 49, Throttling::Tc);
        let mobile = profile(23_600, 7_300, 53, Throttling::Tc);
        let viewers = [viewer(0, dsl), viewer(1, mobile), viewer(2, dsl)];
        let pooled = browser_link(&viewers);
        assert_eq!(
            pooled,
            LinkProfile {
                download_kbps: Some(43_600),
                upload_kbps: Some(9_300),
                latency_ms: Some(53),
            }
        );
        // Each profile times its viewers (the packing path), pooled: the same link.
        assert_eq!(
            shared_link([link_profile(&dsl, 2).link, link_profile(&mobile, 1).link]),
            pooled
        );
        // A viewer whose profile tc does not apply has an unlimited link: so has the slot,
        // where the former sum of limits held it to the others' rates.
        let cdp = profile(2000, 300, 500, Throttling::HttpOnly);
        let with_cdp = [viewer(0, dsl), viewer(1, cdp)];
        assert_eq!(
            browser_link(&with_cdp),
            LinkProfile {
                download_kbps: None,
                upload_kbps: None,
                latency_ms: Some(49),
            }
        );
    }
}
