#!/usr/bin/env bash
# tests/cli_faults.sh — file handling and resource faults across the tools:
# endless inputs refused from their first bytes, a write cut by the
# file-size limit, signals that end a tool while it writes, what a
# replaced file keeps, how messages show hostile file names, and the
# header and option faults that used to be reported with the wrong words.
#
# One PASS/FAIL/SKIP line per test; BIN and BUILD as in cli_lib.sh.
# GIMG_TEST_SLOW=1 (tests/valgrind.sh sets it) skips the time and memory
# bounds. tests/cli_hardening.sh has the corrupt files and the signals
# caught mid-write.
TOOL=gstats
. "$(dirname "$0")/cli_lib.sh"
export LC_ALL=C

# bounded NAME COMMAND...: the command ends (20 s at most), within a second
# of CPU and 100 MB of memory; its stdout and stderr are left in
# stdout.bin and stderr.txt, its exit status in $rc.
bounded() {
    local name=$1 kb secs
    shift
    if [ -n "${GIMG_TEST_SLOW:-}" ] || [ ! -x /usr/bin/time ]; then
        timeout 20 "$@" >stdout.bin 2>stderr.txt
        rc=$?
        skip "$name-bounds" "time and memory not checked (GIMG_TEST_SLOW or no /usr/bin/time)"
        return
    fi
    timeout 5 /usr/bin/time -f '%M %U %S' -o time.txt "$@" >stdout.bin 2>stderr.txt
    rc=$?
    read -r kb secs < <(awk '{ print $1, $2 + $3 }' time.txt | tail -n 1)
    if [ -z "$kb" ]; then
        fail "$name-bounds" "no measurement (exit status $rc)"
    elif [ "$kb" -ge 100000 ] || ! awk "BEGIN { exit !($secs < 1.0) }"; then
        fail "$name-bounds" "$kb KB and $secs s of CPU (bounds: 100 MB, 1 s)"
    else
        pass "$name-bounds"
    fi
}

# refused_with NAME WANT: the last bounded run exited 1 with WANT on
# stderr and nothing on stdout.
refused_with() {
    local why=""
    [ "$rc" -eq 1 ] || why="exit status $rc ($(head -c 200 stderr.txt | tr '\n' ' '))"
    [ -z "$why" ] && ! grep -qF -- "$2" stderr.txt && why="no '$2' in: $(head -c 200 stderr.txt)"
    [ -z "$why" ] && [ -s stdout.bin ] && why="wrote to stdout"
    result "$1" "$why"
}

"$GEN" --seed 3 40 30 3 8 small.ppm
"$GEN" --seed 6 1000 1000 3 8 big.ppm
printf 'P1\n1 1\n0\n' >tiny.pbm     # an image shorter than the sniffing window

# ------------------------------------------------------------ endless inputs

# No known magic in the first bytes: refused before the rest is read.
bounded endless-file "$PROG" /dev/zero
refused_with endless-file "gstats: /dev/zero: unrecognised image format"
bounded endless-stdin "$PROG" - </dev/zero
refused_with endless-stdin "gstats: standard input: unrecognised image format"
# A format we name but do not read keeps its own message.
bounded endless-psd-stream bash -c '{ printf 8BPS; exec cat /dev/zero; } | "$0" -' "$PROG"
refused_with endless-psd-stream "standard input: PSD format not supported"
bounded endless-text-stream bash -c 'exec "$0" - < <(yes)' "$PROG"
refused_with endless-text-stream "standard input: unrecognised image format"
# A PNM stream of endless comments in a header, or endless whitespace
# after an image: refused past 1 MiB of them (the image before is reported,
# on the CPU: a GPU context alone is over the memory bound).
bounded endless-header-comments bash -c '{ printf "P5\n"; exec yes "#"; } | "$0" -' "$PROG"
refused_with endless-header-comments "over 1048576 bytes of whitespace and comments in a row"
bounded endless-whitespace-after bash -c '{ printf "P5 1 1 255\n\0"; exec yes ""; } | "$0" --device cpu -' "$PROG"
result endless-whitespace-after "$([ "$rc" -eq 1 ] &&
    grep -qF "standard input (image 2): invalid PNM stream: over 1048576 bytes of whitespace" stderr.txt ||
    echo "exit status $rc: $(head -c 200 stderr.txt)")"
