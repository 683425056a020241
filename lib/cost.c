/*
 * cost.c — --device auto's cost table (cost.h): its defaults, its file
 * format, its predictions, the CPU's calibration and the per-machine cache.
 */
#include "cost.h"
#include "conv_internal.h"
#include "hist_internal.h"
#include "orient_internal.h"
#include "stats_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------- defaults */

void gimg_cost_defaults(gimg_cost_table *t)
{
    memset(t, 0, sizeof *t);
    /* Convolution, measured with bench_conv's "end to end" table on the
     * H100 machine (16 threads): the CPU backend ran 82 to 195 G FMA/s
     * (gaussian:2 to 31x31 at 4096x4096 RGB), about 10 G FMA/s a thread;
     * the dense kernels on the GPU 20 to 30 T FLOP/s (10 to 15 T FMA/s) at
     * 11x11 and 31x31. */
    t->conv_cpu_fmas_per_ms_per_thread = 1.0e7;
    t->conv_gpu_fmas_per_ms = 1.0e10;
    /* The passes that read each byte once, from the "end to end" tables of
     * bench_stats, bench_histogram and bench_transpose on the same machine
     * (8192x8192 RGB, 201 MB, CUDA started): the CPU's time on 16 threads,
     * divided among them (so that fewer threads are predicted slower; a
     * pass bound by memory gains less from more threads than this says,
     * which leans to the CPU), and the GPU's time less its upload (and
     * download) at the rate below. Statistics: 19-44 ms on the CPU, 6.8 ms
     * on the GPU through pinned staging; histogram: 19 ms and 7.0 ms;
     * rot90: 19 ms and 11 ms (the transpose itself well under a
     * millisecond: its figure is HBM's, about 1 TB/s for a read and a
     * write). */
    t->stats_cpu_bytes_per_ms_per_thread = 201.3e6 / 30.0 / 16;
    t->hist_cpu_bytes_per_ms_per_thread = 201.3e6 / 19.0 / 16;
    t->orient_cpu_bytes_per_ms_per_thread = 201.3e6 / 19.0 / 16;
    t->stats_gpu_bytes_per_ms = 201.3e6 / 0.8;
    t->hist_gpu_bytes_per_ms = 201.3e6 / 1.0;
    t->orient_gpu_bytes_per_ms = 1.0e9;
    /* Upload + download of 50 MB took 3 ms since the transfers go through
     * pinned staging (lib/gpu.c: gaussian:2 at 4096x4096, 14.0 -> 3.5 ms
     * end to end): 1.5 ms each way. */
    t->gpu_transfer_ms_per_byte = 1.5 / 50.3e6;
    /* CUDA's start-up as the tools pay it, measured for issue 31 on an
     * H100 host: 300-400 ms a process (driver 107 ms, context 129 ms, the
     * lanes' streams and buffers); 350 until the first process that uses
     * this machine's GPU records its own (gimg_cost_record_gpu). A figure
     * too high only keeps auto on the CPU, which is never wrong by much
     * for one image; one too low made auto take the GPU for a dense 31x31
     * 4096x4096 RGB convolution at 2.2x the CPU's time. With nvJPEG the
     * start-up took about a second (gconv -k gaussian:2 -o DIR/ over 2500
     * photos of 1 MP). */
    t->cuda_start_ms = 350.0;
    t->nvjpeg_start_ms = 1000.0 - 350.0;
    /* The same batch: libjpeg-turbo decodes and encodes a megapixel in 29 ms
     * of one thread (the batch's load and store stages); the GPU's codecs,
     * once started, pass a megapixel through in 0.45 ms of the whole batch. */
    t->jpeg_cpu_ms_per_mp = 29.0;
    t->jpeg_gpu_ms_per_mp = 0.45;
    /* gimgd warm on the H100 host (make bench-server): a 4096x4096 PPM
     * costs about 50 ms there and back through its memory files, 25 ms a
     * way for 50.3 MB; gtranspose --op rot90 of a 1 MP JPEG took 11 ms in
     * all, decode and encode included, so a request itself costs a few. */
    t->server_round_trip_ms = 3.0;
    t->server_ms_per_byte = 25.0 / 50.3e6;
}

/* --------------------------------------------------------- the format */

