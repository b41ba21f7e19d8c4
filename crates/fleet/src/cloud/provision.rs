//! Creating and deleting one run's resources: SSH key, firewalls, the hub (IPv4 + IPv6) and
//! IPv6-only viewer nodes, all labelled with the run.
//!
//! Creates are idempotent: when the answer to a create is lost after Hetzner executed it,
//! the retry is refused with `409 uniqueness_error` (names are unique per project); the
//! resource of that name is then looked up and adopted if it carries this run's label.
//! Deletes too: `404` means gone.
//!
//! Teardown finds everything by label, so it also works from another process
//! (`viewerfleet down RUN`) or after a crash: servers first, until the API confirms they are
//! gone, then firewalls (which cannot go while applied) and the SSH key; counts are exact
//! across retry passes, and whatever is left is named with what to run next.

use super::api::{q, HcloudApi, Query};
use super::cloudinit::{self, Role};
use super::pacer::Parallelism;
use super::CloudError;
use crate::model::scenario::LinkProfile;
use futures::StreamExt;
use hcloud::models;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub const LABEL_RUN: &str = "viewerfleet-run";
pub(crate) const LABEL_ROLE: &str = "viewerfleet-role";
pub(crate) const LABEL_EXPIRES: &str = "viewerfleet-expires";
pub(crate) const LABEL_SCENARIO: &str = "viewerfleet-scenario";
/// Unix time of the controller's last sign of life (see `heartbeat`).
pub const LABEL_HEARTBEAT: &str = "viewerfleet-heartbeat";
/// Unix time of the reaper's last sign of life on a fleet left standing (see `reaper`).
pub(crate) const LABEL_REAPER: &str = "viewerfleet-reaper";
/// Set by terraform/: such resources belong to a Terraform state, not to viewerfleet.
pub(crate) const LABEL_MANAGED_BY: &str = "viewerfleet-managed-by";

/// The roles viewerfleet gives what it creates.
pub(crate) const ROLES: &[&str] = &["hub", "node", "ssh-key", "hub-firewall", "node-firewall"];

/// Ports: the hub's WebDriver endpoint and event bus, the nodes' Grid node port.
pub(crate) const HUB_PORT: u16 = 4444;
pub(crate) const NODE_PORT: u16 = 5555;

const ACTION_TIMEOUT: Duration = Duration::from_secs(600);

/// How long a teardown waits for deleted servers to disappear from the list.
const GONE_TIMEOUT: Duration = Duration::from_secs(600);

/// Teardown passes over servers that could not be deleted.
const PASSES: usize = 3;

/// A run id usable in labels and host names: `<scenario>-<yyyymmddhhmmss>-<4 hex>`.
pub fn new_run_id(scenario: &str) -> String {
    let clean: String = scenario
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let clean = clean.trim_matches('-');
    let clean = if clean.is_empty() {
        "run"
    } else {
        &clean[..clean.len().min(30)]
    };
    format!(
        "{}-{}-{:04x}",
        clean.trim_end_matches('-'),
        chrono::Utc::now().format("%Y%m%d%H%M%S"),
        rand::random::<u16>()
    )
}

/// Checks a run id given on the command line.
pub fn check_run_id(run: &str) -> Result<(), CloudError> {
    if run.is_empty()
        || run.len() > 63
        || !run
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
    {
        return Err(CloudError::Invalid {
            field: "RUN".into(),
            message: format!("`{run}` is not a run id; it is printed by `viewerfleet up` and stored in the servers' `{LABEL_RUN}` label"),
        });
    }
    Ok(())
}

/// The label selector of what viewerfleet made for `run`: the run's label and a role, and
/// not managed by Terraform.
pub(crate) fn run_selector(run: &str) -> String {
    format!("{LABEL_RUN}={run},{LABEL_ROLE},!{LABEL_MANAGED_BY}")
}

