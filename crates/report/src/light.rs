//! Light peers (`swarm.light_peers`): swarm members that run the page's own P2P engine
//! against a simulated playhead, nothing decoded, many per browser page (a "group").
//!
//! Why a section of their own: they are in the swarm, so the swarm's figures (the players'
//! table, the origin's truth, the exporter) count their bytes, but they are not viewers, so
//! QoE does not. This section says what they moved, how their P2P upload compares with the
//! real viewers' (a light peer that uploads far less than a viewer would make the swarm
//! look less generous than a crowd of real viewers), whether their playheads found their
//! segments in time, and which of their pages were starved of CPU: a page's peers share its
//! timers, so a starved page starves every peer on it, and their P2P figures are biased
//! towards HTTP exactly as a starved viewer's are. Starved groups are judged by the rule
//! `report::headroom` applies to the viewers' pages, and are listed apart.

use super::format::{bytes, pct, NONE};
use super::headroom;
use super::load::RunData;
use super::reconcile::increase;
use super::stats::percentile;
use super::summary::PageLagWindow;
use super::table::Steady;
use super::text_table::Table;
use super::traffic::{LightPeerTotals, PlayerTraffic};
use crate::model::rawdata::{LightSample, PageLag};
use crate::model::scenario::light::FidelityRecord;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Distinct last errors listed (most frequent first); the rest are counted in `errors`.
pub(crate) const ERRORS_LISTED: usize = 5;
/// Starved groups shown in a report's table (all are in `report.json`).
pub(crate) const STARVED_GROUPS_SHOWN: usize = 20;

/// `report.json` `light`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LightReport {
    /// Light peers the plan asked for (absent when the manifest has no `plan.light`).
    pub planned: Option<u32>,
    /// Peers per page, as planned.
    pub per_page: Option<u32>,
    /// What ran the pages: `node` or `browser` (absent in older manifests: browser pages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// How their HTTP and P2P were shaped, in words (from the manifest).
    pub shaping: Option<String>,
    /// Peers with at least one read.
    pub reported: u32,
    /// Peers whose simulated playhead started (`playing` at any read).
    pub started: u32,
    /// Pages (groups) their reads came from.
    pub groups: u32,
    /// Every light peer's bytes over the run.
    pub all: LightFigures,
    /// The same without the peers of starved groups (absent when no group was starved).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub without_starved: Option<LightFigures>,
    /// P2P upload per light peer over the run.
    pub upload: Option<Spread>,
    /// P2P upload per real viewer with P2P on, for comparison.
    pub viewer_upload: Option<Spread>,
    /// Times a playhead reached a segment that had not arrived (a real player would have
    /// stalled), summed over peers, and the peers that had any.
    pub segments_late: u64,
    pub peers_with_late_segments: u32,
    /// Errors the peers counted, summed, and the peers that had any.
    pub errors: u64,
    pub peers_with_errors: u32,
    /// The peers' last errors, most frequent first (the first few).
    pub last_errors: Vec<LightError>,
    /// Groups whose page lag meter had enough ticks to be judged.
    pub groups_judged: u32,
    /// Groups whose page was starved by the page rule, in group order.
    pub starved_groups: Vec<LightGroup>,
    /// Real viewers the plan asked for beside them (absent in reports of older versions).
    #[serde(default)]
    pub viewers_planned: u32,
    /// The run's fleet and throttling, set against the verdict's (absent in reports of
    /// older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttling: Option<String>,
    /// The fidelity verdict the run relied on (`swarm.fidelity`, from the manifest);
    /// absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fidelity: Option<FidelityRecord>,
    /// What the Node.js hosts cost over the steady window (absent with browser pages, whose
    /// CPU is in the browsers').
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cost: Option<LightHostCost>,
    /// How far behind the live edge light peers and real viewers played (live runs whose
    /// reads say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_latency: Option<LiveLatency>,
}

/// Seconds behind the live edge over the steady window (the run when the window holds no
/// reads): where members stand in a live swarm decides who asks the origin first, so light
/// peers that stood elsewhere than the real viewers would shift the swarm's HTTP share.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LiveLatency {
    /// Median over the reads of real viewers that were playing.
    pub viewers_median_s: Option<f64>,
    /// Median over the reads of light peers whose playhead had started.
    pub light_median_s: Option<f64>,
    /// Light peers that held their playhead to follow the real viewers' latency, and the
    /// median time they held it.
    pub light_held: u32,
    pub light_held_median_s: Option<f64>,
}

/// The Node.js light-peer hosts' CPU and memory over the steady window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LightHostCost {
    /// CPU seconds per second, all hosts together.
    pub cores: f64,
    /// Mean PSS of the samples in the window, all hosts together, bytes.
    pub pss_mean_bytes: f64,
    /// Mean host processes in the window.
    pub processes_mean: f64,
    /// Per light peer that reported (cores and bytes).
    pub cores_per_peer: f64,
    pub pss_bytes_per_peer: f64,
}

/// Bytes a set of light peers moved.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LightFigures {
    pub peers: u32,
    pub http_bytes: u64,
    pub p2p_bytes: u64,
    pub p2p_uploaded_bytes: u64,
    /// P2P / (HTTP + P2P) of their downloads, 0..1.
    pub p2p_share: Option<f64>,
}

/// A distribution of bytes per member.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Members it covers.
    pub members: u32,
    pub min_bytes: u64,
    pub p10_bytes: u64,
    pub p50_bytes: u64,
    pub p90_bytes: u64,
    pub max_bytes: u64,
}

/// One last error and how many peers ended on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LightError {
    pub message: String,
    pub peers: u32,
}

/// One starved group: its page's lag meter and its peers' figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LightGroup {
    pub group: u32,
    /// The stretch the meter was read over: the steady window, or the run when the window
    /// held no two reads of this page.
    pub from_s: f64,
    pub to_s: f64,
    pub steady_window: bool,
    pub page: PageLagWindow,
    pub figures: LightFigures,
    pub segments_late: u64,
}

