/*
 * codec_tiff.c — TIFF, read and written with libtiff (libtiff-dev 4.5): the
 * reference implementation of the format, kept and fuzzed upstream, and
 * what libvips and ImageMagick read TIFF with. It works on the file in
 * memory through client procedures (read, seek, size and a map of the
 * buffer, so that libtiff takes compressed strips straight from it).
 *
 * Reading (page o->page; info->pages counts the file's main IFDs)
 *  - Samples: unsigned integers of 1 to 16 bits, 32-bit float. Photo-
 *    metric MINISBLACK and MINISWHITE gray, RGB, palette, and YCbCr when
 *    JPEG-compressed (libtiff's JPEG codec converts it to RGB, as vips and
 *    ImageMagick ask it to). Planar configuration contiguous and separate;
 *    strips and tiles; every compression this libtiff decodes (none, LZW,
 *    Deflate, PackBits, JPEG, CCITT, ...) except old-style JPEG (6), and
 *    predictors 2 and 3 (undone by libtiff, which also swaps byte order;
 *    it refuses the horizontal predictor on samples other than 8, 16 and
 *    32-bit, and so do we).
 *  - Samples in the file's own units: 8 and 16-bit samples are read as
 *    they are (maxval 0, the type's full range); b-bit samples, b in 2..15,
 *    are unpacked (most significant bit first, rows starting on a byte, as
 *    the specification packs them; FillOrder is libtiff's business) to
 *    8-bit (b < 8) or 16-bit (b > 8) samples with maxval 2^b - 1, as a PNM
 *    of that maxval: a 12-bit scan keeps its 0..4095.
 *  - 1-bit samples become 8-bit 0/255 (maxval 0), as vips and ImageMagick
 *    read bilevel images; gray+alpha, RGB and RGBA of 1-bit samples too.
 *    MINISWHITE integer samples are inverted (v -> max - v, max being the
 *    maxval) so that 0 is black; float MINISWHITE samples are left as they
 *    are, as vips and ImageMagick leave them.
 *  - Palette images of 1 to 16-bit indices become RGB, 8-bit (16-bit for
 *    16-bit indices); a colormap whose entries are all below 256 is taken
 *    as 8-bit values (old writers' mistake), otherwise each entry's high
 *    byte is used; a colormap of grays only gives a gray image. All three
 *    as vips does.
 *  - Extra samples: the first one EXTRASAMPLES marks as associated or
 *    unassociated alpha becomes the alpha channel; when none is so marked,
 *    an unspecified first extra sample is taken as alpha too (vips and
 *    ImageMagick also show an RGB file's unspecified 4th sample as alpha).
 *    Every other extra sample is dropped: gimg images hold 1-4 channels.
 *    Associated (premultiplied) alpha is unpremultiplied:
 *    v = round(v * max / alpha), 0 where alpha is 0.
 *  - The Orientation tag is not applied (vips and ImageMagick do not
 *    either unless asked to): it is kept as metadata (below).
 *  - Refused, with a message naming what: CMYK, CIELAB and the other
 *    photometric interpretations, signed integers, integers of more than
 *    16 bits, floats other than 32-bit, YCbCr without JPEG, old-style
 *    JPEG, a page past the last ("TIFF has 3 pages: no page 5").
 *
 * Metadata (gimg_meta): TIFF keeps an ICC profile (tag 34675), an XMP
 * packet (tag 700), the resolution and the orientation, page by page.
 *  - Reading: each page's ICCProfile and XMLPacket are taken as they are;
 *    XResolution and YResolution become dots per inch when ResolutionUnit
 *    (default: inch, as the specification says) is inch, or centimetre
 *    (x 2.54); with unit "none" or one out of range, or a value that is
 *    not a positive finite number, no resolution is kept. The Orientation tag (1..8) becomes
 *    m->orientation; any other value is ignored. An ICC profile or XMP
 *    packet over 16 MiB is dropped with a warning in m->warning (libtiff
 *    already bounds every tag by the file's size).
 *  - The EXIF IFD of a TIFF (tag 34665) is not read into an EXIF block, and
 *    no EXIF is written: TIFF keeps ICC, XMP, resolution and orientation;
 *    EXIF is dropped on TIFF output and not read from TIFF input.
 *  - Writing: the ICC profile, the XMP packet, the resolution (in pixels
 *    per inch) and the Orientation tag of im->meta, each only when
 *    recorded (orientation 1 is written when recorded, 0 writes no tag).
 *
 * Limits and hostile files
 *  - The size goes through gimg_check_size() before any allocation that
 *    grows with the image. Every strip's and tile's size is computed here in
 *    64 bits with overflow checks and must agree with libtiff's; a strip or
 *    tile whose decoded size exceeds both 16 MiB and the image's own size is
 *    refused (a tile may not claim more memory than the image it is part of).
 *  - Every strip and tile must lie inside the file ("truncated TIFF data"),
 *    and libtiff checks the rest (directory entries against the file size).
 *  - The whole IFD chain is walked on every read, here (libtiff 4.5 only
 *    warns about a loop and cuts the chain): an IFD pointing to itself or to
 *    an earlier one is refused ("the directory chain loops").
 *  - libtiff's own allocations are capped (TIFFOpenOptionsSetMaxSingleMemAlloc)
 *    at 64 MiB, or one decoded strip or tile when that is larger.
 *  - Messages: libtiff's errors are caught by a per-handle handler (no
 *    global state: the batch decodes on many threads) and the first one is
 *    the reason given ("corrupt TIFF: ..."). Its warnings are ignored: they
 *    report what libtiff recovered from (unknown tags, odd tag counts, a
 *    truncated JPEG strip filled in gray by libjpeg, as vips and ImageMagick
 *    show it; a JPEG stream of fewer rows than its strip, the rest black);
 *    a real failure is an error. Nothing is ever printed.
 *    One kind of libtiff error is not one: a value out of range in the
 *    Orientation, ResolutionUnit, XResolution or YResolution tag ("Bad
 *    value 9 for \"Orientation\" tag"), which libtiff reports and then
 *    reads the directory without; that item is dropped with a warning.
 *
 * Decoding: contiguous strips whose samples are the image's go straight
 * into the image's rows (TIFFReadEncodedStrip), then are fixed in place
 * (inversion, unpremultiplication) where needed; other layouts (and every
 * b-bit one) go through one strip or tile buffer. An image of 4 MiB or more
 * in 4 strips or tiles or more is decoded on two threads, each with its own
 * libtiff handle over the same buffer (Deflate decoding, libdeflate's, is
 * most of the time).
 *
 * Band reading (band.h; "rows" below): the same checks and the same
 * chunk decoding, a strip or a row of tiles at a time, for every layout
 * above (the orientation is not applied, so rows come out in order); the
 * metadata, all in the page's directory, comes with the header.
 *
 * Writing: 8/16-bit and float, 1-4 channels, as they are (layout() keeps
 * every layout): MINISBLACK for 1-2 channels, RGB for 3-4, the last
 * channel of 2 and 4 marked as unassociated alpha; contiguous strips of
 * about 256 KiB; compression o->tiff_compression: Deflate (default) or
 * LZW, each with the horizontal predictor (floating-point predictor for
 * float samples), or none. An integer image whose maxval is 2^b - 1 with b
 * in 1..15 (write.c rescales other maxvals first: the row's rule is
 * GIMG_MAXVAL_BITS) is written with BitsPerSample b, its samples packed
 * most significant bit first, and no predictor (libtiff's works on 8, 16
 * and 32-bit samples only); maxval 1 thus makes a 1-bit file, which reads
 * back as 0/255 as every 1-bit TIFF does, and a 16-bit image of maxval
 * 255 an 8-bit one. Deflate runs at level 6 of libdeflate (libtiff
 * uses it when given a whole strip at once), the level vips's tiffsave
 * leaves to libtiff (zlib's default, 6). On a 4096x4096 photo (8-bit RGB,
 * horizontal predictor) that is 29.1 MB in 0.92 s of CPU, against vips's
 * 30.7 MB in about 2.5 s; level 1 would take 0.57 s for 29.8 MB, level 9
 * 2.6 s for 29.0 MB. Files that could pass 4 GiB are written as BigTIFF.
 */
#include "codec.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <tiffio.h>

/* libtiff may allocate no single block larger than this, or than one
 * decoded strip or tile (checked against the limits) when that is larger. */
#define TIFF_ALLOC_CAP ((uint64_t)64 << 20)
/* A strip or tile may decode to at most this much, or to the image's size. */
#define CHUNK_CAP ((uint64_t)16 << 20)
/* Below this many decoded bytes an image is decoded on one thread. */
#define PARALLEL_MIN_BYTES ((uint64_t)4 << 20)
/* Strips written are about this large. */
#define STRIP_TARGET_BYTES ((size_t)256 << 10)
#define DEFLATE_LEVEL 6
/* An ICC profile or XMP packet larger than this is dropped with a warning. */
#define META_ITEM_CAP ((size_t)16 << 20)

/* ---------------------------------------------------------- memory I/O */

/* A file in memory: the buffer being read (data, never written through), or
 * the one being written (grown as libtiff writes and seeks). */
