//! The capacity report: Markdown and a self-contained HTML page, plus `capacity.json`.

use super::knee::{Knee, KneeRules, StepResult, StepVerdict};
use super::project::{Costs, Projection};
use serde::Serialize;
use std::fmt::Write;

#[derive(Debug, Clone, Serialize)]
pub struct CapacityReport {
    pub scenario: String,
    pub generated_at: String,
    pub host: String,
    pub steps: Vec<StepResult>,
    pub verdicts: Vec<StepVerdict>,
    pub rules: KneeRules,
    pub knee: Option<Knee>,
    pub costs: Costs,
    pub projection: Option<Projection>,
    pub rerun: String,
    pub caveats: Vec<String>,
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map(|v| format!("{v:.digits$}"))
        .unwrap_or_else(|| "–".into())
}

pub fn markdown(r: &CapacityReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Capacity ladder: {}\n", r.scenario);
    let _ = writeln!(s, "Generated {} on {}.\n", r.generated_at, r.host);
    steps_table(&mut s, r);
    knee_section(&mut s, r);
    thresholds_section(&mut s, r);
    rules_line(&mut s, &r.rules);
    costs_table(&mut s, &r.costs);
    if let Some(p) = &r.projection {
        projection_section(&mut s, p);
    }
    let _ = writeln!(s, "\n## Caveats\n");
    for c in &r.caveats {
        let _ = writeln!(s, "- {c}");
    }
    let _ = writeln!(s, "\n## Re-run\n\n```sh\n{}\n```", r.rerun);
    s
}

