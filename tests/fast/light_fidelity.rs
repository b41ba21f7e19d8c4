//! `viewerfleet fidelity`: light peers against an all-real swarm of the same size. The
//! WebDriver stub cannot play refsite's light-peer page (it answers no
//! `window.viewerfleetLight.read()`), so the measurement runs through a `ScenarioRunner`
//! stand-in that writes each run's raw data as the engine would for the plan it is given;
//! everything after that — planning, the order of the runs, each run's report, the figures,
//! the verdict, fidelity.json and its schema, the printed table, a scenario's
//! `swarm.fidelity` and the report line of a run that relies on it — is the product's own.

use crate::support::schema::assert_valid;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use viewerfleet::calibrate::light_fidelity::{
    self, Arm, FidelityOptions, FidelityPlan, LightFidelity, FIDELITY_JSON,
};
use viewerfleet::calibrate::FidelityVerdict;
use viewerfleet::engine::RunOutcome;
use viewerfleet::model::rawdata::Manifest;
use viewerfleet::model::scenario::{self, Overrides};
use viewerfleet::suite::{ScenarioRunner, SuiteRun};
use viewerfleet::sys::shutdown::Shutdown;

const BIN: &str = env!("CARGO_BIN_EXE_viewerfleet");

/// P2P upload per second of swarm member `m` (viewers first, then light peers), skewed as
/// p2p-media-loader swarms are: a few members serve most.
const UPLOAD_BPS: [u64; 8] = [
    2_000, 5_000, 10_000, 15_000, 20_000, 30_000, 60_000, 120_000,
];

/// The scenario measured: refsite live, a light-peer section naming a fidelity.json that
/// does not exist yet (the measurement about to make it).
fn scenario(dir: &Path) -> PathBuf {
    let path = dir.join("live.yaml");
    std::fs::write(
        &path,
        "name: live-light\ntarget:\n  kind: refsite\n  video: live\nviewers:\n  count: 4\n  \
         network:\n    download_kbps: 2000\n    upload_kbps: 300\n    latency_ms: 500\n\
         swarm:\n  light_peers: 40\n  per_page: 3\n  fidelity: fid/fidelity.json\n\
         duration: 150s\nsampling_interval: 2s\nmeasure_at: 120s\nsteady_window: 30s\n\
         fleet:\n  kind: local\n",
    )
    .unwrap();
    path
}

