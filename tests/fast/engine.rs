//! The run engine against the WebDriver stub (no browser): the ramp, session retries,
//! loss and re-creation, failure thresholds, the measurement point and every way a run
//! ends, read back from the raw data a run writes. The stub looks like a Grid hub and
//! serves a PeerTube-like page and exporter, so these are whole runs of the `grid` fleet.
//! Every wait is bounded by an event (a line in the raw data, a counter), not a sleep.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use viewerfleet::engine::{run_scenario, RunOptions, RunOutcome, RunSource};
use viewerfleet::model::rawdata::{self, RunEvent, RunEventKind, ViewerEvent, ViewerEventKind};
use viewerfleet::model::scenario::{self, Overrides};
use viewerfleet::sys::shutdown::Shutdown;
use viewerfleet_kit::webdriver_stub::{Stub, StubConfig};

/// A scenario of `viewers` viewers against `stub`, with `fleet_extra` added to its fleet
/// section and `extra` to the top level.
fn scenario(stub: &Stub, viewers: u32, ramp: &str, fleet_extra: &str, extra: &str) -> String {
    let a = stub.addr();
    format!(
        "name: engine-test\n\
         target:\n  kind: peertube\n  video: vod\n  url: http://{a}/w/test\n  exporter: http://{a}/metrics\n\
         viewers:\n  count: {viewers}\n  ramp: {ramp}\n\
         duration: 5s\nsampling_interval: 500ms\nmeasure_at: 4s\nsteady_window: 2s\n{extra}\
         fleet:\n  kind: grid\n  url: http://{a}/\n  retry_backoff: 100ms\n{fleet_extra}"
    )
}

struct Run {
    dir: tempfile::TempDir,
    outcome: RunOutcome,
}

impl Run {
    fn out(&self) -> PathBuf {
        self.dir.path().join("run")
    }

    fn viewer_events(&self) -> Vec<ViewerEvent> {
        rawdata::read_jsonl(&self.out().join(rawdata::VIEWER_EVENTS))
            .unwrap()
            .records
    }

    fn run_events(&self) -> Vec<RunEventKind> {
        rawdata::read_jsonl::<RunEvent>(&self.out().join(rawdata::RUN_EVENTS))
            .unwrap()
            .records
            .into_iter()
            .map(|e| e.event)
            .collect()
    }

    fn count(&self, kind: ViewerEventKind) -> usize {
        self.viewer_events()
            .iter()
            .filter(|e| e.event == kind)
            .count()
    }
}

/// A folder holding `scenario.yaml`; the run goes to `run/` in it.
fn scenario_dir(yaml: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scenario.yaml");
    std::fs::write(&path, yaml).unwrap();
    let out = dir.path().join("run");
    (dir, path, out)
}

/// Runs a scenario in-process, without progress display or report.
async fn run_quietly(path: &Path, out: &Path, shutdown: Shutdown) -> anyhow::Result<RunOutcome> {
    let options = RunOptions {
        progress: false,
        write_report: false,
        ..RunOptions::default()
    };
    let overrides = Overrides::default();
    let plan = scenario::load(path, &overrides)?;
    let source = RunSource::scenario(path, &overrides);
    run_scenario(plan, &source, out, shutdown, options).await
}

async fn run(yaml: &str, shutdown: Shutdown) -> Run {
    let (dir, path, out) = scenario_dir(yaml);
    let outcome = run_quietly(&path, &out, shutdown)
        .await
        .expect("the run completes");
    Run { dir, outcome }
}

async fn stub(config: StubConfig) -> Stub {
    Stub::serve("127.0.0.1:0".parse().unwrap(), config)
        .await
        .unwrap()
}

/// Every session the stub created was deleted again.
fn no_session_left(stub: &Stub) {
    let c = stub.counters();
    assert_eq!(
        c.sessions_created.load(Relaxed),
        c.sessions_deleted.load(Relaxed),
        "{}",
        c.summary()
    );
}

