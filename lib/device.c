/*
 * device.c — choosing the backend. One context per process: with --device
 * gpu it starts CUDA on a background thread as soon as the input's size is
 * known (CUDA's start-up, 0.2 to 0.4 s, then overlaps the decode); with
 * auto each operation goes where the cost table (cost.h) predicts it
 * finishes first, CUDA's start-up counted until it is paid, so that a
 * small image through a pipe of tools pays no GPU start-up at all; what
 * this process's GPU measured goes to the table's cache.
 *
 * A batch computes on lanes, two per GPU of the device list (sixteen with
 * the GPU codecs), each with its own stream and buffers (gimg_gpu); the
 * pipeline's compute threads bind to one lane each, and lane L uses GPU L
 * mod n, so that consecutive lanes spread over the GPUs. The GPUs of a list start up in parallel.
 */
#include "ctx_internal.h"
#include "cost.h"
#include "gpu_internal.h"
#include "gpu_jpeg.h"
#include "nvjpeg_api.h"
#include "jpeg_internal.h"
#include "remote.h"

#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* Two lanes (streams) per GPU: while one lane's image crosses PCIe, the
 * other's kernels run. More buy nothing: the kernels each fill the GPU.
 * With the GPU codecs, sixteen: their images go to the hardware decoder
 * eight at a time (its engines decode a call's images in parallel:
 * gpu_jpeg.c) while the other eight lanes' kernels and encoders run, and
 * the encoders of several images overlap. Measured on an H100 (gconv -k
 * gaussian:2, 2500 photos of 1 MP): 8 lanes 926 images/s, 16 1107, 24 973. */
#define LANES_PER_GPU 2
#define LANES_PER_GPU_CODECS 16
#define MAX_LANES_PER_GPU 16

#ifdef GIMG_HAVE_CUDA
/* One GPU of the device list: opened on a thread of its own, so that the
 * GPUs of a list start up at the same time. */
typedef struct {
    int index;
    pthread_t thread;
    int has_thread;
    gimg_status status;
    char error[512];
    gimg_gpu *lane[MAX_LANES_PER_GPU];
    /* GPU operations each lane has timed, for the cost table: a lane's
     * first pays its buffers' allocation (and the process's first the
     * kernels' loading), so it does not measure the GPU's rates. By lane,
     * not by thread: gimgd's requests come on threads of their own. */
    int timed[MAX_LANES_PER_GPU];
    int n_lanes;                    /* lanes opened (or to open) on it */
    int ran;                        /* operations run on it, for -v */
    int want_jpeg;                  /* start nvJPEG on it too */
    char jpeg_why[256];             /* why nvJPEG is not on it (when wanted) */
} gpu_slot;
#endif

struct gimg_ctx {
    gimg_device dev;
    int verbose;
    gimg_remote *remote;            /* the user's server (remote.h), or NULL */
    pthread_mutex_t lock;           /* what the lanes share: all below */
    double t_ms[GIMG_T_COUNT];
    double gpu_kernel_ms, gpu_transfer_ms;
    int ran_cpu;                    /* for -v: whether an operation ran on the CPU, */
    int ran_gpu;                    /* and how many on the GPUs */
    char why_cpu[512];              /* why auto stayed on the CPU, or fell back to it */
    int want_jpeg;                  /* the GPU codecs were asked for */
    int jpeg_remote;                /* the server's codecs serve the job instead */
    int jpeg_gpu_decoded, jpeg_gpu_encoded, jpeg_cpu; /* for -v */
    double jpeg_decode_ms, jpeg_encode_ms; /* the lanes' time in them, for -v */
    int jpeg_in_flight;             /* images the GPU's decoder took, not yet done */
    char jpeg_cpu_why[160];         /* the last reason a JPEG went to the CPU */
    char jpeg_auto[200];            /* --device auto's choice of codecs, for -v */
    /* --device auto's choices of device (cost.h), for -v: how many, their
     * predictions summed, the start-up share one paid, where the GPU's ran. */
    int auto_n, auto_gpu_n;
    double auto_cpu_ms, auto_gpu_ms, auto_start_ms;
    const char *auto_gpu_where;     /* "the GPU", "gimgd" */
    int auto_no_gpu;                /* chose the CPU: this build has no GPU */
    int batch_images;               /* the job's images, sharing a start-up (1: unknown) */
    int driver_lanes;               /* the most lanes gimg_ctx_lanes gave the driver */
    gimg_cost_gpu_measure measured; /* what this process's GPU measured, for the cache */
    /* The process's first GPU operation: what it took beyond the table's
     * prediction for it once warm (CUDA loads the kernels' module at their
     * first launch, the lane its buffers): part of the start-up. */
    int first_timed;
    double first_excess_ms;
#ifdef GIMG_HAVE_CUDA
    /* Start-up: `started` once the thread that opens the GPUs runs,
     * `counted` once n_gpus is known (gpu:all asks CUDA), `done` once every
     * GPU is open or has failed; `changed` signals the last two. */
    pthread_t init_thread;
    int joinable;                   /* init_thread runs init_main */
    int started, counted, done;
    pthread_cond_t changed;
    gimg_status init_status;
    char init_error[512];
    int n_gpus;
    gpu_slot gpu[GIMG_MAX_GPUS];
    double startup_ms;              /* CUDA's start-up, nvJPEG's with it: for -v */
#endif
};

static int lanes_per_gpu(const gimg_ctx *ctx)
{
    return ctx->want_jpeg ? LANES_PER_GPU_CODECS : LANES_PER_GPU;
}

/* The lane the calling thread works for (gimg_ctx_bind_lane). */
static _Thread_local int t_lane;
/* The lane's input is on its GPU (gimg_ctx_gpu_decode_jpeg), without
 * pixels on the host: its operation cannot fall back to the CPU. */
static _Thread_local int t_input_on_gpu;
/* This lane's image counts in jpeg_in_flight (local_decode_jpeg). */
static _Thread_local int t_jpeg_in_flight;
/* The job the calling thread last gave this process's GPU, for the
 * measurement of its kernel and copies (gimg_ctx_add_gpu_times). */
