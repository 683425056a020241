/*
 * gpu.c — a GPU lane: device set-up, a stream, device memory (counted
 * against GIMG_GPU_MEM_LIMIT), buffers reused across images, and pitched
 * transfers through pinned staging. Built only with CUDA.
 */
#include "gpu_internal.h"

#ifdef GIMG_HAVE_CUDA
#include "gpu_jpeg.h"
#include "histogram.h"
#include <errno.h>
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------ GIMG_GPU_MEM_LIMIT */

static pthread_once_t g_limit_once = PTHREAD_ONCE_INIT;
static size_t g_limit_bytes = SIZE_MAX;
/* Device memory held through gimg_gpu_malloc, by every lane. */
static pthread_mutex_t g_used_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t g_used_bytes;
static char g_limit_error[160];

/* Bytes, with an optional K, M, G or T (powers of 1024): "1500000", "64M". */
static void read_limit(void)
{
    static const char units[] = "KMGT";
    const char *s = getenv("GIMG_GPU_MEM_LIMIT");
    if (!s || !*s)
        return;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    const char *u = *end ? strchr(units, *end) : NULL;
    int shift = u ? 10 * (int)(u - units + 1) : 0;
    if (u)
        end++;
    if (s[0] < '0' || s[0] > '9' || errno || *end || v > (SIZE_MAX >> shift)) {
        snprintf(g_limit_error, sizeof g_limit_error,
                 "invalid GIMG_GPU_MEM_LIMIT '%.40s' (a number of bytes, optionally with K, M, "
                 "G or T)", s);
        return;
    }
    g_limit_bytes = (size_t)v << shift;
}

void gimg_gpu_unclaim(size_t bytes)
{
    pthread_mutex_lock(&g_used_lock);
    g_used_bytes -= bytes < g_used_bytes ? bytes : g_used_bytes;
    pthread_mutex_unlock(&g_used_lock);
}

size_t gimg_gpu_claimed_bytes(void)
{
    pthread_mutex_lock(&g_used_lock);
    const size_t bytes = g_used_bytes;
    pthread_mutex_unlock(&g_used_lock);
    return bytes;
}

gimg_status gimg_gpu_claim(size_t bytes)
{
    pthread_mutex_lock(&g_used_lock);
    const size_t used = g_used_bytes;
    const int over = bytes > g_limit_bytes || used > g_limit_bytes - bytes;
    if (!over)
        g_used_bytes += bytes;
    pthread_mutex_unlock(&g_used_lock);
    if (over)
        return gimg_fail(GIMG_E_NOMEM,
                         "GPU out of memory: %zu more bytes would exceed GIMG_GPU_MEM_LIMIT "
                         "(%zu bytes, %zu in use)", bytes, g_limit_bytes, used);
    return GIMG_OK;
}

/* The outcome e of allocating *d_ptr, bytes claimed before: on failure
 * the claim given back and *d_ptr NULL; the device out of memory as
 * GIMG_E_NOMEM. */
static gimg_status allocated(cudaError_t e, void **d_ptr, size_t bytes)
{
    if (e == cudaSuccess)
        return GIMG_OK;
    gimg_gpu_unclaim(bytes);
    *d_ptr = NULL;
    if (e != cudaErrorMemoryAllocation)
        GIMG_CUDA(e);
    (void)cudaGetLastError(); /* not sticky: clear it */
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    return gimg_fail(GIMG_E_NOMEM, "GPU out of memory allocating %zu bytes (%zu free of %zu)",
                     bytes, free_bytes, total);
}

gimg_status gimg_gpu_malloc(void **d_ptr, size_t bytes)
{
    *d_ptr = NULL;
    gimg_status st = gimg_gpu_claim(bytes); /* given back below on failure */
    if (st)
        return st;
    cudaError_t e = cudaMalloc(d_ptr, bytes);
    if (e == cudaErrorMemoryAllocation) {
        /* What the lanes' pool keeps (gimg_gpu_lane_malloc) goes back to
         * the device, and once more. */
        int device = 0;
        cudaMemPool_t pool;
        (void)cudaGetLastError();
        if (cudaGetDevice(&device) == cudaSuccess &&
            cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess &&
            cudaDeviceSynchronize() == cudaSuccess && cudaMemPoolTrimTo(pool, 0) == cudaSuccess)
            e = cudaMalloc(d_ptr, bytes);
    }
    return allocated(e, d_ptr, bytes);
}

