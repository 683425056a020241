#!/usr/bin/env bash
# tests/cli_codec_tiff.sh — TIFF through the tools (gtranspose): every
# layout gimg writes round-trips under --compress none|lzw|deflate; files
# that other programs write from ours (tiffcp: tiles, separate planes,
# PackBits, JPEG, big-endian; ImageMagick: MINISWHITE, palette, bilevel
# G4, float, alpha, tiles) decode to the same samples as vips's or
# ImageMagick's decoding of the same file; pages as FILE[N]; metadata (ICC
# profile, XMP, resolution, orientation) kept page by page and dropped by
# --strip, checked with tiffinfo, exiftool and identify; 12-bit and 10-bit
# samples kept in their own units (maxval) through TIFF and pipes, and
# b-bit files ImageMagick writes read as it reads them; hostile files made
# here (python3) are refused cleanly and quickly.
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

# ------------------------------------------------- metadata (python3 tifffile)

PY3=/usr/bin/python3
EXIFTOOL=$(command -v exiftool || true)
IDENTIFY=/usr/bin/identify
[ -x "$IDENTIFY" ] || IDENTIFY=""
# Input files with metadata, written by tifffile (numpy): m.tif (RGB,
# orientation 6, 300 dpi, ICC profile, XMP), cm.tif (100 pixels/cm),
# multi.tif (page 0 plain, page 1 with its own ICC, XMP and orientation 8).
# The ICC profile is PIL's sRGB when PIL is there, else an outline written here.
if [ -x "$PY3" ] && "$PY3" -c 'import numpy, tifffile' 2>/dev/null &&
    "$PY3" - <<'PY' 2>meta-setup.err
import numpy as np, struct, tifffile
try:
    from PIL import ImageCms
    icc = ImageCms.ImageCmsProfile(ImageCms.createProfile('sRGB')).tobytes()
except Exception:
    body = bytes(range(256)) * 2
    icc = struct.pack('>I', 132 + len(body)) + b'none' + b'\x02\x10\x00\x00' + b'mntrRGB XYZ '
    icc += b'\x00' * 12 + b'acsp' + b'\x00' * (128 - 40) + struct.pack('>I', 0) + body
icc2 = icc[:-8] + b'page two'
open('srgb.icc', 'wb').write(icc)
open('icc2.icc', 'wb').write(icc2)
xmp = (b"<?xpacket begin='' id='W5M0MpCehiHzreSzNTczkc9d'?><x:xmpmeta xmlns:x='adobe:ns:meta/'>"
       b"<rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'/></x:xmpmeta>"
       b"<?xpacket end='w'?>")
xmp2 = xmp.replace(b"end='w'", b"end='r'")
open('xmp.xml', 'wb').write(xmp)
open('xmp2.xml', 'wb').write(xmp2)
y, x = np.mgrid[0:30, 0:40]
rgb = np.stack([x * 6, y * 8, (x * y) % 256], axis=2).astype(np.uint8)
def tags(icc, xmp, orientation):
    return [(34675, 7, len(icc), icc, True), (700, 1, len(xmp), xmp, True),
            (274, 3, 1, orientation, True)]
tifffile.imwrite('m.tif', rgb, photometric='rgb', resolution=(300, 300),
                 resolutionunit='INCH', extratags=tags(icc, xmp, 6))
tifffile.imwrite('cm.tif', rgb, photometric='rgb', resolution=(100, 50),
                 resolutionunit='CENTIMETER')
with tifffile.TiffWriter('multi-meta.tif') as t:
    t.write(rgb[:, :, 0], photometric='minisblack')
    t.write(rgb, photometric='rgb', resolution=(72, 72), resolutionunit='INCH',
            extratags=tags(icc2, xmp2, 8))
