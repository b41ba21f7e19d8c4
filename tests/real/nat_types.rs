//! Each NAT type of a viewer slot (`grid/viewer-slots.sh --nat`), classified the way RFC 5780
//! tests a NAT and RFC 4787 names it: a STUN probe from inside the slot asks a server with two
//! addresses and two ports (mapping: the same socket towards three destinations; filtering:
//! answers asked from a changed address and port). Nothing is assumed from the rules: what
//! the probe sees is what a browser's ICE agent in that slot gets.
//!
//! Needs root, iproute2 and nftables (no browser).

use crate::support::internet::{leftovers, Internet};
use std::net::SocketAddr;
use viewerfleet::model::kinds::{IpStack, NatKind};
use viewerfleet::model::scenario::LinkProfile;
use viewerfleet::netns::{run_in_netns, SlotAccess};
use viewerfleet::stun::probe::{classify, Filtering, Mapping, NatBehaviour, ProbeTiming};

fn probe(ns: &str, server: SocketAddr) -> NatBehaviour {
    run_in_netns(ns, move || classify(server, ProbeTiming::default()))
        .unwrap()
        .unwrap_or_else(|err| panic!("probe from {ns} to {server}: {err}"))
}

/// Two sockets, one in each namespace: each asks STUN for its reflexive address, then both
/// send to the other's for 3 s. Returns the datagrams each received from the other.
fn hole_punch(a: &str, b: &str, stun: SocketAddr) -> (u32, u32) {
    use std::sync::mpsc;
    use std::time::{Duration, Instant};
    let (to_b, from_a) = mpsc::channel::<SocketAddr>();
    let (to_a, from_b) = mpsc::channel::<SocketAddr>();
    let side = |ns: &str, tell: mpsc::Sender<SocketAddr>, hear: mpsc::Receiver<SocketAddr>| {
        let ns = ns.to_string();
        std::thread::spawn(move || {
            run_in_netns(&ns, move || {
                let socket = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
                let reply = viewerfleet::stun::probe::ask(
                    &socket,
                    stun,
                    viewerfleet::stun::Message::binding_request(),
                    ProbeTiming::default(),
                )
                .unwrap()
                .expect("a STUN answer");
                tell.send(reply.mapped_address().unwrap()).unwrap();
                let peer = hear.recv_timeout(Duration::from_secs(20)).unwrap();
                socket
                    .set_read_timeout(Some(Duration::from_millis(100)))
                    .unwrap();
                let mut got = 0u32;
                let end = Instant::now() + Duration::from_secs(3);
                let mut buf = [0u8; 64];
                while Instant::now() < end {
                    // One every 20 ms, as ICE paces its checks (no flood on a shared host).
                    std::thread::sleep(Duration::from_millis(20));
                    let _ = socket.send_to(b"punch", peer);
                    if let Ok((n, _)) = socket.recv_from(&mut buf) {
                        if &buf[..n] == b"punch" {
                            got += 1;
                        }
                    }
                }
                got
            })
            .unwrap()
        })
    };
    let ta = side(a, to_b, from_b);
    let tb = side(b, to_a, from_a);
    (ta.join().unwrap(), tb.join().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_nat_type_is_classified_by_a_stun_probe_from_inside_its_slot() {
    let tag = format!("vfn{:04x}", std::process::id() & 0xffff);
    {
        let net = Internet::new(&tag).await;
        let access = |nat, stack| SlotAccess {
            nat,
            stack: Some(stack),
            alternate: false,
        };
        let none = net
            .slot(
                1,
                access(NatKind::None, IpStack::Dual),
                LinkProfile::UNLIMITED,
            )
            .await;
        let home = net
            .slot(
                2,
                access(NatKind::Home, IpStack::Dual),
                LinkProfile::UNLIMITED,
            )
            .await;
        let symmetric = net
            .slot(
                3,
                access(NatKind::Symmetric, IpStack::Dual),
                LinkProfile::UNLIMITED,
            )
            .await;
        // Two viewers behind the one carrier-grade NAT, on a shaped mobile-like link.
        let mobile = LinkProfile {
            download_kbps: Some(20_000),
            upload_kbps: Some(5_000),
            latency_ms: None,
        };
        let cgnat_a = net
            .slot(4, access(NatKind::Cgnat, IpStack::Dual), mobile)
            .await;
        let cgnat_b = net
            .slot(5, access(NatKind::Cgnat, IpStack::Ipv4), mobile)
            .await;

        let mut table = Vec::new();
        let mut check = |slot: &viewerfleet::netns::SlotInfo, server, family: &str| {
            let found = probe(&slot.name, server);
            table.push(format!(
                "| {} | {family} | {} | {} | {} → {} / {} / {} |",
                slot.nat,
                found.mapping,
                found.filtering,
                found.local,
                found.mapped[0],
                found.mapped[1],
                found.mapped[2]
            ));
            found
        };

        // none: the slot's own public address, nothing filters.
        let r = check(&none, net.stun_v4, "IPv4");
        assert_eq!(
            (r.mapping, r.filtering),
            (Mapping::NoTranslation, Filtering::EndpointIndependent)
        );
        assert_eq!(r.mapped[0].ip(), std::net::IpAddr::from(none.ipv4.unwrap()));
        let r = check(&none, net.stun_v6, "IPv6");
        assert_eq!(
            (r.mapping, r.filtering),
            (Mapping::NoTranslation, Filtering::EndpointIndependent)
        );

        // home: one mapping for every destination, only the contacted address and port in.
        let r = check(&home, net.stun_v4, "IPv4");
        assert_eq!(
            (r.mapping, r.filtering),
            (
                Mapping::EndpointIndependent,
                Filtering::AddressAndPortDependent
            )
        );
        assert_eq!(
            r.mapped[0].ip(),
            std::net::IpAddr::from(home.public_ipv4.unwrap())
        );
        // IPv6: no translation, but the firewall drops what was not asked for.
        let r = check(&home, net.stun_v6, "IPv6");
        assert_eq!(
            (r.mapping, r.filtering),
            (Mapping::NoTranslation, Filtering::AddressAndPortDependent)
        );

        // symmetric: a new external port for every destination.
        let r = check(&symmetric, net.stun_v4, "IPv4");
        assert_eq!(
            (r.mapping, r.filtering),
            (
                Mapping::AddressAndPortDependent,
                Filtering::AddressAndPortDependent
            )
        );
        let ports: std::collections::BTreeSet<u16> = r.mapped.iter().map(|a| a.port()).collect();
        assert_eq!(ports.len(), 3, "one port per destination: {:?}", r.mapped);
        let r = check(&symmetric, net.stun_v6, "IPv6");
        assert_eq!(
            (r.mapping, r.filtering),
            (Mapping::NoTranslation, Filtering::AddressAndPortDependent)
        );

        // cgnat: two NATs, both endpoint-independent; every cgnat viewer shares the CGN's
        // public address.
        let a = check(&cgnat_a, net.stun_v4, "IPv4");
        let b = check(&cgnat_b, net.stun_v4, "IPv4");
        for r in [&a, &b] {
            assert_eq!(
                (r.mapping, r.filtering),
                (
                    Mapping::EndpointIndependent,
                    Filtering::AddressAndPortDependent
                )
            );
        }
        assert_eq!(a.mapped[0].ip(), b.mapped[0].ip(), "one shared address");
        assert_eq!(cgnat_a.public_ipv4, cgnat_b.public_ipv4);
        assert_eq!(
            a.mapped[0].ip(),
            std::net::IpAddr::from(cgnat_a.public_ipv4.unwrap())
        );
        assert_ne!(
            a.mapped[0].ip(),
            std::net::IpAddr::from(home.public_ipv4.unwrap())
        );
        let r = check(&cgnat_a, net.stun_v6, "IPv6");
        assert_eq!(
            (r.mapping, r.filtering),
            (Mapping::NoTranslation, Filtering::AddressAndPortDependent)
        );
        // An IPv4-only slot has no IPv6 at all.
        assert_eq!(cgnat_b.address, None);
        let no_v6 = run_in_netns(&cgnat_b.name, {
            let server = net.stun_v6;
            move || classify(server, ProbeTiming::default())
        })
        .unwrap();
        assert!(no_v6.is_err(), "an IPv4-only slot reached IPv6: {no_v6:?}");

        // What ICE does with it: both sides learn their reflexive address from STUN, then send
        // to each other's at once (hole punching). Endpoint-independent NATs on both sides let
        // it through; a symmetric NAT does not; one CGN does not hairpin its own viewers.
        let punch = |a: &viewerfleet::netns::SlotInfo, b: &viewerfleet::netns::SlotInfo| {
            hole_punch(&a.name, &b.name, net.stun_v4)
        };
        let home_cgnat = punch(&home, &cgnat_a);
        let home_symmetric = punch(&home, &symmetric);
        let cgnat_cgnat = punch(&cgnat_a, &cgnat_b);
        let none_home = punch(&none, &home);
        println!(
            "hole punching over IPv4, datagrams received each way in 3 s: home↔cgnat {home_cgnat:?}, home↔symmetric {home_symmetric:?}, cgnat↔cgnat behind one CGN {cgnat_cgnat:?}, none↔home {none_home:?}"
        );
        assert!(
            home_cgnat.0 > 0 && home_cgnat.1 > 0,
            "home and cgnat viewers should reach each other: {home_cgnat:?}"
        );
        assert!(none_home.0 > 0 && none_home.1 > 0, "{none_home:?}");
        assert_eq!(
            home_symmetric,
            (0, 0),
            "a symmetric NAT let a punched hole through"
        );
        assert_eq!(cgnat_cgnat, (0, 0), "the CGN hairpinned its own viewers");

        println!(
            "| slot NAT | family | mapping | filtering | local → seen by A1P1 / A2P1 / A2P2 |"
        );
        println!("|---|---|---|---|---|");
        for line in &table {
            println!("{line}");
        }
    }
    let left = leftovers(&format!("{tag}-"));
    assert!(left.is_empty(), "left behind: {left:?}");
}
