"""Pipes against a real space server: bytes and structured arrays, late readers, seek/tell,
conversion between dtypes (in this process and in another one), big segments, errors."""
import errno
import json
import time

import numpy as np
import pytest

import conflux
from conftest import run_proc

# The writer's events (C layout) and a reader's older, smaller, reordered, narrower,
# packed view of them.
WRITTEN = np.dtype([("tag", "<u8"), ("step", "<i8"), ("energy", "<f8"), ("pos", "<f4", (3,))],
                   align=True)
READ = np.dtype([("energy", "<f4"), ("step", "<i4"), ("pos", "<f8", (3,))])


def events(first, n):
    a = np.zeros(n, WRITTEN)
    a["tag"] = 7
    a["step"] = np.arange(first, first + n)
    a["energy"] = a["step"] * 0.5
    a["pos"] = np.stack([a["step"], -a["step"], a["step"] * 2], axis=1)
    return a


def test_bytes_segments_in_order_then_the_end(space, pipe_name):
    payloads = [b"first", bytes(range(256)) * 10, b"x" * 70000, b"last"]
    with space.create(pipe_name) as w:
        for p in payloads:
            assert w.write(p) == len(p)
        w.write(memoryview(b"a view"))
    with space.attach(pipe_name) as r:
        assert list(r) == payloads + [b"a view"]
        assert r.read() is None  # still the end
        assert r.read(timeout=0.1) is None


def test_structured_arrays_roundtrip_in_the_writers_dtype(space, pipe_name):
    with space.create(pipe_name) as w:
        for k in range(5):
            assert w.write(events(k * 100, 100)) == 100
        w.write(events(500, 1)[0])  # one record: a segment of one event
    with space.attach(pipe_name, dtype=WRITTEN) as r:
        segs = list(r)
    assert [len(s) for s in segs] == [100] * 5 + [1]
    got = np.concatenate(segs)
    assert got.dtype == WRITTEN
    assert np.array_equal(got, events(0, 501))


def test_late_reader_after_the_writer_closed(space, pipe_name):
    with space.create(pipe_name) as w:
        w.write(events(0, 10))
        w.write(events(10, 10))
    # the writer is gone; the space kept the segments
    with space.attach(pipe_name, dtype=READ) as r:
        got = np.concatenate(list(r))
    assert got["step"].tolist() == list(range(20))


def test_reader_attached_first_gets_the_writers_direct_stream(space, pipe_name):
    with space.attach(pipe_name) as r:
        with space.create(pipe_name) as w:
            for i in range(200):
                w.write(i.to_bytes(4, "little"))
        got = [int.from_bytes(s, "little") for s in r]
        st = r.stats()
    assert got == list(range(200))
    assert st["from_writer"] > 0, st  # streamed writer -> reader, not only via the space
    assert st["from_writer"] + st["from_space"] - st["duplicates"] <= 200 + st["duplicates"]


def test_seek_and_tell(space, pipe_name):
    with space.create(pipe_name) as w:
        for i in range(10):
            w.write(bytes([i]) * (i + 1))
    with space.attach(pipe_name) as r:
        assert r.tell() == 0
        assert r.read() == b"\x00"
        assert r.tell() == 1
        r.seek(7)
        assert r.tell() == 7
        assert r.read() == b"\x07" * 8
        r.seek(2)
        assert [s[0] for s in r] == list(range(2, 10))
        assert r.tell() == 10


def test_conversion_between_dtypes_by_field_name(space, pipe_name):
    with space.create(pipe_name) as w:
        w.write(events(0, 64))
        w.write(events(64, 64))
    with space.attach(pipe_name, dtype=READ) as r:
        got = np.concatenate(list(r))
    assert got.dtype == READ and len(got) == 128
    assert got["step"].tolist() == list(range(128))
    assert np.array_equal(got["energy"], (np.arange(128) * 0.5).astype("f4"))
    assert np.array_equal(got["pos"][:, 1], -np.arange(128.0))


