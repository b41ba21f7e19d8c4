//! Counter deltas → bytes per time bin → Mbit/s series and window averages.
//!
//! Every counter (an exporter sum or one viewer's cumulative bytes) is turned into deltas
//! between consecutive samples, the Prometheus `rate()` way: a value lower than the previous
//! one is a counter reset (target or page restarted) and counts as the new value, never as a
//! negative delta. Each delta is spread evenly over the time between its two samples into
//! fixed bins (1 s by default), so uneven sampling and gaps (failed scrapes) neither lose nor
//! invent bytes: a gap's bytes are spread across the gap, and the gap is reported. Rates over
//! a window are then the bytes in the window's bins divided by its length.

/// Most bins a series gets: 8 days of 1 s bins (a run lasts at most 7 days).
pub(crate) const MAX_BINS: usize = 8 * 24 * 3600;

/// Bytes per fixed-width time bin, starting at t = 0.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Bins {
    pub width_s: f64,
    pub values: Vec<f64>,
}

impl Bins {
    /// Bins of `width_s` covering `0..end_s`, at most [`MAX_BINS`] of them (later times
    /// fold into the last bin): the end comes from the data, which may be damaged.
    pub fn new(width_s: f64, end_s: f64) -> Self {
        let n = ((end_s.max(0.0) / width_s).ceil() as usize).clamp(1, MAX_BINS);
        Self {
            width_s,
            values: vec![0.0; n],
        }
    }

    /// Adds `amount` spread evenly over `t0..t1` (into the bin of `t1` when `t1 <= t0`).
    pub fn spread(&mut self, t0: f64, t1: f64, amount: f64) {
        if amount == 0.0 || !amount.is_finite() {
            return;
        }
        let last = self.values.len() - 1;
        let index = |t: f64| ((t / self.width_s).floor().max(0.0) as usize).min(last);
        if t1 - t0 <= 1e-9 {
            let i = index(t1);
            self.values[i] += amount;
            return;
        }
        let per_s = amount / (t1 - t0);
        let (first, end) = (index(t0), index(t1));
        for i in first..=end {
            let lo = (i as f64 * self.width_s).max(t0);
            let hi = ((i + 1) as f64 * self.width_s).min(t1);
            // Time outside 0..end_s is folded into the first/last bin.
            let lo = if i == first { t0 } else { lo };
            let hi = if i == end { t1 } else { hi };
            if hi > lo {
                self.values[i] += per_s * (hi - lo);
            }
        }
    }

    /// Bytes between `a` and `b`, counting partial bins pro rata.
    pub(crate) fn sum_between(&self, a: f64, b: f64) -> f64 {
        if b <= a {
            return 0.0;
        }
        let mut total = 0.0;
        for (i, value) in self.values.iter().enumerate() {
            let lo = i as f64 * self.width_s;
            let hi = lo + self.width_s;
            let overlap = hi.min(b) - lo.max(a);
            if overlap > 0.0 {
                total += value * overlap / self.width_s;
            }
        }
        total
    }

    /// Mean bytes/s over `a..b`.
    pub(crate) fn rate_between(&self, a: f64, b: f64) -> Option<f64> {
        (b > a).then(|| self.sum_between(a, b) / (b - a))
    }

    /// Trailing-window rates (bytes/s) at every bin end `t` with `t - window_s >= from` and
    /// `t <= to`: only windows fully covered by data.
    pub(crate) fn trailing_rates(&self, window_s: f64, from: f64, to: f64) -> Vec<(f64, f64)> {
        let mut out = Vec::new();
        let w_bins = (window_s / self.width_s).round().max(1.0) as usize;
        let window = w_bins as f64 * self.width_s;
        let mut running = 0.0;
        for (i, value) in self.values.iter().enumerate() {
            running += value;
            if i >= w_bins {
                running -= self.values[i - w_bins];
            }
            let t = (i + 1) as f64 * self.width_s;
            if i + 1 >= w_bins && t - window >= from - 1e-9 && t <= to + 1e-9 {
                out.push((t, running.max(0.0) / window));
            }
        }
        out
    }
}

/// Where a counter's first value comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum CounterStart {
    /// The first sample is a baseline (counts from before the run): not counted.
    Baseline,
    /// The counter started at zero at this time (a page opened then): the first value counts,
    /// spread from this time to the first sample.
    ZeroAt(f64),
}

