#!/usr/bin/env bash
# The microbenchmark suite over every raw link, with its peers, all in one run:
#   Conflux: micro_bench shm|tcp|ucx|tls (all tests + hot-spot),
#            layer_chan, layer_pipe (the event-channel and pipe layers: every test; the channel
#            on shm, tcp, ucx and tls, the pipe over a space server, confluxd --role=space,
#            its direct link on each of PIPE_LINKS)
#            micro_dpdk over memif, over af_packet (veth between two namespaces made here) and
#            its hot-spot through a memif switch
#   peers:   Open MPI (mpi_micro.c, OSU style; btl vader = shm, btl tcp = tcp, pml ucx = ucx),
#            ucx_perftest (UCX_TLS=posix for shm, $CX_BENCH_UCX_TLS for ucx), sockperf and
#            iperf3 (tcp), the bare DPDK peer (bench/transport/dpdk_pingpong.c, memif and
#            af_packet, and against N servers on each hot-spot fabric), ZeroMQ (peer_zmq.c: the
#            channel layer), NATS core (peer_nats.c: pipes), these two with hot-spots of their own
# Every row, with its command, goes to bench/results/micro.jsonl (replaced each run).
#   bench/micro/run.sh [--quick]       (env: REPS, CX_BENCH_UCX_TLS=tcp, HOT_PEERS, PARTS, PIPE_LINKS,
#                                       LAYER_DPDK_LINKS)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out="$here/../results"
mkdir -p "$out"
mode=full
case "${1:-}" in --quick) mode=quick ;; "") ;; *) echo "usage: $0 [--quick]" >&2; exit 2 ;; esac
quick() { [ "$mode" = quick ]; }
PY=${PYTHON:-/usr/bin/python3}
REPS=${REPS:-$(quick && echo 3 || echo 5)}
PREPS=${PREPS:-$(quick && echo 1 || echo 3)}   # repetitions of the external peers' runs
HOT_PEERS=${HOT_PEERS:-$(quick && echo 2 || echo 4)}
PARTS=${PARTS:-all}   # a subset: links dpdk chan pipe mpi ucx_perftest sockperf iperf3
PIPE_LINKS=${PIPE_LINKS:-tcp shm ucx tls}   # the pipe layer's direct links (a subset to run fewer)
UTLS=${CX_BENCH_UCX_TLS:-tcp}
TMO=$(quick && echo 90 || echo 1200)
export UCX_NET_DEVICES=lo UCX_WARN_UNUSED_ENV_VARS=n
J="$out/micro.jsonl"
: >"$J"
make -s -C "$here" -j2 >/dev/null || { echo "bench/micro: build failed" >&2; exit 1; }
make -s -C "$here/../transport" -f dpdk.mk >/dev/null 2>&1 || true
B="$here/build"
tmp=$(mktemp -d /tmp/cxmicro.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  declare -F afp_down >/dev/null && afp_down   # the namespaces go, whatever happened
  rm -rf "$tmp"
}
trap cleanup EXIT
have() { command -v "$1" >/dev/null 2>&1; }
port() { echo $((20000 + RANDOM % 20000)); }
status=0
tag() { "$PY" "$here/collect.py" tag --out "$J" --cmd "$1" ${2:+--impl "$2"}; }
point() { "$PY" "$here/collect.py" point --out "$J" "$@"; }
say() { echo "bench/micro [$(date +%T)]: $*" >&2; }
part() { [[ " $PARTS " == *" all "* || " $PARTS " == *" $1 "* ]]; }
# the peers' sizes and counts, as micro_tests.c's
LATS=$(quick && echo "8 1024 65536" || echo "8 64 512 4096 32768 262144 1048576")
BWS=$(quick && echo "64 65536" || echo "64 512 4096 32768 262144 1048576")
QS=$(quick && echo "16" || echo "8 16 64 100")
lat_iters() { local n; n=$(quick && echo 300 || echo 20000); [ "$1" -gt 65536 ] && n=500; echo "$n"; }

# --- Conflux raw links -------------------------------------------------------------------
# tls: a CA and one certificate (serverAuth + clientAuth) both ends use
mkcerts() {
  local d="$tmp/pki"; mkdir -p "$d"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=bench-ca \
    -keyout "$d/ca.key" -out "$d/ca.pem" 2>/dev/null &&
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost \
    -keyout "$d/node.key" -out "$d/node.csr" 2>/dev/null &&
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' >"$d/ext" &&
  openssl x509 -req -in "$d/node.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
    -days 2 -extfile "$d/ext" -out "$d/node.pem" 2>/dev/null &&
  export CONFLUX_TLS_CA="$d/ca.pem" CONFLUX_TLS_CERT="$d/node.pem" CONFLUX_TLS_KEY="$d/node.key"
}
mkcerts || say "could not make TLS certificates (tls rows will be missing)"
for link in shm tcp ucx tls; do
  part links || break
  env=""; [ "$link" = ucx ] && env="UCX_TLS=$UTLS "
  if ! env ${env:+UCX_TLS=$UTLS} "$B/micro_bench" "$link" lat quick 1 >/dev/null 2>"$tmp/probe.err"; then
    say "$link: not measured: $(tail -1 "$tmp/probe.err")"; continue
  fi
  for t in all hotspot; do
    cmd="${env}bench/micro/build/micro_bench $link $t $mode $REPS"; [ $t = hotspot ] && cmd="$cmd $HOT_PEERS"
    say "$cmd"
    env ${env:+UCX_TLS=$UTLS} timeout "$TMO" "$B/micro_bench" "$link" "$t" "$mode" "$REPS" \
      $([ $t = hotspot ] && echo "$HOT_PEERS") 2>"$tmp/err" | tag "$cmd" ||
      { say "$link $t failed: $(tail -2 "$tmp/err")"; status=1; }
  done
