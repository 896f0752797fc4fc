#!/usr/bin/env bash
# Runs a command in the SDK's sidecar mode: starts `confluxd --role=sidecar` on a socket in
# a fresh directory, sets CONFLUX_SOCKET for the command, and afterwards checks from the
# sidecar's /metrics that the command's calls really went through it (it served requests
# and nothing failed to reach an application). Exits with the command's status, or 1 when
# the sidecar did not start or served nothing.
#   tests/with_sidecar.sh build/bin/header_test
set -u
here=$(cd "$(dirname "$0")" && pwd)
confluxd=${CONFLUXD:-$here/../../dataplane/build/bin/confluxd}
dir=$(mktemp -d /tmp/cxsdk-sidecar-XXXXXX)
trap 'rm -rf "$dir"' EXIT
"$confluxd" --role=sidecar --socket="$dir/confluxd.sock" --http=127.0.0.1:0 \
  --listen=tcp://127.0.0.1:0 --quiet \
  > "$dir/out" 2> "$dir/log" &
pid=$!
for _ in $(seq 100); do grep -q '^listening' "$dir/out" 2>/dev/null && break; sleep 0.1; done
if ! grep -q '^listening' "$dir/out"; then
  echo "with_sidecar: the sidecar did not start:"; cat "$dir/log"; kill "$pid" 2>/dev/null; exit 1
fi
http=$(awk '{print $4}' "$dir/out")
metrics() {
  exec 3<>"/dev/tcp/${http%:*}/${http#*:}"
  printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3
  cat <&3
  exec 3<&-
}
CONFLUX_SOCKET="$dir/confluxd.sock" "$@"
rc=$?
served=$(metrics | awk '/^conflux_sidecar_requests_total/ {n += $2} END {print n + 0}')
drops=$(metrics | awk '/^conflux_sidecar_event_drops_total/ {print $2}')
kill -TERM "$pid"; wait "$pid"; src=$?
echo "with_sidecar: $* exited $rc; the sidecar served $served requests, dropped ${drops:-?} events, exited $src"
if [ "$rc" -eq 0 ] && { [ "$served" -eq 0 ] || [ "$src" -ne 0 ]; }; then
  echo "with_sidecar: the calls did not go through the sidecar, or it did not stop cleanly"; cat "$dir/log"; exit 1
fi
exit $rc
