//! `report.md` and `compare.md`.

use super::compare::Comparison;
use super::prose;
use super::render::Renderer;
use super::sections;
use super::summary::{Headroom, RunReport};
use std::fmt::Write;

pub(crate) struct MarkdownRenderer;

fn bullets(out: &mut String, lines: &[String]) {
    for line in lines {
        let _ = writeln!(out, "- {line}");
    }
    out.push('\n');
}

/// Which machines and viewers were starved, when, and the figures without them.
fn headroom_section(out: &mut String, h: &Headroom) {
    out.push_str("## Headroom: which viewers were starved\n\n");
    bullets(out, &prose::headroom_lines(h));
    out.push_str(&sections::headroom_figures_table(h).markdown());
    out.push('\n');
    if h.host.is_some() || !h.nodes.is_empty() {
        out.push_str(&sections::machines_table(h).markdown());
        let machines = h.nodes.len() + usize::from(h.host.is_some());
        if machines > sections::MACHINES_SHOWN {
            let _ = writeln!(
                out,
                "\n…and {} more nodes (see report.json).",
                machines - sections::MACHINES_SHOWN
            );
        }
        out.push('\n');
    }
    let listed = &h.viewers.listed;
    if !listed.is_empty() {
        let total = listed.len() + h.viewers.not_listed as usize;
        let _ = writeln!(
            out,
            "Viewers without headroom in the steady window or with a starved page at some \
             time ({total}):\n"
        );
        out.push_str(&sections::starved_viewers_table(h).markdown());
        if total > sections::STARVED_VIEWERS_SHOWN {
            let _ = writeln!(
                out,
                "\n…and {} more (viewers.csv has every viewer's headroom).",
                total - sections::STARVED_VIEWERS_SHOWN
            );
        }
        out.push('\n');
    }
    out.push_str("Rules:\n\n");
    bullets(out, &h.rules);
}

impl Renderer for MarkdownRenderer {
    fn run(&self, report: &RunReport) -> anyhow::Result<Vec<(String, String)>> {
        let s = &report.summary;
        let mut out = format!("# viewerfleet report: {}\n\n", s.scenario);
        if let Some(reason) = &s.partial_reason {
            let _ = writeln!(out, "> **PARTIAL RUN**: {reason}.\n");
        }
        if let Some(banner) = prose::not_a_finding_banner(s) {
            let _ = writeln!(out, "> **NOT A FINDING**: {banner}\n");
        }
        if s.thresholds_failed() {
            let _ = writeln!(
                out,
                "> **THRESHOLDS FAILED**: {}\n",
                prose::thresholds_line(s)
            );
        }
        bullets(&mut out, &prose::run_lines(s));
        if !s.thresholds.is_empty() {
            out.push_str("## Thresholds\n\n");
            let _ = writeln!(out, "{}\n", prose::thresholds_line(s));
            out.push_str(&sections::thresholds_table(s).markdown());
            out.push('\n');
        }
        out.push_str("## Bandwidth\n\n");
        out.push_str(&sections::seed_table(s).markdown());
        out.push('\n');
        bullets(&mut out, &prose::origin_lines(s));
        let reconciliation = prose::reconciliation_lines(s);
        if !reconciliation.is_empty() {
            out.push_str("### Where the bytes went\n\n");
            bullets(&mut out, &reconciliation);
        }
        out.push_str("How these were computed:\n\n");
        bullets(&mut out, &prose::method_lines(s));
        if let Some(h) = &s.headroom {
            headroom_section(&mut out, h);
        }
        if let Some(a) = &s.arrival {
            out.push_str("## Arrivals: asked for and obtained\n\n");
            bullets(&mut out, &prose::arrival_lines(a));
            out.push_str(&sections::arrival_table(a).markdown());
            out.push('\n');
        }
        if let Some(c) = &s.churn {
            out.push_str("## Churn: viewers who left and came\n\n");
            bullets(&mut out, &super::churn::lines(c));
        }
        if let Some(c) = &s.connectivity {
            super::connectivity::markdown_section(&mut out, c);
        }
        out.push_str("## Quality of experience\n\n");
        bullets(&mut out, &prose::qoe_lines(s));
        if !s.qoe.failed.is_empty() {
            out.push_str(&sections::failures_table(s).markdown());
            if s.qoe.failed.len() > sections::FAILURES_SHOWN {
                let _ = writeln!(
                    out,
                    "\n…and {} more (see viewers.csv).",
                    s.qoe.failed.len() - sections::FAILURES_SHOWN
                );
            }
            out.push('\n');
        }
        if let Some(l) = &s.light {
            super::light::markdown_section(&mut out, l);
        }
        out.push_str("## Honesty\n\n");
        bullets(&mut out, &prose::honesty_lines(s));
        out.push_str("## Re-run\n\n```sh\n");
        out.push_str(&s.honesty.rerun_command);
        out.push_str("\n```\n\nRebuild this report from the raw data at any time: `viewerfleet report RUN_DIR`.\n\n");
        out.push_str(
            "## Files\n\n- `report.html`: this report with plots\n- `report.json`: the numbers\n\
             - `timeseries.csv`: rates, viewers active, stalls, arrivals over time\n\
             - `viewers.csv`: one row per viewer, with its headroom\n\
             - `host.csv`: host CPU samples\n",
        );
        if !report.node_busy.is_empty() {
            out.push_str("- `nodes.csv`: the viewer nodes' CPU busy share over time\n");
        }
        out.push_str("- `raw/`: the raw data everything here is computed from\n");
        Ok(vec![("report.md".into(), out)])
    }

    fn compare(&self, cmp: &Comparison) -> anyhow::Result<Vec<(String, String)>> {
        let mut out = String::from("# viewerfleet comparison\n\n");
        out.push_str(&cmp.table().markdown());
        out.push('\n');
        let warnings = cmp.headroom_warnings();
        if let Some((first, rest)) = warnings.split_first() {
            let _ = writeln!(out, "> **{first}**");
            for line in rest {
                let _ = writeln!(out, ">\n> {line}");
            }
            out.push('\n');
        }
        if cmp.has_repeats() {
            out.push_str("Values are mean ± half-width of the 95% confidence interval (Student's t, n − 1 degrees of freedom) over the n repeats.\n\n");
        }
        out.push_str(super::compare::LEGEND);
        out.push_str("\n\n");
        if !cmp.failed.is_empty() {
            out.push_str("## Runs without a report\n\n");
            for f in &cmp.failed {
                let _ = writeln!(out, "- `{}`: {}", f.name, f.error);
            }
            out.push('\n');
        }
        super::swarm_curve::markdown_section(&mut out, cmp);
        out.push_str("## Runs\n\n");
        for g in &cmp.groups {
            for r in &g.runs {
                let _ = writeln!(
                    out,
                    "- `{}` ({}): {}{}",
                    r.name,
                    r.summary.started_at,
                    sections::flags(&r.summary),
                    r.summary
                        .headroom
                        .as_ref()
                        .map(|h| format!("; {}", h.headline))
                        .unwrap_or_default()
                );
            }
        }
        Ok(vec![("compare.md".into(), out)])
    }
}
