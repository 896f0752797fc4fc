#!/usr/bin/env bash
# Runs the example components once against a real space server (confluxd), chained across
# the three languages, and checks what each printed:
#
#   C producer ── pipe 'samples' ──┬── C consumer (started first: the writer streams to it)
#                                  └── Python energy_mean (after the producer ended)
#                                          └── pipe 'means' ── Go summary
#
# usage: examples/run.sh BIN_DIR     (BIN_DIR holds producer, consumer and summary; make -C sdk
#                                     examples builds them). CONFLUXD and PYTHON may be set.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "${1:?usage: run.sh BIN_DIR}" && pwd)
confluxd=${CONFLUXD:-$here/../../dataplane/build/bin/confluxd}
python=${PYTHON:-/usr/bin/python3}

work=$(mktemp -d /tmp/cxsdk-ex-XXXXXX)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

"$confluxd" --role=space --dir="$work/store" --listen=tcp://127.0.0.1:0 --quiet > "$work/space.out" &
pid=$!
for _ in $(seq 100); do grep -q '^listening ' "$work/space.out" 2>/dev/null && break; sleep 0.1; done
space=$(awk '/^listening /{print $2}' "$work/space.out")
[ -n "$space" ] || { echo "examples: confluxd did not start"; exit 1; }

expect() { # name, output, wanted
  if [ "$2" != "$3" ]; then printf 'examples: %s printed\n  %s\nwanted\n  %s\n' "$1" "$2" "$3"; exit 1; fi
  echo "  $2"
}

"$bin/consumer" "$space" samples > "$work/consumer.out" &
consumer=$!
sleep 0.2 # (either order works; this one shows the direct writer-to-reader stream)
expect producer "$("$bin/producer" "$space" samples 20 256)" \
  "producer: wrote 20 segments of 256 samples to 'samples'"
wait $consumer || { echo "examples: consumer failed"; exit 1; }
expect consumer "$(cat "$work/consumer.out")" \
  "consumer: 5120 samples in 20 segments, energy sum 6552320.0, steps in order"
expect energy_mean "$(PYTHONPATH="$here/../python" PYTHONDONTWRITEBYTECODE=1 "$python" \
  "$here/python/energy_mean.py" "$space" samples means)" \
  "energy_mean: 20 segments of 'samples' summarised into 'means'"
expect summary "$("$bin/summary" "$space" means)" \
  "summary: 20 segments, 5120 samples, mean energy 1279.75"
echo "examples: 4 components ran against $space (C, Python, Go), all outputs as expected"
