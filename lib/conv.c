/*
 * conv.c — 2-D convolution on the CPU, twice: a direct reference written for
 * clarity (every tap of every sample through gimg_border_index), and the
 * fast backend; then the dispatch between the CPU and the GPU.
 *
 * The plan every backend follows (see gimg_conv.h):
 *   1. widen each sample to float; with --alpha premultiply (2 and 4
 *      channels) colours become v * (a / max), alpha stays as it is;
 *   2. apply each kernel in turn, in float, to every channel: DENSE taps
 *      in row-major order, SEPARABLE as a row pass then a column pass (the
 *      row pass's results in float), MAGNITUDE as sqrtf(fmaf(gx, gx, gy*gy));
 *      every tap a fused multiply-add, a zero border's outside samples read
 *      as +0 and multiplied like any other;
 *   3. per sample: premultiplied colours divided by the convolved alpha
 *      fraction, --scale/--bias as fmaf(v, scale, bias), --abs, then
 *      clamp and round to nearest (8/16-bit); the alpha of premultiply mode
 *      is the convolved alpha divided by the chain's gain (the input's where
 *      the gain is 0, see lib/conv_internal.h) and gets no scale or
 *      bias, keep mode's alpha is the input's, unchanged;
 *   4. an image with a maxval (samples in the file's units, 0..maxval):
 *      every 8/16-bit result v becomes min(v, maxval), a pass over the
 *      output after whichever backend ran (clamp_maxval). Results are
 *      rounded integers, so this equals clamping to [0, maxval] before
 *      rounding, and the GPU needs no change to agree. The output keeps
 *      the maxval. Premultiplication uses the type's maximum (255, 65535)
 *      whatever the maxval: it cancels out, an opaque alpha (maxval) still
 *      gives the plain convolution, and the GPU kernels use the same one.
 *
 * The fast path streams rows: each thread owns a band of output rows and a
 * ring of the input rows (or row-pass results) its window needs, widened
 * and padded with the border, so one image pass stays in cache. The inner
 * loops run over a padded row's samples (channels interleaved, a tap's
 * horizontal step is one pixel = C floats) in blocks of 64, vectorized with
 * AVX2/FMA where the CPU has it (chosen at run time); scalar fmaf gives the
 * same bits everywhere else.
 */
#include "conv_internal.h"
#include "ctx_internal.h"
#include "remote.h"
#include "alloc_internal.h"

#include <limits.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

void gimg_conv_opts_init(gimg_conv_opts *o)
{
    memset(o, 0, sizeof *o);
    o->scale = 1.0f;
    o->border = GIMG_BORDER_CLAMP;
    o->alpha = GIMG_ALPHA_PREMULTIPLY;
}

static gimg_status check_opts(const gimg_image *in, const gimg_conv_opts *o)
{
    if (!o->kernels || o->n_kernels < 1)
        return gimg_fail(GIMG_E_USAGE, "no kernel given");
    if (in->channels < 1 || in->channels > 4)
        return gimg_fail(GIMG_E_FORMAT, "%d channels: not supported", in->channels);
    return GIMG_OK;
}

/* Step 4: the results of an image with a maxval kept in 0..maxval, and
 * the maxval passed on (float images have none). */
static void clamp_maxval(const gimg_image *in, gimg_image *out)
{
    out->maxval = 0;
    if (in->sample == GIMG_F32 || in->maxval == 0 ||
        in->maxval >= (in->sample == GIMG_U8 ? 255u : 65535u))
        return;
    const unsigned m = in->maxval;
    out->maxval = m;
    const size_t n = (size_t)out->width * out->channels;
    #pragma omp parallel for schedule(static) if (n * (size_t)out->height > 262144)
    for (int y = 0; y < out->height; y++) {
        unsigned char *row = gimg_row(out, y);
        if (out->sample == GIMG_U8) {
            const uint8_t top = (uint8_t)m;
            for (size_t i = 0; i < n; i++)
                row[i] = row[i] < top ? row[i] : top;
        } else {
            const uint16_t top = (uint16_t)m;
            uint16_t *r16 = (uint16_t *)row;
            for (size_t i = 0; i < n; i++)
                r16[i] = r16[i] < top ? r16[i] : top;
        }
    }
}

/* ------------------------------------------------------------ sample access */

static inline float load_sample(const gimg_image *im, int x, int y, int c)
{
    const unsigned char *row = gimg_row(im, y);
    size_t i = (size_t)x * im->channels + c;
    switch (im->sample) {
    case GIMG_U8: return (float)row[i];
    case GIMG_U16: return (float)((const uint16_t *)row)[i];
    default: return ((const float *)row)[i];
    }
}

/* Sample i of a row of samples of type s, as a float. */
static inline float row_sample(const unsigned char *row, size_t i, gimg_sample s)
{
    switch (s) {
    case GIMG_U8: return (float)row[i];
    case GIMG_U16: return (float)((const uint16_t *)row)[i];
    default: return ((const float *)row)[i];
    }
}

/* Step 3 for one row: v holds the convolved row (W * C floats), orow the
 * input's row y (for the alpha modes). */
static void narrow_row(const float *v, const unsigned char *orow, const gimg_conv_opts *o,
                       float unit, int y, gimg_image *out)
{
    const int W = out->width, C = out->channels;
    const int premult = gimg_conv_premultiplied(o, C);
    const int keep = gimg_conv_has_alpha(C) && o->alpha == GIMG_ALPHA_KEEP;
    const int colours = premult || keep ? C - 1 : C;
    unsigned char *row = gimg_row(out, y);
    const float amax = gimg_conv_alpha_max(out->sample);
    for (int x = 0; x < W; x++) {
        const float *p = v + (size_t)x * C;
        float frac = 0.0f, alpha = 0.0f;
        if (premult) {
            /* The input's alpha matters only where the gain is 0. */
            const float a_in =
                unit != 0.0f ? 0.0f : row_sample(orow, (size_t)x * C + C - 1, out->sample);
            frac = gimg_conv_alpha_fraction(p[C - 1], a_in, unit, amax);
            alpha = gimg_conv_alpha_out(p[C - 1], a_in, unit, amax);
        }
        for (int c = 0; c < C; c++) {
            float f;
            size_t i = (size_t)x * C + c;
            if (c == C - 1 && keep) {
                memcpy(row + i * out->sample, orow + i * out->sample, out->sample);
                continue;
            }
            if (c < colours) {
                f = premult ? gimg_conv_unpremultiply(p[c], frac) : p[c];
                f = gimg_conv_finish(f, o->scale, o->bias, o->absolute);
            } else {
                f = alpha; /* premultiply mode's alpha: averaged, no scale or bias */
            }
            if (out->sample == GIMG_U8)
                row[i] = gimg_conv_to_u8(f);
            else if (out->sample == GIMG_U16)
                ((uint16_t *)row)[i] = gimg_conv_to_u16(f);
            else
                ((float *)row)[i] = f;
        }
    }
}

/* ---------------------------------------------------------------- reference */

typedef struct {
    int W, H, C;
    float *v; /* W * H * C, interleaved */
} fimage;

static gimg_status fimage_alloc(fimage *f, int W, int H, int C)
{
    f->W = W, f->H = H, f->C = C;
    f->v = gimg_alloc_large((size_t)W * H * C * sizeof(float));
    return f->v ? GIMG_OK : gimg_fail(GIMG_E_NOMEM, "out of memory");
}

static inline float fat(const fimage *f, int x, int y, int c)
{
    return f->v[((size_t)y * f->W + x) * f->C + c];
}

/* A sample of f at any coordinates, through the border. */
static float ref_get(const fimage *f, long x, long y, int c, gimg_border b)
{
    int xx = gimg_border_index(x, f->W, b), yy = gimg_border_index(y, f->H, b);
    return xx < 0 || yy < 0 ? 0.0f : fat(f, xx, yy, c);
}

static float ref_dense(const fimage *f, const float *taps, const gimg_kernel *k, int x, int y,
                       int c, gimg_border b)
{
    float acc = 0.0f;
    for (int i = 0; i < k->height; i++)
        for (int j = 0; j < k->width; j++)
            acc = fmaf(taps[i * k->width + j],
                       ref_get(f, (long)x + j - k->anchor_x, (long)y + i - k->anchor_y, c, b), acc);
    return acc;
}

