/*
 * hist.c — histograms on the CPU: the reference (a plain loop over every
 * sample, gimg_hist_slot_of per sample), the fast backend, and the dispatch
 * between the CPU and the GPU (kernels/histogram.cu).
 *
 * The fast backend gives each OpenMP thread its own counters: 32-bit, in
 * four replicas for small histograms (consecutive pixels go to different
 * replicas, so that a constant image does not wait on one counter's
 * store-to-load round trip), flushed into 64-bit totals before they could
 * overflow. Integer samples find their slot through a table (or a shift,
 * see gimg_hist_intmap); the threads' totals are summed at the end.
 */
#include "gimg_hist.h"
#include "cli.h"
#include "ctx_internal.h"
#include "remote.h"
#include "hist_internal.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/*
 * Integer samples count in the file's units, 0..max (gimg_image_max: the
 * maxval, else 255 or 65535): one bin per value up to max 255, else 256
 * bins of k = ceil((max + 1) / 256) values each, from 0 — whole values a
 * bin, so that no bin counts more values than another (maxval 4095: 256
 * bins of 16 over [0, 4096); 1000: of 4 over [0, 1024), the last bins
 * past the maxval empty). 255 and 65535 give the full-range defaults.
 */
void gimg_hist_default_params(const gimg_image *im, gimg_hist_params *p)
{
    p->lo = 0;
    p->luma = 0;
    if (im->sample == GIMG_F32) {
        p->bins = 256;
        p->hi = 1;
        return;
    }
    const unsigned values = gimg_image_max(im) + 1;
    if (values <= 256) {
        p->bins = (int)values;
        p->hi = values;
    } else {
        p->bins = 256;
        p->hi = 256.0 * ((values + 255) / 256);
    }
}

gimg_status gimg_hist_parse_range(const char *s, double *lo, double *hi)
{
    const char *colon = strchr(s, ':');
    if (!colon || strchr(colon + 1, ':'))
        return gimg_fail(GIMG_E_USAGE, "--range: '%s' is not LO:HI", s);
    char a[64];
    size_t n = (size_t)(colon - s);
    if (n == 0 || n >= sizeof a || !colon[1])
        return gimg_fail(GIMG_E_USAGE, "--range: '%s' is not LO:HI", s);
    memcpy(a, s, n);
    a[n] = 0;
    double l, h;
    gimg_status st;
    if ((st = gimg_cli_parse_double("--range", a, -1e300, 1e300, &l)) ||
        (st = gimg_cli_parse_double("--range", colon + 1, -1e300, 1e300, &h)))
        return st;
    if (!(l < h) || !isfinite(h - l))
        return gimg_fail(GIMG_E_USAGE, "--range: '%s': LO must be below HI", s);
    *lo = l;
    *hi = h;
    return GIMG_OK;
}

gimg_status gimg_hist_alloc(const gimg_image *im, const gimg_hist_params *p, gimg_hist *h)
{
    memset(h, 0, sizeof *h);
    if (p->bins < 1 || p->bins > GIMG_HIST_MAX_BINS)
        return gimg_fail(GIMG_E_USAGE, "bins: %d is out of range (1 to %d)", p->bins,
                         GIMG_HIST_MAX_BINS);
    if (!(p->lo < p->hi) || !isfinite(p->lo) || !isfinite(p->hi) || !isfinite(p->hi - p->lo))
        return gimg_fail(GIMG_E_USAGE, "range: [%g, %g] is empty or not finite", p->lo, p->hi);
    if (im->channels < 1 || im->channels > 4)
        return gimg_fail(GIMG_E_FORMAT, "%d channels (1 to 4 expected)", im->channels);
    h->channels = im->channels + (p->luma ? 1 : 0);
    h->bins = p->bins;
    h->lo = p->lo;
    h->hi = p->hi;
    h->counts = calloc((size_t)h->channels * (size_t)p->bins, sizeof *h->counts);
    if (!h->counts)
        return gimg_fail(GIMG_E_NOMEM, "out of memory for a histogram of %d bins", p->bins);
    return GIMG_OK;
}

