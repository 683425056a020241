/*
 * stats.cu — one-pass reductions for gstats: the moments of every channel
 * of an image (count, min, max, sum and sum of squares — for float, of
 * v - K, K a shift per channel that the host passes; NaN and infinities
 * counted apart for float) and the comparison of two images (differing
 * samples, max |a - b|, sum of |a - b| and of (a - b)^2), for 1-4
 * interleaved channels of 8/16-bit or float samples.
 *
 * Layout: rows of width * channels samples at a pitch that is a multiple of
 * 16 bytes, each row's allocation reaching its pitch (gimg's device
 * images), so the kernel reads whole aligned 16-byte words; the bytes of a
 * row's last word past the row are masked out.
 *
 * Work: each byte is read once (N bytes, N = width * height * pixel bytes;
 * 2N for a comparison) and nothing but a few hundred bytes of partial sums
 * is written, so the ceiling is the device's read bandwidth: about the same
 * as a device-to-device copy of N bytes (which moves 2N). Target: >= 80%
 * of that copy's rate, counting the bytes read. Arithmetic per 16-byte
 * word: 8-bit, 2-3 dp4a per channel per 4 bytes and a SIMD min and max
 * (about 3 integer instructions per byte); 16-bit, a 32-bit add and a
 * 64-bit multiply-add per sample; float, a double subtract (of the
 * shift), a double add and a double FMA per sample. Measured on an H100 at 8192x8192 (make bench), moments of every
 * channel in one pass, as a fraction of the copy's rate: gray8 0.74, rgb8
 * 0.83, rgba8 0.80, gray16 0.89, rgb16 0.92, rgba16 0.93 — 0.95-1.13x
 * CUB's DeviceReduce::Sum of the same bytes (which computes one sum, not
 * 4 statistics per channel), 2.3x nppiMean_StdDev_8u_C1R. gray8 misses
 * the target: its 64 MB take 36 us, and the start and drain of a kernel
 * that short cost what they cost (CUB's plain sum reaches 0.66 there).

 * Exactness: integer sums are exact, so their order does not matter; the
 * moments' mean and stddev are computed on the host from them by one
 * function (lib/stats.c), so GPU and CPU give identical results. Float
 * sums are of d = v - K and d^2, K the channel's shift (the first finite
 * sample of the channel in row-major order, found on the host by
 * gimg_moments_shift and passed in, so both backends sum the same d:
 * deviations of the data's own size, so that the host's variance,
 * S2/n - (S1/n)^2, does not cancel as sum v^2 - sum v * mean does for data
 * far from zero). They use double (d rounded once, as on the CPU; each
 * add round-to-nearest; d^2 added by one FMA, where the CPU rounds d*d and
 * then the add) in a fixed order: the grid is one full wave of the device (its SM count times the
 * blocks that fit in one SM), every warp takes the same units every run, warps and blocks are combined
 * by the same shuffle tree, and the last block to finish combines the
 * blocks' partial results in block order. No float atomics; the only
 * atomic is the integer ticket that finds the last block (grid_reduce.cuh,
 * shared with ssim.cu). The order
 * differs from the CPU's (and may differ between GPU models, whose waves
 * differ), so float sums agree with the CPU's to about 1e-13 relative (the
 * tests allow 1e-12), and repeat bit for bit on one GPU.
 *
 * Why it is written this way
 *  - A warp takes a "unit": 32 * M consecutive 16-byte words of one row,
 *    lane l loading words l, l + 32, ..., l + 32(M - 1): M independent
 *    16-byte loads in flight per thread, every load instruction a fully
 *    coalesced 512 bytes. Units are handed out grid-stride over one wave
 *    of blocks. M = 8 for the moments (6 for RGB) was tried against 4 (3),
 *    predicting more bytes in flight would lift gray8 from 0.76: it did
 *    not (0.74-0.93 either way, within the runs' spread), nor did grids of
 *    264 to 2048 blocks instead of one wave; the version kept is the one
 *    the differential tests and sanitizers ran on.
 *  - Channels without branches: sample k of word w (counting from the row
 *    start) is channel (w * 16/S + k) mod C. With M a multiple of 3 for
 *    RGB (units of 32M words, a multiple of 3), a unit starts on channel 0, so sample k of load m of lane l is channel (p0 + s) mod C
 *    with p0 = (16/S * l) mod C, fixed per thread, and s = (32 * 16/S * m
 *    + k) mod C, known at compile time. The thread accumulates in "slots"
 *    s and renames slots to channels once, at the end.
 *  - 8-bit: the per-slot sums are dp4a dot products of the word with a
 *    mask of the slot's bytes (sum) or with itself masked (sum of squares);
 *    min and max are per-byte SIMD (vminu4/vmaxu4) on whole words, one
 *    accumulator per byte pattern. 32-bit unit sums flush into 64-bit ones.
 *    The comparison works on vabsdiffu4 of the two words the same way.
 *  - The block reduces with warp shuffles, then one warp over the warps'
 *    results in shared memory; the partials go to global memory field by
 *    field (coalesced for the last block's reads).
 *  - Median, percentiles and entropy are not computed here: for 8/16-bit
 *    images they come from the exact histogram (kernels/histogram.cu, one
 *    bin per value), and so do the moments then, without this pass
 *    (lib/stats.c's gpu_pass); for float images from a sorted
 *    copy of the finite samples, sorted on the CPU (lib/stats.c) on every
 *    backend.
 */
