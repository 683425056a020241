#!/usr/bin/env bash
# samples/demo.sh — what "make demo" runs: installs what the build needs and
# is missing (with apt-get), builds gimg, makes sample images in samples/out/
# and runs every tool on them.
set -euo pipefail

cd "$(dirname "$0")/.."
OUT=samples/out
STB_INCLUDE=${STB_INCLUDE:-/usr/include/stb}
CC=${CC:-cc}
MAKE=${MAKE:-make}

say() { printf '%s\n' "demo: $*"; }

# ------------------------------------------------------------ dependencies

missing=()
command -v gcc >/dev/null 2>&1 || command -v "$CC" >/dev/null 2>&1 || missing+=(gcc libc6-dev)
command -v make >/dev/null 2>&1 || missing+=(make)
[ -f "$STB_INCLUDE/stb_image.h" ] && [ -f "$STB_INCLUDE/stb_image_write.h" ] || missing+=(libstb-dev)
has_header() { printf '#include <%s>\n' "$1" | "$CC" -E -x c - >/dev/null 2>&1; }
# The codecs' libraries: header, Debian package.
for dep in libdeflate.h:libdeflate-dev zlib.h:zlib1g-dev jpeglib.h:libjpeg62-turbo-dev spng.h:libspng-dev \
    tiffio.h:libtiff-dev webp/decode.h:libwebp-dev gif_lib.h:libgif-dev; do
    header=${dep%%:*} package=${dep#*:}
    if command -v "$CC" >/dev/null 2>&1; then
        has_header "$header" || missing+=("$package")
    elif [ ! -f "/usr/include/$header" ]; then
        missing+=("$package")
    fi
done

if [ ${#missing[@]} -gt 0 ]; then
    say "missing build dependencies; installing: ${missing[*]}"
    if ! command -v apt-get >/dev/null 2>&1; then
        say "apt-get not found: install ${missing[*]} (or your system's equivalents) and run this again" >&2
        exit 1
    fi
    SUDO=
    if [ "$(id -u)" -ne 0 ]; then
        if ! command -v sudo >/dev/null 2>&1; then
            say "not root and no sudo: as root, run apt-get install ${missing[*]}" >&2
            exit 1
        fi
        SUDO=sudo
        say "using sudo for apt-get"
    fi
    $SUDO apt-get update
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
else
    say "build dependencies present (compiler, make, libstb-dev, libdeflate-dev, zlib1g-dev, libjpeg62-turbo-dev, libspng-dev, libtiff-dev, libwebp-dev, libgif-dev)"
fi

# ------------------------------------------------------------------ build

say "building"
"$MAKE" -j"$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)" all build/tests/gen
BIN=bin
GEN=build/tests/gen

# ---------------------------------------------------------------- samples

rm -rf "$OUT"
mkdir -p "$OUT"
say "making sample images in $OUT/"
"$GEN" --pattern gradient 640 400 3 8 "$OUT/gradient-rgb.png"
"$GEN" --pattern gradient 480 320 4 8 "$OUT/gradient-rgba.png"
"$GEN" --pattern gradient 512 256 1 16 "$OUT/gradient-gray16.png"
"$GEN" --seed 42 300 200 3 8 "$OUT/noise-rgb.ppm"

# -------------------------------------------------------------- the tools

ran=0
if [ -x "$BIN/gtranspose" ]; then
    for img in gradient-rgb gradient-rgba gradient-gray16; do
        for op in transpose transverse flip flop rot90 rot180 rot270; do
            "$BIN/gtranspose" --op "$op" "$OUT/$img.png" "$OUT/$img-$op.png"
        done
    done
    # Tools chained through a pipe; PAM between them keeps alpha and 16 bits.
    "$BIN/gtranspose" --op rot90 "$OUT/gradient-rgba.png" - |
        "$BIN/gtranspose" --op flop - "$OUT/gradient-rgba-rot90-flop.png"
    # The same image in other formats, chosen by extension.
    "$BIN/gtranspose" --op flip "$OUT/noise-rgb.ppm" "$OUT/noise-rgb-flip.jpg"
    "$BIN/gtranspose" --op flip "$OUT/noise-rgb.ppm" "$OUT/noise-rgb-flip.bmp"
    "$BIN/gtranspose" --op flip "$OUT/gradient-gray16.png" "$OUT/gradient-gray16-flip.tif"
    "$BIN/gtranspose" --op flip --lossless "$OUT/gradient-rgba.png" "$OUT/gradient-rgba-flip.webp"
    "$BIN/gtranspose" --op flip --quality 75 --jpeg-subsampling 420 --progressive \
        "$OUT/gradient-rgb.png" "$OUT/gradient-rgb-flip-progressive.jpg"
    say "gtranspose: every op on the three samples; what -v reports:"
    "$BIN/gtranspose" -v --op rot90 "$OUT/gradient-rgb.png" "$OUT/gradient-rgb-rot90.png"
    ran=$((ran + 1))
fi
if [ -x "$BIN/gconv" ]; then
    "$BIN/gconv" -k gaussian:2 "$OUT/gradient-rgba.png" "$OUT/gradient-rgba-blur.png"
    "$BIN/gconv" -k sharpen "$OUT/noise-rgb.ppm" "$OUT/noise-rgb-sharpen.png"
    "$BIN/gconv" -k sobel "$OUT/gradient-rgb.png" "$OUT/gradient-rgb-sobel.png"
    # A blur then an edge map, in float between the two kernels.
    "$BIN/gconv" -k box:2 -k laplacian --abs --scale 8 "$OUT/noise-rgb.ppm" "$OUT/noise-rgb-edges.png"
    say "gconv: blur, sharpen, edges; what -v reports:"
    "$BIN/gconv" -v -k gaussian:1.5 "$OUT/noise-rgb.ppm" "$OUT/noise-rgb-blur.png"
    ran=$((ran + 1))
fi
if [ -x "$BIN/ghist" ]; then
    "$BIN/ghist" --plot "$OUT/noise-rgb-hist.png" --bins 32 "$OUT/noise-rgb.ppm" >/dev/null
    "$BIN/ghist" --equalize "$OUT/gradient-gray16-equalized.png" "$OUT/gradient-gray16.png"
    say "ghist: 8 bins of the noise sample (and a plot of 32 in noise-rgb-hist.png):"
    "$BIN/ghist" --bins 8 "$OUT/noise-rgb.ppm"
    ran=$((ran + 1))
fi
if [ -x "$BIN/gstats" ]; then
    say "gstats: the noise sample, then how far the sharpened one is from it:"
    "$BIN/gstats" "$OUT/noise-rgb.ppm"
    "$BIN/gstats" --compare "$OUT/noise-rgb.ppm" "$OUT/noise-rgb-sharpen.png"
    ran=$((ran + 1))
fi

say "ran $ran tool(s); the samples and results are in $(pwd)/$OUT/:"
ls "$OUT"
say "next: make test    (the test suite)"
say "      make -C samples (samples/Makefile on these images, into $OUT/processed/)"
