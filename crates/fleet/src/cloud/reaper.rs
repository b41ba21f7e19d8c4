//! The reaper: a watchdog process that outlives the controller (the pattern of
//! Testcontainers' Ryuk), so that a run's servers stop billing however the controller ends.
//!
//! Every cloud command that creates resources starts one (`viewerfleet reaper`, a hidden
//! subcommand of the same binary) before the first create. It runs in a session and process
//! group of its own (`setsid`: a closed terminal, Ctrl-C or a signal to the controller's
//! group do not reach it), knows the run's label selector, and gets the API token as the
//! first line on its stdin: it holds it in memory only, never in argv, the environment or a
//! file. Its stdin stays a pipe from the controller:
//!
//! - `beat` every few seconds: the controller is alive;
//! - `done`: the controller deleted the run itself; the reaper checks once and leaves;
//! - `keep <unix time>`: the fleet stays (`up`, `run --keep`) until that time (its TTL);
//! - `take-over`: the controller's own teardown could not finish; the reaper goes on.
//!
//! The controller is gone when the pipe reaches end-of-file (the kernel closes it however
//! the process ends: `kill -9`, the OOM killer, a panic), when its process is gone (checked
//! by PID *and* start time, so a reused PID does not count as alive), or when no line came
//! for `stale_after` (a hung or stopped controller; 10 minutes, as `gc`'s heartbeat grace).
//! Then, unless it said `done` or `keep`, the reaper deletes everything with the run's label,
//! servers first, and lists again until nothing has been listed for `settle` (a create still
//! in flight when the controller died shows up late), retrying through network errors with
//! exponential backoff and jitter. A kept fleet is watched until its TTL passes, then
//! deleted the same way; meanwhile the reaper refreshes `viewerfleet-reaper=<unix time>` on
//! the run's first hub, so `gc` can tell a kept run whose reaper died (see `gc`). What the
//! reaper did goes to its log (its stderr): `reaper.log` in the run folder, else
//! `runs/reaper-<run>.log`.

use super::api::HcloudApi;
use super::provision::{self, Deleted, Inventory, Kind, LABEL_REAPER, LABEL_ROLE};
use super::CloudError;
use crate::sys::backoff::Backoff;
use rand::SeedableRng;
use serde_json::Value;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::io::AsyncBufRead;
use tokio::time::Instant;

/// The hidden subcommand that runs a reaper.
pub(crate) const SUBCOMMAND: &str = "reaper";

/// The `User-Agent` of the reaper's requests.
pub const AGENT: &str = "viewerfleet-reaper";

/// How often the controller says it is alive.
pub(crate) const CONTROLLER_BEAT: Duration = Duration::from_secs(5);

/// What the controller tells its reaper, one line each (after the token's line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message {
    Beat,
    Done,
    Keep { expires: i64 },
    TakeOver,
}

impl Message {
    pub fn line(self) -> String {
        match self {
            Message::Beat => "beat\n".into(),
            Message::Done => "done\n".into(),
            Message::Keep { expires } => format!("keep {expires}\n"),
            Message::TakeOver => "take-over\n".into(),
        }
    }

    pub fn parse(line: &str) -> Option<Message> {
        let mut words = line.split_whitespace();
        let message = match (words.next()?, words.next()) {
            ("beat", None) => Message::Beat,
            ("done", None) => Message::Done,
            ("take-over", None) => Message::TakeOver,
            ("keep", Some(t)) => Message::Keep {
                expires: t.parse().ok()?,
            },
            _ => return None,
        };
        words.next().is_none().then_some(message)
    }
}

/// The reaper's pace. [`Timings::hetzner`] for the real API; [`Timings::local`] for
/// another endpoint (a fake answering in milliseconds, as `HcloudApi` polls it quickly).
#[derive(Debug, Clone, PartialEq)]
pub struct Timings {
    /// A controller silent this long is taken for gone.
    pub stale_after: Duration,
    /// Between two listings of the run while deleting it.
    pub poll: Duration,
    /// Nothing of the run listed for this long: done (a create in flight when the controller
    /// died has shown up by then).
    pub settle: Duration,
    /// A kept fleet: between two checks that it still exists.
    pub keep_poll: Duration,
    /// A kept fleet: between two refreshes of its reaper label.
    pub beat: Duration,
    /// The first wait after a failure; doubles up to `max_backoff`, each wait jittered.
    pub backoff: Duration,
    pub max_backoff: Duration,
    /// Failures for this long in a row: the reaper gives up and says what is left.
    pub give_up: Duration,
}

