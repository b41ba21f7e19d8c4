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
                "as many viewers as the host carries below 60% busy (at most 32), 4 per browser",
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

/// Scripts tell "fix your input" (2) from "the outside world failed" (69): an invalid
/// scenario, a target that does not answer, and a Hetzner API that keeps answering 500
/// each end with their own code, and say so under `--json` too.
#[tokio::test(flavor = "multi_thread")]
async fn invalid_input_an_unreachable_target_and_a_failing_cloud_api_exit_differently() {
    use viewerfleet_kit::fake_hcloud::{FakeConfig, FakeHcloud, Fault};
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::read_to_string("scenarios/local/vod.yaml").unwrap();

    let invalid = dir.path().join("invalid.yaml");
    std::fs::write(&invalid, base.replace("count: auto", "count: 0")).unwrap();

    // Nothing listens on port 9 of this machine: the target check fails before any fleet.
    let unreachable = dir.path().join("unreachable.yaml");
    std::fs::write(
        &unreachable,
        "name: gone\ntarget:\n  kind: peertube\n  video: vod\n  url: http://127.0.0.1:9/w/x\nviewers:\n  count: 1\nduration: 10s\nfleet:\n  kind: grid\n  url: http://127.0.0.1:9/\n",
    )
    .unwrap();

    let fake = FakeHcloud::start(
        FakeConfig {
            faults: vec![Fault::status(http::Method::GET, "/v1/*", 500, None)],
            ..FakeConfig::default()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let cloud = dir.path().join("cloud.yaml");
    let key = dir.path().join("id.pub");
    std::fs::write(
        &key,
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICliTestKey t@example\n",
    )
    .unwrap();
    std::fs::write(
        &cloud,
        format!(
            "name: cloud\ntarget:\n  kind: peertube\n  video: live\n  url: http://127.0.0.1:9/w/x\nviewers:\n  count: 8\nduration: 1m\nfleet:\n  kind: hcloud\n  controller_ips: [\"198.51.100.7/32\"]\n  ssh_public_key: {}\n  node_type: cx33\n",
            key.display()
        ),
    )
    .unwrap();

    let cases: Vec<(Vec<String>, i32, &str, &str)> = vec![
        (
            vec!["run".into(), invalid.display().to_string()],
            2,
            "bad-input",
            "viewers.count",
        ),
        (
            vec![
                "run".into(),
                unreachable.display().to_string(),
                "--out".into(),
                dir.path().join("out").display().to_string(),
            ],
            69,
            "unavailable",
            "the target did not answer at http://127.0.0.1:9/",
        ),
        (
            vec!["plan".into(), cloud.display().to_string()],
            69,
            "unavailable",
            "the API keeps failing (status 500)",
        ),
    ];
    let endpoint = fake.endpoint();
    for (args, code, outcome, says) in cases {
        let endpoint = endpoint.clone();
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_viewerfleet"))
                .args(&args)
                .arg("--json")
                .env("HCLOUD_ENDPOINT", endpoint)
                .env("HCLOUD_TOKEN", "cli-exit-codes-token")
                .output()
                .unwrap()
        })
        .await
        .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{stderr}");
        assert!(stderr.contains(says), "{says}: {stderr}");
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["outcome"], outcome, "{doc}");
        assert_eq!(doc["exit_code"], code);
    }
    assert!(
        !dir.path().join("out/raw/viewer_events.jsonl").exists() || {
            // The run stopped at the target check: no viewer was ever asked for.
            std::fs::read_to_string(dir.path().join("out/raw/viewer_events.jsonl"))
                .unwrap()
                .is_empty()
        }
    );
}

/// A CI log is a pipe: its log lines carry no ANSI escape codes, with or without
/// `NO_COLOR` (a run whose target does not answer logs its plan at INFO, then fails fast).
#[test]
fn logs_on_a_piped_stderr_carry_no_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("gone.yaml");
    std::fs::write(
        &scenario,
        "name: gone\ntarget:\n  kind: peertube\n  video: vod\n  url: http://127.0.0.1:9/w/x\nviewers:\n  count: 1\nduration: 10s\nfleet:\n  kind: grid\n  url: http://127.0.0.1:9/\n",
    )
    .unwrap();
    let out = viewerfleet()
        .arg("run")
        .arg(&scenario)
        .arg("--out")
        .arg(dir.path().join("out"))
        .env_remove("NO_COLOR")
        .env("RUST_LOG", "debug")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(69));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(" INFO ") && stderr.contains(" DEBUG "),
        "log lines were written: {stderr}"
    );
    assert!(
        !out.stderr.contains(&0x1b),
        "no escape byte on a pipe: {stderr:?}"
    );
}
