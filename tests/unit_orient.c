/*
 * unit_orient — the EXIF orientation and the metadata through gtranspose's
 * library (gimg_orient.h), on the CPU:
 *  - gimg_orient_from_exif and GIMG_ORIENT_AUTO against the EXIF
 *    specification's own words (where the stored image's row 0 and column 0
 *    lie), turned here into pixel positions independently of the library's
 *    ops, for all 8 orientations, every channel count and sample size;
 *  - auto resets the orientation to 1 in gimg_meta and in the EXIF block;
 *    every other op leaves it; ops that swap width and height swap the
 *    block's PixelXDimension and PixelYDimension;
 *  - maxval and the rest of the metadata (ICC, texts, DPI) are copied, the
 *    input left as it was; an image without metadata, or with orientation
 *    0 or 1, comes out of auto as a copy;
 *  - gimg_orient (the tools' path, --device cpu) equals gimg_orient_cpu,
 *    metadata included.
 */
#include "gimg.h"
#include "gimg_orient.h"
#include "orient_internal.h"
#include "band.h"
#include "codec.h"
#include "testimg.h"
#include "check.h"
#include "testfile.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static gimg_ctx *g_cpu;

/* ---------------------------------------------------------- EXIF blocks */

/* A little- or big-endian EXIF block: IFD0 holds the orientation (SHORT)
 * and a pointer to an Exif IFD holding PixelXDimension (LONG) and
 * PixelYDimension (SHORT). Offsets of the three values are fixed: */
enum { EXIF_BYTES = 68, AT_ORIENTATION = 8 + 2 + 8, AT_PIXEL_X = 38 + 2 + 8,
       AT_PIXEL_Y = 38 + 2 + 12 + 8 };

static void put_u16(unsigned char *p, unsigned v, int big)
{
    p[big ? 0 : 1] = (unsigned char)(v >> 8);
    p[big ? 1 : 0] = (unsigned char)v;
}

static void put_u32(unsigned char *p, uint32_t v, int big)
{
    for (int i = 0; i < 4; i++)
        p[big ? 3 - i : i] = (unsigned char)(v >> (8 * i));
}

static unsigned get_u16(const unsigned char *p, int big)
{
    return big ? (unsigned)p[0] << 8 | p[1] : (unsigned)p[1] << 8 | p[0];
}

static uint32_t get_u32(const unsigned char *p, int big)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[big ? 3 - i : i] << (8 * i);
    return v;
}

static void entry(unsigned char *p, unsigned tag, unsigned type, uint32_t value, int big)
{
    put_u16(p, tag, big);
    put_u16(p + 2, type, big);
    put_u32(p + 4, 1, big);
    put_u32(p + 8, 0, big);
    if (type == 3)
        put_u16(p + 8, value, big);
    else
        put_u32(p + 8, value, big);
}

static void make_exif(unsigned char b[EXIF_BYTES], int orientation, int w, int h, int big)
{
    memset(b, 0, EXIF_BYTES);
    memcpy(b, big ? "MM\0*" : "II*\0", 4);
    put_u32(b + 4, 8, big);
    put_u16(b + 8, 2, big);                              /* IFD0: 2 entries */
    entry(b + 10, 0x0112, 3, (uint32_t)orientation, big); /* Orientation */
    entry(b + 22, 0x8769, 4, 38, big);                   /* Exif IFD at 38 */
    put_u16(b + 38, 2, big);
    entry(b + 40, 0xA002, 4, (uint32_t)w, big);          /* PixelXDimension */
    entry(b + 52, 0xA003, 3, (uint32_t)h, big);          /* PixelYDimension */
}

/* ------------------------------------------------------------- geometry */

/*
 * EXIF 2.3, Orientation: where the stored image's row 0 and column 0 lie
 * in the scene.  1 top/left, 2 top/right, 3 bottom/right, 4 bottom/left,
 * 5 left/top, 6 right/top, 7 right/bottom, 8 left/bottom.
 * Upright, the stored pixel (r, c) of a W x H image lands at (y, x).
 */