impl Timings {
    pub(crate) fn hetzner() -> Timings {
        Timings {
            stale_after: super::gc::DEFAULT_HEARTBEAT_GRACE,
            poll: Duration::from_secs(5),
            settle: Duration::from_secs(60),
            keep_poll: Duration::from_secs(5 * 60),
            beat: Duration::from_secs(2 * 60),
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            give_up: Duration::from_secs(24 * 3600),
        }
    }

    pub fn local() -> Timings {
        Timings {
            stale_after: super::gc::DEFAULT_HEARTBEAT_GRACE,
            poll: Duration::from_millis(100),
            settle: Duration::from_secs(3),
            keep_poll: Duration::from_millis(300),
            beat: Duration::from_secs(1),
            backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(1),
            give_up: Duration::from_secs(10 * 60),
        }
    }

    pub(crate) fn for_api(api: &HcloudApi) -> Timings {
        if api.is_default_endpoint() {
            Timings::hetzner()
        } else {
            Timings::local()
        }
    }

    /// The reaper's command-line flags for these timings.
    fn args(&self) -> Vec<String> {
        let flag = |name: &str, d: Duration| [format!("--{name}"), format!("{}ms", d.as_millis())];
        [
            flag("stale-after", self.stale_after),
            flag("poll", self.poll),
            flag("settle", self.settle),
            flag("keep-poll", self.keep_poll),
            flag("beat", self.beat),
            flag("backoff", self.backoff),
            flag("max-backoff", self.max_backoff),
            flag("give-up", self.give_up),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

/// What the reaper sees of one run: listing and deleting (the Hetzner API, or a scripted
/// stand-in in tests).
#[async_trait::async_trait]
pub trait RunResources: Send + Sync {
    /// Everything with the run's label now.
    async fn list(&self) -> Result<Inventory, CloudError>;
    /// Deletes what `inv` names: servers first, confirmed gone, then firewalls and keys.
    async fn delete(&self, inv: Inventory) -> Result<Deleted, CloudError>;
    /// Marks the run as watched at `now` (Unix seconds).
    async fn mark_alive(&self, now: i64) -> Result<(), CloudError>;
}

/// One run on the Hetzner API.
pub struct HcloudRun {
    pub api: HcloudApi,
    pub run: String,
}

#[async_trait::async_trait]
impl RunResources for HcloudRun {
    async fn list(&self) -> Result<Inventory, CloudError> {
        provision::inventory(&self.api, &self.run).await
    }

    async fn delete(&self, inv: Inventory) -> Result<Deleted, CloudError> {
        provision::delete_inventory(&self.api, &self.run, inv, 10).await
    }

    async fn mark_alive(&self, now: i64) -> Result<(), CloudError> {
        let selector = format!("{},{LABEL_ROLE}=hub", provision::run_selector(&self.run));
        let hubs: Vec<Value> = provision::list(&self.api, Kind::Server, Some(&selector)).await?;
        let first = provision::hub_name(&self.run, 0);
        let Some(hub) = hubs
            .iter()
            .find(|h| h["name"] == first.as_str())
            .or(hubs.first())
        else {
            return Ok(());
        };
        let mut labels: HashMap<String, String> =
            serde_json::from_value(hub["labels"].clone()).unwrap_or_default();
        labels.insert(LABEL_REAPER.into(), now.to_string());
        provision::set_labels(&self.api, hub["id"].as_i64().unwrap_or_default(), &labels).await
    }
}

/// Errors retrying cannot fix: the token no longer works.
fn fatal(e: &CloudError) -> bool {
    matches!(
        e,
        CloudError::Unauthorized | CloudError::Api { status: 403, .. }
    )
}

/// What a reaper deleted, over how many rounds, through how many failures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reaped {
    pub deleted: Deleted,
    /// Listings that found something to delete.
    pub rounds: u32,
    /// Failed listings or deletions (each retried after a backoff).
    pub failures: u32,
}

/// Deletes everything `res` lists (servers first; firewalls and keys once no server is
/// listed), listing again until nothing has been listed for `settle`; failures are retried after a jittered backoff until they have lasted
/// `give_up`. The error comes with what was deleted before it.
pub(crate) async fn reap_until_empty(
    res: &dyn RunResources,
    t: &Timings,
) -> Result<Reaped, (Reaped, CloudError)> {
    let mut out = Reaped::default();
    let mut backoff = Backoff::new(t.backoff, t.max_backoff);
    let mut rng = rand::rngs::StdRng::from_entropy();
    let mut empty_since: Option<Instant> = None;
    let mut failing_since: Option<Instant> = None;
    loop {
        let error = match res.list().await {
            Ok(inv) if inv.is_empty() => {
                failing_since = None;
                backoff.reset();
                let since = *empty_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= t.settle {
                    return Ok(out);
                }
                tokio::time::sleep(t.poll).await;
                continue;
            }
            Ok(mut inv) => {
                empty_since = None;
                out.rounds += 1;
                if !inv.servers.is_empty() {
                    // Servers first, the rest once none is listed: a create still in flight
                    // needs its firewall and key, and would fail half-made without them.
                    inv.firewalls.clear();
                    inv.ssh_keys.clear();
                }
                tracing::info!(
                    "round {}: deleting {} server(s), {} firewall(s), {} SSH key(s)",
                    out.rounds,
                    inv.servers.len(),
                    inv.firewalls.len(),
                    inv.ssh_keys.len()
                );
                match res.delete(inv).await {
                    Ok(deleted) => {
                        tracing::info!("round {}: deleted {}", out.rounds, deleted.summary());
                        out.deleted.extend(deleted);
                        failing_since = None;
                        backoff.reset();
                        continue;
                    }
                    Err(CloudError::TeardownIncomplete { run, deleted, left }) => {
                        out.deleted.extend(deleted.clone());
                        CloudError::TeardownIncomplete { run, deleted, left }
                    }
                    Err(e) => e,
                }
            }
            Err(e) => e,
        };
        out.failures += 1;
        if fatal(&error) {
            return Err((out, error));
        }
        let since = *failing_since.get_or_insert_with(Instant::now);
        if since.elapsed() >= t.give_up {
            return Err((out, error));
        }
        let wait = backoff.next_with(&mut rng);
        tracing::warn!("{error}; trying again in {wait:?}");
        tokio::time::sleep(wait).await;
    }
}

/// The controller's process: its PID and start time (`/proc/<pid>/stat`, field 22), so a
/// PID the kernel gave to another process since does not pass for the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessId {
    pub pid: i32,
    pub start: u64,
}

impl ProcessId {
    pub fn of(pid: i32) -> Option<ProcessId> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (state, start) = parse_stat(&stat)?;
        (state != 'Z').then_some(ProcessId { pid, start })
    }

