/*
 * cost.h — --device auto's cost model: what each operation costs on this
 * machine's CPU and GPU, so that auto picks the side predicted faster.
 * Internal to libgimg (and its tests).
 *
 * One table a process (gimg_cost_table), from, in order:
 *  1. the built-in defaults, measured on an H100 host with 16 threads
 *     (cost.c says where each figure comes from);
 *  2. the cache, $XDG_CACHE_HOME/gimg/cost (else ~/.cache/gimg/cost): the
 *     figures measured on this machine, used while its first line (gimg's
 *     version, the CPU's model and thread count) matches this process's;
 *     GIMG_COST_CACHE=off neither reads nor writes it;
 *  3. or, instead of 2, GIMG_COST_TABLE=FILE, a table given for a test or
 *     by hand (neither measured nor cached).
 * The CPU's figures are measured by a short calibration (a few tens of
 * milliseconds, one thread, through the CPU backends) the first time auto
 * has a GPU to choose (a build with CUDA) and the cache has none; the GPU's
 * are the defaults until a process uses the GPU, which records what it
 * measured (CUDA's start-up, the kernels' rates, the transfers).
 *
 * The file format, of the table and of the cache: one "key value" a line
 * (the keys are gimg_cost_table's fields), '#' to the end of a line is a
 * comment, blank lines are skipped, unknown keys are ignored (a later
 * version's), a key left out keeps its default. A value that is not a
 * finite number, or is negative, or zero for a rate, is an error: the
 * whole table is then refused, the defaults are used, and -v says why. A
 * broken table or cache never makes a tool fail.
 *
 * The predictions are pure functions of a table and a job, so that the
 * choice is tested without a GPU.
 */
#ifndef GIMG_COST_H
#define GIMG_COST_H

#include "gimg.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Rates "per thread" are one CPU thread's: the model's CPU time is the
 * work over (threads * rate), on the threads the operation would use. The
 * GPU's rates are its kernels' alone; the copies are counted apart. */
typedef struct {
    double conv_cpu_fmas_per_ms_per_thread;    /* gconv: fused multiply-adds */
    double stats_cpu_bytes_per_ms_per_thread;  /* gstats' pass (and --compare's) */
    double hist_cpu_bytes_per_ms_per_thread;   /* ghist's count */
    double orient_cpu_bytes_per_ms_per_thread; /* gtranspose: rot90, transpose, flips */
    double conv_gpu_fmas_per_ms;
    double stats_gpu_bytes_per_ms;
    double hist_gpu_bytes_per_ms;
    double orient_gpu_bytes_per_ms;
    double gpu_transfer_ms_per_byte;  /* one way between host and GPU (pinned staging) */
    double cuda_start_ms;             /* CUDA's start-up in a process, to its first kernel */
    double nvjpeg_start_ms;           /* nvJPEG's, on top of CUDA's */
    double jpeg_cpu_ms_per_mp;        /* libjpeg-turbo: decode + encode a megapixel, one thread */
    double jpeg_gpu_ms_per_mp;        /* the GPU's codecs, once started, a batch's megapixel */
    double server_round_trip_ms;      /* a request to a warm gimgd and its answer */
    double server_ms_per_byte;        /* one way through gimgd: memory file and GPU copies */
} gimg_cost_table;

typedef enum { GIMG_COST_CONV, GIMG_COST_STATS, GIMG_COST_HIST, GIMG_COST_ORIENT } gimg_cost_op;

/* What the GPU's start-up costs a job: not started in this process (the
 * start-up is paid: CUDA's, or a server's start, which starts CUDA), this
 * process's GPU context already open (nothing to pay), or a warm gimgd
 * (a round trip, and the pixels through its memory files). */
typedef enum { GIMG_GPU_COLD, GIMG_GPU_OPEN, GIMG_GPU_SERVER } gimg_gpu_start;

/* An operation as auto sees it. */
typedef struct {
    gimg_cost_op op;
    size_t bytes;              /* the image bytes it reads (--compare: both images) */
    double fmas_per_byte;      /* conv: the kernels' FMAs per sample over the sample's bytes */
    int threads;               /* the CPU threads it would run on */
    const char *gpu_refused;   /* not NULL: a hard limit keeps it off the GPU (why) */
    int untimed;               /* its GPU time holds other work too (--compare's SSIM),
                                * or is a band's (conv.c): not a measure of the
                                * table's figures */
    int start_shared_by;       /* images of the job that share the GPU's start-up, this
                                * one's share being 1 / that (<= 1: this image alone) */
} gimg_cost_job;

typedef struct {
    double cpu_ms, gpu_ms;     /* gpu_ms includes start_ms */
    double start_ms;           /* what the GPU pays before its work: start-up or round trip */
} gimg_cost_prediction;

