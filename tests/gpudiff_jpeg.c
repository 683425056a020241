/*
 * gpudiff_jpeg — the GPU codecs (lib/gpu_jpeg.c, nvJPEG) against
 * libjpeg-turbo, on photo-like JPEGs made here by our CPU encoder:
 *  - decoding: every subsampling the GPU takes (4:4:4, 4:2:2, 4:2:0,
 *    gray) at odd sizes (1x1, 17x9, 4097x3, 333x251) and photo sizes,
 *    into a device buffer poisoned first; the largest difference and the
 *    PSNR against libjpeg-turbo's decoding of the same file must hold the
 *    bound gimg(7) promises (GIMG_GPU_JPEG_MAX_DIFF, _MIN_PSNR below);
 *  - encoding: the GPU's file, decoded by libjpeg-turbo, against the
 *    image it was made from, as close as our CPU encoder's file at the
 *    same quality and subsampling (PSNR within GIMG_GPU_JPEG_ENCODE_DB);
 *  - damaged files: scan data overwritten (nvJPEG may refuse them or
 *    decode them; it must not fault: compute-sanitizer runs this).
 * It prints the figures it measured. Skips (77) without a GPU or nvJPEG.
 *
 *   gpudiff_jpeg [--small | --time]   --small: sizes for compute-sanitizer
 *                                     runs; --time: times decode and encode
 */
#include "gimg.h"
#include "gpu_internal.h"
#include "gpu_jpeg.h"
#include "jpeg_internal.h"
#include "nvjpeg_api.h"
#include "testimg.h"
#include "check.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

/* The promise (gimg(7), "GPU codecs"): a JPEG decoded on the GPU differs
 * from libjpeg-turbo's decoding of it by at most this much per sample,
 * with a PSNR of at least this (dB) over the image. Measured on an H100
 * (nvJPEG 13.0, hardware decoder, chroma upsampled by interpolation):
 * 4:4:4 and gray identical, 4:2:2 and 4:2:0 at most 1 apart (the
 * upsampling's rounding), 86 dB; without the interpolation flag 4:2:0
 * was 48 apart at colour edges, 34 dB. The bound leaves one step of
 * rounding more than measured. */
#define GIMG_GPU_JPEG_MAX_DIFF 2
#define GIMG_GPU_JPEG_MIN_PSNR 60.0
/* The GPU's encoder's file is at most this many dB further from the image
 * than our CPU encoder's at the same quality and subsampling. */
#define GIMG_GPU_JPEG_ENCODE_DB 1.0

static int g_small;
static gimg_gpu *g_gpu;

/* Largest difference and PSNR (255 peak) between two 8-bit images of one
 * layout; PSNR is INFINITY when they are equal. */
static void differ(const gimg_image *a, const gimg_image *b, int *max_diff, double *psnr)
{
    double sq = 0;
    int worst = 0;
    const size_t n = (size_t)a->width * a->channels;
    for (int y = 0; y < a->height; y++) {
        const unsigned char *p = gimg_row(a, y), *q = gimg_row(b, y);
        for (size_t i = 0; i < n; i++) {
            const int d = abs((int)p[i] - (int)q[i]);
            worst = d > worst ? d : worst;
            sq += (double)d * d;
        }
    }
    const double mse = sq / ((double)n * a->height);
    *max_diff = worst;
    *psnr = mse > 0 ? 10 * log10(255.0 * 255.0 / mse) : INFINITY;
}

/* Our CPU encoder's JPEG of a photo-like image (gray when channels is 1). */
static int photo_jpeg(int w, int h, int channels, gimg_subsampling sub, int quality,
                      uint64_t seed, gimg_image *im, unsigned char **buf, size_t *len)
{
    if (gimg_image_alloc(im, w, h, channels, GIMG_U8) != GIMG_OK || !testimg_fill_photo(im, seed))
        return 0;
    gimg_write_opts o;
    gimg_write_opts_init(&o);
    o.quality = quality;
    o.jpeg_subsampling = sub;
    return gimg_encode(im, GIMG_FMT_JPEG, &o, buf, len) == GIMG_OK;
}

/* The GPU's decoding of a JPEG, downloaded into *out (allocated here),
 * its device buffer poisoned first. */
