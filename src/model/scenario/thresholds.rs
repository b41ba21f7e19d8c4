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
//! Grammar: a key `[SOURCE.]METRIC` and a condition `OP NUMBER[UNIT]`; `OP` is one of `<`,
//! `<=`, `>`, `>=`, `==`; `NUMBER` a decimal of 0 or more; `UNIT` is what the metric
//! measures in: `s` or `ms` for times, `%` for shares, none for counts, rates (Mbit/s) and
//! plain numbers; viewer counts take a count or a `%` of the viewers. `headroom` takes the
//! word `finding`. `SOURCE` (`exporter`, `players`, `with_headroom`) picks the table a
//! bandwidth metric reads; without it, the report's own source (the exporter when the run
//! had one, else the players). The figures are read from the report (`report::thresholds`).
//!
//! This module owns the grammar and validation; the values come from `report.json`.

use crate::model::kinds::named_enum;
use serde::{Deserialize, Serialize};

named_enum! {
    /// What a threshold is about: one figure of the run's report.
    pub enum ThresholdMetric {
        /// Median time to first frame (`qoe.ttff_median_ms`).
        TtffP50 = "ttff_p50",
        /// 95th percentile of the time to first frame (`qoe.ttff_p95_ms`).
        TtffP95 = "ttff_p95",
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
            TtffP50 | TtffP95 => MetricKind::Time,
            StalledTimeShare | HttpShareAtT | P2pSavingsAtT | P2pUndelivered => MetricKind::Share,
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

/// One validated threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    pub metric: ThresholdMetric,
    /// `None`: the report's own source (bandwidth metrics) or none to choose.
    pub source: Option<ThresholdSource>,
    pub condition: Condition,
}

impl Threshold {
    /// The key as written: `http_share_at_t`, `players.http_share_at_t`.
    pub fn key(&self) -> String {
        match self.source {
            Some(source) => format!("{source}.{}", self.metric),
            None => self.metric.to_string(),
        }
    }

    /// Parses one `key: condition` pair; the error says what is allowed.
    pub fn parse(key: &str, condition: &str) -> Result<Threshold, String> {
        let (metric, source) = parse_key(key)?;
        let condition = parse_condition(metric, condition)?;
        Ok(Threshold {
            metric,
            source,
            condition,
        })
    }

    /// The threshold as written (for the manifest, and re-read by the report).
    pub fn text(&self) -> ThresholdText {
        ThresholdText {
            metric: self.key(),
            condition: self.condition.to_string(),
        }
    }
}

/// A threshold as text, as the manifest keeps it: `{"metric": "players.http_share_at_t",
/// "condition": "< 40%"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThresholdText {
    pub metric: String,
    pub condition: String,
}

impl ThresholdText {
    pub fn parse(&self) -> Result<Threshold, String> {
        Threshold::parse(&self.metric, &self.condition)
    }
}

fn parse_key(key: &str) -> Result<(ThresholdMetric, Option<ThresholdSource>), String> {
    let (source, name) = match key.split_once('.') {
        Some((source, name)) => (Some(source), name),
        None => (None, key),
    };
    let metric: ThresholdMetric = name.parse().map_err(|_| {
        format!(
            "`{key}` is not a metric; use {} (bandwidth metrics may name their source, e.g. `players.http_share_at_t`)",
            crate::model::kinds::one_of(ThresholdMetric::NAMES)
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
                    crate::model::kinds::one_of(&names)
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
                while let Some(key) = map.next_key::<ThresholdKey>()? {
                    let condition = map.next_value_seed(ConditionSeed(key.metric))?;
                    let threshold = Threshold {
                        metric: key.metric,
                        source: key.source,
                        condition,
                    };
                    if out.iter().any(|t| t.key() == threshold.key()) {
                        return Err(serde::de::Error::custom(format!(
                            "`{}` is given twice; keep one condition per metric",
                            threshold.key()
                        )));
                    }
                    out.push(threshold);
                }
                Ok(ThresholdsSpec(out))
            }
        }
        deserializer.deserialize_map(MapVisitor)
    }
}

/// A metric key, checked as it is read.
struct ThresholdKey {
    metric: ThresholdMetric,
    source: Option<ThresholdSource>,
}

impl<'de> Deserialize<'de> for ThresholdKey {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let key = String::deserialize(deserializer)?;
        let (metric, source) = parse_key(&key).map_err(serde::de::Error::custom)?;
        Ok(ThresholdKey { metric, source })
    }
}

/// A condition of one metric, checked as it is read.
struct ConditionSeed(ThresholdMetric);

impl<'de> serde::de::DeserializeSeed<'de> for ConditionSeed {
    type Value = Condition;
    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Condition, D::Error> {
        struct ConditionVisitor(ThresholdMetric);
        impl serde::de::Visitor<'_> for ConditionVisitor {
            type Value = Condition;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "a condition in quotes: {}", self.0.forms())
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Condition, E> {
                parse_condition(self.0, v).map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Condition, E> {
                Err(E::custom(self.number(v)))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Condition, E> {
                Err(E::custom(self.number(v)))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Condition, E> {
                Err(E::custom(self.number(v)))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Condition, E> {
                Err(E::custom(self.number(v)))
            }
        }
        impl ConditionVisitor {
            fn number(&self, v: impl std::fmt::Display) -> String {
                format!(
                    "`{v}` has no comparison; write an operator (<, <=, >, >=, ==) and {}",
                    self.0.forms()
                )
            }
        }
        deserializer.deserialize_any(ConditionVisitor(self.0))
    }
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
        let err = cond("ttff_p99", "< 1s").unwrap_err();
        assert!(
            err.contains("`ttff_p99` is not a metric") && err.contains("`ttff_p95`"),
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
}
