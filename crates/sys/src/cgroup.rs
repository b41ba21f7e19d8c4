//! CPU cgroups for processes this machine runs on behalf of a viewer node (a local Grid
//! node: its Java process, ChromeDriver and browsers), so each node's CPU can be limited
//! (a quota in cores) and measured on its own.
//!
//! Where it lives depends on the host: with cgroup v2 (`/sys/fs/cgroup` is cgroup2) one
//! directory with the `cpu` controller enabled down to it; with cgroup v1 the `cpu`
//! hierarchy (`/sys/fs/cgroup/cpu`), plus the same path in the `cpuacct` hierarchy when that
//! is mounted apart (CPU usage) and in the controller-less cgroup2 hierarchy of a hybrid
//! host (`/sys/fs/cgroup/unified`: pressure stall information per cgroup). The first
//! directory is the one the load endpoint (`grid/node-load.py --cgroup`) is given; it finds
//! the others by the same relative path.

use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The cgroup filesystem root.
const CGROUP_FS: &str = "/sys/fs/cgroup";
/// Scheduling period of a quota (the kernel's default), µs.
const PERIOD_US: u64 = 100_000;
/// Smallest quota the kernel accepts, µs (1 ms): 0.01 cores at the default period.
const MIN_QUOTA_US: u64 = 1_000;

/// One CPU cgroup, as recorded in state files: the same relative path in one or more
/// hierarchies (`roots`, the primary first).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuCgroup {
    /// Mount points of the hierarchies holding it; the first carries the quota.
    pub roots: Vec<PathBuf>,
    /// Path below each root, e.g. `viewerfleet/vfg12ab/node-2`.
    pub rel: PathBuf,
    /// CPU quota in cores, if one was set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<f64>,
}

/// The hierarchies this host offers for a CPU cgroup.
#[derive(Debug, Clone, PartialEq)]
enum Layout {
    /// cgroup v2: one hierarchy.
    V2(PathBuf),
    /// cgroup v1: the `cpu` hierarchy and companions mounted apart from it.
    V1 {
        cpu: PathBuf,
        companions: Vec<PathBuf>,
    },
}

fn layout(fs: &Path) -> Option<Layout> {
    if fs.join("cgroup.controllers").exists() {
        return Some(Layout::V2(fs.to_path_buf()));
    }
    let cpu = fs.join("cpu");
    if !cpu.join("cpu.cfs_quota_us").exists() {
        return None;
    }
    // `cpu` and `cpuacct` are often one hierarchy behind two symbolic links.
    let real = |p: &Path| std::fs::canonicalize(p).ok();
    let mut companions = Vec::new();
    let acct = fs.join("cpuacct");
    if acct.join("cpuacct.usage").exists() && real(&acct) != real(&cpu) {
        companions.push(acct);
    }
    let unified = fs.join("unified");
    if unified.join("cgroup.procs").exists() {
        companions.push(unified);
    }
    Some(Layout::V1 { cpu, companions })
}

/// Whether this host can give a process a CPU cgroup of its own.
pub fn available() -> bool {
    layout(Path::new(CGROUP_FS)).is_some()
}

/// Checks a quota in cores: positive and at least the kernel's smallest quota.
pub fn check_cores(cores: f64) -> Result<(), String> {
    if !cores.is_finite() || cores * (PERIOD_US as f64) < MIN_QUOTA_US as f64 {
        return Err(format!(
            "{cores} cores is not a CPU quota: give at least {} (e.g. 0.25 or 1.5)",
            MIN_QUOTA_US as f64 / PERIOD_US as f64
        ));
    }
    Ok(())
}

impl CpuCgroup {
    /// Creates `rel` in every hierarchy of this host and sets the quota (`cores`), or none.
    /// On error, whatever was made is removed before the error returns.
    pub fn create(rel: &Path, cores: Option<f64>) -> anyhow::Result<Self> {
        Self::create_in(Path::new(CGROUP_FS), rel, cores)
    }

    fn create_in(fs: &Path, rel: &Path, cores: Option<f64>) -> anyhow::Result<Self> {
        if let Some(c) = cores {
            check_cores(c).map_err(anyhow::Error::msg)?;
        }
        let roots = match layout(fs) {
            Some(Layout::V2(root)) => vec![root],
            Some(Layout::V1 { cpu, companions }) => {
                std::iter::once(cpu).chain(companions).collect()
            }
            None => anyhow::bail!(
                "no CPU cgroup hierarchy at {} (neither cgroup v2 nor the v1 cpu controller)",
                fs.display()
            ),
        };
        let cgroup = Self {
            roots,
            rel: rel.to_path_buf(),
            cores,
        };
        cgroup.make().inspect_err(|_| {
            cgroup.remove();
        })?;
        Ok(cgroup)
    }

