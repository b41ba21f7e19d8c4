//! An authenticated Grid, with the real Selenium server: the local Grid's hub asks for a
//! registration secret of its nodes and for a password of its WebDriver clients. A node
//! started without the secret is refused (the hub says so in its log and never lists it);
//! a new-session request without the password, or with a wrong one, gets 401; the
//! controller's own run (one browser holding two viewers, so WebDriver and the BiDi socket
//! both carry the password) plays through both, and the run folder holds neither secret.
//! Needs root (the local Grid), java and the Selenium jar (`make grid-deps`).

use crate::support::grid as grid_support;
use crate::support::poll;

use crate::support::raw_run::RawRun;
use grid_support::*;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::Duration;
use viewerfleet::grid::auth::{GridCredentials, Secret};

/// A Selenium node this test starts by hand; its process group is killed on drop.
struct RogueNode(std::process::Child);

impl Drop for RogueNode {
    fn drop(&mut self) {
        viewerfleet::sys::process::kill_group(self.0.id());
        let _ = self.0.wait();
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grid_refuses_nodes_without_the_secret_and_clients_without_the_password() {
    // Browsers in the root namespace: they reach refsite on this machine's loopback.
    let grid = GridGuard::up("auth", 1, 1, false).await;
    let st = grid.state.clone();
    let secrets = st.secrets.clone().expect("a local Grid has secrets");
    let registration = secrets.registration_secret.expose().to_string();
    let password = secrets.controller.password.expose().to_string();

    // The secrets are on disk only in files of mode 0600.
    for file in [
        grid.state_file.clone(),
        st.dir.join(viewerfleet::grid::local_state::SECRETS_FILE),
        st.dir.join("hub.toml"),
        st.dir.join("node-1/node.toml"),
    ] {
        assert_eq!(mode(&file), 0o600, "{}", file.display());
    }
    // The state's JSON (which commands may print) holds neither secret.
    let state_json = std::fs::read_to_string(&grid.state_file).unwrap();
    assert!(!state_json.contains(&password) && !state_json.contains(&registration));
    let node_toml = std::fs::read_to_string(st.dir.join("node-1/node.toml")).unwrap();
    assert!(node_toml.contains(&registration));
    assert!(
        !node_toml.contains(&password),
        "nodes do not get the password"
    );

    // Without the password, or with a wrong one: 401, for /status and for a new session.
    let plain = reqwest::Client::new();
    let wrong = viewerfleet::grid::auth::http_client(Some(&GridCredentials {
        username: secrets.controller.username.clone(),
        password: Secret::new("not-the-password"),
    }));
    for (who, client) in [("no password", &plain), ("a wrong password", &wrong)] {
        let status = client
            .get(format!("{}status", st.hub_url))
            .send()
            .await
            .unwrap();
        assert_eq!(status.status().as_u16(), 401, "/status with {who}");
        let session = client
            .post(format!("{}session", st.hub_url))
            .header("Content-Type", "application/json; charset=utf-8")
            .body(r#"{"capabilities": {"alwaysMatch": {"browserName": "chrome"}}}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(session.status().as_u16(), 401, "new session with {who}");
    }
    let err = viewerfleet::grid::grid_status(&plain, &st.hub_url)
        .await
        .unwrap_err();
    assert!(
        format!("{err:#}").contains("VIEWERFLEET_GRID_PASSWORD"),
        "{err:#}"
    );

    // A node without the registration secret, on the hub's event bus: refused.
    let authed = viewerfleet::grid::auth::http_client(st.controller_credentials().as_ref());
    let dir = tempfile::tempdir().unwrap();
    let rogue_port = viewerfleet::sys::net::free_port().unwrap();
    let rogue_toml = dir.path().join("rogue.toml");
    std::fs::write(
        &rogue_toml,
        format!(
            "[server]\nhost = \"127.0.0.1\"\nport = {rogue_port}\n\n[node]\ndetect-drivers = false\nselenium-manager = false\nmax-sessions = 1\n\n[[node.driver-configuration]]\ndisplay-name = \"chromium\"\nwebdriver-executable = \"/usr/bin/chromedriver\"\nmax-sessions = 1\nstereotype = '{{\"browserName\": \"chrome\", \"platformName\": \"linux\"}}'\n"
        ),
    )
    .unwrap();
    let (jar, _) = viewerfleet::grid::local::find_jar(
        &viewerfleet::grid::local::LocalGridOptions::new(1, 1, grid.state_file.clone()),
    )
    .unwrap();
    let rogue_log = dir.path().join("rogue.log");
    let rogue = {
        use std::os::unix::process::CommandExt as _;
        let log = std::fs::File::create(&rogue_log).unwrap();
        let child = std::process::Command::new("java")
            .args(["-Xms64m", "-Xmx256m", "-jar"])
            .arg(&jar)
            .args(["node", "--config"])
            .arg(&rogue_toml)
            .args(["--publish-events", &st.event_bus[0]])
            .args(["--subscribe-events", &st.event_bus[1]])
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .spawn()
            .unwrap();
        RogueNode(child)
    };
    let hub_log = st.dir.join("hub.log");
    poll::until_async(
        "the hub refuses the node without the secret",
        Duration::from_secs(90),
        || {
            let text = std::fs::read_to_string(&hub_log).unwrap_or_default();
            async move {
                text.lines().any(|l| {
                    l.contains("Rejecting message without a valid secret")
                        && l.contains(&format!(":{rogue_port}"))
                })
            }
        },
    )
    .await;
    let node_log = std::fs::read_to_string(&rogue_log).unwrap();
    assert!(
        node_log.contains("Sending registration event"),
        "the node tried: {node_log}"
    );
    let status = viewerfleet::grid::grid_status(&authed, &st.hub_url)
        .await
        .unwrap();
    let uris: Vec<&str> = status.nodes.iter().map(|n| n.uri.as_str()).collect();
    assert_eq!(uris.len(), 1, "only the Grid's own node: {uris:?}");
    assert!(
        !uris[0].ends_with(&format!(":{rogue_port}")),
        "the node without the secret is not listed: {uris:?}"
    );
    drop(rogue);

    // The controller's own run passes through both: its node registered with the secret,
    // and its WebDriver requests and BiDi socket carry the password.
    let scenario = dir.path().join("auth.yaml");
    std::fs::write(
        &scenario,
        format!(
            "name: grid-auth
target: {{kind: refsite, video: vod, metrics_interval: 5s}}
viewers: {{count: 2, ramp: 2s, per_browser: 2}}
duration: 25s
sampling_interval: 2s
measure_at: 20s
steady_window: 6s
thresholds:
  failed_viewers: \"<= 0\"
fleet: {{kind: grid, url: '{}'}}
",
            st.hub_url
        ),
    )
    .unwrap();
    let out = dir.path().join("run");
    let output = tokio::task::spawn_blocking({
        let (scenario, out) = (scenario.clone(), out.clone());
        move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_viewerfleet"))
                .args(["run"])
                .arg(&scenario)
                .arg("--out")
                .arg(&out)
                .env("RUST_LOG", "debug")
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    let summary = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "the run completes: {summary}");
    assert!(summary.contains("thresholds: all 1 passed"), "{summary}");
    assert_eq!(RawRun::read(&out).playing(), 2, "both played: {summary}");
    // Neither secret in the run's output, its logs or its folder.
    for secret in [&registration, &password] {
        assert!(!summary.contains(secret.as_str()), "a secret in the output");
        assert_eq!(
            crate::support::files_containing(&out, secret),
            Vec::<String>::new()
        );
    }

    // Nothing of the run is left on the Grid.
    let status = viewerfleet::grid::grid_status(&authed, &st.hub_url)
        .await
        .unwrap();
    assert!(status.sessions_by_node().iter().all(|(_, s)| s.is_empty()));
    grid.down_and_check().await;
}