done
# --- dpdk: a memif pair, net_af_packet on a veth pair between two network namespaces made
# here (removed on exit), and the hot-spot through a bare DPDK memif switch. Every end is a
# process of its own (one EAL each); the client measures. Peer: bench/transport/dpdk_pingpong.
PP="$here/../transport/build/dpdk_pingpong"
NSA=() NSB=() NETNS=()
mkns() { # <name>: a network namespace with IPv6 off (no stray frames on its veths), remembered
  ip netns add "$1" && NETNS+=("$1") && ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
}
netns_ok() {
  [ "$(id -u)" = 0 ] || { echo "network namespaces need root" >&2; return 1; }
  have ip || { echo "the ip command (iproute2) is missing" >&2; return 1; }
}
afp_up() { # two namespaces NS_A, NS_B joined by a veth pair VA-VB
  NS_A=cxmicro-a-$$ NS_B=cxmicro-b-$$ VA=cxma$(($$ % 100000)) VB=cxmb$(($$ % 100000))
  netns_ok && mkns "$NS_A" && mkns "$NS_B" &&
    ip link add "$VA" netns "$NS_A" type veth peer name "$VB" netns "$NS_B" &&
    ip -n "$NS_A" link set "$VA" up && ip -n "$NS_B" link set "$VB" up
}
afp_down() { # deleting a namespace takes its ends of veth pairs, and so the pairs, along
  local n
  for n in "${NETNS[@]}"; do ip netns del "$n" 2>/dev/null; done
  NETNS=()
  return 0
}
dpdk_stop() { # <pid>: a server exits once its client is gone; give it 5 s
  for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  kill "$1" 2>/dev/null; wait "$1" 2>/dev/null
  return 0
}
dpdk_pair() { # <program> <server port> <client port> <client args...>: the client's JSON lines
  local prog=$1 sp=$2 cp=$3; shift 3
  "${NSA[@]}" "$prog" server "$sp" >"$tmp/dpdk-server.log" 2>&1 & local s=$!; pids+=("$s")
  for _ in $(seq 300); do grep -q '^ready' "$tmp/dpdk-server.log" 2>/dev/null && break; sleep 0.1; done
  timeout "$TMO" "${NSB[@]}" "$prog" client "$cp" "$@" 2>>"$tmp/dpdk-client.log" | grep '^{'
  dpdk_stop "$s"
}
bare_specs() { # the peer's tests, as dpdk_pingpong <test>:<n>:<size>[:q:compute_us:buffers:reuse_pct]
  local mb sz q n c
  mb=$(quick && echo 8 || echo 128)
  for sz in $LATS; do echo "lat:$(lat_iters "$sz"):$sz"; done
  for q in $QS; do for sz in $BWS; do
    n=$((mb * 1048576 / (sz + 48))); [ "$n" -gt 50000 ] && n=50000; echo "bw:$n:$sz:$q"   # 50000: as micro_tests.c
  done; done
  for sz in $BWS; do
    [ "$sz" -le 65536 ] && echo "bilat:$(lat_iters "$sz"):$sz"
    n=$((mb * 1048576 / (sz + 48))); [ "$n" -gt 50000 ] && n=50000; echo "bibw:$n:$sz"
  done
  for sz in 64 65536; do # CPU per message at Q = 16
    n=$((mb * 1048576 / (sz + 48))); [ "$n" -gt 50000 ] && n=50000; echo "cpu:$n:$sz:16"
  done
  n=$(quick && echo 256 || echo 2048)
  for c in $(quick && echo "0 2 5 10" || echo "0 2 5 10 20 50 100"); do echo "overlap:$n:65536:16:$c"; done
  for c in $(quick && echo "1 16 256" || echo "1 4 16 64 256"); do echo "reuse_fifo:$n:65536:16:0:$c"; done
  for c in $(quick && echo "0 50 100" || echo "0 25 50 75 100"); do echo "reuse_pct:$n:65536:16:0:256:$c"; done
}
dpdk_links() {
  local link sp cp pre specs
  for spec in "dpdk|$tmp/memif.sock|$tmp/memif.sock" "af_packet|af_packet:VA|af_packet:VB"; do
    IFS='|' read -r link sp cp <<<"$spec"
    pre=""
    if [ "$link" = af_packet ]; then
      if ! afp_up 2>"$tmp/afp.err"; then
        say "af_packet: not measured: $(tail -1 "$tmp/afp.err")"; afp_down; continue
      fi
      sp=af_packet:$VA cp=af_packet:$VB NSA=(ip netns exec "$NS_A") NSB=(ip netns exec "$NS_B")
      pre="ip netns exec A "
    fi
    local shown_s=${sp/$tmp\/memif.sock/S} shown_c=${cp/$tmp\/memif.sock/S}
    shown_s=${shown_s/:cxma*/:VA} shown_c=${shown_c/:cxmb*/:VB}   # A, B: namespaces joined by veth VA-VB
    cmd="${pre}bench/micro/build/micro_dpdk server $shown_s & ${pre/A/B}bench/micro/build/micro_dpdk client $shown_c all $mode $REPS"
    say "$cmd"
    dpdk_pair "$B/micro_dpdk" "$sp" "$cp" all "$mode" "$REPS" | tag "$cmd"
    if [ -x "$PP" ]; then
      mapfile -t specs < <(bare_specs)
      cmd="${pre}bench/transport/build/dpdk_pingpong server $shown_s & ${pre/A/B}bench/transport/build/dpdk_pingpong client $shown_c <test>:<n>:<size>... ($PREPS runs)"
      say "$cmd"
      for _ in $(seq "$PREPS"); do dpdk_pair "$PP" "$sp" "$cp" "${specs[@]}"; done |
        "$PY" "$here/collect.py" bare --out "$J" --link "$link" --cmd "${cmd/<test>:<n>:<size>.../${specs[*]}}" \
          --note "$([ "$link" = af_packet ] && echo "net_af_packet, 4096-frame ring, veth between two namespaces" || echo memif)"
    fi
    NSA=() NSB=()
    [ "$link" = af_packet ] && afp_down
  done
}
# the bare DPDK peer's hot-spot on the fabric the caller made: servers 1..HOT_PEERS, then the
# hot node (client) once they are ready, PREPS times; hs_port <j> gives end j's port (0: the
# hot node), hs_ns <j> the words that run a command in its namespace (none for memif)
bare_hotspot() { # <link> <note> <the command shown, <specs> standing for the tests>
  [ -x "$PP" ] || return 0
  local link=$1 note=$2 shown=$3 j k s srv specs=() wq
  wq=$(quick && echo 15 || echo 255)   # micro_tests.c's windows of 16 x 64 KiB, split as its hot-spot does
  for k in $(seq "$HOT_PEERS"); do
    specs+=("hotspot_lat:$(quick && echo 200 || echo 5000):8:$k" "hotspot_bw:$((wq / k + 2)):65536:16:$k")
  done
  say "${shown/<specs>/${specs[*]}} ($PREPS runs)"
  for _ in $(seq "$PREPS"); do
    srv=()
    for j in $(seq "$HOT_PEERS"); do
      $(hs_ns "$j") "$PP" server "$(hs_port "$j")" "$j" >"$tmp/bhot-$j.log" 2>&1 & s=$!; pids+=("$s"); srv+=("$s")
      for _ in $(seq 300); do grep -q '^ready' "$tmp/bhot-$j.log" 2>/dev/null && break; sleep 0.1; done
    done
    timeout "$TMO" $(hs_ns 0) "$PP" client "$(hs_port 0)" "${specs[@]}" 2>>"$tmp/dpdk-client.log" | grep '^{'
    for s in "${srv[@]}"; do dpdk_stop "$s"; done
  done | "$PY" "$here/collect.py" bare --out "$J" --link "$link" --cmd "${shown/<specs>/${specs[*]}}" --note "$note"
}
dpdk_hotspot() { # the hot node and HOT_PEERS servers, all memif clients of one bare DPDK switch
  local sock="$tmp/switch.sock" prefix="cx-micro-switch-$$" sw s j
  "$B/memif_switch" "$sock" $((HOT_PEERS + 1)) "$prefix" >"$tmp/switch.log" 2>&1 & sw=$!; pids+=("$sw")
  for _ in $(seq 300); do grep -q '^ready' "$tmp/switch.log" 2>/dev/null && break; sleep 0.1; done
  local srv=()
  for j in $(seq "$HOT_PEERS"); do
    "$B/micro_dpdk" server "switch:$sock:$j" "10.79.0.$j" block >"$tmp/hot-$j.log" 2>&1 & s=$!; pids+=("$s"); srv+=("$s")
    for _ in $(seq 300); do grep -q '^ready' "$tmp/hot-$j.log" 2>/dev/null && break; sleep 0.1; done
  done
  cmd="bench/micro/build/memif_switch S $((HOT_PEERS + 1)) P & for j in 1..$HOT_PEERS: bench/micro/build/micro_dpdk server switch:S:\$j 10.79.0.\$j block & bench/micro/build/micro_dpdk client switch:S:0 hotspot $mode $REPS $HOT_PEERS"
  say "$cmd"
  timeout "$TMO" "$B/micro_dpdk" client "switch:$sock:0" hotspot "$mode" "$REPS" "$HOT_PEERS" \
    2>>"$tmp/dpdk-client.log" | tag "$cmd"
  for s in "${srv[@]}"; do dpdk_stop "$s"; done
  hs_port() { echo "switch:$sock:$1"; }
  hs_ns() { :; }
  bare_hotspot dpdk "memif through memif_switch; servers back off with short sleeps when idle" \
    "bench/micro/build/memif_switch S $((HOT_PEERS + 1)) P & for j in 1..$HOT_PEERS: bench/transport/build/dpdk_pingpong server switch:S:\$j \$j & bench/transport/build/dpdk_pingpong client switch:S:0 <specs>"
  kill "$sw" 2>/dev/null; wait "$sw" 2>/dev/null
  rm -rf "/var/run/dpdk/$prefix"
}
dpdk_hotspot_afp() { # the hot node and HOT_PEERS servers, each in a namespace of its own,
  # on veths to a Linux bridge in one more namespace; the driver on net_af_packet
  local br=cxmicro-br-$$ j s srv=() id=$(($$ % 10000))
  if ! { netns_ok && mkns "$br" && ip -n "$br" link add cxbr0 type bridge &&
         ip -n "$br" link set cxbr0 up; } 2>"$tmp/afp.err"; then
    say "af_packet hot-spot: not measured: $(tail -1 "$tmp/afp.err")"; afp_down; return
  fi
  for j in $(seq 0 "$HOT_PEERS"); do # 0 = the hot node
    if ! { mkns "cxmicro-h$j-$$" &&
           ip link add "cxh$j-$id" netns "cxmicro-h$j-$$" type veth peer name "cxb$j-$id" netns "$br" &&
           ip -n "$br" link set "cxb$j-$id" master cxbr0 up && ip -n "cxmicro-h$j-$$" link set "cxh$j-$id" up; } \
         2>"$tmp/afp.err"; then
      say "af_packet hot-spot: not measured: $(tail -1 "$tmp/afp.err")"; afp_down; return
    fi
  done
  for j in $(seq "$HOT_PEERS"); do
    ip netns exec "cxmicro-h$j-$$" "$B/micro_dpdk" server "af_packet:cxh$j-$id" "10.79.0.$j" block \
      >"$tmp/hot-$j.log" 2>&1 & s=$!; pids+=("$s"); srv+=("$s")
    for _ in $(seq 300); do grep -q '^ready' "$tmp/hot-$j.log" 2>/dev/null && break; sleep 0.1; done
  done
  cmd="for j in 1..$HOT_PEERS: ip netns exec Hj bench/micro/build/micro_dpdk server af_packet:VHj 10.79.0.\$j block & ip netns exec H0 bench/micro/build/micro_dpdk client af_packet:VH0 hotspot $mode $REPS $HOT_PEERS (VHj: veth from namespace Hj to a bridge)"
  say "$cmd"
  timeout "$TMO" ip netns exec "cxmicro-h0-$$" "$B/micro_dpdk" client "af_packet:cxh0-$id" hotspot "$mode" "$REPS" \
    "$HOT_PEERS" 2>>"$tmp/dpdk-client.log" | tag "$cmd"
  for s in "${srv[@]}"; do dpdk_stop "$s"; done
  hs_port() { echo "af_packet:cxh$1-$id"; }
  hs_ns() { echo ip netns exec "cxmicro-h$1-$$"; }
  bare_hotspot af_packet "net_af_packet, 4096-frame rings, each end in a namespace with a veth to a Linux bridge; servers back off with short sleeps when idle" \
    "for j in 1..$HOT_PEERS: ip netns exec Hj bench/transport/build/dpdk_pingpong server af_packet:VHj \$j & ip netns exec H0 bench/transport/build/dpdk_pingpong client af_packet:VH0 <specs> (VHj: veth from namespace Hj to a bridge)"
  afp_down
}
if [ -x "$B/micro_dpdk" ]; then
  part dpdk && dpdk_links
  part dpdk && [ -x "$B/memif_switch" ] && dpdk_hotspot
  part dpdk && dpdk_hotspot_afp