/// What to create.
#[derive(Debug, Clone)]
pub struct ProvisionRequest {
    pub run_id: String,
    pub scenario: String,
    pub location: String,
    pub image: String,
    pub hub_type: String,
    /// Hubs: one, or several when one cannot create or hold the run's sessions
    /// (`hub_sizing`); nodes are spread evenly over them.
    pub hubs: u32,
    pub node_type: String,
    pub nodes: u32,
    pub viewers_per_node: u32,
    /// Browsers (Grid sessions, viewer slots) per node: `viewers_per_node` with one viewer
    /// per browser, fewer with several, more with pages of light peers.
    pub browsers_per_node: u32,
    /// Grid sessions the whole run opens (viewers' browsers and light pages): a node
    /// re-sized by its canary still offers its share of them.
    pub sessions: u32,
    /// Unix time after which `gc` may delete everything of this run.
    pub expires_at: i64,
    pub ssh_public_key: String,
    pub controller_ips: Vec<String>,
    /// The link of each viewer slot of a node (one browser's, shared by its viewers).
    pub slot_link: LinkProfile,
    pub viewer_slots_script: Option<String>,
    pub parallel_creates: u32,
    /// The run's Grid secrets: the hubs get all, the nodes the registration secret
    /// (`Debug` shows neither).
    pub secrets: crate::grid::auth::GridSecrets,
}

/// One created server.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerInfo {
    pub id: i64,
    pub name: String,
    pub ipv4: Option<String>,
    /// The server's /64 (`2001:db8:…::/64`); the host itself is `…::1`.
    pub ipv6_net: Option<String>,
    /// The labels it was created with.
    pub labels: HashMap<String, String>,
}

impl ServerInfo {
    pub(crate) fn from_model(s: &models::Server) -> ServerInfo {
        ServerInfo {
            id: s.id,
            name: s.name.clone(),
            ipv4: s.public_net.ipv4.as_ref().map(|v| v.ip.clone()),
            ipv6_net: s.public_net.ipv6.as_ref().map(|v| v.ip.clone()),
            labels: s.labels.clone(),
        }
    }

    /// `<prefix>::1`, the address Hetzner configures on the server.
    pub fn ipv6_host(&self) -> Option<std::net::Ipv6Addr> {
        let net = self.ipv6_net.as_deref()?.split('/').next()?;
        let base: std::net::Ipv6Addr = net.parse().ok()?;
        Some(std::net::Ipv6Addr::from(u128::from(base) | 1))
    }
}

/// A server just created (or adopted) and the actions still to wait for.
#[derive(Debug, Clone)]
pub struct Created {
    pub server: ServerInfo,
    pub actions: Vec<models::Action>,
}

/// The labels of everything a run creates; `now` is the creation's heartbeat.
pub fn labels(req: &ProvisionRequest, role: &str) -> HashMap<String, String> {
    let scenario: String = req
        .scenario
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .take(63)
        .collect();
    HashMap::from([
        (LABEL_RUN.to_string(), req.run_id.clone()),
        (LABEL_ROLE.to_string(), role.to_string()),
        (LABEL_EXPIRES.to_string(), req.expires_at.to_string()),
        (
            LABEL_HEARTBEAT.to_string(),
            chrono::Utc::now().timestamp().to_string(),
        ),
        (
            LABEL_SCENARIO.to_string(),
            scenario
                .trim_matches(|c: char| !c.is_ascii_alphanumeric())
                .to_string(),
        ),
    ])
}

fn rule(port: &str, sources: &[String], description: &str) -> models::Rule {
    models::Rule {
        description: Some(Some(description.to_string())),
        direction: models::rule::Direction::In,
        port: Some(Some(port.to_string())),
        protocol: models::rule::Protocol::Tcp,
        source_ips: Some(sources.to_vec()),
        destination_ips: None,
    }
}

/// Hub: SSH and WebDriver (4444) from the controller only; the event bus and registration
/// (4442–4444) from the nodes' host addresses only (`hosts`). Created with the controller's
/// rules alone, before any node exists; the nodes' rules are set once they do.
pub fn hub_rules(controller: &[String], node_hosts: &[String]) -> Vec<models::Rule> {
    let mut rules = vec![
        rule("22", controller, "SSH from the controller"),
        rule(
            &HUB_PORT.to_string(),
            controller,
            "Selenium hub (WebDriver) from the controller only",
        ),
    ];
    if !node_hosts.is_empty() {
        rules.push(rule(
            "4442-4443",
            node_hosts,
            "Grid event bus from the viewer nodes' host addresses only",
        ));
        rules.push(rule(
            &HUB_PORT.to_string(),
            node_hosts,
            "Grid registration from the viewer nodes' host addresses",
        ));
    }
    rules
}

