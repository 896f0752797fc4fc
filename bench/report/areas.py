"""The report page's areas: each results file turned into questions, each question into series
(Conflux against one peer on one link, point by point). Read by index.py and figures.py.

A series' point is x (bytes, or None for a figure that does not depend on size) -> (Conflux,
peer), each a (median, min, max) triple. A series' role is "main" (in the headline and the
figures), "variant" (another way of running Conflux, e.g. conflux-read: its name starts with
"conflux-") or "reference" (a floor such as memcpy, not a peer): those two go to the full
tables only.
"""
import json
import math
import os


class Series:
    def __init__(self, link, peer, lower_better, cx_name="Conflux", role="main", peer_link=None):
        self.link, self.peer, self.lower_better = link, peer, lower_better
        self.cx_name, self.role, self.peer_link = cx_name, role, peer_link
        self.points = {}  # x -> [cx triple or None, peer triple or None]
        self.cx_cmds, self.peer_cmds = set(), set()

    def put(self, x, cx=None, peer=None):
        p = self.points.setdefault(x, [None, None])
        if cx is not None:
            p[0] = cx
        if peer is not None:
            p[1] = peer

    def title(self):
        """The panel's title: the pair it compares."""
        where = f" ({self.peer_link})" if self.peer_link and self.peer_link != self.link and \
            not str(self.peer).endswith(f"({self.peer_link})") else ""
        return f"{self.link}: {self.cx_name} vs {self.peer or 'no peer'}{where}"

    def advantage(self, x):
        """> 1 where Conflux is ahead of this peer at x (lower time or higher rate), else None."""
        cx, pe = self.points.get(x, (None, None))
        if not cx or not pe or not good(cx[0]) or not good(pe[0]):
            return None
        return pe[0] / cx[0] if self.lower_better else cx[0] / pe[0]


class Question:
    """One figure: what is measured and how (the title), the unit, its series."""
    def __init__(self, key, short, title, unit, figure=True, xlabel="message size"):
        # short: "latency (bench/micro)": what, and the benchmark it comes from
        self.key, self.title, self.unit = key, title, unit
        self.short, _, self.source = short.partition(" (")
        self.source = self.source.rstrip(")")
        self.figure, self.xlabel = figure, xlabel
        self.date = None  # when its results file was written
        self.series = []

    def main(self):
        return [s for s in self.series if s.role == "main"]


class Area:
    def __init__(self, key, name, word="links"):
        self.key, self.name, self.word = key, name, word
        self.runs, self.files = [], []  # the run.sh that writes each results file it reads
        self.questions, self.notes = [], []
        self.errors = []       # a results file that exists but cannot be read
        self.absent = None     # why the area has no results
        self.machine, self.dates = {}, []

    def source(self, run, name, results):
        """Notes that this area reads results/name (written by run); its path if present."""
        self.runs.append(run)
        self.files.append(name)
        path = os.path.join(results, name)
        if not os.path.exists(path):
            return None
        return path