else
  say "dpdk: not measured (DPDK not installed)"
fi

# the event-channel layer on each link its runtime can join two processes of one host over:
# shm (what it picks by itself), tcp (CONFLUX_CHAN_SHM=0), and ucx and tls when both runtimes
# listen there (LAYER_CHAN_LISTEN); each row names the link its stats report
for link in shm tcp ucx tls; do
  part chan && [ -x "$B/layer_chan" ] || break
  case $link in
    shm) env="CONFLUX_CHAN_SHM=1" ;;
    tcp) env="CONFLUX_CHAN_SHM=0" ;;
    ucx) env="CONFLUX_CHAN_SHM=0 LAYER_CHAN_LISTEN=ucx://127.0.0.1:0 UCX_TLS=$UTLS" ;;
    tls) [ -n "${CONFLUX_TLS_CA:-}" ] || { say "channel over tls: not measured (no certificates)"; continue; }
         env="CONFLUX_CHAN_SHM=0 LAYER_CHAN_LISTEN=tls://127.0.0.1:0" ;;
  esac
  cmd="$env bench/micro/build/layer_chan $mode $REPS $HOT_PEERS"
  say "$cmd"
  env $env timeout "$TMO" "$B/layer_chan" "$mode" "$REPS" "$HOT_PEERS" 2>"$tmp/err" | tag "$cmd" ||
    { say "layer_chan ($link) failed: $(tail -2 "$tmp/err")"; status=1; }
