/*
 * histogram.cu — per-channel histograms (and a luma histogram) of
 * interleaved 8-bit, 16-bit and float images, counted in one pass.
 *
 * Layout: rows of width * channels samples at a pitch that is a multiple of
 * 16 bytes, each row's allocation reaching its pitch (gimg's device buffers
 * are allocated that way), so every thread reads whole 16-byte words.
 * Output: (channels + luma) x (bins + 3) 64-bit counters, the bins then the
 * below / above / NaN slots (lib/hist_internal.h), summed with atomics.
 *
 * Work: every byte of the image is read once; per sample a slot is found
 * (a byte extract for the default 8-bit histogram, a shift, a table or the
 * double-precision formula of gimg_hist_slot_of for float) and one shared-
 * memory counter is incremented. Nothing is written but the counters, so
 * the ceiling is the device's read bandwidth, about the copy's rate
 * counting read + write bytes (2.9 TB/s on an H100, 4.2 TB/s on an H200):
 * the target is CUB's DeviceHistogram or better on every channel count, on
 * random and on constant images alike. For 8-bit gray that is one shared
 * atomic per byte read, so at full bandwidth the shared-atomic unit, not
 * DRAM, is the first limit, and the instructions around each atomic must be
 * few (three for the default 8-bit histogram: extract, address, atomic).
 * Measured on an H100 at 8192x8192 (make bench), GB/s read: gray 2090
 * random / 2160 constant, RGB 2340 / 2580, RGBA 2670 / 2670 — 1.2x to 3x
 * CUB's DeviceHistogram and 1.4x to 3.1x nppiHistogramEven; RGB and RGBA
 * are at the shared-atomic unit's rate (about 11 increments per clock per
 * SM), gray near it plus the launch's fixed cost.
 *
 * Why it is written this way
 *  - Privatized counters: each block counts into shared memory and adds its
 *    counts to the global 64-bit counters once, at the end (only non-zero
 *    ones), so global atomics are a few per bin per block.
 *  - Replicated counters, one replica per lane (R = 32): counter (bin, r)
 *    lives at word bin * 32 + r, so lane r only ever touches bank r. A warp's
 *    32 increments hit 32 different banks whatever the data: random data has
 *    no bank conflicts and a constant image (every lane on one bin) no
 *    same-address serialization. A constant image counts as fast as a
 *    random one. The merge reads the replicas rotated by the bin (lane t
 *    reads replica (r + t) % 32), so it is conflict-free too.
 *  - All channels in one pass over interleaved pixels: a thread takes a
 *    unit of whole pixels that is also whole 16-byte words — 16 bytes, or
 *    48 for RGB (16 pixels of 8-bit, 8 of 16-bit, 4 of float) — so each
 *    sample's channel is a compile-time constant and luma is computed from
 *    the pixel's own samples. Each thread loads all of its units for an
 *    iteration (4 words) before counting any, to keep loads in flight.
 *  - A grid sized to the device: as many blocks as fit at once
 *    (occupancy), striding over the image; more blocks would only add
 *    merges.
 *  - Paths by histogram size. Replicated counters cost 128 bytes per slot
 *    and channel; while (channels + luma) * (bins + 3) * 128 bytes fit in
 *    a block's shared memory (about 1800 slots in all: every 8-bit
 *    histogram of up to 256 bins, RGBA with luma included, and 16-bit ones
 *    of up to about 350 bins per channel) that is the path. Larger
 *    histograms (up to 65536 bins, e.g. the exact 16-bit histogram) take
 *    the second path: one replica per counter (4 bytes a slot), the slots
 *    split into as many windows as needed to fit in shared memory; the
 *    grid's second dimension is the window, each window's blocks read the
 *    whole image and count only their window's slots (two passes for one
 *    channel of 65536 bins, four for RGB). There a warp whose lanes all
 *    hit one counter (a flat area) adds 32 once, through the lane mask.
 *  - 32-bit shared counters cannot overflow: the launcher splits images
 *    of more than 2^31 samples into bands of rows, one launch each.
 *  - Exactness: slots come from the same code as the CPU's
 *    (gimg_hist_slot_of, gimg_luma_* in lib/hist_internal.h, with their
 *    roundings spelt out for the device), and counts are integers, so the
 *    GPU's counts equal the CPU's.
 */
#include "histogram.h"
#include "hist_internal.h"

#include <mutex>
#include <stdint.h>

