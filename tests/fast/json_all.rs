//! `--json` on every command, as scripts use it: each command the CLI defines (read from
//! its clap definition, so a command added later without a case here fails
//! [`every_command_has_json_and_its_documents_match_their_schema`]) is run with `--json` on
//! an error path and with a usage error, and its success path is run by a named test of
//! the fast tier (here for `ladder`, `up`, `down`, `gc`, `grid` and `refsite`; in
//! `json_output.rs` and the other files for the rest). Every document is checked against
//! its schema with every field named (`tests/support/schema.rs`), and stdout holds that
//! document and nothing else.

use crate::cloud_cli::{booting_fake, command, scenario, target, target_url};
use crate::support::fixtures::{copy_dir, fixture};
use crate::support::schema::assert_valid;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_viewerfleet");

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// One command's `--json` paths.
struct Case {
    /// As typed: `run`, `grid up`.
    command: &'static str,
    /// Its schema in `schemas/`.
    schema: &'static str,
    /// Arguments after the command that end on an error without a network or a browser,
    /// run in an empty folder.
    error_args: &'static [&'static str],
    /// The exit code of that error.
    error_exit: i32,
    /// The test that runs its success path: (file under the source tree, function name).
    success_test: (&'static str, &'static str),
}

const JSON_OUTPUT: &str = "tests/fast/json_output.rs";
const HERE: &str = "tests/fast/json_all.rs";
const MISSING: &str = "/nonexistent/scenario.yaml";

const CASES: &[Case] = &[
    Case {
        command: "run",
        schema: "run-summary.v1.json",
        error_args: &[MISSING],
        error_exit: 2,
        success_test: (
            JSON_OUTPUT,
            "thresholds_that_pass_exit_0_also_without_a_written_report",
        ),
    },
    Case {
        command: "refsite",
        schema: "refsite-summary.v1.json",
        error_args: &["--listen", "127.0.0.1:0", "--vod-length", "2s"],
        error_exit: 2,
        success_test: (HERE, "refsite_json_is_one_document_once_it_listens"),
    },
    Case {
        command: "report",
        schema: "report-summary.v1.json",
        error_args: &["/nonexistent/run"],
        error_exit: 2,
        success_test: (
            JSON_OUTPUT,
            "report_json_gives_the_headline_and_a_folder_without_raw_data_an_error",
        ),
    },
    Case {
        command: "compare",
        schema: "compare-summary.v1.json",
        error_args: &["/nonexistent/run", "--out", "cmp"],
        error_exit: 2,
        success_test: (
            JSON_OUTPUT,
            "suite_json_names_the_run_whose_threshold_failed_and_exits_99",
        ),
    },
    Case {
        command: "suite",
        schema: "suite-summary.v1.json",
        error_args: &[MISSING, "--out", "suite"],
        error_exit: 2,
        success_test: (
            JSON_OUTPUT,
            "suite_json_names_the_run_whose_threshold_failed_and_exits_99",
        ),
    },
    Case {
        command: "gc",
        schema: "gc-summary.v1.json",
        error_args: &["--cloud", "--older-than", "soon"],
        error_exit: 2,
        success_test: (HERE, "up_gc_and_down_json_against_the_fake_api"),
    },
    Case {
        command: "plan",
        schema: "plan-summary.v1.json",
        error_args: &[MISSING],
        error_exit: 2,
        success_test: (
            "tests/fast/cloud_cli.rs",
            "plan_fits_every_1000_viewer_scenario_within_10_servers_with_light_peers",
        ),
    },
    Case {
        command: "up",
        schema: "up-summary.v1.json",
        error_args: &[MISSING],
        error_exit: 2,
        success_test: (HERE, "up_gc_and_down_json_against_the_fake_api"),
    },
    Case {
        command: "down",
        schema: "down-summary.v1.json",
        error_args: &["not a run!"],
        error_exit: 2,
        success_test: (HERE, "up_gc_and_down_json_against_the_fake_api"),
    },
    Case {
        command: "validate",
        schema: "validate-summary.v1.json",
        error_args: &[MISSING],
        error_exit: 2,
        success_test: (
            JSON_OUTPUT,
            "validate_json_lists_every_file_with_its_verdict",
        ),
    },
    Case {
        command: "grid up",
        schema: "grid-summary.v1.json",
        // Without --local: refused before anything starts.
        error_args: &[],
        error_exit: 2,
        // A local Grid needs root and Java: the document is checked from a recorded
        // Grid's state.
        success_test: ("src/commands/json.rs", "grid_up_json_matches_its_schema"),
    },
    Case {
        command: "grid down",
        schema: "grid-summary.v1.json",
        error_args: &["--state", "state.json"],
        error_exit: 70,
        success_test: (HERE, "grid_down_and_files_json"),
    },
    Case {
        command: "grid files",
        schema: "grid-summary.v1.json",
        error_args: &["--jar", "/nonexistent/selenium.jar"],
        error_exit: 70,
        success_test: (HERE, "grid_down_and_files_json"),
    },
    Case {
        command: "ladder",
        schema: "ladder-summary.v1.json",
        error_args: &[MISSING, "--steps", "2", "--out", "ladder"],
        error_exit: 2,
        success_test: (HERE, "ladder_json_from_step_folders"),
    },
    Case {
        command: "calibrate",
        schema: "calibrate-summary.v1.json",
        error_args: &[MISSING],
        error_exit: 2,
        // Calibration plays real browsers (tests/real/calibrate_local.rs); the document's
        // mapping is checked from a recorded calibration.
        success_test: ("src/commands/json.rs", "calibrate_json_matches_its_schema"),
    },
    Case {
        command: "fidelity",
        schema: "fidelity-summary.v1.json",
        error_args: &[MISSING, "--swarm", "4", "--out", "fid"],
        error_exit: 2,
        success_test: (
            "tests/fast/light_fidelity.rs",
            "light_peers_are_measured_against_an_all_real_swarm_and_the_verdict_is_relied_on",
        ),
    },
];

