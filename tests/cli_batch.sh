#!/usr/bin/env bash
# tests/cli_batch.sh — many images per process, through gtranspose (the
# other image tools share the same driver, lib/driver.c): batches with mixed
# formats and a corrupt file, -o DIR/ and patterns, name collisions,
# --files-from with awkward names, --fail-fast, PNM/PAM streams on standard
# input; a batch must give exactly what one-at-a-time runs give.
TOOL=gtranspose
. "$(dirname "$0")/cli_lib.sh"

# Inputs of every kind, each also transformed alone as the reference.
mkdir in ref
"$GEN" --seed 1 37 23 3 8 in/a.png &&
    "$GEN" --seed 2 16 9 1 16 in/b.pgm &&
    "$GEN" --seed 3 5 40 4 8 in/c.pam &&
    "$GEN" --seed 4 64 48 3 8 in/d.jpg &&
    "$GEN" --seed 5 7 7 2 16 in/e.png &&
    "$GEN" --seed 6 12 4 3 32 in/f.pfm || { fail setup "gen failed"; exit 1; }
for f in in/*; do
    name=${f##*/}
    "$PROG" --op rot90 "$f" "ref/${name%.*}.pam" 2>/dev/null ||
        "$PROG" --op rot90 "$f" "ref/${name%.*}.pfm" || fail setup "reference for $f"
done
printf 'P6\n10 10\n255\n' >in/corrupt.ppm # truncated: no pixels

