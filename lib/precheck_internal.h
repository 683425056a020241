/* precheck_internal.h — structural checks that run before stb_image decodes. */
#ifndef GIMG_PRECHECK_INTERNAL_H
#define GIMG_PRECHECK_INTERNAL_H

#include "gimg.h"

/* Refuses, for the formats stb_image decodes, what stb 2.27 handles badly,
 * without decoding anything (see precheck.c for each case):
 *   HDR:  truncated or zero-length runs (stb loops forever);
 *   JPEG: a Huffman table of more than 256 codes (stb writes out of bounds),
 *         a scan using a table no DHT defined (stb reads uninitialized memory);
 *   BMP, TGA: pixel data shorter than the header says (stb invents zeros);
 *   PNG:  chunks cut short, no IEND, bad CRCs (stb checks none).
 * GIMG_OK when stb may decode the file; other defects are left to stb. */
gimg_status gimg_precheck(gimg_format f, const unsigned char *buf, size_t len);
/* The PNG walk of gimg_precheck (IDAT's CRCs checked only when
 * check_idat_crc is set: the probe skips them); also stores the channels
 * stb will decode to, when channels is not NULL. */
gimg_status gimg_png_precheck(const unsigned char *buf, size_t len, int check_idat_crc,
                              int *channels);
gimg_status gimg_hdr_validate(const unsigned char *buf, size_t len);

#endif
