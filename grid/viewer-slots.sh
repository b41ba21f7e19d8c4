#!/usr/bin/env bash
# shellcheck disable=SC2015 # `check && check || die` is meant: die when either check fails
# shellcheck disable=SC2086 # $parent is a list of tc words
# viewer-slots.sh — viewer slots: network namespaces on one bridge, each with its own IPv6
# address from a prefix, a default route, and a link shaped in both directions with tc; on
# request behind an emulated home router, carrier-grade NAT or symmetric NAT.
# The one place that turns "a prefix and a count" into slots: viewerfleet's `netns` fleet
# runs it (embedded); a cloud node runs it from node-bootstrap.sh with a sub-prefix of its /64.
#
#   viewer-slots.sh up|down|status --prefix P --count N [--first I] [--name-prefix vf-]
#     [--down-kbit N --up-kbit N --delay-ms N] [--forwarding] [--uplink DEV] [--ndp-proxy]
#     [--ipv4 CIDR] [--resolv-conf FILE] [--nat none|home|cgnat|symmetric]
#     [--stack dual|ipv4|ipv6] [--alternate]
#
# Slot i: namespace <name-prefix><i>, veth <name-prefix><i>h on bridge <name-prefix>br <->
# eth0 inside, address <base>::<hex(i+2)>/<len>, default route via <base>::1 (on the bridge).
# P must not overlap another interface's addresses (a cloud node: <its /64>:1::/80).
# Shaping: tbf (else htb) on the bridge-side veth (download) and on the slot's eth0 (upload);
# --delay-ms (round trip) with netem when the kernel has it, else reported as not applied.
# Cloud node: --forwarding (IPv6, and IPv4 with --ipv4; the slots reach none of the node's
# own services, see host_guard); --uplink DEV: accept_ra 1 becomes 2
# (RAs still accepted with forwarding on) and the gateway address is deprecated (never the
# host's source); --ndp-proxy: answer NDP for the slots on DEV (providers with an on-link
# /64); --ipv4 CIDR: the bridge's IPv4 segment, the emulated internet's public IPv4 (slot
# .(i+2); with --forwarding the bridge holds .1 and NAT44s the range to the uplink);
# --resolv-conf FILE: becomes /etc/netns/<ns>/resolv.conf.
# --stack: the slot's address families [dual with --ipv4, else ipv6]. --nat (IPv4 NAT and
# IPv6 firewall of the slot's router, namespace <name-prefix><i>r between eth0 and the veth):
#   none       the slot is on the bridge with public addresses (the default)
#   home       NAT44 with endpoint-independent mapping and address- and port-dependent
#              filtering; an IPv6 stateful firewall drops unsolicited inbound traffic
#   symmetric  as home, but a new external port for every destination (address and port)
#   cgnat      a home router whose WAN (100.64.0.0/10) is behind one carrier-grade NAT
#              (namespace <name-prefix>cgn, bridge <name-prefix>cb) shared by every cgnat
#              slot, with the top address of --ipv4 as public address; no hairpinning
# A NATed slot's LAN is 192.168.1.0/24 (viewer .2, router .1) and its IPv6 address is routed
# through the router (default via fe80::1). --alternate (public slots): a second address
# (IPv4: the range's third-highest; IPv6: <base>::1:0), for a STUN server's changed address.
# `up` prints per slot: SLOT name= index= address= host_veth= down= up= delay= [ipv4=]
# nat= stack= [public_ipv4=] [alt_ipv4=] [alt_address=] (address=none without IPv6).
# `up` is idempotent: an intact slot made with the same settings is kept (browsers keep
# running), any other rebuilt. `down` removes slots, and the bridge once none is left.
# Owner record /run/viewerfleet/slots/<name-prefix>owner: $VF_SLOTS_OWNER (a PID) or "manual";
# `viewerfleet gc --local` removes slots whose owner PID is dead, never manual ones.
# `up` and `down` of one name prefix run one at a time (flock on <name-prefix>lock there).
# Needs root and iproute2 (ip, tc); nftables for --nat other than none.
set -euo pipefail

die() { echo "viewer-slots.sh: $*" >&2; exit 2; }

# The header above; cloud nodes get this script without comments (see cloudinit.rs).
usage() {
  awk 'NR > 2 && /^#/ { sub(/^# ?/, ""); print; next } NR > 2 { exit }' "$0" | grep . \
    || echo "usage: see grid/viewer-slots.sh in viewerfleet's repository (comments are not shipped to nodes)"
  exit 0
}
action="${1:-}"
[ $# -gt 0 ] && shift
case "$action" in -h|--help) usage ;; esac
prefix="" count="" first=0 down_kbit=0 up_kbit=0 delay_ms=0 name_prefix="vf-" forwarding=0
uplink="" ndp_proxy=0 ipv4="" resolv_conf="" nat=none stack="" alternate=0
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="${2:-}"; shift 2 ;;
    --count) count="${2:-}"; shift 2 ;;
    --first) first="${2:-}"; shift 2 ;;
    --down-kbit) down_kbit="${2:-}"; shift 2 ;;
    --up-kbit) up_kbit="${2:-}"; shift 2 ;;
    --delay-ms) delay_ms="${2:-}"; shift 2 ;;
    --name-prefix) name_prefix="${2:-}"; shift 2 ;;
    --forwarding) forwarding=1; shift ;;
    --uplink) uplink="${2:-}"; shift 2 ;;
    --ndp-proxy) ndp_proxy=1; shift ;;
    --ipv4) ipv4="${2:-}"; shift 2 ;;
    --resolv-conf) resolv_conf="${2:-}"; shift 2 ;;
    --nat) nat="${2:-}"; shift 2 ;;
    --stack) stack="${2:-}"; shift 2 ;;
    --alternate) alternate=1; shift ;;
    -h|--help) usage ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