static void upright_position(int orientation, int W, int H, int r, int c, int *y, int *x)
{
    static const char *const row0[9] = {"", "top", "top", "bottom", "bottom",
                                        "left", "right", "right", "left"};
    static const char *const col0[9] = {"", "left", "right", "right", "left",
                                        "top", "top", "bottom", "bottom"};
    const char *rs = row0[orientation], *cs = col0[orientation];
    if (!strcmp(rs, "top") || !strcmp(rs, "bottom")) {
        /* Rows stay rows: the upright image is W x H. */
        *y = !strcmp(rs, "top") ? r : H - 1 - r;
        *x = !strcmp(cs, "left") ? c : W - 1 - c;
    } else {
        /* Rows become columns: the upright image is H x W. */
        *x = !strcmp(rs, "left") ? r : H - 1 - r;
        *y = !strcmp(cs, "top") ? c : W - 1 - c;
    }
}

static int upright_swaps(int orientation) { return orientation >= 5; }

/* The number of stored pixels not where the EXIF text puts them in out. */
static long misplaced(const gimg_image *in, int orientation, const gimg_image *out)
{
    const size_t E = gimg_pixel_bytes(in);
    long bad = 0;
    for (int r = 0; r < in->height; r++)
        for (int c = 0; c < in->width; c++) {
            int y, x;
            upright_position(orientation, in->width, in->height, r, c, &y, &x);
            bad += memcmp(gimg_row(in, r) + (size_t)c * E, gimg_row(out, y) + (size_t)x * E,
                          E) != 0;
        }
    return bad;
}

static int same_image(const gimg_image *a, const gimg_image *b)
{
    if (a->width != b->width || a->height != b->height || a->channels != b->channels ||
        a->sample != b->sample || a->maxval != b->maxval)
        return 0;
    for (int y = 0; y < a->height; y++)
        if (memcmp(gimg_row(a, y), gimg_row(b, y), (size_t)a->width * gimg_pixel_bytes(a)))
            return 0;
    return 1;
}

static int same_bytes(const unsigned char *a, size_t na, const unsigned char *b, size_t nb)
{
    return na == nb && (na == 0 || memcmp(a, b, na) == 0);
}

/* ---------------------------------------------------------------- tests */

static void test_parse(void)
{
    gimg_orient_op op = GIMG_ORIENT_TRANSPOSE;
    CHECK(gimg_orient_parse("auto", &op) == GIMG_OK && op == GIMG_ORIENT_AUTO, "auto");
    CHECK(!strcmp(gimg_orient_name(GIMG_ORIENT_AUTO), "auto"), "name");
    CHECK(gimg_orient_parse("Auto", &op) == GIMG_E_USAGE, "case matters");
    CHECK(strstr(gimg_last_error(), "auto") != NULL, "the message lists auto: %s",
          gimg_last_error());
}

/* The op each orientation maps to, and the values with nothing to do. */
static void test_from_exif(void)
{
    static const gimg_orient_op want[9] = {
        [2] = GIMG_ORIENT_FLOP,      [3] = GIMG_ORIENT_ROT180, [4] = GIMG_ORIENT_FLIP,
        [5] = GIMG_ORIENT_TRANSPOSE, [6] = GIMG_ORIENT_ROT90,  [7] = GIMG_ORIENT_TRANSVERSE,
        [8] = GIMG_ORIENT_ROT270};
    for (int o = 2; o <= 8; o++) {
        gimg_orient_op op = GIMG_ORIENT_AUTO;
        CHECK(gimg_orient_from_exif(o, &op) == 1 && op == want[o], "orientation %d gave %s", o,
              gimg_orient_name(op));
    }
    const int none[] = {0, 1, 9, -1, 255, 65536};
    for (size_t i = 0; i < sizeof none / sizeof *none; i++) {
        gimg_orient_op op = GIMG_ORIENT_AUTO;
        CHECK(gimg_orient_from_exif(none[i], &op) == 0 && op == GIMG_ORIENT_AUTO,
              "orientation %d: something to do, or *op changed", none[i]);
    }
}

