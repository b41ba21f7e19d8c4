//! The reaper against the fake Hetzner API: the process a cloud command starts so that its
//! run is deleted however the controller ends. `kill -9` of `up` with creates still in
//! flight, of `run` while its viewers play and while it tears down; a kept fleet's TTL, a
//! network that keeps failing, and a panic on `up`'s main path. (A clean `run`, `up` then
//! `down`, and SIGINT/SIGTERM/SIGHUP/SIGQUIT are in `cloud_cli.rs`.)

use super::cloud_cli::{
    booting_fake, command, driven_scenario, fake, reaper_finished, reaper_pid, scenario, target,
    target_url, text, until, up_reaper_log, BIN, TOKEN,
};
use reqwest::Method;
use std::process::Stdio;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use viewerfleet_kit::fake_hcloud::{FakeConfig, FakeHcloud, Fault, FaultKind};
use viewerfleet_kit::webdriver_stub::{self, StubConfig, StubCounters};

/// With the timings a reaper uses against an endpoint other than Hetzner's (its listing
/// settles after 3 s), the longest a killed controller's run may stay listed in these tests.
const REAPED_WITHIN: Duration = Duration::from_secs(30);

fn deletes_of_servers(fake: &FakeHcloud) -> usize {
    fake.state
        .recorded()
        .iter()
        .filter(|r| r.method == "DELETE" && r.path.starts_with("/v1/servers/"))
        .count()
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_of_up_leaves_its_reaper_to_delete_every_server_even_those_created_late() {
    // Every server create is executed 1.5 s after it arrives, whether or not its client is
    // still there; deletions take 2.5 s, so the late creates land while the reaper works.
    let fake = fake(FakeConfig {
        node_boot: None,
        action_time: Duration::from_millis(2500),
        faults: vec![Fault {
            method: Method::POST,
            path: "/v1/servers".into(),
            kind: FaultKind::Late(Duration::from_millis(1500)),
            times: None,
        }],
        ..FakeConfig::default()
    })
    .await;
    let target = target().await;
    let dir = tempfile::tempdir().unwrap();
    let path = scenario(dir.path(), &target_url(&target), 12, "");
    let mut child = command(&fake, dir.path())
        .arg("up")
        .arg(&path)
        .spawn()
        .unwrap();
    // The reaper runs before the first create: in a session of its own, the token in
    // neither its arguments nor its environment.
    until("the reaper's log", 60, || {
        reaper_pid(&up_reaper_log(dir.path())).is_some()
    })
    .await;
    let reaper = reaper_pid(&up_reaper_log(dir.path())).unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{reaper}/stat")).unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    assert_eq!(fields[3], reaper.to_string(), "its own session: {stat}");
    assert_eq!(
        fields[2],
        reaper.to_string(),
        "its own process group: {stat}"
    );
    let cmdline = std::fs::read(format!("/proc/{reaper}/cmdline")).unwrap();
    assert!(!text(&cmdline).contains(TOKEN));
    // Not dumpable: /proc/<pid>/environ is not even readable; if it is, no token in it.
    if let Ok(environ) = std::fs::read(format!("/proc/{reaper}/environ")) {
        assert!(!text(&environ).contains(TOKEN) && !text(&environ).contains("HCLOUD_TOKEN"));
    }

    // The hub exists; the three node creates have arrived and wait to be executed.
    until("the node creates in flight", 60, || {
        fake.state.counts().late >= 4
    })
    .await;
    assert_eq!(fake.state.servers_matching("viewerfleet-run").len(), 1);
    child.start_kill().unwrap();
    child.wait().await.unwrap();

    let log = reaper_finished("the reaper to finish", 90, || up_reaper_log(dir.path())).await;
    assert!(log.contains("the controller is gone"), "{log}");
    // The hub in the first round, the late nodes in a later one, then firewalls and key.
    assert!(log.contains("round 2:"), "{log}");
    assert!(
        log.contains("deleted 4 server(s), 2 firewall(s), 1 SSH key(s)"),
        "{log}"
    );
    assert!(log.contains("nothing of run"), "{log}");
    assert!(!log.contains(TOKEN));
    assert!(fake.state.servers().is_empty());
    assert!(fake.state.firewalls().is_empty() && fake.state.ssh_keys().is_empty());
    assert_eq!(deletes_of_servers(&fake), 4);
    fake.no_reaper_left().await;
}

/// A `run` started on the fake's hub, and what a test watches of it.
struct DrivenRun {
    fake: super::cloud_cli::Fake,
    child: tokio::process::Child,
    /// The run folder, `<dir>/run`.
    out_dir: std::path::PathBuf,
    sessions: Arc<StubCounters>,
    /// The target; it answers the run's checks until the test ends.
    _target: viewerfleet_kit::webdriver_stub::Stub,
}

/// `viewerfleet run --no-report` of `viewers` stub viewers for `duration` on the fake's hub.
async fn start_driven_run(
    config: FakeConfig,
    dir: &std::path::Path,
    viewers: u32,
    duration: &str,
) -> DrivenRun {
    let sessions = Arc::new(StubCounters::default());
    let fake = fake(FakeConfig {
        node_boot: Some(Duration::from_millis(100)),
        webdriver: Some(webdriver_stub::app(StubConfig::default(), sessions.clone())),
        ..config
    })
    .await;
    let target = target().await;
    let path = driven_scenario(dir, &target, viewers, duration);
    let out_dir = dir.join("run");
    let child = command(&fake, dir)
        .args(["run", "--no-report"])
        .arg(&path)
        .arg("--out")
        .arg(&out_dir)
        .spawn()
        .unwrap();
    DrivenRun {
        fake,
        child,
        out_dir,
        sessions,
        _target: target,
    }
}

/// Removes the profile folders a controller killed with `kill -9` had no chance to remove
/// (what `gc --local` would do for it, without touching the other tests' runs).
fn remove_profiles_of(pid: Option<u32>) {
    let Some(pid) = pid else { return };
    let prefix = format!("{}{pid}-", viewerfleet::viewer::PROFILE_PREFIX);
    for entry in std::fs::read_dir(std::env::temp_dir()).unwrap().flatten() {
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The run's reaper log once it says it finished, and how long after `since` that was.
async fn reaped(out_dir: &std::path::Path, since: Instant) -> (String, Duration) {
    let log = reaper_finished("the reaper to finish", 120, || {
        std::fs::read_to_string(out_dir.join("reaper.log")).unwrap_or_default()
    })
    .await;
    (log, since.elapsed())
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_of_run_while_its_viewers_play_leaves_its_reaper_to_delete_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let DrivenRun {
        fake,
        mut child,
        out_dir,
        sessions,
        _target,
    } = start_driven_run(FakeConfig::default(), dir.path(), 6, "10m").await;
    // Every viewer has its session and plays; the run has ten minutes to go.
    until("six sessions", 120, || {
        sessions.sessions_created.load(Relaxed) >= 6
    })
    .await;
    until("the viewers playing", 60, || {
        std::fs::read_to_string(out_dir.join("raw/viewer_events.jsonl"))
            .unwrap_or_default()
            .matches("\"playing\"")
            .count()
            >= 6
    })
    .await;
    assert_eq!(fake.state.servers_matching("viewerfleet-run").len(), 3);
    let pid = child.id();
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    let killed = Instant::now();
    remove_profiles_of(pid);

    let (log, took) = reaped(&out_dir, killed).await;
    assert!(log.contains("the controller is gone"), "{log}");
    assert!(
        log.contains("deleted 3 server(s), 2 firewall(s), 1 SSH key(s)"),
        "{log}"
    );
    assert!(log.contains("nothing of run"), "{log}");
    assert!(took < REAPED_WITHIN, "the reaper took {took:?}");
    assert!(fake.state.servers().is_empty());
    assert!(fake.state.firewalls().is_empty() && fake.state.ssh_keys().is_empty());
    // What the run recorded before it died is on disk.
    assert!(out_dir.join("manifest.json").is_file());
    fake.no_reaper_left().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_of_run_while_it_tears_down_leaves_its_reaper_to_finish_the_teardown() {
    // A server's deletion takes 2 s: the controller dies with its deletes in flight and its
    // firewalls and key not yet deleted.
    let dir = tempfile::tempdir().unwrap();
    let config = FakeConfig {
        action_time: Duration::from_secs(2),
        ..FakeConfig::default()
    };
    let DrivenRun {
        fake,
        mut child,
        out_dir,
        _target,
        ..
    } = start_driven_run(config, dir.path(), 6, "5s").await;
    until("the run's teardown", 180, || {
        fake.state
            .recorded()
            .iter()
            .any(|r| r.method == "DELETE" && r.path.starts_with("/v1/servers/"))
    })
    .await;
    let pid = child.id();
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    let killed = Instant::now();
    remove_profiles_of(pid);
    let deletes_before = fake.state.recorded().len();
    assert!(!fake.state.firewalls().is_empty() && !fake.state.ssh_keys().is_empty());

    let (log, took) = reaped(&out_dir, killed).await;
    assert!(log.contains("the controller is gone"), "{log}");
    assert!(log.contains("nothing of run"), "{log}");
    assert!(took < REAPED_WITHIN, "the reaper took {took:?}");
    assert!(fake.state.servers().is_empty());
    assert!(fake.state.firewalls().is_empty() && fake.state.ssh_keys().is_empty());
    // The firewalls and the key went by the reaper's requests, after the controller died.
    let after = &fake.state.recorded()[deletes_before..];
    for kind in ["/v1/firewalls/", "/v1/ssh_keys/"] {
        assert!(
            after
                .iter()
                .any(|r| r.method == "DELETE" && r.path.starts_with(kind)),
            "no DELETE {kind}… after the kill"
        );
    }
    fake.no_reaper_left().await;
}

/// A run as `up` leaves it: hub, node, two firewalls and the key, labelled `run`.
fn plant_run(fake: &FakeHcloud, run: &str) {
    let expires = (chrono::Utc::now().timestamp() + 4 * 3600).to_string();
    let labels = |role: &str| {
        serde_json::json!({"viewerfleet-run": run, "viewerfleet-role": role,
                           "viewerfleet-expires": expires})
    };
    fake.state
        .plant_server(&format!("vf-{run}-hub"), labels("hub"));
    fake.state
        .plant_server(&format!("vf-{run}-node-001"), labels("node"));
    fake.state
        .plant_firewall(&format!("vf-{run}-hub"), labels("hub-firewall"));
    fake.state
        .plant_firewall(&format!("vf-{run}-nodes"), labels("node-firewall"));
    fake.state
        .plant_ssh_key(&format!("vf-{run}"), labels("ssh-key"));
}

/// A reaper of `run` started as a controller starts it, quick timings, stderr (its log)
/// piped; `lines` are written after the token, then its stdin is closed.
async fn spawn_reaper(fake: &FakeHcloud, run: &str, lines: &str) -> tokio::process::Child {
    let mut child = tokio::process::Command::new(BIN)
        .args(["reaper", "--run", run, "--endpoint", &fake.endpoint()])
        .args([
            "--poll",
            "50ms",
            "--settle",
            "500ms",
            "--keep-poll",
            "100ms",
        ])
        .args([
            "--beat",
            "200ms",
            "--backoff",
            "20ms",
            "--max-backoff",
            "200ms",
        ])
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(format!("{TOKEN}\n{lines}").as_bytes())
        .await
        .unwrap();
    // Closing the pipe is the controller going away.
    drop(stdin);
    child
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kept_fleets_reaper_deletes_it_at_its_ttl_and_not_before() {
    let fake = fake(FakeConfig::default()).await;
    plant_run(&fake, "kept");
    let expires = chrono::Utc::now().timestamp() + 3;
    let child = spawn_reaper(&fake, "kept", &format!("keep {expires}\n")).await;
    // While it waits, it says on the hub that it is alive; `gc` keeps the run for it.
    until("the reaper's label on the hub", 30, || {
        fake.state
            .servers_matching("viewerfleet-role=hub")
            .iter()
            .any(|h| h["labels"]["viewerfleet-reaper"].is_string())
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let out = command(&fake, dir.path())
        .args(["gc", "--cloud", "--dry-run"])
        .output()
        .await
        .unwrap();
    let stdout = text(&out.stdout);
    assert!(stdout.contains("its reaper alive"), "{stdout}");
    if chrono::Utc::now().timestamp() < expires {
        assert_eq!(deletes_of_servers(&fake), 0, "nothing before the TTL");
    }
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the reaper ends after the TTL")
        .unwrap();
    let log = text(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(chrono::Utc::now().timestamp() >= expires);
    assert!(log.contains("its TTL passed"), "{log}");
    assert!(
        log.contains("deleted 2 server(s), 2 firewall(s), 1 SSH key(s)"),
        "{log}"
    );
    assert!(fake.state.servers().is_empty() && fake.state.firewalls().is_empty());
    assert!(fake.state.ssh_keys().is_empty());
    fake.no_reaper_left().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reaper_retries_through_a_failing_network_until_nothing_is_left() {
    // Listings lost on the way, then deletions answered 503: more failures than one
    // request's own retries absorb.
    let fake = fake(FakeConfig {
        faults: vec![
            Fault {
                method: Method::GET,
                path: "/v1/servers".into(),
                kind: FaultKind::Refuse,
                times: Some(7),
            },
            Fault::status(Method::DELETE, "/v1/servers/*", 503, Some(7)),
        ],
        ..FakeConfig::default()
    })
    .await;
    plant_run(&fake, "flaky");
    // The controller went away without a word.
    let child = spawn_reaper(&fake, "flaky", "beat\n").await;
    let out = tokio::time::timeout(Duration::from_secs(90), child.wait_with_output())
        .await
        .expect("the reaper ends")
        .unwrap();
    let log = text(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("trying again in"), "{log}");
    assert!(log.contains("nothing of run flaky is left"), "{log}");
    let counts = fake.state.counts();
    assert_eq!((counts.refused, counts.faulted), (7, 7));
    assert!(fake.state.servers().is_empty() && fake.state.firewalls().is_empty());
    assert!(fake.state.ssh_keys().is_empty());
    fake.no_reaper_left().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cloud_command_warns_about_a_kept_run_whose_reaper_is_gone_and_gc_removes_it() {
    let fake = fake(FakeConfig::default()).await;
    let now = chrono::Utc::now().timestamp();
    let labels = |role: &str, reaper: i64| {
        serde_json::json!({"viewerfleet-run": "orphan", "viewerfleet-role": role,
                           "viewerfleet-expires": (now + 3600).to_string(),
                           "viewerfleet-reaper": reaper.to_string()})
    };
    fake.state
        .plant_server("vf-orphan-hub", labels("hub", now - 3600));
    fake.state
        .plant_server("vf-orphan-node-001", labels("node", now - 3600));
    let dir = tempfile::tempdir().unwrap();
    let out = command(&fake, dir.path())
        .args(["down", "someother"])
        .output()
        .await
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("run orphan is left over") && stderr.contains("its reaper stopped"),
        "{stderr}"
    );
    assert_eq!(fake.state.servers().len(), 2, "a warning only");
    let out = command(&fake, dir.path())
        .args(["gc", "--cloud"])
        .output()
        .await
        .unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(stdout.contains("deleted 2 server(s)"), "{stdout}");
    assert!(fake.state.servers().is_empty());
}

/// Debug builds only: the binary's panic hook (`VIEWERFLEET_TEST_PANIC`) is compiled out of
/// release builds.
#[cfg(debug_assertions)]
#[tokio::test(flavor = "multi_thread")]
async fn a_panic_on_ups_main_path_deletes_the_run_and_tells_its_reaper() {
    let fake = booting_fake().await;
    let target = target().await;
    let dir = tempfile::tempdir().unwrap();
    let path = scenario(dir.path(), &target_url(&target), 12, "");
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        command(&fake, dir.path())
            .env("VIEWERFLEET_TEST_PANIC", "up-fleet-ready")
            .arg("up")
            .arg(&path)
            .output(),
    )
    .await
    .expect("up ends")
    .unwrap();
    let stderr = text(&out.stderr);
    // The panic is an internal error (70), and the run it had made is gone with it.
    assert_eq!(out.status.code(), Some(70), "{stderr}");
    assert!(
        stderr.contains("internal error (a bug): VIEWERFLEET_TEST_PANIC=up-fleet-ready"),
        "{stderr}"
    );
    assert!(
        stderr.contains("cloud runs torn down: run cli-cloud-")
            && stderr.contains("deleted 4 server(s), 2 firewall(s), 1 SSH key(s)"),
        "{stderr}"
    );
    assert!(fake.state.servers().is_empty() && fake.state.firewalls().is_empty());
    assert!(fake.state.ssh_keys().is_empty());
    assert!(!stderr.contains(TOKEN));
    // The controller deleted it before it ended, and told its reaper, which checked and
    // deleted nothing.
    let log = reaper_finished("the reaper to finish", 60, || up_reaper_log(dir.path())).await;
    assert!(log.contains("deleted the run itself"), "{log}");
    assert!(log.contains("deleted 0 server(s)"), "{log}");
    assert!(!fake
        .state
        .recorded()
        .iter()
        .any(|r| r.method == "DELETE" && r.user_agent.starts_with("viewerfleet-reaper")));
    fake.no_reaper_left().await;
}
