/*
 * gpudiff_orient — the symmetries on the GPU against the CPU reference, bit for bit.
 *
 * For every op, pixel layout (1-4 channels x 8/16-bit/float) and an awkward
 * set of sizes, the kernel's output must equal gimg_orient_cpu exactly:
 * transposes move bytes, so there is no rounding to tolerate. The device
 * output buffer is poisoned before every launch, so a pixel the kernel
 * failed to write shows up as a difference, and the host buffer is
 * poisoned before every download. "auto" on an image without metadata is
 * the identity plan (a copy through the same kernel). The last checks run
 * the public gimg_orient() with --device gpu, the path the tools take,
 * auto for every EXIF orientation included.
 *
 *   gpudiff_orient [--small]     --small: sizes for compute-sanitizer runs
 */
#include "gimg.h"
#include "gpu_internal.h"
#include "orient_internal.h"
#include "testimg.h"
#include "transpose.h"
#include "check.h"

#include <stdlib.h>

static int g_small;
static gimg_gpu *g_gpu;

static const gimg_orient_op k_ops[] = {GIMG_ORIENT_TRANSPOSE, GIMG_ORIENT_TRANSVERSE,
                                       GIMG_ORIENT_FLIP,      GIMG_ORIENT_FLOP,
                                       GIMG_ORIENT_ROT90,     GIMG_ORIENT_ROT180,
                                       GIMG_ORIENT_ROT270,    GIMG_ORIENT_AUTO};
static const gimg_sample k_samples[] = {GIMG_U8, GIMG_U16, GIMG_F32};

/* Returns the number of differing rows (0 = identical). */
static int compare(const gimg_image *a, const gimg_image *b)
{
    size_t row = (size_t)a->width * gimg_pixel_bytes(a);
    int bad = 0;
    for (int y = 0; y < a->height; y++)
        bad += memcmp(gimg_row(a, y), gimg_row(b, y), row) != 0;
    return bad;
}

static gimg_status run_kernel(const gimg_image *in, gimg_orient_op op, gimg_image *out)
{
    gimg_orient_plan p = gimg_orient_plan_of(op);
    gimg_dimage d_in, d_out;
    gimg_status st;
    if ((st = gimg_gpu_image(g_gpu, 0, in->width, in->height, in->channels, in->sample, &d_in)) ||
        (st = gimg_gpu_image(g_gpu, 1, out->width, out->height, out->channels, out->sample,
                             &d_out)) ||
        (st = gimg_gpu_upload(g_gpu, in, &d_in)))
        return st;
    GIMG_CUDA(cudaMemsetAsync(d_out.d_data, 0xA5, d_out.pitch_bytes * (size_t)d_out.height,
                              g_gpu->stream));
    GIMG_CUDA(gimg_cuda_orient(d_in.d_data, d_in.pitch_bytes, in->width, in->height,
                               d_out.d_data, d_out.pitch_bytes, (int)gimg_pixel_bytes(in),
                               p.transpose, p.rev_rows, p.rev_cols, g_gpu->stream));
    memset(out->data, 0x5A, out->stride_bytes * (size_t)out->height);
    return gimg_gpu_download(g_gpu, &d_out, out);
}

static void check_size(int w, int h)
{
    for (size_t s = 0; s < sizeof k_samples / sizeof *k_samples; s++)
        for (int c = 1; c <= 4; c++) {
            gimg_image in;
            gimg_status st = gimg_image_alloc(&in, w, h, c, k_samples[s]);
            CHECK(st == GIMG_OK, "alloc: %s", gimg_last_error());
            if (st)
                return;
            testimg_fill_random(&in, (uint64_t)w * 7919 + h * 31 + c * 3 + s);
            for (size_t o = 0; o < sizeof k_ops / sizeof *k_ops; o++) {
                gimg_image ref, got;
                CHECK(gimg_orient_cpu(&in, k_ops[o], &ref) == GIMG_OK, "cpu");
                CHECK(gimg_orient_alloc_output(&in, k_ops[o], &got) == GIMG_OK, "alloc");
                st = run_kernel(&in, k_ops[o], &got);
                CHECK(st == GIMG_OK, "%s", gimg_last_error());
                int bad = st ? -1 : compare(&ref, &got);
                CHECK(bad == 0, "%s %dx%d %d channels %d-bit: %d rows differ",
                      gimg_orient_name(k_ops[o]), w, h, c, 8 * (int)k_samples[s], bad);
                gimg_image_free(&ref);
                gimg_image_free(&got);
            }
            gimg_image_free(&in);
        }
}

