//! A whole run with the `netns` fleet: 4 viewers on refsite's live video, each in its own
//! slot with tc shaping. Refsite must see 4 distinct client addresses, the viewers must
//! share over P2P, and the manifest must say that P2P was shaped. Afterwards no slot of
//! the run is left. Needs root, iproute2, chromium, chromium-driver, ffmpeg and web/.

use std::collections::BTreeSet;
use std::path::Path;
use viewerfleet::model::rawdata::{
    read_jsonl, ExporterSample, Manifest, ViewerEvent, ViewerEventKind, ViewerSample,
    EXPORTER_SAMPLES, MANIFEST, VIEWER_EVENTS, VIEWER_SAMPLES,
};

fn run(scenario: &Path, out: &Path, viewers: u32, duration: &str) -> std::process::Output {
    assert_cmd::Command::cargo_bin("viewerfleet")
        .unwrap()
        .args(["--quiet", "run"])
        .arg(scenario)
        .arg("--out")
        .arg(out)
        .args([
            "--viewers",
            &viewers.to_string(),
            "--duration",
            duration,
            "--no-report",
        ])
        .timeout(std::time::Duration::from_secs(900))
        .output()
        .unwrap()
}

#[test]
fn four_viewers_in_slots_share_over_shaped_p2p() {
    let scenario =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/netns/live-normal-tc.yaml");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = run(&scenario, &out, 4, "75s");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "run failed: {stderr}");

    let manifest: Manifest =
        serde_json::from_str(&std::fs::read_to_string(out.join(MANIFEST)).unwrap()).unwrap();
    assert_eq!(
        manifest.fleet.kind,
        viewerfleet::model::kinds::FleetKind::Netns
    );
    assert!(manifest.fleet.own_address_per_viewer);
    assert!(manifest.fleet.p2p_shaped, "{:?}", manifest.fleet);
    assert!(
        manifest.fleet.shaping.contains("tc"),
        "{}",
        manifest.fleet.shaping
    );

    let events: Vec<ViewerEvent> = read_jsonl(&out.join(VIEWER_EVENTS)).unwrap().records;
    let addresses: BTreeSet<String> = events
        .iter()
        .filter(|e| e.event == ViewerEventKind::SessionCreated || e.address.is_some())
        .filter_map(|e| e.address.clone())
        .collect();
    assert_eq!(
        addresses.len(),
        4,
        "each viewer its own address: {addresses:?}"
    );
    let playing = events
        .iter()
        .filter(|e| e.event == ViewerEventKind::Playing)
        .count();
    assert_eq!(playing, 4, "{events:?}");

    // What the target itself saw: 4 distinct client addresses.
    let scrapes: Vec<ExporterSample> = read_jsonl(&out.join(EXPORTER_SAMPLES)).unwrap().records;
    let seen = scrapes
        .iter()
        .filter(|s| s.ok)
        .filter_map(|s| s.sums.get("refsite_viewers_seen_total").copied())
        .fold(0.0, f64::max);
    assert!(seen >= 4.0, "refsite saw {seen} distinct viewer addresses");

    // P2P happened, through the shaped links.
    let samples: Vec<ViewerSample> = read_jsonl(&out.join(VIEWER_SAMPLES)).unwrap().records;
    let p2p_down: u64 = (0..4)
        .filter_map(|v| {
            samples
                .iter()
                .filter(|s| s.viewer == v)
                .map(|s| s.p2p_down_bytes)
                .max()
        })
        .sum();
    assert!(p2p_down > 0, "no P2P bytes");

    // Nothing of the run is left: its slot group is gone.
    let node = events.iter().find_map(|e| e.node.clone()).unwrap();
    let group = &node[..=node.rfind('-').unwrap()];
    let namespaces = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&namespaces.stdout).contains(group),
        "slots of {group} left after the run"
    );
}
