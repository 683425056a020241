#!/usr/bin/python3
"""tests/ssim_skimage.py — scikit-image's SSIM of two raw images, per channel.

    ssim_skimage.py WIDTH HEIGHT CHANNELS DEPTH RANGE A.raw B.raw
    ssim_skimage.py --time A.ppm B.ppm

The first form (tests/unit_ssim.c's cross-check): A.raw and B.raw hold
HEIGHT rows of WIDTH pixels of CHANNELS interleaved samples, DEPTH 8
(uint8) or 16 (uint16, host byte order), no header. Prints one line per
channel: structural_similarity of that channel's plane, with
gaussian_weights=True, sigma=1.5, use_sample_covariance=False and
data_range=RANGE (Wang et al.'s definition as the issue asks), to 17
significant digits.

The second form (tests/bench/cpu_ssim.sh): reads two binary PPMs (P6,
maxval 255), times one call of structural_similarity(..., channel_axis=2)
on them (reading excluded) and prints "SECONDS MEAN_SSIM".

Exit status 77 when numpy or scikit-image is missing (the callers skip).
"""
import sys
import time

try:
    import numpy
    from skimage.metrics import structural_similarity
except ImportError:
    sys.exit(77)

OPTIONS = dict(gaussian_weights=True, sigma=1.5, use_sample_covariance=False)


def read_raw(path, width, height, channels, depth):
    dtype = numpy.uint8 if depth == 8 else numpy.uint16
    pixels = numpy.fromfile(path, dtype=dtype)
    if pixels.size != width * height * channels:
        sys.exit(f"{path}: {pixels.size} samples, expected {width * height * channels}")
    return pixels.reshape(height, width, channels)


def read_ppm(path):
    """A binary PPM (P6) of maxval 255 (its header may hold comments, as
    vips writes)."""
    with open(path, "rb") as f:
        data = f.read()
    fields, pos = [], 0
    while len(fields) < 4:
        while data[pos:pos + 1].isspace() or data[pos:pos + 1] == b"#":
            if data[pos:pos + 1] == b"#":
                pos = data.index(b"\n", pos)
            pos += 1
        start = pos
        while not data[pos:pos + 1].isspace():
            pos += 1
        fields.append(data[start:pos])
    pos += 1  # the one whitespace byte before the pixels
    if fields[0] != b"P6" or int(fields[3]) != 255:
        sys.exit(f"{path}: not an 8-bit binary PPM")
    width, height = int(fields[1]), int(fields[2])
    pixels = numpy.frombuffer(data, dtype=numpy.uint8, count=width * height * 3, offset=pos)
    return pixels.reshape(height, width, 3)


def main(args):
    if len(args) == 3 and args[0] == "--time":
        a, b = read_ppm(args[1]), read_ppm(args[2])
        t0 = time.perf_counter()
        value = structural_similarity(a, b, data_range=255, channel_axis=2, **OPTIONS)
        seconds = time.perf_counter() - t0
        print(f"{seconds:.4f} {value:.17g}")
        return 0
    if len(args) != 7:
        sys.exit(__doc__)
    width, height, channels, depth = (int(v) for v in args[:4])
    data_range = float(args[4])
    a = read_raw(args[5], width, height, channels, depth)
    b = read_raw(args[6], width, height, channels, depth)
    for c in range(channels):
        value = structural_similarity(a[:, :, c], b[:, :, c], data_range=data_range, **OPTIONS)
        print(f"{value:.17g}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
