#!/usr/bin/env bash
# tests/cli_conventions.sh — the conventions every tool shares, as a user
# types them without reading: one spelling per idea (gstats --unit-scale,
# ghist --fractions; the old names suggest the new), unknown long options
# that name what was meant and are never taken for it, unknown names in an
# option's value that list the valid ones, standard input read when no
# INPUT is given and it is not a terminal, -o NAME for an existing folder,
# the folders an -o PATTERN names, and -j bounding the threads (OpenMP's
# included). One PASS/FAIL/SKIP line per test; BIN and BUILD as in
# cli_lib.sh.
TOOL=gtranspose
. "$(dirname "$0")/cli_lib.sh"
GT=$BIN/gtranspose
GS=$BIN/gstats
GH=$BIN/ghist
GC=$BIN/gconv

# A 3x2 8-bit gray image: 0 10 20 / 30 40 51 (max 51 = 255 / 5).
{ printf 'P5\n3 2\n255\n'; bytes 0 10 20 30 40 51; } >g.pgm
# Its transpose, by hand: 0 30 / 10 40 / 20 51.
{ printf 'P5\n2 3\n255\n'; bytes 0 30 10 40 20 51; } >g_t.pgm

# at_terminal COMMAND...: runs COMMAND with standard input a terminal (a
# pseudo-terminal, whose master end it inherits so that the terminal
# lives); exit status 125 when none can be made.
at_terminal() {
    /usr/bin/python3 -c '
import os, pty, sys
try:
    master, slave = pty.openpty()
except OSError:
    sys.exit(125)
os.set_inheritable(master, True)
os.dup2(slave, 0)
os.execvp(sys.argv[1], sys.argv[1:])' "$@"
}
have_pty=0
[ -x /usr/bin/python3 ] && at_terminal test -t 0 2>/dev/null && have_pty=1

# ------------------------------------------------ one spelling, one idea

why=""
got=$("$GS" --unit-scale -s max -c gray g.pgm 2>err.txt) || why="exit $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { [ "$got" = 0.2 ] || why="max on the unit scale: got '$got', expected 0.2 (51/255)"; }
result gstats-unit-scale "$why"