/* An image with EXIF (orientation o, its size as pixel dimensions), an ICC
 * profile, a text and a DPI; maxval set for integer samples. */
static gimg_status make_input(gimg_image *im, int w, int h, int channels, gimg_sample s,
                              int o, int big, uint64_t seed)
{
    gimg_status st = gimg_image_alloc(im, w, h, channels, s);
    if (st)
        return st;
    testimg_fill_random(im, seed);
    im->maxval = s == GIMG_U16 ? 4095 : s == GIMG_U8 ? 127 : 0;
    unsigned char exif[EXIF_BYTES], icc[200];
    make_exif(exif, o, w, h, big);
    for (size_t i = 0; i < sizeof icc; i++)
        icc[i] = (unsigned char)(i * 7 + 3);
    if ((st = gimg_meta_add_exif(&im->meta, exif, sizeof exif)) ||
        (st = gimg_meta_add_icc(&im->meta, icc, sizeof icc)) ||
        (st = gimg_meta_add_text(&im->meta, "Comment", "upright?", 8, NULL, NULL, 0, 0)))
        return st;
    im->meta->x_dpi = 300;
    im->meta->y_dpi = 150;
    return GIMG_OK;
}

/* The EXIF block's orientation and pixel dimensions, at the offsets
 * make_exif put them (the library rewrites them in place). */
static void read_exif(const gimg_meta *m, int big, int *o, uint32_t *px, uint32_t *py)
{
    *o = -1;
    *px = *py = 0;
    if (!m || m->exif_bytes != EXIF_BYTES)
        return;
    *o = (int)get_u16(m->exif + AT_ORIENTATION, big);
    *px = get_u16(m->exif + 40 + 2, big) == 3 ? get_u16(m->exif + AT_PIXEL_X, big)
                                               : get_u32(m->exif + AT_PIXEL_X, big);
    *py = get_u16(m->exif + 52 + 2, big) == 3 ? get_u16(m->exif + AT_PIXEL_Y, big)
                                               : get_u32(m->exif + AT_PIXEL_Y, big);
}

/* What must have come through besides the orientation and the size. */
static void check_rest_copied(const gimg_image *in, const gimg_image *out, const char *what)
{
    CHECK(out->maxval == in->maxval, "%s: maxval %u, input %u", what, out->maxval, in->maxval);
    CHECK(out->meta && out->meta != in->meta, "%s: no metadata, or the input's own", what);
    if (!out->meta || out->meta == in->meta)
        return;
    CHECK(same_bytes(out->meta->icc, out->meta->icc_bytes, in->meta->icc, in->meta->icc_bytes),
          "%s: ICC differs", what);
    CHECK(out->meta->n_texts == 1 && !strcmp(out->meta->texts[0].text, "upright?"),
          "%s: text lost", what);
    CHECK(out->meta->x_dpi == 300 && out->meta->y_dpi == 150, "%s: DPI lost", what);
}

/* auto: pixels where the EXIF text puts them, orientation 1 after, pixel
 * dimensions those of the output, the rest copied, the input untouched. */
