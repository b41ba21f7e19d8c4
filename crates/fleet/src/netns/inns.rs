//! Code that must run inside a network namespace, called from the root namespace.
//!
//! The controller cannot reach a slot over TCP from the root namespace (in this sandbox
//! traffic between them is dropped), so each call here runs on a fresh OS thread that
//! `setns`es into `/run/netns/<ns>`: sockets made on that thread belong to that namespace,
//! and a listening socket keeps its namespace when handed back to the async runtime.

use super::NetnsError;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Runs `f` on a new thread inside network namespace `ns` and returns its result.
pub fn run_in_netns<T, F>(ns: &str, f: F) -> Result<T, NetnsError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let path = format!("/run/netns/{ns}");
    let ns_name = ns.to_string();
    let handle = std::thread::Builder::new()
        .name(format!("netns-{ns}"))
        .spawn(move || -> Result<T, NetnsError> {
            let file = std::fs::File::open(&path).map_err(|err| NetnsError::Namespace {
                ns: ns_name.clone(),
                message: format!("cannot open {path}: {err} (is the slot up?)"),
            })?;
            // Changes this thread's network namespace only.
            if let Err(e) = nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET) {
                return Err(NetnsError::Namespace {
                    ns: ns_name,
                    message: format!("setns failed: {e} (needs root)"),
                });
            }
            Ok(f())
        })?;
    handle.join().map_err(|_| NetnsError::Namespace {
        ns: ns.to_string(),
        message: "the thread working in the namespace panicked".into(),
    })?
}

/// A TCP listener bound to `addr` inside `ns`, non-blocking, ready for
/// `tokio::net::TcpListener::from_std`.
pub fn bind_tcp_in_netns(ns: &str, addr: SocketAddr) -> Result<TcpListener, NetnsError> {
    run_in_netns(ns, move || {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        Ok::<_, std::io::Error>(listener)
    })?
    .map_err(NetnsError::from)
}

/// `GET url` from inside `ns` (plain HTTP); returns the status and the body as text.
/// Used to scrape a target that runs in the server namespace.
pub async fn http_get_in_netns(
    ns: &str,
    url: &str,
    timeout: Duration,
) -> anyhow::Result<(u16, String)> {
    let uri: http::Uri = url
        .parse()
        .map_err(|err| anyhow::anyhow!("bad URL `{url}`: {err}"))?;
    if uri.scheme_str() != Some("http") {
        anyhow::bail!("only http:// URLs can be fetched inside a namespace (got `{url}`)");
    }
    let host = uri
        .host()
        .ok_or_else(|| anyhow::anyhow!("URL `{url}` has no host"))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = uri.port_u16().unwrap_or(80);
    let path = uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let authority = uri.authority().map(|a| a.to_string()).unwrap_or_default();
    let ns_owned = ns.to_string();
    let url_owned = url.to_string();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let result = run_in_netns(&ns_owned, move || {
            blocking_get(&host, port, &authority, &path, timeout)
        });
        let _ = tx.send(result);
    });
    let result = tokio::time::timeout(timeout + Duration::from_secs(1), rx)
        .await
        .map_err(|_| anyhow::anyhow!("GET {url_owned} in netns {ns}: timed out after {timeout:?}"))?
        .map_err(|_| anyhow::anyhow!("GET {url_owned} in netns {ns}: worker thread vanished"))?;
    let inner = result.map_err(anyhow::Error::from)?;
    inner.map_err(|err| anyhow::anyhow!("GET {url_owned} in netns {ns}: {err}"))
}

fn blocking_get(
    host: &str,
    port: u16,
    authority: &str,
    path: &str,
    timeout: Duration,
) -> std::io::Result<(u16, String)> {
    let deadline = Instant::now() + timeout;
    let addr = (host, port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other(format!("no address for {host}")))?;
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_write_timeout(Some(timeout))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\nAccept-Encoding: identity\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "response not complete before the timeout",
            ));
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(&mut buf)? {
            0 => break,
            n => raw.extend_from_slice(&buf[..n]),
        }
    }
    parse_response(&raw)
}

/// Parses an HTTP/1.x response read to its end (identity or chunked body).
fn parse_response(raw: &[u8]) -> std::io::Result<(u16, String)> {
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("response has no header end"))?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let body = &raw[split + 4..];
    let status: u16 = head
        .lines()
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| bad("response has no status line"))?;
    let chunked = head.lines().any(|line| {
        let lower = line.to_ascii_lowercase();
        lower.starts_with("transfer-encoding:") && lower.contains("chunked")
    });
    let body = if chunked {
        decode_chunked(body).ok_or_else(|| bad("malformed chunked body"))?
    } else {
        body.to_vec()
    };
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

fn decode_chunked(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&body[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(body.get(..size)?);
        body = body.get(size + 2..)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_and_chunked_responses_parse() {
        let raw = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello";
        assert_eq!(parse_response(raw).unwrap(), (200, "hello".into()));
        let raw = b"HTTP/1.1 404 Not Found\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        assert_eq!(parse_response(raw).unwrap(), (404, "abcde".into()));
        assert!(parse_response(b"garbage").is_err());
    }

    #[test]
    fn a_missing_namespace_is_named() {
        let err = run_in_netns("vf-does-not-exist", || ()).unwrap_err();
        assert!(err.to_string().contains("vf-does-not-exist"), "{err}");
    }
}
