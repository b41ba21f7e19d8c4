//! Viewers: one WebDriver session each (fantoccini), or one tab each in a browser shared
//! by several viewers (`browser`, WebDriver BiDi). Creates the session with the project's
//! Chromium profile, applies HTTP throttling through ChromeDriver/CDP (bytes/s), installs
//! the target's stats probe and the decode lever, opens the viewer page, waits for the
//! first frame, then reads stats on demand. Every WebDriver call has a timeout (fantoccini
//! has none), and `close` deletes the session (or the tab) and the profile on every path.

mod bidi;
pub(crate) mod browser;
mod commands;
pub mod gc;
pub mod light_host;

pub use browser::SharedBrowser;

use crate::model::kinds::Throttling;
pub use crate::model::scenario::{BrowserSetup, CHROMIUM_FLAGS};
use crate::model::scenario::{LinkProfile, NetworkProfile};
use crate::target::{PlayerStats, Target};
use commands::{CdpCommand, NetworkConditions};
use fantoccini::wd::Capabilities;
use fantoccini::{Client, ClientBuilder};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The decode lever: deselects every video track as soon as it is known, so Chromium
/// neither decodes nor paints video while the player fetches and appends exactly as before
/// (see the script's header and BENCHMARKS.md). Installed with the stats probe.
pub const NO_VIDEO_TRACK_SCRIPT: &str = include_str!("no_video_track.js");

/// Prefix of every profile folder (`<prefix><controller pid>-<random>`): `gc --local` finds
/// leftovers of dead controllers by it.
pub const PROFILE_PREFIX: &str = "viewerfleet-profile-";

/// Removes this process's profile folders that outlived their browsers (Chromium may still
/// write while it exits, so `close` can miss one). Call once every session is closed and
/// the drivers are down; returns how many were removed.
pub fn remove_own_profiles() -> usize {
    let mine = format!("{PROFILE_PREFIX}{}-", std::process::id());
    // A browser of this run still exiting (one whose start a stop signal cut short) would
    // write into its folder again after it is removed: wait for them, a bounded while,
    // then end whichever is left.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let alive = gc::browsers_of(&mine);
        if alive.is_empty() {
            break;
        }
        if std::time::Instant::now() >= deadline {
            alive
                .into_iter()
                .for_each(crate::sys::process::kill_process);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&mine))
        .filter(|e| std::fs::remove_dir_all(e.path()).is_ok())
        .count()
}

/// A fresh profile folder; the controller's PID in its name lets `gc` tell a live run's
/// profiles from leftovers.
fn new_profile() -> Result<tempfile::TempDir, ViewerError> {
    tempfile::Builder::new()
        .prefix(&format!("{PROFILE_PREFIX}{}-", std::process::id()))
        .tempdir()
        .map_err(ViewerError::Profile)
}

/// Where one viewer's browser is to be created.
#[derive(Debug, Clone)]
pub struct ViewerSlot {
    /// WebDriver endpoint (chromedriver or Grid hub), ending in `/`.
    pub webdriver_url: String,
    /// The credentials the endpoint's router asks for (a Grid with basic authentication),
    /// sent as an `Authorization` header with every WebDriver request and the BiDi
    /// handshake; `None`: the endpoint asks for none.
    pub grid_auth: Option<std::sync::Arc<crate::grid::auth::GridCredentials>>,
    /// Chromium binary for `goog:chromeOptions.binary` (a wrapper that enters a namespace
    /// for `netns`), or `None` to leave it to the node.
    pub chrome_binary: Option<String>,
    /// Extra Chromium arguments this slot needs (e.g. `--remote-debugging-pipe`).
    pub extra_args: Vec<String>,
    /// Node or slot name, for raw data.
    pub node: String,
    /// The viewer's own address, where it has one.
    pub address: Option<String>,
    /// The addresses other viewers see it at (its IPv6, its NAT's public IPv4), where the
    /// fleet knows them: how the report tells which class a peer belongs to.
    pub public_addresses: Vec<String>,
    /// The NAT its slot sits behind, where the fleet knows it (`None`: unknown, e.g. a
    /// foreign Grid's node).
    pub nat: Option<crate::model::kinds::NatKind>,
    /// What the slot's kernel queues (tc) already apply below the browser.
    pub tc: TcCoverage,
    /// Viewers whose browser runs in this slot (`viewers.per_browser`): they share its
    /// address and, with tc, its link, which is then shaped at that many times the profile.
    pub viewers: u32,
}

