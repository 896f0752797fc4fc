"""Self-check of bench/report: the report over testdata/ (rows recorded from a quick run of
bench/micro and its peers) has a headline row for every test and link, every cell in the
coverage table, ratios, the machine, and real PNG plots; and --check fails on a bad row.
Run: cd bench/report && python3 -m pytest -q test_report.py (make test-bench-report)."""
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = os.path.join(HERE, "report.py")


def fixture_rows():
    return [json.loads(l) for l in open(os.path.join(HERE, "testdata", "micro.jsonl"))]


def run(tmp_path, extra=()):
    res = tmp_path / "results"
    shutil.copytree(os.path.join(HERE, "testdata"), res)
    p = subprocess.run([sys.executable, REPORT, "--results", str(res), *extra],
                       capture_output=True, text=True)
    return p, res


def test_summary_has_every_row(tmp_path):
    p, res = run(tmp_path, ["--check"])
    assert p.returncode == 0, p.stdout + p.stderr
    md = (res / "summary.md").read_text()
    rows = fixture_rows()
    machine = json.load(open(res / "machine.json"))
    assert machine["cpu"] in md and f"kernel {machine['kernel']}" in md
    # every Conflux (test, link) of the fixture has a headline row and a measured coverage cell
    cells = {(r["test"], r["link"]) for r in rows if r["impl"] == "conflux" and r["layer"] == "driver"}
    assert len(cells) >= 40
    head = md.split("## Headline")[1].split("## Coverage")[0]
    cover = md.split("## Coverage")[1].split("## Every point")[0]
    for test, link in cells:
        assert f"| {test} | driver | {link} |" in head, (test, link)
        line = [l for l in cover.splitlines() if l.startswith(f"| driver | {test} |")]
        assert line, test
        links = ["shm", "tcp", "ucx", "dpdk", "af_packet", "tls"]
        assert line[0].split("|")[3 + links.index(link)].strip().startswith("✓"), (test, link, line)
    # the layers: channel and pipe latency, bandwidth and CPU; channel beside bench/channel's peers
    for layer in ("channel", "pipe"):
        for test in ("lat", "bw", "cpu"):
            assert f"| {test} | {layer} | tcp |" in head, (layer, test)
    assert any(f"| {p} |" in head for p in ("zmq", "omniorb")), "bench/channel peers"
    # the layers' own peers: ZeroMQ beside the channel's CPU, NATS core beside the pipe's latency
    assert any(l.startswith("| cpu | channel | tcp |") and "| zmq |" in l for l in head.splitlines())
    assert any(l.startswith("| lat | pipe | tcp |") and "| nats |" in l for l in head.splitlines())
    for layer in ("channel", "pipe"): # notify: blocking beside the same layer polling
        assert any(l.startswith(f"| notify | {layer} | tcp |") and "| conflux, busy polling |" in l
                   for l in head.splitlines()), layer
    for layer, peer in (("channel", "zmq"), ("pipe", "nats")):
        for test in ("bilat", "bibw"):
            assert any(l.startswith(f"| {test} | {layer} | tcp |") and f"| {peer} |" in l
                       for l in head.splitlines()), (layer, test)
    for layer, peer in (("channel", "zmq"), ("pipe", "nats")):
        for test in ("overlap", "reuse_fifo", "reuse_pct"):
            assert any(l.startswith(f"| {test} | {layer} | tcp |") and f"| {peer} |" in l
                       for l in head.splitlines()), (layer, test)
    # the dpdk driver on af_packet, and the bare DPDK peer beside both dpdk columns
    for test in ("lat", "bw", "bilat", "bibw", "overlap", "reuse_fifo", "reuse_pct"):
        line = [l for l in cover.splitlines() if l.startswith(f"| driver | {test} |")][0]
        cols = [c.strip() for c in line.split("|")[3:9]]
        assert "dpdk_pingpong" in cols[3] and "dpdk_pingpong" in cols[4], (test, line)
    # the hot-spot's peers: the bare DPDK peer against N servers on memif and af_packet,
    # ZeroMQ beside the channel's and NATS core beside the pipe's (tcp); each with a ratio
    for test in ("hotspot_lat", "hotspot_bw"):
        for layer, link, peer in (("driver", "dpdk", "dpdk_pingpong"), ("driver", "af_packet", "dpdk_pingpong"),
                                  ("channel", "tcp", "zmq"), ("pipe", "tcp", "nats")):
            lines = [l for l in head.splitlines() if l.startswith(f"| {test} | {layer} | {link} | peers=2,")
                     and f"| {peer} |" in l]
            assert lines, (test, layer, link, peer)
            assert float(lines[0].rstrip(" |").split("|")[-1].replace(",", "")) > 0, lines[0]
    # the layers over the dpdk driver (memif and af_packet): measured, the bare DPDK peer beside
    # them (the channel also beside ZeroMQ's tcp rows), with a ratio
    for layer in ("channel", "pipe"):
        for test in ("lat", "bw", "bilat", "bibw", "overlap", "reuse_fifo", "reuse_pct"):
            line = [l for l in cover.splitlines() if l.startswith(f"| {layer} | {test} |")][0]
            cols = [c.strip() for c in line.split("|")[3:9]]
            for i in (3, 4):
                assert cols[i].startswith("✓") and "dpdk_pingpong" in cols[i], (layer, test, line)
                assert layer == "pipe" or "zmq (tcp)" in cols[i], (layer, test, line)
        for link in ("dpdk", "af_packet"):
            assert any(l.startswith(f"| lat | {layer} | {link} |") and "| dpdk_pingpong |" in l and
                       l.rstrip(" |").split("|")[-1].strip() not in ("—", "n/a")
                       for l in head.splitlines()), (layer, link)
    # every peer of the fixture appears with a ratio beside a Conflux figure
    for impl in {r["impl"] for r in rows} - {"conflux"}:
        lines = [l for l in head.splitlines() if f"| {impl} |" in l]
        assert lines, impl
        assert any(l.rstrip(" |").split("|")[-1].strip() not in ("—", "n/a") for l in lines), impl
    # every command is recorded
    for c in {r["cmd"] for r in rows}:
        assert f"`{c}`" in md


