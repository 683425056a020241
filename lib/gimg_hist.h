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
 * for 8-bit, [0, 65536) for 16-bit, [0, 1] for float; no luma. An image
 * with its own maxval gets one bin per value up to maxval 255, else 256
 * bins of ceil((maxval + 1) / 256) values from 0. */
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
/* Adds part's counts to total's, for a histogram counted band by band
 * (the counts are exact: the sum is the whole image's histogram). A
 * total with no counts yet (zeroed) takes part's bins; otherwise the bins
 * must be the same (GIMG_E_USAGE). Errors: GIMG_E_NOMEM. */
gimg_status gimg_hist_add(gimg_hist *total, const gimg_hist *part);
void gimg_hist_free(gimg_hist *h);

/* ------------------------------------------------------------ equalization */

/*
 * Histogram equalization (ghist --equalize), written into *out (allocated
 * here, the caller frees it with gimg_image_free), same layout as in.
 *
 * Each equalized channel is remapped through its own cumulative histogram
 * over every sample value (256 values for 8-bit, 65536 for 16-bit; for
 * float, 65536 bins over [0, 1] with values outside clamped into the end
 * bins): with N counted samples, cdf(v) the number of samples <= v and
 * cdf_min that of the darkest value present,
 *     v' = round((cdf(v) - cdf_min) / (N - cdf_min) * max)
 * with max = 255, 65535, the image's maxval, or 1.0 (float results are not
 * rounded). A channel
 * with a single value is left as it is. NaN stays NaN.
 *
 * luma_only = 0: gray, red, green and blue are each equalized on their
 * own. luma_only = 1 (RGB images): the luma Y of each pixel (Rec. 709, as
 * the histograms count it) is equalized to Y', and Y' - Y is added to
 * red, green and blue (clamped to the sample range), which keeps the
 * pixel's chroma, hence its hue. Alpha is never changed.
 *
 * The histograms are counted on the device ctx chooses; the mapping is
 * exact integer (8/16-bit) or a fixed sequence of double operations
 * (float) on the CPU, so every device gives the same image.
 */
gimg_status gimg_hist_equalize(gimg_ctx *ctx, const gimg_image *in, int luma_only,
                               gimg_image *out);

/* ------------------------------------------------------------------ plots */

typedef struct {
    const char *title;       /* drawn above the plot (the file name); NULL for none */
    int width, height;       /* pixels; 0 for the default 800 x 480 */
    int cumulative;          /* plot running sums (with below) instead of counts */
    int normalize;           /* the y axis in fractions of the pixels instead of counts */
    uint64_t pixels;         /* the pixel count, for normalize */
} gimg_hist_plot_opts;

/* Draws channel c of h for every bit c of mask, each as a filled curve in
 * the colour its name says (names[c]: red, green, blue, gray, alpha or
 * luma), with axes, ticks, tick labels, a legend and the title, into an
 * RGB 8-bit image allocated here (the caller frees it). */
gimg_status gimg_hist_plot(const gimg_hist *h, unsigned mask, const char *const *names,
                           const gimg_hist_plot_opts *o, gimg_image *out);

/* ---------------------------------------------------------------- parsing */

/* Parses "LO:HI" (two finite decimal numbers, LO < HI) for --range. On
 * failure *lo and *hi are unchanged and the status is GIMG_E_USAGE. */
gimg_status gimg_hist_parse_range(const char *s, double *lo, double *hi);

#ifdef __cplusplus
}
#endif
#endif /* GIMG_HIST_H */
