#!/usr/bin/env bash
# tests/cli_gstats.sh — the command-line tests of gstats: statistics of
# hand-made images with known answers (computed here, independently, with
# awk), bare numbers, table, JSON (checked by a JSON parser when python3 is
# there) and CSV, regions at the edges, --unit-scale, comparisons, several
# inputs with a failing one, usage errors. One PASS/FAIL/SKIP line per
# test; BIN and BUILD as in cli_lib.sh.
TOOL=gstats
. "$(dirname "$0")/cli_lib.sh"
GS=$PROG

# ---------------------------------------------------------------- helpers

# expect_out NAME WANT -- COMMAND...: stdout must be exactly WANT, status 0.
expect_out() {
    local name=$1 want=$2 got rc
    shift 3
    got=$("$@" 2>stderr.txt)
    rc=$?
    if [ "$rc" -ne 0 ]; then
        fail "$name" "exit status $rc: $(head -c 200 stderr.txt)"
    elif [ "$got" != "$want" ]; then
        fail "$name" "got '$got', expected '$want'"
    else
        pass "$name"
    fi
}

# awk_stats V...: count min max sum mean stddev median (nearest rank) of the
# values, computed independently of gstats (mean and stddev to 15 digits).
awk_stats() {
    printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1; s += $1; q += $1 * $1 }
        END { n = NR; m = s / n; k = int((n + 1) / 2);
              printf "%d %d %d %d %.15g %.15g %d\n", n, v[1], v[n], s, m, sqrt(q / n - m * m), v[k] }'
}

# ------------------------------------------------- known values, 8-bit gray

# A 4x3 gray image with values 0..255 spread over it.
G8="0 10 20 255 7 7 7 100 30 60 90 120"
pnm g8.pgm P5 4 3 255 $G8
set -- $(awk_stats $G8)
for stat in count min max sum median; do
    case $stat in count) want=$1 ;; min) want=$2 ;; max) want=$3 ;; sum) want=$4 ;; median) want=$7 ;; esac
    expect_out "gray8-bare-$stat" "$want" -- "$GS" -s "$stat" -c gray g8.pgm
done
got=$("$GS" -s mean -c gray g8.pgm)
result gray8-bare-mean "$(awk -v a="$got" -v b="$5" 'BEGIN { if (a - b > 1e-9 || b - a > 1e-9) print "got " a ", expected " b }')"
got=$("$GS" -s stddev -c gray g8.pgm)
result gray8-bare-stddev "$(awk -v a="$got" -v b="$6" 'BEGIN { if (a - b > 1e-9 || b - a > 1e-9) print "got " a ", expected " b }')"
# Entropy: 12 samples, 7 three times, the other 9 once: -(3/12 log2 3/12 + 9/12 log2 1/12).
got=$("$GS" -s entropy -c gray g8.pgm)
result gray8-bare-entropy "$(awk -v a="$got" 'BEGIN { e = -(0.25 * log(0.25) + 0.75 * log(1 / 12)) / log(2);
    if (a - e > 1e-12 || e - a > 1e-12) print "got " a ", expected " e }')"
# Percentiles, nearest rank over the sorted values 0 7 7 7 10 20 30 60 90 100 120 255.
expect_out gray8-p1 0 -- "$GS" -s p1 -c gray g8.pgm
expect_out gray8-p25 7 -- "$GS" -s p25 -c gray g8.pgm
expect_out gray8-p26 7 -- "$GS" -s p26 -c gray g8.pgm
expect_out gray8-p34 10 -- "$GS" -s p34 -c gray g8.pgm
expect_out gray8-p90 120 -- "$GS" -s p90 -c gray g8.pgm
expect_out gray8-p91.7 255 -- "$GS" -s p91.7 -c gray g8.pgm
expect_out gray8-p100 255 -- "$GS" -c gray --percentiles 100 -s p100 g8.pgm
expect_out gray8-all-equals-gray "$("$GS" -s sum -c gray g8.pgm)" -- "$GS" -s sum -c all g8.pgm
expect_out gray8-unit-scale-max 1 -- "$GS" --unit-scale -s max -c gray g8.pgm
expect_out gray8-unit-scale-min 0 -- "$GS" --unit-scale -s min -c gray g8.pgm
got=$("$GS" --unit-scale -s mean -c gray g8.pgm)
result gray8-unit-scale-mean "$(awk -v a="$got" -v b="$5" 'BEGIN { if (a - b / 255 > 1e-12 || b / 255 - a > 1e-12) print "got " a }')"

