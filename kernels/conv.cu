/*
 * conv.cu — 2-D convolution of interleaved 8/16-bit and float images with
 * dense, separable and gradient-magnitude kernels (gconv).
 *
 * What it computes: lib/gimg_conv.h's plan, bit for bit as lib/conv.c's
 * reference does: samples widened to float, one __fmaf_rn per tap in
 * row-major tap order (rows of taps, then columns), outside samples read
 * through the border (a zero border gives +0 that is multiplied like any
 * other sample), then fmaf(v, scale, bias), |v|, clamp and round to
 * nearest even. Nothing is compiled with fast-math, and every product that
 * is followed by a sum is written as an intrinsic (__fmaf_rn, __fmul_rn),
 * so that the compiler cannot contract it differently from the CPU.
 *
 * Layout: rows of width * channels samples at a pitch that is a multiple
 * of 16 bytes (gimg's device buffers).
 *
 * Work and the rates it should reach (8192x8192 RGB 8-bit, H100 SXM: a
 * device-to-device copy moves 2.86 TB/s counting both directions, FP32 FMA
 * peak 66.9 TFLOP/s at 1.98 GHz on 132 SMs):
 *  - bytes: each input sample read once from DRAM (halos come from L2),
 *    each output written once: 2 x 201 MB = 403 MB, 0.14 ms at copy speed.
 *  - arithmetic: kw * kh FMAs per sample (kw + kh separable), i.e.
 *    2 * 201M * taps FLOP: 3.6 GFLOP at 3x3 (memory-bound: should reach
 *    >= 60% of the copy's bandwidth, 0.23 ms), 48.7 GFLOP at 11x11 (0.73 ms
 *    at peak) and 387 GFLOP at 31x31 (5.8 ms at peak; should reach >= 50%
 *    of it, 11.6 ms). Separable radius 5: 22 FMAs per sample plus the row
 *    pass's halo rows, memory-bound like 3x3.
 *
 * Measured (make bench, H100 80GB HBM3, NPP in the same run):
 *     case          ms     GB/s  /copy  GFLOP/s  %peak  NPP ms  vs NPP
 *     3x3          0.169   2387   0.85    21485   32.1   0.352   2.09x
 *     5x5          0.269   1497   0.53    37436   56.0   0.575   2.14x
 *     11x11        2.094    192   0.07    23263   34.8   4.529   2.16x
 *     31x31       10.396     39   0.01    37222   55.6  33.423   3.22x
 *     gauss r5     0.616    654   0.23    14389   21.5   1.613   2.62x  (fused)
 *     gauss r15    1.325    304   0.11    18838   28.2   2.974   2.24x  (fused)
 * Met: 3x3 at 60% of a copy, 2x NPP at every size and for both separable
 * cases, 31x31 at 50% of the FMA peak. Versions: (1) planar tiles, 2 rows
 * x 8 pixels a thread: 3x3 1.41 ms, 31x31 20.2 ms. (2) swizzled shared
 * rows, 16-byte reads, 4 rows a thread: 31x31 13.9 ms, 3x3 0.93 ms. (3)
 * more loads in flight: 31x31 12.9 ms, 3x3 1.33 ms — the small kernels
 * were held back by about 80 instructions a sample outside the FMAs (byte
 * loads, the plane split, staging through shared memory). (4) interleaved
 * tiles for odd kernels up to 7 wide and for the separable pass (below):
 * 3x3 0.36 ms, 5x5 0.50, gauss r5 0.94, r15 3.27 (fused). (5) 16-byte
 * loads for 8-bit, six blocks per SM: r5 0.83, r15 2.74. (6) 8-bit 3x3 and
 * 5x5 in register windows (dense_rw_kernel): a warp walks down rows with
 * its loads K rows ahead, no shared memory or barriers: 3x3 0.347, 5x5
 * 0.828 — the lanes at the image's edges mapped every sample through the
 * border inside the walk, and their warps, 20 to 30 times slower, held the
 * SMs. (7) those samples moved to a kernel of their own, conversions by
 * the exponent trick and one saturating cvt, 5x5 at three blocks per SM,
 * 3x3 prefetching a row further into L2: 3x3 0.185 (ncu: 73% issue-active,
 * 299 warp instructions a warp-row of which 144 FMAs), 5x5 0.373. (8)
 * register rings (sep_kernel, dense_kernel): the separable row pass read
 * every tap's sample from shared memory, which bounds it at a quarter of
 * the FMA rate; a thread now sums 16 samples of one channel, whose windows
 * share all but one sample, from a ring of registers: r5 0.83 -> 0.62, r15
 * 2.79 -> 1.35 (with the tile staged in the sample type: radius 15 fits
 * four blocks an SM instead of two). The same row pass over every tap row
 * replaced the planar tiles for dense kernels: 11x11 2.51 -> 2.19, 31x31
 * 13.0 -> 11.3 (ncu at 31x31: 88% issue-active, 65% of the instructions
 * FMAs, the rest the ring's shared reads, conversions by the exponent
 * trick and tap reads). (9) one conversion instruction instead of the
 * trick's two, and four blocks an SM: 11x11 2.08, 31x31 10.4. (10) the
 * walks' loop body one input row instead of K (no sums move: see below;
 * 5x5's code 90 -> 19 KB, instruction-fetch stalls 27% -> 3%), no alpha
 * path in the walk, walks of 64 rows, edge samples mapped once a column
 * and started beside the walk's last blocks: 3x3 0.169, 5x5 0.295. (11)
 * walks with fewer instructions a row (a row pointer stepping down the
 * image, sums narrowed four at a time in two instructions) and the image
 * in one wave of blocks: 5x5 0.269.
 *
 * Why it is written this way
 *  - Taps live in __constant__ memory: every lane of a warp reads the same
 *    tap at the same time, which the constant cache broadcasts. 64 KiB hold
 *    a 128x128 kernel; larger ones read their taps through the read-only
 *    data cache (__ldg) from global memory, the same loop otherwise.
 *  - Every path works on rows as they are stored (interleaved channels):
 *    away from the left and right edges, tap (i, j) of sample s of any
 *    channel is sample s + (j - ax) * C of row i, so a tile is staged with
 *    one 16-byte load a lane and the border is handled only while loading
 *    (interior tiles, the vast majority, skip the index mapping).
 *  - Odd kernels up to 7 wide (the memory-bound sizes) use interleaved
 *    tiles widened to float, 4 samples x 4 rows a thread; on 8-bit images
 *    3x3 and 5x5 go further: register windows, where each input row is
 *    loaded once and never staged.
 *  - Larger dense kernels and the separable pass are bound by arithmetic:
 *    register rings (see "register rings" below) make each shared read
 *    serve 16 FMAs and each tap read 16.
 *  - Separable kernels: one kernel loads the tile with its halo, runs the
 *    row pass for all kIH + kh - 1 rows into shared memory (float, as the
 *    CPU's intermediate) and the column pass from there, so the
 *    intermediate never goes to DRAM. Kernels taller than
 *    GIMG_CUDA_CONV_FUSE_MAX_KH or too large for shared memory take two
 *    dense passes through a float image (lib/conv.c).
 *  - Kernels taller than shared memory holds with their tile are applied a
 *    slice of tap rows at a time; the sums stay in registers, in order.
 *  - Gradient magnitudes (3x3) and the widen/narrow steps of alpha
 *    premultiplication and kernel chains are simple per-sample kernels:
 *    they are a small share of such runs.
 */
#include "conv.h"
#include "launch.cuh"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <stdint.h>
#include <type_traits>

