//! A whole run with the `netns` fleet: 4 viewers on refsite's live video, each in its own
//! slot with tc shaping. Refsite must see 4 distinct client addresses, the viewers must
//! share over P2P, and the manifest must say that P2P was shaped. Afterwards no slot of
//! the run is left. Needs root, iproute2, chromium, chromium-driver, ffmpeg and web/.

use crate::support::raw_run::RawRun;
use std::collections::BTreeSet;
use std::path::Path;
use viewerfleet::model::rawdata::{
    read_jsonl, Manifest, ViewerEvent, ViewerEventKind, MANIFEST, VIEWER_EVENTS,
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

    let raw = RawRun::read(&out);
    let addresses: BTreeSet<String> = raw
        .events
        .iter()
        .filter(|e| e.event == ViewerEventKind::SessionCreated || e.address.is_some())
        .filter_map(|e| e.address.clone())
        .collect();
    assert_eq!(
        addresses.len(),
        4,
        "each viewer its own address: {addresses:?}"
    );
    assert_eq!(raw.playing(), 4, "{:?}", raw.events);

    // What the target itself saw: 4 distinct client addresses.
    let seen = raw.exporter_max("refsite_viewers_seen_total");
    assert!(seen >= 4.0, "refsite saw {seen} distinct viewer addresses");

    // P2P happened, through the shaped links.
    assert!(raw.p2p_down_bytes(4) > 0, "no P2P bytes");

    // Nothing of the run is left: its slot group is gone.
    let node = raw.events.iter().find_map(|e| e.node.clone()).unwrap();
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

/// Reads `tc qdisc show` of a device, in a namespace or in the root one.
fn qdiscs(netns: Option<&str>, dev: &str) -> String {
    let output = match netns {
        Some(ns) => std::process::Command::new("ip")
            .args(["netns", "exec", ns, "tc", "qdisc", "show", "dev", dev])
            .output(),
        None => std::process::Command::new("tc")
            .args(["qdisc", "show", "dev", dev])
            .output(),
    };
    String::from_utf8_lossy(&output.unwrap().stdout).into_owned()
}

#[test]
fn two_viewers_per_browser_share_a_slot_its_address_and_a_link_of_twice_the_profile() {
    use std::io::BufRead;
    let scenario =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/netns/live-normal-tc.yaml");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_viewerfleet"))
        .args(["--quiet", "run"])
        .arg(&scenario)
        .arg("--out")
        .arg(&out)
        .args([
            "--viewers",
            "4",
            "--per-browser",
            "2",
            "--duration",
            "75s",
            "--no-report",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // While it runs: the first browser's slot is shaped at 2 × 2000/300 kbit/s.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let node = loop {
        let node = read_jsonl::<ViewerEvent>(&out.join(VIEWER_EVENTS))
            .ok()
            .and_then(|c| c.records.into_iter().find_map(|e| e.node));
        if let Some(node) = node {
            break node;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no viewer reached its slot"
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    };
    let upload = qdiscs(Some(&node), "eth0");
    let download = qdiscs(None, &format!("{node}h"));
    let stderr: Vec<String> = std::io::BufReader::new(child.stderr.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .collect();
    let status = child.wait().unwrap();
    assert!(status.success(), "run failed: {}", stderr.join("\n"));
    assert!(
        upload.contains("rate 600Kbit"),
        "upload of the shared slot: {upload}"
    );
    assert!(
        download.contains("rate 4Mbit"),
        "download of the shared slot: {download}"
    );

    let manifest: Manifest =
        serde_json::from_str(&std::fs::read_to_string(out.join(MANIFEST)).unwrap()).unwrap();
    assert!(!manifest.fleet.own_address_per_viewer);
    let packing = manifest
        .fleet
        .packing
        .clone()
        .expect("the manifest says viewers shared");
    assert_eq!(
        (
            packing.per_browser,
            packing.viewers_per_address,
            packing.viewers_per_link
        ),
        (2, Some(2), Some(2)),
        "{packing:?}"
    );
    assert_eq!(packing.link.as_deref(), Some("4000/600 kbit/s"));
    assert!(
        manifest
            .fleet
            .notes
            .iter()
            .any(|n| n.contains("each address is seen by 2 viewers")),
        "{:?}",
        manifest.fleet.notes
    );

    // Two browsers, two addresses; each pair of viewers from one of them.
    let raw = RawRun::read(&out);
    let address_of = |viewer: u32| {
        raw.events
            .iter()
            .find(|e| e.viewer == viewer && e.address.is_some())
            .and_then(|e| e.address.clone())
            .unwrap()
    };
    assert_eq!(address_of(0), address_of(1));
    assert_eq!(address_of(2), address_of(3));
    assert_ne!(address_of(0), address_of(2));
    assert_eq!(raw.playing(), 4, "{:?}", raw.events);
    assert_eq!(
        raw.exporter_max("refsite_viewers_seen_total"),
        2.0,
        "refsite saw two client addresses"
    );
    assert!(raw.p2p_down_bytes(4) > 0, "no P2P bytes");

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

/// `(uid, cmdline)` of every Chromium browser process (not its helpers, not the wrapper
/// that is about to exec it) whose command line contains `needle`.
fn browsers_with(needle: &str) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let dir = entry.path();
        let Ok(cmdline) = std::fs::read(dir.join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let program = cmdline.split(' ').next().unwrap_or("");
        if !cmdline.contains(needle)
            || !program.ends_with("/chromium")
            || cmdline.contains("--type=")
        {
            continue;
        }
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        let uid = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|u| u.parse().ok());
        if let Some(uid) = uid {
            found.push((uid, cmdline));
        }
    }
    found
}

#[test]
fn browsers_in_slots_run_as_their_own_user_with_chromiums_sandbox() {
    let scenario =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/netns/live-normal-tc.yaml");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_viewerfleet"))
        .args(["--quiet", "run"])
        .arg(&scenario)
        .arg("--out")
        .arg(&out)
        .args(["--viewers", "2", "--duration", "40s", "--no-report"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The viewers' browsers, found by their profile folders (named after the controller).
    let profile = format!("viewerfleet-profile-{}-", child.id());
    let mut browsers = Vec::new();
    crate::support::poll::until(
        "the run's browsers",
        std::time::Duration::from_secs(120),
        || {
            browsers = browsers_with(&profile);
            browsers.len() >= 2 || child.try_wait().unwrap().is_some()
        },
    );
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "run failed: {stderr}");

    let user = std::process::Command::new("id")
        .args(["-u", "viewerfleet-browser"])
        .output()
        .unwrap();
    let uid: u32 = String::from_utf8_lossy(&user.stdout)
        .trim()
        .parse()
        .unwrap();
    assert!(!browsers.is_empty(), "no browser of the run was seen");
    for (owner, cmdline) in &browsers {
        assert_eq!(
            *owner, uid,
            "a browser not run as viewerfleet-browser: {cmdline}"
        );
        assert!(
            !cmdline.contains("--no-sandbox"),
            "a browser without Chromium's sandbox: {cmdline}"
        );
    }
    let manifest: Manifest =
        serde_json::from_str(&std::fs::read_to_string(out.join(MANIFEST)).unwrap()).unwrap();
    assert!(
        manifest
            .fleet
            .notes
            .iter()
            .any(|n| n.contains("viewerfleet-browser, of their own, with Chromium's sandbox")),
        "{:?}",
        manifest.fleet.notes
    );
}
