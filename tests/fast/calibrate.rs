//! A calibration's figures from a run folder's raw data: crafted samples with known
//! rates, read back as `calibrate` reads its own runs (CPU per viewer from the browsers' CPU
//! seconds over the window, PSS, bytes per viewer, P2P share), and the source of the
//! browsers' cost for each kind of fleet.

use std::path::Path;
use viewerfleet::calibrate::{from_run, BrowserProfile, BytesBasis};
use viewerfleet::model::rawdata::{
    self, HostSample, JsonlWriter, Manifest, NodeSample, PlanSummary, RunEvent, RunEventKind,
    SegmentCounts, ViewerEvent, ViewerEventKind, ViewerSample,
};
use viewerfleet::report::cost::{self, CostSource, Window};
use viewerfleet::report::RunData;

const INTERVAL: f64 = 2.0;
/// The window: 20 s ending at 40 s.
const MEASURE_AT: f64 = 40.0;
const WINDOW: f64 = 20.0;
const HTTP_BPS: f64 = 50_000.0;
const P2P_BPS: f64 = 25_000.0;

fn write<T: serde::Serialize>(dir: &Path, file: &str, records: &[T]) {
    let mut w = JsonlWriter::append(&dir.join(file)).unwrap();
    for r in records {
        w.write(r).unwrap();
    }
}

/// Two viewers of a local live run: pages opened at 3 s, playing at 8 and 9 s, read every
/// 2 s to the end (44 s) at 50 kB/s HTTP and 25 kB/s P2P, one 240p segment requested every
/// 2 s. The controller's own browsers use 0.3 cores and 500 MB over 10 processes; every
/// Chromium on the machine (another program's too) 1.3 cores and 2 GB.
fn crafted_run(dir: &Path) {
    let mut manifest = Manifest::example();
    manifest.ended_at = Some("end".into());
    manifest.plan = PlanSummary {
        viewers: 2,
        duration_s: 44.0,
        sampling_interval_s: INTERVAL,
        measure_at_s: MEASURE_AT - 1.0,
        steady_window_s: WINDOW,
        ..Default::default()
    };
    manifest.fleet.browsers_on_this_host = Some(true);
    std::fs::write(
        dir.join(rawdata::MANIFEST),
        serde_json::to_vec_pretty(&manifest).unwrap(),
    )
    .unwrap();
    // The engine's clock starts when the target is ready, 1 s into the run.
    write(
        dir,
        rawdata::RUN_EVENTS,
        &[
            RunEvent {
                t: 0.0,
                event: RunEventKind::Started,
                detail: None,
                viewers: None,
                cpu_busy: None,
            },
            RunEvent {
                t: 1.0,
                event: RunEventKind::TargetReady,
                detail: None,
                viewers: None,
                cpu_busy: None,
            },
            RunEvent {
                t: MEASURE_AT,
                event: RunEventKind::MeasurePoint,
                detail: None,
                viewers: None,
                cpu_busy: None,
            },
        ],
    );
    let event = |t: f64, viewer: u32, event: ViewerEventKind, ttff_ms: Option<f64>| ViewerEvent {
        t,
        viewer,
        event,
        p2p: true,
        reason: None,
        node: Some("local".into()),
        address: None,
        ttff_ms,
        due_s: None,
    };
    let mut events = Vec::new();
    for viewer in 0..2 {
        events.push(event(1.0, viewer, ViewerEventKind::SessionCreated, None));
        events.push(event(3.0, viewer, ViewerEventKind::PageOpened, None));
        let playing = 8.0 + viewer as f64;
        events.push(event(
            playing,
            viewer,
            ViewerEventKind::Playing,
            Some((playing - 3.0) * 1000.0),
        ));
    }
    write(dir, rawdata::VIEWER_EVENTS, &events);
    let mut samples = Vec::new();
    let mut hosts = Vec::new();
    for i in 1..=22 {
        let t = i as f64 * INTERVAL;
        hosts.push(HostSample {
            t,
            cores: 2,
            browsers_cpu_s: Some(1.3 * INTERVAL),
            browsers_pss_bytes: Some(2_000_000_000),
            browser_processes: Some(40),
            own_browsers_cpu_s: Some(0.3 * INTERVAL),
            own_browsers_pss_bytes: Some(500_000_000),
            own_browser_processes: Some(10),
            ..Default::default()
        });
        if t < 10.0 {
            continue;
        }
        for viewer in 0..2 {
            let since = t - 3.0;
            let requested = (since / 2.0).floor() as u64;
            samples.push(ViewerSample {
                t,
                viewer,
                http_down_bytes: (HTTP_BPS * since) as u64,
                p2p_down_bytes: (P2P_BPS * since) as u64,
                p2p_up_bytes: (P2P_BPS * since) as u64,
                playing: true,
                segments: Some(SegmentCounts {
                    requested,
                    loaded: requested,
                    bytes: requested * 150_000,
                    by_height: [("240".to_string(), requested)].into(),
                }),
                video_track_off: Some(true),
                ..Default::default()
            });
        }
    }
    write(dir, rawdata::VIEWER_SAMPLES, &samples);
    write(dir, rawdata::HOST_SAMPLES, &hosts);
}

