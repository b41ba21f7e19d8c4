//! Regression tests for the malformed inputs of issue #15, each named after what it
//! exercises: damaged raw data, closed pipes, endless or pathological files, errors that
//! named a type, exit codes, and a video URL that is not PeerTube's. Every command here
//! runs with a deadline, so a hang fails the test instead of stalling the tier.

use crate::support::fixtures::copy_of;
use assert_cmd::Command;
use predicates::prelude::*;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use viewerfleet::model::rawdata;

/// Longest any of these commands may take: each answers in milliseconds when it works,
/// and took 70 s or forever before.
const DEADLINE: Duration = Duration::from_secs(30);

fn viewerfleet() -> Command {
    let mut cmd = Command::cargo_bin("viewerfleet").unwrap();
    cmd.timeout(DEADLINE).env_remove("RUST_LOG");
    cmd
}

fn sample(t: &str, viewer: u32, http: &str) -> String {
    format!(
        "{{\"t\": {t}, \"viewer\": {viewer}, \"http_down_bytes\": {http}, \"p2p_down_bytes\": 0, \
         \"p2p_up_bytes\": 0, \"peers\": 0, \"playing\": true, \"current_time_s\": 1.0, \
         \"stalls\": 0, \"stalled_ms\": 0.0, \"dropped_frames\": 0, \"errors\": 0}}\n"
    )
}

/// A copy of the steady fixture with `lines` appended to its viewer samples; returns the
/// line number of the first appended line too.
fn steady_run_with_samples(lines: &[String]) -> (tempfile::TempDir, PathBuf, usize) {
    let (tmp, dir) = copy_of("run-steady");
    let path = dir.join(rawdata::VIEWER_SAMPLES);
    let mut text = std::fs::read_to_string(&path).unwrap();
    let first = text.lines().count() + 1;
    for line in lines {
        text.push_str(line);
    }
    std::fs::write(&path, text).unwrap();
    (tmp, dir, first)
}

fn report_md(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("report.md")).unwrap()
}

#[test]
fn report_and_compare_on_a_sample_of_u64_max_bytes_do_not_overflow() {
    let (_tmp, dir, line) = steady_run_with_samples(&[sample("10.0", 1, "18446744073709551615")]);
    viewerfleet()
        .arg("report")
        .arg(&dir)
        .assert()
        .success()
        .stderr(predicate::str::contains("panicked").not());
    let md = report_md(&dir);
    assert!(
        md.contains(&format!(
            "line {line}: http_down_bytes = 18446744073709551615"
        )),
        "{md}"
    );
    compare_succeeds(&dir);
}

fn compare_succeeds(dir: &Path) {
    let out = tempfile::tempdir().unwrap();
    viewerfleet()
        .arg("compare")
        .arg(dir)
        .arg("--out")
        .arg(out.path())
        .assert()
        .success()
        .stderr(predicate::str::contains("panicked").not());
}

#[test]
fn report_on_a_sample_at_t_1e300_is_not_sized_by_its_time() {
    let (_tmp, dir, line) = steady_run_with_samples(&[sample("1e300", 1, "1000")]);
    viewerfleet().arg("report").arg(&dir).assert().success();
    let md = report_md(&dir);
    assert!(md.contains(&format!("line {line}: t = 1e300 s")), "{md}");
    // The numbers are those of the fixture without the sample: 1.6 Mbit/s from the exporter.
    let s: viewerfleet::report::ReportSummary =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert!(
        (s.http_at_mbps.unwrap() - 1.6).abs() < 1e-6,
        "{:?}",
        s.http_at_mbps
    );
    compare_succeeds(&dir);
}

#[test]
fn report_on_a_sample_at_t_1e12_does_not_allocate_terabytes() {
    let (_tmp, dir, line) = steady_run_with_samples(&[sample("1e12", 1, "1000")]);
    viewerfleet().arg("report").arg(&dir).assert().success();
    let md = report_md(&dir);
    assert!(md.contains(&format!("line {line}: t = 1e12 s")), "{md}");
    // The time series stop where the run did, not at t = 1e12.
    let rows = std::fs::read_to_string(dir.join("timeseries.csv"))
        .unwrap()
        .lines()
        .count();
    assert!(rows < 1000, "{rows} rows of time series");
    compare_succeeds(&dir);
}

