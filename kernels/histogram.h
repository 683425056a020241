/* histogram.h — launchers of kernels/histogram.cu, callable from C. */
#ifndef GIMG_KERNELS_HISTOGRAM_H
#define GIMG_KERNELS_HISTOGRAM_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How a sample finds its slot (lib/hist_internal.h defines the slots):
 * IDENT: the value itself (256 bins of 8-bit, 65536 of 16-bit samples);
 * SHIFT: (v - first) >> shift with range checks (gimg_hist_intmap's shift form);
 * LUT:   d_lut[v] (its table form, in device memory);
 * FLOAT: gimg_hist_slot_of on the float value, closed range [lo, hi]. */
enum { GIMG_CUDA_HIST_IDENT = 0, GIMG_CUDA_HIST_SHIFT, GIMG_CUDA_HIST_LUT, GIMG_CUDA_HIST_FLOAT };

typedef struct {
    int mode;                /* GIMG_CUDA_HIST_* */
    int bins;                /* 1 .. 65536 */
    int first, shift;        /* SHIFT */
    const uint32_t *d_lut;   /* LUT: 256 or 65536 entries */
    double lo, hi;           /* FLOAT */
    int luma;                /* 1: count luma as channel `channels` */
} gimg_cuda_hist_map;

/*
 * Counts a width x height image of `channels` interleaved samples of
 * sample_bytes (1: 8-bit, 2: 16-bit, 4: float) into d_counts:
 * (channels + luma) rows of bins + 3 64-bit counters (the bins, then below,
 * above, NaN). d_counts needs 8 * (channels + luma) * (bins + 3) bytes and
 * is overwritten (the kernel clears it first). The image is 16-byte
 * aligned, its pitch a multiple of 16 and each row's allocation reaches
 * its pitch.
 * d_sync: GIMG_CUDA_HIST_SYNC_BYTES of device memory, owned by the caller,
 * zero before the first call; every call leaves it zero again. The kernel
 * orders its clearing of d_counts with it. Calls that may run at the same
 * time (on other streams) need their own.
 * Asynchronous on stream; returns the first launch error.
 */
enum { GIMG_CUDA_HIST_SYNC_BYTES = 16 };
cudaError_t gimg_cuda_hist(const void *d_img, size_t pitch_bytes, int width, int height,
                           int channels, int sample_bytes, const gimg_cuda_hist_map *map,
                           unsigned long long *d_counts, unsigned *d_sync, cudaStream_t stream);

/* Replicas values of the windowed paths whose shared counters are narrower
 * than a word, carries corrected in the global counters: 16-bit pairs (two
 * to a 32-bit word) and, for the exact 16-bit histogram only, 8-bit quads
 * (four to a word: one channel's 65536 counters in 64 KB, so that three
 * channels share one window). */
enum { GIMG_CUDA_HIST_PAIRS = -1, GIMG_CUDA_HIST_QUADS = -2 };

/* The same with the kernel's shape forced, for tests and the benchmark:
 * replicas of each shared counter (32, 16 or 8: replicated counters, 16 and
 * 8 only for 8-bit IDENT; 1: windows of 32-bit counters; GIMG_CUDA_HIST_PAIRS:
 * windows of 16-bit pairs; GIMG_CUDA_HIST_QUADS: windows of 8-bit quads, only
 * for 16-bit IDENT; 0 = automatic), threads per block (0 = automatic)
 * and blocks a cluster (1 to 8, only for the windowed paths on compute
 * capability 9.0 and up; 0 = automatic: 8 there, else 1). Fails with
 * cudaErrorInvalidValue where the shape does not exist or does not fit. */
cudaError_t gimg_cuda_hist_shaped(const void *d_img, size_t pitch_bytes, int width, int height,
                                  int channels, int sample_bytes, const gimg_cuda_hist_map *map,
                                  unsigned long long *d_counts, unsigned *d_sync, int replicas,
                                  int threads, int cluster, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
