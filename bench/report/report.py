#!/usr/bin/python3
"""Reads every benchmark's JSON in bench/results/ and writes index.md (the page to read first:
where Conflux leads and trails per area, the figures in plots/, the full tables; index.py,
figures.py, areas.py) and summary.md (every bench/micro test x link x layer with its peer, the
ratio, median and spread, the coverage and why a cell is empty).

  bench/report/report.py [--results DIR] [--out DIR] [--check] [--no-figures]   (Debian's python3 + python3-matplotlib)

Inputs (each optional; an area without its file is named on the page):
  micro.jsonl    bench/micro: raw links, every test, and their peers (collect.py rows)
  machine.json   bench/micro: CPU model, cores, kernel, load
  transport.json bench/transport: each driver against ucx_perftest, sockperf, iperf3, bare DPDK
  channel.jsonl  bench/channel: event-channel latency / bandwidth per size and peer
  pipe.json      bench/pipe: persistent-pipe stream throughput against NATS JetStream
  sidecar.json   bench/sidecar: through the sidecar against embedded
  format.json    bench/format: encode / decode cost per method and size
"""
import argparse
import json
import math
import os
import sys

import areas
import index

TESTS = ["lat", "bw", "bilat", "bibw", "cpu", "overlap", "notify", "reuse_fifo", "reuse_pct",
         "hotspot_lat", "hotspot_bw"]
LINKS = ["shm", "tcp", "ucx", "dpdk", "af_packet", "tls"]  # dpdk = the dpdk driver on memif
LAYERS = ["driver", "channel", "pipe"]
LOWER_BETTER = {"us", "us/msg", "cores"}
# the one point of each test shown in the headline table
HEADLINE = {
    "lat": ({"size": 8}, "one_way_us"), "bw": ({"size": 65536, "q": 16}, "MBps"),
    "bilat": ({"size": 64}, "round_us"), "bibw": ({"size": 65536, "q": 64}, "MBps"),
    "cpu": ({"size": 64, "q": 16, "wait": "poll"}, "sender_cpu_us"),
    "overlap": ({"compute_us": 10}, "MBps"), "notify": ({"size": 8, "wait": "block"}, "one_way_us"),
    "reuse_fifo": ({"buffers": 256}, "MBps"), "reuse_pct": ({"reuse_pct": 50}, "MBps"),
    "hotspot_lat": ({"peers": "max"}, "one_way_us"), "hotspot_bw": ({"peers": "max"}, "MBps"),
}
IGNORE_KEYS = {"compute_share"}  # measured, not chosen: not part of a point's identity
# the layers' peers in bench/micro (peer_zmq.c, peer_nats.c), each over tcp loopback only
LAYER_PEER = {"channel": "zmq", "pipe": "nats"}


def why_missing(layer, link, test):
    """Why a cell has no Conflux row: the reason known from how the suite is built, else the
    run's fault."""
    if layer in ("channel", "pipe") and link == "af_packet" and test.startswith("hotspot"):
        return ("not in this run's results: the layers' af_packet hot-spot (every process in a "
                "namespace of its own on a bridge, LAYER_HOTSPOT_ONLY=1) could not make its "
                "namespaces or failed: see bench/micro/run.sh's output")
    if link in ("dpdk", "af_packet"):
        return ("not in this run's results: DPDK is not installed, or (af_packet) network "
                "namespaces could not be made (root and iproute2 needed), or the run failed: "
                "see bench/micro/run.sh's output")
    return ("not in this run's results (the link or its library is missing here, or the run "
            "failed: see run.sh's output)")


def why_no_peer(layer, link, test):
    """Why a measured cell has no peer beside it."""
    if link == "tls":
        return "no outside TLS peer: tls is put beside the Conflux tcp driver (the cost of TLS)"
    if test.startswith("hotspot") and link in ("dpdk", "af_packet"):
        return ("the bare DPDK peer's hot-spot (dpdk_pingpong against N servers on the same "
                "fabric) is not in this run: bench/transport/build/dpdk_pingpong missing or "
                "failed (see run.sh's output)")
    if layer in LAYER_PEER and link != "tcp":
        return (f"the layer's own peer ({LAYER_PEER[layer]}, over tcp loopback: it stands beside "
                f"every link of the layer) has no {test} rows in this run (see run.sh's output)")
    if test == "notify":
        return "blocking rows are put beside the same link busy polling"
    if layer == "channel" and test in ("bibw", "cpu", "hotspot_bw"):
        return ("ZeroMQ's rows are not in this run, and Open MPI's rows for this test use other "
                "parameters (a window for bibw and hotspot_bw, busy polling for cpu): none is "
                "like for like")
    return "no peer measured in this run (see run.sh's output)"


