#!/usr/bin/env bash
# tests/cli_hardening.sh — hostile inputs and I/O faults against the tools:
# truncated and corrupt files of every format and layout (made by
# tests/fuzz/make_corpus), headers claiming huge, over-long or empty images,
# checksums, a PNM stream with garbage; full disks, missing and read-only
# folders, pipes closed early, signals while the output is being written.
#
# A refusal must be clean: exit status 1 (never a signal, never a hang:
# every run is under timeout), "tool: file: reason" on stderr naming the
# file, nothing on stdout, no output file and no temporary left behind.
# One PASS/FAIL/SKIP line per test; BIN and BUILD as in cli_lib.sh.
# GIMG_TEST_SLOW=1 (tests/valgrind.sh sets it) skips the timing checks.
#
# The tools share the library's reading and writing (gtranspose also its
# driver, lib/driver.c), so most of these run against gtranspose; the
# section "the other tools" puts gconv, ghist and gstats through a sample
# of each kind. A tool's own option parsing is fuzzed (tests/fuzz/) and its
# own errors are in its tests/cli_g*.sh.
TOOL=gtranspose
. "$(dirname "$0")/cli_lib.sh"
export LC_ALL=C

CORPUS_GEN=$BUILD/tests/fuzz/make_corpus
if [ ! -x "$CORPUS_GEN" ] || ! "$CORPUS_GEN" corpus >corpus.log 2>&1; then
    fail setup "$CORPUS_GEN did not write the test files: $(head -c 200 corpus.log)"
    exit 1
fi
mkdir -p e

# judge_refusal TOOL FILE RC: after a run that left stdout.bin, stderr.txt
# and e/, prints why it was not a clean refusal of FILE by TOOL (exit 1,
# FILE named on stderr's first line, nothing on stdout, nothing in e/;
# nothing printed when it was), then empties e/.
judge_refusal() {
    local tool=$1 file=$2 rc=$3
    if [ "$rc" -ne 1 ]; then
        echo "exit status $rc ($(head -c 150 stderr.txt | tr '\n' ' '))"
    elif ! head -n 1 stderr.txt | grep -qF "$tool: $file: "; then
        echo "message does not name $file: $(head -c 150 stderr.txt | tr '\n' ' ')"
    elif [ -s stdout.bin ]; then
        echo "wrote to stdout"
    elif [ -n "$(ls -A e)" ]; then
        echo "left $(ls -A e | tr '\n' ' ')"
    fi
    rm -f e/* e/.[!.]* 2>/dev/null
}

# refusal FILE [ARGS...]: runs the tool on FILE writing e/out.pam; prints
# why the outcome is not a clean refusal (nothing when it is).
refusal() {
    local file=$1
    shift
    timeout 20 "$PROG" "$@" "$file" e/out.pam >stdout.bin 2>stderr.txt
    judge_refusal "$TOOL" "$file" $?
}

# outcome FILE: any clean outcome: a decode (exit 0, an output, nothing on
# stdout) or a clean refusal. Prints why not.
outcome() {
    local file=$1 rc
    timeout 20 "$PROG" "$file" e/out.pam >stdout.bin 2>stderr.txt
    rc=$?
    if [ "$rc" -ne 0 ]; then
        judge_refusal "$TOOL" "$file" "$rc"
        return
    fi
    [ -s e/out.pam ] || echo "exit 0 without an output"
    [ -s stdout.bin ] && echo "wrote to stdout"
    rm -f e/* e/.[!.]* 2>/dev/null
}

# patch FILE OFFSET V...: overwrites bytes of FILE in place.
patch() {
    local file=$1 off=$2
    shift 2
    bytes "$@" | dd of="$file" bs=1 seek="$off" conv=notrunc status=none
}

size_of() { wc -c <"$1" | tr -d ' '; }

# ------------------------------------------------- every format, truncated

# Every valid file decodes, and every cut of it is refused: after 1 byte,
# in the header, in the middle and (binary formats) one byte short: the
# formats' pixel data, runs, chunks and markers are all checked to the end.
# (The hostile files, huge-, zero-, negative- and bad-, are judged below.)
for f in corpus/decode/*; do
    base=${f##*/}
    case $base in huge-* | zero-* | negative-* | bad-*) continue ;; esac
    why=""
    timeout 20 "$PROG" "$f" e/out.pam >stdout.bin 2>stderr.txt ||
        why="exit status $?: $(head -c 150 stderr.txt)"
    [ -z "$why" ] && [ ! -s e/out.pam ] && why="no output"
    rm -f e/*
    result "valid-$base" "$why"

    n=$(size_of "$f")
    cuts="1 $((n / 4)) $((n / 2))"
    case $base in *-plain*) ;; *) cuts="$cuts $((n - 1))" ;; esac
    why=""
    for cut in $cuts; do
        head -c "$cut" "$f" >"cut-$base"
        # A GIF cut after a whole frame still holds that frame, and reads
        # as browsers and libvips read it; a cut before any is refused.
        case $base:$cut in
            gif-*:1) w=$(refusal "cut-$base") ;;
            gif-*) w=$(outcome "cut-$base") ;;
            *) w=$(refusal "cut-$base") ;;
        esac
        [ -n "$w" ] && { why="cut at $cut of $n bytes: $w"; break; }
    done
    rm -f "cut-$base"
    result "truncated-$base" "$why"
done

# ------------------------------------------------- every format, corrupted

# Bytes flipped anywhere must end cleanly: decoded (the format has no
# checksum there) or refused. Our own PNGs hold only chunks whose CRCs are
# checked: every flip in them is refused. (A flip in a text chunk, as in the
# hand-made PNGs, is ignored: the decoder does not read those chunks.)
for f in corpus/decode/*; do
    base=${f##*/}
    case $base in huge-* | zero-* | negative-* | bad-*) continue ;; esac
    n=$(size_of "$f")
    why=""
    for at in 0 4 8 13 17 21 25 29 $((n / 3)) $((n / 2)) $((n * 2 / 3)) $((n - 3)); do
        [ "$at" -lt "$n" ] || continue
        cp "$f" "bad-$base"
        old=$(od -An -tu1 -j "$at" -N1 "$f" | tr -d ' ')
        patch "bad-$base" "$at" $((old ^ 0x5a))
        case $base in
            png-c* | png-stored | png-level12) w=$(refusal "bad-$base") ;;
            *) w=$(outcome "bad-$base") ;;
        esac
        [ -n "$w" ] && { why="byte $at of $n flipped: $w"; break; }
    done
    rm -f "bad-$base"
    result "corrupt-$base" "$why"
