//! How many nodes of which type a run needs, and what it costs: viewers per node from the
//! per-viewer budget (CPU and memory, whichever binds first); the cheapest fleet of the
//! types on sale (or listed, or forced), and when that needs more servers than the project
//! may hold, the cheapest fleet that fits (bigger types); plus the hubs, sized from what a
//! hub was measured to cost (`hub_sizing`); billed per started hour.

use super::hub_sizing::{self, HubDemand, HubPlan};
use super::pricing::{Catalogue, Offer};
use super::CloudError;
use crate::model::scenario::fleet::{HcloudFleetSpec, ViewerBudget};
use std::io::Write;
use std::time::Duration;

/// Time from `up` to every node registered, used for the cost estimate (boot, apt, jar).
pub(crate) const PROVISIONING_ESTIMATE: Duration = Duration::from_secs(10 * 60);

/// Viewers one node of `offer` holds and what limits it (`CPU`, `memory`, `viewers_per_node`),
/// with `per_browser` viewers to a browser: each browser costs the budget's per-browser
/// part once and each viewer its per-viewer part. A node holds whole browsers (so the
/// Grid's sessions, one per browser, never split a browser's viewers), or, when not even
/// one full browser fits, one browser of as many viewers as fit.
pub fn viewers_per_node(
    offer: &Offer,
    budget: &ViewerBudget,
    per_browser: u32,
    forced: Option<u32>,
) -> (u32, &'static str) {
    if let Some(n) = forced {
        return (n, "viewers_per_node");
    }
    let cpu = offer.cores as f64 * budget.cpu_target - budget.node_reserve_cpu;
    let mem = offer.memory_gb * 1024.0 - budget.node_reserve_memory_mb;
    let fit_cpu = fit(
        cpu,
        budget.cpu_per_viewer,
        budget.cpu_per_browser,
        per_browser,
    );
    let fit_mem = fit(
        mem,
        budget.memory_mb_per_viewer,
        budget.memory_mb_per_browser,
        per_browser,
    );
    if fit_cpu <= fit_mem {
        (fit_cpu, "CPU")
    } else {
        (fit_mem, "memory")
    }
}

/// Viewers `available` holds at `per_viewer` each plus `per_browser_cost` per browser of
/// `n` viewers.
fn fit(available: f64, per_viewer: f64, per_browser_cost: f64, n: u32) -> u32 {
    let n = n.max(1);
    let browser = per_browser_cost + n as f64 * per_viewer;
    if available <= 0.0 || browser <= 0.0 {
        return 0;
    }
    let full = (available / browser).floor();
    if full >= 1.0 {
        return (full as u32).saturating_mul(n);
    }
    let partial = ((available - per_browser_cost) / per_viewer.max(1e-9)).floor();
    partial.clamp(0.0, (n - 1) as f64) as u32
}

/// Effective cost of one viewer at `per_browser` viewers per browser: (CPU, MB).
pub(crate) fn cost_per_viewer(budget: &ViewerBudget, per_browser: u32) -> (f64, f64) {
    let n = per_browser.max(1) as f64;
    (
        budget.cpu_per_viewer + budget.cpu_per_browser / n,
        budget.memory_mb_per_viewer + budget.memory_mb_per_browser / n,
    )
}

/// One way to run the viewers.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeOption {
    pub offer: Offer,
    pub viewers_per_node: u32,
    pub limited_by: &'static str,
    pub nodes: u32,
    /// Nodes only, net per hour.
    pub nodes_hourly_net: f64,
}

