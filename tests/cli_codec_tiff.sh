#!/usr/bin/env bash
# tests/cli_codec_tiff.sh — TIFF through the tools (gtranspose): every
# layout gimg writes round-trips under --compress none|lzw|deflate; files
# that other programs write from ours (tiffcp: tiles, separate planes,
# PackBits, JPEG, big-endian; ImageMagick: MINISWHITE, palette, bilevel
# G4, float, alpha, tiles) decode to the same samples as vips's or
# ImageMagick's decoding of the same file; pages as FILE[N]; hostile files
# made here (python3) are refused cleanly and quickly.
# One PASS/FAIL/SKIP line per test; BIN and BUILD as in cli_lib.sh.
# A test that needs a peer that is missing says SKIP. GIMG_TEST_SLOW=1
# (tests/valgrind.sh sets it) skips the timing checks.
TOOL=gtranspose
. "$(dirname "$0")/cli_lib.sh"
export LC_ALL=C
GT=$PROG

have() { command -v "$1" >/dev/null 2>&1; }
IM=/usr/bin/convert
[ -x "$IM" ] || IM=""
mkdir -p e

# --------------------------------------------------------------- round trips

# Every layout gimg writes, under each compression: the TIFF holds exactly
# gen's samples (compared with gen's own PAM/PFM of the same seed, where
# those formats hold the layout), and two transposes through TIFF give the
# file back.
for depth in 8 16 32; do
    for ch in 1 2 3 4; do
        name=c${ch}-d${depth}
        why=""
        "$GEN" --seed $((ch * 7 + depth)) 61 37 "$ch" "$depth" src-$name.tif || why="gen failed"
        ref=""
        if [ "$depth" != 32 ]; then
            ref=src-$name.pam
        elif [ "$ch" = 1 ] || [ "$ch" = 3 ]; then
            ref=src-$name.pfm
        fi
        if [ -z "$why" ] && [ -n "$ref" ]; then
            "$GEN" --seed $((ch * 7 + depth)) 61 37 "$ch" "$depth" "$ref" || why="gen $ref failed"
            [ -z "$why" ] && why=$(same "src-$name.tif" "$ref")
        fi
        for comp in none lzw deflate; do
            [ -n "$why" ] && break
            if ! "$GT" -q --compress "$comp" "src-$name.tif" "t-$name-$comp.tif" ||
                ! "$GT" -q --compress "$comp" "t-$name-$comp.tif" "back-$name-$comp.tif"; then
                why="$comp: the tool failed"
            else
                why=$(same "back-$name-$comp.tif" "src-$name.tif")
            fi
        done
        result "round-trip-$name" "$why"
    done
done

# --compress is written as asked, with the predictor promised (tiffinfo).
if have tiffinfo; then
    for comp in none lzw deflate; do
        why=""
        info=$(tiffinfo "t-c3-d16-$comp.tif" 2>&1)
        finfo=$(tiffinfo "t-c3-d32-$comp.tif" 2>&1)
        case $comp in
            none) grep -q 'Compression Scheme: None' <<<"$info" || why="not uncompressed" ;;
            lzw) grep -q 'Compression Scheme: LZW' <<<"$info" || why="not LZW" ;;
            deflate) grep -q 'Compression Scheme: AdobeDeflate' <<<"$info" || why="not Deflate" ;;
        esac
        if [ -z "$why" ] && [ "$comp" != none ]; then
            grep -q 'Predictor: horizontal differencing' <<<"$info" || why="no horizontal predictor"
            grep -q 'Predictor: floating point predictor' <<<"$finfo" ||
                why="${why:+$why, }float without the floating-point predictor"
        fi
        result "compress-$comp-tags" "$why"
    done
    # Deflate is the default, and alpha is marked unassociated.
    "$GT" -q src-c4-d8.tif default.tif
    info=$(tiffinfo default.tif 2>&1)
    why=""
    grep -q 'Compression Scheme: AdobeDeflate' <<<"$info" || why="default is not Deflate"
    grep -q 'Extra Samples: 1<unassoc-alpha>' <<<"$info" || why="${why:+$why, }alpha not unassociated"
    result default-deflate-unassociated-alpha "$why"
else
    skip compress-tags "tiffinfo not installed"
fi

expect_fail compress-unknown 2 "" -- "$GT" --compress zstd src-c1-d8.tif e/out.tif