done

# Corrupt headers that no decoder may accept, one per format.
jpeg=corpus/decode/jpeg-q50-420
sof=$(grep -obUaP '\xff\xc0' "$jpeg" | head -n 1 | cut -d: -f1)
cp "$jpeg" bad-components.jpg && patch bad-components.jpg $((sof + 9)) 0
result corrupt-header-jpeg-components "$(refusal bad-components.jpg)"
cp corpus/decode/bmp-rgb bad-depth.bmp && patch bad-depth.bmp 28 7 0
result corrupt-header-bmp-depth "$(refusal bad-depth.bmp)"
cp corpus/decode/tga-raw-rgb bad-depth.tga && patch bad-depth.tga 16 7
result corrupt-header-tga-depth "$(refusal bad-depth.tga)"
hdr=corpus/decode/hdr-rle
at=$(grep -obUa -- '-Y ' "$hdr" | head -n 1 | cut -d: -f1)
cp "$hdr" bad-size.hdr && patch bad-size.hdr "$at" $(printf '%d ' "'+" "'Q")
result corrupt-header-hdr-size "$(refusal bad-size.hdr)"
printf 'P6\n4 4\n0\n' >bad-maxval.ppm && head -c 48 /dev/zero >>bad-maxval.ppm
result corrupt-header-ppm-maxval "$(refusal bad-maxval.ppm)"
printf 'P7\nWIDTH 2\nHEIGHT 1\nDEPTH 9\nMAXVAL 255\nENDHDR\n0123456789abcdefgh' >bad-depth.pam
result corrupt-header-pam-depth "$(refusal bad-depth.pam)"
printf 'PF\n1 1\nnan\n0123456789ab' >bad-scale.pfm
result corrupt-header-pfm-scale "$(refusal bad-scale.pfm)"
printf 'P2\n2 1\n255\n12 300\n' >bad-sample.pgm
result corrupt-sample-over-maxval "$(refusal bad-sample.pgm)"