case "$action" in up|down|status) ;; *) die "first argument must be up, down or status (got '${action}')" ;; esac
[ "$(id -u)" = 0 ] || die "must run as root (network namespaces and tc need CAP_NET_ADMIN); run with sudo"
command -v ip >/dev/null || die "'ip' not found: install iproute2 (apt-get install iproute2)"
command -v tc >/dev/null || die "'tc' not found: install iproute2 (apt-get install iproute2)"

isnum() { [[ "$1" =~ ^[0-9]+$ ]]; }
isnum "$count" && [ "$count" -ge 1 ] || die "--count must be a positive integer (got '${count}')"
isnum "$first" || die "--first must be a non-negative integer (got '${first}')"
for v in "$down_kbit" "$up_kbit" "$delay_ms"; do
  isnum "$v" || die "--down-kbit, --up-kbit and --delay-ms take non-negative integers (got '$v')"
done
[[ "$name_prefix" =~ ^[a-z][a-z0-9-]{0,7}$ ]] || die "--name-prefix must be 1-8 of [a-z0-9-], starting with a letter (got '${name_prefix}')"
last=$((first + count - 1))
[ "${#name_prefix}" -le 9 ] && [ $(( ${#name_prefix} + ${#last} + 1 )) -le 15 ] \
  || die "--name-prefix '${name_prefix}' with slot index ${last} makes interface names over 15 characters: use a shorter prefix"

# --prefix: an IPv6 prefix written with a trailing '::', e.g. fd00:5f::/64 or 2a01:4f8:1:2:1::/80.
[[ "$prefix" =~ ^([0-9a-fA-F:]+::)/([0-9]{2,3})$ ]] \
  || die "--prefix must be an IPv6 prefix ending in '::' with a length, e.g. fd00:5f::/64 (got '${prefix}')"
base="${BASH_REMATCH[1]}" plen="${BASH_REMATCH[2]}"
[ "$plen" -ge 48 ] && [ "$plen" -le 112 ] || die "--prefix length must be between /48 and /112 (got /${plen})"
[ $((last + 2)) -le 65535 ] || die "slot index ${last} does not fit the last group of the prefix (at most 65533)"
if [ -n "$uplink" ]; then
  [ -d "/proc/sys/net/ipv6/conf/${uplink}" ] || die "--uplink ${uplink}: no such interface"
fi
[ "$ndp_proxy" = 0 ] || [ -n "$uplink" ] || die "--ndp-proxy needs --uplink DEV"
[ -z "$resolv_conf" ] || [ -r "$resolv_conf" ] || die "--resolv-conf ${resolv_conf}: cannot read it"

case "$nat" in none|home|cgnat|symmetric) ;; *) die "--nat must be none, home, cgnat or symmetric (got '${nat}')" ;; esac
if [ -z "$stack" ]; then stack=ipv6; [ -z "$ipv4" ] || stack=dual; fi
case "$stack" in dual|ipv4|ipv6) ;; *) die "--stack must be dual, ipv4 or ipv6 (got '${stack}')" ;; esac
[ "$stack" = ipv6 ] || [ -n "$ipv4" ] || [ "$action" != up ] \
  || die "--stack ${stack} needs --ipv4 CIDR (the bridge's IPv4 segment)"
[ "$alternate" = 0 ] || [ "$nat" = none ] || die "--alternate is for slots with --nat none (a server's second address)"
[ "$alternate" = 0 ] || [ "$plen" -le 96 ] || die "--alternate needs a prefix of /96 or shorter (its IPv6 address is <base>::1:0)"
if [ "$nat" != none ] && [ "$action" = up ]; then
  command -v nft >/dev/null || die "--nat ${nat} needs nftables (apt-get install nftables)"
fi

v4_base=0 v4_len=0 v4_size=0
if [ -n "$ipv4" ]; then
  [[ "$ipv4" =~ ^([0-9]+)\.([0-9]+)\.([0-9]+)\.([0-9]+)/([0-9]+)$ ]] || die "--ipv4 must be A.B.C.D/LEN (got '${ipv4}')"
  v4_len="${BASH_REMATCH[5]}"
  [ "$v4_len" -ge 8 ] && [ "$v4_len" -le 30 ] || die "--ipv4 length must be between /8 and /30"
  v4_base=$(( (BASH_REMATCH[1] << 24 | BASH_REMATCH[2] << 16 | BASH_REMATCH[3] << 8 | BASH_REMATCH[4]) & ~((1 << (32 - v4_len)) - 1) & 0xffffffff ))
  v4_size=$(( 1 << (32 - v4_len) ))
  [ $((last + 2)) -lt $((v4_size - 1)) ] || die "--ipv4 ${ipv4} is too small for slot index ${last}"
  # The top two addresses below the broadcast are the CGN's and a server's alternate.
  if [ "$nat" = cgnat ] || [ "$alternate" = 1 ]; then
    [ $((last + 2)) -lt $((v4_size - 3)) ] || die "--ipv4 ${ipv4} is too small for slot index ${last} and the CGN's and alternate addresses"
  fi
