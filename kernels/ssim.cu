/*
 * ssim.cu — SSIM's sums (lib/ssim_internal.h) of two images in one fused
 * pass: per channel the sum of the SSIM map S over the centres whose 11x11
 * Gaussian window lies inside the image, for 1-4 interleaved channels of
 * 8/16-bit or float samples; one launch, no intermediate image.
 *
 * Layout: rows of width * channels samples at a pitch that is a multiple
 * of 16 bytes (gimg's device images). Like gconv's kernels it works on rows
 * as stored: away from the edges, tap j of sample s of any channel is
 * sample s + (j - 5) C of the row, so channels matter only in which
 * partial sum a centre's S joins.
 *
 * A block walks down a strip TW centre samples wide (96 for RGB, 64
 * otherwise) through a band of up to 8 chunks of 32 rows of centres (a
 * grid of one wave, the (strip, band) units handed out block-stride); for
 * each chunk:
 *  1. stages the input under the chunk's windows, both images, in shared
 *     memory as float pairs (a', b'), a' = a - off, off = floor(R / 2)
 *     (R / 2 for float), so that the squares stay small against R^2
 *     (variances are shift-invariant; the means get off back before they
 *     enter S): 42 rows for a band's first chunk, then only the 32 new
 *     ones;
 *  2. the horizontal pass over those rows: a thread takes a run of 8
 *     centres of one channel (C samples apart), loads the 18 pairs under
 *     their windows once, and forms E_h[a'], E_h[b'] (11 FMAs each), then
 *     from the same registers a'^2 + b'^2 and a'b' and their sums: the
 *     four moments in two shared planes of float pairs, 42 rows; the last
 *     10 rows of a chunk's planes are moved up to be the next chunk's
 *     first, so each input row is staged and filtered once a band;
 *  3. the vertical pass and S: a thread takes 8 rows of one column, loads
 *     the 18 pairs of each plane under them once, 11 FMAs per moment per
 *     row, and computes S (below) for its 8 centres, adding the valid ones.
 * Only vx + vy enters S, so four moments suffice (lib/ssim_internal.h).
 * Each thread keeps one channel's sum (its column's) in double across its
 * units; the block sums per channel with a fixed shuffle tree, and the
 * last block to finish (integer ticket: grid_reduce.cuh) adds the blocks'
 * sums in block order: no float atomics, so a device repeats its results
 * bit for bit.
 *
 * Bytes: each image read once from DRAM (the strips' 10 C halo samples and
 * the bands' 10 halo rows come from L2): 2 x 201 MB for an 8192x8192 RGB
 * 8-bit pair, 0.1 ms at an H100's copy rate, so the pass is bound by
 * arithmetic, not memory. Arithmetic per centre sample (RGB, FP32 issue
 * slots): staging 1.4 samples (a 4-sample load of each image, two
 * conversions a sample, a store), horizontal 1.04 x (44 FMAs + 6.75
 * products + 2.25 loads + 2 stores + the index), vertical 44 FMAs + 4.5
 * loads, S 15 (one fast division), the band's row moves and the loops:
 * 162 instructions executed a centre (Nsight Compute, below), 32 G for
 * the pair, 1.0 ms at an H100's issue rate (132 SMs x 4 x 32 lanes x
 * 1.98 GHz) if every cycle issued. Target (issue 29): <= 2x gconv's fused separable Gaussian r5
 * on one such image (0.617 ms on an H100), i.e. <= 1.23 ms.
 *
 * Measured (make bench, 8192x8192 pairs, b a noisy copy of a; ssim/blur
 * against the same run's gconv r5 blur of one image):
 *     version                         card   rgb8 ms  ssim/blur  gray8   rgb16
 *     (1) 32-row tiles, halos again   H200   2.129    3.47
 *     (2) bands of 8 chunks           H200   1.458    2.38       2.33    2.12
 *         the same                    H100   1.469    2.37       2.33    2.09
 *     (3) staging by row, fused S     H200   1.328    2.17       2.15    1.99
 * (2): 4-sample staging loads, bands of 8 chunks that keep the last 10
 * filtered rows for the next chunk, a'^2 + b'^2 as one fma. (3): a thread
 * stages one column group down the rows (no per-sample index arithmetic
 * or selects away from the right edge), S in 15 fused instructions
 * without the test that made identical windows exactly 1 (the library
 * does that now: see ssim_of), the rows' validity tested once per run.
 * Nsight Compute (rgb8, H200), (2) -> (3): instructions executed per
 * centre 184 -> 162 (FFMA 88 -> 91, FMUL 22 -> 18, integer and control
 * ~40 -> ~30), 77.6% -> 75.5% of the schedulers' cycles issuing, 22 of
 * 24 warps an SM active, DRAM under 5% busy: bound by the instruction
 * count. The target is still missed by 8%: at this IPC 2.0x needs ~150
 * instructions a centre, and the 11-tap passes of the four moments alone
 * are 88 FFMAs plus 8 FMULs (first taps) plus ~15 for S. Candidates not
 * tried: staging the next chunk during the vertical pass (s_in is free
 * then; hides the loads' latency, costs a barrier for the planes' row
 * move); runs of 16 centres filtered one output at a time (products and
 * loads per centre 6.75 + 2.25 -> 4.9 + 1.6, within 80 registers); the
 * vertical pass on tensor cores (3xTF32 for FP32 accuracy).
 *
 * Shared memory: ~2000 128-byte wavefronts a chunk against ~3400 issue
 * cycles; the horizontal pass's lanes step down rows, the vertical pass's
 * along them, with odd row strides, so neither meets bank conflicts; the
 * staging stores of a lane's 4 consecutive pairs meet 4-way conflicts
 * (shared memory has the room).
 *
 * Accuracy: float throughout, but for the sums of S (double from each
 * thread's 8 centres on). The variance terms cancel: E[a'^2 + b'^2] and
 * (E a')^2 carry float's relative error of ~6e-8 of (R/2)^2, against C2 =
 * (0.03 R)^2, so one centre's S may be off by ~3e-5 in a flat window; over
 * many centres the rounding errors mostly cancel. Against the CPU's double
 * reference: per channel SSIM within 5e-5 absolute (tests/gpudiff_ssim.c
 * tests that; the largest difference it met was 7.2e-6, on an H200; the
 * 8192x8192 pairs of make bench differ by at most 3.5e-8). Identical
 * windows give S within a few ulps of 1, not exactly 1 (S's fused
 * arithmetic, ssim_of); gimg_compare reports a channel with no differing
 * sample as exactly 1 itself, on every backend. The sums' order differs from the CPU's, and
 * between GPU models (their waves differ), never between runs on one
 * device (tested).
 *
 * Devices whose blocks cannot opt in to the wide tiles' shared memory
 * (Turing: 64 KiB) take tiles half as wide: the same code.
 */
