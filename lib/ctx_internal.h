/* ctx_internal.h — how operations ask the context where to run. */
#ifndef GIMG_CTX_INTERNAL_H
#define GIMG_CTX_INTERNAL_H

#include "cost.h"
#include "gimg.h"

#ifdef __cplusplus
extern "C" {
#endif

struct gimg_gpu;

/* Where an operation runs: *gpu is the GPU to use, or NULL for the CPU.
 * --device auto takes the side the cost table (cost.h) predicts faster
 * for job, counting CUDA's start-up unless this process's GPU is open
 * already (-v prints the prediction). Fails only when --device gpu was
 * asked for and no GPU can be used. */
gimg_status gimg_ctx_select(gimg_ctx *ctx, const gimg_cost_job *job, struct gimg_gpu **gpu);
/* The job's number of images (a stream, whose count is unknown: 1):
 * --device auto shares the GPU's start-up among them, each image's
 * operation weighed with its part (the driver calls it once, before the
 * first image). */
void gimg_ctx_set_batch_images(gimg_ctx *ctx, int images);
/* After an operation's GPU path failed with st: GIMG_OK when the operation
 * should now run on the CPU instead, which is when the GPU ran out of
 * memory (GIMG_E_NOMEM from gimg_gpu_malloc, GIMG_GPU_MEM_LIMIT included;
 * -v then says so); otherwise st, for the operation to return. The CPU
 * gives the same result, so a GPU too small is never an error. */
gimg_status gimg_ctx_gpu_fallback(gimg_ctx *ctx, gimg_status st);
/* The server (remote.h) when job should be sent to it; NULL: run it here.
 * --device auto sends it when the cost table predicts the GPU faster: with
 * a round trip where the server serves this job already, else with the
 * start-up (the server is then started, and warm for the jobs after). An
 * operation the server fails runs here too (gimg_remote_conv...). */
struct gimg_remote *gimg_ctx_server(gimg_ctx *ctx, const gimg_cost_job *job);
/* For gimgd: starts CUDA when the device is a GPU and waits until every
 * GPU of the list is up (or has failed: its status and message). */
gimg_status gimg_ctx_wait_ready(gimg_ctx *ctx);
/* For gimgd: the context's backend in a few words ("gpu 0 (NVIDIA H100
 * 80GB HBM3)", "cpu (16 threads)"), and what memory its lanes hold, a
 * line ending in a newline. */
void gimg_ctx_describe(gimg_ctx *ctx, char *buf, size_t size);
void gimg_ctx_memory_text(gimg_ctx *ctx, char *buf, size_t size);
/* GPU time detail for -v: kernel time (events) and transfer time. The
 * calling thread's share since its last take (gimgd's log per request). */
void gimg_ctx_add_gpu_times(gimg_ctx *ctx, double kernel_ms, double transfer_ms);
void gimg_ctx_take_thread_gpu_times(double *kernel_ms, double *transfer_ms);

/* The GPU codecs (gpu_jpeg.h), for the batch (driver.c), on the calling
 * thread's lane. Without CUDA they are never asked and never ready.
 *  - gimg_ctx_want_gpu_codecs: asks for nvJPEG beside CUDA's start-up,
 *    when --codecs is auto and the device is a GPU, or is auto and the
 *    batch's jpeg_megapixels (an estimate) pay for the start-up on
 *    `threads` CPU threads (gimg_auto_gpu_codecs; the start-up then begins
 *    at once); before gimg_ctx_prepare. Returns 1 if asked.
 *  - gimg_ctx_gpu_decode_jpeg: decodes bits (gimg_jpeg_read_header gave
 *    shell) on the lane's GPU: shell->device is set.
 *    Fails where the lane has no nvJPEG (-v says why) or nvJPEG refuses
 *    the file; the caller then decodes it on the CPU.
 *  - gimg_ctx_gpu_keep_outputs: while jpeg is not NULL (the output's
 *    JPEG settings), the lane's downloads of 8-bit gray or RGB images
 *    leave them on the GPU (their `device`), for its encoder.
 *  - gimg_ctx_gpu_encode_jpeg: im (on the GPU) to a JPEG bitstream without
 *    metadata, under o's quality and subsampling; *bits malloc'd.
 *  - gimg_ctx_gpu_item_done: the lane's item is done: outputs are
 *    downloaded again, and its input is no longer on the GPU (while it is,
 *    gimg_ctx_gpu_fallback does not send the operation to the CPU: it
 *    fails, and the batch decodes the input on the CPU and runs it again).
 *  - gimg_ctx_count_cpu_codec: a JPEG the batch gave the CPU, and why. */
int gimg_ctx_want_gpu_codecs(gimg_ctx *ctx, double jpeg_megapixels, int threads);
gimg_status gimg_ctx_gpu_decode_jpeg(gimg_ctx *ctx, const unsigned char *bits, size_t len,
                                     gimg_image *shell);
void gimg_ctx_gpu_keep_outputs(gimg_ctx *ctx, const gimg_write_opts *jpeg);
gimg_status gimg_ctx_gpu_encode_jpeg(gimg_ctx *ctx, const gimg_image *im,
                                     const gimg_write_opts *o, unsigned char **bits, size_t *len);
void gimg_ctx_gpu_item_done(gimg_ctx *ctx);
void gimg_ctx_count_cpu_codec(gimg_ctx *ctx, const char *why);

/* --device auto's choice of codecs for a batch: 1 when `megapixels` of
 * JPEG, decoded and encoded once each, take longer with libjpeg-turbo on
 * `threads` CPU threads than with the GPU's codecs, their start-up
 * (CUDA's, nvJPEG's, the hardware decoder's first call) included: by the
 * cost table t (cost.h), or this process's (gimg_cost_get); asks no GPU. */
int gimg_auto_gpu_codecs_with(const gimg_cost_table *t, double megapixels, int threads);
int gimg_auto_gpu_codecs(double megapixels, int threads);

#ifdef __cplusplus
}
#endif

#endif