#include "stats.h"
#include "grid_reduce.cuh"
#include "launch.cuh"

#include <math.h>
#include <stdint.h>

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxBlocks = 4096;
constexpr int kMaxFields = 28;       /* 4 channels x 7 fields (float moments) */

/* The float moments' shift per channel (the kernel's argument). */
struct Shift {
    double k[4];
};

enum Kind { ADDU, ADDD, MIN, MAX };

__device__ __forceinline__ uint64_t identity(Kind k)
{
    return k == MIN ? (uint64_t)__double_as_longlong(INFINITY)
         : k == MAX ? (uint64_t)__double_as_longlong(-INFINITY) : 0ull;
}

__device__ __forceinline__ uint64_t combine(Kind k, uint64_t a, uint64_t b)
{
    const double x = __longlong_as_double((long long)a), y = __longlong_as_double((long long)b);
    switch (k) {
    case ADDU: return a + b;
    case ADDD: return (uint64_t)__double_as_longlong(__dadd_rn(x, y));
    case MIN: return y < x ? b : a;
    default: return y > x ? b : a;
    }
}

__device__ __forceinline__ uint64_t as_field(double d) { return (uint64_t)__double_as_longlong(d); }
__device__ __forceinline__ double as_double(uint64_t u) { return __longlong_as_double((long long)u); }

/* Valid-byte mask of 32-bit word j of a 16-byte word that holds nbytes. */
__device__ __forceinline__ uint32_t valid_mask(int nbytes, int j)
{
    const int vb = nbytes - 4 * j;
    return vb >= 4 ? 0xffffffffu : vb <= 0 ? 0u : (1u << (8 * vb)) - 1u;
}

/* The 0x01 byte mask of the bytes of a 32-bit word whose first byte is in
 * slot t that belong to slot s (C channels). */
__host__ __device__ constexpr uint32_t slot_ones(int t, int s, int C)
{
    return ((t + 0) % C == s ? 0x01u : 0u) | ((t + 1) % C == s ? 0x0100u : 0u) |
           ((t + 2) % C == s ? 0x010000u : 0u) | ((t + 3) % C == s ? 0x01000000u : 0u);
}

/* ------------------------------------------------------------- moments */