static void test_auto_all_orientations(void)
{
    static const gimg_sample samples[] = {GIMG_U8, GIMG_U16, GIMG_F32};
    for (size_t s = 0; s < 3; s++)
        for (int ch = 1; ch <= 4; ch++)
            for (int o = 1; o <= 8; o++) {
                int big = (o + ch) % 2, w = 37 + ch, h = 19 + o;
                gimg_image in, out;
                char what[64];
                snprintf(what, sizeof what, "orientation %d, %d channels, %d bytes%s", o, ch,
                         (int)samples[s], big ? ", big-endian EXIF" : "");
                gimg_status st = make_input(&in, w, h, ch, samples[s], o, big, 100 + o * 8 + ch);
                CHECK(st == GIMG_OK, "%s: %s", what, gimg_last_error());
                if (st) {
                    gimg_image_free(&in);
                    continue;
                }
                CHECK(in.meta->orientation == o, "%s: parsed as %d", what, in.meta->orientation);
                unsigned char before[EXIF_BYTES];
                memcpy(before, in.meta->exif, EXIF_BYTES);

                st = gimg_orient_cpu(&in, GIMG_ORIENT_AUTO, &out);
                CHECK(st == GIMG_OK, "%s: %s", what, gimg_last_error());
                if (st) {
                    gimg_image_free(&in);
                    continue;
                }
                int ow = upright_swaps(o) ? h : w, oh = upright_swaps(o) ? w : h;
                CHECK(out.width == ow && out.height == oh, "%s: %dx%d", what, out.width,
                      out.height);
                if (out.width == ow && out.height == oh)
                    CHECK(misplaced(&in, o, &out) == 0, "%s: %ld pixels misplaced", what,
                          misplaced(&in, o, &out));
                check_rest_copied(&in, &out, what);
                int eo;
                uint32_t px, py;
                read_exif(out.meta, big, &eo, &px, &py);
                CHECK(out.meta && out.meta->orientation == 1, "%s: orientation %d after", what,
                      out.meta ? out.meta->orientation : -1);
                CHECK(eo == 1, "%s: the EXIF tag reads %d after", what, eo);
                CHECK(px == (uint32_t)ow && py == (uint32_t)oh,
                      "%s: EXIF pixel dimensions %ux%u, image %dx%d", what, px, py, ow, oh);
                CHECK(in.meta->orientation == o && !memcmp(before, in.meta->exif, EXIF_BYTES),
                      "%s: the input's metadata changed", what);

                /* The tools' path gives the same, metadata included. */
                gimg_image got;
                st = gimg_orient(g_cpu, &in, GIMG_ORIENT_AUTO, &got);
                CHECK(st == GIMG_OK, "%s: gimg_orient: %s", what, gimg_last_error());
                if (!st) {
                    CHECK(same_image(&got, &out), "%s: gimg_orient != gimg_orient_cpu", what);
                    CHECK(got.meta && same_bytes(got.meta->exif, got.meta->exif_bytes,
                                                 out.meta->exif, out.meta->exif_bytes) &&
                              got.meta->orientation == 1,
                          "%s: gimg_orient's metadata differs", what);
                }
                gimg_image_free(&got);

                /* Auto again: nothing left to do, a copy. */
                gimg_image again;
                st = gimg_orient_cpu(&out, GIMG_ORIENT_AUTO, &again);
                CHECK(st == GIMG_OK && same_image(&again, &out), "%s: auto twice moved pixels",
                      what);
                gimg_image_free(&again);
                gimg_image_free(&out);
                gimg_image_free(&in);
            }
}

/* Every other op: the stored pixels move, the orientation stays, the pixel
 * dimensions follow the size. */
static void test_other_ops_keep_orientation(void)
{
    static const gimg_orient_op ops[] = {GIMG_ORIENT_TRANSPOSE, GIMG_ORIENT_TRANSVERSE,
                                         GIMG_ORIENT_FLIP,      GIMG_ORIENT_FLOP,
                                         GIMG_ORIENT_ROT90,     GIMG_ORIENT_ROT180,
                                         GIMG_ORIENT_ROT270};
    for (int big = 0; big <= 1; big++)
        for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
            gimg_image in, out, plain, ref;
            const char *what = gimg_orient_name(ops[i]);
            gimg_status st = make_input(&in, 23, 11, 3, GIMG_U16, 6, big, 7 + i);
            CHECK(st == GIMG_OK, "%s", gimg_last_error());
            if (st) {
                gimg_image_free(&in);
                continue;
            }
            /* The same pixels without metadata give the reference. */
            CHECK(gimg_image_alloc(&plain, 23, 11, 3, GIMG_U16) == GIMG_OK, "alloc");
            memcpy(plain.data, in.data, in.stride_bytes * (size_t)in.height);
            plain.maxval = in.maxval;
            CHECK(gimg_orient_cpu(&plain, ops[i], &ref) == GIMG_OK, "reference");
            CHECK(ref.meta == NULL && ref.maxval == in.maxval, "%s without metadata", what);

            st = gimg_orient(g_cpu, &in, ops[i], &out);
            CHECK(st == GIMG_OK, "%s: %s", what, gimg_last_error());
            if (!st) {
                CHECK(same_image(&out, &ref), "%s: pixels differ from the plain image's", what);
                check_rest_copied(&in, &out, what);
                int eo;
                uint32_t px, py;
                read_exif(out.meta, big, &eo, &px, &py);
                CHECK(out.meta && out.meta->orientation == 6 && eo == 6,
                      "%s: orientation %d, EXIF tag %d: not kept", what,
                      out.meta ? out.meta->orientation : -1, eo);
                CHECK(px == (uint32_t)out.width && py == (uint32_t)out.height,
                      "%s: EXIF pixel dimensions %ux%u, image %dx%d", what, px, py, out.width,
                      out.height);
            }
            gimg_image_free(&out);
            gimg_image_free(&ref);
            gimg_image_free(&plain);
            gimg_image_free(&in);
        }
}

