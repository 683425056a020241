#!/usr/bin/env bash
# tests/cli_codec_png.sh — PNG reading through the tools (gtranspose):
# interlaced files and low bit depths, made here (python3) with their
# samples known, decode to those samples; ImageMagick's PNGs of every kind
# decode as ImageMagick decodes them; our own PNGs round-trip; metadata
# (ICC profile, EXIF, XMP, resolution, text chunks) survives, as exiftool
# and ImageMagick read it; 12-, 10- and 5-bit images keep their maxval
# through sBIT, their samples stored scaled by bit replication; hostile
# files made here are refused cleanly and quickly: palette indices past
# PLTE, an IDAT with no data, CRC errors, truncations, a zTXt decompression
# bomb past 64 MiB, sizes over the limits; hostile metadata below those
# limits (a 16 MB iTXt, a 20 MB zTXt bomb, EXIF pointing past its block)
# is dropped with a warning and the image processed, in bounded memory.
# One PASS/FAIL/SKIP line per test; BIN and BUILD as in cli_lib.sh.
# A test that needs a peer that is missing says SKIP. GIMG_TEST_SLOW=1
# (tests/valgrind.sh sets it) skips the timing checks.
TOOL=gtranspose
. "$(dirname "$0")/cli_lib.sh"
export LC_ALL=C
GT=$PROG
IM=/usr/bin/convert
[ -x "$IM" ] || IM=""
mkdir -p e

# The PNG writer of this test: png.py OUT W H COLOR DEPTH INTERLACE [extra]
# writes a PNG of seeded samples and, beside it, OUT.want.pam: the image
# the PNG must decode to, transposed (what gtranspose writes), worked out
# from the samples (low-depth gray scaled by 255 / (2^depth - 1), palettes
# looked up, tRNS as alpha 0 on its colour). Extra: "trns" adds a tRNS
# chunk; "badindex" puts a palette index past PLTE's entries in the last
# pixel.
cat >png.py <<'PY'
import random, struct, sys, zlib

def chunk(t, d):
    return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)

out, w, h, color, depth, interlace = sys.argv[1], *map(int, sys.argv[2:7])
extra = sys.argv[7:]
rnd = random.Random(w * 1000 + h * 10 + color + depth)
n = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[color]
top = (1 << depth) - 1
entries = min(top, 5) if color == 3 else 0
plte = [[rnd.randrange(256) for _ in range(3)] for _ in range(entries)]
alphas = [rnd.randrange(256) for _ in range(max(1, entries - 1))]
key = [rnd.randrange(top + 1) for _ in range(3)]
px = {}
for y in range(h):
    for x in range(w):
        if color == 3:
            px[x, y] = [rnd.randrange(entries)]
        elif 'trns' in extra and (x + y) % 3 == 0:
            px[x, y] = key[:n]
        else:
            px[x, y] = [rnd.randrange(top + 1) for _ in range(n)]
if 'badindex' in extra:
    px[w - 1, h - 1] = [entries]

passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
          (0, 1, 1, 2)] if interlace else [(0, 0, 1, 1)]
raw = b''
for x0, y0, dx, dy in passes:
    xs, ys = range(x0, w, dx), range(y0, h, dy)
    if not xs or not ys:
        continue
    for y in ys:
        if depth == 16:
            row = b''.join(struct.pack('>H', s) for x in xs for s in px[x, y])
        else:
            bits = ''.join(format(s, '0%db' % depth) for x in xs for s in px[x, y])
            bits += '0' * (-len(bits) % 8)
            row = bytes(int(bits[i:i + 8], 2) for i in range(0, len(bits), 8))
        raw += b'\0' + row
png = b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, depth, color, 0, 0, interlace))
if color == 3:
    png += chunk(b'PLTE', bytes(sum(plte, [])))
if 'trns' in extra:
    png += chunk(b'tRNS', bytes(alphas) if color == 3 else b''.join(struct.pack('>H', k) for k in key[:n]))
png += chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b'')
open(out, 'wb').write(png)

