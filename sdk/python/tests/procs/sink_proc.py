"""A sink in a process of its own: opens a channel by id, subscribes (typed with the dtype
given as a JSON schema, or untyped with "-"), prints "ready", collects `count` events and
prints a JSON summary of what it got."""
import json
import queue
import sys

import conflux

channel_id, schema, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
with conflux.ChannelContext(listen="tcp://127.0.0.1:0") as ctx:
    ch = ctx.open(channel_id)
    sink = ch.sink(None if schema == "-" else conflux.Format.from_json(schema))
    print("ready", flush=True)
    got = []
    try:
        while len(got) < count:
            got.append(sink.get(timeout=20))
    except queue.Empty:
        pass
    steps = [int(e.data["step"]) for e in got]
    energies = [float(e.data["energy"]) for e in got]
    print(json.dumps({"count": len(got), "steps": steps, "energies": energies,
                      "seqs": [e.seq for e in got], "formats": sorted({e.format_name for e in got}),
                      "keys": sorted(got[0].data.keys()) if got and schema == "-" else []}))
