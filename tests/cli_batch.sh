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
why=""
grep -q '^gtranspose: -o: several inputs need a pattern' stderr.txt || why="message: $(head -c 300 stderr.txt)"
result batch-fixed-name-message "$why"
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

# ------------------------------------------------------------ -o DIR/ details
# One input with -o DIR/ goes into the folder; a missing DIR/ is made (with
# its parents), but not when the run is refused before any work.
mkdir one
"$PROG" --op rot90 -o one/ in/a.png 2>stderr.txt
rc=$?
why=""
[ $rc -eq 0 ] || why="exit status $rc: $(head -c 200 stderr.txt)"
[ -z "$why" ] && why=$(same one/a.png ref/a.pam)
result batch-dir-one-input "$why"
"$PROG" --op rot90 -o new/deep/ -f pam in/a.png in/b.pgm 2>stderr.txt
rc=$?
why=""
[ $rc -eq 0 ] || why="exit status $rc: $(head -c 200 stderr.txt)"
[ -z "$why" ] && { why=$(same new/deep/a.pam ref/a.pam) && why=$(same new/deep/b.pam ref/b.pam); }
result batch-dir-made "$why"
"$PROG" -o never/ x/one/same.png x/two/same.png 2>/dev/null
why=""
[ -e never ] && why="a refused run made its output folder"
result batch-dir-not-made-when-refused "$why"