namespace {

__constant__ float c_taps[GIMG_CUDA_CONV_CONST_TAPS];

typedef gimg_cuda_epilogue Epi;

/* lib/conv_internal.h's gimg_border_index, for int coordinates. */
__device__ __forceinline__ int border_index(int p, int n, int b)
{
    if (p >= 0 && p < n)
        return p;
    switch (b) {
    case 0: return p < 0 ? 0 : n - 1;
    case 1: { int q = p % (2 * n); if (q < 0) q += 2 * n; return q < n ? q : 2 * n - 1 - q; }
    case 2: {
        if (n == 1)
            return 0;
        int q = p % (2 * n - 2);
        if (q < 0)
            q += 2 * n - 2;
        return q < n ? q : 2 * n - 2 - q;
    }
    case 3: { int q = p % n; return q < 0 ? q + n : q; }
    default: return -1;
    }
}

/* One conversion: where the ring kernels widen a sample for every tap,
 * the conversion unit runs beside the FMAs, while the exponent trick of
 * byte_to_f would take two more issue slots (measured: 31x31 10.4 ms
 * against 10.9). */
__device__ __forceinline__ float to_f(uint8_t v) { return (float)v; }
__device__ __forceinline__ float to_f(uint16_t v) { return (float)v; }
__device__ __forceinline__ float to_f(float v) { return v; }

/* Byte b (0-3) of w as a float, exact: the byte as the low mantissa bits
 * of 2^23, minus 2^23 (two full-rate instructions, no conversion). */
__device__ __forceinline__ float byte_to_f(uint32_t w, int b)
{
    return __fsub_rn(__uint_as_float(__byte_perm(w, 0x4B000000u, 0x7540u + b)), 8388608.0f);
}
/* v rounded to nearest even and clamped to [0, 255], NaN to 0 (as the CPU
 * reference rounds), in one saturating conversion; 32 bits wide, so that
 * packing bytes needs no masks. */
__device__ __forceinline__ uint32_t f_to_byte(float v)
{
    uint32_t r;
    asm("cvt.rni.sat.u8.f32 %0, %1;" : "=r"(r) : "f"(v));
    return r;
}
/* Four values as the bytes of a word, the first in byte 0, each as
 * f_to_byte makes it: converted to int (nearest even, NaN to 0), then
 * packed in pairs with saturation. ptxas fuses the pairs (F2IP converts
 * two floats and packs them): two instructions in all, where four
 * conversions and three byte permutations took seven. (Checked against
 * f_to_byte for all 2^32 float bit patterns on an H100.) */
__device__ __forceinline__ uint32_t bytes4(float b0, float b1, float b2, float b3)
{
    int q0, q1, q2, q3;
    asm("cvt.rni.s32.f32 %0, %1;" : "=r"(q0) : "f"(b0));
    asm("cvt.rni.s32.f32 %0, %1;" : "=r"(q1) : "f"(b1));
    asm("cvt.rni.s32.f32 %0, %1;" : "=r"(q2) : "f"(b2));
    asm("cvt.rni.s32.f32 %0, %1;" : "=r"(q3) : "f"(b3));
    uint32_t hi, r; /* cvt.pack puts a above b, and c above both */
    asm("cvt.pack.sat.u8.s32.b32 %0, %1, %2, %3;" : "=r"(hi) : "r"(q3), "r"(q2), "r"(0u));
    asm("cvt.pack.sat.u8.s32.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(q1), "r"(q0), "r"(hi));
    return r;
}
/* The same for [0, 65535]. */
__device__ __forceinline__ uint32_t f_to_u16(float v)
{
    uint32_t r;
    asm("cvt.rni.sat.u16.f32 %0, %1;" : "=r"(r) : "f"(v));
    return r;
}
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ uint8_t from_f<uint8_t>(float v)
{
    return (uint8_t)f_to_byte(v);
}
template <> __device__ __forceinline__ uint16_t from_f<uint16_t>(float v)
{
    return (uint16_t)f_to_u16(v);
}
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }

template <typename T> __host__ __device__ constexpr float alpha_max() { return sizeof(T) == 1 ? 255.0f : sizeof(T) == 2 ? 65535.0f : 1.0f; }

/* One tap on one sum, or on four sums of four samples. */
__device__ __forceinline__ float fma4(float t, float v, float a) { return __fmaf_rn(t, v, a); }
__device__ __forceinline__ float4 fma4(float t, const float4 &v, const float4 &a)
{
    return make_float4(__fmaf_rn(t, v.x, a.x), __fmaf_rn(t, v.y, a.y), __fmaf_rn(t, v.z, a.z),
                       __fmaf_rn(t, v.w, a.w));
}

__device__ __forceinline__ float finish(float v, const Epi &e)
{
    v = __fmaf_rn(v, e.scale, e.bias);
    return e.absolute ? fabsf(v) : v;
}

template <bool CONST_TAPS> __device__ __forceinline__ float tap(int k, const float *g)
{
    if constexpr (CONST_TAPS)
        return c_taps[k];
    else
        return __ldg(g + k);
}

/* ------------------------------------------------- interleaved row tiles */

/*
 * The small dense kernels and the separable pass work on rows as they are
 * stored: an image row is one array of W * C samples, and away from the
 * left and right edges a kernel's tap (i, j) for sample s of any channel is
 * sample s + (j - ax) * C of row i. A tile is kIW consecutive samples of
 * kIH rows, whatever pixel they belong to; channels matter only where the
 * border maps an outside sample to its pixel, in the loader. So a lane
 * loads, widens and later stores 4 consecutive samples with one
 * instruction each (4, 8 or 16 bytes), and nothing is split into planes or
 * staged back.
 */
constexpr int kIW = 128;      /* tile width, samples */
constexpr int kIH = 32;       /* tile height, rows */
constexpr int kIThreads = 256; /* 32 lanes x 8 rows of threads; 4 samples x 4 rows each */

/* 16 bytes of samples, V of them, as loaded (raw bits) and widened. */
template <typename T> struct vec16 {
    static constexpr int V = 16 / (int)sizeof(T);
    union { uint4 u; T t[V]; };
};
__device__ __forceinline__ void widen16(const vec16<uint8_t> &r, float *s)
{
    const uint32_t w[4] = {r.u.x, r.u.y, r.u.z, r.u.w};
#pragma unroll
    for (int k = 0; k < 4; k++)
        *reinterpret_cast<float4 *>(s + 4 * k) = make_float4(
            byte_to_f(w[k], 0), byte_to_f(w[k], 1), byte_to_f(w[k], 2), byte_to_f(w[k], 3));
}
__device__ __forceinline__ void widen16(const vec16<uint16_t> &r, float *s)
{
    const uint32_t w[4] = {r.u.x, r.u.y, r.u.z, r.u.w};
#pragma unroll
    for (int k = 0; k < 2; k++)
        *reinterpret_cast<float4 *>(s + 4 * k) =
            make_float4((float)(w[2 * k] & 0xffffu), (float)(w[2 * k] >> 16),
                        (float)(w[2 * k + 1] & 0xffffu), (float)(w[2 * k + 1] >> 16));
}

__device__ __forceinline__ void store4(uint8_t *p, const float (&v)[4])
{
    *reinterpret_cast<uint32_t *>(p) = f_to_byte(v[0]) | f_to_byte(v[1]) << 8 |
                                       f_to_byte(v[2]) << 16 | f_to_byte(v[3]) << 24;
}
__device__ __forceinline__ void store4(uint16_t *p, const float (&v)[4])
{
    *reinterpret_cast<uint2 *>(p) =
        make_uint2(f_to_u16(v[0]) | f_to_u16(v[1]) << 16, f_to_u16(v[2]) | f_to_u16(v[3]) << 16);
}
__device__ __forceinline__ void store4(float *p, const float (&v)[4])
{
    *reinterpret_cast<float4 *>(p) = make_float4(v[0], v[1], v[2], v[3]);
}

/* Sample s of a row (any integer, outside too) through the border, as
 * stored; 0 (+0.0 for float) for a zero border outside. */
template <typename Tin, int C>
__device__ __forceinline__ Tin sample_at(const Tin *row, int s, int W, int border)
{
    const int p = s >= 0 ? s / C : -((C - 1 - s) / C); /* floor(s / C) */
    const int x = border_index(p, W, border);
    return x < 0 ? (Tin)0 : row[x * C + (s - p * C)];
}

/*
 * Stages rows [ys, ys + rows) of the input, samples [xs, xs + ls) (xs and
 * ls multiples of V, the samples in 16 bytes), into s (ls samples a row):
 * widened to float when Ts is float, as stored when Ts is Tin. Each thread
 * keeps B 16-byte loads in flight: 8-bit images need that many bytes in
 * flight to approach the copy's bandwidth.
 * Interior tiles, and in edge tiles every 16-byte group that lies inside,
 * take one vector load; the rest goes through the border sample by sample.
 */
template <typename Tin, int C, typename Ts = float>
__device__ __forceinline__ void il_load_tile(Ts *s, int rows, int ls, const unsigned char *in,
                                             size_t in_pitch, int W, int H, int xs, int ys,
                                             int border)
{
    constexpr int V = vec16<Tin>::V;
    const int n = W * C, groups = ls / V, total = rows * groups;
    const bool interior = xs >= 0 && ys >= 0 && xs + ls <= n && ys + rows <= H;
    /* g / groups without a division: exact, since g < 2^16 and the
     * fraction is at least 0.5 / groups away from the next integer. */
    const float inv_groups = 1.0f / (float)groups;
    /* Loads in flight per thread: an 8-bit tile is 1 to 2 loads a thread. */
    constexpr int B = sizeof(Tin) == 1 ? 2 : 4;
    for (int g0 = threadIdx.x; g0 < total; g0 += B * blockDim.x) {
        vec16<Tin> v[B];
#pragma unroll
        for (int k = 0; k < B; k++) {
            const int g = g0 + k * blockDim.x;
            if (g >= total)
                break;
            const int r = (int)(((float)g + 0.5f) * inv_groups), x = xs + V * (g - r * groups);
            if (interior) {
                v[k].u = *reinterpret_cast<const uint4 *>(
                    reinterpret_cast<const Tin *>(in + (size_t)(ys + r) * in_pitch) + x);
                continue;
            }
            const int gy = border_index(ys + r, H, border);
            const Tin *row = reinterpret_cast<const Tin *>(in + (size_t)(gy < 0 ? 0 : gy) * in_pitch);
            if (gy < 0) {
                v[k].u = make_uint4(0, 0, 0, 0);
            } else if (x >= 0 && x + V <= n) {
                v[k].u = *reinterpret_cast<const uint4 *>(row + x);
            } else {
#pragma unroll
                for (int i = 0; i < V; i++)
                    v[k].t[i] = sample_at<Tin, C>(row, x + i, W, border);
            }
        }
#pragma unroll
        for (int k = 0; k < B; k++) {
            const int g = g0 + k * blockDim.x;
            if (g >= total)
                break;
            const int r = (int)(((float)g + 0.5f) * inv_groups);
            Ts *dst = s + r * ls + V * (g - r * groups);
            if constexpr (std::is_same<Ts, Tin>::value)
                *reinterpret_cast<uint4 *>(dst) = v[k].u;
            else
                widen16(v[k], dst);
        }
    }
}

/*
 * Stores a thread's 4 x 4 sums: samples [x, x + 4) of rows y .. y + 3,
 * through the epilogue; one vector store a row inside the image.
 */
template <typename Tout, int C, bool RAW>
__device__ __forceinline__ void il_store(const float (&acc)[4][4], unsigned char *out,
                                         size_t out_pitch, int W, int H, int x, int y, const Epi &e)
{
    const int n = W * C;
    if (x >= n)
        return;
#pragma unroll
    for (int ry = 0; ry < 4; ry++) {
        if (y + ry >= H)
            return;
        Tout *orow = reinterpret_cast<Tout *>(out + (size_t)(y + ry) * out_pitch);
        float v[4];
#pragma unroll
        for (int i = 0; i < 4; i++)
            v[i] = RAW ? acc[ry][i] : finish(acc[ry][i], e);
        if (!RAW && e.keep_alpha) {
            const Tout *arow = reinterpret_cast<const Tout *>(
                static_cast<const unsigned char *>(e.alpha_src.data) + (size_t)(y + ry) * e.alpha_src.pitch);
#pragma unroll
            for (int i = 0; i < 4; i++)
                if ((x + i) % C == C - 1 && x + i < n)
                    v[i] = (float)arow[x + i]; /* exact: from_f gives it back */
        }
        if (x + 4 <= n) {
            store4(orow + x, v);
        } else {
            for (int i = 0; i < 4 && x + i < n; i++)
                orow[x + i] = from_f<Tout>(v[i]);
        }
    }
}

/* il_store for sums held as four float4 rows. */
template <typename Tout, int C, bool RAW>
__device__ __forceinline__ void il_store4(const float4 (&a)[4], unsigned char *out, size_t out_pitch,
                                          int W, int H, int x, int y, const Epi &e)
{
    const float acc[4][4] = {{a[0].x, a[0].y, a[0].z, a[0].w}, {a[1].x, a[1].y, a[1].z, a[1].w},
                             {a[2].x, a[2].y, a[2].z, a[2].w}, {a[3].x, a[3].y, a[3].z, a[3].w}};
    il_store<Tout, C, RAW>(acc, out, out_pitch, W, H, x, y, e);
}

/*
 * Dense kernels of odd width KW <= 7 centred horizontally (any height):
 * the memory-bound sizes. A thread computes 4 samples of 4 rows; for each
 * tile row it reads the 4 + 2 * HX floats its samples need (16-byte reads,
 * a quarter-warp's 8 lanes on 128 contiguous bytes: conflict-free) and
 * applies them to every output row that uses that tile row, so each value
 * read serves up to 4 x KW taps. Taps in row-major order for every sum.
 */
template <int KW, int C, int V> struct il_shape {
    static constexpr int R = KW / 2;
    static constexpr int HX = (R * C + V - 1) / V * V; /* tile halo, samples, a multiple of V */
    static constexpr int LS = kIW + 2 * HX;             /* tile row, floats */
    static constexpr int HW = (R * C + 3) & ~3;         /* window halo, a multiple of 4 */
    static constexpr int W0 = HX - HW;                  /* window start after 4 * tx */
    static constexpr int OFF = HW - R * C;              /* first tap's offset in the window */
    static constexpr int NW = 1 + 2 * HW / 4;           /* 16-byte reads a window */
};

/* Threads an SM holds, for the blocks a kernel asks launch bounds for:
 * Turing 1024; from Ampere on at least 1536 (sm_86, sm_89). */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define GIMG_SM_THREADS 1024
#else
#define GIMG_SM_THREADS 1536
#endif

/* Six blocks per SM (40 registers) where that costs no spills: the small
 * kernels are latency-bound, and more blocks overlap one block's loads
 * with another's arithmetic. (Turing holds only four.) */
#define GIMG_IL_MIN_BLOCKS (6 * kIThreads <= GIMG_SM_THREADS ? 6 : GIMG_SM_THREADS / kIThreads)
template <typename Tin, typename Tout, int C, int KW, bool RAW>
__global__ void __launch_bounds__(kIThreads, KW <= 5 ? GIMG_IL_MIN_BLOCKS : 4)
dense_il_kernel(const unsigned char *__restrict__ in, size_t in_pitch, unsigned char *__restrict__ out,
                size_t out_pitch, int W, int H, int kh, int ay, int border, int tap_offset, Epi e)
{
    extern __shared__ float4 s_mem4[];
    float *s = reinterpret_cast<float *>(s_mem4);
    typedef il_shape<KW, C, vec16<Tin>::V> S;
    const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    const int x0 = blockIdx.x * kIW, y0 = blockIdx.y * kIH;
    il_load_tile<Tin, C>(s, kIH + kh - 1, S::LS, in, in_pitch, W, H, x0 - S::HX, y0 - ay, border);
    __syncthreads();
    float acc[4][4];
#pragma unroll
    for (int ry = 0; ry < 4; ry++)
#pragma unroll
        for (int i = 0; i < 4; i++)
            acc[ry][i] = 0.0f;
    const float *base = s + 4 * ty * S::LS + 4 * tx + S::W0;
    for (int j = 0; j < kh + 3; j++) {
        float w[4 * S::NW];
#pragma unroll
        for (int k = 0; k < S::NW; k++) {
            const float4 q = *reinterpret_cast<const float4 *>(base + j * S::LS + 4 * k);
            w[4 * k] = q.x, w[4 * k + 1] = q.y, w[4 * k + 2] = q.z, w[4 * k + 3] = q.w;
        }
#pragma unroll
        for (int ry = 0; ry < 4; ry++) {
            const int ky = j - ry;
            if (ky < 0 || ky >= kh)
                continue;
#pragma unroll
            for (int kx = 0; kx < KW; kx++) {
                const float t = c_taps[tap_offset + ky * KW + kx];
#pragma unroll
                for (int i = 0; i < 4; i++)
                    acc[ry][i] = __fmaf_rn(t, w[S::OFF + kx * C + i], acc[ry][i]);
            }
        }
    }
    il_store<Tout, C, RAW>(acc, out, out_pitch, W, H, x0 + 4 * tx, y0 + 4 * ty, e);
}

/* Shared bytes of dense_il_kernel for a kernel kh rows tall. */
template <typename Tin, int C, int KW> constexpr size_t dense_il_smem(int kh)
{
    return (size_t)(kIH + kh - 1) * il_shape<KW, C, vec16<Tin>::V>::LS * sizeof(float);
}
/* Within every target's opt-in limit (Turing: 64 KiB); taller kernels take
 * the planar path, which slices its tap rows. */
constexpr size_t kIlSmemMax = 48 * 1024;

/* ------------------------------------------------ 8-bit register windows */

/*
 * 3x3 and 5x5 kernels on 8-bit images (the memory-bound sizes of the most
 * common sample type): no shared memory and no barriers. A warp owns a
 * segment of 512 samples of a row (16 a lane, one 16-byte load) and walks
 * down its rows. Each input row is loaded once, one row ahead of its use
 * (for 3x3 prefetched into L2 three rows ahead of that), widened in
 * registers, its horizontal halo taken from the neighbouring lanes by
 * shuffles (the warp's two outer lanes load theirs), and applied to the K
 * output rows that use it: K rows of 16 sums a lane, each sum receiving
 * its taps in row-major order, as the CPU applies them.
 *  - The sums never move between registers: slot k holds output row j - k
 *    while input row j is applied, and the first tap of slot k reads slot
 *    k - 1 of the row before, slots taken from the top down. So the loop
 *    body is one input row, not K of them: unrolled K times (one copy per
 *    rotation of a ring), 5x5 took 90 KB of code and its warps stalled on
 *    instruction fetch a quarter of the time.
 *  - A row costs few instructions besides the FMAs (ncu, 5x5: 222M warp
 *    instructions against 235M): a row pointer steps down the image, and
 *    only rows outside it (in the first and last walks) go through the
 *    border mapping; sums narrow four at a time in two instructions
 *    (bytes4). Bytes 0 and 3 of a word widen by a mask or shift and one
 *    conversion, bytes 1 and 2 by the exponent trick (the byte placed
 *    under 2^23's exponent, then one subtraction): the conversion unit and
 *    the FMA pipe share the work.
 *  - Lanes whose window crosses the left or right edge store nothing:
 *    rw_edge_kernel computes those samples, so that the walk has no
 *    per-sample border path (with one, the edge warps ran 20-30 times
 *    slower than the others).
 *  - The image goes in one wave of blocks, walks as long as that needs
 *    (187 rows at 8192x8192 RGB on an H100): every block does the same
 *    work, so no SM idles in a tail, and the K - 1 extra input rows of a
 *    walk cost 2% (walks of 64 rows, about three waves: 5x5 0.277 against
 *    0.269 ms).
 *  - --alpha keep takes the interleaved tiles instead (il_store copies
 *    alpha), so that the walk has no alpha path.
 */
constexpr int kRwRows = 64;     /* output rows a warp walks down, at least */
constexpr int kRwThreads = 128; /* 4 warps, side by side along the row */

/* Whether the lane at sample x has a window that crosses an edge. */
template <int C, int K> __host__ __device__ constexpr bool rw_edge(int x, int n)
{
    return x - K / 2 * C < 0 || x + 16 + K / 2 * C > n;
}

/* Byte k of w as a float: see above. */
__device__ __forceinline__ float rw_byte(uint32_t w, int k)
{
    return k == 0 || k == 3 ? (float)(uint8_t)(w >> (8 * k)) : byte_to_f(w, k);
}

template <int C, int K>
__global__ void __launch_bounds__(kRwThreads, K == 3 ? 4 : 3)
dense_rw_kernel(const unsigned char *__restrict__ in, size_t in_pitch, unsigned char *__restrict__ out,
                size_t out_pitch, int W, int H, int walk_rows, int border, int tap_offset, Epi e)
{
    constexpr int R = K / 2, RC = R * C;
    constexpr int HW = (RC + 3) / 4;  /* halo words each side */
    constexpr int NB = 16 + 8 * HW;    /* window bytes, from x - 4 * HW */
    constexpr int OFF = 4 * HW - RC;   /* first tap's sample in the window */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    /* rw_edge_kernel may start as the last blocks run. */
    asm volatile("griddepcontrol.launch_dependents;");
#endif
    const int lane = threadIdx.x % 32;
    const int n = W * C;
    const int x = 16 * (int)(blockIdx.x * kRwThreads + threadIdx.x);
    const int y0 = blockIdx.y * walk_rows;
    const int rows_out = min(walk_rows, H - y0), rows_in = rows_out + K - 1;
    const bool edge = rw_edge<C, K>(x, n);
    /* Scale 1, bias 0 and no |v|: finish would at most turn -0 into +0,
     * which the conversion maps alike, so it is skipped. */
    const bool plain = !e.absolute && e.scale == 1.0f && e.bias == 0.0f;

    /* Row j of the walk is image row y0 - R + j, loaded from p, which steps
     * down the image; rows outside it (first and last walks only) map
     * through the border. The outer lanes also load the words beyond the
     * segment: lane 0 those on its left, lane 31 those on its right (HW ==
     * 1: one, in .x). Lanes past the row's end load its start instead:
     * their samples reach only edge lanes, which store nothing. */
    const bool own = x < n, outer = !edge && (lane == 0 || lane == 31);
    const unsigned char *const in_x = in + (own ? x : 0);
    const unsigned char *p = in_x + (size_t)max(y0 - R, 0) * in_pitch;
    const int extra_dx = lane == 0 ? -4 * HW : 16;
    /* Rows prefetched into L2 ahead of the load: three for 3x3 (six: 0.194
     * against 0.178 ms), none for 5x5, whose FMAs hide the loads (three, in
     * walks of 32 rows: 0.316 against 0.308 ms). */
    constexpr int PF = K == 3 ? 3 : 0;
    auto prefetch = [&](int j) {
        const int py = y0 - R + j;
        if (PF && own && lane % 8 == 0 && py >= 0 && py < H)
            asm volatile("prefetch.global.L2 [%0];" ::"l"(in + (size_t)py * in_pitch + x));
    };
    const int j_top = R - y0, j_bottom = H + R - y0; /* rows j in the image */
    auto issue = [&](int j, uint4 &v, uint2 &ex) {
        const unsigned char *row = p;
        if (j >= j_top && j < j_bottom) {
            p += in_pitch;
        } else {
            const int gy = border_index(y0 - R + j, H, border);
            if (gy < 0) {
                v = make_uint4(0, 0, 0, 0);
                ex = make_uint2(0, 0);
                return;
            }
            row = in_x + (size_t)gy * in_pitch;
        }
        v = *reinterpret_cast<const uint4 *>(row);
        /* One load (two, predicated apart, would wait for each other). */
        if (outer)
            ex = HW == 1 ? make_uint2(*reinterpret_cast<const uint32_t *>(row + extra_dx), 0)
                         : *reinterpret_cast<const uint2 *>(row + extra_dx);
    };
#pragma unroll
    for (int j = 1; j <= PF; j++)
        prefetch(j);
    /* Row j, then (once widened) row j + 1. */
    uint4 v;
    uint2 ex = make_uint2(0, 0);
    issue(0, v, ex);

    float acc[K][16]; /* slot k: output row j - k */
#pragma unroll
    for (int k = 0; k < K; k++)
#pragma unroll
        for (int i = 0; i < 16; i++)
            acc[k][i] = 0.0f;
    unsigned char *dst = out + (size_t)y0 * out_pitch + x; /* output row o */
#pragma unroll 1
    for (int j = 0; j < rows_in; j++) {
        /* The window's words: HW left, 4 own, HW right. */
        uint32_t wd[4 + 2 * HW];
        wd[HW] = v.x, wd[HW + 1] = v.y, wd[HW + 2] = v.z, wd[HW + 3] = v.w;
        const uint32_t l1 = __shfl_up_sync(0xffffffffu, v.w, 1), r0 = __shfl_down_sync(0xffffffffu, v.x, 1);
        wd[HW - 1] = lane == 0 ? (HW == 1 ? ex.x : ex.y) : l1;
        wd[HW + 4] = lane == 31 ? ex.x : r0;
        if constexpr (HW == 2) {
            const uint32_t l0 = __shfl_up_sync(0xffffffffu, v.z, 1), r1 = __shfl_down_sync(0xffffffffu, v.y, 1);
            wd[0] = lane == 0 ? ex.x : l0;
            wd[7] = lane == 31 ? ex.y : r1;
        }
        float w[NB];
#pragma unroll
        for (int b = OFF; b < NB - OFF; b++)
            w[b] = rw_byte(wd[b / 4], b % 4);
        if (j + 1 < rows_in)
            issue(j + 1, v, ex);
        prefetch(j + 1 + PF);
        /* Tap row ky goes to output row j - ky, whose sums sat in slot
         * ky - 1 for the row before. */
#pragma unroll
        for (int ky = K - 1; ky >= 0; ky--) {
#pragma unroll
            for (int kx = 0; kx < K; kx++) {
                const float t = c_taps[tap_offset + ky * K + kx];
#pragma unroll
                for (int i = 0; i < 16; i++)
                    acc[ky][i] = __fmaf_rn(t, w[OFF + kx * C + i],
                                           kx ? acc[ky][i] : ky ? acc[ky > 0 ? ky - 1 : 0][i] : 0.0f);
            }
        }
        /* Output row j - K + 1 is complete. */
        if (j < K - 1 || edge)
            continue;
        const float (&a)[16] = acc[K - 1];
        float q[16];
#pragma unroll
        for (int i = 0; i < 16; i++)
            q[i] = plain ? a[i] : finish(a[i], e);
        *reinterpret_cast<uint4 *>(dst) =
            make_uint4(bytes4(q[0], q[1], q[2], q[3]), bytes4(q[4], q[5], q[6], q[7]),
                       bytes4(q[8], q[9], q[10], q[11]), bytes4(q[12], q[13], q[14], q[15]));
        dst += out_pitch;
    }
}

/*
 * The samples dense_rw_kernel leaves to its edge lanes: for each row, the
 * first lane's 16 samples and the last lanes' (those whose window crosses
 * the right edge), a thread a sample of a row, in the same order and with
 * the same epilogue. The border maps each tap column and each tap row once
 * (mapping every tap took 22 us at 8192x8192 RGB 5x5, against 280 us for
 * the walk; now 9 us, which on Hopper overlap the walk's last blocks).
 */
template <int C, int K>
__global__ void rw_edge_kernel(const unsigned char *__restrict__ in, size_t in_pitch,
                               unsigned char *__restrict__ out, size_t out_pitch, int W, int H,
                               int border, int tap_offset, Epi e, int right0, int samples)
{
    constexpr int R = K / 2;
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (long long)samples * H) {
        const int y = (int)(i / samples);
        /* Samples [0, left) and [right0, n), left = 16 clipped to the image. */
        const int k = (int)(i - (long long)y * samples), left = min(16, right0);
        const int s = k < left ? k : k - left + right0;
        /* Tap column kx of sample s, channel c of pixel px: the same channel
         * of pixel px + kx - R, through the border (-1: a zero outside). */
        const int px = s / C, c = s - px * C;
        int xs[K];
#pragma unroll
        for (int kx = 0; kx < K; kx++) {
            const int q = border_index(px + kx - R, W, border);
            xs[kx] = q < 0 ? -1 : q * C + c;
        }
        float acc = 0.0f;
#pragma unroll
        for (int ky = 0; ky < K; ky++) {
            const int gy = border_index(y - R + ky, H, border);
            const uint8_t *row = in + (size_t)(gy < 0 ? 0 : gy) * in_pitch;
#pragma unroll
            for (int kx = 0; kx < K; kx++) {
                const float v = gy < 0 || xs[kx] < 0 ? 0.0f : (float)row[xs[kx]];
                acc = __fmaf_rn(c_taps[tap_offset + ky * K + kx], v, acc);
            }
        }
        out[(size_t)y * out_pitch + s] = (uint8_t)f_to_byte(finish(acc, e));
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    /* Launched as the walk's programmatic dependent: complete only after
     * it, so that later work in the stream sees both. */
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

template <int C, int K>
cudaError_t launch_dense_rw(const gimg_cuda_plane &in, const gimg_cuda_plane &out, int W, int H,
                            int border, int tap_offset, const Epi &e, cudaStream_t stream)
{
    const long long n = (long long)W * C, lanes = (n + 15) / 16;
    const long long blocks_x = (lanes + kRwThreads - 1) / kRwThreads;
    if (blocks_x > INT_MAX / (16 * kRwThreads))
        return cudaErrorInvalidValue;
    gimg_launch::device_facts dev;
    int blocks_per_sm = 0;
    cudaError_t err = gimg_launch::current_device(&dev);
    if (err == cudaSuccess)
        err = gimg_launch::blocks_per_sm((const void *)dense_rw_kernel<C, K>, dev.dev, kRwThreads,
                                         0, &blocks_per_sm);
    if (err != cudaSuccess)
        return err;
    /* As many walks down each column as make one wave of resident blocks
     * (the image in one wave: every block does the same work, so none
     * waits for a tail), each at least kRwRows long. */
    const long long walks = std::max(1LL, (long long)blocks_per_sm * dev.sms / blocks_x);
    const int walk_rows = (int)std::max((long long)kRwRows, (H + walks - 1) / walks);
    const dim3 grid((unsigned)blocks_x, (unsigned)((H + walk_rows - 1) / walk_rows));
    if (grid.y > 65535)
        return cudaErrorInvalidValue;
    const unsigned char *d_in = static_cast<const unsigned char *>(in.data);
    unsigned char *d_out = static_cast<unsigned char *>(out.data);
    dense_rw_kernel<C, K><<<grid, kRwThreads, 0, stream>>>(d_in, in.pitch, d_out, out.pitch, W, H, walk_rows,
                                                           border, tap_offset, e);
    err = cudaGetLastError();
    if (err != cudaSuccess)
        return err;
    /* The first lane from the right whose window crosses the edge. */
    int right0 = (int)(lanes - 1) * 16;
    while (right0 >= 16 && rw_edge<C, K>(right0 - 16, (int)n))
        right0 -= 16;
    const int samples = min(16, right0) + ((int)n - right0);
    /* The edge samples share nothing with the walk: on Hopper and later
     * they start while its last blocks run (programmatic dependent launch;
     * measured 5x5 0.290 -> 0.286 ms). */
    cudaLaunchAttribute attr = {};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)(((long long)samples * H + 255) / 256));
    cfg.blockDim = dim3(256);
    cfg.stream = stream;
    cfg.attrs = &attr;
    cfg.numAttrs = dev.cc_major >= 9 ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, rw_edge_kernel<C, K>, d_in, in.pitch, d_out, out.pitch, W, H,
                              border, tap_offset, e, right0, samples);
}

