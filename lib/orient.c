/*
 * orient.c — the eight symmetries of the rectangle on the CPU: transpose,
 * transverse, flip, flop and the rotations. This is both the reference the
 * GPU kernel is tested against and the CPU backend.
 *
 * Every op is "maybe transpose, then maybe reverse the source's rows and/or
 * columns" (gimg_orient_plan), so one loop serves all eight. Transposing ops
 * walk the output in 64x64-pixel blocks so that both the rows read and the
 * rows written stay in cache; the others copy (or reverse) whole rows.
 * Output rows are shared among OpenMP threads.
 *
 * "auto" is no symmetry of its own: it is resolved per image, from the
 * orientation the image's metadata records (gimg_orient_from_exif), to one
 * of the seven, or to the identity (a copy: the plan {0, 0, 0}) when there
 * is nothing to undo. Every output takes the input's maxval and a copy of
 * its metadata (carry_over): the orientation is reset to 1 by auto alone,
 * and the EXIF pixel dimensions follow a swap of the width and height.
 */
#include "gimg.h"
#include "ctx_internal.h"
#include "orient_internal.h"
#include "remote.h"

#include <omp.h>
#include <string.h>

static const struct { const char *name; gimg_orient_op op; gimg_orient_plan plan; } k_ops[] = {
    /*                                          transpose rev_rows rev_cols */
    {"transpose", GIMG_ORIENT_TRANSPOSE, {1, 0, 0}},
    {"transverse", GIMG_ORIENT_TRANSVERSE, {1, 1, 1}},
    {"flip", GIMG_ORIENT_FLIP, {0, 1, 0}},
    {"flop", GIMG_ORIENT_FLOP, {0, 0, 1}},
    {"rot90", GIMG_ORIENT_ROT90, {1, 1, 0}},
    {"rot180", GIMG_ORIENT_ROT180, {0, 1, 1}},
    {"rot270", GIMG_ORIENT_ROT270, {1, 0, 1}},
    /* Resolved per image (plan_for); this row's plan, the identity, is the
     * one for an image that records no orientation. */
    {"auto", GIMG_ORIENT_AUTO, {0, 0, 0}},
};
#define N_OPS (sizeof k_ops / sizeof k_ops[0])

gimg_status gimg_orient_parse(const char *name, gimg_orient_op *op)
{
    for (size_t i = 0; i < N_OPS; i++)
        if (strcmp(name, k_ops[i].name) == 0) {
            *op = k_ops[i].op;
            return GIMG_OK;
        }
    return gimg_fail(GIMG_E_USAGE,
                     "unknown operation '%s' (transpose, transverse, flip, flop, rot90, "
                     "rot180, rot270 or auto)", name);
}

const char *gimg_orient_name(gimg_orient_op op)
{
    for (size_t i = 0; i < N_OPS; i++)
        if (k_ops[i].op == op)
            return k_ops[i].name;
    return "?";
}

gimg_orient_plan gimg_orient_plan_of(gimg_orient_op op)
{
    for (size_t i = 0; i < N_OPS; i++)
        if (k_ops[i].op == op)
            return k_ops[i].plan;
    return k_ops[0].plan;
}

int gimg_orient_from_exif(int orientation, gimg_orient_op *op)
{
    /* EXIF 2.3, tag 0x0112: where the stored image's first row and column
     * lie in the scene. Index: the orientation; 1 (top-left) needs nothing.
     * Checked against `convert -auto-orient` and `vips autorot`
     * (tests/cli_orient.sh). */
    static const gimg_orient_op k_upright[9] = {
        [2] = GIMG_ORIENT_FLOP,      [3] = GIMG_ORIENT_ROT180, [4] = GIMG_ORIENT_FLIP,
        [5] = GIMG_ORIENT_TRANSPOSE, [6] = GIMG_ORIENT_ROT90,  [7] = GIMG_ORIENT_TRANSVERSE,
        [8] = GIMG_ORIENT_ROT270,
    };
    if (orientation < 2 || orientation > 8)
        return 0;
    *op = k_upright[orientation];
    return 1;
}

/* The symmetry op applies to in: auto's comes from in's orientation. */
static gimg_orient_plan plan_for(const gimg_image *in, gimg_orient_op op)
{
    gimg_orient_op upright;
    if (op == GIMG_ORIENT_AUTO &&
        gimg_orient_from_exif(in->meta ? in->meta->orientation : 0, &upright))
        op = upright;
    return gimg_orient_plan_of(op);
}

/* What the output takes from the input besides the pixels: see the head of
 * this file. */
static gimg_status carry_over(const gimg_image *in, gimg_orient_op op, gimg_image *out)
{
    out->maxval = in->maxval;
    if (!in->meta)
        return GIMG_OK;
    gimg_status st = gimg_meta_copy(in->meta, &out->meta);
    if (st)
        return st;
    gimg_orient_op upright;
    if (op == GIMG_ORIENT_AUTO && gimg_orient_from_exif(in->meta->orientation, &upright))
        gimg_meta_set_orientation(out->meta, 1);
    if (plan_for(in, op).transpose)
        gimg_meta_set_dimensions(out->meta, out->width, out->height);
    return GIMG_OK;
}

