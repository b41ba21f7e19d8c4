//! What the browsers of a run cost over a window — CPU cores, PSS and processes — and
//! where those figures come from. Browsers on the controller's machine (fleets `local` and
//! `netns`, a Grid on this machine) are measured by its host samples: its own browsers
//! (the Chromium processes below the controller), or, in runs recorded before those
//! figures existed, every Chromium on the machine. Browsers elsewhere (a Grid, cloud nodes)
//! are measured by the viewer nodes' load endpoints (node samples), which see a whole node:
//! its Grid node process and drivers count with the browsers.

use super::load::RunData;
use crate::model::rawdata::{HostSample, NodeSample, RunEventKind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The part of a run a figure is taken over, in seconds since the run's start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    pub from_s: f64,
    pub to_s: f64,
}

impl Window {
    /// The window a calibration run measures: its steady window, ending at its measurement
    /// point (`calibrate` plans both so; any run folder can be read this way). The point is
    /// where the engine recorded it (the plan's `measure_at` counts from the target being
    /// ready, raw data from the run's start); without that event, as the report takes it.
    pub fn of_run(run: &RunData) -> Self {
        let plan = &run.manifest.plan;
        let event = |kind: RunEventKind| run.run_events.iter().find(|e| e.event == kind);
        let to_s = match (
            event(RunEventKind::MeasurePoint),
            event(RunEventKind::TargetReady),
        ) {
            (Some(point), _) => point.t,
            (None, Some(ready)) => ready.t + plan.measure_at_s,
            (None, None) => plan.measure_at_s,
        };
        Self {
            from_s: (to_s - plan.steady_window_s).max(0.0),
            to_s,
        }
    }

    pub fn len_s(&self) -> f64 {
        (self.to_s - self.from_s).max(0.0)
    }

    /// Seconds of `(a, b]` inside the window.
    fn overlap(&self, a: f64, b: f64) -> f64 {
        (b.min(self.to_s) - a.max(self.from_s)).max(0.0)
    }

    fn holds(&self, t: f64) -> bool {
        t >= self.from_s - 1e-9 && t <= self.to_s + 1e-9
    }
}

/// Where a run's browser cost comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CostSource {
    /// The controller's host samples of its own browsers.
    OwnBrowsers,
    /// The controller's host samples of every Chromium on its machine (runs recorded
    /// before the own-browser figures; other Chromiums on the machine count too).
    HostBrowsers,
    /// The viewer nodes' load endpoints: each node's busy cores and its browsers' PSS.
    Nodes,
}

impl CostSource {
    /// Where a run's browser cost is measured: its host samples when its browsers ran on
    /// the controller's machine, else its node samples.
    pub fn of_run(run: &RunData) -> Self {
        if !run.manifest.fleet.browsers_on_this_host() {
            CostSource::Nodes
        } else if run
            .host_samples
            .iter()
            .any(|s| s.own_browsers_cpu_s.is_some())
        {
            CostSource::OwnBrowsers
        } else {
            CostSource::HostBrowsers
        }
    }

    pub fn words(self) -> &'static str {
        match self {
            CostSource::OwnBrowsers => {
                "the controller's own browsers (Chromium processes below it), from its host samples"
            }
            CostSource::HostBrowsers => {
                "every Chromium on the controller's machine, from its host samples"
            }
            CostSource::Nodes => {
                "the viewer nodes' load endpoints (whole nodes: busy cores and the browsers' PSS)"
            }
        }
    }
}

/// What the browsers cost over a window, all of them together.
#[derive(Debug, Clone, PartialEq)]
pub struct BrowserCost {
    pub source: CostSource,
    /// CPU seconds per second over the window.
    pub cores: f64,
    /// Mean and highest PSS of the samples taken in the window, bytes.
    pub pss_mean_bytes: f64,
    pub pss_max_bytes: f64,
    /// Mean browser processes of those samples.
    pub processes_mean: f64,
    /// Samples the figures rest on (per node summed).
    pub samples: usize,
}

