//! A Selenium Grid on Hetzner Cloud made for one run: `CloudFleet::up` sizes the fleet,
//! provisions hub and IPv6-only nodes, waits for them to register (dropping or replacing
//! stragglers) and keeps the run's heartbeat; `teardown` deletes it all, `hand_over` leaves
//! it to its TTL. `viewerfleet up` and the `hcloud` fleet both use it.

use super::api::HcloudApi;
use super::canary::{self, CanaryCost, CanaryProbe};
use super::heartbeat::Heartbeat;
use super::provision::{self, Base, Inventory, Named, ProvisionRequest, ServerInfo};
use super::reaper::{self, ReaperLink};
use super::{gc, guard, hub, pricing, sizing, CloudError};
use crate::model::scenario::fleet::{FleetPlan, HcloudFleetSpec, OnLimit, OnNodeFailure};
use crate::model::scenario::Plan;
use std::sync::Arc;
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
    /// Measure a canary node before the rest of the fleet is made (`fleet.canary`).
    pub canary: Option<Canary>,
    /// Asked, with what is about to be bought, before the first server is created (and
    /// again if a canary grows the fleet); `None`: go ahead (`--yes`).
    pub confirm: Option<Confirm>,
}

/// Asks whether to create what the sentence describes; `false` stops before it is created.
#[derive(Clone)]
pub struct Confirm(pub std::sync::Arc<dyn Fn(&str) -> bool + Send + Sync>);

impl std::fmt::Debug for Confirm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Confirm")
    }
}

/// Asks `confirm` (if any) about `what`; refuses with `NotConfirmed` when it says no.
fn confirmed(confirm: &Option<Confirm>, what: String) -> Result<(), CloudError> {
    match confirm {
        Some(ask) if !(ask.0)(&what) => Err(CloudError::NotConfirmed { what }),
        _ => Ok(()),
    }
}

/// What a canary node needs: the probe that plays viewers on it, and what the rest of the
/// fleet is sized for.
#[derive(Clone)]
pub struct Canary {
    pub probe: std::sync::Arc<dyn CanaryProbe>,
    /// Viewers of the whole run (light peers counted at their cost in viewers, set by
    /// `up` from its sizing) and per browser.
    pub viewers: u32,
    pub per_browser: u32,
}

impl std::fmt::Debug for Canary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Canary")
            .field("viewers", &self.viewers)
            .field("per_browser", &self.per_browser)
            .finish()
    }
}

/// What the canary node measured and what the fleet made of it.
#[derive(Debug, Clone, PartialEq)]
pub struct CanaryOutcome {
    pub cost: CanaryCost,
    /// The measured cost against the plan's budget, in one sentence.
    pub verdict: String,
    /// Outside `CANARY_MARGIN`.
    pub outside_margin: bool,
    /// Viewers per node and nodes as planned from the budget, and as made from the canary.
    pub planned: (u32, u32),
    pub made: (u32, u32),
}

/// A provisioned, registered fleet.
pub struct CloudFleet {
    api: HcloudApi,
    pub run_id: String,
    /// The first hub (`hubs[0]`) and its URL.
    pub hub: ServerInfo,
    pub hub_url: String,
    /// Every hub and its URL: viewers are spread over them.
    pub hubs: Vec<ServerInfo>,
    pub hub_urls: Vec<String>,
    /// Session requests in flight, from the hubs' measured rate (`hub_sizing`).
    pub max_parallel_starts: u32,
    /// Nodes registered with the hub.
    pub nodes: Vec<ServerInfo>,
    pub node_type: String,
    pub viewers_per_node: u32,
    /// Why fewer nodes than planned run, if so.
    pub shortfall: Option<String>,
    /// What the canary node measured, when the fleet was sized from one.
    pub canary: Option<CanaryOutcome>,
    /// API requests the `up` sent (retries included).
    pub up_requests: u64,
    /// When the run's TTL passes (Unix time): a kept fleet is deleted then.
    pub expires_at: i64,
    /// The controller's credentials at the hubs' routers (generated for this run; `Debug`
    /// does not show the password).
    pub credentials: crate::grid::auth::GridCredentials,
    /// The process that deletes the run if this one dies first (none in a process that
    /// runs no reapers, see `reaper::enable`).
    reaper: Option<Arc<ReaperLink>>,
    keep: bool,
    heartbeat: tokio::sync::Mutex<Option<Heartbeat>>,
    done: tokio::sync::Mutex<bool>,
}

