#!/usr/bin/env bash
# tests/cli_bands.sh — large images read in bands (gimg(7) LARGE IMAGES):
# gstats and ghist give the same reports, and gconv and gtranspose the same
# output files, byte for byte, whether an image is read whole or in bands
# of any height (--band-rows 1, awkward, the height - 1; the height reads
# it whole), for every format with a row decoder and every layout; gconv's
# outputs written as they come (PNM, PAM) or assembled (the other formats,
# and standard output), gtranspose's placed where each band goes (PNM, PAM
# files), spooled (PNG, a FIFO) or assembled, every symmetry; -v says an
# image was read in bands; a file cut short is refused in bands as it is
# whole (same message, exit 1, no report, no output file, no temporary);
# settings that need the whole image (compare mode, float order
# statistics, --equalize, gconv's wrap border, gtranspose --op auto) still
# work; an image over the default threshold (64 MP) is read in bands
# without --band-rows, and so is one whose whole-image job is over the
# memory budget (--max-memory), where what cannot is refused. One
# PASS/FAIL/SKIP line per test; BIN and BUILD as in cli_lib.sh.
TOOL=gstats
. "$(dirname "$0")/cli_lib.sh"
GS=$PROG
GH=$BIN/ghist
GC=$BIN/gconv

# Inputs of every layout and format that reads in bands; heights that are
# not multiples of the band heights tried.
"$GEN" --seed 1 301 203 3 8 rgb8.ppm &&
    "$GEN" --seed 2 97 61 1 16 gray16.pgm &&
    "$GEN" --seed 3 45 37 4 16 rgba16.pam &&
    "$GEN" --seed 4 53 41 2 8 ga8.pam &&
    "$GEN" --seed 5 64 29 3 32 rgbf.pfm &&
    "$GEN" --seed 6 -f png 131 77 3 8 rgb8.png &&
    "$GEN" --seed 7 -f png 67 45 4 16 rgba16.png &&
    "$GEN" --seed 8 -f jpg 150 99 3 8 rgb.jpg &&
    "$GEN" --seed 9 -f jpg 33 71 1 8 gray.jpg &&
    "$GEN" --seed 10 -f tif 88 57 3 16 rgb16.tif ||
    { fail setup "gen failed"; exit 1; }
printf 'P2\n3 4\n9\n0 1 2\n3 4 5\n6 7 8\n9 0 1\n' >plain.pgm
INPUTS="rgb8.ppm gray16.pgm rgba16.pam ga8.pam rgbf.pfm rgb8.png rgba16.png rgb.jpg gray.jpg
rgb16.tif plain.pgm"

# same_reports NAME TOOL OPTIONS: the tool's report of every input, whole
# and in bands of 1, 7 and height - 1 rows, byte for byte.
same_reports() {
    local name=$1 tool=$2 opts=$3 f h rows why=""
    for f in $INPUTS; do
        "$tool" $opts "$f" >whole.txt 2>err.txt || { why="$f whole: exit $?: $(head -c 200 err.txt)"; break; }
        h=$("$GS" --json -s count "$f" | sed -n 's/.*"height": \([0-9]*\).*/\1/p')
        for rows in 1 7 $((h - 1)); do
            [ "$rows" -ge 1 ] || continue
            "$tool" --band-rows "$rows" $opts "$f" >bands.txt 2>err.txt ||
                { why="$f --band-rows $rows: exit $?: $(head -c 200 err.txt)"; break 2; }
            cmp -s whole.txt bands.txt || { why="$f --band-rows $rows: the report differs"; break 2; }
        done
    done
    result "$name" "$why"
}

