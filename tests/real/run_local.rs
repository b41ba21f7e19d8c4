//! `viewerfleet run` end to end on this machine: real refsite, chromedriver, Chromium and
//! ffmpeg. Checks raw data (P2P bytes from players and exporter), the report, exit codes,
//! and that nothing is left running — after a normal end, after SIGINT, after `kill -9`.
//!
//! Every process a run starts inherits a unique environment tag, so leftovers are found
//! precisely even on a machine running other browsers.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::process::{kill, lines, start_run, wait_for_line, wait_released};

fn scenario(dir: &Path, video: &str, viewers: u32, duration: &str) -> PathBuf {
    let latency = if video == "live" {
        "  latency: normal\n"
    } else {
        "  vod_length: 40s\n"
    };
    let text = format!(
        "name: test-{video}\ntarget:\n  kind: refsite\n  video: {video}\n{latency}  metrics_interval: 2s\nviewers:\n  count: {viewers}\n  ramp: 4s\nduration: {duration}\nsampling_interval: 1s\nsteady_window: 10s\nfleet:\n  kind: local\n"
    );
    let path = dir.join(format!("{video}.yaml"));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn vod_run_records_p2p_from_players_and_exporter_and_releases_everything() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let tag = format!("vod-{}", std::process::id());
    let mut child = start_run(&scenario(dir.path(), "vod", 3, "45s"), &out, &tag);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "run failed");
    let samples = lines(&out.join("raw/viewer_samples.jsonl"));
    assert!(!samples.is_empty());
    let viewers_with_p2p = samples
        .iter()
        .filter(|s| s["p2p_down_bytes"].as_u64().unwrap_or(0) > 0)
        .map(|s| s["viewer"].as_u64())
        .collect::<std::collections::BTreeSet<_>>();
    assert!(!viewers_with_p2p.is_empty(), "no player reported P2P bytes");
    let scrapes = lines(&out.join("raw/exporter_samples.jsonl"));
    assert!(
        scrapes.iter().any(
            |s| s["sums"]["peertube_playback_p2p_downloaded_bytes_total"]
                .as_f64()
                .unwrap_or(0.0)
                > 0.0
        ),
        "the exporter never showed P2P bytes"
    );
    let events = lines(&out.join("raw/viewer_events.jsonl"));
    assert_eq!(events.iter().filter(|e| e["event"] == "playing").count(), 3);
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    assert!(manifest["ended_at"].is_string());
    assert_eq!(manifest["fleet"]["kind"], "local");
    assert!(out.join("report.json").exists() && out.join("report.html").exists());
    let left = wait_released(&tag, Duration::from_secs(10));
    assert!(left.is_empty(), "left running: {left:?}");
}

#[test]
fn sigint_mid_run_stops_cleanly_with_exit_130() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let tag = format!("sigint-{}", std::process::id());
    let mut child = start_run(&scenario(dir.path(), "live", 2, "5m"), &out, &tag);
    let playing = wait_for_line(
        &out.join("raw/viewer_events.jsonl"),
        Duration::from_secs(240),
        |e| e["event"] == "playing",
    );
    assert!(playing, "no viewer played");
    kill(&child, libc::SIGINT);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let runs = lines(&out.join("raw/run_events.jsonl"));
    let last = runs.last().unwrap();
    assert_eq!(last["event"], "interrupted");
    assert_eq!(last["detail"], "SIGINT");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    assert!(manifest["exit_status"].as_str().unwrap().contains("SIGINT"));
    let events = lines(&out.join("raw/viewer_events.jsonl"));
    assert!(
        events.iter().any(|e| e["event"] == "stopped"),
        "sessions were closed"
    );
    let left = wait_released(&tag, Duration::from_secs(10));
    assert!(left.is_empty(), "left running after SIGINT: {left:?}");
}

#[test]
fn kill_9_keeps_raw_data_and_the_report_says_partial() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let tag = format!("kill9-{}", std::process::id());
    let mut child = start_run(&scenario(dir.path(), "live", 2, "5m"), &out, &tag);
    let sampled = wait_for_line(
        &out.join("raw/viewer_samples.jsonl"),
        Duration::from_secs(240),
        |_| true,
    );
    assert!(sampled, "no sample written");
    kill(&child, libc::SIGKILL);
    child.wait().unwrap();
    let samples_at_kill = lines(&out.join("raw/viewer_samples.jsonl")).len();
    assert!(samples_at_kill >= 1);
    // Driver, refsite and encoder die with the controller; browsers with their driver.
    let left = wait_released(&tag, Duration::from_secs(20));
    assert!(left.is_empty(), "left running after kill -9: {left:?}");
    let report = Command::new(env!("CARGO_BIN_EXE_viewerfleet"))
        .args(["report"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["partial"], true);
    // The killed controller could not remove its browsers' profile folders: `gc --local`
    // finds them by its pid and removes them (none of its processes remain).
    let profiles = format!("viewerfleet-profile-{}-", child.id());
    let gc = Command::new(env!("CARGO_BIN_EXE_viewerfleet"))
        .args(["gc", "--local"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&gc.stdout);
    assert!(gc.status.success(), "{said}");
    assert!(said.contains(&profiles), "gc did not name them: {said}");
    let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&profiles))
        .collect();
    assert!(left.is_empty(), "profile folders left after gc: {left:?}");
}

/// Reads one metric (summing series that match an optional label) from an exposition.
fn metric(text: &str, name: &str, label: Option<(&str, &str)>) -> f64 {
    viewerfleet::metrics::prom_text::parse(text)
        .unwrap()
        .iter()
        .filter(|s| s.name == name && label.is_none_or(|(k, v)| s.label(k) == Some(v)))
        .map(|s| s.value)
        .sum()
}

#[test]
fn controller_metrics_move_during_a_real_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let tag = format!("metrics-{}", std::process::id());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_viewerfleet"))
        .args(["--quiet", "run"])
        .arg(scenario(dir.path(), "live", 2, "5m"))
        .arg("--out")
        .arg(&out)
        .args(["--metrics-listen", &format!("127.0.0.1:{port}")])
        .env("VIEWERFLEET_TEST_TAG", &tag)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/metrics");
    let scrape = || -> Option<String> {
        let out = Command::new("curl").args(["-sf", &url]).output().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).to_string())
    };
    // Wait for a playing viewer, then for bytes to grow between two scrapes.
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut first: Option<f64> = None;
    let mut moved = false;
    while Instant::now() < deadline && !moved {
        if let Some(text) = scrape() {
            let playing = metric(&text, "viewerfleet_viewers", Some(("state", "playing")))
                + metric(&text, "viewerfleet_viewers", Some(("state", "stalled")));
            let bytes = metric(
                &text,
                "viewerfleet_player_http_downloaded_bytes_total",
                None,
            ) + metric(&text, "viewerfleet_player_p2p_downloaded_bytes_total", None);
            if playing >= 1.0 && bytes > 0.0 {
                assert_eq!(metric(&text, "viewerfleet_viewers_requested", None), 2.0);
                match first {
                    None => first = Some(bytes),
                    Some(b) if bytes > b => moved = true,
                    _ => {}
                }
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    kill(&child, libc::SIGTERM);
    let status = child.wait().unwrap();
    assert!(moved, "viewer counts and bandwidth never moved on {url}");
    assert_eq!(status.code(), Some(143));
    let left = wait_released(&tag, Duration::from_secs(10));
    assert!(left.is_empty(), "left running after SIGTERM: {left:?}");
}