enum { KIND_RATE, KIND_MS };  /* rates must be > 0, times >= 0 */
#define KEY(field, kind, measured) {#field, offsetof(gimg_cost_table, field), kind, measured}
/* measured: which of the cache's sections holds it (0: never measured). */
static const struct {
    const char *name;
    size_t offset;
    int kind;
    int measured;
} k_keys[] = {
    KEY(conv_cpu_fmas_per_ms_per_thread, KIND_RATE, GIMG_COST_HAS_CPU),
    KEY(stats_cpu_bytes_per_ms_per_thread, KIND_RATE, GIMG_COST_HAS_CPU),
    KEY(hist_cpu_bytes_per_ms_per_thread, KIND_RATE, GIMG_COST_HAS_CPU),
    KEY(orient_cpu_bytes_per_ms_per_thread, KIND_RATE, GIMG_COST_HAS_CPU),
    KEY(conv_gpu_fmas_per_ms, KIND_RATE, GIMG_COST_HAS_GPU),
    KEY(stats_gpu_bytes_per_ms, KIND_RATE, GIMG_COST_HAS_GPU),
    KEY(hist_gpu_bytes_per_ms, KIND_RATE, GIMG_COST_HAS_GPU),
    KEY(orient_gpu_bytes_per_ms, KIND_RATE, GIMG_COST_HAS_GPU),
    KEY(gpu_transfer_ms_per_byte, KIND_MS, GIMG_COST_HAS_GPU),
    KEY(cuda_start_ms, KIND_MS, GIMG_COST_HAS_GPU),
    KEY(nvjpeg_start_ms, KIND_MS, 0),
    KEY(jpeg_cpu_ms_per_mp, KIND_RATE, 0),
    KEY(jpeg_gpu_ms_per_mp, KIND_RATE, 0),
    KEY(server_round_trip_ms, KIND_MS, 0),
    KEY(server_ms_per_byte, KIND_MS, 0),
};
#define N_KEYS (sizeof k_keys / sizeof k_keys[0])
#define N_CPU_KEYS 4  /* the first four: what the calibration measures */

static double *field(gimg_cost_table *t, size_t k)
{
    return (double *)((char *)t + k_keys[k].offset);
}

/* The text after "gpu_name " in a cache, up to the end of its line. */
#define GPU_NAME_KEY "gpu_name"

/* Parses text over t; *seen gets a bit per key given (1 << index). */
static gimg_status parse_text(const char *text, const char *name, gimg_cost_table *t,
                              uint32_t *seen)
{
    gimg_cost_table out = *t;
    *seen = 0;
    int line_no = 0;
    for (const char *p = text; *p;) {
        const char *end = p + strcspn(p, "\n");
        line_no++;
        char line[512];
        size_t len = (size_t)(end - p);
        if (len >= sizeof line)
            return gimg_fail(GIMG_E_FORMAT, "%s:%d: line too long", name, line_no);
        memcpy(line, p, len);
        line[len] = '\0';
        p = *end ? end + 1 : end;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char key[64], value[128], extra[2];
        int n = sscanf(line, "%63s %127s %1s", key, value, extra);
        if (n <= 0)
            continue;  /* blank or a comment */
        if (!strcmp(key, GPU_NAME_KEY))
            continue;  /* the cache's: a name, not a figure */
        size_t k = 0;
        while (k < N_KEYS && strcmp(key, k_keys[k].name))
            k++;
        if (k == N_KEYS)
            continue;  /* a later version's key */
        if (n != 2)
            return gimg_fail(GIMG_E_FORMAT, "%s:%d: '%s' wants one number", name, line_no, key);
        char *stop;
        errno = 0;
        double v = strtod(value, &stop);
        if (*stop || errno || !isfinite(v) || v < 0 || (k_keys[k].kind == KIND_RATE && v == 0))
            return gimg_fail(GIMG_E_FORMAT, "%s:%d: bad value '%s' for %s (a finite number, %s)",
                             name, line_no, value, key,
                             k_keys[k].kind == KIND_RATE ? "above 0" : "0 or more");
        *field(&out, k) = v;
        *seen |= 1u << k;
    }
    *t = out;
    return GIMG_OK;
}

gimg_status gimg_cost_parse(const char *text, const char *name, gimg_cost_table *t)
{
    uint32_t seen;
    return parse_text(text, name, t, &seen);
}

/* A small text file, NUL-terminated (malloc'd); NULL on failure, with the
 * reason recorded. */
