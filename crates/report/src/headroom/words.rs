//! The section's English: the rules as stated in the report, the verdict and its causes,
//! the headline, and warnings about stolen CPU.

use super::*;

/// A share as a whole percentage ("73%"), for sentences.
pub(super) fn whole_pct(share: Option<f64>) -> String {
    share.map_or_else(|| "—".to_string(), |v| format!("{:.0}%", v * 100.0))
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

/// Finding, not a finding (and why), or unknown.
pub(super) fn verdict(h: &Headroom) -> (HeadroomVerdict, Vec<String>) {
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
pub(super) fn machine_label(name: &str) -> String {
    if name == HOST_NAME {
        "This machine (where the browsers ran)".to_string()
    } else {
        format!("Node {name}")
    }
}

/// Starved viewers by reason, in words: "5 by their page's lag, 5 by a saturated node".
pub(crate) fn reasons_count(v: &HeadroomViewers) -> String {
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
pub(super) fn causes(h: &Headroom) -> String {
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
pub(super) fn savings_comparison(h: &Headroom) -> String {
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
pub(super) fn steal_warnings(
    host: Option<&MachineHeadroom>,
    nodes: &[MachineHeadroom],
) -> Vec<String> {
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