/// Nodes: the Grid node port from the hub only, SSH and the load endpoint from the
/// controller, WebRTC (UDP) from anywhere so viewers can exchange video with peers.
pub fn node_rules(controller: &[String], hub_hosts: &[String]) -> Vec<models::Rule> {
    vec![
        rule("22", controller, "SSH from the controller"),
        rule(
            &NODE_PORT.to_string(),
            hub_hosts,
            "Grid node (WebDriver) from the hub only",
        ),
        rule(
            &crate::grid::load::CLOUD_LOAD_PORT.to_string(),
            controller,
            "viewer node load endpoint from the controller only",
        ),
        models::Rule {
            description: Some(Some("WebRTC between viewers (P2P)".into())),
            direction: models::rule::Direction::In,
            port: Some(Some("1024-65535".into())),
            protocol: models::rule::Protocol::Udp,
            source_ips: Some(vec!["0.0.0.0/0".into(), "::/0".into()]),
            destination_ips: None,
        },
    ]
}

/// The three kinds of resources a run holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Server,
    Firewall,
    SshKey,
}

impl Kind {
    fn path(self) -> &'static str {
        match self {
            Kind::Server => "/servers",
            Kind::Firewall => "/firewalls",
            Kind::SshKey => "/ssh_keys",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Kind::Server => "servers",
            Kind::Firewall => "firewalls",
            Kind::SshKey => "ssh_keys",
        }
    }

    pub fn noun(self) -> &'static str {
        match self {
            Kind::Server => "server",
            Kind::Firewall => "firewall",
            Kind::SshKey => "SSH key",
        }
    }
}

/// Lists one kind of resource, optionally by label selector, across all pages.
pub async fn list<T: DeserializeOwned>(
    api: &HcloudApi,
    kind: Kind,
    selector: Option<&str>,
) -> Result<Vec<T>, CloudError> {
    let filters: Query = selector
        .map(|s| q("label_selector", s))
        .into_iter()
        .collect();
    api.list(
        &format!("list {}s", kind.noun()),
        kind.path(),
        kind.key(),
        &filters,
    )
    .await
}

/// The resource named `name`, if it carries `run`'s label: a create whose answer was lost.
async fn adopt(api: &HcloudApi, kind: Kind, name: &str, run: &str) -> Result<Value, CloudError> {
    let found: Vec<Value> = api
        .list(
            &format!("look up {} {name}", kind.noun()),
            kind.path(),
            kind.key(),
            &[q("name", name)],
        )
        .await?;
    match found.into_iter().next() {
        Some(v) if v["labels"][LABEL_RUN] == run => {
            tracing::info!(
                "{} {name} exists already (an earlier answer was lost): adopted",
                kind.noun()
            );
            Ok(v)
        }
        Some(_) => Err(CloudError::Invalid {
            field: "run".into(),
            message: format!("the {} name {name} is taken by a resource that is not labelled {LABEL_RUN}={run}; delete or rename it", kind.noun()),
        }),
        None => Err(CloudError::Api {
            what: format!("create {} {name}", kind.noun()),
            status: 409,
            code: "uniqueness_error".into(),
            message: "Hetzner says the name is taken, but lists nothing of that name".into(),
        }),
    }
}

fn typed<T: DeserializeOwned>(what: &str, v: Value) -> Result<T, CloudError> {
    serde_json::from_value(v).map_err(|e| CloudError::Transport {
        what: what.into(),
        message: format!("unexpected answer: {e}"),
    })
}

fn is_uniqueness(e: &CloudError) -> bool {
    matches!(e, CloudError::Api { code, .. } if code == "uniqueness_error")
}

