//! Churn: who left, who replaced them, who came late — from the viewers' events only
//! (`left` events, `creating` events that name the viewer they replace, first arrivals
//! after the ramp).

use super::load::RunData;
use crate::model::rawdata::{RunEventKind, ViewerEventKind};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Churn {
    /// The scenario's `viewers.churn`, in words.
    pub description: Option<String>,
    /// The plan's viewers (replacements come on top).
    pub planned_viewers: u32,
    /// Of those, how many arrived after the ramp.
    pub late: u32,
    /// Viewers that left on their own before the end.
    pub left: u32,
    /// Viewers that arrived in place of one that left.
    pub replacements: u32,
    /// Watch time of those that left, from first frame to leaving: mean and median, s.
    pub watched_mean_s: Option<f64>,
    pub watched_median_s: Option<f64>,
    /// Viewers playing at the end of the run.
    pub stayed_to_the_end: u32,
}

/// `None` for runs without churn (no plan for it and no `left` event).
pub(crate) fn analyse(run: &RunData) -> Option<Churn> {
    let plan = &run.manifest.plan;
    let any_left = run
        .viewer_events
        .iter()
        .any(|e| e.event == ViewerEventKind::Left);
    if plan.churn.is_none() && !any_left {
        return None;
    }
    let start = run
        .run_events
        .iter()
        .find(|e| e.event == RunEventKind::TargetReady)
        .map_or(0.0, |e| e.t);
    let mut first_creating: BTreeMap<u32, f64> = BTreeMap::new();
    let mut playing: BTreeMap<u32, f64> = BTreeMap::new();
    let mut watched = Vec::new();
    let mut replacements = BTreeSet::new();
    let mut ended_early = BTreeSet::new();
    let mut stopped = BTreeSet::new();
    for e in &run.viewer_events {
        match e.event {
            ViewerEventKind::Creating => {
                first_creating.entry(e.viewer).or_insert(e.t);
                if e.reason
                    .as_deref()
                    .is_some_and(|r| r.starts_with("replaces viewer"))
                {
                    replacements.insert(e.viewer);
                }
            }
            ViewerEventKind::Playing => {
                playing.entry(e.viewer).or_insert(e.t);
            }
            ViewerEventKind::Left => {
                ended_early.insert(e.viewer);
                if let Some(p) = playing.get(&e.viewer) {
                    watched.push(e.t - p);
                }
            }
            ViewerEventKind::Stopped if playing.contains_key(&e.viewer) => {
                stopped.insert(e.viewer);
            }
            _ => {}
        }
    }
    // A late viewer's first request comes after the ramp (a second of slack for timers).
    let late = first_creating
        .iter()
        .filter(|(v, t)| **v < plan.viewers && **t > start + plan.ramp_s + 1.0)
        .count() as u32;
    watched.sort_by(f64::total_cmp);
    let mean = (!watched.is_empty()).then(|| watched.iter().sum::<f64>() / watched.len() as f64);
    let median = (!watched.is_empty()).then(|| watched[watched.len() / 2]);
    Some(Churn {
        description: plan.churn.clone(),
        planned_viewers: plan.viewers,
        late,
        left: ended_early.len() as u32,
        replacements: replacements.len() as u32,
        watched_mean_s: mean,
        watched_median_s: median,
        stayed_to_the_end: stopped.difference(&ended_early).count() as u32,
    })
}

pub fn lines(c: &Churn) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(d) = &c.description {
        out.push(format!("Scenario: {d}."));
    }
    let secs = |s: Option<f64>| s.map_or("—".to_string(), |s| format!("{s:.0} s"));
    out.push(format!(
        "{} planned viewers, {} of them arriving after the ramp; {} viewers left before the end (watched {} on average, median {}), {} replacements arrived; {} viewers were still playing at the end.",
        c.planned_viewers,
        c.late,
        c.left,
        secs(c.watched_mean_s),
        secs(c.watched_median_s),
        c.replacements,
        c.stayed_to_the_end
    ));
    out.push("Every viewer — replacements included — is a row of viewers.csv with its own index; a viewer that left is counted as started, not failed, and its watch time ends when it left. A newcomer starts with an empty cache and no peers: churn costs P2P share, as on the internet.".to_string());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_say_who_left_and_who_came() {
        let c = Churn {
            description: Some("churn: exponential watch times, mean 1m".into()),
            planned_viewers: 6,
            late: 1,
            left: 3,
            replacements: 3,
            watched_mean_s: Some(42.0),
            watched_median_s: Some(40.0),
            stayed_to_the_end: 6,
        };
        let text = lines(&c).join("\n");
        assert!(text.contains("3 viewers left before the end (watched 42 s on average, median 40 s), 3 replacements arrived"), "{text}");
    }
}
