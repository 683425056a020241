/*
 * gpudiff_stats — the statistics and comparison reductions on the GPU
 * against the CPU reference.
 *
 * Tolerance rule: 8/16-bit results are exact integers, so the raw sums
 * (gimg_moments, gimg_diff_sums) must equal the reference's byte for byte,
 * and so must the statistics derived from them. Float: counts, NaN and
 * infinity counts, min, max, max |d| and the moments' shifts K exactly;
 * sums (of v - K and (v - K)^2 for the moments) within 1e-12 of the sum of
 * magnitudes (the GPU adds in another fixed order); mean and stddev within
 * 1e-12 relative, data far from zero with a small spread included (where
 * sums of v and v^2 would cancel); and the GPU must repeat its own doubles
 * bit for bit from run to run. The device result and
 * the partials are poisoned before every launch (the counter that finds the
 * last block is left zeroed, as the kernels leave it), so a field the
 * kernel failed to write, or a partial read before it was written, shows.
 * The comparison's pixel pass (kernels/absdiff.cu: pixels with any channel
 * differing, and the difference image) must equal the CPU's exactly, float
 * included. The last checks run the public gimg_stats_compute()/gimg_compare() with
 * --device gpu (moments and the exact histogram from one upload), a region
 * included.
 *
 *   gpudiff_stats [--small]     --small: sizes for compute-sanitizer runs
 */
#include "gimg.h"
#include "gpu_internal.h"
#include "stats_internal.h"
#include "stats.h"
#include "absdiff.h"
#include "ssim.h"
#include "testimg.h"
#include "check.h"

#include <math.h>
#include <stdlib.h>

static int g_small;
static gimg_gpu *g_gpu;
static unsigned char *g_scratch; /* scratch, then 512 bytes of result */

static const gimg_sample k_samples[] = {GIMG_U8, GIMG_U16, GIMG_F32};

/* Seeded random samples; float images get NaN, infinities and negatives. */
static void fill(gimg_image *im, uint64_t seed)
{
    testimg_fill_random(im, seed);
    if (im->sample != GIMG_F32)
        return;
    uint64_t state = seed ^ 0x5eed;
    for (int y = 0; y < im->height; y++) {
        float *row = (float *)gimg_row(im, y);
        for (int i = 0; i < im->width * im->channels; i++) {
            uint64_t r = testimg_next(&state) % 64;
            row[i] = r == 0 ? NAN : r == 1 ? INFINITY : r == 2 ? -INFINITY
                   : r < 8 ? -row[i] * 100 : row[i];
        }
    }
}

/* The sum of |v - k| or of (v - k)^2 over channel c's finite samples. */
static double magnitude_sum(const gimg_image *im, int c, double k, int squares)
{
    double s = 0;
    for (int y = 0; y < im->height; y++) {
        const float *row = (const float *)gimg_row(im, y);
        for (int x = 0; x < im->width; x++) {
            float v = row[x * im->channels + c];
            if (isfinite(v)) {
                double d = (double)v - k;
                s += squares ? d * d : fabs(d);
            }
        }
    }
    return s;
}

static double rel_diff(double a, double b)
{
    if (a == b)
        return 0;
    double m = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
    return fabs(a - b) / m;
}

static int close_to(double got, double want, double scale)
{
    return fabs(got - want) <= 1e-12 * scale;
}

static gimg_status upload(const gimg_image *im, int slot, gimg_dimage *d)
{
    gimg_status st = gimg_gpu_image(g_gpu, slot, im->width, im->height, im->channels,
                                    im->sample, d);
    return st ? st : gimg_gpu_upload(g_gpu, im, d);
}

static cudaError_t poison(size_t out_bytes)
{
    size_t scratch = gimg_cuda_stats_scratch_bytes();
    cudaError_t e = cudaMemsetAsync(g_scratch + 256, 0xA5, scratch - 256, g_gpu->stream);
    return e ? e : cudaMemsetAsync(g_scratch + scratch, 0xA5, out_bytes, g_gpu->stream);
}

