/* nvjpeg_memory.c — nvJPEG's memory on one GPU (nvjpeg_memory.h says why). */
#include "nvjpeg_memory.h"

#ifdef GIMG_HAVE_CUDA
#include "gpu_internal.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

/* Pinned blocks kept for reuse, at most this many and bytes on a GPU
 * (beyond them, blocks whose use has passed are freed): 16 lanes'
 * bitstream buffers and nvJPEG's staging for 4096x4096 photos take about
 * 250 MB. */
#define KEPT_BLOCKS 128
#define KEPT_BYTES ((size_t)1 << 30)

typedef struct {
    void *h_ptr;
    size_t bytes;
    cudaEvent_t ev; /* recorded after its last use; NULL: none pending */
} kept_block;

struct gimg_nvjpeg_memory {
    int device;
    cudaMemPool_t pool; /* the GPU's default one; NULL: it has no memory pools */
    gimg_nvjpeg_dev_allocator_v2 dev_v2;
    gimg_nvjpeg_pinned_allocator_v2 pinned_v2;
    pthread_mutex_t lock;
    kept_block kept[KEPT_BLOCKS];
    int n_kept;
    size_t kept_bytes;
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

/* --------------------------------------------------------- pinned memory */

/* Frees the blocks of m whose use has passed, largest first, until m
 * keeps fewer than KEPT_BLOCKS and at most KEPT_BYTES - room bytes.
 * Called with m->lock held; cudaFreeHost waits for the GPU, so only
 * beyond those bounds. */
static void trim(gimg_nvjpeg_memory *m, size_t room)
{
    while (m->n_kept >= KEPT_BLOCKS || m->kept_bytes > KEPT_BYTES - room) {
        int victim = -1;
        for (int i = 0; i < m->n_kept; i++)
            if ((!m->kept[i].ev || cudaEventQuery(m->kept[i].ev) == cudaSuccess) &&
                (victim < 0 || m->kept[i].bytes > m->kept[victim].bytes))
                victim = i;
        if (victim < 0)
            return; /* all still in use: keep them */
        kept_block b = m->kept[victim];
        m->kept[victim] = m->kept[--m->n_kept];
        m->kept_bytes -= b.bytes;
        if (b.ev)
            cudaEventDestroy(b.ev);
        cudaFreeHost(b.h_ptr);
    }
}

void *gimg_nvjpeg_pinned_get(gimg_nvjpeg_memory *m, size_t bytes, size_t *got_bytes)
{
    /* A kept block no more than twice as large (and 1 MiB), so that small
     * requests leave large blocks to large ones. */
    const size_t most = bytes > (SIZE_MAX - ((size_t)1 << 20)) / 2
                            ? SIZE_MAX
                            : 2 * bytes + ((size_t)1 << 20);
    pthread_mutex_lock(&m->lock);
    int best = -1;
    for (int i = 0; i < m->n_kept; i++) {
        const kept_block *b = &m->kept[i];
        if (b->bytes < bytes || b->bytes > most ||
            (best >= 0 && b->bytes >= m->kept[best].bytes))
            continue;
        if (b->ev) {
            cudaError_t e = cudaEventQuery(b->ev);
            if (e == cudaErrorNotReady)
                continue;
            (void)cudaGetLastError();
        }
        best = i;
    }
    if (best >= 0) {
        kept_block b = m->kept[best];
        m->kept[best] = m->kept[--m->n_kept];
        m->kept_bytes -= b.bytes;
        pthread_mutex_unlock(&m->lock);
        if (b.ev)
            cudaEventDestroy(b.ev);
        *got_bytes = b.bytes;
        return b.h_ptr;
    }
    pthread_mutex_unlock(&m->lock);
    void *h_ptr = NULL;
    if (cudaHostAlloc(&h_ptr, bytes ? bytes : 1, cudaHostAllocDefault) != cudaSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    *got_bytes = bytes;
    return h_ptr;
}

void gimg_nvjpeg_pinned_put(gimg_nvjpeg_memory *m, void *h_ptr, size_t bytes,
                            cudaStream_t stream)
{
    if (!h_ptr)
        return;
    kept_block b = {h_ptr, bytes, NULL};
    /* The event's device must be the stream's: the caller's current one. */
    if (stream && (cudaEventCreateWithFlags(&b.ev, cudaEventDisableTiming) != cudaSuccess ||
                   cudaEventRecord(b.ev, stream) != cudaSuccess)) {
        (void)cudaGetLastError();
        if (b.ev)
            cudaEventDestroy(b.ev);
        cudaStreamSynchronize(stream);
        b.ev = NULL;
    }
    pthread_mutex_lock(&m->lock);
    trim(m, bytes < KEPT_BYTES ? bytes : KEPT_BYTES);
    if (m->n_kept < KEPT_BLOCKS && bytes <= KEPT_BYTES - m->kept_bytes) {
        m->kept[m->n_kept++] = b;
        m->kept_bytes += bytes;
        b.h_ptr = NULL;
    }
    pthread_mutex_unlock(&m->lock);
    if (b.h_ptr) { /* more than m keeps: freed, after its use */
        if (b.ev) {
            cudaEventSynchronize(b.ev);
            cudaEventDestroy(b.ev);
        }
        cudaFreeHost(b.h_ptr);
    }
}

static int pinned_malloc(void *ctx, void **h_ptr, size_t bytes, gimg_nvjpeg_stream stream)
{
    (void)stream;
    size_t got = 0;
    *h_ptr = gimg_nvjpeg_pinned_get(ctx, bytes, &got);
    return *h_ptr == NULL;
}

static int pinned_free(void *ctx, void *h_ptr, size_t bytes, gimg_nvjpeg_stream stream)
{
    gimg_nvjpeg_pinned_put(ctx, h_ptr, bytes, (cudaStream_t)stream);
    return 0;
}

/* ------------------------------------------------------------------ m */

gimg_status gimg_nvjpeg_memory_new(int device, gimg_nvjpeg_memory **out)
{
    gimg_nvjpeg_memory *m = calloc(1, sizeof *m);
    *out = NULL;
    if (!m)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    m->device = device;
    pthread_mutex_init(&m->lock, NULL);
    m->dev_v2 = (gimg_nvjpeg_dev_allocator_v2){pool_malloc, pool_free, m};
    m->pinned_v2 = (gimg_nvjpeg_pinned_allocator_v2){pinned_malloc, pinned_free, m};
    /* The GPU's default pool, which the lanes' buffers come from too
     * (gimg_gpu_lane_malloc): it keeps what is given back (its release
     * threshold the most), since nvJPEG allocates again at the sizes it
     * freed. */
    int pools = 0;
    uint64_t keep_all = UINT64_MAX;
    if (cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device) != cudaSuccess ||
        !pools || cudaDeviceGetDefaultMemPool(&m->pool, device) != cudaSuccess ||
        cudaMemPoolSetAttribute(m->pool, cudaMemPoolAttrReleaseThreshold, &keep_all) !=
            cudaSuccess) {
        (void)cudaGetLastError();
        m->pool = NULL; /* CreateEx and the counted allocator */
    }
    *out = m;
    return GIMG_OK;
}

void gimg_nvjpeg_memory_free(gimg_nvjpeg_memory *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    for (int i = 0; i < m->n_kept; i++) {
        if (m->kept[i].ev) {
            cudaEventSynchronize(m->kept[i].ev);
            cudaEventDestroy(m->kept[i].ev);
        }
        cudaFreeHost(m->kept[i].h_ptr);
    }
    m->n_kept = 0;
    pthread_mutex_unlock(&m->lock);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

int gimg_nvjpeg_memory_create_handle(gimg_nvjpeg_memory *m, const gimg_nvjpeg_api *api,
                                     int backend, unsigned flags, gimg_nvjpeg_handle *handle)
{
    if (api->CreateExV2 && m->pool)
        return api->CreateExV2(backend, &m->dev_v2, &m->pinned_v2, flags, handle);
    return api->CreateEx(backend, &g_counted, NULL, flags, handle);
}
#endif
