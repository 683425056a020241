/* gpu_jpeg.c — JPEG on the GPU with nvJPEG (gpu_jpeg.h says what and why). */
#include "gpu_jpeg.h"

#ifdef GIMG_HAVE_CUDA
#include "jpeg_internal.h"
#include "nvjpeg_api.h"
#include "nvjpeg_memory.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The most images one call of the hardware decoder takes: half the lanes
 * of a GPU (device.c gives the GPU codecs 16), so that while one half's
 * images decode, the other half's are convolved and encoded. Calls of 7
 * (the JPEG engines of an H100 or H200) or 16 did no better, nor two
 * calls at once on states of their own, which also decoded wrongly at
 * times (tests/bench/RESULTS.md, stop 48). */
#define GIMG_JPEG_MAX_BATCH 8
/* An image of GIMG_JPEG_STRIP_MIN_PIXELS or more whose restart markers
 * allow it (jpeg_strips.c), alone (the caller's word: no other image of
 * its job in flight) and coming to an idle decoder, is decoded in up to
 * GIMG_JPEG_STRIPS strips, in a call of their own, so that the GPU's JPEG
 * engines (seven on an H100) share it: a 4096x4096 photo took 21.4 ms
 * whole and 8.7 ms in strips at 4:4:4, 12.9 and 5.1 ms at 4:2:0 (H200).
 * Where other images are in flight the engines have their work, and the
 * image goes whole: strips among a batch's images, in the queue's calls,
 * twice stopped a batch of 16 MP photos through gimgd for good (not
 * traced), so a batch's images are never cut, and strips never share a
 * call. Strips that overlap (vertical chroma subsampling: 4:2:0, 4:4:0)
 * are decoded into the lane's scratch buffer, their own rows then copied
 * into place on the lane's stream. */
#define GIMG_JPEG_STRIP_MIN_PIXELS 4000000
#define GIMG_JPEG_STRIPS GIMG_JPEG_MAX_BATCH
static uint64_t g_strip_min_pixels = GIMG_JPEG_STRIP_MIN_PIXELS;

void gimg_gpu_jpeg_set_strip_min_pixels(uint64_t pixels)
{
    g_strip_min_pixels = pixels ? pixels : GIMG_JPEG_STRIP_MIN_PIXELS;
}

/* How long a call waits for the other lanes' images: this, and as long
 * again for every megapixel of the waiting image (a lane's other work, on
 * which the wait depends, grows with the image), microseconds. */
#define GIMG_JPEG_BATCH_WAIT_US 500

/* One lane's image for the hardware decoder. */
typedef struct {
    const unsigned char *bits;
    size_t len;
    gimg_nvjpeg_image out;
    int rgb;                     /* output format: RGB interleaved, else gray */
    int rows;                    /* the image's height */
    int done, status;            /* nvJPEG's status once done */
    cudaEvent_t ev;              /* recorded on the decoder's stream after it */
} decode_request;

/* The hardware decoder of a GPU, shared by its lanes. Its engines decode
 * the images of one call in parallel (on an H100 a 4096x4096 photo takes
 * 12.6 ms alone; 8 lanes decode and encode 179 a second together), so the
 * lanes' images are decoded together: a lane queues its image; if no lane
 * is decoding, it waits a little for every lane's image
 * (GIMG_JPEG_BATCH_WAIT_US), takes the queued images of its output format
 * and decodes them in one call, on the decoder's own stream, while images
 * queued meanwhile wait for the next call. Each lane's stream then waits
 * for its image's event. A call that fails is run again image by image,
 * so that a bad file fails alone. Measured on an H100 (gpudiff_jpeg
 * --time, 8 lanes decoding and encoding 1 MP photos): 1768 images/s with
 * a 3 ms wait (calls of 7.9 images in a batch), 1408 without it (calls of
 * 1.8, each of another size: the state is initialised again). In the
 * batch (gconv, 16 lanes, 2500 photos of 1 MP), waits of 0.5 ms did best:
 * 1197 images/s with the start-up, against 1107 with 3 ms. */
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    decode_request *queue[64];
    int queued;
    int decoding;                /* a lane is running a call */
    int lanes;                   /* the batch a call waits for (and takes at most) */
    cudaStream_t stream;
    /* Batched states by output format, and the batch size each was last
     * initialised for: nvJPEG fixes a state's batch size, so a call of
     * another size initialises it again. (A state per size measured
     * slower on an H100: 1095 against 1408 images/s of 1 MP photos,
     * decoded and encoded on 8 lanes; and a state per lane, batches of
     * one, 1000.) */
    gimg_nvjpeg_state state[2];
    int state_batch[2];
    int calls, images;           /* for -v: how large the batches were */
} jpeg_batcher;

