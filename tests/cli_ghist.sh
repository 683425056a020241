#!/usr/bin/env bash
# tests/cli_ghist.sh — the command-line tests of ghist: counts of hand-made
# images in table, CSV and JSON, ranges and bins that do not divide evenly,
# 16-bit exact bins, float NaN, luma, cumulative and fractions output,
# channel selection, plots, equalization, several inputs, pipes, errors;
# and pgmhist (netpbm) and ImageMagick as independent counters when
# installed. One PASS/FAIL/SKIP line per test; BIN and BUILD as in
# cli_lib.sh.
TOOL=ghist
. "$(dirname "$0")/cli_lib.sh"
GH=$PROG

# A 4x2 8-bit gray image: 0 0 7 7 / 7 200 255 255.
{ printf 'P5\n4 2\n255\n'; bytes 0 0 7 7 7 200 255 255; } >g8.pgm
# A 3x1 RGB image: (10,20,30) (10,200,30) (255,20,0).
{ printf 'P6\n3 1\n255\n'; bytes 10 20 30 10 200 30 255 20 0; } >rgb.ppm
# A 2x2 16-bit gray image: 0, 1, 256, 65535 (big-endian samples).
{ printf 'P5\n2 2\n65535\n'; bytes 0 0 0 1 1 0 255 255; } >g16.pgm
# A 4x1 float gray PFM (little-endian, scale -1): NaN, 0.5, 1.0, 2.0.
{ printf 'Pf\n4 1\n-1.0\n'; bytes 0 0 192 127 0 0 0 63 0 0 128 63 0 0 0 64; } >f.pfm

# --------------------------------------------------------------- the table

why=""
"$GH" g8.pgm >out.txt 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { head -n 1 out.txt | grep -q '^# g8.pgm: 4x2, 256 bins over \[0, 256)' || why="title: $(head -n 1 out.txt)"; }
[ -z "$why" ] && { [ "$(sed -n 2p out.txt | tr -s ' ' | sed 's/^ //')" = "bin lo gray" ] || why="header: $(sed -n 2p out.txt)"; }
[ -z "$why" ] && { [ "$(wc -l <out.txt)" -eq 258 ] || why="$(wc -l <out.txt) lines, expected 258"; }
# bin 0: 2, bin 7: 3, bin 200: 1, bin 255: 2, every other bin 0.
[ -z "$why" ] && { got=$(awk 'NR > 2 && $3 != 0 { printf "%s:%s ", $1, $3 }' out.txt)
    [ "$got" = "0:2 7:3 200:1 255:2 " ] || why="non-zero bins: $got"; }
result table-gray8 "$why"

# --------------------------------------------------------------------- CSV

why=""
"$GH" --csv --bins 4 rgb.ppm >out.csv 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
want='bin,lo,hi,red,green,blue
0,0,64,2,2,3
1,64,128,0,0,0
2,128,192,0,0,0
3,192,256,1,1,0
below,,,0,0,0
above,,,0,0,0
nan,,,0,0,0'
[ -z "$why" ] && { [ "$(cat out.csv)" = "$want" ] || why="got: $(tr '\n' '|' <out.csv)"; }
result csv-rgb-4-bins "$why"

# A range and bins that do not divide evenly: [5, 205) in 3 bins of 66.67:
# 0 0 -> below; 7 7 7 -> bin 0; 200 -> bin 2; 255 255 -> above.
why=""
"$GH" --csv --bins 3 --range 5:205 g8.pgm >out.csv 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { got=$(cut -d, -f1,4 out.csv | tr '\n' ' ')
    [ "$got" = "bin,gray 0,3 1,0 2,1 below,2 above,2 nan,0 " ] || why="got: $got"; }
[ -z "$why" ] && { awk -F, '$1 == 1 { exit !($2 > 71.6666 && $2 < 71.6667 && $3 > 138.3333 && $3 < 138.3334) }' out.csv ||
    why="edges: $(sed -n 3p out.csv)"; }
result csv-uneven-range "$why"

# -------------------------------------------------------------------- JSON

why=""
"$GH" --json --bins 2 --luma rgb.ppm g8.pgm >out.json 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { [ "$(wc -l <out.json)" -eq 2 ] || why="$(wc -l <out.json) lines, expected one per file"; }
# luma of (10,20,30) = 19, (10,200,30) = 148, (255,20,0) = 68: bins [0,128) and [128,256).
[ -z "$why" ] && { head -n 1 out.json | grep -q '^{"file":"rgb.ppm","bins":2,"range":\[0,256\],.*"counts":{"red":\[2,1\],"green":\[2,1\],"blue":\[3,0\],"luma":\[2,1\]},"below":{"red":0,' ||
    why="first: $(head -n 1 out.json)"; }
