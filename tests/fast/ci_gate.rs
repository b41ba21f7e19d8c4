//! `examples/ci-gate.sh`, the CI example of README: judged on a fixture run folder (no
//! browser), and run on a scenario against the WebDriver stub, as a pipeline would; its
//! KEY=VALUE figures are extracted from the `--json` documents with `jq`.

use crate::support::fixtures::copy_of;
use std::path::Path;
use std::process::Output;
use viewerfleet_kit::webdriver_stub::{Stub, StubConfig};

const BIN: &str = env!("CARGO_BIN_EXE_viewerfleet");

fn script() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/ci-gate.sh")
}

fn gate(dir: &Path, args: &[&str]) -> Output {
    let jq = std::process::Command::new("jq").arg("--version").output();
    assert!(
        jq.is_ok_and(|o| o.status.success()),
        "examples/ci-gate.sh needs jq: install it (apt-get install jq)"
    );
    std::process::Command::new("sh")
        .arg(script())
        .args(args)
        .current_dir(dir)
        .env("VIEWERFLEET", BIN)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The script's KEY=VALUE lines.
fn figures(out: &Output) -> std::collections::BTreeMap<String, String> {
    text(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn ci_gate_judges_a_fixture_run_folder_without_a_browser_and_extracts_its_figures() {
    let (tmp, run) = copy_of("run-steady");
    let run_s = run.to_str().unwrap();
    let manifest = std::fs::read(run.join("manifest.json")).unwrap();
    // TTFF p95 2.9 s, P2P savings 66.7%: the first condition fails.
    let out = gate(tmp.path(), &[run_s, "ttff_p95<2.5s,p2p_savings_at_t>=60%"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(99), "{stderr}");
    let f = figures(&out);
    assert_eq!(f["outcome"], "thresholds-failed", "{f:?}");
    assert_eq!(f["exit_code"], "99");
    assert_eq!(f["thresholds_failed"], "ttff_p95");
    assert_eq!(f["ttff_p95_ms"], "2900");
    assert_eq!(f["failed_viewers"], "2");
    assert!(f["p2p_savings"].starts_with("0.666"), "{f:?}");
    assert!(
        stderr.contains("THRESHOLD FAILED: ttff_p95 < 2.5s: 2.9s"),
        "{stderr}"
    );
    assert!(
        !run.join("report.json").exists(),
        "the run folder was written into"
    );
    assert_eq!(std::fs::read(run.join("manifest.json")).unwrap(), manifest);

    // A gate the run meets: exit 0, nothing failed.
    let out = gate(tmp.path(), &[run_s, "ttff_p95<5s,failed_viewers<=2"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let f = figures(&out);
    assert_eq!(f["outcome"], "ok");
    assert_eq!(f["thresholds_failed"], "");

    // Not a run folder and no output folder: the usage, exit 2.
    let out = gate(tmp.path(), &["/no/such/run"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("usage:"));
}

#[tokio::test(flavor = "multi_thread")]
async fn ci_gate_runs_a_scenario_and_gates_on_its_thresholds() {
    let stub = Stub::serve("127.0.0.1:0".parse().unwrap(), StubConfig::default())
        .await
        .unwrap();
    let a = stub.addr();
    let dir = tempfile::tempdir().unwrap();
    // No exporter: the scenario's exporter threshold has no value and fails.
    std::fs::write(
        dir.path().join("s.yaml"),
        format!(
            "name: gate\ntarget:\n  kind: peertube\n  video: vod\n  url: http://{a}/w/test\n\
             viewers:\n  count: 2\n  ramp: 1s\nduration: 6s\nsampling_interval: 500ms\nmeasure_at: 5s\n\
             steady_window: 2s\nthresholds:\n  failed_viewers: \"<= 0\"\n  exporter.http_share_at_t: \"< 50%\"\n\
             fleet:\n  kind: grid\n  url: http://{a}/\n"
        ),
    )
    .unwrap();
    let path = dir.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || gate(&path, &["s.yaml", "run1"]))
        .await
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(99), "{stderr}");
    let f = figures(&out);
    assert_eq!(f["outcome"], "thresholds-failed", "{f:?}");
    assert_eq!(f["thresholds_failed"], "exporter.http_share_at_t");
    assert_eq!(f["failed_viewers"], "0");
    assert!(
        stderr.contains("THRESHOLD FAILED: exporter.http_share_at_t < 50%: no value"),
        "{stderr}"
    );
    assert!(dir.path().join("run1/report.json").is_file());

    // The gate's own thresholds win over the scenario's.
    let path = dir.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        gate(&path, &["s.yaml", "run2", "failed_viewers<=0,ttff_max<60s"])
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let f = figures(&out);
    assert_eq!(f["outcome"], "ok", "{f:?}");
    assert_eq!(f["thresholds_failed"], "");
}
