/*
 * compare.c — gimg_compare: an image against a reference, as gstats
 * --compare reports it.
 *
 *  1. Layouts. The two images are brought to one layout (gimg_stats.h says
 *     the rules: maxvals that are multiples of each other, an opaque alpha
 *     on one side only, gray promoted to RGB on request). Images already
 *     alike are used as they are; otherwise the side that changes is
 *     copied once, converted.
 *  2. The sums of the differences per channel (exact integers for 8/16-bit;
 *     float in double, in the statistics' fixed blocks of rows), and the
 *     pixels with any channel differing: the CPU reference (one thread),
 *     the fast CPU path (OpenMP over the same blocks, the same sums) or the
 *     GPU (kernels/stats.cu's one-pass reduction, kernels/absdiff.cu).
 *  3. SSIM, when asked for: lib/ssim.c on the CPU, kernels/ssim.cu on the
 *     GPU, from the same upload.
 *  4. The difference image, when asked for: |a - b| per sample (on the GPU,
 *     written over the reference's device copy and downloaded).
 *  5. The figures, on the reference's scale (gimg_diff_finish, then the
 *     scale), by one host function whichever backend gave the sums.
 */
#include "gimg_stats.h"
#include "ctx_internal.h"
#include "report.h"
#include "ssim_internal.h"
#include "stats_internal.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- sums */

static void diff_add(gimg_diff_sums *t, const gimg_diff_sums *p)
{
    for (int c = 0; c < 4; c++) {
        t->count[c] += p->count[c];
        t->differing[c] += p->differing[c];
        t->isum_abs[c] += p->isum_abs[c];
        t->isum_sq[c] += p->isum_sq[c];
        t->fsum_abs[c] += p->fsum_abs[c];
        t->fsum_sq[c] += p->fsum_sq[c];
        if (p->max_abs[c] > t->max_abs[c])
            t->max_abs[c] = p->max_abs[c];
    }
    t->pixels_differing += p->pixels_differing;
}

static void diff_rows(const gimg_image *a, const gimg_image *b, int y0, int y1,
                      gimg_diff_sums *d)
{
    const int C = a->channels;
    for (int y = y0; y < y1; y++) {
        const unsigned char *ra = gimg_row(a, y), *rb = gimg_row(b, y);
        for (size_t x = 0, i = 0; x < (size_t)a->width; x++) {
            int pixel_differs = 0;
            for (int c = 0; c < C; c++, i++) {
                double ad;
                if (a->sample == GIMG_F32) {
                    float fa = ((const float *)ra)[i], fb = ((const float *)rb)[i];
                    if (!(fa == fb || (isnan(fa) && isnan(fb)))) {
                        d->differing[c]++;
                        pixel_differs = 1;
                    }
                    if (!isfinite(fa) || !isfinite(fb))
                        continue;
                    ad = fabs((double)fa - (double)fb);
                    d->fsum_abs[c] += ad;
                    d->fsum_sq[c] += ad * ad;
                } else {
                    int va = a->sample == GIMG_U8 ? ra[i] : ((const uint16_t *)ra)[i];
                    int vb = a->sample == GIMG_U8 ? rb[i] : ((const uint16_t *)rb)[i];
                    uint64_t u = (uint64_t)(va > vb ? va - vb : vb - va);
                    d->differing[c] += u != 0;
                    pixel_differs |= u != 0;
                    d->isum_abs[c] += u;
                    d->isum_sq[c] += u * u;
                    ad = (double)u;
                }
                d->count[c]++;
                if (ad > d->max_abs[c])
                    d->max_abs[c] = ad;
            }
            d->pixels_differing += (uint64_t)pixel_differs;
        }
    }
}

void gimg_diff_sums_ref(const gimg_image *a, const gimg_image *b, gimg_diff_sums *d)
{
    memset(d, 0, sizeof *d);
    const int rows = gimg_stats_block_rows(a->width, a->channels);
    for (int y = 0; y < a->height; y += rows) {
        gimg_diff_sums part;
        memset(&part, 0, sizeof part);
        diff_rows(a, b, y, y + rows < a->height ? y + rows : a->height, &part);
        diff_add(d, &part);
    }
}

