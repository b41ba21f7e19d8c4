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
use viewerfleet::netns::{run_in_netns, Shaping, SlotAccess};
use viewerfleet::stun::probe::{classify, Filtering, Mapping, NatBehaviour, ProbeTiming};

fn probe(ns: &str, server: SocketAddr) -> NatBehaviour {
    run_in_netns(ns, move || classify(server, ProbeTiming::default()))
        .unwrap()
        .unwrap_or_else(|err| panic!("probe from {ns} to {server}: {err}"))
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
            .slot(1, access(NatKind::None, IpStack::Dual), Shaping::default())
            .await;
        let home = net
            .slot(2, access(NatKind::Home, IpStack::Dual), Shaping::default())
            .await;
        let symmetric = net
            .slot(
                3,
                access(NatKind::Symmetric, IpStack::Dual),
                Shaping::default(),
            )
            .await;
        // Two viewers behind the one carrier-grade NAT, on a shaped mobile-like link.
        let mobile = Shaping {
            down_kbit: 20_000,
            up_kbit: 5_000,
            delay_ms: 0,
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