[ -z "$why" ] && { sed -n 2p out.json | grep -q '^{"file":"g8.pgm",.*"counts":{"gray":\[5,3\],"luma":\[5,3\]}' ||
    why="second: $(sed -n 2p out.json)"; }
if [ -z "$why" ] && command -v python3 >/dev/null; then
    python3 -c 'import json,sys; [json.loads(l) for l in open("out.json")]' 2>err.txt || why="not JSON: $(head -c 200 err.txt)"
fi
result json-two-files-luma "$why"

# 16-bit, 65536 bins: each value its own bin. Float: NaN and the closed top.
why=""
"$GH" --json --bins 65536 g16.pgm >out.json 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
if [ -z "$why" ] && command -v python3 >/dev/null; then
    python3 -c '
import json
d = json.load(open("out.json")); g = d["counts"]["gray"]
assert d["range"] == [0, 65536] and len(g) == 65536, d["range"]
assert [i for i, v in enumerate(g) if v] == [0, 1, 256, 65535] and sum(g) == 4
' 2>err.txt || why="$(tail -n 1 err.txt)"
fi
result json-16-bit-exact "$why"

why=""
"$GH" --json --bins 4 f.pfm >out.json 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { grep -q '"range":\[0,1\],.*"counts":{"gray":\[0,0,1,1\]},"below":{"gray":0},"above":{"gray":1},"nan":{"gray":1}}' out.json ||
    why="got: $(cat out.json)"; }
result json-float-nan-closed-top "$why"

# --------------------------------------------- cumulative, fractions, -c

why=""
"$GH" --csv --cumulative --fractions -c blue,red rgb.ppm >out.csv 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { [ "$(head -n 1 out.csv)" = "bin,lo,hi,red,blue" ] || why="header: $(head -n 1 out.csv)"; }
[ -z "$why" ] && { got=$(awk -F, '$1 == 10 || $1 == 30 || $1 == 255 { printf "%s:%s:%s ", $1, $4, $5 }' out.csv)
    [ "$got" = "10:0.6666666666666666:0.3333333333333333 30:0.6666666666666666:1 255:1:1 " ] || why="got: $got"; }
result cumulative-fractions-channels "$why"

why=""
"$GH" --csv -c luma --bins 2 rgb.ppm >out.csv 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { [ "$(head -n 2 out.csv | tr '\n' ' ')" = "bin,lo,hi,luma 0,0,128,2 " ] || why="got: $(head -n 2 out.csv | tr '\n' ' ')"; }
result channel-luma-only "$why"

# ----------------------------------------------- independent counters

"$GEN" --seed 11 61 37 1 8 r8.pgm
"$GEN" --seed 12 53 29 3 8 r8.ppm
if command -v pgmhist >/dev/null; then
    why=""
    "$GH" --csv r8.pgm 2>err.txt | awk -F, 'NR > 1 && $1 ~ /^[0-9]+$/ && $4 != 0 { print $1, $4 }' >ours.txt ||
        why="ghist failed: $(head -c 200 err.txt)"
    pgmhist -machine r8.pgm 2>/dev/null | awk '$2 != 0 { print $1, $2 }' >theirs.txt
    [ -z "$why" ] && [ ! -s theirs.txt ] && pgmhist r8.pgm | awk 'NR > 2 && $2 ~ /^[0-9]+$/ && $2 != 0 { print $1, $2 }' >theirs.txt
    [ -z "$why" ] && { cmp -s ours.txt theirs.txt || why="counts differ from pgmhist: $(diff ours.txt theirs.txt | head -n 3 | tr '\n' ' ')"; }
    result pgmhist-agrees "$why"
else
    skip pgmhist-agrees "pgmhist (netpbm) is not installed"