# What it decodes to, transposed.
alpha = 'trns' in extra and color in (0, 2, 3)
chans = (3 if color == 3 else n) + alpha
big = depth == 16
maxv = 65535 if big else 255
def decoded(s):
    if color == 3:
        i = s[0]
        v = plte[i][:] if i < entries else [0, 0, 0]
        return v + ([alphas[i] if i < len(alphas) else 255] if alpha else [])
    v = [c * (255 // top) if depth < 8 else c for c in s]
    return v + ([0 if s == key[:n] else maxv] if alpha else [])
tupl = {1: 'GRAYSCALE', 2: 'GRAYSCALE_ALPHA', 3: 'RGB', 4: 'RGB_ALPHA'}[chans]
pam = ('P7\nWIDTH %d\nHEIGHT %d\nDEPTH %d\nMAXVAL %d\nTUPLTYPE %s\nENDHDR\n'
       % (h, w, chans, maxv, tupl)).encode()
for x in range(w):
    for y in range(h):
        for v in decoded(px[x, y]):
            pam += struct.pack('>H', v) if big else bytes([v])
open(out + '.want.pam', 'wb').write(pam)
PY

# ------------------------------------------------------ layouts it decodes

# Every colour type and bit depth, interlaced or not, tRNS where allowed:
# the tool's output equals the samples the file was made of.
for spec in "0 1" "0 2" "0 4" "0 8" "0 16" "2 8" "2 16" "3 1" "3 2" "3 4" "3 8" "4 8" "4 16" \
    "6 8" "6 16"; do
    set -- $spec
    color=$1 depth=$2
    for il in 0 1; do
        for extra in "" trns; do
            [ -n "$extra" ] && { [ "$color" = 4 ] || [ "$color" = 6 ]; } && continue
            name=c$color-d$depth-i$il${extra:+-$extra}
            why=""
            if ! python3 png.py "$name.png" 13 9 "$color" "$depth" "$il" $extra; then
                why="python3 could not write it"
            elif ! "$GT" -q "$name.png" "$name.pam" 2>err.txt; then
                why="the tool failed: $(head -c 200 err.txt)"
            else
                why=$(same "$name.pam" "$name.png.want.pam")
            fi
            result "decode-$name" "$why"
        done
    done
done

# ImageMagick's PNGs (libpng, its own choices of filters and chunks): the
# tool's output equals ImageMagick's decoding of the same file.
if [ -n "$IM" ]; then
    "$GEN" --seed 5 61 37 3 8 src8.ppm
    "$GEN" --seed 6 61 37 4 16 src16.pam
    for kind in "plain 8 src8.ppm" "interlaced 8 src8.ppm -interlace PNG" \
        "palette 8 src8.ppm -colors 200 -type Palette" \
        "palette-interlaced 8 src8.ppm -colors 13 -type Palette -interlace PNG" \
        "gray2 8 src8.ppm -colorspace Gray -depth 2" \
        "gray4-interlaced 8 src8.ppm -colorspace Gray -depth 4 -interlace PNG" \
        "rgba16-interlaced 16 src16.pam -interlace PNG"; do
        set -- $kind
        name=$1 depth=$2 src=$3
        shift 3
        why=""
        # ImageMagick's PAM of a low-depth gray image is RGB: PGM it is.
        ref=im-$name.pam
        case $name in gray*) ref=im-$name.pgm ;; esac
        if ! "$IM" "$src" "$@" "im-$name.png" 2>err.txt || ! "$IM" "im-$name.png" -transpose \
            -depth "$depth" "$ref" 2>>err.txt; then
            why="ImageMagick failed: $(head -c 200 err.txt)"
        elif ! "$GT" -q "im-$name.png" "t-$name.pam" 2>err.txt; then
            why="the tool failed: $(head -c 200 err.txt)"
        else
            why=$(same "t-$name.pam" "$ref")
        fi
        result "imagemagick-$name" "$why"
    done
else
    skip imagemagick "$IM is not installed"
fi

# Our own PNGs, every layout we write, come back bit for bit through two
# transposes.
for ch in 1 2 3 4; do
    for depth in 8 16; do
        why=""
        "$GEN" --seed $((ch + depth)) 45 23 "$ch" "$depth" own-c$ch-d$depth.png || why="gen failed"
        if [ -z "$why" ]; then
            if ! "$GT" -q own-c$ch-d$depth.png t.png || ! "$GT" -q t.png back.png; then
                why="the tool failed"
            else
                why=$(same back.png own-c$ch-d$depth.png)
            fi
        fi
        result "round-trip-c$ch-d$depth" "$why"
    done
done

# ------------------------------------------------------------- metadata

# meta.py: the metadata files of this test, and what they hold.
#   meta.py make OUT: a 13x9 gray PNG with an ICC profile (a minimal valid
#     v2 gray profile, written here), EXIF (orientation 6), an XMP packet,
#     300 dpi (11811 pixels per metre) and text chunks of every kind; the
#     profile beside it as OUT.icc.
#   meta.py check FILE: prints the chunks' types, then checks that FILE
#     holds that metadata as meta.py make wrote it (exit 1 with the reason
#     otherwise).
#   meta.py hostile: the hostile metadata files (see below).
cat >meta.py <<'PY'
import struct, sys, zlib

def chunk(t, d):
    return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)

