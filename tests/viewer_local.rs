//! The viewer layer against a real Chromium through the local fleet's chromedriver: a page
//! with a `<video>` playing an ffmpeg-made clip. Checks first frame, stats reads, CDP
//! throttling, and that closing releases the browser.

use axum::{routing::get, Router};
use std::time::Duration;
use viewerfleet::fleet::local::{LocalFleet, LocalFleetSpec};
use viewerfleet::fleet::Fleet;
use viewerfleet::scenario::{NetworkProfile, ViewerPlan};
use viewerfleet::target::Target;
use viewerfleet::viewer::{Viewer, ViewerTimeouts};

struct ClipTarget {
    base: String,
}

impl Target for ClipTarget {
    fn viewer_url(&self, _p2p: bool) -> String {
        format!("{}/", self.base)
    }
    fn probe_script(&self) -> &'static str {
        viewerfleet::target::peertube::probe_script()
    }
    fn read_script(&self) -> &'static str {
        viewerfleet::target::peertube::read_script()
    }
    fn exporter_url(&self) -> Option<String> {
        None
    }
}

fn make_clip(dir: &std::path::Path) -> std::path::PathBuf {
    let out = dir.join("clip.mp4");
    let status = std::process::Command::new("ffmpeg")
        .args([
            "-loglevel",
            "error",
            "-f",
            "lavfi",
            "-i",
            "testsrc2=size=320x180:rate=25",
            "-t",
            "4",
        ])
        .args([
            "-c:v",
            "libx264",
            "-preset",
            "ultrafast",
            "-pix_fmt",
            "yuv420p",
            "-movflags",
            "+faststart",
        ])
        .arg(&out)
        .status()
        .expect("ffmpeg runs (apt-get install -y ffmpeg)");
    assert!(status.success());
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_viewer_plays_and_is_released() {
    let dir = tempfile::tempdir().unwrap();
    let clip = std::fs::read(make_clip(dir.path())).unwrap();
    // Fetched like an HLS player fetches segments, so Resource Timing sees it.
    let page = r#"<!doctype html><video autoplay muted playsinline></video>
<script>fetch('/clip.mp4').then(r => r.blob()).then(b => {
  document.querySelector('video').src = URL.createObjectURL(b); });</script>"#;
    let app = Router::new()
        .route("/", get(move || async move { axum::response::Html(page) }))
        .route(
            "/clip.mp4",
            get(move || {
                let clip = clip.clone();
                async move { ([("content-type", "video/mp4")], clip) }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let fleet = LocalFleet::start(&LocalFleetSpec::default()).await.unwrap();
    let plan = ViewerPlan {
        index: 0,
        start_after: Duration::ZERO,
        p2p: true,
        network: None,
    };
    let slot = fleet.open_viewer(&plan).await.unwrap();
    let viewer = Viewer::create(&slot, ViewerTimeouts::default())
        .await
        .unwrap();
    viewer
        .throttle_http(&NetworkProfile {
            download_kbps: Some(2000),
            upload_kbps: Some(300),
            latency_ms: Some(50),
            apply: None,
        })
        .await
        .expect("CDP throttling is accepted by chromedriver");
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
    assert_eq!(stats.http_source, "resource-timing");
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
