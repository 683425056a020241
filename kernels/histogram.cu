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
 * Work: every byte of the image is read once (for the largest histograms
 * once per window, from L2 after the first: see below); per sample a slot
 * is found (a byte extract for the default 8-bit histogram, a shift, a table or the
 * double-precision formula of gimg_hist_slot_of for float) and one shared-
 * memory counter is incremented. Nothing is written but the counters, so
 * the ceiling is the device's read bandwidth, about the copy's rate
 * counting read + write bytes (2.9 TB/s on an H100, 4.2 TB/s on an H200):
 * the target is CUB's DeviceHistogram or better on every channel count, on
 * random and on constant images alike, and twice nppiHistogramEven. For
 * 8-bit gray that is one shared atomic per byte read, and ncu shows the
 * default 8-bit histogram bound by instruction issue (77-88% issue-active
 * on an H200, with five instructions a sample), not by the atomic unit:
 * the instructions around each atomic must be few. The byte-addressed
 * layout below takes one (prmt) besides the atomic.
 * Measured at 8192x8192 (make bench, GB/s read; tests/bench/RESULTS.md):
 * H200: gray 2730 random / 2900 constant, RGB 3620 / 3670, RGBA 3740 /
 * 3810: 2.2x to 4.4x nppiHistogramEven except constant gray (1.8x: NPP
 * reads a flat image fast, and a 64 MB call cannot take half of its 42-45
 * us), 1.3x to 4.4x CUB's DeviceHistogram. H100 (before the kernel
 * cleared its own counters): gray 2210 / 2170, RGB 2600 / 2570, RGBA
 * 2660 / 2660, at its read bandwidth less the call's fixed cost (1.5x to
 * 3.1x NPP, 1.3x to 3.1x CUB); the byte addresses change nothing there.
 *
 * Why it is written this way
 *  - Privatized counters: each block counts into shared memory and adds its
 *    counts to the global 64-bit counters once, at the end (only non-zero
 *    ones), so global atomics are a few per bin per block.
 *  - The kernel clears the global counters itself, a few blocks a share
 *    while the others start counting, rather than a cudaMemsetAsync before
 *    it: one launch a call instead of two. The memset cost 3-4 us a call
 *    for RGB and RGBA (H200, 8192x8192: RGB 0.060 -> 0.055 ms, RGBA 0.075
 *    -> 0.071) and about 1 us for gray. A kernel started early by
 *    programmatic dependent launch after a clearing kernel of its own saved
 *    nothing: the second launch costs what the memset did.
 *  - Replicated counters, one replica per lane (R = 32): counter (bin, r)
 *    lives at word bin * 32 + r, so lane r only ever touches bank r. A warp's
 *    32 increments hit 32 different banks whatever the data: random data has
 *    no bank conflicts and a constant image (every lane on one bin) no
 *    same-address serialization. The merge reads the replicas rotated by
 *    the bin (lane t reads replica (r + t) % 32), so it is conflict-free too.
 *  - Byte addresses for the default 8-bit histogram (256 bins, 32
 *    replicas, no luma): channels in pairs, 256 bytes a slot, so that
 *    counter (c, v, r) is the byte address (c >> 1, v, (c & 1) << 7 | r << 2)
 *    and one prmt builds it from the sample's byte in the loaded word and
 *    the lane's constant bytes. Two instructions a sample with the atomic,
 *    against five (shift, mask, or, multiply-add, atomic): gray 1.2x, RGBA
 *    1.2x faster on an H200, RGB 1.03x. Costs 64 KB of shared memory for
 *    gray (twice the plain layout), 128 KB for RGB and RGBA.
 *  - Flat areas: a whole unit (below) that repeats one pixel value is
 *    counted with one atomic per channel (adding the unit's pixel count);
 *    the test is a few word compares per unit. A constant image counts at
 *    the speed of its loads, and real images' flat backgrounds get cheaper.
 *  - All channels in one pass over interleaved pixels: a thread takes a
 *    unit of whole pixels that is also whole 16-byte words — 16 bytes, or
 *    48 for RGB (16 pixels of 8-bit, 8 of 16-bit, 4 of float) — so each
 *    sample's channel is a compile-time constant and luma is computed from
 *    the pixel's own samples. Each thread loads all of its units for an
 *    iteration (4 words) before counting any, and the next iteration's
 *    while it counts, to keep loads in flight (an L2 prefetch two to four
 *    iterations ahead, or a cp.async ring of three in shared memory, were
 *    slower or no faster: RESULTS.md).
 *  - A grid sized to the device: as many blocks as fit at once
 *    (occupancy), striding over the image; more blocks would only add
 *    merges.
 *  - Paths by histogram size. Replicated counters cost 128 bytes per slot
 *    and channel; while (channels + luma) * (bins + 3) * 128 bytes fit in
 *    a block's shared memory (about 1800 slots in all: every 8-bit
 *    histogram of up to 256 bins, RGBA with luma included, and 16-bit ones
 *    of up to about 350 bins per channel) that is the path. Larger
 *    histograms (up to 65536 bins, e.g. the exact 16-bit histogram) take
 *    windows, one replica per counter:
 *     - 16-bit pairs (up to three channels, and the exact 16-bit
 *       histogram of one): two counters share a 32-bit
 *       word, so one channel's 65539 slots take 128 KB and a window is a
 *       whole channel: each window's blocks count only their channel's
 *       samples, every lane of every atomic busy. A half that reaches
 *       65536 carries; the atomic's old value shows it and the global
 *       counters take the correction (rare: 65536 counts of one slot in
 *       one block).
 *     - 8-bit quads (the exact 16-bit histogram of two or more channels):
 *       four counters a word, one channel's slots in 64 KB, so a window
 *       holds three channels (RGB in one window, RGBA in two of two) and
 *       each sample is read once per window it is counted in, instead of
 *       once per channel. A byte wraps every 256 counts of its slot in a
 *       block: on random data still rare (8192x8192 RGB: about 8 counts a
 *       slot a block), and flat units go into runs in registers. Carries
 *       are corrected as for pairs, a carry possibly running on through
 *       the word's full bytes above.
 *     - 32-bit counters (other histograms of four or five channels):
 *       windows of slots of every channel, lanes outside the window idle;
 *       measured faster there than pairs with runs, which spill at 1024
 *       threads a block and run 512.
 *    The windows' blocks read the same data at about the same time, so the
 *    image comes from DRAM about once and from L2 for the other windows.
 *    A thread counts runs of one slot in registers (one atomic per run:
 *    a flat area costs almost nothing), except for the exact 16-bit
 *    histogram (pairs or quads of the sample values themselves), which
 *    takes each sample's counter and add straight from the loaded word,
 *    issues its atomics 8 at a time, and counts flat units at once. What
 *    bounds it on random data is the shared atomics themselves, one a
 *    sample, and the old values that narrow counters must test: on an
 *    H100 a kernel of nothing but those atomics (no loads, no carries, no
 *    merge) counts 8192x8192 random gray16 in 0.062-0.064 ms, the
 *    histogram takes 0.071-0.074, and 0.80 of the copy would be 0.059
 *    (the counting floor in bench_stats; tests/bench/RESULTS.md). Adding
 *    +1 to 32-bit words, or keeping half the lanes idle, costs a warp's
 *    atomic as much. The cluster merge's global atomics add about 8 us.
 *    8192x8192, H100 / H200: gray in pairs 0.071-0.074 / 0.070 ms, RGB in
 *    quads 0.26-0.27 / 0.26, RGBA 0.49 / 0.50: on the H100 as fast as
 *    that floor with old values tested, or for RGBA (two windows, two
 *    reads) within 10% of it read once (RESULTS.md).
 *  - Cluster merge: a window has up to 65536 counters a channel; 132
 *    blocks adding them all to global memory cost more than counting a
 *    4096x4096 image. On compute capability 9.0 the 8 blocks of a cluster
 *    first sum theirs through distributed shared memory, 1/8 each, and
 *    only then add: 8 times fewer global atomics.
 *  - 32-bit shared counters cannot overflow: the launcher splits images
 *    of more than 2^31 samples into bands of rows, one launch each.
 *  - Exactness: slots come from the same code as the CPU's
 *    (gimg_hist_slot_of, gimg_luma_* in lib/hist_internal.h, with their
 *    roundings spelt out for the device), and counts are integers, so the
 *    GPU's counts equal the CPU's.
 */
