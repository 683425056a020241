/*
 * transpose.cu — transpose, flips and rotations (the eight symmetries of the
 * rectangle) of interleaved images, for every pixel size gimg has:
 * 1, 2, 3, 4, 6, 8, 12 and 16 bytes (1-4 channels of 8/16-bit or float).
 *
 * Layout: rows of width * E bytes at a pitch that is a multiple of 16 bytes,
 * each row's allocation reaching its pitch (gimg's device buffers are
 * allocated that way), so the kernel can move whole 16-byte words.
 *
 * Work: no arithmetic; every byte is read once and written once, so an
 * image of N bytes moves 2N bytes and the ceiling is a device-to-device
 * copy of N bytes (about 2.9 TB/s counting both directions on an H100,
 * 4.2 TB/s on an H200). Target: >= 85% of that copy for every pixel size
 * and op. Measured on an H100 at 8192x8192 (make bench): 0.86-1.01 of the
 * copy; nppiTranspose reaches 0.20 (gray8) to 0.83 (RGBA16) of it.
 *
 * Why it is written this way
 *  - Every op is "maybe transpose, then read the source's rows and/or
 *    columns backwards" (lib/orient_internal.h). One kernel template serves
 *    all eight; the transpose is a compile-time choice, the reversals are
 *    run-time flags (a select per index, not worth a template).
 *  - A block stages one tile through shared memory. Tiles are anchored in
 *    the OUTPUT, so every global store is an aligned 16-byte word and
 *    consecutive lanes write consecutive words: a warp writes whole sectors.
 *    The tile's source block then starts at any column (a reversed or
 *    transposed index); it is read as the aligned 16-byte words that cover
 *    it (one extra word per row at most) and the misalignment, `shift`, is
 *    applied when reading shared memory.
 *  - An output word is gathered from shared memory in units of
 *    U = gcd(E, 16) bytes (at most 4 in the spread layout below). Where E
 *    divides 16 the units are at compile-time offsets. Pixels of 3, 6 and
 *    12 bytes straddle words, and the phase of a word (16w mod E) differs
 *    from lane to lane; branching on it made warps diverge (RGB8 at 0.46 of
 *    the copy), and giving each thread a whole group of words made its
 *    stores half-sectors (0.58). Instead each word reads the few whole
 *    pixels that cover any phase into registers and funnel-shifts its 16
 *    bytes out: no divergence, full-sector stores (0.90).
 *  - Row-wise ops (flip, flop, rot180) on 1- and 2-byte pixels read each
 *    word as five aligned 4-byte words plus a funnel shift and a byte
 *    permute, instead of 16 or 8 narrow reads (gray8 from 0.83 to 0.95).
 *  - `spread` stores each 16-byte word of a source row in 20 bytes of
 *    shared memory: the 16-byte stride between lanes (4 banks apart, so
 *    4-way conflicts for narrow accesses) becomes 20 bytes (5 banks,
 *    conflict-free). Global words are stored as four 4-byte words where
 *    rows are not 16-byte aligned.
 *  - Tile shapes (shape_of) were shortlisted with a bank-conflict model of
 *    both phases (tests/bench/banks.py) and then timed against each other
 *    (tests/bench/tune_transpose.cu, `make tune`): larger tiles won where
 *    more bytes in flight mattered more than the last conflict.
 *  - Border tiles take the same path with clamped indices; a partial
 *    word's spare bytes land in the row's pitch padding, never beyond.
 */
#include "transpose.h"

#include <stdint.h>