template <int S, int C> struct MomentsOp {
    static constexpr bool FLT = S == 4;
    static constexpr int NF = FLT ? 7 : 4;
    static constexpr int N_IN = 1;
    /* 16-byte loads per lane per unit (a multiple of 3 for RGB). */
    static constexpr int M = C == 3 ? 6 : 8;
    __device__ static constexpr Kind kind(int k)
    {
        return FLT ? (k < 2 ? ADDD : k == 2 ? MIN : k == 3 ? MAX : ADDU)
                   : (k < 2 ? ADDU : k == 2 ? MIN : MAX);
    }

    /* Per slot. Integer: 64-bit totals, 32-bit unit sums, packed min/max
     * by byte pattern. Float: everything per slot. */
    uint64_t sum[C], sq[C];
    uint32_t usum[C], usq[C];
    uint32_t pmin[C], pmax[C];
    double fsum[C], fsq[C], k_[C];
    float fmin_[C], fmax_[C];
    uint64_t cnt[C], nan_[C], inf_[C];

    /* p0: slot s is channel (p0 + s) % C; its sums are about that
     * channel's shift. */
    __device__ void init(int p0, const Shift &shift)
    {
#pragma unroll
        for (int s = 0; s < C; s++) {
            k_[s] = 0;
#pragma unroll
            for (int c = 0; c < C; c++)
                if (FLT && (p0 + s) % C == c)
                    k_[s] = shift.k[c];
            sum[s] = sq[s] = 0;
            pmin[s] = 0xffffffffu;
            pmax[s] = 0;
            fsum[s] = fsq[s] = 0;
            fmin_[s] = INFINITY;
            fmax_[s] = -INFINITY;
            cnt[s] = nan_[s] = inf_[s] = 0;
        }
    }
    __device__ void unit_begin()
    {
#pragma unroll
        for (int s = 0; s < C; s++)
            usum[s] = usq[s] = 0;
    }
    __device__ void unit_end()
    {
#pragma unroll
        for (int s = 0; s < C; s++) {
            sum[s] += usum[s];
            if (S == 1)
                sq[s] += usq[s];
        }
    }

    /* Load m's word (v; vb unused) holding nbytes valid bytes. */
    template <bool FULL> __device__ __forceinline__ void word(int m, uint4 v, uint4, int nbytes)
    {
        const uint32_t x4[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int j = 0; j < 4; j++) {
            uint32_t x = x4[j];
            if constexpr (S == 1) {
                uint32_t xmin = x;
                if (!FULL) {
                    const uint32_t vm = valid_mask(nbytes, j);
                    x &= vm;
                    xmin = x | ~vm;
                }
                const int t = (512 * m + 4 * j) % C;
#pragma unroll
                for (int s = 0; s < C; s++) {
                    const uint32_t ones = slot_ones(t, s, C);
                    if (ones) {
                        usum[s] = __dp4a(x, ones, usum[s]);
                        usq[s] = __dp4a(x & (ones * 0xffu), x, usq[s]);
                    }
                }
                pmin[t] = __vminu4(pmin[t], xmin);
                pmax[t] = __vmaxu4(pmax[t], x);
            } else if constexpr (S == 2) {
                uint32_t xmin = x;
                if (!FULL) {
                    const uint32_t vm = valid_mask(nbytes, j);
                    x &= vm;
                    xmin = x | ~vm;
                }
                const int t = (256 * m + 2 * j) % C, t1 = (t + 1) % C;
                const uint32_t lo = x & 0xffffu, hi = x >> 16;
                usum[t] += lo;
                usum[t1] += hi;
                sq[t] += (uint64_t)lo * lo;
                sq[t1] += (uint64_t)hi * hi;
                pmin[t] = __vminu2(pmin[t], xmin);
                pmax[t] = __vmaxu2(pmax[t], x);
            } else {
                const int s = (128 * m + j) % C;
                const float f = __uint_as_float(x);
                const bool valid = FULL || 4 * j < nbytes;
                const bool fin = valid && isfinite(f);
                cnt[s] += fin;
                nan_[s] += valid && isnan(f);
                inf_[s] += valid && isinf(f);
                const double d = fin ? __dsub_rn((double)f, k_[s]) : 0.0;
                fsum[s] = __dadd_rn(fsum[s], d);
                fsq[s] = __fma_rn(d, d, fsq[s]);
                if (fin) {
                    fmin_[s] = fminf(fmin_[s], f);
                    fmax_[s] = fmaxf(fmax_[s], f);
                }
            }
        }
    }

    /* The thread's fields, channel by channel: slot s is channel (p0 + s) % C. */
    __device__ void fields(int p0, uint64_t (&f)[C * NF]) const
    {
        uint32_t mn[C], mx[C];
#pragma unroll
        for (int s = 0; s < C; s++) {
            mn[s] = S == 1 ? 0xffu : 0xffffu;
            mx[s] = 0;
        }
        if constexpr (!FLT) {
            constexpr int LANES = S == 1 ? 4 : 2, BITS = 8 * S;
            constexpr uint32_t MASK = S == 1 ? 0xffu : 0xffffu;
#pragma unroll
            for (int t = 0; t < C; t++)
#pragma unroll
                for (int b = 0; b < LANES; b++) {
                    const int s = (t + b) % C;
                    mn[s] = min(mn[s], (pmin[t] >> (BITS * b)) & MASK);
                    mx[s] = max(mx[s], (pmax[t] >> (BITS * b)) & MASK);
                }
        }
#pragma unroll
        for (int c = 0; c < C; c++)
#pragma unroll
            for (int s = 0; s < C; s++)
                if ((p0 + s) % C == c) {
                    uint64_t *o = f + c * NF;
                    if constexpr (FLT) {
                        o[0] = as_field(fsum[s]);
                        o[1] = as_field(fsq[s]);
                        o[2] = as_field((double)fmin_[s]);
                        o[3] = as_field((double)fmax_[s]);
                        o[4] = cnt[s];
                        o[5] = nan_[s];
                        o[6] = inf_[s];
                    } else {
                        o[0] = sum[s];
                        o[1] = sq[s];
                        o[2] = as_field((double)mn[s]);
                        o[3] = as_field((double)mx[s]);
                    }
                }
    }

    /* The reduced fields to the output struct, every field written. */
    __device__ static void write(const uint64_t *f, int W, int H, const Shift &shift,
                                 gimg_moments *out)
    {
        for (int c = 0; c < 4; c++) {
            const uint64_t *o = f + c * NF;
            const bool here = c < C;
            out->count[c] = !here ? 0 : FLT ? o[4] : (uint64_t)W * (uint64_t)H;
            out->nan[c] = here && FLT ? o[5] : 0;
            out->inf[c] = here && FLT ? o[6] : 0;
            out->isum[c] = here && !FLT ? o[0] : 0;
            out->isumsq[c] = here && !FLT ? o[1] : 0;
            out->shift[c] = here && FLT ? shift.k[c] : 0.0;
            out->fsum[c] = here && FLT ? as_double(o[0]) : 0.0;
            out->fsumsq[c] = here && FLT ? as_double(o[1]) : 0.0;
            out->min[c] = here ? as_double(o[2]) : INFINITY;
            out->max[c] = here ? as_double(o[3]) : -INFINITY;
        }
    }
    typedef gimg_moments out_t;
};