#include "histogram.h"
#include "hist_internal.h"
#include "hist_lean.cuh"
#include "launch.cuh"

#include <cooperative_groups.h>
#include <mutex>
#include <stdint.h>

namespace cg = cooperative_groups;

namespace {

constexpr int kMaxThreads = 1024;
constexpr int kWordsPerIter = 4;   /* 16-byte words each thread loads per iteration (gray, RGBA) */
constexpr int kPairs = GIMG_CUDA_HIST_PAIRS;
constexpr int kQuads = GIMG_CUDA_HIST_QUADS;
constexpr int kBytesReplicas = 32;  /* the replicas of the byte-addressed layout */
/* Shared words of the byte-addressed layout for cl channels (in pairs). */
__host__ __device__ constexpr int bytes_words(int cl) { return (cl + 1) / 2 * 256 * 64; }
constexpr int kMaxCluster = 8;     /* the portable cluster size */

/* Threads a block at most: 1024, but 512 for pairs and quads of two or
 * more channels, whose runs and carry code spill at 64 registers a thread
 * (quads of RGB: 28 bytes, RGBA: 216). */
constexpr int max_threads(int R, int channels)
{
    return (R == kPairs || R == kQuads) && channels > 1 ? 512 : kMaxThreads;
}

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

/* PTX prmt: byte n of the result is byte sel[n] (a selector nibble) of
 * b:a, bytes 0-3 from a and 4-7 from b. */
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel)
{
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
    return d;
}

/* Whether a whole unit holds one pixel value, PPU times: whether its
 * bytes repeat with the pixel's period (a black background, a flat sky, a
 * constant image), checked on words, about one instruction per sample
 * in four. */
template <typename T, int C> __device__ __forceinline__ bool uniform_unit(const uint32_t *w)
{
    constexpr int PB = C * (int)sizeof(T);  /* pixel bytes */
    if constexpr (C == 3) {                 /* 48 bytes: a period of 12, then of PB */
        bool same = true;
#pragma unroll
        for (int k = 0; k + 3 < 12; k++)
            same &= w[k] == w[k + 3];
        if constexpr (PB == 3)              /* r g b r | g b r g | b r g b */
            return same && w[0] == prmt(w[0], 0, 0x0210) && w[1] == prmt(w[0], 0, 0x1021) &&
                   w[2] == prmt(w[0], 0, 0x2102);
        else if constexpr (PB == 6)         /* r g | b r | g b */
            return same && w[1] == prmt(w[1], w[0], 0x5410) && w[2] == prmt(w[0], w[1], 0x5432);
        else
            return same;
    } else if constexpr (PB == 8) {
        return w[0] == w[2] && w[1] == w[3];
    } else {
        const bool words = w[0] == w[1] && w[1] == w[2] && w[2] == w[3];
        if constexpr (PB == 4)
            return words;
        else
            return words && w[0] == __funnelshift_r(w[0], w[0], 8 * PB);
    }
}

