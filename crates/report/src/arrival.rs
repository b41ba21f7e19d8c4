//! The arrivals a run asked for against those it got. Every viewer's first event carries
//! the time the plan asked for it (`due_s`: its place on the ramp, or the moment a governed
//! ramp released it); its first `creating`, `session_created` and `playing` events say when
//! the fleet was asked for its session, when the session existed and when it played. A
//! fleet that cannot create sessions as fast as the ramp asks (a Selenium hub's queue, a
//! slow node) shows as curves that fall behind the one asked for: here is by how much, from
//! when, and the rate it achieved per minute.

use super::stats::percentile;
use super::summary::{Arrival, ArrivalDelay, ArrivalMilestone, ArrivalMinute, Series};
use crate::model::rawdata::{ViewerEvent, ViewerEventKind};
use std::collections::BTreeMap;

/// A session that came later than this after its viewer's arrival time means the fleet
/// was behind the ramp (a Chromium session through a Grid takes 2–5 s on its own).
pub(crate) const LAG_TOLERANCE_S: f64 = 10.0;

/// Series names (also `timeseries.csv` columns): viewers asked for, with a session, and
/// playing a first frame, cumulative.
pub(crate) mod names {
    pub(crate) const ASKED: &str = "arrivals_asked";
    pub(crate) const SESSIONS: &str = "arrivals_sessions";
    pub(crate) const FIRST_FRAMES: &str = "arrivals_first_frames";
}

/// One viewer's arrival: when it was due and when each step first happened.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct ViewerArrival {
    pub due_s: Option<f64>,
    pub creating_s: Option<f64>,
    pub session_s: Option<f64>,
    pub playing_s: Option<f64>,
}

/// Each viewer's arrival from its events (first occurrence of each step).
pub fn per_viewer(events: &[ViewerEvent]) -> BTreeMap<u32, ViewerArrival> {
    let mut out: BTreeMap<u32, ViewerArrival> = BTreeMap::new();
    for e in events {
        let a = out.entry(e.viewer).or_default();
        if a.due_s.is_none() {
            a.due_s = e.due_s;
        }
        let step = match e.event {
            ViewerEventKind::Creating => &mut a.creating_s,
            ViewerEventKind::SessionCreated => &mut a.session_s,
            ViewerEventKind::Playing => &mut a.playing_s,
            _ => continue,
        };
        step.get_or_insert(e.t);
    }
    out
}