def chunks(png):
    p, out = 8, []
    while p + 12 <= len(png):
        n = struct.unpack('>I', png[p:p + 4])[0]
        out.append((png[p + 4:p + 8].decode('latin-1'), png[p + 8:p + 8 + n]))
        p += 12 + n
    return out

def s15(v):
    return struct.pack('>i', round(v * 65536))

def icc_profile():
    desc = b'desc' + bytes(4) + struct.pack('>I', 5) + b'gimg\0' + bytes(12) + bytes(67)
    tags = [(b'desc', desc), (b'wtpt', b'XYZ ' + bytes(4) + s15(0.9642) + s15(1.0) + s15(0.8249)),
            (b'kTRC', b'curv' + bytes(4) + struct.pack('>IH', 1, 0x0233) + bytes(2)),
            (b'cprt', b'text' + bytes(4) + b'No copyright, test profile\0' + bytes(1))]
    table, data, at = b'', b'', 128 + 4 + 12 * len(tags)
    for sig, body in tags:
        table += sig + struct.pack('>II', at + len(data), len(body))
        data += body + bytes(-len(body) % 4)
    size = at + len(data)
    head = (struct.pack('>I', size) + b'none' + bytes([2, 0x10, 0, 0]) + b'mntrGRAYXYZ '
            + struct.pack('>6H', 2024, 1, 1, 0, 0, 0) + b'acsp' + b'APPL' + bytes(4) + bytes(8)
            + bytes(8) + bytes(4) + s15(0.9642) + s15(1.0) + s15(0.8249) + b'gimg' + bytes(16)
            + bytes(28))
    assert len(head) == 128
    return head + struct.pack('>I', len(tags)) + table + data

# Little-endian EXIF: IFD0 with ImageDescription and Orientation 6.
EXIF = (b'II*\0' + struct.pack('<I', 8) + struct.pack('<H', 2)
        + struct.pack('<HHII', 0x010e, 2, 10, 38) + struct.pack('<HHIHH', 0x0112, 3, 1, 6, 0)
        + struct.pack('<I', 0) + b'gimg test\0')
XMP = ('<?xpacket begin="\ufeff" id="W5M0MpCehiHzreSzNTczkc9d"?>\n<x:xmpmeta xmlns:x="adobe:ns:meta/">'
       '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description rdf:about=""'
       ' xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:creator><rdf:Seq><rdf:li>gimg tester</rdf:li>'
       '</rdf:Seq></dc:creator></rdf:Description></rdf:RDF></x:xmpmeta>\n<?xpacket end="w"?>').encode()
TEXTS = [('tEXt', b'Title\0A title'),
         ('zTXt', b'Comment\0\0' + zlib.compress(b'A comment, squeezed. ' * 20)),
         ('iTXt', b'Description\0\0\0fr\0Beschreibung\0' + '\u00e9t\u00e9'.encode())]

def image(w, h, color=0, depth=8, extra=b'', ihdr_only=False):
    raw = b''.join(b'\0' + bytes((x * 7 + y * 13) % 256 for x in range(w)) for y in range(h))
    return (b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, depth, color, 0, 0, 0))
            + extra + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))

def make(out):
    icc = icc_profile()
    extra = (chunk(b'iCCP', b'gray\0\0' + zlib.compress(icc))
             + chunk(b'pHYs', struct.pack('>IIB', 11811, 11811, 1)) + chunk(b'eXIf', EXIF)
             + chunk(b'iTXt', b'XML:com.adobe.xmp\0\0\0\0\0' + XMP)
             + b''.join(chunk(t.encode(), d) for t, d in TEXTS))
    open(out, 'wb').write(image(13, 9, extra=extra))
    open(out + '.icc', 'wb').write(icc)

def text_of(t, d):
    k, rest = d.split(b'\0', 1)
    if t == 'tEXt':
        return (k, rest)
    if t == 'zTXt':
        return (k, zlib.decompress(rest[1:]))
    flag, rest = rest[0], rest[2:]
    lang, rest = rest.split(b'\0', 1)
    tk, text = rest.split(b'\0', 1)
    return (k, lang, tk, zlib.decompress(text) if flag else text)

def check(path):
    cs = chunks(open(path, 'rb').read())
    print(' '.join(t for t, _ in cs))
    got = dict((t, d) for t, d in cs if t != 'iTXt')
    name, rest = got['iCCP'].split(b'\0', 1)
    if zlib.decompress(rest[1:]) != icc_profile():
        sys.exit('the ICC profile differs')
    if got['eXIf'] != EXIF:
        sys.exit('the EXIF block differs')
    if struct.unpack('>IIB', got['pHYs']) != (11811, 11811, 1):
        sys.exit('pHYs is %r' % (struct.unpack('>IIB', got['pHYs']),))
    texts = [text_of(t, d) for t, d in cs if t in ('tEXt', 'zTXt', 'iTXt')]
    want = [text_of('iTXt', b'XML:com.adobe.xmp\0\0\0\0\0' + XMP)] + [text_of(t, d) for t, d in TEXTS]
    if texts != want:
        sys.exit('texts %r, expected %r' % ([x[:2] for x in texts], [x[:2] for x in want]))

