//! Before IPv6-only viewer nodes are paid for: can they reach the target at all? Viewer
//! nodes without IPv4 (the default on Hetzner: cheaper, and each has a /64 for its viewers'
//! own addresses) reach only targets with an IPv6 address. The check resolves the target's
//! host (AAAA) and opens a TCP connection to it over IPv6 from the controller; when either
//! fails, the warning names the choices: a NAT64 the user provides, or an IPv6 address for
//! the target. Only a warning: a NAT64 is invisible from here, and the controller's own
//! machine may lack the IPv6 route the nodes have.
//!
//! `check_reachable_over_ipv6` is the check with the real resolver and network;
//! `check_with` takes both as functions, so it is tested without traffic.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// How long one connection attempt may take.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why IPv6-only nodes would not reach the target.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum Ipv6ReachError {
    #[error("target URL `{url}`: {message}")]
    BadUrl { url: String, message: String },
    #[error("the target {host} has no IPv6 address ({found}): IPv6-only viewer nodes cannot reach it. {CHOICES}")]
    NoIpv6 {
        host: String,
        /// What was found instead, e.g. `only A records: 192.0.2.10` or `no address`.
        found: String,
    },
    #[error("the target {host} has IPv6 addresses but none accepted a connection from this machine over IPv6 ({tried}): IPv6-only viewer nodes would not reach it either. If this machine itself has no IPv6 route, check from one that has. {CHOICES}")]
    Unreachable {
        host: String,
        /// Each address tried, with its error.
        tried: String,
    },
}

/// The ways out, named in every error.
pub(crate) const CHOICES: &str = "viewerfleet's nodes have no IPv4 address. Choose one: (1) give the target an IPv6 address (an AAAA record), or (2) a NAT64 with DNS64 that you provide (point the nodes' resolvers at the DNS64; the viewers keep their own IPv6 addresses); with either in place, this warning can be ignored.";

/// The address the check connected to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ipv6Reach {
    pub address: SocketAddr,
}

/// Host and port of an `http(s)://` URL (default ports 80/443).
fn host_port(url: &str) -> Result<(String, u16), Ipv6ReachError> {
    let bad = |message: &str| Ipv6ReachError::BadUrl {
        url: url.to_string(),
        message: message.to_string(),
    };
    let parsed = url::Url::parse(url).map_err(|e| bad(&e.to_string()))?;
    let host = match parsed.host() {
        Some(url::Host::Domain(d)) => d.to_string(),
        Some(url::Host::Ipv4(a)) => a.to_string(),
        Some(url::Host::Ipv6(a)) => a.to_string(),
        None => return Err(bad("it has no host")),
    };
    let port = parsed
        .port_or_known_default()
        .ok_or_else(|| bad("it has no port and no known default port"))?;
    Ok((host, port))
}

/// The check with the resolver (`host, port` → addresses, A and AAAA) and the connector
/// (`address, timeout` → connected or an error) given as functions.
pub(crate) async fn check_with<R, RF, C, CF>(
    url: &str,
    resolve: R,
    connect: C,
) -> Result<Ipv6Reach, Ipv6ReachError>
where
    R: FnOnce(String, u16) -> RF,
    RF: Future<Output = std::io::Result<Vec<SocketAddr>>>,
    C: Fn(SocketAddr, Duration) -> CF,
    CF: Future<Output = std::io::Result<()>>,
{
    let (host, port) = host_port(url)?;
    let addresses = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => resolve(host.clone(), port)
            .await
            .map_err(|e| Ipv6ReachError::NoIpv6 {
                host: host.clone(),
                found: format!("it does not resolve: {e}"),
            })?,
    };
    let (v6, v4): (Vec<SocketAddr>, Vec<SocketAddr>) = addresses
        .into_iter()
        .partition(|a| a.is_ipv6() && !is_mapped_v4(a.ip()));
    if v6.is_empty() {
        let found = if v4.is_empty() {
            "no address".to_string()
        } else {
            let list: Vec<String> = v4.iter().map(|a| a.ip().to_string()).collect();
            format!("only IPv4: {}", list.join(", "))
        };
        return Err(Ipv6ReachError::NoIpv6 { host, found });
    }
    let mut tried = Vec::new();
    for address in v6 {
        match connect(address, CONNECT_TIMEOUT).await {
            Ok(()) => return Ok(Ipv6Reach { address }),
            Err(e) => tried.push(format!("{address}: {e}")),
        }
    }
    Err(Ipv6ReachError::Unreachable {
        host,
        tried: tried.join("; "),
    })
}

fn is_mapped_v4(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V6(a) if a.to_ipv4_mapped().is_some())
}

