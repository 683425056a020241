#!/usr/bin/env bash
# tests/bench/photo.sh OUT.ppm — the codec benchmark's test image: a
# 4096x4096 RGB photo-like PPM, made the same way on every run (fixed seeds),
# and one line on standard output saying which source was used.
#
# From real photos when python3 has scikit-image (its skimage.data ships
# them): astronaut, coffee, chelsea and rocket, each cropped to its centre
# square and upscaled to 2048x2048 by vips (lanczos3), tiled 2 by 2. An
# upscaled photo is too smooth to compress like a camera's, so mild
# sensor-like grain is added: gaussian noise of sigma 3.5 shared by the three
# bands (luminance grain) plus sigma 1.5 in each band (chroma grain). The
# result is about 3.3 MB as a JPEG at quality 90 with 4:2:0, 3.9 MB with
# 4:4:4, as a 16-megapixel camera photo is.
#
# Without scikit-image (or vips), the procedural stand-in of
# tests/bench/batch.sh: seeded noise blurred (gconv -k gaussian:6) with its
# contrast stretched back. It compresses like a photo, but it is not one:
# the line printed says so. Needs BIN and BUILD (as timing.sh sets them) for
# that fallback.
set -u
out=${1:?usage: photo.sh OUT.ppm}
BIN=${BIN:-bin}
BUILD=${BUILD:-build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

photos="astronaut coffee chelsea rocket"

# Writes each photo as $work/NAME.ppm with the first python3 that has
# scikit-image (pyenv's python3 may lack Debian's python3-skimage).
dump_photos() {
    local py
    for py in python3 /usr/bin/python3; do
        command -v "$py" >/dev/null || continue
        "$py" - "$work" $photos 2>/dev/null <<'EOF' && return 0
import sys
import numpy
import skimage.data

work, names = sys.argv[1], sys.argv[2:]
for name in names:
    pixels = numpy.ascontiguousarray(getattr(skimage.data, name)(), dtype=numpy.uint8)
    if pixels.ndim != 3 or pixels.shape[2] != 3:
        sys.exit(1)
    height, width = pixels.shape[:2]
    with open(f"{work}/{name}.ppm", "wb") as f:
        f.write(b"P6\n%d %d\n255\n" % (width, height))
        f.write(pixels.tobytes())
EOF
    done
    return 1
}

# vips gaussnoise IMAGE SIGMA SEED: zero-mean noise of 4096x4096, 1 band.
noise() {
    vips gaussnoise "$1" 4096 4096 --sigma "$2" --mean 0 --seed "$3"
}

from_photos() {
    local name tiles=()
    for name in $photos; do
        vips thumbnail "$work/$name.ppm" "$work/$name-2k.v" 2048 --height 2048 \
            --crop centre --size both || return 1
        tiles+=("$work/$name-2k.v")
    done
    vips arrayjoin "${tiles[*]}" "$work/mosaic.v" --across 2 &&
        noise "$work/luma.v" 3.5 1 && noise "$work/r.v" 1.5 2 &&
        noise "$work/g.v" 1.5 3 && noise "$work/b.v" 1.5 4 &&
        vips bandjoin "$work/r.v $work/g.v $work/b.v" "$work/chroma.v" &&
        vips add "$work/chroma.v" "$work/luma.v" "$work/grain.v" &&
        vips add "$work/mosaic.v" "$work/grain.v" "$work/sum.v" &&
        # cast truncates toward zero and clamps to 0..255: add 0.5 to round.
        vips linear "$work/sum.v" "$work/rounded.v" 1 0.5 &&
        vips cast "$work/rounded.v" "$out" uchar
}

if command -v vips >/dev/null && dump_photos && from_photos; then
    echo "photo: skimage.data's $(echo $photos | sed 's/ /, /g') (real photos), 2x2 mosaic upscaled by vips lanczos3 to 4096x4096, with grain (sigma 3.5 luma, 1.5 chroma)"
    exit 0
fi
"$BUILD"/tests/gen --seed 1 4096 4096 3 8 - |
    "$BIN"/gconv --device cpu -k gaussian:6 --scale 16 --bias -1912 - "$out" || exit 1
echo "photo: NOT a real photo (scikit-image or vips missing): seeded noise blurred with gaussian:6, contrast stretched, 4096x4096 (as tests/bench/batch.sh)"
