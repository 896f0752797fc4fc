"""Persistent pipes (the π-channel calls, dataplane/src/pipe/cx_pipe.h) for Python.

    with Space("tcp://127.0.0.1:7400") as space:
        with space.create("results") as w:          # pi_create: the one writer
            w.write(b"raw bytes")                    # a segment of bytes
            w.write(events)                          # a segment of a structured array
        with space.attach("results", dtype=mine) as r:   # pi_attach: a reader, any time
            r.seek(0); r.tell()
            for seg in r: ...                        # bytes / arrays in `mine`, until the end
        with space.attach_named("results", "stage-a") as r:  # resumes after the last ack
            for seg in r: handle(seg); r.ack()
        with space.attach_group("jobs", "workers") as r:     # one member: a share of the work
            for seg in r: handle(seg); r.ack()

Typed segments are converted into the reader's dtype by field name, whatever the writer's
dtype was. pi_write stores each format in the space's format service on its first use, so
readers in other processes can convert; Writer.write also publishes it first (Space.publish),
which is redundant now and harmless (sdk/README.md, "Not done yet").
"""
import errno as _errno
import threading

import numpy as np

from ._lib import ffi, lib
from .errors import Error, check_pi, raise_error
from .formats import Format

_POLL_MS = 500  # a blocking read waits in slices, so Ctrl-C is seen between them
_MAX_RAW = 1 << 30  # CX_FRAME_MAX_MSG: no segment is larger


def _timeout_ms(timeout):
    return -1 if timeout is None else max(0, int(timeout * 1000))


