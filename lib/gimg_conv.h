/*
 * gimg_conv.h — 2-D convolution (gconv): kernel specifications, named
 * kernels, and the convolution of an image by a chain of kernels.
 *
 * A kernel is stored in its correlation form: the output at (x, y) is
 *
 *     sum over i < height, j < width of  taps[i * width + j] * in(x + j - ax, y + i - ay)
 *
 * with (ax, ay) = (anchor_x, anchor_y). True convolution (the default of
 * gconv) rotates a custom kernel by 180 degrees, anchor included, when it
 * is parsed, so that everything downstream is one operation. Named kernels
 * are defined by their effect and are never rotated.
 *
 * Arithmetic: samples are widened to float (8/16-bit as their integer
 * values, so 0..255 or 0..65535), every tap is one fused multiply-add in the
 * order of the sum above (rows, then columns), and 8/16-bit results are
 * clamped to 0..maxval (gimg_image_max) and rounded to nearest (ties to even). The
 * CPU reference, the fast CPU path and the GPU follow the same plan and give
 * the same bits.
 */
#ifndef GIMG_CONV_H
#define GIMG_CONV_H

#include "gimg.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest kernel side accepted by the parser (taps are float). */
#define GIMG_KERNEL_MAX_SIDE 255
/* The largest kernel file (@FILE) read: 64 bytes for each tap of the
 * largest kernel, the longest number the parser takes (63 characters) and
 * a separator, so 4,161,600 bytes. Reading stops as soon as a file is
 * longer (an endless /dev/zero fails at once, in 4 MB). */
#define GIMG_KERNEL_MAX_FILE_BYTES ((size_t)GIMG_KERNEL_MAX_SIDE * GIMG_KERNEL_MAX_SIDE * 64)

typedef enum {
    GIMG_BORDER_CLAMP = 0, /* a a | a b c d | d d */
    GIMG_BORDER_MIRROR,    /* b a | a b c d | d c */
    GIMG_BORDER_REFLECT,   /* c b | a b c d | c b */
    GIMG_BORDER_WRAP,      /* c d | a b c d | a b */
    GIMG_BORDER_ZERO       /* 0 0 | a b c d | 0 0 */
} gimg_border;

typedef enum {
    GIMG_ALPHA_PREMULTIPLY = 0, /* colours weighted by alpha, divided by the convolved alpha */
    GIMG_ALPHA_KEEP,            /* alpha copied, colours convolved as they are */
    GIMG_ALPHA_INCLUDE          /* every channel convolved independently */
} gimg_alpha_mode;

/* How a kernel is applied (chosen once, when it is made; every backend
 * follows it, which is what makes their results identical). */
typedef enum {
    GIMG_KERNEL_DENSE = 0,  /* the sum above, all taps */
    GIMG_KERNEL_SEPARABLE,  /* taps[i][j] == col[i] * row[j] exactly in float: a row pass
                               tmp = sum_j row[j] * in(x + j - ax, y), then a column pass
                               out = sum_i col[i] * tmp(x, y + i - ay), tmp in float */
    GIMG_KERNEL_MAGNITUDE   /* two dense kernels of one size, taps (gx) and taps_y (gy):
                               out = sqrt(gx * gx + gy * gy), as sqrtf(fmaf(gx, gx, gy * gy)) */
} gimg_kernel_kind;

typedef struct {
    char name[48];           /* "gaussian:2", "custom 3x3", "@file" (for -v) */
    gimg_kernel_kind kind;
    int width, height;       /* 1..GIMG_KERNEL_MAX_SIDE */
    int anchor_x, anchor_y;  /* 0 <= anchor < size */
    float *taps;             /* width * height, correlation form, row-major */
    float *taps_y;           /* MAGNITUDE: the second kernel; else NULL */
    float *row, *col;        /* SEPARABLE: width and height factors; else NULL */
    double divided_by;       /* the sum the written taps were divided by (normalize);
                                0: applied as written */
} gimg_kernel;

