"""numpy structured dtypes <-> Conflux formats, and the errors for what does not map."""
import errno
import json
import re

import numpy as np
import pytest

import conflux
from conftest import REPO

SAMPLE = np.dtype([("step", "<i8"), ("energy", "<f8"), ("pos", "<f4", (3,)),
                   ("label", "S5"), ("ok", "?")], align=True)


def test_aligned_dtype_is_its_schema():
    f = conflux.Format.from_dtype(SAMPLE, "sample")
    assert f.size == SAMPLE.itemsize == 40
    assert f.c_layout
    assert json.loads(f.schema) == {"name": "sample", "fields": [
        {"name": "step", "type": "int64"}, {"name": "energy", "type": "double"},
        {"name": "pos", "type": "float[3]"}, {"name": "label", "type": "char[5]"},
        {"name": "ok", "type": "bool"}]}
    g = conflux.Format.from_json(f.schema)  # the Channel resource's form: same layout
    assert g.token == f.token
    assert g.dtype == SAMPLE


def test_packed_dtype_keeps_its_own_layout():
    fields = [("step", "<i8"), ("flag", "u1"), ("energy", "<f8")]
    packed = np.dtype(fields)  # energy at offset 9
    f = conflux.Format.from_dtype(packed, "sample")
    assert f.size == packed.itemsize == 17
    assert not f.c_layout
    assert f.token != conflux.Format.from_dtype(np.dtype(fields, align=True), "sample").token


def test_nested_structs_and_multidimensional_arrays():
    vec = np.dtype([("x", "<f8"), ("y", "<f8")], align=True)  # else numpy packs it at 4
    dt = np.dtype([("id", "<u4"), ("v", vec, (2,)), ("grid", "<i2", (2, 3)),
                   ("names", "S4", (2,))], align=True)
    f = conflux.Format.from_dtype(dt, "cell")
    s = json.loads(f.schema)
    types = {fd["name"]: fd["type"] for fd in s["fields"]}
    assert types == {"id": "uint32", "v": "cell_v[2]", "grid": "int16[2][3]", "names": "char[2][4]"}
    assert s["structs"] == [{"name": "cell_v", "fields": [{"name": "x", "type": "double"},
                                                          {"name": "y", "type": "double"}]}]
    assert f.c_layout and f.size == dt.itemsize
    assert conflux.Format.from_json(f.schema).dtype == dt
    packed_vec = np.dtype([("x", "<f8"), ("y", "<f8")])  # a packed dtype stays packed inside
    unaligned = np.dtype([("id", "<u4"), ("v", packed_vec, (2,))], align=True)
    assert unaligned.fields["v"][1] == 4  # C would put v at 8
    f = conflux.Format.from_dtype(unaligned, "cell")
    assert not f.c_layout and f.size == unaligned.itemsize


def test_schema_without_numpy_equivalent_has_no_dtype():
    f = conflux.Format.from_json('{"name":"m","fields":[{"name":"n","type":"uint32"},'
                                 '{"name":"text","type":"string"}]}')
    assert f.dtype is None and f.size > 0


@pytest.mark.parametrize("dt, words", [
    (np.dtype([("a", "<U3")]), ["'a'", "<U3", "no Conflux equivalent"]),
    (np.dtype([("a", "O")]), ["'a'", "no Conflux equivalent"]),
    (np.dtype([("z", "<c16")]), ["'z'", "<c16"]),
    (np.dtype([("h", "<f2")]), ["'h'", "<f2"]),
    (np.dtype([("b", ">i4")]), ["'b'", "byte order"]),
    (np.dtype([("p", [("q", "<M8[s]")])]), ["'p.q'"]),
    (np.dtype("<f8"), ["structured dtype"]),
])
def test_unmappable_dtypes_are_refused_naming_the_field(dt, words):
    with pytest.raises(TypeError) as e:
        conflux.Format.from_dtype(dt, "bad")
    for w in words:
        assert w in str(e.value)


@pytest.mark.parametrize("schema, words", [
    ('{"name":"x","fields":[{"name":"a","type":"int33"}]}', ["field 'a'", "unknown type 'int33'"]),
    ('{"name":"x","fields":[{"name":"a","type":"int8"}]} trailing', ["byte"]),
    ('{"name":"x","fields":[{"name":"a","type":"int8","colour":1}]}', ["colour"]),
])
def test_bad_schemas_raise_the_library_message(schema, words):
    with pytest.raises(conflux.Error) as e:
        conflux.Format.from_json(schema)
    assert e.value.errno == errno.EINVAL
    for w in words:
        assert w in str(e.value), str(e.value)


def test_version_is_the_headers():
    text = (REPO / "dataplane" / "src" / "api" / "conflux_version.h").read_text()
    v = {k: m for k, m in re.findall(r"#define CONFLUX_VERSION_(MAJOR|MINOR|PATCH) (\d+)", text)}
    assert conflux.__version__ == f"{v['MAJOR']}.{v['MINOR']}.{v['PATCH']}"
    assert f'#define CONFLUX_VERSION_STRING "{conflux.__version__}"' in text
