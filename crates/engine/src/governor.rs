//! The headroom-governed ramp (`viewers.count: auto`). A viewer count chosen on one machine
//! on one day saturates the next machine of the same kind, and a starved page falls back to
//! HTTP: the run then measures its host, not P2P. Here browsers arrive a step at a time
//! while this machine has room: after each step's viewers play, the ramp lets them settle,
//! measures the host's busy share, and releases the next step only while the cost measured
//! so far says it keeps the host below `cpu_below`. Every measurement is a `ramp_step` run
//! event, and where and why the ramp stopped is a `ramp_settled` one.

use super::recorder::Record;
use super::shared::Shared;
use super::viewer_task;
use crate::model::rawdata::{RunEvent, RunEventKind, ViewerEventKind};
use crate::model::scenario::{AutoRamp, Plan, ViewerPlan};
use crate::sys::hostinfo::CpuMeter;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// With a size known to fit, only a host this far above `cpu_below` stops the ramp short of
/// it: a repeat's measurement of the same swarm moves by a few points.
const KNOWN_SIZE_MARGIN: f64 = 0.1;
/// Measured before the first step: the target, its encoder and the controller alone.
const BASELINE: Duration = Duration::from_secs(5);
/// After a step's viewers play: their first segments and the swarm's new connections pass
/// before the host is measured.
const SETTLE: Duration = Duration::from_secs(8);
/// The host's busy share is averaged over this long.
const MEASURE: Duration = Duration::from_secs(8);
/// A step whose viewers are not all playing (or ended) by then is measured as it is.
const START_LIMIT: Duration = Duration::from_secs(90);
/// A step releases whole browsers, at least this many viewers (a browser of one viewer a
/// step would make the ramp slow).
const MIN_VIEWERS_PER_STEP: u32 = 4;

/// The host's CPU as the ramp reads it.
pub(super) trait LoadGauge: Send {
    /// Mean busy share of the host's cores since the previous call (None on the first).
    fn busy_since_last(&mut self) -> Option<f64>;
}

impl LoadGauge for CpuMeter {
    fn busy_since_last(&mut self) -> Option<f64> {
        self.sample().map(|s| s.busy)
    }
}

/// Why the ramp stopped releasing viewers.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Stop {
    /// Every viewer the plan allows was released.
    Max,
    /// The host was at or above the limit with the viewers released so far.
    Crossed,
    /// One more step is expected to bring the host above the limit.
    NextWouldCross { per_step: f64, predicted: f64 },
    /// The plan's ramp time would run out before another step is measured.
    RampTime,
    /// Most viewers of the last step did not start.
    StartFailures { failed: u32, of: u32 },
}

/// What the ramp knows after measuring a step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Measured {
    /// Busy share before any viewer.
    pub baseline: f64,
    /// Busy share with the steps released so far.
    pub busy: f64,
    pub steps: u32,
    /// Steps the plan still allows.
    pub steps_left: u32,
}

/// Whether to release another step: `None` to go on, else why not. The cost of a step is
/// what the steps so far added to the baseline, on average; the next is expected to add
/// as much. A size `known_to_fit` (an earlier ramp settled on it) is not second-guessed by
/// that prediction: the first step's cost, measured just after its browsers started, can
/// be twice the next one's, and would shrink the swarm from one repeat to the next.
pub(super) fn decide(m: Measured, auto: AutoRamp) -> Option<Stop> {
    let cpu_below = auto.cpu_below;
    let margin = if auto.known_to_fit {
        KNOWN_SIZE_MARGIN
    } else {
        0.0
    };
    if m.busy >= cpu_below + margin {
        return Some(Stop::Crossed);
    }
    if m.steps_left == 0 {
        return Some(Stop::Max);
    }
    if auto.known_to_fit {
        return None;
    }
    let per_step = (m.busy - m.baseline).max(0.0) / m.steps.max(1) as f64;
    let predicted = m.busy + per_step;
    (predicted > cpu_below).then_some(Stop::NextWouldCross {
        per_step,
        predicted,
    })
}

