//! Knee detection with stated rules. A step is DEGRADED when any rule fires; the first
//! degraded step is the knee, and the rules it broke are the first failure mode. Whether
//! the load generator or the target saturated is told apart, so a busy generator is never
//! reported as a weak server (the LiveKit capacity report's trap).

use serde::Serialize;

/// One ladder step's measurements (from its run folder).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepResult {
    pub viewers: u32,
    pub run_dir: String,
    pub started: u32,
    pub failed: u32,
    pub http_mbps: f64,
    pub p2p_mbps: f64,
    pub http_share: Option<f64>,
    /// Target's CPU use in cores over the steady window (local targets).
    pub target_cpu_cores: Option<f64>,
    pub target_rss_bytes: Option<u64>,
    /// Load generator's busy share of all its cores, 0..1, over the steady window.
    pub generator_cpu_busy: f64,
    pub generator_cores: u32,
    pub stalls_per_viewer_minute: f64,
    pub ttff_p95_ms: Option<f64>,
    /// The scenario's thresholds as the step's report judged them (none: the scenario has
    /// none). They do not make a step degraded: the capacity report says how far they held.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<crate::report::thresholds::ThresholdResult>,
}

/// Thresholds of the knee rules; every report states them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KneeRules {
    pub max_stalls_per_viewer_minute: f64,
    pub max_failed_share: f64,
    pub max_ttff_p95_ms: f64,
    /// Share of the target's cores above which the target counts as saturated.
    pub max_target_cpu_share: f64,
    pub target_cores: Option<f64>,
    /// Share of the generator's cores above which the generator counts as saturated.
    pub max_generator_cpu_share: f64,
    /// HTTP egress capacity of the target's link, Mbit/s, and the share that counts as full.
    pub link_mbps: Option<f64>,
    pub max_link_share: f64,
}

impl Default for KneeRules {
    fn default() -> Self {
        Self {
            max_stalls_per_viewer_minute: 0.5,
            max_failed_share: 0.0,
            max_ttff_p95_ms: 15_000.0,
            max_target_cpu_share: 0.8,
            target_cores: None,
            max_generator_cpu_share: 0.85,
            link_mbps: None,
            max_link_share: 0.9,
        }
    }
}

/// A rule that fired on a step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Violation {
    pub rule: &'static str,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepVerdict {
    pub viewers: u32,
    pub degraded: bool,
    pub violations: Vec<Violation>,
    /// The generator was saturated on this step (its figures are not the target's limits).
    pub generator_saturated: bool,
    pub target_saturated: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Knee {
    /// Viewers at the first degraded step.
    pub at_viewers: u32,
    /// Viewers at the last healthy step, if any.
    pub last_ok_viewers: Option<u32>,
    pub failure_mode: Vec<Violation>,
    /// `generator`, `target`, `link`, `both` or `unknown`: what saturated at the knee.
    pub limited_by: &'static str,
}

pub fn judge(step: &StepResult, rules: &KneeRules) -> StepVerdict {
    let mut v = Vec::new();
    if step.stalls_per_viewer_minute > rules.max_stalls_per_viewer_minute {
        v.push(Violation {
            rule: "stalls",
            detail: format!(
                "{:.2} stalls per viewer-minute > {:.2}",
                step.stalls_per_viewer_minute, rules.max_stalls_per_viewer_minute
            ),
        });
    }
    let failed_share = if step.viewers > 0 {
        step.failed as f64 / step.viewers as f64
    } else {
        0.0
    };
    if failed_share > rules.max_failed_share {
        v.push(Violation {
            rule: "failed_viewers",
            detail: format!(
                "{} of {} viewers failed or were lost",
                step.failed, step.viewers
            ),
        });
    }
    // A viewer still waiting for its first frame when the step ended counts too: its time
    // to first frame is longer than anything the p95 saw.
    let never_played = step.viewers.saturating_sub(step.started);
    if step.viewers > 0 && never_played as f64 / step.viewers as f64 > rules.max_failed_share {
        v.push(Violation {
            rule: "never_played",
            detail: format!(
                "{never_played} of {} viewers never played within the step",
                step.viewers
            ),
        });
    }
    if let Some(ttff) = step.ttff_p95_ms {
        if ttff > rules.max_ttff_p95_ms {
            v.push(Violation {
                rule: "slow_start",
                detail: format!(
                    "time to first frame p95 {:.1} s > {:.1} s",
                    ttff / 1000.0,
                    rules.max_ttff_p95_ms / 1000.0
                ),
            });
        }
    }
    let generator_saturated = step.generator_cpu_busy > rules.max_generator_cpu_share;
    if generator_saturated {
        v.push(Violation {
            rule: "generator_cpu",
            detail: format!(
                "load generator CPU {:.0}% of {} cores > {:.0}%",
                step.generator_cpu_busy * 100.0,
                step.generator_cores,
                rules.max_generator_cpu_share * 100.0
            ),
        });
    }
    let target_saturated = match (step.target_cpu_cores, rules.target_cores) {
        (Some(used), Some(cores)) if cores > 0.0 => used / cores > rules.max_target_cpu_share,
        _ => false,
    };
    if target_saturated {
        v.push(Violation {
            rule: "target_cpu",
            detail: format!(
                "target CPU {:.2} of {:.0} cores > {:.0}%",
                step.target_cpu_cores.unwrap_or(0.0),
                rules.target_cores.unwrap_or(0.0),
                rules.max_target_cpu_share * 100.0
            ),
        });
    }
    if let Some(link) = rules.link_mbps {
        if step.http_mbps > link * rules.max_link_share {
            v.push(Violation {
                rule: "link",
                detail: format!(
                    "HTTP egress {:.1} Mbit/s > {:.0}% of the {link:.0} Mbit/s link",
                    step.http_mbps,
                    rules.max_link_share * 100.0
                ),
            });
        }
    }
    StepVerdict {
        viewers: step.viewers,
        degraded: !v.is_empty(),
        violations: v,
        generator_saturated,
        target_saturated,
    }
}

