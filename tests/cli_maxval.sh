#!/usr/bin/env bash
# tests/cli_maxval.sh — samples in the file's own units (gimg_image.maxval)
# end to end: a 12-bit PGM (maxval 4095) and a 10-bit PPM (maxval 1023),
# made here, through gstats (mean against pamsumm, vips and a computation
# here; --unit-scale; --compare's PSNR against pnmpsnr), ghist (counts in
# the file's units), gconv (maxval kept, results clamped to it), pipes
# between tools, gtranspose, and conversions to formats that keep the
# maxval (PAM, PNG with sBIT) or rescale it (JPEG, BMP: against pamdepth).
# Peers skip when missing. BIN and BUILD as in cli_lib.sh.
TOOL=gstats
. "$(dirname "$0")/cli_lib.sh"
GS=$PROG
GC=$BIN/gconv
GH=$BIN/ghist
GT=$BIN/gtranspose
PY=python3

# ------------------------------------------------------------- the inputs

# make_pnm FILE MAGIC W H MAXVAL SEED: a raw PGM (P5) or PPM (P6) of seeded
# random samples in 0..MAXVAL, the first two 0 and MAXVAL; prints the
# samples' count, sum, mean (of all samples), min and max.
make_pnm() {
    "$PY" - "$@" <<'PY'
import sys
path, magic, w, h, maxval, seed = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
c = 3 if magic == 'P6' else 1
state = seed
vals = []
for i in range(w * h * c):
    state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
    vals.append(0 if i == 0 else maxval if i == 1 else (state >> 33) % (maxval + 1))
wide = maxval > 255
body = b''.join(v.to_bytes(2, 'big') if wide else bytes([v]) for v in vals)
open(path, 'wb').write(b'%s\n%d %d\n%d\n' % (magic.encode(), w, h, maxval) + body)
print(len(vals), sum(vals), repr(sum(vals) / len(vals)), min(vals), max(vals))
PY
}

# pnm_info FILE: the header's magic, width, height, maxval, then the
# samples' count, sum, min and max (one byte a sample up to maxval 255).
pnm_info() {
    "$PY" - "$1" <<'PY'
import re, sys
d = open(sys.argv[1], 'rb').read()
m = re.match(rb'(P[56])\s+(\d+)\s+(\d+)\s+(\d+)\s', d)
if not m:
    print('bad-header'); sys.exit()
magic, w, h, mv = m.group(1).decode(), *map(int, m.groups()[1:])
c = 3 if magic == 'P6' else 1
body = d[m.end():]
wide = mv > 255
v = [int.from_bytes(body[i:i + 2], 'big') for i in range(0, 2 * w * h * c, 2)] if wide \
    else list(body[:w * h * c])
print(magic, w, h, mv, len(v), sum(v), min(v), max(v))
PY
}

# close A B TOL: |A - B| <= TOL (empty output), else why.
close() {
    awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d;
        if (a == "" || b == "" || d > t) print "got " a ", expected " b " (tolerance " t ")" }'
}

set -- $(make_pnm g12.pgm P5 37 23 4095 12)
N12=$1 SUM12=$2 MEAN12=$3 MAX12=$5
set -- $(make_pnm c10.ppm P6 29 17 1023 10)
MEAN10=$3 MAX10=$5
[ "$MAX12" = 4095 ] && [ "$MAX10" = 1023 ] || fail setup "inputs not made: $MAX12 $MAX10"

# ---------------------------------------------------------------- gstats

