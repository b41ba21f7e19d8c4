//! Creating and deleting one run's resources: SSH key, firewalls, the hub (IPv4 + IPv6) and
//! IPv6-only viewer nodes, all labelled with the run. Teardown finds everything by label, so
//! it also works from another process (`viewerfleet down RUN`) or after a crash.

use super::api::{all_pages, HcloudApi};
use super::cloudinit::{self, Role, SlotShaping};
use super::CloudError;
use futures::StreamExt;
use hcloud::apis::{firewalls_api, servers_api, ssh_keys_api};
use hcloud::models;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub const LABEL_RUN: &str = "viewerfleet-run";
pub const LABEL_ROLE: &str = "viewerfleet-role";
pub const LABEL_EXPIRES: &str = "viewerfleet-expires";
pub const LABEL_SCENARIO: &str = "viewerfleet-scenario";

/// Ports: the hub's WebDriver endpoint and event bus, the nodes' Grid node port.
pub const HUB_PORT: u16 = 4444;
pub const NODE_PORT: u16 = 5555;

const ACTION_TIMEOUT: Duration = Duration::from_secs(600);

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

/// What to create.
#[derive(Debug, Clone)]
pub struct ProvisionRequest {
    pub run_id: String,
    pub scenario: String,
    pub location: String,
    pub image: String,
    pub hub_type: String,
    pub node_type: String,
    pub nodes: u32,
    pub viewers_per_node: u32,
    /// Unix time after which `gc` may delete everything of this run.
    pub expires_at: i64,
    pub ssh_public_key: String,
    pub controller_ips: Vec<String>,
    pub shaping: SlotShaping,
    pub viewer_slots_script: Option<String>,
    pub parallel_creates: u32,
}

/// One created server.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerInfo {
    pub id: i64,
    pub name: String,
    pub ipv4: Option<String>,
    /// The server's /64 (`2001:db8:…::/64`); the host itself is `…::1`.
    pub ipv6_net: Option<String>,
}

impl ServerInfo {
    fn from_model(s: &models::Server) -> ServerInfo {
        ServerInfo {
            id: s.id,
            name: s.name.clone(),
            ipv4: s.public_net.ipv4.as_ref().map(|v| v.ip.clone()),
            ipv6_net: s.public_net.ipv6.as_ref().map(|v| v.ip.clone()),
        }
    }

    /// `<prefix>::1`, the address Hetzner configures on the server.
    pub fn ipv6_host(&self) -> Option<std::net::Ipv6Addr> {
        let net = self.ipv6_net.as_deref()?.split('/').next()?;
        let base: std::net::Ipv6Addr = net.parse().ok()?;
        Some(std::net::Ipv6Addr::from(u128::from(base) | 1))
    }
}