# -------------------------------------------- files other programs write

# variant NAME FILE REF: FILE (made by a peer from one of our files, without
# loss) decodes to the same samples as REF.
variant() {
    local why
    if [ ! -s "$2" ]; then
        fail "$1" "the peer did not write $2"
        return
    fi
    why=$(same "$2" "$3")
    result "$1" "$why"
}

if have tiffcp; then
    # (tiffcp writes a big-endian float file uncompressed: with the floating-
    # point predictor libtiff 4.5 writes big-endian samples wrongly.)
    while read -r name src args; do
        # shellcheck disable=SC2086 # args are words
        tiffcp $args "$src" "v-$name.tif" 2>tiffcp.err
        variant "tiffcp-$name" "v-$name.tif" "$src"
    done <<'LIST'
tiled-rgb16 src-c3-d16.tif -t -w 16 -l 16
tiled-separate-lzw-rgba8 src-c4-d8.tif -t -w 32 -l 16 -p separate -c lzw:2
separate-strips-rgba8 src-c4-d8.tif -p separate -r 5
packbits-graya8 src-c2-d8.tif -c packbits -r 3
deflate-gray16 src-c1-d16.tif -c zip:2
bigendian-lzw-rgb16 src-c3-d16.tif -B -c lzw:2
bigendian-gray16 src-c1-d16.tif -B -c none
bigendian-float src-c3-d32.tif -B -c none
tiled-float-fp-predictor src-c4-d32.tif -t -w 16 -l 16 -c zip:3
bigtiff src-c3-d8.tif -8
LIST
    # Pages: page N of a 3-page file, as FILE[N].
    tiffcp src-c3-d8.tif src-c1-d16.tif src-c4-d32.tif multi.tif
    why=""
    "$GT" -q 'multi.tif[1]' p1.tif && "$GT" -q src-c1-d16.tif r1.tif || why="the tool failed"
    [ -z "$why" ] && why=$(same p1.tif r1.tif)
    result "page-1-as-FILE[1]" "$why"
    why=""
    "$GT" -q 'multi.tif[2]' p2.tif && "$GT" -q src-c4-d32.tif r2.tif || why="the tool failed"
    [ -z "$why" ] && why=$(same p2.tif r2.tif)
    result "page-2-as-FILE[2]" "$why"
    why=""
    "$GT" -q 'multi.tif[0]' p0.tif && "$GT" -q multi.tif q0.tif && "$GT" -q src-c3-d8.tif r0.tif ||
        why="the tool failed"
    [ -z "$why" ] && why=$(same p0.tif r0.tif) && why=$(same q0.tif r0.tif)
    result "page-0-default" "$why"
    expect_fail page-past-the-last 1 e -- "$GT" 'multi.tif[3]' e/out.tif
    grep -q "multi.tif\[3\]: TIFF has 3 pages: no page 3" stderr.txt ||
        fail page-past-the-last-message "$(head -c 200 stderr.txt)"
else
    skip tiffcp-variants "tiffcp not installed"
fi

# A photo-like 8-bit image (gen's gradient, with texture) for the lossy peers.
"$GEN" --pattern gradient 96 80 3 8 grad.ppm
"$GEN" --pattern gradient 96 80 1 8 grad.pgm

# peer_equal NAME FILE: our decoding of FILE equals vips's (or, without
# vips, ImageMagick's), compared flipped (both sides do the same flip).
peer_equal() {
    local name=$1 file=$2 why="" ch
    if [ ! -s "$file" ]; then
        fail "$name" "the peer did not write $file"
        return
    fi
    if ! "$GT" -q --op flip "$file" "ours-$name.tif" 2>err.txt; then
        fail "$name" "our decode failed: $(head -c 200 err.txt)"
        return
    fi
    if have vips; then
        # PNG keeps 8/16-bit with alpha; floats go through vips's own PFM/TIFF.
        if vips flip "$file" "ref-$name.tif" vertical 2>/dev/null; then
            why=$(same "ours-$name.tif" "ref-$name.tif")
        else
            why="vips could not read it"
        fi
    elif [ -n "$IM" ]; then
        "$IM" "$file" -flip "ref-$name.pam" 2>/dev/null && why=$(same "ours-$name.tif" "ref-$name.pam") ||
            why="ImageMagick could not read it"
    else
        skip "$name" "neither vips nor ImageMagick installed"
        return
    fi
    result "$name" "$why"
}

