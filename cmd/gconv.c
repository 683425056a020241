/*
 * gconv — convolves an image with named or custom kernels, on the CPU or
 * the GPU, with identical results.
 *
 *   gconv -k SPEC [-k SPEC...] [options] INPUT [OUTPUT]       see gconv(1)
 *   gconv -k SPEC [-k SPEC...] [options] -o DIR/|PATTERN INPUT...
 *
 * Custom kernels are divided by their sum (unless it is 0) by default, as
 * ImageMagick's -convolve does; --no-normalize applies them as written.
 *
 * Exit status: 0 success, 1 runtime error, 2 usage error (kernel
 * specifications included, checked before the input is read).
 */
#include "driver.h"
#include "gimg_conv.h"

#include <stdlib.h>
#include <string.h>

#define TOOL "gconv"
#define MAX_KERNELS 64

enum { OPT_KERNEL, OPT_CORRELATE, OPT_NORMALIZE, OPT_NO_NORMALIZE, OPT_SCALE, OPT_BIAS, OPT_ABS,
       OPT_BORDER, OPT_ALPHA };

static const gimg_cli_option k_options[] = {
    {"kernel", 'k', "SPEC",
     "a named kernel (NAME[:ARG[:ARG]]), rows of numbers ('1 2 1; 2 4 2; 1 2 1', or n*n "
     "numbers in one flat list for n x n: '1,2,1,2,4,2,1,2,1') or @FILE; repeat to apply "
     "several in order", OPT_KERNEL},
    {"correlate", 0, NULL, "apply custom kernels unrotated (correlation)", OPT_CORRELATE},
    {"normalize", 0, NULL,
     "divide custom kernels by their sum unless it is 0, as ImageMagick's -convolve does "
     "(the default)", OPT_NORMALIZE},
    {"no-normalize", 0, NULL, "apply custom kernels as written, not divided by their sum",
     OPT_NO_NORMALIZE},
    {"scale", 0, "F", "multiply the result by F (default 1)", OPT_SCALE},
    {"bias", 0, "B", "add B to the result, after --scale (default 0)", OPT_BIAS},
    {"abs", 0, NULL, "take the absolute value of the result before rounding", OPT_ABS},
    {"border", 0, "MODE", "clamp (default), mirror, reflect, wrap or zero", OPT_BORDER},
    {"alpha", 0, "MODE", "premultiply (default), keep or include", OPT_ALPHA},
    {NULL, 0, NULL, NULL, 0},
};

typedef struct {
    const char *specs[MAX_KERNELS];
    int n_specs, correlate;
    int normalize; /* 1 unless --no-normalize: the last of the two wins */
    gimg_conv_opts opts;
} settings;

/* The index of arg in names; otherwise a usage error that lists them all:
 * "--border: unknown mode 'edge' (clamp, mirror, reflect, wrap, zero)". */
static gimg_status pick(const char *what, const char *arg, const char *const *names, int n,
                        int *out)
{
    char valid[256] = "";
    for (int i = 0; i < n; i++) {
        if (!strcmp(arg, names[i])) {
            *out = i;
            return GIMG_OK;
        }
        size_t used = strlen(valid);
        snprintf(valid + used, sizeof valid - used, "%s%s", i ? ", " : "", names[i]);
    }
    return gimg_fail(GIMG_E_USAGE, "%s: unknown mode '%.100s' (%s)", what, arg, valid);
}

static gimg_status handle_option(void *user, int key, const char *arg)
{
    settings *s = user;
    static const char *const borders[] = {"clamp", "mirror", "reflect", "wrap", "zero"};
    static const char *const alphas[] = {"premultiply", "keep", "include"};
    double v;
    int m = 0;
    gimg_status st = GIMG_OK;
    switch (key) {
    case OPT_KERNEL:
        if (s->n_specs == MAX_KERNELS)
            return gimg_fail(GIMG_E_USAGE, "too many kernels (at most %d)", MAX_KERNELS);
        s->specs[s->n_specs++] = arg;
        break;
    case OPT_CORRELATE: s->correlate = 1; break;
    case OPT_NORMALIZE: s->normalize = 1; break;
    case OPT_NO_NORMALIZE: s->normalize = 0; break;
    case OPT_ABS: s->opts.absolute = 1; break;
    case OPT_SCALE:
        if (!(st = gimg_cli_parse_double("--scale", arg, -1e30, 1e30, &v)))
            s->opts.scale = (float)v;
        break;
    case OPT_BIAS:
        if (!(st = gimg_cli_parse_double("--bias", arg, -1e30, 1e30, &v)))
            s->opts.bias = (float)v;
        break;
    case OPT_BORDER:
        if (!(st = pick("--border", arg, borders, 5, &m)))
            s->opts.border = (gimg_border)m;
        break;
    case OPT_ALPHA:
        if (!(st = pick("--alpha", arg, alphas, 3, &m)))
            s->opts.alpha = (gimg_alpha_mode)m;
        break;
    }
    return st;
}

