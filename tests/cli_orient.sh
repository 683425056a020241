#!/usr/bin/env bash
# tests/cli_orient.sh — the EXIF orientation through gtranspose: --op auto
# for all 8 orientations, in PNG (eXIf) and JPEG (APP1 Exif) inputs made
# here, against the op the orientation names (our own --op X on the same
# pixels without the tag), `vips autorot` and `convert -auto-orient`; the
# orientation reads 1 after, in PNG and JPEG outputs; an image without the
# tag passes unchanged; every other op keeps the tag and swaps the EXIF
# pixel dimensions with the size; the examples of gtranspose(1): two steps
# through files, a folder with -o DIR/, a PNM pipe (which drops the
# metadata, as documented); --strip; TIFF's own Orientation tag; a 12-bit
# PGM's maxval kept.
#
# The files' EXIF is read back by a parser of this test (python3) and, when
# installed, by exiftool. One PASS/FAIL/SKIP line per test; BIN and BUILD as
# in cli_lib.sh. A check that needs a missing peer says SKIP.
TOOL=gtranspose
. "$(dirname "$0")/cli_lib.sh"
export LC_ALL=C
GT=$PROG
IM=/usr/bin/convert
[ -x "$IM" ] || IM=""
IDENTIFY=/usr/bin/identify
[ -x "$IDENTIFY" ] || IDENTIFY=""
have() { command -v "$1" >/dev/null 2>&1; }

if ! have python3; then
    skip orient "python3 is not installed (it writes the test files)"
    exit 0
fi

# The op that puts each orientation upright, as the EXIF specification
# words it (row 0 / column 0 of the stored image): 2 top/right: a mirror;
# 3 bottom/right: a half turn; 4 bottom/left: upside down; 5 left/top: the
# main diagonal; 6 right/top: a quarter turn clockwise; 7 right/bottom: the
# anti-diagonal; 8 left/bottom: a quarter turn counter-clockwise.
upright_op() {
    case $1 in
        2) echo flop ;; 3) echo rot180 ;; 4) echo flip ;; 5) echo transpose ;;
        6) echo rot90 ;; 7) echo transverse ;; 8) echo rot270 ;; *) echo none ;;
    esac
}

# exif.py: writes and reads the test's files.
#   exif.py png OUT W H ORIENT [MM] [text]  an RGB PNG of seeded pixels with an
#                           eXIf chunk: IFD0's Orientation (SHORT) and an Exif
#                           IFD with PixelXDimension (LONG) = W and
#                           PixelYDimension (SHORT) = H; ORIENT 0: no eXIf.
#                           MM: big-endian; text: a tEXt chunk too
#   exif.py ppm OUT W H     the same pixels as a PPM
#   exif.py jpeg IN OUT ORIENT W H  IN with the same EXIF in an APP1 after SOI
#   exif.py read FILE       prints "ORIENT PX PY" from the file's EXIF (PNG
#                           eXIf or JPEG APP1); "-" for what is missing,
#                           "noexif" when there is no block
#   exif.py text FILE       prints the PNG's tEXt chunks, "keyword=text"
cat >exif.py <<'PY'
import random, struct, sys, zlib

def exif_block(orient, w, h, big):
    e = '>' if big else '<'
    def ent(tag, typ, val):
        v = struct.pack(e + 'H', val) + b'\0\0' if typ == 3 else struct.pack(e + 'I', val)
        return struct.pack(e + 'HHI', tag, typ, 1) + v
    ifd0 = struct.pack(e + 'H', 2) + ent(0x0112, 3, orient) + ent(0x8769, 4, 38) + \
        struct.pack(e + 'I', 0)
    sub = struct.pack(e + 'H', 2) + ent(0xA002, 4, w) + ent(0xA003, 3, h) + struct.pack(e + 'I', 0)
    b = (b'MM\0*' if big else b'II*\0') + struct.pack(e + 'I', 8) + ifd0
    assert len(b) == 38
    return b + sub

def pixels(w, h):
    rnd = random.Random(w * 7919 + h)
    return bytes(rnd.randrange(256) for _ in range(w * h * 3))

def chunk(t, d):
    return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)

def chunks(data):
    at = 8
    while at + 8 <= len(data):
        n, t = struct.unpack('>I4s', data[at:at + 8])
        yield t, data[at + 8:at + 8 + n]
        at += 12 + n

