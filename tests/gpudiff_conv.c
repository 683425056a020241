/*
 * gpudiff_conv — convolution on the GPU against the CPU, bit for bit.
 *
 * Both sides follow one plan (lib/gimg_conv.h): samples widened to float
 * the same way, one fused multiply-add per tap in the same order (fmaf on
 * the CPU, __fmaf_rn on the GPU, nothing built with fast-math), the same
 * separable two-pass order with float intermediates, the same premultiply,
 * scale/bias/abs and rounding steps. So every case must be identical:
 * there is no tolerance anywhere in this file. The device output buffer is
 * poisoned before every run and the host output before every download, so
 * an unwritten sample shows up as a difference.
 *
 * The CPU side is gimg_conv_reference for small images and kernels, and the
 * fast CPU path (which unit_conv proves identical to the reference) where
 * the reference would take minutes: 127x127 and larger kernels, large
 * images.
 *
 *   gpudiff_conv [--small]     --small: sizes for compute-sanitizer runs
 */
#include "gimg.h"
#include "gpu_internal.h"
#include "conv_internal.h"
#include "testimg.h"
#include "check.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>

static int g_small;
static gimg_gpu *g_gpu;

static const gimg_sample k_samples[] = {GIMG_U8, GIMG_U16, GIMG_F32};

static int compare(const gimg_image *a, const gimg_image *b, int *x, int *y, int *c)
{
    const size_t n = (size_t)a->width * a->channels, e = a->sample;
    for (int r = 0; r < a->height; r++)
        for (size_t i = 0; i < n; i++)
            if (memcmp(gimg_row(a, r) + i * e, gimg_row(b, r) + i * e, e)) {
                *x = (int)(i / a->channels), *y = r, *c = (int)(i % a->channels);
                return 1;
            }
    return 0;
}

/* A seeded random dense kernel of w x h taps in [-1, 1) (never separable). */
static gimg_kernel random_kernel(int w, int h, uint64_t seed, int correlate)
{
    char *text = malloc((size_t)w * h * 16 + 16), *p = text;
    uint64_t s = seed;
    for (int i = 0; i < h; i++) {
        for (int j = 0; j < w; j++)
            p += sprintf(p, "%.6f ", (double)(testimg_next(&s) >> 40) / (1 << 23) - 1.0);
        p += sprintf(p, ";");
    }
    gimg_kernel k;
    gimg_status st = gimg_kernel_parse_text(text, strlen(text), "random", correlate, 0, &k);
    CHECK(st == GIMG_OK, "random kernel: %s", gimg_last_error());
    free(text);
    return k;
}

static gimg_kernel named(const char *spec)
{
    gimg_kernel k;
    gimg_status st = gimg_kernel_parse(spec, 0, 0, &k);
    CHECK(st == GIMG_OK, "%s: %s", spec, gimg_last_error());
    return k;
}

/* One case: GPU vs CPU for an image of w x h, c channels, sample type t. */
static void check_case(int w, int h, int c, gimg_sample t, const gimg_conv_opts *o, int use_ref,
                       const char *what, uint64_t seed)
{
    gimg_image in, ref, got;
    if (gimg_image_alloc(&in, w, h, c, t) || gimg_image_alloc(&got, w, h, c, t)) {
        CHECK(0, "alloc: %s", gimg_last_error());
        return;
    }
    testimg_fill_random(&in, seed);
    gimg_status st = use_ref ? gimg_conv_reference(&in, o, &ref) : gimg_conv_cpu(&in, o, &ref);
    CHECK(st == GIMG_OK, "cpu: %s", gimg_last_error());
    /* Poison the device output (slot 1, reused by the run) and the host output. */
    gimg_dimage d;
    if (gimg_gpu_image(g_gpu, 1, w, h, c, t, &d) == GIMG_OK) {
        cudaMemsetAsync(d.d_data, 0xA5, d.pitch_bytes * (size_t)h, g_gpu->stream);
        cudaStreamSynchronize(g_gpu->stream);
    }
    memset(got.data, 0x5A, got.stride_bytes * (size_t)h);
    gimg_status gs = gimg_conv_gpu(g_gpu, &in, o, &got, NULL);
    CHECK(gs == GIMG_OK, "%s: gpu: %s", what, gimg_last_error());
    int x = 0, y = 0, ch = 0;
    if (!st && !gs)
        CHECK(!compare(&ref, &got, &x, &y, &ch),
              "%s: %dx%d c%d %d-bit border %d alpha %d: first difference at (%d,%d) channel %d",
              what, w, h, c, 8 * (int)t, o->border, o->alpha, x, y, ch);
    if (!st)
        gimg_image_free(&ref);
    gimg_image_free(&got);
    gimg_image_free(&in);
}