def test_every_empty_cell_has_its_reason(tmp_path):
    p, res = run(tmp_path)
    assert p.returncode == 0, p.stderr
    md = (res / "summary.md").read_text()
    cover = md.split("## Coverage")[1].split("## Every point")[0]
    head = md.split("## Headline")[1].split("## Coverage")[0]
    table = [l for l in cover.splitlines() if l.startswith("| driver |") or l.startswith("| channel |")
             or l.startswith("| pipe |")]
    # the fixture covers every cell (test_a_missing_cell_gives_its_reason removes some)
    empty = sum(l.split("|")[3:9].count(" – ") for l in table)
    doc = json.load(open(res / "summary.json"))
    assert empty == len(doc["missing"]) == 0, doc["missing"]
    assert "Missing cells:" not in cover
    # the channel layer runs on shm as well as tcp (its runtime's two links between processes)
    chan_lat = next(l for l in table if l.startswith("| channel | lat |"))
    cells = [c.strip() for c in chan_lat.split("|")[3:9]]  # shm tcp ucx dpdk af_packet tls
    assert all(c.startswith("✓") for c in cells), chan_lat  # dpdk, af_packet: LAYER_DPDK
    assert "openmpi" in cells[0] and "openmpi" in cells[2], "MPI over the same link is the channel's peer"
    # the pipe layer runs on every link (its direct link, CONFLUX_PIPE_LISTEN; dpdk: LAYER_DPDK)
    pipe_lat = next(l for l in table if l.startswith("| pipe | lat |"))
    cells = [c.strip() for c in pipe_lat.split("|")[3:9]]  # shm tcp ucx dpdk af_packet tls
    assert all(c.startswith("✓") for c in cells), pipe_lat
    # the layers' hot-spot over af_packet (each process in a namespace of its own on a bridge)
    # is measured with a peer: the bare DPDK peer's af_packet hot-spot beside hotspot_lat
    # (its windowed hotspot_bw has other parameters), the layers' own tcp rows beside both
    for layer, own in (("channel", "zmq"), ("pipe", "nats")):
        for test in ("hotspot_lat", "hotspot_bw"):
            hot = next(l for l in table if l.startswith(f"| {layer} | {test} |"))
            cells = [c.strip() for c in hot.split("|")[3:9]]
            assert cells[3].startswith("✓") and cells[4].startswith("✓"), hot
            assert f"{own} (tcp)" in cells[4], hot
            assert test == "hotspot_bw" or "dpdk_pingpong" in cells[4], hot
        assert any(l.startswith(f"| hotspot_lat | {layer} | af_packet | peers=2,") and "| dpdk_pingpong |" in l
                   and l.rstrip(" |").split("|")[-1].strip() not in ("—", "n/a")
                   for l in head.splitlines()), layer
    # every measured cell has a peer: the layers' own peers (ZeroMQ, NATS core: tcp loopback
    # only) stand beside the layer on every link, named "(tcp)" off tcp; the dpdk hot-spots
    # have the bare DPDK peer
    assert "Measured cells without a peer:" not in cover
    for layer, own in (("channel", "zmq"), ("pipe", "nats")):
        for test in ("lat", "bw", "bibw", "cpu", "hotspot_lat", "hotspot_bw"):
            line = next(l for l in table if l.startswith(f"| {layer} | {test} |"))
            cells = [c.strip() for c in line.split("|")[3:9]]  # shm tcp ucx dpdk af_packet tls
            assert f"{own})" in cells[1] or f"{own}," in cells[1], line
            for i in (0, 2, 3):
                assert f"{own} (tcp)" in cells[i], line