static gimg_status gpu_decode(const unsigned char *buf, size_t len, gimg_image *out)
{
    gimg_image shell;
    gimg_jpeg_facts facts;
    gimg_status st = gimg_jpeg_read_header(buf, len, &shell, &facts);
    if (st)
        return st;
    if (facts.gpu_refusal) {
        gimg_image_free(&shell);
        return gimg_fail(GIMG_E_FORMAT, "not for the GPU: %s", facts.gpu_refusal);
    }
    gimg_dimage d;
    if (!(st = gimg_gpu_image(g_gpu, GIMG_GPU_SLOT_DECODED, shell.width, shell.height,
                              shell.channels, GIMG_U8, &d))) {
        GIMG_CUDA(cudaMemsetAsync(d.d_data, 0xA5, d.pitch_bytes * (size_t)d.height, g_gpu->stream));
        st = gimg_gpu_jpeg_decode(g_gpu, buf, len, shell.width, shell.height, shell.channels, 1,
                                  &d);
    }
    if (!st && !(st = gimg_image_alloc(out, shell.width, shell.height, shell.channels, GIMG_U8))) {
        memset(out->data, 0x5A, out->stride_bytes * (size_t)out->height);
        st = gimg_gpu_download(g_gpu, &d, out);
    }
    gimg_image_free(&shell);
    return st;
}

/* Every subsampling the GPU decodes. */
static const struct {
    const char *name;
    int channels;
    gimg_subsampling sub;
} kinds[] = {{"4:4:4", 3, GIMG_SUBSAMPLE_444},
             {"4:2:2", 3, GIMG_SUBSAMPLE_422},
             {"4:2:0", 3, GIMG_SUBSAMPLE_420},
             {"gray", 1, GIMG_SUBSAMPLE_AUTO}};

static void test_decode_bound(void)
{
    static const int sizes[][2] = {{1, 1}, {17, 9}, {4097, 3}, {333, 251}, {1200, 850},
                                   {3000, 2000}};
    const int n_sizes = g_small ? 4 : (int)(sizeof sizes / sizeof sizes[0]);
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        int worst_diff = 0;
        double worst_psnr = INFINITY;
        for (int s = 0; s < n_sizes; s++) {
            const int w = sizes[s][0], h = sizes[s][1];
            gimg_image im, cpu, gpu;
            unsigned char *buf = NULL;
            size_t len = 0;
            CHECK(photo_jpeg(w, h, kinds[k].channels, kinds[k].sub, 90, (uint64_t)w * 31 + h, &im,
                             &buf, &len),
                  "making the file");
            CHECK(gimg_decode_memory(buf, len, &cpu) == GIMG_OK, "%s", gimg_last_error());
            gimg_status st = gpu_decode(buf, len, &gpu);
            CHECK(st == GIMG_OK, "%s %dx%d: %s", kinds[k].name, w, h, gimg_last_error());
            if (!st) {
                int diff;
                double psnr;
                differ(&cpu, &gpu, &diff, &psnr);
                CHECK(diff <= GIMG_GPU_JPEG_MAX_DIFF && psnr >= GIMG_GPU_JPEG_MIN_PSNR,
                      "%s %dx%d: largest difference %d, PSNR %.2f dB", kinds[k].name, w, h, diff,
                      psnr);
                worst_diff = diff > worst_diff ? diff : worst_diff;
                worst_psnr = psnr < worst_psnr ? psnr : worst_psnr;
                gimg_image_free(&gpu);
            }
            gimg_image_free(&cpu);
            gimg_image_free(&im);
            free(buf);
        }
        printf("  decode %s: largest difference %d, lowest PSNR %.2f dB against libjpeg-turbo "
               "(bound %d, %.1f dB)\n",
               kinds[k].name, worst_diff, worst_psnr, GIMG_GPU_JPEG_MAX_DIFF,
               GIMG_GPU_JPEG_MIN_PSNR);
    }
}

/* A large image in strips (gpu_jpeg.c) against the same file decoded
 * whole on the GPU: the same bytes, the overlapping strips of 4:2:0
 * included; and within the bound of libjpeg-turbo's decoding. */
