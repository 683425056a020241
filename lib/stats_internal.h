/*
 * stats_internal.h — what lib/stats.c shares with the reduction kernels
 * (kernels/stats.cu), lib/compare.c, the differential test and the
 * benchmark: the raw sums
 * a pass over an image produces, before they become statistics.
 *
 * The structs are plain C, identical on both sides; a backend fills one,
 * and one host function (gimg_stats_finish, gimg_diff_finish) turns it into
 * the figures users see, so that whatever is exact in the sums is exact,
 * and identical, in the results.
 */
#ifndef GIMG_STATS_INTERNAL_H
#define GIMG_STATS_INTERNAL_H

#include "gimg_stats.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * --device auto and statistics: a statistics pass reads each byte once, so
 * the upload costs about what the CPU's whole pass does: on the H100
 * machine (16 cores), the moments and exact histogram of 8192x8192 RGB took
 * 19-44 ms on the CPU and 22-28 ms on the GPU with its upload from pageable
 * memory, 6.8 ms through pinned staging; 6.2 against 2.5 ms at 4096x4096,
 * about even at 1024x1024 (tests/bench/bench_stats, "end to end"), with
 * CUDA already started. CUDA's start-up (0.2 to 0.4 s) is more than the GPU
 * saves on any single image of common size, so the cost table (cost.h,
 * whose defaults these figures are) keeps statistics on the CPU but for
 * images of gigabytes, or few threads; --device gpu still uses the GPU.
 */

/*
 * Float sums are accumulated block by block: a block is a run of whole rows
 * of about this many samples, summed left to right from zero; the blocks'
 * sums are then added in row order. The blocks depend on the image's width
 * alone, never on the thread count, so every run gives the same doubles.
 *
 * They are sums of d = v - K and d^2 (in double), K being the channel's
 * shift (gimg_moments_shift): a sample of the channel itself, so the sums
 * are of deviations of the data's own size, and the variance,
 * S2/n - (S1/n)^2, loses nothing to cancellation however far the data lie
 * from zero (sums of v and v^2 lose the variance's leading digits when the
 * mean is large against the spread: 1000 +- 0.01 kept two digits).
 */
#define GIMG_STATS_FLOAT_BLOCK_SAMPLES 16384
static inline int gimg_stats_block_rows(int width, int channels)
{
    long long per_row = (long long)width * channels;
    long long r = GIMG_STATS_FLOAT_BLOCK_SAMPLES / per_row;
    return r < 1 ? 1 : (int)r;
}

/* The raw moments of each channel (c < channels; other entries zero). */
typedef struct {
    uint64_t count[4];            /* samples counted (float: finite ones) */
    uint64_t nan[4], inf[4];      /* float: left out */
    uint64_t isum[4], isumsq[4];  /* 8/16-bit: exact sums of v and v^2 */
    double shift[4];              /* float: K, the shift of the sums (else 0) */
    double fsum[4], fsumsq[4];    /* float: sums of v - K and (v - K)^2 in double */
    double min[4], max[4];        /* +inf / -inf when count is 0 */
} gimg_moments;

/* The raw sums of a comparison, per channel. */
typedef struct {
    uint64_t count[4];            /* pairs in the sums (float: both finite) */
    uint64_t differing[4];
    uint64_t pixels_differing;    /* pixels with any channel differing */
    uint64_t isum_abs[4], isum_sq[4]; /* 8/16-bit: exact sums of |d| and d^2 */
    double fsum_abs[4], fsum_sq[4];   /* float: in double */
    double max_abs[4];            /* 0 when count is 0 */
} gimg_diff_sums;

/* The shift K of each channel's float sums: its first finite sample in
 * row-major order (0 for a channel without one, and for 8/16-bit images).
 * Every backend takes the sums about these K (the GPU's launcher is given
 * them), so that they sum the same deviations. Stops at the first pixels
 * that give every channel one (it reads the whole image only when some
 * channel has no finite sample). */
void gimg_moments_shift(const gimg_image *im, double shift[4]);

/* The CPU passes. _ref: plain loops, one thread (the reference); _fast:
 * the backend (vectorised, OpenMP). Both give identical sums. */
void gimg_moments_ref(const gimg_image *im, gimg_moments *m);
void gimg_moments_fast(const gimg_image *im, gimg_moments *m);
void gimg_diff_sums_ref(const gimg_image *a, const gimg_image *b, gimg_diff_sums *d);
void gimg_diff_sums_fast(const gimg_image *a, const gimg_image *b, gimg_diff_sums *d);

/* Raw sums to statistics, for the image's channels and "all". Sets count,
 * nan, inf, min, max, sum, mean and stddev (order statistics untouched). */
void gimg_stats_finish(const gimg_moments *m, int channels, gimg_sample sample,
                       gimg_stats *out);
void gimg_diff_finish(const gimg_diff_sums *d, int channels, gimg_sample sample,
                      gimg_diff *out);

/* Checks an image against the limits of exact 64-bit sums. */
gimg_status gimg_stats_check(const gimg_image *im);

#ifdef __cplusplus
}
#endif
#endif