    pub fn current() -> Option<ProcessId> {
        ProcessId::of(std::process::id() as i32)
    }

    /// `pid:start`, as the reaper's `--controller` takes it.
    pub fn parse(text: &str) -> Option<ProcessId> {
        let (pid, start) = text.split_once(':')?;
        Some(ProcessId {
            pid: pid.parse().ok()?,
            start: start.parse().ok()?,
        })
    }

    pub fn alive(&self) -> bool {
        ProcessId::of(self.pid) == Some(*self)
    }
}

impl std::fmt::Display for ProcessId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.pid, self.start)
    }
}

/// A process's state letter and start time from its `/proc/<pid>/stat` line (the command
/// name in parentheses may hold spaces and parentheses: the fields start after the last `)`).
fn parse_stat(stat: &str) -> Option<(char, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    Some((state, fields.get(19)?.parse().ok()?))
}

/// How the controller's watch ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Ending {
    /// It deleted the run itself.
    Done,
    /// It left the fleet standing until this Unix time.
    Keep(i64),
    /// Its teardown could not finish: the reaper goes on.
    TakeOver,
    /// It is gone without a word (why).
    Gone(String),
}

/// Watches the controller through its pipe (`lines`), its process and its silence.
pub async fn watch<R: AsyncBufRead + Unpin>(
    lines: &mut tokio::io::Lines<R>,
    controller: Option<ProcessId>,
    stale_after: Duration,
) -> Ending {
    let mut last = Instant::now();
    let mut check = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            line = lines.next_line() => match line {
                Ok(Some(line)) => {
                    last = Instant::now();
                    match Message::parse(&line) {
                        Some(Message::Beat) => {}
                        Some(Message::Done) => return Ending::Done,
                        Some(Message::Keep { expires }) => return Ending::Keep(expires),
                        Some(Message::TakeOver) => return Ending::TakeOver,
                        None => tracing::warn!("ignoring an unknown line from the controller"),
                    }
                }
                Ok(None) => return Ending::Gone("its pipe closed (the process ended)".into()),
                Err(e) => return Ending::Gone(format!("its pipe failed: {e}")),
            },
            _ = check.tick() => {
                if let Some(c) = controller {
                    if !c.alive() {
                        return Ending::Gone(format!("process {} is gone", c.pid));
                    }
                }
                if last.elapsed() >= stale_after {
                    return Ending::Gone(format!(
                        "it said nothing for {} (hung or stopped)",
                        humantime::format_duration(stale_after)
                    ));
                }
            }
        }
    }
}