if have tiffcp; then
    "$GEN" --pattern gradient 96 80 3 8 grad.tif
    "$GEN" --pattern gradient 96 80 1 8 gradg.tif
    tiffcp -c jpeg:r:90 -r 16 grad.tif j-rgb.tif && peer_equal tiffcp-jpeg-rgb j-rgb.tif
    tiffcp -c jpeg:90 -r 16 grad.tif j-ycc.tif && peer_equal tiffcp-jpeg-ycbcr j-ycc.tif
    tiffcp -c jpeg:90 -t -w 32 -l 32 gradg.tif j-gray.tif && peer_equal tiffcp-jpeg-gray-tiled j-gray.tif
fi

if [ -n "$IM" ]; then
    im() { "$IM" "$@" 2>/dev/null; }
    im grad.pgm -define tiff:photometric=min-is-white mw.tif && variant im-miniswhite-8 mw.tif grad.pgm
    im src-c1-d16.pam -define tiff:photometric=min-is-white mw16.tif && variant im-miniswhite-16 mw16.tif src-c1-d16.pam
    im grad.ppm -posterize 5 post.ppm && im post.ppm -type Palette -compress LZW pal.tif &&
        variant im-palette-lzw pal.tif post.ppm
    im grad.pgm -threshold 50% -type Bilevel -compress Group4 g4.tif &&
        im grad.pgm -threshold 50% -depth 8 g4-ref.pgm && variant im-bilevel-group4 g4.tif g4-ref.pgm
    im grad.pgm -threshold 50% -type Bilevel -define tiff:photometric=min-is-black bw.tif &&
        variant im-bilevel-minisblack bw.tif g4-ref.pgm
    im src-c3-d16.pam -endian MSB -compress Zip -define tiff:predictor=2 im-mm16.tif &&
        variant im-bigendian-deflate-rgb16 im-mm16.tif src-c3-d16.pam
    im src-c4-d8.pam -define tiff:tile-geometry=32x32 -compress LZW im-tiled.tif &&
        variant im-tiled-rgba8 im-tiled.tif src-c4-d8.pam
    im src-c3-d8.pam -interlace plane im-planar.tif && variant im-planar-rgb8 im-planar.tif src-c3-d8.pam
    im grad.ppm -compress JPEG -quality 85 im-jpeg.tif && peer_equal im-jpeg im-jpeg.tif
    im src-c3-d32.pfm -define quantum:format=floating-point -depth 32 im-float.tif &&
        peer_equal im-float im-float.tif
    im src-c4-d16.pam -compress Zip im-rgba16.tif && peer_equal im-rgba16 im-rgba16.tif
    im grad.ppm -type Palette pal-nolzw.tif && peer_equal im-palette-peer pal-nolzw.tif
    peer_equal im-bilevel-group4-peer g4.tif
    peer_equal im-miniswhite-peer mw.tif
    peer_equal im-miniswhite-16-peer mw16.tif
else
    skip imagemagick-variants "ImageMagick (/usr/bin/convert) not installed"
fi

# vips's own writer: Deflate with its predictor, tiled, and 16-bit.
if have vips; then
    vips tiffsave grad.ppm vd.tif --compression deflate --predictor horizontal && variant vips-deflate vd.tif grad.ppm
    vips tiffsave src-c4-d16.pam vt.tif --tile --tile-width 32 --tile-height 32 --compression lzw &&
        variant vips-tiled-lzw-rgba16 vt.tif src-c4-d16.pam
    vips tiffsave grad.ppm vj.tif --compression jpeg --Q 80 && peer_equal vips-jpeg vj.tif
else
    skip vips-variants "vips not installed"
fi

# ------------------------------------------------------------ hostile files

# Each crafted file: exit 1, "gtranspose: FILE: reason", nothing on stdout,
# no output file, in under a second of CPU.
python3 - <<'PY' || fail setup "python3 could not write the hostile files"
import struct

def ifd(entries, nxt):
    out = struct.pack('<H', len(entries))
    for tag, typ, count, value in sorted(entries):
        if typ == 3 and count == 1:
            out += struct.pack('<HHIHH', tag, typ, count, value, 0)
        else:
            out += struct.pack('<HHII', tag, typ, count, value)
    return out + struct.pack('<I', nxt)