void gimg_diff_sums_fast(const gimg_image *a, const gimg_image *b, gimg_diff_sums *d)
{
    const int H = a->height, rows = gimg_stats_block_rows(a->width, a->channels);
    const int blocks = (H + rows - 1) / rows;
    gimg_diff_sums *parts = malloc((size_t)blocks * sizeof *parts);
    if (!parts) {
        gimg_diff_sums_ref(a, b, d);
        return;
    }
    memset(d, 0, sizeof *d);
    const size_t samples = (size_t)a->width * H * a->channels;
    #pragma omp parallel for schedule(static) if (samples > 262144)
    for (int k = 0; k < blocks; k++) {
        int y = k * rows;
        memset(&parts[k], 0, sizeof parts[k]);
        diff_rows(a, b, y, y + rows < H ? y + rows : H, &parts[k]);
    }
    for (int k = 0; k < blocks; k++)
        diff_add(d, &parts[k]);
    free(parts);
}

void gimg_diff_finish(const gimg_diff_sums *d, int C, gimg_sample sample, gimg_diff *out)
{
    out->channels = C;
    out->sample = sample;
    out->peak = sample == GIMG_U8 ? 255 : sample == GIMG_U16 ? 65535 : 1;
    uint64_t count[5] = {0}, differing[5] = {0};
    unsigned __int128 iabs[5] = {0}, isq[5] = {0};
    double fabs_[5] = {0}, fsq[5] = {0}, mx[5] = {0};
    for (int c = 0; c < C; c++) {
        count[c] = d->count[c];
        differing[c] = d->differing[c];
        iabs[c] = d->isum_abs[c];
        isq[c] = d->isum_sq[c];
        fabs_[c] = d->fsum_abs[c];
        fsq[c] = d->fsum_sq[c];
        mx[c] = d->max_abs[c];
        count[C] += count[c];
        differing[C] += differing[c];
        iabs[C] += iabs[c];
        isq[C] += isq[c];
        fabs_[C] += fabs_[c];
        fsq[C] += fsq[c];
        if (mx[c] > mx[C])
            mx[C] = mx[c];
    }
    for (int c = 0; c <= C; c++) {
        gimg_channel_diff *r = &out->ch[c];
        const uint64_t n = count[c];
        r->count = n;
        r->differing = differing[c];
        r->pixels_differing = c < C ? differing[c] : d->pixels_differing;
        r->ssim = NAN;
        if (!n) {
            r->max_abs = r->mae = r->mse = r->rmse = r->psnr = NAN;
            continue;
        }
        r->max_abs = mx[c];
        double sum_abs = sample == GIMG_F32 ? fabs_[c] : (double)iabs[c];
        double sum_sq = sample == GIMG_F32 ? fsq[c] : (double)isq[c];
        r->mae = sum_abs / (double)n;
        r->mse = sum_sq / (double)n;
        r->rmse = sqrt(r->mse);
        r->psnr = r->mse > 0 ? 10 * log10(out->peak * out->peak / r->mse) : INFINITY;
    }
}

/* ------------------------------------------------------------- layouts */

static int has_alpha(int channels) { return channels == 2 || channels == 4; }
static int is_color(int channels) { return channels >= 3; }

static unsigned sample_at(const gimg_image *im, const unsigned char *row, size_t i)
{
    return im->sample == GIMG_U8 ? row[i] : ((const uint16_t *)row)[i];
}

/* Whether every alpha sample of im is its maxval (float: 1). */
static int alpha_opaque(const gimg_image *im)
{
    const int C = im->channels;
    const unsigned max = gimg_image_max(im);
    for (int y = 0; y < im->height; y++) {
        const unsigned char *row = gimg_row(im, y);
        for (size_t i = (size_t)C - 1; i < (size_t)im->width * C; i += (size_t)C)
            if (im->sample == GIMG_F32 ? ((const float *)row)[i] != 1.0f
                                       : sample_at(im, row, i) != max)
                return 0;
    }
    return 1;
}

