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
 *     memory as float pairs (u, w) = (a' + b', a' - b'), a' = a - off, b' =
 *     b - off, off = floor(R / 2) (R / 2 for float), so that the squares
 *     stay small against R^2 (variances are shift-invariant; the means get
 *     off back before they enter S): 42 rows for a band's first chunk,
 *     then only the 32 new ones, which (8-bit) were copied into shared
 *     memory as they are (cp.async) while the previous chunk filtered, so
 *     staging waits on no DRAM load but a band's first;
 *  2. the horizontal pass over those rows: a thread takes a run of 8
 *     centres of one channel (C samples apart), loads the 18 pairs under
 *     their windows once, and forms E_h[u], E_h[w] (11 FMAs each), then
 *     from the same registers u^2 and w^2 and their sums: the four moments
 *     in two shared planes of float pairs, 42 rows; the last 10 rows of a
 *     chunk's planes are moved up (16 bytes at a time) to be the next
 *     chunk's first, so each input row is staged and filtered once a band;
 *  3. the vertical pass and S: a thread takes 8 rows of one column, loads
 *     the 18 pairs of each plane under them once, 11 FMAs per moment per
 *     row, and computes S (ssim_of) for its 8 centres, adding the valid
 *     ones.
 * The sum and difference carry what S needs in four moments: the means
 * (U = mx + my - 2 off, V = mx - my), and vx + vy and the covariance from
 * the variances of u and w (2 (vx + vy) = var u + var w, 4 cov = var u -
 * var w). Each thread keeps one channel's sum (its column's) in double
 * across its units; the block sums per channel with a fixed shuffle tree,
 * and the last block to finish (integer ticket: grid_reduce.cuh) adds the
 * blocks' sums in block order: no float atomics, so a device repeats its
 * results bit for bit.
 *
 * Bytes: each image read once from DRAM (the strips' 10 C halo samples and
 * the bands' 10 halo rows come from L2): 2 x 201 MB for an 8192x8192 RGB
 * 8-bit pair, 0.1 ms at an H100's copy rate, so the pass is bound by
 * arithmetic, not memory. Instructions executed per centre sample (RGB
 * 8-bit, Nsight Compute, version 6 below): staging ~10 (1.39 samples: a
 * 4-sample load of each image, 8-bit sums and differences in 16-bit
 * lanes, two conversions, a store), horizontal ~57 (1.04 x (44 FMAs, 4.5
 * products, 2.25 loads, 2 stores, the index)), vertical ~54 (44 FMAs, 4.5
 * loads, the addresses), S 13 (ssim_of's 12, one reciprocal, and the
 * sum), the copies, the row moves and the loops: 154, 31.0 G for the
 * pair, 0.93 ms at an H100's issue rate (132 SMs x 4 x 32 lanes x 1.98
 * GHz) if every cycle issued (82% do: 1.15 ms). Target
 * (issue 29): <= 2x gconv's fused separable Gaussian r5 on one such image
 * (0.613 ms on an H100), i.e. <= 1.23 ms.
 *
 * Measured (make bench, 8192x8192 pairs, b a noisy copy of a; ssim/blur
 * against the same run's gconv r5 blur of one image):
 *     version                         card   rgb8 ms  ssim/blur  gray8   rgb16
 *     (1) 32-row tiles, halos again   H200   2.129    3.47
 *     (2) bands of 8 chunks           H200   1.458    2.38       2.33    2.12
 *         the same                    H100   1.469    2.37       2.33    2.09
 *     (3) staging by row, fused S     H200   1.328    2.17       2.15    1.99
 *         the same                    H100   1.333    2.17       2.14    1.98
 *     (5) (u, w), rcp, row moves      H100   1.274    2.08       2.07    2.00
 *     (6) prefetch, staging turned    H100   1.159    1.90       1.95    1.98
 * (2): 4-sample staging loads, bands of 8 chunks that keep the last 10
 * filtered rows for the next chunk. (3): a thread stages one column group
 * down the rows, S in 15 fused instructions, the rows' validity tested
 * once per run. (Version 4, horizontal runs of 16, was slower: RESULTS.md.)
 * (5): the (u, w) moments (products 3 -> 2 a sample, S 15
 * -> 13 instructions with 2 C1 and 2 C2 added by the filters' first
 * taps), S's division as a bare reciprocal (the fast division's range
 * test and scaling cost 3 instructions a centre), the planes' row move in
 * 16-byte copies (it took 5 instructions a centre), staging with a
 * thread's rows' loads first and no per-row branches: 163 -> 157
 * instructions a centre, 75% of the schedulers' cycles issuing, 22 of 24
 * warps an SM active. (6): the next chunk's 8-bit rows copied by cp.async
 * while this chunk filters (-1%: 1.26 ms), S in 12 instructions (the
 * squares of V fused into their subtractions), and the staging stores
 * made conflict-free (-9%: 1.16 ms; they had been a quarter of the
 * shared-memory wavefronts, 54 M of 205 M, and the schedulers' idle
 * cycles waiting on shared loads halved, 75.7% -> 82.3% issuing). Tried
 * in (6) and not kept: the bands' length chosen per launch so that the
 * wave's last round is full (1.28-1.45 ms against 1.26: 16 chunks for
 * 8192x8192, and blocks that finish early are no loss when two share an
 * SM). Tried in (5) and
 * not kept (H100, rgb8 ms, against (3)'s 1.33): equal shares of the
 * chunks block by block (1.43) or one band a strip (1.47), the blocks
 * drifting apart down the image; bands of 4, 6, 12 and 16 chunks (1.30 to
 * 1.32, against 8's 1.30); the next chunk's rows loaded into registers
 * before the vertical pass (1.47: spills) or after it, across the barrier
 * (1.37). Left to try: the vertical pass on tensor cores (3xTF32 for FP32
 * accuracy); fewer warps waiting at the three barriers a chunk (the
 * largest stall after "not selected").
 *
 * Shared memory: ~2300 128-byte wavefronts a chunk against ~3400 issue
 * cycles; the horizontal pass's lanes step down rows, the vertical pass's
 * along them, with odd row strides, so neither meets bank conflicts; the
 * staging lanes turn their 4 consecutive pairs (Rot), so their stores
 * meet none either.
 *
 * Accuracy: float throughout, but for the sums of S (double from each
 * thread's 8 centres on). The variance terms cancel: E[u^2] and U^2 carry
 * float's relative error of ~6e-8 of R^2, against 2 C2 = 2 (0.03 R)^2, so
 * one centre's S may be off by ~3e-5 in a flat window, as with the
 * moments of a' and b' before (5); over many centres the rounding errors
 * mostly cancel. Against the CPU's double reference: per channel SSIM
 * within 5e-5 absolute (tests/gpudiff_ssim.c tests that; the largest
 * difference it met was 8.1e-6, on an H100; the 8192x8192 pairs of make
 * bench differ by at most 3.3e-8). Identical windows (w = 0) give S
 * within an ulp of 1 (the reciprocal), not exactly 1; gimg_compare
 * reports a channel with no differing sample as exactly 1 itself, on
 * every backend. The sums' order differs from the CPU's, and between GPU
 * models (their waves differ), never between runs on one device (tested).
 *
 * Devices whose blocks cannot opt in to the wide tiles' shared memory
 * (Turing: 64 KiB) take tiles half as wide: the same code, without the
 * prefetch (cp.async is sm_80's; the narrow tiles would spill with it).
 * sm_75's build of the wide RGB tiles, which Turing never launches, spills
 * 8 bytes; sm_80's spills 8 to 40 bytes in the wide rgb8, rgba8 and rgb16
 * kernels (sm_90's none; the A100 is not measured).
 */
#include "ssim.h"
#include "grid_reduce.cuh"
#include "launch.cuh"

#include <limits.h>
#include <math.h>
#include <stdint.h>


namespace {

constexpr int kTH = 32;               /* rows of centres a tile */
constexpr int kRH = kTH + 2 * GIMG_SSIM_RADIUS; /* staged rows */
constexpr int kRun = 8;               /* centres a thread filters in a pass */
constexpr int kWin = kRun + GIMG_SSIM_TAPS - 1; /* samples under their windows */
/* A block walks down a band of this many chunks of kTH rows of centres,
 * keeping the last 10 filtered rows of a chunk for the next. */
constexpr int kMaxBlocks = 4096;
/* A unit of work: a strip TW samples wide down a band of 8 chunks. Bands
 * of 4 to 16 chunks measured within 2% of each other; one band the
 * image's height (or equal shares of the chunks, block by block) 7-12%
 * slower: the wave's blocks drift apart down the image, where block-stride
 * units keep the wave in one band (RESULTS.md). */
constexpr int kBandChunks = 8;

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
    float off2, c1x2, c2x2; /* 2 off, 2 C1, 2 C2 */
    /* The integer conversions': 2^23's exponent bytes, and what to take
     * from u and w (8-bit: 2^23 + 2 off, 2^23 + 256; 16-bit: 2^24 + 2 off
     * from u's first value). */
    unsigned magic;
    float u_bias, w_bias;
};

/* o[k] = init + sum_j g[j] v[k + j], both halves of each pair, taps in
 * order, all fused multiply-adds. init is 0 but for the vertical pass of
 * the squares, where it adds a constant of S for free. */
__device__ __forceinline__ void filter(float2 (&o)[kRun], const float2 (&v)[kWin], const Params &p,
                                       float2 init = make_float2(0.0f, 0.0f))
{
#pragma unroll
    for (int k = 0; k < kRun; k++)
        o[k] = make_float2(__fmaf_rn(p.g[0], v[k].x, init.x), __fmaf_rn(p.g[0], v[k].y, init.y));
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

/* The staged pairs (u, w) = (a' + b', a' - b') of four samples of each
 * image, a' = a - off, b' = b - off: u = (a + b) - 2 off, w = a - b, exact
 * for 8/16-bit (integers under 2^24 throughout).
 *
 * 8-bit: a and b spread to 16-bit lanes (a byte permutation a word), a + b
 * and a - b + 256 formed two lanes at a time (no lane overflows or
 * borrows), then each lane as the low mantissa bits of 2^23 (a byte
 * permutation with the exponent's bytes, p.magic) minus 2^23 + 2 off or
 * 2^23 + 256: 28 instructions for 4 samples with their stores. */
__device__ __forceinline__ void pairs4(const Quad<uint8_t> &qa, const Quad<uint8_t> &qb,
                                       const Params &p, float2 (&uw)[4])
{
    const uint32_t a01 = __byte_perm(qa.u, 0, 0x4140), a23 = __byte_perm(qa.u, 0, 0x4342);
    const uint32_t b01 = __byte_perm(qb.u, 0, 0x4140), b23 = __byte_perm(qb.u, 0, 0x4342);
    const uint32_t s[2] = {a01 + b01, a23 + b23};
    const uint32_t d[2] = {a01 + 0x01000100u - b01, a23 + 0x01000100u - b23};
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const uint32_t sel = j & 1 ? 0x7632u : 0x7610u;
        uw[j] = make_float2(__fsub_rn(__uint_as_float(__byte_perm(s[j >> 1], p.magic, sel)), p.u_bias),
                            __fsub_rn(__uint_as_float(__byte_perm(d[j >> 1], p.magic, sel)), p.w_bias));
    }
}
/* 16-bit: each value as the low mantissa bits of 2^23, then u = (2^23 +
 * a) - (2^24 + 2 off) + (2^23 + b), w = (2^23 + a) - (2^23 + b). */
__device__ __forceinline__ void pairs4(const Quad<uint16_t> &qa, const Quad<uint16_t> &qb,
                                       const Params &p, float2 (&uw)[4])
{
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const uint32_t sel = j & 1 ? 0x7432u : 0x7410u;
        const float fa = __uint_as_float(__byte_perm(j < 2 ? qa.u.x : qa.u.y, p.magic, sel));
        const float fb = __uint_as_float(__byte_perm(j < 2 ? qb.u.x : qb.u.y, p.magic, sel));
        uw[j] = make_float2(__fadd_rn(__fsub_rn(fa, p.u_bias), fb), __fsub_rn(fa, fb));
    }
}
__device__ __forceinline__ void pairs4(const Quad<float> &qa, const Quad<float> &qb,
                                       const Params &p, float2 (&uw)[4])
{
#pragma unroll
    for (int j = 0; j < 4; j++)
        uw[j] = make_float2(__fsub_rn(__fadd_rn(qa.t[j], qb.t[j]), p.off2),
                            __fsub_rn(qa.t[j], qb.t[j]));
}

/* A staging lane's four pairs are 32 bytes of a row, so lanes 4 apart
 * store into the same banks (8 wavefronts a warp's store, not 2: a quarter
 * of the kernel's shared-memory traffic). So each lane of a group of four
 * (gx / 4 % 4) turns its four samples by rot (byte permutations of the
 * loaded words) and stores pair j at sample (j + rot) % 4: a warp's stores
 * are conflict-free. Float samples keep their order. */
template <typename T> struct Rot {
    int rot;
    unsigned sel0, sel1;
    __device__ __forceinline__ explicit Rot(int gx) : rot(sizeof(T) < 4 ? gx >> 2 & 3 : 0)
    {
        /* PRMT selectors: output byte i <- byte (rot + i) % 4 of the word
         * (8-bit); of (x, y), sample i being bytes 2i and 2i + 1, bytes
         * (2 rot + i) % 8 and (2 rot + 4 + i) % 8 (16-bit). */
        sel0 = sel1 = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            sel0 |= (unsigned)(sizeof(T) == 1 ? (rot + i) & 3 : (2 * rot + i) & 7) << 4 * i;
            sel1 |= (unsigned)((2 * rot + 4 + i) & 7) << 4 * i;
        }
    }
    __device__ __forceinline__ int slot(int j) const { return (j + rot) & 3; }
    __device__ __forceinline__ void apply(Quad<T> &q) const;
};
template <> __device__ __forceinline__ void Rot<uint8_t>::apply(Quad<uint8_t> &q) const
{
    q.u = __byte_perm(q.u, 0, sel0);
}
template <> __device__ __forceinline__ void Rot<uint16_t>::apply(Quad<uint16_t> &q) const
{
    const uint2 v = q.u;
    q.u = make_uint2(__byte_perm(v.x, v.y, sel0), __byte_perm(v.x, v.y, sel1));
}
template <> __device__ __forceinline__ void Rot<float>::apply(Quad<float> &) const {}

/* Staging's thread layout: a thread keeps one group of 4 samples of a row
 * (one 4-16 byte load per image; lanes on consecutive groups: coalesced)
 * and goes down the rows RPP at a time. */
template <int C, int TW> struct Staging {
    typedef Shape<C, TW> S;
    static constexpr int GPR = S::LS / 4;          /* groups a row */
    static constexpr int RPP = S::THREADS / GPR;   /* rows a step */
};

/* Stage 1: input rows [y, y + ROWS) x samples [xs, xs + LS) of both images
 * as pairs into s_in's rows [0, ROWS); outside the image (the last tiles'
 * right and lower edges, never under a valid centre's window) (0, 0). A
 * thread loads all its rows (up to 4 words an image in flight), then
 * converts and stores them. WHOLE: the thread's group lies inside the row
 * (all but the group that crosses the row's end), so it carries no
 * per-sample checks, and its pairs are turned (Rot). */
template <typename T, int C, int TW, int ROWS, bool WHOLE>
__device__ __forceinline__ void stage_rows(float2 *s_in, const unsigned char *ra,
                                           size_t pitch_a, const unsigned char *rb,
                                           size_t pitch_b, int x, int n, int rows_in, int r0,
                                           const Rot<T> &turn, const Params &p)
{
    typedef Shape<C, TW> S;
    typedef Staging<C, TW> L;
    constexpr int K = (ROWS + L::RPP - 1) / L::RPP; /* rows a thread, at most */
    constexpr int NB = 4 / sizeof(T) > 0 ? 4 / sizeof(T) : 1; /* rows in flight: 16 bytes */
    typedef decltype(Quad<T>::u) word;
    float2 *d[4]; /* pair j's place in row r0 (turned: WHOLE) */
#pragma unroll
    for (int j = 0; j < 4; j++)
        d[j] = s_in + r0 * S::LSP + (WHOLE ? turn.slot(j) : j);
#pragma unroll
    for (int kb = 0; kb < K; kb += NB) {
        Quad<T> qa[NB], qb[NB];
#pragma unroll
        for (int k = 0; k < NB; k++) {
            const int r = r0 + (kb + k) * L::RPP;
            if (kb + k < K && r < rows_in) {
                const unsigned char *a = ra + (size_t)r * pitch_a, *b = rb + (size_t)r * pitch_b;
                if (WHOLE) {
                    qa[k].u = *reinterpret_cast<const word *>(a);
                    qb[k].u = *reinterpret_cast<const word *>(b);
                } else {
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        qa[k].t[j] = x + j < n ? reinterpret_cast<const T *>(a)[j] : T(0);
                        qb[k].t[j] = x + j < n ? reinterpret_cast<const T *>(b)[j] : T(0);
                    }
                }
            }
        }
#pragma unroll
        for (int k = 0; k < NB; k++) {
            const int r = r0 + (kb + k) * L::RPP, dr = (kb + k) * L::RPP * S::LSP;
            if (kb + k >= K) {
            } else if (r < rows_in) {
                if (WHOLE) {
                    turn.apply(qa[k]);
                    turn.apply(qb[k]);
                }
                float2 uw[4];
                pairs4(qa[k], qb[k], p, uw);
#pragma unroll
                for (int j = 0; j < 4; j++)
                    d[j][dr] = WHOLE || x + j < n ? uw[j] : make_float2(0.0f, 0.0f);
            } else if (r < ROWS) {
#pragma unroll
                for (int j = 0; j < 4; j++)
                    d[j][dr] = make_float2(0.0f, 0.0f);
            }
        }
    }
}
template <typename T, int C, int TW, int ROWS>
__device__ __forceinline__ void stage(float2 *s_in, const unsigned char *d_a, size_t pitch_a,
                                      const unsigned char *d_b, size_t pitch_b, int n, int H,
                                      int xs, int y, const Params &p)
{
    typedef Staging<C, TW> L;
    const int gx = threadIdx.x % L::GPR, r0 = threadIdx.x / L::GPR;
    if (r0 >= L::RPP)
        return;
    const int x = xs + 4 * gx, rows_in = min(ROWS, H - y); /* rows inside the image */
    const unsigned char *ra = d_a + (size_t)y * pitch_a + (size_t)x * sizeof(T);
    const unsigned char *rb = d_b + (size_t)y * pitch_b + (size_t)x * sizeof(T);
    s_in += 4 * gx;
    const Rot<T> turn(gx);
    if (x + 4 <= n)
        stage_rows<T, C, TW, ROWS, true>(s_in, ra, pitch_a, rb, pitch_b, x, n, rows_in, r0, turn,
                                         p);
    else
        stage_rows<T, C, TW, ROWS, false>(s_in, ra, pitch_a, rb, pitch_b, x, n, rows_in, r0, turn,
                                          p);
}

/* A plane's last 10 rows, [kTH, kTH + 10), moved to its first 10: 10 TWP
 * float2 in one block, copied 16 bytes at a time (the plane and kTH rows
 * of it are 16-byte multiples: kRH and kTH are even). */
template <int C, int TW>
__device__ __forceinline__ void move_rows(float2 *plane)
{
    typedef Shape<C, TW> S;
    constexpr int kQuads = GIMG_SSIM_RADIUS * S::TWP; /* 2 R TWP float2 */
    static_assert(kTH * S::TWP % 2 == 0 && kRH * S::LSP % 2 == 0, "16-byte aligned rows");
    float4 *dst = reinterpret_cast<float4 *>(plane);
    const float4 *src = reinterpret_cast<const float4 *>(plane + kTH * S::TWP);
    for (int i = threadIdx.x; i < kQuads; i += S::THREADS)
        dst[i] = src[i];
}

/* The next chunk's input, 8-bit samples on the wide tiles (the narrow
 * ones would spill): its kTH new rows of both images copied as they are
 * (cp.async, 16 bytes at a time: Prefetch) into s_in's rows [kTH, kRH),
 * which only a band's first chunk uses, while this chunk filters; the
 * next chunk's staging then converts from shared memory (stage_raw),
 * waiting on no DRAM load. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
constexpr bool kCpAsync = false; /* cp.async: sm_80 and later */
#else
constexpr bool kCpAsync = true;
#endif
template <typename T, int C, int TW> struct Raw {
    typedef Shape<C, TW> S;
    /* Not on the narrow tiles: their registers would spill. */
    static constexpr bool ON = kCpAsync && sizeof(T) == 1 && TW == wide_tw<C>();
    static constexpr int RB = (S::LS * (int)sizeof(T) + 15) / 16 * 16; /* bytes a raw row */
    static constexpr int SEGS = RB / 16;
    static_assert(!ON || 2 * kTH * RB <= (kRH - kTH) * S::LSP * (int)sizeof(float2),
                  "the raw rows fit s_in's unused rows");
};
__device__ __forceinline__ void cp_async_wait_all()
{
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}
/* A thread's share of the copies: segments i = thread + k THREADS of the
 * 2 kTH SEGS (image, row, 16-byte segment), each a pointer that steps
 * down kTH rows a chunk, so that a chunk's copies cost little. Segments
 * past the row's end or the image's last row are not copied (their stale
 * bytes stage to finite values under no valid centre's window); the one
 * that crosses the row's end copies the row's bytes only and zero-fills
 * the rest (the pitch's padding is never read). */
template <typename T, int C, int TW> struct Prefetch {
    typedef Raw<T, C, TW> R;
    static constexpr int THREADS = Shape<C, TW>::THREADS;
    static constexpr int K = (2 * kTH * R::SEGS + THREADS - 1) / THREADS;
    const unsigned char *src[K]; /* the next chunk's bytes */
    size_t step[K];              /* kTH rows */
    int end[K];                  /* the first chunk row y with none: H - its row */
    int bytes[K];                /* bytes before the row's end, 1-16 */
    unsigned dst[K];             /* shared address */
    /* Copies of rows [y, y + kTH) first. */
    __device__ __forceinline__ Prefetch(unsigned char *s_raw, const unsigned char *d_a,
                                        size_t pitch_a, const unsigned char *d_b,
                                        size_t pitch_b, int n, int H, int xs, int y)
    {
        const int row_bytes = (n - xs) * (int)sizeof(T); /* from xs to the row's end */
#pragma unroll
        for (int k = 0; k < K; k++) {
            const int i = threadIdx.x + k * THREADS;
            const int img = i >= kTH * R::SEGS, j = i - img * (kTH * R::SEGS);
            const int r = j / R::SEGS, seg = j - r * R::SEGS;
            const size_t pitch = img ? pitch_b : pitch_a;
            src[k] = (img ? d_b : d_a) + (size_t)(y + r) * pitch + (size_t)xs * sizeof(T) +
                     16 * seg;
            step[k] = kTH * pitch;
            end[k] = i < 2 * kTH * R::SEGS && 16 * seg < row_bytes ? H - r : INT_MIN;
            bytes[k] = min(row_bytes - 16 * seg, 16);
            dst[k] = (unsigned)__cvta_generic_to_shared(s_raw + (img * kTH + r) * R::RB + 16 * seg);
        }
    }
    /* The next chunk's rows: y, the first's row. */
    __device__ __forceinline__ void issue(int y)
    {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800 /* else never called: Raw::ON */
#pragma unroll
        for (int k = 0; k < K; k++) {
            if (y < end[k] && bytes[k] == 16)
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst[k]),
                             "l"(src[k])
                             : "memory");
            else if (y < end[k])
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst[k]),
                             "l"(src[k]), "r"(bytes[k])
                             : "memory");
            src[k] += step[k];
        }
