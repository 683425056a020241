/* transpose.h — launchers of kernels/transpose.cu, callable from C. */
#ifndef GIMG_KERNELS_TRANSPOSE_H
#define GIMG_KERNELS_TRANSPOSE_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Writes the symmetry of a width x height image described by (transpose,
 * rev_rows, rev_cols) — see lib/orient_internal.h — into d_out:
 *   out(r, c) = in(rr(T ? c : r), cc(T ? r : c)).
 * pixel_bytes is 1, 2, 3, 4, 6, 8, 12 or 16. Both buffers are 16-byte
 * aligned with pitches that are multiples of 16 bytes; each row's
 * allocation extends to its pitch (the kernel reads and writes whole
 * 16-byte words up to the row size rounded up to 16). Asynchronous on
 * stream; returns the launch's error.
 */
cudaError_t gimg_cuda_orient(const void *d_in, size_t in_pitch_bytes, int width, int height,
                             void *d_out, size_t out_pitch_bytes, int pixel_bytes,
                             int transpose, int rev_rows, int rev_cols, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