# ------------------------------------------------------------- checksums

# gimg checks the CRC of every PNG chunk that makes the pixels (IHDR,
# PLTE, IDAT, IEND, tRNS), as libpng does; stb_image checks none.
png=corpus/decode/png-c3-d8
idat=$(grep -obUa IDAT "$png" | head -n 1 | cut -d: -f1)
cp "$png" bad-crc.png
crc_at=$((idat + 4 + $(od -An -tu4 --endian=big -j $((idat - 4)) -N4 "$png" | tr -d ' ')))
patch bad-crc.png "$crc_at" 0 0 0 0
why=$(refusal bad-crc.png)
[ -z "$why" ] && { grep -q 'CRC' stderr.txt || why="message does not say CRC: $(cat stderr.txt)"; }
result checksum-png-idat-crc "$why"

# ------------------------------------------------------- limits, headers

# Every hostile header is refused within a second: under a pixel limit
# given (the old default's, 268435456), from the header alone, naming the
# limit; with none (the default), by the memory budget (1 GiB here, where
# the default is half the machine's memory) or for the data the file does
# not hold, whichever comes first.
for f in corpus/hostile/*; do
    base=${f##*/}
    for limit in "--max-pixels 268435456" "--max-memory 1G"; do
        start=$(date +%s%N)
        why=$(refusal "$f" $limit)
        ms=$((($(date +%s%N) - start) / 1000000))
        if [ -z "$why" ]; then
            case $base in
                huge-*-digits) grep -q 'bad width' stderr.txt || why="message: $(cat stderr.txt)" ;;
                # PNG allows at most 2^31 - 1 a side: past that the file is corrupt.
                huge-png-2pow31) grep -q 'invalid width' stderr.txt || why="message: $(cat stderr.txt)" ;;
                huge-*) [ "$limit" = "--max-memory 1G" ] || grep -q 'limit' stderr.txt ||
                    why="message names no limit: $(cat stderr.txt)" ;;
                zero-* | negative-*) grep -Eq 'size|width|height|header' stderr.txt ||
                    why="message: $(cat stderr.txt)" ;;
            esac
        fi
        [ -z "$why" ] && [ -z "${GIMG_TEST_SLOW:-}" ] && [ "$ms" -gt 1000 ] && why="took $ms ms"
        result "hostile-$base ($limit)" "$why"
    done
done

# A PNG claiming 60000x60000: refused in well under a second with little
# memory, by a message naming the limit and --max-pixels where one is
# given, and for its missing data where none is (the default).
# quick_refusal NAME PATTERN OPTIONS...: exit 1 within 0.5 s and under
# 64 MiB (timed where /usr/bin/time is), stderr matching PATTERN.
quick_refusal() {
    local name=$1 pattern=$2 why="" rc secs kb
    shift 2
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -f '%e %M' -o time.txt timeout 20 "$PROG" "$@" e/out.png 2>stderr.txt
        rc=$?
        read -r secs kb < <(tail -n 1 time.txt)
        [ "$rc" -eq 1 ] || why="exit status $rc"
        if [ -z "$why" ] && [ -z "${GIMG_TEST_SLOW:-}" ]; then
            awk "BEGIN { exit !($secs < 0.5) }" || why="took $secs s"
            [ "${kb:-0}" -lt 65536 ] || why="${why:+$why, }peak memory $kb KiB"
        fi
    else
        timeout 20 "$PROG" "$@" e/out.png 2>stderr.txt
        rc=$?
        [ "$rc" -eq 1 ] || why="exit status $rc"
    fi
    [ -z "$why" ] && { grep -Eq -- "$pattern" stderr.txt || why="message: $(cat stderr.txt)"; }
    result "$name" "$why"
}
huge=corpus/hostile/huge-png-60000x60000
quick_refusal limit-png-60000x60000-fast 'limit of 268435456 .*--max-pixels' \
    --max-pixels 268435456 "$huge"