/* Every layout, rotating the border, alpha and epilogue settings. */
static void sweep(const gimg_kernel *k, int nk, int w, int h, int use_ref, const char *what)
{
    static uint64_t seed = 1;
    for (size_t s = 0; s < 3; s++)
        for (int c = 1; c <= 4; c++) {
            gimg_conv_opts o;
            gimg_conv_opts_init(&o);
            o.kernels = k;
            o.n_kernels = nk;
            o.border = (gimg_border)(seed % 5);
            o.alpha = (gimg_alpha_mode)((seed / 5) % 3);
            if (seed % 3 == 0) {
                o.scale = -0.625f;
                o.bias = k_samples[s] == GIMG_F32 ? 0.25f : 77.0f;
                o.absolute = 1;
            }
            check_case(w, h, c, k_samples[s], &o, use_ref, what, seed++);
        }
}

static void test_small_kernels(void)
{
    gimg_kernel k1 = random_kernel(1, 1, 1, 0), k3 = random_kernel(3, 3, 2, 0),
                k46 = random_kernel(4, 6, 3, 1), k5 = random_kernel(5, 5, 4, 0);
    const int sizes[][2] = {{1, 1}, {2, 3}, {61, 47}, {130, 97}, {257, 1}, {1, 257}};
    for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
        sweep(&k1, 1, sizes[z][0], sizes[z][1], 1, "1x1");
        sweep(&k3, 1, sizes[z][0], sizes[z][1], 1, "3x3");
        sweep(&k46, 1, sizes[z][0], sizes[z][1], 1, "4x6 correlate");
        sweep(&k5, 1, sizes[z][0], sizes[z][1], 1, "5x5");
    }
    gimg_kernel_free(&k1), gimg_kernel_free(&k3), gimg_kernel_free(&k46), gimg_kernel_free(&k5);
}

/* 3x3 and 5x5 on 8-bit images take the register-window kernel: a lane
 * owns 16 samples of a row, a warp 512, a block 2048, and lanes whose
 * window crosses the left or right edge leave their samples to a kernel of
 * their own. Widths put the edge at every offset within a lane (n = W * C
 * samples a row), images narrower than a lane, segments and blocks that
 * end inside the image, heights that end inside a walk, and a tall narrow
 * image whose walks are longer than the shortest (the launcher sizes them
 * to one wave of resident blocks: 50000 rows over a few hundred walks). */
static void test_register_windows(void)
{
    gimg_kernel k3 = random_kernel(3, 3, 50, 0), k5 = random_kernel(5, 5, 51, 1);
    /* small: also under the sanitizers (--small), where two blocks wide
     * once is enough. */
    const struct { int w, h, small; } sizes[] = {{3, 5, 1},    {6, 40, 1},   {16, 3, 1},
                                                 {171, 37, 1}, {175, 66, 0}, {683, 70, 0},
                                                 {689, 33, 1},  {48, 50000, 0}};
    for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
        if (g_small && !sizes[z].small)
            continue;
        sweep(&k3, 1, sizes[z].w, sizes[z].h, 1, "3x3 register windows");
        sweep(&k5, 1, sizes[z].w, sizes[z].h, 1, "5x5 register windows");
    }
    gimg_kernel_free(&k3), gimg_kernel_free(&k5);
}