/* out = im converted: `channels` channels, channel j taken from im's
 * channel map[j] (or the maxval `fill` when map[j] < 0), integer samples
 * multiplied by k into sample type `to` with maxval field `maxval`. */
static gimg_status convert(const gimg_image *im, int channels, const int *map, unsigned k,
                           gimg_sample to, unsigned maxval, gimg_image *out)
{
    gimg_status st = gimg_image_alloc(out, im->width, im->height, channels, to);
    if (st)
        return st;
    out->maxval = maxval;
    const unsigned fill = gimg_image_max(out);
    const int C = im->channels;
    for (int y = 0; y < im->height; y++) {
        const unsigned char *src = gimg_row(im, y);
        unsigned char *dst = gimg_row(out, y);
        for (size_t x = 0; x < (size_t)im->width; x++)
            for (int j = 0; j < channels; j++) {
                const size_t i = x * (size_t)channels + (size_t)j;
                const size_t s = x * (size_t)C + (size_t)(map[j] < 0 ? 0 : map[j]);
                if (to == GIMG_F32)
                    ((float *)dst)[i] = map[j] < 0 ? 1.0f : ((const float *)src)[s];
                else {
                    const unsigned v = map[j] < 0 ? fill : sample_at(im, src, s) * k;
                    if (to == GIMG_U8)
                        dst[i] = (unsigned char)v;
                    else
                        ((uint16_t *)dst)[i] = (uint16_t)v;
                }
            }
    }
    return GIMG_OK;
}

/* The two images in one layout: a (the reference) and b, each the caller's
 * image or a converted copy that this owns. */
typedef struct {
    const gimg_image *a, *b;
    gimg_image own_a, own_b;
    unsigned k_ref;     /* the reference's samples were multiplied by this (1: not) */
    unsigned adjusted;  /* GIMG_COMPARE_* */
} aligned;

static void aligned_free(aligned *al)
{
    gimg_image_free(&al->own_a);
    gimg_image_free(&al->own_b);
}

