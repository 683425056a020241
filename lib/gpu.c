/*
 * gpu.c — the per-process GPU context: device set-up, a stream, device
 * memory (counted against GIMG_GPU_MEM_LIMIT), buffers reused across images,
 * and pitched transfers. Built only with CUDA.
 */
#include "gpu_internal.h"

#ifdef GIMG_HAVE_CUDA
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------ GIMG_GPU_MEM_LIMIT */

static pthread_once_t g_limit_once = PTHREAD_ONCE_INIT;
static size_t g_limit_bytes = SIZE_MAX;
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

gimg_status gimg_gpu_malloc(gimg_gpu *g, void **d_ptr, size_t bytes)
{
    *d_ptr = NULL;
    if (bytes > g->d_limit_bytes || g->d_used_bytes > g->d_limit_bytes - bytes)
        return gimg_fail(GIMG_E_NOMEM,
                         "GPU out of memory: %zu more bytes would exceed GIMG_GPU_MEM_LIMIT "
                         "(%zu bytes, %zu in use)", bytes, g->d_limit_bytes, g->d_used_bytes);
    cudaError_t e = cudaMalloc(d_ptr, bytes);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();               /* not sticky: clear it */
        size_t free_bytes = 0, total = 0;
        cudaMemGetInfo(&free_bytes, &total);
        *d_ptr = NULL;
        return gimg_fail(GIMG_E_NOMEM, "GPU out of memory allocating %zu bytes (%zu free of %zu)",
                         bytes, free_bytes, total);
    }
    GIMG_CUDA(e);
    g->d_used_bytes += bytes;
    return GIMG_OK;
}

void gimg_gpu_free(gimg_gpu *g, void *d_ptr, size_t bytes)
{
    if (!d_ptr)
        return;
    cudaFree(d_ptr);
    g->d_used_bytes -= bytes < g->d_used_bytes ? bytes : g->d_used_bytes;
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
    GIMG_CUDA(cudaGetDeviceProperties(&prop, index));
    snprintf(g->name, sizeof g->name, "%s", prop.name);
    g->sm_count = prop.multiProcessorCount;
    GIMG_CUDA(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
    GIMG_CUDA(cudaEventCreate(&g->ev_start));
    GIMG_CUDA(cudaEventCreate(&g->ev_stop));
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
    if (index < 0 || index >= count)
        return gimg_fail(GIMG_E_DEVICE, "no GPU %d: this machine has %d", index, count);
    pthread_once(&g_limit_once, read_limit);
    if (g_limit_error[0])
        return gimg_fail(GIMG_E_DEVICE, "%s", g_limit_error);
    gimg_gpu *g = calloc(1, sizeof *g);
    if (!g)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    g->d_limit_bytes = g_limit_bytes;
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
    for (int i = 0; i < 2; i++)
        gimg_gpu_free(g, g->d_buf[i], g->d_cap[i]);
    if (g->ev_start)
        cudaEventDestroy(g->ev_start);
    if (g->ev_stop)
        cudaEventDestroy(g->ev_stop);
    if (g->stream)
        cudaStreamDestroy(g->stream);
    free(g);
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
        gimg_gpu_free(g, g->d_buf[slot], g->d_cap[slot]);
        g->d_buf[slot] = NULL;
        g->d_cap[slot] = 0;
        if ((st = gimg_gpu_malloc(g, &g->d_buf[slot], bytes)))
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
    return GIMG_OK;
}

gimg_status gimg_gpu_upload(gimg_gpu *g, const gimg_image *h, gimg_dimage *d)
{
    size_t row = (size_t)h->width * gimg_pixel_bytes(h);
    GIMG_CUDA(cudaMemcpy2DAsync(d->d_data, d->pitch_bytes, h->data, h->stride_bytes, row,
                                (size_t)h->height, cudaMemcpyHostToDevice, g->stream));
    return GIMG_OK;
}

gimg_status gimg_gpu_download(gimg_gpu *g, const gimg_dimage *d, gimg_image *h)
{
    size_t row = (size_t)h->width * gimg_pixel_bytes(h);
    GIMG_CUDA(cudaMemcpy2DAsync(h->data, h->stride_bytes, d->d_data, d->pitch_bytes, row,
                                (size_t)h->height, cudaMemcpyDeviceToHost, g->stream));
    GIMG_CUDA(cudaStreamSynchronize(g->stream));
    return GIMG_OK;
}
#endif