static gimg_status ref_apply(const fimage *src, const gimg_kernel *k, gimg_border b, fimage *dst)
{
    const int W = src->W, H = src->H, C = src->C;
    gimg_status st = fimage_alloc(dst, W, H, C);
    if (st)
        return st;
    if (k->kind == GIMG_KERNEL_SEPARABLE) {
        fimage tmp;
        if ((st = fimage_alloc(&tmp, W, H, C)))
            return st;
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                for (int c = 0; c < C; c++) {
                    float acc = 0.0f;
                    for (int j = 0; j < k->width; j++)
                        acc = fmaf(k->row[j], ref_get(src, (long)x + j - k->anchor_x, y, c, b), acc);
                    tmp.v[((size_t)y * W + x) * C + c] = acc;
                }
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                for (int c = 0; c < C; c++) {
                    float acc = 0.0f;
                    for (int i = 0; i < k->height; i++)
                        acc = fmaf(k->col[i], ref_get(&tmp, x, (long)y + i - k->anchor_y, c, b), acc);
                    dst->v[((size_t)y * W + x) * C + c] = acc;
                }
        free(tmp.v);
        return GIMG_OK;
    }
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int c = 0; c < C; c++) {
                float gx = ref_dense(src, k->taps, k, x, y, c, b), v = gx;
                if (k->kind == GIMG_KERNEL_MAGNITUDE) {
                    float gy = ref_dense(src, k->taps_y, k, x, y, c, b);
                    v = sqrtf(fmaf(gx, gx, gy * gy));
                }
                dst->v[((size_t)y * W + x) * C + c] = v;
            }
    return GIMG_OK;
}

gimg_status gimg_conv_reference(const gimg_image *in, const gimg_conv_opts *o, gimg_image *out)
{
    memset(out, 0, sizeof *out);
    gimg_status st = check_opts(in, o);
    if (st)
        return st;
    const int W = in->width, H = in->height, C = in->channels;
    const int premult = gimg_conv_premultiplied(o, C);
    const float amax = gimg_conv_alpha_max(in->sample);
    fimage cur;
    if ((st = fimage_alloc(&cur, W, H, C)))
        return st;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int c = 0; c < C; c++) {
                float v = load_sample(in, x, y, c);
                if (premult && c < C - 1)
                    v = gimg_conv_premultiply(v, load_sample(in, x, y, C - 1), amax);
                cur.v[((size_t)y * W + x) * C + c] = v;
            }
    for (int n = 0; n < o->n_kernels && !st; n++) {
        fimage next;
        st = ref_apply(&cur, &o->kernels[n], o->border, &next);
        free(cur.v);
        cur = next;
    }
    if (!st)
        st = gimg_image_alloc(out, W, H, C, in->sample);
    const float unit = gimg_conv_alpha_unit(o, in->sample);
    if (!st) {
        for (int y = 0; y < H; y++)
            narrow_row(cur.v + (size_t)y * W * C, gimg_row(in, y), o, unit, y, out);
        clamp_maxval(in, out);
    }
    free(cur.v);
    return st;
}

/* --------------------------------------------------------------- fast path */

/*
 * out[q] = sum over i < nrows, j < ntaps of taps[i * ntaps + j] * rows[i][q + j * step],
 * one fmaf per term in that order, for q < n. Blocks of 32 outputs keep
 * their sums in registers across all the taps.
 */
#define DOT_ROWS_BODY                                                                     \
    int q = 0;                                                                            \
    for (; q + 32 <= n; q += 32) {                                                        \
        float acc[32] = {0};                                                              \
        for (int i = 0; i < nrows; i++) {                                                 \
            const float *r = rows[i] + q;                                                 \
            for (int j = 0; j < ntaps; j++, r += step) {                                  \
                const float t = taps[i * ntaps + j];                                      \
                for (int e = 0; e < 32; e++)                                              \
                    acc[e] = fmaf(t, r[e], acc[e]);                                       \
            }                                                                             \
        }                                                                                 \
        memcpy(out + q, acc, sizeof acc);                                                 \
    }                                                                                     \
    for (; q < n; q++) {                                                                  \
        float acc = 0.0f;                                                                 \
        for (int i = 0; i < nrows; i++)                                                   \
            for (int j = 0; j < ntaps; j++)                                               \
                acc = fmaf(taps[i * ntaps + j], rows[i][q + (size_t)j * step], acc);     \
        out[q] = acc;                                                                     \
    }

typedef void (*dot_rows_fn)(float *restrict out, int n, const float *const *rows, int nrows,
                            const float *taps, int ntaps, int step);

static void dot_rows_generic(float *restrict out, int n, const float *const *rows, int nrows,
                             const float *taps, int ntaps, int step)
{
    DOT_ROWS_BODY
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define GIMG_X86_FAST 1
#include <immintrin.h>
/* The same sums: 64 outputs in eight AVX registers for the whole tap loop
 * (one broadcast per tap and 64 outputs, every load folded into its FMA),
 * then 8 at a time, then one at a time. Each output still gets one FMA per
 * tap in row-major tap order, so the bits are the generic version's. A
 * column pass (ntaps == 1) walks the rows directly. */
#define DOT8_STEP(K, T, R)                                                                 \
    a##K = _mm256_fmadd_ps(T, _mm256_loadu_ps((R) + 8 * K), a##K)
__attribute__((target("avx2,fma"), optimize("O3"))) static void
dot_rows_avx2(float *restrict out, int n, const float *const *rows, int nrows, const float *taps,
              int ntaps, int step)
{
    int q = 0;
    for (; q + 64 <= n; q += 64) {
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
               a7 = a0;
        if (ntaps == 1) {
            for (int i = 0; i < nrows; i++) {
                const float *r = rows[i] + q;
                const __m256 tv = _mm256_broadcast_ss(taps + i);
                DOT8_STEP(0, tv, r); DOT8_STEP(1, tv, r); DOT8_STEP(2, tv, r); DOT8_STEP(3, tv, r);
                DOT8_STEP(4, tv, r); DOT8_STEP(5, tv, r); DOT8_STEP(6, tv, r); DOT8_STEP(7, tv, r);
            }
        } else {
            for (int i = 0; i < nrows; i++) {
                const float *r = rows[i] + q;
                const float *t = taps + (size_t)i * ntaps;
                for (int j = 0; j < ntaps; j++, r += step) {
                    const __m256 tv = _mm256_broadcast_ss(t + j);
                    DOT8_STEP(0, tv, r); DOT8_STEP(1, tv, r); DOT8_STEP(2, tv, r); DOT8_STEP(3, tv, r);
                    DOT8_STEP(4, tv, r); DOT8_STEP(5, tv, r); DOT8_STEP(6, tv, r); DOT8_STEP(7, tv, r);
                }
            }
        }
        _mm256_storeu_ps(out + q, a0);
        _mm256_storeu_ps(out + q + 8, a1);
        _mm256_storeu_ps(out + q + 16, a2);
        _mm256_storeu_ps(out + q + 24, a3);
        _mm256_storeu_ps(out + q + 32, a4);
        _mm256_storeu_ps(out + q + 40, a5);
        _mm256_storeu_ps(out + q + 48, a6);
        _mm256_storeu_ps(out + q + 56, a7);
    }
    for (; q + 8 <= n; q += 8) {
        __m256 a0 = _mm256_setzero_ps();
        for (int i = 0; i < nrows; i++) {
            const float *r = rows[i] + q;
            const float *t = taps + (size_t)i * ntaps;
            for (int j = 0; j < ntaps; j++, r += step)
                DOT8_STEP(0, _mm256_broadcast_ss(t + j), r);
        }
        _mm256_storeu_ps(out + q, a0);
    }
    for (; q < n; q++) {
        float acc = 0.0f;
        for (int i = 0; i < nrows; i++)
            for (int j = 0; j < ntaps; j++)
                acc = fmaf(taps[i * ntaps + j], rows[i][q + (size_t)j * step], acc);
        out[q] = acc;
    }
}
#undef DOT8_STEP
#endif

static dot_rows_fn pick_dot_rows(void)
{
#ifdef GIMG_X86_FAST
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return dot_rows_avx2;
#endif
    return dot_rows_generic;
}

/* Where the rows of a stage come from: the input image (widened, maybe
 * premultiplied) or the previous stage's float image. */
typedef struct {
    const gimg_image *img;            /* the input's layout; its rows are in `rows` */
    const unsigned char *const *rows; /* the input's rows, from row y_base on */
    const fimage *f;
    int premult;
    float amax;
    int y_base;     /* the image row that rows[0] or f's first row holds (bands) */
} row_src;

#define FETCH_BODY                                                                         \
    const int W = s->img ? s->img->width : s->f->W;                                        \
    const int C = s->img ? s->img->channels : s->f->C;                                     \
    const size_t n = (size_t)W * C;                                                        \
    if (s->f) {                                                                            \
        memcpy(dst, s->f->v + (size_t)y * n, n * sizeof(float));                           \
        return;                                                                            \
    }                                                                                      \
    const unsigned char *row = s->rows[y];                                                 \
    if (s->img->sample == GIMG_U8)                                                         \
        for (size_t i = 0; i < n; i++)                                                     \
            dst[i] = (float)row[i];                                                        \
    else if (s->img->sample == GIMG_U16)                                                   \
        for (size_t i = 0; i < n; i++)                                                     \
            dst[i] = (float)((const uint16_t *)row)[i];                                    \
    else                                                                                   \
        memcpy(dst, row, n * sizeof(float));                                               \
    if (s->premult)                                                                        \
        for (int x = 0; x < W; x++) {                                                      \
            float *p = dst + (size_t)x * C;                                                \
            for (int c = 0; c < C - 1; c++)                                                \
                p[c] = gimg_conv_premultiply(p[c], p[C - 1], s->amax);                     \
        }

static void fetch_generic(const row_src *s, int y, float *restrict dst) { FETCH_BODY }
static void narrow_generic(const float *v, const unsigned char *orow, const gimg_conv_opts *o,
                           float unit, int y, gimg_image *out)
{
    narrow_row(v, orow, o, unit, y, out);
}
#ifdef GIMG_X86_FAST
__attribute__((target("avx2,fma"), optimize("O3"))) static void
fetch_avx2(const row_src *s, int y, float *restrict dst) { FETCH_BODY }
/* The common case (no alpha handling) in a loop the compiler vectorizes. */
__attribute__((target("avx2,fma"), optimize("O3"))) static void
narrow_avx2(const float *v, const unsigned char *orow, const gimg_conv_opts *o, float unit,
            int y, gimg_image *out)
{
    const size_t n = (size_t)out->width * out->channels;
    const float scale = o->scale, bias = o->bias;
    unsigned char *row = gimg_row(out, y);
    if ((gimg_conv_has_alpha(out->channels) && o->alpha != GIMG_ALPHA_INCLUDE) ||
        out->sample == GIMG_F32) {
        narrow_row(v, orow, o, unit, y, out);
        return;
    }
    if (out->sample == GIMG_U8) {
        /* 32 at a time, written out: gimg_conv_finish then gimg_conv_to_u8.
         * max_ps(v, 0) is v > 0 ? v : 0 (NaN to 0) and min_ps(v, 255) is
         * v < 255 ? v : 255, as in gimg_conv_clamp; the rounding is rintf's
         * (the current mode); the conversion of a whole number is exact. */
        const __m256 vs = _mm256_set1_ps(scale), vb = _mm256_set1_ps(bias),
                     zero = _mm256_setzero_ps(), top = _mm256_set1_ps(255.0f),
                     sign = _mm256_set1_ps(-0.0f);
        const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        const int absolute = o->absolute;
        size_t i = 0;
        for (; i + 32 <= n; i += 32) {
            __m256i w[4];
            for (int k = 0; k < 4; k++) {
                __m256 f = _mm256_fmadd_ps(_mm256_loadu_ps(v + i + 8 * k), vs, vb);
                if (absolute)
                    f = _mm256_andnot_ps(sign, f);
                f = _mm256_min_ps(_mm256_max_ps(f, zero), top);
                w[k] = _mm256_cvttps_epi32(_mm256_round_ps(f, _MM_FROUND_CUR_DIRECTION));
            }
            __m256i b = _mm256_packus_epi16(_mm256_packus_epi32(w[0], w[1]),
                                            _mm256_packus_epi32(w[2], w[3]));
            _mm256_storeu_si256((__m256i *)(row + i), _mm256_permutevar8x32_epi32(b, order));
        }
        for (; i < n; i++)
            row[i] = gimg_conv_to_u8(gimg_conv_finish(v[i], scale, bias, o->absolute));
    } else
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)row)[i] = gimg_conv_to_u16(gimg_conv_finish(v[i], scale, bias, o->absolute));
}
#endif