same_reports gstats-default "$GS" ""
same_reports gstats-percentiles "$GS" "--percentiles 1,50,99.9 --json"
same_reports gstats-moments "$GS" "-s count,min,max,sum,mean,stddev --csv"
same_reports gstats-region "$GS" "--region 20x9+1+2 -s mean,median,max"
same_reports gstats-unit-scale "$GS" "--unit-scale -s mean,stddev"
same_reports ghist-default "$GH" ""
same_reports ghist-luma-bins "$GH" "--luma --bins 10 --range 0:200 --csv"
same_reports ghist-json "$GH" "--json --cumulative"

# Several inputs, in bands and not, in one run (-j 2): the same reports.
why=""
"$GS" -j 2 rgb8.ppm rgb8.png gray16.pgm >whole.txt 2>err.txt || why="whole: exit $?"
[ -z "$why" ] && { "$GS" -j 2 --band-rows 5 rgb8.ppm rgb8.png gray16.pgm >bands.txt 2>err.txt ||
    why="bands: exit $?: $(head -c 200 err.txt)"; }
[ -z "$why" ] && { cmp -s whole.txt bands.txt || why="the reports differ"; }
result several-inputs "$why"

# The plot of a histogram counted in bands is the same image.
why=""
"$GH" --plot whole.png rgb8.png >/dev/null 2>err.txt || why="whole: exit $?"
[ -z "$why" ] && { "$GH" --band-rows 3 --plot bands.png rgb8.png >/dev/null 2>err.txt ||
    why="bands: exit $?: $(head -c 200 err.txt)"; }
[ -z "$why" ] && { cmp -s whole.png bands.png || why="the plots differ"; }
result ghist-plot "$why"

# -v says how the image was read; none of it is said for a whole image.
why=""
"$GS" -v --band-rows 50 rgb8.ppm >/dev/null 2>err.txt || why="exit $?"
[ -z "$why" ] && { grep -q '^gstats: rgb8.ppm: read in 5 bands of 50 rows$' err.txt ||
    why="stderr: $(tr '\n' '|' <err.txt | head -c 300)"; }
[ -z "$why" ] && { "$GS" -v --band-rows 203 rgb8.ppm >/dev/null 2>err.txt; ! grep -q bands err.txt ||
    why="a whole image said to be read in bands"; }
result verbose "$why"

# Settings that need the whole image: compare mode, float order statistics,
# --equalize; still the same results (the image is read whole).
why=""
"$GS" --compare rgb8.ppm -s psnr,ssim rgb8.png >whole.txt 2>&1
"$GS" --band-rows 4 --compare rgb8.ppm -s psnr,ssim rgb8.png >bands.txt 2>&1
cmp -s whole.txt bands.txt || why="compare: $(head -c 200 bands.txt)"
"$GS" --band-rows 4 -v rgbf.pfm >bands.txt 2>err.txt && "$GS" rgbf.pfm >whole.txt || why="float: exit $?"
[ -z "$why" ] && { cmp -s whole.txt bands.txt || why="float order statistics differ"; }
[ -z "$why" ] && { ! grep -q "read in" err.txt || why="float order statistics read in bands"; }
[ -z "$why" ] && { "$GH" --band-rows 4 --equalize eq1.ppm rgb8.ppm && "$GH" --equalize eq2.ppm rgb8.ppm &&
    cmp -s eq1.ppm eq2.ppm || why="--equalize differs"; }
result whole-image-settings "$why"

# Cut short: refused in bands as whole, with the same message.
for f in rgb8.ppm rgbf.pfm rgb8.png rgb.jpg rgb16.tif; do
    size=$(stat -c %s "$f")
    head -c $((size - size / 3)) "$f" >"cut-$f"
done
why=""
for f in cut-rgb8.ppm cut-rgbf.pfm cut-rgb8.png cut-rgb.jpg cut-rgb16.tif; do
    "$GS" "$f" >whole.txt 2>whole.err
    rc_whole=$?
    "$GS" --band-rows 5 "$f" >bands.txt 2>bands.err
    rc_bands=$?
    if [ "$rc_whole" -ne 1 ] || [ "$rc_bands" -ne 1 ]; then
        why="$f: exit $rc_whole whole, $rc_bands in bands (expected 1)"
    elif [ -s bands.txt ]; then
        why="$f: a report in bands: $(head -c 100 bands.txt)"
    elif ! cmp -s whole.err bands.err; then
        why="$f: '$(head -c 150 whole.err)' whole, '$(head -c 150 bands.err)' in bands"
    fi
    [ -n "$why" ] && break