#[test]
fn report_on_2000_unplanned_viewer_ids_counts_only_the_planned_ones() {
    let lines: Vec<String> = (6..2006).map(|v| sample("20.0", v, "1000")).collect();
    let (_tmp, dir, first) = steady_run_with_samples(&lines);
    let out = viewerfleet().arg("report").arg(&dir).assert().success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(!stdout.contains("2006"), "{stdout}");
    let s: viewerfleet::report::ReportSummary =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!((s.viewers.started, s.viewers.requested), (5, 6));
    let warning = s
        .honesty
        .warnings
        .iter()
        .find(|w| w.starts_with(rawdata::VIEWER_SAMPLES))
        .expect("the unplanned ids are reported");
    assert!(
        warning.contains("2000 lines left out")
            && warning.contains(&format!(
                "line {first}: viewer 6 is not in the plan (viewers 0 to 5)"
            )),
        "{warning}"
    );
    assert!(report_md(&dir).contains("2000 lines left out"));
}

#[test]
fn report_on_a_folder_whose_raw_is_a_file_says_so() {
    let (_tmp, dir) = copy_of("run-steady");
    std::fs::remove_dir_all(dir.join("raw")).unwrap();
    std::fs::write(dir.join("raw"), "not a folder").unwrap();
    viewerfleet()
        .arg("report")
        .arg(&dir)
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("raw is a file, not a folder")
                .and(predicate::str::contains("damaged").not()),
        );
}

#[test]
fn report_on_a_damaged_middle_line_names_file_and_line() {
    let (_tmp, dir) = copy_of("run-steady");
    let path = dir.join(rawdata::VIEWER_SAMPLES);
    let mut lines: Vec<String> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    lines[4] = "{\"t\": 9.0, \"viewer\": oops".into();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    viewerfleet()
        .arg("report")
        .arg(&dir)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "raw/viewer_samples.jsonl:5: not a valid record",
        ));
}

/// A pipe whose reading end is already closed, as `| head -1` leaves it once head is done.
fn closed_pipe() -> OwnedFd {
    let (read, write) = nix::unistd::pipe().unwrap();
    drop(read);
    write
}

#[test]
fn validate_into_a_closed_pipe_ends_quietly_with_its_usual_code() {
    let good = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/local/vod.yaml");
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "name: x\n").unwrap();
    for (files, code) in [(vec![good.clone(), good.clone()], 0), (vec![good, bad], 2)] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_viewerfleet"))
            .arg("validate")
            .args(&files)
            .stdout(Stdio::from(closed_pipe()))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{stderr}");
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "{stderr}"
        );
    }
}

#[test]
fn validate_with_stderr_into_a_closed_pipe_still_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "name: x\n").unwrap();
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_viewerfleet"))
        .arg("validate")
        .arg(&bad)
        .stdout(Stdio::from(closed_pipe()))
        .stderr(Stdio::from(closed_pipe()))
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(2), "no panic (101), the usual code");
}

#[test]
fn validate_dev_zero_is_refused_at_once() {
    let started = Instant::now();
    viewerfleet()
        .args(["validate", "/dev/zero"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "/dev/zero: (file): is a character device, not a scenario file",
        ));
    assert!(started.elapsed() < DEADLINE);
}

#[test]
fn validate_a_fifo_does_not_wait_for_a_writer() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("scenario.yaml");
    let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    viewerfleet()
        .arg("validate")
        .arg(&fifo)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "is a FIFO (named pipe), not a scenario file",
        ));
}

#[test]
fn validate_a_file_above_1_mib_is_refused_before_parsing() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.yaml");
    std::fs::write(
        &big,
        format!("name: x\ndescription: {}\n", "y".repeat(2 << 20)),
    )
    .unwrap();
    viewerfleet()
        .arg("validate")
        .arg(&big)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "a scenario file may have at most 1048576 bytes",
        ));
}