static gimg_status fetch(void *host, size_t bytes)
{
    memset(host, 0x5A, bytes);
    GIMG_CUDA(cudaMemcpyAsync(host, g_scratch + gimg_cuda_stats_scratch_bytes(), bytes,
                              cudaMemcpyDeviceToHost, g_gpu->stream));
    GIMG_CUDA(cudaStreamSynchronize(g_gpu->stream));
    return GIMG_OK;
}

static gimg_status run_moments(const gimg_image *im, gimg_moments *m)
{
    gimg_dimage d;
    gimg_status st = upload(im, 0, &d);
    if (st)
        return st;
    double shift[4];
    gimg_moments_shift(im, shift); /* the CPU's shifts */
    GIMG_CUDA(poison(sizeof *m));
    GIMG_CUDA(gimg_cuda_moments(d.d_data, d.pitch_bytes, im->width, im->height, im->channels,
                                (int)im->sample, shift, g_scratch,
                                (gimg_moments *)(g_scratch + gimg_cuda_stats_scratch_bytes()), 0,
                                g_gpu->stream));
    return fetch(m, sizeof *m);
}

/* The comparison's two kernels, as lib/compare.c runs them: the sums
 * (kernels/stats.cu), then the pixels with a difference and, when diff is
 * given, the difference image over a's device copy (kernels/absdiff.cu),
 * downloaded into diff (allocated here, poisoned first). */
static gimg_status run_diff(const gimg_image *a, const gimg_image *b, gimg_diff_sums *out,
                            gimg_image *diff)
{
    gimg_dimage da, db;
    gimg_status st;
    if ((st = upload(a, 0, &da)) || (st = upload(b, 1, &db)))
        return st;
    GIMG_CUDA(poison(sizeof *out));
    gimg_diff_sums *d_out = (gimg_diff_sums *)(g_scratch + gimg_cuda_stats_scratch_bytes());
    GIMG_CUDA(gimg_cuda_diff(da.d_data, da.pitch_bytes, db.d_data, db.pitch_bytes, a->width,
                             a->height, a->channels, (int)a->sample, g_scratch, d_out, 0,
                             g_gpu->stream));
    GIMG_CUDA(cudaMemsetAsync(&d_out->pixels_differing, 0, sizeof d_out->pixels_differing,
                              g_gpu->stream));
    GIMG_CUDA(gimg_cuda_absdiff(da.d_data, da.pitch_bytes, db.d_data, db.pitch_bytes, a->width,
                                a->height, a->channels, (int)a->sample,
                                diff ? da.d_data : NULL, da.pitch_bytes,
                                (unsigned long long *)&d_out->pixels_differing,
                                g_gpu->stream));
    if ((st = fetch(out, sizeof *out)) || !diff)
        return st;
    if ((st = gimg_image_alloc(diff, a->width, a->height, a->channels, a->sample)))
        return st;
    memset(diff->data, 0x5A, diff->stride_bytes * (size_t)a->height);
    return gimg_gpu_download(g_gpu, &da, diff);
}

