//! The Node.js host of light peers (`light-host/host.mjs`): one process runs one page of
//! light peers — the target's own `light.js`, `p2p-media-loader-core` and hls.js parser,
//! loaded over HTTP as a browser loads them — with WebRTC from node-datachannel. It costs a
//! third of a Chromium page per peer (BENCHMARKS.md), so one machine holds several times
//! more light peers. The engine speaks to it over stdin/stdout (`read`, `stop`); the
//! process dies with the controller (PDEATHSIG, and end of stdin) and is stopped on every
//! exit path.

use crate::sys::process::{die_with_parent, terminate, Scope};
use nix::sys::signal::Signal;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// The oldest Node.js that runs the host (`module.register` for its loader hooks).
pub(crate) const MIN_NODE: (u32, u32) = (20, 6);
/// Every answer of the host on stdout starts with this; other lines are ignored.
const REPLY_PREFIX: &str = "viewerfleet-light ";
/// A stopped host has this long to exit before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// Where the host and its packages are, and the `node` that runs it.
#[derive(Debug, Clone, PartialEq)]
pub struct LightHostInstall {
    pub node: PathBuf,
    /// The folder holding `host.mjs` and `node_modules/` (node-datachannel, ws).
    pub dir: PathBuf,
}

/// Finds the host: `VIEWERFLEET_LIGHT_HOST` (a folder), else the source tree's
/// `light-host/` when this binary runs from it, else `<prefix>/share/viewerfleet/light-host`
/// (`make install`); and `node` on PATH, at least [`MIN_NODE`]. The error says what is
/// missing and how to get it.
pub fn locate() -> Result<LightHostInstall, String> {
    let env = std::env::var_os("VIEWERFLEET_LIGHT_HOST")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let candidates: Vec<PathBuf> = match env {
        Some(dir) => vec![dir],
        None => [
            crate::sys::hostinfo::source_tree().map(|t| t.join("light-host")),
            std::env::current_exe()
                .ok()
                .and_then(|e| e.canonicalize().ok())
                .and_then(|e| Some(e.parent()?.parent()?.join("share/viewerfleet/light-host"))),
        ]
        .into_iter()
        .flatten()
        .collect(),
    };
    let dir = candidates
        .iter()
        .find(|d| installed(d))
        .cloned()
        .ok_or_else(|| {
            let looked: Vec<String> = candidates.iter().map(|d| d.display().to_string()).collect();
            format!(
                "the Node.js light-peer host is not installed (looked at: {}); run `make light-deps` in the source tree (or `cd light-host && npm ci --ignore-scripts`), `make install`, or set VIEWERFLEET_LIGHT_HOST to a folder holding host.mjs and its node_modules; or set `swarm.runtime: browser`",
                if looked.is_empty() { "nowhere".into() } else { looked.join(", ") }
            )
        })?;
    let node = which("node").ok_or_else(|| {
        "`node` is not on PATH: install Node.js 20.6 or later (Debian: apt-get install nodejs), or set `swarm.runtime: browser`".to_string()
    })?;
    let version = node_version(&node)?;
    if version < MIN_NODE {
        return Err(format!(
            "{} is Node.js {}.{}; the light-peer host needs {}.{} or later (or set `swarm.runtime: browser`)",
            node.display(),
            version.0,
            version.1,
            MIN_NODE.0,
            MIN_NODE.1
        ));
    }
    Ok(LightHostInstall { node, dir })
}

/// A folder with the host script and the native WebRTC package it imports.
fn installed(dir: &Path) -> bool {
    dir.join("host.mjs").is_file()
        && dir.join("hooks.mjs").is_file()
        && dir
            .join("node_modules/node-datachannel/package.json")
            .is_file()
        && dir.join("node_modules/ws/package.json").is_file()
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(program))
            .find(|p| p.is_file())
    })
}

/// `node --version` as (major, minor).
fn node_version(node: &Path) -> Result<(u32, u32), String> {
    let out = std::process::Command::new(node)
        .arg("--version")
        .output()
        .map_err(|e| format!("running {} --version: {e}", node.display()))?;
    parse_node_version(&String::from_utf8_lossy(&out.stdout)).ok_or_else(|| {
        format!(
            "{} --version printed {:?}, not a Node.js version",
            node.display(),
            String::from_utf8_lossy(&out.stdout).trim()
        )
    })
}

