/*
 * gpudiff_hist — the histogram kernel against the CPU, count for count.
 *
 * Tolerance: none. Counts are integers and every slot comes from the same
 * code on both sides (lib/hist_internal.h), so the kernel's counters must
 * equal the CPU reference's exactly, below/above/NaN included. The device
 * counters are poisoned before every launch (the launcher must clear
 * them) and the host copy before every download.
 *
 * Cases: seeded random images of awkward sizes (row pitches with and
 * without padding, lines, a 1x1), every channel count and depth, with and
 * without luma; the default histogram, a shift-form one, a table-form one
 * with bins and a range that do not divide evenly, 65536 bins (the
 * windowed path: several windows with luma); float images with NaN and
 * infinities; constant images; every forced kernel shape (replicas 32, 16,
 * 8, 1, 16-bit pairs and 8-bit quads; clusters of 8, 3 and 1 blocks); flat
 * 16-bit images on which every block's pair and quad counters wrap many
 * times; and the public gimg_hist_compute() with --device gpu.
 *
 *   gpudiff_hist [--small]     --small: sizes for compute-sanitizer runs
 */
#include "gimg.h"
#include "gimg_hist.h"
#include "gpu_internal.h"
#include "hist_internal.h"
#include "histogram.h"
#include "testimg.h"
#include "check.h"

#include <math.h>
#include <stdlib.h>

static int g_small;
static gimg_gpu *g_gpu;
static const gimg_sample k_samples[] = {GIMG_U8, GIMG_U16, GIMG_F32};
static const int k_clusters[] = {8, 3, 1};  /* blocks a cluster, forced (windowed paths) */

/* The windowed paths' cluster for the tests that do not force one: the
 * automatic 8, but plain blocks under --small. A tiny image still gets a
 * whole cluster per window, each block clearing and merging all its slots,
 * and racecheck made that minutes; the cluster merge runs under the
 * sanitizers in test_forced_shapes (clusters of 3). */
static int g_small_cluster(void) { return g_small ? 1 : 0; }

/* The reference's counters as the kernel lays them out: rows of bins + 3. */
static unsigned long long *ref_slots(const gimg_hist *h)
{
    const int stride = h->bins + GIMG_HIST_EXTRA_SLOTS;
    unsigned long long *s = malloc(sizeof *s * h->channels * stride);
    for (int c = 0; c < h->channels; c++) {
        for (int b = 0; b < h->bins; b++)
            s[c * stride + b] = h->counts[(size_t)c * h->bins + b];
        s[c * stride + h->bins + GIMG_HIST_SLOT_BELOW] = h->below[c];
        s[c * stride + h->bins + GIMG_HIST_SLOT_ABOVE] = h->above[c];
        s[c * stride + h->bins + GIMG_HIST_SLOT_NAN] = h->nan[c];
    }
    return s;
}

/* Runs the kernel (replicas and cluster forced unless 0) and compares
 * with the CPU's counts; large images take the fast CPU backend (itself
 * checked against the reference by unit_hist), small ones the reference.
 * Returns 1 if it ran and matched, 0 if the shape does not exist, -1 on a
 * failure. */
