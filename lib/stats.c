/*
 * stats.c — per-channel statistics: the CPU reference, the fast CPU backend,
 * the GPU dispatch, and what turns raw sums into statistics on every
 * backend (gimg_stats_finish). Comparison is lib/compare.c.
 *
 * 8/16-bit: sums of v and v^2 in 64-bit integers (exact). When the order
 * statistics are asked for, the exact histogram (one bin per value) is
 * counted anyway, and the moments follow from it exactly, so the fast CPU
 * path and the GPU make one pass instead of two.
 * Float: double sums of v - K and (v - K)^2, K a sample of the channel
 * (gimg_moments_shift), in fixed blocks of rows (stats_internal.h), the
 * blocks added in row order; the reference and the fast path use the same
 * blocks and give the same doubles. The shift keeps the variance clear of
 * the cancellation of sum v^2 - sum v * mean.
 */
#include "gimg_stats.h"
#include "gimg_hist.h"
#include "ctx_internal.h"
#include "remote.h"
#include "hist_internal.h"
#include "stats_internal.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* -------------------------------------------------------------- regions */

/* Reads a run of digits as a value up to max; returns the characters read
 * (0 if none, or if the value is over max). */
/* The digits at s: their count (0: none), *v their value, and *too_big
 * set when it passes max (the digits are read all the same). */
static int read_uint(const char *s, long long max, long long *v, int *too_big)
{
    long long x = 0;
    int n = 0;
    while (s[n] >= '0' && s[n] <= '9') {
        if (x <= max)
            x = x * 10 + (s[n] - '0');
        n++;
    }
    if (x > max)
        *too_big = 1;
    *v = x;
    return n;
}

/* A well-formed geometry with a number out of range is said so ("offset
 * ... is out of range"), not called something other than a geometry. */
gimg_status gimg_parse_region(const char *s, gimg_region *r)
{
    const long long lim = GIMG_MAX_DIMENSION;
    long long w, h, x = 0, y = 0;
    int size_too_big = 0, offset_too_big = 0;
    const char *p = s;
    int n;
    if (!(n = read_uint(p, lim, &w, &size_too_big)))
        goto bad;
    p += n;
    if (*p != 'x' && *p != 'X')
        goto bad;
    p++;
    if (!(n = read_uint(p, lim, &h, &size_too_big)))
        goto bad;
    p += n;
    if (*p) {
        long long *off[2] = {&x, &y};
        for (int i = 0; i < 2; i++) {
            int sign = *p == '+' ? 1 : *p == '-' ? -1 : 0;
            if (!sign || !(n = read_uint(p + 1, lim, off[i], &offset_too_big)))
                goto bad;
            *off[i] *= sign;
            p += 1 + n;
        }
        if (*p)
            goto bad;
    }
    if (size_too_big || w < 1 || h < 1)
        return gimg_fail(GIMG_E_USAGE, "--region: the size in '%s' is out of range (1 to %d "
                                       "pixels a side)", s, GIMG_MAX_DIMENSION);
    if (offset_too_big)
        return gimg_fail(GIMG_E_USAGE, "--region: an offset in '%s' is out of range (-%d to "
                                       "+%d)", s, GIMG_MAX_DIMENSION, GIMG_MAX_DIMENSION);
    r->width = (int)w;
    r->height = (int)h;
    r->x = (int)x;
    r->y = (int)y;
    return GIMG_OK;
bad:
    return gimg_fail(GIMG_E_USAGE,
                     "--region: '%s' is not a geometry WxH+X+Y (e.g. 100x50+10+20)", s);
}

gimg_status gimg_region_clip(const gimg_region *r, int width, int height, gimg_region *out)
{
    long long x0 = r->x > 0 ? r->x : 0, y0 = r->y > 0 ? r->y : 0;
    long long x1 = (long long)r->x + r->width, y1 = (long long)r->y + r->height;
    if (x1 > width)
        x1 = width;
    if (y1 > height)
        y1 = height;
    if (x1 <= x0 || y1 <= y0)
        return gimg_fail(GIMG_E_LIMIT, "region %dx%d%+d%+d lies outside the %dx%d image",
                         r->width, r->height, r->x, r->y, width, height);
    out->x = (int)x0;
    out->y = (int)y0;
    out->width = (int)(x1 - x0);
    out->height = (int)(y1 - y0);
    return GIMG_OK;
}

void gimg_image_view(const gimg_image *im, const gimg_region *r, gimg_image *view)
{
    *view = *im;
    view->width = r->width;
    view->height = r->height;
    view->data = gimg_row(im, r->y) + (size_t)r->x * gimg_pixel_bytes(im);
}

/* ---------------------------------------------------------- percentiles */

