//! Benchmark (ignored by default; run it on an otherwise quiet machine):
//!
//!     cargo test --test grid_bench -- --ignored --nocapture
//!
//! Session creations per second and memory added per viewer, through a local Selenium
//! Grid 4 (hub + 1 node, browsers in the root namespace like `local`) versus a chromedriver
//! started directly. Same capabilities (the viewer layer's), `about:blank` pages. Memory is
//! PSS summed over every process of the hub/node/chromedriver process groups (browsers
//! included), read from `/proc/<pid>/smaps_rollup`, so shared pages are not double-counted.

use crate::support::grid as grid_support;
use crate::support::poll;

use grid_support::*;
use std::time::{Duration, Instant};
use viewerfleet::viewer::{TcCoverage, ViewerSlot};
use viewerfleet::viewer::{Viewer, ViewerTimeouts};

const N: usize = 4;

/// PSS in bytes of every live process whose process group is one of `groups`.
fn pss_of_groups(groups: &[u32]) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let path = entry.path();
        let Ok(stat) = std::fs::read_to_string(path.join("stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let pgrp: Option<u32> = fields.get(2).and_then(|g| g.parse().ok());
        if !pgrp.is_some_and(|g| groups.contains(&g)) || fields.first() == Some(&"Z") {
            continue;
        }
        let rollup = std::fs::read_to_string(path.join("smaps_rollup")).unwrap_or_default();
        for line in rollup.lines() {
            if let Some(kb) = line.strip_prefix("Pss:") {
                total += kb
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .unwrap_or(0)
                    * 1024;
            }
        }
    }
    total
}

struct Figures {
    sequential_per_s: f64,
    parallel_per_s: f64,
    base_mb: f64,
    per_viewer_mb: f64,
}

async fn measure(slot: &ViewerSlot, groups: &[u32]) -> Figures {
    // Settle, then the baseline without sessions.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let base = pss_of_groups(groups);
    let start = Instant::now();
    let mut viewers = Vec::new();
    for _ in 0..N {
        viewers.push(
            Viewer::create(slot, ViewerTimeouts::default())
                .await
                .unwrap(),
        );
    }
    let sequential = N as f64 / start.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let with_sessions = pss_of_groups(groups);
    for v in viewers {
        v.close().await;
    }
    let start = Instant::now();
    let created =
        futures::future::join_all((0..N).map(|_| Viewer::create(slot, ViewerTimeouts::default())))
            .await;
    let parallel = N as f64 / start.elapsed().as_secs_f64();
    for v in created {
        v.unwrap().close().await;
    }
    Figures {
        sequential_per_s: sequential,
        parallel_per_s: parallel,
        base_mb: base as f64 / 1e6,
        per_viewer_mb: with_sessions.saturating_sub(base) as f64 / N as f64 / 1e6,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run with --ignored --nocapture on a quiet machine"]
async fn grid_vs_direct_chromedriver() {
    // Direct chromedriver, in its own process group.
    let port = viewerfleet::sys::net::free_port().unwrap();
    let mut driver = tokio::process::Command::new("/usr/bin/chromedriver")
        .arg(format!("--port={port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let driver_pid = driver.id().unwrap();
    let url = format!("http://127.0.0.1:{port}/");
    poll::until_async("chromedriver ready", Duration::from_secs(20), || {
        let url = url.clone();
        async move { reqwest::get(format!("{url}status")).await.is_ok() }
    })
    .await;
    let direct_slot = ViewerSlot {
        webdriver_url: url,
        grid_auth: None,
        chrome_binary: Some("/usr/lib/chromium/chromium".into()),
        extra_args: vec!["--remote-debugging-pipe".into()],
        node: "local".into(),
        address: None,
        public_addresses: Vec::new(),
        nat: None,
        tc: TcCoverage::NONE,
        viewers: 1,
    };
    let direct = measure(&direct_slot, &[driver_pid]).await;
    viewerfleet::fleet::chromedriver::kill_group(&mut driver).await;

    let grid = GridGuard::up("bench", 1, N as u32, false).await;
    let st = grid.state.clone();
    let grid_slot = ViewerSlot {
        webdriver_url: st.hub_url.clone(),
        grid_auth: st.controller_credentials().map(std::sync::Arc::new),
        chrome_binary: None,
        extra_args: vec!["--remote-debugging-pipe".into()],
        node: "grid".into(),
        address: None,
        public_addresses: Vec::new(),
        nat: None,
        tc: TcCoverage::NONE,
        viewers: 1,
    };
    // Warm the JVMs once (the first session through a fresh Grid pays class loading).
    Viewer::create(&grid_slot, ViewerTimeouts::default())
        .await
        .unwrap()
        .close()
        .await;
    let groups: Vec<u32> = st
        .hub_pgid
        .into_iter()
        .chain(st.nodes.iter().filter_map(|n| n.pgid))
        .collect();
    let through_grid = measure(&grid_slot, &groups).await;
    grid.down_and_check().await;

    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("| path | sessions/s sequential | sessions/s {N} in parallel | fixed PSS (no session) | added PSS per viewer |");
    println!("|---|---|---|---|---|");
    for (name, f) in [
        ("direct chromedriver", &direct),
        ("Selenium Grid 4 (hub + 1 node)", &through_grid),
    ] {
        println!(
            "| {name} | {:.2} | {:.2} | {:.0} MB | {:.0} MB |",
            f.sequential_per_s, f.parallel_per_s, f.base_mb, f.per_viewer_mb
        );
    }
    println!("load average during the run: {}", load.trim());
    assert!(direct.sequential_per_s > 0.0 && through_grid.sequential_per_s > 0.0);
    assert!(
        through_grid.base_mb > direct.base_mb,
        "the JVMs cost memory"
    );
}