static void check_moments(const gimg_image *im, const char *what)
{
    gimg_moments ref, got, again;
    gimg_moments_ref(im, &ref);
    gimg_status st = run_moments(im, &got);
    CHECK(st == GIMG_OK, "%s: %s", what, gimg_last_error());
    if (st)
        return;
    if (im->sample != GIMG_F32) {
        CHECK(memcmp(&ref, &got, sizeof ref) == 0, "%s: moments differ (sum %llu vs %llu, "
              "sumsq %llu vs %llu, min %g vs %g, max %g vs %g, count %llu vs %llu)", what,
              (unsigned long long)ref.isum[0], (unsigned long long)got.isum[0],
              (unsigned long long)ref.isumsq[0], (unsigned long long)got.isumsq[0], ref.min[0],
              got.min[0], ref.max[0], got.max[0], (unsigned long long)ref.count[0],
              (unsigned long long)got.count[0]);
        return;
    }
    for (int c = 0; c < 4; c++) {
        CHECK(ref.count[c] == got.count[c] && ref.nan[c] == got.nan[c] && ref.inf[c] == got.inf[c],
              "%s ch %d: counts %llu/%llu/%llu vs %llu/%llu/%llu", what, c,
              (unsigned long long)got.count[c], (unsigned long long)got.nan[c],
              (unsigned long long)got.inf[c], (unsigned long long)ref.count[c],
              (unsigned long long)ref.nan[c], (unsigned long long)ref.inf[c]);
        CHECK(ref.min[c] == got.min[c] && ref.max[c] == got.max[c] && got.isum[c] == 0 &&
                  got.isumsq[c] == 0 && ref.shift[c] == got.shift[c],
              "%s ch %d: min %g vs %g, max %g vs %g, shift %.9g vs %.9g", what, c, got.min[c],
              ref.min[c], got.max[c], ref.max[c], got.shift[c], ref.shift[c]);
        double mag = c < im->channels ? magnitude_sum(im, c, ref.shift[c], 0) : 0;
        double sq = c < im->channels ? magnitude_sum(im, c, ref.shift[c], 1) : 0;
        CHECK(close_to(got.fsum[c], ref.fsum[c], mag) && close_to(got.fsumsq[c], ref.fsumsq[c], sq),
              "%s ch %d: sums %.17g %.17g vs %.17g %.17g", what, c, got.fsum[c], got.fsumsq[c],
              ref.fsum[c], ref.fsumsq[c]);
    }
    CHECK(run_moments(im, &again) == GIMG_OK && memcmp(&got, &again, sizeof got) == 0,
          "%s: a second run gives other doubles", what);
    /* The statistics the two sets of sums give. */
    gimg_stats sref, sgot;
    gimg_stats_finish(&ref, im->channels, im->sample, &sref);
    gimg_stats_finish(&got, im->channels, im->sample, &sgot);
    for (int c = 0; c <= im->channels; c++) {
        const gimg_channel_stats *r = &sref.ch[c], *g = &sgot.ch[c];
        CHECK(r->count == g->count &&
                  (!r->count || (rel_diff(r->mean, g->mean) <= 1e-12 &&
                                 rel_diff(r->stddev, g->stddev) <= 1e-12)),
              "%s ch %d: mean %.17g vs %.17g, stddev %.17g vs %.17g", what, c, g->mean, r->mean,
              g->stddev, r->stddev);
    }
}