fn labels(req: &ProvisionRequest, role: &str) -> HashMap<String, String> {
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

/// Hub: SSH and WebDriver (4444) from the controller only; the event bus from the nodes only.
pub fn hub_rules(controller: &[String], node_nets: &[String]) -> Vec<models::Rule> {
    let mut rules = vec![
        rule("22", controller, "SSH from the controller"),
        rule(
            &HUB_PORT.to_string(),
            controller,
            "Selenium hub (WebDriver) from the controller only",
        ),
    ];
    if !node_nets.is_empty() {
        rules.push(rule(
            "4442-4443",
            node_nets,
            "Grid event bus from the viewer nodes only",
        ));
        rules.push(rule(
            &HUB_PORT.to_string(),
            node_nets,
            "Grid registration from the viewer nodes",
        ));
    }
    rules
}

/// Nodes: the Grid node port from the hub only, SSH from the controller, WebRTC (UDP) from anywhere
/// so viewers can exchange video with peers.
pub fn node_rules(controller: &[String], hub_nets: &[String]) -> Vec<models::Rule> {
    vec![
        rule("22", controller, "SSH from the controller"),
        rule(
            &NODE_PORT.to_string(),
            hub_nets,
            "Grid node (WebDriver) from the hub only",
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

/// The SSH key: created with the run's labels, or — when the project already holds the same
/// key (Hetzner refuses duplicates) — the existing one, which teardown leaves alone.
async fn ssh_key(api: &HcloudApi, req: &ProvisionRequest) -> Result<i64, CloudError> {
    let request = models::CreateSshKeyRequest {
        labels: Some(labels(req, "ssh-key")),
        name: format!("vf-{}", req.run_id),
        public_key: req.ssh_public_key.trim().to_string(),
    };
    let created = api
        .call("create SSH key", |c| {
            let r = request.clone();
            async move {
                ssh_keys_api::create_ssh_key(
                    &c,
                    ssh_keys_api::CreateSshKeyParams {
                        create_ssh_key_request: r,
                    },
                )
                .await
            }
        })
        .await;
    match created {
        Ok(resp) => Ok(resp.ssh_key.id),
        Err(CloudError::Api { code, .. }) if code == "uniqueness_error" => {
            let ours: Vec<&str> = req.ssh_public_key.split_whitespace().take(2).collect();
            let keys = list_ssh_keys(api, None).await?;
            keys.iter()
                .find(|k| k.public_key.split_whitespace().take(2).collect::<Vec<_>>() == ours)
                .map(|k| k.id)
                .ok_or_else(|| CloudError::Invalid {
                    field: "ssh_public_key".into(),
                    message: "Hetzner says the key exists but it is not in the project's list; check the key file".into(),
                })
        }
        Err(e) => Err(e),
    }
}

async fn create_firewall(
    api: &HcloudApi,
    req: &ProvisionRequest,
    role: &str,
    rules: Vec<models::Rule>,
) -> Result<i64, CloudError> {
    let request = models::CreateFirewallRequest {
        apply_to: None,
        labels: Some(labels(req, &format!("{role}-firewall"))),
        name: format!("vf-{}-{role}", req.run_id),
        rules: Some(rules),
    };
    let resp = api
        .call(&format!("create {role} firewall"), |c| {
            let r = request.clone();
            async move {
                firewalls_api::create_firewall(
                    &c,
                    firewalls_api::CreateFirewallParams {
                        create_firewall_request: r,
                    },
                )
                .await
            }
        })
        .await?;
    for action in resp.actions.iter().flatten() {
        api.wait_action(action, ACTION_TIMEOUT).await?;
    }
    resp.firewall
        .map(|f| f.id)
        .ok_or_else(|| CloudError::Transport {
            what: "create firewall".into(),
            message: "the answer holds no firewall".into(),
        })
}

/// Replaces a firewall's rules and waits until they apply.
pub async fn set_rules(
    api: &HcloudApi,
    id: i64,
    rules: Vec<models::Rule>,
) -> Result<(), CloudError> {
    let resp = api
        .call("set firewall rules", |c| {
            let rules = rules.clone();
            async move {
                firewalls_api::set_rules(
                    &c,
                    firewalls_api::SetRulesParams {
                        id,
                        set_rules_request: models::SetRulesRequest { rules },
                    },
                )
                .await
            }
        })
        .await?;
    for action in &resp.actions {
        api.wait_action(action, ACTION_TIMEOUT).await?;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn create_server(
    api: &HcloudApi,
    req: &ProvisionRequest,
    name: String,
    role: &str,
    server_type: &str,
    ipv4: bool,
    firewall: i64,
    ssh_key: i64,
    user_data: String,
) -> Result<ServerInfo, CloudError> {
    let request = models::CreateServerRequest {
        automount: None,
        firewalls: Some(vec![models::CreateServerRequestFirewalls { firewall }]),
        image: req.image.clone(),
        labels: Some(labels(req, role)),
        location: Some(req.location.clone()),
        name: name.clone(),
        networks: None,
        placement_group: None,
        public_net: Some(Box::new(models::CreateServerRequestPublicNet {
            enable_ipv4: Some(ipv4),
            enable_ipv6: Some(true),
            ipv4: None,
            ipv6: None,
        })),
        server_type: server_type.to_string(),
        ssh_keys: Some(vec![ssh_key.to_string()]),
        start_after_create: Some(true),
        user_data: Some(user_data),
        volumes: None,
    };
    let resp = api
        .call(&format!("create server {name}"), |c| {
            let r = request.clone();
            async move {
                servers_api::create_server(
                    &c,
                    servers_api::CreateServerParams {
                        create_server_request: r,
                    },
                )
                .await
            }
        })
        .await?;
    api.wait_action(&resp.action, ACTION_TIMEOUT).await?;
    for action in &resp.next_actions {
        api.wait_action(action, ACTION_TIMEOUT).await?;
    }
    Ok(ServerInfo::from_model(&resp.server))
}

/// Creates the hub (dual-stack) and waits until it runs.
pub async fn create_hub(
    api: &HcloudApi,
    req: &ProvisionRequest,
    cancel: &CancellationToken,
) -> Result<(ServerInfo, i64, i64), CloudError> {
    let key = ssh_key(api, req).await?;
    check(cancel)?;
    let hub_fw = create_firewall(api, req, "hub", hub_rules(&req.controller_ips, &[])).await?;
    check(cancel)?;
    let data = cloudinit::user_data(&Role::Hub, None)?;
    let hub = create_server(
        api,
        req,
        format!("vf-{}-hub", req.run_id),
        "hub",
        &req.hub_type,
        true,
        hub_fw,
        key,
        data,
    )
    .await?;
    Ok((hub, hub_fw, key))
}

fn check(cancel: &CancellationToken) -> Result<(), CloudError> {
    if cancel.is_cancelled() {
        Err(CloudError::Cancelled)
    } else {
        Ok(())
    }
}

/// Creates `count` IPv6-only nodes numbered from `first`, `parallel_creates` at a time.
/// Stops creating at the first `resource_limit_exceeded` and returns what exists with the
/// error's message; any other error is returned after in-flight creates finish.
#[allow(clippy::too_many_arguments)]
pub async fn create_nodes(
    api: &HcloudApi,
    req: &ProvisionRequest,
    hub: &ServerInfo,
    node_fw: i64,
    ssh_key: i64,
    first: u32,
    count: u32,
    cancel: &CancellationToken,
    progress: &(dyn Fn(u32, u32) + Sync),
) -> Result<(Vec<ServerInfo>, Option<String>), CloudError> {
    let hub_addr = format!(
        "[{}]",
        hub.ipv6_host().map(|a| a.to_string()).unwrap_or_default()
    );
    let role = Role::Node {
        hub_addr,
        max_sessions: req.viewers_per_node,
        shaping: req.shaping,
    };
    let data = cloudinit::user_data(&role, req.viewer_slots_script.as_deref())?;
    let stop = AtomicBool::new(false);
    let limit: Mutex<Option<String>> = Mutex::new(None);
    let failure: Mutex<Option<CloudError>> = Mutex::new(None);
    let done = AtomicU32::new(0);
    let created: Vec<ServerInfo> = futures::stream::iter(first..first + count)
        .map(|i| {
            let (data, stop, limit, failure, done) = (data.clone(), &stop, &limit, &failure, &done);
            async move {
                if stop.load(Ordering::SeqCst) || cancel.is_cancelled() {
                    return None;
                }
                let name = format!("vf-{}-node-{:03}", req.run_id, i + 1);
                match create_server(
                    api,
                    req,
                    name,
                    "node",
                    &req.node_type,
                    false,
                    node_fw,
                    ssh_key,
                    data,
                )
                .await
                {
                    Ok(s) => {
                        progress(done.fetch_add(1, Ordering::SeqCst) + 1, count);
                        Some(s)
                    }
                    Err(CloudError::LimitExceeded { message, .. }) => {
                        stop.store(true, Ordering::SeqCst);
                        limit
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .get_or_insert(message);
                        None
                    }
                    Err(e) => {
                        stop.store(true, Ordering::SeqCst);
                        failure
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .get_or_insert(e);
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
    let mut created = created;
    created.sort_by(|a, b| a.name.cmp(&b.name));
    Ok((
        created,
        limit.into_inner().unwrap_or_else(|e| e.into_inner()),
    ))
}

/// The /64s of `servers`, as firewall sources.
pub fn nets(servers: &[ServerInfo]) -> Vec<String> {
    servers.iter().filter_map(|s| s.ipv6_net.clone()).collect()
}

/// Lists servers, optionally by label selector, across all pages.
pub async fn list_servers(
    api: &HcloudApi,
    selector: Option<&str>,
) -> Result<Vec<models::Server>, CloudError> {
    all_pages(|page| async move {
        let resp = api
            .call("list servers", |c| {
                let selector = selector.map(str::to_string);
                async move {
                    servers_api::list_servers(
                        &c,
                        servers_api::ListServersParams {
                            label_selector: selector,
                            page: Some(page),
                            per_page: Some(50),
                            ..Default::default()
                        },
                    )
                    .await
                }
            })
            .await?;
        Ok((resp.servers, resp.meta.pagination.next_page))
    })
    .await
}

pub async fn list_firewalls(
    api: &HcloudApi,
    selector: Option<&str>,
) -> Result<Vec<models::Firewall>, CloudError> {
    all_pages(|page| async move {
        let resp = api
            .call("list firewalls", |c| {
                let selector = selector.map(str::to_string);
                async move {
                    firewalls_api::list_firewalls(
                        &c,
                        firewalls_api::ListFirewallsParams {
                            label_selector: selector,
                            page: Some(page),
                            per_page: Some(50),
                            ..Default::default()
                        },
                    )
                    .await
                }
            })
            .await?;
        Ok((resp.firewalls, resp.meta.pagination.next_page))
    })
    .await
}

pub async fn list_ssh_keys(
    api: &HcloudApi,
    selector: Option<&str>,
) -> Result<Vec<models::SshKey>, CloudError> {
    all_pages(|page| async move {
        let resp = api
            .call("list SSH keys", |c| {
                let selector = selector.map(str::to_string);
                async move {
                    ssh_keys_api::list_ssh_keys(
                        &c,
                        ssh_keys_api::ListSshKeysParams {
                            label_selector: selector,
                            page: Some(page),
                            per_page: Some(50),
                            ..Default::default()
                        },
                    )
                    .await
                }
            })
            .await?;
        Ok((resp.ssh_keys, resp.meta.pagination.next_page))
    })
    .await
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
}

pub async fn delete_server(api: &HcloudApi, id: i64, name: &str) -> Result<(), CloudError> {
    let resp = api
        .call(&format!("delete server {name}"), |c| async move {
            servers_api::delete_server(&c, servers_api::DeleteServerParams { id }).await
        })
        .await;
    match resp {
        Ok(resp) => {
            if let Some(action) = resp.action {
                api.wait_action(&action, ACTION_TIMEOUT).await?;
            }
            Ok(())
        }
        Err(CloudError::Api { status: 404, .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

pub async fn delete_firewall(api: &HcloudApi, id: i64, name: &str) -> Result<(), CloudError> {
    // A firewall stays "in use" for a moment after its servers are deleted: retry that.
    let mut wait = api.backoff;
    for attempt in 0..10 {
        let resp = api
            .call(&format!("delete firewall {name}"), |c| async move {
                firewalls_api::delete_firewall(&c, firewalls_api::DeleteFirewallParams { id }).await
            })
            .await;
        match resp {
            Ok(()) | Err(CloudError::Api { status: 404, .. }) => return Ok(()),
            Err(CloudError::Api { code, .. }) if code == "resource_in_use" && attempt < 9 => {
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(10));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

pub async fn delete_ssh_key(api: &HcloudApi, id: i64, name: &str) -> Result<(), CloudError> {
    match api
        .call(&format!("delete SSH key {name}"), |c| async move {
            ssh_keys_api::delete_ssh_key(&c, ssh_keys_api::DeleteSshKeyParams { id }).await
        })
        .await
    {
        Ok(()) | Err(CloudError::Api { status: 404, .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Deletes everything labelled with `selector`: servers first (in parallel), then firewalls
/// (which cannot go while applied), then SSH keys; then checks no server is left.
pub async fn delete_labelled(
    api: &HcloudApi,
    selector: &str,
    deleted: &mut Deleted,
) -> Result<(), CloudError> {
    let servers = list_servers(api, Some(selector)).await?;
    let results: Vec<(String, Result<(), CloudError>)> = futures::stream::iter(servers)
        .map(|s| async move { (s.name.clone(), delete_server(api, s.id, &s.name).await) })
        .buffer_unordered(10)
        .collect()
        .await;
    let mut first_error = None;
    for (name, r) in results {
        match r {
            Ok(()) => deleted.servers.push(name),
            Err(e) => {
                tracing::error!("could not delete server {name}: {e}");
                first_error.get_or_insert(e);
            }
        }
    }
    for f in list_firewalls(api, Some(selector)).await? {
        match delete_firewall(api, f.id, &f.name).await {
            Ok(()) => deleted.firewalls.push(f.name),
            Err(e) => {
                tracing::error!("could not delete firewall {}: {e}", f.name);
                first_error.get_or_insert(e);
            }
        }
    }
    for k in list_ssh_keys(api, Some(selector)).await? {
        match delete_ssh_key(api, k.id, &k.name).await {
            Ok(()) => deleted.ssh_keys.push(k.name),
            Err(e) => {
                tracing::error!("could not delete SSH key {}: {e}", k.name);
                first_error.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    let left = list_servers(api, Some(selector)).await?;
    if !left.is_empty() {
        return Err(CloudError::Invalid {
            field: "teardown".into(),
            message: format!("{} server(s) still listed after deletion; run `viewerfleet down` again or delete them in the Hetzner Console", left.len()),
        });
    }
    Ok(())
}

/// Deletes every resource of one run, retrying the whole pass once on failure.
pub async fn teardown(api: &HcloudApi, run_id: &str) -> Result<Deleted, CloudError> {
    let selector = format!("{LABEL_RUN}={run_id}");
    let mut deleted = Deleted::default();
    let mut last = None;
    for pass in 0..2 {
        match delete_labelled(api, &selector, &mut deleted).await {
            Ok(()) => return Ok(deleted),
            Err(e) => {
                tracing::warn!("teardown of {run_id} (pass {}): {e}", pass + 1);
                last = Some(e);
            }
        }
    }
    Err(last.unwrap_or(CloudError::Timeout {
        what: "teardown".into(),
    }))
}
