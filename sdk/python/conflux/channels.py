"""Event channels (ECho style, dataplane/src/channel/cx_chan.h) for Python.

    with conflux.ChannelContext() as ctx:                  # one runtime per process
        ch = ctx.create(dtype=reading, reliable=True)     # this process is the contact point
        print(ch.id)                                       # "cx1:tcp://10.0.0.5:4711/1"
        src = ch.source()                                  # events of the channel's dtype
        src.submit(np.zeros(10, reading))                  # ten events

    elsewhere:
        ch = ctx.open(channel_id)
        sink = ch.sink(dtype=older)                        # a queue: sink.get(timeout)
        sink = ch.sink(dtype=older, callback=fn)           # or fn(event) on the runtime's thread
        sink = ch.sink()                                   # untyped: event.data is a dict
                                                           # (reflection of the sender's format)

Callbacks run on the runtime's progress thread, one at a time: keep them short. An
exception in a callback does not reach the runtime: the sink keeps it (sink.errors) and
prints it once.
"""
import atexit
import errno as _errno
import json
import queue
import sys
import weakref
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ._lib import ffi, lib
from .errors import Error, check
from .formats import Format

_live_contexts = weakref.WeakSet()


@dataclass
class Event:
    """One delivered event. data: a numpy record (np.void) of the sink's dtype, or for an
    untyped sink a dict of the event's fields read by reflection; format_name and token: the
    format the event travelled in; seq: the source's event number (1, 2, ...); sender: the
    address of the source's process."""
    data: Any
    format_name: str
    token: int
    seq: int
    sender: str


def _reflect(ev):
    """An untyped event as a dict, read in the sender's layout (cx_reflect_json)."""
    if ev.wire == ffi.NULL:
        return None
    view = ffi.new("struct cx_view *")
    check(lib.cx_reflect_open_format(ev.format, ev.wire, ev.wire_len, view), "reflect")
    cap = 4096
    while True:
        out = ffi.new("char[]", cap)
        n = lib.cx_reflect_json(view, out, cap)
        if n < cap:
            return json.loads(ffi.string(out, n).decode("utf-8", "replace"))
        cap = n + 1


def _sender(ev):
    p = getattr(ev, "from")  # a Python keyword
    return ffi.string(p).decode() if p != ffi.NULL else ""


@ffi.callback("void(void *, const struct cx_chan_event *)")
def _on_event(arg, ev):
    sink = ffi.from_handle(arg)
    try:
        if sink._dtype is not None:
            data = np.frombuffer(bytes(ffi.buffer(ev.data, sink._dtype.itemsize)), sink._dtype)[0]
        else:
            data = _reflect(ev)
        e = Event(data, ffi.string(lib.cx_format_name(ev.format)).decode(), int(ev.token),
                  int(ev.seq), _sender(ev))
        if sink._callback is not None:
            sink._callback(e)
        else:
            sink._queue.put(e)
    except BaseException as exc:  # never unwind into C
        sink.errors.append(exc)
        if len(sink.errors) == 1:
            print(f"conflux: sink callback raised {exc!r} (kept in sink.errors)", file=sys.stderr)


def _ms(timeout):
    return -1 if timeout is None else max(0, int(timeout * 1000))


