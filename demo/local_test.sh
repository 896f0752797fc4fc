#!/usr/bin/env bash
# The demo's components on this host, against a real space server: a sink, three stage
# replicas and a source, as processes. MODE=sidecar gives each component a sidecar of its
# own (confluxd --role=sidecar, as in a pod) and checks from its /metrics that the
# component's calls went through it; the default runs them embedded. Checks that the sink collects every result exactly
# once (converted from result_v2 to result_v1) and that the "summary" pipe holds them,
# read back with the conflux CLI as JSON.
#   demo/local_test.sh BIN_DIR DATAPLANE_BIN_DIR
set -euo pipefail
bin=$(realpath "$1"); dpbin=$(realpath "$2")
SEGMENTS=${SEGMENTS:-120}
MODE=${MODE:-embedded}
STAGES=3
work=$(mktemp -d /tmp/cxdemo.XXXXXX)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
[ -n "${KEEP:-}" ] && trap - EXIT
fail() { echo "demo local test: FAIL: $*"; for f in "$work"/*.log; do echo "--- $f"; tail -20 "$f"; done; exit 1; }

"$dpbin/confluxd" --role=space --dir="$work/space" --listen=tcp://127.0.0.1:0 --fsync=none >"$work/space.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q listening "$work/space.log" && break; sleep 0.1; done
addr=$(grep -o 'tcp://[0-9.]*:[0-9]*' "$work/space.log" | head -1)
[ -n "$addr" ] || fail "space server did not start"
export CONFLUX_SPACE=$addr DEMO_SEGMENTS=$SEGMENTS DEMO_STAGES=$STAGES DEMO_PERIOD_MS=1

# run NAME PROGRAM: a component in the background; in sidecar mode with its own sidecar
run() {
  local name=$1 prog=$2
  if [ "$MODE" = sidecar ]; then
    "$dpbin/confluxd" --role=sidecar --socket="$work/$name.sock" --http=127.0.0.1:0 \
      --listen=tcp://127.0.0.1:0 --quiet >"$work/$name.sidecar.out" 2>"$work/$name.sidecar.log" &
    pids+=($!)
    for _ in $(seq 100); do grep -q '^listening' "$work/$name.sidecar.out" 2>/dev/null && break; sleep 0.1; done
    grep -q '^listening' "$work/$name.sidecar.out" || fail "the sidecar of $name did not start"
    CONFLUX_SOCKET=$work/$name.sock "$prog" >"$work/$name.log" 2>&1 &
  else
    env -u CONFLUX_SOCKET "$prog" >"$work/$name.log" 2>&1 &
  fi
  pids+=($!)
}
# served NAME: requests the component's sidecar served (its /metrics)
served() {
  local http; http=$(awk '{print $4}' "$work/$1.sidecar.out")
  exec 3<>"/dev/tcp/${http%:*}/${http#*:}"
  printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3
  awk '/^conflux_sidecar_requests_total/ {n += $2} END {print n + 0}' <&3
  exec 3<&-
}

run sink "$bin/demo-sink"
for r in $(seq 0 $((STAGES - 1))); do DEMO_RANK=$r run stage$r "$bin/demo-stage"; done
run source "$bin/demo-source"

for _ in $(seq 600); do grep -q "sink: complete" "$work/sink.log" && break; sleep 0.1; done
grep -q "sink: complete" "$work/sink.log" || fail "the sink did not collect $SEGMENTS results in 60 s"
grep -q "sink: $SEGMENTS/$SEGMENTS results (0 duplicates, 0 bad)" "$work/sink.log" || fail "duplicates or bad results"
# the stages share the pipe (reader group "stages"): each reached the end, their shares add up
total=0
for r in $(seq 0 $((STAGES - 1))); do
  line=$(grep "stage: rank $r: done, end of pipe, " "$work/stage$r.log") || fail "stage $r did not reach the end of the pipe"
  n=$(echo "$line" | sed 's/.*end of pipe, \([0-9]*\) results.*/\1/'); total=$((total + n))
done
[ "$total" -eq "$SEGMENTS" ] || fail "the stages submitted $total results, want $SEGMENTS (one per segment)"

# the summary pipe, read back as JSON through the format service: one line per result
"$dpbin/conflux" --space "$addr" cat summary --json >"$work/summary.json" 2>"$work/cat.log" || fail "conflux cat summary"
n=$(grep -c '"segment"' "$work/summary.json" || true)
[ "$n" -eq "$SEGMENTS" ] || fail "summary has $n results, want $SEGMENTS"
# every segment index exactly once, and the mean of segment 0 is what the source wrote
# (steps 0..63, energies step%97 + j/16: mean 31.5 + 7.5/16 = 31.96875)
python3 - "$work/summary.json" "$SEGMENTS" <<'PY' || fail "summary contents"
import json, re, sys
seen = {}
for line in open(sys.argv[1]):
    for obj in re.findall(r'\{[^{}]*"segment"[^{}]*\}', line):
        r = json.loads(obj)
        assert r["segment"] not in seen, f"segment {r['segment']} twice"
        seen[r["segment"]] = r
want = int(sys.argv[2])
assert sorted(seen) == list(range(want)), f"segments {sorted(seen)[:5]}... not 0..{want-1}"
assert abs(seen[0]["mean"] - 31.96875) < 1e-9, seen[0]
assert seen[0]["count"] == 64, seen[0]
assert "max" not in seen[0] and "stage" not in seen[0], "v1 has no max/stage"
PY
if [ "$MODE" = sidecar ]; then
  for c in sink stage0 source; do
    n=$(served "$c"); [ "$n" -gt 0 ] || fail "the sidecar of $c served no request"
  done
fi
echo "demo local test ($MODE): 1 passed, 0 failed ($SEGMENTS segments, $STAGES stages, source -> pipe -> stages -> event channel (v2 -> v1) -> sink -> pipe)"
