//! A small real ladder on this machine (refsite, local fleet): every step is a run folder,
//! and the capacity report holds the steps, the stated rules, the knee or its absence, the
//! fitted costs and the re-run command. (The full 2…10 ladder of RESULTS.md is too long
//! for CI; this one checks the pipeline with real browsers.)

use std::process::Command;

#[test]
fn a_two_step_ladder_writes_run_folders_and_a_capacity_report() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("vod.yaml");
    std::fs::write(
        &scenario,
        "name: ladder-vod\ntarget:\n  kind: refsite\n  video: vod\n  vod_length: 40s\n  metrics_interval: 2s\nviewers:\n  count: 1\n  ramp: 2s\nduration: 30s\nsampling_interval: 1s\nsteady_window: 10s\nfleet:\n  kind: local\n",
    )
    .unwrap();
    let out = dir.path().join("ladder");
    let status = Command::new(env!("CARGO_BIN_EXE_viewerfleet"))
        .args(["--quiet", "ladder"])
        .arg(&scenario)
        .args(["--steps", "1,2", "--hold", "25s", "--out"])
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    for step in ["step-1", "step-2"] {
        assert!(
            out.join(step).join("report.json").exists(),
            "{step} has no report"
        );
    }
    let capacity: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("capacity.json")).unwrap()).unwrap();
    let steps = capacity["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[1]["viewers"], 2);
    assert!(steps
        .iter()
        .all(|s| s["generator_cpu_busy"].as_f64().unwrap() > 0.0));
    assert!(
        steps
            .iter()
            .all(|s| s["target_cpu_cores"].as_f64().is_some()),
        "target CPU measured by PID"
    );
    let md = std::fs::read_to_string(out.join("capacity.md")).unwrap();
    assert!(md.contains("| viewers | started |"));
    assert!(md.contains("Rules (a step is DEGRADED when any fires)"));
    assert!(md.contains("viewerfleet ladder"));
    assert!(std::fs::read_to_string(out.join("capacity.html"))
        .unwrap()
        .contains("<table>"));
    // Re-analysis from the folders alone gives the same steps.
    let again = Command::new(env!("CARGO_BIN_EXE_viewerfleet"))
        .args(["--quiet", "ladder"])
        .arg(&scenario)
        .args(["--steps", "1,2", "--analyze-only", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let rebuilt: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("capacity.json")).unwrap()).unwrap();
    assert_eq!(rebuilt["steps"], capacity["steps"]);
}
