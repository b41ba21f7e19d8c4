//! One ladder step's figures, read from its run folder: the run report's numbers plus the
//! host samples over the same steady window (generator CPU, target CPU and memory).

use super::knee::StepResult;
use crate::model::rawdata::{self, HostSample};
use crate::report::ReportSummary;
use std::path::Path;

pub fn step_from_run(run_dir: &Path, report: &ReportSummary) -> anyhow::Result<StepResult> {
    let hosts: Vec<HostSample> = rawdata::read_jsonl(&run_dir.join(rawdata::HOST_SAMPLES))?.records;
    let (from, to) = (report.windows.steady_from_s, report.windows.steady_to_s);
    let window: Vec<&HostSample> = hosts.iter().filter(|h| h.t >= from && h.t <= to).collect();
    let generator_cpu_busy = if window.is_empty() {
        0.0
    } else {
        window.iter().map(|h| h.cpu_busy).sum::<f64>() / window.len() as f64
    };
    let target_cpu_cores = match (window.first(), window.last()) {
        (Some(a), Some(b)) if b.t > a.t => match (a.target_cpu_s, b.target_cpu_s) {
            (Some(c0), Some(c1)) => Some(((c1 - c0) / (b.t - a.t)).max(0.0)),
            _ => None,
        },
        _ => None,
    };
    let target_rss_bytes = window.iter().filter_map(|h| h.target_rss_bytes).max();
    Ok(StepResult {
        viewers: report.viewers.requested,
        run_dir: run_dir.display().to_string(),
        started: report.viewers.started,
        failed: report.viewers.failed + report.viewers.lost,
        http_mbps: report.http_at_mbps.unwrap_or(0.0),
        p2p_mbps: report.p2p_at_mbps.unwrap_or(0.0),
        http_share: report.http_share,
        target_cpu_cores,
        target_rss_bytes,
        generator_cpu_busy,
        generator_cores: hosts.first().map(|h| h.cores).unwrap_or(1),
        stalls_per_viewer_minute: report.qoe.stalls_per_viewer_minute.unwrap_or(0.0),
        ttff_p95_ms: report.qoe.ttff_p95_ms,
        thresholds: report.thresholds.clone(),
    })
}
