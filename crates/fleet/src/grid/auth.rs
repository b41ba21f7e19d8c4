//! Who may use a Grid: the registration secret between a hub and its nodes, and the user
//! name and password the hub's router asks of WebDriver clients (Selenium Grid 4's
//! `[server] registration-secret` and `[router] username`/`password`).
//!
//! A Grid viewerfleet makes (the local Grid of `grid up --local`, the hubs and nodes of a
//! cloud run) gets both generated per Grid from the operating system's random number
//! generator ([`GridSecrets::generate`]). They are never printed or logged (`Debug` shows
//! `<redacted>`); on disk they live only in files of mode 0600 ([`write_private`]): the
//! rendered Grid configurations, the local Grid's `secrets.json`, a cloud node's `node.env`,
//! the inventory of `up --inventory`, the variables of `plan --tfvars`.
//!
//! The controller sends the password as an `Authorization: Basic` header on every request:
//! WebDriver commands (through [`AuthConnector`], since the WebDriver client has no header
//! setting of its own and would copy credentials written into the URL into the new-session
//! body), the BiDi WebSocket handshake and the `/status` probes ([`http_client`]).
//! A Grid the user names (`fleet: {kind: grid, url: …}`) takes its credentials from
//! [`USER_ENV`] and [`PASSWORD_ENV`].

use http::HeaderValue;
use serde::{Deserialize, Serialize};
use std::path::Path;

pub use crate::model::secret::{CredentialsError, GridCredentials, Secret, PASSWORD_ENV, USER_ENV};

/// The user name viewerfleet gives the controller on Grids it makes.
pub(crate) const CONTROLLER_USER: &str = "viewerfleet";

/// The HTTP client for a Grid with `credentials` (a plain one without).
pub fn http_client(credentials: Option<&GridCredentials>) -> reqwest::Client {
    let mut builder = crate::sys::tls::http_client_builder();
    if let Some(credentials) = credentials {
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::AUTHORIZATION, credentials.header());
        builder = builder.default_headers(headers);
    }
    builder.build().unwrap_or_default()
}

/// Everything secret about one Grid viewerfleet makes: the nodes' registration secret and
/// the controller's credentials at the hub's router.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GridSecrets {
    pub registration_secret: Secret,
    pub controller: GridCredentials,
}

impl GridSecrets {
    /// New secrets from the operating system's random number generator.
    pub fn generate() -> Self {
        Self {
            registration_secret: Secret::generate(),
            controller: GridCredentials {
                username: CONTROLLER_USER.into(),
                password: Secret::generate(),
            },
        }
    }

    /// `hub.toml` with the registration secret (`[server]`) and the router's user name and
    /// password (`[router]`) added.
    pub fn hub_toml(&self, template: &str) -> String {
        let text = set_toml_key(
            template,
            "server",
            "registration-secret",
            self.registration_secret.expose(),
        );
        let text = set_toml_key(&text, "router", "username", &self.controller.username);
        set_toml_key(
            &text,
            "router",
            "password",
            self.controller.password.expose(),
        )
    }

    /// A node's rendered TOML with the registration secret added (`[server]`).
    pub fn node_toml(&self, rendered: &str) -> String {
        set_toml_key(
            rendered,
            "server",
            "registration-secret",
            self.registration_secret.expose(),
        )
    }
}

/// `text` (TOML) with `key = "value"` in table `[table]`: put right under the table's header
/// when it has one, else in a new table at the end. `value` must need no escaping (the
/// generated secrets are hex; user names are checked by the caller).
fn set_toml_key(text: &str, table: &str, key: &str, value: &str) -> String {
    let header = format!("[{table}]");
    let line = format!(
        "{key} = \"{}\"",
        value.replace('\\', "\\\\").replace('"', "\\\"")
    );
    let mut out = String::with_capacity(text.len() + line.len() + 16);
    let mut done = false;
    for l in text.lines() {
        out.push_str(l);
        out.push('\n');
        if !done && l.trim() == header {
            out.push_str(&line);
            out.push('\n');
            done = true;
        }
    }
    if !done {
        out.push_str(&format!("\n{header}\n{line}\n"));
    }
    out
}

/// Writes `text` to `path` readable by its owner only (mode 0600, also when the file was
/// there before with another mode).
pub fn write_private(path: &Path, text: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(text)
}

/// The WebDriver client's connector for a Grid with a password: every connection is an
/// in-memory pipe to a small HTTP/1 relay that forwards each request over its own
/// connection to the hub (made with the TLS-capable connector, so `https://` hubs work
/// too) with the `Authorization` header added. A hub that cannot be reached fails the
/// connect, as without credentials.
#[derive(Clone)]
pub(crate) struct AuthConnector {
    inner: crate::sys::tls::Connector,
    header: HeaderValue,
}

impl AuthConnector {
    pub fn new(credentials: &GridCredentials) -> anyhow::Result<Self> {
        Ok(Self {
            inner: crate::sys::tls::https_connector()?,
            header: credentials.header(),
        })
    }
}

/// One end of the in-memory pipe, as the WebDriver client's HTTP client sees it.
pub(crate) struct PipeStream(hyper_util::rt::TokioIo<tokio::io::DuplexStream>);

impl hyper_util::client::legacy::connect::Connection for PipeStream {
    fn connected(&self) -> hyper_util::client::legacy::connect::Connected {
        hyper_util::client::legacy::connect::Connected::new()
    }
}