# With none: for its data in bands, or, in a CUDA build (which reads it
# whole for a GPU), by the memory budget.
quick_refusal limit-png-60000x60000-no-pixel-limit 'IDAT|over the memory budget' "$huge"
# With --max-pixels raised past it (and the memory budget, which would
# otherwise refuse reading 10 GB whole first), the same header without
# pixel data is refused as what it is, quickly: nothing of the 10 GB it
# claims is touched.
start=$(date +%s%N)
why=$(refusal "$huge" --max-pixels 4000000000 --max-memory 64G)
ms=$((($(date +%s%N) - start) / 1000000))
[ -z "$why" ] && { grep -q 'IDAT' stderr.txt || why="message: $(cat stderr.txt)"; }
[ -z "$why" ] && [ -z "${GIMG_TEST_SLOW:-}" ] && [ "$ms" -gt 1000 ] && why="took $ms ms"
result limit-png-raised-no-data "$why"
why=$(refusal corpus/hostile/huge-png-side-20000000x1)
[ -z "$why" ] && { grep -q '16777216 pixels per side' stderr.txt || why="message: $(cat stderr.txt)"; }
result limit-per-side "$why"

# An endless input is refused from its first bytes rather than read
# forever (tests/cli_faults.sh bounds its time and memory).
why=""
timeout 20 "$PROG" --max-pixels 1000 - e/out.pam </dev/zero >stdout.bin 2>stderr.txt
rc=$?
[ "$rc" -eq 1 ] || why="exit status $rc"
[ -z "$why" ] && { grep -q "^$TOOL: standard input: unrecognised image format" stderr.txt ||
    why="message: $(head -c 200 stderr.txt)"; }
