//! `viewerfleet refsite` as a process: the READY line, flag errors, and clean stops — the
//! live encoder (ffmpeg) is killed and reaped on SIGTERM and dies with refsite on SIGKILL;
//! a VOD-only site runs no encoder.

use crate::support::http_get;
use crate::support::poll;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_viewerfleet");

use crate::support::refsite::media_cache;

/// A refsite process, killed and reaped on drop whatever happened.
struct Site {
    child: Child,
    ready: Value,
}

impl Drop for Site {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(args: &[&str]) -> Site {
    let mut child = Command::new(BIN)
        .args(["refsite", "--listen", "127.0.0.1:0", "--vod-length", "30s"])
        .arg("--media")
        .arg(media_cache())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("viewerfleet runs");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    let line = rx.recv_timeout(Duration::from_secs(90));
    let mut site = Site {
        child,
        ready: Value::Null,
    };
    let line = line.expect("READY within 90 s");
    let json = line
        .strip_prefix("READY ")
        .expect("stdout line starts with READY");
    site.ready = serde_json::from_str(json).expect("READY carries JSON");
    site
}

/// Direct children of a process.
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            if let Ok(s) = std::fs::read_to_string(t.path().join("children")) {
                out.extend(s.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
            }
        }
    }
    out
}

fn is_ffmpeg(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "ffmpeg")
}

fn alive(pid: u32) -> bool {
    // A zombie still has a /proc entry: look at its state.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.split(") ").nth(1).unwrap_or("").starts_with('Z'))
        .unwrap_or(false)
}

fn signal(pid: u32, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig).expect("signal sent");
}

#[test]
fn ready_line_then_sigterm_stops_the_encoder() {
    let mut site = start(&["--videos", "live", "--metrics-interval", "5s"]);
    let ready = &site.ready;
    let base = ready["base_url"].as_str().unwrap().to_string();
    assert!(base.starts_with("http://127.0.0.1:"));
    assert!(!base.ends_with(":0"));
    assert_eq!(ready["metrics_url"], format!("{base}/metrics"));
    let videos = ready["videos"].as_array().unwrap();
    assert_eq!(videos.len(), 1);
    assert_eq!(videos[0]["kind"], "live");
    let id = videos[0]["id"].as_str().unwrap();
    assert_eq!(id.len(), 36);
    assert_eq!(videos[0]["embed_url"], format!("{base}/videos/embed/{id}"));

    let encoders: Vec<u32> = children(site.child.id())
        .into_iter()
        .filter(|p| is_ffmpeg(*p))
        .collect();
    assert_eq!(encoders.len(), 1, "one live encoder");
    signal(site.child.id(), nix::sys::signal::Signal::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(s) = site.child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "refsite did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "{status}");
    assert!(!alive(encoders[0]), "ffmpeg survived refsite's SIGTERM");
}

#[test]
fn sigkill_takes_the_encoder_down_too() {
    let site = start(&["--videos", "live"]);
    let encoders: Vec<u32> = children(site.child.id())
        .into_iter()
        .filter(|p| is_ffmpeg(*p))
        .collect();
    assert_eq!(encoders.len(), 1);
    signal(site.child.id(), nix::sys::signal::Signal::SIGKILL);
    // The orphan is reparented and reaped by init or a subreaper; it must disappear.
    poll::until(
        "ffmpeg to die with refsite",
        Duration::from_secs(10),
        || !alive(encoders[0]) || !is_ffmpeg(encoders[0]),
    );
    drop(site);
}

#[test]
fn vod_only_runs_no_encoder() {
    let site = start(&["--videos", "vod"]);
    let videos = site.ready["videos"].as_array().unwrap();
    assert_eq!(videos.len(), 1);
    assert_eq!(videos[0]["kind"], "vod");
    assert!(
        !children(site.child.id()).into_iter().any(is_ffmpeg),
        "a VOD-only site started ffmpeg"
    );
}

#[test]
fn bad_flags_are_named() {
    for (args, needle) in [
        (vec!["--videos", "vod,tv"], "--videos"),
        (vec!["--metrics-interval", "soon"], "--metrics-interval"),
        (vec!["--vod-length", "2s"], "--vod-length"),
    ] {
        let out = Command::new(BIN)
            .args(["refsite", "--listen", "127.0.0.1:0"])
            .args(&args)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "no READY line on error");
    }
    let out = Command::new(BIN)
        .args([
            "refsite",
            "--listen",
            "127.0.0.1:0",
            "--web",
            "/nonexistent",
        ])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("make web-deps"));
}

fn media_sequence(playlist: &str) -> Option<u64> {
    playlist
        .lines()
        .find_map(|l| l.strip_prefix("#EXT-X-MEDIA-SEQUENCE:"))
        .and_then(|v| v.trim().parse().ok())
}

#[test]
fn live_encoder_is_restarted_when_it_dies() {
    let site = start(&["--videos", "live"]);
    let base = site.ready["base_url"].as_str().unwrap().to_string();
    let id = site.ready["videos"][0]["id"].as_str().unwrap().to_string();
    let path = format!("/static/streaming-playlists/hls/{id}/index.m3u8");
    let first = media_sequence(&http_get(&base, &path)).expect("live playlist");
    let encoder = children(site.child.id())
        .into_iter()
        .find(|p| is_ffmpeg(*p))
        .expect("encoder running");
    signal(encoder, nix::sys::signal::Signal::SIGKILL);
    poll::until("a new encoder", Duration::from_secs(15), || {
        children(site.child.id())
            .into_iter()
            .any(|p| p != encoder && is_ffmpeg(p))
    });
    // The restarted encoder keeps the playlist moving forward.
    poll::until(
        "the live playlist to advance",
        Duration::from_secs(30),
        || media_sequence(&http_get(&base, &path)).is_some_and(|s| s > first),
    );
    let response = http_get(&base, &path);
    assert!(response
        .to_ascii_lowercase()
        .contains("cache-control: no-store"));
}
