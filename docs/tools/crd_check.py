#!/usr/bin/env python3
"""Checks Kubernetes manifests of the conflux.dev kinds against the CRDs, field by field:
every field must be declared in the CRD's openAPIV3Schema (unless the schema keeps unknown
fields), of the declared type, within its enum, and every required field present.

    crd_check.py CRD_DIR MANIFEST...

Prints one line per object checked; exits 1 naming each field at fault. Objects of other
API groups are skipped (said so). CEL rules (x-kubernetes-validations) are not evaluated:
the operator's envtest suites run them against a real API server.
"""
import glob
import os
import sys

import yaml

META = {"name", "namespace", "labels", "annotations", "generateName"}


def load_crds(d):
    schemas = {}
    for path in sorted(glob.glob(os.path.join(d, "*.yaml"))):
        for doc in yaml.safe_load_all(open(path)):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            for v in spec["versions"]:
                key = (f"{spec['group']}/{v['name']}", spec["names"]["kind"])
                schemas[key] = v["schema"]["openAPIV3Schema"]
    return schemas


def kind_ok(value, t, schema):
    if schema.get("x-kubernetes-int-or-string"):
        return isinstance(value, (int, str)) and not isinstance(value, bool)
    return {
        "object": lambda: isinstance(value, dict),
        "array": lambda: isinstance(value, list),
        "string": lambda: isinstance(value, str),
        "integer": lambda: isinstance(value, int) and not isinstance(value, bool),
        "number": lambda: isinstance(value, (int, float)) and not isinstance(value, bool),
        "boolean": lambda: isinstance(value, bool),
        None: lambda: True,
    }[t]()


def check(value, schema, path, errs):
    t = schema.get("type")
    if not kind_ok(value, t, schema):
        errs.append(f"{path}: {value!r} is not of type {t}")
        return
    if "enum" in schema and value not in schema["enum"]:
        errs.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, dict):
        for req in schema.get("required", []):
            if req not in value:
                errs.append(f"{path}: the required field '{req}' is missing")
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for k, v in value.items():
            if props is not None and k in props:
                check(v, props[k], f"{path}.{k}", errs)
            elif isinstance(extra, dict):
                check(v, extra, f"{path}.{k}", errs)
            elif schema.get("x-kubernetes-preserve-unknown-fields") or extra is True:
                continue
            elif props is not None or extra is False:
                errs.append(f"{path}.{k}: no such field in the CRD")
    elif isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            check(v, schema["items"], f"{path}[{i}]", errs)


def check_object(obj, schemas, where):
    key = (obj.get("apiVersion"), obj.get("kind"))
    if not str(key[0]).startswith("conflux.dev/"):
        print(f"  {where}: {key[1]} ({key[0]}): not a Conflux kind, not checked")
        return []
    if key not in schemas:
        return [f"{where}: no CRD defines {key[1]} in {key[0]}"]
    errs = []
    meta = obj.get("metadata") or {}
    if "name" not in meta:
        errs.append(f"{where}: metadata.name is missing")
    for k in meta:
        if k not in META:
            errs.append(f"{where}: metadata.{k}: not a field to write in a manifest")
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    schema = dict(schemas[key])
    schema["properties"] = {k: v for k, v in schema.get("properties", {}).items()
                            if k not in ("apiVersion", "kind", "metadata")}
    schema["required"] = [r for r in schema.get("required", []) if r != "metadata"]
    check(body, schema, f"{where}: {key[1]} {meta.get('name')}", errs)
    if not errs:
        print(f"  {where}: {key[1]} {meta.get('name')}: every field is in the CRD")
    return errs


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: crd_check.py CRD_DIR MANIFEST...")
    schemas = load_crds(sys.argv[1])
    if not schemas:
        sys.exit(f"crd_check: no CustomResourceDefinition in {sys.argv[1]}")
    errs = []
    for path in sys.argv[2:]:
        try:
            docs = [d for d in yaml.safe_load_all(open(path)) if d]
        except yaml.YAMLError as e:
            errs.append(f"{path}: not YAML: {e}")
            continue
        for i, obj in enumerate(docs):
            errs += check_object(obj, schemas, f"{os.path.basename(path)}#{i + 1}")
    for e in errs:
        print("crd_check:", e)
    sys.exit(1 if errs else 0)


if __name__ == "__main__":
    main()