typedef struct {
    dot_rows_fn dot;
    void (*fetch)(const row_src *, int, float *restrict);
    void (*narrow)(const float *, const unsigned char *, const gimg_conv_opts *, float, int,
                   gimg_image *);
} cpu_fns;

static cpu_fns pick_fns(void)
{
    cpu_fns f = {pick_dot_rows(), fetch_generic, narrow_generic};
#ifdef GIMG_X86_FAST
    if (f.dot == dot_rows_avx2) {
        f.fetch = fetch_avx2;
        f.narrow = narrow_avx2;
    }
#endif
    return f;
}

/* Where a stage's rows go: the next stage's float image, or the output. */
typedef struct {
    fimage *f;
    gimg_image *out;
    const unsigned char *const *orig; /* the input's rows, aligned with out's */
    const gimg_conv_opts *o;
    float unit; /* gimg_conv_alpha_unit */
    int y_base; /* the image row that f's or out's first row holds (bands) */
} row_sink;

/* One thread's buffers for a stage. */
typedef struct {
    float *ring;      /* kh padded rows (dense) or row-pass rows (separable) */
    int *tag;         /* the logical row each ring slot holds */
    float *acc, *acc2;
} stage_bufs;

/* A padded row: the source row at offset ax pixels, the border around it. */
static void pad_row(const row_src *s, const cpu_fns *fn, int y, const int *xmap, int ax, int kw,
                    int W, int C, float *dst)
{
    if (y < 0) {
        memset(dst, 0, (size_t)(W + kw - 1) * C * sizeof(float));
        return;
    }
    /* The row goes straight to its place; the padding copies from it. */
    float *body = dst + (size_t)ax * C;
    fn->fetch(s, y - s->y_base, body);
    for (int p = 0; p < kw - 1; p++) {
        /* pad p covers x = -ax + p for p < ax, else x = W + (p - ax) */
        int x = p < ax ? p : W + ax + (p - ax);
        int src = xmap[p];
        float *d = dst + (size_t)x * C;
        if (src < 0)
            memset(d, 0, (size_t)C * sizeof(float));
        else
            memcpy(d, body + (size_t)src * C, (size_t)C * sizeof(float));
    }
}

/* Rows [r0, r1) of a stage's output, of an image of H rows: the source's
 * rows that they need must be in it (whole, or a band's: src->y_base). */
static gimg_status run_stage(const row_src *src, const gimg_kernel *k, gimg_border b, int W,
                             int H, int C, int r0, int r1, const row_sink *sink,
                             const cpu_fns *fn)
{
    const int kw = k->width, kh = k->height, ax = k->anchor_x, ay = k->anchor_y;
    const int sep = k->kind == GIMG_KERNEL_SEPARABLE;
    const size_t n = (size_t)W * C, padded = (size_t)(W + kw - 1) * C;
    const size_t slot = sep ? n : padded;
    /* Source column of each padding position (-1: zero). */
    int *xmap = malloc((size_t)(kw > 1 ? kw - 1 : 1) * sizeof *xmap);
    if (!xmap)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    for (int p = 0; p < kw - 1; p++)
        xmap[p] = gimg_border_index(p < ax ? (long)p - ax : (long)W + (p - ax), W, b);
    int failed = 0;
    const int rows_out = r1 - r0;
    const int threads = (size_t)W * rows_out * kw * kh > 200000 ? omp_get_max_threads() : 1;
    #pragma omp parallel num_threads(threads) reduction(| : failed)
    {
        const int nt = omp_get_num_threads(), t = omp_get_thread_num();
        const int y0 = r0 + (int)((long)rows_out * t / nt);
        const int y1 = r0 + (int)((long)rows_out * (t + 1) / nt);
        stage_bufs bf = {0};
        bf.ring = malloc((size_t)kh * slot * sizeof(float));
        bf.tag = malloc((size_t)kh * sizeof(int));
        bf.acc = malloc(padded * sizeof(float)); /* separable: a padded source row */
        bf.acc2 = malloc(2 * n * sizeof(float));
        const float **rows = malloc((size_t)kh * sizeof *rows);
        if (!bf.ring || !bf.tag || !bf.acc || !bf.acc2 || !rows) {
            failed = 1;
        } else {
            for (int i = 0; i < kh; i++)
                bf.tag[i] = INT_MIN;
            float *out = bf.acc2, *gy = bf.acc2 + n;
            for (int y = y0; y < y1; y++) {
                /* The logical rows y - ay .. y - ay + kh - 1, each in slot p mod kh. */
                for (int i = 0; i < kh; i++) {
                    long p = (long)y + i - ay;
                    int s = (int)(((p % kh) + kh) % kh);
                    float *dst = bf.ring + (size_t)s * slot;
                    if (bf.tag[s] != p) {
                        int yy = gimg_border_index(p, H, b);
                        if (!sep) {
                            pad_row(src, fn, yy, xmap, ax, kw, W, C, dst);
                        } else if (yy < 0) {
                            memset(dst, 0, n * sizeof(float));
                        } else {
                            const float *pr = bf.acc;
                            pad_row(src, fn, yy, xmap, ax, kw, W, C, bf.acc);
                            fn->dot(dst, (int)n, &pr, 1, k->row, kw, C);
                        }
                        bf.tag[s] = (int)p;
                    }
                    rows[i] = dst;
                }
                if (sep) {
                    fn->dot(out, (int)n, rows, kh, k->col, 1, 0);
                } else {
                    fn->dot(out, (int)n, rows, kh, k->taps, kw, C);
                    if (k->kind == GIMG_KERNEL_MAGNITUDE) {
                        fn->dot(gy, (int)n, rows, kh, k->taps_y, kw, C);
                        for (size_t q = 0; q < n; q++)
                            out[q] = sqrtf(fmaf(out[q], out[q], gy[q] * gy[q]));
                    }
                }
                if (sink->f)
                    memcpy(sink->f->v + (size_t)(y - sink->y_base) * n, out, n * sizeof(float));
                else
                    fn->narrow(out, sink->orig[y - sink->y_base], sink->o, sink->unit,
                               y - sink->y_base, sink->out);
            }
        }
        free(bf.ring);
        free(bf.tag);
        free(bf.acc);
        free(bf.acc2);
        free(rows);
    }
    free(xmap);
    return failed ? gimg_fail(GIMG_E_NOMEM, "out of memory") : GIMG_OK;
}