/* ---------------------------------------------------------- register rings */

/*
 * Separable kernels in one pass: the tile with its halo, as stored, then
 * the row pass (row taps at constant offset 0) for all kIH + kh - 1 rows
 * into s_tmp (float, as the CPU's intermediate), then the column pass (taps
 * at GIMG_CUDA_CONV_COL_OFFSET) from s_tmp, so that the intermediate never
 * leaves the SM. The tile stays in its sample type: a quarter of the shared
 * memory for 8-bit images, which gives radius 15 four blocks an SM instead
 * of two.
 * Both passes slide a ring of registers along their direction:
 *  - row pass: a thread sums a run of kRun samples of one channel, C samples
 *    apart, whose windows overlap in all but one sample; each tap costs kRun
 *    FMAs, one shared read and one conversion. (Reading every tap's sample
 *    from shared memory bound the pass by shared bandwidth at a quarter of
 *    the FMA rate.) Runs cover a row of ring_row(C) samples, kIW rounded up
 *    to whole groups of C runs (144 for RGB: 16 computed and dropped).
 *  - column pass: 4 samples of 4 rows a thread; each tap costs one 16-byte
 *    read and 16 FMAs.
 */
constexpr int kRun = 16;
/* The tile of both ring kernels (sep_kernel, dense_kernel): rows of
 * ring_row(C) outputs with their halos, in the sample type. */
