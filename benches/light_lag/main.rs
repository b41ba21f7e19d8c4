//! Where a light peers' host starts to bias the swarm, measured: `cargo bench --bench light_lag`
//! runs `scenarios/local/live-normal.yaml` with 4 real viewers and 25 light peers in one
//! Node.js host, and blocks that host's JavaScript thread at five levels (none; two about as late as
//! the hosts of the 4 + 100 run; about three times that; stalls past the P2P engine's 2 s
//! timeout), `stall.mjs` preloaded into the host. Each level runs twice, interleaved. Printed
//! per run: the host's timer lag over the steady window (what the light pages' rule judges),
//! the light peers' and the viewers' P2P shares there, the swarm's P2P savings at T, the
//! viewers' stalls, the engines' P2P timeouts, late light segments and the machine's busy
//! share; then per level its mean against the unblocked runs', so the rule's threshold can
//! sit below the first level whose figures move with lateness.
//!
//! `VIEWERFLEET_BENCH_LAG_ROUNDS=3` runs each level more times; `VIEWERFLEET_BENCH_LAG_DIR=DIR`
//! prints the figures of a folder an earlier bench wrote, without running anything. About
//! 50 minutes; the machine must be otherwise idle: each run's report says how busy it was.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "../support/run_files.rs"]
mod run_files;
use run_files::{jsonl, read_json, steady_window};

const SCENARIO: &str = "scenarios/local/live-normal.yaml";

/// A level of blocking: its name and `VIEWERFLEET_LIGHT_STALL` (min,max ms blocked; min,max
/// ms running between), chosen so the host's timer runs about as late as the lag meter
/// showed: L1 and L2 around the hosts of the 4 + 100 run (28–64 ms late on average), L3 about
/// three times that, L4 past the P2P engine's 2 s timeout.
const LEVELS: [(&str, &str); 5] = [
    ("L0", ""),
    ("L1", "60,450,400,1400"),
    ("L2", "100,600,300,1200"),
    ("L3", "200,1400,400,1000"),
    ("L4", "1500,4000,500,1500"),
];

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("light_lag bench: run it with `cargo bench --bench light_lag` (about 50 minutes, idle machine)");
        return;
    }
    let rounds: u32 = std::env::var("VIEWERFLEET_BENCH_LAG_ROUNDS")
        .ok()
        .map(|r| {
            r.trim()
                .parse()
                .expect("VIEWERFLEET_BENCH_LAG_ROUNDS: a number of rounds, e.g. 2")
        })
        .unwrap_or(2);
    let dir = match std::env::var("VIEWERFLEET_BENCH_LAG_DIR") {
        Ok(dir) => PathBuf::from(dir),
        Err(_) => run_all(rounds),
    };
    summarize(&dir);
}

fn run_all(rounds: u32) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let stall = root.join("benches/light_lag/stall.mjs");
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let base = root.join("runs").join(format!("bench-lag-{stamp}"));
    std::fs::create_dir_all(&base).expect("the bench's folder");
    for round in 1..=rounds {
        for (level, spec) in LEVELS {
            let out = base.join(format!("{level}-r{round}"));
            eprintln!(
                "light_lag bench: {level} (stalls {spec:?}) → {}",
                out.display()
            );
            let status = Command::new(env!("CARGO_BIN_EXE_viewerfleet"))
                .current_dir(root)
                .env("NODE_OPTIONS", format!("--import={}", stall.display()))
                .env("VIEWERFLEET_LIGHT_STALL", spec)
                .args(["--quiet", "run", SCENARIO, "--viewers", "4"])
                .args(["--light-peers", "25", "--light-runtime", "node"])
                .args(["--fleet", "local", "--out"])
                .arg(&out)
                .status()
                .expect("running viewerfleet");
            if !status.success() {
                eprintln!("light_lag bench: {level} round {round} exited with {status}");
            }
        }
    }
    base
}

/// One run's figures over its steady window.
struct Run {
    name: String,
    lag: Option<(f64, f64, f64)>,
    light_p2p_share: Option<f64>,
    viewers_p2p_share: Option<f64>,
    savings: Option<f64>,
    stalls: Option<f64>,
    timeouts: Option<u64>,
    late: Option<u64>,
    busy: Option<f64>,
}

fn summarize(dir: &Path) {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.path().join("report.json").exists())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    println!(
        "\n4 viewers + 25 light peers in one Node.js host, its thread blocked, {SCENARIO} ({})",
        dir.display()
    );
    println!(
        "{:<6}  {:>9}  {:>10}  {:>10}  {:>11}  {:>11}  {:>10}  {:>12}  {:>8}  {:>12}  {:>9}",
        "run",
        "mean late",
        ">100 ms",
        "worst",
        "light P2P",
        "viewers P2P",
        "P2P at T",
        "stalls/v-min",
        "timeouts",
        "segs late",
        "host busy"
    );
    let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.1}%", v * 100.0));
    let runs: Vec<Run> = names
        .into_iter()
        .map(|name| run(&dir.join(&name), name))
        .collect();
    for r in &runs {
        let (mean, share, worst) = r.lag.map_or(("-".into(), "-".into(), "-".into()), |l| {
            (
                format!("{:.0} ms", l.0),
                format!("{:.1}%", l.1 * 100.0),
                format!("{:.0} ms", l.2),
            )
        });
        println!(
            "{:<6}  {:>9}  {:>10}  {:>10}  {:>11}  {:>11}  {:>10}  {:>12}  {:>8}  {:>12}  {:>9}",
            r.name,
            mean,
            share,
            worst,
            pct(r.light_p2p_share),
            pct(r.viewers_p2p_share),
            pct(r.savings),
            r.stalls.map_or("-".into(), |s| format!("{s:.3}")),
            r.timeouts.map_or("-".into(), |t| t.to_string()),
            r.late.map_or("-".into(), |t| t.to_string()),
            pct(r.busy)
        );
    }
    verdicts(&runs);
}

