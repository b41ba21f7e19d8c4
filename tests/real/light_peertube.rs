//! Light peers on a `peertube` target: refsite stands in for a PeerTube instance (it serves
//! PeerTube's `/api/v1/videos/{id}`, `/api/v1/config`, embed page, tracker and playback
//! reports), and the run treats it as one: no light page is asked of it; each page of light
//! peers opens the instance's own page and the controller loads the light peers' module
//! into it with the playlist, trackers and reporting the API names. One real viewer and
//! three light peers in one page, 60 s: P2P flows both ways between them (one swarm, the
//! playlist's URL as its id) and the light peers' playback reports reach the instance.

use crate::support::process::{start_run, wait_released};
use std::path::PathBuf;
use std::time::Duration;
use viewerfleet::model::kinds::VideoKind;
use viewerfleet::model::rawdata::{
    read_jsonl, LightSample, RunEvent, RunEventKind, LIGHT_SAMPLES, RUN_EVENTS,
};

use crate::support::raw_run::RawRun;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn light_peers_on_a_peertube_target_join_its_swarm_from_its_own_page() {
    let site = crate::support::refsite::start_live().await;
    let live = site.video(VideoKind::Live).unwrap().embed_url.clone();

    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("light-peertube");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let scenario = dir.join("light-peertube.yaml");
    std::fs::write(
        &scenario,
        format!(
            "name: light-peertube\ntarget:\n  kind: peertube\n  video: live\n  url: '{live}'\nviewers:\n  count: 1\n  ramp: 4s\nswarm:\n  light_peers: 3\n  per_page: 3\n  runtime: browser\nduration: 60s\nsampling_interval: 1s\nsteady_window: 20s\nfleet:\n  kind: local\n"
        ),
    )
    .unwrap();
    let out = dir.join("run");
    let tag = format!("light-peertube-{}", std::process::id());
    let (status, took, left) = {
        let (scenario, out, tag) = (scenario.clone(), out.clone(), tag.clone());
        tokio::task::spawn_blocking(move || {
            let began = std::time::Instant::now();
            let mut child = start_run(&scenario, &out, &tag);
            let status = child.wait().unwrap();
            (
                status,
                began.elapsed(),
                wait_released(&tag, Duration::from_secs(20)),
            )
        })
        .await
        .unwrap()
    };
    assert_eq!(status.code(), Some(0), "run failed: {}", out.display());
    assert!(left.is_empty(), "left running: {left:?}");

    let events: Vec<RunEvent> = read_jsonl(&out.join(RUN_EVENTS)).unwrap().records;
    let count = |kind| events.iter().filter(|e| e.event == kind).count();
    assert_eq!(count(RunEventKind::LightStarted), 1, "{events:?}");
    assert_eq!(count(RunEventKind::LightFailed), 0, "{events:?}");
    let samples: Vec<LightSample> = read_jsonl(&out.join(LIGHT_SAMPLES)).unwrap().records;
    let finals: std::collections::BTreeMap<u32, LightSample> =
        samples.into_iter().map(|s| (s.peer, s)).collect();
    assert_eq!(finals.len(), 3, "every light peer was read: {finals:?}");
    for (peer, s) in &finals {
        assert!(s.playing, "light peer {peer} never played: {s:?}");
    }
    // One swarm: with a single real viewer, its P2P bytes came from and went to light peers.
    let raw = RawRun::read(&out);
    assert_eq!(raw.playing(), 1, "the real viewer played");
    let viewer = |f: fn(&viewerfleet::model::rawdata::ViewerSample) -> u64| {
        raw.samples
            .iter()
            .filter(|s| s.viewer == 0)
            .map(f)
            .max()
            .unwrap_or(0)
    };
    let (viewer_down, viewer_up) = (viewer(|s| s.p2p_down_bytes), viewer(|s| s.p2p_up_bytes));
    let light_down: u64 = finals.values().map(|s| s.p2p_down_bytes).sum();
    let light_up: u64 = finals.values().map(|s| s.p2p_up_bytes).sum();
    eprintln!(
        "real viewer P2P down {viewer_down} B, up {viewer_up} B; light peers P2P down {light_down} B, up {light_up} B"
    );
    assert!(
        viewer_down > 0 && viewer_up > 0,
        "the real viewer and the light peers did not meet"
    );
    assert!(
        light_down > 0 && light_up > 0,
        "light peers exchanged nothing over P2P"
    );
    // The instance heard from the light peers as from a player: the real viewer, reporting
    // every 2 s, sent at most one report per 2 s of the run (plus a last one); more than that
    // came from the light peers.
    let reports: u64 = site
        .stats
        .render()
        .lines()
        .find_map(|l| l.strip_prefix("refsite_playback_reports_total "))
        .and_then(|v| v.trim().parse().ok())
        .expect("refsite_playback_reports_total on /metrics");
    eprintln!("playback reports: {reports}");
    let one_player = took.as_secs() / 2 + 1;
    assert!(
        reports > one_player,
        "{reports} playback reports in {took:?}, no more than one player sends: the light peers sent none"
    );
}