static char *read_small_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        gimg_fail(GIMG_E_IO, "%s: %s", path, strerror(errno));
        return NULL;
    }
    enum { MAX_BYTES = 64 << 10 };
    char *buf = malloc(MAX_BYTES + 1);
    size_t n = buf ? fread(buf, 1, MAX_BYTES + 1, f) : 0;
    int err = ferror(f);
    fclose(f);
    if (!buf || err || n > MAX_BYTES || memchr(buf, '\0', n)) {
        gimg_fail(GIMG_E_IO, "%s: %s", path,
                  !buf ? "out of memory" : err ? "read error" : "not a small text file");
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

gimg_status gimg_cost_load(const char *path, gimg_cost_table *t)
{
    char *text = read_small_file(path);
    if (!text)
        return GIMG_E_IO;
    gimg_status st = gimg_cost_parse(text, path, t);
    free(text);
    return st;
}

/* ---------------------------------------------------------- predictions */

/* Where an operation's rates lie in the table (gimg_cost_op's order): one
 * thread's on the CPU, the GPU's. */
static const size_t k_cpu_rate[] = {
    offsetof(gimg_cost_table, conv_cpu_fmas_per_ms_per_thread),
    offsetof(gimg_cost_table, stats_cpu_bytes_per_ms_per_thread),
    offsetof(gimg_cost_table, hist_cpu_bytes_per_ms_per_thread),
    offsetof(gimg_cost_table, orient_cpu_bytes_per_ms_per_thread),
};
static const size_t k_gpu_rate[] = {
    offsetof(gimg_cost_table, conv_gpu_fmas_per_ms),
    offsetof(gimg_cost_table, stats_gpu_bytes_per_ms),
    offsetof(gimg_cost_table, hist_gpu_bytes_per_ms),
    offsetof(gimg_cost_table, orient_gpu_bytes_per_ms),
};
static double rate(const gimg_cost_table *t, const size_t *where, gimg_cost_op op)
{
    return *(const double *)((const char *)t + where[op]);
}

double gimg_cost_copies(gimg_cost_op op)
{
    return op == GIMG_COST_CONV || op == GIMG_COST_ORIENT ? 2.0 : 1.0;
}

/* Per byte of the job, on each side, and the GPU's fixed cost. */
static void per_byte(const gimg_cost_table *t, const gimg_cost_job *job, gimg_gpu_start start,
                     double *cpu_ms, double *gpu_ms, double *start_ms)
{
    const double work = job->op == GIMG_COST_CONV ? job->fmas_per_byte : 1.0;
    const int threads = job->threads > 0 ? job->threads : 1;
    *cpu_ms = work / (threads * rate(t, k_cpu_rate, job->op));
    const double copy = start == GIMG_GPU_SERVER ? t->server_ms_per_byte
                                                 : t->gpu_transfer_ms_per_byte;
    *gpu_ms = gimg_cost_copies(job->op) * copy +
              work / rate(t, k_gpu_rate, job->op);
    /* A batch's images share the start-up: each pays its part. */
    const int shared = job->start_shared_by > 1 ? job->start_shared_by : 1;
    *start_ms = start == GIMG_GPU_COLD ? t->cuda_start_ms / shared
              : start == GIMG_GPU_SERVER ? t->server_round_trip_ms : 0.0;
}

gimg_cost_prediction gimg_cost_predict(const gimg_cost_table *t, const gimg_cost_job *job,
                                       gimg_gpu_start start)
{
    double cpu, gpu, fixed;
    per_byte(t, job, start, &cpu, &gpu, &fixed);
    const double bytes = (double)job->bytes;
    return (gimg_cost_prediction){.cpu_ms = bytes * cpu, .gpu_ms = fixed + bytes * gpu,
                                  .start_ms = fixed};
}

gimg_cost_prediction gimg_cost_predict_jpeg(const gimg_cost_table *t, double megapixels,
                                            int threads, gimg_gpu_start start)
{
    gimg_cost_prediction p;
    p.start_ms = start == GIMG_GPU_COLD ? t->cuda_start_ms + t->nvjpeg_start_ms
               : start == GIMG_GPU_SERVER ? t->server_round_trip_ms : 0.0;
    p.cpu_ms = megapixels * t->jpeg_cpu_ms_per_mp / (threads > 0 ? threads : 1);
    p.gpu_ms = p.start_ms + megapixels * t->jpeg_gpu_ms_per_mp;
    return p;
}

int gimg_cost_choose_gpu(const gimg_cost_table *t, const gimg_cost_job *job,
                         gimg_gpu_start start, gimg_cost_prediction *p)
{
    *p = gimg_cost_predict(t, job, start);
    return !job->gpu_refused && p->gpu_ms < p->cpu_ms;
}

size_t gimg_cost_break_even_bytes(const gimg_cost_table *t, const gimg_cost_job *job,
                                  gimg_gpu_start start)
{
    if (job->gpu_refused)
        return SIZE_MAX;
    double cpu, gpu, fixed;
    per_byte(t, job, start, &cpu, &gpu, &fixed);
    if (cpu <= gpu)
        return SIZE_MAX;
    /* The first whole byte count at which the GPU's time is below. */
    const double bytes = floor(fixed / (cpu - gpu)) + 1;
    return bytes >= (double)SIZE_MAX / 2 ? SIZE_MAX : (size_t)bytes;
}

/* ---------------------------------------------------------- calibration */

/* The best of a few runs, so that a first touch of the buffers or a
 * preempted run does not count. */
#define CALIBRATION_RUNS 3

static double best_ms(double best, double t0)
{
    const double ms = gimg_now_ms() - t0;
    return ms < best ? ms : best;
}

/* A dense 9x9 kernel that is not separable (its rows differ in more than
 * scale), so that the CPU backend takes its dense path. */
static gimg_status calibration_kernel(gimg_kernel *k)
{
    char spec[81 * 4 + 16];
    size_t n = 0;
    for (int i = 0; i < 81; i++)
        n += (size_t)snprintf(spec + n, sizeof spec - n, "%s%d", i ? "," : "",
                              (i * 7 + (i / 9) * (i / 9) * 3) % 11 + 1);
    return gimg_kernel_parse(spec, 0, 1, k);
}

gimg_status gimg_cost_calibrate_cpu(gimg_cost_table *t)
{
    gimg_image im = {0}, small = {0}, turned = {0};
    gimg_kernel k = {0};
    gimg_status st;
    /* One thread: the rates are per thread (cost.h). */
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    /* Passes over 1.5 MB (past the first caches, a millisecond or so), the
     * convolution over 192 KB (about 16 M FMAs). */
    if ((st = gimg_image_alloc(&im, 1024, 512, 3, GIMG_U8)) ||
        (st = gimg_image_alloc(&small, 256, 256, 3, GIMG_U8)) || (st = calibration_kernel(&k)))
        goto done;
    uint32_t x = 12345;
    for (int y = 0; y < im.height; y++)
        for (size_t i = 0; i < (size_t)im.width * 3; i++) {
            x = x * 1664525u + 1013904223u;
            im.data[(size_t)y * im.stride_bytes + i] = (uint8_t)(x >> 24);
        }
    for (int y = 0; y < small.height; y++)
        memcpy(small.data + (size_t)y * small.stride_bytes, im.data + (size_t)y * im.stride_bytes,
               (size_t)small.width * 3);
    const double im_bytes = (double)im.width * im.height * 3;
    double conv_ms = 1e30, stats_ms = 1e30, hist_ms = 1e30, orient_ms = 1e30;
    gimg_conv_opts o;
    gimg_conv_opts_init(&o);
    o.kernels = &k;
    o.n_kernels = 1;
    gimg_hist_params hp;
    gimg_hist_default_params(&im, &hp);
    if ((st = gimg_orient_alloc_output(&im, GIMG_ORIENT_ROT90, &turned)))
        goto done;
    for (int run = 0; run < CALIBRATION_RUNS; run++) {
        gimg_image out = {0};
        double t0 = gimg_now_ms();
        if ((st = gimg_conv_cpu(&small, &o, &out)))
            goto done;
        conv_ms = best_ms(conv_ms, t0);
        gimg_image_free(&out);
        gimg_moments m;
        t0 = gimg_now_ms();
        gimg_moments_fast(&im, &m);
        stats_ms = best_ms(stats_ms, t0);
        gimg_hist h = {0};
        t0 = gimg_now_ms();
        if ((st = gimg_hist_compute_fast(&im, &hp, &h)))
            goto done;
        hist_ms = best_ms(hist_ms, t0);
        gimg_hist_free(&h);
        t0 = gimg_now_ms();
        gimg_orient_cpu_into(&im, GIMG_ORIENT_ROT90, &turned);
        orient_ms = best_ms(orient_ms, t0);
    }
    /* A clock too coarse for a run gives a microsecond, not infinity. */
    const double floor_ms = 1e-3;
    const double fmas = gimg_kernel_fmas(&k) * small.width * small.height * 3;
    t->conv_cpu_fmas_per_ms_per_thread = fmas / fmax(conv_ms, floor_ms);
    t->stats_cpu_bytes_per_ms_per_thread = im_bytes / fmax(stats_ms, floor_ms);
    t->hist_cpu_bytes_per_ms_per_thread = im_bytes / fmax(hist_ms, floor_ms);
    t->orient_cpu_bytes_per_ms_per_thread = im_bytes / fmax(orient_ms, floor_ms);
done:
    omp_set_num_threads(threads);
    gimg_image_free(&im);
    gimg_image_free(&small);
    gimg_image_free(&turned);
    gimg_kernel_free(&k);
    return st;
}

/* ---------------------------------------------------------------- cache */

gimg_status gimg_cost_cache_path(char *buf, size_t size)
{
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n;
    /* The XDG base directories are absolute; a relative one is ignored. */
    if (xdg && xdg[0] == '/')
        n = snprintf(buf, size, "%s/gimg/cost", xdg);
    else if (home && home[0] == '/')
        n = snprintf(buf, size, "%s/.cache/gimg/cost", home);
    else
        return gimg_fail(GIMG_E_IO, "no cache folder (neither XDG_CACHE_HOME nor HOME is set)");
    if (n < 0 || (size_t)n >= size)
        return gimg_fail(GIMG_E_IO, "the cache's path is too long");
    return GIMG_OK;
}

/* The CPU's model from /proc/cpuinfo ("model name", or an ARM's "Hardware"
 * or "CPU part"), spaces squeezed; "unknown" without one. */
static void cpu_model(char *buf, size_t size)
{
    snprintf(buf, size, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    static const char *const keys[] = {"model name", "Hardware", "CPU part"};
    int found = (int)(sizeof keys / sizeof keys[0]);
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        for (int i = 0; i < found; i++) {
            if (strncmp(line, keys[i], strlen(keys[i])))
                continue;
            size_t n = 0;
            for (const char *s = colon + 1; *s && n + 1 < size; s++) {
                const int space = *s == ' ' || *s == '\t' || *s == '\n';
                if (space && (n == 0 || buf[n - 1] == ' '))
                    continue;
                buf[n++] = space ? ' ' : *s;
            }
            while (n > 0 && buf[n - 1] == ' ')
                n--;
            buf[n] = '\0';
            found = i;  /* a better key may still come */
            break;
        }
        if (found == 0)
            break;
    }
    fclose(f);
}

void gimg_cost_identity(char *buf, size_t size)
{
    char model[256];
    cpu_model(model, sizeof model);
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(buf, size, "# gimg cost cache 1: gimg %s, %ld threads, CPU %s\n", GIMG_VERSION,
             threads, model);
}

int gimg_cost_cache_read(const char *path, const char *identity, gimg_cost_table *t,
                         char *gpu_name, size_t gpu_name_size)
{
    char *text = read_small_file(path);
    if (!text)
        return 0;
    int has = 0;
    const size_t id_len = strlen(identity);
    uint32_t seen = 0;
    gimg_cost_table read = *t;
    /* Another version, CPU or thread count: measured again. */
    if (id_len > 0 && !strncmp(text, identity, id_len) &&
        parse_text(text + id_len, path, &read, &seen) == GIMG_OK) {
        uint32_t cpu_bits = (1u << N_CPU_KEYS) - 1;
        if ((seen & cpu_bits) == cpu_bits)
            has |= GIMG_COST_HAS_CPU;
        /* From the identity's own newline: the name may be the next line. */
        const char *name = strstr(text + id_len - 1, "\n" GPU_NAME_KEY " ");
        if (name) {
            has |= GIMG_COST_HAS_GPU;
            name += strlen("\n" GPU_NAME_KEY " ");
            if (gpu_name)
                snprintf(gpu_name, gpu_name_size, "%.*s", (int)strcspn(name, "\n"), name);
        }
        /* Only what was measured: a section half there is not trusted. */
        for (size_t k = 0; k < N_KEYS; k++)
            if (k_keys[k].measured & has)
                *field(t, k) = *field(&read, k);
    }
    free(text);
    return has;
}

static gimg_status make_folders(const char *path)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    for (char *s = dir + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        /* The XDG specification's mode for the folders it makes. */
        if (mkdir(dir, 0700) != 0 && errno != EEXIST)
            return gimg_fail(GIMG_E_IO, "%s: %s", dir, strerror(errno));
        *s = '/';
    }
    return GIMG_OK;
}