gimg_status gimg_parse_percentile(const char *what, const char *s, gimg_percentile *p)
{
    uint64_t whole = 0, frac = 0;
    int nw = 0, nf = 0;
    const char *q = s;
    for (; *q >= '0' && *q <= '9' && nw < 4; q++, nw++)
        whole = whole * 10 + (uint64_t)(*q - '0');
    if (*q == '.') {
        for (q++; *q >= '0' && *q <= '9' && nf < 7; q++, nf++)
            frac = frac * 10 + (uint64_t)(*q - '0');
        if (nf == 0)
            nw = 0; /* "5." is not accepted */
    }
    if (nw == 0 || *q || nf > 6)
        return gimg_fail(GIMG_E_USAGE, "%s: '%s' is not a percentile (0 to 100, at most 6 "
                                       "decimals)", what, s);
    for (int i = nf; i < 6; i++)
        frac *= 10;
    uint64_t m = whole * 1000000 + frac;
    if (m > 100000000)
        return gimg_fail(GIMG_E_USAGE, "%s: '%s' is over 100", what, s);
    p->millionths = (uint32_t)m;
    int len = snprintf(p->name, sizeof p->name, "%u", (unsigned)(m / 1000000));
    if (m % 1000000) {
        char digits[8];
        snprintf(digits, sizeof digits, "%06u", (unsigned)(m % 1000000));
        for (int i = 5; digits[i] == '0'; i--)
            digits[i] = '\0';
        snprintf(p->name + len, sizeof p->name - (size_t)len, ".%s", digits);
    }
    return GIMG_OK;
}

uint64_t gimg_percentile_rank(const gimg_percentile *p, uint64_t n)
{
    unsigned __int128 t = (unsigned __int128)p->millionths * n;
    uint64_t k = (uint64_t)((t + 100000000 - 1) / 100000000);
    return k < 1 ? 1 : k;
}

/* ------------------------------------------------------- moments: helpers */

static void moments_init(gimg_moments *m)
{
    memset(m, 0, sizeof *m);
    for (int c = 0; c < 4; c++) {
        m->min[c] = INFINITY;
        m->max[c] = -INFINITY;
    }
}

/* Adds part into total, channel by channel (float sums: total + part, so
 * adding blocks in order fixes the order of the additions; both are about
 * the same shift, which stays the total's). */
static void moments_add(gimg_moments *t, const gimg_moments *p)
{
    for (int c = 0; c < 4; c++) {
        t->count[c] += p->count[c];
        t->nan[c] += p->nan[c];
        t->inf[c] += p->inf[c];
        t->isum[c] += p->isum[c];
        t->isumsq[c] += p->isumsq[c];
        t->fsum[c] += p->fsum[c];
        t->fsumsq[c] += p->fsumsq[c];
        if (p->min[c] < t->min[c])
            t->min[c] = p->min[c];
        if (p->max[c] > t->max[c])
            t->max[c] = p->max[c];
    }
}

void gimg_moments_shift(const gimg_image *im, double shift[4])
{
    for (int c = 0; c < 4; c++)
        shift[c] = 0;
    if (im->sample != GIMG_F32)
        return;
    const int C = im->channels;
    const size_t n = (size_t)im->width * (size_t)C;
    int found[4] = {0}, missing = C;
    for (int y = 0; y < im->height && missing; y++) {
        const float *row = (const float *)gimg_row(im, y);
        for (size_t i = 0; i < n && missing; i++) {
            const int c = (int)(i % (size_t)C);
            if (!found[c] && isfinite(row[i])) {
                shift[c] = row[i];
                found[c] = 1;
                missing--;
            }
        }
    }
}

/* Rows [y0, y1) of an image, sample by sample: the reference, and the float
 * blocks of the fast path. Float sums are about m->shift. */
static void moments_rows(const gimg_image *im, int y0, int y1, gimg_moments *m)
{
    const int C = im->channels;
    const size_t n = (size_t)im->width * (size_t)C;
    for (int y = y0; y < y1; y++) {
        const unsigned char *row = gimg_row(im, y);
        for (size_t i = 0; i < n; i++) {
            const int c = (int)(i % (size_t)C);
            double v;
            if (im->sample == GIMG_F32) {
                float f = ((const float *)row)[i];
                if (isnan(f)) {
                    m->nan[c]++;
                    continue;
                }
                if (isinf(f)) {
                    m->inf[c]++;
                    continue;
                }
                v = f;
                const double d = v - m->shift[c];
                m->fsum[c] += d;
                m->fsumsq[c] += d * d;
            } else {
                uint64_t u = im->sample == GIMG_U8 ? row[i] : ((const uint16_t *)row)[i];
                m->isum[c] += u;
                m->isumsq[c] += u * u;
                v = (double)u;
            }
            m->count[c]++;
            if (v < m->min[c])
                m->min[c] = v;
            if (v > m->max[c])
                m->max[c] = v;
        }
    }
}

void gimg_moments_ref(const gimg_image *im, gimg_moments *m)
{
    moments_init(m);
    gimg_moments_shift(im, m->shift);
    /* Floats block by block (stats_internal.h); integers are exact in any
     * order, and go through the same loop. */
    const int rows = gimg_stats_block_rows(im->width, im->channels);
    for (int y = 0; y < im->height; y += rows) {
        gimg_moments part;
        moments_init(&part);
        memcpy(part.shift, m->shift, sizeof part.shift);
        moments_rows(im, y, y + rows < im->height ? y + rows : im->height, &part);
        moments_add(m, &part);
    }
}

/* ---------------------------------------------- moments: fast CPU backend */

/*
 * 8/16-bit rows as a stream of samples in groups of 48: 48 is a multiple
 * of every channel count (1-4), so lane j of a group always holds channel
 * j % C, and a loop over the 48 lanes with per-lane accumulators
 * vectorises whatever the layout (RGB included). Lanes are folded into
 * channels at the end. Sums of squares of 8-bit lanes stay in 32 bits for
 * at most 4096 groups (4096 * 65025 < 2^32) before they are flushed.
 */
enum { LANES = 48, FLUSH_GROUPS = 4096 };