# ------------------------------------------------ known values, RGB 16-bit

# 2x2 RGB 16-bit: red 0 65535 1000 3; green 5 5 5 5; blue 1 2 3 4.
pnm rgb16.ppm P6 2 2 65535 0 5 1 65535 5 2 1000 5 3 3 5 4
expect_out rgb16-red-max 65535 -- "$GS" -s max -c red rgb16.ppm
expect_out rgb16-red-sum 66538 -- "$GS" -s sum -c red rgb16.ppm
expect_out rgb16-green-stddev 0 -- "$GS" -s stddev -c green rgb16.ppm
expect_out rgb16-blue-median 2 -- "$GS" -s median -c blue rgb16.ppm
expect_out rgb16-all-count 12 -- "$GS" -s count -c all rgb16.ppm
expect_out rgb16-all-sum $((66538 + 20 + 10)) -- "$GS" -s sum -c all rgb16.ppm
expect_out rgb16-green-entropy 0 -- "$GS" -s entropy -c green rgb16.ppm
expect_out rgb16-blue-entropy 2 -- "$GS" -s entropy -c blue rgb16.ppm
got=$("$GS" --unit-scale -s max -c red rgb16.ppm)
result rgb16-unit-scale-max "$([ "$got" = 1 ] || echo "got $got")"

# -------------------------------------------------------- extremes, 1x1

