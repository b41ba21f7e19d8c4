//! Light peers (`swarm.light_peers`) in a real `viewerfleet run` on this machine: refsite's
//! live stream, one real viewer in Chromium, and light peers that run the player page's own
//! P2P engine (web/light.js) in Node.js host processes (`swarm.runtime: node`) or in
//! Chromium pages (`browser`, the default). Checks that P2P bytes flow both ways
//! between the real viewer and the light peers, that their figures add up to what the origin
//! sent and what the exporter and the tracker saw, and that SIGTERM releases every page and
//! host process. On the `netns` fleet a Node.js host runs in its page's namespace.
//!
//! The swarm run (1 viewer + 3 light peers in Node.js, 75 s) is shared by the first three
//! tests: it is run once, by whichever of them comes first.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use viewerfleet::model::rawdata::{
    read_jsonl, LightSample, RunEvent, RunEventKind, ViewerSample, LIGHT_SAMPLES, RUN_EVENTS,
};

use crate::support::process::{kill, start_run, wait_for_line, wait_released};
use crate::support::raw_run::RawRun;

/// A live scenario with one real viewer and `light_peers` light peers, `per_page` a page.
///
/// No network profile, on purpose: under the 2000/300 kbit/s, 500 ms http-only throttle of
/// scenarios/local/live-normal.yaml the real player settles several seconds further behind the
/// live edge than light peers on their own (three hand runs, before light peers followed the
/// real viewers' latency), so it mostly downloads from them. Unthrottled, it plays level with
/// them, so segments flow both ways in every run; the light pages' own throttle is not what
/// these tests are about.
fn scenario(
    dir: &Path,
    name: &str,
    light_peers: u32,
    per_page: u32,
    runtime: &str,
    duration: &str,
) -> PathBuf {
    let text = format!(
        "name: {name}\ntarget:\n  kind: refsite\n  video: live\n  latency: normal\n  metrics_interval: 2s\nviewers:\n  count: 1\n  ramp: 4s\nswarm:\n  light_peers: {light_peers}\n  per_page: {per_page}\n  runtime: {runtime}\nduration: {duration}\nsampling_interval: 1s\nsteady_window: 20s\nfleet:\n  kind: local\n"
    );
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, text).unwrap();
    path
}

fn run_events(out: &Path) -> Vec<RunEvent> {
    read_jsonl(&out.join(RUN_EVENTS)).unwrap().records
}

fn count(events: &[RunEvent], kind: RunEventKind) -> usize {
    events.iter().filter(|e| e.event == kind).count()
}

/// Each light peer's last read (its counters are cumulative since its page opened).
fn light_finals(out: &Path) -> BTreeMap<u32, LightSample> {
    let samples: Vec<LightSample> = read_jsonl(&out.join(LIGHT_SAMPLES)).unwrap().records;
    samples.into_iter().map(|s| (s.peer, s)).collect()
}

/// Light peers' summed final counter.
fn light_sum(finals: &BTreeMap<u32, LightSample>, field: impl Fn(&LightSample) -> u64) -> u64 {
    finals.values().map(field).sum()
}

/// The real viewer's (viewer 0's) highest count of a cumulative counter.
fn viewer_final(raw: &RawRun, field: impl Fn(&ViewerSample) -> u64) -> u64 {
    raw.samples
        .iter()
        .filter(|s| s.viewer == 0)
        .map(field)
        .max()
        .unwrap_or(0)
}

const SWARM_LIGHT_PEERS: u32 = 3;

/// The shared swarm run, as it ended.
struct SwarmRun {
    out: PathBuf,
    exit_code: Option<i32>,
    /// Tagged processes still running 20 s after the run exited.
    left: Vec<(u32, String)>,
    took: Duration,
    /// Local UDP ports of the light peers' range (`LIGHT_PORT_BASE` + peer), with how many
    /// reads of the machine's sockets during the run found each bound.
    light_ports_seen: BTreeMap<u16, u32>,
}

/// 1 real viewer + 3 light peers in one page, 75 s (about 85 s with start and teardown).
/// Its folder stays in the target's temporary folder for a look after a failure.
fn swarm_run() -> &'static SwarmRun {
    static RUN: OnceLock<SwarmRun> = OnceLock::new();
    RUN.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("light-peers-swarm");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("run");
        let tag = format!("light-swarm-{}", std::process::id());
        let began = Instant::now();
        let path = scenario(&dir, "light-swarm", SWARM_LIGHT_PEERS, 3, "node", "75s");
        let mut child = start_run(&path, &out, &tag);
        // Until the run exits: which of the light peers' UDP ports are bound.
        let mut light_ports_seen = BTreeMap::new();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            for port in bound_udp_ports() {
                if (LIGHT_PORT_BASE..LIGHT_PORT_BASE + SWARM_LIGHT_PEERS as u16).contains(&port) {
                    *light_ports_seen.entry(port).or_insert(0) += 1;
                }
            }
            std::thread::sleep(Duration::from_millis(250));
        };
        let took = began.elapsed();
        let left = wait_released(&tag, Duration::from_secs(20));
        eprintln!("light-peer swarm run: {took:?}, in {}", out.display());
        SwarmRun {
            out,
            exit_code: status.code(),
            left,
            took,
            light_ports_seen,
        }
    })
}

