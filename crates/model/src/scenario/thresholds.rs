//! `thresholds:`: pass/fail conditions on a run's figures, k6's idea with this domain's
//! metrics. A run whose threshold fails exits 99 (README, "Thresholds").
//!
//! ```yaml
//! thresholds:
//!   ttff_p95: "< 15s"
//!   stalls_per_viewer_minute: "< 0.5"
//!   http_share_at_t: "< 40%"
//!   players.p2p_savings_at_t: ">= 60%"
//!   failed_viewers: "<= 2"
//!   headroom: finding
//! ```
//!
//! A metric takes one condition or a list of them, k6 style; a list entry may be a mapping
//! that also asks to end the run early when it fails (`abort_on_fail`, after
//! `delay_abort_eval`), for the metrics the run engine knows while the run goes:
//!
//! ```yaml
//! thresholds:
//!   ttff: ["p95 < 4s", "p99 < 8s"]   # a distribution: each condition names its statistic
//!   http_share_at_t: ["< 40%", "> 1%"]
//!   failed_viewers:
//!     - condition: "< 20%"
//!       abort_on_fail: true
//!       delay_abort_eval: 30s
//! ```
//!
//! Grammar: a key `[SOURCE.]METRIC` and a condition `OP NUMBER[UNIT]`; `OP` is one of `<`,
//! `<=`, `>`, `>=`, `==`; `NUMBER` a decimal of 0 or more; `UNIT` is what the metric
//! measures in: `s` or `ms` for times, `%` for shares, none for counts, rates (Mbit/s) and
//! plain numbers; viewer counts take a count or a `%` of the viewers. `headroom` takes the
//! word `finding`. `SOURCE` (`exporter`, `players`, `with_headroom`) picks the table a
//! bandwidth metric reads; without it, the report's own source (the exporter when the run
//! had one, else the players). The figures are read from the report (`report::thresholds`).
//!
//! The distributions `ttff` and `viewer_stalled_share` (each viewer's own share of time
//! rebuffering) take `STAT OP NUMBER UNIT`, `STAT` one of `p50`, `p90`, `p95`, `p99`, `max`,
//! `avg`: `ttff: "p99 < 8s"` is the same threshold as `ttff_p99: "< 8s"`.
//!
//! This module owns the grammar and validation; the values come from `report.json`, or,
//! for `abort_on_fail` while the run goes, from the engine's live figures (`engine::abort`).

use crate::kinds::named_enum;
use serde::{Deserialize, Serialize};

named_enum! {
    /// What a threshold is about: one figure of the run's report.
    pub enum ThresholdMetric {
        /// Median time to first frame (`qoe.ttff_median_ms`).
        TtffP50 = "ttff_p50",
        /// 90th percentile of the time to first frame (`qoe.ttff_p90_ms`).
        TtffP90 = "ttff_p90",
        /// 95th percentile of the time to first frame (`qoe.ttff_p95_ms`).
        TtffP95 = "ttff_p95",
        /// 99th percentile of the time to first frame (`qoe.ttff_p99_ms`).
        TtffP99 = "ttff_p99",
        /// The longest time to first frame (`qoe.ttff_max_ms`).
        TtffMax = "ttff_max",
        /// The mean time to first frame (`qoe.ttff_avg_ms`).
        TtffAvg = "ttff_avg",
        /// The viewers' own shares of time spent rebuffering, one figure per viewer that
        /// watched: median (`qoe.viewer_stalled_share.p50`).
        ViewerStalledShareP50 = "viewer_stalled_share_p50",
        /// … 90th percentile (`qoe.viewer_stalled_share.p90`).
        ViewerStalledShareP90 = "viewer_stalled_share_p90",
        /// … 95th percentile (`qoe.viewer_stalled_share.p95`).
        ViewerStalledShareP95 = "viewer_stalled_share_p95",
        /// … 99th percentile (`qoe.viewer_stalled_share.p99`).
        ViewerStalledShareP99 = "viewer_stalled_share_p99",
        /// … the most any viewer spent rebuffering (`qoe.viewer_stalled_share.max`).
        ViewerStalledShareMax = "viewer_stalled_share_max",
        /// … the mean over viewers (`qoe.viewer_stalled_share.avg`).
        ViewerStalledShareAvg = "viewer_stalled_share_avg",
        /// Rebuffering events per viewer-minute watched (`qoe.stalls_per_viewer_minute`).
        StallsPerViewerMinute = "stalls_per_viewer_minute",
        /// Time spent rebuffering over time watched (`qoe.stalled_time_share`).
        StalledTimeShare = "stalled_time_share",
        /// HTTP / (HTTP + P2P) over the steady window ending at T (`http_share`).
        HttpShareAtT = "http_share_at_t",
        /// 1 − HTTP share at T (`p2p_savings`).
        P2pSavingsAtT = "p2p_savings_at_t",
        /// HTTP rate over the steady window, Mbit/s (`http_at_mbps`).
        HttpAtTMbps = "http_at_t_mbps",
        /// P2P rate over the steady window, Mbit/s (`p2p_at_mbps`).
        P2pAtTMbps = "p2p_at_t_mbps",
        /// Highest HTTP rate of the run, Mbit/s (`http_peak_mbps`).
        HttpPeakMbps = "http_peak_mbps",
        /// P2P bytes uploaded but never delivered, share of the uploads
        /// (`p2p_reconciliation.undelivered_share`).
        P2pUndelivered = "p2p_undelivered",
        /// Viewers that failed or were lost (`viewers.failed + viewers.lost`), a count or a
        /// share of the viewers requested.
        FailedViewers = "failed_viewers",
        /// Viewers without headroom in the steady window (`headroom.viewers.starved`), a
        /// count or a share of the viewers watching there.
        StarvedViewers = "starved_viewers",
        /// The headroom verdict (`headroom.verdict`): `finding` when the run's P2P figure can
        /// be quoted.
        Headroom = "headroom",
    }
}