for spec in "P5 1 1 255 0:0" "P5 1 1 255 255:255" "P5 1 1 65535 65535:65535" "P5 1 1 65535 0:0"; do
    set -- ${spec%:*}
    want=${spec#*:}
    pnm x.pgm $1 $2 $3 $4 $5
    name="extreme-1x1-max$4-value$5"
    out=$("$GS" --csv -s min,max,mean,stddev,median,entropy,p1,p99 x.pgm 2>stderr.txt)
    row=$(echo "$out" | sed -n 2p)
    result "$name" "$([ "$row" = "x.pgm,gray,$want,$want,$want,0,$want,0,$want,$want" ] || echo "got '$row'")"
done

# Constant images of every layout from gen: stddev 0, min = max = median.
for d in 8 16; do
    for ch in 1 2 3 4; do
        "$GEN" --pattern constant:0 37 23 "$ch" "$d" zero.pam
        row=$("$GS" --csv -s count,min,max,stddev,median,entropy -c all zero.pam | sed -n 2p)
        result "extreme-zeros-c$ch-d$d" "$([ "$row" = "zero.pam,all,$((37 * 23 * ch)),0,0,0,0,0" ] || echo "got '$row'")"
    done
done

# ------------------------------------------------------------------ float

# A PFM with NaN and infinities: 4x1 gray, little-endian (scale -1).
{ printf 'Pf\n4 1\n-1.0\n'; bytes 0 0 192 127  0 0 128 127  0 0 0 63  0 0 128 63; } >special.pfm
expect_out float-nan-count 1 -- "$GS" -s nan -c gray special.pfm
expect_out float-inf-count 1 -- "$GS" -s inf -c gray special.pfm
expect_out float-count-finite 2 -- "$GS" -s count -c gray special.pfm
expect_out float-mean-finite 0.75 -- "$GS" -s mean -c gray special.pfm
expect_out float-min 0.5 -- "$GS" -s min -c gray special.pfm
expect_out float-median 0.5 -- "$GS" -s median -c gray special.pfm
expect_out float-entropy 1 -- "$GS" -s entropy -c gray special.pfm
why=""
"$GS" special.pfm >table.txt 2>stderr.txt || why="exit status $?"
[ -z "$why" ] && { head -n 2 table.txt | tail -n 1 | grep -q 'nan.*inf' || why="no nan/inf columns: $(head -n 2 table.txt)"; }
result float-table-has-nan-inf "$why"

# --------------------------------------------------------------- formats

"$GEN" --seed 5 31 17 3 8 rgb.ppm
"$GEN" --seed 6 31 17 4 16 rgba16.pam
why=""
"$GS" rgb.ppm >table.txt 2>stderr.txt || why="exit status $?"
[ -z "$why" ] && { head -n 1 table.txt | grep -q '^rgb.ppm: 31x17 RGB 8-bit$' || why="header: $(head -n 1 table.txt)"; }
[ -z "$why" ] && { sed -n 2p table.txt | grep -Eq '^channel +count +min +max +sum +mean +stddev +median +entropy$' || why="columns: $(sed -n 2p table.txt)"; }
[ -z "$why" ] && { [ "$(wc -l <table.txt)" -eq 6 ] || why="$(wc -l <table.txt) lines"; }
[ -z "$why" ] && { awk 'NR > 2 { print $1 }' table.txt | tr '\n' ' ' | grep -q '^red green blue all $' || why="rows: $(awk 'NR > 2 { print $1 }' table.txt | tr '\n' ' ')"; }
result table-layout "$why"

why=""
"$GS" --json --percentiles 1,5,95,99 rgb.ppm rgba16.pam >out.json 2>stderr.txt || why="exit status $?"
[ -z "$why" ] && { [ "$(wc -l <out.json)" -eq 2 ] || why="$(wc -l <out.json) lines, expected 2"; }
if [ -z "$why" ] && command -v python3 >/dev/null; then
    while IFS= read -r line; do
        echo "$line" | python3 -m json.tool >/dev/null 2>&1 || { why="not JSON: $line"; break; }
    done <out.json
    [ -z "$why" ] && why=$(python3 - <<'EOF'
import json
a, b = [json.loads(l) for l in open("out.json")]
want = {"file", "width", "height", "channels", "depth", "stats"}
if set(a) != want: print("keys", sorted(a))
elif a["depth"] != 8 or b["depth"] != 16 or a["channels"] != 3 or b["channels"] != 4: print("layout", a["depth"], b["depth"])
elif list(a["stats"]) != ["red", "green", "blue", "all"]: print("channels", list(a["stats"]))
elif list(b["stats"]) != ["red", "green", "blue", "alpha", "all"]: print("channels", list(b["stats"]))
else:
    s = a["stats"]["red"]
    if list(s["percentiles"]) != ["1", "5", "95", "99"]: print("percentiles", s["percentiles"])
    elif s["count"] != 31 * 17 or a["stats"]["all"]["count"] != 31 * 17 * 3: print("count", s["count"])
    elif not s["min"] <= s["percentiles"]["1"] <= s["median"] <= s["percentiles"]["99"] <= s["max"]: print("order", s)
    elif abs(s["mean"] - s["sum"] / s["count"]) > 1e-9: print("mean", s["mean"])
EOF
)
elif [ -z "$why" ]; then
    skip json-parses "python3 is not installed"
fi
result json-output "$why"

# JSON bare values agree with the table's selection of one statistic.
why=""
bare=$("$GS" -s mean -c green rgb.ppm)
line=$("$GS" --json -s mean -c green rgb.ppm)
[ "$line" = "{\"file\": \"rgb.ppm\", \"width\": 31, \"height\": 17, \"channels\": 3, \"depth\": 8, \"stats\": {\"green\": {\"mean\": $bare}}}" ] ||
    why="got $line (bare $bare)"
result json-selected "$why"

why=""
"$GS" --csv rgb.ppm rgba16.pam >out.csv 2>stderr.txt || why="exit status $?"
[ -z "$why" ] && { [ "$(head -n 1 out.csv)" = "file,channel,count,nan,inf,min,max,sum,mean,stddev,median,entropy" ] || why="header: $(head -n 1 out.csv)"; }
[ -z "$why" ] && { [ "$(wc -l <out.csv)" -eq $((1 + 4 + 5)) ] || why="$(wc -l <out.csv) lines"; }
[ -z "$why" ] && { [ "$(awk -F, 'NR > 1 && NF != 12' out.csv | wc -l)" -eq 0 ] || why="rows of the wrong width"; }
[ -z "$why" ] && { grep -q '^rgba16.pam,alpha,527,0,0,' out.csv || why="no alpha row: $(grep alpha out.csv)"; }
result csv-output "$why"

# A file name with a comma and a quote is quoted in CSV, escaped in JSON.
cp rgb.ppm 'we"ird,name.ppm'
row=$("$GS" --csv -s count -c red 'we"ird,name.ppm' | sed -n 2p)
result csv-quoting "$([ "$row" = '"we""ird,name.ppm",red,527' ] || echo "got $row")"
line=$("$GS" --json -s count -c red 'we"ird,name.ppm')
result json-escaping "$(echo "$line" | grep -qF '"file": "we\"ird,name.ppm"' || echo "got $line")"

# Standard input.
expect_out stdin-input "$("$GS" -s sum -c blue rgb.ppm)" -- "$GS" -s sum -c blue - <rgb.ppm

# Bare numbers need one input, one channel, one statistic.
why=""
out=$("$GS" -s mean -c red rgb.ppm rgb.ppm 2>/dev/null)
[ "$(echo "$out" | wc -l)" -gt 2 ] || why="two inputs gave a bare number: $out"
result bare-only-for-one-input "$why"

# ---------------------------------------------------------------- regions

# 4x3 gray: rows 0 10 20 255 / 7 7 7 100 / 30 60 90 120.
expect_out region-inside 24 -- "$GS" --region 2x2+0+0 -s sum -c gray g8.pgm
expect_out region-bottom-right 120 -- "$GS" --region 1x1+3+2 -s sum -c gray g8.pgm
expect_out region-clipped-right 592 -- "$GS" --region 10x10+2+0 -s sum -c gray g8.pgm
expect_out region-clipped-count 6 -- "$GS" --region 10x10+2+0 -s count -c gray g8.pgm
expect_out region-negative-offset 37 -- "$GS" --region 2x3-1+1 -s sum -c gray g8.pgm
expect_out region-negative-offset-count 2 -- "$GS" --region 2x3-1+1 -s count -c gray g8.pgm
expect_out region-larger-than-image "$("$GS" -s sum -c gray g8.pgm)" -- "$GS" --region 100x100+0+0 -s sum -c gray g8.pgm
expect_fail region-outside 1 "" -- "$GS" --region 2x2+4+0 -s sum -c gray g8.pgm
grep -q 'outside' stderr.txt || fail region-outside-message "$(cat stderr.txt)"
why=""
"$GS" --json --region 3x2+1+1 g8.pgm >r.json 2>stderr.txt || why="exit status $?"
[ -z "$why" ] && { grep -qF '"region": {"width": 3, "height": 2, "x": 1, "y": 1}' r.json || why="got $(cat r.json)"; }
[ -z "$why" ] && { grep -qF '"width": 4, "height": 3' r.json || why="image size: $(cat r.json)"; }
result region-json "$why"
expect_fail usage-bad-region 2 "" -- "$GS" --region 10x10+5 g8.pgm
expect_fail usage-bad-region-zero 2 "" -- "$GS" --region 0x10 g8.pgm

# -------------------------------------------------------------- compare

"$GEN" --seed 7 40 30 3 8 ref.ppm
csv=$("$GS" --compare ref.ppm --csv ref.ppm | sed -n 5p)
result compare-identical "$([ "$csv" = "ref.ppm,ref.ppm,all,3600,0,0,0,0,0,0,inf,1" ] || echo "got $csv")"
line=$("$GS" --compare ref.ppm --json -c all ref.ppm)
result compare-identical-json-inf "$(echo "$line" | grep -qF '"psnr": "inf"' || echo "got $line")"
if command -v python3 >/dev/null; then
    result compare-json-parses "$(echo "$line" | python3 -m json.tool >/dev/null 2>&1 || echo "not JSON: $line")"
fi
expect_out compare-identical-bare inf -- "$GS" --compare ref.ppm -s psnr -c all ref.ppm

# A known perturbation: pixel (0,0) of a 2x2 gray image changed by 10 and
# pixel (1,1) by 20: differing 2, max 20, MAE 7.5, MSE 125.
pnm p0.pgm P5 2 2 255 50 60 70 80
pnm p1.pgm P5 2 2 255 60 60 70 60
expect_out compare-differing 2 -- "$GS" --compare p0.pgm -s differing -c gray p1.pgm
expect_out compare-maxdiff 20 -- "$GS" --compare p0.pgm -s maxdiff -c gray p1.pgm
expect_out compare-mae 7.5 -- "$GS" --compare p0.pgm -s mae -c gray p1.pgm
expect_out compare-mse 125 -- "$GS" --compare p0.pgm -s mse -c gray p1.pgm
got=$("$GS" --compare p0.pgm -s psnr -c gray p1.pgm)
result compare-psnr "$(awk -v a="$got" 'BEGIN { p = 10 * log(255 * 255 / 125) / log(10);
    if (a - p > 1e-9 || p - a > 1e-9) print "got " a ", expected " p }')"