done
result cut-short "$why"

# gconv: the same output file in bands as whole, for every input and
# output format (PNM and PAM written as the rows come, the others
# assembled), kernels with halos taller than the bands, chains, borders
# and alpha modes.
gconv_same() {
    local name=$1 opts=$2 outs=$3 f h rows out why=""
    for f in $INPUTS; do
        h=$("$GS" --json -s count "$f" | sed -n 's/.*"height": \([0-9]*\).*/\1/p')
        for out in $outs; do
            "$GC" --device cpu $opts "$f" "whole.$out" 2>err.txt ||
                { why="$f -> $out whole: exit $?: $(head -c 200 err.txt)"; break 2; }
            for rows in 1 7 $((h - 1)); do
                [ "$rows" -ge 1 ] || continue
                rm -f "bands.$out"
                "$GC" --device cpu --band-rows "$rows" $opts "$f" "bands.$out" 2>err.txt ||
                    { why="$f -> $out --band-rows $rows: exit $?: $(head -c 200 err.txt)"; break 3; }
                cmp -s "whole.$out" "bands.$out" ||
                    { why="$f -> $out --band-rows $rows: the output differs"; break 3; }
            done
        done
    done
    result "$name" "$why"
}
gconv_same gconv-gaussian "-k gaussian:2" "pnm pam png"
gconv_same gconv-dense-mirror "-k 1,2,3;4,5,6;7,8,9;1,1,1;0,2,0 --border mirror --alpha keep" "pam tif"
gconv_same gconv-chain-zero "-k box:3 -k sobel --border zero --alpha include" "pam pfm"
gconv_same gconv-reflect-premultiply "-k unsharp:2:1.5 --border reflect" "pam webp"

# Written as the rows come (PNM, PAM, PNG): -v says so; assembled for
# standard output, with the same bytes. A PNG whose metadata follows its
# pixels (a tEXt after IDAT, as ImageMagick writes its dates) is read in
# bands but its PNG output assembled, the text kept: the chunks before the
# image data could not be written first.
why=""
"$GC" --device cpu -v --band-rows 9 -k gaussian:1 rgb8.ppm out.ppm 2>err.txt || why="exit $?"
[ -z "$why" ] && { grep -q 'rgb8.ppm: read in 23 bands of 9 rows, written as they came$' err.txt ||
    why="stderr: $(tr '\n' '|' <err.txt | head -c 300)"; }
[ -z "$why" ] && { "$GC" --device cpu --band-rows 9 -k gaussian:1 rgb8.ppm - >stdout.ppm 2>err.txt &&
    cmp -s out.ppm stdout.ppm || why="standard output differs"; }
[ -z "$why" ] && { "$GC" --device cpu -v --band-rows 9 -k gaussian:1 rgb8.ppm out.png 2>err.txt &&
    grep -q 'read in 23 bands of 9 rows, written as they came$' err.txt ||
    why="PNG output: $(tr '\n' '|' <err.txt | head -c 300)"; }
[ -z "$why" ] && { "$GC" --device cpu -k gaussian:1 rgb8.ppm whole.png && cmp -s out.png whole.png ||
    why="PNG output: not the whole image's bytes"; }
result gconv-written-as-they-come "$why"
why=""
if command -v python3 >/dev/null; then
    # rgb8.png with a tEXt chunk moved after its image data.
    python3 - rgb8.png late.png <<'PY' || why="python3 failed"
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
chunks, p = [], 8
while p < len(data):
    n = struct.unpack(">I", data[p:p + 4])[0]
    chunks.append(data[p:p + 12 + n])
    p += 12 + n
