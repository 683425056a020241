#!/usr/bin/env bash
# tests/cli_samples.sh — samples/Makefile as people type it: `make -C
# samples` with no arguments on the images "make demo" makes (and a one-line
# hint when there are none), IN/OUT relative to the folder make was called
# from, names with spaces, quotes and upper-case extensions (.JPG, .PNG,
# .Jpeg), one name in two formats refused, names make cannot hold skipped
# with a warning, "make clean" removing only what the Makefile wrote; and
# samples/pipeline.sh on the same awkward names. (tests/cli_batch.sh checks
# the Makefile's targets on plain names and its incremental rebuilds.)
#
# "make -C samples" with no arguments runs in a copy of the tree's layout
# (samples/Makefile beside samples/out/ and bin/), so the test never writes
# into the real tree. Every output is compared with the tools run one at a
# time on the same input.
TOOL=gstats
. "$(dirname "$0")/cli_lib.sh"
# Run by `make test`, the suite inherits make's jobserver and flags: the
# makes it starts are the user's own, started afresh.
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES

if ! command -v make >/dev/null 2>&1; then
    skip samples "make is not installed"
    exit 0
fi
GCONV=$BIN/gconv
GTRANSPOSE=$BIN/gtranspose
GHIST=$BIN/ghist
# The Makefile's own variables must come from the command lines below only.
unset IN OUT

# made_right OUT NAME SRC: OUT holds every target of input SRC under NAME,
# each what the tools give SRC one at a time; prints the first difference.
made_right() {
    local out=$1 name=$2 src=$3
    "$GCONV" -k gaussian:2 "$src" w-blur.pam && "$GTRANSPOSE" --op rot90 w-blur.pam w-up.pam &&
        "$GCONV" -k sobel --abs w-up.pam w-edges.pam || { echo "the tools failed on $src"; return 1; }
    same "$out/blur/$name.png" w-blur.pam && same "$out/upright/$name.png" w-up.pam &&
        same "$out/edges/$name.png" w-edges.pam || return 1
    # The reports name the upright image by its absolute path, as make gave it.
    up="$(cd "$out" && pwd)/upright/$name.png"
    "$PROG" --json "$up" | cmp -s - "$out/stats/$name.json" || { echo "stats/$name.json differs"; return 1; }
    "$GHIST" --csv "$up" | cmp -s - "$out/hist/$name.csv" || { echo "hist/$name.csv differs"; return 1; }
    # One "all" row per image in the summary, named relative to OUT.
    [ "$(grep -cF "upright/$name.png,all," "$out/summary.csv")" -eq 1 ] ||
        { echo "summary.csv has no single row for upright/$name.png"; return 1; }
}

# only_outputs OUT N: OUT holds N images in each folder and N rows in the
# summary, no temporaries.
only_outputs() {
    local out=$1 n=$2 d
    for d in blur upright edges stats hist; do
        [ "$(ls "$out/$d" | wc -l)" -eq "$n" ] || { echo "$d/ holds: $(ls "$out/$d" | tr '\n' ' ')"; return 1; }
    done
    [ "$(grep -c ',all,' "$out/summary.csv")" -eq "$n" ] || { echo "summary.csv: $(tr '\n' ' ' <"$out/summary.csv")"; return 1; }
    [ -z "$(find "$out" -name '*.tmp')" ] || { echo "temporaries left: $(find "$out" -name '*.tmp')"; return 1; }
}

# ------------------------------------------------------------ no arguments
# A tree of the repository's layout; samples/out/ holds what demo.sh puts
# there: its four generated images (gen's commands, smaller) and outputs in
# other formats, which the Makefile does not take.
why=""
grep -q '^OUT=samples/out$' "$ROOT/samples/demo.sh" || why="demo.sh no longer writes to samples/out/"
result samples-demo-folder "$why"
mkdir -p tree/samples/out
cp "$ROOT/samples/Makefile" tree/samples/
ln -s "$BIN" tree/bin
D=tree/samples/out
"$GEN" --pattern gradient 64 40 3 8 "$D/gradient-rgb.png" &&
    "$GEN" --pattern gradient 48 32 4 8 "$D/gradient-rgba.png" &&
    "$GEN" --pattern gradient 51 25 1 16 "$D/gradient-gray16.png" &&
    "$GEN" --seed 42 30 20 3 8 "$D/noise-rgb.ppm" &&
    "$GTRANSPOSE" --op flip "$D/noise-rgb.ppm" "$D/noise-rgb-flip.bmp" &&
    "$GTRANSPOSE" --op flip "$D/gradient-gray16.png" "$D/gradient-gray16-flip.tif" ||
    fail setup "could not make the demo's images"
