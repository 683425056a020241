#!/usr/bin/env bash
# tests/cli_codec_webp.sh — WebP through the tools (gtranspose): files of
# libwebp's own tools (cwebp, img2webp) read as dwebp reads them; ours
# written at --quality and with --lossless, read back by dwebp and by us;
# animation frames picked with FILE[N]; hostile files (truncated chunks, a
# RIFF size past the end, VP8X canvases with no data or over --max-pixels)
# refused with exit 1, a message naming the file and the problem, no
# output, in under a second of CPU (the timing is skipped when
# GIMG_TEST_SLOW=1, as under valgrind). Metadata chunks (set by webpmux)
# kept lossy and lossless, through JPEG and back, and gone with --strip.
# Tests needing a peer tool print SKIP without it. One PASS/FAIL/SKIP line
# per test; BIN and BUILD as in cli_lib.sh.
TOOL=gtranspose
. "$(dirname "$0")/cli_lib.sh"
export LC_ALL=C
mkdir -p e

have() { command -v "$1" >/dev/null 2>&1; }

# flip2 IN OUT: IN read and written as OUT, pixels unchanged (flip twice).
flip2() {
    "$PROG" --op flip "$1" mid.pam && "$PROG" --op flip mid.pam "$2"
}

"$GEN" --seed 7 --pattern gradient 67 45 3 8 grad.ppm || { fail setup "gen"; exit 1; }
"$GEN" --seed 8 67 45 4 8 rgba.pam && "$GEN" --seed 9 67 45 1 8 gray.pgm &&
    "$GEN" --seed 10 33 21 3 16 rgb16.ppm || { fail setup "gen"; exit 1; }

# ------------------------------------------------------------ reading