def gray(w, h, offset, count, extra=()):
    return [(256, 4, 1, w), (257, 4, 1, h), (258, 3, 1, 8), (259, 3, 1, 1), (262, 3, 1, 1),
            (273, 4, 1, offset), (277, 3, 1, 1), (278, 4, 1, h), (279, 4, 1, count)] + list(extra)

def write(name, data):
    open(name, 'wb').write(data)

head = b'II*\x00' + struct.pack('<I', 8)
pad = lambda d, n: d + b'\x00' * (n - len(d))
write('huge.tif', pad(head + ifd(gray(1000000, 1000000, 200, 64), 0), 256))
write('zero-width.tif', pad(head + ifd(gray(0, 10, 200, 10), 0), 256))
zh = [e if e[0] != 278 else (278, 4, 1, 1) for e in gray(10, 0, 200, 10)]
write('zero-height.tif', pad(head + ifd(zh, 0), 256))
write('strip-past-end.tif', pad(head + ifd(gray(16, 16, 100000, 256), 0), 256))
write('strip-runs-past-end.tif', pad(head + ifd(gray(16, 16, 200, 256), 0), 256))
tiles = [(256, 4, 1, 16), (257, 4, 1, 16), (258, 3, 1, 16), (259, 3, 1, 1), (262, 3, 1, 2),
         (277, 3, 1, 4), (322, 4, 1, 0x80000000), (323, 4, 1, 0x80000000), (324, 4, 1, 200),
         (325, 4, 1, 8)]
write('tile-overflow.tif', pad(head + ifd(tiles, 0), 256))
tiles64k = [e if e[0] not in (322, 323) else (e[0], 4, 1, 65536) for e in tiles]
write('tile-huge.tif', pad(head + ifd(tiles64k, 0), 256))
write('ifd-self-loop.tif', pad(head + ifd(gray(4, 2, 200, 8), 8), 256))
a = ifd(gray(4, 2, 200, 8), 128)
write('ifd-mutual-loop.tif', pad(pad(head + a, 128) + ifd(gray(4, 2, 200, 8), 8), 256))
PY
# A valid file of ours, cut: in the middle of its strips, and in its header.
"$GEN" --seed 4 200 150 3 16 whole.tif
head -c $(($(wc -c <whole.tif) / 2)) whole.tif >truncated.tif
head -c 5 whole.tif >truncated-header.tif

for f in huge zero-width zero-height strip-past-end strip-runs-past-end tile-overflow tile-huge \
    ifd-self-loop ifd-mutual-loop truncated truncated-header; do
    why=""
    if [ ! -s "$f.tif" ]; then
        fail "hostile-$f" "not written"
        continue
    fi
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -f '%U %S' -o cpu.txt timeout 20 "$GT" "$f.tif" e/out.tif >stdout.bin 2>stderr.txt
        rc=$?
        read -r user sys < <(tail -n 1 cpu.txt)
    else
        timeout 20 "$GT" "$f.tif" e/out.tif >stdout.bin 2>stderr.txt
        rc=$?
        user=0 sys=0
    fi
    if [ "$rc" -ne 1 ]; then
        why="exit status $rc ($(head -c 200 stderr.txt | tr '\n' ' '))"
    elif ! head -n 1 stderr.txt | grep -qF "gtranspose: $f.tif: "; then
        why="message does not name the file: $(head -c 200 stderr.txt)"
    elif [ -s stdout.bin ]; then
        why="wrote to stdout"
    elif [ -n "$(ls -A e)" ]; then
        why="left $(ls -A e | tr '\n' ' ')"
    elif [ -z "${GIMG_TEST_SLOW:-}" ] && ! awk -v u="$user" -v s="$sys" 'BEGIN { exit !(u + s < 1.0) }'; then
        why="took $user s user + $sys s system CPU"
    fi
    # The reason names the problem.
    if [ -z "$why" ]; then
        case $f in
            huge) want='limit' ;;
            zero-*) want='size' ;;
            strip-*|truncated) want='truncated|past the end|Read error' ;;
            tile-*) want='tile' ;;
            ifd-*) want='loop' ;;
            truncated-header) want='truncated|TIFF' ;;
        esac
        grep -Eq "$want" stderr.txt || why="message does not say '$want': $(head -c 200 stderr.txt)"
    fi
    rm -f e/* e/.[!.]* 2>/dev/null
    result "hostile-$f" "$why"
done

exit $failed