PY
then
    # kept NAME FILE ICC XMP RES ORIENT: FILE holds exactly that ICC profile
    # and XMP packet (files; "-": none), resolution ("300, 300"; "-": none)
    # and orientation (tiffinfo's words; "-": no tag).
    kept() {
        local name=$1 f=$2 icc=$3 xmp=$4 res=$5 orient=$6 why="" info
        if [ ! -s "$f" ]; then
            fail "$name" "not written"
            return
        fi
        if have tiffinfo; then
            info=$(tiffinfo "$f" 2>&1)
            if [ "$res" = - ]; then
                grep -q 'Resolution:' <<<"$info" && why="a resolution written"
            else
                grep -q "Resolution: $res pixels/inch" <<<"$info" ||
                    why="resolution: $(grep 'Resolution' <<<"$info")"
            fi
            if [ "$orient" = - ]; then
                grep -q 'Orientation:' <<<"$info" && why="${why:+$why, }an orientation written"
            else
                grep -q "Orientation: $orient" <<<"$info" ||
                    why="${why:+$why, }orientation: $(grep 'Orientation' <<<"$info")"
            fi
            [ "$icc" = - ] && grep -q 'ICC Profile' <<<"$info" && why="${why:+$why, }an ICC profile"
            [ "$xmp" = - ] && grep -q 'XMLPacket' <<<"$info" && why="${why:+$why, }an XMP packet"
        fi
        if [ -n "$EXIFTOOL" ]; then
            if [ "$icc" != - ]; then
                "$EXIFTOOL" -b -ICC_Profile "$f" >icc.out 2>/dev/null
                cmp -s icc.out "$icc" || why="${why:+$why, }ICC profile differs (exiftool)"
            fi
            if [ "$xmp" != - ]; then
                "$EXIFTOOL" -b -XMP "$f" >xmp.out 2>/dev/null
                cmp -s xmp.out "$xmp" || why="${why:+$why, }XMP differs (exiftool)"
            fi
        fi
        result "$name" "$why"
    }
    if ! have tiffinfo && [ -z "$EXIFTOOL" ]; then
        skip metadata "neither tiffinfo nor exiftool installed"
    else
        "$GT" -q --op flip m.tif meta-flip.tif
        kept meta-kept-by-flip meta-flip.tif srgb.icc xmp.xml "300, 300" "row 0 rhs, col 0 top"
        for comp in none lzw; do
            "$GT" -q --compress $comp --op rot90 m.tif meta-$comp.tif
            kept meta-kept-$comp meta-$comp.tif srgb.icc xmp.xml "300, 300" "row 0 rhs, col 0 top"
        done
        "$GT" -q cm.tif meta-cm.tif
        kept meta-centimetres-as-inch meta-cm.tif - - "254, 127" -
        "$GT" -q 'multi-meta.tif[1]' meta-p1.tif
        kept meta-page-1 meta-p1.tif icc2.icc xmp2.xml "72, 72" "row 0 lhs, col 0 bottom"
        "$GT" -q 'multi-meta.tif[0]' meta-p0.tif
        kept meta-page-0-none meta-p0.tif - - - -
        "$GT" -q --strip m.tif meta-strip.tif
        kept meta-strip meta-strip.tif - - - -
        # gimg's own file with metadata, read back by gimg (two tools).
        "$GT" -q --op flip meta-flip.tif meta-twice.tif
        kept meta-kept-twice meta-twice.tif srgb.icc xmp.xml "300, 300" "row 0 rhs, col 0 top"
        why=$(same meta-twice.tif m.tif)
        result meta-twice-pixels "$why"
    fi
    # ImageMagick reads what we wrote the same way.
    if [ -n "$IDENTIFY" ] && [ -s meta-flip.tif ]; then
        got=$("$IDENTIFY" -format '%[orientation] %x %y %U' meta-flip.tif 2>/dev/null)
        want="RightTop 300 300 PixelsPerInch"
        [ "$got" = "$want" ] && pass meta-identify || fail meta-identify "'$got', want '$want'"
        if "$IDENTIFY" -verbose meta-flip.tif 2>/dev/null | grep -q 'Profile-icc: 588 bytes' ||
            [ "$(wc -c <srgb.icc)" != 588 ]; then
            pass meta-identify-icc
        else
            fail meta-identify-icc "identify -verbose shows no 588-byte ICC profile"
        fi
    fi