static _Thread_local gimg_cost_job t_gpu_job;
static _Thread_local int t_gpu_job_set;

int gimg_built_with_cuda(void)
{
#ifdef GIMG_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}

/* "all", or indices separated by commas, each at most once. */
static gimg_status parse_gpu_list(const char *s, const char *whole, gimg_device *d)
{
    if (!strcmp(s, "all")) {
        d->all_gpus = 1;
        d->n_gpus = 0;
        return GIMG_OK;
    }
    d->n_gpus = 0;
    for (;;) {
        char *end;
        long n = strtol(s, &end, 10);
        if (*s < '0' || *s > '9' || (*end && *end != ',') || n >= GIMG_MAX_GPUS)
            return gimg_fail(GIMG_E_USAGE, "invalid GPU list in device '%s' (indices 0 to %d, "
                             "separated by commas, or all)", whole, GIMG_MAX_GPUS - 1);
        for (int i = 0; i < d->n_gpus; i++)
            if (d->gpus[i] == n)
                return gimg_fail(GIMG_E_USAGE, "GPU %ld is listed twice in device '%s'", n,
                                 whole);
        d->gpus[d->n_gpus++] = (int)n;
        if (!*end)
            return GIMG_OK;
        s = end + 1;
    }
}

gimg_status gimg_parse_device(const char *s, gimg_device *d)
{
    memset(d, 0, sizeof *d);
    d->n_gpus = 1;  /* auto and gpu: GPU 0 */
    if (!strcmp(s, "auto")) {
        d->kind = GIMG_DEV_AUTO;
        return GIMG_OK;
    }
    if (!strcmp(s, "cpu")) {
        d->kind = GIMG_DEV_CPU;
        return GIMG_OK;
    }
    if (!strncmp(s, "gpu", 3) && (s[3] == '\0' || s[3] == ':')) {
        d->kind = GIMG_DEV_GPU;
        return s[3] == ':' ? parse_gpu_list(s + 4, s, d) : GIMG_OK;
    }
    return gimg_fail(GIMG_E_USAGE, "invalid device '%s' (auto, cpu, gpu, gpu:N, gpu:N,M,... "
                     "or gpu:all)", s);
}

double gimg_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

gimg_status gimg_ctx_open(const gimg_device *dev, int verbose, gimg_ctx **out)
{
    *out = NULL;
    gimg_remote *remote;
    gimg_status st = gimg_remote_open(dev, &remote);
    if (st)
        return st;
    /* Without CUDA here, a GPU can only be the server's. */
    if (dev->kind == GIMG_DEV_GPU && !gimg_built_with_cuda() &&
        !gimg_remote_prepare(remote, SIZE_MAX)) {
        char why[600] = "";
        if (remote)
            snprintf(why, sizeof why, ", and gimgd does not serve (%s)", gimg_remote_why(remote));
        gimg_remote_close(remote);
        return gimg_fail(GIMG_E_DEVICE, "no usable GPU: this build of gimg has no CUDA support%s",
                         why);
    }
    gimg_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        gimg_remote_close(remote);
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    }
    ctx->remote = remote;
    ctx->dev = *dev;
    ctx->verbose = verbose;
    pthread_mutex_init(&ctx->lock, NULL);
#ifdef GIMG_HAVE_CUDA
    pthread_cond_init(&ctx->changed, NULL);
#endif
    *out = ctx;
    return GIMG_OK;
}

#ifdef GIMG_HAVE_CUDA
static void *open_gpu(void *arg)
{
    gpu_slot *s = arg;
    for (int l = 0; l < s->n_lanes && !s->status; l++)
        s->status = gimg_gpu_open(s->index, &s->lane[l]);
    if (s->status)
        snprintf(s->error, sizeof s->error, "%s", gimg_last_error());
    else if (s->want_jpeg && gimg_gpu_jpeg_open(s->lane, s->n_lanes))
        snprintf(s->jpeg_why, sizeof s->jpeg_why, "%s", gimg_last_error());
    return NULL;
}

static void signal_state(gimg_ctx *ctx, int *flag)
{
    pthread_mutex_lock(&ctx->lock);
    *flag = 1;
    pthread_cond_broadcast(&ctx->changed);
    pthread_mutex_unlock(&ctx->lock);
}

/* Resolves the device list, then opens every GPU of it, each on a thread
 * (this one opens the first). The first failure is the context's. */
