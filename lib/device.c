/*
 * device.c — choosing the backend. One context per process: it starts
 * CUDA on a background thread as soon as the input's size says the GPU may
 * be used (CUDA's start-up, about 0.2 s, then overlaps the decode), and
 * keeps work below each operation's measured break-even size on the CPU, so
 * that a small image through a pipe of tools pays no GPU start-up at all.
 */
#include "ctx_internal.h"
#include "gpu_internal.h"
#include "orient_internal.h"

#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The minimum of the operations' break-even sizes. */
const size_t gimg_auto_gpu_min_bytes = GIMG_ORIENT_GPU_MIN_BYTES;

struct gimg_ctx {
    gimg_device dev;
    int verbose;
    double t_ms[GIMG_T_COUNT];
    double gpu_kernel_ms, gpu_transfer_ms;
    int ran_cpu;                    /* for -v: whether an operation ran on the CPU, */
    int ran_gpu;                    /* and how many on the GPU */
    char why_cpu[512];              /* why auto stayed on the CPU, or fell back to it */
#ifdef GIMG_HAVE_CUDA
    pthread_t init_thread;
    int init_started, init_done;
    gimg_status init_status;
    char init_error[512];
    gimg_gpu *gpu;
#endif
};

int gimg_built_with_cuda(void)
{
#ifdef GIMG_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}

gimg_status gimg_parse_device(const char *s, gimg_device *d)
{
    d->gpu_index = 0;
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
        if (s[3] == ':') {
            char *end;
            long n = strtol(s + 4, &end, 10);
            if (s[4] < '0' || s[4] > '9' || *end || n > 1024)
                return gimg_fail(GIMG_E_USAGE, "invalid GPU index in device '%s'", s);
            d->gpu_index = (int)n;
        }
        return GIMG_OK;
    }
    return gimg_fail(GIMG_E_USAGE, "invalid device '%s' (auto, cpu, gpu or gpu:N)", s);
}

double gimg_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

gimg_status gimg_ctx_open(const gimg_device *dev, int verbose, gimg_ctx **out)
{
    gimg_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    ctx->dev = *dev;
    ctx->verbose = verbose;
    *out = ctx;
    if (dev->kind == GIMG_DEV_GPU && !gimg_built_with_cuda()) {
        gimg_ctx_close(ctx);
        *out = NULL;
        return gimg_fail(GIMG_E_DEVICE, "no usable GPU: this build of gimg has no CUDA support");
    }
    return GIMG_OK;
}

#ifdef GIMG_HAVE_CUDA
static void *init_main(void *arg)
{
    gimg_ctx *ctx = arg;
    ctx->init_status = gimg_gpu_open(ctx->dev.gpu_index, &ctx->gpu);
    if (ctx->init_status)
        snprintf(ctx->init_error, sizeof ctx->init_error, "%s", gimg_last_error());
    return NULL;
}

static void start_init(gimg_ctx *ctx)
{
    if (ctx->init_started)
        return;
    ctx->init_started = 1;
    if (pthread_create(&ctx->init_thread, NULL, init_main, ctx) != 0) {
        /* No thread: initialise in the foreground when (and if) it is needed. */
        ctx->init_started = 0;
    }
}

/* Waits for the start-up (running it here if it never started). */
static gimg_status finish_init(gimg_ctx *ctx)
{
    if (!ctx->init_done) {
        if (ctx->init_started)
            pthread_join(ctx->init_thread, NULL);
        else
            init_main(ctx);
        ctx->init_done = 1;
    }
    if (ctx->init_status)
        return gimg_fail(ctx->init_status, "%s", ctx->init_error);
    return gimg_gpu_bind(ctx->gpu);
}
#endif

void gimg_ctx_prepare(gimg_ctx *ctx, size_t work_bytes)
{
#ifdef GIMG_HAVE_CUDA
    if (ctx->dev.kind == GIMG_DEV_GPU ||
        (ctx->dev.kind == GIMG_DEV_AUTO && work_bytes >= gimg_auto_gpu_min_bytes))
        start_init(ctx);
#else
    (void)ctx;
    (void)work_bytes;
#endif
}

