/*
 * nvjpeg_memory.h — nvJPEG's memory on one GPU: the allocators its
 * handle is made with.
 *
 * nvJPEG's buffers grow with the images (a lane's encoder state, the
 * hardware decoder's): it frees the smaller and allocates a larger. With
 * cudaFree and cudaFreeHost every such free waits for the whole GPU,
 * every lane's work in flight, so a server's first batch of large photos
 * after small ones stalls its 16 lanes again and again. Where the library
 * has nvjpegCreateExV2, nvJPEG names the stream its work on a buffer is
 * queued on, and
 * - its device memory comes from the GPU's default pool
 *   (cudaMallocFromPoolAsync, cudaFreeAsync on that stream), which keeps
 *   what is given back for the next allocations, the lanes' buffers' too
 *   (gimg_gpu_lane_malloc);
 * - its pinned memory is kept when given back and lent again once the
 *   GPU is past nvJPEG's last use of it (an event on that stream), freed
 *   only with the gimg_nvjpeg_memory.
 * Elsewhere (CreateEx) device memory comes from gimg_gpu_malloc and
 * pinned memory is nvJPEG's own. Device memory counts against
 * GIMG_GPU_MEM_LIMIT (what the pool keeps for reuse does not).
 *
 * (An earlier cache of pinned blocks freed its surplus with cudaFreeHost
 * while holding its lock, and a gimgd using it hung: tests/bench/
 * RESULTS.md, stop 49. This one holds its lock across no CUDA call that
 * may wait for the GPU, and frees nothing before the handle is gone.)
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

typedef struct gimg_nvjpeg_memory gimg_nvjpeg_memory;

/* For the GPU `device` (made current by the caller). */
gimg_status gimg_nvjpeg_memory_new(int device, gimg_nvjpeg_memory **out);
void gimg_nvjpeg_memory_free(gimg_nvjpeg_memory *m);
/* The pinned memory m holds for nvJPEG, lent and kept. */
size_t gimg_nvjpeg_memory_pinned_bytes(gimg_nvjpeg_memory *m);

/* The handle: with m's stream-ordered allocator where api has
 * CreateExV2 and the GPU has memory pools, else with CreateEx and the
 * counted allocator. Returns nvJPEG's status. */
int gimg_nvjpeg_memory_create_handle(gimg_nvjpeg_memory *m, const gimg_nvjpeg_api *api,
                                     int backend, unsigned flags, gimg_nvjpeg_handle *handle);

#endif
#endif