fi
v4_addr() { local n=$((v4_base + $1)); echo "$((n >> 24 & 255)).$((n >> 16 & 255)).$((n >> 8 & 255)).$((n & 255))"; }
# Inside a carrier's network (RFC 6598 shared address space): CGN .1, slot i's router .(i+2).
carrier_addr() { local n=$(( (100 << 24 | 64 << 16) + $1 )); echo "$((n >> 24 & 255)).$((n >> 16 & 255)).$((n >> 8 & 255)).$((n & 255))"; }

bridge="${name_prefix}br"
gateway="${base}1"
# Queue of each rate limiter, in ms of traffic at the limit ($VF_SLOTS_QUEUE_MS).
queue_ms="${VF_SLOTS_QUEUE_MS:-300}"
isnum "$queue_ms" || die "VF_SLOTS_QUEUE_MS must be a number of milliseconds (got '${queue_ms}')"
owner_dir="${VF_SLOTS_OWNER_DIR:-/run/viewerfleet/slots}"
owner_file="${owner_dir}/${name_prefix}owner"
nft_table="viewerfleet_${name_prefix//-/_}"
slot_ns() { echo "${name_prefix}$1"; }
slot_veth() { echo "${name_prefix}$1h"; }
router_ns() { echo "${name_prefix}$1r"; }
slot_addr() { printf '%s%x' "$base" $(( $1 + 2 )); }
# The carrier-grade NAT shared by every cgnat slot: its namespace, its access bridge (the
# carrier's network) and the root-side ends of its outside and inside veths.
cgn_ns="${name_prefix}cgn" cgn_bridge="${name_prefix}cb" cgn_out="${name_prefix}co" cgn_in="${name_prefix}ci"
cgn_public() { v4_addr $((v4_size - 2)); }
alt_v4() { v4_addr $((v4_size - 3)); }
alt_v6="${base}1:0"
# Every home LAN: viewer .2 behind router .1; IPv6 routed through the router's fe80::1.
lan_router="192.168.1.1" lan_viewer="192.168.1.2"
# A slot is kept only if made with the same.
signature="prefix=${prefix} ipv4=${ipv4} down=${down_kbit} up=${up_kbit} delay=${delay_ms} queue=${queue_ms} nat=${nat} stack=${stack} alternate=${alternate}"

# rate_qdisc DEV KBIT [NS]: rate-limit DEV's egress; prints what was applied.
rate_qdisc() {
  local dev="$1" kbit="$2" ns="${3:-}" burst
  local -a run=()
  [ -n "$ns" ] && run=(ip netns exec "$ns")
  if [ "$kbit" -eq 0 ]; then echo none; return; fi
  # Burst: 20 ms worth of bytes, at least two full-size frames.
  burst=$(( kbit * 1000 / 8 / 50 )); [ "$burst" -lt 3200 ] && burst=3200
  # Rates count IP packets: the size table takes the veth's 14-byte Ethernet header off.
  local parent="root stab overhead -14 linklayer ethernet"
  if [ "$delay_ms" -gt 0 ] && "${run[@]}" tc qdisc add dev "$dev" $parent handle 1: netem delay "$((delay_ms / 2))ms" 2>/dev/null; then
    parent="parent 1:1"
  fi
  if "${run[@]}" tc qdisc add dev "$dev" $parent handle 10: tbf rate "${kbit}kbit" burst "$burst" latency "${queue_ms}ms" 2>/dev/null; then
    echo "tbf:${kbit}kbit"
  elif "${run[@]}" tc qdisc add dev "$dev" $parent handle 10: htb default 1 2>/dev/null \
    && "${run[@]}" tc class add dev "$dev" parent 10: classid 10:1 htb rate "${kbit}kbit" ceil "${kbit}kbit" burst "$burst" 2>/dev/null; then
    echo "htb:${kbit}kbit"
  else
    die "neither tbf nor htb could shape ${dev}: the kernel lacks sch_tbf and sch_htb"
  fi
}

# delay_state DEV [NS]: what delay DEV has (after rate_qdisc, or alone when no rate).
delay_state() {
  local dev="$1" ns="${2:-}"
  local -a run=()
  [ -n "$ns" ] && run=(ip netns exec "$ns")
  if [ "$delay_ms" -eq 0 ]; then echo none; return; fi
  if "${run[@]}" tc qdisc show dev "$dev" | grep -q netem; then echo "netem:$((delay_ms / 2))ms"; return; fi
  if "${run[@]}" tc qdisc add dev "$dev" root netem delay "$((delay_ms / 2))ms" 2>/dev/null; then
    echo "netem:$((delay_ms / 2))ms"
  else
    echo "not-applied(netem-missing)"
  fi
}

ns_exists() { ip netns list | awk '{print $1}' | grep -qx "$1"; }

# The bridge a slot's veth is a port of: the carrier's for cgnat slots.
slot_bridge() { if [ "$nat" = cgnat ]; then echo "$cgn_bridge"; else echo "$bridge"; fi; }

