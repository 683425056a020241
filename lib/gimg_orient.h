/*
 * gimg_orient.h — the eight symmetries of the rectangle (gtranspose), and
 * the EXIF orientation undone ("auto-orient").
 *
 * Every operation's output keeps the input's maxval and a copy of its
 * metadata (gimg_image.meta). Only GIMG_ORIENT_AUTO changes the
 * orientation it records (to 1, top-left); the others move the stored
 * pixels and leave the tag as it was, as `vips rot` and ImageMagick's
 * -rotate do. Operations that swap the width and the height record the
 * new size in the EXIF block's pixel dimensions, where it has them
 * (gimg_meta_set_dimensions).
 */
#ifndef GIMG_ORIENT_H
#define GIMG_ORIENT_H

#include "gimg.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The symmetries of the rectangle (dihedral group D4) other than the
 * identity, and AUTO. */
typedef enum {
    GIMG_ORIENT_TRANSPOSE,   /* out(r,c) = in(c, r) */
    GIMG_ORIENT_TRANSVERSE,  /* out(r,c) = in(H-1-c, W-1-r) */
    GIMG_ORIENT_FLIP,        /* top-bottom */
    GIMG_ORIENT_FLOP,        /* left-right */
    GIMG_ORIENT_ROT90,       /* clockwise */
    GIMG_ORIENT_ROT180,
    GIMG_ORIENT_ROT270,
    /* The symmetry that puts the image upright from the orientation its
     * metadata records (gimg_orient_from_exif), which then records 1; an
     * image that records none, or 1, comes out as a copy. */
    GIMG_ORIENT_AUTO
} gimg_orient_op;

/* "transpose", "transverse", "flip", "flop", "rot90", "rot180", "rot270",
 * "auto"; anything else is a usage error. */
gimg_status gimg_orient_parse(const char *name, gimg_orient_op *op);
const char *gimg_orient_name(gimg_orient_op op);

/* The symmetry that turns an image stored with EXIF (or TIFF) orientation
 * `orientation` upright, as `convert -auto-orient` and `vips autorot` do:
 *   2 flop, 3 rot180, 4 flip, 5 transpose, 6 rot90, 7 transverse, 8 rot270.
 * Returns 1 and sets *op for 2 to 8; returns 0 and leaves *op alone when
 * there is nothing to do: 1 (top-left), 0 (not recorded) or any value
 * outside 1..8. */
int gimg_orient_from_exif(int orientation, gimg_orient_op *op);

/* CPU reference and fallback. Allocates *out (caller frees). */
gimg_status gimg_orient_cpu(const gimg_image *in, gimg_orient_op op, gimg_image *out);
/* Runs on the backend ctx chose (GPU or CPU; bit-identical results).
 * Allocates *out (caller frees). */
gimg_status gimg_orient(gimg_ctx *ctx, const gimg_image *in, gimg_orient_op op,
                        gimg_image *out);

/*
 * A symmetry of an image too large to hold twice, given band by band
 * (gimg(7) LARGE IMAGES), on the CPU: begin allocates *out, op's output
 * for header's layout (size, channels, sample, maxval, metadata; no
 * pixels), with the metadata gimg_orient gives it; add puts the input's
 * rows [y0, y0 + band->height) where op sends them. Once every row was
 * added, *out is gimg_orient's output, byte for byte. Not for AUTO
 * (GIMG_E_USAGE), whose symmetry comes from metadata that may follow the
 * pixels (a PNG's EXIF).
 */
gimg_status gimg_orient_bands_begin(const gimg_image *header, gimg_orient_op op,
                                    gimg_image *out);
void gimg_orient_bands_add(const gimg_image *header, gimg_orient_op op, const gimg_image *band,
                           int y0, gimg_image *out);

/*
 * The same, its output spooled through a temporary file (in $TMPDIR, else
 * /tmp; unlinked from the start) rather than held, and given back in
 * order, band by band, for an output written as its rows come: memory
 * holds a few bands of band_rows input rows (the file, the image). begin
 * sets *layout to op's output for header (size, layout, maxval, the
 * metadata gimg_orient gives it, which the caller frees; no pixels).
 * add takes the input's bands in order (at most band_rows rows each);
 * next gives the output's rows ready, *out its rows [*out_y0, *out_y0 +
 * out->height) (a view valid until the next call; height 0: none now, or
 * none left): flop's after each band, the others' once every band was
 * added. The file is made at the first band, on a file system with room
 * for the output image. Errors: GIMG_E_IO (the temporary file), GIMG_E_LIMIT
 * (no room for it), GIMG_E_NOMEM. Not for AUTO (GIMG_E_USAGE).
 */
typedef struct gimg_orient_spool gimg_orient_spool;
gimg_status gimg_orient_spool_begin(const gimg_image *header, gimg_orient_op op, int band_rows,
                                    gimg_image *layout, gimg_orient_spool **s);
gimg_status gimg_orient_spool_add(gimg_orient_spool *s, const gimg_image *band, int y0);
gimg_status gimg_orient_spool_next(gimg_orient_spool *s, gimg_image *out, int *out_y0);
void gimg_orient_spool_free(gimg_orient_spool *s);

#ifdef __cplusplus
}
#endif
#endif /* GIMG_ORIENT_H */