/// The browsers' cost over `window`, from the source `CostSource::of_run` names. An error
/// says which samples are missing.
pub fn browser_cost(run: &RunData, window: Window) -> Result<BrowserCost, String> {
    let source = CostSource::of_run(run);
    let interval = run.manifest.plan.sampling_interval_s.max(0.1);
    match source {
        CostSource::OwnBrowsers | CostSource::HostBrowsers => {
            let own = source == CostSource::OwnBrowsers;
            let usage = |s: &HostSample| {
                if own {
                    (
                        s.own_browsers_cpu_s,
                        s.own_browsers_pss_bytes,
                        s.own_browser_processes,
                    )
                } else {
                    (s.browsers_cpu_s, s.browsers_pss_bytes, s.browser_processes)
                }
            };
            let series: Vec<Reading> = run
                .host_samples
                .iter()
                .map(|s| {
                    let (cpu_s, pss, processes) = usage(s);
                    Reading {
                        t: s.t,
                        cpu_s,
                        pss: pss.map(|b| b as f64),
                        processes: processes.map(f64::from),
                    }
                })
                .collect();
            let got = over_window(&series, window, interval).ok_or_else(|| {
                format!(
                    "no host sample with the browsers' CPU between {:.0} s and {:.0} s",
                    window.from_s, window.to_s
                )
            })?;
            Ok(BrowserCost {
                source,
                cores: got.cores,
                pss_mean_bytes: got.pss_mean,
                pss_max_bytes: got.pss_max,
                processes_mean: got.processes_mean,
                samples: got.samples,
            })
        }
        CostSource::Nodes => nodes_cost(&run.node_samples, window, interval),
    }
}

/// What the Node.js light-peer hosts cost over `window` (host samples of `node` processes
/// below the controller); `None` when no sample in it carries them (browser pages, or a
/// run recorded before they were sampled).
pub(crate) fn light_host_cost(run: &RunData, window: Window) -> Option<BrowserCost> {
    let interval = run.manifest.plan.sampling_interval_s.max(0.1);
    let series: Vec<Reading> = run
        .host_samples
        .iter()
        .filter(|s| s.light_host_processes.unwrap_or(0) > 0)
        .map(|s| Reading {
            t: s.t,
            cpu_s: s.light_hosts_cpu_s,
            pss: s.light_hosts_pss_bytes.map(|b| b as f64),
            processes: s.light_host_processes.map(f64::from),
        })
        .collect();
    let got = over_window(&series, window, interval)?;
    Some(BrowserCost {
        source: CostSource::OwnBrowsers,
        cores: got.cores,
        pss_mean_bytes: got.pss_mean,
        pss_max_bytes: got.pss_max,
        processes_mean: got.processes_mean,
        samples: got.samples,
    })
}

/// One sample of a group of processes: CPU seconds since the previous sample, PSS and
/// processes now.
struct Reading {
    t: f64,
    cpu_s: Option<f64>,
    pss: Option<f64>,
    processes: Option<f64>,
}

struct Over {
    cores: f64,
    pss_mean: f64,
    pss_max: f64,
    processes_mean: f64,
    samples: usize,
}

/// CPU over the window from the samples' intervals (each sample's CPU spread evenly over
/// the time since the sample before it, the first one's over one sampling interval), PSS
/// and processes from the samples taken in it.
fn over_window(series: &[Reading], window: Window, interval: f64) -> Option<Over> {
    let mut sorted: Vec<&Reading> = series.iter().collect();
    sorted.sort_by(|a, b| a.t.total_cmp(&b.t));
    let (mut cpu, mut covered) = (0.0, 0.0);
    let mut before = None;
    for r in &sorted {
        let from = before.unwrap_or(r.t - interval);
        before = Some(r.t);
        let (Some(cpu_s), true) = (r.cpu_s, r.t > from) else {
            continue;
        };
        let inside = window.overlap(from, r.t);
        if inside > 0.0 {
            cpu += cpu_s * inside / (r.t - from);
            covered += inside;
        }
    }
    let held: Vec<&&Reading> = sorted.iter().filter(|r| window.holds(r.t)).collect();
    let pss: Vec<f64> = held.iter().filter_map(|r| r.pss).collect();
    let processes: Vec<f64> = held.iter().filter_map(|r| r.processes).collect();
    (covered > 0.0).then(|| Over {
        cores: cpu / covered,
        pss_mean: mean(&pss),
        pss_max: pss.iter().copied().fold(0.0, f64::max),
        processes_mean: mean(&processes),
        samples: held.len(),
    })
}

fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

/// Every node's busy cores, PSS and processes over the window, summed over the nodes.
fn nodes_cost(
    samples: &[NodeSample],
    window: Window,
    interval: f64,
) -> Result<BrowserCost, String> {
    let mut by_node: BTreeMap<&str, Vec<Reading>> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.ok) {
        let series = by_node.entry(s.node.as_str()).or_default();
        // A node's busy share covers the time since its previous sample.
        let since = series.last().map_or(interval, |r| s.t - r.t);
        series.push(Reading {
            t: s.t,
            cpu_s: match (s.cpu_busy, s.cores) {
                (Some(busy), Some(cores)) => Some(busy * cores * since),
                _ => None,
            },
            pss: s.browsers_pss_bytes.map(|b| b as f64),
            processes: s.browser_processes.map(f64::from),
        });
    }
    let mut total = BrowserCost {
        source: CostSource::Nodes,
        cores: 0.0,
        pss_mean_bytes: 0.0,
        pss_max_bytes: 0.0,
        processes_mean: 0.0,
        samples: 0,
    };
    for series in by_node.values() {
        let Some(over) = over_window(series, window, interval) else {
            continue;
        };
        total.cores += over.cores;
        total.pss_mean_bytes += over.pss_mean;
        total.pss_max_bytes += over.pss_max;
        total.processes_mean += over.processes_mean;
        total.samples += over.samples;
    }
    if total.samples == 0 {
        return Err(format!(
            "no node sample with busy cores between {:.0} s and {:.0} s: the viewer nodes have no load endpoint, or it did not answer",
            window.from_s, window.to_s
        ));
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(t: f64, cpu_s: f64, pss: f64) -> Reading {
        Reading {
            t,
            cpu_s: Some(cpu_s),
            pss: Some(pss),
            processes: Some(5.0),
        }
    }

    #[test]
    fn cpu_is_spread_over_each_samples_interval_and_cut_at_the_windows_edges() {
        // 1 core busy from 0 to 10 s, 3 cores from 10 to 20 s, sampled every 2 s.
        let series: Vec<Reading> = (1..=10)
            .map(|i| {
                let t = 2.0 * i as f64;
                reading(t, if t <= 10.0 { 2.0 } else { 6.0 }, t)
            })
            .collect();
        // 5..15 s: 5 s at 1 core, 5 s at 3 cores.
        let over = over_window(
            &series,
            Window {
                from_s: 5.0,
                to_s: 15.0,
            },
            2.0,
        )
        .unwrap();
        assert!((over.cores - 2.0).abs() < 1e-9, "{}", over.cores);
        // PSS of the samples at 6, 8, …, 14 s.
        assert_eq!(over.samples, 5);
        assert!((over.pss_mean - 10.0).abs() < 1e-9);
        assert_eq!(over.pss_max, 14.0);
        assert!(over_window(
            &series,
            Window {
                from_s: 30.0,
                to_s: 40.0
            },
            2.0
        )
        .is_none());
    }

    #[test]
    fn nodes_add_up_their_busy_cores_and_browser_memory() {
        let node = |name: &str, t: f64, busy: f64| NodeSample {
            t,
            node: name.into(),
            ok: true,
            cores: Some(4.0),
            cpu_busy: Some(busy),
            browsers_pss_bytes: Some(1_000_000_000),
            browser_processes: Some(10),
            ..Default::default()
        };
        let samples: Vec<NodeSample> = (1..=10)
            .flat_map(|i| {
                let t = 5.0 * i as f64;
                [node("a", t, 0.5), node("b", t, 0.25)]
            })
            .collect();
        let cost = nodes_cost(
            &samples,
            Window {
                from_s: 10.0,
                to_s: 40.0,
            },
            5.0,
        )
        .unwrap();
        // 4 × 0.5 + 4 × 0.25 cores.
        assert!((cost.cores - 3.0).abs() < 1e-9, "{cost:?}");
        assert_eq!(cost.pss_mean_bytes, 2e9);
        assert_eq!(cost.processes_mean, 20.0);
        assert!(nodes_cost(
            &[],
            Window {
                from_s: 0.0,
                to_s: 1.0
            },
            5.0
        )
        .is_err());
    }
}
