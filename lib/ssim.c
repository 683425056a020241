/*
 * ssim.c — SSIM's sums on the CPU (lib/ssim_internal.h defines SSIM, the
 * window and the borders): the reference, written for clarity, and the
 * backend, which streams rows; both give the same doubles, bit for bit.
 *
 * Arithmetic, the same in both and the same for every pixel (the shared
 * inline functions below are the only place it is written):
 *  - a sample becomes a = (double)v / R (R = 1 for float). The division is
 *    correctly rounded, so an 8-bit v over 255 and the same v * 257 over
 *    65535 give the same double: 8- and 16-bit copies of one picture have
 *    the same SSIM, bit for bit.
 *  - per input pixel and channel four values: a, b, a*a + b*b and a*b;
 *  - horizontal pass, then vertical, each 11 taps folded on the weights'
 *    symmetry (g(-k) == g(k) exactly: the same exp, the same divisor):
 *      acc = g(0) v(0);  acc += g(k) (v(-k) + v(k)) for k = 1 .. 5;
 *    the horizontal pass is computed only at the columns of valid centres,
 *    the vertical one only at their rows;
 *  - from the four moments mx, my, e2 = E[a^2 + b^2], eab = E[ab]:
 *      m2 = mx*mx + my*my;  mxy = mx*my;
 *      S = ((2 mxy + C1) * (2 (eab - mxy) + C2)) / ((m2 + C1) * ((e2 - m2) + C2))
 *    with C1 = K1^2, C2 = K2^2 (R = 1). Taking e2 - m2, not e2 - mx^2 -
 *    my^2, makes S of an image against itself exactly 1: with a == b every
 *    term of the numerator is the denominator's term doubled exactly;
 *  - each row of centres summed left to right from 0.0, then the rows'
 *    sums from 0.0 in row order.
 * Nothing is fused (C11 mode keeps GCC from contracting a*b + c into an
 * FMA; the AVX2 clones are compiled without "fma"), so every path, scalar
 * or vectorised, rounds the same way.
 *
 * Layout. The reference works per channel on whole-image planes of double:
 * four horizontally filtered planes ((W-10) x H), then the four moment
 * planes ((W-10) x (H-10)): 64 bytes per pixel, used again for each
 * channel; one thread.
 *
 * The backend keeps channels interleaved and never holds a plane. OpenMP
 * threads take bands of rows of centres (about four a thread, at least
 * 24 rows). A band goes down strips of 256 pixels of centres, left to
 * right; in a strip, per image row, a thread converts the row's samples
 * (with 5 pixels of margin each side) to a, b, a^2 + b^2 and ab, filters
 * them horizontally into a ring of the last 11 filtered rows (11 x 4 x
 * 256 x C doubles: 270 KB for RGB, so it stays in L2 at any width), and
 * per row of centres filters the ring vertically, computes S and adds it,
 * left to right, to that row's sums (which go on from the strip before).
 * Rows are worked in chunks of 128 pixels, so that a chunk's values and
 * moments stay in L1. A band starts by filtering the 10 rows above its
 * first centre again (its halo), a strip reads 10 pixels more than its
 * width. The rows' sums are added in row order at the end, so the result
 * does not depend on how many threads ran. The inner loops are `omp simd`
 * over a chunk's samples (a horizontal tap's step is C doubles), compiled
 * twice: AVX2 and the baseline (SSE2), chosen at load time. Memory: per
 * thread 11 x 4 x 256 x C + 9 x 128 x C + 40 C doubles, plus 4 doubles a
 * row of centres for the rows' sums.
 *
 * Work: about 150 double operations per pixel and channel (40 for each
 * pass's four moments, 20 for S and its division, conversions and the
 * products). Measured on the 2-core Xeon this was written on (it has
 * AVX-512; these clones are AVX2): a 2048x2048 RGB pair in 165 ms on one
 * core, 91 ms on two; `gstats --device cpu --compare a -s ssim b`, the
 * whole command, in 184 ms, where scikit-image's call alone takes 2.7-3.4
 * s (tests/bench/cpu_ssim.sh measures both). An "avx512f" clone did it in
 * 135 and 82 ms.
 */
