#!/usr/bin/env bash
# Side-by-side transport benchmark, all in one run, loopback only:
#   shm driver  vs ucx_perftest ucp_am_lat / ucp_am_bw with UCX_TLS=posix
#   tcp driver  vs sockperf ping-pong (latency) and iperf3 (bulk bandwidth)
#   ucx driver  vs ucx_perftest with the same UCX_TLS (CX_BENCH_UCX_TLS, default tcp)
#   dpdk driver vs a bare DPDK memif ping-pong (dpdk_pingpong.c), two processes on one memif
#   tls driver  vs the tcp driver in the same run, and one core's AES-256-GCM rate (openssl
#               speed); bench/transport/tls.sh repeats tls against tcp at several sizes
# One-way latency of 8-byte messages (sockperf's minimum is 14 B), bandwidth of 1 MiB
# messages. Prints a Markdown table with ratios; writes bench/results/transport.json and
# transport.md.
#   bench/transport/run.sh            (env: LAT_N=100000 BW_N=2000 SECS=3 CX_BENCH_UCX_TLS=tcp)
#   bench/transport/run.sh --quick    smoke run: LAT_N=5000 BW_N=200 SECS=1
set -euo pipefail
if [ "${1:-}" = --quick ]; then LAT_N=${LAT_N:-5000} BW_N=${BW_N:-200} SECS=${SECS:-1}; fi
here=$(cd "$(dirname "$0")" && pwd)
out="$here/../results"
mkdir -p "$out"
make -s -C "$here" -j2 >/dev/null
make -s -C "$here" -f dpdk.mk >/dev/null || echo "dpdk benchmark not built (see above)" >&2
bench="$here/build/transport_bench"
LAT_N=${LAT_N:-100000} BW_N=${BW_N:-2000} SECS=${SECS:-3}
UTLS=${CX_BENCH_UCX_TLS:-tcp}
export UCX_NET_DEVICES=lo UCX_WARN_UNUSED_ENV_VARS=n
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
port() { echo $((20000 + RANDOM % 20000)); }
have() { command -v "$1" >/dev/null 2>&1; }

# ucx_perftest <tls> <test> <size> <iters> -> "Final:" line fields
perftest() {
  local p; p=$(port)
  UCX_TLS=$1 timeout 120 ucx_perftest -p "$p" >"$tmp/pt-server.log" 2>&1 & local s=$!; pids+=("$s")
  sleep 0.5
  UCX_TLS=$1 timeout 120 ucx_perftest 127.0.0.1 -p "$p" -t "$2" -s "$3" -n "$4" 2>&1 | awk '/^Final:/ {print $3, $4, $7}'
  wait "$s" 2>/dev/null || true
}

echo "running: cx drivers, ucx_perftest (posix, $UTLS), sockperf, iperf3 ..." >&2
R="$tmp/results.txt"
: >"$R"
echo "cx_shm_lat $("$bench" shm lat "$LAT_N" 8)" >>"$R"
echo "cx_shm_bw $("$bench" shm bw "$BW_N" 1048576)" >>"$R"
echo "cx_tcp_lat $("$bench" tcp lat "$LAT_N" 8)" >>"$R"
echo "cx_tcp_bw $("$bench" tcp bw "$BW_N" 1048576)" >>"$R"
if "$bench" ucx lat 10 8 >/dev/null 2>&1; then
  echo "cx_ucx_lat $(UCX_TLS=$UTLS "$bench" ucx lat "$LAT_N" 8)" >>"$R"
  echo "cx_ucx_bw $(UCX_TLS=$UTLS "$bench" ucx bw "$BW_N" 1048576)" >>"$R"
fi
if "$bench" tls lat 10 8 >/dev/null 2>&1; then
  echo "cx_tls_lat $("$bench" tls lat "$LAT_N" 8 2>/dev/null)" >>"$R"
  echo "cx_tls_bw $("$bench" tls bw "$BW_N" 1048576 2>/dev/null)" >>"$R"
fi
if have openssl; then # bytes/s of one core sealing 16 KiB blocks
  echo "gcm_bw $(openssl speed -evp aes-256-gcm -seconds "$SECS" -bytes 16384 -mr 2>/dev/null |
                 awk -F: '/^\+F:/ {print $4}')" >>"$R"
