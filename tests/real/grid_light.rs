//! Light peers on a real Selenium Grid 4: `grid up --local` with 2 nodes, a live refsite run
//! of 1 real viewer and 4 light peers in 2 browser pages (`swarm.runtime: browser`), all
//! through the hub. Checked: each page is a session the Grid placed on a node, every light
//! peer played and was read, P2P flowed between light peers and the real viewer, and after
//! the run no session, process, namespace or file is left.

use crate::support::grid::*;
use crate::support::raw_run::RawRun;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use viewerfleet::model::rawdata::{
    read_jsonl, LightSample, RunEvent, RunEventKind, LIGHT_SAMPLES, RUN_EVENTS,
};

const LIGHT_PEERS: u32 = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn light_pages_through_the_hub_join_the_real_viewers_swarm() {
    let grid = GridGuard::up("light", 2, 3, true).await;
    let st = grid.state.clone();
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("grid-light.yaml");
    std::fs::write(
        &scenario,
        format!(
            "name: grid-light
target: {{kind: refsite, video: live, latency: normal, metrics_interval: 2s}}
viewers: {{count: 1, ramp: 4s}}
swarm: {{light_peers: {LIGHT_PEERS}, per_page: 2, runtime: browser}}
duration: 70s
sampling_interval: 2s
steady_window: 20s
fleet: {{kind: grid, url: '{}'}}
",
            st.hub_url
        ),
    )
    .unwrap();
    let out = dir.path().join("run");

    // The Grid's own account of its sessions while the run goes on.
    let seen: Arc<Mutex<BTreeMap<String, BTreeSet<String>>>> = Arc::default();
    let stop = tokio_util::sync::CancellationToken::new();
    let watcher = tokio::spawn({
        let (seen, stop, hub) = (seen.clone(), stop.clone(), st.hub_url.clone());
        let client = viewerfleet::grid::auth::http_client(st.controller_credentials().as_ref());
        async move {
            while !stop.is_cancelled() {
                if let Ok(status) = viewerfleet::grid::grid_status(&client, &hub).await {
                    let mut seen = seen.lock().unwrap();
                    for (node, sessions) in status.sessions_by_node() {
                        seen.entry(node).or_default().extend(sessions);
                    }
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    });
    let output = tokio::task::spawn_blocking({
        let (scenario, out) = (scenario.clone(), out.clone());
        move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_viewerfleet"))
                .args(["--quiet", "run"])
                .arg(&scenario)
                .arg("--out")
                .arg(&out)
                .arg("--no-report")
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    stop.cancel();
    watcher.await.unwrap();
    let summary = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "the run through the Grid completes: {summary}"
    );

    let events: Vec<RunEvent> = read_jsonl(&out.join(RUN_EVENTS)).unwrap().records;
    let started = events
        .iter()
        .filter(|e| e.event == RunEventKind::LightStarted)
        .count();
    assert_eq!(started, 2, "one light_started per page: {events:?}");
    assert!(
        !events.iter().any(|e| e.event == RunEventKind::LightFailed),
        "{events:?}"
    );
    // The viewer's browser and both pages were sessions of the Grid.
    let sessions: usize = seen.lock().unwrap().values().map(BTreeSet::len).sum();
    assert!(
        sessions >= 3,
        "the viewer and two pages as Grid sessions: {:?}",
        seen.lock().unwrap()
    );

    let samples: Vec<LightSample> = read_jsonl(&out.join(LIGHT_SAMPLES)).unwrap().records;
    let finals: BTreeMap<u32, LightSample> = samples.into_iter().map(|s| (s.peer, s)).collect();
    assert_eq!(
        finals.keys().copied().collect::<Vec<_>>(),
        (0..LIGHT_PEERS).collect::<Vec<_>>(),
        "every light peer was read: {summary}"
    );
    for (peer, s) in &finals {
        assert!(s.playing, "light peer {peer} never played: {s:?}");
    }
    let light_p2p_down: u64 = finals.values().map(|s| s.p2p_down_bytes).sum();
    let light_p2p_up: u64 = finals.values().map(|s| s.p2p_up_bytes).sum();
    let raw = RawRun::read(&out);
    assert_eq!(raw.playing(), 1, "the real viewer played: {summary}");
    eprintln!("light peers through the Grid: P2P down {light_p2p_down} B, up {light_p2p_up} B");
    assert!(light_p2p_down > 0, "light peers got nothing over P2P");
    assert!(light_p2p_up > 0, "light peers sent nothing over P2P");

    // Nothing of the run is left on the Grid.
    let status = viewerfleet::grid::grid_status(
        &viewerfleet::grid::auth::http_client(st.controller_credentials().as_ref()),
        &st.hub_url,
    )
    .await
    .unwrap();
    assert!(status.sessions_by_node().iter().all(|(_, s)| s.is_empty()));
    grid.down_and_check().await;
}