body = b"Comment\0late"
text = struct.pack(">I", len(body)) + b"tEXt" + body
text += struct.pack(">I", zlib.crc32(b"tEXt" + body) & 0xFFFFFFFF)
open(sys.argv[2], "wb").write(data[:8] + b"".join(chunks[:-1]) + text + chunks[-1])
PY
    [ -z "$why" ] && { "$GC" --device cpu -v --band-rows 9 -k gaussian:1 late.png bands.png 2>err.txt ||
        why="exit $?"; }
    [ -z "$why" ] && { grep -q 'late.png: read in [0-9]* bands of 9 rows$' err.txt ||
        why="stderr: $(tr '\n' '|' <err.txt | head -c 300)"; }
    [ -z "$why" ] && { "$GC" --device cpu -k gaussian:1 late.png whole.png && cmp -s bands.png whole.png ||
        why="not the whole image's bytes"; }
    [ -z "$why" ] && { grep -q 'late' bands.png || why="the text was lost"; }
    result gconv-png-meta-after-pixels "$why"
else
    skip gconv-png-meta-after-pixels "no python3"
fi

# A write that fails as the rows go out (a full device): the same message
# as whole, exit 1.
why=""
if [ -w /dev/full ]; then
    "$GC" --device cpu -k gaussian:1 -f pnm rgb8.ppm /dev/full 2>whole.err
    rc_whole=$?
    "$GC" --device cpu --band-rows 9 -k gaussian:1 -f pnm rgb8.ppm /dev/full 2>bands.err
    rc_bands=$?
    [ $rc_whole -eq 1 ] && [ $rc_bands -eq 1 ] || why="exit $rc_whole whole, $rc_bands in bands"
    [ -z "$why" ] && { grep -q '^gconv: /dev/full: write error: ' bands.err && cmp -s whole.err bands.err ||
        why="'$(head -c 150 whole.err)' whole, '$(head -c 150 bands.err)' in bands"; }
    result gconv-write-error "$why"
else
    skip gconv-write-error "no /dev/full"
fi

# The wrap border reads the image whole: the same output.
why=""
"$GC" --device cpu -v --band-rows 9 --border wrap -k gaussian:2 rgb8.png bands.pam 2>err.txt &&
    "$GC" --device cpu --border wrap -k gaussian:2 rgb8.png whole.pam || why="exit $?"
[ -z "$why" ] && { cmp -s whole.pam bands.pam || why="the output differs"; }
[ -z "$why" ] && { ! grep -q 'read in' err.txt || why="wrap read in bands"; }
result gconv-wrap-whole "$why"

# A cut input: exit 1, the same message, no output file, no temporary.
# same_refusal LABEL TOOL ARGS...: TOOL ARGS (a cut input, an output in
# outdir/) fails whole and in bands of 5 rows alike, leaving outdir empty;
# else why says how.
same_refusal() {
    local label=$1 tool=$2 rc_whole rc_bands
    shift 2
    "$tool" --device cpu "$@" 2>whole.err
    rc_whole=$?
    "$tool" --device cpu --band-rows 5 "$@" 2>bands.err
    rc_bands=$?
    if [ "$rc_whole" -ne 1 ] || [ "$rc_bands" -ne 1 ]; then
        why="$label: exit $rc_whole whole, $rc_bands in bands"
    elif ! cmp -s whole.err bands.err; then
        why="$label: '$(head -c 150 whole.err)' whole, '$(head -c 150 bands.err)' in bands"
    elif [ -n "$(ls -A outdir)" ]; then
        why="$label: left $(ls -A outdir | tr '\n' ' ')"
    fi
}
why=""
mkdir -p outdir
for f in cut-rgb8.ppm cut-rgb8.png cut-rgb.jpg; do
    for out in pam png; do
        same_refusal "$f -> $out" "$GC" -k gaussian:1 "$f" "outdir/x.$out"
        [ -n "$why" ] && break 2
    done