/// The SSH key: created with the run's labels (adopted if a lost answer left it created),
/// or — when the project already holds the same key — the existing one, left alone.
async fn ssh_key(api: &HcloudApi, req: &ProvisionRequest) -> Result<i64, CloudError> {
    let name = format!("vf-{}", req.run_id);
    let request = models::CreateSshKeyRequest {
        labels: Some(labels(req, "ssh-key")),
        name: name.clone(),
        public_key: req.ssh_public_key.trim().to_string(),
    };
    let created: Result<models::CreateSshKeyResponse, _> =
        api.post("create SSH key", "/ssh_keys", &request).await;
    match created {
        Ok(resp) => Ok(resp.ssh_key.id),
        Err(e) if is_uniqueness(&e) => {
            if let Ok(ours) = adopt(api, Kind::SshKey, &name, &req.run_id).await {
                return Ok(ours["id"].as_i64().unwrap_or_default());
            }
            let wanted: Vec<&str> = req.ssh_public_key.split_whitespace().take(2).collect();
            let keys: Vec<models::SshKey> = list(api, Kind::SshKey, None).await?;
            keys.iter()
                .find(|k| k.public_key.split_whitespace().take(2).collect::<Vec<_>>() == wanted)
                .map(|k| k.id)
                .ok_or_else(|| CloudError::Invalid {
                    field: "ssh_public_key".into(),
                    message: "Hetzner says the key exists but it is not in the project's list; check the key file".into(),
                })
        }
        Err(e) => Err(e),
    }
}

/// Creates (or adopts) the firewall `vf-<run>-<name>`; returns its id and actions.
async fn create_firewall(
    api: &HcloudApi,
    req: &ProvisionRequest,
    name: &str,
    role: &str,
    rules: Vec<models::Rule>,
) -> Result<(i64, Vec<models::Action>), CloudError> {
    let name = format!("vf-{}-{name}", req.run_id);
    let request = models::CreateFirewallRequest {
        apply_to: None,
        labels: Some(labels(req, role)),
        name: name.clone(),
        rules: Some(rules),
    };
    let what = format!("create firewall {name}");
    match api
        .post::<models::CreateFirewallResponse>(&what, "/firewalls", &request)
        .await
    {
        Ok(resp) => {
            let id = resp.firewall.map(|f| f.id).ok_or(CloudError::Transport {
                what,
                message: "the answer holds no firewall".into(),
            })?;
            Ok((id, resp.actions.unwrap_or_default()))
        }
        Err(e) if is_uniqueness(&e) => {
            let found = adopt(api, Kind::Firewall, &name, &req.run_id).await?;
            Ok((found["id"].as_i64().unwrap_or_default(), Vec::new()))
        }
        Err(e) => Err(e),
    }
}

/// Replaces a firewall's rules; returns the actions to wait for.
pub async fn set_rules(
    api: &HcloudApi,
    id: i64,
    rules: Vec<models::Rule>,
) -> Result<Vec<models::Action>, CloudError> {
    let resp: models::SetRulesResponse = api
        .post(
            "set firewall rules",
            &format!("/firewalls/{id}/actions/set_rules"),
            &models::SetRulesRequest { rules },
        )
        .await?;
    Ok(resp.actions)
}

/// Replaces a server's labels (one request).
pub(crate) async fn set_labels(
    api: &HcloudApi,
    id: i64,
    labels: &HashMap<String, String>,
) -> Result<(), CloudError> {
    let _: Value = api
        .put(
            "update server labels",
            &format!("/servers/{id}"),
            &json!({ "labels": labels }),
        )
        .await?;
    Ok(())
}

/// One server to create.
struct ServerSpec<'a> {
    name: String,
    role: &'a str,
    server_type: &'a str,
    ipv4: bool,
    firewall: i64,
    ssh_key: i64,
    user_data: String,
    /// Carries the run's heartbeat label: the first hub (the one the heartbeat refreshes)
    /// and the nodes; further hubs do not, so `gc` reads the first hub's.
    heartbeat: bool,
}