/// Writes the raw data of a 150-second run of `viewers` viewers and `light` light peers
/// (3 per page), read every 2 s: each member fetches 100 kB/s, `p2p` of it over P2P, and
/// uploads `UPLOAD_BPS[m]`; this machine's CPU is `busy` all along.
fn write_run(dir: &Path, viewers: u32, light: u32, p2p: f64, busy: f64) {
    std::fs::create_dir_all(dir.join("raw")).unwrap();
    let mut manifest = serde_json::to_value(Manifest::example()).unwrap();
    manifest["scenario_name"] = "live-light".into();
    manifest["started_at"] = "2026-12-04T10:00:00Z".into();
    manifest["ended_at"] = "2026-12-04T10:02:30Z".into();
    manifest["host"]["cpus"] = 2.into();
    manifest["plan"] = serde_json::json!({
        "viewers": viewers, "p2p_off_share": 0.0, "ramp_s": 0.0, "duration_s": 150.0,
        "sampling_interval_s": 2.0, "measure_at_s": 120.0, "steady_window_s": 30.0,
        "network": {"download_kbps": 2000, "upload_kbps": 300, "latency_ms": 500},
        "max_failed_viewers": 0
    });
    if light > 0 {
        manifest["plan"]["light"] =
            serde_json::json!({"peers": light, "per_page": 3, "shaping": "http-only"});
    }
    std::fs::write(dir.join("manifest.json"), manifest.to_string()).unwrap();
    let mut events = String::new();
    let mut run_events = String::new();
    for (t, e) in [
        (0.0, "started"),
        (0.5, "target_ready"),
        (1.0, "ramp_done"),
        (120.0, "measure_point"),
        (150.0, "finished"),
    ] {
        let _ = writeln!(run_events, r#"{{"t": {t:.1}, "event": "{e}"}}"#);
    }
    for v in 0..viewers {
        let _ = writeln!(
            events,
            r#"{{"t": 0.0, "event": "page_opened", "viewer": {v}, "p2p": true, "node": "local"}}"#
        );
        let _ = writeln!(
            events,
            r#"{{"t": 1.0, "event": "playing", "ttff_ms": 1000.0, "viewer": {v}, "p2p": true, "node": "local"}}"#
        );
    }
    let (mut samples, mut light_samples, mut host) = (String::new(), String::new(), String::new());
    let http_bps = (100_000.0 * (1.0 - p2p)).round() as u64;
    let p2p_bps = (100_000.0 * p2p).round() as u64;
    for i in 0..=75u64 {
        let t = i * 2;
        let _ = writeln!(
            host,
            r#"{{"t": {t}.0, "cpu_busy": {busy}, "cores": 2, "mem_used_bytes": 8000000000, "mem_total_bytes": 24000000000, "load1": 1.0}}"#
        );
        if i == 0 {
            continue;
        }
        for v in 0..viewers {
            let _ = writeln!(
                samples,
                r#"{{"t": {t}.0, "viewer": {v}, "http_down_bytes": {}, "p2p_down_bytes": {}, "p2p_up_bytes": {}, "peers": 3, "playing": true, "current_time_s": {t}.0, "live_latency_s": 12.0, "stalls": 0, "stalled_ms": 0.0, "resolution": 240, "dropped_frames": 0, "errors": 0}}"#,
                http_bps * t,
                p2p_bps * t,
                UPLOAD_BPS[v as usize % 8] * t
            );
        }
        for peer in 0..light {
            let _ = writeln!(
                light_samples,
                r#"{{"t": {t}.0, "peer": {peer}, "group": {}, "http_down_bytes": {}, "p2p_down_bytes": {}, "p2p_up_bytes": {}, "peers": 3, "playing": true, "position_s": {t}.0, "live_latency_s": 11.5, "held_ms": 800.0, "segments_loaded": {i}, "segments_late": 0, "waited_ms": 0.0, "errors": 0, "lag": {{"ticks": {}, "late_ms": {}.0, "late_ticks": 0, "max_ms": 3.0, "hidden_ticks": 0}}}}"#,
                peer / 3,
                http_bps * t,
                p2p_bps * t,
                UPLOAD_BPS[(viewers + peer) as usize % 8] * t,
                8 * i,
                8 * i
            );
        }
    }
    let raw = dir.join("raw");
    std::fs::write(raw.join("run_events.jsonl"), run_events).unwrap();
    std::fs::write(raw.join("viewer_events.jsonl"), events).unwrap();
    std::fs::write(raw.join("viewer_samples.jsonl"), samples).unwrap();
    std::fs::write(raw.join("host_samples.jsonl"), host).unwrap();
    if light > 0 {
        std::fs::write(raw.join("light_samples.jsonl"), light_samples).unwrap();
    }
}

/// Writes each run as the plan asks (its viewers, its light peers): P2P savings 70% all
/// real, 68% with light peers; the runs named in `hot` on a saturated machine.
struct StandIn {
    hot: Vec<&'static str>,
    calls: Mutex<Vec<SuiteRun>>,
}

impl StandIn {
    fn new(hot: Vec<&'static str>) -> Self {
        Self {
            hot,
            calls: Mutex::new(Vec::new()),
        }
    }
}

#[async_trait::async_trait]
impl ScenarioRunner for StandIn {
    async fn run(&self, run: &SuiteRun) -> anyhow::Result<RunOutcome> {
        self.calls.lock().unwrap().push(run.clone());
        let light = run.plan.light.as_ref().map_or(0, |l| l.peers);
        let name = run.dir.file_name().unwrap().to_string_lossy().into_owned();
        let busy = if self.hot.contains(&name.as_str()) {
            0.97
        } else {
            0.3
        };
        let p2p = if light > 0 { 0.68 } else { 0.70 };
        write_run(&run.dir, run.plan.viewers, light, p2p, busy);
        Ok(RunOutcome {
            run_dir: run.dir.clone(),
            ok: true,
            interrupted: false,
            exit_code: 0,
            report: None,
            summary: String::new(),
            settled_viewers: None,
            fitting_viewers: None,
        })
    }
}

fn options(scenario: PathBuf, out: PathBuf, repeat: u32) -> FidelityOptions {
    FidelityOptions {
        scenario,
        swarm: 8,
        real: 2,
        repeat,
        out,
        overrides: Overrides::default(),
    }
}

/// The document as `fidelity --json` prints it.
fn envelope(f: &LightFidelity, exit_code: u8, outcome: &str) -> String {
    serde_json::json!({
        "schema_version": 1, "tool_version": env!("CARGO_PKG_VERSION"),
        "command": "fidelity", "exit_code": exit_code,
        "outcome": outcome, "fidelity": f
    })
    .to_string()
}

#[tokio::test]
async fn light_peers_are_measured_against_an_all_real_swarm_and_the_verdict_is_relied_on() {
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario(tmp.path());
    let out = tmp.path().join("fid");
    // The scenario names fid/fidelity.json, which does not exist yet: a run refuses it…
    let err = scenario::load(&file, &Overrides::default()).unwrap_err();
    assert_eq!(err.field, "swarm.fidelity");
    // …but the measurement that makes it leaves it out.
    let plan = FidelityPlan::new(options(file.clone(), out.clone(), 2)).unwrap();
    assert_eq!(plan.throttling, "http-only");
    assert_eq!(plan.fleet, "local");
    let runner = StandIn::new(vec![]);
    let mut log = Vec::new();
    let result = light_fidelity::run(&plan, &runner, &Shutdown::new(), &mut log)
        .await
        .unwrap();

    // A B A B, each arm with its own counts, in a folder of its own.
    let calls = runner.calls.into_inner().unwrap();
    let seen: Vec<(String, u32, u32, Vec<String>)> = calls
        .iter()
        .map(|r| {
            (
                r.dir.file_name().unwrap().to_string_lossy().into_owned(),
                r.plan.viewers,
                r.plan.light.as_ref().map_or(0, |l| l.peers),
                r.overrides.flags(),
            )
        })
        .collect();
    let flags = |v: &str, l: &str| {
        ["--viewers", v, "--light-peers", l]
            .map(String::from)
            .to_vec()
    };
    assert_eq!(
        seen,
        [
            ("all-real-1".into(), 8, 0, flags("8", "0")),
            ("with-light-1".into(), 2, 6, flags("2", "6")),
            ("all-real-2".into(), 8, 0, flags("8", "0")),
            ("with-light-2".into(), 2, 6, flags("2", "6")),
        ]
    );
    assert!(calls.iter().all(|r| r.plan.yaml.contains(
        "  # left out by `viewerfleet fidelity`, which measures a new verdict: fidelity: fid/fidelity.json"
    )));
    assert!(calls[1].plan.fidelity.is_none());
    let log = String::from_utf8(log).unwrap();
    assert!(
        log.contains("[2/4] B1 (2 real viewers + 6 light peers): P2P savings at T 68.0%"),
        "{log}"
    );

    // The verdict and its figures, from the runs' reports.
    let f = &result.fidelity;
    assert_eq!(result.file, out.join(FIDELITY_JSON));
    assert_eq!(
        f.verdict,
        FidelityVerdict::Pass,
        "{:?}",
        f.inconclusive_because
    );
    assert_eq!((f.swarm, f.real, f.light, f.repeat), (8, 2, 6, 2), "{f:?}");
    assert_eq!(f.scenario_name, "live-light");
    let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-6);
    assert!(
        close(f.p2p_savings.all_real_pct, 70.0),
        "{:?}",
        f.p2p_savings
    );
    assert!(
        close(f.p2p_savings.with_light_pct, 68.0),
        "{:?}",
        f.p2p_savings
    );
    assert!(close(f.p2p_savings.difference_points, -2.0));
    // Each arm's 16 members upload the same skewed amounts over 150 s: the median halfway
    // between 15 and 20 kB/s, the p90 between 60 and 120.
    let (a, b) = (f.upload.all_real.unwrap(), f.upload.with_light.unwrap());
    assert_eq!((a.members, b.members), (16, 16));
    assert_eq!((a.p50_bytes, b.p50_bytes), (2_625_000, 2_625_000));
    assert_eq!((a.p90_bytes, b.p90_bytes), (13_500_000, 13_500_000));
    assert_eq!(f.upload.light_peers.unwrap().members, 12);
    assert_eq!(f.upload.median_ratio, Some(1.0));
    assert_eq!(
        (
            f.qoe.with_light_played,
            f.qoe.with_light_viewers,
            f.qoe.light_started
        ),
        (4, 4, 12)
    );
    assert_eq!(f.qoe.with_light_stalls_per_viewer_minute, Some(0.0));
    assert_eq!(f.runs.len(), 4);
    assert_eq!(f.runs[1].arm, Arm::WithLight);
    assert_eq!(f.runs[1].viewer_upload_bytes, [300_000, 750_000]);
    assert_eq!(f.runs[1].light_upload_bytes.len(), 6);
    assert_eq!(f.runs[0].headroom.as_deref(), Some("finding"));
    // Where the members stood behind the live edge: the viewers' reads in each arm, the
    // light peers' in B, side by side in the table.
    assert_eq!(
        (f.runs[0].viewers_latency_s, f.runs[0].light_latency_s),
        (Some(12.0), None)
    );
    assert_eq!(
        (f.runs[1].viewers_latency_s, f.runs[1].light_latency_s),
        (Some(12.0), Some(11.5))
    );

    // fidelity.json holds the same document, in the layout of its schema.
    let written = LightFidelity::load(&out).unwrap();
    assert_eq!(&written, f);
    assert_valid("fidelity-summary.v1.json", &envelope(f, 0, "ok"));

    // The table the command prints.
    let table = light_fidelity::markdown(f);
    println!("{table}");
    let dir = |name: &str| out.join(name).display().to_string();
    for row in [
        format!(
            "| A1 | {} | 70.0% | 8/8 | — | 0.000 | 2.6 MB | 11.7 MB | 12.0 s | yes |",
            dir("all-real-1")
        ),
        format!(
            "| B1 | {} | 68.0% | 2/2 | 6/6 | 0.000 | 2.6 MB | 11.7 MB | 12.0 s / 11.5 s | yes |",
            dir("with-light-1")
        ),
        "| rule | A: 8 real | B: 2 real + 6 light | allowed | result |".to_string(),
        "| swarm's P2P savings at T (mean of runs) | 70.0% | 68.0% | ±5 points | pass |".into(),
        "| P2P upload per swarm member, median (pooled) | 2.6 MB | 2.6 MB | ×0.5 to ×2 | pass |"
            .into(),
        "| real viewers' stalls per viewer-minute (pooled) | 0.000 | 0.000 | at most A + 0.05, or more by chance | pass |"
            .into(),
        "| every real viewer played | 16 of 16 | 4 of 4 | all | pass |".into(),
        "| every light peer joined (started its playhead) | — | 12 of 12 | all | pass |".into(),
        "Verdict: **pass** — 2 real viewers + 6 light peers offload like 8 real viewers here."
            .into(),
    ] {
        assert!(table.contains(&row), "{row}\n{table}");
    }

    // A scenario now relies on it…
    let plan = scenario::load(&file, &Overrides::default()).unwrap();
    let record = plan.fidelity.clone().unwrap();
    assert_eq!(record.verdict.as_str(), "pass");
    assert_eq!((record.swarm, record.real), (8, 2));
    assert_eq!(
        (record.fleet.as_deref(), record.throttling.as_deref()),
        (Some("local"), Some("http-only"))
    );
    assert_eq!(record.file, out.join(FIDELITY_JSON).display().to_string());
    // …and a run of it, recording the verdict in its manifest, says so in its report.
    let run = tmp.path().join("relying");
    write_run(&run, 2, 6, 0.68, 0.3);
    let manifest_path = run.join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
    manifest["plan"]["light"]["fidelity"] = serde_json::to_value(&record).unwrap();
    std::fs::write(&manifest_path, manifest.to_string()).unwrap();
    viewerfleet::report::write_report(&run).unwrap();
    let md = std::fs::read_to_string(run.join("report.md")).unwrap();
    let line = format!(
        "- Fidelity: pass (8 real vs 2 real + 6 light, P2P savings at T 70.0% vs 68.0%, measured {}, on the local fleet under http-only, {}).",
        &f.created[..10],
        record.file
    );
    assert!(md.contains(&line), "{line}\n{md}");
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(html.contains("<li>Fidelity: pass (8 real vs 2 real + 6 light,"));
}