fi
if command -v convert >/dev/null 2>&1 && convert -version 2>/dev/null | grep -q ImageMagick; then
    # ImageMagick's per-channel histogram: -separate, then the unique
    # values of each channel with their counts.
    why=""
    "$GH" --csv r8.ppm >ours.csv 2>err.txt || why="ghist failed: $(head -c 200 err.txt)"
    for c in 0 1 2; do
        [ -n "$why" ] && break
        convert r8.ppm -channel "$(echo R G B | cut -d' ' -f$((c + 1)))" -separate -depth 8 -format %c histogram:info:- 2>/dev/null |
            sed -n 's/^ *\([0-9]*\): (\([0-9]*\)[,)].*/\2 \1/p' | sort -n >im.txt
        awk -F, -v col=$((c + 4)) 'NR > 1 && $1 ~ /^[0-9]+$/ && $col != 0 { print $1, $col }' ours.csv | sort -n >us.txt
        [ -s im.txt ] || { why="could not read ImageMagick's histogram"; break; }
        cmp -s us.txt im.txt || why="channel $c differs from ImageMagick: $(diff us.txt im.txt | head -n 3 | tr '\n' ' ')"
    done
    result imagemagick-agrees "$why"
else
    skip imagemagick-agrees "convert (ImageMagick) is not installed"
fi

# ------------------------------------------------------------------- plots

why=""
"$GH" --plot plot.png --bins 64 --luma r8.ppm >/dev/null 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { [ "$(magic plot.png 8)" = 89504e470d0a1a0a ] || why="not a PNG"; }
# 800x480 (IHDR), and not blank: several colours drawn.
[ -z "$why" ] && { [ "$(od -An -tx1 -j16 -N8 plot.png | tr -d ' \n')" = 00000320000001e0 ] || why="size: $(od -An -tx1 -j16 -N8 plot.png)"; }
if [ -z "$why" ] && command -v python3 >/dev/null; then
    "$BIN"/ghist --csv --bins 1 -c red plot.png >/dev/null 2>&1 || why="the plot does not read back"
    "$CMP" plot.png plot.png >/dev/null 2>&1 || why="imgcmp cannot read the plot"
fi
result plot-png "$why"

# ------------------------------------------------------------ equalization

# A low-contrast gray ramp (values 100..131) spreads to 0..255.
"$GEN" --pattern gradient 32 8 1 8 ramp.pgm
why=""
{ printf 'P5\n32 1\n255\n'; bytes $(seq 100 131); } >low.pgm
"$GH" --equalize eq.pgm low.pgm >stdout.bin 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
[ -z "$why" ] && [ -s stdout.bin ] && why="printed counts with --equalize"
[ -z "$why" ] && { got=$(tail -c 32 eq.pgm | od -An -tu1 | tr -s ' \n' ' ' | sed 's/^ //;s/ $//')
    want=$(awk 'BEGIN { for (i = 1; i <= 32; i++) printf "%s%d", (i > 1 ? " " : ""), int((i - 1) * 255 / 31 + 0.5) }')
    [ "$got" = "$want" ] || why="got $got"; }
result equalize-gray-spreads "$why"

# Luma only: gray pixels of an RGB image stay gray; alpha is untouched.
why=""
{ printf 'P7\nWIDTH 4\nHEIGHT 1\nDEPTH 4\nMAXVAL 255\nTUPLTYPE RGB_ALPHA\nENDHDR\n'
  bytes 50 50 50 9 60 60 60 99 70 70 70 200 80 80 80 255; } >gray.pam
"$GH" --equalize eqa.pam --luma gray.pam 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { got=$(tail -c 16 eqa.pam | od -An -tu1 | tr -s ' \n' ' ' | sed 's/^ //;s/ $//')
    [ "$got" = "0 0 0 9 85 85 85 99 170 170 170 200 255 255 255 255" ] || why="got $got"; }
result equalize-luma-keeps-gray-and-alpha "$why"

# Per channel on a random RGB image: the mapping is monotonic (the order of
# samples within a channel is kept) and reaches both ends.
why=""
"$GH" --equalize eq.ppm r8.ppm 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
if [ -z "$why" ]; then
    n=$((53 * 29 * 3))
    paste <(tail -c $n r8.ppm | od -An -v -tu1 -w1) <(tail -c $n eq.ppm | od -An -v -tu1 -w1) |
        awk '{ c = (NR - 1) % 3; k = c " " $1; if (k in m && m[k] != $2) bad = 1; m[k] = $2 }
             END { for (k in m) { split(k, a, " "); v[a[1], a[2]] = m[k] }
                   for (c = 0; c < 3; c++) { last = -1; lo = 999; hi = -1
                       for (i = 0; i < 256; i++) if ((c, i) in v) { if (v[c, i] < last) bad = 1
                           last = v[c, i]; if (v[c, i] < lo) lo = v[c, i]; if (v[c, i] > hi) hi = v[c, i] }
                       if (lo != 0 || hi != 255) bad = 1 }
                   exit bad }' || why="not a monotonic mapping onto 0..255"