class ChannelContext:
    """The channel runtime of this process (cx_chan_ctx_create): a listener, a progress
    thread. listen: "tcp://0.0.0.0:0" by default; advertise: the address other processes
    dial (default: this host's first non-loopback IPv4). Create it after any fork()."""

    def __init__(self, listen=None, advertise=None):
        opts = ffi.new("struct cx_chan_ctx_opts *")
        keep = [ffi.new("char[]", s.encode()) if s else ffi.NULL for s in (listen, advertise)]
        opts.listen, opts.advertise = keep
        out = ffi.new("struct cx_chan_ctx **")
        check(lib.cx_chan_ctx_create(opts, out), "channel context")
        self._ctx = out[0]
        self._channels = []
        self.address = ffi.string(lib.cx_chan_ctx_addr(self._ctx)).decode()
        _live_contexts.add(self)

    def _live(self):
        if self._ctx is None:
            raise Error(_errno.EBADF, "the channel context is closed")
        return self._ctx

    def create(self, *, dtype=None, format_name="record", reliable=False, queue_limit=0):
        """A new channel whose contact point is this process. dtype (or Format, or JSON
        schema): the declared format (None: untyped). reliable: back-pressure instead of
        dropping the oldest event of a full sink queue (queue_limit events, default 1024)."""
        fmt = Format.of(dtype, format_name)
        opts = ffi.new("struct cx_chan_opts *")
        opts.format = fmt._ptr if fmt else ffi.NULL
        opts.mode = lib.CX_CHAN_RELIABLE if reliable else lib.CX_CHAN_BEST_EFFORT
        opts.queue_limit = queue_limit
        out = ffi.new("struct cx_chan **")
        check(lib.cx_chan_create(self._live(), opts, out), "create channel")
        return self._add(Channel(self, out[0], fmt))

    def open(self, channel_id, timeout=5.0):
        """Opens a channel created elsewhere by its id (waits up to timeout seconds)."""
        out = ffi.new("struct cx_chan **")
        check(lib.cx_chan_open(self._live(), channel_id.encode(), _ms(timeout), out),
              f"open channel {channel_id}", channel_id)
        fptr = lib.cx_chan_format(out[0])
        fmt = None
        if fptr != ffi.NULL:  # the contact's declared format, described to us on open
            fmt = Format(fptr, None, None, False)
        return self._add(Channel(self, out[0], fmt))

    def _add(self, ch):
        self._channels.append(ch)
        return ch

    def close(self):
        """Closes every channel and stops the runtime (cx_chan_ctx_destroy). Idempotent."""
        if self._ctx is None:
            return
        for ch in self._channels:
            ch._closed_by_context()
        ctx, self._ctx = self._ctx, None
        lib.cx_chan_ctx_destroy(ctx)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Channel:
    """A channel handle: id, sources, sinks, stats. format: the declared Format or None."""

    def __init__(self, ctx, ptr, fmt):
        self._ctx, self._ch, self.format = ctx, ptr, fmt
        self.id = ffi.string(lib.cx_chan_id(ptr)).decode()
        self.reliable = lib.cx_chan_mode(ptr) == lib.CX_CHAN_RELIABLE
        self._members = []

    def _live(self):
        if self._ch is None:
            raise Error(_errno.EBADF, f"channel {self.id} is closed")
        return self._ch

    def source(self, dtype=None, format_name="record"):
        """A source of events of dtype (default: the channel's declared format)."""
        fmt = Format.of(dtype, format_name) if dtype is not None else self.format
        if fmt is None or fmt.dtype is None:
            raise TypeError(f"channel {self.id}: a source needs a structured dtype "
                            f"(the channel declares {'none' if fmt is None else 'one numpy cannot hold'})")
        out = ffi.new("struct cx_chan_source **")
        check(lib.cx_chan_source(self._live(), fmt._ptr, out), f"source on {self.id}", self.id)
        src = Source(self, out[0], fmt)
        self._members.append(src)
        return src

    def sink(self, dtype=None, *, callback=None, filter=None, projection=None,
             format_name="record"):
        """Subscribes a sink. dtype: the events' dtype here (converted from the sender's by
        field name); None: untyped, each event's data is a dict. callback(event) runs on the
        runtime's thread; without it events queue up for sink.get(). filter: a program
        run at every source before it sends (docs/filter-language.md): a condition
        ("id % 4 == 0 && x > 10.0"), or `;`-separated statements that also compute fields
        of the projection and keep state between events ("every(8); mean = wmean(x, 8)").
        projection: a smaller dtype or format the sources convert to before sending, into
        which the program's computed fields are written (the same dtype as `dtype`: the
        sink's own format). A bad program raises conflux.Error (EINVAL, naming the column)."""
        fmt = Format.of(dtype, format_name)
        if fmt is not None and fmt.dtype is None:
            raise TypeError("a typed sink needs a format with a numpy dtype")
        if projection is None:
            proj = None
        elif fmt is not None and not isinstance(projection, (Format, str, dict)) and \
                (projection.dtype if isinstance(projection, np.ndarray) else
                 np.dtype(projection)) == fmt.dtype:
            proj = fmt  # the events arrive in the sink's own format
        else:
            proj = Format.of(projection, format_name + "_projection")
        return Sink(self, fmt, callback, filter, proj)

    def wait_members(self, sources=0, sinks=0, timeout=5.0):
        """Waits until this process knows at least that many sources and sinks."""
        check(lib.cx_chan_wait_members(self._live(), sources, sinks, _ms(timeout)),
              f"wait for members of {self.id}", self.id)

    def stats(self):
        """The channel's counters as a dict (cx_chan_stats)."""
        st = ffi.new("struct cx_chan_stats *")
        lib.cx_chan_stats(self._live(), st)
        return {name: int(getattr(st, name)) for name, _ in ffi.typeof(st[0]).fields}

    def close(self):
        """Closes this handle: its sources and sinks leave. Idempotent."""
        if self._ch is None:
            return
        for m in list(self._members):
            m.close()
        ch, self._ch = self._ch, None
        lib.cx_chan_close(ch)

    def _closed_by_context(self):
        for m in self._members:
            m._ptr = None
        self._ch = None