static int check_one(const gimg_image *im, const gimg_hist_params *p, int replicas, int cluster,
                     const char *what)
{
    gimg_hist ref;
    uint64_t pixels = (uint64_t)im->width * im->height;
    gimg_status st = pixels > 1000000 ? gimg_hist_compute_fast(im, p, &ref)
                                      : gimg_hist_compute_cpu(im, p, &ref);
    CHECK(st == GIMG_OK, "%s", gimg_last_error());
    if (st)
        return -1;
    gimg_hist_intmap m = {0};
    if (im->sample != GIMG_F32)
        CHECK(gimg_hist_intmap_init(im->sample, p, &m) == GIMG_OK);
    gimg_cuda_hist_map map;
    gimg_hist_map_for_gpu(im, p, &m, &map);
    const size_t n = (size_t)ref.channels * (p->bins + GIMG_HIST_EXTRA_SLOTS);
    unsigned long long *want = ref_slots(&ref), *got = malloc(sizeof *got * n);
    unsigned long long *d_counts = NULL;
    uint32_t *d_lut = NULL;
    gimg_dimage d_img;
    int result = -1;
    if (gimg_gpu_image(g_gpu, 0, im->width, im->height, im->channels, im->sample, &d_img) ||
        gimg_gpu_upload(g_gpu, im, &d_img)) {
        CHECK(0, "%s", gimg_last_error());
        goto out;
    }
    if (cudaMalloc((void **)&d_counts, sizeof *d_counts * n) ||
        cudaMemsetAsync(d_counts, 0xA5, sizeof *d_counts * n, g_gpu->stream)) {
        CHECK(0, "cudaMalloc");
        goto out;
    }
    if (m.lut) {
        CHECK(cudaMalloc((void **)&d_lut, sizeof *d_lut * m.lut_size) == cudaSuccess);
        /* On the kernel's stream: a cudaMemcpy from pageable memory may
         * return before its copy lands, and the lane's stream does not
         * wait for the default stream's work. */
        CHECK(cudaMemcpyAsync(d_lut, m.lut, sizeof *d_lut * m.lut_size, cudaMemcpyHostToDevice,
                              g_gpu->stream) == cudaSuccess);
        map.d_lut = d_lut;
    }
    unsigned *d_sync;
    if (gimg_gpu_hist_sync(g_gpu, &d_sync)) {
        CHECK(0, "%s", gimg_last_error());
        goto out;
    }
    cudaError_t e = gimg_cuda_hist_shaped(d_img.d_data, d_img.pitch_bytes, im->width,
                                          im->height, im->channels, (int)im->sample, &map,
                                          d_counts, d_sync, replicas, 0, cluster, g_gpu->stream);
    if (e == cudaErrorInvalidValue && (replicas || cluster)) {
        result = 0;  /* no such shape for this histogram */
        goto out;
    }
    CHECK(e == cudaSuccess, "%s: launch: %s", what, cudaGetErrorString(e));
    memset(got, 0x5A, sizeof *got * n);
    unsigned sync[GIMG_CUDA_HIST_SYNC_BYTES / sizeof(unsigned)];
    memset(sync, 0x5A, sizeof sync);
    e = cudaMemcpyAsync(got, d_counts, sizeof *got * n, cudaMemcpyDeviceToHost, g_gpu->stream);
    if (!e)
        e = cudaMemcpyAsync(sync, d_sync, sizeof sync, cudaMemcpyDeviceToHost, g_gpu->stream);
    if (!e)
        e = cudaStreamSynchronize(g_gpu->stream);
    CHECK(e == cudaSuccess, "%s: %s", what, cudaGetErrorString(e));
    /* The next call's clearing relies on these being zero again. */
    for (size_t i = 0; i < sizeof sync / sizeof *sync; i++)
        CHECK(sync[i] == 0, "%s: sync word %zu left at %u", what, i, sync[i]);
    size_t bad = 0, first = n;
    for (size_t i = 0; i < n; i++)
        if (want[i] != got[i]) {
            bad++;
            if (first == n)
                first = i;
        }
    CHECK(bad == 0, "%s: %zu counters differ (first: slot %zu, cpu %llu gpu %llu)", what, bad,
          first, bad ? want[first] : 0, bad ? got[first] : 0);
    result = bad == 0 && e == cudaSuccess ? 1 : -1;
out:
    cudaFree(d_counts);
    cudaFree(d_lut);
    gimg_hist_intmap_free(&m);
    free(want);
    free(got);
    gimg_hist_free(&ref);
    return result;
}

/* Sprinkles NaN, infinities and range edges over a float image. */
static void add_specials(gimg_image *im, uint64_t seed)
{
    static const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, 1.0f, 0.5f, -0.0f, 2.0f};
    uint64_t s = seed;
    size_t per_row = (size_t)im->width * im->channels;
    size_t k = per_row * im->height / 50 + 1;
    for (size_t i = 0; i < k; i++) {
        int y = (int)(testimg_next(&s) % im->height);
        ((float *)gimg_row(im, y))[testimg_next(&s) % per_row] = specials[i % 8];
    }
}