def test_conversion_in_a_reader_process_that_never_saw_the_writers_format(space, space_server, pipe_name):
    other = np.dtype([("step", "<i2"), ("missing", "<f8"), ("energy", "<f8")], align=True)
    with space.create(pipe_name) as w:
        for k in range(3):
            w.write(events(k * 50, 50))
    schema = conflux.Format.from_dtype(other, "sample").schema
    got = json.loads(run_proc("reader_proc.py", space_server.address, pipe_name, schema))
    assert got["segments"] == 3 and got["events"] == 150
    assert got["fields"]["step"] == list(range(150))
    assert got["fields"]["energy"] == [s * 0.5 for s in range(150)]
    assert got["fields"]["missing"] == [0.0] * 150  # fields the writer lacks read as zero


def test_segments_larger_than_the_first_buffer(space, pipe_name):
    big = np.random.default_rng(1).bytes(5 << 20)
    with space.create(pipe_name) as w:
        w.write(big)
        w.write(events(0, 100000))  # 4.8 MB of events
        w.write(b"after")
    with space.attach(pipe_name) as r:
        assert r.read() == big
    with space.attach(pipe_name, dtype=READ) as r:
        r.seek(1)
        got = r.read()
        assert len(got) == 100000 and got["step"][-1] == 99999
        assert r.tell() == 2


def test_read_timeout_while_the_writer_is_quiet(space, pipe_name):
    with space.create(pipe_name) as w, space.attach(pipe_name) as r:
        t = time.monotonic()
        with pytest.raises(conflux.Timeout) as e:
            r.read(timeout=0.2)
        assert 0.15 < time.monotonic() - t < 3
        assert e.value.errno == errno.ETIMEDOUT and isinstance(e.value, TimeoutError)
        w.write(b"now")
        assert r.read(timeout=5) == b"now"


def test_abandon_leaves_the_pipe_open_and_append_continues(space, pipe_name):
    w = space.create(pipe_name)
    for k in range(3):
        w.write(b"seg%d" % k)
    w.abandon()
    w.abandon()  # idempotent
    with pytest.raises(conflux.Error) as e:
        w.write(b"late")
    assert e.value.errno == errno.EBADF
    with space.attach(pipe_name) as r:
        assert [r.read(timeout=5) for _ in range(3)] == [b"seg0", b"seg1", b"seg2"]
        with pytest.raises(conflux.Timeout):  # not ended: no end, nothing more yet
            r.read(timeout=0.3)
        with space.create(pipe_name, append=True) as w2:  # the restarted writer replays
            for k in range(5):
                w2.write(b"seg%d" % k)
        assert list(r) == [b"seg3", b"seg4"]


def test_bad_calls_raise_errors_with_the_library_message(space, space_server, pipe_name):
    w = space.create(pipe_name)
    with pytest.raises(conflux.Error) as e:
        space.create(pipe_name)  # one writer per pipe
    assert e.value.errno == errno.EBUSY and pipe_name in str(e.value)
    with pytest.raises(conflux.Error) as e:
        space.unlink(pipe_name)  # open for writing
    assert e.value.errno == errno.EBUSY
    with pytest.raises(TypeError, match="no named fields"):
        w.write(np.arange(4.0))
    with pytest.raises(TypeError, match="no Conflux equivalent"):
        w.write(np.zeros(2, [("s", "<U4")]))
    w.write(b"raw")
    w.close()
    with pytest.raises(conflux.Error) as e:
        w.write(b"more")
    assert e.value.errno == errno.EBADF
    with pytest.raises(conflux.Error) as e:
        space.create(pipe_name)  # closed, with segments
    assert e.value.errno == errno.EEXIST and "APPEND" in str(e.value)
    with space.create(pipe_name, append=True) as again:  # PI_APPEND replays the writes:
        again.write(b"raw")  # segment 0 is held by the space already: dropped
    with space.attach(pipe_name, dtype=READ) as r:
        with pytest.raises(conflux.Error) as e:
            r.read(timeout=5)  # raw bytes read as a format
        assert e.value.errno == errno.EPROTO and "raw bytes" in str(e.value)
    with space.attach(pipe_name) as r:
        assert list(r) == [b"raw"]
    space.unlink(pipe_name)
    with pytest.raises(conflux.Error) as e:
        conflux.Space("tcp://127.0.0.1:1")
    assert e.value.errno == errno.ECONNREFUSED and "127.0.0.1:1" in str(e.value)
    with pytest.raises(conflux.Error) as e:
        conflux.Space("carrier-pigeon://x")
    assert "carrier-pigeon" in str(e.value)
