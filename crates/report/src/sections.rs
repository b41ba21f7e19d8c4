//! The report's tables, shared by the Markdown, HTML and terminal renderings: failures,
//! arrival, the seed table, flags, thresholds, headroom, and the few lines for the
//! terminal.

use super::format::{bytes, mbps, ms, pct, ratio, NONE};
use super::summary::{
    Arrival, Headroom, MachineHeadroom, ReportSummary, RunReport, SourceTable, ViewerHeadroomStatus,
};
use super::text_table::Table;

/// Failed and lost viewers shown in a report; the rest are in `viewers.csv`.
pub(crate) const FAILURES_SHOWN: usize = 100;

/// The first `FAILURES_SHOWN` failed or lost viewers: who, when, what, why.
pub(crate) fn failures_table(s: &ReportSummary) -> Table {
    let mut t = Table::new(&["Viewer", "When (s)", "What", "Reason"]).with_left(4);
    for f in s.qoe.failed.iter().take(FAILURES_SHOWN) {
        t.row(vec![
            f.viewer.to_string(),
            f.t.map_or_else(|| "–".into(), |t| format!("{t:.0}")),
            f.kind.to_string(),
            f.reason.clone(),
        ]);
    }
    t
}

/// Arrivals asked for, sessions created and first frames, minute by minute.
pub(crate) fn arrival_table(a: &Arrival) -> Table {
    let mut t = Table::new(&["Minute", "Asked for", "Sessions created", "First frames"]);
    for m in &a.per_minute {
        t.row(vec![
            format!("{:.0}–{:.0} s", m.from_s, m.from_s + 60.0),
            m.asked.to_string(),
            m.sessions.to_string(),
            m.first_frames.to_string(),
        ]);
    }
    t
}

/// The PeerTube post's table for one run: one row per source.
pub(crate) fn seed_table(s: &ReportSummary) -> Table {
    let mut t = Table::new(&[
        "Source",
        "HTTP peak Mbit/s",
        "HTTP at T Mbit/s",
        "P2P at T Mbit/s",
        "HTTP share",
        "P2P savings",
        "HTTP/P2P",
        "P2P up at T Mbit/s",
        "HTTP total",
        "P2P total",
        "P2P up total",
    ]);
    let mut add = |name: &str, table: &SourceTable| {
        t.row(vec![
            name.into(),
            mbps(table.http_peak_mbps),
            mbps(table.http_at_mbps),
            mbps(table.p2p_at_mbps),
            pct(table.http_share),
            pct(table.p2p_savings),
            ratio(table.http_to_p2p_ratio),
            mbps(table.p2p_up_at_mbps),
            bytes(Some(table.http_bytes)),
            bytes(Some(table.p2p_bytes)),
            bytes(Some(table.p2p_uploaded_bytes)),
        ])
    };
    if let Some(e) = &s.exporter {
        add("exporter", e);
    }
    if let Some(p) = &s.players {
        add("players", p);
    }
    if let Some(o) = &s.origin {
        t.row(vec![
            "origin (truth)".into(),
            mbps(o.peak_mbps),
            mbps(o.at_mbps),
            NONE.into(),
            NONE.into(),
            NONE.into(),
            NONE.into(),
            NONE.into(),
            bytes(Some(o.segment_bytes)),
            NONE.into(),
            NONE.into(),
        ]);
    }
    t
}

/// Short flags for a run: partial, CPU saturated, scrape gaps.
pub fn flags(s: &ReportSummary) -> String {
    let mut f = Vec::new();
    if s.partial {
        f.push("PARTIAL".to_string());
    }
    match s.honesty.cpu.as_ref().filter(|c| c.saturated) {
        Some(c) if c.viewers_machine => f.push("CPU-SATURATED".to_string()),
        Some(_) => f.push("controller CPU-SATURATED".to_string()),
        None => {}
    }
    if !s.honesty.scrape_gaps.is_empty() {
        f.push(format!("{} scrape gaps", s.honesty.scrape_gaps.len()));
    }
    if s.windows.steady_clipped {
        f.push("T not reached".to_string());
    }
    let failed = s.thresholds.iter().filter(|t| !t.pass).count();
    if failed > 0 {
        f.push(format!("THRESHOLDS FAILED {failed}/{}", s.thresholds.len()));
    }
    if f.is_empty() {
        "ok".into()
    } else {
        f.join(", ")
    }
}

/// The scenario's thresholds as judged: one row each (the report's Thresholds section).
pub(crate) fn thresholds_table(s: &ReportSummary) -> Table {
    let mut t = Table::new(&["Metric", "Condition", "Value", "Result", "Read from"])
        .with_left(2)
        .with_last_left();
    for r in &s.thresholds {
        t.row(vec![
            r.metric.clone(),
            r.condition.clone(),
            r.observed.clone(),
            if r.pass { "pass" } else { "FAIL" }.into(),
            match (&r.reason, r.pass) {
                (Some(why), false) => format!("{}: {why}", r.source),
                _ => r.source.clone(),
            },
        ]);
    }
    t
}

/// Machines shown in a report's headroom table, most saturated first (all are in
/// `report.json`).
pub(crate) const MACHINES_SHOWN: usize = 20;
/// Viewers shown in a report's table of starved viewers.
pub(crate) const STARVED_VIEWERS_SHOWN: usize = 20;

