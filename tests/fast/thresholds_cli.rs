//! Thresholds judged after the fact: `report --thresholds` and `compare --thresholds` on
//! the crafted run folders, the command line winning over the manifest, nothing written
//! into a run folder unless `--out` asks, and `compare` exiting 99 when a run fails.

use crate::support::fixtures::copy_of;
use crate::support::schema::assert_valid;
use std::path::Path;
use std::process::Output;

const BIN: &str = env!("CARGO_BIN_EXE_viewerfleet");

fn viewerfleet(args: &[&str]) -> Output {
    std::process::Command::new(BIN)
        .arg("--quiet")
        .args(args)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Every file under `dir` with its bytes, to show a command left the folder as it was.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push((path.display().to_string(), std::fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Adds thresholds to a fixture's manifest, as a run of a scenario with them froze them.
fn freeze_thresholds(run: &Path, thresholds: serde_json::Value) {
    let path = run.join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    manifest["plan"]["thresholds"] = thresholds;
    std::fs::write(&path, serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
}

#[test]
fn report_thresholds_rejudge_a_run_folder_without_writing_into_it() {
    let (_tmp, run) = copy_of("run-steady");
    let run_s = run.to_str().unwrap();
    let before = snapshot(&run);
    // The steady fixture's TTFF: p95 2.9 s, max 3 s.
    let out = viewerfleet(&[
        "report",
        run_s,
        "--thresholds",
        "ttff_p95<2.5s,ttff_max<10s",
        "--thresholds",
        "ttff p99<2990ms",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(99), "{}", text(&out.stderr));
    let doc = assert_valid("report-summary.v1.json", &text(&out.stdout));
    assert_eq!(doc["outcome"], "thresholds-failed");
    let report = &doc["report"];
    assert_eq!(report["thresholds_from"], "command-line");
    assert!(report["report_json"].is_null(), "{doc}");
    let judged: Vec<(String, String, bool)> = report["headline"]["thresholds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["metric"].as_str().unwrap().to_string(),
                t["observed"].as_str().unwrap().to_string(),
                t["pass"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        judged,
        [
            ("ttff_p95".to_string(), "2.9s".to_string(), false),
            ("ttff_max".to_string(), "3s".to_string(), true),
            ("ttff_p99".to_string(), "2980ms".to_string(), true),
        ]
    );
    assert!(
        text(&out.stderr)
            .contains("the command line wins over the thresholds the run's manifest froze"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(snapshot(&run), before, "the run folder was written into");

    // --out: the report's files go there, the run folder still untouched.
    let out_dir = tempfile::tempdir().unwrap();
    let elsewhere = out_dir.path().join("rejudged");
    let out = viewerfleet(&[
        "report",
        run_s,
        "--thresholds",
        "ttff_p95<5s",
        "--out",
        elsewhere.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(elsewhere.join("report.json")).unwrap())
            .unwrap();
    assert_eq!(written["thresholds"][0]["metric"], "ttff_p95");
    assert_eq!(written["thresholds"][0]["pass"], true);
    assert!(elsewhere.join("report.html").is_file());
    assert_eq!(snapshot(&run), before, "the run folder was written into");
}

#[test]
fn the_command_line_wins_over_the_manifest_and_the_runs_scenario_file_changes_nothing() {
    let (_tmp, run) = copy_of("run-steady");
    let run_s = run.to_str().unwrap();
    freeze_thresholds(
        &run,
        serde_json::json!([{"metric": "ttff_p95", "condition": "< 1ms"}]),
    );
    // Editing the run's scenario.yaml does not change what is judged: the manifest is.
    let scenario = run.join("scenario.yaml");
    let mut yaml = std::fs::read_to_string(&scenario).unwrap();
    yaml.push_str("\nthresholds:\n  ttff_p95: \"< 60s\"\n");
    std::fs::write(&scenario, yaml).unwrap();
    let out = viewerfleet(&["report", run_s, "--json"]);
    assert_eq!(out.status.code(), Some(99), "{}", text(&out.stderr));
    let doc = assert_valid("report-summary.v1.json", &text(&out.stdout));
    assert_eq!(doc["report"]["thresholds_from"], "manifest");
    assert_eq!(
        doc["report"]["headline"]["thresholds"][0]["condition"],
        "< 1ms"
    );

    // A thresholds file in the scenario's syntax replaces the manifest's.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gate.yaml");
    std::fs::write(
        &file,
        "thresholds:\n  ttff: [\"p95 < 10s\", \"p99 < 10s\"]\n  failed_viewers: \"<= 2\"\n",
    )
    .unwrap();
    let out = viewerfleet(&[
        "report",
        run_s,
        "--thresholds",
        file.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = assert_valid("report-summary.v1.json", &text(&out.stdout));
    let metrics: Vec<&str> = doc["report"]["headline"]["thresholds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["metric"].as_str().unwrap())
        .collect();
    assert_eq!(metrics, ["ttff_p95", "ttff_p99", "failed_viewers"]);
}

#[test]
fn bad_command_line_thresholds_exit_2_and_say_how_to_write_them() {
    let (_tmp, run) = copy_of("run-steady");
    let run_s = run.to_str().unwrap();
    let before = snapshot(&run);
    for (arg, says) in [
        ("p2p_share>=0.5", "`p2p_share` is not a metric"),
        ("p2p_savings_at_t>=0.5", "a share in %"),
        ("ttff_p95", "has no comparison"),
        ("gates/missing.yaml", "no such file"),
    ] {
        let out = viewerfleet(&["report", run_s, "--thresholds", arg]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{arg}: {stderr}");
        assert!(stderr.contains(says), "{arg}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        let out = viewerfleet(&["compare", run_s, "--thresholds", arg]);
        assert_eq!(
            out.status.code(),
            Some(2),
            "compare {arg}: {}",
            text(&out.stderr)
        );
    }
    assert_eq!(snapshot(&run), before);
}

#[test]
fn compare_thresholds_judge_every_run_and_exit_99_naming_the_run_that_failed() {
    let (_a, steady) = copy_of("run-steady");
    let (_b, starved) = copy_of("run-starved");
    let (before_steady, before_starved) = (snapshot(&steady), snapshot(&starved));
    let out_dir = tempfile::tempdir().unwrap();
    // TTFF p95: steady 2.9 s, starved 2.045 s.
    let out = viewerfleet(&[
        "compare",
        steady.to_str().unwrap(),
        starved.to_str().unwrap(),
        "--thresholds",
        "ttff_p95<2.5s",
        "--out",
        out_dir.path().to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(99), "{}", text(&out.stderr));
    let doc = assert_valid("compare-summary.v1.json", &text(&out.stdout));
    assert_eq!(doc["outcome"], "thresholds-failed");
    let cmp = &doc["compare"];
    assert_eq!(cmp["thresholds_from"], "command-line");
    let failed = cmp["thresholds_failed"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "{cmp}");
    assert_eq!(failed[0]["run"], "run-steady");
    assert_eq!(failed[0]["failed"][0]["metric"], "ttff_p95");
    assert_eq!(failed[0]["failed"][0]["observed"], "2.9s");
    assert!(text(&out.stderr).contains("THRESHOLDS FAILED in 1 of the compared runs"));
    assert_eq!(snapshot(&steady), before_steady, "compare wrote into a run");
    assert_eq!(
        snapshot(&starved),
        before_starved,
        "compare wrote into a run"
    );

    // Both pass: exit 0, nothing failed.
    let out = viewerfleet(&[
        "compare",
        steady.to_str().unwrap(),
        starved.to_str().unwrap(),
        "--thresholds",
        "ttff_p95<5s",
        "--out",
        out_dir.path().to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = assert_valid("compare-summary.v1.json", &text(&out.stdout));
    assert_eq!(doc["compare"]["thresholds_failed"], serde_json::json!([]));
}

/// The viewers' own rebuffering shares as a distribution: the steady fixture's one viewer
/// that stalled (1.34% of its watch) fails a `max`, the median of all passes.
#[test]
fn report_judges_the_spread_of_the_viewers_stalled_shares() {
    let (_tmp, run) = copy_of("run-steady");
    let out = viewerfleet(&[
        "report",
        run.to_str().unwrap(),
        "--thresholds",
        "viewer_stalled_share max<1%,viewer_stalled_share p50<=0%,viewer_stalled_share_avg<1%",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(99), "{}", text(&out.stderr));
    let doc = assert_valid("report-summary.v1.json", &text(&out.stdout));
    let judged: Vec<(String, String, String, bool)> = doc["report"]["headline"]["thresholds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["metric"].as_str().unwrap().to_string(),
                t["observed"].as_str().unwrap().to_string(),
                t["source"].as_str().unwrap().to_string(),
                t["pass"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        judged,
        [
            (
                "viewer_stalled_share_max".to_string(),
                "1.3423%".to_string(),
                "qoe.viewer_stalled_share.max".to_string(),
                false
            ),
            (
                "viewer_stalled_share_p50".to_string(),
                "0%".to_string(),
                "qoe.viewer_stalled_share.p50".to_string(),
                true
            ),
            (
                "viewer_stalled_share_avg".to_string(),
                "0.2685%".to_string(),
                "qoe.viewer_stalled_share.avg".to_string(),
                true
            ),
        ]
    );
}
