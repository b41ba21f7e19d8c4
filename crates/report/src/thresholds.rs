//! The scenario's `thresholds`, judged against the report's own figures (`report.json`
//! `thresholds`), so a rebuilt report judges the same way and `run` exits 99 when one fails.
//!
//! Where each metric is read (README, "Thresholds"):
//! - bandwidth (`http_share_at_t`, `p2p_savings_at_t`, `http_at_t_mbps`, `p2p_at_t_mbps`,
//!   `http_peak_mbps`): the top-level figures, whose `source` is the exporter when the run
//!   had one, else the players; `exporter.`/`players.` read that table, `with_headroom.` the
//!   players' figures of the viewers with CPU headroom;
//! - `ttff_*` (p50, p90, p95, p99, max, avg), `viewer_stalled_share_*` (the same),
//!   `stalls_per_viewer_minute`, `stalled_time_share`: `qoe`;
//! - `p2p_undelivered`: `p2p_reconciliation.undelivered_share`;
//! - `failed_viewers`: `viewers.failed + viewers.lost` (a share: of `viewers.requested`);
//! - `starved_viewers`: `headroom.viewers.starved` (a share: of those watching in the steady
//!   window);
//! - `headroom`: `headroom.verdict` must be `finding`.
//!
//! A figure the report does not have (no exporter, no viewer played, no steady window) fails
//! its threshold with the reason, as k6 fails a threshold whose metric never got data.

use super::summary::{Distribution, FiguresAtT, HeadroomVerdict, ReportSummary, SourceTable};
use crate::model::kinds::RateSource;
use crate::model::scenario::thresholds::{
    Condition, MetricKind, Threshold, ThresholdMetric, ThresholdSource, ThresholdUnit,
};
use crate::model::scenario::ThresholdText;
use serde::{Deserialize, Serialize};

/// One threshold as judged: `report.json` `thresholds[]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThresholdResult {
    /// As written in the scenario: `ttff_p95`, `players.http_share_at_t`.
    pub metric: String,
    /// The condition, normalised: `< 15s`, `>= 60%`, `finding`.
    pub condition: String,
    /// The figure, in the condition's unit (seconds for `< 15s`, percent for `< 40%`);
    /// `null` when the report has none (or for `headroom`).
    pub value: Option<f64>,
    /// The figure for humans: `12.3s`, `35.2%`, `not-a-finding`, `no value`.
    pub observed: String,
    /// Where the figure was read in `report.json`, e.g. `exporter.http_share`.
    pub source: String,
    pub pass: bool,
    /// Why it failed without a value, or what the verdict rests on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Judges every threshold of the manifest against `s`.
pub fn evaluate(thresholds: &[ThresholdText], s: &ReportSummary) -> Vec<ThresholdResult> {
    thresholds
        .iter()
        .map(|text| match text.parse() {
            Ok(t) => judge(&t, s),
            // Only a damaged manifest gets here: the scenario was validated before the run.
            Err(why) => ThresholdResult {
                metric: text.metric.clone(),
                condition: text.condition.clone(),
                value: None,
                observed: "no value".into(),
                source: "manifest.json".into(),
                pass: false,
                reason: Some(format!("cannot be judged: {why}")),
            },
        })
        .collect()
}

/// A figure, or why there is none; and where it was read.
struct Reading {
    value: Result<f64, String>,
    source: String,
}

fn judge(t: &Threshold, s: &ReportSummary) -> ThresholdResult {
    let condition = t.condition.to_string();
    if t.metric == ThresholdMetric::Headroom {
        return verdict(t, s);
    }
    let reading = read(t, s);
    let unit = match t.condition {
        Condition::Compare { unit, .. } => unit,
        Condition::Finding => ThresholdUnit::Plain,
    };
    match reading.value {
        Ok(value) => {
            let value = round(value);
            ThresholdResult {
                metric: t.key(),
                condition,
                value: Some(value),
                observed: format!("{value}{}", unit.suffix()),
                source: reading.source,
                pass: t.condition.holds(value),
                reason: None,
            }
        }
        Err(why) => ThresholdResult {
            metric: t.key(),
            condition,
            value: None,
            observed: "no value".into(),
            source: reading.source,
            pass: false,
            reason: Some(format!("no value: {why}")),
        },
    }
}

/// Four significant decimals: what a condition can be written with, and stable in JSON.
fn round(v: f64) -> f64 {
    (v * 10_000.0).round() / 10_000.0
}