gimg_status gimg_cost_cache_write(const char *path, const char *identity,
                                  const gimg_cost_table *t, int has, const char *gpu_name)
{
    gimg_status st = make_folders(path);
    if (st)
        return st;
    char tmp[PATH_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return gimg_fail(GIMG_E_IO, "%s: %s", tmp, strerror(errno));
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        unlink(tmp);
        return gimg_fail(GIMG_E_IO, "%s: %s", tmp, strerror(errno));
    }
    fputs(identity, f);
    fputs("# --device auto's cost table as measured on this machine (gimg(7), DEVICES);\n"
          "# delete this file to measure again.\n", f);
    if ((has & GIMG_COST_HAS_GPU) && gpu_name)
        fprintf(f, GPU_NAME_KEY " %s\n", gpu_name);
    for (size_t k = 0; k < N_KEYS; k++)
        if (k_keys[k].measured & has)
            fprintf(f, "%s %.6g\n", k_keys[k].name, *field((gimg_cost_table *)t, k));
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return gimg_fail(GIMG_E_IO, "%s: %s", path, bad ? "write error" : strerror(e));
    }
    return GIMG_OK;
}

int gimg_cost_merge_gpu(gimg_cost_table *t, const gimg_cost_gpu_measure *m)
{
    int changed = 0;
    /* A first start that compiled PTX for the card takes minutes: not a
     * start-up to expect again. */
    if (m->cuda_start_ms >= 1 && m->cuda_start_ms <= 5000) {
        t->cuda_start_ms = m->cuda_start_ms;
        changed = 1;
    }
    /* Jobs too small to time (launch overhead) are left out: from 100 M
     * FMAs, 4 MB. */
    for (int op = 0; op < 4; op++) {
        const double min_work = op == GIMG_COST_CONV ? 1e8 : 4e6;
        if (m->work[op] < min_work || m->kernel_ms[op] <= 0)
            continue;
        const double rate = m->work[op] / m->kernel_ms[op];
        double *to = (double *)((char *)t + k_gpu_rate[op]);
        if (rate >= 1e3 && rate <= 1e14) {
            *to = rate;
            changed = 1;
        }
    }
    if (m->transfer_bytes >= 4e6 && m->transfer_ms > 0) {
        const double per_byte = m->transfer_ms / m->transfer_bytes;
        if (per_byte >= 1e-11 && per_byte <= 1e-4) {
            t->gpu_transfer_ms_per_byte = per_byte;
            changed = 1;
        }
    }
    return changed;
}

