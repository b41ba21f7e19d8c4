//! `viewerfleet run` as a child process, as the real-tier tests drive it: started with a
//! unique environment tag that every process it starts inherits (so leftovers are found
//! precisely even on a machine running other browsers), signalled, and its raw files read
//! while it runs.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `viewerfleet --quiet run SCENARIO --out OUT`, tagged with `VIEWERFLEET_TEST_TAG=tag`.
pub fn start_run(scenario: &Path, out: &Path, tag: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_viewerfleet"))
        .args(["--quiet", "run"])
        .arg(scenario)
        .arg("--out")
        .arg(out)
        .env("VIEWERFLEET_TEST_TAG", tag)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// The PIDs of the processes running now, zombies left out (they have ended already; only
/// their parent has not collected them yet).
fn live_pids() -> impl Iterator<Item = u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            !state
                .rsplit(')')
                .next()
                .is_some_and(|s| s.trim_start().starts_with('Z'))
        })
}

/// Processes (pid, name) that carry the tag in their environment.
pub fn tagged_processes(tag: &str) -> Vec<(u32, String)> {
    let needle = format!("VIEWERFLEET_TEST_TAG={tag}");
    live_pids()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()))
        })
        .map(|pid| {
            let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            (pid, name.trim().to_string())
        })
        .collect()
}

/// Waits (bounded) until no tagged process is left; returns what is still there.
pub fn wait_released(tag: &str, limit: Duration) -> Vec<(u32, String)> {
    let deadline = Instant::now() + limit;
    loop {
        let left = tagged_processes(tag);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits (bounded) until a raw file has a line matching `pred`.
pub fn wait_for_line(
    path: &Path,
    limit: Duration,
    pred: impl Fn(&serde_json::Value) -> bool,
) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Ok(text) = std::fs::read_to_string(path) {
            if text
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .any(|v| pred(&v))
            {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    false
}

/// A JSON-lines file's records (none if it is missing; torn lines skipped).
pub fn lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Sends `signal` to a child of this test.
pub fn kill(child: &Child, signal: i32) {
    // SAFETY: plain kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, signal) };
}

/// The `viewerfleet reaper` processes (pid, run) that watch runs on the API at `endpoint`:
/// the reapers of the cloud commands a test ran against its own fake API. They run in a
/// session and with an environment of their own, so their command line is what names them.
pub fn reapers_of(endpoint: &str) -> Vec<(u32, String)> {
    live_pids()
        .filter_map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            let after = |flag: &str| {
                args.iter()
                    .position(|a| *a == flag.as_bytes())
                    .and_then(|i| args.get(i + 1))
                    .map(|v| String::from_utf8_lossy(v).into_owned())
            };
            (args.get(1) == Some(&&b"reaper"[..])
                && after("--endpoint").as_deref() == Some(endpoint))
            .then(|| (pid, after("--run").unwrap_or_default()))
        })
        .collect()
}