/// The check for real: the system resolver and a TCP connection from this machine.
pub(crate) async fn check_reachable_over_ipv6(url: &str) -> Result<Ipv6Reach, Ipv6ReachError> {
    check_with(
        url,
        |host, port| async move {
            Ok(tokio::net::lookup_host((host.as_str(), port))
                .await?
                .collect())
        },
        |address, limit| async move {
            match tokio::time::timeout(limit, tokio::net::TcpStream::connect(address)).await {
                Ok(Ok(_stream)) => Ok(()),
                Ok(Err(e)) => Err(e),
                Err(_) => Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no answer within {limit:?}"),
                )),
            }
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Error, ErrorKind};
    use std::sync::Mutex;

    fn addrs(list: &[&str]) -> Vec<SocketAddr> {
        list.iter().map(|a| a.parse().unwrap()).collect()
    }

    async fn run(
        url: &str,
        resolved: std::io::Result<Vec<SocketAddr>>,
        accept: &[&str],
    ) -> (Result<Ipv6Reach, Ipv6ReachError>, Vec<SocketAddr>) {
        let accept = addrs(accept);
        let tried = Mutex::new(Vec::new());
        let asked = Mutex::new(None);
        let result = check_with(
            url,
            |host, port| {
                *asked.lock().unwrap() = Some((host, port));
                async move { resolved }
            },
            |address, _| {
                tried.lock().unwrap().push(address);
                let ok = accept.contains(&address);
                async move {
                    if ok {
                        Ok(())
                    } else {
                        Err(Error::new(ErrorKind::ConnectionRefused, "refused"))
                    }
                }
            },
        )
        .await;
        let tried = tried.into_inner().unwrap();
        (result, tried)
    }

    #[tokio::test]
    async fn an_aaaa_that_accepts_passes_and_ipv4_is_never_tried() {
        let (r, tried) = run(
            "https://video.example/w/abc",
            Ok(addrs(&["192.0.2.10:443", "[2001:db8::10]:443"])),
            &["[2001:db8::10]:443"],
        )
        .await;
        assert_eq!(r.unwrap().address, "[2001:db8::10]:443".parse().unwrap());
        assert_eq!(tried, addrs(&["[2001:db8::10]:443"]));
    }

    #[tokio::test]
    async fn only_a_records_name_the_choices() {
        let (r, tried) = run(
            "http://video.example:9000/",
            Ok(addrs(&["192.0.2.10:9000", "[::ffff:192.0.2.11]:9000"])),
            &[],
        )
        .await;
        let err = r.unwrap_err();
        assert!(
            matches!(&err, Ipv6ReachError::NoIpv6 { host, found } if host == "video.example" && found == "only IPv4: 192.0.2.10, ::ffff:192.0.2.11"),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains("IPv6-only viewer nodes cannot reach it"),
            "{text}"
        );
        assert!(
            text.contains("no IPv4 address") && text.contains("NAT64"),
            "{text}"
        );
        assert!(tried.is_empty(), "nothing to connect to over IPv6");
    }

    #[tokio::test]
    async fn aaaa_records_that_refuse_are_each_named() {
        let (r, tried) = run(
            "https://video.example/",
            Ok(addrs(&["[2001:db8::10]:443", "[2001:db8::11]:443"])),
            &[],
        )
        .await;
        let err = r.unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, Ipv6ReachError::Unreachable { .. }), "{text}");
        assert!(
            text.contains("[2001:db8::10]:443: refused; [2001:db8::11]:443: refused"),
            "{text}"
        );
        assert!(text.contains("NAT64"), "{text}");
        assert_eq!(tried.len(), 2);
    }

    #[tokio::test]
    async fn a_name_that_does_not_resolve_and_literal_addresses() {
        let (r, _) = run(
            "https://nowhere.example/",
            Err(Error::new(ErrorKind::NotFound, "no such host")),
            &[],
        )
        .await;
        assert!(
            r.unwrap_err()
                .to_string()
                .contains("it does not resolve: no such host"),
            "resolver error named"
        );
        // Literals are not resolved.
        let (r, tried) = run(
            "http://[2001:db8::5]:8080/x",
            Err(Error::other("must not resolve")),
            &["[2001:db8::5]:8080"],
        )
        .await;
        assert!(r.is_ok() && tried.len() == 1);
        let (r, _) = run("http://192.0.2.7/", Err(Error::other("no")), &[]).await;
        assert!(matches!(r, Err(Ipv6ReachError::NoIpv6 { .. })));
        let (r, _) = run("not a url", Ok(vec![]), &[]).await;
        assert!(matches!(r, Err(Ipv6ReachError::BadUrl { .. })));
    }

    #[tokio::test]
    async fn the_real_check_connects_over_loopback_only() {
        // [::1] is this machine: the real resolver is not used for a literal, and the
        // connection stays on loopback.
        let listener = tokio::net::TcpListener::bind("[::1]:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let ok = check_reachable_over_ipv6(&format!("http://[::1]:{port}/")).await;
        assert_eq!(ok.unwrap().address.port(), port);
        drop(listener);
        let closed = check_reachable_over_ipv6(&format!("http://[::1]:{port}/")).await;
        assert!(
            matches!(closed, Err(Ipv6ReachError::Unreachable { .. })),
            "{closed:?}"
        );
    }
}
