//! The hub benchmark: what one Selenium Grid 4 hub costs and how fast it creates sessions
//! when `viewerfleet run` puts N viewers through it. The hub and relay nodes are real
//! (`relay_grid`); behind them the kit's WebDriver stub plays every browser, so the figures
//! are the Grid's own: session creations per second (first minute and whole ramp), the
//! hub's CPU (during the ramp, and per session held while the controller reads every
//! viewer's stats at the scenario's sampling interval) and its memory per session.
//!
//! The stub serves on a runtime of the benchmark's own; the relay nodes and the controller
//! share this machine with the hub, so the creation rates are those of a hub with company.

use crate::controller_bench::wait_with_usage;
use crate::relay_grid::{process_usage, RelayGrid, RelayGridOptions, Usage};
use crate::webdriver_stub::{Stub, StubConfig};
use anyhow::Context;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One benchmark point.
#[derive(Debug, Clone)]
pub struct HubBench {
    /// The viewerfleet binary.
    pub binary: PathBuf,
    /// The Selenium server jar and `grid/hub.toml`.
    pub jar: PathBuf,
    pub hub_toml: PathBuf,
    pub sessions: u32,
    /// Relay nodes; the sessions are spread evenly over them.
    pub nodes: u32,
    pub ramp: Duration,
    pub duration: Duration,
    pub sampling_interval: Duration,
    /// `max_parallel_starts` of the run.
    pub parallel: u32,
    /// Time the stub takes to create a session: 0 measures the Grid alone; a browser's
    /// start-up (2–5 s for Chromium) shows how many creations the hub's distributor runs
    /// at once (`newsession-threadpool-size`).
    pub create_delay: Duration,
    pub work_dir: PathBuf,
}

/// What one point measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HubFigures {
    pub sessions: u32,
    pub created: u32,
    pub playing: u32,
    /// The run's exit code (1: viewers failed or never started).
    pub exit_code: i32,
    /// Creations per second asked for by the ramp.
    pub asked_per_s: Option<f64>,
    /// Sessions created per second in the first minute after the first request.
    pub first_minute_per_s: f64,
    /// Sessions created per second from the first request to the last session.
    pub overall_per_s: f64,
    /// Seconds from the first request to the last session.
    pub ramp_s: f64,
    /// The hub's CPU over the whole run, and during the ramp.
    pub hub_cpu_s: f64,
    pub hub_ramp_cpu_s: f64,
    /// The hub's mean cores while every created session was held and read (after the
    /// last creation); `None` when that window was under 20 s.
    pub hub_hold_cores: Option<f64>,
    /// Stats reads (WebDriver `execute/sync` through the hub) per second in that window: what
    /// the controller managed, which is what the hub's CPU paid for.
    pub hold_reads_per_s: Option<f64>,
    /// Reads through the hub during the ramp (of the sessions created so far).
    pub ramp_reads: f64,
    /// The hub's resident memory with the nodes registered and no session, its peak during
    /// the run, and (peak − idle) per session. The JVM grows its heap lazily up to its
    /// limit, so RSS says what the hub took, not what it needed:
    pub hub_idle_rss_mb: f64,
    pub hub_peak_rss_mb: f64,
    pub hub_mb_per_session: f64,
    /// …the live heap after a full collection (`jcmd GC.run`, `GC.heap_info`) with no
    /// session and while every session was held says what it needed.
    pub hub_idle_heap_mb: Option<f64>,
    pub hub_held_heap_mb: Option<f64>,
    pub controller_cpu_s: f64,
    pub controller_peak_rss_mb: f64,
    /// Sessions the hub still listed after the run, and the stub's created − deleted.
    pub left_on_hub: usize,
    pub left_on_stub: i64,
    pub wall_s: f64,
}

impl HubFigures {
    /// Live heap per session held, MB.
    pub fn heap_mb_per_session(&self) -> Option<f64> {
        Some(
            (self.hub_held_heap_mb? - self.hub_idle_heap_mb?).max(0.0)
                / f64::from(self.created.max(1)),
        )
    }

    /// Hub CPU milliseconds per session created, during the ramp.
    pub fn ramp_cpu_ms_per_creation(&self) -> f64 {
        self.hub_ramp_cpu_s * 1000.0 / f64::from(self.created.max(1))
    }

