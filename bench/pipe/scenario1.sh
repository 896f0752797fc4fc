#!/usr/bin/env bash
# Scenario 1 only (matched create/attach), Conflux and NATS JetStream interleaved: the
# servers and flags of run.sh without the lookups and the other scenarios, for a quick
# before/after check of the reader's path. Prints one line per run: policy, size, peer, the
# stream_bench JSON line. Run it under the benchmark lock:
#   flock /tmp/conflux-bench.lock bench/pipe/scenario1.sh
# env: REPS (3), SIZES ("1024 65536 1048576"), POLICIES ("none every"), TOTAL_MB (256),
#      EVERY_MAX (4096: segment cap per point under fsync every), BIN (directory holding
#      confluxd and stream_bench; default: this checkout's builds, made first)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
REPS=${REPS:-3} SIZES=${SIZES:-"1024 65536 1048576"} POLICIES=${POLICIES:-"none every"}
TOTAL_MB=${TOTAL_MB:-256} EVERY_MAX=${EVERY_MAX:-4096}
if [ -z "${BIN:-}" ]; then
  make -s -C "$here" >/dev/null
  confluxd="$root/dataplane/build/bin/confluxd" stream="$here/build/stream_bench"
else
  confluxd="$BIN/confluxd" stream="$BIN/stream_bench"
fi
command -v nats-server >/dev/null || { echo "nats-server not found (make deps installs it)" >&2; exit 1; }

tmp=$(mktemp -d /tmp/cxpipes1.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

mkdir -p "$tmp/nats"
printf 'listen: 127.0.0.1:-1\nmax_payload: 8MB\njetstream { store_dir: "%s/js" }\n' "$tmp/nats" >"$tmp/nats/nats.conf"
nats-server -c "$tmp/nats/nats.conf" >"$tmp/nats/log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q 'Server is ready' "$tmp/nats/log" && break; sleep 0.05; done
nats=$(sed -n 's/.*Listening for client connections on \([0-9.]*:[0-9]*\).*/\1/p' "$tmp/nats/log" | head -1)
[ -n "$nats" ] || { echo "nats-server did not start" >&2; cat "$tmp/nats/log" >&2; exit 1; }

# a run that fails or hangs (90 s) prints its error and the loop goes on
run() { timeout 90 "$stream" "$@" 2>&1 | tr '\n' ' '; echo; }
for pol in $POLICIES; do
  mkdir -p "$tmp/space-$pol"
  "$confluxd" --role=space --dir="$tmp/space-$pol" --listen=tcp://127.0.0.1:0 --fsync="$pol" --quiet \
    >"$tmp/space-$pol.out" 2>&1 &
  sp=$!; pids+=("$sp")
  for _ in $(seq 100); do grep -q '^listening' "$tmp/space-$pol.out" && break; sleep 0.05; done
  addr=$(awk '/^listening/ {print $2}' "$tmp/space-$pol.out")
  [ -n "$addr" ] || { echo "confluxd did not start" >&2; cat "$tmp/space-$pol.out" >&2; exit 1; }
  for rep in $(seq "$REPS"); do
    for size in $SIZES; do
      count=$((TOTAL_MB * 1048576 / size))
      [ "$pol" = every ] && [ "$count" -gt "$EVERY_MAX" ] && count=$EVERY_MAX
      echo "$pol $size conflux $(run --peer conflux --addr "$addr" --scenario 1 --size "$size" --count "$count")"
      echo "$pol $size nats $(run --peer nats --addr "$nats" --scenario 1 --size "$size" --count "$count")"
    done
  done
  kill "$sp" 2>/dev/null || true
done