#[tokio::test]
async fn viewers_arrive_along_the_ramp_and_the_timeline_is_recorded() {
    let stub = stub(StubConfig::default()).await;
    let run = run(&scenario(&stub, 4, "3s", "", ""), Shutdown::new()).await;
    assert_eq!(run.outcome.exit_code, 0, "{}", run.outcome.summary);
    // Viewer i of 4 is asked for after i/3 of the ramp, never earlier, in index order.
    let creating: Vec<(u32, f64)> = run
        .viewer_events()
        .iter()
        .filter(|e| e.event == ViewerEventKind::Creating)
        .map(|e| (e.viewer, e.t))
        .collect();
    assert_eq!(creating.len(), 4);
    for (viewer, t) in &creating {
        assert!(
            *t >= *viewer as f64 - 0.05,
            "viewer {viewer} asked for at {t}s"
        );
    }
    assert!(creating.windows(2).all(|w| w[0].0 < w[1].0));
    assert_eq!(run.count(ViewerEventKind::Playing), 4);
    assert_eq!(run.count(ViewerEventKind::Stopped), 4);
    assert_eq!(
        run.run_events(),
        [
            RunEventKind::Started,
            RunEventKind::TargetReady,
            RunEventKind::RampDone,
            RunEventKind::MeasurePoint,
            RunEventKind::Finished
        ]
    );
    let samples: Vec<rawdata::ViewerSample> =
        rawdata::read_jsonl(&run.out().join(rawdata::VIEWER_SAMPLES))
            .unwrap()
            .records;
    assert!(samples.len() >= 4, "every viewer sampled");
    // What the probe counted of media segments and the decode lever is kept.
    let last = samples.last().unwrap();
    let segments = last.segments.as_ref().expect("segment counts recorded");
    assert!(segments.requested >= 1 && segments.by_height["240"] == segments.loaded);
    assert_eq!(last.video_track_off, Some(true));
    no_session_left(&stub);
}

#[tokio::test]
async fn refused_sessions_are_retried_with_the_fleets_policy() {
    // Every second session request is refused; six retries get every viewer a session.
    let stub = stub(StubConfig {
        session_failure_rate: 0.5,
        ..StubConfig::default()
    })
    .await;
    let run = run(&scenario(&stub, 3, "0s", "", ""), Shutdown::new()).await;
    assert_eq!(run.outcome.exit_code, 0, "{}", run.outcome.summary);
    assert_eq!(run.count(ViewerEventKind::Playing), 3);
    let retries: Vec<ViewerEvent> = run
        .viewer_events()
        .into_iter()
        .filter(|e| {
            e.event == ViewerEventKind::Creating
                && e.reason
                    .as_deref()
                    .is_some_and(|r| r.contains("after refusal"))
        })
        .collect();
    assert!(!retries.is_empty(), "refusals were retried");
    assert!(stub.counters().sessions_refused.load(Relaxed) >= 1);
    no_session_left(&stub);
}

#[tokio::test]
async fn without_retries_a_refused_viewer_fails_and_the_threshold_decides_the_exit() {
    let config = StubConfig {
        session_failure_rate: 0.5,
        ..StubConfig::default()
    };
    // One of two viewers is refused once: with no retries it fails.
    let strict = stub(config.clone()).await;
    let run1 = run(
        &scenario(&strict, 2, "0s", "  session_retries: 0\n", ""),
        Shutdown::new(),
    )
    .await;
    assert_eq!(run1.count(ViewerEventKind::Failed), 1);
    assert_eq!(run1.outcome.exit_code, 1, "over max_failed_viewers 0");
    no_session_left(&strict);
    // The same failure within `max_failed_viewers: "50%"` is a success.
    let lenient = stub(config).await;
    let run2 = run(
        &scenario(
            &lenient,
            2,
            "0s",
            "  session_retries: 0\n",
            "max_failed_viewers: \"50%\"\n",
        ),
        Shutdown::new(),
    )
    .await;
    assert_eq!(run2.count(ViewerEventKind::Failed), 1);
    assert_eq!(run2.outcome.exit_code, 0, "{}", run2.outcome.summary);
}

