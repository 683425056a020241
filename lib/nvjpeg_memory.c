/* nvjpeg_memory.c — nvJPEG's memory on one GPU (nvjpeg_memory.h says why). */
#include "nvjpeg_memory.h"

#ifdef GIMG_HAVE_CUDA
#include "gpu_internal.h"

#include <pthread.h>
#include <stdlib.h>

/* A pinned block nvJPEG was given. */
typedef struct pinned_block {
    void *h_ptr;
    size_t bytes;
    cudaEvent_t freed;          /* recorded on the stream nvJPEG freed it on; NULL: unused */
    struct pinned_block *next;
} pinned_block;

struct gimg_nvjpeg_memory {
    cudaMemPool_t pool; /* the GPU's default one; NULL: it has no memory pools */
    gimg_nvjpeg_dev_allocator_v2 dev_v2;
    gimg_nvjpeg_pinned_allocator_v2 pinned_v2;
    /* nvJPEG's pinned blocks: lent, and given back (kept, never freed
     * before m is). Under lock, which is never held across a CUDA call
     * that may wait for the GPU. */
    pthread_mutex_t lock;
    pinned_block *lent, *kept;
    size_t pinned_bytes;
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

/* ------------------------------------------------------- pinned memory */

/* nvJPEG's pinned buffers grow with the images too, and cudaFreeHost
 * waits for the whole GPU like cudaFree. So a block nvJPEG gives back is
 * kept, with an event recorded on the stream it named, and lent again,
 * the smallest that fits, once that event has passed (the GPU's copies
 * from it are done); the blocks are freed with m. nvJPEG allocates again
 * at the sizes it freed, so the kept blocks stay about the most nvJPEG
 * has held at once. */
static int pinned_malloc(void *ctx, void **h_ptr, size_t bytes, gimg_nvjpeg_stream stream)
{
    (void)stream;
    gimg_nvjpeg_memory *m = ctx;
    pinned_block *b = NULL;
    pthread_mutex_lock(&m->lock);
    pinned_block **best = NULL;
    for (pinned_block **p = &m->kept; *p; p = &(*p)->next)
        if ((*p)->bytes >= bytes && (!best || (*p)->bytes < (*best)->bytes) &&
            (!(*p)->freed || cudaEventQuery((*p)->freed) == cudaSuccess))
            best = p;
    if (best) {
        b = *best;
        *best = b->next;
        b->next = m->lent;
        m->lent = b;
    }
    pthread_mutex_unlock(&m->lock);
    (void)cudaGetLastError(); /* an event not yet passed is no error */
    if (b) {
        *h_ptr = b->h_ptr;
        return 0;
    }
    *h_ptr = NULL;
    if (!(b = calloc(1, sizeof *b)))
        return 1;
    if (cudaHostAlloc(&b->h_ptr, bytes ? bytes : 1, cudaHostAllocDefault) != cudaSuccess) {
        (void)cudaGetLastError();
        free(b);
        return 1;
    }
    b->bytes = bytes;
    pthread_mutex_lock(&m->lock);
    b->next = m->lent;
    m->lent = b;
    m->pinned_bytes += bytes;
    pthread_mutex_unlock(&m->lock);
    *h_ptr = b->h_ptr;
    return 0;
}

static int pinned_free(void *ctx, void *h_ptr, size_t bytes, gimg_nvjpeg_stream stream)
{
    (void)bytes;
    gimg_nvjpeg_memory *m = ctx;
    if (!h_ptr)
        return 0;
    pinned_block *b = NULL;
    pthread_mutex_lock(&m->lock);
    for (pinned_block **p = &m->lent; *p; p = &(*p)->next)
        if ((*p)->h_ptr == h_ptr) {
            b = *p;
            *p = b->next;
            break;
        }
    pthread_mutex_unlock(&m->lock);
    if (!b)
        return 1; /* not ours */
    /* Outside the lock: the event's record is queued, not waited for. */
    if ((!b->freed && cudaEventCreateWithFlags(&b->freed, cudaEventDisableTiming) != cudaSuccess) ||
        cudaEventRecord(b->freed, (cudaStream_t)stream) != cudaSuccess) {
        (void)cudaGetLastError();
        cudaStreamSynchronize((cudaStream_t)stream); /* then it is free now */
        if (b->freed)
            cudaEventDestroy(b->freed);
        b->freed = NULL;
    }
    pthread_mutex_lock(&m->lock);
    b->next = m->kept;
    m->kept = b;
    pthread_mutex_unlock(&m->lock);
    return 0;
}

static void free_blocks(pinned_block *b)
{
    while (b) {
        pinned_block *next = b->next;
        if (b->freed) {
            cudaEventSynchronize(b->freed);
            cudaEventDestroy(b->freed);
        }
        cudaFreeHost(b->h_ptr);
        free(b);
        b = next;
    }
}

size_t gimg_nvjpeg_memory_pinned_bytes(gimg_nvjpeg_memory *m)
{
    if (!m)
        return 0;
    pthread_mutex_lock(&m->lock);
    const size_t bytes = m->pinned_bytes;
    pthread_mutex_unlock(&m->lock);
    return bytes;
}

/* ------------------------------------------------------------------ m */

gimg_status gimg_nvjpeg_memory_new(int device, gimg_nvjpeg_memory **out)
{
    gimg_nvjpeg_memory *m = calloc(1, sizeof *m);
    *out = NULL;
    if (!m)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    m->dev_v2 = (gimg_nvjpeg_dev_allocator_v2){pool_malloc, pool_free, m};
    m->pinned_v2 = (gimg_nvjpeg_pinned_allocator_v2){pinned_malloc, pinned_free, m};
    pthread_mutex_init(&m->lock, NULL);
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
    if (!m)
        return;
    /* After the handle: nvJPEG has given back all it was lent. */
    free_blocks(m->kept);
    free_blocks(m->lent);
    pthread_mutex_destroy(&m->lock);
    free(m); /* the pool is the GPU's */
}

int gimg_nvjpeg_memory_create_handle(gimg_nvjpeg_memory *m, const gimg_nvjpeg_api *api,
                                     int backend, unsigned flags, gimg_nvjpeg_handle *handle)
{
    if (api->CreateExV2 && m->pool &&
        api->CreateExV2(backend, &m->dev_v2, &m->pinned_v2, flags, handle) ==
            GIMG_NVJPEG_SUCCESS)
        return GIMG_NVJPEG_SUCCESS;
    return api->CreateEx(backend, &g_counted, NULL, flags, handle);
}
#endif
