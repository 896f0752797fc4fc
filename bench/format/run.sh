#!/usr/bin/env bash
# ECho Table 2 reproduction: encode and decode cost per event for Conflux (homogeneous and
# with an unexpected extra field), protobuf-c, msgpack-c, expat XML and memcpy, all in one
# run. Prints a Markdown table; writes bench/results/format.json and format.md. Then the
# numeric array conversions against memcpy (conv_bench): bench/results/format-conv.json and
# format-conv.md.
#   bench/format/run.sh [repetitions]      (default 7; the median is reported)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$here/../results"
make -s -C "$here" -j2 >/dev/null
"$here/build/format_bench" "${1:-7}" "$here/../results/format.json" | tee "$here/../results/format.md"
"$here/build/conv_bench" "${1:-7}" "$here/../results/format-conv.json" | tee "$here/../results/format-conv.md"
