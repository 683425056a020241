/*
 * gpu_internal.h — the GPU side of libgimg: the checking macro for CUDA
 * calls, the per-process GPU state and the transfers every operation uses.
 * Only compiled into builds with CUDA (GIMG_HAVE_CUDA); device.c holds the
 * selection logic that works in both builds.
 */
#ifndef GIMG_GPU_INTERNAL_H
#define GIMG_GPU_INTERNAL_H

#include "gimg.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef GIMG_HAVE_CUDA
#include <cuda_runtime_api.h>

/* Every CUDA call and launch goes through this: on failure it records the
 * call, file, line and CUDA's message, and returns GIMG_E_DEVICE, or
 * GIMG_E_NOMEM when the GPU is out of memory (creating the context
 * included), which has the operation run on the CPU instead. */
#define GIMG_CUDA(call)                                                              \
    do {                                                                             \
        cudaError_t gimg_cuda_err_ = (call);                                         \
        if (gimg_cuda_err_ != cudaSuccess)                                           \
            return gimg_fail(gimg_cuda_status(gimg_cuda_err_),                       \
                             "CUDA error: %s failed at %s:%d: %s", #call, __FILE__,   \
                             __LINE__, cudaGetErrorString(gimg_cuda_err_));           \
    } while (0)

/* The status of a failed CUDA call: GIMG_E_NOMEM for cudaErrorMemoryAllocation
 * (not sticky, so the process may go on, on the CPU), else GIMG_E_DEVICE.
 * For code that checks several calls before recording one message. */
static inline gimg_status gimg_cuda_status(cudaError_t e)
{
    return e == cudaErrorMemoryAllocation ? GIMG_E_NOMEM : GIMG_E_DEVICE;
}

/* An image on the device: rows at a pitch that is a multiple of 16 bytes,
 * each row's allocation reaching its pitch (what the kernels assume). */
typedef struct gimg_dimage {
    void *d_data;
    size_t pitch_bytes;
    int width, height, channels;
    gimg_sample sample;
    int slot;               /* the gimg_gpu buffer (and pinned staging) it is in */
} gimg_dimage;

/* Transfers go through pinned staging in chunks of at most this many bytes
 * (whole rows), a ring of GIMG_STAGE_CHUNKS per buffer slot: the CPU copies
 * one chunk while the copy engine moves the one before, at the speed of
 * pinned memory, and the staging stays small however large the image. */
#define GIMG_STAGE_CHUNK_BYTES (2u << 20)
#define GIMG_STAGE_CHUNKS 8

/* A lane's device buffers: 0 and 1 for the operations' inputs and
 * outputs, and one where the GPU codecs decode an input (gpu_jpeg.h). */
#define GIMG_GPU_SLOTS 3
#define GIMG_GPU_SLOT_DECODED 2

/* One lane of a GPU: a stream and what it reuses from image to image. A
 * context holds two per GPU, or sixteen with the GPU codecs (device.c);
 * gimg_gpu_open makes one. */
typedef struct gimg_gpu {
    int device;
    char name[256];
    int sm_count;
    cudaStream_t stream;
    int pools;              /* the GPU has memory pools: gimg_gpu_lane_malloc's */
    cudaEvent_t ev_start, ev_stop;
    /* Device buffers kept across images and grown on demand. */
    void *d_buf[GIMG_GPU_SLOTS];
    size_t d_cap[GIMG_GPU_SLOTS];
    /* Pinned staging per slot (NULL: pinned memory could not be had, and
     * transfers go from pageable memory) and its ring's chunk events. */
    unsigned char *h_stage[GIMG_GPU_SLOTS];
    size_t h_stage_cap[GIMG_GPU_SLOTS];
    cudaEvent_t ev_chunk[GIMG_GPU_SLOTS][GIMG_STAGE_CHUNKS];
    /* The histogram kernel's sync words for this stream: see
     * gimg_gpu_hist_sync. */
    unsigned *d_hist_sync;
    /* The GPU codecs' state (gpu_jpeg.h), NULL without them. */
    struct gimg_gpu_jpeg *jpeg;
    /* gimg_gpu_keep_outputs: downloads of 8-bit gray or RGB images leave
     * them here instead, for the GPU's JPEG encoder. */
    int keep_outputs;
    gimg_dimage kept;
    gimg_dimage decoded;    /* the GPU codecs' last input (GIMG_GPU_SLOT_DECODED) */
} gimg_gpu;