impl std::fmt::Debug for CloudFleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloudFleet")
            .field("api", &self.api)
            .field("run_id", &self.run_id)
            .field("hub_urls", &self.hub_urls)
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

/// Checks what `up` needs beyond `plan`: where the controller is, and an SSH key. Warns
/// loudly when the scenario opted in to a hub open to the internet.
pub fn check_up(spec: &HcloudFleetSpec) -> Result<String, CloudError> {
    if spec.controller_ips.is_empty() {
        return Err(CloudError::Invalid {
            field: "controller_ips".into(),
            message: "is empty: list this machine's public address(es) so only it reaches the hub, e.g. [\"203.0.113.7/32\"] (see `curl -4 ifconfig.co`)".into(),
        });
    }
    let open = spec.open_to_the_internet();
    if !open.is_empty() {
        tracing::warn!(
            "!!! fleet.webdriver_open_to_the_internet: the hub's WebDriver port 4444 and SSH accept {}: ANYONE who finds the hub can start, watch and drive every browser of this run. Use this machine's address instead unless you really mean it !!!",
            open.join(", ")
        );
    }
    read_ssh_key(spec)
}

/// Reads what can be ordered and sizes the fleet; says what it chose and why.
pub async fn size(
    api: &HcloudApi,
    plan: &Plan,
    spec: &HcloudFleetSpec,
) -> Result<sizing::CloudSizing, CloudError> {
    let catalogue = pricing::fetch(api, &spec.location).await?;
    let sized = match plan.light.as_ref().filter(|l| l.peers > 0) {
        // Light peers run in browser pages on the nodes beside the viewers: the fleet is
        // sized for what they cost (`scenario_mix`, as `plan` prints it), with a Grid slot for
        // every page.
        Some(light) => {
            let mix = sizing::scenario_mix(spec, plan, light, &catalogue)?;
            tracing::info!(
                "{} real viewers + {} light peers (pages of {}; a light peer costs {:.3} of a viewer): the fleet is sized for {} viewers' worth, {} Grid sessions",
                mix.real,
                mix.light,
                mix.per_page,
                mix.light_as_viewers,
                mix.fleet.viewers,
                mix.fleet.sessions
            );
            mix.fleet
        }
        None => sizing::plan(
            spec,
            plan.viewers,
            plan.per_browser,
            plan.duration,
            sizing::Pace::of(plan),
            &catalogue,
        )?,
    };
    if let Some(cheapest) = &sized.cheapest_over_limit {
        tracing::info!(
            "fleet.server_limit {}: {} × {} ({} servers, {:.4} {cur}/h) instead of the cheapest {} × {} ({} servers, {:.4} {cur}/h)",
            sized.server_limit,
            sized.chosen.nodes,
            sized.chosen.offer.name,
            sized.servers,
            sized.hourly_net,
            cheapest.nodes,
            cheapest.offer.name,
            cheapest.nodes + 1,
            sized.hourly_with(cheapest),
            cur = sized.currency,
        );
    }
    if sized.over_limit() {
        tracing::warn!(
            "{} servers are needed and fleet.server_limit is {}: Hetzner may refuse servers part-way (fleet.on_limit decides what happens then)",
            sized.servers,
            sized.server_limit
        );
    }
    for note in &sized.notes {
        tracing::warn!("{note}");
    }
    Ok(sized)
}