def find_exif(data):
    if data[:8] == b'\x89PNG\r\n\x1a\n':
        for t, d in chunks(data):
            if t == b'eXIf':
                return d
        return None
    if data[:2] == b'\xff\xd8':
        at = 2
        while at + 4 <= len(data) and data[at] == 0xff and data[at + 1] not in (0xda, 0xd9):
            n = struct.unpack('>H', data[at + 2:at + 4])[0]
            seg = data[at + 4:at + 2 + n]
            if data[at + 1] == 0xe1 and seg[:6] == b'Exif\0\0':
                return seg[6:]
            at += 2 + n
        return None
    raise SystemExit('not a PNG or JPEG')

def read_exif(b):
    e = '>' if b[:2] == b'MM' else '<'
    def ifd(at):
        n = struct.unpack(e + 'H', b[at:at + 2])[0]
        out = {}
        for i in range(n):
            tag, typ, cnt = struct.unpack(e + 'HHI', b[at + 2 + 12 * i:at + 10 + 12 * i])
            v = b[at + 10 + 12 * i:at + 14 + 12 * i]
            out[tag] = struct.unpack(e + 'H', v[:2])[0] if typ == 3 else struct.unpack(e + 'I', v)[0]
        return out
    i0 = ifd(struct.unpack(e + 'I', b[4:8])[0])
    sub = ifd(i0[0x8769]) if 0x8769 in i0 else {}
    return [str(d.get(t, '-')) for d, t in ((i0, 0x0112), (sub, 0xA002), (sub, 0xA003))]

cmd = sys.argv[1]
if cmd == 'png':
    out, w, h, o = sys.argv[2], *map(int, sys.argv[3:6])
    px = pixels(w, h)
    s = b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0))
    if o:
        s += chunk(b'eXIf', exif_block(o, w, h, 'MM' in sys.argv[6:]))
    if 'text' in sys.argv[6:]:
        s += chunk(b'tEXt', b'Comment\0kept by gtranspose')
    raw = b''.join(b'\0' + px[y * w * 3:(y + 1) * w * 3] for y in range(h))
    s += chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b'')
    open(out, 'wb').write(s)
elif cmd == 'ppm':
    out, w, h = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    open(out, 'wb').write(b'P6\n%d %d\n255\n' % (w, h) + pixels(w, h))
elif cmd == 'jpeg':
    src, out, o, w, h = sys.argv[2], sys.argv[3], *map(int, sys.argv[4:7])
    data = open(src, 'rb').read()
    assert data[:2] == b'\xff\xd8'
    e = b'Exif\0\0' + exif_block(o, w, h, False)
    open(out, 'wb').write(data[:2] + b'\xff\xe1' + struct.pack('>H', len(e) + 2) + e + data[2:])
elif cmd == 'read':
    b = find_exif(open(sys.argv[2], 'rb').read())
    print('noexif' if b is None else ' '.join(read_exif(b)))
elif cmd == 'text':
    for t, d in chunks(open(sys.argv[2], 'rb').read()):
        if t == b'tEXt':
            k, v = d.split(b'\0', 1)
            print(k.decode('latin-1') + '=' + v.decode('latin-1'))
PY

# exif_of FILE: the file's "ORIENT PX PY" (exif.py read).
exif_of() { python3 exif.py read "$1" 2>/dev/null || echo "unreadable"; }
# exiftool's view: "ORIENT PX PY", "-" where it finds nothing.
exiftool_of() {
    exiftool -s3 -n -f -Orientation -ExifImageWidth -ExifImageHeight "$1" 2>/dev/null |
        tr '\n' ' ' | sed 's/ $//'
}

W=7 H=5
python3 exif.py ppm base.ppm $W $H || { fail setup "exif.py ppm"; exit 1; }
for o in 0 1 2 3 4 5 6 7 8; do
    python3 exif.py png in$o.png $W $H $o || { fail setup "exif.py png $o"; exit 1; }
