#!/usr/bin/env bash
# tests/run-gpu.sh — `make test-gpu`: the GPU == CPU differential tests, the
# tools' CLI suites forced onto the GPU, and compute-sanitizer over every
# kernel. Exit 77 (skipped) when there is no CUDA GPU or the build has no CUDA.
#
# The CLI suites and the sanitizer runs (independent of each other) run in
# parallel; the unit tests and the man-page checks never touch the GPU and
# are left to `make test`.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN=${BIN:-bin}
if ! "$BIN"/gtranspose --version 2>/dev/null | grep -q 'CUDA'; then
    echo "test-gpu: this build has no CUDA support: skipped"; exit 77
fi
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "test-gpu: no CUDA GPU: skipped"; exit 77
fi
nvidia-smi -L
logs=$(mktemp -d)
# The CLI suites' --device gpu goes through gimgd (gimgd(1)), which the
# first tool starts: a server of this run's own, in a private runtime
# folder, stopped at the end. TEST_GPU_SERVER=off runs them in the tools'
# own CUDA contexts instead.
export XDG_RUNTIME_DIR=$logs/run
mkdir -m 700 "$XDG_RUNTIME_DIR"
[ "${TEST_GPU_SERVER:-on}" = off ] && export GIMG_SERVER=off
trap '"$BIN"/gimgd --stop >/dev/null 2>&1; rm -rf "$logs"' EXIT

# TEST_GPU_PARTS picks parts (default all): diff (the differential tests),
# san (compute-sanitizer over them), cli (the CLI suites on the GPU), auto
# (--device auto against cpu and gpu: tests/gpu_auto.sh), so that a short
# lease can run them in separate calls. Every parallel job is
# bounded by TEST_GPU_TIMEOUT seconds (a job over it fails, named) and says
# how long it took, so the slow ones are plain to see.
PARTS=${TEST_GPU_PARTS:-diff san cli auto}
# TEST_GPU_CLI: the CLI suites to run (default: the tools', the batch,
# compare, maxval, metadata and orientation suites), e.g. "cli_gconv.sh".
CLI_SUITES=$(cd tests && echo ${TEST_GPU_CLI:-cli_g*.sh cli_batch.sh cli_compare.sh cli_maxval.sh cli_meta.sh cli_orient.sh})
LIMIT=${TEST_GPU_TIMEOUT:-900}  # cli_gtranspose.sh alone: 399 s on an H100 (stop 25)
part() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }

# The programs, not their objects beside them; TEST_GPU_DIFF="gpudiff_ssim
# ..." picks some (default all).
GPUDIFF=$(find "$BUILD/tests" -maxdepth 1 -name 'gpudiff_*' ! -name '*.o' | sort)
if [ -n "${TEST_GPU_DIFF:-}" ]; then
    GPUDIFF=$(for d in $GPUDIFF; do case " $TEST_GPU_DIFF " in *" ${d##*/} "*) echo "$d" ;; esac; done)
fi
if part diff; then
    echo "== differential tests (GPU == CPU)"
    for d in $GPUDIFF; do
        start=$SECONDS
        "$d" 2>&1 | tee "$logs/${d##*/}.log"
        echo "(${d##*/}: $((SECONDS - start)) s)"
    done
fi

