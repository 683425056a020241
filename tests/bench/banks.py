#!/usr/bin/env python3
"""banks.py — a shared-memory bank-conflict model of kernels/transpose.cu.

For a tile shape it replays, warp by warp, the shared-memory accesses of the
kernel's two phases (the load phase's 4-byte stores of 16-byte words, and
the store phase's gathers, per word for pixel sizes dividing 16 or through a
window of whole pixels for 3, 6 and 12 bytes) and prints the wavefronts per
access relative to a conflict-free warp (1.0 = no conflict). The shapes in
shape_of() were shortlisted with it and then timed (tests/bench/tune_transpose.cu).

    tests/bench/banks.py E ROWS COLS PAD SPREAD(0|1) [--flat]
"""
import math
import sys


def gcd16(e):
    return next(u for u in (16, 8, 4, 2, 1) if e % u == 0)


def wavefronts(addrs, width):
    """Wavefronts of one warp-wide access: per group of lanes served together,
    the most distinct 4-byte words that fall in one bank."""
    per = 32 if width <= 4 else 16 if width == 8 else 8
    total = 0
    for g in range(0, 32, per):
        banks = {}
        for a in addrs[g:g + per]:
            if a is None:
                continue
            for w in range(a // 4, (a + width - 1) // 4 + 1):
                banks.setdefault(w % 32, set()).add(w)
        total += max((len(s) for s in banks.values()), default=0)
    return total


def model(E, rows, cols, pad, spread, transpose, rev_rows, rev_cols, shift):
    G = gcd16(E)
    U = 4 if (spread and G > 4) else G
    row_words = cols * E // 16
    src_rows, src_cols = (cols, rows) if transpose else (rows, cols)
    load_words = src_cols * E // 16 + 1
    word = 20 if spread else 16
    srow = load_words * word + pad
    place = (lambda x: x + 4 * (x >> 4)) if spread else (lambda x: x)

    load = 0
    n = src_rows * load_words
    for base in range(0, n, 32):
        for part in range(4):
            addrs = [None if base + l >= n else
                     (base + l) // load_words * srow + word * ((base + l) % load_words) + 4 * part
                     for l in range(32)]
            load += wavefronts(addrs, 4)

    def unit(ir, q, b):
        q = min(q, cols - 1)
        along = cols - 1 - q if (rev_rows if transpose else rev_cols) else q
        fixed = (rows - 1 - ir) if (rev_cols if transpose else rev_rows) else ir
        lrow, lcol = (along, fixed) if transpose else (fixed, along)
        return lrow * srow + place(shift + lcol * E + b)

    # The units each word reads, as (pixel offset from q0, byte) pairs.
    if 16 % E == 0:
        units = [(k * U // E, k * U % E) for k in range(16 // U)]
    else:
        P = math.ceil((16 + E - G) / E)
        units = [(p, b) for p in range(P) for b in range(0, E, U)]
    gather = 0
    n = rows * row_words
    for base in range(0, n, 32):
        for dq, b in units:
            addrs = []
            for l in range(32):
                if base + l >= n:
                    addrs.append(None)
                    continue
                ir, w = divmod(base + l, row_words)
                addrs.append(unit(ir, 16 * w // E + dq, b))
            gather += wavefronts(addrs, U)
    ideal_load = src_rows * load_words * 4 / 32
    ideal_gather = rows * row_words * len(units) / 32 * max(1, U // 4)
    return load / ideal_load, gather / ideal_gather


def main():
    if len(sys.argv) < 6:
        print(__doc__)
        return 2
    E, rows, cols, pad, spread = (int(a) for a in sys.argv[1:6])
    for transpose in (True, False):
        worst_load = worst_gather = 0
        for rr in (0, 1):
            for rc in (0, 1):
                for shift in sorted({0, (5 * E) % 16 - (5 * E) % 16 % gcd16(E)}):
                    l, g = model(E, rows, cols, pad, bool(spread), transpose, rr, rc, shift)
                    worst_load, worst_gather = max(worst_load, l), max(worst_gather, g)
        print(f"E={E} {rows}x{cols} pad {pad} spread {spread} "
              f"{'transposing' if transpose else 'row-wise'}: load {worst_load:.2f}, "
              f"gather {worst_gather:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