for f in g12.pgm c10.ppm; do
    want=$([ $f = g12.pgm ] && echo "$MEAN12" || echo "$MEAN10")
    maxval=$([ $f = g12.pgm ] && echo 4095 || echo 1023)
    got=$("$GS" -s mean -c all $f 2>stderr.txt)
    result "$f-mean" "$(close "$got" "$want" 1e-9)"
    got=$("$GS" -s max -c all $f 2>stderr.txt)
    result "$f-max-in-file-units" "$([ "$got" = "$maxval" ] || echo "max $got, not $maxval")"
    got=$("$GS" --unit-scale -s mean -c all $f 2>stderr.txt)
    result "$f-normalized-by-maxval" "$(close "$got" "$(awk -v m="$want" -v x="$maxval" \
        'BEGIN { printf "%.17g", m / x }')" 1e-12)"
    if command -v pamsumm >/dev/null; then
        theirs=$(pamsumm -mean -brief $f 2>/dev/null)
        result "$f-mean-pamsumm" "$(close "$("$GS" -s mean -c all $f)" "$theirs" 1e-6)"
        theirs=$(pamsumm -mean -brief -normalize $f 2>/dev/null)
        result "$f-normalized-pamsumm" \
            "$(close "$("$GS" --unit-scale -s mean -c all $f)" "$theirs" 1e-6)"
    else
        skip "$f-mean-pamsumm" "pamsumm not installed"
    fi
    if command -v vips >/dev/null; then
        theirs=$(vips avg $f 2>/dev/null)
        result "$f-mean-vips" "$(close "$("$GS" -s mean -c all $f)" "$theirs" 1e-6)"
    else
        skip "$f-mean-vips" "vips not installed"
    fi
done
"$GS" g12.pgm >table.txt 2>stderr.txt
result table-says-maxval "$(grep -q 'g12.pgm: 37x23 gray 16-bit, maxval 4095' table.txt ||
    echo "$(head -n 1 table.txt)")"
"$GS" --json c10.ppm >out.json 2>stderr.txt
result json-maxval "$(grep -q '"maxval": 1023' out.json || echo "$(head -c 200 out.json)")"

# --compare: PSNR's peak is the maxval, as pnmpsnr's; other maxvals refused.
make_pnm g12b.pgm P5 37 23 4095 99 >/dev/null
make_pnm g16.pgm P5 37 23 65535 12 >/dev/null
want=$("$PY" - <<'PY'
import math, re
def samples(p):
    d = open(p, 'rb').read()
    m = re.match(rb'P5\s+\d+\s+\d+\s+\d+\s', d)
    b = d[m.end():]
    return [int.from_bytes(b[i:i + 2], 'big') for i in range(0, len(b), 2)]
a, b = samples('g12.pgm'), samples('g12b.pgm')
mse = sum((x - y) ** 2 for x, y in zip(a, b)) / len(a)
print(repr(10 * math.log10(4095 ** 2 / mse)))
PY
)
got=$("$GS" --compare g12.pgm -s psnr -c all g12b.pgm 2>stderr.txt)
result compare-psnr-peak-maxval "$(close "$got" "$want" 1e-9)"
if command -v pnmpsnr >/dev/null; then
    theirs=$(pnmpsnr -machine g12.pgm g12b.pgm 2>/dev/null)
    result compare-psnr-pnmpsnr "$(close "$got" "$theirs" 0.006)"
else
    skip compare-psnr-pnmpsnr "pnmpsnr not installed"
fi
# (2: trouble, as gstats --compare exits; 4095 and 65535 are no multiples of each other)
expect_fail compare-other-maxval-refused 2 "" -- "$GS" --compare g12.pgm g16.pgm
grep -q maxval stderr.txt || fail compare-other-maxval-message "$(head -c 200 stderr.txt)"

# -------------------------------------------------------------------- ghist