/// `None` for runs without light peers (no plan for them and no read).
pub(crate) fn analyse(run: &RunData, ply: &PlayerTraffic, steady: Steady) -> Option<LightReport> {
    let plan = run.manifest.plan.light.as_ref();
    if plan.is_none() && run.light_samples.is_empty() {
        return None;
    }
    let mut by_peer: BTreeMap<u32, Vec<&LightSample>> = BTreeMap::new();
    for s in &run.light_samples {
        by_peer.entry(s.peer).or_default().push(s);
    }
    let counter = |samples: &[&LightSample], f: fn(&LightSample) -> u64| {
        increase(samples.iter().map(|s| f(s)))
    };
    let late: BTreeMap<u32, u64> = by_peer
        .iter()
        .map(|(p, s)| (*p, counter(s, |s| u64::from(s.segments_late))))
        .collect();
    let errors: Vec<u64> = by_peer
        .values()
        .map(|s| counter(s, |s| u64::from(s.errors)))
        .collect();

    let judged = judge_groups(run, steady);
    let starved: BTreeSet<u32> = judged
        .iter()
        .filter(|(_, (page, _))| page.starved)
        .map(|(g, _)| *g)
        .collect();
    let peers = &ply.per_light_peer;
    let starved_groups = starved
        .iter()
        .map(|g| {
            let (page, span) = judged[g];
            let in_group = |p: &LightPeerTotals| p.group == *g;
            LightGroup {
                group: *g,
                from_s: span.from_s,
                to_s: span.to_s,
                steady_window: span.steady,
                page,
                figures: figures(peers.values().filter(|p| in_group(p))),
                segments_late: peers
                    .iter()
                    .filter(|(_, p)| in_group(p))
                    .map(|(id, _)| late.get(id).copied().unwrap_or(0))
                    .sum(),
            }
        })
        .collect();
    let p2p_off: BTreeSet<u32> = run
        .viewer_events
        .iter()
        .filter(|e| !e.p2p)
        .map(|e| e.viewer)
        .collect();
    let viewer_up: Vec<f64> = ply
        .per_viewer
        .iter()
        .filter(|(v, _)| !p2p_off.contains(v))
        .map(|(_, t)| t.up)
        .collect();
    Some(LightReport {
        planned: plan.map(|l| l.peers),
        per_page: plan.map(|l| l.per_page),
        runtime: plan.and_then(|l| l.runtime.clone()),
        shaping: plan.map(|l| l.shaping.clone()),
        reported: by_peer.len() as u32,
        started: by_peer
            .values()
            .filter(|s| s.iter().any(|s| s.playing))
            .count() as u32,
        groups: run
            .light_samples
            .iter()
            .map(|s| s.group)
            .collect::<BTreeSet<_>>()
            .len() as u32,
        all: figures(peers.values()),
        without_starved: (!starved.is_empty())
            .then(|| figures(peers.values().filter(|p| !starved.contains(&p.group)))),
        upload: spread(&peers.values().map(|p| p.up).collect::<Vec<_>>()),
        viewer_upload: spread(&viewer_up),
        segments_late: late.values().sum(),
        peers_with_late_segments: late.values().filter(|n| **n > 0).count() as u32,
        errors: errors.iter().sum(),
        peers_with_errors: errors.iter().filter(|n| **n > 0).count() as u32,
        last_errors: last_errors(&by_peer),
        groups_judged: judged.len() as u32,
        starved_groups,
        viewers_planned: run.manifest.plan.viewers,
        fleet: Some(run.manifest.fleet.kind.to_string()),
        throttling: run.manifest.fleet.throttling.map(|t| t.to_string()),
        fidelity: plan.and_then(|l| l.fidelity.clone()),
        host_cost: crate::cost::light_host_cost(
            run,
            crate::cost::Window {
                from_s: steady.from_s,
                to_s: steady.to_s,
            },
        )
        .filter(|_| !by_peer.is_empty())
        .map(|c| LightHostCost {
            cores: c.cores,
            pss_mean_bytes: c.pss_mean_bytes,
            processes_mean: c.processes_mean,
            cores_per_peer: c.cores / by_peer.len() as f64,
            pss_bytes_per_peer: c.pss_mean_bytes / by_peer.len() as f64,
        }),
        live_latency: live_latency(run, steady.from_s, steady.to_s),
    })
}

/// The members' live latency over `from_s..to_s` (see [`LiveLatency`]): real viewers and
/// light peers alike, so an all-real run has its viewers' figure too; `None` when no read
/// carries one (VOD, or a page that does not say).
pub fn live_latency(run: &RunData, from_s: f64, to_s: f64) -> Option<LiveLatency> {
    // The median of the window's reads (t, latency), or of every read when it holds none.
    let median = |reads: Vec<(f64, f64)>| {
        let inside: Vec<f64> = reads
            .iter()
            .filter(|(t, _)| *t >= from_s && *t <= to_s)
            .map(|r| r.1)
            .collect();
        if inside.is_empty() {
            percentile(&reads.iter().map(|r| r.1).collect::<Vec<_>>(), 50.0)
        } else {
            percentile(&inside, 50.0)
        }
    };
    let playing =
        |playing: bool, t: f64, latency: Option<f64>| Some((t, latency?)).filter(|_| playing);
    let viewers_median_s = median(
        run.viewer_samples
            .iter()
            .filter_map(|s| playing(s.playing, s.t, s.live_latency_s))
            .collect(),
    );
    let light_median_s = median(
        run.light_samples
            .iter()
            .filter_map(|s| playing(s.playing, s.t, s.live_latency_s))
            .collect(),
    );
    if viewers_median_s.is_none() && light_median_s.is_none() {
        return None;
    }
    // Each peer's held time is cumulative: its largest read is its total.
    let mut held_by_peer: BTreeMap<u32, f64> = BTreeMap::new();
    for s in &run.light_samples {
        if let Some(ms) = s.held_ms {
            let held = held_by_peer.entry(s.peer).or_default();
            *held = held.max(ms / 1000.0);
        }
    }
    let held: Vec<f64> = held_by_peer.into_values().collect();
    Some(LiveLatency {
        viewers_median_s,
        light_median_s,
        light_held: held.len() as u32,
        light_held_median_s: percentile(&held, 50.0),
    })
}

