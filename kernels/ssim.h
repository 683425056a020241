/* ssim.h — the launcher of kernels/ssim.cu (SSIM's sums of two images in
 * one fused pass), callable from C. */
#ifndef GIMG_KERNELS_SSIM_H
#define GIMG_KERNELS_SSIM_H

#include "ssim_internal.h"

#include <cuda_runtime_api.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The GPU's SSIM (float) against the CPU's (double): per channel and
 * overall within this, absolute (the head of ssim.cu says why; the tests,
 * tests/gpudiff_ssim.c and gpudiff_stats.c, hold the kernel to it). */
#define GIMG_SSIM_GPU_TOLERANCE 5e-5

/* Bytes of device scratch gimg_cuda_ssim needs for an image of this size:
 * the counter that finds the last block, then the blocks' partial sums.
 * Today the same for every size (the grid is at most one wave of the
 * device, capped); the arguments let that change without touching the
 * callers. Zero the scratch once after allocating it; every launch leaves
 * it zeroed again. One launch at a time per scratch. */
size_t gimg_cuda_ssim_scratch_bytes(int width, int height, int channels);

/*
 * SSIM's sums (lib/ssim_internal.h: per channel the sum of S over the
 * centres whose 11x11 window lies inside the image, and their count) of
 * two width x height images of `channels` (1-4) interleaved samples of
 * sample_bytes (1, 2: unsigned; 4: float), each at its own pitch, written
 * to *d_out (device memory), every field. The images are 16-byte aligned
 * with pitches that are multiples of 16, each row's allocation reaching
 * its pitch (gimg's device images). range: the data range R (> 0, finite:
 * gimg_image_max of the host image). An image narrower or lower than 11
 * pixels has no centre: *d_out is zeroed (count 0) by a memset on the
 * stream, with no kernel. Asynchronous on stream; returns the launch's
 * error (cudaErrorInvalidValue for arguments outside the above).
 */
cudaError_t gimg_cuda_ssim(const void *d_a, size_t pitch_a, const void *d_b, size_t pitch_b,
                           int width, int height, int channels, int sample_bytes, double range,
                           void *d_scratch, gimg_ssim_sums *d_out, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
