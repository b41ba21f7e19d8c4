#!/usr/bin/env bash
# shellcheck disable=SC2015 # `check && check || die` is meant: die when either check fails
# shellcheck disable=SC2086 # $parent is a list of tc words
# viewer-slots.sh — viewer slots: network namespaces on one bridge, each with its own IPv6
# address from a prefix, a default route, and a link shaped in both directions with tc.
# The one place that turns "a prefix and a count" into slots: viewerfleet's `netns` fleet
# runs it (embedded); a cloud node runs it from node-bootstrap.sh with a sub-prefix of its /64.
#
#   viewer-slots.sh up|down|status --prefix P --count N [--first I] [--name-prefix vf-]
#     [--down-kbit N --up-kbit N --delay-ms N] [--forwarding] [--uplink DEV] [--ndp-proxy]
#     [--ipv4 CIDR] [--resolv-conf FILE]
#
# Slot i: namespace <name-prefix><i>, veth <name-prefix><i>h on bridge <name-prefix>br <->
# eth0 inside, address <base>::<hex(i+2)>/<len>, default route via <base>::1 (on the bridge).
# P must not overlap another interface's addresses (a cloud node: <its /64>:1::/80).
# Shaping: tbf (else htb) on the bridge-side veth (download) and on the slot's eth0 (upload);
# --delay-ms (round trip) with netem when the kernel has it, else reported as not applied.
# Cloud node: --forwarding (IPv6, and IPv4 with --ipv4); --uplink DEV: accept_ra 1 becomes 2
# (RAs still accepted with forwarding on) and the gateway address is deprecated (never the
# host's source); --ndp-proxy: answer NDP for the slots on DEV (providers with an on-link
# /64); --ipv4 CIDR: an IPv4 address too (bridge .1, slot .(i+2)), NAT44 with nftables when
# forwarding; --resolv-conf FILE: becomes /etc/netns/<ns>/resolv.conf.
# `up` prints per slot: SLOT name= index= address= host_veth= down= up= delay= [ipv4=]
# `up` is idempotent: an intact slot made with the same settings is kept (browsers keep
# running), any other rebuilt. `down` removes slots, and the bridge once none is left.
# Owner record /run/viewerfleet/slots/<name-prefix>owner: $VF_SLOTS_OWNER (a PID) or "manual";
# `viewerfleet gc --local` removes slots whose owner PID is dead, never manual ones.
# Needs root and iproute2 (ip, tc).
set -euo pipefail

die() { echo "viewer-slots.sh: $*" >&2; exit 2; }

