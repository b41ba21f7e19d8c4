//! An emulated internet for real-tier tests: viewer slots (`grid/viewer-slots.sh`) on one
//! bridge with the emulated public IPv4 segment, and a STUN server with RFC 5780's second
//! address and port in slot 0 (the "public" server namespace, as refsite's). Everything is
//! removed on drop, panics included. Needs root, iproute2 and nftables.

use std::net::SocketAddr;
use std::sync::Arc;
use viewerfleet::model::scenario::LinkProfile;
use viewerfleet::netns::{run_in_netns, SlotAccess, SlotInfo, SlotNetwork};
use viewerfleet::stun::server::{self, StunAddresses, StunStats};

pub struct Internet {
    pub net: SlotNetwork,
    pub server: SlotInfo,
    /// STUN's primary addresses (IPv4, IPv6).
    pub stun_v4: SocketAddr,
    pub stun_v6: SocketAddr,
    pub stats: Vec<Arc<StunStats>>,
    cancel: tokio_util::sync::CancellationToken,
    made: std::sync::Mutex<Vec<u32>>,
}

impl Internet {
    /// A slot group named `<tag>-` with a random ULA prefix, the server in slot 0.
    pub async fn new(tag: &str) -> Self {
        let prefix = format!("fd76:6a00:{:x}::/64", rand::random::<u16>());
        let net = SlotNetwork::new(
            &prefix,
            &format!("{tag}-"),
            "/bin/bash".into(),
            Some(std::process::id()),
        )
        .unwrap()
        .with_ipv4(viewerfleet::netns::EMULATED_PUBLIC_IPV4);
        let server = net
            .up_with(
                0,
                1,
                LinkProfile::UNLIMITED,
                SlotAccess {
                    alternate: true,
                    ..SlotAccess::default()
                },
            )
            .await
            .expect("the server's namespace")
            .remove(0);
        let cancel = tokio_util::sync::CancellationToken::new();
        let mut stats = Vec::new();
        let stun_v4 = SocketAddr::new(server.ipv4.unwrap().into(), 3478);
        let stun_v6 = SocketAddr::new(server.address.unwrap().into(), 3478);
        for (primary, alt) in [
            (
                stun_v4,
                server.alt_ipv4.map(|a| SocketAddr::new(a.into(), 3479)),
            ),
            (
                stun_v6,
                server.alt_address.map(|a| SocketAddr::new(a.into(), 3479)),
            ),
        ] {
            let bound = run_in_netns(&server.name, move || {
                server::bind(StunAddresses {
                    primary,
                    alternate: alt,
                })
            })
            .unwrap()
            .expect("binding the STUN server");
            let s = Arc::new(StunStats::default());
            stats.push(s.clone());
            tokio::spawn(server::serve(bound, s, cancel.clone()));
        }
        Self {
            net,
            server,
            stun_v4,
            stun_v6,
            stats,
            cancel,
            made: std::sync::Mutex::new(vec![0]),
        }
    }

    /// Slot `index` with `access`, its link shaped to `link`.
    pub async fn slot(&self, index: u32, access: SlotAccess, link: LinkProfile) -> SlotInfo {
        self.made.lock().unwrap().push(index);
        self.net
            .up_with(index, 1, link, access)
            .await
            .unwrap_or_else(|err| panic!("slot {index} ({access:?}): {err}"))
            .remove(0)
    }
}

impl Drop for Internet {
    fn drop(&mut self) {
        self.cancel.cancel();
        let mut made = self.made.lock().unwrap().clone();
        made.sort_unstable();
        made.dedup();
        // Slot 0 (the bridge's last user) goes last.
        for index in made.into_iter().rev() {
            if let Err(err) = self.net.down_blocking(index, 1) {
                eprintln!("removing slot {index}: {err}");
            }
        }
    }
}

/// Names of every namespace and link that starts with `prefix` (for leak checks).
pub fn leftovers(prefix: &str) -> Vec<String> {
    let mut names = Vec::new();
    for args in [&["netns", "list"][..], &["-o", "link", "show"][..]] {
        let out = std::process::Command::new("ip")
            .args(args)
            .output()
            .unwrap();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let name = if args[0] == "netns" {
                line.split_whitespace().next().unwrap_or("")
            } else {
                line.split(": ")
                    .nth(1)
                    .unwrap_or("")
                    .split('@')
                    .next()
                    .unwrap_or("")
            };
            if name.starts_with(prefix) {
                names.push(name.to_string());
            }
        }
    }
    names
}