got=$("$GS" --compare p0.pgm --unit-scale -s mse -c gray p1.pgm)
result compare-unit-scale-mse "$(awk -v a="$got" 'BEGIN { p = 125 / 65025;
    if (a - p > 1e-15 || p - a > 1e-15) print "got " a ", expected " p }')"
# Exit status 0 whether or not the images differ.
"$GS" --compare p0.pgm p1.pgm >/dev/null 2>&1
result compare-exit-zero-when-different "$([ $? -eq 0 ] || echo "exit status $?")"

# Mismatches name both files; in compare mode trouble is exit status 2
# (cli_compare.sh has the rest).
"$GEN" --seed 8 41 30 3 8 wide.ppm
"$GEN" --seed 8 40 30 1 8 gray.pgm
expect_fail compare-size-mismatch 2 "" -- "$GS" --compare ref.ppm wide.ppm
grep -q 'wide.ppm' stderr.txt && grep -q 'ref.ppm' stderr.txt && grep -q '41x30' stderr.txt ||
    fail compare-size-mismatch-message "$(cat stderr.txt)"
expect_fail compare-channel-mismatch 2 "" -- "$GS" --compare ref.ppm gray.pgm
grep -q 'gray.pgm' stderr.txt && grep -q 'ref.ppm' stderr.txt && grep -q 'channel' stderr.txt ||
    fail compare-channel-mismatch-message "$(cat stderr.txt)"
