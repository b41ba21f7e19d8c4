//! The command line as users meet it: exit codes and error messages that name the problem
//! and the fix, before anything costly starts.

use assert_cmd::Command;
use predicates::prelude::*;

fn viewerfleet() -> Command {
    Command::cargo_bin("viewerfleet").unwrap()
}

#[test]
fn shipped_scenarios_validate() {
    let mut files: Vec<_> = std::fs::read_dir("scenarios/local")
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 4, "the four local scenarios");
    viewerfleet()
        .arg("validate")
        .args(&files)
        .assert()
        .success()
        .stdout(
            predicate::str::contains(
                "as many viewers as the host carries below 70% busy (at most 32), 4 per browser",
            )
            .count(4),
        );
}

#[test]
fn a_bad_scenario_names_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    let text = std::fs::read_to_string("scenarios/local/vod.yaml")
        .unwrap()
        .replace("count: auto", "count: 0");
    std::fs::write(&path, text).unwrap();
    viewerfleet()
        .args(["validate"])
        .arg(&path)
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("bad.yaml:").and(predicate::str::contains(
                "viewers.count: must be at least 1",
            )),
        );
    // `run` refuses it the same way, before starting anything.
    viewerfleet()
        .arg("run")
        .arg(&path)
        .arg("--out")
        .arg(dir.path().join("out"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("viewers.count"));
    assert!(
        !dir.path().join("out").exists(),
        "nothing created for an invalid scenario"
    );
}

#[test]
fn a_missing_scenario_file_is_a_clear_error() {
    viewerfleet()
        .args(["run", "no/such/file.yaml"])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("no/such/file.yaml")
                .and(predicate::str::contains("cannot read")),
        );
}

#[test]
fn runs_never_overwrite_data() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("keep.txt"), "earlier data").unwrap();
    viewerfleet()
        .args(["run", "scenarios/local/vod.yaml", "--out"])
        .arg(dir.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is not empty"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("keep.txt")).unwrap(),
        "earlier data"
    );
}

#[test]
fn per_browser_out_of_range_is_refused_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    viewerfleet()
        .args([
            "run",
            "scenarios/local/vod.yaml",
            "--per-browser",
            "17",
            "--out",
        ])
        .arg(dir.path().join("out"))
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("viewers.per_browser: 17 is out of range").and(
                predicate::str::contains("use 1 (one browser per viewer, the default) to 16"),
            ),
        );
    assert!(!dir.path().join("out").exists());
    // In the file, the error names its line.
    let path = dir.path().join("packed.yaml");
    let text = std::fs::read_to_string("scenarios/local/vod.yaml")
        .unwrap()
        .replace("  per_browser: 4 ", "  per_browser: 0 ");
    std::fs::write(&path, text).unwrap();
    viewerfleet()
        .arg("validate")
        .arg(&path)
        .assert()
        .code(2)
        .stderr(
            predicate::str::is_match(r"packed\.yaml:\d+: viewers\.per_browser: 0 is out of range")
                .unwrap(),
        );
}
