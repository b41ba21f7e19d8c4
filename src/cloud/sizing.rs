//! How many nodes of which type a run needs, and what it costs: viewers per node from the
//! per-viewer budget (CPU and memory, whichever binds first), the cheapest type for the whole
//! run unless one is forced, plus the hub; billed per started hour.

use super::pricing::{Catalogue, Offer};
use super::CloudError;
use crate::model::scenario::fleet::{HcloudFleetSpec, ViewerBudget};
use std::io::Write;
use std::time::Duration;

/// Time from `up` to every node registered, used for the cost estimate (boot, apt, jar).
pub const PROVISIONING_ESTIMATE: Duration = Duration::from_secs(10 * 60);

/// Viewers one node of `offer` holds and what limits it (`CPU`, `memory`, `viewers_per_node`).
pub fn viewers_per_node(
    offer: &Offer,
    budget: &ViewerBudget,
    forced: Option<u32>,
) -> (u32, &'static str) {
    if let Some(n) = forced {
        return (n, "viewers_per_node");
    }
    let cpu =
        (offer.cores as f64 * budget.cpu_target - budget.node_reserve_cpu) / budget.cpu_per_viewer;
    let mem =
        (offer.memory_gb * 1024.0 - budget.node_reserve_memory_mb) / budget.memory_mb_per_viewer;
    let (n, by) = if cpu <= mem {
        (cpu, "CPU")
    } else {
        (mem, "memory")
    };
    (n.floor().max(0.0) as u32, by)
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

/// The plan for one run.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetPlan {
    pub viewers: u32,
    pub chosen: NodeOption,
    /// Other types, cheapest first (for the user to compare).
    pub alternatives: Vec<NodeOption>,
    pub hub: Offer,
    pub location: String,
    pub currency: String,
    pub vat_rate: String,
    /// Hub + nodes + the hub's IPv4, net per hour.
    pub hourly_net: f64,
    pub hourly_gross: f64,
    /// Billed hours: provisioning + run + teardown, rounded up per started hour.
    pub billed_hours: u32,
    pub run_net: f64,
    pub run_gross: f64,
    /// What primary IPv4s on every node would have added per hour.
    pub ipv6_only_saving_hourly: f64,
    pub servers: u32,
    pub server_limit: u32,
}

impl FleetPlan {
    pub fn over_limit(&self) -> bool {
        self.servers > self.server_limit
    }
}

