"""Transform programs at the source (docs/filter-language.md): a derived sink's filter
computes fields of its projection dtype before the source sends. A sink in another process
(over a link, or through its sidecar under tests/with_sidecar.sh) and a local one check
every computed value: the mean and max of 16 energies, and a window kept between events."""
import errno
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import conflux
from conftest import HERE

ENERGY = np.dtype([("step", "<i8"), ("x", "<f8"), ("energy", "<f4", (16,))], align=True)
SUMMARY = np.dtype([("step", "<i8"), ("mean", "<f8"), ("peak", "<f8")], align=True)
MEAN_PEAK = "mean = mean(energy); peak = max(energy)"
WINDOW = "every(8); mean = wmean(step, 8); peak = wmax(step, 8)"


def energy_readings(n, first=1):
    """Step k: energy[i] = k + i, so mean k + 7.5 and max k + 15."""
    a = np.zeros(n, ENERGY)
    a["step"] = np.arange(first, first + n)
    a["x"] = a["step"]
    a["energy"] = a["step"][:, None] + np.arange(16)
    return a


def expected(program, n):
    """[seq, step, mean, peak] of each event the program sends for steps 1..n (seq == step)."""
    if program == MEAN_PEAK:
        return [[k, k, k + 7.5, float(k + 15)] for k in range(1, n + 1)]
    return [[k, k, k - 3.5, float(k)] for k in range(8, n + 1, 8)]


@pytest.fixture
def ctx():
    with conflux.ChannelContext(listen="tcp://127.0.0.1:0") as c:
        yield c


def start_transform(channel_id, program, count):
    env = dict(os.environ, PYTHONPATH=str(HERE.parent), PYTHONDONTWRITEBYTECODE="1")
    p = subprocess.Popen([sys.executable, str(HERE / "procs" / "transform_proc.py"), channel_id,
                          program, str(count)], stdout=subprocess.PIPE, text=True, env=env)
    assert p.stdout.readline().strip() == "ready"
    return p


def test_transform_computes_fields_at_the_source(ctx):
    n = 400
    ch = ctx.create(dtype=ENERGY, format_name="energy_reading", reliable=True)
    procs = [start_transform(ch.id, MEAN_PEAK, n), start_transform(ch.id, WINDOW, n // 8)]
    try:
        local = ch.sink(SUMMARY, format_name="summary", filter=WINDOW, projection=SUMMARY)
        ch.wait_members(sinks=3, timeout=10)
        assert ch.source().submit(energy_readings(n), timeout=10) == n
        got_local = [local.get(timeout=10) for _ in range(n // 8)]
        results = [json.loads(p.communicate(timeout=30)[0].splitlines()[-1]) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [[e.seq, int(e.data["step"]), float(e.data["mean"]), float(e.data["peak"])]
            for e in got_local] == expected(WINDOW, n)
    for program, res in zip((MEAN_PEAK, WINDOW), results):
        assert res["events"] == expected(program, n), program
        assert res["formats"] == ["summary"] and not res["extra"]
    st = ch.stats()
    # every(8) lets one event in 8 through, for the local sink and the remote one
    assert st["submitted"] == n and st["dropped"] == 0
    assert st["filtered"] == 2 * (n - n // 8)
    if not os.environ.get("CONFLUX_SOCKET"):  # embedded: the remote sinks' events went out small
        assert st["sent"] >= n + n // 8 and st["projected_bytes_saved"] > 0


def test_bad_transform_programs_are_refused_with_their_column(ctx):
    ch = ctx.create(dtype=ENERGY, format_name="energy_reading")
    with pytest.raises(conflux.Error) as e:
        ch.sink(SUMMARY, filter="nope = 1", projection=SUMMARY)
    assert e.value.errno == errno.EINVAL and "unknown output field 'nope'" in str(e.value)
    with pytest.raises(conflux.Error) as e:
        ch.sink(SUMMARY, filter="step = mean(energy)", projection=SUMMARY)
    assert e.value.errno == errno.EINVAL and "int(" in str(e.value)
    with pytest.raises(conflux.Error) as e:
        ch.sink(SUMMARY, filter="mean = mean(energy)")  # computing needs the projection
    assert e.value.errno == errno.EINVAL