# slot_intact I: the slot exists, is wired to its bridge and was made with this signature.
slot_intact() {
  local ns veth sig
  ns="$(slot_ns "$1")" veth="$(slot_veth "$1")" sig="${owner_dir}/${ns}.slot"
  [ "$adopted" = 0 ] && ns_exists "$ns" && [ -f "$sig" ] && [ "$(head -n1 "$sig")" = "$signature" ] \
    && ip -o link show "$veth" 2>/dev/null | grep -q "master $(slot_bridge) " \
    && ip netns exec "$ns" ip -o link show eth0 2>/dev/null | grep -q 'state UP' \
    && { [ "$nat" = none ] || ns_exists "$(router_ns "$1")"; } \
    && { [ "$nat" != cgnat ] || cgn_intact; }
}

# Re-applied on every `up`, kept slots included.
slot_extras() {
  local ns="$1" addr="$2"
  if [ "$ndp_proxy" = 1 ] && [ "$stack" != ipv4 ]; then ip -6 neigh replace proxy "$addr" dev "$uplink"; fi
  if [ -n "$resolv_conf" ]; then
    mkdir -p "/etc/netns/${ns}"
    cp "$resolv_conf" "/etc/netns/${ns}/resolv.conf"
  fi
}

# mac NS DEV: DEV's link-layer address in NS; empty when it is gone.
mac() { { ip -n "$1" -br link show "$2" 2>/dev/null || true; } | awk '{print $3}'; }

# The firewall and NAT of a router namespace (nftables are per namespace: they go with it).
# IPv4 leaving wan0 is masqueraded: without flags Linux keeps a source's mapping for every
# destination (endpoint-independent); fully-random picks a new port per connection
# (endpoint-dependent: symmetric). Inbound, only replies to what the inside sent pass
# (address- and port-dependent filtering, IPv4 and IPv6 alike). Unsolicited packets to the
# router itself are dropped before conntrack confirms them, so they never take a port a
# mapping would keep. $2: the inside source range that is NATed (empty: any).
router_rules() {
  local ns="$1" inside="${2:-}" flags="" v6_forward=""
  [ "$nat" != symmetric ] || flags=" fully-random"
  [ -z "$inside" ] || inside=" ip saddr ${inside}"
  # The CGN routes IPv6 as carriers do; the customer's router behind it firewalls it.
  [ "$ns" != "$cgn_ns" ] || v6_forward=$'\n    meta nfproto ipv6 accept'
  ip netns exec "$ns" nft -f - <<EOF
table inet viewerfleet {
  chain postrouting {
    type nat hook postrouting priority srcnat; policy accept;
    oifname "wan0" meta nfproto ipv4${inside} masquerade${flags}
  }
  chain forward {
    type filter hook forward priority filter; policy drop;
    ct state established,related accept
    iifname "lan0" accept${v6_forward}
  }
  chain input {
    type filter hook input priority filter; policy accept;
    iifname "wan0" ct state established,related accept
    iifname "wan0" meta l4proto ipv6-icmp accept
    iifname "wan0" drop
  }
}
EOF
}

# A router-like namespace: forwarding, no DAD, proxy NDP.
router_sysctls() {
  ip netns exec "$1" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1 \
    net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0 net.ipv6.conf.all.proxy_ndp=1 \
    net.ipv6.conf.default.proxy_ndp=1 >/dev/null
}

cgn_intact() {
  ns_exists "$cgn_ns" && ip -o link show "$cgn_out" 2>/dev/null | grep -q "master ${bridge} " \
    && ip -o link show "$cgn_in" 2>/dev/null | grep -q "master ${cgn_bridge} "
}

# The carrier-grade NAT: outside on the bridge (the top address of --ipv4), inside on the
# carrier's bridge (100.64.0.1/10, fe80::1). Made with the first cgnat slot.
cgn_up() {
  cgn_intact && return 0
  cgn_down
  ip netns add "$cgn_ns"
  router_sysctls "$cgn_ns"
  ip link add "$cgn_bridge" type bridge
  ip link set "$cgn_bridge" type bridge stp_state 0 forward_delay 0 2>/dev/null || true
  sysctl -qw "net.ipv6.conf.${cgn_bridge}.disable_ipv6=1" >/dev/null 2>&1 || true
  ip link set "$cgn_bridge" up
  ip link add "$cgn_out" type veth peer name wan0 netns "$cgn_ns"
  ip link add "$cgn_in" type veth peer name lan0 netns "$cgn_ns"
  local port
  for port in "$cgn_out" "$cgn_in"; do
    sysctl -qw "net.ipv6.conf.${port}.disable_ipv6=1" >/dev/null 2>&1 || true
  done
  ip link set "$cgn_out" master "$bridge" up
  ip link set "$cgn_in" master "$cgn_bridge" up
  ip -n "$cgn_ns" link set lo up
  ip -n "$cgn_ns" link set wan0 up
  ip -n "$cgn_ns" link set lan0 up
  ip -n "$cgn_ns" -6 addr add fe80::1/64 dev lan0 nodad
  ip -n "$cgn_ns" -6 route add "${base}/${plen}" dev wan0
  ip -n "$cgn_ns" -6 route add default via "$gateway" dev wan0
  if [ -n "$ipv4" ]; then
    ip -n "$cgn_ns" addr add "$(cgn_public)/${v4_len}" dev wan0
    ip -n "$cgn_ns" route add default via "$(v4_addr 1)" dev wan0
    ip -n "$cgn_ns" addr add "$(carrier_addr 1)/10" dev lan0
  fi
  router_rules "$cgn_ns" 100.64.0.0/10
}