typedef struct {
    unsigned char *data;
    size_t len, cap, pos;
    int writable, failed;
} tiff_stream;

static tmsize_t stream_read(thandle_t h, void *dst, tmsize_t n)
{
    tiff_stream *s = h;
    if (n <= 0 || s->pos >= s->len)
        return 0;
    size_t k = s->len - s->pos < (size_t)n ? s->len - s->pos : (size_t)n;
    memcpy(dst, s->data + s->pos, k);
    s->pos += k;
    return (tmsize_t)k;
}

static tmsize_t stream_write(thandle_t h, void *src, tmsize_t n)
{
    tiff_stream *s = h;
    if (!s->writable || s->failed || n < 0)
        return -1;
    size_t k = (size_t)n;
    if (s->pos > SIZE_MAX / 2 - k) {
        s->failed = 1;
        return -1;
    }
    size_t end = s->pos + k;
    if (end > s->cap) {
        size_t ncap = s->cap ? s->cap : (size_t)1 << 16;
        while (ncap < end)
            ncap *= 2;
        unsigned char *p = realloc(s->data, ncap);
        if (!p) {
            s->failed = 1;
            return -1;
        }
        s->data = p;
        s->cap = ncap;
    }
    if (s->pos > s->len)   /* a seek past the end leaves a gap: zero it */
        memset(s->data + s->len, 0, s->pos - s->len);
    memcpy(s->data + s->pos, src, k);
    s->pos = end;
    if (end > s->len)
        s->len = end;
    return n;
}

static toff_t stream_seek(thandle_t h, toff_t off, int whence)
{
    tiff_stream *s = h;
    uint64_t base = whence == SEEK_CUR ? s->pos : whence == SEEK_END ? s->len : 0;
    /* toff_t is unsigned: libtiff passes negative offsets as their two's
     * complement, so a sum that wraps below base is a move backwards. */
    uint64_t to = base + off;
    if ((whence != SEEK_SET && (int64_t)off < 0 && to > base) || to > SIZE_MAX / 2)
        return (toff_t)-1;
    s->pos = (size_t)to;
    return to;
}

static int stream_close(thandle_t h) { return 0; }
static toff_t stream_size(thandle_t h) { return ((tiff_stream *)h)->len; }

static int stream_map(thandle_t h, void **base, toff_t *size)
{
    tiff_stream *s = h;
    if (s->writable)
        return 0;
    *base = s->data;
    *size = s->len;
    return 1;
}

static void stream_unmap(thandle_t h, void *base, toff_t size) {}

/* ---------------------------------------------------------- messages */

/* What libtiff said about one handle: its first error, and its first
 * complaint about a metadata tag's value. */
typedef struct {
    int errors;
    char first[200];
    char meta_note[100];
} tiff_log;

/* libtiff 4.5 reports a tag value out of its range ("Bad value 9 for
 * \"Orientation\" tag") as an error, yet reads the directory without the
 * tag. For the metadata tags read here that is a dropped item (a warning
 * in gimg_meta), not a broken file. */
static int metadata_complaint(const char *msg)
{
    static const char *const tags[] = {"\"Orientation\"", "\"ResolutionUnit\"",
                                       "\"XResolution\"", "\"YResolution\""};
    if (!strstr(msg, "Bad value"))
        return 0;
    for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++)
        if (strstr(msg, tags[i]))
            return 1;
    return 0;
}

static int on_error(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap)
{
    tiff_log *log = user;
    char msg[sizeof log->first];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (metadata_complaint(msg)) {
        if (!log->meta_note[0]) {
            const char *what = strstr(msg, "Bad value");
            snprintf(log->meta_note, sizeof log->meta_note, "%s", what);
        }
    } else if (log->errors++ == 0) {
        memcpy(log->first, msg, sizeof msg);
    }
    return 1;   /* handled: libtiff's process-wide handler (stderr) is not called */
}

static int on_warning(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap)
{
    return 1;   /* ignored (see the rules above), and never printed */
}

static TIFF *open_stream(tiff_stream *s, tiff_log *log, const char *mode, uint64_t alloc_cap)
{
    TIFFOpenOptions *opts = TIFFOpenOptionsAlloc();
    if (!opts)
        return NULL;
    s->pos = 0;   /* libtiff reads the header from where the stream stands */
    TIFFOpenOptionsSetErrorHandlerExtR(opts, on_error, log);
    TIFFOpenOptionsSetWarningHandlerExtR(opts, on_warning, log);
    TIFFOpenOptionsSetMaxSingleMemAlloc(opts, alloc_cap > (uint64_t)PTRDIFF_MAX
                                                  ? (tmsize_t)PTRDIFF_MAX : (tmsize_t)alloc_cap);
    TIFF *tif = TIFFClientOpenExt("TIFF", mode, s, stream_read, stream_write, stream_seek,
                                  stream_close, stream_size, stream_map, stream_unmap, opts);
    TIFFOpenOptionsFree(opts);
    return tif;
}

/* The failure for what libtiff reported (or `what` when it said nothing). */
static gimg_status corrupt(const tiff_log *log, const char *what)
{
    return gimg_fail(GIMG_E_FORMAT, "corrupt TIFF: %s", log->errors ? log->first : what);
}

/* ---------------------------------------------------------- sniffing */

static int sniff(const unsigned char *buf, size_t len)
{
    if (len < 4)
        return 0;
    return (buf[0] == 'I' && buf[1] == 'I' && (buf[2] == 42 || buf[2] == 43) && buf[3] == 0) ||
           (buf[0] == 'M' && buf[1] == 'M' && buf[2] == 0 && (buf[3] == 42 || buf[3] == 43));
}

/* ---------------------------------------------------------- the layout */

/* How a page's samples are stored, and what the image gets. */
typedef struct {
    uint32_t width, height;
    uint16_t bits, spp, photometric, planar, compression;
    int is_float;                /* SAMPLEFORMAT_IEEEFP */
    int color;                   /* color samples in the file: 1 (gray, index) or 3 */
    int alpha_sample;            /* the file's sample kept as alpha, or -1 */
    int associated;              /* that alpha is premultiplied */
    int invert;                  /* MINISWHITE integer samples */
    int palette;
    /* The image. */
    int channels;
    gimg_sample sample;
    unsigned maxval;             /* 2^bits - 1 for b-bit samples (b in 2..15 but 8), else 0 */
    /* Strips or tiles. */
    int tiled;
    uint32_t chunk_w, chunk_h;   /* a tile, or a strip's width and rows */
    uint32_t chunks_per_plane, chunks_across;
    uint32_t planes;             /* planes stored (1 if contiguous) */
    uint64_t chunk_row_bytes;    /* one row of a decoded chunk */
    uint64_t chunk_bytes;        /* a whole decoded chunk (strip: of chunk_h rows) */
    /* Palette: 8-bit or 16-bit entries, per index (2^bits of them). */
    uint8_t *map8;               /* [3 * entries] */
    uint16_t *map16;
} tiff_layout;

static void layout_free(tiff_layout *L)
{
    free(L->map8);
    free(L->map16);
    L->map8 = NULL;
    L->map16 = NULL;
}

static const char *photometric_name(uint16_t p)
{
    switch (p) {
    case PHOTOMETRIC_SEPARATED: return "CMYK (separated)";
    case PHOTOMETRIC_YCBCR: return "YCbCr";
    case PHOTOMETRIC_CIELAB: return "CIE L*a*b*";
    case PHOTOMETRIC_ICCLAB: return "ICC L*a*b*";
    case PHOTOMETRIC_ITULAB: return "ITU L*a*b*";
    case PHOTOMETRIC_LOGL: return "LogL";
    case PHOTOMETRIC_LOGLUV: return "LogLuv";
    case PHOTOMETRIC_MASK: return "transparency mask";
    case PHOTOMETRIC_CFA: return "CFA (raw sensor)";
    default: return NULL;
    }
}

/* Reads the colormap into 8-bit or 16-bit RGB tables, as vips reads it. */
static gimg_status read_palette(TIFF *tif, tiff_layout *L)
{
    uint16_t *r, *g, *b;
    if (!TIFFGetField(tif, TIFFTAG_COLORMAP, &r, &g, &b))
        return gimg_fail(GIMG_E_FORMAT, "corrupt TIFF: palette image without a colormap");
    size_t n = (size_t)1 << L->bits;
    int small = 1, gray = 1;
    for (size_t i = 0; i < n; i++) {
        small &= r[i] < 256 && g[i] < 256 && b[i] < 256;
        gray &= r[i] == g[i] && g[i] == b[i];
    }
    L->channels = gray ? 1 : 3;
    if (L->bits == 16) {
        L->sample = GIMG_U16;
        if (!(L->map16 = malloc(3 * n * sizeof *L->map16)))
            return gimg_fail(GIMG_E_NOMEM, "out of memory reading a TIFF colormap");
        for (size_t i = 0; i < n; i++) {
            L->map16[3 * i] = r[i];
            L->map16[3 * i + 1] = g[i];
            L->map16[3 * i + 2] = b[i];
        }
    } else {
        L->sample = GIMG_U8;
        if (!(L->map8 = malloc(3 * n)))
            return gimg_fail(GIMG_E_NOMEM, "out of memory reading a TIFF colormap");
        int shift = small ? 0 : 8;
        for (size_t i = 0; i < n; i++) {
            L->map8[3 * i] = (uint8_t)(r[i] >> shift);
            L->map8[3 * i + 1] = (uint8_t)(g[i] >> shift);
            L->map8[3 * i + 2] = (uint8_t)(b[i] >> shift);
        }
    }
    return GIMG_OK;
}

