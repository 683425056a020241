#!/usr/bin/env bash
# tests/bench/cpu_codecs.sh — gimg's codecs against libvips on this machine
# (issue 26's "Speed" targets), whole commands, on a 4096x4096 RGB photo made
# by tests/bench/photo.sh (real photos, upscaled, with grain; the line it
# prints says which source was used). Skipped when vips is not installed.
#
# The work timed, ours against vips, on the same file in the same run:
#   decode X -> PPM   gtranspose --device cpu --op flip photo.X out.ppm
#                     vips flip photo.X out.ppm vertical
#       gimg has no convert tool, so both sides do the same cheapest work: a
#       vertical flip (rows copied once) between decoding and writing the PPM.
#       Both hold the whole image (vips can't stream a vertical flip); the
#       flip's share of ours is in the -v stage times printed below the
#       table ("compute").
#   encode PPM -> X   gtranspose --device cpu --op flip [options] photo.ppm out.X
#                     vips flip photo.ppm 'out.X[options]' vertical
#       JPEG: quality 90, optimised Huffman tables on both sides (ours always
#       optimises; vips: optimize_coding), once 4:4:4 (both tools' default at
#       quality 90; vips subsample_mode=off) and once 4:2:0 (subsample_mode=on).
#       PNG: each side's default level (ours: libdeflate 6, adaptive row
#       filters; vips 8.14: zlib 6, no row filter) and our file must be no
#       larger. TIFF: Deflate with the horizontal predictor on both sides.
#       WebP: lossy at quality 90, effort (libwebp's method) 4 on both sides.
#   whole jobs        gconv --device cpu -k gaussian:2 photo.X out.X
#                     vips gaussblur photo.X out.X 2 --min-ampl 0.011
#       the same 13-tap support as gconv's gaussian:2 (vips's default
#       min-ampl 0.2 would cut it to 7 taps); JPEG out at quality 90 with
#       optimised tables on both sides (vips's default would be quality 75,
#       4:2:0: less work), PNG out at each side's default level.
# The input files are written by vips: photo.jpg at quality 90, 4:2:0 (as
# cameras write), photo.png with adaptive row filters (as libpng writes by
# default; unfiltering is part of decoding), photo.tif Deflate + predictor in
# strips, photo.webp lossy at quality 90.
#
# Before timing, each row checks the work (a row that fails is not timed and
# the script exits 1 at the end): our output decodes (by vips) to 4096x4096x3;
# our JPEG decode equals djpeg's (libjpeg-turbo's default decoding; vips's when
# djpeg is missing), our PNG and TIFF decodes equal vips's of the same file,
# our WebP decode equals dwebp's (vips's when dwebp is missing); our PNG and
# TIFF encodes decode back to the input exactly; our JPEGs carry the same
# quantisation tables and chroma subsampling as vips's; our TIFF says Deflate
# and horizontal predictor (tiffinfo), our WebP is lossy (a VP8 chunk). The
# whole jobs print their largest difference from vips's result (vips's
# fixed-point blur differs a little) but are not held to equality.
#
# Timing: after that first run of each side (the warm-up), BENCH_RUNS pairs
# (default 9), ours then vips, alternating; the medians of each side's times
# and the median of the per-pair ratios ours/vips, which cancels slow drifts
# of the machine's load. Target: the issue's bound on that ratio.
set -u
cd "$(dirname "$0")/../.."
. tests/bench/timing.sh
RUNS=${BENCH_RUNS:-9}
case $RUNS in '' | *[!0-9]* | 0)
    echo "bench-cpu: BENCH_RUNS must be a positive integer" >&2
    exit 2
    ;;
esac

