//! Churn against the WebDriver stub (no browser): viewers leave once they watched their
//! drawn time, close their sessions, and new viewers with new indices take their places at
//! once; the raw data and the report count them.

use std::sync::atomic::Ordering::Relaxed;
use viewerfleet::engine::{run_scenario, RunOptions, RunSource};
use viewerfleet::model::rawdata::{self, ViewerEvent, ViewerEventKind};
use viewerfleet::model::scenario::{self, Overrides};
use viewerfleet::sys::shutdown::Shutdown;
use viewerfleet_kit::webdriver_stub::{Stub, StubConfig};

#[tokio::test]
async fn leaving_viewers_close_their_sessions_and_are_replaced_on_schedule() {
    let stub = Stub::serve("127.0.0.1:0".parse().unwrap(), StubConfig::default())
        .await
        .unwrap();
    let a = stub.addr();
    let yaml = format!(
        "name: churn-test\n\
         target:\n  kind: peertube\n  video: vod\n  url: http://{a}/w/test\n  exporter: http://{a}/metrics\n\
         viewers:\n  count: 2\n  ramp: 0s\n  churn:\n    watch:\n      durations: [{{watch: 2s, share: 1}}]\n\
         duration: 8s\nsampling_interval: 500ms\nmeasure_at: 7s\nsteady_window: 2s\n\
         fleet:\n  kind: grid\n  url: http://{a}/\n  retry_backoff: 100ms\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scenario.yaml");
    std::fs::write(&path, yaml).unwrap();
    let out = dir.path().join("run");
    let overrides = Overrides::default();
    let plan = scenario::load(&path, &overrides).unwrap();
    assert!(
        plan.summary_line().contains("churn: watch times 2s 100%"),
        "{}",
        plan.summary_line()
    );
    let options = RunOptions {
        progress: false,
        ..RunOptions::default()
    };
    let outcome = run_scenario(
        plan,
        &RunSource::scenario(&path, &overrides),
        &out,
        Shutdown::new(),
        options,
    )
    .await
    .unwrap();
    assert_eq!(outcome.exit_code, 0, "{}", outcome.summary);
    let events: Vec<ViewerEvent> = rawdata::read_jsonl(&out.join(rawdata::VIEWER_EVENTS))
        .unwrap()
        .records;
    let of = |kind: ViewerEventKind| events.iter().filter(move |e| e.event == kind);
    // Each viewer played, left 2 s later, and a new viewer came in its place.
    let left: Vec<&ViewerEvent> = of(ViewerEventKind::Left).collect();
    assert!(left.len() >= 4, "{events:#?}");
    for l in &left {
        let playing = of(ViewerEventKind::Playing)
            .find(|e| e.viewer == l.viewer)
            .expect("a viewer that left had played");
        let watched = l.t - playing.t;
        assert!(
            (1.8..3.2).contains(&watched),
            "viewer {} watched {watched} s",
            l.viewer
        );
    }
    let replacements: Vec<(u32, String)> = of(ViewerEventKind::Creating)
        .filter_map(|e| Some((e.viewer, e.reason.clone()?)))
        .filter(|(_, r)| r.starts_with("replaces viewer"))
        .collect();
    assert!(
        replacements.iter().all(|(v, _)| *v >= 2),
        "{replacements:?}"
    );
    // Every leaver is replaced, except those whose replacement the run's end cut off.
    assert!(
        replacements.len() + 2 >= left.len(),
        "{} left, {} replaced",
        left.len(),
        replacements.len()
    );
    // No session is left open: every leaver closed its own.
    let c = stub.counters();
    assert_eq!(
        c.sessions_created.load(Relaxed),
        c.sessions_deleted.load(Relaxed),
        "{}",
        c.summary()
    );
    // The report counts them.
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let churn = &report["churn"];
    assert_eq!(
        churn["left"].as_u64().unwrap() as usize,
        left.len(),
        "{churn}"
    );
    assert_eq!(
        churn["replacements"].as_u64().unwrap() as usize,
        replacements.len(),
        "{churn}"
    );
    assert_eq!(churn["planned_viewers"], 2);
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## Churn: viewers who left and came"), "{md}");
}
