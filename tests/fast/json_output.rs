//! What scripts and CI jobs read: `--json` documents checked against the committed schemas
//! (`schemas/*.v1.json`), the scenario's thresholds in them and in the report, and the
//! exit code 99 of a failed threshold. Runs go through the real binary against the
//! WebDriver stub (a Grid hub and a PeerTube-like page), as a CI job would run them.

use crate::support::fixtures::copy_of;
use crate::support::schema::{assert_envelope, assert_valid};
use std::path::Path;
use std::process::Output;
use viewerfleet_kit::webdriver_stub::{Stub, StubConfig};

const BIN: &str = env!("CARGO_BIN_EXE_viewerfleet");

async fn stub() -> Stub {
    Stub::serve("127.0.0.1:0".parse().unwrap(), StubConfig::default())
        .await
        .unwrap()
}

/// A 6-second run of three stub viewers; `exporter` adds the stub's exporter.
fn scenario(stub: &Stub, name: &str, exporter: bool, thresholds: &str) -> String {
    let a = stub.addr();
    let exporter = if exporter {
        format!("  exporter: http://{a}/metrics\n")
    } else {
        String::new()
    };
    format!(
        "name: {name}\ntarget:\n  kind: peertube\n  video: vod\n  url: http://{a}/w/test\n{exporter}\
         viewers:\n  count: 3\n  ramp: 1s\nduration: 6s\nsampling_interval: 500ms\nmeasure_at: 5s\n\
         steady_window: 2s\nthresholds:\n{thresholds}fleet:\n  kind: grid\n  url: http://{a}/\n"
    )
}

/// The binary with `args`, in `dir`, without blocking the stub's runtime.
async fn viewerfleet(dir: &Path, args: &[&str]) -> Output {
    let mut cmd = std::process::Command::new(BIN);
    cmd.current_dir(dir).arg("--quiet").args(args);
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_threshold_exits_99_and_is_listed_in_the_json_and_the_report() {
    let stub = stub().await;
    let dir = tempfile::tempdir().unwrap();
    // No exporter: a threshold on the exporter's figures has no value and fails.
    let yaml = scenario(
        &stub,
        "thresholds-fail",
        false,
        "  ttff_p95: \"< 60s\"\n  failed_viewers: \"<= 0\"\n  exporter.http_share_at_t: \"< 50%\"\n",
    );
    std::fs::write(dir.path().join("s.yaml"), yaml).unwrap();
    let checked = viewerfleet(dir.path(), &["validate", "s.yaml"]).await;
    assert!(
        text(&checked.stdout).contains(
            "  thresholds: ttff_p95 < 60s, failed_viewers <= 0, exporter.http_share_at_t < 50%"
        ),
        "{}",
        text(&checked.stdout)
    );
    let out = viewerfleet(dir.path(), &["run", "s.yaml", "--out", "run", "--json"]).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(99), "{stderr}");
    // stdout holds the document alone; the human summary went to stderr.
    let doc = assert_valid("run-summary.v1.json", &stdout);
    assert_eq!(doc["outcome"], "thresholds-failed");
    assert_eq!(doc["exit_code"], 99);
    assert!(
        stderr.contains("THRESHOLDS FAILED: 1 of 3 (exit code 99)"),
        "{stderr}"
    );
    assert!(stderr.contains("raw data: run"), "{stderr}");
    let thresholds = doc["run"]["headline"]["thresholds"].as_array().unwrap();
    let verdicts: Vec<(&str, bool)> = thresholds
        .iter()
        .map(|t| (t["metric"].as_str().unwrap(), t["pass"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("ttff_p95", true),
            ("failed_viewers", true),
            ("exporter.http_share_at_t", false)
        ]
    );
    let missing = &thresholds[2];
    assert!(missing["value"].is_null());
    assert_eq!(missing["observed"], "no value");
    assert!(
        missing["reason"]
            .as_str()
            .unwrap()
            .contains("no exporter samples"),
        "{missing}"
    );
    assert_eq!(doc["run"]["report_json"], "run/report.json");

    // The report lists them too, and rebuilding it judges them again.
    let run = dir.path().join("run");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["thresholds"].as_array().unwrap().len(), 3);
    let md = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(md.contains("> **THRESHOLDS FAILED**"), "{md}");
    assert!(
        md.contains("| exporter.http_share_at_t | < 50% | no value | FAIL |"),
        "{md}"
    );
    let manifest = std::fs::read_to_string(run.join("manifest.json")).unwrap();
    assert!(
        manifest.contains("\"exit_status\": \"exit code 99\""),
        "{manifest}"
    );
    let again = viewerfleet(dir.path(), &["report", "run"]).await;
    assert_eq!(again.status.code(), Some(99), "{}", text(&again.stderr));
    assert!(text(&again.stdout).contains("THRESHOLDS FAILED: 1 of 3"));
}

