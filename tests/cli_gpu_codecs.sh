#!/usr/bin/env bash
# tests/cli_gpu_codecs.sh — the GPU codecs (lib/gpu_jpeg.h) as the tools use
# them: --codecs and GIMG_CODECS (everywhere); then, on a CUDA build with a
# GPU, JPEG batches through gconv and gtranspose on the GPU: outputs within
# gimg(7)'s bound of the CPU path's, --codecs cpu byte-identical to
# --device cpu, metadata kept, a batch with cut, progressive, CMYK and 4:1:1
# JPEGs mixed in (the cut one reported by name, exit 1, the others written,
# -v naming libjpeg-turbo for them; gen makes the CMYK and 4:1:1 files),
# PNG to JPEG, out of GPU memory, large photos then small ones in one
# batch, and libnvjpeg missing (the CPU codecs, the same bytes as --codecs
# cpu). run-gpu.sh runs it with
# GIMG_CODECS=cpu like every suite: each command here names its codecs.
TOOL=gconv
. "$(dirname "$0")/cli_lib.sh"
# The tools' own CUDA context is what this suite tests (its -v lines, its
# memory): never the server's (tests/cli_server.sh, and tests/bench/server.sh
# for the server's GPU against the tools' own).
export GIMG_SERVER=off
TRANSPOSE=$BIN/gtranspose
GSTATS=$BIN/gstats

# ------------------------------------------------------ options (any build)

"$GEN" --seed 1 -f png 40 30 3 8 small.png
why=""
"$PROG" --codecs cpu -k box:1 small.png out.png 2>err.txt || why="--codecs cpu: $(cat err.txt)"
[ -z "$why" ] && { GIMG_CODECS=cpu "$PROG" -k box:1 small.png out2.png 2>err.txt ||
    why="GIMG_CODECS=cpu: $(cat err.txt)"; }
[ -z "$why" ] && { cmp -s out.png out2.png || why="GIMG_CODECS=cpu changed the output"; }
result codecs-option "$why"

# bad values: usage errors (2) naming the option, no output
expect_fail codecs-bad-value 2 "" -- "$PROG" --codecs gpuish -k box:1 small.png bad.png
expect_fail codecs-bad-env 2 "" -- env GIMG_CODECS=fast "$PROG" -k box:1 small.png bad.png
grep -q "GIMG_CODECS" stderr.txt && pass codecs-bad-env-named ||
    fail codecs-bad-env-named "$(cat stderr.txt)"
# --codecs given beats GIMG_CODECS
GIMG_CODECS=fast "$PROG" --codecs auto -k box:1 small.png ok.png 2>err.txt
result codecs-option-beats-env "$([ $? -eq 0 ] || cat err.txt)"

if ! "$PROG" --version | grep -q 'CUDA'; then
    skip gpu-codecs "this build has no CUDA support"
    exit $failed
fi
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    skip gpu-codecs "no CUDA GPU"
    exit $failed
fi

# ------------------------------------------------------------ GPU codecs

# The bound gimg(7) states for JPEG through the GPU codecs against the CPU
# path (tests/gpudiff_jpeg.c holds the decoder alone to it): PSNR in dB.
MIN_PSNR=42

# Photo-like JPEGs (blurred noise, stretched back) of every subsampling
# the GPU decodes, and odd sizes.
photo() { # photo SEED W H SUBSAMPLING FILE [CHANNELS]
    "$GEN" --seed "$1" "$2" "$3" "${6:-3}" 8 - |
        "$PROG" --device cpu -k gaussian:3 --scale 9 --bias -1024 - tmp.ppm &&
        "$PROG" --device cpu -k box:0 --jpeg-subsampling "$4" tmp.ppm "$5"
}
mkdir -p in
photo 1 640 480 420 in/a420.jpg && photo 2 333 251 422 in/b422.jpg &&
    photo 3 17 9 444 in/c444.jpg && photo 4 4097 3 420 in/d4097.jpg &&
    photo 5 1 1 444 in/e1x1.jpg && photo 6 300 200 444 in/f-gray.jpg 1 || fail setup "photos"

# within_bound NAME A B: gstats says A and B are within MIN_PSNR (the
# lowest PSNR seen is kept in lowest.txt, printed at the end).
within_bound() {
    local out
    out=$("$GSTATS" --device cpu --compare "$2" -s psnr "$3" 2>&1)
    echo "$out $1" >>psnrs.txt
    awk -v p="$out" -v m="$MIN_PSNR" 'BEGIN { exit !(p == "inf" || p + 0 >= m) }' ||
        { echo "$1: PSNR $out dB against the CPU path (bound $MIN_PSNR)"; return 1; }
}