/// The servers one cloud run needs (nodes, hubs, what they cost), from its scenario's
/// `fleet: hcloud` plan (`model::scenario::fleet::FleetPlan`, a different thing: where
/// the viewers run).
#[derive(Debug, Clone, PartialEq)]
pub struct CloudSizing {
    pub viewers: u32,
    /// Viewers per browser (`viewers.per_browser`): a node's Grid holds a session each.
    pub per_browser: u32,
    pub chosen: NodeOption,
    /// Other types, cheapest first (for the user to compare).
    pub alternatives: Vec<NodeOption>,
    /// The cheapest fleet when it needs more servers than `server_limit` and `chosen` (the
    /// cheapest that fits) was taken instead.
    pub cheapest_over_limit: Option<NodeOption>,
    /// The hubs' type (`hubs.offer`).
    pub hub: Offer,
    /// The hub type was chosen from the catalogue (not set in fleet.hub_type).
    pub hub_default: bool,
    /// How many hubs, and the measured basis.
    pub hubs: HubPlan,
    pub location: String,
    pub currency: String,
    pub vat_rate: String,
    /// Hubs + nodes + the hubs' IPv4, net per hour.
    pub hourly_net: f64,
    pub hourly_gross: f64,
    /// Billed hours: provisioning + run + teardown, rounded up per started hour.
    pub billed_hours: u32,
    pub run_net: f64,
    pub run_gross: f64,
    /// What primary IPv4s on every node would have added per hour.
    pub ipv6_only_saving_hourly: f64,
    /// One primary IPv4 per hour (each hub has one).
    pub ipv4_hourly_net: f64,
    pub servers: u32,
    pub server_limit: u32,
    /// Grid sessions the run opens: one per browser of real viewers, one per page of light
    /// peers.
    pub sessions: u32,
    /// Deprecated types used, listed types skipped, and why.
    pub notes: Vec<String>,
}

impl CloudSizing {
    /// Grid slots a node offers: its viewers' browsers, or more when a mix's light pages
    /// (many peers a session, each dearer than a viewer's share) need more sessions than
    /// that over the fleet's nodes.
    pub(crate) fn slots_per_node(&self) -> u32 {
        slots_per_node(
            self.chosen.viewers_per_node,
            self.per_browser,
            self.sessions,
            self.chosen.nodes,
        )
    }

    /// Even the fleet with the fewest servers needs more than the project's limit.
    pub fn over_limit(&self) -> bool {
        self.servers > self.server_limit
    }

    /// Servers (hubs included) of the fleet with the fewest, chosen or not.
    pub fn fewest_servers(&self) -> u32 {
        self.alternatives
            .iter()
            .map(|o| o.nodes)
            .chain([self.chosen.nodes])
            .min()
            .unwrap_or(self.chosen.nodes)
            + self.hubs.count
    }

    /// The hubs per hour, their IPv4 included (net).
    pub(crate) fn hubs_hourly(&self) -> f64 {
        f64::from(self.hubs.count) * (self.hub.hourly_net + self.ipv4_hourly_net)
    }

    /// What a fleet of `nodes` costs per hour with these hubs (net).
    pub(crate) fn hourly_with(&self, nodes: &NodeOption) -> f64 {
        nodes.nodes_hourly_net + self.hubs_hourly()
    }
}

fn deprecated_note(field: &str, offer: &Offer) -> Option<String> {
    offer.unavailable_after.as_ref().map(|date| {
        format!(
            "fleet.{field} `{}` is deprecated in this location (orderable until {}); choose a current type soon",
            offer.name,
            &date[..date.len().min(10)]
        )
    })
}

/// What the run asks of the fleet beyond its viewers: the ramp the sessions arrive over
/// and how often every viewer is read (both through the hubs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pace {
    pub ramp: Duration,
    pub sampling: Duration,
}

impl Pace {
    /// The pace of a scenario's plan: its ramp and sampling interval.
    pub fn of(plan: &crate::model::scenario::Plan) -> Pace {
        Pace {
            ramp: plan.ramp,
            sampling: plan.sampling_interval,
        }
    }
}

/// The hubs for the run: of `fleet.hub_type` when set, else the cheapest that hold it.
fn plan_hubs(
    spec: &HcloudFleetSpec,
    sessions: u32,
    pace: Pace,
    cat: &Catalogue,
    notes: &mut Vec<String>,
) -> Result<HubPlan, CloudError> {
    let demand = HubDemand {
        sessions,
        ramp: pace.ramp,
        sampling: pace.sampling,
    };
    let forced = match &spec.hub_type {
        Some(t) => {
            let offer = cat.require("hub_type", t)?;
            notes.extend(deprecated_note("hub_type", offer));
            Some(offer)
        }
        None => None,
    };
    hub_sizing::plan(
        &demand,
        forced,
        &cat.offers,
        cat.ipv4_hourly_net,
        &hub_sizing::MEASURED,
    )
    .map_err(|e| match (e, forced) {
        (CloudError::Invalid { field, message }, None) => CloudError::Invalid {
            field,
            message: format!(
                "{message}; orderable in {}: {}",
                cat.location,
                cat.orderable()
            ),
        },
        (e, _) => e,
    })
}

