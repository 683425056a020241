#!/usr/bin/env bash
# tests/cli_compare.sh — gstats --compare as test suites use it: exit
# statuses (0 within the thresholds, 1 beyond, 2 trouble) with --fail-if
# and --exact, the message naming the input and the threshold, bare
# numbers, every metric in JSON and CSV, layouts (8 against 16-bit, an
# opaque alpha, gray against RGB with --promote), --diff-image, SSIM against
# scikit-image on photos the test makes, pixels_differing and the
# difference image against ImageMagick, and ghist --plot - (the plot alone
# on standard output). Cross-checks skip when their peer is missing.
# BIN and BUILD as in cli_lib.sh.
TOOL=gstats
. "$(dirname "$0")/cli_lib.sh"
GS=$PROG
PY=/usr/bin/python3
has_skimage() { [ -x "$PY" ] && "$PY" -c 'import skimage, numpy' 2>/dev/null; }
has_im() { [ -x /usr/bin/compare ] && [ -x /usr/bin/convert ]; }

# status NAME WANT -- COMMAND...: the command exits WANT (stdout kept in
# out.txt, stderr in err.txt).
status() {
    local name=$1 want=$2 rc
    shift 3
    "$@" >out.txt 2>err.txt
    rc=$?
    result "$name" "$([ "$rc" -eq "$want" ] || echo "exit status $rc, expected $want: $(head -c 300 err.txt)")"
}