gimg_status gimg_hist_add(gimg_hist *total, const gimg_hist *part)
{
    const size_t n = (size_t)part->channels * (size_t)part->bins;
    if (!total->counts) {
        *total = *part;
        if (!(total->counts = calloc(n, sizeof *total->counts))) {
            memset(total, 0, sizeof *total);
            return gimg_fail(GIMG_E_NOMEM, "out of memory");
        }
        memset(total->below, 0, sizeof total->below);
        memset(total->above, 0, sizeof total->above);
        memset(total->nan, 0, sizeof total->nan);
    } else if (total->channels != part->channels || total->bins != part->bins ||
               total->lo != part->lo || total->hi != part->hi) {
        return gimg_fail(GIMG_E_USAGE, "gimg_hist_add: histograms of other bins");
    }
    for (size_t i = 0; i < n; i++)
        total->counts[i] += part->counts[i];
    for (int c = 0; c < part->channels; c++) {
        total->below[c] += part->below[c];
        total->above[c] += part->above[c];
        total->nan[c] += part->nan[c];
    }
    return GIMG_OK;
}

void gimg_hist_free(gimg_hist *h)
{
    free(h->counts);
    memset(h, 0, sizeof *h);
}

/* ---------------------------------------------------------------- reference */

static double sample_at(const unsigned char *row, size_t i, gimg_sample s)
{
    if (s == GIMG_U8)
        return row[i];
    if (s == GIMG_U16)
        return ((const uint16_t *)row)[i];
    return ((const float *)row)[i];
}

/* Luma of pixel x of row: the gray sample for 1-2 channels. */
static double luma_at(const unsigned char *row, int x, int channels, gimg_sample s)
{
    size_t i = (size_t)x * channels;
    if (channels < 3)
        return sample_at(row, i, s);
    if (s == GIMG_F32) {
        const float *f = (const float *)row + i;
        return gimg_luma_float(f[0], f[1], f[2]);
    }
    return gimg_luma_int((uint32_t)sample_at(row, i, s), (uint32_t)sample_at(row, i + 1, s),
                         (uint32_t)sample_at(row, i + 2, s));
}

static void count_slot(gimg_hist *h, int c, int slot)
{
    if (slot < h->bins)
        h->counts[(size_t)c * h->bins + slot]++;
    else if (slot == h->bins + GIMG_HIST_SLOT_BELOW)
        h->below[c]++;
    else if (slot == h->bins + GIMG_HIST_SLOT_ABOVE)
        h->above[c]++;
    else
        h->nan[c]++;
}

gimg_status gimg_hist_compute_cpu(const gimg_image *im, const gimg_hist_params *p,
                                  gimg_hist *out)
{
    gimg_status st = gimg_hist_alloc(im, p, out);
    if (st)
        return st;
    const int closed = im->sample == GIMG_F32;
    const double width = p->hi - p->lo;
    for (int y = 0; y < im->height; y++) {
        const unsigned char *row = gimg_row(im, y);
        for (int x = 0; x < im->width; x++) {
            for (int c = 0; c < im->channels; c++)
                count_slot(out, c,
                           gimg_hist_slot_of(sample_at(row, (size_t)x * im->channels + c,
                                                       im->sample),
                                             p->lo, p->hi, width, p->bins, closed));
            if (p->luma)
                count_slot(out, im->channels,
                           gimg_hist_slot_of(luma_at(row, x, im->channels, im->sample), p->lo,
                                             p->hi, width, p->bins, closed));
        }
    }
    return GIMG_OK;
}

/* ------------------------------------------------------- integer slot maps */

gimg_status gimg_hist_intmap_init(gimg_sample sample, const gimg_hist_params *p,
                                  gimg_hist_intmap *m)
{
    memset(m, 0, sizeof *m);
    m->lut_size = sample == GIMG_U8 ? 256 : 65536;
    const double width = p->hi - p->lo;
    /* The shift form: an integer lo within the samples' reach and bins of
     * 2^shift values each; then confirmed value by value below. */
    int shift = 0;
    while (shift <= 16 && (double)p->bins * (double)(1 << shift) < width)
        shift++;
    if (shift <= 16 && (double)p->bins * (double)(1 << shift) == width && p->lo == floor(p->lo) &&
        p->lo >= -(double)(1 << 20) && p->lo <= (double)(1 << 20)) {
        m->use_shift = 1;
        m->first = (int)p->lo;
        m->shift = shift;
        const long long end = (long long)m->first + ((long long)p->bins << shift);
        for (int v = 0; v < m->lut_size && m->use_shift; v++) {
            int want = gimg_hist_slot_of(v, p->lo, p->hi, width, p->bins, 0);
            int got = v < m->first ? p->bins + GIMG_HIST_SLOT_BELOW
                      : v >= end   ? p->bins + GIMG_HIST_SLOT_ABOVE
                                   : (v - m->first) >> shift;
            m->use_shift = want == got;
        }
        if (m->use_shift)
            return GIMG_OK;
    }
    m->use_shift = 0;
    m->lut = malloc((size_t)m->lut_size * sizeof *m->lut);
    if (!m->lut)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    for (int v = 0; v < m->lut_size; v++)
        m->lut[v] = (uint32_t)gimg_hist_slot_of(v, p->lo, p->hi, width, p->bins, 0);
    return GIMG_OK;
}