static void test_decode_strips(void)
{
    const int w = g_small ? 2100 : 4099, h = g_small ? 1905 : 1201;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        gimg_image im, whole, strips, cpu;
        unsigned char *buf = NULL;
        size_t len = 0;
        CHECK(photo_jpeg(w, h, kinds[k].channels, kinds[k].sub, 90, 7 + k, &im, &buf, &len),
              "making the file");
        gimg_jpeg_strips p;
        CHECK(gimg_jpeg_strips_plan(buf, len, &p) && p.steps >= 8, "%s: our file has no cuts",
              kinds[k].name);
        gimg_jpeg_strips_free(&p);
        gimg_gpu_jpeg_set_strip_min_pixels(UINT64_MAX);
        gimg_status st = gpu_decode(buf, len, &whole);
        gimg_gpu_jpeg_set_strip_min_pixels(1000000);
        gimg_status st2 = gpu_decode(buf, len, &strips);
        CHECK(!st && !st2, "%s: %s", kinds[k].name, gimg_last_error());
        if (!st && !st2) {
            int diff;
            double psnr;
            differ(&whole, &strips, &diff, &psnr);
            CHECK(diff == 0, "%s %dx%d: strips differ from the whole by %d (%.2f dB)",
                  kinds[k].name, w, h, diff, psnr);
            if (gimg_decode_memory(buf, len, &cpu) == GIMG_OK) {
                differ(&cpu, &strips, &diff, &psnr);
                CHECK(diff <= GIMG_GPU_JPEG_MAX_DIFF && psnr >= GIMG_GPU_JPEG_MIN_PSNR,
                      "%s: strips against libjpeg-turbo: %d, %.2f dB", kinds[k].name, diff, psnr);
                gimg_image_free(&cpu);
            }
        }
        if (!st)
            gimg_image_free(&whole);
        if (!st2)
            gimg_image_free(&strips);
        gimg_gpu_jpeg_set_strip_min_pixels(0);
        gimg_image_free(&im);
        free(buf);
    }
}

static void test_encode_round_trip(void)
{
    static const struct {
        int channels, quality;
        gimg_subsampling sub;
    } cases[] = {{3, 90, GIMG_SUBSAMPLE_444},
                 {3, 75, GIMG_SUBSAMPLE_420},
                 {3, 85, GIMG_SUBSAMPLE_422},
                 {1, 90, GIMG_SUBSAMPLE_AUTO}};
    const int w = g_small ? 77 : 1200, h = g_small ? 45 : 850;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        gimg_image im, from_cpu, from_gpu;
        unsigned char *cpu_buf = NULL, *gpu_buf = NULL;
        size_t cpu_len = 0, gpu_len = 0;
        CHECK(photo_jpeg(w, h, cases[c].channels, cases[c].sub, cases[c].quality, c + 5, &im,
                         &cpu_buf, &cpu_len));
        gimg_write_opts o;
        gimg_write_opts_init(&o);
        o.quality = cases[c].quality;
        o.jpeg_subsampling = cases[c].sub;
        gimg_dimage d;
        gimg_status st = gimg_gpu_image(g_gpu, 0, w, h, cases[c].channels, GIMG_U8, &d);
        if (!st)
            st = gimg_gpu_upload(g_gpu, &im, &d);
        if (!st)
            st = gimg_gpu_jpeg_encode(g_gpu, &d, o.quality, gimg_jpeg_subsampling(&o), &gpu_buf,
                                      &gpu_len);
        CHECK(st == GIMG_OK, "encode: %s", gimg_last_error());
        if (!st && gimg_decode_memory(cpu_buf, cpu_len, &from_cpu) == GIMG_OK) {
            st = gimg_decode_memory(gpu_buf, gpu_len, &from_gpu);
            CHECK(st == GIMG_OK, "libjpeg-turbo reads the GPU's file: %s", gimg_last_error());
            if (!st) {
                int d_cpu, d_gpu;
                double p_cpu, p_gpu;
                differ(&im, &from_cpu, &d_cpu, &p_cpu);
                differ(&im, &from_gpu, &d_gpu, &p_gpu);
                CHECK(from_gpu.width == w && from_gpu.height == h &&
                          from_gpu.channels == cases[c].channels,
                      "layout");
                CHECK(p_gpu >= p_cpu - GIMG_GPU_JPEG_ENCODE_DB, "PSNR %.2f dB, the CPU's %.2f",
                      p_gpu, p_cpu);
                printf("  encode %d channels q%d: GPU %.2f dB %zu bytes, CPU %.2f dB %zu bytes\n",
                       cases[c].channels, cases[c].quality, p_gpu, gpu_len, p_cpu, cpu_len);
                gimg_image_free(&from_gpu);
            }
            gimg_image_free(&from_cpu);
        }
        gimg_image_free(&im);
        free(cpu_buf);
        free(gpu_buf);
    }
}

