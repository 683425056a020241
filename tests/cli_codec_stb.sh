#!/usr/bin/env bash
# tests/cli_codec_stb.sh — BMP and TGA palettes through the tools
# (gtranspose), the formats left to stb_image 2.27 (lib/codec_stb.c) with
# lib/precheck.c ahead of it. Palette BMPs (1, 4 and 8 bits, OS/2 too) and
# colour-mapped TGAs (raw and run-length, 8- and 16-bit indices), made here
# (python3) with their colours known, decode to those colours; those whose
# indices point past the palette, that have no palette, or whose colour
# map's first entry index stb misreads (running the pixels past the end of
# the file, or shifting them) are refused cleanly and quickly.
# One PASS/FAIL/SKIP line per test; BIN and BUILD as in cli_lib.sh.
# GIMG_TEST_SLOW=1 (tests/valgrind.sh sets it) skips the timing checks.
TOOL=gtranspose
. "$(dirname "$0")/cli_lib.sh"
export LC_ALL=C
GT=$PROG
mkdir -p e

# pal.py: writes each file and, for the valid ones, NAME.want.ppm: the
# colours the indices name, transposed (the images are W x 1, so the
# transpose is the same pixels as a column).
cat >pal.py <<'PY'
import struct

def colour(i):
    return [(40 + 13 * i) % 256, (200 - 7 * i) % 256, (i * i) % 256]

def want(name, idx):
    ppm = b'P6\n1 %d\n255\n' % len(idx) + b''.join(bytes(colour(i)) for i in idx)
    open(name + '.want.ppm', 'wb').write(ppm)

def bmp(name, bits, idx, stored, used, os2=False, offset_entries=None):
    header, entry = (12, 3) if os2 else (40, 4)
    row = (bits * len(idx) + 31) // 32 * 4
    n = stored if offset_entries is None else offset_entries
    offset = 14 + header + n * entry
    size = offset + row
    out = b'BM' + struct.pack('<IHHI', size, 0, 0, offset)
    if os2:
        out += struct.pack('<IHHHH', 12, len(idx), 1, 1, bits)
    else:
        out += struct.pack('<IiiHHIIiiII', 40, len(idx), 1, 1, bits, 0, row, 2835, 2835, used, 0)
    pal = b''.join(bytes(colour(i)[::-1]) + (b'' if os2 else b'\0') for i in range(stored))
    out += pal[:n * entry] + bytes(max(0, n * entry - len(pal)))
    bitstr = ''.join(format(i, '0%db' % bits) for i in idx)
    bitstr += '1' * (row * 8 - len(bitstr))          # padding bits set
    out += bytes(int(bitstr[k:k + 8], 2) for k in range(0, len(bitstr), 8))
    open(name + '.bmp', 'wb').write(out)

def tga(name, idx, entries, index_bits=8, rle=False, first=0):
    out = struct.pack('<BBBHHBHHHHBB', 0, 1, 9 if rle else 1, first, entries, 24, 0, 0, len(idx), 1,
                      index_bits, 0x20)
    out += bytes(first)                                # what stb skips for `first`
    out += b''.join(bytes(colour(i)[::-1]) for i in range(entries))
    for k, i in enumerate(idx):
        if rle:
            out += bytes([0x80 if k % 2 else 0])       # one pixel, repeated or raw
        out += bytes([i]) if index_bits == 8 else struct.pack('<H', i)
    open(name + '.tga', 'wb').write(out)