/// `abort_on_fail`: a threshold judged while the run goes ends it early, after its delay,
/// with exit 99; the run tears down as at its end, and the manifest, the run events and the
/// report say why.
#[tokio::test]
async fn a_failed_abort_on_fail_threshold_ends_the_run_early_with_99_after_its_delay() {
    let stub = stub(StubConfig {
        session_failure_rate: 0.5,
        ..StubConfig::default()
    })
    .await;
    // One of two viewers is refused and, without retries, fails; the failure limit allows
    // it, the threshold does not. The run is planned for 2 minutes.
    let yaml = scenario(
        &stub,
        2,
        "0s",
        "  session_retries: 0\n",
        "max_failed_viewers: \"50%\"\nthresholds:\n  failed_viewers:\n    - condition: \"<= 0\"\n      abort_on_fail: true\n      delay_abort_eval: 2s\n  ttff: [\"p95 < 60s\", \"max < 60s\"]\n",
    );
    let run = run_cut_short(&yaml).await;
    assert_eq!(run.outcome.exit_code, 99, "{}", run.outcome.summary);
    assert!(!run.outcome.ok);
    assert!(
        run.outcome
            .summary
            .contains("ABORTED: threshold failed_viewers <= 0 failed while the run went: 1 at"),
        "{}",
        run.outcome.summary
    );
    let events: Vec<RunEvent> = rawdata::read_jsonl(&run.out().join(rawdata::RUN_EVENTS))
        .unwrap()
        .records;
    let aborted = events
        .iter()
        .find(|e| e.event == RunEventKind::Aborted)
        .expect("an aborted run event");
    assert!(
        aborted.t >= 2.0,
        "judged only after its 2 s delay: {aborted:?}"
    );
    assert!(aborted.t < 60.0, "{aborted:?}");
    let kinds = run.run_events();
    assert!(!kinds.contains(&RunEventKind::MeasurePoint), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&RunEventKind::Finished), "{kinds:?}");
    no_session_left(&stub);
    // The manifest keeps the threshold as written and says why the run ended early.
    let manifest: rawdata::Manifest =
        serde_json::from_str(&std::fs::read_to_string(run.out().join(rawdata::MANIFEST)).unwrap())
            .unwrap();
    let why = manifest
        .aborted
        .expect("the manifest says the run was aborted");
    assert!(why.contains("failed_viewers <= 0"), "{why}");
    assert_eq!(
        manifest.exit_status.as_deref(),
        Some("exit code 99: ended early by a threshold with abort_on_fail")
    );
    let frozen = &manifest.plan.thresholds[0];
    assert!(frozen.abort_on_fail);
    assert_eq!(frozen.delay_abort_eval.as_deref(), Some("2s"));
    // The report says it is partial and why, and judges every threshold again.
    let report = viewerfleet::report::build(&run.out()).unwrap().summary;
    assert!(report.partial, "{:?}", report.partial_reason);
    assert!(
        report
            .partial_reason
            .as_deref()
            .unwrap()
            .contains("the run was ended early at"),
        "{:?}",
        report.partial_reason
    );
    let judged: Vec<(&str, bool)> = report
        .thresholds
        .iter()
        .map(|t| (t.metric.as_str(), t.pass))
        .collect();
    assert_eq!(
        judged,
        [
            ("failed_viewers", false),
            ("ttff_p95", true),
            ("ttff_max", true)
        ]
    );
}

/// The players' P2P savings judged live: the stub's players save 75%; a threshold asking
/// 90% ends the run early, one on the HTTP share that holds does not.
#[tokio::test]
async fn the_players_p2p_savings_are_judged_live_and_end_the_run_when_too_low() {
    let stub = stub(StubConfig::default()).await;
    let yaml = scenario(
        &stub,
        2,
        "0s",
        "",
        "thresholds:\n  http_share_at_t: {condition: \"< 50%\", abort_on_fail: true}\n  players.p2p_savings_at_t:\n    - {condition: \">= 90%\", abort_on_fail: true, delay_abort_eval: 1s}\n",
    );
    let run = run_cut_short(&yaml).await;
    assert_eq!(run.outcome.exit_code, 99, "{}", run.outcome.summary);
    assert!(
        run.outcome.summary.contains(
            "ABORTED: threshold players.p2p_savings_at_t >= 90% failed while the run went: 75%"
        ),
        "{}",
        run.outcome.summary
    );
    let events: Vec<RunEvent> = rawdata::read_jsonl(&run.out().join(rawdata::RUN_EVENTS))
        .unwrap()
        .records;
    let aborted: Vec<&RunEvent> = events
        .iter()
        .filter(|e| e.event == RunEventKind::Aborted)
        .collect();
    assert_eq!(aborted.len(), 1, "{events:?}");
    assert!(aborted[0].t >= 1.0, "{:?}", aborted[0]);
    no_session_left(&stub);
}