/// Each light peer's P2P upload over the run, in bytes, by peer: its counter's increase
/// from zero (a reset counts from zero again), as `upload` spreads them. `viewerfleet
/// fidelity` pools them with the viewers' per-viewer uploads.
pub fn upload_per_peer(run: &RunData) -> Vec<u64> {
    let mut by_peer: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for s in &run.light_samples {
        by_peer.entry(s.peer).or_default().push(s.p2p_up_bytes);
    }
    by_peer
        .into_values()
        .map(|values| increase(values.into_iter()))
        .collect()
}

/// The bytes of a set of light peers.
fn figures<'a>(peers: impl Iterator<Item = &'a LightPeerTotals>) -> LightFigures {
    let mut f = LightFigures::default();
    let (mut http, mut p2p, mut up) = (0.0, 0.0, 0.0);
    for p in peers {
        f.peers += 1;
        http += p.http;
        p2p += p.p2p;
        up += p.up;
    }
    let round = |v: f64| v.round().max(0.0) as u64;
    f.http_bytes = round(http);
    f.p2p_bytes = round(p2p);
    f.p2p_uploaded_bytes = round(up);
    f.p2p_share = (http + p2p > 0.0).then(|| p2p / (http + p2p));
    f
}

/// Min, p10, median, p90 and max of bytes per member (percentiles interpolated).
pub fn spread(values: &[f64]) -> Option<Spread> {
    let at = |p: f64| percentile(values, p).map(|v| v.round().max(0.0) as u64);
    Some(Spread {
        members: values.len() as u32,
        min_bytes: at(0.0)?,
        p10_bytes: at(10.0)?,
        p50_bytes: at(50.0)?,
        p90_bytes: at(90.0)?,
        max_bytes: at(100.0)?,
    })
}

/// Each peer's last error, counted by message, most frequent first.
fn last_errors(by_peer: &BTreeMap<u32, Vec<&LightSample>>) -> Vec<LightError> {
    let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
    for samples in by_peer.values() {
        if let Some(message) = samples.iter().rev().find_map(|s| s.last_error.as_deref()) {
            *counts.entry(message).or_default() += 1;
        }
    }
    let mut list: Vec<LightError> = counts
        .into_iter()
        .map(|(message, peers)| LightError {
            message: message.to_string(),
            peers,
        })
        .collect();
    list.sort_by_key(|e| std::cmp::Reverse(e.peers));
    list.truncate(ERRORS_LISTED);
    list
}

/// Where a group's meter was read.
#[derive(Debug, Clone, Copy)]
struct MeterSpan {
    from_s: f64,
    to_s: f64,
    steady: bool,
}

/// Every group whose page lag meter could be judged, by the page rule of
/// `report::headroom`: its counts from the first to the last read inside the steady window
/// or, when the window holds no two reads of the page, over the run. A page's peers share
/// its meter and are read together, so one read per distinct time is kept.
fn judge_groups(run: &RunData, steady: Steady) -> BTreeMap<u32, (PageLagWindow, MeterSpan)> {
    let mut reads: BTreeMap<u32, Vec<(f64, PageLag)>> = BTreeMap::new();
    for s in &run.light_samples {
        let Some(lag) = s.lag else { continue };
        let group = reads.entry(s.group).or_default();
        match group.last_mut() {
            Some((t, kept)) if *t == s.t => {
                if lag.ticks > kept.ticks {
                    *kept = lag;
                }
            }
            _ => group.push((s.t, lag)),
        }
    }
    let mut out = BTreeMap::new();
    for (group, reads) in reads {
        let intervals = headroom::meter_intervals(&reads);
        let inside: Vec<_> = intervals
            .iter()
            .filter(|i| i.from >= steady.from_s && i.to <= steady.to_s)
            .collect();
        let (chosen, in_steady) = if inside.is_empty() {
            (intervals.iter().collect::<Vec<_>>(), false)
        } else {
            (inside, true)
        };
        let (Some(first), Some(last)) = (chosen.first(), chosen.last()) else {
            continue;
        };
        let sum = |f: fn(&headroom::LagInterval) -> f64| chosen.iter().map(|i| f(i)).sum::<f64>();
        let max_ms = chosen.iter().map(|i| i.max_ms).fold(0.0, f64::max);
        let page = headroom::judge_light_page(
            sum(|i| i.ticks),
            sum(|i| i.late_ms),
            sum(|i| i.late_ticks),
            max_ms,
        );
        if let Some(page) = page {
            let span = MeterSpan {
                from_s: first.from,
                to_s: last.to,
                steady: in_steady,
            };
            out.insert(group, (page, span));
        }
    }
    out
}

/// "38 light peers" / "1 light peer".
pub fn peers_phrase(n: u32) -> String {
    format!("{n} light peer{}", if n == 1 { "" } else { "s" })
}

/// What ran the pages, in words.
fn runtime_words(runtime: Option<&str>) -> &'static str {
    match runtime {
        Some("node") => "each page a Node.js process with node-datachannel's WebRTC",
        _ => "each page a Chromium page",
    }
}

