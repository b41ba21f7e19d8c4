//! The run's manifest: what was run, on what, how, and how it ended. Written when the
//! target is ready and stamped again at the end; a manifest without `ended_at` marks a run
//! that was cut short.

use super::run::RunContext;
use crate::fleet::Fleet;
use crate::model::kinds::VideoKind;
use crate::model::rawdata::{self, Manifest, PlanSummary, TargetDescription};
use crate::model::scenario::Plan;
use crate::sys::hostinfo;
use crate::target::Target;
use anyhow::Context;
use std::path::Path;

pub(super) fn write_manifest(
    plan: &Plan,
    ctx: &RunContext,
    fleet: &dyn Fleet,
    target: &dyn Target,
    viewer_url: &str,
    started_wall: chrono::DateTime<chrono::Utc>,
    light_host: Option<&super::light_task::LightHost>,
) -> anyhow::Result<()> {
    let fleet_description = crate::fleet::with_packing(fleet.description(plan), plan);
    let light = super::light_task::summary(plan, &fleet_description, light_host);
    let manifest = Manifest {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        git_commit: hostinfo::git_commit(),
        command_line: ctx.rerun_command.clone(),
        scenario_name: plan.name.clone(),
        started_at: started_wall.to_rfc3339(),
        started_at_unix_ms: started_wall.timestamp_millis() as u64,
        ended_at: None,
        exit_status: None,
        aborted: None,
        host: hostinfo::host_info(),
        versions: hostinfo::tool_versions(&[
            ("chromium", "/usr/lib/chromium/chromium", &["--version"]),
            ("chromedriver", "chromedriver", &["--version"]),
            ("ffmpeg", "ffmpeg", &["-version"]),
            ("kernel", "uname", &["-r"]),
        ]),
        fleet: fleet_description,
        browser: Some(plan.browser.clone()),
        target: TargetDescription {
            kind: plan.target.kind,
            video: plan.target.video,
            latency: (plan.target.video == VideoKind::Live).then_some(plan.target.latency),
            viewer_url: viewer_url.to_string(),
            exporter_url: target.exporter_url(),
            playback_metrics_interval_s: Some(plan.target.metrics_interval.as_secs_f64()),
        },
        plan: PlanSummary {
            viewers: plan.viewers,
            p2p_off_share: plan.p2p_off_share,
            ramp_s: plan.ramp.as_secs_f64(),
            duration_s: plan.duration.as_secs_f64(),
            sampling_interval_s: plan.sampling_interval.as_secs_f64(),
            measure_at_s: plan.measure_at.as_secs_f64(),
            steady_window_s: plan.steady_window.as_secs_f64(),
            network: plan.network.map(|n| n.link).unwrap_or_default(),
            max_failed_viewers: plan.max_failed_viewers,
            auto_cpu_below: plan.auto.map(|a| a.cpu_below),
            thresholds: plan.thresholds.iter().map(|t| t.text()).collect(),
            churn: plan.churn.as_ref().map(|c| c.describe()),
            light,
        },
    };
    let json = serde_json::to_vec_pretty(&manifest)?;
    rawdata::write_atomic(&ctx.out.join(rawdata::MANIFEST), &json)
        .with_context(|| format!("writing the manifest in {}", ctx.out.display()))
}

/// Stamps the end time and exit status on the manifest (if it was written at all).
pub(super) fn finish_manifest(
    out: &Path,
    code: u8,
    interrupted: bool,
    signal: Option<&str>,
    record_lost: Option<&str>,
    aborted: Option<&str>,
) -> anyhow::Result<()> {
    let path = out.join(rawdata::MANIFEST);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(());
    };
    let mut manifest: Manifest = serde_json::from_str(&text)?;
    manifest.ended_at = Some(chrono::Utc::now().to_rfc3339());
    manifest.exit_status = Some(match (interrupted, record_lost, aborted) {
        (true, _, _) => format!("interrupted by {}", signal.unwrap_or("a stop request")),
        (false, Some(reason), _) => format!("exit code {code}: the run stopped, {reason}"),
        (false, None, Some(_)) => {
            format!("exit code {code}: ended early by a threshold with abort_on_fail")
        }
        (false, None, None) => format!("exit code {code}"),
    });
    manifest.aborted = aborted.map(str::to_string);
    rawdata::write_atomic(&path, &serde_json::to_vec_pretty(&manifest)?)?;
    Ok(())
}

/// Replaces the exit status the end stamp wrote (thresholds are judged from the report,
/// which needs the stamped manifest first).
pub(super) fn restamp_exit_code(out: &Path, code: u8) -> anyhow::Result<()> {
    let path = out.join(rawdata::MANIFEST);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(());
    };
    let mut manifest: Manifest = serde_json::from_str(&text)?;
    manifest.exit_status = Some(format!("exit code {code}"));
    rawdata::write_atomic(&path, &serde_json::to_vec_pretty(&manifest)?)?;
    Ok(())
}
