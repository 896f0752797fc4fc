"""Conflux for Python: formats from numpy dtypes, persistent pipes, event channels.

    import numpy as np, conflux
    sample = np.dtype([("step", "<i8"), ("energy", "<f8"), ("pos", "<f4", (3,))], align=True)
    with conflux.Space("tcp://space:7400") as space:
        with space.create("results") as w:
            w.write(np.zeros(64, sample))           # one segment of 64 events
        with space.attach("results", dtype=sample) as r:
            for seg in r:                           # numpy arrays, until the end of the pipe
                ...

Both modes of libconflux: through the pod's sidecar when CONFLUX_SOCKET is set, else
embedded in this process. See sdk/README.md.
"""
from ._lib import ffi, lib  # noqa: F401  (loads libconflux)
from .errors import Error, Timeout
from .formats import Format, dtype_of_schema
from .pipes import Reader, Space, Writer
from .channels import Channel, ChannelContext, Event, Sink, Source

__version__ = ffi.string(lib.conflux_version()).decode()  # the library's (conflux_version())

__all__ = ["Error", "Timeout", "Format", "dtype_of_schema", "Space", "Writer", "Reader",
           "ChannelContext", "Channel", "Source", "Sink", "Event", "__version__"]
