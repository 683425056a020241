/*
 * gpudiff_ssim — SSIM's sums on the GPU (kernels/ssim.cu) against the CPU
 * reference, gimg_ssim_sums_ref (lib/ssim.c, double throughout).
 *
 * Tolerance rule: the count of centres must be exact; each channel's SSIM
 * (sum / count) within GIMG_SSIM_GPU_TOLERANCE (5e-5, kernels/ssim.h) of
 * the reference's, absolute. Why: the GPU
 * computes the moments and S in float (the CPU in double); the variance
 * terms E[a^2 + b^2] - mx^2 - my^2 cancel, leaving float's relative error
 * (~6e-8) of (R/2)^2 against C2 = (0.03 R)^2: up to ~3e-5 in one flat
 * window, much less in a mean over many centres (the test prints the
 * largest difference it met: 7.2e-6 on an H200, so the bound has a
 * margin of 7x while still catching a wrong tap, weight or border, which
 * move SSIM by 1e-3 or more). A channel with NaN in a window is NaN on
 * both. Identical images give 1 within the tolerance (gimg_compare makes
 * it exactly 1, on every backend); the GPU must repeat its own
 * doubles bit for bit, whatever the images' pitches; the sums of the
 * channels past the image's are 0. The result and the partial sums are
 * poisoned before every launch (the counter that finds the last block is
 * left zeroed, as the kernel leaves it), so a field the kernel failed to
 * write, or a partial read before it was written, shows. Device images get
 * pitches of the tight row rounded to 16 and that plus 48 bytes, their
 * padding poisoned (0xFF: NaN for float), so a read past a row shows too.
 *
 *   gpudiff_ssim [--small]     --small: sizes for compute-sanitizer runs
 */
#include "gimg.h"
#include "gimg_stats.h"
#include "gpu_internal.h"
#include "ssim_internal.h"
#include "ssim.h"
#include "testimg.h"
#include "check.h"

#include <math.h>
#include <stdlib.h>

static int g_small;
static gimg_gpu *g_gpu;
static unsigned char *g_scratch; /* scratch, then 256 bytes of result */
static size_t g_scratch_bytes;
static double g_max_diff;       /* the largest |GPU - CPU| met, per channel SSIM */

static const gimg_sample k_samples[] = {GIMG_U8, GIMG_U16, GIMG_F32};

static double uniform(uint64_t *state) { return (double)(testimg_next(state) >> 11) / 9007199254740992.0; }

/* A picture-like image: smooth waves per channel plus noise of amplitude
 * `noise` (of the range), clamped to 0..1 and scaled to the sample's max.
 * With the same wave_seed and small noise, two images are alike (SSIM
 * near 1); flat stretches make the float cancellation show. */
static void fill_picture(gimg_image *im, int wave_seed, uint64_t noise_seed, double noise)
{
    uint64_t state = noise_seed;
    const double max = gimg_image_max(im);
    for (int y = 0; y < im->height; y++) {
        unsigned char *row = gimg_row(im, y);
        for (int x = 0; x < im->width; x++)
            for (int c = 0; c < im->channels; c++) {
                double v = 0.5 + 0.3 * sin(x / (17.0 + 5 * c + wave_seed) + c) *
                                     cos(y / (13.0 + wave_seed)) +
                           0.1 * sin((x + 2 * y) / 7.0 + wave_seed);
                if (x % 97 < 30 && y % 61 < 20)
                    v = 0.25 + 0.5 * (c == 1); /* a flat patch */
                v += noise * (2 * uniform(&state) - 1);
                v = v < 0 ? 0 : v > 1 ? 1 : v;
                const size_t i = (size_t)x * im->channels + c;
                if (im->sample == GIMG_U8)
                    row[i] = (unsigned char)lround(v * max);
                else if (im->sample == GIMG_U16)
                    ((uint16_t *)row)[i] = (uint16_t)lround(v * max);
                else
                    ((float *)row)[i] = (float)v;
            }
    }
}

/* A device copy of im at pitch round16(row) + extra, the padding 0xFF. */
static gimg_status to_device(const gimg_image *im, size_t extra, void **d, size_t *pitch)
{
    const size_t row = (size_t)im->width * gimg_pixel_bytes(im);
    *pitch = ((row + 15) & ~(size_t)15) + extra;
    *d = NULL;
    GIMG_CUDA(cudaMalloc(d, *pitch * im->height));
    GIMG_CUDA(cudaMemset(*d, 0xFF, *pitch * im->height));
    GIMG_CUDA(cudaMemcpy2D(*d, *pitch, im->data, im->stride_bytes, row, im->height,
                           cudaMemcpyHostToDevice));
    /* The copy is the default stream's, from pageable memory: it may not
     * have landed when it returns, and the lane's stream does not wait. */
    GIMG_CUDA(cudaDeviceSynchronize());
    return GIMG_OK;
}