/* Parameter sets per sample type. */
static int params_for(gimg_sample s, int i, gimg_hist_params *p)
{
    static const gimg_hist_params k8[] = {{256, 0, 256, 0}, {32, 0, 256, 0}, {7, 10.5, 200, 0},
                                          {65536, 0, 256, 0}};
    static const gimg_hist_params k16[] = {{256, 0, 65536, 0}, {65536, 0, 65536, 0},
                                           {1001, 300, 60000.5, 0}, {3, 1, 65000, 0}};
    static const gimg_hist_params kf[] = {{256, 0, 1, 0}, {10, -0.25, 0.75, 0},
                                          {65536, 0, 1, 0}, {333, 0.1, 0.9, 0}};
    if (i >= 4)
        return 0;
    *p = s == GIMG_U8 ? k8[i] : s == GIMG_U16 ? k16[i] : kf[i];
    return 1;
}

static void check_size(int w, int h, int all_params)
{
    for (size_t s = 0; s < 3; s++)
        for (int c = 1; c <= 4; c++) {
            gimg_image im;
            gimg_status st = gimg_image_alloc(&im, w, h, c, k_samples[s]);
            CHECK(st == GIMG_OK, "alloc: %s", gimg_last_error());
            if (st)
                return;
            testimg_fill_random(&im, (uint64_t)w * 7919 + h * 31 + c * 3 + s);
            if (k_samples[s] == GIMG_F32)
                add_specials(&im, w + h + c);
            gimg_hist_params p;
            for (int i = 0; params_for(k_samples[s], i, &p); i++) {
                if (!all_params && i > 0 && i != 3)
                    continue;
                /* compute-sanitizer runs: the default and the windowed path;
                 * 65536 bins with one luma setting a layout (on for RGB, off
                 * for the others), as racecheck spent minutes on them here. */
                if (g_small && !all_params && i == 3 && k_samples[s] == GIMG_U8)
                    continue;
                for (int luma = 0; luma <= 1; luma++) {
                    if (g_small && p.bins == 65536 && luma != (c == 3))
                        continue;
                    p.luma = luma;
                    char what[160];
                    snprintf(what, sizeof what, "%dx%d %d ch %d-bit luma %d, %d bins [%g, %g]",
                             w, h, c, 8 * (int)k_samples[s], luma, p.bins, p.lo, p.hi);
                    check_one(&im, &p, 0, g_small_cluster(), what);
                }
            }
            gimg_image_free(&im);
        }
}

static void test_tiny_sizes(void)
{
    check_size(1, 1, !g_small);
    check_size(2, 3, !g_small);
    check_size(17, 5, 1);
}

static void test_lines(void)
{
    check_size(g_small ? 257 : 4099, 1, 0);
    if (!g_small)
        check_size(1, 4099, 0);
}

static void test_awkward_sizes(void)
{
    if (g_small) {
        check_size(61, 47, 0);
        return;
    }
    check_size(1023, 769, 1);
    check_size(768, 512, 1);  /* rows of whole 16-byte words: one contiguous run */
    uint64_t state = 2024;
    for (int i = 0; i < 4; i++)
        check_size(1 + (int)(testimg_next(&state) % 700), 1 + (int)(testimg_next(&state) % 700),
                   0);
}

/* Constant images (one counter takes everything), on every path. */
static void test_constant(void)
{
    int side = g_small ? 40 : 1500;
    for (size_t s = 0; s < 3; s++)
        for (int c = 1; c <= 4; c += 1) {
            gimg_image im;
            CHECK(gimg_image_alloc(&im, side, side - 3, c, k_samples[s]) == GIMG_OK);
            for (int y = 0; y < im.height; y++)
                for (size_t i = 0; i < (size_t)im.width * c; i++) {
                    unsigned char *row = gimg_row(&im, y);
                    if (k_samples[s] == GIMG_U8)
                        row[i] = 200;
                    else if (k_samples[s] == GIMG_U16)
                        ((uint16_t *)row)[i] = 51234;
                    else
                        ((float *)row)[i] = 0.3f;
                }
            gimg_hist_params p;
            for (int i = 0; params_for(k_samples[s], i, &p); i++) {
                if (g_small && i != 0 && i != 1)
                    continue;
                p.luma = 1;
                check_one(&im, &p, 0, g_small_cluster(), "constant");
            }
            gimg_image_free(&im);
        }
}