done
result gconv-cut-short "$why"

# gtranspose: every symmetry, the same file as whole: a PAM output written
# where each band goes, a PNG output spooled
# through a temporary file and written as its rows come, a PFM output
# assembled from the bands; --op auto read whole.
GT=$BIN/gtranspose
why=""
for f in rgb8.ppm gray16.pgm rgba16.png rgb.jpg rgb16.tif rgbf.pfm; do
    h=$("$GS" --json -s count "$f" | sed -n 's/.*"height": \([0-9]*\).*/\1/p')
    case $f in *.pfm) out=pfm ;; *.png) out=png ;; *) out=pam ;; esac
    for op in flip flop rot90 rot180 rot270 transpose transverse auto; do
        "$GT" --device cpu --op $op "$f" "whole.$out" 2>err.txt ||
            { why="$f $op whole: exit $?: $(head -c 200 err.txt)"; break 2; }
        for rows in 1 5 $((h - 1)); do
            "$GT" --device cpu -v --band-rows $rows --op $op "$f" "bands.$out" 2>err.txt ||
                { why="$f $op --band-rows $rows: exit $?: $(head -c 200 err.txt)"; break 3; }
            cmp -s "whole.$out" "bands.$out" || { why="$f $op --band-rows $rows: differs"; break 3; }
            if [ $op = auto ]; then
                ! grep -q 'read in' err.txt || { why="$f --op $op read in bands"; break 3; }
            elif [ "$rows" -lt "$h" ]; then
                grep -q 'read in' err.txt || { why="$f $op not read in bands"; break 3; }
                case $out:$op in
                pfm:*) how="" ;;
                png:*) how="written as they came" ;;
                *) how="written where they go" ;;
                esac
                [ -z "$how" ] || grep -q "$how\$" err.txt ||
                    { why="$f $op --band-rows $rows: not $how"; break 3; }
            fi
        done
    done
done
result gtranspose-every-op "$why"

# The temporary file: unlinked from the start (nothing left in TMPDIR);
# where it cannot be made, exit 1, "tool: file: cannot make a temporary
# file in DIR", no output. An output written where its bands go needs none.
why=""
mkdir -p spool
TMPDIR=$PWD/spool "$GT" --device cpu --band-rows 7 --op rot270 rgb8.ppm out.png || why="exit $?"
[ -z "$why" ] && [ -n "$(ls -A spool)" ] && why="left $(ls -A spool | tr '\n' ' ')"
result gtranspose-spool-left-nothing "$why"
why=""
rm -rf placed && mkdir -p placed
TMPDIR=$PWD/no-such-folder "$GT" --device cpu --band-rows 7 --op rot90 rgb8.ppm placed/out.ppm ||
    why="exit $?"
[ -z "$why" ] && { "$GT" --device cpu --op rot90 rgb8.ppm whole.ppm && cmp -s placed/out.ppm whole.ppm ||
    why="not the whole image's bytes"; }
[ -z "$why" ] && [ "$(ls -A placed)" != out.ppm ] && why="placed/ holds $(ls -A placed | tr '\n' ' ')"
result gtranspose-placed-no-spool "$why"
# Its room is reserved at the first band: past `ulimit -f` (64 KiB; the
# output 179 KiB), exit 1, the output named, nothing left.
rm -rf placed && mkdir -p placed
TOOL=gtranspose expect_fail gtranspose-placed-no-room 1 placed -- \
    sh -c "ulimit -f 64 && exec \"$GT\" --device cpu --band-rows 7 --op rot90 rgb8.ppm placed/out.ppm"
grep -q "^gtranspose: placed/out.ppm: no room for the output's 179 KiB: " stderr.txt ||
    fail gtranspose-placed-no-room-message "$(head -c 300 stderr.txt)"
