# tests/bench/timing.sh — sourced by the cpu_*.sh benchmarks, from the
# repository's root: BIN and BUILD, an exit (skipped) when vips is not
# installed, $tmp (removed on exit) holding in.ppm, a seeded 4096x4096 RGB
# PPM, and median_ms (median.sh).
BIN=${BIN:-bin}
BUILD=${BUILD:-build}
if ! command -v vips >/dev/null; then
    echo "bench-cpu: vips not installed: skipped"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$BUILD"/tests/gen --seed 3 4096 4096 3 8 "$tmp/in.ppm" || exit 1

. tests/bench/median.sh