namespace {

constexpr int kMaxThreads = 1024;
constexpr int kWordsPerIter = 4;   /* 16-byte words each thread loads per iteration (gray, RGBA) */

struct Map {
    int bins, first, shift;
    const uint32_t *lut;
    double lo, hi, width;
};

template <int MODE> __device__ __forceinline__ uint32_t int_slot(uint32_t v, const Map &m)
{
    if constexpr (MODE == GIMG_CUDA_HIST_IDENT) {
        return v;
    } else if constexpr (MODE == GIMG_CUDA_HIST_SHIFT) {
        int d = (int)v - m.first;
        if (d < 0)
            return m.bins + GIMG_HIST_SLOT_BELOW;
        d >>= m.shift;
        return d < m.bins ? (uint32_t)d : (uint32_t)(m.bins + GIMG_HIST_SLOT_ABOVE);
    } else {
        return __ldg(m.lut + v);
    }
}

/* Sample i (compile-time) of a unit held as 32-bit words. */
template <typename T> __device__ __forceinline__ uint32_t raw_sample(const uint32_t *w, int i)
{
    if constexpr (sizeof(T) == 1)
        return (w[i / 4] >> (8 * (i % 4))) & 0xffu;
    else if constexpr (sizeof(T) == 2)
        return (w[i / 2] >> (16 * (i % 2))) & 0xffffu;
    else
        return w[i];
}

/*
 * The counting kernel. T: sample type; C: channels; LUMA: count luma as
 * channel C; MODE: how integer samples find their slot (FLOAT for float);
 * R: replicas per counter (32, 16, 8: the replicated path; 1: windows).
 * Shared memory: s_hist[(c * K + k) * R + r] for channel c, slot slot0 + k.
 * W, H: the image as the launcher presents it (a contiguous image is one
 * row of W * H pixels).
 */
template <typename T, int C, bool LUMA, int MODE, int R>
__global__ void __launch_bounds__(kMaxThreads, 1)
hist_kernel(const unsigned char *__restrict__ d_img, size_t pitch, int W, int H, Map m,
            int n_slots, int window, unsigned long long *__restrict__ d_counts)
{
    extern __shared__ uint32_t s_hist[];
    constexpr int CL = C + (LUMA ? 1 : 0);
    constexpr int PB = C * (int)sizeof(T);           /* pixel bytes */
    constexpr int UB = C == 3 ? 48 : 16;              /* unit bytes */
    constexpr int NW = UB / 16;                       /* words per unit */
    constexpr int PPU = UB / PB;                      /* pixels per unit */
    constexpr int UNITS = kWordsPerIter / NW > 0 ? kWordsPerIter / NW : 1;
    const int K = window, slot0 = blockIdx.y * window;
    const int k_here = min(K, n_slots - slot0);       /* this window's slots */

    for (int i = threadIdx.x; i < CL * K * R; i += blockDim.x)
        s_hist[i] = 0;
    __syncthreads();

    const int lane = threadIdx.x & 31;
    uint32_t *const s_mine = s_hist + (R > 1 ? (lane & (R - 1)) : 0);

    /* Adds one to channel c's slot. */
    auto count = [&](int c, uint32_t slot) {
        if constexpr (R > 1) {
            atomicAdd(s_mine + (c * K + (int)slot) * R, 1u);
        } else {
            const int k = (int)slot - slot0;
            /* A flat area: the converged lanes all on one slot add once. */
            const unsigned active = __activemask();
            const int leader = __ffs(active) - 1;
            const int k0 = __shfl_sync(active, k, leader);
            if (__all_sync(active, k == k0)) {
                if (lane == leader && (unsigned)k < (unsigned)k_here)
                    atomicAdd(s_hist + c * K + k, (uint32_t)__popc(active));
            } else if ((unsigned)k < (unsigned)k_here) {
                atomicAdd(s_hist + c * K + k, 1u);
            }
        }
    };

    /* Counts the first n pixels of a unit (n == PPU for a whole one). */
    auto count_unit = [&](const uint32_t *w, int n) {
#pragma unroll
        for (int p = 0; p < PPU; p++) {
            if (p >= n)
                break;
            if constexpr (MODE == GIMG_CUDA_HIST_FLOAT) {
                float s[C];
#pragma unroll
                for (int c = 0; c < C; c++) {
                    s[c] = __uint_as_float(raw_sample<T>(w, p * C + c));
                    count(c, gimg_hist_slot_of(s[c], m.lo, m.hi, m.width, m.bins, 1));
                }
                if constexpr (LUMA) {
                    const float y = C < 3 ? s[0] : gimg_luma_float(s[0], s[1], s[2]);
                    count(C, gimg_hist_slot_of(y, m.lo, m.hi, m.width, m.bins, 1));
                }
            } else {
                uint32_t s[C];
#pragma unroll
                for (int c = 0; c < C; c++) {
                    s[c] = raw_sample<T>(w, p * C + c);
                    count(c, int_slot<MODE>(s[c], m));
                }
                if constexpr (LUMA) {
                    const uint32_t y = C < 3 ? s[0] : gimg_luma_int(s[0], s[1], s[2]);
                    count(C, int_slot<MODE>(y, m));
                }
            }
        }
    };

    const unsigned upr = (unsigned)((W + PPU - 1) / PPU);       /* units per row */
    const unsigned total = upr * (unsigned)H;
    const unsigned row_words = (unsigned)(((size_t)W * PB + 15) / 16);
    const unsigned step = gridDim.x * blockDim.x * UNITS;
    /* Loads the units of the iteration at `base` (n[u] = 0: none). */
    auto load = [&](unsigned base, uint32_t (&w)[UNITS][NW * 4], int (&n)[UNITS]) {
#pragma unroll
        for (int u = 0; u < UNITS; u++) {
            const unsigned unit = base + u * blockDim.x;
            n[u] = 0;
#pragma unroll
            for (int k = 0; k < NW * 4; k++)
                w[u][k] = 0;
            if (unit < total) {
                const unsigned row = H > 1 ? unit / upr : 0, col = unit - row * upr;
                const uint4 *src = reinterpret_cast<const uint4 *>(
                    d_img + (size_t)row * pitch + (size_t)col * UB);
                n[u] = min(PPU, W - (int)(col * PPU));
#pragma unroll
                for (int k = 0; k < NW; k++) {
                    if (NW == 1 || col * NW + k < row_words) {
                        const uint4 v = __ldg(src + k);
                        w[u][4 * k] = v.x;
                        w[u][4 * k + 1] = v.y;
                        w[u][4 * k + 2] = v.z;
                        w[u][4 * k + 3] = v.w;
                    }
                }
            }
        }
    };
    auto count_all = [&](const uint32_t (&w)[UNITS][NW * 4], const int (&n)[UNITS]) {
#pragma unroll
        for (int u = 0; u < UNITS; u++) {
            if (n[u] == PPU)
                count_unit(w[u], PPU);
            else if (n[u] > 0)
                count_unit(w[u], n[u]);
        }
    };
    unsigned base = blockIdx.x * blockDim.x * UNITS + threadIdx.x;
    uint32_t w[UNITS][NW * 4];
    int n[UNITS];
    if constexpr (MODE == GIMG_CUDA_HIST_FLOAT) {
        /* Float is bound by its double-precision division, not by memory:
         * no registers to spare for a second set of words. */
        for (; base < total; base += step) {
            load(base, w, n);
            count_all(w, n);
        }
    } else {
        /* Software pipelined: the next iteration's loads are in flight
         * while this one's samples are counted. */
        load(base, w, n);
        for (; base < total; base += step) {
            uint32_t w_next[UNITS][NW * 4];
            int n_next[UNITS];
            load(base + step < base ? total : base + step, w_next, n_next);
            count_all(w, n);
#pragma unroll
            for (int u = 0; u < UNITS; u++) {
                n[u] = n_next[u];
#pragma unroll
                for (int k = 0; k < NW * 4; k++)
                    w[u][k] = w_next[u][k];
            }
        }
    }
    __syncthreads();

    /* Merge: one thread per (channel, slot), summing its replicas rotated
     * so that a warp's reads fall in 32 different banks. */
    for (int i = threadIdx.x; i < CL * k_here; i += blockDim.x) {
        const int c = i / k_here, k = i - c * k_here;
        const int word = (c * K + k) * R;
        uint32_t sum = 0;
#pragma unroll
        for (int r = 0; r < R; r++)
            sum += s_hist[word + ((r + k) & (R - 1))];
        if (sum)
            atomicAdd(d_counts + (size_t)c * n_slots + slot0 + k, (unsigned long long)sum);
    }
}

typedef void (*kernel_fn)(const unsigned char *, size_t, int, int, Map, int, int,
                          unsigned long long *);

template <typename T, int C, bool LUMA, int MODE>
kernel_fn pick_r(int replicas)
{
    if constexpr (MODE == GIMG_CUDA_HIST_IDENT) {
        switch (replicas) {
        case 32: return hist_kernel<T, C, LUMA, MODE, 32>;
        case 16: return hist_kernel<T, C, LUMA, MODE, 16>;
        case 8: return hist_kernel<T, C, LUMA, MODE, 8>;
        default: return nullptr;  /* IDENT histograms always fit replicated */
        }
    } else {
        return replicas == 32 ? hist_kernel<T, C, LUMA, MODE, 32>
             : replicas == 1  ? hist_kernel<T, C, LUMA, MODE, 1>
                              : nullptr;
    }
}

template <typename T, int C, bool LUMA> kernel_fn pick_mode(int mode, int replicas)
{
    if constexpr (sizeof(T) == 4) {
        return mode == GIMG_CUDA_HIST_FLOAT ? pick_r<T, C, LUMA, GIMG_CUDA_HIST_FLOAT>(replicas)
                                            : nullptr;
    } else {
        switch (mode) {
        case GIMG_CUDA_HIST_IDENT:
            if constexpr (sizeof(T) == 1)
                return pick_r<T, C, LUMA, GIMG_CUDA_HIST_IDENT>(replicas);
            return nullptr;
        case GIMG_CUDA_HIST_SHIFT: return pick_r<T, C, LUMA, GIMG_CUDA_HIST_SHIFT>(replicas);
        case GIMG_CUDA_HIST_LUT: return pick_r<T, C, LUMA, GIMG_CUDA_HIST_LUT>(replicas);
        default: return nullptr;
        }
    }
}

template <typename T, int C> kernel_fn pick_luma(int luma, int mode, int replicas)
{
    return luma ? pick_mode<T, C, true>(mode, replicas) : pick_mode<T, C, false>(mode, replicas);
}

template <typename T> kernel_fn pick_channels(int channels, int luma, int mode, int replicas)
{
    switch (channels) {
    case 1: return pick_luma<T, 1>(luma, mode, replicas);
    case 2: return pick_luma<T, 2>(luma, mode, replicas);
    case 3: return pick_luma<T, 3>(luma, mode, replicas);
    case 4: return pick_luma<T, 4>(luma, mode, replicas);
    default: return nullptr;
    }
}

/*
 * The launch set-up (raising a kernel's shared-memory limit, its occupancy,
 * the device's limits) costs several microseconds of API calls, as long as
 * the kernel itself on a 64 MB image: done once per kernel, shape and
 * device, and remembered.
 */
struct config { kernel_fn k; int dev, threads; size_t smem; int per_sm; };
std::mutex g_config_lock;
config g_configs[64];
int g_n_configs;
struct limits { int dev, smem_max, sms; };
limits g_limits[16];
int g_n_limits;

cudaError_t device_limits(int dev, int *smem_max, int *sms)
{
    std::lock_guard<std::mutex> hold(g_config_lock);
    for (int i = 0; i < g_n_limits; i++)
        if (g_limits[i].dev == dev) {
            *smem_max = g_limits[i].smem_max;
            *sms = g_limits[i].sms;
            return cudaSuccess;
        }
    cudaError_t e;
    if ((e = cudaDeviceGetAttribute(smem_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev)) ||
        (e = cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, dev)))
        return e;
    if (g_n_limits < 16)
        g_limits[g_n_limits++] = {dev, *smem_max, *sms};
    return cudaSuccess;
}

