//! The Grid configuration in `grid/` with the real Selenium server of `grid/package.json`: a hub from
//! `hub.toml` and a node from `node.toml` (placeholders filled as node-bootstrap.sh does),
//! talking over IPv6 loopback like IPv6-only cloud nodes, serve a real Chromium session.
//!
//! Uses the jar `make deps` installs under grid/ (the npm package the bootstrap uses), or
//! the one `VIEWERFLEET_SELENIUM_JAR` names.

use serde_json::{json, Value};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A slot report as node-bootstrap.sh writes it into the stereotype.
const SLOTS: &str = r#"{"count": 2, "prefix": "2001:db8:c17:0:1::/80", "down_kbit": 2000, "up_kbit": 300, "delay": "none", "ipv4": false}"#;

fn free_port() -> u16 {
    std::net::TcpListener::bind("[::1]:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test(flavor = "multi_thread")]
async fn grid_configs_register_a_node_over_ipv6_and_serve_a_chromium_session() {
    let jar = std::env::var("VIEWERFLEET_SELENIUM_JAR").unwrap_or_else(|_| {
        format!(
            "{}/grid/{}",
            env!("CARGO_MANIFEST_DIR"),
            viewerfleet::grid::local::jar_in_grid()
        )
    });
    assert!(
        std::path::Path::new(&jar).exists(),
        "{jar} is missing: run `make grid-deps` (or set VIEWERFLEET_SELENIUM_JAR)"
    );
    let dir = tempfile::tempdir().unwrap();
    let (web, publish, subscribe, node_port) = (free_port(), free_port(), free_port(), free_port());
    let hub = include_str!("../../grid/hub.toml")
        .replace("port = 4444", &format!("port = {web}"))
        .replace("*:4442", &format!("*:{publish}"))
        .replace("*:4443", &format!("*:{subscribe}"));
    let node = include_str!("../../grid/node.toml")
        .replace("@NODE_HOST@", "[::1]")
        .replace("@HUB_ADDR@:4442", &format!("[::1]:{publish}"))
        .replace("@HUB_ADDR@:4443", &format!("[::1]:{subscribe}"))
        .replace("@HUB_ADDR@:4444", &format!("[::1]:{web}"))
        .replace("@MAX_SESSIONS@", "2")
        .replace("@CHROME_BINARY@", "/usr/lib/chromium/chromium")
        .replace("@VIEWERFLEET_SLOTS@", SLOTS)
        .replace("@VIEWERFLEET_LOAD@", "http://[::1]:9465/metrics")
        .replace("port = 5555", &format!("port = {node_port}"));
    assert!(!node.contains('@'), "every placeholder filled: {node}");
    std::fs::write(dir.path().join("hub.toml"), hub).unwrap();
    std::fs::write(dir.path().join("node.toml"), node).unwrap();
    let java = |role: &str| {
        Killed(
            Command::new("java")
                .args(["-Xmx300m", "-jar", &jar, role, "--config"])
                .arg(dir.path().join(format!("{role}.toml")))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        )
    };
    let _hub = java("hub");
    let _node = java("node");
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    let base = format!("http://[::1]:{web}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(240);
    let (uri, status) = loop {
        if let Ok(resp) = client.get(format!("{base}/status")).send().await {
            let status: Value = resp.json().await.unwrap_or_default();
            if let Some(n) = status["value"]["nodes"].as_array().and_then(|n| n.first()) {
                if n["availability"] == "UP" {
                    break (n["uri"].as_str().unwrap().to_string(), status.clone());
                }
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the node never registered with the hub"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(
        uri,
        format!("http://[::1]:{node_port}"),
        "the hub lists the node by its IPv6 address (what hub.rs matches)"
    );
    // The node's slot report reaches the controller through the hub's /status.
    let parsed: viewerfleet::grid::GridStatus =
        serde_json::from_value(status["value"].clone()).unwrap();
    let report = parsed.slots_by_node()[0]
        .1
        .clone()
        .expect("the slot report in /status");
    assert_eq!(
        (
            report.count,
            report.down_kbit,
            report.up_kbit,
            report.prefix.as_str()
        ),
        (2, 2000, 300, "2001:db8:c17:0:1::/80"),
        "{status}"
    );
    // So does its load endpoint.
    let load = parsed.load_endpoints();
    assert_eq!(load.len(), 1, "{status}");
    assert_eq!(
        (load[0].node.as_str(), load[0].url.as_str()),
        (uri.as_str(), "http://[::1]:9465/metrics")
    );

    let caps = json!({"capabilities": {"alwaysMatch": {"browserName": "chrome",
        "goog:chromeOptions": {"binary": "/usr/lib/chromium/chromium", "args": ["--headless=new", "--no-sandbox", "--disable-gpu"]}}}});
    let post = |url: String, body: Value| {
        client
            .post(url)
            .header("Content-Type", "application/json; charset=utf-8")
            .body(body.to_string())
            .send()
    };
    let created: Value = post(format!("{base}/session"), caps)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["value"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no session: {created}"))
        .to_string();
    post(
        format!("{base}/session/{id}/url"),
        json!({"url": "data:text/html,<title>vf-grid-ok</title>"}),
    )
    .await
    .unwrap();
    let title: Value = client
        .get(format!("{base}/session/{id}/title"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    client
        .delete(format!("{base}/session/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(title["value"], "vf-grid-ok");
}
