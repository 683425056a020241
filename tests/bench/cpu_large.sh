#!/usr/bin/env bash
# tests/bench/cpu_large.sh — large images on the CPU against libvips on this
# machine (issue 32: "time that grows linearly and memory that stays
# bounded"). A benchmark, not a timed test: it prints what it measures and
# marks the issue's targets met or missed, and exits non-zero only when a
# command fails (or gtranspose and vips disagree on rot90).
#
# Sizes: LARGE_SIZES (default "4096 16384"; 32768 only when asked: its RGB
# PPM is 3.2 GB, and each run takes minutes).
# Formats: LARGE_FORMATS (default "ppm png"), input and output alike.
# Commands: LARGE_COMMANDS (default "gstats ghist gconv gtranspose").
# Input, per size: an RGB 8-bit photo-like image, made once by the project's
# tools as tests/bench/photo.sh's fallback does: seeded noise
# ($BUILD/tests/gen) blurred by gconv -k gaussian:6 with its contrast
# stretched, written as PPM, then as PNG by our writer (gconv -k 1, an
# identity kernel: level 6, adaptive row filters).
#
# The commands, whole (decode, work, output) as a user runs them, ours with
# --device cpu, against vips's equivalent:
#   gstats FILE >/dev/null               vips stats FILE out.csv   (cpu_gstats.sh)
#   ghist FILE >/dev/null                vips hist_find FILE out.v (cpu_ghist.sh)
#   gconv -k gaussian:2 IN OUT.FMT       vips gaussblur IN OUT.FMT 2 --min-ampl 0.011
#   gtranspose --op rot90 IN OUT.FMT     vips rot IN OUT.FMT d90
# PNG out at each side's default level, as in cpu_codecs.sh (ours: libdeflate
# 6 with adaptive row filters; vips 8.14: zlib 6, no row filter). Our tools
# have no pixel limit by default (the memory budget bounds a job): every
# size runs with the defaults. vips's temporary files go to the script's temporary folder (TMPDIR).
#
# Then a gigapixel scan (GIGA_SIZE, below): gstats, ghist and gconv within
# the memory budget.
#
# Per run: wall time (bash's clock around the command) and peak RSS
# (/usr/bin/time's %M; none when /usr/bin/time is missing). Runs are paired,
# ours then vips: LARGE_RUNS pairs (default 3 at sizes >= 16384, 5 below,
# after one warm-up pair below 16384, whose rot90 outputs are compared with
# tests/imgcmp). Reported: median wall times, the largest peak RSS of the
# runs, and the median of the per-pair ratios ours/vips. Outputs are deleted
# after each run, untimed.
#
# Then per command and format, against the smallest size run (4096^2 by
# default): ns/pixel at each larger size / the smallest's (target <= 1.2);
# at sizes >= 16384: ours/vips time (<= 1.0) and peak RSS (<= vips's); at
# every size: peak RSS <= 1024 MB (the issue's default budget).
# Skipped when vips is not installed.
set -u
cd "$(dirname "$0")/../.." || exit 1
BIN=${BIN:-bin}
BUILD=${BUILD:-build}
SIZES=${LARGE_SIZES:-4096 16384}
FORMATS=${LARGE_FORMATS:-ppm png}
COMMANDS=${LARGE_COMMANDS:-gstats ghist gconv gtranspose}

if ! command -v vips >/dev/null; then
    echo "bench-large: vips not installed: skipped"
    exit 0
fi
for s in $SIZES; do
    case $s in '' | *[!0-9]* | 0*)
        echo "bench-large: LARGE_SIZES: '$s' is not a positive integer" >&2
        exit 2
        ;;
    esac
done
for f in $FORMATS; do
    case $f in ppm | png) ;; *)
        echo "bench-large: LARGE_FORMATS: '$f' is not ppm or png" >&2
        exit 2
        ;;
    esac
