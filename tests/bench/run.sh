#!/usr/bin/env bash
# tests/bench/run.sh — `make bench`: the kernel benchmarks (GPU), then the
# CPU comparison with vips when vips is installed.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    "$BUILD"/tests/bench/bench_transpose || exit 1
else
    echo "bench: no CUDA GPU: kernel benchmarks skipped"
fi
tests/bench/cpu.sh