cudaError_t blocks_per_sm(kernel_fn k, int dev, int threads, size_t smem, int *per_sm)
{
    std::lock_guard<std::mutex> hold(g_config_lock);
    for (int i = 0; i < g_n_configs; i++) {
        const config &c = g_configs[i];
        if (c.k == k && c.dev == dev && c.threads == threads && c.smem == smem) {
            *per_sm = c.per_sm;
            return cudaSuccess;
        }
    }
    cudaError_t e;
    if ((e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem)) ||
        (e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(per_sm, k, threads, smem)))
        return e;
    if (*per_sm < 1)
        return cudaErrorInvalidConfiguration;
    /* A kernel's limit only grows here, so a remembered entry stays valid. */
    int max_smem = 0;
    for (int i = 0; i < g_n_configs; i++)
        if (g_configs[i].k == k && g_configs[i].dev == dev && g_configs[i].smem > (size_t)max_smem)
            max_smem = (int)g_configs[i].smem;
    if ((size_t)max_smem > smem &&
        (e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem)))
        return e;
    if (g_n_configs < 64)
        g_configs[g_n_configs++] = {k, dev, threads, smem, *per_sm};
    return cudaSuccess;
}

} // namespace

extern "C" cudaError_t gimg_cuda_hist_shaped(const void *d_img, size_t pitch_bytes, int width,
                                             int height, int channels, int sample_bytes,
                                             const gimg_cuda_hist_map *map,
                                             unsigned long long *d_counts, int replicas,
                                             int threads, cudaStream_t stream)
{
    if (width < 1 || height < 1 || channels < 1 || channels > 4 || pitch_bytes % 16 ||
        (uintptr_t)d_img % 16 || map->bins < 1 || map->bins > GIMG_HIST_MAX_BINS ||
        (size_t)width * channels * sample_bytes > pitch_bytes)
        return cudaErrorInvalidValue;
    const int cl = channels + (map->luma ? 1 : 0);
    const int n_slots = map->bins + GIMG_HIST_EXTRA_SLOTS;
    cudaError_t e;
    int dev, smem_max, sms;
    if ((e = cudaGetDevice(&dev)) || (e = device_limits(dev, &smem_max, &sms)))
        return e;
    /* The path: replicated counters where they fit, else windows of slots. */
    if (replicas == 0)
        replicas = (size_t)cl * n_slots * 32 * sizeof(uint32_t) <= (size_t)smem_max ? 32 : 1;
    int window = n_slots;
    if (replicas == 1)
        window = (int)((size_t)smem_max / (sizeof(uint32_t) * cl)) < n_slots
                     ? (int)((size_t)smem_max / (sizeof(uint32_t) * cl))
                     : n_slots;
    const size_t smem = (size_t)cl * window * replicas * sizeof(uint32_t);
    if (smem > (size_t)smem_max || window < 1)
        return cudaErrorInvalidValue;
    const int windows = (n_slots + window - 1) / window;

    kernel_fn k = sample_bytes == 1 ? pick_channels<uint8_t>(channels, map->luma, map->mode, replicas)
                : sample_bytes == 2 ? pick_channels<uint16_t>(channels, map->luma, map->mode, replicas)
                : sample_bytes == 4 ? pick_channels<float>(channels, map->luma, map->mode, replicas)
                                    : nullptr;
    if (!k)
        return cudaErrorInvalidValue;
    if (threads == 0)
        threads = kMaxThreads;
    if (threads < 32 || threads > kMaxThreads || threads % 32)
        return cudaErrorInvalidValue;
    int per_sm = 0;
    if ((e = blocks_per_sm(k, dev, threads, smem, &per_sm)))
        return e;

    if ((e = cudaMemsetAsync(d_counts, 0, sizeof(unsigned long long) * cl * n_slots, stream)))
        return e;
    Map m = {map->bins, map->first, map->shift, map->d_lut, map->lo, map->hi, map->hi - map->lo};

    /* Bands of rows of at most 2^31 samples (so that no 32-bit shared
     * counter can overflow, and unit indices fit 32 bits); a contiguous
     * band is presented as one long row. */
    const size_t row_bytes = (size_t)width * channels * sample_bytes;
    const size_t row_samples = (size_t)width * channels;
    int band = (int)(((size_t)1 << 31) / row_samples);
    if (band < 1)
        band = 1;  /* a row has at most 2^24 * 4 samples */
    const int ppu = (channels == 3 ? 48 : 16) / (channels * sample_bytes);
    const int units_per_iter = channels == 3 ? 1 : kWordsPerIter;
    for (int y = 0; y < height; y += band) {
        const int rows = height - y < band ? height - y : band;
        const unsigned char *band_img = static_cast<const unsigned char *>(d_img) + y * pitch_bytes;
        int w = width, h = rows;
        if (pitch_bytes == row_bytes && (size_t)width * rows <= 0x7fffffffu) {
            w = width * rows;
            h = 1;
        }
        const size_t units = ((size_t)w + ppu - 1) / ppu * (size_t)h;
        size_t blocks = (units + (size_t)threads * units_per_iter - 1) /
                        ((size_t)threads * units_per_iter);
        if (blocks > (size_t)per_sm * sms)
            blocks = (size_t)per_sm * sms;
        dim3 grid((unsigned)blocks, (unsigned)windows);
        k<<<grid, threads, smem, stream>>>(band_img, pitch_bytes, w, h, m, n_slots, window,
                                           d_counts);
        if ((e = cudaGetLastError()))
            return e;
    }
    return cudaSuccess;
}

extern "C" cudaError_t gimg_cuda_hist(const void *d_img, size_t pitch_bytes, int width,
                                      int height, int channels, int sample_bytes,
                                      const gimg_cuda_hist_map *map,
                                      unsigned long long *d_counts, cudaStream_t stream)
{
    return gimg_cuda_hist_shaped(d_img, pitch_bytes, width, height, channels, sample_bytes, map,
                                 d_counts, 0, 0, stream);
}
