//! Shared by the Grid integration tests: a local Grid that is always taken down (even when
//! an assertion panics), a clip page, and checks that nothing is left behind.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use viewerfleet::grid::local::{self, LocalGridOptions};
use viewerfleet::grid::local_state::{self, LocalGridState};

/// A folder with hub.toml/node.toml to use instead of the copies built into viewerfleet:
/// `VIEWERFLEET_GRID_CONFIG`, else none (the tests run the built-in copies, as an installed
/// binary does).
pub fn config_dir() -> Option<PathBuf> {
    std::env::var_os("VIEWERFLEET_GRID_CONFIG").map(PathBuf::from)
}

/// A local Grid for one test; `Drop` runs `grid down` if the test did not.
pub struct GridGuard {
    pub state_file: PathBuf,
    pub state: LocalGridState,
}

impl GridGuard {
    pub async fn up(name: &str, nodes: u32, slots: u32, in_namespaces: bool) -> Self {
        Self::up_with(name, nodes, slots, |opts| {
            opts.slots_as_namespaces = in_namespaces
        })
        .await
    }

    /// As `up`, with the options changed by `adjust` (e.g. nodes' CPU quotas).
    pub async fn up_with(
        name: &str,
        nodes: u32,
        slots: u32,
        adjust: impl FnOnce(&mut LocalGridOptions),
    ) -> Self {
        let state_file = Path::new(local_state::DEFAULT_STATE_DIR)
            .join(format!("test-{name}-{}.json", std::process::id()));
        let mut opts = LocalGridOptions::new(nodes, slots, state_file.clone());
        opts.config_dir = config_dir();
        adjust(&mut opts);
        let cancel = tokio_util::sync::CancellationToken::new();
        let state = local::up(&opts, &cancel)
            .await
            .expect("local Grid comes up (needs root, java and the Selenium jar: make grid-deps)");
        Self { state_file, state }
    }

    /// Takes the Grid down and checks nothing of it is left.
    pub async fn down_and_check(&self) {
        assert!(local::down(&self.state_file).await.unwrap());
        assert_released(&self.state);
        assert!(!self.state_file.exists());
    }
}

impl Drop for GridGuard {
    fn drop(&mut self) {
        if self.state_file.exists() {
            let path = self.state_file.clone();
            let _ = std::thread::spawn(move || {
                tokio::runtime::Runtime::new()
                    .unwrap()
                    .block_on(local::down(&path))
            })
            .join();
        }
    }
}

/// No process group, namespace, link, cgroup, load endpoint or folder of the Grid is left.
pub fn assert_released(st: &LocalGridState) {
    let pids: Vec<u32> = st
        .hub_pgid
        .into_iter()
        .chain(st.nodes.iter().filter_map(|n| n.pgid))
        .chain(st.nodes.iter().filter_map(|n| n.load_pid))
        .collect();
    for cgroup in st.nodes.iter().filter_map(|n| n.cgroup.as_ref()) {
        assert!(!cgroup.exists(), "cgroup {} left", cgroup.dir().display());
        let grid_dir = cgroup.dir().parent().unwrap().to_path_buf();
        assert!(!grid_dir.exists(), "cgroup {} left", grid_dir.display());
    }
    for pid in pids {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let running = stat
            .rsplit_once(')')
            .is_some_and(|(_, r)| !r.trim_start().starts_with('Z'));
        assert!(!running, "process {pid} of the Grid still runs");
        // Nothing else in its process group either (chromedriver, browsers).
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            let Some((_, rest)) = stat.rsplit_once(')') else {
                continue;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            if fields.first() == Some(&"Z") {
                continue;
            }
            assert_ne!(
                fields.get(2).and_then(|g| g.parse::<u32>().ok()),
                Some(pid),
                "process {} is still in the group of {pid}",
                entry.file_name().to_string_lossy()
            );
        }
    }
    let netns = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    let netns = String::from_utf8_lossy(&netns.stdout);
    assert!(!netns.contains(&st.name_prefix), "namespaces left: {netns}");
    let links = std::process::Command::new("ip")
        .args(["-o", "link"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&links.stdout).contains(&st.name_prefix));
    assert!(!st.dir.exists(), "{} left", st.dir.display());
}

use super::clip as clip_support;
#[allow(unused_imports)] // Not every Grid test serves the clip page.
pub use clip_support::{make_clip, serve_clip, ClipTarget, CLIP_PAGE};