[ -z "$why" ] && [ -n "$(ls -A e)" ] && why="left $(ls -A e)"
result limit-endless-input "$why"
rm -f e/*

# ------------------------------------------------------------ PNM streams

# A PNM stream on standard input is read image by image; what follows an
# image must be another image: garbage, or a cut image, is an error.
"$GEN" --seed 4 5 3 3 8 s1.ppm
for tail in garbage 'P6\n5 3\n255\n\001\002'; do
    name=stream-trailing-$([ "$tail" = garbage ] && echo garbage || echo cut-image)
    { cat s1.ppm; printf "$tail"; } >stream.bin
    timeout 20 "$PROG" - - <stream.bin >stdout.bin 2>stderr.txt
    rc=$?
    why=""
    [ "$rc" -eq 1 ] || why="exit status $rc"
    [ -z "$why" ] && { grep -q "^$TOOL: standard input" stderr.txt || why="message: $(head -c 200 stderr.txt)"; }
    result "$name" "$why"
done

# ------------------------------------------------------------- I/O faults

"$GEN" --seed 6 1000 1000 3 8 big.ppm

# /dev/full as the output file, and as standard output.
if [ -w /dev/full ]; then
    why=$(timeout 20 "$PROG" big.ppm /dev/full 2>&1 >/dev/null; echo "rc=$?")
    echo "$why" | grep -q '^rc=1$' && echo "$why" | grep -q "^$TOOL: /dev/full: .*No space" &&
        why="" || why="got: $(echo "$why" | tr '\n' ' ')"
    result io-dev-full-output "$why"
    timeout 20 "$PROG" -f png big.ppm - >/dev/full 2>stderr.txt
    rc=$?
    why=""
    [ "$rc" -eq 1 ] || why="exit status $rc"
    [ -z "$why" ] && { grep -q "^$TOOL: standard output: .*No space" stderr.txt || why="message: $(cat stderr.txt)"; }
    result io-dev-full-stdout "$why"
else
    skip io-dev-full "/dev/full is not available"
fi

# A disk that fills up midway (the file-size limit; SIGXFSZ ignored so that
# write() fails with EFBIG): no output and no temporary file.
mkdir -p fsz
(trap '' XFSZ; ulimit -f 64; exec timeout 20 "$PROG" big.ppm fsz/out.ppm) >stdout.bin 2>stderr.txt
rc=$?
why=""
[ "$rc" -eq 1 ] || why="exit status $rc"
[ -z "$why" ] && { grep -q "^$TOOL: fsz/out.ppm: " stderr.txt || why="message: $(cat stderr.txt)"; }
[ -z "$why" ] && [ -n "$(ls -A fsz)" ] && why="left $(ls -A fsz | tr '\n' ' ')"
result io-disk-full-midway "$why"

why=$(timeout 20 "$PROG" big.ppm no/such/dir/out.png 2>&1 >/dev/null; echo "rc=$?")
echo "$why" | grep -q '^rc=1$' && echo "$why" | grep -q "^$TOOL: no/such/dir/out.png: " && why="" ||
    why="got: $(echo "$why" | tr '\n' ' ')"
result io-missing-directory "$why"

mkdir -p adir
why=$(timeout 20 "$PROG" big.ppm adir 2>&1 >/dev/null; echo "rc=$?")
echo "$why" | grep -q '^rc=1$' && echo "$why" | grep -q "^$TOOL: adir: " && why="" ||
    why="got: $(echo "$why" | tr '\n' ' ')"
result io-output-is-directory "$why"

# A read-only folder: root ignores permissions, so it needs another user.
if [ "$(id -u)" -ne 0 ]; then
    mkdir -p ro && chmod 555 ro
    why=$(timeout 20 "$PROG" big.ppm ro/out.ppm 2>&1 >/dev/null; echo "rc=$?")
    echo "$why" | grep -q '^rc=1$' && echo "$why" | grep -q "^$TOOL: ro/out.ppm: .*ermission" &&
        why="" || why="got: $(echo "$why" | tr '\n' ' ')"
    [ -z "$why" ] && [ -n "$(ls -A ro)" ] && why="left $(ls -A ro)"
    chmod 755 ro
    result io-read-only-directory "$why"
    cp big.ppm unreadable.ppm && chmod 000 unreadable.ppm
    result io-unreadable-input "$(refusal unreadable.ppm)"
else
    skip io-read-only-directory "running as root, which ignores permissions"
fi

# A pipe closed early: a quiet death by SIGPIPE, or, when SIGPIPE is
# ignored, exit status 1 and a message; never a hang.
timeout 20 "$PROG" big.ppm - 2>stderr.txt | head -c 10 >/dev/null
rc=${PIPESTATUS[0]}
why=""
if [ "$rc" -eq 141 ]; then
    [ -s stderr.txt ] && why="SIGPIPE, yet a message: $(cat stderr.txt)"
elif [ "$rc" -eq 1 ]; then
    grep -q "^$TOOL: standard output: " stderr.txt || why="message: $(cat stderr.txt)"
else
    why="exit status $rc"
fi
result io-pipe-closed-early "$why"
(trap '' PIPE; exec timeout 20 "$PROG" big.ppm -) 2>stderr.txt | head -c 10 >/dev/null
rc=${PIPESTATUS[0]}
why=""
[ "$rc" -eq 1 ] || why="exit status $rc"
[ -z "$why" ] && { grep -q "^$TOOL: standard output: .*Broken pipe" stderr.txt || why="message: $(cat stderr.txt)"; }
[ -z "$why" ] && [ "$(wc -l <stderr.txt)" -eq 1 ] || why="${why:-more than one message: $(cat stderr.txt)}"
result io-pipe-closed-early-sigpipe-ignored "$why"

# ------------------------------------------------- signals mid-write

# A signal while the output is being written: the temporary file is
# removed and the tool dies of that signal. To catch the write every time,
# a preloaded shim parks the first write() to a gimg temporary file.
cat >stall.c <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
ssize_t write(int fd, const void *buf, size_t n)
{
    static ssize_t (*real)(int, const void *, size_t);
    if (!real)
        real = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t k = readlink(link, path, sizeof path - 1);
    const char *flag = getenv("STALL_FLAG");
    if (k > 0 && flag) {
        path[k] = '\0';
        if (strstr(path, ".gimg-")) {
            close(open(flag, O_WRONLY | O_CREAT, 0666));
            for (int i = 0; i < 300; i++)   /* 30 s at most, then carry on */
                usleep(100000);
        }
    }
    return real(fd, buf, n);
}
EOF
if ${CC:-cc} -shared -fPIC -o stall.so stall.c -ldl 2>cc.txt; then
    for sig in INT TERM HUP PIPE; do
        rm -rf sig && mkdir sig && rm -f stalled
        # A background job of a script starts with SIGINT ignored (and the
        # tools leave an ignored signal alone); give it the default back.
        STALL_FLAG=$PWD/stalled LD_PRELOAD=$PWD/stall.so ASAN_OPTIONS=verify_asan_link_order=0 \
            env --default-signal=INT "$PROG" big.ppm sig/out.ppm 2>/dev/null &
        pid=$!
        for _ in $(seq 200); do [ -e stalled ] && break; sleep 0.05; done
        why=""
        if [ ! -e stalled ]; then
            why="the write never started"
        else
            kill -"$sig" "$pid"
        fi
        wait "$pid" 2>/dev/null # (bash reports a death by SIGHUP)
        rc=$?
        want=$((128 + $(kill -l "$sig")))
        [ -z "$why" ] && [ "$rc" -ne "$want" ] && why="exit status $rc, expected $want (death by SIG$sig)"
        [ -z "$why" ] && [ -n "$(ls -A sig)" ] && why="left $(ls -A sig | tr '\n' ' ')"
        result "signal-$sig-mid-write-leaves-nothing" "$why"
    done
