//! The whole loop through a real Selenium Grid 4 on this machine: `grid up --local` with 2
//! nodes, a refsite VOD run whose scenario names only the hub URL, 4 viewers in the nodes'
//! viewer slots. Checked: the players shared over P2P (bytes > 0 in raw data), the Grid's
//! own `/status` showed sessions on both nodes during the run, every viewer event names the
//! node `/status` gave, and after the run no session, process, namespace or file is left.

use crate::support::grid as grid_support;

use crate::support::raw_run::RawRun;
use grid_support::*;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use viewerfleet::model::rawdata::ViewerEventKind;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refsite_viewers_through_the_hub_share_p2p_on_both_nodes() {
    let grid = GridGuard::up("refsite", 2, 3, true).await;
    let st = grid.state.clone();
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("grid-vod.yaml");
    std::fs::write(
        &scenario,
        format!(
            "name: grid-vod
target: {{kind: refsite, video: vod, metrics_interval: 5s}}
viewers: {{count: 4, ramp: 8s}}
duration: 75s
sampling_interval: 2s
measure_at: 70s
steady_window: 20s
fleet: {{kind: grid, url: '{}'}}
",
            st.hub_url
        ),
    )
    .unwrap();
    let out = dir.path().join("run");

    // Watch the Grid's own account of where sessions run while the run goes on.
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
    // The real binary: the engine starts refsite as `viewerfleet refsite` (itself).
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
    let summary = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "the run through the Grid completes: {summary}"
    );
    stop.cancel();
    watcher.await.unwrap();
    eprintln!("{summary}");

    let raw = RawRun::read(&out);
    let playing: BTreeMap<u32, String> = raw
        .events
        .iter()
        .filter(|e| e.event == ViewerEventKind::Playing)
        .map(|e| (e.viewer, e.node.clone().unwrap_or_default()))
        .collect();
    assert_eq!(playing.len(), 4, "all 4 played: {summary}");
    let seen = seen.lock().unwrap().clone();
    let busy_nodes: BTreeSet<&String> = seen
        .iter()
        .filter(|(_, s)| !s.is_empty())
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        busy_nodes.len(),
        2,
        "sessions on both nodes per /status: {seen:?}"
    );
    for node in playing.values() {
        assert!(
            seen.contains_key(node),
            "event node {node} is a node of /status"
        );
    }
    assert!(
        raw.p2p_down_bytes(4) > 0,
        "players received bytes over P2P: {summary}"
    );

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