def good(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def triple(vals):
    vals = sorted(v for v in vals if v is not None)
    if not vals:
        return None
    n = len(vals)
    med = vals[n // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) / 2
    return (med, vals[0], vals[-1])


def row_triple(r):
    m = r.get("median")
    return None if m is None else (m, r.get("min", m) if r.get("min") is not None else m,
                                   r.get("max", m) if r.get("max") is not None else m)


def file_date(path, doc=None):
    """The date a results file was written: its own field when it has one, else its mtime."""
    for k in ("time", "date"):
        if isinstance(doc, dict) and isinstance(doc.get(k), str):
            return doc[k][:10]
    import time
    return time.strftime("%Y-%m-%d", time.gmtime(os.path.getmtime(path)))


def read_json(path, area):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        area.errors.append(f"{os.path.basename(path)} cannot be read: {e}")
        return None


def read_jsonl(path, area):
    rows = []
    try:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    rows.append(json.loads(line))
                except ValueError as e:
                    area.errors.append(f"{os.path.basename(path)} line {n} cannot be read: {e}")
    except OSError as e:
        area.errors.append(f"{os.path.basename(path)} cannot be read: {e}")
    return rows


# --- bench/micro: the driver, event-channel and pipe layers on every link ----------------------
LINK_ORDER = ["shm", "tcp", "ucx", "dpdk", "af_packet"]
MICRO_QUESTIONS = {  # test -> (metric, wanted params, unit, short name, how it is measured)
    "lat": ("one_way_us", {}, "µs", "latency", "one-way latency, median of the runs (ping-pong round trip / 2)"),
    "bw": ("MBps", {"q": 16}, "MB/s", "bandwidth", "bandwidth, windowed with Q = 16 messages outstanding"),
}


def micro_questions(layer, rows, peers_of, label):
    """Conflux's rows of one layer beside their peers (peers_of, as in summary.md); tls is left
    out: it has no outside peer (summary.md sets it beside Conflux's tcp)."""
    out = []
    for test, (metric, want, unit, short, how) in MICRO_QUESTIONS.items():
        q = Question(f"micro_{layer}_{test}", f"{short} (bench/micro)", f"{label}: {how} (bench/micro)", unit)
        by = {}
        for r in rows:
            if (r.get("impl"), r.get("layer"), r.get("test"), r.get("metric")) != ("conflux", layer, test, metric):
                continue
            if r.get("link") not in LINK_ORDER or "size" not in r.get("params", {}):
                continue
            if any(r["params"].get(k) != v for k, v in want.items()):
                continue
            x = r["params"]["size"]
            peers = [p for p in peers_of(r, rows)
                     if not p["impl"].startswith("conflux") and p["impl"] != "nats_jetstream"]
            if not peers:
                s = by.setdefault((r["link"], None), Series(r["link"], None, unit == "µs"))
                s.put(x, cx=row_triple(r))
                s.cx_cmds.add(r.get("cmd", ""))
            for p in peers:
                s = by.setdefault((r["link"], p["impl"]), Series(r["link"], p["impl"], unit == "µs",
                                                                 peer_link=p.get("link")))
                s.put(x, cx=row_triple(r), peer=row_triple(p))
                s.cx_cmds.add(r.get("cmd", ""))
                s.peer_cmds.add(p.get("cmd", ""))
        # a link with peers needs no "no peer" series from a point the peers did not measure
        for (link, peer) in list(by):
            if peer is None and any(k[0] == link and k[1] for k in by):
                del by[(link, peer)]
        q.series = [by[k] for k in sorted(by, key=lambda k: (LINK_ORDER.index(k[0]), k[1] or ""))]
        if q.series:
            out.append(q)
    return out


def add_micro(a, layer, results, peers_of, micro_rows, label):
    path = a.source("bench/micro/run.sh", "micro.jsonl", results)
    if path:
        a.dates.append(file_date(path))
        a.questions += micro_questions(layer, micro_rows, peers_of, label)
        a.notes.append("bench/micro's tls rows are not here: no outside TLS peer (summary.md sets "
                       "them beside Conflux's tcp).")


# --- bench/transport: each driver against the tools' own figures -----------------------------
def add_transport(a, results):
    path = a.source("bench/transport/run.sh", "transport.json", results)
    if not path:
        return
    doc = read_json(path, a)
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        if doc is not None:
            a.errors.append("transport.json: no rows")
        return
    a.dates.append(file_date(path, doc))
    lat = Question("transport_lat", "latency (bench/transport)", f"Driver one-way latency, {doc.get('lat_size', 8)} B, median "
                   "(both ends busy polling) against ucx_perftest, sockperf, bare DPDK", "µs")
    bw = Question("transport_bw", "bandwidth (bench/transport)", f"Driver bandwidth, {doc.get('bw_size', 1048576)} B messages, "
                  "against ucx_perftest, iperf3, bare DPDK", "MB/s")
    last_peer = None
    for r in doc["rows"]:
        # "the same, ..." names the row above's peer (the dpdk link without rel/frag)
        peer = last_peer if str(r.get("peer", "")).startswith("the same") and last_peer else r.get("peer")
        last_peer = peer
        for q, cx, pe, x, lower in ((lat, "cx_lat_median_us", "peer_lat_median_us", doc.get("lat_size", 8), True),
                                    (bw, "cx_bw_MBps", "peer_bw_MBps", doc.get("bw_size", 1048576), False)):
            if r.get(cx) is None and r.get(pe) is None:
                continue
            s = Series(r.get("driver", "?"), peer if r.get(pe) is not None else None, lower)
            s.put(x, cx=triple([r.get(cx)]) or (r.get(cx),) * 3, peer=triple([r.get(pe)]))
            s.cx_cmds.add("bench/transport/run.sh")
            s.peer_cmds.add("bench/transport/run.sh")
            q.series.append(s)
    a.questions += [q for q in (lat, bw) if q.series]


# --- bench/channel: event channels against ZeroMQ, omniORB, Open MPI ---------------------------
CHANNEL_PEER_LINK = {"zmq": "tcp", "omniorb": "tcp", "mpi-tcp": "tcp", "mpi-shm": "shm"}


def add_channel(a, results):
    path = a.source("bench/channel/run.sh", "channel.jsonl", results)
    if not path:
        return
    rows = read_jsonl(path, a)
    a.dates.append(file_date(path))
    # Conflux's own link is printed on a line of its own ({"peer":..,"link":..}): the runtime
    # picks shared memory between two processes of one host, so it is not the peers' tcp
    links = {r["peer"]: r["link"] for r in rows if r.get("peer") and r.get("link")}
    vals = {}
    for r in rows:
        key = {"latency": "latency_us", "bandwidth": "bandwidth_MBps"}.get(r.get("metric"))
        if not key or not r.get("peer") or r.get("size") is None:
            continue
        vals.setdefault((r["peer"], r["metric"]), {}).setdefault(r["size"], []).append(r.get(key))
    names = sorted({p for p, _ in vals})
    mine = [p for p in names if p == "conflux" or p.startswith("conflux-")]
    peers = [p for p in names if p not in mine]
    for metric, unit, how in (("latency", "µs", "one-way latency, median (ping-pong / 2)"),
                              ("bandwidth", "MB/s", "bandwidth, windowed (64 events outstanding)")):
        q = Question(f"channel_bench_{metric}", f"{metric} (bench/channel)", f"Event channel {how}, two processes of one host, "
                     "events copied out by the handler (bench/channel)", unit, xlabel="event size")
        for me in mine:
            cxv = vals.get((me, metric), {})
            if not cxv:
                continue
            link = links.get(me, "link not recorded")
            for p in peers or [None]:
                s = Series(link, p, metric == "latency", cx_name=me if me != "conflux" else "Conflux",
                           role="main" if me == "conflux" else "variant",
                           peer_link=CHANNEL_PEER_LINK.get(p, links.get(p)) if p else None)
                pv = vals.get((p, metric), {}) if p else {}
                for x, v in cxv.items():
                    s.put(x, cx=triple(v), peer=triple(pv.get(x, [])))
                s.cx_cmds.add("bench/channel/run.sh")
                if p:
                    s.peer_cmds.add("bench/channel/run.sh")
                q.series.append(s)
        if q.series:
            a.questions.append(q)
    if "conflux-read" in mine:
        a.notes.append("conflux-read (handlers read every byte of every event) is in the full tables.")


# --- bench/sidecar: through confluxd --role=sidecar against embedded ---------------------------
def add_sidecar(a, results):
    path = a.source("bench/sidecar/run.sh", "sidecar.json", results)
    if not path:
        return
    rows = read_jsonl(path, a)
    a.dates.append(file_date(path))
    pipe = Question("sidecar_pipe", "pipe MB/s (bench/sidecar)", "Pipe MB/s through the sidecar (confluxd --role=sidecar) against "
                    "the same calls embedded, one space server, fsync none, loopback", "MB/s",
                    xlabel="segment size")
    calls = Question("sidecar_calls", "events and calls (bench/sidecar)", "Events/s and µs per call through the sidecar against embedded "
                     "(32 B events; pi_tell)", "events/s or µs", figure=False)
    for q, key, label, lower, by_size in (
            (pipe, "pipe_write_MBps", "pipe write", False, True),
            (pipe, "pipe_read_MBps", "pipe read", False, True),
            (calls, "submit_events_per_s", "reliable submit (events/s)", False, False),
            (calls, "best_effort_events_per_s", "best-effort submit (events/s)", False, False),
            (calls, "call_us", "pi_tell call (µs)", True, False)):
        s = Series(label, "embedded", lower, cx_name="sidecar")
        for mode in ("sidecar", "embedded"):
            got = {}
            for r in rows:
                if r.get("mode") == mode and key in r:
                    got.setdefault(r.get("size") if by_size else None, []).append(r[key])
            for x, v in got.items():
                s.put(x, **{"cx" if mode == "sidecar" else "peer": triple(v)})
        if s.points:
            s.cx_cmds.add("bench/sidecar/run.sh")
            s.peer_cmds.add("bench/sidecar/run.sh")
            q.series.append(s)
    a.questions += [q for q in (pipe, calls) if q.series]


# --- bench/format: encode and decode cost per event ------------------------------------------
def add_format(a, results):
    path = a.source("bench/format/run.sh", "format.json", results)
    if not path:
        return
    doc = read_json(path, a)
    if doc is None:
        return
    try:
        sizes, methods = list(doc["sizes"]), dict(doc["methods"])
    except (KeyError, TypeError) as e:
        a.errors.append(f"format.json not understood: {e!r}")
        return
    a.dates.append(file_date(path, doc))
    mine = [m for m in methods if m.startswith("conflux")]
    main = "conflux-homog" if "conflux-homog" in methods else (mine[0] if mine else None)
    for op in ("encode", "decode"):
        q = Question(f"format_{op}", f"{op} (bench/format)", f"{op.capitalize()} cost per event, µs, median of "
                     f"{doc.get('repetitions', '?')} batches, one process", "µs", xlabel="event size")
        for me in mine:
            for p in [m for m in methods if m not in mine]:
                role = "reference" if p == "memcpy" else "main" if me == main else "variant"
                s = Series(op, p, True, cx_name=me, role=role)
                for i, x in enumerate(sizes):
                    cv = (methods[me].get(op) or [None] * len(sizes))[i:i + 1]
                    pv = (methods[p].get(op) or [None] * len(sizes))[i:i + 1]
                    s.put(x, cx=triple(cv), peer=triple(pv))
                s.cx_cmds.add("bench/format/run.sh")
                s.peer_cmds.add("bench/format/run.sh")
                q.series.append(s)
        if q.series:
            a.questions.append(q)
    a.notes.append("memcpy (copying the fields, the floor of any format) is in the full tables.")


# --- bench/pipe: persistent-pipe streams against NATS JetStream -------------------------------
def add_jetstream(a, results):
    path = a.source("bench/pipe/run.sh", "pipe.json", results)
    if not path:
        return
    doc = read_json(path, a)
    if not isinstance(doc, dict):
        if doc is not None:
            a.errors.append("pipe.json: not an object")
        return
    a.dates.append(file_date(path, doc))
    q = Question("jetstream", "stream MB/s (bench/pipe)", "Pipe stream MB/s, writer to reader (two processes), against NATS "
                 "JetStream file storage, per scenario and fsync policy", "MB/s", xlabel="segment size")
    names = {1: "matched", 2: "create first", 3: "attach first"}  # bench/pipe's three scenarios
    by = {}
    for st in doc.get("stream") or []:
        try:
            link = f"{names.get(st['scenario'], st['scenario'])} (fsync {st['policy']})"
            s = by.setdefault(link, Series(link, "NATS JetStream", False))
            s.put(st["size"], cx=row_triple(st.get("conflux_mbps") or {}),
                  peer=row_triple(st.get("nats_mbps") or {}))
        except (KeyError, TypeError) as e:
            a.errors.append(f"pipe.json stream entry not understood: {e!r}")
            continue
        s.cx_cmds.add(doc.get("command") or "bench/pipe/run.sh")
        s.peer_cmds.add(doc.get("command") or "bench/pipe/run.sh")
    q.series = list(by.values())
    a.questions += [q] if q.series else []


def load(results, micro_rows, peers_of):
    """The page's six areas, in its order, each filled from the results files it reads."""
    def add(area, loader, *args):
        before = len(area.questions)
        loader(area, *args)
        for q in area.questions[before:]:  # the date of the file the question was read from
            q.date = area.dates[-1] if area.dates else None

    drv, chan, pipe = Area("driver", "Driver / transport"), Area("channel", "Event channel"), Area("pipe", "Pipe")
    side, fmt, js = Area("sidecar", "Sidecar", "cases"), Area("format", "Formats", "cases"), \
        Area("jetstream", "Pipes vs JetStream", "cases")
    add(drv, add_micro, "driver", results, peers_of, micro_rows, "Driver")
    add(drv, add_transport, results)
    add(chan, add_channel, results)
    add(chan, add_micro, "channel", results, peers_of, micro_rows, "Event channel on each link")
    add(pipe, add_micro, "pipe", results, peers_of, micro_rows, "Pipe, pi_write to pi_read")
    add(side, add_sidecar, results)
    add(fmt, add_format, results)
    add(js, add_jetstream, results)
    areas = [drv, chan, pipe, side, fmt, js]
    for a in areas:
        if not a.questions and not a.errors:
            a.absent = (f"no results: {', '.join(a.files)} absent or without this area's rows "
                        f"(written by {', '.join(sorted(set(a.runs)))})")
    return areas
