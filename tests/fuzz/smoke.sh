#!/usr/bin/env bash
# tests/fuzz/smoke.sh — `make fuzz-smoke`: runs every libFuzzer target of
# FUZZ_BUILD (fuzz_*) for FUZZ_SECONDS (default 30) from the seed corpus that
# make_corpus writes, and prints one PASS or FAIL line per target, then
# "N passed, N failed, N skipped". A target fails on a crash, a sanitizer
# report (memory error, leak, undefined behaviour), a broken FUZZ_CHECK, an
# input that runs over 10 s, or more than 2 GiB of memory. Failing inputs
# are kept in FUZZ_BUILD/artifacts/ (reproduce: FUZZ_BUILD/fuzz_NAME FILE).
#
# Seeds in tests/fuzz/regress/NAME/ (inputs that once failed, if any) run
# first, before any mutation.
set -u
cd "$(dirname "$0")/../.."
FUZZ_BUILD=${FUZZ_BUILD:-build/fuzz}
FUZZ_SECONDS=${FUZZ_SECONDS:-30}
artifacts=$FUZZ_BUILD/artifacts
work=$(mktemp -d "${TMPDIR:-/tmp}/gimg-fuzz.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT

if ! "$FUZZ_BUILD"/make_corpus "$work/seeds" >"$work/corpus.log" 2>&1; then
    cat "$work/corpus.log"
    echo "FAIL: fuzz make_corpus: could not write the seed corpus"
    echo; echo "0 passed, 1 failed, 0 skipped"
    exit 1
fi
mkdir -p "$artifacts"

# Leaks count as failures (LeakSanitizer runs with ASan on Linux); UBSan
# stops at the first report (the build has -fno-sanitize-recover).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OMP_NUM_THREADS=1

passed=0 failed=0 skipped=0
for bin in "$FUZZ_BUILD"/fuzz_*; do
    [ -x "$bin" ] && [ -f "$bin" ] || continue
    name=${bin##*/fuzz_}
    corpus=$work/corpus-$name
    mkdir -p "$corpus"
    dirs=("$corpus")
    [ -d "$work/seeds/$name" ] && dirs+=("$work/seeds/$name")
    [ -d "tests/fuzz/regress/$name" ] && dirs+=("tests/fuzz/regress/$name")
    log=$work/$name.log
    # timeout(1) guards against a hang libFuzzer itself cannot end.
    timeout -s KILL $((FUZZ_SECONDS + 120)) "$bin" -max_total_time="$FUZZ_SECONDS" \
        -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$artifacts/$name-" "${dirs[@]}" >"$log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    if [ "$rc" -eq 0 ]; then
        echo "PASS: fuzz $name (${FUZZ_SECONDS} s, ${runs:-?} inputs)"
        passed=$((passed + 1))
    else
        grep -E 'ERROR|SUMMARY|FUZZ_CHECK|runtime error|Test unit written|timeout|#[0-9]+ *(INITED|DONE)' "$log" | head -n 20
        echo "FAIL: fuzz $name: exit status $rc after ${runs:-?} inputs (log tail above; inputs kept in $artifacts/)"
        failed=$((failed + 1))
    fi
done
if [ $((passed + failed)) -eq 0 ]; then
    echo "SKIP: fuzz: no fuzz_* target in $FUZZ_BUILD (make fuzz)"
    skipped=1
fi
echo
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
