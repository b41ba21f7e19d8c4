//! Reports of runs with light peers (`swarm.light_peers`), from a crafted run folder on
//! disk: their reads are loaded (a cut-short last line tolerated), their bytes join the
//! swarm's figures but no viewer's, and the report has a section for them.

use crate::support::fixtures::copy_of;
use std::fmt::Write;
use std::path::Path;
use viewerfleet::report::{self, ReportSummary};

/// Adds two light peers on one page to a copy of `run-steady`: reads every 2 s from 2 to
/// 150 s, 10 kB/s HTTP, 30 kB/s P2P down and 20 kB/s up each, a page timer 1 ms late per
/// tick; the file's last line is cut short, as by a killed writer.
fn add_light_peers(dir: &Path) {
    let manifest_path = dir.join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
    manifest["plan"]["light"] =
        serde_json::json!({"peers": 2, "per_page": 2, "shaping": "none (loopback)"});
    std::fs::write(&manifest_path, manifest.to_string()).unwrap();
    let mut lines = String::new();
    for i in 1..=75u64 {
        let t = i * 2;
        for peer in 0..2 {
            let _ = writeln!(
                lines,
                r#"{{"t": {t}.0, "peer": {peer}, "group": 0, "http_down_bytes": {}, "p2p_down_bytes": {}, "p2p_up_bytes": {}, "peers": 3, "playing": true, "position_s": {t}.0, "segments_loaded": {i}, "segments_late": 0, "waited_ms": 0.0, "errors": 0, "lag": {{"ticks": {}, "late_ms": {}.0, "late_ticks": 0, "max_ms": 3.0, "hidden_ticks": 0}}}}"#,
                10_000 * t,
                30_000 * t,
                20_000 * t,
                8 * i,
                8 * i
            );
        }
    }
    lines.push_str(r#"{"t": 152.0, "peer": 0, "gro"#);
    std::fs::write(dir.join("raw/light_samples.jsonl"), lines).unwrap();
}

#[test]
fn light_peers_report_joins_the_swarm_not_the_viewers() {
    let (_plain, plain) = copy_of("run-steady");
    let without = report::write_report(&plain).unwrap();
    assert!(without.light.is_none());
    let (_tmp, dir) = copy_of("run-steady");
    add_light_peers(&dir);
    let s: ReportSummary = report::write_report(&dir).unwrap();

    let l = s.light.as_ref().expect("a light section");
    assert_eq!((l.planned, l.per_page), (Some(2), Some(2)));
    assert_eq!(
        (l.reported, l.started, l.groups, l.groups_judged),
        (2, 2, 1, 1)
    );
    assert!(l.starved_groups.is_empty());
    assert_eq!(l.all.http_bytes, 2 * 10_000 * 150);
    assert_eq!(l.all.p2p_bytes, 2 * 30_000 * 150);
    assert_eq!(l.all.p2p_uploaded_bytes, 2 * 20_000 * 150);
    assert_eq!(l.all.p2p_share, Some(0.75));
    let up = l.upload.unwrap();
    assert_eq!(
        (up.members, up.min_bytes, up.max_bytes),
        (2, 3_000_000, 3_000_000)
    );
    assert!(s
        .honesty
        .truncated_files
        .contains(&"raw/light_samples.jsonl".to_string()));

    // The players' table is the swarm's: the viewers' bytes and the light peers'.
    let (p, v) = (
        s.players.as_ref().unwrap(),
        without.players.as_ref().unwrap(),
    );
    assert_eq!(p.http_bytes, v.http_bytes + 3_000_000);
    assert_eq!(p.p2p_bytes, v.p2p_bytes + 9_000_000);
    let mbps = |a: Option<f64>, b: Option<f64>| a.unwrap() - b.unwrap();
    assert!((mbps(p.http_at_mbps, v.http_at_mbps) - 0.16).abs() < 1e-9);
    // The viewers' figures are theirs alone.
    assert_eq!(s.viewers, without.viewers);
    assert_eq!(s.qoe, without.qoe);
    assert_eq!(
        std::fs::read_to_string(dir.join("viewers.csv")).unwrap(),
        std::fs::read_to_string(plain.join("viewers.csv")).unwrap()
    );

    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("\n## Light peers\n"), "{md}");
    assert!(
        md.contains(
            "- Swarm: 5 viewers + 2 light peers started (6 viewers + 2 light peers planned)"
        ),
        "{md}"
    );
    assert!(md.contains("| light peers | 2 | 3.0 MB |"), "{md}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("<h2>Light peers</h2>"));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["light"]["all"]["http_bytes"], 3_000_000);
}
