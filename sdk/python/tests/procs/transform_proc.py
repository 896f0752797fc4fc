"""A derived sink in a process of its own: opens a channel by id, subscribes with the
transform program given (into the summary dtype), prints "ready", collects `count` events
and prints them as JSON (seq, step, mean, peak), then whether one more came."""
import json
import queue
import sys

import numpy as np

import conflux

SUMMARY = np.dtype([("step", "<i8"), ("mean", "<f8"), ("peak", "<f8")], align=True)

channel_id, program, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
with conflux.ChannelContext(listen="tcp://127.0.0.1:0") as ctx:
    ch = ctx.open(channel_id)
    sink = ch.sink(SUMMARY, format_name="summary", filter=program, projection=SUMMARY)
    print("ready", flush=True)
    got = []
    try:
        while len(got) < count:
            got.append(sink.get(timeout=20))
        extra = sink.get(timeout=0.3)
    except queue.Empty:
        extra = None
    print(json.dumps({"events": [[e.seq, int(e.data["step"]), float(e.data["mean"]),
                                  float(e.data["peak"])] for e in got],
                      "formats": sorted({e.format_name for e in got}),
                      "extra": extra is not None}))
