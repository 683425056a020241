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
#include "band.h"
#include "io_internal.h"
#include "orient_internal.h"
#include "remote.h"

#include <errno.h>
#include <fcntl.h>
#include <omp.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

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

/* ------------------------------------------------------- bands, spooled */

/*
 * The output spooled through a temporary file instead of held (band.h's
 * writer then writes it as its rows come): memory holds a few bands, the
 * file (unlinked from the start) holds the image, in the page cache as
 * long as the machine has room, on disc beyond.
 *  - flop: a band is the output's next rows: no file.
 *  - flip, rot180: a band is the output's rows [H - y0 - h, H - y0),
 *    written where they go in a file of the output's rows; read back in
 *    order.
 *  - the transposes: a band is the output's columns [c0, c0 + h) over all
 *    its rows, written as one block (its rows of h pixels, one after the
 *    other); an output band's rows are read from every block (one read a
 *    block) and put side by side.
 * One write a band, one read per block and output band (each row read
 * to its place: preadv): a 16384^2 RGB image in bands of 4 MB is 192
 * writes and 192 x 192 reads.
 */
typedef struct {
    int c0, width;   /* the output columns it holds */
    off_t at;        /* where it starts in the file */
} spool_block;

struct gimg_orient_spool {
    gimg_orient_op op;
    gimg_orient_plan plan;
    int in_height;
    gimg_image layout;      /* the output's size, layout, maxval (no pixels, no metadata) */
    size_t out_row_bytes;
    int fd;                 /* -1: no file (flop) */
    int rows_placed;
    gimg_image work;        /* a band oriented; an output band read back */
    struct iovec *iov;      /* reading back: IOV_MAX rows of a block */
    int out_rows;           /* rows of an output band */
    int next_row;           /* the next output row to give */
    int ready;              /* flop: the rows of the last band, in work, not given */
    spool_block *block;
    int n_blocks, cap_blocks;
    int work_rows;          /* work's rows, allocated with the first band */
    /* Placed straight into the output (gimg_orient_spool_place): two
     * buffers, one filled while the writer writes the other. A
     * transpose's is a block of output columns: `filled` of its `cols`
     * are the output's from `filled_x0` (the right end when the rows
     * are reversed: the bands come right to left). */
    struct gimg_band_writer *direct;
    gimg_image placed[2];
    int cur, cols, filled, filled_x0;
};

/* An unlinked file of our own in $TMPDIR (or /tmp), on a file system
 * with room for `bytes` (the output image): refused at the first band
 * where there is not, rather than at the band that fills it. */
static gimg_status spool_file(uint64_t bytes, int *fd)
{
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir)
        dir = "/tmp";
    *fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (*fd < 0) {
        char path[4096];
        if (snprintf(path, sizeof path, "%s/gimg-spool-XXXXXX", dir) >= (int)sizeof path)
            return gimg_fail(GIMG_E_IO, "temporary folder %s: name too long", dir);
        if ((*fd = mkostemp(path, O_CLOEXEC)) < 0)
            return gimg_fail(GIMG_E_IO, "cannot make a temporary file in %s: %s", dir,
                             strerror(errno));
        unlink(path);
    }
    struct statvfs fs;
    if (fstatvfs(*fd, &fs) == 0 && (uint64_t)fs.f_bavail * fs.f_frsize < bytes) {
        char need[32], have[32];
        gimg_format_bytes(bytes, need, sizeof need);
        gimg_format_bytes((uint64_t)fs.f_bavail * fs.f_frsize, have, sizeof have);
        close(*fd);
        *fd = -1;
        return gimg_fail(GIMG_E_LIMIT, "the temporary file needs %s in %s, which has %s free "
                                       "(set TMPDIR to a folder with room)", need, dir, have);
    }
    return GIMG_OK;
}

static gimg_status spool_io(int fd, unsigned char *p, size_t n, off_t at, int write)
{
    if (gimg_pio(fd, p, n, (uint64_t)at, write))
        return gimg_fail(GIMG_E_IO, "temporary file: %s error: %s", write ? "write" : "read",
                         errno ? strerror(errno) : "end of file");
    return GIMG_OK;
}