/// The types the nodes may be: forced, listed (those orderable), or every current x86 type.
fn node_candidates<'a>(
    spec: &HcloudFleetSpec,
    cat: &'a Catalogue,
    notes: &mut Vec<String>,
) -> Result<Vec<&'a Offer>, CloudError> {
    if let Some(t) = &spec.node_type {
        let offer = cat.require("node_type", t)?;
        notes.extend(deprecated_note("node_type", offer));
        return Ok(vec![offer]);
    }
    let Some(listed) = &spec.node_types else {
        return Ok(cat.offers.iter().filter(|o| o.default_choice()).collect());
    };
    let mut out = Vec::new();
    for name in listed {
        match cat.require("node_types", name) {
            Ok(offer) => {
                notes.extend(deprecated_note("node_types", offer));
                out.push(offer);
            }
            Err(_) => notes.push(format!(
                "fleet.node_types: `{name}` skipped: it cannot be ordered in {}",
                cat.location
            )),
        }
    }
    if out.is_empty() {
        return Err(CloudError::Invalid {
            field: "node_types".into(),
            message: format!(
                "none of {} can be ordered in {}; orderable there now: {} (or remove node_types to choose from all of them)",
                listed.join(", "),
                cat.location,
                cat.orderable()
            ),
        });
    }
    Ok(out)
}

/// Sizes the fleet for `viewers` over `run` (the scenario's duration), their sessions
/// arriving over `pace.ramp`: the hubs that create and hold them, then the cheapest nodes,
/// or — when those need more servers than `server_limit` — the cheapest that fit.
pub fn plan(
    spec: &HcloudFleetSpec,
    viewers: u32,
    per_browser: u32,
    run: Duration,
    pace: Pace,
    cat: &Catalogue,
) -> Result<CloudSizing, CloudError> {
    let sessions = viewers.div_ceil(per_browser.max(1));
    plan_for_sessions(spec, viewers, per_browser, sessions, run, pace, cat)
}

/// A node's Grid slots: enough for its viewers' browsers and for its share of the run's
/// `sessions` over `nodes`.
pub(crate) fn slots_per_node(
    viewers_per_node: u32,
    per_browser: u32,
    sessions: u32,
    nodes: u32,
) -> u32 {
    viewers_per_node
        .div_ceil(per_browser.max(1))
        .max(sessions.div_ceil(nodes.max(1)))
}

