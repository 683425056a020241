/*
 * precheck.c — structural checks of files before stb_image (2.27, Debian's
 * libstb-dev) decodes them: BMP, TGA and Radiance HDR, the formats left to
 * stb (codec_stb.c). stb reads past the end of its buffer as zeros, which
 * turns truncation into silent garbage or worse, and looks palette indices
 * up without checking them; each check walks the file the way stb will,
 * without decoding, and refuses what stb mishandles. Found by
 * tests/unit_io.c, tests/unit_precheck.c and tests/cli_codec_stb.sh, which
 * keep them fixed. (PNG and JPEG, which stb decoded before, have codecs of
 * their own on libspng and libjpeg-turbo, which check their files
 * themselves.)
 */
#include "precheck_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const unsigned char *p, *end;
} cursor;

/* The next line without its '\n' (stb's tokens are lines); NULL at the end. */
static const unsigned char *next_line(cursor *c, size_t *n)
{
    if (c->p >= c->end)
        return NULL;
    const unsigned char *start = c->p;
    const unsigned char *nl = memchr(start, '\n', (size_t)(c->end - start));
    *n = (size_t)((nl ? nl : c->end) - start);
    c->p = nl ? nl + 1 : c->end;
    return start;
}

static gimg_status truncated(void)
{
    return gimg_fail(GIMG_E_FORMAT, "truncated HDR data");
}

/* The rest of the file must hold `pixels` flat 4-byte RGBE pixels. */
static gimg_status need_flat(const cursor *c, uint64_t pixels)
{
    return (uint64_t)(c->end - c->p) / 4 < pixels ? truncated() : GIMG_OK;
}

/* A decimal number of an HDR resolution line: its digits as the file
 * states them (for messages, cut past 24 digits), and its value, capped
 * at LONG_MAX (*value -1 if there are no digits). Returns past them. */
static const char *hdr_number(const char *p, long *value, char text[32])
{
    size_t n = 0;
    long v = -1;
    while (*p >= '0' && *p <= '9') {
        long d = *p - '0';
        v = v < 0 ? d : v > (LONG_MAX - d) / 10 ? LONG_MAX : v * 10 + d;
        if (n < 24)
            text[n++] = *p;
        else if (n == 24)
            memcpy(text + n, "...", 3), n += 3;
        p++;
    }
    text[n] = '\0';
    *value = v;
    return p;
}

/* Walks to stb's "-Y H +X W" line (the header lines up to an empty one,
 * then that line) and parses it: GIMG_OK with *width, *height and c past
 * the line; a size out of range is refused with the numbers the file
 * states, not ones cut to an int. */
static gimg_status hdr_resolution(cursor *c, long *width, long *height, int *bad_size)
{
    *bad_size = 0;
    size_t n;
    const unsigned char *line = next_line(c, &n);       /* "#?RADIANCE" */
    if (!line)
        return truncated();
    while ((line = next_line(c, &n)) != NULL && n > 0)
        ;                                                /* header lines */
    if (!line || !(line = next_line(c, &n)))
        return truncated();
    char res[64], wtext[32], htext[32];
    if (n >= sizeof res)
        return gimg_fail(GIMG_E_FORMAT, "unsupported HDR data layout");
    memcpy(res, line, n);
    res[n] = '\0';
    if (strncmp(res, "-Y ", 3) != 0)
        return gimg_fail(GIMG_E_FORMAT, "unsupported HDR data layout");
    const char *q = res + 3;
    while (*q == ' ')
        q++;
    q = hdr_number(q, height, htext);
    while (*q == ' ')
        q++;
    if (strncmp(q, "+X ", 3) != 0)
        return gimg_fail(GIMG_E_FORMAT, "unsupported HDR data layout");
    for (q += 3; *q == ' ';)
        q++;
    hdr_number(q, width, wtext);
    *bad_size = *width < 1 || *height < 1 || *width > GIMG_MAX_DIMENSION ||
                *height > GIMG_MAX_DIMENSION;
    if (*width < 1 || *height < 1)
        return gimg_fail(GIMG_E_FORMAT, "invalid HDR image size %sx%s", *wtext ? wtext : "?",
                         *htext ? htext : "?");
    if (*width > GIMG_MAX_DIMENSION || *height > GIMG_MAX_DIMENSION)
        return gimg_fail(GIMG_E_LIMIT, "HDR image %sx%s exceeds the limit of %d pixels per side",
                         wtext, htext, GIMG_MAX_DIMENSION);
    return GIMG_OK;
}

gimg_status gimg_hdr_check_size(const unsigned char *buf, size_t len)
{
    cursor c = {buf, buf + len};
    long width, height;
    int bad_size;
    gimg_status st = hdr_resolution(&c, &width, &height, &bad_size);
    return bad_size ? st : GIMG_OK; /* the rest is stb's to report */
}

/* HDR: in run-length-encoded scanlines a zero count never advances, so a
 * truncated file (or a corrupt zero count) hangs stb's loader. Walks the
 * path of stbi__hdr_load: header lines up to an empty one, the "-Y H +X W"
 * line, then flat RGBE pixels or, for widths 8 to 32767, scanlines of four
 * run-length-encoded component planes. */
