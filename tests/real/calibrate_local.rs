//! `viewerfleet calibrate` with real Chromium on refsite: two profiles, one viewer each,
//! 20 s windows. Checks that figures are produced and plausible, not that they are small.

use assert_cmd::Command;
use viewerfleet::calibrate::Calibration;

#[test]
fn calibrate_measures_memory_cpu_and_bytes_per_profile() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cal");
    // VOD with HTTP throttled to 600 kbit/s: unthrottled, the player would pick the 720p
    // rendition (≈1.2 Mbit/s) and fill its buffer faster still, so what it fetched shows
    // that CDP throttling binds with every profile's flags (one viewer: no P2P to add).
    let scenario = dir.path().join("throttled.yaml");
    std::fs::write(
        &scenario,
        "name: throttled\ntarget:\n  kind: refsite\n  video: vod\nviewers:\n  count: 1\n  network:\n    download_kbps: 600\nduration: 1m\nfleet:\n  kind: local\n",
    )
    .unwrap();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_viewerfleet"))
        .args([
            "--quiet",
            "calibrate",
            "--json",
            "--viewers",
            "1",
            "--warmup",
            "2s",
            "--window",
            "20s",
            "--profiles",
            "default",
            "--profile",
            "wide=project ---window-size=640,360 --window-size=800,600",
            "--out",
        ])
        .arg(&out)
        .arg(&scenario)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    // Under --json the tables go to stderr and stdout holds the document.
    let text = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{text}");
    let doc = crate::support::schema::assert_valid("calibrate-summary.v1.json", &stdout);
    assert_eq!(doc["calibrate"]["profiles"].as_array().unwrap().len(), 2);
    let calibration = Calibration::load(&out).unwrap();
    assert_eq!(calibration.profiles.len(), 2);
    for p in &calibration.profiles {
        assert_eq!(p.viewers_measured, 1, "{p:?}");
        // A playing Chromium is several processes and tens of MB at the very least.
        assert!(p.processes_per_viewer >= 2.0, "{p:?}");
        assert!(p.pss_mb_per_viewer > 20.0, "{p:?}");
        assert!(p.pss_mb_per_viewer_max >= p.pss_mb_per_viewer, "{p:?}");
        assert!(p.cpu_cores_per_viewer > 0.0, "{p:?}");
        // Fetching, but no faster than the 600 kbit/s the throttle allows, give or take one
        // 2 s segment (≈1.1 Mbit at 360p) counted at the window's edge.
        assert!(p.download_kbps_per_viewer() > 100.0, "{p:?}");
        assert!(
            p.http_kbps_per_viewer <= 700.0,
            "throttling did not bind: {p:?}"
        );
        assert!(p.ttff_ms_median.is_some());
    }
    let wide = &calibration.profiles[1].profile.flags;
    assert!(wide.contains(&"--window-size=800,600".to_string()));
    assert!(!wide.contains(&"--window-size=640,360".to_string()));
    let md = std::fs::read_to_string(out.join("calibration.md")).unwrap();
    assert!(md.contains("| wide | 1 | 1/1 |"), "{md}");
    assert!(text.contains("| default | 1 | 1/1 |"), "{text}");
    // Nothing left behind: browsers carry the calibrating process's pid in their profile
    // names; none may outlive it, and neither may a profile folder.
    assert_eq!(
        leftovers(pid),
        (0, 0),
        "(browsers, profile folders) left behind"
    );
}

/// Browsers still running and profile folders still present of the process `pid`.
fn leftovers(pid: u32) -> (usize, usize) {
    let tag = format!("viewerfleet-profile-{pid}-");
    let browsers = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .filter(|cmd| String::from_utf8_lossy(cmd).contains(&tag))
        .count();
    let profiles = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&tag))
        .count();
    (browsers, profiles)
}

#[test]
fn unknown_profiles_are_refused_before_any_browser_starts() {
    let dir = tempfile::tempdir().unwrap();
    Command::cargo_bin("viewerfleet")
        .unwrap()
        .args(["calibrate", "--profiles", "fastest", "--out"])
        .arg(dir.path())
        .assert()
        .code(2)
        .stderr(predicates::str::contains("unknown profile `fastest`"));
    Command::cargo_bin("viewerfleet")
        .unwrap()
        .args(["calibrate", "--window", "soon", "--out"])
        .arg(dir.path())
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "invalid value 'soon' for '--window",
        ));
}

#[test]
fn sigterm_mid_calibration_releases_browsers_and_profiles() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_viewerfleet"))
        .args(["calibrate", "--viewers", "2", "--out"])
        .arg(dir.path().join("cal"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Stop it once the first profile's browsers are being started.
    let stderr = child.stderr.take().unwrap();
    let mut lines = std::io::BufReader::new(stderr).lines();
    let started = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|line| line.contains("profile default:"));
    assert!(started, "calibrate never reached its first profile");
    // SAFETY: plain kill(2) on our own child.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(143), "{rest:?}");
    assert!(
        rest.iter().any(|l| l.contains("SIGTERM received")),
        "{rest:?}"
    );
    assert_eq!(
        leftovers(pid),
        (0, 0),
        "(browsers, profile folders) left after SIGTERM"
    );
}
