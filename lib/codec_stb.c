/*
 * codec_stb.c — BMP, TGA and Radiance HDR through stb_image and
 * stb_image_write (compiled in stb_impl.c, with only these three formats).
 * No better-kept library serves them in Debian, and stb's code for them is
 * small; what stb mishandles (reads past the data as zeros, palette
 * indices past the palette, endless runs) is refused first by
 * precheck.c.
 *
 * Writing: BMP 8-bit, gray as 24-bit RGB (it reads back as RGB), RGBA as
 * 32-bit, gray+alpha loses its alpha; TGA 8-bit, 1-4 channels; HDR float
 * RGB (RGBE), alpha dropped, gray reads back as RGB.
 */
#include "codec.h"
#include "io_internal.h"
#include "precheck_internal.h"

#include <limits.h>
#include <stb_image.h>
#include <stb_image_write.h>
#include <stdlib.h>
#include <string.h>

/* --------------------------------------------------------------- reading */

static int sniff_bmp(const unsigned char *buf, size_t len)
{
    return len >= 2 && buf[0] == 'B' && buf[1] == 'M';
}

static int sniff_hdr(const unsigned char *buf, size_t len)
{
    return (len >= 10 && memcmp(buf, "#?RADIANCE", 10) == 0) ||
           (len >= 6 && memcmp(buf, "#?RGBE", 6) == 0);
}

/* Only the header matters to stb's probes, so capping a >2 GiB buffer at
 * INT_MAX for them is harmless; decoding such a buffer is refused. */
static int stb_len(size_t len)
{
    return len > INT_MAX ? INT_MAX : (int)len;
}

/* TGA has no magic number: stb's header check (the only format left to it
 * once BMP and HDR were sniffed, as format.c sniffs TGA last) needs the
 * first 18 bytes. */
static int sniff_tga(const unsigned char *buf, size_t len)
{
    int w, h, c;
    return stbi_info_from_memory(buf, stb_len(len), &w, &h, &c);
}

/* stb's reason for the last failure, or "corrupt data" when it gave none
 * of its own. */
static const char *stb_reason(void)
{
    const char *why = stbi_failure_reason();
    return why ? why : "corrupt data";
}

static const char *name_of(const unsigned char *buf, size_t len)
{
    return sniff_bmp(buf, len) ? "BMP" : sniff_hdr(buf, len) ? "HDR" : "TGA";
}

static gimg_status probe_stb(const unsigned char *buf, size_t len, const gimg_read_opts *o,
                             gimg_info *info)
{
    int w, h, c, n = stb_len(len);
    /* stb reads HDR's size into an int: a larger one is refused here, as
     * the file states it, not as stb would cut it. */
    gimg_status st = sniff_hdr(buf, len) ? gimg_hdr_check_size(buf, len) : GIMG_OK;
    if (st)
        return st;
    if (!stbi_info_from_memory(buf, n, &w, &h, &c))
        return gimg_fail(GIMG_E_FORMAT, "invalid %s header (%s)", name_of(buf, len),
                         stb_reason());
    /* stb's BMP probe passes on a top-down file's negative height, which
     * its loader (and we) read as the image's height. */
    if (sniff_bmp(buf, len) && h < 0 && h != INT_MIN)
        h = -h;
    info->format = sniff_bmp(buf, len) ? GIMG_FMT_BMP : sniff_hdr(buf, len) ? GIMG_FMT_HDR
                                                                            : GIMG_FMT_TGA;
    info->width = w;
    info->height = h;
    info->channels = c;
    info->sample = info->format == GIMG_FMT_HDR ? GIMG_F32 : GIMG_U8;
    return GIMG_OK;
}

static gimg_status decode_stb(const unsigned char *buf, size_t len, const gimg_read_opts *o,
                              gimg_image *out)
{
    memset(out, 0, sizeof *out);
    gimg_info info;
    gimg_status st = probe_stb(buf, len, o, &info);
    if (st)
        return st;
    /* The limits are judged from the header, before stb allocates anything. */
    if ((st = gimg_check_size(info.width, info.height, info.channels, info.sample, NULL, NULL)))
        return st;
    const char *name = name_of(buf, len);
    if (len > INT_MAX)
        return gimg_fail(GIMG_E_LIMIT, "%s file of %zu bytes is too large for the decoder", name,
                         len);
    /* What stb mishandles (hangs, overflows, invented pixels) is refused first. */
    if ((st = gimg_precheck(info.format, buf, len)))
        return st;
    int w = 0, h = 0, c = 0;
    void *px = info.sample == GIMG_F32 ? (void *)stbi_loadf_from_memory(buf, (int)len, &w, &h, &c, 0)
                                       : (void *)stbi_load_from_memory(buf, (int)len, &w, &h, &c, 0);
    if (!px) {
        const char *why = stb_reason();
        if (strcmp(why, "outofmem") == 0)
            return gimg_fail(GIMG_E_NOMEM, "out of memory decoding %s", name);
        return gimg_fail(GIMG_E_FORMAT, "corrupt or unsupported %s file (%s)", name, why);
    }
    size_t row;
    if ((st = gimg_check_size(w, h, c, info.sample, &row, NULL))) {
        free(px);
        return st;
    }
    /* stb_impl.c makes stb allocate like gimg_image_alloc() (64-byte
     * aligned, released by free()), so the image adopts stb's buffer. */
    out->width = w;
    out->height = h;
    out->channels = c;
    out->sample = info.sample;
    out->stride_bytes = row;
    out->data = px;
    return GIMG_OK;
}