/* ---------------------------------------------------------- comparison */

template <int S, int C> struct DiffOp {
    static constexpr bool FLT = S == 4;
    static constexpr int NF = FLT ? 5 : 4;
    static constexpr int N_IN = 2;
    /* Two images: 4 (3) loads of each, the same bytes in flight. */
    static constexpr int M = C == 3 ? 3 : 4;
    /* Integer: differing, sum |d|, sum d^2, max |d|. Float: count,
     * differing, sum |d|, sum d^2, max |d|. */
    __device__ static constexpr Kind kind(int k)
    {
        return FLT ? (k < 2 ? ADDU : k < 4 ? ADDD : MAX) : (k < 3 ? ADDU : MAX);
    }

    uint64_t dif[C], sum[C], sq[C];
    uint32_t udif[C], usum[C], usq[C];
    uint32_t pmax[C];
    uint64_t cnt[C];
    double fsum[C], fsq[C], fmax_[C];

    __device__ void init(int, const Shift &)
    {
#pragma unroll
        for (int s = 0; s < C; s++) {
            dif[s] = sum[s] = sq[s] = cnt[s] = 0;
            pmax[s] = 0;
            fsum[s] = fsq[s] = fmax_[s] = 0;
        }
    }
    __device__ void unit_begin()
    {
#pragma unroll
        for (int s = 0; s < C; s++)
            udif[s] = usum[s] = usq[s] = 0;
    }
    __device__ void unit_end()
    {
#pragma unroll
        for (int s = 0; s < C; s++) {
            dif[s] += udif[s];
            sum[s] += usum[s];
            if (S == 1)
                sq[s] += usq[s];
        }
    }

    template <bool FULL> __device__ __forceinline__ void word(int m, uint4 va, uint4 vb, int nbytes)
    {
        const uint32_t a4[4] = {va.x, va.y, va.z, va.w}, b4[4] = {vb.x, vb.y, vb.z, vb.w};
#pragma unroll
        for (int j = 0; j < 4; j++) {
            if constexpr (S == 1) {
                uint32_t ad = __vabsdiffu4(a4[j], b4[j]);
                if (!FULL)
                    ad &= valid_mask(nbytes, j);
                const uint32_t ne = __vcmpne4(ad, 0u);
                const int t = (512 * m + 4 * j) % C;
#pragma unroll
                for (int s = 0; s < C; s++) {
                    const uint32_t ones = slot_ones(t, s, C);
                    if (ones) {
                        udif[s] += __popc(ne & ones);
                        usum[s] = __dp4a(ad, ones, usum[s]);
                        usq[s] = __dp4a(ad & (ones * 0xffu), ad, usq[s]);
                    }
                }
                pmax[t] = __vmaxu4(pmax[t], ad);
            } else if constexpr (S == 2) {
                uint32_t ad = __vabsdiffu2(a4[j], b4[j]);
                if (!FULL)
                    ad &= valid_mask(nbytes, j);
                const int t = (256 * m + 2 * j) % C, t1 = (t + 1) % C;
                const uint32_t lo = ad & 0xffffu, hi = ad >> 16;
                udif[t] += lo != 0;
                udif[t1] += hi != 0;
                usum[t] += lo;
                usum[t1] += hi;
                sq[t] += (uint64_t)lo * lo;
                sq[t1] += (uint64_t)hi * hi;
                pmax[t] = __vmaxu2(pmax[t], ad);
            } else {
                const int s = (128 * m + j) % C;
                const float fa = __uint_as_float(a4[j]), fb = __uint_as_float(b4[j]);
                const bool valid = FULL || 4 * j < nbytes;
                udif[s] += valid && !(fa == fb || (isnan(fa) && isnan(fb)));
                const bool both = valid && isfinite(fa) && isfinite(fb);
                const double d = both ? fabs(__dsub_rn((double)fa, (double)fb)) : 0.0;
                cnt[s] += both;
                fsum[s] = __dadd_rn(fsum[s], d);
                fsq[s] = __dadd_rn(fsq[s], __dmul_rn(d, d));
                fmax_[s] = fmax(fmax_[s], d);
            }
        }
    }

    __device__ void fields(int p0, uint64_t (&f)[C * NF]) const
    {
        uint32_t mx[C];
#pragma unroll
        for (int s = 0; s < C; s++)
            mx[s] = 0;
        if constexpr (!FLT) {
            constexpr int LANES = S == 1 ? 4 : 2, BITS = 8 * S;
            constexpr uint32_t MASK = S == 1 ? 0xffu : 0xffffu;
#pragma unroll
            for (int t = 0; t < C; t++)
#pragma unroll
                for (int b = 0; b < LANES; b++)
                    mx[(t + b) % C] = max(mx[(t + b) % C], (pmax[t] >> (BITS * b)) & MASK);
        }
#pragma unroll
        for (int c = 0; c < C; c++)
#pragma unroll
            for (int s = 0; s < C; s++)
                if ((p0 + s) % C == c) {
                    uint64_t *o = f + c * NF;
                    if constexpr (FLT) {
                        o[0] = cnt[s];
                        o[1] = dif[s];
                        o[2] = as_field(fsum[s]);
                        o[3] = as_field(fsq[s]);
                        o[4] = as_field(fmax_[s]);
                    } else {
                        o[0] = dif[s];
                        o[1] = sum[s];
                        o[2] = sq[s];
                        o[3] = as_field((double)mx[s]);
                    }
                }
    }

    __device__ static void write(const uint64_t *f, int W, int H, const Shift &,
                                 gimg_diff_sums *out)
    {
        for (int c = 0; c < 4; c++) {
            const uint64_t *o = f + c * NF;
            const bool here = c < C;
            out->count[c] = !here ? 0 : FLT ? o[0] : (uint64_t)W * (uint64_t)H;
            out->differing[c] = !here ? 0 : FLT ? o[1] : o[0];
            out->isum_abs[c] = here && !FLT ? o[1] : 0;
            out->isum_sq[c] = here && !FLT ? o[2] : 0;
            out->fsum_abs[c] = here && FLT ? as_double(o[2]) : 0.0;
            out->fsum_sq[c] = here && FLT ? as_double(o[3]) : 0.0;
            /* max(., 0): a channel with no finite pair reports 0, as the CPU does. */
            out->max_abs[c] = here ? fmax(as_double(o[FLT ? 4 : 3]), 0.0) : 0.0;
        }
    }
    typedef gimg_diff_sums out_t;
};