/// The sentence the run and its report give for where the ramp settled.
pub(super) fn reason(stop: &Stop, m: &Measured, viewers: u32, auto: AutoRamp) -> String {
    let pct = |x: f64| format!("{:.0}%", x * 100.0);
    let cpu_below = auto.cpu_below;
    let with = format!(
        "the host was {} busy with {viewers} viewer(s) ({} before any)",
        pct(m.busy),
        pct(m.baseline)
    );
    match stop {
        Stop::Max if auto.known_to_fit => format!(
            "the size an earlier ramp of this run measured plays; {with} (a kept size stops short only at {} or more, the {} limit plus {:.0} points)",
            pct(cpu_below + KNOWN_SIZE_MARGIN),
            pct(cpu_below),
            KNOWN_SIZE_MARGIN * 100.0
        ),
        Stop::Crossed if auto.known_to_fit => format!(
            "{with}: at or above {}, the {} limit plus the {:.0} points a kept size may go over it",
            pct(cpu_below + KNOWN_SIZE_MARGIN),
            pct(cpu_below),
            KNOWN_SIZE_MARGIN * 100.0
        ),
        Stop::Max => format!(
            "every viewer the plan allows plays; {with}, below the {} limit",
            pct(cpu_below)
        ),
        Stop::Crossed => format!("{with}: at or above the {} limit", pct(cpu_below)),
        Stop::NextWouldCross {
            per_step,
            predicted,
        } => format!(
            "{with}, {:.1} points per step: one more step would bring it to about {}, above the {} limit",
            per_step * 100.0,
            pct(*predicted),
            pct(cpu_below)
        ),
        Stop::RampTime => {
            format!("the ramp's time would run out before another step could be measured; {with}")
        }
        Stop::StartFailures { failed, of } => format!(
            "{failed} of the last step's {of} viewer(s) did not start, so no more were added; {with}"
        ),
    }
}

/// Where the ramp settled, for the summary.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Settled {
    pub viewers: u32,
    /// The most viewers measured below the limit: `viewers`, or one step fewer when the
    /// last step took the host over it. What a suite keeps as the size for its next runs.
    pub fits: u32,
    pub reason: String,
}

/// The viewers in the steps they are released in: whole browsers, at least
/// `MIN_VIEWERS_PER_STEP` viewers a step, all arriving at once.
pub(super) fn steps(plan: &Plan) -> Vec<Vec<ViewerPlan>> {
    let browsers_per_step = MIN_VIEWERS_PER_STEP.div_ceil(plan.per_browser.max(1));
    let mut steps: Vec<Vec<ViewerPlan>> = Vec::new();
    for mut vp in plan.viewer_plans() {
        vp.start_after = Duration::ZERO;
        let step = (vp.browser / browsers_per_step) as usize;
        if steps.len() <= step {
            steps.resize_with(step + 1, Vec::new);
        }
        steps[step].push(vp);
    }
    steps
}

/// Releases the plan's viewers a step at a time while the host has room; returns their
/// tasks when the ramp has settled or the run ended.
pub(super) async fn governed_ramp(
    plan: Plan,
    auto: AutoRamp,
    shared: Arc<Shared>,
    mut gauge: Box<dyn LoadGauge>,
) -> JoinSet<()> {
    let mut viewers = JoinSet::new();
    let start = Instant::now();
    let deadline = start + plan.ramp;
    gauge.busy_since_last();
    let Some(baseline) = measure(&shared, &mut *gauge, BASELINE).await else {
        return viewers;
    };
    step_event(&shared, 0, baseline, "before any viewer".into());
    let steps = steps(&plan);
    let (mut released, mut measured) = (0u32, None);
    // The most viewers measured below the limit so far.
    let mut fits = 0u32;
    for (i, step) in steps.iter().enumerate() {
        let began = Instant::now();
        for vp in step {
            viewers.spawn(viewer_task::viewer_task(vp.clone(), shared.clone()));
        }
        released += step.len() as u32;
        shared.live().released = Some(released);
        let failed = wait_started(&shared, step).await;
        let Some(busy) = settle_and_measure(&shared, &mut *gauge).await else {
            return viewers;
        };
        step_event(
            &shared,
            released,
            busy,
            format!("{released} viewer(s) released"),
        );
        let m = Measured {
            baseline,
            busy,
            steps: i as u32 + 1,
            steps_left: (steps.len() - i - 1) as u32,
        };
        measured = Some(m);
        let cycle = began.elapsed();
        let stop = if failed * 2 > step.len() as u32 {
            Some(Stop::StartFailures {
                failed,
                of: step.len() as u32,
            })
        } else if let Some(stop) = decide(m, auto) {
            Some(stop)
        } else if Instant::now() + cycle > deadline {
            Some(Stop::RampTime)
        } else {
            None
        };
        if stop != Some(Stop::Crossed) || fits == 0 {
            fits = released;
        }
        if let Some(stop) = stop {
            let text = reason(&stop, &m, released, auto);
            record_settled(&shared, released, fits, &text, busy);
            return viewers;
        }
    }
    if let Some(m) = measured {
        let text = reason(&Stop::Max, &m, released, auto);
        record_settled(&shared, released, fits, &text, m.busy);
    }
    viewers
}

