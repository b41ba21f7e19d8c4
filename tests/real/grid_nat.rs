//! A local Grid whose viewer slots sit behind emulated home routers (`grid up --local
//! --nat home`): each slot has its router namespace with its NAT and firewall rules, the
//! node's stereotype says so, the target gets the emulated internet's IPv4 address and a
//! STUN server, and `grid down` removes routers, CGN and all. Needs root, java,
//! `cd grid && npm ci --ignore-scripts`, nftables.

use crate::support::grid as grid_support;
use grid_support::*;
use viewerfleet::fleet::grid::GridFleet;
use viewerfleet::fleet::Fleet;
use viewerfleet::model::kinds::NatKind;
use viewerfleet::model::scenario::fleet::GridFleetPlan;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_grid_puts_its_viewer_slots_behind_home_routers() {
    let grid = GridGuard::up_with("nat", 1, 2, |opts| opts.nat = NatKind::Home).await;
    let st = grid.state.clone();
    assert_eq!(st.nat, Some(NatKind::Home));
    assert!(st.target_ipv4.starts_with("198.18."), "{st:?}");
    for index in [100, 101] {
        let router = format!("{}{index}r", st.name_prefix);
        let rules = std::process::Command::new("ip")
            .args(["netns", "exec", &router, "nft", "list", "ruleset"])
            .output()
            .unwrap();
        let rules = String::from_utf8_lossy(&rules.stdout);
        assert!(rules.contains("masquerade"), "router {router}: {rules}");
        assert!(
            rules.contains("ct state established,related accept"),
            "{rules}"
        );
    }
    // The node says what its slots are; a run's target gets STUN and the IPv4 side.
    let fleet = GridFleet::start(&GridFleetPlan::with_url(&st.hub_url).unwrap())
        .await
        .unwrap();
    let placement = fleet.target_placement();
    let internet = placement.internet.expect("the emulated internet's side");
    assert_eq!(internet.stun.len(), 2, "{internet:?}");
    assert_eq!(internet.also_listen[0].ip().to_string(), st.target_ipv4);
    assert_eq!(internet.viewer_host, None);
    let status: serde_json::Value =
        viewerfleet::grid::auth::http_client(st.controller_credentials().as_ref())
            .get(format!("{}status", st.hub_url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    assert!(
        status.to_string().contains("\\\"nat\\\": \\\"home\\\"")
            || status.to_string().contains("\"nat\":\"home\""),
        "the node's stereotype names its NAT: {status}"
    );
    fleet.shutdown().await.unwrap();
    grid.down_and_check().await;
}