static gimg_status conv_cpu_into(const gimg_image *in, const gimg_conv_opts *o, gimg_image *out)
{
    const int W = in->width, H = in->height, C = in->channels;
    const cpu_fns fn = pick_fns();
    const unsigned char **rows = malloc((size_t)H * sizeof *rows);
    if (!rows)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    for (int y = 0; y < H; y++)
        rows[y] = gimg_row(in, y);
    row_src src = {in, rows, NULL, gimg_conv_premultiplied(o, C),
                   gimg_conv_alpha_max(in->sample), 0};
    fimage cur = {0}, next = {0};
    gimg_status st = GIMG_OK;
    for (int s = 0; s < o->n_kernels && !st; s++) {
        row_sink sink = {NULL, out, rows, o, gimg_conv_alpha_unit(o, in->sample), 0};
        if (s + 1 < o->n_kernels) {
            if ((st = fimage_alloc(&next, W, H, C)))
                break;
            sink.f = &next;
        }
        st = run_stage(&src, &o->kernels[s], o->border, W, H, C, 0, H, &sink, &fn);
        free(cur.v);
        cur = next;
        next.v = NULL;
        src.img = NULL;
        src.rows = NULL;
        src.f = &cur;
        src.premult = 0;
    }
    free(cur.v);
    free(rows);
    if (!st)
        clamp_maxval(in, out);
    return st;
}

gimg_status gimg_conv_cpu(const gimg_image *in, const gimg_conv_opts *o, gimg_image *out)
{
    memset(out, 0, sizeof *out);
    gimg_status st = check_opts(in, o);
    if (st || (st = gimg_image_alloc(out, in->width, in->height, in->channels, in->sample)))
        return st;
    if ((st = conv_cpu_into(in, o, out)))
        gimg_image_free(out);
    return st;
}

/* -------------------------------------------------------------- bands */

/*
 * The convolution of an image given band by band (gimg_conv.h): the input
 * rows that the output rows still to come need are kept in a window, the
 * output rows whose input is all there are computed by the same stages
 * as the whole image's (run_stage, on rows [r0, r1) of a stage), and so
 * are the same bits. A chain's intermediate stages are computed for the
 * rows the next stage reads, border rows included (needed_rows).
 */
typedef struct {
    int lo, hi;    /* rows [lo, hi) */
} row_range;

struct gimg_conv_bands {
    gimg_conv_opts o;
    int W, H, C;
    gimg_sample sample;
    unsigned maxval;
    cpu_fns fn;
    /* Rows [win_lo, win_lo + win_rows) of the input, copied from earlier
     * bands: those that output rows still to come read (the halo). */
    gimg_image window;
    int win_lo, win_rows, win_cap;
    const unsigned char **table; /* the window's rows, then the band's */
    int table_cap;
    int rows_in;           /* input rows given so far */
    int next_out;          /* the first output row not yet given */
    gimg_image out;        /* the output rows given by the last call */
    int out_cap;
    fimage stage[2];       /* intermediate stages' rows */
    row_range *ranges;     /* per stage, the source rows it reads (work space) */
    /* The GPU the context chose for the image, or NULL: the CPU. */
    gimg_ctx *ctx;
    struct gimg_gpu *gpu;
    struct gpu_bufs *bufs;
    double kernel_ms, transfer_ms; /* the GPU's, told to ctx after the last rows */
};

typedef struct gpu_bufs gpu_bufs;
#ifdef GIMG_HAVE_CUDA
static gimg_status gpu_band_rows(gimg_conv_bands *cb, int lo, int hi);
static void gpu_bufs_free(struct gimg_gpu *g, gpu_bufs *bf);
#endif
static gimg_cost_job conv_job(const gimg_conv_opts *o, gimg_sample sample, size_t bytes,
                              int height, int threads);

/* The rows of a stage's source that rows [lo, hi) of its output read,
 * through the border (rows past the edges map to rows near them, or to
 * none for the zero border). */
static void include_row(row_range *r, int y)
{
    if (y < 0)
        return;
    r->lo = y < r->lo ? y : r->lo;
    r->hi = y + 1 > r->hi ? y + 1 : r->hi;
}

static row_range source_rows(const gimg_kernel *k, gimg_border b, int H, row_range out)
{
    const long p0 = (long)out.lo - k->anchor_y;
    const long p1 = (long)out.hi - 1 - k->anchor_y + k->height - 1; /* inclusive */
    row_range r = {INT_MAX, INT_MIN};
    const long in0 = p0 > 0 ? p0 : 0, in1 = p1 < H - 1 ? p1 : H - 1;
    if (in0 <= in1) {
        r.lo = (int)in0;
        r.hi = (int)in1 + 1;
    }
    for (long p = p0; p < 0 && p <= p1; p++) /* at most a kernel's height each side */
        include_row(&r, gimg_border_index(p, H, b));
    for (long p = p1; p >= H && p >= p0; p--)
        include_row(&r, gimg_border_index(p, H, b));
    if (r.lo > r.hi)
        r.lo = r.hi = out.lo; /* none */
    return r;
}

/* For output rows [lo, hi) of an image of H rows: ranges[s] is the rows
 * of stage s's source (ranges[0]: the input's) that they need. Each
 * holds the next (a kernel's rows include its anchor's). */
static void chain_rows(const gimg_conv_opts *o, int H, int lo, int hi, row_range *ranges)
{
    row_range r = {lo, hi};
    for (int s = o->n_kernels - 1; s >= 0; s--) {
        r = source_rows(&o->kernels[s], o->border, H, r);
        ranges[s] = r;
    }
}

static void needed_rows(const gimg_conv_bands *cb, int lo, int hi, row_range *ranges)
{
    chain_rows(&cb->o, cb->H, lo, hi, ranges);
}

/*
 * Output rows by sub-images: output rows [lo, hi) are computed as the
 * whole image's path computes the sub-image of the input rows [a, b)
 * they need (chain_rows), taken as an image of its own, and its rows
 * [lo - a, hi - a) kept. They are the whole image's bits: each sample
 * of a stage depends only on the samples it reads; the rows they read
 * are in the sub-image at the same offsets; and where a row reads past
 * the image's top or bottom edge, the sub-image has that edge too (a = 0,
 * or b = H), and its border maps to the same rows (clamp, reflect and
 * reflect101 count from the edge; the zero border reads nothing). The
 * wrap border reads the far edge: not computed so. The GPU computes an
 * image too large for its memory, or taller than its kernels' grids
 * take, so, and the bands of an image read in bands (sub_image_rows).
 */
typedef gimg_status (*sub_image_fn)(void *state, const gimg_image *sub,
                                    const unsigned char *const *rows, int lo, int hi,
                                    gimg_image *out);

/* Output rows [lo, hi) of an image of layout's size, into out (a view of
 * hi - lo rows), by sub-images of at most max_rows rows: rows[i] is input
 * row y0 + i, and holds every row that [lo, hi) read. run computes one
 * sub-image's rows (sub: the sub-image's layout, its first row sub->data
 * unused; rows: its rows); a run refused for memory (GIMG_E_NOMEM) is
 * tried again on half the rows, down to one. ranges: n_kernels of work
 * space. */
static gimg_status sub_image_rows(const gimg_image *layout, const gimg_conv_opts *o,
                                  const unsigned char *const *rows, int y0, int lo, int hi,
                                  gimg_image *out, int max_rows, row_range *ranges,
                                  sub_image_fn run, void *state)
{
    if (o->border == GIMG_BORDER_WRAP)
        return gimg_fail(GIMG_E_USAGE, "the wrap border is not computed by sub-images");
    int chunk = hi - lo;
    for (int y = lo; y < hi;) {
        const int n = chunk < hi - y ? chunk : hi - y;
        chain_rows(o, layout->height, y, y + n, ranges);
        const row_range r = ranges[0];
        if (r.hi - r.lo > max_rows) {
            if (n == 1)
                return gimg_fail(GIMG_E_LIMIT, "a kernel of more than %d rows: too tall for the "
                                               "GPU (use --device cpu)", max_rows);
            chunk = n - (r.hi - r.lo - max_rows) > 0 ? n - (r.hi - r.lo - max_rows) : 1;
            continue;
        }
        gimg_image sub = *layout, part = *out;
        sub.height = r.hi - r.lo;
        sub.data = NULL;
        sub.meta = NULL;
        part.data = gimg_row(out, y - lo);
        part.height = n;
        const gimg_status st = run(state, &sub, rows + (r.lo - y0), y - r.lo, y - r.lo + n, &part);
        if (st == GIMG_E_NOMEM && n > 1) {
            chunk = n / 2;
            continue;
        }
        if (st)
            return st;
        y += n;
    }
    return GIMG_OK;
}