class Space:
    """An open space (pi_space_open). address: "tcp://host:port" of its space server.
    listen: where writers reach this process's readers: tcp, shm, ucx or tls, a bare name or a
    full address (default: $CONFLUX_PIPE_LISTEN, else tcp on the address used to reach the
    space, any port); reader_mem: bytes a reader buffers before spilling to /tmp;
    window: segments a writer may have unacknowledged; timeout: seconds calls wait for the
    space (library default 10)."""

    def __init__(self, address, *, listen=None, reader_mem=0, window=0, timeout=None):
        self.address = address
        opts = ffi.new("struct pi_options *")
        keep = ffi.new("char[]", listen.encode()) if listen else ffi.NULL
        opts.listen = keep
        opts.reader_mem = reader_mem
        opts.window = window
        opts.timeout_ms = 0 if timeout is None else max(1, int(timeout * 1000))
        self._s = check_pi(lib.pi_space_open(address.encode(), opts), f"space {address}")
        self._open = set()  # writers and readers to close with the space
        self._published = set()  # format tokens stored in the space's format service
        self._lock = threading.Lock()

    def create(self, name, *, append=False):
        """The writer of pipe `name` (pi_create; append=True: PI_APPEND, a restarted writer
        replaying its writes from the first; the space drops what it holds)."""
        return Writer(self, name, append)

    def attach(self, name, *, dtype=None, format_name="record"):
        """A reader of pipe `name` (pi_attach), from segment 0. With dtype (a structured
        dtype, a Format or a JSON schema) reads return arrays of it; without, bytes."""
        return Reader(self, name, dtype, format_name)

    def attach_named(self, name, cursor, *, dtype=None, format_name="record"):
        """A reader of pipe `name` under the durable cursor `cursor` (pi_attach_named): it
        starts at the cursor's acknowledged position (segment 0 for a new cursor), which the
        space keeps beside the pipe across restarts of readers and of the space; ack() stores
        the position. At least once: what was read and not acknowledged is read again by the
        cursor's next reader. Cursor names: 1..64 bytes of [A-Za-z0-9._-] starting with a
        letter or digit (EINVAL). Readers under one cursor at the same time read
        independently (the last ack wins): to share the work, attach_group."""
        return Reader(self, name, dtype, format_name, cursor=cursor)

    def attach_group(self, name, group, *, dtype=None, format_name="record"):
        """A member of the reader group `group` of pipe `name` (pi_attach_group): the space
        hands each segment to one live member at a time (in any process), so the members
        together read the pipe once. ack() acknowledges the segments this member read since
        its last ack; an acknowledged segment is never handed out again while the space runs.
        What a member read and did not acknowledge goes back to the group when it closes,
        dies or holds it for the ack wait (30 s) without ack() or read(): its next ack()
        raises ESRCH and its next read() joins again. A member holds at most 64 segments
        unacknowledged (read() raises ENOBUFS beyond: ack() first). read() gives None once
        the pipe ended and every segment was handed out and none is held by another member;
        seek() raises EINVAL. Group names follow cursor names' rules."""
        return Reader(self, name, dtype, format_name, group=group)

    def unlink(self, name):
        """Removes the name (pi_unlink); EBUSY while a writer has it open."""
        check_pi(lib.pi_unlink(name.encode(), self._s), f"unlink '{name}'")

    def publish(self, fmt):
        """Stores fmt's description in the space (once per format and Space)."""
        fmt = Format.of(fmt)
        with self._lock:
            if fmt.token in self._published:
                return
        what = f"publishing format '{fmt.name}' to {self.address}"
        c = ffi.new("struct cx_space_client **")
        rc = lib.cx_space_connect(self.address.encode(), c)
        if rc < 0:
            raise_error(-rc, what)
        try:
            rc = lib.cx_space_format_put(c[0], fmt._ptr, ffi.NULL)
            if rc < 0:
                raise_error(-rc, what)  # reads the message before the disconnect below
        finally:
            lib.cx_space_disconnect(c[0])
        with self._lock:
            self._published.add(fmt.token)

    def close(self):
        """Closes the space's open writers (flushing them) and readers, then the space."""
        if self._s is None:
            return
        for p in list(self._open):
            p.close()
        s, self._s = self._s, None
        check_pi(lib.pi_space_close(s), "space close")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Writer:
    """The one writer of a pipe. write() appends one segment; close() returns once the space
    acknowledged the end (the data is stored per the space's fsync policy)."""

    def __init__(self, space, name, append):
        self.space, self.name = space, name
        mode = lib.PI_APPEND if append else lib.PI_CREATE
        self._d = check_pi(lib.pi_create(name.encode(), space._s, mode), f"create '{name}'")
        space._open.add(self)

    def write(self, data, *, format=None, format_name="record"):
        """Appends one segment: bytes-like data (raw), or a structured numpy array (or
        record) whose events travel in its dtype's layout. format: a Format for the array's
        dtype (default: Format.from_dtype(data.dtype, format_name)). Returns the number of
        bytes or events written."""
        if self._d is None:
            raise Error(_errno.EBADF, f"write '{self.name}': the writer is closed")
        if isinstance(data, np.void):
            data = np.array([data], dtype=data.dtype)
        if isinstance(data, np.ndarray) and data.dtype.names is not None:
            fmt = Format.of(format) if format is not None else Format.from_dtype(data.dtype, format_name)
            if fmt.dtype != data.dtype:
                raise TypeError(f"write '{self.name}': array dtype {data.dtype} is not the "
                                f"format's {fmt.dtype}")
            self.space.publish(fmt)
            arr = np.ascontiguousarray(data).reshape(-1)
            n = lib.pi_write(self._d, ffi.from_buffer(arr), len(arr), fmt._ptr)
            return check_pi(n, f"write '{self.name}'")
        if isinstance(data, np.ndarray):
            raise TypeError(f"write '{self.name}': array of {data.dtype} has no named fields: "
                            f"give a structured dtype, or write arr.tobytes() as raw bytes")
        buf = memoryview(data).cast("B")
        n = lib.pi_write(self._d, ffi.from_buffer(buf), len(buf), ffi.NULL)
        return check_pi(n, f"write '{self.name}'")

    def close(self):
        """Ends the pipe (pi_close). Idempotent."""
        if self._d is None:
            return
        d, self._d = self._d, None
        self.space._open.discard(self)
        check_pi(lib.pi_close(d), f"close '{self.name}'")

    def abandon(self):
        """Lets go of the writer WITHOUT ending the pipe (pi_abandon): readers see no end, and
        a writer opened later with append=True replays its writes (those the space holds
        are dropped) and continues. Idempotent; close() after it does nothing."""
        if self._d is None:
            return
        d, self._d = self._d, None
        self.space._open.discard(self)
        check_pi(lib.pi_abandon(d), f"abandon '{self.name}'")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Reader:
    """A reader of a pipe: read() the next segment, seek()/tell() by segment index (0-based),
    iterate until the end. Segments the writer streams before read() is called buffer in
    the background (in memory, then in a spill file)."""

    def __init__(self, space, name, dtype, format_name, *, cursor=None, group=None):
        self.space, self.name = space, name
        self.cursor, self.group = cursor, group
        self.format = Format.of(dtype, format_name)
        if self.format is not None and self.format.dtype is None:
            raise TypeError(f"attach '{name}': format '{self.format.name}' has no numpy dtype "
                            f"(strings or variable arrays): attach without dtype and read bytes")
        if cursor is not None:
            d = lib.pi_attach_named(name.encode(), space._s, cursor.encode())
            what = f"attach '{name}' as cursor '{cursor}'"
        elif group is not None:
            d = lib.pi_attach_group(name.encode(), space._s, group.encode())
            what = f"attach '{name}' to group '{group}'"
        else:
            d, what = lib.pi_attach(name.encode(), space._s), f"attach '{name}'"
        self._d = check_pi(d, what)
        space._open.add(self)
        self._cap = 1 << 16 if self.format is None else max(1, (1 << 20) // self.format.size)
        self._buf = None

    def _buffer(self):
        if self._buf is None or len(self._buf) < self._cap:
            self._buf = (bytearray(self._cap) if self.format is None
                         else np.empty(self._cap, dtype=self.format.dtype))
        return self._buf

    def _read_once(self, timeout_ms):
        """One pi_read_timeout: the segment, None at the end, or raises (ETIMEDOUT too)."""
        while True:
            buf = self._buffer()
            pos = lib.pi_tell(self._d)
            t = ffi.NULL if self.format is None else self.format._ptr
            n = lib.pi_read_timeout(self._d, ffi.from_buffer(buf), len(buf), t, timeout_ms)
            if n >= 0:
                if self.format is None:
                    return bytes(memoryview(buf)[:n])
                return buf[:n].copy()
            err = ffi.errno
            if err == _errno.EPIPE:
                return None
            if err == _errno.EMSGSIZE and len(buf) < _MAX_RAW:
                # The segment is larger than the buffer. A raw read leaves it in place; a
                # typed one has consumed it (sdk/README.md), so go back to it first (a group
                # member cannot seek: the data plane leaves the segment to it).
                if self.format is not None and self.group is None:
                    check_pi(lib.pi_seek(self._d, pos), f"read '{self.name}'")
                self._cap = min(len(buf) * 8, _MAX_RAW)
                continue
            raise_error(err, f"read '{self.name}'")

    def read(self, timeout=None):
        """The next segment: bytes, or a numpy array of the reader's dtype (converted from
        the writer's format). None at the end of the pipe (its writer closed it and every
        segment was read). timeout: seconds (None: wait); conflux.Timeout when nothing came."""
        if self._d is None:
            raise Error(_errno.EBADF, f"read '{self.name}': the reader is detached")
        if timeout is not None:
            return self._read_once(_timeout_ms(timeout))
        while True:
            try:
                return self._read_once(_POLL_MS)
            except Error as e:
                if e.errno != _errno.ETIMEDOUT:
                    raise

    def __iter__(self):
        while True:
            seg = self.read()
            if seg is None:
                return
            yield seg

    def seek(self, segment):
        """The next read returns segment `segment` (0 = the first)."""
        check_pi(lib.pi_seek(self._d, segment), f"seek '{self.name}'")

    def tell(self):
        """The index of the segment the next read returns."""
        return check_pi(lib.pi_tell(self._d), f"tell '{self.name}'")

    def stats(self):
        """Counters: from_space, from_writer, duplicates, spilled, reconnects."""
        st = ffi.new("struct pi_reader_stats *")
        check_pi(lib.pi_reader_stats(self._d, st), f"stats '{self.name}'")
        return {k: int(getattr(st, k)) for k in ("from_space", "from_writer", "duplicates",
                                                  "spilled", "reconnects")}

    def ack(self):
        """Acknowledges what this reader read (pi_ack), once the space stored it. Under a
        cursor (attach_named): every segment read so far (the cursor's position becomes
        tell(), even backwards after a seek). A group member (attach_group): exactly the
        segments read since its last ack; ESRCH when the group took them back (they went to
        other members). EINVAL for a reader of attach(); any other error (the space
        unreachable): nothing was stored, call again."""
        if self._d is None:
            raise Error(_errno.EBADF, f"ack '{self.name}': the reader is detached")
        check_pi(lib.pi_ack(self._d), f"ack '{self.name}'")

    def close(self):
        """Detaches (pi_detach); a group member's unacknowledged segments go back to the
        group at once. Idempotent."""
        if self._d is None:
            return
        d, self._d = self._d, None
        self.space._open.discard(self)
        check_pi(lib.pi_detach(d), f"detach '{self.name}'")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
