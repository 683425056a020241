#!/usr/bin/env bash
# tests/cli_gtranspose.sh — the command-line tests of gtranspose: every op
# against hand-made images and ImageMagick, identities on random images,
# pipes, output formats, errors and exit statuses, devices, signals.
# One PASS/FAIL/SKIP line per test; BIN and BUILD as in cli_lib.sh.
TOOL=gtranspose
. "$(dirname "$0")/cli_lib.sh"
GT=$PROG

OPS="transpose transverse flip flop rot90 rot180 rot270"

# ---------------------------------------------------------------- helpers

# The samples of pixel I of the reference 3x2 image, as bytes (16-bit samples
# big-endian as in PNM, with different high and low bytes so that swapped
# bytes show).
pixel() {
    local kind=$1 i=$2 c
    case $kind in
        gray8) echo $((i * 40 + 7)) ;;
        gray16) echo $((i * 40 + 7)) $((255 - i * 10)) ;;
        graya8) echo $((i * 40 + 5)) $((255 - i * 20)) ;;
        rgb8) echo $((i * 40 + 1)) $((i * 40 + 2)) $((i * 40 + 3)) ;;
        rgb16) for c in 1 2 3; do echo $((i * 40 + c)) $((c * 50 + i)); done ;;
        rgba16) for c in 1 2 3 4; do echo $((i * 40 + c)) $((c * 50 + i)); done ;;
    esac
}

pixel_bytes() {
    case $1 in
        gray8) echo 1 ;; gray16 | graya8) echo 2 ;; rgb8) echo 3 ;; rgb16) echo 6 ;; rgba16) echo 8 ;;
    esac
}

header() {
    local kind=$1 w=$2 h=$3
    case $kind in
        gray8) printf 'P5\n%d %d\n255\n' "$w" "$h" ;;
        gray16) printf 'P5\n%d %d\n65535\n' "$w" "$h" ;;
        rgb8) printf 'P6\n%d %d\n255\n' "$w" "$h" ;;
        rgb16) printf 'P6\n%d %d\n65535\n' "$w" "$h" ;;
        graya8) printf 'P7\nWIDTH %d\nHEIGHT %d\nDEPTH 2\nMAXVAL 255\nTUPLTYPE GRAYSCALE_ALPHA\nENDHDR\n' "$w" "$h" ;;
        rgba16) printf 'P7\nWIDTH %d\nHEIGHT %d\nDEPTH 4\nMAXVAL 65535\nTUPLTYPE RGB_ALPHA\nENDHDR\n' "$w" "$h" ;;
    esac
}

# mkimg FILE KIND W H I...: an image whose k-th pixel (row by row) is pixel
# I_k of the reference 3x2 image
#     0 1 2
#     3 4 5
mkimg() {
    local file=$1 kind=$2 w=$3 h=$4 i vals=()
    shift 4
    for i in "$@"; do vals+=($(pixel "$kind" "$i")); done
    { header "$kind" "$w" "$h"; bytes "${vals[@]}"; } >"$file"
}

# The expected result of each op on the reference image: size, then pixels.
expected() {
    case $1 in
        transpose) echo 2 3 0 3 1 4 2 5 ;;
        transverse) echo 2 3 5 2 4 1 3 0 ;;
        flip) echo 3 2 3 4 5 0 1 2 ;;
        flop) echo 3 2 2 1 0 5 4 3 ;;
        rot90) echo 2 3 3 0 4 1 5 2 ;;
        rot180) echo 3 2 5 4 3 2 1 0 ;;
        rot270) echo 2 3 2 5 1 4 0 3 ;;
    esac
}

ext_of() { case $1 in graya8 | rgba16) echo pam ;; gray*) echo pgm ;; *) echo ppm ;; esac; }

# ------------------------------------------------- every op, known results