/// Creates a server, or adopts it when a lost answer left it created.
async fn create_server(
    api: &HcloudApi,
    req: &ProvisionRequest,
    spec: ServerSpec<'_>,
) -> Result<Created, CloudError> {
    let request = models::CreateServerRequest {
        automount: None,
        firewalls: Some(vec![models::CreateServerRequestFirewalls {
            firewall: spec.firewall,
        }]),
        image: req.image.clone(),
        labels: Some({
            let mut labels = labels(req, spec.role);
            if !spec.heartbeat {
                labels.remove(LABEL_HEARTBEAT);
            }
            labels
        }),
        location: Some(req.location.clone()),
        name: spec.name.clone(),
        networks: None,
        placement_group: None,
        public_net: Some(Box::new(models::CreateServerRequestPublicNet {
            enable_ipv4: Some(spec.ipv4),
            enable_ipv6: Some(true),
            ipv4: None,
            ipv6: None,
        })),
        server_type: spec.server_type.to_string(),
        ssh_keys: Some(vec![spec.ssh_key.to_string()]),
        start_after_create: Some(true),
        user_data: Some(spec.user_data),
        volumes: None,
    };
    let what = format!("create server {}", spec.name);
    match api
        .post::<models::CreateServerResponse>(&what, "/servers", &request)
        .await
    {
        Ok(resp) => {
            let mut actions = vec![*resp.action];
            actions.extend(resp.next_actions);
            Ok(Created {
                server: ServerInfo::from_model(&resp.server),
                actions,
            })
        }
        Err(e) if is_uniqueness(&e) => {
            let found = adopt(api, Kind::Server, &spec.name, &req.run_id).await?;
            let server: models::Server = typed(&what, found)?;
            Ok(Created {
                server: ServerInfo::from_model(&server),
                actions: Vec::new(),
            })
        }
        Err(e) => Err(e),
    }
}

/// The hub and the firewalls, created without waiting for their actions.
#[derive(Debug, Clone)]
pub struct Base {
    pub ssh_key: i64,
    pub hub_firewall: i64,
    pub node_firewall: i64,
    /// The first hub (its label is the run's heartbeat).
    pub hub: ServerInfo,
    /// Every hub, the first one first.
    pub hubs: Vec<ServerInfo>,
    /// Actions of the hubs and firewalls still to wait for.
    pub actions: Vec<models::Action>,
}

/// The name of hub `k` (0-based) of a run: the first is `vf-<run>-hub`.
pub(crate) fn hub_name(run: &str, k: u32) -> String {
    match k {
        0 => format!("vf-{run}-hub"),
        k => format!("vf-{run}-hub-{}", k + 1),
    }
}

/// SSH key, the hubs' firewall, the hubs (dual-stack) and the nodes' firewall.
pub async fn create_base(
    api: &HcloudApi,
    req: &ProvisionRequest,
    cancel: &CancellationToken,
) -> Result<Base, CloudError> {
    let key = ssh_key(api, req).await?;
    check(cancel)?;
    let (hub_fw, mut actions) = create_firewall(
        api,
        req,
        "hub",
        "hub-firewall",
        hub_rules(&req.controller_ips, &[]),
    )
    .await?;
    check(cancel)?;
    let mut hubs = Vec::new();
    for k in 0..req.hubs.max(1) {
        let hub = create_server(
            api,
            req,
            ServerSpec {
                name: hub_name(&req.run_id, k),
                role: "hub",
                server_type: &req.hub_type,
                ipv4: true,
                firewall: hub_fw,
                ssh_key: key,
                user_data: cloudinit::user_data(
                    &Role::Hub {
                        secrets: req.secrets.clone(),
                    },
                    None,
                )?,
                heartbeat: k == 0,
            },
        )
        .await?;
        actions.extend(hub.actions);
        hubs.push(hub.server);
        check(cancel)?;
    }
    let (node_fw, more) = create_firewall(
        api,
        req,
        "nodes",
        "node-firewall",
        node_rules(&req.controller_ips, &hosts(&hubs)),
    )
    .await?;
    actions.extend(more);
    Ok(Base {
        ssh_key: key,
        hub_firewall: hub_fw,
        node_firewall: node_fw,
        hub: hubs[0].clone(),
        hubs,
        actions,
    })
}

fn check(cancel: &CancellationToken) -> Result<(), CloudError> {
    if cancel.is_cancelled() {
        Err(CloudError::Cancelled)
    } else {
        Ok(())
    }
}

/// Nodes created, and why creation stopped early (`resource_limit_exceeded`'s message).
#[derive(Debug, Clone, Default)]
pub(crate) struct NodesCreated {
    pub nodes: Vec<ServerInfo>,
    pub actions: Vec<models::Action>,
    pub limit: Option<String>,
}

