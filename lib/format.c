/* format.c — the codec table (lib/codec.h): format names, extensions, and
 * recognition from a file's bytes. */
#include "cli.h"
#include "codec.h"
#include "io_internal.h"

#include <string.h>
#include <strings.h>

/* Sniffed in this order: TGA has no magic number, so its header check
 * comes after every format that has one. */
static const gimg_codec *const table[] = {
    &gimg_codec_png, &gimg_codec_jpeg, &gimg_codec_tiff, &gimg_codec_webp, &gimg_codec_gif,
    &gimg_codec_bmp, &gimg_codec_hdr,  &gimg_codec_pnm,  &gimg_codec_pam,  &gimg_codec_pfm,
    &gimg_codec_tga,
};
#define N_CODECS (sizeof table / sizeof table[0])

const gimg_codec *gimg_codec_of(gimg_format f)
{
    for (size_t i = 0; i < N_CODECS; i++)
        if (table[i]->format == f)
            return table[i];
    return NULL;
}

const gimg_codec *gimg_codec_sniff(const unsigned char *buf, size_t len)
{
    if (!buf || len == 0)
        return NULL;
    for (size_t i = 0; i < N_CODECS; i++)
        if (table[i]->sniff(buf, len))
            return table[i];
    return NULL;
}

/* 1 if the space-separated list holds word (case-insensitive). */
static int list_has(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; *p;) {
        size_t k = strcspn(p, " ");
        if (k == n && strncasecmp(p, word, n) == 0)
            return 1;
        p += k;
        p += strspn(p, " ");
    }
    return 0;
}

gimg_format gimg_format_from_name(const char *name)
{
    if (!name || !*name)
        return GIMG_FMT_UNKNOWN;
    for (size_t i = 0; i < N_CODECS; i++)
        if (list_has(table[i]->extensions, name))
            return table[i]->format;
    return GIMG_FMT_UNKNOWN;
}

/* The extension of path's last component, or NULL: ".png" alone is a
 * hidden file's name, not an extension. */
static const char *extension_of_path(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    const char *dot = strrchr(base, '.');
    return dot && dot != base ? dot + 1 : NULL;
}

gimg_format gimg_format_from_path(const char *path)
{
    const char *ext = path ? extension_of_path(path) : NULL;
    return ext ? gimg_format_from_name(ext) : GIMG_FMT_UNKNOWN;
}

const char *gimg_format_name(gimg_format f)
{
    static const char *const names[] = {
        [GIMG_FMT_PNG] = "png",   [GIMG_FMT_JPEG] = "jpeg", [GIMG_FMT_BMP] = "bmp",
        [GIMG_FMT_TGA] = "tga",   [GIMG_FMT_HDR] = "hdr",   [GIMG_FMT_PNM] = "pnm",
        [GIMG_FMT_PAM] = "pam",   [GIMG_FMT_PFM] = "pfm",   [GIMG_FMT_TIFF] = "tiff",
        [GIMG_FMT_WEBP] = "webp", [GIMG_FMT_GIF] = "gif",
    };
    if ((unsigned)f < sizeof names / sizeof names[0] && names[f])
        return names[f];
    return "unknown";
}

int gimg_format_writable(gimg_format f)
{
    const gimg_codec *c = gimg_codec_of(f);
    return c && c->encode;
}

const char *gimg_format_extension(gimg_format f)
{
    const gimg_codec *c = gimg_codec_of(f);
    static _Thread_local char ext[16];
    if (!c)
        return NULL;
    size_t n = strcspn(c->extensions, " ");
    if (n >= sizeof ext)
        n = sizeof ext - 1;
    memcpy(ext, c->extensions, n);
    ext[n] = '\0';
    return ext;
}

gimg_status gimg_check_output_name(const char *path, const gimg_write_opts *o)
{
    gimg_format f = o ? o->format : GIMG_FMT_UNKNOWN;
    const char *ext = NULL;
    if (f == GIMG_FMT_UNKNOWN && path && strcmp(path, "-") != 0 &&
        (ext = extension_of_path(path)) != NULL) {
        f = gimg_format_from_name(ext);
        if (f == GIMG_FMT_UNKNOWN)
            return gimg_fail(GIMG_E_USAGE, "%s: no format is written for the extension '.%s' "
                                           "(name one with -f)", gimg_cli_name(path, 1),
                             gimg_cli_name(ext, 1));
    }
    if (f != GIMG_FMT_UNKNOWN && !gimg_format_writable(f))
        return gimg_fail(GIMG_E_USAGE, "%s: %s files can be read but not written",
                         path ? gimg_cli_name(path, 1) : "standard output",
                         gimg_codec_of(f)->name);
    return GIMG_OK;
}

static int starts_with(const unsigned char *buf, size_t len, const char *magic, size_t n)
{
    return len >= n && memcmp(buf, magic, n) == 0;
}

const char *gimg_io_unsupported_format(const unsigned char *buf, size_t len)
{
    if (starts_with(buf, len, "8BPS", 4))
        return "PSD";
    /* Softimage PIC: a magic number and "PICT" at offset 88. */
    if (len >= 92 && memcmp(buf, "\x53\x80\xf6\x34", 4) == 0 && memcmp(buf + 88, "PICT", 4) == 0)
        return "PIC";
    return NULL;
}

gimg_format gimg_format_sniff(const unsigned char *buf, size_t len)
{
    /* A format we name but do not read must not reach TGA's weak check. */
    if (!buf || len == 0 || gimg_io_unsupported_format(buf, len))
        return GIMG_FMT_UNKNOWN;
    const gimg_codec *c = gimg_codec_sniff(buf, len);
    return c ? c->format : GIMG_FMT_UNKNOWN;
}