mkdir -p e
TMPDIR=$PWD/no-such-folder TOOL=gtranspose expect_fail gtranspose-spool-no-folder 1 e -- \
    "$GT" --device cpu --band-rows 7 --op rot90 rgb8.ppm e/out.png
grep -q "^gtranspose: rgb8.ppm: cannot make a temporary file in $PWD/no-such-folder: " stderr.txt ||
    fail gtranspose-spool-no-folder-message "$(head -c 300 stderr.txt)"

# Where the output is not a file of its own (a FIFO), the bands are
# spooled and written as their rows come: the same bytes. A cut input
# placed part of the way: exit 1, the same message as whole, no output
# file, no temporary.
why=""
if mkfifo fifo.ppm 2>/dev/null; then
    cat fifo.ppm >from-fifo.ppm &
    "$GT" --device cpu -v --band-rows 7 --op transverse rgb8.ppm fifo.ppm 2>err.txt || why="exit $?"
    wait
    rm -f fifo.ppm
    [ -z "$why" ] && { grep -q 'written as they came$' err.txt ||
        why="stderr: $(tr '\n' '|' <err.txt | head -c 300)"; }
    [ -z "$why" ] && { "$GT" --device cpu --op transverse rgb8.ppm whole.ppm &&
        cmp -s from-fifo.ppm whole.ppm || why="not the whole image's bytes"; }
    result gtranspose-fifo-spooled "$why"
else
    skip gtranspose-fifo-spooled "no mkfifo"
fi
why=""
rm -rf outdir && mkdir -p outdir
for f in cut-rgb8.ppm cut-rgb8.png; do
    for op in rot90 flip; do
        same_refusal "$f $op" "$GT" --op $op $f outdir/x.ppm
        [ -n "$why" ] && break 2
    done
done
result gtranspose-placed-cut-short "$why"

# Over the default threshold (64 MP: 8192 x 8193 gray), bands without
# --band-rows; the same report as read whole (--band-rows past its height).
why=""
"$GEN" --pattern gradient 8192 8193 1 8 big.pgm || why="gen failed"
[ -z "$why" ] && { "$GS" -v big.pgm >bands.txt 2>err.txt || why="exit $?"; }
[ -z "$why" ] && { grep -q 'big.pgm: read in [0-9]* bands of [0-9]* rows' err.txt ||
    why="not read in bands: $(tr '\n' '|' <err.txt | head -c 300)"; }
[ -z "$why" ] && { "$GS" --band-rows 8193 big.pgm >whole.txt && cmp -s whole.txt bands.txt ||
    why="the reports differ"; }
rm -f big.pgm
result default-threshold "$why"

# The memory budget (--max-memory): a job over it is read in bands it fits
# (-v says so; the same reports and outputs, byte for byte, as read whole);
# what cannot be read in bands, or the output a rotation holds whole, is
# refused past it: exit 1, "tool: file: ... --max-memory", no output.
why=""
for tool in "$GS" "$GH"; do
    "$tool" rgb8.ppm >whole.txt && "$tool" -v --max-memory 64K rgb8.ppm >bands.txt 2>err.txt ||
        { why="${tool##*/}: exit $?"; break; }
    grep -q 'rgb8.ppm: read in [0-9]* bands of [0-9]* rows' err.txt ||
        { why="${tool##*/}: not read in bands: $(tr '\n' '|' <err.txt | head -c 200)"; break; }
    cmp -s whole.txt bands.txt || { why="${tool##*/}: the reports differ"; break; }
done
result budget-reports-in-bands "$why"
why=""
"$GC" --device cpu -k gaussian:1.5 rgb8.ppm whole.ppm &&
    "$GC" --device cpu -v --max-memory 64K -k gaussian:1.5 rgb8.ppm bands.ppm 2>err.txt ||
    why="exit $?"
