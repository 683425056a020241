#!/usr/bin/env bash
# tests/cli_meta.sh — metadata through the tools (gimg(7), METADATA): an
# ICC profile, EXIF (orientation 6), XMP and the resolution written into
# PNG, JPEG, TIFF and WebP inputs here, then read back from what gconv,
# gtranspose and ghist write in each format, in single runs and batches,
# with --strip, with -v saying what a format could not hold, and with
# hostile metadata (dropped with a warning, the image still processed).
# Reading is exiftool's (skipped without it); the inputs are made here by
# python3 (PNG) and exiftool (the others, into files cjpeg, tiffcp and
# cwebp would make, here made by ImageMagick or our own tools).
TOOL=gconv
source "$(dirname "$0")/cli_lib.sh"

PY=python3
have() { command -v "$1" >/dev/null 2>&1; }

# A small but valid ICC v2 display profile (RGB, XYZ PCS: description,
# white point, primaries, gamma curves, copyright), as the test's own.
$PY - <<'EOF' || fail setup "python could not write the ICC profile"
import struct
def s15(v): return struct.pack('>i', int(round(v * 65536)))
def xyz(x, y, z): return b'XYZ \0\0\0\0' + s15(x) + s15(y) + s15(z)
def desc(t):
    a = t.encode() + b'\0'
    return b'desc\0\0\0\0' + struct.pack('>I', len(a)) + a + b'\0' * 8 + b'\0\0\0' + b'\0' * 67
curv = b'curv\0\0\0\0' + struct.pack('>IH', 1, 0x0233) + b'\0\0'
tags = [(b'desc', desc('gimg test RGB')), (b'wtpt', xyz(0.9642, 1.0, 0.8249)),
        (b'rXYZ', xyz(0.4361, 0.2225, 0.0139)), (b'gXYZ', xyz(0.3851, 0.7169, 0.0971)),
        (b'bXYZ', xyz(0.1431, 0.0606, 0.7141)), (b'rTRC', curv), (b'gTRC', curv),
        (b'bTRC', curv), (b'cprt', b'text\0\0\0\0' + b'No copyright, use freely\0')]
offset = 128 + 4 + 12 * len(tags)
table, data = b'', b''
for sig, body in tags:
    while (offset + len(data)) % 4: data += b'\0'
    table += sig + struct.pack('>II', offset + len(data), len(body))
    data += body
body = struct.pack('>I', len(tags)) + table + data
size = 128 + len(body)
hdr = (struct.pack('>I', size) + b'lcms' + bytes([2, 0x10, 0, 0]) + b'mntrRGB XYZ ' +
       struct.pack('>6H', 2026, 11, 26, 12, 0, 0) + b'acsp' + b'APPL' + b'\0' * 4 +
       b'\0' * 8 + b'\0' * 8 + b'\0' * 4 + s15(0.9642) + s15(1.0) + s15(0.8249) +
       b'lcms' + b'\0' * 44)
assert len(hdr) == 128
open('p.icc', 'wb').write(hdr + body)
EOF

# A TIFF-structured EXIF block: IFD0 with Orientation ($1) and a pointer to
# an Exif IFD holding PixelXDimension and PixelYDimension ($2 x $3).
exif_block() {
    $PY - "$@" <<'EOF'
import struct, sys
o, w, h = map(int, sys.argv[1:4])
ifd0 = struct.pack('<H', 2) + struct.pack('<HHIHH', 0x0112, 3, 1, o, 0) + \
       struct.pack('<HHII', 0x8769, 4, 1, 38) + struct.pack('<I', 0)
exif = struct.pack('<H', 2) + struct.pack('<HHII', 0xa002, 4, 1, w) + \
       struct.pack('<HHII', 0xa003, 4, 1, h) + struct.pack('<I', 0)
sys.stdout.buffer.write(b'II*\0' + struct.pack('<I', 8) + ifd0 + exif)
EOF
}

# photo.png: 37x23 RGB with iCCP (p.icc), eXIf (orientation 6, 37x23),
# iTXt XMP (dc:title gimg-test) and pHYs (300 dpi).
exif_block 6 37 23 >photo.exif
$PY - <<'EOF' || fail setup "python could not write photo.png"
import struct, zlib
def chunk(t, d): return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
w, h = 37, 23
raw = b''.join(b'\0' + b''.join(bytes(((x * 7 + y * 3) % 256, (x * y) % 256, (255 - x * 5) % 256))
                               for x in range(w)) for y in range(h))