#include "ssim_internal.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define RADIUS GIMG_SSIM_RADIUS
_Static_assert(GIMG_SSIM_RADIUS == 5, "taps_strided and taps_rows write out 11 taps");

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SSIM_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define SSIM_CLONES
#endif

/* S's constants for data scaled to 0..1. */
static const double k_c1 = GIMG_SSIM_K1 * GIMG_SSIM_K1;
static const double k_c2 = GIMG_SSIM_K2 * GIMG_SSIM_K2;

/* From this many samples of centres the backend runs threads: below it,
 * starting them costs more than the work (a 64x64 RGB pair). */
#define SSIM_PARALLEL_MIN_SAMPLES 8192
/* The passes go along a row in chunks of this many pixels, so that a
 * chunk's input values, moments and S stay in L1 (9 x 512 doubles for
 * RGBA: 37 KB). */
#define SSIM_CHUNK_PIXELS 128
/* A band goes down strips of this many pixels of centres (a multiple of
 * the chunk), so that the ring, 11 x 4 x 256 x C doubles (360 KB for
 * RGBA), stays in L2 at any width; a strip's input rows are read with 10
 * pixels of margin, 4% more than the strip. */
#define SSIM_STRIP_PIXELS 256
/* A band's rows of centres: at least this many, so that its halo (10
 * filtered rows done again) stays small against its own rows. */
#define SSIM_MIN_BAND_ROWS 24

void gimg_ssim_weights(double w[GIMG_SSIM_TAPS])
{
    const double sigma = GIMG_SSIM_SIGMA;
    const double k = -0.5 / (sigma * sigma);
    double sum = 0;
    for (int i = 0; i < GIMG_SSIM_TAPS; i++) {
        double d = i - RADIUS;
        w[i] = exp(k * (d * d));
        sum += w[i];
    }
    for (int i = 0; i < GIMG_SSIM_TAPS; i++)
        w[i] /= sum;
}

/* ------------------------------------------------------- the arithmetic */

/* The folded 11 taps around v[0], neighbours `step` doubles apart. */
static inline double taps_strided(const double *w, const double *v, ptrdiff_t step)
{
    /* Written out: the loops over k must be gone before GCC vectorises
     * the loop over samples that calls this. */
    double acc = w[5] * v[0];
    acc += w[6] * (v[-step] + v[step]);
    acc += w[7] * (v[-2 * step] + v[2 * step]);
    acc += w[8] * (v[-3 * step] + v[3 * step]);
    acc += w[9] * (v[-4 * step] + v[4 * step]);
    acc += w[10] * (v[-5 * step] + v[5 * step]);
    return acc;
}

/* The same taps down 11 rows (rows[5] the centre's), at sample j. */
static inline double taps_rows(const double *w, const double *const *rows, size_t j)
{
    double acc = w[5] * rows[5][j];
    acc += w[6] * (rows[4][j] + rows[6][j]);
    acc += w[7] * (rows[3][j] + rows[7][j]);
    acc += w[8] * (rows[2][j] + rows[8][j]);
    acc += w[9] * (rows[1][j] + rows[9][j]);
    acc += w[10] * (rows[0][j] + rows[10][j]);
    return acc;
}

/* S from the four moments (see the head comment for why e2 - m2). */
static inline double ssim_at(double mx, double my, double e2, double eab)
{
    double m2 = mx * mx + my * my;
    double mxy = mx * my;
    double num = (2 * mxy + k_c1) * (2 * (eab - mxy) + k_c2);
    double den = (m2 + k_c1) * ((e2 - m2) + k_c2);
    return num / den;
}