#include "ssim.h"
#include "grid_reduce.cuh"
#include "launch.cuh"

#include <math.h>
#include <stdint.h>

namespace {

constexpr int kTH = 32;               /* rows of centres a tile */
constexpr int kRH = kTH + 2 * GIMG_SSIM_RADIUS; /* staged rows */
constexpr int kRun = 8;               /* centres a thread filters in a pass */
constexpr int kWin = kRun + GIMG_SSIM_TAPS - 1; /* samples under their windows */
/* A block walks down a band of this many chunks of kTH rows of centres,
 * keeping the last 10 filtered rows of a chunk for the next. */
constexpr int kBandChunks = 8;
constexpr int kBandRows = kBandChunks * kTH;
constexpr int kMaxBlocks = 4096;

/* A tile's shape: TW centre samples wide (a multiple of kRun * C, so a
 * run is whole and a column's channel fixed), its staged row LS samples,
 * row strides odd in float pairs (bank-conflict-free down rows). */
template <int C, int TW> struct Shape {
    static_assert(TW % (kRun * C) == 0, "whole runs");
    static constexpr int LS = (TW + 2 * GIMG_SSIM_RADIUS * C + 3) / 4 * 4; /* 4-sample groups */
    static constexpr int LSP = LS | 1;
    static constexpr int TWP = TW | 1;
    static constexpr int THREADS = TW * (kTH / kRun); /* vertical: a column x 8 rows each */
    static constexpr int MIN_BLOCKS = 768 / THREADS;  /* <= 85 registers a thread */
    static constexpr int RUNS = TW / kRun;
    static constexpr size_t SMEM = (size_t)(kRH * LSP + 2 * kRH * TWP) * sizeof(float2);
};
/* The wide tiles (96 or 64 samples) and the narrow ones (48 or 32). */
template <int C> constexpr int wide_tw() { return C == 3 ? 96 : 64; }
template <int C> constexpr int narrow_tw() { return C == 3 ? 48 : 32; }

/* The kernel's constants: the 11 taps in float, the centring offset (and
 * 2^23 + off for the integer conversion), C1 and C2 in the samples' units. */
struct Params {
    float g[GIMG_SSIM_TAPS];
    float off, bias, c1, c2;
};

/* o[k] = sum_j g[j] v[k + j], both halves of each pair, taps in order
 * (the first a product, then fused multiply-adds). */
__device__ __forceinline__ void filter(float2 (&o)[kRun], const float2 (&v)[kWin], const Params &p)
{
#pragma unroll
    for (int k = 0; k < kRun; k++)
        o[k] = make_float2(__fmul_rn(p.g[0], v[k].x), __fmul_rn(p.g[0], v[k].y));
#pragma unroll
    for (int j = 1; j < GIMG_SSIM_TAPS; j++)
#pragma unroll
        for (int k = 0; k < kRun; k++) {
            o[k].x = __fmaf_rn(p.g[j], v[k + j].x, o[k].x);
            o[k].y = __fmaf_rn(p.g[j], v[k + j].y, o[k].y);
        }
}

/* Four consecutive samples as loaded: one 4-, 8- or 16-byte word. */
template <typename T> struct Quad;
template <> struct Quad<uint8_t> { union { uint32_t u; uint8_t t[4]; }; };
template <> struct Quad<uint16_t> { union { uint2 u; uint16_t t[4]; }; };
template <> struct Quad<float> { union { uint4 u; float t[4]; }; };

/* The four samples minus off, exactly for 8/16-bit: each value as the
 * low mantissa bits of 2^23, minus 2^23 + off (a byte permutation and a
 * subtract). */
__device__ __forceinline__ void centred4(const Quad<uint8_t> &q, const Params &p, float (&f)[4])
{
#pragma unroll
    for (int j = 0; j < 4; j++)
        f[j] = __fsub_rn(__uint_as_float(__byte_perm(q.u, 0x4B000000u, 0x7540u + j)), p.bias);
}
__device__ __forceinline__ void centred4(const Quad<uint16_t> &q, const Params &p, float (&f)[4])
{
    f[0] = __fsub_rn(__uint_as_float(__byte_perm(q.u.x, 0x4B000000u, 0x7410u)), p.bias);
    f[1] = __fsub_rn(__uint_as_float(__byte_perm(q.u.x, 0x4B000000u, 0x7432u)), p.bias);
    f[2] = __fsub_rn(__uint_as_float(__byte_perm(q.u.y, 0x4B000000u, 0x7410u)), p.bias);
    f[3] = __fsub_rn(__uint_as_float(__byte_perm(q.u.y, 0x4B000000u, 0x7432u)), p.bias);
}
__device__ __forceinline__ void centred4(const Quad<float> &q, const Params &p, float (&f)[4])
{
#pragma unroll
    for (int j = 0; j < 4; j++)
        f[j] = __fsub_rn(q.t[j], p.off);
}

/* Stage 1: input rows [y, y + rows) x samples [xs, xs + LS) of both images
 * as centred float pairs into s_in's rows [0, rows); outside the image
 * (the last tiles' right and lower edges, never under a valid centre's
 * window) 0. A thread keeps one group of 4 samples of a row (one 4-16
 * byte load per image; lanes on consecutive groups: coalesced) and goes
 * down the rows RPP at a time, 4 rows' loads in flight; only the groups
 * that cross the row's end check their samples one by one, so the rest
 * carry no index arithmetic or selects but the row pointers' steps. (The
 * stores of a group's 4 pairs meet 4-way bank conflicts; shared memory
 * has the room.) */
template <typename T, int C, int TW>
__device__ __forceinline__ void stage(float2 *s_in, int rows, const unsigned char *d_a,
                                      size_t pitch_a, const unsigned char *d_b, size_t pitch_b,
                                      int n, int H, int xs, int y, const Params &p)
{
    typedef Shape<C, TW> S;
    constexpr int GPR = S::LS / 4, RPP = S::THREADS / GPR, B = 4; /* groups a row; rows a step */
    const int gx = threadIdx.x % GPR, r0 = threadIdx.x / GPR;
    if (r0 >= RPP)
        return;
    const int x = xs + 4 * gx;
    const int rows_in = min(rows, H - y); /* rows inside the image */
    float2 *dst = s_in + r0 * S::LSP + 4 * gx;
    const unsigned char *ra = d_a + (size_t)(y + r0) * pitch_a + (size_t)x * sizeof(T);
    const unsigned char *rb = d_b + (size_t)(y + r0) * pitch_b + (size_t)x * sizeof(T);
    const size_t step_a = (size_t)RPP * pitch_a, step_b = (size_t)RPP * pitch_b;
    typedef decltype(Quad<T>::u) word;
    if (x + 4 <= n) {
        for (int r = r0; r < rows_in; r += B * RPP) {
            Quad<T> qa[B], qb[B];
#pragma unroll
            for (int k = 0; k < B; k++)
                if (r + k * RPP < rows_in) {
                    qa[k].u = *reinterpret_cast<const word *>(ra + k * step_a);
                    qb[k].u = *reinterpret_cast<const word *>(rb + k * step_b);
                }
#pragma unroll
            for (int k = 0; k < B; k++)
                if (r + k * RPP < rows_in) {
                    float fa[4], fb[4];
                    centred4(qa[k], p, fa);
                    centred4(qb[k], p, fb);
                    float2 *d = dst + k * RPP * S::LSP;
#pragma unroll
                    for (int j = 0; j < 4; j++)
                        d[j] = make_float2(fa[j], fb[j]);
                }
            ra += B * step_a;
            rb += B * step_b;
            dst += B * RPP * S::LSP;
        }
    } else {
        /* The group crossing the row's end (or past it): sample by sample. */
        for (int r = r0; r < rows_in; r += RPP) {
            Quad<T> qa, qb;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                qa.t[j] = x + j < n ? reinterpret_cast<const T *>(ra)[j] : T(0);
                qb.t[j] = x + j < n ? reinterpret_cast<const T *>(rb)[j] : T(0);
            }
            float fa[4], fb[4];
            centred4(qa, p, fa);
            centred4(qb, p, fb);
#pragma unroll
            for (int j = 0; j < 4; j++)
                dst[j] = x + j < n ? make_float2(fa[j], fb[j]) : make_float2(0.0f, 0.0f);
            ra += step_a;
            rb += step_b;
            dst += RPP * S::LSP;
        }
    }
    /* Rows below the image: zeros (from the first such row of this thread). */
    const int r_below = rows_in <= r0 ? r0 : r0 + (rows_in - r0 + RPP - 1) / RPP * RPP;
    for (int r = r_below; r < rows; r += RPP) {
        float2 *d = s_in + r * S::LSP + 4 * gx;
#pragma unroll
        for (int j = 0; j < 4; j++)
            d[j] = make_float2(0.0f, 0.0f);
    }
}

