#!/usr/bin/env bash
# tests/bench/cpu_gconv.sh — the CPU backend against libvips on this machine,
# whole commands (decode, work, encode), on a 4096x4096 RGB PPM:
#   gconv --device cpu -k gaussian:2   vs  vips gaussblur in out 2 --min-ampl 0.011
#       (the same 13-tap support; results differ by vips's fixed-point
#       arithmetic, so only the largest difference is printed)
#   gconv --device cpu -k '-1 -1 -1; -1 9 -1; -1 -1 -1'  vs  vips conv --precision integer
#       (an integer mask with scale 1: both sum exactly and clamp, so the
#       images must be identical)
# Median of 9 runs each, interleaved per pair. Skipped when vips is not
# installed.
set -u
cd "$(dirname "$0")/../.."
. tests/bench/timing.sh
printf '3 3\n-1 -1 -1\n-1 9 -1\n-1 -1 -1\n' >"$tmp/sharp.mat"

ours_g=$(median_ms "$BIN"/gconv --device cpu -k gaussian:2 "$tmp/in.ppm" "$tmp/ours-g.ppm") || exit 1
peer_g=$(median_ms vips gaussblur "$tmp/in.ppm" "$tmp/vips-g.ppm" 2 --min-ampl 0.011) || exit 1
ours_c=$(median_ms "$BIN"/gconv --device cpu -k '-1 -1 -1; -1 9 -1; -1 -1 -1' "$tmp/in.ppm" "$tmp/ours-c.ppm") || exit 1
peer_c=$(median_ms vips conv "$tmp/in.ppm" "$tmp/vips-c.ppm" "$tmp/sharp.mat" --precision integer) || exit 1
if ! "$BUILD"/tests/imgcmp "$tmp/ours-c.ppm" "$tmp/vips-c.ppm"; then
    echo "bench-cpu: gconv and vips conv disagree on the integer 3x3 kernel"
    exit 1
fi
maxd=$("$BIN"/gstats --compare "$tmp/vips-g.ppm" -s maxdiff "$tmp/ours-g.ppm" 2>/dev/null)
echo "CPU ($(nproc) cores): 4096x4096 RGB PPM to PPM, whole commands, median of 9"
printf '  gconv -k gaussian:2             %6d ms\n  vips gaussblur 2 (13 taps)      %6d ms\n' "$ours_g" "$peer_g"
awk -v a="$ours_g" -v b="$peer_g" -v d="${maxd:-?}" 'BEGIN { printf "  gaussian: gconv is %.2fx the speed of vips (largest difference %s)\n", b / (a > 0 ? a : 1), d }'
printf '  gconv -k (3x3, integer)         %6d ms\n  vips conv --precision integer   %6d ms\n' "$ours_c" "$peer_c"
awk -v a="$ours_c" -v b="$peer_c" 'BEGIN { printf "  3x3: gconv is %.2fx the speed of vips (identical output)\n", b / (a > 0 ? a : 1) }'