def hostile():
    big = chunk(b'iTXt', b'Comment\0\0\0\0\0' + b'x' * 16000000)
    bomb = zlib.compressobj(9)
    z = bomb.compress(b'x' * 20000000) + bomb.flush()
    exif_past = EXIF[:4] + struct.pack('<I', 4000) + EXIF[8:]
    plain = image(13, 9)
    open('plain.png', 'wb').write(plain)
    open('itxt-16mb.png', 'wb').write(image(13, 9, extra=big))
    open('ztxt-20mb.png', 'wb').write(image(13, 9, extra=chunk(b'zTXt', b'Comment\0\0' + z)))
    open('exif-past.png', 'wb').write(image(13, 9, extra=chunk(b'eXIf', exif_past)))

if sys.argv[1] == 'make':
    make(sys.argv[2])
elif sys.argv[1] == 'check':
    check(sys.argv[2])
else:
    hostile()
PY

# Every kind of metadata PNG holds survives gtranspose (PNG to PNG): the
# ICC profile, EXIF and XMP byte for byte, the resolution, the texts in
# order with their kinds; in our order of chunks. --strip drops them all.
want_chunks="IHDR iCCP pHYs eXIf iTXt tEXt zTXt iTXt IDAT IEND"
why=""
if ! python3 meta.py make meta.png; then
    why="python3 could not write it"
elif ! "$GT" -q meta.png meta-t.png 2>err.txt; then
    why="the tool failed: $(head -c 200 err.txt)"
elif ! python3 meta.py check meta-t.png >chunks.txt 2>err.txt; then
    why="$(head -c 200 err.txt)"
elif [ "$(head -n 1 chunks.txt)" != "$want_chunks" ]; then
    why="chunks: $(head -n 1 chunks.txt)"
fi
result meta-kept "$why"
why=""
if ! "$GT" -q --strip meta.png meta-s.png 2>err.txt; then
    why="the tool failed: $(head -c 200 err.txt)"
else
    got=$(python3 -c 'import sys; exec(open("meta.py").read().split("def s15")[0]); print(" ".join(t for t, _ in chunks(open(sys.argv[1], "rb").read())))' meta-s.png)
    [ "$got" = "IHDR IDAT IEND" ] || why="--strip wrote $got"
fi
result meta-strip "$why"

# exiftool reads what we wrote: the profile, the orientation, the
# resolution, the XMP, the text chunks.
if command -v exiftool >/dev/null && [ -s meta-t.png ]; then
    why=""
    exiftool -q -b -ICC_Profile meta-t.png >got.icc 2>err.txt
    if ! cmp -s got.icc meta.png.icc; then
        why="ICC profile: $(wc -c <got.icc) bytes, not the $(wc -c <meta.png.icc) written"
    elif [ "$(exiftool -q -s3 -n -Orientation meta-t.png)" != 6 ]; then
        why="orientation $(exiftool -q -s3 -n -Orientation meta-t.png)"
    elif [ "$(exiftool -q -s3 -n -PixelsPerUnitX meta-t.png)" != 11811 ]; then
        why="pixels per unit $(exiftool -q -s3 -n -PixelsPerUnitX meta-t.png)"
    elif [ "$(exiftool -q -s3 -XMP:Creator meta-t.png)" != "gimg tester" ]; then
        why="XMP creator '$(exiftool -q -s3 -XMP:Creator meta-t.png)'"
    elif ! exiftool -q -s -PNG:all meta-t.png >png.txt ||
        ! grep -q '^Title *: A title$' png.txt || ! grep -q '^Comment *: A comment, squeezed' png.txt ||
        ! grep -q '^Description-fr *: été$' png.txt; then
        why="PNG texts: $(tr '\n' ';' <png.txt | head -c 300)"
    fi
    result meta-exiftool "$why"
else
    skip meta-exiftool "exiftool is not installed, or the tool wrote no PNG"
fi
# ImageMagick reads the resolution (in pixels per centimetre, as PNG's
# pHYs is converted by it).
if [ -x /usr/bin/identify ] && [ -s meta-t.png ]; then
    res=$(/usr/bin/identify -format '%x %y %U' meta-t.png 2>/dev/null)
    why="identify says '$res'"
    echo "$res" | awk '{ exit !($1 > 118.105 && $1 < 118.115 && $2 > 118.105 && $2 < 118.115 &&
        $3 == "PixelsPerCentimeter") }' && why=""
    result meta-identify-resolution "$why"