#endif
    }
};
/* Stage 1 from the prefetched rows: as stage_rows, every group whole. */
template <typename T, int C, int TW>
__device__ __forceinline__ void stage_raw(float2 *s_in, const unsigned char *s_raw,
                                          const Params &p)
{
    static_assert(sizeof(T) == 1, "8-bit samples");
    typedef Shape<C, TW> S;
    typedef Staging<C, TW> L;
    typedef Raw<T, C, TW> R;
    const int gx = threadIdx.x % L::GPR, r0 = threadIdx.x / L::GPR;
    if (r0 >= L::RPP)
        return;
    const Rot<T> turn(gx);
    float2 *d[4];
#pragma unroll
    for (int j = 0; j < 4; j++)
        d[j] = s_in + r0 * S::LSP + 4 * gx + turn.slot(j);
    const unsigned char *src = s_raw + r0 * R::RB + 4 * gx;
#pragma unroll
    for (int k = 0; k < (kTH + L::RPP - 1) / L::RPP; k++) {
        if (r0 + k * L::RPP < kTH) {
            Quad<T> qa, qb;
            qa.u = *reinterpret_cast<const uint32_t *>(src + k * L::RPP * R::RB);
            qb.u = *reinterpret_cast<const uint32_t *>(src + (kTH + k * L::RPP) * R::RB);
            turn.apply(qa);
            turn.apply(qb);
            float2 uw[4];
            pairs4(qa, qb, p, uw);
#pragma unroll
            for (int j = 0; j < 4; j++)
                d[j][k * L::RPP * S::LSP] = uw[j];
        }
    }
}