impl hyper::rt::Read for PipeStream {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for PipeStream {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl tower::Service<http::Uri> for AuthConnector {
    type Response = PipeStream;
    type Error = BoxError;
    type Future =
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<PipeStream, BoxError>> + Send>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), BoxError>> {
        tower::Service::<http::Uri>::poll_ready(&mut self.inner, cx)
    }

    fn call(&mut self, dst: http::Uri) -> Self::Future {
        let connect = tower::Service::call(&mut self.inner, dst);
        let header = self.header.clone();
        Box::pin(async move {
            let upstream = connect.await?;
            let (sender, upstream_conn) =
                hyper::client::conn::http1::handshake::<_, hyper::body::Incoming>(upstream).await?;
            let (near, far) = tokio::io::duplex(64 * 1024);
            let sender = std::sync::Arc::new(tokio::sync::Mutex::new(sender));
            let relay =
                hyper::service::service_fn(move |mut req: http::Request<hyper::body::Incoming>| {
                    let (sender, header) = (sender.clone(), header.clone());
                    async move {
                        req.headers_mut()
                            .insert(http::header::AUTHORIZATION, header);
                        let mut sender = sender.lock().await;
                        sender.ready().await?;
                        sender.send_request(req).await
                    }
                });
            tokio::spawn(async move {
                let served = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(far), relay);
                tokio::select! {
                    _ = served => {}
                    _ = upstream_conn => {}
                }
            });
            Ok(PipeStream(hyper_util::rt::TokioIo::new(near)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_random_hex_and_never_shown() {
        let a = GridSecrets::generate();
        let b = GridSecrets::generate();
        assert_ne!(a.registration_secret, b.registration_secret);
        assert_ne!(a.controller.password, a.registration_secret);
        assert_eq!(a.controller.password.expose().len(), 64);
        assert!(a
            .controller
            .password
            .expose()
            .chars()
            .all(|c| c.is_ascii_hexdigit()));
        let shown = format!("{a:?}");
        assert!(!shown.contains(a.registration_secret.expose()), "{shown}");
        assert!(!shown.contains(a.controller.password.expose()), "{shown}");
        assert!(shown.contains("<redacted>"));
    }

    #[test]
    fn the_hub_and_node_toml_get_the_secrets_in_their_tables() {
        let s = GridSecrets::generate();
        let hub = s.hub_toml(include_str!("../../../../grid/hub.toml"));
        let parsed: toml_probe::Doc = toml_probe::parse(&hub);
        assert_eq!(
            parsed.get("server", "registration-secret"),
            Some(s.registration_secret.expose())
        );
        assert_eq!(parsed.get("router", "username"), Some(CONTROLLER_USER));
        assert_eq!(
            parsed.get("router", "password"),
            Some(s.controller.password.expose())
        );
        assert_eq!(parsed.get("server", "port"), Some("4444"));
        let node = s.node_toml("[server]\nport = 5555\n\n[node]\nx = 1\n");
        let parsed = toml_probe::parse(&node);
        assert_eq!(
            parsed.get("server", "registration-secret"),
            Some(s.registration_secret.expose())
        );
        assert!(!node.contains(s.controller.password.expose()));
        // A table the template lacks is added at the end.
        let bare = s.node_toml("[node]\nx = 1\n");
        assert!(toml_probe::parse(&bare)
            .get("server", "registration-secret")
            .is_some());
    }

    #[test]
    fn credentials_from_the_environment_come_in_pairs() {
        let ok = GridCredentials::from_values(Some("me".into()), Some("pw".into()))
            .unwrap()
            .unwrap();
        assert_eq!(ok.header().to_str().unwrap(), "Basic bWU6cHc=");
        assert!(ok.header().is_sensitive());
        assert!(GridCredentials::from_values(None, None).unwrap().is_none());
        let half = GridCredentials::from_values(Some("me".into()), None)
            .unwrap_err()
            .to_string();
        assert!(
            half.starts_with(USER_ENV) && half.contains(PASSWORD_ENV),
            "{half}"
        );
        let colon = GridCredentials::from_values(Some("a:b".into()), Some("p".into()))
            .unwrap_err()
            .to_string();
        assert!(colon.contains("colon"), "{colon}");
    }

    #[test]
    fn private_files_are_0600_even_when_they_existed() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.toml");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&path, b"new").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
    }

    /// Just enough TOML reading for the tests: `[table]` headers and `key = value` lines.
    mod toml_probe {
        pub(crate) struct Doc(Vec<(String, String, String)>);
        pub(crate) fn parse(text: &str) -> Doc {
            let mut table = String::new();
            let mut out = Vec::new();
            let mut seen = std::collections::HashSet::new();
            for line in text.lines().map(str::trim) {
                if line.starts_with('#') || line.is_empty() {
                    continue;
                }
                if let Some(t) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                    assert!(seen.insert(t.to_string()), "table [{t}] twice");
                    table = t.to_string();
                    continue;
                }
                if let Some((k, v)) = line.split_once('=') {
                    out.push((
                        table.clone(),
                        k.trim().to_string(),
                        v.trim().trim_matches('"').to_string(),
                    ));
                }
            }
            Doc(out)
        }
        impl Doc {
            pub(crate) fn get(&self, table: &str, key: &str) -> Option<&str> {
                self.0
                    .iter()
                    .find(|(t, k, _)| t == table && k == key)
                    .map(|(_, _, v)| v.as_str())
            }
        }
    }
}