/* The global counters are cleared by the counting kernel itself (see the
 * file's head for why), ordered by the caller's sync words, zero before
 * the call and zero again after it: each block takes a ticket as it
 * starts; the first `clearers` to start each clear a share of the counters
 * and then count themselves in; a block waits for all of them before its
 * first global write, which comes after most of its counting (a narrow
 * counter's carry may come sooner, and waits too); and the last block to
 * finish sets the words back to zero. The blocks waited for have
 * started, so the wait ends whatever else the device runs. */
enum { kStarted, kCleared, kDone };  /* the sync words */
static_assert(GIMG_CUDA_HIST_SYNC_BYTES >= (kDone + 1) * sizeof(unsigned),
              "room for the sync words");
constexpr int kClearShare = 8192;    /* counters a clearing block takes at most */
constexpr size_t kTicketSmem = 16;   /* the kernel's static shared memory (s_ticket), aligned */

/* How many blocks of a grid of `blocks` clear `counts` counters. */
__device__ __forceinline__ unsigned clearers_of(unsigned blocks, int counts)
{
    return min(blocks, (unsigned)(counts + kClearShare - 1) / kClearShare);
}

/* Until every clearing block is done (need: how many; 0: nothing to wait for). */
__device__ __forceinline__ void wait_cleared(const unsigned *d_sync, unsigned need)
{
    if (!need)
        return;
    unsigned seen;
    do
        asm volatile("ld.acquire.gpu.u32 %0, [%1];"
                     : "=r"(seen)
                     : "l"(d_sync + kCleared)
                     : "memory");
    while (seen < need);
}

/* A narrow counter wrapped (rare: 65536 counts of one slot in one block
 * for pairs, 256 for quads): the atomic added `add` to slot k's `bits`-wide
 * part of the word that held `old`. A word holds its counters modulo 2^32,
 * so a part that wraps carries one into the next part (which may wrap in
 * turn) and the word's top part carries out of it. Each part's true count
 * is its shared value plus what the global counters took for it: here, for
 * every part from k's up, what was meant (add for k, nothing for the
 * others) less what the part changed by. g is the window's first global
 * counter of the channel, k_here the window's slots; like every global
 * write it waits for the counters' clearing (d_sync, clearers: see
 * above). Not inlined: it is
 * rare, and inlined at every sample it made the exact 16-bit kernel's code
 * 70% larger; written for BITS at compile time and in 32-bit integers, as
 * a call to a function of more registers made the 16-bit gray kernel
 * spill more (164 bytes against 44, 1024 threads of 64 registers). */
template <int BITS>
__device__ __noinline__ void narrow_carried(unsigned long long *g, int k_here, int k, uint32_t add,
                                            uint32_t old, const unsigned *d_sync, unsigned clearers)
{
    wait_cleared(d_sync, clearers);
    constexpr int PER_WORD = 32 / BITS;
    constexpr uint32_t MASK = BITS >= 32 ? ~0u : (1u << (BITS % 32)) - 1u;
    const int part = k & (PER_WORD - 1), k0 = k - part;
    const uint32_t now = old + (add << (part * BITS));
#pragma unroll
    for (int j = 0; j < PER_WORD; j++) {
        const int changed = (int)((now >> (j * BITS)) & MASK) - (int)((old >> (j * BITS)) & MASK);
        const int owed = (j == part ? (int)add : 0) - changed;
        if (j >= part && owed && k0 + j < k_here)
            atomicAdd(g + k0 + j, (unsigned long long)(long long)owed);
    }
}

/*
 * The counting kernel. T: sample type; C: channels; LUMA: count luma as
 * channel C; MODE: how integer samples find their slot (FLOAT for float);
 * R: replicas per counter (32, 16, 8: the replicated path; 1: windows of
 * 32-bit counters; kPairs: windows of two 16-bit counters a word; kQuads:
 * of four 8-bit counters a word, the exact 16-bit histogram only).
 * Shared memory: s_hist[(c * K + k) * R + r] for channel c0 + c, slot
 * slot0 + k (R <= 1: one counter, in word (c * K + k) / SLOTS_PER_WORD, K
 * a multiple of SLOTS_PER_WORD).
 * A window is either whole channels (cpw a window: channels [c0, c0 + cpw)
 * and all their slots), which keeps every lane of an atomic busy, or,
 * where one channel's slots do not fit (cpw = 0), a range of K slots of
 * every channel.
 * W, H: the image as the launcher presents it (a contiguous image is one
 * row of W * H pixels). Blocks come in clusters of `cluster` (1 where
 * there are none) that count one window; cluster i counts window
 * i % windows, so the windows of a group of clusters read the same units
 * at about the same time and all but the first find them in L2.
 */
