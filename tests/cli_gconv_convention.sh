#!/usr/bin/env bash
# tests/cli_gconv_convention.sh — gconv reads custom kernels as ImageMagick
# users type them (issue 30): a flat list of n*n numbers is an n x n kernel,
# a kernel is divided by its sum unless that is 0 (--no-normalize keeps it
# as written), cross-checked with ImageMagick's -convolve when it is
# installed; an unknown mode or kernel name lists the valid ones; and a
# kernel file is read no further than the largest kernel file can be, so
# @/dev/zero fails at once. One PASS/FAIL/SKIP line per test; BIN and BUILD
# as in cli_lib.sh.
TOOL=gconv
. "$(dirname "$0")/cli_lib.sh"
GC=$PROG

"$GEN" --seed 31 37 23 1 8 g.pgm
"$GEN" --seed 32 29 17 3 8 c.ppm

# args "WORDS": the array a of WORDS split at blanks, '_' in a word made a
# blank ("-k 1_2_1;2_4_2" is -k '1 2 1;2 4 2').
args() {
    local w
    a=()
    set -f
    for w in $1; do a+=("${w//_/ }"); done
    set +f
}
# same_run NAME "ARGS A" "ARGS B": gconv with each set of arguments on g.pgm
# and c.ppm gives identical images.
same_run() {
    local name=$1 why="" f a1 a2
    args "$2"
    a1=("${a[@]}")
    args "$3"
    a2=("${a[@]}")
    for f in g.pgm c.ppm; do
        if ! "$GC" "${a1[@]}" "$f" a.pnm 2>err.txt || ! "$GC" "${a2[@]}" "$f" b.pnm 2>>err.txt; then
            why="failed on $f: $(head -c 200 err.txt)"
            break
        fi
        why=$(same a.pnm b.pnm) || break
    done
    result "$name" "$why"
}
# size_of SPEC [OPTIONS]: the "WxH" -v reports for the kernel.
size_of() {
    "$GC" -v -k "$@" g.pgm /dev/null 2>&1 | sed -n 's/^gconv: kernel 1: .*, \([0-9]*x[0-9]*\), \(dense\|separable\).*/\1/p'
}