/* ------------------------------------------------------------ the pass */

/* Reduces v over the block into thread 0 (fixed shuffle tree, then one
 * warp over the warps' results). */
template <class Op, int F> __device__ void block_reduce(uint64_t (&v)[F], uint64_t *s_red)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int off = 16; off; off >>= 1)
#pragma unroll
        for (int f = 0; f < F; f++)
            v[f] = combine(Op::kind(f % Op::NF), v[f], __shfl_down_sync(0xffffffffu, v[f], off));
    if (lane == 0)
#pragma unroll
        for (int f = 0; f < F; f++)
            s_red[warp * F + f] = v[f];
    __syncthreads();
    if (warp == 0) {
#pragma unroll
        for (int f = 0; f < F; f++)
            v[f] = lane < kWarps ? s_red[lane * F + f] : identity(Op::kind(f % Op::NF));
#pragma unroll
        for (int off = kWarps / 2; off; off >>= 1)
#pragma unroll
            for (int f = 0; f < F; f++)
                v[f] = combine(Op::kind(f % Op::NF), v[f],
                               __shfl_down_sync(0xffffffffu, v[f], off));
    }
}

template <class Op, int S, int C, int M>
__global__ void __launch_bounds__(kThreads)
reduce_kernel(const unsigned char *__restrict__ d_a, size_t pitch_a,
              const unsigned char *__restrict__ d_b, size_t pitch_b, int W, int H,
              unsigned units_per_row, unsigned items, const Shift shift,
              unsigned char *__restrict__ d_scratch, typename Op::out_t *__restrict__ d_out)
{
    constexpr int F = C * Op::NF;
    __shared__ uint64_t s_red[kWarps * F];
    __shared__ bool s_last;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int row_bytes = W * C * S;
    const int wpr = (row_bytes + 15) / 16;

    const int p0 = (16 / S * lane) % C; /* the channel of the thread's slot 0 */
    Op acc;
    acc.init(p0, shift);
    for (unsigned item = blockIdx.x * kWarps + warp; item < items; item += gridDim.x * kWarps) {
        const unsigned row = item / units_per_row, unit = item - row * units_per_row;
        const unsigned char *pa = d_a + (size_t)row * pitch_a;
        const unsigned char *pb = Op::N_IN == 2 ? d_b + (size_t)row * pitch_b : nullptr;
        const int w0 = (int)unit * 32 * M + lane;
        uint4 va[M], vb[M];
#pragma unroll
        for (int m = 0; m < M; m++) {
            const int w = w0 + 32 * m;
            va[m] = vb[m] = make_uint4(0, 0, 0, 0);
            if (w < wpr) {
                va[m] = __ldcs(reinterpret_cast<const uint4 *>(pa + 16 * (size_t)w));
                if (Op::N_IN == 2)
                    vb[m] = __ldcs(reinterpret_cast<const uint4 *>(pb + 16 * (size_t)w));
            }
        }
        acc.unit_begin();
#pragma unroll
        for (int m = 0; m < M; m++) {
            const int rem = row_bytes - 16 * (w0 + 32 * m);
            if (rem >= 16)
                acc.template word<true>(m, va[m], vb[m], 16);
            else if (rem > 0)
                acc.template word<false>(m, va[m], vb[m], rem);
        }
        acc.unit_end();
    }

    uint64_t v[F];
    acc.fields(p0, v);
    block_reduce<Op, F>(v, s_red);

    /* The last block: every block's partials, in block order per thread. */
    if (!gimg_grid::last_block_gather(
            v, d_scratch, &s_last, [](int f) { return identity(Op::kind(f % Op::NF)); },
            [](int f, uint64_t a, uint64_t b) { return combine(Op::kind(f % Op::NF), a, b); }))
        return;
    block_reduce<Op, F>(v, s_red);
    if (threadIdx.x == 0) {
        uint64_t all[4 * kMaxFields];
        for (int f = 0; f < 4 * Op::NF; f++)
            all[f] = f < F ? v[f] : 0;
        Op::write(all, W, H, shift, d_out);
        gimg_grid::grid_reduce_done(d_scratch);
    }
}