# same_as_ref OUTDIR EXT: every output equals the one-at-a-time result.
same_as_ref() {
    local f name why=""
    for f in in/a.png in/b.pgm in/c.pam in/d.jpg in/e.png; do
        name=${f##*/}
        name=${name%.*}
        why=$(same "$1/$name.$2" "ref/$name.pam") || { echo "$why"; return 1; }
    done
}

# ------------------------------------------------------------ -o DIR/
mkdir out1
"$PROG" --op rot90 -o out1/ -f pam in/a.png in/b.pgm in/c.pam in/corrupt.ppm in/d.jpg \
    in/e.png >stdout.bin 2>stderr.txt
rc=$?
why=""
[ $rc -eq 1 ] || why="exit status $rc, expected 1"
[ -z "$why" ] && { grep -q '^gtranspose: in/corrupt.ppm: ' stderr.txt || why="the corrupt file is not named: $(head -c 300 stderr.txt)"; }
[ -z "$why" ] && { [ "$(grep -c . stderr.txt)" -eq 1 ] || why="expected one error line: $(head -c 300 stderr.txt)"; }
[ -z "$why" ] && { [ ! -s stdout.bin ] || why="wrote to stdout"; }
[ -z "$why" ] && { [ "$(ls out1 | tr '\n' ' ')" = "a.pam b.pam c.pam d.pam e.pam " ] || why="outputs: $(ls -A out1 | tr '\n' ' ')"; }
[ -z "$why" ] && why=$(same_as_ref out1 pam)
result batch-dir-mixed-formats-one-corrupt "$why"

# An existing folder needs no slash; without -f the extension stays.
mkdir out2
"$PROG" --op rot90 -o out2 in/a.png in/b.pgm 2>stderr.txt
rc=$?
why=""
[ $rc -eq 0 ] || why="exit status $rc: $(head -c 200 stderr.txt)"
[ -z "$why" ] && { [ "$(ls out2 | tr '\n' ' ')" = "a.png b.pgm " ] || why="outputs: $(ls -A out2 | tr '\n' ' ')"; }
[ -z "$why" ] && { why=$(same out2/a.png ref/a.pam) && why=$(same out2/b.pgm ref/b.pam); }
result batch-existing-dir "$why"

# ------------------------------------------------------------ patterns
"$PROG" --op rot90 -o '%d/%f-%3i.%e.pam' in/a.png in/c.pam 2>stderr.txt
rc=$?
why=""
[ $rc -eq 0 ] || why="exit status $rc: $(head -c 200 stderr.txt)"
[ -z "$why" ] && { [ -f in/a-001.png.pam ] && [ -f in/c-002.pam.pam ] || why="outputs: $(ls in | tr '\n' ' ')"; }
[ -z "$why" ] && { why=$(same in/a-001.png.pam ref/a.pam) && why=$(same in/c-002.pam.pam ref/c.pam); }
rm -f in/*-00?.*.pam
result batch-pattern "$why"
expect_fail batch-pattern-unknown 2 "" -- "$PROG" -o 'x%q' in/a.png in/b.pgm

# ------------------------------------------------------------ collisions
mkdir -p x/one x/two out3
cp in/a.png x/one/same.png
cp in/b.pgm x/two/same.png 2>/dev/null
"$GEN" --seed 9 4 4 1 8 x/two/same.png
expect_fail batch-collision 2 out3 -- "$PROG" -o out3/ x/one/same.png x/two/same.png
why=""
grep -q "x/one/same.png' and 'x/two/same.png' would both be written" stderr.txt ||
    why="message: $(head -c 300 stderr.txt)"
result batch-collision-message "$why"
expect_fail batch-collision-fixed-name 2 out3 -- "$PROG" -o out3/fixed.png in/a.png in/b.pgm
expect_fail batch-needs-o 2 "" -- "$PROG" in/a.png in/b.pgm in/c.pam

# ------------------------------------------------------------ --files-from
mkdir odd out4 out5
cp in/a.png "odd/with space.png"
cp in/c.pam "odd/new
line.pam"
printf '%s\n' "odd/with space.png" in/b.pgm >list.txt
"$PROG" --op rot90 --files-from list.txt -o out4/ -f pam 2>stderr.txt
why=""
[ $? -eq 0 ] || why="exit status: $(head -c 200 stderr.txt)"
[ -z "$why" ] && { why=$(same "out4/with space.pam" ref/a.pam) && why=$(same out4/b.pam ref/b.pam); }
result files-from-lines "$why"
find odd -type f -print0 | "$PROG" --op rot90 --files-from - -0 -o out5/ -f pam 2>stderr.txt
why=""
[ $? -eq 0 ] || why="exit status: $(head -c 200 stderr.txt)"
[ -z "$why" ] && { why=$(same "out5/with space.pam" ref/a.pam) && why=$(same "out5/new
line.pam" ref/c.pam); }
result files-from-nul "$why"
: >empty.txt
expect_fail files-from-empty 2 "" -- "$PROG" --files-from empty.txt -o out5/
expect_fail files-from-missing 1 "" -- "$PROG" --files-from nosuch.txt -o out5/
expect_fail null-without-files-from 2 "" -- "$PROG" -0 -o out5/ in/a.png

# ------------------------------------------------------------ --fail-fast
mkdir many out6
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do cp in/a.png "many/$i.png"; done
"$PROG" -j 1 --fail-fast -o out6/ in/corrupt.ppm many/*.png 2>stderr.txt
rc=$?
n=$(ls out6 | wc -l)
why=""
[ $rc -eq 1 ] || why="exit status $rc"
[ -z "$why" ] && { [ "$n" -lt 12 ] || why="all $n later inputs were still done"; }
result fail-fast "$why"

# ------------------------------------------------------------ streams
# Three images of different sizes and depths in one stream: the result is
# the stream of the one-at-a-time results.
"$GEN" --seed 11 9 5 3 8 s1.ppm && "$GEN" --seed 12 4 6 1 16 s2.pgm &&
    "$GEN" --seed 13 3 3 4 8 s3.pam || fail setup "gen failed"
cat s1.ppm s2.pgm s3.pam >stream.pnm
for f in s1.ppm s2.pgm s3.pam; do "$PROG" --op transverse "$f" -; done >want.pnm
"$PROG" --op transverse - - <stream.pnm >got.pnm 2>stderr.txt
why=""
[ $? -eq 0 ] || why="exit status: $(head -c 200 stderr.txt)"
[ -z "$why" ] && { cmp -s got.pnm want.pnm || why="the output stream differs"; }
result stream-stdin-stdout "$why"
cat stream.pnm | "$PROG" --op rot90 - - | "$PROG" --op rot270 - - >roundtrip.pnm
why=""
cmp -s roundtrip.pnm stream.pnm || why="rot90 then rot270 through two pipes changed the stream"
result stream-pipe-chain "$why"
"$PROG" --op transverse -o 'frame%2i' - <stream.pnm 2>stderr.txt
why=""
[ $? -eq 0 ] || why="exit status: $(head -c 200 stderr.txt)"
[ -z "$why" ] && { cat frame01 frame02 frame03 | cmp -s - want.pnm || why="frames differ"; }
result stream-to-pattern "$why"
expect_fail stream-one-name 1 "" -- sh -c "exec '$PROG' - one.pnm <stream.pnm"
{ cat s1.ppm; printf 'garbage'; } | "$PROG" - - >partial.pnm 2>stderr.txt
rc=$?
why=""
[ $rc -eq 1 ] || why="exit status $rc"
[ -z "$why" ] && { grep -q '^gtranspose: standard input (image 2): ' stderr.txt || why="message: $(head -c 200 stderr.txt)"; }
result stream-trailing-garbage "$why"

# ------------------------------------------------------------ reporting
"$PROG" -v -o out6/ many/1.png many/2.png 2>stderr.txt
why=""
grep -q '^gtranspose: 2 images in .* images/s, .* megapixels/s' stderr.txt || why="no rate line: $(head -c 300 stderr.txt)"
result verbose-rate "$why"
"$PROG" --progress -o out6/ many/*.png 2>stderr.txt
why=""
grep -q '12/12 images' stderr.txt || why="no progress: $(head -c 300 stderr.txt | od -c | head -3)"
result progress-forced "$why"
"$PROG" -o out6/ many/*.png 2>stderr.txt
why=""
[ ! -s stderr.txt ] || why="progress or noise on a non-terminal stderr"
result progress-not-on-pipe "$why"

exit $failed