else
    skip metadata "/usr/bin/python3 with numpy and tifffile not installed ($(head -c 100 meta-setup.err 2>/dev/null))"
fi

# ------------------------------------------------- samples in their own units

# pnm.py: PNM files of any maxval, made and compared here (python3 only).
cat >pnm.py <<'PY'
import sys

def read(path):
    d = open(path, 'rb').read()
    toks, i = [], 0
    while len(toks) < 4:
        while d[i:i + 1].isspace():
            i += 1
        if d[i:i + 1] == b'#':
            while d[i:i + 1] not in (b'\n', b''):
                i += 1
            continue
        j = i
        while not d[j:j + 1].isspace():
            j += 1
        toks.append(d[i:j])
        i = j
    i += 1
    w, h, m = int(toks[1]), int(toks[2]), int(toks[3])
    ch = 1 if toks[0] == b'P5' else 3
    n = w * h * ch
    if m > 255:
        raw = d[i:i + 2 * n]
        vals = [raw[2 * k] << 8 | raw[2 * k + 1] for k in range(len(raw) // 2)]
    else:
        vals = list(d[i:i + n])
    return w, h, ch, m, vals

cmd = sys.argv[1]
if cmd == 'make':           # make CHANNELS W H MAXVAL OUT
    ch, w, h, m = map(int, sys.argv[2:6])
    vals = [(x * 97 + y * 193 + c * 1001 + (x * y) % 51) % (m + 1)
            for y in range(h) for x in range(w) for c in range(ch)]
    vals[0], vals[1] = 0, m
    out = b'P%d\n%d %d\n%d\n' % (5 if ch == 1 else 6, w, h, m)
    out += bytes(vals) if m < 256 else b''.join(v.to_bytes(2, 'big') for v in vals)
    open(sys.argv[6], 'wb').write(out)
elif cmd == 'maxval':
    print(read(sys.argv[2])[3])
elif cmd == 'same':         # same A B [SCALE]: equal, or A scaled to B's maxval
    a, b = read(sys.argv[2]), read(sys.argv[3])
    if a[:3] != b[:3]:
        sys.exit('layout %s vs %s' % (a[:3], b[:3]))
    va = a[4]
    if len(sys.argv) > 4:
        va = [(v * b[3] * 2 + a[3]) // (2 * a[3]) for v in va]
    elif a[3] != b[3]:
        sys.exit('maxval %d vs %d' % (a[3], b[3]))
    bad = [k for k in range(len(va)) if va[k] != b[4][k]]
    if bad:
        sys.exit('%d samples differ, first at %d: %d vs %d' % (len(bad), bad[0], va[bad[0]],
                                                               b[4][bad[0]]))
PY
pnm() { python3 pnm.py "$@"; }
tiff_bits() { tiffinfo "$1" 2>/dev/null | sed -n 's/^ *Bits\/Sample: //p'; }

# 12-bit gray and 10-bit RGB (PNM maxval 4095, 1023) through TIFF and back:
# BitsPerSample 12/10, no predictor, samples and maxval kept under every
# compression; ImageMagick reads our TIFF as the source's values (compared
# at 16 bits, v16 = round(v * 65535 / maxval): ImageMagick 6's own -depth 12
# PNM output rounds some samples 2 levels off its 16-bit reading).
pnm make 1 61 37 4095 src12.pgm && pnm make 3 45 29 1023 src10.ppm ||
    fail setup "python3 could not write the PNM sources"
for src in src12.pgm src10.ppm; do
    case $src in src12.pgm) bits=12 ext=pgm ;; *) bits=10 ext=ppm ;; esac
    for comp in none lzw deflate; do
        why=""
        name=maxval-$bits-$comp
        if ! "$GT" -q --compress $comp --op flip "$src" "$name-a.tif" ||
            ! "$GT" -q --compress $comp --op flip "$name-a.tif" "$name-b.tif" ||
            ! "$GT" -q --op transpose "$name-b.tif" "$name-t.$ext" ||
            ! "$GT" -q --op transpose "$name-t.$ext" "$name-back.$ext"; then
            why="the tool failed"
        else
            why=$(pnm same "$name-back.$ext" "$src" 2>&1)
            if [ -z "$why" ] && have tiffinfo; then
                [ "$(tiff_bits "$name-b.tif")" = "$bits" ] || why="Bits/Sample $(tiff_bits "$name-b.tif")"
                tiffinfo "$name-b.tif" 2>/dev/null | grep -q Predictor && why="${why:+$why, }a predictor"
            fi
        fi
        result "$name" "$why"
    done
    if [ -n "$IM" ] && [ -s "maxval-$bits-deflate-b.tif" ]; then
        "$IM" "maxval-$bits-deflate-b.tif" -depth 16 "im-$bits.$ext" 2>/dev/null
        why=$(pnm same "$src" "im-$bits.$ext" scale 2>&1)
        depth=$("$IDENTIFY" -format '%z' "maxval-$bits-deflate-b.tif" 2>/dev/null)
        [ "$depth" = "$bits" ] || why="${why:+$why, }identify says depth $depth"
        result "maxval-$bits-imagemagick-reads" "$why"
    fi
done

# A pipe between two tools (PNM keeps the maxval), into a 12-bit TIFF.
why=""
"$GT" -q --op flip src12.pgm - | "$GT" -q --op flip - pipe12.tif || why="the tools failed"
[ -z "$why" ] && "$GT" -q pipe12.tif pipe12-t.pgm && "$GT" -q pipe12-t.pgm pipe12.pgm || why="the tool failed"
[ -z "$why" ] && why=$(pnm same pipe12.pgm src12.pgm 2>&1)
[ -z "$why" ] && have tiffinfo && [ "$(tiff_bits pipe12.tif)" != 12 ] && why="Bits/Sample $(tiff_bits pipe12.tif)"
result maxval-12-pipe-to-tiff "$why"

# Maxval 1 is written as a 1-bit TIFF, which reads back as 0/255.
why=""
pnm make 1 19 7 1 src1.pgm
"$GT" -q --op flip src1.pgm one.tif && "$GT" -q --op flip one.tif one-back.pgm || why="the tool failed"
[ -z "$why" ] && why=$(pnm same src1.pgm one-back.pgm scale 2>&1)
[ -z "$why" ] && [ "$(pnm maxval one-back.pgm)" != 255 ] && why="maxval $(pnm maxval one-back.pgm)"
[ -z "$why" ] && have tiffinfo && [ "$(tiff_bits one.tif)" != 1 ] && why="Bits/Sample $(tiff_bits one.tif)"
result maxval-1-as-1-bit "$why"

# b-bit files ImageMagick writes (-depth 12, 4, 2) decode to the samples it
# reads from them (its 16-bit reading, scaled from our maxval 2^b - 1).
if [ -n "$IM" ]; then
    for spec in "12 gray gradient:black-white" "12 rgb plasma:fractal" "4 gray gradient:" \
        "2 gray gradient:" "10 rgb plasma:fractal"; do
        read -r bits kind pattern <<<"$spec"
        ext=pgm
        [ "$kind" = rgb ] && ext=ppm
        name=imagemagick-$bits-bit-$kind
        why=""
        "$IM" -seed 3 -size 67x23 "$pattern" $([ "$kind" = gray ] && echo -colorspace Gray) \
            -depth "$bits" "$name.tif" 2>/dev/null &&
            "$IM" "$name.tif" -depth 16 "$name-ref.$ext" 2>/dev/null || why="ImageMagick failed"
        [ -z "$why" ] && { "$GT" -q --op flip "$name.tif" "$name-f.tif" &&
            "$GT" -q --op flip "$name-f.tif" "$name-ours.$ext" || why="the tool failed"; }
        [ -z "$why" ] && why=$(pnm same "$name-ours.$ext" "$name-ref.$ext" scale 2>&1)
        want=$(((1 << bits) - 1))
        [ -z "$why" ] && [ "$(pnm maxval "$name-ours.$ext")" != "$want" ] &&
            why="maxval $(pnm maxval "$name-ours.$ext"), want $want"
        result "$name" "$why"
    done
    if have pamsumm; then
        # pamsumm's mean of ours (12-bit units) is ImageMagick's 16-bit one
        # in 12-bit units.
        a=$(pamsumm -mean -brief imagemagick-12-bit-gray-ours.pgm 2>/dev/null)
        b=$(pamsumm -mean -brief imagemagick-12-bit-gray-ref.pgm 2>/dev/null)
        if [ -n "$a" ] && [ -n "$b" ] &&
            awk -v a="$a" -v b="$b" 'BEGIN { d = a - b * 4095 / 65535; exit !(d < 0.01 && d > -0.01) }'; then
            pass imagemagick-12-bit-pamsumm
        else
            fail imagemagick-12-bit-pamsumm "mean '$a' (12-bit) vs '$b' (16-bit)"
        fi
    fi
else
    skip imagemagick-b-bit "ImageMagick (/usr/bin/convert) not installed"
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
# 12-bit gray 16 x 16 (24 bytes a row): a strip running past the end, and
# 16 strips of a row whose byte counts say 12 (offsets at 100, counts at 170).
b12 = lambda e: [x if x[0] != 258 else (258, 3, 1, 12) for x in e]
write('bits12-strip-runs-past-end.tif', pad(head + ifd(b12(gray(16, 16, 200, 384)), 0), 300))
short = [x for x in b12(gray(16, 16, 0, 0)) if x[0] not in (273, 278, 279)]
short += [(273, 4, 16, 100), (278, 4, 1, 1), (279, 4, 16, 170)]
body = pad(head + ifd(short, 0), 100) + struct.pack('<16I', *range(256, 256 + 16 * 24, 24))
body = pad(body, 170) + struct.pack('<16I', *([12] * 16))
write('bits12-short-strips.tif', pad(body, 256 + 16 * 24))
PY
# A valid file of ours, cut: in the middle of its strips, and in its header.
"$GEN" --seed 4 200 150 3 16 whole.tif
head -c $(($(wc -c <whole.tif) / 2)) whole.tif >truncated.tif
head -c 5 whole.tif >truncated-header.tif

for f in huge zero-width zero-height strip-past-end strip-runs-past-end tile-overflow tile-huge \
    ifd-self-loop ifd-mutual-loop truncated truncated-header bits12-strip-runs-past-end \
    bits12-short-strips; do
    why=""
    if [ ! -s "$f.tif" ]; then
        fail "hostile-$f" "not written"
        continue
    fi
    # huge: under a pixel limit given (the old default's), refused from
    # its header, naming the limit.
    opts=()
    [ "$f" = huge ] && opts=(--max-pixels 268435456)
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -f '%U %S' -o cpu.txt timeout 20 "$GT" "${opts[@]}" "$f.tif" e/out.tif \
            >stdout.bin 2>stderr.txt
        rc=$?
        read -r user sys < <(tail -n 1 cpu.txt)
    else
        timeout 20 "$GT" "${opts[@]}" "$f.tif" e/out.tif >stdout.bin 2>stderr.txt
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
            strip-*|truncated|bits12-strip-*) want='truncated|past the end|Read error' ;;
            bits12-short-*) want='Not enough data|truncated' ;;
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
