#!/usr/bin/env bash
# tests/bench/cpu_gtranspose.sh — the CPU backend against the fastest CPU peer, on this
# machine: `gtranspose --device cpu --op rot90` against `vips rot ... d90`
# on a 4096x4096 RGB PPM, PPM to PPM, whole commands (decode, work, encode).
# Checks that both give the same image, then prints the median of 9 runs.
# Skipped when vips is not installed.
set -u
cd "$(dirname "$0")/../.."
. tests/bench/timing.sh

ours=$(median_ms "$BIN"/gtranspose --device cpu --op rot90 "$tmp/in.ppm" "$tmp/ours.ppm") || exit 1
peer=$(median_ms vips rot "$tmp/in.ppm" "$tmp/vips.ppm" d90) || exit 1
if ! "$BUILD"/tests/imgcmp "$tmp/ours.ppm" "$tmp/vips.ppm"; then
    echo "bench-cpu: gtranspose and vips disagree on rot90"
    exit 1
fi
echo "CPU ($(nproc) cores): rot90 of a 4096x4096 RGB PPM, PPM to PPM, median of 9"
printf '  gtranspose --device cpu  %6d ms\n  vips rot d90             %6d ms\n' "$ours" "$peer"
awk -v a="$ours" -v b="$peer" 'BEGIN { printf "  gtranspose is %.2fx the speed of vips\n", b / (a > 0 ? a : 1) }'
