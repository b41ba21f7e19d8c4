//! Viewer slots on a cloud node reach none of the node's own services: `viewer-slots.sh up
//! --forwarding` (what a cloud node's bootstrap runs) inside a namespace standing for the
//! node, with a service listening on the node's address. From the slot, the node's address
//! and the slots' gateway both go unanswered on that port, while ICMP (ping of the gateway)
//! passes; with the guard's table removed the same request is answered, so the drop is the
//! guard's; `down` removes the table. Needs root (without it the test says SKIP and passes),
//! iproute2, nftables and python3. Everything is named `vfh<pid, 4 hex digits>-*` and released on every
//! path: the steps run in one shell inside the node (slot namespaces made there live in its
//! mount namespace), which takes the slots down and stops the service on exit, and the node's
//! namespace is deleted on drop.

use std::collections::BTreeMap;
use std::process::Command;

/// Deletes the node's namespace.
struct NodeNs(String);

impl Drop for NodeNs {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn run(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The steps, in the node: each result as a `KEY=value` line.
const STEPS: &str = r#"
set -u
script=$DIR/viewer-slots.sh
slots() { bash "$script" "$1" --prefix 2001:db8:c17:1::/80 --count 1 --name-prefix "$PREFIX" --forwarding; }
get() {
  ip netns exec "$1" python3 -c 'import sys, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=3).status)
except Exception as e:
    print(str(e).replace("\n", " "))' "http://[$2]:9465/"
}
server=
cleanup() { [ -z "$server" ] || kill "$server" 2>/dev/null; slots down >/dev/null 2>&1; }
trap cleanup EXIT
slots up >"$DIR/up.log" 2>&1 && echo UP=ok || { echo "UP=failed: $(tail -n 3 "$DIR/up.log" | tr '\n' ' ')"; exit 0; }
slot=${PREFIX}0
table=viewerfleet_$(echo "$PREFIX" | tr - _)_guard
(cd "$DIR" && exec python3 -m http.server --bind :: 9465 >/dev/null 2>&1) &
server=$!
# Until the service answers the node itself (20 s at most).
n=0
until python3 -c 'import urllib.request; urllib.request.urlopen("http://[2001:db8:c17::1]:9465/", timeout=1)' 2>/dev/null; do
  n=$((n + 1)); [ $n -lt 100 ] || { echo SERVER=none; exit 0; }
  sleep 0.2
done
echo SERVER=up
echo "NODE_ADDR=$(get "$slot" 2001:db8:c17::1)"
echo "GATEWAY=$(get "$slot" 2001:db8:c17:1::1)"
# An ICMPv6 echo to the gateway (no ping on every machine: a raw socket).
ip netns exec "$slot" python3 -c 'import socket, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
s.settimeout(3)
s.sendto(bytes([128, 0, 0, 0, 0, 1, 0, 1]) + b"vf", (sys.argv[1], 0))
while s.recvfrom(1500)[0][0] != 129:
    pass' 2001:db8:c17:1::1 2>/dev/null && echo PING=ok || echo PING=failed
echo "COUNTER=$(nft list table inet "$table" | grep -o 'counter packets [0-9]*' | head -n 1)"
nft delete table inet "$table"
echo "UNGUARDED=$(get "$slot" 2001:db8:c17::1)"
slots up >/dev/null 2>&1
echo "GUARDED_AGAIN=$(get "$slot" 2001:db8:c17::1)"
kill "$server"; server=
slots down >/dev/null 2>&1 && echo DOWN=ok || echo DOWN=failed
nft list tables | grep -q "$table" && echo TABLE=left || echo TABLE=gone
ip netns list | grep -q "^$slot\b" && echo SLOT=left || echo SLOT=gone
"#;

#[test]
fn slots_on_a_forwarding_node_reach_none_of_its_own_services() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIP: needs root (network namespaces, nftables)");
        return;
    }
    // viewer-slots.sh takes name prefixes of at most 8 characters: 4 hex digits of the pid.
    let tag = format!("vfh{:x}", std::process::id() % 0x10000);
    let node = NodeNs(format!("{tag}-node"));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("viewer-slots.sh"),
        viewerfleet::netns::slots::SLOT_SCRIPT,
    )
    .unwrap();
    run(&["ip", "netns", "add", &node.0]);
    let ns = node.0.as_str();
    run(&["ip", "-n", ns, "link", "set", "lo", "up"]);
    // The node's uplink: a veth pair inside the node (its far end stands for the provider).
    run(&[
        "ip", "-n", ns, "link", "add", "up0", "type", "veth", "peer", "name", "up0p",
    ]);
    run(&["ip", "-n", ns, "link", "set", "up0p", "up"]);
    run(&["ip", "-n", ns, "link", "set", "up0", "up"]);
    run(&[
        "ip",
        "-n",
        ns,
        "-6",
        "addr",
        "add",
        "2001:db8:c17::1/64",
        "dev",
        "up0",
        "nodad",
    ]);
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "bash", "-c", STEPS])
        .env("DIR", dir.path())
        .env("PREFIX", format!("{tag}-"))
        .env("VF_SLOTS_OWNER_DIR", dir.path().join("owner"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let why = format!("{text}\n{}", String::from_utf8_lossy(&out.stderr));
    let got: BTreeMap<&str, &str> = text.lines().filter_map(|l| l.split_once('=')).collect();
    let get = |k: &str| *got.get(k).unwrap_or(&"(missing)");
    assert_eq!(get("UP"), "ok", "{why}");
    assert_eq!(get("SERVER"), "up", "{why}");
    // From the slot: nothing of the node answers, at its own address or at the gateway.
    for key in ["NODE_ADDR", "GATEWAY", "GUARDED_AGAIN"] {
        assert!(get(key).contains("timed out"), "{key}: {why}");
    }
    assert_eq!(get("PING"), "ok", "ICMP passes: {why}");
    assert!(
        get("COUNTER").starts_with("counter packets ") && get("COUNTER") != "counter packets 0",
        "the guard counted the drops: {why}"
    );
    // Without the guard's table the same request is answered: the drop is the guard's.
    assert_eq!(get("UNGUARDED"), "200", "{why}");
    assert_eq!(get("DOWN"), "ok", "{why}");
    assert_eq!(get("TABLE"), "gone", "{why}");
    assert_eq!(get("SLOT"), "gone", "{why}");
}