for tool in gconv gtranspose; do
    args=(-k gaussian:2)
    [ $tool = gtranspose ] && args=(--op rot90)
    rm -rf cpu gpu gpucpu
    "$BIN/$tool" --device cpu "${args[@]}" -o cpu/ in/*.jpg 2>err.txt || fail "$tool-cpu" "$(cat err.txt)"
    "$BIN/$tool" --device gpu --codecs auto -v "${args[@]}" -o gpu/ in/*.jpg 2>gpu.err
    rc=$?
    why=""
    [ $rc -eq 0 ] || why="exit $rc: $(head -c 300 gpu.err)"
    [ -z "$why" ] && { grep -q 'codecs: nvJPEG.*on the GPU.*6 JPEGs decoded, 6 encoded' gpu.err ||
        why="-v: $(grep codecs gpu.err | tr '\n' ' ')"; }
    for f in in/*.jpg; do
        b=${f##*/}
        [ -z "$why" ] && { [ "$(magic "gpu/$b" 2)" = ffd8 ] || why="$b: not a JPEG"; }
        [ -z "$why" ] && why=$(within_bound "$b" "cpu/$b" "gpu/$b")
    done
    result "$tool-gpu-codecs-within-bound" "$why"
    "$BIN/$tool" --device gpu --codecs cpu "${args[@]}" -o gpucpu/ in/*.jpg 2>err.txt
    why=""
    diff -r -q cpu gpucpu >/dev/null || why="--codecs cpu on the GPU differs from --device cpu"
    result "$tool-codecs-cpu-identical" "$why"
done

# Metadata: EXIF (with its orientation), ICC profile and resolution kept
# through the GPU's encoder, as the CPU path keeps them.
if command -v exiftool >/dev/null 2>&1; then
    cp in/a420.jpg meta.jpg
    exiftool -q -overwrite_original -Orientation#=6 -XResolution=300 -YResolution=300 \
        -ResolutionUnit=inches -Artist='gimg test' meta.jpg
    "$PROG" --device cpu -k box:1 meta.jpg meta-cpu.jpg
    "$PROG" --device gpu --codecs auto -k box:1 meta.jpg meta-gpu.jpg 2>err.txt
    why=""
    for tag in Orientation Artist XResolution; do
        a=$(exiftool -s3 -n -"$tag" meta-cpu.jpg)
        g=$(exiftool -s3 -n -"$tag" meta-gpu.jpg)
        [ -n "$a" ] && [ "$a" = "$g" ] || why="$why $tag: cpu '$a' gpu '$g'"
    done
    result gpu-codecs-metadata "$why"
else
    skip gpu-codecs-metadata "exiftool not installed"
fi

# A mixed batch: the cut file is reported by name and the batch goes on;
# progressive, CMYK and 4:1:1 files go to libjpeg-turbo.
mkdir -p mixed
cp in/a420.jpg in/b422.jpg mixed/
head -c 3000 in/a420.jpg >mixed/cut.jpg
"$PROG" --device cpu -k box:0 --progressive in/b422.jpg mixed/progressive.jpg
"$GEN" --seed 7 --jpeg-coding cmyk 320 200 3 8 mixed/cmyk.jpg
"$GEN" --seed 8 --jpeg-coding 411 320 200 3 8 mixed/s411.jpg
n_mixed=$(ls mixed | wc -l)
rm -rf mcpu mgpu
"$PROG" --device cpu -k gaussian:1 -o mcpu/ mixed/*.jpg 2>cpu.err
cpu_rc=$?
"$PROG" --device gpu --codecs auto -v -k gaussian:1 -o mgpu/ mixed/*.jpg 2>gpu.err
rc=$?
why=""
[ $rc -eq 1 ] && [ $cpu_rc -eq 1 ] || why="exit $rc (the CPU's $cpu_rc), expected 1"
[ -z "$why" ] && { grep -q '^gconv: mixed/cut.jpg: .*JPEG' gpu.err ||
    why="the cut file is not reported: $(grep -v '^gconv: \(time\|backend\|codecs\|gpu\)' gpu.err | head -3)"; }
[ -z "$why" ] && { [ "$(ls mgpu | wc -l)" -eq $((n_mixed - 1)) ] ||
    why="$(ls mgpu | wc -l) outputs of $((n_mixed - 1))"; }
[ -z "$why" ] && { grep -q 'codecs: libjpeg-turbo for 4 JPEGs' gpu.err ||
    why="-v: $(grep 'codecs: libjpeg' gpu.err)"; }
for f in mgpu/*.jpg; do
    [ -z "$why" ] && why=$(within_bound "$f" "mcpu/${f##*/}" "$f")
done
result gpu-codecs-mixed-batch "$why"

