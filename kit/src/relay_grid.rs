//! A real Selenium Grid 4 without browsers: the hub from the Selenium server jar with the
//! project's `grid/hub.toml`, and relay nodes that hand every session to a WebDriver
//! endpoint (the kit's stub), so every WebDriver call of a run crosses the real hub and a
//! real node as it would in a cloud fleet, while no browser costs CPU. For the hub
//! benchmark and the Grid scale test.
//!
//! A relay node is configured as Selenium documents it: `[relay]` with the endpoint's
//! `url`, `status-endpoint = "/status"` and `configs = ["<slots>", '<stereotype>']`, and
//! `override-max-sessions = true` so one node holds hundreds of sessions.
//!
//! Every process runs in its own process group and dies with this one; `Drop` stops them.

use anyhow::Context;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What to start.
#[derive(Debug, Clone)]
pub struct RelayGridOptions {
    /// The Selenium server jar.
    pub jar: PathBuf,
    /// `grid/hub.toml` (its queue and distributor settings are the cloud hub's); the port
    /// and event bus are given on the command line.
    pub hub_toml: PathBuf,
    /// The WebDriver endpoint every node relays to, `http://127.0.0.1:PORT`.
    pub endpoint: String,
    pub nodes: u32,
    pub sessions_per_node: u32,
    /// The hub's heap limit: what the JVM picks on a cloud hub of 8 GB (a quarter of RAM).
    pub hub_max_heap: String,
    /// Logs and rendered node configurations.
    pub work_dir: PathBuf,
    /// How long the hub and nodes get to be ready.
    pub ready_timeout: Duration,
}

impl RelayGridOptions {
    pub fn new(jar: PathBuf, hub_toml: PathBuf, endpoint: String, work_dir: PathBuf) -> Self {
        Self {
            jar,
            hub_toml,
            endpoint,
            nodes: 4,
            sessions_per_node: 250,
            hub_max_heap: "2g".into(),
            work_dir,
            ready_timeout: Duration::from_secs(180),
        }
    }
}

