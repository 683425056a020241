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
 *    on standard output in input order, and optionally images (ghist's
 *    plots), written as a transform's outputs are.
 * Reports are computed in parallel (-j), each into a buffer of its own;
 * the buffers are printed on the calling thread in input order, through
 * the optional emit callback, which sees them one after the other and so
 * may keep state across inputs (print a CSV header once, separate tables).
 *
 * Inputs are the operands that are inputs (gimg_cli_common.n_inputs) then
 * the --files-from list. An input of "-" whose data starts like a PNM, PAM
 * or PFM image is read as a stream: image after image until its end, each
 * an item of the batch (written back as a stream when the output is "-").
 *
 * Outputs (-o or OUTPUT; a report tool's images): one input, and a name
 * without '%' or a final '/': that name. Otherwise DIR/ or PATTERN names
 * each (gimg_output_path); several inputs for one file, or two outputs of
 * one name, are a usage error before any work. The images of a stream
 * past the first need a pattern with %i (or "-").
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

/* Report tools may also make images, up to this many per input (ghist:
 * the equalized image and the plot). */
enum { GIMG_DRIVER_IMAGES = 2 };

/* Where a report tool's image k goes, named per input as -o names a
 * transform's outputs: one input and a file name, that file; otherwise
 * DIR/ or a pattern (gimg_output_path); "-": standard output, instead of
 * the report's text (which then goes to stderr with -v, else nowhere). */
typedef struct {
    const char *spec;    /* NULL: the tool makes no image k */
    const char *option;  /* how messages name spec: "--plot" */
    int keeps_meta;      /* 1: the image is the input's pixels changed (ghist's
                            equalized image): it gets the input's metadata */
} gimg_driver_output;

/* What a report tool's callbacks know of one input. */
typedef struct {
    int index;          /* 0-based, in input order */
    const char *name;   /* how reports and messages name it: the path,
                           "standard input", or "standard input (image N)"
                           for the images of a stream of several */
    int single;         /* 1 when the job is this one image: one input, or a
                           stream holding one image */
    unsigned tag;       /* report may set it, for emit (ghist: the CSV
                           columns, to compare inputs by) */
    char *note;         /* report may set it (malloc'd; the driver frees it):
                           printed on stderr as "tool: name: note" after the
                           report, in input order, unless -q (gstats: which
                           --fail-if an input failed) */
    /* Images (gimg_driver.images): report leaves image k in image[k]
     * (only where output[k] is not NULL); the driver writes it to
     * output[k] with write[k] (-f and the like, unless report changes
     * them), in order of k, and frees it; a failed report's are not
     * written. They are encoded on a CPU worker after report, so that
     * encoding holds up no compute lane, and counted as encode time. */
    const char *output[GIMG_DRIVER_IMAGES];
    gimg_image image[GIMG_DRIVER_IMAGES];
    gimg_write_opts write[GIMG_DRIVER_IMAGES];
    /* A spooled output (gimg_driver_bands' spool_begin) that takes blocks
     * at their places (band.h's gimg_band_writer_places): place may write
     * its bands there, with gimg_band_writer_block, instead of keeping
     * them; next then gives only rows that were not placed. NULL: not so. */
    struct gimg_band_writer *placer;
} gimg_driver_item;

/* Optional: an image read in bands (band.h: one of more pixels than the
 * threshold, or taller than --band-rows), so that it is never held whole.
 * begin sees the image's layout (header: size, channels, sample, maxval
 * and what metadata precedes the pixels; data NULL) and sets *state, or
 * leaves it NULL (GIMG_OK) when the job's settings need the whole image:
 * the driver then decodes it and calls report or transform. The bands
 * come in order (band: the image's rows y0 .. y0 + band->height - 1, a
 * view valid during the call):
 *  - report tools: add takes each; end writes the report to out as
 *    report would and frees state; with out NULL (a band or add failed)
 *    it only frees.
 *  - transform tools (whose output has the input's size): transform
 *    takes each and gives the output rows it completes, *out rows
 *    [*out_y0, *out_y0 + out->height) in order (height 0: none yet; a view
 *    valid until the next call), and after the last band all the rest;
 *    the driver writes them as they come where the output's format can
 *    be written so (band.h), else assembles the output image. Or, for
 *    outputs whose rows do not follow the input's (a flip, a rotation):
 *    begin allocates the whole output, item->image[0] (its metadata
 *    too), and place puts each band in it. Or, where the output can be
 *    written as its rows come and its metadata is complete, spool_begin
 *    (optional) sets *layout, the output's (size, layout, maxval, its
 *    metadata, which the driver frees; no pixels), and a state whose
 *    place keeps the bands elsewhere (a temporary file); after each band
 *    the driver takes the output rows next gives, in order (as
 *    transform's), until one of height 0. end(out NULL) frees state.
 * Called on a compute lane. Without on_gpu, bands are read on the CPU
 * only: a tool asked to use the GPU, or which may, reads the image whole.
 * on_gpu: begin hands ctx to the work, which computes the bands on the
 * device ctx chooses for the whole image (a transform's). */
typedef struct {
    int on_gpu;
    /* Optional: the bands' bytes where the output is placed (item's
     * placer), when larger than the default band's pay (gtranspose's
     * rotations: fewer, longer writes a row); unless --band-rows is
     * given, at most the memory budget / GIMG_BAND_SHARE. */
    size_t placed_band_bytes;
    gimg_status (*begin)(void *user, gimg_ctx *ctx, gimg_driver_item *item,
                         const gimg_image *header, void **state);
    gimg_status (*add)(void *user, void *state, const gimg_image *band, int y0);
    gimg_status (*transform)(void *user, void *state, const gimg_image *band, int y0,
                             gimg_image *out, int *out_y0);
    gimg_status (*spool_begin)(void *user, gimg_ctx *ctx, gimg_driver_item *item,
                               const gimg_image *header, int band_rows, gimg_image *layout,
                               void **state);
    gimg_status (*place)(void *user, void *state, gimg_driver_item *item,
                         const gimg_image *band, int y0);
    gimg_status (*next)(void *user, void *state, gimg_image *out, int *out_y0);
    gimg_status (*end)(void *user, void *state, gimg_driver_item *item, FILE *out);
} gimg_driver_bands;

typedef struct {
    const char *tool;
    /* One of these two. Called on a compute lane; ctx chooses the device. */
    gimg_status (*transform)(void *user, gimg_ctx *ctx, const gimg_image *in, gimg_image *out);
    /* Writes the report of one input to out (a buffer); on failure what it
     * wrote is dropped. May run for several inputs at once. */
    gimg_status (*report)(void *user, gimg_ctx *ctx, gimg_driver_item *item,
                          const gimg_image *in, FILE *out);
    /* Report tools, optional: prints what report wrote for item (text, len)
     * to out (standard output), on the calling thread, in input order, for
     * each input whose report succeeded. Without it the text is printed as
     * it is. A failure counts as the input's. */
    gimg_status (*emit)(void *user, gimg_driver_item *item, const char *text, size_t len,
                        FILE *out);
    /* Optional: called once the inputs are known (inputs[0 .. n_inputs-1];
     * stream: standard input is a stream of images, its number unknown) and
     * ctx is open, before any input is read. A failure ends the job: its
     * message is printed as "tool: message", the exit status is its
     * status's (2 for GIMG_E_USAGE). */
    gimg_status (*prepare)(void *user, gimg_ctx *ctx, char *const *inputs, int n_inputs,
                           int stream);
    /* Report tools, optional: the images report may make besides its text. */
    gimg_driver_output images[GIMG_DRIVER_IMAGES];
    /* Optional: large images in bands. */
    gimg_driver_bands bands;
    void *user;
} gimg_driver;

/* Runs the whole job; prints every error; returns the exit status (0 all
 * went well, 1 some input failed, 2 a usage error found before the work). */
int gimg_drive(const gimg_driver *d, const gimg_cli_common *c);


#ifdef __cplusplus
}
#endif
#endif /* GIMG_DRIVER_H */
