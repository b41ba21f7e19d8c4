//! A supervised chromedriver process on this machine: started on a free loopback port,
//! checked ready through `/status`, restarted if it dies mid-run, and killed with its whole
//! process group (the browsers it started included) on shutdown.

use crate::sys::process::{self, Scope};
use nix::sys::signal::Signal;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

/// Time chromedriver gets to close its browsers after SIGTERM.
const DRIVER_GRACE: Duration = Duration::from_secs(3);
use tokio::process::{Child, Command};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error("chromedriver not found at {0}; install it with `apt-get install -y chromium-driver` (or set fleet.chromedriver)")]
    MissingDriver(PathBuf),
    #[error("Chromium not found at {0}; install it with `apt-get install -y chromium` (or set fleet.chromium)")]
    MissingBrowser(PathBuf),
    #[error("chromedriver did not become ready within {0:?}: {1}")]
    NotReady(Duration, String),
    #[error("starting chromedriver: {0}")]
    Spawn(std::io::Error),
}

/// Checks that the driver and browser binaries exist before anything is started.
pub fn preflight(driver: &Path, browser: &Path) -> Result<(), DriverError> {
    if !driver.exists() {
        return Err(DriverError::MissingDriver(driver.to_path_buf()));
    }
    if !browser.exists() {
        return Err(DriverError::MissingBrowser(browser.to_path_buf()));
    }
    Ok(())
}

pub struct ChromeDriver {
    binary: PathBuf,
    port: u16,
    child: Arc<Mutex<Option<Child>>>,
    stop: CancellationToken,
}

impl ChromeDriver {
    /// Starts chromedriver and waits until it answers `/status` as ready.
    pub async fn start(binary: &Path) -> Result<Self, DriverError> {
        let port = crate::sys::net::free_port().map_err(DriverError::Spawn)?;
        let child = spawn(binary, port).map_err(DriverError::Spawn)?;
        let driver = Self {
            binary: binary.to_path_buf(),
            port,
            child: Arc::new(Mutex::new(Some(child))),
            stop: CancellationToken::new(),
        };
        driver.wait_ready(Duration::from_secs(20)).await?;
        driver.supervise();
        Ok(driver)
    }

    /// The driver's process id (its browsers are its descendants), while it runs.
    pub async fn pid(&self) -> Option<u32> {
        self.child.lock().await.as_ref().and_then(|c| c.id())
    }

    /// WebDriver endpoint, ending in `/`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    async fn wait_ready(&self, limit: Duration) -> Result<(), DriverError> {
        let client = reqwest::Client::new();
        let url = format!("{}status", self.url());
        let deadline = tokio::time::Instant::now() + limit;
        let mut last = String::from("no answer");
        while tokio::time::Instant::now() < deadline {
            if let Some(child) = self.child.lock().await.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(DriverError::NotReady(
                        limit,
                        format!("it exited with {status}"),
                    ));
                }
            }
            match client
                .get(&url)
                .timeout(Duration::from_secs(2))
                .send()
                .await
            {
                Ok(resp) => {
                    let body: serde_json::Value = resp.json().await.unwrap_or_default();
                    if body["value"]["ready"] == serde_json::Value::Bool(true) {
                        return Ok(());
                    }
                    last = format!("status said {body}");
                }
                Err(err) => last = err.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(DriverError::NotReady(limit, last))
    }

    /// Restarts chromedriver on the same port if it dies before `shutdown`.
    fn supervise(&self) {
        let child = self.child.clone();
        let stop = self.stop.clone();
        let binary = self.binary.clone();
        let port = self.port;
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                }
                let mut guard = child.lock().await;
                let exited = match guard.as_mut() {
                    Some(c) => matches!(c.try_wait(), Ok(Some(_))),
                    None => return,
                };
                if exited && !stop.is_cancelled() {
                    tracing::warn!(
                        "chromedriver exited unexpectedly; restarting it (its browsers are lost)"
                    );
                    match spawn(&binary, port) {
                        Ok(c) => *guard = Some(c),
                        Err(err) => tracing::error!("restarting chromedriver failed: {err}"),
                    }
                }
            }
        });
    }

    /// Kills chromedriver and every process in its group (browsers included). Idempotent.
    pub async fn shutdown(&self) {
        self.stop.cancel();
        if let Some(mut child) = self.child.lock().await.take() {
            kill_group(&mut child).await;
        }
    }
}

fn spawn(binary: &Path, port: u16) -> std::io::Result<Child> {
    let mut cmd = Command::new(binary);
    cmd.arg(format!("--port={port}"))
        .arg("--allowed-ips=127.0.0.1")
        .arg("--log-level=WARNING")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .process_group(0);
    // Even `kill -9` of the controller takes chromedriver down.
    process::die_with_parent(cmd.as_std_mut(), Signal::SIGTERM);
    cmd.spawn()
}

/// Stops chromedriver and every browser of its process group.
pub async fn kill_group(child: &mut Child) {
    process::terminate(child, Scope::Group, DRIVER_GRACE).await;
}