done
python3 exif.py png in6-mm.png $W $H 6 MM || { fail setup "exif.py png MM"; exit 1; }
python3 exif.py png in6-text.png $W $H 6 text || { fail setup "exif.py png text"; exit 1; }
# The test's own files read back as written (by exiftool too, when there).
result setup-exif-readable "$([ "$(exif_of in6.png)" = "6 $W $H" ] || echo "got $(exif_of in6.png)")"
if have exiftool; then
    result setup-exiftool-reads-png "$([ "$(exiftool_of in6.png)" = "6 $W $H" ] ||
        echo "exiftool reads $(exiftool_of in6.png)")"
fi

# want_of O BASE OUT: our own gtranspose's --op for orientation O on the
# untagged BASE, into OUT (BASE's pixels for 1).
want_of() {
    local o=$1 base=$2 out=$3 op
    op=$(upright_op "$o")
    if [ "$op" = none ]; then
        "$GT" --op flip "$base" wtmp.pam && "$GT" --op flip wtmp.pam "$out"
    else
        "$GT" --op "$op" "$base" "$out"
    fi
}

# check_after NAME FILE WANT: the file's EXIF (exif.py, and exiftool when
# installed) reads WANT ("ORIENT PX PY").
check_after() {
    local name=$1 file=$2 want=$3 got why=""
    got=$(exif_of "$file")
    [ "$got" = "$want" ] || why="EXIF reads '$got', expected '$want'"
    if [ -z "$why" ] && have exiftool; then
        got=$(exiftool_of "$file")
        [ "$got" = "$want" ] || why="exiftool reads '$got', expected '$want'"
    fi
    result "$name" "$why"
}

# --------------------------------------------------- PNG, all orientations

VIPS_PNG_EXIF=""
if have vips && have vipsheader && [ "$(vipsheader -f orientation in6.png 2>/dev/null)" = 6 ]; then
    VIPS_PNG_EXIF=1
fi
IM_PNG_EXIF=""
if [ -n "$IDENTIFY" ] && [ -n "$IM" ] &&
    [ "$($IDENTIFY -format '%[orientation]' in6.png 2>/dev/null)" = RightTop ]; then
    IM_PNG_EXIF=1
fi

for o in 1 2 3 4 5 6 7 8; do
    name=png-auto-$o
    why=""
    "$GT" --op auto in$o.png out$o.png 2>err.txt || why="exit status $?: $(head -c 200 err.txt)"
    [ -z "$why" ] && { want_of $o in0.png want-$o.png 2>err.txt || why="--op $(upright_op $o): $(head -c 200 err.txt)"; }
    [ -z "$why" ] && { why=$(same out$o.png want-$o.png) || why="not --op $(upright_op $o): $why"; }
    result "$name" "$why"
    case $o in [5-8]) dims="$H $W" ;; *) dims="$W $H" ;; esac
    check_after "$name-orientation-1" out$o.png "1 $dims"
    if [ -n "$VIPS_PNG_EXIF" ]; then
        why=""
        vips autorot in$o.png vips$o.png 2>err.txt || why="vips failed: $(head -c 200 err.txt)"
        [ -z "$why" ] && { why=$(same out$o.png vips$o.png) || true; }
        result "$name-vips" "$why"
    fi
    if [ -n "$IM_PNG_EXIF" ]; then
        why=""
        $IM in$o.png -auto-orient PNG24:im$o.png 2>err.txt || why="convert failed: $(head -c 200 err.txt)"
        [ -z "$why" ] && { why=$(same out$o.png im$o.png) || true; }
        result "$name-imagemagick" "$why"
    fi
done
[ -n "$VIPS_PNG_EXIF" ] || skip png-auto-vips "vips is not installed or does not read a PNG's eXIf"
# ImageMagick 6 reads no orientation from a PNG's eXIf: its JPEG checks below.
[ -n "$IM_PNG_EXIF" ] ||
    skip png-auto-imagemagick "convert is not installed or does not read a PNG's eXIf"

# A big-endian block: the same.
why=""
"$GT" --op auto in6-mm.png out6-mm.png 2>err.txt || why="exit status $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { why=$(same out6-mm.png want-6.png) || true; }
result png-auto-big-endian-exif "$why"
check_after png-auto-big-endian-exif-orientation-1 out6-mm.png "1 $H $W"

# ------------------------------------------------------ without the tag

