#!/usr/bin/env bash
# The WAN scenario of e2e/TestChannelOverWAN on this host: demo-emitter and demo-receiver,
# each with a confluxd sidecar of its own on --transport=tls (certificates of one CA made
# here with openssl; the channel runtimes kept off shared memory, CONFLUX_CHAN_SHM=0, so
# the ticks cross a real TLS link). Checks that every tick arrives in order with its check
# value, that the emitter's sidecar names the link `tls` in /metrics, and that a receiver
# whose sidecar holds a certificate of another CA is refused.
#   demo/wan_pair_test.sh BIN_DIR DATAPLANE_BIN_DIR
set -euo pipefail
bin=$(realpath "$1"); dpbin=$(realpath "$2")
TICKS=${TICKS:-3000}
work=$(mktemp -d /tmp/cxwanpair.XXXXXX)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
[ -n "${KEEP:-}" ] && trap - EXIT
fail() { echo "demo wan pair test: FAIL: $*"; for f in "$work"/*.log; do echo "--- $f"; tail -15 "$f"; done; exit 1; }
command -v openssl >/dev/null || { echo "demo wan pair test: SKIP: no openssl command to make the certificates"; exit 0; }

# ca NAME: a CA; cert NAME CA: a certificate for both ends of a link (serverAuth, clientAuth)
ca() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj "/CN=$1" -keyout "$work/$1.key" -out "$work/$1.pem" 2>/dev/null
}
cert() {
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$1" \
    -keyout "$work/$1.key" -out "$work/$1.csr" 2>/dev/null
  printf 'basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth,clientAuth\n' >"$work/ext.cnf"
  openssl x509 -req -in "$work/$1.csr" -CA "$work/$2.pem" -CAkey "$work/$2.key" -CAcreateserial \
    -days 2 -extfile "$work/ext.cnf" -out "$work/$1.pem" 2>/dev/null
}
ca site-ca; ca other-ca
cert emitter site-ca; cert receiver site-ca; cert intruder other-ca

# pod NAME PROGRAM CERT [ENV...]: a component with its own tls sidecar
pod() {
  local name=$1 prog=$2 crt=$3; shift 3
  CONFLUX_CHAN_SHM=0 CONFLUX_TLS_CA=$work/site-ca.pem CONFLUX_TLS_CERT=$work/$crt.pem CONFLUX_TLS_KEY=$work/$crt.key \
    "$dpbin/confluxd" --role=sidecar --socket="$work/$name.sock" --transport=tls --listen=tls://127.0.0.1:0 \
    --http=127.0.0.1:0 >"$work/$name.sidecar.out" 2>"$work/$name.sidecar.log" &
  pids+=($!)
  for _ in $(seq 100); do grep -q '^listening' "$work/$name.sidecar.out" 2>/dev/null && break; sleep 0.1; done
  grep -q '^listening' "$work/$name.sidecar.out" || fail "the sidecar of $name did not start"
  env "$@" CONFLUX_SOCKET="$work/$name.sock" "$prog" >"$work/$name.log" 2>&1 &
  pids+=($!)
}
# wait_line FILE PATTERN SECONDS
wait_line() {
  for _ in $(seq $(($3 * 10))); do grep -q "$2" "$1" 2>/dev/null && return; sleep 0.1; done
  fail "no line '$2' in $(basename "$1") after $3 s"
}

pod emitter "$bin/demo-emitter" emitter DEMO_TICKS="$TICKS"
wait_line "$work/emitter.log" '^emitter: channel ' 20
id=$(sed -n 's/^emitter: channel \([^ ]*\) created.*/\1/p' "$work/emitter.log")
[[ $id == cx1:tls://* ]] || fail "the channel id '$id' does not name a tls address"

# another CA's certificate: the emitter's sidecar refuses the link, the receiver never opens
pod intruder "$bin/demo-receiver" intruder DEMO_CHANNEL="$id" DEMO_TICKS="$TICKS" DEMO_TIMEOUT=5
wait_line "$work/intruder.log" '^receiver: FAILED: the channel did not open' 60
grep -q "subscribed" "$work/intruder.log" && fail "the intruder subscribed"

pod receiver "$bin/demo-receiver" receiver DEMO_CHANNEL="$id" DEMO_TICKS="$TICKS" DEMO_TIMEOUT=120
wait_line "$work/receiver.log" '^receiver: \(complete\|FAILED\)' 180
grep -q "^receiver: complete: $TICKS/$TICKS ticks in order with their check values" "$work/receiver.log" ||
  fail "the receiver did not get every tick in order"
wait_line "$work/emitter.log" "^emitter: done: $TICKS ticks submitted" 20

http=$(awk '{print $4}' "$work/emitter.sidecar.out")
metrics=$(python3 -c 'import sys, urllib.request; print(urllib.request.urlopen("http://" + sys.argv[1] + "/metrics", timeout=10).read().decode())' "$http")
grep -q '^conflux_channel_link{.*link="tls"' <<<"$metrics" ||
  fail "the emitter's sidecar does not name the link tls: $(grep conflux_channel_link <<<"$metrics")"
echo "demo wan pair test: PASS: $TICKS ticks over tls in order with their check values; another CA's client refused"