/* Which extra sample is the alpha channel (see the rules above). */
static void choose_alpha(TIFF *tif, tiff_layout *L)
{
    uint16_t n_extra = 0, *kinds = NULL;
    L->alpha_sample = -1;
    int extras = L->spp - L->color;
    if (extras < 1)
        return;
    if (!TIFFGetField(tif, TIFFTAG_EXTRASAMPLES, &n_extra, &kinds))
        n_extra = 0;
    for (int i = 0; i < extras && i < n_extra; i++)
        if (kinds[i] == EXTRASAMPLE_ASSOCALPHA || kinds[i] == EXTRASAMPLE_UNASSALPHA) {
            L->alpha_sample = L->color + i;
            L->associated = kinds[i] == EXTRASAMPLE_ASSOCALPHA;
            return;
        }
    if (n_extra == 0 || kinds[0] == EXTRASAMPLE_UNSPECIFIED)
        L->alpha_sample = L->color;
}

/* a * b + c into *out, in 64 bits; 0 on overflow. */
static int mul_add(uint64_t a, uint64_t b, uint64_t c, uint64_t *out)
{
    return !__builtin_mul_overflow(a, b, out) && !__builtin_add_overflow(*out, c, out);
}

/* Reads and checks the current directory's layout. */
static gimg_status read_layout(TIFF *tif, tiff_layout *L)
{
    memset(L, 0, sizeof *L);
    uint16_t format = SAMPLEFORMAT_UINT;
    uint32_t rows_per_strip = 0;
    if (!TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &L->width) ||
        !TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &L->height))
        return gimg_fail(GIMG_E_FORMAT, "corrupt TIFF: no image size");
    TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &L->bits);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &L->spp);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, &format);
    TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &L->planar);
    TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &L->compression);
    if (!TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &L->photometric))
        return gimg_fail(GIMG_E_FORMAT, "corrupt TIFF: no photometric interpretation");

    /* The size first: nothing below allocates more than a colormap. */
    gimg_status st = gimg_check_size(L->width, L->height, 1, GIMG_U8, NULL, NULL);
    if (st)
        return st;

    if (L->compression == COMPRESSION_OJPEG)
        return gimg_fail(GIMG_E_FORMAT, "old-style JPEG TIFF (compression 6) is not supported");
    if (!TIFFIsCODECConfigured(L->compression))
        return gimg_fail(GIMG_E_FORMAT, "TIFF compression %u is not supported", L->compression);

    if (format == SAMPLEFORMAT_INT)
        return gimg_fail(GIMG_E_FORMAT, "TIFF with signed integer samples is not supported");
    if (format == SAMPLEFORMAT_IEEEFP) {
        if (L->bits != 32)
            return gimg_fail(GIMG_E_FORMAT, "TIFF with %u-bit float samples is not supported "
                             "(32-bit only)", L->bits);
        L->is_float = 1;
    } else if (format != SAMPLEFORMAT_UINT && format != SAMPLEFORMAT_VOID) {
        return gimg_fail(GIMG_E_FORMAT, "TIFF sample format %u is not supported", format);
    } else if (L->bits < 1 || L->bits > 16) {
        return gimg_fail(GIMG_E_FORMAT, "TIFF with %u-bit samples is not supported "
                         "(1 to 16-bit integers and 32-bit float)", L->bits);
    }

    switch (L->photometric) {
    case PHOTOMETRIC_MINISWHITE:
        L->invert = !L->is_float;
        /* fall through */
    case PHOTOMETRIC_MINISBLACK:
        L->color = 1;
        break;
    case PHOTOMETRIC_RGB:
        L->color = 3;
        break;
    case PHOTOMETRIC_YCBCR:
        if (L->compression != COMPRESSION_JPEG)
            return gimg_fail(GIMG_E_FORMAT, "YCbCr TIFF is supported only JPEG-compressed");
        /* libtiff's JPEG codec then hands out RGB (and sizes strips so). */
        if (!TIFFSetField(tif, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB))
            return gimg_fail(GIMG_E_FORMAT, "corrupt TIFF: JPEG color conversion refused");
        L->color = 3;
        break;
    case PHOTOMETRIC_PALETTE:
        if (L->is_float)
            return gimg_fail(GIMG_E_FORMAT, "corrupt TIFF: palette image with float samples");
        L->color = 1;
        L->palette = 1;
        break;
    default: {
        const char *name = photometric_name(L->photometric);
        if (name)
            return gimg_fail(GIMG_E_FORMAT, "%s TIFF is not supported", name);
        return gimg_fail(GIMG_E_FORMAT, "TIFF photometric interpretation %u is not supported",
                         L->photometric);
    }
    }
    if (L->spp < L->color)
        return gimg_fail(GIMG_E_FORMAT, "corrupt TIFF: %u samples per pixel for %s", L->spp,
                         L->color == 3 ? "RGB" : "gray");
    if (L->palette && L->spp != 1)
        return gimg_fail(GIMG_E_FORMAT, "palette TIFF with extra samples is not supported");

    if (L->palette) {
        if ((st = read_palette(tif, L)))
            return st;
    } else {
        choose_alpha(tif, L);
        L->channels = L->color + (L->alpha_sample >= 0);
        L->sample = L->is_float ? GIMG_F32 : L->bits > 8 ? GIMG_U16 : GIMG_U8;
        if (!L->is_float && L->bits != 1 && L->bits != 8 && L->bits != 16)
            L->maxval = (1u << L->bits) - 1;
    }
    size_t image_bytes;
    if ((st = gimg_check_size(L->width, L->height, L->channels, L->sample, NULL, &image_bytes)))
        return st;

    /* Strips or tiles, sized here in 64 bits, and checked against libtiff. */
    L->planes = L->planar == PLANARCONFIG_SEPARATE && L->spp > 1 ? L->spp : 1;
    uint64_t chunk_samples = L->planes > 1 ? 1 : L->spp, bits_across;
    L->tiled = TIFFIsTiled(tif);
    uint64_t n_chunks = L->tiled ? TIFFNumberOfTiles(tif) : TIFFNumberOfStrips(tif);
    if (L->tiled) {
        if (!TIFFGetField(tif, TIFFTAG_TILEWIDTH, &L->chunk_w) ||
            !TIFFGetField(tif, TIFFTAG_TILELENGTH, &L->chunk_h) || L->chunk_w == 0 ||
            L->chunk_h == 0)
            return gimg_fail(GIMG_E_FORMAT, "corrupt TIFF: invalid tile size");
        L->chunks_across = (uint32_t)((L->width + (uint64_t)L->chunk_w - 1) / L->chunk_w);
        uint64_t down = (L->height + (uint64_t)L->chunk_h - 1) / L->chunk_h;
        L->chunks_per_plane = (uint32_t)(L->chunks_across * down);   /* <= 2^48: checked below */
        if ((uint64_t)L->chunks_across * down > UINT32_MAX)
            return gimg_fail(GIMG_E_FORMAT, "corrupt TIFF: too many tiles");
    } else {
        TIFFGetFieldDefaulted(tif, TIFFTAG_ROWSPERSTRIP, &rows_per_strip);
        if (rows_per_strip == 0)
            return gimg_fail(GIMG_E_FORMAT, "corrupt TIFF: 0 rows per strip");
        L->chunk_w = L->width;
        L->chunk_h = rows_per_strip < L->height ? rows_per_strip : L->height;
        L->chunks_across = 1;
        L->chunks_per_plane = (uint32_t)((L->height + (uint64_t)L->chunk_h - 1) / L->chunk_h);
    }
    if (!mul_add(L->chunk_w, chunk_samples * L->bits, 7, &bits_across) ||
        !mul_add(bits_across / 8, L->chunk_h, 0, &L->chunk_bytes))
        return gimg_fail(GIMG_E_FORMAT, "corrupt TIFF: %s size overflows",
                         L->tiled ? "tile" : "strip");
    L->chunk_row_bytes = bits_across / 8;
    if (L->chunk_bytes > CHUNK_CAP && L->chunk_bytes > image_bytes)
        return gimg_fail(GIMG_E_FORMAT, "corrupt TIFF: a %s of %ux%u is larger than the image",
                         L->tiled ? "tile" : "strip", L->chunk_w, L->chunk_h);
    if ((uint64_t)L->chunks_per_plane * L->planes != n_chunks)
        return gimg_fail(GIMG_E_FORMAT, "corrupt TIFF: %llu %s for %u planes of %u",
                         (unsigned long long)n_chunks, L->tiled ? "tiles" : "strips", L->planes,
                         L->chunks_per_plane);
    uint64_t lib_row = L->tiled ? TIFFTileRowSize64(tif) : TIFFScanlineSize64(tif);
    uint64_t lib_chunk = L->tiled ? TIFFTileSize64(tif) : TIFFVStripSize64(tif, L->chunk_h);
    if (lib_row != L->chunk_row_bytes || lib_chunk != L->chunk_bytes)
        return gimg_fail(GIMG_E_FORMAT, "corrupt TIFF: inconsistent %s layout",
                         L->tiled ? "tile" : "strip");
    return GIMG_OK;
}

