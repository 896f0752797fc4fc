#!/usr/bin/env bash
# The cost of going through the sidecar: bench/sidecar/sidecar_bench run embedded and then
# through a confluxd --role=sidecar, in one run, against one space server (fsync none), on
# loopback. Prints a Markdown table with sidecar/embedded ratios; writes
# bench/results/sidecar.json and sidecar.md.
#   bench/sidecar/run.sh [--quick]
# env: SIZES (segment sizes, default "65536 1048576"), TOTAL_MB (per size, default 256),
#      EVENTS (default 200000)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out="$here/../results"
mkdir -p "$out"
quick=0
for a in "$@"; do
  case "$a" in --quick) quick=1 ;; *) echo "usage: $0 [--quick]" >&2; exit 2 ;; esac
done
if [ "$quick" = 1 ]; then TOTAL_MB=${TOTAL_MB:-32}; EVENTS=${EVENTS:-20000}; else TOTAL_MB=${TOTAL_MB:-256}; EVENTS=${EVENTS:-200000}; fi
SIZES=${SIZES:-"65536 1048576"}
make -s -C "$here" >/dev/null
bin="$here/build/sidecar_bench"
confluxd="$root/dataplane/build/bin/confluxd"
tmp=$(mktemp -d /tmp/cxbench-sidecar-XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
"$confluxd" --role=space --dir="$tmp/space" --listen=tcp://127.0.0.1:0 --no-udp --fsync=none --quiet > "$tmp/space.out" &
pids+=($!)
"$confluxd" --role=sidecar --socket="$tmp/sc.sock" --http=127.0.0.1:0 --listen=tcp://127.0.0.1:0 --quiet > "$tmp/sc.out" &
pids+=($!)
for _ in $(seq 100); do grep -q listening "$tmp/space.out" && grep -q listening "$tmp/sc.out" && break; sleep 0.1; done
space=$(awk '{print $2}' "$tmp/space.out")
: > "$out/sidecar.json"
for size in $SIZES; do
  segs=$(( TOTAL_MB * 1048576 / size ))
  "$bin" "$space" "$size" "$segs" "$EVENTS" | tee -a "$out/sidecar.json"
  CONFLUX_SOCKET="$tmp/sc.sock" "$bin" "$space" "$size" "$segs" "$EVENTS" | tee -a "$out/sidecar.json"
done
python3 - "$out/sidecar.json" > "$out/sidecar.md" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("| segment | metric | embedded | sidecar | sidecar / embedded |")
print("| --- | --- | --- | --- | --- |")
for size in sorted({r["size"] for r in rows}):
    e = next(r for r in rows if r["size"] == size and r["mode"] == "embedded")
    s = next(r for r in rows if r["size"] == size and r["mode"] == "sidecar")
    for k, unit in (("pipe_write_MBps", "MB/s"), ("pipe_read_MBps", "MB/s"),
                    ("submit_events_per_s", "events/s"),
                    ("best_effort_events_per_s", "events/s"), ("call_us", "µs")):
        print(f"| {size} B | {k} ({unit}) | {e[k]:g} | {s[k]:g} | {s[k] / e[k]:.2f} |")
PY
cat "$out/sidecar.md"