/* Stage 2: the horizontal pass over s_in's rows [0, ROWS) into the
 * planes' rows [to, to + ROWS). Item = (run q, row r), rows fastest, so a
 * warp's lanes read down a column of the staged tile (odd stride:
 * distinct banks). Run q's centres are samples s0 + k C, s0 = q / C *
 * (kRun C) + q % C. */
template <int C, int TW, int ROWS>
__device__ __forceinline__ void horizontal(const float2 *s_in, float2 *s_h0, float2 *s_h1,
                                           int to, const Params &p)
{
    typedef Shape<C, TW> S;
    for (int it = threadIdx.x; it < ROWS * S::RUNS; it += S::THREADS) {
        const int q = it / ROWS, r = it - q * ROWS;
        const int s0 = q / C * (kRun * C) + q % C;
        const float2 *src = s_in + r * S::LSP + s0;
        float2 v[kWin], o[kRun];
#pragma unroll
        for (int j = 0; j < kWin; j++)
            v[j] = src[j * C];
        filter(o, v, p);
        float2 *d0 = s_h0 + (to + r) * S::TWP + s0, *d1 = s_h1 + (to + r) * S::TWP + s0;
#pragma unroll
        for (int k = 0; k < kRun; k++)
            d0[k * C] = o[k];
        /* fma(a', a', b' b'): equal a' and b' give exactly twice a'b'
         * (|a'^2 - b'b'| is under half an ulp of 2 b'b'). */
#pragma unroll
        for (int j = 0; j < kWin; j++)
            v[j] = make_float2(__fmaf_rn(v[j].x, v[j].x, __fmul_rn(v[j].y, v[j].y)),
                               __fmul_rn(v[j].x, v[j].y));
        filter(o, v, p);
#pragma unroll
        for (int k = 0; k < kRun; k++)
            d1[k * C] = o[k];
    }
}

