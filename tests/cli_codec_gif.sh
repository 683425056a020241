#!/usr/bin/env bash
# tests/cli_codec_gif.sh — GIF through the tools (gtranspose), read only:
# GIFs written here (python3, LZW coded as literals) read as libvips and
# ImageMagick read them (palette, transparent index, interlaced, an
# animation with offsets and disposal, picked with FILE[N], 1x1, indices
# past the colour map); writing a .gif is a usage error; hostile files
# (truncated, LZW that ends early or is defective, a 65535x65535 screen in
# a tiny file) refused with exit 1, a message naming the file and the
# problem, no output, in under a second of CPU (the timing is skipped when
# GIMG_TEST_SLOW=1, as under valgrind). Tests needing a peer tool print
# SKIP without it. One PASS/FAIL/SKIP line per test; BIN and BUILD as in
# cli_lib.sh.
TOOL=gtranspose
. "$(dirname "$0")/cli_lib.sh"
export LC_ALL=C
mkdir -p e

have() { command -v "$1" >/dev/null 2>&1; }

# The GIF writer: mkgif.py NAME writes NAME.gif, one of the files below.
cat >mkgif.py <<'EOF'
import struct, sys

def lzw(indices, m, codes=None):
    """LZW data coding each index as a literal (m + 1 bits, a clear code
    before the table would need wider codes), or the given raw codes."""
    clear, end, width = 1 << m, (1 << m) + 1, m + 1
    if codes is None:
        codes = [clear]
        for i, v in enumerate(indices):
            if i and i % ((1 << m) - 2) == 0:
                codes.append(clear)
            codes.append(v)
        codes.append(end)
    acc = n = 0
    out = bytearray()
    for c in codes:
        c, w = c if isinstance(c, tuple) else (c, width)
        acc |= c << n
        n += w
        while n >= 8:
            out.append(acc & 255)
            acc >>= 8
            n -= 8
    if n:
        out.append(acc & 255)
    return bytes(out)

def blocks(data):
    out = bytearray()
    for i in range(0, len(data), 255):
        out += bytes([len(data[i:i + 255])]) + data[i:i + 255]
    return bytes(out) + b'\0'

def interlaced(pix, w, h):
    rows = [r for s, step in ((0, 8), (4, 8), (2, 4), (1, 2)) for r in range(s, h, step)]
    return [v for r in rows for v in pix[r * w:(r + 1) * w]]

def gif(w, h, palette, frames, bg=0):
    out = bytearray(b'GIF89a')
    bits = max(1, (len(palette) - 1).bit_length())
    out += struct.pack('<HHBBB', w, h, 0xF0 | (bits - 1), bg, 0)
    for rgb in palette + [(0, 0, 0)] * ((1 << bits) - len(palette)):
        out += bytes(rgb)
    for f in frames:
        t, d = f.get('transparent'), f.get('disposal', 0)
        if t is not None or d:
            out += b'\x21\xf9\x04' + bytes([(d << 2) | (t is not None)]) + b'\x0a\x00' + bytes([t or 0]) + b'\0'
        pix = f['pixels']
        if f.get('interlace'):
            pix = interlaced(pix, f['w'], f['h'])
        out += b'\x2c' + struct.pack('<HHHHB', f['x'], f['y'], f['w'], f['h'], 0x40 if f.get('interlace') else 0)
        m = f.get('code_size', 4)
        out += bytes([m]) + blocks(lzw(pix, m, f.get('codes')))
    return bytes(out + b'\x3b')

def pixels(w, h, seed, below=16):
    x, out = seed, []
    for _ in range(w * h):
        x = (x * 1103515245 + 12345) & 0x7fffffff
        out.append((x >> 16) % below)
    return out