#[tokio::test]
async fn a_command_the_grid_failed_to_forward_is_sent_again_and_costs_no_viewer() {
    // The first vendor command of every session (installing the stats probe) is answered
    // as a Grid node answers when its connection to the driver broke.
    let stub = stub(StubConfig {
        forwarding_failure_at: Some(1),
        ..StubConfig::default()
    })
    .await;
    let run = run(&scenario(&stub, 3, "0s", "", ""), Shutdown::new()).await;
    assert_eq!(run.outcome.exit_code, 0, "{}", run.outcome.summary);
    assert_eq!(run.count(ViewerEventKind::Playing), 3);
    assert_eq!(run.count(ViewerEventKind::Failed), 0);
    assert_eq!(
        run.count(ViewerEventKind::SessionCreated),
        3,
        "no session again"
    );
    assert_eq!(stub.counters().forwarding_failures.load(Relaxed), 3);
    no_session_left(&stub);
}

#[tokio::test]
async fn a_lost_viewer_is_recorded_and_created_again() {
    // Each session answers three stats reads, then is gone (its browser died).
    let stub = stub(StubConfig {
        reads_before_loss: Some(3),
        ..StubConfig::default()
    })
    .await;
    let run = run(&scenario(&stub, 1, "0s", "", ""), Shutdown::new()).await;
    let lost = run.count(ViewerEventKind::Lost);
    assert!(lost >= 1, "the loss is recorded");
    let created = run.count(ViewerEventKind::SessionCreated);
    assert!(
        created > lost,
        "re-created after each loss ({created} sessions, {lost} lost)"
    );
    assert!(run
        .viewer_events()
        .iter()
        .any(|e| e.event == ViewerEventKind::Lost
            && e.reason
                .as_deref()
                .is_some_and(|r| r.contains("unreadable"))));
    no_session_left(&stub);
}

#[tokio::test]
async fn a_lost_viewer_stays_lost_when_the_fleet_does_not_recreate() {
    let stub = stub(StubConfig {
        reads_before_loss: Some(3),
        ..StubConfig::default()
    })
    .await;
    let run = run(
        &scenario(&stub, 1, "0s", "  recreate_lost: false\n", ""),
        Shutdown::new(),
    )
    .await;
    assert_eq!(run.count(ViewerEventKind::Lost), 1);
    assert_eq!(run.count(ViewerEventKind::SessionCreated), 1);
    assert_eq!(run.outcome.exit_code, 1, "a lost viewer counts as failed");
    no_session_left(&stub);
}

/// Waits until the run's raw viewer events show `n` viewers playing.
async fn until_playing(out: &Path, n: usize) {
    let path = out.join(rawdata::VIEWER_EVENTS);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let playing = rawdata::read_jsonl::<ViewerEvent>(&path)
            .map(|c| {
                c.records
                    .iter()
                    .filter(|e| e.event == ViewerEventKind::Playing)
                    .count()
            })
            .unwrap_or(0);
        if playing >= n {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{n} viewers never played"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_stop_request_ends_the_run_with_its_code_and_releases_every_session() {
    let stub = stub(StubConfig::default()).await;
    let yaml = scenario(&stub, 3, "0s", "", "").replace("duration: 5s", "duration: 60s");
    let yaml = yaml.replace("measure_at: 4s", "measure_at: 50s");
    let (_dir, path, out) = scenario_dir(&yaml);
    let shutdown = Shutdown::new();
    let running = tokio::spawn({
        let (path, out, shutdown) = (path.clone(), out.clone(), shutdown.clone());
        async move { run_quietly(&path, &out, shutdown).await }
    });
    until_playing(&out, 3).await;
    shutdown.trigger();
    let outcome = tokio::time::timeout(Duration::from_secs(30), running)
        .await
        .expect("stops promptly")
        .unwrap()
        .unwrap();
    assert!(outcome.interrupted);
    assert_eq!(outcome.exit_code, 130);
    let events: Vec<RunEventKind> = rawdata::read_jsonl::<RunEvent>(&out.join(rawdata::RUN_EVENTS))
        .unwrap()
        .records
        .into_iter()
        .map(|e| e.event)
        .collect();
    assert_eq!(events.last(), Some(&RunEventKind::Interrupted));
    assert!(!events.contains(&RunEventKind::MeasurePoint));
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join(rawdata::MANIFEST)).unwrap()).unwrap();
    assert!(
        manifest["ended_at"].is_string(),
        "the manifest says how it ended"
    );
    no_session_left(&stub);
}

