/* bench.h — what the GPU benchmarks share: a checked CUDA call that exits,
 * opening the GPU, uploading a test image, the histogram's sync words, the
 * median of many event-timed runs after a warm-up, the time of a kernel
 * that only reads (the floor under every reading kernel), and (with NPP) a
 * stream context for NPP's _Ctx calls. */
#ifndef GIMG_BENCH_H
#define GIMG_BENCH_H

#include "gpu_internal.h"
#include "launch.cuh"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <vector>

#define CK(call)                                                                              \
    do {                                                                                      \
        cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess) {                                                              \
            fprintf(stderr, "bench: %s failed at %s:%d: %s\n", #call, __FILE__, __LINE__,    \
                    cudaGetErrorString(e_));                                                  \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

/* Median time in ms of fn(i) on stream s over `runs` runs, after `warmup`. */
template <typename F> static double median_ms(cudaStream_t s, int warmup, int runs, F fn)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < warmup; i++)
        fn(i);
    std::vector<float> t;
    for (int i = 0; i < runs; i++) {
        CK(cudaEventRecord(a, s));
        fn(warmup + i);
        CK(cudaEventRecord(b, s));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

/* Copies `rows` rows of row_bytes from host h (stride apart) to device d
 * (pitch apart) and waits until they have landed: cudaMemcpy2D from
 * pageable memory may return before its copy lands, and it is the default
 * stream's, which a gimg lane's non-blocking stream does not wait for. */
static void bench_upload(void *d, size_t pitch, const void *h, size_t stride, size_t row_bytes,
                         int rows)
{
    CK(cudaMemcpy2D(d, pitch, h, stride, row_bytes, rows, cudaMemcpyHostToDevice));
    CK(cudaDeviceSynchronize());
}

/* The same for one run of `bytes` bytes. */
static inline void bench_upload_bytes(void *d, const void *h, size_t bytes)
{
    bench_upload(d, bytes, h, bytes, bytes, 1);
}

/* Calls count(v) on each unit v of U 16-byte words of a buffer whose word
 * i is load(i), n_units units handed out grid-stride; a thread loads
 * AHEAD units before counting any, so that loads are in flight. The loop
 * of every kernel the benchmarks time as a floor. */
template <int U, int AHEAD, typename Load, typename Count>
__device__ __forceinline__ void bench_each_unit(size_t n_units, Load load, Count count)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t u = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; u + (AHEAD - 1) * stride < n_units; u += AHEAD * stride) {
        uint4 v[AHEAD][U];
#pragma unroll
        for (int k = 0; k < AHEAD; k++)
#pragma unroll
            for (int j = 0; j < U; j++)
                v[k][j] = load((u + k * stride) * U + j);
#pragma unroll
        for (int k = 0; k < AHEAD; k++)
            count(v[k]);
    }
    for (; u < n_units; u += stride) {
        uint4 v[U];
#pragma unroll
        for (int j = 0; j < U; j++)
            v[j] = load(u * U + j);
        count(v);
    }
}

/* Reads n_words 16-byte words, four loads in flight a thread, and stores
 * nothing unless their xor is one chosen value (so that the loads stay). */
static __global__ void bench_read_kernel(const uint4 *__restrict__ d, size_t n_words,
                                         unsigned *d_sink)
{
    unsigned x = 0;
    bench_each_unit<1, 4>(
        n_words, [&](size_t i) { return __ldg(d + i); },
        [&](const uint4 *v) { x ^= v->x ^ v->y ^ v->z ^ v->w; });
    if (x == 0x9e3779b9u)
        *d_sink = x;
}

/* Median ms of a kernel that only reads `bytes` (a multiple of 16) of
 * d_sets[i % n_sets], timed as the benchmarks time everything: the floor
 * under any kernel that reads the same bytes once, launch included. */
static inline double bench_read_ms(cudaStream_t s, void *const *d_sets, int n_sets, size_t bytes,
                                   int warmup, int runs)
{
    gimg_launch::device_facts lim;
    int per_sm;
    CK(gimg_launch::current_device(&lim));
    CK(gimg_launch::blocks_per_sm((const void *)bench_read_kernel, lim.dev, 1024, 0, &per_sm));
    unsigned *d_sink;
    CK(cudaMalloc(&d_sink, sizeof *d_sink));
    const double ms = median_ms(s, warmup, runs, [&](int i) {
        bench_read_kernel<<<lim.sms * per_sm, 1024, 0, s>>>(
            static_cast<const uint4 *>(d_sets[i % n_sets]), bytes / 16, d_sink);
        CK(cudaGetLastError());
    });
    CK(cudaFree(d_sink));
    return ms;
}

/* The six layouts the transpose and statistics benchmarks time. */
struct BenchLayout { const char *name; int channels; gimg_sample sample; };
static const BenchLayout kBenchLayouts[] = {{"gray8", 1, GIMG_U8},  {"rgb8", 3, GIMG_U8},
                                            {"rgba8", 4, GIMG_U8},  {"gray16", 1, GIMG_U16},
                                            {"rgb16", 3, GIMG_U16}, {"rgba16", 4, GIMG_U16}};

/* Opens device 0 for gimg, or exits 77 (skipped) without one, and prints
 * the GPU's name, SMs and L2 size as the first line of the output. */
static gimg_gpu *bench_open(cudaDeviceProp *p)
{
    gimg_gpu *g;
    if (gimg_gpu_open(0, &g)) {
        fprintf(stderr, "bench: %s\n", gimg_last_error());
        exit(77);
    }
    CK(cudaGetDeviceProperties(p, 0));
    printf("GPU: %s, %d SMs, L2 %d MB\n", p->name, p->multiProcessorCount, p->l2CacheSize >> 20);
    return g;
}

/* The histogram kernel's sync words of g's stream (gimg_gpu_hist_sync). */
static inline unsigned *bench_hist_sync(gimg_gpu *g)
{
    unsigned *d_sync;
    if (gimg_gpu_hist_sync(g, &d_sync)) {
        fprintf(stderr, "bench: %s\n", gimg_last_error());
        exit(1);
    }
    return d_sync;
}

#ifdef GIMG_HAVE_NPP
#include <nppcore.h>

/* NPP's context for the current device, on stream s. */
static NppStreamContext npp_context(cudaStream_t s)
{
    NppStreamContext c = {};
    int dev;
    cudaDeviceProp p;
    CK(cudaGetDevice(&dev));
    CK(cudaGetDeviceProperties(&p, dev));
    c.hStream = s;
    c.nCudaDeviceId = dev;
    c.nMultiProcessorCount = p.multiProcessorCount;
    c.nMaxThreadsPerMultiProcessor = p.maxThreadsPerMultiProcessor;
    c.nMaxThreadsPerBlock = p.maxThreadsPerBlock;
    c.nSharedMemPerBlock = p.sharedMemPerBlock;
    c.nCudaDevAttrComputeCapabilityMajor = p.major;
    c.nCudaDevAttrComputeCapabilityMinor = p.minor;
    CK(cudaStreamGetFlags(s, &c.nStreamFlags));
    return c;
}
#endif

#endif
