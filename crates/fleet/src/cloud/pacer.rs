//! Staying within Hetzner's request budget: 3600 requests per hour per project, a bucket
//! refilled continuously (one request per second), reported on every answer as
//! `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset` (the Unix time at which the
//! bucket is full again).
//!
//! [`Pacer`] keeps an estimate of the bucket from those headers: requests go out at once
//! while more than a reserve (5% of the limit) is left, and one per refill interval once it
//! is down to the reserve, so the bucket is never emptied by us and other tools of the
//! project keep some of it. The refill interval is read from the headers too (time until
//! full ÷ requests missing), so the pacing follows whatever bucket the API reports.
//!
//! [`Parallelism`] is the number of creates or deletes in flight: it halves on a 429, drops
//! to one while requests are paced, and grows back by one per round of successes.

use reqwest::header::HeaderMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The refill interval before the API told us otherwise (Hetzner's).
const DEFAULT_PER_REQUEST: Duration = Duration::from_secs(1);

#[derive(Debug)]
struct State {
    /// `RateLimit-Limit`, once seen.
    limit: Option<u32>,
    /// Requests we may still send, estimated now.
    remaining: f64,
    /// Time the bucket takes to refill one request.
    per_request: Duration,
    /// When `remaining` was estimated.
    at: Instant,
    /// Paced mode: when the next request may go.
    next_slot: Instant,
    /// Requests sent and not answered yet.
    in_flight: u32,
    /// Answers 429 seen.
    limited: u64,
}

/// The client's view of the project's request budget. Shared by every clone of the API.
#[derive(Debug)]
pub(crate) struct Pacer {
    state: Mutex<State>,
}

/// The three headers of one answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RateHeaders {
    pub limit: u32,
    pub remaining: u32,
    /// Unix time (seconds) when the bucket is full again.
    pub reset: i64,
}

impl RateHeaders {
    pub fn parse(headers: &HeaderMap) -> Option<RateHeaders> {
        let num =
            |name: &str| -> Option<i64> { headers.get(name)?.to_str().ok()?.trim().parse().ok() };
        Some(RateHeaders {
            limit: u32::try_from(num("ratelimit-limit")?).ok()?,
            remaining: u32::try_from(num("ratelimit-remaining")?).ok()?,
            reset: num("ratelimit-reset")?,
        })
    }
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// A request that was let through: report its answer's headers (or drop it if none came).
pub(crate) struct Ticket<'a> {
    pacer: &'a Pacer,
    open: bool,
}

impl Ticket<'_> {
    /// The answer arrived with these headers (`limited`: it was a 429).
    pub fn answered(mut self, headers: Option<RateHeaders>, limited: bool) {
        self.open = false;
        self.pacer.answered(headers, limited);
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if self.open {
            let mut s = self.pacer.lock();
            s.in_flight = s.in_flight.saturating_sub(1);
        }
    }
}

impl Default for Pacer {
    fn default() -> Self {
        Pacer::new()
    }
}