/* S of one centre from its four moments (of the centred samples):
 *   A1 = 2 mx my + C1          = fma(mx + mx, my, C1)
 *   B1 = mx^2 + my^2 + C1      = fma(mx, mx, fma(my, my, C1))
 *   A2 = 2 (E[a'b'] - ea eb) + C2 = fma(2, fma(-ea, eb, eab), C2)
 *   B2 = E[a'^2 + b'^2] - ea^2 - eb^2 + C2 = fma(-ea, ea, fma(-eb, eb, ess + C2))
 * mx = ea + off, my = eb + off. Fused forms, 15 instructions. They do not
 * give exactly 1 for identical windows (A1 A2 and B1 B2 round apart): the
 * library reports a channel with no differing sample as SSIM 1 itself
 * (lib/compare.c), on every backend. */
__device__ __forceinline__ float ssim_of(float2 m, float2 q, const Params &p)
{
    const float ea = m.x, eb = m.y, ess = q.x, eab = q.y;
    const float mx = __fadd_rn(ea, p.off), my = __fadd_rn(eb, p.off);
    const float a1 = __fmaf_rn(__fadd_rn(mx, mx), my, p.c1);
    const float b1 = __fmaf_rn(mx, mx, __fmaf_rn(my, my, p.c1));
    const float a2 = __fmaf_rn(2.0f, __fmaf_rn(-ea, eb, eab), p.c2);
    const float b2 = __fmaf_rn(-ea, ea, __fmaf_rn(-eb, eb, __fadd_rn(ess, p.c2)));
    return __fdividef(__fmul_rn(a1, a2), __fmul_rn(b1, b2));
}