gimg_status gimg_orient_alloc_output(const gimg_image *in, gimg_orient_op op, gimg_image *out)
{
    gimg_orient_plan p = plan_for(in, op);
    return gimg_image_alloc(out, p.transpose ? in->height : in->width,
                            p.transpose ? in->width : in->height, in->channels, in->sample);
}

enum { BLOCK = 16 };

/*
 * One function per pixel size, so that each pixel moves as a fixed-size
 * memcpy (a register move) and the loops carry no switch:
 *   transpose_block_E: out(r, c) = in(src_row(c), src_col(r)) over a block
 *                      of output rows [r0, r1) and columns [c0, c1);
 *   mirror_row_E:      one output row, the source row read backwards.
 */
#define ORIENT_FUNCS(E)                                                                   \
    static void transpose_block_##E(const gimg_image *in, gimg_image *out,               \
                                    gimg_orient_plan p, int r0, int r1, int c0, int c1)  \
    {                                                                                     \
        const int W = in->width, H = in->height;                                          \
        const ptrdiff_t step = p.rev_rows ? -(ptrdiff_t)in->stride_bytes                  \
                                          : (ptrdiff_t)in->stride_bytes;                  \
        for (int r = r0; r < r1; r++) {                                                   \
            unsigned char *dst = gimg_row(out, r) + (size_t)c0 * E;                       \
            const unsigned char *src = gimg_row(in, p.rev_rows ? H - 1 - c0 : c0) +       \
                                       (size_t)(p.rev_cols ? W - 1 - r : r) * E;          \
            for (int c = c0; c < c1; c++, dst += E, src += step)                          \
                memcpy(dst, src, E);                                                      \
        }                                                                                 \
    }                                                                                     \
    static void mirror_row_##E(const unsigned char *src, unsigned char *dst, int width)   \
    {                                                                                     \
        src += (size_t)(width - 1) * E;                                                   \
        for (int c = 0; c < width; c++, dst += E, src -= E)                               \
            memcpy(dst, src, E);                                                          \
    }
ORIENT_FUNCS(1)
ORIENT_FUNCS(2)
ORIENT_FUNCS(3)
ORIENT_FUNCS(4)
ORIENT_FUNCS(6)
ORIENT_FUNCS(8)
ORIENT_FUNCS(12)
ORIENT_FUNCS(16)

typedef void (*transpose_fn)(const gimg_image *, gimg_image *, gimg_orient_plan, int, int, int,
                             int);
typedef void (*mirror_fn)(const unsigned char *, unsigned char *, int);

static void pick(size_t pixel_bytes, transpose_fn *t, mirror_fn *m)
{
#define PICK(E) case E: *t = transpose_block_##E; *m = mirror_row_##E; return;
    switch (pixel_bytes) {
    PICK(1) PICK(2) PICK(3) PICK(4) PICK(6) PICK(8) PICK(12)
    default: PICK(16)
    }
#undef PICK
}

void gimg_orient_cpu_into(const gimg_image *in, gimg_orient_op op, gimg_image *out)
{
    gimg_orient_plan p = plan_for(in, op);
    const int OH = out->height, OW = out->width;
    const size_t row_bytes = (size_t)in->width * gimg_pixel_bytes(in);
    transpose_fn transpose_block;
    mirror_fn mirror_row;
    pick(gimg_pixel_bytes(in), &transpose_block, &mirror_row);
    if (!p.transpose) {
        #pragma omp parallel for schedule(static) if ((size_t)OH * OW > 65536)
        for (int r = 0; r < OH; r++) {
            const unsigned char *src = gimg_row(in, p.rev_rows ? in->height - 1 - r : r);
            if (p.rev_cols)
                mirror_row(src, gimg_row(out, r), in->width);
            else
                memcpy(gimg_row(out, r), src, row_bytes);
        }
        return;
    }
    const int row_blocks = (OH + BLOCK - 1) / BLOCK, col_blocks = (OW + BLOCK - 1) / BLOCK;
    #pragma omp parallel for collapse(2) schedule(static) if ((size_t)OH * OW > 65536)
    for (int br = 0; br < row_blocks; br++)
        for (int bc = 0; bc < col_blocks; bc++) {
            int r0 = br * BLOCK, c0 = bc * BLOCK;
            transpose_block(in, out, p, r0, r0 + BLOCK < OH ? r0 + BLOCK : OH, c0,
                            c0 + BLOCK < OW ? c0 + BLOCK : OW);
        }
}

gimg_status gimg_orient_cpu(const gimg_image *in, gimg_orient_op op, gimg_image *out)
{
    gimg_status st = gimg_orient_alloc_output(in, op, out);
    if (st)
        return st;
    if ((st = carry_over(in, op, out))) {
        gimg_image_free(out);
        return st;
    }
    gimg_orient_cpu_into(in, op, out);
    return GIMG_OK;
}

/* ---------------------------------------------------------------- bands */

