/* hdr_internal.h — the Radiance HDR check that runs before stb decodes. */
#ifndef GIMG_HDR_INTERNAL_H
#define GIMG_HDR_INTERNAL_H

#include "gimg.h"

/* Walks a Radiance HDR file's header and scanlines the way stb_image's
 * loader will, without decoding, and refuses what would make that loader
 * hang or invent pixels: a run of length zero (stb loops forever on it, and
 * it reads zeros past the end of truncated data) or data that ends early.
 * GIMG_OK when stb can decode the file; other defects are left to stb. */
gimg_status gimg_hdr_validate(const unsigned char *buf, size_t len);

#endif