static void test_named_and_separable(void)
{
    static const char *const specs[] = {"gaussian:1.5", "box:3", "1 2 1; 2 4 2; 1 2 1", "sobel",
                                        "scharr", "sharpen", "log:1.2", "unsharp:1:0.7",
                                        "gaussian:5", "gaussian:15"};
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
        gimg_kernel k = named(specs[i]);
        sweep(&k, 1, g_small ? 70 : 301, g_small ? 45 : 203, g_small || i < 8, specs[i]);
        gimg_kernel_free(&k);
    }
}

static void test_large_kernels(void)
{
    /* 11, 31 (the benchmark's), 64 (even), 127 (the largest in constant
     * memory: 16129 taps) and 131 (global-memory taps). */
    const int sides[] = {11, 31, 64, 127, 131};
    for (size_t i = 0; i < sizeof sides / sizeof *sides; i++) {
        if (g_small && sides[i] > 64)
            continue;
        gimg_kernel k = random_kernel(sides[i], sides[i] == 64 ? 17 : sides[i], 10 + i, 0);
        sweep(&k, 1, g_small ? 67 : 150, g_small ? 33 : 141, sides[i] <= 11, "large dense");
        gimg_kernel_free(&k);
    }
    /* A tall separable kernel that does not fit the fused kernel. */
    gimg_kernel b = named(g_small ? "box:40" : "box:120");
    sweep(&b, 1, 90, 260, 0, "tall separable");
    gimg_kernel_free(&b);
}

static void test_chains(void)
{
    gimg_kernel k[3] = {named("gaussian:2"), random_kernel(3, 5, 20, 0), named("prewitt")};
    sweep(k, 3, g_small ? 50 : 333, g_small ? 40 : 222, 1, "chain");
    sweep(k, 2, g_small ? 50 : 333, g_small ? 40 : 222, 1, "chain of 2");
    for (int i = 0; i < 3; i++)
        gimg_kernel_free(&k[i]);
}

static void test_awkward_sizes(void)
{
    if (g_small)
        SKIP("--small");
    gimg_kernel k = random_kernel(7, 7, 30, 0), g = named("gaussian:3");
    uint64_t state = 77;
    for (int i = 0; i < 4; i++) {
        int w = 1 + (int)(testimg_next(&state) % 900), h = 1 + (int)(testimg_next(&state) % 900);
        sweep(&k, 1, w, h, 0, "7x7 awkward");
        sweep(&g, 1, w, h, 0, "gaussian:3 awkward");
    }
    sweep(&k, 1, 2048, 1536, 0, "7x7 2048x1536");
    gimg_kernel_free(&k), gimg_kernel_free(&g);
}

/* --alpha premultiply with kernels whose gain is not 1 (alpha divided by
 * the gain) or is 0 (the input's alpha kept, read from the epilogue's
 * alpha_src), alone and chained, every sample type, 2 and 4 channels,
 * with and without --scale/--abs. */
static void test_premultiply_gains(void)
{
    static const char *const specs[] = {"1 1 1", "1 2 1; 2 4 2; 1 2 1", "0.3 -0.2 0.4",
                                        "sobel-x", "laplacian", "edge", "sobel", "log:1",
                                        "emboss"};
    gimg_kernel r = random_kernel(3, 3, 40, 0), chain[2] = {named("gaussian:1"), named("1 1 1")};
    const int W = g_small ? 67 : 203, H = g_small ? 29 : 131;
    uint64_t seed = 500;
    for (size_t i = 0; i <= sizeof specs / sizeof *specs + 1; i++) {
        gimg_kernel k = {0};
        const gimg_kernel *ks = &r;
        int nk = 1;
        const char *what = "random 3x3";
        if (i < sizeof specs / sizeof *specs) {
            k = named(specs[i]);
            ks = &k, what = specs[i];
        } else if (i > sizeof specs / sizeof *specs) {
            ks = chain, nk = 2, what = "gaussian:1 then 1 1 1";
        }
        for (size_t s = 0; s < 3; s++)
            for (int c = 2; c <= 4; c += 2)
                for (int e = 0; e < 2; e++) {
                    gimg_conv_opts o;
                    gimg_conv_opts_init(&o);
                    o.kernels = ks;
                    o.n_kernels = nk;
                    o.border = (gimg_border)(seed % 5);
                    if (e) {
                        o.scale = 1.0f / 3;
                        o.bias = k_samples[s] == GIMG_F32 ? 0.125f : 9.0f;
                        o.absolute = 1;
                    }
                    check_case(W, H, c, k_samples[s], &o, 1, what, seed++);
                }
        if (k.taps)
            gimg_kernel_free(&k);
    }
    gimg_kernel_free(&r), gimg_kernel_free(&chain[0]), gimg_kernel_free(&chain[1]);
}