/* Nothing to undo: no metadata, orientation 0 (metadata without EXIF), or
 * 1: a copy, with the maxval and metadata as they were. */
static void test_auto_nothing_to_do(void)
{
    gimg_image in, out;
    CHECK(gimg_image_alloc(&in, 13, 7, 2, GIMG_U16) == GIMG_OK, "alloc");
    testimg_fill_random(&in, 5);
    in.maxval = 1023;
    CHECK(gimg_orient(g_cpu, &in, GIMG_ORIENT_AUTO, &out) == GIMG_OK, "%s", gimg_last_error());
    CHECK(same_image(&in, &out), "no metadata: not a copy");
    CHECK(out.meta == NULL, "no metadata: some appeared");
    CHECK(out.data != in.data, "no metadata: the input's own pixels");
    gimg_image_free(&out);

    unsigned char icc[132] = {0};
    CHECK(gimg_meta_add_icc(&in.meta, icc, sizeof icc) == GIMG_OK, "icc");
    CHECK(in.meta && in.meta->orientation == 0, "orientation 0");
    CHECK(gimg_orient(g_cpu, &in, GIMG_ORIENT_AUTO, &out) == GIMG_OK, "%s", gimg_last_error());
    CHECK(same_image(&in, &out), "orientation 0: not a copy");
    CHECK(out.meta && out.meta->orientation == 0 && out.meta->icc_bytes == sizeof icc &&
              !out.meta->exif,
          "orientation 0: metadata changed");
    gimg_image_free(&out);

    /* A TIFF-style orientation (no EXIF block) of 1. */
    in.meta->orientation = 1;
    CHECK(gimg_orient(g_cpu, &in, GIMG_ORIENT_AUTO, &out) == GIMG_OK, "%s", gimg_last_error());
    CHECK(same_image(&in, &out) && out.meta && out.meta->orientation == 1, "orientation 1");
    gimg_image_free(&out);

    /* A TIFF-style orientation of 8, no EXIF: rot270, then 1. */
    in.meta->orientation = 8;
    gimg_image ref;
    CHECK(gimg_orient(g_cpu, &in, GIMG_ORIENT_AUTO, &out) == GIMG_OK, "%s", gimg_last_error());
    CHECK(misplaced(&in, 8, &out) == 0, "orientation 8 without EXIF: pixels misplaced");
    CHECK(out.meta && out.meta->orientation == 1 && !out.meta->exif,
          "orientation 8 without EXIF: not reset to 1, or an EXIF block appeared");
    CHECK(gimg_orient_cpu(&in, GIMG_ORIENT_ROT270, &ref) == GIMG_OK, "rot270");
    CHECK(same_image(&ref, &out), "orientation 8 != rot270");
    gimg_image_free(&ref);
    gimg_image_free(&out);
    gimg_image_free(&in);
}