class Source:
    """Submits events (structured arrays, records, dicts or bytes of the source's format)."""

    def __init__(self, ch, ptr, fmt):
        self.channel, self._ptr, self.format = ch, ptr, fmt

    def _records(self, event):
        dt = self.format.dtype
        if isinstance(event, dict):
            rec = np.zeros(1, dt)
            for k, v in event.items():
                if k not in dt.names:
                    raise KeyError(f"source on {self.channel.id}: no field '{k}' in {dt}")
                rec[k] = v
            return rec
        if isinstance(event, (np.ndarray, np.void)):
            arr = np.ascontiguousarray(np.atleast_1d(event)).reshape(-1)
            if arr.dtype != dt:
                raise TypeError(f"source on {self.channel.id}: events of {arr.dtype}, the "
                                f"source's dtype is {dt}")
            return arr
        buf = bytes(event)
        if len(buf) % dt.itemsize:
            raise ValueError(f"source on {self.channel.id}: {len(buf)} bytes are not whole "
                             f"{dt.itemsize}-byte events")
        return np.frombuffer(buf, dt)

    def submit(self, event, timeout=None):
        """Submits one event, or each event of an array in order. On a reliable channel it
        waits up to timeout seconds (None: forever) for room in every sink's queue
        (conflux.Timeout after); on a best-effort one it never waits. Returns the count."""
        if self._ptr is None:
            raise Error(_errno.EBADF, f"source on {self.channel.id} is closed")
        arr = self._records(event)
        base = ffi.cast("char *", ffi.from_buffer(arr))
        ms = _ms(timeout)
        for i in range(len(arr)):
            check(lib.cx_chan_submit_wait(self._ptr, base + i * arr.itemsize, ms),
                  f"submit on {self.channel.id}", self.channel.id)
        return len(arr)

    def close(self):
        if self._ptr is None:
            return
        p, self._ptr = self._ptr, None
        self.channel._members.remove(self)
        lib.cx_chan_source_close(p)


class Sink:
    """A subscription. Without a callback, get(timeout) returns the next Event (or raises
    queue.Empty); errors: exceptions its callback raised; error(): what a source reported
    (a filter it could not compile, an event it could not convert)."""

    def __init__(self, ch, fmt, callback, filt, proj):
        self.channel, self.format = ch, fmt
        self._dtype = fmt.dtype if fmt is not None else None
        self._callback = callback
        self._queue: Optional[queue.Queue] = None if callback else queue.Queue()
        self.errors = []
        self._handle = ffi.new_handle(self)  # keeps the callback's argument alive
        opts = ffi.new("struct cx_chan_sink_opts *")
        keep = ffi.new("char[]", filt.encode()) if filt else ffi.NULL
        opts.format = fmt._ptr if fmt else ffi.NULL
        opts.filter = keep
        opts.projection = proj._ptr if proj else ffi.NULL
        out = ffi.new("struct cx_chan_sink **")
        check(lib.cx_chan_sink(ch._live(), opts, _on_event, self._handle, out),
              f"sink on {ch.id}", ch.id)
        self._ptr = out[0]
        ch._members.append(self)

    def get(self, timeout=None):
        """The next event (queue mode). Raises queue.Empty after timeout seconds."""
        if self._queue is None:
            raise TypeError("this sink delivers to its callback")
        return self._queue.get(timeout=timeout)

    def error(self):
        """The last error a source reported for this sink, or ''."""
        if self._ptr is None:
            return ""
        out = ffi.new("char[]", 512)
        n = lib.cx_chan_sink_error(self._ptr, out, 512)
        return ffi.string(out, min(n, 511)).decode("utf-8", "replace")

    def close(self):
        """Unsubscribes; when it returns the callback is not running and will not run."""
        if self._ptr is None:
            return
        p, self._ptr = self._ptr, None
        self.channel._members.remove(self)
        lib.cx_chan_sink_close(p)


def _close_all():
    # Before the interpreter tears down: no callback may run into a dying Python.
    for ctx in list(_live_contexts):
        ctx.close()


atexit.register(_close_all)
