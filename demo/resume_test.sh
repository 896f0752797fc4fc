#!/usr/bin/env bash
# The restart scenario of e2e/TestPipeSurvivesPodDeletions on this host: demo-ticker and
# demo-recorder, each with a sidecar of its own (as in a pod), and a space server, all as
# processes. Mid-stream, as a pod deletion does, the recorder and its sidecar are stopped
# (SIGTERM) and started again, then the ticker and its sidecar, then the space server (on
# the same port and store). Checks that the restarted components resumed (the ticker with
# PI_APPEND, the recorder from its record) and that both pipes, read back with the conflux
# CLI, hold exactly ticks 0..N-1, each once, in order.
#   demo/resume_test.sh BIN_DIR DATAPLANE_BIN_DIR
set -euo pipefail
bin=$(realpath "$1"); dpbin=$(realpath "$2")
COUNT=${COUNT:-400}
work=$(mktemp -d /tmp/cxresume.XXXXXX)
declare -A pid
cleanup() { for p in "${pid[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
[ -n "${KEEP:-}" ] && trap - EXIT
fail() { echo "demo resume test: FAIL: $*"; for f in "$work"/*.log; do echo "--- $f"; tail -15 "$f"; done; exit 1; }

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
addr=tcp://127.0.0.1:$port
space_up() {
  "$dpbin/confluxd" --role=space --dir="$work/space" --listen="$addr" --no-udp --fsync=none >>"$work/space.log" 2>&1 &
  pid[space]=$!
  for _ in $(seq 100); do "$dpbin/conflux" --space "$addr" ls >/dev/null 2>&1 && return; sleep 0.1; done
  fail "space server did not start"
}
# pod_up NAME PROGRAM: a component with its own sidecar, logs appended
pod_up() {
  local name=$1 prog=$2
  rm -f "$work/$name.out"
  "$dpbin/confluxd" --role=sidecar --socket="$work/$name.sock" --no-http --space="$addr" \
    --listen=tcp://127.0.0.1:0 >"$work/$name.out" 2>>"$work/$name.sidecar.log" &
  pid[$name-sidecar]=$!
  for _ in $(seq 100); do grep -q '^listening' "$work/$name.out" 2>/dev/null && break; sleep 0.1; done
  grep -q '^listening' "$work/$name.out" || fail "the sidecar of $name did not start"
  CONFLUX_SOCKET=$work/$name.sock "$prog" >>"$work/$name.log" 2>&1 &
  pid[$name]=$!
}
# stop KEY: SIGTERM, and wait for it to end
stop() { kill -TERM "${pid[$1]}"; wait "${pid[$1]}" 2>/dev/null || true; unset "pid[$1]"; }
# pod_delete NAME: as the kubelet does, the application first, then its (native) sidecar
pod_delete() { stop "$1"; stop "$1-sidecar"; }
# recorded: the recorder's progress (its last "n/COUNT ticks" line)
recorded() { grep -o "^recorder: [0-9]*/$COUNT" "$work/recorder.log" 2>/dev/null | tail -1 | sed 's|recorder: ||; s|/.*||'; }
wait_recorded() {
  for _ in $(seq 600); do (( $(recorded || echo 0) >= $1 )) 2>/dev/null && return; sleep 0.1; done
  fail "the recorder did not reach $1 ticks in 60 s"
}

export CONFLUX_SPACE=$addr TICK_COUNT=$COUNT TICK_PERIOD_MS=10 TICK_PIPE=ticks
space_up
pod_up recorder "$bin/demo-recorder"
pod_up ticker "$bin/demo-ticker"

wait_recorded $((COUNT / 8))
pod_delete recorder; pod_up recorder "$bin/demo-recorder"
wait_recorded $((COUNT * 3 / 8))
grep -q "^ticker: done" "$work/ticker.log" && fail "the ticker finished before it was stopped: not mid-stream"
pod_delete ticker; pod_up ticker "$bin/demo-ticker"
wait_recorded $((COUNT * 5 / 8))
grep -q "^ticker: done" "$work/ticker.log" && fail "the ticker finished before the space was stopped: not mid-stream"
stop space; space_up

for _ in $(seq 900); do grep -q "^recorder: complete" "$work/recorder.log" && break; sleep 0.1; done
grep -q "^recorder: complete: $COUNT/$COUNT ticks recorded in 'ticks-received' (0 bad)" "$work/recorder.log" ||
  fail "the recorder did not complete with $COUNT good ticks"
grep -q "^recorder: reading pipe 'ticks' from tick [1-9][0-9]* (resumed from the record)" "$work/recorder.log" ||
  fail "the restarted recorder did not resume from its record"
grep -q "^ticker: writing $COUNT ticks to pipe 'ticks' (append: replaying from tick 0, the space holds [1-9]" "$work/ticker.log" ||
  fail "the restarted ticker did not append"
grep -q "abandoning it" "$work/ticker.sidecar.log" || fail "the ticker's sidecar did not abandon the writer"

for p in ticks ticks-received; do
  "$dpbin/conflux" --space "$addr" cat "$p" --json >"$work/$p.json" 2>"$work/cat.log" || fail "conflux cat $p"
  python3 - "$work/$p.json" "$COUNT" <<'PY' || fail "pipe $p is not exactly ticks 0..$((COUNT - 1))"
import json, sys
ticks = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
want = int(sys.argv[2])
ids = [t["id"] for t in ticks]
assert ids == list(range(want)), f"{len(ids)} ticks, first wrong at {next((i for i, v in enumerate(ids) if v != i), len(ids))}"
assert all(t["check"] == t["id"] * 7919 + 13 for t in ticks), "a tick's check field is wrong"
PY
done
echo "demo resume test: recorder, ticker and space server each stopped and restarted mid-stream; 'ticks' and 'ticks-received' hold exactly ticks 0..$((COUNT - 1))"