/// The section's sentences (the tables are below).
pub fn lines(l: &LightReport) -> Vec<String> {
    let mut out = Vec::new();
    let planned = match (l.planned, l.per_page) {
        (Some(n), Some(k)) => format!(
            "{} planned, {k} per page ({})",
            peers_phrase(n),
            runtime_words(l.runtime.as_deref())
        ),
        (Some(n), None) => format!("{} planned", peers_phrase(n)),
        _ => "Light peers without a plan in the manifest".to_string(),
    };
    out.push(format!(
        "{planned}{}: {} reported from {} page{}, {} started their playhead.",
        l.shaping
            .as_deref()
            .filter(|s| !s.is_empty())
            .map(|s| format!(" (shaping: {s})"))
            .unwrap_or_default(),
        l.reported,
        l.groups,
        if l.groups == 1 { "" } else { "s" },
        l.started
    ));
    out.push(fidelity_line(l));
    let a = &l.all;
    out.push(format!(
        "Over the run they downloaded {} over HTTP and {} over P2P (P2P share {}) and uploaded \
         {} over P2P. Their bytes are in the players' figures above (the swarm's); QoE counts \
         the viewers only.",
        bytes(Some(a.http_bytes)),
        bytes(Some(a.p2p_bytes)),
        pct(a.p2p_share),
        bytes(Some(a.p2p_uploaded_bytes)),
    ));
    if let Some(line) = l.live_latency.as_ref().map(latency_line) {
        out.push(line);
    }
    if let Some(c) = &l.host_cost {
        out.push(format!(
            "Their Node.js hosts used {:.2} cores and {} (PSS) over the steady window, {:.1} processes on average: {:.4} cores and {} per light peer.",
            c.cores,
            bytes(Some(c.pss_mean_bytes as u64)),
            c.processes_mean,
            c.cores_per_peer,
            bytes(Some(c.pss_bytes_per_peer as u64)),
        ));
    }
    out.push(format!(
        "Segments late (the playhead reached a segment that had not arrived, where a player \
         would stall): {}{}. Errors: {}{}.",
        l.segments_late,
        if l.segments_late > 0 {
            format!(" in {}", peers_phrase(l.peers_with_late_segments))
        } else {
            String::new()
        },
        l.errors,
        if l.errors > 0 {
            format!(
                " in {}{}",
                peers_phrase(l.peers_with_errors),
                if l.last_errors.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; last errors: {}",
                        l.last_errors
                            .iter()
                            .map(|e| format!("{} × {}", e.peers, e.message))
                            .collect::<Vec<_>>()
                            .join("; ")
                    )
                }
            )
        } else {
            String::new()
        }
    ));
    let starved = l.starved_groups.len();
    out.push(if starved == 0 {
        format!(
            "Pages starved of CPU: none of the {} judged by the light pages' rule ({}) of {} pages.",
            l.groups_judged,
            headroom::light_page_rule_words(),
            l.groups
        )
    } else {
        format!(
            "{starved} of the {} pages judged by the light pages' rule ({}) {} starved of CPU: \
             their {} share the page's late timers, miss the P2P engine's timeouts and fall \
             back to HTTP, so their figures are not a finding (listed below).{}",
            l.groups_judged,
            headroom::light_page_rule_words(),
            if starved == 1 { "was" } else { "were" },
            peers_phrase(l.starved_groups.iter().map(|g| g.figures.peers).sum()),
            l.without_starved
                .as_ref()
                .map(|w| format!(
                    " Without them ({}): P2P share {} against {} for all.",
                    peers_phrase(w.peers),
                    pct(w.p2p_share),
                    pct(l.all.p2p_share)
                ))
                .unwrap_or_default()
        )
    });
    out
}

/// Where the members stood behind the live edge, and whether light peers followed.
fn latency_line(l: &LiveLatency) -> String {
    let s = |v: Option<f64>| v.map_or(NONE.to_string(), |v| format!("{v:.1} s"));
    let held = if l.light_held == 0 {
        "no light peer held its playhead (no real viewer's latency to follow, or none was \
         further behind)"
            .to_string()
    } else {
        format!(
            "{} held {} playhead (median {}) to stand as far behind as the real viewers",
            peers_phrase(l.light_held),
            if l.light_held == 1 { "its" } else { "their" },
            s(l.light_held_median_s)
        )
    };
    format!(
        "Behind the live edge (median of the steady window's reads): real viewers {}, light \
         peers {}; {held}.",
        s(l.viewers_median_s),
        s(l.light_median_s)
    )
}

/// Which fidelity verdict the run relied on, or that it relied on none.
pub(crate) fn fidelity_line(l: &LightReport) -> String {
    let light = l.planned.unwrap_or(l.reported);
    let real = l.viewers_planned;
    let Some(f) = &l.fidelity else {
        // A scenario may hold a verdict per mode but none for this run's.
        let (under, field) = match &l.throttling {
            Some(t) => (
                format!(" under {t}"),
                format!("`swarm.fidelity` (or `swarm.fidelity.{t}`)"),
            ),
            None => (String::new(), "`swarm.fidelity`".to_string()),
        };
        return format!(
            "No fidelity verdict{under}: these light peers were not checked against an all-real \
             swarm of this size (`viewerfleet fidelity SCENARIO --swarm {} --real {real} --out DIR` \
             measures one; name its fidelity.json in {field}).",
            real + light
        );
    };
    let pct = |v: Option<f64>| v.map_or(NONE.to_string(), |v| format!("{v:.1}%"));
    let shape = if (f.swarm, f.real) == (real + light, real) {
        String::new()
    } else {
        format!(
            " It was measured for another shape than this run's {real} real viewers + {}: \
             it vouches for that shape only.",
            peers_phrase(light)
        )
    };
    let measured_on = match f.measured_on() {
        on if on.is_empty() => on,
        on => format!(", {on}"),
    };
    format!(
        "Fidelity: {} ({} real vs {} real + {} light, P2P savings at T {} vs {}, measured {}{measured_on}, {}).{shape}{}",
        f.verdict.as_str(),
        f.swarm,
        f.real,
        f.swarm.saturating_sub(f.real),
        pct(f.all_real_p2p_savings_pct),
        pct(f.with_light_p2p_savings_pct),
        f.created.get(..10).unwrap_or(&f.created),
        f.file,
        conditions_differ(l, f)
    )
}

/// Where the verdict's fleet or throttling is not the run's: light peers shaped otherwise
/// (under tc each has its own slot and link) or on another network may offload otherwise, so
/// the verdict vouches for its own conditions only. Empty when they match or are unknown
/// (a verdict over several throttling modes is worded, not one mode's name: not compared).
fn conditions_differ(l: &LightReport, f: &FidelityRecord) -> String {
    let one_mode = f
        .throttling
        .clone()
        .filter(|t| t.parse::<crate::model::kinds::Throttling>().is_ok());
    let mut differ = Vec::new();
    for (what, verdict, run) in [
        ("fleet", &f.fleet, &l.fleet),
        ("throttling", &one_mode, &l.throttling),
    ] {
        if let (Some(verdict), Some(run)) = (verdict, run) {
            if verdict != run {
                differ.push(format!("{what} {verdict} (this run: {run})"));
            }
        }
    }
    if differ.is_empty() {
        return String::new();
    }
    format!(
        " It was measured on another {}: it vouches for those conditions only.",
        differ.join(" and ")
    )
}