static inline double sample_at(const gimg_image *im, int x, int y, int c)
{
    const unsigned char *row = gimg_row(im, y);
    size_t i = (size_t)x * im->channels + c;
    return im->sample == GIMG_U8 ? (double)row[i]
         : im->sample == GIMG_U16 ? (double)((const uint16_t *)row)[i]
                                  : (double)((const float *)row)[i];
}

static gimg_status check_pair(const gimg_image *a, const gimg_image *b, double range)
{
    if (a->width != b->width || a->height != b->height || a->channels != b->channels ||
        a->sample != b->sample)
        return gimg_fail(GIMG_E_USAGE, "SSIM: the images differ in size, channels or sample "
                                       "type (%dx%d, %d channels against %dx%d, %d channels)",
                         a->width, a->height, a->channels, b->width, b->height, b->channels);
    if (a->channels < 1 || a->channels > 4)
        return gimg_fail(GIMG_E_FORMAT, "SSIM: %d channels: not supported", a->channels);
    if (!(range > 0) || isinf(range))
        return gimg_fail(GIMG_E_USAGE, "SSIM: data range %g: must be positive and finite", range);
    return GIMG_OK;
}

/* What both paths do first: check the pair, and fill out for images
 * without a valid centre. 1 when nothing is left to compute: *st is then
 * the pair's error, or GIMG_OK (out all zero, count 0). Otherwise out
 * holds the count and zero sums. */
static int settled(const gimg_image *a, const gimg_image *b, double range, gimg_ssim_sums *out,
                   gimg_status *st)
{
    if ((*st = check_pair(a, b, range)) != GIMG_OK)
        return 1;
    memset(out, 0, sizeof *out);
    if (a->width < GIMG_SSIM_TAPS || a->height < GIMG_SSIM_TAPS)
        return 1;
    out->count = (uint64_t)(a->width - 2 * RADIUS) * (uint64_t)(a->height - 2 * RADIUS);
    return 0;
}

/* ------------------------------------------------------- the reference */

gimg_status gimg_ssim_sums_ref(const gimg_image *a, const gimg_image *b, double range,
                               gimg_ssim_sums *out)
{
    gimg_status st;
    if (settled(a, b, range, out, &st))
        return st;
    const int W = a->width, H = a->height;
    /* Centres: cw per row, in ch rows. */
    const size_t cw = (size_t)(W - 2 * RADIUS), ch = (size_t)(H - 2 * RADIUS);
    double w[GIMG_SSIM_TAPS];
    gimg_ssim_weights(w);

    /* h[m]: moment m (a, b, a^2 + b^2, ab) filtered along rows, cw x H;
     * e[m]: then down columns, cw x ch; in[m]: one input row's values. */
    double *h[4] = {0}, *e[4] = {0}, *in[4] = {0};
    int ok = 1;
    for (int m = 0; m < 4; m++) {
        h[m] = malloc(cw * (size_t)H * sizeof(double));
        e[m] = malloc(cw * ch * sizeof(double));
        in[m] = malloc((size_t)W * sizeof(double));
        ok = ok && h[m] && e[m] && in[m];
    }
    for (int c = 0; ok && c < a->channels; c++) {
        for (int y = 0; y < H; y++) {
            for (int x = 0; x < W; x++) {
                double va = sample_at(a, x, y, c) / range, vb = sample_at(b, x, y, c) / range;
                in[0][x] = va;
                in[1][x] = vb;
                in[2][x] = va * va + vb * vb;
                in[3][x] = va * vb;
            }
            for (int m = 0; m < 4; m++)
                for (size_t x = 0; x < cw; x++)
                    h[m][(size_t)y * cw + x] = taps_strided(w, in[m] + x + RADIUS, 1);
        }
        for (size_t y = 0; y < ch; y++)
            for (int m = 0; m < 4; m++) {
                const double *rows[GIMG_SSIM_TAPS];
                for (int k = 0; k < GIMG_SSIM_TAPS; k++)
                    rows[k] = h[m] + (y + (size_t)k) * cw;
                for (size_t x = 0; x < cw; x++)
                    e[m][y * cw + x] = taps_rows(w, rows, x);
            }
        double total = 0;
        for (size_t y = 0; y < ch; y++) {
            double row = 0;
            for (size_t x = 0; x < cw; x++) {
                size_t i = y * cw + x;
                row += ssim_at(e[0][i], e[1][i], e[2][i], e[3][i]);
            }
            total += row;
        }
        out->sum[c] = total;
    }
    for (int m = 0; m < 4; m++) {
        free(h[m]);
        free(e[m]);
        free(in[m]);
    }
    if (!ok) {
        memset(out, 0, sizeof *out);
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    }
    return GIMG_OK;
}

