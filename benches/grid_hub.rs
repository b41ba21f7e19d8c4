//! Hub benchmark: `cargo bench --bench grid_hub` (release build; Java 17 and `make
//! grid-deps`; minutes per point). A real Selenium Grid 4 hub (`grid/hub.toml`, the jar of
//! `grid/package.json`) with relay nodes in front of the kit's WebDriver stub: session
//! creations per second (first minute, whole ramp), the hub's CPU during the ramp and per
//! session held at the sampling interval, its memory per session.
//!
//! VIEWERFLEET_BENCH_HUB_SESSIONS (default 250,500,1000), _RAMP_S (0: as fast as the hub
//! takes them, `max_parallel_starts` in flight; default 0), _DURATION_S (default 300),
//! _SAMPLING_S (default 5), _PARALLEL (default 32), _NODES (default 4), _CREATE_DELAY_MS
//! (the stub's time to create a session, as a browser's start-up; default 0), _TOML
//! (another hub.toml) and _JAR (another Selenium server jar, to compare releases).

use std::path::Path;
use std::time::Duration;
use viewerfleet_kit::hub_bench::HubBench;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    // `cargo test --all-targets` runs benches without `--bench`: a Grid of real JVMs for
    // minutes is not a test, so it only says how to run it.
    if !std::env::args().any(|a| a == "--bench") {
        println!("grid_hub: run with `cargo bench --bench grid_hub` (Java 17, make grid-deps)");
        return;
    }
    let sizes: Vec<u32> = std::env::var("VIEWERFLEET_BENCH_HUB_SESSIONS")
        .unwrap_or_else(|_| "250,500,1000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let secs = |name: &str, default: f64| Duration::from_secs_f64(env_or(name, default));
    let grid = Path::new(env!("CARGO_MANIFEST_DIR")).join("grid");
    let work = std::env::temp_dir().join(format!("viewerfleet-hub-bench-{}", std::process::id()));
    let template = HubBench {
        binary: env!("CARGO_BIN_EXE_viewerfleet").into(),
        jar: std::env::var_os("VIEWERFLEET_BENCH_HUB_JAR")
            .map(Into::into)
            .unwrap_or_else(|| grid.join(viewerfleet::grid::selenium::jar_in_grid())),
        hub_toml: std::env::var_os("VIEWERFLEET_BENCH_HUB_TOML")
            .map(Into::into)
            .unwrap_or_else(|| grid.join("hub.toml")),
        sessions: 0,
        nodes: env_or("VIEWERFLEET_BENCH_HUB_NODES", 4),
        ramp: secs("VIEWERFLEET_BENCH_HUB_RAMP_S", 0.0),
        duration: secs("VIEWERFLEET_BENCH_HUB_DURATION_S", 300.0),
        sampling_interval: secs("VIEWERFLEET_BENCH_HUB_SAMPLING_S", 5.0),
        parallel: env_or("VIEWERFLEET_BENCH_HUB_PARALLEL", 32),
        create_delay: Duration::from_millis(env_or("VIEWERFLEET_BENCH_HUB_CREATE_DELAY_MS", 0)),
        work_dir: work.clone(),
    };
    println!(
        "Selenium hub {} ({}) + {} relay nodes → WebDriver stub (creation {:?}); ramp {:?} ({} in flight), sampling {:?}, duration {:?}",
        template.jar.file_name().unwrap_or_default().to_string_lossy(),
        template.hub_toml.display(),
        template.nodes,
        template.create_delay,
        template.ramp,
        template.parallel,
        template.sampling_interval,
        template.duration
    );
    println!(
        "{:>8} {:>8} {:>8} {:>10} {:>9} {:>9} {:>8} {:>9} {:>10} {:>10} {:>11} {:>8} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9} {:>6} {:>5}",
        "sessions",
        "created",
        "playing",
        "asked/s",
        "1st min/s",
        "overall/s",
        "ramp s",
        "hub CPU s",
        "ms CPU/new",
        "net ms/new",
        "cores/1000",
        "reads/s",
        "ms/read",
        "idle MB",
        "peak MB",
        "MB/sess",
        "heap MB",
        "heap/sess",
        "exit",
        "left"
    );
    for &n in &sizes {
        let bench = HubBench {
            sessions: n,
            ..template.clone()
        };
        match bench.run() {
            Ok(f) => println!(
                "{:>8} {:>8} {:>8} {:>10} {:>9.2} {:>9.2} {:>8.0} {:>9.1} {:>10.1} {:>10} {:>11} {:>8} {:>9} {:>9.0} {:>9.0} {:>8.3} {:>9} {:>9} {:>6} {:>5}",
                f.sessions,
                f.created,
                f.playing,
                f.asked_per_s
                    .map_or_else(|| "as fast".into(), |r| format!("{r:.2}")),
                f.first_minute_per_s,
                f.overall_per_s,
                f.ramp_s,
                f.hub_cpu_s,
                f.ramp_cpu_ms_per_creation(),
                f.net_cpu_ms_per_creation()
                    .map_or_else(|| "–".into(), |c| format!("{c:.1}")),
                f.hold_cores_per_1000()
                    .map_or_else(|| "–".into(), |c| format!("{c:.3}")),
                f.hold_reads_per_s
                    .map_or_else(|| "–".into(), |r| format!("{r:.1}")),
                f.cpu_ms_per_read()
                    .map_or_else(|| "–".into(), |c| format!("{c:.2}")),
                f.hub_idle_rss_mb,
                f.hub_peak_rss_mb,
                f.hub_mb_per_session,
                match (f.hub_idle_heap_mb, f.hub_held_heap_mb) {
                    (Some(a), Some(b)) => format!("{a:.0}→{b:.0}"),
                    _ => "–".into(),
                },
                f.heap_mb_per_session()
                    .map_or_else(|| "–".into(), |m| format!("{m:.3}")),
                f.exit_code,
                f.left_on_hub as i64 + f.left_on_stub,
            ),
            Err(err) => println!("{n:>8} failed: {err:#}"),
        }
    }
    if std::env::var_os("VIEWERFLEET_BENCH_HUB_KEEP").is_some() {
        println!(
            "runs kept in {} (viewerfleet report <dir>/hub-N/run)",
            work.display()
        );
    } else {
        let _ = std::fs::remove_dir_all(&work);
    }
}
