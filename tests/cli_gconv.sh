#!/usr/bin/env bash
# tests/cli_gconv.sh — the command-line tests of gconv: kernels against
# hand-computed results, borders, --correlate, --normalize/--no-normalize,
# --scale/--bias/--abs, alpha modes, chains, kernel files, pipes, spec errors and exit
# statuses, devices, and cross-checks with vips and ImageMagick when they are
# installed. One PASS/FAIL/SKIP line per test; BIN and BUILD as in cli_lib.sh.
TOOL=gconv
. "$(dirname "$0")/cli_lib.sh"
GC=$PROG

# A 4x3 gray image with samples 10 20 30 40 / 50 60 70 80 / 90 100 110 120.
printf 'P5\n4 3\n255\n' >g.pgm
bytes 10 20 30 40 50 60 70 80 90 100 110 120 >>g.pgm

# pixels FILE: the samples of an 8-bit PNM/PAM's payload (the last N bytes).
payload() { tail -c "$2" "$1" | od -An -tu1 | tr -s ' \n' ' ' | sed 's/^ //; s/ $//'; }

# known NAME WANT ARGS...: gconv ARGS g.pgm, the 12 output samples must be WANT.
known() {
    local name=$1 want=$2 got
    shift 2
    if ! "$GC" "$@" g.pgm out.pgm 2>err.txt; then
        fail "$name" "exit status $?: $(head -c 200 err.txt)"
        return
    fi
    got=$(payload out.pgm 12)
    result "$name" "$([ "$got" = "$want" ] || echo "got '$got', want '$want'")"
}

# Identity, shifts (convolution vs correlation), every border on the edges.
known identity "10 20 30 40 50 60 70 80 90 100 110 120" -k 1
# [1 0 0] convolved: out(x) = in(x - 1)... rotated it is [0 0 1] correlated,
# anchor 1: out(x) = in(x + 1)? No: convolution out(x) = sum k[i] in(x - (i - 1)),
# so k = [1 0 0] gives in(x + 1).
known convolve-shift "20 30 40 40 60 70 80 80 100 110 120 120" -k '1 0 0'
known correlate-shift "10 10 20 30 50 50 60 70 90 90 100 110" -k '1 0 0' --correlate
known border-clamp "10 10 10 20 50 50 50 60 90 90 90 100" -k '1 0 0 0 0' --correlate --border clamp
known border-mirror "20 10 10 20 60 50 50 60 100 90 90 100" -k '1 0 0 0 0' --correlate --border mirror
known border-reflect "30 20 10 20 70 60 50 60 110 100 90 100" -k '1 0 0 0 0' --correlate --border reflect
known border-wrap "30 40 10 20 70 80 50 60 110 120 90 100" -k '1 0 0 0 0' --correlate --border wrap
known border-zero "0 0 10 20 0 0 50 60 0 0 90 100" -k '1 0 0 0 0' --correlate --border zero
known border-vertical-wrap "90 100 110 120 10 20 30 40 50 60 70 80" -k '1;0;0' --correlate --border wrap
# A corner: up-left diagonal shift with a zero border.
known border-zero-corner "0 0 0 0 0 10 20 30 0 50 60 70" -k '1 0 0; 0 0 0; 0 0 0' --correlate --border zero
# Even sizes anchor up-left: [1 1] correlated is in(x) + in(x + 1), as
# written, or divided by its sum (the default, as --normalize).
known even-kernel "30 50 70 80 110 130 150 160 190 210 230 240" -k '1 1' --correlate --no-normalize
known normalize "15 25 35 40 55 65 75 80 95 105 115 120" -k '1 1' --correlate --normalize
known normalize-default "15 25 35 40 55 65 75 80 95 105 115 120" -k '1 1' --correlate
known box "27 33 43 50 53 60 70 77 80 87 97 103" -k box:1
known scale-bias "105 110 115 120 125 130 135 140 145 150 155 160" -k 1 --scale 0.5 --bias 100
# sobel-x of a rightward ramp is positive, sobel-y of a downward ramp too.
known sobel-x "40 80 80 40 40 80 80 40 40 80 80 40" -k sobel-x
known sobel-y "160 160 160 160 255 255 255 255 160 160 160 160" -k sobel-y
known sobel-x-negative "0 0 0 0 0 0 0 0 0 0 0 0" -k sobel-x --scale -1
known sobel-x-abs "40 80 80 40 40 80 80 40 40 80 80 40" -k sobel-x --scale -1 --abs
# The image is linear, so the Laplacian is 0 inside; reflect bends it at the
# edges: 2*10 + 2*40 at the top-left corner, clamped at 0 where negative.
known laplacian "100 80 80 60 20 0 0 0 0 0 0 0" -k laplacian --border reflect