fn request(
    plan: &Plan,
    spec: &HcloudFleetSpec,
    sized: &sizing::CloudSizing,
    ssh_public_key: String,
    opts: &UpOptions,
) -> ProvisionRequest {
    let lifetime = sizing::PROVISIONING_ESTIMATE + plan.duration + spec.ttl();
    // A viewer slot holds one browser: with several viewers per browser, its link is theirs
    // together (`packing::link_profile`, the rule of `packing::shared_link`).
    let slot_link = plan
        .network
        .map(|n| crate::model::scenario::packing::link_profile(&n, plan.per_browser).link)
        .unwrap_or_default();
    ProvisionRequest {
        run_id: provision::new_run_id(&plan.name),
        scenario: plan.name.clone(),
        location: spec.location.clone(),
        image: spec.image.clone(),
        hub_type: sized.hub.name.clone(),
        hubs: sized.hubs.count,
        node_type: sized.chosen.offer.name.clone(),
        nodes: sized.chosen.nodes,
        viewers_per_node: sized.chosen.viewers_per_node,
        browsers_per_node: sized.slots_per_node(),
        sessions: sized.sessions,
        expires_at: chrono::Utc::now()
            .timestamp()
            .saturating_add(i64::try_from(lifetime.as_secs()).unwrap_or(i64::MAX)),
        ssh_public_key,
        controller_ips: spec.controller_ips.clone(),
        slot_link,
        viewer_slots_script: opts.viewer_slots_script.clone(),
        parallel_creates: spec.parallel_creates,
        secrets: crate::grid::auth::GridSecrets::generate(),
    }
}

impl CloudFleet {
    /// Provisions the fleet for `plan`. On error, Ctrl-C/SIGTERM (through `cancel`) or a panic,
    /// everything created is deleted before this returns.
    pub async fn up(
        api: &HcloudApi,
        plan: &Plan,
        spec: &HcloudFleetSpec,
        mut opts: UpOptions,
        cancel: &CancellationToken,
    ) -> Result<CloudFleet, CloudError> {
        spec.validate(plan.viewers)
            .map_err(|(field, message)| CloudError::Invalid { field, message })?;
        let ssh_public_key = check_up(spec)?;
        let before = api.requests();
        let limited_before = api.rate_limited();
        gc::warn_about_leftovers(api, None).await;
        let sized = size(api, plan, spec).await?;
        // A canary sizes the nodes for the fleet's viewers, light peers counted at their cost.
        if let Some(canary) = opts.canary.as_mut() {
            canary.viewers = sized.viewers;
        }
        // Nothing that costs money has been asked of the API before this.
        confirmed(
            &opts.confirm,
            format!(
                "{} hub(s) ({}) and {} × {} nodes in {} for about {:.2} {} per hour ({:.2} {} for the planned run, billed per started hour{})",
                sized.hubs.count,
                sized.hub.name,
                sized.chosen.nodes,
                sized.chosen.offer.name,
                spec.location,
                sized.hourly_net,
                sized.currency,
                sized.run_net,
                sized.currency,
                if opts.canary.is_some() {
                    "; a canary node may change the number of nodes"
                } else {
                    ""
                }
            ),
        )?;
        let req = request(plan, spec, &sized, ssh_public_key, &opts);
        let run_id = req.run_id.clone();
        let expires_at = req.expires_at;
        let credentials = req.secrets.controller.clone();
        // Before the first create, so that it sees every server of the run.
        let reaper = reaper::start(api, &run_id)?;
        tracing::info!(
            "run {run_id}: creating {} hub(s) ({}) and {} × {} IPv6-only nodes in {} ({} viewers per node, ≈{:.2} {}/h)",
            req.hubs, req.hub_type, req.nodes, req.node_type, spec.location, req.viewers_per_node, sized.hourly_net, sized.currency
        );
        let offer = sized.chosen.offer.clone();
        let work = provision(
            api.clone(),
            req,
            spec.clone(),
            opts.clone(),
            offer,
            cancel.clone(),
        );
        let done = guard::teardown_unless_ok(api, &run_id, cancel, reaper.as_deref(), work).await?;
        let up_requests = api.requests() - before;
        tracing::info!(
            "run {run_id}: up used {up_requests} Hetzner API requests ({} answered 429) of the project's 3600 per hour",
            api.rate_limited() - limited_before
        );
        Ok(CloudFleet {
            api: api.clone(),
            run_id,
            hub: done.hubs[0].clone(),
            hub_url: done.hub_urls[0].clone(),
            hubs: done.hubs,
            hub_urls: done.hub_urls,
            max_parallel_starts: sized.hubs.max_parallel_starts,
            nodes: done.nodes,
            node_type: sized.chosen.offer.name.clone(),
            viewers_per_node: done.viewers_per_node,
            shortfall: done.shortfall,
            canary: done.canary,
            up_requests,
            expires_at,
            credentials,
            reaper,
            keep: opts.keep,
            heartbeat: tokio::sync::Mutex::new(Some(done.heartbeat)),
            done: tokio::sync::Mutex::new(false),
        })
    }