static void *init_main(void *arg)
{
    gimg_ctx *ctx = arg;
    const double t0 = gimg_now_ms();
    if (ctx->dev.all_gpus) {
        int count = 0;
        cudaError_t e = cudaGetDeviceCount(&count);
        ctx->n_gpus = e == cudaSuccess ? (count < GIMG_MAX_GPUS ? count : GIMG_MAX_GPUS) : 0;
        for (int i = 0; i < ctx->n_gpus; i++)
            ctx->gpu[i].index = i;
        if (ctx->n_gpus == 0)
            ctx->init_status = gimg_fail(GIMG_E_DEVICE, "no usable GPU: %s",
                                         e != cudaSuccess ? cudaGetErrorString(e)
                                                          : "no CUDA device found");
    } else {
        ctx->n_gpus = ctx->dev.n_gpus;
        for (int i = 0; i < ctx->n_gpus; i++)
            ctx->gpu[i].index = ctx->dev.gpus[i];
        if (ctx->n_gpus == 0)
            ctx->init_status = gimg_fail(GIMG_E_DEVICE, "no GPU in the device list");
    }
    /* A lane of its own for each of the driver's: a job the server serves
     * has the server's lanes (gimg_ctx_lanes), and the operations it does
     * not do (a comparison, say) come to this process's GPUs, where two
     * lanes sharing one GPU lane would share its buffers and stream. */
    pthread_mutex_lock(&ctx->lock);
    const int driver_lanes = ctx->driver_lanes;
    pthread_mutex_unlock(&ctx->lock);
    int lanes = lanes_per_gpu(ctx);
    if (ctx->n_gpus > 0 && (driver_lanes + ctx->n_gpus - 1) / ctx->n_gpus > lanes)
        lanes = (driver_lanes + ctx->n_gpus - 1) / ctx->n_gpus;
    if (lanes > MAX_LANES_PER_GPU)
        lanes = MAX_LANES_PER_GPU;
    for (int i = 0; i < ctx->n_gpus; i++) {
        ctx->gpu[i].want_jpeg = ctx->want_jpeg;
        ctx->gpu[i].n_lanes = lanes;
    }
    signal_state(ctx, &ctx->counted);
    for (int i = 1; i < ctx->n_gpus; i++)
        ctx->gpu[i].has_thread =
            pthread_create(&ctx->gpu[i].thread, NULL, open_gpu, &ctx->gpu[i]) == 0;
    for (int i = 0; i < ctx->n_gpus; i++) {
        if (i == 0 || !ctx->gpu[i].has_thread)
            open_gpu(&ctx->gpu[i]);
        else
            pthread_join(ctx->gpu[i].thread, NULL);
    }
    for (int i = 0; i < ctx->n_gpus && !ctx->init_status; i++)
        if (ctx->gpu[i].status) {
            ctx->init_status = ctx->gpu[i].status;
            snprintf(ctx->init_error, sizeof ctx->init_error, "%s", ctx->gpu[i].error);
        }
    if (ctx->init_status && !ctx->init_error[0])
        snprintf(ctx->init_error, sizeof ctx->init_error, "%s", gimg_last_error());
    ctx->startup_ms = gimg_now_ms() - t0;
    signal_state(ctx, &ctx->done);
    return NULL;
}

/* Starts init_main on its own thread, once; without a thread, runs it here. */
static void start_init(gimg_ctx *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    int first = !ctx->started;
    ctx->started = 1;
    if (first)
        ctx->joinable = pthread_create(&ctx->init_thread, NULL, init_main, ctx) == 0;
    int here = first && !ctx->joinable;
    pthread_mutex_unlock(&ctx->lock);
    if (here)
        init_main(ctx);
}

static void wait_for(gimg_ctx *ctx, const int *flag)
{
    start_init(ctx);
    pthread_mutex_lock(&ctx->lock);
    while (!*flag)
        pthread_cond_wait(&ctx->changed, &ctx->lock);
    pthread_mutex_unlock(&ctx->lock);
}

/* The GPU of the calling thread's lane: lanes alternate GPUs. */
static gpu_slot *lane_slot(gimg_ctx *ctx) { return &ctx->gpu[t_lane % ctx->n_gpus]; }

/* The calling thread's lane, its GPU made current. */
static gimg_status lane_gpu(gimg_ctx *ctx, gpu_slot **slot, gimg_gpu **g)
{
    wait_for(ctx, &ctx->done);
    if (ctx->init_status)
        return gimg_fail(ctx->init_status, "%s", ctx->init_error);
    *slot = lane_slot(ctx);
    *g = (*slot)->lane[t_lane / ctx->n_gpus % (*slot)->n_lanes];
    return gimg_gpu_bind(*g);
}
#endif

void gimg_ctx_prepare(gimg_ctx *ctx, size_t work_bytes)
{
    /* A server that serves this job has the GPU: CUDA never starts here
     * (unless the server fails it, and the operations come back). */
    if (gimg_remote_prepare(ctx->remote, work_bytes))
        return;
#ifdef GIMG_HAVE_CUDA
    /* auto: the operation's choice (gimg_ctx_select) starts CUDA, for only
     * it knows its cost; the size alone says nothing of a convolution's. */
    if (ctx->dev.kind == GIMG_DEV_GPU)
        start_init(ctx);
#else
    (void)ctx;
    (void)work_bytes;
#endif
}

gimg_status gimg_ctx_wait_ready(gimg_ctx *ctx)
{
#ifdef GIMG_HAVE_CUDA
    if (ctx->dev.kind != GIMG_DEV_CPU) {
        wait_for(ctx, &ctx->done);
        if (ctx->init_status)
            return gimg_fail(ctx->init_status, "%s", ctx->init_error);
    }
#else
    if (ctx->dev.kind == GIMG_DEV_GPU)
        return gimg_fail(GIMG_E_DEVICE, "no usable GPU: this build of gimg has no CUDA support");
#endif
    return GIMG_OK;
}

int gimg_ctx_lanes(gimg_ctx *ctx)
{
    /* A job the server serves (auto's: with its codecs) has its lanes, as
     * many as this process's GPUs can give a lane of their own each (what
     * the server does not do runs here: lane_gpu), and no more. */
    if ((ctx->dev.kind == GIMG_DEV_GPU || ctx->jpeg_remote) &&
        gimg_remote_prepare(ctx->remote, SIZE_MAX)) {
        const int gpus = ctx->dev.all_gpus ? GIMG_MAX_GPUS : ctx->dev.n_gpus > 0 ? ctx->dev.n_gpus : 1;
        int lanes = gimg_remote_lanes(ctx->remote);
        if (lanes > gpus * MAX_LANES_PER_GPU)
            lanes = gpus * MAX_LANES_PER_GPU;
        pthread_mutex_lock(&ctx->lock);
        if (lanes > ctx->driver_lanes)
            ctx->driver_lanes = lanes;
        pthread_mutex_unlock(&ctx->lock);
        return lanes;
    }
    if (ctx->dev.kind == GIMG_DEV_CPU || !gimg_built_with_cuda())
        return 1;
#ifdef GIMG_HAVE_CUDA
    if (ctx->dev.all_gpus) {
        wait_for(ctx, &ctx->counted);
        return ctx->n_gpus > 0 ? ctx->n_gpus * lanes_per_gpu(ctx) : 1;
    }
#endif
    return ctx->dev.n_gpus * lanes_per_gpu(ctx);
}

void gimg_ctx_bind_lane(int lane)
{
    t_lane = lane;
}