done
# its peer with the same tests: ZeroMQ (PUB/SUB + PUSH/PULL, as bench/channel uses it)
if part chan && [ -x "$B/peer_zmq" ]; then
  cmd="bench/micro/build/peer_zmq $mode $REPS $HOT_PEERS"   # the hot-spot too, with 1..HOT_PEERS echo processes
  say "$cmd"
  timeout "$TMO" "$B/peer_zmq" "$mode" "$REPS" "$HOT_PEERS" 2>"$tmp/err" | tag "$cmd" zmq ||
    { say "peer_zmq failed: $(tail -2 "$tmp/err")"; status=1; }
elif part chan; then
  say "channel layer's ZeroMQ peer not measured (libzmq-dev missing)"
fi

# the pipe layer, over one space server (no fsync: the messaging cost, not the disk's), once
# per link its direct writer-to-reader link can listen on (CONFLUX_PIPE_LISTEN, a bare scheme:
# that transport's default address); every segment also goes to the space over tcp, by
# design. Each row names the link the reader's descriptor reports (pi_link).
CONFLUXD="$here/../../dataplane/build/bin/confluxd"
if ! part pipe; then :
elif [ -x "$B/layer_pipe" ] && [ -x "$CONFLUXD" ]; then
  mkdir -p "$tmp/space"
  "$CONFLUXD" --role=space --dir="$tmp/space" --listen=tcp://127.0.0.1:0 --fsync=none --quiet \
    >"$tmp/space.out" 2>"$tmp/space.err" & sp=$!; pids+=("$sp")
  for _ in $(seq 100); do grep -q '^listening' "$tmp/space.out" 2>/dev/null && break; sleep 0.05; done
  addr=$(awk '/^listening/ {print $2}' "$tmp/space.out")
  if [ -n "$addr" ]; then
    for link in tcp shm ucx tls; do
      if [[ " $PIPE_LINKS " != *" $link "* ]]; then
        say "pipe over $link: not measured (not in PIPE_LINKS=\"$PIPE_LINKS\")"
        continue
      fi
      env="CONFLUX_PIPE_LISTEN=$link"
      case $link in
        ucx) env="$env UCX_TLS=$UTLS" ;;
        tls) [ -n "${CONFLUX_TLS_CA:-}" ] || { say "pipe over tls: not measured (no certificates)"; continue; } ;;
      esac
      cmd="confluxd --role=space --dir=D --listen=tcp://127.0.0.1:0 --fsync=none & $env bench/micro/build/layer_pipe ADDR $mode $REPS $HOT_PEERS"
      say "$cmd"
      env $env timeout "$TMO" "$B/layer_pipe" "$addr" "$mode" "$REPS" "$HOT_PEERS" 2>"$tmp/err" | tag "$cmd" ||
        { say "layer_pipe ($link) failed: $(tail -2 "$tmp/err")"; status=1; }
    done
  else
    say "pipe layer not measured: confluxd did not start: $(tail -2 "$tmp/space.err")"; status=1
  fi
  kill "$sp" 2>/dev/null; wait "$sp" 2>/dev/null
