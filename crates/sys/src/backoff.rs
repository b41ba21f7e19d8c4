//! The waits between retries, one rule for every retry in viewerfleet (Hetzner API
//! requests, firewall deletions, session requests to a Grid, WebDriver commands sent again,
//! the reaper's loop, polls that slow down): exponential backoff with jitter.
//!
//! Every wait is drawn uniformly from [d/2, d], d being the wait before jitter ("equal
//! jitter"): never less than half, so waits still grow with each failure, and never the
//! same for two waiters, so the viewers, controllers and reapers that failed together (a
//! Grid or the API refusing a burst) do not all retry in the same instant.

use rand::Rng;
use std::time::Duration;

/// One wait, jittered: uniform in [`d`/2, `d`].
pub fn jitter(d: Duration) -> Duration {
    jitter_with(d, &mut rand::thread_rng())
}

/// [`jitter`] with the given random source (tests use a seeded one).
pub(crate) fn jitter_with(d: Duration, rng: &mut impl Rng) -> Duration {
    let half = d / 2;
    let extra: u128 = rng.gen_range(0..=(d - half).as_nanos());
    // Within `d - half`, so the seconds fit a u64 and the sum cannot overflow.
    half + Duration::new(
        u64::try_from(extra / 1_000_000_000).unwrap_or(u64::MAX),
        (extra % 1_000_000_000) as u32,
    )
}

/// Exponential backoff with jitter: the n-th wait is [`jitter`] of `base` × 2ⁿ capped at
/// `max`.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    failures: u32,
}

impl Backoff {
    pub fn new(base: Duration, max: Duration) -> Backoff {
        Backoff {
            base,
            max: max.max(base),
            failures: 0,
        }
    }

    /// The ceiling of the next wait, before jitter.
    pub(crate) fn ceiling(&self) -> Duration {
        let factor = 1u32.checked_shl(self.failures.min(31)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.max)
    }

    /// The next wait.
    pub fn next_wait(&mut self) -> Duration {
        self.next_with(&mut rand::thread_rng())
    }

    /// The next wait, with the given random source.
    pub fn next_with(&mut self, rng: &mut impl Rng) -> Duration {
        let d = self.ceiling();
        self.failures = self.failures.saturating_add(1);
        jitter_with(d, rng)
    }

    /// After a success: start again from `base`.
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn backoff_doubles_up_to_its_cap_and_jitters_within_the_upper_half() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let mut ceilings = Vec::new();
        let mut waits = Vec::new();
        for _ in 0..8 {
            let ceiling = b.ceiling();
            let wait = b.next_with(&mut rng);
            assert!(
                wait >= ceiling / 2 && wait <= ceiling,
                "{wait:?} of {ceiling:?}"
            );
            ceilings.push(ceiling.as_millis());
            waits.push(wait);
        }
        assert_eq!(ceilings, [100, 200, 400, 800, 1000, 1000, 1000, 1000]);
        // The capped waits are not all the same: they are jittered.
        waits.sort();
        waits.dedup();
        assert!(waits.len() >= 7, "{waits:?}");
        b.reset();
        assert_eq!(b.ceiling(), Duration::from_millis(100));
        // Thousands of failures neither overflow nor pass the cap.
        for _ in 0..10_000 {
            b.next_with(&mut rng);
        }
        assert_eq!(b.ceiling(), Duration::from_secs(1));
        // A cap below the base is the base.
        let mut b = Backoff::new(Duration::from_secs(2), Duration::from_secs(1));
        assert!(b.next_wait() <= Duration::from_secs(2));
    }

    #[test]
    fn a_jittered_wait_stays_within_half_and_all_of_it_and_spreads() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        for d in [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_millis(250),
            Duration::from_secs(60),
            Duration::MAX,
        ] {
            let mut seen = std::collections::BTreeSet::new();
            for _ in 0..200 {
                let w = jitter_with(d, &mut rng);
                assert!(w >= d / 2 && w <= d, "{w:?} of {d:?}");
                seen.insert(w);
            }
            if d >= Duration::from_millis(1) {
                assert!(seen.len() > 100, "{d:?}: {} different waits", seen.len());
                // Both halves of the range are drawn.
                let mid = d / 2 + d / 4;
                assert!(seen.iter().any(|w| *w < mid) && seen.iter().any(|w| *w > mid));
            }
        }
        assert_eq!(jitter(Duration::ZERO), Duration::ZERO);
    }
}