# ------------------------------------------------------------ other tools
# gconv shares the driver: a batch equals one-at-a-time runs, and a stream
# is convolved frame by frame (not just its first image).
GCONV=$BIN/gconv GSTATS=$BIN/gstats GHIST=$BIN/ghist
mkdir cref cout
for f in in/a.png in/b.pgm in/c.pam in/d.jpg in/e.png; do
    name=${f##*/}
    "$GCONV" -k box:1 "$f" "cref/${name%.*}.pam" || fail setup "gconv reference for $f"
done
"$GCONV" -k box:1 -o cout/ -f pam in/a.png in/b.pgm in/c.pam in/corrupt.ppm in/d.jpg \
    in/e.png >stdout.bin 2>stderr.txt
rc=$?
why=""
[ $rc -eq 1 ] || why="exit status $rc, expected 1 ($(head -c 200 stderr.txt | tr '\n' ' '))"
[ -z "$why" ] && { grep -q '^gconv: in/corrupt.ppm: ' stderr.txt || why="the corrupt file is not named: $(head -c 300 stderr.txt)"; }
[ -z "$why" ] && { [ ! -s stdout.bin ] || why="wrote to stdout"; }
if [ -z "$why" ]; then
    for n in a b c d e; do why=$(same "cout/$n.pam" "cref/$n.pam") || break; done
fi
result gconv-batch-dir "$why"
find in -name '[ab].*' -print0 | "$GCONV" -k box:1 --files-from - -0 -o 'cout/%f-%i.pam' 2>stderr.txt
rc=$?
why=""
[ $rc -eq 0 ] || why="exit status $rc ($(head -c 200 stderr.txt | tr '\n' ' '))"
[ -z "$why" ] && { why=$(same cout/a-*.pam cref/a.pam) && why=$(same cout/b-*.pam cref/b.pam); }
result gconv-files-from-pattern "$why"
for f in s1.ppm s2.pgm s3.pam; do "$GCONV" -k box:1 "$f" -; done >cwant.pnm
"$GCONV" -k box:1 - - <stream.pnm >cgot.pnm 2>stderr.txt
rc=$?
why=""
[ $rc -eq 0 ] || why="exit status $rc ($(head -c 200 stderr.txt | tr '\n' ' '))"
[ -z "$why" ] && { cmp -s cgot.pnm cwant.pnm || why="the output stream differs from the frames convolved one by one ($(wc -c <cgot.pnm) bytes, want $(wc -c <cwant.pnm))"; }
result gconv-stream "$why"

# Report tools: one report per input, in input order, and a failing input
# named while the others are still reported.
"$GSTATS" --csv -s mean in/a.png in/corrupt.ppm in/b.pgm >stats.csv 2>stderr.txt
rc=$?
why=""
[ $rc -eq 1 ] || why="exit status $rc, expected 1"
[ -z "$why" ] && { grep -q '^gstats: in/corrupt.ppm: ' stderr.txt || why="message: $(head -c 200 stderr.txt)"; }
[ -z "$why" ] && { [ "$(cut -d, -f1 stats.csv | grep '^in/' | uniq | tr '\n' ' ')" = "in/a.png in/b.pgm " ] || why="reports: $(cut -d, -f1 stats.csv | uniq | tr '\n' ' ')"; }
[ -z "$why" ] && { "$GSTATS" --csv -s mean in/b.pgm | tail -n +2 >b.csv; grep -qxFf b.csv stats.csv && [ "$(grep -cxFf b.csv stats.csv)" -eq "$(wc -l <b.csv)" ] || why="the batch's report of in/b.pgm differs from its own"; }
result gstats-one-report-per-input "$why"
"$GHIST" --csv in/a.png in/d.jpg >hist.csv 2>stderr.txt
rc=$?
why=""
[ $rc -eq 0 ] || why="exit status $rc: $(head -c 200 stderr.txt)"
[ -z "$why" ] && { [ "$(cut -d, -f1 hist.csv | grep '^in/' | uniq | tr '\n' ' ')" = "in/a.png in/d.jpg " ] || why="not one report per input: $(cut -d, -f1 hist.csv | uniq | tr '\n' ' ')"; }
result ghist-one-report-per-input "$why"
mkdir eq
"$GHIST" --equalize eq/ in/a.png in/b.pgm >/dev/null 2>stderr.txt
rc=$?
why=""
[ $rc -eq 0 ] || why="exit status $rc: $(head -c 200 stderr.txt)"
for n in a.png b.pgm; do
    [ -z "$why" ] || break
    "$GHIST" --equalize "eq1-$n" "in/$n" >/dev/null 2>&1 || why="ghist --equalize in/$n failed"
    [ -z "$why" ] && why=$(same "eq/$n" "eq1-$n")
done
result ghist-equalize-dir "$why"
# A missing DIR/ is made, with its parents, for --equalize and --plot alike.
"$GHIST" --equalize new/eq/ --plot new/plots/ in/a.png in/b.pgm >/dev/null 2>stderr.txt
rc=$?
why=""
[ $rc -eq 0 ] || why="exit status $rc: $(head -c 200 stderr.txt)"
for n in a.png b.pgm; do
    [ -z "$why" ] || break
    why=$(same "new/eq/$n" "eq/$n")
    [ -z "$why" ] && [ ! -s "new/plots/$n" ] && why="no plot new/plots/$n"
done
result ghist-output-folders-made "$why"

# The report tools on the driver: --files-from with NUL-separated awkward
# names, a stream of frames of different sizes, -j keeping input order,
# --fail-fast, -v's rate line. Each report must be the one a run on that
# input alone prints.
mkdir rodd
cp in/a.png "rodd/with space.png"
cp in/b.pgm "rodd/new
line.pgm"
cp in/c.pam "rodd/x y z.pam"
for tool in gstats ghist; do
    T_PROG=$BIN/$tool
    opts=(--json)
    [ $tool = gstats ] && opts=(--json -s mean,max,p50)
    [ $tool = ghist ] && opts=(--json --bins 7 --luma)
    : >want.json
    for f in "rodd/new
line.pgm" "rodd/with space.png" "rodd/x y z.pam"; do
        "$T_PROG" "${opts[@]}" "$f" >>want.json 2>/dev/null || fail setup "$tool $f alone"
    done
    printf '%s\0' "rodd/new
line.pgm" "rodd/with space.png" "rodd/x y z.pam" >list0
    "$T_PROG" "${opts[@]}" --files-from - -0 <list0 >got.json 2>stderr.txt
    rc=$?
    why=""
    [ $rc -eq 0 ] || why="exit status $rc ($(head -c 200 stderr.txt | tr '\n' ' '))"
    [ -z "$why" ] && { cmp -s got.json want.json || why="reports differ from one-at-a-time runs: $(head -c 300 got.json)"; }
    result "$tool-files-from-nul" "$why"

    # A stream of 3 frames of different sizes and layouts: 3 reports, each
    # the frame's own, named "standard input (image N)".
    : >want.json
    n=0
    for f in s1.ppm s2.pgm s3.pam; do
        n=$((n + 1))
        "$T_PROG" "${opts[@]}" - <"$f" 2>/dev/null |
            sed "s/\"standard input\"/\"standard input (image $n)\"/" >>want.json
    done
    "$T_PROG" "${opts[@]}" - <stream.pnm >got.json 2>stderr.txt
    rc=$?
    why=""
    [ $rc -eq 0 ] || why="exit status $rc ($(head -c 200 stderr.txt | tr '\n' ' '))"
    [ -z "$why" ] && { [ "$(grep -c . got.json)" -eq 3 ] || why="$(grep -c . got.json) reports, expected 3"; }
    [ -z "$why" ] && { cmp -s got.json want.json || why="reports differ from one frame at a time: $(head -c 300 got.json)"; }
    result "$tool-stream-per-frame" "$why"

    # -j 2: a large image first, small ones after; reports in input order
    # and the same as -j 1's.
    [ -f big.ppm ] || "$GEN" --seed 31 1600 1200 3 8 big.ppm || fail setup "gen big.ppm"
    order=(big.ppm s3.pam in/a.png s2.pgm in/e.png s1.ppm in/b.pgm)
    "$T_PROG" "${opts[@]}" -j 1 "${order[@]}" >want.json 2>/dev/null
    "$T_PROG" "${opts[@]}" -j 2 "${order[@]}" >got.json 2>stderr.txt
    rc=$?
    why=""
    [ $rc -eq 0 ] || why="exit status $rc ($(head -c 200 stderr.txt | tr '\n' ' '))"
    files=$(grep -o '"file": *"[^"]*"' got.json | sed 's/.*"\([^"]*\)"$/\1/' | tr '\n' ' ')
    [ -z "$why" ] && { [ "$files" = "${order[*]} " ] || why="order: $files"; }
    [ -z "$why" ] && { cmp -s got.json want.json || why="-j 2 and -j 1 differ"; }
    result "$tool-jobs-input-order" "$why"

    # --fail-fast: the first input fails, not all the others are reported.
    "$T_PROG" "${opts[@]}" -j 1 --fail-fast in/corrupt.ppm many/*.png >got.json 2>stderr.txt
    rc=$?
    why=""
    [ $rc -eq 1 ] || why="exit status $rc, expected 1 ($(head -c 200 stderr.txt | tr '\n' ' '))"
    [ -z "$why" ] && { grep -q "^$tool: in/corrupt.ppm: " stderr.txt || why="message: $(head -c 200 stderr.txt)"; }
    [ -z "$why" ] && { [ "$(grep -c . got.json)" -lt 12 ] || why="all 12 later inputs were still reported"; }
    result "$tool-fail-fast" "$why"
    # Without it, a failing input is named and the others go on.
    "$T_PROG" "${opts[@]}" -j 2 many/1.png in/corrupt.ppm many/2.png >got.json 2>stderr.txt
    rc=$?
    why=""
    [ $rc -eq 1 ] || why="exit status $rc, expected 1"
    [ -z "$why" ] && { [ "$(grep -c . stderr.txt)" -eq 1 ] && grep -q "^$tool: in/corrupt.ppm: " stderr.txt || why="stderr: $(head -c 200 stderr.txt)"; }
    [ -z "$why" ] && { [ "$(grep -o '"file": *"[^"]*"' got.json | tr -d ' ' | tr '\n' ' ')" = '"file":"many/1.png" "file":"many/2.png" ' ] || why="reports: $(head -c 200 got.json)"; }
    result "$tool-failure-others-go-on" "$why"
    # Tables are set apart by a blank line, none before the first printed,
    # even when the first input is the one that failed.
    "$T_PROG" in/corrupt.ppm many/1.png many/2.png >got.txt 2>stderr.txt
    why=""
    [ "$(head -c 1 got.txt | od -An -c | tr -d ' ')" != '\n' ] || why="the output starts with a blank line"
    [ -z "$why" ] && { [ "$(grep -c '^$' got.txt)" -eq 1 ] || why="$(grep -c '^$' got.txt) blank lines between two tables"; }
    result "$tool-first-failed-no-leading-blank" "$why"

    "$T_PROG" -v many/1.png many/2.png >/dev/null 2>stderr.txt
    why=""
    grep -q "^$tool: 2 images in .* images/s, .* megapixels/s" stderr.txt || why="no rate line: $(head -c 300 stderr.txt)"
    result "$tool-verbose-rate" "$why"
done

# ghist's CSV: one header for a batch with -j 2 and a stream; a layout
# other than the first report's is still refused, in input order.
"$GHIST" --csv --bins 4 -j 2 in/a.png in/d.jpg in/b.pgm in/e.png >got.csv 2>stderr.txt
rc=$?
why=""
[ $rc -eq 1 ] || why="exit status $rc, expected 1"
[ -z "$why" ] && { [ "$(grep -c '^file,bin,lo,hi,red,green,blue$' got.csv) $(grep -c '^file,' got.csv)" = "1 1" ] || why="headers: $(grep '^file' got.csv | tr '\n' ' ')"; }
[ -z "$why" ] && { [ "$(cut -d, -f1 got.csv | grep '^in/' | uniq | tr '\n' ' ')" = "in/a.png in/d.jpg " ] || why="reports: $(cut -d, -f1 got.csv | uniq | tr '\n' ' ')"; }
[ -z "$why" ] && { grep -q '^ghist: in/b.pgm: .*(gray).*(red,green,blue)' stderr.txt && grep -q '^ghist: in/e.png: ' stderr.txt || why="stderr: $(head -c 300 stderr.txt)"; }
result ghist-csv-one-header-jobs "$why"
"$GHIST" --csv --bins 2 -c luma - <stream.pnm >got.csv 2>stderr.txt
rc=$?
why=""
[ $rc -eq 0 ] || why="exit status $rc ($(head -c 200 stderr.txt | tr '\n' ' '))"
[ -z "$why" ] && { [ "$(grep -c '^file,' got.csv) $(grep -c '^standard input (image [123]),' got.csv)" = "1 15" ] || why="got: $(head -c 300 got.csv)"; }
result ghist-csv-stream "$why"
# --equalize - on a stream: a stream of the frames equalized one by one.
for f in s1.ppm s2.pgm s3.pam; do "$GHIST" --equalize - "$f"; done >want.pnm
"$GHIST" --equalize - - <stream.pnm >got.pnm 2>stderr.txt
rc=$?
why=""
[ $rc -eq 0 ] || why="exit status $rc ($(head -c 200 stderr.txt | tr '\n' ' '))"
[ -z "$why" ] && { cmp -s got.pnm want.pnm || why="the equalized stream differs from the frames one by one"; }
result ghist-equalize-stream "$why"
# gstats --compare: the reference is read once (from standard input here,
# which could not be read twice) and each input compared with it.
"$GSTATS" --compare - --csv -s differing -c all s1.ppm in/a.png s1.ppm <s1.ppm >got.csv 2>stderr.txt
rc=$?
why=""
[ $rc -eq 2 ] || why="exit status $rc, expected 2 (in/a.png is another size: trouble, in compare mode)"
[ -z "$why" ] && { [ "$(tr '\n' ' ' <got.csv)" = "reference,file,channel,differing standard input,s1.ppm,all,0 standard input,s1.ppm,all,0 " ] || why="got: $(tr '\n' ' ' <got.csv)"; }
[ -z "$why" ] && { grep -q '^gstats: in/a.png: size' stderr.txt || why="stderr: $(head -c 200 stderr.txt)"; }
result gstats-compare-reference-once "$why"

# ------------------------------------------------------------ composition
# samples/Makefile and samples/pipeline.sh on images the project makes (the
# three formats the Makefile takes, gray and alpha among them): every
# target equals the tools run one at a time, a second make has nothing to
# do, a touched input remakes its own targets only, and the pipeline script
# gives the Makefile's upright images, and a stream whose frames are what
# flip, blur, flip give one image at a time.
mkdir -p smp/in
"$GEN" --seed 21 40 30 3 8 smp/in/one.png && "$GEN" --seed 22 33 21 3 8 smp/in/two.jpg &&
    "$GEN" --seed 23 20 25 3 16 smp/in/three.ppm && "$GEN" --seed 24 17 19 4 8 smp/in/four.png ||
    fail setup "gen failed"
names="one two three four"
SMAKE=(make -s -C "$ROOT/samples" IN="$T/smp/in" OUT="$T/smp/out" BIN="$BIN")
"${SMAKE[@]}" -j2 >make.log 2>&1
rc=$?
why=""
[ $rc -eq 0 ] || why="make failed: $(tail -c 300 make.log)"
for n in $names; do
    [ -z "$why" ] || break
    src=$(ls smp/in/$n.*)
    "$GCONV" -k gaussian:2 "$src" w-blur.pam && "$PROG" --op rot90 w-blur.pam w-up.pam &&
        "$GCONV" -k sobel --abs w-up.pam w-edges.pam || { why="the tools failed on $src"; break; }
    why=$(same "smp/out/blur/$n.png" w-blur.pam) && why=$(same "smp/out/upright/$n.png" w-up.pam) &&
        why=$(same "smp/out/edges/$n.png" w-edges.pam)
    [ -z "$why" ] && { "$GSTATS" --json "$T/smp/out/upright/$n.png" | cmp -s - "smp/out/stats/$n.json" || why="stats/$n.json differs"; }
    [ -z "$why" ] && { "$GHIST" --csv "$T/smp/out/upright/$n.png" | cmp -s - "smp/out/hist/$n.csv" || why="hist/$n.csv differs"; }
    [ -z "$why" ] && { grep -q "upright/$n.png,all," smp/out/summary.csv || why="summary.csv lacks $n"; }
done
[ -z "$why" ] && { [ -z "$(find smp/out -name '*.tmp')" ] || why="temporaries left: $(find smp/out -name '*.tmp')"; }
result samples-makefile "$why"
why=""
"${SMAKE[@]}" -q || why="a second make would redo work"
if [ -z "$why" ]; then
    sleep 1
    touch smp/in/two.jpg
    "${SMAKE[@]}" -n >plan.txt 2>&1
    grep -q '/two\.' plan.txt || why="a touched input is not remade: $(head -c 300 plan.txt)"
    grep -v -- '-s mean' plan.txt | grep -Eq '/(one|three|four)\.' &&
        why="untouched inputs are remade: $(head -c 300 plan.txt)"
fi
result samples-makefile-incremental "$why"
BIN=$BIN bash "$ROOT/samples/pipeline.sh" smp/in smp/pipe >pipe.log 2>&1
rc=$?
why=""
[ $rc -eq 0 ] || why="pipeline.sh failed: $(tail -c 300 pipe.log)"
for n in $names; do
    [ -z "$why" ] || break
    why=$(same "smp/pipe/$n.png" "smp/out/upright/$n.png")
done
[ -z "$why" ] && { [ "$(grep -c ',all,' smp/pipe/stats.csv)" -eq 4 ] || why="stats.csv: $(head -c 200 smp/pipe/stats.csv)"; }
if [ -z "$why" ]; then
    (cd smp && "$PROG" --op transpose - -o 'frame%i.pam' <pipe/stream.pam) 2>stderr.txt ||
        why="stream.pam is not a stream: $(head -c 200 stderr.txt)"
    n_frames=$(ls smp/frame*.pam 2>/dev/null | wc -l)
    [ -z "$why" ] && [ "$n_frames" -ne 4 ] && why="stream.pam holds $n_frames frames, not 4"
    i=0
    for f in smp/in/*.png smp/in/*.jpg smp/in/*.ppm; do   # pipeline.sh's order
        [ -z "$why" ] || break
        i=$((i + 1))
        n=${f##*/}
        "$PROG" --op transpose "smp/frame$i.pam" w-frame.pam &&
            "$PROG" --op flip "$f" - | "$GCONV" -k gaussian:2 - - | "$PROG" --op flip - w-one.pam &&
            why=$(same w-frame.pam w-one.pam) || why=${why:-"frame $i: the tools failed"}
    done