void gimg_gpu_free(void *d_ptr, size_t bytes)
{
    if (!d_ptr)
        return;
    cudaFree(d_ptr);
    gimg_gpu_unclaim(bytes);
}

int gimg_gpu_pool(int device, cudaMemPool_t *pool)
{
    /* It keeps all that is given back (the release threshold the most).
     * Memory given back on one stream goes to another only once the GPU
     * is past its last use (opportunistic reuse), never on a dependency
     * between the streams (the pool's default): the hardware JPEG
     * decoder writes its outputs without waiting for the work queued on
     * its stream before it (torchcodec #1634), so memory still read there
     * must not be its destination. */
    int pools = 0, no = 0, yes = 1;
    uint64_t keep_all = UINT64_MAX;
    const int ok =
        cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device) == cudaSuccess &&
        pools && cudaDeviceGetDefaultMemPool(pool, device) == cudaSuccess &&
        cudaMemPoolSetAttribute(*pool, cudaMemPoolAttrReleaseThreshold, &keep_all) ==
            cudaSuccess &&
        cudaMemPoolSetAttribute(*pool, cudaMemPoolReuseFollowEventDependencies, &no) ==
            cudaSuccess &&
        cudaMemPoolSetAttribute(*pool, cudaMemPoolReuseAllowInternalDependencies, &no) ==
            cudaSuccess &&
        cudaMemPoolSetAttribute(*pool, cudaMemPoolReuseAllowOpportunistic, &yes) == cudaSuccess;
    (void)cudaGetLastError();
    return ok;
}

gimg_status gimg_gpu_lane_malloc(gimg_gpu *g, void **d_ptr, size_t bytes)
{
    if (!g->pools)
        return gimg_gpu_malloc(d_ptr, bytes);
    *d_ptr = NULL;
    gimg_status st = gimg_gpu_claim(bytes);
    if (st)
        return st;
    return allocated(cudaMallocAsync(d_ptr, bytes, g->stream), d_ptr, bytes);
}

void gimg_gpu_lane_free(gimg_gpu *g, void *d_ptr, size_t bytes)
{
    if (!d_ptr)
        return;
    if (!g->pools) {
        gimg_gpu_free(d_ptr, bytes);
        return;
    }
    cudaFreeAsync(d_ptr, g->stream);
    gimg_gpu_unclaim(bytes);
}

gimg_status gimg_gpu_bind(gimg_gpu *g)
{
    GIMG_CUDA(cudaSetDevice(g->device));
    return GIMG_OK;
}

/* The steps of gimg_gpu_open; on failure the caller releases what was made. */
static gimg_status setup(gimg_gpu *g, int index)
{
    struct cudaDeviceProp prop;
    g->device = index;
    GIMG_CUDA(cudaSetDevice(index));
    /* A lane waits for its copies and kernels while the CPU workers decode
     * and encode: it must sleep then, not spin on a core they need. */
    GIMG_CUDA(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));
    GIMG_CUDA(cudaGetDeviceProperties(&prop, index));
    snprintf(g->name, sizeof g->name, "%s", prop.name);
    g->sm_count = prop.multiProcessorCount;
    GIMG_CUDA(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
    cudaMemPool_t pool;
    g->pools = gimg_gpu_pool(index, &pool);
    GIMG_CUDA(cudaEventCreate(&g->ev_start));
    GIMG_CUDA(cudaEventCreate(&g->ev_stop));
    for (int s = 0; s < GIMG_GPU_SLOTS; s++)
        for (int c = 0; c < GIMG_STAGE_CHUNKS; c++)
            GIMG_CUDA(cudaEventCreateWithFlags(&g->ev_chunk[s][c], cudaEventDisableTiming));
    return GIMG_OK;
}