/* A row stride wider than the row: the copy and the ops read rows by it. */
static void test_auto_padded_rows(void)
{
    gimg_image in, out;
    CHECK(gimg_image_alloc(&in, 9, 20, 3, GIMG_U8) == GIMG_OK, "alloc");
    testimg_fill_random(&in, 11);
    /* Reuse the buffer as 9 columns of 6 rows at a stride of 27 * 3. */
    in.height = 6;
    in.stride_bytes = 27 * 3;
    for (int o = 1; o <= 8; o++) {
        if (!in.meta)
            in.meta = gimg_meta_new();
        CHECK(in.meta != NULL, "meta");
        if (!in.meta)
            break;
        in.meta->orientation = o;
        CHECK(gimg_orient_cpu(&in, GIMG_ORIENT_AUTO, &out) == GIMG_OK, "%s", gimg_last_error());
        CHECK(misplaced(&in, o, &out) == 0, "orientation %d with padded rows", o);
        gimg_image_free(&out);
    }
    gimg_image_free(&in);
}

/* The spooled output (gimg_orient_spool_*) of im in bands of `rows` rows
 * gives whole's rows, in order, each once, with its layout, maxval and
 * metadata; flop's rows come with each band, the others' after the last. */
static void spooled_equal(const gimg_image *im, gimg_orient_op op, int rows,
                          const gimg_image *whole)
{
    gimg_orient_spool *s;
    gimg_image layout, out;
    int y0, next = 0, same = 1;
    if (gimg_orient_spool_begin(im, op, rows, &layout, &s)) {
        CHECK(0, "%s", gimg_last_error());
        return;
    }
    same = layout.width == whole->width && layout.height == whole->height &&
           layout.channels == whole->channels && layout.sample == whole->sample &&
           layout.maxval == whole->maxval && !layout.data && layout.meta &&
           layout.meta->orientation == whole->meta->orientation;
    const size_t row_bytes = (size_t)whole->width * gimg_pixel_bytes(whole);
    gimg_status st = GIMG_OK;
    for (int y = 0; !st && same && y < im->height; y += rows) {
        gimg_image band = *im;
        band.meta = NULL;
        band.data = (unsigned char *)gimg_row(im, y);
        band.height = im->height - y < rows ? im->height - y : rows;
        st = gimg_orient_spool_add(s, &band, y);
        const int last = y + band.height == im->height;
        while (!st && same && !(st = gimg_orient_spool_next(s, &out, &y0)) && out.height) {
            same = y0 == next && (op == GIMG_ORIENT_FLOP || last) &&
                   out.width == whole->width && out.maxval == whole->maxval &&
                   y0 + out.height <= whole->height;
            for (int i = 0; same && i < out.height; i++)
                same = !memcmp(gimg_row(&out, i), gimg_row(whole, y0 + i), row_bytes);
            next += out.height;
        }
    }
    CHECK(!st && same && next == whole->height, "%s of %dx%d c%d spooled in bands of %d rows: "
          "%s, %d rows of %d", gimg_orient_name(op), im->width, im->height, im->channels, rows,
          st ? gimg_last_error() : same ? "" : "differs", next, whole->height);
    gimg_meta_free(layout.meta);
    gimg_orient_spool_free(s);
}

/* The same, each band placed straight into a PAM file (gimg_orient_spool_place,
 * band.h's gimg_band_writer_block), in blocks of a few columns (the memory
 * budget made small: several blocks, bands wider than the rest of one),
 * gives the file gimg_write gives for whole; next gives no rows. Floats
 * are not placed: PAM converts them. */