/* Samples in a file's own units (gimg_image.maxval, 12-bit and 10-bit
 * images, and a 7-bit-ish 8-bit one): results clamped to the maxval on
 * both sides, the maxval kept. Kernels through every GPU path: fused
 * separable, small dense, dense with device taps, gradient magnitude, a
 * chain (widen and narrow), and premultiplied alpha; gains over 1 so that
 * the clamp has work. Also through gimg_conv with --device gpu. */
static void test_maxval(void)
{
    gimg_kernel ks[7];
    ks[0] = named("1 2 1; 2 4 2; 1 2 1");
    ks[1] = named("0 0 0; 0 2 0; 0 0 0");
    ks[2] = named("sharpen");
    ks[3] = random_kernel(g_small ? 9 : 21, g_small ? 9 : 21, 77, 0);
    ks[4] = named("sobel");
    ks[5] = named("gaussian:1.5");
    ks[6] = named("unsharp:1:3");
    static const struct {
        gimg_sample s;
        unsigned maxval;
    } types[] = {{GIMG_U16, 4095}, {GIMG_U16, 1023}, {GIMG_U8, 100}};
    const int w = g_small ? 37 : 301, h = g_small ? 23 : 157;
    uint64_t seed = 4242;
    for (int k = 0; k < 7; k++)
        for (size_t t = 0; t < sizeof types / sizeof *types; t++)
            for (int c = 1; c <= 4; c++, seed++) {
                gimg_image in, ref, got;
                if (gimg_image_alloc(&in, w, h, c, types[t].s) ||
                    gimg_image_alloc(&got, w, h, c, types[t].s)) {
                    CHECK(0, "alloc: %s", gimg_last_error());
                    return;
                }
                testimg_fill_maxval(&in, seed, types[t].maxval);
                gimg_conv_opts o;
                gimg_conv_opts_init(&o);
                o.kernels = &ks[k];
                o.n_kernels = k == 5 ? 2 : 1; /* gaussian then unsharp: a chain */
                o.alpha = (gimg_alpha_mode)(seed % 3);
                o.border = (gimg_border)(seed % 5);
                if (seed % 2) {
                    o.scale = 1.25f;
                    o.bias = 40.0f;
                }
                gimg_status st = g_small || (k != 3) ? gimg_conv_reference(&in, &o, &ref)
                                                     : gimg_conv_cpu(&in, &o, &ref);
                CHECK(st == GIMG_OK, "cpu: %s", gimg_last_error());
                memset(got.data, 0x5A, got.stride_bytes * (size_t)h);
                gimg_status gs = gimg_conv_gpu(g_gpu, &in, &o, &got, NULL);
                CHECK(gs == GIMG_OK, "gpu: %s", gimg_last_error());
                int x = 0, y = 0, ch = 0;
                if (!st && !gs) {
                    CHECK(!compare(&ref, &got, &x, &y, &ch),
                          "kernel %d maxval %u c%d alpha %d: first difference at (%d,%d) "
                          "channel %d", k, types[t].maxval, c, o.alpha, x, y, ch);
                    CHECK(got.maxval == types[t].maxval && ref.maxval == types[t].maxval,
                          "kernel %d: maxval %u (cpu %u), expected %u", k, got.maxval,
                          ref.maxval, types[t].maxval);
                    double top = 0;
                    for (int r = 0; r < h; r++)
                        for (int i = 0; i < w * c; i++)
                            top = fmax(top, types[t].s == GIMG_U8
                                                ? gimg_row(&got, r)[i]
                                                : ((const uint16_t *)gimg_row(&got, r))[i]);
                    CHECK(top <= types[t].maxval, "kernel %d: %g over maxval %u", k, top,
                          types[t].maxval);
                }
                if (!st)
                    gimg_image_free(&ref);
                gimg_image_free(&got);
                gimg_image_free(&in);
            }
    /* The public path, which clamps after either backend. */
    gimg_device dev;
    gimg_parse_device("gpu", &dev);
    gimg_ctx *ctx;
    CHECK(gimg_ctx_open(&dev, 0, &ctx) == GIMG_OK, "%s", gimg_last_error());
    gimg_image in, ref, got;
    CHECK(gimg_image_alloc(&in, 211, 97, 3, GIMG_U16) == GIMG_OK, "alloc");
    testimg_fill_maxval(&in, 99, 4095);
    gimg_conv_opts o;
    gimg_conv_opts_init(&o);
    o.kernels = &ks[1];
    o.n_kernels = 1;
    CHECK(gimg_conv_reference(&in, &o, &ref) == GIMG_OK, "cpu");
    gimg_status st = gimg_conv(ctx, &in, &o, &got);
    CHECK(st == GIMG_OK, "%s", gimg_last_error());
    int x, y, c;
    if (!st) {
        CHECK(!compare(&ref, &got, &x, &y, &c) && got.maxval == 4095,
              "public path differs at (%d,%d), maxval %u", x, y, got.maxval);
        gimg_image_free(&got);
    }
    gimg_image_free(&ref);
    gimg_image_free(&in);
    gimg_ctx_close(ctx);
    for (int k = 0; k < 7; k++)
        gimg_kernel_free(&ks[k]);
}

