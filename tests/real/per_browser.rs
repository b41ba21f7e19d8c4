//! Several viewers in one real Chromium (`viewers.per_browser`): three viewers of refsite's
//! live stream, each in its own BiDi user context and tab of one WebDriver session. Each
//! has its own stats, its own throttling (a latency for one, a rate for another, nothing
//! for the third, measured from inside each tab), its own P2P peer id (the tracker counts
//! three peers, and each viewer has peers); the decode lever holds in every tab; closing
//! one viewer leaves the others playing; at the end the session, its browser and its
//! profile are gone. Then `calibrate` with a packed profile writes its fidelity fields.
//! Needs chromium, chromium-driver, ffmpeg and web/ (`make web-deps`).

use crate::support::poll;
use futures::FutureExt;
use serde_json::{json, Value};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use viewerfleet::fleet::local::LocalFleet;
use viewerfleet::fleet::Fleet;
use viewerfleet::model::kinds::{Throttling, VideoKind};
use viewerfleet::model::scenario::fleet::LocalFleetPlan;
use viewerfleet::model::scenario::{BrowserPlan, LinkProfile, NetworkProfile, ViewerPlan};
use viewerfleet::refsite;
use viewerfleet::target::peertube::PeerTubeTarget;
use viewerfleet::target::{PlayerStats, Target};
use viewerfleet::viewer::{BrowserSetup, SharedBrowser, Viewer, ViewerTimeouts};

/// Times one GET from inside the viewer's page: `url` (relative to the page) or, with
/// `None`, the first media segment the page fetched.
const TIME_FETCH: &str = r#"
const done = arguments[arguments.length - 1];
const url = arguments[0] || performance.getEntriesByType('resource').map((e) => e.name).find((n) => n.endsWith('.ts'));
const t0 = performance.now();
fetch(url, { cache: 'no-store' }).then((r) => r.arrayBuffer())
  .then((b) => done({ ms: performance.now() - t0, bytes: b.byteLength }), (e) => done({ error: String(e) }));
"#;

async fn time_fetch(viewer: &Viewer, url: Option<&str>) -> (f64, u64) {
    let answer = viewer
        .execute_async(TIME_FETCH, vec![url.map_or(Value::Null, |u| json!(u))])
        .await
        .expect("the page runs the timing script");
    assert!(answer["error"].is_null(), "{answer}");
    (
        answer["ms"].as_f64().unwrap(),
        answer["bytes"].as_u64().unwrap(),
    )
}

fn profile(latency_ms: Option<u32>, download_kbps: Option<u32>) -> NetworkProfile {
    NetworkProfile {
        link: LinkProfile {
            download_kbps,
            upload_kbps: None,
            latency_ms,
        },
        apply: Some(Throttling::HttpOnly),
    }
}