    /// For the run engine: the fleet of a `kind: hcloud` plan, with the API from
    /// `HCLOUD_ENDPOINT`/`HCLOUD_TOKEN` (or `fleet.token_file`) and the hub override from
    /// `VIEWERFLEET_HCLOUD_HUB_URL`. `keep` is `run --keep`. Tears down before returning an error.
    /// `canary`: the probe that measures a canary node, when `fleet.canary` asks for one.
    pub async fn open(
        plan: &Plan,
        keep: bool,
        viewer_slots_script: Option<String>,
        canary: Option<std::sync::Arc<dyn CanaryProbe>>,
        confirm: Option<Confirm>,
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
            canary: canary.map(|probe| Canary {
                probe,
                viewers: plan.viewers,
                per_browser: plan.per_browser,
            }),
            confirm,
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
            "hub_urls": self.hub_urls,
            "hub": {"name": self.hub.name, "ipv4": self.hub.ipv4, "ipv6": self.hub.ipv6_host().map(|a| a.to_string())},
            "hubs": self.hubs.iter().map(|h| serde_json::json!({"name": h.name, "ipv4": h.ipv4, "ipv6": h.ipv6_host().map(|a| a.to_string())})).collect::<Vec<_>>(),
            "nodes": self.nodes.iter().map(|n| serde_json::json!({"name": n.name, "ipv6_net": n.ipv6_net})).collect::<Vec<_>>(),
            "node_type": self.node_type,
            "viewers_per_node": self.viewers_per_node,
            "capacity": self.capacity(),
            "canary": self.canary.as_ref().map(|c| serde_json::json!({
                "verdict": c.verdict,
                "outside_margin": c.outside_margin,
                "cost": c.cost,
                "planned": {"viewers_per_node": c.planned.0, "nodes": c.planned.1},
                "made": {"viewers_per_node": c.made.0, "nodes": c.made.1},
            })),
        })
    }

    /// [`Self::inventory`] with the hubs' router credentials (`grid_credentials`), for a
    /// file of mode 0600 that later runs read (`fleet: {kind: grid, inventory: FILE}`).
    pub fn inventory_with_credentials(&self) -> serde_json::Value {
        let mut inventory = self.inventory();
        inventory["grid_credentials"] = serde_json::json!({
            "username": self.credentials.username,
            "password": self.credentials.password.expose(),
        });
        inventory
    }

    /// Heartbeats sent so far.
    pub async fn heartbeats(&self) -> u64 {
        self.heartbeat
            .lock()
            .await
            .as_ref()
            .map_or(0, Heartbeat::beats)
    }

    /// Leaves the fleet running without a controller: the heartbeat stops and its label is
    /// removed, so `gc` goes by the run's TTL alone (`viewerfleet up`, `run --keep`).
    /// Its reaper then deletes it at its TTL.
    pub async fn hand_over(&self) -> Result<(), CloudError> {
        let handed = match self.heartbeat.lock().await.take() {
            Some(beat) => beat.hand_over().await,
            None => Ok(()),
        };
        if let Some(r) = &self.reaper {
            r.keep(self.expires_at);
        }
        handed
    }

    /// The reaper's PID and log, when the run has one.
    pub fn reaper(&self) -> Option<(u32, &std::path::Path)> {
        self.reaper.as_ref().map(|r| (r.pid(), r.log()))
    }

    /// Deletes every resource of the run, once; with `keep`, hands it over and says how to
    /// delete it later.
    pub async fn teardown(&self) -> Result<(), CloudError> {
        self.end(self.keep).await
    }

    /// Deletes every resource of the run, `--keep` or not: for a fleet that turned out
    /// unusable.
    pub async fn discard(&self) -> Result<(), CloudError> {
        self.end(false).await
    }

    async fn end(&self, keep: bool) -> Result<(), CloudError> {
        let mut done = self.done.lock().await;
        if *done {
            return Ok(());
        }
        *done = true;
        if keep {
            self.hand_over().await?;
            tracing::warn!(
                "--keep: leaving run {} up until its TTL; delete it with `viewerfleet down {}`",
                self.run_id,
                self.run_id
            );
            return Ok(());
        }
        if let Some(beat) = self.heartbeat.lock().await.take() {
            beat.stop().await;
        }
        let before = self.api.requests();
        let deleted = match provision::teardown(&self.api, &self.run_id).await {
            Ok(deleted) => deleted,
            Err(e) => {
                if let Some(r) = &self.reaper {
                    r.take_over();
                }
                return Err(e);
            }
        };
        if let Some(r) = &self.reaper {
            r.done();
        }
        tracing::info!(
            "run {}: deleted {} ({} API requests)",
            self.run_id,
            deleted.summary(),
            self.api.requests() - before
        );
        Ok(())
    }
}

