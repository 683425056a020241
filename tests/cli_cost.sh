#!/usr/bin/env bash
# tests/cli_cost.sh — --device auto's cost table (gimg(7), DEVICES), as the
# four tools use it, with tables injected through GIMG_COST_TABLE:
#  - -v prints auto's prediction (cpu, gpu, start-up), its choice and the
#    measured compute on one line, then where the table came from, on
#    standard error only; the figures are the table's;
#  - a broken or missing table never fails a tool: same output, the
#    defaults, and -v says so; --device cpu prints no prediction;
#  - the choice follows the table for each tool: a table that makes the GPU
#    faster sends the job to the GPU, one that makes the CPU faster keeps
#    it on the CPU. Without a GPU (CI) the GPU side is gimgd serving on the
#    CPU (GIMGD_DEVICE=cpu, as cli_server.sh), which auto starts when the
#    table says the GPU (start-up included) wins; a CPU-only build without
#    the server prints its prediction and "(no GPU in this build)".
# One PASS/FAIL/SKIP line per test; BIN and BUILD as in cli_lib.sh.
TOOL=gconv
. "$(dirname "$0")/cli_lib.sh"
GD=$BIN/gimgd

export XDG_RUNTIME_DIR=$T/run
mkdir -m 700 "$XDG_RUNTIME_DIR"
unset GIMG_SERVER GIMG_SERVER_TIMEOUT GIMG_GPU_MEM_LIMIT GIMG_DEVICE GIMGD GIMGD_DEVICE
trap '"$GD" --stop >/dev/null 2>&1; rm -rf "$T"' EXIT

# 400x300 RGB: 360 KB, past gconv's floor for the GPU (256 KiB).
"$GEN" --seed 1 400 300 3 8 in.ppm || { fail setup "gen failed"; exit 1; }

cat >cpu.cost <<'EOF'
# The CPU far faster than the GPU, for every operation.
conv_cpu_fmas_per_ms_per_thread 1e12
stats_cpu_bytes_per_ms_per_thread 1e12
hist_cpu_bytes_per_ms_per_thread 1e12
orient_cpu_bytes_per_ms_per_thread 1e12
cuda_start_ms 1234
EOF
cat >gpu.cost <<'EOF'
# The GPU far faster, its start-up free, the copies free.
conv_cpu_fmas_per_ms_per_thread 1
stats_cpu_bytes_per_ms_per_thread 1
hist_cpu_bytes_per_ms_per_thread 1
orient_cpu_bytes_per_ms_per_thread 1
conv_gpu_fmas_per_ms 1e14
stats_gpu_bytes_per_ms 1e14
hist_gpu_bytes_per_ms 1e14
orient_gpu_bytes_per_ms 1e14
gpu_transfer_ms_per_byte 0
server_ms_per_byte 0
server_round_trip_ms 0
cuda_start_ms 0
a_key_of_later_versions 5
EOF
printf 'cuda_start_ms 100\nconv_gpu_fmas_per_ms lots\n' >bad.cost

# run T OUT ARGS...: tool T on in.ppm, its data to OUT, -v to v.txt.
run() {
    local t=$1 out=$2
    shift 2
    case $t in
    gconv) "$BIN/gconv" -v -k box:2 "$@" in.ppm "$out" ;;
    gtranspose) "$BIN/gtranspose" -v --op rot90 "$@" in.ppm "$out" ;;
    gstats) "$BIN/gstats" -v "$@" in.ppm >"$out" ;;
    ghist) "$BIN/ghist" -v "$@" in.ppm >"$out" ;;
    esac 2>v.txt
}
ext() { case $1 in gconv | gtranspose) echo ppm ;; *) echo txt ;; esac; }
TOOLS="gconv gtranspose gstats ghist"

# --------------------------------------------------- the prediction line
for t in $TOOLS; do
    why=""
    e=$(ext "$t")
    GIMG_SERVER=off GIMG_COST_TABLE=cpu.cost run "$t" "want-$t.$e" --device auto || why="exit status $?"
    line=$(grep "^$t: auto: predicted" v.txt)
    echo "$line" | grep -qE "^$t: auto: predicted cpu [0-9.]+ ms, gpu [0-9.]+ ms \(start-up 1234 ms\); chose the CPU( \(no GPU in this build\))?; measured: compute [0-9.]+ ms$" ||
        why+=" line: '$line'"
    # The GPU's side holds the table's start-up.
    gpu_ms=$(echo "$line" | sed -n 's/.* gpu \([0-9.]*\) ms.*/\1/p')
    awk -v g="${gpu_ms:-0}" 'BEGIN { exit !(g >= 1234) }' || why+=" gpu ${gpu_ms} ms < the start-up"
    grep -qx "$t: auto: cost table: GIMG_COST_TABLE cpu.cost" v.txt || why+=" source: $(grep 'cost table' v.txt)"
    [ "$(grep -c "auto: predicted" v.txt)" = 1 ] || why+=" not one line"
    grep -q "auto:" "want-$t.$e" && why+=" the prediction went to the output"
    result "prediction-line-$t" "$why"
done

