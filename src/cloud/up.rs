//! A Selenium Grid on Hetzner Cloud made for one run: `CloudFleet::up` sizes the fleet,
//! provisions hub and IPv6-only nodes, waits for them to register (dropping or replacing
//! stragglers); `teardown` deletes it all. `viewerfleet up` and the `hcloud` fleet both use it.

use super::api::HcloudApi;
use super::cloudinit::SlotShaping;
use super::provision::{self, ProvisionRequest, ServerInfo};
use super::{guard, hub, pricing, sizing, CloudError};
use crate::model::scenario::fleet::{FleetPlan, HcloudFleetSpec, OnLimit, OnNodeFailure};
use crate::model::scenario::Plan;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Options that do not come from the scenario.
#[derive(Debug, Clone, Default)]
pub struct UpOptions {
    /// Leave the servers when the fleet shuts down (`--keep`); `gc` removes them after the TTL.
    pub keep: bool,
    /// Text of `grid/viewer-slots.sh`, delivered to the nodes.
    pub viewer_slots_script: Option<String>,
    /// Interval between polls of the hub's `/status` [default: 5 s].
    pub hub_poll: Option<Duration>,
    /// Reach the hub here instead of its public address (`VIEWERFLEET_HCLOUD_HUB_URL`: an SSH
    /// tunnel, or the fake's simulated hub in a dry run).
    pub hub_url: Option<String>,
}

/// A provisioned, registered fleet.
pub struct CloudFleet {
    api: HcloudApi,
    pub run_id: String,
    pub hub: ServerInfo,
    pub hub_url: String,
    /// Nodes registered with the hub.
    pub nodes: Vec<ServerInfo>,
    pub node_type: String,
    pub viewers_per_node: u32,
    /// Why fewer nodes than planned run, if so.
    pub shortfall: Option<String>,
    keep: bool,
    /// The nodes were given the viewer-slot script.
    pub tc_slots: bool,
    /// The scenario has a network profile.
    pub shaped: bool,
    done: tokio::sync::Mutex<bool>,
}

impl std::fmt::Debug for CloudFleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloudFleet")
            .field("api", &self.api)
            .field("run_id", &self.run_id)
            .field("hub_url", &self.hub_url)
            .field("nodes", &self.nodes.len())
            .finish()
    }
}

fn read_ssh_key(spec: &HcloudFleetSpec) -> Result<String, CloudError> {
    let candidates: Vec<String> = match &spec.ssh_public_key {
        Some(p) => vec![p.clone()],
        None => vec!["~/.ssh/id_ed25519.pub".into(), "~/.ssh/id_rsa.pub".into()],
    };
    for path in &candidates {
        if let Ok(text) = std::fs::read_to_string(super::token::expand_home(path)) {
            let line = text
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or_default()
                .trim()
                .to_string();
            if line.starts_with("ssh-") || line.starts_with("ecdsa-") {
                return Ok(line);
            }
            return Err(CloudError::Invalid {
                field: "ssh_public_key".into(),
                message: format!("{path} is not an OpenSSH public key (ssh-ed25519 AAAA…)"),
            });
        }
    }
    Err(CloudError::Invalid {
        field: "ssh_public_key".into(),
        message: format!("no SSH public key at {}; create one with `ssh-keygen -t ed25519` or set fleet.ssh_public_key", candidates.join(" or ")),
    })
}

/// Checks what `up` needs beyond `plan`: where the controller is, and an SSH key.
pub fn check_up(spec: &HcloudFleetSpec) -> Result<String, CloudError> {
    if spec.controller_ips.is_empty() {
        return Err(CloudError::Invalid {
            field: "controller_ips".into(),
            message: "is empty: list this machine's public address(es) so only it reaches the hub, e.g. [\"203.0.113.7/32\"] (see `curl -4 ifconfig.co`)".into(),
        });
    }
    read_ssh_key(spec)
}