static char g_dir[64];
static void placed_equal(const gimg_image *im, gimg_orient_op op, int rows,
                         const gimg_image *whole)
{
    if (im->sample == GIMG_F32)
        return;
    char whole_path[128], bands_path[128];
    snprintf(whole_path, sizeof whole_path, "%s/whole.pam", g_dir);
    snprintf(bands_path, sizeof bands_path, "%s/bands.pam", g_dir);
    gimg_write_opts opts;
    gimg_write_opts_init(&opts);
    gimg_orient_spool *s = NULL;
    gimg_band_writer *w = NULL;
    gimg_image layout = {0}, out;
    int y0, no_rows = 1;
    const uint64_t budget = gimg_max_memory();
    gimg_status st = gimg_write(whole_path, whole, &opts);
    /* A block: two bands' bytes (budget / GIMG_BAND_SHARE), or 8 KiB. */
    const uint64_t band_bytes = (uint64_t)(rows < im->height ? rows : im->height) *
                                (uint64_t)im->width * gimg_pixel_bytes(im);
    gimg_set_max_memory(band_bytes * 2 * GIMG_BAND_SHARE > (64 << 10)
                            ? band_bytes * 2 * GIMG_BAND_SHARE : (64 << 10));
    if (!st)
        st = gimg_orient_spool_begin(im, op, rows, &layout, &s);
    if (!st)
        st = gimg_band_writer_open(bands_path, &layout, 1, &opts, &w);
    CHECK(st || (w && gimg_band_writer_places(w)), "no writer that places");
    for (int y = 0; !st && w && y < im->height; y += rows) {
        gimg_image band = *im;
        band.meta = NULL;
        band.data = (unsigned char *)gimg_row(im, y);
        band.height = im->height - y < rows ? im->height - y : rows;
        if (!(st = gimg_orient_spool_place(s, &band, y, w)) &&
            !(st = gimg_orient_spool_next(s, &out, &y0)))
            no_rows &= out.height == 0;
    }
    gimg_orient_spool_free(s);
    gimg_status closed = gimg_band_writer_close(w, !st);
    st = st ? st : closed;
    gimg_set_max_memory(budget);
    size_t a_len = 0, b_len = 0;
    unsigned char *a = st ? NULL : slurp(whole_path, &a_len);
    unsigned char *b = st ? NULL : slurp(bands_path, &b_len);
    CHECK(!st && no_rows && a && b && a_len == b_len && !memcmp(a, b, a_len),
          "%s of %dx%d c%d placed in bands of %d rows: %s", gimg_orient_name(op), im->width,
          im->height, im->channels, rows, st ? gimg_last_error() : "differs");
    free(a);
    free(b);
    gimg_meta_free(layout.meta);
    unlink(whole_path);
    unlink(bands_path);
}

/* Every symmetry but auto, band by band (gimg_orient_bands_*, and spooled
 * through a temporary file: gimg_orient_spool_*), equals the whole
 * image's, byte for byte, metadata included: every pixel size,
 * awkward sizes (a row, a column, odd), bands of 1 row, awkward heights,
 * the height - 1, more than the height; auto is refused. */
/* A spool whose output would need more than TMPDIR's file system has
 * (2^24 x 2^24 gray: 256 TiB) is refused at its first band, naming the
 * need and the folder, before writing anything; one that fits is not. */
static void test_spool_no_room(void)
{
    const int side = 1 << 24;
    gimg_image header = {.width = side, .height = side, .channels = 1, .sample = GIMG_U8};
    gimg_image layout, band;
    gimg_orient_spool *s = NULL;
    gimg_status st = gimg_orient_spool_begin(&header, GIMG_ORIENT_ROT90, 1, &layout, &s);
    CHECK(st == GIMG_OK && s, "begin: %s", gimg_last_error());
    if (st || gimg_image_alloc(&band, side, 1, 1, GIMG_U8)) {
        gimg_orient_spool_free(s);
        return;
    }
    memset(band.data, 7, (size_t)side);
    st = gimg_orient_spool_add(s, &band, 0);
    CHECK(st == GIMG_E_LIMIT && strstr(gimg_last_error(), "the temporary file needs 256 TiB in ") &&
              strstr(gimg_last_error(), "set TMPDIR"),
          "status %d: %s", (int)st, gimg_last_error());
    gimg_orient_spool_free(s);
    gimg_meta_free(layout.meta);
    /* The same band of an image of 2 rows: 32 MiB, room enough. */
    header.height = 2;
    st = gimg_orient_spool_begin(&header, GIMG_ORIENT_ROT90, 1, &layout, &s);
    CHECK(st == GIMG_OK && gimg_orient_spool_add(s, &band, 0) == GIMG_OK, "2 rows: %s",
          gimg_last_error());
    gimg_orient_spool_free(s);
    gimg_meta_free(layout.meta);
    gimg_image_free(&band);
}