static gimg_status align(const gimg_image *ref, const gimg_image *im, int promote, aligned *al)
{
    memset(al, 0, sizeof *al);
    al->a = ref;
    al->b = im;
    al->k_ref = 1;
    if (ref->width != im->width || ref->height != im->height)
        return gimg_fail(GIMG_E_FORMAT, "size %dx%d differs from the reference's %dx%d",
                         im->width, im->height, ref->width, ref->height);
    if ((ref->sample == GIMG_F32) != (im->sample == GIMG_F32))
        return gimg_fail(GIMG_E_FORMAT, "%d-bit%s samples, the reference has %d-bit%s",
                         8 * (int)im->sample, im->sample == GIMG_F32 ? " float" : "",
                         8 * (int)ref->sample, ref->sample == GIMG_F32 ? " float" : "");
    if (is_color(ref->channels) != is_color(im->channels) && !promote)
        return gimg_fail(GIMG_E_FORMAT, "%d channel%s, the reference has %d (--promote compares "
                                        "gray as RGB)", im->channels,
                         im->channels == 1 ? "" : "s", ref->channels);
    /* Samples: the smaller range scaled up to the larger, exactly. */
    const unsigned max_a = gimg_image_max(ref), max_b = gimg_image_max(im);
    unsigned k_a = 1, k_b = 1;
    const gimg_image *wide = ref; /* whose sample type and maxval both take */
    if (ref->sample != GIMG_F32 && (max_a != max_b || ref->sample != im->sample)) {
        const unsigned hi = max_a > max_b ? max_a : max_b, lo = max_a > max_b ? max_b : max_a;
        if (hi % lo)
            return gimg_fail(GIMG_E_FORMAT, "samples in 0..%u, the reference's in 0..%u "
                                            "(maxval), and neither range is a multiple of the "
                                            "other: convert one to the other's range first",
                             max_b, max_a);
        wide = max_a > max_b || (max_a == max_b && ref->sample == GIMG_U16) ? ref : im;
        if (wide == ref)
            k_b = hi / lo;
        else
            k_a = hi / lo;
    }
    /* Channels: alpha on one side only, then gray against color. */
    int ca = ref->channels, cb = im->channels;
    int map_a[4] = {0, 1, 2, 3}, map_b[4] = {0, 1, 2, 3};
    int out_a = ca, out_b = cb;
    if (has_alpha(ca) != has_alpha(cb)) {
        const gimg_image *with = has_alpha(ca) ? ref : im;
        if (alpha_opaque(with)) {
            if (with == ref)
                out_a = ca - 1;
            else
                out_b = cb - 1;
            al->adjusted |= GIMG_COMPARE_ALPHA_DROPPED;
        } else {
            int *map = with == ref ? map_b : map_a;
            int *n = with == ref ? &out_b : &out_a;
            map[*n] = -1;
            (*n)++;
            al->adjusted |= GIMG_COMPARE_ALPHA_ADDED;
        }
    }
    if (is_color(out_a) != is_color(out_b)) {
        int *map = is_color(out_a) ? map_b : map_a;
        int *n = is_color(out_a) ? &out_b : &out_a;
        const int alpha = has_alpha(*n) ? map[1] : -2; /* -2: none */
        map[0] = map[1] = map[2] = 0;
        *n = 3;
        if (alpha != -2)
            map[(*n)++] = alpha;
        al->adjusted |= GIMG_COMPARE_PROMOTED;
    }
    if (k_a > 1)
        al->adjusted |= GIMG_COMPARE_SCALED_REF;
    if (k_b > 1)
        al->adjusted |= GIMG_COMPARE_SCALED_IM;
    al->k_ref = k_a;
    gimg_status st = GIMG_OK;
    if (out_a != ca || k_a > 1 || ref->sample != wide->sample) {
        if (!(st = convert(ref, out_a, map_a, k_a, wide->sample, wide->maxval, &al->own_a)))
            al->a = &al->own_a;
    }
    if (!st && (out_b != cb || k_b > 1 || im->sample != wide->sample)) {
        if (!(st = convert(im, out_b, map_b, k_b, wide->sample, wide->maxval, &al->own_b)))
            al->b = &al->own_b;
    }
    if (st)
        aligned_free(al);
    return st;
}

/* -------------------------------------------------- the difference image */

static void absdiff_rows(const gimg_image *a, const gimg_image *b, gimg_image *out, int y0,
                         int y1)
{
    const size_t n = (size_t)a->width * (size_t)a->channels;
    for (int y = y0; y < y1; y++) {
        const unsigned char *ra = gimg_row(a, y), *rb = gimg_row(b, y);
        unsigned char *ro = gimg_row(out, y);
        for (size_t i = 0; i < n; i++) {
            if (a->sample == GIMG_F32) {
                float d = fabsf(((const float *)ra)[i] - ((const float *)rb)[i]);
                ((float *)ro)[i] = isnan(d) ? NAN : d; /* canonical, as the GPU writes */
            } else if (a->sample == GIMG_U8) {
                ro[i] = (unsigned char)(ra[i] > rb[i] ? ra[i] - rb[i] : rb[i] - ra[i]);
            } else {
                uint16_t va = ((const uint16_t *)ra)[i], vb = ((const uint16_t *)rb)[i];
                ((uint16_t *)ro)[i] = (uint16_t)(va > vb ? va - vb : vb - va);
            }
        }
    }
}

static gimg_status alloc_like(const gimg_image *a, gimg_image *out)
{
    gimg_status st = gimg_image_alloc(out, a->width, a->height, a->channels, a->sample);
    if (!st)
        out->maxval = a->maxval;
    return st;
}

/* ------------------------------------------------------------------ GPU */

#ifdef GIMG_HAVE_CUDA
#include "gpu_internal.h"
#include "absdiff.h"
#include "ssim.h"
#include "stats.h"

/*
 * One upload of each image, then on the device: the sums (kernels/stats.cu),
 * SSIM when asked (kernels/ssim.cu), the pixels with a difference and the
 * difference image when asked (kernels/absdiff.cu, written over a's device
 * copy, which nothing reads after it). One device allocation holds every
 * scratch and result; the results come back together.
 */
