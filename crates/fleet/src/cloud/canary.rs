//! The canary node: before a cloud fleet is sized for good, one node of the chosen type is
//! made and measured with viewers on it, so the rest of the fleet is sized from what a
//! viewer costs on that server type today — shared vCPUs, steal time and a CPU generation
//! other than the developer's machine the built-in budget was measured on can make that
//! budget wrong by a factor, and a fleet packed from a wrong budget starves its viewers.
//!
//! The measuring itself is a run of the engine on the canary node (`CanaryProbe`, given by
//! the layer that owns the engine); this module holds what it measured, the budget made
//! from it and the comparison with the plan's.

use crate::model::scenario::fleet::ViewerBudget;
use serde::{Deserialize, Serialize};

/// How far the measured cost per viewer may be from the plan's budget before the fleet
/// says so: a quarter either way.
pub const CANARY_MARGIN: f64 = 0.25;

/// A node whose mean busy share in the window is above this was measured starved: its
/// cost per viewer is a lower bound.
pub const CANARY_BUSY_LIMIT: f64 = 0.9;

/// What the canary node measured: one viewer's cost on the fleet's own server type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CanaryCost {
    pub node_type: String,
    /// Viewers that played through the window.
    pub viewers: u32,
    /// Viewers per browser during the measurement.
    pub per_browser: u32,
    /// The node's cores.
    pub node_cores: f64,
    /// Busy cores of the node before any viewer (OS, Selenium node) and in the window.
    pub idle_cores: f64,
    pub busy_cores: f64,
    /// Mean share of the node's cores the hypervisor took (steal) in the window.
    pub steal: Option<f64>,
    /// Cores and PSS (MB) per viewer: what the viewers added, over the viewers.
    pub cpu_per_viewer: f64,
    pub memory_mb_per_viewer: f64,
    /// The node was busier than `CANARY_BUSY_LIMIT` in the window: the cost is a lower bound.
    pub saturated: bool,
    /// The canary's run folder.
    pub run_dir: String,
}

/// Measures viewers on a canary node through the fleet's hub.
#[async_trait::async_trait]
pub trait CanaryProbe: Send + Sync {
    /// Plays `viewers` viewers on the hub's only node (`node_type`) and measures them;
    /// `credentials` are the hub's router credentials.
    async fn measure(
        &self,
        hub_url: &str,
        credentials: &crate::model::secret::GridCredentials,
        node_type: &str,
        viewers: u32,
    ) -> anyhow::Result<CanaryCost>;
}

/// The viewers the canary plays: half of what the plan puts on a node (so a budget that
/// is right leaves the node room, and one that is twice too cheap still measures a node
/// that is not starved), in whole browsers, at least one.
pub fn canary_viewers(viewers_per_node: u32, per_browser: u32) -> u32 {
    let per_browser = per_browser.max(1);
    let browsers = (viewers_per_node / 2 / per_browser).max(1);
    browsers * per_browser
}

/// The budget the rest of the fleet is sized with: the measured cost per viewer (at the
/// measured packing, so nothing is added per browser), the plan's reserves and target. A
/// starved canary measured at least its cores over its viewers.
pub(crate) fn measured_budget(plan: &ViewerBudget, cost: &CanaryCost) -> ViewerBudget {
    let floor = if cost.saturated {
        cost.node_cores * CANARY_BUSY_LIMIT / f64::from(cost.viewers.max(1))
    } else {
        0.0
    };
    ViewerBudget {
        cpu_per_viewer: cost.cpu_per_viewer.max(floor),
        memory_mb_per_viewer: cost.memory_mb_per_viewer,
        cpu_per_browser: 0.0,
        memory_mb_per_browser: 0.0,
        ..plan.clone()
    }
}

/// What the canary's cost means against the plan's budget, in one sentence; and whether
/// it is outside the margin.
pub fn judge(planned: (f64, f64), cost: &CanaryCost) -> (String, bool) {
    let (cpu, mem) = planned;
    let ratio = |measured: f64, planned: f64| {
        if planned > 0.0 {
            measured / planned
        } else {
            f64::INFINITY
        }
    };
    let (rc, rm) = (
        ratio(cost.cpu_per_viewer, cpu),
        ratio(cost.memory_mb_per_viewer, mem),
    );
    let outside = |r: f64| (r - 1.0).abs() > CANARY_MARGIN;
    let off = outside(rc) || outside(rm);
    let steal = cost
        .steal
        .map(|s| format!(", {:.1}% steal", s * 100.0))
        .unwrap_or_default();
    let lower = if cost.saturated {
        " (the node was starved: a lower bound)"
    } else {
        ""
    };
    let text = format!(
        "canary {} with {} viewers ({} per browser): {:.3} cores and {:.0} MB per viewer{lower}{steal}, against the plan's {:.3} cores and {:.0} MB ({:+.0}% / {:+.0}%){}",
        cost.node_type,
        cost.viewers,
        cost.per_browser,
        cost.cpu_per_viewer,
        cost.memory_mb_per_viewer,
        cpu,
        mem,
        (rc - 1.0) * 100.0,
        (rm - 1.0) * 100.0,
        if off {
            format!(
                ": outside the ±{:.0}% margin, the fleet is sized from the canary",
                CANARY_MARGIN * 100.0
            )
        } else {
            format!(", within ±{:.0}%", CANARY_MARGIN * 100.0)
        }
    );
    (text, off)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(cpu: f64, mem: f64, saturated: bool) -> CanaryCost {
        CanaryCost {
            node_type: "cx53".into(),
            viewers: 40,
            per_browser: 4,
            node_cores: 16.0,
            idle_cores: 0.3,
            busy_cores: 0.3 + cpu * 40.0,
            steal: Some(0.06),
            cpu_per_viewer: cpu,
            memory_mb_per_viewer: mem,
            saturated,
            run_dir: "runs/x/canary".into(),
        }
    }

    #[test]
    fn the_canary_plays_half_a_node_in_whole_browsers() {
        assert_eq!(canary_viewers(153, 4), 76);
        assert_eq!(canary_viewers(10, 4), 4);
        assert_eq!(canary_viewers(3, 4), 4);
        assert_eq!(canary_viewers(20, 1), 10);
    }

    #[test]
    fn a_cost_outside_the_margin_says_so_and_sizes_the_fleet() {
        let plan = ViewerBudget::default();
        let (text, off) = judge((0.08, 140.0), &cost(0.2, 150.0, false));
        assert!(off, "{text}");
        assert!(text.contains("+150% / +7%"), "{text}");
        assert!(text.contains("6.0% steal"), "{text}");
        let budget = measured_budget(&plan, &cost(0.2, 150.0, false));
        assert_eq!((budget.cpu_per_viewer, budget.cpu_per_browser), (0.2, 0.0));
        assert_eq!(budget.node_reserve_cpu, plan.node_reserve_cpu);
        let (text, off) = judge((0.08, 140.0), &cost(0.09, 150.0, false));
        assert!(!off && text.ends_with("within ±25%"), "{text}");
    }

    #[test]
    fn a_starved_canary_is_a_lower_bound() {
        // 40 viewers starved 16 cores: at least 0.36 cores each, whatever was measured.
        let budget = measured_budget(&ViewerBudget::default(), &cost(0.2, 150.0, true));
        assert!((budget.cpu_per_viewer - 16.0 * 0.9 / 40.0).abs() < 1e-9);
        let (text, _) = judge((0.08, 140.0), &cost(0.2, 150.0, true));
        assert!(text.contains("a lower bound"), "{text}");
    }
}
