/*
 * bench_stats — validates, then times, the statistics reductions.
 *
 * For 8192x8192 gray, RGB and RGBA images of 8 and 16 bits:
 *  1. checks the moments kernel and the exact histogram against the CPU
 *     reference (byte for byte, results poisoned first); a mismatch stops
 *     the benchmark with exit 1;
 *  2. times with CUDA events (warm-up, then the median of many runs),
 *     rotating over 4 images so that the data is several times the L2:
 *     a device-to-device copy of the image (GB/s counting read + write),
 *     the moments of every channel alone (what gstats runs when no order
 *     statistic is asked for: GB/s counting the bytes read), the full
 *     statistics pass (the exact histogram, kernels/histogram.cu, from
 *     which lib/stats.c takes the moments, median, percentiles and
 *     entropy), the comparison of two images,
 *     CUB's DeviceReduce::Sum over the same bytes,
 *     nppiMean_StdDev_8u_C1R for gray8 when NPP is present, and a kernel
 *     that only reads the image (the floor under every pass), and for
 *     16-bit images the counting floor of the exact histogram (below);
 *  3. prints each as GB/s and as a ratio to the copy's rate (the target for
 *     the full pass: >= 0.80).
 * Then the grid sizes the moments kernel could use, and the end-to-end
 * break-even of --device auto (CPU backend vs upload + kernel).
 */
#include "gimg.h"
#include "gpu_internal.h"
#include "gimg_hist.h"
#include "histogram.h"
#include "hist_lean.cuh"
#include "stats_internal.h"
#include "stats.h"
#include "testimg.h"
#include "bench.h"

#include <cub/device/device_reduce.cuh>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef GIMG_HAVE_NPP
#include <nppi.h>
#endif

static const int kSide = 8192, kSets = 4, kWarmup = 3, kRuns = 30;


#ifdef GIMG_HAVE_NPP
/* The buffer-size query takes an int * in older NPP and a size_t * in newer. */
template <typename T>
static size_t npp_buffer_size(NppStatus (*f)(NppiSize, T *, NppStreamContext), NppiSize roi,
                              NppStreamContext c)
{
    T n = 0;
    if (f(roi, &n, c) != NPP_SUCCESS) {
        fprintf(stderr, "bench: NPP buffer size query failed\n");
        exit(1);
    }
    return (size_t)n;
}
#endif

/* The counting floor of the exact 16-bit histogram: the least work any
 * kernel that counts it in shared memory does on random data, one shared
 * atomic a sample (each sample's counter and add from hist_lean.cuh, as
 * histogram.cu's lean path takes them), while reading the image once at
 * the read floor's rate, and nothing else: no carry checks, no merge, no
 * clearing of global counters; one block of 1024 threads an SM. Gray counts in
 * a channel's 16-bit pairs (128 KB), RGB and RGBA in three channels' 8-bit
 * quads (192 KB, what a block's shared memory can hold); RGBA's fourth
 * channel shares the first's counters, as no real layout could (four
 * channels' quads take 256 KB), so its floor is lower than any real
 * kernel's. One channel's 32-bit counters (256 KB) fit no block.
 * LOADS false: the same atomics, samples hashed from the word's index
 * instead of loaded (what the atomics cost alone). CHECK: the atomics
 * return their old values and a thread tests them, as narrow counters
 * must to find a wrap. The counts are meaningless: timed, not validated. */
__device__ __forceinline__ uint4 hashed_word(size_t i)
{
    uint32_t h = (uint32_t)i * 0x9e3779b9u;
    h ^= h >> 15;
    h *= 0x85ebca6bu;
    return make_uint4(h, h * 0xc2b2ae35u, h ^ 0x27d4eb2fu, h * 0x165667b1u);
}

/* Shared bytes of count_floor_kernel's counters for `channels` channels. */
__host__ __device__ constexpr size_t count_floor_smem(int channels)
{
    return channels == 1 ? 32768 * 4 : 3 * 16384 * 4;
}

