//! Churn with real browsers: viewers behind home routers on refsite's live video leave after
//! the watch time their scenario draws, close their sessions cleanly, and new viewers with
//! new indices (and new slots) take their places at once; one viewer arrives late. The raw
//! data and the report count them, and no slot of any of them is left. Needs root, iproute2,
//! nftables, chromium, chromium-driver, ffmpeg and web/.

use serde_json::Value;
use viewerfleet::model::rawdata::{read_jsonl, ViewerEvent, ViewerEventKind, VIEWER_EVENTS};

#[test]
fn churn_replaces_viewers_on_schedule_and_the_report_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("churn.yaml");
    std::fs::write(
        &scenario,
        "name: churn-real\n\
         target: {kind: refsite, video: live, metrics_interval: 5s}\n\
         viewers:\n  count: 3\n  ramp: 4s\n\
         \x20 networks: [{share: 1, profile: {download_kbps: 20000, upload_kbps: 5000}, nat: home, name: home}]\n\
         \x20 churn:\n    watch:\n      durations: [{watch: 20s, share: 0.5}, {watch: end, share: 0.5}]\n    late_share: 0.34\n    seed: 3\n\
         duration: 80s\nsampling_interval: 2s\nfleet: {kind: netns}\n",
    )
    .unwrap();
    let plan = viewerfleet::model::scenario::load(&scenario, &Default::default()).unwrap();
    let churn = plan.churn.clone().unwrap();
    let out = dir.path().join("run");
    let output = assert_cmd::Command::cargo_bin("viewerfleet")
        .unwrap()
        .args(["--quiet", "run"])
        .arg(&scenario)
        .arg("--out")
        .arg(&out)
        .timeout(std::time::Duration::from_secs(600))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "run failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let events: Vec<ViewerEvent> = read_jsonl(&out.join(VIEWER_EVENTS)).unwrap().records;
    let of = |kind: ViewerEventKind| events.iter().filter(move |e| e.event == kind);
    let playing_at = |viewer: u32| {
        of(ViewerEventKind::Playing)
            .find(|e| e.viewer == viewer)
            .map(|e| e.t)
    };
    // On schedule: every viewer that left had watched what its draw said, give or take a
    // sample; every viewer whose draw was shorter than what was left of the run did leave.
    let left: Vec<&ViewerEvent> = of(ViewerEventKind::Left).collect();
    assert!(!left.is_empty(), "nobody left: {events:#?}");
    for l in &left {
        let watched = l.t - playing_at(l.viewer).unwrap();
        let drawn = churn.watch_for(l.viewer).unwrap().as_secs_f64();
        assert!(
            (watched - drawn).abs() < 2.5,
            "viewer {} watched {watched:.1} s of {drawn} s",
            l.viewer
        );
    }
    for p in of(ViewerEventKind::Playing) {
        if let Some(drawn) = churn.watch_for(p.viewer) {
            if p.t + drawn.as_secs_f64() < 70.0 {
                assert!(
                    left.iter().any(|l| l.viewer == p.viewer),
                    "viewer {} should have left",
                    p.viewer
                );
            }
        }
    }
    // Each leaver was replaced at once by a viewer with a new index.
    let replacements: Vec<&ViewerEvent> = of(ViewerEventKind::Creating)
        .filter(|e| {
            e.reason
                .as_deref()
                .is_some_and(|r| r.starts_with("replaces viewer"))
        })
        .collect();
    for l in &left {
        let r = replacements.iter().find(|r| {
            r.reason.as_deref()
                == Some(&format!(
                    "replaces viewer {}, who left (viewers.churn)",
                    l.viewer
                ))
        });
        if let Some(r) = r {
            assert!(r.viewer >= 3 && r.t - l.t < 5.0, "{r:?} after {l:?}");
        } else {
            assert!(
                l.t > 70.0,
                "viewer {} left at {} and was not replaced",
                l.viewer,
                l.t
            );
        }
    }
    assert!(
        replacements.iter().any(|r| playing_at(r.viewer).is_some()),
        "no replacement played"
    );
    // The late viewer arrived after the ramp.
    let late = plan.late_arrivals();
    assert_eq!(late.len(), 1, "{late:?}");
    let (late_viewer, _) = late.iter().next().unwrap();
    let first_creating = of(ViewerEventKind::Creating)
        .find(|e| e.viewer == *late_viewer)
        .unwrap();
    let ramp_end = of(ViewerEventKind::Creating)
        .map(|e| e.t)
        .fold(f64::MAX, f64::min)
        + 4.0;
    assert!(
        first_creating.t > ramp_end + 5.0,
        "late viewer {late_viewer} came at {}",
        first_creating.t
    );
    // The report counts them.
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let c = &report["churn"];
    assert_eq!(c["left"].as_u64().unwrap() as usize, left.len(), "{c}");
    assert_eq!(
        c["replacements"].as_u64().unwrap() as usize,
        replacements.len(),
        "{c}"
    );
    assert_eq!(c["late"], 1, "{c}");
    println!("churn: {c}");
    // Every slot, the replacements' included, is gone.
    let node = events.iter().find_map(|e| e.node.clone()).unwrap();
    let group = &node[..=node.rfind('-').unwrap()];
    let left_behind = crate::support::internet::leftovers(group);
    assert!(left_behind.is_empty(), "left behind: {left_behind:?}");
}