/* --------------------------------------------------------------- pages */

/* The main IFD chain, walked over the file's bytes: counts the pages into
 * *pages, and refuses a chain that loops (libtiff 4.5 only warns and cuts
 * the chain there). An offset outside the file ends the chain, as libtiff
 * ends it. Floyd's cycle finding: a second walker at half speed, met by
 * the first only in a loop; no memory, time linear in the pages. */
typedef struct {
    const unsigned char *p;
    size_t len;
    int big_endian, bigtiff;
} ifd_walk;

static uint64_t walk_read(const ifd_walk *w, uint64_t at, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)w->p[at + (w->big_endian ? bytes - 1 - i : i)] << (8 * i);
    return v;
}

/* A walker over buf, which starts like a TIFF file (sniffed) and holds the
 * first IFD's offset (8 bytes, 16 for BigTIFF: checked by the caller). */
static ifd_walk walker(const unsigned char *buf, size_t len)
{
    ifd_walk w = {buf, len, buf[0] == 'M', 0};
    w.bigtiff = walk_read(&w, 2, 2) == 43;
    return w;
}

static uint64_t first_ifd(const ifd_walk *w)
{
    return walk_read(w, w->bigtiff ? 8 : 4, w->bigtiff ? 8 : 4);
}

/* Where the link to the next IFD of the IFD at `at` lies, or 0 when that
 * IFD does not fit in the file. */
static uint64_t ifd_link(const ifd_walk *w, uint64_t at)
{
    const int count_bytes = w->bigtiff ? 8 : 2, entry = w->bigtiff ? 20 : 12,
              link = w->bigtiff ? 8 : 4;
    if (at == 0 || at >= w->len || w->len - at < (uint64_t)count_bytes)
        return 0;
    uint64_t n = walk_read(w, at, count_bytes);
    if (n > (w->len - at - count_bytes) / entry)
        return 0;
    uint64_t link_at = at + count_bytes + n * entry;
    return w->len - link_at < (uint64_t)link ? 0 : link_at;
}

static int ifd_fits(const ifd_walk *w, uint64_t at) { return ifd_link(w, at) != 0; }

/* The offset of the IFD after the one at `at`, or 0 at the chain's end. */
static uint64_t next_ifd(const ifd_walk *w, uint64_t at)
{
    uint64_t link_at = ifd_link(w, at);
    uint64_t next = link_at ? walk_read(w, link_at, w->bigtiff ? 8 : 4) : 0;
    return next < w->len ? next : 0;
}

/* The value of a SHORT or LONG tag of the IFD at `at`, or -1. */
static int64_t ifd_tag(const ifd_walk *w, uint64_t at, unsigned tag)
{
    const int count_bytes = w->bigtiff ? 8 : 2, entry = w->bigtiff ? 20 : 12;
    if (at == 0 || at >= w->len || w->len - at < (uint64_t)count_bytes)
        return -1;
    uint64_t n = walk_read(w, at, count_bytes);
    if (n > (w->len - at - count_bytes) / entry)
        n = (w->len - at - count_bytes) / entry;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t e = at + count_bytes + i * entry;
        unsigned type = (unsigned)walk_read(w, e + 2, 2);
        if (walk_read(w, e, 2) == tag && (type == 3 || type == 4))
            return (int64_t)walk_read(w, e + (w->bigtiff ? 12 : 8), type == 3 ? 2 : 4);
    }
    return -1;
}

/* 1 if the IFD at `at` has an entry for tag (of any type and count). */
static int ifd_has_tag(const ifd_walk *w, uint64_t at, unsigned tag)
{
    const int count_bytes = w->bigtiff ? 8 : 2, entry = w->bigtiff ? 20 : 12;
    if (at == 0 || at >= w->len || w->len - at < (uint64_t)count_bytes)
        return 0;
    uint64_t n = walk_read(w, at, count_bytes);
    if (n > (w->len - at - count_bytes) / entry)
        n = (w->len - at - count_bytes) / entry;
    for (uint64_t i = 0; i < n; i++)
        if (walk_read(w, at + count_bytes + i * entry, 2) == tag)
            return 1;
    return 0;
}

/* Why libtiff could not open the file, where our own reading can say it
 * better: an image size of zero (libtiff: "zero number of strips"). */
static gimg_status open_failure(const unsigned char *buf, size_t len, const tiff_log *log)
{
    ifd_walk w = walker(buf, len);
    int64_t width = ifd_tag(&w, first_ifd(&w), 256), height = ifd_tag(&w, first_ifd(&w), 257);
    if (width == 0 || height == 0)
        return gimg_fail(GIMG_E_FORMAT, "invalid TIFF image size %lldx%lld", (long long)width,
                         (long long)height);
    return corrupt(log, "cannot open the file");
}

static gimg_status count_pages(const unsigned char *buf, size_t len, uint64_t *pages)
{
    ifd_walk w = walker(buf, len);
    if (len < (w.bigtiff ? 16u : 8u))
        return gimg_fail(GIMG_E_FORMAT, "truncated TIFF data (%zu bytes)", len);
    uint64_t first = first_ifd(&w);
    if (first >= len || (next_ifd(&w, first) == 0 && !ifd_fits(&w, first)))
        return gimg_fail(GIMG_E_FORMAT, "truncated TIFF data: the first directory (at offset "
                         "%llu) is past the end of the file (%zu bytes)",
                         (unsigned long long)first, len);
    uint64_t fast = first, slow = fast, n = 0;
    while (fast) {
        fast = next_ifd(&w, fast);
        n++;
        if (n % 2 == 0)
            slow = next_ifd(&w, slow);
        if (fast && fast == slow)
            return gimg_fail(GIMG_E_FORMAT, "corrupt TIFF: the directory chain loops (the IFD "
                             "at offset %llu comes back)", (unsigned long long)fast);
    }
    *pages = n;
    return GIMG_OK;
}

/* Opens the file and makes page `page` current; *pages gets the count. */
static gimg_status open_page(tiff_stream *s, tiff_log *log, int page, uint64_t alloc_cap,
                             TIFF **out, int *pages)
{
    *out = NULL;
    uint64_t n = 0;
    if (s->len < 8)
        return gimg_fail(GIMG_E_FORMAT, "truncated TIFF data (%zu bytes)", s->len);
    if (!sniff(s->data, s->len))
        return gimg_fail(GIMG_E_FORMAT, "not a TIFF file");
    gimg_status st = count_pages(s->data, s->len, &n);
    if (st)
        return st;
    TIFF *tif = open_stream(s, log, "r", alloc_cap);
    if (!tif)
        return open_failure(s->data, s->len, log);
    if (pages)
        *pages = n > INT_MAX ? INT_MAX : (int)n;
    if ((uint64_t)page >= n) {
        TIFFClose(tif);
        return gimg_fail(GIMG_E_FORMAT, "TIFF has %llu page%s: no page %d", (unsigned long long)n,
                         n == 1 ? "" : "s", page);
    }
    if (page > 0)
        log->meta_note[0] = '\0';   /* the first page's complaint is not this page's */
    if (page > 0 && (!TIFFSetDirectory(tif, (tdir_t)page) || log->errors)) {
        TIFFClose(tif);
        return corrupt(log, "cannot read the page's directory");
    }
    *out = tif;
    return GIMG_OK;
}

static gimg_status probe(const unsigned char *buf, size_t len, const gimg_read_opts *o,
                         gimg_info *info)
{
    tiff_stream s = {(unsigned char *)buf, len, len, 0, 0, 0};
    tiff_log log = {0};
    TIFF *tif;
    int pages;
    gimg_status st = open_page(&s, &log, o ? o->page : 0, TIFF_ALLOC_CAP, &tif, &pages);
    if (st)
        return st;
    tiff_layout L;
    st = read_layout(tif, &L);
    TIFFClose(tif);
    layout_free(&L);
    if (st)
        return st;
    info->format = GIMG_FMT_TIFF;
    info->width = (int)L.width;
    info->height = (int)L.height;
    info->channels = L.channels;
    info->sample = L.sample;
    info->pages = pages;
    return GIMG_OK;
}

/* ------------------------------------------------------------ decoding */

/* Copies the kept samples of a decoded chunk's rectangle into the image:
 * `samples` per pixel in the chunk (1 for a separate plane), `first` the
 * image channel its first kept sample goes to, `pick[k]` the chunk sample
 * image channel first + k takes, `n` how many. T: the sample's type. */
#define COPY_SAMPLES(T)                                                                \
    for (uint32_t y = 0; y < h; y++) {                                                 \
        const T *in = (const T *)(src + (size_t)y * src_row);                          \
        T *o = (T *)(gimg_row(out, (int)(y0 + y)) + (size_t)x0 * px_bytes) + first;    \
        for (uint32_t x = 0; x < w; x++, in += samples, o += channels)                 \
            for (int k = 0; k < n; k++)                                                \
                o[k] = in[pick[k]];                                                    \
    }