# ------------------------------------------------- broken tables, cpu
for table in bad.cost missing.cost; do
    for t in $TOOLS; do
        why=""
        e=$(ext "$t")
        GIMG_SERVER=off GIMG_COST_TABLE=$table run "$t" "got.$e" --device auto || why="exit status $?"
        if [ "$e" = ppm ]; then
            same "want-$t.$e" "got.$e" >/dev/null || why+=" output differs"
        else
            cmp -s "want-$t.$e" "got.$e" || why+=" report differs"
        fi
        grep -q "^$t: auto: cost table: GIMG_COST_TABLE refused (.*$table.*): the built-in defaults instead$" v.txt ||
            why+=" -v: $(grep 'cost table' v.txt)"
        grep -q "^$t: auto: predicted cpu .* (start-up 350 ms)" v.txt || why+=" not the defaults: $(grep predicted v.txt)"
        result "broken-table-$table-$t" "$why"
    done
done

why=""
GIMG_COST_TABLE=cpu.cost run gconv got.ppm --device cpu || why="exit status $?"
grep -q "auto:" v.txt && why+=" --device cpu printed: $(grep auto: v.txt)"
result no-prediction-on-cpu "$why"

# ------------------------------------------------- the choice follows
# Without the server: a CPU-only build has no GPU to choose, and says so;
# a build with CUDA takes the GPU where there is one (make test-gpu).
why=""
GIMG_SERVER=off GIMG_COST_TABLE=gpu.cost run gconv got.ppm --device auto || why="exit status $?"
if "$BIN/gconv" --version | grep -q "not built in"; then
    grep -q "^gconv: auto: predicted cpu [0-9.]* ms, gpu [0-9.]* ms (start-up 0.0 ms); chose the CPU (no GPU in this build)" v.txt ||
        why+=" $(grep auto: v.txt)"
    result gpu-table-without-gpu "$why"
else
    skip gpu-table-without-gpu "a build with CUDA: its GPU's side is make test-gpu's"
fi

# Through gimgd on the CPU: the GPU's side of a machine without a GPU.
export GIMGD_DEVICE=cpu
for t in $TOOLS; do
    why=""
    e=$(ext "$t")
    "$GD" --stop >/dev/null 2>&1
    GIMG_COST_TABLE=cpu.cost run "$t" "got.$e" --device auto || why="exit status $?"
    grep -q "server:" v.txt && why+=" cpu table: $(grep server: v.txt)"
    [ -S "$XDG_RUNTIME_DIR/gimg/gimgd.sock" ] && why+=" a server started for the CPU's job"
    grep -q "^$t: auto: predicted .*; chose the CPU" v.txt || why+=" cpu table: $(grep auto: v.txt)"
    GIMG_COST_TABLE=gpu.cost run "$t" "got.$e" --device auto || why+=" exit status $?"
    grep -q "server: gimgd.*served 1 operation" v.txt || why+=" gpu table, not served: $(grep -E 'server|backend' v.txt | tr '\n' ' ')"
    grep -q "^$t: auto: predicted cpu [0-9.]* ms, gpu [0-9.]* ms (start-up 0.0 ms); chose gimgd; " v.txt ||
        why+=" gpu table: $(grep auto: v.txt)"
    if [ "$e" = ppm ]; then
        same "want-$t.$e" "got.$e" >/dev/null || why+=" output differs"
    else
        cmp -s "want-$t.$e" "got.$e" || why+=" report differs"
    fi
    # A server running does not move the CPU's table's job to it.
    GIMG_COST_TABLE=cpu.cost run "$t" "got.$e" --device auto || why+=" exit status $?"
    grep -q "served" v.txt && why+=" cpu table, warm server: $(grep server: v.txt)"
    result "choice-follows-table-$t" "$why"
done
# A batch's images share the start-up (gimgd's start here): with this table
# one image is the CPU's (1e5 ms against a 3e5 ms start-up), a batch of 10
# the server's (a tenth of the start-up each). One thread (-j 1), so that the CPU's
# figure is the same on any machine.
cat >share.cost <<'EOF'
stats_cpu_bytes_per_ms_per_thread 3.6
stats_gpu_bytes_per_ms 1e14
gpu_transfer_ms_per_byte 0
server_ms_per_byte 0
server_round_trip_ms 0
cuda_start_ms 300000
EOF
for i in 0 1 2 3 4 5 6 7 8 9; do cp in.ppm "b$i.ppm"; done
why=""
"$GD" --stop >/dev/null 2>&1
GIMG_COST_TABLE=share.cost "$BIN/gstats" -v -j 1 --device auto in.ppm >one.txt 2>v.txt ||
    why+=" one: exit status $?"
grep -q "^gstats: auto: predicted cpu 100000 ms, gpu 300000 ms (start-up 300000 ms); chose the CPU" v.txt ||
    why+=" one: $(grep auto: v.txt)"
[ -S "$XDG_RUNTIME_DIR/gimg/gimgd.sock" ] && why+=" one: a server started"
GIMG_COST_TABLE=share.cost "$BIN/gstats" -v -j 1 --device auto b?.ppm >ten.txt 2>v.txt ||
    why+=" ten: exit status $?"
grep -q "^gstats: auto: 10 operations, predicted .* (start-up 30000 ms an image, shared by 10); chose gimgd;" v.txt ||
    why+=" ten: $(grep auto: v.txt)"
grep -q "server: gimgd.*served 10 operations" v.txt || why+=" ten, not served: $(grep server: v.txt)"
[ "$(grep -c . ten.txt)" -gt "$(grep -c . one.txt)" ] || why+=" ten reports: $(wc -l <ten.txt) lines"
result batch-shares-start-up "$why"

"$GD" --stop >/dev/null 2>&1
unset GIMGD_DEVICE

exit $failed
