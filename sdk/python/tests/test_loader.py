"""The package outside this repository finds libconflux through pkg-config (conflux.pc of an
installed SDK), as a user's copy would."""
import os
import shutil
import subprocess
import sys

from conftest import REPO


def test_outside_the_tree_the_library_comes_from_pkg_config(tmp_path):
    lib = REPO / "sdk" / "build" / "lib"
    pc = tmp_path / "pkgconfig"
    pc.mkdir()
    (pc / "conflux.pc").write_text(
        f"prefix={tmp_path}\nlibdir={lib}\nincludedir=${{prefix}}/include\n\n"
        "Name: conflux\nDescription: test\nVersion: 0\nLibs: -L${libdir} -lconflux\n")
    shutil.copytree(REPO / "sdk" / "python" / "conflux", tmp_path / "pkg" / "conflux")
    env = {k: v for k, v in os.environ.items() if k not in ("CONFLUX_LIB", "PYTHONPATH")}
    env["PKG_CONFIG_PATH"] = str(pc)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    out = subprocess.run([sys.executable, "-c", "import conflux, conflux._lib as l; "
                          "print(l.default_path()); print(conflux.__version__)"],
                         cwd=tmp_path / "pkg", env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    path, version = out.stdout.split()
    assert path == str(lib / "libconflux.so.0")
    assert version == (REPO / "dataplane" / "src" / "api" / "conflux_version.h").read_text() \
        .split('CONFLUX_VERSION_STRING "')[1].split('"')[0]