/* Sums v (C channels) over the block into thread 0's v: a fixed shuffle
 * tree a warp, then one over the warps' results. */
template <int C, int THREADS>
__device__ __forceinline__ void block_sum(double (&v)[C], double *s_red)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int off = 16; off; off >>= 1)
#pragma unroll
        for (int c = 0; c < C; c++)
            v[c] = __dadd_rn(v[c], __shfl_down_sync(0xffffffffu, v[c], off));
    if (lane == 0)
#pragma unroll
        for (int c = 0; c < C; c++)
            s_red[warp * C + c] = v[c];
    __syncthreads();
    if (warp == 0) {
#pragma unroll
        for (int c = 0; c < C; c++)
            v[c] = lane < THREADS / 32 ? s_red[lane * C + c] : 0.0;
#pragma unroll
        for (int off = 16; off; off >>= 1)
#pragma unroll
            for (int c = 0; c < C; c++)
                v[c] = __dadd_rn(v[c], __shfl_down_sync(0xffffffffu, v[c], off));
    }
}

template <typename T, int C, int TW>
__global__ void __launch_bounds__(Shape<C, TW>::THREADS, Shape<C, TW>::MIN_BLOCKS)
ssim_kernel(const unsigned char *__restrict__ d_a, size_t pitch_a,
            const unsigned char *__restrict__ d_b, size_t pitch_b, int W, int H, int tiles_x,
            int units, const Params p, unsigned char *__restrict__ d_scratch,
            gimg_ssim_sums *__restrict__ d_out)
{
    typedef Shape<C, TW> S;
    extern __shared__ float2 s_mem[];
    float2 *s_in = s_mem;                    /* kRH x LSP: (a', b') */
    float2 *s_h0 = s_in + kRH * S::LSP;      /* kRH x TWP: rows' E[a'], E[b'] */
    float2 *s_h1 = s_h0 + kRH * S::TWP;      /* kRH x TWP: rows' E[a'^2 + b'^2], E[a'b'] */
    __shared__ double s_red[S::THREADS / 32 * C];
    __shared__ bool s_last;

    const int n = W * C;                     /* samples a row */
    const int n_out = (W - 2 * GIMG_SSIM_RADIUS) * C, h_out = H - 2 * GIMG_SSIM_RADIUS;
    const int col = threadIdx.x % TW, rows0 = threadIdx.x / TW * kRun; /* the vertical pass's */
    double sum = 0.0;                        /* channel col % C's */
    for (int unit = blockIdx.x; unit < units; unit += gridDim.x) {
        const int band = unit / tiles_x, tx = unit - band * tiles_x;
        /* Centre (xs + 5 C + i, ys + 5 + t) has its window's corner at
         * staged sample i, row t. */
        const int xs = tx * TW, y_band = band * kBandRows;
        const int chunks = min(kBandChunks, (h_out - y_band + kTH - 1) / kTH);
        for (int chunk = 0; chunk < chunks; chunk++) {
            const int ys = y_band + chunk * kTH;
            if (chunk == 0) {
                stage<T, C, TW>(s_in, kRH, d_a, pitch_a, d_b, pitch_b, n, H, xs, ys, p);
                __syncthreads();
                horizontal<C, TW, kRH>(s_in, s_h0, s_h1, 0, p);
            } else {
                __syncthreads(); /* the last chunk's vertical pass is done with the planes */
                /* Their last 10 rows are this chunk's first 10: moved up,
                 * so that only the 32 new rows are staged and filtered. */
                constexpr int kKeep = 2 * GIMG_SSIM_RADIUS * S::TWP;
                for (int i = threadIdx.x; i < 2 * kKeep; i += S::THREADS) {
                    float2 *plane = i < kKeep ? s_h0 : s_h1 - kKeep;
                    plane[i] = plane[kTH * S::TWP + i];
                }
                stage<T, C, TW>(s_in, kTH, d_a, pitch_a, d_b, pitch_b, n, H, xs,
                                ys + 2 * GIMG_SSIM_RADIUS, p);
                __syncthreads();
                horizontal<C, TW, kTH>(s_in, s_h0, s_h1, 2 * GIMG_SSIM_RADIUS, p);
            }
            __syncthreads();
            /* Stage 3, from the planes, which the next chunk changes only
             * after its first barrier (and the next band's after its
             * staging barrier). */
            float2 v[kWin], m[kRun], q[kRun];
            const float2 *c0 = s_h0 + rows0 * S::TWP + col, *c1 = s_h1 + rows0 * S::TWP + col;
#pragma unroll
            for (int j = 0; j < kWin; j++)
                v[j] = c0[j * S::TWP];
            filter(m, v, p);
#pragma unroll
            for (int j = 0; j < kWin; j++)
                v[j] = c1[j * S::TWP];
            filter(q, v, p);
            float part = 0.0f;
            if (xs + col < n_out && ys + rows0 + kRun <= h_out) { /* all 8 rows valid */
#pragma unroll
                for (int t = 0; t < kRun; t++)
                    part = __fadd_rn(part, ssim_of(m[t], q[t], p));
            } else if (xs + col < n_out) {
#pragma unroll
                for (int t = 0; t < kRun; t++) {
                    const float s = ssim_of(m[t], q[t], p);
                    part = __fadd_rn(part, ys + rows0 + t < h_out ? s : 0.0f);
                }
            }
            sum = __dadd_rn(sum, (double)part);
        }
    }

    double v[C];
#pragma unroll
    for (int c = 0; c < C; c++)
        v[c] = col % C == c ? sum : 0.0;
    block_sum<C, S::THREADS>(v, s_red);

    /* The last block: every block's sums, in block order per thread. */
    if (!gimg_grid::last_block_gather(
            v, d_scratch, &s_last, [](int) { return 0.0; },
            [](int, double a, double b) { return __dadd_rn(a, b); }))
        return;
    block_sum<C, S::THREADS>(v, s_red);
    if (threadIdx.x == 0) {
        for (int c = 0; c < 4; c++)
            d_out->sum[c] = c < C ? v[c] : 0.0;
        d_out->count = (uint64_t)(W - 2 * GIMG_SSIM_RADIUS) * (uint64_t)h_out;
        gimg_grid::grid_reduce_done(d_scratch);
    }
}

