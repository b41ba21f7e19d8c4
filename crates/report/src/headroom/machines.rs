//! The machine rule: each machine's CPU samples as intervals, hot spans, and whether it was
//! saturated over the run and over the steady window.

use super::*;

/// One sample's stretch of time and CPU figures.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct CpuInterval {
    from: f64,
    to: f64,
    /// Busy share, steal included; `None` when the sample has none (a node with only a
    /// throttling figure).
    busy: Option<f64>,
    steal: Option<f64>,
    throttled: Option<f64>,
    pressure: Option<f64>,
    pss: Option<u64>,
    hot: bool,
}

/// This host's CPU against the machine rule; `None` without host samples.
pub(crate) fn host_machine(
    run: &RunData,
    steady: Steady,
    sampling_s: f64,
) -> Option<MachineHeadroom> {
    let samples = &run.host_samples;
    let first = samples.first()?;
    let mut prev = first.t - sampling_s;
    let intervals: Vec<CpuInterval> = samples
        .iter()
        .map(|s| {
            let interval = CpuInterval {
                from: prev,
                to: s.t,
                busy: Some(s.cpu_busy),
                steal: s.cpu_steal.filter(|v| v.is_finite()),
                throttled: None,
                pressure: s.cpu_pressure.filter(|v| v.is_finite()),
                pss: s.browsers_pss_bytes,
                hot: s.cpu_busy > HOT_BUSY,
            };
            prev = s.t;
            interval
        })
        .collect();
    Some(judge(HOST_NAME, &intervals, 0, None, steady))
}

/// Each sampled node's CPU against the machine rule, by name. A node's busy share is of
/// its CPU allowance: the machine's cores with steal in it, or its cgroup's quota.
pub(super) fn node_machines(
    run: &RunData,
    steady: Steady,
    sampling_s: f64,
) -> BTreeMap<String, Machine> {
    let mut by_node: BTreeMap<&str, Vec<&crate::model::rawdata::NodeSample>> = BTreeMap::new();
    for s in &run.node_samples {
        by_node.entry(s.node.as_str()).or_default().push(s);
    }
    let mut out = BTreeMap::new();
    for (node, samples) in by_node {
        let finite = |v: Option<f64>| v.filter(|v| v.is_finite() && *v >= 0.0);
        let usable: Vec<_> = samples
            .iter()
            .filter(|s| s.ok && (finite(s.cpu_busy).is_some() || finite(s.cpu_throttled).is_some()))
            .collect();
        let failed = samples.iter().filter(|s| !s.ok).count() as u32;
        let mut prev = usable.first().map_or(0.0, |s| s.t - sampling_s);
        let intervals: Vec<CpuInterval> = usable
            .iter()
            .map(|s| {
                let steal = finite(s.cpu_steal);
                let busy = finite(s.cpu_busy);
                let throttled = finite(s.cpu_throttled);
                let interval = CpuInterval {
                    from: prev,
                    to: s.t,
                    busy,
                    steal,
                    throttled,
                    pressure: finite(s.cpu_pressure),
                    pss: s.browsers_pss_bytes,
                    hot: busy.is_some_and(|b| b > HOT_BUSY)
                        || throttled.is_some_and(|t| t > HOT_THROTTLED),
                };
                prev = s.t;
                interval
            })
            .collect();
        let cores = usable.iter().rev().find_map(|s| finite(s.cores));
        let busy_points = intervals
            .iter()
            .filter_map(|i| i.busy.map(|b| (i.to, b)))
            .collect();
        out.insert(
            node.to_string(),
            Machine {
                check: judge(node, &intervals, failed, cores, steady),
                busy_points,
            },
        );
    }
    out
}

/// A node's check and its busy series.
pub(super) struct Machine {
    pub(super) check: MachineHeadroom,
    pub(super) busy_points: Vec<(f64, f64)>,
}

/// The machine rule over one machine's sample intervals. Each interval weighs the time
/// it covers; the steady window counts the part of each interval inside it.
pub(super) fn judge(
    name: &str,
    intervals: &[CpuInterval],
    failed: u32,
    cores: Option<f64>,
    steady: Steady,
) -> MachineHeadroom {
    let (mut total, mut hot, mut steady_total, mut steady_hot) = (0.0, 0.0, 0.0, 0.0);
    let mut mean = Means::default();
    let mut max_busy: f64 = 0.0;
    let mut max_pss: Option<u64> = None;
    let mut spans = Vec::new();
    for i in intervals {
        let weight = (i.to - i.from).max(0.0);
        let from = i.from.max(0.0);
        total += weight;
        if let Some(b) = i.busy {
            mean.busy.add(b, weight);
            max_busy = max_busy.max(b);
        }
        if let Some(v) = i.steal {
            mean.steal.add(v, weight);
        }
        if let Some(v) = i.throttled {
            mean.throttled.add(v, weight);
        }
        if let Some(v) = i.pressure {
            mean.pressure.add(v, weight);
        }
        if let Some(p) = i.pss {
            max_pss = Some(max_pss.map_or(p, |m| m.max(p)));
        }
        let overlap = (i.to.min(steady.to_s) - from.max(steady.from_s)).max(0.0);
        steady_total += overlap;
        if i.hot {
            hot += weight;
            steady_hot += overlap;
            spans.push(Span {
                from_s: from,
                to_s: i.to.max(from),
            });
        }
    }
    let hot_share = if total > 0.0 { hot / total } else { 0.0 };
    let steady_hot_share = (steady_total > 0.0).then(|| steady_hot / steady_total);
    let saturated_in_steady = steady_hot_share.is_some_and(|s| s > SATURATED_STEADY_SHARE);
    let spans = merge(spans);
    MachineHeadroom {
        name: name.to_string(),
        samples: intervals.len() as u32,
        failed_samples: failed,
        cores,
        mean_busy: mean.busy.mean().unwrap_or(0.0),
        max_busy,
        mean_steal: mean.steal.mean(),
        mean_throttled: mean.throttled.mean(),
        mean_pressure: mean.pressure.mean(),
        max_browsers_pss_bytes: max_pss,
        hot_share,
        steady_hot_share,
        saturated: hot_share > SATURATED_RUN_SHARE || saturated_in_steady,
        saturated_in_steady,
        viewers: 0,
        hot_spans_total: spans.len() as u32,
        hot_spans: spans.into_iter().take(SPANS_LISTED).collect(),
    }
}

/// Time-weighted means of a machine's figures.
#[derive(Default)]
pub(super) struct Means {
    busy: Mean,
    steal: Mean,
    throttled: Mean,
    pressure: Mean,
}

#[derive(Default)]
pub(super) struct Mean {
    sum: f64,
    weight: f64,
}

impl Mean {
    fn add(&mut self, value: f64, weight: f64) {
        self.sum += value * weight;
        self.weight += weight;
    }

    fn mean(&self) -> Option<f64> {
        (self.weight > 0.0).then(|| self.sum / self.weight)
    }
}

/// Merges spans that touch or overlap (they come in time order).
pub(super) fn merge(spans: Vec<Span>) -> Vec<Span> {
    let mut out: Vec<Span> = Vec::new();
    for s in spans {
        match out.last_mut() {
            Some(last) if s.from_s <= last.to_s + 1e-6 => last.to_s = last.to_s.max(s.to_s),
            _ => out.push(s),
        }
    }
    out
}