/* --------------------------------------------------------------- writing */

static void layout_bmp(int *channels, gimg_sample *sample)
{
    *channels = *channels == 2 ? 1 : *channels;
    *sample = GIMG_U8;
}
static void layout_tga(int *channels, gimg_sample *sample) { *sample = GIMG_U8; }
static void layout_hdr(int *channels, gimg_sample *sample)
{
    *channels = *channels == 2 ? 1 : *channels == 4 ? 3 : *channels;
    *sample = GIMG_F32;
}

typedef struct {
    unsigned char *p;
    size_t len, cap;
    int failed;
} membuf;

/* stb_image_write's output callback: it cannot report failure, so a failed
 * allocation is remembered and reported after stb returns. */
static void membuf_put(void *ctx, void *data, int size)
{
    membuf *m = ctx;
    if (m->failed || size <= 0)
        return;
    size_t n = (size_t)size;
    if (m->cap - m->len < n) {
        size_t ncap = m->cap ? m->cap : 4096;
        while (ncap - m->len < n) {
            if (ncap > SIZE_MAX / 2) {
                m->failed = 1;
                return;
            }
            ncap *= 2;
        }
        unsigned char *np = realloc(m->p, ncap);
        if (!np) {
            m->failed = 1;
            return;
        }
        m->p = np;
        m->cap = ncap;
    }
    memcpy(m->p + m->len, data, n);
    m->len += n;
}

/* stb_image_write indexes pixels and sizes files with int, and takes no
 * stride: im must be tightly packed. */
static gimg_status encode_stb(gimg_format f, const gimg_image *im, unsigned char **buf,
                              size_t *len)
{
    uint64_t row = (uint64_t)im->width * gimg_pixel_bytes(im);
    if (row > (1u << 23) || (row + 1) * (uint64_t)im->height > INT_MAX / 2)
        return gimg_fail(GIMG_E_LIMIT, "image %dx%d is too large for the %s writer", im->width,
                         im->height, gimg_format_name(f));
    unsigned char *packed = NULL;
    const unsigned char *px = im->data;
    if (im->stride_bytes != row) {
        if (!(packed = malloc(row * (size_t)im->height)))
            return gimg_fail(GIMG_E_NOMEM, "out of memory encoding %s", gimg_format_name(f));
        for (int y = 0; y < im->height; y++)
            memcpy(packed + (size_t)y * row, gimg_row(im, y), row);
        px = packed;
    }
    membuf m = { 0 };
    int ok, w = im->width, h = im->height, c = im->channels;
    if (f == GIMG_FMT_BMP)
        ok = stbi_write_bmp_to_func(membuf_put, &m, w, h, c, px);
    else if (f == GIMG_FMT_TGA)
        ok = stbi_write_tga_to_func(membuf_put, &m, w, h, c, px);
    else
        ok = stbi_write_hdr_to_func(membuf_put, &m, w, h, c, (const float *)px);
    free(packed);
    if (!ok || m.failed) {
        free(m.p);
        /* stb fails only for lack of memory once its inputs are valid. */
        return gimg_fail(GIMG_E_NOMEM, "out of memory encoding %s", gimg_format_name(f));
    }
    *buf = m.p;
    *len = m.len;
    return GIMG_OK;
}

static gimg_status encode_bmp(const gimg_image *im, const gimg_write_opts *o, unsigned char **buf,
                              size_t *len)
{
    return encode_stb(GIMG_FMT_BMP, im, buf, len);
}
static gimg_status encode_tga(const gimg_image *im, const gimg_write_opts *o, unsigned char **buf,
                              size_t *len)
{
    return encode_stb(GIMG_FMT_TGA, im, buf, len);
}
static gimg_status encode_hdr(const gimg_image *im, const gimg_write_opts *o, unsigned char **buf,
                              size_t *len)
{
    return encode_stb(GIMG_FMT_HDR, im, buf, len);
}

/* No metadata: stb_image keeps none. */
const gimg_codec gimg_codec_bmp = {
    .format = GIMG_FMT_BMP,
    .name = "BMP",
    .extensions = "bmp",
    .sniff = sniff_bmp,
    .probe = probe_stb,
    .decode = decode_stb,
    .layout = layout_bmp,
    .encode = encode_bmp,
    .maxval_rule = GIMG_MAXVAL_FULL,
};
/* No metadata: stb_image keeps none. */
const gimg_codec gimg_codec_tga = {
    .format = GIMG_FMT_TGA,
    .name = "TGA",
    .extensions = "tga",
    .sniff = sniff_tga,
    .probe = probe_stb,
    .decode = decode_stb,
    .layout = layout_tga,
    .encode = encode_tga,
    .maxval_rule = GIMG_MAXVAL_FULL,
};
/* No metadata: stb_image keeps none. */
const gimg_codec gimg_codec_hdr = {
    .format = GIMG_FMT_HDR,
    .name = "HDR",
    .extensions = "hdr",
    .sniff = sniff_hdr,
    .probe = probe_stb,
    .decode = decode_stb,
    .layout = layout_hdr,
    .encode = encode_hdr,
    .maxval_rule = GIMG_MAXVAL_FULL,
};
