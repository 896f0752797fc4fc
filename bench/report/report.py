#!/usr/bin/python3
"""Reads every benchmark's JSON in bench/results/ and writes summary.md (every test x link x
layer with its peer, the ratio, median and spread, the machine) and PNG plots in plots/.

  bench/report/report.py [--results DIR] [--out DIR] [--check]   (Debian's python3 + python3-matplotlib)

Inputs (each optional; what is absent is listed as missing with the reason):
  micro.jsonl    bench/micro: raw links, every test, and their peers (collect.py rows)
  machine.json   bench/micro: CPU model, cores, kernel, load
  channel.jsonl  bench/channel: event-channel latency / bandwidth per size and peer
  pipe.json      bench/pipe: persistent-pipe stream throughput against NATS JetStream
  format.json    bench/format: encode / decode cost per method and size
"""
import argparse
import json
import math
import os
import sys

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


def load_jsonl(path):
    rows = []
    if os.path.exists(path):
        for line in open(path):
            line = line.strip()
            if line.startswith("{"):
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    pass
    return rows


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


def channel_rows(rows):
    """bench/channel lines -> rows of this report (layer channel, link tcp)."""
    out = []
    for r in rows:
        peer = r.get("peer")
        if not peer or r.get("size") is None:
            continue
        impl = "conflux" if peer == "conflux" else peer
        if r.get("metric") == "latency" and r.get("latency_us") is not None:
            test, metric, unit, v = "lat", "one_way_us", "us", r["latency_us"]
            params = {"size": r["size"]}
        elif r.get("metric") == "bandwidth" and r.get("bandwidth_MBps") is not None:
            test, metric, unit, v = "bw", "MBps", "MB/s", r["bandwidth_MBps"]
            params = {"size": r["size"], "q": r.get("window", 64)}
        else:
            continue
        out.append({"layer": "channel", "link": "tcp", "impl": impl, "test": test, "params": params,
                    "metric": metric, "unit": unit, "vals": [v], "cmd": "bench/channel/run.sh"})
    # repetitions of one point become one row (median, min, max)
    groups = {}
    for r in out:
        k = (r["impl"], r["test"], json.dumps(r["params"], sort_keys=True))
        groups.setdefault(k, r if "reps" in r else dict(r, reps=[]))["reps"].extend(r["vals"])
    res = []
    for r in groups.values():
        v = sorted(r["reps"])
        n = len(v)
        r["median"] = v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
        r["min"], r["max"], r["matched"] = v[0], v[-1], True
        r.pop("vals", None)
        res.append(r)
    return res


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
                         "count not matched) or there are no raw-link rows: the smoke test")
    a = ap.parse_args()
    out = a.out or a.results
    os.makedirs(os.path.join(out, "plots"), exist_ok=True)
    rows = [r for r in load_jsonl(os.path.join(a.results, "micro.jsonl"))]
    for r in rows:
        r.setdefault("impl", "conflux")
        r.setdefault("layer", "driver")
    rows += channel_rows(load_jsonl(os.path.join(a.results, "channel.jsonl")))
    pipe_doc = None
    if os.path.exists(os.path.join(a.results, "pipe.json")):
        try:
            pipe_doc = json.load(open(os.path.join(a.results, "pipe.json")))
        except ValueError:
            pass
    rows += pipe_rows(pipe_doc)
    machine = {}
    if os.path.exists(os.path.join(a.results, "machine.json")):
        machine = json.load(open(os.path.join(a.results, "machine.json")))
    elif pipe_doc and isinstance(pipe_doc.get("machine"), dict):
        machine = pipe_doc["machine"]

    cx = [r for r in rows if r["impl"] == "conflux"]
    bad = [r for r in rows if r.get("median") is None or not r.get("matched", True)
           or not (isinstance(r.get("median"), (int, float)) and math.isfinite(r["median"]) and r["median"] > 0)]

    L = ["# Conflux microbenchmarks: summary", ""]
    L.append("Machine: " + ", ".join(f"{k} {v}" for k, v in machine.items()) if machine else "Machine: not recorded")
    L.append("")
    L.append("Each figure is the median over the repetitions, with (min–max). Ratio = Conflux / peer: "
             "for us, us/msg and cores lower is better, for MB/s higher is better. "
             "Rows come from bench/results/micro.jsonl (commands in its `cmd` fields), "
             "channel.jsonl and pipe.json.")
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
    plots = make_plots(rows, os.path.join(out, "plots"))
    L += ["## Plots", ""] + [f"- [{os.path.basename(p)}](plots/{os.path.basename(p)})" for p in plots] + [""]
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(L))
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump({"machine": machine, "rows": rows, "missing": missing, "no_peer": nopeer}, f, indent=1)
    print(f"report: {len(rows)} rows, {len(missing)} missing cells, {len(plots)} plots -> "
          f"{os.path.join(out, 'summary.md')}")
    if a.check:
        for r in bad:
            print(f"report: not sane: {r.get('impl')} {r['layer']} {r['link']} {r['test']} "
                  f"{pstr(r['params'])} {r.get('metric')} = {r.get('median')} matched={r.get('matched')}",
                  file=sys.stderr)
        if bad or not [r for r in cx if r["layer"] == "driver"]:
            return 1
    return 0