template <typename T, int C, bool LUMA, int MODE, int R>
__global__ void __launch_bounds__(max_threads(R, C + (LUMA ? 1 : 0)), 1)
hist_kernel(const unsigned char *__restrict__ d_img, size_t pitch, int W, int H, Map m,
            int n_slots, int window, int windows, int cpw, int cluster,
            unsigned long long *__restrict__ d_counts, unsigned *__restrict__ d_sync, int clear)
{
    extern __shared__ uint32_t s_hist[];
    __shared__ unsigned s_ticket;
    constexpr int CL = C + (LUMA ? 1 : 0);
    constexpr int PB = C * (int)sizeof(T);           /* pixel bytes */
    constexpr int UB = C == 3 ? 48 : 16;              /* unit bytes */
    constexpr int NW = UB / 16;                       /* words per unit */
    constexpr int PPU = UB / PB;                      /* pixels per unit */
    constexpr int UNITS = kWordsPerIter / NW > 0 ? kWordsPerIter / NW : 1;
    constexpr bool PAIRS = R == kPairs, QUADS = R == kQuads, NARROW = PAIRS || QUADS;
    constexpr int SLOTS_PER_WORD = PAIRS ? 2 : QUADS ? 4 : 1;
    constexpr int BITS = 32 / SLOTS_PER_WORD;         /* a shared counter's width */
    constexpr uint32_t MASK = BITS == 32 ? ~0u : (1u << (BITS & 31)) - 1u;
    constexpr int REPLICAS = R > 1 ? R : 1;
    const int rank = (int)(blockIdx.x % (unsigned)cluster);
    const int cluster_id = (int)(blockIdx.x / (unsigned)cluster);
    const int group = cluster_id / windows * cluster + rank;
    const int n_groups = (int)gridDim.x / windows;
    const int win = cluster_id % windows;
    const int K = window, slot0 = cpw ? 0 : win * window;
    const int k_here = min(K, n_slots - slot0);       /* this window's slots */
    const int c0 = cpw ? win * cpw : 0, c1 = cpw ? min(CL, c0 + cpw) : CL;
    /* Whether channel c is counted in this window. */
    auto in_window = [&](int c) { return c >= c0 && c < c1; };
    /* The default 8-bit histogram with 32 replicas (BYTES) lays channels
     * out in pairs, 256 slots each: counter (c, v) of replica r is byte
     *     (c >> 1) << 16 | v << 8 | (c & 1) << 7 | r << 2,
     * whole bytes, so that one prmt assembles the address from the
     * sample's byte and the lane's: two instructions a sample with the
     * atomic (the generic layout takes five). */
    constexpr bool BYTES =
        sizeof(T) == 1 && MODE == GIMG_CUDA_HIST_IDENT && R == kBytesReplicas && !LUMA;
    auto word_of = [&](int c, int k) {
        return BYTES ? ((c >> 1) * 256 + k) * 64 + (c & 1) * 32 : (c * K + k) * R;
    };
    const int n_words = BYTES ? bytes_words(CL) : (c1 - c0) * K * REPLICAS / SLOTS_PER_WORD;

    const int lane = threadIdx.x & 31;
    const unsigned clearers = clear ? clearers_of(gridDim.x, CL * n_slots) : 0u;
    if (clear && threadIdx.x == 0)
        s_ticket = atomicAdd(d_sync + kStarted, 1u);
    uint32_t *const s_mine = s_hist + (R > 1 ? (lane & (R - 1)) : 0);

    auto carried = [&](int c, int k, uint32_t add, uint32_t old) {
        narrow_carried<BITS>(d_counts + (size_t)c * n_slots + slot0, k_here, k, add, old, d_sync,
                             clearers);
    };

    /* The windowed paths count runs: each thread holds, per channel, a
     * slot and how many samples in a row fell in it (k << 15 | len, len <
     * 2^15), and adds them at once when another slot comes: a flat area
     * costs one shared atomic per 32767 samples, random data one per
     * sample, with no warp-wide vote. */
    constexpr uint32_t kRunCap = 0x7fff;
    uint32_t run[CL];
#pragma unroll
    for (int c = 0; c < CL; c++)
        run[c] = 0;  /* slot 0, length 0 */
    /* Adds len to channel c's slot k of this window. */
    auto add_to = [&](int c, int k, uint32_t len) {
        if constexpr (NARROW) {
            const int shift = (k & (SLOTS_PER_WORD - 1)) * BITS;
            const uint32_t old =
                atomicAdd(s_hist + (((c - c0) * K + k) >> (SLOTS_PER_WORD / 2)), len << shift);
            if (((old >> shift) & MASK) + len > MASK)
                carried(c, k, len, old);
        } else {
            atomicAdd(s_hist + (c - c0) * K + k, len);
        }
    };
    /* Adds channel c's run to its shared counter. */
    auto flush = [&](int c) {
        if (run[c] & kRunCap)
            add_to(c, (int)(run[c] >> 15), run[c] & kRunCap);
    };
    /* The exact 16-bit histogram in pairs or quads (LEAN) counts without
     * runs: random data gains nothing from them while paying compares and
     * branches a sample, and flat areas are whole units of one value,
     * counted at once (at most PPU <= 8 a count, so a quad's 8-bit
     * counter wraps at most once an add). */
    constexpr bool LEAN = NARROW && MODE == GIMG_CUDA_HIST_IDENT;

    /* Adds `add` (1 .. PPU) to channel c's slot. */
    auto count = [&](int c, uint32_t slot, uint32_t add) {
        if constexpr (R > 1) {
            atomicAdd(s_mine + word_of(c, (int)slot), add);
        } else {
            const uint32_t k = slot - (uint32_t)slot0;
            if (!in_window(c) || k >= (uint32_t)k_here)
                return;  /* another window's */
            if constexpr (LEAN) {
                /* Quads count whole flat units in runs too: adding 8 at a
                 * time, an 8-bit counter would wrap every 32 units (a
                 * constant 4096x4096 image: 0.123 ms against 0.045 for
                 * random data, H200). */
                if (!QUADS || add == 1) {
                    add_to(c, (int)k, add);
                    return;
                }
            }
            if ((run[c] >> 15) == k && (run[c] & kRunCap) + add <= kRunCap) {
                run[c] += add;
            } else {
                flush(c);
                run[c] = k << 15 | add;
            }
        }
    };

    /* BYTES: bytes 0 and 1 of byte_base[c] are bytes 0 and 2 of channel
     * c's counter addresses in this lane. */
    unsigned char *const s_bytes = reinterpret_cast<unsigned char *>(s_hist);
    uint32_t byte_base[C];
#pragma unroll
    for (int c = 0; c < C; c++)
        byte_base[c] = (uint32_t)(lane * 4 + (c & 1) * 128 + (c >> 1) * 256);

    /* LEAN: channel c's counters start at byte lean_base[c] of this
     * window, and are counted in it where lean_in[c]. Held in an array:
     * in_window() tested at each sample made RGBA (two windows) 7%
     * slower (H100, 8192^2: 0.534 ms against 0.497). */
    constexpr int SLOT_BYTES = BITS / 8;
    uint32_t lean_base[C];
    bool lean_in[C];
#pragma unroll
    for (int c = 0; c < C; c++) {
        lean_base[c] = (uint32_t)((c - c0) * K * SLOT_BYTES);
        lean_in[c] = in_window(c);
    }

    /* Counts pixel p of a unit `add` times. */
    auto count_pixel = [&](const uint32_t *w, int p, uint32_t add) {
        if constexpr (MODE == GIMG_CUDA_HIST_FLOAT) {
            float s[C];
#pragma unroll
            for (int c = 0; c < C; c++) {
                s[c] = __uint_as_float(raw_sample<T>(w, p * C + c));
                count(c, gimg_hist_slot_of(s[c], m.lo, m.hi, m.width, m.bins, 1), add);
            }
            if constexpr (LUMA) {
                const float y = C < 3 ? s[0] : gimg_luma_float(s[0], s[1], s[2]);
                count(C, gimg_hist_slot_of(y, m.lo, m.hi, m.width, m.bins, 1), add);
            }
        } else {
            uint32_t s[C];
#pragma unroll
            for (int c = 0; c < C; c++) {
                s[c] = raw_sample<T>(w, p * C + c);
                count(c, int_slot<MODE>(s[c], m), add);
            }
            if constexpr (LUMA) {
                const uint32_t y = C < 3 ? s[0] : gimg_luma_int(s[0], s[1], s[2]);
                count(C, int_slot<MODE>(y, m), add);
            }
        }
    };

    /* Counts the first n pixels of a unit (n == PPU for a whole one); a
     * whole unit of one pixel value takes one count per channel. */
    auto count_unit = [&](const uint32_t *w, int n) {
        if constexpr (PPU > 1) {
            if (n == PPU && uniform_unit<T, C>(w)) {
                count_pixel(w, 0, PPU);
                return;
            }
        }
        if constexpr (LEAN && !LUMA) {
            if (n == PPU && cpw) {
                /* Whole-channel windows: every slot of a counted channel is
                 * in the window. The atomics of 8 samples go out before any
                 * old value is looked at (one at a time: 1.35x slower). The
                 * old values are or-ed and checked once for a counter in its
                 * upper half (on random data: never); only then is each
                 * checked for a full counter, which takes the carry path. */
                static_assert(sizeof(T) == 2, "the exact histogram of 16-bit samples");
                constexpr int B = 8;
                constexpr uint32_t kUpperHalf = PAIRS ? 0x80008000u : 0x80808080u;
#pragma unroll
                for (int j0 = 0; j0 < NW * 8; j0 += B) {
                    uint32_t old[B], seen = 0;
#pragma unroll
                    for (int j = j0; j < j0 + B; j++) {
                        if (!lean_in[j % C])
                            continue;
                        uint32_t byte, add;
                        gimg_hist_lean::counter<BITS>(w[j / 2], j & 1, &byte, &add);
                        old[j - j0] = atomicAdd(
                            reinterpret_cast<uint32_t *>(s_bytes + lean_base[j % C] + byte), add);
                        seen |= old[j - j0];
                    }
                    if (seen & kUpperHalf) {
#pragma unroll
                        for (int j = j0; j < j0 + B; j++) {
                            const uint32_t v = raw_sample<T>(w, j);
                            const int shift = (int)(v & (SLOTS_PER_WORD - 1)) * BITS;
                            if (lean_in[j % C] && ((old[j - j0] >> shift) & MASK) == MASK)
                                carried(j % C, (int)v, 1u, old[j - j0]);
                        }
                    }
                }
                return;
            }
        }
        if constexpr (BYTES) {
            if (n == PPU) {
#pragma unroll
                for (int k = 0; k < NW * 4; k++)
#pragma unroll
                    for (int i = 0; i < 4; i++) {  /* address bytes: base, sample i, base, 0 */
                        const int c = C == 3 ? (4 * k + i) % 3 : i % C;
                        const uint32_t off = prmt(w[k], byte_base[c], 0x6504 | i << 4);
                        atomicAdd(reinterpret_cast<uint32_t *>(s_bytes + off), 1u);
                    }
                return;
            }
        }
#pragma unroll
        for (int p = 0; p < PPU; p++) {
            if (p >= n)
                break;
            count_pixel(w, p, 1);
        }
    };

    const unsigned upr = (unsigned)((W + PPU - 1) / PPU);       /* units per row */
    const unsigned total = upr * (unsigned)H;
    const unsigned row_words = (unsigned)(((size_t)W * PB + 15) / 16);
    const unsigned step = (unsigned)n_groups * blockDim.x * UNITS;
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
    unsigned base = (unsigned)group * blockDim.x * UNITS + threadIdx.x;
    uint32_t w[UNITS][NW * 4];
    int n[UNITS];
    /* The first loads are in flight while the counters are cleared. */
    if constexpr (MODE != GIMG_CUDA_HIST_FLOAT)
        load(base, w, n);
    for (int i = threadIdx.x; i < n_words; i += blockDim.x)
        s_hist[i] = 0;
    __syncthreads();
    if (clear && s_ticket < clearers) {
        const int n_counts = CL * n_slots, share = (n_counts + (int)clearers - 1) / (int)clearers;
        const int end = min(n_counts, ((int)s_ticket + 1) * share);
        for (int i = (int)s_ticket * share + threadIdx.x; i < end; i += blockDim.x)
            d_counts[i] = 0;
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0)
            atomicAdd(d_sync + kCleared, 1u);
    }

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
    if (threadIdx.x == 0)
        wait_cleared(d_sync, clearers);
    __syncthreads();  /* everything below may write the global counters */
    if constexpr (QUADS) {
        /* The last runs of quads: a flat image leaves every thread a run of
         * one slot, hundreds long, that would wrap its 8-bit counter and
         * send a carry to one global counter from every thread. The
         * warp's runs of one slot are summed (the warp is whole again
         * after the loop) and added to the global counter at once. */
#pragma unroll
        for (int c = 0; c < CL; c++) {
            const uint32_t len = run[c] & kRunCap, k = run[c] >> 15;
            const unsigned same = __match_any_sync(~0u, len ? k : ~0u);
            unsigned long long sum = 0;
            for (int i = 0; i < 32; i++) {
                const uint32_t other = __shfl_sync(~0u, len, i);
                sum += (same >> i) & 1u ? other : 0u;
            }
            if (len && lane == __ffs(same) - 1)
                atomicAdd(d_counts + (size_t)c * n_slots + slot0 + k, sum);
        }
    } else if constexpr (R <= 1) {
#pragma unroll
        for (int c = 0; c < CL; c++)
            flush(c);
    }
    __syncthreads();

    if constexpr (R > 1) {
        /* Merge: one thread per (channel, slot), summing its replicas
         * rotated so that a warp's reads fall in 32 different banks. */
        for (int i = threadIdx.x; i < CL * k_here; i += blockDim.x) {
            const int c = i / k_here, k = i - c * k_here;
            const int word = word_of(c, k);
            uint32_t sum = 0;
#pragma unroll
            for (int r = 0; r < R; r++)
                sum += s_hist[word + ((r + k) & (R - 1))];
            if (sum)
                atomicAdd(d_counts + (size_t)c * n_slots + slot0 + k, (unsigned long long)sum);
        }
    } else {
        /* Merge: a window has up to 65536 counters a channel, each block's
         * a global atomic; the blocks of a cluster first sum theirs through
         * distributed shared memory, each taking 1/cluster of the words, so
         * that there are `cluster` times fewer. Without clusters (built
         * below sm_90) each block merges all of its own words. */
        int peers = 1;
#if __CUDA_ARCH__ >= 900
        cg::cluster_group cl = cg::this_cluster();
        peers = cluster;
        if (peers > 1)
            cl.sync();
#endif
        const int share = peers > 1 ? rank : 0;
        const int words_per_c = K / SLOTS_PER_WORD;
        const int w_end = (int)((long long)n_words * (share + 1) / peers);
        for (int i = (int)((long long)n_words * share / peers) + threadIdx.x; i < w_end;
             i += blockDim.x) {
            unsigned long long sum[SLOTS_PER_WORD] = {};
            for (int q = 0; q < peers; q++) {
                const uint32_t *src = s_hist;
#if __CUDA_ARCH__ >= 900
                if (peers > 1)
                    src = cl.map_shared_rank(s_hist, q);
#endif
                const uint32_t v = src[i];
#pragma unroll
                for (int j = 0; j < SLOTS_PER_WORD; j++)
                    sum[j] += (v >> (j * BITS % 32)) & MASK;
            }
            const int row = i / words_per_c, k = (i - row * words_per_c) * SLOTS_PER_WORD;
            unsigned long long *const g = d_counts + (size_t)(c0 + row) * n_slots + slot0 + k;
#pragma unroll
            for (int j = 0; j < SLOTS_PER_WORD; j++)
                if (sum[j] && k + j < k_here)
                    atomicAdd(g + j, sum[j]);
        }
#if __CUDA_ARCH__ >= 900
        if (peers > 1)
            cl.sync();  /* no block leaves while its peers read its counters */
#endif
    }
    if (clear) {
        __syncthreads();
        if (threadIdx.x == 0) {
            __threadfence();
            if (atomicAdd(d_sync + kDone, 1u) == gridDim.x - 1) {  /* the last block */
                d_sync[kStarted] = 0;
                d_sync[kCleared] = 0;
                d_sync[kDone] = 0;
            }
        }
    }
}