typedef struct {
    uint64_t sum[LANES], sq[LANES];
    uint32_t mn[LANES], mx[LANES];
} lane_acc;

static void lane_acc_init(lane_acc *a)
{
    memset(a, 0, sizeof *a);
    for (int j = 0; j < LANES; j++)
        a->mn[j] = UINT32_MAX;
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define GIMG_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define GIMG_CLONES
#endif

GIMG_CLONES static void lanes_u8(const uint8_t *p, size_t groups, lane_acc *a)
{
    while (groups) {
        size_t g = groups < FLUSH_GROUPS ? groups : FLUSH_GROUPS;
        uint32_t s[LANES] = {0}, q[LANES] = {0};
        uint8_t mn[LANES], mx[LANES];
        memset(mn, 0xff, sizeof mn);
        memset(mx, 0, sizeof mx);
        for (size_t k = 0; k < g; k++, p += LANES) {
#pragma omp simd
            for (int j = 0; j < LANES; j++) {
                uint32_t v = p[j];
                s[j] += v;
                q[j] += v * v;
                mn[j] = p[j] < mn[j] ? p[j] : mn[j];
                mx[j] = p[j] > mx[j] ? p[j] : mx[j];
            }
        }
        for (int j = 0; j < LANES; j++) {
            a->sum[j] += s[j];
            a->sq[j] += q[j];
            if (mn[j] < a->mn[j])
                a->mn[j] = mn[j];
            if (mx[j] > a->mx[j])
                a->mx[j] = mx[j];
        }
        groups -= g;
    }
}

GIMG_CLONES static void lanes_u16(const uint16_t *p, size_t groups, lane_acc *a)
{
    while (groups) {
        size_t g = groups < FLUSH_GROUPS ? groups : FLUSH_GROUPS;
        uint32_t s[LANES] = {0};
        uint64_t q[LANES] = {0};
        uint16_t mn[LANES], mx[LANES];
        memset(mn, 0xff, sizeof mn);
        memset(mx, 0, sizeof mx);
        for (size_t k = 0; k < g; k++, p += LANES) {
#pragma omp simd
            for (int j = 0; j < LANES; j++) {
                uint32_t v = p[j];
                s[j] += v;
                q[j] += (uint64_t)(v * v);
                mn[j] = p[j] < mn[j] ? p[j] : mn[j];
                mx[j] = p[j] > mx[j] ? p[j] : mx[j];
            }
        }
        for (int j = 0; j < LANES; j++) {
            a->sum[j] += s[j];
            a->sq[j] += q[j];
            if (mn[j] < a->mn[j])
                a->mn[j] = mn[j];
            if (mx[j] > a->mx[j])
                a->mx[j] = mx[j];
        }
        groups -= g;
    }
}

static void lanes_rows(const gimg_image *im, int y0, int y1, lane_acc *a)
{
    const size_t n = (size_t)im->width * (size_t)im->channels;
    const size_t groups = n / LANES;
    for (int y = y0; y < y1; y++) {
        const unsigned char *row = gimg_row(im, y);
        if (im->sample == GIMG_U8)
            lanes_u8(row, groups, a);
        else
            lanes_u16((const uint16_t *)row, groups, a);
        /* The tail: sample i goes to lane i % 48, still channel i % C. */
        for (size_t i = groups * LANES; i < n; i++) {
            uint32_t v = im->sample == GIMG_U8 ? row[i] : ((const uint16_t *)row)[i];
            int j = (int)(i % LANES);
            a->sum[j] += v;
            a->sq[j] += (uint64_t)v * v;
            if (v < a->mn[j])
                a->mn[j] = v;
            if (v > a->mx[j])
                a->mx[j] = v;
        }
    }
}

static void lanes_to_moments(const lane_acc *a, int C, uint64_t pixels, gimg_moments *m)
{
    for (int j = 0; j < LANES; j++) {
        int c = j % C;
        m->isum[c] += a->sum[j];
        m->isumsq[c] += a->sq[j];
        if (a->mn[j] < m->min[c])
            m->min[c] = a->mn[j];
        if (a->mx[j] > m->max[c])
            m->max[c] = a->mx[j];
    }
    for (int c = 0; c < C; c++)
        m->count[c] = pixels;
}

/* Adds the float sums of im's blocks (whole blocks of rows from its first
 * row, the last one possibly short) to m, in row order: computed in
 * parallel, added in order; about m's shift. */
static void float_blocks(const gimg_image *im, gimg_moments *m)
{
    const int H = im->height;
    const size_t samples = (size_t)im->width * H * im->channels;
    const int rows = gimg_stats_block_rows(im->width, im->channels);
    const int blocks = (H + rows - 1) / rows;
    gimg_moments *parts = malloc((size_t)blocks * sizeof *parts);
    #pragma omp parallel for schedule(static) if (parts && samples > 262144)
    for (int b = 0; b < blocks; b++) {
        /* No memory for the partial sums: the same sums, a block at a time. */
        gimg_moments one, *part = parts ? &parts[b] : &one;
        int y = b * rows;
        moments_init(part);
        memcpy(part->shift, m->shift, sizeof m->shift);
        moments_rows(im, y, y + rows < H ? y + rows : H, part);
        if (!parts)
            moments_add(m, part);
    }
    for (int b = 0; parts && b < blocks; b++)
        moments_add(m, &parts[b]);
    free(parts);
}

void gimg_moments_fast(const gimg_image *im, gimg_moments *m)
{
    moments_init(m);
    const int H = im->height;
    const size_t samples = (size_t)im->width * H * im->channels;
    if (im->sample != GIMG_F32) {
        #pragma omp parallel if (samples > 262144)
        {
            lane_acc a;
            lane_acc_init(&a);
            #pragma omp for schedule(static)
            for (int y = 0; y < H; y++)
                lanes_rows(im, y, y + 1, &a);
            gimg_moments part;
            moments_init(&part);
            lanes_to_moments(&a, im->channels, 0, &part);
            #pragma omp critical
            moments_add(m, &part);
        }
        for (int c = 0; c < im->channels; c++)
            m->count[c] = (uint64_t)im->width * (uint64_t)H;
        return;
    }
    /* Float: the reference's blocks (about the same shift). */
    gimg_moments_shift(im, m->shift);
    float_blocks(im, m);
}

/* ------------------------------------------------------ moments: finish */

static double nan_if_empty(uint64_t n, double v)
{
    return n ? v : NAN;
}

void gimg_stats_finish(const gimg_moments *m, int C, gimg_sample sample, gimg_stats *out)
{
    out->channels = C;
    out->sample = sample;
    /* "all" as a fifth channel: integer sums in 128 bits (four channels of
     * 16-bit squares can pass 2^64); float channels merged below. */
    unsigned __int128 isum[5] = {0}, isumsq[5] = {0};
    double mn[5], mx[5];
    uint64_t count[5] = {0}, nan[5] = {0}, inf[5] = {0};
    mn[C] = INFINITY;
    mx[C] = -INFINITY;
    for (int c = 0; c < C; c++) {
        isum[c] = m->isum[c];
        isumsq[c] = m->isumsq[c];
        count[c] = m->count[c];
        nan[c] = m->nan[c];
        inf[c] = m->inf[c];
        mn[c] = m->min[c];
        mx[c] = m->max[c];
        isum[C] += isum[c];
        isumsq[C] += isumsq[c];
        count[C] += count[c];
        nan[C] += nan[c];
        inf[C] += inf[c];
        if (mn[c] < mn[C])
            mn[C] = mn[c];
        if (mx[c] > mx[C])
            mx[C] = mx[c];
    }
    /*
     * Float: channel c's sums S1, S2 are of d = v - K_c. Its mean is
     * K_c + S1/n and n times its variance M2 = S2 - S1 * S1/n, both free of
     * cancellation while K_c lies near the data. "All" merges the channels
     * (Chan et al.) in channel order about K0, the shift of the first
     * channel with samples: dm_c = (K_c - K0) + S1/n is the channel's mean
     * less K0, dm = sum n_c dm_c / N the image's, and
     * M2 = sum (M2_c + n_c (dm_c - dm)^2).
     */
    double fsum[5] = {0}, fmean[5] = {0}, dmean[5] = {0}, m2[5] = {0};
    if (sample == GIMG_F32) {
        double k0 = 0;
        int have_k0 = 0;
        for (int c = 0; c < C; c++) {
            const uint64_t n = count[c];
            if (!n)
                continue;
            if (!have_k0) {
                k0 = m->shift[c];
                have_k0 = 1;
            }
            const double s1 = m->fsum[c], s2 = m->fsumsq[c], d1 = s1 / (double)n;
            fsum[c] = m->shift[c] * (double)n + s1;
            fmean[c] = m->shift[c] + d1;
            m2[c] = s2 - s1 * d1;
            if (!(m2[c] > 0))
                m2[c] = 0;
            dmean[c] = (m->shift[c] - k0) + d1;
            fsum[C] += fsum[c];
            dmean[C] += (double)n * dmean[c];
        }
        if (count[C])
            dmean[C] /= (double)count[C];
        for (int c = 0; c < C; c++)
            if (count[c]) {
                const double dd = dmean[c] - dmean[C];
                m2[C] += m2[c] + (double)count[c] * dd * dd;
            }
        fmean[C] = k0 + dmean[C];
    }
    for (int c = 0; c <= C; c++) {
        gimg_channel_stats *s = &out->ch[c];
        const uint64_t n = count[c];
        s->count = n;
        s->nan = nan[c];
        s->inf = inf[c];
        /* + 0.0 turns a -0 minimum or maximum into +0, whichever zero the
         * backend met first. */
        s->min = nan_if_empty(n, mn[c] + 0.0);
        s->max = nan_if_empty(n, mx[c] + 0.0);
        if (!n) {
            s->sum = 0;
            s->mean = s->stddev = NAN;
            continue;
        }
        if (sample == GIMG_F32) {
            s->sum = fsum[c];
            s->mean = fmean[c];
            s->stddev = sqrt(m2[c] / (double)n);
        } else {
            /* Exact: sum < 2^53 converts without rounding; n * sumsq - sum^2
             * is n^2 times the variance, an exact non-negative integer. */
            s->sum = (double)isum[c];
            s->mean = s->sum / (double)n;
            unsigned __int128 d = (unsigned __int128)n * isumsq[c] - isum[c] * isum[c];
            s->stddev = sqrt((double)d) / (double)n;
        }
    }
}

gimg_status gimg_stats_check(const gimg_image *im)
{
    uint64_t pixels = (uint64_t)im->width * (uint64_t)im->height;
    if (im->sample == GIMG_U16 && pixels > ((uint64_t)1 << 32))
        return gimg_fail(GIMG_E_LIMIT, "%dx%d: a 16-bit image of more than 2^32 pixels is "
                                       "beyond exact 64-bit sums", im->width, im->height);
    if (im->channels < 1 || im->channels > 4)
        return gimg_fail(GIMG_E_FORMAT, "%d channels: 1 to 4 are supported", im->channels);
    return GIMG_OK;
}

/* ------------------------------------------------------ order statistics */

/* Entropy, -sum p log2 p over the counts of the distinct values, summed with
 * Neumaier's compensation: thousands of terms (65536 for 16-bit) then lose
 * no more than a rounding or two. */
typedef struct {
    double sum, carry;
} entropy_acc;

static void entropy_add(entropy_acc *a, uint64_t c, uint64_t n)
{
    if (!c)
        return;
    double p = (double)c / (double)n, term = -p * log2(p);
    double t = a->sum + term;
    a->carry += fabs(a->sum) >= fabs(term) ? (a->sum - t) + term : (term - t) + a->sum;
    a->sum = t;
}

static double entropy_value(const entropy_acc *a)
{
    return a->sum + a->carry + 0.0;
}

/* Median, percentiles and entropy of one channel's exact histogram (bin b
 * holds the samples equal to b). */
static void order_from_counts(const uint64_t *counts, int bins, const gimg_stats_opts *o,
                              gimg_channel_stats *s)
{
    const uint64_t n = s->count;
    entropy_acc h = {0, 0};
    for (int b = 0; b < bins; b++)
        entropy_add(&h, counts[b], n);
    s->entropy = entropy_value(&h);
    gimg_percentile half = {50000000, "50"};
    for (int i = -1; i < o->n_percentiles; i++) {
        uint64_t k = gimg_percentile_rank(i < 0 ? &half : &o->percentiles[i], n), cum = 0;
        int b = 0;
        while (b < bins - 1 && (cum += counts[b]) < k)
            b++;
        if (i < 0)
            s->median = b;
        else
            s->percentile[i] = b;
    }
}

static void order_from_hist(const gimg_hist *h, const gimg_stats_opts *o, gimg_stats *out)
{
    const int C = out->channels, bins = h->bins;
    uint64_t *all = calloc((size_t)bins, sizeof *all);
    for (int c = 0; c < C; c++) {
        const uint64_t *cnt = h->counts + (size_t)c * bins;
        order_from_counts(cnt, bins, o, &out->ch[c]);
        if (all)
            for (int b = 0; b < bins; b++)
                all[b] += cnt[b];
    }
    if (all)
        order_from_counts(all, bins, o, &out->ch[C]);
    free(all);
}

/* The moments of an exact histogram: the same integers a pass over the
 * samples gives. */
static void moments_from_hist(const gimg_hist *h, gimg_moments *m)
{
    moments_init(m);
    for (int c = 0; c < h->channels; c++) {
        const uint64_t *cnt = h->counts + (size_t)c * h->bins;
        for (int b = 0; b < h->bins; b++) {
            if (!cnt[b])
                continue;
            if (m->count[c] == 0)
                m->min[c] = b;
            m->max[c] = b;
            m->count[c] += cnt[b];
            m->isum[c] += (uint64_t)b * cnt[b];
            m->isumsq[c] += (uint64_t)b * (uint64_t)b * cnt[b];
        }
    }
}

static void exact_hist_params(const gimg_image *im, gimg_hist_params *p)
{
    p->bins = im->sample == GIMG_U8 ? 256 : 65536;
    p->lo = 0;
    p->hi = p->bins;
    p->luma = 0;
}

/* Float order statistics: the finite samples as sortable keys (the bits of
 * a float, flipped so that unsigned order is numeric order), radix-sorted;
 * the k-th smallest is then keys[k - 1], and runs of equal keys are the
 * distinct values for the entropy. */
static uint32_t float_key(float f)
{
    uint32_t u;
    if (f == 0)
        f = 0; /* -0 and +0: one value */
    memcpy(&u, &f, 4);
    return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}

static float key_float(uint32_t k)
{
    uint32_t u = (k & 0x80000000u) ? k & 0x7fffffffu : ~k;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* LSD radix sort, 8 bits a pass; passes where every key has the same digit
 * are skipped. The result is in *a (the buffers may be swapped). */
static void radix_sort(uint32_t **a, uint32_t **tmp, size_t n)
{
    for (int shift = 0; shift < 32; shift += 8) {
        size_t cnt[256] = {0};
        for (size_t i = 0; i < n; i++)
            cnt[((*a)[i] >> shift) & 255]++;
        if (cnt[((*a)[0] >> shift) & 255] == n)
            continue;
        size_t pos = 0;
        for (int d = 0; d < 256; d++) {
            size_t c = cnt[d];
            cnt[d] = pos;
            pos += c;
        }
        for (size_t i = 0; i < n; i++)
            (*tmp)[cnt[((*a)[i] >> shift) & 255]++] = (*a)[i];
        uint32_t *t = *a;
        *a = *tmp;
        *tmp = t;
    }
}

static void order_from_sorted(const uint32_t *keys, uint64_t n, const gimg_stats_opts *o,
                              gimg_channel_stats *s)
{
    if (!n) {
        s->median = s->entropy = NAN;
        for (int i = 0; i < o->n_percentiles; i++)
            s->percentile[i] = NAN;
        return;
    }
    entropy_acc h = {0, 0};
    for (uint64_t i = 0; i < n;) {
        uint64_t j = i + 1;
        while (j < n && keys[j] == keys[i])
            j++;
        entropy_add(&h, j - i, n);
        i = j;
    }
    s->entropy = entropy_value(&h);
    gimg_percentile half = {50000000, "50"};
    s->median = key_float(keys[gimg_percentile_rank(&half, n) - 1]);
    for (int i = 0; i < o->n_percentiles; i++)
        s->percentile[i] = key_float(keys[gimg_percentile_rank(&o->percentiles[i], n) - 1]);
}

static gimg_status order_float(const gimg_image *im, const gimg_stats_opts *o, gimg_stats *out)
{
    const int C = im->channels;
    uint64_t n_all = 0, n[4];
    for (int c = 0; c < C; c++)
        n_all += n[c] = out->ch[c].count;
    /* keys: each channel's keys one after the other, then all of them merged. */
    uint32_t *keys = malloc((size_t)(2 * n_all + 1) * sizeof *keys);
    uint32_t *tmp = malloc((size_t)(n_all + 1) * sizeof *tmp);
    if (!keys || !tmp) {
        free(keys);
        free(tmp);
        return gimg_fail(GIMG_E_NOMEM, "out of memory for the sorted samples (%llu)",
                         (unsigned long long)n_all);
    }
    uint32_t *start[4];
    uint64_t fill[4] = {0};
    start[0] = keys;
    for (int c = 1; c < C; c++)
        start[c] = start[c - 1] + n[c - 1];
    const size_t per_row = (size_t)im->width * C;
    for (int y = 0; y < im->height; y++) {
        const float *row = (const float *)gimg_row(im, y);
        for (size_t i = 0; i < per_row; i++) {
            int c = (int)(i % (size_t)C);
            if (isfinite(row[i]))
                start[c][fill[c]++] = float_key(row[i]);
        }
    }
    uint32_t *merged = keys + n_all;
    #pragma omp parallel for schedule(dynamic) if (n_all > 262144)
    for (int c = 0; c < C; c++) {
        uint32_t *a = start[c], *t = tmp + (start[c] - keys);
        radix_sort(&a, &t, n[c]);
        if (a != start[c])
            memcpy(start[c], a, n[c] * sizeof *a);
    }
    for (int c = 0; c < C; c++)
        order_from_sorted(start[c], n[c], o, &out->ch[c]);
    /* "all": a C-way merge of the sorted channels. */
    uint64_t at[4] = {0};
    for (uint64_t i = 0; i < n_all; i++) {
        int best = -1;
        for (int c = 0; c < C; c++)
            if (at[c] < n[c] && (best < 0 || start[c][at[c]] < start[best][at[best]]))
                best = c;
        merged[i] = start[best][at[best]++];
    }
    order_from_sorted(merged, n_all, o, &out->ch[C]);
    free(keys);
    free(tmp);
    return GIMG_OK;
}

/* ----------------------------------------------------------------- GPU */

#ifdef GIMG_HAVE_CUDA
#include "gpu_internal.h"
#include "histogram.h"
#include "stats.h"

/*
 * One upload, then one pass over the device image: when h is given, the
 * exact histogram of a (the histogram kernel, one bin per value), from
 * which the caller takes the moments as the CPU does (a second pass for them cost as much again: the full pass
 * ran at 0.42-0.46 of a copy for 8-bit images, the histogram alone at
 * 0.79-0.89); or else the moments of a, whose float sums are about the
 * shifts the CPU takes (gimg_moments_shift, from the host image). The
 * results come back. Device scratch: the reduction's (zeroed, as the kernel
 * expects), its result, the histogram's counters (which its kernel clears).
 */
static gimg_status gpu_pass(gimg_ctx *ctx, gimg_gpu *g, const gimg_image *a, void *out,
                            size_t out_bytes, gimg_hist *h)
{
    gimg_dimage d_a;
    gimg_status st;
    double t0 = gimg_now_ms();
    if ((st = gimg_gpu_image(g, 0, a->width, a->height, a->channels, a->sample, &d_a)) ||
        (st = gimg_gpu_upload(g, a, &d_a)))
        return st;
    unsigned *d_sync = NULL;
    if (h && (st = gimg_gpu_hist_sync(g, &d_sync)))
        return st;
    const size_t scratch = gimg_cuda_stats_scratch_bytes();
    const size_t out_room = (out_bytes + 255) & ~(size_t)255;
    const int bins = a->sample == GIMG_U8 ? 256 : 65536;
    const size_t slots_per_channel = (size_t)bins + 3; /* the bins, below, above, NaN */
    const size_t hist_bytes = h ? (size_t)a->channels * slots_per_channel * 8 : 0;
    unsigned long long *h_slots = h ? malloc(hist_bytes) : NULL;
    if (h && !h_slots)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    unsigned char *d_scratch = NULL;
    cudaError_t e = cudaMalloc((void **)&d_scratch, scratch + out_room + hist_bytes);
    void *d_out = d_scratch + scratch;
    unsigned long long *d_counts = (unsigned long long *)(d_scratch + scratch + out_room);
    const int reduce = !h;
    if (!e && reduce)
        e = cudaMemsetAsync(d_scratch, 0, scratch, g->stream);
    if (!e)
        e = cudaEventRecord(g->ev_start, g->stream);
    double shift[4] = {0};
    if (reduce)
        gimg_moments_shift(a, shift);
    if (!e && reduce)
        e = gimg_cuda_moments(d_a.d_data, d_a.pitch_bytes, a->width, a->height, a->channels,
                              (int)a->sample, shift, d_scratch, d_out, 0, g->stream);
    if (!e && h) {
        gimg_cuda_hist_map map = {0};
        map.mode = GIMG_CUDA_HIST_IDENT;
        map.bins = bins;
        map.hi = bins;
        e = gimg_cuda_hist(d_a.d_data, d_a.pitch_bytes, a->width, a->height, a->channels,
                           (int)a->sample, &map, d_counts, d_sync, g->stream);
    }
    if (!e)
        e = cudaEventRecord(g->ev_stop, g->stream);
    if (!e && reduce)
        e = cudaMemcpyAsync(out, d_out, out_bytes, cudaMemcpyDeviceToHost, g->stream);
    if (!e && h)
        e = cudaMemcpyAsync(h_slots, d_counts, hist_bytes, cudaMemcpyDeviceToHost, g->stream);
    if (!e)
        e = cudaStreamSynchronize(g->stream);
    float kernel_ms = 0;
    if (!e)
        e = cudaEventElapsedTime(&kernel_ms, g->ev_start, g->ev_stop);
    cudaFree(d_scratch);
    if (!e && h) {
        memset(h, 0, sizeof *h);
        h->channels = a->channels;
        h->bins = bins;
        h->hi = bins;
        h->counts = malloc((size_t)a->channels * bins * sizeof *h->counts);
        if (!h->counts)
            st = gimg_fail(GIMG_E_NOMEM, "out of memory");
        for (int c = 0; !st && c < a->channels; c++)
            for (int k = 0; k < bins; k++)
                h->counts[(size_t)c * bins + k] = h_slots[(size_t)c * slots_per_channel + k];
    }
    free(h_slots);
    if (e)
        return gimg_fail(gimg_cuda_status(e), "CUDA error: statistics pass: %s",
                         cudaGetErrorString(e));
    if (!st)
        gimg_ctx_add_gpu_times(ctx, kernel_ms, gimg_now_ms() - t0 - kernel_ms);
    return st;
}
#endif

/* ------------------------------------------------------------- dispatch */

static gimg_status stats_common(gimg_ctx *ctx, const gimg_image *im, const gimg_stats_opts *o,
                                gimg_stats *out, int reference)
{
    gimg_status st = gimg_stats_check(im);
    if (st)
        return st;
    memset(out, 0, sizeof *out);
    gimg_moments m;
    struct gimg_gpu *gpu = NULL;
    if (!reference) {
        size_t bytes = (size_t)im->height * (size_t)im->width * gimg_pixel_bytes(im);
        const gimg_cost_job job = {.op = GIMG_COST_STATS, .bytes = bytes,
                                   .threads = omp_get_max_threads()};
        struct gimg_remote *server = gimg_ctx_server(ctx, &job);
        if (server && gimg_remote_stats(server, im, o, out) == GIMG_OK)
            return GIMG_OK;
        if ((st = gimg_ctx_select(ctx, &job, &gpu)))
            return st;
    }
    gimg_hist h = {0};
    const int exact_hist = o->order && im->sample != GIMG_F32;
    if (reference) {
        gimg_moments_ref(im, &m);
        if (exact_hist) {
            gimg_hist_params p;
            exact_hist_params(im, &p);
            st = gimg_hist_compute_cpu(im, &p, &h);
        }
    }
#ifdef GIMG_HAVE_CUDA
    /* A GPU out of memory leaves the work to the CPU. */
    if (gpu && (st = gpu_pass(ctx, gpu, im, &m, sizeof m, exact_hist ? &h : NULL)) &&
        !(st = gimg_ctx_gpu_fallback(ctx, st)))
        gpu = NULL;
    if (gpu && !st && exact_hist)
        moments_from_hist(&h, &m);
#endif
    if (!reference && !gpu && !st && exact_hist) {
        gimg_hist_params p;
        exact_hist_params(im, &p);
        if (!(st = gimg_hist_compute_fast(im, &p, &h)))
            moments_from_hist(&h, &m); /* one pass instead of two */
    } else if (!reference && !gpu && !st) {
        gimg_moments_fast(im, &m);
    }
    if (!st) {
        gimg_stats_finish(&m, im->channels, im->sample, out);
        if (o->order && im->sample != GIMG_F32)
            order_from_hist(&h, o, out);
        else if (o->order)
            st = order_float(im, o, out);
    }
    gimg_hist_free(&h);
    return st;
}

gimg_status gimg_stats_compute(gimg_ctx *ctx, const gimg_image *im, const gimg_stats_opts *o,
                               gimg_stats *out)
{
    return stats_common(ctx, im, o, out, 0);
}

gimg_status gimg_stats_compute_cpu(const gimg_image *im, const gimg_stats_opts *o,
                                   gimg_stats *out)
{
    return stats_common(NULL, im, o, out, 1);
}

/* --------------------------------------------------------------- bands */

struct gimg_stats_acc {
    gimg_stats_opts o;
    gimg_image layout;      /* the whole image's size and layout (no data) */
    int rows_seen;
    gimg_moments m;         /* the sums so far */
    gimg_hist h;            /* 8/16-bit with order statistics: the exact
                               histogram so far (the moments follow from it) */
    /* Float: the shifts found so far (a channel's is its first finite
     * sample), and the rows of a block begun in one band and ended in a
     * later one, so that every block is the whole image's. */
    int shift_found[4];
    int block_rows;
    gimg_image carry;
    int carry_rows;
};

gimg_status gimg_stats_begin(const gimg_image *layout, const gimg_stats_opts *o,
                             gimg_stats_acc **acc)
{
    *acc = NULL;
    gimg_status st = gimg_stats_check(layout);
    if (st)
        return st;
    if (o->order && layout->sample == GIMG_F32)
        return gimg_fail(GIMG_E_USAGE, "order statistics of float samples need the whole "
                                       "image");
    gimg_stats_acc *a = calloc(1, sizeof *a);
    if (!a)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    a->o = *o;
    a->layout = *layout;
    a->layout.data = NULL;
    a->layout.meta = NULL;
    moments_init(&a->m);
    if (layout->sample == GIMG_F32) {
        a->block_rows = gimg_stats_block_rows(layout->width, layout->channels);
        if ((st = gimg_image_alloc(&a->carry, layout->width, a->block_rows, layout->channels,
                                   GIMG_F32))) {
            free(a);
            return st;
        }
    }
    *acc = a;
    return GIMG_OK;
}

/* One block of float rows, in order: the shifts of channels still without
 * one taken from it first (a channel's first finite sample; the blocks
 * before it summed nothing for that channel, about any shift), then its
 * sums added. */
static void add_float_block(gimg_stats_acc *a, const gimg_image *block)
{
    const int C = block->channels;
    const size_t n = (size_t)block->width * (size_t)C;
    int missing = 0;
    for (int c = 0; c < C; c++)
        missing += !a->shift_found[c];
    for (int y = 0; y < block->height && missing; y++) {
        const float *row = (const float *)gimg_row(block, y);
        for (size_t i = 0; i < n && missing; i++) {
            const int c = (int)(i % (size_t)C);
            if (!a->shift_found[c] && isfinite(row[i])) {
                a->m.shift[c] = row[i];
                a->shift_found[c] = 1;
                missing--;
            }
        }
    }
    float_blocks(block, &a->m);
}

/* Rows [y0, y1) of a band as an image of their own. */
static void band_rows(const gimg_image *band, int y0, int y1, gimg_image *rows)
{
    *rows = *band;
    rows->data = gimg_row(band, y0);
    rows->height = y1 - y0;
    rows->meta = NULL;
}

gimg_status gimg_stats_add(gimg_stats_acc *a, const gimg_image *band)
{
    if (band->width != a->layout.width || band->channels != a->layout.channels ||
        band->sample != a->layout.sample || band->height > a->layout.height - a->rows_seen)
        return gimg_fail(GIMG_E_USAGE, "gimg_stats_add: a band of another layout, or past "
                                       "the image's rows");
    a->rows_seen += band->height;
    gimg_status st = GIMG_OK;
    if (band->sample == GIMG_F32) {
        const size_t row_bytes = (size_t)band->width * gimg_pixel_bytes(band);
        int y = 0;
        if (a->carry_rows) { /* finish the block begun before */
            for (; y < band->height && a->carry_rows < a->block_rows; y++)
                memcpy(gimg_row(&a->carry, a->carry_rows++), gimg_row(band, y), row_bytes);
            if (a->carry_rows == a->block_rows) {
                add_float_block(a, &a->carry);
                a->carry_rows = 0;
            }
        }
        const int whole = (band->height - y) / a->block_rows * a->block_rows;
        if (whole > 0) {
            gimg_image rows;
            band_rows(band, y, y + whole, &rows);
            add_float_block(a, &rows);
            y += whole;
        }
        for (; y < band->height; y++) /* the start of the next block */
            memcpy(gimg_row(&a->carry, a->carry_rows++), gimg_row(band, y), row_bytes);
    } else if (a->o.order) {
        gimg_hist_params p;
        gimg_hist part = {0};
        exact_hist_params(band, &p);
        if (!(st = gimg_hist_compute_fast(band, &p, &part)))
            st = gimg_hist_add(&a->h, &part);
        gimg_hist_free(&part);
    } else {
        gimg_moments part;
        gimg_moments_fast(band, &part);
        moments_add(&a->m, &part);
    }
    return st;
}

gimg_status gimg_stats_end(gimg_stats_acc *a, gimg_stats *out)
{
    gimg_status st = GIMG_OK;
    if (!a)
        return GIMG_OK;
    if (out && a->rows_seen != a->layout.height)
        st = gimg_fail(GIMG_E_USAGE, "gimg_stats_end: %d of the image's %d rows were added",
                       a->rows_seen, a->layout.height);
    if (out && !st) {
        const gimg_image *im = &a->layout;
        if (a->carry_rows) {
            a->carry.height = a->carry_rows;
            add_float_block(a, &a->carry);
        }
        memset(out, 0, sizeof *out);
        if (im->sample != GIMG_F32 && a->o.order)
            moments_from_hist(&a->h, &a->m);
        else if (im->sample != GIMG_F32) /* moments_add summed the bands' counts */
            for (int c = 0; c < im->channels; c++)
                a->m.count[c] = (uint64_t)im->width * (uint64_t)im->height;
        gimg_stats_finish(&a->m, im->channels, im->sample, out);
        if (a->o.order)
            order_from_hist(&a->h, &a->o, out);
    }
    gimg_hist_free(&a->h);
    gimg_image_free(&a->carry);
    free(a);
    return st;
}
