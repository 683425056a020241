/* precheck_internal.h — structural checks that run before stb_image decodes. */
#ifndef GIMG_PRECHECK_INTERNAL_H
#define GIMG_PRECHECK_INTERNAL_H

#include "gimg.h"

/* Refuses, for the formats stb_image decodes (BMP, TGA, HDR), what stb
 * 2.27 handles badly, without decoding anything (see precheck.c for each
 * case):
 *   HDR:  truncated or zero-length runs (stb loops forever);
 *   BMP, TGA: pixel data shorter than the header says (stb invents zeros);
 *   BMP:  palette indices past the palette's colours (stb reads its
 *         uninitialised palette array);
 *   TGA:  colour-map indices past the map (stb takes entry 0), and a
 *         colour map's first entry index, which stb misreads as bytes to
 *         skip (past the end of the file: zeros; otherwise wrong colours).
 * GIMG_OK when stb may decode the file (for other formats, always); other
 * defects are left to stb. */
gimg_status gimg_precheck(gimg_format f, const unsigned char *buf, size_t len);
gimg_status gimg_hdr_validate(const unsigned char *buf, size_t len);
/* An HDR file's size as its "-Y H +X W" line states it: refused when
 * below 1 or over GIMG_MAX_DIMENSION ("HDR image 10x99999999999 exceeds
 * the limit ..."), before stb reads it into an int; GIMG_OK otherwise,
 * whatever else is wrong with the file (stb reports that). */
gimg_status gimg_hdr_check_size(const unsigned char *buf, size_t len);

#endif
