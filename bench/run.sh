#!/usr/bin/env bash
# make bench / make bench-quick: every benchmark folder in turn, then bench/report (index.md,
# summary.md, plots/). Each folder writes its JSON to bench/results/; a folder that fails is
# reported and the others still run.
#   bench/run.sh            full mode, for reports
#   bench/run.sh --quick    smoke mode (CI, under five minutes): every benchmark runs on small
#                           counts and the report checks the numbers are sane, never a speed
set -uo pipefail
cd "$(dirname "$0")"
mode=full
case "${1:-}" in --quick) mode=quick ;; "") ;; *) echo "usage: $0 [--quick]" >&2; exit 2 ;; esac
q=(); [ "$mode" = quick ] && q=(--quick)
mkdir -p results
status=0
start=$(date +%s)
step() { # <name> <command...>
  local t0; t0=$(date +%s)
  echo "==> bench/$1 ($mode)"
  shift
  "$@" || { echo "bench: $* failed"; status=1; }
  echo "<== $(( $(date +%s) - t0 )) s"
}
step micro micro/run.sh "${q[@]}"
step transport transport/run.sh "${q[@]}"
step format format/run.sh "$([ "$mode" = quick ] && echo 3 || echo 7)"
step channel channel/run.sh "${q[@]}"
step pipe pipe/run.sh "${q[@]}"
step report /usr/bin/python3 report/report.py --check
echo "bench ($mode): $(( $(date +%s) - start )) s, results in bench/results/ (index.md first, summary.md, plots/)"
exit $status