# ------------------------------------------------------------- flat lists
for c in '1,2,1,2,4,2,1,2,1:3x3' '1 2 1 2 4 2 1 2 1:3x3' '1,2,3,4:2x2' \
    '1 4 6 4 1 4 16 24 16 4 6 24 36 24 6 4 16 24 16 4 1 4 6 4 1:5x5' \
    '1 2 1:3x1' '1,1,1,1,1,1,1,1:8x1' '1 1 1 1;:4x1' '1;2;1;2:1x4' '7:1x1'; do
    got=$(size_of "${c%:*}")
    result "size-${c%:*}" "$([ "$got" = "${c##*:}" ] || echo "got '$got', want ${c##*:}")"
done
same_run flat-is-rows "-k 1,2,1,2,4,2,1,2,1" "-k 1_2_1;2_4_2;1_2_1"
same_run flat-blanks-is-rows "-k 3,-1,2,0.5,7,-4,1,1,-2.5 --no-normalize" "-k 3_-1_2;0.5_7_-4;1_1_-2.5 --no-normalize"
same_run flat-correlated "-k 0,1,0,0,0,0,0,0,0 --correlate" "-k 0_1_0;0_0_0;0_0_0 --correlate"
same_run non-square-is-a-row "-k 1,2,3 --no-normalize" "-k 1_2_3; --no-normalize"
printf '1 2 1 2 4 2 1 2 1\n' >flat.txt
printf '# rows\n1 2 1\n2 4 2\n1 2 1\n' >rows.txt
same_run flat-file "-k @flat.txt" "-k @rows.txt"
printf '1 1 1 1;\n' >row4.txt
got=$(size_of @row4.txt)
result row-file-with-semicolon "$([ "$got" = 4x1 ] || echo "got '$got', want 4x1")"

# ---------------------------------------------------------- normalization
# The 5x5 binomial sums to 256: as written it whitens a mid-grey image;
# divided by 256 (the default) a uniform image stays as it is.
printf 'P5\n8 6\n255\n' >grey.pgm
head -c 48 /dev/zero | tr '\0' '\144' >>grey.pgm # 48 samples of 100
B5='1 4 6 4 1 4 16 24 16 4 6 24 36 24 6 4 16 24 16 4 1 4 6 4 1'
why=""
"$GC" -k "$B5" grey.pgm out.pgm 2>err.txt || why="failed: $(head -c 200 err.txt)"
[ -z "$why" ] && { why=$(same out.pgm grey.pgm) || true; }
result binomial-5x5-normalized "$why"
why=""
"$GC" -k "$B5" --no-normalize grey.pgm raw.pgm 2>err.txt || why="failed: $(head -c 200 err.txt)"
[ -z "$why" ] && [ "$(tail -c 48 raw.pgm | tr -d '\377' | wc -c)" != 0 ] && why="--no-normalize is not all 255"
result binomial-5x5-no-normalize "$why"
# Divided by 256 in the taps is the raw sum times 1/256, bit for bit (both exact).
same_run normalized-is-raw-scaled "-k ${B5// /,}" "-k ${B5// /,} --no-normalize --scale 0.00390625"
same_run normalize-is-default "-k ${B5// /,} --normalize" "-k ${B5// /,}"
same_run last-of-normalize-wins "-k ${B5// /,} --no-normalize --normalize" "-k ${B5// /,}"
# A negative sum divides too: -2 at the centre is the identity.
same_run negative-sum "-k 0,0,0,0,-2,0,0,0,0" "-k 1"
# Sums of 0 are never divided, not even when the decimals round.
same_run zero-sum-kept "-k -1,0,1,-2,0,2,-1,0,1 --bias 128" "-k -1,0,1,-2,0,2,-1,0,1 --no-normalize --bias 128"
same_run zero-sum-decimals-kept "-k 0.1_0.2_-0.3 --bias 128" "-k 0.1_0.2_-0.3 --no-normalize --bias 128"
# -v says what the default did to the kernel, and only then.
why=""
"$GC" -v -k 1,2,1,2,4,2,1,2,1 g.pgm /dev/null 2>err.txt
grep -q '^gconv: kernel 1: .* 3x3, separable, divided by its sum 16$' err.txt || why="default: $(head -n 1 err.txt)"
"$GC" -v -k 1,2,1,2,4,2,1,2,1 --no-normalize g.pgm /dev/null 2>err.txt
grep -q 'divided' err.txt && why="--no-normalize: $(head -n 1 err.txt)"
result verbose-says-divided "$why"
# Named kernels are unchanged by either option.
for k in gaussian:1.5 sharpen emboss sobel unsharp:1:2 box:2; do
    same_run "named-$k" "-k $k" "-k $k --no-normalize"
done

# ----------------------------------------------------------- ImageMagick
# ImageMagick 6's -convolve divides a kernel by its sum unless it is 0
# (convolve:scale then multiplies), reads a flat list of n*n numbers as
# n x n, and applies it unrotated (its "convolve" is a correlation: a lone
# tap right of the centre moves the image left), so --correlate; its
# default virtual pixels are --border clamp. It rounds halves up where we
# round them to even, so samples may differ by 1, no more.
IM=/usr/bin/convert
if [ -x "$IM" ] && "$IM" -version 2>/dev/null | grep -q ImageMagick; then
    # maxdiff A B N: the largest difference between the last N bytes (the
    # samples) of two 8-bit PNMs.
    maxdiff() {
        paste <(tail -c "$3" "$1" | od -An -v -tu1 | tr -s ' ' '\n' | grep .) \
            <(tail -c "$3" "$2" | od -An -v -tu1 | tr -s ' ' '\n' | grep .) |
            awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d; n++ }
                 END { print n == '"$3"' ? m + 0 : "a count of " n " samples" }'
    }
    # im_check NAME IMSCALE SPEC [GCONV OPTIONS]: convert [-define
    # convolve:scale=IMSCALE] -convolve SPEC against gconv -k SPEC --correlate,
    # on g.pgm (37x23 gray) and c.ppm (29x17 RGB).
    im_check() {
        local name=$1 scale=$2 spec=$3 f n got why=""
        shift 3
        for f in g.pgm:851 c.ppm:1479; do
            n=${f#*:}
            f=${f%:*}
            "$IM" "$f" ${scale:+-define "convolve:scale=$scale"} -convolve "$spec" -depth 8 \
                "im-$f" 2>err.txt || { why="convert failed: $(head -c 200 err.txt)"; break; }
            "$GC" -k "$spec" --correlate "$@" "$f" "gc-$f" 2>err.txt ||
                { why="gconv failed: $(head -c 200 err.txt)"; break; }
            got=$(maxdiff "im-$f" "gc-$f" "$n")
            [ "$got" = 0 ] || [ "$got" = 1 ] || { why="$f: samples differ by up to $got"; break; }
        done
        result "imagemagick-$name" "$why"
    }
    im_check binomial-3x3 "" '1,2,1,2,4,2,1,2,1'
    im_check binomial-5x5 "" "${B5// /,}"
    im_check asymmetric-3x3 "" '1,2,3,4,5,6,7,8,10'
    im_check asymmetric-4x4 "" '1 0 2 0 0 3 0 1 4 0 0 2 1 1 0 5'
    im_check negative-sum "" '0,-1,0,-1,-2,-1,0,-1,0'
    im_check zero-sum "" '-1,0,1,-2,0,2,-1,0,1'
    im_check shift-right "" '0,0,0,0,0,1,0,0,0'
    # convolve:scale=S after ImageMagick's division is --scale S after ours;
    # scale=SUM undoes the division: --no-normalize.
    im_check scale-half "0.5" '1,2,3,4,5,6,7,8,10' --scale 0.5
    im_check no-normalize "1.75" '0,0.5,0,0.5,0.5,0,0,0,0.25' --no-normalize
else
    skip imagemagick-convolve "ImageMagick (/usr/bin/convert) is not installed"
fi

# -------------------------------------------------- modes and names listed
mkdir -p e
mkfifo fifo
lists() { # NAME WANT ARGS...: a usage error whose message holds WANT
    local name=$1 want=$2
    shift 2
    expect_fail "$name" 2 e -- timeout 10 "$GC" "$@" fifo e/out.png
    grep -qF -- "$want" stderr.txt || fail "$name-message" "no \"$want\" in: $(head -c 300 stderr.txt)"
}
lists border-edge "gconv: --border: unknown mode 'edge' (clamp, mirror, reflect, wrap, zero)" -k box:1 --border edge
lists alpha-none "gconv: --alpha: unknown mode 'none' (premultiply, keep, include)" -k box:1 --alpha none
lists kernel-name "unknown kernel 'gauss' (named kernels: box:R, gaussian:SIGMA[:RADIUS], sharpen," -k gauss:2
lists kernel-long-name "(named kernels: box:R," -k "$(printf 'x%.0s' $(seq 200))"

# ----------------------------------------------------- endless kernel files
# No kernel file is larger than 255 x 255 taps of 64 bytes (4161600 bytes):
# one that is fails as soon as that is passed, in well under a second and
# 100 MB, before any input is read (the input is a FIFO nobody writes).
endless() { # NAME SPEC [< INPUT]: exit 2, "too large", fast and small
    local name=$1 spec=$2 secs kb
    if [ -n "${GIMG_TEST_SLOW:-}" ] || [ ! -x /usr/bin/time ]; then
        expect_fail "$name" 2 e -- timeout 10 "$GC" -k "$spec" fifo e/out.png
        skip "$name-fast" "time and memory not checked (GIMG_TEST_SLOW or no /usr/bin/time)"
    else
        # time's report goes to time.txt, its last line "SECONDS KB".
        expect_fail "$name" 2 e -- /usr/bin/time -f '%e %M' -o time.txt "$GC" -k "$spec" fifo e/out.png
        read -r secs kb < <(tail -n 1 time.txt)
        awk "BEGIN { exit !($secs < 1.0 && $kb < 100000) }" && pass "$name-fast" ||
            fail "$name-fast" "took $secs s and $kb KB"
    fi
    grep -q "kernel file '.*': too large" stderr.txt || fail "$name-message" "$(head -c 200 stderr.txt)"
}
endless dev-zero @/dev/zero
endless dev-urandom @/dev/urandom
endless stdin-zero @- </dev/zero
# A regular file over the bound is refused from its size, unread.
truncate -s 1G sparse.txt
endless sparse-1g @sparse.txt
rm -f sparse.txt
# The bound itself: 255 x 255 taps of 63 characters and a separator is a
# kernel (of gain 1 here: one 1, the rest 0); one byte more is refused.
awk 'BEGIN { z = sprintf("%063d", 0); o = "1." substr(z, 3); n = 255;
    for (i = 0; i < n; i++) { r = ""; for (j = 0; j < n; j++) r = r (i == 127 && j == 127 ? o : z) (j < n - 1 ? " " : "\n"); printf "%s", r } }' >max.txt
why=""
[ "$(wc -c <max.txt)" = 4161600 ] || why="max.txt is $(wc -c <max.txt) bytes"
[ -z "$why" ] && { "$GC" -k @max.txt g.pgm out.pgm 2>err.txt || why="the largest kernel file failed: $(head -c 200 err.txt)"; }
[ -z "$why" ] && { why=$(same out.pgm g.pgm) || true; }
result largest-kernel-file "$why"
printf '\n' >>max.txt
expect_fail largest-kernel-file-plus-one 2 e -- timeout 10 "$GC" -k @max.txt fifo e/out.png
grep -q "too large" stderr.txt || fail largest-kernel-file-plus-one-message "$(head -c 200 stderr.txt)"

exit $failed
