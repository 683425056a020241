/*
 * driver.h — what a tool does with its inputs, once its options are parsed:
 * one image or many, files, a PNM stream on standard input, outputs named
 * by -o, reports printed in input order, errors reported per input, and the
 * pipeline (batch.h) overlapping decode, compute and encode.
 *
 * A tool supplies one callback:
 *  - transform (image tools: gtranspose, gconv): an input image to an
 *    output image, written to the input's output name;
 *  - report (report tools: gstats, ghist): an input image to text, printed
 *    on standard output in input order.
 *
 * Inputs are the operands that are inputs (gimg_cli_common.n_inputs) then
 * the --files-from list. An input of "-" whose data starts like a PNM, PAM
 * or PFM image is read as a stream: image after image until its end, each
 * an item of the batch (written back as a stream when the output is "-").
 *
 * Outputs: one input, and -o or OUTPUT without '%': that name. Otherwise
 * -o DIR/ or -o PATTERN names each (gimg_output_path), checked for
 * collisions before any work.
 *
 * Errors: each failing input is reported as "tool: name: reason" on
 * stderr; the others go on (unless --fail-fast). Ownership: the callbacks
 * must not keep `in`; transform allocates *out, which the driver frees.
 */
#ifndef GIMG_DRIVER_H
#define GIMG_DRIVER_H

#include "cli.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *tool;
    /* One of these two. Called on a compute lane; ctx chooses the device. */
    gimg_status (*transform)(void *user, gimg_ctx *ctx, const gimg_image *in, gimg_image *out);
    /* name is how messages name the input ("standard input" for "-"). */
    gimg_status (*report)(void *user, gimg_ctx *ctx, const char *name, const gimg_image *in,
                          FILE *out);
    void *user;
} gimg_driver;

/* Runs the whole job; prints every error; returns the exit status (0 all
 * went well, 1 some input failed, 2 a usage error found before the work). */
int gimg_drive(const gimg_driver *d, const gimg_cli_common *c);

/* Reads and decodes one file into *im (the caller frees it), letting CUDA
 * start on ctx while the pixels decode; the time counts as decoding. For
 * tools that read their inputs themselves. */
gimg_status gimg_ctx_read(gimg_ctx *ctx, const char *path, gimg_image *im);

#ifdef __cplusplus
}
#endif
#endif /* GIMG_DRIVER_H */