/* One image (the driver reads, writes and runs many; ctx picks the device). */
static gimg_status transform(void *user, gimg_ctx *ctx, const gimg_image *in, gimg_image *out)
{
    const settings *s = user;
    return gimg_conv(ctx, in, &s->opts, out);
}

/* An image read in bands (gimg(7) LARGE IMAGES): gimg_conv_bands, which
 * gives the same rows as the whole image's convolution, on the backend
 * the context chooses for the whole image. The
 * wrap border, whose first rows need the image's last, reads it whole. */
static gimg_status bands_begin(void *user, gimg_ctx *ctx, gimg_driver_item *item,
                               const gimg_image *header, void **state)
{
    const settings *s = user;
    gimg_conv_bands *cb;
    gimg_status st = gimg_conv_bands_begin(ctx, header, &s->opts, &cb);
    *state = cb;
    return st;
}

static gimg_status bands_transform(void *user, void *state, const gimg_image *band, int y0,
                                   gimg_image *out, int *out_y0)
{
    return gimg_conv_bands_add(state, band, out, out_y0);
}

static gimg_status bands_end(void *user, void *state, gimg_driver_item *item, FILE *out)
{
    gimg_conv_bands_free(state);
    return GIMG_OK;
}

int main(int argc, char **argv)
{
    gimg_cli_settle_threads(argv);
    settings s = {.normalize = 1};
    gimg_conv_opts_init(&s.opts);
    const gimg_cli_spec spec = {
        .tool = TOOL,
        .description = "Convolve each channel of an image with one or more kernels.",
        .options = k_options,
        .handle = handle_option,
        .user = &s,
        .with = GIMG_CLI_WITH_BATCH | GIMG_CLI_WITH_BANDS,
        .epilogue =
            "Named kernels: box:R, gaussian:SIGMA[:RADIUS], sharpen, unsharp:SIGMA[:AMOUNT],\n"
            "laplacian, log:SIGMA, emboss, edge, sobel-x, sobel-y, scharr-x, scharr-y,\n"
            "prewitt-x, prewitt-y, and sobel, scharr, prewitt (gradient magnitude).\n"
            "INPUT and OUTPUT may be '-' for standard input and output; without\n"
            "OUTPUT or -o the image goes to standard output. A PNM/PAM stream on\n"
            "standard input is convolved image by image. With -o DIR/ or -o\n"
            "PATTERN, every operand is an input: see gimg(7).",
    };
    gimg_cli_common c;
    int rc = gimg_cli_done(&spec, &c, gimg_cli_parse(&spec, argc, argv, &c));
    if (rc >= 0)
        return rc;
    if (s.n_specs == 0)
        return gimg_cli_error(TOOL, NULL, gimg_fail(GIMG_E_USAGE, "no kernel: give -k SPEC"));

    /* Every kernel is parsed (and every kernel file read) before the input. */
    gimg_kernel kernels[MAX_KERNELS];
    memset(kernels, 0, sizeof kernels);
    for (int i = 0; i < s.n_specs; i++) {
        gimg_status st = gimg_kernel_parse(s.specs[i], s.correlate, s.normalize, &kernels[i]);
        if (st) {
            for (int j = 0; j <= i; j++)
                gimg_kernel_free(&kernels[j]);
            return gimg_cli_error(TOOL, NULL, st);
        }
    }
    s.opts.kernels = kernels;
    s.opts.n_kernels = s.n_specs;

    if (c.verbose)
        for (int i = 0; i < s.opts.n_kernels; i++) {
            const gimg_kernel *k = &kernels[i];
            fprintf(stderr, "%s: kernel %d: %s, %dx%d, %s", TOOL, i + 1, k->name, k->width,
                    k->height, k->kind == GIMG_KERNEL_SEPARABLE ? "separable"
                               : k->kind == GIMG_KERNEL_MAGNITUDE ? "gradient magnitude" : "dense");
            if (k->divided_by != 0) /* say so: the default changes what was typed */
                fprintf(stderr, ", divided by its sum %g", k->divided_by);
            fputc('\n', stderr);
        }
    gimg_install_signal_cleanup();
    const gimg_driver driver = {
        .tool = TOOL,
        .transform = transform,
        .bands = {.on_gpu = 1,
                  .begin = bands_begin,
                  .transform = bands_transform,
                  .end = bands_end},
        .user = &s,
    };
    rc = gimg_drive(&driver, &c);
    for (int i = 0; i < s.n_specs; i++)
        gimg_kernel_free(&kernels[i]);
    return rc;
}