/// The players' figures at T for all viewers and for those with headroom.
pub(crate) fn headroom_figures_table(h: &Headroom) -> Table {
    let mut t = Table::new(&[
        "Players' figures at T",
        "Viewers",
        "HTTP at T Mbit/s",
        "P2P at T Mbit/s",
        "HTTP share",
        "P2P savings",
    ]);
    let rows = [
        ("all viewers", h.figures.all.as_ref()),
        ("with headroom", h.figures.with_headroom.as_ref()),
    ];
    for (name, f) in rows {
        t.row(match f {
            Some(f) => vec![
                name.into(),
                f.viewers.to_string(),
                mbps(f.http_at_mbps),
                mbps(f.p2p_at_mbps),
                pct(f.http_share),
                pct(f.p2p_savings),
            ],
            None => {
                let mut row = vec![name.to_string(), "0".to_string()];
                row.extend(std::iter::repeat_n(NONE.to_string(), 4));
                row
            }
        });
    }
    t
}

/// The machines against the rule: this host first, then the nodes, most saturated first.
pub(crate) fn machines_table(h: &Headroom) -> Table {
    let mut t = Table::new(&[
        "Machine",
        "Judges viewers",
        "Verdict",
        "Viewers",
        "Samples",
        "Mean busy",
        "Max busy",
        "Steal",
        "Throttled",
        "Pressure",
        "Hot (run)",
        "Hot (steady)",
        "Hot spans",
    ])
    .with_left(3)
    .with_last_left();
    let mut nodes: Vec<&MachineHeadroom> = h.nodes.iter().collect();
    nodes.sort_by(|a, b| {
        b.steady_hot_share
            .unwrap_or(-1.0)
            .total_cmp(&a.steady_hot_share.unwrap_or(-1.0))
    });
    let machines = h
        .host
        .iter()
        .map(|m| (m, h.host_judges_viewers))
        .chain(nodes.into_iter().map(|m| (m, true)));
    for (m, judges) in machines.take(MACHINES_SHOWN) {
        t.row(vec![
            super::prose::machine_name(m, h.host_judges_viewers),
            if judges { "yes" } else { "no" }.into(),
            if m.saturated_in_steady {
                "SATURATED in the steady window"
            } else if m.saturated {
                "saturated outside it"
            } else {
                "ok"
            }
            .into(),
            m.viewers.to_string(),
            if m.failed_samples > 0 {
                format!("{} (+{} failed)", m.samples, m.failed_samples)
            } else {
                m.samples.to_string()
            },
            pct(Some(m.mean_busy)),
            pct(Some(m.max_busy)),
            pct(m.mean_steal),
            pct(m.mean_throttled),
            pct(m.mean_pressure),
            pct(Some(m.hot_share)),
            pct(m.steady_hot_share),
            super::prose::spans(&m.hot_spans, m.hot_spans_total),
        ]);
    }
    t
}

/// The viewers without headroom in the steady window or starved at some time.
pub(crate) fn starved_viewers_table(h: &Headroom) -> Table {
    let mut t = Table::new(&[
        "Viewer",
        "Node",
        "Steady window",
        "Reasons",
        "Mean late",
        "Ticks >100 ms late",
        "Worst tick",
        "Page starved (s)",
        "When the page was starved",
    ])
    .with_left(4)
    .with_last_left();
    for v in h.viewers.listed.iter().take(STARVED_VIEWERS_SHOWN) {
        t.row(vec![
            v.viewer.to_string(),
            v.node.clone().unwrap_or_else(|| NONE.into()),
            match v.status {
                ViewerHeadroomStatus::Starved => "NO HEADROOM".to_string(),
                other => other.to_string(),
            },
            if v.reasons.is_empty() {
                NONE.into()
            } else {
                v.reasons.join(", ")
            },
            v.page
                .map_or(NONE.into(), |p| format!("{:.1} ms", p.mean_late_ms)),
            pct(v.page.map(|p| p.late_ticks_share)),
            ms(v.page.map(|p| p.max_ms)),
            if v.page.is_some() || v.starved_spans_total > 0 {
                format!("{:.0}", v.starved_s)
            } else {
                NONE.into()
            },
            super::prose::spans(&v.starved_spans, v.starved_spans_total),
        ]);
    }
    t
}

/// A few lines for the terminal after `viewerfleet report` or a run.
pub fn run_text(report: &RunReport) -> String {
    let s = &report.summary;
    let mut out = format!(
        "{} ({} {}, fleet {}): {}/{} viewers{} started, {} failed{}, {} lost{}\n",
        s.scenario,
        s.target.kind,
        s.target.video,
        s.target.fleet,
        s.viewers.started,
        s.viewers.requested,
        s.light
            .as_ref()
            .map(|l| format!(
                " + {}/{} light peers",
                l.started,
                l.planned.unwrap_or(l.reported)
            ))
            .unwrap_or_default(),
        s.viewers.failed,
        super::prose::never_started(s),
        s.viewers.lost,
        if s.partial { " — PARTIAL run" } else { "" }
    );
    out.push_str(&format!(
        "steady window {:.0}–{:.0} s (T = {:.0} s), rate window {:.0} s\n",
        s.windows.steady_from_s,
        s.windows.steady_to_s,
        s.windows.measure_point_s,
        s.windows.rate_window_s
    ));
    out.push_str(&seed_table(s).text());
    if let Some(h) = &s.headroom {
        out.push_str(&h.headline);
        out.push('\n');
    }
    for line in super::thresholds::lines(&s.thresholds) {
        out.push_str(&line);
        out.push('\n');
    }
    out
}