ok1, ok4, ok8 = [0, 1, 1, 0, 1, 0, 0, 1, 1], [0, 1, 2, 2, 1, 0, 2], [0, 4, 3, 2, 1, 4, 0]
for bits, idx, stored in (1, ok1, 2), (4, ok4, 3), (8, ok8, 5):
    bmp('bmp%d' % bits, bits, idx, stored, stored)
    want('bmp%d' % bits, idx)
    bad = idx[:]
    bad[len(bad) // 2] = stored if bits > 1 else 1
    bmp('bmp%d-badindex' % bits, bits, bad, stored if bits > 1 else 1, stored if bits > 1 else 1)
bmp('bmp8-declared', 8, ok8, 5, 3)                     # biClrUsed 3 of 5 stored: index 4 too far
bmp('bmp8-nopalette', 8, ok8, 5, 1, offset_entries=0)
os2 = [0, 11, 3, 7]
bmp('bmp4-os2', 4, os2, 16, 0, os2=True)               # stb loads entries 0-11 only
want('bmp4-os2', os2)
bmp('bmp4-os2-badindex', 4, [0, 12, 3, 7], 16, 0, os2=True)

idx = [0, 1, 2, 3, 4, 2, 0]
for rle in (False, True):
    for ib in (8, 16):
        name = 'tga%s-i%d' % ('-rle' if rle else '', ib)
        tga(name, idx, 5, ib, rle)
        want(name, idx)
        tga(name + '-badindex', idx[:3] + [5 if ib == 8 else 300] + idx[4:], 5, ib, rle)
# A first entry index of 5 in a file without the 5 bytes stb skips for it:
# stb reads the map 5 bytes late (still within the file) and the last 5
# indices past the end of the file (zeros: entry 0, before). One of 60000
# takes the map itself past the end.
for name, first in ('tga-first-past-end', 5), ('tga-first-far', 60000):
    tga(name, idx, 5)
    data = bytearray(open(name + '.tga', 'rb').read())
    data[3:5] = struct.pack('<H', first)
    open(name + '.tga', 'wb').write(bytes(data))
tga('tga-first-index', idx, 5, first=2)
PY
if ! python3 pal.py; then
    fail setup "python3 could not write the files"
    exit 1
fi

# --------------------------------------------------------------- decoding

for f in bmp1.bmp bmp4.bmp bmp8.bmp bmp4-os2.bmp tga-i8.tga tga-i16.tga tga-rle-i8.tga \
    tga-rle-i16.tga; do
    name=${f%.*}
    why=""
    if ! "$GT" -q "$f" "out-$name.ppm" 2>err.txt; then
        why="the tool failed: $(head -c 200 err.txt)"
    else
        why=$(same "out-$name.ppm" "$name.want.ppm")
    fi
    result "decode-$name" "$why"
done

# ------------------------------------------------------------ hostile files

# Each: exit 1, "gtranspose: FILE: reason", nothing on stdout, no output
# file, in under a second of CPU.
for f in bmp1-badindex.bmp bmp4-badindex.bmp bmp8-badindex.bmp bmp8-declared.bmp \
    bmp8-nopalette.bmp bmp4-os2-badindex.bmp tga-i8-badindex.tga tga-i16-badindex.tga \
    tga-rle-i8-badindex.tga tga-rle-i16-badindex.tga tga-first-past-end.tga tga-first-far.tga \
    tga-first-index.tga; do
    name=${f%.*}
    why=""
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -f '%U %S' -o cpu.txt timeout 20 "$GT" "$f" e/out.ppm >stdout.bin 2>stderr.txt
        rc=$?
        read -r user sys < <(tail -n 1 cpu.txt)
    else
        timeout 20 "$GT" "$f" e/out.ppm >stdout.bin 2>stderr.txt
        rc=$?
        user=0 sys=0
    fi
    case $name in
        bmp8-declared) want='corrupt BMP: pixel index 4 past the palette.s 3 colours' ;;
        bmp8-nopalette) want='corrupt BMP: no palette before the pixel data' ;;
        bmp4-os2-badindex) want='corrupt BMP: pixel index 12 past the palette.s 12 colours' ;;
        bmp*) want='corrupt BMP: pixel index [0-9]+ past the palette.s [0-9]+ colours' ;;
        tga*-badindex) want='corrupt TGA: pixel index [0-9]+ past the colour map.s 5 entries' ;;
        tga-first-past-end) want='truncated TGA data \(the colour map.s first entry index, 5,' ;;
        tga-first-far) want='truncated TGA data \(the colour map.s first entry index, 60000,' ;;
        tga-first-index) want='unsupported TGA: a colour map that starts at entry 2' ;;
    esac
    if [ "$rc" -ne 1 ]; then
        why="exit status $rc ($(head -c 200 stderr.txt | tr '\n' ' '))"
    elif ! head -n 1 stderr.txt | grep -qF "gtranspose: $f: "; then
        why="message does not name the file: $(head -c 200 stderr.txt)"
    elif ! head -n 1 stderr.txt | grep -Eq "$want"; then
        why="message does not say '$want': $(head -c 200 stderr.txt)"
    elif [ -s stdout.bin ]; then
        why="wrote to stdout"
    elif [ -n "$(ls -A e)" ]; then
        why="left $(ls -A e | tr '\n' ' ')"
    elif [ -z "${GIMG_TEST_SLOW:-}" ] && ! awk -v u="$user" -v s="$sys" 'BEGIN { exit !(u + s < 1.0) }'; then
        why="took $user s user + $sys s system CPU"
    fi
    rm -f e/* e/.[!.]* 2>/dev/null
    result "hostile-$name" "$why"
done

exit $failed