void gimg_orient_spool_free(gimg_orient_spool *s)
{
    if (!s)
        return;
    if (s->fd >= 0)
        close(s->fd);
    gimg_band_writer_sync(s->direct);   /* its thread may read a buffer */
    gimg_image_free(&s->work);
    gimg_image_free(&s->placed[0]);
    gimg_image_free(&s->placed[1]);
    free(s->iov);
    free(s->block);
    free(s);
}

gimg_status gimg_orient_spool_begin(const gimg_image *header, gimg_orient_op op, int band_rows,
                                    gimg_image *layout, gimg_orient_spool **out)
{
    *out = NULL;
    memset(layout, 0, sizeof *layout);
    if (op == GIMG_ORIENT_AUTO || band_rows < 1)
        return gimg_fail(GIMG_E_USAGE, "gimg_orient_spool_begin: auto, or no band");
    gimg_orient_spool *s = calloc(1, sizeof *s);
    if (!s)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    s->fd = -1;
    s->op = op;
    s->plan = gimg_orient_plan_of(op);
    s->in_height = header->height;
    layout->width = s->plan.transpose ? header->height : header->width;
    layout->height = s->plan.transpose ? header->width : header->height;
    layout->channels = header->channels;
    layout->sample = header->sample;
    gimg_status st = carry_over(header, op, layout);   /* maxval, metadata */
    s->layout = *layout;
    s->layout.meta = NULL;
    const int W = layout->width;
    s->out_row_bytes = (size_t)W * gimg_pixel_bytes(layout);
    /* An output band: about the input band's bytes. */
    const uint64_t band_bytes =
        (uint64_t)band_rows * (uint64_t)header->width * gimg_pixel_bytes(header);
    const uint64_t rows = band_bytes / s->out_row_bytes;
    s->out_rows = rows < 1 ? 1 : rows > (uint64_t)layout->height ? layout->height : (int)rows;
    /* One buffer, viewed as a band oriented (a block of output columns for
     * the transposes) and as an output band read back: room for either. */
    const uint64_t block_px = (uint64_t)band_rows * (uint64_t)(s->plan.transpose ? layout->height : W);
    const uint64_t out_px = (uint64_t)s->out_rows * (uint64_t)W;
    const uint64_t work_rows = ((block_px > out_px ? block_px : out_px) + (uint64_t)W - 1) / (uint64_t)W;
    if (!st && work_rows > INT_MAX)
        st = gimg_fail(GIMG_E_LIMIT, "bands too large to spool");
    s->work_rows = (int)work_rows;
    if (st) {
        gimg_meta_free(layout->meta);
        memset(layout, 0, sizeof *layout);
        gimg_orient_spool_free(s);
        return st;
    }
    *out = s;
    return GIMG_OK;
}

/* s->work as an image of width x height, packed. */
static gimg_image work_view(const gimg_orient_spool *s, int width, int height)
{
    gimg_image v = s->work;
    v.meta = NULL;
    v.width = width;
    v.height = height;
    v.stride_bytes = (size_t)width * gimg_pixel_bytes(&v);
    return v;
}

/* The buffers a spool of the temporary file needs, with its first band. */
static gimg_status spool_buffers(gimg_orient_spool *s)
{
    gimg_status st;
    if (s->work.data)
        return GIMG_OK;
    if ((st = gimg_image_alloc(&s->work, s->layout.width, s->work_rows, s->layout.channels,
                               s->layout.sample)))
        return st;
    if (s->plan.transpose && !(s->iov = malloc(IOV_MAX * sizeof *s->iov)))
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    return GIMG_OK;
}