usage() { sed -n '4,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
action="${1:-}"
[ $# -gt 0 ] && shift
case "$action" in -h|--help) usage ;; esac
prefix="" count="" first=0 down_kbit=0 up_kbit=0 delay_ms=0 name_prefix="vf-" forwarding=0
uplink="" ndp_proxy=0 ipv4="" resolv_conf=""
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

v4_base=0 v4_len=0
if [ -n "$ipv4" ]; then
  [[ "$ipv4" =~ ^([0-9]+)\.([0-9]+)\.([0-9]+)\.([0-9]+)/([0-9]+)$ ]] || die "--ipv4 must be A.B.C.D/LEN (got '${ipv4}')"
  v4_len="${BASH_REMATCH[5]}"
  [ "$v4_len" -ge 8 ] && [ "$v4_len" -le 30 ] || die "--ipv4 length must be between /8 and /30"
  v4_base=$(( (BASH_REMATCH[1] << 24 | BASH_REMATCH[2] << 16 | BASH_REMATCH[3] << 8 | BASH_REMATCH[4]) & ~((1 << (32 - v4_len)) - 1) & 0xffffffff ))
  [ $((last + 2)) -lt $(( (1 << (32 - v4_len)) - 1 )) ] || die "--ipv4 ${ipv4} is too small for slot index ${last}"
fi
v4_addr() { local n=$((v4_base + $1)); echo "$((n >> 24 & 255)).$((n >> 16 & 255)).$((n >> 8 & 255)).$((n & 255))"; }

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
slot_addr() { printf '%s%x' "$base" $(( $1 + 2 )); }
# A slot is kept only if made with the same.
signature="prefix=${prefix} ipv4=${ipv4} down=${down_kbit} up=${up_kbit} delay=${delay_ms} queue=${queue_ms}"

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

# slot_intact I: the slot exists, is wired to the bridge and was made with this signature.
slot_intact() {
  local ns veth sig
  ns="$(slot_ns "$1")" veth="$(slot_veth "$1")" sig="${owner_dir}/${ns}.slot"
  [ "$adopted" = 0 ] && ns_exists "$ns" && [ -f "$sig" ] && [ "$(head -n1 "$sig")" = "$signature" ] \
    && ip -o link show "$veth" 2>/dev/null | grep -q "master ${bridge} " \
    && ip netns exec "$ns" ip -o link show eth0 2>/dev/null | grep -q 'state UP'
}

# Re-applied on every `up`, kept slots included.
slot_extras() {
  local ns="$1" addr="$2"
  if [ "$ndp_proxy" = 1 ]; then ip -6 neigh replace proxy "$addr" dev "$uplink"; fi
  if [ -n "$resolv_conf" ]; then
    mkdir -p "/etc/netns/${ns}"
    cp "$resolv_conf" "/etc/netns/${ns}/resolv.conf"
  fi
}

slot_up() {
  local i="$1" ns veth addr down up d1 d2 line v4=""
  ns="$(slot_ns "$i")" veth="$(slot_veth "$i")" addr="$(slot_addr "$i")"
  if slot_intact "$i"; then
    slot_extras "$ns" "$addr"
    sed -n 2p "${owner_dir}/${ns}.slot"
    return
  fi
  # Missing, damaged or made with other settings: rebuilt (its browsers are stopped).
  slot_down "$i"
  ip netns add "$ns"
  ip link add "$veth" type veth peer name eth0 netns "$ns"
  # No IPv6 on a bridge port (no link-local, no fe80::/64 route per port).
  sysctl -qw "net.ipv6.conf.${veth}.disable_ipv6=1" >/dev/null 2>&1 || true
  ip link set "$veth" master "$bridge" up
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0 >/dev/null 2>&1 || true
  ip netns exec "$ns" ip link set lo up
  ip netns exec "$ns" ip -6 addr add "${addr}/${plen}" dev eth0 nodad
  ip netns exec "$ns" ip link set eth0 up
  ip netns exec "$ns" ip -6 route add default via "$gateway" dev eth0
  if [ -n "$ipv4" ]; then
    v4="$(v4_addr $((i + 2)))"
    ip netns exec "$ns" ip -4 addr add "${v4}/${v4_len}" dev eth0
    ip netns exec "$ns" ip -4 route add default via "$(v4_addr 1)" dev eth0
  fi
  down="$(rate_qdisc "$veth" "$down_kbit")"
  up="$(rate_qdisc eth0 "$up_kbit" "$ns")"
  d1="$(delay_state "$veth")"
  d2="$(delay_state eth0 "$ns")"
  local delay="$d1"
  [ "$d1" != "$d2" ] && delay="down:${d1},up:${d2}"
  line="SLOT name=${ns} index=${i} address=${addr} host_veth=${veth} down=${down} up=${up} delay=${delay}"
  [ -n "$v4" ] && line="${line} ipv4=${v4}"
  slot_extras "$ns" "$addr"
  printf '%s\n%s\n' "$signature" "$line" > "${owner_dir}/${ns}.slot"
  echo "$line"
}

slot_down() {
  local i="$1" ns veth
  ns="$(slot_ns "$i")" veth="$(slot_veth "$i")"
  # Browsers still running in the slot (a crashed driver leaves them) go first.
  ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  # Deleting the bridge-side veth removes its peer and both qdiscs.
  ip link del "$veth" 2>/dev/null || true
  ip neigh del "$(slot_addr "$i")" dev "$bridge" 2>/dev/null || true
  [ -z "$ipv4" ] || ip neigh del "$(v4_addr $((i + 2)))" dev "$bridge" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
  if [ -n "$uplink" ] && [ "$ndp_proxy" = 1 ]; then
    ip -6 neigh del proxy "$(slot_addr "$i")" dev "$uplink" 2>/dev/null || true
  fi
  rm -f "${owner_dir}/${ns}.slot" "/etc/netns/${ns}/resolv.conf"
  rmdir "/etc/netns/${ns}" 2>/dev/null || true
}

# Every slot's and the gateway's link-layer address, written as permanent neighbour entries
# in each slot and on the bridge (IPv6, and IPv4 with --ipv4). ARP and NDP would otherwise
# cross the same tail-drop queues as the traffic: on a full link dropped ARP replies failed
# a slot's first IPv4 connection, and unanswered probes of a busy peer would cut it off for
# seconds. A real viewer's link is shaped behind its router, never its neighbour lookups.
pin_neighbours() {
  local rec ns idx mac br_mac host="" nss=() macs=() addrs=() v4s=()
  br_mac="$(cat "/sys/class/net/${bridge}/address")"
  # Set once by hand, a bridge keeps its address; left alone it takes its ports' lowest
  # one, and would change under the pinned entries as slots come and go.
  ip link set "$bridge" address "$br_mac"
  for rec in "${owner_dir}/${name_prefix}"*.slot; do
    [ -f "$rec" ] || continue
    ns="$(basename "$rec" .slot)" idx="${ns#"$name_prefix"}"
    isnum "$idx" && ns_exists "$ns" || continue
    mac="$(ip -n "$ns" -br link show eth0 2>/dev/null | awk '{print $3}')"
    [ -n "$mac" ] || continue
    nss+=("$ns") macs+=("$mac") addrs+=("$(slot_addr "$idx")") v4s+=("")
    [ -z "$ipv4" ] || v4s[-1]="$(v4_addr $((idx + 2)))"
  done
  local k j lines
  for k in "${!macs[@]}"; do
    host+="$(pin_lines "${macs[k]}" "$bridge" "${addrs[k]}" "${v4s[k]}")"$'\n'
  done
  [ -z "$host" ] || ip -batch - <<<"${host%$'\n'}"
  for k in "${!macs[@]}"; do
    lines="$(pin_lines "$br_mac" eth0 "$gateway" "${ipv4:+$(v4_addr 1)}")"
    for j in "${!macs[@]}"; do
      [ "$j" = "$k" ] || lines+=$'\n'"$(pin_lines "${macs[j]}" eth0 "${addrs[j]}" "${v4s[j]}")"
    done
    ip -n "${nss[k]}" -batch - <<<"$lines"
  done
}

# pin_lines MAC DEV ADDR6 [ADDR4]: `ip -batch` lines that pin the addresses to MAC on DEV.
pin_lines() {
  echo "neigh replace $3 lladdr $1 dev $2 nud permanent"
  [ -z "${4:-}" ] || echo "neigh replace $4 lladdr $1 dev $2 nud permanent"
}

remaining_slots() {
  # Interfaces still enslaved to the bridge.
  ip -o link show master "$bridge" 2>/dev/null | wc -l
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
    [ -z "$ipv4" ] || ip -4 addr replace "$(v4_addr 1)/${v4_len}" dev "$bridge"
    if [ "$forwarding" = 1 ]; then
      if [ -n "$uplink" ] && [ "$(cat "/proc/sys/net/ipv6/conf/${uplink}/accept_ra")" = 1 ]; then
        sysctl -qw "net.ipv6.conf.${uplink}.accept_ra=2"
      fi
      sysctl -qw net.ipv6.conf.all.forwarding=1
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
      ip link del "$bridge" 2>/dev/null || true
      [ -z "$ipv4" ] || ! command -v nft >/dev/null || nat44 del
    fi
    if ! ip link show "$bridge" >/dev/null 2>&1; then
      rm -f "$owner_file" "${owner_dir}/${name_prefix}net"
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