namespace {

constexpr int kThreads = 256;

__host__ __device__ constexpr int gcd16(int e) { return (e % 16 == 0) ? 16 : (e % 8 == 0) ? 8 : (e % 4 == 0) ? 4 : (e % 2 == 0) ? 2 : 1; }

/* Tile shape (output rows x columns of pixels), shared-row padding and
 * layout per pixel size, for the transposing ops and the row-wise ones.
 * Columns x E is a multiple of 16, so a tile row is whole 16-byte words. */
struct tile_shape { int rows, cols, pad; bool spread; };
[[maybe_unused]] __host__ __device__ constexpr tile_shape shape_of(int e, bool transpose)
{
    return transpose
        ? (e == 1 ? tile_shape{256, 64, 0, true}  : e == 2 ? tile_shape{128, 32, 0, true}
         : e == 3 ? tile_shape{128, 32, 28, false} : e == 4 ? tile_shape{64, 32, 0, true}
         : e == 6 ? tile_shape{64, 16, 8, false}  : e == 8 ? tile_shape{32, 16, 8, false}
         : e == 12 ? tile_shape{32, 16, 0, false} : tile_shape{32, 32, 0, false})
        : (e == 1 ? tile_shape{16, 512, 0, true}  : e == 2 ? tile_shape{16, 256, 0, true}
         : e == 3 ? tile_shape{8, 1024, 0, true}  : e == 4 ? tile_shape{16, 128, 0, true}
         : e == 6 ? tile_shape{8, 512, 0, true}   : e == 8 ? tile_shape{16, 64, 0, true}
         : e == 12 ? tile_shape{8, 128, 0, false} : tile_shape{8, 64, 0, false});
}

template <int U> struct unit_t;
template <> struct unit_t<1> { typedef uint8_t type; };
template <> struct unit_t<2> { typedef uint16_t type; };
template <> struct unit_t<4> { typedef uint32_t type; };
template <> struct unit_t<8> { typedef uint2 type; };
template <> struct unit_t<16> { typedef uint4 type; };

/* Assembles one 16-byte output word from 16/U units fetched by get(k). */
template <int U, typename Get> __device__ __forceinline__ uint4 assemble(Get get)
{
    if constexpr (U == 16) {
        return get(0);
    } else {
        uint32_t w[4];
        if constexpr (U == 1) {
#pragma unroll
            for (int i = 0; i < 4; i++)
                w[i] = get(4 * i) | (get(4 * i + 1) << 8) | (get(4 * i + 2) << 16) |
                       (get(4 * i + 3) << 24);
        } else if constexpr (U == 2) {
#pragma unroll
            for (int i = 0; i < 4; i++)
                w[i] = get(2 * i) | (get(2 * i + 1) << 16);
        } else if constexpr (U == 4) {
#pragma unroll
            for (int i = 0; i < 4; i++)
                w[i] = get(i);
        } else {
            uint2 a = get(0), b = get(1);
            w[0] = a.x; w[1] = a.y; w[2] = b.x; w[3] = b.y;
        }
        return make_uint4(w[0], w[1], w[2], w[3]);
    }
}

template <int E, bool TRANSPOSE, int ROWS, int COLS, int PAD, bool SPREAD>
__global__ void __launch_bounds__(kThreads)
orient_kernel(const unsigned char *__restrict__ d_in, size_t in_pitch, int W, int H,
              unsigned char *__restrict__ d_out, size_t out_pitch, int rev_rows, int rev_cols,
              int tiles_x)
{
    constexpr tile_shape S = {ROWS, COLS, PAD, SPREAD};
    constexpr int U = S.spread && gcd16(E) > 4 ? 4 : gcd16(E);
    constexpr int G = gcd16(E);
    constexpr int WORD = S.spread ? 20 : 16;              /* shared bytes per 16-byte word */
    constexpr int ROW_WORDS = S.cols * E / 16;            /* 16-byte words in an output tile row */
    constexpr int SRC_ROWS = TRANSPOSE ? S.cols : S.rows; /* the source block of a tile */
    constexpr int SRC_COLS = TRANSPOSE ? S.rows : S.cols;
    constexpr int LOAD_WORDS = SRC_COLS * E / 16 + 1;     /* + 1 for a misaligned start */
    constexpr int SROW = LOAD_WORDS * WORD + S.pad;
    typedef typename unit_t<U>::type unit;
    __shared__ __align__(16) unsigned char s_tile[SRC_ROWS * SROW];

    const int OW = TRANSPOSE ? H : W, OH = TRANSPOSE ? W : H;
    const int r0 = (blockIdx.x / tiles_x) * S.rows, c0 = (blockIdx.x % tiles_x) * S.cols;
    const int nr = min(S.rows, OH - r0), nc = min(S.cols, OW - c0);

    /* The source block: rows [srow0, srow0 + n_srows), cols [scol0, scol0 + n_scols). */
    const int n_srows = TRANSPOSE ? nc : nr, n_scols = TRANSPOSE ? nr : nc;
    const int srow0 = TRANSPOSE ? (rev_rows ? H - (c0 + nc) : c0) : (rev_rows ? H - (r0 + nr) : r0);
    const int scol0 = TRANSPOSE ? (rev_cols ? W - (r0 + nr) : r0) : (rev_cols ? W - (c0 + nc) : c0);
    const size_t first_byte = (size_t)scol0 * E;
    const size_t abase = first_byte & ~(size_t)15;
    const int shift = (int)(first_byte - abase);
    const int src_words = (shift + n_scols * E + 15) / 16;

    /* Load: aligned 16-byte words of each source row into shared memory. */
    for (int i = threadIdx.x; i < n_srows * LOAD_WORDS; i += kThreads) {
        const int row = i / LOAD_WORDS, word = i % LOAD_WORDS;
        if (word < src_words) {
            const uint4 v = *reinterpret_cast<const uint4 *>(
                d_in + (size_t)(srow0 + row) * in_pitch + abase + 16 * (size_t)word);
            unsigned char *s = s_tile + row * SROW + WORD * word;
            if constexpr (WORD == 16 && SROW % 16 == 0) {
                *reinterpret_cast<uint4 *>(s) = v;
            } else {
                uint32_t *s32 = reinterpret_cast<uint32_t *>(s);
                s32[0] = v.x; s32[1] = v.y; s32[2] = v.z; s32[3] = v.w;
            }
        }
    }
    __syncthreads();

    /* Store: consecutive lanes write consecutive 16-byte words of output
     * rows, so a warp writes whole sectors. Word w starts inside pixel
     * q0 = 16w / E at byte b0 = 16w % E. */
    const int out_words = (nc * E + 15) / 16;
    const bool full = nr == S.rows && nc == S.cols;
    const int rev = TRANSPOSE ? rev_rows : rev_cols;  /* along the output row */
    for (int i = threadIdx.x; i < nr * ROW_WORDS; i += kThreads) {
        const int ir = i / ROW_WORDS, word = i % ROW_WORDS;
        if (word >= out_words)
            continue;
        const int q0 = word * 16 / E, b0 = word * 16 % E;
        /* The coordinate of the source block that is fixed along this output row. */
        const int fixed = TRANSPOSE ? (rev_cols ? nr - 1 - ir : ir) : (rev_rows ? nr - 1 - ir : ir);
        /* Unit (pixel q0 + dq, byte b) of the source block. */
        auto fetch = [&](int dq, int b) {
            int q = q0 + dq;
            /* Past the tile (a partial tile, or the spare pixel of a window):
             * any loaded byte will do, it is never stored. */
            if (!full || 16 % E != 0)
                q = min(q, nc - 1);
            const int along = rev ? nc - 1 - q : q;
            const int lrow = TRANSPOSE ? along : fixed, lcol = TRANSPOSE ? fixed : along;
            const int x = shift + lcol * E + b;
            const int sx = S.spread ? x + 4 * (x >> 4) : x;
            return *reinterpret_cast<const unit *>(s_tile + lrow * SROW + sx);
        };
        uint4 v;
        if constexpr (!TRANSPOSE && E <= 2) {
            if (full) {
                /* A row copied or mirrored: the word's 16 bytes are one
                 * contiguous run of the shared row. Five aligned 4-byte
                 * reads and a funnel shift fetch it (instead of 16 or 8
                 * narrow reads), a byte permute mirrors it. */
                constexpr int PIX = 16 / E;
                const int x0 = shift + (rev ? nc - q0 - PIX : q0) * E;
                const int a = x0 & ~3, bits = 8 * (x0 & 3);
                const unsigned char *srow = s_tile + fixed * SROW;
                auto word_at = [&](int xa) {
                    return *reinterpret_cast<const uint32_t *>(
                        srow + (S.spread ? xa + 4 * (xa >> 4) : xa));
                };
                uint32_t in[5];
#pragma unroll
                for (int n = 0; n < 4; n++)
                    in[n] = word_at(a + 4 * n);
                in[4] = bits ? word_at(a + 16) : 0;   /* only read when it is needed */
                uint32_t w[4];
#pragma unroll
                for (int m = 0; m < 4; m++)
                    w[m] = __funnelshift_r(in[m], in[m + 1], bits);
                if (rev) {
                    constexpr unsigned mirror = E == 1 ? 0x0123 : 0x1032;
                    v = make_uint4(__byte_perm(w[3], 0, mirror), __byte_perm(w[2], 0, mirror),
                                   __byte_perm(w[1], 0, mirror), __byte_perm(w[0], 0, mirror));
                } else {
                    v = make_uint4(w[0], w[1], w[2], w[3]);
                }
                *reinterpret_cast<uint4 *>(d_out + (size_t)(r0 + ir) * out_pitch +
                                           (size_t)c0 * E + 16 * (size_t)word) = v;
                continue;
            }
        }
        if constexpr (16 % E == 0) {
            /* Whole pixels per word: b0 == 0, every offset is a constant. */
            v = assemble<U>([&](int k) { return fetch(k * U / E, k * U % E); });
        } else {
            /* Pixels of 3, 6 or 12 bytes: b0 varies from lane to lane. Rather
             * than branch on it, fetch the P whole pixels that cover any
             * phase into a small window (constant positions), then funnel-
             * shift the 16 bytes at b0 out of it: no divergence. */
            constexpr int P = (16 + E - G + E - 1) / E;
            constexpr int NBUF = (P * E + 3) / 4 + 2;
            uint32_t buf[NBUF];
#pragma unroll
            for (int n = 0; n < NBUF; n++)
                buf[n] = 0;
#pragma unroll
            for (int p = 0; p < P; p++)
#pragma unroll
                for (int b = 0; b < E; b += U) {
                    const int pos = p * E + b;
                    buf[pos / 4] |= (uint32_t)fetch(p, b) << (8 * (pos % 4));
                }
            const int ws = b0 / 4, bits = 8 * (b0 % 4);
            uint32_t w[4];
#pragma unroll
            for (int m = 0; m < 4; m++) {
                const uint32_t lo = ws == 0 ? buf[m] : ws == 1 ? buf[m + 1] : buf[m + 2];
                const uint32_t hi = ws == 0 ? buf[m + 1] : ws == 1 ? buf[m + 2] : buf[m + 3];
                w[m] = __funnelshift_r(lo, hi, bits);
            }
            v = make_uint4(w[0], w[1], w[2], w[3]);
        }
        *reinterpret_cast<uint4 *>(d_out + (size_t)(r0 + ir) * out_pitch + (size_t)c0 * E +
                                   16 * (size_t)word) = v;
    }
}

/* Launches the kernel for one pixel size and tile shape (the benchmark
 * times other shapes through this too). */
template <int E, bool TRANSPOSE, int ROWS = shape_of(E, TRANSPOSE).rows,
          int COLS = shape_of(E, TRANSPOSE).cols, int PAD = shape_of(E, TRANSPOSE).pad,
          bool SPREAD = shape_of(E, TRANSPOSE).spread>
cudaError_t launch_shape(const void *d_in, size_t in_pitch, int W, int H, void *d_out,
                         size_t out_pitch, int rev_rows, int rev_cols, cudaStream_t stream)
{
    const int OW = TRANSPOSE ? H : W, OH = TRANSPOSE ? W : H;
    const int tiles_x = (OW + COLS - 1) / COLS, tiles_y = (OH + ROWS - 1) / ROWS;
    const long long tiles = (long long)tiles_x * tiles_y;
    if (tiles > 0x7fffffffLL)
        return cudaErrorInvalidValue;
    orient_kernel<E, TRANSPOSE, ROWS, COLS, PAD, SPREAD><<<(unsigned)tiles, kThreads, 0, stream>>>(
        static_cast<const unsigned char *>(d_in), in_pitch, W, H,
        static_cast<unsigned char *>(d_out), out_pitch, rev_rows, rev_cols, tiles_x);
    return cudaGetLastError();
}

template <int E>
cudaError_t launch(const void *d_in, size_t in_pitch, int W, int H, void *d_out, size_t out_pitch,
                   int transpose, int rev_rows, int rev_cols, cudaStream_t stream)
{
    return transpose ? launch_shape<E, true>(d_in, in_pitch, W, H, d_out, out_pitch, rev_rows,
                                             rev_cols, stream)
                     : launch_shape<E, false>(d_in, in_pitch, W, H, d_out, out_pitch, rev_rows,
                                              rev_cols, stream);
}

} // namespace