cgn_down() {
  ip netns pids "$cgn_ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  ip link del "$cgn_out" 2>/dev/null || true
  ip link del "$cgn_in" 2>/dev/null || true
  ip link del "$cgn_bridge" 2>/dev/null || true
  ip netns del "$cgn_ns" 2>/dev/null || true
}

# A public slot: eth0 on the bridge with the slot's own addresses.
public_slot() {
  local i="$1" ns="$2" veth="$3" addr="$4"
  ip link add "$veth" type veth peer name eth0 netns "$ns"
  # No IPv6 on a bridge port (no link-local, no fe80::/64 route per port).
  sysctl -qw "net.ipv6.conf.${veth}.disable_ipv6=1" >/dev/null 2>&1 || true
  ip link set "$veth" master "$bridge" up
  ip netns exec "$ns" ip link set lo up
  if [ "$stack" != ipv4 ]; then
    ip netns exec "$ns" ip -6 addr add "${addr}/${plen}" dev eth0 nodad
    [ "$alternate" = 0 ] || ip netns exec "$ns" ip -6 addr add "${alt_v6}/${plen}" dev eth0 nodad
  fi
  ip netns exec "$ns" ip link set eth0 up
  [ "$stack" = ipv4 ] || ip netns exec "$ns" ip -6 route add default via "$gateway" dev eth0
  if [ "$stack" != ipv6 ]; then
    ip netns exec "$ns" ip -4 addr add "$(v4_addr $((i + 2)))/${v4_len}" dev eth0
    [ "$alternate" = 0 ] || ip netns exec "$ns" ip -4 addr add "$(alt_v4)/${v4_len}" dev eth0
    ip netns exec "$ns" ip -4 route add default via "$(v4_addr 1)" dev eth0
  fi
}

# A slot behind its own router: slot eth0 <-> lan0 (router) wan0 <-> veth on the bridge
# (the carrier's for cgnat).
routed_slot() {
  local i="$1" ns="$2" veth="$3" addr="$4" rns
  rns="$(router_ns "$i")"
  [ "$nat" != cgnat ] || cgn_up
  ip netns add "$rns"
  router_sysctls "$rns"
  ip link add "$veth" type veth peer name wan0 netns "$rns"
  sysctl -qw "net.ipv6.conf.${veth}.disable_ipv6=1" >/dev/null 2>&1 || true
  ip link set "$veth" master "$(slot_bridge)" up
  ip -n "$rns" link add lan0 type veth peer name eth0 netns "$ns"
  ip -n "$rns" link set lo up
  ip -n "$rns" link set wan0 up
  ip -n "$rns" link set lan0 up
  ip netns exec "$ns" ip link set lo up
  ip netns exec "$ns" ip link set eth0 up
  if [ "$stack" != ipv4 ]; then
    ip -n "$ns" -6 addr add "${addr}/128" dev eth0 nodad
    ip -n "$ns" -6 route add default via fe80::1 dev eth0
    ip -n "$rns" -6 addr add fe80::1/64 dev lan0 nodad
    ip -n "$rns" -6 route add "${addr}/128" dev lan0
    ip -n "$rns" -6 neigh add proxy "$addr" dev wan0
    if [ "$nat" = cgnat ]; then
      ip -n "$rns" -6 route add default via fe80::1 dev wan0
      ip -n "$cgn_ns" -6 route replace "${addr}/128" dev lan0
      ip -n "$cgn_ns" -6 neigh replace proxy "$addr" dev wan0
    else
      ip -n "$rns" -6 route add "${base}/${plen}" dev wan0
      ip -n "$rns" -6 route add default via "$gateway" dev wan0
    fi
  fi
  if [ "$stack" != ipv6 ]; then
    ip -n "$ns" addr add "${lan_viewer}/24" dev eth0
    ip -n "$ns" route add default via "$lan_router" dev eth0
    ip -n "$rns" addr add "${lan_router}/24" dev lan0
    if [ "$nat" = cgnat ]; then
      ip -n "$rns" addr add "$(carrier_addr $((i + 2)))/10" dev wan0
      ip -n "$rns" route add default via "$(carrier_addr 1)" dev wan0
    else
      ip -n "$rns" addr add "$(v4_addr $((i + 2)))/${v4_len}" dev wan0
      ip -n "$rns" route add default via "$(v4_addr 1)" dev wan0
    fi
  fi
  router_rules "$rns"
  # The home link's own neighbours, pinned like the bridge's (see pin_neighbours).
  local smac rmac
  smac="$(mac "$ns" eth0)" rmac="$(mac "$rns" lan0)"
  pin_lines "$rmac" eth0 fe80::1 "$lan_router" | ip -n "$ns" -force -batch - 2>/dev/null || true
  pin_lines "$smac" lan0 "$addr" "$lan_viewer" | ip -n "$rns" -force -batch - 2>/dev/null || true
}

