# tests/bench/timing.sh — sourced by the cpu_*.sh benchmarks.

# Median wall time in ms of a command over 9 runs, after one warm-up.
median_ms() {
    local times=() t0 t1
    "$@" || return 1
    for _ in 1 2 3 4 5 6 7 8 9; do
        t0=$(date +%s%N); "$@"; t1=$(date +%s%N)
        times+=($(((t1 - t0) / 1000000)))
    done
    printf '%s\n' "${times[@]}" | sort -n | sed -n 5p
}