why=""
"$GT" --op auto in0.png out0.png 2>err.txt || why="exit status $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { why=$(same out0.png in0.png) || true; }
result png-auto-no-exif-unchanged "$why"
result png-auto-no-exif-adds-none "$([ "$(exif_of out0.png)" = noexif ] || echo "EXIF appeared: $(exif_of out0.png)")"
why=""
"$GT" --op auto base.ppm out-base.ppm 2>err.txt || why="exit status $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { cmp -s out-base.ppm base.ppm || why="the PPM's bytes changed"; }
result ppm-auto-unchanged "$why"
# Orientation 1 is nothing to do either (checked above for the pixels).
result png-auto-1-unchanged "$(same out1.png in0.png || true)"

# ------------------------------------------- JPEG inputs, all orientations

base_jpg=""
if have cjpeg; then
    cjpeg -quality 95 -sample 1x1 base.ppm >base.jpg 2>/dev/null && base_jpg=base.jpg
fi
if [ -z "$base_jpg" ]; then
    "$GT" --op flip base.ppm flipped.ppm && "$GT" --op flip flipped.ppm base.jpg 2>/dev/null &&
        base_jpg=base.jpg
fi
jpeg_exif() { # jpeg_exif O OUT: base.jpg with orientation O
    python3 exif.py jpeg base.jpg "$2" "$1" $W $H 2>/dev/null && return 0
    have exiftool && cp base.jpg "$2" &&
        exiftool -q -overwrite_original "-Orientation#=$1" "$2" >/dev/null 2>&1
}
if [ -z "$base_jpg" ]; then
    skip jpeg-auto "could not make a JPEG"
else
    # Peers decode the JPEG as we do? (the same libjpeg IDCT gives the same
    # samples); if not, their comparisons are skipped, not failed.
    "$GT" --op flip base.jpg gt-dec.png && "$GT" --op flip gt-dec.png gt-base.png
    IM_JPEG=""
    [ -n "$IM" ] && $IM base.jpg PNG24:im-base.png 2>/dev/null &&
        same gt-base.png im-base.png >/dev/null && IM_JPEG=1
    VIPS_JPEG=""
    have vips && vips copy base.jpg vips-base.png 2>/dev/null &&
        same gt-base.png vips-base.png >/dev/null && VIPS_JPEG=1
    for o in 1 2 3 4 5 6 7 8; do
        name=jpeg-auto-$o
        if ! jpeg_exif $o j$o.jpg; then
            skip "$name" "neither python3 nor exiftool could add the EXIF"
            continue
        fi
        why=""
        "$GT" --op auto j$o.jpg jout$o.png 2>err.txt || why="exit status $?: $(head -c 200 err.txt)"
        [ -z "$why" ] && { want_of $o base.jpg jwant-$o.png 2>err.txt || why="--op $(upright_op $o): $(head -c 200 err.txt)"; }
        [ -z "$why" ] && { why=$(same jout$o.png jwant-$o.png) || why="not --op $(upright_op $o): $why"; }
        result "$name" "$why"
        case $o in [5-8]) dims="$H $W" ;; *) dims="$W $H" ;; esac
        check_after "$name-png-orientation-1" jout$o.png "1 $dims"
        # JPEG output: the EXIF is there, with orientation 1.
        why=""
        "$GT" --op auto j$o.jpg jout$o.jpg 2>err.txt || why="exit status $?: $(head -c 200 err.txt)"
        result "$name-to-jpeg" "$why"
        [ -z "$why" ] && check_after "$name-to-jpeg-orientation-1" jout$o.jpg "1 $dims"
        if [ -n "$VIPS_JPEG" ]; then
            why=""
            vips autorot j$o.jpg vips-j$o.png 2>err.txt || why="vips failed: $(head -c 200 err.txt)"
            [ -z "$why" ] && { why=$(same jout$o.png vips-j$o.png) || true; }
            result "$name-vips" "$why"
        fi
        if [ -n "$IM_JPEG" ]; then
            why=""
            $IM j$o.jpg -auto-orient PNG24:im-j$o.png 2>err.txt || why="convert failed: $(head -c 200 err.txt)"
            [ -z "$why" ] && { why=$(same jout$o.png im-j$o.png) || true; }
            result "$name-imagemagick" "$why"
        fi
    done
    [ -n "$VIPS_JPEG" ] || skip jpeg-auto-vips "vips is not installed or decodes the JPEG differently"
    [ -n "$IM_JPEG" ] ||
        skip jpeg-auto-imagemagick "convert is not installed or decodes the JPEG differently"
