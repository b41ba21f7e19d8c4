//! Headroom: whether the machines and the pages that played the video had CPU to spare in
//! the steady window, and what the players' figures at T are without the viewers that had
//! none.
//!
//! Why it matters: a page starved of CPU runs its P2P engine's timers late, misses its
//! timeouts and fetches the segment over HTTP instead, so saturation biases every P2P
//! figure towards HTTP (measured: 16 viewers on 2 saturated cores gave 29% P2P savings
//! where 8 on the same idle machine gave 69%). The report therefore judges saturation per
//! machine (this host, each Grid node with samples) and per viewer (its page's own lag
//! meter), lists when each was starved, gives the figures at T both for all viewers and
//! for those with headroom, and says when a run's P2P figure is not a finding. Nothing is
//! left out silently: both sets of figures are shown side by side.
//!
//! Every rule's constant is here; `honesty::cpu_check` applies the machine rule to this
//! host for the honesty section.

use super::load::RunData;
use super::model::{
    FiguresAtT, Headroom, HeadroomFigures, HeadroomVerdict, HeadroomViewers, MachineHeadroom,
    PageLagWindow, Series, SourceTable, Span, UnsampledNode, ViewerHeadroom, ViewerHeadroomStatus,
    ViewerRow,
};
use super::rates::Bins;
use super::render::pct;

/// A share as a whole percentage ("73%"), for sentences.
fn whole_pct(share: Option<f64>) -> String {
    share.map_or_else(|| "—".to_string(), |v| format!("{:.0}%", v * 100.0))
}
use super::table::{self, Steady};
use super::traffic;
use crate::model::rawdata::{PageLag, ViewerSample};
use std::collections::{BTreeMap, BTreeSet};

/// A host or node sample is hot above this busy share of its cores (or CPU allowance);
/// steal counts as busy.
pub const HOT_BUSY: f64 = 0.90;
/// A node sample is also hot when more than this share of its cgroup's scheduling periods
/// ran out of quota: a throttled container is starved at any busy share.
pub const HOT_THROTTLED: f64 = 0.25;
/// A machine is saturated when hot for more than this share of its sampled time…
pub const SATURATED_RUN_SHARE: f64 = 0.10;
/// …or for more than this share of the steady window; only this one judges its viewers.
pub const SATURATED_STEADY_SHARE: f64 = 0.25;
/// Mean steal above this share is warned about (shared cloud vCPUs).
pub const STEAL_WARN: f64 = 0.05;

/// A page is starved over a window when its timer ran later than this on average, ms…
///
/// The page's lag meter is a timer due every 250 ms. Measured on a 2-core machine (live
/// refsite, steady window): 8 viewers at 46% mean host busy ran 0.7–1.3 ms late on
/// average per viewer (worst tick 6–76 ms, no tick more than 100 ms late); 24 viewers at
/// 91% busy (a saturated host by the machine rule) ran 5.1–11.8 ms late on average, with
/// 0–2.7% of ticks more than 100 ms late and worst ticks of 55–302 ms. 5 ms and 2% put
/// every page of the saturated run on the starved side and leave a margin of four times
/// the idle run's lateness.
pub const PAGE_LATE_MEAN_MS: f64 = 5.0;
/// …or when more than this share of its ticks ran more than [`LATE_TICK_MS`] late.
pub const PAGE_LATE_TICKS_SHARE: f64 = 0.02;
/// What the page's meter counts as a late tick, ms (the meter's own threshold).
pub const LATE_TICK_MS: f64 = 100.0;
/// Fewest visible ticks (2 s) a window needs before its page is judged.
pub const PAGE_MIN_TICKS: f64 = 8.0;

/// The P2P figure is not a finding when a machine carrying at least this share of the
/// started viewers was saturated in the steady window…
pub const NOT_A_FINDING_MACHINE_SHARE: f64 = 0.10;
/// …or when at least this share of the started viewers had no headroom there.
pub const NOT_A_FINDING_STARVED_SHARE: f64 = 0.10;

/// Spans listed per machine and per viewer (the rest are counted).
pub const SPANS_LISTED: usize = 5;
/// Viewers listed in `report.json` (`viewers.csv` has every one).
pub const VIEWERS_LISTED: usize = 50;
/// How the host is named among the machines.
pub const HOST_NAME: &str = "this machine";

/// What the analysis needs from the rest of the report.
pub struct Inputs<'a> {
    pub steady: Steady,
    /// The plan's sampling interval: the time a machine's first sample covers.
    pub sampling_s: f64,
    pub bin_s: f64,
    pub end_s: f64,
    pub rate_window_s: f64,
    /// Every viewer's row (node, viewer id).
    pub viewers: &'a [ViewerRow],
    /// Each started viewer's watching interval (first frame to end).
    pub watching: &'a BTreeMap<u32, (f64, f64)>,
    pub started: u32,
    /// The players' table over all viewers.
    pub players: Option<&'a SourceTable>,
}

/// The section, every viewer's verdict (for `viewers.csv`) and the series to plot.
pub struct Analysis {
    pub headroom: Headroom,
    pub per_viewer: BTreeMap<u32, ViewerHeadroom>,
    /// Mean lateness of the pages' ticks over time (all viewers), ms.
    pub page_late: Option<Series>,
    /// Each sampled node's busy share over time (steal included).
    pub node_busy: Vec<(String, Vec<(f64, f64)>)>,
}

