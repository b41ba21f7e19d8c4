//! Per-viewer costs fitted on the healthy steps, and a projection for a bigger server with
//! a safety margin: how many viewers its CPU, memory and network card allow, with and
//! without P2P.

use super::fit::{fit_line, LineFit};
use super::knee::StepResult;
use serde::Serialize;

/// A server to project to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerSpec {
    pub cores: f64,
    pub ram_bytes: u64,
    pub nic_mbps: f64,
    /// Share of each resource the projection may use (the rest is headroom), 0..1.
    pub usable_share: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Costs {
    /// Target CPU cores as a function of viewers.
    pub cpu_cores: Option<LineFit>,
    pub rss_bytes: Option<LineFit>,
    /// HTTP egress Mbit/s with P2P as measured.
    pub http_mbps: Option<LineFit>,
    /// HTTP + P2P Mbit/s: what the server would send if P2P were off.
    pub http_without_p2p_mbps: Option<LineFit>,
    /// Steps the fits used.
    pub steps_used: Vec<u32>,
}

pub(crate) fn fit_costs(healthy: &[&StepResult]) -> Costs {
    let points = |f: &dyn Fn(&StepResult) -> Option<f64>| -> Vec<(f64, f64)> {
        healthy
            .iter()
            .filter_map(|s| f(s).map(|y| (s.viewers as f64, y)))
            .collect()
    };
    Costs {
        cpu_cores: fit_line(&points(&|s| s.target_cpu_cores)),
        rss_bytes: fit_line(&points(&|s| s.target_rss_bytes.map(|b| b as f64))),
        http_mbps: fit_line(&points(&|s| Some(s.http_mbps))),
        http_without_p2p_mbps: fit_line(&points(&|s| Some(s.http_mbps + s.p2p_mbps))),
        steps_used: healthy.iter().map(|s| s.viewers).collect(),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Projection {
    pub server: ServerSpec,
    pub by_cpu: Option<u64>,
    pub by_ram: Option<u64>,
    pub by_nic_with_p2p: Option<u64>,
    pub by_nic_without_p2p: Option<u64>,
    /// The smallest limit with P2P, and which resource sets it.
    pub viewers_with_p2p: Option<u64>,
    pub limited_by: Option<&'static str>,
}

/// Viewers a budget allows under a fitted cost line (None without a positive slope).
fn viewers_within(fit: Option<&LineFit>, budget: f64) -> Option<u64> {
    let fit = fit?;
    if fit.slope <= 0.0 || !fit.slope.is_finite() {
        return None;
    }
    // The epsilon keeps exact answers exact despite rounding in the fit.
    let viewers = (budget - fit.intercept.max(0.0)) / fit.slope + 1e-6;
    Some(viewers.max(0.0).floor() as u64)
}

pub fn project(costs: &Costs, server: &ServerSpec) -> Projection {
    let share = server.usable_share;
    let by_cpu = viewers_within(costs.cpu_cores.as_ref(), server.cores * share);
    let by_ram = viewers_within(costs.rss_bytes.as_ref(), server.ram_bytes as f64 * share);
    let by_nic_with_p2p = viewers_within(costs.http_mbps.as_ref(), server.nic_mbps * share);
    let by_nic_without_p2p = viewers_within(
        costs.http_without_p2p_mbps.as_ref(),
        server.nic_mbps * share,
    );
    let candidates = [
        ("cpu", by_cpu),
        ("memory", by_ram),
        ("network", by_nic_with_p2p),
    ];
    let best = candidates
        .iter()
        .filter_map(|(name, v)| v.map(|v| (*name, v)))
        .min_by_key(|(_, v)| *v);
    Projection {
        server: server.clone(),
        by_cpu,
        by_ram,
        by_nic_with_p2p,
        by_nic_without_p2p,
        viewers_with_p2p: best.map(|(_, v)| v),
        limited_by: best.map(|(name, _)| name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(viewers: u32) -> StepResult {
        let v = viewers as f64;
        StepResult {
            viewers,
            run_dir: String::new(),
            started: viewers,
            failed: 0,
            http_mbps: 0.2 * v,
            p2p_mbps: 0.6 * v,
            http_share: Some(0.25),
            target_cpu_cores: Some(0.05 + 0.01 * v),
            target_rss_bytes: Some(100_000_000 + 1_000_000 * viewers as u64),
            generator_cpu_busy: 0.3,
            generator_cores: 2,
            stalls_per_viewer_minute: 0.0,
            ttff_p95_ms: None,
            thresholds: Vec::new(),
        }
    }

    #[test]
    fn projection_with_known_answer() {
        let steps = [step(2), step(4), step(6)];
        let refs: Vec<&StepResult> = steps.iter().collect();
        let costs = fit_costs(&refs);
        assert!((costs.cpu_cores.unwrap().slope - 0.01).abs() < 1e-12);
        assert!((costs.http_without_p2p_mbps.unwrap().slope - 0.8).abs() < 1e-12);
        let server = ServerSpec {
            cores: 4.0,
            ram_bytes: 4_000_000_000,
            nic_mbps: 1000.0,
            usable_share: 0.6,
        };
        let p = project(&costs, &server);
        // CPU: (2.4 - 0.05) / 0.01 = 235; RAM: (2.4e9 - 1e8) / 1e6 = 2300;
        // network with P2P: 600 / 0.2 = 3000; without: 600 / 0.8 = 750.
        assert_eq!(p.by_cpu, Some(235));
        assert_eq!(p.by_ram, Some(2300));
        assert_eq!(p.by_nic_with_p2p, Some(3000));
        assert_eq!(p.by_nic_without_p2p, Some(750));
        assert_eq!(p.viewers_with_p2p, Some(235));
        assert_eq!(p.limited_by, Some("cpu"));
    }

    #[test]
    fn flat_costs_give_no_limit() {
        let mut a = step(2);
        let mut b = step(4);
        a.target_cpu_cores = Some(0.1);
        b.target_cpu_cores = Some(0.1);
        let costs = fit_costs(&[&a, &b]);
        let p = project(
            &costs,
            &ServerSpec {
                cores: 1.0,
                ram_bytes: 1,
                nic_mbps: 1.0,
                usable_share: 0.6,
            },
        );
        assert_eq!(p.by_cpu, None);
    }
}
