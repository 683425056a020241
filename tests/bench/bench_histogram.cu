/*
 * bench_histogram — validates, then times, the histogram kernel.
 *
 * For 8192x8192 8-bit gray, RGB and RGBA images, with uniformly random data
 * and with a constant image:
 *  1. checks the kernel's counts against the CPU (exact; counters poisoned
 *     first), and CUB's and NPP's too, so that every line timed computes
 *     the same histogram; a mismatch stops the benchmark with exit 1;
 *  2. times each with CUDA events (warm-up, then the median of many runs),
 *     rotating over several images so that the data is several times the
 *     L2 and the cache cannot serve repeated runs;
 *  3. prints GB/s (bytes read), the ratio to a device-to-device copy of the
 *     same bytes measured in the same run (copy ms / kernel ms), the time
 *     of a kernel that only reads them (the floor under any histogram),
 *     and the ratios to CUB's DeviceHistogram::HistogramEven /
 *     MultiHistogramEven and to nppiHistogramEven (when NPP is present).
 * Then the other kernel shapes (replicas and block sizes) on the same data,
 * the other paths (16-bit with 256 and 65536 bins, float, luma), and the
 * end-to-end break-even of --device auto (the CPU backend against upload +
 * kernel + download, from host memory as the tools hold it).
 */
#include "gimg.h"
#include "gimg_hist.h"
#include "gpu_internal.h"
#include "hist_internal.h"
#include "histogram.h"
#include "testimg.h"
#include "bench.h"

#include <cub/device/device_histogram.cuh>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef GIMG_HAVE_NPP
#include <nppi.h>
#endif

static const int kSide = 8192, kSets = 3, kWarmup = 3, kRuns = 25;

struct Layout { const char *name; int channels; };
static const Layout kLayouts[] = {{"gray8", 1}, {"rgb8", 3}, {"rgba8", 4}};

static void die(const char *what)
{
    fprintf(stderr, "bench: %s: %s\n", what, gimg_last_error());
    exit(1);
}

/* The CPU's counters in the kernel's layout (rows of bins + 3). */
static std::vector<unsigned long long> cpu_slots(const gimg_image &im, const gimg_hist_params &p)
{
    gimg_hist h;
    if (gimg_hist_compute_fast(&im, &p, &h))
        die("cpu histogram");
    const int stride = p.bins + GIMG_HIST_EXTRA_SLOTS;
    std::vector<unsigned long long> s((size_t)h.channels * stride);
    for (int c = 0; c < h.channels; c++) {
        for (int b = 0; b < h.bins; b++)
            s[(size_t)c * stride + b] = h.counts[(size_t)c * h.bins + b];
        s[(size_t)c * stride + h.bins + GIMG_HIST_SLOT_BELOW] = h.below[c];
        s[(size_t)c * stride + h.bins + GIMG_HIST_SLOT_ABOVE] = h.above[c];
        s[(size_t)c * stride + h.bins + GIMG_HIST_SLOT_NAN] = h.nan[c];
    }
    gimg_hist_free(&h);
    return s;
}

/* One histogram problem on the device: images, counters, table. */
struct Problem {
    gimg_image h_img;
    gimg_hist_params p;
    gimg_cuda_hist_map map;
    void *d_img[kSets];
    size_t pitch;
    unsigned long long *d_counts;
    unsigned *d_sync;  /* the kernel's sync words (the lane's): zero between calls */
    uint32_t *d_lut;
    std::vector<unsigned long long> want;
    size_t n_slots, bytes;
};

