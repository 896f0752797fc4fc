"""Self-check of bench/report over testdata/ (see testdata/README.md): index.md opens with a
line per area and has its tables, figures and references; every figure is drawn with a peer in
every panel; summary.md has a headline row for every test and link, every coverage cell, ratios
and the machine; and --check fails on an unmatched row, an unreadable results file, a panel
without a peer, a point not positive and finite, a figure not drawn.
Run: cd bench/report && python3 -m pytest -q test_report.py (make test-bench-report)."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = os.path.join(HERE, "report.py")
sys.path.insert(0, HERE)
import areas  # noqa: E402
import report  # noqa: E402

AREAS = ["Driver / transport", "Event channel", "Pipe", "Sidecar", "Formats", "Pipes vs JetStream"]


def fixture_rows():
    return [json.loads(l) for l in open(os.path.join(HERE, "testdata", "micro.jsonl"))]


def results(tmp_path, files=None):
    """A copy of testdata/ (or of the named files of it) as a results directory."""
    res = tmp_path / "results"
    if files is None:
        shutil.copytree(os.path.join(HERE, "testdata"), res)
    else:
        res.mkdir()
        for f in files:
            shutil.copy(os.path.join(HERE, "testdata", f), res / f)
    return res


def rerun(res, extra=()):
    return subprocess.run([sys.executable, REPORT, "--results", str(res), *extra],
                          capture_output=True, text=True, timeout=300)


def run(tmp_path, extra=(), files=None):
    res = results(tmp_path, files)
    return rerun(res, extra), res


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    """One run over the whole fixture, with the figures and --check, shared by the tests that
    only read its output (drawing takes most of the time)."""
    p, res = run(tmp_path_factory.mktemp("full"), ["--check"])
    assert p.returncode == 0, p.stdout + p.stderr
    return res


def test_index_opens_with_a_line_per_area(full):
    md = (full / "index.md").read_text()
    head = md.split("## Where Conflux leads and trails")[1].split("\n## ")[0]
    lines = [l for l in head.splitlines() if l.startswith("- **")]
    assert [l.split("**")[1] for l in lines] == AREAS
    for l in lines:  # each says where Conflux leads or trails, and the run.sh reproducing it
        assert re.search(r"(leads|trails) on \d+ of \d+ (links|cases)", l), l
        assert re.search(r"Reproduce: `bench/\w+/run\.sh`", l), l
    machine = json.load(open(full / "machine.json"))
    assert machine["cpu"] in md.split("## Where")[0]
    # the fixture's driver: ahead on dpdk's bare link, behind somewhere on 5 of 6
    assert "trails on 5 of 6 links" in lines[0] and "bench/transport/run.sh" in lines[0]


def test_each_area_has_its_table_and_references(full):
    md = (full / "index.md").read_text()
    cmds = md.split("\n## Commands\n")[1].split("\n## ")[0]
    numbered = re.findall(r"^(\d+)\. `(.+)`$", cmds, re.M)
    assert numbered and [int(n) for n, _ in numbered] == list(range(1, len(numbered) + 1))
    for name in AREAS:
        sec = md.split(f"\n## {name}\n")[1].split("\n## ")[0]
        rows = [l for l in sec.splitlines() if l.startswith("| ") and not l.startswith(("| question", "| ---"))]
        assert rows, name
        for l in rows:
            cells = [c.strip() for c in l.strip("|").split("|")[2:] if c.strip()]
            assert 1 <= len(cells) <= 3, l
            for c in cells:  # Conflux / best peer (named), a mark, references to the commands
                assert re.search(r"[\d,.]+ / [\d,.]+ .*\(.+\) (▲|\*\*▼\*\*) \[[\d, ]+\]$", c), c
                for n in re.findall(r"\d+", c.rsplit("[", 1)[1]):
                    assert 1 <= int(n) <= len(numbered), c
    assert "**▼**" in md and "▲" in md
    assert "`bench/micro/build/micro_bench shm all quick 3`" in cmds


def test_every_figure_is_drawn_with_a_peer_in_every_panel(full):
    md = (full / "index.md").read_text()
    figs = re.findall(r"!\[[^]]+\]\(plots/([\w]+)\.png\)", md)
    assert len(figs) == len(set(figs)) == 14, figs
    for name in figs:
        data = (full / "plots" / f"{name}.png").read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10000, name
    page = areas.load(str(full), report_rows(full), report.peers_of)
    for a in page:
        assert not a.errors and not a.absent, (a.name, a.errors, a.absent)
        for q in a.questions:
            for s in q.main():
                assert s.peer and any(p[1] for p in s.points.values()), (q.key, s.title())


def report_rows(res):
    rows = fixture_rows()
    for r in rows:
        r.setdefault("impl", "conflux")
        r.setdefault("layer", "driver")
    return rows


def test_channel_rows_keep_their_link_and_conflux_variants_are_not_peers(full):
    page = {a.key: a for a in areas.load(str(full), report_rows(full), report.peers_of)}
    for a in page.values():
        for q in a.questions:
            for s in q.series:
                assert not (s.peer or "").startswith("conflux"), (q.key, s.title())
    chan = [q for q in page["channel"].questions if q.key.startswith("channel_bench_")]
    assert len(chan) == 2
    for q in chan:
        main = q.main()
        # Conflux's bench/channel rows ran over shared memory: never filed under tcp
        assert {s.link for s in main} == {"shm"}, [s.title() for s in main]
        assert {s.peer: s.peer_link for s in main} == {"zmq": "tcp", "omniorb": "tcp", "mpi-tcp": "tcp",
                                                       "mpi-shm": "shm"}
        assert {s.cx_name for s in q.series if s.role == "variant"} == {"conflux-read"}
    md = (full / "index.md").read_text()
    assert "| shm | conflux-read (variant) | mpi-shm |" in md
    assert "| decode | conflux-homog | memcpy (reference) |" in md
    fmt = [s for q in page["format"].questions for s in q.series]
    assert {s.cx_name for s in fmt if s.role == "main"} == {"conflux-homog"}
    assert {s.peer for s in fmt if s.role == "reference"} == {"memcpy"}


def test_an_area_without_results_is_named(tmp_path):
    p, res = run(tmp_path, ["--check", "--no-figures"], files=["format.json"])
    md = (res / "index.md").read_text()
    for name, f in (("Sidecar", "sidecar.json"), ("Pipes vs JetStream", "pipe.json"),
                    ("Event channel", "channel.jsonl")):
        line = next(l for l in md.splitlines() if l.startswith(f"- **{name}**"))
        assert "no results" in line and f in line, line
    assert "- **Formats**: leads" in md
    # an absent area is not a failure; the figures not drawn are
    assert "Sidecar" not in p.stderr and "figure format_encode not drawn" in p.stderr
    assert p.returncode == 1


@pytest.mark.parametrize("name,text,why", [
    ("sidecar.json", "{not json\n", "sidecar.json line 1 cannot be read"),
    ("format.json", "{", "format.json cannot be read"),
    ("pipe.json", "[]", "pipe.json: not an object"),
])
def test_check_fails_on_an_unreadable_file(tmp_path, name, text, why):
    res = results(tmp_path, files=["format.json"])
    (res / name).write_text(text)
    p = rerun(res, ["--check"])
    assert p.returncode == 1 and why in p.stderr, p.stderr
    assert why in (res / "index.md").read_text()


def test_check_fails_on_a_panel_without_its_peer(tmp_path):
    res = results(tmp_path, files=["channel.jsonl"])
    kept = [l for l in (res / "channel.jsonl").read_text().splitlines() if '"conflux' in l]
    (res / "channel.jsonl").write_text("\n".join(kept) + "\n")
    p = rerun(res, ["--check"])
    assert p.returncode == 1
    assert "panel 'shm: Conflux vs no peer' has no peer" in p.stderr, p.stderr


@pytest.mark.parametrize("value", [0, -1.5, "NaN"])
def test_check_fails_on_a_point_not_positive_and_finite(tmp_path, value):
    res = results(tmp_path, files=["format.json"])
    doc = json.load(open(res / "format.json"))
    doc["methods"]["protobuf-c"]["decode"][2] = float(value)
    (res / "format.json").write_text(json.dumps(doc))
    p = rerun(res, ["--check"])
    assert p.returncode == 1
    assert "protobuf-c at 10 KB" in p.stderr and "not positive and finite" in p.stderr, p.stderr


def test_summary_has_every_row(full):
    res = full
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


def test_every_empty_cell_has_its_reason(full):
    res = full
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
    res = results(tmp_path, files=["micro.jsonl", "machine.json"])
    kept = [r for r in fixture_rows() if not (r["layer"] in ("channel", "pipe") and
                                             r["link"] == "af_packet" and r["test"].startswith("hotspot"))]
    assert len(kept) == len(fixture_rows()) - 8
    (res / "micro.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    p = rerun(res, ["--no-figures"])
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


def test_check_fails_on_unmatched_count(tmp_path):
    res = results(tmp_path, files=["micro.jsonl", "machine.json"])
    rows = fixture_rows()
    rows[0]["matched"] = False
    with open(res / "micro.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    p = rerun(res, ["--check", "--no-figures"])
    assert p.returncode == 1
    assert "not sane" in p.stderr
    assert "1 not sane" in (res / "summary.md").read_text()