/// What accumulating one counter found.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct CounterStats {
    /// Total increase, resets handled.
    pub increase: f64,
    /// Times the value went down (counted as resets).
    pub resets: u32,
    pub first_t: Option<f64>,
    pub last_t: Option<f64>,
}

/// Adds a counter's deltas to `bins`. `points` are `(t, value)` in time order; failed reads
/// must already be left out (their bytes then land in the surrounding interval).
pub fn accumulate(points: &[(f64, f64)], start: CounterStart, bins: &mut Bins) -> CounterStats {
    let mut stats = CounterStats::default();
    let Some(&(t_first, v_first)) = points.first() else {
        return stats;
    };
    stats.first_t = Some(t_first);
    stats.last_t = Some(t_first);
    if let CounterStart::ZeroAt(t0) = start {
        if v_first > 0.0 {
            bins.spread(t0.min(t_first), t_first, v_first);
            stats.increase += v_first;
        }
    }
    for pair in points.windows(2) {
        let ((t0, v0), (t1, v1)) = (pair[0], pair[1]);
        let delta = if v1 < v0 {
            stats.resets += 1;
            v1
        } else {
            v1 - v0
        };
        bins.spread(t0, t1, delta);
        stats.increase += delta;
        stats.last_t = Some(t1);
    }
    stats
}

/// A stretch without a successful read.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Gap {
    /// Last good read before the gap (or the first failed one when none came before).
    pub from_s: f64,
    /// First good read after it (or the last failed one when none came after).
    pub to_s: f64,
    /// Failed reads inside it.
    pub failed_reads: u32,
    /// First error seen, as recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Finds gaps in a series of reads `(t, ok, error)`: runs of failed reads, and stretches
/// between good reads longer than `max_spacing_s` (the sampler itself stalled).
pub(crate) fn find_gaps(reads: &[(f64, bool, Option<&str>)], max_spacing_s: f64) -> Vec<Gap> {
    let mut gaps = Vec::new();
    let mut last_ok: Option<f64> = None;
    let mut open: Option<Gap> = None;
    for &(t, ok, error) in reads {
        if ok {
            if let Some(mut gap) = open.take() {
                gap.to_s = t;
                gaps.push(gap);
            } else if let Some(prev) = last_ok {
                if t - prev > max_spacing_s {
                    gaps.push(Gap {
                        from_s: prev,
                        to_s: t,
                        failed_reads: 0,
                        error: None,
                    });
                }
            }
            last_ok = Some(t);
        } else {
            match open.as_mut() {
                Some(gap) => {
                    gap.failed_reads += 1;
                    gap.to_s = t;
                }
                None => {
                    open = Some(Gap {
                        from_s: last_ok.unwrap_or(t),
                        to_s: t,
                        failed_reads: 1,
                        error: error.map(str::to_string),
                    })
                }
            }
        }
    }
    gaps.extend(open);
    gaps
}