done
for c in $COMMANDS; do
    case $c in gstats | ghist | gconv | gtranspose) ;; *)
        echo "bench-large: LARGE_COMMANDS: '$c' is not gstats, ghist, gconv or gtranspose" >&2
        exit 2
        ;;
    esac
done
case ${LARGE_RUNS:-3} in '' | *[!0-9]* | 0*)
    echo "bench-large: LARGE_RUNS must be a positive integer" >&2
    exit 2
    ;;
esac
SIZES=$(printf '%s\n' $SIZES | sort -n | uniq | tr '\n' ' ')
SIZES=${SIZES% }
smallest=${SIZES%% *}
for tool in gstats ghist gconv gtranspose; do
    if [ ! -x "$BIN/$tool" ]; then
        echo "bench-large: $BIN/$tool missing (build it: make NVCC= BIN=$BIN BUILD=$BUILD all)" >&2
        exit 1
    fi
done
for t in gen imgcmp; do
    if [ ! -x "$BUILD/tests/$t" ]; then
        echo "bench-large: $BUILD/tests/$t missing (make BUILD=$BUILD $BUILD/tests/$t)" >&2
        exit 1
    fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cpu_large.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp

timer=/usr/bin/time
[ -x "$timer" ] || timer=
if [ -n "${EPOCHREALTIME:-}" ]; then
    now_us() { now=${EPOCHREALTIME//[!0-9]/}; }
else
    now_us() { now=$(($(date +%s%N) / 1000)); }
fi

status=0
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "bench-large: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), $(awk '/MemTotal/ { printf "%.0f GB", $2 / 1048576 }' /proc/meminfo) RAM; vips $(vips --version | cut -d- -f2); load average $(load) before"
echo "bench-large: sizes $SIZES; formats $FORMATS; ms: medians; peak MB: the largest RSS of the runs, by ${timer:-nothing (/usr/bin/time missing)}"

# ms, kb (peak RSS in KB, empty without /usr/bin/time), bytes (the output's
# size, 0 for none) of one run of "$@", its output file OUT deleted after.
# Returns 1 (with the command's last lines of errors) when it fails.
run() {
    local out=$1 t0
    shift
    rm -f "$out"
    now_us
    t0=$now
    if [ -n "$timer" ]; then
        "$timer" -o "$tmp/rss" -f '%M' "$@" >/dev/null 2>"$tmp/err"
    else
        "$@" >/dev/null 2>"$tmp/err"
    fi
    local rc=$?
    now_us
    ms=$(((now - t0) / 1000))
    kb=
    [ -n "$timer" ] && kb=$(tail -n 1 "$tmp/rss")
    bytes=0
    [ -n "$out" ] && [ -f "$out" ] && bytes=$(stat -c %s "$out")
    if [ $rc -ne 0 ]; then
        echo "bench-large: failed (exit $rc): $*" >&2
        tail -n 5 "$tmp/err" | sed 's/^/    /' >&2
        return 1
    fi
    if [ -n "$out" ] && [ "$bytes" -eq 0 ]; then
        echo "bench-large: no output from: $*" >&2
        return 1
    fi
    return 0
}

# Sets ours=(...), peer=(...) and their output files for COMMAND FORMAT IN.
commands() {
    local in=$3
    oout=$tmp/ours-out.$2
    vout=$tmp/vips-out.$2
    case $1 in
    gstats)
        ours=("$BIN"/gstats --device cpu "$in")
        peer=(vips stats "$in" "$tmp/vips-stats.csv")
        oout='' vout=$tmp/vips-stats.csv
        ;;
    ghist)
        ours=("$BIN"/ghist --device cpu "$in")
        peer=(vips hist_find "$in" "$tmp/vips-hist.v")
        oout='' vout=$tmp/vips-hist.v
        ;;
    gconv)
        ours=("$BIN"/gconv --device cpu -k gaussian:2 "$in" "$oout")
        peer=(vips gaussblur "$in" "$vout" 2 --min-ampl 0.011)
        ;;
    gtranspose)
        ours=("$BIN"/gtranspose --device cpu --op rot90 "$in" "$oout")
        peer=(vips rot "$in" "$vout" d90)
        ;;
    esac
}

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
largest() { printf '%s\n' "$@" | sort -g | tail -n 1; }

