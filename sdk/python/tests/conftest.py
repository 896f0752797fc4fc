"""Fixtures: a real space server (confluxd --role=space) on a free loopback port, in a
temporary directory, for the whole session; unique pipe names per test."""
import os
import pathlib
import select
import shutil
import subprocess
import sys
import tempfile

import pytest

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(HERE.parent))  # the conflux package, when run without PYTHONPATH

import conflux  # noqa: E402

CONFLUXD = os.environ.get("CONFLUXD", str(REPO / "dataplane" / "build" / "bin" / "confluxd"))


class SpaceServer:
    """confluxd --role=space --listen=tcp://127.0.0.1:0; .address once it listens."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="cxsdk-py-")
        self.proc = subprocess.Popen(
            [CONFLUXD, "--role=space", f"--dir={self.dir}", "--listen=tcp://127.0.0.1:0", "--quiet"],
            stdout=subprocess.PIPE, text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], 10)
        line = self.proc.stdout.readline() if ready else ""
        if not line.startswith("listening "):
            self.stop()
            raise RuntimeError(f"confluxd did not start (printed {line!r})")
        self.address = line.split()[1]  # "listening tcp://IP:PORT udp IP:PORT"

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def space_server():
    if not os.access(CONFLUXD, os.X_OK):
        pytest.skip(f"no space server binary at {CONFLUXD}: run `make -C dataplane` "
                    f"(or set CONFLUXD)")
    s = SpaceServer()
    yield s
    s.stop()


@pytest.fixture
def space(space_server):
    with conflux.Space(space_server.address, timeout=5) as s:
        yield s


@pytest.fixture
def pipe_name(request):
    return f"py-{request.node.name}-{os.getpid()}"


def run_proc(script, *args, timeout=30):
    """Runs tests/procs/<script> in a new Python process; returns its stdout's last line."""
    env = dict(os.environ, PYTHONPATH=str(HERE.parent), PYTHONDONTWRITEBYTECODE="1")
    out = subprocess.run([sys.executable, str(HERE / "procs" / script), *map(str, args)],
                         capture_output=True, text=True, timeout=timeout, env=env)
    assert out.returncode == 0, f"{script} failed ({out.returncode}): {out.stderr}"
    return out.stdout.strip().splitlines()[-1]
