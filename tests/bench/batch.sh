#!/usr/bin/env bash
# tests/bench/batch.sh — `make bench-batch`: many images in one process, the
# benchmark of the batch pipeline (lib/driver.c). BATCH_IMAGES photo-like
# JPEGs of 1200x850 (about 1 MP; default 2500, a folder of photos: the
# GPU's start-up, about a second, is paid once a process) through
#   gconv -k gaussian:2 -o out/ *.jpg
# with --device cpu, the same batch through a 1x1 identity kernel on the
# CPU (decoding and encoding alone), and where there is a GPU, --device gpu
# with the GPU's codecs (nvJPEG, lib/gpu_jpeg.h; targets: >= 3x the CPU
# path, >= 2000 images/s on one H100), with --codecs cpu, and with
# --device auto (which chooses the codecs by the batch's size); then
# BATCH_LARGE JPEGs of 4096x4096 (default 240; target >= 150 images/s on
# one H100) on the CPU and the GPU (twice: the second time the server's
# lanes have grown for them), and the 1 MP batch once more through that
# server, now grown for large photos. Prints images/s, megapixels/s and the
# ratios, then the GPU runs' per-stage times (-v); on a machine with
# several GPUs, both batches through a server of one GPU and through one
# of all of them with --device gpu:all (target >= 1.8x one GPU).
# Outputs are checked before the figures count: --codecs cpu's must
# equal the CPU run's byte for byte, the GPU codecs' must be within
# gimg(7)'s bound of them (PSNR >= 42 dB, checked on each distinct
# photo), or the benchmark fails.
set -u
cd "$(dirname "$0")/../.."
BIN=${BIN:-bin}
BUILD=${BUILD:-build}
N=${BATCH_IMAGES:-2500}
# The batches' files (about 11 GB) go to a tmpfs where one has room for
# them, so that the figures are the tools' and not the disk's: on the
# lent two-H200 machine, whose disk took writes at about 330 MB/s, the
# 1 MP batch through gimgd ran at 1466-4085 images/s writing there and
# at 2217-4652 on /dev/shm (RESULTS.md, stop 49). BATCH_DIR names another
# folder (e.g. the disk's, to see it).
dir=${BATCH_DIR:-}
if [ -z "$dir" ] && [ -d /dev/shm ] && [ -w /dev/shm ] &&
    [ "$(df -Pk /dev/shm | awk 'NR == 2 { print $4 }')" -gt $((16 * 1024 * 1024)) ]; then
    dir=/dev/shm
fi
tmp=$(mktemp -d ${dir:+-p "$dir"})
echo "bench-batch: files in ${dir:-${TMPDIR:-/tmp}}"
trap 'rm -rf "$tmp"' EXIT

# photos W H DISTINCT N: $tmp/in/photo1.jpg .. photoN.jpg, a photo-like
# load for the codecs (blurred noise, its contrast stretched back, about
# 230 KB a megapixel at quality 90, as photos are): DISTINCT different
# ones, copied to N names (decoding does the same work each time).
photos() {
    rm -rf "$tmp/in"
    mkdir -p "$tmp/in"
    for s in $(seq 1 "$3"); do
        "$BUILD"/tests/gen --seed "$s" "$1" "$2" 3 8 - |
            "$BIN"/gconv --device cpu -k gaussian:6 --scale 16 --bias -1912 - "$tmp/base$s.jpg" ||
            exit 1
    done
    for i in $(seq 1 "$4"); do
        cp "$tmp/base$(((i - 1) % $3 + 1)).jpg" "$tmp/in/photo$i.jpg"
    done
}
photos 1200 850 8 "$N"
mp=$(awk -v n="$N" 'BEGIN { printf "%.1f", n * 1200 * 850 / 1e6 }')