named_enum! {
    /// Which of the report's tables a bandwidth threshold reads (`SOURCE.` before the metric).
    pub enum ThresholdSource {
        /// The platform's Prometheus exporter (`exporter` table).
        Exporter = "exporter",
        /// The viewers' own stats, summed (`players` table).
        Players = "players",
        /// The players' figures of the viewers that had CPU headroom
        /// (`headroom.figures.with_headroom`).
        WithHeadroom = "with_headroom",
    }
}

named_enum! {
    /// A condition's comparison.
    pub enum ThresholdOp {
        Below = "<",
        AtMost = "<=",
        Above = ">",
        AtLeast = ">=",
        Equal = "==",
    }
}

/// What a metric's figure is, which decides the units its conditions take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    /// A time: `s` or `ms`.
    Time,
    /// A share: `%`.
    Share,
    /// A rate in Mbit/s: a plain number.
    Rate,
    /// A plain number.
    Number,
    /// A number of viewers: a plain count or a `%` of the viewers.
    Viewers,
    /// The headroom verdict: the word `finding`.
    Verdict,
}

impl ThresholdMetric {
    pub const fn kind(self) -> MetricKind {
        use ThresholdMetric::*;
        match self {
            TtffP50 | TtffP90 | TtffP95 | TtffP99 | TtffMax | TtffAvg => MetricKind::Time,
            StalledTimeShare | HttpShareAtT | P2pSavingsAtT | P2pUndelivered => MetricKind::Share,
            ViewerStalledShareP50
            | ViewerStalledShareP90
            | ViewerStalledShareP95
            | ViewerStalledShareP99
            | ViewerStalledShareMax
            | ViewerStalledShareAvg => MetricKind::Share,
            HttpAtTMbps | P2pAtTMbps | HttpPeakMbps => MetricKind::Rate,
            StallsPerViewerMinute => MetricKind::Number,
            FailedViewers | StarvedViewers => MetricKind::Viewers,
            Headroom => MetricKind::Verdict,
        }
    }

    /// The sources a metric may be read from (`SOURCE.METRIC`); empty: none to choose.
    pub const fn sources(self) -> &'static [ThresholdSource] {
        use ThresholdMetric::*;
        use ThresholdSource::*;
        match self {
            HttpShareAtT | P2pSavingsAtT | HttpAtTMbps | P2pAtTMbps => {
                &[Exporter, Players, WithHeadroom]
            }
            HttpPeakMbps => &[Exporter, Players],
            _ => &[],
        }
    }

    /// Whether the run engine knows this figure while the run goes, so that
    /// `abort_on_fail` can judge it live: the failed and lost viewers, and the HTTP share
    /// and P2P savings of the players' bytes so far (`players.` or the report's own source).
    pub fn live(self, source: Option<ThresholdSource>) -> bool {
        use ThresholdMetric::*;
        match self {
            FailedViewers => true,
            HttpShareAtT | P2pSavingsAtT => {
                matches!(source, None | Some(ThresholdSource::Players))
            }
            _ => false,
        }
    }

    /// The metrics `abort_on_fail` can judge while the run goes, for error messages.
    pub(crate) const LIVE: &'static str =
        "`failed_viewers`, `http_share_at_t` and `p2p_savings_at_t` (the players' bytes so far)";

    /// How a condition on this metric is written, for error messages.
    pub const fn forms(self) -> &'static str {
        match self.kind() {
            MetricKind::Time => "a time in s or ms, e.g. \"< 15s\" or \"<= 800ms\"",
            MetricKind::Share => "a share in %, e.g. \"< 40%\"",
            MetricKind::Rate => "a rate in Mbit/s as a plain number, e.g. \"< 90\"",
            MetricKind::Number => "a plain number, e.g. \"< 0.5\"",
            MetricKind::Viewers => {
                "a count of viewers or a share of them in %, e.g. \"<= 2\" or \"< 5%\""
            }
            MetricKind::Verdict => {
                "the word `finding` (the run's P2P figure must be a finding, see the report's Headroom section)"
            }
        }
    }
}

/// The unit a condition was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThresholdUnit {
    Seconds,
    Millis,
    Percent,
    /// A plain number (counts, Mbit/s, stalls per viewer-minute).
    Plain,
}

impl ThresholdUnit {
    pub const fn suffix(self) -> &'static str {
        match self {
            ThresholdUnit::Seconds => "s",
            ThresholdUnit::Millis => "ms",
            ThresholdUnit::Percent => "%",
            ThresholdUnit::Plain => "",
        }
    }
}

/// A condition: a comparison with a bound in a unit, or the headroom verdict.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Condition {
    Compare {
        op: ThresholdOp,
        bound: f64,
        unit: ThresholdUnit,
    },
    /// `headroom: finding`.
    Finding,
}

