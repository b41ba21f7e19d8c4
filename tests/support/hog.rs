//! A CPU hog for tests that starve the host on purpose: one thread per core, each busy for
//! `share` of every 50 ms and asleep for the rest, so the host stays about `share` busy
//! (plus whatever else runs) until the hog is dropped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct CpuHog {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

const PERIOD: Duration = Duration::from_millis(50);

impl CpuHog {
    /// Keeps every core `share` (0..=1) busy.
    pub fn start(share: f64) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let stop = Arc::new(AtomicBool::new(false));
        let busy = PERIOD.mul_f64(share.clamp(0.0, 1.0));
        let threads = (0..cores)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let began = Instant::now();
                        while began.elapsed() < busy {
                            std::hint::spin_loop();
                        }
                        std::thread::sleep(PERIOD.saturating_sub(began.elapsed()));
                    }
                })
            })
            .collect();
        Self { stop, threads }
    }
}

impl Drop for CpuHog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
