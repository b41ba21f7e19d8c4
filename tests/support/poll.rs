//! Waiting for something that happens later, bounded by a deadline: one way for every test
//! of both tiers. A wait ends as soon as its condition holds; the limit only bounds a
//! failure, so a slow machine makes a test slower, not red.

use std::future::Future;
use std::time::{Duration, Instant};

/// Polls `cond` every 100 ms until it holds; panics naming `what` after `limit`.
pub fn until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// [`until`] for a condition that awaits, polled every 250 ms.
pub async fn until_async<F, Fut>(what: &str, limit: Duration, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while !cond().await {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Polls `check` every 250 ms until it gives `Some`, and returns that; panics naming `what`
/// after `limit`.
pub async fn value<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// [`value`] for a check that can fail: its first error ends the wait, and a timeout is an
/// error too (for tests that report with `anyhow` instead of panicking).
pub async fn try_value<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = check().await? {
            return Ok(v);
        }
        if Instant::now() >= deadline {
            anyhow::bail!("{what}: not within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