/// What the reaper ended with, for its last log line.
#[derive(Debug)]
pub enum Outcome {
    /// Nothing of the run is left; what the reaper deleted.
    Clean(Reaped),
    /// Someone else deleted the kept run (`viewerfleet down`).
    DeletedElsewhere,
    /// It gave up: what was deleted, and the last error.
    GaveUp(Reaped, CloudError),
}

/// A kept fleet: refreshes its reaper label every `beat`, checks every `keep_poll` that it
/// still exists, and deletes it once `expires` passed.
pub(crate) async fn guard_kept(res: &dyn RunResources, expires: i64, t: &Timings) -> Outcome {
    let mut last_beat: Option<Instant> = None;
    let mut failing_since: Option<Instant> = None;
    loop {
        let now = chrono::Utc::now().timestamp();
        if now >= expires {
            tracing::info!(
                "its TTL passed ({}): deleting everything of the run",
                super::gc::when(expires)
            );
            return reaped(reap_until_empty(res, t).await);
        }
        let checked = async {
            if res.list().await?.is_empty() {
                return Ok(false);
            }
            if last_beat.is_none_or(|b| b.elapsed() >= t.beat) {
                res.mark_alive(now).await?;
                last_beat = Some(Instant::now());
            }
            Ok::<bool, CloudError>(true)
        }
        .await;
        match checked {
            Ok(false) => return Outcome::DeletedElsewhere,
            Ok(true) => failing_since = None,
            Err(e) if fatal(&e) => return Outcome::GaveUp(Reaped::default(), e),
            Err(e) => {
                tracing::warn!("{e}; the run's TTL is still enforced");
                let since = *failing_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= t.give_up {
                    return Outcome::GaveUp(Reaped::default(), e);
                }
            }
        }
        let to_expiry = Duration::from_secs(expires.saturating_sub(now).max(0) as u64);
        tokio::time::sleep(t.keep_poll.min(to_expiry)).await;
    }
}

fn reaped(r: Result<Reaped, (Reaped, CloudError)>) -> Outcome {
    match r {
        Ok(r) => Outcome::Clean(r),
        Err((r, e)) => Outcome::GaveUp(r, e),
    }
}