/// What provisioning hands to the fleet.
struct Provisioned {
    hubs: Vec<ServerInfo>,
    hub_urls: Vec<String>,
    nodes: Vec<ServerInfo>,
    viewers_per_node: u32,
    shortfall: Option<String>,
    canary: Option<CanaryOutcome>,
    heartbeat: Heartbeat,
}

/// The work `guard` runs: base (key, firewalls, hubs), nodes (with a canary node: that one
/// first, measured, then the rest sized from it), registration.
async fn provision(
    api: HcloudApi,
    mut req: ProvisionRequest,
    spec: HcloudFleetSpec,
    opts: UpOptions,
    offer: pricing::Offer,
    cancel: CancellationToken,
) -> Result<Provisioned, CloudError> {
    let base = provision::create_base(&api, &req, &cancel).await?;
    let heartbeat = Heartbeat::start(&api, &base.hub, spec.heartbeat_interval());
    for hub in &base.hubs {
        tracing::info!("hub {} created", hub.name);
    }
    let urls = hub::hub_urls(&base.hubs, opts.hub_url.as_deref());
    let (mut first, canary) = match &opts.canary {
        None => (Vec::new(), None),
        Some(c) => {
            let (node, outcome) = canary_node(
                &api, &mut req, &spec, &opts, &base, &urls, &offer, c, &cancel,
            )
            .await?;
            (node, Some(outcome))
        }
    };
    // Node numbers go on after the canary's (a deleted canary's name stays taken until it
    // is gone), and replacements after the last.
    let (from, count) = match &canary {
        None => (0, req.nodes),
        Some(_) => (1, req.nodes - first.len() as u32),
    };
    let (nodes, limit_note) = create_nodes(&api, &req, &spec, &base, from, count, &cancel).await?;
    first.extend(nodes);
    let (nodes, missing_note) = register(
        &api,
        &req,
        &spec,
        &opts,
        &base,
        &urls,
        first,
        from + count,
        &cancel,
    )
    .await?;
    let shortfall = match (limit_note, missing_note) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    };
    Ok(Provisioned {
        hubs: base.hubs,
        hub_urls: urls,
        nodes,
        viewers_per_node: req.viewers_per_node,
        shortfall,
        canary,
        heartbeat,
    })
}