fi
if have ucx_perftest; then
  echo "pt_posix_lat $(perftest posix ucp_am_lat 8 "$LAT_N")" >>"$R"
  echo "pt_posix_bw $(perftest posix ucp_am_bw 1048576 "$BW_N")" >>"$R"
  echo "pt_utls_lat $(perftest "$UTLS" ucp_am_lat 8 "$LAT_N")" >>"$R"
  echo "pt_utls_bw $(perftest "$UTLS" ucp_am_bw 1048576 "$BW_N")" >>"$R"
fi
if have sockperf; then
  p=$(port)
  timeout 120 sockperf sr --tcp -i 127.0.0.1 -p "$p" >"$tmp/sp-server.log" 2>&1 & s=$!; pids+=("$s")
  sleep 0.5
  timeout 120 sockperf pp --tcp -i 127.0.0.1 -p "$p" -m 14 -t "$SECS" >"$tmp/sp.log" 2>&1 || true
  kill "$s" 2>/dev/null || true
  med=$(sed 's/\x1b\[[0-9;]*m//g' "$tmp/sp.log" | awk '/percentile 50.000/ {print $NF}')
  avg=$(sed 's/\x1b\[[0-9;]*m//g' "$tmp/sp.log" | sed -n 's/.*avg-latency=\([0-9.]*\).*/\1/p')
  echo "sockperf_lat ${med:-nan} ${avg:-nan}" >>"$R"