/* The b-bit sample (b in 1..16) starting `bit` bits into row, most
 * significant bit first; reads only the bytes the sample covers. */
static inline unsigned get_bits(const unsigned char *row, uint64_t bit, unsigned bits)
{
    const unsigned char *p = row + (bit >> 3);
    const unsigned end = (unsigned)(bit & 7) + bits;   /* bits used from p[0] on: 1..23 */
    uint32_t v = (uint32_t)p[0] << 16;
    if (end > 8)
        v |= (uint32_t)p[1] << 8;
    if (end > 16)
        v |= p[2];
    return v >> (24 - end) & ((1u << bits) - 1);
}

static void convert_chunk(const tiff_layout *L, const unsigned char *src, size_t src_row,
                          int plane, uint32_t x0, uint32_t y0, uint32_t w, uint32_t h,
                          gimg_image *out)
{
    const int channels = out->channels;
    const size_t px_bytes = gimg_pixel_bytes(out);
    const unsigned bits = L->bits;
    if (L->palette) {
        /* One index per pixel. */
        for (uint32_t y = 0; y < h; y++) {
            const unsigned char *in = src + (size_t)y * src_row;
            unsigned char *o = gimg_row(out, (int)(y0 + y)) + (size_t)x0 * px_bytes;
            for (uint32_t x = 0; x < w; x++) {
                unsigned v;
                if (bits == 16)
                    v = ((const uint16_t *)in)[x];
                else if (bits == 8)
                    v = in[x];
                else
                    v = get_bits(in, (uint64_t)x * bits, bits);
                if (L->map16) {
                    uint16_t *p = (uint16_t *)o + (size_t)x * channels;
                    for (int c = 0; c < channels; c++)
                        p[c] = L->map16[3 * v + c];
                } else {
                    for (int c = 0; c < channels; c++)
                        o[(size_t)x * channels + c] = L->map8[3 * v + c];
                }
            }
        }
        return;
    }
    int pick[4], n, first, samples;
    if (L->planes > 1) {
        samples = 1;
        n = 1;
        pick[0] = 0;
        first = plane < L->color ? plane : L->color;   /* the caller skips other planes */
    } else {
        samples = L->spp;
        n = channels;
        first = 0;
        for (int k = 0; k < L->color; k++)
            pick[k] = k;
        if (L->alpha_sample >= 0)
            pick[L->color] = L->alpha_sample;
    }
    if (bits == 8) {
        COPY_SAMPLES(uint8_t)
    } else if (bits == 16) {
        COPY_SAMPLES(uint16_t)
    } else if (bits == 32) {
        COPY_SAMPLES(uint32_t)
    } else {
        /* b-bit samples, unpacked: 1-bit ones to 0/255, others as they are
         * (the image's maxval is 2^b - 1). */
        const unsigned scale = bits == 1 ? 255 : 1;
        for (uint32_t y = 0; y < h; y++) {
            const unsigned char *in = src + (size_t)y * src_row;
            unsigned char *o = gimg_row(out, (int)(y0 + y)) + (size_t)x0 * px_bytes;
            for (uint32_t x = 0; x < w; x++)
                for (int k = 0; k < n; k++) {
                    unsigned v = scale * get_bits(in, ((uint64_t)x * samples + pick[k]) * bits,
                                                  bits);
                    size_t at = (size_t)x * channels + first + k;
                    if (out->sample == GIMG_U16)
                        ((uint16_t *)o)[at] = (uint16_t)v;
                    else
                        o[at] = (uint8_t)v;
                }
        }
    }
}

/* The image channel plane p of a separate-planes file fills, or -1. */
static int plane_channel(const tiff_layout *L, int p)
{
    return p < L->color ? p : p == L->alpha_sample ? L->color : -1;
}

/* 1 if chunk i's decoded samples are exactly the image's rows. */
static int decodes_in_place(const tiff_layout *L)
{
    return !L->tiled && L->planes == 1 && !L->palette && L->spp == L->channels &&
           (L->bits == 8 || L->bits == 16 || L->bits == 32);
}

/* The chunks of one decode, shared by its workers: each takes the next
 * chunk not yet taken, so that a worker the machine runs slowly (other
 * processes, other decodes of a batch) holds no share of the work. */
typedef struct {
    const unsigned char *buf;
    size_t len;
    int page;
    uint64_t alloc_cap;
    const tiff_layout *L;
    gimg_image *out;
    uint32_t n_chunks;
    atomic_uint next;          /* the next chunk to take */
    atomic_int failed;         /* a worker failed: the others stop */
} decode_work;

/* The helper worker: its status, its failing chunk and its message (it
 * opens a libtiff handle of its own). */
typedef struct {
    decode_work *w;
    gimg_status st;
    uint32_t failed_at;
    char why[256];
} decode_job;

/* How reading one chunk ended. */
typedef enum { CHUNK_READ, CHUNK_OUTSIDE, CHUNK_SHORT, CHUNK_BROKEN } chunk_outcome;

/* Decodes chunk i, whose strip has h rows (the last may be short; a tile
 * is decoded whole, edges included), into dst; file_len is the file's
 * size. What went wrong is recorded by chunk_failure, so that a caller
 * that meets several failures reports the one decoding whole reports. */
static chunk_outcome read_chunk(TIFF *tif, const tiff_log *log, const tiff_layout *L,
                                size_t file_len, uint32_t i, uint32_t h, unsigned char *dst)
{
    /* A chunk must lie inside the file (libtiff would refuse it too,
     * with a less telling message). */
    uint64_t off = TIFFGetStrileOffset(tif, i), count = TIFFGetStrileByteCount(tif, i);
    if (off > file_len || count > file_len - off)
        return CHUNK_OUTSIDE;
    tmsize_t want = (tmsize_t)(L->tiled ? L->chunk_bytes : L->chunk_row_bytes * h), got;
    /* libtiff's JPEG codec decodes a chunk whose JPEG stream is smaller
     * than the chunk with a mere warning ("Improper JPEG strip/tile
     * size"), as ImageMagick and vips accept it, and leaves the rows the
     * stream lacks unwritten: they are black here, whatever held dst. */
    if (L->compression == COMPRESSION_JPEG)
        memset(dst, 0, (size_t)want);
    if (L->tiled)
        got = TIFFReadEncodedTile(tif, i, dst, want);
    else
        got = TIFFReadEncodedStrip(tif, i, dst, want);
    if (got != want || log->errors)
        return got >= 0 && !log->errors ? CHUNK_SHORT : CHUNK_BROKEN;
    return CHUNK_READ;
}

/* The failure of chunk i (read_chunk's outcome `why`), recorded. */
static gimg_status chunk_failure(const tiff_layout *L, const tiff_log *log, uint32_t i,
                                 chunk_outcome why)
{
    const char *kind = L->tiled ? "tile" : "strip";
    if (why == CHUNK_OUTSIDE)
        return gimg_fail(GIMG_E_FORMAT, "truncated TIFF data: %s %u ends past the end of "
                         "the file", kind, i);
    if (why == CHUNK_SHORT)
        return gimg_fail(GIMG_E_FORMAT, "truncated TIFF data: %s %u is short", kind, i);
    return corrupt(log, "cannot decode");
}

/* Decodes chunks until none is left or one fails; *failed_at gets the
 * failing chunk. Chunks are taken in increasing order, and every chunk
 * taken is finished, so the first failing chunk of the file is always
 * found, whichever worker meets it: the message does not depend on timing. */
static gimg_status decode_chunks(decode_work *j, TIFF *tif, tiff_log *log, uint32_t *failed_at)
{
    const tiff_layout *L = j->L;
    const int direct = decodes_in_place(L);
    const size_t stride = j->out->stride_bytes;
    unsigned char *scratch = NULL;
    if (!direct && !(scratch = malloc((size_t)L->chunk_bytes ? (size_t)L->chunk_bytes : 1)))
        return gimg_fail(GIMG_E_NOMEM, "out of memory decoding TIFF");
    gimg_status st = GIMG_OK;
    for (;;) {
        uint32_t i = atomic_fetch_add(&j->next, 1);
        if (i >= j->n_chunks || atomic_load(&j->failed))
            break;
        int plane = (int)(i / L->chunks_per_plane);
        if (L->planes > 1 && plane_channel(L, plane) < 0)
            continue;
        uint32_t idx = i % L->chunks_per_plane;
        uint32_t x0 = (idx % L->chunks_across) * L->chunk_w;
        uint32_t y0 = (idx / L->chunks_across) * L->chunk_h;
        uint32_t w = L->width - x0 < L->chunk_w ? L->width - x0 : L->chunk_w;
        uint32_t h = L->height - y0 < L->chunk_h ? L->height - y0 : L->chunk_h;
        unsigned char *dst = direct ? j->out->data + (size_t)y0 * stride : scratch;
        chunk_outcome got = read_chunk(tif, log, L, j->len, i, h, dst);
        if (got != CHUNK_READ) {
            st = chunk_failure(L, log, i, got);
            *failed_at = i;
            break;
        }
        if (!direct)
            convert_chunk(L, scratch, (size_t)L->chunk_row_bytes, plane, x0, y0, w, h, j->out);
    }
    free(scratch);
    if (st)
        atomic_store(&j->failed, 1);
    return st;
}

