//! The cloud commands as users run them: the `viewerfleet` binary against the fake Hetzner API
//! (HCLOUD_ENDPOINT) and the kit's WebDriver stub (as the target, and behind the fake's
//! simulated hub): `plan` on every shipped scenario, `up`/`down`, a whole `run` with
//! `fleet: hcloud`, the target check before any server, Ctrl-C/SIGTERM, `kill -9` then `gc`.

use crate::support::process::reapers_of;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use tokio::process::Command;
use viewerfleet_kit::fake_hcloud::{FakeConfig, FakeHcloud};
use viewerfleet_kit::webdriver_stub::{self, Stub, StubConfig, StubCounters};

pub(crate) const TOKEN: &str = "cli-test-token-83b1e4";
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_viewerfleet");

pub(crate) async fn fake(config: FakeConfig) -> Fake {
    Fake::new(
        FakeHcloud::start(
            FakeConfig {
                token: Some(TOKEN.into()),
                ..config
            },
            "127.0.0.1:0".parse().unwrap(),
        )
        .await
        .unwrap(),
    )
}

/// A fake whose nodes register 100 ms after they are created: `up` gets its fleet at once.
pub(crate) async fn booting_fake() -> Fake {
    fake(FakeConfig {
        node_boot: Some(Duration::from_millis(100)),
        ..FakeConfig::default()
    })
    .await
}

/// `viewerfleet up SCENARIO --inventory <dir>/inventory.json` (bounded); asserts that it
/// succeeded and returns its stderr, its stdout and the inventory it wrote.
async fn up_with_inventory(
    fake: &Fake,
    dir: &Path,
    scenario: &Path,
) -> (String, String, serde_json::Value) {
    let inventory = dir.join("inventory.json");
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        command(fake, dir)
            .arg("up")
            .arg(scenario)
            .arg("--inventory")
            .arg(&inventory)
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let inv = serde_json::from_str(&std::fs::read_to_string(&inventory).unwrap()).unwrap();
    (stderr, text(&out.stdout), inv)
}

/// A test's fake Hetzner API, and the reapers of the runs made on it. Every cloud command
/// that creates servers starts a reaper that outlives the command; a test ends them (`down`
/// for a fleet left standing) and waits for them with [`Fake::no_reaper_left`] while the
/// fake still answers. Dropped with a reaper still running (one that would poll a closed
/// port for minutes), it kills that reaper and fails the test.
pub(crate) struct Fake(FakeHcloud);

impl Fake {
    pub(crate) fn new(fake: FakeHcloud) -> Fake {
        Fake(fake)
    }

