/* bench.h — what the GPU benchmarks share: a checked CUDA call that exits,
 * and the median of many event-timed runs after a warm-up. */
#ifndef GIMG_BENCH_H
#define GIMG_BENCH_H

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

#endif