/// Which parts of a viewer's profile the tc shaping of its slot already applies below the
/// browser (rates both ways; latency needs netem), so the browser throttles only the rest.
/// Not a link's figures (those are `LinkProfile`): yes or no for each part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcCoverage {
    pub rates: bool,
    pub latency: bool,
}

impl TcCoverage {
    /// A slot with no shaping of its own (local fleet, a Grid node without slots).
    pub const NONE: TcCoverage = TcCoverage {
        rates: false,
        latency: false,
    };
}

/// Timeouts for WebDriver calls.
#[derive(Debug, Clone)]
pub struct ViewerTimeouts {
    pub session: Duration,
    pub command: Duration,
    /// From opening the page to the first frame.
    pub first_frame: Duration,
}

impl Default for ViewerTimeouts {
    fn default() -> Self {
        Self {
            session: Duration::from_secs(120),
            command: Duration::from_secs(60),
            first_frame: Duration::from_secs(90),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ViewerError {
    #[error("session not created: {0}")]
    Session(String),
    #[error("{what} timed out after {after:?}")]
    Timeout { what: &'static str, after: Duration },
    #[error("{what}: {message}")]
    Command { what: &'static str, message: String },
    #[error("no first frame within {after:?}{}", last_error.as_ref().map(|e| format!(" (page error: {e})")).unwrap_or_default())]
    NeverPlayed {
        after: Duration,
        last_error: Option<String>,
    },
    #[error("creating a browser profile: {0}")]
    Profile(std::io::Error),
    /// The viewer's tab in a shared browser crashed (its renderer died); the browser and
    /// its other viewers go on.
    #[error("tab crashed")]
    TabCrashed,
    /// The shared browser (or its session) is gone, with every viewer in it.
    #[error("the browser is gone ({0})")]
    BrowserGone(String),
}

/// A running viewer: its own session and profile, or a tab of a shared browser. Call
/// `close` when done.
pub struct Viewer {
    kind: Kind,
    timeouts: ViewerTimeouts,
    no_video_track: bool,
    pub session_id: Option<String>,
}

enum Kind {
    Session {
        client: Client,
        profile: Option<tempfile::TempDir>,
    },
    Tab(browser::Tab),
}

impl Viewer {
    /// Creates the WebDriver session for a slot with the project's setup.
    pub async fn create(slot: &ViewerSlot, timeouts: ViewerTimeouts) -> Result<Self, ViewerError> {
        Self::create_with(slot, timeouts, &BrowserSetup::project()).await
    }

    /// Creates the WebDriver session with the given set-up (the run plan's).
    pub async fn create_with(
        slot: &ViewerSlot,
        timeouts: ViewerTimeouts,
        setup: &BrowserSetup,
    ) -> Result<Self, ViewerError> {
        let profile = new_profile()?;
        let caps = capabilities_with(&setup.flags, slot, Some(profile.path().to_path_buf()));
        let client = connect(slot, &timeouts, caps).await?;
        let session_id = client.session_id().await.ok().flatten();
        Ok(Self {
            kind: Kind::Session {
                client,
                profile: Some(profile),
            },
            timeouts,
            no_video_track: setup.no_video_track,
            session_id,
        })
    }

    /// A viewer in a tab of a shared browser (made by `SharedBrowser::open_viewer`).
    fn tab(tab: browser::Tab, timeouts: ViewerTimeouts, no_video_track: bool) -> Self {
        let session_id = tab.browser().session_id.clone();
        Self {
            kind: Kind::Tab(tab),
            timeouts,
            no_video_track,
            session_id,
        }
    }

    /// The shared browser this viewer plays in, when it has no browser of its own.
    pub fn shared_browser(&self) -> Option<&std::sync::Arc<SharedBrowser>> {
        match &self.kind {
            Kind::Tab(tab) => Some(tab.browser()),
            Kind::Session { .. } => None,
        }
    }

    /// Applies the viewer's network profile as its mode asks (see `Throttling`): per-request
    /// HTTP rules (`http-only`), Chromium's whole-browser emulation (`cdp-all`), or, with
    /// `tc` (rates applied by the slot), the latency the slot could not apply (a kernel
    /// without netem), to HTTP. A tc slot shared by several viewers is shaped at their
    /// summed rates, so each viewer's HTTP is also held to its own profile in its tab.
    /// Throughputs go to Chromium in bytes/s.
    ///
    /// That latency rule carries the link's rates too (the same as tc's, so they take
    /// nothing more away): CDP's latency only holds the response headers, and without rates
    /// of its own it then hands over at once what tc delivered meanwhile, so a transfer
    /// longer than the latency took no longer than without it (measured, 2000/300 kbit/s +
    /// 500 ms: 500 KB GET 2.07 s and 100 KB POST 2.76 s; with the rates 2.51 s and 3.18 s,
    /// as on the link; `tests/real/throttle_modes.rs`).
    pub async fn throttle(
        &self,
        profile: &NetworkProfile,
        slot: &ViewerSlot,
    ) -> Result<(), ViewerError> {
        let bytes = |kbps: Option<u32>| kbps.map(|k| k as u64 * 1000 / 8);
        let latency = profile.link.latency_ms.unwrap_or(0);
        // Unset (a Grid's fleet-best): tc where the slot shapes, HTTP-only rules otherwise.
        let mode = profile.apply.unwrap_or(if slot.tc.rates {
            Throttling::Tc
        } else {
            Throttling::HttpOnly
        });
        match mode {
            Throttling::CdpAll => self.emulate_network(&profile.link).await,
            Throttling::HttpOnly => {
                self.http_rules(commands::http_only_rules(
                    latency,
                    bytes(profile.link.download_kbps),
                    bytes(profile.link.upload_kbps),
                ))
                .await
            }
            Throttling::Tc if !slot.tc.rates => Err(ViewerError::Command {
                what: "network profile",
                message: format!(
                    "`apply: tc` needs a slot shaped by tc, and {} has none; use a fleet with \
                     viewer slots (netns, a Grid built with viewer slots) or `apply: http-only`",
                    slot.node
                ),
            }),
            Throttling::Tc if slot.viewers > 1 => {
                let missing_latency = if slot.tc.latency { 0 } else { latency };
                self.http_rules(commands::http_only_rules(
                    missing_latency,
                    bytes(profile.link.download_kbps),
                    bytes(profile.link.upload_kbps),
                ))
                .await
            }
            Throttling::Tc if latency > 0 && !slot.tc.latency => {
                self.http_rules(commands::http_only_rules(
                    latency,
                    bytes(profile.link.download_kbps),
                    bytes(profile.link.upload_kbps),
                ))
                .await
            }
            Throttling::Tc => Ok(()),
        }
    }

    /// Chromium's whole-browser emulation: ChromeDriver's network conditions for a session
    /// of its own, the same CDP command on the tab for a shared browser (ChromeDriver's
    /// conditions would apply to every tab of the session).
    async fn emulate_network(&self, link: &LinkProfile) -> Result<(), ViewerError> {
        match &self.kind {
            Kind::Session { client, .. } => self
                .call(
                    "network conditions",
                    client.issue_cmd(NetworkConditions::from_link(link)),
                )
                .await
                .map(|_| ()),
            Kind::Tab(tab) => {
                let c = NetworkConditions::from_link(link);
                let unlimited = |v: u64| if v == 0 { -1 } else { v as i64 };
                tab.cdp(
                    "enabling the network domain",
                    "Network.enable",
                    serde_json::json!({}),
                )
                .await?;
                tab.cdp(
                    "network conditions",
                    "Network.emulateNetworkConditions",
                    serde_json::json!({
                        "offline": false,
                        "latency": c.latency_ms,
                        "downloadThroughput": unlimited(c.download_bytes_per_s),
                        "uploadThroughput": unlimited(c.upload_bytes_per_s),
                    }),
                )
                .await
                .map(|_| ())
            }
        }
    }

    async fn http_rules(&self, params: serde_json::Value) -> Result<(), ViewerError> {
        self.cdp(
            "enabling the network domain",
            "Network.enable",
            serde_json::json!({}),
        )
        .await?;
        self.cdp(
            "HTTP throttling rules",
            "Network.emulateNetworkConditionsByRule",
            params,
        )
        .await
        .map(|_| ())
    }

    /// One CDP command: through ChromeDriver's `goog/cdp/execute` for a session of its own,
    /// on the tab's CDP session for a shared browser.
    async fn cdp(
        &self,
        what: &'static str,
        method: &str,
        params: serde_json::Value,
    ) -> Result<serde_json::Value, ViewerError> {
        match &self.kind {
            Kind::Session { client, .. } => {
                self.call_repeatable(what, || {
                    client.issue_cmd(CdpCommand::new(method, params.clone()))
                })
                .await
            }
            Kind::Tab(tab) => tab.cdp(what, method, params).await,
        }
    }

    /// Installs the target's probe (and the decode lever) so they run before any page
    /// script, then opens the page.
    pub async fn open(&self, target: &dyn Target, p2p: bool) -> Result<Instant, ViewerError> {
        self.init_script("installing the stats probe", target.probe_script())
            .await?;
        if self.no_video_track {
            self.init_script("installing the decode lever", NO_VIDEO_TRACK_SCRIPT)
                .await?;
        }
        let opened = Instant::now();
        self.goto(&target.viewer_url(p2p)).await?;
        Ok(opened)
    }

    /// Installs a script that runs before any page script on every page this viewer opens
    /// (CDP `Page.addScriptToEvaluateOnNewDocument`).
    pub async fn add_init_script(&self, source: &str) -> Result<(), ViewerError> {
        self.init_script("installing a page script", source).await
    }

    async fn init_script(&self, what: &'static str, source: &str) -> Result<(), ViewerError> {
        self.cdp(
            what,
            "Page.addScriptToEvaluateOnNewDocument",
            serde_json::json!({ "source": source }),
        )
        .await
        .map(|_| ())
    }

    /// Opens any page (not a target's viewer page: measurement pages, checks).
    pub async fn goto(&self, url: &str) -> Result<(), ViewerError> {
        match &self.kind {
            Kind::Session { client, .. } => {
                self.call_repeatable("opening a page", || client.goto(url))
                    .await
            }
            Kind::Tab(tab) => tab.navigate(url).await,
        }
    }

    /// Runs an async script in the page (WebDriver's execute/async: the script calls its
    /// last argument with the result).
    pub async fn execute_async(
        &self,
        script: &str,
        args: Vec<serde_json::Value>,
    ) -> Result<serde_json::Value, ViewerError> {
        match &self.kind {
            Kind::Session { client, .. } => {
                self.call("running a page script", client.execute_async(script, args))
                    .await
            }
            Kind::Tab(tab) => {
                let args = serde_json::Value::Array(args).to_string();
                let expression = format!(
                    "new Promise((resolve, reject) => {{ try {{ (function() {{ {script}\n}}).apply(null, {args}.concat([resolve])); }} catch (e) {{ reject(e); }} }}).then((v) => JSON.stringify(v === undefined ? null : v))"
                );
                tab.evaluate_json("running a page script", expression, true)
                    .await
            }
        }
    }

    /// Runs a script in the page and returns its value (a viewer with a session of its own;
    /// a tab answers with an error).
    pub async fn execute(
        &self,
        what: &'static str,
        script: &str,
    ) -> Result<serde_json::Value, ViewerError> {
        match &self.kind {
            Kind::Session { client, .. } => {
                self.call_repeatable(what, || client.execute(script, vec![]))
                    .await
            }
            Kind::Tab(_) => Err(ViewerError::Command {
                what,
                message: "not available in a shared browser's tab".into(),
            }),
        }
    }

    /// Reads the player's stats once.
    pub async fn read(&self, target: &dyn Target) -> Result<PlayerStats, ViewerError> {
        let value = match &self.kind {
            Kind::Session { client, .. } => {
                self.call_repeatable("reading player stats", || {
                    client.execute(target.read_script(), vec![])
                })
                .await?
            }
            Kind::Tab(tab) => {
                let expression =
                    format!("JSON.stringify((() => {{ {}\n}})())", target.read_script());
                tab.evaluate_json("reading player stats", expression, false)
                    .await?
            }
        };
        serde_json::from_value(value).map_err(|e| ViewerError::Command {
            what: "reading player stats",
            message: format!("unexpected answer: {e}"),
        })
    }

    /// Polls the stats until the first frame has played; returns time to first frame (ms,
    /// from navigation start as the page measures it).
    pub async fn wait_first_frame(
        &self,
        target: &dyn Target,
        poll: Duration,
    ) -> Result<f64, ViewerError> {
        let deadline = Instant::now() + self.timeouts.first_frame;
        let mut last_error = None;
        loop {
            let stats = self.read(target).await?;
            if let Some(ms) = stats.first_frame_ms {
                return Ok(ms);
            }
            last_error = stats.last_error.or(last_error);
            if Instant::now() >= deadline {
                return Err(ViewerError::NeverPlayed {
                    after: self.timeouts.first_frame,
                    last_error,
                });
            }
            tokio::time::sleep(poll).await;
        }
    }

    /// Deletes the session (closing the browser) and the profile, or closes the viewer's
    /// tab and browser context (its shared browser stays up). Never fails: a session that
    /// cannot be deleted is logged, and its driver's shutdown kills the browser.
    pub async fn close(self) {
        match self.kind {
            Kind::Session {
                client,
                mut profile,
            } => {
                let id = self.session_id.clone().unwrap_or_default();
                match tokio::time::timeout(self.timeouts.command, client.close()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(err)) => tracing::debug!("deleting session {id}: {err}"),
                    Err(_) => tracing::warn!("deleting session {id} timed out"),
                }
                if let Some(profile) = profile.take() {
                    let path = profile.path().to_path_buf();
                    // Chromium may still be writing as it exits; removal is retried by `gc`.
                    if let Err(err) = profile.close() {
                        tracing::debug!("removing profile {}: {err}", path.display());
                    }
                }
            }
            Kind::Tab(tab) => tab.close().await,
        }
    }

    /// A command sent once.
    async fn call<T>(
        &self,
        what: &'static str,
        fut: impl std::future::Future<Output = Result<T, fantoccini::error::CmdError>>,
    ) -> Result<T, ViewerError> {
        self.attempt(what, fut)
            .await?
            .map_err(|e| command_error(what, &e))
    }

    /// A command that is safe to send twice (CDP set-up, navigation, stats reads): sent
    /// again, up to [`RESENDS`] times, when it failed on its way to the browser (a Grid
    /// node or hub that lost its connection, a dropped connection), so one broken hop
    /// among thousands does not cost a viewer. Each attempt has the command timeout.
    async fn call_repeatable<T, F, Fut>(
        &self,
        what: &'static str,
        mut send: F,
    ) -> Result<T, ViewerError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, fantoccini::error::CmdError>>,
    {
        let mut resent = 0;
        loop {
            match self.attempt(what, send()).await? {
                Ok(value) => return Ok(value),
                Err(e) if resent < RESENDS && never_reached_the_browser(&e) => {
                    resent += 1;
                    tracing::warn!(
                        session = self.session_id.as_deref().unwrap_or(""),
                        "{what}: {e}; sending it again ({resent} of {RESENDS})"
                    );
                    tokio::time::sleep(crate::sys::backoff::jitter(RESEND_BACKOFF * resent)).await;
                }
                Err(e) => return Err(command_error(what, &e)),
            }
        }
    }

    /// One attempt within the command timeout (fantoccini has none): the command's own
    /// answer, or a timeout.
    async fn attempt<T>(
        &self,
        what: &'static str,
        fut: impl std::future::Future<Output = Result<T, fantoccini::error::CmdError>>,
    ) -> Result<Result<T, fantoccini::error::CmdError>, ViewerError> {
        tokio::time::timeout(self.timeouts.command, fut)
            .await
            .map_err(|_| ViewerError::Timeout {
                what,
                after: self.timeouts.command,
            })
    }
}

fn command_error(what: &'static str, e: &fantoccini::error::CmdError) -> ViewerError {
    ViewerError::Command {
        what,
        message: e.to_string(),
    }
}

/// How many times a repeatable command is sent again after a failure on the way.
const RESENDS: u32 = 2;
/// Wait before the n-th resend: n times this.
const RESEND_BACKOFF: Duration = Duration::from_millis(250);

/// Whether a command failed between the controller and the browser rather than in it: the
/// connection to the endpoint failed or dropped, or a Grid hub or node answered that it
/// could not forward the request (Selenium's "Failed to execute request" from a node's
/// client, "Unable to execute request" from the hub's router).
fn never_reached_the_browser(e: &fantoccini::error::CmdError) -> bool {
    use fantoccini::error::{CmdError, ErrorStatus};
    match e {
        CmdError::Failed(_) | CmdError::FailedC(_) | CmdError::Lost(_) => true,
        CmdError::Standard(w) => {
            w.error == ErrorStatus::UnknownError
                && (w.message.starts_with("Failed to execute request")
                    || w.message.starts_with("Unable to execute request"))
        }
        _ => false,
    }
}

/// W3C capabilities with `goog:chromeOptions` for one viewer.
pub fn capabilities(slot: &ViewerSlot, profile: Option<PathBuf>) -> Capabilities {
    capabilities_with(CHROMIUM_FLAGS, slot, profile)
}

/// Capabilities with the given base flags instead of the project's.
pub(crate) fn capabilities_with(
    flags: &[impl AsRef<str>],
    slot: &ViewerSlot,
    profile: Option<PathBuf>,
) -> Capabilities {
    let mut args: Vec<String> = flags.iter().map(|s| s.as_ref().to_string()).collect();
    if let Some(dir) = profile {
        args.push(format!("--user-data-dir={}", dir.display()));
    }
    args.extend(slot.extra_args.iter().cloned());
    let mut options = serde_json::json!({ "args": args });
    if let Some(binary) = &slot.chrome_binary {
        options["binary"] = serde_json::Value::String(binary.clone());
    }
    let mut caps = Capabilities::new();
    caps.insert("browserName".into(), "chrome".into());
    caps.insert("goog:chromeOptions".into(), options);
    caps.insert("pageLoadStrategy".into(), "eager".into());
    caps
}

/// One WebDriver session at `slot` with `caps`, within the session timeout.
async fn connect(
    slot: &ViewerSlot,
    timeouts: &ViewerTimeouts,
    caps: serde_json::Map<String, serde_json::Value>,
) -> Result<fantoccini::Client, ViewerError> {
    // `http://` and `https://` endpoints alike (a Grid behind a TLS proxy).
    let session_err = |e: anyhow::Error| ViewerError::Session(format!("{e:#}"));
    let connect = async {
        match &slot.grid_auth {
            Some(credentials) => {
                let connector =
                    crate::grid::auth::AuthConnector::new(credentials).map_err(session_err)?;
                let mut builder = ClientBuilder::new(connector);
                builder.capabilities(caps);
                Ok(builder.connect(&slot.webdriver_url).await)
            }
            None => {
                let connector = crate::sys::tls::https_connector().map_err(session_err)?;
                let mut builder = ClientBuilder::new(connector);
                builder.capabilities(caps);
                Ok(builder.connect(&slot.webdriver_url).await)
            }
        }
    };
    tokio::time::timeout(timeouts.session, connect)
        .await
        .map_err(|_| ViewerError::Timeout {
            what: "session creation",
            after: timeouts.session,
        })??
        .map_err(|e| ViewerError::Session(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot() -> ViewerSlot {
        ViewerSlot {
            webdriver_url: "http://127.0.0.1:1/".into(),
            grid_auth: None,
            chrome_binary: Some("/usr/lib/chromium/chromium".into()),
            extra_args: vec!["--remote-debugging-pipe".into()],
            node: "local".into(),
            address: None,
            public_addresses: Vec::new(),
            nat: None,
            tc: TcCoverage::NONE,
            viewers: 1,
        }
    }

    #[test]
    fn capabilities_carry_binary_profile_and_slot_flags() {
        let caps = capabilities(&slot(), Some("/tmp/p".into()));
        let opts = &caps["goog:chromeOptions"];
        assert_eq!(opts["binary"], "/usr/lib/chromium/chromium");
        let args: Vec<&str> = opts["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert!(args.contains(&"--user-data-dir=/tmp/p"));
        assert!(args.contains(&"--remote-debugging-pipe"));
        assert!(args.contains(&"--headless=new"));
        assert!(args.contains(&"--enable-blink-features=AudioVideoTracks"));
        // The project's viewers deselect their video track; the flag above exposes it.
        assert!(BrowserSetup::project().no_video_track);
        assert!(NO_VIDEO_TRACK_SCRIPT.contains("videoTracks"));
    }
}