/// Browsers still running with `profile_dir` in their command line.
fn browsers_with(profile_dir: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .filter(|cmd| String::from_utf8_lossy(cmd).contains(profile_dir))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn viewers_of_one_browser_have_their_own_stats_throttling_peers_and_teardown() {
    let site = crate::support::refsite::start_live().await;
    let live = site.video(VideoKind::Live).unwrap().embed_url.clone();
    let target = PeerTubeTarget::from_video_url(&live, None).unwrap();
    let fleet = LocalFleet::start(&LocalFleetPlan::default()).await.unwrap();

    let plans: Vec<ViewerPlan> = (0..3)
        .map(|index| ViewerPlan {
            index,
            start_after: Duration::ZERO,
            p2p: true,
            network: None,
            browser: 0,
            access: Default::default(),
        })
        .collect();
    let slot = fleet
        .open_browser(&BrowserPlan {
            index: 0,
            viewers: plans,
        })
        .await
        .unwrap();
    assert_eq!(slot.viewers, 3);
    let browser = SharedBrowser::create(&slot, ViewerTimeouts::default(), &BrowserSetup::project())
        .await
        .expect("a session with WebDriver BiDi");
    let session = browser.session_id.clone().unwrap();
    let profile_dir = browser.profile_dir().unwrap();
    let checks = async {
        // One viewer with 800 ms on every request, one at 1000 kbit/s, one free.
        let throttles = [
            Some(profile(Some(800), None)),
            Some(profile(None, Some(1000))),
            None,
        ];
        let mut viewers = Vec::new();
        for throttle in &throttles {
            let viewer = browser.open_viewer().await.expect("a tab of its own");
            if let Some(p) = throttle {
                viewer.throttle(p, &slot).await.unwrap();
            }
            viewer.open(&target, true).await.unwrap();
            viewers.push(viewer);
        }
        check_viewers(&target, &site, viewers, &session, &slot.webdriver_url).await;
    };
    let outcome = std::panic::AssertUnwindSafe(checks).catch_unwind().await;
    // Released whatever the checks said.
    browser.close().await;
    fleet.close_viewer(&slot).await;
    site.shutdown().await;
    if let Err(panic) = outcome {
        fleet.shutdown().await.unwrap();
        std::panic::resume_unwind(panic);
    }
    let answer: Value = reqwest::get(format!("{}session/{session}/url", slot.webdriver_url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["value"]["error"], "invalid session id", "{answer}");
    let dir = profile_dir.display().to_string();
    poll::value("the browser to exit", Duration::from_secs(20), || async {
        (browsers_with(&dir) == 0).then_some(())
    })
    .await;
    assert!(!profile_dir.exists(), "{dir} left behind");
    fleet.shutdown().await.unwrap();
}

async fn read(viewer: &Viewer, target: &dyn Target) -> PlayerStats {
    viewer.read(target).await.expect("stats of its own tab")
}

async fn check_viewers(
    target: &PeerTubeTarget,
    site: &refsite::RefsiteHandle,
    mut viewers: Vec<Viewer>,
    session: &str,
    webdriver_url: &str,
) {
    for (i, v) in viewers.iter().enumerate() {
        let ttff = v
            .wait_first_frame(target, Duration::from_millis(250))
            .await
            .unwrap_or_else(|e| panic!("viewer {i} plays: {e}"));
        assert!(ttff > 0.0);
    }
    // Throttling is per tab: the latency and the rate each bind in their own tab only.
    let small = "/api/v1/videos";
    let (latency_small, _) = time_fetch(&viewers[0], Some(small)).await;
    let (rate_small, _) = time_fetch(&viewers[1], Some(small)).await;
    let (free_small, _) = time_fetch(&viewers[2], Some(small)).await;
    assert!(
        latency_small >= 750.0,
        "800 ms latency in tab 0: {latency_small} ms"
    );
    assert!(
        rate_small < 600.0 && free_small < 600.0,
        "no latency elsewhere: {rate_small} / {free_small} ms"
    );
    let (rate_big, bytes) = time_fetch(&viewers[1], None).await;
    let (free_big, _) = time_fetch(&viewers[2], None).await;
    // 1000 kbit/s = 125 000 B/s.
    let expected_ms = bytes as f64 / 125.0;
    assert!(bytes > 50_000, "a live segment: {bytes} bytes");
    assert!(
        rate_big >= expected_ms * 0.8 && free_big < expected_ms * 0.5,
        "1000 kbit/s in tab 1 only: {rate_big} ms vs {free_big} ms for {bytes} bytes"
    );

    // Own P2P peers: the tracker sees three peer ids, and each viewer reaches the others.
    poll::value(
        "every viewer with a P2P peer",
        Duration::from_secs(90),
        || async {
            let mut all = true;
            for v in &viewers {
                all &= read(v, target).await.peers >= 1;
            }
            all.then_some(())
        },
    )
    .await;
    let (peers, swarms) = (
        site.stats.tracker_peers.load(Relaxed),
        site.stats.tracker_swarms.load(Relaxed),
    );
    assert_eq!((peers, swarms), (3, 1), "three peer ids in the live swarm");

    // Own stats: every viewer counts its own bytes, has the video track off, reports the
    // rendition from the player's level.
    let stats: Vec<PlayerStats> =
        futures::future::join_all(viewers.iter().map(|v| read(v, target))).await;
    for (i, s) in stats.iter().enumerate() {
        assert!(
            s.http_bytes + s.p2p_down_bytes > 100_000,
            "viewer {i}: {s:?}"
        );
        assert_eq!(s.video_track_off, Some(true), "viewer {i}: decode lever");
        assert_eq!(s.resolution, Some(240), "viewer {i}");
        assert!(
            s.segments.as_ref().is_some_and(|c| c.loaded > 0),
            "viewer {i}: {s:?}"
        );
    }

    // Closing one viewer leaves the others playing, in the same session.
    let closed = viewers.remove(0);
    closed.close().await;
    let handles: Value = reqwest::get(format!("{webdriver_url}session/{session}/window/handles"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        handles["value"].as_array().map(Vec::len),
        Some(2),
        "{handles}"
    );
    let before: Vec<f64> = futures::future::join_all(viewers.iter().map(|v| read(v, target)))
        .await
        .iter()
        .map(|s| s.current_time)
        .collect();
    poll::value(
        "the other viewers to play on",
        Duration::from_secs(30),
        || async {
            let now = futures::future::join_all(viewers.iter().map(|v| read(v, target))).await;
            now.iter()
                .zip(&before)
                .all(|(s, t)| s.playing && s.current_time >= t + 3.0)
                .then_some(())
        },
    )
    .await;
    poll::value(
        "the tracker to drop the closed viewer",
        Duration::from_secs(30),
        || async { (site.stats.tracker_peers.load(Relaxed) == 2).then_some(()) },
    )
    .await;
    for viewer in viewers {
        viewer.close().await;
    }
}

#[test]
fn calibrate_writes_its_fidelity_fields_for_a_packed_profile() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cal");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_viewerfleet"))
        .args([
            "--quiet",
            "calibrate",
            "--viewers",
            "2",
            "--video",
            "live",
            "--warmup",
            "3s",
            "--window",
            "20s",
            "--profiles",
            "packed",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("calibration.json")).unwrap())
            .unwrap();
    let rows = json["profiles"].as_array().unwrap();
    // The default profile is measured first even when not asked for: it is the reference.
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["profile"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["default", "packed"]);
    let packed = &rows[1];
    assert_eq!(packed["video"], "live");
    assert_eq!(packed["browsers"], 1, "two viewers in one browser");
    assert_eq!(packed["viewers_measured"], 2, "{packed}");
    assert_eq!(packed["video_track_off"], true);
    assert_eq!(packed["bytes_basis"], "window");
    assert!(packed["download_bytes_per_viewer"].as_f64().unwrap() > 100_000.0);
    assert!(packed["segments_per_viewer"].as_f64().unwrap() > 0.0);
    assert!(
        packed["renditions"]["240"].as_f64().unwrap() > 99.0,
        "{packed}"
    );
    assert!(packed["over_time"].as_array().unwrap().len() >= 4);
    let fidelity = &packed["fidelity"];
    assert_eq!(fidelity["against"], "default (round 1)");
    assert!(
        ["pass", "fail", "inconclusive"].contains(&fidelity["verdict"].as_str().unwrap()),
        "{fidelity}"
    );
    let rules: Vec<&str> = fidelity["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["rule"].as_str().unwrap())
        .collect();
    assert_eq!(rules, ["played", "bytes", "p2p_share", "stalls", "basis"]);
    for field in [
        "bytes_change_pct",
        "p2p_share_points",
        "segment_share_pct",
        "compared_s",
    ] {
        assert!(fidelity[field].is_number(), "{field}: {fidelity}");
    }
    // A 20 s window holds ten live segments: one is 10% of it, so bytes cannot decide.
    assert!(fidelity["segment_share_pct"].as_f64().unwrap() > 5.0);
    assert!(rows[0]["fidelity"].is_null(), "the reference has none");
    let md = std::fs::read_to_string(out.join("calibration.md")).unwrap();
    assert!(md.contains("| packed | 1 | 2/2 | 1 |"), "{md}");
}
