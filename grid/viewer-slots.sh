#!/usr/bin/env bash
# viewer-slots.sh — viewer slots: network namespaces on one bridge, each with its own IPv6
# address from a prefix, a default route, and a link shaped in both directions with tc.
#
# This is the one place that turns "a prefix and a count" into slots. viewerfleet's `netns`
# fleet runs it (embedded in the binary), and a cloud node with a routed public /64 runs it
# from its bootstrap so every browser there gets its own public address.
#
#   viewer-slots.sh up|down|status --prefix P --count N [--first I]
#                   [--down-kbit N --up-kbit N --delay-ms N] [--name-prefix vf-]
#                   [--forwarding]
#
# Slot i (i = first .. first+count-1):
#   namespace  <name-prefix><i>            (e.g. vf-3)
#   veth       <name-prefix><i>h (on the bridge)  <->  eth0 (inside the namespace)
#   address    <prefix base>::<hex(i+2)>/<len>, default route via <prefix base>::1
# Bridge <name-prefix>br holds <prefix base>::1 (the slots' gateway).
#
# Shaping (tc, egress qdiscs only, no ifb needed):
#   download = egress of the bridge-side veth (traffic towards the slot)
#   upload   = egress of eth0 inside the slot (traffic from the slot)
#   rates with tbf (htb when tbf is missing); --delay-ms (round trip, half each way) with
#   netem when the kernel has it, otherwise reported as not applied.
# For every slot `up` prints one line:
#   SLOT name=<ns> index=<i> address=<addr> host_veth=<veth> down=<how> up=<how> delay=<how>
# `down` removes the slots (namespaces, veths, qdiscs) and the bridge once no slot is left.
# `up` records its owner in /run/viewerfleet/slots/<name-prefix>owner: $VF_SLOTS_OWNER (a PID)
# or "manual"; `viewerfleet gc --local` removes slots whose owner PID is dead, never manual ones.
# `--forwarding` enables IPv6 forwarding (cloud node: the slots reach the internet through
# the host). Needs root and iproute2 (ip, tc).
set -euo pipefail

die() { echo "viewer-slots.sh: $*" >&2; exit 2; }

action="${1:-}"
[ $# -gt 0 ] && shift
prefix="" count="" first=0 down_kbit=0 up_kbit=0 delay_ms=0 name_prefix="vf-" forwarding=0
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
    -h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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

# --prefix: an IPv6 prefix written with a trailing '::', e.g. fd00:5f::/64 or 2a01:4f8:1:2::/64.
[[ "$prefix" =~ ^([0-9a-fA-F:]+::)/([0-9]{2,3})$ ]] \
  || die "--prefix must be an IPv6 prefix ending in '::' with a length, e.g. fd00:5f::/64 (got '${prefix}')"
base="${BASH_REMATCH[1]}" plen="${BASH_REMATCH[2]}"
[ "$plen" -ge 48 ] && [ "$plen" -le 112 ] || die "--prefix length must be between /48 and /112 (got /${plen})"

bridge="${name_prefix}br"
gateway="${base}1"
# Queue of each rate limiter, in ms of traffic at the limit ($VF_SLOTS_QUEUE_MS).
queue_ms="${VF_SLOTS_QUEUE_MS:-300}"
isnum "$queue_ms" || die "VF_SLOTS_QUEUE_MS must be a number of milliseconds (got '${queue_ms}')"
owner_dir="${VF_SLOTS_OWNER_DIR:-/run/viewerfleet/slots}"
owner_file="${owner_dir}/${name_prefix}owner"
slot_ns() { echo "${name_prefix}$1"; }
slot_veth() { echo "${name_prefix}$1h"; }
slot_addr() { printf '%s%x' "$base" $(( $1 + 2 )); }

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

# delay_qdisc DEV [NS]: what delay DEV has (after rate_qdisc, or alone when no rate).
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

slot_up() {
  local i="$1" ns veth addr down up d1 d2
  ns="$(slot_ns "$i")" veth="$(slot_veth "$i")" addr="$(slot_addr "$i")"
  if ip netns list | awk '{print $1}' | grep -qx "$ns"; then
    die "namespace ${ns} already exists: run 'viewer-slots.sh down' with the same --name-prefix first (or 'viewerfleet gc --local')"
  fi
  ip netns add "$ns"
  ip link add "$veth" type veth peer name eth0 netns "$ns"
  ip link set "$veth" master "$bridge" up
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0 >/dev/null 2>&1 || true
  ip netns exec "$ns" ip link set lo up
  ip netns exec "$ns" ip -6 addr add "${addr}/${plen}" dev eth0 nodad
  ip netns exec "$ns" ip link set eth0 up
  ip netns exec "$ns" ip -6 route add default via "$gateway" dev eth0
  down="$(rate_qdisc "$veth" "$down_kbit")"
  up="$(rate_qdisc eth0 "$up_kbit" "$ns")"
  d1="$(delay_state "$veth")"
  d2="$(delay_state eth0 "$ns")"
  local delay="$d1"
  [ "$d1" != "$d2" ] && delay="down:${d1},up:${d2}"
  echo "SLOT name=${ns} index=${i} address=${addr} host_veth=${veth} down=${down} up=${up} delay=${delay}"
}

slot_down() {
  local i="$1" ns veth
  ns="$(slot_ns "$i")" veth="$(slot_veth "$i")"
  # Browsers still running in the slot (a crashed driver leaves them) go first.
  ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  # Deleting the bridge-side veth removes its peer and both qdiscs.
  ip link del "$veth" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
}

remaining_slots() {
  # Interfaces still enslaved to the bridge.
  ip -o link show master "$bridge" 2>/dev/null | wc -l
}

case "$action" in
  up)
    if ! ip link show "$bridge" >/dev/null 2>&1; then
      ip link add "$bridge" type bridge
      ip link set "$bridge" type bridge stp_state 0 forward_delay 0 2>/dev/null || true
      sysctl -qw "net.ipv6.conf.${bridge}.accept_dad=0" >/dev/null 2>&1 || true
      ip link set "$bridge" up
      ip -6 addr add "${gateway}/${plen}" dev "$bridge" nodad 2>/dev/null || true
    fi
    if [ "$forwarding" = 1 ]; then sysctl -qw net.ipv6.conf.all.forwarding=1; fi
    # Owner record for `viewerfleet gc --local`: a PID (the run that made the slots; gc
    # removes them once it is dead) or "manual" (gc leaves them alone).
    mkdir -p "$owner_dir"
    [ -f "$owner_file" ] || echo "${VF_SLOTS_OWNER:-manual}" > "$owner_file"
    for i in $(seq "$first" "$last"); do
      if ! slot_up "$i"; then
        slot_down "$i"
        die "slot ${i} could not be set up (see the error above); slots already up stay up until 'down'"
      fi
    done
    ;;
  down)
    for i in $(seq "$first" "$last"); do slot_down "$i"; done
    if ip link show "$bridge" >/dev/null 2>&1 && [ "$(remaining_slots)" -eq 0 ]; then
      ip link del "$bridge" 2>/dev/null || true
    fi
    ip link show "$bridge" >/dev/null 2>&1 || rm -f "$owner_file"
    ;;
  status)
    for i in $(seq "$first" "$last"); do
      ns="$(slot_ns "$i")"
      if ip netns list | awk '{print $1}' | grep -qx "$ns"; then
        echo "SLOT name=${ns} index=${i} address=$(slot_addr "$i") state=up"
      else
        echo "SLOT name=${ns} index=${i} state=absent"
      fi
    done
    ;;
esac