__host__ __device__ constexpr int ring_row(int C) { return (kIW + kRun * C - 1) / (kRun * C) * (kRun * C); }
struct ring_geom {
    int hxl, hxr, ls; /* left and right halo (samples, multiples of V), tile row (samples) */
    size_t tile_bytes; /* the staged tile, rounded up to 16 bytes */
};
/* V samples in 16 bytes; the right halo reaches the last run's window and
 * the one sample after it that the ring loads and never uses. */
__host__ __device__ inline ring_geom ring_geometry(int C, int kw, int kh, int ax, int V)
{
    ring_geom g;
    g.hxl = (ax * C + V - 1) / V * V;
    g.hxr = (ring_row(C) - kIW + (kw - ax) * C + V - 1) / V * V;
    g.ls = kIW + g.hxl + g.hxr;
    g.tile_bytes = ((size_t)(kIH + kh - 1) * g.ls * (16 / V) + 15) / 16 * 16;
    return g;
}
/* Shared bytes of a ring kernel: the tile for kh tap rows, then a float
 * tile kIW wide of float_rows rows. */
__host__ __device__ inline size_t ring_smem_bytes(int C, int kw, int kh, int ax, int V, int float_rows)
{
    return ring_geometry(C, kw, kh, ax, V).tile_bytes + (size_t)float_rows * kIW * sizeof(float);
}
/* sep_kernel's: s_tmp has a spare row for the column ring's last load,
 * never used. */