fn verdict(t: &Threshold, s: &ReportSummary) -> ThresholdResult {
    let (observed, pass, reason) = match &s.headroom {
        Some(h) => (
            h.verdict.as_str().to_string(),
            h.verdict == HeadroomVerdict::Finding,
            (h.verdict != HeadroomVerdict::Finding).then(|| h.headline.clone()),
        ),
        None => (
            "no value".into(),
            false,
            Some("no value: the report has no headroom section".into()),
        ),
    };
    ThresholdResult {
        metric: t.key(),
        condition: t.condition.to_string(),
        value: None,
        observed,
        source: "headroom.verdict".into(),
        pass,
        reason,
    }
}

/// The figure a threshold compares, converted into its condition's unit.
fn read(t: &Threshold, s: &ReportSummary) -> Reading {
    use ThresholdMetric::*;
    let unit = match t.condition {
        Condition::Compare { unit, .. } => unit,
        Condition::Finding => ThresholdUnit::Plain,
    };
    let convert = |raw: f64| -> f64 {
        match (t.metric.kind(), unit) {
            (MetricKind::Time, ThresholdUnit::Seconds) => raw / 1000.0,
            (MetricKind::Share, ThresholdUnit::Percent) => raw * 100.0,
            _ => raw,
        }
    };
    let reading = |value: Option<f64>, source: &str, none: &str| Reading {
        value: value.map(convert).ok_or_else(|| none.to_string()),
        source: source.to_string(),
    };
    match t.metric {
        TtffP50 => reading(
            s.qoe.ttff_median_ms,
            "qoe.ttff_median_ms",
            "no viewer played a first frame",
        ),
        TtffP90 => reading(
            s.qoe.ttff_p90_ms,
            "qoe.ttff_p90_ms",
            "no viewer played a first frame",
        ),
        TtffP95 => reading(
            s.qoe.ttff_p95_ms,
            "qoe.ttff_p95_ms",
            "no viewer played a first frame",
        ),
        TtffP99 => reading(
            s.qoe.ttff_p99_ms,
            "qoe.ttff_p99_ms",
            "no viewer played a first frame",
        ),
        TtffMax => reading(
            s.qoe.ttff_max_ms,
            "qoe.ttff_max_ms",
            "no viewer played a first frame",
        ),
        TtffAvg => reading(
            s.qoe.ttff_avg_ms,
            "qoe.ttff_avg_ms",
            "no viewer played a first frame",
        ),
        ViewerStalledShareP50
        | ViewerStalledShareP90
        | ViewerStalledShareP95
        | ViewerStalledShareP99
        | ViewerStalledShareMax
        | ViewerStalledShareAvg => {
            let (stat, pick): (&str, fn(&Distribution) -> f64) = match t.metric {
                ViewerStalledShareP50 => ("p50", |d| d.p50),
                ViewerStalledShareP90 => ("p90", |d| d.p90),
                ViewerStalledShareP95 => ("p95", |d| d.p95),
                ViewerStalledShareP99 => ("p99", |d| d.p99),
                ViewerStalledShareMax => ("max", |d| d.max),
                _ => ("avg", |d| d.avg),
            };
            reading(
                s.qoe.viewer_stalled_share.as_ref().map(pick),
                &format!("qoe.viewer_stalled_share.{stat}"),
                "no viewer watched",
            )
        }
        StallsPerViewerMinute => reading(
            s.qoe.stalls_per_viewer_minute,
            "qoe.stalls_per_viewer_minute",
            "no viewer watched",
        ),
        StalledTimeShare => reading(
            s.qoe.stalled_time_share,
            "qoe.stalled_time_share",
            "no viewer watched",
        ),
        P2pUndelivered => match &s.p2p_reconciliation {
            Some(r) => reading(
                r.undelivered_share,
                "p2p_reconciliation.undelivered_share",
                "no P2P bytes were uploaded",
            ),
            None => reading(
                None,
                "p2p_reconciliation.undelivered_share",
                "the report has no P2P reconciliation (no player counted its uploads)",
            ),
        },
        FailedViewers => viewers(
            t,
            (s.viewers.failed + s.viewers.lost) as f64,
            s.viewers.requested as f64,
            "viewers.failed + viewers.lost",
            "viewers.requested",
        ),
        StarvedViewers => match &s.headroom {
            Some(h) => viewers(
                t,
                h.viewers.starved as f64,
                h.viewers.in_steady as f64,
                "headroom.viewers.starved",
                "headroom.viewers.in_steady",
            ),
            None => reading(
                None,
                "headroom.viewers.starved",
                "the report has no headroom section",
            ),
        },
        Headroom => reading(None, "headroom.verdict", "judged as a verdict"),
        HttpShareAtT | P2pSavingsAtT | HttpAtTMbps | P2pAtTMbps | HttpPeakMbps => {
            let (value, source, none) = bandwidth(t, s);
            Reading {
                value: value.map(convert).ok_or(none),
                source,
            }
        }
    }
}

