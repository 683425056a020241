#!/usr/bin/env bash
# tests/bench/server.sh — `make bench-server`: whole commands as a user
# runs them, each a separate process, with gimgd (gimgd(1)) warm, against
# the CPU and against the tool's own GPU context (--no-server), on this
# machine in one run. A server of its own, in a private runtime folder.
#   1. gconv -k gaussian:2 in.jpg out.jpg on a 4096x4096 photo-like JPEG
#      (target with the server warm: <= 40 ms wall);
#   2. gtranspose --op rot90 on a 1 MP JPEG;
#   3. samples/Makefile over SERVER_MAKE_IMAGES (default 500) photo-like
#      JPEGs of 1 MP with make -j16: GIMG_DEVICE=gpu against
#      GIMG_DEVICE=cpu (target >= 5x);
#   4. gconv | gtranspose | gstats over a 4096x4096 PPM, and each stage on
#      its own (target: each stage with the server no slower than on the
#      CPU), with --device gpu and with --device auto.
# Outputs are checked before the figures count: the server's must equal
# the tool's own GPU path byte for byte (JPEG through the GPU codecs
# included), the pipe's and the Makefile's blur the CPU's. Needs a CUDA
# build and a GPU; exits 77 (skipped) otherwise.
set -u
cd "$(dirname "$0")/../.."
BIN=${BIN:-bin}
BUILD=${BUILD:-build}
N=${SERVER_MAKE_IMAGES:-500}
. tests/gpu_lib.sh
gpu_private_setup bench-server
failed=0
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", (b - a) * 1000 }'; }
# med N COMMAND...: the median wall time of N runs in ms, after a warm-up.
med() {
    local n=$1 i s ts=()
    shift
    "$@" >/dev/null 2>&1
    for i in $(seq "$n"); do
        s=$EPOCHREALTIME
        "$@" >/dev/null 2>&1
        ts+=("$(ms "$s" "$EPOCHREALTIME")")
    done
    printf '%s\n' "${ts[@]}" | sort -n | sed -n "$(((n + 1) / 2))p"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
# photo W H SEED OUT: a photo-like image (blurred noise, its contrast
# stretched back), as tests/bench/batch.sh makes them.
photo() {
    "$BUILD"/tests/gen --seed "$3" "$1" "$2" 3 8 - |
        "$BIN"/gconv --device cpu -k gaussian:6 --scale 16 --bias -1912 - "$4"
}

nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1
echo "$(nproc) CPU threads"
photo 4096 4096 1 "$tmp/4k.jpg" && photo 1024 1024 2 "$tmp/1mp.jpg" &&
    photo 4096 4096 3 "$tmp/4k.ppm" || { echo "FAIL: bench-server: inputs"; exit 1; }
"$BIN"/gimgd --idle 600 || { echo "FAIL: bench-server: gimgd did not start"; exit 1; }
# The first request waits for CUDA's start-up in the server.
"$BIN"/gconv --device gpu -k box:1 "$tmp/1mp.jpg" "$tmp/warm.jpg"

echo "== validation"
# same_as_own IN EXT TOOL ARGS...: the server's output is the tool's own GPU path's.
same_as_own() {
    local name=$1 in=$tmp/$1 ext=$2 tool=$3
    shift 3
    if "$BIN/$tool" "$@" --device gpu --no-server "$in" "$tmp/own.$ext" &&
        "$BIN/$tool" -v "$@" --device gpu "$in" "$tmp/srv.$ext" 2>"$tmp/v.txt" &&
        cmp -s "$tmp/own.$ext" "$tmp/srv.$ext" && grep -q "server: gimgd served" "$tmp/v.txt"; then
        echo "PASS: $tool $* on $name: the server's output is the tool's own GPU's"
    else
        echo "FAIL: $tool $* on $name: $(grep -E 'server' "$tmp/v.txt")"
        failed=1
    fi
}
same_as_own 4k.jpg jpg gconv -k gaussian:2
same_as_own 1mp.jpg jpg gtranspose --op rot90
same_as_own 4k.ppm ppm gconv -k gaussian:2
[ "$failed" = 0 ] || exit 1

echo "== single commands, median of 9, ms: CPU, own GPU context (--no-server), warm gimgd"
row() {
    local name=$1 target=$2 c g s
    shift 2
    c=$(med 9 "$BIN/$1" --device cpu "${@:2}")
    g=$(med 9 "$BIN/$1" --device gpu --no-server "${@:2}")
    s=$(med 9 "$BIN/$1" --device gpu "${@:2}")
    printf '%-44s cpu %5s  own GPU %5s  gimgd %5s  (%sx the CPU)%s\n' "$name" "$c" "$g" "$s" \
        "$(ratio "$c" "$s")" "$target"
    last_server_ms=$s
}
row "gconv gaussian:2, 4096x4096 JPEG to JPEG" "" gconv -k gaussian:2 "$tmp/4k.jpg" "$tmp/o.jpg"
if [ "$last_server_ms" -le 40 ]; then echo "target <= 40 ms: met"; else echo "target <= 40 ms: MISSED"; fi
row "gtranspose rot90, 1 MP JPEG to JPEG" "" gtranspose --op rot90 "$tmp/1mp.jpg" "$tmp/o.jpg"
row "gconv gaussian:2, 4096x4096 PPM" "" gconv -k gaussian:2 "$tmp/4k.ppm" "$tmp/o.ppm"

echo "== gconv | gtranspose | gstats over a 4096x4096 PPM, median of 5, ms"
"$BIN"/gconv -k gaussian:2 --device cpu "$tmp/4k.ppm" "$tmp/s1.ppm"
"$BIN"/gtranspose --op rot90 --device cpu "$tmp/s1.ppm" "$tmp/s2.ppm"
pipe() {
    "$BIN"/gconv -k gaussian:2 --device "$1" "$tmp/4k.ppm" - |
        "$BIN"/gtranspose --op rot90 --device "$1" - - | "$BIN"/gstats --device "$1" -
}
pipe cpu >"$tmp/p-cpu.txt"
for d in gpu auto; do
    pipe $d >"$tmp/p-$d.txt"
    cmp -s "$tmp/p-cpu.txt" "$tmp/p-$d.txt" || { echo "FAIL: the pipe with --device $d differs"; failed=1; }
done
declare -A stage
for d in cpu gpu auto; do
    stage[$d,conv]=$(med 5 "$BIN"/gconv -k gaussian:2 --device $d "$tmp/4k.ppm" "$tmp/o.ppm")
    stage[$d,turn]=$(med 5 "$BIN"/gtranspose --op rot90 --device $d "$tmp/s1.ppm" "$tmp/o.ppm")
    stage[$d,stats]=$(med 5 "$BIN"/gstats --device $d "$tmp/s2.ppm")
    echo "--device $d: whole pipe $(med 5 pipe $d), gconv ${stage[$d,conv]}, gtranspose ${stage[$d,turn]}, gstats ${stage[$d,stats]}"
done
for d in gpu auto; do
    slower=""
    for st in conv turn stats; do
        [ "${stage[$d,$st]}" -le $((stage[cpu,$st] * 11 / 10)) ] || slower+=" $st"
    done
    echo "target, each stage no slower than the CPU (10%), --device $d: ${slower:+MISSED:}${slower:-met}"
done

echo "== samples/Makefile over $N photo-like JPEGs of 1 MP, make -j16"
mkdir -p "$tmp/in"
for i in $(seq 8); do photo 1024 1024 $((10 + i)) "$tmp/base$i.jpg"; done
for i in $(seq "$N"); do cp "$tmp/base$(((i - 1) % 8 + 1)).jpg" "$tmp/in/p$i.jpg"; done
declare -A mk
for d in cpu gpu; do
    s=$EPOCHREALTIME
    GIMG_DEVICE=$d make -s -j16 -C samples IN="$tmp/in" OUT="$tmp/mk-$d" BIN="$PWD/$BIN" \
        >/dev/null 2>"$tmp/mk-$d.err" || { echo "FAIL: make with GIMG_DEVICE=$d: $(head -c 300 "$tmp/mk-$d.err")"; failed=1; }
    mk[$d]=$(ms "$s" "$EPOCHREALTIME")
done
diff -r "$tmp/mk-cpu/stats" "$tmp/mk-gpu/stats" >/dev/null ||
    echo "note: the reports differ where the GPU codecs decoded (within gimg(7)'s bound)"
echo "GIMG_DEVICE=cpu ${mk[cpu]} ms, GIMG_DEVICE=gpu ${mk[gpu]} ms: $(ratio "${mk[cpu]}" "${mk[gpu]}")x (target >= 5x)"
"$BIN"/gimgd --status
exit $failed