# run NAME ARGS...: the batch in ${IN:-$tmp/in} into $tmp/NAME/, wall
# time in ms on stdout, -v's report in $tmp/NAME.err; a run that does not
# end within 300 s fails.
run() {
    local name=$1 t0 t1 rc
    shift
    rm -rf "${tmp:?}/$name"
    t0=$(date +%s%N)
    timeout 300 "$BIN"/gconv -v "$@" -o "$tmp/$name/" "${IN:-$tmp/in}"/*.jpg 2>"$tmp/$name.err"
    rc=$?
    if [ $rc -ne 0 ]; then
        cat "$tmp/$name.err" >&2
        echo "bench-batch: gconv $* -o $name/: exit $rc (124: it did not end)" >&2
        return 1
    fi
    t1=$(date +%s%N)
    echo $(((t1 - t0) / 1000000))
}

have_gpu=0
if "$BIN"/gconv --version | grep -q CUDA && command -v nvidia-smi >/dev/null &&
    nvidia-smi -L >/dev/null 2>&1; then
    have_gpu=1
fi

# within_bound DIR_A DIR_B: the GPU codecs' outputs against the CPU path's,
# one per distinct photo (the others are the same files again).
within_bound() {
    local i p
    for i in 1 2 3 4 5 6 7 8; do
        [ -f "$1/photo$i.jpg" ] || continue
        p=$("$BIN"/gstats --device cpu --compare "$1/photo$i.jpg" -s psnr "$2/photo$i.jpg") || return 1
        awk -v p="$p" 'BEGIN { exit !(p == "inf" || p + 0 >= 42) }' ||
            { echo "bench-batch: photo$i.jpg: PSNR $p dB between $1 and $2 (bound 42)"; return 1; }
    done
}

# against_cpu NAME CPU_MS GPU_MS N TARGETS: the GPU run NAME against the
# CPU's. The GPU's start-up (CUDA's and nvJPEG's, from -v) is paid once a
# process: the rate without it is the batch's once started (what gimgd,
# issue 31, gives every process).
against_cpu() {
    local su
    su=$(sed -n 's/.*start-up \([0-9]*\) ms.*/\1/p' "$tmp/$1.err" | head -1)
    awk -v c="$2" -v g="$3" -v n="$4" -v su="${su:-0}" -v t="$5" 'BEGIN {
        printf "  GPU path: %.2fx the CPU path, %.0f images/s (targets on one H100: %s); start-up %d ms, %.0f images/s after it\n", c / g, n * 1000 / g, t, su, n * 1000 / (g - su) }'
}

# several_gpus CPU_RUN N MP: on a machine with several GPUs, the batch in
# $tmp/in through a server of GPU 0 alone and through one of them all
# (gimgd holds every GPU by default), four times each: the first run grows
# the lanes' buffers for these images, the median of the other three is
# the steady rate, of which the ratio is taken (single runs of the same
# server varied by 5-10%, stop 49). Outputs: within the bound of the CPU
# run's, and the same bytes on one GPU and on all.
several_gpus() {
    [ "$(nvidia-smi -L | grep -c '^GPU')" -gt 1 ] || return 0
    local gpus dev ms runs r one_ms all_ms
    for gpus in gpu:0 gpu:all; do
        dev=gpu
        [ $gpus = gpu:all ] && dev=gpu:all
        "$BIN"/gimgd --stop >/dev/null 2>&1
        "$BIN"/gimgd --device $gpus >/dev/null || return 1
        "$BIN"/gconv --device gpu -k gaussian:2 -o "$tmp/warm/" "$tmp"/in/photo[1-9].jpg 2>/dev/null
        run "g${gpus#gpu:}" --device $dev -k gaussian:2 >/dev/null || return 1
        runs=""
        for r in 1 2 3; do
            ms=$(run "g${gpus#gpu:}" --device $dev -k gaussian:2) || return 1
            runs="$runs $ms"
        done
        ms=$(printf '%s\n' $runs | sort -n | sed -n 2p)
        rate "gimgd --device $gpus, median of 3" "$ms" "$2" "$3"
        within_bound "$tmp/$1" "$tmp/g${gpus#gpu:}" || return 1
        [ $gpus = gpu:0 ] && one_ms=$ms || all_ms=$ms
    done
    if ! diff -r -q "$tmp/g0" "$tmp/gall" >/dev/null; then
        echo "bench-batch: the gpu:all batch's outputs differ from one GPU's"
        return 1
    fi
    awk -v a="$all_ms" -v g="$one_ms" 'BEGIN { printf "  gpu:all: %.2fx one GPU (target 1.8x)\n", g / a }'
    "$BIN"/gimgd --status | grep -E '^(backend|requests)' | sed 's/^/    gimgd: /'
}

