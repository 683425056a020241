# tests/bench/median.sh — sourced by the CPU benchmarks (timing.sh and the
# cpu_*.sh that need no vips): median_ms COMMAND..., the median wall time
# in ms of the command over 9 runs, after one warm-up. The command's
# output is the caller's to redirect.
median_ms() {
    local times=() t0 t1
    "$@" || return 1
    for _ in 1 2 3 4 5 6 7 8 9; do
        t0=$(date +%s%N); "$@"; t1=$(date +%s%N)
        times+=($(((t1 - t0) / 1000000)))
    done
    printf '%s\n' "${times[@]}" | sort -n | sed -n 5p
}