expect_fail compare-missing-reference 2 "" -- "$GS" --compare nosuch.ppm ref.ppm

# ----------------------------------------------------- several inputs

printf 'not an image\n' >bad.png
"$GS" -s count -c red rgb.ppm bad.png ref.ppm >multi.txt 2>stderr.txt
rc=$?
why=""
[ "$rc" -eq 1 ] || why="exit status $rc, expected 1"
[ -z "$why" ] && { grep -q '^gstats: bad.png: ' stderr.txt || why="no message for bad.png: $(cat stderr.txt)"; }
[ -z "$why" ] && { [ "$(grep -c '^red ' multi.txt)" -eq 2 ] || why="reports: $(cat multi.txt)"; }
[ -z "$why" ] && { head -n 1 multi.txt | grep -q '^rgb.ppm:' && grep -q '^ref.ppm:' multi.txt || why="order: $(cat multi.txt)"; }
result several-inputs-one-failing "$why"
expect_fail missing-channel 1 "" -- "$GS" -s mean -c red g8.pgm
grep -q 'no red channel' stderr.txt || fail missing-channel-message "$(cat stderr.txt)"

# ------------------------------------------------------------------ usage

mkfifo fifo
expect_fail usage-unknown-stat 2 "" -- timeout 10 "$GS" -s median2 fifo
expect_fail usage-compare-stat-in-stats-mode 2 "" -- timeout 10 "$GS" -s psnr fifo
expect_fail usage-stat-in-compare-mode 2 "" -- timeout 10 "$GS" --compare fifo -s median fifo
expect_fail usage-unknown-channel 2 "" -- timeout 10 "$GS" -c purple fifo
expect_fail usage-bad-percentile 2 "" -- timeout 10 "$GS" --percentiles 101 fifo
expect_fail usage-bad-percentile-junk 2 "" -- timeout 10 "$GS" --percentiles 5,x fifo
expect_fail usage-json-and-csv 2 "" -- timeout 10 "$GS" --json --csv fifo
# No INPUT: standard input, here empty (at a terminal, a usage error:
# cli_conventions.sh).
expect_fail no-input-reads-empty-stdin 1 "" -- timeout 10 "$GS" -s mean </dev/null
expect_fail usage-no-output-option 2 "" -- timeout 10 "$GS" -o x.txt fifo

