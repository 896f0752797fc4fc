#!/usr/bin/env bash
# make bench: runs every benchmark folder's run.sh in turn; each writes bench/results/<name>.*
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p results
status=0
for r in */run.sh; do
  echo "==> bench/$r"
  bash "$r" || { echo "bench/$r failed"; status=1; }
done
exit $status