def cells_text(cells):
    """[(layer, test, link)] -> "channel on shm, ucx: every test; driver on tls: lat, bw" """
    by = {}
    for layer, test, link in cells:
        by.setdefault((layer, link), []).append(test)
    groups = {}
    for (layer, link), tests in by.items():
        t = "every test" if len(tests) == len(TESTS) else ", ".join(tests)
        groups.setdefault((layer, t), []).append(link)
    return "; ".join(f"{layer} on {', '.join(links)}: {t}" for (layer, t), links in groups.items())




def fmt(x):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    a = abs(x)
    return f"{x:,.0f}" if a >= 1000 else f"{x:.1f}" if a >= 10 else f"{x:.2f}" if a >= 0.1 else f"{x:.3f}"


def spread(r):
    if r.get("median") is None:
        return "failed"
    if r.get("min") is None or r["min"] == r["max"]:
        return fmt(r["median"])
    return f"{fmt(r['median'])} ({fmt(r['min'])}–{fmt(r['max'])})"


def pstr(p):
    return ", ".join(f"{k}={v}" for k, v in p.items() if k not in IGNORE_KEYS) or "—"


def key_params(p):
    return {k: v for k, v in p.items() if k not in IGNORE_KEYS}


def pipe_rows(doc):
    """bench/pipe's NATS JetStream stream throughput as the pipe layer's bandwidth peer (its
    first scenario, fsync none; matched by segment size, any window)."""
    out, seen = [], set()
    streams = sorted((doc or {}).get("stream", []), key=lambda s: (s.get("policy") != "none", s.get("scenario", 0)))
    for s in streams:
        st = s.get("nats_mbps")
        if not st or s.get("policy") != "none" or s["size"] in seen:
            continue
        seen.add(s["size"])
        out.append({"layer": "pipe", "link": "tcp", "impl": "nats_jetstream", "test": "bw",
                    "params": {"size": s["size"]}, "metric": "MBps", "unit": "MB/s",
                    "median": st.get("median"), "min": st.get("min"), "max": st.get("max"),
                    "matched": True, "note": f"bench/pipe stream scenario {s['scenario']}, fsync none",
                    "cmd": (doc.get("command") or "bench/pipe/run.sh")})
    return out


def peers_of(r, rows):
    """Peer rows for a Conflux row: same layer, link, test, metric; the peer's parameters a
    subset of the row's (a peer without a window matches every Q)."""
    kp = key_params(r["params"])
    res = []
    for p in rows:
        if p is r or p.get("impl") == "conflux":
            continue
        same = (p["layer"], p["link"], p["test"], p["metric"]) == (r["layer"], r["link"], r["test"], r["metric"])
        # an event channel is message-passing middleware: Open MPI over the same link (its
        # driver-layer rows) is its peer there too, as bench/channel has it
        mpi = (r["layer"] == "channel" and p["layer"] == "driver" and p.get("impl") == "openmpi" and
               (p["link"], p["test"], p["metric"]) == (r["link"], r["test"], r["metric"]))
        # the layers over the dpdk driver: the bare DPDK peer on the same port kind, as for
        # the driver's rows
        on_dpdk = r["layer"] in ("channel", "pipe") and r["link"] in ("dpdk", "af_packet")
        bare = (on_dpdk and p["layer"] == "driver" and p.get("impl") == "dpdk_pingpong" and
                (p["link"], p["test"], p["metric"]) == (r["link"], r["test"], r["metric"]))
        # the layers' own peers have one link, tcp loopback (ZeroMQ and NATS core have no
        # shared-memory, UCX or DPDK transport): their tcp rows stand beside the layer on
        # those links too, named "(tcp)", as what a user of that system gets on one host
        own = LAYER_PEER.get(r["layer"])
        cross = (own is not None and r["link"] in ("shm", "ucx", "dpdk", "af_packet") and
                 p.get("impl") == own and
                 (p["layer"], p["link"], p["test"], p["metric"]) == (r["layer"], "tcp", r["test"], r["metric"]))
        if not same and not mpi and not bare and not cross:
            continue
        pp = key_params(p["params"])
        if all(kp.get(k) == v for k, v in pp.items()):
            res.append(dict(p, impl=f"{own} (tcp)") if cross else p)
    # references inside Conflux: tls against the tcp driver (the cost of encryption), and
    # blocking wake-up against busy polling (completion notification cost)
    for p in rows:
        if p.get("impl") != "conflux" or p is r:
            continue
        same = (p["layer"], p["test"], p["metric"]) == (r["layer"], r["test"], r["metric"])
        if not same:
            continue
        if r["link"] == "tls" and p["link"] == "tcp" and key_params(p["params"]) == kp:
            res.append(dict(p, impl="conflux tcp (no TLS)"))
        if (r["test"] in ("notify", "cpu") and r["params"].get("wait") == "block" and
                p["link"] == r["link"] and p["params"].get("wait") == "poll" and
                {k: v for k, v in kp.items() if k != "wait"} ==
                {k: v for k, v in key_params(p["params"]).items() if k != "wait"}):
            res.append(dict(p, impl="conflux, busy polling"))
    return res


