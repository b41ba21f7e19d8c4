//! Slots made and removed at the same time, as a fleet does when a viewer leaves and its
//! replacement arrives at once: no `up` or `down` fails the other. An `up` reads its
//! neighbours' interfaces to pin their addresses; a `down` deleting one of them mid-read
//! once failed the new viewer's slot with no message. Needs root, iproute2 and nftables.
//! Names carry this test's PID so nothing else is touched.

use crate::support::internet::leftovers;
use std::time::Duration;
use viewerfleet::model::kinds::NatKind;
use viewerfleet::model::scenario::LinkProfile;
use viewerfleet::netns::{SlotAccess, SlotNetwork};

/// Slots kept up while others come and go: the neighbours every `up` reads.
const STANDING: u32 = 6;
/// Rounds of one `down` and one `up` started together.
const ROUNDS: u32 = 24;

#[tokio::test]
async fn a_slot_made_while_another_is_removed_never_fails() {
    let tag = format!("vs{:04x}-", std::process::id() & 0xffff);
    let net = SlotNetwork::new(
        &format!("fd76:6b00:{:x}::/64", rand::random::<u16>()),
        &tag,
        "/bin/bash".into(),
        Some(std::process::id()),
    )
    .unwrap()
    .with_ipv4(viewerfleet::netns::EMULATED_PUBLIC_IPV4);
    let home = SlotAccess {
        nat: NatKind::Home,
        ..SlotAccess::default()
    };
    let link = LinkProfile {
        download_kbps: Some(20_000),
        upload_kbps: Some(5_000),
        latency_ms: None,
    };
    let mut failures = Vec::new();
    if let Err(err) = net.up_with(1, STANDING, link, home).await {
        failures.push(format!("standing slots: {err}"));
    }
    for round in 0..ROUNDS {
        let leaving = 1 + round;
        let arriving = 1 + STANDING + round;
        // The `down` starts at a different point of the `up` each round, so one of them
        // falls while the `up` reads its neighbours.
        let offset = Duration::from_millis(u64::from(round) * 20);
        let down = async {
            tokio::time::sleep(offset).await;
            net.down(leaving, 1).await
        };
        let (removed, made) = tokio::join!(down, net.up_with(arriving, 1, link, home));
        if let Err(err) = removed {
            failures.push(format!("round {round}: down of slot {leaving}: {err}"));
        }
        if let Err(err) = made {
            failures.push(format!("round {round}: up of slot {arriving}: {err}"));
        }
    }
    let cleaned = net.down(0, STANDING + ROUNDS + 1).await;
    let left = leftovers(&tag);
    assert!(failures.is_empty(), "{failures:#?}");
    cleaned.unwrap();
    assert!(left.is_empty(), "namespaces and links left: {left:?}");
    let records: Vec<String> = std::fs::read_dir("/run/viewerfleet/slots")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&tag))
                .collect()
        })
        .unwrap_or_default();
    assert!(records.is_empty(), "records left: {records:?}");
}