template <int C, bool CHECK, bool LOADS>
static __global__ void __launch_bounds__(1024, 1)
    count_floor_kernel(const uint4 *__restrict__ d, size_t n_units, unsigned *d_sink)
{
    extern __shared__ uint32_t s_counts[];
    constexpr int kWords = C == 3 ? 3 : 1;  /* 16-byte words a unit: whole pixels */
    constexpr int kUnits = C == 3 ? 2 : 4;  /* units a thread loads before counting */
    constexpr int kTableWords = (int)(count_floor_smem(C) / 4);
    for (int i = threadIdx.x; i < kTableWords; i += blockDim.x)
        s_counts[i] = 0;
    __syncthreads();
    char *const s_bytes = reinterpret_cast<char *>(s_counts);
    uint32_t seen = 0;
    auto count = [&](const uint4 *unit) {
        const uint32_t *w = reinterpret_cast<const uint32_t *>(unit);
#pragma unroll
        for (int i = 0; i < 8 * kWords; i++) {
            uint32_t lo, hi, add_lo, add_hi;
            gimg_hist_lean::counter<C == 1 ? 16 : 8>(w[i], false, &lo, &add_lo);
            gimg_hist_lean::counter<C == 1 ? 16 : 8>(w[i], true, &hi, &add_hi);
            if constexpr (C > 1) {  /* channel c's quads at c % 3 * 64 KB */
                lo |= (uint32_t)((2 * i) % C % 3) << 16;
                hi |= (uint32_t)((2 * i + 1) % C % 3) << 16;
            }
            if constexpr (CHECK) {
                seen |= atomicAdd(reinterpret_cast<uint32_t *>(s_bytes + lo), add_lo);
                seen |= atomicAdd(reinterpret_cast<uint32_t *>(s_bytes + hi), add_hi);
            } else {
                atomicAdd(reinterpret_cast<uint32_t *>(s_bytes + lo), add_lo);
                atomicAdd(reinterpret_cast<uint32_t *>(s_bytes + hi), add_hi);
            }
        }
        if constexpr (CHECK)
            if (seen & (C == 1 ? 0x80008000u : 0x80808080u))
                seen = 0, atomicAdd(d_sink, 1u);
    };
    bench_each_unit<kWords, kUnits>(
        n_units, [&](size_t i) { return LOADS ? __ldg(d + i) : hashed_word(i); }, count);
    __syncthreads();
    if (s_counts[threadIdx.x] == 0x9e3779b9u)
        *d_sink = s_counts[threadIdx.x];
}

/* Median ms of count_floor_kernel over `bytes` of d_sets[i % n_sets], a
 * 16-bit image of `channels` channels (contiguous, a whole number of
 * pixels in 16-byte words), on a device whose blocks can hold
 * count_floor_smem(channels). */
