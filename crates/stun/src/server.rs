//! The STUN Binding server: answers each Binding request with the address and port it came
//! from (XOR-MAPPED-ADDRESS, and MAPPED-ADDRESS for old clients). With a second address and
//! port (RFC 5780) it listens on all four combinations, says where it answered from
//! (RESPONSE-ORIGIN) and what its other address is (OTHER-ADDRESS), and honours
//! CHANGE-REQUEST by answering from the other address and/or port — what a NAT's filtering
//! is classified with. Without them a CHANGE-REQUEST gets 420 (Unknown Attribute).
//!
//! Sockets are bound apart from serving (`bind`, blocking), so a caller can bind them inside
//! a network namespace and serve them from its runtime.

use super::{
    Message, ATTR_CHANGE_REQUEST, ATTR_ERROR_CODE, ATTR_MAPPED_ADDRESS, ATTR_OTHER_ADDRESS,
    ATTR_RESPONSE_ORIGIN, ATTR_SOFTWARE, ATTR_UNKNOWN_ATTRIBUTES, ATTR_XOR_MAPPED_ADDRESS,
    BINDING_ERROR, BINDING_REQUEST, BINDING_SUCCESS, CHANGE_IP, CHANGE_PORT,
};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Where a STUN server listens: its primary address, and for RFC 5780 tests an alternate
/// that differs in address and port (same family).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StunAddresses {
    pub primary: SocketAddr,
    pub alternate: Option<SocketAddr>,
}

/// What the server did, for refsite's `/metrics`.
#[derive(Debug, Default)]
pub struct StunStats {
    /// Binding requests answered with an address.
    pub answered: AtomicU64,
    /// Of those, answered from another address or port (CHANGE-REQUEST).
    pub changed: AtomicU64,
    /// Datagrams that were not Binding requests, or refused.
    pub refused: AtomicU64,
}

/// Bound sockets, ready to serve.
#[derive(Debug)]
pub struct BoundStun {
    addresses: StunAddresses,
    /// (local address, socket); with an alternate: A1P1, A1P2, A2P1, A2P2.
    sockets: Vec<(SocketAddr, UdpSocket)>,
}

impl BoundStun {
    /// Where it listens (every socket).
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.sockets.iter().map(|(a, _)| *a).collect()
    }

    pub fn addresses(&self) -> StunAddresses {
        self.addresses
    }
}

/// Binds the server's sockets (one, or four with an alternate). A port 0 in `primary`
/// without an alternate picks a free port.
pub fn bind(addresses: StunAddresses) -> std::io::Result<BoundStun> {
    let StunAddresses { primary, alternate } = addresses;
    let wanted = match alternate {
        None => vec![primary],
        Some(alt) => {
            if alt.is_ipv4() != primary.is_ipv4()
                || alt.ip() == primary.ip()
                || alt.port() == primary.port()
            {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("the STUN alternate {alt} must differ from {primary} in address and port, same family"),
                ));
            }
            vec![
                primary,
                SocketAddr::new(primary.ip(), alt.port()),
                SocketAddr::new(alt.ip(), primary.port()),
                alt,
            ]
        }
    };
    let mut sockets = Vec::new();
    for addr in wanted {
        let socket = UdpSocket::bind(addr)?;
        socket.set_nonblocking(true)?;
        sockets.push((socket.local_addr()?, socket));
    }
    let primary = sockets[0].0;
    Ok(BoundStun {
        addresses: StunAddresses { primary, alternate },
        sockets,
    })
}