typedef void (*kernel_fn)(const unsigned char *, size_t, int, int, Map, int, int, int, int,
                          int, unsigned long long *, unsigned *, int);

template <typename T, int C, bool LUMA, int MODE>
kernel_fn pick_r(int replicas)
{
    if constexpr (MODE == GIMG_CUDA_HIST_IDENT && sizeof(T) == 1) {
        switch (replicas) {  /* 256 bins: always replicated */
        case 32: return hist_kernel<T, C, LUMA, MODE, 32>;
        case 16: return hist_kernel<T, C, LUMA, MODE, 16>;
        case 8: return hist_kernel<T, C, LUMA, MODE, 8>;
        default: return nullptr;
        }
    } else if constexpr (MODE == GIMG_CUDA_HIST_IDENT) {
        switch (replicas) {  /* 65536 bins: never replicated */
        case kQuads: return hist_kernel<T, C, LUMA, MODE, kQuads>;
        case kPairs: return hist_kernel<T, C, LUMA, MODE, kPairs>;
        case 1: return hist_kernel<T, C, LUMA, MODE, 1>;
        default: return nullptr;
        }
    } else {
        switch (replicas) {
        case 32: return hist_kernel<T, C, LUMA, MODE, 32>;
        case kPairs: return hist_kernel<T, C, LUMA, MODE, kPairs>;
        case 1: return hist_kernel<T, C, LUMA, MODE, 1>;
        default: return nullptr;
        }
    }
}