static void check_diff(const gimg_image *a, const gimg_image *b, const char *what)
{
    gimg_diff_sums ref, got;
    gimg_diff_sums_ref(a, b, &ref);
    gimg_image diff = {0}, want_diff = {0};
    gimg_status st = run_diff(a, b, &got, &diff);
    CHECK(st == GIMG_OK, "%s: %s", what, gimg_last_error());
    if (st)
        return;
    /* The difference image: the CPU's, byte for byte (float NaN canonical). */
    gimg_compare_opts o = {.diff_image = &want_diff};
    gimg_diff unused;
    CHECK(gimg_compare_cpu(a, b, &o, &unused) == GIMG_OK, "%s", gimg_last_error());
    int same_rows = 1;
    for (int y = 0; y < a->height && same_rows; y++)
        same_rows = !memcmp(gimg_row(&diff, y), gimg_row(&want_diff, y),
                            (size_t)a->width * gimg_pixel_bytes(a));
    CHECK(same_rows, "%s: difference images differ", what);
    gimg_image_free(&diff);
    gimg_image_free(&want_diff);
    CHECK(ref.pixels_differing == got.pixels_differing, "%s: pixels differing %llu vs %llu", what,
          (unsigned long long)got.pixels_differing, (unsigned long long)ref.pixels_differing);
    if (a->sample != GIMG_F32) {
        CHECK(memcmp(&ref, &got, sizeof ref) == 0, "%s: diff sums differ (differing %llu vs %llu, "
              "abs %llu vs %llu, sq %llu vs %llu, max %g vs %g)", what,
              (unsigned long long)got.differing[0], (unsigned long long)ref.differing[0],
              (unsigned long long)got.isum_abs[0], (unsigned long long)ref.isum_abs[0],
              (unsigned long long)got.isum_sq[0], (unsigned long long)ref.isum_sq[0],
              got.max_abs[0], ref.max_abs[0]);
        return;
    }
    for (int c = 0; c < 4; c++) {
        CHECK(ref.count[c] == got.count[c] && ref.differing[c] == got.differing[c] &&
                  ref.max_abs[c] == got.max_abs[c],
              "%s ch %d: count %llu vs %llu, differing %llu vs %llu, max %g vs %g", what, c,
              (unsigned long long)got.count[c], (unsigned long long)ref.count[c],
              (unsigned long long)got.differing[c], (unsigned long long)ref.differing[c],
              got.max_abs[c], ref.max_abs[c]);
        CHECK(close_to(got.fsum_abs[c], ref.fsum_abs[c], ref.fsum_abs[c]) &&
                  close_to(got.fsum_sq[c], ref.fsum_sq[c], ref.fsum_sq[c]),
              "%s ch %d: sums %.17g %.17g vs %.17g %.17g", what, c, got.fsum_abs[c],
              got.fsum_sq[c], ref.fsum_abs[c], ref.fsum_sq[c]);
    }
}

static void check_size(int w, int h)
{
    char what[64];
    for (size_t s = 0; s < 3; s++)
        for (int c = 1; c <= 4; c++) {
            gimg_image a, b;
            if (gimg_image_alloc(&a, w, h, c, k_samples[s]) ||
                gimg_image_alloc(&b, w, h, c, k_samples[s])) {
                CHECK(0, "alloc: %s", gimg_last_error());
                return;
            }
            const uint64_t seed = (uint64_t)w * 7919 + h * 31 + c * 3 + s;
            fill(&a, seed);
            fill(&b, seed + 1);
            snprintf(what, sizeof what, "%dx%d c%d %d-bit", w, h, c, 8 * (int)k_samples[s]);
            check_moments(&a, what);
            check_diff(&a, &b, what);
            gimg_image_free(&a);
            gimg_image_free(&b);
        }
}

static void test_tiny_sizes(void)
{
    check_size(1, 1);
    check_size(2, 3);
    check_size(17, 5);
    check_size(5, 1);
}

static void test_lines(void)
{
    check_size(g_small ? 257 : 4097, 1);
    check_size(1, g_small ? 257 : 4097);
}

static void test_awkward_sizes(void)
{
    if (g_small) {
        check_size(61, 47);
        check_size(130, 97);
        return;
    }
    check_size(1023, 769);
    check_size(769, 1023);
    uint64_t state = 2025;
    for (int i = 0; i < 6; i++)
        check_size(1 + (int)(testimg_next(&state) % 900), 1 + (int)(testimg_next(&state) % 700));
}

static void test_extremes(void)
{
    /* All maxima: the sums at their largest per sample; all zeros. */
    for (size_t s = 0; s < 2; s++)
        for (int c = 1; c <= 4; c++) {
            gimg_image im;
            CHECK(gimg_image_alloc(&im, g_small ? 99 : 2999, g_small ? 7 : 701, c, k_samples[s]) == GIMG_OK,
                  "alloc");
            for (int v = 0; v < 2; v++) {
                memset(im.data, v ? 0xff : 0, im.stride_bytes * (size_t)im.height);
                check_moments(&im, v ? "all maxima" : "all zeros");
            }
            gimg_image_free(&im);
        }
}

