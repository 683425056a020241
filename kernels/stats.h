/* stats.h — launchers of kernels/stats.cu (statistics and comparison
 * reductions), callable from C. */
#ifndef GIMG_KERNELS_STATS_H
#define GIMG_KERNELS_STATS_H

#include "stats_internal.h"

#include <cuda_runtime_api.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of device scratch a launch needs: the blocks' partial results and
 * the counter that finds the last block. Zero it once after allocating;
 * every launch leaves it zeroed again. One launch at a time per scratch. */
size_t gimg_cuda_stats_scratch_bytes(void);

/*
 * The moments of every channel of a width x height image of `channels`
 * interleaved samples of sample_bytes (1, 2: unsigned; 4: float) in one
 * pass, written to *d_out (device memory) — every field, count included.
 * The image is 16-byte aligned with a pitch that is a multiple of 16, each
 * row's allocation reaching its pitch (gimg's device images). shift (host
 * memory, `channels` entries; NULL for zeros): float images, the K of each
 * channel, the float sums being of v - K and (v - K)^2 — pass what
 * gimg_moments_shift gives for the host image, as the CPU uses; copied
 * into d_out->shift; ignored for 8/16-bit (d_out->shift is then 0).
 * blocks: the grid's size, 0 for the default (one full wave of the
 * device); float sums depend on it (the order of the additions), so the
 * library always passes 0. Asynchronous on stream; returns the launch's
 * error.
 */
cudaError_t gimg_cuda_moments(const void *d_in, size_t pitch_bytes, int width, int height,
                              int channels, int sample_bytes, const double *shift,
                              void *d_scratch, gimg_moments *d_out, int blocks,
                              cudaStream_t stream);

/* The comparison of two images of the same layout (each with its own
 * pitch), as gimg_cuda_moments. */
cudaError_t gimg_cuda_diff(const void *d_a, size_t pitch_a, const void *d_b, size_t pitch_b,
                           int width, int height, int channels, int sample_bytes,
                           void *d_scratch, gimg_diff_sums *d_out, int blocks,
                           cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
