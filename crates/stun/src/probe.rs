//! Classifies what stands between this host and a STUN server with an alternate address,
//! as RFC 5780 (section 4) tests it and RFC 4787 names it:
//!
//! - **mapping**: one socket asks the primary address (test I), the alternate address at the
//!   primary port (II) and the alternate address and port (III). The same reflexive address
//!   each time is endpoint-independent mapping; a new one per address, address-dependent; a
//!   new one per address and port, address- and port-dependent ("symmetric"). A reflexive
//!   address equal to the socket's own is no NAT at all.
//! - **filtering**: a fresh socket asks the primary address (so the NAT has a mapping), then
//!   asks for the answer to come from the other address and port (II): if it arrives,
//!   endpoint-independent filtering; else from the other port only (III): if it arrives,
//!   address-dependent; else address- and port-dependent.
//!
//! Blocking (std sockets): it runs on a thread inside the viewer's network namespace
//! (`netns::run_in_netns`). A lost answer is told from a filtered one by retransmitting
//! (`attempts` times, `wait` each).

use super::{Message, ATTR_OTHER_ADDRESS, BINDING_SUCCESS, CHANGE_IP, CHANGE_PORT};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// RFC 4787's mapping behaviours (section 4.1), plus "no translation".
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mapping {
    /// The reflexive address is the socket's own: no NAT on the path.
    NoTranslation,
    EndpointIndependent,
    AddressDependent,
    AddressAndPortDependent,
}

/// RFC 4787's filtering behaviours (section 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Filtering {
    EndpointIndependent,
    AddressDependent,
    AddressAndPortDependent,
}

impl std::fmt::Display for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mapping::NoTranslation => "no translation",
            Mapping::EndpointIndependent => "endpoint-independent mapping",
            Mapping::AddressDependent => "address-dependent mapping",
            Mapping::AddressAndPortDependent => "address- and port-dependent mapping",
        })
    }
}

impl std::fmt::Display for Filtering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Filtering::EndpointIndependent => "endpoint-independent filtering",
            Filtering::AddressDependent => "address-dependent filtering",
            Filtering::AddressAndPortDependent => "address- and port-dependent filtering",
        })
    }
}

/// What the tests found, with the addresses they saw.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NatBehaviour {
    pub mapping: Mapping,
    pub filtering: Filtering,
    /// The mapping socket's own address.
    pub local: SocketAddr,
    /// Reflexive address seen by the primary (test I), the alternate address (II) and the
    /// alternate address and port (III).
    pub mapped: [SocketAddr; 3],
}

impl NatBehaviour {
    /// E.g. `endpoint-independent mapping, address- and port-dependent filtering`.
    pub fn describe(&self) -> String {
        format!("{}, {}", self.mapping, self.filtering)
    }
}

/// Why a classification could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("no answer from the STUN server at {0} (is it running, and is there a route?)")]
    NoAnswer(SocketAddr),
    #[error("the STUN server at {0} has no alternate address (no OTHER-ADDRESS): it cannot classify filtering or mapping")]
    NoAlternate(SocketAddr),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// How long to wait for each answer and how often to ask.
#[derive(Debug, Clone, Copy)]
pub struct ProbeTiming {
    pub wait: Duration,
    pub attempts: u32,
}

impl Default for ProbeTiming {
    /// 4 × 500 ms: a busy 2-core machine answers well within it.
    fn default() -> Self {
        Self {
            wait: Duration::from_millis(500),
            attempts: 4,
        }
    }
}