static gimg_status gpu_compare(gimg_ctx *ctx, gimg_gpu *g, const gimg_image *a,
                               const gimg_image *b, double range, gimg_diff_sums *d,
                               gimg_ssim_sums *s, gimg_image *diff)
{
    gimg_dimage d_a, d_b;
    gimg_status st;
    double t0 = gimg_now_ms();
    if ((st = gimg_gpu_image(g, 0, a->width, a->height, a->channels, a->sample, &d_a)) ||
        (st = gimg_gpu_upload(g, a, &d_a)) ||
        (st = gimg_gpu_image(g, 1, b->width, b->height, b->channels, b->sample, &d_b)) ||
        (st = gimg_gpu_upload(g, b, &d_b)))
        return st;
    const size_t align = 256;
    const size_t stats_scratch = gimg_cuda_stats_scratch_bytes();
    const size_t ssim_scratch = s ? gimg_cuda_ssim_scratch_bytes(a->width, a->height, a->channels)
                                  : 0;
    const size_t off_sums = (stats_scratch + align - 1) / align * align;
    const size_t off_ssim_out = off_sums + (sizeof *d + align - 1) / align * align;
    const size_t off_ssim = off_ssim_out + (sizeof *s + align - 1) / align * align;
    const size_t total = off_ssim + ssim_scratch;
    unsigned char *d_mem = NULL;
    if ((st = gimg_gpu_lane_malloc(g, (void **)&d_mem, total)))
        return st;
    gimg_diff_sums *d_sums = (gimg_diff_sums *)(d_mem + off_sums);
    gimg_ssim_sums *d_ssim = (gimg_ssim_sums *)(d_mem + off_ssim_out);
    /* The reductions expect zeroed scratch (and leave it so). */
    cudaError_t e = cudaMemsetAsync(d_mem, 0, total, g->stream);
    if (!e)
        e = cudaEventRecord(g->ev_start, g->stream);
    if (!e)
        e = gimg_cuda_diff(d_a.d_data, d_a.pitch_bytes, d_b.d_data, d_b.pitch_bytes, a->width,
                           a->height, a->channels, (int)a->sample, d_mem, d_sums, 0, g->stream);
    if (!e && s)
        e = gimg_cuda_ssim(d_a.d_data, d_a.pitch_bytes, d_b.d_data, d_b.pitch_bytes, a->width,
                           a->height, a->channels, (int)a->sample, range, d_mem + off_ssim,
                           d_ssim, g->stream);
    if (!e)
        e = cudaMemsetAsync(&d_sums->pixels_differing, 0, sizeof d_sums->pixels_differing,
                            g->stream);
    if (!e)
        e = gimg_cuda_absdiff(d_a.d_data, d_a.pitch_bytes, d_b.d_data, d_b.pitch_bytes,
                              a->width, a->height, a->channels, (int)a->sample,
                              diff ? d_a.d_data : NULL, d_a.pitch_bytes,
                              (unsigned long long *)&d_sums->pixels_differing, g->stream);
    if (!e)
        e = cudaEventRecord(g->ev_stop, g->stream);
    if (!e)
        e = cudaMemcpyAsync(d, d_sums, sizeof *d, cudaMemcpyDeviceToHost, g->stream);
    if (!e && s)
        e = cudaMemcpyAsync(s, d_ssim, sizeof *s, cudaMemcpyDeviceToHost, g->stream);
    if (!e)
        e = cudaStreamSynchronize(g->stream);
    float kernel_ms = 0;
    if (!e)
        e = cudaEventElapsedTime(&kernel_ms, g->ev_start, g->ev_stop);
    gimg_gpu_lane_free(g, d_mem, total);
    if (e)
        return gimg_fail(gimg_cuda_status(e), "CUDA error: comparison: %s",
                         cudaGetErrorString(e));
    if (diff && (st = gimg_gpu_download(g, &d_a, diff)))
        return st;
    gimg_ctx_add_gpu_times(ctx, kernel_ms, gimg_now_ms() - t0 - kernel_ms);
    return GIMG_OK;
}
#endif