# PNG in, JPEG out: encoded on the GPU; JPEG in, PNG out: decoded there.
"$GEN" --seed 9 -f png 500 400 3 8 p.png
"$PROG" --device cpu -k gaussian:1 p.png p-cpu.jpg
"$PROG" --device gpu --codecs auto -v -k gaussian:1 p.png p-gpu.jpg 2>err.txt
why=$(within_bound png-to-jpeg p-cpu.jpg p-gpu.jpg)
[ -z "$why" ] && { grep -q '0 JPEGs decoded, 1 encoded' err.txt || why="-v: $(grep codecs err.txt)"; }
"$PROG" --device cpu -k gaussian:1 in/a420.jpg j-cpu.png
"$PROG" --device gpu --codecs auto -v -k gaussian:1 in/a420.jpg j-gpu.png 2>err.txt
[ -z "$why" ] && why=$(within_bound jpeg-to-png j-cpu.png j-gpu.png)
[ -z "$why" ] && { grep -q '1 JPEG decoded, 0 encoded' err.txt || why="-v: $(grep codecs err.txt)"; }
result gpu-codecs-other-formats "$why"

# Samples below the full range (a PGM of maxval 100) are rescaled before
# any JPEG encoder sees them: the CPU's encodes them, the CPU path's bytes.
"$GEN" --seed 4 300 200 1 8 - | "$PROG" --device cpu -k box:0 - full.pgm
{ printf 'P5\n300 200\n100\n'; tail -c 60000 full.pgm | tr '\145-\377' '\000-\144'; } >m100.pgm
"$PROG" --device cpu -k gaussian:1 m100.pgm m100-cpu.jpg
"$PROG" --device gpu --codecs auto -v -k gaussian:1 m100.pgm m100-gpu.jpg 2>err.txt
why=""
cmp -s m100-cpu.jpg m100-gpu.jpg || why="differs from --device cpu: $(grep codecs err.txt)"
result gpu-codecs-maxval-below-full "$why"

# --device gpu starts nvJPEG only for a job that may hold a JPEG: a PPM to
# a PNG pays CUDA's start-up alone; a JPEG output, or an input whose name
# says no format, starts it.
why=""
"$PROG" --device gpu --codecs auto -v -k gaussian:1 full.pgm n.png 2>err.txt || why="exit $?"
[ -z "$why" ] && { grep -q 'start-up [0-9]* ms (CUDA)$' err.txt && ! grep -q nvJPEG err.txt ||
    why="PNM to PNG: $(grep -E 'start-up|nvJPEG' err.txt | tr '\n' ' ')"; }
cp full.pgm noext
for job in "full.pgm n.jpg" "noext n.png"; do
    [ -z "$why" ] && { "$PROG" --device gpu --codecs auto -v -k gaussian:1 $job 2>err.txt &&
        grep -q 'start-up [0-9]* ms (CUDA and nvJPEG)$' err.txt ||
        why="$job: $(grep -E 'start-up|nvJPEG' err.txt | tr '\n' ' ')"; }
done
result gpu-codecs-only-for-jpeg-jobs "$why"

# Out of GPU memory (GIMG_GPU_MEM_LIMIT, which counts nvJPEG's buffers
# too): at once (no room for nvJPEG, or to decode a 640x480 photo, 921600
# bytes), and later (room for the decoded photo, not for nvJPEG's buffers
# or the convolution's beside it: whatever fails on the GPU, the image is
# decoded again by libjpeg-turbo and convolved on the CPU). Either way the
# CPU path's bytes, and -v says so.
"$PROG" --device cpu -k gaussian:2 in/a420.jpg oom-cpu.jpg
for limit in 1000 1000000; do
    GIMG_GPU_MEM_LIMIT=$limit "$PROG" --device gpu --codecs auto -v -k gaussian:2 in/a420.jpg \
        oom.jpg 2>err.txt
    rc=$?
    why=""
    [ $rc -eq 0 ] || why="exit $rc: $(head -c 300 err.txt)"
    [ -z "$why" ] && { cmp -s oom.jpg oom-cpu.jpg || why="differs from --device cpu"; }
    [ -z "$why" ] && { grep -q 'libjpeg-turbo for 1 JPEG (the last: .*GIMG_GPU_MEM_LIMIT' err.txt ||
        why="-v: $(grep codecs err.txt | tr '\n' ' ')"; }
    result "gpu-codecs-out-of-memory-$limit" "$why"
done

