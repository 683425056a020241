/*
 * absdiff.cu — the comparison's per-pixel pass: the absolute difference
 * |a - b| of every sample (gstats --diff-image) and the count of pixels in
 * which any channel differs (the "all" row's pixels_differing, ImageMagick's
 * AE). The per-channel sums come from kernels/stats.cu's one-pass
 * reduction, which works on 16-byte words whose samples belong to several
 * pixels; a pixel's channels are together only here.
 *
 * Layout: interleaved 1-4 channels of 8/16-bit unsigned or float samples,
 * rows at any pitch. A thread takes one pixel (all its channels) of a row;
 * a block is 256 pixels of one row; the grid's y is the row.
 *
 * Work: reads 2N bytes (N = width * height * pixel bytes), writes N when
 * the image is asked for, and one atomic add per warp (its ballot's
 * population count) into a 64-bit counter: integer, so the count is exact
 * and does not depend on the order. A few integer instructions per sample:
 * bound by memory, it should run near a copy of 3N bytes (the reads of
 * neighbouring threads fall in the same lines: an RGB 8-bit warp reads 96
 * contiguous bytes of each image).
 *
 * Exactness: integer |a - b| is exact; float is fabsf(a - b) rounded once,
 * as the CPU computes it, with NaN canonicalised, so the image equals the
 * CPU's byte for byte.
 */
#include "absdiff.h"
#include "launch.cuh"

#include <stdint.h>

namespace {

constexpr int kThreads = 256;

template <typename T> __device__ __forceinline__ bool differs(T a, T b) { return a != b; }
template <> __device__ __forceinline__ bool differs<float>(float a, float b)
{
    return !(a == b || (isnan(a) && isnan(b)));
}

template <typename T> __device__ __forceinline__ T abs_diff(T a, T b) { return a > b ? a - b : b - a; }
template <> __device__ __forceinline__ float abs_diff<float>(float a, float b)
{
    const float d = fabsf(__fsub_rn(a, b));
    return isnan(d) ? __uint_as_float(0x7fc00000u) : d;
}

template <typename T, int C>
__global__ void absdiff_kernel(const unsigned char *__restrict__ a, size_t pitch_a,
                               const unsigned char *__restrict__ b, size_t pitch_b, int W,
                               unsigned char *out, size_t pitch_out,
                               unsigned long long *pixels_differing)
{
    const int x = blockIdx.x * kThreads + threadIdx.x, y = blockIdx.y;
    bool diff = false;
    if (x < W) {
        const T *ra = reinterpret_cast<const T *>(a + (size_t)y * pitch_a) + (size_t)x * C;
        const T *rb = reinterpret_cast<const T *>(b + (size_t)y * pitch_b) + (size_t)x * C;
        T va[C], vb[C];
#pragma unroll
        for (int c = 0; c < C; c++) {
            va[c] = ra[c];
            vb[c] = rb[c];
            diff |= differs(va[c], vb[c]);
        }
        if (out) {
            T *ro = reinterpret_cast<T *>(out + (size_t)y * pitch_out) + (size_t)x * C;
#pragma unroll
            for (int c = 0; c < C; c++)
                ro[c] = abs_diff(va[c], vb[c]);
        }
    }
    const unsigned ballot = __ballot_sync(0xffffffffu, diff);
    if ((threadIdx.x & 31) == 0 && ballot)
        atomicAdd(pixels_differing, (unsigned long long)__popc(ballot));
}

template <typename T, int C>
cudaError_t launch(const void *d_a, size_t pa, const void *d_b, size_t pb, int W, int H,
                   void *d_out, size_t po, unsigned long long *d_count, cudaStream_t stream)
{
    const dim3 grid((unsigned)((W + kThreads - 1) / kThreads), (unsigned)H);
    absdiff_kernel<T, C><<<grid, kThreads, 0, stream>>>(
        static_cast<const unsigned char *>(d_a), pa, static_cast<const unsigned char *>(d_b), pb,
        W, static_cast<unsigned char *>(d_out), po, d_count);
    return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t gimg_cuda_absdiff(const void *d_a, size_t pitch_a, const void *d_b,
                                         size_t pitch_b, int width, int height, int channels,
                                         int sample_bytes, void *d_out, size_t pitch_out,
                                         unsigned long long *d_pixels_differing,
                                         cudaStream_t stream)
{
    if (width < 1 || height < 1 || height > 65535 * 1024 || !d_pixels_differing)
        return cudaErrorInvalidValue;
    if (height > 65535) {
        /* The grid's y holds 65535 rows: larger images in slices of rows. */
        for (int y0 = 0; y0 < height; y0 += 65535) {
            const int rows = height - y0 < 65535 ? height - y0 : 65535;
            cudaError_t e = gimg_cuda_absdiff(
                static_cast<const unsigned char *>(d_a) + (size_t)y0 * pitch_a, pitch_a,
                static_cast<const unsigned char *>(d_b) + (size_t)y0 * pitch_b, pitch_b, width,
                rows, channels, sample_bytes,
                d_out ? static_cast<unsigned char *>(d_out) + (size_t)y0 * pitch_out : nullptr,
                pitch_out, d_pixels_differing, stream);
            if (e)
                return e;
        }
        return cudaSuccess;
    }
#define GIMG_ABSDIFF_CASE(s, T, c)                                                            \
    if (sample_bytes == s && channels == c)                                                   \
        return launch<T, c>(d_a, pitch_a, d_b, pitch_b, width, height, d_out, pitch_out,      \
                            d_pixels_differing, stream);
    GIMG_EACH_LAYOUT(GIMG_ABSDIFF_CASE)
#undef GIMG_ABSDIFF_CASE
    return cudaErrorInvalidValue;
}