__host__ __device__ inline size_t sep_smem_bytes(int C, int kw, int kh, int ax, int V)
{
    return ring_smem_bytes(C, kw, kh, ax, V, kIH + kh);
}

/* The first sample of run q in a tile row: runs come in groups of C, one
 * per channel, kRun * C samples a group. */
template <int C> __device__ __forceinline__ int run_start(int q)
{
    return q / C * (kRun * C) + q % C;
}
/* A run's sums into row r of a float tile kIW samples wide; those past
 * it are dropped. */
template <int C>
__device__ __forceinline__ void put_run(float *s, int r, int s0, const float (&acc)[kRun])
{
#pragma unroll
    for (int i = 0; i < kRun; i++)
        if (s0 + i * C < kIW)
            s[r * kIW + s0 + i * C] = acc[i];
}

/* One tap of a ring of N: sum i takes the sample in slot (jj + i) % N, then
 * slot jj, whose sample no later tap needs, takes the next one. */
template <int N, typename T>
__device__ __forceinline__ void ring_tap(T (&acc)[N], T (&ring)[N], int jj, float t, const T &next)
{
#pragma unroll
    for (int i = 0; i < N; i++)
        acc[i] = fma4(t, ring[(jj + i) % N], acc[i]);
    ring[jj] = next;
}

/* taps taps, tap j being tap_at(j): ring[i] starts as sample i of the
 * window and load(k) gives sample k; each sum receives its taps in order. */
template <int N, typename T, typename Tap, typename Load>
__device__ __forceinline__ void ring_sums(T (&acc)[N], int taps, Tap tap_at, Load load)
{
    T ring[N];
#pragma unroll
    for (int i = 0; i < N; i++)
        ring[i] = load(i);
    int j0 = 0;
    for (; j0 + N <= taps; j0 += N)
#pragma unroll
        for (int jj = 0; jj < N; jj++)
            ring_tap(acc, ring, jj, tap_at(j0 + jj), load(j0 + jj + N));
#pragma unroll
    for (int jj = 0; jj < N - 1; jj++)
        if (j0 + jj < taps)
            ring_tap(acc, ring, jj, tap_at(j0 + jj), load(j0 + jj + N));
}