static void *decode_worker(void *arg)
{
    decode_job *j = arg;
    decode_work *w = j->w;
    tiff_stream s = {(unsigned char *)w->buf, w->len, w->len, 0, 0, 0};
    tiff_log log = {0};
    TIFF *tif;
    /* The page was opened once already: this fails only for memory. */
    j->st = open_page(&s, &log, w->page, w->alloc_cap, &tif, NULL);
    if (!j->st && w->L->photometric == PHOTOMETRIC_YCBCR &&
        !TIFFSetField(tif, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB))
        j->st = corrupt(&log, "JPEG color conversion refused");
    if (j->st) {
        j->failed_at = UINT32_MAX;   /* a chunk's own failure, if any, comes first */
        atomic_store(&w->failed, 1);
    } else
        j->st = decode_chunks(w, tif, &log, &j->failed_at);
    if (j->st)
        snprintf(j->why, sizeof j->why, "%s", gimg_last_error());
    if (tif)
        TIFFClose(tif);
    return NULL;
}

/* MINISWHITE: the gray channel inverted (v -> max - v, in the image's
 * units), so that 0 is black. */
static void invert_gray(gimg_image *im)
{
    const unsigned max = gimg_image_max(im);
    for (int y = 0; y < im->height; y++) {
        unsigned char *row = gimg_row(im, y);
        for (size_t x = 0; x < (size_t)im->width; x++) {
            if (im->sample == GIMG_U8)
                row[x * im->channels] = (uint8_t)(max - row[x * im->channels]);
            else {
                uint16_t *p = (uint16_t *)row + x * im->channels;
                *p = (uint16_t)(max - *p);
            }
        }
    }
}

/* Associated alpha: color divided by alpha, rounded, clamped; 0 where
 * alpha is 0 (in the image's units: max is its maxval). */
static void unpremultiply(gimg_image *im)
{
    const int ca = im->channels - 1;
    const unsigned max = gimg_image_max(im);
    for (int y = 0; y < im->height; y++) {
        unsigned char *row = gimg_row(im, y);
        for (size_t x = 0; x < (size_t)im->width; x++) {
            if (im->sample == GIMG_U8) {
                uint8_t *p = row + x * im->channels;
                unsigned a = p[ca];
                for (int c = 0; c < ca; c++) {
                    unsigned v = a ? (p[c] * max + a / 2) / a : 0;
                    p[c] = (uint8_t)(v > max ? max : v);
                }
            } else if (im->sample == GIMG_U16) {
                uint16_t *p = (uint16_t *)row + x * im->channels;
                uint64_t a = p[ca];
                for (int c = 0; c < ca; c++) {
                    uint64_t v = a ? ((uint64_t)p[c] * max + a / 2) / a : 0;
                    p[c] = (uint16_t)(v > max ? max : v);
                }
            } else {
                float *p = (float *)row + x * im->channels;
                float a = p[ca];
                for (int c = 0; c < ca; c++)
                    p[c] = a != 0.0f ? p[c] / a : 0.0f;
            }
        }
    }
}

/* What decoded samples need before they are the image's (MINISWHITE
 * inverted, associated alpha undone), pixel by pixel: on the whole image
 * or on a band of its rows (its layout, and its maxval). */
static void finish_samples(const tiff_layout *L, gimg_image *im)
{
    if (L->invert)
        invert_gray(im);
    if (L->associated)
        unpremultiply(im);
}

/* A tag's bytes (ICC profile, XMP packet) into *m, unless over the cap.
 * present: the page's directory has the tag (libtiff ignores, with a
 * warning, one whose bytes it cannot read: we say so). */
static gimg_status take_item(gimg_meta **m, const char *what, int got, const void *data,
                             uint32_t n, int present,
                             gimg_status (*add)(gimg_meta **, const unsigned char *, size_t))
{
    const unsigned char *p = data;
    if (!got || !p || n == 0) {
        if (present)
            gimg_meta_warn(m, "%s dropped: its tag is malformed or lies past the end of "
                           "the file", what);
        return GIMG_OK;
    }
    if (n > META_ITEM_CAP) {
        gimg_meta_warn(m, "%s dropped: %lu bytes, over the limit of %zu", what,
                       (unsigned long)n, META_ITEM_CAP);
        return GIMG_OK;
    }
    return add(m, p, n);
}

/* The current page's metadata into *m (left NULL when it has none); buf
 * is the file. */
static gimg_status read_meta(TIFF *tif, const unsigned char *buf, size_t len, gimg_meta **m)
{
    const ifd_walk w = walker(buf, len);
    const uint64_t ifd = TIFFCurrentDirOffset(tif);
    uint32_t n = 0;
    void *p = NULL;
    int got = TIFFGetField(tif, TIFFTAG_ICCPROFILE, &n, &p);
    gimg_status st = take_item(m, "ICC profile", got, p, n,
                               ifd_has_tag(&w, ifd, TIFFTAG_ICCPROFILE), gimg_meta_add_icc);
    n = 0;
    p = NULL;
    got = TIFFGetField(tif, TIFFTAG_XMLPACKET, &n, &p);
    if (!st)
        st = take_item(m, "XMP", got, p, n, ifd_has_tag(&w, ifd, TIFFTAG_XMLPACKET),
                       gimg_meta_add_xmp);
    if (st)
        return st;
    float x = 0, y = 0;
    uint16_t unit = 0;
    if (TIFFGetField(tif, TIFFTAG_XRESOLUTION, &x)) {
        if (!TIFFGetField(tif, TIFFTAG_YRESOLUTION, &y))
            y = x;   /* one value for both, as square pixels have */
        /* No unit tag: inch. A tag libtiff refused (a bad value): unknown. */
        if (!TIFFGetField(tif, TIFFTAG_RESOLUTIONUNIT, &unit))
            unit = ifd_has_tag(&w, ifd, TIFFTAG_RESOLUTIONUNIT) ? 0 : RESUNIT_INCH;
        double per_inch = unit == RESUNIT_INCH ? 1.0 : unit == RESUNIT_CENTIMETER ? 2.54 : 0.0;
        if (per_inch > 0 && isfinite(x) && isfinite(y) && x > 0 && y > 0) {
            if (!*m && !(*m = gimg_meta_new()))
                return gimg_fail(GIMG_E_NOMEM, "out of memory for metadata");
            (*m)->x_dpi = x * per_inch;
            (*m)->y_dpi = y * per_inch;
        }
    }
    uint16_t orientation = 0;
    if (TIFFGetField(tif, TIFFTAG_ORIENTATION, &orientation) && orientation >= 1 &&
        orientation <= 8) {
        if (!*m && !(*m = gimg_meta_new()))
            return gimg_fail(GIMG_E_NOMEM, "out of memory for metadata");
        (*m)->orientation = orientation;
    }
    return GIMG_OK;
}

/* The current page's metadata, as decoding gives it: read_meta's, and
 * the metadata tag libtiff refused, if any, as a warning. */
static gimg_status decoded_meta(TIFF *tif, const unsigned char *buf, size_t len,
                                const tiff_log *log, gimg_meta **m)
{
    gimg_status st = read_meta(tif, buf, len, m);
    if (!st && log->meta_note[0])
        gimg_meta_warn(m, "TIFF tag ignored: %s", log->meta_note);
    return st;
}

/* Opens page `page` of s for decoding: *tif at the page, *L its layout
 * (read and checked: the size limits first), *cap libtiff's allocation
 * cap. libtiff keeps s and log: they stay put while *tif is open. */
static gimg_status open_decoding(tiff_stream *s, tiff_log *log, int page, TIFF **tif,
                                 tiff_layout *L, uint64_t *cap)
{
    memset(L, 0, sizeof *L);
    gimg_status st = open_page(s, log, page, TIFF_ALLOC_CAP, tif, NULL);
    if (st)
        return st;
    if ((st = read_layout(*tif, L))) {
        TIFFClose(*tif);
        *tif = NULL;
        layout_free(L);
        return st;
    }
    /* libtiff may need one decoded chunk's worth (the floating-point
     * predictor's buffer): reopen with the cap raised to that. */
    *cap = TIFF_ALLOC_CAP;
    if (L->chunk_bytes + (1 << 20) > *cap) {
        TIFFClose(*tif);
        *cap = L->chunk_bytes + (1 << 20);
        memset(log, 0, sizeof *log);
        if ((st = open_page(s, log, page, *cap, tif, NULL))) {
            layout_free(L);
            return st;
        }
        if (L->photometric == PHOTOMETRIC_YCBCR)
            TIFFSetField(*tif, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB);
    }
    return GIMG_OK;
}

