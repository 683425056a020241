/*
 * equalize.c — histogram equalization (gimg_hist_equalize; the definition
 * is in gimg_hist.h). The histograms come from gimg_hist_compute on the
 * device the context chooses; the remapping tables are built and applied
 * here, on the CPU, with integer arithmetic (8/16-bit) or one fixed
 * sequence of double operations (float), so the image is the same
 * whichever device counted. Integer results lie in 0..maxval, the input's
 * (gimg_image_max), which the output keeps.
 */
#include "gimg_hist.h"
#include "hist_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { FLOAT_BINS = 65536 };

/* The table of one channel from its counts over every value (or bin):
 * map[v] = round((cdf(v) - cdf_min) / (n - cdf_min) * maxv), integer
 * samples; identity when the channel holds one value. */
static void int_table(const uint64_t *counts, int values, uint32_t maxv, uint32_t *map)
{
    uint64_t n = 0, cdf_min = 0;
    for (int v = 0; v < values; v++)
        n += counts[v];
    for (int v = 0; v < values && !cdf_min; v++)
        cdf_min = counts[v];
    const uint64_t den = n - cdf_min;
    uint64_t cdf = 0;
    for (int v = 0; v < values; v++) {
        cdf += counts[v];
        if (den == 0)
            map[v] = (uint32_t)v;
        else if (cdf < cdf_min)
            map[v] = 0;  /* below every sample present: never looked up */
        else  /* cdf - cdf_min <= 2^32 and maxv < 2^16: no overflow */
            map[v] = (uint32_t)(((cdf - cdf_min) * maxv * 2 + den) / (2 * den));
    }
}

/* Float: the same over FLOAT_BINS bins of [0, 1], values clamped in. */
static void float_table(const gimg_hist *h, int c, float *map)
{
    const uint64_t *counts = h->counts + (size_t)c * FLOAT_BINS;
#define COUNT_AT(b) (counts[b] + ((b) == 0 ? h->below[c] : 0) + \
                     ((b) == FLOAT_BINS - 1 ? h->above[c] : 0))
    uint64_t n = 0, cdf_min = 0;
    for (int b = 0; b < FLOAT_BINS; b++)
        n += COUNT_AT(b);
    for (int b = 0; b < FLOAT_BINS && !cdf_min; b++)
        cdf_min = COUNT_AT(b);
    uint64_t cdf = 0;
    for (int b = 0; b < FLOAT_BINS; b++) {
        cdf += COUNT_AT(b);
        map[b] = n == cdf_min ? NAN  /* one value: left as it is */
               : cdf < cdf_min ? 0.0f
                               : (float)((double)(cdf - cdf_min) / (double)(n - cdf_min));
    }
#undef COUNT_AT
}

static inline int float_bin(float v)
{
    /* The histogram's own slot function, the clamped ends folded in. */
    int s = gimg_hist_slot_of(v, 0.0, 1.0, 1.0, FLOAT_BINS, 1);
    return s == FLOAT_BINS + GIMG_HIST_SLOT_BELOW ? 0
         : s == FLOAT_BINS + GIMG_HIST_SLOT_ABOVE ? FLOAT_BINS - 1
                                                  : s;
}

static inline uint32_t clamp_add(uint32_t v, int64_t delta, uint32_t maxv)
{
    int64_t r = (int64_t)v + delta;
    return r < 0 ? 0 : r > (int64_t)maxv ? maxv : (uint32_t)r;
}

static inline float clamp01(float v)
{
    return v < 0 ? 0.0f : v > 1 ? 1.0f : v;
}