/* The path the tools take: gimg_conv with --device gpu. */
static void test_public_path(void)
{
    gimg_device dev;
    gimg_parse_device("gpu", &dev);
    gimg_ctx *ctx;
    CHECK(gimg_ctx_open(&dev, 0, &ctx) == GIMG_OK, "%s", gimg_last_error());
    gimg_image in, ref, got;
    CHECK(gimg_image_alloc(&in, 333, 222, 4, GIMG_U8) == GIMG_OK, "alloc");
    testimg_fill_random(&in, 7);
    gimg_kernel k = named("gaussian:2");
    gimg_conv_opts o;
    gimg_conv_opts_init(&o);
    o.kernels = &k;
    o.n_kernels = 1;
    CHECK(gimg_conv_reference(&in, &o, &ref) == GIMG_OK, "cpu");
    gimg_status st = gimg_conv(ctx, &in, &o, &got);
    CHECK(st == GIMG_OK, "%s", gimg_last_error());
    int x, y, c;
    if (!st) {
        CHECK(!compare(&ref, &got, &x, &y, &c), "public path differs at (%d,%d)", x, y);
        gimg_image_free(&got);
    }
    gimg_image_free(&ref);
    gimg_kernel_free(&k);
    gimg_image_free(&in);
    gimg_ctx_close(ctx);
}

/* Bands on the GPU (gimg_conv_bands with a context on the GPU: each
 * band's rows computed from a sub-image of the window's and the band's
 * rows), and an image taller than the kernels' grids (gimg_conv_gpu by
 * sub-images): the CPU's whole image, bit for bit. Fused and two-pass
 * separable kernels, dense ones with anchors off centre, magnitudes and
 * chains; every border but wrap; bands of 1 row, of fewer rows than the
 * halo, awkward heights. The host output is poisoned by the band API's
 * own buffer reuse: rows not downloaded would hold the last band's. */
