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

use super::format::pct;
use super::load::RunData;
use super::rates::Bins;
use super::summary::{
    FiguresAtT, Headroom, HeadroomFigures, HeadroomVerdict, HeadroomViewers, MachineHeadroom,
    PageLagWindow, Series, SourceTable, Span, UnsampledNode, ViewerHeadroom, ViewerHeadroomStatus,
    ViewerRow,
};

use super::table::{self, Steady};
use super::traffic;
use crate::model::rawdata::{PageLag, ViewerSample};
use std::collections::{BTreeMap, BTreeSet};

/// A host or node sample is hot above this busy share of its cores (or CPU allowance);
/// steal counts as busy.
pub(crate) const HOT_BUSY: f64 = 0.90;
/// A node sample is also hot when more than this share of its cgroup's scheduling periods
/// ran out of quota: a throttled container is starved at any busy share.
pub(crate) const HOT_THROTTLED: f64 = 0.25;
/// A machine is saturated when hot for more than this share of its sampled time…
pub(crate) const SATURATED_RUN_SHARE: f64 = 0.10;
/// …or for more than this share of the steady window; only this one judges its viewers.
pub(crate) const SATURATED_STEADY_SHARE: f64 = 0.25;
/// Mean steal above this share is warned about (shared cloud vCPUs).
pub(crate) const STEAL_WARN: f64 = 0.05;

/// A page is starved over a window when its timer ran later than this on average, ms…
///
/// The page's lag meter is a timer due every 250 ms. Measured on a 2-core machine (live
/// refsite, steady window): 8 viewers at 46% mean host busy ran 0.7–1.3 ms late on
/// average per viewer (worst tick 6–76 ms, no tick more than 100 ms late); 24 viewers at
/// 91% busy (a saturated host by the machine rule) ran 5.1–11.8 ms late on average, with
/// 0–2.7% of ticks more than 100 ms late and worst ticks of 55–302 ms. 5 ms and 2% put
/// every page of the saturated run on the starved side and leave a margin of four times
/// the idle run's lateness.
pub(crate) const PAGE_LATE_MEAN_MS: f64 = 5.0;
/// …or when more than this share of its ticks ran more than [`LATE_TICK_MS`] late.
pub(crate) const PAGE_LATE_TICKS_SHARE: f64 = 0.02;
/// What the page's meter counts as a late tick, ms (the meter's own threshold).
pub(crate) const LATE_TICK_MS: f64 = 100.0;
/// A light peers' page is starved over a window when its timer ran later than this on
/// average, ms…
///
/// Calibrated by blocking the thread of one Node.js host of 25 light peers (beside 4
/// viewers, live refsite, 43–60% busy) at five levels, two or three runs each (`cargo bench
/// --bench light_lag`, 2026-12-06): against the unblocked runs (8–19 ms late on average) the
/// viewers' P2P share fell at every level, within the 5 points `fidelity` allows at L1
/// (62–73 ms, −2.8) and beyond them at L2 (83–93 ms, −6.5); the swarm's share showed no trend
/// with lateness up to L3 (280 ms), where light playheads reached missing segments; at L4
/// (stalls of 1.5–4 s) the swarm collapsed.
///
/// The viewers' rule (5 ms or 2% of ticks) calls every unblocked host starved (8–19 ms, up
/// to 4.3%): one thread carrying 25 engines queues its timer behind their work without
/// missing their timeouts.
pub(crate) const LIGHT_PAGE_LATE_MEAN_MS: f64 = 70.0;
/// …or when one of its ticks ran later than this, ms: a stall past p2p-media-loader's own
/// timeout for a peer that stopped sending (`p2pNotReceivingBytesTimeoutMs`, 2 s), which
/// turns the request over to HTTP whatever the mean says.
pub(crate) const LIGHT_PAGE_WORST_TICK_MS: f64 = 2000.0;
/// Fewest visible ticks (2 s) a window needs before its page is judged.
pub(crate) const PAGE_MIN_TICKS: f64 = 8.0;

/// The P2P figure is not a finding when a machine carrying at least this share of the
/// started viewers was saturated in the steady window…
pub(crate) const NOT_A_FINDING_MACHINE_SHARE: f64 = 0.10;
/// …or when at least this share of the started viewers had no headroom there.
pub(crate) const NOT_A_FINDING_STARVED_SHARE: f64 = 0.10;

/// Spans listed per machine and per viewer (the rest are counted).
pub(crate) const SPANS_LISTED: usize = 5;
/// Viewers listed in `report.json` (`viewers.csv` has every one).
pub(crate) const VIEWERS_LISTED: usize = 50;
/// How the host is named among the machines.
pub(crate) const HOST_NAME: &str = "this machine";

/// What the analysis needs from the rest of the report.
pub(crate) struct Inputs<'a> {
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
pub(crate) struct Analysis {
    pub headroom: Headroom,
    pub per_viewer: BTreeMap<u32, ViewerHeadroom>,
    /// Mean lateness of the pages' ticks over time (all viewers), ms.
    pub page_late: Option<Series>,
    /// Each sampled node's busy share over time (steal included).
    pub node_busy: Vec<(String, Vec<(f64, f64)>)>,
}

mod machines;
mod pages;
#[cfg(test)]
mod tests;
mod words;

pub(crate) use machines::host_machine;
use machines::{merge, node_machines};
pub use pages::judge_light_page;
pub(crate) use pages::light_page_rule_words;
use pages::{lag_intervals, page_late_series, page_window};
pub(super) use pages::{meter_intervals, LagInterval};
pub(crate) use words::{headline, reasons_count, rules};
use words::{steal_warnings, verdict};

/// Judges every machine and every viewer, and computes the figures with headroom.
pub(crate) fn analyse(run: &RunData, inputs: &Inputs) -> Analysis {
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