/* Float data far from zero with a small spread (1000 +- 0.01, 1e6 +- 0.5,
 * NaN and infinities among them), the first samples NaN: the shifted sums,
 * GPU against CPU, and the stddev against a two-pass long double one. */
static void test_offset_floats(void)
{
    static const double base[2] = {1000, 1e6}, spread[2] = {0.01, 0.5};
    for (int b = 0; b < 2; b++)
        for (int c = 1; c <= 4; c++) {
            gimg_image im;
            const int w = g_small ? 97 : 1531, h = g_small ? 61 : 777;
            CHECK(gimg_image_alloc(&im, w, h, c, GIMG_F32) == GIMG_OK, "alloc");
            uint64_t state = 99 + 10 * b + c;
            for (int y = 0; y < h; y++) {
                float *row = (float *)gimg_row(&im, y);
                for (int i = 0; i < w * c; i++) {
                    uint64_t r = testimg_next(&state);
                    double u = (double)(r >> 11) / 9007199254740992.0; /* [0, 1) */
                    row[i] = (float)(base[b] + spread[b] * (2 * u - 1) + 0.1 * spread[b] * (i % c));
                    if (r % 97 == 0)
                        row[i] = NAN;
                    else if (r % 89 == 0)
                        row[i] = r & 1 ? INFINITY : -INFINITY;
                }
            }
            ((float *)gimg_row(&im, 0))[0] = NAN;
            char what[64];
            snprintf(what, sizeof what, "offset %g c%d", base[b], c);
            check_moments(&im, what);
            gimg_stats st;
            gimg_stats_opts o = {0};
            CHECK(gimg_stats_compute_cpu(&im, &o, &st) == GIMG_OK, "%s", gimg_last_error());
            for (int ch = 0; ch < c; ch++) {
                long double sum = 0, ss = 0;
                uint64_t n = 0;
                for (int y = 0; y < h; y++)
                    for (int x = 0; x < w; x++) {
                        float v = ((const float *)gimg_row(&im, y))[x * c + ch];
                        if (isfinite(v)) {
                            sum += v;
                            n++;
                        }
                    }
                long double mean = sum / n;
                for (int y = 0; y < h; y++)
                    for (int x = 0; x < w; x++) {
                        float v = ((const float *)gimg_row(&im, y))[x * c + ch];
                        if (isfinite(v))
                            ss += (v - mean) * (v - mean);
                    }
                double want = (double)sqrtl(ss / n);
                CHECK(st.ch[ch].count == n && rel_diff(st.ch[ch].stddev, want) <= 1e-9,
                      "%s ch %d: stddev %.17g, two-pass %.17g", what, ch, st.ch[ch].stddev, want);
            }
            gimg_image_free(&im);
        }
}

static void test_large(void)
{
    if (g_small)
        SKIP("--small");
    check_size(8192, 4096);
}