/* The CPU's run of a sub-image, as the reference for the GPU's: its rows
 * copied into an image of their own, convolved whole (conv_cpu_into). */
static gimg_status cpu_sub_image(void *state, const gimg_image *sub,
                                 const unsigned char *const *rows, int lo, int hi,
                                 gimg_image *out)
{
    const gimg_conv_opts *o = state;
    gimg_image in, res;
    gimg_status st = gimg_image_alloc(&in, sub->width, sub->height, sub->channels, sub->sample);
    if (st)
        return st;
    in.maxval = sub->maxval;
    const size_t row_bytes = (size_t)sub->width * gimg_pixel_bytes(sub);
    for (int y = 0; y < sub->height; y++)
        memcpy(gimg_row(&in, y), rows[y], row_bytes);
    if (!(st = gimg_image_alloc(&res, sub->width, sub->height, sub->channels, sub->sample))) {
        if (!(st = conv_cpu_into(&in, o, &res)))
            for (int y = lo; y < hi; y++)
                memcpy(gimg_row(out, y - lo), gimg_row(&res, y), row_bytes);
        gimg_image_free(&res);
    }
    gimg_image_free(&in);
    return st;
}

gimg_status gimg_conv_cpu_sub_images(const gimg_image *in, const gimg_conv_opts *o,
                                     int max_rows, gimg_image *out)
{
    memset(out, 0, sizeof *out);
    gimg_status st = check_opts(in, o);
    if (st)
        return st;
    const unsigned char **rows = malloc((size_t)in->height * sizeof *rows);
    row_range *ranges = calloc((size_t)o->n_kernels, sizeof *ranges);
    if (!rows || !ranges) {
        st = gimg_fail(GIMG_E_NOMEM, "out of memory");
    } else if (!(st = gimg_image_alloc(out, in->width, in->height, in->channels, in->sample))) {
        for (int y = 0; y < in->height; y++)
            rows[y] = gimg_row(in, y);
        st = sub_image_rows(in, o, rows, 0, 0, in->height, out, max_rows, ranges, cpu_sub_image,
                            (void *)o);
        if (st)
            gimg_image_free(out);
        else
            clamp_maxval(in, out);
    }
    free(rows);
    free(ranges);
    return st;
}

gimg_status gimg_conv_bands_begin(gimg_ctx *ctx, const gimg_image *layout,
                                  const gimg_conv_opts *o, gimg_conv_bands **out)
{
    *out = NULL;
    gimg_status st = check_opts(layout, o);
    if (st)
        return st;
    if (o->border == GIMG_BORDER_WRAP)
        return GIMG_OK; /* the first rows need the last ones: read whole */
    gimg_conv_bands *cb = calloc(1, sizeof *cb);
    if (!cb || !(cb->ranges = calloc((size_t)o->n_kernels, sizeof *cb->ranges))) {
        free(cb);
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    }
    cb->o = *o;
    cb->W = layout->width;
    cb->H = layout->height;
    cb->C = layout->channels;
    cb->sample = layout->sample;
    cb->maxval = layout->maxval;
    cb->fn = pick_fns();
    *out = cb;
    if (!ctx)
        return GIMG_OK;
    /* The whole image's job decides where its bands go. Its GPU times are
     * not the cost table's measure (untimed): they hold a band's halo rows
     * twice and the staging of each band from the file's mapping, one band
     * after another, which the table's model of a whole image's copies
     * does not (RESULTS.md, stop 43: 2.2-3.2 GB/s). */
    const size_t bytes = (size_t)cb->H * (size_t)cb->W * gimg_pixel_bytes(layout);
    gimg_cost_job job = conv_job(o, cb->sample, bytes, cb->H, omp_get_max_threads());
    job.untimed = 1;
    if ((st = gimg_ctx_select(ctx, &job, &cb->gpu))) {
        gimg_conv_bands_free(cb);
        *out = NULL;
        return st;
    }
    cb->ctx = ctx;
    return GIMG_OK;
}

void gimg_conv_bands_free(gimg_conv_bands *cb)
{
    if (!cb)
        return;
#ifdef GIMG_HAVE_CUDA
    if (cb->bufs)
        gpu_bufs_free(cb->gpu, cb->bufs);
#endif
    free(cb->bufs);
    gimg_image_free(&cb->window);
    gimg_image_free(&cb->out);
    free(cb->table);
    free(cb->stage[0].v);
    free(cb->stage[1].v);
    free(cb->ranges);
    free(cb);
}

/* Room for `rows` rows in *im (of the bands' layout, *cap rows of room;
 * im->height is the rows in use), its first `keep` rows kept. */
static gimg_status ensure_rows(const gimg_conv_bands *cb, gimg_image *im, int *cap, int rows,
                               int keep)
{
    if (im->data && *cap >= rows)
        return GIMG_OK;
    gimg_image bigger;
    gimg_status st = gimg_image_alloc(&bigger, cb->W, rows, cb->C, cb->sample);
    if (st)
        return st;
    if (keep)
        memcpy(bigger.data, im->data, im->stride_bytes * (size_t)keep);
    gimg_image_free(im);
    *im = bigger;
    *cap = rows;
    return GIMG_OK;
}

static gimg_status ensure_fimage(const gimg_conv_bands *cb, fimage *f, int rows)
{
    if (f->v && f->H >= rows)
        return GIMG_OK;
    free(f->v);
    f->v = NULL;
    return fimage_alloc(f, cb->W, rows, cb->C);
}

/* Output rows [lo, hi) into cb->out by the CPU's stages (run_stage, on
 * rows [r0, r1) of each stage). */
static gimg_status cpu_rows(gimg_conv_bands *cb, int lo, int hi)
{
    gimg_status st = GIMG_OK;
    needed_rows(cb, lo, hi, cb->ranges);
    /* The input's layout (the window's may not be allocated yet). */
    const gimg_image layout = {.width = cb->W, .height = cb->H, .channels = cb->C,
                               .sample = cb->sample};
    row_src src = {&layout, cb->table, NULL, gimg_conv_premultiplied(&cb->o, cb->C),
                   gimg_conv_alpha_max(cb->sample), cb->win_lo};
    const int n = cb->o.n_kernels;
    for (int s = 0; s < n && !st; s++) {
        /* The input's rows aligned with the output's, for the alpha modes. */
        row_sink sink = {NULL, &cb->out, cb->table + (lo - cb->win_lo), &cb->o,
                         gimg_conv_alpha_unit(&cb->o, cb->sample), lo};
        row_range r = {lo, hi};
        if (s + 1 < n) {
            r = cb->ranges[s + 1];
            fimage *next = &cb->stage[s % 2];
            if ((st = ensure_fimage(cb, next, r.hi - r.lo)))
                break;
            sink.f = next;
            sink.y_base = r.lo;
        }
        st = run_stage(&src, &cb->o.kernels[s], cb->o.border, cb->W, cb->H, cb->C, r.lo, r.hi,
                       &sink, &cb->fn);
        src = (row_src){NULL, NULL, sink.f, 0, 0.0f, sink.y_base};
    }
    return st;
}

/* Output rows [lo, hi), whose input rows are in cb->table (rows from
 * win_lo on), into cb->out: on the GPU the context chose, else by the
 * CPU's stages. */
static gimg_status compute_rows(gimg_conv_bands *cb, int lo, int hi)
{
    gimg_status st = ensure_rows(cb, &cb->out, &cb->out_cap, hi - lo, 0);
    if (st)
        return st;
    cb->out.height = hi - lo;
    int done = 0;
#ifdef GIMG_HAVE_CUDA
    if (cb->gpu) {
        if (!(st = gpu_band_rows(cb, lo, hi))) {
            done = 1;
        } else {
            /* Out of the GPU's memory even a row at a time: the CPU's
             * from here on. */
            if (cb->bufs)
                gpu_bufs_free(cb->gpu, cb->bufs);
            cb->gpu = NULL;
            if ((st = gimg_ctx_gpu_fallback(cb->ctx, st)))
                return st;
        }
    }
#endif
    if (!done)
        st = cpu_rows(cb, lo, hi);
    if (!st) {
        gimg_image in = {.sample = cb->sample, .maxval = cb->maxval};
        clamp_maxval(&in, &cb->out);
    }
#ifdef GIMG_HAVE_CUDA
    if (!st && cb->gpu && hi == cb->H) /* the GPU's times, once: the whole image's job */
        gimg_ctx_add_gpu_times(cb->ctx, cb->kernel_ms, cb->transfer_ms);
#endif
    return st;
}