/// [`plan`], the hubs sized for `sessions` (a mix's light pages hold many peers a session).
fn plan_for_sessions(
    spec: &HcloudFleetSpec,
    viewers: u32,
    per_browser: u32,
    sessions: u32,
    run: Duration,
    pace: Pace,
    cat: &Catalogue,
) -> Result<CloudSizing, CloudError> {
    let mut notes = Vec::new();
    let hubs = plan_hubs(spec, sessions, pace, cat, &mut notes)?;
    let (hub, hub_default) = (hubs.offer.clone(), hubs.default_type);
    let candidates = node_candidates(spec, cat, &mut notes)?;
    let mut options: Vec<NodeOption> = candidates
        .into_iter()
        .filter_map(|offer| {
            let (per, by) =
                viewers_per_node(offer, &spec.budget, per_browser, spec.viewers_per_node);
            (per > 0).then(|| {
                let nodes = viewers.div_ceil(per);
                NodeOption {
                    offer: offer.clone(),
                    viewers_per_node: per,
                    limited_by: by,
                    nodes,
                    nodes_hourly_net: nodes as f64 * offer.hourly_net,
                }
            })
        })
        .collect();
    // Cheapest first; among equals, fewer servers (fewer API calls, smaller limit request).
    options.sort_by(|a, b| {
        a.nodes_hourly_net
            .total_cmp(&b.nodes_hourly_net)
            .then(a.nodes.cmp(&b.nodes))
    });
    if options.is_empty() {
        return Err(CloudError::Invalid {
            field: "budget".into(),
            message: "no listed server type holds even one viewer with this budget; choose a larger node_type or lower budget.node_reserve_*".into(),
        });
    }
    // The hubs are servers of the project too.
    let node_limit = spec.server_limit.saturating_sub(hubs.count);
    let (chosen, cheapest_over_limit) = match options.iter().position(|o| o.nodes <= node_limit) {
        Some(0) | None => (options.remove(0), None),
        Some(i) => {
            let fits = options.remove(i);
            (fits, Some(options[0].clone()))
        }
    };
    let hourly_net =
        chosen.nodes_hourly_net + f64::from(hubs.count) * (hub.hourly_net + cat.ipv4_hourly_net);
    let vat = 1.0 + cat.vat_rate.trim().parse::<f64>().unwrap_or(0.0) / 100.0;
    let total = PROVISIONING_ESTIMATE + run + Duration::from_secs(120);
    let billed_hours = (total.as_secs_f64() / 3600.0).ceil().max(1.0) as u32;
    Ok(CloudSizing {
        viewers,
        per_browser: per_browser.max(1),
        servers: chosen.nodes + hubs.count,
        ipv6_only_saving_hourly: chosen.nodes as f64 * cat.ipv4_hourly_net,
        ipv4_hourly_net: cat.ipv4_hourly_net,
        chosen,
        alternatives: options,
        cheapest_over_limit,
        hub,
        hub_default,
        hubs,
        location: cat.location.clone(),
        currency: cat.currency.clone(),
        vat_rate: cat.vat_rate.clone(),
        hourly_net,
        hourly_gross: hourly_net * vat,
        billed_hours,
        run_net: hourly_net * billed_hours as f64,
        run_gross: hourly_net * vat * billed_hours as f64,
        server_limit: spec.server_limit,
        sessions,
        notes,
    })
}

/// The smallest share of a mix's swarm kept as real viewers: they are what measures QoE,
/// and `viewerfleet fidelity` compares swarms with at least this share real (e.g. 1 in 10).
pub(crate) const MIN_REAL_SHARE: f64 = 0.1;

/// A swarm of real viewers and light peers (browser pages of `per_page` on the nodes).
#[derive(Debug, Clone, PartialEq)]
pub struct MixPlan {
    pub swarm: u32,
    pub real: u32,
    pub light: u32,
    pub per_page: u32,
    /// What one light peer costs against one real viewer (CPU or memory, the dearer).
    pub light_as_viewers: f64,
    /// The fleet: its `viewers` counts each light peer as `light_as_viewers`.
    pub fleet: CloudSizing,
    /// Whether the fleet fits `fleet.server_limit` (false: even the fewest real viewers
    /// allowed did not).
    pub fits: bool,
}

/// A light peer's cost in real viewers: the dearer of CPU and memory, with the viewers'
/// `per_browser` packing.
pub fn light_as_viewers(budget: &ViewerBudget, per_browser: u32) -> f64 {
    let (cpu, mem) = cost_per_viewer(budget, per_browser);
    (budget.cpu_per_light_peer / cpu.max(1e-9)).max(budget.memory_mb_per_light_peer / mem.max(1e-9))
}

/// The fleet of `real` viewers and `swarm − real` light peers.
#[allow(clippy::too_many_arguments)]
pub fn plan_mix(
    spec: &HcloudFleetSpec,
    swarm: u32,
    real: u32,
    per_page: u32,
    per_browser: u32,
    run: Duration,
    pace: Pace,
    cat: &Catalogue,
) -> Result<MixPlan, CloudError> {
    let real = real.min(swarm);
    let light = swarm - real;
    let k = light_as_viewers(&spec.budget, per_browser);
    let equivalent = real + (f64::from(light) * k).ceil() as u32;
    let sessions = real.div_ceil(per_browser.max(1)) + light.div_ceil(per_page.max(1));
    let fleet = plan_for_sessions(spec, equivalent, per_browser, sessions, run, pace, cat)?;
    Ok(MixPlan {
        swarm,
        real,
        light,
        per_page,
        light_as_viewers: k,
        fits: !fleet.over_limit(),
        fleet,
    })
}

