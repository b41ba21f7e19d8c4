//! What a light peer costs, measured: `cargo bench --bench light_peers` runs
//! `scenarios/local/live-normal.yaml` (the live rendition, the 2023 conditions on HTTP) with
//! 4 real viewers and 0, 50, 100 and 200 light peers beside them, one run each, and prints
//! per run the host's busy share and the browsers' memory over the steady window, the cost of
//! one light peer (the difference to the run without, per peer), whether every viewer and
//! every page of light peers had headroom, and the swarm's P2P savings at T.
//!
//! `VIEWERFLEET_BENCH_LIGHT_PEERS=0,100,300` picks the steps,
//! `VIEWERFLEET_BENCH_LIGHT_RUNTIME=node|browser` what runs them (default: the scenario's,
//! `browser`); `VIEWERFLEET_BENCH_LIGHT_DIR=DIR`
//! prints the figures of a folder an earlier bench wrote, without running anything. The
//! machine must be otherwise idle: each run's report says how busy it was.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "support/run_files.rs"]
mod run_files;
use run_files::{jsonl, read_json, steady_window};

const SCENARIO: &str = "scenarios/local/live-normal.yaml";
const REAL_VIEWERS: &str = "4";
const DEFAULT_STEPS: [u32; 4] = [0, 50, 100, 200];

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("light_peers bench: run it with `cargo bench --bench light_peers` (about 22 minutes, idle machine)");
        return;
    }
    let steps: Vec<u32> = match std::env::var("VIEWERFLEET_BENCH_LIGHT_PEERS") {
        Ok(list) => list
            .split(',')
            .map(|s| {
                s.trim()
                    .parse()
                    .expect("VIEWERFLEET_BENCH_LIGHT_PEERS: a comma list of numbers")
            })
            .collect(),
        Err(_) => DEFAULT_STEPS.to_vec(),
    };
    let dir = match std::env::var("VIEWERFLEET_BENCH_LIGHT_DIR") {
        Ok(dir) => PathBuf::from(dir),
        Err(_) => run_all(&steps),
    };
    summarize(&dir, &steps);
}

fn run_all(steps: &[u32]) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let base = root.join("runs").join(format!("bench-light-{stamp}"));
    std::fs::create_dir_all(&base).expect("the bench's folder");
    let runtime = std::env::var("VIEWERFLEET_BENCH_LIGHT_RUNTIME").ok();
    for &n in steps {
        let out = base.join(format!("light-{n}"));
        eprintln!(
            "light_peers bench: 4 viewers + {n} light peers → {}",
            out.display()
        );
        let status = Command::new(env!("CARGO_BIN_EXE_viewerfleet"))
            .current_dir(root)
            .args(["--quiet", "run", SCENARIO, "--viewers", REAL_VIEWERS])
            .args(["--light-peers", &n.to_string(), "--fleet", "local"])
            .args(
                runtime
                    .iter()
                    .flat_map(|r| ["--light-runtime".to_string(), r.clone()]),
            )
            .arg("--out")
            .arg(&out)
            .status()
            .expect("running viewerfleet");
        if !status.success() {
            eprintln!("light_peers bench: the run with {n} light peers exited with {status}");
        }
    }
    base
}

/// One run's figures over its steady window.
struct Step {
    light: u32,
    busy: Option<f64>,
    pss_mb: Option<f64>,
    savings: Option<f64>,
    headroom: String,
    light_line: String,
}

fn summarize(dir: &Path, steps: &[u32]) {
    let rows: Vec<Step> = steps
        .iter()
        .map(|&n| step(&dir.join(format!("light-{n}")), n))
        .collect();
    let base = rows.iter().find(|r| r.light == 0);
    println!(
        "\nlight peers beside 4 real viewers, {SCENARIO}, fleet local ({})",
        dir.display()
    );
    println!(
        "{:>6}  {:>9}  {:>12}  {:>14}  {:>14}  {:>11}  headroom",
        "light", "host busy", "members MB", "cores per peer", "MB per peer", "P2P at T"
    );
    for r in &rows {
        let per_peer = |now: Option<f64>, then: Option<f64>, scale: f64| match (now, then) {
            (Some(a), Some(b)) if r.light > 0 => format!("{:.4}", (a - b) * scale / r.light as f64),
            _ => "-".into(),
        };
        let cores = cores();
        println!(
            "{:>6}  {:>9}  {:>12}  {:>14}  {:>14}  {:>11}  {}",
            r.light,
            r.busy.map_or("-".into(), |b| format!("{:.0}%", b * 100.0)),
            r.pss_mb.map_or("-".into(), |m| format!("{m:.0}")),
            per_peer(r.busy, base.and_then(|b| b.busy), cores),
            per_peer(r.pss_mb, base.and_then(|b| b.pss_mb), 1.0),
            r.savings
                .map_or("-".into(), |s| format!("{:.1}%", s * 100.0)),
            r.headroom
        );
        if !r.light_line.is_empty() {
            println!("        {}", r.light_line);
        }
    }
}

fn cores() -> f64 {
    std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64)
}

fn step(run: &Path, light: u32) -> Step {
    let report = read_json(&run.join("report.json"));
    let (from, to) = steady_window(run);
    let samples: Vec<Value> = jsonl(&run.join("raw/host_samples.jsonl"))
        .into_iter()
        .filter(|s| s["t"].as_f64().is_some_and(|t| t >= from && t <= to))
        .collect();
    let mean = |field: &str| -> Option<f64> {
        let v: Vec<f64> = samples.iter().filter_map(|s| s[field].as_f64()).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    // report.json is the run's summary: the players' (the swarm's) figures at T.
    let summary = report.as_ref();
    let savings = summary.and_then(|s| s["players"]["p2p_savings"].as_f64());
    let headroom = summary
        .and_then(|s| s["headroom"]["headline"].as_str().map(str::to_string))
        .unwrap_or_else(|| "no report".into());
    let light_line = summary
        .and_then(|s| s.get("light"))
        .filter(|l| !l.is_null())
        .map(|l| {
            let host = &l["host_cost"];
            format!(
                "light peers ({}): {} of {} started, {} segments late, {} of {} pages starved{}",
                l["runtime"].as_str().unwrap_or("browser"),
                l["started"],
                l["planned"],
                l["segments_late"],
                l["starved_groups"].as_array().map_or(0, |a| a.len()),
                l["groups_judged"],
                host["cores"].as_f64().map_or(String::new(), |c| format!(
                    "; their Node.js hosts {c:.2} cores, {:.4} cores and {:.1} MB per peer",
                    host["cores_per_peer"].as_f64().unwrap_or(0.0),
                    host["pss_bytes_per_peer"].as_f64().unwrap_or(0.0) / 1e6
                ))
            )
        })
        .unwrap_or_default();
    Step {
        light,
        busy: mean("cpu_busy"),
        // Browsers and Node.js light hosts together: what the run's members hold.
        pss_mb: mean("own_browsers_pss_bytes")
            .map(|b| (b + mean("light_hosts_pss_bytes").unwrap_or(0.0)) / 1e6),
        savings,
        headroom,
        light_line,
    }
}
