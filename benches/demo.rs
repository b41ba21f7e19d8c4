//! The demo, repeated: `cargo bench --bench demo` runs the four demo scenarios the way
//! `make demo` does (as root: the netns fleet under http-only and tc; otherwise the local
//! fleet under http-only), `VIEWERFLEET_BENCH_DEMO_REPEAT` times (default 3) in a row, and
//! prints for every run the swarm size its governed ramp chose, whether the host had
//! headroom, and its P2P savings; then, per scenario, how far apart the repeats' P2P
//! savings are. `VIEWERFLEET_BENCH_DEMO_DIRS=a,b,c` prints the same for suite folders that
//! already exist, without running anything. Like `make demo`, the first demo sizes the
//! swarm and the next ones keep its size (`--swarm-size-file`). See BENCHMARKS.md.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const SCENARIOS: [&str; 4] = [
    "scenarios/local/live-normal.yaml",
    "scenarios/local/live-high.yaml",
    "scenarios/local/live-high-half-p2p-off.yaml",
    "scenarios/local/vod.yaml",
];

/// As `make demo` (DEMO_REPEATS): the run whose figure moves most from run to run is run
/// three times within each demo, and the demo's figure for it is their mean.
const RUN_REPEATS: [&str; 1] = ["live-normal@http-only=3"];

/// How far apart (max − min) the repeats of one scenario may be: within ±5 points of each
/// other.
const SPREAD_GOAL_POINTS: f64 = 5.0;

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        // `cargo test --all-targets` builds and starts every bench; a demo takes half an
        // hour, so only `cargo bench --bench demo` runs it.
        println!("demo bench: run it with `cargo bench --bench demo` (about 49 minutes a repeat)");
        return;
    }
    let dirs = match std::env::var("VIEWERFLEET_BENCH_DEMO_DIRS") {
        Ok(list) => list.split(',').map(PathBuf::from).collect(),
        Err(_) => run_demos(),
    };
    summarize(&dirs);
}

fn run_demos() -> Vec<PathBuf> {
    let repeat: u32 = std::env::var("VIEWERFLEET_BENCH_DEMO_REPEAT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let base = root.join("runs").join(format!("bench-demo-{stamp}"));
    // SAFETY: geteuid has no preconditions.
    let as_root = unsafe { libc::geteuid() } == 0;
    (1..=repeat)
        .map(|i| {
            let out = base.join(format!("demo-{i}"));
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_viewerfleet"));
            cmd.current_dir(root).arg("suite").args(SCENARIOS);
            if as_root {
                cmd.args(["--fleet", "netns", "--apply", "http-only,tc"]);
            } else {
                cmd.args(["--apply", "http-only"]);
            }
            // As `make demo` on a fresh machine: the first demo sizes the swarm, the next
            // ones keep that size.
            for repeat in RUN_REPEATS {
                cmd.args(["--repeat-run", repeat]);
            }
            cmd.arg("--swarm-size-file")
                .arg(base.join("swarm-size.json"))
                .arg("--out")
                .arg(&out);
            eprintln!("demo {i} of {repeat}: {}", out.display());
            match cmd.status() {
                Ok(status) if !status.success() => eprintln!("demo {i} exited with {status}"),
                Err(err) => eprintln!("demo {i} did not start: {err}"),
                Ok(_) => {}
            }
            out
        })
        .collect()
}

/// One run's figures, from its report.json.
struct RunFigures {
    name: String,
    requested: u64,
    settled_why: Option<String>,
    host_busy_mean: Option<f64>,
    saturated: bool,
    finding: Option<bool>,
    p2p_savings: Option<f64>,
    with_headroom: Option<f64>,
    /// The players' P2P share of all bytes over the whole run (a VOD whose players fetched
    /// the whole video before T has no figure at T, but has this one).
    whole_run: Option<f64>,
}

fn read_run(dir: &Path) -> Option<RunFigures> {
    let report: Value =
        serde_json::from_slice(&std::fs::read(dir.join("report.json")).ok()?).ok()?;
    let events = std::fs::read_to_string(dir.join("raw/run_events.jsonl")).unwrap_or_default();
    let settled_why = events
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["event"] == "ramp_settled")
        .and_then(|e| e["detail"].as_str().map(str::to_string));
    let players = &report["players"];
    Some(RunFigures {
        name: dir.file_name()?.to_string_lossy().into_owned(),
        requested: report["viewers"]["requested"].as_u64().unwrap_or(0),
        settled_why,
        host_busy_mean: report["honesty"]["cpu"]["mean_busy"].as_f64(),
        saturated: report["honesty"]["cpu"]["saturated"]
            .as_bool()
            .unwrap_or(false),
        finding: report["headroom"]["verdict"]
            .as_str()
            .and_then(|v| match v {
                "finding" => Some(true),
                "not-a-finding" => Some(false),
                _ => None,
            }),
        p2p_savings: players["p2p_savings"].as_f64(),
        with_headroom: report["headroom"]["figures"]["with_headroom"]["p2p_savings"].as_f64(),
        whole_run: match (
            players["http_bytes"].as_f64(),
            players["p2p_bytes"].as_f64(),
        ) {
            (Some(h), Some(p)) if h + p > 0.0 => Some(p / (h + p)),
            _ => None,
        },
    })
}