fi
result equalize-per-channel-monotonic "$why"

# ------------------------------------------------- several inputs, pipes

# One header for several files: every row has its columns.
cp g8.pgm g8b.pgm
why=""
"$GH" --csv --bins 2 g8.pgm g8b.pgm >out.csv 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { [ "$(head -n 1 out.csv)" = "file,bin,lo,hi,gray" ] || why="header: $(head -n 1 out.csv)"; }
[ -z "$why" ] && { [ "$(grep -c '^g8.pgm,' out.csv) $(grep -c '^g8b.pgm,' out.csv)" = "5 5" ] || why="rows per file wrong"; }
[ -z "$why" ] && { grep -q '^g8b.pgm,1,128,256,3$' out.csv || why="g8b.pgm's counts: $(cat out.csv)"; }
[ -z "$why" ] && { [ "$(awk -F, 'NF != 5' out.csv | wc -l)" -eq 0 ] || why="rows of another width"; }
result csv-several-files "$why"
# Mixed layouts: a gray header cannot hold RGB rows; rgb.ppm fails with a
# message naming both sets, g8.pgm is still printed, no row is malformed.
why=""
"$GH" --csv --bins 2 g8.pgm rgb.ppm >out.csv 2>err.txt
rc=$?
[ "$rc" -eq 1 ] || why="exit $rc, expected 1"
[ -z "$why" ] && { grep -q '^ghist: rgb.ppm: .*red,green,blue.*gray' err.txt || why="stderr: $(head -c 200 err.txt)"; }
[ -z "$why" ] && { [ "$(grep -c '^g8.pgm,' out.csv) $(grep -c '^rgb.ppm,' out.csv)" = "5 0" ] || why="rows: $(cat out.csv)"; }
[ -z "$why" ] && { [ "$(awk -F, 'NF != 5' out.csv | wc -l)" -eq 0 ] || why="rows of another width: $(cat out.csv)"; }
result csv-several-files-mixed-layouts "$why"
# ... and with -c luma, which every image has, both are counted: luma of
# (10,20,30) = 19, (10,200,30) = 148, (255,20,0) = 68.
why=""
"$GH" --csv --bins 2 -c luma g8.pgm rgb.ppm >out.csv 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { [ "$(head -n 1 out.csv)" = "file,bin,lo,hi,luma" ] || why="header: $(head -n 1 out.csv)"; }
[ -z "$why" ] && { grep -q '^g8.pgm,0,0,128,5$' out.csv && grep -q '^rgb.ppm,0,0,128,2$' out.csv &&
    grep -q '^rgb.ppm,1,128,256,1$' out.csv || why="counts: $(cat out.csv)"; }
result csv-several-files-common-luma "$why"

why=""
"$GEN" --seed 5 40 30 4 16 - | "$GH" --json - >out.json 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { grep -q '^{"file":"standard input","bins":256,"range":\[0,65536\],.*"alpha":\[' out.json || why="got: $(head -c 200 out.json)"; }
result stdin-pipe "$why"

mkdir -p plots eqs
why=""
"$GH" --plot 'plots/%f-%e.png' --equalize eqs/ r8.pgm r8.ppm 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { [ -s plots/r8-pgm.png ] && [ -s plots/r8-ppm.png ] || why="plots/: $(ls plots | tr '\n' ' ')"; }
[ -z "$why" ] && { [ -s eqs/r8.pgm ] && [ -s eqs/r8.ppm ] || why="eqs/: $(ls eqs | tr '\n' ' ')"; }
result plot-and-equalize-patterns "$why"
# An existing folder needs no final slash, as for -o (gimg(7)).
mkdir -p plotdir
why=""
"$GH" --plot plotdir --json r8.pgm r8.ppm >/dev/null 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { [ -s plotdir/r8.pgm ] && [ -s plotdir/r8.ppm ] || why="plotdir/: $(ls plotdir | tr '\n' ' ')"; }
result plot-existing-folder "$why"
# A stream's images past the first need a pattern: the message says which
# option lacks one.
why=""
cat g8.pgm rgb.ppm | "$GH" --plot s.png - >/dev/null 2>err.txt
rc=$?
[ "$rc" -eq 1 ] || why="exit $rc, expected 1"
[ -z "$why" ] && { grep -q '^ghist: standard input (image 2): .*--plot PATTERN using %i' err.txt || why="stderr: $(head -c 200 err.txt)"; }
result stream-plot-needs-pattern "$why"
# -v counts the encoding of the plot and the equalized image as encode time.
why=""
"$GH" -v --plot vplot.png r8.ppm >/dev/null 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { grep -q '^ghist: time: .*encode [0-9.]* ms' err.txt || why="no time line: $(head -c 300 err.txt)"; }
[ -z "$why" ] && { grep '^ghist: time: ' err.txt | grep -q 'encode 0\.00 ms' && why="no encode time: $(grep '^ghist: time: ' err.txt)"; }
result verbose-encode-time "$why"