gimg_status gimg_orient_spool_add(gimg_orient_spool *s, const gimg_image *band, int y0)
{
    const int h = band->height;
    if (h < 1 || y0 != s->rows_placed || h > s->in_height - y0 || s->ready || s->direct)
        return gimg_fail(GIMG_E_USAGE, "gimg_orient_spool_add: bands out of order");
    gimg_status st = spool_buffers(s);
    if (st)
        return st;
    const gimg_orient_plan p = s->plan;
    const int first = p.rev_rows ? s->in_height - y0 - h : y0;
    gimg_image v = p.transpose ? work_view(s, h, s->layout.height) : work_view(s, s->layout.width, h);
    if ((size_t)v.height * v.stride_bytes > (size_t)s->work.height * s->work.stride_bytes)
        return gimg_fail(GIMG_E_USAGE, "gimg_orient_spool_add: a band taller than begin's");
    gimg_orient_cpu_into(band, s->op, &v);
    s->rows_placed += h;
    const size_t bytes = (size_t)v.height * v.stride_bytes;
    if (!p.transpose && !p.rev_rows) {   /* flop: the output's next rows */
        s->ready = h;
        return GIMG_OK;
    }
    /* The file at the first band, not at begin: a caller may begin and
     * then find the output cannot be written as its rows come. */
    if (s->fd < 0 &&
        (st = spool_file((uint64_t)s->layout.height * s->out_row_bytes, &s->fd)))
        return st;
    if (!p.transpose)
        return spool_io(s->fd, v.data, bytes, (off_t)first * (off_t)s->out_row_bytes, 1);
    if (s->n_blocks == s->cap_blocks) {
        int cap = s->cap_blocks ? 2 * s->cap_blocks : 64;
        spool_block *b = realloc(s->block, (size_t)cap * sizeof *b);
        if (!b)
            return gimg_fail(GIMG_E_NOMEM, "out of memory");
        s->block = b;
        s->cap_blocks = cap;
    }
    /* Blocks in the order the bands come: each h input rows' bytes. */
    const off_t at = (off_t)y0 * (off_t)(bytes / (size_t)h);
    s->block[s->n_blocks++] = (spool_block){.c0 = first, .width = h, .at = at};
    return spool_io(s->fd, v.data, bytes, at, 1);
}

/* gimg_orient_cpu_into on a thread fewer than the process has: one core
 * is left to the writer's thread, from which libgomp's threads, spinning
 * while they wait, took it (rot90 of a 16384^2 RGB PPM on 2 cores: 1.34 to
 * 1.74 s, 1.14 to 1.30 s with a thread fewer). */
static void orient_beside_writer(const gimg_image *band, gimg_orient_op op, gimg_image *v)
{
    const int threads = omp_get_max_threads();
    if (threads > 1)
        omp_set_num_threads(threads - 1);
    gimg_orient_cpu_into(band, op, v);
    omp_set_num_threads(threads);
}

/* Hands the transpose's filled columns to the writer; the other buffer
 * is filled next. */
static gimg_status place_columns(gimg_orient_spool *s)
{
    if (!s->filled)
        return GIMG_OK;
    gimg_image v = s->placed[s->cur];
    const int c0 = s->plan.rev_rows ? s->cols - s->filled : 0;
    v.data += (size_t)c0 * gimg_pixel_bytes(&v);
    v.width = s->filled;
    s->cur = 1 - s->cur;
    s->filled = 0;
    return gimg_band_writer_block(s->direct, &v, s->filled_x0, 0);
}

