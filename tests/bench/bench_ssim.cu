/*
 * bench_ssim — validates, then times, SSIM's fused GPU pass (kernels/ssim.cu).
 *
 * For pairs of 8192x8192 images, RGB 8-bit (the target's case), gray 8-bit
 * and RGB 16-bit, b a noisy copy of a (SSIM near 1, as in a regression test):
 *  1. checks the GPU's sums against the CPU backend (gimg_ssim_sums_fast,
 *     equal to the reference bit for bit): count exact, each channel's
 *     SSIM within gpudiff_ssim's tolerance (5e-5); a mismatch stops the
 *     benchmark with exit 1;
 *  2. times with CUDA events (warm-up, then the median of many runs),
 *     rotating over 3 pairs so that the data is several times the L2: a
 *     device-to-device copy of one image (GB/s counting read + write), the
 *     SSIM pass (GB/s counting the two images read), and gconv's fused
 *     separable 11-tap Gaussian (radius 5, SSIM's own weights) on one image
 *     of the pair, by kernels/conv.h's launcher as gconv runs it;
 *  3. prints each, SSIM's rate against the copy's, and ssim/blur: the
 *     issue's target is <= 2.0 for RGB 8-bit (five moments of two images
 *     against one image's blur).
 */
#include "gimg.h"
#include "gimg_conv.h"
#include "gpu_internal.h"
#include "ssim_internal.h"
#include "ssim.h"
#include "conv.h"
#include "testimg.h"
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int kSide = 8192, kSets = 3, kWarmup = 3, kRuns = 30;
static const double kTolerance = 5e-5; /* tests/gpudiff_ssim.c's, and why */
static const double kTarget = 2.0;     /* ssim / blur, RGB 8-bit */

struct Layout { const char *name; int channels; gimg_sample sample; };
static const Layout kLayouts[] = {{"rgb8", 3, GIMG_U8}, {"gray8", 1, GIMG_U8}, {"rgb16", 3, GIMG_U16}};

/* b = a plus seeded noise of +-(max / 32), clamped. */
static void noisy_copy(const gimg_image &a, gimg_image &b, uint64_t seed)
{
    uint64_t state = seed;
    const size_t n = (size_t)a.width * a.channels;
    const int max = (int)gimg_image_max(&a), amp = max / 32;
    for (int y = 0; y < a.height; y++) {
        const unsigned char *ra = gimg_row(&a, y);
        unsigned char *rb = gimg_row(&b, y);
        for (size_t i = 0; i < n; i++) {
            const int d = (int)(testimg_next(&state) % (2 * amp + 1)) - amp;
            if (a.sample == GIMG_U8) {
                const int v = ra[i] + d;
                rb[i] = (unsigned char)(v < 0 ? 0 : v > max ? max : v);
            } else {
                const int v = ((const uint16_t *)ra)[i] + d;
                ((uint16_t *)rb)[i] = (uint16_t)(v < 0 ? 0 : v > max ? max : v);
            }
        }
    }
}

/* A picture-like a: smooth waves plus noise (random data would make the
 * pair's SSIM near 0, not what a comparison meets). */
static void picture(gimg_image &a, uint64_t seed)
{
    testimg_fill_random(&a, seed);
    const size_t n = (size_t)a.width * a.channels;
    const double max = gimg_image_max(&a);
    std::vector<double> col(n);
    for (size_t i = 0; i < n; i++)
        col[i] = sin((double)(i / a.channels) / 41.0 + (double)(i % a.channels));
#pragma omp parallel for
    for (int y = 0; y < a.height; y++) {
        unsigned char *r = gimg_row(&a, y);
        const double cy = cos(y / 29.0);
        for (size_t i = 0; i < n; i++) {
            const double noise = a.sample == GIMG_U8 ? r[i] / 255.0 : ((uint16_t *)r)[i] / 65535.0;
            const double v = max * (0.5 + 0.35 * col[i] * cy + 0.1 * (noise - 0.5));
            if (a.sample == GIMG_U8)
                r[i] = (unsigned char)lround(v);
            else
                ((uint16_t *)r)[i] = (uint16_t)lround(v);
        }
    }
}

