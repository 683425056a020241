/*
 * grid_reduce.cuh — the end of a one-wave reduction without float atomics,
 * shared by stats.cu and ssim.cu: each block leaves its F values (already
 * reduced over the block) in device scratch and takes an integer ticket;
 * the last block to finish gathers every block's values, each thread the
 * blocks b = threadIdx.x, + blockDim.x, ... in order, so that a device
 * repeats its results bit for bit. The caller then reduces over the last
 * block as it did over its own, writes the result, and clears the ticket
 * counter (grid_reduce_done) for the scratch's next launch.
 *
 * Scratch layout: the counter (an unsigned), then from kGridPartOffset the
 * values, value f of block b at f * gridDim.x + b. Zero the scratch once
 * after allocating it; every launch leaves it zeroed again.
 */
#ifndef GIMG_KERNELS_GRID_REDUCE_CUH
#define GIMG_KERNELS_GRID_REDUCE_CUH

#include <cuda_runtime.h>
#include <stddef.h>

namespace gimg_grid {

/* Bytes before the values: the counter, kept on its own. */
constexpr size_t kGridPartOffset = 256;

/* Every thread of every block calls it with its block's values in v (thread
 * 0's count). Returns false in every block but the last to finish; in the
 * last, v[f] = combine(f, ... combine(f, init(f), value f of block b0), ...)
 * over the blocks b0, b0 + blockDim.x, ... of this thread (b0 =
 * threadIdx.x), with s_last the caller's __shared__ flag. Ends with a
 * barrier: the caller's shared reduction buffer may be reused at once. */
template <typename T, int F, class Init, class Combine>
__device__ __forceinline__ bool last_block_gather(T (&v)[F], unsigned char *d_scratch,
                                                  bool *s_last, Init init, Combine combine)
{
    const unsigned G = gridDim.x;
    unsigned *counter = reinterpret_cast<unsigned *>(d_scratch);
    T *part = reinterpret_cast<T *>(d_scratch + kGridPartOffset);
    if (threadIdx.x == 0) {
#pragma unroll
        for (int f = 0; f < F; f++)
            part[(size_t)f * G + blockIdx.x] = v[f];
        __threadfence();
        *s_last = atomicAdd(counter, 1u) == G - 1;
    }
    __syncthreads();
    if (!*s_last)
        return false;
    __threadfence();
#pragma unroll
    for (int f = 0; f < F; f++)
        v[f] = init(f);
    for (unsigned b = threadIdx.x; b < G; b += blockDim.x)
#pragma unroll
        for (int f = 0; f < F; f++)
            v[f] = combine(f, v[f], __ldcg(part + (size_t)f * G + b));
    __syncthreads();
    return true;
}

/* The last block's thread 0, once it has written the result. */
__device__ __forceinline__ void grid_reduce_done(unsigned char *d_scratch)
{
    *reinterpret_cast<unsigned *>(d_scratch) = 0;
}

} // namespace gimg_grid

#endif