/* The tools' path: --device gpu, order statistics included, and a region. */
static void test_public_path(void)
{
    gimg_device dev;
    gimg_parse_device("gpu", &dev);
    gimg_ctx *ctx;
    CHECK(gimg_ctx_open(&dev, 0, &ctx) == GIMG_OK, "%s", gimg_last_error());
    gimg_stats_opts o = {.order = 1, .n_percentiles = 2};
    gimg_parse_percentile("t", "1", &o.percentiles[0]);
    gimg_parse_percentile("t", "99.9", &o.percentiles[1]);
    for (size_t s = 0; s < 3; s++)
        for (int c = 1; c <= 4; c++) {
            gimg_image im, im2, view, view2;
            CHECK(gimg_image_alloc(&im, 333, 222, c, k_samples[s]) == GIMG_OK, "alloc");
            CHECK(gimg_image_alloc(&im2, 333, 222, c, k_samples[s]) == GIMG_OK, "alloc");
            fill(&im, 7 + c);
            fill(&im2, 8 + c);
            gimg_region r = {200, 100, 33, 17};
            gimg_image_view(&im, &r, &view);
            gimg_image_view(&im2, &r, &view2);
            const gimg_image *ims[2] = {&im, &view};
            for (int k = 0; k < 2; k++) {
                gimg_stats ref, got;
                CHECK(gimg_stats_compute_cpu(ims[k], &o, &ref) == GIMG_OK, "%s", gimg_last_error());
                gimg_status st = gimg_stats_compute(ctx, ims[k], &o, &got);
                CHECK(st == GIMG_OK, "%s", gimg_last_error());
                if (st)
                    continue;
                if (k_samples[s] != GIMG_F32) {
                    CHECK(memcmp(&ref, &got, sizeof ref) == 0,
                          "c%d %d-bit %s: statistics differ", c, 8 * (int)k_samples[s],
                          k ? "region" : "whole");
                } else {
                    for (int ch = 0; ch <= c; ch++)
                        CHECK(ref.ch[ch].count == got.ch[ch].count &&
                                  ref.ch[ch].median == got.ch[ch].median &&
                                  ref.ch[ch].percentile[1] == got.ch[ch].percentile[1] &&
                                  ref.ch[ch].entropy == got.ch[ch].entropy &&
                                  fabs(ref.ch[ch].mean - got.ch[ch].mean) <=
                                      1e-12 * fabs(ref.ch[ch].mean) + 1e-12 &&
                                  rel_diff(ref.ch[ch].stddev, got.ch[ch].stddev) <= 1e-12,
                              "float c%d ch %d: mean %.17g vs %.17g, stddev %.17g vs %.17g", c,
                              ch, got.ch[ch].mean, ref.ch[ch].mean, got.ch[ch].stddev,
                              ref.ch[ch].stddev);
                }
            }
            /* With SSIM and the difference image, from one upload: every
             * figure but SSIM as the CPU's; SSIM within the GPU's bound
             * (kernels/ssim.cu); the image byte for byte. */
            gimg_diff dref, dgot;
            gimg_image iref, igot;
            gimg_compare_opts oref = {.ssim = 1, .diff_image = &iref};
            gimg_compare_opts ogot = {.ssim = 1, .diff_image = &igot};
            CHECK(gimg_compare_cpu(&view, &view2, &oref, &dref) == GIMG_OK, "%s", gimg_last_error());
            CHECK(gimg_compare(ctx, &view, &view2, &ogot, &dgot) == GIMG_OK, "%s", gimg_last_error());
            for (int ch = 0; ch <= c; ch++) {
                CHECK(fabs(dref.ch[ch].ssim - dgot.ch[ch].ssim) <= GIMG_SSIM_GPU_TOLERANCE ||
                          (k_samples[s] == GIMG_F32 && isnan(dref.ch[ch].ssim) &&
                           isnan(dgot.ch[ch].ssim)),
                      "c%d %d-bit ch %d: SSIM %.17g on the GPU, %.17g on the CPU", c,
                      8 * (int)k_samples[s], ch, dgot.ch[ch].ssim, dref.ch[ch].ssim);
                dgot.ch[ch].ssim = dref.ch[ch].ssim;
            }
            if (k_samples[s] != GIMG_F32)
                CHECK(memcmp(&dref, &dgot, sizeof dref) == 0, "c%d %d-bit: comparison differs", c,
                      8 * (int)k_samples[s]);
            else
                CHECK(dref.ch[c].differing == dgot.ch[c].differing &&
                          dref.ch[c].pixels_differing == dgot.ch[c].pixels_differing &&
                          fabs(dref.ch[c].mse - dgot.ch[c].mse) <= 1e-12 * dref.ch[c].mse,
                      "float c%d: comparison differs", c);
            CHECK(memcmp(iref.data, igot.data, iref.stride_bytes * (size_t)iref.height) == 0,
                  "c%d %d-bit: difference images differ", c, 8 * (int)k_samples[s]);
            gimg_image_free(&iref);
            gimg_image_free(&igot);
            gimg_image_free(&im);
            gimg_image_free(&im2);
        }
    gimg_ctx_close(ctx);
}