#[tokio::test]
async fn an_unreachable_target_stops_the_run_before_any_session() {
    let stub = stub(StubConfig::default()).await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let yaml = scenario(&stub, 2, "0s", "", "").replace(
        &format!("url: http://{}/w/test", stub.addr()),
        &format!("url: http://127.0.0.1:{port}/w/test"),
    );
    let (_dir, path, out) = scenario_dir(&yaml);
    let err = run_quietly(&path, &out, Shutdown::new()).await.unwrap_err();
    assert!(format!("{err:#}").contains("did not answer"), "{err:#}");
    assert_eq!(stub.counters().sessions_created.load(Relaxed), 0);
    let events = std::fs::read_to_string(out.join(rawdata::RUN_EVENTS)).unwrap();
    assert!(events.contains("target_unreachable"), "{events}");
}

#[test]
fn sigterm_ends_a_run_with_143_and_releases_every_session() {
    use std::io::BufRead;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let stub = runtime.block_on(stub(StubConfig::default()));
    let yaml = scenario(&stub, 2, "0s", "", "")
        .replace("duration: 5s", "duration: 60s")
        .replace("measure_at: 4s", "measure_at: 50s");
    let (_dir, path, out) = scenario_dir(&yaml);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_viewerfleet"))
        .args(["run", "--no-report"])
        .arg(&path)
        .arg("--out")
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    runtime.block_on(until_playing(&out, 2));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    let stderr: Vec<String> = std::io::BufReader::new(child.stderr.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .collect();
    assert_eq!(status.code(), Some(143), "{}", stderr.join("\n"));
    no_session_left(&stub);
}

#[tokio::test]
async fn the_plans_browser_set_up_starts_every_browser_and_the_manifest_names_it() {
    let stub = stub(StubConfig::default()).await;
    let (dir, path, out) = scenario_dir(&packed(&stub, 3, 2, ""));
    let mut plan = scenario::load(&path, &Overrides::default()).unwrap();
    assert!(
        plan.browser.is_project(),
        "runs use viewerfleet's own set-up"
    );
    plan.browser = scenario::BrowserSetup {
        name: "plain".into(),
        flags: vec!["--headless=new".into(), "--plain-flag".into()],
        no_video_track: false,
    };
    let options = RunOptions {
        progress: false,
        write_report: false,
        ..RunOptions::default()
    };
    let source = RunSource::Command(vec!["viewerfleet".into(), "calibrate".into()]);
    let outcome = run_scenario(plan.clone(), &source, &out, Shutdown::new(), options)
        .await
        .unwrap();
    assert_eq!(outcome.exit_code, 0, "{}", outcome.summary);
    // Two browsers (2 + 1 viewers), both started with the plan's flags only.
    let args = stub.counters().session_args.lock().unwrap().clone();
    assert_eq!(args.len(), 2, "{args:?}");
    for a in &args {
        assert!(a.contains(&"--plain-flag".to_string()), "{a:?}");
        assert!(!a.iter().any(|f| f == "--mute-audio"), "{a:?}");
    }
    let manifest: rawdata::Manifest =
        serde_json::from_slice(&std::fs::read(out.join(rawdata::MANIFEST)).unwrap()).unwrap();
    assert_eq!(manifest.browser.as_ref(), Some(&plan.browser));
    assert_eq!(manifest.command_line, ["viewerfleet", "calibrate"]);
    no_session_left(&stub);
    drop(dir);
}

#[tokio::test]
async fn a_timeline_from_every_first_frame_measures_after_the_last_viewer_played() {
    let stub = stub(StubConfig::default()).await;
    let (_dir, path, out) = scenario_dir(&scenario(&stub, 3, "2s", "", ""));
    let mut plan = scenario::load(&path, &Overrides::default()).unwrap();
    plan.clock = scenario::RunClock::FromEveryFirstFrame {
        limit: Duration::from_secs(30),
    };
    plan.measure_at = Duration::from_secs(1);
    plan.steady_window = Duration::from_secs(1);
    plan.duration = Duration::from_secs(2);
    let options = RunOptions {
        progress: false,
        write_report: false,
        ..RunOptions::default()
    };
    let source = RunSource::scenario(&path, &Overrides::default());
    let outcome = run_scenario(plan, &source, &out, Shutdown::new(), options)
        .await
        .unwrap();
    assert_eq!(outcome.exit_code, 0, "{}", outcome.summary);
    let events: Vec<RunEvent> = rawdata::read_jsonl(&out.join(rawdata::RUN_EVENTS))
        .unwrap()
        .records;
    let at = |kind: RunEventKind| events.iter().find(|e| e.event == kind).unwrap();
    let last_playing = rawdata::read_jsonl::<ViewerEvent>(&out.join(rawdata::VIEWER_EVENTS))
        .unwrap()
        .records
        .iter()
        .filter(|e| e.event == ViewerEventKind::Playing)
        .map(|e| e.t)
        .fold(0.0, f64::max);
    // The last viewer arrives 2 s in; the timeline starts once it plays.
    let ramp_done = at(RunEventKind::RampDone);
    assert!(
        ramp_done.t >= last_playing && last_playing >= 2.0,
        "{events:?}"
    );
    assert!(
        ramp_done
            .detail
            .as_deref()
            .is_some_and(|d| d.contains("3 of 3 playing")),
        "{ramp_done:?}"
    );
    assert!(at(RunEventKind::MeasurePoint).t >= ramp_done.t + 1.0 - 0.05);
    no_session_left(&stub);
}

/// A scenario with `per_browser` viewers to a browser (the stub speaks WebDriver BiDi).
fn packed(stub: &Stub, viewers: u32, per_browser: u32, fleet_extra: &str) -> String {
    scenario(stub, viewers, "1s", fleet_extra, "").replace(
        "  ramp: 1s\n",
        &format!("  ramp: 1s\n  per_browser: {per_browser}\n"),
    )
}

fn reasons(run: &Run, kind: ViewerEventKind) -> Vec<(u32, String)> {
    run.viewer_events()
        .into_iter()
        .filter(|e| e.event == kind)
        .map(|e| (e.viewer, e.reason.unwrap_or_default()))
        .collect()
}

#[tokio::test]
async fn viewers_of_one_browser_share_its_session_and_the_last_out_deletes_it() {
    let stub = stub(StubConfig::default()).await;
    let run = run(&packed(&stub, 7, 3, ""), Shutdown::new()).await;
    assert_eq!(run.outcome.exit_code, 0, "{}", run.outcome.summary);
    let c = stub.counters();
    // 7 viewers in browsers of 3, 3 and 1: three sessions, seven tabs, every one closed.
    assert_eq!(c.sessions_created.load(Relaxed), 3, "{}", c.summary());
    assert_eq!(c.bidi_sockets.load(Relaxed), 3, "{}", c.summary());
    assert_eq!(c.tabs_opened.load(Relaxed), 7, "{}", c.summary());
    no_session_left(&stub);
    assert_eq!(run.count(ViewerEventKind::SessionCreated), 7);
    assert_eq!(run.count(ViewerEventKind::Playing), 7);
    assert_eq!(run.count(ViewerEventKind::Stopped), 7);
    // Each viewer read its own tab: every one has its own samples.
    let samples: Vec<rawdata::ViewerSample> =
        rawdata::read_jsonl(&run.out().join(rawdata::VIEWER_SAMPLES))
            .unwrap()
            .records;
    for viewer in 0..7 {
        assert!(
            samples.iter().filter(|s| s.viewer == viewer).count() >= 2,
            "viewer {viewer} sampled"
        );
    }
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.out().join(rawdata::MANIFEST)).unwrap()).unwrap();
    assert_eq!(manifest["fleet"]["packing"]["per_browser"], 3, "{manifest}");
    assert_eq!(manifest["fleet"]["own_address_per_viewer"], false);
}