template <typename T, int C, bool LUMA> kernel_fn pick_mode(int mode, int replicas)
{
    if constexpr (sizeof(T) == 4) {
        return mode == GIMG_CUDA_HIST_FLOAT ? pick_r<T, C, LUMA, GIMG_CUDA_HIST_FLOAT>(replicas)
                                            : nullptr;
    } else {
        switch (mode) {
        case GIMG_CUDA_HIST_IDENT: return pick_r<T, C, LUMA, GIMG_CUDA_HIST_IDENT>(replicas);
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
 * The launch set-up (raising a kernel's shared-memory limit, its occupancy
 * in clusters) costs several microseconds of API calls, as long as the
 * kernel itself on a 64 MB image: done once per kernel, shape and device,
 * and remembered, as the device's limits are (launch.cuh).
 */
struct config { kernel_fn k; int dev, threads; size_t smem; int cluster, resident; };
config g_configs[64];
int g_n_configs;

cudaLaunchConfig_t launch_config(dim3 grid, int threads, size_t smem, int cluster,
                                 cudaStream_t stream, cudaLaunchAttribute *attr)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = dim3((unsigned)threads);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    attr->id = cudaLaunchAttributeClusterDimension;
    attr->val.clusterDim.x = (unsigned)cluster;
    attr->val.clusterDim.y = 1;
    attr->val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = cluster > 1 ? 1 : 0;
    return cfg;
}

/* How many blocks of kernel k run at once on device lim.dev, in clusters of
 * `cluster`; 0 where such clusters cannot run (then without clusters). */
cudaError_t resident_blocks(kernel_fn k, const gimg_launch::device_facts &lim, int threads, size_t smem,
                            int cluster, int *resident)
{
    std::lock_guard<std::mutex> hold(gimg_launch::cache_lock());
    for (int i = 0; i < g_n_configs; i++) {
        const config &c = g_configs[i];
        if (c.k == k && c.dev == lim.dev && c.threads == threads && c.smem == smem &&
            c.cluster == cluster) {
            *resident = c.resident;
            return cudaSuccess;
        }
    }
    /* A kernel's shared-memory limit only grows, so remembered entries stay
     * valid. */
    size_t max_smem = smem;
    for (int i = 0; i < g_n_configs; i++)
        if (g_configs[i].k == k && g_configs[i].dev == lim.dev && g_configs[i].smem > max_smem)
            max_smem = g_configs[i].smem;
    cudaError_t e;
    if ((e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)max_smem)))
        return e;
    int n = 0;
    if (cluster == 1) {
        if ((e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k, threads, smem)))
            return e;
        if (n < 1)
            return cudaErrorInvalidConfiguration;
        n *= lim.sms;
    } else {
        cudaLaunchAttribute attr;
        const cudaLaunchConfig_t cfg =
            launch_config(dim3((unsigned)cluster), threads, smem, cluster, 0, &attr);
        if (cudaOccupancyMaxActiveClusters(&n, k, &cfg) != cudaSuccess) {
            (void)cudaGetLastError();  /* not an error of the stream's: go without */
            n = 0;
        }
        n *= cluster;
    }
    if (g_n_configs < 64)
        g_configs[g_n_configs++] = {k, lim.dev, threads, smem, cluster, n};
    *resident = n;
    return cudaSuccess;
}

} // namespace