/// Runs the mapping and filtering tests against `server` (its primary address and port).
pub fn classify(server: SocketAddr, timing: ProbeTiming) -> Result<NatBehaviour, ProbeError> {
    let local_ip = source_ip(server)?;
    // Mapping: one socket, three destinations.
    let socket = UdpSocket::bind(SocketAddr::new(local_ip, 0))?;
    let local = socket.local_addr()?;
    let first = ask(&socket, server, Message::binding_request(), timing)?
        .ok_or(ProbeError::NoAnswer(server))?;
    let other = first
        .address(ATTR_OTHER_ADDRESS)
        .ok_or(ProbeError::NoAlternate(server))?;
    let x1 = first.mapped_address().ok_or(ProbeError::NoAnswer(server))?;
    let mapped_at = |dest: SocketAddr| -> Result<SocketAddr, ProbeError> {
        ask(&socket, dest, Message::binding_request(), timing)?
            .and_then(|m| m.mapped_address())
            .ok_or(ProbeError::NoAnswer(dest))
    };
    let x2 = mapped_at(SocketAddr::new(other.ip(), server.port()))?;
    let x3 = mapped_at(other)?;
    let mapping = if x1 == local {
        Mapping::NoTranslation
    } else if x2 == x1 {
        Mapping::EndpointIndependent
    } else if x3 == x2 {
        Mapping::AddressDependent
    } else {
        Mapping::AddressAndPortDependent
    };
    // Filtering: a fresh socket that has only ever talked to the primary address and port.
    let socket = UdpSocket::bind(SocketAddr::new(local_ip, 0))?;
    ask(&socket, server, Message::binding_request(), timing)?
        .ok_or(ProbeError::NoAnswer(server))?;
    let changed = |flags| {
        ask(
            &socket,
            server,
            Message::binding_request().with_change_request(flags),
            timing,
        )
    };
    let filtering = if changed(CHANGE_IP | CHANGE_PORT)?.is_some() {
        Filtering::EndpointIndependent
    } else if changed(CHANGE_PORT)?.is_some() {
        Filtering::AddressDependent
    } else {
        Filtering::AddressAndPortDependent
    };
    Ok(NatBehaviour {
        mapping,
        filtering,
        local,
        mapped: [x1, x2, x3],
    })
}

/// The address this host sends from towards `server` (a connected socket's own address).
pub(crate) fn source_ip(server: SocketAddr) -> std::io::Result<IpAddr> {
    let unspecified: IpAddr = if server.is_ipv4() {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    };
    let socket = UdpSocket::bind(SocketAddr::new(unspecified, 0))?;
    socket.connect(server)?;
    Ok(socket.local_addr()?.ip())
}

/// Sends `request` to `dest` until its success response arrives (from anywhere: a changed
/// address answers from elsewhere), at most `timing.attempts` times. `None`: no answer.
pub fn ask(
    socket: &UdpSocket,
    dest: SocketAddr,
    request: Message,
    timing: ProbeTiming,
) -> std::io::Result<Option<Message>> {
    let bytes = request.encode(true);
    let mut buf = [0u8; 1500];
    for _ in 0..timing.attempts.max(1) {
        socket.send_to(&bytes, dest)?;
        let deadline = Instant::now() + timing.wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            socket.set_read_timeout(Some(left))?;
            match socket.recv_from(&mut buf) {
                Ok((n, _)) => {
                    let Ok(reply) = Message::decode(&buf[..n]) else {
                        continue;
                    };
                    if reply.transaction == request.transaction && reply.kind == BINDING_SUCCESS {
                        return Ok(Some(reply));
                    }
                }
                Err(err)
                    if matches!(
                        err.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::ConnectionRefused
                    ) =>
                {
                    if err.kind() == std::io::ErrorKind::ConnectionRefused {
                        // An ICMP error of an earlier datagram: keep waiting for this one.
                        continue;
                    }
                    break;
                }
                Err(err) => return Err(err),
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::super::server::{bind, serve, StunAddresses, StunStats};
    use super::*;
    use std::sync::Arc;

    /// Over loopback with two addresses there is no NAT and nothing filters.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn loopback_has_no_translation_and_no_filtering() {
        let bound = bind(StunAddresses {
            primary: "127.0.0.1:0".parse().unwrap(),
            alternate: None,
        })
        .unwrap();
        let port = bound.local_addrs()[0].port();
        drop(bound);
        let alt_port = port.wrapping_add(1).max(1024);
        let Ok(bound) = bind(StunAddresses {
            primary: SocketAddr::new("127.0.0.1".parse().unwrap(), port),
            alternate: Some(SocketAddr::new("127.0.0.2".parse().unwrap(), alt_port)),
        }) else {
            return; // the ports were taken meanwhile: nothing to learn here
        };
        let cancel = tokio_util::sync::CancellationToken::new();
        let server = bound.addresses().primary;
        let task = tokio::spawn(serve(bound, Arc::new(StunStats::default()), cancel.clone()));
        let result = tokio::task::spawn_blocking(move || classify(server, ProbeTiming::default()))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(result.mapping, Mapping::NoTranslation);
        assert_eq!(result.filtering, Filtering::EndpointIndependent);
        cancel.cancel();
        task.await.unwrap();
    }
}