fi
if have iperf3; then
  p=$(port)
  timeout 120 iperf3 -s -1 -p "$p" >"$tmp/ip-server.log" 2>&1 & s=$!; pids+=("$s")
  sleep 0.5
  bps=$(timeout 120 iperf3 -c 127.0.0.1 -p "$p" -t "$SECS" -J 2>/dev/null |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"])' || echo nan)
  wait "$s" 2>/dev/null || true
  echo "iperf3_bw $bps" >>"$R"
fi
# dpdk: <program> <server args> <client args> -> the client's JSON line. Server and client
# are two processes on one memif pair; the client starts once the server's port is up.
dpdk_run() {
  local sock="$tmp/dpdk.sock"
  "$1" server "$sock" $2 >"$tmp/dpdk-server.log" 2>&1 & local s=$!; pids+=("$s")
  for _ in $(seq 200); do grep -q '^ready' "$tmp/dpdk-server.log" && break; sleep 0.1; done
  timeout 120 "$1" client "$sock" $3 2>>"$tmp/dpdk-client.log" | grep '^{' || true
  wait "$s" 2>/dev/null || true
}
if [ -x "$here/build/dpdk_bench" ] && [ -x "$here/build/dpdk_pingpong" ]; then
  echo "cx_dpdk_lat $(dpdk_run "$here/build/dpdk_bench" stack "lat $LAT_N 8")" >>"$R"
  echo "cx_dpdk_raw_lat $(dpdk_run "$here/build/dpdk_bench" raw "lat-raw $LAT_N 8")" >>"$R"
  echo "cx_dpdk_bw $(dpdk_run "$here/build/dpdk_bench" stack "bw $BW_N 1048576")" >>"$R"
  echo "bare_dpdk_lat $(dpdk_run "$here/build/dpdk_pingpong" "" "lat $LAT_N 8")" >>"$R"
  echo "bare_dpdk_bw $(dpdk_run "$here/build/dpdk_pingpong" "" "bw $BW_N 1048576")" >>"$R"
fi

python3 - "$R" "$out/transport.json" "$UTLS" <<'PY' | tee "$out/transport.md"
import json, math, sys, platform, datetime
rows = {}
for line in open(sys.argv[1]):
    key, _, rest = line.strip().partition(" ")
    rows[key] = rest
def js(k):
    try: return json.loads(rows[k])
    except Exception: return None
def nums(k):
    try: return [float(x) for x in rows[k].split()]
    except Exception: return None
utls = sys.argv[3]
res = {"date": datetime.datetime.utcnow().isoformat() + "Z", "host": platform.node(),
       "ucx_tls_for_ucx_row": utls, "lat_size": 8, "bw_size": 1048576, "rows": []}
def add(name, peer, cx_lat, cx_bw, peer_lat, peer_bw, note=""):
    r = {"driver": name, "peer": peer, "cx_lat_median_us": cx_lat[0] if cx_lat else None,
         "cx_lat_avg_us": cx_lat[1] if cx_lat else None, "cx_bw_MBps": cx_bw,
         "peer_lat_median_us": peer_lat[0] if peer_lat else None,
         "peer_lat_avg_us": peer_lat[1] if peer_lat else None, "peer_bw_MBps": peer_bw, "note": note}
    r["lat_ratio"] = (r["cx_lat_median_us"] / r["peer_lat_median_us"]) if cx_lat and peer_lat and peer_lat[0] else None
    r["bw_ratio"] = (cx_bw / peer_bw) if cx_bw and peer_bw else None
    res["rows"].append(r)
def cxl(k):
    j = js(k); return (j["median_us"], j["avg_us"]) if j else None
def cxb(k):
    j = js(k); return j["MBps"] if j else None
pt = lambda k: nums(k)
MiB = 1.048576
p = pt("pt_posix_lat"); q = pt("pt_posix_bw")
add("shm", "ucx_perftest ucp_am (UCX_TLS=posix)", cxl("cx_shm_lat"), cxb("cx_shm_bw"),
    (p[0], p[1]) if p else None, q[2] * MiB if q else None)
sp = nums("sockperf_lat"); ip = nums("iperf3_bw")
add("tcp", "sockperf pp (14 B) / iperf3", cxl("cx_tcp_lat"), cxb("cx_tcp_bw"),
    (sp[0], sp[1]) if sp else None, ip[0] / 8e6 if ip else None)
if "cx_ucx_lat" in rows:
    p = pt("pt_utls_lat"); q = pt("pt_utls_bw")
    add("ucx", "ucx_perftest ucp_am (UCX_TLS=%s)" % utls, cxl("cx_ucx_lat"), cxb("cx_ucx_bw"),
        (p[0], p[1]) if p else None, q[2] * MiB if q else None, "UCX_TLS=" + utls)
if "cx_tls_lat" in rows:
    g = nums("gcm_bw"); j = js("cx_tls_bw") or {}
    add("tls", "tcp driver, same run", cxl("cx_tls_lat"), cxb("cx_tls_bw"), cxl("cx_tcp_lat"),
        cxb("cx_tcp_bw"), "records in %s space; one core AES-256-GCM (openssl speed, 16 KiB): %s MB/s"
        % (j.get("tls_path", "?"), "%.0f" % (g[0] / 1e6) if g else "n/a"))
if "cx_dpdk_lat" in rows:
    b = cxl("bare_dpdk_lat")
    add("dpdk", "bare DPDK memif ping-pong (dpdk_pingpong.c)", cxl("cx_dpdk_lat"),
        cxb("cx_dpdk_bw"), b, cxb("bare_dpdk_bw"), "memif; cx: dpdk link + rel + frag")
    add("dpdk link", "the same, no rel/frag (8 B only)", cxl("cx_dpdk_raw_lat"), None, b, None,
        "memif; cx: bare datagram link")
json.dump(res, open(sys.argv[2], "w"), indent=2)
f = lambda x, d=2: "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else ("%.*f" % (d, x))
print("| driver | peer | one-way 8 B median (avg) us: cx | peer | ratio | 1 MiB MB/s: cx | peer | ratio |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for r in res["rows"]:
    print("| %s | %s | %s (%s) | %s (%s) | %s | %s | %s | %s |" % (
        r["driver"], r["peer"], f(r["cx_lat_median_us"]), f(r["cx_lat_avg_us"]),
        f(r["peer_lat_median_us"]), f(r["peer_lat_avg_us"]), f(r["lat_ratio"]),
        f(r["cx_bw_MBps"], 0), f(r["peer_bw_MBps"], 0), f(r["bw_ratio"])))
print()
for r in res["rows"]:
    if r["note"]:
        print("- %s: %s" % (r["driver"], r["note"]))
print()
print("Latency ratio = cx median / peer median (lower is better; target shm <= 2). "
      "Bandwidth ratio = cx / peer (target shm >= 0.8 of ucx_perftest posix, tcp >= 0.9 of iperf3). "
      "MB = 10^6 bytes. Machine: %s, loopback, both ends busy-polling." % platform.node())
PY