demo_names="gradient-rgb:png gradient-rgba:png gradient-gray16:png noise-rgb:ppm"

(cd tree && env -u BIN make -s -C samples) >make.log 2>&1
rc=$?
why=""
[ $rc -eq 0 ] || why="exit status $rc: $(tail -c 300 make.log)"
for nx in $demo_names; do
    [ -z "$why" ] || break
    why=$(made_right "$D/processed" "${nx%:*}" "$D/${nx%:*}.${nx#*:}")
done
[ -z "$why" ] && why=$(only_outputs "$D/processed" 4)
[ -z "$why" ] && [ "$(ls tree/samples | tr '\n' ' ')" != "Makefile out " ] &&
    why="wrote outside samples/out/: $(ls tree/samples | tr '\n' ' ')"
result samples-no-arguments "$why"

# The same through -C from elsewhere, as the issue typed it: nothing to redo.
why=""
env -u BIN make -s -q -C tree/samples 2>make.log || why="make -C samples would redo work: $(head -c 200 make.log)"
result samples-no-arguments-up-to-date "$why"

# No images yet: one line saying what to run or pass, status 2, no outputs,
# and never a tool started without operands.
mkdir -p bare/samples
cp "$ROOT/samples/Makefile" bare/samples/
ln -s "$BIN" bare/bin
for state in no-out empty-out; do
    env -u BIN make -s -C bare/samples </dev/null >stdout.txt 2>stderr.txt
    rc=$?
    why=""
    [ $rc -eq 2 ] || why="exit status $rc, expected 2"
    [ -z "$why" ] && [ "$(wc -l <stderr.txt)" -ne 1 ] && why="not one line: $(head -c 300 stderr.txt)"
    [ -z "$why" ] && { grep -q 'make demo' stderr.txt && grep -q 'IN=' stderr.txt ||
        why="no 'make demo' or 'IN=' in: $(head -c 300 stderr.txt)"; }
    [ -z "$why" ] && grep -q 'missing operand' stderr.txt && why="a tool ran: $(head -c 300 stderr.txt)"
    [ -z "$why" ] && [ -s stdout.txt ] && why="printed: $(head -c 200 stdout.txt)"
    [ -z "$why" ] && [ -e bare/samples/out/processed ] && why="made bare/samples/out/processed"
    result "samples-hint-$state" "$why"
    mkdir -p bare/samples/out
done

# ------------------------------------------------------------ relative paths
# IN, OUT and BIN relative to the caller's folder, which -C leaves.
mkdir -p work/photos
"$GEN" --seed 31 23 17 3 8 work/photos/p1.png && "$GEN" --seed 32 19 21 3 16 work/photos/p2.ppm ||
    fail setup "gen failed"
ln -s "$BIN" work/tools
(cd work && make -s -C "$T/tree/samples" IN=photos OUT=res/ BIN=tools) >make.log 2>&1
rc=$?
why=""
[ $rc -eq 0 ] || why="exit status $rc: $(tail -c 300 make.log)"
[ -z "$why" ] && why=$(made_right work/res p1 work/photos/p1.png)
[ -z "$why" ] && why=$(made_right work/res p2 work/photos/p2.ppm)
[ -z "$why" ] && why=$(only_outputs work/res 2)
for stray in tree/samples/photos tree/samples/res; do
    [ -z "$why" ] && [ -e "$stray" ] && why="made $stray"
done
result samples-relative-paths "$why"

# And from samples/ itself, a path going up: the same folder.
why=""
(cd tree/samples && make -s -q IN=../../work/photos OUT=../../work/res BIN=../bin) 2>make.log ||
    why="the same folders named from samples/ are not up to date: $(head -c 200 make.log)"
result samples-relative-from-samples "$why"

# ------------------------------------------------------------ awkward names
# Spaces (in the names and the folders), a quote, upper-case and mixed-case
# extensions; a file of another kind and a hidden one are left alone.
IN_DIR="in put"
mkdir -p "$IN_DIR"
"$GEN" --seed 41 31 22 3 8 w.jpg && mv w.jpg "$IN_DIR/my photo.JPG" &&
    "$GEN" --seed 42 18 26 4 8 w.png && mv w.png "$IN_DIR/Other Pic.PNG" &&
    "$GEN" --seed 43 20 15 3 8 w.jpg && mv w.jpg "$IN_DIR/it's.Jpeg" &&
    "$GEN" --seed 44 16 16 1 16 w.ppm && mv w.ppm "$IN_DIR/raw  two spaces.PPM" &&
    "$GEN" --seed 45 12 9 3 8 "$IN_DIR/lower.png" || fail setup "gen failed"