/// A running hub with its relay nodes.
pub struct RelayGrid {
    hub: Child,
    nodes: Vec<Child>,
    hub_port: u16,
    pub work_dir: PathBuf,
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn java(jar: &Path, heap: &str, args: &[String], log: &Path) -> anyhow::Result<Child> {
    use std::os::unix::process::CommandExt;
    let out = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let mut cmd = Command::new("java");
    cmd.arg(format!("-Xmx{heap}"))
        .arg("-jar")
        .arg(jar)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .process_group(0);
    crate::dies_with_parent(&mut cmd)
        .spawn()
        .context("starting java (Java 17 on PATH?)")
}

/// A relay node's configuration.
pub fn relay_node_toml(endpoint: &str, sessions: u32) -> String {
    format!(
        "[node]\ndetect-drivers = false\nselenium-manager = false\noverride-max-sessions = true\n\
         max-sessions = {sessions}\nsession-timeout = 600\n\n[relay]\nurl = \"{endpoint}\"\n\
         status-endpoint = \"/status\"\n\
         configs = [\"{sessions}\", '{{\"browserName\": \"chrome\", \"platformName\": \"linux\"}}']\n"
    )
}

impl RelayGrid {
    /// Starts the hub and the nodes and waits until every node is registered and UP.
    pub fn start(opts: &RelayGridOptions) -> anyhow::Result<Self> {
        if !opts.jar.exists() {
            anyhow::bail!(
                "the Selenium server jar is not at {}: run `make grid-deps`",
                opts.jar.display()
            );
        }
        std::fs::create_dir_all(&opts.work_dir)?;
        let (hub_port, publish, subscribe) = (free_port()?, free_port()?, free_port()?);
        let bus = [
            "--publish-events".to_string(),
            format!("tcp://127.0.0.1:{publish}"),
            "--subscribe-events".to_string(),
            format!("tcp://127.0.0.1:{subscribe}"),
        ];
        let mut hub_args: Vec<String> = [
            "hub",
            "--config",
            &opts.hub_toml.to_string_lossy(),
            "--host",
            "127.0.0.1",
            "--bind-host",
            "true",
            "--port",
            &hub_port.to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        hub_args.extend(bus.iter().cloned());
        let hub = java(
            &opts.jar,
            &opts.hub_max_heap,
            &hub_args,
            &opts.work_dir.join("hub.log"),
        )?;
        let mut grid = RelayGrid {
            hub,
            nodes: Vec::new(),
            hub_port,
            work_dir: opts.work_dir.clone(),
        };
        for n in 1..=opts.nodes {
            let toml = opts.work_dir.join(format!("relay-{n}.toml"));
            std::fs::write(
                &toml,
                relay_node_toml(&opts.endpoint, opts.sessions_per_node),
            )?;
            let mut args: Vec<String> = [
                "node",
                "--config",
                &toml.to_string_lossy(),
                "--host",
                "127.0.0.1",
                "--port",
                &free_port()?.to_string(),
                "--grid-url",
                &format!("http://127.0.0.1:{hub_port}"),
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            args.extend(bus.iter().cloned());
            let log = opts.work_dir.join(format!("relay-{n}.log"));
            grid.nodes.push(java(&opts.jar, "512m", &args, &log)?);
        }
        grid.wait_ready(opts)?;
        Ok(grid)
    }

    fn wait_ready(&mut self, opts: &RelayGridOptions) -> anyhow::Result<()> {
        let deadline = Instant::now() + opts.ready_timeout;
        let want_slots = opts.nodes * opts.sessions_per_node;
        loop {
            if let Some(status) = self.exited() {
                anyhow::bail!("{status}; see the logs in {}", self.work_dir.display());
            }
            if let Ok(status) = self.status() {
                let nodes = status["value"]["nodes"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                let up: Vec<&serde_json::Value> =
                    nodes.iter().filter(|n| n["availability"] == "UP").collect();
                let slots: usize = up
                    .iter()
                    .map(|n| n["slots"].as_array().map_or(0, Vec::len))
                    .sum();
                if up.len() == opts.nodes as usize && slots as u32 >= want_slots {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                anyhow::bail!(
                    "the hub and {} relay nodes were not ready within {:?}; see the logs in {}",
                    opts.nodes,
                    opts.ready_timeout,
                    self.work_dir.display()
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// A process of the Grid that ended, if any.
    fn exited(&mut self) -> Option<String> {
        if let Ok(Some(status)) = self.hub.try_wait() {
            return Some(format!("the hub exited ({status})"));
        }
        for (i, node) in self.nodes.iter_mut().enumerate() {
            if let Ok(Some(status)) = node.try_wait() {
                return Some(format!("relay node {} exited ({status})", i + 1));
            }
        }
        None
    }

    /// `http://127.0.0.1:PORT/`.
    pub fn hub_url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.hub_port)
    }

    /// The hub's PID (its JVM).
    pub fn hub_pid(&self) -> u32 {
        self.hub.id()
    }

    /// The hub's `/status`.
    pub fn status(&self) -> anyhow::Result<serde_json::Value> {
        let body = http_get(self.hub_port, "/status")?;
        serde_json::from_str(&body).context("the hub's /status is not JSON")
    }

    /// Sessions the hub lists in `/status`.
    pub fn sessions(&self) -> anyhow::Result<usize> {
        let status = self.status()?;
        Ok(status["value"]["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|n| n["slots"].as_array().cloned().unwrap_or_default())
            .filter(|s| !s["session"].is_null())
            .count())
    }
}

impl Drop for RelayGrid {
    fn drop(&mut self) {
        let mut all: Vec<&mut Child> = self.nodes.iter_mut().collect();
        all.push(&mut self.hub);
        for child in &all {
            // SAFETY: signalling our own child's process group.
            unsafe {
                libc::kill(-(child.id() as i32), libc::SIGTERM);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for child in all {
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
            // SAFETY: as above.
            unsafe {
                libc::kill(-(child.id() as i32), libc::SIGKILL);
            }
            let _ = child.wait();
        }
    }
}

/// One `GET` on loopback, HTTP/1.0: the body.
fn http_get(port: u16, path: &str) -> anyhow::Result<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nAccept: application/json\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let (_, body) = text
        .split_once("\r\n\r\n")
        .context("an HTTP answer without a body")?;
    Ok(body.to_string())
}

/// A process's CPU seconds (user + system), resident memory and peak resident memory
/// (`VmHWM`), in bytes, from /proc.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    pub cpu_s: f64,
    pub rss: u64,
    pub peak_rss: u64,
}

pub fn process_usage(pid: u32) -> Option<Usage> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the command: state is field 3, utime 14 and stime 15 (1-based in proc(5)).
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf has no side effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb = |key: &str| -> Option<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse::<u64>()
            .ok()
            .map(|k| k * 1024)
    };
    Some(Usage {
        cpu_s: ticks / hz,
        rss: kb("VmRSS:")?,
        peak_rss: kb("VmHWM:")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relay_node_is_configured_as_selenium_documents_it() {
        let toml = relay_node_toml("http://127.0.0.1:9", 250);
        for needle in [
            "[relay]",
            "url = \"http://127.0.0.1:9\"",
            "status-endpoint = \"/status\"",
            "configs = [\"250\", '{\"browserName\": \"chrome\", \"platformName\": \"linux\"}']",
            "override-max-sessions = true",
            "max-sessions = 250",
        ] {
            assert!(toml.contains(needle), "{needle} in {toml}");
        }
    }

    #[test]
    fn this_process_has_usage() {
        let u = process_usage(std::process::id()).unwrap();
        assert!(u.cpu_s >= 0.0 && u.rss > 0 && u.peak_rss >= u.rss);
    }
}
