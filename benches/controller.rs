//! Controller benchmark: `cargo bench --bench controller` (release build).
//! Sizes from VIEWERFLEET_BENCH_SESSIONS (default 1000,5000,10000); hold from
//! VIEWERFLEET_BENCH_HOLD_S (default 30). With VIEWERFLEET_BENCH_WDIO=1 the WebdriverIO
//! baseline (bench/wdio, `npm ci` there first) drives the same load for comparison.

use std::time::Duration;
use viewerfleet_kit::controller_bench::{wdio_baseline, ControllerBench};

fn main() {
    // `cargo test --all-targets` runs this too (without `--bench`): then one small point,
    // which must produce its figures, proves the harness works.
    let smoke = !std::env::args().any(|a| a == "--bench")
        && std::env::var_os("VIEWERFLEET_BENCH_SESSIONS").is_none();
    let default_sizes = if smoke { "5" } else { "1000,5000,10000" };
    let sizes: Vec<u32> = std::env::var("VIEWERFLEET_BENCH_SESSIONS")
        .unwrap_or_else(|_| default_sizes.into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let hold = Duration::from_secs(
        std::env::var("VIEWERFLEET_BENCH_HOLD_S")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(if smoke { 6 } else { 30 }),
    );
    let with_wdio = std::env::var("VIEWERFLEET_BENCH_WDIO").is_ok_and(|v| v == "1");
    let work = std::env::temp_dir().join(format!("viewerfleet-bench-{}", std::process::id()));
    println!(
        "{:<12} {:>8} {:>8} {:>10} {:>12} {:>10} {:>14} {:>12} {:>8}",
        "tool",
        "sessions",
        "created",
        "peak MB",
        "KB/session",
        "CPU s",
        "CPU ms/sess·s",
        "creations/s",
        "wall s"
    );
    for &n in &sizes {
        let bench = ControllerBench {
            binary: env!("CARGO_BIN_EXE_viewerfleet").into(),
            sessions: n,
            ramp: Duration::ZERO,
            hold,
            sampling_interval: Duration::from_secs(2),
            parallel: 64,
            stub_latency: Duration::ZERO,
            work_dir: work.clone(),
        };
        let mut rows = vec![bench.run()];
        if with_wdio {
            rows.push(wdio_baseline(&bench));
        }
        for row in rows {
            if smoke {
                if let Ok(f) = &row {
                    assert_eq!(f.sessions_created, n, "every session created");
                    assert!(f.peak_rss_mb > 0.0 && f.cpu_seconds > 0.0 && f.script_calls > 0);
                }
            }
            match row {
                Ok(f) => println!(
                    "{:<12} {:>8} {:>8} {:>10.1} {:>12.1} {:>10.2} {:>14.3} {:>12.1} {:>8.1}",
                    f.tool,
                    f.sessions,
                    f.sessions_created,
                    f.peak_rss_mb,
                    f.rss_per_session_kb,
                    f.cpu_seconds,
                    f.cpu_per_session_second_ms,
                    f.creations_per_second,
                    f.wall_seconds
                ),
                Err(e) if smoke => panic!("{n} sessions: the benchmark produced no figures: {e:#}"),
                Err(e) => println!("{n} sessions: failed: {e:#}"),
            }
        }
    }
    let _ = std::fs::remove_dir_all(&work);
}