    /// Hub cores per 1000 sessions held, at the run's sampling interval.
    pub fn hold_cores_per_1000(&self) -> Option<f64> {
        self.hub_hold_cores
            .map(|c| c * 1000.0 / f64::from(self.created.max(1)))
    }

    /// Hub CPU milliseconds per stats read it proxied while holding the sessions.
    pub fn cpu_ms_per_read(&self) -> Option<f64> {
        Some(self.hub_hold_cores? * 1000.0 / self.hold_reads_per_s?.max(1e-9))
    }

    /// Hub CPU milliseconds per session created, without the reads of the sessions already
    /// there that it proxied meanwhile (at the hold's cost per read).
    pub fn net_cpu_ms_per_creation(&self) -> Option<f64> {
        let reads_ms = self.ramp_reads * self.cpu_ms_per_read()?;
        Some(((self.hub_ramp_cpu_s * 1000.0 - reads_ms) / f64::from(self.created.max(1))).max(0.0))
    }
}

/// The stub on a runtime of its own, so the benchmark can block on the run.
struct BackgroundStub {
    stub: Option<Stub>,
    runtime: tokio::runtime::Runtime,
}

impl BackgroundStub {
    fn start(create_delay: Duration) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let stub = runtime.block_on(Stub::serve(
            "127.0.0.1:0".parse().expect("valid address"),
            StubConfig {
                create_delay,
                ..StubConfig::default()
            },
        ))?;
        Ok(Self {
            stub: Some(stub),
            runtime,
        })
    }

    fn stub(&self) -> &Stub {
        self.stub.as_ref().expect("the stub runs until dropped")
    }
}

impl Drop for BackgroundStub {
    fn drop(&mut self) {
        let _guard = self.runtime.enter();
        self.stub.take();
    }
}

/// The JVM's live heap after a full collection, MB (`jcmd`, from the JDK).
pub fn live_heap_mb(pid: u32) -> Option<f64> {
    let run = |cmd: &str| {
        Command::new("jcmd")
            .arg(pid.to_string())
            .arg(cmd)
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    };
    run("GC.run")?;
    parse_heap_used_kb(&run("GC.heap_info")?).map(|kb| kb as f64 * 1024.0 / 1e6)
}