why=""
"$GS" --help >help.txt 2>stderr.txt || why="exit status $?"
[ -z "$why" ] && { head -n 1 help.txt | grep -q '^Usage: gstats \[options\] INPUT \.\.\.$' || why="usage line: $(head -n 1 help.txt)"; }
for opt in --channel --stat --percentiles --region --unit-scale --json --csv --compare --device; do
    [ -z "$why" ] && { grep -q -- "$opt" help.txt || why="help lacks $opt"; }
done
result help "$why"

# ----------------------------------------------------------------- devices

why=""
"$GS" --json --percentiles 5 rgba16.pam >auto.json 2>stderr.txt &&
    "$GS" --device cpu --json --percentiles 5 rgba16.pam >cpu.json 2>>stderr.txt || why="failed: $(head -c 200 stderr.txt)"
[ -z "$why" ] && { cmp -s auto.json cpu.json || why="auto and cpu differ"; }
result device-cpu-same-as-auto "$why"
why=""
"$GS" -v -s count -c red rgb.ppm >v.txt 2>stderr.txt || why="failed"
[ -z "$why" ] && { grep -q '^gstats: .*backend' stderr.txt || why="no backend line: $(cat stderr.txt)"; }
[ -z "$why" ] && { [ "$(cat v.txt)" = 527 ] || why="stdout: $(cat v.txt)"; }
result verbose "$why"

# ------------------------------------------------------------ ImageMagick

if command -v identify >/dev/null 2>&1 && identify -version 2>/dev/null | grep -q ImageMagick; then
    "$GEN" --seed 9 50 40 3 16 im.ppm
    why=""
    for ch in red green blue; do
        ours=$("$GS" -s mean -c "$ch" im.ppm)
        theirs=$(identify -format "%[fx:mean.${ch:0:1}*65535]" im.ppm 2>/dev/null)
        awk -v a="$ours" -v b="$theirs" 'BEGIN { exit !(a - b < 1e-3 * (b > 1 ? b : 1) && b - a < 1e-3 * (b > 1 ? b : 1)) }' ||
            why="$why $ch: $ours vs ImageMagick $theirs"
    done
    result imagemagick-mean "$why"
else
    skip imagemagick-mean "ImageMagick is not installed"
fi

exit $failed