struct gimg_gpu_jpeg {
    const gimg_nvjpeg_api *api;
    gimg_nvjpeg_handle handle;
    int owns_handle;             /* lane 0 of its GPU: destroys the handle last */
    gimg_nvjpeg_memory *memory;  /* the GPU's, lane 0's */
    int hardware;                /* the handle's backend is the hardware decoder */
    jpeg_batcher *batcher;       /* hardware: the GPU's, lane 0's */
    cudaEvent_t ev_decoded;      /* hardware: this lane's image is decoded */
    unsigned char *strips;       /* hardware: the strips' files of its last image */
    size_t strips_cap;
    unsigned char *d_scratch;    /* hardware: overlapping strips' rows, decoded */
    size_t scratch_bytes;
    /* The other backends: decoder states by output format (RGB
     * interleaved, gray), made on first use. */
    gimg_nvjpeg_state dec[2];
    gimg_nvjpeg_enc_state enc;
    gimg_nvjpeg_enc_params params;
    int params_quality, params_subsampling; /* what params hold; -1: nothing yet */
    unsigned char *h_bits;       /* pinned: the encoder's bitstream comes back here */
    size_t h_bits_cap;
    /* Pinned buffers h_bits outgrew, freed at close: freeing pinned memory
     * waits for the whole GPU, every lane's work in flight, and at a
     * server's first large photos each of its lanes did so once. Each
     * links to the next in its first bytes. Growth by half at least
     * keeps them below twice h_bits_cap together. */
    unsigned char *h_bits_outgrown;
    size_t h_bits_outgrown_bytes;
};

/* nvJPEG's status s of call `what` as our failure: GIMG_E_FORMAT for what
 * the file causes (the caller decodes it on the CPU), GIMG_E_NOMEM for
 * memory, GIMG_E_DEVICE otherwise. */
static gimg_status nv_fail(int s, const char *what)
{
    if (s == GIMG_NVJPEG_ALLOCATOR_FAILURE)
        return gimg_fail(GIMG_E_NOMEM, "nvJPEG: %s: out of GPU memory (the device's, or "
                                       "GIMG_GPU_MEM_LIMIT)", what);
    gimg_status st = s == GIMG_NVJPEG_BAD_JPEG || s == GIMG_NVJPEG_JPEG_NOT_SUPPORTED ||
                             s == GIMG_NVJPEG_INCOMPLETE_BITSTREAM
                         ? GIMG_E_FORMAT
                         : GIMG_E_DEVICE;
    return gimg_fail(st, "nvJPEG: %s: %s", what, gimg_nvjpeg_status_name(s));
}

#define NV(call, what)                                                                   \
    do {                                                                                 \
        int nv_status_ = (call);                                                         \
        if (nv_status_ != GIMG_NVJPEG_SUCCESS)                                           \
            return nv_fail(nv_status_, what);                                            \
    } while (0)

/* The handle: the hardware backend where the card has a JPEG decoder
 * (nvJPEG refuses to create it elsewhere), else the default one; each
 * with chroma upsampled by interpolation (libjpeg-turbo's way: without
 * it 4:2:0 photos decode 34 dB from libjpeg-turbo's, on an H100) and
 * strict bitstream checks where the version has them. */
static gimg_status open_handle(const gimg_nvjpeg_api *api, gimg_nvjpeg_memory *memory,
                               gimg_nvjpeg_handle *h, int *hardware)
{
    static const unsigned flags[2] = {GIMG_NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION |
                                          GIMG_NVJPEG_FLAGS_BITSTREAM_STRICT,
                                      0};
    static const int backends[2] = {GIMG_NVJPEG_BACKEND_HARDWARE, GIMG_NVJPEG_BACKEND_DEFAULT};
    int s = GIMG_NVJPEG_NOT_INITIALIZED;
    for (int b = 0; b < 2; b++)
        for (int f = 0; f < 2; f++)
            if ((s = gimg_nvjpeg_memory_create_handle(memory, api, backends[b], flags[f], h)) ==
                GIMG_NVJPEG_SUCCESS) {
                *hardware = b == 0;
                return GIMG_OK;
            }
    return nv_fail(s, "creating the handle");
}