if have cwebp && have dwebp; then
    # NAME SOURCE CWEBP-OPTIONS: opaque files read as RGB (against dwebp's
    # PPM), files with alpha as RGBA (against dwebp's PAM).
    for kind in "lossy grad.ppm -q 80" "lossless grad.ppm -lossless" \
        "lossy-alpha rgba.pam -q 70" "lossless-alpha rgba.pam -lossless" "lossy-gray gray.pgm -q 90"; do
        set -- $kind
        name=$1 src=$2
        shift 2
        ext=ppm
        case $name in *alpha) ext=pam ;; esac
        why=""
        cwebp -quiet "$@" "$src" -o "c-$name.webp" 2>err.txt || why="cwebp: $(cat err.txt)"
        [ -z "$why" ] && { dwebp -quiet "-$ext" "c-$name.webp" -o "d-$name.$ext" 2>err.txt ||
            why="dwebp: $(cat err.txt)"; }
        [ -z "$why" ] && { flip2 "c-$name.webp" "g-$name.$ext" 2>err.txt || why="exit $?: $(cat err.txt)"; }
        [ -z "$why" ] && { why=$(same "g-$name.$ext" "d-$name.$ext") || true; }
        # The channels: RGBA exactly when the file has alpha.
        [ -z "$why" ] && { "$PROG" -v --op flip "c-$name.webp" e/v.pam 2>err.txt || why="-v failed"; }
        want=RGB
        [ "$ext" = pam ] && want=RGBA
        [ -z "$why" ] && { grep -q "webp 67x45 $want," err.txt || why="-v says: $(head -n 1 err.txt)"; }
        rm -f e/*
        result "read-cwebp-$name-equals-dwebp" "$why"
    done
else
    skip read-cwebp "cwebp or dwebp is not installed"
fi

# ------------------------------------------------------------ writing

why=""
"$PROG" --op flip grad.ppm out.webp 2>err.txt || why="exit $?: $(cat err.txt)"
[ -z "$why" ] && [ "$(head -c 4 out.webp)$(tail -c +9 out.webp | head -c 4)" != RIFFWEBP ] &&
    why="not a RIFF WEBP file: $(magic out.webp 16)"
result write-webp-by-extension "$why"

why=""
"$PROG" -f webp grad.ppm - >stdout.webp 2>err.txt || why="exit $?: $(cat err.txt)"
[ -z "$why" ] && [ "$(head -c 4 stdout.webp)" != RIFF ] && why="stdout is not WebP"
result write-webp-format-option "$why"

if have dwebp; then
    why=""
    dwebp -quiet out.webp -ppm -o dw.ppm 2>err.txt || why="dwebp cannot read our file: $(cat err.txt)"
    [ -z "$why" ] && { flip2 out.webp ours.ppm || why="we cannot read our file"; }
    [ -z "$why" ] && { why=$(same ours.ppm dw.ppm) || true; }
    result write-lossy-read-as-dwebp "$why"
else
    skip write-lossy-read-as-dwebp "dwebp is not installed"
fi

# --lossless: bit for bit, RGB, RGBA; gray comes back as RGB.
for src in grad.ppm rgba.pam; do
    why=""
    "$PROG" --lossless --op flip "$src" ll.webp 2>err.txt || why="exit $?: $(cat err.txt)"
    [ -z "$why" ] && { "$PROG" --op flip ll.webp back.pam || why="cannot read it back"; }
    [ -z "$why" ] && { why=$(same back.pam "$src") || true; }
    result "write-lossless-round-trip-${src%%.*}" "$why"
done
why=""
"$PROG" --lossless --op flip gray.pgm ll.webp && "$PROG" --op flip ll.webp back.pam || why="failed"
[ -z "$why" ] && { grep -q 'DEPTH 3' back.pam || why="gray did not read back as RGB"; }
# Gray widened: an RGB PPM whose three samples are the gray value.
[ -z "$why" ] && { python3 - gray.pgm back.pam <<'EOF' || why="channels differ from the gray source"
import sys
g = open(sys.argv[1], 'rb').read()
p = open(sys.argv[2], 'rb').read()
gray = g[g.index(b'255\n') + 4:]
rgb = p[p.index(b'ENDHDR\n') + 7:]
sys.exit(0 if rgb == bytes(v for v in gray for _ in range(3)) else 1)
EOF
}
result write-lossless-gray-as-rgb "$why"

# --quality: lower is smaller.
why=""
"$PROG" --quality 95 --op flip grad.ppm q95.webp && "$PROG" --quality 30 --op flip grad.ppm q30.webp ||
    why="failed"
[ -z "$why" ] && [ "$(wc -c <q30.webp)" -ge "$(wc -c <q95.webp)" ] &&
    why="quality 30 ($(wc -c <q30.webp) B) not smaller than 95 ($(wc -c <q95.webp) B)"
result write-quality "$why"

# 16-bit narrowed to 8-bit: written, with the one warning line; -q silences it.
why=""
"$PROG" --op flip rgb16.ppm n.webp 2>err.txt || why="exit $?"
[ -z "$why" ] && { grep -qi '16-bit' err.txt || why="no warning about 16-bit: $(cat err.txt)"; }
"$PROG" -q --op flip rgb16.ppm n.webp 2>err.txt && [ ! -s err.txt ] || why="${why:+$why, }-q did not silence: $(cat err.txt)"
result write-16bit-narrowed-warns "$why"

# ------------------------------------------------------------ animations

if have img2webp; then
    "$GEN" --seed 21 --pattern gradient 40 30 3 8 f0.ppm
    "$PROG" --op rot180 f0.ppm f1.ppm
    if img2webp -lossless f0.ppm f1.ppm -o anim.webp >/dev/null 2>&1; then
        why=""
        flip2 'anim.webp[0]' p0.pam 2>err.txt || why="frame 0: $(cat err.txt)"
        [ -z "$why" ] && flip2 'anim.webp[1]' p1.pam 2>err.txt || why="${why:-frame 1: $(cat err.txt)}"
        # An animation reads as RGBA: compare with the frames given alpha.
        [ -z "$why" ] && { grep -q 'DEPTH 4' p0.pam || why="an animation did not read as RGBA"; }
        for k in 0 1; do
            [ -n "$why" ] && break
            python3 - "f$k.ppm" "p$k.pam" <<'EOF' || why="frame $k differs from its source"
import sys
s = open(sys.argv[1], 'rb').read()
p = open(sys.argv[2], 'rb').read()
rgb = s[s.index(b'255\n') + 4:]
rgba = p[p.index(b'ENDHDR\n') + 7:]
want = bytearray()
for i in range(0, len(rgb), 3):
    want += rgb[i:i + 3] + b'\xff'
sys.exit(0 if bytes(want) == rgba else 1)
EOF
        done
        result read-animation-frames "$why"
        expect_fail read-animation-no-frame-2 1 e -- "$PROG" 'anim.webp[2]' e/out.png
        grep -q 'no frame 2' stderr.txt || fail read-animation-no-frame-2-message "$(cat stderr.txt)"
    else
        skip read-animation "img2webp failed"
    fi
else
    skip read-animation "img2webp is not installed"
fi

# ------------------------------------------------------------ hostile

"$PROG" --op flip grad.ppm good.webp
len=$(wc -c <good.webp)
head -c $((len / 2)) good.webp >half.webp
refused hostile-truncated-half half.webp "truncated WebP data"
head -c 20 good.webp >head20.webp
refused hostile-truncated-chunk-header head20.webp "WebP data"
# The RIFF size 1000 bytes past the end of the file.
python3 - good.webp riff.webp <<'EOF'
import struct, sys
d = bytearray(open(sys.argv[1], 'rb').read())
d[4:8] = struct.pack('<I', struct.unpack('<I', d[4:8])[0] + 1000)
open(sys.argv[2], 'wb').write(d)
EOF
refused hostile-riff-size-past-end riff.webp "truncated WebP data"

# VP8X (extended header) canvases and nothing else.
vp8x() {
    python3 - "$1" "$2" "$3" <<'EOF'
import struct, sys
w, h = int(sys.argv[1]), int(sys.argv[2])
vp8x = b'VP8X' + struct.pack('<I', 10) + b'\0\0\0\0' + struct.pack('<I', w - 1)[:3] + struct.pack('<I', h - 1)[:3]
open(sys.argv[3], 'wb').write(b'RIFF' + struct.pack('<I', 4 + len(vp8x)) + b'WEBP' + vp8x)
EOF
}
vp8x 16383 16383 c16383.webp
refused hostile-vp8x-16383-no-data c16383.webp "truncated WebP data"
vp8x 20000 20000 c20000.webp
refused hostile-vp8x-over-limit c20000.webp "limit" --max-pixels 268435456
# With no pixel limit (the default), refused for the data it does not hold.
refused hostile-vp8x-20000-no-pixel-limit c20000.webp "truncated WebP data"
vp8x 2000 2000 c2000.webp
refused hostile-vp8x-over-max-pixels c2000.webp "max-pixels" --max-pixels 1000000
# A real file over a lowered limit.
refused hostile-max-pixels good.webp "max-pixels" --max-pixels 3000

# Broken VP8 start code (bytes 23-25 of a simple lossy file: 9d 01 2a).
cp good.webp badcode.webp
printf '\234' | dd of=badcode.webp bs=1 seek=23 conv=notrunc status=none
refused hostile-vp8-start-code badcode.webp "corrupt WebP data"

# ------------------------------------------------------------ metadata

# A profile (Pillow's sRGB when /usr/bin/python3 has it, else written
# here), an EXIF block with Orientation 6, an XMP packet.
/usr/bin/python3 -c 'from PIL import ImageCms; import sys
open(sys.argv[1], "wb").write(ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes())' \
    prof.icc 2>/dev/null ||
    python3 - prof.icc <<'EOF2'
import random, struct, sys
random.seed(5)
head = struct.pack('>I', 3132) + b'gimg' + bytes([2, 0x10, 0, 0]) + b'mntrRGB XYZ ' + bytes(12) + b'acsp'
open(sys.argv[1], 'wb').write(head + bytes(132 - len(head)) + bytes(random.randrange(256) for _ in range(3000)))
EOF2
python3 - exif.bin xmp.bin <<'EOF2'
import struct, sys
ifd = struct.pack('<H', 1) + struct.pack('<HHIHH', 0x0112, 3, 1, 6, 0) + struct.pack('<I', 0)
open(sys.argv[1], 'wb').write(b'II*\0' + struct.pack('<I', 8) + ifd + bytes(21))
open(sys.argv[2], 'wb').write(b"<?xpacket begin='' id='W5M0MpCehiHzreSzNTczkc9d'?>"
    b"<x:xmpmeta xmlns:x='adobe:ns:meta/'/>" + b' ' * 200 + b"<?xpacket end='w'?>")
EOF2

# webp_meta_same WEBP: WEBP's ICCP, EXIF and XMP chunks (webpmux -get)
# are prof.icc, exif.bin, xmp.bin.
webp_meta_same() {
    local k want
    for k in icc exif xmp; do
        case $k in icc) want=prof.icc ;; exif) want=exif.bin ;; xmp) want=xmp.bin ;; esac
        webpmux -get "$k" "$1" -o got.bin >/dev/null 2>&1 || { echo "$1 has no $k chunk"; return 1; }
        cmp -s got.bin "$want" || { echo "$k chunk differs"; return 1; }
    done
}

if have webpmux && have cwebp; then
    cwebp -quiet grad.ppm -o plain.webp &&
        webpmux -set icc prof.icc plain.webp -o m1.webp >/dev/null 2>&1 &&
        webpmux -set exif exif.bin m1.webp -o m2.webp >/dev/null 2>&1 &&
        webpmux -set xmp xmp.bin m2.webp -o meta.webp >/dev/null 2>&1 || fail meta-setup "webpmux -set failed"
    # Ours through a flip, lossy and lossless: the same chunks.
    for opt in "" --lossless; do
        why=""
        "$PROG" $opt --op flip meta.webp out.webp 2>err.txt || why="exit $?: $(cat err.txt)"
        [ -z "$why" ] && { why=$(webp_meta_same out.webp) || true; }
        if [ -z "$why" ] && have exiftool; then
            [ "$(exiftool -s3 -n -Orientation out.webp)" = 6 ] || why="exiftool reads no orientation 6"
        fi
        result "meta-webp-kept${opt:+-lossless}" "$why"
    done
    # WebP to JPEG and back: the profile, EXIF and XMP cross over.
    why=""
    "$PROG" --op flip meta.webp out.jpg 2>err.txt && "$PROG" --op flip out.jpg back.webp 2>>err.txt ||
        why="exit $?: $(cat err.txt)"
    [ -z "$why" ] && { why=$(webp_meta_same back.webp) || true; }
    if [ -z "$why" ] && have exiftool; then
        exiftool -b -ICC_Profile out.jpg | cmp -s - prof.icc || why="the JPEG's profile differs"
    fi
    result meta-webp-jpeg-webp "$why"
    # --strip: a file without the chunks.
    why=""
    "$PROG" --strip --op flip meta.webp out.webp 2>err.txt || why="exit $?: $(cat err.txt)"
    [ -z "$why" ] && webpmux -info out.webp | grep -qiE 'ICC|EXIF|XMP' && why="metadata left: $(webpmux -info out.webp | tr '\n' ' ')"
    result meta-webp-strip "$why"
else
    skip meta-webp "webpmux or cwebp is not installed"
fi

exit $failed
