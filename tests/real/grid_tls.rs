//! A real Selenium Grid 4 behind a TLS-terminating proxy with a private test CA, as hosted
//! Grids and docker-selenium behind nginx or Traefik are reached: the scenario names only
//! `https://localhost:<port>/`. Without the CA the run is refused at the hub's `/status`
//! (exit code 69, saying how to trust the CA); with `SSL_CERT_FILE` naming it, a refsite VOD
//! run of 4 viewers, 2 per browser, plays through `https://` (WebDriver) and `wss://`
//! (WebDriver BiDi, the hub's `/session/<id>/se/bidi` socket), and nothing is left behind.
//! Needs root (the local Grid), java, `cd grid && npm ci --ignore-scripts`.

use crate::support::grid as grid_support;

use crate::support::raw_run::RawRun;
use grid_support::*;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use viewerfleet_kit::tls_proxy::TlsProxy;

fn run_with(
    scenario: &std::path::Path,
    out: &std::path::Path,
    ca: Option<&std::path::Path>,
    credentials: Option<viewerfleet::grid::auth::GridCredentials>,
) -> std::process::Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_viewerfleet"));
    // The proxy's URL is not the local Grid's: the run takes the hub's credentials from
    // the environment, as for any Grid the user names.
    if let Some(c) = credentials {
        cmd.env(viewerfleet::grid::auth::USER_ENV, &c.username)
            .env(viewerfleet::grid::auth::PASSWORD_ENV, c.password.expose());
    }
    cmd.args(["--quiet", "run"])
        .arg(scenario)
        .arg("--out")
        .arg(out)
        .env_remove("SSL_CERT_FILE")
        .env_remove("SSL_CERT_DIR");
    if let Some(ca) = ca {
        cmd.env("SSL_CERT_FILE", ca);
    }
    cmd.output().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grid_behind_tls_with_a_private_ca_plays_over_https_and_wss() {
    // Browsers in the root namespace: they reach refsite on this machine's loopback.
    let grid = GridGuard::up("tls", 1, 2, false).await;
    let st = grid.state.clone();
    let hub: SocketAddr = url::Url::parse(&st.hub_url)
        .unwrap()
        .socket_addrs(|| None)
        .unwrap()[0];
    let dir = tempfile::tempdir().unwrap();
    let proxy = TlsProxy::start("127.0.0.1:0".parse().unwrap(), hub, dir.path())
        .await
        .unwrap();
    let scenario = dir.path().join("tls.yaml");
    std::fs::write(
        &scenario,
        format!(
            "name: grid-tls
target: {{kind: refsite, video: vod, metrics_interval: 5s}}
viewers: {{count: 4, ramp: 4s, per_browser: 2}}
duration: 45s
sampling_interval: 2s
measure_at: 40s
steady_window: 10s
thresholds:
  failed_viewers: \"<= 0\"
fleet: {{kind: grid, url: '{}'}}
",
            proxy.url()
        ),
    )
    .unwrap();

    // Not trusted: refused before any session, saying how to trust the CA.
    let refused = tokio::task::spawn_blocking({
        let (scenario, out) = (scenario.clone(), dir.path().join("untrusted"));
        let credentials = st.controller_credentials();
        move || run_with(&scenario, &out, None, credentials)
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(69), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the Grid at {} does not answer /status",
            proxy.url()
        )) && stderr.contains("SSL_CERT_FILE"),
        "{stderr}"
    );
    assert!(proxy.counters.failed_handshakes.load(Relaxed) >= 1);
    assert_eq!(proxy.counters.handshakes.load(Relaxed), 0);

    // Trusted through SSL_CERT_FILE: the whole run goes through the proxy.
    let out = dir.path().join("run");
    let output = tokio::task::spawn_blocking({
        let (scenario, out, ca) = (scenario.clone(), out.clone(), proxy.ca_pem().to_path_buf());
        let credentials = st.controller_credentials();
        move || run_with(&scenario, &out, Some(&ca), credentials)
    })
    .await
    .unwrap();
    let summary = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!("{summary}");
    assert!(
        output.status.success(),
        "the run through https:// completes: {summary}"
    );
    assert!(summary.contains("thresholds: all 1 passed"), "{summary}");
    let raw = RawRun::read(&out);
    assert_eq!(raw.playing(), 4, "all 4 played: {summary}");
    let handshakes = proxy.counters.handshakes.load(Relaxed);
    let upgrades = proxy.counters.websocket_upgrades.load(Relaxed);
    assert!(
        handshakes >= 3,
        "WebDriver over https: {handshakes} handshakes"
    );
    assert!(
        upgrades >= 2,
        "one wss:// BiDi socket per browser through the proxy: {upgrades}"
    );

    // Nothing of the run is left on the Grid.
    let status = viewerfleet::grid::grid_status(
        &viewerfleet::grid::auth::http_client(st.controller_credentials().as_ref()),
        &st.hub_url,
    )
    .await
    .unwrap();
    assert!(status.sessions_by_node().iter().all(|(_, s)| s.is_empty()));
    drop(proxy);
    grid.down_and_check().await;
}