/// Creates `count` IPv6-only nodes numbered from `first`, at most `parallel_creates` at a
/// time and fewer while the request budget is low. Stops creating at the first
/// `resource_limit_exceeded` and returns what exists with the error's message; any other
/// error is returned after in-flight creates finish.
pub(crate) async fn create_nodes(
    api: &HcloudApi,
    req: &ProvisionRequest,
    base: &Base,
    first: u32,
    count: u32,
    cancel: &CancellationToken,
    progress: &(dyn Fn(u32, u32) + Sync),
) -> Result<NodesCreated, CloudError> {
    // Node i registers with hub i % hubs: each hub its share of the nodes.
    let datas = base
        .hubs
        .iter()
        .map(|hub| {
            let role = Role::Node {
                hub_addr: format!(
                    "[{}]",
                    hub.ipv6_host().map(|a| a.to_string()).unwrap_or_default()
                ),
                max_sessions: req.browsers_per_node,
                slot_link: req.slot_link,
                controller_ips: req.controller_ips.clone(),
                registration_secret: req.secrets.registration_secret.clone(),
            };
            cloudinit::user_data(&role, req.viewer_slots_script.as_deref())
        })
        .collect::<Result<Vec<String>, _>>()?;
    let hubs = datas.len() as u32;
    let par = Parallelism::new(req.parallel_creates.max(1) as usize, api.pacer());
    let stop = AtomicBool::new(false);
    let limit: Mutex<Option<String>> = Mutex::new(None);
    let failure: Mutex<Option<CloudError>> = Mutex::new(None);
    let done = AtomicU32::new(0);
    let created: Vec<Created> = futures::stream::iter(first..first + count)
        .map(|i| {
            let data = datas[super::hub_sizing::hub_of_node(i, hubs) as usize].clone();
            let (stop, limit, failure, done, par) = (&stop, &limit, &failure, &done, &par);
            async move {
                let _slot = par.slot().await;
                if stop.load(Ordering::SeqCst) || cancel.is_cancelled() {
                    return None;
                }
                let spec = ServerSpec {
                    name: format!("vf-{}-node-{:03}", req.run_id, i + 1),
                    role: "node",
                    server_type: &req.node_type,
                    ipv4: false,
                    firewall: base.node_firewall,
                    ssh_key: base.ssh_key,
                    user_data: data,
                    heartbeat: true,
                };
                let result = create_server(api, req, spec).await;
                par.adapt(api.pacer());
                match result {
                    Ok(c) => {
                        progress(done.fetch_add(1, Ordering::SeqCst) + 1, count);
                        Some(c)
                    }
                    Err(CloudError::LimitExceeded { message, .. }) => {
                        stop.store(true, Ordering::SeqCst);
                        lock(limit).get_or_insert(message);
                        None
                    }
                    Err(e) => {
                        stop.store(true, Ordering::SeqCst);
                        lock(failure).get_or_insert(e);
                        None
                    }
                }
            }
        })
        .buffer_unordered(req.parallel_creates.max(1) as usize)
        .filter_map(|s| async move { s })
        .collect()
        .await;
    if let Some(e) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    check(cancel)?;
    let mut out = NodesCreated {
        limit: limit.into_inner().unwrap_or_else(|e| e.into_inner()),
        ..Default::default()
    };
    for c in created {
        out.actions.extend(c.actions);
        out.nodes.push(c.server);
    }
    out.nodes.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Waits for actions of creates (or set_rules) to finish.
pub async fn wait(api: &HcloudApi, actions: &[models::Action]) -> Result<(), CloudError> {
    api.wait_actions(actions, ACTION_TIMEOUT).await
}

/// The host addresses of `servers` as firewall sources: each one's IPv6 address (`…::1/128`)
/// and IPv4 address (`/32`) where it has one, never the whole /64 (a node's viewer slots
/// have addresses in its /64 and must not reach the hub).
pub fn hosts(servers: &[ServerInfo]) -> Vec<String> {
    servers
        .iter()
        .flat_map(|s| {
            s.ipv6_host()
                .map(|a| format!("{a}/128"))
                .into_iter()
                .chain(s.ipv4.as_ref().map(|a| format!("{a}/32")))
        })
        .collect()
}

/// What a teardown deleted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Deleted {
    pub servers: Vec<String>,
    pub firewalls: Vec<String>,
    pub ssh_keys: Vec<String>,
}