for kind in gray8 gray16 rgb8 rgb16 graya8 rgba16; do
    ext=$(ext_of "$kind")
    mkimg "ref-$kind.$ext" "$kind" 3 2 0 1 2 3 4 5
    payload=$((6 * $(pixel_bytes "$kind")))
    for op in $OPS; do
        set -- $(expected "$op")
        mkimg "want-$op-$kind.$ext" "$kind" "$@"
        name="known-$op-$kind"
        # Through stdout: the default output is PNM/PAM by channel count, so
        # the pixel payload (the file's tail) must match byte for byte.
        if ! "$GT" --op "$op" "ref-$kind.$ext" >"got-$op-$kind.$ext" 2>err.txt; then
            fail "$name" "exit status $?: $(head -c 200 err.txt)"
        elif ! cmp -s <(tail -c "$payload" "got-$op-$kind.$ext") \
            <(tail -c "$payload" "want-$op-$kind.$ext"); then
            fail "$name" "pixel bytes differ: got $(tail -c "$payload" "got-$op-$kind.$ext" | od -An -tu1 | tr -s ' \n' ' ')"
        elif ! why=$(same "got-$op-$kind.$ext" "want-$op-$kind.$ext"); then
            fail "$name" "$why"
        else
            pass "$name"
        fi
    done
done

# The default op is transpose, and a file output gives the same bytes.
why=""
"$GT" ref-rgb8.ppm default.ppm 2>err.txt || why="exit status $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { why=$(same default.ppm want-transpose-rgb8.ppm) || true; }
result default-op-is-transpose "$why"

# ------------------------------------- identities on random, awkward sizes

# ident NAME FILE EXT: the group laws of the eight symmetries on one image.
ident() {
    local name=$1 a=$2 e=$3 why="" op
    for op in $OPS; do
        "$GT" --op "$op" "$a" "$op.$e" 2>err.txt || { why="$op failed: $(head -c 200 err.txt)"; break; }
    done
    if [ -z "$why" ]; then
        "$GT" --op rot90 rot90.$e r2.$e && "$GT" --op rot90 r2.$e r3.$e &&
            "$GT" --op rot90 r3.$e r4.$e &&
            "$GT" --op transpose transpose.$e tt.$e &&
            "$GT" --op flop flip.$e flipflop.$e &&
            "$GT" --op rot270 rot90.$e r90r270.$e &&
            "$GT" --op rot180 transpose.$e tr180.$e &&
            "$GT" --op flop transpose.$e tflop.$e &&
            "$GT" --op flip transpose.$e tflip.$e &&
            "$GT" --op flip flip.$e ff.$e 2>err.txt || why="a chained op failed: $(head -c 200 err.txt)"
    fi
    [ -z "$why" ] && { why=$(same r4.$e "$a") || why="rot90 x4: $why"; }
    [ -z "$why" ] && { why=$(same r2.$e rot180.$e) || why="rot90 x2 != rot180: $why"; }
    [ -z "$why" ] && { why=$(same r3.$e rot270.$e) || why="rot90 x3 != rot270: $why"; }
    [ -z "$why" ] && { why=$(same tt.$e "$a") || why="transpose x2: $why"; }
    [ -z "$why" ] && { why=$(same flipflop.$e rot180.$e) || why="flip+flop != rot180: $why"; }
    [ -z "$why" ] && { why=$(same r90r270.$e "$a") || why="rot90+rot270: $why"; }
    [ -z "$why" ] && { why=$(same tr180.$e transverse.$e) || why="transpose+rot180 != transverse: $why"; }
    [ -z "$why" ] && { why=$(same tflop.$e rot90.$e) || why="transpose+flop != rot90: $why"; }
    [ -z "$why" ] && { why=$(same tflip.$e rot270.$e) || why="transpose+flip != rot270: $why"; }
    [ -z "$why" ] && { why=$(same ff.$e "$a") || why="flip x2: $why"; }
    result "$name" "$why"
}

seed=1
for depth in 8 16 32; do
    for ch in 1 2 3 4; do
        # Float keeps its depth in PFM (gray and RGB); 2- and 4-channel float
        # images have no float format and go through PAM as 16-bit.
        ext=pam
        [ "$depth" = 32 ] && { [ "$ch" = 1 ] || [ "$ch" = 3 ]; } && ext=pfm
        for size in "37 19" "64 65" "1 1" "1 23" "23 1"; do
            set -- $size
            seed=$((seed + 1))
            name="identities-${1}x${2}-c$ch-d$depth"
            if ! "$GEN" --seed "$seed" "$1" "$2" "$ch" "$depth" "a.$ext" 2>err.txt; then
                fail "$name" "gen failed: $(head -c 200 err.txt)"
                continue
            fi
            ident "$name" "a.$ext" "$ext"
        done
    done
done