fn close(got: f64, want: f64, what: &str) {
    assert!(
        (got - want).abs() <= want.abs() * 1e-6 + 1e-9,
        "{what}: got {got}, want {want}"
    );
}

#[test]
fn figures_come_from_the_runs_raw_data_over_its_window() {
    let dir = tempfile::tempdir().unwrap();
    crafted_run(dir.path());
    let run = RunData::load(dir.path()).unwrap();
    assert_eq!(
        Window::of_run(&run),
        Window {
            from_s: 20.0,
            to_s: 40.0
        }
    );
    assert_eq!(CostSource::of_run(&run), CostSource::OwnBrowsers);
    // Without the measure point's event: where the target became ready, plus measure_at.
    let mut cut = RunData::load(dir.path()).unwrap();
    cut.run_events
        .retain(|e| e.event != RunEventKind::MeasurePoint);
    assert_eq!(Window::of_run(&cut).to_s, MEASURE_AT);
    let f = from_run::figures(&run, &BrowserProfile::project());
    assert_eq!(f.viewers, 2);
    assert_eq!(f.viewers_measured, 2, "{:?}", f.failures);
    assert!(f.failures.is_empty(), "{:?}", f.failures);
    assert_eq!(f.browsers, 2);
    // The controller's own browsers only: 0.3 cores, 500 MB, 10 processes for 2 viewers.
    close(f.cpu_cores_per_viewer, 0.15, "CPU cores per viewer");
    close(f.pss_mb_per_viewer, 250.0, "PSS MB per viewer");
    close(f.pss_mb_per_viewer_max, 250.0, "peak PSS MB per viewer");
    close(f.processes_per_viewer, 5.0, "processes per viewer");
    // What the players fetched over the window's 20 s.
    close(f.window_s, WINDOW, "window");
    assert_eq!(f.bytes_basis, BytesBasis::Window);
    close(f.http_kbps_per_viewer, 400.0, "HTTP kbit/s");
    close(f.p2p_down_kbps_per_viewer, 200.0, "P2P kbit/s");
    close(
        f.download_bytes_per_viewer,
        (HTTP_BPS + P2P_BPS) * WINDOW,
        "bytes per viewer",
    );
    close(f.p2p_share_pct, 100.0 / 3.0, "P2P share");
    close(f.segments_per_viewer, 10.0, "segments per viewer");
    close(f.segment_bytes_mean, 150_000.0, "segment bytes");
    assert_eq!(f.renditions.len(), 1);
    close(f.renditions["240"], 100.0, "240p share");
    assert_eq!(f.stalls, 0);
    assert_eq!(f.video_track_off, Some(true));
    // Times to first frame 5 and 6 s; the upper median of two.
    assert_eq!(f.ttff_ms_median, Some(6000.0));
    // Every 5 s of each viewer's own clock, up to the window's end (37 s after opening).
    assert_eq!(f.over_time.len(), 7);
    close(
        f.over_time[2].download_bytes,
        (HTTP_BPS + P2P_BPS) * 15.0,
        "downloaded 15 s after opening",
    );
    // The last viewer played 11 s before the window began.
    assert_eq!(from_run::warmup_of_last_viewer(&run), Some(11.0));
}

