# tests/bench/timing.sh — sourced by the cpu_*.sh benchmarks, from the
# repository's root: BIN and BUILD, an exit (skipped) when vips is not
# installed, $tmp (removed on exit) holding in.ppm, a seeded 4096x4096 RGB
# PPM, and median_ms.
BIN=${BIN:-bin}
BUILD=${BUILD:-build}
if ! command -v vips >/dev/null; then
    echo "bench-cpu: vips not installed: skipped"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$BUILD"/tests/gen --seed 3 4096 4096 3 8 "$tmp/in.ppm" || exit 1

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
