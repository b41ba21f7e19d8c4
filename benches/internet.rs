//! The internet's cost, measured: `cargo bench --bench internet` (as root) runs one seed
//! scenario four ways on this machine, 8 viewers each, and prints their P2P share side by
//! side with the internet mix's connectivity table:
//!
//! 1. `2023`: `scenarios/local/<s>.yaml` on the netns fleet with `--apply http-only`: every
//!    viewer public, identical 2000/300 kbit/s links on HTTP only, WebRTC free, nobody
//!    leaving — the PeerTube 2023 conditions;
//! 2. `faithful`: the same with `--apply tc`: the same links, real for WebRTC too;
//! 3. `public-mix`: `scenarios/internet/<s>.yaml` with every class public (`nat: none`,
//!    `stack: dual`): the mix's links and churn, nobody behind a NAT;
//! 4. `internet-mix`: `scenarios/internet/<s>.yaml` as shipped.
//!
//! `VIEWERFLEET_BENCH_INTERNET_SCENARIO` picks the seed (`live-high` by default; `vod`,
//! `live-normal`, `live-high-half-p2p-off`). `VIEWERFLEET_BENCH_INTERNET_DIR=DIR` prints the
//! figures of a folder an earlier bench wrote, without running anything. Each run's report
//! says how busy the machine was (its headroom section): the bench prints it beside every
//! figure, because a starved page falls back to HTTP.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const RUNS: [&str; 4] = ["2023", "faithful", "public-mix", "internet-mix"];

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!(
            "internet bench: run it as root with `cargo bench --bench internet` (about 15 minutes)"
        );
        return;
    }
    let scenario = std::env::var("VIEWERFLEET_BENCH_INTERNET_SCENARIO")
        .unwrap_or_else(|_| "live-high".to_string());
    let dir = match std::env::var("VIEWERFLEET_BENCH_INTERNET_DIR") {
        Ok(dir) => PathBuf::from(dir),
        Err(_) => run_all(&scenario),
    };
    summarize(&dir, &scenario);
}

fn run_all(scenario: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let base = root
        .join("runs")
        .join(format!("bench-internet-{scenario}-{stamp}"));
    std::fs::create_dir_all(&base).expect("the bench's folder");
    let seed = root.join(format!("scenarios/local/{scenario}.yaml"));
    let mix = root.join(format!("scenarios/internet/{scenario}.yaml"));
    let public = base.join("public-mix.yaml");
    std::fs::write(&public, all_public(&std::fs::read_to_string(&mix).unwrap()))
        .expect("writing the public variant");
    for name in RUNS {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_viewerfleet"));
        cmd.current_dir(root).args(["--quiet", "run"]);
        match name {
            "2023" | "faithful" => {
                let apply = if name == "2023" { "http-only" } else { "tc" };
                cmd.arg(&seed).args([
                    "--viewers",
                    "8",
                    "--per-browser",
                    "1",
                    "--fleet",
                    "netns",
                    "--apply",
                    apply,
                ]);
            }
            "public-mix" => {
                cmd.arg(&public);
            }
            _ => {
                cmd.arg(&mix);
            }
        }
        let out = base.join(name);
        cmd.arg("--out").arg(&out);
        eprintln!("internet bench: {name} → {}", out.display());
        match cmd.status() {
            Ok(status) if !status.success() => eprintln!("{name} exited with {status}"),
            Err(err) => eprintln!("{name} did not start: {err}"),
            Ok(_) => {}
        }
    }
    base
}