fn parse_node_version(text: &str) -> Option<(u32, u32)> {
    let mut parts = text.trim().strip_prefix('v')?.split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// One running host: a page of light peers in a process.
pub struct LightHostProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl LightHostProcess {
    /// Starts the host on `url` (the target's light page with its query), its command run
    /// after `prefix` (e.g. `ip netns exec <slot>`, so its sockets are the slot's), its
    /// stderr appended to `log`.
    pub fn spawn(
        install: &LightHostInstall,
        prefix: &[String],
        url: &str,
        log: &Path,
    ) -> anyhow::Result<Self> {
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| anyhow::anyhow!("opening {}: {e}", log.display()))?;
        let mut cmd = match prefix.split_first() {
            Some((program, args)) => {
                let mut c = std::process::Command::new(program);
                c.args(args).arg(&install.node);
                c
            }
            None => std::process::Command::new(&install.node),
        };
        cmd.arg(install.dir.join("host.mjs"))
            .arg(url)
            .current_dir(&install.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        die_with_parent(&mut cmd, Signal::SIGKILL);
        let mut cmd = tokio::process::Command::from(cmd);
        cmd.kill_on_drop(true);
        let mut child = cmd
            .spawn()
            .map_err(|e| anyhow::anyhow!("starting {}: {e}", install.node.display()))?;
        let stdin = child.stdin.take();
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("the light host has no stdout"))?;
        Ok(Self {
            child,
            stdin,
            stdout: BufReader::new(stdout).lines(),
        })
    }

    /// Sends one command and returns the host's answer.
    async fn ask(&mut self, command: &str) -> anyhow::Result<serde_json::Value> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| anyhow::anyhow!("the light host is stopped"))?;
        stdin.write_all(format!("{command}\n").as_bytes()).await?;
        stdin.flush().await?;
        loop {
            let Some(line) = self.stdout.next_line().await? else {
                let status = self.child.try_wait().ok().flatten();
                anyhow::bail!(
                    "the light host exited{} (its log has why)",
                    status.map(|s| format!(" ({s})")).unwrap_or_default()
                );
            };
            if let Some(json) = line.strip_prefix(REPLY_PREFIX) {
                return serde_json::from_str(json).map_err(|e| {
                    anyhow::anyhow!("the light host answered in an unexpected form: {e}")
                });
            }
        }
    }

    /// `window.viewerfleetLight.read(follow)` of the host's page (`null` before it ran);
    /// `follow`: the live latency, in seconds, for its peers to hold their playheads at.
    pub async fn read(&mut self, follow: Option<f64>) -> anyhow::Result<serde_json::Value> {
        match follow {
            Some(s) if s.is_finite() => self.ask(&format!("read {s:.3}")).await,
            _ => self.ask("read").await,
        }
    }

    /// Closes every peer (tracker, data channels, requests) and ends the process.
    pub async fn stop(&mut self) {
        let _ = self.ask("stop").await;
        self.stdin = None;
        if tokio::time::timeout(STOP_GRACE, self.child.wait())
            .await
            .is_err()
        {
            terminate(&mut self.child, Scope::Process, STOP_GRACE).await;
        }
    }

    /// Ends the process without asking (a host that does not answer).
    pub async fn kill(&mut self) {
        self.stdin = None;
        terminate(&mut self.child, Scope::Process, STOP_GRACE).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_versions_are_read_from_its_version_line() {
        assert_eq!(parse_node_version("v20.20.2\n"), Some((20, 20)));
        assert_eq!(parse_node_version("v22.1.0"), Some((22, 1)));
        assert_eq!(parse_node_version("20.1"), None);
        assert_eq!(parse_node_version(""), None);
        assert!((20, 5) < MIN_NODE && (20, 20) >= MIN_NODE && (22, 0) >= MIN_NODE);
    }

    #[test]
    fn a_folder_without_its_packages_is_not_a_host() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("host.mjs"), "").unwrap();
        std::fs::write(dir.path().join("hooks.mjs"), "").unwrap();
        assert!(!installed(dir.path()));
        for pkg in ["node-datachannel", "ws"] {
            let p = dir.path().join("node_modules").join(pkg);
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join("package.json"), "{}").unwrap();
        }
        assert!(installed(dir.path()));
    }
}
