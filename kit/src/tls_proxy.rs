//! A TLS-terminating proxy with a test CA, as hosted Grids and docker-selenium behind nginx
//! or Traefik present themselves: `https://` in front of a plain `http://` hub.
//!
//! At start it makes a CA (`rcgen`) and a server certificate for `localhost`, `127.0.0.1`
//! and `::1` signed by it, writes the CA as PEM (for `SSL_CERT_FILE`), and accepts TLS
//! connections (`tokio-rustls`). Behind the handshake each connection is a byte pipe to the
//! upstream's TCP port, so HTTP requests and the WebSocket upgrade of a WebDriver BiDi socket
//! (`wss://` outside, `ws://` inside) pass unchanged — like a TCP-mode (layer 4) TLS proxy.
//! It counts what it served, so a test can tell that traffic went through it.

use anyhow::Context;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

/// What the proxy counted.
#[derive(Debug, Default)]
pub struct ProxyCounters {
    /// TLS handshakes completed.
    pub handshakes: AtomicU64,
    /// Handshakes that failed (a client that does not trust the CA ends here).
    pub failed_handshakes: AtomicU64,
    /// Connections whose first bytes were a WebSocket upgrade request.
    pub websocket_upgrades: AtomicU64,
    /// Bytes from clients to the upstream.
    pub bytes_up: AtomicU64,
    /// Woken when a handshake ends either way, so a test waits on the event, not a sleep.
    handshake_ended: tokio::sync::Notify,
}

impl ProxyCounters {
    /// Waits until `failed_handshakes` reaches `at_least` (a client's refusal reaches the
    /// proxy's task after the client process may already have exited); false on timeout.
    pub async fn wait_failed_handshakes(
        &self,
        at_least: u64,
        timeout: std::time::Duration,
    ) -> bool {
        tokio::time::timeout(timeout, async {
            loop {
                let ended = self.handshake_ended.notified();
                if self.failed_handshakes.load(Ordering::Relaxed) >= at_least {
                    return;
                }
                ended.await;
            }
        })
        .await
        .is_ok()
    }
}

/// A running proxy; dropping it stops accepting (open connections end with their peers).
pub struct TlsProxy {
    addr: SocketAddr,
    ca_pem_path: PathBuf,
    pub counters: Arc<ProxyCounters>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TlsProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TlsProxy {
    /// Listens on `listen` (port 0: a free port) and forwards to `upstream`; the CA goes to
    /// `ca_dir/ca.pem`.
    pub async fn start(
        listen: SocketAddr,
        upstream: SocketAddr,
        ca_dir: &Path,
    ) -> anyhow::Result<Self> {
        Self::start_with(listen, upstream, ca_dir, certificates()?).await
    }

    /// As [`TlsProxy::start`], but the server's certificate is self-signed (a CA of its own,
    /// as `openssl req -x509` makes it), and `ca_dir/ca.pem` holds that very certificate.
    pub async fn start_self_signed(
        listen: SocketAddr,
        upstream: SocketAddr,
        ca_dir: &Path,
    ) -> anyhow::Result<Self> {
        Self::start_with(listen, upstream, ca_dir, self_signed()?).await
    }

    async fn start_with(
        listen: SocketAddr,
        upstream: SocketAddr,
        ca_dir: &Path,
        (ca_pem, config): (String, rustls::ServerConfig),
    ) -> anyhow::Result<Self> {
        let ca_pem_path = ca_dir.join("ca.pem");
        std::fs::write(&ca_pem_path, ca_pem)
            .with_context(|| format!("writing {}", ca_pem_path.display()))?;
        let listener = TcpListener::bind(listen)
            .await
            .with_context(|| format!("listening on {listen}"))?;
        let addr = listener.local_addr()?;
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let counters = Arc::new(ProxyCounters::default());
        let task = tokio::spawn(accept_loop(listener, acceptor, upstream, counters.clone()));
        Ok(TlsProxy {
            addr,
            ca_pem_path,
            counters,
            task,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://localhost:<port>/`, the name the certificate is for.
    pub fn url(&self) -> String {
        format!("https://localhost:{}/", self.addr.port())
    }

    /// The test CA, PEM: what `SSL_CERT_FILE` should name.
    pub fn ca_pem(&self) -> &Path {
        &self.ca_pem_path
    }
}

/// A fresh CA and a server configuration with a certificate it signed.
fn certificates() -> anyhow::Result<(String, rustls::ServerConfig)> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "viewerfleet test CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = ca_params.self_signed(&ca_key)?;
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ])?;
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    let cert = params.signed_by(&key, &ca, &ca_key)?;
    let chain = vec![cert.der().clone(), ca.der().clone()];
    Ok((ca.pem(), server_config(chain, &key)?))
}

/// A server configuration presenting `chain`, signed for with `key`.
fn server_config(
    chain: Vec<rustls::pki_types::CertificateDer<'static>>,
    key: &rcgen::KeyPair,
) -> anyhow::Result<rustls::ServerConfig> {
    let private = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der())
        .map_err(|e| anyhow::anyhow!("the server key: {e}"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, private)?)
}