static void batcher_free(const gimg_nvjpeg_api *api, jpeg_batcher *b)
{
    if (!b)
        return;
    for (int f = 0; f < 2; f++)
        if (b->state[f])
            api->JpegStateDestroy(b->state[f]);
    if (b->stream)
        cudaStreamDestroy(b->stream);
    pthread_mutex_destroy(&b->lock);
    pthread_cond_destroy(&b->changed);
    free(b);
}

static gimg_status batcher_new(jpeg_batcher **out)
{
    jpeg_batcher *b = calloc(1, sizeof *b);
    *out = NULL;
    if (!b)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    pthread_mutex_init(&b->lock, NULL);
    pthread_cond_init(&b->changed, NULL);
    cudaError_t e = cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking);
    if (e) {
        b->stream = NULL;
        free(b);
        return gimg_fail(gimg_cuda_status(e), "CUDA error: a stream for the JPEG decoder: %s",
                         cudaGetErrorString(e));
    }
    *out = b;
    return GIMG_OK;
}

gimg_status gimg_gpu_jpeg_open(gimg_gpu *const *lanes, int n_lanes)
{
    const char *why = NULL;
    const gimg_nvjpeg_api *api = gimg_nvjpeg_load(&why);
    if (!api)
        return gimg_fail(GIMG_E_DEVICE, "%s", why);
    GIMG_CUDA(cudaSetDevice(lanes[0]->device));
    gimg_nvjpeg_handle handle = NULL;
    int hardware = 0;
    jpeg_batcher *batcher = NULL;
    gimg_nvjpeg_memory *memory = NULL;
    gimg_status st = gimg_nvjpeg_memory_new(lanes[0]->device, &memory);
    if (st)
        return st;
    if ((st = open_handle(api, memory, &handle, &hardware))) {
        gimg_nvjpeg_memory_free(memory);
        return st;
    }
    if (hardware && (st = batcher_new(&batcher))) {
        api->Destroy(handle);
        gimg_nvjpeg_memory_free(memory);
        return st;
    }
    if (batcher)
        batcher->lanes = n_lanes < GIMG_JPEG_MAX_BATCH ? n_lanes : GIMG_JPEG_MAX_BATCH;
    for (int l = 0; l < n_lanes; l++) {
        struct gimg_gpu_jpeg *j = calloc(1, sizeof *j);
        cudaError_t e = j && hardware ? cudaEventCreateWithFlags(&j->ev_decoded,
                                                                 cudaEventDisableTiming)
                                      : cudaSuccess;
        if (!j || e) {
            free(j);
            for (int k = l - 1; k >= 0; k--)
                gimg_gpu_jpeg_close(lanes[k]);
            if (l == 0) {
                batcher_free(api, batcher);
                api->Destroy(handle);
                gimg_nvjpeg_memory_free(memory);
            }
            return j ? gimg_fail(gimg_cuda_status(e), "CUDA error: %s", cudaGetErrorString(e))
                     : gimg_fail(GIMG_E_NOMEM, "out of memory");
        }
        j->api = api;
        j->handle = handle;
        j->owns_handle = l == 0;
        j->memory = memory;
        j->hardware = hardware;
        j->batcher = batcher;
        j->params_quality = j->params_subsampling = -1;
        lanes[l]->jpeg = j;
    }
    return GIMG_OK;
}

size_t gimg_gpu_jpeg_pinned_bytes(const gimg_gpu *g)
{
    const struct gimg_gpu_jpeg *j = g->jpeg;
    if (!j)
        return 0;
    return j->h_bits_cap + j->h_bits_outgrown_bytes +
           (j->owns_handle ? gimg_nvjpeg_memory_pinned_bytes(j->memory) : 0);
}