/* ------------------------------------------------------ this process's */

static pthread_once_t g_once = PTHREAD_ONCE_INIT, g_auto_once = PTHREAD_ONCE_INIT;
static gimg_cost_table g_table, g_auto_table;  /* written once, by the onces */
static int g_has;                    /* what the cache held */
static int g_cache;                  /* the cache is read and written */
static int g_injected;               /* GIMG_COST_TABLE named a file (good or not) */
static char g_path[PATH_MAX], g_identity[512], g_gpu_name[256];
static char g_source[PATH_MAX + 600], g_auto_source[sizeof g_source];
static atomic_int g_auto_done;

/* The onces keep the calling thread's error message: a choice of device
 * happens between an operation's failure and its report. */
typedef struct { char message[512]; } saved_error;
static void save_error(saved_error *s)
{
    snprintf(s->message, sizeof s->message, "%s", gimg_last_error());
}
static void restore_error(const saved_error *s) { gimg_fail(GIMG_OK, "%s", s->message); }

static void load_once(void)
{
    saved_error e;
    save_error(&e);
    gimg_cost_defaults(&g_table);
    snprintf(g_source, sizeof g_source, "the built-in defaults");
    const char *file = getenv("GIMG_COST_TABLE");
    const char *cache = getenv("GIMG_COST_CACHE");
    if (file && *file) {
        g_injected = 1;
        gimg_cost_table t = g_table;
        if (gimg_cost_load(file, &t) == GIMG_OK) {
            g_table = t;
            snprintf(g_source, sizeof g_source, "GIMG_COST_TABLE %s", file);
        } else {
            snprintf(g_source, sizeof g_source,
                     "GIMG_COST_TABLE refused (%s): the built-in defaults instead",
                     gimg_last_error());
        }
    } else if (cache && !strcmp(cache, "off")) {
        snprintf(g_source, sizeof g_source, "the built-in defaults (GIMG_COST_CACHE=off)");
    } else if (gimg_cost_cache_path(g_path, sizeof g_path) == GIMG_OK) {
        g_cache = 1;
        gimg_cost_identity(g_identity, sizeof g_identity);
        g_has = gimg_cost_cache_read(g_path, g_identity, &g_table, g_gpu_name, sizeof g_gpu_name);
        if (g_has)
            snprintf(g_source, sizeof g_source, "measured on this machine (%s%s), cached in %s",
                     g_has & GIMG_COST_HAS_CPU ? "CPU" : "",
                     g_has == (GIMG_COST_HAS_CPU | GIMG_COST_HAS_GPU) ? " and GPU"
                     : g_has & GIMG_COST_HAS_GPU ? "GPU" : "",
                     g_path);
    }
    restore_error(&e);
}

