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

#include <stdlib.h>

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
 * symmetry sends it in the output, which is held whole (one image, not
 * two). --op auto, whose symmetry may come from metadata that follows the
 * pixels, reads the image whole. */
static gimg_status bands_begin(void *user, gimg_ctx *ctx, gimg_driver_item *item,
                               const gimg_image *header, void **state)
{
    settings *s = user;
    *state = NULL;
    if (s->op == GIMG_ORIENT_AUTO)
        return GIMG_OK;
    gimg_image *copy = malloc(sizeof *copy);
    if (!copy)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    gimg_status st = gimg_orient_bands_begin(header, s->op, &item->image[0]);
    if (st) {
        free(copy);
        return st;
    }
    *copy = *header;
    copy->meta = NULL;
    *state = copy;
    return GIMG_OK;
}

static gimg_status bands_place(void *user, void *state, gimg_driver_item *item,
                               const gimg_image *band, int y0)
{
    const settings *s = user;
    gimg_orient_bands_add(state, s->op, band, y0, &item->image[0]);
    return GIMG_OK;
}

static gimg_status bands_end(void *user, void *state, gimg_driver_item *item, FILE *out)
{
    free(state);
    return GIMG_OK;
}

int main(int argc, char **argv)
{
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
        .bands = {.begin = bands_begin, .place = bands_place, .end = bands_end},
        .user = &s,
    };
    return gimg_drive(&driver, &c);
}
