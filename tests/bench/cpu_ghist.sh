#!/usr/bin/env bash
# tests/bench/cpu_ghist.sh — the CPU backend against the fastest CPU peer, on
# this machine: `ghist --device cpu` against `vips hist_find` on a 4096x4096
# RGB PPM, whole commands (decode, count, output: ghist's table to
# /dev/null, vips's histogram image to a .v file). Checks first that both
# count the same, then prints the median of 9 runs. Skipped when vips is
# not installed.
set -u
cd "$(dirname "$0")/../.."
. tests/bench/timing.sh

# Same counts: vips's histogram (256x1, 3 bands, 32-bit) as CSV, per band.
"$BIN"/ghist --device cpu --csv "$tmp/in.ppm" | awk -F, 'NR > 1 && NR <= 257 { print $4, $5, $6 }' >"$tmp/ours.txt" || exit 1
vips hist_find "$tmp/in.ppm" "$tmp/h.v" || exit 1
for b in 0 1 2; do
    vips extract_band "$tmp/h.v" "$tmp/b$b.v" $b && vips csvsave "$tmp/b$b.v" "$tmp/b$b.csv" || exit 1
    tr '\t' '\n' <"$tmp/b$b.csv" | grep . >"$tmp/b$b.txt"
done
paste -d' ' "$tmp/b0.txt" "$tmp/b1.txt" "$tmp/b2.txt" >"$tmp/vips.txt"
if [ -s "$tmp/vips.txt" ] && ! cmp -s "$tmp/ours.txt" "$tmp/vips.txt"; then
    echo "bench-cpu: ghist and vips disagree on the histogram"
    exit 1
fi

ours=$(median_ms sh -c "'$BIN/ghist' --device cpu '$tmp/in.ppm' >/dev/null") || exit 1
peer=$(median_ms vips hist_find "$tmp/in.ppm" "$tmp/h.v") || exit 1
echo "CPU ($(nproc) cores): histogram of a 4096x4096 RGB PPM, whole commands, median of 9"
printf '  ghist --device cpu   %6d ms\n  vips hist_find       %6d ms\n' "$ours" "$peer"
awk -v a="$ours" -v b="$peer" 'BEGIN { printf "  ghist is %.2fx the speed of vips\n", b / (a > 0 ? a : 1) }'
