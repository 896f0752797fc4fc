#!/usr/bin/env python3
"""Turns the raw JSON lines of bench/pipe/run.sh into bench/results/pipe.json (every run,
the medians, the machine) and pipe.md (Table 3 and the scenario tables)."""
import argparse
import json
import os
import platform
import statistics
import time

# The paper's Table 3 (UDP request-reply within a cluster, lookups/s).
PAPER_T3 = {2: 3642.6, 4: 6277.6, 8: 8267.1, 16: 14335, 32: 13390}
PAPER_BEST = 14335
SCENARIOS = {1: "1 matched create/attach", 2: "2 create first, then attach",
             3: "3 attach first (asynchronous)"}
# (proto, mode, window: "1" | "w" (--window) | "pw" (--pack-window), packed per datagram, label)
LOOKUP_MODES = [
    ("udp", "lib", "1", False, "UDP, one at a time per client (`cx_space_udp_lookup`, the paper's protocol)"),
    ("udp", "win", "1", False, "UDP, one at a time on a kept socket"),
    ("udp", "win", "w", False, "UDP, pipelined: {w} in flight per client, one per datagram (sendmmsg/recvmmsg)"),
    ("udp", "win", "pw", True, "UDP, pipelined and packed: {pw} in flight per client, up to {k} per datagram"),
    ("tcp", "lib", "1", False, "TCP, one at a time per client (`cx_space_lookup`)"),
    ("tcp", "win", "w", False, "TCP, pipelined: {w} frames in flight per client (raw link)"),
]