[ -z "$why" ] && { grep -q 'read in [0-9]* bands' err.txt || why="not read in bands"; }
[ -z "$why" ] && { cmp -s whole.ppm bands.ppm || why="the outputs differ"; }
"$GT" --device cpu --op rot90 rgb8.ppm whole.ppm &&
    "$GT" --device cpu -v --max-memory 256K --op rot90 rgb8.ppm bands.ppm 2>err.txt ||
    why="gtranspose: exit $?"
[ -z "$why" ] && { grep -q 'read in [0-9]* bands' err.txt || why="gtranspose: not read in bands"; }
[ -z "$why" ] && { cmp -s whole.ppm bands.ppm || why="gtranspose: the outputs differ"; }
result budget-outputs-in-bands "$why"

# 301 x 203 RGB: 183 KiB an image.
mkdir -p e
"$GC" -k 1 rgb8.ppm rgb8.bmp && "$GC" -k 1 rgb8.ppm rgb8-301.png ||
    fail budget-setup "gconv to BMP or PNG failed"
expect_fail budget-no-row-decoder 1 e -- "$GS" --max-memory 64K rgb8.bmp
grep -q 'rgb8.bmp: reading it whole (its format has no row decoder) needs 179 KiB, over the memory budget of 64 KiB (raise it with --max-memory)' stderr.txt ||
    fail budget-no-row-decoder-message "$(head -c 300 stderr.txt)"
expect_fail budget-stdin 1 e -- sh -c "\"$GS\" --max-memory 64K - <rgb8-301.png"
grep -q 'standard input: input of more than 64 KiB is over the memory budget of 64 KiB (raise it with --max-memory)' stderr.txt ||
    fail budget-stdin-message "$(head -c 300 stderr.txt)"
# A rotation's output assembled whole (for standard output) is refused past
# the budget; to a file it is spooled through a temporary file.
TOOL=gtranspose expect_fail budget-rotation-output 1 e -- "$GT" --device cpu --max-memory 128K \
    --op rot90 rgb8.ppm -
grep -q 'over the memory budget of 128 KiB' stderr.txt ||
    fail budget-rotation-output-message "$(head -c 300 stderr.txt)"
why=""
"$GT" --device cpu -v --max-memory 128K --op rot90 rgb8.ppm bands.png 2>err.txt || why="exit $?"
[ -z "$why" ] && { grep -q 'written as they came' err.txt || why="not written in bands"; }
[ -z "$why" ] && { "$GT" --device cpu --op rot90 rgb8.ppm whole.png && cmp -s bands.png whole.png ||
    why="not the whole image's bytes"; }
result budget-rotation-spooled "$why"
# A PNG output assembled (for standard output) holds its encoder's
# buffers: refused past the budget; to a file it is written in bands.
TOOL=gconv expect_fail budget-png-encoder 1 e -- "$GC" --device cpu --max-memory 256K -k 1 \
    rgb8.ppm -f png -
grep -q 'standard output: encoding it as PNG needs .*over the memory budget of 256 KiB' stderr.txt ||
    fail budget-png-encoder-message "$(head -c 300 stderr.txt)"
why=""
"$GC" --device cpu -v --max-memory 256K -k 1 rgb8.ppm bands.png 2>err.txt || why="exit $?"
[ -z "$why" ] && { grep -q 'written as they came' err.txt || why="not written in bands"; }
[ -z "$why" ] && { "$GC" --device cpu -k 1 rgb8.ppm whole.png && cmp -s bands.png whole.png ||
    why="not the whole image's bytes"; }
result budget-png-in-bands "$why"
for bad in 1 64 10x -5M 1e9 0% 101%; do
    expect_fail "budget-usage-$bad" 2 e -- "$GS" --max-memory "$bad" rgb8.ppm
done
"$GS" --max-memory 25% rgb8.ppm >pct.txt && "$GS" rgb8.ppm >whole.txt && cmp -s pct.txt whole.txt
result budget-percent "$([ $? = 0 ] || echo 'the reports differ')"

exit $failed
