//! A run that cannot record stops: on a small filesystem that fills up mid-run, the first
//! record that cannot be written ends the run with exit code 74, the reason in its manifest
//! and report, what was recorded before kept, and nothing left running.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::process::{lines, start_run, wait_for_line, wait_released};

/// A tmpfs of `size` mounted on a fresh folder, unmounted when dropped (also on a panic).
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(size: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size}"),
                "viewerfleet-test",
            ])
            .arg(dir.path())
            .status()
            .expect("mount (the real tier runs as root)");
        assert!(status.success(), "mounting a tmpfs failed: {status}");
        Self { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a file until the filesystem is full.
    fn fill(&self) {
        let mut filler = std::fs::File::create(self.path().join("filler")).unwrap();
        let chunk = vec![7u8; 64 * 1024];
        loop {
            if filler
                .write_all(&chunk)
                .and_then(|_| filler.sync_data())
                .is_err()
            {
                return;
            }
        }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

fn scenario(dir: &Path) -> PathBuf {
    let path = dir.join("live.yaml");
    std::fs::write(
        &path,
        "name: record-lost\ntarget:\n  kind: refsite\n  video: live\n  metrics_interval: 2s\nviewers:\n  count: 1\nduration: 5m\nsampling_interval: 1s\nsteady_window: 10s\nfleet:\n  kind: local\n",
    )
    .unwrap();
    path
}

#[test]
fn a_run_on_a_full_disk_stops_at_the_first_lost_record_with_exit_74() {
    let files = tempfile::tempdir().unwrap();
    let disk = SmallDisk::mount("16m");
    let out = disk.path().join("run");
    let tag = format!("record-lost-{}", std::process::id());
    let mut child = start_run(&scenario(files.path()), &out, &tag);
    let playing = wait_for_line(
        &out.join("raw/viewer_events.jsonl"),
        Duration::from_secs(240),
        |e| e["event"] == "playing",
    );
    assert!(playing, "the viewer never played");
    let filled_at = Instant::now();
    disk.fill();
    // The run stops on its own, long before its planned 5 minutes.
    let deadline = filled_at + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the run went on after its disk was full");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(status.code(), Some(74), "exit code");
    let events = lines(&out.join("raw/run_events.jsonl"));
    let lost = events
        .iter()
        .find(|e| e["event"] == "record_lost")
        .expect("a record_lost run event");
    assert!(
        lost["detail"].as_str().unwrap().contains("space"),
        "the event names the error: {lost}"
    );
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    assert!(manifest["ended_at"].is_string(), "the manifest was stamped");
    let status_text = manifest["exit_status"].as_str().unwrap();
    assert!(
        status_text.starts_with("exit code 74") && status_text.contains("could not be written"),
        "{status_text}"
    );
    let report = std::fs::read_to_string(out.join("report.md")).expect("a report");
    assert!(
        report.contains("because a record could not be written"),
        "the report says why the run stopped"
    );
    assert!(
        !lines(&out.join("raw/viewer_samples.jsonl")).is_empty(),
        "what was recorded before is kept"
    );
    assert!(
        !out.join("raw/.space-reserve").exists(),
        "the reserve is released"
    );
    let left = wait_released(&tag, Duration::from_secs(10));
    assert!(left.is_empty(), "left running: {left:?}");
}
