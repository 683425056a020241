#!/usr/bin/env bash
# tests/bench/run.sh — `make bench`: every kernel benchmark (GPU), then the
# CPU comparisons with vips (tests/bench/cpu_*.sh) when vips is installed.
# BENCH=name runs only tests/bench/bench_name and cpu_name.sh.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
status=0
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    for b in "$BUILD"/tests/bench/bench_${BENCH:-*}; do
        [ -x "$b" ] || continue
        echo "== $b"
        "$b" || status=1
    done
else
    echo "bench: no CUDA GPU: kernel benchmarks skipped"
fi
for s in tests/bench/cpu_${BENCH:-*}.sh; do
    [ -f "$s" ] || continue
    echo "== $s"
    bash "$s" || status=1
done
exit $status