const gimg_cost_table *gimg_cost_get(void)
{
    pthread_once(&g_once, load_once);
    return &g_table;
}

static void auto_once(void)
{
    gimg_cost_get();
    saved_error e;
    save_error(&e);
    g_auto_table = g_table;
    snprintf(g_auto_source, sizeof g_auto_source, "%s", g_source);
    /* Without CUDA auto has no GPU of its own to weigh (a server's, at
     * most): no calibration, so that CPU-only runs never pay for it. */
    if (!g_injected && !(g_has & GIMG_COST_HAS_CPU) && gimg_built_with_cuda()) {
        gimg_cost_table t = g_auto_table;
        if (gimg_cost_calibrate_cpu(&t) == GIMG_OK) {
            g_auto_table = t;
            int written = g_cache && gimg_cost_cache_write(g_path, g_identity, &t,
                                                           g_has | GIMG_COST_HAS_CPU,
                                                           g_gpu_name) == GIMG_OK;
            snprintf(g_auto_source, sizeof g_auto_source, "the CPU measured now%s%s%s",
                     written ? ", cached in " : g_cache ? " (the cache could not be written)" : "",
                     written ? g_path : "", g_has & GIMG_COST_HAS_GPU ? "; the GPU's cached" : "");
        }
    }
    atomic_store(&g_auto_done, 1);
    restore_error(&e);
}

