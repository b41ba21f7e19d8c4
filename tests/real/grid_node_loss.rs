//! Node loss through the whole run engine: a local Grid (hub + 2 nodes), 4 viewers of a
//! clip page, one node killed mid-run (its process group: Java, chromedriver, browsers).
//! Checked from the raw data alone: the viewers of that node are `lost` with time, reason
//! and node; the run goes on and finishes; the viewers on the other node keep sampling; a
//! lost viewer is created again on the surviving node as soon as it has a free slot; and
//! no session is left on the Grid.

use crate::support::grid as grid_support;
use crate::support::poll;

use grid_support::*;
use std::collections::BTreeMap;
use std::time::Duration;
use viewerfleet::model::rawdata::{
    read_jsonl, RunEvent, RunEventKind, ViewerEvent, ViewerEventKind, ViewerSample, RUN_EVENTS,
    VIEWER_EVENTS, VIEWER_SAMPLES,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_node_loses_its_viewers_the_run_goes_on_and_they_come_back() {
    // Browsers in the root namespace here: the engine checks the page from this namespace.
    let grid = GridGuard::up("loss", 2, 3, false).await;
    let st = grid.state.clone();

    let dir = tempfile::tempdir().unwrap();
    let (base, server) = serve_clip(dir.path(), "/videos/embed/clip").await;

    let scenario = dir.path().join("loss.yaml");
    std::fs::write(
        &scenario,
        format!(
            "name: grid-node-loss
target: {{kind: peertube, video: vod, url: '{base}/w/clip'}}
viewers: {{count: 4, ramp: 2s}}
duration: 180s
sampling_interval: 2s
measure_at: 170s
steady_window: 20s
max_failed_viewers: 4
fleet: {{kind: grid, url: '{}', retry_backoff: 1s}}
",
            st.hub_url
        ),
    )
    .unwrap();
    let out = dir.path().join("run");
    let run = tokio::spawn({
        let (scenario, out) = (scenario.clone(), out.clone());
        async move {
            let overrides = viewerfleet::model::scenario::Overrides::default();
            let plan = viewerfleet::model::scenario::load(&scenario, &overrides)?;
            viewerfleet::engine::run_scenario(
                plan,
                &viewerfleet::engine::RunSource::scenario(&scenario, &overrides),
                &out,
                viewerfleet::sys::shutdown::Shutdown::new(),
                viewerfleet::engine::RunOptions {
                    progress: false,
                    ..Default::default()
                },
            )
            .await
        }
    });

    // Once all four play (two playing samples each), kill the node running most of them.
    let events_path = out.join(VIEWER_EVENTS);
    let samples_path = out.join(VIEWER_SAMPLES);
    let mut playing_nodes = BTreeMap::new();
    poll::until_async("4 viewers playing", Duration::from_secs(100), || {
        let events: Vec<ViewerEvent> = read_jsonl(&events_path).unwrap().records;
        let samples: Vec<ViewerSample> = read_jsonl(&samples_path).unwrap().records;
        let sampled = (0..4).all(|v| {
            samples
                .iter()
                .filter(|s| s.viewer == v && s.playing)
                .count()
                >= 2
        });
        playing_nodes = events
            .iter()
            .filter(|e| e.event == ViewerEventKind::Playing)
            .map(|e| (e.viewer, e.node.clone().unwrap_or_default()))
            .collect::<BTreeMap<_, _>>();
        let done = playing_nodes.len() == 4 && sampled;
        async move { done }
    })
    .await;
    let mut per_node: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for (viewer, node) in &playing_nodes {
        per_node.entry(node.clone()).or_default().push(*viewer);
    }
    assert_eq!(per_node.len(), 2, "spread over both nodes: {per_node:?}");
    let (victim_url, victims) = per_node
        .iter()
        .max_by_key(|(_, v)| v.len())
        .map(|(n, v)| (n.clone(), v.clone()))
        .unwrap();
    let victim = st.nodes.iter().find(|n| n.url == victim_url).unwrap();
    let killed_at = std::time::Instant::now();
    viewerfleet::grid::local::kill_node(&st, victim.number).unwrap();

    let outcome = run
        .await
        .unwrap()
        .expect("the run finishes despite the loss");
    assert!(!outcome.interrupted);
    eprintln!("{}", outcome.summary);
    let elapsed_after_kill = killed_at.elapsed().as_secs_f64();

    // --- Accounting from raw data only.
    let events: Vec<ViewerEvent> = read_jsonl(&events_path).unwrap().records;
    let samples: Vec<ViewerSample> = read_jsonl(&out.join(VIEWER_SAMPLES)).unwrap().records;
    let run_events: Vec<RunEvent> = read_jsonl(&out.join(RUN_EVENTS)).unwrap().records;
    let end_t = run_events
        .iter()
        .find(|e| e.event == RunEventKind::Finished)
        .expect("the run finished normally")
        .t;
    let kill_t = end_t - elapsed_after_kill;
    let lost: Vec<&ViewerEvent> = events
        .iter()
        .filter(|e| e.event == ViewerEventKind::Lost)
        .collect();
    let mut lost_viewers: Vec<u32> = lost.iter().map(|e| e.viewer).collect();
    lost_viewers.sort();
    assert_eq!(
        lost_viewers, victims,
        "exactly the killed node's viewers are lost"
    );
    for e in &lost {
        assert_eq!(e.node.as_deref(), Some(victim_url.as_str()));
        assert!(
            e.t > kill_t - 1.0 && e.t < end_t,
            "lost at {} (kill {kill_t})",
            e.t
        );
        assert!(!e.reason.clone().unwrap_or_default().is_empty());
    }
    // Survivors kept sampling after the kill.
    let survivors: Vec<u32> = (0..4).filter(|v| !victims.contains(v)).collect();
    for v in &survivors {
        assert!(
            samples
                .iter()
                .any(|s| s.viewer == *v && s.t > kill_t + 10.0),
            "viewer {v} sampled after the kill"
        );
        assert!(events
            .iter()
            .any(|e| e.viewer == *v && e.event == ViewerEventKind::Stopped));
    }
    // Re-created on the surviving node as its slots allow (3 slots, survivors hold the rest).
    let free_slots = 3 - survivors.len();
    let recreated: Vec<&ViewerEvent> = events
        .iter()
        .filter(|e| {
            victims.contains(&e.viewer)
                && e.event == ViewerEventKind::Playing
                && lost.iter().any(|l| l.viewer == e.viewer && l.t < e.t)
        })
        .collect();
    assert_eq!(
        recreated.len(),
        free_slots.min(victims.len()),
        "re-created viewers: {recreated:?}"
    );
    for e in &recreated {
        assert_ne!(e.node.as_deref(), Some(victim_url.as_str()));
        assert!(samples.iter().any(|s| s.viewer == e.viewer && s.t > e.t));
    }
    // The dip and the recovery, as the report sees them: a lost viewer has no sample
    // between its loss and its next first frame.
    for l in &lost {
        let back = events
            .iter()
            .filter(|e| e.viewer == l.viewer && e.event == ViewerEventKind::Playing && e.t > l.t)
            .map(|e| e.t)
            .next()
            .unwrap_or(f64::INFINITY);
        assert!(
            !samples
                .iter()
                .any(|s| s.viewer == l.viewer && s.t > l.t && s.t < back),
            "viewer {} sampled while lost",
            l.viewer
        );
    }
    // No session outlives the run.
    let status = viewerfleet::grid::grid_status(
        &viewerfleet::grid::auth::http_client(st.controller_credentials().as_ref()),
        &st.hub_url,
    )
    .await
    .unwrap();
    for node in status.nodes.iter().filter(|n| n.availability == "UP") {
        assert!(
            node.slots.iter().all(|s| s.session.is_none()),
            "session left on {}",
            node.uri
        );
    }
    server.abort();
    grid.down_and_check().await;
}