/* Every kernel shape the benchmark may pick, on one image per layout. */
static void test_forced_shapes(void)
{
    static const int replicas[] = {32, 16, 8, 1, GIMG_CUDA_HIST_PAIRS, GIMG_CUDA_HIST_QUADS};
    const size_t n_replicas = sizeof replicas / sizeof replicas[0];
    int w = g_small ? 45 : 517, h = g_small ? 13 : 300;
    for (size_t s = 0; s < 3; s++)
        for (int c = 1; c <= 4; c++) {
            gimg_image im;
            CHECK(gimg_image_alloc(&im, w, h, c, k_samples[s]) == GIMG_OK);
            testimg_fill_random(&im, 99 + c);
            gimg_hist_params p;
            for (int i = 0; params_for(k_samples[s], i, &p); i++)
                for (int luma = 0; luma <= 1; luma++)
                    for (size_t r = 0; r < n_replicas; r++)
                        for (size_t k = 0; k < (replicas[r] > 1 ? 1 : 3); k++) {
                            /* compute-sanitizer runs: one cluster size, 3 (uneven shares);
                             * the other tests take the automatic 8. */
                            if (g_small && (i > 0 || luma != (c == 3) ||
                                            (replicas[r] <= 1 && k_clusters[k] != 3)))
                                continue;
                            const int cluster = replicas[r] > 1 ? 0 : k_clusters[k];
                            p.luma = luma;
                            char what[160];
                            snprintf(what, sizeof what,
                                     "replicas %d cluster %d: %d ch %d-bit luma %d, %d bins",
                                     replicas[r], cluster, c, 8 * (int)k_samples[s], luma, p.bins);
                            check_one(&im, &p, replicas[r], cluster, what);
                        }
            gimg_image_free(&im);
        }
}

/*
 * The narrow counters' carries: large flat 16-bit images on which each
 * block counts far more than 65536 of one slot, so that the parts of a
 * word (halves of pairs, bytes of quads) and whole words wrap many times:
 * a value in a word's first part, one in its second, both (in random
 * order, lanes disagreeing, and in alternate runs of 64, whole warps
 * agreeing), all four slots of one word in random order (a quad's carry
 * running on into full neighbours, and out of the word), RGB with luma,
 * whose slots lie in several windows, and RGBA (quads: two windows of two
 * channels). Pairs and quads, clusters of 8, 3 and 1.
 */
static void test_pair_carries(void)
{
    if (g_small)
        SKIP("--small");
    for (int pattern = 0; pattern < 7; pattern++) {
        const int c = pattern == 4 ? 3 : pattern == 6 ? 4 : 1;
        gimg_image im;
        CHECK(gimg_image_alloc(&im, 8192, 4096, c, GIMG_U16) == GIMG_OK);
        uint64_t s = 0x9e3779b97f4a7c15ull + pattern;
        for (int y = 0; y < im.height; y++) {
            uint16_t *row = (uint16_t *)gimg_row(&im, y);
            for (size_t i = 0; i < (size_t)im.width * c; i++) {
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                const uint16_t pick = (uint16_t)(s >> 63);
                row[i] = pattern == 0 ? 1000
                       : pattern == 1 ? 1001
                       : pattern == 2 ? (uint16_t)(2000 + pick)
                       : pattern == 3 ? (uint16_t)(2000 + (i / 64) % 2)
                       : pattern == 4 ? (uint16_t)(i % 3 == 0 ? 65535 : i % 3 == 1 ? 30001 : 40000)
                       : pattern == 5 ? (uint16_t)(3000 + (s >> 62))
                                      : (uint16_t)(i % 4 == 0 ? 65535 : i % 4 == 1 ? 3 : 5000 + (s >> 62));
            }
        }
        gimg_hist_params p = {65536, 0, 65536, c == 3};
        for (int quads = 0; quads <= 1; quads++)
            for (size_t k = 0; k < 3; k++) {
                char what[120];
                snprintf(what, sizeof what, "flat pattern %d, %s, cluster %d", pattern,
                         quads ? "quads" : "pairs", k_clusters[k]);
                const int ran = check_one(&im, &p, quads ? GIMG_CUDA_HIST_QUADS : GIMG_CUDA_HIST_PAIRS,
                                          k_clusters[k], what);
                CHECK(ran != 0, "%s: no such shape", what);
            }
        gimg_image_free(&im);
    }
}