else
    skip meta-identify-resolution "/usr/bin/identify is not installed, or the tool wrote no PNG"
fi

# ------------------------------------------------------ significant bits

# sbit.py IN.pnm OUT.png B: the PNG gtranspose wrote from IN (maxval
# 2^B - 1) is stored at 8 bits (B <= 8) or 16, holds sBIT B for every
# channel, and its samples are IN's transposed, scaled up by left bit
# replication (v << 4 | v >> 8 for 12 bits in 16).
cat >sbit.py <<'PY'
import struct, sys, zlib
src, png, b = sys.argv[1], open(sys.argv[2], 'rb').read(), int(sys.argv[3])
data = open(src, 'rb').read()
magic, w, h, maxval, rest = data.split(maxsplit=4)
n = 3 if magic == b'P6' else 1
w, h, maxval = int(w), int(h), int(maxval)
src_big = maxval > 255
vals = (struct.unpack('>%dH' % (w * h * n), rest[:2 * w * h * n]) if src_big else rest[:w * h * n])
p, cs, idat = 8, {}, b''
while p + 12 <= len(png):
    k = struct.unpack('>I', png[p:p + 4])[0]
    t, d = png[p + 4:p + 8], png[p + 8:p + 8 + k]
    cs[t] = d
    if t == b'IDAT':
        idat += d
    p += 12 + k
ow, oh, depth = struct.unpack('>IIB', cs[b'IHDR'][:9])
want_depth = 8 if maxval <= 255 else 16
if (ow, oh, depth) != (h, w, want_depth):
    sys.exit('IHDR says %dx%d at %d bits' % (ow, oh, depth))
if cs.get(b'sBIT') != bytes([b]) * n:
    sys.exit('sBIT is %r' % cs.get(b'sBIT'))
raw, sb = zlib.decompress(idat), depth // 8
bpp, row = n * sb, ow * n * sb
prev, out = bytearray(row), []
for y in range(oh):
    f, cur = raw[y * (row + 1)], bytearray(raw[y * (row + 1) + 1:(y + 1) * (row + 1)])
    for i in range(row):
        a = cur[i - bpp] if i >= bpp else 0
        c = prev[i - bpp] if i >= bpp else 0
        pa, pb, pc = abs(prev[i] - c), abs(a - c), abs(a + prev[i] - 2 * c)
        pred = [0, a, prev[i], (a + prev[i]) // 2,
                a if pa <= pb and pa <= pc else prev[i] if pb <= pc else c][f]
        cur[i] = (cur[i] + pred) & 255
    out.append(cur)
    prev = cur
def scaled(v):
    r = 0
    for i in range(depth):
        r = r << 1 | (v >> (b - 1 - i % b)) & 1
    return r
for y in range(oh):
    for x in range(ow):
        for c in range(n):
            i = (x * w + y) * n + c
            at = (x * n + c) * sb
            got = out[y][at] << 8 | out[y][at + 1] if sb == 2 else out[y][at]
            if got != scaled(vals[i]):
                sys.exit('sample (%d, %d, %d) stored as %d, expected %d' % (x, y, c, got, scaled(vals[i])))