template <typename Tin, typename Tout, int C, bool RAW>
__global__ void __launch_bounds__(kIThreads)
sep_kernel(const unsigned char *__restrict__ in, size_t in_pitch, unsigned char *__restrict__ out,
           size_t out_pitch, int W, int H, int kw, int kh, int ax, int ay, int border, Epi e)
{
    extern __shared__ float4 s_mem4[];
    Tin *s_in = reinterpret_cast<Tin *>(s_mem4);
    const ring_geom g = ring_geometry(C, kw, kh, ax, vec16<Tin>::V);
    const int rows = kIH + kh - 1;
    float *s_tmp = reinterpret_cast<float *>(reinterpret_cast<unsigned char *>(s_mem4) + g.tile_bytes);
    const int x0 = blockIdx.x * kIW, y0 = blockIdx.y * kIH;
    il_load_tile<Tin, C, Tin>(s_in, rows, g.ls, in, in_pitch, W, H, x0 - g.hxl, y0 - ay, border);
    __syncthreads();
    constexpr int runs = ring_row(C) / kRun; /* a row's runs */
    for (int item = threadIdx.x; item < rows * runs; item += kIThreads) {
        const int r = item / runs, q = item - r * runs;
        const int s0 = run_start<C>(q);
        const Tin *src = s_in + r * g.ls + g.hxl - ax * C + s0; /* window sample k: src[k * C] */
        float acc[kRun];
#pragma unroll
        for (int i = 0; i < kRun; i++)
            acc[i] = 0.0f;
        ring_sums(acc, kw, [](int j) { return c_taps[j]; }, [&](int k) { return to_f(src[k * C]); });
        put_run<C>(s_tmp, r, s0, acc);
    }
    __syncthreads();
    const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    float4 acc4[4];
#pragma unroll
    for (int ry = 0; ry < 4; ry++)
        acc4[ry] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const float *col = s_tmp + 4 * ty * kIW + 4 * tx; /* window row k: col + k * kIW */
    ring_sums(acc4, kh, [](int j) { return c_taps[GIMG_CUDA_CONV_COL_OFFSET + j]; },
              [&](int k) { return *reinterpret_cast<const float4 *>(col + k * kIW); });
    il_store4<Tout, C, RAW>(acc4, out, out_pitch, W, H, x0 + 4 * tx, y0 + 4 * ty, e);
}

/*
 * Dense kernels other than the small ones above, up to 255 x 255: each tap
 * row is a row pass as in sep_kernel (runs of kRun samples, a ring of
 * registers) over the tile row it reads, the sums staying in registers
 * across tap rows, so that each receives its taps in row-major order.
 * Thread t sums run t % runs of output row t / runs, one run a thread; the
 * sums then go through s_out to 4 x 4 stores. Kernels too tall for shared
 * memory with the tile take their tap rows a slice at a time. Taps come
 * from __constant__ memory, or for kernels larger than it holds, from
 * global memory through the read-only cache.
 */
template <int C> constexpr int ring_threads() { return kIH * (ring_row(C) / kRun); }

/* Four blocks an SM with constant taps: the sums wait on conversions and
 * shared reads, and more warps hide them (measured, 8-bit RGB: 31x31
 * 10.4 ms against 12.2 at two blocks, 11x11 2.08 against 2.42), though
 * the RGB instantiations spill a few registers (up to 184 bytes). Global
 * taps (kernels over 16384 taps) keep two, where four would spill 440.
 * Turing holds fewer than four RGB blocks (GIMG_SM_THREADS): there the
 * kernel asks for one, as ptxas ignored the four it could not give. */
template <int C, bool CT> constexpr int dense_min_blocks()
{
    return !CT ? 2 : 4 * ring_threads<C>() <= GIMG_SM_THREADS ? 4 : 1;
}

template <typename Tin, typename Tout, int C, bool RAW, bool CT>
__global__ void __launch_bounds__(ring_threads<C>(), dense_min_blocks<C, CT>())
dense_kernel(const unsigned char *__restrict__ in, size_t in_pitch, unsigned char *__restrict__ out,
             size_t out_pitch, int W, int H, int kw, int kh, int ax, int ay, int border,
             int slice, int tap_offset, const float *__restrict__ g_taps, Epi e)
{
    extern __shared__ float4 s_mem4[];
    Tin *s_in = reinterpret_cast<Tin *>(s_mem4);
    const ring_geom g = ring_geometry(C, kw, slice, ax, vec16<Tin>::V);
    float *s_out = reinterpret_cast<float *>(reinterpret_cast<unsigned char *>(s_mem4) + g.tile_bytes);
    constexpr int runs = ring_row(C) / kRun;
    const int r = threadIdx.x / runs, q = threadIdx.x - r * runs;
    const int s0 = run_start<C>(q);
    const int x0 = blockIdx.x * kIW, y0 = blockIdx.y * kIH;
    float acc[kRun];
#pragma unroll
    for (int i = 0; i < kRun; i++)
        acc[i] = 0.0f;
    for (int ky0 = 0; ky0 < kh; ky0 += slice) {
        const int n = min(slice, kh - ky0);
        if (ky0)
            __syncthreads();
        il_load_tile<Tin, C, Tin>(s_in, kIH + n - 1, g.ls, in, in_pitch, W, H, x0 - g.hxl,
                                  y0 - ay + ky0, border);
        __syncthreads();
        for (int ky = 0; ky < n; ky++) {
            const Tin *src = s_in + (r + ky) * g.ls + g.hxl - ax * C + s0; /* window sample k: src[k * C] */
            const int first = tap_offset + (ky0 + ky) * kw;
            ring_sums(acc, kw, [&](int j) { return tap<CT>(first + j, g_taps); },
                      [&](int k) { return to_f(src[k * C]); });
        }
    }
    put_run<C>(s_out, r, s0, acc);
    __syncthreads();
    if (threadIdx.x >= kIThreads)
        return;
    const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    float4 sums[4];
#pragma unroll
    for (int ry = 0; ry < 4; ry++)
        sums[ry] = *reinterpret_cast<const float4 *>(s_out + (4 * ty + ry) * kIW + 4 * tx);
    il_store4<Tout, C, RAW>(sums, out, out_pitch, W, H, x0 + 4 * tx, y0 + 4 * ty, e);
}

/* ------------------------------------------------------ per-sample kernels */

template <typename Tin>
__global__ void widen_kernel(const unsigned char *__restrict__ in, size_t in_pitch,
                             unsigned char *__restrict__ out, size_t out_pitch, int W, int H,
                             int C, int premultiply)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x >= W)
        return;
    const Tin *p = reinterpret_cast<const Tin *>(in + (size_t)y * in_pitch) + (size_t)x * C;
    float *q = reinterpret_cast<float *>(out + (size_t)y * out_pitch) + (size_t)x * C;
    const float a = to_f(p[C - 1]);
    for (int c = 0; c < C; c++) {
        float v = to_f(p[c]);
        if (premultiply && c < C - 1)
            v = __fmul_rn(v, __fdiv_rn(a, alpha_max<Tin>()));
        q[c] = v;
    }
}

template <typename Tout>
__global__ void narrow_kernel(const unsigned char *__restrict__ in, size_t in_pitch,
                              unsigned char *__restrict__ out, size_t out_pitch, int W, int H,
                              int C, int unpremultiply, float unit, Epi e)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x >= W)
        return;
    const float *p = reinterpret_cast<const float *>(in + (size_t)y * in_pitch) + (size_t)x * C;
    Tout *q = reinterpret_cast<Tout *>(out + (size_t)y * out_pitch) + (size_t)x * C;
    const Tout *a = reinterpret_cast<const Tout *>(static_cast<const unsigned char *>(e.alpha_src.data) +
                                                   (size_t)y * e.alpha_src.pitch) + (size_t)x * C;
    /* lib/conv_internal.h's gimg_conv_alpha_fraction and gimg_conv_alpha_out:
     * alpha averaged (divided by the gain, unit / max), the input's alpha
     * (alpha_src) where the gain is 0; colours divided by the fraction. */
    float frac = 0.0f, alpha = 0.0f;
    if (unpremultiply && !e.keep_alpha) {
        const float amax = alpha_max<Tout>();
        if (unit != 0.0f) {
            frac = __fdiv_rn(p[C - 1], unit);
            alpha = __fdiv_rn(p[C - 1], __fdiv_rn(unit, amax));
        } else {
            alpha = to_f(a[C - 1]);
            frac = __fdiv_rn(alpha, amax);
        }
    }
    for (int c = 0; c < C; c++) {
        float v = p[c];
        if (c == C - 1 && e.keep_alpha) {
            q[c] = a[c];
            continue;
        }
        if (unpremultiply && c == C - 1) {
            q[c] = from_f<Tout>(alpha);
            continue;
        }
        if (unpremultiply)
            v = frac != 0.0f ? __fdiv_rn(v, frac) : v;
        q[c] = from_f<Tout>(finish(v, e));
    }
}