/* The GPU's sums of a and b at pitches padded by extra bytes. */
static gimg_status run_gpu(const gimg_image *a, const gimg_image *b, double range, size_t extra,
                           gimg_ssim_sums *out)
{
    void *da = NULL, *db = NULL;
    size_t pa, pb;
    gimg_status st = to_device(a, extra, &da, &pa);
    if (!st)
        st = to_device(b, extra + 16 * (extra > 0), &db, &pb);
    if (!st) {
        gimg_ssim_sums *d_out = (gimg_ssim_sums *)(g_scratch + g_scratch_bytes);
        memset(out, 0x5A, sizeof *out);
        cudaError_t e = cudaMemsetAsync(g_scratch + 256, 0xA5, g_scratch_bytes - 256, g_gpu->stream);
        if (!e)
            e = cudaMemsetAsync(d_out, 0xA5, sizeof *d_out, g_gpu->stream);
        if (!e)
            e = gimg_cuda_ssim(da, pa, db, pb, a->width, a->height, a->channels, (int)a->sample,
                               range, g_scratch, d_out, g_gpu->stream);
        if (!e)
            e = cudaMemcpyAsync(out, d_out, sizeof *out, cudaMemcpyDeviceToHost, g_gpu->stream);
        if (!e)
            e = cudaStreamSynchronize(g_gpu->stream);
        if (e)
            st = gimg_fail(gimg_cuda_status(e), "CUDA: %s", cudaGetErrorString(e));
    }
    cudaFree(da);
    cudaFree(db);
    return st;
}

/* GPU against the reference for one pair; returns 1 when it ran. */
static int check_pair(const gimg_image *a, const gimg_image *b, const char *what)
{
    const double range = gimg_image_max(a);
    gimg_ssim_sums ref, got, again;
    memset(&ref, 0, sizeof ref);
    gimg_status st = gimg_ssim_sums_ref(a, b, range, &ref);
    CHECK(st == GIMG_OK, "%s: reference: %s", what, gimg_last_error());
    st = st ? st : run_gpu(a, b, range, 0, &got);
    st = st ? st : run_gpu(a, b, range, 48, &again);
    CHECK(st == GIMG_OK, "%s: %s", what, gimg_last_error());
    if (st)
        return 0;
    CHECK(memcmp(&got, &again, sizeof got) == 0, "%s: the GPU does not repeat its sums", what);
    CHECK(got.count == ref.count, "%s: count %llu, reference %llu", what,
          (unsigned long long)got.count, (unsigned long long)ref.count);
    for (int c = 0; c < 4; c++) {
        if (c >= a->channels || ref.count == 0) {
            CHECK(got.sum[c] == 0.0 && !signbit(got.sum[c]), "%s: channel %d's sum %g, not 0",
                  what, c, got.sum[c]);
            continue;
        }
        const double s_ref = ref.sum[c] / (double)ref.count, s_got = got.sum[c] / (double)got.count;
        if (isnan(s_ref) || isnan(s_got)) {
            CHECK(isnan(s_ref) && isnan(s_got), "%s ch %d: SSIM %.9g, reference %.9g", what, c,
                  s_got, s_ref);
            continue;
        }
        const double d = fabs(s_got - s_ref);
        if (d > g_max_diff)
            g_max_diff = d;
        CHECK(d <= GIMG_SSIM_GPU_TOLERANCE, "%s ch %d: SSIM %.9g, reference %.9g (%.3g apart)", what, c,
              s_got, s_ref, d);
    }
    return 1;
}

static void pair_of(int w, int h, int c, gimg_sample s, int seed, double noise, gimg_image *a,
                    gimg_image *b)
{
    CHECK(gimg_image_alloc(a, w, h, c, s) == GIMG_OK && gimg_image_alloc(b, w, h, c, s) == GIMG_OK,
          "alloc %dx%d", w, h);
    fill_picture(a, seed % 7, 100 + seed, 0.02);
    fill_picture(b, seed % 7, 200 + seed, noise);
}

/* Every channel count and sample type over sizes on both sides of the
 * window (no centre below 11), lines, and odd sizes past a tile. */