/// The reaper's life: watch the controller, then act on how it ended.
pub async fn serve<R: AsyncBufRead + Unpin>(
    res: &dyn RunResources,
    run: &str,
    lines: &mut tokio::io::Lines<R>,
    controller: Option<ProcessId>,
    t: &Timings,
) -> Outcome {
    tracing::info!(
        "reaper {} watches controller {} of run {run} (resources labelled {})",
        std::process::id(),
        controller.map_or("?".to_string(), |c| c.pid.to_string()),
        provision::run_selector(run)
    );
    match watch(lines, controller, t.stale_after).await {
        Ending::Done => {
            tracing::info!("the controller deleted the run itself; checking that nothing is left");
            match res.list().await {
                Ok(inv) if inv.is_empty() => Outcome::Clean(Reaped::default()),
                Ok(_) => {
                    tracing::warn!("resources of the run are still listed: deleting them");
                    reaped(reap_until_empty(res, t).await)
                }
                Err(e) => {
                    tracing::warn!("{e}; checking again");
                    reaped(reap_until_empty(res, t).await)
                }
            }
        }
        Ending::TakeOver => {
            tracing::warn!("the controller's teardown could not finish: deleting what is left");
            reaped(reap_until_empty(res, t).await)
        }
        Ending::Gone(why) => {
            tracing::warn!("the controller is gone without deleting the run ({why}): deleting everything of the run");
            reaped(reap_until_empty(res, t).await)
        }
        Ending::Keep(expires) => {
            tracing::info!(
                "the fleet was left standing: it lives until `viewerfleet down {run}` or its TTL ({})",
                super::gc::when(expires)
            );
            guard_kept(res, expires, t).await
        }
    }
}

/// The last line of a reaper's log.
pub fn summary(run: &str, outcome: &Outcome) -> String {
    match outcome {
        Outcome::Clean(r) => format!(
            "reaper finished: deleted {} in {} round(s) through {} failure(s); nothing of run {run} is left",
            r.deleted.summary(),
            r.rounds,
            r.failures
        ),
        Outcome::DeletedElsewhere => {
            format!("reaper finished: run {run} was deleted (viewerfleet down); nothing of it is left")
        }
        Outcome::GaveUp(r, e) => format!(
            "reaper GAVE UP after deleting {}: {e}. Run `viewerfleet down {run}`, or delete what carries the label {}={run} in the Hetzner Console",
            r.deleted.summary(),
            provision::LABEL_RUN
        ),
    }
}

// ---- The controller's side ----

/// The program that runs reapers (this binary); none in a library or test process, which
/// then provisions without a reaper.
static PROGRAM: OnceLock<PathBuf> = OnceLock::new();
/// Where reapers write their log: the run folder of a `run`, else `runs/`.
static LOG_DIR: Mutex<Option<PathBuf>> = Mutex::new(None);
/// The reapers of this process whose run is not finished: a panic on the main path tears
/// their runs down (`after_panic`), and they keep the pipes open until the process ends.
static LINKS: Mutex<Vec<Arc<ReaperLink>>> = Mutex::new(Vec::new());

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Cloud fleets made by this process start their reaper by running `program reaper`.
pub fn enable(program: PathBuf) {
    let _ = PROGRAM.set(program);
}

/// Reapers started from now on write their log as `reaper.log` in `dir` (the run folder).
pub fn log_into(dir: &Path) {
    *lock(&LOG_DIR) = Some(dir.to_path_buf());
}

fn log_path(run: &str) -> PathBuf {
    let path = match lock(&LOG_DIR).as_ref() {
        Some(dir) => dir.join("reaper.log"),
        None => PathBuf::from("runs").join(format!("reaper-{run}.log")),
    };
    std::path::absolute(&path).unwrap_or(path)
}

/// What the controller holds of its reaper: the pipe (closing it, however this process
/// ends, sets the reaper to work), its PID and its log.
pub struct ReaperLink {
    run: String,
    pid: u32,
    log: PathBuf,
    api: HcloudApi,
    pipe: Mutex<Option<std::process::ChildStdin>>,
    child: Mutex<std::process::Child>,
}

impl std::fmt::Debug for ReaperLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReaperLink")
            .field("run", &self.run)
            .field("pid", &self.pid)
            .field("log", &self.log)
            .finish()
    }
}