gimg_status gimg_gpu_open(int index, gimg_gpu **out)
{
    *out = NULL;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0)
        return gimg_fail(GIMG_E_DEVICE, "no usable GPU: %s",
                         e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device found");
    if (index < 0 || index >= count || index >= GIMG_MAX_GPUS)
        return gimg_fail(GIMG_E_DEVICE, "no GPU %d: this machine has %d", index, count);
    pthread_once(&g_limit_once, read_limit);
    if (g_limit_error[0])
        return gimg_fail(GIMG_E_DEVICE, "%s", g_limit_error);
    gimg_gpu *g = calloc(1, sizeof *g);
    if (!g)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    gimg_status st = setup(g, index);
    if (st) {
        gimg_gpu_close(g);
        return st;
    }
    *out = g;
    return GIMG_OK;
}

void gimg_gpu_close(gimg_gpu *g)
{
    if (!g)
        return;
    cudaSetDevice(g->device);
    if (g->stream)
        cudaStreamSynchronize(g->stream);
    gimg_gpu_jpeg_close(g);
    for (int i = 0; i < GIMG_GPU_SLOTS; i++) {
        gimg_gpu_lane_free(g, g->d_buf[i], g->d_cap[i]);
        cudaFreeHost(g->h_stage[i]);
        for (int c = 0; c < GIMG_STAGE_CHUNKS; c++)
            if (g->ev_chunk[i][c])
                cudaEventDestroy(g->ev_chunk[i][c]);
    }
    gimg_gpu_free(g->d_hist_sync, GIMG_CUDA_HIST_SYNC_BYTES);
    if (g->ev_start)
        cudaEventDestroy(g->ev_start);
    if (g->ev_stop)
        cudaEventDestroy(g->ev_stop);
    if (g->stream)
        cudaStreamDestroy(g->stream);
    free(g);
}

gimg_status gimg_gpu_hist_sync(gimg_gpu *g, unsigned **d_sync)
{
    if (!g->d_hist_sync) {
        unsigned *d_new = NULL;
        gimg_status st = gimg_gpu_malloc((void **)&d_new, GIMG_CUDA_HIST_SYNC_BYTES);
        if (st)
            return st;
        cudaError_t e = cudaMemsetAsync(d_new, 0, GIMG_CUDA_HIST_SYNC_BYTES, g->stream);
        if (e != cudaSuccess) {
            gimg_gpu_free(d_new, GIMG_CUDA_HIST_SYNC_BYTES);
            return gimg_fail(gimg_cuda_status(e),
                             "CUDA error: clearing the histogram's sync words: %s",
                             cudaGetErrorString(e));
        }
        g->d_hist_sync = d_new;
    }
    *d_sync = g->d_hist_sync;
    return GIMG_OK;
}

void gimg_gpu_release_images(gimg_gpu *g)
{
    for (int slot = 0; slot < 2; slot++) {
        gimg_gpu_lane_free(g, g->d_buf[slot], g->d_cap[slot]);
        g->d_buf[slot] = NULL;
        g->d_cap[slot] = 0;
    }
    cudaStreamSynchronize(g->stream);
}

gimg_status gimg_gpu_image(gimg_gpu *g, int slot, int width, int height, int channels,
                           gimg_sample sample, gimg_dimage *d)
{
    size_t row, total;
    gimg_status st = gimg_check_size(width, height, channels, sample, &row, &total);
    if (st)
        return st;
    size_t pitch = (row + 15) & ~(size_t)15;
    size_t bytes = pitch * (size_t)height;
    if (bytes / pitch != (size_t)height)
        return gimg_fail(GIMG_E_LIMIT, "image too large for the GPU");
    if (g->d_cap[slot] < bytes) {
        gimg_gpu_lane_free(g, g->d_buf[slot], g->d_cap[slot]);
        g->d_buf[slot] = NULL;
        g->d_cap[slot] = 0;
        if ((st = gimg_gpu_lane_malloc(g, &g->d_buf[slot], bytes)))
            return st;
        g->d_cap[slot] = bytes;
        /* The kernels read whole 16-byte words, row padding included; give
         * those bytes a value once, so that no read is of uninitialised
         * memory (compute-sanitizer's initcheck). */
        GIMG_CUDA(cudaMemsetAsync(g->d_buf[slot], 0, bytes, g->stream));
    }
    d->d_data = g->d_buf[slot];
    d->pitch_bytes = pitch;
    d->width = width;
    d->height = height;
    d->channels = channels;
    d->sample = sample;
    d->slot = slot;
    return GIMG_OK;
}