impl Condition {
    /// Whether `value` (in the condition's unit) meets it.
    pub fn holds(&self, value: f64) -> bool {
        match *self {
            Condition::Compare { op, bound, .. } => match op {
                ThresholdOp::Below => value < bound,
                ThresholdOp::AtMost => value <= bound,
                ThresholdOp::Above => value > bound,
                ThresholdOp::AtLeast => value >= bound,
                ThresholdOp::Equal => value == bound,
            },
            Condition::Finding => false,
        }
    }
}

impl std::fmt::Display for Condition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Condition::Compare { op, bound, unit } => write!(f, "{op} {bound}{}", unit.suffix()),
            Condition::Finding => f.write_str("finding"),
        }
    }
}

/// `abort_on_fail`: end the run early (exit 99) once this threshold fails while the run
/// goes, judged from `delay` after the start on (k6's `abortOnFail` and `delayAbortEval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortOnFail {
    pub delay: std::time::Duration,
}

/// One validated threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    pub metric: ThresholdMetric,
    /// `None`: the report's own source (bandwidth metrics) or none to choose.
    pub source: Option<ThresholdSource>,
    pub condition: Condition,
    /// Judged live as well, ending the run when it fails (`None`: judged after the run only).
    pub abort: Option<AbortOnFail>,
}

/// The distributions whose conditions name a statistic (`ttff: "p95 < 4s"`), and the
/// metric each statistic is.
const DISTRIBUTIONS: &[(&str, &[(&str, ThresholdMetric)])] = &[
    (
        "ttff",
        &[
            ("p50", ThresholdMetric::TtffP50),
            ("p90", ThresholdMetric::TtffP90),
            ("p95", ThresholdMetric::TtffP95),
            ("p99", ThresholdMetric::TtffP99),
            ("max", ThresholdMetric::TtffMax),
            ("avg", ThresholdMetric::TtffAvg),
        ],
    ),
    (
        "viewer_stalled_share",
        &[
            ("p50", ThresholdMetric::ViewerStalledShareP50),
            ("p90", ThresholdMetric::ViewerStalledShareP90),
            ("p95", ThresholdMetric::ViewerStalledShareP95),
            ("p99", ThresholdMetric::ViewerStalledShareP99),
            ("max", ThresholdMetric::ViewerStalledShareMax),
            ("avg", ThresholdMetric::ViewerStalledShareAvg),
        ],
    ),
];