void gimg_gpu_jpeg_close(gimg_gpu *g)
{
    struct gimg_gpu_jpeg *j = g->jpeg;
    if (!j)
        return;
    if (j->ev_decoded) {
        cudaEventSynchronize(j->ev_decoded); /* the decoder is done with j->strips */
        cudaEventDestroy(j->ev_decoded);
    }
    free(j->strips);
    if (j->h_bits)
        cudaFreeHost(j->h_bits);
    while (j->h_bits_outgrown) {
        unsigned char *next;
        memcpy(&next, j->h_bits_outgrown, sizeof next);
        cudaFreeHost(j->h_bits_outgrown);
        j->h_bits_outgrown = next;
    }
    if (j->d_scratch)
        gimg_gpu_free(j->d_scratch, j->scratch_bytes);
    if (j->owns_handle && j->batcher) {
        cudaStreamSynchronize(j->batcher->stream);
        batcher_free(j->api, j->batcher);
    }
    for (int i = 0; i < 2; i++)
        if (j->dec[i])
            j->api->JpegStateDestroy(j->dec[i]);
    if (j->params)
        j->api->EncoderParamsDestroy(j->params);
    if (j->enc)
        j->api->EncoderStateDestroy(j->enc);
    /* The other lanes close first (device.c closes lanes in reverse). */
    if (j->owns_handle) {
        j->api->Destroy(j->handle);
        gimg_nvjpeg_memory_free(j->memory);
    }
    free(j);
    g->jpeg = NULL;
}

int gimg_gpu_jpeg_ready(const gimg_gpu *g, int *hardware, int *calls, int *images)
{
    const struct gimg_gpu_jpeg *j = g->jpeg;
    *hardware = j && j->hardware;
    *calls = j && j->batcher ? j->batcher->calls : 0;
    *images = j && j->batcher ? j->batcher->images : 0;
    return j != NULL;
}

/* One call of the hardware decoder over reqs[0 .. n-1] (one output
 * format), on the batcher's stream; b's lock is not held. */
static int decode_batch(struct gimg_gpu_jpeg *j, jpeg_batcher *b, decode_request **reqs, int n)
{
    const int rgb = reqs[0]->rgb;
    int s = GIMG_NVJPEG_SUCCESS;
    if (!b->state[rgb])
        s = j->api->JpegStateCreate(j->handle, &b->state[rgb]);
    if (!s && b->state_batch[rgb] != n) {
        s = j->api->DecodeBatchedInitialize(j->handle, b->state[rgb], n, 1,
                                            rgb ? GIMG_NVJPEG_OUTPUT_RGBI : GIMG_NVJPEG_OUTPUT_Y);
        b->state_batch[rgb] = s ? 0 : n;
    }
    if (s)
        return s;
    const unsigned char *data[GIMG_JPEG_MAX_BATCH];
    size_t lengths[GIMG_JPEG_MAX_BATCH];
    gimg_nvjpeg_image outs[GIMG_JPEG_MAX_BATCH];
    for (int i = 0; i < n; i++) {
        data[i] = reqs[i]->bits;
        lengths[i] = reqs[i]->len;
        outs[i] = reqs[i]->out;
    }
    return j->api->DecodeBatched(j->handle, b->state[rgb], data, lengths, outs, b->stream);
}

/* Queues r on g's GPU's hardware decoder and returns once it is decoded
 * (or has failed): its status. See jpeg_batcher. */
static int decode_on_hardware(struct gimg_gpu_jpeg *j, decode_request *r)
{
    jpeg_batcher *b = j->batcher;
    pthread_mutex_lock(&b->lock);
    while (b->queued == (int)(sizeof b->queue / sizeof b->queue[0]))
        pthread_cond_wait(&b->changed, &b->lock);
    b->queue[b->queued++] = r;
    pthread_cond_broadcast(&b->changed); /* a lane gathering a batch counts it */
    while (!r->done) {
        if (b->decoding) {
            pthread_cond_wait(&b->changed, &b->lock);
            continue;
        }
        /* This lane decodes: first it waits, a little, for every lane's
         * image, so that calls are whole batches of one size (a state
         * initialised again for another size costs more than the call);
         * lanes busy elsewhere only cost the wait. */
        if (b->queued < b->lanes) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            const long wait_us = GIMG_JPEG_BATCH_WAIT_US +
                                 (long)(r->out.pitch[0] / (r->rgb ? 3 : 1) *
                                        (size_t)r->rows * GIMG_JPEG_BATCH_WAIT_US / 1000000);
            until.tv_sec += wait_us / 1000000;
            until.tv_nsec += wait_us % 1000000 * 1000L;
            if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
            }
            b->decoding = 1; /* the others queue and wait meanwhile */
            while (b->queued < b->lanes &&
                   pthread_cond_timedwait(&b->changed, &b->lock, &until) == 0)
                ;
        }
        decode_request *batch[GIMG_JPEG_MAX_BATCH];
        int n = 0, kept = 0;
        for (int i = 0; i < b->queued; i++) {
            if (n < b->lanes && b->queue[i]->rgb == r->rgb)
                batch[n++] = b->queue[i];
            else
                b->queue[kept++] = b->queue[i];
        }
        b->queued = kept;
        b->decoding = 1;
        b->calls++;
        b->images += n;
        pthread_mutex_unlock(&b->lock);
        int s = decode_batch(j, b, batch, n);
        for (int i = 0; i < n; i++) {
            /* A failed call: each image again alone, so a bad one fails alone. */
            batch[i]->status = s && n > 1 ? decode_batch(j, b, batch + i, 1) : s;
            cudaEventRecord(batch[i]->ev, b->stream);
        }
        pthread_mutex_lock(&b->lock);
        for (int i = 0; i < n; i++)
            batch[i]->done = 1;
        b->decoding = 0;
        pthread_cond_broadcast(&b->changed);
    }
    pthread_mutex_unlock(&b->lock);
    return r->status;
}