fi

# ------------------------------------------------ other ops keep the tag

for op in transpose transverse flip flop rot90 rot180 rot270; do
    name=png-$op-keeps-orientation
    why=""
    "$GT" --op $op in6.png k-$op.png 2>err.txt || why="exit status $?: $(head -c 200 err.txt)"
    "$GT" --op $op in0.png k0-$op.png 2>err.txt || why="untagged: exit status $?: $(head -c 200 err.txt)"
    [ -z "$why" ] && { why=$(same k-$op.png k0-$op.png) || why="the tag changed the op: $why"; }
    result "$name" "$why"
    case $op in transpose | transverse | rot90 | rot270) dims="$H $W" ;; *) dims="$W $H" ;; esac
    check_after "$name-exif" k-$op.png "6 $dims"
done
if [ -n "$base_jpg" ] && [ -f j6.jpg ]; then
    why=""
    "$GT" --op rot90 j6.jpg k-rot90.jpg 2>err.txt || why="exit status $?: $(head -c 200 err.txt)"
    result jpeg-rot90-keeps-orientation "$why"
    [ -z "$why" ] && check_after jpeg-rot90-keeps-orientation-exif k-rot90.jpg "6 $H $W"
fi
# ImageMagick reads our JPEGs' orientations as we wrote them.
if [ -n "$IDENTIFY" ] && [ -f jout6.jpg ] && [ -f k-rot90.jpg ]; then
    got="$($IDENTIFY -format '%[orientation]' jout6.jpg 2>/dev/null) $($IDENTIFY -format '%[orientation]' k-rot90.jpg 2>/dev/null)"
    result imagemagick-reads-orientations "$([ "$got" = "TopLeft RightTop" ] ||
        echo "identify reads '$got' for auto and rot90 of orientation 6")"
fi

# Auto after a rotation undoes the tag on the rotated pixels: rot90 of an
# orientation-6 image, then auto, is rot90 twice (rot180) of the stored one.
why=""
"$GT" --op auto k-rot90.png k-rot90-auto.png 2>err.txt || why="exit status $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { why=$(same k-rot90-auto.png want-3.png) || true; }
result png-rot90-then-auto "$why"

# --------------------------------------------- the examples of the manual

# Two steps through files: auto, then a quarter turn as seen. The text
# chunk goes along.
"$GT" --op rot180 in0.png want-turned.png || fail setup "rot180 of in0.png"
why=""
"$GT" --op auto in6-text.png upright.png 2>err.txt &&
    "$GT" --op rot90 upright.png turned.png 2>>err.txt || why="exit status $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { why=$(same turned.png want-turned.png) || true; }
result example-two-steps "$why"
check_after example-two-steps-orientation-1 turned.png "1 $W $H"
result example-two-steps-text-kept \
    "$(python3 exif.py text turned.png 2>/dev/null | grep -qx 'Comment=kept by gtranspose' ||
        echo "tEXt lost: $(python3 exif.py text turned.png 2>&1 | tail -n 1 | head -c 200)")"

# A folder with -o DIR/: every file upright, each with orientation 1.
mkdir -p up
why=""
"$GT" --op auto -o up/ in[0-8].png 2>err.txt || why="exit status $?: $(head -c 200 err.txt)"
for o in 1 2 3 4 5 6 7 8; do
    [ -z "$why" ] && { why=$(same up/in$o.png want-$o.png) || why="in$o.png: $why"; }
    [ -z "$why" ] && case "$(exif_of up/in$o.png)" in 1\ *) ;; *) why="up/in$o.png's EXIF: $(exif_of up/in$o.png)" ;; esac
done
[ -z "$why" ] && { why=$(same up/in0.png in0.png) || true; }
result example-folder "$why"

# A PNM pipe: the pixels come through; the metadata does not (documented).
why=""
"$GT" --op auto in6.png - 2>err.txt | "$GT" --op rot90 - piped.png 2>>err.txt ||
    why="exit status $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { why=$(same piped.png want-turned.png) || true; }
result example-pipe-pixels "$why"
result example-pipe-drops-metadata "$([ "$(exif_of piped.png)" = noexif ] ||
    echo "the pipe kept EXIF ($(exif_of piped.png)): update gtranspose(1)")"