static void test_bands_and_sub_images(void)
{
    static const char *const specs[] = {"gaussian:2", "gaussian:9", "1 2 3; 4 5 6; 7 8 9; 1 1 1",
                                        "sobel", "box:3,sobel"};
    gimg_device dev;
    gimg_parse_device("gpu", &dev);
    gimg_ctx *ctx;
    if (gimg_ctx_open(&dev, 0, &ctx) != GIMG_OK) {
        CHECK(0, "%s", gimg_last_error());
        return;
    }
    uint64_t seed = 900;
    for (size_t sp = 0; sp < sizeof specs / sizeof *specs; sp++) {
        gimg_kernel k[2];
        int nk = 0;
        char spec[64];
        snprintf(spec, sizeof spec, "%s", specs[sp]);
        for (char *tok = strtok(spec, ","); tok && nk < 2; tok = strtok(NULL, ","))
            k[nk++] = named(tok);
        for (int c = 1; c <= 4; c++) {
            const gimg_sample t = k_samples[(sp + (size_t)c) % 3];
            const int w = g_small ? 19 : 67, h = g_small ? 23 : 301;
            gimg_image in, ref;
            if (gimg_image_alloc(&in, w, h, c, t))
                break;
            testimg_fill_random(&in, seed++);
            gimg_conv_opts o;
            gimg_conv_opts_init(&o);
            o.kernels = k;
            o.n_kernels = nk;
            o.border = (gimg_border)((sp + (size_t)c) % 4 == 3 ? 4 : (sp + (size_t)c) % 4);
            o.alpha = (gimg_alpha_mode)(c % 3);
            if (gimg_conv_cpu(&in, &o, &ref)) {
                CHECK(0, "cpu: %s", gimg_last_error());
                gimg_image_free(&in);
                continue;
            }
            const size_t row_bytes = (size_t)w * gimg_pixel_bytes(&in);
            const int rows[] = {1, 5, 7, h - 1};
            for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
                gimg_conv_bands *cb = NULL;
                gimg_status st = gimg_conv_bands_begin(ctx, &in, &o, &cb);
                CHECK(st == GIMG_OK && cb, "%s: begin: %s", specs[sp], gimg_last_error());
                if (st || !cb)
                    break;
                int next = 0, bad = -1;
                for (int y = 0; y < h && bad < 0; y += rows[r]) {
                    gimg_image band = in, out;
                    band.data = gimg_row(&in, y);
                    band.height = h - y < rows[r] ? h - y : rows[r];
                    int y0;
                    if ((st = gimg_conv_bands_add(cb, &band, &out, &y0))) {
                        CHECK(0, "%s: add: %s", specs[sp], gimg_last_error());
                        break;
                    }
                    for (int i = 0; i < out.height && bad < 0; i++)
                        if (y0 + i != next + i ||
                            memcmp(gimg_row(&out, i), gimg_row(&ref, y0 + i), row_bytes))
                            bad = y0 + i;
                    next += out.height;
                }
                CHECK(!st && bad < 0 && next == h,
                      "%s: %d channels %d-bit border %d, bands of %d on the GPU: row %d "
                      "differs (%d rows given)", specs[sp], c, 8 * (int)t, (int)o.border,
                      rows[r], bad, next);
                gimg_conv_bands_free(cb);
            }
            gimg_image_free(&ref);
            gimg_image_free(&in);
        }
        /* Taller than the grids: by sub-images of at most 65535 rows. */
        if (!g_small) {
            gimg_conv_opts o;
            gimg_conv_opts_init(&o);
            o.kernels = k;
            o.n_kernels = nk;
            o.border = sp % 4 == 3 ? GIMG_BORDER_ZERO : (gimg_border)(sp % 4);
            check_case(5, GIMG_CONV_GPU_MAX_ROWS + 1 + (int)sp * 2000, 1 + (int)sp % 4,
                       k_samples[sp % 3], &o, 0, "taller than the grid", seed++);
        }
        for (int i = 0; i < nk; i++)
            gimg_kernel_free(&k[i]);
    }
    gimg_ctx_close(ctx);
}

/* The lanes of a batch: two per GPU, sharing its __constant__ taps. Threads
 * bound to different lanes convolve at once, each with a kernel of its own
 * of the same size (so each needs its own taps there); every result must be
 * its own kernel's. Without gimg_gpu_lock_constants one lane's taps land
 * under the other's kernel. CHECK is not for threads: they count. */