fi
result samples-pipeline "$why"

# ------------------------------------------------------------ the documented local spread
# README's and gimg(7)'s local form of spreading a batch: xargs splits the
# list into chunks of files, one gimg process per chunk, in parallel.
mkdir -p spread/in spread/out
for i in 01 02 03 04 05 06 07; do cp in/a.png "spread/in/p$i.png"; done
cp in/b.pgm "spread/in/with space.pgm"
(cd spread && find in -type f -print0 | xargs -0 -n 3 -P 2 "$PROG" --op rot90 -j 1 -o out/ -f pam) 2>stderr.txt
rc=$?
why=""
[ $rc -eq 0 ] || why="exit status $rc: $(head -c 200 stderr.txt)"
[ -z "$why" ] && { [ "$(ls spread/out | wc -l)" -eq 8 ] || why="outputs: $(ls spread/out | tr '\n' ' ')"; }
for i in 01 02 03 04 05 06 07; do
    [ -z "$why" ] || break
    why=$(same "spread/out/p$i.pam" ref/a.pam)
done
[ -z "$why" ] && why=$(same "spread/out/with space.pam" ref/b.pam)
result spread-xargs-local "$why"

# ------------------------------------------------------------ GPU lists
# --device gpu:all and gpu:N,M spread a batch over the GPUs, two lanes each;
# the results must be the CPU's, byte for byte, and -v names each GPU that
# worked. Needs a CUDA build and a GPU (make test-gpu); on a machine without
# one, gpu:all must fail with a message, as gpu does. The tools' own GPU
# contexts (GIMG_SERVER=off): gimgd holds every GPU of the machine, and
# its -v says "N gpus (...), in gimgd" for them all.
n_gpus=0
if "$PROG" --version | grep -q CUDA && command -v nvidia-smi >/dev/null 2>&1; then
    n_gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