# --strip: the orientation is still applied; no EXIF is written.
why=""
"$GT" --op auto --strip in6.png stripped.png 2>err.txt || why="exit status $?: $(head -c 200 err.txt)"
[ -z "$why" ] && { why=$(same stripped.png want-6.png) || true; }
[ -z "$why" ] && { [ "$(exif_of stripped.png)" = noexif ] || why="EXIF written: $(exif_of stripped.png)"; }
result strip-still-orients "$why"

# ------------------------------------------------- TIFF's Orientation tag

if have tiffset && have tiffinfo; then
    "$GT" --op flip base.ppm tflip.ppm && "$GT" --op flip -f tif tflip.ppm t8.tif
    if tiffset -s 274 8 t8.tif 2>/dev/null; then
        why=""
        "$GT" --op auto t8.tif tout8.tif 2>err.txt || why="exit status $?: $(head -c 200 err.txt)"
        [ -z "$why" ] && { why=$(same tout8.tif want-8.png) || true; }
        result tiff-auto-8 "$why"
        got=$(tiffinfo tout8.tif 2>/dev/null | grep -i 'orientation' | head -n 1)
        result tiff-auto-8-orientation-1 "$(case $got in '' | *'row 0 top, col 0 lhs'*) ;; *) echo "tiffinfo: $got" ;; esac)"
        if have vips; then
            vips autorot t8.tif vips-t8.png 2>/dev/null &&
                result tiff-auto-8-vips "$(same tout8.tif vips-t8.png || true)"
        fi
        if [ -n "$IM" ]; then
            $IM t8.tif -auto-orient PNG24:im-t8.png 2>/dev/null &&
                result tiff-auto-8-imagemagick "$(same tout8.tif im-t8.png || true)"
        fi
        # rot90 keeps the tag.
        "$GT" --op rot90 t8.tif trot.tif 2>/dev/null
        got=$(tiffinfo trot.tif 2>/dev/null | grep -i 'orientation' | head -n 1)
        result tiff-rot90-keeps-orientation "$(case $got in *'row 0 lhs, col 0 bottom'*) ;; *) echo "tiffinfo: ${got:-no tag}" ;; esac)"
    else
        skip tiff-auto "tiffset could not set the tag"
    fi
else
    skip tiff-auto "tiffset/tiffinfo are not installed"
fi

# ------------------------------------------------------ the sample range

# A 12-bit PGM keeps its maxval through every op, auto included.
printf 'P5\n3 2\n4095\n' >m12.pgm
bytes 1 2 15 255 0 1 0 2 0 3 0 4 >>m12.pgm
why=""
for op in auto rot90 flip; do
    "$GT" --op $op m12.pgm m12-$op.pgm 2>err.txt || { why="$op: exit status $?: $(head -c 200 err.txt)"; break; }
    [ "$(sed -n 3p m12-$op.pgm)" = 4095 ] || { why="$op: maxval $(sed -n 3p m12-$op.pgm)"; break; }
done
result pgm-12-bit-keeps-maxval "$why"

# ---------------------------------------------------------------- errors

mkdir -p e
expect_fail usage-op-auto-case 2 e -- "$GT" --op Auto in6.png e/out.png
grep -q 'auto' stderr.txt || fail usage-op-lists-auto "the message does not list auto: $(cat stderr.txt)"
"$GT" --help | grep -q 'auto' || fail help-lists-auto "--help does not mention auto"

# ------------------------------------------------------------------ GPU

if "$GT" --version | grep -q 'not built in'; then
    skip gpu-auto "built without CUDA"
elif have nvidia-smi && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    why=""
    for o in 0 1 6 7; do
        "$GT" --device gpu --op auto in$o.png gpu$o.png 2>err.txt || { why="$o: $(head -c 200 err.txt)"; break; }
        want=out$o.png
        why=$(same gpu$o.png $want) || { why="orientation $o: $why"; break; }
        [ "$(exif_of gpu$o.png)" = "$(exif_of $want)" ] || { why="orientation $o: EXIF differs"; break; }
        why=""
    done
    result gpu-auto "$why"
else
    skip gpu-auto "no GPU"
fi

exit $failed