/// `used 45678K` of the heap line of `jcmd GC.heap_info`.
fn parse_heap_used_kb(text: &str) -> Option<u64> {
    let line = text
        .lines()
        .find(|l| l.contains(" heap ") && l.contains("used"))?;
    let used = line.split("used").nth(1)?.trim_start();
    used.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// One sample: seconds since start, the hub's usage, stats reads the stub answered so far.
type Sample = (f64, Usage, u64);

/// Hub samples every second while the run goes on; and once `held()` says every session
/// exists (and a few samples later), the live heap.
fn sample_hub(
    pid: u32,
    stop: &Mutex<bool>,
    t0: Instant,
    held: &dyn Fn() -> bool,
    reads: &dyn Fn() -> u64,
) -> (Vec<Sample>, Option<f64>) {
    let mut out = Vec::new();
    let mut heap = None;
    let mut held_for = 0;
    while !*stop.lock().unwrap_or_else(|e| e.into_inner()) {
        if let Some(u) = process_usage(pid) {
            out.push((t0.elapsed().as_secs_f64(), u, reads()));
        }
        if held() {
            held_for += 1;
            // After a few reads of every session, once.
            if held_for == 15 && heap.is_none() {
                heap = live_heap_mb(pid);
            }
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    (out, heap)
}

/// A sampled figure at time `t` (linear between samples).
fn at(samples: &[Sample], t: f64, f: impl Fn(&Sample) -> f64) -> Option<f64> {
    let after = samples.iter().position(|s| s.0 >= t)?;
    if after == 0 {
        return Some(f(&samples[0]));
    }
    let (a, b) = (&samples[after - 1], &samples[after]);
    let share = if b.0 > a.0 {
        (t - a.0) / (b.0 - a.0)
    } else {
        0.0
    };
    Some(f(a) + (f(b) - f(a)) * share)
}

/// The hub's CPU seconds at time `t`.
fn cpu_at(samples: &[Sample], t: f64) -> Option<f64> {
    at(samples, t, |s| s.1.cpu_s)
}

/// Stats reads answered by time `t`.
fn reads_at(samples: &[Sample], t: f64) -> Option<f64> {
    at(samples, t, |s| s.2 as f64)
}

#[derive(serde::Deserialize)]
struct Event {
    t: f64,
    event: String,
}

impl HubBench {
    pub fn run(&self) -> anyhow::Result<HubFigures> {
        let dir = self.work_dir.join(format!("hub-{}", self.sessions));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let stub = BackgroundStub::start(self.create_delay)?;
        let addr = stub.stub().addr();
        let mut opts = RelayGridOptions::new(
            self.jar.clone(),
            self.hub_toml.clone(),
            format!("http://{addr}"),
            dir.join("grid"),
        );
        opts.nodes = self.nodes.max(1);
        opts.sessions_per_node = self.sessions.div_ceil(opts.nodes);
        let grid = RelayGrid::start(&opts)?;
        // The hub settles after the nodes registered.
        std::thread::sleep(Duration::from_secs(5));
        let idle = process_usage(grid.hub_pid()).context("reading the hub's usage")?;
        let idle_heap = live_heap_mb(grid.hub_pid());
        let scenario = dir.join("scenario.yaml");
        std::fs::write(
            &scenario,
            format!(
                "name: hub-bench-{n}\ntarget:\n  kind: peertube\n  video: vod\n  url: http://{addr}/w/bench\n  exporter: http://{addr}/metrics\n\
                 viewers:\n  count: {n}\n  ramp: {ramp}ms\nduration: {dur}ms\nsampling_interval: {si}ms\n\
                 measure_at: {m}ms\nsteady_window: {w}ms\nmax_failed_viewers: 0\n\
                 fleet:\n  kind: grid\n  url: {hub}\n  max_parallel_starts: {p}\n",
                n = self.sessions,
                ramp = self.ramp.as_millis(),
                dur = self.duration.as_millis(),
                si = self.sampling_interval.as_millis(),
                m = (self.duration - self.sampling_interval).as_millis(),
                w = (self.sampling_interval * 4).as_millis(),
                hub = grid.hub_url(),
                p = self.parallel,
            ),
        )?;
        let out = dir.join("run");
        let t0 = Instant::now();
        let stop = Mutex::new(false);
        let log = std::fs::File::create(dir.join("run.log"))?;
        let counters = stub.stub().counters();
        let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        let sessions = u64::from(self.sessions);
        let held = || load(&counters.sessions_created) >= sessions;
        let reads = || load(&counters.script_calls);
        let hub_pid = grid.hub_pid();
        let (run, (samples, held_heap)) = std::thread::scope(|scope| {
            let sampler = scope.spawn(|| sample_hub(hub_pid, &stop, t0, &held, &reads));
            let run = (|| {
                let mut child = crate::dies_with_parent(&mut Command::new(&self.binary))
                    .args(["--quiet", "run", "--no-report"])
                    .arg(&scenario)
                    .arg("--out")
                    .arg(&out)
                    .stdout(Stdio::null())
                    .stderr(log)
                    .spawn()
                    .context("starting viewerfleet run")?;
                wait_with_usage(&mut child)
            })();
            *stop.lock().unwrap_or_else(|e| e.into_inner()) = true;
            (run, sampler.join().unwrap_or_default())
        });
        let (status, controller_peak, controller_cpu) = run?;
        let wall_s = t0.elapsed().as_secs_f64();
        let left_on_hub = grid.sessions().unwrap_or(usize::MAX);
        let left_on_stub =
            load(&counters.sessions_created) as i64 - load(&counters.sessions_deleted) as i64;
        drop(grid);
        drop(stub);

        let text = std::fs::read_to_string(out.join("raw/viewer_events.jsonl"))
            .with_context(|| format!("the run left no viewer events in {}", out.display()))?;
        let events: Vec<Event> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let times = |kind: &str| -> Vec<f64> {
            let mut v: Vec<f64> = events
                .iter()
                .filter(|e| e.event == kind)
                .map(|e| e.t)
                .collect();
            v.sort_by(f64::total_cmp);
            v
        };
        let created = times("session_created");
        let first_request = times("creating").first().copied().unwrap_or(0.0);
        let last_created = created.last().copied().unwrap_or(first_request);
        let ramp_s = (last_created - first_request).max(1e-3);
        let first_minute = created
            .iter()
            .filter(|t| **t < first_request + 60.0)
            .count() as f64
            / 60.0_f64.min(ramp_s.max(1.0));
        let hub_cpu = |t: f64| cpu_at(&samples, t);
        let hub_cpu_s = samples.last().map_or(0.0, |s| s.1.cpu_s) - idle.cpu_s;
        let hub_ramp_cpu_s = match (hub_cpu(first_request), hub_cpu(last_created)) {
            (Some(a), Some(b)) => b - a,
            _ => 0.0,
        };
        // The hold: after the last creation, before the run's end closes the sessions.
        let (hold_from, hold_to) = (last_created + 5.0, self.duration.as_secs_f64() - 2.0);
        let hub_hold_cores = (hold_to - hold_from >= 20.0)
            .then(|| Some((hub_cpu(hold_to)? - hub_cpu(hold_from)?) / (hold_to - hold_from)))
            .flatten();
        let reads = |t: f64| reads_at(&samples, t);
        let hold_reads_per_s = (hold_to - hold_from >= 20.0)
            .then(|| Some((reads(hold_to)? - reads(hold_from)?) / (hold_to - hold_from)))
            .flatten();
        // Reads while sessions were being created; the first-frame reads of new viewers
        // count with their creation.
        let ramp_reads = match (reads(first_request), reads(last_created)) {
            (Some(a), Some(b)) => (b - a - f64::from(self.sessions)).max(0.0),
            _ => 0.0,
        };
        let peak = samples.iter().map(|s| s.1.rss).max().unwrap_or(idle.rss);
        let hub_cpu_s = hub_cpu_s.max(0.0);
        Ok(HubFigures {
            sessions: self.sessions,
            created: created.len() as u32,
            playing: times("playing").len() as u32,
            exit_code: status.code().unwrap_or(-1),
            asked_per_s: (!self.ramp.is_zero())
                .then(|| f64::from(self.sessions) / self.ramp.as_secs_f64()),
            first_minute_per_s: first_minute,
            overall_per_s: created.len() as f64 / ramp_s,
            ramp_s,
            hub_cpu_s,
            hub_ramp_cpu_s,
            hub_hold_cores,
            hold_reads_per_s,
            ramp_reads,
            hub_idle_rss_mb: idle.rss as f64 / 1e6,
            hub_peak_rss_mb: peak as f64 / 1e6,
            hub_mb_per_session: peak.saturating_sub(idle.rss) as f64
                / 1e6
                / f64::from(created.len().max(1) as u32),
            hub_idle_heap_mb: idle_heap,
            hub_held_heap_mb: held_heap,
            controller_cpu_s: controller_cpu,
            controller_peak_rss_mb: controller_peak as f64 / 1e6,
            left_on_hub,
            left_on_stub,
            wall_s,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hub_cpu_between_samples_is_interpolated() {
        let u = |cpu_s| Usage {
            cpu_s,
            ..Usage::default()
        };
        let samples = vec![(0.0, u(1.0), 0), (2.0, u(3.0), 10), (4.0, u(3.0), 20)];
        assert_eq!(reads_at(&samples, 3.0), Some(15.0));
        assert_eq!(cpu_at(&samples, 1.0), Some(2.0));
        assert_eq!(cpu_at(&samples, 3.0), Some(3.0));
        assert_eq!(cpu_at(&samples, 5.0), None);
    }

    #[test]
    fn the_heap_in_use_is_read_from_jcmd() {
        let text = "12345:\n garbage-first heap   total 262144K, used 81234K [0x0000000080000000, 0x0000000100000000)\n  region size 1024K, 40 young (40960K), 3 survivors (3072K)\n Metaspace       used 60000K, committed 61000K, reserved 1114112K\n";
        assert_eq!(parse_heap_used_kb(text), Some(81234));
    }
}
