//! The cloud commands as users run them: the `viewerfleet` binary against the fake Hetzner API
//! (HCLOUD_ENDPOINT), including Ctrl-C/SIGTERM while it waits for nodes to register.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;
use viewerfleet_kit::fake_hcloud::{FakeConfig, FakeHcloud};

const TOKEN: &str = "cli-test-token-83b1e4";
const BIN: &str = env!("CARGO_BIN_EXE_viewerfleet");

async fn fake(config: FakeConfig) -> FakeHcloud {
    FakeHcloud::start(
        FakeConfig {
            token: Some(TOKEN.into()),
            ..config
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap()
}

fn scenario(dir: &std::path::Path) -> std::path::PathBuf {
    let key = dir.join("id.pub");
    std::fs::write(
        &key,
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICliTestKey cli@example\n",
    )
    .unwrap();
    let path = dir.join("cloud.yaml");
    std::fs::write(
        &path,
        format!(
            "name: cli-cloud\ntarget:\n  kind: peertube\n  video: live\n  url: https://peertube.example/w/x\nviewers:\n  count: 12\nduration: 1m\nfleet:\n  kind: hcloud\n  controller_ips: [\"198.51.100.7/32\"]\n  ssh_public_key: {}\n  node_type: cx32\n  viewers_per_node: 4\n  register_timeout: 10m\n",
            key.display()
        ),
    )
    .unwrap();
    path
}

fn command(fake: &FakeHcloud, dir: &std::path::Path) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.current_dir(dir)
        .env("HCLOUD_ENDPOINT", fake.endpoint())
        .env("HCLOUD_TOKEN", TOKEN)
        .env("VIEWERFLEET_HCLOUD_HUB_URL", fake.hub_url())
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// Waits (bounded) until `cond` holds.
async fn until(what: &str, secs: u64, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn signal_while_waiting_for_nodes(signal: Signal) {
    // Nodes never register: `up` waits until it is interrupted.
    let fake = fake(FakeConfig {
        node_boot: None,
        ..FakeConfig::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let path = scenario(dir.path());
    let child = command(&fake, dir.path())
        .arg("up")
        .arg(&path)
        .spawn()
        .unwrap();
    let pid = Pid::from_raw(child.id().unwrap() as i32);
    until("the hub and 3 nodes to exist", 120, || {
        fake.state.servers_matching("viewerfleet-run").len() == 4
    })
    .await;
    // Creation is done; the firewall update and then the wait for registration follow.
    until("the hub firewall to name the nodes", 60, || {
        fake.state
            .recorded()
            .iter()
            .any(|r| r.path.ends_with("/actions/set_rules"))
    })
    .await;
    kill(pid, signal).unwrap();
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("exits after the signal")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // 128 + the signal, as `run` exits.
    let expected = if signal == Signal::SIGTERM { 143 } else { 130 };
    assert_eq!(out.status.code(), Some(expected), "{stderr}");
    assert!(
        fake.state.servers_matching("viewerfleet-run").is_empty(),
        "{signal:?}: zero servers of the run\n{stderr}"
    );
    assert!(
        fake.state.firewalls().is_empty() && fake.state.ssh_keys().is_empty(),
        "{stderr}"
    );
    assert!(
        stderr.contains("every server of the run was deleted"),
        "{stderr}"
    );
    assert!(!stderr.contains(TOKEN) && !String::from_utf8_lossy(&out.stdout).contains(TOKEN));
}

#[tokio::test(flavor = "multi_thread")]
async fn sigint_while_waiting_for_nodes_leaves_zero_servers() {
    signal_while_waiting_for_nodes(Signal::SIGINT).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_while_waiting_for_nodes_leaves_zero_servers() {
    signal_while_waiting_for_nodes(Signal::SIGTERM).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn up_writes_an_inventory_and_down_deletes_the_run() {
    let fake = fake(FakeConfig {
        node_boot: Some(Duration::from_millis(100)),
        ..FakeConfig::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let path = scenario(dir.path());
    let inventory = dir.path().join("inventory.json");
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        command(&fake, dir.path())
            .arg("up")
            .arg(&path)
            .arg("--inventory")
            .arg(&inventory)
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let inv: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&inventory).unwrap()).unwrap();
    assert_eq!(inv["hub_url"], fake.hub_url());
    assert_eq!(inv["nodes"].as_array().unwrap().len(), 3);
    assert_eq!(inv["capacity"], 12);
    let run = inv["run"].as_str().unwrap().to_string();
    assert!(
        stderr.contains(&format!("viewerfleet down {run}")),
        "{stderr}"
    );
    assert_eq!(
        fake.state
            .servers_matching(&format!("viewerfleet-run={run}"))
            .len(),
        4,
        "up leaves the fleet running"
    );
    assert!(!stderr.contains(TOKEN));

    let out = command(&fake, dir.path())
        .arg("down")
        .arg(&run)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("deleted 4 server(s), 2 firewall(s), 1 SSH key(s)"),
        "{stdout}"
    );
    assert!(fake.state.servers().is_empty());

    let out = command(&fake, dir.path())
        .args(["down", "no such run!"])
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a run id"));
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_prints_node_counts_and_costs_for_the_four_1000_viewer_scenarios() {
    let fake = fake(FakeConfig::default()).await;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = command(&fake, root)
        .arg("plan")
        .args(
            ["live-normal", "live-high", "live-high-half-p2p-off", "vod"]
                .map(|s| format!("scenarios/peertube-1000/{s}.yaml")),
        )
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Fake prices: cx32 0.0113, cx52 0.0540 EUR/h net; a primary IPv4 0.50 EUR/month.
    for (name, nodes, hourly) in [
        ("peertube-1000-live-normal", "63 × cx32", "0.7239 EUR/h"),
        ("peertube-1000-live-high ", "63 × cx32", "0.7239 EUR/h"),
        (
            "peertube-1000-live-high-half-p2p-off",
            "63 × cx32",
            "0.7239 EUR/h",
        ),
        ("peertube-1000-vod", "84 × cx52", "4.5480 EUR/h"),
    ] {
        let section = stdout
            .split("\n\n")
            .find(|s| s.starts_with(name))
            .unwrap_or_else(|| panic!("no plan for {name}:\n{stdout}"));
        assert!(section.contains(&format!("nodes: {nodes}")), "{section}");
        assert!(section.contains(hourly), "{section}");
        assert!(section.contains("WARNING"), "{section}");
    }
    // The budget is configurable from the command line: 720p viewers (1 core each).
    let out = command(&fake, root)
        .args([
            "plan",
            "--cpu-per-viewer",
            "1.0",
            "scenarios/peertube-1000/live-normal.yaml",
        ])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("1.000 cores") && stdout.contains("84 × cx52"),
        "{stdout}"
    );

    // No token: a clear error naming the fix.
    let out = command(&fake, root)
        .env_remove("HCLOUD_TOKEN")
        .args(["plan", "scenarios/peertube-1000/vod.yaml"])
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("set HCLOUD_TOKEN"));
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_sizes_nodes_from_a_calibration() {
    use viewerfleet::calibrate::{BrowserProfile, Calibration, ProfileFigures};
    let fake = fake(FakeConfig::default()).await;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let figures = |name: &str, cpu: f64, pss_max: f64| ProfileFigures {
        profile: BrowserProfile {
            name: name.into(),
            flags: vec![],
        },
        viewers: 4,
        viewers_measured: 4,
        failures: vec![],
        processes_per_viewer: 7.0,
        pss_mb_per_viewer: pss_max - 20.0,
        pss_mb_per_viewer_max: pss_max,
        cpu_cores_per_viewer: cpu,
        http_kbps_per_viewer: 650.0,
        p2p_down_kbps_per_viewer: 0.0,
        p2p_up_kbps_per_viewer: 0.0,
        stalls: 0,
        ttff_ms_median: Some(4000.0),
        window_s: 40.0,
    };
    let calibration = Calibration {
        created: "2026-11-30T18:00:00Z".into(),
        host: Default::default(),
        chromium: "Chromium 156".into(),
        scenario: "built-in".into(),
        viewers: 4,
        warmup_s: 15.0,
        window_s: 40.0,
        command: "viewerfleet calibrate".into(),
        // The default profile is dearer: plan must take the project's figures.
        profiles: vec![
            figures("default", 0.9, 900.0),
            figures("project", 0.5, 300.0),
        ],
    };
    std::fs::write(
        dir.path().join("calibration.json"),
        serde_json::to_string(&calibration).unwrap(),
    )
    .unwrap();
    let out = command(&fake, root)
        .args(["plan", "--calibration"])
        .arg(dir.path())
        .arg("scenarios/peertube-1000/live-normal.yaml")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("budget per viewer: 0.500 cores, 300 MB"),
        "{stdout}"
    );

    // A calibration without a measured project profile is refused with the fix.
    let mut broken = calibration.clone();
    broken.profiles.truncate(1);
    let file = dir.path().join("default-only.json");
    std::fs::write(&file, serde_json::to_string(&broken).unwrap()).unwrap();
    let out = command(&fake, root)
        .args(["plan", "--calibration"])
        .arg(&file)
        .arg("scenarios/peertube-1000/live-normal.yaml")
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no `project` profile"), "{stderr}");

    // Not a calibration at all.
    let out = command(&fake, root)
        .args(["plan", "--calibration", "Cargo.toml"])
        .arg("scenarios/peertube-1000/live-normal.yaml")
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a calibration"));
}