/// Serves until `cancel`.
pub async fn serve(bound: BoundStun, stats: Arc<StunStats>, cancel: CancellationToken) {
    let mut sockets = Vec::new();
    for (addr, socket) in bound.sockets {
        match tokio::net::UdpSocket::from_std(socket) {
            Ok(s) => sockets.push((addr, s)),
            Err(err) => {
                tracing::warn!("STUN: cannot serve {addr}: {err}");
                return;
            }
        }
    }
    let sockets = Arc::new(sockets);
    let alternate = bound.addresses.alternate;
    let primary = bound.addresses.primary;
    let mut tasks = tokio::task::JoinSet::new();
    for index in 0..sockets.len() {
        let sockets = sockets.clone();
        let stats = stats.clone();
        let cancel = cancel.clone();
        tasks.spawn(async move {
            let mut buf = vec![0u8; 1500];
            loop {
                let (len, from) = tokio::select! {
                    _ = cancel.cancelled() => return,
                    r = sockets[index].1.recv_from(&mut buf) => match r {
                        Ok(r) => r,
                        Err(err) => {
                            // ICMP errors of earlier answers surface here on Linux.
                            tracing::debug!("STUN: receive: {err}");
                            continue;
                        }
                    },
                };
                let local = sockets[index].0;
                match answer(&buf[..len], from, local, primary, alternate) {
                    Some((reply, via)) => {
                        let out = sockets.iter().find(|(a, _)| *a == via).map(|(_, s)| s);
                        if let Some(out) = out {
                            let _ = out.send_to(&reply.encode(true), from).await;
                            if reply.kind == BINDING_SUCCESS {
                                stats.answered.fetch_add(1, Ordering::Relaxed);
                                if via != local {
                                    stats.changed.fetch_add(1, Ordering::Relaxed);
                                }
                            } else {
                                stats.refused.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    None => {
                        stats.refused.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
}

/// The reply to one datagram received at `local` from `from`, and the local address to
/// send it from; `None` for anything but a Binding request.
fn answer(
    data: &[u8],
    from: SocketAddr,
    local: SocketAddr,
    primary: SocketAddr,
    alternate: Option<SocketAddr>,
) -> Option<(Message, SocketAddr)> {
    let request = Message::decode(data).ok()?;
    if request.kind != BINDING_REQUEST {
        return None;
    }
    let change = request.change_request();
    let Some(alt) = alternate else {
        if request.attribute(ATTR_CHANGE_REQUEST).is_some() {
            let mut reply = Message::new(BINDING_ERROR, request.transaction);
            // 420 Unknown Attribute: class 4, number 20.
            let mut code = vec![0, 0, 4, 20];
            code.extend_from_slice(b"no alternate address");
            reply.attributes.push((ATTR_ERROR_CODE, code));
            reply.attributes.push((
                ATTR_UNKNOWN_ATTRIBUTES,
                ATTR_CHANGE_REQUEST.to_be_bytes().to_vec(),
            ));
            return Some((reply, local));
        }
        return Some((success(&request, from, local, None), local));
    };
    let other_ip = |ip| {
        if ip == primary.ip() {
            alt.ip()
        } else {
            primary.ip()
        }
    };
    let other_port = |port| {
        if port == primary.port() {
            alt.port()
        } else {
            primary.port()
        }
    };
    let via = SocketAddr::new(
        if change & CHANGE_IP != 0 {
            other_ip(local.ip())
        } else {
            local.ip()
        },
        if change & CHANGE_PORT != 0 {
            other_port(local.port())
        } else {
            local.port()
        },
    );
    let other = SocketAddr::new(other_ip(local.ip()), other_port(local.port()));
    Some((success(&request, from, via, Some(other)), via))
}

fn success(
    request: &Message,
    from: SocketAddr,
    origin: SocketAddr,
    other: Option<SocketAddr>,
) -> Message {
    let mut reply = Message::new(BINDING_SUCCESS, request.transaction)
        .with_address(ATTR_XOR_MAPPED_ADDRESS, from)
        .with_address(ATTR_MAPPED_ADDRESS, from)
        .with_address(ATTR_RESPONSE_ORIGIN, origin);
    if let Some(other) = other {
        reply = reply.with_address(ATTR_OTHER_ADDRESS, other);
    }
    reply
        .attributes
        .push((ATTR_SOFTWARE, b"viewerfleet".to_vec()));
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_binding_request_gets_its_source_back() {
        let request = Message::binding_request();
        let (reply, via) = answer(
            &request.encode(false),
            addr("198.18.0.3:40000"),
            addr("198.18.0.2:3478"),
            addr("198.18.0.2:3478"),
            None,
        )
        .unwrap();
        assert_eq!(via, addr("198.18.0.2:3478"));
        assert_eq!(reply.kind, BINDING_SUCCESS);
        assert_eq!(reply.transaction, request.transaction);
        assert_eq!(reply.mapped_address(), Some(addr("198.18.0.3:40000")));
        assert_eq!(reply.address(ATTR_OTHER_ADDRESS), None);
    }

    #[test]
    fn change_requests_pick_the_other_socket() {
        let (primary, alt) = (addr("198.18.0.2:3478"), addr("198.19.255.253:3479"));
        let ask = |flags: u32, local: &str| {
            let request = Message::binding_request().with_change_request(flags);
            answer(
                &request.encode(false),
                addr("198.18.0.3:40000"),
                addr(local),
                primary,
                Some(alt),
            )
            .unwrap()
        };
        let (reply, via) = ask(CHANGE_IP | CHANGE_PORT, "198.18.0.2:3478");
        assert_eq!(via, alt);
        assert_eq!(reply.address(ATTR_RESPONSE_ORIGIN), Some(alt));
        assert_eq!(reply.address(ATTR_OTHER_ADDRESS), Some(alt));
        assert_eq!(
            ask(CHANGE_PORT, "198.18.0.2:3478").1,
            addr("198.18.0.2:3479")
        );
        assert_eq!(
            ask(CHANGE_IP, "198.18.0.2:3478").1,
            addr("198.19.255.253:3478")
        );
        assert_eq!(ask(0, "198.19.255.253:3479").1, alt);
        assert_eq!(
            ask(0, "198.19.255.253:3479").0.address(ATTR_OTHER_ADDRESS),
            Some(primary)
        );
    }

    #[test]
    fn without_an_alternate_a_change_request_is_refused() {
        let request = Message::binding_request().with_change_request(CHANGE_PORT);
        let (reply, _) = answer(
            &request.encode(false),
            addr("[fd00::3]:1"),
            addr("[fd00::2]:3478"),
            addr("[fd00::2]:3478"),
            None,
        )
        .unwrap();
        assert_eq!(reply.kind, BINDING_ERROR);
        assert_eq!(
            answer(
                b"GET / HTTP/1.1",
                addr("[fd00::3]:1"),
                addr("[fd00::2]:3478"),
                addr("[fd00::2]:3478"),
                None
            ),
            None
        );
    }

    #[tokio::test]
    async fn it_answers_over_loopback() {
        let bound = bind(StunAddresses {
            primary: addr("127.0.0.1:0"),
            alternate: None,
        })
        .unwrap();
        let server = bound.local_addrs()[0];
        let cancel = CancellationToken::new();
        let stats = Arc::new(StunStats::default());
        let task = tokio::spawn(serve(bound, stats.clone(), cancel.clone()));
        let client = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let request = Message::binding_request();
        client.send_to(&request.encode(true), server).await.unwrap();
        let mut buf = [0u8; 512];
        let (n, _) = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            client.recv_from(&mut buf),
        )
        .await
        .unwrap()
        .unwrap();
        let reply = Message::decode(&buf[..n]).unwrap();
        assert_eq!(reply.mapped_address(), Some(client.local_addr().unwrap()));
        assert_eq!(stats.answered.load(Ordering::Relaxed), 1);
        cancel.cancel();
        task.await.unwrap();
    }
}
