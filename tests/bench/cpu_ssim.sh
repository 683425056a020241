#!/usr/bin/env bash
# tests/bench/cpu_ssim.sh — SSIM on the CPU against scikit-image on this
# machine (issue 29's target: at least 10x faster), for a 2048x2048 RGB
# 8-bit pair: a photo-like picture and a blurred copy of it.
#
#   a.ppm: the centre 2048x2048 of tests/bench/photo.sh's 4096x4096 photo
#          mosaic (real photos when vips and scikit-image are there, its
#          procedural stand-in otherwise), cropped by vips; without vips,
#          photo.sh's stand-in recipe at 2048x2048 directly (seeded noise
#          blurred by gconv -k gaussian:6, contrast stretched);
#   b.ppm: a blurred by gconv -k gaussian:1.
#
# Ours: the whole command as a user runs it, `gstats --device cpu --compare
# a.ppm -s ssim b.ppm` (read both files, SSIM on the CPU backend,
# lib/ssim.c, print the mean over channels), median of 9 runs after a
# warm-up. scikit-image: one call of structural_similarity
# (gaussian_weights=True, sigma=1.5, use_sample_covariance=False,
# data_range=255, channel_axis=2), reading excluded, median of 3
# (tests/ssim_skimage.py --time); skipped when /usr/bin/python3 lacks it.
# Prints both times, the speed ratio, both SSIMs and their difference, and
# the load average before each timing (other work on the machine slows
# either side).
set -u
cd "$(dirname "$0")/../.."
BIN=${BIN:-bin}
BUILD=${BUILD:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if command -v vips >/dev/null; then
    source=$(BIN=$BIN BUILD=$BUILD bash tests/bench/photo.sh "$tmp/photo.ppm") || exit 1
    vips extract_area "$tmp/photo.ppm" "$tmp/a.ppm" 1024 1024 2048 2048 || exit 1
    echo "a.ppm: the centre 2048x2048 of tests/bench/photo.sh's image: ${source#photo: }"
else
    "$BUILD"/tests/gen --seed 1 2048 2048 3 8 - |
        "$BIN"/gconv --device cpu -k gaussian:6 --scale 16 --bias -1912 - "$tmp/a.ppm" || exit 1
    echo "a.ppm: NOT a real photo (vips missing): seeded noise blurred with gaussian:6," \
         "contrast stretched"
fi
"$BIN"/gconv --device cpu -k gaussian:1 "$tmp/a.ppm" "$tmp/b.ppm" || exit 1
echo "b.ppm: a.ppm blurred by gconv -k gaussian:1"

ours=("$BIN"/gstats --device cpu --compare "$tmp/a.ppm" -s ssim "$tmp/b.ppm")
ours_name="gstats --device cpu --compare a -s ssim b"
ours_value=$("${ours[@]}") || exit 1

. tests/bench/median.sh
quiet_ours() { "${ours[@]}" >/dev/null; }
load() { cut -d' ' -f1 /proc/loadavg; }
ours_load=$(load)
ours_ms=$(median_ms quiet_ours) || exit 1

echo "CPU ($(nproc) cores): SSIM of a 2048x2048 RGB 8-bit pair"
printf '  %-42s %6d ms  whole command, median of 9 (load %s)   SSIM %s\n' \
    "$ours_name" "$ours_ms" "$ours_load" "$ours_value"

py=/usr/bin/python3
sk_load=$(load)
status=77
[ -x "$py" ] && { "$py" tests/ssim_skimage.py --time "$tmp/a.ppm" "$tmp/b.ppm" >"$tmp/sk1"; status=$?; }
if [ "$status" = 77 ]; then
    echo "  scikit-image: not in $py: skipped"
    exit 0
fi
[ "$status" = 0 ] || exit 1
"$py" tests/ssim_skimage.py --time "$tmp/a.ppm" "$tmp/b.ppm" >"$tmp/sk2" || exit 1
"$py" tests/ssim_skimage.py --time "$tmp/a.ppm" "$tmp/b.ppm" >"$tmp/sk3" || exit 1
sk_ms=$(cat "$tmp/sk1" "$tmp/sk2" "$tmp/sk3" | awk '{ print int($1 * 1000 + 0.5) }' |
    sort -n | sed -n 2p)
sk_value=$(awk '{ print $2 }' "$tmp/sk1")
printf '  %-42s %6d ms  the call alone, median of 3 (load %s)     SSIM %s\n' \
    "scikit-image structural_similarity" "$sk_ms" "$sk_load" "$sk_value"
awk -v a="$ours_ms" -v b="$sk_ms" -v x="$ours_value" -v y="$sk_value" 'BEGIN {
    d = x - y; if (d < 0) d = -d
    printf "  ours is %.1fx the speed of scikit-image (target: 10x); |SSIM difference| %.3g\n",
        b / (a > 0 ? a : 1), d }'
