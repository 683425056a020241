/*
 * conv_internal.h — what conv.c shares with kernel_spec.c, the GPU dispatch
 * and the tests: border indexing, the last step of every output sample
 * (written once here so that the reference and the fast path cannot
 * drift apart), and --device auto's break-even.
 */
#ifndef GIMG_CONV_INTERNAL_H
#define GIMG_CONV_INTERNAL_H

#include "gimg_conv.h"

#include <math.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * --device auto. Convolution does FMAs per sample, so unlike the transposes
 * its cost grows with the kernel while the GPU's extra costs do not: its
 * start-up (CUDA's initialisation, only partly hidden behind the decode)
 * and the transfers. The cost table (cost.h) predicts
 *     cpu  = bytes * FMAs per byte / (threads * CPU rate)
 *     gpu  = start-up + bytes * (transfer time per byte + FMAs per byte / GPU rate)
 * for each image, and auto takes the smaller; gimg_conv_auto_min_bytes()
 * returns the image size from which the GPU wins for one set of options
 * with the start-up to pay (SIZE_MAX where it never does: kernels too
 * cheap for the transfers). With the built-in figures (cost.c), 16 threads
 * and a 31x31 kernel the GPU wins from about 60 MB: issue 31 measured
 * 4096x4096 RGB (50 MB) at 221-248 ms on the CPU and 482-575 ms with
 * --device gpu on an H100 host, CUDA's start-up included, where a
 * start-up of 200 ms had sent it to the GPU. Below
 * GIMG_CONV_GPU_MIN_BYTES the GPU is never used (a hard limit: no
 * convolution that small pays for a start-up).
 */
#define GIMG_CONV_GPU_MIN_BYTES ((size_t)256 << 10)
/* The per-sample GPU kernels put rows on the grid's y dimension. */
#define GIMG_CONV_GPU_MAX_ROWS 65535

/* The CPU's reference for how the GPU computes an image too large for
 * it (conv.c's sub_image_rows): the output by sub-images of at most
 * max_rows input rows, each convolved as a whole image and its own rows
 * kept; the same bits as gimg_conv_cpu's. Not for the wrap border.
 * Allocates *out. */
gimg_status gimg_conv_cpu_sub_images(const gimg_image *in, const gimg_conv_opts *o,
                                     int max_rows, gimg_image *out);

/* Fused multiply-adds per sample of a kernel as planned. */
double gimg_kernel_fmas(const gimg_kernel *k);
/* threads: the CPU threads the CPU backend would use. */
size_t gimg_conv_auto_min_bytes(const gimg_conv_opts *o, gimg_sample sample, int threads);

/* The channels that are convolved and whether the image's alpha is handled
 * by premultiplication (2 and 4 channels only). */
static inline int gimg_conv_has_alpha(int channels) { return channels == 2 || channels == 4; }
static inline int gimg_conv_premultiplied(const gimg_conv_opts *o, int channels)
{
    return gimg_conv_has_alpha(channels) && o->alpha == GIMG_ALPHA_PREMULTIPLY;
}

/* Where coordinate p (any integer) reads from along an axis of n >= 1
 * samples; -1 for a zero border outside the image. */
static inline int gimg_border_index(long p, int n, gimg_border b)
{
    if (p >= 0 && p < n)
        return (int)p;
    switch (b) {
    case GIMG_BORDER_CLAMP:
        return p < 0 ? 0 : n - 1;
    case GIMG_BORDER_MIRROR: { /* period 2n, edges repeated */
        long q = p % (2L * n);
        if (q < 0)
            q += 2L * n;
        return (int)(q < n ? q : 2L * n - 1 - q);
    }
    case GIMG_BORDER_REFLECT: { /* period 2n - 2, edges not repeated */
        if (n == 1)
            return 0;
        long q = p % (2L * n - 2);
        if (q < 0)
            q += 2L * n - 2;
        return (int)(q < n ? q : 2L * n - 2 - q);
    }
    case GIMG_BORDER_WRAP: {
        long q = p % n;
        return (int)(q < 0 ? q + n : q);
    }
    default:
        return -1;
    }
}

/* The widest value of each sample type, for premultiplication. */
static inline float gimg_conv_alpha_max(gimg_sample s)
{
    return s == GIMG_U8 ? 255.0f : s == GIMG_U16 ? 65535.0f : 1.0f;
}

/* Colour sample v with alpha a, premultiplied: v * (a / max). */
static inline float gimg_conv_premultiply(float v, float a, float amax)
{
    return v * (a / amax);
}

/*
 * Unpremultiplying. unit is what an opaque pixel's alpha becomes through
 * the chain: max times the chain's gain (the product of the kernels' tap
 * sums), as one float, gimg_conv_alpha_unit(); 0 for a zero gain (edge
 * detectors, laplacians, gradient magnitudes, and kernels whose sum is 0
 * but for float rounding, as log:SIGMA). For convolved alpha a and
 * the input's alpha a_in at the same pixel:
 *   - alpha is the kernels' weighted average of alpha: a / (unit / max)
 *     (a divided by the gain, two divisions in that order); where unit is
 *     0 there is no average and alpha is a_in, unchanged;
 *   - colours are divided by the alpha fraction: a / unit (a_in / max
 *     where unit is 0), so that an opaque image gives the plain
 *     convolution whatever the kernels' gain, transparent pixels lend no
 *     colour, and a uniform alpha gives the colours of --alpha keep; where
 *     the fraction is 0 colours stay as convolved.
 * kernels/conv.cu's narrow_kernel does the same arithmetic in this order.
 */
float gimg_conv_alpha_unit(const gimg_conv_opts *o, gimg_sample s);
static inline float gimg_conv_alpha_fraction(float a, float a_in, float unit, float amax)
{
    return unit != 0.0f ? a / unit : a_in / amax;
}
static inline float gimg_conv_alpha_out(float a, float a_in, float unit, float amax)
{
    return unit != 0.0f ? a / (unit / amax) : a_in;
}
static inline float gimg_conv_unpremultiply(float c, float fraction)
{
    return fraction != 0.0f ? c / fraction : c;
}

/* --scale, --bias and --abs. */
static inline float gimg_conv_finish(float v, float scale, float bias, int absolute)
{
    v = fmaf(v, scale, bias);
    return absolute ? fabsf(v) : v;
}

/* Clamp to [0, max] (NaN to 0), round to nearest, ties to even. Written as
 * comparisons, which compilers turn into max/min instructions (fminf and
 * fmaxf may stay library calls). */
static inline float gimg_conv_clamp(float v, float max)
{
    v = v > 0.0f ? v : 0.0f;
    return v < max ? v : max;
}
static inline uint8_t gimg_conv_to_u8(float v)
{
    return (uint8_t)rintf(gimg_conv_clamp(v, 255.0f));
}
static inline uint16_t gimg_conv_to_u16(float v)
{
    return (uint16_t)rintf(gimg_conv_clamp(v, 65535.0f));
}

#ifdef GIMG_HAVE_CUDA
struct gimg_gpu;
/* The GPU backend (for gimg_conv and the differential tests). *out must be
 * allocated with in's layout. */
gimg_status gimg_conv_gpu(struct gimg_gpu *g, const gimg_image *in, const gimg_conv_opts *o,
                          gimg_image *out, double *kernel_ms);
#endif

#ifdef __cplusplus
}
#endif

#endif