template <template <int, int> class OpT, int S, int C>
cudaError_t launch(const void *d_a, size_t pitch_a, const void *d_b, size_t pitch_b, int W,
                   int H, const Shift &shift, void *d_scratch,
                   typename OpT<S, C>::out_t *d_out, int blocks, cudaStream_t stream)
{
    constexpr int M = OpT<S, C>::M;
    const long long row_bytes = (long long)W * C * S;
    const long long wpr = (row_bytes + 15) / 16;
    const long long upr = (wpr + 32 * M - 1) / (32 * M);
    const long long items = upr * H;
    if (row_bytes > 0x7fffffffLL || items >= 0xffffffffLL - (long long)kMaxBlocks * kWarps)
        return cudaErrorInvalidValue;
    long long g = blocks;
    if (g <= 0) {
        /* One full wave: every block resident at once, so none waits for
         * another to finish (the grid-stride loop balances the work). */
        gimg_launch::device_facts dev;
        int per_sm = 0;
        cudaError_t e = gimg_launch::current_device(&dev);
        if (!e)
            e = gimg_launch::blocks_per_sm((const void *)reduce_kernel<OpT<S, C>, S, C, M>,
                                           dev.dev, kThreads, 0, &per_sm);
        if (e)
            return e;
        g = (long long)dev.sms * (per_sm > 0 ? per_sm : 1);
    }
    if (g > kMaxBlocks)
        g = kMaxBlocks;
    if (g > (items + kWarps - 1) / kWarps)
        g = (items + kWarps - 1) / kWarps;
    reduce_kernel<OpT<S, C>, S, C, M><<<(unsigned)g, kThreads, 0, stream>>>(
        static_cast<const unsigned char *>(d_a), pitch_a,
        static_cast<const unsigned char *>(d_b), pitch_b, W, H, (unsigned)upr,
        (unsigned)items, shift, static_cast<unsigned char *>(d_scratch), d_out);
    return cudaGetLastError();
}