/// Every command a user runs, as typed (`grid up`): the leaves of the clap definition,
/// hidden ones (the internal `reaper`) and `help` left out.
fn leaf_commands() -> Vec<(String, clap::Command)> {
    use clap::CommandFactory;
    fn walk(prefix: &str, cmd: &clap::Command, out: &mut Vec<(String, clap::Command)>) {
        for sub in cmd.get_subcommands() {
            if sub.is_hide_set() || sub.get_name() == "help" {
                continue;
            }
            let name = format!("{prefix}{}", sub.get_name()).trim().to_string();
            if sub.has_subcommands() {
                walk(&format!("{name} "), sub, out);
            } else {
                out.push((name, sub.clone()));
            }
        }
    }
    let mut cli = viewerfleet::cli::Cli::command();
    // Propagates global flags (`grid --json`) to the subcommands.
    cli.build();
    let mut out = Vec::new();
    walk("", &cli, &mut out);
    out
}

fn viewerfleet(dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .current_dir(dir)
        .arg("--quiet")
        .args(args)
        .env_remove("HCLOUD_TOKEN")
        .env_remove("HCLOUD_TOKEN_FILE")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn every_command_has_json_and_its_documents_match_their_schema() {
    let commands = leaf_commands();
    let mut defined: Vec<&str> = commands.iter().map(|(n, _)| n.as_str()).collect();
    let mut cased: Vec<&str> = CASES.iter().map(|c| c.command).collect();
    defined.sort_unstable();
    cased.sort_unstable();
    assert_eq!(
        defined, cased,
        "every command needs a --json case in tests/fast/json_all.rs (its error path, its schema and the test of its success path)"
    );
    for (name, cmd) in &commands {
        assert!(
            cmd.get_arguments().any(|a| a.get_long() == Some("json")),
            "`{name}` has no --json"
        );
    }
    for case in CASES {
        let dir = tempfile::tempdir().unwrap();
        if case.command == "grid down" {
            // A state file that is not a Grid's.
            std::fs::write(dir.path().join("state.json"), "not json").unwrap();
        }
        let words: Vec<&str> = case.command.split(' ').collect();
        let mut args = words.clone();
        args.extend(case.error_args);
        args.push("--json");
        let out = viewerfleet(dir.path(), &args);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(
            out.status.code(),
            Some(case.error_exit),
            "{args:?}\n{stdout}\n{stderr}"
        );
        let doc = assert_valid(case.schema, &stdout);
        assert_eq!(doc["command"], words[0], "{args:?}");
        assert_eq!(doc["exit_code"], case.error_exit, "{args:?}");
        // A command's error is printed as `Error: …`, a flag clap refused as `error: …`.
        assert!(
            stderr.contains("Error: ") || stderr.starts_with("error: ") || doc["error"].is_null(),
            "{args:?}: the error is on stderr too\n{stderr}"
        );

        // A usage error is a document of the same schema.
        let mut args = words.clone();
        args.extend(["--bogus", "--json"]);
        let out = viewerfleet(dir.path(), &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let doc = assert_valid(case.schema, &text(&out.stdout));
        assert_eq!(
            (doc["command"].as_str(), doc["outcome"].as_str()),
            (Some(words[0]), Some("bad-input")),
            "{args:?}"
        );

        let (file, test) = case.success_test;
        let source = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file))
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(
            source.contains(&format!("fn {test}(")),
            "`{}`: no test {test} in {file}",
            case.command
        );
    }
}

