#!/usr/bin/env bash
# tests/run-gpu.sh — `make test-gpu`: the CPU suite forced onto the GPU, the
# GPU == CPU differential tests, and compute-sanitizer over the kernels.
# Exit 77 (skipped) when there is no CUDA GPU or the build has no CUDA.
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
log=$(mktemp)
trap 'rm -f "$log"' EXIT

echo "== differential tests (GPU == CPU, bit for bit)"
for d in "$BUILD"/tests/gpudiff_*; do
    "$d" 2>&1 | tee -a "$log"
done

# Every tool invocation pays CUDA's start-up here, so only the tool suites
# run again (the unit tests and the man-page checks never touch the GPU).
echo "== the CLI suites with GIMG_DEVICE=gpu"
for t in tests/cli_g*.sh; do
    GIMG_DEVICE=gpu bash "$t" 2>&1 | grep -E '^(PASS|FAIL|SKIP): ' |
        sed 's/^\(PASS\|FAIL\|SKIP\): /\1: gpu: /' | tee -a "$log"
done

if command -v compute-sanitizer >/dev/null; then
    for d in "$BUILD"/tests/gpudiff_*; do
        for tool in memcheck racecheck initcheck synccheck; do
            out=$(compute-sanitizer --tool "$tool" --error-exitcode 9 "$d" --small 2>&1)
            rc=$?
            if [ $rc -eq 0 ] && echo "$out" | grep -Eq '(ERROR|RACECHECK) SUMMARY: 0 (errors|hazards)'; then
                echo "PASS: compute-sanitizer $tool ${d##*/}" | tee -a "$log"
            else
                echo "$out" | tail -30
                echo "FAIL: compute-sanitizer $tool ${d##*/}: exit $rc" | tee -a "$log"
            fi
        done
    done
else
    echo "SKIP: compute-sanitizer: not installed" | tee -a "$log"
fi

passed=$(grep -c '^PASS: ' "$log"); failed=$(grep -c '^FAIL: ' "$log"); skipped=$(grep -c '^SKIP: ' "$log")
[ "$failed" -gt 0 ] && { echo; echo "Failed:"; grep '^FAIL: ' "$log"; }
echo
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