impl Pacer {
    pub fn new() -> Pacer {
        let now = Instant::now();
        Pacer {
            state: Mutex::new(State {
                limit: None,
                remaining: f64::INFINITY,
                per_request: DEFAULT_PER_REQUEST,
                at: now,
                next_slot: now,
                in_flight: 0,
                limited: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Requests kept back for others (and for a teardown after a failure): 5% of the limit.
    fn reserve(limit: u32) -> f64 {
        (limit as f64 / 20.0).max(1.0)
    }

    fn refill(s: &mut State, now: Instant) {
        if let Some(limit) = s.limit {
            let gained = now.saturating_duration_since(s.at).as_secs_f64()
                / s.per_request.as_secs_f64().max(1e-6);
            s.remaining = (s.remaining + gained).min(limit as f64);
        }
        s.at = now;
    }

    /// How long the next request must wait (zero while the budget is comfortable), and
    /// accounts for it.
    fn reserve_slot(&self) -> Duration {
        let mut s = self.lock();
        let now = Instant::now();
        Self::refill(&mut s, now);
        s.in_flight += 1;
        let free = match s.limit {
            None => true,
            Some(limit) => s.remaining - 1.0 >= Self::reserve(limit),
        };
        s.remaining -= 1.0;
        if free {
            return Duration::ZERO;
        }
        let slot = s.next_slot.max(now);
        s.next_slot = slot + s.per_request;
        slot - now
    }

    /// Waits until a request may be sent.
    pub async fn acquire(&self) -> Ticket<'_> {
        let wait = self.reserve_slot();
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        Ticket {
            pacer: self,
            open: true,
        }
    }

    fn answered(&self, headers: Option<RateHeaders>, limited: bool) {
        let mut s = self.lock();
        s.in_flight = s.in_flight.saturating_sub(1);
        let now = Instant::now();
        if let Some(h) = headers {
            s.limit = Some(h.limit);
            let missing = h.limit.saturating_sub(h.remaining);
            let to_full = h.reset as f64 - unix_now();
            if missing > 0 && to_full > 0.0 {
                let per = (to_full / missing as f64).clamp(0.001, 60.0);
                s.per_request = Duration::from_secs_f64(per);
            }
            // What the API counted, minus what we sent since that it has not counted yet.
            s.remaining = h.remaining as f64 - s.in_flight as f64;
            s.at = now;
        }
        if limited {
            s.limited += 1;
            s.remaining = s.remaining.min(0.0);
            s.next_slot = s.next_slot.max(now + s.per_request);
        }
    }

    /// True while requests are spaced out (the budget is at its reserve).
    pub fn paced(&self) -> bool {
        let mut s = self.lock();
        Self::refill(&mut s, Instant::now());
        match s.limit {
            None => false,
            Some(limit) => s.remaining < Self::reserve(limit) + 1.0,
        }
    }

    /// 429 answers seen so far.
    pub fn limited(&self) -> u64 {
        self.lock().limited
    }
}

/// How many creates or deletes are in flight at once: at most `max`, halved after a 429,
/// one while the pacer spaces requests out, one more per round of successes otherwise.
#[derive(Debug)]
pub(crate) struct Parallelism {
    max: usize,
    sem: tokio::sync::Semaphore,
    state: Mutex<ParState>,
}

#[derive(Debug)]
struct ParState {
    limit: usize,
    /// Permits to retire when they come back (after shrinking).
    debt: usize,
    successes: usize,
    /// The pacer's 429 count when we last looked.
    limited_seen: u64,
}

/// One slot of a [`Parallelism`].
pub struct Slot<'a> {
    par: &'a Parallelism,
    permit: Option<tokio::sync::SemaphorePermit<'a>>,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        if let Some(permit) = self.permit.take() {
            let mut s = self.par.lock();
            if s.debt > 0 {
                s.debt -= 1;
                permit.forget();
            }
        }
    }
}