# member_line I ADDR: how the slot appears on its bridge (MEMBER main|cgn NS DEV ADDR...):
# the namespace and interface there, and the addresses its neighbours reach through it.
member_line() {
  local i="$1" addr="$2" kind=main ns dev=eth0 addrs=()
  ns="$(slot_ns "$i")"
  [ "$stack" = ipv4 ] || addrs+=("$addr")
  if [ "$nat" = none ]; then
    [ "$stack" = ipv6 ] || addrs+=("$(v4_addr $((i + 2)))")
    if [ "$alternate" = 1 ]; then
      [ "$stack" = ipv4 ] || addrs+=("$alt_v6")
      [ "$stack" = ipv6 ] || addrs+=("$(alt_v4)")
    fi
  else
    ns="$(router_ns "$i")" dev=wan0
    if [ "$nat" = cgnat ]; then
      kind=cgn
      [ "$stack" = ipv6 ] || addrs+=("$(carrier_addr $((i + 2)))")
    else
      [ "$stack" = ipv6 ] || addrs+=("$(v4_addr $((i + 2)))")
    fi
  fi
  echo "MEMBER ${kind} ${ns} ${dev} ${addrs[*]}"
}

slot_up() {
  local i="$1" ns veth addr down up d1 d2 line v4="" public=""
  ns="$(slot_ns "$i")" veth="$(slot_veth "$i")" addr="$(slot_addr "$i")"
  if slot_intact "$i"; then
    slot_extras "$ns" "$addr"
    sed -n 2p "${owner_dir}/${ns}.slot"
    return
  fi
  # Missing, damaged or made with other settings: rebuilt (its browsers are stopped).
  slot_down "$i"
  ip netns add "$ns"
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0 >/dev/null 2>&1 || true
  if [ "$stack" = ipv4 ]; then
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 >/dev/null
  fi
  if [ "$nat" = none ]; then
    public_slot "$i" "$ns" "$veth" "$addr"
    [ "$stack" = ipv6 ] || v4="$(v4_addr $((i + 2)))" public="$v4"
  else
    routed_slot "$i" "$ns" "$veth" "$addr"
    if [ "$stack" != ipv6 ]; then
      v4="$lan_viewer" public="$(v4_addr $((i + 2)))"
      [ "$nat" != cgnat ] || public="$(cgn_public)"
    fi
  fi
  down="$(rate_qdisc "$veth" "$down_kbit")"
  up="$(rate_qdisc eth0 "$up_kbit" "$ns")"
  d1="$(delay_state "$veth")"
  d2="$(delay_state eth0 "$ns")"
  local delay="$d1" shown_addr="$addr"
  [ "$d1" != "$d2" ] && delay="down:${d1},up:${d2}"
  [ "$stack" != ipv4 ] || shown_addr=none
  line="SLOT name=${ns} index=${i} address=${shown_addr} host_veth=${veth} down=${down} up=${up} delay=${delay}"
  [ -n "$v4" ] && line="${line} ipv4=${v4}"
  line="${line} nat=${nat} stack=${stack}"
  [ -z "$public" ] || line="${line} public_ipv4=${public}"
  if [ "$alternate" = 1 ]; then
    [ "$stack" = ipv6 ] || line="${line} alt_ipv4=$(alt_v4)"
    [ "$stack" = ipv4 ] || line="${line} alt_address=${alt_v6}"
  fi
  slot_extras "$ns" "$addr"
  printf '%s\n%s\n%s\n' "$signature" "$line" "$(member_line "$i" "$addr")" > "${owner_dir}/${ns}.slot"
  echo "$line"
}

slot_down() {
  local i="$1" ns veth rns
  ns="$(slot_ns "$i")" veth="$(slot_veth "$i")" rns="$(router_ns "$i")"
  # Browsers still running in the slot (a crashed driver leaves them) go first.
  ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  # Deleting the bridge-side veth removes its peer and both qdiscs.
  ip link del "$veth" 2>/dev/null || true
  ip netns del "$rns" 2>/dev/null || true
  ip neigh del "$(slot_addr "$i")" dev "$bridge" 2>/dev/null || true
  [ -z "$ipv4" ] || ip neigh del "$(v4_addr $((i + 2)))" dev "$bridge" 2>/dev/null || true
  if ns_exists "$cgn_ns"; then
    ip -n "$cgn_ns" -6 neigh del proxy "$(slot_addr "$i")" dev wan0 2>/dev/null || true
    ip -n "$cgn_ns" -6 route del "$(slot_addr "$i")/128" 2>/dev/null || true
  fi
  ip netns del "$ns" 2>/dev/null || true
  if [ -n "$uplink" ] && [ "$ndp_proxy" = 1 ]; then
    ip -6 neigh del proxy "$(slot_addr "$i")" dev "$uplink" 2>/dev/null || true
  fi
  rm -f "${owner_dir}/${ns}.slot" "/etc/netns/${ns}/resolv.conf"
  rmdir "/etc/netns/${ns}" 2>/dev/null || true
}

