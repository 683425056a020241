/* format.c — format names, extensions, and recognition from a file's bytes. */
#include "io_internal.h"

#include <limits.h>
#include <stb_image.h>
#include <string.h>
#include <strings.h>

static const struct {
    const char *name;
    gimg_format format;
} names[] = {
    { "png", GIMG_FMT_PNG },  { "jpg", GIMG_FMT_JPEG }, { "jpeg", GIMG_FMT_JPEG },
    { "jpe", GIMG_FMT_JPEG }, { "bmp", GIMG_FMT_BMP },  { "tga", GIMG_FMT_TGA },
    { "hdr", GIMG_FMT_HDR },  { "pnm", GIMG_FMT_PNM },  { "ppm", GIMG_FMT_PNM },
    { "pgm", GIMG_FMT_PNM },  { "pbm", GIMG_FMT_PNM },  { "pam", GIMG_FMT_PAM },
    { "pfm", GIMG_FMT_PFM },
};

gimg_format gimg_format_from_name(const char *name)
{
    if (!name)
        return GIMG_FMT_UNKNOWN;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(name, names[i].name) == 0)
            return names[i].format;
    return GIMG_FMT_UNKNOWN;
}

gimg_format gimg_format_from_path(const char *path)
{
    if (!path)
        return GIMG_FMT_UNKNOWN;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    const char *dot = strrchr(base, '.');
    /* ".png" alone is a hidden file's name, not an extension. */
    if (!dot || dot == base)
        return GIMG_FMT_UNKNOWN;
    return gimg_format_from_name(dot + 1);
}

const char *gimg_format_name(gimg_format f)
{
    switch (f) {
    case GIMG_FMT_PNG: return "png";
    case GIMG_FMT_JPEG: return "jpeg";
    case GIMG_FMT_BMP: return "bmp";
    case GIMG_FMT_TGA: return "tga";
    case GIMG_FMT_HDR: return "hdr";
    case GIMG_FMT_PNM: return "pnm";
    case GIMG_FMT_PAM: return "pam";
    case GIMG_FMT_PFM: return "pfm";
    case GIMG_FMT_UNKNOWN: break;
    }
    return "unknown";
}

static int starts_with(const unsigned char *buf, size_t len, const char *magic, size_t n)
{
    return len >= n && memcmp(buf, magic, n) == 0;
}

static int is_pnm_space(int c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

const char *gimg_io_unsupported_format(const unsigned char *buf, size_t len)
{
    if (starts_with(buf, len, "GIF8", 4))
        return "GIF";
    if (starts_with(buf, len, "8BPS", 4))
        return "PSD";
    /* Softimage PIC: a magic number and "PICT" at offset 88. */
    if (len >= 92 && memcmp(buf, "\x53\x80\xf6\x34", 4) == 0 && memcmp(buf + 88, "PICT", 4) == 0)
        return "PIC";
    if (starts_with(buf, len, "II*\0", 4) || starts_with(buf, len, "MM\0*", 4))
        return "TIFF";
    if (len >= 12 && memcmp(buf, "RIFF", 4) == 0 && memcmp(buf + 8, "WEBP", 4) == 0)
        return "WebP";
    return NULL;
}

gimg_format gimg_format_sniff(const unsigned char *buf, size_t len)
{
    if (!buf || len == 0)
        return GIMG_FMT_UNKNOWN;
    if (starts_with(buf, len, "\x89PNG\r\n\x1a\n", 8))
        return GIMG_FMT_PNG;
    /* stb_image takes any number of 0xFF fill bytes before the SOI marker:
     * so must we, or such a file would reach stb as "TGA" below and be
     * decoded as JPEG without the JPEG prechecks. */
    if (buf[0] == 0xff) {
        size_t i = 1;
        while (i < len && buf[i] == 0xff)
            i++;
        if (i < len && buf[i] == 0xd8)
            return GIMG_FMT_JPEG;
    }
    if (starts_with(buf, len, "BM", 2))
        return GIMG_FMT_BMP;
    if (starts_with(buf, len, "#?RADIANCE", 10) || starts_with(buf, len, "#?RGBE", 6))
        return GIMG_FMT_HDR;
    /* Netpbm: "P1".."P7", "PF" or "Pf", then whitespace or a comment. A
     * two-byte file is still called PNM so that the reader can say it is
     * truncated rather than unrecognised. */
    if (len >= 2 && buf[0] == 'P' &&
        ((buf[1] >= '1' && buf[1] <= '7') || buf[1] == 'F' || buf[1] == 'f') &&
        (len == 2 || is_pnm_space(buf[2]) || buf[2] == '#')) {
        if (buf[1] == '7')
            return GIMG_FMT_PAM;
        if (buf[1] == 'F' || buf[1] == 'f')
            return GIMG_FMT_PFM;
        return GIMG_FMT_PNM;
    }
    if (gimg_io_unsupported_format(buf, len))
        return GIMG_FMT_UNKNOWN;
    /* TGA has no magic number. Every other format stb knows was ruled out
     * above (or is compiled out), so stb's header check here amounts to its
     * TGA header check, which needs only the first 18 bytes. */
    int w, h, c;
    int n = len > INT_MAX ? INT_MAX : (int)len;
    if (stbi_info_from_memory(buf, n, &w, &h, &c))
        return GIMG_FMT_TGA;
    return GIMG_FMT_UNKNOWN;
}