extern "C" cudaError_t gimg_cuda_orient(const void *d_in, size_t in_pitch_bytes, int width,
                                        int height, void *d_out, size_t out_pitch_bytes,
                                        int pixel_bytes, int transpose, int rev_rows,
                                        int rev_cols, cudaStream_t stream)
{
    if (width < 1 || height < 1 || in_pitch_bytes % 16 || out_pitch_bytes % 16 ||
        ((uintptr_t)d_in | (uintptr_t)d_out) % 16)
        return cudaErrorInvalidValue;
#define GIMG_ORIENT_CASE(e)                                                                     \
    case e:                                                                                     \
        return launch<e>(d_in, in_pitch_bytes, width, height, d_out, out_pitch_bytes, transpose, \
                         rev_rows, rev_cols, stream);
    switch (pixel_bytes) {
        GIMG_ORIENT_CASE(1)
        GIMG_ORIENT_CASE(2)
        GIMG_ORIENT_CASE(3)
        GIMG_ORIENT_CASE(4)
        GIMG_ORIENT_CASE(6)
        GIMG_ORIENT_CASE(8)
        GIMG_ORIENT_CASE(12)
        GIMG_ORIENT_CASE(16)
    default:
        return cudaErrorInvalidValue;
    }
#undef GIMG_ORIENT_CASE
}