static void test_awkward_sizes(void)
{
    static const int sizes[][2] = {{1, 1},     {10, 10},  {11, 11},  {17, 9},    {13, 1000},
                                   {1000, 13}, {333, 517}, {4097, 3}, {12, 40},   {107, 43},
                                   {2048, 2048}, {4099, 1031}};
    const int n = g_small ? 10 : 12;
    for (int i = 0; i < n; i++)
        for (size_t s = 0; s < 3; s++)
            for (int c = 1; c <= 4; c++) {
                gimg_image a, b;
                pair_of(sizes[i][0], sizes[i][1], c, k_samples[s], i * 16 + c, 0.08, &a, &b);
                char what[80];
                snprintf(what, sizeof what, "%dx%d c%d %d-bit", sizes[i][0], sizes[i][1], c,
                         8 * (int)k_samples[s]);
                check_pair(&a, &b, what);
                gimg_image_free(&a);
                gimg_image_free(&b);
            }
}

/* Independent noise (SSIM near 0) and alike pictures (near 1). */
static void test_noise_and_alike(void)
{
    const int w = g_small ? 75 : 1021, h = g_small ? 53 : 771;
    for (size_t s = 0; s < 3; s++)
        for (int c = 1; c <= 4; c++) {
            gimg_image a, b;
            CHECK(gimg_image_alloc(&a, w, h, c, k_samples[s]) == GIMG_OK &&
                      gimg_image_alloc(&b, w, h, c, k_samples[s]) == GIMG_OK, "alloc");
            testimg_fill_random(&a, 11 + c);
            testimg_fill_random(&b, 21 + c);
            char what[80];
            snprintf(what, sizeof what, "noise c%d %d-bit", c, 8 * (int)k_samples[s]);
            check_pair(&a, &b, what);
            fill_picture(&a, 3, 31 + c, 0.0);
            fill_picture(&b, 3, 41 + c, 0.004);
            snprintf(what, sizeof what, "alike c%d %d-bit", c, 8 * (int)k_samples[s]);
            check_pair(&a, &b, what);
            gimg_image_free(&a);
            gimg_image_free(&b);
        }
}

/* An image against itself: within the tolerance of 1 here (the kernel's
 * fused arithmetic does not give exactly 1: the library, gimg_compare,
 * reports channels without a differing sample as exactly 1 on every
 * backend, which gpudiff_stats checks on the GPU). */
static void test_equal_images(void)
{
    const int w = g_small ? 64 : 333, h = g_small ? 50 : 517;
    for (size_t s = 0; s < 3; s++)
        for (int c = 1; c <= 4; c++) {
            gimg_image a;
            CHECK(gimg_image_alloc(&a, w, h, c, k_samples[s]) == GIMG_OK, "alloc");
            fill_picture(&a, c, 51 + c, 0.1);
            gimg_ssim_sums got;
            gimg_status st = run_gpu(&a, &a, gimg_image_max(&a), 0, &got);
            CHECK(st == GIMG_OK, "%s", gimg_last_error());
            if (!st) {
                CHECK(got.count == (uint64_t)(w - 10) * (h - 10), "count %llu",
                      (unsigned long long)got.count);
                for (int ch = 0; ch < c; ch++)
                    CHECK(fabs(got.sum[ch] / (double)got.count - 1) <= GIMG_SSIM_GPU_TOLERANCE,
                          "c%d %d-bit ch %d: SSIM of an image with itself %.17g", c,
                          8 * (int)k_samples[s], ch, got.sum[ch] / (double)got.count);
            }
            char what[80];
            snprintf(what, sizeof what, "equal c%d %d-bit", c, 8 * (int)k_samples[s]);
            check_pair(&a, &a, what);
            gimg_image_free(&a);
        }
}

/* Regions of larger images (host strides of the whole), odd offsets. */
static void test_views(void)
{
    for (size_t s = 0; s < 3; s++)
        for (int c = 1; c <= 4; c++) {
            gimg_image a, b, va, vb;
            pair_of(g_small ? 90 : 700, g_small ? 70 : 400, c, k_samples[s], 70 + c, 0.05, &a, &b);
            const gimg_region r = {g_small ? 53 : 531, g_small ? 41 : 301, 7, 13};
            gimg_image_view(&a, &r, &va);
            gimg_image_view(&b, &r, &vb);
            char what[80];
            snprintf(what, sizeof what, "view c%d %d-bit", c, 8 * (int)k_samples[s]);
            check_pair(&va, &vb, what);
            gimg_image_free(&a);
            gimg_image_free(&b);
        }
}