why=""
"$GH" --fractions --csv g.pgm >out.csv 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
# Six pixels, one per value: each counted bin is 1/6 and they sum to 1.
[ -z "$why" ] && why=$(awk -F, 'NR > 1 && $4 != 0 { n++; s += $4; if ($4 - 1/6 > 1e-9 || 1/6 - $4 > 1e-9) bad = $0 }
    END { if (n != 6 || s - 1 > 1e-9 || 1 - s > 1e-9 || bad != "") print "bins " n ", sum " s ", " bad }' out.csv)
result ghist-fractions "$why"

# The old names are unknown options that name the new ones.
expect_old() { # NAME PROG OPTION NEW
    local name=$1 prog=$2 opt=$3 new=$4 why=""
    TOOL=${prog##*/}
    expect_fail "$name" 2 "" -- "$prog" "$opt" g.pgm
    grep -q -- "unknown option '$opt'.*$new" stderr.txt ||
        fail "$name-message" "stderr: $(head -c 200 stderr.txt)"
    TOOL=gtranspose
}
expect_old gstats-old-normalized "$GS" --normalized --unit-scale
expect_old gstats-near-normalize "$GS" --normalize --unit-scale
expect_old ghist-old-normalize "$GH" --normalize --fractions
expect_old ghist-near-normalized "$GH" --normalized --fractions

# ------------------------------------------- unknown long options suggest

suggest() { # NAME WANT -- COMMAND...: exit 2, "did you mean WANT?", no output file
    local name=$1 want=$2 why=""
    shift 3
    mkdir -p e && rm -f e/*
    "$@" >stdout.bin 2>stderr.txt
    local rc=$?
    if [ "$rc" -ne 2 ]; then
        why="exit status $rc, expected 2 ($(head -c 200 stderr.txt))"
    elif ! head -n 1 stderr.txt | grep -q -- "did you mean $want?"; then
        why="stderr: $(head -c 200 stderr.txt)"
    elif [ -s stdout.bin ] || [ -n "$(ls -A e)" ]; then
        why="the near-miss was acted on: $(ls -A e) $(wc -c <stdout.bin) bytes on stdout"
    fi
    result "$name" "$why"
}
suggest suggest-prefix --verbose -- "$GT" --verb g.pgm e/o.pgm
suggest suggest-typo --channel -- "$GS" --chanel gray g.pgm
suggest suggest-swap --cumulative -- "$GH" --cumualtive g.pgm
suggest suggest-missing-letter --op -- "$GT" --o rot90 g.pgm e/o.pgm
suggest suggest-extra-letter --op -- "$GT" --ops rot90 g.pgm e/o.pgm
suggest suggest-with-value --quality -- "$GT" --qualty=50 g.pgm e/o.jpg
suggest suggest-common-option --device -- "$GS" --devcie cpu g.pgm
suggest suggest-two "--progressive or --progress" -- "$GT" --progr g.pgm e/o.pgm
TOOL=gtranspose
expect_fail no-suggestion-far 2 "" -- "$GT" --frobnicate g.pgm
why=""
grep -q "^gtranspose: unknown option '--frobnicate'$" stderr.txt || why="stderr: $(head -c 200 stderr.txt)"
result no-suggestion-far-message "$why"

# ---------------------------- unknown names in values list the valid ones

# lists_valid NAME TRY -- COMMAND...: the command fails with a usage error
# whose message lists names in parentheses; TRY, run with each listed name
# in place of the word @, must accept every one of them.
lists_valid() {
    local name=$1 try=$2 why="" n
    shift 3
    "$@" >stdout.bin 2>stderr.txt
    local rc=$?
    local list
    list=$(head -n 1 stderr.txt | sed -n 's/.*(\(names: \)\{0,1\}\([^()]*\))[^()]*$/\2/p' |
           sed 's/,\{0,1\} or /, /; s/, /\n/g')
    if [ "$rc" -ne 2 ]; then
        why="exit status $rc, expected 2 ($(head -c 200 stderr.txt))"
    elif [ "$(printf '%s\n' "$list" | grep -c .)" -lt 2 ]; then
        why="no list of names: $(head -c 200 stderr.txt)"
    else
        while read -r n; do
            [ -n "$n" ] || continue
            eval "${try//@/$n}" >/dev/null 2>err2.txt ||
                { why="'$n' is listed but refused: $(head -c 200 err2.txt)"; break; }
        done <<<"$list"
    fi
    result "$name" "$why"
}
lists_valid list-op "'$GT' --op @ g.pgm o.pgm" -- "$GT" --op rot45 g.pgm o.pgm
lists_valid list-compress "'$GT' --compress @ g.pgm o.tif" -- "$GT" --compress zip g.pgm o.tif
lists_valid list-subsampling "'$GT' --jpeg-subsampling @ g.pgm o.jpg" \
    -- "$GT" --jpeg-subsampling 411 g.pgm o.jpg
lists_valid list-format "'$GT' -f @ g.pgm o.out" -- "$GT" -f jpeg2000 g.pgm o.out
lists_valid list-format-not-written "'$GT' -f @ g.pgm o.out" -- "$GT" -f gif g.pgm o.out
lists_valid list-gstats-stat "'$GS' -s @ g.pgm" -- "$GS" -s average g.pgm
lists_valid list-gstats-compare-stat "'$GS' --compare g.pgm -s @ g.pgm" \
    -- "$GS" --compare g.pgm -s sssim g.pgm
# No image has every channel: the lists are checked instead.
why=""
"$GS" -c rouge g.pgm 2>stderr.txt && why="accepted -c rouge"
for n in gray red green blue alpha all; do
    [ -z "$why" ] && { grep -q "$n" stderr.txt || why="does not list $n: $(head -c 200 stderr.txt)"; }
done
result list-gstats-channel "$why"
why=""
"$GH" -c rouge g.pgm 2>stderr.txt && why="accepted -c rouge"
for n in gray red green blue alpha luma; do
    [ -z "$why" ] && { grep -q "$n" stderr.txt || why="does not list $n: $(head -c 200 stderr.txt)"; }
done
result list-ghist-channel "$why"
why=""
"$GT" --device gpx g.pgm o.pgm 2>stderr.txt && why="accepted --device gpx"
for n in auto cpu gpu gpu:N gpu:all; do
    [ -z "$why" ] && { grep -q -- "$n" stderr.txt || why="does not list $n: $(head -c 200 stderr.txt)"; }
done
result list-device "$why"

# ----------------------------- standard input when no INPUT is given

why=""
"$GT" --op transpose <g.pgm >o.pgm 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
[ -z "$why" ] && why=$(same o.pgm g_t.pgm)
result stdin-gtranspose-redirect "$why"
why=""
cat g.pgm | "$GT" --op transpose -f pam >o.pam 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { [ "$(magic o.pam 2)" = 5037 ] || why="not a PAM: $(magic o.pam 2)"; }
[ -z "$why" ] && why=$(same o.pam g_t.pgm)
result stdin-gtranspose-pipe "$why"
why=""
got=$(cat g.pgm | "$GS" -s mean -c gray 2>err.txt) || why="exit $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { [ "$got" = 25.1666666666667 ] || [ "$(awk -v g="$got" 'BEGIN { d = g - 151/6; print (d < 1e-9 && d > -1e-9) }')" = 1 ] ||
    why="mean $got, expected 151/6"; }
result stdin-gstats "$why"
why=""
cat g.pgm | "$GH" --csv >a.csv 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { "$GH" --csv g.pgm | sed 's/g\.pgm/standard input/' | cmp -s - a.csv || why="differs from ghist g.pgm"; }
result stdin-ghist "$why"
# With -o DIR/ and no operand, the stream on standard input is the input.
why=""
rm -rf sd && cat g.pgm | "$GT" -o 'sd/%i.pgm' 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
[ -z "$why" ] && why=$(same sd/1.pgm g_t.pgm)
result stdin-with-o-pattern "$why"
# --files-from names the inputs: standard input is not read for an image.
why=""
printf 'g.pgm\n' >list.txt
got=$(printf 'P5\n1 1\n255\n\377' | "$GS" --files-from list.txt -s max -c gray 2>err.txt) ||
    why="exit $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { [ "$got" = 51 ] || why="max $got, expected 51 (g.pgm's, not standard input's)"; }
result stdin-not-with-files-from "$why"
# At a terminal the operand is missing: a usage error, at once.
if [ "$have_pty" = 1 ]; then
    for t in gtranspose gstats ghist gconv; do
        why=""
        args=()
        [ "$t" = gconv ] && args=(-k box:1)
        at_terminal timeout 10 "$BIN/$t" "${args[@]}" >stdout.bin 2>stderr.txt
        rc=$?
        [ "$rc" -eq 2 ] || why="exit status $rc, expected 2 ($(head -c 200 stderr.txt))"
        [ -z "$why" ] && { grep -q "^$t: missing operand" stderr.txt || why="stderr: $(head -c 200 stderr.txt)"; }
        result "terminal-missing-operand-$t" "$why"
    done
else
    skip terminal-missing-operand "no pseudo-terminal (python3's pty)"
fi
# Empty standard input is an empty input, not a missing operand.
TOOL=gstats
expect_fail stdin-empty 1 "" -- "$GS" -s mean </dev/null
why=""
grep -q '^gstats: standard input: empty file' stderr.txt || why="stderr: $(head -c 200 stderr.txt)"
result stdin-empty-message "$why"
TOOL=gtranspose

# ----------------------------------------- -o an existing folder, patterns

why=""
mkdir -p dir1
"$GT" g.pgm -o dir1 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { [ -f dir1/g.pgm ] || why="dir1 holds: $(ls -A dir1)"; }
[ -z "$why" ] && why=$(same dir1/g.pgm g_t.pgm)
result o-existing-folder-one-input "$why"
why=""
cp g.pgm h.pgm
mkdir -p dir2
"$GT" g.pgm h.pgm -o dir2 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { [ -f dir2/g.pgm ] && [ -f dir2/h.pgm ] || why="dir2 holds: $(ls -A dir2)"; }
result o-existing-folder-two-inputs "$why"
why=""
mkdir -p plots
"$GH" --plot plots g.pgm >/dev/null 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { [ -s plots/g.png ] || [ -s plots/g.pgm ] || why="plots holds: $(ls -A plots)"; }
result plot-existing-folder "$why"
# An OUTPUT operand names a file: an existing folder there is an error.
why=""
"$GT" g.pgm dir1 2>err.txt && why="wrote into dir1 ($(ls dir1))"
[ -z "$why" ] && { grep -q '^gtranspose: dir1: ' err.txt || why="stderr: $(head -c 200 err.txt)"; }
result output-operand-folder-is-error "$why"
# A name that is not a folder is still one file.
why=""
"$GT" g.pgm -o plainfile.pgm 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
[ -z "$why" ] && why=$(same plainfile.pgm g_t.pgm)
result o-plain-file "$why"
why=""
mkdir -p in/a in/b
cp g.pgm in/a/x.pgm
cp g.pgm in/b/y.pgm
"$GT" in/a/x.pgm in/b/y.pgm -o 'new/%d/t-%f.pgm' 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { [ -f new/in/a/t-x.pgm ] && [ -f new/in/b/t-y.pgm ] || why="made: $(find new -type f | tr '\n' ' ')"; }
[ -z "$why" ] && why=$(same new/in/a/t-x.pgm g_t.pgm)
result o-pattern-makes-folders "$why"
why=""
cat g.pgm g.pgm | "$GT" -o 'st/%i/img.pgm' 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { [ -f st/1/img.pgm ] && [ -f st/2/img.pgm ] || why="made: $(find st -type f | tr '\n' ' ')"; }
result o-pattern-folders-stream "$why"
# A usage error found before the work makes no folder.
TOOL=gtranspose
expect_fail o-pattern-usage-error-no-folder 2 "" -- "$GT" --op nope g.pgm -o 'nf/%f.pgm'
why=""
[ -e nf ] && why="made nf/"
result o-pattern-usage-error-no-folder-left "$why"

# ------------------------------------------------------- -j bounds threads

# max_threads COMMAND...: runs COMMAND and prints the most threads it was
# seen to have (sampled from /proc every 5 ms; a short peak may be missed,
# so the bound is never wrongly failed, only possibly wrongly passed).
max_threads() {
    "$@" >/dev/null 2>threads-err.txt &
    local pid=$! max=0 n
    while kill -0 "$pid" 2>/dev/null; do
        n=$(ls "/proc/$pid/task" 2>/dev/null | wc -l)
        [ "$n" -gt "$max" ] && max=$n
        sleep 0.005
    done
    wait "$pid" || { echo "failed: $(head -c 200 threads-err.txt)"; return; }
    echo "$max"
}
if [ ! -d /proc/self/task ] || [ -n "${GIMG_TEST_SLOW:-}" ]; then
    skip j-bounds-threads "no /proc/PID/task, or under valgrind"
else
    # A big image, so that the computing lasts long enough to be seen.
    "$GEN" --seed 3 2400 2400 3 8 big.ppm
    cp big.ppm big2.ppm
    # -j 1: the calling thread, one worker and one lane, no OpenMP team.
    got=$(max_threads "$GC" -j 1 --device cpu -k box:12 big.ppm o1.ppm)
    result j1-one-input-threads "$([ "$got" -ge 1 ] 2>/dev/null && [ "$got" -le 3 ] || echo "got $got threads, expected at most 3")"
    got=$(max_threads "$GC" -j 1 --device cpu -k box:12 big.ppm big2.ppm -o 'j1/%f.ppm')
    result j1-batch-threads "$([ "$got" -ge 1 ] 2>/dev/null && [ "$got" -le 3 ] || echo "got $got threads, expected at most 3")"
    got=$(max_threads "$GS" -j 1 --device cpu -s median big.ppm)
    result j1-gstats-threads "$([ "$got" -ge 1 ] 2>/dev/null && [ "$got" -le 3 ] || echo "got $got threads, expected at most 3")"
    # -j 2, one input: the two threads are the lane's OpenMP team.
    got=$(max_threads "$GC" -j 2 --device cpu -k box:12 big.ppm o2.ppm)
    result j2-one-input-threads "$([ "$got" -ge 1 ] 2>/dev/null && [ "$got" -le 4 ] || echo "got $got threads, expected at most 4")"
    why=""
    "$GC" -v -j 1 --device cpu -k box:1 g.pgm o.pgm 2>err.txt || why="exit $?: $(head -c 200 err.txt)"
    [ -z "$why" ] && { grep -q 'backend: cpu (1 threads)' err.txt || why="-v says: $(grep backend err.txt)"; }
    result j1-verbose-one-thread "$why"
    # Same result whatever -j.
    result j-same-result "$(same o1.ppm o2.ppm)"
fi

# A busy machine: the tools' idle OpenMP threads sleep rather than spin
# (gimg_cli_settle_threads, cli.h); a policy of the user's stands.
if [ ! -r /proc/loadavg ] || [ -n "${GIMG_TEST_SLOW:-}" ]; then
    skip busy-machine-threads-sleep "no /proc/loadavg, or under valgrind"
else
    "$GEN" --seed 5 300 200 3 8 busy.ppm
    "$GS" --device cpu busy.ppm >busy-idle.txt
    spinners=()
    for _ in $(seq $((2 * $(nproc) + 2))); do
        (while :; do :; done) &
        spinners+=($!)
    done
    sleep 1
    why=""
    env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$GS" -v --device cpu busy.ppm >busy.txt 2>err.txt ||
        why="exit $?: $(head -c 200 err.txt)"
    [ -z "$why" ] && { grep -q 'threads: idle ones sleep' err.txt || why="-v says: $(grep -E 'backend|threads' err.txt)"; }
    [ -z "$why" ] && { cmp -s busy.txt busy-idle.txt || why="other statistics than on the idle machine"; }
    OMP_WAIT_POLICY=active "$GS" -v --device cpu busy.ppm >/dev/null 2>err2.txt
    [ -z "$why" ] && grep -q 'idle ones sleep' err2.txt && why="OMP_WAIT_POLICY=active was overruled"
    kill "${spinners[@]}" 2>/dev/null
    wait "${spinners[@]}" 2>/dev/null
    result busy-machine-threads-sleep "$why"
fi

exit $failed