PY
# pnm.py OUT W H CHANNELS MAXVAL: a PGM/PPM of seeded samples over the
# whole of 0..MAXVAL, the first two 0 and MAXVAL.
cat >pnm.py <<'PY'
import random, struct, sys
out, w, h, n, maxval = sys.argv[1], *map(int, sys.argv[2:6])
rnd = random.Random(w * h + maxval)
vals = [0, maxval] + [rnd.randrange(maxval + 1) for i in range(w * h * n - 2)]
body = b''.join(struct.pack('>H', v) for v in vals) if maxval > 255 else bytes(vals)
open(out, 'wb').write(b'P%d\n%d %d\n%d\n' % (6 if n == 3 else 5, w, h, maxval) + body)
PY
# 12-, 10- and 5-bit images: PNM to PNG, the PNG's sBIT and samples
# checked above; back to PNM, straight and through three PNGs, the file
# comes back byte for byte (samples and maxval); ImageMagick, which
# ignores sBIT, reads the PNG's samples as stored.
for spec in "12 1 4095" "10 3 1023" "5 1 31"; do
    set -- $spec
    b=$1 n=$2 maxval=$3
    name=sbit$b
    why=""
    ext=$([ "$n" = 3 ] && echo ppm || echo pgm)
    if ! python3 pnm.py "$name.$ext" 19 11 "$n" "$maxval"; then
        why="python3 could not write it"
    elif ! "$GT" -q "$name.$ext" "$name.png" 2>err.txt ||
        ! "$GT" -q "$name.png" "$name-back.$ext" 2>>err.txt ||
        ! "$GT" -q "$name.png" "$name-2.png" 2>>err.txt ||
        ! "$GT" -q "$name-2.png" "$name-3.png" 2>>err.txt ||
        ! "$GT" -q "$name-3.png" "$name-back3.$ext" 2>>err.txt; then
        why="the tool failed: $(head -c 200 err.txt)"
    elif ! python3 sbit.py "$name.$ext" "$name.png" "$b" 2>err.txt; then
        why="$(head -c 200 err.txt)"
    elif ! cmp -s "$name.$ext" "$name-back.$ext"; then
        why="PNM to PNG to PNM: $(head -c 20 "$name-back.$ext" | tr -d '\0' | tr '\n' ' ') differs from the original"
    elif ! cmp -s "$name.$ext" "$name-back3.$ext"; then
        why="through three PNGs: $(head -c 20 "$name-back3.$ext" | tr -d '\0' | tr '\n' ' ') differs from the original"
    fi
    result "sbit-$b-bit" "$why"
    if [ -x /usr/bin/convert ] && [ -s "$name.png" ]; then
        why=""
        depth=$([ "$maxval" -gt 255 ] && echo 16 || echo 8)
        if ! /usr/bin/convert "$name.png" -depth "$depth" "im-$name.pam" 2>err.txt; then
            why="ImageMagick failed: $(head -c 200 err.txt)"
        elif ! python3 - "im-$name.pam" "$name.$ext" "$b" "$depth" <<'PY' 2>err.txt; then
import struct, sys
pam, src, b, depth = open(sys.argv[1], 'rb').read(), open(sys.argv[2], 'rb').read(), int(sys.argv[3]), int(sys.argv[4])
head, body = pam.split(b'ENDHDR\n', 1)
f = dict(l.split(b' ', 1) for l in head.split(b'\n')[1:] if b' ' in l)
w, h, n = int(f[b'WIDTH']), int(f[b'HEIGHT']), int(f[b'DEPTH'])
magic, sw, sh, maxval, rest = src.split(maxsplit=4)
sn = 3 if magic == b'P6' else 1
sw, sh, maxval = int(sw), int(sh), int(maxval)
sv = struct.unpack('>%dH' % (sw * sh * sn), rest[:2 * sw * sh * sn]) if maxval > 255 else rest
iv = struct.unpack('>%dH' % (w * h * n), body[:2 * w * h * n]) if depth == 16 else body
def scaled(v):
    r = 0
    for i in range(depth):
        r = r << 1 | (v >> (b - 1 - i % b)) & 1
    return r
for y in range(h):
    for x in range(w):
        for c in range(sn):
            got, want = iv[(y * w + x) * n + c], scaled(sv[(x * sw + y) * sn + c])
            if got != want:
                sys.exit('ImageMagick reads (%d, %d, %d) as %d, expected %d' % (x, y, c, got, want))
PY
            why="$(head -c 200 err.txt)"
        fi
        result "sbit-$b-bit-imagemagick" "$why"
    else
        skip "sbit-$b-bit-imagemagick" "/usr/bin/convert is not installed or no PNG"
    fi
done

# ------------------------------------------------------------ hostile files

python3 png.py pal1-badindex.png 13 9 3 1 0 badindex &&
    python3 png.py pal2-badindex.png 13 9 3 2 1 badindex &&
    python3 png.py pal4-badindex.png 13 9 3 4 0 trns badindex &&
    python3 png.py pal8-badindex.png 13 9 3 8 1 badindex &&
    python3 png.py base.png 8 6 0 8 0 ||
    fail setup "python3 could not write the palette files"
python3 - <<'PY' || fail setup "python3 could not write the hostile files"
import struct, zlib

def chunk(t, d, bad=False):
    return struct.pack('>I', len(d)) + t + d + struct.pack('>I', (zlib.crc32(t + d) ^ bad) & 0xffffffff)

def ihdr(w, h, depth=8, color=0):
    return chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, depth, color, 0, 0, 0))

sig = b'\x89PNG\r\n\x1a\n'
end = chunk(b'IEND', b'')
good = zlib.compress((b'\0' + bytes(range(8))) * 6)
def write(name, data):
    open(name, 'wb').write(data)

write('empty-idat.png', sig + ihdr(8, 6) + chunk(b'IDAT', b'') + end)
write('no-idat.png', sig + ihdr(8, 6) + end)
write('short-idat.png', sig + ihdr(8, 6) + chunk(b'IDAT', zlib.compress(b'\0' + bytes(8))) + end)
write('crc-idat.png', sig + ihdr(8, 6) + chunk(b'IDAT', good, bad=True) + end)
write('crc-ihdr.png', sig + chunk(b'IHDR', struct.pack('>IIBBBBB', 8, 6, 8, 0, 0, 0, 0), bad=True)
      + chunk(b'IDAT', good) + end)