pal = [((37 * i) % 256, (91 * i + 40) % 256, (173 * i + 7) % 256) for i in range(16)]
F = lambda x, y, w, h, seed, **kw: dict(x=x, y=y, w=w, h=h, pixels=pixels(w, h, seed), **kw)
name = sys.argv[1]
files = {
    'palette': lambda: gif(23, 17, pal, [F(0, 0, 23, 17, 1)]),
    'transparent': lambda: gif(23, 17, pal, [F(0, 0, 23, 17, 2, transparent=5)]),
    'interlaced': lambda: gif(19, 21, pal, [F(0, 0, 19, 21, 3, interlace=True)]),
    'one': lambda: gif(1, 1, pal, [F(0, 0, 1, 1, 4)]),
    'anim': lambda: gif(23, 17, pal, [F(0, 0, 23, 17, 5, transparent=3, disposal=1),
                                     F(4, 3, 9, 7, 6, transparent=8, disposal=2),
                                     F(10, 6, 11, 9, 7, disposal=3, interlace=True),
                                     F(2, 9, 8, 6, 8)], bg=2),
    # A 2-entry map, code size 2: indices 2 and 3 are past it.
    'past': lambda: gif(6, 2, pal[:2], [dict(x=0, y=0, w=6, h=2, code_size=2, pixels=[0, 1, 2, 3, 1, 0] * 2)]),
    'huge': lambda: gif(65535, 65535, pal, [F(0, 0, 1, 1, 9)]),
    # End of information after two of 16 pixels.
    'early': lambda: gif(4, 4, pal[:4], [dict(x=0, y=0, w=4, h=4, code_size=2, pixels=[], codes=[4, 1, 2, 5])]),
    # A code (7) past the table right after a clear code.
    'beyond': lambda: gif(4, 1, pal[:4], [dict(x=0, y=0, w=4, h=1, code_size=2, pixels=[], codes=[4, 7, 1, 5])]),
    # Clear, 1, 2, 3 (3 bits; the table then holds 6 and 7 and codes grow
    # to 4 bits), 12 past the table (its next entry is 8), end.
    'lenient': lambda: gif(5, 1, pal[:4], [dict(x=0, y=0, w=5, h=1, code_size=2, pixels=[],
                                                 codes=[4, 1, 2, 3, (12, 4), (5, 4)])]),
}
open(name + '.gif', 'wb').write(files[name]())
EOF

for f in palette transparent interlaced one anim past huge early beyond lenient; do
    python3 mkgif.py $f || { fail setup "mkgif.py $f"; exit 1; }
done

# ours FILE OUT.pam: FILE read and written unchanged (flip twice).
ours() {
    "$PROG" --op flip "$1" mid.pam && "$PROG" --op flip mid.pam "$2"
}

# pam_equals_raw PAM RAW: the PAM's samples are RAW's bytes.
pam_equals_raw() {
    python3 - "$1" "$2" <<'EOF'
import sys
p = open(sys.argv[1], 'rb').read()
sys.exit(0 if p[p.index(b'ENDHDR\n') + 7:] == open(sys.argv[2], 'rb').read() else 1)
EOF
}

# ------------------------------------------------------------ reading

for f in palette transparent interlaced one past; do
    why=""
    ours $f.gif $f.pam 2>err.txt || why="exit $?: $(cat err.txt)"
    result "read-$f" "$why"
done

# Channels: RGB without a transparent index, RGBA with one (as libvips).
"$PROG" -v --op flip palette.gif e/x.pam 2>err.txt
grep -q 'gif 23x17 RGB,' err.txt && pass read-palette-is-rgb || fail read-palette-is-rgb "$(head -n 1 err.txt)"
"$PROG" -v --op flip transparent.gif e/x.pam 2>err.txt
grep -q 'gif 23x17 RGBA,' err.txt && pass read-transparent-is-rgba ||
    fail read-transparent-is-rgba "$(head -n 1 err.txt)"