/* ------------------------------------------------------------ transfers */

/* Pinned staging of slot s for images with rows of row_bytes: *rows rows a
 * chunk. NULL when pinned memory cannot be had (the caller then copies from
 * pageable memory, slower but the same). */
static unsigned char *staging(gimg_gpu *g, int s, size_t row_bytes, int height, int *rows)
{
    size_t chunk_rows = row_bytes >= GIMG_STAGE_CHUNK_BYTES ? 1
                                                           : GIMG_STAGE_CHUNK_BYTES / row_bytes;
    if (chunk_rows > (size_t)height)
        chunk_rows = (size_t)height;
    if (row_bytes > SIZE_MAX / GIMG_STAGE_CHUNKS / chunk_rows)
        return NULL;
    size_t need = row_bytes * chunk_rows * GIMG_STAGE_CHUNKS;
    if (g->h_stage_cap[s] < need) {
        for (int c = 0; c < GIMG_STAGE_CHUNKS; c++)
            if (cudaEventSynchronize(g->ev_chunk[s][c]) != cudaSuccess)
                return NULL;
        cudaFreeHost(g->h_stage[s]);
        g->h_stage[s] = NULL;
        g->h_stage_cap[s] = 0;
        if (cudaHostAlloc((void **)&g->h_stage[s], need, cudaHostAllocDefault) != cudaSuccess) {
            (void)cudaGetLastError();
            g->h_stage[s] = NULL;
            return NULL;
        }
        g->h_stage_cap[s] = need;
    }
    *rows = (int)chunk_rows;
    return g->h_stage[s];
}

/* One core copies at about a third of what the copy engine moves from
 * pinned memory, so a lane that has every core (one image) copies large
 * chunks with all of them. In a batch the cores decode and encode, and a
 * parallel copy would only wait for them: one thread copies. */
static void copy_rows(unsigned char *dst, size_t dst_stride, const unsigned char *src,
                      size_t src_stride, size_t row_bytes, int rows)
{
    const size_t bytes = row_bytes * (size_t)rows;
    const int parallel =
        bytes >= ((size_t)1 << 20) && omp_get_max_threads() >= omp_get_num_procs();
    if (dst_stride == row_bytes && src_stride == row_bytes) {
        const size_t piece = 64 * 1024, pieces = (bytes + piece - 1) / piece;
#pragma omp parallel for if (parallel) schedule(static)
        for (size_t p = 0; p < pieces; p++)
            memcpy(dst + p * piece, src + p * piece, p + 1 < pieces ? piece : bytes - p * piece);
        return;
    }
#pragma omp parallel for if (parallel) schedule(static)
    for (int y = 0; y < rows; y++)
        memcpy(dst + (size_t)y * dst_stride, src + (size_t)y * src_stride, row_bytes);
}

gimg_status gimg_gpu_upload(gimg_gpu *g, const gimg_image *h, gimg_dimage *d)
{
    if (h->device) {
        *d = *h->device;
        return GIMG_OK;
    }
    const size_t row = (size_t)h->width * gimg_pixel_bytes(h);
    unsigned char *d_bytes = d->d_data;
    int rows;
    unsigned char *h_stage = staging(g, d->slot, row, h->height, &rows);
    if (!h_stage) {
        GIMG_CUDA(cudaMemcpy2DAsync(d_bytes, d->pitch_bytes, h->data, h->stride_bytes, row,
                                    (size_t)h->height, cudaMemcpyHostToDevice, g->stream));
        return GIMG_OK;
    }
    /* Chunk k goes through ring entry k mod GIMG_STAGE_CHUNKS, once the
     * copy engine is done with what that entry held before. */
    const size_t chunk_bytes = row * (size_t)rows;
    for (int y = 0, k = 0; y < h->height; y += rows, k++) {
        const int n = h->height - y < rows ? h->height - y : rows;
        const int r = k % GIMG_STAGE_CHUNKS;
        unsigned char *h_chunk = h_stage + (size_t)r * chunk_bytes;
        GIMG_CUDA(cudaEventSynchronize(g->ev_chunk[d->slot][r]));
        copy_rows(h_chunk, row, (const unsigned char *)h->data + (size_t)y * h->stride_bytes,
                  h->stride_bytes, row, n);
        GIMG_CUDA(cudaMemcpy2DAsync(d_bytes + (size_t)y * d->pitch_bytes, d->pitch_bytes,
                                    h_chunk, row, row, (size_t)n, cudaMemcpyHostToDevice,
                                    g->stream));
        GIMG_CUDA(cudaEventRecord(g->ev_chunk[d->slot][r], g->stream));
    }
    return GIMG_OK;
}

