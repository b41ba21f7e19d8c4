//! The state file of a local Grid: everything `grid down` and `gc` need to find and release
//! it (process groups, slot ranges, cgroups, load endpoints, files), written before anything
//! is started and updated as parts come up, so even a crash half-way leaves a complete
//! record.

use crate::model::kinds::NatKind;
use crate::sys::cgroup::CpuCgroup;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Default folder for local Grid state files (root is needed anyway for namespaces).
pub const DEFAULT_STATE_DIR: &str = "/run/viewerfleet/grid";

/// One local Grid, as recorded on disk.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LocalGridState {
    /// Hub URL the runs use (ends in `/`).
    pub hub_url: String,
    /// Process group of the hub (its PID; it leads its own group).
    pub hub_pgid: Option<u32>,
    /// Slot network: IPv6 prefix and namespace name prefix.
    pub prefix: String,
    pub name_prefix: String,
    /// Namespace of the target (refsite), slot index 0, and its address.
    pub target_namespace: String,
    pub target_address: String,
    /// The target's IPv4 address on the emulated internet (with `--nat`), else empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub target_ipv4: String,
    /// The viewer slots' NAT type (`--nat`, `none` for public slots), by its name; absent
    /// until the slots' network is made, and in states of Grids made before NATs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nat: Option<NatKind>,
    /// Port the target listens on inside its namespace.
    pub target_port: u16,
    pub nodes: Vec<NodeState>,
    /// Folder with rendered configs, wrappers, logs.
    pub dir: PathBuf,
    /// The Grid's registration secret and the controller's router credentials; none for
    /// Grids of earlier versions. Never part of the state's JSON (which commands may print):
    /// kept beside it in the Grid's folder, `secrets.json`, mode 0600 ([`save`], [`load`]).
    #[serde(skip)]
    pub secrets: Option<crate::grid::auth::GridSecrets>,
    /// The hub's event bus, `tcp://127.0.0.1:<publish>` and `…:<subscribe>`, which nodes
    /// join (with the registration secret).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub event_bus: Vec<String>,
}

/// One node of a local Grid.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NodeState {
    /// 1-based node number.
    pub number: u32,
    /// Node URL (its Java process, on loopback).
    pub url: String,
    /// Process group of the node (Java, its chromedriver and browsers).
    pub pgid: Option<u32>,
    /// First slot index and count of this node's viewer slots.
    pub first_slot: u32,
    pub slots: u32,
    /// Whether the slots were brought up (so `down` knows to remove them).
    pub slots_up: bool,
    /// The node's CPU cgroup (its Java process, ChromeDriver and browsers), with its quota
    /// if it has one; made before the node starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<CpuCgroup>,
    /// The node's load endpoint (`grid/node-load.py`): its process (leading its own group)
    /// and URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_pid: Option<u32>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub load_url: String,
}

impl LocalGridState {
    /// The credentials the controller sends to this Grid's hub, if it asks for some.
    pub fn controller_credentials(&self) -> Option<crate::grid::auth::GridCredentials> {
        self.secrets.as_ref().map(|s| s.controller.clone())
    }

    /// The origin browsers treat as secure: the target's plain-HTTP address.
    pub fn target_origin(&self) -> String {
        format!("http://[{}]:{}", self.target_address, self.target_port)
    }

    /// Address of slot `index` in `prefix` (base + index + 2, as `viewer-slots.sh` does).
    pub fn slot_address(prefix: &str, index: u32) -> Option<String> {
        let base = crate::model::net::parse_prefix(prefix).ok()?;
        Some(std::net::Ipv6Addr::from(u128::from(base) + u128::from(index) + 2).to_string())
    }

    /// Node owning slot namespace `ns`, if any.
    pub fn node_of_namespace(&self, ns: &str) -> Option<&NodeState> {
        let index: u32 = ns.strip_prefix(&self.name_prefix)?.parse().ok()?;
        self.nodes
            .iter()
            .find(|n| (n.first_slot..n.first_slot + n.slots).contains(&index))
    }
}

/// The file beside a state that holds its Grid's secrets.
pub const SECRETS_FILE: &str = "secrets.json";

/// Writes the state atomically (temp file + rename), and its secrets (if any) into the
/// Grid's folder, mode 0600.
pub fn save(path: &Path, state: &LocalGridState) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    if let Some(secrets) = &state.secrets {
        if !state.dir.as_os_str().is_empty() {
            crate::grid::auth::write_private(
                &state.dir.join(SECRETS_FILE),
                &serde_json::to_vec(secrets)?,
            )?;
        }
    }
    let tmp = path.with_extension("json.tmp");
    // Readable by its owner only: it names every process and namespace of the Grid.
    crate::grid::auth::write_private(&tmp, &serde_json::to_vec_pretty(state)?)?;
    std::fs::rename(tmp, path)
}

