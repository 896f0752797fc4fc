#!/usr/bin/env bash
# Runs each test binary given, prints its failures and skips, and ends with one total line
# "dataplane: N passed, N failed, N skipped". A binary that crashes or prints no summary
# counts as one failure. Exits non-zero if anything failed, and, with CONFLUX_REQUIRE_ALL=1
# (set by .ci/run: CI's machine has every requirement, make deps installs them), if
# anything was skipped: a skip there means a requirement went missing.
set -u
passed=0 failed=0 skipped=0
for t in "$@"; do
  out=$("$t" 2>&1); rc=$?
  printf '%s\n' "$out" | grep -Ev '^(RUN|ok  ) ' || true
  line=$(printf '%s\n' "$out" | tail -1)
  if [[ $line =~ ([0-9]+)\ passed,\ ([0-9]+)\ failed,\ ([0-9]+)\ skipped ]]; then
    passed=$((passed + BASH_REMATCH[1])); skipped=$((skipped + BASH_REMATCH[3]))
    failed=$((failed + BASH_REMATCH[2]))
    [ $rc -eq 0 ] || [ "${BASH_REMATCH[2]}" -gt 0 ] || { echo "$t: exit $rc"; failed=$((failed + 1)); }
  else
    echo "$t: crashed or printed no summary (exit $rc)"; failed=$((failed + 1))
  fi
done
echo "dataplane: $passed passed, $failed failed, $skipped skipped"
if [ "${CONFLUX_REQUIRE_ALL:-0}" = 1 ] && [ $skipped -gt 0 ]; then
  echo "dataplane: $skipped tests skipped where every one must run (CONFLUX_REQUIRE_ALL=1); their reasons are above"
  exit 1
fi
[ $failed -eq 0 ]