/* --------------------------------------------------------- the backend */

typedef struct {
    const gimg_image *a, *b;
    double range;
    int C;
    size_t n_out;  /* samples of a row of centres: (W - 10) x C */
    size_t strip;  /* samples of a strip: SSIM_STRIP_PIXELS x C */
    size_t chunk;  /* samples of a chunk: SSIM_CHUNK_PIXELS x C */
    int rows_out;  /* rows of centres: H - 10 */
    double w[GIMG_SSIM_TAPS];
} ssim_job;

/* One thread's buffers: a chunk of an input row's four values (with its
 * 10 pixels of margin), the ring of filtered rows (slot k holds four rows
 * of a strip: a, b, a^2 + b^2, ab), a chunk's four moments and its S. */
typedef struct {
    double *in[4];
    double *ring;
    double *moment[4];
    double *s;
} ssim_scratch;

static size_t scratch_doubles(const ssim_job *j)
{
    return 4 * (j->chunk + 2 * RADIUS * (size_t)j->C) + GIMG_SSIM_TAPS * 4 * j->strip +
           5 * j->chunk;
}

static void scratch_carve(const ssim_job *j, double *base, ssim_scratch *s)
{
    const size_t n_in = j->chunk + 2 * RADIUS * (size_t)j->C;
    for (int m = 0; m < 4; m++)
        s->in[m] = base + (size_t)m * n_in;
    s->ring = base + 4 * n_in;
    for (int m = 0; m < 4; m++)
        s->moment[m] = s->ring + GIMG_SSIM_TAPS * 4 * j->strip + (size_t)m * j->chunk;
    s->s = s->moment[3] + j->chunk;
}

static inline double *ring_row(const ssim_job *j, const ssim_scratch *s, int image_row, int m)
{
    return s->ring + ((size_t)(image_row % GIMG_SSIM_TAPS) * 4 + (size_t)m) * j->strip;
}

/* Samples x0 .. x0+n-1 of row y of both images as a, b, a^2 + b^2 and ab,
 * channels interleaved. */
SSIM_CLONES static void load_chunk(const ssim_job *j, int y, size_t x0, size_t n,
                                   double *restrict va, double *restrict vb,
                                   double *restrict vp, double *restrict vq)
{
    const double range = j->range;
    const unsigned char *ra = gimg_row(j->a, y), *rb = gimg_row(j->b, y);
    switch (j->a->sample) {
    case GIMG_U8: {
        const uint8_t *pa = ra + x0, *pb = rb + x0;
        #pragma omp simd
        for (size_t i = 0; i < n; i++) {
            va[i] = (double)pa[i] / range;
            vb[i] = (double)pb[i] / range;
        }
        break;
    }
    case GIMG_U16: {
        const uint16_t *pa = (const uint16_t *)ra + x0, *pb = (const uint16_t *)rb + x0;
        #pragma omp simd
        for (size_t i = 0; i < n; i++) {
            va[i] = (double)pa[i] / range;
            vb[i] = (double)pb[i] / range;
        }
        break;
    }
    default: {
        const float *pa = (const float *)ra + x0, *pb = (const float *)rb + x0;
        #pragma omp simd
        for (size_t i = 0; i < n; i++) {
            va[i] = (double)pa[i] / range;
            vb[i] = (double)pb[i] / range;
        }
        break;
    }
    }
    #pragma omp simd
    for (size_t i = 0; i < n; i++) {
        vp[i] = va[i] * va[i] + vb[i] * vb[i];
        vq[i] = va[i] * vb[i];
    }
}