/*
 * Parses one -k specification into *k (which the caller releases with
 * gimg_kernel_free, also after a failure):
 *   NAME[:ARG[:ARG]]     a named kernel (see gimg_kernel_names)
 *   ROW; ROW; ...        inline rows of numbers (blanks or commas between them)
 *   @FILE                a file of rows, one per line, '#' comments; at most
 *                        GIMG_KERNEL_MAX_FILE_BYTES
 * A flat list, one row with no ';' anywhere (a file's one line counts), of
 * n * n numbers, n >= 2, is an n x n kernel, as ImageMagick reads
 * "1,2,1,2,4,2,1,2,1"; any other count stays one row ("1 2 1"), and a ';'
 * makes a row of n * n numbers one row ("1 1 1 1;").
 * correlate: apply a custom kernel unrotated (else rotated by 180 degrees);
 * normalize: divide a custom kernel by its sum unless the sum is zero
 * (within the precision of the taps: |sum| <= 1e-6 * sum of |taps|, so that
 * an edge detector written in decimals is never blown up). Named kernels
 * are never normalized.
 * Errors: GIMG_E_USAGE with a message naming the problem (bad number,
 * ragged rows, empty kernel, unknown name with the list of names, too
 * large, a kernel file over the size limit); GIMG_E_IO when FILE cannot be
 * read; GIMG_E_NOMEM.
 */
gimg_status gimg_kernel_parse(const char *spec, int correlate, int normalize, gimg_kernel *k);
/* The same for a buffer holding a kernel file's text (no '@'); name is used
 * in messages. */
gimg_status gimg_kernel_parse_text(const char *text, size_t len, const char *name,
                                   int correlate, int normalize, gimg_kernel *k);
void gimg_kernel_free(gimg_kernel *k);
/* The named kernels, for --help: a static, comma-separated list. */
const char *gimg_kernel_names(void);

typedef struct {
    const gimg_kernel *kernels; /* applied in order, in float between them */
    int n_kernels;              /* >= 1 */
    gimg_border border;
    gimg_alpha_mode alpha;      /* for 2- and 4-channel images */
    float scale, bias;          /* out = fmaf(conv, scale, bias), after the last kernel */
    int absolute;               /* then |out| */
} gimg_conv_opts;

/* Sets scale 1, bias 0, clamp, premultiply, no kernels. */
void gimg_conv_opts_init(gimg_conv_opts *o);

/* The direct, obviously correct CPU reference (slow: for tests). Allocates
 * *out (same layout as in; the caller frees it). */
gimg_status gimg_conv_reference(const gimg_image *in, const gimg_conv_opts *o, gimg_image *out);
/* The fast CPU backend (all cores, vectorized); the same bits as the
 * reference. Allocates *out. */
gimg_status gimg_conv_cpu(const gimg_image *in, const gimg_conv_opts *o, gimg_image *out);
/* Runs on the backend ctx chooses (GPU or CPU; identical results).
 * Allocates *out. */
gimg_status gimg_conv(gimg_ctx *ctx, const gimg_image *in, const gimg_conv_opts *o,
                      gimg_image *out);

/*
 * The convolution of an image too large to hold, given band by band
 * (gimg(7) LARGE IMAGES): the same bits as gimg_conv_cpu's output, row
 * for row. begin takes the context whose choice of backend (as
 * gimg_conv's, for the whole image) computes the bands, or NULL for the
 * CPU, and the whole image's layout (size, channels, sample, maxval; no
 * pixels); *cb is NULL (GIMG_OK) for the wrap border, whose first rows
 * need the image's last: convolve such an image whole. add takes the
 * next input band (rows in order, any height) and gives in *out the
 * output rows now complete, rows [*y0, *y0 + out->height) (height 0: none
 * yet; a view valid until the next call); after the last band, every row
 * left. Memory: the bands' rows plus the kernels' halo rows, and the
 * intermediate rows of a chain (on the GPU, a band's worth of device
 * memory, or less where less is free). The calls of one cb come from one
 * thread.
 */
typedef struct gimg_conv_bands gimg_conv_bands;
gimg_status gimg_conv_bands_begin(gimg_ctx *ctx, const gimg_image *layout,
                                  const gimg_conv_opts *o, gimg_conv_bands **cb);
gimg_status gimg_conv_bands_add(gimg_conv_bands *cb, const gimg_image *band, gimg_image *out,
                                int *y0);
void gimg_conv_bands_free(gimg_conv_bands *cb);

#ifdef __cplusplus
}
#endif
#endif /* GIMG_CONV_H */
