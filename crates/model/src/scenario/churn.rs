//! `viewers.churn`: viewers who leave and are replaced, and viewers who join late, instead
//! of everyone watching from the ramp to the end.
//!
//! Each viewer — the first ones and every replacement — watches for a time drawn from the
//! stated distribution, counted from its first frame; then it closes its tab and session
//! cleanly (a `left` event) and, with `replace`, a new viewer with a new index arrives at
//! once in its place (same network class, same P2P setting). A share of the first viewers
//! arrives late: after the ramp, spread evenly up to three quarters of the run. Draws are
//! seeded per viewer index, so the same file and seed give the same schedule.

use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `viewers.churn` as written.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ChurnSpec {
    /// How long each viewer watches.
    pub watch: WatchSpec,
    /// Share of the first viewers that arrive after the ramp, 0 to 0.9 [default: 0].
    #[serde(default)]
    pub late_share: Option<f64>,
    /// A viewer that leaves is replaced by a new one at once [default: true].
    #[serde(default)]
    pub replace: Option<bool>,
    /// Seed of the draws [default: 1].
    #[serde(default)]
    pub seed: Option<u64>,
}

/// `viewers.churn.watch`: one of the two forms.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WatchSpec {
    /// Exponential watch times with this mean, e.g. `90s`.
    #[serde(default)]
    pub mean: Option<String>,
    /// Or a list: each viewer draws one entry by its share.
    #[serde(default)]
    pub durations: Option<Vec<WatchShare>>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WatchShare {
    /// A duration (`30s`, `2m`), or `end`: stays to the end of the run.
    pub watch: String,
    pub share: f64,
}

/// How watch times are drawn.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchTimes {
    Exponential {
        mean: Duration,
    },
    /// (watch time, `None` = to the end; share).
    Listed(Vec<(Option<Duration>, f64)>),
}

/// `viewers.churn`, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct ChurnPlan {
    pub watch: WatchTimes,
    pub late_share: f64,
    pub replace: bool,
    pub seed: u64,
}

/// Shortest watch time drawn: a viewer plays at least this long before it may leave.
pub(crate) const MIN_WATCH: Duration = Duration::from_secs(1);

impl ChurnPlan {
    /// How long viewer `index` watches from its first frame; `None`: to the end.
    pub fn watch_for(&self, index: u32) -> Option<Duration> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(
            self.seed ^ u64::from(index).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        let u: f64 = rng.gen();
        match &self.watch {
            WatchTimes::Exponential { mean } => {
                let draw = -mean.as_secs_f64() * (1.0 - u).ln();
                Some(Duration::from_secs_f64(draw).max(MIN_WATCH))
            }
            WatchTimes::Listed(entries) => {
                let mut cumulative = 0.0;
                for (watch, share) in entries {
                    cumulative += share;
                    if u < cumulative {
                        return *watch;
                    }
                }
                entries.last().and_then(|(w, _)| *w)
            }
        }
    }

    /// One phrase for the run's summary line and the manifest.
    pub fn describe(&self) -> String {
        let watch = match &self.watch {
            WatchTimes::Exponential { mean } => format!(
                "exponential watch times, mean {}",
                humantime::format_duration(*mean)
            ),
            WatchTimes::Listed(entries) => {
                let parts: Vec<String> = entries
                    .iter()
                    .map(|(w, s)| {
                        let w = w.map_or("to the end".to_string(), |w| {
                            humantime::format_duration(w).to_string()
                        });
                        format!("{w} {:.0}%", s * 100.0)
                    })
                    .collect();
                format!("watch times {}", parts.join(", "))
            }
        };
        format!(
            "churn: {watch}, {}{:.0}% of the viewers late (seed {})",
            if self.replace {
                "leavers replaced at once, "
            } else {
                "leavers not replaced, "
            },
            self.late_share * 100.0,
            self.seed
        )
    }
}

