#!/usr/bin/env bash
# tests/run-gpu.sh — `make test-gpu`: the GPU == CPU differential tests, the
# tools' CLI suites forced onto the GPU, and compute-sanitizer over every
# kernel. Exit 77 (skipped) when there is no CUDA GPU or the build has no CUDA.
#
# Every tool invocation pays CUDA's start-up here, so the CLI suites and the
# sanitizer runs (independent of each other) run in parallel; the unit tests
# and the man-page checks never touch the GPU and are left to `make test`.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN=${BIN:-bin}
if ! "$BIN"/gtranspose --version 2>/dev/null | grep -q 'CUDA'; then
    echo "test-gpu: this build has no CUDA support: skipped"; exit 77
fi
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "test-gpu: no CUDA GPU: skipped"; exit 77
fi
nvidia-smi -L
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

echo "== differential tests (GPU == CPU)"
# The programs, not their objects beside them.
GPUDIFF=$(find "$BUILD/tests" -maxdepth 1 -name 'gpudiff_*' ! -name '*.o' | sort)
for d in $GPUDIFF; do
    "$d" 2>&1 | tee "$logs/${d##*/}.log"
done

# sanitize TOOL BINARY: one compute-sanitizer run over a gpudiff program's
# small sizes; PASS only with a clean summary.
sanitize() {
    local tool=$1 d=$2 out rc
    out=$(compute-sanitizer --tool "$tool" --error-exitcode 9 "$d" --small 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && echo "$out" | grep -Eq '(ERROR|RACECHECK) SUMMARY: 0 (errors|hazards)'; then
        echo "PASS: compute-sanitizer $tool ${d##*/}"
    else
        echo "$out" | tail -30
        echo "FAIL: compute-sanitizer $tool ${d##*/}: exit $rc"
    fi
}

echo "== the CLI suites with GIMG_DEVICE=gpu, and compute-sanitizer (in parallel)"
for t in tests/cli_g*.sh tests/cli_batch.sh; do
    name=${t##*/}
    (GIMG_DEVICE=gpu BUILD=$BUILD BIN=$BIN bash "$t" 2>&1 | grep -E '^(PASS|FAIL|SKIP): ' |
        sed 's/^\(PASS\|FAIL\|SKIP\): /\1: gpu: /' >"$logs/$name.log") &
done
if command -v compute-sanitizer >/dev/null; then
    for d in $GPUDIFF; do
        for tool in memcheck racecheck initcheck synccheck; do
            sanitize "$tool" "$d" >"$logs/san-$tool-${d##*/}.log" 2>&1 &
        done
    done
else
    echo "SKIP: compute-sanitizer: not installed" >"$logs/san.log"
fi
wait
for f in "$logs"/cli_*.log "$logs"/san*.log; do
    [ -f "$f" ] && cat "$f"
done

passed=$(cat "$logs"/*.log | grep -c '^PASS: ')
failed=$(cat "$logs"/*.log | grep -c '^FAIL: ')
skipped=$(cat "$logs"/*.log | grep -c '^SKIP: ')
[ "$failed" -gt 0 ] && { echo; echo "Failed:"; cat "$logs"/*.log | grep '^FAIL: '; }
echo
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