/// Sizes the fleet for `viewers` over `run` (the scenario's duration).
pub fn plan(
    spec: &HcloudFleetSpec,
    viewers: u32,
    run: Duration,
    cat: &Catalogue,
) -> Result<FleetPlan, CloudError> {
    let hub = cat
        .offer(&spec.hub_type)
        .cloned()
        .ok_or_else(|| CloudError::Invalid {
            field: "hub_type".into(),
            message: format!(
                "`{}` is not sold in {}; available: {}",
                spec.hub_type,
                cat.location,
                names(cat)
            ),
        })?;
    let candidates: Vec<&Offer> = match &spec.node_type {
        Some(t) => vec![cat.offer(t).ok_or_else(|| CloudError::Invalid {
            field: "node_type".into(),
            message: format!(
                "`{t}` is not sold in {}; available: {}",
                cat.location,
                names(cat)
            ),
        })?],
        None => spec
            .node_types
            .iter()
            .filter_map(|t| cat.offer(t))
            .collect(),
    };
    let mut options: Vec<NodeOption> = candidates
        .into_iter()
        .filter_map(|offer| {
            let (per, by) = viewers_per_node(offer, &spec.budget, spec.viewers_per_node);
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
    let chosen = options.remove(0);
    let hourly_net = chosen.nodes_hourly_net + hub.hourly_net + cat.ipv4_hourly_net;
    let vat = 1.0 + cat.vat_rate.trim().parse::<f64>().unwrap_or(0.0) / 100.0;
    let total = PROVISIONING_ESTIMATE + run + Duration::from_secs(120);
    let billed_hours = (total.as_secs_f64() / 3600.0).ceil().max(1.0) as u32;
    Ok(FleetPlan {
        viewers,
        servers: chosen.nodes + 1,
        ipv6_only_saving_hourly: chosen.nodes as f64 * cat.ipv4_hourly_net,
        chosen,
        alternatives: options,
        hub,
        location: cat.location.clone(),
        currency: cat.currency.clone(),
        vat_rate: cat.vat_rate.clone(),
        hourly_net,
        hourly_gross: hourly_net * vat,
        billed_hours,
        run_net: hourly_net * billed_hours as f64,
        run_gross: hourly_net * vat * billed_hours as f64,
        server_limit: spec.server_limit,
    })
}

fn names(cat: &Catalogue) -> String {
    cat.offers
        .iter()
        .map(|o| o.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The human-readable plan printed by `viewerfleet plan`.
pub fn render(
    out: &mut impl Write,
    scenario: &str,
    p: &FleetPlan,
    budget: &ViewerBudget,
) -> std::io::Result<()> {
    let c = &p.chosen;
    let cur = &p.currency;
    writeln!(
        out,
        "{scenario}: {} viewers on Hetzner Cloud ({})",
        p.viewers, p.location
    )?;
    writeln!(
        out,
        "  budget per viewer: {:.3} cores, {:.0} MB; nodes keep {:.1} cores + {:.0} MB, viewers use at most {:.0}% of the cores",
        budget.cpu_per_viewer, budget.memory_mb_per_viewer, budget.node_reserve_cpu, budget.node_reserve_memory_mb, budget.cpu_target * 100.0
    )?;
    writeln!(
        out,
        "  nodes: {} × {} ({} {} cores, {:.0} GB), {} viewers per node (limited by {}), IPv6-only",
        c.nodes,
        c.offer.name,
        c.offer.cores,
        c.offer.cpu_type,
        c.offer.memory_gb,
        c.viewers_per_node,
        c.limited_by
    )?;
    writeln!(
        out,
        "  hub: 1 × {} (IPv4 + IPv6, Selenium Grid 4 hub; only the controller reaches it)",
        p.hub.name
    )?;
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
        writeln!(
            out,
            "  alternative: {} × {} ({} per node, {}): {:.4} {cur}/h for the nodes",
            alt.nodes, alt.offer.name, alt.viewers_per_node, alt.limited_by, alt.nodes_hourly_net
        )?;
    }
    writeln!(
        out,
        "  servers: {} (limit set in fleet.server_limit: {})",
        p.servers, p.server_limit
    )?;
    if p.over_limit() {
        writeln!(
            out,
            "  WARNING: {} servers is likely above your project's limit ({}): Hetzner will answer resource_limit_exceeded part-way. Ask for more (Console → project → Limits → request an increase, saying it is a short load test), spread the viewers over several projects or locations, choose a bigger node_type (fewer servers), or use `fleet: grid` with servers you already have. Set fleet.server_limit once the limit is raised.",
            p.servers, p.server_limit
        )?;
    }
    Ok(())
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
            hourly_net: hourly,
            hourly_gross: hourly * 1.19,
            monthly_net: hourly * 730.0,
        }
    }

    #[test]
    fn budget_limits_viewers_per_node() {
        let b = ViewerBudget::default();
        // 8 cores: (8 × 0.8 − 0.5) / 0.165 = 35.7 → 35 (CPU binds before 32 GB of memory).
        assert_eq!(
            viewers_per_node(&offer("ccx33", 8, 32.0, 0.08), &b, None),
            (35, "CPU")
        );
        // 2 cores, 4 GB: CPU 6.6 vs memory (4096 − 1536) / 231 = 11.08 → 6, CPU.
        assert_eq!(
            viewers_per_node(&offer("cx22", 2, 4.0, 0.006), &b, None),
            (6, "CPU")
        );
        // 720p: a core per viewer.
        let hd = ViewerBudget {
            cpu_per_viewer: 1.0,
            ..ViewerBudget::default()
        };
        assert_eq!(
            viewers_per_node(&offer("ccx33", 8, 32.0, 0.08), &hd, None).0,
            5
        );
        assert_eq!(
            viewers_per_node(&offer("ccx33", 8, 32.0, 0.08), &b, Some(12)),
            (12, "viewers_per_node")
        );
    }
}
