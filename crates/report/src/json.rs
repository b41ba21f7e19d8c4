//! `report.json` and `compare.json`: the numbers, for scripts and for rebuilding checks.

use super::compare::Comparison;
use super::render::Renderer;
use super::summary::RunReport;

pub(crate) struct JsonRenderer;

impl Renderer for JsonRenderer {
    fn run(&self, report: &RunReport) -> anyhow::Result<Vec<(String, String)>> {
        let mut text = serde_json::to_string_pretty(&report.summary)?;
        text.push('\n');
        Ok(vec![("report.json".into(), text)])
    }

    fn compare(&self, cmp: &Comparison) -> anyhow::Result<Vec<(String, String)>> {
        let mut text = serde_json::to_string_pretty(&cmp.json())?;
        text.push('\n');
        Ok(vec![("compare.json".into(), text)])
    }
}
