/*
 * hdr.c — a structural check of Radiance HDR files before stb_image decodes
 * them. stb's loader reads past the end of its buffer as zeros and, in
 * run-length-encoded scanlines, a zero count never advances, so a truncated
 * file (or a corrupt zero count) hangs the process. This walks the same
 * path as stbi__hdr_load (stb_image 2.27): header lines up to an empty one,
 * the "-Y H +X W" line, then either flat RGBE pixels or, for widths 8 to
 * 32767, scanlines of four run-length-encoded component planes.
 */
#include "hdr_internal.h"

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