extern "C" cudaError_t gimg_cuda_hist_shaped(const void *d_img, size_t pitch_bytes, int width,
                                             int height, int channels, int sample_bytes,
                                             const gimg_cuda_hist_map *map,
                                             unsigned long long *d_counts, unsigned *d_sync,
                                             int replicas, int threads, int cluster,
                                             cudaStream_t stream)
{
    if (width < 1 || height < 1 || channels < 1 || channels > 4 || pitch_bytes % 16 ||
        !d_sync || (uintptr_t)d_sync % sizeof(unsigned) ||
        (uintptr_t)d_img % 16 || map->bins < 1 || map->bins > GIMG_HIST_MAX_BINS ||
        (size_t)width * channels * sample_bytes > pitch_bytes || cluster < 0 ||
        cluster > kMaxCluster ||
        (map->mode == GIMG_CUDA_HIST_IDENT && map->bins != (sample_bytes == 1 ? 256 : 65536)))
        return cudaErrorInvalidValue;
    const int cl = channels + (map->luma ? 1 : 0);
    const int n_slots = map->bins + GIMG_HIST_EXTRA_SLOTS;
    cudaError_t e;
    gimg_launch::device_facts lim;
    if ((e = gimg_launch::current_device(&lim)))
        return e;
    /* The counters' room: the block's opt-in shared memory less the
     * kernel's own ticket word (aligned). */
    const size_t room = (size_t)lim.smem_optin - kTicketSmem;
    /* The path: replicated counters where they fit, else windows: of
     * quads for the exact 16-bit histogram of two or more channels (three
     * channels' counters in one window, so each sample is read once per
     * window it is counted in), of pairs for one channel and up to three
     * of other histograms (one read of each channel, all lanes busy), of
     * 32-bit counters for other histograms of four or five, where the
     * pairs' 512 threads a block with runs cost more than the 32-bit
     * path's divided lanes (H100, 4096^2 RGBA 16-bit: 0.48 ms against 0.40;
     * lean pairs 0.29). */
    const bool exact16 = map->mode == GIMG_CUDA_HIST_IDENT && sample_bytes == 2;
    if (replicas == 0)
        replicas = (size_t)cl * n_slots * 32 * sizeof(uint32_t) <= room ? 32
                   : exact16 && cl > 1                                                   ? kQuads
                   : cl <= 3                                                             ? kPairs
                                                                                        : 1;
    if (replicas == kQuads && !exact16)
        return cudaErrorInvalidValue;
    /* The default 8-bit histogram counts 256 slots (never below, above or
     * NaN); with 32 replicas the kernel addresses them by bytes (BYTES). */
    const bool bytes = sample_bytes == 1 && map->mode == GIMG_CUDA_HIST_IDENT && !map->luma &&
                       replicas == kBytesReplicas;
    int window = bytes ? 256 : n_slots, windows = 1, cpw = 0;
    size_t smem = 0;
    if (replicas == 1 || replicas == kPairs || replicas == kQuads) {
        /* Windows of whole channels where one channel's slots fit (as
         * many channels a window as fit, spread evenly over the fewest
         * windows), else of slots (of every channel). */
        const int per_word = replicas == kQuads ? 4 : replicas == kPairs ? 2 : 1;
        const size_t slot_bytes = sizeof(uint32_t) / per_word;
        window = (window + per_word - 1) / per_word * per_word;  /* whole words a channel */
        const size_t channel_bytes = slot_bytes * window;
        if (channel_bytes <= room) {
            const int fit = (int)(room / channel_bytes);
            windows = (cl + fit - 1) / fit;
            cpw = (cl + windows - 1) / windows;
            smem = cpw * channel_bytes;
        } else {
            window = (int)(room / (slot_bytes * cl));
            window -= window % per_word;
            if (window < 1)
                return cudaErrorInvalidValue;
            windows = (n_slots + window - 1) / window;
            smem = (size_t)cl * window * slot_bytes;
        }
        if (cluster == 0)
            cluster = lim.cc_major >= 9 ? kMaxCluster : 1;
    } else {
        smem = bytes ? (size_t)bytes_words(cl) * sizeof(uint32_t)
                     : (size_t)cl * window * replicas * sizeof(uint32_t);
        if (cluster > 1)
            return cudaErrorInvalidValue;  /* a few hundred slots: no merge to share */
        cluster = 1;
    }
    if (smem > room || (cluster > 1 && lim.cc_major < 9))
        return cudaErrorInvalidValue;

    kernel_fn k = sample_bytes == 1 ? pick_channels<uint8_t>(channels, map->luma, map->mode, replicas)
                : sample_bytes == 2 ? pick_channels<uint16_t>(channels, map->luma, map->mode, replicas)
                : sample_bytes == 4 ? pick_channels<float>(channels, map->luma, map->mode, replicas)
                                    : nullptr;
    if (!k)
        return cudaErrorInvalidValue;
    const int most = max_threads(replicas, cl);
    if (threads == 0)
        threads = most;
    if (threads < 32 || threads > most || threads % 32)
        return cudaErrorInvalidValue;
    int resident = 0;
    if ((e = resident_blocks(k, lim, threads, smem, cluster, &resident)))
        return e;
    if (resident == 0) {  /* these clusters do not fit: plain blocks */
        cluster = 1;
        if ((e = resident_blocks(k, lim, threads, smem, cluster, &resident)))
            return e;
    }

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
        /* Groups of blocks, each group reading its share of the units once
         * per window: as many as keep every window's blocks resident
         * together (more would only add merges), in whole clusters. */
        const size_t units = ((size_t)w + ppu - 1) / ppu * (size_t)h;
        size_t groups = (units + (size_t)threads * units_per_iter - 1) /
                        ((size_t)threads * units_per_iter);
        size_t resident_groups = (size_t)resident / cluster / windows * cluster;
        if (resident_groups < (size_t)cluster)
            resident_groups = cluster;
        if (groups > resident_groups)
            groups = resident_groups;
        groups = (groups + cluster - 1) / cluster * cluster;
        const dim3 grid((unsigned)(groups * windows));
        cudaLaunchAttribute attr;
        const cudaLaunchConfig_t cfg = launch_config(grid, threads, smem, cluster, stream, &attr);
        if ((e = cudaLaunchKernelEx(&cfg, k, band_img, pitch_bytes, w, h, m, n_slots, window,
                                    windows, cpw, cluster, d_counts, d_sync, y == 0)))
            return e;
    }
    return cudaSuccess;
}

extern "C" cudaError_t gimg_cuda_hist(const void *d_img, size_t pitch_bytes, int width,
                                      int height, int channels, int sample_bytes,
                                      const gimg_cuda_hist_map *map,
                                      unsigned long long *d_counts, unsigned *d_sync,
                                      cudaStream_t stream)
{
    return gimg_cuda_hist_shaped(d_img, pitch_bytes, width, height, channels, sample_bytes, map,
                                 d_counts, d_sync, 0, 0, 0, stream);
}
