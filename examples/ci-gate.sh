#!/bin/sh
# A CI gate on viewerfleet's thresholds: run a scenario (or judge a run folder that already
# exists), fail the job when a threshold fails, and hand the headline figures to the next
# step of the pipeline.
#
#   examples/ci-gate.sh SCENARIO.yaml OUT_DIR [THRESHOLDS]   run the scenario into OUT_DIR
#   examples/ci-gate.sh RUN_DIR [THRESHOLDS]                 judge an existing run folder
#                                                            (no browser needed)
#
# THRESHOLDS (optional) is what `--thresholds` takes: a YAML file in the scenario's
# `thresholds:` syntax or conditions such as "ttff_p95<15s,p2p_savings_at_t>=60%". A run
# judges its scenario's thresholds; with THRESHOLDS a run folder is judged again by those
# instead (the command line wins over the manifest) and nothing is written into it.
#
# Prints KEY=VALUE lines on stdout (append them to $GITHUB_OUTPUT or a dotenv artifact):
#   outcome, exit_code, p2p_savings, http_share, ttff_p95_ms, failed_viewers,
#   thresholds_failed (the failed metrics, comma-separated)
# and the failed thresholds, one per line, on stderr. Exits with viewerfleet's exit code:
# 0 gate passed, 99 a threshold failed, 1/2/69/70/130/143 see README "Exit codes".
#
# Needs `viewerfleet` on PATH (or VIEWERFLEET=/path/to/viewerfleet) and `jq`.
set -eu

VIEWERFLEET=${VIEWERFLEET:-viewerfleet}

usage() {
    echo "usage: $0 SCENARIO.yaml OUT_DIR [THRESHOLDS] | $0 RUN_DIR [THRESHOLDS]" >&2
    exit 2
}

command -v jq >/dev/null 2>&1 || {
    echo "ci-gate: jq is not installed; install it (apt-get install jq) and run again" >&2
    exit 70
}
[ $# -ge 1 ] || usage

summary=$(mktemp)
trap 'rm -f "$summary"' EXIT

code=0
if [ -d "$1" ] && [ -f "$1/manifest.json" ]; then
    # A run folder: judge it again, without a browser.
    run_dir=$1
    [ $# -le 2 ] || usage
    if [ $# -eq 2 ]; then
        "$VIEWERFLEET" --quiet report "$run_dir" --thresholds "$2" --json >"$summary" || code=$?
    else
        "$VIEWERFLEET" --quiet report "$run_dir" --json >"$summary" || code=$?
    fi
else
    [ $# -ge 2 ] && [ $# -le 3 ] || usage
    scenario=$1
    out=$2
    "$VIEWERFLEET" --quiet run "$scenario" --out "$out" --json >"$summary" || code=$?
    if [ $# -eq 3 ] && [ -f "$out/manifest.json" ] && { [ "$code" -eq 0 ] || [ "$code" -eq 99 ]; }; then
        # The run finished: the gate's own thresholds judge it (they win over the scenario's).
        code=0
        "$VIEWERFLEET" --quiet report "$out" --thresholds "$3" --json >"$summary" || code=$?
    fi
fi

# Every command prints one JSON document, an error included (`.error`).
if ! jq -e . "$summary" >/dev/null 2>&1; then
    echo "ci-gate: viewerfleet printed no JSON (exit code $code)" >&2
    exit "$code"
fi
error=$(jq -r '.error // empty' "$summary")
if [ -n "$error" ]; then
    echo "ci-gate: $error" >&2
fi

jq -r '
  ((.run // .report).headline) as $h
  | "outcome=\(.outcome)",
    "exit_code=\(.exit_code)",
    "p2p_savings=\($h.p2p_savings // "")",
    "http_share=\($h.http_share // "")",
    "ttff_p95_ms=\($h.qoe.ttff_p95_ms // "")",
    "failed_viewers=\(if $h then ($h.viewers.failed + $h.viewers.lost) else "" end)",
    "thresholds_failed=\([$h.thresholds[]? | select(.pass | not) | .metric] | join(","))"
' "$summary"

jq -r '
  ((.run // .report).headline.thresholds // [])[]
  | select(.pass | not)
  | "THRESHOLD FAILED: \(.metric) \(.condition): \(.observed)\(if .reason then " (\(.reason))" else "" end)"
' "$summary" >&2

exit "$code"