# Results, keyed "COMMAND FORMAT SIZE".
declare -A O_MS O_MB V_MS V_MB RATIO O_BYTES V_BYTES
t_start=$(date +%s)

for size in $SIZES; do
    runs=${LARGE_RUNS:-}
    [ -z "$runs" ] && { [ "$size" -ge 16384 ] && runs=3 || runs=5; }

    # The input, once per size.
    now_us
    t0=$now
    if ! "$BUILD"/tests/gen --seed 1 "$size" "$size" 3 8 - |
        "$BIN"/gconv --device cpu -k gaussian:6 --scale 16 --bias -1912 - "$tmp/in.ppm"; then
        echo "bench-large: could not make the ${size}^2 input" >&2
        exit 1
    fi
    made="seeded noise blurred (gaussian:6, contrast stretched, photo.sh's fallback)"
    inputs="in.ppm $(stat -c %s "$tmp/in.ppm" | awk '{ printf "%.1f", $1 / 1e6 }') MB"
    if [[ " $FORMATS " == *" png "* ]]; then
        if ! "$BIN"/gconv --device cpu -k 1 "$tmp/in.ppm" "$tmp/in.png"; then
            echo "bench-large: could not write the ${size}^2 PNG input" >&2
            exit 1
        fi
        made="$made; PNG by our writer (gconv -k 1, level 6)"
        inputs="$inputs, in.png $(stat -c %s "$tmp/in.png" | awk '{ printf "%.1f", $1 / 1e6 }') MB"
    fi
    now_us
    echo "bench-large: ${size}^2 input: $made; $inputs; made in $(((now - t0) / 1000)) ms; $runs paired runs; load average $(load)"
    if [[ " $FORMATS " != *" ppm "* ]]; then
        rm -f "$tmp/in.ppm"
    fi

    for fmt in $FORMATS; do
        for cmd in $COMMANDS; do
            key="$cmd $fmt $size"
            commands "$cmd" "$fmt" "$tmp/in.$fmt"
            if [ "$size" -lt 16384 ]; then
                # Warm-up pair; rot90's outputs must be the same image.
                if ! run "" "${ours[@]}"; then
                    O_MS[$key]=FAIL V_MS[$key]=- status=1
                    continue
                fi
                if ! run "" "${peer[@]}"; then
                    O_MS[$key]=- V_MS[$key]=FAIL status=1
                    continue
                fi
                if [ $cmd = gtranspose ] && ! "$BUILD"/tests/imgcmp "$oout" "$vout" >/dev/null 2>&1; then
                    echo "bench-large: gtranspose and vips rot d90 disagree (${size}^2, $fmt)" >&2
                    status=1
                fi
                rm -f "$oout" "$vout"
            fi
            oms=() okb=() vms=() vkb=() ratios=() failed=0
            for ((i = 0; i < runs; i++)); do
                if ! run "$oout" "${ours[@]}"; then failed=1; break; fi
                oms+=("$ms") okb+=("${kb:-0}")
                O_BYTES[$key]=$bytes
                if ! run "$vout" "${peer[@]}"; then failed=1; break; fi
                vms+=("$ms") vkb+=("${kb:-0}")
                V_BYTES[$key]=$bytes
                ratios+=("$(awk -v a="${oms[i]}" -v b="$ms" 'BEGIN { printf "%.4f", a / (b > 0 ? b : 1) }')")
            done
            rm -f "$oout" "$vout"
            if [ $failed -eq 1 ]; then
                status=1
                # The side that failed gets FAIL; the other keeps its runs.
                if [ ${#oms[@]} -gt ${#vms[@]} ]; then
                    O_MS[$key]=$(median "${oms[@]}") O_MB[$key]=$(($(largest "${okb[@]}") / 1024))
                    V_MS[$key]=FAIL
                else
                    O_MS[$key]=FAIL V_MS[$key]=-
                    [ ${#vms[@]} -gt 0 ] && V_MS[$key]=$(median "${vms[@]}") V_MB[$key]=$(($(largest "${vkb[@]}") / 1024))
                fi
                continue
            fi
            O_MS[$key]=$(median "${oms[@]}")
            V_MS[$key]=$(median "${vms[@]}")
            O_MB[$key]=$(($(largest "${okb[@]}") / 1024))
            V_MB[$key]=$(($(largest "${vkb[@]}") / 1024))
            RATIO[$key]=$(median "${ratios[@]}")
        done
    done
    rm -f "$tmp/in.ppm" "$tmp/in.png"
done

echo "bench-large: load average $(load) after; $(($(date +%s) - t_start)) s in all"
[ -n "$timer" ] || echo "bench-large: no /usr/bin/time: peak RSS not measured (0 below)"
label() {
    case $1 in
    gstats) echo "gstats FILE >/dev/null vs vips stats FILE out.csv" ;;
    ghist) echo "ghist FILE >/dev/null vs vips hist_find FILE out.v" ;;
    gconv) echo "gconv -k gaussian:2 IN OUT vs vips gaussblur 2 --min-ampl 0.011" ;;
    gtranspose) echo "gtranspose --op rot90 IN OUT vs vips rot d90" ;;
    esac
}
for cmd in $COMMANDS; do
    for fmt in $FORMATS; do
        echo
        echo "$(label $cmd), $fmt$(case $cmd in gconv | gtranspose) echo " in and out" ;; *) echo " in" ;; esac)"
        echo
        echo "| size | ours ms | ours ns/pixel | ours peak MB | vips ms | vips peak MB | ours/vips time (median of pairs) |"
        echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
        for size in $SIZES; do
            key="$cmd $fmt $size"
            awk -v s="$size" -v om="${O_MS[$key]:-FAIL}" -v ob="${O_MB[$key]:-}" \
                -v vm="${V_MS[$key]:-FAIL}" -v vb="${V_MB[$key]:-}" -v r="${RATIO[$key]:-}" 'BEGIN {
                ns = om !~ /^[0-9]+$/ ? "" : sprintf("%.2f", om * 1e6 / (s * s))
                printf "| %d^2 | %s | %s | %s | %s | %s | %s |\n", s, om, ns, ob, vm, vb, r == "" ? "" : sprintf("%.2f", r) }'
        done
        if [ $cmd = gconv ] || [ $cmd = gtranspose ]; then
            if [ "$fmt" = png ]; then
                for size in $SIZES; do
                    key="$cmd $fmt $size"
                    [ -n "${O_BYTES[$key]:-}" ] && [ -n "${V_BYTES[$key]:-}" ] &&
                        awk -v s="$size" -v o="${O_BYTES[$key]}" -v v="${V_BYTES[$key]}" \
                            'BEGIN { printf "  %d^2 PNG out: ours %.1f MB, vips %.1f MB\n", s, o / 1e6, v / 1e6 }'
                done
            fi
        fi
    done
