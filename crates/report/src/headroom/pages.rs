//! The page rule: a page's lag meter as intervals between its samples, and whether the page
//! was starved over a window; shared by the viewers' pages and the light peers' pages.

use super::*;

/// What a page's lag meter counted between two of its samples.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LagInterval {
    pub from: f64,
    pub to: f64,
    pub ticks: f64,
    pub late_ms: f64,
    pub late_ticks: f64,
    pub max_ms: f64,
}

impl LagInterval {
    pub(super) fn starved(&self) -> bool {
        page_starved(self.ticks, self.late_ms, self.late_ticks)
    }
}

/// The page rule on a lag meter's counts over some stretch of time: its ticks ran later
/// than [`PAGE_LATE_MEAN_MS`] on average or more than [`PAGE_LATE_TICKS_SHARE`] of them
/// were late. No ticks, no verdict of starvation.
pub(crate) fn page_starved(ticks: f64, late_ms: f64, late_ticks: f64) -> bool {
    ticks > 0.0
        && (late_ms / ticks > PAGE_LATE_MEAN_MS || late_ticks / ticks > PAGE_LATE_TICKS_SHARE)
}

/// A page's lag meter over a window, judged by the page rule; `None` when the window holds
/// fewer than [`PAGE_MIN_TICKS`] ticks (too little to judge). Shared by the viewers' pages
/// and the light peers' pages (`report::light`), so both are starved by one rule.
pub(crate) fn judge_page(
    ticks: f64,
    late_ms: f64,
    late_ticks: f64,
    max_ms: f64,
) -> Option<PageLagWindow> {
    (ticks >= PAGE_MIN_TICKS).then(|| PageLagWindow {
        ticks,
        mean_late_ms: late_ms / ticks,
        late_ticks_share: late_ticks / ticks,
        max_ms,
        starved: page_starved(ticks, late_ms, late_ticks),
    })
}

/// A light peers' page's lag meter over a window, judged by the light pages' rule: starved
/// when its timer ran more than [`LIGHT_PAGE_LATE_MEAN_MS`] late on average or one tick more
/// than [`LIGHT_PAGE_WORST_TICK_MS`] late. Its engines (up to 50 on one thread) queue their
/// work before its timer, so the viewers' rule would call a page with headroom starved;
/// these thresholds sit below the lateness that was measured to move the swarm's figures.
pub fn judge_light_page(
    ticks: f64,
    late_ms: f64,
    late_ticks: f64,
    max_ms: f64,
) -> Option<PageLagWindow> {
    (ticks >= PAGE_MIN_TICKS).then(|| PageLagWindow {
        ticks,
        mean_late_ms: late_ms / ticks,
        late_ticks_share: late_ticks / ticks,
        max_ms,
        starved: late_ms / ticks > LIGHT_PAGE_LATE_MEAN_MS || max_ms > LIGHT_PAGE_WORST_TICK_MS,
    })
}

/// The light pages' rule in words, as the report states it.
pub(crate) fn light_page_rule_words() -> String {
    format!(
        "its timer more than {LIGHT_PAGE_LATE_MEAN_MS:.0} ms late on average, or one tick more \
         than {:.0} s late: past the P2P engine's own 2 s timeout",
        LIGHT_PAGE_WORST_TICK_MS / 1000.0
    )
}

/// The intervals between a viewer's consecutive lag-meter samples (its first sample is a
/// baseline: page start-up is no steady state). A meter that went down was restarted (the
/// page reloaded): its new value counts, as for byte counters.
pub(super) fn lag_intervals(samples: &[&ViewerSample]) -> Vec<LagInterval> {
    let reads: Vec<(f64, PageLag)> = samples
        .iter()
        .filter_map(|s| s.lag.map(|l| (s.t, l)))
        .collect();
    meter_intervals(&reads)
}

/// The intervals between consecutive reads `(t, meter)` of one page's lag meter, in time
/// order, by the rules of [`lag_intervals`] (reads with impossible figures skipped). Also
/// what judges a light peers' page (`report::light`).
pub(crate) fn meter_intervals(reads: &[(f64, PageLag)]) -> Vec<LagInterval> {
    let with_lag: Vec<(f64, PageLag)> = reads
        .iter()
        .copied()
        .filter(|(_, l)| l.late_ms.is_finite() && l.late_ms >= 0.0 && l.max_ms.is_finite())
        .collect();
    with_lag
        .windows(2)
        .filter_map(|pair| {
            let ((t0, a), (t1, b)) = (pair[0], pair[1]);
            let reset = b.ticks < a.ticks;
            let (ticks, late_ms, late_ticks) = if reset {
                (b.ticks, b.late_ms, b.late_ticks)
            } else {
                (
                    b.ticks - a.ticks,
                    (b.late_ms - a.late_ms).max(0.0),
                    b.late_ticks.saturating_sub(a.late_ticks),
                )
            };
            (t1 > t0).then_some(LagInterval {
                from: t0,
                to: t1,
                ticks: ticks as f64,
                late_ms,
                late_ticks: late_ticks as f64,
                max_ms: b.max_ms.max(0.0),
            })
        })
        .collect()
}

/// The page rule over a window: the intervals' counts inside it, pro rata.
pub(super) fn page_window(intervals: &[LagInterval], steady: Steady) -> Option<PageLagWindow> {
    let (mut ticks, mut late_ms, mut late_ticks, mut max_ms) = (0.0, 0.0, 0.0, 0.0f64);
    for i in intervals {
        let overlap = i.to.min(steady.to_s) - i.from.max(steady.from_s);
        if overlap <= 0.0 {
            continue;
        }
        let f = overlap / (i.to - i.from);
        ticks += i.ticks * f;
        late_ms += i.late_ms * f;
        late_ticks += i.late_ticks * f;
        max_ms = max_ms.max(i.max_ms);
    }
    judge_page(ticks, late_ms, late_ticks, max_ms)
}

/// Mean lateness of all pages' ticks over a trailing window of two sampling intervals.
pub(super) fn page_late_series((late, ticks): &(Bins, Bins), inputs: &Inputs) -> Series {
    let w = (2.0 * inputs.sampling_s).max(inputs.bin_s);
    let late = late.trailing_rates(w, 0.0, inputs.end_s);
    let ticks = ticks.trailing_rates(w, 0.0, inputs.end_s);
    Series {
        name: crate::summary::names::PAGE_LATE_MS,
        unit: "ms",
        points: late
            .into_iter()
            .zip(ticks)
            .filter(|(_, (_, n))| *n > 0.0)
            .map(|((t, l), (_, n))| (t, l / n))
            .collect(),
    }
}