static void test_large(void)
{
    if (g_small)
        SKIP("--small");
    for (int c = 1; c <= 4; c++) {
        gimg_image im;
        CHECK(gimg_image_alloc(&im, 8192, 8192, c, GIMG_U8) == GIMG_OK);
        testimg_fill_random(&im, c);
        gimg_hist_params p = {256, 0, 256, c == 3};
        check_one(&im, &p, 0, 0, "8192x8192 8-bit");
        gimg_image_free(&im);
    }
    gimg_image im;
    CHECK(gimg_image_alloc(&im, 4096, 4096, 1, GIMG_U16) == GIMG_OK);
    testimg_fill_random(&im, 16);
    gimg_hist_params p = {65536, 0, 65536, 0};
    check_one(&im, &p, 0, 0, "4096x4096 16-bit, 65536 bins");
    gimg_image_free(&im);
}

/* The path the tools and gstats take: gimg_hist_compute with --device gpu. */
static void test_public_path(void)
{
    gimg_device dev;
    gimg_parse_device("gpu", &dev);
    gimg_ctx *ctx;
    CHECK(gimg_ctx_open(&dev, 0, &ctx) == GIMG_OK, "%s", gimg_last_error());
    for (size_t s = 0; s < 3; s++) {
        gimg_image im;
        CHECK(gimg_image_alloc(&im, 333, 222, 3, k_samples[s]) == GIMG_OK);
        testimg_fill_random(&im, 7 + s);
        gimg_hist_params p;
        for (int i = 0; params_for(k_samples[s], i, &p); i++) {
            if (g_small && p.bins == 65536)
                continue;  /* the sanitizers' time; windows run under them above */
            p.luma = i % 2;
            gimg_hist ref, got;
            CHECK(gimg_hist_compute_cpu(&im, &p, &ref) == GIMG_OK);
            memset(&got, 0x5A, sizeof got);
            gimg_status st = gimg_hist_compute(ctx, &im, &p, &got);
            CHECK(st == GIMG_OK, "%s", gimg_last_error());
            if (!st) {
                CHECK(got.channels == ref.channels && got.bins == ref.bins &&
                      got.lo == ref.lo && got.hi == ref.hi);
                CHECK(!memcmp(got.counts, ref.counts,
                              sizeof *ref.counts * ref.channels * ref.bins) &&
                          !memcmp(got.below, ref.below, sizeof ref.below[0] * ref.channels) &&
                          !memcmp(got.above, ref.above, sizeof ref.above[0] * ref.channels) &&
                          !memcmp(got.nan, ref.nan, sizeof ref.nan[0] * ref.channels),
                      "%d-bit, %d bins: gimg_hist_compute differs", 8 * (int)k_samples[s],
                      p.bins);
                gimg_hist_free(&got);
            }
            gimg_hist_free(&ref);
        }
        gimg_image_free(&im);
    }
    gimg_ctx_close(ctx);
}

/* Samples in a file's own units (12-bit and 10-bit images, maxvals 1000
 * and 700 whose default bins hold 4 and 3 values, an 8-bit maxval 100 with
 * a bin per value): the default histograms (gimg_hist_default_params:
 * shift and table forms) and luma count the same on the device, through
 * the kernel and through gimg_hist_compute with --device gpu. */
