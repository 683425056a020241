/*
 * png_idat.h — a non-interlaced PNG's image data decoded by us: the zlib
 * stream its IDAT chunks carry, inflated (on a thread of its own for a
 * large image), and its rows unfiltered into the samples as stored, 16-bit
 * samples in host order (what libspng's SPNG_FMT_PNG gives). codec_png.c
 * uses it where the file's chunks are whole and its IDAT chunks one run
 * (png_idat.c says why), and checks everything else with libspng.
 */
#ifndef GIMG_PNG_IDAT_H
#define GIMG_PNG_IDAT_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    PNG_IDAT_OK,
    PNG_IDAT_SHORT,    /* the stream, or the run of IDAT chunks, ends before the last row */
    PNG_IDAT_ZLIB,     /* the zlib stream is invalid */
    PNG_IDAT_FILTER,   /* a row's filter type is over 4 */
    PNG_IDAT_NOMEM,
} png_idat_error;

typedef struct {
    const unsigned char *buf;   /* the file, whole up to IEND (the caller checked) */
    size_t len;
    size_t first_idat;          /* the first IDAT chunk's offset (its length field) */
    uint32_t height;
    size_t row_bytes;           /* a row as stored, without its filter byte */
    unsigned filter_bpp;        /* the filters' bytes per pixel: 1 to 8 */
    int sixteen;                /* 16-bit samples: swapped to host order */
} png_idat_layout;

typedef struct png_idat png_idat;

/* Opens the stream (its 2-byte zlib header checked here) and, for a large
 * image, starts inflating ahead on a thread. *out is NULL on failure. The
 * caller closes it with png_idat_close(); buf must outlive it. */
png_idat_error png_idat_open(const png_idat_layout *layout, png_idat **out);
/* The next n rows, row i at out + i * stride (stride >= row_bytes). The
 * rows before an error are written; the error is then given again. */
png_idat_error png_idat_read(png_idat *d, unsigned char *out, size_t stride, uint32_t n);
void png_idat_close(png_idat *d);

#endif
