//! The controller benchmark: `viewerfleet run` driving N sessions against the WebDriver
//! stub (a separate process), measured from outside as users would run it — peak RSS,
//! CPU seconds, session creations per second — so the controller's own cost per session
//! is visible. The same load can be driven by a WebdriverIO baseline script for a side by
//! side comparison (see BENCHMARKS.md).

use crate::dies_with_parent;
use anyhow::Context;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One benchmark point.
#[derive(Debug, Clone)]
pub struct ControllerBench {
    /// The viewerfleet binary to measure.
    pub binary: PathBuf,
    pub sessions: u32,
    /// Sessions are requested within this time (0 = all at once, bounded by `parallel`).
    pub ramp: Duration,
    /// Time every session is held and sampled after the ramp.
    pub hold: Duration,
    pub sampling_interval: Duration,
    /// Concurrent session requests.
    pub parallel: u32,
    /// Latency the stub adds to every WebDriver answer.
    pub stub_latency: Duration,
    /// Work folder (scenario, run folder).
    pub work_dir: PathBuf,
}

/// What one point measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BenchFigures {
    pub tool: String,
    pub sessions: u32,
    pub sessions_created: u32,
    pub peak_rss_mb: f64,
    pub rss_per_session_kb: f64,
    pub cpu_seconds: f64,
    /// CPU seconds per session per second held: the sampling cost.
    pub cpu_per_session_second_ms: f64,
    pub creations_per_second: f64,
    pub wall_seconds: f64,
    pub script_calls: u64,
}

/// The stub on a runtime of its own (a thread), so the benchmark's main thread can wait
/// for the measured process; stopped when dropped.
struct BackgroundStub {
    addr: String,
    stub: Option<crate::webdriver_stub::Stub>,
    runtime: tokio::runtime::Runtime,
}

impl BackgroundStub {
    fn start(latency: Duration) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let config = crate::webdriver_stub::StubConfig {
            latency,
            ..Default::default()
        };
        let stub = runtime.block_on(crate::webdriver_stub::Stub::serve(
            "127.0.0.1:0".parse().expect("valid address"),
            config,
        ))?;
        Ok(Self {
            addr: stub.addr().to_string(),
            stub: Some(stub),
            runtime,
        })
    }

    fn script_calls(&self) -> u64 {
        self.stub.as_ref().map_or(0, |s| {
            s.counters()
                .script_calls
                .load(std::sync::atomic::Ordering::Relaxed)
        })
    }
}

impl Drop for BackgroundStub {
    fn drop(&mut self) {
        let _guard = self.runtime.enter();
        self.stub.take();
    }
}

/// What the benchmark reads of a run's `raw/viewer_events.jsonl`.
#[derive(serde::Deserialize)]
struct ViewerEvent {
    t: f64,
    viewer: u32,
    event: String,
}

fn read_viewer_events(path: &Path) -> anyhow::Result<Vec<ViewerEvent>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    // A cut-short last line (the run was killed) is skipped, as viewerfleet's reader does.
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

/// Resource use of a finished child: (peak RSS bytes, CPU seconds), from wait4(2).
pub fn wait_with_usage(child: &mut Child) -> anyhow::Result<(std::process::ExitStatus, u64, f64)> {
    use std::os::unix::process::ExitStatusExt;
    let mut status = 0;
    // SAFETY: rusage is plain data, zero-initialised and filled by the kernel.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waiting for our own child with valid out-pointers.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    if pid < 0 {
        anyhow::bail!("wait4: {}", std::io::Error::last_os_error());
    }
    let cpu = usage.ru_utime.tv_sec as f64
        + usage.ru_utime.tv_usec as f64 / 1e6
        + usage.ru_stime.tv_sec as f64
        + usage.ru_stime.tv_usec as f64 / 1e6;
    Ok((
        std::process::ExitStatus::from_raw(status),
        usage.ru_maxrss as u64 * 1024,
        cpu,
    ))
}