/* 1 / x to about 1 ulp (MUFU.RCP): no range checks (S's denominator lies
 * far inside float's range, ~2^93 at most). */
__device__ __forceinline__ float rcp_approx(float x)
{
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
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
#pragma unroll
        for (int j = 0; j < kWin; j++)
            v[j] = make_float2(__fmul_rn(v[j].x, v[j].x), __fmul_rn(v[j].y, v[j].y));
        filter(o, v, p);
#pragma unroll
        for (int k = 0; k < kRun; k++)
            d1[k * C] = o[k];
    }
}

/* S of one centre from its four moments of u = a' + b' and w = a' - b':
 * U = E u, V = E w (= mx - my), and E[u^2] + 2 C2 (the vertical pass adds
 * 2 C2), E[w^2]. With vu = E[u^2] - U^2 and vw = E[w^2] - V^2,
 *   2 (2 mx my + C1)      = (U + 2 off)^2 - V^2 + 2 C1
 *   2 (mx^2 + my^2 + C1)  = (U + 2 off)^2 + V^2 + 2 C1
 *   2 (2 cov + C2)        = vu - vw + 2 C2
 *   2 (vx + vy + C2)      = vu + vw + 2 C2
 * (mx + my = U + 2 off; 4 cov = vu - vw; 2 (vx + vy) = vu + vw), and S =
 * A1 A2 / (B1 B2) is the same with each factor doubled: 12 instructions,
 * V^2 fused into the three terms that take it. Identical windows (w = 0)
 * give A1 = B1 and A2 = B2 exactly, S within an ulp of 1 (the fast
 * division); the library reports a channel with no differing sample as
 * SSIM 1 itself (lib/compare.c), on every backend. */