# --device auto: the GPU's codecs when a batch's JPEG pays for their
# start-up against the CPU threads it has (-j), else the CPU's, with the
# CPU path's bytes; -v says which and why. Four photos of 12 MP on one
# thread pay; two small ones on all threads do not. The cost table is the
# built-in one, injected: what this machine measured while other suites
# and the sanitizer ran beside this one once put the GPU's start-up at
# 1.8 s against the CPU's 1.4 s for these photos (stop 49).
cat >codecs.cost <<'EOF'
cuda_start_ms 350
nvjpeg_start_ms 650
jpeg_cpu_ms_per_mp 29
jpeg_gpu_ms_per_mp 0.45
EOF
export GIMG_COST_TABLE=$PWD/codecs.cost
mkdir -p auto small
photo 10 4096 3000 420 auto/x1.jpg || fail setup "a 12 MP photo"
for i in 2 3 4; do cp auto/x1.jpg auto/x$i.jpg; done
cp in/a420.jpg small/1.jpg && cp in/b422.jpg small/2.jpg
rm -rf acpu agpu scpu sauto
"$PROG" --device cpu -k gaussian:1 -o acpu/ auto/*.jpg 2>err.txt || fail auto-cpu "$(cat err.txt)"
"$PROG" --device auto --codecs auto -j 1 -v -k gaussian:1 -o agpu/ auto/*.jpg 2>err.txt
rc=$?
why=""
[ $rc -eq 0 ] || why="exit $rc: $(head -c 300 err.txt)"
[ -z "$why" ] && { grep -q "codecs: --device auto: the GPU's codecs" err.txt &&
    grep -q '4 JPEGs decoded, 4 encoded' err.txt || why="-v: $(grep codecs err.txt | tr '\n' ' ')"; }
for f in agpu/x1.jpg agpu/x4.jpg; do
    [ -z "$why" ] && why=$(within_bound "$f" "acpu/${f##*/}" "$f")
done
result gpu-codecs-auto-large-batch "$why"
"$PROG" --device cpu -k gaussian:1 -o scpu/ small/*.jpg 2>err.txt || fail auto-cpu "$(cat err.txt)"
"$PROG" --device auto --codecs auto -v -k gaussian:1 -o sauto/ small/*.jpg 2>err.txt
why=""
diff -r -q scpu sauto >/dev/null || why="differs from --device cpu"
[ -z "$why" ] && { grep -q "codecs: --device auto: the CPU's codecs" err.txt ||
    why="-v: $(grep codecs err.txt | tr '\n' ' ')"; }
result gpu-codecs-auto-small-batch "$why"
unset GIMG_COST_TABLE

# Large photos first, then small ones, in one batch: the lanes' buffers
# and nvJPEG's, grown for the large, serve the small (a change of the GPU
# memory once hung a server here: tests/bench/RESULTS.md, stop 49).
mkdir -p bigsmall
cp auto/x1.jpg bigsmall/a1.jpg && cp auto/x1.jpg bigsmall/a2.jpg || fail setup "large and small photos"
for i in $(seq 10 49); do cp in/a420.jpg "bigsmall/b$i.jpg"; cp in/b422.jpg "bigsmall/c$i.jpg"; done
rm -rf mcpu mgpu
"$PROG" --device cpu -k gaussian:1 -o mcpu/ bigsmall/*.jpg 2>err.txt || fail bigsmall-cpu "$(cat err.txt)"
timeout 120 "$PROG" --device gpu --codecs auto -v -k gaussian:1 -o mgpu/ bigsmall/*.jpg 2>err.txt
rc=$?
why=""
[ $rc -eq 0 ] || why="exit $rc (124: it did not end): $(head -c 300 err.txt)"
[ -z "$why" ] && { grep -q '82 JPEGs decoded, 82 encoded' err.txt ||
    why="-v: $(grep codecs err.txt | tr '\n' ' ')"; }
for f in a1 b10 c49; do
    [ -z "$why" ] && why=$(within_bound "bigsmall $f" "mcpu/$f.jpg" "mgpu/$f.jpg")
done
result gpu-codecs-large-then-small "$why"

# libnvjpeg missing: the CPU codecs, the same bytes as --codecs cpu.
GIMG_NVJPEG_LIBRARY=/nonexistent/libnvjpeg.so "$PROG" --device gpu --codecs auto -v -k gaussian:2 \
    in/a420.jpg nolib.jpg 2>err.txt
"$PROG" --device gpu --codecs cpu -k gaussian:2 in/a420.jpg cpucodecs.jpg
why=""
cmp -s nolib.jpg cpucodecs.jpg || why="differs from --codecs cpu"
[ -z "$why" ] && { grep -q 'no GPU codecs: libnvjpeg was not found' err.txt ||
    why="-v: $(grep codecs err.txt)"; }
result gpu-codecs-library-missing "$why"

[ -f psnrs.txt ] && echo "lowest PSNR against the CPU path: $(grep -v '^inf' psnrs.txt | sort -g | head -1)"
exit $failed
