//! TLS as a client, for `https://` Grid hubs and their `wss://` WebDriver BiDi sockets:
//! rustls (with the `ring` provider, so no C toolchain is needed) and the system's roots.
//!
//! The roots are read with `rustls-native-certs`, which follows OpenSSL's conventions: the
//! system's store (`/etc/ssl/certs` on Debian), or, when `SSL_CERT_FILE` (a PEM file) or
//! `SSL_CERT_DIR` is set, only what they name. A Grid behind a proxy with a private CA is
//! trusted with `SSL_CERT_FILE=ca.pem` (GUIDE.md, "A Grid behind TLS"). The same configuration serves
//! every client of the tool: the WebDriver client (fantoccini), the BiDi socket
//! (tokio-tungstenite) and every HTTP client ([`http_client_builder`]: the Grid's `/status`,
//! the target's checks, the exporter's scrapes, the nodes' load endpoints, the Hetzner API) —
//! one trust store, never reqwest's bundled web roots beside it.
//!
//! A self-signed server certificate (a hub behind `openssl req -x509`) is trusted when
//! `SSL_CERT_FILE` names that very certificate: it is pinned, byte for byte, since WebPKI
//! refuses a certificate that is its own CA as a server's.

use anyhow::Context;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::DigitallySignedStruct;
use std::path::Path;
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
    // Certificates named by SSL_CERT_FILE are also pinned: a self-signed one is accepted
    // when the server presents exactly it.
    let pinned = match &file {
        Some(path) => pinned_certificates(Path::new(path)),
        None => Vec::new(),
    };
    let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .context("the certificate verifier")?;
    let verifier = Arc::new(PinnedOrWebPki {
        webpki,
        pinned,
        provider: provider.clone(),
    });
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    let config = Arc::new(config);
    *cached = Some((file, dir, config.clone()));
    Ok(config)
}

/// The certificates of a PEM file (none when it cannot be read: the roots' loader says so).
fn pinned_certificates(path: &Path) -> Vec<CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_file_iter(path)
        .map(|certs| certs.filter_map(Result::ok).collect())
        .unwrap_or_default()
}

/// WebPKI's verdict, except that a server presenting exactly a certificate the user named
/// in `SSL_CERT_FILE` is trusted (a self-signed certificate, pinned). Signatures on the
/// handshake are checked either way.
#[derive(Debug)]
struct PinnedOrWebPki {
    webpki: Arc<rustls::client::WebPkiServerVerifier>,
    pinned: Vec<CertificateDer<'static>>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for PinnedOrWebPki {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Ok(verified) => Ok(verified),
            Err(_)
                if self
                    .pinned
                    .iter()
                    .any(|p| p.as_ref() == end_entity.as_ref()) =>
            {
                Ok(ServerCertVerified::assertion())
            }
            Err(err) => Err(err),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// An HTTP client builder with [`client_config`]'s trust (and nothing else): every HTTP
/// client of the tool starts here. Without any root it still builds; its `https://`
/// requests then fail with an error [`hint`] explains.
pub fn http_client_builder() -> reqwest::ClientBuilder {
    let builder = reqwest::Client::builder();
    match client_config() {
        Ok(config) => builder.use_preconfigured_tls((*config).clone()),
        Err(err) => {
            tracing::warn!("TLS: {err:#}");
            builder
        }
    }
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
