/* conv.h — launchers of kernels/conv.cu, callable from C. */
#ifndef GIMG_KERNELS_CONV_H
#define GIMG_KERNELS_CONV_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Sample types, as gimg_sample (bytes per sample). */
enum { GIMG_CUDA_U8 = 1, GIMG_CUDA_U16 = 2, GIMG_CUDA_F32 = 4 };

/* Taps that fit in the kernels' constant memory (64 KiB of float). */
#define GIMG_CUDA_CONV_CONST_TAPS 16384

/* An interleaved image on the device: rows `pitch` bytes apart (a multiple
 * of 16, each row's allocation reaching its pitch). */
typedef struct {
    void *data;
    size_t pitch;
    int type; /* GIMG_CUDA_U8, _U16, _F32 */
} gimg_cuda_plane;

/* What happens to each sum before it is stored. raw: stored as float,
 * untouched (an intermediate). Otherwise v = fmaf(v, scale, bias), |v| if
 * absolute, clamped and rounded to the output's type; with keep_alpha the
 * last channel is copied from alpha_src (same type as the output). */
typedef struct {
    int raw;
    float scale, bias;
    int absolute;
    int keep_alpha;
    gimg_cuda_plane alpha_src;
} gimg_cuda_epilogue;

/* Copies n taps into the current device's constant memory at offset (in
 * taps); stream-ordered. The constant memory is one per device, whatever
 * the stream: callers on several streams order the copy after the kernels
 * that read the old taps. Not thread-safe for one device. */
cudaError_t gimg_cuda_conv_set_taps(const float *h_taps, int offset, int n, cudaStream_t stream);
/* 1 if the current device's constant memory holds these n taps at offset
 * once the copies queued so far are done (set_taps keeps a record), so
 * that a caller can skip the copy and its ordering; else 0. */
int gimg_cuda_conv_taps_held(const float *h_taps, int offset, int n);
/* The devices whose copies set_taps records (indices 0 to this - 1). */
#define GIMG_CUDA_CONV_MAX_DEVICES 64

/*
 * Dense convolution (correlation form, see lib/gimg_conv.h) of a width x
 * height image of `channels` channels: out(x, y, c) = sum over i < kh,
 * j < kw of taps[i * kw + j] * in(x + j - ax, y + i - ay, c), one fused
 * multiply-add per tap in that order, outside samples through `border`
 * (gimg_border). Taps come from constant memory at tap_offset (see
 * set_taps) when d_taps is NULL, else from d_taps + tap_offset in device
 * memory (kernels larger than constant memory; float to raw float only). out is F32 when epi->raw, else of in's type or
 * F32 -> any. Asynchronous on stream.
 */
cudaError_t gimg_cuda_conv_dense(gimg_cuda_plane in, gimg_cuda_plane out, int width, int height,
                                 int channels, int kw, int kh, int ax, int ay, int border,
                                 int tap_offset, const float *d_taps,
                                 const gimg_cuda_epilogue *epi, cudaStream_t stream);

/*
 * Separable convolution in one pass over the image: a row pass (row taps
 * at constant offset 0, kw of them) into shared memory, then a column pass
 * (col taps at offset GIMG_CUDA_CONV_COL_OFFSET, kh of them), giving
 * exactly the two-pass result (the row pass's sums stay float). Needs
 * gimg_cuda_conv_separable_fits(); otherwise run two dense passes (1 x kw
 * then kh x 1, taps at offsets 0 and GIMG_CUDA_CONV_COL_OFFSET) through a
 * float image, which is also faster for tall kernels (GIMG_CUDA_CONV_FUSE_MAX_KH).
 * Types: out of in's type with the epilogue, or F32 to raw F32 (the
 * dense pass's other combinations are not compiled here:
 * cudaErrorInvalidValue).
 */
#define GIMG_CUDA_CONV_COL_OFFSET 8192
/* Fused up to this height (measured on the H100, 8192x8192 RGB: radius 15,
 * 31 rows, in 1.33 ms fused against 3.0 ms in two passes); taller kernels,
 * never measured, take the two passes, whose cost does not grow with the
 * halo. */
#define GIMG_CUDA_CONV_FUSE_MAX_KH 31
int gimg_cuda_conv_separable_fits(int channels, int kw, int kh);
cudaError_t gimg_cuda_conv_separable(gimg_cuda_plane in, gimg_cuda_plane out, int width,
                                     int height, int channels, int kw, int kh, int ax, int ay,
                                     int border, const gimg_cuda_epilogue *epi,
                                     cudaStream_t stream);

/* Gradient magnitude of two kw x kh kernels in constant memory (gx at 0,
 * gy at kw * kh): sqrt(fmaf(gx, gx, gy * gy)). F32 in, F32 out (raw). */
cudaError_t gimg_cuda_conv_magnitude(gimg_cuda_plane in, gimg_cuda_plane out, int width,
                                     int height, int channels, int kw, int kh, int ax, int ay,
                                     int border, cudaStream_t stream);

/* in (any type) to F32; premultiply: colours times alpha / max. */
cudaError_t gimg_cuda_conv_widen(gimg_cuda_plane in, gimg_cuda_plane out, int width, int height,
                                 int channels, int premultiply, cudaStream_t stream);
/* F32 to out's type through the epilogue; unpremultiply (2 and 4 channels,
 * without keep_alpha): alpha becomes alpha / (alpha_unit / max), or where
 * alpha_unit is 0 (a zero gain) epi->alpha_src's alpha, which must then be
 * the input image (out's type); colours are divided by the alpha fraction,
 * alpha / alpha_unit (alpha_src's alpha / max where alpha_unit is 0) unless
 * it is 0, before the epilogue; alpha gets no scale or bias. As
 * lib/conv_internal.h's gimg_conv_alpha_fraction and gimg_conv_alpha_out. */
cudaError_t gimg_cuda_conv_narrow(gimg_cuda_plane in, gimg_cuda_plane out, int width, int height,
                                  int channels, int unpremultiply, float alpha_unit,
                                  const gimg_cuda_epilogue *epi, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