# Every member's and the gateway's link-layer address, written as permanent neighbour
# entries in each member of a bridge and, for the main bridge, on the bridge itself (IPv6,
# and IPv4 with --ipv4). ARP and NDP would otherwise cross the same tail-drop queues as the
# traffic: on a full link dropped ARP replies failed a slot's first IPv4 connection, and
# unanswered probes of a busy peer would cut it off for seconds. A real viewer's link is
# shaped behind its router, never its neighbour lookups. Members: public slots (eth0),
# routers (wan0; the addresses of the slot behind them), the CGN (outside: its public
# address and the IPv6 addresses of the slots behind it; inside: fe80::1 and 100.64.0.1).
pin_neighbours() {
  local rec ns idx br_mac host="" kind mns dev addrs m
  local -a main=() carrier=() cgn_v6=()
  br_mac="$(cat "/sys/class/net/${bridge}/address")"
  # Set once by hand, a bridge keeps its address; left alone it takes its ports' lowest
  # one, and would change under the pinned entries as slots come and go.
  ip link set "$bridge" address "$br_mac"
  for rec in "${owner_dir}/${name_prefix}"*.slot; do
    [ -f "$rec" ] || continue
    ns="$(basename "$rec" .slot)" idx="${ns#"$name_prefix"}"
    isnum "$idx" && ns_exists "$ns" || continue
    kind="" mns="" dev="" addrs=""
    read -r _ kind mns dev addrs < <(sed -n 3p "$rec") || true
    # Records of an earlier version have no member line: a public slot with its address.
    [ -n "${kind:-}" ] || { kind=main mns="$ns" dev=eth0 addrs="$(slot_addr "$idx")"; [ -z "$ipv4" ] || addrs+=" $(v4_addr $((idx + 2)))"; }
    m="$(mac "$mns" "$dev")"
    [ -n "$m" ] || continue
    if [ "$kind" = cgn ]; then
      carrier+=("${mns} ${dev} ${m} ${addrs}")
      for a in $addrs; do [[ "$a" != *:* ]] || cgn_v6+=("$a"); done
    else
      main+=("${mns} ${dev} ${m} ${addrs}")
    fi
  done
  if ns_exists "$cgn_ns"; then
    local pub=""
    [ -z "$ipv4" ] || pub="$(cgn_public)"
    main+=("${cgn_ns} wan0 $(mac "$cgn_ns" wan0) ${pub} ${cgn_v6[*]}")
    carrier+=("${cgn_ns} lan0 $(mac "$cgn_ns" lan0) fe80::1 $(carrier_addr 1)")
  fi
  local k j lines words
  for k in "${!main[@]}"; do
    read -r -a words <<<"${main[k]}"
    host+="$(pin_lines "${words[2]}" "$bridge" "${words[@]:3}")"$'\n'
  done
  [ -z "$host" ] || ip -force -batch - <<<"${host%$'\n'}" 2>/dev/null || true
  pin_members "$br_mac" main "${main[@]}"
  pin_members "" carrier "${carrier[@]}"
}

# pin_members GATEWAY_MAC KIND MEMBER...: each member learns every other member's addresses
# (and, on the main bridge, the gateway's).
pin_members() {
  local gw_mac="$1" kind="$2" k j lines
  shift 2
  local -a members=("$@") me other
  for k in "${!members[@]}"; do
    read -r -a me <<<"${members[k]}"
    lines=""
    if [ "$kind" = main ]; then
      lines="$(pin_lines "$gw_mac" "${me[1]}" "$gateway" ${ipv4:+$(v4_addr 1)})"
    fi
    for j in "${!members[@]}"; do
      [ "$j" = "$k" ] && continue
      read -r -a other <<<"${members[j]}"
      [ "${#other[@]}" -gt 3 ] || continue
      lines+=$'\n'"$(pin_lines "${other[2]}" "${me[1]}" "${other[@]:3}")"
    done
    # A member without one of the families (an IPv4-only slot) refuses those lines alone.
    ip -n "${me[0]}" -force -batch - <<<"$lines" 2>/dev/null || true
  done
}

# pin_lines MAC DEV ADDR...: `ip -batch` lines that pin the addresses to MAC on DEV.
pin_lines() {
  local m="$1" dev="$2" a
  shift 2
  for a in "$@"; do
    [ -n "$a" ] && echo "neigh replace ${a} lladdr ${m} dev ${dev} nud permanent"
  done
  return 0
}

remaining_slots() {
  # Slots' interfaces still enslaved to the bridge (the CGN's outside is not a slot).
  { ip -o link show master "$bridge" 2>/dev/null || true; } | { grep -v -E "^[0-9]+: ${cgn_out}[@:]" || true; } | wc -l
}

# NAT44 for the slots' IPv4 range (nftables).
nat44() {
  command -v nft >/dev/null || die "--ipv4 with --forwarding needs nftables (apt-get install nftables)"
  nft delete table ip "$nft_table" 2>/dev/null || true
  [ "$1" = add ] || return 0
  nft -f - <<EOF
table ip ${nft_table} {
  chain postrouting {
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr ${ipv4} oifname != "${bridge}" masquerade
  }
}
EOF
}