static void problem_open(gimg_gpu *g, Problem &pr, int w, int h, int channels, gimg_sample s,
                         const gimg_hist_params &p, bool constant, uint64_t seed)
{
    if (gimg_image_alloc(&pr.h_img, w, h, channels, s))
        die("alloc");
    if (constant) {
        for (int y = 0; y < h; y++)
            for (size_t i = 0; i < (size_t)w * channels; i++) {
                unsigned char *row = gimg_row(&pr.h_img, y);
                if (s == GIMG_U8)
                    row[i] = 77;
                else if (s == GIMG_U16)
                    ((uint16_t *)row)[i] = 40000;
                else
                    ((float *)row)[i] = 0.3f;
            }
    } else {
        testimg_fill_random(&pr.h_img, seed);
    }
    pr.p = p;
    gimg_hist_intmap m = {0};
    if (s != GIMG_F32 && gimg_hist_intmap_init(s, &p, &m))
        die("intmap");
    gimg_hist_map_for_gpu(&pr.h_img, &p, &m, &pr.map);
    pr.d_lut = nullptr;
    if (m.lut) {
        CK(cudaMalloc(&pr.d_lut, sizeof(uint32_t) * m.lut_size));
        bench_upload_bytes(pr.d_lut, m.lut, sizeof(uint32_t) * m.lut_size);
        pr.map.d_lut = pr.d_lut;
    }
    gimg_hist_intmap_free(&m);
    const size_t row = (size_t)w * gimg_pixel_bytes(&pr.h_img);
    pr.pitch = (row + 15) & ~(size_t)15;
    pr.bytes = row * h;
    for (int i = 0; i < kSets; i++) {
        CK(cudaMalloc(&pr.d_img[i], pr.pitch * h));
        bench_upload(pr.d_img[i], pr.pitch, pr.h_img.data, pr.h_img.stride_bytes, row, h);
    }
    pr.n_slots = (size_t)(channels + p.luma) * (p.bins + GIMG_HIST_EXTRA_SLOTS);
    CK(cudaMalloc(&pr.d_counts, sizeof(unsigned long long) * pr.n_slots));
    pr.d_sync = bench_hist_sync(g);
    pr.want = cpu_slots(pr.h_img, p);
}

static void problem_close(Problem &pr)
{
    for (int i = 0; i < kSets; i++)
        CK(cudaFree(pr.d_img[i]));
    CK(cudaFree(pr.d_counts));
    CK(cudaFree(pr.d_lut));
    gimg_image_free(&pr.h_img);
}

/* The kernel's shape: replicas, threads per block, blocks a cluster (0: the
 * launcher's choice). */
struct Shape { int replicas, threads, cluster; };

static cudaError_t run_ours(const Problem &pr, int set, Shape sh, cudaStream_t s)
{
    return gimg_cuda_hist_shaped(pr.d_img[set], pr.pitch, pr.h_img.width, pr.h_img.height,
                                 pr.h_img.channels, (int)pr.h_img.sample, &pr.map, pr.d_counts,
                                 pr.d_sync, sh.replicas, sh.threads, sh.cluster, s);
}