template <typename T, int C, int TW>
cudaError_t launch_tw(const void *d_a, size_t pitch_a, const void *d_b, size_t pitch_b, int W,
                      int H, const Params &p, const gimg_launch::device_facts &dev,
                      void *d_scratch, gimg_ssim_sums *d_out, cudaStream_t stream)
{
    typedef Shape<C, TW> S;
    const long long tiles_x = ((long long)(W - 2 * GIMG_SSIM_RADIUS) * C + TW - 1) / TW;
    const long long units = tiles_x * ((H - 2 * GIMG_SSIM_RADIUS + kBandRows - 1) / kBandRows);
    if ((long long)W * C > 0x7fffffffLL || units > 0x7fffffffLL - kMaxBlocks)
        return cudaErrorInvalidValue;
    auto kern = ssim_kernel<T, C, TW>;
    cudaError_t e = cudaFuncSetAttribute((const void *)kern,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, (int)S::SMEM);
    int per_sm = 0;
    if (!e)
        e = gimg_launch::blocks_per_sm((const void *)kern, dev.dev, S::THREADS, S::SMEM, &per_sm);
    if (e)
        return e;
    /* One wave: every block resident at once; the bands go round it. */
    long long g = (long long)dev.sms * (per_sm > 0 ? per_sm : 1);
    if (g > kMaxBlocks)
        g = kMaxBlocks;
    if (g > units)
        g = units;
    kern<<<(unsigned)g, S::THREADS, S::SMEM, stream>>>(
        static_cast<const unsigned char *>(d_a), pitch_a, static_cast<const unsigned char *>(d_b),
        pitch_b, W, H, (int)tiles_x, (int)units, p, static_cast<unsigned char *>(d_scratch), d_out);
    return cudaGetLastError();
}

