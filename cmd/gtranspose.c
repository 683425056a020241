/*
 * gtranspose — transposes, flips or rotates an image (the eight symmetries
 * of the rectangle), or puts it upright from its EXIF orientation (--op
 * auto), on the CPU or, with --device gpu, on the GPU. The image's
 * metadata goes with it (gimg_orient.h says what changes).
 *
 *   gtranspose [options] INPUT [OUTPUT]        see gtranspose(1)
 *   gtranspose [options] -o DIR/|PATTERN INPUT...
 *
 * Exit status: 0 success, 1 runtime error, 2 usage error.
 */
#include "driver.h"
#include "gimg_orient.h"
#include "orient_internal.h"

#include <stdlib.h>
#include <string.h>

#define TOOL "gtranspose"

enum { OPT_OP };

static const gimg_cli_option k_options[] = {
    {"op", 0, "OP",
     "transpose (default), transverse, flip, flop, rot90, rot180, rot270, or auto: "
     "upright from the EXIF orientation, which becomes 1",
     OPT_OP},
    {NULL, 0, NULL, NULL, 0},
};

typedef struct {
    gimg_orient_op op;
} settings;

static gimg_status handle_option(void *user, int key, const char *arg)
{
    settings *s = user;
    if (key == OPT_OP && gimg_orient_parse(arg, &s->op) != GIMG_OK)
        return GIMG_E_USAGE; /* its message stands; any bad name is a usage error */
    return GIMG_OK;
}

static gimg_status transform(void *user, gimg_ctx *ctx, const gimg_image *in, gimg_image *out)
{
    const settings *s = user;
    return gimg_orient(ctx, in, s->op, out);
}

/* An image read in bands (gimg(7) LARGE IMAGES): each band put where the
 * symmetry sends it, in an output spooled through a temporary file and
 * written as its rows come out (spool_begin), or, where the output cannot
 * be written so, in the output held whole (begin: one image, not two).
 * --op auto, whose symmetry may come from metadata that follows the
 * pixels, reads the image whole. */
typedef struct {
    gimg_image header;           /* the input's layout (no metadata) */
    gimg_orient_spool *spool;    /* NULL: the output is held whole */
} band_state;

static gimg_status start_bands(const gimg_image *header, band_state **b)
{
    if (!(*b = calloc(1, sizeof **b)))
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    (*b)->header = *header;
    (*b)->header.meta = NULL;
    return GIMG_OK;
}

static gimg_status bands_begin(void *user, gimg_ctx *ctx, gimg_driver_item *item,
                               const gimg_image *header, void **state)
{
    settings *s = user;
    band_state *b = NULL;
    *state = NULL;
    if (s->op == GIMG_ORIENT_AUTO)
        return GIMG_OK;
    gimg_status st = start_bands(header, &b);
    if (!st && (st = gimg_orient_bands_begin(header, s->op, &item->image[0])))
        free(b);
    *state = st ? NULL : b;
    return st;
}

static gimg_status bands_spool_begin(void *user, gimg_ctx *ctx, gimg_driver_item *item,
                                     const gimg_image *header, int band_rows,
                                     gimg_image *layout, void **state)
{
    settings *s = user;
    band_state *b = NULL;
    *state = NULL;
    memset(layout, 0, sizeof *layout);
    if (s->op == GIMG_ORIENT_AUTO)
        return GIMG_OK;
    gimg_status st = start_bands(header, &b);
    if (!st && (st = gimg_orient_spool_begin(header, s->op, band_rows, layout, &b->spool)))
        free(b);
    *state = st ? NULL : b;
    return st;
}

static gimg_status bands_place(void *user, void *state, gimg_driver_item *item,
                               const gimg_image *band, int y0)
{
    const settings *s = user;
    band_state *b = state;
    if (b->spool)
        return gimg_orient_spool_place(b->spool, band, y0, item->placer);
    gimg_orient_bands_add(&b->header, s->op, band, y0, &item->image[0]);
    return GIMG_OK;
}

static gimg_status bands_next(void *user, void *state, gimg_image *out, int *out_y0)
{
    return gimg_orient_spool_next(((band_state *)state)->spool, out, out_y0);
}

static gimg_status bands_end(void *user, void *state, gimg_driver_item *item, FILE *out)
{
    band_state *b = state;
    gimg_orient_spool_free(b->spool);
    free(b);
    return GIMG_OK;
}

int main(int argc, char **argv)
{
    gimg_cli_settle_threads(argv);
    settings s = {GIMG_ORIENT_TRANSPOSE};
    const gimg_cli_spec spec = {
        .tool = TOOL,
        .description = "Transpose, flip or rotate an image, or put it upright (--op auto).",
        .options = k_options,
        .handle = handle_option,
        .user = &s,
        .with = GIMG_CLI_WITH_BATCH | GIMG_CLI_WITH_BANDS,
        .epilogue = "INPUT and OUTPUT may be '-' for standard input and output; without\n"
                    "INPUT, standard input is read when it is not a terminal; without\n"
                    "OUTPUT or -o the image goes to standard output. A PNM/PAM stream on\n"
                    "standard input is transformed image by image. With -o DIR/ or -o\n"
                    "PATTERN, every operand is an input: see gimg(7).",
    };
    gimg_cli_common c;
    int rc = gimg_cli_done(&spec, &c, gimg_cli_parse(&spec, argc, argv, &c));
    if (rc >= 0)
        return rc;
    gimg_install_signal_cleanup();
    const gimg_driver driver = {
        .tool = TOOL,
        .transform = transform,
        .bands = {.placed_band_bytes = GIMG_ORIENT_BAND_BYTES,
                  .begin = bands_begin,
                  .spool_begin = bands_spool_begin,
                  .place = bands_place,
                  .next = bands_next,
                  .end = bands_end},
        .user = &s,
    };
    return gimg_drive(&driver, &c);
}