#[tokio::test]
async fn a_saturated_run_makes_the_measurement_inconclusive() {
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario(tmp.path());
    let out = tmp.path().join("fid");
    let plan = FidelityPlan::new(options(file, out.clone(), 1)).unwrap();
    let runner = StandIn::new(vec!["all-real-1"]);
    let result = light_fidelity::run(&plan, &runner, &Shutdown::new(), &mut Vec::new())
        .await
        .unwrap();
    let f = &result.fidelity;
    assert_eq!(f.verdict, FidelityVerdict::Inconclusive);
    assert_eq!(f.runs[0].headroom.as_deref(), Some("not-a-finding"));
    assert_eq!(
        f.inconclusive_because.len(),
        1,
        "{:?}",
        f.inconclusive_because
    );
    assert!(
        f.inconclusive_because[0].starts_with(&format!(
            "A1 ({}) is not a finding: ",
            out.join("all-real-1").display()
        )),
        "{:?}",
        f.inconclusive_because
    );
    // The rules themselves held.
    assert!(f.rules.iter().all(|r| r.ok == Some(true)), "{:?}", f.rules);
    let table = light_fidelity::markdown(f);
    assert!(
        table.contains(
            "Verdict: **inconclusive** — no run may vouch for or against these light peers:"
        ),
        "{table}"
    );
    assert_valid("fidelity-summary.v1.json", &envelope(f, 1, "failed"));
}