# Named kernels ignore --correlate; a custom asymmetric kernel does not.
"$GC" -k emboss g.pgm a.pgm && "$GC" -k emboss --correlate g.pgm b.pgm
result named-ignore-correlate "$(same a.pgm b.pgm)"
"$GC" -k '1 2 3; 4 5 6; 7 8 9' --no-normalize --scale 0.02 g.pgm a.pgm &&
    "$GC" -k '9 8 7; 6 5 4; 3 2 1' --correlate --no-normalize --scale 0.02 g.pgm b.pgm
result convolve-is-rotated-correlate "$(same a.pgm b.pgm)"

# Kernel files, with comments and blank lines, same as inline.
printf '# a binomial\n1 2 1\n\n2 4 2  # middle\n1 2 1\n' >k.txt
"$GEN" --seed 3 40 30 3 8 rgb.ppm
why=""
"$GC" -k @k.txt --normalize rgb.ppm a.ppm 2>err.txt || why="failed: $(head -c 200 err.txt)"
[ -z "$why" ] && { "$GC" -k '1 2 1; 2 4 2; 1 2 1' --normalize rgb.ppm b.ppm && why=$(same a.ppm b.ppm) || true; }
result kernel-file "$why"

# Chains stay in float: two 1/2 scalings give what one 1/4 scaling gives,
# which rounding to 8 bits in between would not.
"$GEN" --seed 4 31 17 1 8 gray.pgm
why=""
"$GC" --no-normalize -k 0.5 -k 0.5 gray.pgm chain.pgm 2>err.txt && "$GC" --no-normalize -k 0.25 gray.pgm one.pgm ||
    why="failed: $(head -c 200 err.txt)"
[ -z "$why" ] && { why=$(same chain.pgm one.pgm) || true; }
result chain-in-float "$why"

