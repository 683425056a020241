/*
 * hist_internal.h — what the histogram's CPU code (lib/hist.c), its CUDA
 * kernel (kernels/histogram.cu) and the tests share: the one definition of
 * a sample's bin and of luma, written once and compiled on both sides, so
 * that CPU and GPU counts are identical by construction.
 */
#ifndef GIMG_HIST_INTERNAL_H
#define GIMG_HIST_INTERNAL_H

#include "gimg_hist.h"

#include <stdint.h>
#ifdef GIMG_HAVE_CUDA
#include "histogram.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__CUDACC__)
#define GIMG_HD __host__ __device__ __forceinline__
#else
#define GIMG_HD static inline
#endif

/*
 * --device auto and histograms: a histogram reads each byte once, so the
 * upload is nearly all of the GPU's time: on the H100 machine (16 cores),
 * 8192x8192 RGB took 19 ms on the CPU and 7.0 ms on the GPU with its upload
 * through pinned staging (21.6 ms from pageable memory), 4096x4096 4.8 and
 * 2.8 ms (tests/bench/bench_histogram, "end to end"). Gains of a few
 * milliseconds do not pay for CUDA's start-up (0.2 to 0.4 s) in a
 * one-image process, so the cost table (cost.h, whose defaults these
 * figures are) keeps histograms on the CPU but for images of gigabytes, or
 * few threads; --device gpu uses the GPU.
 */

/* Each channel's counters on the CPU and GPU paths: bins, then the three
 * outside slots. */
enum { GIMG_HIST_SLOT_BELOW = 0, GIMG_HIST_SLOT_ABOVE = 1, GIMG_HIST_SLOT_NAN = 2,
       GIMG_HIST_EXTRA_SLOTS = 3 };

/*
 * The bin of one sample value v:
 *   NaN                          -> slot bins + NAN
 *   v < lo                       -> slot bins + BELOW
 *   v >= hi (v > hi if closed)   -> slot bins + ABOVE
 *   otherwise min(floor((v - lo) * bins / (hi - lo)), bins - 1)
 * in IEEE double precision, each operation rounded to nearest and none
 * fused (the device side spells the roundings out, so that nvcc cannot
 * contract them). width = hi - lo, computed once by the caller. Integer
 * samples use the half-open range [lo, hi), float samples the closed
 * [lo, hi] (closed = 1).
 */
GIMG_HD int gimg_hist_slot_of(double v, double lo, double hi, double width, int bins,
                              int closed)
{
    if (v != v)
        return bins + GIMG_HIST_SLOT_NAN;
    if (v < lo)
        return bins + GIMG_HIST_SLOT_BELOW;
    if (closed ? v > hi : v >= hi)
        return bins + GIMG_HIST_SLOT_ABOVE;
#if defined(__CUDA_ARCH__)
    double t = __ddiv_rn(__dmul_rn(__dsub_rn(v, lo), (double)bins), width);
#else
    double t = (v - lo) * (double)bins / width;
#endif
    /* v lies in [lo, hi], so t in [0, bins] but where (v - lo) * bins
     * overflows (a range across most of double's): inf or NaN then, the
     * top bin, never a cast out of int's range. */
    if (!(t < (double)bins))
        return bins - 1;
    return (int)t;
}

/*
 * Rec. 709 luma, Y = 0.2126 R + 0.7152 G + 0.0722 B.
 * 8- and 16-bit samples: in 16-bit fixed point, the weights rounded to
 * 13933, 46871 and 4732 (they sum to 65536, so white stays white), the
 * result rounded to nearest; exact integer arithmetic, never above the
 * sample type's maximum (65535 * 65536 + 32768 < 2^32).
 */
#define GIMG_LUMA_WR 13933u
#define GIMG_LUMA_WG 46871u
#define GIMG_LUMA_WB 4732u
GIMG_HD uint32_t gimg_luma_int(uint32_t r, uint32_t g, uint32_t b)
{
    return (GIMG_LUMA_WR * r + GIMG_LUMA_WG * g + GIMG_LUMA_WB * b + 32768u) >> 16;
}

/* Float samples: (0.2126 R + 0.7152 G) + 0.0722 B in double precision, each
 * product and sum rounded to nearest, none fused, then rounded to float. A
 * NaN in any channel gives NaN. */
GIMG_HD float gimg_luma_float(float r, float g, float b)
{
#if defined(__CUDA_ARCH__)
    double y = __dadd_rn(__dadd_rn(__dmul_rn(0.2126, (double)r), __dmul_rn(0.7152, (double)g)),
                         __dmul_rn(0.0722, (double)b));
#else
    double y = (0.2126 * (double)r + 0.7152 * (double)g) + 0.0722 * (double)b;
#endif
    return (float)y;
}

/*
 * How integer samples map to slots, chosen once per histogram:
 *  - shift: bin = (v - first) >> shift for first <= v < first + (bins << shift),
 *    when lo is an integer and hi - lo is bins times a power of two (the
 *    defaults, and 65536 bins over 16-bit) — no table needed;
 *  - otherwise a table of the slot of every sample value (256 or 65536
 *    entries), built with gimg_hist_slot_of.
 * Both are exactly gimg_hist_slot_of on every integer value.
 */
typedef struct {
    int use_shift;
    int first, shift;      /* the shift form */
    uint32_t *lut;         /* the table form: lut[v] is v's slot; NULL with use_shift */
    int lut_size;          /* 256 or 65536 */
} gimg_hist_intmap;

/* Fills m for an integer image (sample U8 or U16); allocates m->lut when
 * the table form is needed (freed by gimg_hist_intmap_free). */
gimg_status gimg_hist_intmap_init(gimg_sample sample, const gimg_hist_params *p,
                                  gimg_hist_intmap *m);
void gimg_hist_intmap_free(gimg_hist_intmap *m);

/* Checks p against im (bins, range, channels) and allocates h's counts,
 * zeroed, with its shape filled in. */
gimg_status gimg_hist_alloc(const gimg_image *im, const gimg_hist_params *p, gimg_hist *h);

/* The fast CPU backend (OpenMP, per-thread sub-histograms); same counts as
 * gimg_hist_compute_cpu. Allocates out->counts. */
gimg_status gimg_hist_compute_fast(const gimg_image *im, const gimg_hist_params *p,
                                   gimg_hist *out);

#ifdef GIMG_HAVE_CUDA
/* The kernel's description of m (its mode, shift and range; d_lut is left
 * for the caller to point at a device copy of m->lut). */
gimg_status gimg_hist_map_for_gpu(const gimg_image *im, const gimg_hist_params *p,
                                  const gimg_hist_intmap *m, gimg_cuda_hist_map *out);
#endif

#ifdef __cplusplus
}
#endif
#endif
