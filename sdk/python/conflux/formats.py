"""Conflux formats from numpy structured dtypes, and back from JSON schemas.

A format describes a C struct as it lies in memory; a numpy structured dtype describes the
same thing (field names, types, offsets, itemsize). Format.from_dtype declares the dtype's
own layout to libconflux with explicit offsets (cx_format_create), so any dtype works,
aligned (np.dtype(..., align=True), the C layout) or packed (numpy's default). Readers convert
by field name, so two programs may use different dtypes for one pipe or channel.

    int8..int64, uint8..uint64        -> "int8".."uint64"
    float32, float64                  -> "float", "double"
    bool                              -> "bool"
    S<N> (fixed byte string)          -> "char[N]"
    ('v', '<f8', (3,))                -> "double[3]" (any fixed shape: "[2][3]")
    nested structured dtype           -> a nested struct
    anything else (U, O, datetime, complex, float16, non-native byte order) -> TypeError

Format.schema is the JSON schema form (what a Channel resource declares): it describes the
dtype exactly when the dtype has the C layout (Format.c_layout). Format.from_json builds a
format from such a schema and gives the matching aligned dtype when one exists.
"""
import json
import sys
import threading

import numpy as np

from ._lib import ffi, lib
from .errors import check

_INT = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}
_UINT = {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}
_FLOAT = {4: "float", 8: "double"}
_SCHEMA_TYPES = {
    "int8": "i1", "int16": "i2", "int32": "i4", "int64": "i8",
    "uint8": "u1", "uint16": "u2", "uint32": "u4", "uint64": "u8",
    "float": "f4", "float32": "f4", "double": "f8", "float64": "f8",
    "bool": "?", "boolean": "?", "char": "S1",
}
_NATIVE = "<" if sys.byteorder == "little" else ">"


def _dims(shape):
    return "".join(f"[{n}]" for n in shape)


class _Decl:
    """The struct declarations of one dtype: the top struct first, nested ones after."""

    def __init__(self, dtype, name, defaults):
        self.structs = []  # (struct name, [(field, type string, element size, offset, default)], itemsize)
        self.defaults = defaults or {}
        self._struct(dtype, name, "")

    def _struct(self, dtype, sname, path):
        """Declares struct `sname` for dtype; path is the dotted field path to it ("" = top)."""
        if dtype.names is None:
            raise TypeError(f"format '{sname}' needs a structured dtype (with named fields), "
                            f"got {dtype}")
        fields = []
        self.structs.append((sname, fields, dtype.itemsize))
        for fname in dtype.names:
            fdt, off = dtype.fields[fname][:2]
            fpath = f"{path}.{fname}" if path else fname
            shape = ()
            if fdt.subdtype is not None:
                fdt, shape = fdt.subdtype
            tname, esize, extra = self._element(fdt, sname, fname, fpath)
            dflt = None if path else self.defaults.get(fname)
            fields.append((fname, tname + _dims(tuple(shape) + extra), esize, off,
                           None if dflt is None else str(dflt)))

    def _element(self, dt, sname, fname, path):
        if dt.names is not None:
            sub = f"{sname}_{fname}"
            self._struct(dt, sub, path)
            return sub, dt.itemsize, ()
        if dt.byteorder not in ("=", "|", _NATIVE):
            raise TypeError(f"field '{path}': byte order of {dt.str} is not this machine's; "
                            f"use dtype.newbyteorder('=') (events travel in the writer's own layout)")
        k, n = dt.kind, dt.itemsize
        if k == "i" and n in _INT:
            return _INT[n], n, ()
        if k == "u" and n in _UINT:
            return _UINT[n], n, ()
        if k == "f" and n in _FLOAT:
            return _FLOAT[n], n, ()
        if k == "b":
            return "bool", n, ()
        if k == "S" and n > 0:
            return "char", 1, (n,)
        raise TypeError(f"field '{path}': numpy type {dt.str} has no Conflux equivalent "
                        f"(int8..int64, uint8..uint64, float32, float64, bool, S<n>, "
                        f"fixed sub-arrays and nested structs are)")

    def schema(self):
        """The JSON schema (fields in offset order, as C auto-layout would place them)."""
        def flist(fields):
            out = []
            for fname, tname, _, _, dflt in sorted(fields, key=lambda f: f[3]):
                d = {"name": fname, "type": tname}
                if dflt is not None:
                    d["default"] = json.loads(dflt)
                out.append(d)
            return out
        top = self.structs[0]
        s = {"name": top[0], "fields": flist(top[1])}
        if len(self.structs) > 1:
            s["structs"] = [{"name": n, "fields": flist(f)} for n, f, _ in self.structs[1:]]
        return json.dumps(s, separators=(",", ":"))

    def create(self):
        """cx_format_create with the dtype's own offsets and sizes. Returns the new format."""
        keep = []  # cdata that must outlive the call

        def cstr(s):
            b = ffi.new("char[]", s.encode())
            keep.append(b)
            return b

        decl = ffi.new("struct cx_struct_decl[]", len(self.structs) + 1)
        for i, (sname, fields, size) in enumerate(self.structs):
            fl = ffi.new("struct cx_field[]", len(fields) + 1)
            keep.append(fl)
            for j, (fname, tname, esize, off, dflt) in enumerate(fields):
                fl[j].name, fl[j].type = cstr(fname), cstr(tname)
                fl[j].size, fl[j].offset = esize, off
                fl[j].dflt = cstr(dflt) if dflt is not None else ffi.NULL
            decl[i].name, decl[i].fields, decl[i].size = cstr(sname), fl, size
        out = ffi.new("struct cx_format **")
        check(lib.cx_format_create(decl, ffi.NULL, out), f"format '{self.structs[0][0]}'")
        return out[0]


