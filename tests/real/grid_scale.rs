//! A few hundred viewers through a real Selenium Grid 4 hub and relay nodes, no browser:
//! the kit's WebDriver stub plays every browser behind the nodes, so every WebDriver call of
//! the run crosses the real hub (`viewerfleet_kit::relay_grid`). Every requested viewer is
//! accounted for (started, or failed/lost with a reason), the report draws the arrivals
//! asked for against those obtained, and nothing is left: the hub lists no session and the
//! stub deleted every session it created. Needs Java 17 and `make grid-deps`; ≈2 minutes.

use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use viewerfleet::engine::{run_scenario, RunOptions, RunSource};
use viewerfleet::model::scenario::{self, Overrides};
use viewerfleet::sys::shutdown::Shutdown;
use viewerfleet_kit::relay_grid::{RelayGrid, RelayGridOptions};
use viewerfleet_kit::webdriver_stub::{Stub, StubConfig};

const VIEWERS: u32 = 200;

#[tokio::test(flavor = "multi_thread")]
async fn hundreds_of_viewers_through_a_real_hub_are_all_accounted_for_and_released() {
    let stub = Stub::serve("127.0.0.1:0".parse().unwrap(), StubConfig::default())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let grid_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("grid");
    let mut opts = RelayGridOptions::new(
        grid_dir.join(viewerfleet::grid::selenium::jar_in_grid()),
        grid_dir.join("hub.toml"),
        format!("http://{}", stub.addr()),
        dir.path().join("grid"),
    );
    opts.nodes = 4;
    opts.sessions_per_node = VIEWERS / 4;
    let grid = tokio::task::spawn_blocking(move || RelayGrid::start(&opts))
        .await
        .unwrap()
        .expect("a hub and 4 relay nodes (Java 17, make grid-deps)");
    let a = stub.addr();
    let scenario = dir.path().join("scenario.yaml");
    std::fs::write(
        &scenario,
        format!(
            "name: grid-scale\ntarget:\n  kind: peertube\n  video: vod\n  url: http://{a}/w/scale\n  exporter: http://{a}/metrics\n\
             viewers:\n  count: {VIEWERS}\n  ramp: 20s\nduration: 90s\nsampling_interval: 5s\nmeasure_at: 80s\n\
             steady_window: 20s\nmax_failed_viewers: 0\n\
             fleet:\n  kind: grid\n  url: {hub}\n  max_parallel_starts: 16\n",
            hub = grid.hub_url()
        ),
    )
    .unwrap();
    let out = dir.path().join("run");
    let options = RunOptions {
        progress: false,
        ..RunOptions::default()
    };
    let overrides = Overrides::default();
    let plan = scenario::load(&scenario, &overrides).unwrap();
    let outcome = run_scenario(
        plan,
        &RunSource::scenario(&scenario, &overrides),
        &out,
        Shutdown::new(),
        options,
    )
    .await
    .expect("the run completes");

    let report: viewerfleet::report::ReportSummary =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    let v = &report.viewers;
    // Every requested viewer is accounted for, each failure with its reason.
    assert_eq!(v.requested, VIEWERS);
    assert_eq!(v.started + v.not_started, VIEWERS, "{}", outcome.summary);
    assert_eq!(
        report.qoe.failed.len() as u32,
        v.failed + v.lost,
        "{:?}",
        report.qoe.failure_reasons
    );
    assert!(report.qoe.failed.iter().all(|f| !f.reason.is_empty()));
    assert_eq!(
        (v.started, outcome.exit_code),
        (VIEWERS, 0),
        "all viewers start on an idle machine: {}\n{:?}",
        outcome.summary,
        report.qoe.failure_reasons
    );
    // The arrivals asked for against those obtained.
    let arrival = report.arrival.as_ref().expect("an arrival section");
    assert_eq!((arrival.asked, arrival.sessions), (VIEWERS, VIEWERS));
    assert!(!arrival.per_minute.is_empty());
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("Arrivals: asked for and obtained"));
    let csv = std::fs::read_to_string(out.join("timeseries.csv")).unwrap();
    assert!(csv.lines().next().unwrap().contains("arrivals_asked"));
    // Every viewer ran on one of the relay nodes, as the hub's /status said.
    let events = std::fs::read_to_string(out.join("raw/viewer_events.jsonl")).unwrap();
    assert!(events.contains("\"node\":\"http://127.0.0.1:"), "placement");
    // Nothing left on the hub or behind it.
    let on_hub = tokio::task::spawn_blocking(move || {
        let n = grid.sessions().unwrap();
        drop(grid);
        n
    })
    .await
    .unwrap();
    assert_eq!(on_hub, 0, "sessions left on the hub");
    let c = stub.counters();
    assert_eq!(
        c.sessions_created.load(Relaxed),
        c.sessions_deleted.load(Relaxed),
        "{}",
        c.summary()
    );
    assert_eq!(c.sessions_created.load(Relaxed), u64::from(VIEWERS));
}