/* ------------------------------------------------------------- dispatch */

/* The figures on the reference's scale: its samples were multiplied by k
 * for the comparison, so differences divide by k, squares by k^2; PSNR
 * (peak and error scale together) and SSIM do not change. */
static void to_reference_scale(gimg_diff *out, unsigned k, double peak)
{
    out->peak = peak;
    for (int c = 0; c <= out->channels; c++) {
        gimg_channel_diff *r = &out->ch[c];
        if (!r->count)
            continue;
        r->max_abs /= k;
        r->mae /= k;
        r->mse /= (double)k * k;
        r->rmse /= k;
        if (r->mse > 0)
            r->psnr = 10 * log10(peak * peak / r->mse);
    }
}

static gimg_status compare_common(gimg_ctx *ctx, const gimg_image *ref, const gimg_image *im,
                                  const gimg_compare_opts *o, gimg_diff *out, int reference)
{
    static const gimg_compare_opts k_none = {0};
    if (!o)
        o = &k_none;
    if (o->diff_image)
        memset(o->diff_image, 0, sizeof *o->diff_image);
    aligned al;
    gimg_status st = align(ref, im, o->promote, &al);
    if (st)
        return st;
    const gimg_image *a = al.a, *b = al.b;
    const double range = gimg_image_max(a);
    gimg_diff_sums d;
    gimg_ssim_sums s;
    memset(&s, 0, sizeof s);
    memset(out, 0, sizeof out[0]);
    struct gimg_gpu *gpu = NULL;
    if (!(st = gimg_stats_check(b)) && !reference) {
        /* A pass over both images, as the statistics' over one (cost.h). */
        const gimg_cost_job job = {
            .op = GIMG_COST_STATS,
            .bytes = 2 * (size_t)a->height * (size_t)a->width * gimg_pixel_bytes(a),
            .threads = omp_get_max_threads(),
            .untimed = 1};
        st = gimg_ctx_select(ctx, &job, &gpu);
    }
    if (!st && o->diff_image)
        st = alloc_like(a, o->diff_image);
#ifdef GIMG_HAVE_CUDA
    /* A GPU out of memory leaves the work to the CPU. */
    if (!st && gpu && (st = gpu_compare(ctx, gpu, a, b, range, &d, o->ssim ? &s : NULL,
                                        o->diff_image)) &&
        !(st = gimg_ctx_gpu_fallback(ctx, st)))
        gpu = NULL;
#endif
    if (!st && !gpu) {
        if (reference)
            gimg_diff_sums_ref(a, b, &d);
        else
            gimg_diff_sums_fast(a, b, &d);
        if (o->ssim)
            st = reference ? gimg_ssim_sums_ref(a, b, range, &s)
                           : gimg_ssim_sums_fast(a, b, range, &s);
        if (!st && o->diff_image) {
            #pragma omp parallel for schedule(static) if (!reference && \
                (size_t)a->width * a->height * a->channels > 262144)
            for (int y = 0; y < a->height; y++)
                absdiff_rows(a, b, o->diff_image, y, y + 1);
        }
    }
    if (!st) {
        gimg_diff_finish(&d, a->channels, a->sample, out);
        out->sample = ref->sample;
        out->adjusted = al.adjusted;
        if (o->ssim) {
            /* A channel whose samples are all equal (and finite) has S = 1 at
             * every centre: exactly 1 whatever the backend's rounding (the
             * GPU's fused float arithmetic would give 1 - 1e-7). */
            const uint64_t pixels = (uint64_t)a->width * (uint64_t)a->height;
            double mean = 0;
            for (int c = 0; c < a->channels; c++) {
                const int same = d.differing[c] == 0 && d.count[c] == pixels;
                out->ch[c].ssim = !s.count ? NAN : same ? 1.0 : s.sum[c] / (double)s.count;
                mean += out->ch[c].ssim;
            }
            out->ch[a->channels].ssim = mean / a->channels;
        }
        to_reference_scale(out, al.k_ref, gimg_image_max(ref));
    }
    if (st && o->diff_image)
        gimg_image_free(o->diff_image);
    aligned_free(&al);
    return st;
}