static void test_tiny_sizes(void)
{
    check_size(1, 1);
    check_size(2, 3);
    check_size(17, 5);
}

static void test_lines(void)
{
    check_size(g_small ? 257 : 4097, 1);
    check_size(1, g_small ? 257 : 4097);
}

static void test_awkward_sizes(void)
{
    if (g_small) {
        check_size(61, 47);
        check_size(130, 97);
        return;
    }
    check_size(1023, 769);
    check_size(769, 1023);
    /* Seeded random sizes: every remainder against every tile shape. */
    uint64_t state = 2024;
    for (int i = 0; i < 6; i++)
        check_size(1 + (int)(testimg_next(&state) % 700), 1 + (int)(testimg_next(&state) % 700));
}

static void test_large(void)
{
    if (g_small)
        SKIP("--small");
    check_size(8192, 8192);
}

/* The path the tools take: gimg_orient with --device gpu. */
static void test_public_path(void)
{
    gimg_device dev;
    gimg_parse_device("gpu", &dev);
    gimg_ctx *ctx;
    CHECK(gimg_ctx_open(&dev, 0, &ctx) == GIMG_OK, "%s", gimg_last_error());
    gimg_image in, ref, got;
    CHECK(gimg_image_alloc(&in, 333, 222, 3, GIMG_U8) == GIMG_OK, "alloc");
    testimg_fill_random(&in, 7);
    for (size_t o = 0; o < sizeof k_ops / sizeof *k_ops; o++) {
        CHECK(gimg_orient_cpu(&in, k_ops[o], &ref) == GIMG_OK, "cpu");
        gimg_status st = gimg_orient(ctx, &in, k_ops[o], &got);
        CHECK(st == GIMG_OK, "%s", gimg_last_error());
        if (!st)
            CHECK(compare(&ref, &got) == 0, "%s differs", gimg_orient_name(k_ops[o]));
        gimg_image_free(&ref);
        gimg_image_free(&got);
    }
    /* auto for every orientation: the CPU's result and metadata. */
    in.maxval = 200;
    for (int o = 0; o <= 8; o++) {
        in.meta = gimg_meta_new();
        CHECK(in.meta != NULL, "meta");
        if (!in.meta)
            break;
        in.meta->orientation = o;
        CHECK(gimg_orient_cpu(&in, GIMG_ORIENT_AUTO, &ref) == GIMG_OK, "cpu");
        gimg_status st = gimg_orient(ctx, &in, GIMG_ORIENT_AUTO, &got);
        CHECK(st == GIMG_OK, "%s", gimg_last_error());
        if (!st) {
            CHECK(got.width == ref.width && got.height == ref.height && compare(&ref, &got) == 0,
                  "auto, orientation %d differs", o);
            CHECK(got.maxval == 200 && got.meta && got.meta->orientation == (o > 1 ? 1 : o),
                  "auto, orientation %d: maxval %u, orientation %d after", o, got.maxval,
                  got.meta ? got.meta->orientation : -1);
        }
        gimg_image_free(&ref);
        gimg_image_free(&got);
        gimg_meta_free(in.meta);
        in.meta = NULL;
    }
    gimg_image_free(&in);
    gimg_ctx_close(ctx);
}

int main(int argc, char **argv)
{
    g_small = argc > 1 && !strcmp(argv[1], "--small");
    if (gimg_gpu_open(0, &g_gpu) != GIMG_OK) {
        printf("SKIP: gpudiff_orient: %s\n", gimg_last_error());
        return 77;
    }
    RUN(test_tiny_sizes);
    RUN(test_lines);
    RUN(test_awkward_sizes);
    RUN(test_large);
    RUN(test_public_path);
    gimg_gpu_close(g_gpu);
    return check_summary();
}