#[test]
fn without_own_browser_figures_the_machines_chromium_is_the_source() {
    let dir = tempfile::tempdir().unwrap();
    crafted_run(dir.path());
    let mut run = RunData::load(dir.path()).unwrap();
    for s in &mut run.host_samples {
        s.own_browsers_cpu_s = None;
        s.own_browsers_pss_bytes = None;
        s.own_browser_processes = None;
    }
    assert_eq!(CostSource::of_run(&run), CostSource::HostBrowsers);
    let f = from_run::figures(&run, &BrowserProfile::project());
    close(f.cpu_cores_per_viewer, 0.65, "CPU cores per viewer");
    close(f.pss_mb_per_viewer, 1000.0, "PSS MB per viewer");
}

#[test]
fn browsers_elsewhere_are_measured_by_their_nodes() {
    let dir = tempfile::tempdir().unwrap();
    crafted_run(dir.path());
    let mut run = RunData::load(dir.path()).unwrap();
    run.manifest.fleet.browsers_on_this_host = Some(false);
    assert_eq!(CostSource::of_run(&run), CostSource::Nodes);
    // No node samples: the cost is missing, and the figures say so.
    let f = from_run::figures(&run, &BrowserProfile::project());
    assert!(
        f.failures.iter().any(|r| r.contains("load endpoint")),
        "{:?}",
        f.failures
    );
    run.node_samples = (1..=22)
        .map(|i| NodeSample {
            t: i as f64 * INTERVAL,
            node: "http://node-1:5555".into(),
            ok: true,
            cores: Some(8.0),
            cpu_busy: Some(0.05),
            browsers_pss_bytes: Some(600_000_000),
            browser_processes: Some(12),
            ..Default::default()
        })
        .collect();
    let cost = cost::browser_cost(&run, Window::of_run(&run)).unwrap();
    close(cost.cores, 0.4, "node cores");
    let f = from_run::figures(&run, &BrowserProfile::project());
    close(f.cpu_cores_per_viewer, 0.2, "CPU cores per viewer");
    close(f.pss_mb_per_viewer, 300.0, "PSS MB per viewer");
}

#[test]
fn a_viewer_not_read_across_the_window_is_not_measured_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    crafted_run(dir.path());
    let mut run = RunData::load(dir.path()).unwrap();
    // Viewer 1's reads stop at 30 s, and a lost event says why.
    run.viewer_samples.retain(|s| s.viewer == 0 || s.t <= 30.0);
    run.viewer_events.push(ViewerEvent {
        t: 31.0,
        viewer: 1,
        event: ViewerEventKind::Lost,
        p2p: true,
        reason: Some("stats unreadable 3 times in a row".into()),
        node: None,
        address: None,
        ttff_ms: None,
        due_s: None,
    });
    let f = from_run::figures(&run, &BrowserProfile::project());
    assert_eq!(f.viewers_measured, 1);
    assert!(
        f.failures
            .iter()
            .any(|r| r == "viewer 1: stats unreadable 3 times in a row"),
        "{:?}",
        f.failures
    );
    // Player figures are per measured viewer; the browsers' cost is per viewer that played.
    close(f.http_kbps_per_viewer, 400.0, "HTTP kbit/s");
    close(f.cpu_cores_per_viewer, 0.15, "CPU cores per viewer");
}
