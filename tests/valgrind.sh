#!/usr/bin/env bash
# tests/valgrind.sh — `make test-valgrind`: the command-line suites
# (tests/cli_*.sh) with every tool run under valgrind memcheck. A tool's run
# with an invalid read or write, a use of uninitialised memory, a bad free or
# a definite leak fails its test (valgrind's exit status 99) and is listed
# here with valgrind's report. Prints "N passed, N failed, N skipped".
# Arguments name suites to run instead of all (e.g. tests/cli_hardening.sh);
# all of them take a while: every tool run costs about a second.
# BIN and BUILD as in cli_lib.sh; needs a build without SANITIZE=1.
set -u
cd "$(dirname "$0")/.."
BIN=$(cd "${BIN:-bin}" && pwd)
BUILD=$(cd "${BUILD:-build}" && pwd)
if ! command -v valgrind >/dev/null; then
    echo "SKIP: valgrind: not installed"
    echo; echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/gimg-valgrind.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/logs"

# Each tool becomes a script that runs the real one under memcheck, one log
# per process. The suites' own helpers (gen, imgcmp) run as they are.
for tool in "$BIN"/g*; do
    [ -x "$tool" ] && [ -f "$tool" ] || continue
    if nm -u "$tool" 2>/dev/null | grep -q __asan_init || nm "$tool" 2>/dev/null | grep -q __asan_init; then
        echo "valgrind: $tool is built with AddressSanitizer (SANITIZE=1), which valgrind cannot run"
        exit 1
    fi
    cat >"$work/bin/${tool##*/}" <<WRAP
#!/bin/sh
exec valgrind --tool=memcheck --error-exitcode=99 --leak-check=full \\
    --errors-for-leak-kinds=definite --track-origins=yes --quiet \\
    --log-file="$work/logs/${tool##*/}.%p.log" "$tool" "\$@"
WRAP
    chmod +x "$work/bin/${tool##*/}"
done

log=$work/suites.log
[ $# -gt 0 ] || set -- tests/cli_*.sh
for t in "$@"; do
    echo "== $t (under valgrind)"
    GIMG_TEST_SLOW=1 BIN="$work/bin" BUILD="$BUILD" bash "$t" </dev/null 2>&1 | tee -a "$log"
done

# Every log with an error: its report, and one FAIL line each.
bad=0
for l in "$work"/logs/*.log; do
    [ -s "$l" ] || continue
    if grep -q 'ERROR SUMMARY: [1-9]\|definitely lost: [1-9]\|Invalid \|uninitialised' "$l"; then
        echo "---- $l"
        head -n 40 "$l"
        echo "FAIL: valgrind ${l##*/}: memcheck reported errors (above)" | tee -a "$log"
        bad=$((bad + 1))
    fi
done
runs=$(ls "$work"/logs | wc -l)
echo "valgrind: $runs tool runs checked, $bad with errors"
passed=$(grep -c '^PASS: ' "$log")
failed=$(grep -c '^FAIL: ' "$log")
skipped=$(grep -c '^SKIP: ' "$log")
[ "$failed" -gt 0 ] && { echo; echo "Failed:"; grep '^FAIL: ' "$log"; }
echo
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