gimg_status gimg_hdr_validate(const unsigned char *buf, size_t len)
{
    cursor c = {buf, buf + len};
    long width, height;
    int bad_size;
    gimg_status st = hdr_resolution(&c, &width, &height, &bad_size);
    if (st)
        return st;

    if (width < 8 || width >= 32768)
        return need_flat(&c, (uint64_t)width * (uint64_t)height);
    for (long j = 0; j < height; j++) {
        if (c.end - c.p < 4)
            return truncated();
        if (c.p[0] != 2 || c.p[1] != 2 || (c.p[2] & 0x80))
            /* Not run-length encoded: stb reads the whole image flat from here. */
            return need_flat(&c, (uint64_t)width * (uint64_t)height);
        if (((long)c.p[2] << 8 | c.p[3]) != width)
            return GIMG_OK;                              /* stb reports it */
        c.p += 4;
        for (int k = 0; k < 4; k++)
            for (long i = 0; i < width;) {
                if (c.p >= c.end)
                    return truncated();
                unsigned count = *c.p++;
                if (count > 128) {
                    if (c.p >= c.end)
                        return truncated();
                    c.p++;
                    count -= 128;
                } else if (count == 0) {
                    return gimg_fail(GIMG_E_FORMAT, "corrupt HDR data: empty run");
                } else {
                    if ((size_t)(c.end - c.p) < count)
                        return truncated();
                    c.p += count;
                }
                if (count > (unsigned long)(width - i))
                    return GIMG_OK;                      /* stb reports the overrun */
                i += count;
            }
    }
    return GIMG_OK;
}

static unsigned le16(const unsigned char *p) { return (unsigned)p[1] << 8 | p[0]; }
static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

static gimg_status truncated_pixels(const char *format)
{
    return gimg_fail(GIMG_E_FORMAT, "truncated %s data", format);
}

/* Index x of a row of 1-, 4- or 8-bit indices, packed from the high bits
 * of each byte down, as BMP stores them. */
static unsigned packed_index(const unsigned char *row, uint64_t x, unsigned bits)
{
    if (bits == 8)
        return row[x];
    const uint64_t bit = x * bits;
    return (unsigned)(row[bit / 8] >> (8 - bits - bit % 8)) & ((1u << bits) - 1);
}

/* BMP with a palette (1, 4 and 8 bits a pixel, uncompressed: stb refuses
 * the RLE ones): every pixel index must name one of the palette's colours.
 * stb loads only the entries that fit between the header and the pixel
 * data (sizing them from the pixel data's offset, and for OS/2 headers
 * four entries short: stb 2.27 subtracts 24 bytes where that header has
 * 12) into a 256-entry array whose other entries it leaves uninitialised,
 * and looks every index up there. The palette's colours are those the
 * header declares (biClrUsed, or 2^bits when 0) and stb loaded. The rows
 * lie within the file (bmp_check saw to it). */
static gimg_status bmp_index_check(const unsigned char *b, uint32_t offset, uint32_t header,
                                   uint64_t width, uint64_t rows, uint64_t row_bytes,
                                   unsigned bits)
{
    const int os2 = header == 12;
    const uint64_t palette_start = os2 ? 14 + 24 : 14 + (uint64_t)header;
    const uint64_t loaded = offset > palette_start ? (offset - palette_start) / (os2 ? 3 : 4) : 0;
    const uint64_t used = os2 ? 0 : le32(b + 46);
    uint64_t colours = used && used < (1u << bits) ? used : 1u << bits;
    if (loaded < colours)
        colours = loaded;
    if (colours == 0)
        return gimg_fail(GIMG_E_FORMAT, "corrupt BMP: no palette before the pixel data");
    if (colours >= (1u << bits))
        return GIMG_OK;                                  /* every index is valid */
    for (uint64_t y = 0; y < rows; y++) {
        const unsigned char *row = b + offset + y * row_bytes;
        for (uint64_t x = 0; x < width; x++) {
            const unsigned i = packed_index(row, x, bits);
            if (i >= colours)
                return gimg_fail(GIMG_E_FORMAT,
                                 "corrupt BMP: pixel index %u past the palette's %u colours", i,
                                 (unsigned)colours);
        }
    }
    return GIMG_OK;
}

/* BMP: the header, the palette and the uncompressed pixel rows (BI_RGB,
 * BI_BITFIELDS) must all be there: stb reads what is missing as zeros; and
 * a palette image's indices must name colours of its palette. */
