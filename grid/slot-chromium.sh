#!/bin/sh
# slot-chromium.sh — a Grid node's Chromium (the stereotype's binary): takes the first free
# viewer slot under a lock (flock), records itself as its user (PID + start time: both
# survive exec; a reused PID has another start time) and execs Chromium with its arguments
# in the slot with `ip netns exec`, as a user of its own (browser_exec). The slot is free
# once that process is gone (leftovers are killed when it is taken again). All busy:
# retries for $VF_SLOT_WAIT_S (20) seconds.
# Config (sh): $VF_SLOTS_CONF, else slots.conf next to this script, else
# /etc/viewerfleet/slots.conf: SLOT_NAMESPACES="vf-0 …", CHROMIUM=…, optional
# SLOT_DIR=/run/viewerfleet/slot-users (lock, records), IP=ip.
set -u
conf=${VF_SLOTS_CONF:-${0%/*}/slots.conf}
[ -r "$conf" ] || conf=/etc/viewerfleet/slots.conf
SLOT_NAMESPACES='' CHROMIUM=/usr/lib/chromium/chromium SLOT_DIR=/run/viewerfleet/slot-users IP=ip
# shellcheck source=/dev/null
. "$conf" || { echo "slot-chromium: cannot read $conf" >&2; exit 1; }
[ -n "$SLOT_NAMESPACES" ] || { echo "slot-chromium: no SLOT_NAMESPACES in $conf" >&2; exit 1; }
mkdir -p "$SLOT_DIR"

# >>> browser_exec (viewerfleet's netns fleet copies this block into its own wrapper)
# Browsers take media and WebRTC from any peer: as root, Chromium runs as a user of its own
# (viewerfleet-browser, made on first use) and with its sandbox when the kernel lets that
# user make a user namespace (--no-sandbox is then dropped); the profile folder
# (--user-data-dir) becomes that user's. Run as anyone else, Chromium runs as asked.

# Prints the browser user when Chromium is to run as it.
vf_browser_user() {
    [ "$(id -u)" = 0 ] || return 1
    id -u viewerfleet-browser >/dev/null 2>&1 \
        || useradd --system --user-group --no-create-home --home-dir /nonexistent \
            --shell /usr/sbin/nologin viewerfleet-browser >/dev/null 2>&1 \
        || id -u viewerfleet-browser >/dev/null 2>&1 || return 1
    echo viewerfleet-browser
}

# Whether user $1 may make a user namespace (what Chromium's sandbox needs).
vf_sandbox_ok() { setpriv --reuid="$1" --regid="$1" --clear-groups unshare --user true 2>/dev/null; }

# Prints `user=<name> own=yes|no sandbox=on|off`: how browsers started here run.
browser_isolation() {
    if vf_u=$(vf_browser_user); then
        if vf_sandbox_ok "$vf_u"; then vf_s=on; else vf_s=off; fi
        echo "user=$vf_u own=yes sandbox=$vf_s"
    else
        echo "user=$(id -un) own=no sandbox=off"
    fi
}

# browser_exec IP NS CHROMIUM ARG...: execs Chromium with its arguments in namespace NS.
browser_exec() {
    vf_ip=$1 vf_ns=$2 vf_chromium=$3
    shift 3
    vf_u=$(vf_browser_user) || exec "$vf_ip" netns exec "$vf_ns" "$vf_chromium" "$@"
    vf_sandbox=0
    vf_sandbox_ok "$vf_u" && vf_sandbox=1
    vf_home=/nonexistent vf_n=$#
    while [ "$vf_n" -gt 0 ]; do
        vf_arg=$1
        shift
        vf_n=$((vf_n - 1))
        case $vf_arg in
        --no-sandbox) [ "$vf_sandbox" = 1 ] && continue ;;
        --user-data-dir=*)
            # Made here when missing; its parent must let that user in (/tmp does).
            vf_home=${vf_arg#--user-data-dir=}
            mkdir -p "$vf_home" && chown -R "$vf_u:$vf_u" "$vf_home"
            ;;
        esac
        set -- "$@" "$vf_arg"
    done
    exec "$vf_ip" netns exec "$vf_ns" setpriv --reuid="$vf_u" --regid="$vf_u" --clear-groups \
        env HOME="$vf_home" "$vf_chromium" "$@"
}
# <<< browser_exec

# Start time of process $1 (field 22 of /proc/PID/stat).
started() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20; }
me="$$ $(started $$)"
wait_s=${VF_SLOT_WAIT_S:-20}
tries=$((wait_s * 5))
exec 9>>"$SLOT_DIR/.lock"
while :; do
    flock 9
    for ns in $SLOT_NAMESPACES; do
        pid='' start=''
        [ -f "$SLOT_DIR/$ns" ] && read -r pid start <"$SLOT_DIR/$ns"
        if [ -n "$pid" ] && [ "$(started "$pid")" = "$start" ]; then continue; fi
        "$IP" netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
        echo "$me" >"$SLOT_DIR/$ns"
        exec 9>&-
        # shellcheck disable=SC2093 # the exec fails only when ip is missing: the slot is free again
        browser_exec "$IP" "$ns" "$CHROMIUM" "$@"
    done
    flock -u 9
    tries=$((tries - 1))
    [ $tries -gt 0 ] || break
    sleep 0.2
done
echo "slot-chromium: every viewer slot ($SLOT_NAMESPACES) stayed busy for ${wait_s} s" >&2
exit 1