/// One self-signed certificate for `localhost`, `127.0.0.1` and `::1`, marked a CA as
/// `openssl req -x509` marks it, and a server configuration presenting it alone.
fn self_signed() -> anyhow::Result<(String, rustls::ServerConfig)> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ])?;
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let cert = params.self_signed(&key)?;
    Ok((cert.pem(), server_config(vec![cert.der().clone()], &key)?))
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    upstream: SocketAddr,
    counters: Arc<ProxyCounters>,
) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        let (acceptor, counters) = (acceptor.clone(), counters.clone());
        tokio::spawn(async move {
            let mut tls = match acceptor.accept(client).await {
                Ok(tls) => tls,
                Err(_) => {
                    counters.failed_handshakes.fetch_add(1, Ordering::Relaxed);
                    counters.handshake_ended.notify_waiters();
                    return;
                }
            };
            counters.handshakes.fetch_add(1, Ordering::Relaxed);
            counters.handshake_ended.notify_waiters();
            let Ok(mut server) = TcpStream::connect(upstream).await else {
                return;
            };
            // The first bytes tell an upgrade from a plain request (counted, not changed).
            let mut first = vec![0u8; 4096];
            let n = match tokio::io::AsyncReadExt::read(&mut tls, &mut first).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let head = String::from_utf8_lossy(&first[..n]).to_ascii_lowercase();
            if head.contains("upgrade: websocket") {
                counters.websocket_upgrades.fetch_add(1, Ordering::Relaxed);
            }
            if tokio::io::AsyncWriteExt::write_all(&mut server, &first[..n])
                .await
                .is_err()
            {
                return;
            }
            if let Ok((up, _)) = tokio::io::copy_bidirectional(&mut tls, &mut server).await {
                counters
                    .bytes_up
                    .fetch_add(up + n as u64, Ordering::Relaxed);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client that trusts the CA gets the upstream's answer through TLS; one that does
    /// not is refused at the handshake.
    #[tokio::test]
    async fn proxies_http_for_clients_that_trust_its_ca() {
        let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let up_addr = upstream.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = upstream.accept().await {
                tokio::spawn(async move {
                    use tokio::io::{AsyncReadExt, AsyncWriteExt};
                    let mut buf = [0u8; 1024];
                    let _ = s.read(&mut buf).await;
                    let _ = s
                        .write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                        )
                        .await;
                });
            }
        });
        let dir = tempfile_dir();
        let proxy = TlsProxy::start("127.0.0.1:0".parse().unwrap(), up_addr, &dir)
            .await
            .unwrap();
        let pem = std::fs::read_to_string(proxy.ca_pem()).unwrap();
        assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"));

        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::pem::PemObject::pem_file_iter(proxy.ca_pem()).unwrap() {
            roots.add(cert.unwrap()).unwrap();
        }
        let body = fetch(&proxy, roots).await.unwrap();
        assert!(body.ends_with("ok"), "{body}");
        assert_eq!(proxy.counters.handshakes.load(Ordering::Relaxed), 1);

        let untrusted = fetch(&proxy, rustls::RootCertStore::empty()).await;
        assert!(untrusted.is_err());
        let _ = std::fs::remove_dir_all(dir);
    }

    async fn fetch(proxy: &TlsProxy, roots: rustls::RootCertStore) -> anyhow::Result<String> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = TcpStream::connect(proxy.addr()).await?;
        let name = rustls::pki_types::ServerName::try_from("localhost")?;
        let mut tls = connector.connect(name, tcp).await?;
        tls.write_all(b"GET / HTTP/1.1\r\nhost: localhost\r\n\r\n")
            .await?;
        let mut out = String::new();
        tls.read_to_string(&mut out).await.ok();
        Ok(out)
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "viewerfleet-kit-tls-{}-{}",
            std::process::id(),
            rand_suffix()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn rand_suffix() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    }
}