/* Scan data overwritten with noise (the markers left whole, so the
 * header check passes): nvJPEG decodes garbage or refuses; no fault. */
static void test_damaged(void)
{
    gimg_image im, out;
    unsigned char *buf = NULL;
    size_t len = 0;
    CHECK(photo_jpeg(160, 120, 3, GIMG_SUBSAMPLE_420, 90, 99, &im, &buf, &len));
    uint64_t state = 5;
    int refused = 0, decoded = 0;
    for (int trial = 0; trial < (g_small ? 3 : 20); trial++) {
        unsigned char *bad = malloc(len);
        memcpy(bad, buf, len);
        for (size_t i = len / 2; i < len - 2; i++) /* past the header, before EOI */
            if (testimg_next(&state) % 4 == 0) {
                bad[i] = (unsigned char)testimg_next(&state);
                if (bad[i] == 0xFF)
                    bad[i] = 0x7F; /* no new markers */
            }
        gimg_status st = gpu_decode(bad, len, &out);
        if (st) {
            refused++;
        } else {
            decoded++;
            gimg_image_free(&out);
        }
        CHECK(st == GIMG_OK || st == GIMG_E_FORMAT, "status %d: %s", st, gimg_last_error());
        free(bad);
    }
    /* The lane still works afterwards. */
    CHECK(gpu_decode(buf, len, &out) == GIMG_OK, "after damaged files: %s", gimg_last_error());
    gimg_image_free(&out);
    printf("  damaged files: %d refused, %d decoded\n", refused, decoded);
    gimg_image_free(&im);
    free(buf);
}

/* --time: milliseconds a decode and an encode take on one lane (the
 * median of 15 after a warm-up; the stream synchronised after each, as
 * the batch does), at the batch benchmark's sizes. */