static void test_bands(void)
{
    static const int sizes[][2] = {{1, 1}, {37, 1}, {1, 29}, {17, 9}, {61, 40}, {301, 203}};
    static const struct { int c; gimg_sample s; } layouts[] = {
        {1, GIMG_U8}, {3, GIMG_U8}, {2, GIMG_U16}, {4, GIMG_U16}, {3, GIMG_F32}};
    static const gimg_orient_op ops[] = {GIMG_ORIENT_TRANSPOSE, GIMG_ORIENT_TRANSVERSE,
                                         GIMG_ORIENT_FLIP, GIMG_ORIENT_FLOP, GIMG_ORIENT_ROT90,
                                         GIMG_ORIENT_ROT180, GIMG_ORIENT_ROT270};
    for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++)
        for (size_t l = 0; l < sizeof layouts / sizeof *layouts; l++) {
            gimg_image im;
            if (gimg_image_alloc(&im, sizes[z][0], sizes[z][1], layouts[l].c, layouts[l].s) ||
                !(im.meta = gimg_meta_new())) {
                CHECK(0, "out of memory");
                return;
            }
            testimg_fill_random(&im, 40 + z * 7 + l);
            im.meta->x_dpi = 72;
            gimg_meta_set_orientation(im.meta, 3);
            for (size_t o = 0; o < sizeof ops / sizeof *ops; o++) {
                gimg_image whole;
                if (gimg_orient_cpu(&im, ops[o], &whole)) {
                    CHECK(0, "%s", gimg_last_error());
                    continue;
                }
                const int rows[] = {1, 2, 7, im.height - 1, im.height + 1};
                for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
                    if (rows[r] < 1)
                        continue;
                    gimg_image out;
                    if (gimg_orient_bands_begin(&im, ops[o], &out)) {
                        CHECK(0, "%s", gimg_last_error());
                        break;
                    }
                    for (int y = 0; y < im.height; y += rows[r]) {
                        gimg_image band = im;
                        band.meta = NULL;
                        band.data = gimg_row(&im, y);
                        band.height = im.height - y < rows[r] ? im.height - y : rows[r];
                        gimg_orient_bands_add(&im, ops[o], &band, y, &out);
                    }
                    int same = out.width == whole.width && out.height == whole.height &&
                               out.maxval == whole.maxval &&
                               out.meta->orientation == whole.meta->orientation;
                    const size_t row_bytes = (size_t)out.width * gimg_pixel_bytes(&out);
                    for (int y = 0; same && y < out.height; y++)
                        same = !memcmp(gimg_row(&out, y), gimg_row(&whole, y), row_bytes);
                    CHECK(same, "%s of %dx%d c%d, bands of %d rows", gimg_orient_name(ops[o]),
                          im.width, im.height, im.channels, rows[r]);
                    gimg_image_free(&out);
                    spooled_equal(&im, ops[o], rows[r], &whole);
                    placed_equal(&im, ops[o], rows[r], &whole);
                }
                gimg_image_free(&whole);
            }
            gimg_image_free(&im);
        }
    gimg_image im, out;
    if (!gimg_image_alloc(&im, 4, 4, 1, GIMG_U8)) {
        CHECK(gimg_orient_bands_begin(&im, GIMG_ORIENT_AUTO, &out) == GIMG_E_USAGE && !out.data,
              "auto in bands");
        gimg_image_free(&im);
    }
}

int main(void)
{
    if (!(g_cpu = testimg_cpu_ctx()))
        return 1;
    RUN(test_parse);
    RUN(test_from_exif);
    RUN(test_auto_all_orientations);
    RUN(test_other_ops_keep_orientation);
    RUN(test_auto_nothing_to_do);
    RUN(test_auto_padded_rows);
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/unit_orient-XXXXXX", tmp && *tmp && strlen(tmp) < 40 ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_bands);
    RUN(test_spool_no_room);
    rmdir(g_dir);
    gimg_ctx_close(g_cpu);
    return check_summary();
}
