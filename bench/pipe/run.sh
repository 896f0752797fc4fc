#!/usr/bin/env bash
# Persistent-pipe benchmarks (seed pi-channels.txt, "Experimental results"), one run, one
# machine, loopback:
#   Table 3   lookups/s served by one space server (confluxd --role=space) with 2..32
#             clients: the paper's one-at-a-time UDP request/reply, and pipelined UDP/TCP
#   streams   the three throughput scenarios (matched, create first, attach first) with
#             pi_* against NATS JetStream (file storage) with the same workload, for fsync
#             policies none and every
# Prints Markdown tables; writes bench/results/pipe.json (every run + medians) and pipe.md.
#
#   bench/pipe/run.sh            full mode (about 10-15 minutes on 2 cores)
#   bench/pipe/run.sh --quick    smoke run (< 2 minutes): small sizes, one repetition
# env: REPS, SECS (per lookup point), TOTAL_MB (per stream point), UDP_THREADS (default 2),
#      WINDOW (pipelined lookups in flight per client, default 32)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out="$here/../results"
mkdir -p "$out"

args="$*"
quick=0
for a in "$@"; do
  case "$a" in
    --quick) quick=1 ;;
    *) echo "usage: $0 [--quick]" >&2; exit 2 ;;
  esac
done
if [ "$quick" = 1 ]; then
  REPS=${REPS:-1} SECS=${SECS:-0.3} TOTAL_MB=${TOTAL_MB:-32} EVERY_MAX=${EVERY_MAX:-256}
  CLIENTS=${CLIENTS:-"2 32"} RUN_TIMEOUT=${RUN_TIMEOUT:-60}
else
  REPS=${REPS:-3} SECS=${SECS:-2} TOTAL_MB=${TOTAL_MB:-256} EVERY_MAX=${EVERY_MAX:-4096}
  CLIENTS=${CLIENTS:-"2 4 8 16 32"} RUN_TIMEOUT=${RUN_TIMEOUT:-600}
fi
UDP_THREADS=${UDP_THREADS:-2}
WINDOW=${WINDOW:-32}
PACK=${PACK:-16}               # lookups packed per datagram in the packed UDP mode
PACK_WINDOW=${PACK_WINDOW:-64} # lookups in flight per client in that mode
SIZES=${SIZES:-"1024 65536 1048576"}
NAMES=25366 # the paper's name count

command -v nats-server >/dev/null || { echo "nats-server not found (make deps installs it)" >&2; exit 1; }
echo "building ..." >&2
make -s -C "$here" >/dev/null
confluxd="$root/dataplane/build/bin/confluxd"
lookup="$here/build/lookup_bench"
stream="$here/build/stream_bench"