impl Deleted {
    pub fn summary(&self) -> String {
        format!(
            "{} server(s), {} firewall(s), {} SSH key(s)",
            self.servers.len(),
            self.firewalls.len(),
            self.ssh_keys.len()
        )
    }

    pub fn extend(&mut self, other: Deleted) {
        self.servers.extend(other.servers);
        self.firewalls.extend(other.firewalls);
        self.ssh_keys.extend(other.ssh_keys);
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty() && self.firewalls.is_empty() && self.ssh_keys.is_empty()
    }
}

/// A resource by id and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Named {
    pub id: i64,
    pub name: String,
}

/// What one run holds (or what `gc` decided to delete of it).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Inventory {
    pub servers: Vec<Named>,
    pub firewalls: Vec<Named>,
    pub ssh_keys: Vec<Named>,
}

impl Inventory {
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty() && self.firewalls.is_empty() && self.ssh_keys.is_empty()
    }
}

/// Everything viewerfleet made for `run` (see [`run_selector`]).
pub async fn inventory(api: &HcloudApi, run: &str) -> Result<Inventory, CloudError> {
    let selector = run_selector(run);
    let named = |v: Vec<Value>| -> Vec<Named> {
        v.iter()
            .map(|x| Named {
                id: x["id"].as_i64().unwrap_or_default(),
                name: x["name"].as_str().unwrap_or_default().to_string(),
            })
            .collect()
    };
    Ok(Inventory {
        servers: named(list(api, Kind::Server, Some(&selector)).await?),
        firewalls: named(list(api, Kind::Firewall, Some(&selector)).await?),
        ssh_keys: named(list(api, Kind::SshKey, Some(&selector)).await?),
    })
}