/// Validates `viewers.churn`; `scale` stretches durations like the run's clock
/// (`--duration`). Errors: (field, message).
pub fn plan(
    spec: &ChurnSpec,
    scale: impl Fn(&str, &str) -> Result<Duration, (String, String)>,
) -> Result<ChurnPlan, (String, String)> {
    let watch = match (&spec.watch.mean, &spec.watch.durations) {
        (Some(mean), None) => {
            let mean = scale("viewers.churn.watch.mean", mean)?;
            if mean < Duration::from_secs(5) {
                return Err((
                    "viewers.churn.watch.mean".into(),
                    "must be at least 5s (a viewer needs seconds to start)".into(),
                ));
            }
            WatchTimes::Exponential { mean }
        }
        (None, Some(entries)) => {
            if entries.is_empty() {
                return Err((
                    "viewers.churn.watch.durations".into(),
                    "is empty; list at least one {watch, share}".into(),
                ));
            }
            let mut listed = Vec::new();
            for (i, e) in entries.iter().enumerate() {
                let field = format!("viewers.churn.watch.durations[{i}]");
                if !(e.share > 0.0 && e.share <= 1.0) {
                    return Err((
                        format!("{field}.share"),
                        format!("{} is not a share; use a number above 0 and at most 1", e.share),
                    ));
                }
                let watch = if e.watch.trim() == "end" {
                    None
                } else {
                    Some(scale(&format!("{field}.watch"), &e.watch)?.max(MIN_WATCH))
                };
                listed.push((watch, e.share));
            }
            let total: f64 = entries.iter().map(|e| e.share).sum();
            if (total - 1.0).abs() > 0.001 {
                return Err((
                    "viewers.churn.watch.durations".into(),
                    format!("the shares add up to {total:.3}; they must add up to 1"),
                ));
            }
            WatchTimes::Listed(listed)
        }
        _ => {
            return Err((
                "viewers.churn.watch".into(),
                "give exactly one of `mean: 90s` (exponential watch times) or `durations: [{watch: 30s, share: 0.5}, {watch: end, share: 0.5}]`".into(),
            ))
        }
    };
    let late_share = spec.late_share.unwrap_or(0.0);
    if !(0.0..=0.9).contains(&late_share) {
        return Err((
            "viewers.churn.late_share".into(),
            format!("{late_share} is out of range; use a share from 0 to 0.9"),
        ));
    }
    Ok(ChurnPlan {
        watch,
        late_share,
        replace: spec.replace.unwrap_or(true),
        seed: spec.seed.unwrap_or(1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(_: &str, v: &str) -> Result<Duration, (String, String)> {
        humantime::parse_duration(v).map_err(|e| ("x".into(), e.to_string()))
    }

    #[test]
    fn exponential_draws_have_their_mean_and_repeat() {
        let spec: ChurnSpec =
            yaml_serde::from_str("watch: {mean: 60s}\nlate_share: 0.2\n").unwrap();
        let churn = plan(&spec, plain).unwrap();
        let draws: Vec<f64> = (0..4000)
            .map(|i| churn.watch_for(i).unwrap().as_secs_f64())
            .collect();
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        assert!((55.0..65.0).contains(&mean), "mean {mean}");
        assert_eq!(churn.watch_for(7), churn.watch_for(7));
        assert!(churn.describe().contains("mean 1m") && churn.describe().contains("20%"));
    }

    #[test]
    fn listed_watch_times_follow_their_shares() {
        let spec: ChurnSpec = yaml_serde::from_str(
            "watch:\n  durations:\n    - {watch: 30s, share: 0.25}\n    - {watch: end, share: 0.75}\n",
        )
        .unwrap();
        let churn = plan(&spec, plain).unwrap();
        let short = (0..4000)
            .filter(|&i| churn.watch_for(i) == Some(Duration::from_secs(30)))
            .count();
        assert!((800..1200).contains(&short), "{short}");
        assert!((0..100).any(|i| churn.watch_for(i).is_none()));
    }

    #[test]
    fn bad_churn_is_named() {
        let spec: ChurnSpec = yaml_serde::from_str("watch: {}\n").unwrap();
        assert_eq!(plan(&spec, plain).unwrap_err().0, "viewers.churn.watch");
        let spec: ChurnSpec = yaml_serde::from_str("watch: {mean: 2s}\n").unwrap();
        assert_eq!(
            plan(&spec, plain).unwrap_err().0,
            "viewers.churn.watch.mean"
        );
        let spec: ChurnSpec = yaml_serde::from_str("watch: {mean: 60s}\nlate_share: 1\n").unwrap();
        assert_eq!(
            plan(&spec, plain).unwrap_err().0,
            "viewers.churn.late_share"
        );
    }
}