static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int by_value(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void time_codecs(void)
{
    /* Sizes, subsampling, and whether a large image is decoded in strips. */
    static const struct {
        int w, h, css, strips;
    } cases[] = {{1200, 850, GIMG_NVJPEG_CSS_420, 1},
                 {4096, 4096, GIMG_NVJPEG_CSS_420, 0},
                 {4096, 4096, GIMG_NVJPEG_CSS_420, 1},
                 {4096, 4096, GIMG_NVJPEG_CSS_444, 0},
                 {4096, 4096, GIMG_NVJPEG_CSS_444, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int w = cases[c].w, h = cases[c].h;
        const int css = cases[c].css;
        gimg_image im, shell;
        unsigned char *buf = NULL, *out = NULL;
        size_t len = 0, out_len = 0;
        gimg_jpeg_facts facts;
        gimg_dimage d;
        double dec[16], enc[16];
        if (!photo_jpeg(w, h, 3, css == GIMG_NVJPEG_CSS_420 ? GIMG_SUBSAMPLE_420 : GIMG_SUBSAMPLE_444,
                        90, 3, &im, &buf, &len) ||
            gimg_jpeg_read_header(buf, len, &shell, &facts) || facts.gpu_refusal)
            return;
        gimg_gpu_jpeg_set_strip_min_pixels(cases[c].strips ? 0 : UINT64_MAX);
        for (int r = 0; r < 16; r++) {
            double t0 = now_ms();
            if (gimg_gpu_jpeg_decode(g_gpu, buf, len, w, h, 3, 1, &d) ||
                cudaStreamSynchronize(g_gpu->stream))
                return;
            double t1 = now_ms();
            if (gimg_gpu_jpeg_encode(g_gpu, &d, 90, css, &out, &out_len))
                return;
            dec[r] = t1 - t0;
            enc[r] = now_ms() - t1;
            free(out);
        }
        gimg_gpu_jpeg_set_strip_min_pixels(0);
        qsort(dec + 1, 15, sizeof *dec, by_value);
        qsort(enc + 1, 15, sizeof *enc, by_value);
        printf("  time %dx%d %s q90 (%zu bytes)%s: decode %.3f ms, encode %.3f ms (median of "
               "15)\n", w, h, css == GIMG_NVJPEG_CSS_420 ? "4:2:0" : "4:4:4", len,
               w * h < 4000000 ? "" : cases[c].strips ? ", in strips" : ", whole", dec[8], enc[8]);
        gimg_image_free(&shell);
        gimg_image_free(&im);
        free(buf);
    }
}

/* --time, then: images/s of decode + encode on 1, 2, 4, 8 and 16 lanes of
 * the GPU at once (a thread each, sharing the hardware decoder), the
 * codecs' ceiling for the batch. */
typedef struct {
    gimg_gpu *g;
    const unsigned char *buf;
    size_t len;
    int w, h, rounds;
    gimg_status st;
} lane_job;

static void *lane_loop(void *arg)
{
    lane_job *l = arg;
    gimg_dimage d;
    for (int r = 0; r < l->rounds && !l->st; r++) {
        unsigned char *out = NULL;
        size_t out_len = 0;
        if (!(l->st = gimg_gpu_bind(l->g)) &&
            !(l->st = gimg_gpu_jpeg_decode(l->g, l->buf, l->len, l->w, l->h, 3, 0, &d)))
            l->st = gimg_gpu_jpeg_encode(l->g, &d, 90, GIMG_NVJPEG_CSS_420, &out, &out_len);
        free(out);
    }
    return NULL;
}

static void time_lanes(void)
{
    static const int sizes[][2] = {{1200, 850}, {4096, 4096}};
    gimg_gpu *lanes[16] = {NULL};
    for (int l = 0; l < 16; l++)
        if (gimg_gpu_open(0, &lanes[l]))
            return;
    if (gimg_gpu_jpeg_open(lanes, 16))
        return;
    for (int s = 0; s < 2; s++) {
        const int w = sizes[s][0], h = sizes[s][1], rounds = s ? 12 : 100;
        gimg_image im, shell;
        unsigned char *buf = NULL;
        size_t len = 0;
        gimg_jpeg_facts facts;
        if (!photo_jpeg(w, h, 3, GIMG_SUBSAMPLE_420, 90, 3, &im, &buf, &len) ||
            gimg_jpeg_read_header(buf, len, &shell, &facts) || facts.gpu_refusal)
            return;
        for (int n = 1; n <= 16; n *= 2) {
            pthread_t t[16];
            lane_job jobs[16];
            double t0 = now_ms();
            for (int l = 0; l < n; l++) {
                jobs[l] = (lane_job){lanes[l], buf, len, w, h, rounds, GIMG_OK};
                pthread_create(&t[l], NULL, lane_loop, &jobs[l]);
            }
            for (int l = 0; l < n; l++)
                pthread_join(t[l], NULL);
            const double ms = now_ms() - t0;
            printf("  lanes %d, %dx%d: decode + encode %.0f images/s%s\n", n, w, h,
                   n * rounds * 1000.0 / ms, jobs[0].st ? " (failed)" : "");
        }
        gimg_image_free(&shell);
        gimg_image_free(&im);
        free(buf);
    }
    for (int l = 15; l >= 0; l--)
        gimg_gpu_close(lanes[l]);
}

int main(int argc, char **argv)
{
    g_small = argc > 1 && !strcmp(argv[1], "--small");
    const int timing = argc > 1 && !strcmp(argv[1], "--time");
    if (gimg_gpu_open(0, &g_gpu) != GIMG_OK) {
        printf("SKIP: gpudiff_jpeg: %s\n", gimg_last_error());
        return 77;
    }
    if (gimg_gpu_jpeg_open(&g_gpu, 1) != GIMG_OK) {
        printf("SKIP: gpudiff_jpeg: %s\n", gimg_last_error());
        gimg_gpu_close(g_gpu);
        return 77;
    }
    int hardware = 0, calls, images;
    gimg_gpu_jpeg_ready(g_gpu, &hardware, &calls, &images);
    printf("  %s, %s\n", gimg_nvjpeg_version(), hardware ? "hardware decoder" : "CUDA decoder");
    if (timing) {
        time_codecs();
        time_lanes();
        gimg_gpu_close(g_gpu);
        return 0;
    }
    RUN(test_decode_bound);
    RUN(test_decode_strips);
    RUN(test_encode_round_trip);
    RUN(test_damaged);
    gimg_gpu_close(g_gpu);
    return check_summary();
}