/// A key of `thresholds:`: one metric, or a distribution whose conditions name their
/// statistic.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Key {
    Metric(ThresholdMetric, Option<ThresholdSource>),
    Distribution(&'static str, &'static [(&'static str, ThresholdMetric)]),
}

impl Key {
    fn parse(key: &str) -> Result<Key, String> {
        if let Some((name, stats)) = DISTRIBUTIONS.iter().find(|(name, _)| *name == key) {
            return Ok(Key::Distribution(name, stats));
        }
        parse_key(key).map(|(metric, source)| Key::Metric(metric, source))
    }

    /// The metric and condition of one condition written under this key.
    fn condition(self, text: &str) -> Result<(ThresholdMetric, Condition), String> {
        match self {
            Key::Metric(metric, _) => Ok((metric, parse_condition(metric, text)?)),
            Key::Distribution(name, stats) => {
                let written = text.trim();
                let names: Vec<&str> = stats.iter().map(|(stat, _)| *stat).collect();
                let (metric, rest) = stats
                    .iter()
                    .find_map(|(stat, metric)| written.strip_prefix(stat).map(|r| (*metric, r)))
                    .filter(|(_, rest)| {
                        rest.trim_start().starts_with(['<', '>', '='])
                    })
                    .ok_or_else(|| {
                        format!(
                            "`{written}` names no statistic; `{name}` is a distribution: write a statistic ({}), an operator and {}",
                            crate::kinds::one_of(&names),
                            stats[0].1.forms().replacen("e.g. \"", "e.g. \"p95 ", 1)
                        )
                    })?;
                Ok((metric, parse_condition(metric, rest)?))
            }
        }
    }

    fn source(self) -> Option<ThresholdSource> {
        match self {
            Key::Metric(_, source) => source,
            Key::Distribution(..) => None,
        }
    }

    /// One threshold of this key: its condition, and whether it may abort the run.
    fn threshold(self, text: &str, abort: Option<AbortOnFail>) -> Result<Threshold, String> {
        let (metric, condition) = self.condition(text)?;
        let source = self.source();
        if abort.is_some() && !metric.live(source) {
            let key = match source {
                Some(source) => format!("{source}.{metric}"),
                None => metric.to_string(),
            };
            return Err(format!(
                "abort_on_fail is not available for metric `{key}`: it is only known after the run; drop abort_on_fail (the threshold is still judged at the end), or use it on {}",
                ThresholdMetric::LIVE
            ));
        }
        Ok(Threshold {
            metric,
            source,
            condition,
            abort,
        })
    }
}

impl Threshold {
    /// The key as written: `http_share_at_t`, `players.http_share_at_t`.
    pub fn key(&self) -> String {
        match self.source {
            Some(source) => format!("{source}.{}", self.metric),
            None => self.metric.to_string(),
        }
    }

    /// Parses one `key: condition` pair (`ttff: "p95 < 4s"` included); the error says
    /// what is allowed.
    pub fn parse(key: &str, condition: &str) -> Result<Threshold, String> {
        Key::parse(key)?.threshold(condition, None)
    }

    /// The threshold as written (for the manifest, and re-read by the report).
    pub fn text(&self) -> ThresholdText {
        ThresholdText {
            metric: self.key(),
            condition: self.condition.to_string(),
            abort_on_fail: self.abort.is_some(),
            delay_abort_eval: self
                .abort
                .map(|a| humantime::format_duration(a.delay).to_string()),
        }
    }
}

/// A threshold as text, as the manifest keeps it: `{"metric": "players.http_share_at_t",
/// "condition": "< 40%"}`, and `"abort_on_fail": true, "delay_abort_eval": "30s"` when it
/// may end the run early.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThresholdText {
    pub metric: String,
    pub condition: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub abort_on_fail: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_abort_eval: Option<String>,
}

impl ThresholdText {
    /// A threshold judged after the run only.
    pub fn new(metric: impl Into<String>, condition: impl Into<String>) -> Self {
        ThresholdText {
            metric: metric.into(),
            condition: condition.into(),
            abort_on_fail: false,
            delay_abort_eval: None,
        }
    }

    pub fn parse(&self) -> Result<Threshold, String> {
        let abort = match (self.abort_on_fail, &self.delay_abort_eval) {
            (false, _) => None,
            (true, delay) => Some(AbortOnFail {
                delay: match delay {
                    Some(d) => parse_delay(d)?,
                    None => std::time::Duration::ZERO,
                },
            }),
        };
        Key::parse(&self.metric)?.threshold(&self.condition, abort)
    }
}

/// `delay_abort_eval`: a duration such as `30s` or `2m`.
fn parse_delay(text: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(text.trim()).map_err(|e| {
        format!("delay_abort_eval `{text}`: {e}; write a duration such as \"30s\" or \"2m\"")
    })
}

/// Thresholds given on the command line (`report --thresholds`, `compare --thresholds`):
/// a YAML file in the scenario's `thresholds:` syntax (a scenario with a `thresholds:` key,
/// or that mapping alone), or inline conditions `METRIC OP NUMBER[UNIT]` separated by
/// commas (`ttff_p95<15s,p2p_savings_at_t>=60%`). `abort_on_fail` means nothing after the
/// run and is ignored.
pub fn parse_cli(arg: &str) -> Result<Vec<ThresholdText>, String> {
    let path = std::path::Path::new(arg);
    if path.is_file() {
        return parse_file(path);
    }
    let looks_like_file = arg.ends_with(".yaml") || arg.ends_with(".yml") || arg.contains('/');
    if looks_like_file && !arg.contains(['<', '>', '=']) {
        return Err(format!(
            "--thresholds {arg}: no such file; give a YAML file with a `thresholds:` mapping, or conditions such as \"ttff_p95<15s,p2p_savings_at_t>=60%\""
        ));
    }
    let mut out = Vec::new();
    for part in arg.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let at = part.find(['<', '>', '=']).ok_or_else(|| {
            format!(
                "--thresholds `{part}` has no comparison; write METRIC OP NUMBER[UNIT], e.g. \"ttff_p95<15s\" or \"p2p_savings_at_t>=60%\" (several separated by commas), or name a YAML file"
            )
        })?;
        let (key, condition) = part.split_at(at);
        let key = key.trim();
        let (key, condition) = match key.split_once(char::is_whitespace) {
            // `ttff p95<4s`: a distribution's statistic after its name.
            Some((name, stat)) => (name.to_string(), format!("{} {condition}", stat.trim())),
            None => (key.to_string(), condition.to_string()),
        };
        let t = Threshold::parse(&key, &condition).map_err(|e| format!("--thresholds: {e}"))?;
        out.push(t.text());
    }
    if out.is_empty() {
        return Err(
            "--thresholds is empty; give conditions such as \"ttff_p95<15s\" or a YAML file".into(),
        );
    }
    Ok(out)
}

/// A thresholds file: a scenario (its `thresholds:`) or the mapping alone; errors name
/// the file and line.
fn parse_file(path: &std::path::Path) -> Result<Vec<ThresholdText>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--thresholds {}: cannot read it: {e}", path.display()))?;
    #[derive(Deserialize)]
    struct Wrapped {
        thresholds: ThresholdsSpec,
    }
    let at = |e: yaml_serde::Error| {
        let message = e.to_string();
        // A refused key is marked at the entry before it: find the key's own line.
        let refused_key = message
            .split_once(": `")
            .map(|(_, rest)| rest)
            .or_else(|| message.strip_prefix('`'))
            .and_then(|rest| rest.split('`').next())
            .and_then(|key| {
                text.lines().position(|l| {
                    l.trim_start()
                        .strip_prefix(key)
                        .is_some_and(|r| r.starts_with(':'))
                })
            });
        let line = refused_key
            .map(|i| i + 1)
            .or_else(|| e.location().map(|l| l.line()))
            .map(|l| format!(":{l}"))
            .unwrap_or_default();
        format!(
            "{}{line}: {e}; the file holds the scenario's `thresholds:` syntax, e.g. `thresholds:` then `  ttff_p95: \"< 15s\"`",
            path.display()
        )
    };
    let value: yaml_serde::Value = yaml_serde::from_str(&text).map_err(at)?;
    let has_key = value
        .as_mapping()
        .is_some_and(|m| m.contains_key("thresholds"));
    let spec = if has_key {
        yaml_serde::from_str::<Wrapped>(&text)
            .map(|w| w.thresholds)
            .map_err(at)?
    } else {
        yaml_serde::from_str::<ThresholdsSpec>(&text).map_err(at)?
    };
    if spec.0.is_empty() {
        return Err(format!(
            "{}: no threshold in it; write e.g. `ttff_p95: \"< 15s\"`",
            path.display()
        ));
    }
    Ok(spec.0.iter().map(Threshold::text).collect())
}