typedef struct {
    gimg_ctx *ctx;
    int lane, rounds, failed;
    const gimg_kernel *k;
    const gimg_image *in, *ref;
    char why[200];
} lane_job;

static void *lane_main(void *arg)
{
    lane_job *j = arg;
    gimg_ctx_bind_lane(j->lane);
    gimg_conv_opts o;
    gimg_conv_opts_init(&o);
    o.kernels = j->k;
    o.n_kernels = 1;
    for (int r = 0; r < j->rounds; r++) {
        gimg_image got;
        int x, y, c;
        if (gimg_conv(j->ctx, j->in, &o, &got)) {
            snprintf(j->why, sizeof j->why, "%s", gimg_last_error());
            j->failed++;
            continue;
        }
        if (compare(j->ref, &got, &x, &y, &c)) {
            snprintf(j->why, sizeof j->why, "round %d differs at (%d,%d)", r, x, y);
            j->failed++;
        }
        gimg_image_free(&got);
    }
    return NULL;
}

static void test_lanes_share_constants(void)
{
    gimg_device dev;
    gimg_parse_device("gpu:all", &dev);
    gimg_ctx *ctx;
    CHECK(gimg_ctx_open(&dev, 0, &ctx) == GIMG_OK, "%s", gimg_last_error());
    const int lanes = gimg_ctx_lanes(ctx);
    CHECK(lanes >= 2, "%d lanes", lanes);
    enum { MAX_LANES = 16 };
    const int n = lanes < MAX_LANES ? lanes : MAX_LANES;
    gimg_kernel k[MAX_LANES];
    gimg_image in, ref[MAX_LANES];
    lane_job job[MAX_LANES];
    pthread_t thread[MAX_LANES];
    /* --small (the sanitizer runs): a small image, and 5 x 3, the
     * shared-memory kernel, which racecheck has something to check in. On
     * 701x409 racecheck did not finish these lanes in 400 s. */
    CHECK(gimg_image_alloc(&in, g_small ? 67 : 701, g_small ? 45 : 409, 3, GIMG_U8) == GIMG_OK,
          "alloc");
    testimg_fill_random(&in, 11);
    for (int i = 0; i < n; i++) {
        k[i] = random_kernel(5, g_small ? 3 : 5, 100 + i, 0);
        gimg_conv_opts o;
        gimg_conv_opts_init(&o);
        o.kernels = &k[i];
        o.n_kernels = 1;
        CHECK(gimg_conv_cpu(&in, &o, &ref[i]) == GIMG_OK, "cpu: %s", gimg_last_error());
        job[i] = (lane_job){ctx, i, g_small ? 3 : 40, 0, &k[i], &in, &ref[i], ""};
    }
    for (int i = 0; i < n; i++)
        CHECK(pthread_create(&thread[i], NULL, lane_main, &job[i]) == 0, "thread");
    for (int i = 0; i < n; i++) {
        pthread_join(thread[i], NULL);
        CHECK(job[i].failed == 0, "lane %d: %d of %d rounds failed: %s", i, job[i].failed,
              job[i].rounds, job[i].why);
        gimg_image_free(&ref[i]);
        gimg_kernel_free(&k[i]);
    }
    gimg_image_free(&in);
    gimg_ctx_close(ctx);
}

int main(int argc, char **argv)
{
    g_small = argc > 1 && !strcmp(argv[1], "--small");
    if (gimg_gpu_open(0, &g_gpu) != GIMG_OK) {
        printf("SKIP: gpudiff_conv: %s\n", gimg_last_error());
        return 77;
    }
    RUN(test_small_kernels);
    RUN(test_register_windows);
    RUN(test_named_and_separable);
    RUN(test_large_kernels);
    RUN(test_chains);
    RUN(test_awkward_sizes);
    RUN(test_premultiply_gains);
    RUN(test_public_path);
    RUN(test_maxval);
    RUN(test_lanes_share_constants);
    RUN(test_bands_and_sub_images);
    gimg_gpu_close(g_gpu);
    return check_summary();
}