/// A count of viewers, or its share of `base` when the condition is in %.
fn viewers(t: &Threshold, count: f64, base: f64, source: &str, base_name: &str) -> Reading {
    let percent = matches!(
        t.condition,
        Condition::Compare {
            unit: ThresholdUnit::Percent,
            ..
        }
    );
    if !percent {
        return Reading {
            value: Ok(count),
            source: source.to_string(),
        };
    }
    Reading {
        value: if base > 0.0 {
            Ok(count * 100.0 / base)
        } else {
            Err(format!("{base_name} is 0, so there is no share"))
        },
        source: format!("({source}) / {base_name}"),
    }
}

/// A bandwidth figure from the table the threshold names (the report's own source when it
/// names none): the value, where it was read, and why there is none.
fn bandwidth(t: &Threshold, s: &ReportSummary) -> (Option<f64>, String, String) {
    use ThresholdMetric::*;
    let field = match t.metric {
        HttpShareAtT => "http_share",
        P2pSavingsAtT => "p2p_savings",
        HttpAtTMbps => "http_at_mbps",
        P2pAtTMbps => "p2p_at_mbps",
        _ => "http_peak_mbps",
    };
    let from_table = |table: &SourceTable| match t.metric {
        HttpShareAtT => table.http_share,
        P2pSavingsAtT => table.p2p_savings,
        HttpAtTMbps => table.http_at_mbps,
        P2pAtTMbps => table.p2p_at_mbps,
        _ => table.http_peak_mbps,
    };
    let from_figures = |f: &FiguresAtT| match t.metric {
        HttpShareAtT => f.http_share,
        P2pSavingsAtT => f.p2p_savings,
        HttpAtTMbps => f.http_at_mbps,
        _ => f.p2p_at_mbps,
    };
    let no_traffic = "no HTTP or P2P bytes in the steady window".to_string();
    match t.source {
        None => {
            let value = match t.metric {
                HttpShareAtT => s.http_share,
                P2pSavingsAtT => s.p2p_savings,
                HttpAtTMbps => s.http_at_mbps,
                P2pAtTMbps => s.p2p_at_mbps,
                _ => s.http_peak_mbps,
            };
            let source = match s.source {
                RateSource::Exporter => "exporter",
                _ => "players",
            };
            (value, format!("{field} (source: {source})"), no_traffic)
        }
        Some(ThresholdSource::Exporter) => match &s.exporter {
            Some(table) => (from_table(table), format!("exporter.{field}"), no_traffic),
            None => (
                None,
                format!("exporter.{field}"),
                "the run had no exporter samples (no target.exporter, or every scrape failed)"
                    .into(),
            ),
        },
        Some(ThresholdSource::Players) => match &s.players {
            Some(table) => (from_table(table), format!("players.{field}"), no_traffic),
            None => (
                None,
                format!("players.{field}"),
                "no player was sampled".into(),
            ),
        },
        Some(ThresholdSource::WithHeadroom) => {
            let source = format!("headroom.figures.with_headroom.{field}");
            match s
                .headroom
                .as_ref()
                .map(|h| h.figures.with_headroom.as_ref())
            {
                Some(Some(f)) => (from_figures(f), source, no_traffic),
                Some(None) => (None, source, "no viewer had headroom".into()),
                None => (None, source, "the report has no headroom section".into()),
            }
        }
    }
}

/// The end-of-run lines: how many passed, then one line per threshold.
pub fn lines(results: &[ThresholdResult]) -> Vec<String> {
    if results.is_empty() {
        return Vec::new();
    }
    let failed = results.iter().filter(|r| !r.pass).count();
    let mut out = vec![if failed == 0 {
        format!("thresholds: all {} passed", results.len())
    } else {
        format!(
            "THRESHOLDS FAILED: {failed} of {} (exit code 99)",
            results.len()
        )
    }];
    for r in results {
        out.push(format!(
            "  {} {} {}: {}{}",
            if r.pass { "pass" } else { "FAIL" },
            r.metric,
            r.condition,
            r.observed,
            r.reason
                .as_ref()
                .filter(|_| !r.pass)
                .map(|why| format!(" ({why})"))
                .unwrap_or_default()
        ));
    }
    out
}

