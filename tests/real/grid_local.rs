//! A real Selenium Grid 4 on this machine (hub + 2 nodes from the server jar, each browser
//! in its node's viewer slot) and viewers created through the hub URL only: they play, they
//! are spread over both nodes according to the Grid's own `/status`, each reached the page
//! from its own address in its node's range, and everything is gone afterwards.
//! Needs root (namespaces), java and the Selenium jar (`make grid-deps`); runs the hub and
//! node configuration built into viewerfleet (or `VIEWERFLEET_GRID_CONFIG`'s).

use crate::support::grid as grid_support;
use crate::support::poll;

use axum::extract::ConnectInfo;
use axum::{routing::get, Router};
use grid_support::*;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use viewerfleet::fleet::grid::GridFleet;
use viewerfleet::fleet::Fleet;
use viewerfleet::model::scenario::fleet::GridFleetPlan;
use viewerfleet::model::scenario::ViewerPlan;
use viewerfleet::viewer::{Viewer, ViewerTimeouts};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn viewers_through_the_hub_spread_over_two_nodes_and_everything_is_released() {
    let grid = GridGuard::up("spread", 2, 3, true).await;
    let st = grid.state.clone();
    if grid_support::config_dir().is_none() {
        // The configuration built into viewerfleet, written into the Grid's own folder with
        // the Grid's secrets added.
        let secrets = st.secrets.as_ref().expect("a local Grid has secrets");
        assert_eq!(
            std::fs::read_to_string(st.dir.join("hub.toml")).unwrap(),
            secrets.hub_toml(viewerfleet::grid::local::HUB_TOML)
        );
        let node = std::fs::read_to_string(st.dir.join("node-1/node.toml")).unwrap();
        assert!(node.contains("\"viewerfleet:slots\""), "{node}");
    }

    // The page is served inside the target's namespace, where every slot reaches it.
    let dir = tempfile::tempdir().unwrap();
    let (seen, server) = serve_clip_page(&st, dir.path());

    let fleet = GridFleet::start(&GridFleetPlan::with_url(&st.hub_url).unwrap())
        .await
        .unwrap();
    let target = ClipTarget {
        base: st.target_origin(),
    };
    let mut viewers = Vec::new();
    for index in 0..4 {
        let plan = ViewerPlan {
            index,
            start_after: Duration::ZERO,
            p2p: true,
            network: None,
            browser: index,
            access: Default::default(),
        };
        let mut slot = fleet.open_viewer(&plan).await.unwrap();
        assert_eq!(slot.webdriver_url, st.hub_url, "only the hub URL is used");
        let viewer = Viewer::create(&slot, ViewerTimeouts::default())
            .await
            .expect("session through the hub");
        let id = viewer.session_id.clone().unwrap();
        fleet.session_placed(&mut slot, &id).await;
        viewer.open(&target, true).await.unwrap();
        viewers.push((viewer, slot, id));
    }
    for (viewer, _, _) in &viewers {
        let ttff = viewer
            .wait_first_frame(&target, Duration::from_millis(200))
            .await
            .expect("plays through the Grid");
        assert!(ttff > 0.0);
    }

    // Spread, by the Grid's own account.
    let status = fleet.status().await.unwrap();
    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    for (node, sessions) in status.sessions_by_node() {
        for (_, slot, id) in &viewers {
            if sessions.contains(id) {
                *per_node.entry(node.clone()).or_default() += 1;
                assert_eq!(slot.node, node, "the fleet recorded the node /status names");
            }
        }
    }
    assert_eq!(per_node.values().sum::<usize>(), 4, "{per_node:?}");
    assert_eq!(per_node.len(), 2, "sessions on both nodes: {per_node:?}");
    let node_urls: BTreeSet<String> = st.nodes.iter().map(|n| n.url.clone()).collect();
    assert_eq!(per_node.keys().cloned().collect::<BTreeSet<_>>(), node_urls);

    // Each browser came from its own slot address, inside the range of some node.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 4, "distinct viewer addresses: {seen:?}");
    for addr in &seen {
        let owned = st.nodes.iter().any(|n| {
            (n.first_slot..n.first_slot + n.slots).any(|i| {
                viewerfleet::grid::local_state::LocalGridState::slot_address(&st.prefix, i)
                    .as_deref()
                    == Some(addr.as_str())
            })
        });
        assert!(owned, "{addr} is not a slot address of any node");
    }

    // The description is honest about where addresses come from.
    let yaml = format!(
        "name: t\ntarget: {{kind: peertube, video: vod, url: '{}/w/x'}}\nviewers: {{count: 4}}\nduration: 30s\nfleet: {{kind: grid, url: '{}'}}\n",
        st.target_origin(),
        st.hub_url
    );
    let plan = viewerfleet::model::scenario::parse(&yaml, "t.yaml", &Default::default()).unwrap();
    let description = fleet.description(&plan);
    assert!(description.own_address_per_viewer);
    assert!(!description.p2p_shaped);
    // From what each node reports in the hub's /status, not from the state file.
    assert!(
        description
            .notes
            .iter()
            .any(|n| n.starts_with("2 of 2 node(s)")
                && n.contains(&format!("3 viewer slots in {}", st.prefix))),
        "{:?}",
        description.notes
    );

    for (viewer, slot, id) in viewers {
        viewer.close().await;
        fleet.session_closed(&id);
        fleet.close_viewer(&slot).await;
    }
    fleet.shutdown().await.unwrap();
    poll::until_async(
        "sessions gone from /status",
        Duration::from_secs(30),
        || async {
            fleet
                .status()
                .await
                .map(|s| s.sessions_by_node().iter().all(|(_, v)| v.is_empty()))
                .unwrap_or(false)
        },
    )
    .await;
    server.abort();
    grid.down_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_viewers_share_one_grid_session_over_webdriver_bidi() {
    use viewerfleet::model::scenario::BrowserPlan;
    use viewerfleet::viewer::{BrowserSetup, SharedBrowser};
    let grid = GridGuard::up("bidi", 1, 2, true).await;
    let st = grid.state.clone();
    let dir = tempfile::tempdir().unwrap();
    let (seen, server) = serve_clip_page(&st, dir.path());
    let fleet = GridFleet::start(&GridFleetPlan::with_url(&st.hub_url).unwrap())
        .await
        .unwrap();
    let target = ClipTarget {
        base: st.target_origin(),
    };
    let plans = (0..3)
        .map(|index| ViewerPlan {
            index,
            start_after: Duration::ZERO,
            p2p: true,
            network: None,
            browser: 0,
            access: Default::default(),
        })
        .collect();
    let mut slot = fleet
        .open_browser(&BrowserPlan {
            index: 0,
            viewers: plans,
        })
        .await
        .unwrap();
    assert_eq!(slot.webdriver_url, st.hub_url, "only the hub URL is used");
    let browser = SharedBrowser::create(&slot, ViewerTimeouts::default(), &BrowserSetup::project())
        .await
        .expect("the hub grants webSocketUrl and proxies WebDriver BiDi");
    let id = browser.session_id.clone().unwrap();
    fleet.session_placed(&mut slot, &id).await;
    let mut viewers = Vec::new();
    for _ in 0..3 {
        let viewer = browser.open_viewer().await.expect("a tab through the hub");
        viewer.open(&target, true).await.unwrap();
        viewers.push(viewer);
    }
    for viewer in &viewers {
        let ttff = viewer
            .wait_first_frame(&target, Duration::from_millis(200))
            .await
            .expect("plays in its tab through the Grid");
        assert!(ttff > 0.0);
        let stats = viewer.read(&target).await.unwrap();
        // The clip has no audio track: its video track drives its clock, so the decode
        // lever leaves it selected (deselected, playback would stop at 0 s).
        assert_eq!(stats.video_track_off, Some(false), "{stats:?}");
        assert!(stats.current_time > 0.0, "plays on: {stats:?}");
    }
    // One Grid session holds the three viewers, on the node /status names.
    let status = fleet.status().await.unwrap();
    let sessions: Vec<(String, Vec<String>)> = status.sessions_by_node();
    let on_node: Vec<&String> = sessions
        .iter()
        .filter(|(_, ids)| ids.contains(&id))
        .map(|(node, _)| node)
        .collect();
    assert_eq!(on_node, [&slot.node], "{sessions:?}");
    assert_eq!(
        sessions.iter().map(|(_, ids)| ids.len()).sum::<usize>(),
        1,
        "one session for three viewers: {sessions:?}"
    );
    // The three come from the one slot's address.
    assert_eq!(seen.lock().unwrap().len(), 1, "{:?}", seen.lock().unwrap());
    for viewer in viewers {
        viewer.close().await;
    }
    browser.close().await;
    fleet.session_closed(&id);
    fleet.close_viewer(&slot).await;
    fleet.shutdown().await.unwrap();
    poll::until_async(
        "the session gone from /status",
        Duration::from_secs(30),
        || async {
            fleet
                .status()
                .await
                .map(|s| s.sessions_by_node().iter().all(|(_, v)| v.is_empty()))
                .unwrap_or(false)
        },
    )
    .await;
    server.abort();
    grid.down_and_check().await;
}

/// Serves the clip page and the clip inside the target's namespace, where every slot
/// reaches it; the addresses the page was asked from are collected in the set.
fn serve_clip_page(
    st: &viewerfleet::grid::local_state::LocalGridState,
    dir: &std::path::Path,
) -> (
    Arc<Mutex<BTreeSet<String>>>,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let clip = make_clip(dir);
    let seen: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let seen_by_page = seen.clone();
    let app = Router::new()
        .route(
            "/",
            get(move |ConnectInfo(peer): ConnectInfo<SocketAddr>| {
                let seen = seen_by_page.clone();
                async move {
                    seen.lock().unwrap().insert(peer.ip().to_string());
                    axum::response::Html(CLIP_PAGE)
                }
            }),
        )
        .route(
            "/clip.mp4",
            get(move || {
                let clip = clip.clone();
                async move { ([("content-type", "video/mp4")], clip) }
            }),
        );
    let listen: SocketAddr = format!("[{}]:{}", st.target_address, st.target_port)
        .parse()
        .unwrap();
    let std_listener = viewerfleet::netns::bind_tcp_in_netns(&st.target_namespace, listen).unwrap();
    let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
    let server = tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
    });
    (seen, server)
}