/// The canary: one node, registered, measured with viewers through the first hub; then
/// `req` is sized again from what it measured (the same server type). A canary whose node
/// now holds more browsers than a node should is deleted, and the rest made in its place.
#[allow(clippy::too_many_arguments)]
async fn canary_node(
    api: &HcloudApi,
    req: &mut ProvisionRequest,
    spec: &HcloudFleetSpec,
    opts: &UpOptions,
    base: &Base,
    urls: &[String],
    offer: &pricing::Offer,
    c: &Canary,
    cancel: &CancellationToken,
) -> Result<(Vec<ServerInfo>, CanaryOutcome), CloudError> {
    let progress = |_: u32, _: u32| tracing::info!("canary node created");
    let created = provision::create_nodes(api, req, base, 0, 1, cancel, &progress).await?;
    let mut actions = base.actions.clone();
    actions.extend(created.actions);
    provision::wait(api, &actions).await?;
    if let Some(message) = created.limit {
        return Err(CloudError::LimitExceeded {
            what: "the canary node".into(),
            message,
        });
    }
    let mut one = req.clone();
    one.nodes = 1;
    let (canary_nodes, _) =
        register(api, &one, spec, opts, base, urls, created.nodes, 1, cancel).await?;
    let viewers = canary::canary_viewers(req.viewers_per_node, c.per_browser);
    tracing::info!(
        "canary: measuring {viewers} viewers on {} ({}) before the other nodes are made",
        canary_nodes[0].name,
        req.node_type
    );
    let cost = tokio::select! {
        r = c.probe.measure(&urls[0], &req.secrets.controller, &req.node_type, viewers) => r,
        _ = cancel.cancelled() => return Err(CloudError::Cancelled),
    }
    .map_err(|e| CloudError::Invalid {
        field: "canary".into(),
        message: format!("the canary node could not be measured: {e:#}"),
    })?;
    let planned_cost = sizing::cost_per_viewer(&spec.budget, c.per_browser);
    let (verdict, outside_margin) = canary::judge(planned_cost, &cost);
    if outside_margin {
        tracing::warn!("{verdict}");
    } else {
        tracing::info!("{verdict}");
    }
    let budget = canary::measured_budget(&spec.budget, &cost);
    let (per_node, _) =
        sizing::viewers_per_node(offer, &budget, c.per_browser, spec.viewers_per_node);
    let per_node = per_node.max(1);
    let planned = (req.viewers_per_node, req.nodes);
    let made = (per_node, c.viewers.div_ceil(per_node));
    if made.1 > planned.1 {
        confirmed(
            &opts.confirm,
            format!(
                "{} more × {} nodes than planned ({} instead of {}: {verdict})",
                made.1 - planned.1,
                req.node_type,
                made.1,
                planned.1
            ),
        )?;
    }
    req.viewers_per_node = per_node;
    req.browsers_per_node = sizing::slots_per_node(per_node, c.per_browser, req.sessions, made.1);
    req.nodes = made.1;
    let keep = req.viewers_per_node >= planned.0;
    if !keep {
        // Its Grid offers more slots than a node of this fleet should carry.
        delete_nodes(api, &req.run_id, &canary_nodes).await?;
    }
    let outcome = CanaryOutcome {
        cost,
        verdict,
        outside_margin,
        planned,
        made,
    };
    Ok((if keep { canary_nodes } else { Vec::new() }, outcome))
}

/// Creates `count` nodes numbered from `first` and waits (with the hub's and firewalls'
/// actions) until they run; applies `on_limit` when Hetzner refuses servers part-way.
async fn create_nodes(
    api: &HcloudApi,
    req: &ProvisionRequest,
    spec: &HcloudFleetSpec,
    base: &Base,
    first: u32,
    count: u32,
    cancel: &CancellationToken,
) -> Result<(Vec<ServerInfo>, Option<String>), CloudError> {
    let progress = |done: u32, total: u32| tracing::info!("nodes created: {done}/{total}");
    let created = provision::create_nodes(api, req, base, first, count, cancel, &progress).await?;
    let mut actions = base.actions.clone();
    actions.extend(created.actions);
    provision::wait(api, &actions).await?;
    let Some(message) = created.limit else {
        return Ok((created.nodes, None));
    };
    let what = format!("node {} of {}", created.nodes.len() + 1, req.nodes);
    match spec.on_limit {
        OnLimit::RunWithWhatExists if !created.nodes.is_empty() => {
            let note = format!(
                "Hetzner refused {what} (resource_limit_exceeded): running with {} nodes",
                created.nodes.len()
            );
            tracing::warn!("{note}");
            Ok((created.nodes, Some(note)))
        }
        _ => Err(CloudError::LimitExceeded { what, message }),
    }
}