    fn make(&self) -> anyhow::Result<()> {
        let primary = &self.roots[0];
        let v2 = primary.join("cgroup.controllers").exists();
        if v2 {
            // The cpu controller must be enabled in every ancestor's subtree_control.
            let mut dir = primary.clone();
            for part in self.rel.iter() {
                enable_cpu_controller(&dir)?;
                dir.push(part);
                create_dir(&dir)?;
            }
        } else {
            for root in &self.roots {
                create_dir(&root.join(&self.rel))?;
            }
        }
        self.write_quota()
    }

    /// Changes the quota of a cgroup already made (`None`: no quota), e.g. to starve a
    /// viewer node whose browsers have already started.
    pub fn set_cores(&mut self, cores: Option<f64>) -> anyhow::Result<()> {
        if let Some(c) = cores {
            check_cores(c).map_err(anyhow::Error::msg)?;
        }
        self.cores = cores;
        self.write_quota()
    }

    /// Writes `cores` as the primary hierarchy's quota (v2 `cpu.max`, v1 CFS files).
    fn write_quota(&self) -> anyhow::Result<()> {
        let dir = self.dir();
        let v2 = self.roots[0].join("cgroup.controllers").exists();
        let quota = self.cores.map(|c| (c * PERIOD_US as f64).round() as u64);
        if v2 {
            let value = match quota {
                Some(q) => format!("{q} {PERIOD_US}"),
                None => format!("max {PERIOD_US}"),
            };
            write(&dir.join("cpu.max"), &value)?;
        } else {
            write(&dir.join("cpu.cfs_period_us"), &PERIOD_US.to_string())?;
            let value = quota.map_or("-1".to_string(), |q| q.to_string());
            write(&dir.join("cpu.cfs_quota_us"), &value)?;
        }
        Ok(())
    }

    /// The primary directory (quota, periods; what the load endpoint is given).
    pub fn dir(&self) -> PathBuf {
        self.roots[0].join(&self.rel)
    }

    /// Moves a process (all its threads; children it starts later inherit it) into the
    /// cgroup in every hierarchy.
    pub fn add_process(&self, pid: u32) -> anyhow::Result<()> {
        for root in &self.roots {
            write(&root.join(&self.rel).join("cgroup.procs"), &pid.to_string())?;
        }
        Ok(())
    }

    /// Processes in the cgroup now (its primary directory and below).
    pub fn pids(&self) -> Vec<u32> {
        pids_below(&self.dir())
    }

    /// Removes the cgroup everywhere, and its parents that are left empty. Processes
    /// still in it (a node's browser that escaped its process group) are killed, and
    /// whatever cannot go at once is moved to the hierarchy's root first, since a cgroup
    /// with tasks cannot be removed. Returns what could not be removed. Idempotent.
    pub fn remove(&self) -> Vec<String> {
        let leftovers = self.pids();
        for pid in &leftovers {
            crate::process::kill_process(*pid);
        }
        let mut errors = Vec::new();
        for root in &self.roots {
            let dir = root.join(&self.rel);
            if !dir.exists() {
                continue;
            }
            // Deepest first: a child cgroup something made below ours.
            let mut dirs = dirs_below(&dir);
            dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
            for d in dirs {
                for pid in pids_below(&d) {
                    let _ = std::fs::write(root.join("cgroup.procs"), pid.to_string());
                }
                if let Err(e) = remove_dir(&d, true) {
                    errors.push(format!("{}: {e}", d.display()));
                }
            }
            // The parents up to the root, while empty (other Grids may share them).
            let mut parent = dir.parent().map(Path::to_path_buf);
            while let Some(p) = parent.filter(|p| p.starts_with(root) && p != root) {
                if remove_dir(&p, false).is_err() {
                    break;
                }
                parent = p.parent().map(Path::to_path_buf);
            }
        }
        errors
    }

    /// Whether any part of it still exists.
    pub fn exists(&self) -> bool {
        self.roots.iter().any(|r| r.join(&self.rel).exists())
    }
}

fn enable_cpu_controller(dir: &Path) -> anyhow::Result<()> {
    let control = dir.join("cgroup.subtree_control");
    let enabled = std::fs::read_to_string(&control).unwrap_or_default();
    if enabled.split_whitespace().any(|c| c == "cpu") {
        return Ok(());
    }
    write(&control, "+cpu")
}

fn create_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating the cgroup {}", dir.display()))
}

fn write(path: &Path, value: &str) -> anyhow::Result<()> {
    std::fs::write(path, value).with_context(|| format!("writing {value} to {}", path.display()))
}