static gimg_status decode(const unsigned char *buf, size_t len, const gimg_read_opts *o,
                          gimg_image *out)
{
    memset(out, 0, sizeof *out);
    const int page = o ? o->page : 0;
    tiff_stream s = {(unsigned char *)buf, len, len, 0, 0, 0};
    tiff_log log = {0};
    TIFF *tif;
    tiff_layout L;
    uint64_t cap;
    gimg_status st = open_decoding(&s, &log, page, &tif, &L, &cap);
    if (st)
        return st;
    if ((st = gimg_image_alloc(out, (int)L.width, (int)L.height, L.channels, L.sample))) {
        TIFFClose(tif);
        layout_free(&L);
        return st;
    }
    out->maxval = L.maxval;

    /* Two workers for a large image of several chunks: this thread and a
     * helper, taking chunks in turn. */
    decode_work work = {buf, len, page, cap, &L, out, L.chunks_per_plane * L.planes, 0, 0};
    const int parallel = work.n_chunks >= 4 && (uint64_t)L.width * L.height *
                                                      gimg_pixel_bytes(out) >= PARALLEL_MIN_BYTES;
    decode_job helper_job = {&work, GIMG_OK, 0, ""};
    pthread_t helper;
    int helping = parallel && pthread_create(&helper, NULL, decode_worker, &helper_job) == 0;
    uint32_t failed_at = 0;
    st = decode_chunks(&work, tif, &log, &failed_at);
    if (helping)
        pthread_join(helper, NULL);
    if (!st && !(helping && helper_job.st))
        st = decoded_meta(tif, buf, len, &log, &out->meta);
    TIFFClose(tif);
    layout_free(&L);
    /* Of two failures, the first chunk's (see decode_chunks). */
    if (helping && helper_job.st && (!st || helper_job.failed_at < failed_at))
        st = gimg_fail(helper_job.st, "%s", helper_job.why);
    if (st) {
        gimg_image_free(out);
        memset(out, 0, sizeof *out);
        return st;
    }
    finish_samples(&L, out);
    return GIMG_OK;
}

/* ------------------------------------------------------ rows (band.h) */

/* A page read band by band. libtiff decodes no less than a chunk (a
 * strip, or a tile), so the rows come a chunk row at a time: one strip,
 * or one row of tiles, of every plane kept (a separate-planes file holds
 * its rows in each plane). A chunk row's rows that the band does not take
 * wait in `held` for the next band; a strip that falls whole in a band
 * and decodes to the image's rows goes straight into the band. Memory:
 * one chunk row in the image's layout and one decoded chunk, besides the
 * band (a file written as one strip holds it whole all the same). Every
 * layout decoding takes reads so: its rows come out in order (the
 * Orientation tag is not applied, only kept), and what decoding does
 * after the chunks (inversion, unpremultiplication) is done pixel by
 * pixel. The bands are decoded on one thread (the whole decoder's helper
 * thread takes chunks in turn over the whole image). */
typedef struct {
    tiff_stream s;               /* libtiff holds s and log: the state, */
    tiff_log log;                /* calloc'd, never moves */
    TIFF *tif;
    tiff_layout L;
    unsigned char *scratch;      /* one decoded chunk (layouts converted) */
    gimg_image held;             /* a chunk row's rows, in the image's layout */
    uint32_t held_y0, held_rows; /* which: [held_y0, held_y0 + held_rows) */
    uint32_t y;                  /* the next row to give */
} tiff_rows;

static void rows_close_tiff(void *rows)
{
    tiff_rows *r = rows;
    if (!r)
        return;
    if (r->tif)
        TIFFClose(r->tif);
    layout_free(&r->L);
    free(r->scratch);
    gimg_image_free(&r->held);
    free(r);
}

static gimg_status rows_open_tiff(const unsigned char *buf, size_t len, const gimg_read_opts *o,
                                  gimg_image *header, void **rows)
{
    *rows = NULL;
    const int page = o ? o->page : 0;
    if (page < 0)
        return GIMG_OK;   /* read.c refuses it, with its message */
    tiff_rows *r = calloc(1, sizeof *r);
    if (!r)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    r->s = (tiff_stream){(unsigned char *)buf, len, len, 0, 0, 0};
    uint64_t cap;
    gimg_status st = open_decoding(&r->s, &r->log, page, &r->tif, &r->L, &cap);
    /* Every piece of the metadata is in the page's directory, read now. */
    if (!st)
        st = decoded_meta(r->tif, buf, len, &r->log, &header->meta);
    if (!st && !decodes_in_place(&r->L) &&
        !(r->scratch = malloc(r->L.chunk_bytes ? (size_t)r->L.chunk_bytes : 1)))
        st = gimg_fail(GIMG_E_NOMEM, "out of memory decoding TIFF");
    if (st) {
        rows_close_tiff(r);
        gimg_meta_free(header->meta);
        header->meta = NULL;
        return st;
    }
    header->width = (int)r->L.width;
    header->height = (int)r->L.height;
    header->channels = r->L.channels;
    header->sample = r->L.sample;
    header->maxval = r->L.maxval;
    *rows = r;
    return GIMG_OK;
}

/* Chunk i failed (read_chunk's `why`). Decoding whole reports the file's
 * first failing chunk, and numbers chunks plane after plane: with separate
 * planes, the chunks of the earlier planes below this chunk row come
 * before i, and are not read yet. The first of them that fails is the
 * failure; they are read on the same handle, each from a clean log, as
 * decoding would meet them. */
static gimg_status chunk_row_failure(tiff_rows *r, uint32_t i, chunk_outcome why)
{
    const tiff_layout *L = &r->L;
    const uint32_t plane = i / L->chunks_per_plane;
    /* The first chunk of the next chunk row, in a plane. */
    const uint32_t below = (i % L->chunks_per_plane / L->chunks_across + 1) * L->chunks_across;
    const tiff_log at_i = r->log;
    for (uint32_t p = 0; p < plane; p++) {
        if (plane_channel(L, (int)p) < 0)
            continue;
        for (uint32_t c = below; c < L->chunks_per_plane; c++) {
            const uint32_t j = p * L->chunks_per_plane + c, row = c / L->chunks_across;
            const uint32_t y0 = row * L->chunk_h;
            const uint32_t h = L->height - y0 < L->chunk_h ? L->height - y0 : L->chunk_h;
            r->log.errors = 0;
            r->log.first[0] = '\0';
            chunk_outcome earlier = read_chunk(r->tif, &r->log, L, r->s.len, j, h, r->scratch);
            if (earlier != CHUNK_READ)
                return chunk_failure(L, &r->log, j, earlier);
        }
    }
    r->log = at_i;
    return chunk_failure(L, &r->log, i, why);
}

/* Chunk row k (a strip, or a row of tiles, of every plane kept) into out's
 * rows from row0 on: decoded into them (decodes_in_place, out's rows
 * packed as the strip's) or through the scratch chunk. */
static gimg_status read_chunk_row(tiff_rows *r, uint32_t k, gimg_image *out, int row0)
{
    const tiff_layout *L = &r->L;
    const uint32_t y0 = k * L->chunk_h;
    const uint32_t h = L->height - y0 < L->chunk_h ? L->height - y0 : L->chunk_h;
    for (uint32_t p = 0; p < L->planes; p++) {
        if (L->planes > 1 && plane_channel(L, (int)p) < 0)
            continue;
        for (uint32_t a = 0; a < L->chunks_across; a++) {
            const uint32_t i = p * L->chunks_per_plane + k * L->chunks_across + a;
            const uint32_t x0 = a * L->chunk_w;
            const uint32_t w = L->width - x0 < L->chunk_w ? L->width - x0 : L->chunk_w;
            unsigned char *dst = r->scratch ? r->scratch : gimg_row(out, row0);
            chunk_outcome got = read_chunk(r->tif, &r->log, L, r->s.len, i, h, dst);
            if (got != CHUNK_READ)
                return chunk_row_failure(r, i, got);
            if (r->scratch)
                convert_chunk(L, r->scratch, (size_t)L->chunk_row_bytes, (int)p, x0,
                              (uint32_t)row0, w, h, out);
        }
    }
    return GIMG_OK;
}

static gimg_status rows_read_tiff(void *rows, gimg_image *band)
{
    tiff_rows *r = rows;
    const tiff_layout *L = &r->L;
    const size_t row_bytes = (size_t)band->width * gimg_pixel_bytes(band);
    gimg_status st = GIMG_OK;
    for (int i = 0; i < band->height && !st;) {
        const uint32_t y = r->y + (uint32_t)i, left = (uint32_t)(band->height - i);
        /* Rows of the last chunk row read not given yet (y >= held_y0). */
        if (y - r->held_y0 < r->held_rows) {
            uint32_t n = r->held_y0 + r->held_rows - y;
            n = n < left ? n : left;
            for (uint32_t k = 0; k < n; k++)
                memcpy(gimg_row(band, i + (int)k), gimg_row(&r->held, (int)(y - r->held_y0 + k)),
                       row_bytes);
            i += (int)n;
            continue;
        }
        /* Every row above y was given: y starts chunk row y / chunk_h. */
        const uint32_t h = L->height - y < L->chunk_h ? L->height - y : L->chunk_h;
        if (decodes_in_place(L) && h <= left && band->stride_bytes == L->chunk_row_bytes) {
            st = read_chunk_row(r, y / L->chunk_h, band, i);
            i += (int)h;
            continue;
        }
        r->held_rows = 0;
        const uint32_t most = L->chunk_h < L->height ? L->chunk_h : L->height;
        if (!r->held.data)
            st = gimg_image_alloc(&r->held, (int)L->width, (int)most, L->channels, L->sample);
        if (!st && !(st = read_chunk_row(r, y / L->chunk_h, &r->held, 0))) {
            r->held_y0 = y;
            r->held_rows = h;
        }
    }
    if (st)
        return st;
    r->y += (uint32_t)band->height;
    finish_samples(L, band);
    return GIMG_OK;
}

