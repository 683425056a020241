/*
 * gimg_stats.h — per-channel statistics and image comparison (gstats).
 *
 * Exactness. 8- and 16-bit images are summed in 64-bit integers, so count,
 * min, max, sum, mean, stddev, median, percentiles and entropy are the same
 * on the CPU and the GPU, bit for bit, and from run to run: mean and stddev
 * are computed on the host from the exact integer sums by one function
 * whichever backend produced them. Float images are accumulated in double
 * precision in a fixed order (fixed blocks, combined in a fixed tree), so
 * results repeat from run to run; the CPU and the GPU use different orders
 * and agree to 1e-12 relative. NaN and infinities are counted apart and
 * left out of every other statistic.
 *
 * Order statistics (median, percentiles, entropy) of 8/16-bit images come
 * from the exact histogram (gimg_hist.h, one bin per sample value); of float
 * images, from a sorted copy of the finite samples (always on the CPU).
 *
 * Ownership: nothing here allocates memory the caller must free; results
 * are plain structs.
 */
#ifndef GIMG_STATS_H
#define GIMG_STATS_H

#include "gimg.h"

#ifdef __cplusplus
extern "C" {
#endif

/* -------------------------------------------------------------- regions */

/* A rectangle of pixels: width x height at column x, row y. */
typedef struct {
    int width, height;
    int x, y;
} gimg_region;

/* Parses ImageMagick's geometry "WxH+X+Y" (also "WxH", offset 0; each
 * offset "+N" or "-N"): W and H are 1 .. GIMG_MAX_DIMENSION, offsets at
 * most that in magnitude. Anything else is GIMG_E_USAGE; *r is unchanged
 * then. */
gimg_status gimg_parse_region(const char *s, gimg_region *r);

/* Clips r to a width x height image, as ImageMagick's -crop does (the part
 * of the rectangle inside the image remains). *out receives the clipped
 * rectangle. A rectangle with no pixel inside the image is GIMG_E_LIMIT,
 * with a message giving both. */
gimg_status gimg_region_clip(const gimg_region *r, int width, int height, gimg_region *out);

/* A view of the rectangle r (already clipped) of im: shares im's pixels and
 * stride, owns nothing (never pass it to gimg_image_free). */
void gimg_image_view(const gimg_image *im, const gimg_region *r, gimg_image *view);

/* ---------------------------------------------------------- percentiles */

#define GIMG_STATS_MAX_PERCENTILES 32

/* A percentile p, 0 <= p <= 100, with at most 6 decimals, held exactly. */
typedef struct {
    uint32_t millionths; /* p * 10^6 */
    char name[16];       /* its canonical text: "5", "99.9" */
} gimg_percentile;

/* Parses one percentile ("5", "99.9", "100"); "what" names the option in
 * the message. GIMG_E_USAGE for anything else (signs, exponents, more than
 * 6 decimals, over 100). */
gimg_status gimg_parse_percentile(const char *what, const char *s, gimg_percentile *p);

/* The nearest rank of p among n samples: the smallest k >= 1 such that at
 * least p% of the n samples are among the first k, i.e. ceil(p * n / 100)
 * computed exactly (1 for p = 0). n must be >= 1. */
uint64_t gimg_percentile_rank(const gimg_percentile *p, uint64_t n);

/* ---------------------------------------------------------- statistics */

/* The image's channels, then "all" (every sample of every channel). */
#define GIMG_STATS_MAX_CHANNELS 5

typedef struct {
    uint64_t count;      /* samples in the statistics (float: the finite ones) */
    uint64_t nan, inf;   /* float only: NaN and +-infinity samples, left out */
    /* In sample units. With count == 0 (a float channel of NaN and
     * infinities only) every value below is NaN. */
    double min, max, sum, mean, stddev; /* stddev: population (divides by count) */
    /* Only when order statistics were asked for (gimg_stats_opts.order): */
    double median;       /* the 50th percentile, nearest rank (the lower median) */
    double entropy;      /* Shannon entropy of the sample values, in bits */
    double percentile[GIMG_STATS_MAX_PERCENTILES]; /* as gimg_stats_opts.percentiles */
} gimg_channel_stats;

typedef struct {
    int order;            /* 1: also median, entropy and the percentiles */
    int n_percentiles;    /* 0 .. GIMG_STATS_MAX_PERCENTILES */
    gimg_percentile percentiles[GIMG_STATS_MAX_PERCENTILES];
} gimg_stats_opts;

typedef struct {
    int channels;         /* the image's; ch[channels] is "all" */
    gimg_sample sample;
    gimg_channel_stats ch[GIMG_STATS_MAX_CHANNELS];
} gimg_stats;

/*
 * Entropy: H = -sum p_v log2 p_v over the distinct sample values v, p_v the
 * fraction of the counted samples equal to v. For 8/16-bit images that is
 * over the exact histogram (at most 8 or 16 bits); for float images over
 * the distinct finite values (-0 and +0 are one value), so a float image
 * holding the values of an 8-bit one has the same entropy.
 */

/* Computes the statistics of im (a whole image or a view) on the backend
 * ctx chooses. 16-bit images of more than 2^32 pixels are GIMG_E_LIMIT (the
 * sums of squares would not fit 64 bits). */
gimg_status gimg_stats_compute(gimg_ctx *ctx, const gimg_image *im, const gimg_stats_opts *o,
                               gimg_stats *out);
/* The CPU reference: plain loops, one thread. Same results as
 * gimg_stats_compute on the CPU, bit for bit. */
gimg_status gimg_stats_compute_cpu(const gimg_image *im, const gimg_stats_opts *o,
                                   gimg_stats *out);

/*
 * The statistics of an image too large to hold, given band by band
 * (gimg(7) LARGE IMAGES): begin with the whole image's layout (size,
 * channels, sample; no pixels), add its rows in order in bands of any
 * height, end with the statistics, which are gimg_stats_compute's on the
 * CPU, bit for bit: integer sums are exact in any order, and float sums
 * are taken in the same blocks of rows and added in the same order (the
 * rows of a block that two bands share are carried from one to the next:
 * at most GIMG_STATS_FLOAT_BLOCK_SAMPLES samples). Order statistics of
 * float samples need every sample at once: begin refuses them
 * (GIMG_E_USAGE); read such images whole. gimg_stats_end frees acc
 * whether or not out is given (NULL: only free, after a failure); it
 * fails when fewer rows were added than the image has.
 */
typedef struct gimg_stats_acc gimg_stats_acc;
gimg_status gimg_stats_begin(const gimg_image *layout, const gimg_stats_opts *o,
                             gimg_stats_acc **acc);
gimg_status gimg_stats_add(gimg_stats_acc *acc, const gimg_image *band);
gimg_status gimg_stats_end(gimg_stats_acc *acc, gimg_stats *out);

/* ----------------------------------------------------------- comparison */

typedef struct {
    uint64_t count;      /* sample pairs in the figures below (float: both finite) */
    uint64_t differing;  /* pairs that differ (float: NaN equals NaN; -0 equals +0) */
    uint64_t pixels_differing; /* "all": pixels with any channel differing (as
                          * ImageMagick's AE); a channel's row: as differing */
    double max_abs;      /* the largest |a - b| */
    double mae, mse, rmse; /* mean absolute and mean squared error, its root */
    double psnr;         /* 10 log10(peak^2 / mse) dB; +inf when mse is 0 */
    double ssim;         /* mean SSIM (lib/ssim_internal.h; gimg_compare_opts.ssim);
                          * "all": the mean of the channels' (scikit-image's
                          * channel_axis rule); NaN when not computed, when the
                          * image is under 11 pixels on a side, or when float
                          * samples hold NaN or infinities */
} gimg_channel_diff;

/* How gimg_compare brought the two images to one layout (bits of
 * gimg_diff.adjusted). */
enum {
    GIMG_COMPARE_SCALED_REF = 1,   /* the reference's samples were scaled up */
    GIMG_COMPARE_SCALED_IM = 2,    /* the input's were */
    GIMG_COMPARE_ALPHA_DROPPED = 4, /* an all-opaque alpha was left out */
    GIMG_COMPARE_ALPHA_ADDED = 8,  /* the side without alpha got an opaque one */
    GIMG_COMPARE_PROMOTED = 16,    /* gray was compared as RGB */
};

typedef struct {
    int channels;        /* the compared layout's; ch[channels] is "all" */
    gimg_sample sample;  /* the reference's */
    double peak;         /* the reference's maxval (gimg_image_max): 255, 65535,
                          * the file's, or 1 */
    unsigned adjusted;   /* GIMG_COMPARE_* bits; 0 when the layouts were equal */
    gimg_channel_diff ch[GIMG_STATS_MAX_CHANNELS];
} gimg_diff;

typedef struct {
    int ssim;            /* 1: also compute SSIM (else ch[].ssim is NaN) */
    int promote;         /* 1: compare gray (+alpha) against RGB (+alpha) as RGB */
    /* When not NULL: receives |ref - im| per sample, in the compared layout
     * (its channels; the finer sample type of the two, the maxval they were
     * compared at; no metadata). Allocated here; the caller frees it with
     * gimg_image_free(). Float: |a - b| in float (NaN where either is NaN
     * or both are one infinity). */
    gimg_image *diff_image;
} gimg_compare_opts;

/*
 * Compares im against the reference ref (both whole images or views), on
 * the backend ctx chooses. o may be NULL (no SSIM, no difference image, no
 * promotion).
 *
 * Layouts: the sizes must be equal. Integer samples of different maxvals
 * are compared when one maxval is a multiple k of the other (8-bit against
 * 16-bit: k = 257): the samples of the smaller range are multiplied by k,
 * exactly, and the figures are then given on the reference's scale (|d|
 * divided by k when the reference was the one scaled; PSNR and SSIM do not
 * change with the scale). Other maxvals, and float against integer, are
 * GIMG_E_FORMAT, as netpbm's pnmpsnr refuses them. An alpha channel on
 * one side only is left out when every one of its samples is the maxval
 * (fully opaque: compares as no alpha), else the other side gets an opaque
 * alpha and the alpha channels are compared. Gray against RGB is
 * GIMG_E_FORMAT unless o->promote, which compares gray as RGB (each gray
 * sample taken for red, green and blue).
 *
 * Differences of 8/16-bit samples are exact integers; of float samples,
 * computed in double (pairs with a NaN or an infinity count as differing
 * when they differ, and are left out of the other figures). Every figure
 * but SSIM is identical on the CPU and the GPU (float sums: to 1e-12
 * relative, as the statistics' are); SSIM: see lib/ssim_internal.h and
 * kernels/ssim.cu for the GPU's bound.
 */
gimg_status gimg_compare(gimg_ctx *ctx, const gimg_image *ref, const gimg_image *im,
                         const gimg_compare_opts *o, gimg_diff *out);
/* The CPU reference: plain loops, one thread. Same results as gimg_compare
 * on the CPU, bit for bit. */
gimg_status gimg_compare_cpu(const gimg_image *ref, const gimg_image *im,
                             const gimg_compare_opts *o, gimg_diff *out);

/* ----------------------------------------------------------- thresholds */

/* The comparison's figures by name, in gstats' column order. */
typedef enum {
    GIMG_METRIC_COUNT, GIMG_METRIC_DIFFERING, GIMG_METRIC_PIXELS_DIFFERING, GIMG_METRIC_MAXDIFF,
    GIMG_METRIC_MAE, GIMG_METRIC_MSE, GIMG_METRIC_RMSE, GIMG_METRIC_PSNR, GIMG_METRIC_SSIM,
    GIMG_METRIC_N
} gimg_metric;
/* "count", "differing", "pixels_differing", "maxdiff", "mae", "mse", "rmse",
 * "psnr", "ssim", then NULL. */
extern const char *const gimg_metric_names[];

typedef enum { GIMG_OP_LT, GIMG_OP_LE, GIMG_OP_GT, GIMG_OP_GE, GIMG_OP_EQ, GIMG_OP_NE } gimg_op;
/* "<", "<=", ">", ">=", "==", "!=". */
extern const char *const gimg_op_names[];

/* A threshold of gstats --fail-if: "[CHANNEL.]METRIC OP NUMBER". */
typedef struct {
    char channel[8];     /* "gray", "red", "green", "blue", "alpha" or "all" (the default) */
    gimg_metric metric;
    gimg_op op;
    double value;        /* finite, or +-inf */
} gimg_threshold;

/* Parses expr ("psnr<40", "red.maxdiff >= 2", "ssim<0.99"; spaces around
 * the operator allowed, "=" read as "=="; NUMBER as strtod reads it, NaN
 * refused). GIMG_E_USAGE with a message naming expr otherwise; *t is then
 * unspecified. */
gimg_status gimg_parse_threshold(const char *expr, gimg_threshold *t);
/* Whether value is beyond t: t's comparison holds, or value is NaN (a
 * figure that could not be computed is never within a threshold). */
int gimg_threshold_broken(const gimg_threshold *t, double value);

#ifdef __cplusplus
}
#endif
#endif /* GIMG_STATS_H */