# Default: 256 bins of 16 values over [0, 4096), counted here too.
"$GH" --csv g12.pgm >h.csv 2>stderr.txt || fail ghist-runs "$(head -c 200 stderr.txt)"
why=$("$PY" - <<'PY'
import csv, re
d = open('g12.pgm', 'rb').read()
m = re.match(rb'P5\s+\d+\s+\d+\s+\d+\s', d)
b = d[m.end():]
v = [int.from_bytes(b[i:i + 2], 'big') for i in range(0, len(b), 2)]
want = [0] * 256
for x in v:
    want[x // 16] += 1
rows = [r for r in csv.DictReader(open('h.csv')) if r['bin'].isdigit()]
got = [int(r['gray']) for r in rows]
edges = [(float(r['lo']), float(r['hi'])) for r in rows]
if got != want:
    print('counts differ from the count here')
elif edges[0] != (0, 16) or edges[-1] != (4080, 4096):
    print('edges', edges[0], edges[-1])
PY
)
result ghist-counts-file-units "$why"
"$GH" g12.pgm 2>/dev/null | head -n 1 >head.txt
result ghist-table-range "$(grep -qF '256 bins over [0, 4096)' head.txt || cat head.txt)"
# One bin per value when asked: the maxval's own bin holds the white sample.
got=$("$GH" --bins 4096 --range 0:4096 --csv g12.pgm | awk -F, '$1 == 4095 { print $4 }')
result ghist-white-in-bin-4095 "$([ "${got:-0}" -ge 1 ] || echo "bin 4095 holds '$got'")"
# 10-bit: 256 bins of 4 over [0, 1024).
"$GH" c10.ppm 2>/dev/null | head -n 1 >head.txt
result ghist-10bit-range "$(grep -qF '256 bins over [0, 1024)' head.txt || cat head.txt)"
# Equalizing keeps the samples in 0..maxval and the maxval.
"$GH" --equalize eq.pgm g12.pgm 2>stderr.txt || fail ghist-equalize-runs "$(head -c 200 stderr.txt)"
set -- $(pnm_info eq.pgm)
result ghist-equalize-maxval "$([ "$4" = 4095 ] && [ "$8" -le 4095 ] && [ "$8" -ge 4000 ] ||
    echo "header maxval $4, samples up to $8")"

# -------------------------------------------------------------------- gconv

"$GC" -k box:1 g12.pgm box.pgm 2>stderr.txt || fail gconv-runs "$(head -c 200 stderr.txt)"
set -- $(pnm_info box.pgm)
result gconv-keeps-maxval "$([ "$1 $4" = "P5 4095" ] || echo "header: $1 ... $4")"
# A gain of 2: 2v, clamped to the maxval (an exact answer, checked here).
"$GC" -k '0,0,0;0,2,0;0,0,0' --no-normalize g12.pgm gain.pgm 2>stderr.txt
why=$("$PY" - <<'PY'
import re
def read(p):
    d = open(p, 'rb').read()
    m = re.match(rb'P5\s+\d+\s+\d+\s+(\d+)\s', d)
    b = d[m.end():]
    return int(m.group(1)), [int.from_bytes(b[i:i + 2], 'big') for i in range(0, len(b), 2)]
_, a = read('g12.pgm')
mv, g = read('gain.pgm')
want = [min(2 * x, 4095) for x in a]
if mv != 4095: print('maxval', mv)
elif g != want: print('samples differ from min(2v, 4095); largest', max(g))
PY
)
result gconv-clamps-to-maxval "$why"
# 10-bit RGB with a bias: every sample within 0..1023.
"$GC" -k sharpen --bias 300 c10.ppm sharp.ppm 2>stderr.txt
set -- $(pnm_info sharp.ppm)
result gconv-10bit-clamped "$([ "$4" = 1023 ] && [ "$8" = 1023 ] ||
    echo "maxval $4, largest sample $8")"

# 8-bit samples with a maxval of their own (written straight from the
# image's rows): the maxval still heads the file.
make_pnm g7.pgm P5 19 5 127 7 >/dev/null
"$GC" -k 1 g7.pgm g7-out.pgm 2>stderr.txt
set -- $(pnm_info g7-out.pgm)
result gconv-8bit-maxval "$([ "$4 $8" = "127 127" ] || echo "maxval ${4:-}, largest ${8:-}")"

# ------------------------------------------------------------------- pipes