const gimg_cost_table *gimg_cost_for_auto(void)
{
    pthread_once(&g_auto_once, auto_once);
    return &g_auto_table;
}

const char *gimg_cost_source(void)
{
    return atomic_load(&g_auto_done) ? g_auto_source : g_source;
}

void gimg_cost_record_gpu(const gimg_cost_gpu_measure *m, const char *gpu_name)
{
    gimg_cost_get();
    if (!g_cache || !gpu_name || !*gpu_name)
        return;
    saved_error e;
    save_error(&e);
    /* The cache as it is now (another process may have written it). */
    gimg_cost_table t;
    gimg_cost_defaults(&t);
    char cached_gpu[sizeof g_gpu_name] = "";
    int has = gimg_cost_cache_read(g_path, g_identity, &t, cached_gpu, sizeof cached_gpu);
    if ((has & GIMG_COST_HAS_GPU) && strcmp(cached_gpu, gpu_name)) {
        /* Another GPU's figures: this one's start from the defaults. */
        gimg_cost_table d;
        gimg_cost_defaults(&d);
        for (size_t k = 0; k < N_KEYS; k++)
            if (k_keys[k].measured == GIMG_COST_HAS_GPU)
                *field(&t, k) = *field(&d, k);
    }
    if (gimg_cost_merge_gpu(&t, m))
        gimg_cost_cache_write(g_path, g_identity, &t, has | GIMG_COST_HAS_GPU, gpu_name);
    restore_error(&e);
}