/* An image's strips r[0 .. n-1] in a call of their own on the hardware
 * decoder, once no other call runs (the queued images wait meanwhile):
 * never mixed with other images, nor spread over calls. */
static int decode_strips_alone(struct gimg_gpu_jpeg *j, decode_request *r, int n)
{
    jpeg_batcher *b = j->batcher;
    decode_request *parts[GIMG_JPEG_STRIPS];
    for (int i = 0; i < n; i++)
        parts[i] = &r[i];
    pthread_mutex_lock(&b->lock);
    while (b->decoding)
        pthread_cond_wait(&b->changed, &b->lock);
    b->decoding = 1;
    b->calls++;
    b->images++;
    pthread_mutex_unlock(&b->lock);
    const int s = decode_batch(j, b, parts, n);
    cudaEventRecord(j->ev_decoded, b->stream);
    pthread_mutex_lock(&b->lock);
    b->decoding = 0;
    pthread_cond_broadcast(&b->changed);
    pthread_mutex_unlock(&b->lock);
    return s;
}

/* Where a strip's own rows go once decoded into the scratch buffer. */
typedef struct {
    size_t from_row, to_row;     /* in the scratch buffer; in the image */
    int rows;
} strip_copy;

/* The strips (jpeg_strips.c) of a large image the hardware decoder is to
 * share out: their files in j->strips, each request's output its rows of
 * out, or, where strips overlap, its place in j->d_scratch and in *copies
 * where its own rows go (*n_copies). 0 when the image is decoded whole. */
static int strip_requests(struct gimg_gpu_jpeg *j, const unsigned char *bits, size_t len,
                          int width, int height, const gimg_nvjpeg_image *out, int rgb,
                          decode_request *r, strip_copy *copies, int *n_copies)
{
    *n_copies = 0;
    jpeg_batcher *batcher = j->batcher;
    pthread_mutex_lock(&batcher->lock);
    const int idle = !batcher->queued && !batcher->decoding;
    pthread_mutex_unlock(&batcher->lock);
    gimg_jpeg_strips p;
    if (!idle || (uint64_t)width * (uint64_t)height < g_strip_min_pixels ||
        !gimg_jpeg_strips_plan(bits, len, &p))
        return 0;
    const int n = p.steps < GIMG_JPEG_STRIPS ? p.steps : GIMG_JPEG_STRIPS;
    size_t bytes = 0, scratch_rows = 0;
    for (int k = 0; k < n; k++) {
        int a, b, first_row, rows, skip;
        gimg_jpeg_strip_span(&p, k, n, &a, &b, &first_row, &rows, &skip);
        bytes += gimg_jpeg_strip_bytes(&p, a, b);
        scratch_rows += (size_t)gimg_jpeg_strip_height(&p, a, b);
    }
    const size_t pitch = out->pitch[0];
    int ok = n >= 2;
    if (ok && bytes > j->strips_cap) {
        unsigned char *grown = realloc(j->strips, bytes);
        ok = grown != NULL;
        if (ok) {
            j->strips = grown;
            j->strips_cap = bytes;
        }
    }
    if (ok && p.overlap && scratch_rows * pitch > j->scratch_bytes) {
        if (j->d_scratch)
            gimg_gpu_free(j->d_scratch, j->scratch_bytes);
        j->d_scratch = NULL;
        j->scratch_bytes = 0;
        void *d = NULL;
        ok = gimg_gpu_malloc(&d, scratch_rows * pitch) == GIMG_OK;
        if (ok) {
            j->d_scratch = d;
            j->scratch_bytes = scratch_rows * pitch;
        }
    }
    if (!ok) {
        gimg_jpeg_strips_free(&p);
        return 0;
    }
    size_t at = 0, scratch_row = 0;
    for (int k = 0; k < n; k++) {
        int a, b, first_row, rows, skip;
        gimg_jpeg_strip_span(&p, k, n, &a, &b, &first_row, &rows, &skip);
        const size_t strip_bytes = gimg_jpeg_strip_bytes(&p, a, b);
        gimg_jpeg_strip_write(&p, a, b, j->strips + at);
        r[k] = (decode_request){.bits = j->strips + at, .len = strip_bytes, .out = *out,
                                .rgb = rgb, .rows = rows, .ev = j->ev_decoded};
        if (p.overlap) {
            r[k].out.channel[0] = j->d_scratch + scratch_row * pitch;
            copies[k] = (strip_copy){scratch_row + (size_t)skip, (size_t)first_row, rows};
            scratch_row += (size_t)gimg_jpeg_strip_height(&p, a, b);
        } else {
            r[k].out.channel[0] = out->channel[0] + (size_t)first_row * pitch;
        }
        at += strip_bytes;
    }
    *n_copies = p.overlap ? n : 0;
    gimg_jpeg_strips_free(&p);
    return n;
}