void gimg_hist_intmap_free(gimg_hist_intmap *m)
{
    free(m->lut);
    m->lut = NULL;
}

/* ------------------------------------------------------------ fast backend */

/* Adds a thread's 64-bit totals (slots per channel) into the result. */
static void merge_totals(gimg_hist *h, const uint64_t *tot, int stride)
{
    for (int c = 0; c < h->channels; c++) {
        const uint64_t *t = tot + (size_t)c * stride;
        uint64_t *dst = h->counts + (size_t)c * h->bins;
        for (int b = 0; b < h->bins; b++)
            dst[b] += t[b];
        h->below[c] += t[h->bins + GIMG_HIST_SLOT_BELOW];
        h->above[c] += t[h->bins + GIMG_HIST_SLOT_ABOVE];
        h->nan[c] += t[h->bins + GIMG_HIST_SLOT_NAN];
    }
}

/* The slot of an integer sample through the map. FULL: the shift form from
 * 0 covering every sample value, so no range checks. */
static inline __attribute__((always_inline)) uint32_t int_slot(const gimg_hist_intmap *m,
                                                               int bins, uint32_t v,
                                                               const int FULL)
{
    if (FULL)
        return v >> m->shift;
    if (m->lut)
        return m->lut[v];
    int d = (int)v - m->first;
    if (d < 0)
        return (uint32_t)(bins + GIMG_HIST_SLOT_BELOW);
    d >>= m->shift;
    return d < bins ? (uint32_t)d : (uint32_t)(bins + GIMG_HIST_SLOT_ABOVE);
}

/*
 * Counts rows [y0, y1) into sub (R replicas of C' = channels + luma
 * channels of `stride` 32-bit counters each). Inlined per (channels,
 * sample, luma, replicas), so the inner loop has constant shapes.
 */
static inline __attribute__((always_inline)) void
count_rows(const gimg_image *im, const gimg_hist_params *p, const gimg_hist_intmap *m,
           uint32_t *sub, int stride, int y0, int y1, const int C, const gimg_sample S,
           const int LUMA, const int R, const int FULL)
{
    const int bins = p->bins, CL = C + LUMA;
    const double lo = p->lo, hi = p->hi, width = hi - lo;
    const size_t rep = (size_t)CL * stride;
    /* Copies, so that the counters' stores do not make them reloads. */
    const int W = im->width, shift = m->shift;
    const gimg_hist_intmap map = *m;
    for (int y = y0; y < y1; y++) {
        const unsigned char *row = gimg_row(im, y);
        int x = 0;
        if (S != GIMG_F32 && FULL && R == 4) {
            /* Four pixels a step, pixel k into replica k (as x & 3 below),
             * every loop unrolled: the samples are read into registers
             * first, so that the counters' stores (which may alias the
             * bytes, as far as the compiler knows) force no reloads, and
             * the 4 * (C + LUMA) increments of a step go to distinct
             * counter tables, none waiting on another. */
            uint32_t *const h0 = sub, *const h1 = sub + rep, *const h2 = sub + 2 * rep,
                           *const h3 = sub + 3 * rep;
            const int last = W - 4;
            for (; x <= last; x += 4) {
                uint32_t v[4][4];
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++)
#pragma GCC unroll 4
                    for (int c = 0; c < C; c++)
                        v[k][c] = S == GIMG_U8
                                      ? row[(size_t)(x + k) * C + c]
                                      : ((const uint16_t *)row)[(size_t)(x + k) * C + c];
#pragma GCC unroll 4
                for (int c = 0; c < C; c++) {
                    h0[(size_t)c * stride + (v[0][c] >> shift)]++;
                    h1[(size_t)c * stride + (v[1][c] >> shift)]++;
                    h2[(size_t)c * stride + (v[2][c] >> shift)]++;
                    h3[(size_t)c * stride + (v[3][c] >> shift)]++;
                }
                if (LUMA) {
                    uint32_t *const hk[4] = {h0, h1, h2, h3};
#pragma GCC unroll 4
                    for (int k = 0; k < 4; k++) {
                        uint32_t yv = C < 3 ? v[k][0] : gimg_luma_int(v[k][0], v[k][1], v[k][2]);
                        hk[k][(size_t)C * stride + (yv >> shift)]++;
                    }
                }
            }
        }
        for (; x < W; x++) {
            uint32_t *h = sub + (R > 1 ? (size_t)(x & (R - 1)) * rep : 0);
            if (S == GIMG_F32) {
                const float *f = (const float *)row + (size_t)x * C;
                for (int c = 0; c < C; c++)
                    h[(size_t)c * stride + gimg_hist_slot_of(f[c], lo, hi, width, bins, 1)]++;
                if (LUMA) {
                    double yv = C < 3 ? f[0] : gimg_luma_float(f[0], f[1], f[2]);
                    h[(size_t)C * stride + gimg_hist_slot_of(yv, lo, hi, width, bins, 1)]++;
                }
            } else {
                uint32_t v[4];
                for (int c = 0; c < C; c++) {
                    v[c] = S == GIMG_U8 ? row[(size_t)x * C + c]
                                        : ((const uint16_t *)row)[(size_t)x * C + c];
                    h[(size_t)c * stride + int_slot(&map, bins, v[c], FULL)]++;
                }
                if (LUMA) {
                    uint32_t yv = C < 3 ? v[0] : gimg_luma_int(v[0], v[1], v[2]);
                    h[(size_t)C * stride + int_slot(&map, bins, yv, FULL)]++;
                }
            }
        }
    }
}