/// The fleet of a scenario's own mix: its viewers real, its `swarm.light_peers` light (what
/// `plan` prints and `up` buys).
pub fn scenario_mix(
    spec: &HcloudFleetSpec,
    plan: &crate::model::scenario::Plan,
    light: &crate::model::scenario::light::LightPlan,
    cat: &Catalogue,
) -> Result<MixPlan, CloudError> {
    plan_mix(
        spec,
        plan.viewers + light.peers,
        plan.viewers,
        light.per_page,
        plan.per_browser,
        plan.duration,
        Pace::of(plan),
        cat,
    )
}

/// The mix a fleet over its server limit can run instead: a tenth of the swarm real
/// ([`MIN_REAL_SHARE`], the share `viewerfleet fidelity` compares; the cheapest mix), and
/// the most real viewers any fleet within the limit holds (`most_real`, dearer: bigger
/// types). When even the cheapest mix does not fit, it comes back with `fits` false.
pub fn fit_mix(
    spec: &HcloudFleetSpec,
    swarm: u32,
    per_page: u32,
    per_browser: u32,
    run: Duration,
    pace: Pace,
    cat: &Catalogue,
) -> Result<(MixPlan, Option<MixPlan>), CloudError> {
    let mix = |real| plan_mix(spec, swarm, real, per_page, per_browser, run, pace, cat);
    let floor = ((f64::from(swarm) * MIN_REAL_SHARE).ceil() as u32).clamp(1, swarm);
    let cheapest = mix(floor)?;
    if !cheapest.fits {
        return Ok((cheapest, None));
    }
    // Servers grow with the real viewers: the largest count that still fits.
    let (mut fits, mut over) = (floor, swarm + 1);
    let mut most = cheapest.clone();
    while over - fits > 1 {
        let mid = fits + (over - fits) / 2;
        let candidate = mix(mid)?;
        if candidate.fits {
            fits = mid;
            most = candidate;
        } else {
            over = mid;
        }
    }
    Ok((cheapest, Some(most)))
}

/// The mix in words, under the plan it is set against (`all_real`); `most_real`: the most
/// real viewers a fleet within the limit holds.
pub fn render_mix(
    out: &mut impl Write,
    all_real: &CloudSizing,
    m: &MixPlan,
    most_real: Option<&MixPlan>,
) -> std::io::Result<()> {
    let f = &m.fleet;
    let cur = &f.currency;
    writeln!(
        out,
        "  with light peers: {} real viewers + {} light peers (browser pages of {}; a light peer costs {:.3} of a viewer here) on {} × {} + {} hub{} = {} servers{}: {:.4} {cur}/h net, {:.2} {cur} for the run ({} h billed)",
        m.real,
        m.light,
        m.per_page,
        m.light_as_viewers,
        f.chosen.nodes,
        f.chosen.offer.name,
        f.hubs.count,
        if f.hubs.count == 1 { "" } else { "s" },
        f.servers,
        if m.fits {
            format!(" (within fleet.server_limit {})", f.server_limit)
        } else {
            format!(
                ", MORE than fleet.server_limit {} even with {:.0}% real viewers",
                f.server_limit,
                MIN_REAL_SHARE * 100.0
            )
        },
        f.hourly_net,
        f.run_net,
        f.billed_hours,
    )?;
    if all_real.viewers == m.swarm && m.light > 0 {
        writeln!(
            out,
            "    against all {} real: {} servers, {:.4} {cur}/h; the mix saves {:.4} {cur}/h ({:.0}%) and {} servers",
            m.swarm,
            all_real.servers,
            all_real.hourly_net,
            all_real.hourly_net - f.hourly_net,
            100.0 * (1.0 - f.hourly_net / all_real.hourly_net.max(1e-9)),
            all_real.servers.saturating_sub(f.servers),
        )?;
    }
    if let Some(most) = most_real.filter(|most| most.real > m.real) {
        writeln!(
            out,
            "    at most {} real viewers (+ {} light peers) fit within the limit: {} × {}, {:.4} {cur}/h net",
            most.real,
            most.light,
            most.fleet.chosen.nodes,
            most.fleet.chosen.offer.name,
            most.fleet.hourly_net,
        )?;
    }
    Ok(())
}

