/* nvjpeg_memory.c — nvJPEG's memory on one GPU (nvjpeg_memory.h says why). */
#include "nvjpeg_memory.h"

#ifdef GIMG_HAVE_CUDA
#include "gpu_internal.h"

#include <pthread.h>
#include <stdlib.h>

struct gimg_nvjpeg_memory {
    int device;
    cudaMemPool_t pool; /* the GPU's default one; NULL: it has no memory pools */
    gimg_nvjpeg_dev_allocator_v2 dev_v2;
};

/* ------------------------------------------------- device memory, counted */

/* nvJPEG frees by address alone (CreateEx), and the count must give back
 * what was claimed whatever size a free names: the sizes are kept here (a
 * few dozen blocks a GPU). */
static pthread_mutex_t g_blocks_lock = PTHREAD_MUTEX_INITIALIZER;
static struct nv_block {
    void *d_ptr;
    size_t bytes;
} *g_blocks;
static size_t g_n_blocks, g_blocks_cap;

static int remember(void *d_ptr, size_t bytes)
{
    pthread_mutex_lock(&g_blocks_lock);
    if (g_n_blocks == g_blocks_cap) {
        const size_t cap = g_blocks_cap ? 2 * g_blocks_cap : 64;
        struct nv_block *grown = realloc(g_blocks, cap * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&g_blocks_lock);
            return 1;
        }
        g_blocks = grown;
        g_blocks_cap = cap;
    }
    g_blocks[g_n_blocks++] = (struct nv_block){d_ptr, bytes};
    pthread_mutex_unlock(&g_blocks_lock);
    return 0;
}

/* The size d_ptr was allocated with, forgotten; 0 if unknown. */
static size_t forget(void *d_ptr)
{
    size_t bytes = 0;
    pthread_mutex_lock(&g_blocks_lock);
    for (size_t i = g_n_blocks; i-- > 0;)
        if (g_blocks[i].d_ptr == d_ptr) {
            bytes = g_blocks[i].bytes;
            g_blocks[i] = g_blocks[--g_n_blocks];
            break;
        }
    pthread_mutex_unlock(&g_blocks_lock);
    return bytes;
}

/* CreateEx's: cudaMalloc and cudaFree through gimg_gpu_malloc. A refused
 * allocation fails nvJPEG's call (an allocator failure), and the image
 * goes to the CPU's codecs. */
static int counted_malloc(void **d_ptr, size_t bytes)
{
    if (gimg_gpu_malloc(d_ptr, bytes))
        return 1;
    if (remember(*d_ptr, bytes)) {
        gimg_gpu_free(*d_ptr, bytes);
        *d_ptr = NULL;
        return 1;
    }
    return 0;
}

static int counted_free(void *d_ptr)
{
    if (d_ptr)
        gimg_gpu_free(d_ptr, forget(d_ptr));
    return 0;
}

static gimg_nvjpeg_dev_allocator g_counted = {counted_malloc, counted_free};

/* CreateExV2's: from the GPU's pool of m, ordered on nvJPEG's stream. */
static int pool_malloc(void *ctx, void **d_ptr, size_t bytes, gimg_nvjpeg_stream stream)
{
    gimg_nvjpeg_memory *m = ctx;
    *d_ptr = NULL;
    if (gimg_gpu_claim(bytes))
        return 1;
    if (cudaMallocFromPoolAsync(d_ptr, bytes, m->pool, (cudaStream_t)stream) != cudaSuccess) {
        (void)cudaGetLastError(); /* out of memory is not sticky: clear it */
        gimg_gpu_unclaim(bytes);
        *d_ptr = NULL;
        return 1;
    }
    if (remember(*d_ptr, bytes)) {
        cudaFreeAsync(*d_ptr, (cudaStream_t)stream);
        gimg_gpu_unclaim(bytes);
        *d_ptr = NULL;
        return 1;
    }
    return 0;
}

static int pool_free(void *ctx, void *d_ptr, size_t bytes, gimg_nvjpeg_stream stream)
{
    (void)ctx;
    (void)bytes;
    if (!d_ptr)
        return 0;
    const size_t claimed = forget(d_ptr);
    const int failed = cudaFreeAsync(d_ptr, (cudaStream_t)stream) != cudaSuccess;
    gimg_gpu_unclaim(claimed);
    return failed;
}

/* ------------------------------------------------------------------ m */

gimg_status gimg_nvjpeg_memory_new(int device, gimg_nvjpeg_memory **out)
{
    gimg_nvjpeg_memory *m = calloc(1, sizeof *m);
    *out = NULL;
    if (!m)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    m->device = device;
    m->dev_v2 = (gimg_nvjpeg_dev_allocator_v2){pool_malloc, pool_free, m};
    /* The GPU's default pool, which the lanes' buffers come from too: it
     * keeps what is given back, since nvJPEG allocates again at the sizes
     * it freed. */
    if (!gimg_gpu_pool(device, &m->pool))
        m->pool = NULL; /* CreateEx and the counted allocator */
    *out = m;
    return GIMG_OK;
}

void gimg_nvjpeg_memory_free(gimg_nvjpeg_memory *m)
{
    free(m); /* the pool is the GPU's */
}

int gimg_nvjpeg_memory_create_handle(gimg_nvjpeg_memory *m, const gimg_nvjpeg_api *api,
                                     int backend, unsigned flags, gimg_nvjpeg_handle *handle)
{
    /* Pinned memory stays nvJPEG's own (cudaHostAlloc). */
    if (api->CreateExV2 && m->pool &&
        api->CreateExV2(backend, &m->dev_v2, NULL, flags, handle) == GIMG_NVJPEG_SUCCESS)
        return GIMG_NVJPEG_SUCCESS;
    return api->CreateEx(backend, &g_counted, NULL, flags, handle);
}
#endif