/* Every device allocation of libgimg goes through these two, so that
 * GIMG_GPU_MEM_LIMIT (bytes of device memory the process may hold at once,
 * all lanes and GPUs together; read once per process) holds, and so that
 * running out of device memory, real or under the limit, is GIMG_E_NOMEM
 * with a message saying so. An
 * operation that gets GIMG_E_NOMEM from its GPU path hands it to
 * gimg_ctx_gpu_fallback() (ctx_internal.h), which has it run on the CPU.
 * gimg_gpu_free takes the size that was allocated. */
gimg_status gimg_gpu_malloc(void **d_ptr, size_t bytes);
void gimg_gpu_free(void *d_ptr, size_t bytes);
/* A lane's own buffers, ordered on its stream: allocated from the GPU's
 * pool, which keeps what is given back, and given back after the work
 * queued on the stream, without waiting (cudaFree waits for the whole
 * GPU: every lane's work in flight). Where the GPU has no memory pools,
 * gimg_gpu_malloc and gimg_gpu_free. */
gimg_status gimg_gpu_lane_malloc(gimg_gpu *g, void **d_ptr, size_t bytes);
void gimg_gpu_lane_free(gimg_gpu *g, void *d_ptr, size_t bytes);
/* The GPU's default pool, set up for the lanes and nvJPEG (gpu.c says
 * how); 0 where the GPU has no memory pools. */
int gimg_gpu_pool(int device, cudaMemPool_t *pool);
/* The count alone, for memory allocated otherwise (nvJPEG's, from a
 * stream-ordered pool): claim before allocating, unclaim once freed. */
gimg_status gimg_gpu_claim(size_t bytes);
void gimg_gpu_unclaim(size_t bytes);
/* All the process holds on its GPUs, as counted against the limit. */
size_t gimg_gpu_claimed_bytes(void);

/* Sets the device up on the calling thread (the slow part: CUDA's start-up).
 * The caller frees *out with gimg_gpu_close(). */
gimg_status gimg_gpu_open(int index, gimg_gpu **out);
void gimg_gpu_close(gimg_gpu *g);
/* Makes g's device current on the calling thread. */
gimg_status gimg_gpu_bind(gimg_gpu *g);
/* The histogram kernel's sync words for g's stream (gimg_cuda_hist in
 * kernels/histogram.h), made and cleared on first use; g owns them. */
gimg_status gimg_gpu_hist_sync(gimg_gpu *g, unsigned **d_sync);
/* A device image of the given layout in reusable buffer slot 0 or 1. */
gimg_status gimg_gpu_image(gimg_gpu *g, int slot, int width, int height, int channels,
                           gimg_sample sample, gimg_dimage *d);
/* Gives back the device images of slots 0 and 1 (after an image that did
 * not fit, so that smaller pieces of it are not refused for what the
 * larger attempt left held), once g's stream is idle. */
void gimg_gpu_release_images(gimg_gpu *g);
/* Queues the copy of h into d on g's stream; h may change once it returns.
 * An image already on g (h->device: the GPU codecs decoded it) is not
 * copied: *d becomes where it is. */
gimg_status gimg_gpu_upload(gimg_gpu *g, const gimg_image *h, gimg_dimage *d);
/* Copies d into h after the work queued on g's stream; returns when h holds
 * it (and the stream is idle). While g keeps outputs, an 8-bit gray or RGB
 * d stays where it is instead: h's pixels are freed, h->data is NULL and
 * h->device says where d is (g->kept), until g's next image. */
gimg_status gimg_gpu_download(gimg_gpu *g, const gimg_dimage *d, gimg_image *h);
/* Whether downloads keep images on the GPU, for the GPU's JPEG encoder
 * (set by the batch around an operation whose output it encodes there). */
void gimg_gpu_keep_outputs(gimg_gpu *g, int keep);

/* A GPU's __constant__ memory (the convolution's taps) is one for all the
 * lanes on it: a lane holds its GPU's lock while it queues kernels that
 * read the constants, and new constants are copied only once every kernel
 * queued on the GPU has finished (lib/conv.c's set_taps). */
void gimg_gpu_lock_constants(gimg_gpu *g);
void gimg_gpu_unlock_constants(gimg_gpu *g);
#endif

#ifdef __cplusplus
}
#endif

#endif
