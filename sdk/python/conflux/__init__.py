"""Conflux for Python: formats from numpy dtypes, persistent pipes, event channels.

    import numpy as np, conflux
    sample = np.dtype([("step", "<i8"), ("energy", "<f8"), ("pos", "<f4", (3,))], align=True)
    with conflux.Space("tcp://space:7400") as space:
        with space.create("results") as w:
            w.write(np.zeros(64, sample))           # one segment of 64 events
        with space.attach("results", dtype=sample) as r:
            for seg in r:                           # numpy arrays, until the end of the pipe
                ...

Embedded mode: libconflux runs inside this process (no sidecar yet). See sdk/README.md.
"""
from ._lib import ffi, lib  # noqa: F401  (loads libconflux)
from .errors import Error, Timeout
from .formats import Format, dtype_of_schema
from .pipes import Reader, Space, Writer
from .channels import Channel, ChannelContext, Event, Sink, Source

__version__ = "0.1.0"  # = CONFLUX_VERSION_STRING of sdk/include/conflux.h (a test checks)

__all__ = ["Error", "Timeout", "Format", "dtype_of_schema", "Space", "Writer", "Reader",
           "ChannelContext", "Channel", "Source", "Sink", "Event", "__version__"]