#[tokio::test]
async fn a_crashed_browser_loses_all_of_its_viewers_with_one_reason() {
    // The first browser's socket closes once both its tabs had 2 stats reads.
    let stub = stub(StubConfig {
        browser_crash_after_reads: Some(2),
        browser_crash_tabs: 2,
        ..StubConfig::default()
    })
    .await;
    let run = run(
        &packed(&stub, 4, 2, "  recreate_lost: false\n"),
        Shutdown::new(),
    )
    .await;
    assert_eq!(stub.counters().browsers_crashed.load(Relaxed), 1);
    let lost = reasons(&run, ViewerEventKind::Lost);
    assert_eq!(lost.len(), 2, "{lost:?}");
    assert_eq!(
        lost.iter().map(|(v, _)| *v).collect::<Vec<_>>(),
        [0, 1],
        "the first browser's two viewers"
    );
    for (_, reason) in &lost {
        assert!(
            reason.starts_with(
                "browser 0 lost with the 2 viewer(s) it held (viewers 0–1, session stub"
            ),
            "{reason}"
        );
        assert!(reason.contains("the browser is gone"), "{reason}");
    }
    assert_eq!(lost[0].1, lost[1].1, "one reason for the browser's viewers");
    // The other browser's viewers played to the end.
    let stopped: Vec<u32> = reasons(&run, ViewerEventKind::Stopped)
        .into_iter()
        .map(|(v, _)| v)
        .collect();
    assert_eq!(stopped, [2, 3]);
    assert_eq!(run.outcome.exit_code, 1, "lost viewers count as failed");
    no_session_left(&stub);
}