# sanitize TOOL BINARY: one compute-sanitizer run over a gpudiff program's
# small sizes; PASS only with a clean summary.
sanitize() {
    local tool=$1 d=$2 out rc start=$SECONDS
    out=$(timeout "$LIMIT" compute-sanitizer --tool "$tool" --error-exitcode 9 "$d" --small 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && echo "$out" | grep -Eq '(ERROR|RACECHECK) SUMMARY: 0 (errors|hazards)'; then
        echo "PASS: compute-sanitizer $tool ${d##*/} ($((SECONDS - start)) s)"
    else
        echo "$out" | tail -30
        [ $rc -eq 124 ] && rc="timed out after $LIMIT s"
        echo "FAIL: compute-sanitizer $tool ${d##*/}: exit $rc"
    fi
}

# cli_suite SCRIPT: one tool's CLI suite with GIMG_DEVICE=gpu, and the CPU's
# codecs (GIMG_CODECS=cpu), since the suites check the GPU's outputs
# against the CPU's byte for byte; cli_gpu_codecs.sh tests the GPU's codecs.
cli_suite() {
    local t=$1 name=${1##*/} start=$SECONDS rc
    GIMG_DEVICE=gpu GIMG_CODECS=cpu BUILD=$BUILD BIN=$BIN timeout "$LIMIT" bash "$t" </dev/null \
        >"$logs/raw-$name" 2>&1
    rc=$?
    grep -E '^(PASS|FAIL|SKIP): ' "$logs/raw-$name" | sed 's/^\(PASS\|FAIL\|SKIP\): /\1: gpu: /'
    [ $rc -eq 124 ] && echo "FAIL: gpu: $name: timed out after $LIMIT s"
    echo "($name on the GPU: $((SECONDS - start)) s)" >&2
}

echo "== in parallel: $(part cli && echo 'the CLI suites with GIMG_DEVICE=gpu; ')$(part san && echo compute-sanitizer)"
# cli_gpu_faults.sh fills the GPU's memory on purpose, which would starve
# the suites beside it: it runs alone, after them.
if part cli; then
    for t in $CLI_SUITES; do
        [ "$t" = cli_gpu_faults.sh ] || cli_suite "tests/$t" >"$logs/$t.log" &
    done
fi
if part san; then
    if command -v compute-sanitizer >/dev/null; then
        for d in $GPUDIFF; do
            for tool in memcheck racecheck initcheck synccheck; do
                # nvJPEG's own copies read bytes of its internal buffers that
                # it never wrote (initcheck reports them inside libnvjpeg,
                # under nvjpegDecodeBatched): nothing of ours to check there.
                if [ "$tool" = initcheck ] && [ "${d##*/}" = gpudiff_jpeg ]; then
                    echo "SKIP: compute-sanitizer initcheck gpudiff_jpeg: reports nvJPEG's internal buffers" \
                        >"$logs/san-$tool-${d##*/}.log"
                    continue
                fi
                sanitize "$tool" "$d" >"$logs/san-$tool-${d##*/}.log" 2>&1 &
            done
        done
    else
        echo "SKIP: compute-sanitizer: not installed" >"$logs/san.log"
    fi
fi
wait
case " $CLI_SUITES " in
*" cli_gpu_faults.sh "*) part cli && cli_suite tests/cli_gpu_faults.sh >"$logs/cli_gpu_faults.sh.log" ;;
esac
for f in "$logs"/cli_*.log "$logs"/san*.log; do
    [ -f "$f" ] && cat "$f"
done
# auto last, alone on the machine, since it times: --device auto within 10%
# of the faster of cpu and gpu over a grid, with and without the server.
if part auto; then
    echo "== --device auto against cpu and gpu (tests/gpu_auto.sh)"
    start=$SECONDS
    BIN=$BIN BUILD=$BUILD timeout "$LIMIT" bash tests/gpu_auto.sh </dev/null >"$logs/auto.log" 2>&1
    [ $? -eq 124 ] && echo "FAIL: gpu_auto.sh: timed out after $LIMIT s" >>"$logs/auto.log"
    cat "$logs/auto.log"
    echo "(gpu_auto.sh: $((SECONDS - start)) s)"
fi

passed=$(cat "$logs"/*.log 2>/dev/null | grep -c '^PASS: ')
failed=$(cat "$logs"/*.log 2>/dev/null | grep -c '^FAIL: ')
skipped=$(cat "$logs"/*.log 2>/dev/null | grep -c '^SKIP: ')
[ "$failed" -gt 0 ] && { echo; echo "Failed:"; cat "$logs"/*.log | grep '^FAIL: '; }
echo
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