template <bool CHECK, bool LOADS = true>
static double count_floor_ms(cudaStream_t s, void *const *d_sets, int n_sets, size_t bytes,
                             int channels)
{
    gimg_launch::device_facts lim;
    CK(gimg_launch::current_device(&lim));
    unsigned *d_sink;
    CK(cudaMalloc(&d_sink, sizeof *d_sink));
    const size_t units = bytes / 16 / (channels == 3 ? 3 : 1), smem = count_floor_smem(channels);
    auto timed = [&](auto kernel) {
        CK(cudaFuncSetAttribute((const void *)kernel,
                                cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        return median_ms(s, kWarmup, kRuns, [&](int i) {
            kernel<<<lim.sms, 1024, smem, s>>>(static_cast<const uint4 *>(d_sets[i % n_sets]),
                                               units, d_sink);
            CK(cudaGetLastError());
        });
    };
    const double ms = channels == 1   ? timed(count_floor_kernel<1, CHECK, LOADS>)
                      : channels == 3 ? timed(count_floor_kernel<3, CHECK, LOADS>)
                                      : timed(count_floor_kernel<4, CHECK, LOADS>);
    CK(cudaFree(d_sink));
    return ms;
}

static gimg_cuda_hist_map exact_map(gimg_sample s)
{
    gimg_cuda_hist_map m = {};
    m.mode = GIMG_CUDA_HIST_IDENT;
    m.bins = s == GIMG_U8 ? 256 : 65536;
    m.hi = m.bins;
    return m;
}

/* The moments and the histogram of image 0 against the CPU. */
static int validate(gimg_gpu *g, const BenchLayout &l, const gimg_image &h_in, const void *d_in,
                    size_t pitch, unsigned char *d_scratch, gimg_moments *d_m,
                    unsigned long long *d_counts)
{
    gimg_moments ref, got;
    gimg_moments_ref(&h_in, &ref);
    double shift[4];
    gimg_moments_shift(&h_in, shift);
    CK(cudaMemsetAsync(d_m, 0xA5, sizeof *d_m, g->stream));
    CK(gimg_cuda_moments(d_in, pitch, kSide, kSide, l.channels, (int)l.sample, shift, d_scratch,
                         d_m, 0, g->stream));
    CK(cudaMemcpyAsync(&got, d_m, sizeof got, cudaMemcpyDeviceToHost, g->stream));
    CK(cudaStreamSynchronize(g->stream));
    if (memcmp(&ref, &got, sizeof ref)) {
        printf("MISMATCH: %s moments differ from the CPU reference\n", l.name);
        return 0;
    }
    gimg_hist_params p = {l.sample == GIMG_U8 ? 256 : 65536, 0, 0, 0};
    p.hi = p.bins;
    gimg_hist h;
    if (gimg_hist_compute_cpu(&h_in, &p, &h)) {
        fprintf(stderr, "bench: %s\n", gimg_last_error());
        exit(1);
    }
    const size_t per = (size_t)p.bins + 3, n = per * l.channels;
    std::vector<unsigned long long> slots(n);
    gimg_cuda_hist_map map = exact_map(l.sample);
    CK(gimg_cuda_hist(d_in, pitch, kSide, kSide, l.channels, (int)l.sample, &map, d_counts,
                      bench_hist_sync(g), g->stream));
    CK(cudaMemcpyAsync(slots.data(), d_counts, n * 8, cudaMemcpyDeviceToHost, g->stream));
    CK(cudaStreamSynchronize(g->stream));
    int ok = 1;
    for (int c = 0; c < l.channels; c++)
        for (int b = 0; b < p.bins; b++)
            ok &= slots[c * per + b] == h.counts[(size_t)c * p.bins + b];
    gimg_hist_free(&h);
    if (!ok)
        printf("MISMATCH: %s histogram differs from the CPU reference\n", l.name);
    return ok;
}

static void bench_kernels(gimg_gpu *g)
{
    printf("Kernel: %dx%d images, median of %d runs, %d images rotated. GB/s: the copy counts "
           "bytes read + written, the others bytes read; /copy = GB/s over the copy's.\n",
           kSide, kSide, kRuns, kSets);
    printf("%-7s %-22s %9s %9s %7s\n", "layout", "pass", "ms", "GB/s", "/copy");
    unsigned char *d_scratch;
    const size_t scratch = gimg_cuda_stats_scratch_bytes();
    const size_t counts_bytes = 4 * (65536 + 3) * 8;
    CK(cudaMalloc(&d_scratch, scratch + 1024 + counts_bytes));
    CK(cudaMemset(d_scratch, 0, scratch));
    gimg_moments *d_m = (gimg_moments *)(d_scratch + scratch);
    gimg_diff_sums *d_d = (gimg_diff_sums *)(d_scratch + scratch + 512);
    unsigned long long *d_counts = (unsigned long long *)(d_scratch + scratch + 1024);
    unsigned *const d_sync = bench_hist_sync(g);
    unsigned long long *d_sum;
    CK(cudaMalloc(&d_sum, 8));
    gimg_launch::device_facts lim;
    CK(gimg_launch::current_device(&lim));
    for (const BenchLayout &l : kBenchLayouts) {
        gimg_image h_in;
        if (gimg_image_alloc(&h_in, kSide, kSide, l.channels, l.sample)) {
            fprintf(stderr, "bench: %s\n", gimg_last_error());
            exit(1);
        }
        testimg_fill_random(&h_in, 42 + l.channels);
        double shift[4]; /* float sums' shifts, as the library takes them */
        gimg_moments_shift(&h_in, shift);
        const size_t row = h_in.stride_bytes, pitch = (row + 15) & ~(size_t)15;
        const size_t bytes = pitch * kSide;
        void *d_in[kSets], *d_out;
        for (int i = 0; i < kSets; i++) {
            CK(cudaMalloc(&d_in[i], bytes));
            bench_upload(d_in[i], pitch, h_in.data, row, row, kSide);
        }
        CK(cudaMalloc(&d_out, bytes));
        if (!validate(g, l, h_in, d_in[0], pitch, d_scratch, d_m, d_counts))
            exit(1);
        const double gb = bytes / 1e9;
        const double copy_ms = median_ms(g->stream, kWarmup, kRuns, [&](int i) {
            CK(cudaMemcpyAsync(d_out, d_in[i % kSets], bytes, cudaMemcpyDeviceToDevice,
                               g->stream));
        });
        const double copy_gbs = 2 * gb / copy_ms * 1e3;
        auto row_out = [&](const char *what, double ms) {
            printf("%-7s %-22s %9.3f %9.0f %7.2f\n", l.name, what, ms, gb / ms * 1e3,
                   gb / ms * 1e3 / copy_gbs);
        };
        printf("%-7s %-22s %9.3f %9.0f %7.2f\n", l.name, "copy (read+write)", copy_ms, copy_gbs,
               1.0);
        row_out("read only (floor)", bench_read_ms(g->stream, d_in, kSets, bytes, kWarmup, kRuns));
        const double mom_ms = median_ms(g->stream, kWarmup, kRuns, [&](int i) {
            CK(gimg_cuda_moments(d_in[i % kSets], pitch, kSide, kSide, l.channels, (int)l.sample,
                                 shift, d_scratch, d_m, 0, g->stream));
        });
        row_out("moments only", mom_ms);
        const gimg_cuda_hist_map map = exact_map(l.sample);
        const double hist_ms = median_ms(g->stream, kWarmup, kRuns, [&](int i) {
            CK(gimg_cuda_hist(d_in[i % kSets], pitch, kSide, kSide, l.channels, (int)l.sample,
                              &map, d_counts, d_sync, g->stream));
        });
        row_out("full pass (histogram)", hist_ms);
        if (l.sample == GIMG_U16 && count_floor_smem(l.channels) <= (size_t)lim.smem_optin) {
            row_out("count floor (16-bit)",
                    count_floor_ms<false>(g->stream, d_in, kSets, bytes, l.channels));
            row_out("  its atomics alone",
                    count_floor_ms<false, false>(g->stream, d_in, kSets, bytes, l.channels));
            row_out("  + old values",
                    count_floor_ms<true>(g->stream, d_in, kSets, bytes, l.channels));
        }
        const double diff_ms = median_ms(g->stream, kWarmup, kRuns, [&](int i) {
            CK(gimg_cuda_diff(d_in[i % kSets], pitch, d_in[(i + 1) % kSets], pitch, kSide, kSide,
                              l.channels, (int)l.sample, d_scratch, d_d, 0, g->stream));
        });
        printf("%-7s %-22s %9.3f %9.0f %7.2f   (two images read)\n", l.name, "compare", diff_ms,
               2 * gb / diff_ms * 1e3, 2 * gb / diff_ms * 1e3 / copy_gbs);
        /* CUB's plain sum of the same bytes, as samples of the image's type. */
        size_t temp_bytes = 0;
        void *d_temp = NULL;
        const size_t items = bytes / (size_t)l.sample;
        auto cub_sum = [&](void *temp, size_t &tb, int i) {
            if (l.sample == GIMG_U8)
                return cub::DeviceReduce::Sum(temp, tb, (const uint8_t *)d_in[i % kSets], d_sum,
                                              (long long)items, g->stream);
            return cub::DeviceReduce::Sum(temp, tb, (const uint16_t *)d_in[i % kSets], d_sum,
                                          (long long)items, g->stream);
        };
        CK(cub_sum(NULL, temp_bytes, 0));
        CK(cudaMalloc(&d_temp, temp_bytes));
        const double cub_ms = median_ms(g->stream, kWarmup, kRuns,
                                        [&](int i) { CK(cub_sum(d_temp, temp_bytes, i)); });
        row_out("CUB DeviceReduce::Sum", cub_ms);
        printf("%-7s %-22s %9s %9s %7.2fx  (moments vs CUB's sum)\n", l.name, "", "", "",
               cub_ms / mom_ms);
        CK(cudaFree(d_temp));
#ifdef GIMG_HAVE_NPP
        if (l.sample == GIMG_U8 && l.channels == 1) {
            NppStreamContext nc = npp_context(g->stream);
            NppiSize roi = {kSide, kSide};
            size_t nb = npp_buffer_size(nppiMeanStdDevGetBufferHostSize_8u_C1R_Ctx, roi, nc);
            Npp8u *d_buf;
            Npp64f *d_ms;
            CK(cudaMalloc(&d_buf, nb));
            CK(cudaMalloc(&d_ms, 16));
            const double npp_ms = median_ms(g->stream, kWarmup, kRuns, [&](int i) {
                if (nppiMean_StdDev_8u_C1R_Ctx((const Npp8u *)d_in[i % kSets], (int)pitch, roi,
                                               d_buf, d_ms, d_ms + 1, nc) != NPP_SUCCESS) {
                    fprintf(stderr, "bench: nppiMean_StdDev_8u_C1R failed\n");
                    exit(1);
                }
            });
            row_out("nppiMean_StdDev_8u_C1R", npp_ms);
            printf("%-7s %-22s %9s %9s %7.2fx  (moments vs NPP)\n", l.name, "", "", "",
                   npp_ms / mom_ms);
            CK(cudaFree(d_buf));
            CK(cudaFree(d_ms));
        }
#endif
        /* Grid sizes (float sums depend on the grid, so the library's is fixed). */
        printf("%-7s %-22s", l.name, "grid: blocks->GB/s (default: one wave)");
        const int grids[] = {264, 528, 792, 1056, 2048};
        for (int blocks : grids) {
            const double ms = median_ms(g->stream, kWarmup, kRuns, [&](int i) {
                CK(gimg_cuda_moments(d_in[i % kSets], pitch, kSide, kSide, l.channels,
                                     (int)l.sample, shift, d_scratch, d_m, blocks, g->stream));
            });
            printf(" %d:%.0f", blocks, gb / ms * 1e3);
        }
        printf("\n");
        for (int i = 0; i < kSets; i++)
            CK(cudaFree(d_in[i]));
        CK(cudaFree(d_out));
        gimg_image_free(&h_in);
    }
    CK(cudaFree(d_sum));
    CK(cudaFree(d_scratch));
}

/* --device auto's threshold: the CPU backend vs upload + kernel + result. */
static void bench_break_even(gimg_gpu *g)
{
    printf("\nEnd to end (every statistic: the exact histogram and the moments from it, RGB "
           "8-bit, host memory as the tools hold it; CPU: %d threads)\n", omp_get_max_threads());
    printf("%-11s %9s %9s %9s\n", "size", "MB", "cpu ms", "gpu ms");
    gimg_device cpu_dev, gpu_dev;
    gimg_parse_device("cpu", &cpu_dev);
    gimg_parse_device("gpu", &gpu_dev);
    gimg_ctx *cpu, *gpu;
    if (gimg_ctx_open(&cpu_dev, 0, &cpu) || gimg_ctx_open(&gpu_dev, 0, &gpu))
        exit(1);
    gimg_stats_opts o = {};
    o.order = 1;
    const int sides[] = {256, 1024, 2048, 4096, 8192};
    for (int side : sides) {
        gimg_image in;
        if (gimg_image_alloc(&in, side, side, 3, GIMG_U8))
            exit(1);
        testimg_fill_random(&in, side);
        std::vector<double> tc, tg;
        gimg_stats a, b;
        for (int r = 0; r < 7; r++) {
            double t0 = gimg_now_ms();
            if (gimg_stats_compute(cpu, &in, &o, &a))
                exit(1);
            tc.push_back(gimg_now_ms() - t0);
            t0 = gimg_now_ms();
            if (gimg_stats_compute(gpu, &in, &o, &b)) {
                fprintf(stderr, "bench: %s\n", gimg_last_error());
                exit(1);
            }
            tg.push_back(gimg_now_ms() - t0);
        }
        if (memcmp(&a, &b, sizeof a)) {
            printf("MISMATCH: gimg_stats_compute differs between CPU and GPU at %d\n", side);
            exit(1);
        }
        std::sort(tc.begin(), tc.end());
        std::sort(tg.begin(), tg.end());
        printf("%5dx%-5d %9.1f %9.2f %9.2f\n", side, side, side * (double)side * 3 / 1e6, tc[3],
               tg[3]);
        gimg_image_free(&in);
    }
    gimg_ctx_close(cpu);
    gimg_ctx_close(gpu);
    (void)g;
}

int main(void)
{
    cudaDeviceProp p;
    gimg_gpu *g = bench_open(&p);
    bench_kernels(g);
    bench_break_even(g);
    gimg_gpu_close(g);
    return 0;
}
