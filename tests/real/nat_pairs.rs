//! Two real viewers behind emulated NATs on refsite's live video (netns fleet with
//! `viewers.networks`, IPv4 only so IPv6 cannot carry them around their NATs): behind home
//! routers they find each other through server-reflexive candidates from refsite's STUN
//! server and share over P2P; behind symmetric NATs, with no TURN relay, they never connect
//! and the report's connectivity section says so. Needs root, iproute2, nftables, chromium,
//! chromium-driver, ffmpeg and web/.

use serde_json::Value;
use std::path::Path;
use viewerfleet::report::connectivity::PAIR_NOT_READ;

fn scenario(dir: &Path, nat: &str) -> std::path::PathBuf {
    let path = dir.join(format!("{nat}.yaml"));
    std::fs::write(
        &path,
        format!(
            "name: {nat}-pair\n\
             target: {{kind: refsite, video: live, metrics_interval: 5s}}\n\
             viewers:\n  count: 2\n  ramp: 5s\n  networks:\n\
             \x20   - {{share: 1, profile: {{download_kbps: 20000, upload_kbps: 5000}}, nat: {nat}, stack: ipv4, name: {nat}}}\n\
             duration: 70s\n\
             sampling_interval: 2s\n\
             fleet: {{kind: netns}}\n"
        ),
    )
    .unwrap();
    path
}

/// Runs the pair and returns the report's connectivity section and the run folder.
fn run_pair(nat: &str) -> (Value, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = assert_cmd::Command::cargo_bin("viewerfleet")
        .unwrap()
        .args(["--quiet", "run"])
        .arg(scenario(dir.path(), nat))
        .arg("--out")
        .arg(&out)
        .timeout(std::time::Duration::from_secs(600))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "run failed: {stderr}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let connectivity = report["connectivity"].clone();
    assert!(
        connectivity.is_object(),
        "no connectivity section: {report}"
    );
    // Both viewers played, each behind its own router.
    let networks = std::fs::read_to_string(out.join("raw/viewer_networks.jsonl")).unwrap();
    assert_eq!(networks.lines().count(), 2, "{networks}");
    assert!(
        networks.contains(&format!("\"nat\":\"{nat}\"")),
        "{networks}"
    );
    for line in networks.lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        let addresses = record["addresses"].as_array().unwrap();
        assert!(
            !addresses.is_empty() && addresses.iter().all(|a| !a.as_str().unwrap().contains(':')),
            "an IPv4-only viewer is seen at its NAT's IPv4 address only: {line}"
        );
    }
    // The viewers asked refsite's STUN server for their reflexive addresses.
    let exporter = std::fs::read_to_string(out.join("raw/exporter_samples.jsonl")).unwrap();
    let stun: f64 = exporter
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["sums"]["refsite_stun_binding_responses_total"].as_f64())
        .fold(0.0, f64::max);
    assert!(stun > 0.0, "refsite's STUN server answered nobody");
    // Nothing of the run is left: its slot group (routers included) is gone.
    let node = networks
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|v| v["node"].as_str().map(str::to_string))
        .unwrap();
    let group = &node[..=node.rfind('-').unwrap()];
    let left = crate::support::internet::leftovers(group);
    assert!(left.is_empty(), "left behind: {left:?}");
    (connectivity, dir)
}

fn pair<'a>(c: &'a Value, from: &str, to: &str) -> &'a Value {
    c["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["from"] == from && p["to"] == to)
        .unwrap_or_else(|| panic!("no {from} → {to} row: {c}"))
}

#[test]
fn two_viewers_behind_home_nats_connect_through_server_reflexive_candidates() {
    let (c, _dir) = run_pair("home");
    let p = pair(&c, "home", "home");
    assert!(p["established"].as_u64().unwrap() >= 1, "{c}");
    // Every connection whose selected pair the page read went over server-reflexive IPv4
    // candidates (a connection closed before its pair was read is `PAIR_NOT_READ`).
    let via = p["via"].as_object().unwrap();
    let read: Vec<&String> = via.keys().filter(|k| *k != PAIR_NOT_READ).collect();
    assert!(
        !read.is_empty()
            && read
                .iter()
                .all(|k| k.contains("srflx") && k.ends_with("ipv4")),
        "connected over something else than server-reflexive IPv4 candidates: {via:?}"
    );
    let class = &c["classes"][0];
    assert_eq!(class["viewers_connected"], 2, "{c}");
    assert!(class["p2p_bytes"].as_u64().unwrap() > 0, "{c}");
    println!("home pair: {}", serde_json::to_string(&c["pairs"]).unwrap());
}

#[test]
fn two_viewers_behind_symmetric_nats_never_connect_without_turn_and_the_report_says_so() {
    let (c, _dir) = run_pair("symmetric");
    let p = pair(&c, "symmetric", "symmetric");
    assert!(
        p["attempted"].as_u64().unwrap() >= 1,
        "they never even tried: {c}"
    );
    assert_eq!(p["established"], 0, "{c}");
    assert_eq!(c["classes"][0]["p2p_bytes"], 0, "{c}");
    let notes: Vec<&str> = c["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    assert!(
        notes.iter().any(
            |n| n.contains("symmetric viewers never connected to each other") && n.contains("TURN")
        ),
        "{notes:?}"
    );
    println!(
        "symmetric pair: {}",
        serde_json::to_string(&c["pairs"]).unwrap()
    );
}