static void test_maxval(void)
{
    static const struct {
        gimg_sample s;
        unsigned maxval;
    } types[] = {{GIMG_U16, 4095}, {GIMG_U16, 1023}, {GIMG_U16, 1000}, {GIMG_U16, 700},
                 {GIMG_U8, 100}};
    gimg_device dev;
    gimg_parse_device("gpu", &dev);
    gimg_ctx *ctx;
    CHECK(gimg_ctx_open(&dev, 0, &ctx) == GIMG_OK, "%s", gimg_last_error());
    const int w = g_small ? 61 : 1031, h = g_small ? 47 : 517;
    for (size_t t = 0; t < sizeof types / sizeof *types; t++)
        for (int c = 1; c <= 4; c++) {
            gimg_image im;
            if (gimg_image_alloc(&im, w, h, c, types[t].s)) {
                CHECK(0, "alloc: %s", gimg_last_error());
                break;
            }
            testimg_fill_maxval(&im, 700 + t * 10 + c, types[t].maxval);
            gimg_hist_params p;
            gimg_hist_default_params(&im, &p);
            for (int luma = 0; luma <= 1; luma++) {
                p.luma = luma;
                char what[96];
                snprintf(what, sizeof what, "maxval %u c%d luma %d, %d bins [%g, %g)",
                         types[t].maxval, c, luma, p.bins, p.lo, p.hi);
                check_one(&im, &p, 0, g_small_cluster(), what);
                gimg_hist ref, got;
                CHECK(gimg_hist_compute_cpu(&im, &p, &ref) == GIMG_OK);
                gimg_status st = gimg_hist_compute(ctx, &im, &p, &got);
                CHECK(st == GIMG_OK, "%s: %s", what, gimg_last_error());
                if (!st) {
                    CHECK(got.bins == ref.bins && got.hi == ref.hi &&
                              !memcmp(got.counts, ref.counts,
                                      sizeof *ref.counts * ref.channels * ref.bins) &&
                              !memcmp(got.above, ref.above, sizeof ref.above[0] * ref.channels),
                          "%s: gimg_hist_compute differs", what);
                    gimg_hist_free(&got);
                }
                gimg_hist_free(&ref);
            }
            /* Equalization counts on the device, maps on the CPU: the same
             * image as with --device cpu, in 0..maxval. */
            gimg_image eq_gpu, eq_cpu;
            gimg_device cpu_dev;
            gimg_ctx *cpu;
            gimg_parse_device("cpu", &cpu_dev);
            if (c != 2 && gimg_ctx_open(&cpu_dev, 0, &cpu) == GIMG_OK) {
                int luma = c >= 3;
                if (gimg_hist_equalize(ctx, &im, luma, &eq_gpu) == GIMG_OK) {
                    if (gimg_hist_equalize(cpu, &im, luma, &eq_cpu) == GIMG_OK) {
                        int same = eq_gpu.maxval == eq_cpu.maxval &&
                                   eq_gpu.maxval == im.maxval;
                        for (int y = 0; y < h && same; y++)
                            same = !memcmp(gimg_row(&eq_gpu, y), gimg_row(&eq_cpu, y),
                                           (size_t)w * gimg_pixel_bytes(&im));
                        CHECK(same, "maxval %u c%d: equalized images differ",
                              types[t].maxval, c);
                        gimg_image_free(&eq_cpu);
                    }
                    gimg_image_free(&eq_gpu);
                } else {
                    CHECK(0, "equalize: %s", gimg_last_error());
                }
                gimg_ctx_close(cpu);
            }
            gimg_image_free(&im);
        }
    gimg_ctx_close(ctx);
}

int main(int argc, char **argv)
{
    g_small = argc > 1 && !strcmp(argv[1], "--small");
    if (gimg_gpu_open(0, &g_gpu) != GIMG_OK) {
        printf("SKIP: gpudiff_hist: %s\n", gimg_last_error());
        return 77;
    }
    RUN(test_tiny_sizes);
    RUN(test_lines);
    RUN(test_awkward_sizes);
    RUN(test_constant);
    RUN(test_forced_shapes);
    RUN(test_pair_carries);
    RUN(test_large);
    RUN(test_public_path);
    RUN(test_maxval);
    gimg_gpu_close(g_gpu);
    return check_summary();
}
