"""Reads a whole pipe in a process of its own (a registry that never saw the writer's
format) with the dtype given as a JSON schema; prints a JSON summary."""
import json
import sys

import numpy as np

import conflux

address, name, schema = sys.argv[1:4]
fmt = conflux.Format.from_json(schema)
with conflux.Space(address, timeout=5) as space, space.attach(name, dtype=fmt) as r:
    segs = [seg for seg in r]
allev = np.concatenate(segs) if segs else np.zeros(0, fmt.dtype)
print(json.dumps({"segments": len(segs), "events": len(allev),
                  "fields": {n: allev[n].tolist() for n in fmt.dtype.names}}))