"$GEN" --seed 1 40 30 3 8 a.ppm
cp a.ppm same.ppm
# b.ppm: a.ppm with pixel 0 changed by 1 in red, pixel 1 by 2 in green and
# blue (the header is 13 bytes: "P6\n40 30\n255\n").
cp a.ppm b.ppm
flip() { # flip FILE OFFSET DELTA: adds DELTA (mod 256) to the byte at OFFSET
    local v
    v=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
    bytes $(( (v + $3) & 255 )) | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
flip b.ppm 13 1
flip b.ppm 17 2
flip b.ppm 18 2

# ------------------------------------------------------------ exit status

status no-threshold-equal 0 -- "$GS" --compare a.ppm same.ppm
status no-threshold-different 0 -- "$GS" --compare a.ppm b.ppm
status exact-equal 0 -- "$GS" --compare a.ppm --exact same.ppm
status exact-different 1 -- "$GS" --compare a.ppm --exact b.ppm
grep -q '^gstats: b.ppm: .*differing 3 > 0 (--exact)' err.txt ||
    fail exact-message "$(cat err.txt)"
[ -s out.txt ] && grep -q '^all ' out.txt || fail exact-report-still-printed "$(cat out.txt)"
status exact-quiet 1 -- "$GS" -q --compare a.ppm --exact b.ppm
[ ! -s err.txt ] || fail exact-quiet-silent "$(cat err.txt)"
status psnr-within 0 -- "$GS" --compare a.ppm --fail-if 'psnr<40' b.ppm
status psnr-beyond 1 -- "$GS" --compare a.ppm --fail-if 'psnr>=40' b.ppm
grep -q "psnr .* >= 40 (--fail-if 'psnr>=40')" err.txt || fail psnr-beyond-message "$(cat err.txt)"
status channel-within 0 -- "$GS" --compare a.ppm --fail-if 'red.maxdiff>1' b.ppm
status channel-beyond 1 -- "$GS" --compare a.ppm --fail-if 'green.maxdiff>1' b.ppm
status repeated-one-beyond 1 -- "$GS" --compare a.ppm --fail-if 'maxdiff>5' --fail-if 'differing>=3' b.ppm
status pixels-threshold 0 -- "$GS" --compare a.ppm --fail-if 'pixels_differing>2' b.ppm
status pixels-threshold-beyond 1 -- "$GS" --compare a.ppm --fail-if 'pixels_differing > 1' b.ppm
status unit-scale-threshold 0 -- "$GS" --compare a.ppm --unit-scale --fail-if 'maxdiff>0.01' b.ppm
status unit-scale-threshold-beyond 1 -- "$GS" --compare a.ppm --unit-scale --fail-if 'maxdiff>0.005' b.ppm
status ssim-within 0 -- "$GS" --compare a.ppm --fail-if 'ssim<0.99' b.ppm
status ssim-identical 0 -- "$GS" --compare a.ppm --fail-if 'ssim!=1' same.ppm
# Several inputs: one beyond is 1; trouble anywhere is 2.
status several-one-beyond 1 -- "$GS" --compare a.ppm --exact same.ppm b.ppm same.ppm
[ "$(grep -c '^gstats: ' err.txt)" -eq 1 ] && grep -q '^gstats: b.ppm:' err.txt ||
    fail several-one-beyond-names-it "$(cat err.txt)"
status several-trouble-wins 2 -- "$GS" --compare a.ppm --exact b.ppm nosuch.ppm
status missing-input 2 -- "$GS" --compare a.ppm nosuch.ppm
status missing-reference 2 -- "$GS" --compare nosuch.ppm a.ppm
"$GEN" --seed 2 41 30 3 8 wide.ppm
status size-mismatch 2 -- "$GS" --compare a.ppm --fail-if 'psnr<30' wide.ppm
grep -q 'wide.ppm' err.txt && grep -q 'a.ppm' err.txt && grep -q '41x30' err.txt ||
    fail size-mismatch-message "$(cat err.txt)"
# A NaN metric cannot be within a threshold: SSIM of an image under 11x11.
"$GEN" --seed 3 8 8 1 8 small.pgm
status nan-metric-beyond 1 -- "$GS" --compare small.pgm --fail-if 'ssim<0.5' small.pgm
grep -q 'ssim nan' err.txt || fail nan-metric-message "$(cat err.txt)"
status no-channel 2 -- "$GS" --compare small.pgm --fail-if 'red.psnr<30' small.pgm
grep -q 'no red channel' err.txt || fail no-channel-message "$(cat err.txt)"

mkfifo fifo
for expr in 'psnr' 'psnr<' 'psnr<x' 'median<3' 'purple.psnr<3' 'psnr<>3' 'psnr<nan' '<3'; do
    expect_fail "usage-fail-if-$expr" 2 "" -- timeout 10 "$GS" --compare fifo --fail-if "$expr" fifo
done
expect_fail usage-fail-if-without-compare 2 "" -- timeout 10 "$GS" --fail-if 'psnr<3' fifo
expect_fail usage-exact-without-compare 2 "" -- timeout 10 "$GS" --exact fifo
expect_fail usage-diff-image-without-compare 2 "" -- timeout 10 "$GS" --diff-image d.png fifo

# ------------------------------------------------------------------ output

got=$("$GS" --compare a.ppm -s psnr b.ppm)
want=$(awk 'BEGIN { printf "%.6f", 10 * log(255 * 255 / (9 / 3600)) / log(10) }')
result bare-psnr-no-channel "$(awk -v a="$got" -v b="$want" 'BEGIN { if (a - b > 1e-6 || b - a > 1e-6) print "got " a ", expected " b }')"
expect_bare() { # NAME WANT -- COMMAND
    local name=$1 want=$2 got
    shift 3
    got=$("$@" 2>&1)
    result "$name" "$([ "$got" = "$want" ] || echo "got '$got', expected '$want'")"
}
expect_bare bare-pixels-differing 2 -- "$GS" --compare a.ppm -s pixels_differing b.ppm
expect_bare bare-differing 3 -- "$GS" --compare a.ppm -s differing b.ppm
expect_bare bare-channel-pixels 1 -- "$GS" --compare a.ppm -s pixels_differing -c green b.ppm
expect_bare bare-ssim-identical 1 -- "$GS" --compare a.ppm -s ssim same.ppm
line=$("$GS" --compare a.ppm --json b.ppm)
why=""
for m in count differing pixels_differing maxdiff mae mse rmse psnr ssim; do
    echo "$line" | grep -q "\"$m\": " || why="$why no $m;"
done
if [ -z "$why" ] && command -v python3 >/dev/null; then
    echo "$line" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["stats"]["all"]["pixels_differing"] == 2' 2>/dev/null ||
        why="JSON does not parse or pixels_differing != 2: $line"
fi
result json-every-metric "$why"
header=$("$GS" --compare a.ppm --csv b.ppm | head -n 1)
result csv-every-metric "$([ "$header" = "reference,file,channel,count,differing,pixels_differing,maxdiff,mae,mse,rmse,psnr,ssim" ] || echo "header: $header")"

# ----------------------------------------------------------------- layouts

# 8-bit against 16-bit: the same picture (values times 257) is equal.
pnm g8.pgm P5 3 1 255 0 100 255
pnm g16.pgm P5 3 1 65535 0 25700 65535
status eight-vs-sixteen-equal 0 -- "$GS" --compare g8.pgm --exact g16.pgm
status sixteen-vs-eight-equal 0 -- "$GS" --compare g16.pgm --exact g8.pgm
pnm g16b.pgm P5 3 1 65535 0 25957 65535   # 101 x 257
expect_bare eight-vs-sixteen-scale 1 -- "$GS" --compare g8.pgm -s maxdiff g16b.pgm
expect_bare sixteen-vs-eight-scale 257 -- "$GS" --compare g16b.pgm -s maxdiff g8.pgm
pnm g1023.pgm P5 3 1 1023 0 400 1023
status unlike-maxvals-refused 2 -- "$GS" --compare g8.pgm g1023.pgm
grep -q 'maxval' err.txt || fail unlike-maxvals-message "$(cat err.txt)"

# An opaque alpha equals no alpha; a translucent pixel shows in alpha.
pam_rgba() { # FILE ALPHA_OF_PIXEL_0: a 2x1 RGBA PAM, pixels (10,20,30) (40,50,60)
    { printf 'P7\nWIDTH 2\nHEIGHT 1\nDEPTH 4\nMAXVAL 255\nTUPLTYPE RGB_ALPHA\nENDHDR\n'
      bytes 10 20 30 "$2" 40 50 60 255; } >"$1"
}
pam_rgba opaque.pam 255
pam_rgba translucent.pam 200
pnm rgb.ppm P6 2 1 255 10 20 30 40 50 60
status opaque-alpha-equal 0 -- "$GS" --compare rgb.ppm --exact opaque.pam
status opaque-alpha-equal-reversed 0 -- "$GS" --compare opaque.pam --exact rgb.ppm
expect_bare translucent-alpha-differs 55 -- "$GS" --compare rgb.ppm -s maxdiff -c alpha translucent.pam
grep -q 'opaque alpha' <("$GS" --compare rgb.ppm opaque.pam) ||
    fail opaque-alpha-table-says-so "$("$GS" --compare rgb.ppm opaque.pam)"

# Gray against RGB: refused, or compared as RGB with --promote.
pnm gray.pgm P5 2 1 255 7 9
pnm grayrgb.ppm P6 2 1 255 7 7 7 9 9 9
status gray-vs-rgb-refused 2 -- "$GS" --compare grayrgb.ppm gray.pgm
grep -q -- '--promote' err.txt && grep -q 'channel' err.txt || fail gray-vs-rgb-message "$(cat err.txt)"
status gray-vs-rgb-promoted 0 -- "$GS" --compare grayrgb.ppm --promote --exact gray.pgm
status rgb-vs-gray-promoted 0 -- "$GS" --compare gray.pgm --promote --exact grayrgb.ppm

# ---------------------------------------------------------- difference image

"$GS" --compare a.ppm --diff-image d.ppm -s differing b.ppm >/dev/null 2>err.txt
why=""
[ -f d.ppm ] || why="no d.ppm: $(cat err.txt)"
[ -z "$why" ] && { [ "$("$GS" -s sum -c all d.ppm)" = 5 ] || why="sum of |d| $("$GS" -s sum -c all d.ppm), expected 5"; }
[ -z "$why" ] && { [ "$("$GS" -s max -c green d.ppm)" = 2 ] || why="green max $("$GS" -s max -c green d.ppm)"; }
result diff-image "$why"
"$GS" --compare a.ppm --diff-image - -s psnr b.ppm >dstdout.ppm 2>err.txt
result diff-image-stdout-alone "$([ "$(head -c 2 dstdout.ppm)" = P6 ] && "$CMP" dstdout.ppm d.ppm >/dev/null 2>&1 || echo "stdout is not the difference image: $(head -c 40 dstdout.ppm | od -c | head -2)")"
"$GS" -v --compare a.ppm --diff-image - -s psnr b.ppm 2>err.txt >/dev/null
result diff-image-stdout-report-on-stderr-with-v "$(grep -qx '[0-9.]*' err.txt || echo "stderr: $(head -c 300 err.txt)")"
"$GS" --compare a.ppm --csv --diff-image - b.ppm >dstdout2.ppm 2>err.txt
result diff-image-stdout-alone-csv "$(cmp -s dstdout2.ppm dstdout.ppm || echo "standard output is not the image alone: $(head -c 40 dstdout2.ppm | tr -c '[:print:]' .)")"
mkdir diffs
"$GS" --compare a.ppm --diff-image 'diffs/%f-diff.png' same.ppm b.ppm >/dev/null 2>err.txt
result diff-image-pattern "$([ -f diffs/same-diff.png ] && [ -f diffs/b-diff.png ] || echo "made: $(ls diffs) $(cat err.txt)")"
expect_fail diff-image-several-one-name 2 "" -- "$GS" --compare a.ppm --diff-image one.png same.ppm b.ppm
if has_im; then
    "$GEN" --seed 5 33 17 3 16 p.png   # RGB: ImageMagick composites alpha
    "$GEN" --seed 6 33 17 3 16 q.png
    "$GS" --compare p.png --diff-image pq.png q.png >/dev/null 2>&1
    /usr/bin/convert p.png q.png -compose difference -composite -depth 16 im-pq.png 2>/dev/null
    result diff-image-equals-imagemagick "$(same pq.png im-pq.png)"
    ae=$(/usr/bin/compare -metric AE p.png q.png null: 2>&1)
    got=$("$GS" --compare p.png -s pixels_differing q.png)
    "$GEN" --seed 5 33 17 3 8 r.ppm
    cp r.ppm s.ppm
    flip s.ppm 20 1; flip s.ppm 21 1; flip s.ppm 400 9
    ae2=$(/usr/bin/compare -metric AE r.ppm s.ppm null: 2>&1)
    got2=$("$GS" --compare r.ppm -s pixels_differing s.ppm)
    result pixels-differing-equals-imagemagick-ae "$([ "$got" = "$ae" ] && [ "$got2" = "$ae2" ] || echo "ours $got, $got2; ImageMagick AE $ae, $ae2")"
else
    skip diff-image-equals-imagemagick "ImageMagick's compare and convert are not installed"
    skip pixels-differing-equals-imagemagick-ae "ImageMagick's compare is not installed"
fi

# ------------------------------------------------------ SSIM, scikit-image

# Photos made here from scikit-image's own data (astronaut: RGB; camera:
# gray), as 8-bit and 16-bit PNMs, against a blurred, noisy and a JPEG
# round-tripped version; our per-channel and overall SSIM must be within
# 1e-6 of structural_similarity's (gaussian_weights, sigma 1.5, population
# covariance, data range of the type), as the issue asks.
if has_skimage; then
    "$PY" - <<'EOF' 2>err.txt || fail ssim-photos-made "$(cat err.txt)"
import numpy as np
from skimage import data
def write(path, a):
    h, w = a.shape[:2]
    c = 1 if a.ndim == 2 else a.shape[2]
    maxval = 255 if a.dtype == np.uint8 else 65535
    with open(path, 'wb') as f:
        f.write(b'P7\nWIDTH %d\nHEIGHT %d\nDEPTH %d\nMAXVAL %d\nTUPLTYPE %s\nENDHDR\n' % (
            w, h, c, maxval, {1: b'GRAYSCALE', 3: b'RGB', 4: b'RGB_ALPHA'}[c]))
        f.write(a.astype('>u2' if maxval > 255 else 'u1').tobytes())
rng = np.random.default_rng(29)
astro = data.astronaut()[100:357, 150:481]          # 257 x 331 RGB
cam = data.camera()[::2, ::2][:200, :233]           # gray
rgba = np.dstack([astro, 255 - astro[..., 0] // 4]) # RGBA
for name, img in (('astro', astro), ('cam', cam), ('rgba', rgba)):
    write(name + '.pam', img)
    noisy = np.clip(img.astype(int) + rng.normal(0, 6, img.shape).round(), 0, 255).astype(np.uint8)
    write(name + '-noisy.pam', noisy)
    write(name + '16.pam', img.astype(np.uint16) * 257 + rng.integers(0, 257, img.shape, dtype=np.uint16))
    write(name + '16-noisy.pam', np.clip((noisy.astype(np.int64) * 257) + rng.integers(0, 257, img.shape), 0, 65535).astype(np.uint16))
EOF
    "$BIN"/gconv -k gaussian:1.2 astro.pam astro-blur.pam 2>>err.txt
    "$BIN"/gconv -k 1 --quality 40 astro.pam astro-q40.jpg 2>>err.txt &&
        "$BIN"/gconv -k 1 astro-q40.jpg astro-q40.pam 2>>err.txt
    worst=0
    why=""
    for pair in astro:astro-noisy astro:astro-blur astro:astro-q40 cam:cam-noisy rgba:rgba-noisy \
                astro16:astro16-noisy cam16:cam16-noisy; do
        ref=${pair%%:*}.pam; in=${pair#*:}.pam
        [ -f "$in" ] || { why="$why $in not made;"; continue; }
        ours=$("$GS" --compare "$ref" --csv -s ssim "$in" | tail -n +2 | cut -d, -f3,4 | tr '\n' ' ')
        theirs=$("$PY" - "$ref" "$in" <<'EOF'
import sys, numpy as np
from skimage.metrics import structural_similarity
def read(path):
    raw = open(path, 'rb').read()
    head, body = raw.split(b'ENDHDR\n', 1)
    f = dict(l.split(b' ', 1) for l in head.split(b'\n')[1:] if b' ' in l)
    w, h, c, m = (int(f[k]) for k in (b'WIDTH', b'HEIGHT', b'DEPTH', b'MAXVAL'))
    a = np.frombuffer(body, '>u2' if m > 255 else 'u1').reshape(h, w, c)
    return a.astype(np.uint16 if m > 255 else np.uint8)
a, b = read(sys.argv[1]), read(sys.argv[2])
names = {1: ['gray'], 3: ['red', 'green', 'blue'], 4: ['red', 'green', 'blue', 'alpha']}[a.shape[2]]
kw = dict(gaussian_weights=True, sigma=1.5, use_sample_covariance=False,
          data_range=255 if a.dtype == np.uint8 else 65535)
per = [structural_similarity(a[..., c], b[..., c], **kw) for c in range(a.shape[2])]
allv = structural_similarity(a, b, channel_axis=2, **kw)
print(' '.join('%s,%.17g' % (n, v) for n, v in zip(names + ['all'], per + [allv])))
EOF
)
        for t in $theirs; do
            name=${t%%,*}; want=${t#*,}
            got=$(echo "$ours" | tr ' ' '\n' | grep "^$name," | cut -d, -f2)
            d=$(awk -v a="$got" -v b="$want" 'BEGIN { d = a - b; if (d < 0) d = -d; if (a == "") d = 1; printf "%.3g", d }')
            worst=$(awk -v a="$worst" -v b="$d" 'BEGIN { print (b > a ? b : a) }')
            awk -v d="$d" 'BEGIN { exit !(d <= 1e-6) }' || why="$why $pair $name: ours $got, scikit-image $want;"
        done
    done
    result ssim-equals-scikit-image "$why"
    echo "  (largest |ours - scikit-image| $worst)"
else
    skip ssim-equals-scikit-image "$PY with scikit-image and numpy is not installed"
fi

# ------------------------------------------------------- ghist --plot -

"$GEN" --seed 9 50 40 3 8 h.ppm
TOOL=ghist
"$BIN"/ghist --plot plot.png h.ppm >/dev/null 2>err.txt
"$BIN"/ghist --plot - h.ppm >stdout.png 2>err.txt
result ghist-plot-stdout-alone "$(cmp -s stdout.png plot.png || echo "standard output is not the plot alone ($(wc -c <stdout.png) bytes, the plot $(wc -c <plot.png)): $(head -c 100 err.txt)")"
"$BIN"/ghist -v --plot - h.ppm 2>err.txt >/dev/null
result ghist-plot-stdout-table-on-stderr-with-v "$(grep -q '^ *bin ' err.txt || echo "no table on stderr: $(head -c 300 err.txt)")"
"$BIN"/ghist --plot - h.ppm 2>err.txt >/dev/null
result ghist-plot-stdout-table-dropped "$([ ! -s err.txt ] || echo "stderr: $(head -c 300 err.txt)")"

exit $failed