/// A run folder's scenario: its name without the suite's repeat number
/// (`live-normal@http-only-2` → `live-normal@http-only`).
fn scenario_of(run: &str) -> &str {
    match run.rsplit_once('-') {
        Some((name, k)) if !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => run,
    }
}

fn pct(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{:.1}%", v * 100.0))
}

fn summarize(dirs: &[PathBuf]) {
    let mut by_scenario: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    println!(
        "{:<8} {:<34} {:>7} {:>9} {:>10} {:>8} {:>12} {:>12} {:>10}",
        "demo",
        "run",
        "viewers",
        "host busy",
        "saturated",
        "finding",
        "P2P savings",
        "w/ headroom",
        "whole run"
    );
    for (i, dir) in dirs.iter().enumerate() {
        let mut runs: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.join("report.json").exists())
                    .collect()
            })
            .unwrap_or_default();
        runs.sort();
        // A demo's figure per scenario: the mean of its runs of that scenario (one, or the
        // RUN_REPEATS of a scenario run several times).
        let mut in_demo: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for run in runs.iter().filter_map(|r| read_run(r)) {
            println!(
                "{:<8} {:<34} {:>7} {:>9} {:>10} {:>8} {:>12} {:>12} {:>10}",
                i + 1,
                run.name,
                run.requested,
                pct(run.host_busy_mean),
                if run.saturated { "SATURATED" } else { "no" },
                run.finding.map_or("-", |f| if f { "yes" } else { "NO" }),
                pct(run.p2p_savings),
                pct(run.with_headroom),
                pct(run.whole_run),
            );
            if let Some(why) = &run.settled_why {
                println!("{:<8}   settled: {why}", "");
            }
            let scenario = scenario_of(&run.name);
            if let Some(s) = run.p2p_savings {
                in_demo
                    .entry(format!("{scenario} at T"))
                    .or_default()
                    .push(s * 100.0);
            }
            if let Some(s) = run.whole_run {
                in_demo
                    .entry(format!("{scenario} whole run"))
                    .or_default()
                    .push(s * 100.0);
            }
        }
        for (name, values) in in_demo {
            let mean = values.iter().sum::<f64>() / values.len() as f64;
            if values.len() > 1 {
                println!(
                    "{:<8} {name}: mean of {} runs {mean:.1}%",
                    i + 1,
                    values.len()
                );
            }
            by_scenario.entry(name).or_default().push(mean);
        }
    }
    println!("\nP2P savings across the demos (points; each demo's mean where it ran a scenario more than once):");
    for (name, values) in &by_scenario {
        let max = values.iter().copied().fold(f64::MIN, f64::max);
        let min = values.iter().copied().fold(f64::MAX, f64::min);
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        println!(
            "  {name:<44} n={} mean {mean:.1}  min {min:.1}  max {max:.1}  spread {:.1} ({})",
            values.len(),
            max - min,
            if max - min <= SPREAD_GOAL_POINTS {
                "within 5 points"
            } else {
                "NOT within 5 points"
            }
        );
    }
}
