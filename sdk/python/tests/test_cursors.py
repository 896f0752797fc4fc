"""Durable named readers (attach_named, ack) and reader groups (attach_group) against a real
space server: resuming after the last ack, at-least-once redelivery, members sharing a pipe
once, the limit of unacknowledged segments, bad names."""
import errno

import numpy as np
import pytest

import conflux

EV = np.dtype([("k", "<i8"), ("x", "<f8")], align=True)


def write_segments(space, name, n):
    with space.create(name) as w:
        for k in range(n):
            w.write(f"seg{k}".encode())


def seg_no(seg):
    assert seg is not None and seg.startswith(b"seg"), seg
    return int(seg[3:])


def test_named_reader_resumes_after_its_last_ack(space, pipe_name):
    write_segments(space, pipe_name, 20)
    with space.attach_named(pipe_name, "stage-a") as r:
        assert [seg_no(r.read(timeout=10)) for _ in range(10)] == list(range(10))
        r.ack()
        # read, not acknowledged: the cursor's next reader reads them again
        assert [seg_no(r.read(timeout=10)) for _ in range(2)] == [10, 11]
    with pytest.raises(conflux.Error) as e:
        r.ack()
    assert e.value.errno == errno.EBADF
    with space.attach_named(pipe_name, "stage-a") as r2:
        assert r2.tell() == 10
        assert [seg_no(s) for s in r2] == list(range(10, 20))
        r2.ack()
    with space.attach_named(pipe_name, "stage-b") as other:  # another cursor: its own place
        assert seg_no(other.read(timeout=10)) == 0
    with space.attach_named(pipe_name, "stage-a") as done:  # all acknowledged
        assert done.read(timeout=10) is None


def test_named_reader_of_typed_segments(space, pipe_name):
    with space.create(pipe_name) as w:
        for k in range(4):
            a = np.zeros(5, EV)
            a["k"] = np.arange(k * 5, k * 5 + 5)
            w.write(a)
    with space.attach_named(pipe_name, "typed", dtype=EV) as r:
        assert r.read(timeout=10)["k"].tolist() == [0, 1, 2, 3, 4]
        r.ack()
    with space.attach_named(pipe_name, "typed", dtype=EV) as r:
        assert np.concatenate(list(r))["k"].tolist() == list(range(5, 20))


def test_bad_names_and_ack_of_a_plain_reader(space, pipe_name):
    write_segments(space, pipe_name, 1)
    for bad in ["", "-lead", "has space", "a" * 65]:
        for attach in (space.attach_named, space.attach_group):
            with pytest.raises(conflux.Error) as e:
                attach(pipe_name, bad)
            assert e.value.errno == errno.EINVAL, (attach.__name__, bad)
    with space.attach(pipe_name) as r:
        assert seg_no(r.read(timeout=10)) == 0
        with pytest.raises(conflux.Error) as e:
            r.ack()
        assert e.value.errno == errno.EINVAL
        assert pipe_name in str(e.value)


def test_group_members_read_every_segment_once(space, pipe_name):
    n = 20
    write_segments(space, pipe_name, n)
    members = [space.attach_group(pipe_name, "workers") for _ in range(2)]
    seen, shares, ended = {}, [0, 0], [False, False]
    while not all(ended):  # the members take turns, each acknowledging what it read
        for i, r in enumerate(members):
            if ended[i]:
                continue
            seg = r.read(timeout=10)
            if seg is None:
                ended[i] = True
                continue
            k = seg_no(seg)
            assert k not in seen, f"segment {k} read by members {seen[k]} and {i}"
            seen[k] = i
            shares[i] += 1
            r.ack()
    assert sorted(seen) == list(range(n))
    assert shares[0] > 0 and shares[1] > 0, shares
    with pytest.raises(conflux.Error) as e:
        members[0].seek(0)
    assert e.value.errno == errno.EINVAL
    for r in members:
        r.close()
    with space.attach_group(pipe_name, "workers") as late:  # nothing left
        assert late.read(timeout=10) is None


def test_group_hands_back_what_a_leaving_member_did_not_ack(space, pipe_name):
    write_segments(space, pipe_name, 70)
    with space.attach_group(pipe_name, "workers") as a:
        assert [seg_no(a.read(timeout=10)) for _ in range(64)] == list(range(64))
        with pytest.raises(conflux.Error) as e:  # at most 64 held unacknowledged
            a.read(timeout=10)
        assert e.value.errno == errno.ENOBUFS
        a.ack()
        assert [seg_no(a.read(timeout=10)) for _ in range(3)] == [64, 65, 66]
    with space.attach_group(pipe_name, "workers") as b:
        assert [seg_no(s) for s in b] == [64, 65, 66, 67, 68, 69]
        b.ack()
        assert b.stats()["duplicates"] == 3