__device__ __forceinline__ float ssim_of(float2 m, float2 q, const Params &p)
{
    const float vu = __fmaf_rn(-m.x, m.x, q.x); /* + 2 C2 */
    const float vw = __fmaf_rn(-m.y, m.y, q.y);
    const float a2 = __fsub_rn(vu, vw), b2 = __fadd_rn(vu, vw);
    const float su = __fadd_rn(m.x, p.off2);
    const float ss = __fmaf_rn(su, su, p.c1x2);
    const float a1 = __fmaf_rn(-m.y, m.y, ss), b1 = __fmaf_rn(m.y, m.y, ss);
    return __fmul_rn(__fmul_rn(a1, a2), rcp_approx(__fmul_rn(b1, b2)));
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
            const unsigned char *__restrict__ d_b, size_t pitch_b, int W, int H,
            int tiles_x, long long units, const Params p,
            unsigned char *__restrict__ d_scratch, gimg_ssim_sums *__restrict__ d_out)
{
    typedef Shape<C, TW> S;
    extern __shared__ float2 s_mem[];
    float2 *s_in = s_mem;                    /* kRH x LSP: (u, w) */
    float2 *s_h0 = s_in + kRH * S::LSP;      /* kRH x TWP: rows' E[u], E[w] */
    float2 *s_h1 = s_h0 + kRH * S::TWP;      /* kRH x TWP: rows' E[u^2], E[w^2] */
    unsigned char *s_raw = reinterpret_cast<unsigned char *>(s_in + kTH * S::LSP);
    __shared__ double s_red[S::THREADS / 32 * C];
    __shared__ bool s_last;

    const int n = W * C;                     /* samples a row */
    const int n_out = (W - 2 * GIMG_SSIM_RADIUS) * C, h_out = H - 2 * GIMG_SSIM_RADIUS;
    const int col = threadIdx.x % TW, rows0 = threadIdx.x / TW * kRun; /* the vertical pass's */
    const float2 q_init = make_float2(p.c2x2, 0.0f);
    double sum = 0.0;                        /* channel col % C's */
    /* Units (strip, band) in band-major order, block-stride over one
     * wave, so that the wave moves down the image together (the strips'
     * halo columns then come from L2). */
    const int h_chunks = (h_out + kTH - 1) / kTH;
    for (long long unit = blockIdx.x; unit < units; unit += gridDim.x) {
        const int band = (int)(unit / tiles_x), strip = (int)(unit - (long long)band * tiles_x);
        const int chunk0 = band * kBandChunks, run = min(kBandChunks, h_chunks - chunk0);
        /* Centre (xs + 5 C + i, ys + 5 + t) has its window's corner at
         * staged sample i, row t. */
        const int xs = strip * TW;
        Prefetch<T, C, TW> pf(s_raw, d_a, pitch_a, d_b, pitch_b, n, H, xs,
                              chunk0 * kTH + kTH + 2 * GIMG_SSIM_RADIUS);
        for (int c = 0; c < run; c++) {
            const int ys = (chunk0 + c) * kTH;
            /* The next chunk's new rows, to prefetch once s_in's rows
             * [kTH, kRH) are free. */
            const bool ahead = Raw<T, C, TW>::ON && c + 1 < run;
            const int y_next = ys + kTH + 2 * GIMG_SSIM_RADIUS;
            if (c == 0) {
                stage<T, C, TW, kRH>(s_in, d_a, pitch_a, d_b, pitch_b, n, H, xs, ys, p);
                __syncthreads();
                horizontal<C, TW, kRH>(s_in, s_h0, s_h1, 0, p);
            } else {
                if constexpr (Raw<T, C, TW>::ON)
                    cp_async_wait_all(); /* this thread's share of the rows */
                __syncthreads(); /* the last chunk's vertical pass is done with the planes */
                /* Their last 10 rows are this chunk's first 10: moved up,
                 * so that only the 32 new rows are filtered. */
                move_rows<C, TW>(s_h0);
                move_rows<C, TW>(s_h1);
                if constexpr (Raw<T, C, TW>::ON)
                    stage_raw<T, C, TW>(s_in, s_raw, p);
                else
                    stage<T, C, TW, kTH>(s_in, d_a, pitch_a, d_b, pitch_b, n, H, xs,
                                         ys + 2 * GIMG_SSIM_RADIUS, p);
                __syncthreads();
                if (ahead)
                    pf.issue(y_next);
                horizontal<C, TW, kTH>(s_in, s_h0, s_h1, 2 * GIMG_SSIM_RADIUS, p);
            }
            __syncthreads();
            if (ahead && c == 0)
                pf.issue(y_next);
            /* Stage 3, from the planes, which the next chunk changes only
             * after its first barrier (and the next strip's after its
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
            filter(q, v, p, q_init);
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
    const int h_chunks = (H - 2 * GIMG_SSIM_RADIUS + kTH - 1) / kTH;
    if ((long long)W * C > 0x7fffffffLL || tiles_x * h_chunks > 0x7fffffffLL - kMaxBlocks)
        return cudaErrorInvalidValue;
    auto kern = ssim_kernel<T, C, TW>;
    cudaError_t e = cudaFuncSetAttribute((const void *)kern,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, (int)S::SMEM);
    int per_sm = 0;
    if (!e)
        e = gimg_launch::blocks_per_sm((const void *)kern, dev.dev, S::THREADS, S::SMEM, &per_sm);
    if (e)
        return e;
    /* One wave: every block resident at once; the units go round it. */
    long long g = (long long)dev.sms * (per_sm > 0 ? per_sm : 1);
    if (g > kMaxBlocks)
        g = kMaxBlocks;
    const long long units = tiles_x * ((h_chunks + kBandChunks - 1) / kBandChunks);
    if (g > units)
        g = units;
    kern<<<(unsigned)g, S::THREADS, S::SMEM, stream>>>(
        static_cast<const unsigned char *>(d_a), pitch_a, static_cast<const unsigned char *>(d_b),
        pitch_b, W, H, (int)tiles_x, units, p, static_cast<unsigned char *>(d_scratch), d_out);
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
    p.off2 = (float)(2 * off);
    p.magic = 0x4B000000u;
    p.u_bias = (float)((sample_bytes == 1 ? 8388608.0 : 16777216.0) + 2 * off); /* exact: even */
    p.w_bias = (float)(8388608.0 + 256);
    p.c1x2 = (float)(2 * (GIMG_SSIM_K1 * range * (GIMG_SSIM_K1 * range)));
    p.c2x2 = (float)(2 * (GIMG_SSIM_K2 * range * (GIMG_SSIM_K2 * range)));

#define GIMG_SSIM_CASE(bytes, T, c)                                                           \
    if (sample_bytes == bytes && channels == c)                                               \
        return launch<T, c>(d_a, pitch_a, d_b, pitch_b, width, height, p, d_scratch, d_out,    \
                            stream);
    GIMG_EACH_LAYOUT(GIMG_SSIM_CASE)
#undef GIMG_SSIM_CASE
    return cudaErrorInvalidValue;
}
