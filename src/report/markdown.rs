//! `report.md` and `compare.md`.

use super::compare::Comparison;
use super::model::RunReport;
use super::prose;
use super::render::{self, Renderer};
use std::fmt::Write;

pub struct MarkdownRenderer;

fn bullets(out: &mut String, lines: &[String]) {
    for line in lines {
        let _ = writeln!(out, "- {line}");
    }
    out.push('\n');
}

impl Renderer for MarkdownRenderer {
    fn run(&self, report: &RunReport) -> anyhow::Result<Vec<(String, String)>> {
        let s = &report.summary;
        let mut out = format!("# viewerfleet report: {}\n\n", s.scenario);
        if let Some(reason) = &s.partial_reason {
            let _ = writeln!(out, "> **PARTIAL RUN**: {reason}.\n");
        }
        bullets(&mut out, &prose::run_lines(s));
        out.push_str("## Bandwidth\n\n");
        out.push_str(&render::seed_table(s).markdown());
        out.push('\n');
        bullets(&mut out, &prose::origin_lines(s));
        let reconciliation = prose::reconciliation_lines(s);
        if !reconciliation.is_empty() {
            out.push_str("### Where the bytes went\n\n");
            bullets(&mut out, &reconciliation);
        }
        out.push_str("How these were computed:\n\n");
        bullets(&mut out, &prose::method_lines(s));
        out.push_str("## Quality of experience\n\n");
        bullets(&mut out, &prose::qoe_lines(s));
        if !s.qoe.failed.is_empty() {
            out.push_str(&render::failures_table(s).markdown());
            if s.qoe.failed.len() > render::FAILURES_SHOWN {
                let _ = writeln!(
                    out,
                    "\n…and {} more (see viewers.csv).",
                    s.qoe.failed.len() - render::FAILURES_SHOWN
                );
            }
            out.push('\n');
        }
        out.push_str("## Honesty\n\n");
        bullets(&mut out, &prose::honesty_lines(s));
        out.push_str("## Re-run\n\n```sh\n");
        out.push_str(&s.honesty.rerun_command);
        out.push_str("\n```\n\nRebuild this report from the raw data at any time: `viewerfleet report RUN_DIR`.\n\n");
        out.push_str(
            "## Files\n\n- `report.html`: this report with plots\n- `report.json`: the numbers\n\
             - `timeseries.csv`: rates, viewers active, stalls over time\n\
             - `viewers.csv`: one row per viewer\n- `host.csv`: host CPU samples\n\
             - `raw/`: the raw data everything here is computed from\n",
        );
        Ok(vec![("report.md".into(), out)])
    }

    fn compare(&self, cmp: &Comparison) -> anyhow::Result<Vec<(String, String)>> {
        let mut out = String::from("# viewerfleet comparison\n\n");
        out.push_str(&cmp.table().markdown());
        out.push('\n');
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
        out.push_str("## Runs\n\n");
        for g in &cmp.groups {
            for r in &g.runs {
                let _ = writeln!(
                    out,
                    "- `{}` ({}): {}",
                    r.name,
                    r.summary.started_at,
                    render::flags(&r.summary)
                );
            }
        }
        Ok(vec![("compare.md".into(), out)])
    }
}