# Alpha: a transparent white pixel does not bleed into its opaque black
# neighbours with premultiply; with keep, alpha is unchanged; with include
# alpha is blurred too.
printf 'P7\nWIDTH 3\nHEIGHT 1\nDEPTH 2\nMAXVAL 255\nTUPLTYPE GRAYSCALE_ALPHA\nENDHDR\n' >ga.pam
bytes 255 0 0 255 0 255 >>ga.pam
for m in premultiply:"0 85 0 170 0 170" keep:"85 0 85 255 0 255" include:"85 85 85 170 0 170"; do
    mode=${m%%:*}
    want=${m#*:}
    if "$GC" -k '1 1 1' --no-normalize --scale 0.33333334 --border zero --alpha "$mode" ga.pam out.pam 2>err.txt; then
        got=$(payload out.pam 6)
        # premultiply: alpha is the box average (the sum over the gain, 3), unscaled.
        result "alpha-$mode" "$([ "$got" = "$want" ] || echo "got '$got', want '$want'")"
    else
        fail "alpha-$mode" "exit status $?: $(head -c 200 err.txt)"
    fi
done

# premultiply: a kernel's gain does not change alpha (a uniform 100 stays
# 100 through '1 1 1' and --scale); zero-sum kernels keep the input's alpha,
# so an opaque image stays opaque with --alpha keep's colours.
printf 'P7\nWIDTH 3\nHEIGHT 1\nDEPTH 4\nMAXVAL 255\nTUPLTYPE RGB_ALPHA\nENDHDR\n' >ra.pam
bytes 10 20 30 100 40 50 60 100 70 80 90 100 >>ra.pam
if "$GC" -k '1 1 1' --no-normalize --scale 0.3333 ra.pam out.pam 2>err.txt; then
    got=$(payload out.pam 12)
    want="20 30 40 100 40 50 60 100 60 70 80 100"
    result alpha-premultiply-gain "$([ "$got" = "$want" ] || echo "got '$got', want '$want'")"
else
    fail alpha-premultiply-gain "exit status $?: $(head -c 200 err.txt)"
fi
# An opaque 8x5 RGBA with colours all over the range.
printf 'P7\nWIDTH 8\nHEIGHT 5\nDEPTH 4\nMAXVAL 255\nTUPLTYPE RGB_ALPHA\nENDHDR\n' >opaque.pam
bytes $(for i in $(seq 0 39); do echo $((i * 37 % 256)) $((i * 91 % 256)) $((i * 13 % 256)) 255; done) >>opaque.pam
for k in sobel-x laplacian edge; do
    why=""
    "$GC" -k $k opaque.pam p.pam 2>err.txt && "$GC" -k $k --alpha keep opaque.pam q.pam ||
        why="failed: $(head -c 200 err.txt)"
    [ -z "$why" ] && { why=$(same p.pam q.pam) || true; }
    result "alpha-premultiply-zero-gain-$k" "$why"
done

# 16-bit and float stay 16-bit and float.
"$GEN" --seed 5 20 10 1 16 g16.pgm
"$GEN" --seed 6 20 10 3 32 f.pfm
why=""
"$GC" -k gaussian:1 g16.pgm o16.pgm 2>err.txt && "$GC" -k gaussian:1 f.pfm of.pfm || why="failed: $(head -c 200 err.txt)"
[ -z "$why" ] && { head -c 20 o16.pgm | grep -aq 65535 || why="16-bit output is not 16-bit"; }
[ -z "$why" ] && { [ "$(magic of.pfm 2)" = 5046 ] || why="float output is not PFM"; }
result types-kept "$why"

# Pipes: stdin to stdout, between two gconv processes.
why=""
"$GC" -k gaussian:1 - - <rgb.ppm | "$GC" -k sharpen - piped.ppm 2>err.txt || why="pipeline failed"
[ -z "$why" ] && { "$GC" -k gaussian:1 rgb.ppm t.ppm && "$GC" -k sharpen t.ppm direct.ppm && why=$(same piped.ppm direct.ppm) || true; }
result pipe "$why"

# Devices: --device cpu and auto agree.
why=""
"$GC" -k gaussian:2 --device cpu rgb.ppm c.ppm 2>err.txt && "$GC" -k gaussian:2 rgb.ppm a.ppm || why="failed"
[ -z "$why" ] && { why=$(same c.ppm a.ppm) || true; }
result device-cpu-auto "$why"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU' &&
    ! "$GC" --version | grep -q 'not built in'; then
    why=""
    "$GC" -k '1 -2 3; 4 5 -6' -k sobel --alpha keep --device gpu rgb.ppm g.ppm 2>err.txt &&
        "$GC" -k '1 -2 3; 4 5 -6' -k sobel --alpha keep --device cpu rgb.ppm c.ppm || why="failed: $(head -c 200 err.txt)"
    [ -z "$why" ] && { why=$(same g.ppm c.ppm) || true; }
    result device-gpu-same-as-cpu "$why"
fi
"$GC" -v -k box:1 rgb.ppm /dev/null 2>err.txt
result verbose "$(grep -q '^gconv: kernel 1: box:1, 3x3, separable' err.txt && grep -q 'backend' err.txt || echo "got: $(head -c 300 err.txt)")"

# ------------------------------------------------------------------ errors
mkdir -p e
mkfifo fifo
# Spec errors: exit 2, a message naming the problem, before any input is read.
spec_error() { # NAME SPEC WORD
    expect_fail "spec-$1" 2 e -- timeout 10 "$GC" -k "$2" fifo e/out.png
    grep -q -- "$3" stderr.txt || fail "spec-$1-message" "no '$3' in: $(head -c 200 stderr.txt)"
}
spec_error bad-number '1 2 x' "bad number 'x'"
spec_error ragged '1 2; 3' 'ragged rows'
spec_error double-comma '1,,2; 3 4 5' "a ',' with no number before it"
spec_error leading-comma ', 1 2' "a ',' with no number before it"
spec_error empty '' 'empty kernel'
spec_error empty-rows ' ; ' 'empty kernel'
spec_error unknown-name 'gauss:2' "unknown kernel 'gauss'"
spec_error missing-param 'box' 'needs a parameter'
spec_error bad-sigma 'gaussian:-1' 'out of range'
spec_error too-large 'gaussian:100' 'too large'
spec_error too-many-params 'sobel:3' 'takes no parameters'
printf '1 2\n3\n' >ragged.txt
spec_error file-ragged @ragged.txt 'ragged rows'
expect_fail spec-file-missing 1 e -- timeout 10 "$GC" -k @no-such-file.txt fifo e/out.png
grep -q "kernel file 'no-such-file.txt': " stderr.txt ||
    fail spec-file-missing-message "the file is not named: $(head -c 200 stderr.txt)"
: >empty.txt
spec_error file-empty @empty.txt 'empty kernel'
spec_error file-no-name @ 'no file name'
expect_fail usage-no-kernel 2 e -- timeout 10 "$GC" fifo e/out.png
expect_fail usage-bad-border 2 e -- timeout 10 "$GC" -k box:1 --border repeat fifo e/out.png
grep -qF "unknown mode 'repeat' (clamp, mirror, reflect, wrap, zero)" stderr.txt ||
    fail usage-bad-border-lists-modes "$(head -c 200 stderr.txt)"
expect_fail usage-bad-alpha 2 e -- timeout 10 "$GC" -k box:1 --alpha none fifo e/out.png
grep -qF "unknown mode 'none' (premultiply, keep, include)" stderr.txt ||
    fail usage-bad-alpha-lists-modes "$(head -c 200 stderr.txt)"
expect_fail usage-bad-scale 2 e -- timeout 10 "$GC" -k box:1 --scale x fifo e/out.png
expect_fail usage-bad-bias 2 e -- timeout 10 "$GC" -k box:1 --bias nan fifo e/out.png
expect_fail error-missing-input 1 e -- "$GC" -k box:1 missing.png e/out.png
printf 'not an image' >junk.png
expect_fail error-corrupt-input 1 e -- "$GC" -k box:1 junk.png e/out.png

# --help lists the options and the named kernels.
"$GC" --help >help.txt 2>&1
why=""
head -n 1 help.txt | grep -q '^Usage: gconv \[options\] INPUT \[OUTPUT\]$' || why="no usage line"
for w in --kernel --correlate --normalize --no-normalize --scale --bias --abs --border --alpha gaussian sobel-x; do
    [ -z "$why" ] && { grep -q -- "$w" help.txt || why="help lacks $w"; }
done
result help "$why"

# ------------------------------------------------------------ cross-checks
# An independent model in numpy (when some python3 has it): float images
# through gconv against direct sums over numpy's padding modes (edge,
# symmetric, reflect, wrap, constant are clamp, mirror, reflect, wrap,
# zero), for custom kernels odd and even, convolved and correlated, as
# written (--no-normalize) and divided by their sum (the default), flat
# lists, every named kernel from its documented definition, --normalize,
# --scale, --bias, --abs, a chain, and a 127x127 kernel file.
npy=""
for p in python3 /usr/bin/python3; do
    command -v "$p" >/dev/null 2>&1 && "$p" -c 'import numpy' 2>/dev/null && { npy=$p; break; }
done
if [ -n "$npy" ]; then
    why=$(GC="$GC" "$npy" - 2>&1 <<'PYEOF'
import os, subprocess
import numpy as np
GC = os.environ["GC"]
rng = np.random.default_rng(5)
def write_pfm(path, a):
    H, W, C = a.shape
    with open(path, "wb") as f:
        f.write(b"PF\n" if C == 3 else b"Pf\n")
        f.write(b"%d %d\n-1.0\n" % (W, H))
        f.write(np.ascontiguousarray(a[::-1]).astype("<f4").tobytes())
def read_pfm(path):
    head, dims, scale, data = open(path, "rb").read().split(b"\n", 3)
    W, H = map(int, dims.split())
    C = 3 if head == b"PF" else 1
    a = np.frombuffer(data, dtype="<f4" if float(scale) < 0 else ">f4").reshape(H, W, C)
    return a[::-1].astype(np.float64)
MODES = {"clamp": "edge", "mirror": "symmetric", "reflect": "reflect", "wrap": "wrap",
         "zero": "constant"}
def correlate(a, k, ax, ay, border):
    """out(x, y) = sum k[i][j] in(x + j - ax, y + i - ay), straight from the definition."""
    H, W, _ = a.shape
    p = max(k.shape) + 1
    b = np.pad(a, ((p, p), (p, p), (0, 0)), mode=MODES[border])
    out = np.zeros_like(a)
    for i in range(k.shape[0]):
        for j in range(k.shape[1]):
            out += k[i, j] * b[p + i - ay:p + i - ay + H, p + j - ax:p + j - ax + W]
    return out
def convolve(a, k, border):
    """True convolution: out(x, y) = sum k[i][j] in(x - (j - ax), y - (i - ay)),
    the anchor at the written kernel's centre, rounded up-left."""
    kh, kw = k.shape
    return correlate(a, k[::-1, ::-1], kw - 1 - (kw - 1) // 2, kh - 1 - (kh - 1) // 2, border)
bad = []
def check(name, args, a, want):
    write_pfm("np-in.pfm", a)
    r = subprocess.run([GC] + args + ["np-in.pfm", "np-out.pfm"], capture_output=True, text=True)
    if r.returncode:
        bad.append("%s: exit %d %s" % (name, r.returncode, r.stderr[:100]))
        return
    got = read_pfm("np-out.pfm")
    err = np.max(np.abs(got - want)) / (1 + np.max(np.abs(want)))
    if not err < 1e-5:
        bad.append("%s: relative error %.3g" % (name, err))
def spec_of(k):
    """Rows ended by ';', so that one row stays one row (not a flat list)."""
    return " ".join(" ".join("%g" % v for v in row) + ";" for row in k)
a = (rng.random((19, 23, 3)) * 100).astype(np.float32).astype(np.float64)
for kh, kw in [(3, 3), (1, 4), (4, 2), (5, 3), (2, 6), (9, 30), (25, 1)]:
    k = rng.integers(-5, 6, (kh, kw)).astype(np.float64)
    for border in MODES:
        check("correlate %dx%d %s" % (kh, kw, border),
              ["-k", spec_of(k), "--correlate", "--no-normalize", "--border", border],
              a, correlate(a, k, (kw - 1) // 2, (kh - 1) // 2, border))
        check("convolve %dx%d %s" % (kh, kw, border), ["-k", spec_of(k), "--no-normalize", "--border", border],
              a, convolve(a, k, border))
    # By default divided by the sum, unless it is 0.
    kn = k / k.sum() if k.sum() != 0 else k
    check("convolve %dx%d normalized" % (kh, kw), ["-k", spec_of(k)], a, convolve(a, kn, "clamp"))
# A flat list of n*n numbers is n x n, in the order written; other counts are one row.
for n in (2, 3, 4, 5):
    k = rng.integers(1, 9, (n, n)).astype(np.float64)
    flat = ",".join("%d" % v for v in k.ravel())
    check("flat %dx%d" % (n, n), ["-k", flat], a, convolve(a, k / k.sum(), "clamp"))
    check("flat %dx%d correlated" % (n, n), ["-k", flat.replace(",", " "), "--correlate"], a,
          correlate(a, k / k.sum(), (n - 1) // 2, (n - 1) // 2, "clamp"))
check("flat of 5 is a row", ["-k", "1 2 3 4 5", "--no-normalize"], a, convolve(a, np.array([[1, 2, 3, 4, 5.0]]), "clamp"))
check("zero sum kept", ["-k", "0.1 0.2 -0.3; 0.7 -0.4 -0.3"], a,
      convolve(a, np.array([[0.1, 0.2, -0.3], [0.7, -0.4, -0.3]]), "clamp"))
FIXED = {"sharpen": [[0, -1, 0], [-1, 5, -1], [0, -1, 0]], "laplacian": [[0, 1, 0], [1, -4, 1], [0, 1, 0]],
         "emboss": [[-2, -1, 0], [-1, 1, 1], [0, 1, 2]], "edge": [[-1, -1, -1], [-1, 8, -1], [-1, -1, -1]],
         "sobel-x": [[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]], "sobel-y": [[-1, -2, -1], [0, 0, 0], [1, 2, 1]],
         "scharr-x": [[-3, 0, 3], [-10, 0, 10], [-3, 0, 3]], "scharr-y": [[-3, -10, -3], [0, 0, 0], [3, 10, 3]],
         "prewitt-x": [[-1, 0, 1], [-1, 0, 1], [-1, 0, 1]], "prewitt-y": [[-1, -1, -1], [0, 0, 0], [1, 1, 1]]}
for name, k in FIXED.items():
    for extra in ([], ["--correlate"]):
        check(name + " " + " ".join(extra), ["-k", name, "--border", "reflect"] + extra, a,
              correlate(a, np.array(k, float), 1, 1, "reflect"))
for name in ("sobel", "scharr", "prewitt"):
    gx = correlate(a, np.array(FIXED[name + "-x"], float), 1, 1, "mirror")
    gy = correlate(a, np.array(FIXED[name + "-y"], float), 1, 1, "mirror")
    check(name, ["-k", name, "--border", "mirror"], a, np.sqrt(gx * gx + gy * gy))
def gauss(s, r):
    x = np.arange(-r, r + 1)
    g = np.exp(-x * x / (2.0 * s * s))
    return g / g.sum()
for s, r in [(2, None), (0.7, None), (1.5, 2)]:
    rr = int(np.ceil(3 * s)) if r is None else r
    spec = "gaussian:%g" % s + ("" if r is None else ":%d" % r)
    check(spec, ["-k", spec, "--border", "wrap"], a, correlate(a, np.outer(gauss(s, rr), gauss(s, rr)), rr, rr, "wrap"))
for R in (0, 1, 3):
    n = 2 * R + 1
    check("box:%d" % R, ["-k", "box:%d" % R], a, correlate(a, np.full((n, n), 1.0 / (n * n)), R, R, "clamp"))
for s, am in [(1, 1), (1.3, 0.5)]:
    r = int(np.ceil(3 * s))
    blur = correlate(a, np.outer(gauss(s, r), gauss(s, r)), r, r, "clamp")
    check("unsharp:%g:%g" % (s, am), ["-k", "unsharp:%g:%g" % (s, am)], a, a + am * (a - blur))
check("unsharp:1", ["-k", "unsharp:1"], a, 2 * a - correlate(a, np.outer(gauss(1, 3), gauss(1, 3)), 3, 3, "clamp"))
for s in (1, 1.4):
    r = int(np.ceil(3 * s))
    x = np.arange(-r, r + 1)
    X, Y = np.meshgrid(x, x)
    q = (X * X + Y * Y) / (2.0 * s * s)
    k = -1 / (np.pi * s ** 4) * (1 - q) * np.exp(-q)
    check("log:%g" % s, ["-k", "log:%g" % s], a, correlate(a, k - k.mean(), r, r, "clamp"))
check("scale-bias-abs", ["-k", "1 -2 0.5", "--correlate", "--no-normalize", "--scale", "0.5", "--bias", "-30", "--abs"], a,
      np.abs(correlate(a, np.array([[1, -2, 0.5]]), 1, 0, "clamp") * 0.5 - 30))
check("normalize", ["-k", "1 2; 3 4", "--correlate", "--normalize"], a,
      correlate(a, np.array([[1, 2], [3, 4]]) / 10.0, 0, 0, "clamp"))
check("chain", ["-k", "1 2 -1", "-k", "0.5;1;3;2", "--correlate", "--no-normalize", "--border", "reflect"], a,
      correlate(correlate(a, np.array([[1, 2, -1]]), 1, 0, "reflect"), np.array([[0.5], [1], [3], [2]]), 0, 1, "reflect"))
k = rng.integers(0, 10, (127, 127)).astype(np.float64)
with open("k127.txt", "w") as f:
    f.write("# a 127x127 kernel\n" + "\n".join(" ".join("%d" % v for v in row) for row in k) + "\n")
check("127x127 file", ["-k", "@k127.txt", "--no-normalize", "--border", "mirror"], a[..., :1],
      convolve(a[..., :1], k, "mirror"))
print("; ".join(bad[:5]))
PYEOF
)
    result numpy-model "$why"
else
    skip numpy-model "no python3 with numpy"
fi
if command -v vips >/dev/null 2>&1; then
    # vips conv with an integer mask and scale 1 sums exactly and clamps, as
    # we do; its edges are copied like --border clamp.
    "$GEN" --seed 8 97 61 3 8 v.ppm
    printf '3 3\n-1 -1 -1\n-1 9 -1\n-1 -1 -1\n' >m.mat
    why=""
    vips conv v.ppm vips.ppm m.mat --precision integer 2>err.txt || why="vips failed: $(head -c 200 err.txt)"
    [ -z "$why" ] && { "$GC" -k '-1 -1 -1; -1 9 -1; -1 -1 -1' v.ppm ours.ppm && why=$(same ours.ppm vips.ppm) || true; }
    result vips-conv-integer "$why"
else
    skip vips-conv-integer "vips is not installed"
fi
IM=convert
[ -x /usr/bin/convert ] && IM=/usr/bin/convert # /usr/local/bin may hold a stand-in
if command -v "$IM" >/dev/null 2>&1 && "$IM" -version 2>/dev/null | grep -q ImageMagick; then
    # ImageMagick's -morphology Convolve is true convolution: a kernel whose
    # only tap is at the bottom-left moves the image up and right, the same
    # as ours; a virtual-pixel edge is --border clamp.
    "$GEN" --seed 9 23 17 3 8 im.ppm
    why=""
    "$IM" im.ppm -virtual-pixel edge -morphology Convolve '3x3:0,0,0 0,0,0 1,0,0' im-out.ppm 2>err.txt ||
        why="convert failed: $(head -c 200 err.txt)"
    [ -z "$why" ] && { "$GC" -k '0 0 0; 0 0 0; 1 0 0' im.ppm gc-out.ppm && why=$(same gc-out.ppm im-out.ppm) || true; }
    result imagemagick-convolve "$why"
    # Even sizes and the borders ImageMagick has (edge, mirror, tile and
    # black are clamp, mirror, wrap and zero): integer kernels sum exactly
    # in both, so the 8-bit images must be identical.
    "$GEN" --seed 10 29 19 1 8 im.pgm
    for b in edge:clamp mirror:mirror tile:wrap black:zero; do
        for k in '4x3:1,-2,0,3 0,1,2,-1 1,0,0,-1' '2x2:1,2 -1,1' '1x6:1 0 0 0 0 0' '7x1:0,0,0,0,0,0,1'; do
            spec=$(printf '%s' "${k#*:}" | sed 's/ /;/g; s/,/ /g')
            [ "${k%%:*}" = 1x6 ] && spec='1;0;0;0;0;0'
            why=""
            "$IM" im.pgm -virtual-pixel "${b%%:*}" -define convolve:scale=1 -morphology Convolve "$k" \
                -depth 8 pgm:im-out.pgm 2>err.txt || why="convert failed: $(head -c 200 err.txt)"
            [ -z "$why" ] && { "$GC" -k "$spec" --no-normalize --border "${b#*:}" im.pgm gc-out.pgm &&
                why=$(same gc-out.pgm im-out.pgm) || true; }
            result "imagemagick-${b#*:}-${k%%:*}" "$why"
        done
    done
else
    skip imagemagick-convolve "ImageMagick is not installed"
fi

exit $failed
