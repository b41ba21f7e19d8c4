//! Leftovers of crashed runs on this machine: browsers still running with a viewerfleet
//! profile, and profile folders. Only what carries the project's prefix is touched.

use super::PROFILE_PREFIX;

/// The controller PID a profile folder name carries, if that controller is still running:
/// its browsers and profiles belong to a live run and are not leftovers.
fn owner_alive(name: &str) -> bool {
    let Some(rest) = name.strip_prefix(PROFILE_PREFIX) else {
        return false;
    };
    let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
        return false;
    };
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .is_ok_and(|comm| comm.trim() == "viewerfleet" || comm.trim().starts_with("viewerfleet"))
}

/// Finds (and unless `dry_run`, removes) local leftovers of dead runs; returns one line
/// per item.
pub fn collect_leftovers(dry_run: bool) -> anyhow::Result<Vec<String>> {
    let mut found = Vec::new();
    for (pid, cmdline, profile) in processes_with_profile()? {
        if owner_alive(&profile) {
            continue;
        }
        found.push(format!("browser process {pid} ({})", shorten(&cmdline)));
        if !dry_run {
            crate::sys::process::kill_process(pid);
        }
    }
    let tmp = std::env::temp_dir();
    if let Ok(entries) = std::fs::read_dir(&tmp) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            if name.starts_with(PROFILE_PREFIX) && entry.path().is_dir() && !owner_alive(&name) {
                found.push(format!("profile folder {}", entry.path().display()));
                if !dry_run {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
    }
    Ok(found)
}

/// The processes whose profile folder's name starts with `prefix` (one controller's).
pub(crate) fn browsers_of(prefix: &str) -> Vec<u32> {
    processes_with_profile()
        .unwrap_or_default()
        .into_iter()
        .filter(|(_, _, profile)| profile.starts_with(prefix))
        .map(|(pid, _, _)| pid)
        .collect()
}

/// Processes whose command line names a viewerfleet profile folder: (pid, command line,
/// profile folder name).
fn processes_with_profile() -> anyhow::Result<Vec<(u32, String, String)>> {
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
        if let Some(pos) = cmdline.find(&marker) {
            let dir = cmdline[pos + "--user-data-dir=".len()..]
                .split_whitespace()
                .next()
                .unwrap_or_default();
            let name = std::path::Path::new(dir)
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default();
            out.push((pid, cmdline, name));
        }
    }
    Ok(out)
}

fn shorten(s: &str) -> String {
    s.chars().take(100).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_of_live_controllers_are_not_leftovers() {
        // This unit-test binary is `viewerfleet-<hash>`: a live controller.
        let mine = format!("{PROFILE_PREFIX}{}-abc", std::process::id());
        assert!(owner_alive(&mine));
        assert!(!owner_alive(&format!("{PROFILE_PREFIX}999999999-abc")));
        assert!(!owner_alive("something-else"));
        // PID 1 exists but is not a viewerfleet controller.
        assert!(!owner_alive(&format!("{PROFILE_PREFIX}1-abc")));
    }
}