/// The first degraded step, in increasing viewer order.
pub(crate) fn find_knee(verdicts: &[StepVerdict]) -> Option<Knee> {
    let index = verdicts.iter().position(|v| v.degraded)?;
    let at = &verdicts[index];
    let link = at.violations.iter().any(|v| v.rule == "link");
    let limited_by = match (at.generator_saturated, at.target_saturated, link) {
        (true, true, _) => "both",
        (true, false, _) => "generator",
        (false, true, _) => "target",
        (false, false, true) => "link",
        _ => "unknown",
    };
    Some(Knee {
        at_viewers: at.viewers,
        last_ok_viewers: index.checked_sub(1).map(|i| verdicts[i].viewers),
        failure_mode: at.violations.clone(),
        limited_by,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn step(viewers: u32, gen: f64, stalls: f64) -> StepResult {
        StepResult {
            viewers,
            run_dir: format!("step-{viewers}"),
            started: viewers,
            failed: 0,
            http_mbps: viewers as f64 * 0.3,
            p2p_mbps: viewers as f64 * 0.4,
            http_share: Some(0.43),
            target_cpu_cores: Some(0.02 * viewers as f64),
            target_rss_bytes: Some(50_000_000),
            generator_cpu_busy: gen,
            generator_cores: 2,
            stalls_per_viewer_minute: stalls,
            ttff_p95_ms: Some(2000.0),
            thresholds: Vec::new(),
        }
    }

    #[test]
    fn generator_knee_is_attributed_to_the_generator() {
        let rules = KneeRules {
            target_cores: Some(2.0),
            ..Default::default()
        };
        let steps = [
            step(2, 0.2, 0.0),
            step(4, 0.45, 0.0),
            step(6, 0.7, 0.1),
            step(8, 0.93, 2.5),
        ];
        let verdicts: Vec<_> = steps.iter().map(|s| judge(s, &rules)).collect();
        let knee = find_knee(&verdicts).unwrap();
        assert_eq!(knee.at_viewers, 8);
        assert_eq!(knee.last_ok_viewers, Some(6));
        assert_eq!(knee.limited_by, "generator");
        let rules: Vec<_> = knee.failure_mode.iter().map(|v| v.rule).collect();
        assert_eq!(rules, ["stalls", "generator_cpu"]);
    }

    #[test]
    fn target_and_link_rules() {
        let rules = KneeRules {
            target_cores: Some(0.1),
            link_mbps: Some(2.0),
            ..Default::default()
        };
        let v = judge(&step(6, 0.3, 0.0), &rules);
        assert!(v.target_saturated);
        let names: Vec<_> = v.violations.iter().map(|x| x.rule).collect();
        assert_eq!(names, ["target_cpu"]);
        let v = judge(&step(8, 0.3, 0.0), &rules);
        let knee = find_knee(&[v]).unwrap();
        assert_eq!(knee.limited_by, "target");
        assert!(knee.failure_mode.iter().any(|x| x.rule == "link"));
        assert_eq!(knee.last_ok_viewers, None);
    }

    #[test]
    fn no_knee_when_all_healthy() {
        let rules = KneeRules::default();
        let verdicts: Vec<_> = [step(2, 0.1, 0.0), step(4, 0.2, 0.0)]
            .iter()
            .map(|s| judge(s, &rules))
            .collect();
        assert!(find_knee(&verdicts).is_none());
    }

    #[test]
    fn failed_viewers_and_slow_starts() {
        let mut s = step(4, 0.1, 0.0);
        s.failed = 1;
        s.ttff_p95_ms = Some(20_000.0);
        let v = judge(&s, &KneeRules::default());
        let names: Vec<_> = v.violations.iter().map(|x| x.rule).collect();
        assert_eq!(names, ["failed_viewers", "slow_start"]);
    }

    #[test]
    fn viewers_that_never_played_degrade_a_step() {
        // 10 asked, 8 played, none reported failed (the step ended before their timeout).
        let mut s = step(10, 0.1, 0.0);
        s.started = 8;
        let v = judge(&s, &KneeRules::default());
        assert!(v.degraded);
        assert_eq!(v.violations[0].rule, "never_played");
        assert_eq!(
            v.violations[0].detail,
            "2 of 10 viewers never played within the step"
        );
        // Every viewer played: the rule stays quiet.
        assert!(judge(&step(10, 0.1, 0.0), &KneeRules::default())
            .violations
            .is_empty());
    }
}
