#!/usr/bin/env python3
"""energy_mean: a Python component between two pipes.

    energy_mean.py SPACE IN OUT

Reads the samples of pipe IN (written by anyone, e.g. the C producer) in its own numpy
dtype, and writes one summary event per input segment to pipe OUT: the segment's index,
first step, sample count and mean energy. Ends when IN ends.
"""
import sys

import numpy as np

import conflux

# Only the fields this component needs; Conflux converts from the writer's layout by name.
SAMPLE = np.dtype([("step", "<i8"), ("energy", "<f8")], align=True)
SUMMARY = np.dtype([("segment", "<i8"), ("first_step", "<i8"), ("count", "<i4"),
                    ("mean_energy", "<f8")], align=True)


def main(space_addr, src, dst):
    with conflux.Space(space_addr) as space, \
            space.attach(src, dtype=SAMPLE, format_name="sample") as reader, \
            space.create(dst) as writer:
        index = -1
        for index, seg in enumerate(reader):  # numpy arrays of SAMPLE, until IN ends
            out = np.zeros(1, SUMMARY)
            out["segment"], out["first_step"], out["count"] = index, seg["step"][0], len(seg)
            out["mean_energy"] = seg["energy"].mean()
            writer.write(out, format_name="summary")
        print(f"energy_mean: {index + 1} segments of '{src}' summarised into '{dst}'")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