impl CloudFleet {
    /// Provisions the fleet for `plan`. On error, Ctrl-C/SIGTERM (through `cancel`) or a panic,
    /// everything created is deleted before this returns.
    pub async fn up(
        api: &HcloudApi,
        plan: &Plan,
        spec: &HcloudFleetSpec,
        opts: UpOptions,
        cancel: &CancellationToken,
    ) -> Result<CloudFleet, CloudError> {
        spec.validate(plan.viewers)
            .map_err(|(field, message)| CloudError::Invalid { field, message })?;
        let ssh_public_key = check_up(spec)?;
        let catalogue = pricing::fetch(api, &spec.location).await?;
        let sized = sizing::plan(spec, plan.viewers, plan.duration, &catalogue)?;
        let run_id = provision::new_run_id(&plan.name);
        let lifetime = sizing::PROVISIONING_ESTIMATE + plan.duration + spec.ttl();
        let shaping = plan
            .network
            .map(|n| SlotShaping {
                down_kbit: n.download_kbps,
                up_kbit: n.upload_kbps,
                delay_ms: n.latency_ms,
            })
            .unwrap_or_default();
        let req = ProvisionRequest {
            run_id: run_id.clone(),
            scenario: plan.name.clone(),
            location: spec.location.clone(),
            image: spec.image.clone(),
            hub_type: spec.hub_type.clone(),
            node_type: sized.chosen.offer.name.clone(),
            nodes: sized.chosen.nodes,
            viewers_per_node: sized.chosen.viewers_per_node,
            expires_at: chrono::Utc::now().timestamp() + lifetime.as_secs() as i64,
            ssh_public_key,
            controller_ips: spec.controller_ips.clone(),
            shaping,
            viewer_slots_script: opts.viewer_slots_script.clone(),
            parallel_creates: spec.parallel_creates,
        };
        tracing::info!(
            "run {run_id}: creating 1 hub ({}) and {} × {} IPv6-only nodes in {} ({} viewers per node, ≈{:.2} {}/h)",
            spec.hub_type, req.nodes, req.node_type, spec.location, req.viewers_per_node, sized.hourly_net, sized.currency
        );
        let work =
            provision_and_register(api.clone(), req, spec.clone(), opts.clone(), cancel.clone());
        let (hub, hub_url, nodes, shortfall) =
            guard::teardown_unless_ok(api, &run_id, cancel, work).await?;
        Ok(CloudFleet {
            api: api.clone(),
            run_id,
            hub,
            hub_url,
            nodes,
            node_type: sized.chosen.offer.name.clone(),
            viewers_per_node: sized.chosen.viewers_per_node,
            shortfall,
            keep: opts.keep,
            tc_slots: opts.viewer_slots_script.is_some(),
            shaped: plan.network.is_some(),
            done: tokio::sync::Mutex::new(false),
        })
    }

    /// For the run engine: the fleet of a `kind: hcloud` plan, with the API from
    /// `HCLOUD_ENDPOINT`/`HCLOUD_TOKEN` (or `fleet.token_file`) and the hub override from
    /// `VIEWERFLEET_HCLOUD_HUB_URL`. `keep` is `run --keep`. Tears down before returning an error.
    pub async fn open(
        plan: &Plan,
        keep: bool,
        viewer_slots_script: Option<String>,
        cancel: &CancellationToken,
    ) -> Result<CloudFleet, CloudError> {
        let FleetPlan::Hcloud(spec) = &plan.fleet else {
            return Err(CloudError::Invalid {
                field: "kind".into(),
                message: "not an hcloud fleet".into(),
            });
        };
        let api = HcloudApi::from_env(spec.token_file.as_deref())?;
        let hub_url = std::env::var(hub::HUB_URL_ENV)
            .ok()
            .filter(|u| !u.trim().is_empty());
        let opts = UpOptions {
            keep,
            viewer_slots_script,
            hub_poll: hub_url.as_ref().map(|_| Duration::from_millis(500)),
            hub_url,
        };
        CloudFleet::up(&api, plan, spec, opts, cancel).await
    }

    /// Viewers this fleet can hold.
    pub fn capacity(&self) -> u32 {
        self.nodes.len() as u32 * self.viewers_per_node
    }

    /// An inventory for `fleet: grid` and for people: run id, hub URL, nodes.
    pub fn inventory(&self) -> serde_json::Value {
        serde_json::json!({
            "run": self.run_id,
            "hub_url": self.hub_url,
            "hub": {"name": self.hub.name, "ipv4": self.hub.ipv4, "ipv6": self.hub.ipv6_host().map(|a| a.to_string())},
            "nodes": self.nodes.iter().map(|n| serde_json::json!({"name": n.name, "ipv6_net": n.ipv6_net})).collect::<Vec<_>>(),
            "node_type": self.node_type,
            "viewers_per_node": self.viewers_per_node,
            "capacity": self.capacity(),
        })
    }
}

type Registered = (ServerInfo, String, Vec<ServerInfo>, Option<String>);

