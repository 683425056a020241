#!/usr/bin/env bash
# tests/cli_gpu_bands.sh — gconv's large images on the GPU (gimg(7) LARGE
# IMAGES): an image read in bands is convolved band by band on the GPU
# when ctx chooses it (--device gpu), and an image over the GPU's memory
# (GIMG_GPU_MEM_LIMIT) or taller than its kernels' grids (65535 rows) is
# convolved by sub-images there (lib/conv.c); either way the file is the
# CPU's, byte for byte, and -v says the GPU ran. Needs a CUDA build and a
# GPU: skips otherwise; its name matches run-gpu.sh's tests/cli_g*.sh, so
# `make test-gpu` runs it. One PASS/FAIL/SKIP line per test; BIN and BUILD
# as in cli_lib.sh.
TOOL=gconv
. "$(dirname "$0")/cli_lib.sh"
# The tool's own CUDA context computes bands (the server takes whole
# images only).
export GIMG_SERVER=off

need_cuda_gpu gpu-bands

"$GEN" --seed 1 301 203 3 8 rgb8.ppm &&
    "$GEN" --seed 2 97 61 1 16 gray16.pgm &&
    "$GEN" --seed 3 45 37 4 16 rgba16.pam &&
    "$GEN" --seed 4 53 41 2 8 ga8.pam &&
    "$GEN" --seed 5 64 29 3 32 rgbf.pfm &&
    "$GEN" --seed 6 -f png 131 77 3 8 rgb8.png ||
    { fail setup "gen failed"; exit 1; }
INPUTS="rgb8.ppm gray16.pgm rgba16.pam ga8.pam rgbf.pfm rgb8.png"

# ran_on_gpu FILE: -v's lines say the GPU computed, and nothing fell back.
ran_on_gpu() { grep -q 'backend: gpu' "$1" && ! grep -q 'CPU instead' "$1"; }

# bands_same NAME OPTIONS: each input's output, in bands of 1, 7 and the
# height - 1 rows on the GPU, is the CPU's whole-image file.
bands_same() {
    local name=$1 opts=$2 f h rows ext why=""
    for f in $INPUTS; do
        ext=${f##*.}
        h=$("$BIN/gstats" --json -s count "$f" | sed -n 's/.*"height": \([0-9]*\).*/\1/p')
        "$PROG" --device cpu $opts "$f" "cpu.$ext" 2>err.txt ||
            { why="$f on the CPU: exit $?: $(head -c 200 err.txt)"; break; }
        for rows in 1 7 $((h - 1)); do
            rm -f "gpu.$ext"
            "$PROG" --device gpu -v --band-rows "$rows" $opts "$f" "gpu.$ext" 2>err.txt ||
                { why="$f --band-rows $rows: exit $?: $(head -c 200 err.txt)"; break 2; }
            grep -q "read in [0-9]* bands of $rows rows" err.txt && ran_on_gpu err.txt ||
                { why="$f --band-rows $rows: -v: $(tr '\n' '|' <err.txt | head -c 300)"; break 2; }
            cmp -s "cpu.$ext" "gpu.$ext" ||
                { why="$f --band-rows $rows: differs from the CPU's"; break 2; }
        done
    done
    result "$name" "$why"
}
bands_same bands-gaussian "-k gaussian:2"
bands_same bands-dense-mirror "-k 1,2,3;4,5,6;7,8,9;1,1,1;0,2,0 --border mirror --alpha keep"
bands_same bands-chain-zero "-k box:3 -k sobel --border zero --alpha include"
bands_same bands-reflect-scaled "-k unsharp:2:1.5 --border reflect --scale 0.5 --bias 7"

# Whole images over GIMG_GPU_MEM_LIMIT: rgb8.ppm's two device images take
# 912 x 203 bytes each (rows padded to 16 bytes), 370272 together, the
# float images of a chain four times that; 200000 bytes hold sub-images of
# some dozens of rows. The GPU computes it, by sub-images.
for spec in "-k gaussian:2" "-k 1,2,3;4,5,6;7,8,9 --border mirror" \
    "-k box:5 -k 1;2;3;4;5;6;7 --border clamp"; do
    why=""
    "$PROG" --device cpu $spec rgb8.ppm cpu.ppm
    GIMG_GPU_MEM_LIMIT=200000 "$PROG" --device gpu -v $spec rgb8.ppm gpu.ppm 2>err.txt ||
        why="exit $?: $(head -c 200 err.txt)"
    [ -z "$why" ] && { ran_on_gpu err.txt || why="-v: $(tr '\n' '|' <err.txt | head -c 300)"; }
    [ -z "$why" ] && { cmp -s cpu.ppm gpu.ppm || why="differs from the CPU's"; }
    result "sub-images-under-limit ($spec)" "$why"
done

# Taller than the kernels' grids take (65535 rows): by sub-images, whole or
# in bands; the wrap border, whose rows need the far edge, on the CPU.
"$GEN" --seed 7 3 70001 1 8 tall.pgm || fail setup "tall.pgm"
for spec in "-k gaussian:3" "-k 1,1,1;2,2,2;3,3,3;4,4,4 --border reflect" "-k box:2 -k sobel"; do
    why=""
    "$PROG" --device cpu $spec tall.pgm cpu.pgm
    for bands in "" "--band-rows 40000"; do
        "$PROG" --device gpu -v $bands $spec tall.pgm gpu.pgm 2>err.txt ||
            { why="$bands exit $?: $(head -c 200 err.txt)"; break; }
        ran_on_gpu err.txt || { why="$bands -v: $(tr '\n' '|' <err.txt | head -c 300)"; break; }
        cmp -s cpu.pgm gpu.pgm || { why="$bands differs from the CPU's"; break; }
    done
    result "taller-than-grid ($spec)" "$why"
done
expect_fail wrap-taller-than-grid 1 "" -- "$PROG" --device gpu -k box:1 --border wrap tall.pgm out.pgm
grep -q "65535" stderr.txt || fail wrap-taller-than-grid-message "got: $(head -c 200 stderr.txt)"

exit $failed