/* The operation runs on the CPU; why (printf-style, may be NULL) for -v. */
static void ran_on_cpu(gimg_ctx *ctx, const char *why_fmt, ...)
{
    pthread_mutex_lock(&ctx->lock);
    ctx->ran_cpu = 1;
    if (why_fmt) {
        va_list ap;
        va_start(ap, why_fmt);
        vsnprintf(ctx->why_cpu, sizeof ctx->why_cpu, why_fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&ctx->lock);
}

/* This process's GPU context is open or opening: its start-up is paid. */
static int local_gpu_open(gimg_ctx *ctx)
{
#ifdef GIMG_HAVE_CUDA
    pthread_mutex_lock(&ctx->lock);
    int open = ctx->started && !(ctx->done && ctx->init_status);
    pthread_mutex_unlock(&ctx->lock);
    return open;
#else
    (void)ctx;
    return 0;
#endif
}

/* One choice of --device auto, for -v. where: the GPU's side chosen, or
 * NULL for the CPU. */
static void note_auto(gimg_ctx *ctx, const gimg_cost_prediction *p, const char *where,
                      int no_gpu)
{
    pthread_mutex_lock(&ctx->lock);
    /* The start-up's share an operation paid: the one that starts the
     * server pays it, those after find it warm. Not the first to get
     * here: with two lanes, the one that waited for the start may be. */
    ctx->auto_n++;
    if (p->start_ms > ctx->auto_start_ms)
        ctx->auto_start_ms = p->start_ms;
    ctx->auto_cpu_ms += p->cpu_ms;
    ctx->auto_gpu_ms += p->gpu_ms;
    if (where) {
        ctx->auto_gpu_n++;
        ctx->auto_gpu_where = where;
    }
    ctx->auto_no_gpu |= no_gpu;
    pthread_mutex_unlock(&ctx->lock);
}

/* job as auto weighs it in this context: its batch's images share the
 * GPU's start-up (a server's start included). */
static gimg_cost_job batch_job(const gimg_ctx *ctx, const gimg_cost_job *job)
{
    gimg_cost_job j = *job;
    j.start_shared_by = ctx->batch_images;
    return j;
}

void gimg_ctx_set_batch_images(gimg_ctx *ctx, int images)
{
    ctx->batch_images = images > 1 ? images : 1;
}

#ifdef GIMG_HAVE_CUDA
/* auto's choice between the CPU and this process's GPU; why: the CPU's
 * reason, for -v. */
static int auto_local(gimg_ctx *ctx, const gimg_cost_job *job, char *why, size_t size)
{
    gimg_cost_prediction p;
    const gimg_gpu_start start = local_gpu_open(ctx) ? GIMG_GPU_OPEN : GIMG_GPU_COLD;
    /* A job a hard limit keeps here is no reason to measure the CPU. */
    const gimg_cost_table *t = job->gpu_refused ? gimg_cost_get() : gimg_cost_for_auto();
    const gimg_cost_job shared = batch_job(ctx, job);
    const int gpu = gimg_cost_choose_gpu(t, &shared, start, &p);
    note_auto(ctx, &p, gpu ? "the GPU" : NULL, 0);
    if (job->gpu_refused)
        snprintf(why, size, "%s", job->gpu_refused);
    else
        snprintf(why, size, "%zu bytes: predicted %.1f ms here, %.1f ms on the GPU", job->bytes,
                 p.cpu_ms, p.gpu_ms);
    return gpu;
}
#endif

gimg_status gimg_ctx_select(gimg_ctx *ctx, const gimg_cost_job *job, struct gimg_gpu **gpu)
{
    *gpu = NULL;
    t_gpu_job_set = 0;
    /* An input still a JPEG for the server has no pixels here: an
     * operation the server does not do fails, and the driver decodes the
     * input here and runs it again (as for the GPU codecs' failures). */
    if (gimg_remote_has_jpeg_input())
        return gimg_fail(GIMG_E_DEVICE, "not an operation for the server");
    if (ctx->dev.kind == GIMG_DEV_CPU) {
        ran_on_cpu(ctx, NULL);
        return GIMG_OK;
    }
#ifdef GIMG_HAVE_CUDA
    /* An input the GPU's codecs decoded is there already: --device auto's
     * choice is made. */
    char why[256] = "";
    if (ctx->dev.kind == GIMG_DEV_GPU || t_input_on_gpu || auto_local(ctx, job, why, sizeof why)) {
        gpu_slot *slot = NULL;
        gimg_gpu *g = NULL;
        gimg_status st = lane_gpu(ctx, &slot, &g);
        if (!st) {
            pthread_mutex_lock(&ctx->lock);
            ctx->ran_gpu++;
            slot->ran++;
            pthread_mutex_unlock(&ctx->lock);
            *gpu = g;
            t_gpu_job = *job;
            t_gpu_job_set = !job->untimed;
            return GIMG_OK;
        }
        /* --device gpu insists on a GPU, unless it has no memory for CUDA,
         * or the job's GPU was the server's until it failed: a server's
         * fault never fails a job, which the CPU then finishes. */
        const int server_failed = gimg_remote_was_up(ctx->remote);
        if (ctx->dev.kind == GIMG_DEV_GPU && st != GIMG_E_NOMEM && !server_failed)
            return st;
        ran_on_cpu(ctx, st == GIMG_E_NOMEM || server_failed ? "%s; ran on the CPU instead" : "%s",
                   gimg_last_error());
        return GIMG_OK;
    }
    ran_on_cpu(ctx, "%s", why);
#else
    /* Only a server could have given --device gpu a GPU (gimg_ctx_open):
     * what it does not do, or did not do, runs on the CPU here. */
    if (ctx->dev.kind == GIMG_DEV_GPU && gimg_remote_was_up(ctx->remote)) {
        ran_on_cpu(ctx, "built without CUDA, and %s",
                   gimg_remote_up(ctx->remote) ? "not an operation of the server's"
                                               : "the server failed");
    } else {
        /* auto still says what it predicted, with no GPU to take here. */
        if (ctx->dev.kind == GIMG_DEV_AUTO) {
            const gimg_cost_job shared = batch_job(ctx, job);
            gimg_cost_prediction p =
                gimg_cost_predict(gimg_cost_for_auto(), &shared, GIMG_GPU_COLD);
            note_auto(ctx, &p, NULL, 1);
        }
        ran_on_cpu(ctx, "built without CUDA");
    }
#endif
    return GIMG_OK;
}

struct gimg_remote *gimg_ctx_server(gimg_ctx *ctx, const gimg_cost_job *job)
{
    /* An input the GPU codecs left on this process's GPU stays here; one
     * still a bitstream for the server goes there, whatever its size. */
    if (t_input_on_gpu)
        return NULL;
    if (gimg_remote_has_jpeg_input())
        return ctx->remote;
    if (!ctx->remote)
        return NULL;
    if (ctx->dev.kind == GIMG_DEV_GPU)
        return gimg_remote_wanted(ctx->remote) ? ctx->remote : NULL;
    /* auto: a server that serves the job already costs a round trip and
     * the pixels' way through it; otherwise starting it costs what CUDA's
     * start-up does (it starts CUDA), paid once for the jobs after, and
     * this process's own open GPU costs nothing to start (the choice is
     * then gimg_ctx_select's). */
    if (job->gpu_refused)
        return NULL;
    const gimg_cost_table *t = gimg_cost_for_auto();
    const gimg_cost_job shared = batch_job(ctx, job);
    gimg_cost_prediction p;
    if (gimg_remote_running(ctx->remote)) {
        if (!gimg_cost_choose_gpu(t, job, GIMG_GPU_SERVER, &p))
            return NULL;
    } else if (local_gpu_open(ctx) || !gimg_cost_choose_gpu(t, &shared, GIMG_GPU_COLD, &p) ||
               !gimg_remote_wanted(ctx->remote)) {
        return NULL;
    }
    note_auto(ctx, &p, "gimgd", 0);
    return ctx->remote;
}

gimg_status gimg_ctx_gpu_fallback(gimg_ctx *ctx, gimg_status st)
{
    if (st != GIMG_E_NOMEM || t_input_on_gpu) /* the batch decodes it on the CPU then */
        return st;
#ifdef GIMG_HAVE_CUDA
    pthread_mutex_lock(&ctx->lock);
    if (ctx->n_gpus > 0) {
        gpu_slot *slot = lane_slot(ctx);
        ctx->ran_gpu -= ctx->ran_gpu > 0;
        slot->ran -= slot->ran > 0;
    }
    pthread_mutex_unlock(&ctx->lock);
#endif
    ran_on_cpu(ctx, "%s; ran on the CPU instead", gimg_last_error());
    return GIMG_OK;
}

/* The model's times for `megapixels` of JPEG (cost.h): on the CPU's
 * codecs with `threads` threads, and on the GPU's with their start-up. */
static void jpeg_codec_ms(const gimg_cost_table *t, double megapixels, int threads,
                          double *cpu_ms, double *gpu_ms)
{
    gimg_cost_prediction p = gimg_cost_predict_jpeg(t, megapixels, threads, GIMG_GPU_COLD);
    *cpu_ms = p.cpu_ms;
    *gpu_ms = p.gpu_ms;
}

int gimg_auto_gpu_codecs_with(const gimg_cost_table *t, double megapixels, int threads)
{
    double cpu_ms, gpu_ms;
    jpeg_codec_ms(t, megapixels, threads, &cpu_ms, &gpu_ms);
    return megapixels > 0 && gpu_ms < cpu_ms;
}

int gimg_auto_gpu_codecs(double megapixels, int threads)
{
    return gimg_auto_gpu_codecs_with(gimg_cost_get(), megapixels, threads);
}

int gimg_ctx_want_gpu_codecs(gimg_ctx *ctx, double jpeg_megapixels, int threads)
{
    if (ctx->dev.cpu_codecs)
        return 0;
    /* A server that serves the job takes JPEGs as they are (its codecs). */
    if (ctx->dev.kind == GIMG_DEV_GPU && gimg_remote_prepare(ctx->remote, SIZE_MAX)) {
        ctx->jpeg_remote = 1;
        return 1;
    }
#ifdef GIMG_HAVE_CUDA
    if (ctx->dev.kind == GIMG_DEV_GPU) {
        ctx->want_jpeg = 1;
    } else if (ctx->dev.kind == GIMG_DEV_AUTO && jpeg_megapixels > 0) {
        const gimg_cost_table *t = gimg_cost_for_auto();
        double cpu_ms, gpu_ms;
        jpeg_codec_ms(t, jpeg_megapixels, threads, &cpu_ms, &gpu_ms);
        ctx->want_jpeg = gimg_auto_gpu_codecs_with(t, jpeg_megapixels, threads);
        snprintf(ctx->jpeg_auto, sizeof ctx->jpeg_auto,
                 "--device auto: %s for about %.0f MP of JPEG (the CPU's codecs: %.1f s on %d "
                 "threads; the GPU's: %.1f s with their start-up)",
                 ctx->want_jpeg ? "the GPU's codecs" : "the CPU's codecs", jpeg_megapixels,
                 cpu_ms / 1e3, threads, gpu_ms / 1e3);
        /* The start-up paid for a server leaves it warm for the jobs after. */
        if (ctx->want_jpeg && gimg_remote_wanted(ctx->remote)) {
            ctx->want_jpeg = 0;
            ctx->jpeg_remote = 1;
            snprintf(ctx->jpeg_auto, sizeof ctx->jpeg_auto,
                     "--device auto: the server's codecs for about %.0f MP of JPEG (the CPU's: "
                     "%.1f s on %d threads; the GPU's: %.1f s with their start-up)",
                     jpeg_megapixels, cpu_ms / 1e3, threads, gpu_ms / 1e3);
            return 1;
        }
        if (ctx->want_jpeg)
            start_init(ctx);
    }
#else
    (void)jpeg_megapixels;
    (void)threads;
#endif
    return ctx->want_jpeg;
}

void gimg_ctx_count_cpu_codec(gimg_ctx *ctx, const char *why)
{
    pthread_mutex_lock(&ctx->lock);
    ctx->jpeg_cpu++;
    snprintf(ctx->jpeg_cpu_why, sizeof ctx->jpeg_cpu_why, "%s", why);
    pthread_mutex_unlock(&ctx->lock);
}

/* This lane's image no longer counts in jpeg_in_flight. */
static void jpeg_done(gimg_ctx *ctx)
{
    if (!t_jpeg_in_flight)
        return;
    t_jpeg_in_flight = 0;
    pthread_mutex_lock(&ctx->lock);
    ctx->jpeg_in_flight--;
    pthread_mutex_unlock(&ctx->lock);
}

/* The GPU codecs of this process (CUDA builds): a lane's nvJPEG. */
#ifdef GIMG_HAVE_CUDA
static gimg_status local_decode_jpeg(gimg_ctx *ctx, const unsigned char *bits, size_t len,
                                     gimg_image *shell)
{
    gpu_slot *slot;
    gimg_gpu *g;
    gimg_status st = lane_gpu(ctx, &slot, &g);
    if (st)
        return st;
    if (!g->jpeg)
        return gimg_fail(GIMG_E_DEVICE, "%s", slot->jpeg_why[0] ? slot->jpeg_why
                                                               : "nvJPEG is not started");
    const double t0 = gimg_now_ms();
    /* An image alone in the job (a single file, the server's one request)
     * may be cut in strips over the GPU's JPEG engines; a batch's never. */
    pthread_mutex_lock(&ctx->lock);
    const int alone = ++ctx->jpeg_in_flight == 1;
    pthread_mutex_unlock(&ctx->lock);
    t_jpeg_in_flight = 1;
    if ((st = gimg_gpu_jpeg_decode(g, bits, len, shell->width, shell->height, shell->channels,
                                   alone, &g->decoded))) {
        jpeg_done(ctx);
        return st;
    }
    shell->device = &g->decoded;
    t_input_on_gpu = 1;
    pthread_mutex_lock(&ctx->lock);
    ctx->jpeg_decode_ms += gimg_now_ms() - t0;
    ctx->jpeg_gpu_decoded++;
    pthread_mutex_unlock(&ctx->lock);
    return GIMG_OK;
}

static void local_keep_outputs(gimg_ctx *ctx, int keep)
{
    gpu_slot *slot;
    gimg_gpu *g;
    /* Only a job with the GPU codecs has a lane to tell: any other would
     * start CUDA here (--device cpu included). */
    if (ctx->want_jpeg && lane_gpu(ctx, &slot, &g) == GIMG_OK)
        gimg_gpu_keep_outputs(g, keep && g->jpeg);
}

static gimg_status local_encode_jpeg(gimg_ctx *ctx, const gimg_image *im,
                                     const gimg_write_opts *o, unsigned char **bits, size_t *len)
{
    gpu_slot *slot;
    gimg_gpu *g;
    gimg_status st = lane_gpu(ctx, &slot, &g);
    if (st)
        return st;
    const double t0 = gimg_now_ms();
    if ((st = gimg_gpu_jpeg_encode(g, im->device, o->quality, gimg_jpeg_subsampling(o), bits,
                                   len)))
        return st;
    pthread_mutex_lock(&ctx->lock);
    ctx->jpeg_encode_ms += gimg_now_ms() - t0;
    ctx->jpeg_gpu_encoded++;
    pthread_mutex_unlock(&ctx->lock);
    return GIMG_OK;
}
#else
static gimg_status local_decode_jpeg(gimg_ctx *ctx, const unsigned char *bits, size_t len,
                                     gimg_image *shell)
{
    return gimg_fail(GIMG_E_DEVICE, "built without CUDA");
}

static void local_keep_outputs(gimg_ctx *ctx, int keep) {}

static gimg_status local_encode_jpeg(gimg_ctx *ctx, const gimg_image *im,
                                     const gimg_write_opts *o, unsigned char **bits, size_t *len)
{
    return gimg_fail(GIMG_E_DEVICE, "built without CUDA");
}
#endif

/* With the server's codecs (jpeg_remote), a JPEG stays a bitstream here:
 * the lane's operation sends it to gimgd, which decodes it (nvJPEG where
 * it can), and an output asked for as a JPEG comes back encoded. */
gimg_status gimg_ctx_gpu_decode_jpeg(gimg_ctx *ctx, const unsigned char *bits, size_t len,
                                     gimg_image *shell)
{
    if (!ctx->jpeg_remote)
        return local_decode_jpeg(ctx, bits, len, shell);
    if (!gimg_remote_up(ctx->remote))
        return gimg_fail(GIMG_E_DEVICE, "the server: %s", gimg_remote_why(ctx->remote));
    gimg_remote_jpeg_input(bits, len);
    shell->device = gimg_remote_image;
    return GIMG_OK;
}

void gimg_ctx_gpu_keep_outputs(gimg_ctx *ctx, const gimg_write_opts *jpeg)
{
    if (ctx->jpeg_remote)
        gimg_remote_jpeg_output(jpeg);
    else
        local_keep_outputs(ctx, jpeg != NULL);
}

void gimg_ctx_gpu_item_done(gimg_ctx *ctx)
{
    t_input_on_gpu = 0;
    jpeg_done(ctx);
    if (ctx->jpeg_remote)
        gimg_remote_jpeg_done();
    else if (ctx->want_jpeg)
        local_keep_outputs(ctx, 0);
}

gimg_status gimg_ctx_gpu_encode_jpeg(gimg_ctx *ctx, const gimg_image *im,
                                     const gimg_write_opts *o, unsigned char **bits, size_t *len)
{
    if (im->device == gimg_remote_image)
        return gimg_remote_take_jpeg(bits, len);
    return local_encode_jpeg(ctx, im, o, bits, len);
}

void gimg_ctx_close(gimg_ctx *ctx)
{
    if (!ctx)
        return;
#ifdef GIMG_HAVE_CUDA
    if (ctx->joinable)
        pthread_join(ctx->init_thread, NULL);
    /* What this process's GPU measured goes to the cost table's cache, for
     * the choices of --device auto after it. The start-up is CUDA's
     * initialisation (the lanes' streams and buffers with it) and what the
     * first operation took beyond its warm prediction (the kernels' module
     * loads at their first launch). On an H100, a cold process's dense
     * 31x31 convolution of 4096x4096 RGB timed 316 ms of kernel and 89 ms
     * of copies, where a warm one takes a few ms of each: recorded as
     * rates, they had made the GPU look 30-65 times slower than it is.
     * Not with nvJPEG: its own start-up is in it then. */
    if (ctx->ran_gpu && !ctx->init_status && ctx->n_gpus > 0 && ctx->gpu[0].lane[0]) {
        if (!ctx->want_jpeg && ctx->first_timed)
            ctx->measured.cuda_start_ms = ctx->startup_ms + ctx->first_excess_ms;
        gimg_cost_record_gpu(&ctx->measured, ctx->gpu[0].lane[0]->name);
    }
    for (int i = 0; i < ctx->n_gpus; i++)
        for (int l = MAX_LANES_PER_GPU - 1; l >= 0; l--) /* lane 0 holds what the others share */
            gimg_gpu_close(ctx->gpu[i].lane[l]);
    pthread_cond_destroy(&ctx->changed);
#endif
    gimg_remote_close(ctx->remote);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

void gimg_ctx_add_time(gimg_ctx *ctx, gimg_timer t, double ms)
{
    ctx->t_ms[t] += ms;
}

/* The calling thread's share of them, for gimgd's log of each request. */
static _Thread_local double t_kernel_ms, t_transfer_ms;

void gimg_ctx_take_thread_gpu_times(double *kernel_ms, double *transfer_ms)
{
    *kernel_ms = t_kernel_ms;
    *transfer_ms = t_transfer_ms;
    t_kernel_ms = t_transfer_ms = 0;
}

void gimg_ctx_add_gpu_times(gimg_ctx *ctx, double kernel_ms, double transfer_ms)
{
    t_kernel_ms += kernel_ms;
    t_transfer_ms += transfer_ms;
    const gimg_cost_job *job = t_gpu_job_set ? &t_gpu_job : NULL;
    t_gpu_job_set = 0;
    pthread_mutex_lock(&ctx->lock);
    ctx->gpu_kernel_ms += kernel_ms;
    ctx->gpu_transfer_ms += transfer_ms;
    /* The cost table's GPU figures, as this machine's GPU gives them: its
     * rates from warm lanes' operations only; what the process's first
     * took beyond a warm one's prediction counts as start-up. */
    int warm = 0;
#ifdef GIMG_HAVE_CUDA
    if (job && ctx->n_gpus > 0) {
        gpu_slot *slot = lane_slot(ctx);
        warm = slot->timed[t_lane / ctx->n_gpus % (slot->n_lanes > 0 ? slot->n_lanes : 1)]++ > 0;
    }
#endif
    if (job && warm) {
        gimg_cost_gpu_measure *m = &ctx->measured;
        const double bytes = (double)job->bytes;
        m->work[job->op] += job->op == GIMG_COST_CONV ? bytes * job->fmas_per_byte : bytes;
        m->kernel_ms[job->op] += kernel_ms;
        m->transfer_bytes += gimg_cost_copies(job->op) * bytes;
        m->transfer_ms += transfer_ms;
    } else if (job && !ctx->first_timed) {
        ctx->first_timed = 1;
        const gimg_cost_prediction p = gimg_cost_predict(gimg_cost_get(), job, GIMG_GPU_OPEN);
        ctx->first_excess_ms = fmax(0.0, kernel_ms + transfer_ms - p.gpu_ms);
    }
    pthread_mutex_unlock(&ctx->lock);
}

/* -v: which codecs served the JPEGs of a job that asked for the GPU's. */
static void report_codecs(const gimg_ctx *ctx, FILE *f, const char *tool)
{
    if (ctx->jpeg_auto[0])
        fprintf(f, "%s: codecs: %s\n", tool, ctx->jpeg_auto);
    if (!ctx->want_jpeg)
        return;
    const char *why_none = NULL;
#ifdef GIMG_HAVE_CUDA
    int hardware = 0, ready = 0, calls = 0, images = 0;
    for (int i = 0; i < ctx->n_gpus; i++) {
        const gpu_slot *s = &ctx->gpu[i];
        int c, n;
        if (s->lane[0] && gimg_gpu_jpeg_ready(s->lane[0], &hardware, &c, &n)) {
            ready = 1;
            calls += c;
            images += n;
        } else if (s->jpeg_why[0]) {
            why_none = s->jpeg_why;
        }
    }
    if (ready) {
        fprintf(f, "%s: codecs: %s on the GPU (%s): %d JPEG%s decoded, %d encoded\n", tool,
                gimg_nvjpeg_version(), hardware ? "hardware decoder" : "CUDA decoder",
                ctx->jpeg_gpu_decoded, ctx->jpeg_gpu_decoded == 1 ? "" : "s",
                ctx->jpeg_gpu_encoded);
        fprintf(f, "%s: codecs: the lanes' time: decoding %.1f ms, encoding %.1f ms", tool,
                ctx->jpeg_decode_ms, ctx->jpeg_encode_ms);
        if (calls)
            fprintf(f, "; the hardware decoder's calls: %d, %.1f images each", calls,
                    (double)images / calls);
        fputc('\n', f);
    }
#endif
    if (why_none)
        fprintf(f, "%s: codecs: no GPU codecs: %s\n", tool, why_none);
    if (ctx->jpeg_cpu)
        fprintf(f, "%s: codecs: libjpeg-turbo for %d JPEG%s (the last: %s)\n", tool, ctx->jpeg_cpu,
                ctx->jpeg_cpu == 1 ? "" : "s", ctx->jpeg_cpu_why);
}

/* -v: what --device auto predicted for the operations it placed, beside
 * what the compute took, and where its cost table came from. */
static void report_auto(const gimg_ctx *ctx, FILE *f, const char *tool)
{
    if (!ctx->auto_n)
        return;
    const char *gpu_side = ctx->auto_gpu_where ? ctx->auto_gpu_where : "the GPU";
    fprintf(f, "%s: auto: ", tool);
    if (ctx->auto_n > 1)
        fprintf(f, "%d operations, ", ctx->auto_n);
    /* Tenths where a figure is small: "0 ms" would say nothing. */
#define MS(v) (v) < 9.95 ? 1 : 0, (v)
    fprintf(f, "predicted cpu %.*f ms, gpu %.*f ms (start-up %.*f ms", MS(ctx->auto_cpu_ms),
            MS(ctx->auto_gpu_ms), MS(ctx->auto_start_ms));
    if (ctx->batch_images > 1)
        fprintf(f, " an image, shared by %d", ctx->batch_images);
    fprintf(f, "); ");
    if (ctx->auto_gpu_n == 0)
        fprintf(f, "chose the CPU%s", ctx->auto_no_gpu ? " (no GPU in this build)" : "");
    else if (ctx->auto_gpu_n == ctx->auto_n)
        fprintf(f, "chose %s", gpu_side);
    else
        fprintf(f, "chose %s for %d, the CPU for %d", gpu_side, ctx->auto_gpu_n,
                ctx->auto_n - ctx->auto_gpu_n);
    fprintf(f, "; measured: compute %.*f ms\n", MS(ctx->t_ms[GIMG_T_COMPUTE]));
#undef MS
    fprintf(f, "%s: auto: cost table: %s\n", tool, gimg_cost_source());
}

void gimg_ctx_report(const gimg_ctx *ctx, FILE *f, const char *tool)
{
#ifdef GIMG_HAVE_CUDA
    for (int i = 0; i < ctx->n_gpus; i++) {
        const gpu_slot *s = &ctx->gpu[i];
        if (!s->ran)
            continue;
        fprintf(f, "%s: backend: gpu %d (%s)", tool, s->index, s->lane[0]->name);
        if (ctx->n_gpus > 1)
            fprintf(f, ": %d operation%s", s->ran, s->ran == 1 ? "" : "s");
        fputc('\n', f);
    }
#endif
    gimg_remote_report(ctx->remote, f, tool);
    if (ctx->ran_cpu || (!ctx->ran_gpu && !gimg_remote_served(ctx->remote))) {
        fprintf(f, "%s: backend: cpu (%d threads)%s%s%s\n", tool, omp_get_max_threads(),
                ctx->why_cpu[0] ? " (" : "", ctx->why_cpu, ctx->why_cpu[0] ? ")" : "");
        const char *wait = getenv("OMP_WAIT_POLICY");
        if (wait && !strcasecmp(wait, "passive")) /* gimg_cli_settle_threads, or the user */
            fprintf(f, "%s: threads: idle ones sleep (OMP_WAIT_POLICY=passive)\n", tool);
    }
    report_auto(ctx, f, tool);
    report_codecs(ctx, f, tool);
    fprintf(f, "%s: time: decode %.2f ms, compute %.2f ms, encode %.2f ms\n", tool,
            ctx->t_ms[GIMG_T_DECODE], ctx->t_ms[GIMG_T_COMPUTE], ctx->t_ms[GIMG_T_ENCODE]);
#ifdef GIMG_HAVE_CUDA
    if (ctx->ran_gpu)
        fprintf(f, "%s: gpu: kernels %.3f ms, transfers %.2f ms, start-up %.0f ms%s\n", tool,
                ctx->gpu_kernel_ms, ctx->gpu_transfer_ms, ctx->startup_ms,
                ctx->want_jpeg ? " (CUDA and nvJPEG)" : " (CUDA)");
#endif
}

void gimg_ctx_describe(gimg_ctx *ctx, char *buf, size_t size)
{
#ifdef GIMG_HAVE_CUDA
    if (ctx->dev.kind != GIMG_DEV_CPU) {
        pthread_mutex_lock(&ctx->lock);
        int done = ctx->done;
        pthread_mutex_unlock(&ctx->lock);
        if (!done) {
            snprintf(buf, size, "gpu, starting");
        } else if (ctx->init_status) {
            snprintf(buf, size, "gpu, failed: %s", ctx->init_error);
        } else if (ctx->n_gpus == 1) {
            snprintf(buf, size, "gpu %d (%s)", ctx->gpu[0].index, ctx->gpu[0].lane[0]->name);
        } else {
            snprintf(buf, size, "%d gpus (%s, ...)", ctx->n_gpus, ctx->gpu[0].lane[0]->name);
        }
        return;
    }
#endif
    snprintf(buf, size, "cpu (%d threads)", omp_get_max_threads());
}

void gimg_ctx_memory_text(gimg_ctx *ctx, char *buf, size_t size)
{
    size_t device_bytes = 0, pinned_bytes = 0;
#ifdef GIMG_HAVE_CUDA
    pthread_mutex_lock(&ctx->lock);
    int done = ctx->done;
    pthread_mutex_unlock(&ctx->lock);
    if (done)
        device_bytes = gimg_gpu_claimed_bytes();
    for (int i = 0; done && i < ctx->n_gpus; i++)
        for (int l = 0; l < ctx->gpu[i].n_lanes; l++) {
            const gimg_gpu *g = ctx->gpu[i].lane[l];
            for (int k = 0; g && k < GIMG_GPU_SLOTS; k++)
                pinned_bytes += g->h_stage_cap[k];
            if (g)
                pinned_bytes += gimg_gpu_jpeg_pinned_bytes(g);
        }
#endif
    snprintf(buf, size, "memory held: %.1f MB on the GPUs, %.1f MB pinned\n",
             device_bytes / 1e6, pinned_bytes / 1e6);
}