/// A run ended early by a threshold with `abort_on_fail` (`detail`: the `aborted` run
/// event's, "threshold KEY CONDITION failed while the run went: …"): that threshold failed,
/// even when the figures at the end meet it again (a share that recovered after the abort),
/// so that judging the run again never turns its exit 99 into a pass.
pub(crate) fn mark_aborted(results: &mut [ThresholdResult], detail: &str) {
    for r in results.iter_mut() {
        let prefix = format!("threshold {} {} failed", r.metric, r.condition);
        if r.pass && detail.starts_with(&prefix) {
            r.pass = false;
            r.reason = Some(format!("ended the run early: {detail}"));
        }
    }
}

/// Whether any threshold failed.
pub(crate) fn any_failed(results: &[ThresholdResult]) -> bool {
    results.iter().any(|r| !r.pass)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary() -> ReportSummary {
        serde_json::from_str(include_str!(
            "../../../tests/fixtures/golden/run-starved.report.json"
        ))
        .unwrap()
    }

    fn judge_one(metric: &str, condition: &str, s: &ReportSummary) -> ThresholdResult {
        evaluate(&[ThresholdText::new(metric, condition)], s).remove(0)
    }

    #[test]
    fn figures_are_read_from_the_report_in_the_conditions_unit() {
        let s = summary();
        let r = judge_one("p2p_savings_at_t", ">= 60%", &s);
        let expected = round(s.p2p_savings.unwrap() * 100.0);
        assert_eq!(r.value, Some(expected), "{r:?}");
        assert_eq!(r.pass, expected >= 60.0);
        assert!(r.source.starts_with("p2p_savings (source: "), "{r:?}");
        let r = judge_one("with_headroom.p2p_savings_at_t", ">= 60%", &s);
        assert_eq!(r.value, Some(80.0), "the starved fixture's 80.0%: {r:?}");
        assert!(r.pass);
        let r = judge_one("ttff_p95", "< 1ms", &s);
        assert_eq!(r.value, s.qoe.ttff_p95_ms.map(round));
        let r = judge_one("starved_viewers", "< 10%", &s);
        assert!(!r.pass, "5 of 12 starved: {r:?}");
        let r = judge_one("headroom", "finding", &s);
        assert!(!r.pass);
        assert_eq!(r.observed, "not-a-finding");
        assert!(r.reason.unwrap().contains("5 of 12 viewers starved"));
        let r = judge_one("failed_viewers", "<= 0", &s);
        assert_eq!(r.value, Some((s.viewers.failed + s.viewers.lost) as f64));
    }

    #[test]
    fn the_threshold_that_ended_a_run_early_stays_failed() {
        let s = summary();
        let mut results = evaluate(
            &[
                ThresholdText::new("p2p_savings_at_t", ">= 10%"),
                ThresholdText::new("ttff_p95", "< 60s"),
            ],
            &s,
        );
        assert!(results.iter().all(|r| r.pass), "{results:?}");
        mark_aborted(
            &mut results,
            "threshold p2p_savings_at_t >= 10% failed while the run went: 4% at 65 s (abort_on_fail, judged from 1m on)",
        );
        assert!(!results[0].pass);
        assert!(results[0]
            .reason
            .as_deref()
            .unwrap()
            .starts_with("ended the run early: threshold p2p_savings_at_t >= 10% failed"));
        assert!(results[1].pass, "only the one that aborted");
    }

    #[test]
    fn a_missing_figure_fails_with_no_value_and_why() {
        let mut s = summary();
        s.exporter = None;
        s.qoe.ttff_p95_ms = None;
        let r = judge_one("exporter.http_share_at_t", "< 40%", &s);
        assert!(!r.pass);
        assert_eq!(r.value, None);
        assert_eq!(r.observed, "no value");
        assert!(r.reason.unwrap().contains("no exporter samples"));
        let r = judge_one("ttff_p95", "< 15s", &s);
        assert!(!r.pass && r.reason.unwrap().starts_with("no value: "));
        let text = lines(&evaluate(&[ThresholdText::new("ttff_p95", "< 15s")], &s));
        assert_eq!(text[0], "THRESHOLDS FAILED: 1 of 1 (exit code 99)");
        assert!(text[1].starts_with("  FAIL ttff_p95 < 15s: no value (no value: "));
    }
}