    /// Waits (bounded) until every reaper of a run on this fake has finished; kills what is
    /// left and fails.
    pub(crate) async fn no_reaper_left(&self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let left = reapers_of(&self.endpoint());
            if left.is_empty() {
                return;
            }
            if tokio::time::Instant::now() >= deadline {
                kill_reapers(&left);
                panic!("reapers (pid, run) still running a minute after the test's last command: {left:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// `viewerfleet run --no-report SCENARIO` against the fake cloud (with `env` set), bounded
/// by `secs`; asserts that it succeeded and returns its run folder, stderr and stdout.
async fn run_through_the_fake(
    fake: &Fake,
    dir: &Path,
    scenario: &Path,
    env: &[(&str, String)],
    secs: u64,
) -> (PathBuf, String, String) {
    let out_dir = dir.join("run");
    let mut cmd = command(fake, dir);
    for (name, value) in env {
        cmd.env(name, value);
    }
    let out = tokio::time::timeout(
        Duration::from_secs(secs),
        cmd.args(["run", "--no-report"])
            .arg(scenario)
            .arg("--out")
            .arg(&out_dir)
            .output(),
    )
    .await
    .expect("the run ends")
    .unwrap();
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    (out_dir, stderr, text(&out.stdout))
}

fn kill_reapers(reapers: &[(u32, String)]) {
    for (pid, _) in reapers {
        let _ = kill(Pid::from_raw(*pid as i32), Signal::SIGKILL);
    }
}

impl std::ops::Deref for Fake {
    type Target = FakeHcloud;
    fn deref(&self) -> &FakeHcloud {
        &self.0
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        let left = reapers_of(&self.endpoint());
        if left.is_empty() {
            return;
        }
        kill_reapers(&left);
        if !std::thread::panicking() {
            panic!("the test ended with reapers (pid, run) still running: {left:?}; end a fleet left standing with `down`, then `fake.no_reaper_left().await`");
        }
    }
}

/// The target: the stub's PeerTube-like page, video API and exporter.
pub(crate) async fn target() -> Stub {
    Stub::serve("127.0.0.1:0".parse().unwrap(), StubConfig::default())
        .await
        .unwrap()
}

pub(crate) fn target_url(stub: &Stub) -> String {
    format!("http://{}/w/test", stub.addr())
}

/// A scenario of `viewers` viewers with `fleet: hcloud`; `fleet_extra` goes under `fleet:`.
pub(crate) fn scenario(
    dir: &std::path::Path,
    url: &str,
    viewers: u32,
    fleet_extra: &str,
) -> std::path::PathBuf {
    let key = dir.join("id.pub");
    std::fs::write(
        &key,
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICliTestKey cli@example\n",
    )
    .unwrap();
    let path = dir.join("cloud.yaml");
    std::fs::write(
        &path,
        format!(
            "name: cli-cloud\ntarget:\n  kind: peertube\n  video: live\n  url: {url}\nviewers:\n  count: {viewers}\nduration: 1m\nfleet:\n  kind: hcloud\n  controller_ips: [\"198.51.100.7/32\"]\n  ssh_public_key: {}\n  node_type: cx33\n  viewers_per_node: 4\n  register_timeout: 10m\n{fleet_extra}",
            key.display()
        ),
    )
    .unwrap();
    path
}

/// A scenario that `run` drives through the fake's hub: `viewers` viewers for `duration`
/// (measured 1 s before its end), the stub's exporter read, a heartbeat every second.
pub(crate) fn driven_scenario(
    dir: &std::path::Path,
    target: &Stub,
    viewers: u32,
    duration: &str,
) -> std::path::PathBuf {
    let path = scenario(
        dir,
        &target_url(target),
        viewers,
        "  heartbeat_interval: 1s\n",
    );
    let measure_at = humantime::parse_duration(duration).unwrap() - Duration::from_secs(1);
    let yaml = std::fs::read_to_string(&path).unwrap().replace(
        "duration: 1m\n",
        &format!(
            "duration: {duration}\nsampling_interval: 500ms\nmeasure_at: {}s\nsteady_window: 2s\n",
            measure_at.as_secs()
        ),
    );
    let yaml = yaml.replace(
        "  url: ",
        &format!("  exporter: http://{}/metrics\n  url: ", target.addr()),
    );
    std::fs::write(&path, yaml).unwrap();
    path
}

pub(crate) fn command(fake: &FakeHcloud, dir: &std::path::Path) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.current_dir(dir)
        .env("HCLOUD_ENDPOINT", fake.endpoint())
        .env("HCLOUD_TOKEN", TOKEN)
        .env("VIEWERFLEET_HCLOUD_HUB_URL", fake.hub_url())
        // Nobody answers a prompt in a test: the servers are created without one.
        .env("VIEWERFLEET_YES", "1")
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// Waits (bounded) until `cond` holds.
pub(crate) async fn until(what: &str, secs: u64, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The text of the reaper's log that `up` (which has no run folder) starts in
/// `<dir>/runs/reaper-<run>.log`; empty until there is one.
pub(crate) fn up_reaper_log(dir: &std::path::Path) -> String {
    let Ok(entries) = std::fs::read_dir(dir.join("runs")) else {
        return String::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("reaper-"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect()
}

/// The reaper's PID from the first line of its log (`reaper <pid> watches controller …`).
pub(crate) fn reaper_pid(log: &str) -> Option<i32> {
    let rest = &log[log.find("reaper ")? + "reaper ".len()..];
    rest.split_whitespace().next()?.parse().ok()
}

/// Waits (bounded) until the reaper's log says it finished, and returns the log.
pub(crate) async fn reaper_finished(what: &str, secs: u64, read: impl Fn() -> String) -> String {
    until(what, secs, || read().contains("reaper finished")).await;
    read()
}

async fn signal_while_waiting_for_nodes(signal: Signal) {
    // Nodes never register: `up` waits until it is interrupted.
    let fake = fake(FakeConfig {
        node_boot: None,
        ..FakeConfig::default()
    })
    .await;
    let target = target().await;
    let dir = tempfile::tempdir().unwrap();
    let path = scenario(dir.path(), &target_url(&target), 12, "");
    let child = command(&fake, dir.path())
        .arg("up")
        .arg(&path)
        .spawn()
        .unwrap();
    let pid = Pid::from_raw(child.id().unwrap() as i32);
    // Creation is done once the hub's firewall names the nodes; registration follows.
    until("the hub firewall to name the nodes", 60, || {
        fake.state
            .recorded()
            .iter()
            .any(|r| r.path.ends_with("/actions/set_rules"))
    })
    .await;
    assert_eq!(fake.state.servers_matching("viewerfleet-run").len(), 4);
    kill(pid, signal).unwrap();
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("exits after the signal")
        .unwrap();
    let stderr = text(&out.stderr);
    // 128 + the signal, as `run` exits; SIGHUP and SIGQUIT are handled as SIGTERM.
    let expected = if signal == Signal::SIGINT { 130 } else { 143 };
    assert_eq!(out.status.code(), Some(expected), "{stderr}");
    assert!(
        fake.state.servers_matching("viewerfleet-run").is_empty(),
        "{signal:?}: zero servers of the run\n{stderr}"
    );
    assert!(
        fake.state.firewalls().is_empty() && fake.state.ssh_keys().is_empty(),
        "{stderr}"
    );
    assert!(
        stderr.contains("every server of the run was deleted"),
        "{stderr}"
    );
    assert!(!stderr.contains(TOKEN) && !text(&out.stdout).contains(TOKEN));
    // The controller told its reaper the run was deleted: it checked, and deleted nothing.
    let log = reaper_finished("the reaper to finish", 60, || up_reaper_log(dir.path())).await;
    assert!(log.contains("deleted the run itself"), "{log}");
    assert!(log.contains("deleted 0 server(s)"), "{log}");
    assert!(!log.contains(TOKEN));
    fake.no_reaper_left().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sigint_while_waiting_for_nodes_leaves_zero_servers() {
    signal_while_waiting_for_nodes(Signal::SIGINT).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_while_waiting_for_nodes_leaves_zero_servers() {
    signal_while_waiting_for_nodes(Signal::SIGTERM).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sighup_a_closed_terminal_while_waiting_for_nodes_leaves_zero_servers() {
    signal_while_waiting_for_nodes(Signal::SIGHUP).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sigquit_while_waiting_for_nodes_leaves_zero_servers() {
    signal_while_waiting_for_nodes(Signal::SIGQUIT).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn up_writes_an_inventory_hands_over_to_the_ttl_and_down_deletes_the_run() {
    let fake = booting_fake().await;
    let target = target().await;
    let dir = tempfile::tempdir().unwrap();
    let path = scenario(dir.path(), &target_url(&target), 12, "");
    let inventory = dir.path().join("inventory.json");
    let (stderr, stdout, inv) = up_with_inventory(&fake, dir.path(), &path).await;
    assert_eq!(inv["hub_url"], fake.hub_url());
    assert_eq!(inv["nodes"].as_array().unwrap().len(), 3);
    assert_eq!(inv["capacity"], 12);
    // The inventory carries the hub's router credentials for later runs: mode 0600, and the
    // password nowhere in the output.
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&inventory).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    let password = inv["grid_credentials"]["password"].as_str().unwrap();
    assert_eq!(password.len(), 64);
    assert_eq!(inv["grid_credentials"]["username"], "viewerfleet");
    assert!(!stderr.contains(password) && !stdout.contains(password));
    let read = viewerfleet::fleet::grid::inventory_credentials(&inventory)
        .unwrap()
        .unwrap();
    assert_eq!(read.password.expose(), password);
    let run = inv["run"].as_str().unwrap().to_string();
    assert!(
        stderr.contains(&format!("viewerfleet down {run}")),
        "{stderr}"
    );
    // The reaper of the kept fleet goes on after `up` left: its requests are its own.
    let requests = fake
        .state
        .recorded()
        .iter()
        .filter(|r| !r.user_agent.starts_with("viewerfleet-reaper"))
        .count();
    assert!(
        stderr.contains(&format!("{requests} Hetzner API requests")),
        "the request count is printed: {requests}\n{stderr}"
    );
    let servers = fake
        .state
        .servers_matching(&format!("viewerfleet-run={run}"));
    assert_eq!(servers.len(), 4, "up leaves the fleet running");
    let hub = servers
        .iter()
        .find(|s| s["labels"]["viewerfleet-role"] == "hub")
        .unwrap();
    assert!(
        hub["labels"].get("viewerfleet-heartbeat").is_none(),
        "handed over: the TTL decides, not a heartbeat nobody refreshes"
    );
    assert!(!stderr.contains(TOKEN));
    // The reaper stays with the kept fleet and says so on its first hub.
    until("the reaper's label on the hub", 30, || {
        fake.state
            .servers_matching(&format!("viewerfleet-run={run},viewerfleet-role=hub"))
            .iter()
            .any(|h| h["labels"]["viewerfleet-reaper"].is_string())
    })
    .await;

    let out = command(&fake, dir.path())
        .arg("down")
        .arg(&run)
        .output()
        .await
        .unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stdout.contains("deleted 4 server(s), 2 firewall(s), 1 SSH key(s)"),
        "{stdout}"
    );
    assert!(stdout.contains("Hetzner API requests"), "{stdout}");
    assert!(fake.state.servers().is_empty());
    // Its reaper saw the run go and left, having deleted nothing itself.
    let log = reaper_finished("the kept fleet's reaper to leave", 60, || {
        up_reaper_log(dir.path())
    })
    .await;
    assert!(log.contains("left standing"), "{log}");
    assert!(log.contains("was deleted (viewerfleet down)"), "{log}");
    assert!(!fake
        .state
        .recorded()
        .iter()
        .any(|r| r.method == "DELETE" && r.user_agent.starts_with("viewerfleet-reaper")));

    let out = command(&fake, dir.path())
        .args(["down", "no such run!"])
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("not a run id"));
    fake.no_reaper_left().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn run_with_fleet_hcloud_plays_through_the_grid_and_deletes_every_server() {
    // The fake's hub hands sessions to a WebDriver stub: a whole run, no browser.
    let sessions = Arc::new(StubCounters::default());
    let fake = fake(FakeConfig {
        node_boot: Some(Duration::from_millis(100)),
        webdriver: Some(webdriver_stub::app(StubConfig::default(), sessions.clone())),
        ..FakeConfig::default()
    })
    .await;
    // Another run's server, alive: neither the run nor its reaper may touch it.
    let now = chrono::Utc::now().timestamp();
    let other = fake.state.plant_server(
        "vf-other-node-001",
        serde_json::json!({"viewerfleet-run": "other", "viewerfleet-role": "node",
                           "viewerfleet-expires": (now + 3600).to_string(),
                           "viewerfleet-heartbeat": now.to_string()}),
    );
    let target = target().await;
    let dir = tempfile::tempdir().unwrap();
    let path = driven_scenario(dir.path(), &target, 6, "5s");
    let (out_dir, stderr, stdout) = run_through_the_fake(&fake, dir.path(), &path, &[], 180).await;
    // The hub asks for the run's router password (its node.env names it, as a real hub's
    // grid.toml would): every request of the controller carried it, and the password and
    // the registration secret are nowhere in the output or the run folder.
    let hub_env = fake
        .state
        .recorded()
        .into_iter()
        .find(|r| r.path == "/v1/servers" && r.body["labels"]["viewerfleet-role"] == "hub")
        .map(|r| r.body["user_data"].as_str().unwrap().to_string())
        .unwrap();
    let secret_of = |name: &str| {
        hub_env
            .lines()
            .find_map(|l| l.trim().strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("{name} in the hub's node.env"))
            .to_string()
    };
    let secrets = [
        secret_of("GRID_PASSWORD"),
        secret_of("GRID_REGISTRATION_SECRET"),
    ];
    assert_eq!(fake.state.counts().hub_refused, 0, "{stderr}");
    for secret in &secrets {
        assert_eq!(secret.len(), 64);
        assert!(!stderr.contains(secret.as_str()) && !stdout.contains(secret.as_str()));
        assert_eq!(
            crate::support::files_containing(&out_dir, secret),
            Vec::<String>::new(),
            "a secret in the run folder"
        );
    }

    let events: Vec<serde_json::Value> =
        std::fs::read_to_string(out_dir.join("raw/viewer_events.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    let playing: Vec<&serde_json::Value> =
        events.iter().filter(|e| e["event"] == "playing").collect();
    assert_eq!(playing.len(), 6, "{stderr}");
    // Placement is the Grid fleet's: each viewer is named by the node it landed on.
    let mut nodes: Vec<&str> = playing
        .iter()
        .map(|e| e["node"].as_str().unwrap_or_default())
        .collect();
    nodes.sort();
    nodes.dedup();
    assert_eq!(nodes.len(), 2, "6 viewers on two 4-slot nodes: {nodes:?}");
    assert!(
        nodes.iter().all(|n| n.starts_with("http://[2001:db8:")),
        "{nodes:?}"
    );
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["fleet"]["kind"], "hcloud");
    // The nodes name their load endpoints; nothing serves them here: every read is recorded
    // as failed, with the reason, and the run went on.
    let loads: Vec<serde_json::Value> =
        std::fs::read_to_string(out_dir.join("raw/node_samples.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    let mut sampled: Vec<&str> = loads.iter().map(|s| s["node"].as_str().unwrap()).collect();
    sampled.sort();
    sampled.dedup();
    assert_eq!(sampled, nodes, "every node's load was read");
    for sample in &loads {
        assert_eq!(sample["ok"], false, "{sample}");
        assert!(
            sample["error"].as_str().unwrap().contains(":9465/metrics"),
            "{sample}"
        );
    }

    // Every session and every server released; the heartbeat kept beating meanwhile.
    assert_eq!(sessions.sessions_created.load(Relaxed), 6);
    assert_eq!(sessions.sessions_deleted.load(Relaxed), 6);
    assert!(
        fake.state
            .servers_matching("viewerfleet-run")
            .iter()
            .all(|s| s["labels"]["viewerfleet-run"] == "other"),
        "{stderr}"
    );
    assert!(fake.state.firewalls().is_empty() && fake.state.ssh_keys().is_empty());
    let hub_id = fake
        .state
        .recorded()
        .iter()
        .find(|r| {
            r.method == "POST"
                && r.path == "/v1/servers"
                && r.body["labels"]["viewerfleet-role"] == "hub"
        })
        .map(|r| r.body["name"].as_str().unwrap().to_string())
        .unwrap();
    let beats = fake
        .state
        .recorded()
        .iter()
        .filter(|r| r.method == "PUT" && r.body["labels"]["viewerfleet-heartbeat"].is_string())
        .count();
    assert!(beats >= 2, "heartbeats on {hub_id}: {beats}");
    assert!(!stderr.contains(TOKEN));
    // A clean end: the reaper, told so, checked once, deleted nothing, and wrote it down in
    // the run folder.
    let log = reaper_finished("the reaper to finish", 60, || {
        std::fs::read_to_string(out_dir.join("reaper.log")).unwrap_or_default()
    })
    .await;
    assert!(log.contains("deleted the run itself"), "{log}");
    assert!(log.contains("deleted 0 server(s)"), "{log}");
    assert_eq!(fake.state.servers().len(), 1);
    assert_eq!(fake.state.servers()[0]["id"], other);
    assert!(!fake
        .state
        .recorded()
        .iter()
        .any(|r| r.method == "DELETE" && r.path.ends_with(&format!("/{other}"))));
    fake.no_reaper_left().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn up_and_run_check_the_target_before_creating_any_server() {
    let fake = fake(FakeConfig::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let path = scenario(dir.path(), &format!("http://127.0.0.1:{port}/w/x"), 8, "");
    for args in [vec!["up"], vec!["run", "--no-report"]] {
        let out = command(&fake, dir.path())
            .args(&args)
            .arg(&path)
            .output()
            .await
            .unwrap();
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{args:?}: {stderr}");
        assert!(stderr.contains("did not answer"), "{args:?}: {stderr}");
    }
    assert_eq!(fake.state.counts().requests, 0, "not one API request");

    // The page answers but the video does not exist: PeerTube's API says 404.
    let app = axum::Router::new()
        .route(
            "/videos/embed/{id}",
            axum::routing::get(|| async { "player" }),
        )
        .route(
            "/api/v1/videos/{id}",
            axum::routing::get(|| async { (axum::http::StatusCode::NOT_FOUND, "{}") }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let path = scenario(dir.path(), &format!("http://{addr}/w/gone"), 8, "");
    let out = command(&fake, dir.path())
        .arg("up")
        .arg(&path)
        .output()
        .await
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("no such video") && stderr.contains("404"),
        "{stderr}"
    );

    // The page and video are there but the exporter is not.
    let target = target().await;
    let path = scenario(dir.path(), &target_url(&target), 8, "");
    let yaml = std::fs::read_to_string(&path).unwrap().replace(
        "  url: ",
        &format!("  exporter: http://127.0.0.1:{port}/metrics\n  url: "),
    );
    std::fs::write(&path, yaml).unwrap();
    let out = command(&fake, dir.path())
        .arg("up")
        .arg(&path)
        .output()
        .await
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("target.exporter did not answer"),
        "{stderr}"
    );
    assert_eq!(fake.state.counts().requests, 0, "still not one API request");
}

/// Cloud nodes are IPv6-only: a target with no IPv6 address is named before any server is
/// bought (a warning: a NAT64 the user runs is invisible from here); one that answers over
/// IPv6 is not. The wrong token then ends `up` at its first API request.
#[tokio::test(flavor = "multi_thread")]
async fn up_warns_before_buying_when_the_target_has_no_ipv6_address() {
    let fake = fake(FakeConfig::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let v4 = target().await;
    let v6 = Stub::serve("[::1]:0".parse().unwrap(), StubConfig::default())
        .await
        .unwrap();
    let mut said = Vec::new();
    for stub in [&v4, &v6] {
        let path = scenario(dir.path(), &target_url(stub), 8, "");
        let out = command(&fake, dir.path())
            .env("HCLOUD_TOKEN", "not-the-projects-token")
            .arg("up")
            .arg(&path)
            .output()
            .await
            .unwrap();
        assert!(!out.status.success(), "the wrong token stops `up`");
        said.push(text(&out.stderr));
    }
    assert!(
        said[0].contains("has no IPv6 address (only IPv4: 127.0.0.1)")
            && said[0].contains("IPv6-only viewer nodes cannot reach it")
            && said[0].contains("NAT64"),
        "{}",
        said[0]
    );
    assert!(!said[1].contains("IPv6-only viewer nodes"), "{}", said[1]);
    assert!(fake.state.servers().is_empty(), "no server bought");
}

#[tokio::test(flavor = "multi_thread")]
async fn webdriver_open_to_the_world_is_refused_unless_opted_in_with_a_loud_warning() {
    let fake = booting_fake().await;
    let target = target().await;
    let dir = tempfile::tempdir().unwrap();
    let path = scenario(dir.path(), &target_url(&target), 4, "");
    let open = std::fs::read_to_string(&path)
        .unwrap()
        .replace("[\"198.51.100.7/32\"]", "[\"0.0.0.0/0\", \"::/0\"]");
    std::fs::write(&path, &open).unwrap();
    let out = command(&fake, dir.path())
        .arg("up")
        .arg(&path)
        .output()
        .await
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("fleet.controller_ips[0]")
            && stderr.contains("the whole internet")
            && stderr.contains("webdriver_open_to_the_internet: true"),
        "{stderr}"
    );
    assert_eq!(fake.state.counts().requests, 0);

    std::fs::write(&path, open + "  webdriver_open_to_the_internet: true\n").unwrap();
    let out = command(&fake, dir.path())
        .arg("up")
        .arg(&path)
        .output()
        .await
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("ANYONE") && stderr.contains("0.0.0.0/0, ::/0"),
        "{stderr}"
    );
    let hub_fw = fake
        .state
        .firewalls()
        .into_iter()
        .find(|f| f["name"].as_str().unwrap().ends_with("-hub"))
        .unwrap();
    assert!(
        hub_fw["rules"].to_string().contains("0.0.0.0/0"),
        "as asked"
    );
    // The fleet was left standing: `down` ends it, and its reaper sees it go.
    let run = fake.state.servers()[0]["labels"]["viewerfleet-run"]
        .as_str()
        .unwrap()
        .to_string();
    let out = command(&fake, dir.path())
        .arg("down")
        .arg(&run)
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(fake.state.servers().is_empty());
    fake.no_reaper_left().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_file_readable_by_others_is_warned_about() {
    use std::os::unix::fs::PermissionsExt;
    let fake = fake(FakeConfig::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("hcloud-token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let path = scenario(
        dir.path(),
        "https://peertube.example/w/x",
        8,
        &format!("  token_file: {}\n", token.display()),
    );
    let out = command(&fake, dir.path())
        .env_remove("HCLOUD_TOKEN")
        .arg("plan")
        .arg(&path)
        .output()
        .await
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("mode 644") && stderr.contains(&format!("chmod 600 {}", token.display())),
        "{stderr}"
    );
    assert!(!stderr.contains(TOKEN) && !text(&out.stdout).contains(TOKEN));
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_of_the_controller_then_gc_deletes_the_run_once_its_heartbeat_is_stale() {
    // Nodes never register: `up` waits, beating, until it is killed without a chance to
    // clean up.
    let fake = fake(FakeConfig {
        node_boot: None,
        ..FakeConfig::default()
    })
    .await;
    let target = target().await;
    let dir = tempfile::tempdir().unwrap();
    let path = scenario(
        dir.path(),
        &target_url(&target),
        8,
        "  heartbeat_interval: 1s\n",
    );
    let mut child = command(&fake, dir.path())
        .arg("up")
        .arg(&path)
        .spawn()
        .unwrap();
    let beating = || {
        fake.state
            .recorded()
            .iter()
            .filter(|r| r.method == "PUT" && r.body["labels"]["viewerfleet-heartbeat"].is_string())
            .count()
    };
    until("two heartbeats", 60, || beating() >= 2).await;
    // The controller's machine dies: its reaper with it (else the reaper would delete the
    // run at once, see tests/fast/reaper.rs).
    let reaper = reaper_pid(&up_reaper_log(dir.path())).expect("the reaper's pid in its log");
    kill(Pid::from_raw(reaper), Signal::SIGKILL).unwrap();
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    assert_eq!(fake.state.servers_matching("viewerfleet-run").len(), 3);

    let gc = |grace: &str| {
        let mut c = command(&fake, dir.path());
        c.args(["gc", "--cloud", "--heartbeat-grace", grace]);
        c
    };
    // The TTL is hours away, the heartbeat seconds: a generous grace keeps the run.
    let out = gc("10m").output().await.unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stdout.contains("keep server") && stdout.contains("alive"),
        "{stdout}"
    );
    assert_eq!(fake.state.servers_matching("viewerfleet-run").len(), 3);

    // Once the heartbeat is older than the grace, the whole run goes, before its TTL.
    let last_beat = || -> i64 {
        fake.state.servers_matching("viewerfleet-role=hub")[0]["labels"]["viewerfleet-heartbeat"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    };
    until("the heartbeat to be 2 s old", 30, || {
        chrono::Utc::now().timestamp() - last_beat() >= 2
    })
    .await;
    let out = gc("1s").output().await.unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(stdout.contains("heartbeat stopped"), "{stdout}");
    assert!(
        stdout.contains("deleted 3 server(s), 2 firewall(s), 1 SSH key(s)"),
        "{stdout}"
    );
    assert!(fake.state.servers().is_empty());
    fake.no_reaper_left().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gc_with_a_huge_older_than_deletes_nothing_young_and_a_bad_one_is_explained() {
    let fake = fake(FakeConfig::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let expires = (chrono::Utc::now().timestamp() + 3600).to_string();
    fake.state.plant_server(
        "vf-young-node-001",
        serde_json::json!({"viewerfleet-run": "young", "viewerfleet-role": "node", "viewerfleet-expires": expires}),
    );
    // 300 billion years: more seconds than an i64 holds (it used to wrap to the past).
    let out = command(&fake, dir.path())
        .args(["gc", "--cloud", "--older-than", "300000000000y"])
        .output()
        .await
        .unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(stdout.contains("keep server vf-young-node-001"), "{stdout}");
    assert!(stdout.contains("deleted 0 server(s)"), "{stdout}");
    assert_eq!(fake.state.servers().len(), 1);
    let out = command(&fake, dir.path())
        .args(["gc", "--cloud", "--older-than", "99999999999999999999999y"])
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("--older-than"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(fake.state.servers().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_succeeds_on_every_shipped_scenario() {
    let fake = fake(FakeConfig::default()).await;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in std::fs::read_dir(root.join("scenarios")).unwrap() {
        for f in std::fs::read_dir(dir.unwrap().path()).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|e| e == "yaml") {
                files.push(f);
            }
        }
    }
    assert!(files.len() >= 10, "{files:?}");
    for file in &files {
        let out = command(&fake, root)
            .arg("plan")
            .arg(file)
            .output()
            .await
            .unwrap();
        assert!(
            out.status.success(),
            "{}: {}",
            file.display(),
            text(&out.stderr)
        );
        assert!(
            text(&out.stdout).contains("viewers on Hetzner Cloud"),
            "{}",
            file.display()
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_prints_node_counts_and_costs_for_the_four_1000_viewer_scenarios() {
    let fake = fake(FakeConfig::default()).await;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = command(&fake, root)
        .arg("plan")
        .args(
            ["live-normal", "live-high", "live-high-half-p2p-off", "vod"]
                .map(|s| format!("scenarios/peertube-1000/{s}.yaml")),
        )
        .output()
        .await
        .unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // Fake prices: cx33 0.0087, cx53 0.0444 EUR/h net; a primary IPv4 0.50 EUR/month.
    for (name, nodes, hourly, fits) in [
        (
            "peertube-1000-live-normal",
            "7 × cx53",
            "0.3202 EUR/h",
            true,
        ),
        ("peertube-1000-live-high ", "7 × cx53", "0.3202 EUR/h", true),
        (
            "peertube-1000-live-high-half-p2p-off",
            "7 × cx53",
            "0.3202 EUR/h",
            true,
        ),
        ("peertube-1000-vod", "167 × cx33", "1.4623 EUR/h", false),
    ] {
        let section = stdout
            .split("\n\n")
            .find(|s| s.starts_with(name))
            .unwrap_or_else(|| panic!("no plan for {name}:\n{stdout}"));
        assert!(section.contains(&format!("nodes: {nodes}")), "{section}");
        assert!(section.contains(hourly), "{section}");
        // One hub creates the ramp's 5.6 sessions/s and holds 500 reads/s; a cx23 has not
        // the cores (1.29 of 1.2), a cx33 has (of 2.4). Its basis is stated.
        assert!(section.contains("hubs: 1 × cx33"), "{section}");
        assert!(
            section.contains("one hub suffices")
                && section.contains("the ramp asks 5.6 sessions/s")
                && section.contains("per hub 1.29 cores (of 2.4 usable)")
                && section.contains("max_parallel_starts 89")
                && section.contains("hub basis: 7.0 sessions/s"),
            "{section}"
        );
        assert_eq!(section.contains("WARNING"), !fits, "{section}");
        if fits {
            assert!(
                section.contains("chosen to fit fleet.server_limit (10): 8 servers")
                    && section
                        .contains("The cheapest fleet, 31 × cx33 (32 servers), costs 0.2791 EUR/h"),
                "{section}"
            );
        }
        if !fits {
            assert!(
                section.contains("the cheapest needs 168 servers, the one with the fewest 12"),
                "{section}"
            );
        }
        assert!(section.contains("Hetzner API: about"), "{section}");
    }
    // The budget is configurable from the command line: 720p viewers (1 core each).
    let out = command(&fake, root)
        .args([
            "plan",
            "--cpu-per-viewer",
            "1.0",
            "scenarios/peertube-1000/live-normal.yaml",
        ])
        .output()
        .await
        .unwrap();
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("1.000 cores") && stdout.contains("84 × cx53"),
        "{stdout}"
    );

    // No token: a clear error naming the fix.
    let out = command(&fake, root)
        .env_remove("HCLOUD_TOKEN")
        .args(["plan", "scenarios/peertube-1000/vod.yaml"])
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("set HCLOUD_TOKEN"));
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_fits_every_1000_viewer_scenario_within_10_servers_with_light_peers() {
    let fake = fake(FakeConfig::default()).await;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    // The live scenarios fit as all real viewers: the mix is shown only where they do not,
    // or asked for with a viewer count that does not fit (here 3000 live viewers).
    let out = command(&fake, root)
        .args(["plan", "--json", "scenarios/peertube-1000/vod.yaml"])
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stderr);
    eprintln!("{shown}");
    let doc = crate::support::schema::assert_valid("plan-summary.v1.json", &text(&out.stdout));
    let vod = &doc["plan"]["scenarios"][0];
    let mix = &vod["light_mix"];
    assert_eq!(vod["viewers"], 1000);
    assert!(vod["servers"].as_u64().unwrap() > 10, "all real: {vod}");
    assert_eq!(mix["fits_server_limit"], true, "{mix}");
    let (real, light) = (
        mix["real_viewers"].as_u64().unwrap(),
        mix["light_peers"].as_u64().unwrap(),
    );
    assert_eq!(real + light, 1000, "{mix}");
    assert!(real >= 100, "at least a tenth real: {mix}");
    assert!(mix["servers"].as_u64().unwrap() <= 10, "{mix}");
    assert!(
        mix["hourly_net"].as_f64().unwrap() < vod["hourly_net"].as_f64().unwrap(),
        "{mix}"
    );
    // The verdict the shipped scenario names (scenarios/fidelity/), with where it was measured.
    let fidelity = &mix["fidelity"];
    assert_eq!(fidelity["verdict"], "pass", "{mix}");
    assert_eq!(
        (fidelity["swarm"].as_u64(), fidelity["real"].as_u64()),
        (Some(5), Some(2))
    );
    assert_eq!(
        (fidelity["fleet"].as_str(), fidelity["throttling"].as_str()),
        (Some("local"), Some("http-only"))
    );
    assert!(
        fidelity["file"]
            .as_str()
            .unwrap()
            .ends_with("fidelity/vod-local-2of5.json"),
        "{fidelity}"
    );
    assert_eq!(mix["target_hosts_light_peers"], true);
    // All real viewers do not fit, the mix does: the plan fits, and plan exits 0.
    assert_eq!(vod["fits_server_limit"], true, "{vod}");
    let fewest = vod["fewest_servers"].as_u64().unwrap();
    assert!(
        fewest <= mix["servers"].as_u64().unwrap() && fewest <= 10,
        "the fewest servers are the mix's: {vod}"
    );
    assert_eq!(doc["exit_code"], 0);
    // The text says the mix, its cost, the verdict it relies on and what the target allows.
    for words in [
        &format!("with light peers: {real} real viewers + {light} light peers"),
        "(within fleet.server_limit 10)",
        "the mix saves",
        "fidelity: pass (5 real vs 2 real + 3 light, measured 2026-12-05T13:54:16Z on the local fleet under http-only;",
        "light peers on a `peertube` target run p2p-media-loader-core 2.x in browser pages of the instance",
    ] {
        assert!(shown.contains(words), "no {words:?} in:\n{shown}");
    }
    // Every shipped 1000-viewer scenario fits 10 servers once its swarm is mostly light.
    for name in ["live-normal", "live-high", "live-high-half-p2p-off", "vod"] {
        let out = command(&fake, root)
            .args(["plan", "--json", "--viewers", "3000"])
            .arg(format!("scenarios/peertube-1000/{name}.yaml"))
            .output()
            .await
            .unwrap();
        assert!(out.status.success(), "{name}: {}", text(&out.stderr));
        let doc = crate::support::schema::assert_valid("plan-summary.v1.json", &text(&out.stdout));
        let mix = &doc["plan"]["scenarios"][0]["light_mix"];
        assert_eq!(mix["fits_server_limit"], true, "{name} at 3000: {mix}");
        assert!(mix["servers"].as_u64().unwrap() <= 10, "{name}: {mix}");
        assert_eq!(mix["swarm"], 3000, "{name}: {mix}");
        // Every shipped verdict but the P2P-off share's, which `fidelity` cannot measure.
        if name == "live-high-half-p2p-off" {
            assert_eq!(mix["fidelity"], serde_json::Value::Null);
            let shown = text(&out.stderr);
            assert!(shown.contains("fidelity: no verdict measured"), "{shown}");
        } else {
            assert_eq!(mix["fidelity"]["verdict"], "pass", "{name}: {mix}");
        }
    }
}

/// Neither all real viewers nor a mix with light peers fits the server limit: `plan`
/// exits 78 (`over-server-limit`), says so on stderr with the fewest servers that would
/// fit, and `--json` names the scenario that does not fit.
#[tokio::test(flavor = "multi_thread")]
async fn plan_exits_78_with_the_fewest_servers_when_no_fleet_fits_the_server_limit() {
    let fake = fake(FakeConfig::default()).await;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    // The shipped scenarios with a project limit of 2 servers (a hub and one node).
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for name in ["vod", "live-normal"] {
        let text =
            crate::support::shipped_scenario(&format!("scenarios/peertube-1000/{name}.yaml"));
        assert!(text.contains("server_limit: 10"), "{name}");
        let file = dir.path().join(format!("{name}.yaml"));
        std::fs::write(&file, text.replace("server_limit: 10", "server_limit: 2")).unwrap();
        files.push(file);
    }
    let out = command(&fake, root)
        .args(["plan", "--json"])
        .args(&files)
        .output()
        .await
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    let doc = crate::support::schema::assert_valid("plan-summary.v1.json", &text(&out.stdout));
    assert_eq!(doc["outcome"], "over-server-limit");
    let scenarios = doc["plan"]["scenarios"].as_array().unwrap();
    assert_eq!(scenarios.len(), 2, "every scenario is still planned");
    // VOD (0.4 cores per viewer) fits neither way.
    let vod = &scenarios[0];
    assert_eq!(vod["fits_server_limit"], false, "{vod}");
    assert_eq!(vod["light_mix"]["fits_server_limit"], false, "{vod}");
    let fewest = vod["fewest_servers"].as_u64().unwrap();
    assert!(fewest > 2, "{vod}");
    assert!(
        fewest <= vod["light_mix"]["servers"].as_u64().unwrap(),
        "the fewest of all real and the mix: {vod}"
    );
    assert!(
        stderr.contains(&format!(
            "no fleet fits fleet.server_limit (2), neither all real viewers nor a mix with light peers; the fewest servers that would fit are {fewest} (exit code 78)"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("set `fleet.server_limit: {fewest}`")),
        "{stderr}"
    );
    // Live 240p: all real needs more than 2 servers, the mix offered fits: no error for it.
    let live = &scenarios[1];
    assert!(live["servers"].as_u64().unwrap() > 2, "{live}");
    assert_eq!(live["light_mix"]["fits_server_limit"], true, "{live}");
    assert_eq!(live["fits_server_limit"], true, "{live}");
    assert!(live["fewest_servers"].as_u64().unwrap() <= 2, "{live}");
    assert_eq!(
        stderr.matches("neither all real viewers nor a mix").count(),
        1,
        "only VOD does not fit: {stderr}"
    );
    // Without --json: the same code, the text still on stdout.
    let out = command(&fake, root)
        .arg("plan")
        .arg(&files[0])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(78), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("viewers on Hetzner Cloud"));
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_sizes_nodes_from_a_calibration() {
    use viewerfleet::calibrate::{BrowserProfile, Calibration, ProfileFigures};
    let fake = fake(FakeConfig::default()).await;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    use viewerfleet::model::kinds::VideoKind;
    let figures = |profile: BrowserProfile, video: VideoKind, cpu: f64, pss_max: f64| {
        let mut f = ProfileFigures::empty(profile, 4);
        f.video = video;
        f.viewers_measured = 4;
        f.pss_mb_per_viewer = pss_max - 20.0;
        f.pss_mb_per_viewer_max = pss_max;
        f.cpu_cores_per_viewer = cpu;
        f
    };
    let calibration = Calibration {
        created: "2026-11-30T18:00:00Z".into(),
        host: Default::default(),
        chromium: "Chromium 156".into(),
        scenario: "built-in".into(),
        videos: vec![VideoKind::Live, VideoKind::Vod],
        viewers: 4,
        repeat: 1,
        warmup_s: 15.0,
        window_s: 60.0,
        command: "viewerfleet calibrate".into(),
        // The default profile is dearer: plan must take viewerfleet's figures, those of
        // the scenario's video and packing.
        profiles: vec![
            figures(
                BrowserProfile::default_chromedriver(),
                VideoKind::Live,
                0.9,
                900.0,
            ),
            figures(BrowserProfile::project(), VideoKind::Live, 0.5, 300.0),
            figures(BrowserProfile::packed(), VideoKind::Live, 0.25, 150.0),
            figures(BrowserProfile::project(), VideoKind::Vod, 0.75, 400.0),
        ],
    };
    std::fs::write(
        dir.path().join("calibration.json"),
        serde_json::to_string(&calibration).unwrap(),
    )
    .unwrap();
    let out = command(&fake, root)
        .args(["plan", "--calibration"])
        .arg(dir.path())
        .arg("scenarios/peertube-1000/live-normal.yaml")
        .output()
        .await
        .unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stdout.contains("budget per viewer: 0.500 cores, 300 MB"),
        "{stdout}"
    );
    // Four viewers per browser: the packed row; a VOD scenario: the VOD row.
    let out = command(&fake, root)
        .args(["plan", "--per-browser", "4", "--calibration"])
        .arg(dir.path())
        .args([
            "scenarios/peertube-1000/live-normal.yaml",
            "scenarios/peertube-1000/vod.yaml",
        ])
        .output()
        .await
        .unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stdout.contains("budget per viewer: 0.250 cores, 150 MB (4 per browser)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("measured at 1 per browser (vod), taken for 4"),
        "{stdout}"
    );
    assert!(
        stdout.contains("budget per viewer: 0.750 cores, 400 MB (4 per browser)"),
        "{stdout}"
    );

    // A calibration without a measured project profile is refused with the fix.
    let mut broken = calibration.clone();
    broken.profiles.truncate(1);
    let file = dir.path().join("default-only.json");
    std::fs::write(&file, serde_json::to_string(&broken).unwrap()).unwrap();
    let out = command(&fake, root)
        .args(["plan", "--calibration"])
        .arg(&file)
        .arg("scenarios/peertube-1000/live-normal.yaml")
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("no row of viewerfleet's profiles (project, packed)"),
        "{stderr}"
    );

    // Not a calibration at all.
    let out = command(&fake, root)
        .args(["plan", "--calibration", "Cargo.toml"])
        .arg("scenarios/peertube-1000/live-normal.yaml")
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("not a calibration"));
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_json_gives_every_scenarios_fleet_and_a_missing_token_is_bad_input() {
    let fake = fake(FakeConfig::default()).await;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = command(&fake, root)
        .args([
            "plan",
            "--json",
            "scenarios/peertube-1000/live-normal.yaml",
            "scenarios/peertube-1000/vod.yaml",
        ])
        .output()
        .await
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    let doc = crate::support::schema::assert_valid("plan-summary.v1.json", &stdout);
    let plans = doc["plan"]["scenarios"].as_array().unwrap();
    assert_eq!(plans.len(), 2);
    // The same figures the text gives (the text went to stderr).
    assert_eq!(plans[0]["nodes"]["server_type"], "cx53");
    assert_eq!(plans[0]["nodes"]["nodes"], 7);
    assert_eq!(plans[1]["nodes"]["nodes"], 167);
    assert!(stderr.contains("nodes: 7 × cx53"), "{stderr}");
    assert!(!stdout.contains("nodes: 7 × cx53"));

    let out = command(&fake, root)
        .env_remove("HCLOUD_TOKEN")
        .args(["plan", "--json", "scenarios/peertube-1000/vod.yaml"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let doc = crate::support::schema::assert_valid("plan-summary.v1.json", &text(&out.stdout));
    assert_eq!(doc["outcome"], "bad-input");
    assert!(doc["error"].as_str().unwrap().contains("HCLOUD_TOKEN"));
}

/// terraform/terraform.tfvars.example sizes the fleet as `viewerfleet plan` does today for
/// the scenario it names, so the Terraform route starts from the fleet `up` would create.
#[tokio::test(flavor = "multi_thread")]
async fn the_terraform_example_sizes_the_fleet_as_plan_does() {
    let scenario = "scenarios/peertube-1000/live-normal.yaml";
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let example = std::fs::read_to_string(root.join("terraform/terraform.tfvars.example")).unwrap();
    assert!(
        example.contains(&format!("viewerfleet plan {scenario}")),
        "the example names its scenario"
    );
    let fake = fake(FakeConfig::default()).await;
    let out = command(&fake, root)
        .args(["plan", "--json", scenario])
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    let plan = &doc["plan"]["scenarios"][0];
    // Terraform's viewers_per_node is browsers per node (Selenium's max-sessions): the same
    // number at one viewer per browser.
    assert_eq!(plan["per_browser"], 1, "{scenario}: one viewer per browser");

    let vars = hcl_edit::parser::parse_body(&example).unwrap();
    let var = |key: &str| -> String {
        vars.get_attribute(key)
            .unwrap_or_else(|| panic!("the example sets no {key}"))
            .value
            .to_string()
            .trim()
            .trim_matches('"')
            .to_string()
    };
    let nodes = &plan["nodes"];
    let (node_type, node_count, per_node, hub) = (
        nodes["server_type"].as_str().unwrap(),
        nodes["nodes"].as_u64().unwrap(),
        nodes["viewers_per_node"].as_u64().unwrap(),
        plan["hub"]["server_type"].as_str().unwrap(),
    );
    assert_eq!(var("location"), plan["location"].as_str().unwrap());
    assert_eq!(var("node_type"), node_type);
    assert_eq!(var("node_count"), node_count.to_string());
    assert_eq!(var("viewers_per_node"), per_node.to_string());
    assert_eq!(var("hub_type"), hub);
    // The comment quotes the same figures.
    for quoted in [
        format!("nodes: {node_count} × {node_type}"),
        format!("{per_node} viewers per node"),
        format!("hub: 1 × {hub}"),
    ] {
        assert!(example.contains(&quoted), "the example's comment: {quoted}");
    }
}

/// A ramp faster than one hub creates sessions (measured: `hub_sizing::MEASURED`) splits the
/// fleet over two hubs: `plan` says so and why, `run` creates both (only the first carries
/// the heartbeat), registers half the nodes with each (as their user data says), spreads the
/// viewers over both hubs' nodes through the fake's per-hub Grids, and deletes everything.
#[tokio::test(flavor = "multi_thread")]
async fn a_ramp_one_hub_cannot_follow_splits_the_fleet_over_two_hubs() {
    let sessions = Arc::new(StubCounters::default());
    let fake = fake(FakeConfig {
        node_boot: Some(Duration::from_millis(100)),
        webdriver: Some(webdriver_stub::app(StubConfig::default(), sessions.clone())),
        ..FakeConfig::default()
    })
    .await;
    let target = target().await;
    let dir = tempfile::tempdir().unwrap();
    // 12 viewers asked for at 1.5 times what one hub creates: two hubs; 3 per node: 4 nodes.
    let rate = viewerfleet::cloud::hub_sizing::MEASURED.creations_per_s;
    let ramp_ms = (12.0 / (1.5 * rate) * 1000.0).round() as u64;
    let path = scenario(
        dir.path(),
        &target_url(&target),
        12,
        "  viewers_per_node: 3\n  heartbeat_interval: 1s\n",
    );
    let peertube = format!(
        "  kind: peertube\n  video: live\n  url: {}\n",
        target_url(&target)
    );
    let yaml = std::fs::read_to_string(&path)
        .unwrap()
        .replace(&peertube, "  kind: refsite\n  video: live\n")
        .replace("  viewers_per_node: 4\n", "")
        .replace(
            "  count: 12\n",
            &format!("  count: 12\n  ramp: {ramp_ms}ms\n"),
        )
        .replace(
            "duration: 1m\n",
            "duration: 6s\nsampling_interval: 500ms\nmeasure_at: 5s\nsteady_window: 2s\n",
        )
        .replace(
            "  url: ",
            &format!("  exporter: http://{}/metrics\n  url: ", target.addr()),
        );
    std::fs::write(&path, yaml).unwrap();

    let planned = command(&fake, dir.path())
        .arg("plan")
        .arg(&path)
        .output()
        .await
        .unwrap();
    let plan_text = text(&planned.stdout);
    assert!(planned.status.success(), "{}", text(&planned.stderr));
    assert!(
        plan_text.contains("hubs: 2 × ") && plan_text.contains("split by rate"),
        "{plan_text}"
    );
    assert!(
        plan_text.contains("hub basis: ") && plan_text.contains("BENCHMARKS.md"),
        "{plan_text}"
    );

    let (out_dir, stderr, _) = run_through_the_fake(
        &fake,
        dir.path(),
        &path,
        &[("VIEWERFLEET_HCLOUD_HUB_URL", fake.hubs_url())],
        180,
    )
    .await;

    // Two hubs, the heartbeat on the first only; nodes split evenly between them.
    let created: Vec<serde_json::Value> = fake
        .state
        .recorded()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path == "/v1/servers" && r.status < 300)
        .map(|r| r.body)
        .collect();
    let hubs: Vec<&serde_json::Value> = created
        .iter()
        .filter(|s| s["labels"]["viewerfleet-role"] == "hub")
        .collect();
    assert_eq!(hubs.len(), 2);
    assert!(hubs[0]["name"].as_str().unwrap().ends_with("-hub"));
    assert!(hubs[1]["name"].as_str().unwrap().ends_with("-hub-2"));
    assert!(hubs[0]["labels"]["viewerfleet-heartbeat"].is_string());
    assert!(hubs[1]["labels"]["viewerfleet-heartbeat"].is_null());
    let mut hub_addrs: Vec<String> = created
        .iter()
        .filter(|s| s["labels"]["viewerfleet-role"] == "node")
        .map(|s| {
            let ud = s["user_data"].as_str().unwrap();
            ud.lines()
                .find_map(|l| l.trim().strip_prefix("HUB_ADDR="))
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(hub_addrs.len(), 4);
    hub_addrs.sort();
    assert_eq!(hub_addrs[0], hub_addrs[1]);
    assert_eq!(hub_addrs[2], hub_addrs[3]);
    assert_ne!(hub_addrs[0], hub_addrs[2], "two nodes per hub");

    // Every viewer played, on the nodes of both hubs.
    let events: Vec<serde_json::Value> =
        std::fs::read_to_string(out_dir.join("raw/viewer_events.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    let mut nodes: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "playing")
        .map(|e| e["node"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(nodes.len(), 12, "{stderr}");
    nodes.sort();
    nodes.dedup();
    assert_eq!(nodes.len(), 4, "all four nodes, two per hub: {nodes:?}");
    let manifest = std::fs::read_to_string(out_dir.join("manifest.json")).unwrap();
    assert!(
        manifest.contains("behind 2 Selenium Grid 4 hub(s)"),
        "{manifest}"
    );

    // Nothing left: sessions, servers, firewalls, key.
    assert_eq!(sessions.sessions_created.load(Relaxed), 12);
    assert_eq!(sessions.sessions_deleted.load(Relaxed), 12);
    assert!(
        fake.state.servers_matching("viewerfleet-run").is_empty(),
        "{stderr}"
    );
    assert!(fake.state.firewalls().is_empty() && fake.state.ssh_keys().is_empty());
    fake.no_reaper_left().await;
}

/// `fleet.canary`: one node is made first and measured with viewers; a viewer there costs
/// 80% more than the plan's budget (the fake's node model), so the fleet says so and is
/// sized from the canary: half the viewers per node, twice the nodes — the canary itself,
/// built for the plan's larger share, replaced. Every viewer plays and nothing is left.
#[tokio::test(flavor = "multi_thread")]
async fn a_canary_node_measured_well_above_the_budget_doubles_the_fleet() {
    use viewerfleet_kit::fake_hcloud::NodeLoadModel;
    let sessions = Arc::new(StubCounters::default());
    let fake = fake(FakeConfig {
        node_boot: Some(Duration::from_millis(100)),
        webdriver: Some(webdriver_stub::app(StubConfig::default(), sessions.clone())),
        // 4 cores; a session (one viewer) uses 0.9 cores where the budget says 0.5.
        node_load: Some(NodeLoadModel {
            cores: 4.0,
            idle_cores: 0.2,
            cores_per_session: 0.9,
            steal: 0.0,
            pss_mb_per_session: 100.0,
        }),
        ..FakeConfig::default()
    })
    .await;
    let target = target().await;
    let dir = tempfile::tempdir().unwrap();
    // Budget: 0.5 cores a viewer on 4 × 0.8 − 0.2 = 3 cores: 6 viewers per node, 2 nodes.
    let path = scenario(
        dir.path(),
        &target_url(&target),
        12,
        "  budget: {cpu_per_viewer: 0.5, memory_mb_per_viewer: 100, cpu_per_browser: 0, memory_mb_per_browser: 0, cpu_target: 0.8, node_reserve_cpu: 0.2}\n  canary: {warmup: 1s, window: 10s}\n",
    );
    let peertube = format!(
        "  kind: peertube\n  video: live\n  url: {}\n",
        target_url(&target)
    );
    let yaml = std::fs::read_to_string(&path)
        .unwrap()
        .replace(&peertube, "  kind: refsite\n  video: live\n")
        .replace("  viewers_per_node: 4\n", "")
        .replace(
            "duration: 1m\n",
            "duration: 6s\nsampling_interval: 1s\nmeasure_at: 5s\nsteady_window: 2s\n",
        );
    std::fs::write(&path, yaml).unwrap();
    let (out_dir, stderr, _) = run_through_the_fake(&fake, dir.path(), &path, &[], 240).await;

    // The canary: three viewers (half a planned node) on one node, its run kept.
    let canary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir.join("canary/manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(canary["plan"]["viewers"], 3, "{canary}");
    assert!(
        stderr.contains("canary cx33 with 3 viewers (1 per browser): 0.900 cores")
            && stderr.contains("+80%")
            && stderr.contains("outside the ±25% margin"),
        "{stderr}"
    );
    // Sized from it: 3 viewers per node (3 cores at 0.9), 4 nodes; the canary (6 slots)
    // deleted, 4 made.
    let created: Vec<serde_json::Value> = fake
        .state
        .recorded()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path == "/v1/servers" && r.status < 300)
        .map(|r| r.body)
        .filter(|s| s["labels"]["viewerfleet-role"] == "node")
        .collect();
    let sessions_of = |s: &serde_json::Value| {
        s["user_data"]
            .as_str()
            .unwrap()
            .lines()
            .find_map(|l| l.trim().strip_prefix("MAX_SESSIONS="))
            .unwrap()
            .to_string()
    };
    assert_eq!(
        created.iter().map(sessions_of).collect::<Vec<_>>(),
        ["6", "3", "3", "3", "3"],
        "the canary, then the fleet sized from it: {stderr}"
    );
    let manifest = std::fs::read_to_string(out_dir.join("manifest.json")).unwrap();
    assert!(
        manifest.contains("The fleet was sized from a canary node")
            && manifest.contains("Planned 6 viewers per node on 2 nodes, made 3 on 4"),
        "{manifest}"
    );
    // Every viewer of the run played; nothing left.
    let events = std::fs::read_to_string(out_dir.join("raw/viewer_events.jsonl")).unwrap();
    assert_eq!(
        events.matches("\"event\":\"playing\"").count(),
        12,
        "{stderr}"
    );
    // The nodes counted their browsers by user and sandbox; the report says it, and the
    // fleet note no longer says they cannot.
    let summary = viewerfleet::report::write_report(&out_dir).unwrap();
    assert!(
        summary.honesty.implications.iter().any(|l| l
            == "Measured on the nodes: Browsers on all 4 nodes ran as user viewerfleet-browser, \
                of their own, with Chromium's sandbox."),
        "{:?}",
        summary.honesty.implications
    );
    assert!(
        manifest.contains("the nodes count how their browsers ran")
            && !manifest.contains("do not report"),
        "{manifest}"
    );
    assert_eq!(
        sessions.sessions_created.load(Relaxed),
        sessions.sessions_deleted.load(Relaxed)
    );
    assert!(fake.state.servers_matching("viewerfleet-run").is_empty());
    fake.no_reaper_left().await;
}

/// Paid servers are confirmed first: `up` (and `run` on a cloud fleet) without `--yes`, with
/// nobody to answer (stdin not a terminal), says what it would have bought and refuses
/// before any request that creates something — only the free reads (types, prices) were
/// sent. With `--yes` (or VIEWERFLEET_YES) it goes ahead, as the other tests do.
#[tokio::test(flavor = "multi_thread")]
async fn up_without_yes_and_nobody_to_ask_refuses_before_anything_is_bought() {
    let fake = fake(FakeConfig::default()).await;
    let target = target().await;
    let dir = tempfile::tempdir().unwrap();
    let path = scenario(dir.path(), &target_url(&target), 12, "");
    for args in [vec!["up"], vec!["run", "--no-report"]] {
        let out = command(&fake, dir.path())
            .env_remove("VIEWERFLEET_YES")
            .args(&args)
            .arg(&path)
            .stdin(Stdio::null())
            .output()
            .await
            .unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("viewerfleet is about to create 1 hub(s) (")
                && stderr.contains("× cx33 nodes in fsn1 for about")
                && stderr.contains("pass --yes"),
            "{args:?}: {stderr}"
        );
    }
    let sent: Vec<String> = fake
        .state
        .recorded()
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(!sent.is_empty(), "it read the prices first");
    assert!(
        sent.iter().all(|r| r.starts_with("GET ")),
        "nothing but reads: {sent:?}"
    );
    assert!(fake.state.servers().is_empty() && fake.state.ssh_keys().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_tfvars_writes_the_chosen_sizes_as_the_terraform_modules_variables() {
    let fake = fake(FakeConfig::default()).await;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("id.pub");
    std::fs::write(
        &key,
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAITfvarsKey t@example\n",
    )
    .unwrap();
    let shipped = crate::support::shipped_scenario("scenarios/peertube-1000/live-normal.yaml");
    let scenario = dir.path().join("live.yaml");
    std::fs::write(
        &scenario,
        shipped.replace(
            "  # controller_ips: [\"203.0.113.7/32\"]",
            &format!(
                "  controller_ips: [\"203.0.113.7/32\"]\n  ssh_public_key: {}",
                key.display()
            ),
        ),
    )
    .unwrap();
    let tfvars = dir.path().join("fleet.tfvars");
    let out = command(&fake, root)
        .args(["plan", "--json", "--tfvars"])
        .arg(&tfvars)
        .arg(&scenario)
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let plan = &summary["plan"]["scenarios"][0];
    let written = std::fs::read_to_string(&tfvars).unwrap();
    let value = |key: &str| {
        written
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim() == key).then(|| v.trim().to_string())
            })
            .unwrap_or_else(|| panic!("{key} missing in:\n{written}"))
    };
    // The sizes are the plan's, not a copy of the example's.
    assert_eq!(
        value("node_count"),
        plan["nodes"]["nodes"].to_string(),
        "{written}\n{plan}"
    );
    assert_eq!(
        value("viewers_per_node"),
        plan["nodes"]["viewers_per_node"].to_string(),
        "{written}"
    );
    assert_eq!(
        value("node_type"),
        plan["nodes"]["server_type"].to_string(),
        "{written}"
    );
    assert_eq!(value("controller_ips"), "[\"203.0.113.7/32\"]");
    // The run's Grid secrets, new random ones, in a file only its owner reads; never printed.
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&tfvars).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    for secret in ["registration_secret", "grid_password"] {
        let v = value(secret);
        let v = v.trim_matches('"');
        assert!(
            v.len() == 64 && v.chars().all(|c| c.is_ascii_hexdigit()),
            "{secret}"
        );
        assert!(!text(&out.stdout).contains(v) && !text(&out.stderr).contains(v));
    }
    assert_ne!(value("registration_secret"), value("grid_password"));
    assert_eq!(value("grid_username"), "\"viewerfleet\"");
    assert!(
        value("ssh_public_key").starts_with("\"ssh-ed25519 AAAA"),
        "{written}"
    );
    assert_eq!(
        (
            value("slot_down_kbit"),
            value("slot_up_kbit"),
            value("slot_delay_ms")
        ),
        ("2000".into(), "300".into(), "500".into())
    );
    // Every variable written is one the module declares.
    let declared = std::fs::read_to_string(root.join("terraform/variables.tf")).unwrap();
    for line in written.lines().filter(|l| !l.starts_with('#')) {
        let key = line.split('=').next().unwrap().trim();
        assert!(
            declared.contains(&format!("variable \"{key}\"")),
            "{key} is not a variable of terraform/"
        );
    }
    // Two scenarios cannot share one file.
    let out = command(&fake, root)
        .args(["plan", "--tfvars"])
        .arg(&tfvars)
        .arg(&scenario)
        .arg(&scenario)
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("give one scenario"));
}

/// A suite's cloud runs each keep their reaper's log in their own run folder, where the
/// user reads the run, not in one shared place.
#[tokio::test(flavor = "multi_thread")]
async fn each_cloud_run_of_a_suite_keeps_its_reapers_log_in_its_own_folder() {
    let sessions = Arc::new(StubCounters::default());
    let fake = fake(FakeConfig {
        node_boot: Some(Duration::from_millis(100)),
        webdriver: Some(webdriver_stub::app(StubConfig::default(), sessions.clone())),
        ..FakeConfig::default()
    })
    .await;
    let target = target().await;
    let dir = tempfile::tempdir().unwrap();
    let path = scenario(dir.path(), &target_url(&target), 2, "");
    let yaml = std::fs::read_to_string(&path)
        .unwrap()
        .replace(
            "duration: 1m\n",
            "duration: 5s\nsampling_interval: 500ms\nmeasure_at: 4s\nsteady_window: 2s\n",
        )
        .replace(
            "  url: ",
            &format!("  exporter: http://{}/metrics\n  url: ", target.addr()),
        );
    std::fs::write(&path, yaml).unwrap();
    let out_dir = dir.path().join("suite");
    let out = tokio::time::timeout(
        Duration::from_secs(240),
        command(&fake, dir.path())
            .args(["--quiet", "suite", "--repeat", "2", "--out"])
            .arg(&out_dir)
            .arg(&path)
            .output(),
    )
    .await
    .expect("the suite ends")
    .unwrap();
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
    for k in 1..=2 {
        let run = out_dir.join(format!("{stem}-{k}"));
        let log = reaper_finished("the run's reaper to finish", 60, || {
            std::fs::read_to_string(run.join("reaper.log")).unwrap_or_default()
        })
        .await;
        assert!(
            log.contains("deleted the run itself"),
            "{}: {log}",
            run.display()
        );
    }
    assert!(
        !dir.path().join("runs").exists(),
        "no reaper log outside the run folders"
    );
    assert!(fake.state.servers().is_empty());
    fake.no_reaper_left().await;
}

/// `up` of a swarm of real viewers and light peers buys the fleet `plan` prints for that
/// mix: nodes sized for what the light peers cost, and a Grid slot for every page of them.
#[tokio::test(flavor = "multi_thread")]
async fn up_buys_the_fleet_plan_prints_for_a_mix_of_viewers_and_light_peers() {
    let fake = booting_fake().await;
    let target = target().await;
    let dir = tempfile::tempdir().unwrap();
    let path = scenario(dir.path(), &target_url(&target), 8, "");
    // The budget sizes the nodes; 400 light peers in pages of 25.
    let peertube = format!(
        "  kind: peertube\n  video: live\n  url: {}\n",
        target_url(&target)
    );
    let yaml = std::fs::read_to_string(&path)
        .unwrap()
        .replace(&peertube, "  kind: refsite\n  video: live\n")
        .replace("  viewers_per_node: 4\n", "")
        + "swarm:\n  light_peers: 400\n  per_page: 25\n";
    std::fs::write(&path, yaml).unwrap();

    let out = command(&fake, dir.path())
        .args(["plan", "--json"])
        .arg(&path)
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let planned = &doc["plan"]["scenarios"][0];
    let mix = &planned["light_mix"];
    assert_eq!(
        (mix["real_viewers"].as_u64(), mix["light_peers"].as_u64()),
        (Some(8), Some(400)),
        "{mix}"
    );
    let mix_servers = mix["servers"].as_u64().unwrap();
    assert!(
        mix_servers < planned["servers"].as_u64().unwrap(),
        "the mix is smaller than 408 real viewers: {planned}"
    );

    let (stderr, _, inv) = up_with_inventory(&fake, dir.path(), &path).await;
    assert!(
        stderr.contains("8 real viewers + 400 light peers (pages of 25"),
        "{stderr}"
    );
    let run = inv["run"].as_str().unwrap().to_string();
    let servers = fake
        .state
        .servers_matching(&format!("viewerfleet-run={run}"));
    assert_eq!(
        servers.len() as u64,
        mix_servers,
        "up buys plan's mix: {stderr}"
    );
    // Every node offers its share of the 8 viewers' browsers and 16 light pages.
    let slots: u32 = fake
        .state
        .recorded()
        .iter()
        .filter(|r| {
            r.method == "POST"
                && r.path == "/v1/servers"
                && r.body["labels"]["viewerfleet-role"] == "node"
        })
        .map(|r| {
            let user_data = r.body["user_data"].as_str().unwrap_or_default();
            user_data
                .lines()
                .find_map(|l| l.trim().strip_prefix("MAX_SESSIONS="))
                .unwrap_or_else(|| panic!("MAX_SESSIONS in a node's user data"))
                .parse::<u32>()
                .unwrap()
        })
        .sum();
    assert!(slots >= 8 + 16, "{slots} Grid slots for 24 sessions");

    let out = command(&fake, dir.path())
        .arg("down")
        .arg(&run)
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    fake.no_reaper_left().await;
}
