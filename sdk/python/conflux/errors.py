"""Errors: every failing call raises conflux.Error, an OSError carrying the errno and the
library's message (cx_errmsg), e.g. Error(16, "pi_create: pipe 'results' has a writer already")."""
import errno as _errno
import os

from ._lib import ffi, lib


class Error(OSError):
    """A libconflux call failed. .errno is the errno, .strerror the library's message."""

    def __init__(self, err, message):
        super().__init__(err, message)

    def __str__(self):
        name = _errno.errorcode.get(self.errno, str(self.errno))
        return f"[{name}] {self.strerror}"


class Timeout(Error, TimeoutError):
    """Nothing came within the timeout (ETIMEDOUT)."""


def last_message():
    return ffi.string(lib.cx_errmsg()).decode("utf-8", "replace")


def raise_error(err, what, key=None):
    """Raises the Error for a positive errno, with the thread's message (or strerror),
    prefixed by `what` unless the library already gave that context: it named the call
    ("pi_create 'x': ...") or `key` (a channel id, ...) is in the message."""
    msg = last_message() or os.strerror(err)
    cls = Timeout if err == _errno.ETIMEDOUT else Error
    said = msg.startswith("pi_") or (key is not None and key in msg)
    raise cls(err, msg if not what or said else f"{what}: {msg}")


def check(rc, what, key=None):
    """For calls returning 0 or -errno (formats, channels)."""
    if rc < 0:
        raise_error(-rc, what, key)
    return rc


def check_pi(rc, what):
    """For pi_* calls returning -1 with errno set."""
    if rc < 0:
        raise_error(ffi.errno or _errno.EIO, what)
    return rc
