/*
 * gpudiff_transfer — the transfers of every GPU operation (lib/gpu.c): an
 * image uploaded and downloaded again through the lane's pinned staging
 * ring must come back byte for byte.
 *
 * The sizes reach every case of the ring: one chunk, a last chunk shorter
 * than the rest, more chunks than the ring holds (its entries reused), rows
 * wider than a chunk (one row a chunk), and host rows at a stride wider
 * than the row. The device buffer and the host output are poisoned before
 * each round, so a chunk not copied shows up; each size runs twice, so the
 * ring's reuse from one image to the next is covered too.
 *
 *   gpudiff_transfer [--small]     --small: sizes for compute-sanitizer runs
 */
#include "gimg.h"
#include "gpu_internal.h"
#include "testimg.h"
#include "check.h"

#include <stdlib.h>

static int g_small;
static gimg_gpu *g_gpu;

/* An image whose rows lie stride_extra bytes apart beyond their width. */
static gimg_status alloc_strided(gimg_image *im, int w, int h, int c, gimg_sample t,
                                 size_t stride_extra)
{
    memset(im, 0, sizeof *im);
    im->width = w, im->height = h, im->channels = c, im->sample = t;
    im->stride_bytes = (size_t)w * c * t + stride_extra;
    im->data = malloc(im->stride_bytes * (size_t)h);
    return im->data ? GIMG_OK : gimg_fail(GIMG_E_NOMEM, "out of memory");
}

static void round_trip(int w, int h, int c, gimg_sample t, size_t stride_extra, int slot)
{
    gimg_image in, out;
    if (alloc_strided(&in, w, h, c, t, stride_extra) ||
        alloc_strided(&out, w, h, c, t, stride_extra)) {
        CHECK(0, "alloc %dx%d", w, h);
        free(in.data);
        return;
    }
    testimg_fill_random(&in, (uint64_t)w * 31 + h);
    const size_t row = (size_t)w * c * t;
    for (int pass = 0; pass < 2; pass++) {
        gimg_dimage d;
        gimg_status st = gimg_gpu_image(g_gpu, slot, w, h, c, t, &d);
        CHECK(st == GIMG_OK, "%dx%d: %s", w, h, gimg_last_error());
        if (st)
            break;
        cudaMemsetAsync(d.d_data, 0xA5, d.pitch_bytes * (size_t)h, g_gpu->stream);
        memset(out.data, 0x5A, out.stride_bytes * (size_t)h);
        st = gimg_gpu_upload(g_gpu, &in, &d);
        /* The upload took its copy: changing the source must not matter. */
        unsigned char saved = in.data[0];
        in.data[0] ^= 0xFF;
        if (!st)
            st = gimg_gpu_download(g_gpu, &d, &out);
        in.data[0] = saved;
        CHECK(st == GIMG_OK, "%dx%d: %s", w, h, gimg_last_error());
        int bad = -1;
        for (int y = 0; !st && y < h && bad < 0; y++)
            if (memcmp(gimg_row(&in, y), gimg_row(&out, y), row))
                bad = y;
        CHECK(bad < 0, "%dx%d c%d %d-byte, stride +%zu, slot %d, pass %d: row %d differs", w, h,
              c, (int)t, stride_extra, slot, pass, bad);
    }
    free(in.data);
    free(out.data);
}

static void test_sizes(void)
{
    /* (w, h, channels, sample) and what each reaches, with 2 MiB chunks. */
    const struct { int w, h, c; gimg_sample t; } k_cases[] = {
        {1, 1, 1, GIMG_U8},         /* one chunk of one row */
        {37, 23, 3, GIMG_U8},       /* one chunk */
        {1000, 1500, 3, GIMG_U8},   /* 3 chunks, the last short */
        {2053, 3999, 4, GIMG_U16},  /* 32 chunks: the ring wraps 4 times */
        {600000, 3, 1, GIMG_F32},   /* rows over a chunk: one a chunk */
        {3, 600000, 2, GIMG_U8},    /* tiny rows, many a chunk */
    };
    const size_t n = g_small ? 3 : sizeof k_cases / sizeof *k_cases;
    for (size_t i = 0; i < n; i++)
        for (int slot = 0; slot < 2; slot++) {
            round_trip(k_cases[i].w, k_cases[i].h, k_cases[i].c, k_cases[i].t, 0, slot);
            round_trip(k_cases[i].w, k_cases[i].h, k_cases[i].c, k_cases[i].t, 13, slot);
        }
}

int main(int argc, char **argv)
{
    g_small = argc > 1 && !strcmp(argv[1], "--small");
    if (gimg_gpu_open(0, &g_gpu) != GIMG_OK) {
        printf("SKIP: gpudiff_transfer: %s\n", gimg_last_error());
        return 77;
    }
    RUN(test_sizes);
    gimg_gpu_close(g_gpu);
    return check_summary();
}