template <typename T, int C>
cudaError_t launch(const void *d_a, size_t pitch_a, const void *d_b, size_t pitch_b, int W, int H,
                   const Params &p, void *d_scratch, gimg_ssim_sums *d_out, cudaStream_t stream)
{
    gimg_launch::device_facts dev;
    cudaError_t e = gimg_launch::current_device(&dev);
    if (e)
        return e;
    /* + 1 KiB: the static shared memory beside the dynamic. */
    if ((size_t)dev.smem_optin >= Shape<C, wide_tw<C>()>::SMEM + 1024)
        return launch_tw<T, C, wide_tw<C>()>(d_a, pitch_a, d_b, pitch_b, W, H, p, dev, d_scratch,
                                             d_out, stream);
    return launch_tw<T, C, narrow_tw<C>()>(d_a, pitch_a, d_b, pitch_b, W, H, p, dev, d_scratch,
                                           d_out, stream);
}

} // namespace

extern "C" size_t gimg_cuda_ssim_scratch_bytes(int width, int height, int channels)
{
    (void)width;
    (void)height;
    (void)channels;
    return gimg_grid::kGridPartOffset + (size_t)kMaxBlocks * 4 * sizeof(double);
}

extern "C" cudaError_t gimg_cuda_ssim(const void *d_a, size_t pitch_a, const void *d_b,
                                      size_t pitch_b, int width, int height, int channels,
                                      int sample_bytes, double range, void *d_scratch,
                                      gimg_ssim_sums *d_out, cudaStream_t stream)
{
    if (width < 1 || height < 1 || channels < 1 || channels > 4 || !(range > 0) ||
        isinf(range) || !d_out || !d_scratch || pitch_a % 16 || pitch_b % 16 ||
        ((uintptr_t)d_a | (uintptr_t)d_b) % 16 ||
        (sample_bytes != 1 && sample_bytes != 2 && sample_bytes != 4) ||
        (sample_bytes != 4 && range >= 4194304.0)) /* 2^23 + off exact */
        return cudaErrorInvalidValue;
    if (width < GIMG_SSIM_TAPS || height < GIMG_SSIM_TAPS)
        return cudaMemsetAsync(d_out, 0, sizeof *d_out, stream);

    Params p;
    double w[GIMG_SSIM_TAPS];
    gimg_ssim_weights(w);
    for (int j = 0; j < GIMG_SSIM_TAPS; j++)
        p.g[j] = (float)w[j];
    /* Integer samples: an integer offset, so that a' is exact. */
    const double off = sample_bytes == 4 ? range / 2 : floor(range / 2);
    p.off = (float)off;
    p.bias = (float)(8388608.0 + off);
    p.c1 = (float)(GIMG_SSIM_K1 * range * (GIMG_SSIM_K1 * range));
    p.c2 = (float)(GIMG_SSIM_K2 * range * (GIMG_SSIM_K2 * range));

#define GIMG_SSIM_CASE(bytes, T, c)                                                           \
    if (sample_bytes == bytes && channels == c)                                               \
        return launch<T, c>(d_a, pitch_a, d_b, pitch_b, width, height, p, d_scratch, d_out,    \
                            stream);
    GIMG_EACH_LAYOUT(GIMG_SSIM_CASE)
#undef GIMG_SSIM_CASE
    return cudaErrorInvalidValue;
}