gimg_status gimg_ctx_select(gimg_ctx *ctx, size_t work_bytes, size_t auto_min_bytes,
                            struct gimg_gpu **gpu)
{
    *gpu = NULL;
    if (ctx->dev.kind == GIMG_DEV_CPU) {
        ctx->ran_cpu = 1;
        return GIMG_OK;
    }
#ifdef GIMG_HAVE_CUDA
    if (ctx->dev.kind == GIMG_DEV_GPU) {
        gimg_status st = finish_init(ctx);
        if (st)
            return st;
        *gpu = ctx->gpu;
        ctx->ran_gpu++;
        return GIMG_OK;
    }
    if (work_bytes >= auto_min_bytes) {
        if (finish_init(ctx) == GIMG_OK) {
            *gpu = ctx->gpu;
            ctx->ran_gpu++;
            return GIMG_OK;
        }
        snprintf(ctx->why_cpu, sizeof ctx->why_cpu, "%s", ctx->init_error);
    } else {
        snprintf(ctx->why_cpu, sizeof ctx->why_cpu,
                 "%zu bytes, below the GPU's break-even size for this operation", work_bytes);
    }
#else
    (void)work_bytes;
    (void)auto_min_bytes;
    snprintf(ctx->why_cpu, sizeof ctx->why_cpu, "built without CUDA");
#endif
    ctx->ran_cpu = 1;
    return GIMG_OK;
}

gimg_status gimg_ctx_gpu_fallback(gimg_ctx *ctx, gimg_status st)
{
    if (st != GIMG_E_NOMEM)
        return st;
    snprintf(ctx->why_cpu, sizeof ctx->why_cpu, "%s; ran on the CPU instead", gimg_last_error());
    if (ctx->ran_gpu > 0)
        ctx->ran_gpu--;
    ctx->ran_cpu = 1;
    return GIMG_OK;
}

void gimg_ctx_close(gimg_ctx *ctx)
{
    if (!ctx)
        return;
#ifdef GIMG_HAVE_CUDA
    if (ctx->init_started && !ctx->init_done)
        pthread_join(ctx->init_thread, NULL);
    gimg_gpu_close(ctx->gpu);
#endif
    free(ctx);
}

void gimg_ctx_add_time(gimg_ctx *ctx, gimg_timer t, double ms)
{
    ctx->t_ms[t] += ms;
}

void gimg_ctx_add_gpu_times(gimg_ctx *ctx, double kernel_ms, double transfer_ms)
{
    ctx->gpu_kernel_ms += kernel_ms;
    ctx->gpu_transfer_ms += transfer_ms;
}

void gimg_ctx_report(const gimg_ctx *ctx, FILE *f, const char *tool)
{
    if (ctx->ran_gpu) {
#ifdef GIMG_HAVE_CUDA
        fprintf(f, "%s: backend: gpu %d (%s)\n", tool, ctx->gpu->device, ctx->gpu->name);
#endif
    }
    if (ctx->ran_cpu || !ctx->ran_gpu)
        fprintf(f, "%s: backend: cpu (%d threads)%s%s%s\n", tool, omp_get_max_threads(),
                ctx->why_cpu[0] ? " (" : "", ctx->why_cpu, ctx->why_cpu[0] ? ")" : "");
    fprintf(f, "%s: time: decode %.2f ms, compute %.2f ms, encode %.2f ms\n", tool,
            ctx->t_ms[GIMG_T_DECODE], ctx->t_ms[GIMG_T_COMPUTE], ctx->t_ms[GIMG_T_ENCODE]);
    if (ctx->ran_gpu)
        fprintf(f, "%s: gpu: kernels %.3f ms, transfers %.2f ms\n", tool, ctx->gpu_kernel_ms,
                ctx->gpu_transfer_ms);
}