gimg_status gimg_compare(gimg_ctx *ctx, const gimg_image *ref, const gimg_image *im,
                         const gimg_compare_opts *o, gimg_diff *out)
{
    return compare_common(ctx, ref, im, o, out, 0);
}

gimg_status gimg_compare_cpu(const gimg_image *ref, const gimg_image *im,
                             const gimg_compare_opts *o, gimg_diff *out)
{
    return compare_common(NULL, ref, im, o, out, 1);
}

/* ------------------------------------------------------------ thresholds */

const char *const gimg_metric_names[] = {"count", "differing", "pixels_differing", "maxdiff",
                                         "mae", "mse", "rmse", "psnr", "ssim", NULL};
const char *const gimg_op_names[] = {"<", "<=", ">", ">=", "==", "!="};
static const char *const k_channel_names[] = {"gray", "red", "green", "blue", "alpha", "all",
                                              NULL};

gimg_status gimg_parse_threshold(const char *expr, gimg_threshold *t)
{
    static const char k_form[] = "expected [CHANNEL.]METRIC OP NUMBER, OP one of < <= > >= "
                                 "== !=, e.g. 'psnr<40'";
    memset(t, 0, sizeof *t);
    const size_t op_at = strcspn(expr, "<>=!");
    const char *op = expr + op_at;
    size_t op_len = 0;
    int found = -1;
    for (int k = 0; k < 6; k++) {
        size_t n = strlen(gimg_op_names[k]);
        if (!strncmp(op, gimg_op_names[k], n) && n > op_len) {
            found = k;
            op_len = n;
        }
    }
    if (found < 0 && *op == '=') { /* a single '=' reads as == */
        found = GIMG_OP_EQ;
        op_len = 1;
    }
    size_t a = 0, b = op_at;
    while (a < b && expr[a] == ' ')
        a++;
    while (b > a && expr[b - 1] == ' ')
        b--;
    char left[64];
    if (found < 0 || b == a || b - a >= sizeof left)
        return gimg_fail(GIMG_E_USAGE, "--fail-if '%.80s': %s", expr, k_form);
    t->op = (gimg_op)found;
    memcpy(left, expr + a, b - a);
    left[b - a] = '\0';
    char *metric = strchr(left, '.');
    unsigned mask;
    snprintf(t->channel, sizeof t->channel, "all");
    if (metric) {
        *metric++ = '\0';
        if (gimg_parse_name_list("--fail-if", left, k_channel_names, &mask))
            return GIMG_E_USAGE;
        snprintf(t->channel, sizeof t->channel, "%s", k_channel_names[__builtin_ctz(mask)]);
    } else {
        metric = left;
    }
    if (strchr(metric, ','))
        return gimg_fail(GIMG_E_USAGE, "--fail-if '%.80s': one metric, %s", expr, k_form);
    if (gimg_parse_name_list("--fail-if", metric, gimg_metric_names, &mask))
        return GIMG_E_USAGE;
    t->metric = (gimg_metric)__builtin_ctz(mask);
    const char *num = op + op_len;
    while (*num == ' ')
        num++;
    char *end;
    t->value = strtod(num, &end);
    while (*end == ' ')
        end++;
    if (end == num || *end || isnan(t->value))
        return gimg_fail(GIMG_E_USAGE, "--fail-if '%.80s': '%.40s' is not a number", expr, num);
    return GIMG_OK;
}

int gimg_threshold_broken(const gimg_threshold *t, double v)
{
    if (isnan(v))
        return 1;
    switch (t->op) {
    case GIMG_OP_LT: return v < t->value;
    case GIMG_OP_LE: return v <= t->value;
    case GIMG_OP_GT: return v > t->value;
    case GIMG_OP_GE: return v >= t->value;
    case GIMG_OP_EQ: return v == t->value;
    default: return v != t->value;
    }
}