/* The horizontal pass of a chunk's four values: out[i] is the window
 * around in[i + 5 C]. */
SSIM_CLONES static void filter_chunk(const ssim_job *j, const double *const in[4], size_t n,
                                     double *restrict oa, double *restrict ob,
                                     double *restrict op, double *restrict oq)
{
    const double *w = j->w;
    const ptrdiff_t step = j->C;
    const size_t first = (size_t)RADIUS * (size_t)j->C;
    const double *ia = in[0] + first, *ib = in[1] + first, *ip = in[2] + first,
                 *iq = in[3] + first;
    #pragma omp simd
    for (size_t i = 0; i < n; i++) {
        oa[i] = taps_strided(w, ia + i, step);
        ob[i] = taps_strided(w, ib + i, step);
        op[i] = taps_strided(w, ip + i, step);
        oq[i] = taps_strided(w, iq + i, step);
    }
}

/* The vertical pass of one moment: samples x0 .. x0+n-1 of the 11 rows. */
SSIM_CLONES static void filter_down(const double *w, const double *const *rows, size_t x0,
                                    size_t n, double *restrict out)
{
    const double *r[GIMG_SSIM_TAPS];
    for (int k = 0; k < GIMG_SSIM_TAPS; k++)
        r[k] = rows[k] + x0;
    #pragma omp simd
    for (size_t i = 0; i < n; i++)
        out[i] = taps_rows(w, r, i);
}

SSIM_CLONES static void ssim_chunk(const double *restrict mx, const double *restrict my,
                                   const double *restrict e2, const double *restrict eab,
                                   size_t n, double *restrict s)
{
    #pragma omp simd
    for (size_t i = 0; i < n; i++)
        s[i] = ssim_at(mx[i], my[i], e2[i], eab[i]);
}

/* Samples x0 .. x0+n-1 of the centres of image row y: the row's four
 * values filtered along it, into the ring (at 0 .. n-1). */
static void filter_image_row(const ssim_job *j, const ssim_scratch *s, int y, size_t x0,
                             size_t n)
{
    for (size_t done = 0; done < n; done += j->chunk) {
        size_t k = n - done < j->chunk ? n - done : j->chunk;
        load_chunk(j, y, x0 + done, k + 2 * RADIUS * (size_t)j->C, s->in[0], s->in[1],
                   s->in[2], s->in[3]);
        filter_chunk(j, (const double *const *)s->in, k, ring_row(j, s, y, 0) + done,
                     ring_row(j, s, y, 1) + done, ring_row(j, s, y, 2) + done,
                     ring_row(j, s, y, 3) + done);
    }
}

/* Rows of centres r0 .. r1-1 (centre row r is image row r + 5): their
 * sums of S, per channel, into row_sums[r * 4 + c]. The band goes down
 * one strip of columns after the other, left to right, so each row's sums
 * go on from where the strip before left them. */