xmp = ('<?xpacket begin="" id="W5M0MpCehiHzreSzNTczkc9d"?><x:xmpmeta xmlns:x="adobe:ns:meta/">'
       '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description '
       'rdf:about="" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title><rdf:Alt>'
       '<rdf:li xml:lang="x-default">gimg-test</rdf:li></rdf:Alt></dc:title></rdf:Description>'
       '</rdf:RDF></x:xmpmeta><?xpacket end="w"?>').encode()
ppm = round(300 / 0.0254)
png = (b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0)) +
       chunk(b'iCCP', b'test\0\0' + zlib.compress(open('p.icc', 'rb').read())) +
       chunk(b'pHYs', struct.pack('>IIB', ppm, ppm, 1)) +
       chunk(b'eXIf', open('photo.exif', 'rb').read()) +
       chunk(b'iTXt', b'XML:com.adobe.xmp\0\0\0\0\0' + xmp) +
       chunk(b'tEXt', b'Comment\0made by cli_meta') +
       chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))
open('photo.png', 'wb').write(png)
EOF

if ! have exiftool; then
    skip metadata "exiftool is not installed: nothing reads the outputs' metadata"
    exit "$failed"
fi
ex() { exiftool -q -q -n -s3 "$@" 2>/dev/null; }

# The other inputs: the same pixels in each format, with the same
# metadata written by exiftool.
"$BIN/gtranspose" --strip --op rot180 photo.png tmp.png &&
    "$BIN/gtranspose" --strip --op rot180 tmp.png plain.png || fail setup "plain.png"
for f in jpg tif webp; do
    "$BIN/gtranspose" -q --strip --op rot180 tmp.png "photo.$f" &&
        exiftool -q -q -overwrite_original "-ICC_Profile<=p.icc" -Orientation#=6 \
            -XMP-dc:Title=gimg-test -XResolution=300 -YResolution=300 -ResolutionUnit=inches \
            "photo.$f" >/dev/null 2>&1 ||
        { skip "input-$f" "exiftool could not write metadata into photo.$f"; rm -f "photo.$f"; }
done

# has_meta NAME FILE ORIENTATION KINDS: FILE holds p.icc exactly, the
# orientation (unless -), the XMP title and 300 dpi, among KINDS (icc exif xmp
# dpi) only; the others must be absent.
has_meta() {
    local name=$1 file=$2 orient=$3 kinds=$4 why=""
    exiftool -q -q -b -ICC_Profile "$file" >got.icc 2>/dev/null
    if [[ $kinds == *icc* ]]; then
        cmp -s got.icc p.icc || why+="ICC profile not kept ($(wc -c <got.icc) bytes); "
    else
        [ -s got.icc ] && why+="ICC profile present; "
    fi
    local o
    o=$(ex -Orientation "$file")
    if [[ $kinds == *orient* ]]; then
        [ "$o" = "$orient" ] || why+="orientation '$o', want $orient; "
    else
        [ -z "$o" ] || why+="orientation '$o' present; "
    fi
    local t
    t=$(ex -XMP-dc:Title "$file")
    if [[ $kinds == *xmp* ]]; then
        [ "$t" = gimg-test ] || why+="XMP title '$t'; "
    else
        [ -z "$t" ] || why+="XMP present; "
    fi
    local r
    r=$(ex -XResolution "$file")
    # exiftool names PNG's pHYs in pixels per metre.
    [ -z "$r" ] && r=$(ex -PixelsPerUnitX "$file") && [ -n "$r" ] &&
        r=$(awk -v p="$r" 'BEGIN { print p * 0.0254 }')
    if [[ $kinds == *dpi* ]]; then
        # pHYs counts pixels per metre: 300 dpi is 11811, read as 299.9994.
        [ "$(printf '%.0f' "${r:-0}")" = 300 ] || why+="resolution '$r'; "
    fi
    result "$name" "$why"
}

# Every tool that writes images, into every format that holds metadata.
ALL="icc orient xmp dpi"
for in in photo.png photo.jpg photo.tif photo.webp; do
    [ -f "$in" ] || continue
    for out in png jpg tif webp; do
        kinds=$ALL
        # WebP has no resolution field: exiftool wrote photo.webp's into
        # EXIF, which only the formats holding EXIF keep.
        [ "$out" = webp ] || { [ "$in" = photo.webp ] && [ "$out" = tif ]; } &&
            kinds="icc orient xmp"
        "$BIN/gconv" -q -k box:1 "$in" "g.$out" &&
            has_meta "gconv-$in-to-$out" "g.$out" 6 "$kinds" ||
            fail "gconv-$in-to-$out" "gconv failed"
        "$BIN/gtranspose" -q --op flip "$in" "t.$out" &&
            has_meta "gtranspose-flip-$in-to-$out" "t.$out" 6 "$kinds" ||
            fail "gtranspose-flip-$in-to-$out" "gtranspose failed"
    done