async fn provision_and_register(
    api: HcloudApi,
    req: ProvisionRequest,
    spec: HcloudFleetSpec,
    opts: UpOptions,
    cancel: CancellationToken,
) -> Result<Registered, CloudError> {
    let (hub, hub_fw, key) = provision::create_hub(&api, &req, &cancel).await?;
    tracing::info!("hub {} is running", hub.name);
    let node_fw = {
        let rules = provision::node_rules(
            &req.controller_ips,
            &provision::nets(std::slice::from_ref(&hub)),
        );
        let request = hcloud::models::CreateFirewallRequest {
            apply_to: None,
            labels: None,
            name: String::new(),
            rules: Some(rules),
        };
        create_node_firewall(&api, &req, request).await?
    };
    let progress = |done: u32, total: u32| tracing::info!("nodes created: {done}/{total}");
    let (mut nodes, limit) = provision::create_nodes(
        &api, &req, &hub, node_fw, key, 0, req.nodes, &cancel, &progress,
    )
    .await?;
    let mut shortfall = None;
    if let Some(message) = limit {
        let what = format!("node {} of {}", nodes.len() + 1, req.nodes);
        match spec.on_limit {
            OnLimit::Teardown => return Err(CloudError::LimitExceeded { what, message }),
            OnLimit::RunWithWhatExists if nodes.is_empty() => {
                return Err(CloudError::LimitExceeded { what, message })
            }
            OnLimit::RunWithWhatExists => {
                let note = format!(
                    "Hetzner refused {what} (resource_limit_exceeded): running with {} nodes",
                    nodes.len()
                );
                tracing::warn!("{note}");
                shortfall = Some(note);
            }
        }
    }
    provision::set_rules(
        &api,
        hub_fw,
        provision::hub_rules(&req.controller_ips, &provision::nets(&nodes)),
    )
    .await?;
    let url = hub::hub_url(&hub, opts.hub_url.as_deref());
    let poll = opts.hub_poll.unwrap_or(Duration::from_secs(5));
    let report = |k: usize, n: usize| tracing::info!("nodes registered with the hub: {k}/{n}");
    tracing::info!(
        "waiting up to {} for {} nodes to boot and register",
        humantime::format_duration(spec.register_timeout()),
        nodes.len()
    );
    let mut up = hub::wait_for_nodes(
        &url,
        &nodes,
        spec.register_timeout(),
        poll,
        &cancel,
        &report,
    )
    .await?;
    let mut missing: Vec<ServerInfo> = nodes
        .iter()
        .filter(|n| !up.contains(&n.name))
        .cloned()
        .collect();
    if !missing.is_empty() && spec.on_node_failure == OnNodeFailure::Replace {
        tracing::warn!(
            "{} node(s) did not register; replacing them once",
            missing.len()
        );
        for n in &missing {
            provision::delete_server(&api, n.id, &n.name).await?;
        }
        nodes.retain(|n| up.contains(&n.name));
        let (more, _) = provision::create_nodes(
            &api,
            &req,
            &hub,
            node_fw,
            key,
            req.nodes,
            missing.len() as u32,
            &cancel,
            &progress,
        )
        .await?;
        nodes.extend(more);
        provision::set_rules(
            &api,
            hub_fw,
            provision::hub_rules(&req.controller_ips, &provision::nets(&nodes)),
        )
        .await?;
        up = hub::wait_for_nodes(
            &url,
            &nodes,
            spec.register_timeout(),
            poll,
            &cancel,
            &report,
        )
        .await?;
        missing = nodes
            .iter()
            .filter(|n| !up.contains(&n.name))
            .cloned()
            .collect();
    }
    if !missing.is_empty() {
        tracing::warn!(
            "dropping {} node(s) that never registered: {}",
            missing.len(),
            missing
                .iter()
                .map(|n| n.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        for n in &missing {
            provision::delete_server(&api, n.id, &n.name).await?;
        }
        nodes.retain(|n| up.contains(&n.name));
        let note = format!(
            "{} node(s) never registered and were deleted",
            missing.len()
        );
        shortfall = Some(match shortfall {
            Some(s) => format!("{s}; {note}"),
            None => note,
        });
    }
    if nodes.is_empty() {
        return Err(CloudError::Timeout {
            what: "any viewer node to register with the hub".into(),
        });
    }
    Ok((hub, url, nodes, shortfall))
}

async fn create_node_firewall(
    api: &HcloudApi,
    req: &ProvisionRequest,
    mut request: hcloud::models::CreateFirewallRequest,
) -> Result<i64, CloudError> {
    request.name = format!("vf-{}-nodes", req.run_id);
    request.labels = Some(std::collections::HashMap::from([
        (provision::LABEL_RUN.to_string(), req.run_id.clone()),
        (
            provision::LABEL_ROLE.to_string(),
            "node-firewall".to_string(),
        ),
        (
            provision::LABEL_EXPIRES.to_string(),
            req.expires_at.to_string(),
        ),
    ]));
    let resp = api
        .call("create node firewall", |c| {
            let r = request.clone();
            async move {
                hcloud::apis::firewalls_api::create_firewall(
                    &c,
                    hcloud::apis::firewalls_api::CreateFirewallParams {
                        create_firewall_request: r,
                    },
                )
                .await
            }
        })
        .await?;
    for action in resp.actions.iter().flatten() {
        api.wait_action(action, Duration::from_secs(600)).await?;
    }
    resp.firewall
        .map(|f| f.id)
        .ok_or_else(|| CloudError::Transport {
            what: "create node firewall".into(),
            message: "the answer holds no firewall".into(),
        })
}

impl CloudFleet {
    /// Deletes every resource of the run, once; with `keep`, leaves them and says how to
    /// delete them later.
    pub async fn teardown(&self) -> Result<(), CloudError> {
        let mut done = self.done.lock().await;
        if *done {
            return Ok(());
        }
        *done = true;
        if self.keep {
            tracing::warn!(
                "--keep: leaving run {} up; delete it with `viewerfleet down {}`",
                self.run_id,
                self.run_id
            );
            return Ok(());
        }
        let deleted = provision::teardown(&self.api, &self.run_id).await?;
        tracing::info!("run {}: deleted {}", self.run_id, deleted.summary());
        Ok(())
    }
}