/* The last output row + 1 whose input rows are all given: every row once
 * the last band is in; otherwise the largest hi whose rows [next_out, hi)
 * read no row past rows_in. */
static int complete_rows(gimg_conv_bands *cb)
{
    if (cb->rows_in == cb->H)
        return cb->H;
    int hi = cb->next_out;
    int step = cb->rows_in - cb->next_out > 1 ? cb->rows_in - cb->next_out : 1;
    while (step > 0) {
        if (hi + step <= cb->H) {
            needed_rows(cb, cb->next_out, hi + step, cb->ranges);
            if (cb->ranges[0].hi <= cb->rows_in) {
                hi += step;
                continue;
            }
        }
        step /= 2;
    }
    return hi;
}

/* After output rows up to next_out: the window keeps, copied, the input
 * rows that the rows still to come read (through the bottom border, a row
 * may read rows above those of the rows before it: all of them are
 * asked), from the window and from the band (rows from first on). */
static gimg_status keep_window(gimg_conv_bands *cb, const gimg_image *band, int first)
{
    int keep_from = cb->rows_in;
    if (cb->next_out < cb->H) {
        needed_rows(cb, cb->next_out, cb->H, cb->ranges);
        keep_from = cb->ranges[0].lo;
    }
    if (keep_from < cb->win_lo)
        keep_from = cb->win_lo;
    const int from_window = first - keep_from > 0 ? first - keep_from : 0;
    const int from_band = cb->rows_in - (keep_from > first ? keep_from : first);
    if (from_window > 0 && keep_from > cb->win_lo)
        memmove(cb->window.data, gimg_row(&cb->window, keep_from - cb->win_lo),
                cb->window.stride_bytes * (size_t)from_window);
    gimg_status st;
    if (from_window + from_band > 0 &&
        (st = ensure_rows(cb, &cb->window, &cb->win_cap, from_window + from_band, from_window)))
        return st;
    const size_t row_bytes = (size_t)cb->W * cb->C * cb->sample;
    for (int i = 0; i < from_band; i++)
        memcpy(gimg_row(&cb->window, from_window + i),
               gimg_row(band, cb->rows_in - from_band - first + i), row_bytes);
    cb->win_lo = keep_from;
    cb->win_rows = from_window + from_band;
    cb->window.height = cb->win_rows > 0 ? cb->win_rows : 1;
    return GIMG_OK;
}

gimg_status gimg_conv_bands_add(gimg_conv_bands *cb, const gimg_image *band, gimg_image *out,
                                int *y0)
{
    memset(out, 0, sizeof *out);
    *y0 = cb->next_out;
    if (band->width != cb->W || band->channels != cb->C || band->sample != cb->sample ||
        band->height < 1 || band->height > cb->H - cb->rows_in)
        return gimg_fail(GIMG_E_USAGE, "gimg_conv_bands_add: a band of another layout, or "
                                       "past the image's rows");
    /* The rows at hand, by table: the window's copies, then the band's
     * rows where they lie (copying them in cost as much as the kernels'
     * loads). */
    const int first = cb->rows_in;
    if (!cb->win_rows)
        cb->win_lo = first;
    const int n = cb->win_rows + band->height;
    if (n > cb->table_cap) {
        const unsigned char **t = realloc(cb->table, (size_t)n * sizeof *t);
        if (!t)
            return gimg_fail(GIMG_E_NOMEM, "out of memory");
        cb->table = t;
        cb->table_cap = n;
    }
    for (int i = 0; i < cb->win_rows; i++)
        cb->table[i] = gimg_row(&cb->window, i);
    for (int i = 0; i < band->height; i++)
        cb->table[cb->win_rows + i] = gimg_row(band, i);
    cb->rows_in += band->height;
    const int hi = complete_rows(cb);
    gimg_status st;
    if (hi > cb->next_out && (st = compute_rows(cb, cb->next_out, hi)))
        return st;
    const int lo = cb->next_out;
    cb->next_out = hi > lo ? hi : lo;
    if ((st = keep_window(cb, band, first)))
        return st;
    if (hi > lo) {
        *out = cb->out;
        out->meta = NULL;
        *y0 = lo;
    }
    return GIMG_OK;
}

/* ----------------------------------------------------------------------- GPU */

#ifdef GIMG_HAVE_CUDA
#include "gpu_internal.h"
#include "conv.h"

/* Float images (and device taps) of GPU runs, grown on demand, kept from
 * run to run (the sub-images of one image), freed by gpu_bufs_free. */
struct gpu_bufs {
    void *f[3];
    size_t f_bytes[3];
    float *d_taps;
    size_t taps_cap;
};

/* Float image i of at least `bytes`. */
static gimg_status float_buf(gimg_gpu *g, gpu_bufs *bf, int i, size_t bytes)
{
    if (bf->f_bytes[i] >= bytes)
        return GIMG_OK;
    gimg_gpu_lane_free(g, bf->f[i], bf->f_bytes[i]); /* after the kernels queued on it */
    bf->f[i] = NULL;
    bf->f_bytes[i] = 0;
    gimg_status st = gimg_gpu_lane_malloc(g, &bf->f[i], bytes);
    if (!st)
        bf->f_bytes[i] = bytes;
    return st;
}

static void gpu_bufs_free(gimg_gpu *g, gpu_bufs *bf)
{
    for (int i = 0; i < 3; i++)
        gimg_gpu_lane_free(g, bf->f[i], bf->f_bytes[i]);
    gimg_gpu_lane_free(g, bf->d_taps, bf->taps_cap * sizeof(float));
    memset(bf, 0, sizeof *bf);
}

static gimg_cuda_plane plane_of(void *d, size_t pitch, gimg_sample s)
{
    gimg_cuda_plane p = {d, pitch, (int)s};
    return p;
}

/* n taps at offset in g's GPU's __constant__ memory, for kernels queued
 * next on g's stream; with the GPU's constants lock held. The lanes of a
 * GPU share that memory and a batch's lanes run the same kernels, so taps
 * it already holds are not copied again, and the lanes' kernels queue
 * without waiting for each other. New taps (once a batch) first wait for
 * every kernel queued on the GPU, which may read the old ones, and are in
 * place before the lock is given up. */
static gimg_status set_taps(gimg_gpu *g, const float *taps, int offset, int n)
{
    if (gimg_cuda_conv_taps_held(taps, offset, n))
        return GIMG_OK;
    GIMG_CUDA(cudaDeviceSynchronize());
    GIMG_CUDA(gimg_cuda_conv_set_taps(taps, offset, n, g->stream));
    GIMG_CUDA(cudaStreamSynchronize(g->stream));
    return GIMG_OK;
}

/* A separable kernel from src to dst: fused where it fits and pays, else a
 * row pass into a float image and a column pass out of it. epi: NULL for a
 * raw float result. */
static gimg_status gpu_separable(gimg_gpu *g, const gimg_kernel *k, gimg_border b, int W, int H,
                                 int C, gimg_cuda_plane src, gimg_cuda_plane dst,
                                 const gimg_cuda_epilogue *epi, gpu_bufs *bf, size_t fpitch)
{
    const int kw = k->width, kh = k->height;
    gimg_status st;
    if ((st = set_taps(g, k->row, 0, kw)) ||
        (st = set_taps(g, k->col, GIMG_CUDA_CONV_COL_OFFSET, kh)))
        return st;
    if (kh <= GIMG_CUDA_CONV_FUSE_MAX_KH && gimg_cuda_conv_separable_fits(C, kw, kh)) {
        GIMG_CUDA(gimg_cuda_conv_separable(src, dst, W, H, C, kw, kh, k->anchor_x, k->anchor_y, b,
                                           epi, g->stream));
        return GIMG_OK;
    }
    if ((st = float_buf(g, bf, 2, fpitch * (size_t)H)))
        return st;
    const gimg_cuda_plane tmp = plane_of(bf->f[2], fpitch, GIMG_F32);
    GIMG_CUDA(gimg_cuda_conv_dense(src, tmp, W, H, C, kw, 1, k->anchor_x, 0, b, 0, NULL, NULL,
                                   g->stream));
    GIMG_CUDA(gimg_cuda_conv_dense(tmp, dst, W, H, C, 1, kh, 0, k->anchor_y, b,
                                   GIMG_CUDA_CONV_COL_OFFSET, NULL, epi, g->stream));
    return GIMG_OK;
}