done

# The EXIF block itself travels whole to the formats that hold it.
"$BIN/gconv" -k box:1 photo.png g2.jpg && exiftool -q -q -b -Make g2.jpg >/dev/null
$PY - <<'EOF' && pass exif-block-whole || fail exif-block-whole "the JPEG's APP1 is not photo.png's eXIf"
import sys
j = open('g2.jpg', 'rb').read()
e = open('photo.exif', 'rb').read()
i = j.find(b'Exif\0\0')
sys.exit(0 if i > 0 and j[i + 6:i + 6 + len(e)] == e else 1)
EOF
w=$(ex -ExifImageWidth g2.jpg)
h=$(ex -ExifImageHeight g2.jpg)
result exif-dimensions-kept "$([ "$w x $h" = "37 x 23" ] || echo "$w x $h")"
"$BIN/gtranspose" --op rot90 photo.png r.jpg
w=$(ex -ExifImageWidth r.jpg)
h=$(ex -ExifImageHeight r.jpg)
result exif-dimensions-swapped "$([ "$w x $h" = "23 x 37" ] || echo "$w x $h after rot90")"

# PNG's text chunks travel to PNG.
"$BIN/gconv" -k box:1 photo.png g3.png
result png-text-kept "$([ "$(ex -PNG:Comment g3.png)" = "made by cli_meta" ] ||
    echo "Comment '$(ex -PNG:Comment g3.png)'")"

# A batch keeps each image's own metadata.
mkdir -p b
cp photo.png b/one.png
"$BIN/gtranspose" --strip --op flop photo.png b/two.png
exiftool -q -q -overwrite_original -Orientation#=3 b/two.png >/dev/null 2>&1
"$BIN/gconv" -q -j 2 -k box:1 -o out/ b/one.png b/two.png photo.jpg
has_meta batch-one out/one.png 6 "$ALL"
result batch-two "$([ "$(ex -Orientation out/two.png)" = 3 ] && [ -z "$(ex -XMP-dc:Title out/two.png)" ] ||
    echo "orientation '$(ex -Orientation out/two.png)'")"
[ -f photo.jpg ] && has_meta batch-jpeg out/photo.jpg 6 "$ALL"

# --strip writes none, for every format and tool.
for out in png jpg tif webp; do
    "$BIN/gconv" -q --strip -k box:1 photo.png "s.$out"
    has_meta "strip-gconv-$out" "s.$out" - ""
done
"$BIN/gtranspose" --strip --op auto photo.png s2.png
has_meta strip-gtranspose s2.png - ""
"$BIN/ghist" -q --strip --equalize eq.png photo.png >/dev/null
has_meta strip-ghist-equalize eq.png - ""
"$BIN/ghist" -q --equalize eq2.png photo.png >/dev/null
has_meta ghist-equalize-keeps eq2.png 6 "$ALL"

# What a format cannot hold is dropped, and -v says what.
"$BIN/gconv" -v -k box:1 photo.png g.ppm 2>v.txt
grep -q "gconv: PNM output: ICC profile, EXIF, XMP, resolution, text chunks dropped" v.txt &&
    pass verbose-pnm-drops || fail verbose-pnm-drops "$(grep -i dropped v.txt)"
"$BIN/gconv" -k box:1 photo.png g4.ppm 2>q.txt
result quiet-without-v "$([ -s q.txt ] && cat q.txt)"
"$BIN/gconv" -v -k box:1 photo.png g.tif 2>v.txt
grep -q "gconv: TIFF output: EXIF, text chunks dropped" v.txt &&
    pass verbose-tiff-drops || fail verbose-tiff-drops "$(grep -i dropped v.txt)"
"$BIN/gconv" -v -k box:1 photo.png g5.jpg 2>v.txt
grep -q "JPEG output: text chunks dropped" v.txt && pass verbose-jpeg-drops-text ||
    fail verbose-jpeg-drops-text "$(cat v.txt | grep -i drop)"

# A PNM pipe between two tools carries pixels only (documented).
"$BIN/gconv" -k box:1 photo.png - | "$BIN/gtranspose" --op flip - p.png
has_meta pnm-pipe-drops p.png - ""