# Images through pipes, long and short, are still read.
why=""
for f in big.ppm tiny.pbm; do
    # The same statistics (the first line names the input).
    cat "$f" | timeout 20 "$PROG" -s mean - 2>stderr.txt | tail -n +2 >stdout.bin ||
        why="$f: $(head -c 200 stderr.txt)"
    timeout 20 "$PROG" -s mean "$f" 2>/dev/null | tail -n +2 >want.txt
    [ -z "$why" ] && { [ ! -s want.txt ] || ! cmp -s stdout.bin want.txt; } &&
        why="$f: the piped report differs"
done
cat small.ppm | timeout 20 "$BIN/gtranspose" --op rot90 - - | timeout 20 "$PROG" -s mean - \
    >stdout.bin 2>stderr.txt || why="${why:-a stream through gtranspose: $(head -c 200 stderr.txt)}"
result pipes-still-read "$why"

# Lists: a NUL in a line, a name longer than a path, and endless empty
# entries are not a list of file names.
bounded list-dev-zero "$PROG" --files-from /dev/zero
refused_with list-dev-zero "gstats: --files-from /dev/zero: line 1 holds a NUL byte"
bounded list-dev-zero-nul "$PROG" -0 --files-from /dev/zero
refused_with list-dev-zero-nul "empty names in a row"
bounded list-stdin-zero "$PROG" --files-from - </dev/zero
refused_with list-stdin-zero "--files-from standard input: line 1 holds a NUL byte"
bounded list-long-line bash -c 'tr "\0" a </dev/zero | "$0" --files-from -' "$PROG"
refused_with list-long-line "line 1 is longer than a path can be"
bounded list-empty-lines bash -c 'yes "" | "$0" --files-from -' "$PROG"
refused_with list-empty-lines "empty lines in a row"
head -c 5000 /dev/zero | tr '\0' b >long.txt
{ echo small.ppm; cat long.txt; echo; } >long-list.txt
bounded list-long-line-file "$PROG" --files-from long-list.txt
refused_with list-long-line-file "line 2 is longer than a path can be"
# A list of real names still works, blank lines and all.
printf 'small.ppm\n\ntiny.pbm\n' >ok-list.txt
timeout 20 "$PROG" -s mean --files-from ok-list.txt >stdout.bin 2>stderr.txt
rc=$?
why=""
[ "$rc" -eq 0 ] && grep -q "^small.ppm: " stdout.bin && grep -q "^tiny.pbm: " stdout.bin ||
    why="exit status $rc: $(head -c 200 stderr.txt)"
result list-still-read "$why"

# --------------------------------------------------- the file-size limit

# SIGXFSZ left at its default action: the tool ignores it, so the write
# fails with EFBIG, is reported, and leaves no temporary file.
mkdir -p fsz
(ulimit -f 64; exec timeout 20 "$BIN/gtranspose" --op rot90 big.ppm fsz/out.ppm) \
    >stdout.bin 2>stderr.txt
rc=$?
why=""
[ "$rc" -eq 1 ] || why="exit status $rc (a signal: $((rc > 128 ? rc - 128 : 0)))"
[ -z "$why" ] && ! grep -q "^gtranspose: fsz/out.ppm: .*File too large" stderr.txt &&
    why="message: $(head -c 200 stderr.txt)"
[ -z "$why" ] && [ -n "$(ls -A fsz)" ] && why="left $(ls -A fsz | tr '\n' ' ')"
result file-size-limit-sigxfsz-default "$why"
# In a batch, every output is refused the same way and nothing is left.
rm -rf fsz && mkdir -p fsz
(ulimit -f 64; exec timeout 20 "$BIN/gtranspose" --op rot90 -j 4 -o fsz/ big.ppm small.ppm) \
    >stdout.bin 2>stderr.txt
rc=$?
why=""
[ "$rc" -eq 1 ] || why="exit status $rc"
[ -z "$why" ] && [ "$(ls -A fsz)" != "small.ppm" ] && why="fsz/ holds: $(ls -A fsz | tr '\n' ' ')"
result file-size-limit-batch "$why"

# ------------------------------------------------------------ signals