/* One kernel of a chain, float to float. */
static gimg_status gpu_stage(gimg_gpu *g, const gimg_kernel *k, gimg_border b, int W, int H,
                             int C, gimg_cuda_plane src, gimg_cuda_plane dst, gpu_bufs *bf,
                             size_t fpitch)
{
    const int kw = k->width, kh = k->height, ax = k->anchor_x, ay = k->anchor_y;
    const size_t taps = (size_t)kw * kh;
    gimg_status st;
    if (k->kind == GIMG_KERNEL_MAGNITUDE) {
        if ((st = set_taps(g, k->taps, 0, (int)taps)) ||
            (st = set_taps(g, k->taps_y, (int)taps, (int)taps)))
            return st;
        GIMG_CUDA(gimg_cuda_conv_magnitude(src, dst, W, H, C, kw, kh, ax, ay, b, g->stream));
        return GIMG_OK;
    }
    if (k->kind == GIMG_KERNEL_SEPARABLE)
        return gpu_separable(g, k, b, W, H, C, src, dst, NULL, bf, fpitch);
    if (taps <= GIMG_CUDA_CONV_CONST_TAPS) {
        if ((st = set_taps(g, k->taps, 0, (int)taps)))
            return st;
        GIMG_CUDA(gimg_cuda_conv_dense(src, dst, W, H, C, kw, kh, ax, ay, b, 0, NULL, NULL,
                                       g->stream));
        return GIMG_OK;
    }
    if (bf->taps_cap < taps) {
        gimg_gpu_lane_free(g, bf->d_taps, bf->taps_cap * sizeof(float)); /* after its kernels */
        bf->d_taps = NULL;
        bf->taps_cap = 0;
        if ((st = gimg_gpu_lane_malloc(g, (void **)&bf->d_taps, taps * sizeof(float))))
            return st;
        bf->taps_cap = taps;
    }
    GIMG_CUDA(cudaMemcpyAsync(bf->d_taps, k->taps, taps * sizeof(float), cudaMemcpyHostToDevice,
                              g->stream));
    GIMG_CUDA(gimg_cuda_conv_dense(src, dst, W, H, C, kw, kh, ax, ay, b, 0, bf->d_taps, NULL,
                                   g->stream));
    GIMG_CUDA(cudaStreamSynchronize(g->stream)); /* k->taps is pageable and may change */
    return GIMG_OK;
}

/* Queues the kernels from d_in to d_out, between g's two events. */
static gimg_status gpu_kernels(gimg_gpu *g, const gimg_image *in, const gimg_conv_opts *o,
                               const gimg_dimage *d_in, const gimg_dimage *d_out, gpu_bufs *bf)
{
    const int W = in->width, H = in->height, C = in->channels;
    const int premult = gimg_conv_premultiplied(o, C);
    gimg_status st;
    const gimg_cuda_plane pin = plane_of(d_in->d_data, d_in->pitch_bytes, in->sample);
    const gimg_cuda_plane pout = plane_of(d_out->d_data, d_out->pitch_bytes, in->sample);
    /* alpha_src, the input: keep mode's alpha, and premultiply mode's where
     * the gain is 0 (gimg_cuda_conv_narrow). */
    gimg_cuda_epilogue epi = {0, o->scale, o->bias, o->absolute,
                              gimg_conv_has_alpha(C) && o->alpha == GIMG_ALPHA_KEEP, pin};
    const gimg_kernel *k0 = &o->kernels[0];
    const size_t taps0 = (size_t)k0->width * k0->height;
    const size_t fpitch = ((size_t)W * C * sizeof(float) + 15) & ~(size_t)15;
    GIMG_CUDA(cudaEventRecord(g->ev_start, g->stream));
    if (o->n_kernels == 1 && !premult && k0->kind == GIMG_KERNEL_SEPARABLE) {
        /* From the input's type to the output's, fused or through a float image. */
        if ((st = gpu_separable(g, k0, o->border, W, H, C, pin, pout, &epi, bf, fpitch)))
            return st;
    } else if (o->n_kernels == 1 && !premult && k0->kind == GIMG_KERNEL_DENSE &&
               taps0 <= GIMG_CUDA_CONV_CONST_TAPS) {
        if ((st = set_taps(g, k0->taps, 0, (int)taps0)))
            return st;
        GIMG_CUDA(gimg_cuda_conv_dense(pin, pout, W, H, C, k0->width, k0->height, k0->anchor_x,
                                       k0->anchor_y, o->border, 0, NULL, &epi, g->stream));
    } else {
        /* Widen (and premultiply), the kernels float to float, narrow. */
        if ((st = float_buf(g, bf, 0, fpitch * (size_t)H)) ||
            (st = float_buf(g, bf, 1, fpitch * (size_t)H)))
            return st;
        gimg_cuda_plane f[2] = {plane_of(bf->f[0], fpitch, GIMG_F32),
                                plane_of(bf->f[1], fpitch, GIMG_F32)};
        GIMG_CUDA(gimg_cuda_conv_widen(pin, f[0], W, H, C, premult, g->stream));
        int cur = 0;
        for (int i = 0; i < o->n_kernels; i++, cur ^= 1)
            if ((st = gpu_stage(g, &o->kernels[i], o->border, W, H, C, f[cur], f[cur ^ 1], bf,
                                fpitch)))
                return st;
        GIMG_CUDA(gimg_cuda_conv_narrow(f[cur], pout, W, H, C, premult,
                                        gimg_conv_alpha_unit(o, in->sample), &epi, g->stream));
    }
    GIMG_CUDA(cudaEventRecord(g->ev_stop, g->stream));
    return GIMG_OK;
}

static gimg_status gpu_run(gimg_gpu *g, const gimg_image *in, const gimg_conv_opts *o,
                           gimg_image *out, gpu_bufs *bf, double *kernel_ms)
{
    gimg_dimage d_in, d_out;
    gimg_status st;
    if ((st = gimg_gpu_image(g, 0, in->width, in->height, in->channels, in->sample, &d_in)) ||
        (st = gimg_gpu_image(g, 1, in->width, in->height, in->channels, in->sample, &d_out)) ||
        (st = gimg_gpu_upload(g, in, &d_in)))
        return st;
    /* The other lanes on this GPU run meanwhile; only the taps in
     * __constant__ memory are one for all (set_taps). */
    gimg_gpu_lock_constants(g);
    st = gpu_kernels(g, in, o, &d_in, &d_out, bf);
    gimg_gpu_unlock_constants(g);
    if (st)
        return st;
    GIMG_CUDA(cudaEventSynchronize(g->ev_stop));
    if ((st = gimg_gpu_download(g, &d_out, out)))
        return st;
    float ms = 0;
    GIMG_CUDA(cudaEventElapsedTime(&ms, g->ev_start, g->ev_stop));
    if (kernel_ms)
        *kernel_ms = ms;
    return GIMG_OK;
}

/* A sub-image's run on the GPU (sub_image_fn): its rows uploaded (a run
 * of rows equally far apart at a time: a band's, the window's), the
 * kernels over it, rows [lo, hi) downloaded. */
typedef struct {
    gimg_gpu *g;
    const gimg_conv_opts *o;
    gpu_bufs *bf;
    double kernel_ms;
} gpu_sub_state;

static gimg_status gpu_sub_image_run(gpu_sub_state *s, const gimg_image *sub,
                                     const unsigned char *const *rows, int lo, int hi,
                                     gimg_image *out)
{
    gimg_gpu *g = s->g;
    const int W = sub->width, H = sub->height, C = sub->channels;
    const size_t row_bytes = (size_t)W * gimg_pixel_bytes(sub);
    gimg_dimage d_in, d_out;
    gimg_status st;
    if ((st = gimg_gpu_image(g, 0, W, H, C, sub->sample, &d_in)) ||
        (st = gimg_gpu_image(g, 1, W, H, C, sub->sample, &d_out)))
        return st;
    for (int i = 0, j; i < H; i = j) {
        uintptr_t step = row_bytes;
        if (i + 1 < H && (uintptr_t)rows[i + 1] - (uintptr_t)rows[i] >= row_bytes &&
            rows[i + 1] > rows[i])
            step = (uintptr_t)rows[i + 1] - (uintptr_t)rows[i];
        for (j = i + 1; j < H && (uintptr_t)rows[j] - (uintptr_t)rows[j - 1] == step; j++)
            ;
        gimg_image h = *sub;
        h.data = (unsigned char *)rows[i];
        h.height = j - i;
        h.stride_bytes = step;
        gimg_dimage d = d_in;
        d.d_data = (unsigned char *)d_in.d_data + (size_t)i * d_in.pitch_bytes;
        d.height = j - i;
        if ((st = gimg_gpu_upload(g, &h, &d)))
            return st;
    }
    gimg_gpu_lock_constants(g);
    st = gpu_kernels(g, sub, s->o, &d_in, &d_out, s->bf);
    gimg_gpu_unlock_constants(g);
    if (st)
        return st;
    GIMG_CUDA(cudaEventSynchronize(g->ev_stop));
    gimg_dimage d = d_out;
    d.d_data = (unsigned char *)d_out.d_data + (size_t)lo * d_out.pitch_bytes;
    d.height = hi - lo;
    /* The rows go to the host, whatever the batch keeps on the GPU. */
    const int keep = g->keep_outputs;
    g->keep_outputs = 0;
    st = gimg_gpu_download(g, &d, out);
    g->keep_outputs = keep;
    if (st)
        return st;
    float ms = 0;
    GIMG_CUDA(cudaEventElapsedTime(&ms, g->ev_start, g->ev_stop));
    s->kernel_ms += ms;
    return GIMG_OK;
}