/// One sample's stretch of time and CPU figures.
#[derive(Debug, Clone, Copy, Default)]
struct CpuInterval {
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
pub fn host_machine(run: &RunData, steady: Steady, sampling_s: f64) -> Option<MachineHeadroom> {
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
fn node_machines(run: &RunData, steady: Steady, sampling_s: f64) -> BTreeMap<String, Machine> {
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
struct Machine {
    check: MachineHeadroom,
    busy_points: Vec<(f64, f64)>,
}

/// The machine rule over one machine's sample intervals. Each interval weighs the time
/// it covers; the steady window counts the part of each interval inside it.
fn judge(
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
struct Means {
    busy: Mean,
    steal: Mean,
    throttled: Mean,
    pressure: Mean,
}

#[derive(Default)]
struct Mean {
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
fn merge(spans: Vec<Span>) -> Vec<Span> {
    let mut out: Vec<Span> = Vec::new();
    for s in spans {
        match out.last_mut() {
            Some(last) if s.from_s <= last.to_s + 1e-6 => last.to_s = last.to_s.max(s.to_s),
            _ => out.push(s),
        }
    }
    out
}

/// What a page's lag meter counted between two of its samples.
#[derive(Debug, Clone, Copy)]
pub(super) struct LagInterval {
    pub from: f64,
    pub to: f64,
    pub ticks: f64,
    pub late_ms: f64,
    pub late_ticks: f64,
    pub max_ms: f64,
}

impl LagInterval {
    fn starved(&self) -> bool {
        page_starved(self.ticks, self.late_ms, self.late_ticks)
    }
}

/// The page rule on a lag meter's counts over some stretch of time: its ticks ran later
/// than [`PAGE_LATE_MEAN_MS`] on average or more than [`PAGE_LATE_TICKS_SHARE`] of them
/// were late. No ticks, no verdict of starvation.
pub fn page_starved(ticks: f64, late_ms: f64, late_ticks: f64) -> bool {
    ticks > 0.0
        && (late_ms / ticks > PAGE_LATE_MEAN_MS || late_ticks / ticks > PAGE_LATE_TICKS_SHARE)
}

/// A page's lag meter over a window, judged by the page rule; `None` when the window holds
/// fewer than [`PAGE_MIN_TICKS`] ticks (too little to judge). Shared by the viewers' pages
/// and the light peers' pages (`report::light`), so both are starved by one rule.
pub fn judge_page(ticks: f64, late_ms: f64, late_ticks: f64, max_ms: f64) -> Option<PageLagWindow> {
    (ticks >= PAGE_MIN_TICKS).then(|| PageLagWindow {
        ticks,
        mean_late_ms: late_ms / ticks,
        late_ticks_share: late_ticks / ticks,
        max_ms,
        starved: page_starved(ticks, late_ms, late_ticks),
    })
}

/// A light peers' page's lag meter over a window. Its own engines (up to 50 on one main
/// thread) queue their tasks before its timer, so on a machine with headroom it runs a few ms
/// late on average (6.2 ms with 25 peers at 59% busy, measured 2026-12-04): the viewers' mean
/// part would call every full page starved. The part that tracks starvation there is kept:
/// more than [`PAGE_LATE_TICKS_SHARE`] of ticks over 100 ms late (0.8% at 59% busy, 3.4–5.3%
/// at 91%).
pub fn judge_light_page(
    ticks: f64,
    late_ms: f64,
    late_ticks: f64,
    max_ms: f64,
) -> Option<PageLagWindow> {
    (ticks >= PAGE_MIN_TICKS).then(|| PageLagWindow {
        ticks,
        mean_late_ms: late_ms / ticks,
        late_ticks_share: late_ticks / ticks,
        max_ms,
        starved: late_ticks / ticks > PAGE_LATE_TICKS_SHARE,
    })
}

/// The intervals between a viewer's consecutive lag-meter samples (its first sample is a
/// baseline: page start-up is no steady state). A meter that went down was restarted (the
/// page reloaded): its new value counts, as for byte counters.
fn lag_intervals(samples: &[&ViewerSample]) -> Vec<LagInterval> {
    let reads: Vec<(f64, PageLag)> = samples
        .iter()
        .filter_map(|s| s.lag.map(|l| (s.t, l)))
        .collect();
    meter_intervals(&reads)
}

/// The intervals between consecutive reads `(t, meter)` of one page's lag meter, in time
/// order, by the rules of [`lag_intervals`] (reads with impossible figures skipped). Also
/// what judges a light peers' page (`report::light`).
pub(super) fn meter_intervals(reads: &[(f64, PageLag)]) -> Vec<LagInterval> {
    let with_lag: Vec<(f64, PageLag)> = reads
        .iter()
        .copied()
        .filter(|(_, l)| l.late_ms.is_finite() && l.late_ms >= 0.0 && l.max_ms.is_finite())
        .collect();
    with_lag
        .windows(2)
        .filter_map(|pair| {
            let ((t0, a), (t1, b)) = (pair[0], pair[1]);
            let reset = b.ticks < a.ticks;
            let (ticks, late_ms, late_ticks) = if reset {
                (b.ticks, b.late_ms, b.late_ticks)
            } else {
                (
                    b.ticks - a.ticks,
                    (b.late_ms - a.late_ms).max(0.0),
                    b.late_ticks.saturating_sub(a.late_ticks),
                )
            };
            (t1 > t0).then_some(LagInterval {
                from: t0,
                to: t1,
                ticks: ticks as f64,
                late_ms,
                late_ticks: late_ticks as f64,
                max_ms: b.max_ms.max(0.0),
            })
        })
        .collect()
}

/// The page rule over a window: the intervals' counts inside it, pro rata.
fn page_window(intervals: &[LagInterval], steady: Steady) -> Option<PageLagWindow> {
    let (mut ticks, mut late_ms, mut late_ticks, mut max_ms) = (0.0, 0.0, 0.0, 0.0f64);
    for i in intervals {
        let overlap = i.to.min(steady.to_s) - i.from.max(steady.from_s);
        if overlap <= 0.0 {
            continue;
        }
        let f = overlap / (i.to - i.from);
        ticks += i.ticks * f;
        late_ms += i.late_ms * f;
        late_ticks += i.late_ticks * f;
        max_ms = max_ms.max(i.max_ms);
    }
    judge_page(ticks, late_ms, late_ticks, max_ms)
}

/// The rules as the report states them.
pub fn rules() -> Vec<String> {
    vec![
        format!(
            "A machine's sample is hot when its CPU is above {:.0}% busy (steal counted as \
             busy; a node's busy share is of its CPU allowance: its machine's cores, or its \
             cgroup's quota) or, for a node, \
             when more than {:.0}% of its cgroup's scheduling periods hit the CPU quota. A \
             machine is saturated when hot for more than {:.0}% of its sampled time or more \
             than {:.0}% of the steady window; only the steady window judges its viewers.",
            HOT_BUSY * 100.0,
            HOT_THROTTLED * 100.0,
            SATURATED_RUN_SHARE * 100.0,
            SATURATED_STEADY_SHARE * 100.0
        ),
        format!(
            "A page is starved over a window when its own timer (due every 250 ms) ran more \
             than {PAGE_LATE_MEAN_MS:.0} ms late on average, or more than {:.0}% of its ticks \
             ran more than {LATE_TICK_MS:.0} ms late (measured on 2 cores: 0.7–1.3 ms at 46% \
             busy, 5.1–11.8 ms at 91%).",
            PAGE_LATE_TICKS_SHARE * 100.0
        ),
        "A viewer had no headroom in the steady window when its page was starved there or \
         the machine it ran on was saturated there (this machine when the browsers ran on it; \
         otherwise its Grid node, from the viewer's events). A node without samples is \
         unknown: its viewers are judged by their pages alone and never left out."
            .to_string(),
        format!(
            "The P2P figure is not a finding when a machine carrying at least {:.0}% of the \
             started viewers was saturated in the steady window, or at least {:.0}% of the \
             started viewers had no headroom there: a starved page misses the P2P engine's \
             timeouts and falls back to HTTP, so saturation biases the figure towards HTTP.",
            NOT_A_FINDING_MACHINE_SHARE * 100.0,
            NOT_A_FINDING_STARVED_SHARE * 100.0
        ),
    ]
}

/// Judges every machine and every viewer, and computes the figures with headroom.
pub fn analyse(run: &RunData, inputs: &Inputs) -> Analysis {
    let steady = inputs.steady;
    let host_judges_viewers = run.manifest.fleet.browsers_on_this_host();
    let mut host = host_machine(run, steady, inputs.sampling_s);
    let mut nodes = node_machines(run, steady, inputs.sampling_s);

    let mut samples_of: BTreeMap<u32, Vec<&ViewerSample>> = BTreeMap::new();
    for s in &run.viewer_samples {
        samples_of.entry(s.viewer).or_default().push(s);
    }
    let in_steady = |viewer: u32| {
        inputs
            .watching
            .get(&viewer)
            .is_some_and(|(a, b)| b.min(steady.to_s) - a.max(steady.from_s) > 0.0)
    };

    let mut counts = HeadroomViewers {
        started: inputs.started,
        ..Default::default()
    };
    let mut unsampled: BTreeMap<String, u32> = BTreeMap::new();
    let mut per_viewer = BTreeMap::new();
    let mut late_bins = (
        Bins::new(inputs.bin_s, inputs.end_s),
        Bins::new(inputs.bin_s, inputs.end_s),
    );
    let mut any_lag = false;
    for row in inputs.viewers {
        let lag = samples_of
            .get(&row.viewer)
            .map(|s| lag_intervals(s))
            .unwrap_or_default();
        for i in &lag {
            any_lag = true;
            late_bins.0.spread(i.from, i.to, i.late_ms);
            late_bins.1.spread(i.from, i.to, i.ticks);
        }
        let watching = in_steady(row.viewer);
        let page = page_window(&lag, steady);
        let node_name = row.node.as_deref();
        let mut reasons = Vec::new();
        let (mut known, mut starved) = (page.is_some(), page.is_some_and(|p| p.starved));
        if starved {
            reasons.push("page lag".to_string());
        }
        let mut by = (false, false);
        match node_name.and_then(|n| nodes.get_mut(n)) {
            Some(node) => {
                if watching {
                    node.check.viewers += 1;
                }
                if node.check.steady_hot_share.is_some() {
                    known = true;
                    if node.check.saturated_in_steady {
                        starved = true;
                        by.0 = true;
                        reasons.push(format!("node {} saturated", node.check.name));
                    }
                } else {
                    reasons.push(format!(
                        "node {} has no samples in the steady window",
                        node.check.name
                    ));
                }
            }
            None if !host_judges_viewers => {
                let name = node_name.unwrap_or("(unknown node)");
                if watching {
                    *unsampled.entry(name.to_string()).or_default() += 1;
                }
                reasons.push(format!("node {name} not sampled"));
            }
            None => {}
        }
        if host_judges_viewers {
            if let Some(h) = host.as_mut() {
                if watching {
                    h.viewers += 1;
                }
                if h.steady_hot_share.is_some() {
                    known = true;
                    if h.saturated_in_steady {
                        starved = true;
                        by.1 = true;
                        reasons.push("host saturated".to_string());
                    }
                }
            }
        }
        if page.is_none() {
            reasons.push("no page lag meter in the steady window".to_string());
        }
        let status = if !watching {
            ViewerHeadroomStatus::NotWatching
        } else if starved {
            ViewerHeadroomStatus::Starved
        } else if known {
            ViewerHeadroomStatus::Headroom
        } else {
            ViewerHeadroomStatus::Unknown
        };
        if watching {
            counts.in_steady += 1;
            match status {
                ViewerHeadroomStatus::Starved => {
                    counts.starved += 1;
                    counts.starved_by_page_lag += u32::from(page.is_some_and(|p| p.starved));
                    counts.starved_by_node += u32::from(by.0);
                    counts.starved_by_host += u32::from(by.1);
                }
                ViewerHeadroomStatus::Headroom => counts.with_headroom += 1,
                _ => counts.unknown += 1,
            }
        }
        // A starved viewer's notes are its reasons; one with headroom keeps what is unknown.
        if status == ViewerHeadroomStatus::Starved {
            reasons.retain(|r| r == "page lag" || r.ends_with(" saturated"));
        }
        let spans = merge(
            lag.iter()
                .filter(|i| i.starved())
                .map(|i| Span {
                    from_s: i.from,
                    to_s: i.to,
                })
                .collect(),
        );
        per_viewer.insert(
            row.viewer,
            ViewerHeadroom {
                viewer: row.viewer,
                node: row.node.clone(),
                status,
                reasons,
                page,
                starved_s: spans.iter().fold(0.0, |sum, s| sum + (s.to_s - s.from_s)),
                starved_spans_total: spans.len() as u32,
                starved_spans: spans.into_iter().take(SPANS_LISTED).collect(),
            },
        );
    }

    let starved: BTreeSet<u32> = per_viewer
        .values()
        .filter(|v| v.status == ViewerHeadroomStatus::Starved)
        .map(|v| v.viewer)
        .collect();
    let figures = figures(run, inputs, &counts, &starved);
    let listed: Vec<&ViewerHeadroom> = per_viewer
        .values()
        .filter(|v| v.status == ViewerHeadroomStatus::Starved || v.starved_spans_total > 0)
        .collect();
    counts.not_listed = listed.len().saturating_sub(VIEWERS_LISTED) as u32;
    counts.listed = listed.into_iter().take(VIEWERS_LISTED).cloned().collect();

    let node_busy = nodes
        .iter_mut()
        .map(|(name, m)| (name.clone(), std::mem::take(&mut m.busy_points)))
        .collect();
    let nodes: Vec<MachineHeadroom> = nodes.into_values().map(|m| m.check).collect();
    let unsampled_nodes = unsampled
        .into_iter()
        .map(|(node, viewers)| UnsampledNode { node, viewers })
        .collect();
    let mut headroom = Headroom {
        verdict: HeadroomVerdict::Unknown,
        headline: String::new(),
        not_a_finding_because: Vec::new(),
        rules: rules(),
        steady_from_s: steady.from_s,
        steady_to_s: steady.to_s,
        warnings: steal_warnings(host.as_ref(), &nodes),
        host: host.take(),
        host_judges_viewers,
        nodes,
        unsampled_nodes,
        viewers: counts,
        figures,
    };
    let (verdict, because) = verdict(&headroom);
    headroom.verdict = verdict;
    headroom.not_a_finding_because = because;
    headroom.headline = headline(&headroom);
    let page_late = any_lag.then(|| page_late_series(&late_bins, inputs));
    Analysis {
        headroom,
        per_viewer,
        page_late,
        node_busy,
    }
}

/// The players' figures at T over all viewers and over all but the starved ones, computed
/// as the `players` table is.
fn figures(
    run: &RunData,
    inputs: &Inputs,
    counts: &HeadroomViewers,
    starved: &BTreeSet<u32>,
) -> HeadroomFigures {
    let exporter_note = "The exporter's figures cannot be split per viewer: the platform's \
                         counters sum every player (PeerTube's have no per-viewer label), so \
                         they cover all viewers, starved or not."
        .to_string();
    let Some(players) = inputs.players else {
        return HeadroomFigures {
            all: None,
            with_headroom: None,
            exporter_note,
        };
    };
    let at_t = |table: &SourceTable, viewers: u32| FiguresAtT {
        viewers,
        http_at_mbps: table.http_at_mbps,
        p2p_at_mbps: table.p2p_at_mbps,
        http_share: table.http_share,
        p2p_savings: table.p2p_savings,
    };
    let all = at_t(players, counts.in_steady);
    let kept = counts.in_steady - counts.starved;
    let with_headroom = if starved.is_empty() {
        Some(FiguresAtT {
            viewers: kept,
            ..all.clone()
        })
    } else if kept == 0 {
        None
    } else {
        let mut subset = run.clone();
        subset
            .viewer_samples
            .retain(|s| !starved.contains(&s.viewer));
        subset
            .viewer_events
            .retain(|e| !starved.contains(&e.viewer));
        traffic::players(&subset, inputs.bin_s, inputs.end_s, inputs.sampling_s)
            .traffic
            .map(|t| {
                at_t(
                    &table::source_table(&t, inputs.steady, inputs.rate_window_s),
                    kept,
                )
            })
    };
    HeadroomFigures {
        all: Some(all),
        with_headroom,
        exporter_note,
    }
}

/// Finding, not a finding (and why), or unknown.
fn verdict(h: &Headroom) -> (HeadroomVerdict, Vec<String>) {
    let v = &h.viewers;
    let started = f64::from(v.started);
    let mut because = Vec::new();
    let judging = h
        .host
        .iter()
        .filter(|_| h.host_judges_viewers)
        .chain(h.nodes.iter());
    for m in judging {
        if m.saturated_in_steady
            && v.started > 0
            && f64::from(m.viewers) >= NOT_A_FINDING_MACHINE_SHARE * started
            && m.viewers > 0
        {
            because.push(format!(
                "{} was saturated {} of the steady window and carried {} of the {} started \
                 viewers.",
                machine_label(&m.name),
                whole_pct(m.steady_hot_share),
                m.viewers,
                v.started
            ));
        }
    }
    if v.started > 0
        && v.starved > 0
        && f64::from(v.starved) >= NOT_A_FINDING_STARVED_SHARE * started
    {
        because.push(format!(
            "{} of the {} started viewers had no headroom in the steady window ({}).",
            v.starved,
            v.started,
            reasons_count(v)
        ));
    }
    let verdict = if !because.is_empty() {
        HeadroomVerdict::NotAFinding
    } else if v.in_steady > 0 && v.unknown < v.in_steady {
        HeadroomVerdict::Finding
    } else {
        HeadroomVerdict::Unknown
    };
    (verdict, because)
}

/// "this machine" or "node X".
fn machine_label(name: &str) -> String {
    if name == HOST_NAME {
        "This machine (where the browsers ran)".to_string()
    } else {
        format!("Node {name}")
    }
}

/// Starved viewers by reason, in words: "5 by their page's lag, 5 by a saturated node".
pub fn reasons_count(v: &HeadroomViewers) -> String {
    let mut parts = Vec::new();
    if v.starved_by_page_lag > 0 {
        parts.push(format!("{} by their page's lag", v.starved_by_page_lag));
    }
    if v.starved_by_node > 0 {
        parts.push(format!("{} by a saturated node", v.starved_by_node));
    }
    if v.starved_by_host > 0 {
        parts.push(format!("{} by the saturated host", v.starved_by_host));
    }
    parts.join(", ")
}

/// What starved the viewers, briefly: "host saturated 73% of it, 5 pages lagging".
fn causes(h: &Headroom) -> String {
    let mut parts = Vec::new();
    if h.host_judges_viewers {
        if let Some(host) = h.host.as_ref().filter(|m| m.saturated_in_steady) {
            parts.push(format!(
                "host saturated {} of it",
                whole_pct(host.steady_hot_share)
            ));
        }
    }
    let saturated: Vec<&MachineHeadroom> =
        h.nodes.iter().filter(|m| m.saturated_in_steady).collect();
    match saturated.len() {
        0 => {}
        1 | 2 => parts.extend(saturated.iter().map(|m| {
            format!(
                "node {} saturated {} of it",
                m.name,
                whole_pct(m.steady_hot_share)
            )
        })),
        n => parts.push(format!("{n} of {} nodes saturated", h.nodes.len())),
    }
    let lagging = h.viewers.starved_by_page_lag;
    if lagging > 0 {
        parts.push(format!(
            "{lagging} page{} lagging",
            if lagging == 1 { "" } else { "s" }
        ));
    }
    parts.join(", ")
}

/// The P2P savings with headroom against all, in words.
fn savings_comparison(h: &Headroom) -> String {
    let f = &h.figures;
    match (&f.all, &f.with_headroom) {
        (None, _) => "no players' figures to split".to_string(),
        (Some(_), None) => "no viewer had headroom".to_string(),
        (Some(all), Some(kept)) => format!(
            "P2P savings {} ({} viewers) vs {} for all {} (players' stats)",
            pct(kept.p2p_savings),
            kept.viewers,
            pct(all.p2p_savings),
            all.viewers
        ),
    }
}

/// The one line `viewerfleet run` prints and the report's headline repeats.
pub fn headline(h: &Headroom) -> String {
    let v = &h.viewers;
    match h.verdict {
        HeadroomVerdict::NotAFinding => format!(
            "HEADROOM: {} of {} viewers starved in the steady window ({}): the P2P figure is \
             not a finding; with headroom only: {}",
            v.starved,
            v.in_steady,
            causes(h),
            savings_comparison(h)
        ),
        HeadroomVerdict::Finding if v.starved > 0 => format!(
            "headroom: {} of {} viewers starved in the steady window ({}), fewer than the {:.0}% \
             that make the P2P figure not a finding; with headroom only: {}",
            v.starved,
            v.in_steady,
            causes(h),
            NOT_A_FINDING_STARVED_SHARE * 100.0,
            savings_comparison(h)
        ),
        HeadroomVerdict::Finding if v.unknown == 0 => format!(
            "headroom: all {} viewers had headroom in the steady window",
            v.in_steady
        ),
        HeadroomVerdict::Finding => format!(
            "headroom: the {} viewers measured had headroom in the steady window; {} of {} \
             unknown (neither page nor machine measured)",
            v.in_steady - v.unknown,
            v.unknown,
            v.in_steady
        ),
        HeadroomVerdict::Unknown if v.in_steady == 0 => {
            "headroom: unknown, no viewer watched during the steady window".to_string()
        }
        HeadroomVerdict::Unknown => "headroom: unknown, nothing measured the viewers' machines \
                                     or pages (the browsers ran elsewhere, their nodes were not \
                                     sampled and the pages had no lag meter)"
            .to_string(),
    }
}

/// Steal above [`STEAL_WARN`] on any machine.
fn steal_warnings(host: Option<&MachineHeadroom>, nodes: &[MachineHeadroom]) -> Vec<String> {
    host.into_iter()
        .chain(nodes)
        .filter_map(|m| {
            let steal = m.mean_steal.filter(|s| *s > STEAL_WARN)?;
            Some(format!(
                "{}: the hypervisor took {:.1}% of its CPU on average (steal): shared cloud \
                 vCPUs, so the viewers' CPU budget moved with other guests' load.",
                if m.name == HOST_NAME {
                    "This machine".to_string()
                } else {
                    format!("Node {}", m.name)
                },
                steal * 100.0
            ))
        })
        .collect()
}

/// Mean lateness of all pages' ticks over a trailing window of two sampling intervals.
fn page_late_series((late, ticks): &(Bins, Bins), inputs: &Inputs) -> Series {
    let w = (2.0 * inputs.sampling_s).max(inputs.bin_s);
    let late = late.trailing_rates(w, 0.0, inputs.end_s);
    let ticks = ticks.trailing_rates(w, 0.0, inputs.end_s);
    Series {
        name: super::model::names::PAGE_LATE_MS,
        unit: "ms",
        points: late
            .into_iter()
            .zip(ticks)
            .filter(|(_, (_, n))| *n > 0.0)
            .map(|((t, l), (_, n))| (t, l / n))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kinds::FleetKind;
    use crate::model::rawdata::{
        HostSample, Manifest, NodeSample, PlanSummary, ViewerEvent, ViewerEventKind,
    };

    const STEADY: Steady = Steady {
        from_s: 90.0,
        to_s: 120.0,
    };

    /// A run of `viewers` viewers watching 0–150 s, each with HTTP 50 kB/s and P2P
    /// 100 kB/s (or 150/0 when `http_only(viewer)`), page lag `late_ms(viewer, t)` mean ms
    /// per tick, on node `node(viewer)`.
    struct Crafted {
        run: RunData,
        rows: Vec<ViewerRow>,
        watching: BTreeMap<u32, (f64, f64)>,
    }

    fn crafted(
        viewers: u32,
        node: impl Fn(u32) -> &'static str,
        late_ms: impl Fn(u32, f64) -> Option<f64>,
        http_only: impl Fn(u32) -> bool,
    ) -> Crafted {
        let mut manifest = Manifest::example();
        manifest.plan = PlanSummary {
            viewers,
            sampling_interval_s: 2.0,
            measure_at_s: 120.0,
            steady_window_s: 30.0,
            duration_s: 150.0,
            ..Default::default()
        };
        let mut samples = Vec::new();
        let mut events = Vec::new();
        let mut rows = Vec::new();
        let mut watching = BTreeMap::new();
        for v in 0..viewers {
            events.push(ViewerEvent {
                t: 0.0,
                viewer: v,
                event: ViewerEventKind::Playing,
                p2p: true,
                reason: None,
                node: Some(node(v).to_string()),
                address: None,
                ttff_ms: Some(1000.0),
                due_s: None,
            });
            let (h, p) = if http_only(v) {
                (150_000, 0)
            } else {
                (50_000, 100_000)
            };
            let mut lag = PageLag::default();
            for i in 1..=75u64 {
                let t = i as f64 * 2.0;
                let lag_now = late_ms(v, t).map(|ms| {
                    lag.ticks += 8;
                    lag.late_ms += 8.0 * ms;
                    lag.max_ms = ms * 3.0;
                    lag
                });
                samples.push(ViewerSample {
                    t,
                    viewer: v,
                    http_down_bytes: h * i * 2,
                    p2p_down_bytes: p * i * 2,
                    playing: true,
                    lag: lag_now,
                    ..Default::default()
                });
            }
            rows.push(ViewerRow {
                viewer: v,
                node: Some(node(v).to_string()),
                ..Default::default()
            });
            watching.insert(v, (0.0, 150.0));
        }
        Crafted {
            run: RunData {
                dir: "/nowhere/run".into(),
                manifest,
                run_events: vec![],
                viewer_events: events,
                viewer_samples: samples,
                exporter_samples: vec![],
                host_samples: vec![],
                node_samples: vec![],
                light_samples: vec![],
                truncated_files: vec![],
            },
            rows,
            watching,
        }
    }

    fn host(busy: impl Fn(f64) -> f64) -> Vec<HostSample> {
        (0..=75)
            .map(|i| {
                let t = i as f64 * 2.0;
                HostSample {
                    t,
                    cpu_busy: busy(t),
                    cores: 2,
                    cpu_steal: Some(0.01),
                    cpu_pressure: Some(0.3),
                    ..Default::default()
                }
            })
            .collect()
    }

    fn node_samples(node: &str, busy: impl Fn(f64) -> f64) -> Vec<NodeSample> {
        (0..=75)
            .map(|i| {
                let t = i as f64 * 2.0;
                NodeSample {
                    t,
                    node: node.to_string(),
                    ok: true,
                    cores: Some(4.0),
                    cpu_busy: Some(busy(t)),
                    cpu_steal: Some(0.0),
                    cpu_throttled: Some(0.0),
                    ..Default::default()
                }
            })
            .collect()
    }

    fn analyse_crafted(c: &Crafted) -> Analysis {
        let ply = traffic::players(&c.run, 1.0, 151.0, 2.0);
        let players = ply
            .traffic
            .as_ref()
            .map(|t| table::source_table(t, STEADY, 30.0));
        analyse(
            &c.run,
            &Inputs {
                steady: STEADY,
                sampling_s: 2.0,
                bin_s: 1.0,
                end_s: 151.0,
                rate_window_s: 30.0,
                viewers: &c.rows,
                watching: &c.watching,
                started: c.rows.len() as u32,
                players: players.as_ref(),
            },
        )
    }

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9)
    }

    #[test]
    fn an_idle_host_gives_every_viewer_headroom_and_a_finding() {
        let mut c = crafted(4, |_| "local", |_, _| Some(1.0), |_| false);
        c.run.host_samples = host(|_| 0.45);
        let a = analyse_crafted(&c);
        let h = &a.headroom;
        assert_eq!(h.verdict, HeadroomVerdict::Finding);
        assert!(h.host_judges_viewers);
        let host = h.host.as_ref().unwrap();
        assert!(!host.saturated && host.hot_spans.is_empty());
        assert_eq!(host.viewers, 4);
        assert!(close(host.mean_steal, 0.01) && close(host.mean_pressure, 0.3));
        assert_eq!((h.viewers.in_steady, h.viewers.with_headroom), (4, 4));
        assert!(h.viewers.listed.is_empty());
        assert_eq!(h.figures.all, h.figures.with_headroom);
        assert!(close(
            h.figures.all.as_ref().unwrap().p2p_savings,
            2.0 / 3.0
        ));
        assert_eq!(
            h.headline,
            "headroom: all 4 viewers had headroom in the steady window"
        );
        let page = a.per_viewer[&0].page.unwrap();
        assert!((page.mean_late_ms - 1.0).abs() < 1e-9 && !page.starved);
        assert!(h.warnings.is_empty());
    }

    #[test]
    fn a_saturated_host_starves_every_viewer_and_the_run_is_not_a_finding() {
        // Hot from 80 s on: 30 of 30 s of the steady window, 72 of 152 s sampled.
        let mut c = crafted(4, |_| "local", |_, _| None, |_| false);
        c.run.host_samples = host(|t| if t > 78.0 { 0.97 } else { 0.5 });
        let h = analyse_crafted(&c).headroom;
        let host = h.host.as_ref().unwrap();
        assert!(host.saturated && host.saturated_in_steady);
        assert!(close(host.steady_hot_share, 1.0));
        assert_eq!(
            host.hot_spans,
            [Span {
                from_s: 78.0,
                to_s: 150.0
            }]
        );
        assert_eq!(h.verdict, HeadroomVerdict::NotAFinding);
        assert_eq!((h.viewers.starved, h.viewers.starved_by_host), (4, 4));
        assert_eq!(h.viewers.listed[0].reasons, ["host saturated"]);
        assert!(h.figures.with_headroom.is_none());
        assert_eq!(
            h.headline,
            "HEADROOM: 4 of 4 viewers starved in the steady window (host saturated 100% of \
             it): the P2P figure is not a finding; with headroom only: no viewer had headroom"
        );
        assert_eq!(
            h.not_a_finding_because.len(),
            2,
            "{:?}",
            h.not_a_finding_because
        );
    }

    #[test]
    fn one_starved_node_of_two_on_a_grid_splits_the_figures() {
        // Viewers 0–1 on node a (idle), 2–3 on node b (hot in the steady window); b's
        // viewers got no P2P (all HTTP).
        let mut c = crafted(
            4,
            |v| {
                if v < 2 {
                    "http://a:5555"
                } else {
                    "http://b:5555"
                }
            },
            |v, t| Some(if v >= 2 && t > 60.0 { 8.0 } else { 1.0 }),
            |v| v >= 2,
        );
        c.run.manifest.fleet.kind = FleetKind::Grid;
        c.run.manifest.fleet.browsers_on_this_host = Some(false);
        c.run.host_samples = host(|_| 0.97);
        c.run.node_samples = node_samples("http://a:5555", |_| 0.4);
        c.run
            .node_samples
            .extend(node_samples("http://b:5555", |t| {
                if t > 60.0 {
                    0.95
                } else {
                    0.5
                }
            }));
        c.run.node_samples.sort_by(|a, b| a.t.total_cmp(&b.t));
        let a = analyse_crafted(&c);
        let h = &a.headroom;
        assert!(!h.host_judges_viewers);
        assert_eq!(
            h.host.as_ref().unwrap().viewers,
            0,
            "the controller carries none"
        );
        assert_eq!(h.nodes.len(), 2);
        let b = &h.nodes[1];
        assert!(b.saturated_in_steady && b.viewers == 2);
        assert!(!h.nodes[0].saturated);
        assert_eq!(h.verdict, HeadroomVerdict::NotAFinding);
        assert_eq!(
            (
                h.viewers.starved,
                h.viewers.starved_by_node,
                h.viewers.starved_by_page_lag
            ),
            (2, 2, 2)
        );
        assert_eq!(
            a.per_viewer[&2].reasons,
            ["page lag", "node http://b:5555 saturated"]
        );
        assert_eq!(a.per_viewer[&2].starved_spans[0].from_s, 60.0);
        assert_eq!(a.per_viewer[&0].status, ViewerHeadroomStatus::Headroom);
        // All: 2 × 100 kB/s P2P of 4 × 150 kB/s; with headroom: viewers 0–1 only.
        let all = h.figures.all.as_ref().unwrap();
        let kept = h.figures.with_headroom.as_ref().unwrap();
        assert!(close(all.p2p_savings, 1.0 / 3.0));
        assert!(close(kept.p2p_savings, 2.0 / 3.0));
        assert!(close(kept.http_at_mbps, 0.8));
        assert_eq!((all.viewers, kept.viewers), (4, 2));
        assert!(
            h.headline.starts_with(
                "HEADROOM: 2 of 4 viewers starved in the steady window (node http://b:5555 \
                 saturated 100% of it, 2 pages lagging): the P2P figure is not a finding; \
                 with headroom only: P2P savings 66.7% (2 viewers) vs 33.3% for all 4"
            ),
            "{}",
            h.headline
        );
    }

    #[test]
    fn a_node_without_samples_is_unknown_and_never_left_out() {
        let mut c = crafted(
            3,
            |v| {
                if v == 0 {
                    "http://a:5555"
                } else {
                    "http://c:5555"
                }
            },
            |v, _| (v != 2).then_some(1.0),
            |_| false,
        );
        c.run.manifest.fleet.kind = FleetKind::Grid;
        c.run.manifest.fleet.browsers_on_this_host = Some(false);
        c.run.node_samples = node_samples("http://a:5555", |_| 0.4);
        let a = analyse_crafted(&c);
        let h = &a.headroom;
        assert_eq!(
            h.unsampled_nodes,
            [UnsampledNode {
                node: "http://c:5555".into(),
                viewers: 2
            }]
        );
        // Viewer 1: judged by its page; viewer 2: nothing measured.
        assert_eq!(a.per_viewer[&1].status, ViewerHeadroomStatus::Headroom);
        assert_eq!(a.per_viewer[&1].reasons, ["node http://c:5555 not sampled"]);
        assert_eq!(a.per_viewer[&2].status, ViewerHeadroomStatus::Unknown);
        assert_eq!((h.viewers.with_headroom, h.viewers.unknown), (2, 1));
        assert_eq!(h.verdict, HeadroomVerdict::Finding);
        assert_eq!(h.figures.with_headroom.as_ref().unwrap().viewers, 3);
        assert!(h.headline.contains("; 1 of 3 unknown"), "{}", h.headline);
    }

    #[test]
    fn pages_lagging_on_an_idle_host_are_starved_like_a_throttled_cgroup() {
        // The host is idle, but viewers 1 and 2 run 2 ms late on average with 3% of their
        // ticks over 100 ms late (their container's quota ran out): starved by the page rule.
        let mut c = crafted(5, |_| "local", |_, _| Some(1.0), |_| false);
        c.run.host_samples = host(|_| 0.3);
        for s in &mut c.run.viewer_samples {
            if let Some(lag) = s.lag.as_mut().filter(|_| (1..=2).contains(&s.viewer)) {
                lag.late_ticks = (lag.ticks as f64 * 0.03).round() as u64;
            }
        }
        let a = analyse_crafted(&c);
        let h = &a.headroom;
        assert!(!h.host.as_ref().unwrap().saturated);
        assert_eq!((h.viewers.starved, h.viewers.starved_by_page_lag), (2, 2));
        let page = a.per_viewer[&1].page.unwrap();
        assert!(page.starved && (page.late_ticks_share - 0.03).abs() < 0.01);
        assert_eq!(a.per_viewer[&1].reasons, ["page lag"]);
        assert_eq!(h.verdict, HeadroomVerdict::NotAFinding);
        assert_eq!(
            h.not_a_finding_because,
            [
                "2 of the 5 started viewers had no headroom in the steady window (2 by their \
              page's lag)."
            ]
        );
        assert!(a.page_late.is_some());
    }

    #[test]
    fn a_throttled_node_is_hot_at_any_busy_share_and_steal_is_warned_about() {
        let mut c = crafted(2, |_| "http://a:5555", |_, _| None, |_| false);
        c.run.manifest.fleet.browsers_on_this_host = Some(false);
        c.run.node_samples = node_samples("http://a:5555", |_| 0.6);
        for s in &mut c.run.node_samples {
            s.cpu_throttled = Some(0.4);
            s.cpu_steal = Some(0.08);
        }
        let h = analyse_crafted(&c).headroom;
        let node = &h.nodes[0];
        // Busy as sampled: steal is already in a machine's busy share.
        assert!(node.saturated_in_steady && close(Some(node.max_busy), 0.6));
        assert!(close(node.mean_throttled, 0.4));
        assert_eq!(h.verdict, HeadroomVerdict::NotAFinding);
        assert_eq!(h.warnings.len(), 1);
        assert!(h.warnings[0].starts_with("Node http://a:5555: the hypervisor took 8.0%"));
    }

    #[test]
    fn a_reloaded_page_restarts_its_meter_without_a_negative_interval() {
        let mut samples: Vec<ViewerSample> = (1..=4)
            .map(|i| ViewerSample {
                t: i as f64 * 2.0,
                lag: Some(PageLag {
                    ticks: 8 * i,
                    late_ms: 8.0 * i as f64,
                    ..Default::default()
                }),
                ..Default::default()
            })
            .collect();
        samples[3].lag = Some(PageLag {
            ticks: 4,
            late_ms: 100.0,
            ..Default::default()
        });
        let refs: Vec<&ViewerSample> = samples.iter().collect();
        let intervals = lag_intervals(&refs);
        assert_eq!(intervals.len(), 3);
        assert_eq!((intervals[2].ticks, intervals[2].late_ms), (4.0, 100.0));
        assert!(intervals[2].starved() && !intervals[0].starved());
    }
}