static gimg_status bmp_check(const unsigned char *b, size_t len)
{
    if (len < 18)
        return gimg_fail(GIMG_E_FORMAT, "truncated BMP header");
    const uint32_t offset = le32(b + 10), header = le32(b + 14);
    if (header != 12 && header < 40)
        return GIMG_OK;                                  /* stb reports it */
    if (len < 14 + (size_t)header)
        return gimg_fail(GIMG_E_FORMAT, "truncated BMP header");
    const int os2 = header == 12;
    const int64_t w = os2 ? (int64_t)le16(b + 18) : (int64_t)(int32_t)le32(b + 18);
    const int64_t h = os2 ? (int64_t)le16(b + 20) : (int64_t)(int32_t)le32(b + 22);
    const unsigned bpp = le16(b + (os2 ? 24 : 28));
    const uint32_t compression = os2 ? 0 : le32(b + 30);
    if ((compression != 0 && compression != 3) || w <= 0 || h == 0 || bpp == 0 || bpp > 32 ||
        offset > INT32_MAX)
        return GIMG_OK;                                  /* stb refuses these */
    if (bpp <= 8) {
        /* The palette: as many entries as the header says it uses (all of
         * them when it says 0), each 3 bytes (OS/2) or 4. */
        const uint64_t used = os2 ? 0 : le32(b + 46);
        const uint64_t entries = used && used < (1u << bpp) ? used : 1u << bpp;
        if (14 + (uint64_t)header + entries * (os2 ? 3 : 4) > len)
            return gimg_fail(GIMG_E_FORMAT, "truncated BMP palette");
    }
    const uint64_t row = ((uint64_t)bpp * (uint64_t)w + 31) / 32 * 4;
    const uint64_t rows = (uint64_t)(h < 0 ? -h : h);
    if (row > ((uint64_t)1 << 40) / rows || (uint64_t)offset + row * rows > len)
        return truncated_pixels("BMP");
    if (bpp == 1 || bpp == 4 || bpp == 8)
        return bmp_index_check(b, offset, header, (uint64_t)w, rows, row, bpp);
    return GIMG_OK;
}

/* TGA: the colour map and the pixels (raw, or run-length packets) must all
 * be there, and a colour-mapped image's indices must name entries of its
 * map (stb would take entry 0 for the others).
 *
 * The colour map's "first entry index" (the number of the first entry the
 * file stores, for maps stored in part) is read by stb as a number of
 * bytes to skip before the map: it shifts both where stb reads the map and
 * the pixels, and which entry an index names. A file whose first entry
 * index moves the pixel data past its end is refused as truncated (stb
 * would decode zeros); any other nonzero first entry index, which stb
 * would decode into the wrong colours, as unsupported. */
static gimg_status tga_check(const unsigned char *b, size_t len)
{
    if (len < 18)
        return GIMG_OK;
    const unsigned type = b[2], w = le16(b + 12), h = le16(b + 14);
    const int mapped = b[1] != 0;
    const unsigned first = mapped ? le16(b + 3) : 0, entries = le16(b + 5);
    const unsigned pixel = (b[16] + 7u) / 8, map = mapped ? entries * ((b[7] + 7u) / 8) : 0;
    const int rle = type >= 9 && type <= 11;
    if (!((type >= 1 && type <= 3) || rle) || pixel == 0)
        return GIMG_OK;
    size_t p = 18 + (size_t)b[0] + first + map;
    uint64_t pixels = (uint64_t)w * h;
    if (!rle && p + pixels * pixel > len)
        return first ? gimg_fail(GIMG_E_FORMAT,
                                 "truncated TGA data (the colour map's first entry index, %u, "
                                 "moves the pixel data past the end of the file)", first)
                     : truncated_pixels("TGA");
    /* Pixels from p on, each `pixel` bytes: raw ones in a row, or packets
     * of a count byte then one pixel repeated or count pixels. */
    uint64_t left = pixels;
    while (left > 0) {
        size_t run = 1;
        int repeated = 0;
        if (rle) {
            if (p >= len)
                break;
            const unsigned head = b[p++];
            run = (head & 0x7F) + 1u;
            repeated = head & 0x80;
            if ((repeated ? pixel : run * pixel) > len - p)
                break;
        } else {
            run = (size_t)left;
        }
        for (size_t k = 0; mapped && k < (repeated ? 1 : run) && k < left; k++) {
            const size_t at = p + k * pixel;
            const unsigned i = pixel == 1 ? b[at] : le16(b + at);
            if (i >= entries)
                return gimg_fail(GIMG_E_FORMAT,
                                 "corrupt TGA: pixel index %u past the colour map's %u entries",
                                 i, entries);
        }
        p += repeated ? pixel : run * pixel;
        left = run >= left ? 0 : left - run;
    }
    if (left > 0)
        return first ? gimg_fail(GIMG_E_FORMAT,
                                 "truncated TGA data (the colour map's first entry index, %u, "
                                 "moves the pixel data past the end of the file)", first)
                     : truncated_pixels("TGA");
    if (first)
        return gimg_fail(GIMG_E_FORMAT,
                         "unsupported TGA: a colour map that starts at entry %u (stb_image "
                         "misreads it)", first);
    return GIMG_OK;
}

gimg_status gimg_precheck(gimg_format f, const unsigned char *buf, size_t len)
{
    switch (f) {
    case GIMG_FMT_HDR: return gimg_hdr_validate(buf, len);
    case GIMG_FMT_BMP: return bmp_check(buf, len);
    case GIMG_FMT_TGA: return tga_check(buf, len);
    default: return GIMG_OK;
    }
}
