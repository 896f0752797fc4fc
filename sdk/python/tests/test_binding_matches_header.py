"""The cffi declarations (conflux/_lib.py) against the real header: every prototype is
re-declared after #include "conflux.h" (a drifted one is a conflicting-types error), and
every struct's size, field offsets and field sizes, and every constant, as cffi computes
them, are static assertions against the C compiler's view. Needs cc (build-essential)."""
import os
import shutil
import subprocess
import tempfile

import pytest

from conflux._lib import FUNCS, ffi, lib
from conftest import REPO


def generated_c():
    lines = ['#include "conflux.h"', '#include "space/cx_space_client.h"', "#include <stddef.h>", ""]
    lines.append(FUNCS)
    for tag in sorted(ffi.list_types()[1]):  # struct tags
        t = ffi.typeof(f"struct {tag}")
        if t.fields is None:
            continue  # opaque in both
        lines.append(f'_Static_assert(sizeof(struct {tag}) == {ffi.sizeof(t)}, "sizeof {tag}");')
        for name, fld in t.fields:
            lines.append(f"_Static_assert(offsetof(struct {tag}, {name}) == {fld.offset}, "
                         f'"{tag}.{name} offset");')
            lines.append(f"_Static_assert(sizeof(((struct {tag} *)0)->{name}) == "
                         f'{ffi.sizeof(fld.type)}, "{tag}.{name} size");')
    for name in sorted(dir(lib)):
        value = getattr(lib, name)
        if isinstance(value, int):
            lines.append(f'_Static_assert({name} == {value}, "{name}");')
    return "\n".join(lines) + "\n"


def test_cdef_agrees_with_conflux_h():
    cc = shutil.which(os.environ.get("CC", "cc"))
    if not cc:
        pytest.skip("no C compiler (cc) to check the declarations against conflux.h")
    src = generated_c()
    assert src.count("_Static_assert") > 100  # the check covers the structs, not nothing
    with tempfile.TemporaryDirectory(prefix="cxsdk-drift-") as d:
        path = os.path.join(d, "drift.c")
        with open(path, "w") as f:
            f.write(src)
        out = subprocess.run([cc, "-std=gnu11", "-Wall", "-Werror", "-fsyntax-only",
                              f"-I{REPO / 'sdk' / 'include'}", f"-I{REPO / 'dataplane' / 'src'}",
                              path], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_a_drifted_declaration_would_be_caught():
    """The check itself: a wrong prototype and a wrong offset both fail to compile."""
    cc = shutil.which(os.environ.get("CC", "cc"))
    if not cc:
        pytest.skip("no C compiler (cc)")
    for bad in ["long pi_read(int d, void *b, int len, const struct cx_format *t);",
                "_Static_assert(offsetof(struct pi_options, window) == 20, \"x\");"]:
        with tempfile.TemporaryDirectory(prefix="cxsdk-drift-") as d:
            path = os.path.join(d, "bad.c")
            with open(path, "w") as f:
                f.write(f'#include "conflux.h"\n#include <stddef.h>\n{bad}\n')
            out = subprocess.run([cc, "-std=gnu11", "-fsyntax-only",
                                  f"-I{REPO / 'sdk' / 'include'}", f"-I{REPO / 'dataplane' / 'src'}",
                                  path], capture_output=True, text=True)
        assert out.returncode != 0, bad