#[tokio::test(flavor = "multi_thread")]
async fn thresholds_that_pass_exit_0_also_without_a_written_report() {
    let stub = stub().await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = scenario(
        &stub,
        "thresholds-pass",
        true,
        "  ttff_p95: \"< 60s\"\n  http_share_at_t: \"< 90%\"\n  players.p2p_savings_at_t: \">= 10%\"\n  failed_viewers: \"< 5%\"\n",
    );
    std::fs::write(dir.path().join("s.yaml"), yaml).unwrap();
    let out = viewerfleet(
        dir.path(),
        &["run", "s.yaml", "--out", "run", "--json", "--no-report"],
    )
    .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let doc = assert_valid("run-summary.v1.json", &text(&out.stdout));
    assert_eq!(doc["outcome"], "ok");
    // Judged from a report built in memory: nothing written.
    assert!(doc["run"]["report_json"].is_null());
    assert!(!dir.path().join("run/report.json").exists());
    let thresholds = doc["run"]["headline"]["thresholds"].as_array().unwrap();
    assert_eq!(thresholds.len(), 4);
    assert!(
        thresholds.iter().all(|t| t["pass"] == true),
        "{thresholds:?}"
    );
    // The top-level share came from the exporter, the run's own source.
    assert_eq!(
        thresholds[1]["source"], "http_share (source: exporter)",
        "{thresholds:?}"
    );
    assert!(stderr.contains("thresholds: all 4 passed"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn suite_json_names_the_run_whose_threshold_failed_and_exits_99() {
    let stub = stub().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("ok.yaml"),
        scenario(&stub, "ok", true, "  failed_viewers: \"<= 0\"\n"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("strict.yaml"),
        scenario(&stub, "strict", true, "  p2p_savings_at_t: \">= 99.5%\"\n"),
    )
    .unwrap();
    let out = viewerfleet(
        dir.path(),
        &[
            "suite",
            "ok.yaml",
            "strict.yaml",
            "--out",
            "suite",
            "--json",
        ],
    )
    .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(99), "{stderr}");
    let doc = assert_valid("suite-summary.v1.json", &text(&out.stdout));
    assert_eq!(doc["outcome"], "thresholds-failed");
    let suite = &doc["suite"];
    assert_eq!(suite["runs_started"], 2);
    assert_eq!(suite["thresholds_failed"], serde_json::json!(["strict-1"]));
    let groups = suite["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2);
    let strict = &groups[1]["runs"][0]["headline"];
    assert!(
        strict["flags"]
            .as_str()
            .unwrap()
            .contains("THRESHOLDS FAILED 1/1"),
        "{strict}"
    );

    // `compare --json` over the same folders gives the same rows, and exits 99 as the
    // suite did, naming the run and the condition it failed.
    let out = viewerfleet(
        dir.path(),
        &[
            "compare",
            "suite/ok-1",
            "suite/strict-1",
            "--out",
            "cmp",
            "--json",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(99), "{}", text(&out.stderr));
    let cmp = assert_valid("compare-summary.v1.json", &text(&out.stdout));
    assert_eq!(cmp["outcome"], "thresholds-failed");
    assert_eq!(cmp["compare"]["groups"].as_array().unwrap().len(), 2);
    assert_eq!(cmp["compare"]["compare_json"], "cmp/compare.json");
    assert_eq!(cmp["compare"]["thresholds_from"], "manifest");
    let failed = cmp["compare"]["thresholds_failed"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "{cmp}");
    assert_eq!(failed[0]["run"], "strict-1");
    assert_eq!(failed[0]["failed"][0]["metric"], "p2p_savings_at_t");
    assert_eq!(failed[0]["failed"][0]["condition"], ">= 99.5%");
    assert_eq!(failed[0]["failed"][0]["pass"], false);
}

#[test]
fn compare_json_with_groups_and_an_unreadable_folder() {
    let (_a, steady) = copy_of("run-steady");
    let (_b, starved) = copy_of("run-starved");
    let out_dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(BIN)
        .args(["compare", "--group", "--json", "--out"])
        .arg(out_dir.path())
        .arg(&steady)
        .arg(&starved)
        .arg("/no/such/run")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let doc = assert_valid("compare-summary.v1.json", &text(&out.stdout));
    assert_eq!(doc["outcome"], "failed");
    let failed = doc["compare"]["failed_runs"].as_array().unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["dir"], "/no/such/run");
    let starved_row = doc["compare"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["runs"].as_array().unwrap())
        .find(|r| r["name"] == "run-starved")
        .expect("the starved run's row");
    assert_eq!(
        starved_row["headline"]["headroom"]["verdict"],
        "not-a-finding"
    );
    assert_eq!(starved_row["headline"]["headroom"]["starved_viewers"], 5);
}

#[test]
fn an_error_under_json_is_a_document_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    std::fs::write(&path, "name: x\n").unwrap();
    let out = std::process::Command::new(BIN)
        .arg("run")
        .arg(&path)
        .arg("--json")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let doc = assert_valid("run-summary.v1.json", &text(&out.stdout));
    assert_eq!(doc["outcome"], "bad-input");
    assert!(doc["error"].as_str().unwrap().contains("bad.yaml"), "{doc}");
    assert!(doc.get("run").is_none());
    // The message is on stderr as always.
    assert!(
        text(&out.stderr).starts_with("Error: "),
        "{}",
        text(&out.stderr)
    );
}

/// `report --json`: the report's headline (as `run --json` gives it) and its files on
/// stdout, the table on stderr; a folder without raw data is an error document, exit 2.
#[test]
fn report_json_gives_the_headline_and_a_folder_without_raw_data_an_error() {
    let (_tmp, dir) = copy_of("run-steady");
    let out = std::process::Command::new(BIN)
        .args(["report", "--json"])
        .arg(&dir)
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let doc = assert_valid("report-summary.v1.json", &stdout);
    assert_eq!(
        (doc["command"].as_str(), doc["outcome"].as_str()),
        (Some("report"), Some("ok"))
    );
    let report = &doc["report"];
    assert_eq!(report["run_dir"], dir.display().to_string());
    assert_eq!(
        report["report_json"],
        dir.join("report.json").display().to_string()
    );
    assert_eq!(report["headline"]["viewers"]["started"], 5);
    assert_eq!(report["headline"]["source"], "exporter");
    assert!(stderr.contains("HTML report: "), "{stderr}");

    std::fs::remove_dir_all(dir.join("raw")).unwrap();
    let out = std::process::Command::new(BIN)
        .args(["report", "--json"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let doc = assert_valid("report-summary.v1.json", &text(&out.stdout));
    assert_eq!(doc["outcome"], "bad-input");
    assert!(doc.get("report").is_none());
    assert!(
        doc["error"]
            .as_str()
            .unwrap()
            .contains("the raw data of this run is missing"),
        "{doc}"
    );
}

/// `validate --json`: one entry per file in the order given, the valid ones with their
/// plan's summary and thresholds, the invalid ones with file, line and field; exit 2 when
/// one is invalid, as without `--json`.
#[test]
fn validate_json_lists_every_file_with_its_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.yaml");
    let text_of = crate::support::shipped_scenario("scenarios/local/vod.yaml");
    std::fs::write(
        &good,
        format!("{text_of}\nthresholds:\n  ttff_p95: \"< 15s\"\n  failed_viewers: \"<= 1\"\n"),
    )
    .unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, text_of.replace("count: auto", "count: 0")).unwrap();
    let out = std::process::Command::new(BIN)
        .args(["validate", "--json"])
        .arg(&good)
        .arg(&bad)
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let doc = assert_valid("validate-summary.v1.json", &stdout);
    assert_eq!(doc["outcome"], "bad-input");
    assert!(doc.get("error").is_none(), "each file's error is its own");
    let v = &doc["validate"];
    assert_eq!(
        (v["valid"].as_u64(), v["invalid"].as_u64()),
        (Some(1), Some(1))
    );
    let files = v["files"].as_array().unwrap();
    assert_eq!(files[0]["file"], good.display().to_string());
    assert_eq!(files[0]["valid"], true);
    assert_eq!(files[0]["scenario"], "vod");
    assert_eq!(
        files[0]["thresholds"],
        serde_json::json!([
            {"metric": "ttff_p95", "condition": "< 15s"},
            {"metric": "failed_viewers", "condition": "<= 1"}
        ])
    );
    assert_eq!(files[1]["valid"], false);
    let error = files[1]["error"].as_str().unwrap();
    assert!(
        error.contains("bad.yaml:") && error.contains("viewers.count"),
        "{error}"
    );
    // The text went to stderr: the summary line and the error alike.
    assert!(
        stderr.contains(": ok — ") && stderr.contains("viewers.count"),
        "{stderr}"
    );
}

/// A typo under `--json` is a document too: `jq` reads `bad-input` instead of failing on
/// an empty stdout. clap's message and usage stay on stderr, the exit code stays 2, and
/// `--help` is not an error.
#[test]
fn a_usage_error_under_json_prints_the_error_envelope() {
    let run = |args: &[&str]| std::process::Command::new(BIN).args(args).output().unwrap();
    let out = run(&["plan", "--bogus", "--json"]);
    assert_eq!(out.status.code(), Some(2));
    let doc = assert_valid("plan-summary.v1.json", &text(&out.stdout));
    assert_eq!(
        (doc["command"].as_str(), doc["outcome"].as_str()),
        (Some("plan"), Some("bad-input"))
    );
    assert_eq!(doc["exit_code"], 2);
    assert!(
        doc["error"].as_str().unwrap().contains("'--bogus'"),
        "{doc}"
    );
    assert!(text(&out.stderr).contains("unexpected argument '--bogus'"));
    // A missing argument; and a missing subcommand.
    let out = run(&["--quiet", "validate", "--json"]);
    assert_eq!(out.status.code(), Some(2));
    let doc = assert_valid("validate-summary.v1.json", &text(&out.stdout));
    assert_eq!(doc["outcome"], "bad-input");
    let out = run(&["grid", "--json"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(assert_envelope(&text(&out.stdout))["command"], "grid");
    let out = run(&["--json"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        assert_envelope(&text(&out.stdout))["command"],
        "viewerfleet"
    );
    // Without `--json`, and for `--help`, stdout holds no document.
    let out = run(&["plan", "--bogus"]);
    assert_eq!((out.status.code(), out.stdout.is_empty()), (Some(2), true));
    let out = run(&["plan", "--help", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("Usage: viewerfleet plan"));
}

/// The committed schemas promise what README does: fields may be added within a version.
/// None is closed, every one requires the envelope with the tool's version, and a document
/// with a field added anywhere still validates.
#[test]
fn the_schemas_are_open_to_added_fields() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "calibrate-summary.v1.json",
            "compare-summary.v1.json",
            "down-summary.v1.json",
            "envelope.v1.json",
            "fidelity-summary.v1.json",
            "gc-summary.v1.json",
            "grid-summary.v1.json",
            "ladder-summary.v1.json",
            "plan-summary.v1.json",
            "refsite-summary.v1.json",
            "report-summary.v1.json",
            "run-summary.v1.json",
            "suite-summary.v1.json",
            "up-summary.v1.json",
            "validate-summary.v1.json",
        ]
    );
    for name in &names {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(
            !text.contains("\"additionalProperties\": false"),
            "{name} is closed to added fields"
        );
        assert_eq!(schema["required"][1], "tool_version", "{name}");
    }
    // A real document with a field added at the top and inside the figures.
    let (_tmp, run) = copy_of("run-steady");
    let out = std::process::Command::new(BIN)
        .args(["report", "--json"])
        .arg(&run)
        .output()
        .unwrap();
    let mut doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["added_in_a_later_release"] = serde_json::json!(1);
    doc["report"]["headline"]["qoe"]["added_too"] = serde_json::json!("x");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report-summary.v1.json")).unwrap())
            .unwrap();
    assert_eq!(
        viewerfleet_kit::json_schema::validate(&schema, &doc),
        Vec::<String>::new()
    );
    assert_eq!(
        viewerfleet_kit::json_schema::validate_closed(&schema, &doc).len(),
        2
    );
}