# A block-boundary size in PNG, through the lossless 8- and 16-bit paths.
for depth in 8 16; do
    for ch in 1 2 3 4; do
        name="identities-png-c$ch-d$depth"
        if "$GEN" --seed 99 67 129 "$ch" "$depth" a.png 2>err.txt; then
            ident "$name" a.png png
        else
            fail "$name" "gen failed: $(head -c 200 err.txt)"
        fi
    done
done

# ------------------------------------------------------------------- pipes

"$GEN" --seed 7 45 31 4 16 src16a.pam
why=""
"$GEN" --seed 7 45 31 4 16 - | "$GT" - - | "$GT" --op rot90 - piped.pam 2>err.txt ||
    why="pipeline failed: $(head -c 200 err.txt)"
if [ -z "$why" ]; then
    "$GT" src16a.pam t.pam && "$GT" --op rot90 t.pam chained.pam
    why=$(same piped.pam chained.pam) || true
fi
result pipe-across-processes "$why"

# Alpha and 16 bits survive a pipe: the stream between the tools is PAM with
# DEPTH 4 and MAXVAL 65535.
why=""
"$GT" --op flop src16a.pam - | "$GT" --op flop - - >roundtrip.pam 2>err.txt || why="pipeline failed"
if [ -z "$why" ]; then
    head -c 100 roundtrip.pam | grep -aq '^DEPTH 4$' || why="not DEPTH 4"
    head -c 100 roundtrip.pam | grep -aq '^MAXVAL 65535$' || why="${why:+$why, }not MAXVAL 65535"
    [ -z "$why" ] && { why=$(same roundtrip.pam src16a.pam) || true; }
fi
result pipe-keeps-alpha-and-16-bit "$why"

"$GEN" --seed 8 30 20 3 8 rgb.ppm
why=""
"$GT" --op rot90 - rot-stdin.ppm <rgb.ppm 2>err.txt || why="stdin input failed: $(head -c 200 err.txt)"
"$GT" --op rot90 rgb.ppm rot-file.ppm
[ -z "$why" ] && { why=$(same rot-stdin.ppm rot-file.ppm) || true; }
result stdin-input "$why"

# ---------------------------------------------------------- output formats

"$GEN" --seed 9 30 20 3 8 rgb8.pam
"$GEN" --seed 9 30 20 1 16 gray16.pam
"$GEN" --seed 9 30 20 2 8 graya.pam
"$GEN" --seed 9 30 20 4 8 rgba.pam
"$GEN" --seed 9 30 20 3 32 rgbf.pfm

