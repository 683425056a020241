# tests/cli_lib.sh — sourced by the tests/cli_g*.sh scripts: where the
# binaries are, PASS/FAIL/SKIP reporting, a scratch folder, and checks every
# tool's suite uses.
#
# Before sourcing, a script sets TOOL (the program under test, e.g.
# gtranspose). After it: $BIN/$TOOL is $PROG, $GEN and $CMP are the test
# helpers gen and imgcmp, the current directory is an empty scratch folder
# removed at exit, and $failed is what the script should exit with. BIN and
# BUILD name the folders of the tools and of the test helpers (default bin
# and build at the top of the tree; relative paths are taken from the
# current directory).
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
abs_dir() { (cd "$1" 2>/dev/null && pwd) || echo "$1"; }
BIN=$(abs_dir "${BIN:-$ROOT/bin}")
BUILD=$(abs_dir "${BUILD:-$ROOT/build}")
PROG=$BIN/$TOOL
GEN=$BUILD/tests/gen
CMP=$BUILD/tests/imgcmp

failed=0
pass() { echo "PASS: $1"; }
fail() { echo "FAIL: $1: $2"; failed=1; }
skip() { echo "SKIP: $1: $2"; }
# result NAME WHY: passes when WHY is empty.
result() { if [ -z "$2" ]; then pass "$1"; else fail "$1" "$2"; fi; }

for tool in "$PROG" "$GEN" "$CMP"; do
    if [ ! -x "$tool" ]; then
        fail setup "$tool is missing (run make, or set BIN/BUILD)"
        exit 1
    fi
done

T=$(mktemp -d "${TMPDIR:-/tmp}/gimg-cli.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
# --device auto's cost table (gimg(7)): the defaults, or what this suite
# measures, never the user's cache nor a table of the environment.
export XDG_CACHE_HOME=$T/cache
unset GIMG_COST_TABLE GIMG_COST_CACHE
cd "$T" || exit 1

# bytes V...: writes each decimal V (0-255) as one byte.
bytes() {
    local fmt="" v
    for v in "$@"; do fmt+=$(printf '\\%03o' "$v"); done
    printf "$fmt"
}

# pnm FILE MAGIC W H MAXVAL V...: a binary PNM (P5, P6) of the values
# given, 16-bit ones (MAXVAL over 255) big-endian.
pnm() {
    local file=$1 magic=$2 w=$3 h=$4 maxval=$5 v vals=()
    shift 5
    for v in "$@"; do
        if [ "$maxval" -gt 255 ]; then vals+=($((v >> 8)) $((v & 255))); else vals+=("$v"); fi
    done
    { printf '%s\n%d %d\n%d\n' "$magic" "$w" "$h" "$maxval"; bytes "${vals[@]}"; } >"$file"
}

# Sample-exact comparison; on a difference prints imgcmp's reason.
same() {
    local why
    why=$("$CMP" "$1" "$2" 2>&1) && return 0
    echo "$1 vs $2: ${why:-differ}" | head -n 2 | tr '\n' ' '
    return 1
}

# First bytes of a file, as hex.
magic() { od -An -tx1 -N"$2" "$1" | tr -d ' \n'; }

# expect_fail NAME WANT_STATUS OUTDIR -- COMMAND...: the command must exit
# WANT_STATUS, print "$TOOL: ..." on stderr, nothing on stdout, and leave
# OUTDIR (if given) empty: no output, no temporary file.
expect_fail() {
    local name=$1 want=$2 dir=$3 rc why=""
    shift 4
    "$@" >stdout.bin 2>stderr.txt
    rc=$?
    if [ "$rc" -ne "$want" ]; then
        why="exit status $rc, expected $want ($(head -c 200 stderr.txt | tr '\n' ' '))"
    elif ! head -n 1 stderr.txt | grep -q "^$TOOL: ."; then
        why="stderr does not start with '$TOOL: ': '$(head -c 200 stderr.txt | tr '\n' ' ')'"
    elif [ -s stdout.bin ]; then
        why="wrote $(wc -c <stdout.bin) bytes to stdout"
    elif [ -n "$dir" ] && [ -n "$(ls -A "$dir")" ]; then
        why="left files behind: $(ls -A "$dir" | tr '\n' ' ')"
    fi
    result "$name" "$why"
}

# cpu_under_1s NAME COMMAND...: the command's user + system CPU time is
# under a second (not checked without /usr/bin/time, or under valgrind).
cpu_under_1s() {
    local name=$1 secs
    shift
    if [ -n "${GIMG_TEST_SLOW:-}" ] || [ ! -x /usr/bin/time ]; then
        "$@" >/dev/null 2>&1
        skip "$name" "timing not checked (GIMG_TEST_SLOW or no /usr/bin/time)"
        return
    fi
    /usr/bin/time -f '%U %S' -o time.txt "$@" >/dev/null 2>&1
    secs=$(awk '{ print $1 + $2 }' time.txt | tail -n 1)
    awk "BEGIN { exit !($secs < 1.0) }" && pass "$name" || fail "$name" "took $secs s of CPU"
}

# need_cuda_gpu NAME: a suite that needs a CUDA build and a GPU skips
# NAME and exits 0 without them.
need_cuda_gpu() {
    if "$PROG" --version | grep -q 'not built in'; then
        skip "$1" "this build has no CUDA support"
        exit 0
    fi
    if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
        skip "$1" "no CUDA GPU"
        exit 0
    fi
}

# refused NAME FILE WANT [OPTIONS...]: the tool refuses FILE (exit 1,
# "$TOOL: FILE: ..." holding WANT, nothing written to e/), within a second.
refused() {
    local name=$1 file=$2 want=$3
    shift 3
    mkdir -p e
    expect_fail "$name" 1 e -- "$PROG" "$@" "$file" e/out.png
    grep -q -- "$want" stderr.txt || fail "$name-message" "no '$want' in: $(head -c 200 stderr.txt)"
    head -n 1 stderr.txt | grep -qF "$TOOL: $file: " ||
        fail "$name-names-file" "message does not name $file: $(head -c 200 stderr.txt)"
    cpu_under_1s "$name-fast" "$PROG" "$@" "$file" e/out.png
    rm -f e/*
}