static void bench_layout(gimg_gpu *g, const Layout &l, unsigned char *d_scratch,
                         gimg_ssim_sums *d_out)
{
    gimg_image a, b;
    if (gimg_image_alloc(&a, kSide, kSide, l.channels, l.sample) ||
        gimg_image_alloc(&b, kSide, kSide, l.channels, l.sample)) {
        fprintf(stderr, "bench: %s\n", gimg_last_error());
        exit(1);
    }
    picture(a, 42 + l.channels);
    noisy_copy(a, b, 7 + l.channels);
    const double range = gimg_image_max(&a);
    const size_t row = a.stride_bytes, pitch = (row + 15) & ~(size_t)15, bytes = pitch * kSide;
    void *d_a[kSets], *d_b[kSets], *d_out_img;
    for (int i = 0; i < kSets; i++) {
        CK(cudaMalloc(&d_a[i], bytes));
        CK(cudaMalloc(&d_b[i], bytes));
        bench_upload(d_a[i], pitch, a.data, row, row, kSide);
        bench_upload(d_b[i], pitch, b.data, row, row, kSide);
    }
    CK(cudaMalloc(&d_out_img, bytes));

    /* 1. Against the CPU. */
    gimg_ssim_sums ref, got;
    double t0 = gimg_now_ms();
    if (gimg_ssim_sums_fast(&a, &b, range, &ref)) {
        fprintf(stderr, "bench: %s\n", gimg_last_error());
        exit(1);
    }
    const double cpu_ms = gimg_now_ms() - t0;
    CK(cudaMemsetAsync(d_out, 0xA5, sizeof *d_out, g->stream));
    CK(gimg_cuda_ssim(d_a[0], pitch, d_b[0], pitch, kSide, kSide, l.channels, (int)l.sample,
                      range, d_scratch, d_out, g->stream));
    CK(cudaMemcpyAsync(&got, d_out, sizeof got, cudaMemcpyDeviceToHost, g->stream));
    CK(cudaStreamSynchronize(g->stream));
    double worst = 0;
    bool ok = got.count == ref.count;
    for (int c = 0; c < l.channels; c++) {
        const double d = fabs(got.sum[c] / got.count - ref.sum[c] / ref.count);
        worst = d > worst ? d : worst;
        ok = ok && d <= kTolerance;
    }
    if (!ok) {
        printf("MISMATCH: %s: GPU SSIM differs from the CPU's (count %llu vs %llu, largest "
               "difference %.3g)\n", l.name, (unsigned long long)got.count,
               (unsigned long long)ref.count, worst);
        exit(1);
    }
    printf("%-6s validated: SSIM", l.name);
    for (int c = 0; c < l.channels; c++)
        printf(" %.7f", got.sum[c] / got.count);
    printf(" (CPU backend %.0f ms; largest |GPU - CPU| %.2g)\n", cpu_ms, worst);

    /* 2. Timings. */
    const double gb = bytes / 1e9;
    const double copy_ms = median_ms(g->stream, kWarmup, kRuns, [&](int i) {
        CK(cudaMemcpyAsync(d_out_img, d_a[i % kSets], bytes, cudaMemcpyDeviceToDevice, g->stream));
    });
    const double copy_gbs = 2 * gb / copy_ms * 1e3;
    const double ssim_ms = median_ms(g->stream, kWarmup, kRuns, [&](int i) {
        CK(gimg_cuda_ssim(d_a[i % kSets], pitch, d_b[i % kSets], pitch, kSide, kSide, l.channels,
                          (int)l.sample, range, d_scratch, d_out, g->stream));
    });
    const double ssim_gbs = 2 * gb / ssim_ms * 1e3;
    /* gconv's fused separable pass, the Gaussian of SSIM's window. */
    double w[GIMG_SSIM_TAPS];
    float taps[GIMG_SSIM_TAPS];
    gimg_ssim_weights(w);
    for (int j = 0; j < GIMG_SSIM_TAPS; j++)
        taps[j] = (float)w[j];
    CK(gimg_cuda_conv_set_taps(taps, 0, GIMG_SSIM_TAPS, g->stream));
    CK(gimg_cuda_conv_set_taps(taps, GIMG_CUDA_CONV_COL_OFFSET, GIMG_SSIM_TAPS, g->stream));
    if (!gimg_cuda_conv_separable_fits(l.channels, GIMG_SSIM_TAPS, GIMG_SSIM_TAPS)) {
        printf("bench: the fused separable pass does not fit\n");
        exit(1);
    }
    const int type = l.sample == GIMG_U8 ? GIMG_CUDA_U8 : GIMG_CUDA_U16;
    const double blur_ms = median_ms(g->stream, kWarmup, kRuns, [&](int i) {
        const gimg_cuda_plane in = {d_a[i % kSets], pitch, type}, out = {d_out_img, pitch, type};
        const gimg_cuda_epilogue e = {0, 1.0f, 0.0f, 0, 0, in};
        CK(gimg_cuda_conv_separable(in, out, kSide, kSide, l.channels, GIMG_SSIM_TAPS,
                                    GIMG_SSIM_TAPS, GIMG_SSIM_RADIUS, GIMG_SSIM_RADIUS,
                                    GIMG_BORDER_CLAMP, &e, g->stream));
    });
    const double samples = (double)kSide * kSide * l.channels;
    printf("%-6s %-34s %8.3f %8.0f %6.2f\n", l.name, "copy of one image (read+write)", copy_ms,
           copy_gbs, 1.0);
    printf("%-6s %-34s %8.3f %8.0f %6.2f   %.1f G centres/s\n", l.name, "SSIM of the pair",
           ssim_ms, ssim_gbs, ssim_gbs / copy_gbs, samples / ssim_ms / 1e6);
    printf("%-6s %-34s %8.3f %8.0f %6.2f   (GB/s: read + written)\n", l.name,
           "gconv gauss r5 of one image, fused", blur_ms, 2 * gb / blur_ms * 1e3,
           2 * gb / blur_ms * 1e3 / copy_gbs);
    const double ratio = ssim_ms / blur_ms;
    if (l.channels == 3 && l.sample == GIMG_U8)
        printf("%-6s ssim/blur %.2f (target <= %.1f: %s)\n", l.name, ratio, kTarget,
               ratio <= kTarget ? "met" : "missed");
    else
        printf("%-6s ssim/blur %.2f\n", l.name, ratio);

    for (int i = 0; i < kSets; i++) {
        CK(cudaFree(d_a[i]));
        CK(cudaFree(d_b[i]));
    }
    CK(cudaFree(d_out_img));
    gimg_image_free(&a);
    gimg_image_free(&b);
}

int main(void)
{
#ifdef GIMG_HAVE_NPP
    (void)npp_context; /* bench.h's NPP helper: NPP has no SSIM to time against */
#endif
    cudaDeviceProp p;
    gimg_gpu *g = bench_open(&p);
    const size_t scratch = gimg_cuda_ssim_scratch_bytes(kSide, kSide, 4);
    unsigned char *d_scratch;
    CK(cudaMalloc(&d_scratch, scratch + 256));
    CK(cudaMemset(d_scratch, 0, scratch + 256));
    gimg_ssim_sums *d_out = (gimg_ssim_sums *)(d_scratch + scratch);
    printf("SSIM: %dx%d pairs, median of %d runs, %d pairs rotated; GB/s counts the bytes read "
           "(two images) unless said; /copy = over the copy's GB/s\n", kSide, kSide, kRuns, kSets);
    printf("%-6s %-34s %8s %8s %6s\n", "layout", "pass", "ms", "GB/s", "/copy");
    for (const Layout &l : kLayouts)
        bench_layout(g, l, d_scratch, d_out);
    CK(cudaFree(d_scratch));
    gimg_gpu_close(g);
    return 0;
}
