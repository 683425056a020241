/*
 * precheck.c — structural checks of files before stb_image (2.27, Debian's
 * libstb-dev) decodes them. stb reads past the end of its buffer as zeros,
 * which turns truncation into silent garbage or worse; each check walks the
 * file the way stb will, without decoding, and refuses what stb mishandles.
 * Found by tests/unit_io.c and tests/unit_precheck.c, which keep them fixed.
 */
#include "precheck_internal.h"

#include <libdeflate.h>
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

static unsigned le16(const unsigned char *p) { return (unsigned)p[1] << 8 | p[0]; }
static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

/* The byte at i, or 0 past the end: what stb reads there. */
static unsigned byte_at(const unsigned char *b, size_t len, size_t i)
{
    return i < len ? b[i] : 0;
}

/* JPEG: a DHT segment's 16 code-length counts may add up to 4080, and
 * stb 2.27 builds the table into a 257-entry array without checking (later
 * stb refuses more than 256). The segment at p (its length field) is read
 * as stb reads it: table after table until its length is used up, with
 * zeros past the end of the file. */
static gimg_status dht_check(const unsigned char *b, size_t len, size_t p, unsigned *defined)
{
    long left = (long)(byte_at(b, len, p) << 8 | byte_at(b, len, p + 1)) - 2;
    for (size_t q = p + 2; left > 0 && q < len;) {
        const unsigned cls = b[q] >> 4, id = b[q] & 15;
        if (cls <= 1 && id <= 3)
            *defined |= 1u << (cls * 4 + id);
        unsigned codes = 0;
        for (size_t i = 1; i <= 16; i++)
            codes += byte_at(b, len, q + i);
        if (codes > 256)
            return gimg_fail(GIMG_E_FORMAT,
                             "corrupt JPEG: a Huffman table of %u codes (at most 256)", codes);
        q += 17 + codes;
        left -= 17 + (long)codes;
    }
    return GIMG_OK;
}

/* JPEG: a scan whose components name a Huffman table that no DHT before
 * it defined. stb decodes with the table it allocated and never filled
 * (whatever malloc returned): found by fuzz_decode as an assertion in
 * stbi__jpeg_huff_decode that fired or not from run to run. The SOS at p
 * (its length field) uses its DC tables unless it is a progressive AC scan
 * or DC refinement, and its AC tables unless it is a progressive DC scan;
 * selectors over 3 are left to stb, which refuses them. */
static gimg_status sos_check(const unsigned char *b, size_t len, size_t p, unsigned defined,
                             int progressive)
{
    const unsigned n = byte_at(b, len, p + 2);
    const unsigned ss = byte_at(b, len, p + 3 + 2 * n), ah = byte_at(b, len, p + 5 + 2 * n) >> 4;
    const int dc = !progressive || (ss == 0 && ah == 0), ac = !progressive || ss > 0;
    for (unsigned i = 0; i < n; i++) {
        const unsigned t = byte_at(b, len, p + 4 + 2 * i), td = t >> 4, ta = t & 15;
        if ((dc && td <= 3 && !(defined >> td & 1)) || (ac && ta <= 3 && !(defined >> (4 + ta) & 1)))
            return gimg_fail(GIMG_E_FORMAT,
                             "corrupt JPEG: a scan uses a Huffman table that no DHT defines");
    }
    return GIMG_OK;
}

/* Walks the markers as stb does, skipping entropy-coded data after each SOS
 * and, like stb, any stray bytes between segments, and checks every DHT and
 * SOS. */