# Microseconds since the epoch, without a fork.
if [ -n "${EPOCHREALTIME:-}" ]; then
    now_us() { now=${EPOCHREALTIME//[!0-9]/}; }
else
    now_us() { now=$(($(date +%s%N) / 1000)); }
fi

echo "bench-cpu: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) before; vips $(vips --version | cut -d- -f2)"
BIN=$BIN BUILD=$BUILD bash tests/bench/photo.sh "$tmp/photo.ppm" || exit 1
p=$tmp
vips jpegsave "$p/photo.ppm" "$p/photo.jpg" --Q 90 --subsample-mode on --optimize-coding &&
    vips pngsave "$p/photo.ppm" "$p/photo.png" --filter all &&
    vips tiffsave "$p/photo.ppm" "$p/photo.tif" --compression deflate --predictor horizontal &&
    vips webpsave "$p/photo.ppm" "$p/photo.webp" --Q 90 --effort 4 &&
    vips flip "$p/photo.ppm" "$p/flipped.ppm" vertical || exit 1
mb() { awk -v b="$(stat -c %s "$1")" 'BEGIN { printf "%.2f MB", b / 1e6 }'; }
echo "inputs: photo.jpg $(mb "$p/photo.jpg") (Q90 4:2:0), photo.png $(mb "$p/photo.png"), photo.tif $(mb "$p/photo.tif"), photo.webp $(mb "$p/photo.webp")"

# ------------------------------------------------------------------ the work
# Each row: ours_ID and vips_ID (extra arguments go to our tool: -v), and
# check_ID, which returns 1 with $why set when the work is wrong.
flip() { "$BIN"/gtranspose --device cpu --op flip "$@"; }
blur() { "$BIN"/gconv --device cpu -k gaussian:2 "$@"; }

ours_jdec() { flip "$@" "$p/photo.jpg" "$p/o-jdec.ppm"; }
vips_jdec() { vips flip "$p/photo.jpg" "$p/v-jdec.ppm" vertical; }
ours_j444() { flip "$@" --quality 90 --jpeg-subsampling 444 "$p/photo.ppm" "$p/o-j444.jpg"; }
vips_j444() { vips flip "$p/photo.ppm" "$p/v-j444.jpg[Q=90,optimize_coding,subsample_mode=off]" vertical; }
ours_j420() { flip "$@" --quality 90 --jpeg-subsampling 420 "$p/photo.ppm" "$p/o-j420.jpg"; }
vips_j420() { vips flip "$p/photo.ppm" "$p/v-j420.jpg[Q=90,optimize_coding,subsample_mode=on]" vertical; }
ours_pdec() { flip "$@" "$p/photo.png" "$p/o-pdec.ppm"; }
vips_pdec() { vips flip "$p/photo.png" "$p/v-pdec.ppm" vertical; }
ours_penc() { flip "$@" "$p/photo.ppm" "$p/o-penc.png"; }
vips_penc() { vips flip "$p/photo.ppm" "$p/v-penc.png" vertical; }
ours_tdec() { flip "$@" "$p/photo.tif" "$p/o-tdec.ppm"; }
vips_tdec() { vips flip "$p/photo.tif" "$p/v-tdec.ppm" vertical; }
ours_tenc() { flip "$@" --compress deflate "$p/photo.ppm" "$p/o-tenc.tif"; }
vips_tenc() { vips flip "$p/photo.ppm" "$p/v-tenc.tif[compression=deflate,predictor=horizontal]" vertical; }
ours_wdec() { flip "$@" "$p/photo.webp" "$p/o-wdec.ppm"; }
vips_wdec() { vips flip "$p/photo.webp" "$p/v-wdec.ppm" vertical; }
ours_wenc() { flip "$@" --quality 90 "$p/photo.ppm" "$p/o-wenc.webp"; }
vips_wenc() { vips flip "$p/photo.ppm" "$p/v-wenc.webp[Q=90,effort=4]" vertical; }
ours_gjpg() { blur "$@" "$p/photo.jpg" "$p/o-gjpg.jpg"; }
vips_gjpg() { vips gaussblur "$p/photo.jpg" "$p/v-gjpg.jpg[Q=90,optimize_coding]" 2 --min-ampl 0.011; }
ours_gpng() { blur "$@" "$p/photo.png" "$p/o-gpng.png"; }
vips_gpng() { vips gaussblur "$p/photo.png" "$p/v-gpng.png" 2 --min-ampl 0.011; }

# same A B: A and B are the same image (imgcmp reads PPMs, our PNM codec).
same() {
    "$BUILD"/tests/imgcmp "$1" "$2" 2>"$p/cmp.err" && return 0
    why="$(basename "$1") differs from $(basename "$2"): $(head -1 "$p/cmp.err")"
    return 1
}
# decodes FILE: FILE decodes by vips to a 4096x4096 3-band image, left in
# $p/check.ppm.
decodes() {
    if ! vips copy "$1" "$p/check.ppm" 2>"$p/vips.err"; then
        why="$(basename "$1") does not decode by vips: $(head -1 "$p/vips.err")"
        return 1
    fi
    local size
    size=$(vipsheader -f width "$p/check.ppm")x$(vipsheader -f height "$p/check.ppm")x$(vipsheader -f bands "$p/check.ppm")
    [ "$size" = 4096x4096x3 ] && return 0
    why="$(basename "$1") is $size, not 4096x4096x3"
    return 1
}
# jpeg_facts FILE: a JPEG's chroma subsampling (from its frame header's
# sampling factors: 4:4:4, 4:2:2, 4:2:0 or the factors themselves) on the
# first line, then its quantisation tables by number, up to the first scan.
jpeg_facts() {
    python3 - "$1" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
tables, factors, at = {}, [], 2
while at + 4 <= len(data) and data[at] == 0xFF:
    marker, length = data[at + 1], int.from_bytes(data[at + 2:at + 4], "big")
    if marker == 0xDA:
        break
    if marker in (0xC0, 0xC1, 0xC2):
        count = data[at + 9]
        factors = ["%dx%d" % (data[at + 11 + 3 * i] >> 4, data[at + 11 + 3 * i] & 15)
                   for i in range(count)]
    if marker == 0xDB:
        p, end = at + 4, at + 2 + length
        while p < end:
            precision, number = data[p] >> 4, data[p] & 15
            size = 64 * (precision + 1)
            tables[number] = data[p + 1:p + 1 + size].hex()
            p += 1 + size
    at += 2 + length
names = {"1x1 1x1 1x1": "4:4:4", "2x1 1x1 1x1": "4:2:2", "2x2 1x1 1x1": "4:2:0"}
print(names.get(" ".join(factors), " ".join(factors) or "no frame header"))
print(sorted(tables.items()))
PY
}
# jpeg_like OURS VIPS SUBSAMPLING: our JPEG decodes, and it has the chroma
# subsampling asked for (vips's too) and vips's quantisation tables.
jpeg_like() {
    decodes "$1" || return 1
    local ours vips
    ours=$(jpeg_facts "$1") && vips=$(jpeg_facts "$2") || { why="jpeg_facts failed"; return 1; }
    if [ "${ours%%$'\n'*}" != "$3" ] || [ "${vips%%$'\n'*}" != "$3" ]; then
        why="subsampling ${ours%%$'\n'*} (ours), ${vips%%$'\n'*} (vips), not $3"
        return 1
    fi
    if [ "$ours" != "$vips" ]; then
        why="our quantisation tables differ from vips's at the same quality"
        return 1
    fi
}
# largest_difference A B: the largest difference of two images' samples.
largest_difference() {
    vips subtract "$1" "$2" "$p/d.v" && vips abs "$p/d.v" "$p/ad.v" &&
        vips max "$p/ad.v" | awk '{ printf "%g", $1 }'
}

check_jdec() {
    if command -v djpeg >/dev/null; then
        djpeg -ppm -outfile "$p/djpeg.ppm" "$p/photo.jpg" &&
            vips flip "$p/djpeg.ppm" "$p/ref-jdec.ppm" vertical || { why="djpeg failed"; return 1; }
        same "$p/o-jdec.ppm" "$p/ref-jdec.ppm"
    else
        same "$p/o-jdec.ppm" "$p/v-jdec.ppm"
    fi
}
check_j444() { jpeg_like "$p/o-j444.jpg" "$p/v-j444.jpg" 4:4:4; }
check_j420() { jpeg_like "$p/o-j420.jpg" "$p/v-j420.jpg" 4:2:0; }
check_pdec() { same "$p/o-pdec.ppm" "$p/v-pdec.ppm"; }
check_penc() {
    decodes "$p/o-penc.png" && same "$p/check.ppm" "$p/flipped.ppm" || return 1
    if [ "$(stat -c %s "$p/o-penc.png")" -gt "$(stat -c %s "$p/v-penc.png")" ]; then
        size_note=" (LARGER than vips's)"
        size_fail=1
    fi
}
check_tdec() { same "$p/o-tdec.ppm" "$p/v-tdec.ppm"; }
check_tenc() {
    decodes "$p/o-tenc.tif" && same "$p/check.ppm" "$p/flipped.ppm" || return 1
    command -v tiffinfo >/dev/null || return 0
    local info
    info=$(tiffinfo "$p/o-tenc.tif" 2>/dev/null)
    if ! grep -q 'Compression Scheme: .*Deflate' <<<"$info" ||
        ! grep -q 'Predictor: horizontal differencing' <<<"$info"; then
        why="our TIFF is not Deflate with the horizontal predictor (tiffinfo)"
        return 1
    fi
}
check_wdec() {
    if command -v dwebp >/dev/null; then
        dwebp -quiet -ppm "$p/photo.webp" -o "$p/dwebp.ppm" &&
            vips flip "$p/dwebp.ppm" "$p/ref-wdec.ppm" vertical || { why="dwebp failed"; return 1; }
        same "$p/o-wdec.ppm" "$p/ref-wdec.ppm"
    else
        same "$p/o-wdec.ppm" "$p/v-wdec.ppm"
    fi
}
check_wenc() {
    decodes "$p/o-wenc.webp" || return 1
    # A simple lossy file: RIFF....WEBPVP8 ; an extended one (VP8X) names
    # its image chunk later: look for "VP8 " among the first chunks.
    if ! head -c 4096 "$p/o-wenc.webp" | grep -q 'VP8 '; then
        why="our WebP has no lossy (VP8) image chunk"
        return 1
    fi
}
check_gjpg() {
    local vips_facts
    vips_facts=$(jpeg_facts "$p/v-gjpg.jpg") || { why="jpeg_facts failed"; return 1; }
    jpeg_like "$p/o-gjpg.jpg" "$p/v-gjpg.jpg" "${vips_facts%%$'\n'*}" || return 1
    vips copy "$p/v-gjpg.jpg" "$p/ref.ppm" &&
        diff_note=" (largest difference from vips's $(largest_difference "$p/check.ppm" "$p/ref.ppm"))"
}
check_gpng() {
    decodes "$p/o-gpng.png" || return 1
    vips copy "$p/v-gpng.png" "$p/ref.ppm" &&
        diff_note=" (largest difference from vips's $(largest_difference "$p/check.ppm" "$p/ref.ppm"))"
}

# ---------------------------------------------------------------- the timing
# pairs ID: RUNS pairs, ours then vips; sets ours_ms, vips_ms (the medians)
# and ratio (the median of the per-pair ratios).
pairs() {
    local i t0 t1 t2 now times=()
    for ((i = 0; i < RUNS; i++)); do
        now_us; t0=$now
        "ours_$1" >/dev/null 2>"$p/ours.err" || return 1
        now_us; t1=$now
        "vips_$1" >/dev/null 2>"$p/vips.err" || return 1
        now_us; t2=$now
        times+=("$((t1 - t0)) $((t2 - t1))")
    done
    read -r ours_ms vips_ms ratio < <(printf '%s\n' "${times[@]}" | awk '
        function median(v, n,   i, j, t) {
            for (i = 2; i <= n; i++)
                for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
            return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
        }
        { n++; a[n] = $1; b[n] = $2; r[n] = $1 / ($2 > 0 ? $2 : 1) }
        END { printf "%.0f %.0f %.2f\n", median(a, n) / 1000, median(b, n) / 1000, median(r, n) }')
}

status=0
table=()
stages=()
# row ID LABEL TARGET [OURS_FILE VIPS_FILE]: the warm-up (ours with -v, for
# the stage times) and the check, then the pairs; the files' sizes are printed.
row() {
    local id=$1 label=$2 target=$3 sizes="" verdict
    why="" size_note="" size_fail=0 diff_note=""
    if ! "ours_$id" -v >/dev/null 2>"$p/ours.err"; then
        table+=("$(printf '%-30s %s' "$label" "FAILED (ours): $("ours_$id" 2>&1 >/dev/null | head -1)")")
        status=1
        return
    fi
    stages+=("$(printf '  %-28s %s' "$label" "$(grep -o 'time: .*' "$p/ours.err" | head -1)")")
    if ! "vips_$id" >/dev/null 2>"$p/vips.err"; then
        table+=("$(printf '%-30s %s' "$label" "FAILED (vips): $(head -1 "$p/vips.err")")")
        status=1
        return
    fi
    if ! "check_$id"; then
        table+=("$(printf '%-30s %s' "$label" "WRONG WORK, not timed: $why")")
        status=1
        return
    fi
    if [ $# -gt 3 ]; then
        sizes="$(mb "$4") vs $(mb "$5")$size_note"
    fi
    if ! pairs "$id"; then
        table+=("$(printf '%-30s %s' "$label" "FAILED while timing: $(cat "$p/ours.err" "$p/vips.err" | head -1)")")
        status=1
        return
    fi
    verdict=$(awk -v r="$ratio" -v t="$target" -v f="$size_fail" 'BEGIN { print (r <= t && !f) ? "met" : "not met" }')
    table+=("$(printf '%-30s %8d %8d %9.2f   <= %-4s %-8s %s' "$label" "$ours_ms" "$vips_ms" "$ratio" "$target" "$verdict" "$sizes$diff_note")")
}

row jdec "JPEG decode -> PPM" 1.0
row j444 "JPEG encode Q90 4:4:4" 1.0 "$p/o-j444.jpg" "$p/v-j444.jpg"
row j420 "JPEG encode Q90 4:2:0" 1.0 "$p/o-j420.jpg" "$p/v-j420.jpg"
row pdec "PNG decode -> PPM" 1.0
row penc "PNG encode (default level)" 1.0 "$p/o-penc.png" "$p/v-penc.png"
row tdec "TIFF decode -> PPM" 1.1
row tenc "TIFF encode deflate+pred." 1.1 "$p/o-tenc.tif" "$p/v-tenc.tif"
row wdec "WebP decode -> PPM" 1.1
row wenc "WebP encode Q90 effort 4" 1.1 "$p/o-wenc.webp" "$p/v-wenc.webp"
row gjpg "gaussian:2 JPEG -> JPEG" 0.8 "$p/o-gjpg.jpg" "$p/v-gjpg.jpg"
row gpng "gaussian:2 PNG -> PNG" 1.0 "$p/o-gpng.png" "$p/v-gpng.png"

echo "CPU ($(nproc) cores): 4096x4096 RGB photo, whole commands, $RUNS pairs (ours, vips) after a warm-up"
printf '%-30s %8s %8s %9s   %-7s %-8s %s\n' operation "ours ms" "vips ms" ours/vips target result "sizes (ours vs vips)"
printf '%s\n' "${table[@]}"
echo "our stages (-v, warm-up run):"
printf '%s\n' "${stages[@]}"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $status
