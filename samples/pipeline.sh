#!/usr/bin/env bash
# samples/pipeline.sh — what samples/Makefile does, as one shell pipeline
# per image, and the whole folder at once through a PNM stream:
#
#   samples/pipeline.sh IN OUT
#
# For every IN/NAME.{png,jpg,ppm}: OUT/NAME.png, blurred (gconv -k
# gaussian:2) and turned a quarter clockwise (gtranspose --op rot90), the
# two tools joined by a pipe carrying PAM; then the statistics of all
# results in one gstats process (OUT/stats.csv); then all inputs as one
# netpbm stream through the tools (OUT/stream.pam, one frame per input in
# the order png, jpg, ppm).
# BIN is where the tools are (default: the tree's bin/).
set -euo pipefail
IN=${1:?usage: pipeline.sh IN OUT}
OUT=${2:?usage: pipeline.sh IN OUT}
BIN=${BIN:-$(cd "$(dirname "$0")/.." && pwd)/bin}
mkdir -p "$OUT"
shopt -s nullglob
for f in "$IN"/*.png "$IN"/*.jpg "$IN"/*.ppm; do
    name=${f##*/}
    "$BIN"/gconv -k gaussian:2 "$f" - | "$BIN"/gtranspose --op rot90 - "$OUT/${name%.*}.png"
done
"$BIN"/gstats --csv -s mean,stddev "$OUT"/*.png >"$OUT/stats.csv"
# The inputs as one netpbm stream: each tool starts once for the whole
# folder, and frame N is what the same three tools give image N alone. (A
# symmetric blur commutes with a flip, so the frames are the blurred
# inputs, up to the rounding of a sum taken in the other order.)
for f in "$IN"/*.png "$IN"/*.jpg "$IN"/*.ppm; do "$BIN"/gtranspose --op flip "$f" -; done |
    "$BIN"/gconv -k gaussian:2 - - | "$BIN"/gtranspose --op flip - - >"$OUT/stream.pam"
