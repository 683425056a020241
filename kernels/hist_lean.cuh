/*
 * hist_lean.cuh — where the exact 16-bit histogram counts a sample: the
 * lean path of histogram.cu, and bench_stats' counting floor, which must
 * count exactly as that path does to be its floor.
 * Header-only, device code.
 */
#ifndef GIMG_KERNELS_HIST_LEAN_CUH
#define GIMG_KERNELS_HIST_LEAN_CUH

#include <stdint.h>

namespace gimg_hist_lean {

/* The counter of the sample in half `upper` of the 32-bit word w: the
 * byte offset of its word in the channel's counters (slot v at byte
 * v * BITS / 8, rounded down to a word) and the add that counts one in it
 * (1 << ((v % (32 / BITS)) * BITS)), each in two or three instructions
 * straight from w (the generic form took five to seven). */
template <int BITS>
__device__ __forceinline__ void counter(uint32_t w, bool upper, uint32_t *byte, uint32_t *add)
{
    if constexpr (BITS == 16) {  /* pairs: word v / 2, half v % 2 */
        *byte = upper ? (w >> 15) & 0x1fffcu : (w << 1) & 0x1fffcu;
        *add = upper ? max(w & 0x10000u, 1u) : (w & 1u) * 0xffffu + 1u;
    } else {                     /* quads: word v / 4, byte v % 4 */
        static_assert(BITS == 8, "pairs or quads");
        *byte = upper ? (w >> 16) & 0xfffcu : w & 0xfffcu;
        /* a funnel shift takes its count modulo 32: (w << 3) % 32 is (v % 4) * 8 */
        *add = upper ? 1u << ((w >> 13) & 24u) : __funnelshift_l(0u, 1u, w << 3);
    }
}

} // namespace gimg_hist_lean

#endif
