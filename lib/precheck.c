/*
 * precheck.c — structural checks of files before stb_image (2.27, Debian's
 * libstb-dev) decodes them. stb reads past the end of its buffer as zeros,
 * which turns truncation into silent garbage or worse; each check walks the
 * file the way stb will, without decoding, and refuses what stb mishandles.
 * Found by tests/unit_io.c and tests/unit_precheck.c, which keep them fixed.
 */
#include "precheck_internal.h"

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

/* HDR: in run-length-encoded scanlines a zero count never advances, so a
 * truncated file (or a corrupt zero count) hangs stb's loader. Walks the
 * path of stbi__hdr_load: header lines up to an empty one, the "-Y H +X W"
 * line, then flat RGBE pixels or, for widths 8 to 32767, scanlines of four
 * run-length-encoded component planes. */
gimg_status gimg_hdr_validate(const unsigned char *buf, size_t len)
{
    cursor c = {buf, buf + len};
    size_t n;
    const unsigned char *line = next_line(&c, &n);      /* "#?RADIANCE" */
    if (!line)
        return truncated();
    while ((line = next_line(&c, &n)) != NULL && n > 0)
        ;                                                /* header lines */
    if (!line || !(line = next_line(&c, &n)))
        return truncated();
    char res[64];
    if (n >= sizeof res)
        return gimg_fail(GIMG_E_FORMAT, "unsupported HDR data layout");
    memcpy(res, line, n);
    res[n] = '\0';
    char *q;
    if (strncmp(res, "-Y ", 3) != 0)
        return gimg_fail(GIMG_E_FORMAT, "unsupported HDR data layout");
    long height = strtol(res + 3, &q, 10);
    while (*q == ' ')
        q++;
    if (strncmp(q, "+X ", 3) != 0)
        return gimg_fail(GIMG_E_FORMAT, "unsupported HDR data layout");
    long width = strtol(q + 3, NULL, 10);
    if (width < 1 || height < 1 || width > GIMG_MAX_DIMENSION || height > GIMG_MAX_DIMENSION)
        return gimg_fail(GIMG_E_FORMAT, "invalid HDR image size %ldx%ld", width, height);

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

static unsigned be16(const unsigned char *p) { return (unsigned)p[0] << 8 | p[1]; }
static unsigned le16(const unsigned char *p) { return (unsigned)p[1] << 8 | p[0]; }
static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

/* JPEG: a DHT segment's 16 code-length counts may add up to 4080, and
 * stb 2.27 builds the table into a 257-entry array without checking (later
 * stb refuses more than 256). Walks the markers, skipping entropy-coded
 * data after each SOS, and checks every Huffman table. */
static gimg_status jpeg_check(const unsigned char *b, size_t len)
{
    size_t p = 2;
    while (p + 4 <= len) {
        if (b[p] != 0xFF)
            return GIMG_OK;                              /* stb reports it */
        const unsigned m = b[p + 1];
        if (m == 0xFF || m == 0x01 || m == 0xD8 || (m >= 0xD0 && m <= 0xD7)) {
            p += m == 0xFF ? 1 : 2;                      /* fill byte, or no length */
            continue;
        }
        if (m == 0xD9)
            return GIMG_OK;                              /* end of image */
        const size_t seg = be16(b + p + 2), end = p + 2 + seg;
        if (seg < 2 || end > len)
            return GIMG_OK;                              /* stb reports truncation */
        if (m == 0xC4)
            for (size_t q = p + 4; q + 17 <= end;) {
                unsigned codes = 0;
                for (int i = 1; i <= 16; i++)
                    codes += b[q + i];
                if (codes > 256)
                    return gimg_fail(GIMG_E_FORMAT,
                                     "corrupt JPEG: a Huffman table of %u codes (at most 256)",
                                     codes);
                q += 17 + codes;
            }
        p = end;
        if (m == 0xDA)                                   /* skip the entropy-coded data */
            while (p + 1 < len && !(b[p] == 0xFF && b[p + 1] != 0 &&
                                    !(b[p + 1] >= 0xD0 && b[p + 1] <= 0xD7)))
                p++;
    }
    return GIMG_OK;
}

static gimg_status truncated_pixels(const char *format)
{
    return gimg_fail(GIMG_E_FORMAT, "truncated %s data", format);
}

/* BMP: uncompressed pixel rows (BI_RGB, BI_BITFIELDS) must all be there. */
static gimg_status bmp_check(const unsigned char *b, size_t len)
{
    if (len < 34)
        return GIMG_OK;                                  /* stb reports it */
    const uint32_t offset = le32(b + 10), header = le32(b + 14);
    if (header < 40)
        return GIMG_OK;                                  /* old OS/2 header: stb checks */
    const int64_t w = (int32_t)le32(b + 18), h = (int32_t)le32(b + 22);
    const unsigned bpp = le16(b + 28);
    const uint32_t compression = le32(b + 30);
    if ((compression != 0 && compression != 3) || w <= 0 || h == 0 || bpp == 0 || bpp > 32)
        return GIMG_OK;
    const uint64_t row = ((uint64_t)bpp * (uint64_t)w + 31) / 32 * 4;
    const uint64_t rows = (uint64_t)(h < 0 ? -h : h);
    if (row > ((uint64_t)1 << 40) / rows || (uint64_t)offset + row * rows > len)
        return truncated_pixels("BMP");
    return GIMG_OK;
}

/* TGA: the colour map and the pixels (raw, or run-length packets) must all
 * be there. */
static gimg_status tga_check(const unsigned char *b, size_t len)
{
    if (len < 18)
        return GIMG_OK;
    const unsigned type = b[2], w = le16(b + 12), h = le16(b + 14);
    const unsigned pixel = (b[16] + 7u) / 8, map = b[1] ? le16(b + 5) * ((b[7] + 7u) / 8) : 0;
    const int rle = type >= 9 && type <= 11;
    if (!((type >= 1 && type <= 3) || rle) || pixel == 0)
        return GIMG_OK;
    size_t p = 18 + (size_t)b[0] + map;
    uint64_t pixels = (uint64_t)w * h;
    if (!rle)
        return p + pixels * pixel > len ? truncated_pixels("TGA") : GIMG_OK;
    while (pixels > 0) {
        if (p >= len)
            return truncated_pixels("TGA");
        const unsigned head = b[p++], count = (head & 0x7F) + 1u;
        const size_t bytes = head & 0x80 ? pixel : (size_t)count * pixel;
        if (bytes > len - p)
            return truncated_pixels("TGA");
        p += bytes;
        pixels = count >= pixels ? 0 : pixels - count;
    }
    return GIMG_OK;
}

gimg_status gimg_precheck(gimg_format f, const unsigned char *buf, size_t len)
{
    switch (f) {
    case GIMG_FMT_HDR: return gimg_hdr_validate(buf, len);
    case GIMG_FMT_JPEG: return jpeg_check(buf, len);
    case GIMG_FMT_BMP: return bmp_check(buf, len);
    case GIMG_FMT_TGA: return tga_check(buf, len);
    default: return GIMG_OK;
    }
}