static void ssim_band(const ssim_job *j, const ssim_scratch *s, int r0, int r1,
                      double *row_sums)
{
    const int C = j->C;
    for (size_t x0 = 0; x0 < j->n_out; x0 += j->strip) {
        const size_t sn = j->n_out - x0 < j->strip ? j->n_out - x0 : j->strip;
        for (int y = r0; y < r0 + GIMG_SSIM_TAPS - 1; y++)
            filter_image_row(j, s, y, x0, sn);
        for (int r = r0; r < r1; r++) {
            filter_image_row(j, s, r + GIMG_SSIM_TAPS - 1, x0, sn);
            const double *rows[4][GIMG_SSIM_TAPS];
            for (int m = 0; m < 4; m++)
                for (int k = 0; k < GIMG_SSIM_TAPS; k++)
                    rows[m][k] = ring_row(j, s, r + k, m);
            double sum[4] = {0, 0, 0, 0};
            if (x0 > 0)
                memcpy(sum, row_sums + (size_t)r * 4, sizeof sum);
            for (size_t done = 0; done < sn; done += j->chunk) {
                size_t n = sn - done < j->chunk ? sn - done : j->chunk;
                for (int m = 0; m < 4; m++)
                    filter_down(j->w, rows[m], done, n, s->moment[m]);
                ssim_chunk(s->moment[0], s->moment[1], s->moment[2], s->moment[3], n, s->s);
                /* Left to right, each channel on its own (chunks hold
                 * whole pixels). */
                for (size_t i = 0; i < n; i += (size_t)C)
                    for (int c = 0; c < C; c++)
                        sum[c] += s->s[i + (size_t)c];
            }
            memcpy(row_sums + (size_t)r * 4, sum, sizeof sum);
        }
    }
}

gimg_status gimg_ssim_sums_fast(const gimg_image *a, const gimg_image *b, double range,
                                gimg_ssim_sums *out)
{
    gimg_status st;
    if (settled(a, b, range, out, &st))
        return st;
    ssim_job j;
    j.a = a;
    j.b = b;
    j.range = range;
    j.C = a->channels;
    j.chunk = (size_t)SSIM_CHUNK_PIXELS * (size_t)j.C;
    j.strip = (size_t)SSIM_STRIP_PIXELS * (size_t)j.C;
    j.n_out = (size_t)(a->width - 2 * RADIUS) * (size_t)j.C;
    if (j.strip > j.n_out)  /* a narrow image: one strip, no larger than a row */
        j.strip = j.n_out;
    j.rows_out = a->height - 2 * RADIUS;
    gimg_ssim_weights(j.w);

    const int parallel = j.n_out * (size_t)j.rows_out >= SSIM_PARALLEL_MIN_SAMPLES;
    const int threads = parallel ? omp_get_max_threads() : 1;
    /* About four bands a thread (balance on a shared machine), none
     * smaller than SSIM_MIN_BAND_ROWS. */
    int band_rows = (j.rows_out + 4 * threads - 1) / (4 * threads);
    if (band_rows < SSIM_MIN_BAND_ROWS)
        band_rows = SSIM_MIN_BAND_ROWS;
    const int bands = (j.rows_out + band_rows - 1) / band_rows;

    double *row_sums = malloc((size_t)j.rows_out * 4 * sizeof(double));
    if (!row_sums) {
        memset(out, 0, sizeof *out);
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    }
    const size_t per_thread = scratch_doubles(&j);
    int failed = 0;
    #pragma omp parallel num_threads(threads) if (parallel && bands > 1) reduction(| : failed)
    {
        double *base = malloc(per_thread * sizeof(double));
        if (!base)
            failed = 1;
        ssim_scratch s;
        if (base)
            scratch_carve(&j, base, &s);
        /* A thread without buffers takes its bands all the same and skips
         * them: the result is thrown away. */
        #pragma omp for schedule(dynamic, 1)
        for (int band = 0; band < bands; band++) {
            if (!base)
                continue;
            int r0 = band * band_rows;
            int r1 = r0 + band_rows < j.rows_out ? r0 + band_rows : j.rows_out;
            ssim_band(&j, &s, r0, r1, row_sums);
        }
        free(base);
    }
    if (failed) {
        free(row_sums);
        memset(out, 0, sizeof *out);
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    }
    for (int r = 0; r < j.rows_out; r++)
        for (int c = 0; c < j.C; c++)
            out->sum[c] += row_sums[(size_t)r * 4 + (size_t)c];
    free(row_sums);
    return GIMG_OK;
}