fn parse_key(key: &str) -> Result<(ThresholdMetric, Option<ThresholdSource>), String> {
    let (source, name) = match key.split_once('.') {
        Some((source, name)) => (Some(source), name),
        None => (None, key),
    };
    let metric: ThresholdMetric = name.parse().map_err(|_| {
        format!(
            "`{key}` is not a metric; use {} (bandwidth metrics may name their source, e.g. `players.http_share_at_t`), or `ttff` with a statistic in each condition, e.g. `ttff: [\"p95 < 4s\", \"p99 < 8s\"]`",
            crate::kinds::one_of(ThresholdMetric::NAMES)
        )
    })?;
    let Some(source) = source else {
        return Ok((metric, None));
    };
    let allowed = metric.sources();
    let source: ThresholdSource = source
        .parse()
        .ok()
        .filter(|s| allowed.contains(s))
        .ok_or_else(|| {
            if allowed.is_empty() {
                format!("`{metric}` has one source; write it without `{source}.`")
            } else {
                let names: Vec<&str> = allowed.iter().map(|s| s.as_str()).collect();
                format!(
                    "`{source}` is not a source of `{metric}`; use {} before it, or none for the report's own source",
                    crate::kinds::one_of(&names)
                )
            }
        })?;
    Ok((metric, Some(source)))
}

fn parse_condition(metric: ThresholdMetric, text: &str) -> Result<Condition, String> {
    let written = text.trim();
    let kind = metric.kind();
    let wrong = |why: &str| {
        format!(
            "`{written}` {why}; write an operator (<, <=, >, >=, ==) and {} (quote it: a YAML value cannot start with `>`)",
            metric.forms()
        )
    };
    if kind == MetricKind::Verdict {
        return if written == "finding" {
            Ok(Condition::Finding)
        } else {
            Err(format!(
                "`{written}` is not allowed; `headroom` takes {}",
                metric.forms()
            ))
        };
    }
    let op = ["<=", ">=", "==", "<", ">"]
        .iter()
        .find(|op| written.starts_with(**op))
        .ok_or_else(|| wrong("has no comparison"))?;
    let rest = written[op.len()..].trim_start();
    let number_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, unit_text) = rest.split_at(number_end);
    if rest.starts_with('-') {
        return Err(wrong("is negative"));
    }
    let bound: f64 = number
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite())
        .ok_or_else(|| wrong("has no number after its operator"))?;
    let unit = match (kind, unit_text.trim()) {
        (MetricKind::Time, "s") => ThresholdUnit::Seconds,
        (MetricKind::Time, "ms") => ThresholdUnit::Millis,
        (MetricKind::Share | MetricKind::Viewers, "%") => ThresholdUnit::Percent,
        (MetricKind::Rate | MetricKind::Number | MetricKind::Viewers, "") => ThresholdUnit::Plain,
        (_, "") => return Err(wrong("has no unit")),
        (_, other) => {
            return Err(wrong(&format!(
                "has the unit `{other}`, which `{metric}` does not take"
            )))
        }
    };
    if unit == ThresholdUnit::Percent && bound > 100.0 {
        return Err(wrong("is above 100%"));
    }
    if kind == MetricKind::Viewers && unit == ThresholdUnit::Plain && bound.fract() != 0.0 {
        return Err(wrong("is not a whole number of viewers"));
    }
    Ok(Condition::Compare {
        op: op.parse().expect("one of the operators"),
        bound,
        unit,
    })
}

/// `thresholds:` as written: a mapping of metric to condition, in the file's order, each
/// checked as it is read (so an error carries the line and the metric's path).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThresholdsSpec(pub Vec<Threshold>);

impl Serialize for ThresholdsSpec {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for t in &self.0 {
            map.serialize_entry(&t.key(), &t.condition.to_string())?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for ThresholdsSpec {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MapVisitor;
        impl<'de> serde::de::Visitor<'de> for MapVisitor {
            type Value = ThresholdsSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a mapping of metric to condition, e.g. `ttff_p95: \"< 15s\"`")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut out: Vec<Threshold> = Vec::new();
                let mut keys: Vec<String> = Vec::new();
                while let Some(key) = map.next_key::<ThresholdKey>()? {
                    if keys.contains(&key.text) {
                        return Err(serde::de::Error::custom(format!(
                            "`{}` is given twice; give its conditions as one list: `{}: [\"FIRST\", \"SECOND\"]`",
                            key.text, key.text
                        )));
                    }
                    out.extend(map.next_value_seed(ConditionsSeed(key.key))?);
                    keys.push(key.text);
                }
                Ok(ThresholdsSpec(out))
            }
        }
        deserializer.deserialize_map(MapVisitor)
    }
}