def make_plots(rows, d):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        print("report: matplotlib missing (python3-matplotlib): no plots", file=sys.stderr)
        return []
    made = []
    colors = {"shm": "C0", "tcp": "C1", "ucx": "C2", "dpdk": "C3", "af_packet": "C5", "tls": "C4"}
    markers = {"conflux": "o", "openmpi": "s", "ucx_perftest": "^", "sockperf": "v", "iperf3": "D",
               "dpdk_pingpong": "x", "zmq": "P", "omniorb": "h", "mpi": "s", "nats_jetstream": "d"}

    def series(sel, x):
        """(label, linestyle, color) -> sorted points with error bars."""
        g = {}
        for r in sel:
            if r.get("median") is None or x not in r["params"]:
                continue
            lab = f"{r['layer']} {r['link']}" if r["impl"] == "conflux" else f"{r['impl']} ({r['layer']} {r['link']})"
            g.setdefault((lab, "-" if r["impl"] == "conflux" else "--", colors.get(r["link"], "k"),
                          markers.get(r["impl"], "*")), []).append(
                (r["params"][x], r["median"], r.get("min") or r["median"], r.get("max") or r["median"]))
        return g

    def plot(name, title, sel, x, ylabel, logx=True, logy=True):
        g = series(sel, x)
        if not g:
            return
        fig, ax = plt.subplots(figsize=(8, 5))
        for (lab, ls, col, mk), pts in sorted(g.items()):
            pts.sort()
            xs = [p[0] for p in pts]
            ys = [p[1] for p in pts]
            lo = [max(p[1] - p[2], 0) for p in pts]
            hi = [max(p[3] - p[1], 0) for p in pts]
            ax.errorbar(xs, ys, yerr=[lo, hi], label=lab, linestyle=ls, color=col, marker=mk, ms=4, capsize=2)
        if logx:
            ax.set_xscale("log", base=2)
        elif x == "peers":
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel(x)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        p = os.path.join(d, name + ".png")
        fig.savefig(p, dpi=90)
        plt.close(fig)
        made.append(p)

    plot("lat_vs_size", "One-way latency against size (peers dashed)",
         [r for r in rows if r["test"] == "lat"], "size", "us")
    for q in (8, 16, 64, 100):
        plot(f"bw_vs_size_q{q}", f"Bandwidth against size, window Q = {q} (peers dashed)",
             [r for r in rows if r["test"] == "bw" and r["params"].get("q", q) == q and r["layer"] == "driver"],
             "size", "MB/s")
    plot("channel_bw_vs_size", "Event-channel bandwidth against size", [r for r in rows if r["test"] == "bw" and r["layer"] == "channel"], "size", "MB/s")
    plot("bilat_vs_size", "Bidirectional latency (both send each round)", [r for r in rows if r["test"] == "bilat"], "size", "us per round")
    plot("bibw_vs_size", "Bidirectional bandwidth (sum of both directions)", [r for r in rows if r["test"] == "bibw"], "size", "MB/s")
    plot("overlap", "Bandwidth while computing after each send (64 KiB, Q = 16; share of time in the table)",
         [r for r in rows if r["test"] == "overlap"], "compute_us", "MB/s", logx=False, logy=True)
    plot("reuse_fifo", "Bandwidth with N buffers in FIFO order (64 KiB, Q = 16)", [r for r in rows if r["test"] == "reuse_fifo"], "buffers", "MB/s")
    plot("reuse_pct", "Bandwidth with reuse share R of one buffer among 256", [r for r in rows if r["test"] == "reuse_pct"], "reuse_pct", "MB/s", logx=False)
    plot("hotspot_lat", "Hot-spot: one node pinging 1..N peers each round", [r for r in rows if r["test"] == "hotspot_lat"], "peers", "us (round / 2)", logx=False, logy=True)
    plot("hotspot_bw", "Hot-spot: one node receiving from 1..N peers", [r for r in rows if r["test"] == "hotspot_bw"], "peers", "MB/s (sum)", logx=False, logy=True)
    # bars: CPU per message and completion notification
    for name, test, metrics, title in (
            ("cpu", "cpu", ["send_call_cpu_us", "sender_cpu_us", "receiver_cpu_us", "wall_us"], "CPU per message, 64 B, Q = 16"),
            ("notify", "notify", ["one_way_us"], "Completion notification: 8 B one-way latency, polling vs blocking")):
        sel = [r for r in rows if r["test"] == test and r["params"].get("size") in (8, 64) and r["metric"] in metrics
               and r.get("median") is not None]
        if not sel:
            continue
        labels = sorted({(r["impl"], r["link"], r["params"].get("wait", "")) for r in sel})
        fig, ax = plt.subplots(figsize=(9, 5))
        w = 0.8 / len(metrics)
        for i, m in enumerate(metrics):
            ys = []
            for lab in labels:
                v = [r["median"] for r in sel if (r["impl"], r["link"], r["params"].get("wait", "")) == lab and r["metric"] == m]
                ys.append(v[0] if v else 0)
            ax.bar([j + i * w for j in range(len(labels))], ys, w, label=m)
        ax.set_xticks([j + 0.4 - w / 2 for j in range(len(labels))])
        ax.set_xticklabels([f"{a}\n{b} {c}" for a, b, c in labels], fontsize=7, rotation=30)
        ax.set_yscale("log")
        ax.set_ylabel("us")
        ax.set_title(title)
        ax.legend(fontsize=7)
        fig.tight_layout()
        p = os.path.join(d, name + ".png")
        fig.savefig(p, dpi=90)
        plt.close(fig)
        made.append(p)
    return made


if __name__ == "__main__":
    sys.exit(main())
