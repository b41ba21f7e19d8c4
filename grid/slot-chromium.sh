#!/bin/sh
# slot-chromium.sh — a Grid node's Chromium (the stereotype's binary): takes the first free
# viewer slot under a lock (flock), records itself as its user (PID + start time: both
# survive exec; a reused PID has another start time) and execs Chromium with its arguments
# in the slot with `ip netns exec`. The slot is free once that process is gone (leftovers
# are killed when it is taken again). All busy: retries for $VF_SLOT_WAIT_S (20) seconds.
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
        exec "$IP" netns exec "$ns" "$CHROMIUM" "$@"
    done
    flock -u 9
    tries=$((tries - 1))
    [ $tries -gt 0 ] || break
    sleep 0.2
done
echo "slot-chromium: every viewer slot ($SLOT_NAMESPACES) stayed busy for ${wait_s} s" >&2
exit 1