#[tokio::test]
async fn a_stop_before_the_first_run_starts_none_and_keeps_an_inconclusive_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("fid");
    let plan = FidelityPlan::new(options(scenario(tmp.path()), out.clone(), 3)).unwrap();
    assert_eq!(plan.runs.len(), 6);
    let stop = Shutdown::new();
    stop.trigger();
    let runner = StandIn::new(vec![]);
    let result = light_fidelity::run(&plan, &runner, &stop, &mut Vec::new())
        .await
        .unwrap();
    assert!(runner.calls.into_inner().unwrap().is_empty());
    let f = LightFidelity::load(&out.join(FIDELITY_JSON)).unwrap();
    assert_eq!(f, result.fidelity);
    assert!(f.interrupted);
    assert_eq!(f.verdict, FidelityVerdict::Inconclusive);
    assert!(f
        .inconclusive_because
        .contains(&"0 of 3 all-real runs and 0 of 3 runs with light peers were measured".into()));
    assert_valid(
        "fidelity-summary.v1.json",
        &envelope(&f, 130, "interrupted"),
    );
    // The folders of a measurement are never written twice.
    std::fs::create_dir_all(out.join("with-light-2")).unwrap();
    std::fs::write(out.join("with-light-2/x"), "").unwrap();
    let err = FidelityPlan::new(options(scenario(tmp.path()), out, 3)).unwrap_err();
    assert!(err.to_string().contains("new or empty folder"), "{err}");
}

