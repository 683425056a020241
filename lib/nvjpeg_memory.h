/*
 * nvjpeg_memory.h — nvJPEG's memory on one GPU: the allocators its handle
 * is made with, and pinned blocks kept for reuse.
 *
 * nvJPEG's buffers grow with the images (a lane's encoder state, the
 * hardware decoder's bitstreams): it frees the smaller and allocates a
 * larger. With cudaFree and cudaFreeHost every such free waits for the
 * whole GPU, every lane's work in flight, so a server's first batch of
 * large photos after small ones stalls its 16 lanes again and again.
 * Where the library has nvjpegCreateExV2, nvJPEG names the stream its
 * work on a buffer is queued on, and the memory here is stream-ordered:
 *   device  the GPU's default pool (cudaMallocFromPoolAsync,
 *           cudaFreeAsync), which keeps what is given back for the next
 *           allocations, the lanes' buffers' too (gimg_gpu_lane_malloc);
 *   pinned  blocks given back are kept, each with an event recorded on
 *           nvJPEG's stream, and handed out again once it has passed.
 * Elsewhere (CreateEx) device memory comes from gimg_gpu_malloc and
 * pinned memory from nvJPEG's default, cudaHostAlloc.
 * Device memory nvJPEG holds counts against GIMG_GPU_MEM_LIMIT either way
 * (what the pool keeps for reuse does not).
 *
 * Ownership: lane 0 of a GPU makes its gimg_nvjpeg_memory before the
 * nvJPEG handle and frees it after destroying the handle. Built only with
 * CUDA.
 */
#ifndef GIMG_NVJPEG_MEMORY_H
#define GIMG_NVJPEG_MEMORY_H

#include "nvjpeg_api.h"

#include <stddef.h>

#ifdef GIMG_HAVE_CUDA
#include "gimg.h"
#include <cuda_runtime.h>

typedef struct gimg_nvjpeg_memory gimg_nvjpeg_memory;

/* For the GPU `device` (made current by the caller). */
gimg_status gimg_nvjpeg_memory_new(int device, gimg_nvjpeg_memory **out);
void gimg_nvjpeg_memory_free(gimg_nvjpeg_memory *m);

/* The handle: with m's stream-ordered allocators where api has
 * CreateExV2 and the GPU has memory pools, else with CreateEx and the
 * counted allocator. Returns nvJPEG's status. */
int gimg_nvjpeg_memory_create_handle(gimg_nvjpeg_memory *m, const gimg_nvjpeg_api *api,
                                     int backend, unsigned flags, gimg_nvjpeg_handle *handle);

/* Pinned memory for the caller's own copies: a kept block of at least
 * `bytes` (*got_bytes: its size) whose last use has passed, else a new
 * one; NULL if none could be had. gimg_nvjpeg_pinned_put gives it back
 * once the work queued on `stream` is done (NULL: it is idle now). */
void *gimg_nvjpeg_pinned_get(gimg_nvjpeg_memory *m, size_t bytes, size_t *got_bytes);
void gimg_nvjpeg_pinned_put(gimg_nvjpeg_memory *m, void *h_ptr, size_t bytes,
                            cudaStream_t stream);

#endif
#endif
