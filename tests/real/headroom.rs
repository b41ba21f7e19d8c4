//! Headroom on purpose: a host kept busy by a CPU hog. The governed ramp
//! (`viewers.count: auto`) must stop adding viewers when the host nears its limit and say
//! why, and count as requested only the viewers it released.

use crate::support::hog::CpuHog;
use std::path::Path;
use std::process::Command;
use viewerfleet::model::rawdata::{self, RunEvent, RunEventKind};

/// A live refsite scenario on the local fleet with a governed ramp of at most `max`.
fn auto_scenario(dir: &Path, max: u32, cpu_below: f64) -> std::path::PathBuf {
    let text = format!(
        "name: headroom-auto\ntarget:\n  kind: refsite\n  video: live\n  latency: normal\n  metrics_interval: 2s\nviewers:\n  count: auto\n  auto:\n    max: {max}\n    cpu_below: {cpu_below}\n  per_browser: 4\n  ramp: 60s\n  network:\n    download_kbps: 2000\n    upload_kbps: 300\n    latency_ms: 500\n    apply: http-only\nduration: 75s\nsampling_interval: 2s\nsteady_window: 10s\nfleet:\n  kind: local\n"
    );
    let path = dir.join("auto.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn the_governed_ramp_stops_adding_viewers_when_the_host_nears_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let scenario = auto_scenario(dir.path(), 16, 0.7);
    // Half the host taken before the first viewer: a step of four viewers brings it to, or
    // close to, the 70% limit, so the ramp stops long before its 16.
    let hog = CpuHog::start(0.5);
    let result = Command::new(env!("CARGO_BIN_EXE_viewerfleet"))
        .args(["--quiet", "run"])
        .arg(&scenario)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    drop(hog);
    let stdout = String::from_utf8_lossy(&result.stdout);
    assert!(
        result.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&result.stderr)
    );
    let events: Vec<RunEvent> = rawdata::read_jsonl(&out.join(rawdata::RUN_EVENTS))
        .unwrap()
        .records;
    let steps: Vec<&RunEvent> = events
        .iter()
        .filter(|e| e.event == RunEventKind::RampStep)
        .collect();
    let settled = events
        .iter()
        .find(|e| e.event == RunEventKind::RampSettled)
        .unwrap_or_else(|| panic!("the ramp settled: {events:?}"));
    let released = settled.viewers.unwrap();
    let reason = settled.detail.clone().unwrap_or_default();
    let busy: Vec<String> = steps
        .iter()
        .map(|s| {
            format!(
                "{}: {:.0}%",
                s.viewers.unwrap(),
                s.cpu_busy.unwrap() * 100.0
            )
        })
        .collect();
    println!("ramp steps {busy:?}; settled on {released}: {reason}");
    // The baseline step carries the hog: at least half the host.
    assert_eq!(steps[0].viewers, Some(0));
    assert!(steps[0].cpu_busy.unwrap() >= 0.4, "{busy:?}");
    assert!(
        (4..=8).contains(&released),
        "{busy:?} → {released}: {reason}"
    );
    assert!(reason.contains("70% limit"), "{reason}");
    // Each step was measured before the next was released: a step per measurement.
    assert_eq!(steps.len() as u32, 1 + released / 4, "{busy:?}");
    // The run asked for what it released, and says where it settled.
    assert!(
        stdout.contains(&format!(
            "viewers: {released} requested, {released} started"
        )),
        "{stdout}"
    );
    assert!(stdout.contains("viewers: auto, settled on"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(
        report["viewers"]["requested"], released,
        "{}",
        report["viewers"]
    );
    assert_eq!(
        report["viewers"]["started"], released,
        "{}",
        report["viewers"]
    );
}