#[test]
fn validate_100000_open_brackets_answers_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let deep = dir.path().join("deep.yaml");
    std::fs::write(&deep, format!("name: {}", "[".repeat(100_000))).unwrap();
    let started = Instant::now();
    viewerfleet()
        .arg("validate")
        .arg(&deep)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "deep.yaml:1: (file): `[` at column 38 opens nesting level 33",
        ));
    // The parser never saw it (it took 70 s): the refusal comes from the check before it.
    assert!(started.elapsed() < DEADLINE);
}

fn scenario_with(extra: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.yaml");
    let base = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/local/vod.yaml"),
    )
    .unwrap();
    std::fs::write(&path, format!("{base}{extra}")).unwrap();
    (dir, path)
}

#[test]
fn negative_max_failed_viewers_names_its_line_field_and_both_forms() {
    let (_dir, path) = scenario_with("max_failed_viewers: -1\n");
    let line = std::fs::read_to_string(&path).unwrap().lines().count();
    viewerfleet()
        .arg("validate")
        .arg(&path)
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains(format!(
                "s.yaml:{line}: max_failed_viewers: -1 is negative; write a count of viewers (0 or more, e.g. 2) or a share in quotes (e.g. \"5%\")"
            ))
            .and(predicate::str::contains("enum").not())
            .and(predicate::str::contains("FailedThreshold").not()),
        );
}

#[test]
fn a_fleet_field_error_names_the_field_and_its_line() {
    let (_dir, path) = scenario_with("");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("  kind: local\n", "  kind: netns\n  target_port: 70000\n");
    std::fs::write(&path, &text).unwrap();
    let line = text.lines().position(|l| l.contains("70000")).unwrap() + 1;
    viewerfleet()
        .arg("validate")
        .arg(&path)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(format!(
            "s.yaml:{line}: fleet.target_port: invalid value: integer `70000`, expected a whole number from 0 to 65535"
        )));
}

#[test]
fn validate_run_and_plan_exit_2_on_the_same_invalid_file() {
    let (dir, path) = scenario_with("max_failed_viewers: -1\n");
    for args in [
        vec!["validate".to_string()],
        vec![
            "run".into(),
            "--out".into(),
            dir.path().join("out").display().to_string(),
        ],
        vec!["plan".into()],
    ] {
        viewerfleet()
            .args(&args)
            .arg(&path)
            .env_remove("HCLOUD_TOKEN")
            .assert()
            .code(2)
            .stderr(predicate::str::contains("max_failed_viewers"));
    }
}

#[test]
fn validate_refuses_a_youtube_watch_page_for_a_peertube_target() {
    let (_dir, path) = scenario_with("");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace(
            "  kind: refsite\n",
            "  kind: peertube\n  url: https://www.youtube.com/watch?v=dQw4w9WgXcQ\n",
        )
        .replace("  metrics_interval: 5s\n  vod_length: 3m\n", "");
    std::fs::write(&path, &text).unwrap();
    viewerfleet()
        .arg("validate")
        .arg(&path)
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("target.url: `https://www.youtube.com/watch?v=dQw4w9WgXcQ` is a YouTube page, not a PeerTube video")
                .and(predicate::str::contains("/w/<uuid>"))
                .and(predicate::str::contains("/videos/embed/<uuid>")),
        );
}