else
  say "pipe layer not measured (dataplane/build/bin/confluxd not built)"
fi
# its peer with the same tests: NATS core through a nats-server of its own (nothing kept)
if part pipe && [ -x "$B/peer_nats" ] && have nats-server; then
  np=$(port)
  printf 'listen: 127.0.0.1:%s\nmax_payload: 2097152\n' "$np" >"$tmp/nats.conf"   # 1 MiB segments fit
  nats-server -c "$tmp/nats.conf" >"$tmp/nats.log" 2>&1 & ns=$!; pids+=("$ns")
  for _ in $(seq 100); do grep -q 'Server is ready' "$tmp/nats.log" 2>/dev/null && break; sleep 0.05; done
  cmd="nats-server -c C (listen 127.0.0.1:P, max_payload 2 MiB) & bench/micro/build/peer_nats 127.0.0.1:P $mode $REPS $HOT_PEERS"
  say "$cmd"
  timeout "$TMO" "$B/peer_nats" "127.0.0.1:$np" "$mode" "$REPS" "$HOT_PEERS" 2>"$tmp/err" | tag "$cmd" nats ||
    { say "peer_nats failed: $(tail -2 "$tmp/err")"; status=1; }
  kill "$ns" 2>/dev/null; wait "$ns" 2>/dev/null
elif part pipe; then
  say "pipe layer's NATS peer not measured (nats-server missing)"
fi

