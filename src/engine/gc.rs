//! Leftovers of crashed runs on this machine: browsers still running with a viewerfleet
//! profile, and profile folders. Only what carries the project's prefix is touched.

use crate::viewer::PROFILE_PREFIX;

/// Finds (and unless `dry_run`, removes) local leftovers; returns one line per item.
pub fn collect_local(dry_run: bool) -> anyhow::Result<Vec<String>> {
    let mut found = Vec::new();
    for (pid, cmdline) in processes_with_profile()? {
        found.push(format!("browser process {pid} ({})", shorten(&cmdline)));
        if !dry_run {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
    let tmp = std::env::temp_dir();
    if let Ok(entries) = std::fs::read_dir(&tmp) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            if name.starts_with(PROFILE_PREFIX) && entry.path().is_dir() {
                found.push(format!("profile folder {}", entry.path().display()));
                if !dry_run {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
    }
    found.extend(crate::netns::gc::leftover_lines(dry_run));
    Ok(found)
}

/// Processes whose command line names a viewerfleet profile folder.
fn processes_with_profile() -> anyhow::Result<Vec<(u32, String)>> {
    let marker = format!(
        "--user-data-dir={}",
        std::env::temp_dir().join(PROFILE_PREFIX).display()
    );
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc")?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
        if cmdline.contains(&marker) {
            out.push((pid, cmdline));
        }
    }
    Ok(out)
}

fn shorten(s: &str) -> String {
    s.chars().take(100).collect()
}