def machine():
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo") as f:
            mem = int(f.readline().split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return {"cpu": model, "cores": os.cpu_count(), "kernel": platform.release(),
            "mem_mib": mem, "loadavg_at_end": os.getloadavg(), "host": platform.node()}


def summary(values):
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def fmt_rate(s):
    if not s:
        return "failed"
    if s["n"] == 1:
        return f"{s['median']:,.0f}"
    return f"{s['median']:,.0f} ({s['min']:,.0f}–{s['max']:,.0f})"


def fmt_mbps(s):
    if not s:
        return "failed"
    if s["n"] == 1:
        return f"{s['median']:,.1f}"
    return f"{s['median']:,.1f} ({s['min']:,.0f}–{s['max']:,.0f})"


def size_name(b):
    return f"{b // 1048576} MiB" if b >= 1048576 else f"{b // 1024} KiB" if b >= 1024 else f"{b} B"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--raw", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--md", required=True)
    ap.add_argument("--command", default="")
    ap.add_argument("--quick", default="0")
    ap.add_argument("--udp-threads", default="")
    ap.add_argument("--window", type=int, default=32)
    ap.add_argument("--pack", type=int, default=16)
    ap.add_argument("--pack-window", type=int, default=64)
    ap.add_argument("--nats-version", default="")
    ap.add_argument("--commit", default="")
    a = ap.parse_args()

    runs = []
    with open(a.raw) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                runs.append(json.loads(line))

    # Table 3
    lookups = []
    clients = sorted({r["clients"] for r in runs if r.get("bench") == "lookup"})
    for proto, mode, wkey, packed, label in LOOKUP_MODES:
        window = {"1": 1, "w": a.window, "pw": a.pack_window}[wkey]
        per = a.pack if packed else 1
        row = {"proto": proto, "mode": mode, "window": window, "per_datagram": per,
               "label": label.format(w=a.window, pw=a.pack_window, k=a.pack), "by_clients": {}}
        for c in clients:
            vals = [r["rate"] for r in runs if r.get("bench") == "lookup" and r["proto"] == proto
                    and r["mode"] == mode and r["clients"] == c and r["window"] == window
                    and r.get("per_datagram", 1) == per and r["errors"] == 0]
            row["by_clients"][str(c)] = summary(vals)
        lookups.append(row)

    # streams
    streams = []
    keys = sorted({(r["policy"], r["scenario"], r["size"], r["count"]) for r in runs if r.get("bench") == "stream"},
                  key=lambda k: (k[0] != "none", k[1], k[2]))
    for policy, sc, size, count in keys:
        sel = [r for r in runs if r.get("bench") == "stream" and r["policy"] == policy
               and r["scenario"] == sc and r["size"] == size and r["count"] == count]
        cx = [r for r in sel if r["peer"] == "conflux" and r["ok"]]
        nt = [r for r in sel if r["peer"] == "nats" and r["ok"]]
        cs, ns = summary([r["mbps"] for r in cx]), summary([r["mbps"] for r in nt])
        direct = summary([r["from_writer"] / r["count"] for r in cx])
        streams.append({"policy": policy, "scenario": sc, "size": size, "count": count,
                        "conflux_mbps": cs, "nats_mbps": ns,
                        "ratio": cs["median"] / ns["median"] if cs and ns else None,
                        "conflux_direct_share": direct["median"] if direct else None,
                        "failed": sum(1 for r in sel if not r["ok"])})

    m = machine()
    doc = {"benchmark": "pipe", "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "command": a.command,
           "quick": a.quick == "1", "commit": a.commit, "machine": m, "nats_server": a.nats_version,
           "udp_threads": a.udp_threads, "paper_table3": PAPER_T3,
           "lookup": lookups, "stream": streams, "runs": runs}
    with open(a.json, "w") as f:
        json.dump(doc, f, indent=1)

    L = []
    L.append(f"# Persistent pipes: lookups and throughput ({'quick' if a.quick == '1' else 'full'} run)\n")
    L.append(f"`{a.command}` at commit {a.commit}, {doc['time']}. Machine: {m['cpu']}, {m['cores']} cores, "
             f"Linux {m['kernel']}, load average at the end {m['loadavg_at_end'][0]:.2f}. "
             f"Everything on one machine over loopback; the cores are shared with other work, so "
             f"figures are medians of the repetitions with (min–max).\n")
    L.append("## Table 3: lookups served per second by one space server\n")
    L.append(f"`confluxd --role=space --fsync=none --udp-threads={a.udp_threads}`, 25 366 names bound, "
             "each client thread looks up random existing names for a fixed time; every reply is checked "
             "(the right pipe id). The paper's figures: clients on separate cluster nodes (2007).\n")
    L.append("| clients | " + " | ".join(str(c) for c in clients) + " |")
    L.append("| --- |" + " ---: |" * len(clients))
    L.append("| paper (UDP, one at a time) | " + " | ".join(f"{PAPER_T3.get(c, 0):,.0f}" for c in clients) + " |")
    for row in lookups:
        L.append(f"| {row['label']} | " + " | ".join(fmt_rate(row['by_clients'][str(c)]) for c in clients) + " |")
    best_paper_style = max((s["median"] for s in lookups[0]["by_clients"].values() if s), default=0)
    best, best_row, best_c = 0, None, None
    for row in lookups:
        for c, st in row["by_clients"].items():
            if st and st["median"] > best:
                best, best_row, best_c = st["median"], row, c
    reaching = [f"{row['label']} with {c} clients" for row in lookups for c, st in row["by_clients"].items()
                if st and st["median"] >= 50 * PAPER_BEST]
    L.append("")
    L.append(f"Best paper-style figure: {best_paper_style:,.0f}/s = {best_paper_style / PAPER_BEST:.1f}x the "
             f"paper's best ({PAPER_BEST:,}/s). Best figure: {best:,.0f}/s = {best / PAPER_BEST:.1f}x "
             f"({best_row['label'] if best_row else '-'}, {best_c} clients; target: 50x = {50 * PAPER_BEST:,}/s). "
             f"At or above the target (median): {'; '.join(reaching) if reaching else 'none'}.\n")
    for policy in ("none", "every"):
        rows = [s for s in streams if s["policy"] == policy]
        if not rows:
            continue
        if policy == "none":
            L.append("## Throughput scenarios, fsync none\n")
            L.append("Conflux: `confluxd --fsync=none` (acked once in the page cache). NATS JetStream "
                     f"({a.nats_version}): file storage, its default sync (an fsync every 2 minutes, so none "
                     "within a run).\n")
        else:
            L.append("## Throughput scenarios, fsync every\n")
            L.append("Conflux: `confluxd --fsync=every` (fdatasync before each segment's ack). NATS: the same "
                     "default as above, since nats-server 2.9 has no per-message sync option (`sync_interval` "
                     "arrived in 2.10): the NATS column promises less durability than Conflux here.\n")
        L.append("Writer and reader are two processes; MB/s = 10^6 bytes / s from the writer's start to "
                 "the reader holding the last segment (scenario 2 includes the whole write, then the read). "
                 "`direct` = share of segments the Conflux reader got first from the writer's direct link.\n")
        L.append("| scenario | segment | segments | Conflux MB/s | NATS MB/s | Conflux / NATS | direct |")
        L.append("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
        for s in rows:
            ratio = f"{s['ratio']:.2f}x" if s["ratio"] else "–"
            d = f"{s['conflux_direct_share'] * 100:.0f}%" if s["conflux_direct_share"] is not None else "–"
            L.append(f"| {SCENARIOS[s['scenario']]} | {size_name(s['size'])} | {s['count']:,} | "
                     f"{fmt_mbps(s['conflux_mbps'])} | {fmt_mbps(s['nats_mbps'])} | {ratio} | {d} |")
        L.append("")
    with open(a.md, "w") as f:
        f.write("\n".join(L) + "\n")


if __name__ == "__main__":
    main()
