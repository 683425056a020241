/*
 * unit_cost.c — --device auto's cost table (lib/cost.h), without a GPU:
 *  - the built-in figures are the constants measured before (conv.c's and
 *    device.c's), so that auto chooses as it did until a machine measures;
 *  - the file format: a full table, a partial one, comments and unknown
 *    keys; every bad value refused with its line, the table unchanged;
 *  - the choice flips with the table for each operation (convolution with
 *    small and large kernels, statistics, histograms, the symmetries, the
 *    JPEG codecs), and a warm server or an open GPU context (no start-up)
 *    turns a CPU choice into a GPU one; the break-even is where it flips;
 *  - the cache: written atomically, read back, refused when its first line
 *    (version, CPU model, thread count) differs, or when corrupt; the GPU's
 *    figures recorded and replaced for another GPU, implausible ones left
 *    out;
 *  - this process's table (in child processes, since it is read once):
 *    GIMG_COST_TABLE used as given, a broken one replaced by the defaults
 *    and said so, the cache read, GIMG_COST_CACHE=off, and the CPU's
 *    calibration run and cached only by builds with CUDA;
 *  - the calibration measures plausible rates within 50 ms.
 */
#include "check.h"
#include "cost.h"
#include "ctx_internal.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_dir[] = "/tmp/gimg-unit-cost.XXXXXX";
static char g_self[PATH_MAX];

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static char *read_text(const char *path)
{
    static char buf[8192];
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static int same_table(const gimg_cost_table *a, const gimg_cost_table *b)
{
    return !memcmp(a, b, sizeof *a);
}

/* ---------------------------------------------------------- defaults */

static void test_defaults_are_the_measured_constants(void)
{
    gimg_cost_table t;
    gimg_cost_defaults(&t);
    CHECK(t.conv_cpu_fmas_per_ms_per_thread == 1e7 && t.conv_gpu_fmas_per_ms == 1e10);
    CHECK(fabs(2 * t.gpu_transfer_ms_per_byte - 3.0 / 50.3e6) < 1e-15, "up and down: 3 ms per 50.3 MB");
    CHECK(t.cuda_start_ms == 350, "issue 31: 300-400 ms a process; %g", t.cuda_start_ms);
    CHECK(t.cuda_start_ms + t.nvjpeg_start_ms == 1000, "CUDA and nvJPEG: a second");
    CHECK(t.jpeg_cpu_ms_per_mp == 29 && t.jpeg_gpu_ms_per_mp == 0.45);
    /* Every figure usable: rates above 0. */
    const double *v = (const double *)&t;
    for (size_t i = 0; i < sizeof t / sizeof *v; i++)
        CHECK(isfinite(v[i]) && v[i] > 0, "figure %zu: %g", i, v[i]);
    /* Statistics, histograms and symmetries stay on the CPU for images of
     * common sizes on 16 threads (CUDA's start-up is more than they save). */
    const size_t big = (size_t)16384 * 16384 * 3;
    static const gimg_cost_op passes[] = {GIMG_COST_STATS, GIMG_COST_HIST, GIMG_COST_ORIENT};
    for (size_t i = 0; i < sizeof passes / sizeof passes[0]; i++) {
        const gimg_cost_job job = {.op = passes[i], .bytes = big, .threads = 16};
        const gimg_cost_prediction p = gimg_cost_predict(&t, &job, GIMG_GPU_COLD);
        CHECK(p.cpu_ms < p.gpu_ms, "op %d: %g %g", (int)passes[i], p.cpu_ms, p.gpu_ms);
    }
}

/* ------------------------------------------------------------ format */

static void test_parse_full_table(void)
{
    gimg_cost_table t;
    gimg_cost_defaults(&t);
    const char *text =
        "# a table for a test\n"
        "\n"
        "conv_cpu_fmas_per_ms_per_thread 2.5e7\n"
        "stats_cpu_bytes_per_ms_per_thread 1000   # a comment after\n"
        "hist_cpu_bytes_per_ms_per_thread\t2000\n"
        "  orient_cpu_bytes_per_ms_per_thread 3000\n"
        "conv_gpu_fmas_per_ms 4e10\n"
        "stats_gpu_bytes_per_ms 5e8\n"
        "hist_gpu_bytes_per_ms 6e8\n"
        "orient_gpu_bytes_per_ms 7e8\n"
        "gpu_transfer_ms_per_byte 1e-8\n"
        "cuda_start_ms 350\n"
        "nvjpeg_start_ms 600\n"
        "jpeg_cpu_ms_per_mp 30\n"
        "jpeg_gpu_ms_per_mp 0.5\n"
        "server_round_trip_ms 0\n"
        "server_ms_per_byte 2e-7";  /* no newline at the end */
    gimg_status st = gimg_cost_parse(text, "t", &t);
    CHECK(st == GIMG_OK, "%s", gimg_last_error());
    CHECK(t.conv_cpu_fmas_per_ms_per_thread == 2.5e7 && t.stats_cpu_bytes_per_ms_per_thread == 1000 &&
          t.hist_cpu_bytes_per_ms_per_thread == 2000 && t.orient_cpu_bytes_per_ms_per_thread == 3000);
    CHECK(t.conv_gpu_fmas_per_ms == 4e10 && t.stats_gpu_bytes_per_ms == 5e8 &&
          t.hist_gpu_bytes_per_ms == 6e8 && t.orient_gpu_bytes_per_ms == 7e8);
    CHECK(t.gpu_transfer_ms_per_byte == 1e-8 && t.cuda_start_ms == 350 && t.nvjpeg_start_ms == 600);
    CHECK(t.jpeg_cpu_ms_per_mp == 30 && t.jpeg_gpu_ms_per_mp == 0.5);
    CHECK(t.server_round_trip_ms == 0 && t.server_ms_per_byte == 2e-7, "times may be 0");
}

static void test_parse_partial_and_unknown_keys(void)
{
    gimg_cost_table t, d;
    gimg_cost_defaults(&t);
    gimg_cost_defaults(&d);
    CHECK(gimg_cost_parse("cuda_start_ms 400\nsome_later_key 12 34\nwarp_speed fast\n", "t", &t) ==
          GIMG_OK, "%s", gimg_last_error());
    CHECK(t.cuda_start_ms == 400);
    d.cuda_start_ms = 400;
    CHECK(same_table(&t, &d), "the keys left out keep their figures");
    CHECK(gimg_cost_parse("", "t", &t) == GIMG_OK && same_table(&t, &d), "an empty table");
}

static void test_parse_bad_values(void)
{
    static const struct { const char *text, *want; } bad[] = {
        {"cuda_start_ms x\n", "t:1: bad value 'x' for cuda_start_ms"},
        {"# c\ncuda_start_ms -1\n", "t:2: bad value '-1'"},
        {"conv_gpu_fmas_per_ms 0\n", "above 0"},
        {"conv_gpu_fmas_per_ms nan\n", "bad value 'nan'"},
        {"conv_gpu_fmas_per_ms inf\n", "bad value 'inf'"},
        {"conv_gpu_fmas_per_ms 1e999\n", "bad value '1e999'"},
        {"conv_gpu_fmas_per_ms 12ms\n", "bad value '12ms'"},
        {"conv_gpu_fmas_per_ms\n", "wants one number"},
        {"conv_gpu_fmas_per_ms 1 2\n", "wants one number"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gimg_cost_table t, d;
        gimg_cost_defaults(&t);
        gimg_cost_defaults(&d);
        gimg_status st = gimg_cost_parse(bad[i].text, "t", &t);
        CHECK(st == GIMG_E_FORMAT, "'%s': %d", bad[i].text, st);
        CHECK(strstr(gimg_last_error(), bad[i].want), "'%s': %s", bad[i].text, gimg_last_error());
        CHECK(same_table(&t, &d), "'%s' changed the table", bad[i].text);
    }
    /* A good line before a bad one is not kept either. */
    gimg_cost_table t, d;
    gimg_cost_defaults(&t);
    gimg_cost_defaults(&d);
    CHECK(gimg_cost_parse("cuda_start_ms 5\nnvjpeg_start_ms ?\n", "t", &t) == GIMG_E_FORMAT);
    CHECK(same_table(&t, &d));
    char long_line[1000];
    memset(long_line, 'a', sizeof long_line - 1);
    long_line[sizeof long_line - 1] = '\0';
    CHECK(gimg_cost_parse(long_line, "t", &t) == GIMG_E_FORMAT && strstr(gimg_last_error(), "too long"));
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/none.cost", g_dir);
    CHECK(gimg_cost_load(path, &t) == GIMG_E_IO && strstr(gimg_last_error(), "none.cost"));
    snprintf(path, sizeof path, "%s/bad.cost", g_dir);
    write_text(path, "cuda_start_ms 5\n\nserver_round_trip_ms -3\n");
    CHECK(gimg_cost_load(path, &t) == GIMG_E_FORMAT && strstr(gimg_last_error(), "bad.cost:3:"),
          "%s", gimg_last_error());
}

/* --------------------------------------------------------- the choice */

/* A table where the CPU is far faster than the GPU, and one where the
 * GPU is, for every operation. */
static void fast_cpu(gimg_cost_table *t)
{
    gimg_cost_defaults(t);
    t->conv_cpu_fmas_per_ms_per_thread = 1e12;
    t->stats_cpu_bytes_per_ms_per_thread = t->hist_cpu_bytes_per_ms_per_thread =
        t->orient_cpu_bytes_per_ms_per_thread = 1e12;
    t->jpeg_cpu_ms_per_mp = 1e-3;
}

static void fast_gpu(gimg_cost_table *t)
{
    gimg_cost_defaults(t);
    t->cuda_start_ms = t->nvjpeg_start_ms = 0;
    t->gpu_transfer_ms_per_byte = 1e-12;
    t->conv_gpu_fmas_per_ms = 1e14;
    t->stats_gpu_bytes_per_ms = t->hist_gpu_bytes_per_ms = t->orient_gpu_bytes_per_ms = 1e12;
    t->conv_cpu_fmas_per_ms_per_thread = 1e5;
    t->stats_cpu_bytes_per_ms_per_thread = t->hist_cpu_bytes_per_ms_per_thread =
        t->orient_cpu_bytes_per_ms_per_thread = 1e3;
}

static void test_choice_follows_the_table(void)
{
    gimg_cost_table cpu, gpu;
    fast_cpu(&cpu);
    fast_gpu(&gpu);
    const size_t bytes = (size_t)4096 * 4096 * 3;
    static const struct { gimg_cost_op op; double fmas_per_byte; const char *name; } jobs[] = {
        {GIMG_COST_CONV, 9, "conv 3x3"},     {GIMG_COST_CONV, 961, "conv 31x31"},
        {GIMG_COST_STATS, 0, "stats"},       {GIMG_COST_HIST, 0, "hist"},
        {GIMG_COST_ORIENT, 0, "orient"},
    };
    for (size_t i = 0; i < sizeof jobs / sizeof jobs[0]; i++)
        for (int threads = 1; threads <= 64; threads *= 4) {
            gimg_cost_job job = {.op = jobs[i].op, .bytes = bytes, .threads = threads,
                                 .fmas_per_byte = jobs[i].fmas_per_byte};
            gimg_cost_prediction p;
            CHECK(!gimg_cost_choose_gpu(&cpu, &job, GIMG_GPU_COLD, &p), "%s, %d threads: %g %g",
                  jobs[i].name, threads, p.cpu_ms, p.gpu_ms);
            CHECK(p.cpu_ms < p.gpu_ms && p.start_ms == cpu.cuda_start_ms, "%s", jobs[i].name);
            CHECK(gimg_cost_choose_gpu(&gpu, &job, GIMG_GPU_COLD, &p), "%s, %d threads: %g %g",
                  jobs[i].name, threads, p.cpu_ms, p.gpu_ms);
            /* A hard limit wins over any table. */
            job.gpu_refused = "too tall";
            CHECK(!gimg_cost_choose_gpu(&gpu, &job, GIMG_GPU_COLD, &p), "%s", jobs[i].name);
            CHECK(gimg_cost_break_even_bytes(&gpu, &job, GIMG_GPU_COLD) == SIZE_MAX);
        }
    /* The JPEG codecs. */
    CHECK(!gimg_auto_gpu_codecs_with(&cpu, 1000, 1));
    CHECK(gimg_auto_gpu_codecs_with(&gpu, 1, 16));
    CHECK(!gimg_auto_gpu_codecs_with(&gpu, 0, 16), "nothing to decode");
    /* The table's predictions are the model's figures. */
    /* 10 FMAs a sample of 2 bytes, on 4 threads. */
    const gimg_cost_job conv = {.op = GIMG_COST_CONV, .bytes = 1000, .fmas_per_byte = 10 / 2.0,
                                .threads = 4};
    gimg_cost_prediction p = gimg_cost_predict(&cpu, &conv, GIMG_GPU_COLD);
    CHECK(fabs(p.cpu_ms - 1000 * 5 / (4 * 1e12)) < 1e-15, "%g", p.cpu_ms);
    p = gimg_cost_predict_jpeg(&cpu, 100, 4, GIMG_GPU_COLD);
    CHECK(fabs(p.gpu_ms - (1000 + 100 * 0.45)) < 1e-9 && p.start_ms == 1000, "%g", p.gpu_ms);
}

/* With the defaults: a dense 31x31 kernel goes to the GPU on one thread,
 * a 3x3 never; the choice flips at the break-even. */
static void test_break_even_is_where_it_flips(void)
{
    gimg_cost_table t;
    gimg_cost_defaults(&t);
    gimg_cost_job job = {.op = GIMG_COST_CONV, .threads = 16, .fmas_per_byte = 961};
    const size_t at = gimg_cost_break_even_bytes(&t, &job, GIMG_GPU_COLD);
    /* Issue 31's case: 4096x4096 RGB (50.3 MB) took 221-248 ms on the CPU
     * and 482-575 ms on the GPU, start-up included: the CPU's. */
    CHECK(at > 50331648 && at < 70000000, "31x31 on 16 threads: from %zu bytes (about 60 MB)", at);
    gimg_cost_prediction p;
    job.bytes = at;
    CHECK(gimg_cost_choose_gpu(&t, &job, GIMG_GPU_COLD, &p), "%g %g", p.cpu_ms, p.gpu_ms);
    job.bytes = at - 1;
    CHECK(!gimg_cost_choose_gpu(&t, &job, GIMG_GPU_COLD, &p), "%g %g", p.cpu_ms, p.gpu_ms);
    job.fmas_per_byte = 9;
    CHECK(gimg_cost_break_even_bytes(&t, &job, GIMG_GPU_COLD) == SIZE_MAX, "3x3: the copies cost more");
    /* gconv's own figure, for a float image (4 bytes a sample). */
    job.fmas_per_byte = 961.0 / 4;
    CHECK(gimg_cost_break_even_bytes(&t, &job, GIMG_GPU_COLD) > at);
    /* The machine: its CPU 1.3x the default, CUDA's start-up 350 ms:
     * the 31x31 kernel over 4096x4096 RGB stays on the CPU. */
    t.conv_cpu_fmas_per_ms_per_thread = 1.29e7;
    t.cuda_start_ms = 350;
    job.fmas_per_byte = 961;
    job.bytes = (size_t)4096 * 4096 * 3;
    CHECK(!gimg_cost_choose_gpu(&t, &job, GIMG_GPU_COLD, &p), "cpu %g, gpu %g", p.cpu_ms, p.gpu_ms);
}

/* The start-up paid (a warm server, or this process's GPU open) turns
 * jobs the CPU would take into the GPU's. */
static void test_start_up_paid_changes_the_choice(void)
{
    gimg_cost_table t;
    gimg_cost_defaults(&t);
    gimg_cost_prediction cold, server, open;
    gimg_cost_job conv = {.op = GIMG_COST_CONV, .bytes = 4u << 20, .threads = 16,
                          .fmas_per_byte = 961};
    CHECK(!gimg_cost_choose_gpu(&t, &conv, GIMG_GPU_COLD, &cold), "%g %g", cold.cpu_ms, cold.gpu_ms);
    CHECK(gimg_cost_choose_gpu(&t, &conv, GIMG_GPU_SERVER, &server), "%g %g", server.cpu_ms,
          server.gpu_ms);
    CHECK(gimg_cost_choose_gpu(&t, &conv, GIMG_GPU_OPEN, &open), "%g %g", open.cpu_ms, open.gpu_ms);
    CHECK(server.start_ms == t.server_round_trip_ms && open.start_ms == 0 &&
          cold.start_ms == t.cuda_start_ms);
    /* The server's way for pixels costs more than this process's copies:
     * a large image through a cheap kernel goes to an open context, not
     * to the server. */
    gimg_cost_job cheap = {.op = GIMG_COST_CONV, .bytes = (size_t)16384 * 16384 * 3,
                           .threads = 16, .fmas_per_byte = 26};
    CHECK(gimg_cost_choose_gpu(&t, &cheap, GIMG_GPU_OPEN, &open));
    CHECK(!gimg_cost_choose_gpu(&t, &cheap, GIMG_GPU_SERVER, &server), "%g %g", server.cpu_ms,
          server.gpu_ms);
    /* A histogram on one thread: the GPU only once started. */
    gimg_cost_job hist = {.op = GIMG_COST_HIST, .bytes = 24u << 20, .threads = 1};
    CHECK(!gimg_cost_choose_gpu(&t, &hist, GIMG_GPU_COLD, &cold));
    CHECK(gimg_cost_choose_gpu(&t, &hist, GIMG_GPU_OPEN, &open));
    /* The codecs: a batch of 30 MP on 16 threads pays a server's round
     * trip, not nvJPEG's start-up. */
    gimg_cost_prediction j_cold = gimg_cost_predict_jpeg(&t, 30, 16, GIMG_GPU_COLD),
                         j_server = gimg_cost_predict_jpeg(&t, 30, 16, GIMG_GPU_SERVER);
    CHECK(j_cold.gpu_ms > j_cold.cpu_ms && j_server.gpu_ms < j_server.cpu_ms, "%g %g %g",
          j_cold.gpu_ms, j_cold.cpu_ms, j_server.gpu_ms);
}

/* ------------------------------------------------------------- cache */

static void cache_path(char *buf, size_t size, const char *sub)
{
    snprintf(buf, size, "%s/%s/gimg/cost", g_dir, sub);
}

static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

/* A batch's images share the start-up: the 4096x4096 RGB through a
 * dense 31x31 kernel on 16 threads is the CPU's alone, the GPU's in a
 * batch of 8 (each image paying an eighth); the share touches only the
 * start-up, and a warm server's or an open context's not at all. */
static void test_batch_shares_the_start_up(void)
{
    gimg_cost_table t;
    gimg_cost_defaults(&t);
    gimg_cost_job one = {.op = GIMG_COST_CONV, .bytes = (size_t)4096 * 4096 * 3, .threads = 16,
                         .fmas_per_byte = 961};
    gimg_cost_job eight = one;
    eight.start_shared_by = 8;
    gimg_cost_prediction a, b;
    CHECK(!gimg_cost_choose_gpu(&t, &one, GIMG_GPU_COLD, &a), "%g %g", a.cpu_ms, a.gpu_ms);
    CHECK(gimg_cost_choose_gpu(&t, &eight, GIMG_GPU_COLD, &b), "%g %g", b.cpu_ms, b.gpu_ms);
    CHECK(b.start_ms == t.cuda_start_ms / 8 && a.cpu_ms == b.cpu_ms &&
              fabs((a.gpu_ms - a.start_ms) - (b.gpu_ms - b.start_ms)) < 1e-9,
          "%g %g %g", b.start_ms, a.gpu_ms, b.gpu_ms);
    for (int start = GIMG_GPU_OPEN; start <= GIMG_GPU_SERVER; start++) {
        a = gimg_cost_predict(&t, &one, (gimg_gpu_start)start);
        b = gimg_cost_predict(&t, &eight, (gimg_gpu_start)start);
        CHECK(a.gpu_ms == b.gpu_ms && a.start_ms == b.start_ms, "start %d", start);
    }
    /* 0 and 1: the image alone. */
    eight.start_shared_by = 0;
    b = gimg_cost_predict(&t, &eight, GIMG_GPU_COLD);
    CHECK(b.start_ms == t.cuda_start_ms);
    /* The break-even falls with the batch. */
    eight.start_shared_by = 8;
    CHECK(gimg_cost_break_even_bytes(&t, &eight, GIMG_GPU_COLD) * 7 <
              gimg_cost_break_even_bytes(&t, &one, GIMG_GPU_COLD),
          "%zu %zu", gimg_cost_break_even_bytes(&t, &eight, GIMG_GPU_COLD),
          gimg_cost_break_even_bytes(&t, &one, GIMG_GPU_COLD));
}

static void test_identity(void)
{
    char id[512];
    gimg_cost_identity(id, sizeof id);
    char want[64];
    snprintf(want, sizeof want, "gimg %s, %ld threads, CPU ", GIMG_VERSION,
             sysconf(_SC_NPROCESSORS_ONLN));
    CHECK(id[0] == '#' && strstr(id, want) && id[strlen(id) - 1] == '\n', "%s", id);
    CHECK(strlen(strstr(id, "CPU ")) > 5, "a CPU model: %s", id);
}

static void test_cache_round_trip_and_invalidation(void)
{
    char path[PATH_MAX], id[512];
    cache_path(path, sizeof path, "c1");
    gimg_cost_identity(id, sizeof id);
    gimg_cost_table t, back, d;
    gimg_cost_defaults(&t);
    gimg_cost_defaults(&d);
    t.conv_cpu_fmas_per_ms_per_thread = 1.25e7;
    t.orient_cpu_bytes_per_ms_per_thread = 777;
    t.cuda_start_ms = 333;
    t.conv_gpu_fmas_per_ms = 3e10;
    t.jpeg_cpu_ms_per_mp = 1;  /* never measured: never cached */
    CHECK(gimg_cost_cache_write(path, id, &t, GIMG_COST_HAS_CPU, NULL) == GIMG_OK, "%s",
          gimg_last_error());
    /* Atomic: the file alone, no temporary left beside it. */
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/c1/gimg", g_dir);
    CHECK(count_files(dir) == 1, "%d files", count_files(dir));
    back = d;
    char gpu[64] = "unchanged";
    CHECK(gimg_cost_cache_read(path, id, &back, gpu, sizeof gpu) == GIMG_COST_HAS_CPU);
    CHECK(back.conv_cpu_fmas_per_ms_per_thread == 1.25e7 && back.orient_cpu_bytes_per_ms_per_thread == 777);
    CHECK(back.cuda_start_ms == d.cuda_start_ms && back.conv_gpu_fmas_per_ms == 1e10 && back.jpeg_cpu_ms_per_mp == 29,
          "only the CPU's section: %g %g", back.cuda_start_ms, back.conv_gpu_fmas_per_ms);
    CHECK(!strcmp(gpu, "unchanged"));
    /* With the GPU's. */
    CHECK(gimg_cost_cache_write(path, id, &t, GIMG_COST_HAS_CPU | GIMG_COST_HAS_GPU,
                                "NVIDIA Test 80GB") == GIMG_OK);
    back = d;
    CHECK(gimg_cost_cache_read(path, id, &back, gpu, sizeof gpu) ==
          (GIMG_COST_HAS_CPU | GIMG_COST_HAS_GPU));
    CHECK(back.cuda_start_ms == 333 && back.conv_gpu_fmas_per_ms == 3e10 && !strcmp(gpu, "NVIDIA Test 80GB"),
          "%g %s", back.cuda_start_ms, gpu);
    CHECK(count_files(dir) == 1);
    /* Written by hand: the GPU's name right under the first line. */
    char text[1024];
    snprintf(text, sizeof text, "%sgpu_name Hand GPU\ncuda_start_ms 99\n", id);
    write_text(path, text);
    back = d;
    CHECK(gimg_cost_cache_read(path, id, &back, gpu, sizeof gpu) == GIMG_COST_HAS_GPU);
    CHECK(!strcmp(gpu, "Hand GPU") && back.cuda_start_ms == 99, "%s %g", gpu, back.cuda_start_ms);
    /* Another version, thread count or CPU: stale, the table unchanged. */
    char other[3][600];
    snprintf(other[0], sizeof other[0], "%s", id);
    char *v = strstr(other[0], GIMG_VERSION);
    if (v)
        v[0] = v[0] == '9' ? '8' : '9';
    snprintf(other[1], sizeof other[1], "# gimg cost cache 1: gimg %s, %ld threads, CPU %s", GIMG_VERSION,
             sysconf(_SC_NPROCESSORS_ONLN) + 1, strstr(id, "CPU ") + 4);
    snprintf(other[2], sizeof other[2], "%.*sCPU Another Processor 9000\n",
             (int)(strstr(id, "CPU ") - id), id);
    for (int i = 0; i < 3; i++) {
        CHECK(strcmp(other[i], id), "%d", i);
        CHECK(gimg_cost_cache_write(path, other[i], &t, GIMG_COST_HAS_CPU, NULL) == GIMG_OK);
        back = d;
        CHECK(gimg_cost_cache_read(path, id, &back, NULL, 0) == 0, "identity %d: %s", i, other[i]);
        CHECK(same_table(&back, &d), "identity %d", i);
    }
    /* A folder that cannot be made: an error, nothing else. */
    char blocked[PATH_MAX];
    snprintf(blocked, sizeof blocked, "%s/file", g_dir);
    write_text(blocked, "x");
    snprintf(path, sizeof path, "%s/file/gimg/cost", g_dir);
    CHECK(gimg_cost_cache_write(path, id, &t, GIMG_COST_HAS_CPU, NULL) == GIMG_E_IO);
}

static void test_corrupt_cache_is_ignored(void)
{
    char path[PATH_MAX], id[512], text[2048];
    cache_path(path, sizeof path, "c2");
    gimg_cost_identity(id, sizeof id);
    gimg_cost_table t, d;
    gimg_cost_defaults(&d);
    gimg_cost_defaults(&t);
    CHECK(gimg_cost_cache_write(path, id, &t, GIMG_COST_HAS_CPU, NULL) == GIMG_OK);
    static const char *const bodies[] = {
        "conv_cpu_fmas_per_ms_per_thread 1e7\nstats_cpu_bytes_per_ms_per_thread garbage\n",
        "conv_cpu_fmas_per_ms_per_thread -5\n",
        "\x01\x02\x03 binary junk \xff\n",
        "conv_cpu_fmas_per_ms_per_thread 3\n",  /* half the CPU's section: not trusted */
        "",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        snprintf(text, sizeof text, "%s%s", id, bodies[i]);
        write_text(path, text);
        t = d;
        CHECK(gimg_cost_cache_read(path, id, &t, NULL, 0) == 0, "body %zu", i);
        CHECK(same_table(&t, &d), "body %zu changed the table", i);
    }
    /* Truncated inside its first line, and a NUL in it. */
    snprintf(text, sizeof text, "%.10s", id);
    write_text(path, text);
    CHECK(gimg_cost_cache_read(path, id, &t, NULL, 0) == 0 && same_table(&t, &d));
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(id, f);
        fputc(0, f);
        fclose(f);
    }
    CHECK(gimg_cost_cache_read(path, id, &t, NULL, 0) == 0 && same_table(&t, &d));
}

static void test_gpu_measures_merge(void)
{
    gimg_cost_table t, d;
    gimg_cost_defaults(&t);
    gimg_cost_defaults(&d);
    gimg_cost_gpu_measure m = {0};
    CHECK(!gimg_cost_merge_gpu(&t, &m) && same_table(&t, &d), "nothing measured");
    m.cuda_start_ms = 120000; /* a first start that compiled PTX */
    m.work[GIMG_COST_CONV] = 1e6; /* too small to time */
    m.kernel_ms[GIMG_COST_CONV] = 0.01;
    CHECK(!gimg_cost_merge_gpu(&t, &m) && same_table(&t, &d), "implausible: left out");
    m.cuda_start_ms = 347;
    m.work[GIMG_COST_CONV] = 4.8e10;
    m.kernel_ms[GIMG_COST_CONV] = 4;
    m.work[GIMG_COST_HIST] = 50e6;
    m.kernel_ms[GIMG_COST_HIST] = 0.25;
    m.transfer_bytes = 100e6;
    m.transfer_ms = 8;
    CHECK(gimg_cost_merge_gpu(&t, &m));
    CHECK(t.cuda_start_ms == 347 && t.conv_gpu_fmas_per_ms == 1.2e10 && t.hist_gpu_bytes_per_ms == 2e8,
          "%g %g %g", t.cuda_start_ms, t.conv_gpu_fmas_per_ms, t.hist_gpu_bytes_per_ms);
    CHECK(fabs(t.gpu_transfer_ms_per_byte - 8e-8) < 1e-20 && t.stats_gpu_bytes_per_ms == d.stats_gpu_bytes_per_ms);
}

/* ------------------------------------------ this process's, in children */

/* Runs this program as a child with `scenario`, in an environment of the
 * given VAR=VALUE pairs (NULL: unset) on top of a clean one; its exit
 * status (0 when its checks passed). */
static int child(const char *scenario, const char *xdg, const char *table, const char *cache)
{
    pid_t pid = fork();
    if (pid == 0) {
        unsetenv("GIMG_COST_TABLE");
        unsetenv("GIMG_COST_CACHE");
        if (xdg)
            setenv("XDG_CACHE_HOME", xdg, 1);
        if (table)
            setenv("GIMG_COST_TABLE", table, 1);
        if (cache)
            setenv("GIMG_COST_CACHE", cache, 1);
        execl(g_self, g_self, "--child", scenario, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The children's checks: exit 0 if all hold, else the failed one's number
 * (its message on stderr). */
#define EXPECT(n, cond, ...)                                                   \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "  child check %d: ", n);                          \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
            return n;                                                          \
        }                                                                      \
    } while (0)

static int child_main(const char *scenario)
{
    gimg_cost_table d;
    gimg_cost_defaults(&d);
    const gimg_cost_table *t = gimg_cost_get();
    const char *source = gimg_cost_source();
    if (!strcmp(scenario, "injected")) {
        EXPECT(1, t->cuda_start_ms == 7 && t->conv_cpu_fmas_per_ms_per_thread == 1e12, "%g", t->cuda_start_ms);
        EXPECT(2, strstr(source, "GIMG_COST_TABLE"), "%s", source);
        EXPECT(3, gimg_cost_for_auto()->cuda_start_ms == 7, "%s", "for auto too");
        EXPECT(4, gimg_cost_for_auto()->conv_cpu_fmas_per_ms_per_thread == 1e12, "%s", "not calibrated");
    } else if (!strcmp(scenario, "broken")) {
        EXPECT(1, same_table(t, &d), "%s", "the defaults");
        EXPECT(2, strstr(source, "refused") && strstr(source, ":2: bad value"), "%s", source);
        EXPECT(3, same_table(gimg_cost_for_auto(), &d), "%s", "for auto too");
    } else if (!strcmp(scenario, "broken-missing")) {
        EXPECT(1, same_table(t, &d), "%s", "the defaults");
        EXPECT(2, strstr(source, "refused") && strstr(source, "missing.cost"), "%s", source);
    } else if (!strcmp(scenario, "cached")) {
        EXPECT(1, t->conv_cpu_fmas_per_ms_per_thread == 123 && t->cuda_start_ms == 456, "%g %g",
               t->conv_cpu_fmas_per_ms_per_thread, t->cuda_start_ms);
        EXPECT(2, strstr(source, "cached in"), "%s", source);
        /* Measured already: no calibration, whatever the build. */
        EXPECT(3, gimg_cost_for_auto()->conv_cpu_fmas_per_ms_per_thread == 123, "%s", "kept");
    } else if (!strcmp(scenario, "off")) {
        EXPECT(1, same_table(t, &d), "%s", "the cache is not read");
        EXPECT(2, strstr(source, "GIMG_COST_CACHE=off"), "%s", source);
        gimg_cost_gpu_measure m = {.cuda_start_ms = 300};
        gimg_cost_record_gpu(&m, "Some GPU");  /* writes nothing */
    } else if (!strcmp(scenario, "calibrate")) {
        /* The cache is stale or missing: a build with CUDA measures the
         * CPU and caches it; a CPU-only build does neither. */
        EXPECT(1, t->conv_cpu_fmas_per_ms_per_thread == d.conv_cpu_fmas_per_ms_per_thread, "%s", "stale");
        const gimg_cost_table *a = gimg_cost_for_auto();
        if (gimg_built_with_cuda()) {
            EXPECT(2, a->conv_cpu_fmas_per_ms_per_thread != d.conv_cpu_fmas_per_ms_per_thread, "%s", "measured");
            EXPECT(3, strstr(gimg_cost_source(), "the CPU measured now, cached in"), "%s", gimg_cost_source());
        } else {
            EXPECT(4, same_table(a, &d), "%s", "a CPU-only build calibrates nothing");
        }
    } else if (!strcmp(scenario, "record")) {
        gimg_cost_gpu_measure m = {.cuda_start_ms = 321};
        gimg_cost_record_gpu(&m, "GPU One");
        m.cuda_start_ms = 0;
        m.work[GIMG_COST_ORIENT] = 1e9;
        m.kernel_ms[GIMG_COST_ORIENT] = 2;
        gimg_cost_record_gpu(&m, "GPU One");
        gimg_cost_record_gpu(&m, NULL);  /* no name: nothing */
    } else if (!strcmp(scenario, "record-other")) {
        gimg_cost_gpu_measure m = {.cuda_start_ms = 111};
        gimg_cost_record_gpu(&m, "GPU Two");
    } else {
        return 99;
    }
    return 0;
}

static void test_process_table_injected(void)
{
    char path[PATH_MAX], xdg[PATH_MAX];
    snprintf(path, sizeof path, "%s/inj.cost", g_dir);
    snprintf(xdg, sizeof xdg, "%s/x-inj", g_dir);
    write_text(path, "# the test's\ncuda_start_ms 7\nconv_cpu_fmas_per_ms_per_thread 1e12\n");
    CHECK(child("injected", xdg, path, NULL) == 0);
    struct stat sb;
    CHECK(stat(xdg, &sb) != 0, "an injected table writes no cache");
    write_text(path, "cuda_start_ms 7\nconv_cpu_fmas_per_ms_per_thread many\n");
    CHECK(child("broken", xdg, path, NULL) == 0);
    snprintf(path, sizeof path, "%s/missing.cost", g_dir);
    CHECK(child("broken-missing", xdg, path, NULL) == 0);
    CHECK(child("off", xdg, NULL, "off") == 0);
    CHECK(stat(xdg, &sb) != 0, "GIMG_COST_CACHE=off writes no cache");
}

static void test_process_table_cached(void)
{
    char xdg[PATH_MAX], path[PATH_MAX], id[512];
    snprintf(xdg, sizeof xdg, "%s/x-cache", g_dir);
    cache_path(path, sizeof path, "x-cache");
    gimg_cost_identity(id, sizeof id);
    gimg_cost_table t;
    gimg_cost_defaults(&t);
    t.conv_cpu_fmas_per_ms_per_thread = 123;
    t.cuda_start_ms = 456;
    CHECK(gimg_cost_cache_write(path, id, &t, GIMG_COST_HAS_CPU | GIMG_COST_HAS_GPU, "G") == GIMG_OK);
    CHECK(child("cached", xdg, NULL, NULL) == 0);
    CHECK(child("off", xdg, NULL, "off") == 0, "the cache there is not read");
    /* Stale (another version): measured again where CUDA is built in. */
    char stale[600];
    snprintf(stale, sizeof stale, "# gimg cost cache 1: gimg 0.0.0-old, 1 threads, CPU old\n");
    CHECK(gimg_cost_cache_write(path, stale, &t, GIMG_COST_HAS_CPU, NULL) == GIMG_OK);
    CHECK(child("calibrate", xdg, NULL, NULL) == 0);
    const char *text = read_text(path);
    CHECK(text != NULL);
    if (text && gimg_built_with_cuda())
        CHECK(!strncmp(text, id, strlen(id)) && strstr(text, "conv_cpu_fmas_per_ms_per_thread"),
              "rewritten: %.200s", text);
    else if (text)
        CHECK(!strncmp(text, stale, strlen(stale)), "left alone: %.200s", text);
}

static void test_process_records_gpu(void)
{
    char xdg[PATH_MAX], path[PATH_MAX], id[512];
    snprintf(xdg, sizeof xdg, "%s/x-gpu", g_dir);
    cache_path(path, sizeof path, "x-gpu");
    gimg_cost_identity(id, sizeof id);
    CHECK(child("record", xdg, NULL, NULL) == 0);
    gimg_cost_table t, d;
    gimg_cost_defaults(&t);
    gimg_cost_defaults(&d);
    char gpu[64] = "";
    CHECK(gimg_cost_cache_read(path, id, &t, gpu, sizeof gpu) == GIMG_COST_HAS_GPU, "%s",
          read_text(path) ? read_text(path) : "no file");
    CHECK(!strcmp(gpu, "GPU One") && t.cuda_start_ms == 321 && t.orient_gpu_bytes_per_ms == 5e8,
          "%s %g %g", gpu, t.cuda_start_ms, t.orient_gpu_bytes_per_ms);
    CHECK(t.conv_cpu_fmas_per_ms_per_thread == d.conv_cpu_fmas_per_ms_per_thread, "no CPU section");
    /* Another GPU: its own figures, the first one's gone. */
    CHECK(child("record-other", xdg, NULL, NULL) == 0);
    gimg_cost_defaults(&t);
    CHECK(gimg_cost_cache_read(path, id, &t, gpu, sizeof gpu) == GIMG_COST_HAS_GPU);
    CHECK(!strcmp(gpu, "GPU Two") && t.cuda_start_ms == 111 &&
              t.orient_gpu_bytes_per_ms == d.orient_gpu_bytes_per_ms,
          "%s %g %g", gpu, t.cuda_start_ms, t.orient_gpu_bytes_per_ms);
}

/* ------------------------------------------------------- calibration */

static void test_calibration(void)
{
    gimg_cost_table t, d;
    gimg_cost_defaults(&t);
    gimg_cost_defaults(&d);
    const int threads = omp_get_max_threads();
    const double t0 = gimg_now_ms();
    gimg_status st = gimg_cost_calibrate_cpu(&t);
    const double ms = gimg_now_ms() - t0;
    CHECK(st == GIMG_OK, "%s", gimg_last_error());
    CHECK(omp_get_max_threads() == threads, "the thread count is given back");
    /* One thread of any machine that runs this: 10 M to 100 G FMAs or
     * bytes a second at least, at most what no core does. */
    CHECK(t.conv_cpu_fmas_per_ms_per_thread > 1e4 && t.conv_cpu_fmas_per_ms_per_thread < 1e9, "%g",
          t.conv_cpu_fmas_per_ms_per_thread);
    const double *rates[] = {&t.stats_cpu_bytes_per_ms_per_thread, &t.hist_cpu_bytes_per_ms_per_thread,
                             &t.orient_cpu_bytes_per_ms_per_thread};
    for (int i = 0; i < 3; i++)
        CHECK(*rates[i] > 1e4 && *rates[i] < 1e9, "pass %d: %g bytes/ms", i, *rates[i]);
    /* Only the CPU's figures. */
    d.conv_cpu_fmas_per_ms_per_thread = t.conv_cpu_fmas_per_ms_per_thread;
    d.stats_cpu_bytes_per_ms_per_thread = t.stats_cpu_bytes_per_ms_per_thread;
    d.hist_cpu_bytes_per_ms_per_thread = t.hist_cpu_bytes_per_ms_per_thread;
    d.orient_cpu_bytes_per_ms_per_thread = t.orient_cpu_bytes_per_ms_per_thread;
    CHECK(same_table(&t, &d));
#if defined(__SANITIZE_ADDRESS__)
    const int timed = 0;
#else
    const int timed = !getenv("GIMG_TEST_SLOW");
#endif
    if (timed)
        CHECK(ms < 50, "the calibration took %.1f ms", ms);
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--child"))
        return child_main(argv[2]);
    ssize_t n = readlink("/proc/self/exe", g_self, sizeof g_self - 1);
    if (n <= 0 || !mkdtemp(g_dir)) {
        printf("FAIL: setup: %s\n", strerror(errno));
        return 1;
    }
    g_self[n] = '\0';
    RUN(test_defaults_are_the_measured_constants);
    RUN(test_parse_full_table);
    RUN(test_parse_partial_and_unknown_keys);
    RUN(test_parse_bad_values);
    RUN(test_choice_follows_the_table);
    RUN(test_break_even_is_where_it_flips);
    RUN(test_start_up_paid_changes_the_choice);
    RUN(test_batch_shares_the_start_up);
    RUN(test_identity);
    RUN(test_cache_round_trip_and_invalidation);
    RUN(test_corrupt_cache_is_ignored);
    RUN(test_gpu_measures_merge);
    RUN(test_process_table_injected);
    RUN(test_process_table_cached);
    RUN(test_process_records_gpu);
    RUN(test_calibration);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
    return check_summary();
}