#[tokio::test]
async fn the_viewers_of_a_crashed_browser_get_a_new_one_when_the_fleet_recreates() {
    // As above: the browser goes once both its viewers play in it.
    let stub = stub(StubConfig {
        browser_crash_after_reads: Some(2),
        browser_crash_tabs: 2,
        ..StubConfig::default()
    })
    .await;
    let run = run(&packed(&stub, 2, 2, ""), Shutdown::new()).await;
    assert_eq!(reasons(&run, ViewerEventKind::Lost).len(), 2);
    // One browser for the two again, not one each.
    assert_eq!(stub.counters().sessions_created.load(Relaxed), 2);
    assert_eq!(run.count(ViewerEventKind::SessionCreated), 4);
    assert_eq!(run.count(ViewerEventKind::Stopped), 2);
    no_session_left(&stub);
}

#[tokio::test]
async fn a_crashed_tab_loses_only_its_viewer() {
    let stub = stub(StubConfig {
        tab_crash_after_reads: Some(2),
        ..StubConfig::default()
    })
    .await;
    let run = run(
        &packed(&stub, 3, 3, "  recreate_lost: false\n"),
        Shutdown::new(),
    )
    .await;
    assert_eq!(stub.counters().tabs_crashed.load(Relaxed), 1);
    let lost = reasons(&run, ViewerEventKind::Lost);
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert_eq!(lost[0].1, "tab crashed");
    assert_eq!(
        run.count(ViewerEventKind::Stopped),
        2,
        "the others played on"
    );
    assert_eq!(stub.counters().sessions_created.load(Relaxed), 1);
    no_session_left(&stub);
}

#[tokio::test]
async fn an_endpoint_without_bidi_fails_packed_viewers_and_says_why() {
    let stub = stub(StubConfig {
        no_bidi: true,
        ..StubConfig::default()
    })
    .await;
    let run = run(
        &packed(&stub, 2, 2, "  session_retries: 0\n"),
        Shutdown::new(),
    )
    .await;
    let failed = reasons(&run, ViewerEventKind::Failed);
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert!(
        failed
            .iter()
            .all(|(_, r)| r.contains("does not offer WebDriver BiDi")
                && r.contains("viewers.per_browser: 1")),
        "{failed:?}"
    );
    assert_eq!(run.outcome.exit_code, 1);
    no_session_left(&stub);
}

