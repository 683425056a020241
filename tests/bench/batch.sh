#!/usr/bin/env bash
# tests/bench/batch.sh — `make bench-batch`: many images in one process, the
# benchmark of the batch pipeline (lib/driver.c). BATCH_IMAGES photo-like
# JPEGs of 1200x850 (about 1 MP; default 500) through
#   gconv -k gaussian:2 -o out/ *.jpg
# with --device gpu (when there is a GPU) and --device cpu, and the same
# batch through a 1x1 identity kernel on the CPU: decoding and encoding
# alone, the floor that the GPU path should come within 20% of (its GPU
# work hidden behind the CPU codecs). Prints images/s, megapixels/s and
# the ratios, then the GPU run's per-stage times (-v); on a machine with
# several GPUs, the batch again with --device gpu:all. Every output of a
# GPU run must equal the CPU run's, byte for byte, or the benchmark fails.
set -u
cd "$(dirname "$0")/../.."
BIN=${BIN:-bin}
BUILD=${BUILD:-build}
N=${BATCH_IMAGES:-500}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/in"

# Photo-like load for the codecs: blurred noise, its contrast stretched
# back, about 230 KB a megapixel at quality 90, as photos are; eight
# different ones, copied to N names (decoding does the same work each time).
for s in 1 2 3 4 5 6 7 8; do
    "$BUILD"/tests/gen --seed "$s" 1200 850 3 8 - |
        "$BIN"/gconv --device cpu -k gaussian:6 --scale 16 --bias -1912 - "$tmp/base$s.jpg" ||
        exit 1
done
for i in $(seq 1 "$N"); do
    cp "$tmp/base$(((i - 1) % 8 + 1)).jpg" "$tmp/in/photo$i.jpg"
done
mp=$(awk -v n="$N" 'BEGIN { printf "%.1f", n * 1200 * 850 / 1e6 }')

# run NAME ARGS...: the batch into $tmp/NAME/, wall time in ms on stdout,
# -v's report in $tmp/NAME.err.
run() {
    local name=$1 t0 t1
    shift
    rm -rf "${tmp:?}/$name"
    t0=$(date +%s%N)
    "$BIN"/gconv -v "$@" -o "$tmp/$name/" "$tmp"/in/*.jpg 2>"$tmp/$name.err" || {
        cat "$tmp/$name.err" >&2
        return 1
    }
    t1=$(date +%s%N)
    echo $(((t1 - t0) / 1000000))
}

have_gpu=0
if "$BIN"/gconv --version | grep -q CUDA && command -v nvidia-smi >/dev/null &&
    nvidia-smi -L >/dev/null 2>&1; then
    have_gpu=1
fi

codec_ms=$(run codec --device cpu -k '1') || exit 1
cpu_ms=$(run cpu --device cpu -k gaussian:2) || exit 1
echo "Batch: $N JPEGs of 1200x850 ($mp MP), gconv -k gaussian:2 -o DIR/, $(nproc) cores"
rate() { awk -v n="$N" -v mp="$mp" -v ms="$2" 'BEGIN { printf "  %-28s %8d ms %8.1f images/s %8.1f MP/s\n", "'"$1"'", ms, n * 1000 / ms, mp * 1000 / ms }'; }
rate "decode+encode (1x1, cpu)" "$codec_ms"
rate "--device cpu" "$cpu_ms"
if [ $have_gpu -eq 1 ]; then
    gpu_ms=$(run gpu --device gpu -k gaussian:2) || exit 1
    rate "--device gpu" "$gpu_ms"
    if ! diff -r -q "$tmp/cpu" "$tmp/gpu" >/dev/null; then
        echo "bench-batch: the GPU batch's outputs differ from the CPU's"
        exit 1
    fi
    awk -v c="$cpu_ms" -v g="$gpu_ms" -v f="$codec_ms" 'BEGIN {
        printf "  GPU path: %.2fx the CPU path (target 3x); %.2f of the codecs alone (target <= 1.20)\n", c / g, g / f }'
    echo "  the GPU run's stages (-v):"
    sed 's/^/    /' "$tmp/gpu.err" | grep -E 'time|images/s|backend' | head -5
    # Several GPUs: the batch spread over all of them, the same outputs.
    if [ "$(nvidia-smi -L | grep -c '^GPU')" -gt 1 ]; then
        all_ms=$(run gpuall --device gpu:all -k gaussian:2) || exit 1
        rate "--device gpu:all" "$all_ms"
        if ! diff -r -q "$tmp/cpu" "$tmp/gpuall" >/dev/null; then
            echo "bench-batch: the gpu:all batch's outputs differ from the CPU's"
            exit 1
        fi
        sed 's/^/    /' "$tmp/gpuall.err" | grep -E 'backend' | head -8
    fi
else
    echo "  --device gpu: no CUDA GPU here: skipped"
    echo "  the CPU run's stages (-v):"
    sed 's/^/    /' "$tmp/cpu.err" | grep -E 'time|images/s' | head -5
fi