/* A sub-image refused for memory leaves nothing held on the GPU, so that
 * the smaller one tried next has all of it. */
static gimg_status gpu_sub_image(void *state, const gimg_image *sub,
                                 const unsigned char *const *rows, int lo, int hi,
                                 gimg_image *out)
{
    gpu_sub_state *s = state;
    gimg_status st = gpu_sub_image_run(s, sub, rows, lo, hi, out);
    if (st == GIMG_E_NOMEM) {
        gimg_gpu_release_images(s->g);
        gpu_bufs_free(s->g, s->bf);
    }
    return st;
}

/* The whole image at once where it fits; else by sub-images: an image
 * over the GPU's memory (or GIMG_GPU_MEM_LIMIT), or taller than its
 * kernels' grids (GIMG_CONV_GPU_MAX_ROWS). */
gimg_status gimg_conv_gpu(gimg_gpu *g, const gimg_image *in, const gimg_conv_opts *o,
                          gimg_image *out, double *kernel_ms)
{
    gimg_status st = check_opts(in, o);
    if (st)
        return st;
    gpu_bufs bf = {0};
    st = in->height <= GIMG_CONV_GPU_MAX_ROWS ? gpu_run(g, in, o, out, &bf, kernel_ms)
                                              : GIMG_E_NOMEM;
    /* An input on the GPU already (the GPU codecs') has no rows here. */
    if (st == GIMG_E_NOMEM && in->data && o->border != GIMG_BORDER_WRAP) {
        gimg_gpu_release_images(g);
        gpu_bufs_free(g, &bf);
        const unsigned char **rows = malloc((size_t)in->height * sizeof *rows);
        row_range *ranges = calloc((size_t)o->n_kernels, sizeof *ranges);
        if (!rows || !ranges) {
            st = gimg_fail(GIMG_E_NOMEM, "out of memory");
        } else {
            for (int y = 0; y < in->height; y++)
                rows[y] = gimg_row(in, y);
            gpu_sub_state s = {g, o, &bf, 0};
            st = sub_image_rows(in, o, rows, 0, 0, in->height, out, GIMG_CONV_GPU_MAX_ROWS,
                                ranges, gpu_sub_image, &s);
            if (kernel_ms)
                *kernel_ms = s.kernel_ms;
        }
        free(rows);
        free(ranges);
    } else if (st == GIMG_E_NOMEM && in->height > GIMG_CONV_GPU_MAX_ROWS) {
        st = gimg_fail(GIMG_E_LIMIT, "%d rows: the GPU takes at most %d with the wrap border "
                                     "(use --device cpu)", in->height, GIMG_CONV_GPU_MAX_ROWS);
    }
    if (st)
        cudaStreamSynchronize(g->stream);
    else
        clamp_maxval(in, out);
    gpu_bufs_free(g, &bf);
    return st;
}

/* The GPU's part of a band (sub_image_rows): rows [lo, hi) of cb->out. */
static gimg_status gpu_band_rows(gimg_conv_bands *cb, int lo, int hi)
{
    const gimg_image layout = {.width = cb->W, .height = cb->H, .channels = cb->C,
                               .sample = cb->sample, .maxval = cb->maxval};
    if (!cb->bufs && !(cb->bufs = calloc(1, sizeof *cb->bufs)))
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    gpu_sub_state s = {cb->gpu, &cb->o, cb->bufs, 0};
    double t0 = gimg_now_ms();
    gimg_status st = sub_image_rows(&layout, &cb->o, cb->table, cb->win_lo, lo, hi, &cb->out,
                                    GIMG_CONV_GPU_MAX_ROWS, cb->ranges, gpu_sub_image, &s);
    cb->kernel_ms += s.kernel_ms;
    cb->transfer_ms += gimg_now_ms() - t0 - s.kernel_ms;
    return st;
}
#endif

/* ------------------------------------------------------------------ dispatch */

double gimg_kernel_fmas(const gimg_kernel *k)
{
    switch (k->kind) {
    case GIMG_KERNEL_SEPARABLE: return (double)k->width + k->height;
    case GIMG_KERNEL_MAGNITUDE: return 2.0 * k->width * k->height + 1;
    default: return (double)k->width * k->height;
    }
}

/* A kernel whose tap sum is within float rounding of 0 next to its taps'
 * weight (log:SIGMA, made zero-sum in double, then rounded to float) has a
 * zero gain, as have gradient magnitudes: alpha is then kept. */
float gimg_conv_alpha_unit(const gimg_conv_opts *o, gimg_sample s)
{
    double gain = 1;
    for (int i = 0; i < o->n_kernels; i++) {
        const gimg_kernel *k = &o->kernels[i];
        double sum = 0, weight = 0;
        if (k->kind == GIMG_KERNEL_MAGNITUDE)
            return 0.0f;
        for (int t = 0; t < k->width * k->height; t++) {
            sum += k->taps[t];
            weight += fabs(k->taps[t]);
        }
        if (fabs(sum) <= 1e-6 * weight)
            return 0.0f;
        gain *= sum;
    }
    return (float)(gimg_conv_alpha_max(s) * gain);
}

/* The convolution as --device auto weighs it (cost.h): the kernels' FMAs
 * per byte of image, and the GPU's hard limits. */
static gimg_cost_job conv_job(const gimg_conv_opts *o, gimg_sample sample, size_t bytes,
                              int height, int threads)
{
    double fmas = 0;
    for (int i = 0; i < o->n_kernels; i++)
        fmas += gimg_kernel_fmas(&o->kernels[i]);
    gimg_cost_job job = {.op = GIMG_COST_CONV, .bytes = bytes, .threads = threads,
                         .fmas_per_byte = fmas / (double)sample};
    if (height > GIMG_CONV_GPU_MAX_ROWS && o->border == GIMG_BORDER_WRAP)
        job.gpu_refused = "more rows than the GPU's kernels take with the wrap border";
    else if (bytes < GIMG_CONV_GPU_MIN_BYTES)
        job.gpu_refused = "under 256 KiB, never worth the GPU";
    return job;
}

size_t gimg_conv_auto_min_bytes(const gimg_conv_opts *o, gimg_sample sample, int threads)
{
    gimg_cost_job job = conv_job(o, sample, SIZE_MAX, 1, threads);
    size_t bytes = gimg_cost_break_even_bytes(gimg_cost_get(), &job, GIMG_GPU_COLD);
    return bytes < GIMG_CONV_GPU_MIN_BYTES ? GIMG_CONV_GPU_MIN_BYTES : bytes;
}

gimg_status gimg_conv(gimg_ctx *ctx, const gimg_image *in, const gimg_conv_opts *o,
                      gimg_image *out)
{
    memset(out, 0, sizeof *out);
    gimg_status st = check_opts(in, o);
    if (st)
        return st;
    struct gimg_gpu *gpu;
    size_t bytes = (size_t)in->height * (size_t)in->width * gimg_pixel_bytes(in);
    const gimg_cost_job job = conv_job(o, in->sample, bytes, in->height, omp_get_max_threads());
    /* A failure of the server's leaves the work here, unless the input is
     * a JPEG only the server was to decode (the driver decodes it then). */
    struct gimg_remote *server = gimg_ctx_server(ctx, &job);
    if (server && ((st = gimg_remote_conv(server, in, o, out)) == GIMG_OK || !in->data))
        return st;
    if ((st = gimg_ctx_select(ctx, &job, &gpu)))
        return st;
    if ((st = gimg_image_alloc(out, in->width, in->height, in->channels, in->sample)))
        return st;
#ifdef GIMG_HAVE_CUDA
    if (gpu) {
        double kernel_ms = 0, t0 = gimg_now_ms();
        if (!(st = gimg_conv_gpu(gpu, in, o, out, &kernel_ms))) {
            gimg_ctx_add_gpu_times(ctx, kernel_ms, gimg_now_ms() - t0 - kernel_ms);
            return GIMG_OK;
        }
        /* A GPU out of memory leaves the work to the CPU. */
        if ((st = gimg_ctx_gpu_fallback(ctx, st))) {
            gimg_image_free(out);
            return st;
        }
    }
#endif
    if ((st = conv_cpu_into(in, o, out)))
        gimg_image_free(out);
    return st;
}