fmt_check() { # NAME FILE WANT_HEX_PREFIX
    local got
    got=$(magic "$2" $((${#3} / 2)))
    result "$1" "$([ "$got" = "$3" ] || echo "starts with $got, expected $3")"
}

for spec in png:89504e470d0a1a0a jpg:ffd8ff bmp:424d hdr:233f pam:5037 ppm:5036 pnm:5036 pfm:5046; do
    ext=${spec%%:*}
    src=rgb8.pam
    [ "$ext" = pfm ] || [ "$ext" = hdr ] && src=rgbf.pfm
    if "$GT" --op flip "$src" "out.$ext" 2>err.txt; then
        fmt_check "format-by-extension-$ext" "out.$ext" "${spec#*:}"
    else
        fail "format-by-extension-$ext" "exit status $?: $(head -c 200 err.txt)"
    fi
done
# Extensions are case-insensitive.
"$GT" rgb8.pam OUT.PNG 2>err.txt && fmt_check format-extension-case OUT.PNG 89504e47 ||
    fail format-extension-case "failed: $(head -c 200 err.txt)"
# TGA has no magic number: check that it decodes to the same pixels.
why=""
"$GT" --op flip rgb8.pam out.tga 2>err.txt && "$GT" --op flip rgb8.pam flip.pam ||
    why="failed: $(head -c 200 err.txt)"
[ -z "$why" ] && { why=$(same out.tga flip.pam) || true; }
result format-by-extension-tga "$why"

for f in png:89504e47 jpg:ffd8ff bmp:424d pam:5037 ppm:5036; do
    ext=${f%%:*}
    if "$GT" -f "$ext" rgb8.pam - >stdout.bin 2>err.txt; then
        fmt_check "format-by-option-$ext-stdout" stdout.bin "${f#*:}"
    else
        fail "format-by-option-$ext-stdout" "exit status $?: $(head -c 200 err.txt)"
    fi
done
# -f wins over the extension.
"$GT" --format=png rgb8.pam weird.pam 2>err.txt && fmt_check format-option-beats-extension weird.pam 89504e47 ||
    fail format-option-beats-extension "failed: $(head -c 200 err.txt)"
"$GT" -fjpg rgb8.pam noext 2>err.txt && fmt_check format-option-no-extension noext ffd8ff ||
    fail format-option-no-extension "failed: $(head -c 200 err.txt)"
# An extension no codec writes is a usage error, before the input is read
# (a FIFO with no writer would block); -f names the format instead.
mkdir -p x
expect_fail format-unknown-extension-refused 2 x -- timeout 10 "$GT" rgb8.pam x/out.xyz
grep -q "'.xyz'" stderr.txt || fail format-unknown-extension-message "got: $(cat stderr.txt)"
"$GT" -f pnm rgb8.pam out.xyz 2>err.txt && fmt_check format-unknown-extension-with-f out.xyz 5036 ||
    fail format-unknown-extension-with-f "failed: $(head -c 200 err.txt)"

# The stdout default: PNM for 1 and 3 channels, PAM for 2 and 4.
for f in gray16.pam:5035 rgb8.pam:5036 graya.pam:5037 rgba.pam:5037; do
    src=${f%%:*}
    if "$GT" "$src" >stdout.bin 2>err.txt; then
        fmt_check "stdout-default-${src%.pam}" stdout.bin "${f#*:}"
    else
        fail "stdout-default-${src%.pam}" "exit status $?: $(head -c 200 err.txt)"
    fi
done
why=""
"$GT" gray16.pam >stdout.bin 2>err.txt || why="failed"
[ -z "$why" ] && { head -c 20 stdout.bin | grep -aq '65535' || why="16-bit gray did not stay 16-bit"; }
result stdout-default-keeps-16-bit "$why"

# -o FILE as the output; --png-level and --quality reach the encoder.
why=""
"$GT" --op rot90 -o o1.pam rgb8.pam 2>err.txt && "$GT" --op rot90 rgb8.pam o2.pam || why="failed"
[ -z "$why" ] && { why=$(same o1.pam o2.pam) || true; }
result dash-o-output "$why"

"$GEN" --pattern gradient 200 150 3 8 grad.ppm
why=""
"$GT" --png-level 0 grad.ppm l0.png 2>err.txt && "$GT" --png-level=12 grad.ppm l12.png ||
    why="failed: $(head -c 200 err.txt)"
if [ -z "$why" ]; then
    [ "$(wc -c <l0.png)" -gt "$(wc -c <l12.png)" ] || why="level 0 not larger than level 12"
    [ -z "$why" ] && { why=$(same l0.png l12.png) || true; }
fi
result png-level "$why"

why=""
"$GT" --quality 5 grad.ppm q5.jpg 2>err.txt && "$GT" --quality=100 grad.ppm q100.jpg ||
    why="failed: $(head -c 200 err.txt)"
[ -z "$why" ] && { [ "$(wc -c <q5.jpg)" -lt "$(wc -c <q100.jpg)" ] || why="quality 5 not smaller than 100"; }
result jpeg-quality "$why"

# An operand named like an option, after "--".
cp rgb8.pam ./-odd.pam
why=""
"$GT" --op flop -- -odd.pam -odd-out.pam 2>err.txt || why="failed: $(head -c 200 err.txt)"
[ -z "$why" ] && { [ -f ./-odd-out.pam ] || why="no output"; }
result double-dash-operands "$why"

# The same path as input and output: read fully before the output replaces it.
"$GT" --op rot90 rgb8.pam want-inplace.pam
cp rgb8.pam inplace.pam
why=""
"$GT" --op rot90 inplace.pam inplace.pam 2>err.txt || why="failed: $(head -c 200 err.txt)"
[ -z "$why" ] && { why=$(same inplace.pam want-inplace.pam) || true; }
result same-input-and-output "$why"

# Options after operands (GNU order) and bundled short flags.
why=""
"$GT" rgb8.pam after.pam --op rot90 -vq 2>err.txt || why="failed: $(head -c 200 err.txt)"
[ -z "$why" ] && { why=$(same after.pam want-inplace.pam) || true; }
result options-after-operands "$why"

# ------------------------------------------------ lossy writes, pages

# What an output format cannot hold is named in one warning a run, however
# many images lose it; -q silences it; a lossless write warns of nothing.
"$GEN" --seed 31 9 7 4 16 w1.pam
"$GEN" --seed 32 5 3 4 16 w2.pam
why=""
"$GT" -o 'w-%f.jpg' w1.pam w2.pam 2>err.txt || why="failed: $(head -c 200 err.txt)"
[ -z "$why" ] && [ "$(grep -c 'warning' err.txt)" -ne 1 ] && why="$(grep -c warning err.txt) warnings"
[ -z "$why" ] && { grep -q '^gtranspose: warning: JPEG output: alpha dropped, 16-bit samples narrowed to 8-bit' err.txt ||
    why="message: $(cat err.txt)"; }
result warn-lossy-once "$why"
why=""
"$GT" -q w1.pam w-quiet.jpg 2>err.txt || why="failed: $(head -c 200 err.txt)"
[ -z "$why" ] && [ -s err.txt ] && why="-q printed: $(cat err.txt)"
result warn-lossy-quiet "$why"
why=""
"$GT" w1.pam w-keep.png 2>err.txt && "$GT" w1.pam w-keep.tif 2>>err.txt || why="failed: $(head -c 200 err.txt)"
[ -z "$why" ] && [ -s err.txt ] && why="a lossless write warned: $(cat err.txt)"
result warn-none-when-lossless "$why"

# FILE[N] names image N of a multi-image file; single-image formats have
# only image 0; a file really named with brackets is that file.
"$GEN" --seed 33 6 4 3 8 p0.pam
"$GEN" --seed 34 6 4 3 8 p1.pam
"$GT" --op flip p0.pam pages0.tif && "$GT" --op flip p1.pam pages1.tif
why=""
if command -v tiffcp >/dev/null; then
    tiffcp pages0.tif pages1.tif pages.tif
    "$GT" --op flip 'pages.tif[1]' page1.pam 2>err.txt || why="failed: $(head -c 200 err.txt)"
    [ -z "$why" ] && { why=$(same page1.pam p1.pam) || true; }
    [ -z "$why" ] && { "$GT" -v 'pages.tif' page0.pam 2>err.txt; grep -q 'image 1 of 2' err.txt ||
        why="-v does not count the pages: $(cat err.txt)"; }
    result page-of-tiff "$why"
    expect_fail page-past-the-last 1 "" -- "$GT" 'pages.tif[2]' -
    grep -q '2 pages' stderr.txt || fail page-past-the-last-message "got: $(cat stderr.txt)"
else
    skip page-of-tiff "tiffcp is not installed"
fi
expect_fail page-of-single-image 1 "" -- "$GT" 'p0.pam[1]' -
grep -q 'one image' stderr.txt || fail page-of-single-image-message "got: $(cat stderr.txt)"
cp p1.pam 'odd[0]'
why=""
"$GT" --op flip 'odd[0]' odd-out.pam 2>err.txt && "$GT" --op flip odd-out.pam odd-back.pam ||
    why="failed: $(head -c 200 err.txt)"
[ -z "$why" ] && { why=$(same odd-back.pam p1.pam) || true; }
result page-brackets-in-a-name "$why"

# ------------------------------------------------------------------ errors

mkdir -p e
"$GEN" --seed 11 64 64 3 8 good.png
size=$(wc -c <good.png)
head -c $((size / 2)) good.png >trunc.png
head -c 40 good.png >trunc-header.png
# A broken zlib stream: the first bytes of the first IDAT's data set to 0xff.
cp good.png corrupt.png
idat=$(grep -obUa IDAT good.png | head -n 1 | cut -d: -f1)
printf '\377\377\377\377\377\377\377\377' | dd of=corrupt.png bs=1 seek=$((idat + 4)) conv=notrunc status=none
# An invalid bit depth (3) in IHDR.
cp good.png badihdr.png
printf '\003' | dd of=badihdr.png bs=1 seek=24 conv=notrunc status=none
printf 'P6\n10 10\n255\n' >trunc.ppm
head -c 150 /dev/zero >>trunc.ppm
printf 'P6\n-3 x\n255\n\001\002\003' >corrupt.ppm
printf 'P6\n2 2\n0\n\001\002\003\001\002\003\001\002\003\001\002\003' >maxval0.ppm
printf 'P6\n99999999999999999999 2\n255\n' >huge.ppm
printf 'GIF89a\001\000\001\000\200\000\000\000\000\000\377\377\377!\371\004\001\000\000\000\000,\000\000\000\000\001\000\001\000\000\002\002D\001\000;' >img.gif
printf 'not an image at all\n' >text.png
: >empty.png

expect_fail error-missing-file 1 e -- "$GT" missing.png e/out.png
expect_fail error-missing-file-stdout 1 "" -- "$GT" missing.png
expect_fail error-empty-file 1 e -- "$GT" empty.png e/out.png
expect_fail error-empty-stdin 1 e -- "$GT" - e/out.png </dev/null
expect_fail error-truncated-png 1 e -- "$GT" trunc.png e/out.png
expect_fail error-truncated-png-header 1 e -- "$GT" trunc-header.png e/out.png
expect_fail error-corrupt-png-data 1 e -- "$GT" corrupt.png e/out.png
expect_fail error-corrupt-png-ihdr 1 e -- "$GT" badihdr.png e/out.png
expect_fail error-truncated-ppm 1 e -- "$GT" trunc.ppm e/out.png
expect_fail error-corrupt-ppm 1 e -- "$GT" corrupt.ppm e/out.png
expect_fail error-ppm-maxval-0 1 e -- "$GT" maxval0.ppm e/out.png
expect_fail error-ppm-huge-size 1 e -- "$GT" huge.ppm e/out.png
# GIF is read (giflib), never written.
why=""
"$GT" img.gif e/gif.pam 2>err.txt || why="exit status $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { head -c 20 e/gif.pam | grep -q 'WIDTH 1' || why="not a 1x1 image"; }
rm -f e/gif.pam
result gif-reads "$why"
expect_fail error-not-an-image 1 e -- "$GT" text.png e/out.png
expect_fail error-input-is-directory 1 e -- "$GT" e e/out.png
expect_fail error-output-dir-missing 1 "" -- "$GT" rgb8.pam no/such/dir/out.png
expect_fail error-max-pixels 1 e -- "$GT" --max-pixels 599 rgb8.pam e/out.png
why=""
"$GT" --max-pixels 600 rgb8.pam e/ok.pam 2>err.txt || why="600 pixels refused with --max-pixels 600"
rm -f e/ok.pam
result max-pixels-limit-inclusive "$why"
expect_fail usage-gif-output 2 e -- "$GT" rgb8.pam e/out.gif
grep -q 'GIF' stderr.txt || fail usage-gif-output-says-gif "message does not name GIF: $(cat stderr.txt)"

# Usage errors: exit 2, before any input is read. The input is a FIFO with
# no writer: reading it would block, and timeout would give 124.
mkfifo fifo
expect_fail usage-unknown-option 2 e -- timeout 10 "$GT" --frob fifo e/out.png
grep -q "unknown option '--frob'" stderr.txt && grep -q "Try 'gtranspose --help'" stderr.txt ||
    fail usage-unknown-option-message "got: $(cat stderr.txt)"
expect_fail usage-unknown-short-option 2 e -- timeout 10 "$GT" -Z fifo e/out.png
expect_fail usage-bad-op 2 e -- timeout 10 "$GT" --op rot45 fifo e/out.png
expect_fail usage-op-missing-argument 2 e -- timeout 10 "$GT" fifo e/out.png --op
expect_fail usage-too-many-operands 2 e -- timeout 10 "$GT" fifo e/out.png e/extra.png
# No INPUT: standard input, here empty (at a terminal, a usage error: cli_conventions.sh).
expect_fail no-operand-reads-empty-stdin 1 e -- timeout 10 "$GT" --op flip </dev/null
expect_fail usage-output-twice 2 e -- timeout 10 "$GT" -o e/a.png fifo e/out.png
expect_fail usage-bad-quality 2 e -- timeout 10 "$GT" --quality 101 fifo e/out.jpg
expect_fail usage-quality-junk 2 e -- timeout 10 "$GT" --quality 9x fifo e/out.jpg
expect_fail usage-bad-png-level 2 e -- timeout 10 "$GT" --png-level=13 fifo e/out.png
expect_fail usage-bad-format 2 e -- timeout 10 "$GT" -f gif fifo e/out.gif
expect_fail usage-bad-device 2 e -- timeout 10 "$GT" --device tpu fifo e/out.png
expect_fail usage-bad-max-pixels 2 e -- timeout 10 "$GT" --max-pixels -1 fifo e/out.png
expect_fail usage-flag-with-value 2 e -- timeout 10 "$GT" --verbose=1 fifo e/out.png
expect_fail usage-bad-gimg-device 2 e -- timeout 10 env GIMG_DEVICE=bogus "$GT" fifo e/out.png

# An existing output is left untouched by a failure.
printf 'precious' >keep.png
for bad in trunc.png text.png missing.png; do
    "$GT" "$bad" keep.png >/dev/null 2>&1
    [ "$(cat keep.png)" = precious ] || { fail "error-keeps-existing-output-$bad" "keep.png changed"; continue; }
    pass "error-keeps-existing-output-$bad"
done
"$GT" --frob rgb8.pam keep.png >/dev/null 2>&1
result error-keeps-existing-output-usage "$([ "$(cat keep.png)" = precious ] || echo changed)"
[ -z "$(ls -A e)" ] || fail errors-leave-no-files "e/ holds: $(ls -A e | tr '\n' ' ')"

# A failed write to stdout is an error.
if [ -w /dev/full ]; then
    "$GT" rgb8.pam >/dev/full 2>stderr.txt
    rc=$?
    why=""
    [ "$rc" -eq 1 ] || why="exit status $rc"
    [ -z "$why" ] && { grep -q '^gtranspose: ' stderr.txt || why="no message"; }
    result error-write-dev-full "$why"
    "$GT" --help >/dev/full 2>stderr.txt
    rc=$?
    result error-help-dev-full "$([ "$rc" -eq 1 ] || echo "--help to a full disk gave $rc")"
else
    skip error-write-dev-full "/dev/full is not available"
fi

# --------------------------------------------------------- help, version

"$GT" --help >stdout.bin 2>stderr.txt
rc=$?
why=""
[ "$rc" -eq 0 ] || why="exit status $rc"
[ -z "$why" ] && { head -n 1 stdout.bin | grep -q '^Usage: gtranspose \[options\] INPUT \[OUTPUT\]$' || why="no usage line"; }
[ -z "$why" ] && [ -s stderr.txt ] && why="wrote to stderr"
for opt in --op -o --format --quality --png-level --device --max-pixels --verbose --quiet --help --version; do
    [ -z "$why" ] && { grep -q -- "$opt" stdout.bin || why="help lacks $opt"; }
done
result help "$why"
"$GT" -h >stdout2.bin 2>/dev/null
result help-short "$(cmp -s stdout.bin stdout2.bin || echo '-h differs from --help')"

"$GT" --version >stdout.bin 2>stderr.txt
rc=$?
why=""
[ "$rc" -eq 0 ] || why="exit status $rc"
[ -z "$why" ] && { grep -q '^gtranspose (gimg) [0-9]' stdout.bin || why="got: $(head -n 1 stdout.bin)"; }
[ -z "$why" ] && { grep -qi cuda stdout.bin || why="does not say whether CUDA is built in"; }
result version "$why"

# ----------------------------------------------------------------- devices

"$GT" --op rot90 rgb8.pam dev-auto.pam
why=""
"$GT" --op rot90 --device cpu rgb8.pam dev-cpu.pam 2>err.txt || why="failed: $(head -c 200 err.txt)"
[ -z "$why" ] && { why=$(same dev-cpu.pam dev-auto.pam) || true; }
result device-cpu "$why"
why=""
GIMG_DEVICE=cpu "$GT" --op rot90 rgb8.pam dev-env.pam 2>err.txt || why="failed: $(head -c 200 err.txt)"
[ -z "$why" ] && { why=$(same dev-env.pam dev-auto.pam) || true; }
result device-env-cpu "$why"
why=""
GIMG_DEVICE=bogus "$GT" --device cpu --op rot90 rgb8.pam dev-opt.pam 2>err.txt ||
    why="--device did not override GIMG_DEVICE: $(head -c 200 err.txt)"
result device-option-beats-env "$why"

if "$GT" --version | grep -q 'not built in'; then
    expect_fail device-gpu-without-cuda 1 e -- "$GT" --device gpu rgb8.pam e/out.pam
    grep -qi 'gpu' stderr.txt || fail device-gpu-message "message does not mention the GPU: $(cat stderr.txt)"
elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    skip device-gpu-without-gpu "this machine has a GPU"
    # With a GPU, --device gpu must work and agree with the CPU.
    why=""
    "$GT" --op rot90 --device gpu rgb8.pam dev-gpu.pam 2>err.txt || why="failed: $(head -c 200 err.txt)"
    [ -z "$why" ] && { why=$(same dev-gpu.pam dev-auto.pam) || true; }
    result device-gpu "$why"
else
    expect_fail device-gpu-without-gpu 1 e -- "$GT" --device gpu rgb8.pam e/out.pam
    grep -qi 'gpu' stderr.txt || fail device-gpu-message "message does not mention the GPU: $(cat stderr.txt)"
    expect_fail device-gpu-env-without-gpu 1 e -- env GIMG_DEVICE=gpu "$GT" rgb8.pam e/out.pam
fi

# -v reports the backend on stderr; stdout carries the image alone.
"$GT" --op flip rgb8.pam >quiet.bin 2>/dev/null
why=""
"$GT" -v --op flip rgb8.pam >verbose.bin 2>stderr.txt || why="failed: $(head -c 200 stderr.txt)"
[ -z "$why" ] && { grep -q '^gtranspose: .*backend' stderr.txt || why="no backend line on stderr: $(head -c 300 stderr.txt)"; }
[ -z "$why" ] && { cmp -s quiet.bin verbose.bin || why="-v changed stdout"; }
result verbose "$why"

# --------------------------------------------------------------- signals

# SIGTERM while the output is being written must leave no temporary file.
# Best effort: the output is large enough for the write to take a while, and
# the test polls for the temporary file to appear; if it never catches the
# write in progress it skips.
if "$GEN" --seed 5 3000 3000 4 8 big.pam 2>/dev/null; then
    caught=""
    for _ in 1 2 3; do
        rm -rf sig && mkdir sig
        "$GT" big.pam sig/out.pam 2>/dev/null &
        pid=$!
        while kill -0 "$pid" 2>/dev/null; do
            if [ -n "$(ls -A sig)" ] && [ ! -e sig/out.pam ]; then
                kill -TERM "$pid" 2>/dev/null && caught=yes
                break
            fi
        done
        wait "$pid" 2>/dev/null
        [ -n "$caught" ] && break
    done
    if [ -z "$caught" ]; then
        skip sigterm-leaves-no-temp "could not catch a write in progress"
    else
        left=$(ls -A sig | grep -vx out.pam)
        why=""
        [ -z "$left" ] || why="left behind: $left"
        # If the rename won the race, the output must be complete.
        [ -z "$why" ] && [ -e sig/out.pam ] && { "$GT" --op transpose big.pam full.pam && why=$(same sig/out.pam full.pam) || true; }
        result sigterm-leaves-no-temp "$why"
    fi
    rm -f big.pam full.pam
else
    skip sigterm-leaves-no-temp "could not make a large image"
fi

# ------------------------------------------------------------ ImageMagick

if command -v convert >/dev/null 2>&1 && convert -version 2>/dev/null | grep -q ImageMagick; then
    "$GEN" --seed 21 23 17 3 8 im-rgb.ppm
    "$GEN" --seed 22 19 13 1 16 im-gray16.pgm
    "$GEN" --seed 23 17 11 4 8 im-rgba.png
    for op in $OPS; do
        case $op in
            rot90) imop="-rotate 90" ;; rot180) imop="-rotate 180" ;; rot270) imop="-rotate 270" ;;
            *) imop="-$op" ;;
        esac
        for src in im-rgb.ppm im-gray16.pgm im-rgba.png; do
            ext=${src##*.}
            name="imagemagick-$op-${src%.*}"
            why=""
            # PNG32: keeps ImageMagick from choosing a palette or gray PNG.
            imout=im-$op.$ext
            [ "$ext" = png ] && imout=PNG32:$imout
            convert "$src" $imop "$imout" 2>err.txt || why="convert failed: $(head -c 200 err.txt)"
            [ -z "$why" ] && { "$GT" --op "$op" "$src" "gt-$op.$ext" 2>err.txt || why="gtranspose failed: $(head -c 200 err.txt)"; }
            [ -z "$why" ] && { why=$(same "gt-$op.$ext" "im-$op.$ext") || true; }
            result "$name" "$why"
        done
    done
else
    skip imagemagick "convert (ImageMagick) is not installed"
fi

exit $failed
