//! The viewer layer against a real Chromium through the local fleet's chromedriver: a page
//! with a `<video>` playing an ffmpeg-made clip. Checks first frame, stats reads, CDP
//! throttling, and that closing releases the browser.

use std::time::Duration;
use viewerfleet::fleet::local::LocalFleet;
use viewerfleet::fleet::Fleet;
use viewerfleet::model::kinds::Throttling;
use viewerfleet::model::scenario::fleet::LocalFleetPlan;
use viewerfleet::model::scenario::{LinkProfile, NetworkProfile, ViewerPlan};
use viewerfleet::viewer::{Viewer, ViewerTimeouts};

use crate::support::clip as clip_support;
use clip_support::{serve_clip, ClipTarget};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_viewer_plays_and_is_released() {
    let dir = tempfile::tempdir().unwrap();
    let (base, server) = serve_clip(dir.path(), "/").await;

    let fleet = LocalFleet::start(&LocalFleetPlan::default()).await.unwrap();
    let plan = ViewerPlan {
        index: 0,
        start_after: Duration::ZERO,
        p2p: true,
        network: None,
        browser: 0,
        access: Default::default(),
    };
    let slot = fleet.open_viewer(&plan).await.unwrap();
    let viewer = Viewer::create(&slot, ViewerTimeouts::default())
        .await
        .unwrap();
    for apply in Throttling::ALL {
        let profile = NetworkProfile {
            link: LinkProfile {
                download_kbps: Some(2000),
                upload_kbps: Some(300),
                latency_ms: Some(50),
            },
            apply: Some(*apply),
        };
        let result = viewer.throttle(&profile, &slot).await;
        if *apply == Throttling::Tc {
            let err = result.expect_err("tc needs a shaped slot").to_string();
            assert!(err.contains("apply: http-only"), "{err}");
        } else {
            result.expect("chromedriver accepts the throttling commands");
        }
    }
    let target = ClipTarget { base };
    viewer.open(&target, true).await.unwrap();
    let ttff = viewer
        .wait_first_frame(&target, Duration::from_millis(100))
        .await
        .unwrap();
    assert!(ttff > 0.0, "first frame at {ttff} ms");
    let stats = viewer.read(&target).await.unwrap();
    assert!(stats.has_video);
    assert_eq!(stats.resolution, Some(180));
    assert!(
        stats.http_bytes > 10_000,
        "resource timing counted the clip: {stats:?}"
    );
    assert_eq!(
        stats.http_source,
        Some(viewerfleet::model::kinds::HttpByteSource::ResourceTiming)
    );
    let session = viewer.session_id.clone().unwrap();
    viewer.close().await;
    fleet.close_viewer(&slot).await;

    // The session is gone from the driver, and the driver is gone after shutdown.
    let sessions: serde_json::Value =
        reqwest::get(format!("{}session/{session}/url", slot.webdriver_url))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    assert_eq!(
        sessions["value"]["error"], "invalid session id",
        "{sessions}"
    );
    fleet.shutdown().await.unwrap();
    assert!(reqwest::get(format!("{}status", slot.webdriver_url))
        .await
        .is_err());
    server.abort();
}
