/*
 * ssim_internal.h — what the SSIM passes share: lib/ssim.c (the CPU
 * reference and the CPU backend), kernels/ssim.cu (the GPU), the
 * differential test and the benchmarks.
 *
 * The definition (Wang et al. 2004, as scikit-image 0.19's
 * structural_similarity computes it with gaussian_weights=True, sigma=1.5,
 * use_sample_covariance=False, K1=0.01, K2=0.03, one channel at a time):
 *
 *   g(i) = exp(-i^2 / (2 sigma^2)) / sum_{j=-5..5} exp(-j^2 / (2 sigma^2)),
 *   i = -5..5 (11 taps: radius int(3.5 sigma + 0.5), scipy's truncate 3.5);
 *   E[f](x, y) = sum_{i,j} g(i) g(j) f(x + i, y + j), the Gaussian-weighted
 *   mean over the 11x11 window centred on (x, y);
 *   mx = E[a], my = E[b];
 *   vx + vy = E[a^2 + b^2] - mx^2 - my^2;  vxy = E[ab] - mx my;
 *   S(x, y) = (2 mx my + C1)(2 vxy + C2) / ((mx^2 + my^2 + C1)(vx + vy + C2)),
 *   C1 = (K1 R)^2, C2 = (K2 R)^2, R the data range.
 *
 * Only vx + vy enters S, so four moments suffice: E[a], E[b], E[a^2 + b^2]
 * and E[ab] (scikit-image filters a^2 and b^2 apart and adds the results:
 * the same value, up to rounding).
 *
 * In what order the CPU does its double operations (vx + vy taken as
 * E[a^2 + b^2] - (mx^2 + my^2), which makes S of an image against itself
 * exactly 1) is written once, in lib/ssim.c's head; kernels/ssim.cu says
 * how the GPU's float arithmetic differs and by how much.
 *
 * Borders: the channel's SSIM is the mean of S over the centres whose whole
 * window lies inside the image, x in 5 .. width-6, y in 5 .. height-6:
 * scikit-image filters with mode 'reflect' and then crops 5 pixels from
 * every side, which removes exactly the centres whose windows the
 * reflection reached, so no border rule enters the result. An image (or
 * region) narrower or lower than 11 pixels has no such centre: its SSIM is
 * NaN (scikit-image raises an error).
 *
 * R: the maxval (255, 65535, the file's own for PNM/PAM and sBIT, see
 * gimg_image_max), 1 for float images. S is unchanged when a, b and R are
 * all scaled by one factor, so a backend may compute on a / R and b / R
 * with R = 1. Float images holding NaN or infinities give NaN.
 */
#ifndef GIMG_SSIM_INTERNAL_H
#define GIMG_SSIM_INTERNAL_H

#include "gimg.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GIMG_SSIM_RADIUS 5 /* taps: 2 * 5 + 1 */
#define GIMG_SSIM_TAPS (2 * GIMG_SSIM_RADIUS + 1)
#define GIMG_SSIM_SIGMA 1.5
#define GIMG_SSIM_K1 0.01
#define GIMG_SSIM_K2 0.03

/* The 11 weights g(-5) .. g(5) in double, as scipy computes them:
 * exp(-0.5 / sigma^2 * i^2), then each divided by their sum. */
void gimg_ssim_weights(double w[GIMG_SSIM_TAPS]);

/* A pass's result: per channel, the sum of S over the valid centres, and
 * their count ((width - 10) * (height - 10), 0 when either is below 11).
 * The channel's SSIM is sum[c] / count. */
typedef struct {
    double sum[4];
    uint64_t count;
} gimg_ssim_sums;

/* The CPU passes over two images of the same size, channels (1-4) and
 * sample type (any strides; views allowed), with data range R (> 0).
 * _ref: the reference, written for clarity (whole-image moment planes, one
 * thread); _fast: the backend (rows in bands, vectorised, OpenMP). Both sum
 * S the same way: each row of centres left to right, from zero, then the
 * rows' sums in row order; and both compute S with the same double
 * operations in the same order, so their results are identical, bit for
 * bit, whatever the thread count. _fast returns GIMG_E_NOMEM (after
 * gimg_fail) when its buffers cannot be allocated; _ref likewise. */
gimg_status gimg_ssim_sums_ref(const gimg_image *a, const gimg_image *b, double range,
                               gimg_ssim_sums *out);
gimg_status gimg_ssim_sums_fast(const gimg_image *a, const gimg_image *b, double range,
                                gimg_ssim_sums *out);

#ifdef __cplusplus
}
#endif
#endif