/// Bytes/s → Mbit/s.
pub fn mbps(bytes_per_s: f64) -> f64 {
    bytes_per_s * 8.0 / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    #[test]
    fn steady_counter_gives_its_rate() {
        // 1000 B/s sampled every 2 s for 60 s.
        let points: Vec<(f64, f64)> = (0..=30)
            .map(|i| (i as f64 * 2.0, i as f64 * 2000.0))
            .collect();
        let mut bins = Bins::new(1.0, 60.0);
        let stats = accumulate(&points, CounterStart::Baseline, &mut bins);
        assert!(close(stats.increase, 60_000.0));
        assert_eq!(stats.resets, 0);
        assert!(close(bins.rate_between(10.0, 40.0).unwrap(), 1000.0));
        let series = bins.trailing_rates(10.0, 0.0, 60.0);
        assert_eq!(series.first().unwrap().0, 10.0);
        assert!(series.iter().all(|&(_, r)| close(r, 1000.0)));
    }

    #[test]
    fn counter_reset_counts_new_value_not_a_negative_delta() {
        // 100 B/s, the target restarts between t=20 and t=30 (counter back near zero).
        let points = [
            (0.0, 5000.0),
            (10.0, 6000.0),
            (20.0, 7000.0),
            (30.0, 1000.0),
            (40.0, 2000.0),
        ];
        let mut bins = Bins::new(1.0, 40.0);
        let stats = accumulate(&points, CounterStart::Baseline, &mut bins);
        assert_eq!(stats.resets, 1);
        assert!(close(stats.increase, 4000.0));
        assert!(bins.values.iter().all(|v| *v >= 0.0));
        assert!(close(bins.rate_between(0.0, 40.0).unwrap(), 100.0));
    }

    #[test]
    fn uneven_sampling_spreads_bytes_by_elapsed_time() {
        // 500 B/s, read at irregular times.
        let times = [0.0, 0.7, 3.2, 3.9, 9.0, 9.5, 15.0, 20.0];
        let points: Vec<(f64, f64)> = times.iter().map(|&t| (t, t * 500.0)).collect();
        let mut bins = Bins::new(1.0, 20.0);
        accumulate(&points, CounterStart::Baseline, &mut bins);
        for (i, v) in bins.values.iter().enumerate() {
            assert!(close(*v, 500.0), "bin {i}: {v}");
        }
    }

    #[test]
    fn gap_bytes_are_spread_across_it_and_the_gap_is_found() {
        // Reads at 0..10 every 2 s, failures at 12..18, then 20; 1000 B/s throughout.
        let mut reads = Vec::new();
        let mut points = Vec::new();
        for i in 0..=10 {
            let t = i as f64 * 2.0;
            let ok = !(6..=9).contains(&i);
            reads.push((t, ok, (!ok).then_some("connection refused")));
            if ok {
                points.push((t, t * 1000.0));
            }
        }
        let mut bins = Bins::new(1.0, 20.0);
        let stats = accumulate(&points, CounterStart::Baseline, &mut bins);
        assert!(close(stats.increase, 20_000.0));
        assert!(close(bins.rate_between(10.0, 20.0).unwrap(), 1000.0));
        let gaps = find_gaps(&reads, 5.0);
        assert_eq!(gaps.len(), 1);
        assert_eq!(
            (gaps[0].from_s, gaps[0].to_s, gaps[0].failed_reads),
            (10.0, 20.0, 4)
        );
        assert_eq!(gaps[0].error.as_deref(), Some("connection refused"));
    }

    #[test]
    fn sampler_stall_without_failed_reads_is_a_gap() {
        let reads = [
            (0.0, true, None),
            (2.0, true, None),
            (30.0, true, None),
            (32.0, true, None),
        ];
        let gaps = find_gaps(&reads, 5.0);
        assert_eq!(gaps.len(), 1);
        assert_eq!(
            (gaps[0].from_s, gaps[0].to_s, gaps[0].failed_reads),
            (2.0, 30.0, 0)
        );
    }

    #[test]
    fn counter_starting_at_zero_counts_its_first_value() {
        let points = [(4.0, 4000.0), (6.0, 6000.0)];
        let mut bins = Bins::new(1.0, 6.0);
        let stats = accumulate(&points, CounterStart::ZeroAt(0.0), &mut bins);
        assert!(close(stats.increase, 6000.0));
        assert!(bins.values.iter().all(|v| close(*v, 1000.0)));
    }

    #[test]
    fn stepwise_exporter_counter_averages_out_over_its_post_interval() {
        // Players POST every 15 s: the counter jumps by 15 000 B every 15 s (1000 B/s) but is
        // scraped every 2 s. Over windows of 30 s the rate is exact at window ends aligned to
        // the steps and within one step elsewhere.
        let points: Vec<(f64, f64)> = (0..=60)
            .map(|i| {
                let t = i as f64 * 2.0;
                (t, ((t / 15.0).floor()) * 15_000.0)
            })
            .collect();
        let mut bins = Bins::new(1.0, 120.0);
        accumulate(&points, CounterStart::Baseline, &mut bins);
        for (t, rate) in bins.trailing_rates(30.0, 0.0, 120.0) {
            assert!((rate - 1000.0).abs() <= 500.0 + 1e-9, "t={t} rate={rate}");
        }
        assert!(close(
            bins.rate_between(30.0, 90.0).unwrap(),
            1000.0 * 60.0 / 60.0
        ));
    }
}