/* How many times an operation's image crosses between host and GPU: 2 for
 * the operations that make an image (there and back), 1 for the reports. */
double gimg_cost_copies(gimg_cost_op op);

/* The built-in figures. */
void gimg_cost_defaults(gimg_cost_table *t);

/* Reads "key value" lines (the format above) over t, which holds the
 * figures a key left out keeps; `name` names the text in messages. On an
 * error t is unchanged and one message says where (GIMG_E_FORMAT). */
gimg_status gimg_cost_parse(const char *text, const char *name, gimg_cost_table *t);
/* gimg_cost_parse of a file (GIMG_E_IO when it cannot be read). */
gimg_status gimg_cost_load(const char *path, gimg_cost_table *t);

/* The predictions: of an operation (job), and of the JPEG codecs for a
 * batch, decoding and encoding `megapixels` once each. */
gimg_cost_prediction gimg_cost_predict(const gimg_cost_table *t, const gimg_cost_job *job,
                                       gimg_gpu_start start);
gimg_cost_prediction gimg_cost_predict_jpeg(const gimg_cost_table *t, double megapixels,
                                            int threads, gimg_gpu_start start);
/* auto's choice: 1 for the GPU, when it is predicted faster and no hard
 * limit refuses the job. */
int gimg_cost_choose_gpu(const gimg_cost_table *t, const gimg_cost_job *job,
                         gimg_gpu_start start, gimg_cost_prediction *p);
/* The smallest job.bytes from which the GPU is predicted faster (the
 * break-even; job.bytes is ignored), SIZE_MAX where it never is. */
size_t gimg_cost_break_even_bytes(const gimg_cost_table *t, const gimg_cost_job *job,
                                  gimg_gpu_start start);

/* This process's table (defaults, cache or GIMG_COST_TABLE), read once,
 * thread-safe. gimg_cost_for_auto: the same, its CPU figures first
 * measured (and cached) where the cache had none and this build has CUDA;
 * for the choices of --device auto only. */
const gimg_cost_table *gimg_cost_get(void);
const gimg_cost_table *gimg_cost_for_auto(void);
/* Where this process's table came from, for -v ("the built-in defaults",
 * "GIMG_COST_TABLE t.cost", "measured, cached in PATH", or a file refused
 * and why). Valid after gimg_cost_get. */
const char *gimg_cost_source(void);

/* The calibration: measures t's CPU figures here (one thread, a few tens
 * of milliseconds). */
gimg_status gimg_cost_calibrate_cpu(gimg_cost_table *t);

/* The cache file's path (GIMG_E_IO without a home), and its first line
 * for this process (version, CPU model, threads), ending in '\n'. */
gimg_status gimg_cost_cache_path(char *buf, size_t size);
void gimg_cost_identity(char *buf, size_t size);

/* What a cache file holds: which figures were measured. */
enum { GIMG_COST_HAS_CPU = 1, GIMG_COST_HAS_GPU = 2 };
/* Reads the cache at path over t: its measured figures when its first
 * line is `identity`; returns the GIMG_COST_HAS_ bits it had (0: none,
 * stale, missing or corrupt, t unchanged); gpu_name (may be NULL) gets
 * the name of the GPU measured. */
int gimg_cost_cache_read(const char *path, const char *identity, gimg_cost_table *t,
                         char *gpu_name, size_t gpu_name_size);
/* Writes t to path atomically (a temporary file, then rename), with the
 * figures `has` says were measured and the GPU's name (NULL for none). */
gimg_status gimg_cost_cache_write(const char *path, const char *identity,
                                  const gimg_cost_table *t, int has, const char *gpu_name);

/* What a process measured on its GPU (device.c fills it; 0: not
 * measured), merged into t by gimg_cost_merge_gpu: figures out of any
 * plausible range (a first start that compiled PTX for minutes, a job too
 * small to time) are left out. Returns 1 when t changed. */
typedef struct {
    double cuda_start_ms;             /* the process's whole start-up (device.c says what) */
    double work[4], kernel_ms[4];     /* per gimg_cost_op: FMAs or bytes, and their kernel time */
    double transfer_bytes, transfer_ms;
} gimg_cost_gpu_measure;
int gimg_cost_merge_gpu(gimg_cost_table *t, const gimg_cost_gpu_measure *m);
/* Records m for the GPU named gpu_name in this process's cache (nothing
 * with GIMG_COST_TABLE or GIMG_COST_CACHE=off; a cache that cannot be
 * written is left as it is, silently). */
void gimg_cost_record_gpu(const gimg_cost_gpu_measure *m, const char *gpu_name);

#ifdef __cplusplus
}
#endif

#endif
