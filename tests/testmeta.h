/*
 * testmeta.h — metadata for the codec tests to write and read back: an
 * ICC-looking profile, an EXIF block with an orientation and pixel
 * dimensions, an XMP packet, each of any size and made here, and an image
 * given all of them (set_meta).
 */
#ifndef GIMG_TESTMETA_H
#define GIMG_TESTMETA_H

#include "gimg.h"
#include "testimg.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A profile of n bytes (n >= 132) that looks like an ICC profile to a
 * reader that only passes it on: the header (size, 'acsp', an RGB display
 * class), an empty tag table, then seeded bytes. malloc'd. */
static inline unsigned char *fake_icc(size_t n, uint64_t seed)
{
    unsigned char *p = malloc(n);
    if (!p)
        exit(1);
    uint64_t state = seed;
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)testimg_next(&state);
    memset(p, 0, 132);
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(n >> (24 - 8 * i));
    memcpy(p + 4, "gimg", 4);
    p[8] = 2;
    p[9] = 0x10;
    memcpy(p + 12, "mntr", 4);
    memcpy(p + 16, "RGB ", 4);
    memcpy(p + 20, "XYZ ", 4);
    memcpy(p + 36, "acsp", 4);
    return p;
}

/* An EXIF block (TIFF-structured, little- or big-endian) with IFD0's
 * Orientation and the Exif IFD's PixelXDimension and PixelYDimension,
 * padded with seeded bytes to `n` bytes (n >= 68). malloc'd. */
static inline unsigned char *make_exif(size_t n, int orientation, int big_endian, int w, int h)
{
    unsigned char *p = calloc(1, n);
    if (!p)
        exit(1);
    uint64_t state = n;
    for (size_t i = 64; i < n; i++)
        p[i] = (unsigned char)testimg_next(&state);
#define W16(at, v) (big_endian ? (p[at] = (unsigned char)((v) >> 8), p[(at) + 1] = (unsigned char)(v)) \
                               : (p[at] = (unsigned char)(v), p[(at) + 1] = (unsigned char)((v) >> 8)))
#define W32(at, v) (W16((at) + (big_endian ? 0 : 2), (unsigned)(v) >> 16), \
                    W16((at) + (big_endian ? 2 : 0), (unsigned)(v) & 0xFFFF))
    p[0] = p[1] = big_endian ? 'M' : 'I';
    W16(2, 42);
    W32(4, 8);
    /* IFD0 at 8: 2 entries, then no next IFD (8 + 2 + 24 + 4 = 38). */
    W16(8, 2);
    W16(10, 0x0112); W16(12, 3); W32(14, 1); W16(18, orientation);
    W16(22, 0x8769); W16(24, 4); W32(26, 1); W32(30, 38);
    W32(34, 0);
    /* The Exif IFD at 38: 2 LONG entries (38 + 2 + 24 + 4 = 68 > 64: pad after). */
    W16(38, 2);
    W16(40, 0xA002); W16(42, 4); W32(44, 1); W32(48, w);
    W16(52, 0xA003); W16(54, 4); W32(56, 1); W32(60, h);
    W32(64, 0);
#undef W16
#undef W32
    return p;
}

/* An XMP packet of n bytes (n >= 200), padded with spaces as XMP pads. */
static inline unsigned char *make_xmp(size_t n)
{
    static const char head[] =
        "<?xpacket begin='' id='W5M0MpCehiHzreSzNTczkc9d'?>"
        "<x:xmpmeta xmlns:x='adobe:ns:meta/'><rdf:RDF "
        "xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'/></x:xmpmeta>";
    static const char tail[] = "<?xpacket end='w'?>";
    unsigned char *p = malloc(n);
    if (!p)
        exit(1);
    memset(p, ' ', n);
    memcpy(p, head, sizeof head - 1);
    memcpy(p + n - (sizeof tail - 1), tail, sizeof tail - 1);
    return p;
}

static inline int same_blob(const unsigned char *a, size_t na, const unsigned char *b,
                            size_t nb)
{
    return na == nb && (na == 0 || (a && b && memcmp(a, b, na) == 0));
}

/* 1, with the first difference in why, if got's ICC profile, EXIF, XMP or
 * orientation is not want's; 0 if all four are. */
static inline int meta_blobs_differ(const gimg_meta *got, const gimg_meta *want, char *why,
                                    size_t size)
{
    if (!same_blob(got->icc, got->icc_bytes, want->icc, want->icc_bytes))
        snprintf(why, size, "ICC profile of %zu bytes, wanted %zu", got->icc_bytes,
                 want->icc_bytes);
    else if (!same_blob(got->exif, got->exif_bytes, want->exif, want->exif_bytes))
        snprintf(why, size, "EXIF of %zu bytes, wanted %zu", got->exif_bytes, want->exif_bytes);
    else if (!same_blob(got->xmp, got->xmp_bytes, want->xmp, want->xmp_bytes))
        snprintf(why, size, "XMP of %zu bytes, wanted %zu", got->xmp_bytes, want->xmp_bytes);
    else if (got->orientation != want->orientation)
        snprintf(why, size, "orientation %d, wanted %d", got->orientation, want->orientation);
    else
        return 0;
    return 1;
}

/* Gives im a gimg_meta with the blobs and resolution asked (a 0 size: none). */
static inline void set_meta(gimg_image *im, size_t icc_bytes, size_t exif_bytes,
                            int orientation, size_t xmp_bytes, double x_dpi, double y_dpi)
{
    gimg_meta *m = gimg_meta_new();
    if (!m)
        exit(1);
    if (icc_bytes) {
        m->icc = fake_icc(icc_bytes, icc_bytes);
        m->icc_bytes = icc_bytes;
    }
    if (exif_bytes) {
        m->exif = make_exif(exif_bytes, orientation, 0, im->width, im->height);
        m->exif_bytes = exif_bytes;
        m->orientation = orientation;
    }
    if (xmp_bytes) {
        m->xmp = make_xmp(xmp_bytes);
        m->xmp_bytes = xmp_bytes;
    }
    m->x_dpi = x_dpi;
    m->y_dpi = y_dpi;
    gimg_meta_free(im->meta);
    im->meta = m;
}

#endif