/* Checks our counters (poisoned first); false if the shape does not exist. */
static bool validate_ours(const Problem &pr, Shape sh, cudaStream_t s, const char *what)
{
    CK(cudaMemsetAsync(pr.d_counts, 0xA5, sizeof(unsigned long long) * pr.n_slots, s));
    cudaError_t e = run_ours(pr, 0, sh, s);
    if (e == cudaErrorInvalidValue && (sh.replicas || sh.threads || sh.cluster))
        return false;
    CK(e);
    std::vector<unsigned long long> got(pr.n_slots, 0x5A5A5A5A5A5A5A5Aull);
    CK(cudaMemcpyAsync(got.data(), pr.d_counts, sizeof(unsigned long long) * pr.n_slots,
                       cudaMemcpyDeviceToHost, s));
    unsigned sync[GIMG_CUDA_HIST_SYNC_BYTES / sizeof(unsigned)];
    CK(cudaMemcpyAsync(sync, pr.d_sync, sizeof sync, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    const bool sync_zero = std::all_of(sync, sync + sizeof sync / sizeof *sync,
                                       [](unsigned v) { return v == 0; });
    if (got != pr.want || !sync_zero) {
        printf("MISMATCH: %s (replicas %d, threads %d, cluster %d) %s\n", what, sh.replicas,
               sh.threads, sh.cluster,
               got != pr.want ? "differs from the CPU" : "left its sync words non-zero");
        exit(1);
    }
    return true;
}

/* Fills the four 256-bin device histograms with a pattern no count has. */
static void poison_bins(int *const *d_hist, cudaStream_t s)
{
    for (int i = 0; i < 4; i++)
        CK(cudaMemsetAsync(d_hist[i], 0xA5, 256 * sizeof(int), s));
}

/* Whether every channel's 256 device bins equal the CPU's counts. */
static bool device_bins_match(const Problem &pr, int *const *d_hist)
{
    const size_t stride = pr.p.bins + GIMG_HIST_EXTRA_SLOTS;
    for (int c = 0; c < pr.h_img.channels; c++) {
        int h[256];
        CK(cudaMemcpy(h, d_hist[c], sizeof h, cudaMemcpyDeviceToHost));
        for (int b = 0; b < 256; b++)
            if ((unsigned long long)h[b] != pr.want[c * stride + b])
                return false;
    }
    return true;
}

/* CUB: HistogramEven (gray) or MultiHistogramEven (RGB, RGBA), 257 levels
 * over [0, 256), the rows at the benchmark's pitch. */
struct Cub {
    void *d_temp = nullptr;
    size_t temp_bytes = 0;
    int *d_hist[4] = {};
    template <int N> cudaError_t multi(const unsigned char *d, int w, int h, size_t pitch,
                                       cudaStream_t s)
    {
        ::cuda::std::array<int *, N> hist;
        ::cuda::std::array<int, N> levels, lo, hi;
        for (int i = 0; i < N; i++) {
            hist[i] = d_hist[i];
            levels[i] = 257;
            lo[i] = 0;
            hi[i] = 256;
        }
        return cub::DeviceHistogram::MultiHistogramEven<N, N>(d_temp, temp_bytes, d, hist, levels,
                                                              lo, hi, w, h, pitch, s);
    }
    cudaError_t run(const Problem &pr, int set, cudaStream_t s)
    {
        const int w = pr.h_img.width, h = pr.h_img.height, c = pr.h_img.channels;
        const unsigned char *d = static_cast<const unsigned char *>(pr.d_img[set]);
        if (c == 1)
            return cub::DeviceHistogram::HistogramEven(d_temp, temp_bytes, d, d_hist[0], 257, 0,
                                                       256, w, h, pr.pitch, s);
        return c == 3 ? multi<3>(d, w, h, pr.pitch, s) : multi<4>(d, w, h, pr.pitch, s);
    }
    void open(const Problem &pr, cudaStream_t s)
    {
        for (int i = 0; i < 4; i++)
            CK(cudaMalloc(&d_hist[i], 256 * sizeof(int)));
        CK(run(pr, 0, s));  /* d_temp == NULL: asks for the size */
        CK(cudaMalloc(&d_temp, temp_bytes));
    }
    void close()
    {
        for (int i = 0; i < 4; i++)
            CK(cudaFree(d_hist[i]));
        CK(cudaFree(d_temp));
    }
    bool validate(const Problem &pr, cudaStream_t s)
    {
        poison_bins(d_hist, s);
        CK(run(pr, 0, s));
        CK(cudaStreamSynchronize(s));
        return device_bins_match(pr, d_hist);
    }
};

#ifdef GIMG_HAVE_NPP
/* NPP's buffer-size out-parameter was int * in older releases, size_t * in
 * newer ones: this converts to either. */
struct NppSize {
    size_t s = 0;
    int i = 0;
    operator size_t *() { return &s; }
    operator int *() { return &i; }
    size_t get() const { return s ? s : (size_t)i; }
};

struct Npp {
    Npp8u *d_buf = nullptr;
    Npp32s *d_hist[4] = {};
    NppStreamContext ctx;
    NppStatus run(const Problem &pr, int set)
    {
        NppiSize roi = {pr.h_img.width, pr.h_img.height};
        const Npp8u *d = static_cast<const Npp8u *>(pr.d_img[set]);
        int levels[4] = {257, 257, 257, 257};
        Npp32s lo[4] = {0, 0, 0, 0}, hi[4] = {256, 256, 256, 256};
        switch (pr.h_img.channels) {
        case 1:
            return nppiHistogramEven_8u_C1R_Ctx(d, (int)pr.pitch, roi, d_hist[0], 257, 0, 256,
                                                d_buf, ctx);
        case 3:
            return nppiHistogramEven_8u_C3R_Ctx(d, (int)pr.pitch, roi, d_hist, levels, lo, hi,
                                                d_buf, ctx);
        default:
            return nppiHistogramEven_8u_C4R_Ctx(d, (int)pr.pitch, roi, d_hist, levels, lo, hi,
                                                d_buf, ctx);
        }
    }
    void open(const Problem &pr, cudaStream_t s)
    {
        ctx = npp_context(s);
        NppiSize roi = {pr.h_img.width, pr.h_img.height};
        int levels[4] = {257, 257, 257, 257};
        NppSize size;
        NppStatus st = pr.h_img.channels == 1
            ? nppiHistogramEvenGetBufferSize_8u_C1R_Ctx(roi, 257, size, ctx)
            : pr.h_img.channels == 3 ? nppiHistogramEvenGetBufferSize_8u_C3R_Ctx(roi, levels, size, ctx)
                                     : nppiHistogramEvenGetBufferSize_8u_C4R_Ctx(roi, levels, size, ctx);
        if (st != NPP_SUCCESS) {
            fprintf(stderr, "bench: nppiHistogramEvenGetBufferSize failed (%d)\n", (int)st);
            exit(1);
        }
        CK(cudaMalloc(&d_buf, size.get()));
        for (int i = 0; i < 4; i++)
            CK(cudaMalloc(&d_hist[i], 256 * sizeof(Npp32s)));
    }
    void close()
    {
        CK(cudaFree(d_buf));
        for (int i = 0; i < 4; i++)
            CK(cudaFree(d_hist[i]));
    }
    bool validate(const Problem &pr, cudaStream_t s)
    {
        poison_bins(d_hist, s);
        if (run(pr, 0) != NPP_SUCCESS)
            return false;
        CK(cudaStreamSynchronize(s));
        return device_bins_match(pr, d_hist);
    }
};
#endif

static double time_ours(const Problem &pr, Shape sh, cudaStream_t s)
{
    return median_ms(s, kWarmup, kRuns, [&](int i) { CK(run_ours(pr, i % kSets, sh, s)); });
}

static void bench_main(gimg_gpu *g)
{
    cudaStream_t s = g->stream;
    printf("Kernel: %dx%d 8-bit images, 256 bins, median of %d runs over %d images; GB/s "
           "counts bytes read; /copy = copy ms / kernel ms\n", kSide, kSide, kRuns, kSets);
    printf("%-6s %-8s %8s %7s %6s %8s | %8s %7s %7s | %8s %7s %7s\n", "layout", "data", "ms",
           "GB/s", "/copy", "read ms", "cub ms", "cubGB/s", "vs cub", "npp ms", "nppGB/s",
           "vs npp");
    struct Row { const char *layout, *data; double ms, ms_read, ms_cub, ms_npp; };
    std::vector<Row> rows;
    for (const Layout &l : kLayouts)
        for (int constant = 0; constant <= 1; constant++) {
            Problem pr;
            gimg_hist_params p = {256, 0, 256, 0};
            problem_open(g, pr, kSide, kSide, l.channels, GIMG_U8, p, constant, 42 + l.channels);
            validate_ours(pr, {0, 0, 0}, s, l.name);
            Cub cub;
            cub.open(pr, s);
            if (!cub.validate(pr, s)) {
                printf("MISMATCH: CUB differs from the CPU on %s\n", l.name);
                exit(1);
            }
            void *d_copy;
            CK(cudaMalloc(&d_copy, pr.pitch * kSide));
            const double copy_ms = median_ms(s, kWarmup, kRuns, [&](int i) {
                CK(cudaMemcpyAsync(d_copy, pr.d_img[i % kSets], pr.pitch * kSide,
                                   cudaMemcpyDeviceToDevice, s));
            });
            CK(cudaFree(d_copy));
            const double ms_read =
                bench_read_ms(s, pr.d_img, kSets, pr.pitch * kSide, kWarmup, kRuns);
            const double ms = time_ours(pr, {0, 0, 0}, s);
            const double ms_cub =
                median_ms(s, kWarmup, kRuns, [&](int i) { CK(cub.run(pr, i % kSets, s)); });
            cub.close();
            double ms_npp = 0;
#ifdef GIMG_HAVE_NPP
            Npp npp;
            npp.open(pr, s);
            if (!npp.validate(pr, s)) {
                printf("MISMATCH: NPP differs from the CPU on %s\n", l.name);
                exit(1);
            }
            ms_npp = median_ms(s, kWarmup, kRuns, [&](int i) {
                if (npp.run(pr, i % kSets) != NPP_SUCCESS) {
                    fprintf(stderr, "bench: nppiHistogramEven failed\n");
                    exit(1);
                }
            });
            npp.close();
#endif
            const double gb = pr.bytes / 1e9;
            printf("%-6s %-8s %8.3f %7.0f %6.2f %8.3f | %8.3f %7.0f %6.2fx", l.name,
                   constant ? "constant" : "random", ms, gb / ms * 1e3, copy_ms / ms, ms_read,
                   ms_cub, gb / ms_cub * 1e3, ms_cub / ms);
            if (ms_npp > 0)
                printf(" | %8.3f %7.0f %6.2fx", ms_npp, gb / ms_npp * 1e3, ms_npp / ms);
            printf("\n");
            rows.push_back(
                {l.name, constant ? "constant" : "random", ms, ms_read, ms_cub, ms_npp});
            problem_close(pr);
        }
    printf("\nTargets: >= CUB on every line; >= 2x NPP; constant >= 80%% of random speed "
           "(random / constant)\n");
    for (size_t i = 0; i + 1 < rows.size(); i += 2) {
        const Row &r = rows[i], &c = rows[i + 1];
        printf("  %-6s vs cub %.2fx / %.2fx  vs npp %.2fx / %.2fx  constant/random speed %.2f\n",
               r.layout, r.ms_cub / r.ms, c.ms_cub / c.ms, r.ms_npp > 0 ? r.ms_npp / r.ms : 0,
               c.ms_npp > 0 ? c.ms_npp / c.ms : 0, r.ms / c.ms);
        if (r.ms_npp > 0)  /* what 2x NPP asks for, against the floor of reading alone */
            printf("  %-6s 2x npp needs %.3f / %.3f ms; reading alone takes %.3f / %.3f ms\n",
                   r.layout, r.ms_npp / 2, c.ms_npp / 2, r.ms_read, c.ms_read);
    }
}

/* Other shapes of the kernel: replicas x threads per block. */
static void bench_shapes(gimg_gpu *g)
{
    static const int kReplicas[] = {32, 16, 8}, kThreads[] = {256, 512, 1024};
    printf("\nShapes (8-bit, 256 bins): ms for replicas x threads per block\n%-6s %-8s", "layout",
           "data");
    for (int r : kReplicas)
        for (int t : kThreads)
            printf(" %5dx%-4d", r, t);
    printf("\n");
    for (const Layout &l : kLayouts)
        for (int constant = 0; constant <= 1; constant++) {
            Problem pr;
            gimg_hist_params p = {256, 0, 256, 0};
            problem_open(g, pr, kSide, kSide, l.channels, GIMG_U8, p, constant, 7 + l.channels);
            printf("%-6s %-8s", l.name, constant ? "constant" : "random");
            for (int r : kReplicas)
                for (int t : kThreads) {
                    if (!validate_ours(pr, {r, t, 0}, g->stream, l.name)) {
                        printf(" %10s", "-");
                        continue;
                    }
                    printf(" %10.3f", time_ours(pr, {r, t, 0}, g->stream));
                }
            printf("\n");
            problem_close(pr);
        }
}

/* The other paths, validated and timed once each; for the exact 16-bit
 * histogram also its other shapes: 32-bit windows (replicas 1) against
 * 16-bit pairs, and clusters of 1 to 8 blocks. */
static void bench_paths(gimg_gpu *g)
{
    const int P = GIMG_CUDA_HIST_PAIRS, Q = GIMG_CUDA_HIST_QUADS;
    struct Case {
        const char *name; int c; gimg_sample s; gimg_hist_params p; bool constant; Shape sh;
    };
    const Case cases[] = {
        {"gray8 luma", 1, GIMG_U8, {256, 0, 256, 1}, false, {}},
        {"rgb8 +luma", 3, GIMG_U8, {256, 0, 256, 1}, false, {}},
        {"rgba8 +luma const", 4, GIMG_U8, {256, 0, 256, 1}, true, {}},
        {"rgb8 64 bins", 3, GIMG_U8, {64, 0, 256, 0}, false, {}},
        {"rgb8 100 bins table", 3, GIMG_U8, {100, 10, 250, 0}, false, {}},
        {"gray16 256 bins", 1, GIMG_U16, {256, 0, 65536, 0}, false, {}},
        {"gray16 65536 bins", 1, GIMG_U16, {65536, 0, 65536, 0}, false, {}},
        {"gray16 65536 const", 1, GIMG_U16, {65536, 0, 65536, 0}, true, {}},
        {"gray16 65536 32-bit", 1, GIMG_U16, {65536, 0, 65536, 0}, false, {1, 0, 0}},
        {"gray16 65536 quads", 1, GIMG_U16, {65536, 0, 65536, 0}, false, {Q, 0, 0}},
        {"gray16 65536 quads const", 1, GIMG_U16, {65536, 0, 65536, 0}, true, {Q, 0, 0}},
        {"gray16 65536 cluster1", 1, GIMG_U16, {65536, 0, 65536, 0}, false, {P, 0, 1}},
        {"gray16 65536 cluster2", 1, GIMG_U16, {65536, 0, 65536, 0}, false, {P, 0, 2}},
        {"gray16 65536 cluster4", 1, GIMG_U16, {65536, 0, 65536, 0}, false, {P, 0, 4}},
        {"gray16 65536 256 thr", 1, GIMG_U16, {65536, 0, 65536, 0}, false, {P, 256, 0}},
        {"rgb16 65536 bins", 3, GIMG_U16, {65536, 0, 65536, 0}, false, {}},
        {"rgb16 65536 32-bit", 3, GIMG_U16, {65536, 0, 65536, 0}, false, {1, 0, 0}},
        {"rgb16 65536 cluster1", 3, GIMG_U16, {65536, 0, 65536, 0}, false, {P, 0, 1}},
        {"rgb16 65536 pairs", 3, GIMG_U16, {65536, 0, 65536, 0}, false, {P, 0, 0}},
        {"rgb16 65536 const", 3, GIMG_U16, {65536, 0, 65536, 0}, true, {}},
        {"rgba16 65536 bins", 4, GIMG_U16, {65536, 0, 65536, 0}, false, {}},
        {"rgba16 65536 pairs", 4, GIMG_U16, {65536, 0, 65536, 0}, false, {P, 0, 0}},
        {"rgba16 65536 const", 4, GIMG_U16, {65536, 0, 65536, 0}, true, {}},
        {"rgbf 256 bins", 3, GIMG_F32, {256, 0, 1, 0}, false, {}},
    };
    printf("\nOther paths (%dx%d, validated): ms, GB/s read\n", kSide / 2, kSide / 2);
    for (const Case &c : cases) {
        Problem pr;
        problem_open(g, pr, kSide / 2, kSide / 2, c.c, c.s, c.p, c.constant, 5);
        if (!validate_ours(pr, c.sh, g->stream, c.name)) {
            printf("  %-22s (no such shape here)\n", c.name);
            problem_close(pr);
            continue;
        }
        const double ms = time_ours(pr, c.sh, g->stream);
        printf("  %-22s %8.3f ms %7.0f GB/s\n", c.name, ms, pr.bytes / 1e9 / ms * 1e3);
        problem_close(pr);
    }
}

/* --device auto's threshold: the CPU backend vs the GPU with transfers. */
static void bench_break_even(gimg_gpu *g)
{
    printf("\nEnd to end (RGB 8-bit, 256 bins, host memory as the tools hold it; CPU: %d "
           "threads)\n%-11s %9s %9s %9s\n", omp_get_max_threads(), "size", "MB", "cpu ms",
           "gpu ms");
    const int sides[] = {512, 1024, 2048, 4096, 8192};
    gimg_device dev;
    gimg_parse_device("gpu", &dev);
    gimg_ctx *ctx;
    if (gimg_ctx_open(&dev, 0, &ctx))
        die("ctx");
    for (int side : sides) {
        gimg_image in;
        if (gimg_image_alloc(&in, side, side, 3, GIMG_U8))
            die("alloc");
        testimg_fill_random(&in, side);
        gimg_hist_params p;
        gimg_hist_default_params(&in, &p);
        std::vector<double> cpu, gpu;
        for (int r = 0; r < 7; r++) {
            gimg_hist a, b;
            double t0 = gimg_now_ms();
            if (gimg_hist_compute_fast(&in, &p, &a))
                die("cpu");
            cpu.push_back(gimg_now_ms() - t0);
            t0 = gimg_now_ms();
            if (gimg_hist_compute(ctx, &in, &p, &b))
                die("gpu");
            gpu.push_back(gimg_now_ms() - t0);
            if (memcmp(a.counts, b.counts, sizeof *a.counts * 3 * 256)) {
                printf("MISMATCH: end to end %d\n", side);
                exit(1);
            }
            gimg_hist_free(&a);
            gimg_hist_free(&b);
        }
        std::sort(cpu.begin(), cpu.end());
        std::sort(gpu.begin(), gpu.end());
        printf("%5dx%-5d %9.1f %9.2f %9.2f\n", side, side, side * (double)side * 3 / 1e6, cpu[3],
               gpu[3]);
        gimg_image_free(&in);
    }
    gimg_ctx_close(ctx);
}

int main(int argc, char **argv)
{
    cudaDeviceProp p;
    gimg_gpu *g = bench_open(&p);
    const bool all = !(argc > 1 && !strcmp(argv[1], "--quick"));
    bench_main(g);
    if (all) {
        bench_shapes(g);
        bench_paths(g);
        bench_break_even(g);
    }
    gimg_gpu_close(g);
    return 0;
}
