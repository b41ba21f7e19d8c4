//! Leftovers of crashed runs: namespaces and links named with the project prefix (`vf`)
//! whose owner is gone. Slot sets are grouped by their name prefix (`vf1a2b-`); the slot
//! script records an owner per group in `/run/viewerfleet/slots/<group>owner`:
//! - a PID that is still alive → in use, kept;
//! - `manual` (made by hand or a cloud bootstrap) → kept; remove with `viewer-slots.sh down`;
//! - a dead PID, or no record → leftover: processes inside its namespaces are killed, then
//!   its links (veths, bridge, qdiscs with them) and namespaces are removed.
//!
//! Anything not starting with the project prefix is never touched.

use super::{NetnsError, PROJECT_PREFIX};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the slot script records owners.
pub(crate) const OWNER_DIR: &str = "/run/viewerfleet/slots";

/// What `gc` found for one group of slots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcGroup {
    /// Name prefix, e.g. `vf1a2b-`.
    pub group: String,
    pub namespaces: Vec<String>,
    pub links: Vec<String>,
    /// Why it was kept; `None` = removed (or would be, in a dry run).
    pub kept_because: Option<String>,
}

/// Finds project-prefixed groups; removes the leftovers unless `dry_run`. `only` limits the
/// work to groups whose name starts with it (tests use it to stay within their own names).
pub fn gc_local(dry_run: bool, only: Option<&str>) -> Result<Vec<GcGroup>, NetnsError> {
    let tools = super::check_host(&super::SystemHostEnv)?;
    let mut groups: BTreeMap<String, GcGroup> = BTreeMap::new();
    let namespaces = list_namespaces(&tools.ip)?.into_iter().map(|n| (n, true));
    let links = list_links(&tools.ip)?.into_iter().map(|n| (n, false));
    for (name, is_namespace) in namespaces.chain(links) {
        let Some(group) = group_of(&name) else {
            continue;
        };
        let entry = groups.entry(group.clone()).or_insert_with(|| GcGroup {
            group,
            namespaces: vec![],
            links: vec![],
            kept_because: None,
        });
        if is_namespace {
            entry.namespaces.push(name);
        } else {
            entry.links.push(name);
        }
    }
    let mut result = Vec::new();
    for (_, mut group) in groups {
        if only.is_some_and(|only| !group.group.starts_with(only)) {
            continue;
        }
        group.kept_because = keep_reason(&owner_file(Path::new(OWNER_DIR), &group.group));
        if group.kept_because.is_none() && !dry_run {
            remove_group(&tools.ip, &group);
        }
        result.push(group);
    }
    Ok(result)
}

/// For `viewerfleet gc --local`: one line per removed (or, dry, removable) slot group; groups
/// kept are logged with the reason. Without root nothing can be listed: says so in a line.
pub fn leftover_lines(dry_run: bool) -> Vec<String> {
    match gc_local(dry_run, None) {
        Ok(groups) => groups
            .into_iter()
            .filter_map(|g| match &g.kept_because {
                Some(why) => {
                    tracing::info!("keeping network slots {}*: {why}", g.group);
                    None
                }
                None => Some(format!(
                    "network slots {}* (namespaces: {}; links: {})",
                    g.group,
                    g.namespaces.join(" "),
                    g.links.join(" ")
                )),
            })
            .collect(),
        Err(err) => {
            tracing::warn!("network namespaces not checked: {err}");
            vec![]
        }
    }
}

/// `vf1a2b-3h` → `vf1a2b-`; `None` for names outside the project's scheme.
pub(crate) fn group_of(name: &str) -> Option<String> {
    if !name.starts_with(PROJECT_PREFIX) {
        return None;
    }
    let cut = name.rfind('-')?;
    Some(name[..=cut].to_string())
}

fn owner_file(dir: &Path, group: &str) -> PathBuf {
    dir.join(format!("{group}owner"))
}

/// Why a group must be kept, from its owner record.
fn keep_reason(owner_file: &Path) -> Option<String> {
    let owner = std::fs::read_to_string(owner_file).ok()?;
    let owner = owner.trim();
    if owner == "manual" {
        return Some(
            "made by viewer-slots.sh by hand (owner: manual); remove with `viewer-slots.sh down`"
                .into(),
        );
    }
    let pid: i32 = owner.parse().ok()?;
    Path::new(&format!("/proc/{pid}"))
        .exists()
        .then(|| format!("its run (PID {pid}) is still alive"))
}

fn remove_group(ip: &Path, group: &GcGroup) {
    for ns in &group.namespaces {
        // Browsers orphaned by the crash still run inside the slot: end them first.
        if let Ok(out) = Command::new(ip).args(["netns", "pids", ns]).output() {
            for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                if let Ok(pid) = pid.parse::<i32>() {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
            }
        }
    }
    for link in &group.links {
        let _ = Command::new(ip).args(["link", "del", link]).output();
    }
    for ns in &group.namespaces {
        let _ = Command::new(ip).args(["netns", "del", ns]).output();
    }
    remove_records(Path::new(OWNER_DIR), &group.group);
}

/// The slot script's records of a group: its owner, its network (`<group>net`), its lock
/// (`<group>lock`) and each slot's settings (`<group><i>.slot`).
fn remove_records(dir: &Path, group: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(group) else {
            continue;
        };
        let ours = rest == "owner"
            || rest == "net"
            || rest == "lock"
            || rest
                .strip_suffix(".slot")
                .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()));
        if ours {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

fn list_namespaces(ip: &Path) -> Result<Vec<String>, NetnsError> {
    let out = Command::new(ip).args(["netns", "list"]).output()?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next().map(str::to_string))
        .collect())
}

fn list_links(ip: &Path) -> Result<Vec<String>, NetnsError> {
    let out = Command::new(ip).args(["-o", "link", "show"]).output()?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let name = line.split(": ").nth(1)?;
            Some(name.split('@').next()?.to_string())
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_follow_the_naming_scheme() {
        assert_eq!(group_of("vf1a2b-3h").as_deref(), Some("vf1a2b-"));
        assert_eq!(group_of("vf1a2b-br").as_deref(), Some("vf1a2b-"));
        assert_eq!(group_of("vf-12").as_deref(), Some("vf-"));
        assert_eq!(group_of("eth0"), None);
        assert_eq!(group_of("docker0"), None);
        assert_eq!(group_of("vfnodash"), None);
    }

    #[test]
    fn a_removed_group_takes_its_records_and_only_its_own() {
        let dir = tempfile::tempdir().unwrap();
        for f in [
            "vfx-owner",
            "vfx-net",
            "vfx-lock",
            "vfx-0.slot",
            "vfx-12.slot",
            "vfx-a.slot",
            "vfxy-owner",
            "vfx-notes",
        ] {
            std::fs::write(dir.path().join(f), "x").unwrap();
        }
        remove_records(dir.path(), "vfx-");
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["vfx-a.slot", "vfx-notes", "vfxy-owner"]);
    }

    #[test]
    fn owner_records_decide() {
        let dir = tempfile::tempdir().unwrap();
        let file = owner_file(dir.path(), "vfx-");
        assert_eq!(keep_reason(&file), None, "no record: leftover");
        std::fs::write(&file, "manual\n").unwrap();
        assert!(keep_reason(&file).unwrap().contains("manual"));
        std::fs::write(&file, format!("{}\n", std::process::id())).unwrap();
        assert!(keep_reason(&file).unwrap().contains("alive"));
        let mut child = Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        std::fs::write(&file, format!("{dead}\n")).unwrap();
        assert_eq!(keep_reason(&file), None, "dead owner: leftover");
    }
}
