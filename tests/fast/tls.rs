//! One TLS configuration for every client: a Grid behind the kit's TLS proxy is asked
//! (`validate --check-grid`, the `/status` probe a run makes) with the certificate that
//! `SSL_CERT_FILE` names — a private CA, or a self-signed certificate pinned as it is — and
//! refused without it, with a hint that names `SSL_CERT_FILE`.

use assert_cmd::Command;
use serde_json::Value;
use std::path::Path;
use std::sync::atomic::Ordering;
use viewerfleet_kit::tls_proxy::TlsProxy;
use viewerfleet_kit::webdriver_stub::{Stub, StubConfig};

fn scenario(dir: &Path, hub: &str) -> std::path::PathBuf {
    let path = dir.join("grid.yaml");
    std::fs::write(
        &path,
        format!(
            "name: tls\ntarget:\n  kind: peertube\n  video: vod\n  url: http://127.0.0.1:9/w/test\n\
             viewers:\n  count: 2\nduration: 30s\nfleet:\n  kind: grid\n  url: {hub}\n"
        ),
    )
    .unwrap();
    path
}

/// `validate --check-grid --json FILE` with `SSL_CERT_FILE` as given (none: unset).
fn check(file: &Path, cert_file: Option<&Path>) -> (i32, Value, String) {
    let mut cmd = Command::cargo_bin("viewerfleet").unwrap();
    cmd.args(["validate", "--check-grid", "--json"]).arg(file);
    cmd.env_remove("SSL_CERT_FILE").env_remove("SSL_CERT_DIR");
    cmd.env_remove("VIEWERFLEET_GRID_USER")
        .env_remove("VIEWERFLEET_GRID_PASSWORD");
    if let Some(pem) = cert_file {
        cmd.env("SSL_CERT_FILE", pem);
    }
    let out = cmd.output().unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    (
        out.status.code().unwrap_or(-1),
        doc,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grid_behind_tls_is_trusted_through_ssl_cert_file_a_ca_or_a_self_signed_certificate() {
    let stub = Stub::serve("127.0.0.1:0".parse().unwrap(), StubConfig::default())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    for self_signed in [false, true] {
        let certs = dir.path().join(if self_signed { "self" } else { "ca" });
        std::fs::create_dir_all(&certs).unwrap();
        let proxy = if self_signed {
            TlsProxy::start_self_signed("127.0.0.1:0".parse().unwrap(), stub.addr(), &certs).await
        } else {
            TlsProxy::start("127.0.0.1:0".parse().unwrap(), stub.addr(), &certs).await
        }
        .unwrap();
        let file = scenario(&certs, &proxy.url());
        let kind = if self_signed {
            "self-signed"
        } else {
            "private CA"
        };

        // Not trusted: the Grid is unavailable (69), and the message says what to do.
        let (code, doc, stderr) = check(&file, None);
        assert_eq!(code, 69, "{kind}: {stderr}");
        assert_eq!(doc["validate"]["files"][0]["grid"]["ok"], false);
        assert!(stderr.contains("SSL_CERT_FILE"), "{kind}: {stderr}");
        let refused = proxy
            .counters
            .wait_failed_handshakes(1, std::time::Duration::from_secs(30))
            .await;
        assert!(refused, "{kind}: the handshake was refused by the client");

        // Trusted through SSL_CERT_FILE: /status answered over TLS.
        let (code, doc, stderr) = check(&file, Some(proxy.ca_pem()));
        assert_eq!(code, 0, "{kind}: {stderr}");
        let grid = &doc["validate"]["files"][0]["grid"];
        assert_eq!(grid["ok"], true, "{kind}: {doc}");
        assert_eq!(grid["hubs"][0]["url"], proxy.url());
        assert!(proxy.counters.handshakes.load(Ordering::Relaxed) > 0);
    }
}

#[test]
fn check_grid_on_a_fleet_that_is_not_a_grid_asks_nothing() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/local/vod.yaml");
    let (code, doc, _) = check(&file, None);
    assert_eq!(code, 0);
    assert!(doc["validate"]["files"][0]["grid"].is_null());
}
