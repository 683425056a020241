/* bench.h — what the GPU benchmarks share: a checked CUDA call that exits,
 * opening the GPU, the histogram's sync words, the median of many event-timed runs after a warm-up, and
 * (with NPP) a stream context for NPP's _Ctx calls. */
#ifndef GIMG_BENCH_H
#define GIMG_BENCH_H

#include "gpu_internal.h"

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
