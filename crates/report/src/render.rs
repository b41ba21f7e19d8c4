//! The renderer trait and the manager that writes every format.
//!
//! To add a format: one file implementing `Renderer`, one line in `renderers()`.

use super::compare::Comparison;
use super::summary::RunReport;
use std::path::{Path, PathBuf};

/// One output format. Renderers return `(file name, contents)` so tests capture them.
pub(crate) trait Renderer {
    /// Files for one run's report.
    fn run(&self, report: &RunReport) -> anyhow::Result<Vec<(String, String)>>;
    /// Files for a comparison of runs.
    fn compare(&self, cmp: &Comparison) -> anyhow::Result<Vec<(String, String)>>;
}

/// Every format, in the order files are written.
pub(crate) fn renderers() -> Vec<Box<dyn Renderer>> {
    vec![
        Box::new(super::json::JsonRenderer),
        Box::new(super::csv::CsvRenderer),
        Box::new(super::markdown::MarkdownRenderer),
        Box::new(super::html::HtmlRenderer),
    ]
}

/// Writes every renderer's files for a run into `dir` (atomically, file by file).
pub fn write_run(report: &RunReport, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    write_all(dir, |r| r.run(report))
}

/// Writes every renderer's files for a comparison into `dir`.
pub fn write_compare(cmp: &Comparison, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    write_all(dir, |r| r.compare(cmp))
}

fn write_all(
    dir: &Path,
    files: impl Fn(&dyn Renderer) -> anyhow::Result<Vec<(String, String)>>,
) -> anyhow::Result<Vec<PathBuf>> {
    use anyhow::Context;
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating the output folder {}", dir.display()))?;
    let mut written = Vec::new();
    for renderer in renderers() {
        for (name, contents) in files(renderer.as_ref())? {
            let path = dir.join(&name);
            crate::model::rawdata::write_atomic(&path, contents.as_bytes())
                .with_context(|| format!("writing {} (is the folder writable?)", path.display()))?;
            written.push(path);
        }
    }
    Ok(written)
}