/* Samples in a file's own units: the data range is the maxval. */
static void test_maxval(void)
{
    static const struct { gimg_sample s; unsigned maxval; } types[] = {
        {GIMG_U16, 4095}, {GIMG_U16, 1023}, {GIMG_U8, 100}};
    for (size_t t = 0; t < 3; t++)
        for (int c = 1; c <= 4; c += 2) {
            gimg_image a, b;
            const int w = g_small ? 61 : 1031, h = g_small ? 47 : 517;
            CHECK(gimg_image_alloc(&a, w, h, c, types[t].s) == GIMG_OK &&
                      gimg_image_alloc(&b, w, h, c, types[t].s) == GIMG_OK, "alloc");
            a.maxval = b.maxval = types[t].maxval;
            fill_picture(&a, 2, 61 + c, 0.01);
            fill_picture(&b, 2, 71 + c, 0.05);
            char what[80];
            snprintf(what, sizeof what, "maxval %u c%d", types[t].maxval, c);
            check_pair(&a, &b, what);
            gimg_image_free(&a);
            gimg_image_free(&b);
        }
}

/* NaN and infinity in a float window: that channel NaN, the others not. */
static void test_non_finite(void)
{
    for (int k = 0; k < 2; k++) {
        gimg_image a, b;
        pair_of(40, 30, 3, GIMG_F32, 90 + k, 0.05, &a, &b);
        ((float *)gimg_row(&a, 12))[20 * 3 + 1] = k ? INFINITY : NAN;
        gimg_ssim_sums got;
        gimg_status st = run_gpu(&a, &b, 1.0, 0, &got);
        CHECK(st == GIMG_OK, "%s", gimg_last_error());
        if (!st)
            CHECK(isnan(got.sum[1]) && isfinite(got.sum[0]) && isfinite(got.sum[2]),
                  "%s: sums %g %g %g", k ? "inf" : "NaN", got.sum[0], got.sum[1], got.sum[2]);
        check_pair(&a, &b, k ? "inf" : "NaN");
        gimg_image_free(&a);
        gimg_image_free(&b);
    }
}

/* Arguments outside the contract are refused before any launch. */
static void test_bad_arguments(void)
{
    gimg_ssim_sums *d_out = (gimg_ssim_sums *)(g_scratch + g_scratch_bytes);
    void *d = g_scratch + 4096; /* 16-byte aligned, never read */
    CHECK(gimg_cuda_ssim(d, 64, d, 64, 16, 16, 5, 1, 255, g_scratch, d_out, g_gpu->stream) ==
          cudaErrorInvalidValue, "5 channels");
    CHECK(gimg_cuda_ssim(d, 64, d, 64, 16, 16, 1, 3, 255, g_scratch, d_out, g_gpu->stream) ==
          cudaErrorInvalidValue, "3-byte samples");
    CHECK(gimg_cuda_ssim(d, 64, d, 64, 16, 16, 1, 1, 0, g_scratch, d_out, g_gpu->stream) ==
          cudaErrorInvalidValue, "range 0");
    CHECK(gimg_cuda_ssim(d, 64, d, 64, 16, 16, 1, 1, NAN, g_scratch, d_out, g_gpu->stream) ==
          cudaErrorInvalidValue, "range NaN");
    CHECK(gimg_cuda_ssim(d, 40, d, 64, 16, 16, 1, 1, 255, g_scratch, d_out, g_gpu->stream) ==
          cudaErrorInvalidValue, "pitch not a multiple of 16");
    CHECK(gimg_cuda_ssim((char *)d + 1, 64, d, 64, 16, 16, 1, 1, 255, g_scratch, d_out,
                         g_gpu->stream) == cudaErrorInvalidValue, "misaligned image");
    CHECK(cudaStreamSynchronize(g_gpu->stream) == cudaSuccess, "stream");
}

int main(int argc, char **argv)
{
    g_small = argc > 1 && !strcmp(argv[1], "--small");
    if (gimg_gpu_open(0, &g_gpu) != GIMG_OK) {
        printf("SKIP: gpudiff_ssim: %s\n", gimg_last_error());
        return 77;
    }
    g_scratch_bytes = gimg_cuda_ssim_scratch_bytes(4099, 1031, 4);
    if (g_scratch_bytes < 8192 || cudaMalloc((void **)&g_scratch, g_scratch_bytes + 256) != cudaSuccess ||
        cudaMemset(g_scratch, 0, g_scratch_bytes + 256) != cudaSuccess) {
        printf("FAIL: setup: no device scratch\n");
        return 1;
    }
    RUN(test_awkward_sizes);
    RUN(test_noise_and_alike);
    RUN(test_equal_images);
    RUN(test_views);
    RUN(test_maxval);
    RUN(test_non_finite);
    RUN(test_bad_arguments);
    fprintf(stderr, "  gpudiff_ssim: largest |GPU - CPU| of a channel's SSIM: %.3g (tolerance %g)\n",
            g_max_diff, GIMG_SSIM_GPU_TOLERANCE);
    cudaFree(g_scratch);
    gimg_gpu_close(g_gpu);
    return check_summary();
}