/// One row per step: what it measured and whether it was degraded (by which rules).
fn steps_table(s: &mut String, r: &CapacityReport) {
    let _ = writeln!(s, "## Steps\n");
    let _ = writeln!(s, "| viewers | started | failed | HTTP Mbit/s | P2P Mbit/s | HTTP share | target CPU (cores) | target RSS (MB) | generator CPU | stalls / viewer-min | TTFF p95 (s) | status |");
    let _ = writeln!(
        s,
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for (step, verdict) in r.steps.iter().zip(&r.verdicts) {
        let status = if verdict.degraded {
            format!(
                "DEGRADED ({})",
                verdict
                    .violations
                    .iter()
                    .map(|v| v.rule)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        } else {
            "OK".into()
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.2} | {:.2} | {} | {} | {} | {:.0}% | {:.2} | {} | {} |",
            step.viewers,
            step.started,
            step.failed,
            step.http_mbps,
            step.p2p_mbps,
            step.http_share
                .map(|h| format!("{:.0}%", h * 100.0))
                .unwrap_or("–".into()),
            opt(step.target_cpu_cores, 2),
            step.target_rss_bytes
                .map(|b| format!("{:.0}", b as f64 / 1e6))
                .unwrap_or("–".into()),
            step.generator_cpu_busy * 100.0,
            step.stalls_per_viewer_minute,
            opt(step.ttff_p95_ms.map(|t| t / 1000.0), 1),
            status
        );
    }
}

/// How far the scenario's thresholds held: the largest step up to which every step passed
/// them, and each step's failed ones. Nothing when the scenario has none.
fn thresholds_section(s: &mut String, r: &CapacityReport) {
    if r.steps.iter().all(|step| step.thresholds.is_empty()) {
        return;
    }
    let _ = writeln!(s, "\n## Thresholds\n");
    let passed = |step: &StepResult| step.thresholds.iter().all(|t| t.pass);
    let held = r.steps.iter().take_while(|step| passed(step)).last();
    let _ = match (held, r.steps.iter().find(|step| !passed(step))) {
        (_, None) => writeln!(
            s,
            "The scenario's thresholds held at every step, up to {} viewers.\n",
            r.steps.last().map(|st| st.viewers).unwrap_or(0)
        ),
        (Some(ok), Some(first)) => writeln!(
            s,
            "The scenario's thresholds held up to **{} viewers**; they first failed at {} viewers.\n",
            ok.viewers, first.viewers
        ),
        (None, Some(first)) => writeln!(
            s,
            "The scenario's thresholds failed from the first step ({} viewers) on.\n",
            first.viewers
        ),
    };
    for step in &r.steps {
        let failed: Vec<String> = step
            .thresholds
            .iter()
            .filter(|t| !t.pass)
            .map(|t| format!("`{} {}` (got {})", t.metric, t.condition, t.observed))
            .collect();
        let _ = if failed.is_empty() {
            writeln!(
                s,
                "- {} viewers: all {} passed",
                step.viewers,
                step.thresholds.len()
            )
        } else {
            writeln!(
                s,
                "- {} viewers: FAILED {}",
                step.viewers,
                failed.join(", ")
            )
        };
    }
}

/// The first degraded step, what limited it and how it failed; or that none was degraded.
fn knee_section(s: &mut String, r: &CapacityReport) {
    let _ = writeln!(s, "\n## Knee\n");
    let Some(k) = &r.knee else {
        let _ = writeln!(
            s,
            "No step was degraded: the knee is above {} viewers on this setup.",
            r.steps.last().map(|s| s.viewers).unwrap_or(0)
        );
        return;
    };
    let _ = writeln!(
        s,
        "First degraded step: **{} viewers** (last healthy: {}). Limited by: **{}**.\n",
        k.at_viewers,
        k.last_ok_viewers
            .map(|v| v.to_string())
            .unwrap_or("none".into()),
        k.limited_by
    );
    let _ = writeln!(s, "First failure mode:\n");
    for v in &k.failure_mode {
        let _ = writeln!(s, "- `{}`: {}", v.rule, v.detail);
    }
    if k.limited_by == "generator" {
        let _ = writeln!(s, "\nThe **load generator** saturated, not the target: the viewers' browsers ran out of CPU on the generating machine. The target's limits lie beyond this step; use more or bigger generator nodes (a Grid or cloud fleet) to find them.");
    }
}

/// The thresholds every step was judged by, in one sentence.
fn rules_line(s: &mut String, rules: &KneeRules) {
    let _ = writeln!(s, "\nRules (a step is DEGRADED when any fires): stalls per viewer-minute > {}; failed, lost or never-playing viewers > {:.0}%; time to first frame p95 > {:.0} s; generator CPU > {:.0}% of its cores; target CPU > {:.0}% of {} cores; HTTP egress > {:.0}% of {}.",
        rules.max_stalls_per_viewer_minute,
        rules.max_failed_share * 100.0,
        rules.max_ttff_p95_ms / 1000.0,
        rules.max_generator_cpu_share * 100.0,
        rules.max_target_cpu_share * 100.0,
        rules.target_cores.map(|c| format!("{c:.0}")).unwrap_or("(unknown)".into()),
        rules.max_link_share * 100.0,
        rules.link_mbps.map(|l| format!("a {l:.0} Mbit/s link")).unwrap_or("the link (not set: rule off)".into()));
}

/// The per-viewer costs fitted on the healthy steps, one line fit per resource.
fn costs_table(s: &mut String, costs: &Costs) {
    let _ = writeln!(
        s,
        "\n## Per-viewer costs (fitted on steps {:?})\n",
        costs.steps_used
    );
    let line = |name: &str, fit: &Option<super::fit::LineFit>, unit: &str, scale: f64| match fit {
        Some(f) => format!(
            "| {name} | {:.4} {unit} | {:.3} {unit} | {} |\n",
            f.slope / scale,
            f.intercept / scale,
            if f.r_squared.is_nan() {
                "–".into()
            } else {
                format!("{:.2}", f.r_squared)
            }
        ),
        None => format!("| {name} | – | – | – |\n"),
    };
    let _ = writeln!(
        s,
        "| cost | per viewer | fixed | R² |\n|---|---:|---:|---:|"
    );
    s.push_str(&line("target CPU", &costs.cpu_cores, "cores", 1.0));
    s.push_str(&line("target memory", &costs.rss_bytes, "MB", 1e6));
    s.push_str(&line(
        "HTTP egress with P2P",
        &costs.http_mbps,
        "Mbit/s",
        1.0,
    ));
    s.push_str(&line(
        "HTTP egress without P2P",
        &costs.http_without_p2p_mbps,
        "Mbit/s",
        1.0,
    ));
}

/// How many viewers the user's server would hold by each resource, and the smallest.
fn projection_section(s: &mut String, p: &Projection) {
    let _ = writeln!(s, "\n## Projection\n");
    let _ = writeln!(s, "For a server with {:.0} cores, {:.1} GB RAM and a {:.0} Mbit/s link, using {:.0}% of each (the rest is headroom):\n",
        p.server.cores, p.server.ram_bytes as f64 / 1e9, p.server.nic_mbps, p.server.usable_share * 100.0);
    let n = |v: Option<u64>| {
        v.map(|v| v.to_string())
            .unwrap_or("no limit measured".into())
    };
    let _ = writeln!(
        s,
        "- by CPU: {}\n- by memory: {}\n- by network with P2P: {}\n- by network without P2P: {}\n",
        n(p.by_cpu),
        n(p.by_ram),
        n(p.by_nic_with_p2p),
        n(p.by_nic_without_p2p)
    );
    let _ = writeln!(
        s,
        "**About {} viewers with P2P, limited by {}.**",
        n(p.viewers_with_p2p),
        p.limited_by.unwrap_or("nothing measured")
    );
}

/// A self-contained HTML page holding the Markdown tables as HTML.
pub fn html(r: &CapacityReport) -> String {
    let md = markdown(r);
    let mut body = String::new();
    let mut in_table = false;
    let mut in_code = false;
    for line in md.lines() {
        if line.starts_with("```") {
            body.push_str(if in_code { "</pre>\n" } else { "<pre>" });
            in_code = !in_code;
            continue;
        }
        if in_code {
            body.push_str(&escape(line));
            body.push('\n');
            continue;
        }
        if line.starts_with('|') {
            if line.starts_with("|---") {
                continue;
            }
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            let tag = if in_table { "td" } else { "th" };
            if !in_table {
                body.push_str("<table>\n");
                in_table = true;
            }
            body.push_str("<tr>");
            for c in cells {
                let _ = write!(body, "<{tag}>{}</{tag}>", inline(c));
            }
            body.push_str("</tr>\n");
            continue;
        }
        if in_table {
            body.push_str("</table>\n");
            in_table = false;
        }
        if let Some(h) = line.strip_prefix("## ") {
            let _ = writeln!(body, "<h2>{}</h2>", escape(h));
        } else if let Some(h) = line.strip_prefix("# ") {
            let _ = writeln!(body, "<h1>{}</h1>", escape(h));
        } else if let Some(item) = line.strip_prefix("- ") {
            let _ = writeln!(body, "<p class=item>• {}</p>", inline(item));
        } else if !line.is_empty() {
            let _ = writeln!(body, "<p>{}</p>", inline(line));
        }
    }
    if in_table {
        body.push_str("</table>\n");
    }
    format!(
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>Capacity ladder: {}</title>\n<style>body{{font-family:system-ui,sans-serif;max-width:70rem;margin:2rem auto;padding:0 1rem;color:#222}}table{{border-collapse:collapse;margin:1rem 0}}td,th{{border:1px solid #ccc;padding:.3rem .6rem;text-align:right}}th{{background:#f3f3f3}}pre{{background:#f6f6f6;padding:.8rem;overflow-x:auto}}.item{{margin:.2rem 0}}@media print{{body{{margin:0}}}}</style></head><body>\n{body}</body></html>\n",
        escape(&r.scenario)
    )
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `**bold**` and `` `code` `` in escaped text.
fn inline(s: &str) -> String {
    let mut out = String::new();
    let mut bold = false;
    let mut code = false;
    let escaped = escape(s);
    let mut chars = escaped.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '*' && chars.peek() == Some(&'*') {
            chars.next();
            out.push_str(if bold { "</b>" } else { "<b>" });
            bold = !bold;
        } else if c == '`' {
            out.push_str(if code { "</code>" } else { "<code>" });
            code = !code;
        } else {
            out.push(c);
        }
    }
    out
}
