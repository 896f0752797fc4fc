#!/usr/bin/env python3
"""Appends benchmark rows to a JSON-lines results file (bench/results/micro.jsonl).

  collect.py tag   --out F --cmd CMD [--impl X]          JSON lines on stdin (micro_bench,
                                                         mpi_micro), each tagged with the command
  collect.py point --out F --impl X --link L --test T --params '{"size":8}' --metric M
                   --unit U --cmd CMD [--layer driver] [--n N] --vals v1 v2 ...
                                                         one row from repeated peer measurements
                                                         (median, min, max; non-numbers dropped)
  collect.py bare  --out F --link L --cmd CMD [--impl X] [--note N]
                                                         bench/transport/dpdk_pingpong's JSON lines
                                                         on stdin (its repetitions together): one
                                                         row per test and point
"""
import argparse
import json
import math
import sys


def row_stats(vals):
    v = sorted(vals)
    k = len(v)
    med = v[k // 2] if k % 2 else (v[k // 2 - 1] + v[k // 2]) / 2
    return med, v[0], v[-1]


# dpdk_pingpong's "as" -> (test, the point's parameters, metric field, metric, unit)
BARE = {
    "lat": ("lat", ("size",), "median_us", "one_way_us", "us"),
    "bw": ("bw", ("size", "q"), "MBps", "MBps", "MB/s"),
    "overlap": ("overlap", ("size", "q", "compute_us"), "MBps", "MBps", "MB/s"),
    "reuse_fifo": ("reuse_fifo", ("size", "q", "buffers"), "MBps", "MBps", "MB/s"),
    "reuse_pct": ("reuse_pct", ("size", "q", "buffers", "reuse_pct"), "MBps", "MBps", "MB/s"),
    "bilat": ("bilat", ("size",), "round_us", "round_us", "us"),
    "bibw": ("bibw", ("size",), "MBps", "MBps", "MB/s"),
    "hotspot_lat": ("hotspot_lat", ("peers", "size"), "one_way_us", "one_way_us", "us"),
    "hotspot_bw": ("hotspot_bw", ("peers", "size", "q"), "MBps", "MBps", "MB/s"),
}
# dpdk_pingpong's "cpu" -> four rows of test cpu, params (size, q), unit us/msg
CPU_METRICS = ("send_call_cpu_us", "sender_cpu_us", "receiver_cpu_us", "wall_us")


def bare_rows(lines, a):
    groups = {}
    for line in lines:
        if not line.startswith("{"):
            continue
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if j.get("as") == "cpu":
            specs = [("cpu", ("size", "q"), m, m, "us/msg") for m in CPU_METRICS]
        elif j.get("as") in BARE:
            specs = [BARE[j["as"]]]
        else:
            continue
        for spec in specs:
            add_bare(groups, j, spec)
    return bare_group_rows(groups, a)


def add_bare(groups, j, spec):
    """Adds one measurement of dpdk_pingpong's line j to its point's group."""
    test, keys, field, metric, unit = spec
    params = {k: j[k] for k in keys if k in j}
    if isinstance(params.get("compute_us"), float) and params["compute_us"].is_integer():
        params["compute_us"] = int(params["compute_us"])
    g = groups.setdefault((test, json.dumps(params, sort_keys=True), metric),
                          {"test": test, "params": params, "metric": metric, "unit": unit,
                           "vals": [], "lost": 0, "n": j.get("n", 0)})
    g["vals"].append(j.get(field))
    g["lost"] += int(j.get("lost", 0) or 0)


def bare_group_rows(groups, a):
    """One row per point: median, min, max of its repetitions; lost frames in the note."""
    rows = []
    for g in groups.values():
        vals = [float(v) for v in g["vals"] if isinstance(v, (int, float)) and math.isfinite(v) and v > 0]
        r = {"layer": "driver", "link": a.link, "impl": a.impl or "dpdk_pingpong", "test": g["test"],
             "params": g["params"], "metric": g["metric"], "unit": g["unit"], "reps": vals, "n": g["n"],
             "matched": bool(vals), "cmd": a.cmd}
        notes = [a.note] if a.note else []
        if g["lost"] and g["test"] in ("lat", "hotspot_lat"):
            notes.append(f"{g['lost']} frames lost over the repetitions (no reliability: their "
                         "rounds were run again)")
        elif g["lost"]:
            notes.append(f"{g['lost']} frames lost over the repetitions (no reliability: the figure "
                         "counts the bytes that arrived)")
        if notes:
            r["note"] = "; ".join(notes)
        if vals:
            r["median"], r["min"], r["max"] = row_stats(vals)
        else:
            r["median"] = r["min"] = r["max"] = None
            r["error"] = "the peer produced no number (see the command)"
        rows.append(r)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["tag", "point", "bare"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--cmd", required=True)
    ap.add_argument("--impl")
    ap.add_argument("--layer", default="driver")
    ap.add_argument("--link")
    ap.add_argument("--test")
    ap.add_argument("--params", default="{}")
    ap.add_argument("--metric")
    ap.add_argument("--unit")
    ap.add_argument("--n", type=int, default=0)
    ap.add_argument("--note")
    ap.add_argument("--vals", nargs="*", default=[])
    a = ap.parse_args()
    rows = []
    if a.mode == "tag":
        for line in sys.stdin:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                r = json.loads(line)
            except ValueError:
                print("collect.py: dropped a broken line: " + line[:120], file=sys.stderr)
                continue
            r.setdefault("impl", a.impl or "conflux")
            r["cmd"] = a.cmd
            rows.append(r)
    elif a.mode == "bare":
        rows = bare_rows(sys.stdin, a)
    else:
        vals = []
        for v in a.vals:
            try:
                f = float(v)
            except ValueError:
                continue
            if math.isfinite(f) and f > 0:
                vals.append(f)
        r = {"layer": a.layer, "link": a.link, "impl": a.impl, "test": a.test,
             "params": json.loads(a.params), "metric": a.metric, "unit": a.unit,
             "reps": vals, "n": a.n, "matched": bool(vals), "cmd": a.cmd}
        if a.note:
            r["note"] = a.note
        if vals:
            r["median"], r["min"], r["max"] = row_stats(vals)
        else:
            r["median"] = r["min"] = r["max"] = None
            r["error"] = "the peer produced no number (see the command)"
        rows.append(r)
    with open(a.out, "a") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