def test_a_missing_cell_gives_its_reason(tmp_path):
    """Without the layers' af_packet hot-spot rows (a run whose namespaces could not be made),
    their four cells are empty, each listed with the reason."""
    p, res = run(tmp_path)
    kept = [r for r in fixture_rows() if not (r["layer"] in ("channel", "pipe") and
                                             r["link"] == "af_packet" and r["test"].startswith("hotspot"))]
    assert len(kept) == len(fixture_rows()) - 8
    (res / "micro.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    p = subprocess.run([sys.executable, REPORT, "--results", str(res)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    md = (res / "summary.md").read_text()
    cover = md.split("## Coverage")[1].split("## Every point")[0]
    table = [l for l in cover.splitlines() if l.startswith("| driver |") or l.startswith("| channel |")
             or l.startswith("| pipe |")]
    empty = sum(l.split("|")[3:9].count(" – ") for l in table)
    doc = json.load(open(res / "summary.json"))
    assert empty == len(doc["missing"]) == 4, doc["missing"]
    assert all(link == "af_packet" and "af_packet hot-spot" in why for _, _, link, why in doc["missing"])
    listed = cover.split("Missing cells:")[1]
    assert sum(int(l.split(" cells")[0][2:]) for l in listed.splitlines() if l.startswith("- ")
               and " cells (" in l) == empty
    assert "channel on af_packet: hotspot_lat, hotspot_bw" in listed


def test_plots_are_png(tmp_path):
    p, res = run(tmp_path)
    assert p.returncode == 0, p.stderr
    plots = res / "plots"
    for name in ("lat_vs_size", "bw_vs_size_q16", "bibw_vs_size", "cpu", "notify", "overlap",
                 "reuse_fifo", "reuse_pct", "hotspot_lat", "hotspot_bw"):
        data = (plots / f"{name}.png").read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000, name


def test_check_fails_on_unmatched_count(tmp_path):
    res = tmp_path / "results"
    shutil.copytree(os.path.join(HERE, "testdata"), res)
    rows = fixture_rows()
    rows[0]["matched"] = False
    with open(res / "micro.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    p = subprocess.run([sys.executable, REPORT, "--results", str(res), "--check"],
                       capture_output=True, text=True)
    assert p.returncode == 1
    assert "not sane" in p.stderr
    assert "1 not sane" in (res / "summary.md").read_text()