/// One registration round: opens the hub's firewall to `nodes`, waits for them to register,
/// returns those that did not.
#[allow(clippy::too_many_arguments)]
async fn register_round(
    api: &HcloudApi,
    req: &ProvisionRequest,
    spec: &HcloudFleetSpec,
    opts: &UpOptions,
    base: &Base,
    urls: &[String],
    nodes: &[ServerInfo],
    cancel: &CancellationToken,
) -> Result<Vec<ServerInfo>, CloudError> {
    let rules = provision::hub_rules(&req.controller_ips, &provision::hosts(nodes));
    let actions = provision::set_rules(api, base.hub_firewall, rules).await?;
    provision::wait(api, &actions).await?;
    tracing::info!(
        "waiting up to {} for {} nodes to boot and register",
        humantime::format_duration(spec.register_timeout()),
        nodes.len()
    );
    let report = |k: usize, n: usize| tracing::info!("nodes registered with the hub: {k}/{n}");
    let poll = opts.hub_poll.unwrap_or(Duration::from_secs(5));
    let up = hub::wait_for_nodes(
        urls,
        &req.secrets.controller,
        nodes,
        spec.register_timeout(),
        poll,
        cancel,
        &report,
    )
    .await?;
    Ok(nodes
        .iter()
        .filter(|n| !up.contains(&n.name))
        .cloned()
        .collect())
}

/// Deletes `servers` of the run (nodes that never registered).
async fn delete_nodes(
    api: &HcloudApi,
    run: &str,
    servers: &[ServerInfo],
) -> Result<(), CloudError> {
    let inv = Inventory {
        servers: servers
            .iter()
            .map(|s| Named {
                id: s.id,
                name: s.name.clone(),
            })
            .collect(),
        ..Default::default()
    };
    provision::delete_inventory(api, run, inv, 10)
        .await
        .map(|_| ())
}

/// Waits for the nodes to register; replaces stragglers once (`on_node_failure: replace`,
/// numbered from `next_number`), then drops those still missing. Returns the registered
/// nodes and a note if any went.
#[allow(clippy::too_many_arguments)]
async fn register(
    api: &HcloudApi,
    req: &ProvisionRequest,
    spec: &HcloudFleetSpec,
    opts: &UpOptions,
    base: &Base,
    urls: &[String],
    mut nodes: Vec<ServerInfo>,
    next_number: u32,
    cancel: &CancellationToken,
) -> Result<(Vec<ServerInfo>, Option<String>), CloudError> {
    let mut missing = register_round(api, req, spec, opts, base, urls, &nodes, cancel).await?;
    if !missing.is_empty() && spec.on_node_failure == OnNodeFailure::Replace {
        tracing::warn!(
            "{} node(s) did not register; replacing them once",
            missing.len()
        );
        delete_nodes(api, &req.run_id, &missing).await?;
        nodes.retain(|n| !missing.contains(n));
        let progress =
            |done: u32, total: u32| tracing::info!("replacements created: {done}/{total}");
        let more = provision::create_nodes(
            api,
            req,
            base,
            next_number,
            missing.len() as u32,
            cancel,
            &progress,
        )
        .await?;
        provision::wait(api, &more.actions).await?;
        nodes.extend(more.nodes);
        missing = register_round(api, req, spec, opts, base, urls, &nodes, cancel).await?;
    }
    let mut note = None;
    if !missing.is_empty() {
        let names: Vec<&str> = missing.iter().map(|n| n.name.as_str()).collect();
        tracing::warn!(
            "dropping {} node(s) that never registered: {}",
            missing.len(),
            names.join(", ")
        );
        delete_nodes(api, &req.run_id, &missing).await?;
        nodes.retain(|n| !missing.contains(n));
        note = Some(format!(
            "{} node(s) never registered and were deleted",
            missing.len()
        ));
    }
    if nodes.is_empty() {
        return Err(CloudError::Timeout {
            what: "any viewer node to register with the hub".into(),
        });
    }
    Ok((nodes, note))
}