/* ------------------------------------------------------------- writing */

static void layout(int *channels, gimg_sample *sample) {}

/* The bits per sample im is written with: b when its maxval is 2^b - 1
 * (b in 1..15), otherwise its sample type's. */
static unsigned bits_written(const gimg_image *im)
{
    const unsigned m = im->maxval;
    if (im->sample != GIMG_F32 && m >= 1 && m < 65535 && (m & (m + 1)) == 0)
        return (unsigned)__builtin_popcount(m);
    return 8u * (unsigned)im->sample;
}

/* Row y of im as `bits`-bit samples, most significant bit first, into dst
 * (row_bytes, the last byte's unused bits zero); a sample above the
 * maxval (which no operation makes) is clamped to it. */
static void pack_row(const gimg_image *im, int y, unsigned bits, unsigned char *dst,
                     size_t row_bytes)
{
    const unsigned max = (1u << bits) - 1;
    const size_t n = (size_t)im->width * (size_t)im->channels;
    const unsigned char *row = gimg_row(im, y);
    memset(dst, 0, row_bytes);
    uint64_t bit = 0;
    for (size_t i = 0; i < n; i++, bit += bits) {
        unsigned v = im->sample == GIMG_U16 ? ((const uint16_t *)row)[i] : row[i];
        if (v > max)
            v = max;
        unsigned char *p = dst + (bit >> 3);
        const unsigned end = (unsigned)(bit & 7) + bits;   /* 1..23 */
        const uint32_t w = (uint32_t)v << (24 - end);
        p[0] |= (unsigned char)(w >> 16);
        if (end > 8)
            p[1] |= (unsigned char)(w >> 8);
        if (end > 16)
            p[2] |= (unsigned char)w;
    }
}

/* The metadata tags of m (NULL: none); 1 on success. */
static int write_meta(TIFF *tif, const gimg_meta *m)
{
    if (!m)
        return 1;
    int ok = 1;
    if (m->icc && m->icc_bytes && m->icc_bytes <= UINT32_MAX)
        ok = ok && TIFFSetField(tif, TIFFTAG_ICCPROFILE, (uint32_t)m->icc_bytes, m->icc);
    if (m->xmp && m->xmp_bytes && m->xmp_bytes <= UINT32_MAX)
        ok = ok && TIFFSetField(tif, TIFFTAG_XMLPACKET, (uint32_t)m->xmp_bytes, m->xmp);
    double x = m->x_dpi > 0 ? m->x_dpi : m->y_dpi, y = m->y_dpi > 0 ? m->y_dpi : m->x_dpi;
    if (x > 0 && y > 0 && isfinite(x) && isfinite(y))
        ok = ok && TIFFSetField(tif, TIFFTAG_XRESOLUTION, x) &&
             TIFFSetField(tif, TIFFTAG_YRESOLUTION, y) &&
             TIFFSetField(tif, TIFFTAG_RESOLUTIONUNIT, RESUNIT_INCH);
    if (m->orientation >= 1 && m->orientation <= 8)
        ok = ok && TIFFSetField(tif, TIFFTAG_ORIENTATION, (uint16_t)m->orientation);
    return ok;
}

static gimg_status encode(const gimg_image *im, const gimg_write_opts *o, unsigned char **buf,
                          size_t *len)
{
    *buf = NULL;
    *len = 0;
    const unsigned bits = bits_written(im);
    const int packed = bits != 8u * (unsigned)im->sample;   /* b-bit samples (maxval 2^b - 1) */
    const size_t row = ((size_t)im->width * (size_t)im->channels * bits + 7) / 8;
    const uint64_t raw = (uint64_t)row * (uint64_t)im->height;
    /* Classic TIFF addresses 4 GiB: past about that much (compressed data
     * may even grow a little), BigTIFF, as vips and libtiff's tools do. */
    const char *mode = raw + raw / 8 + ((uint64_t)1 << 20) >= ((uint64_t)1 << 32) ? "w8" : "w";
    uint16_t compression = o->tiff_compression == GIMG_TIFF_NONE ? COMPRESSION_NONE
                         : o->tiff_compression == GIMG_TIFF_LZW  ? COMPRESSION_LZW
                                                                 : COMPRESSION_ADOBE_DEFLATE;
    tiff_stream s = {0};
    s.writable = 1;
    tiff_log log = {0};
    TIFF *tif = open_stream(&s, &log, mode, UINT64_MAX);
    if (!tif) {
        free(s.data);
        return s.failed ? gimg_fail(GIMG_E_NOMEM, "out of memory encoding TIFF")
                        : gimg_fail(GIMG_E_FORMAT, "TIFF encoder: %s",
                                    log.errors ? log.first : "cannot start");
    }
    uint32_t rows_per_strip = (uint32_t)(STRIP_TARGET_BYTES / row);
    if (rows_per_strip < 1)
        rows_per_strip = 1;
    if (rows_per_strip > (uint32_t)im->height)
        rows_per_strip = (uint32_t)im->height;
    const int has_alpha = im->channels % 2 == 0;
    const uint16_t alpha_kind = EXTRASAMPLE_UNASSALPHA;
    int ok = TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, (uint32_t)im->width) &&
             TIFFSetField(tif, TIFFTAG_IMAGELENGTH, (uint32_t)im->height) &&
             TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, (uint16_t)im->channels) &&
             TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, (uint16_t)bits) &&
             TIFFSetField(tif, TIFFTAG_SAMPLEFORMAT,
                          im->sample == GIMG_F32 ? SAMPLEFORMAT_IEEEFP : SAMPLEFORMAT_UINT) &&
             TIFFSetField(tif, TIFFTAG_PHOTOMETRIC,
                          im->channels >= 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK) &&
             TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG) &&
             TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, rows_per_strip) &&
             TIFFSetField(tif, TIFFTAG_COMPRESSION, compression) &&
             (!has_alpha || TIFFSetField(tif, TIFFTAG_EXTRASAMPLES, 1, &alpha_kind)) &&
             write_meta(tif, im->meta);
    if (ok && compression != COMPRESSION_NONE && !packed)
        ok = TIFFSetField(tif, TIFFTAG_PREDICTOR, im->sample == GIMG_F32 ? PREDICTOR_FLOATINGPOINT
                                                                         : PREDICTOR_HORIZONTAL);
    if (ok && compression == COMPRESSION_ADOBE_DEFLATE)
        ok = TIFFSetField(tif, TIFFTAG_ZIPQUALITY, DEFLATE_LEVEL);
    /* libtiff's predictors work in place: each strip is copied (or packed)
     * first. */
    unsigned char *strip = ok ? malloc(row * rows_per_strip) : NULL;
    if (ok && !strip)
        s.failed = 1;
    for (int y = 0; strip && y < im->height; y += (int)rows_per_strip) {
        int n = im->height - y < (int)rows_per_strip ? im->height - y : (int)rows_per_strip;
        for (int r = 0; r < n; r++) {
            if (packed)
                pack_row(im, y + r, bits, strip + (size_t)r * row, row);
            else
                memcpy(strip + (size_t)r * row, gimg_row(im, y + r), row);
        }
        if (TIFFWriteEncodedStrip(tif, (uint32_t)(y / (int)rows_per_strip), strip,
                                  (tmsize_t)(row * (size_t)n)) < 0) {
            ok = 0;
            break;
        }
    }
    free(strip);
    ok = ok && !s.failed && TIFFWriteDirectory(tif);
    TIFFClose(tif);
    if (!ok || s.failed || log.errors) {
        free(s.data);
        if (s.failed)
            return gimg_fail(GIMG_E_NOMEM, "out of memory encoding TIFF");
        return gimg_fail(GIMG_E_FORMAT, "TIFF encoder: %s", log.errors ? log.first : "failed");
    }
    *buf = s.data;
    *len = s.len;
    return GIMG_OK;
}

const gimg_codec gimg_codec_tiff = {
    .format = GIMG_FMT_TIFF,
    .name = "TIFF",
    .extensions = "tif tiff",
    .multi_page = 1,
    .sniff = sniff,
    .probe = probe,
    .decode = decode,
    .layout = layout,
    .encode = encode,
    .meta = GIMG_META_ICC | GIMG_META_XMP | GIMG_META_RESOLUTION | GIMG_META_ORIENTATION,
    .maxval_rule = GIMG_MAXVAL_BITS,
    .rows_open = rows_open_tiff,
    .rows_read = rows_read_tiff,
    .rows_close = rows_close_tiff,
};
