#!/usr/bin/env bash
# tests/run.sh — runs every CPU test program and prints "N passed, N failed, N skipped".
# Each program prints PASS:/FAIL:/SKIP: lines; their counts are the result.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
for t in "$BUILD"/tests/unit_*; do
    [ -x "$t" ] || continue
    echo "== $t"
    "$t" 2>&1 | tee -a "$log" || status=1
done
for t in tests/cli_*.sh; do
    [ -f "$t" ] && [ "$t" != tests/cli_lib.sh ] || continue  # cli_lib.sh is sourced by the others
    echo "== $t"
    # Standard input closed: a tool given no INPUT reads it (cli_conventions.sh).
    bash "$t" </dev/null 2>&1 | tee -a "$log" || status=1
done
passed=$(grep -c '^PASS: ' "$log")
failed=$(grep -c '^FAIL: ' "$log")
skipped=$(grep -c '^SKIP: ' "$log")
if [ "$failed" -gt 0 ]; then
    echo; echo "Failed:"; grep '^FAIL: ' "$log"
    status=1
fi
if [ "$passed" -eq 0 ]; then
    echo "no test passed"; status=1
fi
echo
echo "$passed passed, $failed failed, $skipped skipped"
exit $status