#[test]
fn readme_exit_code_table_covers_every_subcommand() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    // The section's tables: the codes, then what each means per command.
    let table: Vec<&str> = readme
        .split("### Exit codes")
        .nth(1)
        .expect("README has an `### Exit codes` section")
        .lines()
        .take_while(|l| !l.starts_with("### "))
        .filter(|l| l.starts_with('|'))
        .collect();
    let help = viewerfleet().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    let subcommands: Vec<&str> = help
        .split("Commands:")
        .nth(1)
        .unwrap()
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(subcommands.len() >= 10, "{subcommands:?}");
    for command in subcommands {
        assert!(
            table
                .iter()
                .any(|row| row.contains(&format!("`{command}`"))),
            "README's exit-code table has no row for `{command}`"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn down_into_a_closed_pipe_finishes_the_teardown() {
    use viewerfleet_kit::fake_hcloud::{FakeConfig, FakeHcloud};
    const TOKEN: &str = "bad-input-token-5d1c";
    // `up` leaves a reaper guarding the fleet: the test waits for it (see `Fake`).
    let fake = super::cloud_cli::Fake::new(
        FakeHcloud::start(
            FakeConfig {
                token: Some(TOKEN.into()),
                node_boot: Some(Duration::from_millis(100)),
                ..FakeConfig::default()
            },
            "127.0.0.1:0".parse().unwrap(),
        )
        .await
        .unwrap(),
    );
    // The target is checked before any server is created: a local stand-in for it.
    let target = viewerfleet_kit::webdriver_stub::Stub::serve(
        "127.0.0.1:0".parse().unwrap(),
        Default::default(),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("id.pub");
    std::fs::write(
        &key,
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBadInputKey t@example\n",
    )
    .unwrap();
    let scenario = dir.path().join("cloud.yaml");
    std::fs::write(
        &scenario,
        format!(
            "name: pipe-cloud\ntarget:\n  kind: peertube\n  video: live\n  url: http://{}/w/x\nviewers:\n  count: 8\nduration: 1m\nfleet:\n  kind: hcloud\n  controller_ips: [\"198.51.100.7/32\"]\n  ssh_public_key: {}\n  node_type: cx33\n  viewers_per_node: 4\n",
            target.addr(),
            key.display()
        ),
    )
    .unwrap();
    let command = |stdout: Stdio| {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_viewerfleet"));
        cmd.current_dir(dir.path())
            .env("HCLOUD_ENDPOINT", fake.endpoint())
            .env("HCLOUD_TOKEN", TOKEN)
            .env("VIEWERFLEET_HCLOUD_HUB_URL", fake.hub_url())
            .env("VIEWERFLEET_YES", "1")
            .env_remove("RUST_LOG")
            .stdout(stdout)
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    };
    let inventory = dir.path().join("inventory.json");
    let up = tokio::time::timeout(
        DEADLINE * 4,
        command(Stdio::null())
            .arg("up")
            .arg(&scenario)
            .arg("--inventory")
            .arg(&inventory)
            .output(),
    )
    .await
    .expect("up ends")
    .unwrap();
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let inv: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&inventory).unwrap()).unwrap();
    let run = inv["run"].as_str().unwrap().to_string();
    assert_eq!(
        fake.state
            .servers_matching(&format!("viewerfleet-run={run}"))
            .len(),
        3
    );

    // `viewerfleet down RUN | head -1`, with head already gone.
    let down = tokio::time::timeout(
        DEADLINE * 4,
        command(Stdio::from(closed_pipe()))
            .arg("down")
            .arg(&run)
            .output(),
    )
    .await
    .expect("down ends")
    .unwrap();
    let stderr = String::from_utf8_lossy(&down.stderr);
    assert_eq!(down.status.code(), Some(0), "{stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
        "{stderr}"
    );
    assert!(fake.state.servers().is_empty(), "every server deleted");
    assert!(fake.state.firewalls().is_empty() && fake.state.ssh_keys().is_empty());
    fake.no_reaper_left().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_into_a_closed_pipe_ends_quietly_with_0() {
    use viewerfleet_kit::fake_hcloud::{FakeConfig, FakeHcloud};
    const TOKEN: &str = "bad-input-plan-token-77a0";
    let fake = FakeHcloud::start(
        FakeConfig {
            token: Some(TOKEN.into()),
            ..FakeConfig::default()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // `plan` writes its estimates through a writer of its own, not the commands' macros.
    let out = tokio::time::timeout(
        DEADLINE * 2,
        tokio::process::Command::new(env!("CARGO_BIN_EXE_viewerfleet"))
            .current_dir(root)
            .env("HCLOUD_ENDPOINT", fake.endpoint())
            .env("HCLOUD_TOKEN", TOKEN)
            .env_remove("RUST_LOG")
            .arg("plan")
            .args(
                ["live-normal", "live-high", "vod"]
                    .map(|s| format!("scenarios/peertube-1000/{s}.yaml")),
            )
            .stdout(Stdio::from(closed_pipe()))
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("plan ends")
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
        "{stderr}"
    );
}

#[test]
fn a_calibration_viewer_slots_or_token_file_that_never_ends_is_refused_at_once() {
    let started = Instant::now();
    let err = viewerfleet::calibrate::Calibration::load(Path::new("/dev/zero")).unwrap_err();
    assert!(format!("{err:#}").contains("not a regular file"), "{err:#}");
    if std::env::var_os("HCLOUD_TOKEN").is_none() {
        let err = viewerfleet::cloud::token::ApiToken::load(Some("/dev/zero")).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }
    let dir = tempfile::tempdir().unwrap();
    viewerfleet()
        .current_dir(dir.path())
        .args(["up", "--viewer-slots", "/dev/zero"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/peertube-1000/live-normal.yaml"))
        .env_remove("HCLOUD_TOKEN")
        .timeout(DEADLINE)
        .assert()
        .failure()
        .stderr(
            predicate::str::contains("--viewer-slots /dev/zero")
                .and(predicate::str::contains("not a regular file")),
        );
    assert!(started.elapsed() < DEADLINE);
}

/// README's table of codes is the one in `model::exit`: every code, with its name.
#[test]
fn readme_exit_codes_are_the_programs() {
    use viewerfleet::model::exit::Exit;
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let section = readme.split("### Exit codes").nth(1).unwrap();
    for exit in Exit::ALL {
        let row = format!("`{}`", exit.code());
        let line = section
            .lines()
            .find(|l| {
                l.split('|')
                    .nth(1)
                    .is_some_and(|first| first.contains(&row))
            })
            .unwrap_or_else(|| panic!("no row for exit code {}", exit.code()));
        assert!(
            line.contains(&format!("`{}`", exit.as_str())),
            "the row of {} names `{}`: {line}",
            exit.code(),
            exit.as_str()
        );
    }
}

/// A hub that asks for a password and got none, or credentials given by halves: bad input
/// (exit 2) naming the variables to set, before any session is asked for.
#[tokio::test(flavor = "multi_thread")]
async fn a_grid_that_asks_for_a_password_is_bad_input_naming_the_variables() {
    use axum::{http::StatusCode, routing::any, Router};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hub = Router::new().fallback(any(|| async { StatusCode::UNAUTHORIZED }));
    let server = tokio::spawn(async move { axum::serve(listener, hub).await });
    let grid = format!("\nfleet: {{kind: grid, url: 'http://{addr}/'}}\n");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.yaml");
    std::fs::write(
        &path,
        format!("name: auth\ntarget: {{kind: refsite, video: vod}}\nviewers: {{count: 2, ramp: 2s}}\nduration: 20s\nsampling_interval: 2s\nmeasure_at: 18s\nsteady_window: 6s\n{grid}"),
    )
    .unwrap();
    for (k, (env, says)) in [
        (vec![], "VIEWERFLEET_GRID_PASSWORD"),
        (
            vec![("VIEWERFLEET_GRID_USER", "me")],
            "VIEWERFLEET_GRID_USER is set but VIEWERFLEET_GRID_PASSWORD is not",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let path = path.clone();
        let out_dir = dir.path().join(format!("out-{k}"));
        let out = tokio::task::spawn_blocking(move || {
            let mut cmd = viewerfleet();
            cmd.args(["--quiet", "run", "--no-report"])
                .arg(&path)
                .arg("--out")
                .arg(&out_dir)
                .env_remove("VIEWERFLEET_GRID_USER")
                .env_remove("VIEWERFLEET_GRID_PASSWORD");
            for (k, v) in &env {
                cmd.env(k, v);
            }
            cmd.output().unwrap()
        })
        .await
        .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
    server.abort();
}