# Orientation from a TIFF tag reaches JPEG as EXIF, and back.
if [ -f photo.tif ]; then
    exiftool -q -q -overwrite_original -EXIF:all= -Orientation#=8 photo.tif >/dev/null 2>&1
    "$BIN/gconv" -k box:1 photo.tif o.jpg
    result tiff-orientation-to-jpeg "$([ "$(ex -Orientation o.jpg)" = 8 ] || echo "'$(ex -Orientation o.jpg)'")"
    "$BIN/gconv" -k box:1 o.jpg o.tif
    result jpeg-orientation-to-tiff "$([ "$(ex -IFD0:Orientation o.tif)" = 8 ] || echo "'$(ex -IFD0:Orientation o.tif)'")"
fi

# ------------------------------------------------------- hostile metadata

# warned NAME FILE WANT: exit 0, a warning naming the file and WANT, the
# output written with the image's pixels.
warned() {
    local name=$1 file=$2 want=$3 why=""
    "$BIN/gtranspose" --op flip "$file" w.png 2>w.txt
    local rc=$?
    [ "$rc" -eq 0 ] || why+="exit $rc: $(head -c 200 w.txt); "
    grep -q "^gtranspose: $file: warning: .*$want" w.txt || why+="no warning '$want': $(head -c 200 w.txt); "
    "$BIN/gtranspose" -q --op flip plain.png ref.png
    same w.png ref.png >/dev/null || why+="pixels differ; "
    result "$name" "$why"
}

# EXIF whose IFD0 loops onto itself, and one pointing past its block.
$PY - <<'EOF'
import struct, zlib
def chunk(t, d): return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
png = open('photo.png', 'rb').read()
i = png.find(b'eXIf') - 4
n = struct.unpack('>I', png[i:i + 4])[0]
def with_exif(e): return png[:i] + chunk(b'eXIf', e) + png[i + 12 + n:]
loop = b'II*\0' + struct.pack('<I', 8) + struct.pack('<H', 1) + \
       struct.pack('<HHIHH', 0x0112, 3, 1, 6, 0) + struct.pack('<I', 8)
past = b'II*\0' + struct.pack('<I', 4000) + b'\0' * 20
open('exif-loop.png', 'wb').write(with_exif(loop))
open('exif-past.png', 'wb').write(with_exif(past))
EOF
warned exif-loop exif-loop.png "EXIF dropped: its IFDs loop"
warned exif-past exif-past.png "EXIF dropped: its IFD0 points past the block"
$PROG -q -k box:1 exif-loop.png w2.png 2>w.txt
result hostile-quiet "$([ -s w.txt ] && cat w.txt)"

# A JPEG whose ICC chunks have a gap (1 and 3 of 3) and one whose count
# is wrong: the profile is dropped, the image kept.
if [ -f photo.jpg ]; then
    $PY - <<'EOF'
import struct
j = open('photo.jpg', 'rb').read()
def app2(seq, count, data):
    body = b'ICC_PROFILE\0' + bytes([seq, count]) + data
    return b'\xff\xe2' + struct.pack('>H', len(body) + 2) + body
icc = open('p.icc', 'rb').read()
# Drop the file's own APP2 markers, then add ours after SOI.
out, i = bytearray(j[:2]), 2
while j[i] == 0xff and j[i + 1] != 0xda:
    n = struct.unpack('>H', j[i + 2:i + 4])[0]
    if j[i + 1] != 0xe2:
        out += j[i:i + 2 + n]
    i += 2 + n
rest = j[i:]
third = len(icc) // 3
open('icc-gap.jpg', 'wb').write(bytes(out) + app2(1, 3, icc[:third]) + app2(3, 3, icc[2 * third:]) + rest)
open('icc-count.jpg', 'wb').write(bytes(out) + app2(1, 2, icc[:third]) + app2(2, 3, icc[third:]) + rest)
EOF
    "$BIN/gtranspose" -q --strip --op flip photo.jpg ref.png
    for f in icc-gap.jpg icc-count.jpg; do
        "$BIN/gtranspose" --op flip "$f" w.png 2>w.txt
        rc=$?
        why=""
        [ "$rc" -eq 0 ] || why+="exit $rc; "
        grep -q "^gtranspose: $f: warning: .*ICC" w.txt || why+="no warning: $(head -c 200 w.txt); "
        same w.png ref.png >/dev/null || why+="pixels differ; "
        [ -z "$(exiftool -q -q -b -ICC_Profile w.png)" ] || why+="a profile was kept; "
        result "hostile-$f" "$why"
    done
fi

exit "$failed"
