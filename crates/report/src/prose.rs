//! The report's sentences, shared by the Markdown and HTML renderers so both say the same:
//! how each number was measured, QoE, and the honesty section.

use super::format::{bytes, ms, num, pct};
use super::headroom::HOST_NAME;
use super::summary::{Arrival, Headroom, HeadroomVerdict, MachineHeadroom, ReportSummary, Span};

/// Header facts: what ran, on what.
pub(crate) fn run_lines(s: &ReportSummary) -> Vec<String> {
    let m = &s.measured_on;
    let mut out = vec![
        format!("Started at {}.", s.started_at),
        format!(
            "Target: {} {}{}; fleet: {}.",
            s.target.kind,
            s.target.video,
            s.target
                .latency
                .as_ref()
                .map(|l| format!(" ({l} latency)"))
                .unwrap_or_default(),
            s.target.fleet
        ),
        format!(
            "Viewers: {} requested, {} started, {} failed{}, {} lost, {} with P2P off.",
            s.viewers.requested,
            s.viewers.started,
            s.viewers.failed,
            never_started(s),
            s.viewers.lost,
            s.viewers.p2p_off
        ),
    ];
    if let Some(l) = &s.light {
        out.push(format!(
            "Swarm: {} viewers + {} started ({} viewers + {} planned); the players' figures \
             count both, QoE the viewers only.",
            s.viewers.started,
            super::light::peers_phrase(l.started),
            s.viewers.requested,
            super::light::peers_phrase(l.planned.unwrap_or(l.reported)),
        ));
    }
    out.push(format!(
        "Measured on {} ({} CPUs, {}, {} RAM, {}, kernel {}) with viewerfleet {}{}.",
        m.host.hostname,
        m.host.cpus,
        m.host.cpu_model,
        bytes(Some(m.host.mem_total_bytes)),
        m.host.os,
        m.host.kernel,
        m.tool_version,
        m.git_commit
            .as_ref()
            .map(|c| format!(" ({c})"))
            .unwrap_or_default()
    ));
    if !m.versions.is_empty() {
        out.push(format!(
            "Versions: {}.",
            m.versions
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    out
}

/// " (N never started)" when requested viewers never played.
pub(crate) fn never_started(s: &ReportSummary) -> String {
    match s.viewers.not_started {
        0 => String::new(),
        n => format!(" ({n} never started)"),
    }
}

/// The arrivals asked for against the sessions and first frames obtained.
pub(crate) fn arrival_lines(a: &Arrival) -> Vec<String> {
    let rate = |r: Option<f64>| r.map_or_else(|| "n/a".into(), |r| format!("{r:.0}/min"));
    let mut out = vec![
        a.headline.clone(),
        format!(
            "Asked for: {} viewers from {:.0} s to {:.0} s ({}); sessions asked of the fleet: {}; \
             sessions created: {} ({}); first frames: {}.",
            a.asked,
            a.asked_from_s,
            a.asked_to_s,
            rate(a.asked_per_min),
            a.requested_from_fleet,
            a.sessions,
            rate(a.sessions_per_min),
            a.first_frames
        ),
    ];
    if let Some(d) = &a.session_delay {
        out.push(format!(
            "From a viewer's arrival time to its session: median {:.1} s, p95 {:.1} s, max {:.1} s.",
            d.median_s, d.p95_s, d.max_s
        ));
    }
    out.push(format!(
        "Behind the ramp: the k-th session later than {:.0} s after the k-th arrival time asked \
         for (the horizontal distance between the curves).",
        a.lag_tolerance_s
    ));
    out
}

/// How the table's numbers were computed.
pub(crate) fn method_lines(s: &ReportSummary) -> Vec<String> {
    let w = &s.windows;
    let mut out = vec![
        "Sources: exporter = the platform's Prometheus counters, fed by the players' \
         playback-metrics POSTs (what PeerTube's own dashboards and the 2023 post show); \
         players = each viewer's own stats read from its page, summed; origin (truth) = \
         media segment bytes the reference site's server really sent."
            .to_string(),
    ];
    if s.light.is_some() {
        out.push(
            "Light peers are in the swarm: the players' figures add each light peer's own \
             counters to the viewers' (the same counter rules, each starting at zero one \
             sampling interval before its first read), the origin served their HTTP and the \
             exporter counts their playback reports. QoE and the per-viewer figures are the \
             viewers' alone."
                .to_string(),
        );
    }
    out.extend([
        format!(
            "T (the measurement point) = {:.0} s after the run started ({}; the scenario's \
             measure_at is {:.0} s after the target was ready). \"At T\" values are means over \
             the steady window {:.0}–{:.0} s; the exporter's window is {:.0}–{:.0} s (never \
             shorter than one playback-metrics interval, {:.0} s). Times in plots and CSV \
             files count from the run's start.",
            w.measure_point_s,
            w.measure_point_source,
            w.measure_at_s,
            w.steady_from_s,
            w.steady_to_s,
            w.exporter_steady_from_s,
            w.steady_to_s,
            w.playback_metrics_interval_s
        ),
        format!("Peak = the highest {}.", w.rate_window_rule),
        "Counter deltas between consecutive samples are spread evenly over the time between \
         them into 1 s bins; a counter that goes down is a reset and counts as its new value \
         (as Prometheus rate() does); failed scrapes are skipped, so their bytes are spread \
         over the gap (listed below). Players' rates are the sum of each viewer's own deltas, \
         so a viewer that disappears adds nothing and never a negative rate."
            .to_string(),
        "HTTP share = HTTP / (HTTP + P2P); P2P savings = P2P / (HTTP + P2P) = 1 − HTTP share; \
         HTTP/P2P is the PeerTube post's \"ratio HTTP/P2P\" column (its live 25% is 90/350 Mbit/s)."
            .to_string(),
        format!(
            "Top-level numbers in report.json come from the {} source.",
            s.source
        ),
    ]);
    if let Some(note) = &w.steady_note {
        out.push(format!("Note: {note}."));
    }
    out
}

/// Ground truth (refsite only).
pub(crate) fn origin_lines(s: &ReportSummary) -> Vec<String> {
    let Some(o) = &s.origin else {
        return Vec::new();
    };
    let mut out = vec![format!(
        "Ground truth: the origin sent {} of media segments{}.",
        bytes(Some(o.segment_bytes)),
        o.sent_bytes
            .map(|b| format!(" ({} in all, with playlists and pages)", bytes(Some(b))))
            .unwrap_or_default()
    )];
    if let Some(d) = s.origin_deviation_pct {
        out.push(format!(
            "The players' own HTTP figure deviates from it by {d:+.1}%."
        ));
    }
    if let Some(d) = s.exporter_origin_deviation_pct {
        out.push(format!(
            "The exporter's HTTP figure deviates from it by {d:+.1}% (it lags by up to one \
             playback-metrics interval)."
        ));
    }
    out
}

/// Where the origin's bytes went, and P2P sent vs delivered (see `reconcile`).
pub(crate) fn reconciliation_lines(s: &ReportSummary) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(r) = &s.http_reconciliation {
        out.extend(super::reconcile::http_lines(r));
    }
    if let Some(r) = &s.p2p_reconciliation {
        out.extend(super::reconcile::p2p_lines(r));
    }
    out
}

pub(crate) fn qoe_lines(s: &ReportSummary) -> Vec<String> {
    let q = &s.qoe;
    vec![
        format!(
            "Time to first frame: median {}, p95 {} ({} viewers; percentiles interpolated).",
            ms(q.ttff_median_ms),
            ms(q.ttff_p95_ms),
            q.ttff_count
        ),
        format!(
            "Stalls: {} in {:.1} viewer-minutes after first frame = {} per viewer-minute.",
            q.stalls,
            q.viewer_minutes,
            num(q.stalls_per_viewer_minute, 3)
        ),
        format!("Stalled time share: {}.", pct(q.stalled_time_share)),
        format!(
            "Failed or lost viewers: {}.",
            if q.failed.is_empty() && s.viewers.failed + s.viewers.lost == 0 {
                "none".to_string()
            } else {
                q.failure_reasons
                    .iter()
                    .map(|(r, n)| format!("{n} × {r}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            }
        ),
    ]
}

pub(crate) fn honesty_lines(s: &ReportSummary) -> Vec<String> {
    let h = &s.honesty;
    let mut out = vec![format!(
        "Fleet `{}` (shaping: {}).",
        h.fleet_kind,
        if h.shaping.is_empty() {
            "none"
        } else {
            &h.shaping
        }
    )];
    out.extend(h.implications.iter().cloned());
    match &h.cpu {
        Some(c) => {
            let extra = [
                c.mean_steal
                    .map(|v| format!("mean steal {:.1}%", v * 100.0)),
                c.mean_pressure
                    .map(|v| format!("CPU pressure {:.0}% (shown, not judged)", v * 100.0)),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>();
            out.push(format!(
                "{}: {} — mean {:.0}% busy, max {:.0}%, above the threshold {:.0}% of the \
                 time{} ({} samples{}). Rule: {}.{}",
                if c.viewers_machine {
                    "Host CPU"
                } else {
                    "Controller's machine CPU (the browsers ran elsewhere, so this does not \
                     judge the viewers: see Headroom)"
                },
                if c.saturated {
                    "SATURATED"
                } else {
                    "not saturated"
                },
                c.mean_busy * 100.0,
                c.max_busy * 100.0,
                c.saturated_share * 100.0,
                c.steady_saturated_share
                    .map(|v| format!(" and {:.0}% of the steady window", v * 100.0))
                    .unwrap_or_default(),
                c.samples,
                if extra.is_empty() {
                    String::new()
                } else {
                    format!("; {}", extra.join(", "))
                },
                c.rule,
                if c.saturated && c.viewers_machine {
                    " A saturated load generator slows players and can fake a degradation: \
                     treat QoE and rates with caution, or re-run with fewer viewers per core."
                } else {
                    ""
                }
            ))
        }
        None => out.push("Host CPU: no host samples recorded, saturation unknown.".into()),
    }
    out.push(format!("Exporter: {}.", h.exporter_status));
    if h.scrape_gaps.is_empty() {
        out.push("Scrape gaps: none.".into());
    } else {
        for g in &h.scrape_gaps {
            out.push(format!(
                "Scrape gap {:.0}–{:.0} s ({} failed scrapes{}).",
                g.from_s,
                g.to_s,
                g.failed_reads,
                g.error
                    .as_ref()
                    .map(|e| format!(", first error: {e}"))
                    .unwrap_or_default()
            ));
        }
    }
    out.extend(h.warnings.iter().cloned());
    out
}

/// One sentence on the scenario's thresholds: how many passed, which failed.
pub(crate) fn thresholds_line(s: &ReportSummary) -> String {
    let failed: Vec<String> = s
        .thresholds
        .iter()
        .filter(|t| !t.pass)
        .map(|t| format!("{} {} (got {})", t.metric, t.condition, t.observed))
        .collect();
    if failed.is_empty() {
        format!(
            "All {} of the scenario's thresholds passed.",
            s.thresholds.len()
        )
    } else {
        format!(
            "{} of the scenario's {} thresholds failed: {}. `viewerfleet run` exits 99; a \
             threshold without a value fails (the report has no such figure).",
            failed.len(),
            s.thresholds.len(),
            failed.join("; ")
        )
    }
}

/// The banner at the top of a run whose P2P figure is not a finding (plain text; the
/// renderers make it prominent).
pub(crate) fn not_a_finding_banner(s: &ReportSummary) -> Option<String> {
    let h = s.headroom.as_ref()?;
    (h.verdict == HeadroomVerdict::NotAFinding).then(|| {
        format!(
            "the viewers had no CPU headroom in the steady window ({:.0}–{:.0} s). {} A starved \
             page misses the P2P engine's timeouts and falls back to HTTP, so this run's P2P \
             figures are biased towards HTTP. {} See \"Headroom\" for which viewers and when.",
            h.steady_from_s,
            h.steady_to_s,
            h.not_a_finding_because.join(" "),
            with_headroom_sentence(h)
        )
    })
}

/// The figures with headroom against all, as a sentence.
fn with_headroom_sentence(h: &Headroom) -> String {
    let f = &h.figures;
    match (&f.all, &f.with_headroom) {
        (None, _) => "There are no players' figures to split.".to_string(),
        (Some(_), None) => "No viewer had headroom: there is no figure without starved \
                            viewers; re-run with fewer viewers per core or node."
            .to_string(),
        (Some(all), Some(kept)) => format!(
            "With headroom only ({} viewers): P2P savings {}, HTTP share {}; all {} viewers: \
             P2P savings {}, HTTP share {} (players' stats).",
            kept.viewers,
            pct(kept.p2p_savings),
            pct(kept.http_share),
            all.viewers,
            pct(all.p2p_savings),
            pct(all.http_share)
        ),
    }
}

/// Spans as `98–120 s, 130–140 s (+3 more)`.
pub(crate) fn spans(list: &[Span], total: u32) -> String {
    if list.is_empty() {
        return "—".to_string();
    }
    let mut out = list
        .iter()
        .map(|s| format!("{:.0}–{:.0} s", s.from_s, s.to_s))
        .collect::<Vec<_>>()
        .join(", ");
    let more = (total as usize).saturating_sub(list.len());
    if more > 0 {
        out.push_str(&format!(" (+{more} more)"));
    }
    out
}

/// One machine in words.
fn machine_line(m: &MachineHeadroom) -> String {
    let mut parts = vec![format!(
        "mean {:.0}% busy, max {:.0}%",
        m.mean_busy * 100.0,
        m.max_busy * 100.0
    )];
    if let Some(v) = m.mean_steal {
        parts.push(format!("steal {:.1}%", v * 100.0));
    }
    if let Some(v) = m.mean_throttled {
        parts.push(format!("throttled {:.0}% of periods", v * 100.0));
    }
    if let Some(v) = m.mean_pressure {
        parts.push(format!(
            "CPU pressure {:.0}% (shown, not judged)",
            v * 100.0
        ));
    }
    format!(
        "{}; hot {:.0}% of the sampled time{}, {} samples: {}{}",
        parts.join(", "),
        m.hot_share * 100.0,
        m.steady_hot_share
            .map(|v| format!(" and {:.0}% of the steady window", v * 100.0))
            .unwrap_or_else(|| ", no sample in the steady window".to_string()),
        m.samples,
        if m.saturated_in_steady {
            "SATURATED in the steady window"
        } else if m.saturated {
            "saturated, but not in the steady window"
        } else {
            "not saturated"
        },
        if m.hot_spans.is_empty() {
            String::new()
        } else {
            format!("; hot {}", spans(&m.hot_spans, m.hot_spans_total))
        }
    )
}

/// The headroom section's sentences (the tables are in `render`).
pub(crate) fn headroom_lines(h: &Headroom) -> Vec<String> {
    let v = &h.viewers;
    let mut out = vec![format!("{}.", h.headline)];
    out.extend(h.not_a_finding_because.iter().cloned());
    out.push(format!(
        "{} viewers watched in the steady window ({:.0}–{:.0} s) of {} started: {} with \
         headroom, {} without{}, {} unknown (neither page nor machine measured; kept in the \
         figures with headroom).",
        v.in_steady,
        h.steady_from_s,
        h.steady_to_s,
        v.started,
        v.with_headroom,
        v.starved,
        if v.starved > 0 {
            format!(" ({})", super::headroom::reasons_count(v))
        } else {
            String::new()
        },
        v.unknown
    ));
    if let Some(host) = &h.host {
        out.push(if h.host_judges_viewers {
            format!(
                "This machine (the browsers ran on it, so it judges every viewer): {}.",
                machine_line(host)
            )
        } else {
            format!(
                "This machine is the controller's: the browsers ran elsewhere, so its CPU does \
                 not judge the viewers ({}).",
                machine_line(host)
            )
        });
    } else if h.host_judges_viewers {
        out.push("This machine: no host samples recorded; its load is unknown.".to_string());
    }
    if !h.unsampled_nodes.is_empty() {
        out.push(format!(
            "Nodes without samples (load unknown; their viewers are judged by their pages \
             alone and kept in the figures): {}.",
            h.unsampled_nodes
                .iter()
                .map(|n| format!("{} ({} viewers)", n.node, n.viewers))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    out.push(with_headroom_sentence(h));
    out.push(h.figures.exporter_note.clone());
    out.extend(h.warnings.iter().cloned());
    out
}

/// A machine's name for tables.
pub(crate) fn machine_name(m: &MachineHeadroom, host_judges: bool) -> String {
    if m.name == HOST_NAME && !host_judges {
        "this machine (controller)".to_string()
    } else {
        m.name.clone()
    }
}