/// A metric key, checked as it is read.
struct ThresholdKey {
    key: Key,
    text: String,
}

impl<'de> Deserialize<'de> for ThresholdKey {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let key = Key::parse(&text).map_err(serde::de::Error::custom)?;
        Ok(ThresholdKey { key, text })
    }
}

/// The conditions of one key: a condition, a list of them, or one entry with
/// `abort_on_fail`; each checked as it is read.
struct ConditionsSeed(Key);

/// One condition: a string, or a mapping `{condition, abort_on_fail, delay_abort_eval}`.
struct ConditionSeed(Key);

/// How a condition of `key` is written, for error messages.
fn forms(key: Key) -> String {
    match key {
        Key::Metric(metric, _) => metric.forms().to_string(),
        Key::Distribution(_, stats) => format!(
            "a statistic (p50, p90, p95, p99, max or avg), an operator and {}",
            stats[0].1.forms().replacen("e.g. \"", "e.g. \"p95 ", 1)
        ),
    }
}

fn not_a_condition(key: Key, v: impl std::fmt::Display) -> String {
    format!(
        "`{v}` has no comparison; write an operator (<, <=, >, >=, ==) and {}",
        forms(key)
    )
}

impl<'de> serde::de::DeserializeSeed<'de> for ConditionsSeed {
    type Value = Vec<Threshold>;
    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Vec<Threshold>, D::Error> {
        struct ConditionsVisitor(Key);
        impl<'de> serde::de::Visitor<'de> for ConditionsVisitor {
            type Value = Vec<Threshold>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(
                    f,
                    "a condition in quotes ({}), or a list of them",
                    forms(self.0)
                )
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                self.0
                    .threshold(v, None)
                    .map(|t| vec![t])
                    .map_err(E::custom)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(t) = seq.next_element_seed(ConditionSeed(self.0))? {
                    out.push(t);
                }
                if out.is_empty() {
                    return Err(serde::de::Error::custom(format!(
                        "the list is empty; give at least one condition: {}",
                        forms(self.0)
                    )));
                }
                Ok(out)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Self::Value, A::Error> {
                entry(self.0, map).map(|t| vec![t])
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Err(E::custom(not_a_condition(self.0, v)))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Err(E::custom(not_a_condition(self.0, v)))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
                Err(E::custom(not_a_condition(self.0, v)))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Err(E::custom(not_a_condition(self.0, v)))
            }
        }
        deserializer.deserialize_any(ConditionsVisitor(self.0))
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for ConditionSeed {
    type Value = Threshold;
    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Threshold, D::Error> {
        struct ConditionVisitor(Key);
        impl<'de> serde::de::Visitor<'de> for ConditionVisitor {
            type Value = Threshold;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(
                    f,
                    "a condition in quotes ({}), or a mapping with `condition` and `abort_on_fail`",
                    forms(self.0)
                )
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Threshold, E> {
                self.0.threshold(v, None).map_err(E::custom)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Threshold, A::Error> {
                entry(self.0, map)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Threshold, E> {
                Err(E::custom(not_a_condition(self.0, v)))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Threshold, E> {
                Err(E::custom(not_a_condition(self.0, v)))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Threshold, E> {
                Err(E::custom(not_a_condition(self.0, v)))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Threshold, E> {
                Err(E::custom(not_a_condition(self.0, v)))
            }
        }
        deserializer.deserialize_any(ConditionVisitor(self.0))
    }
}

/// `{condition: "< 20%", abort_on_fail: true, delay_abort_eval: 30s}` (k6's `threshold`,
/// `abortOnFail` and `delayAbortEval` are accepted under their k6 names too).
fn entry<'de, A: serde::de::MapAccess<'de>>(key: Key, mut map: A) -> Result<Threshold, A::Error> {
    use serde::de::Error;
    const FIELDS: &[&str] = &["condition", "abort_on_fail", "delay_abort_eval"];
    let mut condition: Option<String> = None;
    let mut abort_on_fail = false;
    let mut delay: Option<String> = None;
    while let Some(field) = map.next_key::<String>()? {
        match field.as_str() {
            "condition" | "threshold" => condition = Some(map.next_value()?),
            "abort_on_fail" | "abortOnFail" => {
                abort_on_fail = map.next_value().map_err(|_: A::Error| {
                    A::Error::custom("abort_on_fail takes `true` or `false`")
                })?
            }
            "delay_abort_eval" | "delayAbortEval" => delay = Some(map.next_value()?),
            other => {
                return Err(A::Error::custom(format!(
                    "`{other}` is not a field of a threshold; use {}",
                    crate::kinds::one_of(FIELDS)
                )))
            }
        }
    }
    let condition = condition.ok_or_else(|| {
        A::Error::custom(format!(
            "the entry has no `condition`; write e.g. `condition: \"< 20%\"` ({})",
            forms(key)
        ))
    })?;
    if delay.is_some() && !abort_on_fail {
        return Err(A::Error::custom(
            "delay_abort_eval without abort_on_fail: true has no effect; add `abort_on_fail: true` or drop it",
        ));
    }
    let abort = if abort_on_fail {
        Some(AbortOnFail {
            delay: match &delay {
                Some(d) => parse_delay(d).map_err(A::Error::custom)?,
                None => std::time::Duration::ZERO,
            },
        })
    } else {
        None
    };
    key.threshold(&condition, abort).map_err(A::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(metric: &str, text: &str) -> Result<String, String> {
        Threshold::parse(metric, text).map(|t| format!("{} {}", t.key(), t.condition))
    }

    #[test]
    fn conditions_are_read_in_the_units_of_their_metric() {
        assert_eq!(cond("ttff_p95", "< 15s").unwrap(), "ttff_p95 < 15s");
        assert_eq!(cond("ttff_p95", "<=800ms").unwrap(), "ttff_p95 <= 800ms");
        assert_eq!(
            cond("http_share_at_t", " < 40% ").unwrap(),
            "http_share_at_t < 40%"
        );
        assert_eq!(
            cond("players.p2p_savings_at_t", ">= 60%").unwrap(),
            "players.p2p_savings_at_t >= 60%"
        );
        assert_eq!(
            cond("stalls_per_viewer_minute", "< 0.5").unwrap(),
            "stalls_per_viewer_minute < 0.5"
        );
        assert_eq!(
            cond("failed_viewers", "<= 2").unwrap(),
            "failed_viewers <= 2"
        );
        assert_eq!(
            cond("failed_viewers", "< 5%").unwrap(),
            "failed_viewers < 5%"
        );
        assert_eq!(
            cond("http_peak_mbps", "== 90").unwrap(),
            "http_peak_mbps == 90"
        );
        assert_eq!(cond("headroom", "finding").unwrap(), "headroom finding");
    }

    #[test]
    fn wrong_units_operators_and_names_say_what_is_allowed() {
        let err = cond("ttff_p95", "< 15").unwrap_err();
        assert!(
            err.contains("has no unit") && err.contains("\"< 15s\""),
            "{err}"
        );
        let err = cond("http_share_at_t", "< 0.4").unwrap_err();
        assert!(err.contains("a share in %"), "{err}");
        let err = cond("http_share_at_t", "40%").unwrap_err();
        assert!(err.contains("has no comparison"), "{err}");
        let err = cond("http_share_at_t", "< 140%").unwrap_err();
        assert!(err.contains("above 100%"), "{err}");
        let err = cond("stalls_per_viewer_minute", "< 1s").unwrap_err();
        assert!(err.contains("unit `s`"), "{err}");
        let err = cond("failed_viewers", "< 2.5").unwrap_err();
        assert!(err.contains("whole number"), "{err}");
        let err = cond("ttff_p95", "< -1s").unwrap_err();
        assert!(err.contains("negative"), "{err}");
        let err = cond("headroom", "ok").unwrap_err();
        assert!(err.contains("`finding`"), "{err}");
        let err = cond("ttff_p42", "< 1s").unwrap_err();
        assert!(
            err.contains("`ttff_p42` is not a metric") && err.contains("`ttff_p95`"),
            "{err}"
        );
        let err = cond("players.ttff_p95", "< 1s").unwrap_err();
        assert!(err.contains("has one source"), "{err}");
        let err = cond("with_headroom.http_peak_mbps", "< 1").unwrap_err();
        assert!(
            err.contains("`exporter` or `players`") || err.contains("`exporter`, `players`"),
            "{err}"
        );
    }

    #[test]
    fn conditions_compare_in_their_own_unit() {
        let c = Threshold::parse("ttff_p95", "< 15s").unwrap().condition;
        assert!(c.holds(14.9) && !c.holds(15.0));
        let c = Threshold::parse("p2p_savings_at_t", ">= 60%")
            .unwrap()
            .condition;
        assert!(c.holds(60.0) && !c.holds(59.9));
        assert!(!Condition::Finding.holds(1.0));
    }

    #[test]
    fn the_text_form_round_trips() {
        let t = Threshold::parse("with_headroom.p2p_savings_at_t", ">= 60.5%").unwrap();
        let text = t.text();
        assert_eq!(text.metric, "with_headroom.p2p_savings_at_t");
        assert_eq!(text.condition, ">= 60.5%");
        assert_eq!(text.parse().unwrap(), t);
    }

    fn spec(yaml: &str) -> Result<Vec<String>, String> {
        yaml_serde::from_str::<ThresholdsSpec>(yaml)
            .map(|s| {
                s.0.iter()
                    .map(|t| {
                        format!(
                            "{} {}{}",
                            t.key(),
                            t.condition,
                            t.abort
                                .map(|a| format!(" abort after {:?}", a.delay))
                                .unwrap_or_default()
                        )
                    })
                    .collect()
            })
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_metric_takes_several_conditions_and_ttff_names_its_statistics() {
        let got = spec(
            "ttff: [\"p95 < 4s\", \"p99<8000ms\", \"max < 20s\", \"avg <= 3s\", \"p50 < 2s\", \"p90 < 3s\"]\nhttp_share_at_t: [\"< 40%\", \"> 1%\"]\nttff_p95: \"< 15s\"\n",
        )
        .unwrap();
        assert_eq!(
            got,
            [
                "ttff_p95 < 4s",
                "ttff_p99 < 8000ms",
                "ttff_max < 20s",
                "ttff_avg <= 3s",
                "ttff_p50 < 2s",
                "ttff_p90 < 3s",
                "http_share_at_t < 40%",
                "http_share_at_t > 1%",
                "ttff_p95 < 15s",
            ]
        );
        // The one-condition form of earlier versions is unchanged.
        assert_eq!(spec("ttff_p95: \"< 15s\"\n").unwrap(), ["ttff_p95 < 15s"]);
        assert_eq!(
            cond("ttff", "p99 < 8s").unwrap(),
            "ttff_p99 < 8s",
            "a distribution's statistic picks the metric"
        );
        assert_eq!(
            cond("viewer_stalled_share", "p95 < 5%").unwrap(),
            "viewer_stalled_share_p95 < 5%"
        );
        let err = cond("viewer_stalled_share", "p95 < 0.05").unwrap_err();
        assert!(err.contains("a share in %"), "{err}");
        let err = spec("ttff: \"< 4s\"\n").unwrap_err();
        assert!(
            err.contains("names no statistic") && err.contains("`p99`"),
            "{err}"
        );
        let err = spec("ttff: [\"p95 < 4\"]\n").unwrap_err();
        assert!(err.contains("has no unit"), "{err}");
        let err = spec("ttff_p95: []\n").unwrap_err();
        assert!(err.contains("the list is empty"), "{err}");
        let err = spec("ttff_p95: \"< 1s\"\nttff_p95: \"< 2s\"\n").unwrap_err();
        assert!(
            err.contains("given twice") && err.contains("one list"),
            "{err}"
        );
    }

    #[test]
    fn abort_on_fail_takes_a_delay_and_only_metrics_known_while_the_run_goes() {
        let got = spec(
            "failed_viewers:\n  - condition: \"< 20%\"\n    abort_on_fail: true\n    delay_abort_eval: 30s\n  - \"<= 5\"\nplayers.p2p_savings_at_t: {threshold: \">= 10%\", abortOnFail: true}\n",
        )
        .unwrap();
        assert_eq!(
            got,
            [
                "failed_viewers < 20% abort after 30s",
                "failed_viewers <= 5",
                "players.p2p_savings_at_t >= 10% abort after 0ns",
            ]
        );
        let err =
            spec("ttff:\n  - condition: \"p95 < 4s\"\n    abort_on_fail: true\n").unwrap_err();
        assert!(
            err.contains("abort_on_fail is not available for metric `ttff_p95`: it is only known after the run"),
            "{err}"
        );
        let err = spec("exporter.http_share_at_t: {condition: \"< 40%\", abort_on_fail: true}\n")
            .unwrap_err();
        assert!(err.contains("`exporter.http_share_at_t`"), "{err}");
        let err =
            spec("failed_viewers: {condition: \"< 2\", delay_abort_eval: 10s}\n").unwrap_err();
        assert!(err.contains("without abort_on_fail"), "{err}");
        let err = spec(
            "failed_viewers: {condition: \"< 2\", abort_on_fail: true, delay_abort_eval: soon}\n",
        )
        .unwrap_err();
        assert!(err.contains("delay_abort_eval `soon`"), "{err}");
        let err = spec("failed_viewers: {cond: \"< 2\"}\n").unwrap_err();
        assert!(err.contains("`cond` is not a field"), "{err}");
        // The manifest keeps the flag and the delay, and reads them back.
        let t = Threshold {
            abort: Some(AbortOnFail {
                delay: std::time::Duration::from_secs(30),
            }),
            ..Threshold::parse("failed_viewers", "< 20%").unwrap()
        };
        let text = t.text();
        assert!(text.abort_on_fail);
        assert_eq!(text.delay_abort_eval.as_deref(), Some("30s"));
        assert_eq!(text.parse().unwrap(), t);
    }

    #[test]
    fn command_line_thresholds_are_inline_conditions_or_a_file() {
        let got = parse_cli("ttff_p95<15s, p2p_savings_at_t>=60%,ttff p99<8s").unwrap();
        let keys: Vec<String> = got
            .iter()
            .map(|t| format!("{} {}", t.metric, t.condition))
            .collect();
        assert_eq!(
            keys,
            ["ttff_p95 < 15s", "p2p_savings_at_t >= 60%", "ttff_p99 < 8s"]
        );
        let err = parse_cli("p2p_savings_at_t>=0.5").unwrap_err();
        assert!(err.contains("a share in %"), "{err}");
        let err = parse_cli("p2p_savings_at_t").unwrap_err();
        assert!(err.contains("has no comparison"), "{err}");
        let err = parse_cli("nothere/t.yaml").unwrap_err();
        assert!(err.contains("no such file"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let scenario = dir.path().join("s.yaml");
        std::fs::write(
            &scenario,
            "name: x\nthresholds:\n  ttff: [\"p95 < 4s\"]\n  failed_viewers: \"<= 2\"\n",
        )
        .unwrap();
        assert_eq!(parse_cli(scenario.to_str().unwrap()).unwrap().len(), 2);
        let bare = dir.path().join("t.yaml");
        std::fs::write(&bare, "ttff_p95: \"< 15s\"\nheadroom: finding\n").unwrap();
        assert_eq!(parse_cli(bare.to_str().unwrap()).unwrap().len(), 2);
        std::fs::write(&bare, "ttff_p95: \"< 15s\"\nbogus: \"< 1\"\n").unwrap();
        let err = parse_cli(bare.to_str().unwrap()).unwrap_err();
        assert!(
            err.contains("t.yaml:2") && err.contains("`bogus` is not a metric"),
            "{err}"
        );
    }
}