codec_ms=$(run codec --device cpu -k '1') || exit 1
cpu_ms=$(run cpu --device cpu -k gaussian:2) || exit 1
echo "Batch: $N JPEGs of 1200x850 ($mp MP), gconv -k gaussian:2 -o DIR/, $(nproc) cores"
rate() { awk -v n="$3" -v mp="$4" -v ms="$2" 'BEGIN { printf "  %-32s %8d ms %8.1f images/s %8.1f MP/s\n", "'"$1"'", ms, n * 1000 / ms, mp * 1000 / ms }'; }
rate "decode+encode (1x1, cpu)" "$codec_ms" "$N" "$mp"
rate "--device cpu" "$cpu_ms" "$N" "$mp"
if [ $have_gpu -eq 1 ]; then
    nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | sed 's/^/  GPU: /'
    gpucpu_ms=$(run gpucpu --device gpu --codecs cpu -k gaussian:2) || exit 1
    rate "--device gpu --codecs cpu" "$gpucpu_ms" "$N" "$mp"
    if ! diff -r -q "$tmp/cpu" "$tmp/gpucpu" >/dev/null; then
        echo "bench-batch: the GPU batch's outputs (--codecs cpu) differ from the CPU's"
        exit 1
    fi
    gpu_ms=$(run gpu --device gpu -k gaussian:2) || exit 1
    rate "--device gpu (GPU codecs)" "$gpu_ms" "$N" "$mp"
    within_bound "$tmp/cpu" "$tmp/gpu" || exit 1
    against_cpu gpu "$cpu_ms" "$gpu_ms" "$N" "3x, 2000 images/s"
    awk -v c="$cpu_ms" -v g="$gpucpu_ms" 'BEGIN { printf "  --codecs cpu: %.2fx the CPU path\n", c / g }'
    auto_ms=$(run auto --device auto -k gaussian:2) || exit 1
    rate "--device auto" "$auto_ms" "$N" "$mp"
    within_bound "$tmp/cpu" "$tmp/auto" || exit 1
    grep -E 'gconv: codecs: --device auto' "$tmp/auto.err" | sed 's/^gconv: /    /'
    echo "  the GPU runs' stages (-v):"
    for r in gpucpu gpu; do
        sed "s/^/    $r: /" "$tmp/$r.err" | grep -E 'gconv: (time|codecs|gpu:|[0-9]+ images)' | head -6
    done
    several_gpus cpu "$N" "$mp" || exit 1
else
    echo "  --device gpu: no CUDA GPU here: skipped"
    echo "  the CPU run's stages (-v):"
    sed 's/^/    /' "$tmp/cpu.err" | grep -E 'time|images/s' | head -5
fi

# Large photos: 4096x4096, the CPU path and the GPU codecs.
L=${BATCH_LARGE:-240}
if [ "$L" -gt 0 ]; then
    mv "$tmp/in" "$tmp/small"
    photos 4096 4096 2 "$L"
    lmp=$(awk -v n="$L" 'BEGIN { printf "%.1f", n * 4096 * 4096 / 1e6 }')
    echo "Batch: $L JPEGs of 4096x4096 ($lmp MP), gconv -k gaussian:2 -o DIR/"
    lcpu_ms=$(run lcpu --device cpu -k gaussian:2) || exit 1
    rate "--device cpu" "$lcpu_ms" "$L" "$lmp"
    if [ $have_gpu -eq 1 ]; then
        lgpu_ms=$(run lgpu --device gpu -k gaussian:2) || exit 1
        rate "--device gpu (GPU codecs)" "$lgpu_ms" "$L" "$lmp"
        within_bound "$tmp/lcpu" "$tmp/lgpu" || exit 1
        against_cpu lgpu "$lcpu_ms" "$lgpu_ms" "$L" "150 images/s"
        sed 's/^/    lgpu: /' "$tmp/lgpu.err" | grep -E 'gconv: (time|codecs|gpu:|[0-9]+ images)' | head -6
        # Once more: the first large batch through a server that served
        # small images grows its lanes' GPU buffers and nvJPEG's (127
        # against 165 images/s on an H200); a server busy with such
        # photos does not.
        lgpu2_ms=$(run lgpu2 --device gpu -k gaussian:2) || exit 1
        rate "--device gpu, again" "$lgpu2_ms" "$L" "$lmp"
        within_bound "$tmp/lcpu" "$tmp/lgpu2" || exit 1
        against_cpu lgpu2 "$lcpu_ms" "$lgpu2_ms" "$L" "150 images/s"
        # The small photos again, through the server that now holds large
        # buffers (a change of its GPU memory once hung here: RESULTS.md,
        # stop 49).
        small_ms=$(IN=$tmp/small run after --device gpu -k gaussian:2) || exit 1
        rate "$N of 1 MP after them" "$small_ms" "$N" "$mp"
        within_bound "$tmp/cpu" "$tmp/after" || exit 1
        several_gpus lcpu "$L" "$lmp" || exit 1
    fi
fi