/// A fleet that cannot start every viewer before the run ends: sessions take 2 s to
/// create, one at a time, so of six viewers asked for within a second of a 5 s run at most
/// two play. The others are failed viewers with the stage they were at — never "0 failed" —
/// and the run exits with the failure code; the session still being created when the run
/// ended exists later (as on a Grid) and is deleted by the fleet's sweep.
#[tokio::test]
async fn viewers_the_fleet_never_started_fail_the_run_with_their_reasons() {
    let stub = stub(StubConfig {
        create_delay: Duration::from_secs(2),
        list_sessions: true,
        ..StubConfig::default()
    })
    .await;
    let run = run(
        &scenario(&stub, 6, "1s", "  max_parallel_starts: 1\n", ""),
        Shutdown::new(),
    )
    .await;
    assert_eq!(run.outcome.exit_code, 1, "{}", run.outcome.summary);
    let playing = run.count(ViewerEventKind::Playing);
    assert!(playing <= 2, "{playing} played");
    let failed = reasons(&run, ViewerEventKind::Failed);
    assert_eq!(failed.len(), 6 - playing, "{failed:?}");
    assert!(
        failed.iter().all(|(_, r)| r.starts_with("never started: ")),
        "{failed:?}"
    );
    // Those that never got to ask (one request at a time) and the one in creation.
    assert!(
        failed
            .iter()
            .filter(|(_, r)| r.contains("still waiting to ask the fleet"))
            .count()
            >= 3,
        "{failed:?}"
    );
    assert!(
        failed
            .iter()
            .any(|(_, r)| r.contains("still queued or being created")
                || r.contains("no first frame")),
        "{failed:?}"
    );
    // Every viewer's first event says when the plan asked for it: along the 1 s ramp
    // (counted from when the run was ready, however long this machine took to get there;
    // 0.5 s of slack for starting the viewers' tasks).
    let events = run.viewer_events();
    let due: Vec<f64> = (0..6)
        .map(|viewer| {
            let first = events.iter().find(|e| e.viewer == viewer).unwrap();
            first.due_s.expect("due_s on the first event")
        })
        .collect();
    let earliest = due.iter().copied().fold(f64::INFINITY, f64::min);
    assert!(earliest >= 0.0, "{due:?}");
    assert!(
        due.iter().all(|d| d - earliest <= 1.5),
        "due times spread beyond the ramp: {due:?}"
    );
    assert!(
        run.outcome.summary.contains(&format!(
            "viewers: 6 requested, {playing} started, {} failed or lost ({} never started)",
            6 - playing,
            6 - playing
        )),
        "{}",
        run.outcome.summary
    );
    // The report counts them and draws the arrivals asked for against those obtained.
    let report = viewerfleet::report::write_report(&run.out()).unwrap();
    assert_eq!(report.viewers.requested, 6);
    assert_eq!(report.viewers.started as usize, playing);
    assert_eq!(report.viewers.failed as usize, 6 - playing);
    assert_eq!(report.viewers.not_started as usize, 6 - playing);
    let arrival = report.arrival.as_ref().expect("an arrival section");
    assert_eq!(arrival.asked, 6);
    assert_eq!(arrival.sessions as usize, playing);
    assert!(arrival.still_behind_at_end);
    assert!(
        arrival.headline.contains("fell behind"),
        "{}",
        arrival.headline
    );
    let md = std::fs::read_to_string(run.out().join("report.md")).unwrap();
    assert!(md.contains("## Arrivals: asked for and obtained"), "{md}");
    assert!(!md.contains("Failed or lost viewers: none"), "{md}");
    let csv = std::fs::read_to_string(run.out().join("timeseries.csv")).unwrap();
    assert!(csv.lines().next().unwrap().contains("arrivals_sessions"));
    no_session_left(&stub);
}

/// Runs `yaml` stretched to 2 minutes (T at 100 s), which a threshold must end within one.
async fn run_cut_short(yaml: &str) -> Run {
    let yaml = yaml
        .replace("duration: 5s", "duration: 120s")
        .replace("measure_at: 4s", "measure_at: 100s");
    let (dir, path, out) = scenario_dir(&yaml);
    let outcome = tokio::time::timeout(
        Duration::from_secs(60),
        run_quietly(&path, &out, Shutdown::new()),
    )
    .await
    .expect("the run ended early, long before its 2 minutes")
    .expect("the run completes");
    Run { dir, outcome }
}
