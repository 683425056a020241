#!/usr/bin/env bash
# tests/gpu_auto.sh — `make test-gpu`'s check of --device auto on the real
# GPU (issue 31): over a grid of operations and sizes, auto is never more
# than 10% slower than the faster of --device cpu and --device gpu, without
# the server (each process starts CUDA itself) and with a warm gimgd.
#
# Grid: RGB 8-bit PPMs of AUTO_SIZES (default "4096 16384") sides (seeded
# noise, tests/gen); gconv with dense kernels of 3x3, 11x11 and 31x31
# (random integer taps: not separable), gstats, ghist and gtranspose --op
# rot90. Each command runs as a user runs it, a process of its own, its
# output to standard output, /dev/null (an 805 MB file's write-back varied
# by 0.3 s, more than the choice being timed); a case's time is the least
# of AUTO_RUNS runs (default 3) after a warm-up, so that a stray slow run
# does not decide it. A case passes when auto <= 1.10 x min(cpu, gpu) + 20 ms
# (the 20 ms: process start-up jitter, which dominates the smallest jobs).
# -v's "auto:" line (the prediction and the side chosen) is printed beside
# each case's times.
#
# One PASS/FAIL line per case (plus its times); exits 1 if any failed, 77
# without a CUDA build or a GPU.
set -u
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
BUILD=${BUILD:-build}
SIZES=${AUTO_SIZES:-4096 16384}
RUNS=${AUTO_RUNS:-3}
. tests/gpu_lib.sh
gpu_private_setup gpu_auto
failed=0

# kernel N: an N x N kernel of random integer taps (seeded), one row a line.
kernel() {
    awk -v n="$1" 'BEGIN { srand(n); for (y = 0; y < n; y++) { l = "";
        for (x = 0; x < n; x++) l = l sprintf("%d ", int(rand() * 19) - 9); print l } }'
}
for n in 3 11 31; do kernel $n >"$tmp/k$n.txt"; done

# best_ms COMMAND...: the least wall time of RUNS runs, after a warm-up
# (run with -v, its standard error kept in $tmp/warm.txt).
best_ms() {
    local i t0 t1 best=""
    "$1" -v "${@:2}" >/dev/null 2>"$tmp/warm.txt" || { echo "fail"; return; }
    for i in $(seq "$RUNS"); do
        t0=$(date +%s.%N)
        "$@" >/dev/null 2>&1 || { echo "fail"; return; }
        t1=$(date +%s.%N)
        best=$(awk -v a="$t0" -v b="$t1" -v m="$best" \
            'BEGIN { t = (b - a) * 1000; if (m == "" || t < m) m = t; printf "%.0f", m }')
    done
    echo "$best"
}

# grid MODE: every case, MODE "no server" (GIMG_SERVER=off) or "server".
grid() {
    local mode=$1 size in op args cpu gpu auto why line
    for size in $SIZES; do
        in=$tmp/in$size.ppm
        for op in dense3 dense11 dense31 gstats ghist rot90; do
            case $op in
                dense*) args=(gconv -k "@$tmp/k${op#dense}.txt" "$in" -) ;;
                gstats) args=(gstats "$in") ;;
                ghist) args=(ghist "$in") ;;
                rot90) args=(gtranspose --op rot90 "$in" -) ;;
            esac
            local tool=${args[0]}
            args[0]=$BIN/$tool
            cpu=$(best_ms "${args[0]}" --device cpu "${args[@]:1}")
            gpu=$(best_ms "${args[0]}" --device gpu "${args[@]:1}")
            auto=$(best_ms "${args[0]}" --device auto "${args[@]:1}")
            line=$(grep -m1 'auto: predicted' "$tmp/warm.txt" | sed "s/^$tool: //")
            why=""
            if [ "$cpu" = fail ] || [ "$gpu" = fail ] || [ "$auto" = fail ]; then
                why="a run failed (cpu $cpu, gpu $gpu, auto $auto)"
            elif ! awk -v c="$cpu" -v g="$gpu" -v a="$auto" \
                'BEGIN { m = c < g ? c : g; exit !(a <= 1.10 * m + 20) }'; then
                why="auto ${auto} ms, over 1.10 x the faster side ($cpu cpu, $gpu gpu) + 20 ms"
            fi
            printf '  %-8s %5s^2 %-9s cpu %6s ms  gpu %6s ms  auto %6s ms  (%s)\n' \
                "$op" "$size" "$mode" "$cpu" "$gpu" "$auto" "${line:-no auto line}"
            if [ -z "$why" ]; then
                echo "PASS: auto-$op-$size-${mode// /-}"
            else
                echo "FAIL: auto-$op-$size-${mode// /-}: $why"
                failed=1
            fi
        done
    done
}

for size in $SIZES; do
    "$BUILD"/tests/gen --seed "$size" "$size" "$size" 3 8 "$tmp/in$size.ppm" ||
        { echo "FAIL: auto-setup: gen $size failed"; exit 1; }
done
GIMG_SERVER=off grid "no server"
# A warm server: started by hand, so that no case pays its start-up.
"$BIN"/gimgd >/dev/null 2>&1
"$BIN"/gstats --device gpu "$tmp/in${SIZES%% *}.ppm" >/dev/null 2>&1
"$BIN"/gimgd --status 2>&1 | head -n 3
grid "server"
exit $failed