bomb = zlib.compressobj(9)
z = bomb.compress(bytes(128 << 20)) + bomb.flush()
write('ztxt-bomb.png', sig + ihdr(8, 6) + chunk(b'zTXt', b'Comment\0\0' + z) + chunk(b'IDAT', good) + end)
write('huge.png', sig + ihdr(100000, 100000) + chunk(b'IDAT', good) + end)
write('claims-128mib.png', sig + ihdr(4096, 4096, 16, 6) + chunk(b'IDAT', good) + end)
write('wide.png', sig + ihdr(1 << 25, 1) + chunk(b'IDAT', good) + end)
write('zero-width.png', sig + ihdr(0, 6) + chunk(b'IDAT', good) + end)
PY
# A valid file, cut: in its image data, and in IEND's CRC.
head -c $(($(wc -c <base.png) / 2)) base.png >truncated.png
head -c $(($(wc -c <base.png) - 2)) base.png >truncated-iend.png

# Memory is judged above what the tool holds for a valid 8x6 PNG (a
# CUDA build that starts the GPU holds ~110 MB before it reads anything).
# AddressSanitizer keeps freed memory in quarantine: its peaks say nothing.
base_kb=0
asan=0
[ "$(nm "$GT" 2>/dev/null | grep -c __asan_init)" -gt 0 ] && asan=1
if [ -x /usr/bin/time ]; then
    /usr/bin/time -f '%M' -o base.txt "$GT" base.png e/base.pam 2>/dev/null
    base_kb=$(tail -n 1 base.txt)
    rm -f e/base.pam