def ratio(a, b):
    if a is None or b is None or not b:
        return None
    return a / b


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--results", default=os.path.join(here, "..", "results"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--check", action="store_true",
                    help="exit 1 when a row is not sane (missing, not positive and finite, message "
                         "count not matched), a results file cannot be read, a figure is not drawn, "
                         "a panel has no peer, or there are no raw-link rows: the smoke test")
    ap.add_argument("--no-figures", action="store_true",
                    help="write the pages without drawing (quicker; --check then fails: no figures)")
    a = ap.parse_args()
    out = a.out or a.results
    os.makedirs(out, exist_ok=True)
    unread = areas.Area("micro", "bench/micro")  # collects micro.jsonl's unreadable lines
    micro = os.path.join(a.results, "micro.jsonl")
    rows = areas.read_jsonl(micro, unread) if os.path.exists(micro) else []
    for r in rows:
        r.setdefault("impl", "conflux")
        r.setdefault("layer", "driver")
    # pipe.json's errors are the Pipes vs JetStream area's to name; here it only lends rows
    pipe_doc = areas.read_json(os.path.join(a.results, "pipe.json"), areas.Area("-", "-")) \
        if os.path.exists(os.path.join(a.results, "pipe.json")) else None
    try:
        rows += pipe_rows(pipe_doc if isinstance(pipe_doc, dict) else None)
    except (KeyError, TypeError, AttributeError):
        pass
    machine = {}
    if os.path.exists(os.path.join(a.results, "machine.json")):
        machine = areas.read_json(os.path.join(a.results, "machine.json"), unread) or {}
    elif isinstance(pipe_doc, dict) and isinstance(pipe_doc.get("machine"), dict):
        machine = pipe_doc["machine"]
    if not isinstance(machine, dict):
        unread.errors.append("machine.json is not an object")
        machine = {}

    cx = [r for r in rows if r["impl"] == "conflux"]
    bad = [r for r in rows if r.get("median") is None or not r.get("matched", True)
           or not (isinstance(r.get("median"), (int, float)) and math.isfinite(r["median"]) and r["median"] > 0)]

    L = ["# Conflux microbenchmarks: summary", ""]
    L.append("Machine: " + ", ".join(f"{k} {v}" for k, v in machine.items()) if machine else "Machine: not recorded")
    L.append("")
    L.append("Each figure is the median over the repetitions, with (min–max). Ratio = Conflux / peer: "
             "for us, us/msg and cores lower is better, for MB/s higher is better. "
             "Rows come from bench/results/micro.jsonl (commands in its `cmd` fields) and "
             "pipe.json; the other benchmarks are in index.md.")
    L.append("")
    L.append(f"Sanity: {len(rows)} rows, {len(bad)} not sane (missing, non-positive or message count "
             "not matched)" + (": " + "; ".join(f"{r.get('impl')} {r['layer']} {r['link']} {r['test']} "
                                               f"{pstr(r['params'])}" for r in bad[:20]) if bad else "."))
    L.append("")

    # headline: one point per test x layer x link
    L += ["## Headline (one point per test, link and layer)", "",
          "| test | layer | link | point | metric | Conflux | peer | peer figure | ratio |",
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for test in TESTS:
        want, metric = HEADLINE[test]
        for layer in LAYERS:
            for link in LINKS:
                cand = [r for r in cx if (r["layer"], r["link"], r["test"]) == (layer, link, test)]
                if not cand:
                    continue
                sel = [r for r in cand if r["metric"] == metric] or cand
                if want.get("peers") == "max":
                    m = max(r["params"].get("peers", 0) for r in sel)
                    sel = [r for r in sel if r["params"].get("peers") == m]

                def dist(r):
                    # prefer a point with a peer, then the wanted point, then the nearest size
                    d = sum(1 for k, v in want.items() if k != "peers" and r["params"].get(k) != v)
                    sz, wsz = r["params"].get("size"), want.get("size")
                    near = abs(math.log2(sz) - math.log2(wsz)) if sz and wsz else 0
                    return (not peers_of(r, rows), d, near)
                sel = sorted(sel, key=dist)
                r = sel[0]
                ps = peers_of(r, rows) or [None]
                for p in ps:
                    L.append(f"| {test} | {layer} | {link} | {pstr(r['params'])} | {r['metric']} ({r['unit']}) | "
                             f"{spread(r)} | {p['impl'] if p else '—'} | {spread(p) if p else '—'} | "
                             f"{fmt(ratio(r['median'], p['median'])) if p else '—'} |")
    L.append("")

    # coverage: which cells exist
    L += ["## Coverage (test × link × layer)", "",
          "✓ = measured (peer names in brackets), – = not measured (reasons below the table).", "",
          "| layer | test | " + " | ".join(LINKS) + " |", "| --- | --- | " + " | ".join("---" for _ in LINKS) + " |"]
    missing, nopeer = [], []
    for layer in LAYERS:
        for test in TESTS:
            cells = []
            for link in LINKS:
                c = [r for r in cx if (r["layer"], r["link"], r["test"]) == (layer, link, test)]
                if c:
                    names = sorted({p["impl"] for r in c for p in peers_of(r, rows)})
                    cells.append("✓" + (f" ({', '.join(names)})" if names else " (no peer)"))
                    if not names:
                        nopeer.append((layer, test, link, why_no_peer(layer, link, test)))
                else:
                    cells.append("–")
                    why = why_missing(layer, link, test)
                    missing.append((layer, test, link, why))
            L.append(f"| {layer} | {test} | " + " | ".join(cells) + " |")
    L.append("")
    if missing:
        L.append("Missing cells:")
        L.append("")
        by_why = {}
        for layer, test, link, why in missing:
            by_why.setdefault(why, []).append((layer, test, link))
        for why, cells in by_why.items():
            L.append(f"- {len(cells)} cells ({cells_text(cells)}): {why}")
        L.append("")
    if nopeer:
        L.append("Measured cells without a peer:")
        L.append("")
        by_why = {}
        for layer, test, link, why in nopeer:
            by_why.setdefault(why, []).append((layer, test, link))
        for why, cells in by_why.items():
            L.append(f"- {cells_text(cells)}: {why}")
        L.append("")

    # every point
    L += ["## Every point", ""]
    for test in TESTS:
        sel = [r for r in cx if r["test"] == test]
        if not sel:
            continue
        L += [f"### {test}", "", "| layer | link | point | metric | Conflux | peer | peer figure | ratio |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in sel:
            for p in peers_of(r, rows) or [None]:
                L.append(f"| {r['layer']} | {r['link']} | {pstr(r['params'])} | {r['metric']} ({r['unit']}) | "
                         f"{spread(r)} | {p['impl'] if p else '—'} | {spread(p) if p else '—'} | "
                         f"{fmt(ratio(r['median'], p['median'])) if p else '—'} |")
        L.append("")
    fmt_doc = os.path.join(a.results, "format.json")
    if os.path.exists(fmt_doc):
        try:
            d = json.load(open(fmt_doc))
            L += ["## Formats (bench/format: protobuf-c, msgpack-c, expat peers)", "",
                  "| method | op | " + " | ".join(f"{s} B" for s in d["sizes"]) + " |",
                  "| --- | --- | " + " | ".join("---" for _ in d["sizes"]) + " |"]
            for name, m in d["methods"].items():
                for op in ("encode", "decode"):
                    if op in m:
                        L.append(f"| {name} | {op} ({d.get('unit', '')}) | " + " | ".join(fmt(x) for x in m[op]) + " |")
            L.append("")
        except (ValueError, KeyError, TypeError) as e:
            L.append(f"format.json not understood: {e}\n")
    L += ["## Commands", ""]
    for c in sorted({r.get("cmd", "") for r in rows if r.get("cmd")}):
        L.append(f"- `{c}`")
    L.append("")
    L += ["The page to read first, with the figures: [index.md](index.md).", ""]
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(L))
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump({"machine": machine, "rows": rows, "missing": missing, "no_peer": nopeer}, f, indent=1)
    page = areas.load(a.results, rows, peers_of)
    drawn = index.write(page, out, machine, draw=not a.no_figures)
    trouble = [f"bench/micro: {e}" for e in unread.errors] + index.problems(page, drawn)
    print(f"report: {len(rows)} rows, {len(missing)} missing cells, {len(drawn)} figures -> "
          f"{os.path.join(out, 'index.md')}, summary.md")
    if a.check:
        for r in bad:
            print(f"report: not sane: {r.get('impl')} {r['layer']} {r['link']} {r['test']} "
                  f"{pstr(r['params'])} {r.get('metric')} = {r.get('median')} matched={r.get('matched')}",
                  file=sys.stderr)
        for t in trouble:
            print(f"report: {t}", file=sys.stderr)
        if bad or trouble or not [r for r in cx if r["layer"] == "driver"]:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