/// The human-readable plan printed by `viewerfleet plan`.
pub fn render(
    out: &mut impl Write,
    scenario: &str,
    p: &CloudSizing,
    budget: &ViewerBudget,
) -> std::io::Result<()> {
    writeln!(
        out,
        "{scenario}: {} viewers on Hetzner Cloud ({})",
        p.viewers, p.location
    )?;
    render_budget(out, p, budget)?;
    render_servers(out, p)?;
    render_cost(out, p)?;
    render_limit(out, p)
}

/// The per-viewer budget the plan was sized with.
fn render_budget(
    out: &mut impl Write,
    p: &CloudSizing,
    budget: &ViewerBudget,
) -> std::io::Result<()> {
    let (cpu, mem) = cost_per_viewer(budget, p.per_browser);
    let packing = if budget.cpu_per_browser > 0.0 || budget.memory_mb_per_browser > 0.0 {
        format!(
            " ({} per browser: {:.3} cores + {:.0} MB per viewer, {:.3} cores + {:.0} MB per browser)",
            p.per_browser,
            budget.cpu_per_viewer,
            budget.memory_mb_per_viewer,
            budget.cpu_per_browser,
            budget.memory_mb_per_browser
        )
    } else if p.per_browser > 1 {
        format!(" ({} per browser)", p.per_browser)
    } else {
        String::new()
    };
    writeln!(
        out,
        "  budget per viewer: {cpu:.3} cores, {mem:.0} MB{packing}; nodes keep {:.1} cores + {:.0} MB, viewers use at most {:.0}% of the cores",
        budget.node_reserve_cpu, budget.node_reserve_memory_mb, budget.cpu_target * 100.0
    )?;
    Ok(())
}

/// The nodes chosen (and why, when the limit decided), and the hub.
fn render_servers(out: &mut impl Write, p: &CloudSizing) -> std::io::Result<()> {
    let c = &p.chosen;
    let cur = &p.currency;
    writeln!(
        out,
        "  nodes: {} × {} ({} {} cores, {:.0} GB), {} viewers per node{} (limited by {}), IPv6-only",
        c.nodes,
        c.offer.name,
        c.offer.cores,
        c.offer.cpu_type,
        c.offer.memory_gb,
        c.viewers_per_node,
        match p.per_browser {
            1 => String::new(),
            n => format!(" in {} browsers of {n}", c.viewers_per_node.div_ceil(n)),
        },
        c.limited_by
    )?;
    if let Some(cheapest) = &p.cheapest_over_limit {
        writeln!(
            out,
            "  chosen to fit fleet.server_limit ({}): {} servers for {:.4} {cur}/h. The cheapest fleet, {} × {} ({} servers), costs {:.4} {cur}/h but needs a higher limit (Console → project → Limits), then set fleet.server_limit",
            p.server_limit,
            p.servers,
            p.hourly_net,
            cheapest.nodes,
            cheapest.offer.name,
            cheapest.nodes + 1,
            p.hourly_with(cheapest),
        )?;
    }
    render_hubs(out, p)
}

/// The hubs: how many of which type, what the run asks of each and on what basis.
fn render_hubs(out: &mut impl Write, p: &CloudSizing) -> std::io::Result<()> {
    let h = &p.hubs;
    writeln!(
        out,
        "  hubs: {} × {} ({} {} cores, {:.0} GB{}; IPv4 + IPv6, Selenium Grid 4 hub; only the controller reaches it), {}",
        h.count,
        p.hub.name,
        p.hub.cores,
        p.hub.cpu_type,
        p.hub.memory_gb,
        if p.hub_default { ", the cheapest that holds the run" } else { ", fleet.hub_type" },
        match (h.count, h.limited_by) {
            (1, _) => format!("{} sessions (one hub suffices)", h.sessions_per_hub),
            (_, by) => format!(
                "{} sessions each, the nodes spread evenly over them (split by {by})",
                h.sessions_per_hub
            ),
        }
    )?;
    let asked = match h.asked_per_s {
        Some(r) => format!("the ramp asks {r:.1} sessions/s"),
        None => "the sessions are asked for at once".to_string(),
    };
    writeln!(
        out,
        "  hub sizing: {asked}; a hub creates {:.1}/s ({}), {:.1}/s together: creating them all takes ≈{:.0} s; per hub {:.2} cores (of {:.1} usable) and {:.0} MB heap (of {:.0} MB); max_parallel_starts {} ({:.1} sessions/s × {:.0} s from request to first frame)",
        h.rate_per_hub,
        h.rate_bound,
        h.rate_all,
        h.creation_takes_s,
        h.cores_per_hub,
        f64::from(p.hub.cores) * hub_sizing::HUB_CPU_TARGET,
        h.heap_mb_per_hub,
        p.hub.memory_gb * 1024.0 * hub_sizing::HEAP_SHARE_OF_RAM * hub_sizing::HEAP_TARGET,
        h.max_parallel_starts,
        h.asked_per_s.map_or(h.rate_all, |a| a.min(h.rate_all)),
        hub_sizing::START_HOLD_S,
    )?;
    writeln!(
        out,
        "  hub basis: {:.1} sessions/s, {:.0} ms CPU per creation, {:.2} ms per stats read (each viewer once per sampling interval), {:.0} MB + {:.2} MB heap per session ({}; BENCHMARKS.md); a browser start holds a distributor thread {:.0} s",
        h.costs.creations_per_s,
        h.costs.cpu_ms_per_creation,
        h.costs.cpu_ms_per_read,
        h.costs.base_heap_mb,
        h.costs.heap_mb_per_session,
        h.costs.measured,
        hub_sizing::BROWSER_START_S,
    )?;
    Ok(())
}