tmp=$(mktemp -d /tmp/cxpipebench.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
raw="$tmp/raw.jsonl"
: >"$raw"

# start_space DIR FSYNC [args] -> sets SPACE_ADDR, SPACE_UDP, SPACE_PID
start_space() {
  local dir=$1 fsync=$2; shift 2
  "$confluxd" --role=space --dir="$dir" --listen=tcp://127.0.0.1:0 --fsync="$fsync" --quiet "$@" \
    >"$dir.out" 2>"$dir.err" &
  SPACE_PID=$!; pids+=("$SPACE_PID")
  for _ in $(seq 100); do grep -q '^listening' "$dir.out" 2>/dev/null && break; sleep 0.05; done
  grep -q '^listening' "$dir.out" || { echo "confluxd did not start:" >&2; cat "$dir.err" >&2; exit 1; }
  SPACE_ADDR=$(awk '/^listening/ {print $2}' "$dir.out")
  SPACE_UDP=$(awk '/^listening/ {print $4}' "$dir.out")
}
stop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

# start_nats DIR -> sets NATS_ADDR, NATS_PID. File storage; the server's default sync
# policy (nats-server 2.9 has no sync_interval option: it fsyncs on a 2-minute timer).
start_nats() {
  local dir=$1
  mkdir -p "$dir"
  cat >"$dir/nats.conf" <<EOF
listen: 127.0.0.1:-1
max_payload: 8MB
jetstream { store_dir: "$dir/js" }
EOF
  nats-server -c "$dir/nats.conf" >"$dir/nats.log" 2>&1 &
  NATS_PID=$!; pids+=("$NATS_PID")
  for _ in $(seq 100); do grep -q 'Server is ready' "$dir/nats.log" 2>/dev/null && break; sleep 0.05; done
  grep -q 'Server is ready' "$dir/nats.log" || { echo "nats-server did not start:" >&2; cat "$dir/nats.log" >&2; exit 1; }
  NATS_ADDR=$(sed -n 's/.*Listening for client connections on \([0-9.]*:[0-9]*\).*/\1/p' "$dir/nats.log" | head -1)
}

# tagged TAGS CMD...: runs CMD, appends its JSON line with TAGS added to the raw results;
# A run that fails is tried once more (a stream run of either peer has been seen to hang
# once in many, e.g. JetStream answering 503 under load): the first failure is printed and
# counted in "retried"; a second failure is kept (the report marks it) and makes the script
# exit 1 at the end.
failed=0
retried=0
tagged() {
  local tags=$1; shift
  if ! "$@" >"$tmp/line"; then
    retried=$((retried + 1))
    echo "FAILED, trying once more: $*" >&2
    if ! "$@" >"$tmp/line"; then
      failed=$((failed + 1))
      echo "FAILED: $*" >&2
    fi
  fi
  sed "s/}\$/,$tags}/" "$tmp/line" >>"$raw"
}

# ---- Table 3: lookups -------------------------------------------------------------
echo "Table 3: lookups ($NAMES names, clients: $CLIENTS, ${SECS}s per point, $REPS reps) ..." >&2
"$lookup" seed "$tmp/lookup" "$NAMES"
start_space "$tmp/lookup" none --udp-threads="$UDP_THREADS"
lpid=$SPACE_PID
for rep in $(seq "$REPS"); do
  for c in $CLIENTS; do
    for m in "udp lib 1 1" "udp win 1 1" "udp win $WINDOW 1" "udp win $PACK_WINDOW $PACK" "tcp lib 1 1" \
             "tcp win $WINDOW 1"; do
      set -- $m
      tagged "\"bench\":\"lookup\",\"rep\":$rep" \
        "$lookup" run --proto "$1" --mode "$2" --window "$3" --per-datagram "$4" --addr "$SPACE_ADDR" \
        --udp "$SPACE_UDP" --names "$NAMES" --clients "$c" --seconds "$SECS"
    done
  done
done
stop "$lpid"

# ---- streams: three scenarios x sizes, Conflux and NATS interleaved -----------------
start_nats "$tmp/nats"
for policy in none every; do
  start_space "$tmp/space-$policy" "$policy"
  echo "streams, fsync $policy (sizes: $SIZES; $REPS reps) ..." >&2
  for rep in $(seq "$REPS"); do
    for sc in 1 2 3; do
      for size in $SIZES; do
        count=$((TOTAL_MB * 1048576 / size))
        [ "$policy" = every ] && [ "$count" -gt "$EVERY_MAX" ] && count=$EVERY_MAX
        [ "$count" -lt 1 ] && count=1
        t="\"bench\":\"stream\",\"policy\":\"$policy\",\"rep\":$rep"
        tagged "$t" "$stream" --peer conflux --addr "$SPACE_ADDR" --scenario "$sc" --size "$size" --count "$count" --timeout "$RUN_TIMEOUT"
        tagged "$t" "$stream" --peer nats --addr "$NATS_ADDR" --scenario "$sc" --size "$size" --count "$count" --timeout "$RUN_TIMEOUT"
      done
    done
  done
  stop "$SPACE_PID"
done
stop "$NATS_PID"

# ---- report ---------------------------------------------------------------------------
cmdline="bench/pipe/run.sh $args"
python3 "$here/report.py" --raw "$raw" --json "$out/pipe.json" --md "$out/pipe.md" \
  --command "$cmdline" --quick "$quick" --udp-threads "$UDP_THREADS" --window "$WINDOW" \
  --pack "$PACK" --pack-window "$PACK_WINDOW" \
  --nats-version "$(nats-server --version 2>&1 | head -1)" \
  --commit "$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
cat "$out/pipe.md"
[ "$retried" -eq 0 ] || echo "$retried runs failed once and were run again (see above)" >&2
if [ "$failed" -gt 0 ]; then
  echo "$failed runs failed (see above)" >&2
  exit 1
fi