fi
for f in pal1-badindex pal2-badindex pal4-badindex pal8-badindex empty-idat no-idat short-idat \
    crc-idat crc-ihdr ztxt-bomb huge claims-128mib wide zero-width truncated truncated-iend; do
    why=""
    if [ ! -s "$f.png" ]; then
        fail "hostile-$f" "not written"
        continue
    fi
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -f '%U %S %M' -o cpu.txt timeout 20 "$GT" "$f.png" e/out.pam >stdout.bin \
            2>stderr.txt
        rc=$?
        read -r user sys kb < <(tail -n 1 cpu.txt)
    else
        timeout 20 "$GT" "$f.png" e/out.pam >stdout.bin 2>stderr.txt
        rc=$?
        user=0 sys=0 kb=0
    fi
    case $f in
        pal*) want='corrupt PNG file: palette index [0-9]+ .* past the palette' ;;
        empty-idat | short-idat | claims-128mib)
            want='corrupt PNG file: the image data \(IDAT\) ends before the last row' ;;
        no-idat) want='corrupt PNG file: .*no image data' ;;
        crc-idat) want='corrupt PNG file: CRC mismatch in the IDAT chunk' ;;
        crc-ihdr) want='corrupt PNG file: CRC mismatch in the IHDR chunk' ;;
        ztxt-bomb) want='PNG metadata over the limits' ;;
        # No pixel limit by default: refused for its data in bands, or, in
        # a CUDA build (read whole for a GPU), by the memory budget.
        huge) want='corrupt PNG file: the image data \(IDAT\) ends before the last row|over the memory budget' ;;
        wide) want='limit of [0-9]+ pixels per side' ;;
        zero-width) want='corrupt PNG file: invalid width' ;;
        truncated) want='truncated PNG file \(cut short in the image data\)' ;;
        truncated-iend) want='truncated PNG file \(cut short after the image data' ;;
    esac
    if [ "$rc" -ne 1 ]; then
        why="exit status $rc ($(head -c 200 stderr.txt | tr '\n' ' '))"
    elif ! head -n 1 stderr.txt | grep -qF "gtranspose: $f.png: "; then
        why="message does not name the file: $(head -c 200 stderr.txt)"
    elif ! head -n 1 stderr.txt | grep -Eq "$want"; then
        why="message does not say '$want': $(head -c 200 stderr.txt)"
    elif [ -s stdout.bin ]; then
        why="wrote to stdout"
    elif [ -n "$(ls -A e)" ]; then
        why="left $(ls -A e | tr '\n' ' ')"
    elif [ -z "${GIMG_TEST_SLOW:-}" ] && ! awk -v u="$user" -v s="$sys" 'BEGIN { exit !(u + s < 1.0) }'; then
        why="took $user s user + $sys s system CPU"
    elif [ -z "${GIMG_TEST_SLOW:-}" ] && [ "$asan" = 0 ] && [ $((${kb:-0} - base_kb)) -ge 65536 ]; then
        # A header's size is not memory spent: the 128 MiB of claims-128mib
        # are reserved, not touched, and the zTXt bomb stops at 64 MiB.
        [ "$f" = ztxt-bomb ] && [ $((kb - base_kb)) -lt $((96 * 1024)) ] ||
            why="peak memory $kb KiB ($base_kb KiB for a valid 8x6 PNG)"
    fi
    rm -f e/* e/.[!.]* 2>/dev/null
    result "hostile-$f" "$why"
done

# ------------------------------------------------------ hostile metadata

# A 16 MB iTXt, a zTXt that inflates to 20 MB, an EXIF block whose IFD0
# points past it: the image is processed (exit 0, the pixels those of the
# file without the chunk), the metadata dropped with a warning naming it,
# in bounded memory: under a 1 GiB address-space limit (not under
# valgrind, whose own needs are larger), and within 64 MiB (the zTXt:
# 96 MiB, what libspng may hold while it inflates) of a plain file's peak.
if python3 meta.py hostile && "$GT" -q plain.png plain.pam; then
    cuda=0
    ldd "$GT" 2>/dev/null | grep -q -E 'libcuda|libcudart' && cuda=1
    plain_kb=0
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -f '%M' -o base.txt "$GT" -q plain.png e/plain.pam 2>/dev/null
        plain_kb=$(tail -n 1 base.txt)
        rm -f e/*
    fi
    for spec in "itxt-16mb text chunk \"Comment\" dropped" \
        "ztxt-20mb text chunk \"Comment\" dropped" \
        "exif-past EXIF dropped: its IFD0 points past the block"; do
        f=${spec%% *} want=${spec#* }
        why=""
        limit=unlimited
        # ASan reserves terabytes of address space for its shadow: no limit.
        [ -z "${GIMG_TEST_SLOW:-}" ] && [ "$cuda" = 0 ] && [ "$asan" = 0 ] && limit=1048576
        if [ -x /usr/bin/time ]; then
            (ulimit -v "$limit" && /usr/bin/time -f '%M' -o mem.txt "$GT" "$f.png" e/out.pam \
                2>stderr.txt)
            rc=$?
            kb=$(tail -n 1 mem.txt)
        else
            (ulimit -v "$limit" && "$GT" "$f.png" e/out.pam 2>stderr.txt)
            rc=$?
            kb=0
        fi
        max_kb=$((plain_kb + 65536))
        [ "$f" = ztxt-20mb ] && max_kb=$((plain_kb + 98304))
        if [ "$rc" -ne 0 ]; then
            why="exit status $rc ($(head -c 200 stderr.txt | tr '\n' ' '))"
        elif ! grep -qF "gtranspose: $f.png: warning: " stderr.txt ||
            ! grep -qF "$want" stderr.txt; then
            why="no warning saying '$want': $(head -c 200 stderr.txt)"
        elif ! why=$(same e/out.pam plain.pam); then
            :
        elif [ -z "${GIMG_TEST_SLOW:-}" ] && [ "$asan" = 0 ] && [ "${kb:-0}" -gt "$max_kb" ]; then
            why="peak memory $kb KiB ($plain_kb KiB for the plain file)"
        fi
        rm -f e/*
        result "hostile-meta-$f" "$why"
    done
else
    fail hostile-meta "python3 could not write the files, or the plain one did not decode"
fi

# The writer's choice of stream (codec_png.c, lz_may_win): on a smooth
# image (blurred noise, 1400x1400 RGB: 5.9 MB, past the samples' floor),
# where LZ gains only a few percent, the default level keeps the
# Huffman-only stream, the same bytes as level 1's; level 9 races
# libdeflate, which wins there: a smaller file. All three decode to the
# image.
why=""
GC=$BIN/gconv
"$GEN" --seed 1 1400 1400 3 8 - | "$GC" -k gaussian:6 --scale 16 --bias -1912 - smooth.ppm ||
    why="gen failed"
for l in 1 6 9; do
    [ -z "$why" ] && { "$GC" -k 1 --png-level $l smooth.ppm "smooth$l.png" || why="level $l: exit $?"; }
    [ -z "$why" ] && { why=$(same smooth.ppm "smooth$l.png") || :; }
done
[ -z "$why" ] && { cmp -s smooth1.png smooth6.png || why="level 6 is not level 1's stream"; }
[ -z "$why" ] && [ "$(wc -c <smooth9.png)" -ge "$(wc -c <smooth6.png)" ] &&
    why="level 9 ($(wc -c <smooth9.png) bytes) is not smaller than 6 ($(wc -c <smooth6.png))"
result writer-stream-by-level "$why"

exit $failed