impl ControllerBench {
    /// Runs viewerfleet against a fresh stub and measures it.
    pub fn run(&self) -> anyhow::Result<BenchFigures> {
        std::fs::create_dir_all(&self.work_dir)?;
        let stub = BackgroundStub::start(self.stub_latency)?;
        // Room for creating every session at 50/s or faster before the hold: the sampling
        // cost is computed from the session-seconds the raw data shows, not from this.
        let duration = self.ramp + self.hold + Duration::from_millis(self.sessions as u64 * 20);
        let scenario = self.work_dir.join(format!("bench-{}.yaml", self.sessions));
        std::fs::write(
            &scenario,
            format!(
                "name: bench-{n}\ntarget:\n  kind: peertube\n  video: vod\n  url: http://{a}/w/bench\n  exporter: http://{a}/metrics\nviewers:\n  count: {n}\n  ramp: {ramp}ms\nduration: {dur}ms\nsampling_interval: {si}ms\nsteady_window: {win}ms\nmax_failed_viewers: \"100%\"\nfleet:\n  kind: grid\n  url: http://{a}/\n  max_parallel_starts: {p}\n",
                n = self.sessions,
                a = stub.addr,
                ramp = self.ramp.as_millis(),
                dur = duration.as_millis(),
                si = self.sampling_interval.as_millis(),
                win = (self.sampling_interval * 2).max(self.hold / 2).as_millis(),
                p = self.parallel,
            ),
        )?;
        let out = self.work_dir.join(format!("run-{}", self.sessions));
        let _ = std::fs::remove_dir_all(&out);
        let started = Instant::now();
        let mut child = dies_with_parent(&mut Command::new(&self.binary))
            .args(["--quiet", "run", "--no-report"])
            .arg(&scenario)
            .arg("--out")
            .arg(&out)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting viewerfleet run")?;
        let (status, peak_rss, cpu) = wait_with_usage(&mut child)?;
        let wall = started.elapsed().as_secs_f64();
        let script_calls = stub.script_calls();
        drop(stub);
        if !status.success() {
            anyhow::bail!(
                "viewerfleet run exited with {status}; see {}",
                out.display()
            );
        }
        let events = read_viewer_events(&out.join("raw/viewer_events.jsonl"))?;
        let created: Vec<f64> = events
            .iter()
            .filter(|e| e.event == "session_created")
            .map(|e| e.t)
            .collect();
        let creations_per_second = match (
            created.iter().cloned().reduce(f64::min),
            created.iter().cloned().reduce(f64::max),
        ) {
            (Some(a), Some(b)) if b > a => (created.len() - 1) as f64 / (b - a),
            _ => f64::NAN,
        };
        let n = self.sessions.max(1) as f64;
        // Session-seconds sampled: from each viewer's first frame to its stop.
        let mut playing_since = std::collections::HashMap::new();
        let mut session_seconds = 0.0;
        for e in &events {
            match e.event.as_str() {
                "playing" => {
                    playing_since.insert(e.viewer, e.t);
                }
                "stopped" | "lost" | "failed" => {
                    if let Some(t0) = playing_since.remove(&e.viewer) {
                        session_seconds += e.t - t0;
                    }
                }
                _ => {}
            }
        }
        Ok(BenchFigures {
            tool: "viewerfleet".into(),
            sessions: self.sessions,
            sessions_created: created.len() as u32,
            peak_rss_mb: peak_rss as f64 / 1e6,
            rss_per_session_kb: peak_rss as f64 / 1e3 / n,
            cpu_seconds: cpu,
            cpu_per_session_second_ms: cpu * 1000.0 / session_seconds.max(1e-3),
            creations_per_second,
            wall_seconds: wall,
            script_calls,
        })
    }
}

/// The same load driven by WebdriverIO (bench/wdio/baseline.mjs), measured the same way.
pub fn wdio_baseline(bench: &ControllerBench) -> anyhow::Result<BenchFigures> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/wdio/baseline.mjs");
    if !script.with_file_name("node_modules").exists() {
        anyhow::bail!(
            "WebdriverIO is not installed: run `cd bench/wdio && npm ci --ignore-scripts`"
        );
    }
    let stub = BackgroundStub::start(bench.stub_latency)?;
    let (host, port) = stub.addr.rsplit_once(':').context("stub address")?;
    let started = Instant::now();
    let mut child = dies_with_parent(&mut Command::new("node"))
        .arg(&script)
        .args([host, port])
        .arg(bench.sessions.to_string())
        .arg(bench.hold.as_secs().to_string())
        .arg(bench.sampling_interval.as_secs().max(1).to_string())
        .arg(bench.parallel.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("starting node")?;
    let stdout = child.stdout.take().context("node stdout")?;
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut BufReader::new(stdout), &mut text);
        text
    });
    let (status, peak_rss, cpu) = wait_with_usage(&mut child)?;
    let wall = started.elapsed().as_secs_f64();
    let text = reader.join().unwrap_or_default();
    let script_calls = stub.script_calls();
    drop(stub);
    if !status.success() {
        anyhow::bail!("the WebdriverIO baseline exited with {status}");
    }
    let result: serde_json::Value = serde_json::from_str(text.trim()).context("baseline output")?;
    let n = bench.sessions.max(1) as f64;
    Ok(BenchFigures {
        tool: "webdriverio".into(),
        sessions: bench.sessions,
        sessions_created: result["created"].as_u64().unwrap_or(0) as u32,
        peak_rss_mb: peak_rss as f64 / 1e6,
        rss_per_session_kb: peak_rss as f64 / 1e3 / n,
        cpu_seconds: cpu,
        cpu_per_session_second_ms: cpu * 1000.0 / (n * bench.hold.as_secs_f64().max(1e-3)),
        creations_per_second: result["creationsPerSecond"].as_f64().unwrap_or(f64::NAN),
        wall_seconds: wall,
        script_calls,
    })
}