/// `ladder --analyze-only --json`: the capacity report of step folders already measured,
/// one row per step, the report's files; the text on stderr.
#[test]
fn ladder_json_from_step_folders() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("ladder");
    copy_dir(&fixture("run-steady"), &out.join("step-3"));
    copy_dir(&fixture("run-starved"), &out.join("step-6"));
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/local/vod.yaml");
    let result = Command::new(BIN)
        .arg("--quiet")
        .arg("ladder")
        .arg(&scenario)
        .args(["--steps", "3,6", "--analyze-only", "--json", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&result.stdout), text(&result.stderr));
    assert_eq!(result.status.code(), Some(0), "{stderr}");
    let doc = assert_valid("ladder-summary.v1.json", &stdout);
    let ladder = &doc["ladder"];
    assert_eq!(ladder["scenario"], "vod");
    assert_eq!(ladder["interrupted"], false);
    assert_eq!(
        ladder["capacity_json"],
        out.join("capacity.json").display().to_string()
    );
    assert!(out.join("capacity.json").exists());
    let steps = ladder["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(
        steps[0]["run_dir"],
        out.join("step-3").display().to_string()
    );
    assert!(stderr.contains("capacity report: "), "{stderr}");
}

/// `up --json` (the inventory in the document, nothing else on stdout), `gc --cloud
/// --json` with and without `--dry-run`, and `down --json`, against the fake Hetzner API.
#[tokio::test(flavor = "multi_thread")]
async fn up_gc_and_down_json_against_the_fake_api() {
    let fake = booting_fake().await;
    let target = target().await;
    let dir = tempfile::tempdir().unwrap();
    let path = scenario(dir.path(), &target_url(&target), 12, "");
    let run_json = |args: Vec<String>| {
        let mut cmd = command(&fake, dir.path());
        cmd.arg("--quiet").args(args).arg("--json");
        async move {
            tokio::time::timeout(Duration::from_secs(120), cmd.output())
                .await
                .unwrap()
                .unwrap()
        }
    };
    let out = run_json(vec!["up".into(), path.display().to_string()]).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let doc = assert_valid("up-summary.v1.json", &text(&out.stdout));
    let up = &doc["up"];
    let run = up["run"].as_str().unwrap().to_string();
    assert_eq!(up["inventory"]["run"], run.as_str());
    assert_eq!(up["hub_url"], fake.hub_url());
    assert_eq!(up["nodes"], 3);
    assert_eq!(up["capacity"], 12);
    assert!(up["inventory_file"].is_null());
    assert_eq!(up["inventory"]["nodes"].as_array().unwrap().len(), 3);
    assert!(up["api_requests"].as_u64().unwrap() > 0);
    assert!(
        stderr.contains(&format!("viewerfleet down {run}")),
        "{stderr}"
    );

    // The fleet was handed over to its TTL: gc keeps it, and says why.
    let out = run_json(vec!["gc".into(), "--cloud".into(), "--dry-run".into()]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = assert_valid("gc-summary.v1.json", &text(&out.stdout));
    let gc = &doc["gc"];
    assert_eq!(
        (gc["dry_run"].as_bool(), gc["local"].is_null()),
        (Some(true), true)
    );
    let cloud = &gc["cloud"];
    assert!(
        cloud["deleted"].is_null() && cloud["skipped"].is_null(),
        "{cloud}"
    );
    let found = cloud["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run"] == run.as_str())
        .expect("the run is listed");
    let resources = found["resources"].as_array().unwrap();
    assert!(
        resources.iter().all(|r| r["action"] == "keep"),
        "{resources:?}"
    );
    assert_eq!(
        resources.iter().filter(|r| r["kind"] == "server").count(),
        4
    );

    let out = run_json(vec!["down".into(), run.clone()]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = assert_valid("down-summary.v1.json", &text(&out.stdout));
    let deleted = &doc["down"]["deleted"];
    assert_eq!(doc["down"]["run"], run.as_str());
    assert_eq!(
        (
            deleted["servers"].as_array().unwrap().len(),
            deleted["firewalls"].as_array().unwrap().len(),
            deleted["ssh_keys"].as_array().unwrap().len()
        ),
        (4, 2, 1)
    );
    assert!(fake.state.servers().is_empty());

    // Nothing left: gc deletes nothing, and says so in the document.
    let out = run_json(vec!["gc".into(), "--cloud".into()]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = assert_valid("gc-summary.v1.json", &text(&out.stdout));
    assert_eq!(
        doc["gc"]["cloud"]["deleted"],
        serde_json::json!({"servers": [], "firewalls": [], "ssh_keys": []})
    );
    fake.no_reaper_left().await;
}

/// `gc --local --dry-run --json`: what would be removed on this machine, removing nothing
/// (other tests' browsers may be running).
#[test]
fn gc_local_dry_run_json() {
    let dir = tempfile::tempdir().unwrap();
    let out = viewerfleet(dir.path(), &["gc", "--local", "--dry-run", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = assert_valid("gc-summary.v1.json", &text(&out.stdout));
    assert_eq!(doc["gc"]["dry_run"], true);
    assert!(doc["gc"]["cloud"].is_null());
    assert!(doc["gc"]["local"]["removed"].is_array());
}

/// `grid down --json` with no Grid recorded, and `grid files --json` with a jar given;
/// `grid --json up` takes the flag before the subcommand too.
#[test]
fn grid_down_and_files_json() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("local.json");
    let state_arg = state.display().to_string();
    let out = viewerfleet(
        dir.path(),
        &["grid", "down", "--state", &state_arg, "--json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = assert_valid("grid-summary.v1.json", &text(&out.stdout));
    assert_eq!(
        doc["grid"],
        serde_json::json!({"action": "down", "state_file": state_arg, "stopped": false})
    );

    let jar = dir.path().join("selenium-server.jar");
    std::fs::write(&jar, "PK").unwrap();
    let jar_arg = jar.display().to_string();
    let out = viewerfleet(dir.path(), &["grid", "files", "--jar", &jar_arg, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = assert_valid("grid-summary.v1.json", &text(&out.stdout));
    assert_eq!(doc["grid"]["action"], "files");
    assert_eq!(doc["grid"]["jar"], jar_arg.as_str());
    assert!(text(&out.stderr).contains("jar: "));

    let out = viewerfleet(dir.path(), &["grid", "--json", "up"]);
    assert_eq!(out.status.code(), Some(2));
    assert_valid("grid-summary.v1.json", &text(&out.stdout));
}

/// `refsite --json`: one document on stdout once the site listens (its address, metrics and
/// videos), and nothing more on stdout until it stops.
#[test]
fn refsite_json_is_one_document_once_it_listens() {
    use std::io::Read;
    let media = Path::new(env!("CARGO_TARGET_TMPDIR")).join("refsite-media");
    let mut child = Command::new(BIN)
        .args([
            "--quiet",
            "refsite",
            "--listen",
            "127.0.0.1:0",
            "--videos",
            "vod",
        ])
        .args(["--vod-length", "30s", "--json", "--media"])
        .arg(&media)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // The whole document, read until it parses; then the rest until the pipe closes.
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        let mut sent = false;
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
            if !sent && serde_json::from_slice::<serde_json::Value>(&seen).is_ok() {
                sent = true;
                let _ = tx.send(seen.clone());
            }
        }
        let _ = tx.send(seen);
    });
    let first = rx.recv_timeout(Duration::from_secs(90));
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    let status = child.wait().unwrap();
    let first = text(&first.expect("the document within 90 s"));
    let doc = assert_valid("refsite-summary.v1.json", first.trim_end());
    let site = &doc["refsite"];
    assert!(
        site["base_url"]
            .as_str()
            .unwrap()
            .starts_with("http://127.0.0.1:"),
        "{site}"
    );
    assert_eq!(site["videos"].as_array().unwrap().len(), 1);
    assert_eq!(site["videos"][0]["kind"], "vod");
    assert_eq!(status.code(), Some(0));
    let all = text(&rx.recv_timeout(Duration::from_secs(30)).unwrap());
    assert_eq!(all, first, "nothing but the document on stdout");
}