/// Waits until every viewer of a step plays or has ended (bounded); returns how many of
/// them failed or were lost.
async fn wait_started(shared: &Shared, step: &[ViewerPlan]) -> u32 {
    let limit = Instant::now() + START_LIMIT;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    loop {
        let (pending, failed) = {
            let live = shared.live();
            let mut pending = 0;
            let mut failed = 0;
            for vp in step {
                match live.states.get(&vp.index) {
                    Some(ViewerEventKind::Playing | ViewerEventKind::Stopped) => {}
                    Some(ViewerEventKind::Failed | ViewerEventKind::Lost) => failed += 1,
                    _ => pending += 1,
                }
            }
            (pending, failed)
        };
        if pending == 0 || Instant::now() >= limit {
            return failed + pending;
        }
        tokio::select! {
            _ = tick.tick() => {}
            _ = shared.run_end.cancelled() => return failed,
        }
    }
}

async fn settle_and_measure(shared: &Shared, gauge: &mut dyn LoadGauge) -> Option<f64> {
    tokio::select! {
        _ = tokio::time::sleep(SETTLE) => {}
        _ = shared.run_end.cancelled() => return None,
    }
    gauge.busy_since_last();
    measure(shared, gauge, MEASURE).await
}

/// The host's mean busy share over the next `window`; `None` when the run ends first.
async fn measure(shared: &Shared, gauge: &mut dyn LoadGauge, window: Duration) -> Option<f64> {
    tokio::select! {
        _ = tokio::time::sleep(window) => {}
        _ = shared.run_end.cancelled() => return None,
    }
    gauge.busy_since_last()
}

fn step_event(shared: &Shared, viewers: u32, busy: f64, detail: String) {
    shared.rec.send(Record::Run(RunEvent {
        t: shared.rec.now(),
        event: RunEventKind::RampStep,
        detail: Some(detail),
        viewers: Some(viewers),
        cpu_busy: Some(busy),
    }));
}