# With --forwarding (a cloud node) the slots reach the internet through this host, but none
# of the host's own services (the Grid node, its load endpoint, SSH, anything else it
# listens on, at any of its addresses): what comes from the bridge to the host itself is
# dropped, but for replies, ICMP (neighbour discovery) and DNS.
host_guard() {
  command -v nft >/dev/null || { echo "viewer-slots: nftables is missing: the slots can reach this host's own services" >&2; return 0; }
  nft delete table inet "${nft_table}_guard" 2>/dev/null || true
  [ "$1" = add ] || return 0
  nft -f - <<EOF
table inet ${nft_table}_guard {
  chain input {
    type filter hook input priority filter; policy accept;
    iifname "${bridge}" ct state established,related accept
    iifname "${bridge}" meta l4proto { icmp, ipv6-icmp } accept
    iifname "${bridge}" meta l4proto { tcp, udp } th dport 53 accept
    iifname "${bridge}" counter drop
  }
}
EOF
}

# One `up` or `down` of a group at a time: a fleet makes and removes slots as viewers come
# and go, and an `up` reading its neighbours' interfaces while a `down` deletes them, or a
# `down` removing the bridge an `up` is about to use, would fail it. The lock file is
# removed with the group; a waiter that got the lock on a removed file takes it again.
lock_group() {
  local lock="${owner_dir}/${name_prefix}lock"
  command -v flock >/dev/null || return 0
  mkdir -p "$owner_dir"
  while :; do
    exec 9>>"$lock"
    flock 9
    [ "$(stat -c %i "$lock" 2>/dev/null)" = "$(stat -L -c %i /proc/self/fd/9)" ] && return 0
    exec 9>&-
  done
}
[ "$action" = status ] || lock_group

case "$action" in
  up)
    mkdir -p "$owner_dir"
    # Slots of another run that is still alive are never touched; those of a dead owner are
    # taken over and rebuilt (not kept: their processes are not ours).
    owner="${VF_SLOTS_OWNER:-manual}" adopted=0
    previous="$(cat "$owner_file" 2>/dev/null || true)"
    if [ -n "$previous" ] && [ "$previous" != "$owner" ]; then
      if isnum "$previous" && [ -d "/proc/${previous}" ]; then
        die "slots ${name_prefix}* belong to a running viewerfleet (PID ${previous}): use another --name-prefix"
      fi
      adopted=1
    fi
    echo "$owner" > "$owner_file"
    net_file="${owner_dir}/${name_prefix}net"
    if ! ip link show "$bridge" >/dev/null 2>&1; then
      ip link add "$bridge" type bridge
      ip link set "$bridge" type bridge stp_state 0 forward_delay 0 2>/dev/null || true
      sysctl -qw "net.ipv6.conf.${bridge}.accept_dad=0" >/dev/null 2>&1 || true
      ip link set "$bridge" up
    elif [ "$(cat "$net_file" 2>/dev/null)" != "${prefix} ${ipv4}" ]; then
      # Made for another prefix: the old gateway goes.
      ip addr flush dev "$bridge" scope global
    fi
    echo "${prefix} ${ipv4}" > "$net_file"
    lft=(); [ -n "$uplink" ] && lft=(preferred_lft 0)
    ip -6 addr replace "${gateway}/${plen}" dev "$bridge" nodad "${lft[@]}"
    # The IPv4 gateway is the host's only where it forwards (a cloud node): otherwise the
    # bridge is the emulated internet and the root namespace takes no part in it.
    [ -z "$ipv4" ] || [ "$forwarding" = 0 ] || ip -4 addr replace "$(v4_addr 1)/${v4_len}" dev "$bridge"
    if [ "$forwarding" = 1 ]; then
      if [ -n "$uplink" ] && [ "$(cat "/proc/sys/net/ipv6/conf/${uplink}/accept_ra")" = 1 ]; then
        sysctl -qw "net.ipv6.conf.${uplink}.accept_ra=2"
      fi
      sysctl -qw net.ipv6.conf.all.forwarding=1
      host_guard add
      if [ -n "$ipv4" ]; then
        sysctl -qw net.ipv4.ip_forward=1
        nat44 add
      fi
    fi
    if [ "$ndp_proxy" = 1 ]; then
      sysctl -qw net.ipv6.conf.all.proxy_ndp=1 "net.ipv6.conf.${uplink}.proxy_ndp=1"
    fi
    for i in $(seq "$first" "$last"); do
      if ! slot_up "$i"; then
        slot_down "$i"
        die "slot ${i} could not be set up (see the error above); slots already up stay up until 'down'"
      fi
    done
    pin_neighbours
    ;;
  down)
    for i in $(seq "$first" "$last"); do slot_down "$i"; done
    if ip link show "$bridge" >/dev/null 2>&1 && [ "$(remaining_slots)" -eq 0 ]; then
      cgn_down
      ip link del "$bridge" 2>/dev/null || true
      [ -z "$ipv4" ] || ! command -v nft >/dev/null || nat44 del
      [ "$forwarding" = 0 ] || host_guard del
    fi
    if ! ip link show "$bridge" >/dev/null 2>&1; then
      cgn_down
      rm -f "$owner_file" "${owner_dir}/${name_prefix}net" "${owner_dir}/${name_prefix}lock"
    fi
    ;;
  status)
    for i in $(seq "$first" "$last"); do
      ns="$(slot_ns "$i")"
      if ns_exists "$ns"; then
        echo "SLOT name=${ns} index=${i} address=$(slot_addr "$i") state=up"
      else
        echo "SLOT name=${ns} index=${i} state=absent"
      fi
    done
    ;;
esac