/// What the run asked for and got, and the three cumulative curves on the bin grid up to
/// `end_s`. `None` when the raw data has no arrival times (runs recorded before they were).
pub(crate) fn analyse(
    arrivals: &BTreeMap<u32, ViewerArrival>,
    end_s: f64,
    bin_s: f64,
) -> Option<(Arrival, Vec<Series>)> {
    // Only viewers the plan asked for (with an arrival time) take part.
    let asked: Vec<&ViewerArrival> = arrivals.values().filter(|a| a.due_s.is_some()).collect();
    if asked.is_empty() {
        return None;
    }
    let sorted = |f: fn(&ViewerArrival) -> Option<f64>| -> Vec<f64> {
        let mut v: Vec<f64> = asked.iter().filter_map(|a| f(a)).collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let due = sorted(|a| a.due_s);
    let creating = sorted(|a| a.creating_s);
    let sessions = sorted(|a| a.session_s);
    let frames = sorted(|a| a.playing_s);
    let end_s = end_s.max(due.last().copied().unwrap_or(0.0));

    let lag = horizontal_lag(&due, &sessions, end_s);
    let (max_behind, max_behind_at_s) = max_behind(&due, &sessions);
    let delays: Vec<f64> = asked
        .iter()
        .filter_map(|a| Some((a.session_s? - a.due_s?).max(0.0)))
        .collect();
    let span = |v: &[f64], from: f64| -> Option<f64> {
        let to = *v.last()?;
        (to - from > 0.0).then_some(to - from)
    };
    let asked_span = span(&due, due[0]);
    let mut arrival = Arrival {
        headline: String::new(),
        asked: due.len() as u32,
        requested_from_fleet: creating.len() as u32,
        sessions: sessions.len() as u32,
        first_frames: frames.len() as u32,
        asked_from_s: due[0],
        asked_to_s: *due.last().expect("not empty"),
        asked_per_min: asked_span.map(|s| (due.len() - 1) as f64 / s * 60.0),
        sessions_per_min: span(&sessions, due[0]).map(|s| sessions.len() as f64 / s * 60.0),
        milestones: [0.5, 1.0]
            .into_iter()
            .map(|share| milestone(share, &due, &sessions, &frames))
            .collect(),
        lag_tolerance_s: LAG_TOLERANCE_S,
        behind_from_s: lag.behind_from_s,
        max_lag_s: lag.max_s,
        still_behind_at_end: sessions.len() < due.len(),
        max_behind,
        max_behind_at_s,
        session_delay: (!delays.is_empty()).then(|| ArrivalDelay {
            median_s: percentile(&delays, 50.0).unwrap_or(0.0),
            p95_s: percentile(&delays, 95.0).unwrap_or(0.0),
            max_s: delays.iter().copied().fold(0.0, f64::max),
        }),
        per_minute: per_minute(&due, &sessions, &frames, end_s),
    };
    arrival.headline = headline(&arrival);
    let curves = vec![
        cumulative(names::ASKED, &due, end_s, bin_s),
        cumulative(names::SESSIONS, &sessions, end_s, bin_s),
        cumulative(names::FIRST_FRAMES, &frames, end_s, bin_s),
    ];
    Some((arrival, curves))
}

struct Lag {
    max_s: Option<f64>,
    behind_from_s: Option<f64>,
}

/// How far the k-th session came after the k-th arrival time, over k: the horizontal
/// distance between the two curves. An arrival whose session never came lags at least
/// until the end of the data, and the fleet was behind from it on.
fn horizontal_lag(due: &[f64], sessions: &[f64], end_s: f64) -> Lag {
    let mut out = Lag {
        max_s: None,
        behind_from_s: None,
    };
    for (k, d) in due.iter().enumerate() {
        let got = sessions.get(k).copied();
        let lag = (got.unwrap_or(end_s) - d).max(0.0);
        out.max_s = Some(out.max_s.map_or(lag, |m: f64| m.max(lag)));
        // Behind: too late, or never (however short the run).
        if (lag > LAG_TOLERANCE_S || got.is_none()) && out.behind_from_s.is_none() {
            out.behind_from_s = Some(*d);
        }
    }
    out
}

/// The most viewers asked for but without a session at one moment, and when.
fn max_behind(due: &[f64], sessions: &[f64]) -> (u32, Option<f64>) {
    let (mut i, mut j) = (0, 0);
    let mut best = (0u32, None);
    // Walk both sorted lists in time order; a session at the same instant as an arrival
    // counts first (no lag).
    while i < due.len() {
        if j < sessions.len() && sessions[j] <= due[i] {
            j += 1;
            continue;
        }
        i += 1;
        let behind = (i - j) as u32;
        if behind > best.0 {
            best = (behind, Some(due[i - 1]));
        }
    }
    best
}

/// When `share` of the asked viewers were asked for, had sessions, played.
fn milestone(share: f64, due: &[f64], sessions: &[f64], frames: &[f64]) -> ArrivalMilestone {
    let k = ((due.len() as f64 * share).ceil() as usize).max(1);
    ArrivalMilestone {
        share,
        viewers: k as u32,
        asked_s: due.get(k - 1).copied(),
        sessions_s: sessions.get(k - 1).copied(),
        first_frames_s: frames.get(k - 1).copied(),
    }
}

/// Arrivals asked for, sessions created and first frames in each minute of the run.
fn per_minute(due: &[f64], sessions: &[f64], frames: &[f64], end_s: f64) -> Vec<ArrivalMinute> {
    let last = [due, sessions, frames]
        .iter()
        .filter_map(|v| v.last().copied())
        .fold(end_s, f64::max);
    let minutes = ((last / 60.0).floor() as u32).saturating_add(1);
    let count = |v: &[f64], m: u32| {
        let (from, to) = (m as f64 * 60.0, (m + 1) as f64 * 60.0);
        v.iter().filter(|t| **t >= from && **t < to).count() as u32
    };
    (0..minutes)
        .map(|m| ArrivalMinute {
            from_s: m as f64 * 60.0,
            asked: count(due, m),
            sessions: count(sessions, m),
            first_frames: count(frames, m),
        })
        .filter(|m| m.asked + m.sessions + m.first_frames > 0)
        .collect()
}

/// Viewers reached by each bin end, from 0 to `end_s`.
fn cumulative(name: &'static str, times: &[f64], end_s: f64, bin_s: f64) -> Series {
    let n = (end_s / bin_s).ceil().max(1.0) as usize;
    let mut points = Vec::with_capacity(n + 1);
    let mut k = 0;
    for i in 0..=n {
        let t = i as f64 * bin_s;
        while k < times.len() && times[k] <= t {
            k += 1;
        }
        points.push((t, k as f64));
    }
    Series {
        name,
        unit: "viewers",
        points,
    }
}

fn secs(t: Option<f64>) -> String {
    t.map_or_else(|| "never".into(), |t| format!("{t:.0} s"))
}

/// One sentence: kept up with the ramp, or fell behind from when and by how much.
fn headline(a: &Arrival) -> String {
    let all = a.milestones.iter().find(|m| m.share == 1.0);
    let half = a.milestones.iter().find(|m| m.share == 0.5);
    let rate = match (a.sessions_per_min, a.asked_per_min) {
        (Some(got), Some(asked)) => {
            format!("; sessions created at {got:.0}/min against {asked:.0}/min asked")
        }
        _ => String::new(),
    };
    let Some(from) = a.behind_from_s else {
        return format!(
            "The fleet kept up with the arrivals asked for: all {} sessions within {:.0} s of \
             their arrival time (largest lag {:.1} s){rate}.",
            a.asked,
            LAG_TOLERANCE_S,
            a.max_lag_s.unwrap_or(0.0)
        );
    };
    let mut text = format!(
        "The fleet fell behind the arrivals asked for from {from:.0} s: {} {:.0} s behind, up \
         to {} viewers without a session{}",
        if a.still_behind_at_end {
            "at least"
        } else {
            "at most"
        },
        a.max_lag_s.unwrap_or(0.0),
        a.max_behind,
        a.max_behind_at_s
            .map(|t| format!(" (at {t:.0} s)"))
            .unwrap_or_default()
    );
    if let Some(h) = half {
        text.push_str(&format!(
            "; half of them asked for by {}, with sessions by {}",
            secs(h.asked_s),
            secs(h.sessions_s)
        ));
    }
    if let Some(m) = all {
        match m.sessions_s {
            Some(t) => text.push_str(&format!(
                ", all asked for by {}, with sessions by {t:.0} s",
                secs(m.asked_s)
            )),
            None => text.push_str(&format!(
                ", all asked for by {}, {} of {} had a session by the end",
                secs(m.asked_s),
                a.sessions,
                a.asked
            )),
        }
    }
    text.push_str(&rate);
    text.push('.');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrival(due: f64, session: Option<f64>) -> ViewerArrival {
        ViewerArrival {
            due_s: Some(due),
            creating_s: Some(due),
            session_s: session,
            playing_s: session.map(|s| s + 1.0),
        }
    }

    fn of(list: Vec<ViewerArrival>) -> BTreeMap<u32, ViewerArrival> {
        list.into_iter()
            .enumerate()
            .map(|(i, a)| (i as u32, a))
            .collect()
    }

    /// A ramp of 10 viewers over 9 s whose sessions each came 1 s after their time.
    #[test]
    fn a_fleet_that_keeps_up_says_so() {
        let list = (0..10).map(|i| arrival(i as f64, Some(i as f64 + 1.0)));
        let (a, curves) = analyse(&of(list.collect()), 20.0, 1.0).unwrap();
        assert_eq!((a.asked, a.sessions, a.first_frames), (10, 10, 10));
        assert_eq!(a.behind_from_s, None);
        assert_eq!(a.max_lag_s, Some(1.0));
        assert_eq!(a.max_behind, 1);
        assert!(!a.still_behind_at_end);
        assert!(
            a.headline.starts_with("The fleet kept up"),
            "{}",
            a.headline
        );
        let asked = &curves[0];
        assert_eq!(asked.name, names::ASKED);
        assert_eq!(asked.points[0], (0.0, 1.0));
        assert_eq!(asked.points[9], (9.0, 10.0));
        assert_eq!(curves[1].points[9], (9.0, 9.0));
        assert_eq!(a.milestones[0].asked_s, Some(4.0));
        assert_eq!(a.milestones[0].sessions_s, Some(5.0));
        assert_eq!(a.session_delay.unwrap().max_s, 1.0);
    }

    /// 100 viewers asked for over 99 s; the fleet made one session every 2 s, so it fell
    /// behind and 40 never got one before the data ended at 120 s.
    #[test]
    fn a_fleet_that_falls_behind_says_from_when_and_by_how_much() {
        let list = (0..100).map(|i| {
            let got = 2.0 * i as f64;
            arrival(i as f64, (got < 120.0).then_some(got))
        });
        let (a, _) = analyse(&of(list.collect()), 120.0, 1.0).unwrap();
        assert_eq!((a.asked, a.sessions), (100, 60));
        assert!(a.still_behind_at_end);
        // The 11th arrival (due at 11 s) got its session at 22 s: 11 s > 10 s.
        assert_eq!(a.behind_from_s, Some(11.0));
        // The 61st arrival (due at 60 s) still had no session when the data ended (120 s):
        // 60 s behind, the most (the 60th, due at 59 s, got one at 118 s).
        assert_eq!(a.max_lag_s, Some(60.0));
        assert_eq!(a.max_behind, 50);
        assert_eq!(a.milestones[1].sessions_s, None);
        assert_eq!(a.milestones[0].sessions_s, Some(98.0));
        let first = &a.per_minute[0];
        assert_eq!((first.asked, first.sessions), (60, 30));
        assert!(
            a.headline
                .contains("fell behind the arrivals asked for from 11 s")
                && a.headline.contains("60 of 100 had a session by the end"),
            "{}",
            a.headline
        );
    }

    #[test]
    fn raw_data_without_arrival_times_has_no_arrival_section() {
        let mut m = of(vec![arrival(0.0, Some(1.0))]);
        m.get_mut(&0).unwrap().due_s = None;
        assert!(analyse(&m, 10.0, 1.0).is_none());
    }
}