gimg_status gimg_orient_bands_begin(const gimg_image *header, gimg_orient_op op,
                                    gimg_image *out)
{
    memset(out, 0, sizeof *out);
    if (op == GIMG_ORIENT_AUTO)
        return gimg_fail(GIMG_E_USAGE, "gimg_orient_bands_begin: auto needs the metadata "
                                       "that may follow the pixels: orient the image whole");
    gimg_status st = gimg_orient_alloc_output(header, op, out);
    if (!st && (st = carry_over(header, op, out)))
        gimg_image_free(out);
    return st;
}

/*
 * A symmetry sends the input's rows [y0, y0 + h) to a block of the output
 * that is the same symmetry of the band alone: output rows (no transpose)
 * or columns (transpose) [y0, y0 + h), or [H - y0 - h, H - y0) where the
 * rows are reversed. The band is oriented into a view of that block.
 */
void gimg_orient_bands_add(const gimg_image *header, gimg_orient_op op, const gimg_image *band,
                           int y0, gimg_image *out)
{
    const gimg_orient_plan p = gimg_orient_plan_of(op);
    const int first = p.rev_rows ? header->height - y0 - band->height : y0;
    gimg_image view = *out;
    view.meta = NULL;
    if (p.transpose) {
        view.data = out->data + (size_t)first * gimg_pixel_bytes(out);
        view.width = band->height;
    } else {
        view.data = gimg_row(out, first);
        view.height = band->height;
    }
    gimg_orient_cpu_into(band, op, &view);
}

#ifdef GIMG_HAVE_CUDA
#include "gpu_internal.h"
#include "transpose.h"

static gimg_status orient_gpu(gimg_ctx *ctx, gimg_gpu *g, const gimg_image *in,
                              gimg_orient_op op, gimg_image *out)
{
    gimg_orient_plan p = plan_for(in, op);
    gimg_dimage d_in, d_out;
    double t0 = gimg_now_ms();
    gimg_status st;
    if ((st = gimg_gpu_image(g, 0, in->width, in->height, in->channels, in->sample, &d_in)) ||
        (st = gimg_gpu_image(g, 1, out->width, out->height, out->channels, out->sample, &d_out)) ||
        (st = gimg_gpu_upload(g, in, &d_in)))
        return st;
    GIMG_CUDA(cudaEventRecord(g->ev_start, g->stream));
    GIMG_CUDA(gimg_cuda_orient(d_in.d_data, d_in.pitch_bytes, in->width, in->height,
                               d_out.d_data, d_out.pitch_bytes, (int)gimg_pixel_bytes(in),
                               p.transpose, p.rev_rows, p.rev_cols, g->stream));
    GIMG_CUDA(cudaEventRecord(g->ev_stop, g->stream));
    if ((st = gimg_gpu_download(g, &d_out, out)))
        return st;
    float kernel_ms = 0;
    GIMG_CUDA(cudaEventElapsedTime(&kernel_ms, g->ev_start, g->ev_stop));
    gimg_ctx_add_gpu_times(ctx, kernel_ms, gimg_now_ms() - t0 - kernel_ms);
    return GIMG_OK;
}
#endif

gimg_status gimg_orient(gimg_ctx *ctx, const gimg_image *in, gimg_orient_op op, gimg_image *out)
{
    struct gimg_gpu *gpu;
    size_t bytes = (size_t)in->height * (size_t)in->width * gimg_pixel_bytes(in);
    /* The server is sent the symmetry itself: auto's comes from the
     * metadata, which stays here (and an identity is a copy). */
    gimg_orient_op symmetry = op;
    const gimg_cost_job job = {.op = GIMG_COST_ORIENT, .bytes = bytes,
                               .threads = omp_get_max_threads()};
    struct gimg_remote *server = NULL;
    if (op != GIMG_ORIENT_AUTO ||
        gimg_orient_from_exif(in->meta ? in->meta->orientation : 0, &symmetry))
        server = gimg_ctx_server(ctx, &job);
    gimg_status st;
    if (server && (st = gimg_remote_orient(server, in, symmetry, out)) == GIMG_OK) {
        if ((st = carry_over(in, op, out)))
            gimg_image_free(out);
        return st;
    }
    if (server && !in->data) /* a JPEG only the server was to decode */
        return st;
    if ((st = gimg_ctx_select(ctx, &job, &gpu)))
        return st;
    if ((st = gimg_orient_alloc_output(in, op, out)))
        return st;
    if ((st = carry_over(in, op, out))) {
        gimg_image_free(out);
        return st;
    }
#ifdef GIMG_HAVE_CUDA
    if (gpu) {
        st = orient_gpu(ctx, gpu, in, op, out);
        /* A GPU out of memory leaves the work to the CPU. */
        if (st == GIMG_OK || (st = gimg_ctx_gpu_fallback(ctx, st)) != GIMG_OK) {
            if (st)
                gimg_image_free(out);
            return st;
        }
    }
#endif
    gimg_orient_cpu_into(in, op, out);
    return GIMG_OK;
}