__global__ void magnitude_kernel(const unsigned char *__restrict__ in, size_t in_pitch,
                                 unsigned char *__restrict__ out, size_t out_pitch, int W, int H,
                                 int C, int kw, int kh, int ax, int ay, int border)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x >= W)
        return;
    float *q = reinterpret_cast<float *>(out + (size_t)y * out_pitch) + (size_t)x * C;
    for (int c = 0; c < C; c++) {
        float gx = 0.0f, gy = 0.0f;
        for (int i = 0; i < kh; i++) {
            const int yy = border_index(y + i - ay, H, border);
            const float *row = reinterpret_cast<const float *>(in + (size_t)(yy < 0 ? 0 : yy) * in_pitch);
            for (int j = 0; j < kw; j++) {
                const int xx = border_index(x + j - ax, W, border);
                const float v = yy < 0 || xx < 0 ? 0.0f : row[(size_t)xx * C + c];
                gx = __fmaf_rn(c_taps[i * kw + j], v, gx);
                gy = __fmaf_rn(c_taps[kw * kh + i * kw + j], v, gy);
            }
        }
        q[c] = __fsqrt_rn(__fmaf_rn(gx, gx, __fmul_rn(gy, gy)));
    }
}

/* ---------------------------------------------------------------- launchers */

/* Grid of interleaved tiles; 0 when it does not fit a launch. */
dim3 il_grid(int W, int H, int C)
{
    const long long n = (long long)W * C;
    return dim3((unsigned)((n + kIW - 1) / kIW), (unsigned)((H + kIH - 1) / kIH));
}

/* Shared memory dense_kernel may take for a whole kernel: two blocks an
 * SM. Taller ones take slices of tap rows within it, or at least one row. */
constexpr size_t kDenseSmem = 96 * 1024;

template <typename Tin, typename Tout, int C, bool RAW, bool CT>
cudaError_t launch_dense(const gimg_cuda_plane &in, const gimg_cuda_plane &out, int W, int H,
                         int kw, int kh, int ax, int ay, int border, int tap_offset,
                         const float *d_taps, const Epi &e, cudaStream_t stream)
{
    constexpr int V = vec16<Tin>::V;
    int slice = kh;
    while (slice > 1 && ring_smem_bytes(C, kw, slice, ax, V, kIH) > kDenseSmem)
        slice--;
    const size_t smem = ring_smem_bytes(C, kw, slice, ax, V, kIH);
    auto kern = dense_kernel<Tin, Tout, C, RAW, CT>;
    cudaError_t err = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (err != cudaSuccess)
        return err;
    const dim3 grid = il_grid(W, H, C);
    if (grid.y > 65535)
        return cudaErrorInvalidValue;
    kern<<<grid, ring_threads<C>(), smem, stream>>>(
        static_cast<const unsigned char *>(in.data), in.pitch, static_cast<unsigned char *>(out.data),
        out.pitch, W, H, kw, kh, ax, ay, border, slice, tap_offset, d_taps, e);
    return cudaGetLastError();
}

template <typename Tin, typename Tout, int C, int KW, bool RAW>
cudaError_t launch_dense_il(const gimg_cuda_plane &in, const gimg_cuda_plane &out, int W, int H,
                            int kh, int ay, int border, int tap_offset, const Epi &e,
                            cudaStream_t stream)
{
    const size_t smem = dense_il_smem<Tin, C, KW>(kh);
    auto kern = dense_il_kernel<Tin, Tout, C, KW, RAW>;
    cudaError_t err = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (err != cudaSuccess)
        return err;
    const dim3 grid = il_grid(W, H, C);
    if (grid.y > 65535)
        return cudaErrorInvalidValue;
    kern<<<grid, kIThreads, smem, stream>>>(static_cast<const unsigned char *>(in.data), in.pitch,
                                            static_cast<unsigned char *>(out.data), out.pitch, W, H,
                                            kh, ay, border, tap_offset, e);
    return cudaGetLastError();
}

template <typename Tin, typename Tout, int C, bool RAW>
cudaError_t launch_sep(const gimg_cuda_plane &in, const gimg_cuda_plane &out, int W, int H,
                       int kw, int kh, int ax, int ay, int border, const Epi &e,
                       cudaStream_t stream)
{
    const size_t smem = sep_smem_bytes(C, kw, kh, ax, vec16<Tin>::V);
    auto kern = sep_kernel<Tin, Tout, C, RAW>;
    cudaError_t err = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (err != cudaSuccess)
        return err;
    const dim3 grid = il_grid(W, H, C);
    if (grid.y > 65535)
        return cudaErrorInvalidValue;
    kern<<<grid, kIThreads, smem, stream>>>(static_cast<const unsigned char *>(in.data), in.pitch,
                                            static_cast<unsigned char *>(out.data), out.pitch, W, H,
                                            kw, kh, ax, ay, border, e);
    return cudaGetLastError();
}

/* Calls f.template operator()<Tin, Tout, C, RAW>() for the supported
 * combinations: same type in and out with the epilogue, float out raw
 * from any type, float in to any type with the epilogue. */
template <typename F>
cudaError_t dispatch(int in_type, int out_type, int raw, int channels, const F &f)
{
#define GIMG_CONV_C(Tin, Tout, RAW)                                                         \
    switch (channels) {                                                                     \
    case 1: return f.template operator()<Tin, Tout, 1, RAW>();                              \
    case 2: return f.template operator()<Tin, Tout, 2, RAW>();                              \
    case 3: return f.template operator()<Tin, Tout, 3, RAW>();                              \
    case 4: return f.template operator()<Tin, Tout, 4, RAW>();                              \
    default: return cudaErrorInvalidValue;                                                  \
    }
    if (raw) {
        if (out_type != GIMG_CUDA_F32)
            return cudaErrorInvalidValue;
        if (in_type == GIMG_CUDA_U8) GIMG_CONV_C(uint8_t, float, true)
        if (in_type == GIMG_CUDA_U16) GIMG_CONV_C(uint16_t, float, true)
        if (in_type == GIMG_CUDA_F32) GIMG_CONV_C(float, float, true)
        return cudaErrorInvalidValue;
    }
    if (in_type == out_type) {
        if (in_type == GIMG_CUDA_U8) GIMG_CONV_C(uint8_t, uint8_t, false)
        if (in_type == GIMG_CUDA_U16) GIMG_CONV_C(uint16_t, uint16_t, false)
        if (in_type == GIMG_CUDA_F32) GIMG_CONV_C(float, float, false)
    } else if (in_type == GIMG_CUDA_F32) {
        if (out_type == GIMG_CUDA_U8) GIMG_CONV_C(float, uint8_t, false)
        if (out_type == GIMG_CUDA_U16) GIMG_CONV_C(float, uint16_t, false)
    }
    return cudaErrorInvalidValue;
#undef GIMG_CONV_C
}

bool plane_ok(const gimg_cuda_plane &p)
{
    return p.data && p.pitch % 16 == 0 && (uintptr_t)p.data % 16 == 0 &&
           (p.type == GIMG_CUDA_U8 || p.type == GIMG_CUDA_U16 || p.type == GIMG_CUDA_F32);
}

/* The epilogue to use (raw without one); alpha_src always points at a
 * plane so that address arithmetic on it is defined. */
Epi epi_or_raw(const gimg_cuda_epilogue *epi, const gimg_cuda_plane &out)
{
    Epi e = {};
    if (epi)
        e = *epi;
    else
        e.raw = 1;
    if (!e.alpha_src.data) {
        e.keep_alpha = 0;
        e.alpha_src = out;
    }
    return e;
}

/* The launch arguments, and a template call operator per instantiation. */
struct conv_args {
    gimg_cuda_plane in, out;
    int W, H, kw, kh, ax, ay, border, tap_offset;
    const float *d_taps;
    Epi e;
    cudaStream_t stream;
};

struct dense_op : conv_args {
    template <typename Tin, typename Tout, int C, bool RAW> cudaError_t operator()() const
    {
        if constexpr (RAW && sizeof(Tin) == 4) {
            if (d_taps)
                return launch_dense<Tin, Tout, C, RAW, false>(in, out, W, H, kw, kh, ax, ay, border,
                                                              tap_offset, d_taps, e, stream);
        }
        if (d_taps)
            return cudaErrorInvalidValue; /* global taps: float to raw float only */
        /* Small odd kernels, centred: the interleaved path (same type in
         * and out, or float to raw float, the combinations single kernels
         * and alpha-premultiplied ones use). */
        if constexpr (sizeof(Tin) == 1 && std::is_same<Tin, Tout>::value && !RAW) {
            if (kw == kh && (kw == 3 || kw == 5) && ax == kw / 2 && ay == kh / 2 && !e.keep_alpha)
                return kw == 3 ? launch_dense_rw<C, 3>(in, out, W, H, border, tap_offset, e, stream)
                               : launch_dense_rw<C, 5>(in, out, W, H, border, tap_offset, e, stream);
        }
        if constexpr ((std::is_same<Tin, Tout>::value && !RAW) || (sizeof(Tin) == 4 && RAW)) {
            if (kw % 2 == 1 && kw <= 7 && ax == kw / 2 && dense_il_smem<Tin, C, 7>(kh) <= kIlSmemMax) {
                switch (kw) {
                case 1: return launch_dense_il<Tin, Tout, C, 1, RAW>(in, out, W, H, kh, ay, border, tap_offset, e, stream);
                case 3: return launch_dense_il<Tin, Tout, C, 3, RAW>(in, out, W, H, kh, ay, border, tap_offset, e, stream);
                case 5: return launch_dense_il<Tin, Tout, C, 5, RAW>(in, out, W, H, kh, ay, border, tap_offset, e, stream);
                case 7: return launch_dense_il<Tin, Tout, C, 7, RAW>(in, out, W, H, kh, ay, border, tap_offset, e, stream);
                }
            }
        }
        return launch_dense<Tin, Tout, C, RAW, true>(in, out, W, H, kw, kh, ax, ay, border,
                                                     tap_offset, nullptr, e, stream);
    }
};

