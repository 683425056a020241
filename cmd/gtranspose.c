/*
 * gtranspose — transposes, flips or rotates an image (the eight symmetries
 * of the rectangle), on the CPU or, with --device gpu, on the GPU.
 *
 *   gtranspose [options] INPUT [OUTPUT]        see gtranspose(1)
 *
 * Exit status: 0 success, 1 runtime error, 2 usage error.
 */
#include "cli.h"
#include "gimg_orient.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOOL "gtranspose"

enum { OPT_OP };

static const gimg_cli_option k_options[] = {
    {"op", 0, "OP", "transpose (default), transverse, flip, flop, rot90, rot180 or rot270",
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

static void describe(const char *name, const gimg_info *info)
{
    static const char *const k_layout[] = {"", "gray", "gray+alpha", "RGB", "RGBA"};
    int ch = info->channels >= 1 && info->channels <= 4 ? info->channels : 0;
    fprintf(stderr, "%s: %s: %s %dx%d %s, %d-bit%s\n", TOOL, name,
            gimg_format_name(info->format), info->width, info->height, k_layout[ch],
            8 * (int)info->sample, info->sample == GIMG_F32 ? " float" : "");
}

/* Read, orient, write. Returns the exit status; prints its own errors. */
static int run(const gimg_cli_common *c, const settings *s, gimg_ctx *ctx)
{
    const char *in_name = gimg_cli_name(c->input, 0);
    const char *out_name = gimg_cli_name(c->output, 1);
    unsigned char *buf = NULL;
    size_t len = 0;
    gimg_image in = {0}, out = {0};

    double t0 = gimg_now_ms();
    gimg_status st = gimg_slurp(c->input, &buf, &len);
    if (st)
        return gimg_cli_error(TOOL, in_name, st);
    /* Knowing the size from the header lets CUDA start up while we decode.
     * A header the probe rejects is left to the decoder to report. */
    gimg_info info;
    size_t bytes;
    if (gimg_probe_memory(buf, len, &info) == GIMG_OK) {
        if (c->verbose)
            describe(in_name, &info);
        if (gimg_check_size(info.width, info.height, info.channels, info.sample, NULL,
                            &bytes) == GIMG_OK)
            gimg_ctx_prepare(ctx, bytes);
    }
    st = gimg_decode_memory(buf, len, &in);
    gimg_slurp_free(buf, len);
    gimg_ctx_add_time(ctx, GIMG_T_DECODE, gimg_now_ms() - t0);
    if (st)
        return gimg_cli_error(TOOL, in_name, st);

    t0 = gimg_now_ms();
    st = gimg_orient(ctx, &in, s->op, &out);
    gimg_ctx_add_time(ctx, GIMG_T_COMPUTE, gimg_now_ms() - t0);
    gimg_image_free(&in);
    if (st)
        return gimg_cli_error(TOOL, NULL, st);

    t0 = gimg_now_ms();
    st = gimg_write(c->output, &out, &c->write);
    gimg_ctx_add_time(ctx, GIMG_T_ENCODE, gimg_now_ms() - t0);
    gimg_image_free(&out);
    if (st)
        return gimg_cli_error(TOOL, out_name, st);
    return 0;
}

int main(int argc, char **argv)
{
    settings s = {GIMG_ORIENT_TRANSPOSE};
    const gimg_cli_spec spec = {
        .tool = TOOL,
        .description = "Transpose, flip or rotate an image.",
        .options = k_options,
        .handle = handle_option,
        .user = &s,
        .epilogue = "INPUT and OUTPUT may be '-' for standard input and output; without\n"
                    "OUTPUT or -o the image goes to standard output.",
    };
    gimg_cli_common c;
    int rc = gimg_cli_done(&spec, &c, gimg_cli_parse(&spec, argc, argv, &c));
    if (rc >= 0)
        return rc;
    /* Binary on a terminal is never wanted; say so before reading anything. */
    if (strcmp(c.output, "-") == 0 && isatty(STDOUT_FILENO))
        return gimg_cli_error(TOOL, NULL,
                              gimg_fail(GIMG_E_USAGE, "refusing to write image data to a "
                                                      "terminal (give OUTPUT or redirect)"));

    gimg_install_signal_cleanup();
    gimg_ctx *ctx = NULL;
    gimg_status st = gimg_ctx_open(&c.device, c.verbose, &ctx);
    if (st)
        return gimg_cli_error(TOOL, NULL, st);
    rc = run(&c, &s, ctx);
    if (rc == 0 && c.verbose)
        gimg_ctx_report(ctx, stderr, TOOL);
    gimg_ctx_close(ctx);
    if (rc)
        return rc;
    return gimg_cli_close_stdout(TOOL);
}