/// One delete; `Ok(None)` when it was already gone (404), else the action to wait for.
async fn delete_one(
    api: &HcloudApi,
    kind: Kind,
    r: &Named,
) -> Result<Option<models::Action>, CloudError> {
    let what = format!("delete {} {}", kind.noun(), r.name);
    match api
        .delete(&what, &format!("{}/{}", kind.path(), r.id))
        .await
    {
        Ok(v) => Ok(serde_json::from_value(v["action"].clone()).ok()),
        Err(CloudError::Api { status: 404, .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Which of `servers` the API still lists (deleting ones included), by id → status.
async fn still_listed(
    api: &HcloudApi,
    run: &str,
    servers: &[Named],
) -> Result<BTreeMap<i64, String>, CloudError> {
    let ids: BTreeSet<i64> = servers.iter().map(|s| s.id).collect();
    let listed: Vec<Value> = list(api, Kind::Server, Some(&run_selector(run))).await?;
    Ok(listed
        .into_iter()
        .filter_map(|s| {
            let id = s["id"].as_i64()?;
            ids.contains(&id)
                .then(|| (id, s["status"].as_str().unwrap_or_default().to_string()))
        })
        .collect())
}

/// Deletes `servers`, waits until the API no longer lists them, and retries those it could
/// not delete. Returns the ones gone and the errors of those left.
async fn delete_servers(
    api: &HcloudApi,
    run: &str,
    mut servers: Vec<Named>,
    parallel: usize,
) -> (Vec<String>, BTreeMap<Named, String>) {
    let mut gone = Vec::new();
    let mut left: BTreeMap<Named, String> = BTreeMap::new();
    for pass in 1..=PASSES {
        if servers.is_empty() {
            break;
        }
        let par = Parallelism::new(parallel, api.pacer());
        let results: Vec<(Named, Result<Option<models::Action>, CloudError>)> =
            futures::stream::iter(servers.clone())
                .map(|s| {
                    let par = &par;
                    async move {
                        let _slot = par.slot().await;
                        let r = delete_one(api, Kind::Server, &s).await;
                        par.adapt(api.pacer());
                        (s, r)
                    }
                })
                .buffer_unordered(parallel)
                .collect()
                .await;
        let mut actions = Vec::new();
        for (s, r) in results {
            match r {
                Ok(action) => {
                    actions.extend(action);
                    left.remove(&s);
                }
                Err(e) => {
                    tracing::warn!(
                        "teardown pass {pass}: could not delete server {}: {e}",
                        s.name
                    );
                    left.insert(s, e.to_string());
                }
            }
        }
        if let Err(e) = api.wait_actions(&actions, GONE_TIMEOUT).await {
            tracing::warn!("teardown pass {pass}: {e}");
        }
        // Confirm: deleted servers leave the list once their delete action finished.
        let deadline = tokio::time::Instant::now() + GONE_TIMEOUT;
        let mut interval = api.poll_interval;
        let listed = loop {
            let listed = match still_listed(api, run, &servers).await {
                Ok(listed) => listed,
                Err(e) => {
                    for s in servers {
                        left.insert(s, format!("its deletion could not be confirmed: {e}"));
                    }
                    return (gone, left);
                }
            };
            let deleting = listed.values().filter(|s| *s == "deleting").count();
            if deleting == 0 || tokio::time::Instant::now() >= deadline {
                break listed;
            }
            tokio::time::sleep(crate::sys::backoff::jitter(interval)).await;
            interval = (interval * 3 / 2).min(api.max_poll_interval);
        };
        let (stay, went): (Vec<Named>, Vec<Named>) = servers
            .into_iter()
            .partition(|s| listed.contains_key(&s.id));
        for s in went {
            left.remove(&s);
            gone.push(s.name);
        }
        for s in &stay {
            left.entry(s.clone()).or_insert_with(|| {
                format!(
                    "still listed ({}) after its deletion",
                    listed.get(&s.id).map(String::as_str).unwrap_or("?")
                )
            });
        }
        servers = stay;
    }
    (gone, left)
}

/// Deletes a firewall, retrying while Hetzner still sees it applied to a server that is
/// going away.
async fn delete_firewall(api: &HcloudApi, f: &Named) -> Result<(), CloudError> {
    let mut backoff = crate::sys::backoff::Backoff::new(api.backoff, Duration::from_secs(10));
    let mut tries = 0;
    loop {
        match delete_one(api, Kind::Firewall, f).await {
            Ok(_) => return Ok(()),
            Err(CloudError::Api { code, .. }) if code == "resource_in_use" && tries < 8 => {
                tries += 1;
                tokio::time::sleep(backoff.next_wait()).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Deletes what `inv` lists of `run`: servers first (confirmed gone, retried), then — only
/// when no server is left — firewalls and SSH keys. Counts are exact; anything left is an
/// error naming each resource and what to run next.
pub(crate) async fn delete_inventory(
    api: &HcloudApi,
    run: &str,
    inv: Inventory,
    parallel: usize,
) -> Result<Deleted, CloudError> {
    let mut deleted = Deleted::default();
    let (gone, left_servers) = delete_servers(api, run, inv.servers, parallel.max(1)).await;
    deleted.servers = gone;
    let mut left: Vec<String> = left_servers
        .iter()
        .map(|(s, e)| format!("server {} (id {}): {e}", s.name, s.id))
        .collect();
    if left_servers.is_empty() {
        for f in &inv.firewalls {
            match delete_firewall(api, f).await {
                Ok(()) => deleted.firewalls.push(f.name.clone()),
                Err(e) => left.push(format!("firewall {} (id {}): {e}", f.name, f.id)),
            }
        }
        for k in &inv.ssh_keys {
            match delete_one(api, Kind::SshKey, k).await {
                Ok(_) => deleted.ssh_keys.push(k.name.clone()),
                Err(e) => left.push(format!("SSH key {} (id {}): {e}", k.name, k.id)),
            }
        }
    } else {
        for f in &inv.firewalls {
            left.push(format!(
                "firewall {} (id {}): kept while servers of the run remain",
                f.name, f.id
            ));
        }
        for k in &inv.ssh_keys {
            left.push(format!(
                "SSH key {} (id {}): kept while servers of the run remain",
                k.name, k.id
            ));
        }
    }
    if left.is_empty() {
        Ok(deleted)
    } else {
        Err(CloudError::TeardownIncomplete {
            run: run.to_string(),
            deleted,
            left,
        })
    }
}

/// Deletes every resource of one run (see [`delete_inventory`]).
pub async fn teardown(api: &HcloudApi, run_id: &str) -> Result<Deleted, CloudError> {
    let inv = inventory(api, run_id).await?;
    delete_inventory(api, run_id, inv, 10).await
}