/// Reads a state file and its Grid's secrets (when they can be read); `Ok(None)` when there
/// is none.
pub fn load(path: &Path) -> std::io::Result<Option<LocalGridState>> {
    match std::fs::read(path) {
        Ok(bytes) => {
            let mut state: LocalGridState = serde_json::from_slice(&bytes)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
            if !state.dir.as_os_str().is_empty() {
                state.secrets = std::fs::read(state.dir.join(SECRETS_FILE))
                    .ok()
                    .and_then(|b| serde_json::from_slice(&b).ok());
            }
            Ok(Some(state))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Every state file in `dir` (`*.json`), with its path.
pub fn all(dir: &Path) -> Vec<(PathBuf, LocalGridState)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|p| Some((p.clone(), load(&p).ok()??)))
        .collect()
}

/// The local Grid whose hub is `url` (compared without trailing `/`), if one is recorded.
pub(crate) fn find_by_hub(dir: &Path, url: &str) -> Option<LocalGridState> {
    let want = url.trim_end_matches('/');
    all(dir)
        .into_iter()
        .map(|(_, s)| s)
        .find(|s| s.hub_url.trim_end_matches('/') == want)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips_and_finds_nodes_by_namespace() {
        let dir = tempfile::tempdir().unwrap();
        let state = LocalGridState {
            hub_url: "http://127.0.0.1:4444/".into(),
            name_prefix: "vfg12ab-".into(),
            target_address: "fd00::2".into(),
            target_port: 8080,
            nodes: vec![
                NodeState {
                    number: 1,
                    first_slot: 100,
                    slots: 3,
                    ..Default::default()
                },
                NodeState {
                    number: 2,
                    first_slot: 200,
                    slots: 3,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let path = dir.path().join("local.json");
        save(&path, &state).unwrap();
        assert_eq!(load(&path).unwrap(), Some(state.clone()));
        assert!(!std::fs::read_to_string(&path).unwrap().contains("\"nat\""));
        // The secrets live beside the state, 0600, never in its JSON.
        let with = LocalGridState {
            dir: dir.path().join("grid-1"),
            secrets: Some(crate::grid::auth::GridSecrets::generate()),
            ..state.clone()
        };
        std::fs::create_dir_all(&with.dir).unwrap();
        let other = dir.path().join("other.json");
        save(&other, &with).unwrap();
        let json = std::fs::read_to_string(&other).unwrap();
        let secrets = with.secrets.as_ref().unwrap();
        assert!(
            !json.contains(secrets.controller.password.expose()),
            "{json}"
        );
        assert!(!serde_json::to_string(&with)
            .unwrap()
            .contains(secrets.registration_secret.expose()));
        assert_eq!(load(&other).unwrap(), Some(with.clone()));
        {
            use std::os::unix::fs::PermissionsExt as _;
            for f in [other.clone(), with.dir.join(SECRETS_FILE)] {
                let mode = std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
                assert_eq!(mode, 0o600, "{}", f.display());
            }
        }
        std::fs::remove_file(&other).unwrap();
        assert_eq!(state.node_of_namespace("vfg12ab-201").unwrap().number, 2);
        assert!(state.node_of_namespace("vfg12ab-203").is_none());
        assert_eq!(state.target_origin(), "http://[fd00::2]:8080");
        assert!(find_by_hub(dir.path(), "http://127.0.0.1:4444").is_some());
        assert!(find_by_hub(dir.path(), "http://127.0.0.1:4445").is_none());
        assert_eq!(load(&dir.path().join("none.json")).unwrap(), None);
    }

    #[test]
    fn the_nat_is_written_and_read_by_its_name_as_before() {
        let json = |nat: &str| {
            format!(
                r#"{{"hub_url":"http://127.0.0.1:4444/","hub_pgid":null,"prefix":"fd00::/64","name_prefix":"vfg1-","target_namespace":"vfg1-0","target_address":"fd00::2",{nat}"target_port":8080,"nodes":[],"dir":""}}"#
            )
        };
        for (written, nat) in [
            (r#""nat":"home","#, Some(NatKind::Home)),
            (r#""nat":"none","#, Some(NatKind::None)),
            ("", None),
        ] {
            let text = json(written);
            let state: LocalGridState = serde_json::from_str(&text).unwrap();
            assert_eq!(state.nat, nat, "{text}");
            assert_eq!(serde_json::to_string(&state).unwrap(), text);
        }
    }
}