/// The UDP port a Node.js host gives light peer 0 (light-host/host.mjs: peer n, base + n).
const LIGHT_PORT_BASE: u16 = 20000;

/// Local ports of this machine's UDP sockets (IPv4 and IPv6), as the kernel lists them.
fn bound_udp_ports() -> Vec<u16> {
    ["/proc/net/udp", "/proc/net/udp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|text| {
            text.lines()
                .skip(1)
                .filter_map(|line| {
                    let local = line.split_whitespace().nth(1)?;
                    u16::from_str_radix(local.rsplit(':').next()?, 16).ok()
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Each light peer's connections share one UDP port of its own for the whole run (libjuice's
/// mux, what makes a host cheaper), while P2P flows (the test below): the host's brief probe
/// of a port at start-up cannot be read this many times.
#[test]
fn each_light_peer_in_node_holds_one_udp_port_of_its_own() {
    let run = swarm_run();
    assert_eq!(run.exit_code, Some(0), "run failed: {}", run.out.display());
    for peer in 0..SWARM_LIGHT_PEERS as u16 {
        let port = LIGHT_PORT_BASE + peer;
        let seen = run.light_ports_seen.get(&port).copied().unwrap_or(0);
        assert!(
            seen >= 20,
            "light peer {peer}'s port {port} was bound in {seen} reads of the machine's UDP sockets (all: {:?})",
            run.light_ports_seen
        );
    }
}

#[test]
fn p2p_flows_both_ways_between_light_peers_and_a_real_viewer() {
    let run = swarm_run();
    assert_eq!(run.exit_code, Some(0), "run failed: {}", run.out.display());
    assert!(run.left.is_empty(), "left running: {:?}", run.left);
    let events = run_events(&run.out);
    assert_eq!(
        count(&events, RunEventKind::LightStarted),
        1,
        "one light_started per page: {events:?}"
    );
    assert_eq!(count(&events, RunEventKind::LightFailed), 0, "{events:?}");
    assert_eq!(events.last().unwrap().event, RunEventKind::Finished);

    let finals = light_finals(&run.out);
    assert_eq!(
        finals.keys().copied().collect::<Vec<_>>(),
        (0..SWARM_LIGHT_PEERS).collect::<Vec<_>>(),
        "every light peer was read"
    );
    for (peer, s) in &finals {
        assert!(s.playing, "light peer {peer} never played: {s:?}");
        assert_eq!(s.group, 0, "one page holds all three");
    }

    // With a single real viewer, every P2P byte it downloaded came from a light peer, and
    // every byte it uploaded went to one.
    let raw = RawRun::read(&run.out);
    assert_eq!(raw.playing(), 1, "the real viewer played");
    let viewer_down = viewer_final(&raw, |s| s.p2p_down_bytes);
    let viewer_up = viewer_final(&raw, |s| s.p2p_up_bytes);
    let light_down = light_sum(&finals, |s| s.p2p_down_bytes);
    let light_up = light_sum(&finals, |s| s.p2p_up_bytes);
    eprintln!(
        "real viewer P2P down {viewer_down} B, up {viewer_up} B; light peers P2P down {light_down} B, up {light_up} B ({:?})",
        run.took
    );
    assert!(
        viewer_down > 0,
        "the real viewer got nothing from light peers"
    );
    assert!(viewer_up > 0, "the real viewer sent nothing to light peers");
    assert!(light_down > 0, "light peers downloaded nothing over P2P");
    assert!(light_up > 0, "light peers uploaded nothing over P2P");

    // Light peers follow the real viewer's distance to the live edge: none stands closer to
    // the edge than it by more than a read interval and the hold's slack allow.
    let mut viewer_latency: Vec<f64> = raw
        .samples
        .iter()
        .filter(|s| s.viewer == 0 && s.playing)
        .filter_map(|s| s.live_latency_s)
        .collect();
    assert!(
        viewer_latency.len() >= 10,
        "the real viewer's reads say its live latency: {viewer_latency:?}"
    );
    let recent = viewer_latency.split_off(viewer_latency.len() - 10);
    let lowest = recent.iter().copied().fold(f64::INFINITY, f64::min);
    for (peer, s) in &finals {
        let latency = s
            .live_latency_s
            .unwrap_or_else(|| panic!("light peer {peer}'s last read has no live latency: {s:?}"));
        assert!(
            latency >= lowest - 2.0,
            "light peer {peer} stands {latency:.1} s behind the edge, the real viewer {recent:?}"
        );
    }
}

#[test]
fn a_light_peers_figures_match_the_origins_the_exporters_and_the_trackers() {
    let run = swarm_run();
    assert_eq!(run.exit_code, Some(0), "run failed: {}", run.out.display());
    let raw = RawRun::read(&run.out);
    let finals = light_finals(&run.out);

    // HTTP: what the origin sent (refsite's ground truth) against what the real viewer and
    // the light peers counted. Players count live HTTP 1–4% below the origin (requests the
    // origin served but the page aborted or had not finished), and the origin's last scrape
    // comes up to ~1 s before the pages' last reads, in which the swarm may fetch one or two
    // more 160 kB segments (2–4% of the ~8 MB of a run). 10% holds both with room; a light
    // peers' HTTP missing from either side would be a gap of 40–90%.
    let origin = raw.exporter_max("refsite_origin_segment_bytes_total");
    let viewer_http = viewer_final(&raw, |s| s.http_down_bytes);
    let light_http = light_sum(&finals, |s| s.http_down_bytes);
    let counted = (viewer_http + light_http) as f64;
    eprintln!(
        "origin {origin} B of segments; real viewer HTTP {viewer_http} B + light peers' {light_http} B = {counted} B ({:+.2}%)",
        (counted - origin) * 100.0 / origin
    );
    assert!(origin > 0.0 && light_http > 0, "no HTTP from the origin");
    assert!(
        (counted - origin).abs() <= 0.10 * origin,
        "players + light peers counted {counted} B of HTTP, the origin sent {origin} B"
    );
    // The report reconciles the same way, with the light peers' bytes in it.
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.out.join("report.json")).unwrap())
            .unwrap();
    let rec = &report["http_reconciliation"];
    assert!(rec["light_bytes"].as_u64().unwrap_or(0) > 0, "{rec}");
    let rest = rec["rest_share"].as_f64().unwrap();
    assert!(rest.abs() <= 0.10, "the report's unexplained rest: {rec}");
    // The Node.js host's CPU and memory were measured, as a browser's are.
    let cost = &report["light"]["host_cost"];
    assert!(
        cost["cores"].as_f64().unwrap_or(0.0) > 0.0
            && cost["pss_mean_bytes"].as_f64().unwrap_or(0.0) > 0.0,
        "the light host's cost: {cost}"
    );

    // The exporter: light peers post PeerTube's playback reports as players do. Reports are
    // deltas every metrics_interval (2 s) and scraped every 2 s, so the exporter trails the
    // pages' own counters by up to ~4 s of a 75 s run, and it is never ahead of them.
    let checks = [
        (
            "peertube_playback_http_downloaded_bytes_total",
            viewer_http,
            light_http,
        ),
        (
            "peertube_playback_p2p_downloaded_bytes_total",
            viewer_final(&raw, |s| s.p2p_down_bytes),
            light_sum(&finals, |s| s.p2p_down_bytes),
        ),
        (
            "peertube_playback_p2p_uploaded_bytes_total",
            viewer_final(&raw, |s| s.p2p_up_bytes),
            light_sum(&finals, |s| s.p2p_up_bytes),
        ),
    ];
    for (metric, viewer, light) in checks {
        let exported = raw.exporter_max(metric);
        let pages = (viewer + light) as f64;
        eprintln!("{metric}: exporter {exported}, pages {viewer} + {light} (light)");
        assert!(
            exported >= 0.85 * pages && exported <= 1.02 * pages,
            "{metric}: the exporter has {exported}, the real viewer {viewer} and the light peers {light}"
        );
        assert!(
            exported >= viewer as f64 + 0.5 * light as f64,
            "{metric}: the exporter has {exported}, barely more than the real viewer's {viewer}: light peers' reports missing"
        );
    }

    // The tracker saw every member of the swarm: the real viewer and each light peer.
    let tracker = raw.exporter_max("refsite_tracker_peers");
    assert_eq!(
        tracker,
        f64::from(1 + SWARM_LIGHT_PEERS),
        "the tracker's most peers"
    );
}

#[test]
fn sigterm_mid_run_releases_every_light_host_process() {
    sigterm_mid_run_releases_every_page("node");
}

#[test]
fn sigterm_mid_run_releases_every_light_browser_page() {
    sigterm_mid_run_releases_every_page("browser");
}

/// 1 viewer + 4 light peers in two pages of `runtime`, stopped by SIGTERM once both play.
fn sigterm_mid_run_releases_every_page(runtime: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let tag = format!("light-sigterm-{runtime}-{}", std::process::id());
    let began = Instant::now();
    let mut child = start_run(
        &scenario(dir.path(), "light-term", 4, 2, runtime, "5m"),
        &out,
        &tag,
    );
    // Both pages hold playing peers (so WebRTC connections are open) before the signal.
    let samples = out.join(LIGHT_SAMPLES);
    let deadline = Instant::now() + Duration::from_secs(240);
    for group in [0, 1] {
        let playing = wait_for_line(
            &samples,
            deadline.saturating_duration_since(Instant::now()),
            |s| s["group"] == group && s["playing"] == true,
        );
        assert!(playing, "no light peer of page {group} played within 240 s");
    }
    kill(&child, libc::SIGTERM);
    let status = child.wait().unwrap();
    eprintln!("SIGTERM run: {:?}", began.elapsed());
    assert_eq!(status.code(), Some(143));
    let events = run_events(&out);
    let last = events.last().unwrap();
    assert_eq!(last.event, RunEventKind::Interrupted, "{events:?}");
    assert_eq!(last.detail.as_deref(), Some("SIGTERM"));
    assert_eq!(count(&events, RunEventKind::LightStarted), 2, "{events:?}");
    assert!(
        events
            .iter()
            .filter(|e| e.event == RunEventKind::LightStarted)
            .all(|e| e
                .detail
                .as_deref()
                .unwrap_or("")
                .contains(&format!(" in {runtime} "))),
        "every page ran in {runtime}: {events:?}"
    );
    assert_eq!(count(&events, RunEventKind::LightFailed), 0, "{events:?}");
    let finals = light_finals(&out);
    assert_eq!(finals.len(), 4, "every light peer was read: {finals:?}");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    assert!(manifest["exit_status"]
        .as_str()
        .unwrap()
        .contains("SIGTERM"));
    assert_eq!(manifest["plan"]["light"]["runtime"], runtime, "{manifest}");
    let left = wait_released(&tag, Duration::from_secs(20));
    assert!(left.is_empty(), "left running after SIGTERM: {left:?}");
}

/// On the `netns` fleet a Node.js host runs in its page's namespace (`ip netns exec`); under
/// tc each light peer has a page, an address and a tc-shaped link of its own, joins the
/// viewer's swarm, and the namespaces and processes are gone after the run.
#[test]
fn node_light_peers_run_in_their_pages_namespace_on_the_netns_fleet() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let tag = format!("light-netns-{}", std::process::id());
    let path = dir.path().join("netns.yaml");
    std::fs::write(
        &path,
        "name: light-netns\ntarget:\n  kind: refsite\n  video: live\n  latency: normal\n  metrics_interval: 2s\nviewers:\n  count: 1\n  ramp: 4s\n  network:\n    download_kbps: 20000\n    upload_kbps: 20000\n    apply: tc\nswarm:\n  light_peers: 2\n  runtime: node\nduration: 50s\nsampling_interval: 1s\nsteady_window: 20s\nfleet:\n  kind: netns\n",
    )
    .unwrap();
    let mut child = start_run(&path, &out, &tag);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "run failed: {}", out.display());
    let left = wait_released(&tag, Duration::from_secs(20));
    assert!(left.is_empty(), "left running: {left:?}");
    let events = run_events(&out);
    let started: Vec<&str> = events
        .iter()
        .filter(|e| e.event == RunEventKind::LightStarted)
        .filter_map(|e| e.detail.as_deref())
        .collect();
    // Under tc one light peer per page: two hosts, each in a namespace (and link) of its own.
    assert_eq!(started.len(), 2, "{events:?}");
    // "light page 0 (peer 0) in node on <namespace> (<its address>)"
    let slots: std::collections::BTreeSet<&str> = started
        .iter()
        .filter_map(|d| d.split(" in node on ").nth(1))
        .collect();
    assert_eq!(
        slots.len(),
        2,
        "each host ran in a slot with an address of its own: {started:?}"
    );
    assert!(slots.iter().all(|s| s.contains('(')), "{started:?}");
    let finals = light_finals(&out);
    assert_eq!(finals.len(), 2, "{finals:?}");
    for (peer, s) in &finals {
        assert!(s.playing, "light peer {peer} never played: {s:?}");
        assert!(s.http_down_bytes + s.p2p_down_bytes > 0, "{peer}: {s:?}");
    }
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    let shaping = manifest["plan"]["light"]["shaping"].as_str().unwrap_or("");
    assert!(shaping.contains("its own tc-shaped link"), "{shaping}");
    assert_eq!(manifest["plan"]["light"]["per_page"], 1);
    assert_eq!(manifest["plan"]["light"]["runtime"], "node");
}
