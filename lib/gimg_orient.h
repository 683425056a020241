/* gimg_orient.h — the eight symmetries of the rectangle (gtranspose). */
#ifndef GIMG_ORIENT_H
#define GIMG_ORIENT_H

#include "gimg.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The eight symmetries of the rectangle (dihedral group D4). */
typedef enum {
    GIMG_ORIENT_TRANSPOSE,   /* out(r,c) = in(c, r) */
    GIMG_ORIENT_TRANSVERSE,  /* out(r,c) = in(H-1-c, W-1-r) */
    GIMG_ORIENT_FLIP,        /* top-bottom */
    GIMG_ORIENT_FLOP,        /* left-right */
    GIMG_ORIENT_ROT90,       /* clockwise */
    GIMG_ORIENT_ROT180,
    GIMG_ORIENT_ROT270
} gimg_orient_op;

gimg_status gimg_orient_parse(const char *name, gimg_orient_op *op);
const char *gimg_orient_name(gimg_orient_op op);

/* CPU reference and fallback. Allocates *out (caller frees). */
gimg_status gimg_orient_cpu(const gimg_image *in, gimg_orient_op op, gimg_image *out);
/* Runs on the backend ctx chose (GPU or CPU; bit-identical results).
 * Allocates *out (caller frees). */
gimg_status gimg_orient(gimg_ctx *ctx, const gimg_image *in, gimg_orient_op op,
                        gimg_image *out);

#ifdef __cplusplus
}
#endif
#endif /* GIMG_ORIENT_H */
