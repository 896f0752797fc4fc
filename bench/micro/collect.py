#!/usr/bin/env python3
"""Appends benchmark rows to a JSON-lines results file (bench/results/micro.jsonl).

  collect.py tag   --out F --cmd CMD [--impl X]          JSON lines on stdin (micro_bench,
                                                         mpi_micro), each tagged with the command
  collect.py point --out F --impl X --link L --test T --params '{"size":8}' --metric M
                   --unit U --cmd CMD [--layer driver] [--n N] --vals v1 v2 ...
                                                         one row from repeated peer measurements
                                                         (median, min, max; non-numbers dropped)
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["tag", "point"])
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