impl ReaperLink {
    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Writes `message`; `last` closes the pipe after it. False when the reaper is gone.
    fn send(&self, message: Message, last: bool) -> bool {
        let mut pipe = lock(&self.pipe);
        let Some(stdin) = pipe.as_mut() else {
            return false;
        };
        let ok = stdin.write_all(message.line().as_bytes()).is_ok() && stdin.flush().is_ok();
        if last || !ok {
            *pipe = None;
            lock(&LINKS).retain(|l| !std::ptr::eq(Arc::as_ptr(l), self));
        }
        if !ok {
            tracing::warn!(
                "the reaper of run {} (pid {}) is gone: if this controller dies now, nothing deletes the run until `viewerfleet gc` finds it (its log: {})",
                self.run,
                self.pid,
                self.log.display()
            );
        }
        let _ = lock(&self.child).try_wait();
        ok
    }

    fn is_open(&self) -> bool {
        lock(&self.pipe).is_some()
    }

    /// The controller deleted the run: the reaper checks and leaves.
    pub fn done(&self) {
        self.send(Message::Done, true);
    }

    /// The fleet stays until `expires`: the reaper enforces it.
    pub fn keep(&self, expires: i64) {
        if self.send(Message::Keep { expires }, true) {
            tracing::info!(
                "run {}: reaper {} deletes it at its TTL ({}) unless `viewerfleet down {}` does first; its log: {}",
                self.run,
                self.pid,
                super::gc::when(expires),
                self.run,
                self.log.display()
            );
        }
    }

    /// The controller's teardown could not finish: the reaper deletes what is left.
    pub(crate) fn take_over(&self) {
        if self.send(Message::TakeOver, true) {
            tracing::warn!(
                "run {}: reaper {} goes on deleting what is left, retrying until nothing is; its log: {}",
                self.run,
                self.pid,
                self.log.display()
            );
        }
    }
}

/// Starts the reaper of `run` (when this process runs reapers, see [`enable`]): before the
/// run's first create, so it sees every server. Fails when it cannot be started: nothing
/// has been created then.
pub fn start(api: &HcloudApi, run: &str) -> Result<Option<Arc<ReaperLink>>, CloudError> {
    let Some(program) = PROGRAM.get() else {
        return Ok(None);
    };
    let failed = |what: &str, e: std::io::Error| CloudError::NoReaper(format!("{what}: {e}"));
    let log = log_path(run);
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir).map_err(|e| failed(&dir.display().to_string(), e))?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .map_err(|e| failed(&log.display().to_string(), e))?;
    let mut cmd = std::process::Command::new(program);
    cmd.arg(SUBCOMMAND)
        .args(["--run", run, "--endpoint", api.endpoint()])
        .args(Timings::for_api(api).args());
    if let Some(me) = ProcessId::current() {
        cmd.args(["--controller", &me.to_string()]);
    }
    // Nothing of the controller's environment (HCLOUD_TOKEN above all) but what reaching
    // the API needs: certificates and proxies.
    cmd.env_clear();
    for (key, value) in std::env::vars_os() {
        let name = key.to_string_lossy().to_ascii_uppercase();
        if matches!(
            name.as_str(),
            "SSL_CERT_FILE"
                | "SSL_CERT_DIR"
                | "HTTPS_PROXY"
                | "HTTP_PROXY"
                | "ALL_PROXY"
                | "NO_PROXY"
                | "RUST_LOG"
                | "NO_COLOR"
        ) {
            cmd.env(key, value);
        }
    }
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(file)
        .current_dir("/");
    {
        use std::os::unix::process::CommandExt;
        // Unsafe only because code runs in the child between fork and exec: std can put a
        // child in a new process group (`process_group`) but not in a new session, and has
        // no safe way to run setsid(2) there; the call itself is nix's safe setsid.
        // SAFETY: only the async-signal-safe setsid(2) runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                nix::unistd::setsid()
                    .map(drop)
                    .map_err(std::io::Error::from)
            });
        }
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| failed(&program.display().to_string(), e))?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| CloudError::NoReaper("the reaper's stdin is not a pipe".into()))?;
    let token = format!("{}\n", api.token().expose());
    if let Err(e) = stdin
        .write_all(token.as_bytes())
        .and_then(|_| stdin.flush())
    {
        let _ = child.kill();
        let _ = child.wait();
        return Err(failed("handing the token to the reaper", e));
    }
    let link = Arc::new(ReaperLink {
        run: run.to_string(),
        pid: child.id(),
        log,
        api: api.clone(),
        pipe: Mutex::new(Some(stdin)),
        child: Mutex::new(child),
    });
    lock(&LINKS).push(link.clone());
    let beating = Arc::downgrade(&link);
    std::thread::spawn(move || loop {
        std::thread::sleep(CONTROLLER_BEAT);
        match beating.upgrade() {
            Some(link) if link.is_open() => {
                link.send(Message::Beat, false);
            }
            _ => return,
        }
    });
    tracing::info!(
        "run {run}: reaper {} deletes it if this controller dies before it does; its log: {}",
        link.pid,
        link.log.display()
    );
    Ok(Some(link))
}