template <template <int, int> class OpT, typename Out>
cudaError_t dispatch(const void *d_a, size_t pitch_a, const void *d_b, size_t pitch_b, int W,
                     int H, int C, int S, const Shift &shift, void *d_scratch, Out *d_out,
                     int blocks, cudaStream_t stream)
{
    if (W < 1 || H < 1 || pitch_a % 16 || pitch_b % 16 || !d_scratch ||
        ((uintptr_t)d_a | (uintptr_t)d_b) % 16)
        return cudaErrorInvalidValue;
#define GIMG_STATS_CASE(s, T, c)                                                              \
    if (S == s && C == c)                                                                     \
        return launch<OpT, s, c>(d_a, pitch_a, d_b, pitch_b, W, H, shift, d_scratch, d_out,   \
                                 blocks, stream);
    GIMG_EACH_LAYOUT(GIMG_STATS_CASE)
#undef GIMG_STATS_CASE
    return cudaErrorInvalidValue;
}

} // namespace

extern "C" size_t gimg_cuda_stats_scratch_bytes(void)
{
    return gimg_grid::kGridPartOffset + (size_t)kMaxBlocks * kMaxFields * sizeof(uint64_t);
}

extern "C" cudaError_t gimg_cuda_moments(const void *d_in, size_t pitch_bytes, int width,
                                         int height, int channels, int sample_bytes,
                                         const double *shift, void *d_scratch,
                                         gimg_moments *d_out, int blocks, cudaStream_t stream)
{
    Shift k = {};
    if (shift && sample_bytes == 4)
        for (int c = 0; c < channels && c < 4; c++)
            k.k[c] = shift[c];
    return dispatch<MomentsOp>(d_in, pitch_bytes, d_in, pitch_bytes, width, height, channels,
                               sample_bytes, k, d_scratch, d_out, blocks, stream);
}

extern "C" cudaError_t gimg_cuda_diff(const void *d_a, size_t pitch_a, const void *d_b,
                                      size_t pitch_b, int width, int height, int channels,
                                      int sample_bytes, void *d_scratch, gimg_diff_sums *d_out,
                                      int blocks, cudaStream_t stream)
{
    return dispatch<DiffOp>(d_a, pitch_a, d_b, pitch_b, width, height, channels, sample_bytes,
                            Shift{}, d_scratch, d_out, blocks, stream);
}
