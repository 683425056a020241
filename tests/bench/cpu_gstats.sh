#!/usr/bin/env bash
# tests/bench/cpu_gstats.sh — the CPU backend against the fastest CPU peer, on
# this machine: `gstats --device cpu` against `vips stats` on a 4096x4096 RGB
# PPM, whole commands (read, statistics, print). vips stats computes min,
# max, sum, sum of squares, mean and deviation per band (plus extrema
# positions); gstats is timed twice: with the same statistics (-s ...) and
# with its default report, which adds the exact histogram (median, entropy).
# Checks that both agree on the means, then prints the median of 9 runs.
# Skipped when vips is not installed.
set -u
cd "$(dirname "$0")/../.."
. tests/bench/timing.sh

# vips stats writes a matrix: row 0 is all bands, rows 1-3 the bands;
# column 4 is the mean.
vips stats "$tmp/in.ppm" "$tmp/vips.csv" || exit 1
for ch in red green blue; do
    ours=$("$BIN"/gstats --device cpu -s mean -c "$ch" "$tmp/in.ppm") || exit 1
    row=$(case $ch in red) echo 2 ;; green) echo 3 ;; blue) echo 4 ;; esac)
    theirs=$(sed -n "${row}p" "$tmp/vips.csv" | tr '\t' ' ' | awk '{ print $5 }')
    if ! awk -v a="$ours" -v b="$theirs" 'BEGIN { d = a - b; exit !(d < 1e-6 && d > -1e-6) }'; then
        echo "bench-cpu: gstats and vips disagree on the $ch mean: $ours vs $theirs"
        exit 1
    fi
done

moments=$(median_ms sh -c "\"$BIN\"/gstats --device cpu -s count,min,max,sum,mean,stddev \"$tmp/in.ppm\" >/dev/null") || exit 1
full=$(median_ms sh -c "\"$BIN\"/gstats --device cpu \"$tmp/in.ppm\" >/dev/null") || exit 1
peer=$(median_ms vips stats "$tmp/in.ppm" "$tmp/vips.csv") || exit 1
echo "CPU ($(nproc) cores): statistics of a 4096x4096 RGB PPM, whole commands, median of 9"
printf '  gstats --device cpu -s (vips'"'"'s set)  %6d ms\n' "$moments"
printf '  gstats --device cpu (full report)     %6d ms\n' "$full"
printf '  vips stats                            %6d ms\n' "$peer"
awk -v a="$moments" -v f="$full" -v b="$peer" 'BEGIN { d = a > 0 ? a : 1; e = f > 0 ? f : 1;
    printf "  gstats is %.2fx the speed of vips (same statistics), %.2fx with the full report\n", b / d, b / e }'