done

echo
echo "Targets (issue 32): time per pixel at each size <= 1.2x the smallest's (${smallest}^2); at sizes >= 16384^2 ours/vips <= 1.0 and peak RSS <= vips's; peak RSS <= 1024 MB at every size"
for cmd in $COMMANDS; do
    for fmt in $FORMATS; do
        line=""
        base=${O_MS["$cmd $fmt $smallest"]:-FAIL}
        [[ $base =~ ^[0-9]+$ ]] || line="; ${smallest}^2: failed"
        for size in $SIZES; do
            key="$cmd $fmt $size"
            om=${O_MS[$key]:-FAIL}
            [ "$size" = "$smallest" ] && continue
            if [[ ! $om =~ ^[0-9]+$ || ! $base =~ ^[0-9]+$ ]]; then
                line="$line; ns/pixel ${size}^2: failed"
                continue
            fi
            line="$line; $(awk -v a="$om" -v b="$base" -v s="$size" -v z="$smallest" 'BEGIN {
                r = (a / (s * s)) / ((b > 0 ? b : 1) / (z * z))
                printf "ns/pixel %d^2 / %d^2 %.2f (<= 1.2) %s", s, z, r, r <= 1.2 ? "met" : "MISSED" }')"
        done
        for size in $SIZES; do
            [ "$size" -ge 16384 ] || continue
            key="$cmd $fmt $size"
            r=${RATIO[$key]:-}
            if [ -z "$r" ]; then
                line="$line; vs vips ${size}^2: failed"
                continue
            fi
            line="$line; $(awk -v r="$r" -v s="$size" -v o="${O_MB[$key]}" -v v="${V_MB[$key]}" 'BEGIN {
                printf "time vs vips %d^2 %.2f (<= 1.0) %s; peak %d^2 %d MB vs vips %d MB %s", s, r, r <= 1.0 ? "met" : "MISSED", s, o, v, o <= v ? "met" : "MISSED" }')"
        done
        worst=-1 at=
        for size in $SIZES; do
            mb=${O_MB["$cmd $fmt $size"]:-}
            [ -n "$mb" ] && [ "$mb" -gt "$worst" ] && worst=$mb at=$size
        done
        if [ "$worst" -lt 0 ]; then
            line="$line; peak: no runs"
        elif [ -n "$timer" ]; then
            if [ "$worst" -le 1024 ]; then
                line="$line; peak <= 1024 MB at every size: met (largest $worst MB)"
            else
                line="$line; peak <= 1024 MB at every size: MISSED ($worst MB at ${at}^2)"
            fi
        fi
        echo "  $cmd $fmt: ${line#; }"
    done