# the event-channel and pipe layers over the dpdk driver (layer_dpdk.h: LAYER_DPDK gives each
# of their processes a port): on memif, every process a client of one bare DPDK switch
# (hot-spot peers included), and on af_packet, the two processes in namespaces A and B
# joined by veth VA-VB (the pair's tests; the hot-spot then runs on a bridge fabric of its
# own, layers_hotspot_afp); the pipe's space server is reached over a second veth pair with
# kernel addresses (10.80.0.1 in A, 10.80.0.2 in B)
layers_dpdk() { # <link> <switch socket or ""> <addr of the space or ""> <pre-command...>
  local link=$1 sock=$2 saddr=$3; shift 3
  local dspec hot shown pre="" reps=$REPS
  quick && reps=1   # quick: one repetition (make bench-quick stays under five minutes)
  if [ "$link" = dpdk ]; then dspec="memif:$sock" hot=$HOT_PEERS shown="memif:S"
  else dspec="af_packet:$NS_B:$VA:$VB" hot=0 shown="af_packet:B:VA:VB" pre="ip netns exec A "; fi
  if part chan; then
    cmd="${pre}env LAYER_DPDK=$shown bench/micro/build/layer_chan $mode $reps $hot"
    say "$cmd"
    "$@" env LAYER_DPDK="$dspec" timeout "$TMO" "$B/layer_chan" "$mode" "$reps" "$hot" 2>"$tmp/err" |
      tag "$cmd" || { say "layer_chan ($link) failed: $(tail -2 "$tmp/err")"; status=1; }
  fi
  if part pipe && [ -n "$saddr" ]; then
    cmd="confluxd --role=space --dir=D --listen=$([ "$link" = dpdk ] && echo tcp://127.0.0.1:0 || echo tcp://10.80.0.1:0) --fsync=none & ${pre}env LAYER_DPDK=$shown bench/micro/build/layer_pipe ADDR $mode $reps $hot"
    say "$cmd"
    "$@" env LAYER_DPDK="$dspec" timeout "$TMO" "$B/layer_pipe" "$saddr" "$mode" "$reps" "$hot" 2>"$tmp/err" |
      tag "$cmd" || { say "layer_pipe ($link) failed: $(tail -2 "$tmp/err")"; status=1; }
  fi
}
space_up() { # [pre-command...] -> the space server's address on stdout (its pid in $lsp)
  local ip=127.0.0.1; [ $# -gt 0 ] && ip=10.80.0.1
  # the last server's "listening" line goes first: the new one truncates the file only once
  # its background shell runs, and the wait below could read the old address before that
  rm -rf "$tmp/lspace" "$tmp/lspace.out"; mkdir -p "$tmp/lspace"
  "$@" "$CONFLUXD" --role=space --dir="$tmp/lspace" --listen=tcp://$ip:0 --fsync=none --quiet \
    >"$tmp/lspace.out" 2>"$tmp/lspace.err" & lsp=$!; pids+=("$lsp")
  for _ in $(seq 100); do grep -q '^listening' "$tmp/lspace.out" 2>/dev/null && break; sleep 0.05; done
}
# the layers' hot-spot over af_packet: the measuring process (0), the pair's sink or echo
# process (1) and the HOT_PEERS hot-spot peers (2..) each in a namespace of its own
# (cxmicro-lJ-$$) with a veth (cxlJ-$id) to a Linux bridge in one more namespace, as the raw
# driver's af_packet hot-spot; a second veth each to a second bridge carries the kernel's
# tcp to the pipe's space server (10.80.0.1 in namespace 0; namespace J has 10.80.0.J+1), so
# the af_packet rings carry only the driver's frames. The layers run the hot-spot alone here
# (LAYER_HOTSPOT_ONLY=1): their pair's tests ran on the veth pair.
layers_hotspot_afp() {
  local br=cxmicro-lbr-$$ id=$(($$ % 10000)) j n=$((HOT_PEERS + 1)) dspec shown reps=$REPS saddr=""
  quick && reps=1
  [ "$HOT_PEERS" -gt 0 ] || return 0
  if ! { netns_ok && mkns "$br" && ip -n "$br" link add cxbr0 type bridge && ip -n "$br" link set cxbr0 up &&
         ip -n "$br" link add cxkbr0 type bridge && ip -n "$br" link set cxkbr0 up; } 2>"$tmp/afp.err"; then
    say "layers' af_packet hot-spot: not measured: $(tail -1 "$tmp/afp.err")"; afp_down; return
  fi
  dspec="af_packet:cxmicro-l1-$$:cxl0-$id:cxl1-$id" shown="af_packet:L1:VL0:VL1"
  for j in $(seq 0 "$n"); do
    if ! { mkns "cxmicro-l$j-$$" && ip -n "cxmicro-l$j-$$" link set lo up &&
           ip link add "cxl$j-$id" netns "cxmicro-l$j-$$" type veth peer name "cxlb$j-$id" netns "$br" &&
           ip -n "$br" link set "cxlb$j-$id" master cxbr0 up && ip -n "cxmicro-l$j-$$" link set "cxl$j-$id" up &&
           ip link add "cxk$j-$id" netns "cxmicro-l$j-$$" type veth peer name "cxkb$j-$id" netns "$br" &&
           ip -n "$br" link set "cxkb$j-$id" master cxkbr0 up &&
           ip -n "cxmicro-l$j-$$" addr add "10.80.0.$((j + 1))/24" dev "cxk$j-$id" &&
           ip -n "cxmicro-l$j-$$" link set "cxk$j-$id" up; } 2>"$tmp/afp.err"; then
      say "layers' af_packet hot-spot: not measured: $(tail -1 "$tmp/afp.err")"; afp_down; return
    fi
    [ "$j" -ge 2 ] && dspec="$dspec:cxmicro-l$j-$$:cxl$j-$id" shown="$shown:L$j:VL$j"
  done
  local fabric="(namespaces L0..L$n, each with veth VLj to a Linux bridge in one more namespace)"
  if part chan; then
    cmd="ip netns exec L0 env LAYER_DPDK=$shown LAYER_HOTSPOT_ONLY=1 bench/micro/build/layer_chan $mode $reps $HOT_PEERS $fabric"
    say "$cmd"
    ip netns exec "cxmicro-l0-$$" env LAYER_DPDK="$dspec" LAYER_HOTSPOT_ONLY=1 timeout "$TMO" \
      "$B/layer_chan" "$mode" "$reps" "$HOT_PEERS" 2>"$tmp/err" | tag "$cmd" ||
      { say "layer_chan (af_packet hot-spot) failed: $(tail -2 "$tmp/err")"; status=1; }
  fi
  if part pipe && [ -x "$CONFLUXD" ]; then
    lsp=""
    space_up ip netns exec "cxmicro-l0-$$" && saddr=$(awk '/^listening/ {print $2}' "$tmp/lspace.out")
    if [ -n "$saddr" ]; then
      cmd="ip netns exec L0 confluxd --role=space --dir=D --listen=tcp://10.80.0.1:0 --fsync=none & ip netns exec L0 env LAYER_DPDK=$shown LAYER_HOTSPOT_ONLY=1 bench/micro/build/layer_pipe ADDR $mode $reps $HOT_PEERS $fabric"
      say "$cmd"
      ip netns exec "cxmicro-l0-$$" env LAYER_DPDK="$dspec" LAYER_HOTSPOT_ONLY=1 timeout "$TMO" \
        "$B/layer_pipe" "$saddr" "$mode" "$reps" "$HOT_PEERS" 2>"$tmp/err" | tag "$cmd" ||
        { say "layer_pipe (af_packet hot-spot) failed: $(tail -2 "$tmp/err")"; status=1; }
    else
      say "pipe layer's af_packet hot-spot: not measured: the space server did not start"; status=1
    fi
    [ -n "$lsp" ] && { kill "$lsp" 2>/dev/null; wait "$lsp" 2>/dev/null; }
  fi
  afp_down
}
LAYER_DPDK_LINKS=${LAYER_DPDK_LINKS:-dpdk af_packet}   # the layers' dpdk links (a subset to run fewer)
if ! { part chan || part pipe; }; then :
elif [ ! -x "$B/memif_switch" ]; then
  say "channel and pipe layers over dpdk: not measured (DPDK not installed)"
else
  for link in dpdk af_packet; do
    if [[ " $LAYER_DPDK_LINKS " != *" $link "* ]]; then
      say "layers over $link: not measured (not in LAYER_DPDK_LINKS=\"$LAYER_DPDK_LINKS\")"; continue
    fi
    lsp="" saddr=""
    if [ "$link" = dpdk ]; then
      sock="$tmp/lswitch.sock" prefix="cx-micro-lswitch-$$"
      "$B/memif_switch" "$sock" $((HOT_PEERS + 2)) "$prefix" >"$tmp/lswitch.log" 2>&1 & lsw=$!; pids+=("$lsw")
      for _ in $(seq 300); do grep -q '^ready' "$tmp/lswitch.log" 2>/dev/null && break; sleep 0.1; done
      [ -x "$CONFLUXD" ] && space_up && saddr=$(awk '/^listening/ {print $2}' "$tmp/lspace.out")
      layers_dpdk dpdk "$sock" "$saddr"
      [ -n "$lsp" ] && { kill "$lsp" 2>/dev/null; wait "$lsp" 2>/dev/null; }
      kill "$lsw" 2>/dev/null; wait "$lsw" 2>/dev/null
      rm -rf "/var/run/dpdk/$prefix"
    else
      KA=cxka$(($$ % 100000)) KB=cxkb$(($$ % 100000))
      if ! { afp_up && ip -n "$NS_A" link set lo up && ip -n "$NS_B" link set lo up &&
             ip link add "$KA" netns "$NS_A" type veth peer name "$KB" netns "$NS_B" &&
             ip -n "$NS_A" addr add 10.80.0.1/24 dev "$KA" && ip -n "$NS_B" addr add 10.80.0.2/24 dev "$KB" &&
             ip -n "$NS_A" link set "$KA" up && ip -n "$NS_B" link set "$KB" up; } 2>"$tmp/afp.err"; then
        say "layers over af_packet: not measured: $(tail -1 "$tmp/afp.err")"; afp_down; continue
      fi
      [ -x "$CONFLUXD" ] && space_up ip netns exec "$NS_A" && saddr=$(awk '/^listening/ {print $2}' "$tmp/lspace.out")
      layers_dpdk af_packet "" "$saddr" ip netns exec "$NS_A"
      [ -n "$lsp" ] && { kill "$lsp" 2>/dev/null; wait "$lsp" 2>/dev/null; }
      afp_down
      layers_hotspot_afp
    fi
    part pipe && [ -z "$saddr" ] && { say "pipe layer over $link: not measured: the space server did not start"; status=1; }
  done
fi

# --- peers ------------------------------------------------------------------------------
if ! part mpi; then :
elif [ -x "$B/mpi_micro" ]; then
  M="mpirun --allow-run-as-root --oversubscribe --mca btl_tcp_if_include lo"
  # link | the MCA selection standing for it
  for sel in "shm|--mca pml ob1 --mca btl self,vader" "tcp|--mca pml ob1 --mca btl self,tcp" \
             "ucx|--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any -x UCX_TLS=$UTLS -x UCX_NET_DEVICES=lo"; do
    link=${sel%%|*} mca=${sel#*|}
    cmd="$M -np 2 $mca bench/micro/build/mpi_micro $link all $mode $REPS"
    say "$cmd"
    timeout "$TMO" $M -np 2 $mca "$B/mpi_micro" "$link" all "$mode" "$REPS" 2>"$tmp/err" |
      tag "$cmd" openmpi || { say "mpi $link failed: $(tail -2 "$tmp/err")"; status=1; }
    for np in $(seq 1 "$HOT_PEERS"); do
      cmd="$M -np $((np + 1)) $mca bench/micro/build/mpi_micro $link hotspot $mode $REPS"
      timeout "$TMO" $M -np $((np + 1)) $mca "$B/mpi_micro" "$link" hotspot "$mode" "$REPS" \
        2>"$tmp/err" | tag "$cmd" openmpi || { say "mpi $link hotspot failed"; status=1; }
    done
  done
else
  say "Open MPI peer not measured (mpicc missing)"
fi


if part ucx_perftest && have ucx_perftest; then
  pt() { # <tls> <test> <size> <iters> [-O q] -> "Final:" fields
    local p; p=$(port)
    UCX_TLS=$1 timeout 60 ucx_perftest -p "$p" >"$tmp/pt.log" 2>&1 & local s=$!; pids+=("$s")
    sleep 0.4
    UCX_TLS=$1 timeout 60 ucx_perftest 127.0.0.1 -p "$p" -t "$2" -s "$3" -n "$4" ${5:+-O $5} 2>&1 |
      awk '/^Final:/ {print $3, $4, $7}'
    wait "$s" 2>/dev/null
  }
  for tp in "shm posix" "ucx $UTLS"; do
    set -- $tp; link=$1 tls=$2
    for sz in $LATS; do
      n=$(lat_iters "$sz"); v=()
      for _ in $(seq "$PREPS"); do v+=("$(pt "$tls" ucp_am_lat "$sz" "$n" | awk '{print $1}')"); done
      point --impl ucx_perftest --link "$link" --test lat --params "{\"size\":$sz}" --metric one_way_us \
        --unit us --n "$n" --cmd "UCX_TLS=$tls ucx_perftest 127.0.0.1 -t ucp_am_lat -s $sz -n $n" --vals "${v[@]}"
    done
    for q in $QS; do for sz in $BWS; do
      mb=$(quick && echo 8 || echo 256); n=$((mb * 1048576 / (sz + 48))); [ "$n" -gt 200000 ] && n=200000
      v=()
      for _ in $(seq "$PREPS"); do
        mib=$(pt "$tls" ucp_am_bw "$sz" "$n" "$q" | awk '{print $3}')
        v+=("$("$PY" -c "import sys; print(float(sys.argv[1]) * 1.048576)" "${mib:-nan}" 2>/dev/null)")
      done
      point --impl ucx_perftest --link "$link" --test bw --params "{\"size\":$sz,\"q\":$q}" --metric MBps \
        --unit MB/s --n "$n" --cmd "UCX_TLS=$tls ucx_perftest 127.0.0.1 -t ucp_am_bw -s $sz -n $n -O $q" --vals "${v[@]}"
    done; done
  done
fi
if part sockperf && have sockperf; then
  secs=$(quick && echo 1 || echo 3)
  for sz in $LATS; do
    m=$sz; [ "$m" -lt 14 ] && m=14; [ "$m" -gt 65000 ] && continue   # sockperf: 14 B .. 64 KB
    v=()
    for _ in $(seq "$PREPS"); do
      p=$(port)
      timeout 60 sockperf sr --tcp -i 127.0.0.1 -p "$p" >"$tmp/sp-s.log" 2>&1 & s=$!; pids+=("$s")
      sleep 0.4
      timeout 60 sockperf pp --tcp -i 127.0.0.1 -p "$p" -m "$m" -t "$secs" >"$tmp/sp.log" 2>&1
      kill "$s" 2>/dev/null; wait "$s" 2>/dev/null
      v+=("$(sed 's/\x1b\[[0-9;]*m//g' "$tmp/sp.log" | awk '/percentile 50.000/ {print $NF}')")
    done
    point --impl sockperf --link tcp --test lat --params "{\"size\":$sz}" --metric one_way_us --unit us \
      --cmd "sockperf sr --tcp -i 127.0.0.1 -p P & sockperf pp --tcp -i 127.0.0.1 -p P -m $m -t $secs" \
      --note "message size $m B (sockperf's minimum is 14)" --vals "${v[@]}"
  done
fi
if part iperf3 && have iperf3; then
  secs=$(quick && echo 1 || echo 3)
  for sz in $(quick && echo 65536 || echo "4096 65536 1048576"); do
    for bidir in "" --bidir; do
      v=()
      for _ in $(seq "$PREPS"); do
        p=$(port)
        timeout 60 iperf3 -s -1 -p "$p" >"$tmp/ip-s.log" 2>&1 & s=$!; pids+=("$s")
        sleep 0.4
        bps=$(timeout 60 iperf3 -c 127.0.0.1 -p "$p" -l "$sz" -t "$secs" $bidir -J 2>/dev/null |
          "$PY" -c 'import json,sys; e=json.load(sys.stdin)["end"]; print(e["sum_received"]["bits_per_second"] + (e.get("sum_received_bidir_reverse") or {}).get("bits_per_second", 0))' 2>/dev/null)
        wait "$s" 2>/dev/null
        v+=("$("$PY" -c "import sys; print(float(sys.argv[1]) / 8e6)" "${bps:-nan}" 2>/dev/null)")
      done
      point --impl iperf3 --link tcp --test "$([ -n "$bidir" ] && echo bibw || echo bw)" --params "{\"size\":$sz}" \
        --metric MBps --unit MB/s --cmd "iperf3 -s -1 -p P & iperf3 -c 127.0.0.1 -p P -l $sz -t $secs $bidir -J" \
        --note "a byte stream, no message window" --vals "${v[@]}"
    done
  done
fi
"$PY" - "$out/machine.json" <<'PY'
import json, os, platform, sys
cpu = "unknown"
for line in open("/proc/cpuinfo"):
    if line.startswith("model name"):
        cpu = line.split(":", 1)[1].strip(); break
json.dump({"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(), "host": platform.node(),
           "loadavg": open("/proc/loadavg").read().split()[:3]}, open(sys.argv[1], "w"), indent=1)
PY
say "$(wc -l <"$J") rows in bench/results/micro.jsonl"
exit $status
