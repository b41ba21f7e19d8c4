//! TLS as a client, for `https://` Grid hubs and their `wss://` WebDriver BiDi sockets:
//! rustls (with the `ring` provider, so no C toolchain is needed) and the system's roots.
//!
//! The roots are read with `rustls-native-certs`, which follows OpenSSL's conventions: the
//! system's store (`/etc/ssl/certs` on Debian), or, when `SSL_CERT_FILE` (a PEM file) or
//! `SSL_CERT_DIR` is set, only what they name. A Grid behind a proxy with a private CA is
//! trusted with `SSL_CERT_FILE=ca.pem` (README, "A Grid behind TLS"). The same configuration serves
//! the WebDriver client (fantoccini), the BiDi socket (tokio-tungstenite) and, through
//! reqwest's native-roots feature, the Grid's `/status`.

use anyhow::Context;
use std::sync::{Arc, Mutex};

pub type Connector =
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>;

/// The roots' environment when the configuration was built, and the configuration.
type Cached = (
    Option<std::ffi::OsString>,
    Option<std::ffi::OsString>,
    Arc<rustls::ClientConfig>,
);

static CONFIG: Mutex<Option<Cached>> = Mutex::new(None);

/// The client configuration: the system's roots (or `SSL_CERT_FILE`/`SSL_CERT_DIR`'s), no
/// client certificate, no ALPN (each user sets its own). Built once per value of those
/// variables, so a test that sets them gets a configuration with its CA.
pub fn client_config() -> anyhow::Result<Arc<rustls::ClientConfig>> {
    let file = std::env::var_os("SSL_CERT_FILE");
    let dir = std::env::var_os("SSL_CERT_DIR");
    let mut cached = CONFIG.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((f, d, config)) = cached.as_ref() {
        if *f == file && *d == dir {
            return Ok(config.clone());
        }
    }
    let loaded = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(loaded.certs);
    if added == 0 {
        let why: Vec<String> = loaded.errors.iter().map(|e| e.to_string()).collect();
        anyhow::bail!(
            "no trusted root certificate could be read{}{}; install the system's CA \
             certificates (Debian: ca-certificates) or point SSL_CERT_FILE at a PEM file",
            if file.is_some() {
                " from SSL_CERT_FILE"
            } else {
                ""
            },
            if why.is_empty() {
                String::new()
            } else {
                format!(" ({})", why.join("; "))
            }
        );
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let config = Arc::new(config);
    *cached = Some((file, dir, config.clone()));
    Ok(config)
}

/// An HTTP connector that speaks `https://` with [`client_config`] and `http://` as
/// before (the WebDriver client's connector).
pub fn https_connector() -> anyhow::Result<Connector> {
    let config = (*client_config()?).clone();
    Ok(hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_or_http()
        .enable_http1()
        .build())
}

/// What to do about an error that a certificate caused (anywhere in its chain): trusting a
/// private CA. `None` for any other error.
pub fn hint(err: &anyhow::Error) -> Option<&'static str> {
    let text = format!("{err:#}").to_ascii_lowercase();
    (text.contains("certificate") || text.contains("unknownissuer")).then_some(
        "the server's TLS certificate is not trusted here: if a private CA signed it, point \
         SSL_CERT_FILE at a PEM file holding that CA (it replaces the system's roots; add \
         them to the file if other servers need them)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_roots_load_and_a_certificate_error_gets_its_hint() {
        if std::env::var_os("SSL_CERT_FILE").is_none() && std::env::var_os("SSL_CERT_DIR").is_none()
        {
            let config = client_config().expect("the system's roots");
            assert!(config.alpn_protocols.is_empty());
            assert!(Arc::ptr_eq(&config, &client_config().unwrap()), "cached");
        }
        let err = anyhow::anyhow!("invalid peer certificate: UnknownIssuer").context("hub");
        assert!(hint(&err).unwrap().contains("SSL_CERT_FILE"));
        assert!(hint(&anyhow::anyhow!("connection refused")).is_none());
    }
}