#[test]
fn a_missing_fidelity_file_is_a_scenario_error_naming_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario(tmp.path());
    let err = scenario::load(&file, &Overrides::default()).unwrap_err();
    assert_eq!(err.field, "swarm.fidelity");
    assert_eq!(err.line, Some(14));
    assert!(
        err.message.contains("fidelity.json: no such file")
            && err
                .message
                .contains("viewerfleet fidelity SCENARIO --swarm N --real K --out DIR"),
        "{}",
        err.message
    );
    // Through the command line: `validate` exits 2 with the field and the fix.
    let out = std::process::Command::new(BIN)
        .arg("validate")
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("live.yaml:14: swarm.fidelity: ")
            && stderr.contains("remove `swarm.fidelity`"),
        "{stderr}"
    );
}

/// A verdict per throttling mode: a missing entry is an error naming the entry and its
/// line, and the measurement that makes it leaves the whole map out.
#[test]
fn a_verdict_per_mode_names_the_missing_entry_and_fidelity_leaves_the_map_out() {
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario(tmp.path());
    let text = std::fs::read_to_string(&file).unwrap().replace(
        "  fidelity: fid/fidelity.json\n",
        "  fidelity:\n    http-only: fid/fidelity.json\n\n    tc: fid-tc/fidelity.json\n",
    );
    std::fs::write(&file, text).unwrap();
    let err = scenario::load(&file, &Overrides::default()).unwrap_err();
    assert_eq!(err.field, "swarm.fidelity.http-only", "{err}");
    assert_eq!(err.line, Some(15), "{err}");
    let plan = FidelityPlan::new(options(file.clone(), tmp.path().join("fid"), 1)).unwrap();
    assert_eq!(plan.throttling, "http-only");
}

#[test]
fn sizes_that_leave_no_light_peer_or_no_real_viewer_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario(tmp.path());
    for (swarm, real) in [("8", "8"), ("8", "0")] {
        let out = std::process::Command::new(BIN)
            .args([
                "fidelity", "--quiet", "--json", "--swarm", swarm, "--real", real,
            ])
            .arg(&file)
            .arg("--out")
            .arg(tmp.path().join("out"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let doc = assert_valid(
            "fidelity-summary.v1.json",
            &String::from_utf8_lossy(&out.stdout),
        );
        assert_eq!(doc["outcome"], "bad-input");
        assert!(
            doc["error"]
                .as_str()
                .unwrap()
                .contains(&format!("--real {real} with --swarm {swarm}")),
            "{doc}"
        );
    }
    assert!(
        !tmp.path().join("out").exists(),
        "nothing runs on bad input"
    );
}