# gconv's PNM on stdout keeps the maxval; gstats reads it from a pipe.
got=$("$GC" -k '0,0,0;0,2,0;0,0,0' --no-normalize g12.pgm - 2>stderr.txt | "$GS" -s mean -c all - 2>>stderr.txt)
want=$("$GS" -s mean -c all gain.pgm)
result pipe-gconv-gstats "$([ -n "$got" ] && [ "$got" = "$want" ] || echo "pipe $got, file $want")"
got=$("$GC" -k box:1 c10.ppm - 2>/dev/null | "$GS" -s max -c all - 2>/dev/null)
result pipe-10bit-max "$([ -n "$got" ] && [ "$got" -le 1023 ] || echo "max '$got'")"
"$GC" -k box:1 c10.ppm - 2>/dev/null | "$GS" - >pipe.txt 2>&1
result pipe-keeps-maxval "$(grep -q 'maxval 1023' pipe.txt || head -n 1 pipe.txt)"
# A stream of two images of different maxvals, each in its own units.
cat g12.pgm c10.ppm | "$GS" --csv -s max -c all - 2>stderr.txt | tail -n +2 |
    awk -F, '{ printf "%s ", $NF }' >two.txt
result stream-two-maxvals "$([ "$(cat two.txt)" = "4095 1023 " ] || echo "got $(cat two.txt)")"

# --------------------------------------------------------------- gtranspose

# (lib/orient.c copies the maxval.)
"$GT" --op rot90 g12.pgm rot.pgm 2>stderr.txt
set -- $(pnm_info rot.pgm)
result gtranspose-keeps-maxval "$([ "$2 $3 $4 $6" = "23 37 4095 $SUM12" ] ||
    echo "got ${2:-} x ${3:-} maxval ${4:-}, sum ${6:-} (want 23 x 37, 4095, $SUM12)")"

# ------------------------------------------------------------- conversions

# PAM keeps it; PNG keeps 2^b - 1 (sBIT, 12 bits here) and reads it back.
"$GC" -k 1 g12.pgm g12.pam 2>stderr.txt
result pam-keeps-maxval "$(grep -aq '^MAXVAL 4095$' g12.pam || echo "$(head -c 80 g12.pam)")"
"$GC" -k 1 g12.pgm g12.png 2>stderr.txt && "$GC" -k 1 g12.png back.pgm 2>>stderr.txt
set -- $(pnm_info back.pgm)
result png-roundtrip-keeps-maxval "$([ "$4 $6" = "4095 $SUM12" ] ||
    echo "back with maxval ${4:-}, sum ${6:-} (want 4095, $SUM12): $(head -c 200 stderr.txt)")"
# Formats that cannot keep it rescale to the full range first, as pamdepth.
if command -v pamdepth >/dev/null; then
    make_pnm g100.pgm P5 31 9 100 5 >/dev/null
    pamdepth 255 g100.pgm >want255.pgm 2>/dev/null
    # (BMP stores gray as RGB: the full-range PGM goes the same way.)
    "$GC" -k 1 g100.pgm g100.bmp 2>stderr.txt && "$GC" -k 1 want255.pgm want255.bmp
    result bmp-rescaled-as-pamdepth "$(same g100.bmp want255.bmp)"
    make_pnm g1000.pgm P5 31 9 1000 6 >/dev/null
    pamdepth 65535 g1000.pgm >want65535.pgm 2>/dev/null
    "$GC" -k 1 g1000.pgm g1000.png 2>stderr.txt
    result png-1000-rescaled-as-pamdepth "$(same g1000.png want65535.pgm)"
else
    skip bmp-rescaled-as-pamdepth "pamdepth not installed"
fi
# JPEG: 8-bit, from the full range: the mean scales by 255 / 4095.
"$GC" -q -k 1 --quality 100 g12.pgm g12.jpg 2>stderr.txt
got=$("$GS" -s mean -c all g12.jpg 2>/dev/null)
result jpeg-rescaled "$(close "$got" "$(awk -v m="$MEAN12" 'BEGIN { print m * 255 / 4095 }')" 1)"
# Bitmaps have no maxval: P1 stays 0 and 255.
printf 'P1\n3 1\n1 0 1\n' >bits.pbm
result pbm-full-range "$([ "$("$GS" -s max -c all bits.pbm)" = 255 ] || echo not 255)"

exit $failed