# A report tool writing into `head`: death by SIGPIPE, without a word
# (2000 reports are far more than a pipe holds).
for _ in $(seq 2000); do echo small.ppm; done >many.txt
for tool in gstats ghist; do
    timeout 20 "$BIN/$tool" --files-from many.txt 2>stderr.txt | head -c 1 >/dev/null
    rc=${PIPESTATUS[0]}
    why=""
    [ "$rc" -eq 141 ] || why="exit status $rc, expected 141 (death by SIGPIPE)"
    [ -z "$why" ] && [ -s stderr.txt ] && why="a message: $(head -c 200 stderr.txt)"
    result "sigpipe-$tool-into-head" "$why"
done

# ------------------------------------------------------ replaced files

# A replaced file keeps its permission bits and (as root) its owner and
# group; it is a new file, so a hard link keeps the old contents.
"$BIN/gtranspose" --op rot90 small.ppm kept.ppm
chmod 600 kept.ppm
"$BIN/gtranspose" --op rot180 small.ppm kept.ppm
why=""
[ "$(stat -c %a kept.ppm)" = 600 ] || why="mode $(stat -c %a kept.ppm), expected 600"
result replace-keeps-mode "$why"
chmod 640 kept.ppm
"$BIN/gtranspose" --op rot90 small.ppm kept.ppm
result replace-keeps-mode-640 "$([ "$(stat -c %a kept.ppm)" = 640 ] || echo "mode $(stat -c %a kept.ppm)")"
if [ "$(id -u)" -eq 0 ] && getent passwd nobody >/dev/null; then
    group=$(id -gn nobody)
    chown nobody:"$group" kept.ppm
    "$BIN/gtranspose" --op rot180 small.ppm kept.ppm
    why=""
    [ "$(stat -c %U:%G kept.ppm)" = "nobody:$group" ] || why="owner $(stat -c %U:%G kept.ppm)"
    result replace-keeps-owner "$why"
else
    skip replace-keeps-owner "needs root and a user nobody"
fi
"$BIN/gtranspose" --op rot90 small.ppm linked.ppm
ln linked.ppm link2.ppm
cp linked.ppm before.ppm
"$BIN/gtranspose" --op rot180 small.ppm linked.ppm
why=""
cmp -s link2.ppm before.ppm || why="the other link changed"
cmp -s linked.ppm before.ppm && why="the file was not replaced"
[ "$(stat -c %h linked.ppm)" = 1 ] || why="${why:-the link count is $(stat -c %h linked.ppm)}"
result replace-splits-hard-links "$why"

# ------------------------------------------------------------- messages

# Control characters in names are escaped (an ESC never reaches the
# terminal), as are the C1 controls of UTF-8, and a CR that a Windows
# list left at the end of a line shows.
esc=$(printf 'x\033[31mred\302\233y')
timeout 20 "$PROG" "$esc.ppm" >stdout.bin 2>stderr.txt
why=""
grep -q $'\033' stderr.txt && why="a raw ESC on stderr"
grep -q $'\302\233' stderr.txt && why="a raw C1 CSI on stderr"
[ -z "$why" ] && ! grep -qF 'gstats: x\033[31mred\302\233y.ppm: No such file' stderr.txt &&
    why="message: $(head -c 200 stderr.txt | od -c | head -n 3)"
result name-escape-control "$why"
printf 'small.ppm\r\n' >crlf.txt
timeout 20 "$PROG" --files-from crlf.txt >stdout.bin 2>stderr.txt
why=""
grep -q $'\r' stderr.txt && why="a raw CR on stderr"
[ -z "$why" ] && ! grep -qF 'gstats: small.ppm\r: No such file' stderr.txt &&
    why="message: $(head -c 200 stderr.txt | od -c | head -n 3)"
result name-escape-crlf-list "$why"
# A name with a backslash and nothing to escape is printed as it is.
timeout 20 "$PROG" 'a\b.ppm' >stdout.bin 2>stderr.txt
result name-plain-backslash "$(grep -qF 'gstats: a\b.ppm: No such file' stderr.txt || head -c 200 stderr.txt)"

# An HDR size beyond an int is reported as the file states it.
printf '#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 99999999999 +X 10\n' >huge.hdr
bounded hdr-huge-size "$PROG" huge.hdr
refused_with hdr-huge-size "gstats: huge.hdr: HDR image 10x99999999999 exceeds the limit"
printf '#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 4294967297 +X 4294967298\n' >wrap.hdr
timeout 20 "$PROG" wrap.hdr >stdout.bin 2>stderr.txt
rc=$?
refused_with hdr-size-wraps "HDR image 4294967298x4294967297 exceeds"

