#!/usr/bin/env bash
# samples/pipeline.sh — what samples/Makefile does, as one shell pipeline
# per image, and the whole folder at once through a PNM stream:
#
#   samples/pipeline.sh IN OUT
#
# For every IN/NAME.{png,jpg,jpeg,ppm} (the extension in any case: .JPG
# too): OUT/NAME.png, blurred (gconv -k gaussian:2) and turned a quarter
# clockwise (gtranspose --op rot90), the two tools joined by a pipe
# carrying PAM; then the statistics of these results in one gstats process
# (OUT/stats.csv); then all inputs as one
# netpbm stream through the tools (OUT/stream.pam, one frame per input in
# the order png, jpg, jpeg, ppm). Relative IN and OUT are taken from the
# current folder; names may hold spaces.
# BIN is where the tools are (default: the tree's bin/).
set -euo pipefail
IN=${1:?usage: pipeline.sh IN OUT}
OUT=${2:?usage: pipeline.sh IN OUT}
BIN=${BIN:-$(cd "$(dirname "$0")/.." && pwd)/bin}
shopt -s nullglob nocaseglob
inputs=("$IN"/*.png "$IN"/*.jpg "$IN"/*.jpeg "$IN"/*.ppm)
if [ ${#inputs[@]} -eq 0 ]; then
    echo "pipeline.sh: no .png, .jpg, .jpeg or .ppm image in $IN" >&2
    exit 2
fi
mkdir -p "$OUT"
results=()
for f in "${inputs[@]}"; do
    name=${f##*/}
    results+=("$OUT/${name%.*}.png")
    "$BIN"/gconv -k gaussian:2 "$f" - | "$BIN"/gtranspose --op rot90 - "${results[-1]}"
done
"$BIN"/gstats --csv -s mean,stddev "${results[@]}" >"$OUT/stats.csv"
# The inputs as one netpbm stream: each tool starts once for the whole
# folder, and frame N is what the same three tools give image N alone. (A
# symmetric blur commutes with a flip, so the frames are the blurred
# inputs, up to the rounding of a sum taken in the other order.)
for f in "${inputs[@]}"; do "$BIN"/gtranspose --op flip "$f" -; done |
    "$BIN"/gconv -k gaussian:2 - - | "$BIN"/gtranspose --op flip - - >"$OUT/stream.pam"
