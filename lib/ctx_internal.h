/* ctx_internal.h — how operations ask the context where to run. */
#ifndef GIMG_CTX_INTERNAL_H
#define GIMG_CTX_INTERNAL_H

#include "gimg.h"

#ifdef __cplusplus
extern "C" {
#endif

struct gimg_gpu;

/* Where `work_bytes` of an operation run: *gpu is the GPU to use, or NULL
 * for the CPU. auto_min_bytes is the measured size from which the GPU beats
 * the CPU for this operation (SIZE_MAX: never in auto mode). Fails only
 * when --device gpu was asked for and no GPU can be used. */
gimg_status gimg_ctx_select(gimg_ctx *ctx, size_t work_bytes, size_t auto_min_bytes,
                            struct gimg_gpu **gpu);
/* After an operation's GPU path failed with st: GIMG_OK when the operation
 * should now run on the CPU instead, which is when the GPU ran out of
 * memory (GIMG_E_NOMEM from gimg_gpu_malloc, GIMG_GPU_MEM_LIMIT included;
 * -v then says so); otherwise st, for the operation to return. The CPU
 * gives the same result, so a GPU too small is never an error. */
gimg_status gimg_ctx_gpu_fallback(gimg_ctx *ctx, gimg_status st);
/* GPU time detail for -v: kernel time (events) and transfer time. */
void gimg_ctx_add_gpu_times(gimg_ctx *ctx, double kernel_ms, double transfer_ms);

/* The smallest auto_min_bytes over all operations: below it,
 * gimg_ctx_prepare does not start CUDA at all. */
extern const size_t gimg_auto_gpu_min_bytes;

#ifdef __cplusplus
}
#endif

#endif