/// What it costs, what IPv6-only saves, the next cheapest fleets, the notes.
fn render_cost(out: &mut impl Write, p: &CloudSizing) -> std::io::Result<()> {
    let cur = &p.currency;
    writeln!(
        out,
        "  cost: {:.4} {cur}/h net ({:.4} gross, VAT {}%); run ≈ {} billed hour(s): {:.2} {cur} net ({:.2} gross)",
        p.hourly_net, p.hourly_gross, p.vat_rate, p.billed_hours, p.run_net, p.run_gross
    )?;
    writeln!(
        out,
        "  IPv6-only nodes save {:.4} {cur}/h of primary IPv4 addresses",
        p.ipv6_only_saving_hourly
    )?;
    for alt in p.alternatives.iter().take(3) {
        let over = if alt.nodes + 1 > p.server_limit {
            ", above fleet.server_limit"
        } else {
            ""
        };
        writeln!(
            out,
            "  alternative: {} × {} ({} per node, {}): {:.4} {cur}/h for the nodes ({} servers{over})",
            alt.nodes,
            alt.offer.name,
            alt.viewers_per_node,
            alt.limited_by,
            alt.nodes_hourly_net,
            alt.nodes + 1
        )?;
    }
    for note in &p.notes {
        writeln!(out, "  note: {note}")?;
    }
    Ok(())
}

/// The servers against the project's limit and the API's hourly budget.
fn render_limit(out: &mut impl Write, p: &CloudSizing) -> std::io::Result<()> {
    writeln!(
        out,
        "  servers: {} (fleet.server_limit: {}); Hetzner API: about {} requests for `up` and {} for the teardown, of the project's 3600 per hour",
        p.servers,
        p.server_limit,
        up_requests(p.servers),
        teardown_requests(p.servers)
    )?;
    if p.over_limit() {
        writeln!(
            out,
            "  WARNING: no fleet fits fleet.server_limit ({}): the cheapest needs {} servers, the one with the fewest {}. Hetzner will answer resource_limit_exceeded part-way. Ask for more (Console → project → Limits → request an increase, saying it is a short load test), spread the viewers over several projects or locations, lower the per-viewer budget, or use `fleet: grid` with servers you already have. Set fleet.server_limit once the limit is raised.",
            p.server_limit, p.servers, p.fewest_servers()
        )?;
    }
    Ok(())
}

/// API requests an `up` of `servers` sends against the real API, about: prices and types,
/// key, firewalls, one create per server, the polls of their actions (two per server, 50 per
/// request, some 8 rounds while servers boot), the hub's firewall update, and the heartbeat
/// while nodes register (one a minute).
pub fn up_requests(servers: u32) -> u32 {
    servers + 20 + 8 * (2 * servers).div_ceil(50)
}