/* Queues the device-to-host copy of chunk k (rows from y) into its ring entry. */
static gimg_status queue_download_chunk(gimg_gpu *g, const gimg_dimage *d, unsigned char *h_stage,
                                        size_t row, int rows, int k)
{
    const int y = k * rows, n = d->height - y < rows ? d->height - y : rows;
    const int r = k % GIMG_STAGE_CHUNKS;
    GIMG_CUDA(cudaMemcpy2DAsync(h_stage + (size_t)r * row * rows, row,
                                (const unsigned char *)d->d_data + (size_t)y * d->pitch_bytes,
                                d->pitch_bytes, row, (size_t)n, cudaMemcpyDeviceToHost,
                                g->stream));
    GIMG_CUDA(cudaEventRecord(g->ev_chunk[d->slot][r], g->stream));
    return GIMG_OK;
}

void gimg_gpu_keep_outputs(gimg_gpu *g, int keep)
{
    g->keep_outputs = keep;
}

gimg_status gimg_gpu_download(gimg_gpu *g, const gimg_dimage *d, gimg_image *h)
{
    if (g->keep_outputs && d->sample == GIMG_U8 && (d->channels == 1 || d->channels == 3)) {
        /* Callers read their events' times once this returns. */
        GIMG_CUDA(cudaStreamSynchronize(g->stream));
        g->kept = *d;
        free(h->data);
        h->data = NULL;
        h->device = &g->kept;
        return GIMG_OK;
    }
    const size_t row = (size_t)h->width * gimg_pixel_bytes(h);
    int rows;
    gimg_status st;
    unsigned char *h_stage = staging(g, d->slot, row, h->height, &rows);
    if (!h_stage) {
        GIMG_CUDA(cudaMemcpy2DAsync(h->data, h->stride_bytes, d->d_data, d->pitch_bytes, row,
                                    (size_t)h->height, cudaMemcpyDeviceToHost, g->stream));
        GIMG_CUDA(cudaStreamSynchronize(g->stream));
        return GIMG_OK;
    }
    /* The whole ring is queued; as each chunk lands the CPU copies it out
     * and queues the chunk that reuses its entry. */
    const int chunks = (h->height + rows - 1) / rows;
    for (int k = 0; k < chunks && k < GIMG_STAGE_CHUNKS; k++)
        if ((st = queue_download_chunk(g, d, h_stage, row, rows, k)))
            return st;
    for (int k = 0; k < chunks; k++) {
        const int y = k * rows, n = h->height - y < rows ? h->height - y : rows;
        const int r = k % GIMG_STAGE_CHUNKS;
        GIMG_CUDA(cudaEventSynchronize(g->ev_chunk[d->slot][r]));
        copy_rows((unsigned char *)h->data + (size_t)y * h->stride_bytes, h->stride_bytes,
                  h_stage + (size_t)r * row * rows, row, row, n);
        if (k + GIMG_STAGE_CHUNKS < chunks &&
            (st = queue_download_chunk(g, d, h_stage, row, rows, k + GIMG_STAGE_CHUNKS)))
            return st;
    }
    return GIMG_OK;
}

/* ------------------------------------------------------------ constants */

static pthread_mutex_t g_constants_lock[GIMG_MAX_GPUS];
static pthread_once_t g_constants_once = PTHREAD_ONCE_INIT;

static void init_constants_locks(void)
{
    for (int i = 0; i < GIMG_MAX_GPUS; i++)
        pthread_mutex_init(&g_constants_lock[i], NULL);
}

void gimg_gpu_lock_constants(gimg_gpu *g)
{
    pthread_once(&g_constants_once, init_constants_locks);
    pthread_mutex_lock(&g_constants_lock[g->device]);
}

void gimg_gpu_unlock_constants(gimg_gpu *g)
{
    pthread_mutex_unlock(&g_constants_lock[g->device]);
}
#endif