gimg_status gimg_gpu_jpeg_decode(gimg_gpu *g, const unsigned char *bits, size_t len, int width,
                                 int height, int channels, int alone, gimg_dimage *d)
{
    struct gimg_gpu_jpeg *j = g->jpeg;
    if (!j)
        return gimg_fail(GIMG_E_DEVICE, "nvJPEG is not open on this GPU");
    gimg_status st = gimg_gpu_image(g, GIMG_GPU_SLOT_DECODED, width, height, channels, GIMG_U8, d);
    if (st)
        return st;
    const int rgb = channels == 3;
    const int format = rgb ? GIMG_NVJPEG_OUTPUT_RGBI : GIMG_NVJPEG_OUTPUT_Y;
    gimg_nvjpeg_image out;
    memset(&out, 0, sizeof out);
    out.channel[0] = d->d_data;
    out.pitch[0] = d->pitch_bytes;
    if (j->hardware) {
        /* The decoder writes from its own stream: what this lane queued
         * on the buffer (a new one's clearing) comes first. */
        GIMG_CUDA(cudaStreamSynchronize(g->stream));
        decode_request r[GIMG_JPEG_STRIPS];
        strip_copy copies[GIMG_JPEG_STRIPS];
        int n_copies = 0;
        const int n = alone ? strip_requests(j, bits, len, width, height, &out, rgb, r, copies,
                                             &n_copies)
                            : 0;
        if (!n || decode_strips_alone(j, r, n)) {
            /* Whole (a strip nvJPEG refused: the file as it is, once more). */
            n_copies = 0;
            r[0] = (decode_request){.bits = bits, .len = len, .out = out, .rgb = rgb,
                                    .rows = height, .ev = j->ev_decoded};
            NV(decode_on_hardware(j, &r[0]), "decoding");
        }
        GIMG_CUDA(cudaStreamWaitEvent(g->stream, j->ev_decoded, 0));
        const size_t row_bytes = (size_t)width * (size_t)channels;
        for (int k = 0; k < n_copies; k++)
            GIMG_CUDA(cudaMemcpy2DAsync((unsigned char *)d->d_data +
                                            copies[k].to_row * d->pitch_bytes,
                                        d->pitch_bytes,
                                        j->d_scratch + copies[k].from_row * d->pitch_bytes,
                                        d->pitch_bytes, row_bytes, (size_t)copies[k].rows,
                                        cudaMemcpyDeviceToDevice, g->stream));
        return GIMG_OK;
    }
    if (!j->dec[rgb])
        NV(j->api->JpegStateCreate(j->handle, &j->dec[rgb]), "creating a decoder");
    NV(j->api->Decode(j->handle, j->dec[rgb], bits, len, format, &out, g->stream), "decoding");
    return GIMG_OK;
}