echo notes >"$IN_DIR/notes.txt"
cp "$IN_DIR/lower.png" "$IN_DIR/.hidden.png"
names="my photo:JPG|Other Pic:PNG|it's:Jpeg|raw  two spaces:PPM|lower:png"
SMAKE=(make -s -C "$T/tree/samples" IN="$IN_DIR" OUT="out put")
"${SMAKE[@]}" -j2 >make.log 2>&1
rc=$?
why=""
[ $rc -eq 0 ] || why="exit status $rc: $(tail -c 300 make.log)"
IFS='|' read -r -a pairs <<<"$names"
for nx in "${pairs[@]}"; do
    [ -z "$why" ] || break
    why=$(made_right "out put" "${nx%:*}" "$IN_DIR/${nx%:*}.${nx#*:}")
done
[ -z "$why" ] && why=$(only_outputs "out put" 5)
result samples-names-spaces-case "$why"

why=""
"${SMAKE[@]}" -q 2>make.log || why="a second make would redo work: $(head -c 200 make.log)"
if [ -z "$why" ]; then
    sleep 1
    touch "$IN_DIR/my photo.JPG"
    "${SMAKE[@]}" -n >plan.txt 2>&1
    grep -q "blur/my photo.png" plan.txt || why="the touched input is not remade: $(head -c 300 plan.txt)"
    grep -v 'summary' plan.txt | grep -Eq "Other Pic|it'|two spaces|lower" &&
        why="untouched inputs are remade: $(head -c 300 plan.txt)"
fi
result samples-names-incremental "$why"

# One name in two formats: refused before any work, both named.
mkdir -p dup
"$GEN" --seed 51 8 8 3 8 dup/a.png && "$GEN" --seed 52 8 8 3 8 w.jpg && mv w.jpg dup/a.JPG &&
    "$GEN" --seed 53 8 8 3 8 dup/b.png || fail setup "gen failed"
make -s -C "$T/tree/samples" IN=dup OUT=dup-out >stdout.txt 2>stderr.txt
rc=$?
why=""
[ $rc -eq 2 ] || why="exit status $rc, expected 2"
[ -z "$why" ] && { grep -q "'a\.\*'" stderr.txt || why="a.* not named: $(head -c 300 stderr.txt)"; }
[ -z "$why" ] && [ -e dup-out ] && why="made dup-out: $(find dup-out | tr '\n' ' ')"
result samples-same-name-two-formats "$why"

# A name make cannot hold (':') is skipped with a warning; the rest is made.
mkdir -p colon
"$GEN" --seed 61 8 8 3 8 "colon/x:y.png" && "$GEN" --seed 62 9 7 3 8 colon/fine.png || fail setup "gen failed"
make -s -C "$T/tree/samples" IN=colon OUT=colon-out >stdout.txt 2>stderr.txt
rc=$?
why=""
[ $rc -eq 0 ] || why="exit status $rc: $(head -c 300 stderr.txt)"
[ -z "$why" ] && { grep -q "skipped.*x:y.png" stderr.txt || why="no warning naming x:y.png: $(head -c 300 stderr.txt)"; }
[ -z "$why" ] && why=$(made_right colon-out fine colon/fine.png)
[ -z "$why" ] && why=$(only_outputs colon-out 1)
result samples-unholdable-name-skipped "$why"

# make clean removes what the Makefile wrote, not what else is in OUT.
mkdir -p "out put" && echo mine >"out put/keep.txt"
"${SMAKE[@]}" clean >make.log 2>&1
rc=$?
why=""
[ $rc -eq 0 ] || why="exit status $rc: $(tail -c 300 make.log)"
[ -z "$why" ] && [ "$(ls -A "out put")" != keep.txt ] && why="out put/ holds: $(ls -A "out put" | tr '\n' ' ')"
[ -z "$why" ] && [ ! -f "$IN_DIR/my photo.JPG" ] && why="clean removed an input"
result samples-clean "$why"

# pipeline.sh takes the same names: its results are the Makefile's upright
# images (made again, as clean removed them).
"${SMAKE[@]}" >make.log 2>&1 || fail setup "make failed again: $(tail -c 300 make.log)"
BIN=$BIN bash "$ROOT/samples/pipeline.sh" "$IN_DIR" "pipe out" >pipe.log 2>&1
rc=$?
why=""
[ $rc -eq 0 ] || why="exit status $rc: $(tail -c 300 pipe.log)"
for nx in "${pairs[@]}"; do
    [ -z "$why" ] || break
    why=$(same "pipe out/${nx%:*}.png" "out put/upright/${nx%:*}.png")
done
[ -z "$why" ] && { [ "$(grep -c ',all,' "pipe out/stats.csv")" -eq 5 ] || why="stats.csv: $(head -c 300 "pipe out/stats.csv")"; }
result samples-pipeline-names "$why"

exit $failed