# ------------------------------------------------------------------ errors

mkdir -p e
expect_fail usage-bins-zero 2 e -- "$GH" --bins 0 g8.pgm
expect_fail usage-bins-too-many 2 e -- "$GH" --bins 65537 g8.pgm
expect_fail usage-bad-range 2 e -- "$GH" --range 5:5 g8.pgm
expect_fail usage-range-junk 2 e -- "$GH" --range 0:x g8.pgm
expect_fail usage-bad-channel 2 e -- "$GH" -c purple g8.pgm
expect_fail usage-csv-and-json 2 e -- "$GH" --csv --json g8.pgm
# No INPUT: standard input, here empty (at a terminal, a usage error:
# cli_conventions.sh).
expect_fail no-input-reads-empty-stdin 1 e -- "$GH" --csv </dev/null
expect_fail usage-equalize-with-bins 2 e -- "$GH" --equalize e/x.pgm --bins 10 g8.pgm
expect_fail usage-plot-several-one-name 2 e -- "$GH" --plot e/p.png g8.pgm rgb.ppm
expect_fail usage-plot-empty 2 e -- "$GH" --plot "" g8.pgm
why=""
grep -q '^ghist: --plot: empty file name' stderr.txt || why="stderr: $(head -c 200 stderr.txt)"
result usage-plot-empty-message "$why"
expect_fail usage-equalize-empty 2 e -- "$GH" --equalize= g8.pgm
why=""
grep -q '^ghist: --equalize: empty file name' stderr.txt || why="stderr: $(head -c 200 stderr.txt)"
result usage-equalize-empty-message "$why"

# An image that cannot be written is reported by its name; the report of
# that input is dropped.
why=""
"$GH" --plot nodir/p.png g8.pgm >out.txt 2>err.txt
rc=$?
[ "$rc" -eq 1 ] || why="exit $rc, expected 1"
[ -z "$why" ] && { grep -q '^ghist: nodir/p.png: ' err.txt || why="stderr: $(head -c 200 err.txt)"; }
[ -z "$why" ] && { [ ! -s out.txt ] || why="printed the report: $(head -c 100 out.txt)"; }
result error-plot-unwritable "$why"

# A channel the image lacks, and a missing file: exit 1, the others reported.
why=""
"$GH" --csv -c red g8.pgm rgb.ppm >out.csv 2>err.txt
rc=$?
[ "$rc" -eq 1 ] || why="exit $rc, expected 1"
[ -z "$why" ] && { grep -q '^ghist: g8.pgm: .*no red channel' err.txt || why="stderr: $(head -c 200 err.txt)"; }
[ -z "$why" ] && { grep -q '^rgb.ppm,0,0,1,0$' out.csv || why="rgb.ppm not reported: $(head -c 200 out.csv)"; }
result error-missing-channel-others-go-on "$why"
why=""
"$GH" --json missing.png g8.pgm >out.json 2>err.txt
rc=$?
[ "$rc" -eq 1 ] || why="exit $rc, expected 1"
[ -z "$why" ] && { grep -q '^ghist: missing.png: ' err.txt || why="stderr: $(head -c 200 err.txt)"; }
[ -z "$why" ] && { [ "$(wc -l <out.json)" -eq 1 ] && grep -q '"file":"g8.pgm"' out.json || why="g8.pgm not reported"; }
result error-missing-file-others-go-on "$why"

"$GH" --help >stdout.bin 2>/dev/null
why=""
head -n 1 stdout.bin | grep -q '^Usage: ghist \[options\] INPUT\.\.\.$' || why="usage line: $(head -n 1 stdout.bin)"
for opt in --bins --range --channel --luma --cumulative --fractions --csv --json --plot --equalize --device; do
    [ -z "$why" ] && { grep -q -- "$opt" stdout.bin || why="help lacks $opt"; }
done
result help "$why"

exit $failed