fi
mkdir gpuin
for i in $(seq 1 12); do
    "$GEN" --seed $((20 + i)) $((90 + 7 * i)) $((40 + 5 * i)) $((i % 4 + 1)) $((i % 3 == 0 ? 16 : 8)) "gpuin/g$i.pam"
done
# gpu_batch NAME DEVICE: gconv, gtranspose and gstats over gpuin/ on DEVICE
# equal their --device cpu runs.
gpu_batch() {
    local name=$1 dev=$2 why="" t
    rm -rf gpu_cpu gpu_dev && mkdir gpu_cpu gpu_dev
    "$GCONV" --device cpu -k gaussian:1.5 -o gpu_cpu/%f.c.pam gpuin/*.pam &&
        "$PROG" --device cpu --op rot270 -o gpu_cpu/%f.t.pam gpuin/*.pam &&
        "$GSTATS" --device cpu gpuin/*.pam >gpu_cpu/stats.txt || why="the CPU runs failed"
    [ -z "$why" ] && { GIMG_SERVER=off "$GCONV" --device "$dev" -v -k gaussian:1.5 -o gpu_dev/%f.c.pam gpuin/*.pam 2>gpu_err.txt &&
        GIMG_SERVER=off "$PROG" --device "$dev" --op rot270 -o gpu_dev/%f.t.pam gpuin/*.pam &&
        GIMG_SERVER=off "$GSTATS" --device "$dev" gpuin/*.pam >gpu_dev/stats.txt 2>>gpu_err.txt ||
        why="--device $dev failed: $(head -c 300 gpu_err.txt)"; }
    [ -z "$why" ] && { diff -r -q gpu_cpu gpu_dev >/dev/null || why="--device $dev differs from the CPU: $(diff -r -q gpu_cpu gpu_dev | head -3 | tr '\n' ' ')"; }
    for t in $3; do
        [ -z "$why" ] && { grep -q "^gconv: backend: gpu $t " gpu_err.txt || why="-v does not name GPU $t: $(grep backend gpu_err.txt | tr '\n' ' ')"; }
    done
    [ -z "$why" ] && grep -q '^gconv: backend: cpu' gpu_err.txt && why="-v says the CPU ran: $(grep backend gpu_err.txt | tr '\n' ' ')"
    result "$name" "$why"
}
if [ "$n_gpus" -ge 1 ]; then
    all=$(seq -s ' ' 0 $((n_gpus - 1)))
    gpu_batch gpu-all-equals-cpu gpu:all "$all"
    gpu_batch gpu-list-of-one-equals-cpu gpu:0 "0"
    if [ "$n_gpus" -ge 2 ]; then
        gpu_batch gpu-list-1-0-equals-cpu gpu:1,0 "1 0"
    else
        skip gpu-list-1-0-equals-cpu "one GPU here ($n_gpus)"
    fi
    rm -rf gpu_dev && mkdir gpu_dev
    expect_fail gpu-list-missing-gpu 1 gpu_dev -- "$PROG" --device "gpu:0,$n_gpus" --op rot90 -o gpu_dev/ gpuin/g1.pam
    grep -q "no GPU $n_gpus" stderr.txt || fail gpu-list-missing-gpu-message "got: $(head -c 200 stderr.txt)"
else
    rm -rf gpu_dev && mkdir gpu_dev
    expect_fail gpu-all-without-gpu 1 gpu_dev -- "$PROG" --device gpu:all --op rot90 -o gpu_dev/ gpuin/g1.pam gpuin/g2.pam
    grep -q "no usable GPU" stderr.txt || fail gpu-all-without-gpu-message "got: $(head -c 200 stderr.txt)"
fi

exit $failed