rm -f e/*

# Indices past a 2-entry map are black (as libvips decodes them).
python3 - past.pam <<'EOF' && pass read-past-map-black || fail read-past-map-black "samples differ"
import sys
p = open(sys.argv[1], 'rb').read()
px = p[p.index(b'ENDHDR\n') + 7:]
want = bytearray()
for i in [0, 1, 2, 3, 1, 0] * 2:
    want += bytes((37 * i % 256, (91 * i + 40) % 256, (173 * i + 7) % 256)) if i < 2 else b'\0\0\0'
sys.exit(0 if bytes(want) == px else 1)
EOF

if have vips; then
    for f in palette transparent interlaced one past; do
        why=""
        vips rawsave $f.gif $f.raw 2>err.txt || why="vips: $(cat err.txt)"
        [ -z "$why" ] && { pam_equals_raw $f.pam $f.raw || why="samples differ from libvips's"; }
        result "read-$f-equals-vips" "$why"
    done
    for page in 0 1 2 3; do
        why=""
        ours "anim.gif[$page]" "anim$page.pam" 2>err.txt || why="exit $?: $(cat err.txt)"
        vips rawsave "anim.gif[page=$page]" anim$page.raw 2>err.txt || why="vips: $(cat err.txt)"
        [ -z "$why" ] && { pam_equals_raw anim$page.pam anim$page.raw || why="differs from libvips's"; }
        result "read-animation-frame-$page-equals-vips" "$why"
    done
else
    skip read-equals-vips "vips is not installed"
fi

if [ -x /usr/bin/convert ] && /usr/bin/convert -version 2>/dev/null | grep -q ImageMagick; then
    for f in palette interlaced one; do
        why=""
        /usr/bin/convert $f.gif im-$f.pam 2>err.txt || why="ImageMagick: $(cat err.txt)"
        [ -z "$why" ] && { why=$(same $f.pam im-$f.pam) || true; }
        result "read-$f-equals-imagemagick" "$why"
    done
else
    skip read-equals-imagemagick "ImageMagick's /usr/bin/convert is not installed"
fi

expect_fail read-no-frame-4 1 e -- "$PROG" 'anim.gif[4]' e/out.png
grep -q 'GIF has 4 frames: no frame 4' stderr.txt ||
    fail read-no-frame-4-message "$(head -c 200 stderr.txt)"

# GIF is read only: a .gif output is a usage error, before reading.
expect_fail write-gif-is-usage-error 2 e -- "$PROG" palette.gif e/out.gif
expect_fail write-format-gif-is-usage-error 2 e -- "$PROG" -f gif palette.gif e/out

# ------------------------------------------------------------ hostile

len=$(wc -c <palette.gif)
head -c $((len / 2)) palette.gif >half.gif
refused hostile-truncated half.gif "truncated GIF data"
head -c 20 palette.gif >head20.gif
refused hostile-truncated-colour-map head20.gif "truncated GIF data"
# Under a pixel limit given (the old default's), from the header; with
# none (the default), by the memory budget (1 GiB here: the default is
# half the machine's memory).
refused hostile-huge-screen huge.gif "limit" --max-pixels 268435456
refused hostile-huge-screen-budget huge.gif "over the memory budget" --max-memory 1G
refused hostile-early-end early.gif "corrupt GIF data"
refused hostile-code-past-table beyond.gif "corrupt GIF data"
refused hostile-max-pixels palette.gif "max-pixels" --max-pixels 390

# A code past the table after the table has entries: giflib decodes it by
# its rule (the previous string and one more index) into defined pixels
# (valgrind checks that, under tests/valgrind.sh); those before it are
# indices 1, 2, 3. A refusal would be clean too.
why=""
"$PROG" --op flip lenient.gif e/lenient.pam 2>err.txt
rc=$?
if [ "$rc" -eq 0 ]; then
    python3 - e/lenient.pam <<'EOF' || why="the pixels before the bad code are not indices 1, 2, 3"
import sys
p = open(sys.argv[1], 'rb').read()
px = p[p.index(b'ENDHDR\n') + 7:]
want = b''.join(bytes((37 * i % 256, (91 * i + 40) % 256, (173 * i + 7) % 256)) for i in (1, 2, 3))
sys.exit(0 if len(px) == 15 and px[:9] == want else 1)
EOF
elif [ "$rc" -ne 1 ] || ! grep -q 'corrupt GIF data' err.txt; then
    why="exit $rc: $(head -c 200 err.txt)"
fi
rm -f e/*
result hostile-code-past-table-later-defined "$why"

exit $failed