typedef void (*count_fn)(const gimg_image *, const gimg_hist_params *, const gimg_hist_intmap *,
                         uint32_t *, int, int, int);

#define COUNT_FN(C, S, L, R, F)                                                                  \
    static void count_##C##_##S##_##L##_##R##_##F(const gimg_image *im,                          \
                                                  const gimg_hist_params *p,                     \
                                                  const gimg_hist_intmap *m, uint32_t *sub,      \
                                                  int stride, int y0, int y1)                    \
    {                                                                                            \
        count_rows(im, p, m, sub, stride, y0, y1, C, GIMG_##S, L, R, F);                         \
    }
#define COUNT_FNS_CSF(C, S, F)                                                                   \
    COUNT_FN(C, S, 0, 1, F) COUNT_FN(C, S, 1, 1, F) COUNT_FN(C, S, 0, 4, F) COUNT_FN(C, S, 1, 4, F)
#define COUNT_FNS_C(C)                                                                           \
    COUNT_FNS_CSF(C, U8, 0) COUNT_FNS_CSF(C, U8, 1) COUNT_FNS_CSF(C, U16, 0)                     \
    COUNT_FNS_CSF(C, U16, 1) COUNT_FNS_CSF(C, F32, 0)
COUNT_FNS_C(1)
COUNT_FNS_C(2)
COUNT_FNS_C(3)
COUNT_FNS_C(4)

static count_fn pick_count(int channels, gimg_sample s, int luma, int replicas, int full)
{
#define PICK_F(C, S, F)                                                                          \
    return luma ? (replicas > 1 ? count_##C##_##S##_1_4_##F : count_##C##_##S##_1_1_##F)         \
                : (replicas > 1 ? count_##C##_##S##_0_4_##F : count_##C##_##S##_0_1_##F);
#define PICK_S(C, S)                                                                             \
    if (full) { PICK_F(C, S, 1) }                                                                \
    PICK_F(C, S, 0)
#define PICK_C(C)                                                                                \
    case C:                                                                                      \
        if (s == GIMG_U8) { PICK_S(C, U8) }                                                      \
        if (s == GIMG_U16) { PICK_S(C, U16) }                                                    \
        PICK_F(C, F32, 0)
    switch (channels) {
    PICK_C(1)
    PICK_C(2)
    PICK_C(3)
    default:
    PICK_C(4)
    }
#undef PICK_C
#undef PICK_S
#undef PICK_F
}

gimg_status gimg_hist_compute_fast(const gimg_image *im, const gimg_hist_params *p,
                                   gimg_hist *out)
{
    gimg_status st = gimg_hist_alloc(im, p, out);
    if (st)
        return st;
    gimg_hist_intmap map = {0};
    if (im->sample != GIMG_F32 && (st = gimg_hist_intmap_init(im->sample, p, &map))) {
        gimg_hist_free(out);
        return st;
    }
    const int CL = out->channels, stride = p->bins + GIMG_HIST_EXTRA_SLOTS;
    /* Replicas pay where a histogram is small enough to stay in L1. */
    const int replicas = (size_t)CL * stride * 4 * sizeof(uint32_t) <= 24 * 1024 ? 4 : 1;
    const size_t sub_n = (size_t)replicas * CL * stride, tot_n = (size_t)CL * stride;
    const uint64_t pixels = (uint64_t)im->width * im->height;
    int threads = omp_get_max_threads();
    if (pixels < 65536)
        threads = 1;
    /* Rows per flush: no 32-bit counter can pass 2^31 in between. */
    const int flush_rows = (int)(((uint64_t)1 << 31) / (uint64_t)im->width) > 0
                               ? (int)(((uint64_t)1 << 31) / (uint64_t)im->width)
                               : 1;
    const int full = im->sample != GIMG_F32 && map.use_shift && map.first == 0 &&
                     ((int64_t)p->bins << map.shift) >= map.lut_size;
    const count_fn count = pick_count(im->channels, im->sample, p->luma, replicas, full);
    int failed = 0;

    #pragma omp parallel num_threads(threads)
    {
        uint32_t *sub = calloc(sub_n, sizeof *sub);
        uint64_t *tot = calloc(tot_n, sizeof *tot);
        if (!sub || !tot) {
            #pragma omp atomic write
            failed = 1;
        }
        const int nt = omp_get_num_threads(), t = omp_get_thread_num();
        /* Contiguous bands of rows, one per thread. */
        const int y0 = (int)((int64_t)im->height * t / nt);
        const int y1 = (int)((int64_t)im->height * (t + 1) / nt);
        if (sub && tot) {
            for (int y = y0; y < y1; y += flush_rows) {
                const int ye = y1 - y > flush_rows ? y + flush_rows : y1;
                count(im, p, &map, sub, stride, y, ye);
                for (int r = 0; r < replicas; r++)
                    for (size_t i = 0; i < tot_n; i++)
                        tot[i] += sub[r * tot_n + i];
                memset(sub, 0, sub_n * sizeof *sub);
            }
            #pragma omp critical(gimg_hist_merge)
            merge_totals(out, tot, stride);
        }
        free(sub);
        free(tot);
    }
    gimg_hist_intmap_free(&map);
    if (failed) {
        gimg_hist_free(out);
        return gimg_fail(GIMG_E_NOMEM, "out of memory for the threads' histograms");
    }
    return GIMG_OK;
}

/* ----------------------------------------------------------------- dispatch */

#ifdef GIMG_HAVE_CUDA
#include "gpu_internal.h"
#include "histogram.h"

/* Moves slot counters (channels rows of bins + 3) into h. */
static void take_slots(gimg_hist *h, const unsigned long long *slots)
{
    const int stride = h->bins + GIMG_HIST_EXTRA_SLOTS;
    for (int c = 0; c < h->channels; c++) {
        const unsigned long long *s = slots + (size_t)c * stride;
        for (int b = 0; b < h->bins; b++)
            h->counts[(size_t)c * h->bins + b] = s[b];
        h->below[c] = s[h->bins + GIMG_HIST_SLOT_BELOW];
        h->above[c] = s[h->bins + GIMG_HIST_SLOT_ABOVE];
        h->nan[c] = s[h->bins + GIMG_HIST_SLOT_NAN];
    }
}

gimg_status gimg_hist_map_for_gpu(const gimg_image *im, const gimg_hist_params *p,
                                  const gimg_hist_intmap *m, gimg_cuda_hist_map *out)
{
    memset(out, 0, sizeof *out);
    out->bins = p->bins;
    out->lo = p->lo;
    out->hi = p->hi;
    out->luma = p->luma;
    if (im->sample == GIMG_F32)
        out->mode = GIMG_CUDA_HIST_FLOAT;
    else if (m->use_shift && m->first == 0 && m->shift == 0 &&
             p->bins == (im->sample == GIMG_U8 ? 256 : 65536))
        out->mode = GIMG_CUDA_HIST_IDENT;  /* every value its own bin */
    else if (m->use_shift)
        out->mode = GIMG_CUDA_HIST_SHIFT;
    else
        out->mode = GIMG_CUDA_HIST_LUT;
    out->first = m->first;
    out->shift = m->shift;
    return GIMG_OK;
}

static gimg_status hist_gpu(gimg_ctx *ctx, gimg_gpu *g, const gimg_image *im,
                            const gimg_hist_params *p, gimg_hist *out)
{
    gimg_hist_intmap m = {0};
    gimg_status st;
    if (im->sample != GIMG_F32 && (st = gimg_hist_intmap_init(im->sample, p, &m)))
        return st;
    gimg_cuda_hist_map map;
    gimg_hist_map_for_gpu(im, p, &m, &map);
    const size_t slots = (size_t)out->channels * (p->bins + GIMG_HIST_EXTRA_SLOTS);
    const size_t counts_bytes = slots * sizeof(unsigned long long);
    const size_t lut_bytes = m.lut ? (size_t)m.lut_size * sizeof(uint32_t) : 0;
    unsigned long long *h_slots = malloc(counts_bytes);
    double t0 = gimg_now_ms();
    gimg_dimage d_img;
    void *d_aux = NULL;  /* the counters, then the table: stream-ordered, pooled */
    unsigned *d_sync;
    cudaError_t e = cudaSuccess;
    if (!h_slots)
        st = gimg_fail(GIMG_E_NOMEM, "out of memory");
    else if (!(st = gimg_gpu_image(g, 0, im->width, im->height, im->channels, im->sample,
                                   &d_img)) &&
             !(st = gimg_gpu_upload(g, im, &d_img)) && !(st = gimg_gpu_hist_sync(g, &d_sync))) {
        unsigned long long *d_counts = NULL;
        if (!(e = cudaMallocAsync(&d_aux, counts_bytes + lut_bytes, g->stream))) {
            d_counts = d_aux;
            map.d_lut = m.lut ? (const uint32_t *)((unsigned char *)d_aux + counts_bytes) : NULL;
        }
        if (!e && m.lut)
            e = cudaMemcpyAsync((void *)map.d_lut, m.lut, lut_bytes, cudaMemcpyHostToDevice,
                                g->stream);
        if (!e && !(e = cudaEventRecord(g->ev_start, g->stream)) &&
            !(e = gimg_cuda_hist(d_img.d_data, d_img.pitch_bytes, im->width, im->height,
                                 im->channels, (int)im->sample, &map, d_counts, d_sync,
                                 g->stream)) &&
            !(e = cudaEventRecord(g->ev_stop, g->stream)) &&
            !(e = cudaMemcpyAsync(h_slots, d_counts, counts_bytes, cudaMemcpyDeviceToHost,
                                  g->stream)))
            e = cudaStreamSynchronize(g->stream);
        if (e)
            st = gimg_fail(gimg_cuda_status(e), "CUDA error: histogram: %s",
                           cudaGetErrorString(e));
        float kernel_ms = 0;
        if (!st && !cudaEventElapsedTime(&kernel_ms, g->ev_start, g->ev_stop))
            gimg_ctx_add_gpu_times(ctx, kernel_ms, gimg_now_ms() - t0 - kernel_ms);
        if (!st)
            take_slots(out, h_slots);
    }
    if (d_aux)
        cudaFreeAsync(d_aux, g->stream);
    free(h_slots);
    gimg_hist_intmap_free(&m);
    return st;
}
#endif

gimg_status gimg_hist_compute(gimg_ctx *ctx, const gimg_image *im, const gimg_hist_params *p,
                              gimg_hist *out)
{
    struct gimg_gpu *gpu;
    size_t bytes = (size_t)im->height * (size_t)im->width * gimg_pixel_bytes(im);
    memset(out, 0, sizeof *out);
    const gimg_cost_job job = {.op = GIMG_COST_HIST, .bytes = bytes,
                               .threads = omp_get_max_threads()};
    struct gimg_remote *server = gimg_ctx_server(ctx, &job);
    if (server && gimg_remote_hist(server, im, p, out) == GIMG_OK)
        return GIMG_OK;
    gimg_status st = gimg_ctx_select(ctx, &job, &gpu);
    if (st)
        return st;
#ifdef GIMG_HAVE_CUDA
    if (gpu) {
        if ((st = gimg_hist_alloc(im, p, out)))
            return st;
        if (!(st = hist_gpu(ctx, gpu, im, p, out)))
            return GIMG_OK;
        gimg_hist_free(out);
        /* A GPU out of memory leaves the work to the CPU. */
        if ((st = gimg_ctx_gpu_fallback(ctx, st)))
            return st;
    }
#endif
    return gimg_hist_compute_fast(im, p, out);
}
