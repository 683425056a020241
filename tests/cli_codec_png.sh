#!/usr/bin/env bash
# tests/cli_codec_png.sh — PNG reading through the tools (gtranspose):
# interlaced files and low bit depths, made here (python3) with their
# samples known, decode to those samples; ImageMagick's PNGs of every kind
# decode as ImageMagick decodes them; our own PNGs round-trip; hostile files
# made here are refused cleanly and quickly: palette indices past PLTE, an
# IDAT with no data, CRC errors, truncations, a zTXt decompression bomb,
# sizes over the limits.
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
        huge) want='over the limit' ;;
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

exit $failed