gimg_status gimg_hist_equalize(gimg_ctx *ctx, const gimg_image *in, int luma_only,
                               gimg_image *out)
{
    memset(out, 0, sizeof *out);
    const int C = in->channels, color = C >= 3;
    const int n_eq = color ? 3 : 1;               /* gray, or red green blue */
    luma_only = luma_only && color;
    gimg_hist_params p;
    gimg_hist_default_params(in, &p);
    const int is_float = in->sample == GIMG_F32;
    /* Every sample value its own bin (float: FLOAT_BINS over [0, 1]). */
    p.bins = is_float ? FLOAT_BINS : in->sample == GIMG_U8 ? 256 : 65536;
    if (!is_float)
        p.hi = p.bins;
    p.luma = luma_only;
    gimg_hist h;
    gimg_status st = gimg_hist_compute(ctx, in, &p, &h);
    if (st)
        return st;
    const int n_tables = luma_only ? 1 : n_eq;
    /* Results in the file's units: 0..maxval (gimg_image_max). */
    const uint32_t maxv = is_float ? 1 : gimg_image_max(in);
    uint32_t *imap = NULL;
    float *fmap = NULL;
    if (is_float)
        fmap = malloc(sizeof *fmap * FLOAT_BINS * n_tables);
    else
        imap = malloc(sizeof *imap * p.bins * n_tables);
    if ((!fmap && !imap) || (st = gimg_image_alloc(out, in->width, in->height, C, in->sample))) {
        free(fmap);
        free(imap);
        gimg_hist_free(&h);
        return st ? st : gimg_fail(GIMG_E_NOMEM, "out of memory");
    }
    for (int t = 0; t < n_tables; t++) {
        const int hc = luma_only ? C : t;  /* the luma channel follows the image's */
        if (is_float)
            float_table(&h, hc, fmap + (size_t)t * FLOAT_BINS);
        else
            int_table(h.counts + (size_t)hc * p.bins, p.bins, maxv, imap + (size_t)t * p.bins);
    }
    gimg_hist_free(&h);

    const int W = in->width;
    #pragma omp parallel for schedule(static) if ((size_t)in->width * in->height > 65536)
    for (int y = 0; y < in->height; y++) {
        const unsigned char *src = gimg_row(in, y);
        unsigned char *dst = gimg_row(out, y);
        memcpy(dst, src, (size_t)W * gimg_pixel_bytes(in));  /* alpha, and any unmapped */
        for (int x = 0; x < W; x++) {
            const size_t i = (size_t)x * C;
            if (is_float) {
                const float *s = (const float *)src + i;
                float *d = (float *)dst + i;
                if (luma_only) {
                    const float yv = gimg_luma_float(s[0], s[1], s[2]);
                    if (yv != yv)
                        continue;  /* NaN: the pixel stays */
                    const float ny = fmap[float_bin(yv)];
                    if (ny != ny)
                        continue;  /* one luma value: unchanged */
                    const float delta = ny - yv;
                    for (int c = 0; c < 3; c++)
                        d[c] = s[c] != s[c] ? s[c] : clamp01(s[c] + delta);
                } else {
                    for (int c = 0; c < n_eq; c++) {
                        const float m = s[c] == s[c] ? fmap[(size_t)c * FLOAT_BINS + float_bin(s[c])]
                                                     : s[c];
                        if (m == m)
                            d[c] = m;
                    }
                }
            } else if (in->sample == GIMG_U8) {
                const unsigned char *s = src + i;
                unsigned char *d = dst + i;
                if (luma_only) {
                    const uint32_t yv = gimg_luma_int(s[0], s[1], s[2]);
                    const int64_t delta = (int64_t)imap[yv] - yv;
                    for (int c = 0; c < 3; c++)
                        d[c] = (unsigned char)clamp_add(s[c], delta, maxv);
                } else {
                    for (int c = 0; c < n_eq; c++)
                        d[c] = (unsigned char)imap[c * 256 + s[c]];
                }
            } else {
                const uint16_t *s = (const uint16_t *)src + i;
                uint16_t *d = (uint16_t *)dst + i;
                if (luma_only) {
                    const uint32_t yv = gimg_luma_int(s[0], s[1], s[2]);
                    const int64_t delta = (int64_t)imap[yv] - yv;
                    for (int c = 0; c < 3; c++)
                        d[c] = (uint16_t)clamp_add(s[c], delta, maxv);
                } else {
                    for (int c = 0; c < n_eq; c++)
                        d[c] = (uint16_t)imap[(size_t)c * 65536 + s[c]];
                }
            }
        }
    }
    free(fmap);
    free(imap);
    out->maxval = is_float ? 0 : in->maxval;
    return GIMG_OK;
}