/* Only the combinations lib/conv.c fuses (conv.h): a single kernel from
 * the image's type to the same type, or a chain's stage float to raw
 * float. The others (an integer type to raw float, float to an integer
 * type) were 16 of the file's 155 kernels and 15% of its compile time
 * (104 -> 89 s for one architecture), for no caller. */
struct sep_op : conv_args {
    template <typename Tin, typename Tout, int C, bool RAW> cudaError_t operator()() const
    {
        if constexpr ((std::is_same<Tin, Tout>::value && !RAW) || (sizeof(Tin) == 4 && RAW))
            return launch_sep<Tin, Tout, C, RAW>(in, out, W, H, kw, kh, ax, ay, border, e, stream);
        else
            return cudaErrorInvalidValue;
    }
};

} // namespace

/* What c_taps holds on each device once the copies queued so far are
 * done, by set_taps's record; NULL until the device's first copy. */
static float *h_taps_held[GIMG_CUDA_CONV_MAX_DEVICES];

extern "C" int gimg_cuda_conv_taps_held(const float *h_taps, int offset, int n)
{
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess || device < 0 ||
        device >= GIMG_CUDA_CONV_MAX_DEVICES || offset < 0 || n < 0 ||
        offset + n > GIMG_CUDA_CONV_CONST_TAPS)
        return 0;
    const float *held = h_taps_held[device];
    return held && memcmp(held + offset, h_taps, (size_t)n * sizeof(float)) == 0;
}

extern "C" cudaError_t gimg_cuda_conv_set_taps(const float *h_taps, int offset, int n,
                                               cudaStream_t stream)
{
    int device = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e != cudaSuccess)
        return e;
    if (offset < 0 || n < 0 || offset + n > GIMG_CUDA_CONV_CONST_TAPS || device < 0 ||
        device >= GIMG_CUDA_CONV_MAX_DEVICES)
        return cudaErrorInvalidValue;
    float *held = h_taps_held[device];
    if (!held) {
        held = (float *)calloc(GIMG_CUDA_CONV_CONST_TAPS, sizeof(float));
        if (!held)
            return cudaErrorMemoryAllocation;
        h_taps_held[device] = held;
    }
    e = cudaMemcpyToSymbolAsync(c_taps, h_taps, (size_t)n * sizeof(float),
                                (size_t)offset * sizeof(float), cudaMemcpyHostToDevice, stream);
    /* A failed copy leaves the taps unknown: a pattern no tap matches (a
     * NaN's bits), so the next request copies again. */
    if (e == cudaSuccess)
        memcpy(held + offset, h_taps, (size_t)n * sizeof(float));
    else
        memset(held + offset, 0xff, (size_t)n * sizeof(float));
    return e;
}

extern "C" cudaError_t gimg_cuda_conv_dense(gimg_cuda_plane in, gimg_cuda_plane out, int width,
                                            int height, int channels, int kw, int kh, int ax,
                                            int ay, int border, int tap_offset,
                                            const float *d_taps, const gimg_cuda_epilogue *epi,
                                            cudaStream_t stream)
{
    if (!plane_ok(in) || !plane_ok(out) || width < 1 || height < 1 || kw < 1 || kh < 1 ||
        tap_offset < 0 || (!d_taps && tap_offset + kw * kh > GIMG_CUDA_CONV_CONST_TAPS))
        return cudaErrorInvalidValue;
    const Epi e = epi_or_raw(epi, out);
    return dispatch(in.type, out.type, e.raw, channels,
                    dense_op{in, out, width, height, kw, kh, ax, ay, border, tap_offset, d_taps, e,
                             stream});
}

extern "C" int gimg_cuda_conv_separable_fits(int channels, int kw, int kh)
{
    constexpr size_t kSepSmemMax = 200 * 1024;
    /* The widest halo any anchor gives: all of it on one side. */
    return kw <= GIMG_CUDA_CONV_COL_OFFSET && kh <= GIMG_CUDA_CONV_COL_OFFSET &&
           channels >= 1 && channels <= 4 &&
           sep_smem_bytes(channels, kw, kh, kw - 1, 16) <= kSepSmemMax &&
           sep_smem_bytes(channels, kw, kh, kw - 1, 8) <= kSepSmemMax &&
           sep_smem_bytes(channels, kw, kh, kw - 1, 4) <= kSepSmemMax;
}

extern "C" cudaError_t gimg_cuda_conv_separable(gimg_cuda_plane in, gimg_cuda_plane out, int width,
                                                int height, int channels, int kw, int kh, int ax,
                                                int ay, int border, const gimg_cuda_epilogue *epi,
                                                cudaStream_t stream)
{
    if (!plane_ok(in) || !plane_ok(out) || width < 1 || height < 1 || kw < 1 || kh < 1 ||
        !gimg_cuda_conv_separable_fits(channels, kw, kh))
        return cudaErrorInvalidValue;
    const Epi e = epi_or_raw(epi, out);
    return dispatch(in.type, out.type, e.raw, channels,
                    sep_op{in, out, width, height, kw, kh, ax, ay, border, 0, nullptr, e, stream});
}

extern "C" cudaError_t gimg_cuda_conv_magnitude(gimg_cuda_plane in, gimg_cuda_plane out, int width,
                                                int height, int channels, int kw, int kh, int ax,
                                                int ay, int border, cudaStream_t stream)
{
    if (!plane_ok(in) || !plane_ok(out) || in.type != GIMG_CUDA_F32 || out.type != GIMG_CUDA_F32 ||
        width < 1 || height < 1 || height > 65535 || 2 * kw * kh > GIMG_CUDA_CONV_CONST_TAPS)
        return cudaErrorInvalidValue;
    dim3 grid((width + 127) / 128, height);
    magnitude_kernel<<<grid, 128, 0, stream>>>(static_cast<const unsigned char *>(in.data), in.pitch,
                                                static_cast<unsigned char *>(out.data), out.pitch,
                                                width, height, channels, kw, kh, ax, ay, border);
    return cudaGetLastError();
}

extern "C" cudaError_t gimg_cuda_conv_widen(gimg_cuda_plane in, gimg_cuda_plane out, int width,
                                            int height, int channels, int premultiply,
                                            cudaStream_t stream)
{
    if (!plane_ok(in) || !plane_ok(out) || out.type != GIMG_CUDA_F32 || width < 1 || height < 1 ||
        height > 65535)
        return cudaErrorInvalidValue;
    dim3 grid((width + 127) / 128, height);
    const unsigned char *src = static_cast<const unsigned char *>(in.data);
    unsigned char *dst = static_cast<unsigned char *>(out.data);
    if (in.type == GIMG_CUDA_U8)
        widen_kernel<uint8_t><<<grid, 128, 0, stream>>>(src, in.pitch, dst, out.pitch, width, height, channels, premultiply);
    else if (in.type == GIMG_CUDA_U16)
        widen_kernel<uint16_t><<<grid, 128, 0, stream>>>(src, in.pitch, dst, out.pitch, width, height, channels, premultiply);
    else
        widen_kernel<float><<<grid, 128, 0, stream>>>(src, in.pitch, dst, out.pitch, width, height, channels, premultiply);
    return cudaGetLastError();
}

extern "C" cudaError_t gimg_cuda_conv_narrow(gimg_cuda_plane in, gimg_cuda_plane out, int width,
                                             int height, int channels, int unpremultiply,
                                             float alpha_unit, const gimg_cuda_epilogue *epi,
                                             cudaStream_t stream)
{
    if (!plane_ok(in) || !plane_ok(out) || in.type != GIMG_CUDA_F32 || width < 1 || height < 1 ||
        height > 65535 || !epi)
        return cudaErrorInvalidValue;
    Epi e = epi_or_raw(epi, out);
    e.raw = 0;
    dim3 grid((width + 127) / 128, height);
    const unsigned char *src = static_cast<const unsigned char *>(in.data);
    unsigned char *dst = static_cast<unsigned char *>(out.data);
    if (out.type == GIMG_CUDA_U8)
        narrow_kernel<uint8_t><<<grid, 128, 0, stream>>>(src, in.pitch, dst, out.pitch, width, height, channels, unpremultiply, alpha_unit, e);
    else if (out.type == GIMG_CUDA_U16)
        narrow_kernel<uint16_t><<<grid, 128, 0, stream>>>(src, in.pitch, dst, out.pitch, width, height, channels, unpremultiply, alpha_unit, e);
    else
        narrow_kernel<float><<<grid, 128, 0, stream>>>(src, in.pitch, dst, out.pitch, width, height, channels, unpremultiply, alpha_unit, e);
    return cudaGetLastError();
}
