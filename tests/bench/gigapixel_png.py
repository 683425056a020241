#!/usr/bin/env python3
"""tests/bench/gigapixel_png.py WIDTH HEIGHT OUT.png — a gray 8-bit PNG of
any size written a band of rows at a time (numpy for the rows, zlib for the
stream), so that making a 40000x40000 scan holds a few megabytes: the input
of cpu_large.sh's gigapixel runs (issue 32). The content is photo-like and
seeded: smooth shading, edges every few hundred pixels and grain, so that
it compresses about as a scan does (filter type 1, Sub, on every row)."""
import struct
import sys
import zlib

import numpy as np


def chunk(f, kind, data):
    f.write(struct.pack(">I", len(data)) + kind + data)
    f.write(struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def main():
    width, height, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    rng = np.random.default_rng(1)
    x = np.arange(width, dtype=np.float32)
    across = 60 * np.sin(0.0021 * x) + 25 * np.sin(0.013 * x + 1.0)
    edges = ((x // 331) % 3 == 0).astype(np.float32) * 40
    band = 256
    deflate = zlib.compressobj(1)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        chunk(f, b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
        for y0 in range(0, height, band):
            y = np.arange(y0, min(y0 + band, height), dtype=np.float32)[:, None]
            v = 128 + across * np.cos(0.0017 * y) + edges * ((y // 287) % 2)
            v += rng.integers(-6, 7, size=v.shape)
            rows = np.clip(v, 0, 255).astype(np.uint8)
            # Filter Sub: each byte minus the one before it, mod 256.
            sub = rows.copy()
            sub[:, 1:] = rows[:, 1:] - rows[:, :-1]
            raw = np.empty((rows.shape[0], width + 1), dtype=np.uint8)
            raw[:, 0] = 1
            raw[:, 1:] = sub
            data = deflate.compress(raw.tobytes())
            if data:
                chunk(f, b"IDAT", data)
        chunk(f, b"IDAT", deflate.flush())
        chunk(f, b"IEND", b"")


if __name__ == "__main__":
    main()