/// One of a run's figures, read from it.
type Figure = fn(&Run) -> Option<f64>;

/// Per level, the mean of its runs against the unblocked runs' mean (points; `*` beyond
/// the 5 points `fidelity` allows) for the swarm's P2P savings at T, the light peers' and the
/// viewers' P2P shares, and its late light segments: where the figures start to move with
/// lateness, which is where the light pages' rule belongs.
fn verdicts(runs: &[Run]) {
    let level = |r: &Run| r.name.split('-').next().unwrap_or("").to_string();
    let mean_of = |of: &[&Run], f: Figure| {
        let v: Vec<f64> = of.iter().filter_map(|r| f(r)).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let figures: [(&str, Figure); 3] = [
        ("swarm's P2P at T", |r| r.savings),
        ("light P2P", |r| r.light_p2p_share),
        ("viewers' P2P", |r| r.viewers_p2p_share),
    ];
    let base: Vec<&Run> = runs.iter().filter(|r| level(r) == "L0").collect();
    if base.is_empty() {
        println!(
            "
no unblocked run (L0): nothing to hold the levels against"
        );
        return;
    }
    println!(
        "
per level, its runs' mean against the {} unblocked runs' (points; * beyond ±5):",
        base.len()
    );
    let mut levels: Vec<String> = runs.iter().map(level).filter(|l| l != "L0").collect();
    levels.dedup();
    for l in levels {
        let of_level: Vec<&Run> = runs.iter().filter(|r| level(r) == l).collect();
        let lateness: Vec<String> = of_level
            .iter()
            .filter_map(|r| r.lag.map(|lag| format!("{:.0}", lag.0)))
            .collect();
        let moved: Vec<String> = figures
            .iter()
            .filter_map(|(what, f)| {
                let d = (mean_of(&of_level, *f)? - mean_of(&base, *f)?) * 100.0;
                Some(format!(
                    "{what} {d:+.1}{}",
                    if d.abs() > 5.0 { "*" } else { "" }
                ))
            })
            .collect();
        let late: u64 = of_level.iter().filter_map(|r| r.late).sum();
        println!(
            "  {l} ({} ms late on average): {}; {late} late light segments",
            lateness.join(", "),
            moved.join(", ")
        );
    }
}

fn run(dir: &Path, name: String) -> Run {
    let report = read_json(&dir.join("report.json"));
    let (from, to) = steady_window(dir);
    let in_window = |s: &Value| s["t"].as_f64().is_some_and(|t| t >= from && t <= to);
    let light: Vec<Value> = jsonl(&dir.join("raw/light_samples.jsonl"))
        .into_iter()
        .filter(|s| in_window(s))
        .collect();
    // Each member's counters grow: the steady window's bytes are its last read minus its first.
    let light_share = p2p_share(&light, "peer");
    let viewers: Vec<Value> = jsonl(&dir.join("raw/viewer_samples.jsonl"))
        .into_iter()
        .filter(|s| in_window(s))
        .collect();
    let viewers_share = p2p_share(&viewers, "viewer");
    // The host's lag meter, shared by its peers: one peer's reads carry it; its worst tick
    // is the one since the previous read.
    let peer0: Vec<&Value> = light
        .iter()
        .filter(|s| s["peer"].as_u64() == Some(0))
        .collect();
    let worst = peer0
        .iter()
        .filter_map(|s| s["lag"]["max_ms"].as_f64())
        .fold(0.0, f64::max);
    let lag = peer0.first().zip(peer0.last()).and_then(|(a, b)| {
        let d = |f: &str| b["lag"][f].as_f64().unwrap_or(0.0) - a["lag"][f].as_f64().unwrap_or(0.0);
        let ticks = d("ticks");
        (ticks > 0.0).then(|| (d("late_ms") / ticks, d("late_ticks") / ticks, worst))
    });
    let host: Vec<f64> = jsonl(&dir.join("raw/host_samples.jsonl"))
        .iter()
        .filter(|s| in_window(s))
        .filter_map(|s| s["cpu_busy"].as_f64())
        .collect();
    let report = report.as_ref();
    Run {
        name,
        lag,
        light_p2p_share: light_share,
        viewers_p2p_share: viewers_share,
        savings: report.and_then(|r| r["players"]["p2p_savings"].as_f64()),
        stalls: report.and_then(|r| r["qoe"]["stalls_per_viewer_minute"].as_f64()),
        timeouts: report.and_then(|r| r["p2p_reconciliation"]["p2p_timeouts"].as_u64()),
        late: report.and_then(|r| r["light"]["segments_late"].as_u64()),
        busy: (!host.is_empty()).then(|| host.iter().sum::<f64>() / host.len() as f64),
    }
}

/// P2P share of the members' downloads over the samples given: each member's last read
/// minus its first (`key`: `peer` or `viewer`).
fn p2p_share(samples: &[Value], key: &str) -> Option<f64> {
    let mut first = std::collections::BTreeMap::<u64, &Value>::new();
    let mut last = std::collections::BTreeMap::<u64, &Value>::new();
    for s in samples {
        let Some(member) = s[key].as_u64() else {
            continue;
        };
        first.entry(member).or_insert(s);
        last.insert(member, s);
    }
    let delta = |field: &str| -> f64 {
        last.iter()
            .map(|(m, l)| {
                l[field].as_f64().unwrap_or(0.0) - first[m][field].as_f64().unwrap_or(0.0)
            })
            .sum()
    };
    let (http, p2p) = (delta("http_down_bytes"), delta("p2p_down_bytes"));
    (http + p2p > 0.0).then(|| p2p / (http + p2p))
}
