/* absdiff.h — launcher of kernels/absdiff.cu (the comparison's difference
 * image and its count of differing pixels), callable from C. */
#ifndef GIMG_KERNELS_ABSDIFF_H
#define GIMG_KERNELS_ABSDIFF_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * For two width x height images of `channels` interleaved samples of
 * sample_bytes (1, 2: unsigned; 4: float), each with its own pitch: adds
 * to *d_pixels_differing (device memory; the caller zeroes it) the number
 * of pixels in which any channel differs (float: NaN equals NaN, -0 equals
 * +0), and, when d_out is not NULL, writes |a - b| per sample there (pitch
 * pitch_out; float: fabsf(a - b), a NaN result written as the canonical
 * quiet NaN 0x7fc00000, as the CPU writes it). d_out may be d_a (each
 * sample is read before it is written, by the same thread). Asynchronous
 * on stream; returns the launch's error.
 */
cudaError_t gimg_cuda_absdiff(const void *d_a, size_t pitch_a, const void *d_b, size_t pitch_b,
                              int width, int height, int channels, int sample_bytes,
                              void *d_out, size_t pitch_out,
                              unsigned long long *d_pixels_differing, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