/// The scenario with every class public: `nat: none`, `stack: dual` (links and churn kept).
fn all_public(yaml: &str) -> String {
    yaml.lines()
        .map(|line| {
            let mut l = line.to_string();
            for nat in ["home", "cgnat", "symmetric"] {
                l = l.replace(&format!("nat: {nat}"), "nat: none");
                // Class names say their NAT: `fibre/home` becomes `fibre/none`.
                l = l.replace(&format!("/{nat}}}"), "/none}");
            }
            l = l
                .replace("stack: ipv4", "stack: dual")
                .replace("stack: ipv6", "stack: dual");
            l.replace("name: internet-", "name: public-mix-")
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

fn pct(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{:.1}%", v * 100.0))
}

fn summarize(dir: &Path, scenario: &str) {
    println!(
        "internet bench, scenario {scenario}, runs in {}",
        dir.display()
    );
    println!(
        "{:<13} {:>8} {:>9} {:>10} {:>8} {:>10} {:>12} {:>12}",
        "run",
        "started",
        "host busy",
        "saturated",
        "finding",
        "P2P share",
        "w/ headroom",
        "left/repl."
    );
    let mut mix_report = None;
    for name in RUNS {
        let Ok(bytes) = std::fs::read(dir.join(name).join("report.json")) else {
            println!("{name:<13} (no report)");
            continue;
        };
        let Ok(r) = serde_json::from_slice::<Value>(&bytes) else {
            println!("{name:<13} (report unreadable)");
            continue;
        };
        let churn = &r["churn"];
        println!(
            "{:<13} {:>8} {:>9} {:>10} {:>8} {:>10} {:>12} {:>12}",
            name,
            r["viewers"]["started"].as_u64().unwrap_or(0),
            pct(r["honesty"]["cpu"]["mean_busy"].as_f64()),
            if r["honesty"]["cpu"]["saturated"].as_bool().unwrap_or(false) {
                "SATURATED"
            } else {
                "no"
            },
            match r["headroom"]["verdict"].as_str() {
                Some("finding") => "yes",
                Some("not-a-finding") => "NO",
                _ => "-",
            },
            pct(r["players"]["p2p_savings"].as_f64()),
            pct(r["headroom"]["figures"]["with_headroom"]["p2p_savings"].as_f64()),
            if churn.is_object() {
                format!(
                    "{}/{}",
                    churn["left"].as_u64().unwrap_or(0),
                    churn["replacements"].as_u64().unwrap_or(0)
                )
            } else {
                "-".into()
            },
        );
        if name == "internet-mix" {
            mix_report = Some(r);
        }
    }
    println!("\nP2P share: the players' P2P bytes over HTTP + P2P in the steady window (report: p2p_savings).");
    let Some(r) = mix_report else { return };
    let c = &r["connectivity"];
    println!("\ninternet-mix, by class (each viewer's whole watch):");
    println!(
        "{:<18} {:<10} {:>7} {:>10} {:>10}",
        "class", "NAT", "viewers", "with P2P", "P2P share"
    );
    for k in c["classes"].as_array().into_iter().flatten() {
        println!(
            "{:<18} {:<10} {:>7} {:>10} {:>10}",
            k["class"].as_str().unwrap_or("?"),
            k["nat"].as_str().unwrap_or("?"),
            k["viewers"].as_u64().unwrap_or(0),
            k["viewers_connected"].as_u64().unwrap_or(0),
            pct(k["p2p_share"].as_f64())
        );
    }
    println!("\ninternet-mix, connections by class pair (as each viewer's page saw them):");
    println!(
        "{:<18} {:<18} {:>8} {:>11} {:>6} {:>8}  established over",
        "viewer", "peer", "answered", "established", "failed", "checking"
    );
    for p in c["pairs"].as_array().into_iter().flatten() {
        let via = p["via"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| format!("{k}: {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        println!(
            "{:<18} {:<18} {:>8} {:>11} {:>6} {:>8}  {}",
            p["from"].as_str().unwrap_or("?"),
            p["to"].as_str().unwrap_or("?"),
            p["attempted"].as_u64().unwrap_or(0),
            p["established"].as_u64().unwrap_or(0),
            p["failed"].as_u64().unwrap_or(0),
            p["pending"].as_u64().unwrap_or(0),
            if via.is_empty() { "—".into() } else { via }
        );
    }
    for n in c["notes"].as_array().into_iter().flatten() {
        println!("- {}", n.as_str().unwrap_or(""));
    }
    if let Some(h) = r["headroom"]["headline"].as_str() {
        println!("\ninternet-mix headroom: {h}");
    }
}