/// Records where the ramp stopped: `ramp_settled` with its reason, then `ramp_done`.
fn record_settled(shared: &Shared, viewers: u32, fits: u32, reason: &str, busy: f64) {
    tracing::info!("ramp settled on {viewers} viewer(s): {reason}");
    shared.rec.send(Record::Run(RunEvent {
        t: shared.rec.now(),
        event: RunEventKind::RampSettled,
        detail: Some(reason.to_string()),
        viewers: Some(viewers),
        cpu_busy: Some(busy),
    }));
    shared.rec.run_event(RunEventKind::RampDone, None);
    shared.live().settled = Some(Settled {
        viewers,
        fits,
        reason: reason.to_string(),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(busy: f64, steps: u32, steps_left: u32) -> Measured {
        Measured {
            baseline: 0.10,
            busy,
            steps,
            steps_left,
        }
    }

    const LIMIT: AutoRamp = AutoRamp {
        cpu_below: 0.7,
        known_to_fit: false,
    };

    #[test]
    fn a_step_that_would_cross_the_limit_is_not_released() {
        // 10% alone, 40% with two steps: 15 points a step, the next would reach 55%.
        assert_eq!(decide(m(0.40, 2, 5), LIMIT), None);
        // 61% with three steps: 17 points a step, the next would reach 78%.
        match decide(m(0.61, 3, 5), LIMIT) {
            Some(Stop::NextWouldCross {
                per_step,
                predicted,
            }) => {
                assert!((per_step - 0.17).abs() < 1e-9, "{per_step}");
                assert!((predicted - 0.78).abs() < 1e-9, "{predicted}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_limit_reached_or_the_plan_exhausted_stops_the_ramp() {
        assert_eq!(decide(m(0.72, 1, 5), LIMIT), Some(Stop::Crossed));
        assert_eq!(decide(m(0.30, 2, 0), LIMIT), Some(Stop::Max));
        // A measurement below the baseline (noise) costs nothing, and the ramp goes on.
        assert_eq!(decide(m(0.05, 1, 3), LIMIT), None);
    }

    #[test]
    fn a_size_known_to_fit_is_stopped_by_a_measured_crossing_not_by_a_prediction() {
        let known = AutoRamp {
            known_to_fit: true,
            ..LIMIT
        };
        // 45% after one step (35 points): a prediction of 80% would stop an unknown ramp…
        assert!(matches!(
            decide(m(0.45, 1, 3), LIMIT),
            Some(Stop::NextWouldCross { .. })
        ));
        // …but not one going to a size an earlier ramp settled on with this host.
        assert_eq!(decide(m(0.45, 1, 3), known), None);
        // A repeat measuring a few points over the limit goes on to the known size; a host
        // clearly past it stops it all the same, and so does the size.
        assert_eq!(decide(m(0.74, 2, 2), known), None);
        assert_eq!(decide(m(0.81, 2, 2), known), Some(Stop::Crossed));
        assert_eq!(decide(m(0.50, 4, 0), known), Some(Stop::Max));
    }

    #[test]
    fn steps_release_whole_browsers_of_at_least_four_viewers_at_once() {
        let text = |per_browser: u32| {
            format!(
                "name: a\ntarget:\n  kind: refsite\n  video: live\nviewers:\n  count: auto\n  auto:\n    max: 10\n  per_browser: {per_browser}\n  ramp: 60s\nduration: 2m\nfleet:\n  kind: local\n"
            )
        };
        let plan =
            |pb| crate::model::scenario::parse(&text(pb), "a.yaml", &Default::default()).unwrap();
        let sizes = |pb| steps(&plan(pb)).iter().map(Vec::len).collect::<Vec<_>>();
        assert_eq!(sizes(4), [4, 4, 2]);
        assert_eq!(sizes(1), [4, 4, 2]);
        assert_eq!(sizes(3), [6, 4]);
        let first = &steps(&plan(4))[1];
        assert!(first.iter().all(|v| v.start_after.is_zero()));
        assert_eq!(
            first.iter().map(|v| v.index).collect::<Vec<_>>(),
            [4, 5, 6, 7]
        );
    }

    #[test]
    fn reasons_name_the_measurement_and_the_limit() {
        let stop = Stop::NextWouldCross {
            per_step: 0.17,
            predicted: 0.78,
        };
        let text = reason(&stop, &m(0.61, 3, 5), 12, LIMIT);
        assert_eq!(
            text,
            "the host was 61% busy with 12 viewer(s) (10% before any), 17.0 points per step: one more step would bring it to about 78%, above the 70% limit"
        );
        assert!(reason(&Stop::Max, &m(0.3, 2, 0), 8, LIMIT).starts_with("every viewer"));
        // A kept size that measured over the limit, but not clearly, says why it went on.
        let known = AutoRamp {
            known_to_fit: true,
            ..LIMIT
        };
        assert_eq!(
            reason(&Stop::Max, &m(0.74, 4, 0), 16, known),
            "the size an earlier ramp of this run measured plays; the host was 74% busy with 16 viewer(s) (10% before any) (a kept size stops short only at 80% or more, the 70% limit plus 10 points)"
        );
    }
}