/// P2P upload per member: the light peers against the real viewers.
pub(crate) fn upload_table(l: &LightReport) -> Table {
    let mut t = Table::new(&[
        "P2P upload per member",
        "Members",
        "min",
        "p10",
        "median",
        "p90",
        "max",
    ]);
    for (name, s) in [
        ("light peers", l.upload),
        ("viewers (P2P on)", l.viewer_upload),
    ] {
        t.row(match s {
            Some(s) => vec![
                name.into(),
                s.members.to_string(),
                bytes(Some(s.min_bytes)),
                bytes(Some(s.p10_bytes)),
                bytes(Some(s.p50_bytes)),
                bytes(Some(s.p90_bytes)),
                bytes(Some(s.max_bytes)),
            ],
            None => {
                let mut row = vec![name.to_string(), "0".to_string()];
                row.extend(std::iter::repeat_n(NONE.to_string(), 5));
                row
            }
        });
    }
    t
}

/// The starved groups with their page's meter and their peers' figures.
pub(crate) fn starved_groups_table(l: &LightReport) -> Table {
    let mut t = Table::new(&[
        "Group",
        "Meter read over",
        "Mean late",
        "Ticks >100 ms late",
        "Worst tick",
        "Peers",
        "HTTP",
        "P2P down",
        "P2P up",
        "P2P share",
        "Segments late",
    ])
    .with_left(2);
    for g in l.starved_groups.iter().take(STARVED_GROUPS_SHOWN) {
        t.row(vec![
            g.group.to_string(),
            format!(
                "{:.0}–{:.0} s ({})",
                g.from_s,
                g.to_s,
                if g.steady_window {
                    "steady window"
                } else {
                    "run"
                }
            ),
            format!("{:.1} ms", g.page.mean_late_ms),
            pct(Some(g.page.late_ticks_share)),
            format!("{:.0} ms", g.page.max_ms),
            g.figures.peers.to_string(),
            bytes(Some(g.figures.http_bytes)),
            bytes(Some(g.figures.p2p_bytes)),
            bytes(Some(g.figures.p2p_uploaded_bytes)),
            pct(g.figures.p2p_share),
            g.segments_late.to_string(),
        ]);
    }
    t
}

const TITLE: &str = "Light peers";

/// The section in Markdown.
pub(crate) fn markdown_section(out: &mut String, l: &LightReport) {
    out.push_str(&format!("## {TITLE}\n\n"));
    for line in lines(l) {
        out.push_str(&format!("- {line}\n"));
    }
    out.push('\n');
    out.push_str(&upload_table(l).markdown());
    out.push('\n');
    if !l.starved_groups.is_empty() {
        out.push_str("Starved pages (their peers' figures are not a finding):\n\n");
        out.push_str(&starved_groups_table(l).markdown());
        more_groups(out, l);
        out.push('\n');
    }
}

/// The section in HTML.
pub(crate) fn html_section(out: &mut String, l: &LightReport) {
    use super::svg::esc;
    out.push_str(&format!("<h2>{TITLE}</h2>\n<ul>"));
    for line in lines(l) {
        out.push_str(&format!("<li>{}</li>", esc(&line)));
    }
    out.push_str("</ul>\n");
    out.push_str(&upload_table(l).html());
    if !l.starved_groups.is_empty() {
        out.push_str("<p>Starved pages (their peers' figures are not a finding):</p>\n");
        out.push_str(&starved_groups_table(l).html());
        let mut more = String::new();
        more_groups(&mut more, l);
        if !more.is_empty() {
            out.push_str(&format!("<p>{}</p>\n", esc(more.trim())));
        }
    }
}