/* Samples in a file's own units (12-bit and 10-bit images, and an 8-bit
 * one of maxval 100): the raw sums on the device equal the reference's,
 * and the public statistics and comparison (whose PSNR peak is the
 * maxval) are the CPU's byte for byte. */
static void test_maxval(void)
{
    static const struct {
        gimg_sample s;
        unsigned maxval;
    } types[] = {{GIMG_U16, 4095}, {GIMG_U16, 1023}, {GIMG_U8, 100}};
    gimg_device dev;
    gimg_parse_device("gpu", &dev);
    gimg_ctx *ctx;
    CHECK(gimg_ctx_open(&dev, 0, &ctx) == GIMG_OK, "%s", gimg_last_error());
    gimg_stats_opts o = {.order = 1, .n_percentiles = 1};
    gimg_parse_percentile("t", "99", &o.percentiles[0]);
    const int w = g_small ? 61 : 1031, h = g_small ? 47 : 517;
    for (size_t t = 0; t < sizeof types / sizeof *types; t++)
        for (int c = 1; c <= 4; c++) {
            gimg_image a, b;
            if (gimg_image_alloc(&a, w, h, c, types[t].s) ||
                gimg_image_alloc(&b, w, h, c, types[t].s)) {
                CHECK(0, "alloc: %s", gimg_last_error());
                break;
            }
            testimg_fill_maxval(&a, 300 + t * 10 + c, types[t].maxval);
            testimg_fill_maxval(&b, 400 + t * 10 + c, types[t].maxval);
            char what[64];
            snprintf(what, sizeof what, "maxval %u c%d", types[t].maxval, c);
            check_moments(&a, what);
            check_diff(&a, &b, what);
            gimg_stats ref, got;
            CHECK(gimg_stats_compute_cpu(&a, &o, &ref) == GIMG_OK, "%s", gimg_last_error());
            CHECK(gimg_stats_compute(ctx, &a, &o, &got) == GIMG_OK &&
                      memcmp(&ref, &got, sizeof ref) == 0,
                  "%s: statistics differ (%s)", what, gimg_last_error());
            gimg_diff dref, dgot;
            CHECK(gimg_compare_cpu(&a, &b, NULL, &dref) == GIMG_OK, "%s", gimg_last_error());
            CHECK(gimg_compare(ctx, &a, &b, NULL, &dgot) == GIMG_OK &&
                      memcmp(&dref, &dgot, sizeof dref) == 0 && dgot.peak == types[t].maxval,
                  "%s: comparison differs, peak %g (%s)", what, dgot.peak, gimg_last_error());
            gimg_image_free(&a);
            gimg_image_free(&b);
        }
    gimg_ctx_close(ctx);
}

int main(int argc, char **argv)
{
    g_small = argc > 1 && !strcmp(argv[1], "--small");
    if (gimg_gpu_open(0, &g_gpu) != GIMG_OK) {
        printf("SKIP: gpudiff_stats: %s\n", gimg_last_error());
        return 77;
    }
    size_t bytes = gimg_cuda_stats_scratch_bytes() + 512;
    if (cudaMalloc((void **)&g_scratch, bytes) != cudaSuccess ||
        cudaMemset(g_scratch, 0, bytes) != cudaSuccess) {
        printf("FAIL: setup: no device scratch\n");
        return 1;
    }
    RUN(test_tiny_sizes);
    RUN(test_lines);
    RUN(test_awkward_sizes);
    RUN(test_extremes);
    RUN(test_offset_floats);
    RUN(test_large);
    RUN(test_public_path);
    RUN(test_maxval);
    cudaFree(g_scratch);
    gimg_gpu_close(g_gpu);
    return check_summary();
}
