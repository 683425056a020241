#!/usr/bin/env bash
# tests/cli_gpu_faults.sh — GPU faults: out of GPU memory, simulated with
# GIMG_GPU_MEM_LIMIT set low, must not fail a tool: the operation runs on the
# CPU instead, gives the same result, and says so under -v. Needs a CUDA
# build and a GPU, so it skips in `make test` on a machine without one; its
# name matches run-gpu.sh's tests/cli_g*.sh, so `make test-gpu` runs it.
# One block per tool; BIN and BUILD as in cli_lib.sh.
TOOL=gtranspose
. "$(dirname "$0")/cli_lib.sh"
# The tools' own CUDA context is what this suite tests (its -v lines, its
# memory): never the server's (tests/cli_server.sh, and tests/bench/server.sh
# for the server's GPU against the tools' own).
export GIMG_SERVER=off

need_cuda_gpu gpu-faults

# mem_limit_fallback NAME LIMIT TOOL-ARGS...: with GIMG_GPU_MEM_LIMIT=LIMIT
# and --device gpu, the tool succeeds, writes what the CPU writes (cpu.out,
# made first by the caller), and -v says it fell back to the CPU.
mem_limit_fallback() {
    local name=$1 limit=$2 why=""
    shift 2
    GIMG_GPU_MEM_LIMIT=$limit "$@" --device gpu -v >gpu.out 2>err.txt ||
        why="exit status $?: $(head -c 300 err.txt)"
    [ -z "$why" ] && { cmp -s gpu.out cpu.out || why="output differs from the CPU's"; }
    [ -z "$why" ] && { grep -q 'GIMG_GPU_MEM_LIMIT' err.txt && grep -q 'CPU instead' err.txt ||
        why="-v does not report the fallback: $(head -c 300 err.txt)"; }
    [ -z "$why" ] && grep -q 'backend: gpu' err.txt && why="-v claims the GPU ran"
    result "$name" "$why"
}

# ------------------------------------------------------------- gtranspose

# 301x203 RGB: each device buffer is 912 x 203 = 185136 bytes (rows padded
# to 16 bytes), so 200000 fits the input but not the output as well.
"$GEN" --seed 3 301 203 3 8 in.ppm
"$PROG" --op rot90 --device cpu in.ppm - >cpu.out
mem_limit_fallback gtranspose-mem-limit-1-byte 1 "$PROG" --op rot90 in.ppm -
mem_limit_fallback gtranspose-mem-limit-input-only 200000 "$PROG" --op rot90 in.ppm -

why=""
GIMG_GPU_MEM_LIMIT=1 "$PROG" --op rot90 --device gpu in.ppm - >gpu.out 2>err.txt || why="exit status $?"
[ -z "$why" ] && [ -s err.txt ] && why="printed without -v: $(head -c 200 err.txt)"
[ -z "$why" ] && { cmp -s gpu.out cpu.out || why="output differs from the CPU's"; }
result gtranspose-mem-limit-quiet "$why"

why=""
GIMG_GPU_MEM_LIMIT=64M "$PROG" --op rot90 --device gpu -v in.ppm - >gpu.out 2>err.txt ||
    why="exit status $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { grep -q 'backend: gpu' err.txt || why="did not run on the GPU: $(head -c 300 err.txt)"; }
[ -z "$why" ] && { cmp -s gpu.out cpu.out || why="output differs from the CPU's"; }
result gtranspose-mem-limit-enough "$why"

expect_fail gtranspose-mem-limit-invalid 1 "" -- env GIMG_GPU_MEM_LIMIT=12Q "$PROG" --device gpu in.ppm -
grep -q 'GIMG_GPU_MEM_LIMIT' stderr.txt || fail gtranspose-mem-limit-invalid-message "got: $(cat stderr.txt)"

# ------------------------------------------------- gconv, ghist, gstats
# The same fallback through each of their GPU paths (conv, histogram,
# statistics and comparison passes).
for spec in "gconv -k gaussian:2" "gconv -k sobel-x --scale 0.5" "ghist" "gstats" \
    "gstats --compare in.ppm"; do
    set -- $spec
    tool=$1
    shift
    out=(); [ "$tool" = gconv ] && out=(-)
    "$BIN/$tool" "$@" --device cpu in.ppm "${out[@]}" >cpu.out
    mem_limit_fallback "$tool-mem-limit-1-byte ($*)" 1 "$BIN/$tool" "$@" in.ppm "${out[@]}"
done

# A real out-of-memory: a helper holds all but about 1.2 GiB of the GPU's
# free memory (taken in pieces down to 1 MiB) while the tool transposes an image whose two device buffers
# need 1.6 GiB (8192x8192 RGB float); CUDA's own context takes some of what
# is left. The tool must fall back to the CPU and give the CPU's result.
if command -v nvcc >/dev/null 2>&1 && [ -z "${GIMG_TEST_SLOW:-}" ]; then
    cat >hog.cu <<'CU'
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
    size_t free_b, total_b;
    void *p;
    if (argc < 3)
        return 3;
    /* Takes memory in ever smaller pieces until about `keep` bytes are left. */
    size_t keep = (size_t)atoll(argv[1]);
    for (size_t chunk = (size_t)1 << 30; chunk >= ((size_t)1 << 20); chunk /= 2)
        for (;;) {
            if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess)
                return 3;
            if (free_b < keep + chunk || cudaMalloc(&p, chunk) != cudaSuccess)
                break;
        }
    (void)cudaGetLastError();
    int rc = system(argv[2]);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 5;
}
CU
    # hogged NAME KEEP INPUT WANT: with all but about KEEP bytes of the GPU's
    # memory held by the helper, --device gpu -v on INPUT succeeds, writes
    # what the CPU writes, and -v's notice matches WANT.
    hogged() {
        local name=$1 keep=$2 in=$3 want=$4 ext=${3##*.} why="" rc
        "$PROG" --op rot90 --device cpu "$in" "cpu.$ext"
        ./hog "$keep" "'$PROG' --op rot90 --device gpu -v '$in' 'gpu.$ext' 2>err.txt"
        rc=$?
        [ "$rc" -eq 0 ] || why="exit status $rc: $(head -c 300 err.txt)"
        [ -z "$why" ] && { grep -q "$want" err.txt || why="no fallback reported: $(head -c 300 err.txt)"; }
        [ -z "$why" ] && { cmp -s "gpu.$ext" "cpu.$ext" || why="output differs from the CPU's"; }
        result "$name" "$why"
        rm -f "cpu.$ext" "gpu.$ext"
    }
    if nvcc -o hog hog.cu 2>cc.txt; then
        "$GEN" --seed 9 8192 8192 3 32 bigf.pfm
        hogged gtranspose-real-gpu-out-of-memory $((1200 << 20)) bigf.pfm 'GPU out of memory'
        rm -f bigf.pfm
        # No memory left even for CUDA's context: --device gpu still does
        # the work, on the CPU, and says so under -v.
        hogged gtranspose-gpu-full-before-start $((1 << 20)) in.ppm 'CPU instead'
    else
        skip gtranspose-real-gpu-out-of-memory "nvcc cannot build the helper: $(head -c 100 cc.txt)"
    fi
else
    skip gtranspose-real-gpu-out-of-memory "needs nvcc (and not under valgrind)"
fi

exit $failed