/// "…and N more (see report.json)." when the table was cut.
fn more_groups(out: &mut String, l: &LightReport) {
    if l.starved_groups.len() > STARVED_GROUPS_SHOWN {
        out.push_str(&format!(
            "\n…and {} more (see report.json).\n",
            l.starved_groups.len() - STARVED_GROUPS_SHOWN
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis;
    use crate::model::kinds::{FleetKind, Throttling};
    use crate::model::rawdata::{
        LightSummary, Manifest, PlanSummary, ViewerEvent, ViewerEventKind, ViewerSample,
    };

    /// Two viewers (0 with P2P on, 1 with P2P off) and `groups` pages of two light peers,
    /// read every 2 s from 2 to 150 s. Viewer 0: 50 kB/s HTTP, 100 kB/s P2P, uploads 80 kB/s;
    /// viewer 1: 150 kB/s HTTP. Light peer `p`: 20 kB/s HTTP, 60 kB/s P2P, uploads
    /// `10 kB/s × (p + 1)`. Every page's timer runs 1 ms late per tick, except pages in
    /// `starved`, which run 8 ms late from 60 s on.
    fn crafted(groups: u32, starved: &[u32]) -> RunData {
        let mut manifest = Manifest::example();
        manifest.ended_at = Some("end".into());
        manifest.plan = PlanSummary {
            viewers: 2,
            sampling_interval_s: 2.0,
            measure_at_s: 120.0,
            steady_window_s: 30.0,
            duration_s: 150.0,
            light: (groups > 0).then(|| LightSummary {
                runtime: Some("node".into()),
                peers: groups * 2,
                per_page: 2,
                shaping: "none (loopback)".into(),
                fidelity: None,
            }),
            ..Default::default()
        };
        let mut viewer_events = Vec::new();
        let mut viewer_samples = Vec::new();
        for v in 0..2u32 {
            viewer_events.push(ViewerEvent {
                t: 0.0,
                viewer: v,
                event: ViewerEventKind::Playing,
                p2p: v == 0,
                reason: None,
                node: None,
                address: None,
                ttff_ms: Some(1000.0),
                due_s: None,
            });
        }
        let mut light_samples = Vec::new();
        let mut lag: BTreeMap<u32, PageLag> = BTreeMap::new();
        for i in 1..=75u64 {
            let t = i as f64 * 2.0;
            for v in 0..2u32 {
                let (h, p, u) = if v == 0 {
                    (50_000, 100_000, 80_000)
                } else {
                    (150_000, 0, 0)
                };
                viewer_samples.push(ViewerSample {
                    t,
                    viewer: v,
                    http_down_bytes: h * 2 * i,
                    p2p_down_bytes: p * 2 * i,
                    p2p_up_bytes: u * 2 * i,
                    playing: true,
                    ..Default::default()
                });
            }
            for g in 0..groups {
                let late = if starved.contains(&g) && t > 60.0 {
                    150.0
                } else {
                    1.0
                };
                let meter = lag.entry(g).or_default();
                meter.ticks += 8;
                meter.late_ms += 8.0 * late;
                // A starved page also has one tick in eight over 100 ms late.
                if late > 1.0 {
                    meter.late_ticks += 1;
                }
                meter.max_ms = 3.0 * late;
                let meter = *meter;
                for k in 0..2u32 {
                    let peer = g * 2 + k;
                    light_samples.push(LightSample {
                        t,
                        peer,
                        group: g,
                        http_down_bytes: 20_000 * 2 * i,
                        p2p_down_bytes: 60_000 * 2 * i,
                        p2p_up_bytes: 10_000 * u64::from(peer + 1) * 2 * i,
                        playing: t > 4.0,
                        segments_late: if peer == 1 && t > 100.0 { 2 } else { 0 },
                        errors: if peer == 0 && t > 140.0 { 1 } else { 0 },
                        last_error: (peer == 0 && t > 140.0).then(|| "tracker closed".into()),
                        lag: Some(meter),
                        ..Default::default()
                    });
                }
            }
        }
        RunData {
            dir: "/nowhere/run".into(),
            manifest,
            run_events: vec![],
            viewer_events,
            viewer_samples,
            exporter_samples: vec![],
            host_samples: vec![],
            node_samples: vec![],
            light_samples,
            truncated_files: vec![],
        }
    }

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9)
    }

    #[test]
    fn light_peers_are_in_the_swarms_table_but_not_in_the_viewers_qoe() {
        let report = analysis::build(&crafted(2, &[]));
        let s = &report.summary;
        // Players' table, steady window 90–120 s: viewers 200 kB/s HTTP + 100 kB/s P2P,
        // four light peers 4 × 20 kB/s HTTP + 4 × 60 kB/s P2P.
        let p = s.players.as_ref().unwrap();
        assert!(close(p.http_at_mbps, (200_000.0 + 80_000.0) * 8.0 / 1e6));
        assert!(close(p.p2p_at_mbps, (100_000.0 + 240_000.0) * 8.0 / 1e6));
        assert!(close(p.http_share, 280.0 / 620.0));
        // Totals over 150 s (every member's counters start at zero 2 s before its first read).
        assert_eq!(p.http_bytes, 200_000 * 150 + 80_000 * 150);
        assert_eq!(p.p2p_uploaded_bytes, (80_000 + 100_000) * 150);
        // QoE and per-viewer rows: the two viewers only.
        assert_eq!(report.viewers.len(), 2);
        assert_eq!(report.viewers[0].http_bytes, 50_000 * 150);
        assert_eq!(report.viewers[0].p2p_up_bytes, 80_000 * 150);
        assert_eq!((s.viewers.requested, s.viewers.started), (2, 2));
        assert_eq!(s.qoe.ttff_count, 2);
        let l = s.light.as_ref().unwrap();
        assert_eq!((l.planned, l.per_page), (Some(4), Some(2)));
        assert_eq!(l.shaping.as_deref(), Some("none (loopback)"));
        assert_eq!((l.reported, l.started, l.groups), (4, 4, 2));
        assert_eq!(
            l.all,
            LightFigures {
                peers: 4,
                http_bytes: 80_000 * 150,
                p2p_bytes: 240_000 * 150,
                p2p_uploaded_bytes: 100_000 * 150,
                p2p_share: Some(0.75),
            }
        );
        assert_eq!((l.segments_late, l.peers_with_late_segments), (2, 1));
        assert_eq!((l.errors, l.peers_with_errors), (1, 1));
        assert_eq!(
            l.last_errors,
            [LightError {
                message: "tracker closed".into(),
                peers: 1
            }]
        );
        assert_eq!(l.groups_judged, 2);
        assert!(l.starved_groups.is_empty() && l.without_starved.is_none());
    }

    #[test]
    fn upload_per_peer_is_a_distribution_beside_the_viewers() {
        let l = analysis::build(&crafted(2, &[])).summary.light.unwrap();
        // Peers 0–3 upload 10, 20, 30, 40 kB/s over 150 s; p10 and p90 interpolate.
        let up = l.upload.unwrap();
        assert_eq!(up.members, 4);
        assert_eq!(
            (
                up.min_bytes,
                up.p10_bytes,
                up.p50_bytes,
                up.p90_bytes,
                up.max_bytes
            ),
            (1_500_000, 1_950_000, 3_750_000, 5_550_000, 6_000_000)
        );
        // The viewer with P2P off is left out: one viewer, 80 kB/s.
        let v = l.viewer_upload.unwrap();
        assert_eq!(
            (v.members, v.min_bytes, v.max_bytes),
            (1, 12_000_000, 12_000_000)
        );
        let table = upload_table(&l).markdown();
        assert!(
            table.contains("| light peers | 4 | 1.5 MB | 1.9 MB | 3.8 MB | 5.5 MB | 6.0 MB |"),
            "{table}"
        );
    }

    #[test]
    fn a_starved_group_is_named_apart_with_its_figures() {
        let report = analysis::build(&crafted(3, &[1]));
        let l = report.summary.light.as_ref().unwrap();
        assert_eq!(l.groups_judged, 3);
        assert_eq!(l.starved_groups.len(), 1);
        let g = &l.starved_groups[0];
        assert_eq!(g.group, 1);
        // The reads inside the steady window 90–120 s: 15 intervals of 8 ticks, 150 ms late.
        assert!(g.steady_window && (g.from_s, g.to_s) == (90.0, 120.0));
        assert!(g.page.starved && (g.page.ticks - 120.0).abs() < 1e-9);
        assert!((g.page.mean_late_ms - 150.0).abs() < 1e-9);
        assert_eq!(g.page.max_ms, 450.0);
        // Its peers 2 and 3: 30 and 40 kB/s up.
        assert_eq!(g.figures.peers, 2);
        assert_eq!(g.figures.p2p_uploaded_bytes, 70_000 * 150);
        let kept = l.without_starved.as_ref().unwrap();
        assert_eq!(kept.peers, 4);
        assert_eq!(
            kept.p2p_uploaded_bytes,
            (10_000 + 20_000 + 50_000 + 60_000) * 150
        );
        let text = lines(l).join("\n");
        assert!(
            text.contains(
                "1 of the 3 pages judged by the light pages' rule (its timer more than 70 ms late \
                 on average, or one tick more than 2 s late: past the P2P engine's own 2 s \
                 timeout) was starved of CPU: their 2 light peers share"
            ),
            "{text}"
        );
        assert!(text.contains("their figures are not a finding"), "{text}");
        let mut md = String::new();
        markdown_section(&mut md, l);
        assert!(md.contains("Starved pages (their peers' figures are not a finding):"));
        assert!(
            md.contains("| 1 | 90–120 s (steady window) | 150.0 ms | 12.5% | 450 ms | 2 |"),
            "{md}"
        );
    }

    #[test]
    fn a_group_without_reads_in_the_steady_window_is_judged_over_the_run() {
        // The page was read from 50 to 80 s only: nothing in the steady window 90–120 s.
        let mut run = crafted(1, &[0]);
        run.light_samples.retain(|s| (50.0..=80.0).contains(&s.t));
        let l = analysis::build(&run).summary.light.unwrap();
        let g = &l.starved_groups[0];
        assert!(!g.steady_window);
        assert_eq!((g.from_s, g.to_s), (50.0, 80.0));
        // 5 intervals at 1 ms (up to 60 s) and 10 at 150 ms with one tick in eight over 100 ms
        // late: 100.3 ms on average, above the light pages' rule's 70 ms.
        assert!((g.page.mean_late_ms - 1505.0 / 15.0).abs() < 1e-9);
        assert!((g.page.late_ticks_share - 10.0 / 120.0).abs() < 1e-9);
        assert!((g.page.ticks - 120.0).abs() < 1e-9);
    }

    #[test]
    fn the_origins_bytes_for_light_peers_are_explained_by_their_own_count() {
        use crate::model::rawdata::{ExporterSample, HttpOutcomes};
        use crate::traffic::ORIGIN_SEGMENTS;
        // The origin served the viewers' 200 kB/s and the light peers' 80 kB/s; the
        // viewers' pages read all of theirs to the end.
        let mut run = crafted(2, &[]);
        for s in &mut run.viewer_samples {
            s.http = Some(HttpOutcomes {
                completed_bytes: s.http_down_bytes,
                responses: (s.t / 2.0) as u32,
                ..Default::default()
            });
        }
        run.exporter_samples = (0..=75)
            .map(|i| ExporterSample {
                t: i as f64 * 2.0,
                ok: true,
                sums: [(ORIGIN_SEGMENTS.to_string(), 280_000.0 * 2.0 * i as f64)]
                    .into_iter()
                    .collect(),
                ..Default::default()
            })
            .collect();
        let s = analysis::build(&run).summary;
        let r = s.http_reconciliation.as_ref().unwrap();
        assert_eq!(r.origin_segment_bytes, 42_000_000);
        assert_eq!(r.completed_bytes, 30_000_000);
        assert_eq!(r.light_bytes, Some(12_000_000));
        assert_eq!(r.rest_bytes, 0);
        assert!(
            !s.honesty
                .warnings
                .iter()
                .any(|w| w.contains("not explained")),
            "{:?}",
            s.honesty.warnings
        );
        let p = s.p2p_reconciliation.as_ref().unwrap();
        assert_eq!(p.light_downloaded_bytes, Some(36_000_000));
        assert_eq!(p.downloaded_bytes, 15_000_000 + 36_000_000);
    }

    #[test]
    fn the_section_says_which_fidelity_verdict_the_run_relied_on() {
        use crate::model::scenario::light::{FidelityRecord, FidelityVerdict};
        // Without one: what would measure it, at this run's size (2 viewers + 4 peers).
        let l = analysis::build(&crafted(2, &[])).summary.light.unwrap();
        assert!(l.fidelity.is_none());
        assert_eq!(
            fidelity_line(&l),
            "No fidelity verdict: these light peers were not checked against an all-real swarm \
             of this size (`viewerfleet fidelity SCENARIO --swarm 6 --real 2 --out DIR` measures \
             one; name its fidelity.json in `swarm.fidelity`)."
        );
        // A scenario with a verdict per mode but none for this run's: the mode is named.
        let under_tc = LightReport {
            throttling: Some("tc".into()),
            ..l.clone()
        };
        assert!(
            fidelity_line(&under_tc).starts_with("No fidelity verdict under tc: ")
                && fidelity_line(&under_tc).contains("`swarm.fidelity.tc`"),
            "{}",
            fidelity_line(&under_tc)
        );
        let json = serde_json::to_value(&l).unwrap();
        assert!(json.get("fidelity").is_none());
        // With one, from the manifest.
        let mut run = crafted(2, &[]);
        let record = FidelityRecord {
            verdict: FidelityVerdict::Pass,
            created: "2026-12-04T10:00:00Z".into(),
            swarm: 6,
            real: 2,
            all_real_p2p_savings_pct: Some(68.1),
            with_light_p2p_savings_pct: Some(66.0),
            file: "fid/fidelity.json".into(),
            fleet: None,
            throttling: None,
        };
        run.manifest.plan.light.as_mut().unwrap().fidelity = Some(record.clone());
        let l = analysis::build(&run).summary.light.unwrap();
        assert_eq!(l.fidelity.as_ref(), Some(&record));
        assert_eq!(
            fidelity_line(&l),
            "Fidelity: pass (6 real vs 2 real + 4 light, P2P savings at T 68.1% vs 66.0%, \
             measured 2026-12-04, fid/fidelity.json)."
        );
        let mut md = String::new();
        markdown_section(&mut md, &l);
        assert!(
            md.contains("- Fidelity: pass (6 real vs 2 real + 4 light,"),
            "{md}"
        );
        let mut html = String::new();
        html_section(&mut html, &l);
        assert!(
            html.contains("<li>Fidelity: pass (6 real vs 2 real + 4 light,"),
            "{html}"
        );
        // A verdict measured on another fleet or under another throttling says so.
        let mut run = crafted(2, &[]);
        run.manifest.fleet.kind = FleetKind::Local;
        run.manifest.fleet.throttling = Some(Throttling::Tc);
        run.manifest.plan.light.as_mut().unwrap().fidelity = Some(FidelityRecord {
            fleet: Some("netns".into()),
            throttling: Some("http-only".into()),
            ..record.clone()
        });
        assert_eq!(
            fidelity_line(&analysis::build(&run).summary.light.unwrap()),
            "Fidelity: pass (6 real vs 2 real + 4 light, P2P savings at T 68.1% vs 66.0%, \
             measured 2026-12-04, on the netns fleet under http-only, fid/fidelity.json). \
             It was measured on another fleet netns (this run: local) and throttling http-only \
             (this run: tc): it vouches for those conditions only."
        );
        // A verdict over several modes is not set against the run's one mode.
        run.manifest.plan.light.as_mut().unwrap().fidelity = Some(FidelityRecord {
            fleet: Some("local".into()),
            throttling: Some("http-only, tc".into()),
            ..record.clone()
        });
        let mixed = fidelity_line(&analysis::build(&run).summary.light.unwrap());
        assert!(!mixed.contains("another"), "{mixed}");
        run.manifest.plan.light.as_mut().unwrap().fidelity = Some(FidelityRecord {
            fleet: Some("netns".into()),
            throttling: Some("http-only".into()),
            ..record.clone()
        });
        run.manifest.fleet.kind = FleetKind::Netns;
        run.manifest.fleet.throttling = Some(Throttling::HttpOnly);
        let same = fidelity_line(&analysis::build(&run).summary.light.unwrap());
        assert!(
            same.ends_with("under http-only, fid/fidelity.json)."),
            "the same conditions add no caveat: {same}"
        );
        // A verdict for another shape says so.
        let mut run = crafted(2, &[]);
        run.manifest.plan.light.as_mut().unwrap().fidelity = Some(FidelityRecord {
            verdict: FidelityVerdict::Fail,
            swarm: 8,
            ..record
        });
        let line = fidelity_line(&analysis::build(&run).summary.light.unwrap());
        assert!(
            line.starts_with("Fidelity: FAIL (8 real vs 2 real + 6 light,")
                && line.ends_with(
                    "It was measured for another shape than this run's 2 real viewers + 4 light \
                     peers: it vouches for that shape only."
                ),
            "{line}"
        );
    }

    #[test]
    fn the_section_says_where_members_stood_behind_the_live_edge() {
        let mut run = crafted(1, &[]);
        assert!(
            analysis::build(&run)
                .summary
                .light
                .unwrap()
                .live_latency
                .is_none(),
            "VOD-like reads say nothing"
        );
        for s in &mut run.viewer_samples {
            s.live_latency_s = Some(if s.viewer == 0 { 16.0 } else { 18.0 });
        }
        // Light peers start close to the edge, then peer 0 holds its playhead 4 s to
        // stand where the viewers do; outside the steady window (90–120 s) they stood at 12 s.
        for s in &mut run.light_samples {
            s.live_latency_s = Some(if s.t < 60.0 { 12.0 } else { 17.0 });
            if s.peer == 0 && s.t >= 10.0 {
                s.held_ms = Some(s.t.min(50.0) * 100.0);
            }
        }
        let report = analysis::build(&run);
        let l = report.summary.light.as_ref().unwrap();
        let latency = l.live_latency.unwrap();
        assert!(close(latency.viewers_median_s, 17.0));
        assert!(
            close(latency.light_median_s, 17.0),
            "the steady window's reads only"
        );
        assert_eq!(latency.light_held, 1);
        assert!(
            close(latency.light_held_median_s, 5.0),
            "a peer's largest (cumulative) read"
        );
        let text = lines(l).join("\n");
        assert!(
            text.contains("real viewers 17.0 s, light peers 17.0 s; 1 light peer held its playhead (median 5.0 s)"),
            "{text}"
        );
    }

    #[test]
    fn no_light_section_without_light_peers() {
        let run = crafted(0, &[]);
        assert!(run.light_samples.is_empty() && run.manifest.plan.light.is_none());
        let report = analysis::build(&run);
        assert!(report.summary.light.is_none());
        let json = serde_json::to_value(&report.summary).unwrap();
        assert!(json.get("light").is_none());
        // The swarm is the viewers alone.
        assert_eq!(
            report.summary.players.as_ref().unwrap().http_bytes,
            200_000 * 150
        );
    }

    #[test]
    fn a_planned_run_whose_peers_never_reported_still_has_the_section() {
        let mut run = crafted(2, &[]);
        run.light_samples.clear();
        let l = analysis::build(&run).summary.light.unwrap();
        assert_eq!((l.planned, l.reported, l.groups_judged), (Some(4), 0, 0));
        assert!(l.upload.is_none() && l.all.p2p_share.is_none());
        assert!(upload_table(&l)
            .markdown()
            .contains("| light peers | 0 | — |"));
    }
}