def _from_json_raw(schema):
    b = schema.encode()
    out = ffi.new("struct cx_format **")
    check(lib.cx_format_from_json(b, len(b), ffi.NULL, out), "format schema")
    return out[0]


def _register(f):
    canon = ffi.new("const struct cx_format **")
    check(lib.cx_format_registry_insert(f, canon), "format registry")
    return canon[0]


class Format:
    """A registered Conflux format (it lives until the process ends, like the C registry's).

    token, name, size: the format's token, top struct name and struct size;
    dtype: the numpy dtype it describes (None for a schema numpy cannot express);
    schema: its JSON schema; c_layout: whether schema describes dtype's exact layout."""

    _cache = {}
    _lock = threading.Lock()

    def __init__(self, ptr, dtype, schema, c_layout):
        self._ptr = ptr
        self.token = int(lib.cx_format_token(ptr))
        self.name = ffi.string(lib.cx_format_name(ptr)).decode()
        self.size = int(lib.cx_format_size(ptr))
        self.dtype = dtype
        self.schema = schema
        self.c_layout = c_layout

    def __repr__(self):
        return f"<conflux.Format '{self.name}' token={self.token:016x} size={self.size}>"

    @classmethod
    def from_dtype(cls, dtype, name="record", defaults=None):
        """The format of a numpy structured dtype (its own offsets), named `name`.
        defaults: {field: number} values a reader uses when a writer lacks the field."""
        dtype = np.dtype(dtype)
        key = ("dtype", dtype, name, tuple(sorted((defaults or {}).items())))
        with cls._lock:
            if key in cls._cache:
                return cls._cache[key]
        decl = _Decl(dtype, name, defaults)
        ptr = _register(decl.create())
        schema = decl.schema()
        try:
            trial = _from_json_raw(schema)
            c_layout = int(lib.cx_format_token(trial)) == int(lib.cx_format_token(ptr))
            lib.cx_format_free(trial)
        except Exception:  # a schema C auto-layout cannot express: not the C layout
            c_layout = False
        f = cls(ptr, dtype, schema, c_layout)
        with cls._lock:
            return cls._cache.setdefault(key, f)

    @classmethod
    def from_json(cls, schema):
        """The format of a JSON schema (C layout). .dtype is the aligned numpy dtype that
        matches it exactly, or None (strings, variable arrays, long...): use bytes then."""
        if isinstance(schema, dict):
            schema = json.dumps(schema)
        key = ("json", schema)
        with cls._lock:
            if key in cls._cache:
                return cls._cache[key]
        ptr = _register(_from_json_raw(schema))
        dtype = None
        try:
            cand, name, defaults = dtype_of_schema(schema)
            if Format.from_dtype(cand, name, defaults).token == int(lib.cx_format_token(ptr)):
                dtype = cand
        except (TypeError, ValueError, KeyError):
            pass
        f = cls(ptr, dtype, schema, dtype is not None)
        with cls._lock:
            return cls._cache.setdefault(key, f)

    @classmethod
    def of(cls, spec, name="record"):
        """A Format from a Format, a numpy dtype (or anything np.dtype accepts, or a
        structured array), or a JSON schema (str or dict)."""
        if spec is None or isinstance(spec, Format):
            return spec
        if isinstance(spec, np.ndarray):
            return cls.from_dtype(spec.dtype, name)
        if isinstance(spec, dict) or (isinstance(spec, str) and spec.lstrip().startswith("{")):
            return cls.from_json(spec)
        return cls.from_dtype(spec, name)


def _parse_type(t, structs, seen):
    """A schema type string ("double[3]", "vec", "char[16]") -> numpy (dtype, shape)."""
    base, _, rest = t.partition("[")
    dims = []
    if rest:
        for part in ("[" + rest).split("[")[1:]:
            dims.append(int(part.rstrip("]")))  # "[n]" variable arrays raise ValueError
    if base in structs:
        if base in seen:
            raise ValueError(f"struct '{base}' contains itself")
        return _struct_dtype(structs[base], structs, seen | {base}), tuple(dims)
    if base == "char" and dims:
        return np.dtype(f"S{dims[-1]}"), tuple(dims[:-1])
    return np.dtype(_SCHEMA_TYPES[base]), tuple(dims)


def _struct_dtype(fields, structs, seen):
    names, formats = [], []
    for fd in fields:
        dt, shape = _parse_type(fd["type"], structs, seen)
        names.append(fd["name"])
        formats.append((dt, shape) if shape else dt)
    return np.dtype({"names": names, "formats": formats}, align=True)


def dtype_of_schema(schema):
    """(aligned dtype, top struct name, defaults) of a JSON schema. Raises KeyError or
    ValueError for types numpy cannot hold (strings, variable arrays, long, enum)."""
    s = json.loads(schema) if isinstance(schema, str) else schema
    structs = {d["name"]: d["fields"] for d in s.get("structs", [])}
    defaults = {fd["name"]: fd["default"] for fd in s["fields"] if "default" in fd}
    return _struct_dtype(s["fields"], structs, frozenset()), s["name"], defaults or None