# --region: a geometry whose offset is out of range says so.
timeout 20 "$PROG" --region 1x1+99999999999+0 small.ppm >stdout.bin 2>stderr.txt
rc=$?
why=""
[ "$rc" -eq 2 ] || why="exit status $rc"
[ -z "$why" ] && ! grep -q "^gstats: --region: an offset in '1x1+99999999999+0' is out of range" \
    stderr.txt && why="message: $(head -c 200 stderr.txt)"
result region-offset-out-of-range "$why"
timeout 20 "$PROG" --region 99999999999x5 small.ppm >stdout.bin 2>stderr.txt
rc=$?
why=""
[ "$rc" -eq 2 ] && grep -q "^gstats: --region: the size in '99999999999x5' is out of range" \
    stderr.txt || why="exit status $rc: $(head -c 200 stderr.txt)"
result region-size-out-of-range "$why"
timeout 20 "$PROG" --region 5x5+1 small.ppm >stdout.bin 2>stderr.txt
result region-malformed "$(grep -q "is not a geometry" stderr.txt || head -c 200 stderr.txt)"

# /dev/full on standard output: every tool says the same thing.
if [ -w /dev/full ]; then
    why=""
    for run in "gstats small.ppm" "gstats --help" "ghist --version" "gconv -k box:1 small.ppm -" \
        "gtranspose --op rot90 big.ppm -" "gtranspose --help" "gstats -s mean small.ppm tiny.pbm" "ghist small.ppm"; do
        set -- $run
        tool=$1
        shift
        timeout 20 "$BIN/$tool" "$@" >/dev/full 2>stderr.txt
        rc=$?
        [ "$rc" -eq 1 ] && [ "$(cat stderr.txt)" = "$tool: standard output: No space left on device" ] ||
            why="${why:+$why; }$run: exit status $rc, '$(head -c 120 stderr.txt)'"
    done
    result dev-full-one-message "$why"
else
    skip dev-full "/dev/full is not available"
fi

# ------------------------------------------------------------- PAM headers

pam() { printf 'P7\nWIDTH 1\n%bDEPTH 1\nMAXVAL 255\nENDHDR\n\200' "$1"; }
pam 'HEIGHT 1\n' >ok.pam
pam 'HEIGHT 1\nHEIGHT 2\n' >twice.pam
pam 'HEIGHT 1\0junk\n' >nul.pam
pam 'HEIGHT 1 # a comment\n' >comment.pam
pam '# a comment line\nHEIGHT 1\n' >comment-line.pam
for f in ok comment-line; do
    timeout 20 "$PROG" $f.pam >stdout.bin 2>stderr.txt
    rc=$?
    result pam-$f "$([ "$rc" -eq 0 ] || echo "exit status $rc: $(head -c 200 stderr.txt)")"
done
timeout 20 "$PROG" twice.pam >stdout.bin 2>stderr.txt
rc=$?
refused_with pam-repeated-height "gstats: twice.pam: invalid PAM header: HEIGHT given twice"
timeout 20 "$PROG" nul.pam >stdout.bin 2>stderr.txt
rc=$?
refused_with pam-nul-in-line "gstats: nul.pam: invalid PAM header: NUL byte in a header line"
# Endless comment lines after "P7" are no header.
bounded pam-endless-comments bash -c '{ printf "P7\n"; exec yes "#"; } | "$0" -' "$PROG"
refused_with pam-endless-comments "invalid PAM header: no ENDHDR in"
# A comment after a value: read as netpbm reads it (11.01 refuses it).
if command -v pamfile >/dev/null; then
    pamfile comment.pam >/dev/null 2>&1
    netpbm=$?
    timeout 20 "$PROG" comment.pam >stdout.bin 2>stderr.txt
    ours=$?
    why=""
    [ "$netpbm" -eq 0 ] && [ "$ours" -ne 0 ] && why="netpbm reads it, we refuse: $(head -c 200 stderr.txt)"
    [ "$netpbm" -ne 0 ] && [ "$ours" -ne 1 ] && why="netpbm refuses it, we exit $ours"
    result pam-comment-after-value-as-netpbm "$why"
else
    skip pam-comment-after-value-as-netpbm "netpbm's pamfile is not installed"
fi

exit $failed