impl Parallelism {
    /// At most `max` at once; 429s are those `pacer` sees from now on.
    pub fn new(max: usize, pacer: &Pacer) -> Parallelism {
        let max = max.max(1);
        Parallelism {
            max,
            sem: tokio::sync::Semaphore::new(max),
            state: Mutex::new(ParState {
                limit: max,
                debt: 0,
                successes: 0,
                limited_seen: pacer.limited(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ParState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for a free slot.
    pub async fn slot(&self) -> Slot<'_> {
        let permit = self.sem.acquire().await.ok();
        Slot { par: self, permit }
    }

    /// Current number of slots (what the tests watch shrink and grow).
    #[cfg(test)]
    fn current(&self) -> usize {
        self.lock().limit
    }

    fn shrink_to(&self, s: &mut ParState, limit: usize) {
        if limit < s.limit {
            s.debt += s.limit - limit;
            s.limit = limit;
        }
        // Idle permits retire at once; the others when their slot is given back.
        while s.debt > 0 {
            let Ok(permit) = self.sem.try_acquire() else {
                break;
            };
            permit.forget();
            s.debt -= 1;
        }
        s.successes = 0;
    }

    /// After one request of the batch: adapt to what the pacer saw.
    pub(crate) fn adapt(&self, pacer: &Pacer) {
        let limited = pacer.limited();
        let paced = pacer.paced();
        let mut s = self.lock();
        if limited > s.limited_seen {
            s.limited_seen = limited;
            let half = (s.limit / 2).max(1);
            self.shrink_to(&mut s, half);
        } else if paced {
            self.shrink_to(&mut s, 1);
        } else {
            s.successes += 1;
            if s.successes >= s.limit && s.limit < self.max {
                s.successes = 0;
                s.limit += 1;
                if s.debt > 0 {
                    s.debt -= 1;
                } else {
                    self.sem.add_permits(1);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(limit: u32, remaining: u32, reset_in: f64) -> RateHeaders {
        RateHeaders {
            limit,
            remaining,
            reset: (unix_now() + reset_in).ceil() as i64,
        }
    }

    #[test]
    fn requests_go_at_once_while_the_budget_is_comfortable() {
        let p = Pacer::new();
        assert_eq!(p.reserve_slot(), Duration::ZERO, "unknown budget: go");
        p.answered(Some(headers(3600, 3000, 600.0)), false);
        for _ in 0..100 {
            assert_eq!(p.reserve_slot(), Duration::ZERO);
        }
        assert!(!p.paced());
    }

    #[test]
    fn at_the_reserve_requests_are_spaced_by_the_refill_interval() {
        let p = Pacer::new();
        let _ = p.reserve_slot();
        // 3600 per hour, 180 left (the reserve): full in 3420 s → one request per second.
        p.answered(Some(headers(3600, 180, 3420.0)), false);
        assert!(p.paced());
        let first = p.reserve_slot();
        let second = p.reserve_slot();
        let third = p.reserve_slot();
        assert!(first <= Duration::from_millis(10), "{first:?}");
        let gap = (third - second).as_secs_f64();
        assert!((0.95..=1.05).contains(&gap), "one per second, got {gap}");
    }

    #[test]
    fn a_429_waits_at_least_one_refill_and_counts() {
        let p = Pacer::new();
        let _ = p.reserve_slot();
        p.answered(Some(headers(60, 0, 60.0)), true);
        assert_eq!(p.limited(), 1);
        let wait = p.reserve_slot();
        assert!(wait >= Duration::from_millis(900), "{wait:?}");
    }

    #[test]
    fn parallelism_halves_on_429_drops_to_one_when_paced_and_grows_back() {
        let limited = Pacer::new();
        let _ = limited.reserve_slot();
        limited.answered(Some(headers(3600, 3000, 600.0)), true);
        let _ = limited.reserve_slot();
        limited.answered(Some(headers(3600, 3500, 100.0)), false);
        let earlier = Parallelism::new(8, &limited);
        earlier.adapt(&limited);
        assert_eq!(
            earlier.current(),
            8,
            "a 429 from before it started does not count"
        );

        let pacer = Pacer::new();
        let par = Parallelism::new(8, &pacer);
        assert_eq!(par.current(), 8);
        let _ = pacer.reserve_slot();
        pacer.answered(Some(headers(3600, 3000, 600.0)), true);
        par.adapt(&pacer);
        assert_eq!(par.current(), 4);
        assert_eq!(
            par.sem.available_permits(),
            4,
            "idle permits retire at once"
        );
        let _ = pacer.reserve_slot();
        pacer.answered(Some(headers(3600, 100, 3500.0)), false);
        par.adapt(&pacer);
        assert_eq!(par.current(), 1);
        assert_eq!(par.sem.available_permits(), 1);
        let _ = pacer.reserve_slot();
        pacer.answered(Some(headers(3600, 3500, 100.0)), false);
        for _ in 0..3 {
            par.adapt(&pacer);
        }
        assert_eq!(par.current(), 3, "one more per round of successes");
        assert_eq!(par.sem.available_permits(), 3);
    }
}