else
    skip signal-mid-write "cannot build the write() shim: $(head -c 100 cc.txt)"
fi

# ------------------------------------------------- the other tools
# gconv, ghist and gstats read and write through the same library, but each
# has its own main(): one truncated, one corrupt and one huge file of every
# format family must be refused cleanly by each of them too (exit 1, the
# file named, nothing on stdout, no output file).
other_refusal() {
    local tool=$1 file=$2
    case $tool in
        gconv) timeout 20 "$BIN/gconv" -k box:1 "$file" e/out.pam ;;
        ghist) timeout 20 "$BIN/ghist" --equalize e/out.pam "$file" ;;
        gstats) timeout 20 "$BIN/gstats" "$file" ;;
    esac >stdout.bin 2>stderr.txt
    judge_refusal "$tool" "$file" $?
}
for tool in gconv ghist gstats; do
    if [ ! -x "$BIN/$tool" ]; then
        fail "other-$tool" "$BIN/$tool is missing"
        continue
    fi
    why=""
    for f in corpus/decode/png-c3-d8 corpus/decode/jpeg-q50-420 corpus/decode/bmp-rgb \
        corpus/decode/tga-rle-c3 corpus/decode/hdr-rle corpus/decode/pam-c4-d16 \
        corpus/decode/pfm-gray corpus/decode/ppm-d16; do
        [ -f "$f" ] || { why="$f is missing from the corpus"; break; }
        base=${f##*/}
        n=$(size_of "$f")
        head -c $((n / 2)) "$f" >"cut-$base"
        w=$(other_refusal "$tool" "cut-$base") || true
        rm -f "cut-$base"
        [ -n "$w" ] && { why="cut-$base: $w"; break; }
    done
    result "other-$tool-truncated" "$why"
    why=""
    for f in corpus/decode/huge-png-60000x60000 corpus/decode/huge-jpeg-65535x65535 \
        corpus/decode/huge-pgm-side-20000000x1 corpus/decode/negative-bmp-width; do
        [ -f "$f" ] || { why="$f is missing from the corpus"; break; }
        w=$(other_refusal "$tool" "$f")
        [ -n "$w" ] && { why="$f: $w"; break; }
    done
    result "other-$tool-huge" "$why"
    # A full disk on standard output: exit 1 and a message, never 0.
    if [ -w /dev/full ]; then
        case $tool in
            gconv) timeout 20 "$BIN/gconv" -k box:1 big.ppm - ;;
            ghist) timeout 20 "$BIN/ghist" big.ppm ;;
            gstats) timeout 20 "$BIN/gstats" big.ppm ;;
        esac >/dev/full 2>stderr.txt
        rc=$?
        why=""
        [ "$rc" -eq 1 ] || why="exit status $rc"
        [ -z "$why" ] && { grep -q "^$tool: standard output: " stderr.txt || why="message: $(head -c 150 stderr.txt)"; }
        result "other-$tool-dev-full" "$why"
    fi
done

exit $failed