gimg_status gimg_orient_spool_place(gimg_orient_spool *s, const gimg_image *band, int y0,
                                    gimg_band_writer *w)
{
    const gimg_orient_plan p = s->plan;
    if (!w)
        return gimg_orient_spool_add(s, band, y0);
    const int h = band->height;
    if (h < 1 || y0 != s->rows_placed || h > s->in_height - y0 || s->work.data ||
        (s->direct && s->direct != w))
        return gimg_fail(GIMG_E_USAGE, "gimg_orient_spool_place: bands out of order");
    gimg_status st;
    const int first = p.rev_rows ? s->in_height - y0 - h : y0;
    if (!s->direct) {
        /* A transpose's blocks: at least a band's columns, at most the image's. */
        const uint64_t col_bytes = (uint64_t)s->layout.height * gimg_pixel_bytes(&s->layout);
        uint64_t block_bytes = (uint64_t)s->layout.height * GIMG_ORIENT_SEGMENT_BYTES;
        if (block_bytes > GIMG_ORIENT_BLOCK_BYTES)
            block_bytes = GIMG_ORIENT_BLOCK_BYTES;
        if (block_bytes > gimg_max_memory() / GIMG_BAND_SHARE)
            block_bytes = gimg_max_memory() / GIMG_BAND_SHARE;
        uint64_t cols = block_bytes / col_bytes;
        cols = cols < (uint64_t)h ? (uint64_t)h : cols > (uint64_t)s->layout.width
                                                      ? (uint64_t)s->layout.width : cols;
        s->cols = (int)cols;
        for (int k = 0; k < 2; k++) {
            if ((st = p.transpose ? gimg_image_alloc(&s->placed[k], s->cols, s->layout.height,
                                                     s->layout.channels, s->layout.sample)
                                  : gimg_image_alloc(&s->placed[k], s->layout.width, h,
                                                     s->layout.channels, s->layout.sample)))
                return st;
            s->placed[k].maxval = s->layout.maxval;
        }
        s->direct = w;
    }
    gimg_image v = s->placed[s->cur];
    if (!p.transpose) {   /* flip, flop, rot180: the output's rows [first, first + h) */
        if (h > v.height)
            return gimg_fail(GIMG_E_USAGE, "gimg_orient_spool_place: a band taller than the first");
        v.height = h;
        orient_beside_writer(band, s->op, &v);
        s->rows_placed += h;
        s->cur = 1 - s->cur;
        return gimg_band_writer_block(w, &v, 0, first);
    }
    /* The transposes: the output's columns [first, first + h). */
    if (h > s->cols - s->filled && (st = place_columns(s)))
        return st;
    if (h > s->cols)
        return gimg_fail(GIMG_E_USAGE, "gimg_orient_spool_place: a band taller than the first");
    v = s->placed[s->cur];
    const int c0 = p.rev_rows ? s->cols - s->filled - h : s->filled;
    v.data += (size_t)c0 * gimg_pixel_bytes(&v);
    v.width = h;
    orient_beside_writer(band, s->op, &v);
    if (p.rev_rows || !s->filled)
        s->filled_x0 = first;
    s->filled += h;
    s->rows_placed += h;
    return s->rows_placed == s->in_height ? place_columns(s) : GIMG_OK;
}

gimg_status gimg_orient_spool_next(gimg_orient_spool *s, gimg_image *out, int *out_y0)
{
    memset(out, 0, sizeof *out);
    *out_y0 = s->next_row;
    if (s->ready) {   /* flop */
        *out = work_view(s, s->layout.width, s->ready);
        out->maxval = s->layout.maxval;
        s->next_row += s->ready;
        s->ready = 0;
        return GIMG_OK;
    }
    if (s->fd < 0 || s->rows_placed < s->in_height || s->next_row >= s->layout.height)
        return GIMG_OK;   /* nothing yet, nothing left, or placed */
    const int r0 = s->next_row;
    const int rows = s->layout.height - r0 < s->out_rows ? s->layout.height - r0 : s->out_rows;
    gimg_image v = work_view(s, s->layout.width, rows);
    gimg_status st;
    if (!s->plan.transpose) {
        st = spool_io(s->fd, v.data, (size_t)rows * s->out_row_bytes,
                      (off_t)r0 * (off_t)s->out_row_bytes, 0);
    } else {
        /* Each block's rows [r0, r0 + rows), one after the other in the
         * file, read straight to their place in the output rows. */
        const size_t px = gimg_pixel_bytes(&v);
        st = GIMG_OK;
        for (int k = 0; k < s->n_blocks && !st; k++) {
            const spool_block *b = &s->block[k];
            const size_t row = (size_t)b->width * px;
            for (int i = 0; i < rows && !st; i += IOV_MAX) {
                const int n = rows - i < IOV_MAX ? rows - i : IOV_MAX;
                for (int q = 0; q < n; q++)
                    s->iov[q] = (struct iovec){gimg_row(&v, i + q) + (size_t)b->c0 * px, row};
                const off_t at = b->at + (off_t)(r0 + i) * (off_t)row;
                ssize_t got = preadv(s->fd, s->iov, n, at);
                /* Short (a signal): the rows left one at a time. */
                for (int q = got < 0 ? 0 : (int)((size_t)got / row); q < n && !st; q++)
                    st = spool_io(s->fd, gimg_row(&v, i + q) + (size_t)b->c0 * px, row,
                                  at + (off_t)q * (off_t)row, 0);
            }
        }
    }
    if (st)
        return st;
    *out = v;
    out->maxval = s->layout.maxval;
    s->next_row += rows;
    return GIMG_OK;
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
