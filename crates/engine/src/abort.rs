//! `abort_on_fail`: the thresholds that may end a run early, judged while it goes from the
//! figures the engine has live (k6's `abortOnFail` with `delayAbortEval`). Each is judged
//! from its delay after the start on, once per sampling interval (at most once a second);
//! the first that fails records an `aborted` run event with its live value and ends the
//! run, which then tears down as at its planned end and exits 99.
//!
//! Live figures (the grammar refuses `abort_on_fail` on any other metric):
//! - `failed_viewers`: the viewers failed or lost so far (a `%`: of those asked for so far);
//! - `http_share_at_t`, `p2p_savings_at_t`: the players' HTTP and P2P bytes since the start
//!   (no bytes yet: not judged yet).
//!
//! After the run every threshold, these included, is judged again from the report.

use super::shared::Shared;
use crate::model::rawdata::RunEventKind;
use crate::model::scenario::thresholds::{Condition, Threshold, ThresholdMetric, ThresholdUnit};
use std::sync::Arc;
use std::time::Duration;

/// The figure a live threshold compares, in its condition's unit; `None`: none yet.
fn live_value(t: &Threshold, shared: &Shared, plan_viewers: u32) -> Option<f64> {
    let unit = match t.condition {
        Condition::Compare { unit, .. } => unit,
        Condition::Finding => return None,
    };
    let live = shared.live();
    match t.metric {
        ThresholdMetric::FailedViewers => {
            let requested = live.requested(plan_viewers);
            let failed = live.failed_or_lost(requested) as f64;
            match unit {
                ThresholdUnit::Percent => {
                    (requested > 0).then(|| failed * 100.0 / f64::from(requested))
                }
                _ => Some(failed),
            }
        }
        ThresholdMetric::HttpShareAtT | ThresholdMetric::P2pSavingsAtT => {
            let http: u64 = live.latest.values().map(|v| v.http_down_bytes).sum();
            let p2p: u64 = live.latest.values().map(|v| v.p2p_down_bytes).sum();
            let total = http + p2p;
            if total == 0 {
                return None;
            }
            let http_share = http as f64 / total as f64;
            let share = if t.metric == ThresholdMetric::HttpShareAtT {
                http_share
            } else {
                1.0 - http_share
            };
            Some(share * 100.0)
        }
        // Refused by the grammar (`ThresholdMetric::live`).
        _ => None,
    }
}

/// The value for humans, in the condition's unit.
fn shown(t: &Threshold, value: f64) -> String {
    let suffix = match t.condition {
        Condition::Compare { unit, .. } => unit.suffix(),
        Condition::Finding => "",
    };
    format!("{}{suffix}", (value * 100.0).round() / 100.0)
}

/// Judges the run's `abort_on_fail` thresholds until the run ends; when one fails,
/// records why and ends the run (`Shared::abort`).
pub(super) async fn watch(thresholds: Vec<Threshold>, shared: Arc<Shared>, plan_viewers: u32) {
    let watched: Vec<Threshold> = thresholds
        .into_iter()
        .filter(|t| t.abort.is_some())
        .collect();
    if watched.is_empty() {
        return;
    }
    let period = shared
        .sampling_interval
        .clamp(Duration::from_millis(100), Duration::from_secs(1));
    let mut tick = tokio::time::interval(period);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shared.run_end.cancelled() => return,
            _ = shared.abort.cancelled() => return,
        }
        let now = shared.rec.now();
        for t in &watched {
            let delay = t.abort.map_or(Duration::ZERO, |a| a.delay);
            if now < delay.as_secs_f64() {
                continue;
            }
            let Some(value) = live_value(t, &shared, plan_viewers) else {
                continue;
            };
            if t.condition.holds(value) {
                continue;
            }
            let why = format!(
                "threshold {} {} failed while the run went: {} at {now:.0} s (abort_on_fail, judged from {} on)",
                t.key(),
                t.condition,
                shown(t, value),
                humantime::format_duration(delay)
            );
            tracing::warn!("{why}; ending the run early");
            shared
                .rec
                .run_event(RunEventKind::Aborted, Some(why.clone()));
            *shared.aborted.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
            shared.abort.cancel();
            return;
        }
    }
}