/// After a panic on the main path: deletes every run whose controller had not finished it
/// (then tells its reaper), or leaves it to its reaper when that fails. One line per run.
pub async fn after_panic() -> Vec<String> {
    let links: Vec<Arc<ReaperLink>> = lock(&LINKS).clone();
    let mut lines = Vec::new();
    for link in links {
        if !link.is_open() {
            continue;
        }
        match provision::teardown(&link.api, &link.run).await {
            Ok(deleted) => {
                link.done();
                lines.push(format!("run {}: deleted {}", link.run, deleted.summary()));
            }
            Err(e) => {
                link.take_over();
                lines.push(format!(
                    "run {}: {e}; its reaper (pid {}) goes on deleting it, see {}",
                    link.run,
                    link.pid,
                    link.log.display()
                ));
            }
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::provision::Named;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn messages_round_trip_and_strangers_are_refused() {
        for m in [
            Message::Beat,
            Message::Done,
            Message::TakeOver,
            Message::Keep {
                expires: 1_800_000_000,
            },
        ] {
            assert_eq!(Message::parse(m.line().trim_end()), Some(m));
        }
        for bad in ["", "keep", "keep soon", "done now", "beat beat", "token"] {
            assert_eq!(Message::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn stat_lines_give_state_and_start_time_even_with_odd_names() {
        let line = "4242 (we ird) (name)) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(parse_stat(line), Some(('S', 987654)));
        let me = ProcessId::current().expect("this process");
        assert!(me.alive());
        assert_eq!(ProcessId::parse(&me.to_string()), Some(me));
        // The same PID with another start time is another process.
        let reused = ProcessId {
            pid: me.pid,
            start: me.start + 1,
        };
        assert!(!reused.alive());
    }

    /// A scripted project: servers appear late, listings and deletions fail on cue.
    #[derive(Default)]
    struct Script {
        state: Mutex<ScriptState>,
        lists: AtomicU32,
    }

    #[derive(Default)]
    struct ScriptState {
        servers: Vec<Named>,
        /// (listing number, server) appearing at that listing: a create in flight.
        late: Vec<(u32, Named)>,
        /// Listings that fail with a network error.
        failing_lists: Vec<u32>,
        /// Deletions that fail (count down).
        failing_deletes: u32,
        deleted: Vec<String>,
    }

    fn named(id: i64) -> Named {
        Named {
            id,
            name: format!("vf-r-node-{id:03}"),
        }
    }

    #[async_trait::async_trait]
    impl RunResources for Script {
        async fn list(&self) -> Result<Inventory, CloudError> {
            let n = self.lists.fetch_add(1, Ordering::SeqCst) + 1;
            let mut s = lock(&self.state);
            let arriving: Vec<Named> = s
                .late
                .iter()
                .filter(|(at, _)| *at == n)
                .map(|(_, x)| x.clone())
                .collect();
            s.servers.extend(arriving);
            if s.failing_lists.contains(&n) {
                return Err(CloudError::Transient {
                    what: "list servers (connection reset)".into(),
                    status: 0,
                });
            }
            Ok(Inventory {
                servers: s.servers.clone(),
                ..Default::default()
            })
        }

        async fn delete(&self, inv: Inventory) -> Result<Deleted, CloudError> {
            let mut s = lock(&self.state);
            if s.failing_deletes > 0 {
                s.failing_deletes -= 1;
                return Err(CloudError::Transient {
                    what: "delete server".into(),
                    status: 503,
                });
            }
            let names: Vec<String> = inv.servers.iter().map(|x| x.name.clone()).collect();
            s.servers.retain(|x| !names.contains(&x.name));
            s.deleted.extend(names.clone());
            Ok(Deleted {
                servers: names,
                ..Default::default()
            })
        }

        async fn mark_alive(&self, _now: i64) -> Result<(), CloudError> {
            Ok(())
        }
    }

    fn quick() -> Timings {
        Timings {
            poll: Duration::from_millis(5),
            settle: Duration::from_millis(60),
            backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(4),
            give_up: Duration::from_secs(5),
            ..Timings::local()
        }
    }

    #[tokio::test]
    async fn the_listing_loop_deletes_late_creates_and_retries_failures() {
        let script = Script::default();
        {
            let mut s = lock(&script.state);
            s.servers = vec![named(1), named(2)];
            // A create in flight shows up at the third listing, after the first deletion.
            s.late = vec![(3, named(3))];
            s.failing_lists = vec![2, 4];
            s.failing_deletes = 1;
        }
        let reaped = reap_until_empty(&script, &quick()).await.expect("clean");
        let s = lock(&script.state);
        assert!(s.servers.is_empty());
        let mut deleted = s.deleted.clone();
        deleted.sort();
        assert_eq!(deleted, ["vf-r-node-001", "vf-r-node-002", "vf-r-node-003"]);
        assert_eq!(reaped.deleted.servers.len(), 3);
        // Two failed listings and one failed deletion, each retried.
        assert_eq!(reaped.failures, 3);
        // Two listings found something: the first (its deletion failed), and the one that
        // brought the late server.
        assert_eq!(reaped.rounds, 2, "{reaped:?}");
        // It kept listing for the settle time after the last deletion.
        assert!(script.lists.load(Ordering::SeqCst) >= 6);
    }

    #[tokio::test]
    async fn the_listing_loop_gives_up_only_after_failing_for_give_up() {
        let script = Script::default();
        {
            let mut s = lock(&script.state);
            s.servers = vec![named(1)];
            s.failing_deletes = u32::MAX;
        }
        let t = Timings {
            give_up: Duration::from_millis(50),
            ..quick()
        };
        let started = std::time::Instant::now();
        let (reaped, error) = reap_until_empty(&script, &t).await.expect_err("gives up");
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert!(reaped.failures >= 2, "{reaped:?}");
        assert!(matches!(error, CloudError::Transient { .. }), "{error}");
        assert_eq!(lock(&script.state).servers.len(), 1);
    }

    #[tokio::test]
    async fn a_run_with_nothing_listed_ends_after_the_settle_time_deleting_nothing() {
        let script = Script::default();
        let reaped = reap_until_empty(&script, &quick()).await.expect("clean");
        assert_eq!(reaped, Reaped::default());
        assert!(lock(&script.state).deleted.is_empty());
    }

    #[tokio::test]
    async fn the_watch_ends_on_each_message_and_on_end_of_file() {
        async fn ending(input: &'static str) -> Ending {
            let mut lines = tokio::io::AsyncBufReadExt::lines(input.as_bytes());
            watch(&mut lines, None, Duration::from_secs(60)).await
        }
        assert_eq!(ending("beat\nbeat\ndone\n").await, Ending::Done);
        assert_eq!(
            ending("keep 1800000000\n").await,
            Ending::Keep(1_800_000_000)
        );
        assert_eq!(ending("beat\ntake-over\n").await, Ending::TakeOver);
        assert!(
            matches!(ending("beat\nbeat\n").await, Ending::Gone(why) if why.contains("pipe closed"))
        );
    }
}