gimg_status gimg_gpu_jpeg_encode(gimg_gpu *g, const gimg_dimage *d, int quality, int subsampling,
                                 unsigned char **bits, size_t *len)
{
    struct gimg_gpu_jpeg *j = g->jpeg;
    *bits = NULL;
    *len = 0;
    if (!j)
        return gimg_fail(GIMG_E_DEVICE, "nvJPEG is not open on this GPU");
    if (d->sample != GIMG_U8 || (d->channels != 1 && d->channels != 3))
        return gimg_fail(GIMG_E_FORMAT, "the GPU's JPEG encoder takes 8-bit gray or RGB");
    const int css = d->channels == 1 ? GIMG_NVJPEG_CSS_GRAY : subsampling;
    if (!j->enc) {
        NV(j->api->EncoderStateCreate(j->handle, &j->enc, g->stream), "creating an encoder");
        NV(j->api->EncoderParamsCreate(j->handle, &j->params, g->stream), "creating an encoder");
        NV(j->api->EncoderParamsSetOptimizedHuffman(j->params, 1, g->stream),
           "setting the encoder up");
    }
    if (j->params_quality != quality) {
        NV(j->api->EncoderParamsSetQuality(j->params, quality, g->stream), "setting the quality");
        j->params_quality = quality;
    }
    if (j->params_subsampling != css) {
        NV(j->api->EncoderParamsSetSamplingFactors(j->params, css, g->stream),
           "setting the chroma subsampling");
        j->params_subsampling = css;
    }
    gimg_nvjpeg_image src;
    memset(&src, 0, sizeof src);
    src.channel[0] = d->d_data;
    src.pitch[0] = d->pitch_bytes;
    if (d->channels == 3)
        NV(j->api->EncodeImage(j->handle, j->enc, j->params, &src, GIMG_NVJPEG_INPUT_RGBI,
                               d->width, d->height, g->stream),
           "encoding");
    else
        NV(j->api->EncodeYUV(j->handle, j->enc, j->params, &src, GIMG_NVJPEG_CSS_GRAY, d->width,
                             d->height, g->stream),
           "encoding");
    size_t n = 0;
    NV(j->api->EncodeRetrieveBitstream(j->handle, j->enc, NULL, &n, g->stream),
       "sizing the bitstream");
    GIMG_CUDA(cudaStreamSynchronize(g->stream));
    unsigned char *out = malloc(n ? n : 1);
    if (!out)
        return gimg_fail(GIMG_E_NOMEM, "out of memory for the GPU's JPEG bitstream");
    /* Through the lane's pinned buffer: a copy by the copy engine alone,
     * not through the driver's staging of pageable memory, which the
     * lanes share. 16 lanes through gimgd, gconv -k gaussian:2 (H200,
     * three runs each): 4096x4096 photos 126-135 -> 140-147 images/s,
     * 1 MP photos 1834-1910 -> 1978-2045. */
    if (n > j->h_bits_cap) {
        /* Half as much again, whole MiB: the next images' bitstreams vary
         * in size. The old buffer is kept till close (h_bits_outgrown);
         * nothing reads it now (the stream was synchronised after its
         * last copy). */
        const size_t mib = (size_t)1 << 20;
        const size_t cap = n > SIZE_MAX / 2 - mib ? n : (n + n / 2 + mib - 1) / mib * mib;
        unsigned char *grown = NULL;
        if (cudaHostAlloc((void **)&grown, cap, cudaHostAllocDefault) == cudaSuccess) {
            if (j->h_bits) {
                memcpy(j->h_bits, &j->h_bits_outgrown, sizeof j->h_bits_outgrown);
                j->h_bits_outgrown = j->h_bits;
                j->h_bits_outgrown_bytes += j->h_bits_cap;
            }
            j->h_bits = grown;
            j->h_bits_cap = cap;
        } else
            (void)cudaGetLastError(); /* the bitstream comes to pageable memory */
    }
    const int pinned = n <= j->h_bits_cap;
    int s = j->api->EncodeRetrieveBitstream(j->handle, j->enc, pinned ? j->h_bits : out, &n,
                                            g->stream);
    cudaError_t e = s ? cudaSuccess : cudaStreamSynchronize(g->stream);
    if (s || e) {
        free(out);
        return s ? nv_fail(s, "retrieving the bitstream")
                 : gimg_fail(gimg_cuda_status(e), "CUDA error: %s", cudaGetErrorString(e));
    }
    if (pinned)
        memcpy(out, j->h_bits, n);
    *bits = out;
    *len = n;
    return GIMG_OK;
}
#endif