done

# A gigapixel scan (issue 32's test, too long for CI): a GIGA_SIZE^2 gray
# PNG (default 40000, 1.6 GP) made a band at a time (gigapixel_png.py:
# numpy and zlib, a few MB held), through gstats, ghist and gconv to a PGM,
# once each: wall time and peak RSS against the 1024 MB budget. Skipped
# with GIGA_SIZE=0 and without numpy.
giga=${GIGA_SIZE:-40000}
if [ "$giga" != 0 ]; then
    echo
    if ! /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
        echo "bench-large: gigapixel: numpy missing: skipped"
    else
        gp=$((giga * giga))
        now_us
        t0=$now
        if ! /usr/bin/python3 tests/bench/gigapixel_png.py "$giga" "$giga" "$tmp/giga.png"; then
            echo "bench-large: could not make the ${giga}^2 PNG" >&2
            exit 1
        fi
        now_us
        echo "bench-large: gigapixel: ${giga}^2 gray PNG, $(stat -c %s "$tmp/giga.png" | awk '{ printf "%.0f", $1 / 1e6 }') MB, made in $(((now - t0) / 1000)) ms; load average $(load)"
        echo
        echo "| command | ms | ns/pixel | peak MB | <= 1024 MB |"
        echo "| --- | ---: | ---: | ---: | --- |"
        for cmd in gstats ghist gconv; do
            case $cmd in
            gconv) g=("$BIN"/gconv --device cpu -k gaussian:2 "$tmp/giga.png" "$tmp/giga-out.pgm") out=$tmp/giga-out.pgm ;;
            *) g=("$BIN"/$cmd --device cpu "$tmp/giga.png") out= ;;
            esac
            if ! run "$out" "${g[@]}"; then
                echo "| $cmd | FAIL | | | |"
                status=1
                continue
            fi
            rm -f "$tmp/giga-out.pgm"
            awk -v c="$cmd" -v ms="$ms" -v kb="${kb:-0}" -v px="$gp" 'BEGIN {
                printf "| %s | %d | %.2f | %d | %s |\n", c, ms, ms * 1e6 / px, kb / 1024, kb / 1024 <= 1024 ? "met" : "MISSED" }'
        done
        rm -f "$tmp/giga.png"
    fi
fi
exit $status