/// `rmdir` of a cgroup directory (its control files are not real files); a missing one is
/// removed already. A cgroup whose last task is still exiting is busy for a moment: with
/// `wait`, that is waited out (up to a second).
fn remove_dir(dir: &Path, wait: bool) -> std::io::Result<()> {
    let mut tries = 0;
    loop {
        match std::fs::remove_dir(dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && wait && tries < 20 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

fn dirs_below(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    let mut i = 0;
    while i < out.len() {
        if let Ok(entries) = std::fs::read_dir(&out[i]) {
            out.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path()),
            );
        }
        i += 1;
    }
    out
}

fn pids_below(dir: &Path) -> Vec<u32> {
    let mut pids: Vec<u32> = dirs_below(dir)
        .iter()
        .filter_map(|d| std::fs::read_to_string(d.join("cgroup.procs")).ok())
        .flat_map(|text| {
            text.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake cgroup filesystem: plain folders with the files the layout is read from.
    fn touch(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "").unwrap();
    }

    #[test]
    fn the_layout_is_read_from_the_mounted_files() {
        let fs = tempfile::tempdir().unwrap();
        assert_eq!(layout(fs.path()), None);
        touch(&fs.path().join("cpu/cpu.cfs_quota_us"));
        assert_eq!(
            layout(fs.path()),
            Some(Layout::V1 {
                cpu: fs.path().join("cpu"),
                companions: vec![]
            })
        );
        touch(&fs.path().join("cpuacct/cpuacct.usage"));
        touch(&fs.path().join("unified/cgroup.procs"));
        assert_eq!(
            layout(fs.path()),
            Some(Layout::V1 {
                cpu: fs.path().join("cpu"),
                companions: vec![fs.path().join("cpuacct"), fs.path().join("unified")]
            })
        );
        touch(&fs.path().join("cgroup.controllers"));
        assert_eq!(layout(fs.path()), Some(Layout::V2(fs.path().to_path_buf())));
    }

    #[test]
    fn a_co_mounted_cpuacct_is_not_a_companion() {
        let fs = tempfile::tempdir().unwrap();
        touch(&fs.path().join("cpu,cpuacct/cpu.cfs_quota_us"));
        touch(&fs.path().join("cpu,cpuacct/cpuacct.usage"));
        std::os::unix::fs::symlink("cpu,cpuacct", fs.path().join("cpu")).unwrap();
        std::os::unix::fs::symlink("cpu,cpuacct", fs.path().join("cpuacct")).unwrap();
        assert_eq!(
            layout(fs.path()),
            Some(Layout::V1 {
                cpu: fs.path().join("cpu"),
                companions: vec![]
            })
        );
    }

    #[test]
    fn quotas_below_the_kernels_smallest_are_refused() {
        assert!(check_cores(0.25).is_ok() && check_cores(0.01).is_ok());
        for bad in [0.0, -1.0, 0.001, f64::NAN, f64::INFINITY] {
            assert!(check_cores(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_v1_cgroup_gets_its_quota_in_microseconds_can_change_it_and_goes_with_its_empty_parents() {
        // Plain folders stand in for the hierarchy: files written are files read back.
        let fs = tempfile::tempdir().unwrap();
        touch(&fs.path().join("cpu/cpu.cfs_quota_us"));
        let cg = CpuCgroup::create_in(fs.path(), Path::new("viewerfleet/g1/node-2"), Some(0.25))
            .unwrap();
        let dir = fs.path().join("cpu/viewerfleet/g1/node-2");
        assert_eq!(cg.dir(), dir);
        assert_eq!(
            std::fs::read_to_string(dir.join("cpu.cfs_quota_us")).unwrap(),
            "25000"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("cpu.cfs_period_us")).unwrap(),
            "100000"
        );
        cg.add_process(4242).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("cgroup.procs")).unwrap(),
            "4242"
        );
        assert_eq!(cg.pids(), vec![4242]);
        let mut cg = cg;
        cg.set_cores(Some(0.2)).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("cpu.cfs_quota_us")).unwrap(),
            "20000"
        );
        assert!(cg.set_cores(Some(0.0)).is_err(), "checked like a new quota");
        cg.set_cores(None).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("cpu.cfs_quota_us")).unwrap(),
            "-1"
        );
        // A real cgroup's control files vanish with it; plain files must go by hand here.
        for f in ["cpu.cfs_quota_us", "cpu.cfs_period_us", "cgroup.procs"] {
            std::fs::remove_file(dir.join(f)).unwrap();
        }
        assert!(cg.remove().is_empty());
        assert!(!cg.exists() && !fs.path().join("cpu/viewerfleet").exists());
        assert!(cg.remove().is_empty(), "idempotent");
    }
}
