/*
 * gimg_hist.h — histograms (ghist; also behind gstats' median, percentiles
 * and entropy).
 *
 * Counts are exact 64-bit integers, identical on the CPU and the GPU. Bins
 * have equal width over [lo, hi); for float images the top edge is closed
 * ([lo, hi]), so that 1.0 lands in the last bin of the default [0, 1].
 * Samples outside the range are counted in below/above, NaN in nan, so
 * that for every channel  sum(counts) + below + above + nan == pixels.
 *
 * Ownership: gimg_hist_compute() allocates out->counts; gimg_hist_free()
 * releases it (a zeroed gimg_hist may be freed).
 */
#ifndef GIMG_HIST_H
#define GIMG_HIST_H

#include "gimg.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GIMG_HIST_MAX_BINS 65536
/* The image's channels plus luma. */
#define GIMG_HIST_MAX_CHANNELS 5

typedef struct {
    int bins;        /* 1 .. GIMG_HIST_MAX_BINS */
    double lo, hi;   /* lo < hi */
    int luma;        /* 1: count a luminance channel after the image's own */
} gimg_hist_params;

typedef struct {
    int channels;    /* counted channels: the image's, then luma if asked */
    int bins;
    double lo, hi;
    uint64_t *counts; /* counts[c * bins + b] */
    uint64_t below[GIMG_HIST_MAX_CHANNELS], above[GIMG_HIST_MAX_CHANNELS],
        nan[GIMG_HIST_MAX_CHANNELS];
} gimg_hist;

/* The defaults for im: 256 bins over the sample type's full range, [0, 256)
 * for 8-bit, [0, 65536) for 16-bit, [0, 1] for float; no luma. */
void gimg_hist_default_params(const gimg_image *im, gimg_hist_params *p);

/* Counts im (any stride: a region is a view into a larger image) on the
 * backend ctx chooses. With bins equal to the width of an integer range
 * (256 over [0, 256) for 8-bit, 65536 over [0, 65536) for 16-bit) bin b
 * holds exactly the samples of value lo + b. */
gimg_status gimg_hist_compute(gimg_ctx *ctx, const gimg_image *im, const gimg_hist_params *p,
                              gimg_hist *out);
/* The CPU reference (and fallback). */
gimg_status gimg_hist_compute_cpu(const gimg_image *im, const gimg_hist_params *p,
                                  gimg_hist *out);
void gimg_hist_free(gimg_hist *h);

#ifdef __cplusplus
}
#endif
#endif /* GIMG_HIST_H */