static gimg_status jpeg_check(const unsigned char *b, size_t len)
{
    unsigned defined = 0;                                /* bit class * 4 + id: DHT seen */
    int progressive = 0;
    size_t p = 0;                                        /* fill bytes, then SOI */
    while (p + 1 < len) {
        if (b[p] != 0xFF) {
            p++;
            continue;
        }
        const unsigned m = b[p + 1];
        if (m == 0xFF || m == 0x00 || m == 0x01 || m == 0xD8 || (m >= 0xD0 && m <= 0xD7)) {
            p += m == 0xFF ? 1 : 2;                      /* fill byte, or no length */
            continue;
        }
        if (m == 0xD9)
            return GIMG_OK;                              /* end of image */
        gimg_status st;
        if (m == 0xC4 && (st = dht_check(b, len, p + 2, &defined)))
            return st;
        if (m == 0xC2)
            progressive = 1;
        if (m == 0xDA && (st = sos_check(b, len, p + 2, defined, progressive)))
            return st;
        p += 2 + (byte_at(b, len, p + 2) << 8 | byte_at(b, len, p + 3));
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

/* BMP: the header, the palette and the uncompressed pixel rows (BI_RGB,
 * BI_BITFIELDS) must all be there: stb reads what is missing as zeros. */
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
    if ((compression != 0 && compression != 3) || w <= 0 || h == 0 || bpp == 0 || bpp > 32)
        return GIMG_OK;
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

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int is_letter(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

/* PNG: stb reads a chunk that runs past the end of the file as zeros and
 * never checks a CRC. Walks the chunks up to IEND: each must be complete
 * and properly named, and the CRC of every critical chunk (first letter
 * upper-case: IHDR, PLTE, IDAT, IEND) and of tRNS, the one ancillary chunk
 * that changes pixels, must match, as libpng requires by default (IDAT's,
 * the bulk of the file, only with check_idat_crc). Other ancillary chunks (text, colour profiles, times) are
 * ignored by the decoder, so their CRCs are not checked, as libpng only
 * warns about them. Data after IEND is ignored, as by libpng. */
gimg_status gimg_png_precheck(const unsigned char *b, size_t len, int check_idat_crc,
                              int *channels)
{
    if (len < 8 || memcmp(b, "\x89PNG\r\n\x1a\n", 8) != 0)
        return gimg_fail(GIMG_E_FORMAT, "not a PNG file");
    int color = -1, trns = 0, idat = 0;
    for (size_t p = 8;;) {
        if (len - p < 12)
            return gimg_fail(GIMG_E_FORMAT, "truncated PNG file (%s)",
                             p == len ? "no IEND chunk" : "a chunk is cut short");
        const uint32_t n = be32(b + p);
        const unsigned char *type = b + p + 4;
        if (!is_letter(type[0]) || !is_letter(type[1]) || !is_letter(type[2]) ||
            !is_letter(type[3]))
            return gimg_fail(GIMG_E_FORMAT, "corrupt PNG file: invalid chunk type at byte %zu", p);
        if (n > 0x7fffffffu)
            return gimg_fail(GIMG_E_FORMAT, "corrupt PNG file: %.4s chunk of %u bytes", type, n);
        if (len - p - 12 < n)
            return gimg_fail(GIMG_E_FORMAT, "truncated PNG file (the %.4s chunk is cut short)",
                             type);
        const int critical = type[0] <= 'Z', is_idat = memcmp(type, "IDAT", 4) == 0;
        if ((critical || memcmp(type, "tRNS", 4) == 0) && (check_idat_crc || !is_idat) &&
            libdeflate_crc32(0, type, (size_t)n + 4) != be32(b + p + 8 + n))
            return gimg_fail(GIMG_E_FORMAT, "corrupt PNG file: CRC mismatch in the %.4s chunk",
                             type);
        if (memcmp(type, "IHDR", 4) == 0 && n >= 13)
            color = b[p + 17];
        else if (memcmp(type, "tRNS", 4) == 0 && !idat)
            trns = 1;
        else if (is_idat)
            idat = 1;
        else if (memcmp(type, "IEND", 4) == 0)
            break;
        p += 12 + (size_t)n;
    }
    /* What stb decodes to: tRNS adds alpha to gray, RGB and palette images. */
    if (channels)
        *channels = color == 0 ? 1 + trns : color == 2 || color == 3 ? 3 + trns
                  : color == 4 ? 2 : 4;
    return GIMG_OK;
}

gimg_status gimg_precheck(gimg_format f, const unsigned char *buf, size_t len)
{
    switch (f) {
    case GIMG_FMT_PNG: return gimg_png_precheck(buf, len, 1, NULL);
    case GIMG_FMT_HDR: return gimg_hdr_validate(buf, len);
    case GIMG_FMT_JPEG: return jpeg_check(buf, len);
    case GIMG_FMT_BMP: return bmp_check(buf, len);
    case GIMG_FMT_TGA: return tga_check(buf, len);
    default: return GIMG_OK;
    }
}