/// API requests a teardown of `servers` sends, about: the listings, one delete per server,
/// the polls of the delete actions, the listings that confirm they are gone, firewalls, key.
pub fn teardown_requests(servers: u32) -> u32 {
    servers + 15 + 8 * servers.div_ceil(50)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(name: &str, cores: u32, mem: f64, hourly: f64) -> Offer {
        Offer {
            name: name.into(),
            cores,
            memory_gb: mem,
            cpu_type: "dedicated".into(),
            architecture: "x86".into(),
            unavailable_after: None,
            hourly_net: hourly,
            hourly_gross: hourly * 1.19,
            monthly_net: hourly * 730.0,
        }
    }

    /// The budget of a viewer in its own browser measured before the decode lever.
    fn whole(cpu: f64, mem: f64) -> ViewerBudget {
        ViewerBudget {
            cpu_per_viewer: cpu,
            memory_mb_per_viewer: mem,
            cpu_per_browser: 0.0,
            memory_mb_per_browser: 0.0,
            ..ViewerBudget::default()
        }
    }

    #[test]
    fn a_light_peer_costs_the_dearer_of_its_cpu_and_memory_shares_of_a_viewer() {
        let b = ViewerBudget {
            cpu_per_light_peer: 0.02,
            memory_mb_per_light_peer: 15.0,
            ..whole(0.4, 300.0)
        };
        // CPU 0.02 / 0.4 = 0.05; memory 15 / 300 = 0.05: equal.
        assert!((light_as_viewers(&b, 1) - 0.05).abs() < 1e-9);
        let b = ViewerBudget {
            memory_mb_per_light_peer: 60.0,
            ..b
        };
        assert!((light_as_viewers(&b, 1) - 0.2).abs() < 1e-9, "memory binds");
    }

    #[test]
    fn budget_limits_viewers_per_node() {
        let b = whole(0.165, 231.0);
        // 8 cores: (8 × 0.8 − 0.5) / 0.165 = 35.7 → 35 (CPU binds before 32 GB of memory).
        assert_eq!(
            viewers_per_node(&offer("ccx33", 8, 32.0, 0.08), &b, 1, None),
            (35, "CPU")
        );
        // 2 cores, 4 GB: CPU 6.6 vs memory (4096 − 1536) / 231 = 11.08 → 6, CPU.
        assert_eq!(
            viewers_per_node(&offer("cx23", 2, 4.0, 0.006), &b, 1, None),
            (6, "CPU")
        );
        // 720p at a core per viewer.
        assert_eq!(
            viewers_per_node(&offer("ccx33", 8, 32.0, 0.08), &whole(1.0, 300.0), 1, None).0,
            5
        );
        assert_eq!(
            viewers_per_node(&offer("ccx33", 8, 32.0, 0.08), &b, 1, Some(12)),
            (12, "viewers_per_node")
        );
    }

    #[test]
    fn several_viewers_per_browser_share_its_cost_and_fill_whole_browsers() {
        let b = ViewerBudget {
            cpu_per_viewer: 0.05,
            memory_mb_per_viewer: 80.0,
            cpu_per_browser: 0.04,
            memory_mb_per_browser: 200.0,
            ..ViewerBudget::default()
        };
        let close = |(c, m): (f64, f64), (ec, em): (f64, f64)| (c - ec).abs() < 1e-9 && m == em;
        assert!(close(cost_per_viewer(&b, 1), (0.09, 280.0)));
        assert!(close(cost_per_viewer(&b, 4), (0.06, 130.0)));
        // 8 cores: 5.9 cores; a browser of 4 costs 0.24 → 24 browsers, 96 viewers;
        // memory 30 GB: a browser of 4 costs 520 MB → 59 browsers. CPU binds.
        assert_eq!(
            viewers_per_node(&offer("ccx33", 8, 32.0, 0.08), &b, 4, None),
            (96, "CPU")
        );
        // One browser each: 5.9 / 0.09 = 65.
        assert_eq!(
            viewers_per_node(&offer("ccx33", 8, 32.0, 0.08), &b, 1, None),
            (65, "CPU")
        );
        // Not even one full browser of 16: as many viewers as one browser holds.
        let tiny = offer("tiny", 1, 4.0, 0.003);
        // CPU: 0.8 − 0.5 = 0.3 → (0.3 − 0.04) / 0.05 = 5.2 → 5 viewers.
        assert_eq!(viewers_per_node(&tiny, &b, 16, None), (5, "CPU"));
    }
}
