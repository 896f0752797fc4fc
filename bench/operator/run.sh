#!/usr/bin/env bash
# The operator at scale: operator/test/scale (envtest: a real kube-apiserver + etcd, the
# real manager, a fake space client) at each size of SIZES (default "100 1000": N Spaces,
# 4N Channels, N Workflows), then bench/operator/RESULTS.md with one row per size and the
# growth from the first size to the last. `make bench-operator` runs it.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
SIZES=${SIZES:-"100 1000"}
export CONFLUX_CACHE=${CONFLUX_CACHE:-$root/.cache}
assets=$(hack/build-k8s.sh kube-apiserver kubectl | tail -1)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for n in $SIZES; do
	echo "== N=$n" >&2
	(cd operator && KUBEBUILDER_ASSETS=$assets SCALE_N=$n SCALE_REPORT=$work/$n.json \
		go test -count=1 -timeout 60m -run '^TestScale$' -v ./test/scale) | grep -E '^(=== RUN|--- |\s+scale_test.go|ok|FAIL)' >&2
done
/usr/bin/python3 - "$work" "$SIZES" > bench/operator/RESULTS.md <<'PY'
import json, sys, datetime, os, platform
work, sizes = sys.argv[1], sys.argv[2].split()
runs = [json.load(open(os.path.join(work, n + ".json"))) for n in sizes]
for r in runs:  # how long the operator trailed the last creation
    r["AfterCreateSeconds"] = r["ConvergeSeconds"] - r["CreateSeconds"]
cpus = os.cpu_count()
print("# The operator at scale\n")
print(f"Run {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on a "
      f"{cpus}-core {platform.machine()} machine with `make bench-operator` (SIZES=\"{' '.join(sizes)}\"; "
      "bench/operator/run.sh runs operator/test/scale: envtest, the real manager with its shipped defaults, "
      "a fake space client, stats every 2 s). Each size creates N Spaces, 4N pipe Channels and N "
      "three-component Workflows in one namespace. Convergence is timed from the first create (the test creates with 8 parallel clients); converged: every Space serves its 4 Channels, every "
      "Channel is Ready with stats, every Workflow has its 3 workloads. CPU is the test process "
      "(manager and the test's client), heap its peak in use. Idle writes: writes in 5 s (two stats "
      "rounds) after the last write of convergence; the change columns: the writes one change cost.\n")
cols = [("N", "N", "{}"), ("objects", "Objects", "{}"), ("workers", "Workers", "{}"),
        ("create s", "CreateSeconds", "{:.1f}"), ("converge s", "ConvergeSeconds", "{:.1f}"),
        ("of which after the last create s", "AfterCreateSeconds", "{:.1f}"),
        ("delete s", "DeleteSeconds", "{:.1f}"), ("CPU s", "CPUSeconds", "{:.1f}"),
        ("peak heap MiB", "PeakHeapMiB", "{:.0f}"), ("manager writes", "ManagerWrites", "{}"),
        ("manager requests", "ManagerRequests", "{}"), ("apiserver requests", "APIServerRequests", "{:.0f}"),
        ("idle writes", "IdleWrites", "{}"), ("1-workflow change writes", "ChangeWrites", "{}"),
        ("1-channel stats writes", "StatsWrites", "{}")]
print("| " + " | ".join(c[0] for c in cols) + " |")
print("|" + "---|" * len(cols))
for r in runs:
    print("| " + " | ".join(f.format(r[k]) for _, k, f in cols) + " |")
if len(runs) > 1:
    a, b = runs[0], runs[-1]
    x = b["N"] / a["N"]
    g = lambda k: b[k] / a[k] if a[k] else float("nan")
    print(f"\nFrom N={a['N']} to N={b['N']} ({x:.0f}x the objects): convergence {g('ConvergeSeconds'):.1f}x, "
          f"deletion {g('DeleteSeconds'):.1f}x, CPU {g('CPUSeconds'):.1f}x, manager writes {g('ManagerWrites'):.1f}x.")
PY
cat bench/operator/RESULTS.md
