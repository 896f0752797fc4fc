#!/usr/bin/env bash
# The tls driver against the tcp driver and the CPU's AES-256-GCM rate, loopback only:
# RUNS rounds, each running tcp then tls streaming at every size (interleaved, so both see
# the same machine), and `openssl speed -evp aes-256-gcm` on 16 KiB blocks (one core).
# Prints medians with min-max and the ratios; writes bench/results/transport_tls.json.
#   bench/transport/tls.sh     (env: RUNS=5 BW_BYTES=2147483648 SIZES="1048576 65536")
# BEFORE=<another build's transport_bench> adds its tls to each round (a before/after pair).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out="$here/../results"
mkdir -p "$out"
make -s -C "$here" -j2 >/dev/null
bench="$here/build/transport_bench"
RUNS=${RUNS:-5} BW_BYTES=${BW_BYTES:-2147483648} SIZES=${SIZES:-"1048576 65536"}
R=$(mktemp)
trap 'rm -f "$R"' EXIT
for r in $(seq "$RUNS"); do
  for size in $SIZES; do
    n=$((BW_BYTES / size))
    for drv in tcp tls; do
      echo "bw $("$bench" "$drv" bw "$n" "$size" 2>/dev/null)" >>"$R"
    done
    if [ -n "${BEFORE:-}" ]; then
      echo "bw $("$BEFORE" tls bw "$n" "$size" 2>/dev/null | sed 's/"driver":"tls"/"driver":"before"/')" >>"$R"
    fi
  done
  # bytes/s of one core sealing 16 KiB with AES-256-GCM (openssl -mr: "+F:<n>:<alg>:<rate>")
  gcm=$(openssl speed -evp aes-256-gcm -seconds 1 -bytes 16384 -mr 2>/dev/null |
        awk -F: '/^\+F:/ {print $4}')
  echo "gcm ${gcm:-nan}" >>"$R"
  echo "round $r/$RUNS done" >&2
done
python3 - "$R" "$out/transport_tls.json" <<'PY'
import json, sys, statistics, datetime, platform
bw, gcm = {}, []
for line in open(sys.argv[1]):
    kind, _, rest = line.strip().partition(" ")
    if kind == "bw" and rest.startswith("{"):
        j = json.loads(rest)
        bw.setdefault((j["size"], j["driver"]), []).append(j["MBps"])
        if "tls_path" in j and j["driver"] == "tls": bw.setdefault(("path",), []).append(j["tls_path"])
    elif kind == "gcm" and rest != "nan":
        gcm.append(float(rest) / 1e6)
med = lambda xs: statistics.median(xs) if xs else float("nan")
rng = lambda xs: "%.0f-%.0f" % (min(xs), max(xs)) if xs else "n/a"
res = {"date": datetime.datetime.utcnow().isoformat() + "Z", "host": platform.node(),
       "aes256gcm_MBps": gcm, "tls_path": sorted(set(bw.get(("path",), []))), "rows": []}
g = med(gcm)
before = any(k[1:] == ("before",) for k in bw)
print("| size | tcp MB/s median (min-max) | tls MB/s median (min-max) | tls/tcp | tls/AES-GCM |" +
      (" tls before: MB/s (min-max) | before/tcp |" if before else ""))
print("| --- | --- | --- | --- | --- |" + (" --- | --- |" if before else ""))
for size in sorted({k[0] for k in bw if len(k) == 2}, reverse=True):
    t, s = bw.get((size, "tcp"), []), bw.get((size, "tls"), [])
    row = {"size": size, "tcp_MBps": t, "tls_MBps": s, "tls_over_tcp": med(s) / med(t) if t and s else None,
           "tls_over_gcm": med(s) / g if s and gcm else None}
    res["rows"].append(row)
    b = bw.get((size, "before"), [])
    row["before_MBps"] = b
    print("| %d | %.0f (%s) | %.0f (%s) | %.2f | %.2f |" % (size, med(t), rng(t), med(s), rng(s),
          row["tls_over_tcp"] or float("nan"), row["tls_over_gcm"] or float("nan")) +
          (" %.0f (%s) | %.2f |" % (med(b), rng(b), med(b) / med(t) if b and t else float("nan")) if before else ""))
print()
print("openssl speed -evp aes-256-gcm, 16 KiB blocks, one core: %.0f MB/s median (%s), %d runs; "
      "tls records made in: %s. MB = 10^6 bytes." % (g, rng(gcm), len(gcm), ", ".join(res["tls_path"]) or "n/a"))
json.dump(res, open(sys.argv[2], "w"), indent=2)
PY
