/*
 * unit_codec_tiff.c — the TIFF codec (lib/codec_tiff.c), through the public
 * API and its codec row.
 *
 *  - Every layout gimg writes (1-4 channels x 8/16-bit/float) round-trips
 *    bit for bit under each compression, and the tags written are the ones
 *    promised (Deflate + predictor by default, unassociated alpha).
 *  - Files written here with libtiff itself, in the layouts other programs
 *    write (tiles, separate planes, big-endian, MINISWHITE, bilevel, palette,
 *    associated and unspecified extra samples, PackBits, JPEG, CCITT G4),
 *    decode to the samples the TIFF specification gives, computed here from
 *    the data written.
 *  - Pages: a 3-page file, each page probed and decoded; a page past the last
 *    is refused by name.
 *  - Hostile files made byte by byte here (huge and zero sizes, strips past
 *    the end, overflowing tiles, IFD loops, truncation) are refused with a
 *    message, quickly, with nothing printed on stderr.
 *  - Decoding on several threads at once gives each thread its own result
 *    and message.
 *  - Metadata: ICC profile, XMP, resolution and orientation written by
 *    gimg_encode read back byte for byte (and by libtiff), page by page in
 *    multi-page files (libtiff's, and two of ours joined here); resolution
 *    units inch, centimetre, none and absent; broken tags dropped with a
 *    warning, the image still decoded.
 *  - b-bit samples (1 to 15 bits): files libtiff writes in every layout
 *    decode to their samples with maxval 2^b - 1 (1-bit: 0/255); images of
 *    maxval 2^b - 1 are written with BitsPerSample b and read back exactly;
 *    ImageMagick's 12-bit files read as ImageMagick reads them; truncated
 *    12-bit strips are refused as 8-bit ones are.
 */
#include "check.h"
#include "testfile.h"
#include "codec.h"
#include "testimg.h"

#include <libdeflate.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <tiffio.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------ helpers */

static char tmp_path[64];

/* libtiff warns on stderr about what this test writes (e.g. the JPEG
 * codec's notes); the test's own writing is kept quiet. */
static void quiet_libtiff(const char *module, const char *fmt, va_list ap) {}
static TIFFErrorHandler default_warning;

/* A TIFF page written here with libtiff: the fields to set, and the
 * samples (interleaved, in host order; for separate planes the writer
 * splits them). */
typedef struct {
    uint32_t width, height;
    uint16_t bits, spp, photometric, format, planar, compression;
    uint16_t predictor;          /* 0: none */
    uint32_t rows_per_strip;     /* 0: one strip */
    uint32_t tile;               /* >0: square tiles of this size */
    int n_extra;
    uint16_t extra[4];
    const uint16_t *colormap;    /* 3 * 2^bits entries: r..., g..., b... */
    int jpeg_ycbcr;              /* JPEG with YCbCr (libtiff converts on writing) */
    const void *samples;         /* rows of packed samples (bits < 8: packed bits) */
    /* Metadata tags, each written when set (non-NULL, non-zero). */
    const unsigned char *icc;
    uint32_t icc_bytes;
    const char *xmp;             /* NUL-terminated */
    float x_res, y_res;
    uint16_t res_unit;           /* 0: no ResolutionUnit tag (the default, inch) */
    uint16_t orientation;
} page_spec;

static size_t spec_row_bytes(const page_spec *p, int samples)
{
    return ((size_t)p->width * samples * p->bits + 7) / 8;
}

/* Writes one page into an open TIFF; 1 on success. */
static int write_page(TIFF *tif, const page_spec *p)
{
    TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, p->width);
    TIFFSetField(tif, TIFFTAG_IMAGELENGTH, p->height);
    TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, p->bits);
    TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, p->spp);
    TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, p->photometric);
    TIFFSetField(tif, TIFFTAG_SAMPLEFORMAT, p->format ? p->format : SAMPLEFORMAT_UINT);
    TIFFSetField(tif, TIFFTAG_PLANARCONFIG, p->planar ? p->planar : PLANARCONFIG_CONTIG);
    TIFFSetField(tif, TIFFTAG_COMPRESSION, p->compression ? p->compression : COMPRESSION_NONE);
    if (p->predictor)
        TIFFSetField(tif, TIFFTAG_PREDICTOR, p->predictor);
    if (p->n_extra)
        TIFFSetField(tif, TIFFTAG_EXTRASAMPLES, (uint16_t)p->n_extra, p->extra);
    if (p->colormap) {
        size_t n = (size_t)1 << p->bits;
        TIFFSetField(tif, TIFFTAG_COLORMAP, p->colormap, p->colormap + n, p->colormap + 2 * n);
    }
    if (p->icc)
        TIFFSetField(tif, TIFFTAG_ICCPROFILE, p->icc_bytes, p->icc);
    if (p->xmp)
        TIFFSetField(tif, TIFFTAG_XMLPACKET, (uint32_t)strlen(p->xmp), p->xmp);
    if (p->x_res > 0)
        TIFFSetField(tif, TIFFTAG_XRESOLUTION, (double)p->x_res);
    if (p->y_res > 0)
        TIFFSetField(tif, TIFFTAG_YRESOLUTION, (double)p->y_res);
    if (p->res_unit)
        TIFFSetField(tif, TIFFTAG_RESOLUTIONUNIT, p->res_unit);
    if (p->orientation)
        TIFFSetField(tif, TIFFTAG_ORIENTATION, p->orientation);
    if (p->jpeg_ycbcr) {
        TIFFSetField(tif, TIFFTAG_JPEGQUALITY, 95);
        TIFFSetField(tif, TIFFTAG_YCBCRSUBSAMPLING, 2, 2);
        TIFFSetField(tif, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB);
    }
    int separate = p->planar == PLANARCONFIG_SEPARATE;
    int planes = separate ? p->spp : 1, per = separate ? 1 : p->spp;
    size_t in_row = spec_row_bytes(p, p->spp), out_row = spec_row_bytes(p, per);
    size_t bps = p->bits / 8;
    const unsigned char *src = p->samples;
    if (p->tile) {
        TIFFSetField(tif, TIFFTAG_TILEWIDTH, p->tile);
        TIFFSetField(tif, TIFFTAG_TILELENGTH, p->tile);
        size_t trow = ((size_t)p->tile * per * p->bits + 7) / 8;
        unsigned char *t = calloc(trow * p->tile, 1);
        for (int pl = 0; pl < planes; pl++)
            for (uint32_t ty = 0; ty < p->height; ty += p->tile)
                for (uint32_t tx = 0; tx < p->width; tx += p->tile) {
                    memset(t, 0, trow * p->tile);
                    for (uint32_t y = ty; y < ty + p->tile && y < p->height; y++)
                        for (uint32_t x = tx; x < tx + p->tile && x < p->width; x++) {
                            const unsigned char *s = src + y * in_row + (size_t)x * p->spp * bps;
                            unsigned char *d = t + (y - ty) * trow + (size_t)(x - tx) * per * bps;
                            if (separate)
                                memcpy(d, s + pl * bps, bps);
                            else
                                memcpy(d, s, bps * per);
                        }
                    if (TIFFWriteTile(tif, t, tx, ty, 0, (uint16_t)pl) < 0) {
                        free(t);
                        return 0;
                    }
                }
        free(t);
    } else {
        uint32_t rps = p->rows_per_strip ? p->rows_per_strip : p->height;
        TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, rps);
        unsigned char *line = malloc(out_row ? out_row : 1);
        for (int pl = 0; pl < planes; pl++)
            for (uint32_t y = 0; y < p->height; y++) {
                if (separate)
                    for (uint32_t x = 0; x < p->width; x++)
                        memcpy(line + x * bps, src + y * in_row + ((size_t)x * p->spp + pl) * bps,
                               bps);
                else
                    memcpy(line, src + y * in_row, out_row);
                if (TIFFWriteScanline(tif, line, y, (uint16_t)pl) < 0) {
                    free(line);
                    return 0;
                }
            }
        free(line);
    }
    return TIFFWriteDirectory(tif);
}

/* Writes the pages to a temporary file ("b": big-endian) and returns its
 * bytes (malloc'd), or NULL. */
static unsigned char *make_tiff(const page_spec *pages, int n, int big_endian, size_t *len)
{
    strcpy(tmp_path, "/tmp/unit_codec_tiff.XXXXXX");
    int fd = mkstemp(tmp_path);
    if (fd < 0)
        return NULL;
    close(fd);
    TIFF *tif = TIFFOpen(tmp_path, big_endian ? "wb" : "wl");
    int ok = tif != NULL;
    for (int i = 0; ok && i < n; i++)
        ok = write_page(tif, &pages[i]);
    if (tif)
        TIFFClose(tif);
    unsigned char *buf = ok ? slurp(tmp_path, len) : NULL;
    unlink(tmp_path);
    return buf;
}

/* Decodes buf as TIFF, checking that the probe agrees; 0 on failure (with
 * a CHECK already recorded). */
static int decode_checked(const unsigned char *buf, size_t len, int page, gimg_image *im)
{
    gimg_read_opts o = {.page = page};
    gimg_info info;
    gimg_status st = gimg_probe_page(buf, len, &o, &info);
    CHECK(st == GIMG_OK, "probe: %s", gimg_last_error());
    st = gimg_decode_page(buf, len, &o, im);
    CHECK(st == GIMG_OK, "decode: %s", gimg_last_error());
    if (st)
        return 0;
    CHECK(info.format == GIMG_FMT_TIFF && info.width == im->width && info.height == im->height &&
              info.channels == im->channels && info.sample == im->sample,
          "probe said %dx%d c%d s%d, decode gave %dx%d c%d s%d", info.width, info.height,
          info.channels, (int)info.sample, im->width, im->height, im->channels, (int)im->sample);
    return 1;
}

/* ------------------------------------------------------- round trips */

static void round_trip(int w, int h, int channels, gimg_sample sample, gimg_tiff_compression c,
                       uint64_t seed)
{
    gimg_image im, back;
    if (gimg_image_alloc(&im, w, h, channels, sample)) {
        CHECK(0, "alloc: %s", gimg_last_error());
        return;
    }
    testimg_fill_random(&im, seed);
    gimg_write_opts o;
    gimg_write_opts_init(&o);
    o.tiff_compression = c;
    unsigned char *buf;
    size_t len;
    gimg_status st = gimg_encode(&im, GIMG_FMT_TIFF, &o, &buf, &len);
    CHECK(st == GIMG_OK, "encode c%d s%d: %s", channels, (int)sample, gimg_last_error());
    if (!st) {
        CHECK(gimg_format_sniff(buf, len) == GIMG_FMT_TIFF, "not sniffed as TIFF");
        if (decode_checked(buf, len, 0, &back)) {
            CHECK(same_pixels(&im, &back), "%dx%d c%d s%d compression %d: samples differ", w, h,
                  channels, (int)sample, (int)c);
            gimg_image_free(&back);
        }
        free(buf);
    }
    unsigned lost = gimg_take_losses(NULL);
    CHECK(lost == 0, "TIFF lost something: %u", lost);
    gimg_image_free(&im);
}

static void test_round_trip_every_layout(void)
{
    const gimg_sample samples[] = {GIMG_U8, GIMG_U16, GIMG_F32};
    const gimg_tiff_compression comps[] = {GIMG_TIFF_DEFLATE, GIMG_TIFF_LZW, GIMG_TIFF_NONE};
    for (int c = 1; c <= 4; c++)
        for (int s = 0; s < 3; s++)
            for (int k = 0; k < 3; k++)
                round_trip(37, 29, c, samples[s], comps[k], 1000 + c * 10 + s);
    /* Several strips (~256 KiB each), and the two-thread decode. */
    round_trip(1100, 1300, 4, GIMG_U16, GIMG_TIFF_DEFLATE, 7);
    round_trip(900, 1000, 3, GIMG_F32, GIMG_TIFF_LZW, 8);
    round_trip(1, 1, 1, GIMG_U8, GIMG_TIFF_DEFLATE, 9);
    round_trip(5000, 1, 2, GIMG_U8, GIMG_TIFF_NONE, 10);
}

/* A strided image (a view with padding between rows) is written as its
 * pixels, not its padding. */
static void test_round_trip_strided(void)
{
    gimg_image wide, view, back;
    if (gimg_image_alloc(&wide, 50, 20, 3, GIMG_U8))
        return;
    testimg_fill_random(&wide, 3);
    view = wide;
    view.width = 31;
    unsigned char *buf;
    size_t len;
    CHECK(gimg_encode(&view, GIMG_FMT_TIFF, NULL, &buf, &len) == GIMG_OK, "%s", gimg_last_error());
    if (decode_checked(buf, len, 0, &back)) {
        CHECK(same_pixels(&view, &back), "strided image differs");
        gimg_image_free(&back);
    }
    free(buf);
    gimg_image_free(&wide);
}

/* Opens a memory buffer with libtiff by way of a temporary file. */
static TIFF *open_buffer(const unsigned char *buf, size_t len)
{
    strcpy(tmp_path, "/tmp/unit_codec_tiff.XXXXXX");
    int fd = mkstemp(tmp_path);
    if (fd < 0)
        return NULL;
    int ok = write(fd, buf, len) == (ssize_t)len;
    close(fd);
    TIFF *tif = ok ? TIFFOpen(tmp_path, "r") : NULL;
    unlink(tmp_path);
    return tif;
}

static void test_tags_written(void)
{
    struct {
        int channels;
        gimg_sample sample;
        gimg_tiff_compression c;
        uint16_t compression, predictor, photometric, format;
    } cases[] = {
        {1, GIMG_U8, GIMG_TIFF_DEFLATE, COMPRESSION_ADOBE_DEFLATE, PREDICTOR_HORIZONTAL,
         PHOTOMETRIC_MINISBLACK, SAMPLEFORMAT_UINT},
        {2, GIMG_U16, GIMG_TIFF_LZW, COMPRESSION_LZW, PREDICTOR_HORIZONTAL, PHOTOMETRIC_MINISBLACK,
         SAMPLEFORMAT_UINT},
        {3, GIMG_F32, GIMG_TIFF_DEFLATE, COMPRESSION_ADOBE_DEFLATE, PREDICTOR_FLOATINGPOINT,
         PHOTOMETRIC_RGB, SAMPLEFORMAT_IEEEFP},
        {4, GIMG_U8, GIMG_TIFF_NONE, COMPRESSION_NONE, PREDICTOR_NONE, PHOTOMETRIC_RGB,
         SAMPLEFORMAT_UINT},
        {4, GIMG_F32, GIMG_TIFF_LZW, COMPRESSION_LZW, PREDICTOR_FLOATINGPOINT, PHOTOMETRIC_RGB,
         SAMPLEFORMAT_IEEEFP},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gimg_image im;
        if (gimg_image_alloc(&im, 300, 2000, cases[i].channels, cases[i].sample))
            continue;
        testimg_fill_random(&im, i);
        gimg_write_opts o;
        gimg_write_opts_init(&o);
        if (cases[i].c == GIMG_TIFF_DEFLATE)
            CHECK(o.tiff_compression == GIMG_TIFF_DEFLATE, "Deflate is not the default");
        o.tiff_compression = cases[i].c;
        unsigned char *buf;
        size_t len;
        if (gimg_encode(&im, GIMG_FMT_TIFF, &o, &buf, &len)) {
            CHECK(0, "encode: %s", gimg_last_error());
            gimg_image_free(&im);
            continue;
        }
        TIFF *tif = open_buffer(buf, len);
        CHECK(tif != NULL, "libtiff cannot open our file");
        if (tif) {
            uint16_t comp = 0, pred = PREDICTOR_NONE, photo = 0, fmt = 0, planar = 0, spp = 0,
                     bits = 0, n_extra = 0, *extra = NULL;
            uint32_t rps = 0;
            TIFFGetField(tif, TIFFTAG_COMPRESSION, &comp);
            TIFFGetField(tif, TIFFTAG_PREDICTOR, &pred);
            TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &photo);
            TIFFGetField(tif, TIFFTAG_SAMPLEFORMAT, &fmt);
            TIFFGetField(tif, TIFFTAG_PLANARCONFIG, &planar);
            TIFFGetField(tif, TIFFTAG_SAMPLESPERPIXEL, &spp);
            TIFFGetField(tif, TIFFTAG_BITSPERSAMPLE, &bits);
            TIFFGetField(tif, TIFFTAG_ROWSPERSTRIP, &rps);
            TIFFGetField(tif, TIFFTAG_EXTRASAMPLES, &n_extra, &extra);
            CHECK(comp == cases[i].compression, "case %zu: compression %u", i, comp);
            CHECK(pred == cases[i].predictor, "case %zu: predictor %u", i, pred);
            CHECK(photo == cases[i].photometric, "case %zu: photometric %u", i, photo);
            CHECK(fmt == cases[i].format, "case %zu: sample format %u", i, fmt);
            CHECK(planar == PLANARCONFIG_CONTIG, "case %zu: not contiguous", i);
            CHECK(spp == cases[i].channels && bits == 8 * cases[i].sample,
                  "case %zu: %u samples of %u bits", i, spp, bits);
            CHECK(!TIFFIsTiled(tif), "case %zu: tiled", i);
            size_t strip = (size_t)rps * 300 * gimg_pixel_bytes(&im);
            CHECK(TIFFNumberOfStrips(tif) > 1 && strip >= (16 << 10) && strip <= (1 << 20),
                  "case %zu: %u strips of %zu bytes", i, TIFFNumberOfStrips(tif), strip);
            if (cases[i].channels % 2 == 0)
                CHECK(n_extra == 1 && extra[0] == EXTRASAMPLE_UNASSALPHA,
                      "case %zu: alpha not marked unassociated", i);
            else
                CHECK(n_extra == 0, "case %zu: %u extra samples", i, n_extra);
            TIFFClose(tif);
        }
        free(buf);
        gimg_image_free(&im);
    }
}

/* Deflate with a predictor compresses a smooth image well: a sanity check
 * that the predictor is applied to the data, not only tagged. */
static void test_predictor_helps(void)
{
    gimg_image im;
    if (gimg_image_alloc(&im, 512, 512, 3, GIMG_U16))
        return;
    for (int y = 0; y < 512; y++) {
        uint16_t *r = (uint16_t *)gimg_row(&im, y);
        for (int x = 0; x < 512 * 3; x++)
            r[x] = (uint16_t)(x * 37 + y * 91);
    }
    unsigned char *buf;
    size_t len;
    CHECK(gimg_encode(&im, GIMG_FMT_TIFF, NULL, &buf, &len) == GIMG_OK, "%s", gimg_last_error());
    CHECK(len < 512 * 512 * 6 / 50, "a gradient took %zu bytes", len);
    free(buf);
    gimg_image_free(&im);
}

/* ------------------------------------------- files written by libtiff */

/* A test page of w x h with spp samples of `bits` bits (8, 16 or 32-float),
 * seeded; the caller frees samples. */
static void *seeded_samples(uint32_t w, uint32_t h, int spp, int bits, int is_float, uint64_t seed)
{
    size_t n = (size_t)w * h * spp;
    uint64_t state = seed;
    if (bits == 8) {
        uint8_t *p = malloc(n);
        for (size_t i = 0; i < n; i++)
            p[i] = (uint8_t)testimg_next(&state);
        return p;
    }
    if (bits == 16) {
        uint16_t *p = malloc(2 * n);
        for (size_t i = 0; i < n; i++)
            p[i] = (uint16_t)testimg_next(&state);
        return p;
    }
    float *p = malloc(4 * n);
    for (size_t i = 0; i < n; i++)
        p[i] = is_float ? (float)(testimg_next(&state) >> 40) / (1 << 20) - 3.0f
                        : (float)(uint32_t)testimg_next(&state);
    return p;
}

/* Expected sample of the image at (x, y, channel c) for an integer or
 * float source: the source sample `pick` of the pixel. */
static int samples_match(const gimg_image *im, const page_spec *p, const int *pick, int invert)
{
    int bps = p->bits / 8;
    for (uint32_t y = 0; y < p->height; y++)
        for (uint32_t x = 0; x < p->width; x++)
            for (int c = 0; c < im->channels; c++) {
                size_t si = ((size_t)y * p->width + x) * p->spp + pick[c];
                const unsigned char *o = gimg_row(im, (int)y) + ((size_t)x * im->channels + c) * bps;
                if (bps == 1) {
                    uint8_t v = ((const uint8_t *)p->samples)[si];
                    if (invert && c == 0)
                        v = (uint8_t)(255 - v);
                    if (*o != v)
                        return 0;
                } else if (bps == 2) {
                    uint16_t v = ((const uint16_t *)p->samples)[si];
                    if (invert && c == 0)
                        v = (uint16_t)(65535 - v);
                    if (*(const uint16_t *)o != v)
                        return 0;
                } else if (memcmp(o, (const float *)p->samples + si, 4) != 0) {
                    return 0;
                }
            }
    return 1;
}

typedef struct {
    const char *name;
    uint16_t bits, spp, photometric, format, planar, compression, predictor;
    uint32_t rows_per_strip, tile;
    int n_extra;
    uint16_t extra[3];
    int big_endian;
    int channels;           /* expected */
    int pick[4];            /* source sample of each image channel */
    int invert;
} layout_case;

static void test_layouts_from_libtiff(void)
{
    const uint16_t U = EXTRASAMPLE_UNSPECIFIED, UA = EXTRASAMPLE_UNASSALPHA;
    const layout_case cases[] = {
        {"gray8", 8, 1, PHOTOMETRIC_MINISBLACK, 0, 0, 0, 0, 7, 0, 0, {0}, 0, 1, {0}, 0},
        {"gray16-MM-lzw-pred", 16, 1, PHOTOMETRIC_MINISBLACK, 0, 0, COMPRESSION_LZW, 2, 5, 0, 0,
         {0}, 1, 1, {0}, 0},
        {"gray8-miniswhite", 8, 1, PHOTOMETRIC_MINISWHITE, 0, 0, 0, 0, 0, 0, 0, {0}, 0, 1, {0}, 1},
        {"gray16-miniswhite-MM", 16, 1, PHOTOMETRIC_MINISWHITE, 0, 0, 0, 0, 0, 0, 0, {0}, 1, 1,
         {0}, 1},
        {"graya8-unassoc", 8, 2, PHOTOMETRIC_MINISBLACK, 0, 0, COMPRESSION_ADOBE_DEFLATE, 2, 3, 0,
         1, {UA}, 0, 2, {0, 1}, 0},
        {"graya8-miniswhite", 8, 2, PHOTOMETRIC_MINISWHITE, 0, 0, 0, 0, 0, 0, 1, {UA}, 0, 2,
         {0, 1}, 1},
        {"rgb8-packbits", 8, 3, PHOTOMETRIC_RGB, 0, 0, COMPRESSION_PACKBITS, 0, 4, 0, 0, {0}, 0,
         3, {0, 1, 2}, 0},
        {"rgb8-old-deflate", 8, 3, PHOTOMETRIC_RGB, 0, 0, COMPRESSION_DEFLATE, 2, 0, 0, 0, {0},
         0, 3, {0, 1, 2}, 0},
        {"rgb16-tiled", 16, 3, PHOTOMETRIC_RGB, 0, 0, COMPRESSION_ADOBE_DEFLATE, 2, 0, 16, 0,
         {0}, 0, 3, {0, 1, 2}, 0},
        {"rgb16-tiled-separate-MM", 16, 3, PHOTOMETRIC_RGB, 0, PLANARCONFIG_SEPARATE,
         COMPRESSION_LZW, 0, 0, 16, 0, {0}, 1, 3, {0, 1, 2}, 0},
        {"rgb8-separate-strips", 8, 3, PHOTOMETRIC_RGB, 0, PLANARCONFIG_SEPARATE, 0, 0, 6, 0, 0,
         {0}, 0, 3, {0, 1, 2}, 0},
        {"rgba8-separate", 8, 4, PHOTOMETRIC_RGB, 0, PLANARCONFIG_SEPARATE,
         COMPRESSION_ADOBE_DEFLATE, 0, 0, 0, 1, {UA}, 0, 4, {0, 1, 2, 3}, 0},
        {"rgba16-unspecified", 16, 4, PHOTOMETRIC_RGB, 0, 0, 0, 0, 0, 0, 1, {U}, 0, 4,
         {0, 1, 2, 3}, 0},
        {"rgb+2-unspecified", 8, 5, PHOTOMETRIC_RGB, 0, 0, 0, 0, 0, 0, 2, {U, U}, 0, 4,
         {0, 1, 2, 3}, 0},
        {"rgb+unspecified+alpha", 8, 5, PHOTOMETRIC_RGB, 0, 0, 0, 0, 0, 0, 2, {U, UA}, 0, 4,
         {0, 1, 2, 4}, 0},
        {"rgb+alpha-tiled-separate+extra", 16, 5, PHOTOMETRIC_RGB, 0, PLANARCONFIG_SEPARATE, 0, 0,
         0, 16, 2, {U, UA}, 1, 4, {0, 1, 2, 4}, 0},
        {"gray-float", 32, 1, PHOTOMETRIC_MINISBLACK, SAMPLEFORMAT_IEEEFP, 0, 0, 0, 0, 0, 0, {0},
         0, 1, {0}, 0},
        {"gray-float-miniswhite-kept", 32, 1, PHOTOMETRIC_MINISWHITE, SAMPLEFORMAT_IEEEFP, 0, 0,
         0, 0, 0, 0, {0}, 0, 1, {0}, 0},
        /* (Big-endian with the floating-point predictor is left out: libtiff
         * 4.5 writes such files wrongly, and reads them back wrongly too.) */
        {"rgb-float-MM", 32, 3, PHOTOMETRIC_RGB, SAMPLEFORMAT_IEEEFP, 0,
         COMPRESSION_ADOBE_DEFLATE, 0, 9, 0, 0, {0}, 1, 3, {0, 1, 2}, 0},
        {"rgb-float-fp-predictor", 32, 3, PHOTOMETRIC_RGB, SAMPLEFORMAT_IEEEFP, 0,
         COMPRESSION_ADOBE_DEFLATE, 3, 9, 0, 0, {0}, 0, 3, {0, 1, 2}, 0},
        {"rgba-float-tiled-lzw-fp", 32, 4, PHOTOMETRIC_RGB, SAMPLEFORMAT_IEEEFP, 0,
         COMPRESSION_LZW, 3, 0, 32, 1, {UA}, 0, 4, {0, 1, 2, 3}, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const layout_case *k = &cases[i];
        page_spec p = {45, 38, k->bits, k->spp, k->photometric, k->format, k->planar,
                       k->compression, k->predictor, k->rows_per_strip, k->tile, k->n_extra,
                       {k->extra[0], k->extra[1], k->extra[2]}, NULL, 0, NULL,
                       NULL, 0, NULL, 0, 0, 0, 0};
        void *samples = seeded_samples(p.width, p.height, p.spp, p.bits,
                                       k->format == SAMPLEFORMAT_IEEEFP, 50 + i);
        p.samples = samples;
        size_t len;
        unsigned char *buf = make_tiff(&p, 1, k->big_endian, &len);
        CHECK(buf != NULL, "%s: libtiff could not write the file", k->name);
        gimg_image im;
        if (buf && decode_checked(buf, len, 0, &im)) {
            CHECK(im.channels == k->channels, "%s: %d channels", k->name, im.channels);
            CHECK(im.channels == k->channels && samples_match(&im, &p, k->pick, k->invert),
                  "%s: samples differ", k->name);
            gimg_image_free(&im);
        }
        free(buf);
        free(samples);
    }
}

/* Bilevel: 1-bit MINISBLACK and MINISWHITE (uncompressed, PackBits and
 * CCITT G4) read as 8-bit 0/255, white where the bit means white. */
static void test_bilevel(void)
{
    const uint32_t w = 77, h = 21;
    size_t row = (w + 7) / 8;
    unsigned char *bits = malloc(row * h);
    uint64_t state = 5;
    for (size_t i = 0; i < row * h; i++)
        bits[i] = (unsigned char)testimg_next(&state);
    struct {
        uint16_t photometric, compression;
    } cases[] = {
        {PHOTOMETRIC_MINISBLACK, COMPRESSION_NONE},
        {PHOTOMETRIC_MINISWHITE, COMPRESSION_NONE},
        {PHOTOMETRIC_MINISWHITE, COMPRESSION_PACKBITS},
        {PHOTOMETRIC_MINISWHITE, COMPRESSION_CCITTFAX4},
        {PHOTOMETRIC_MINISBLACK, COMPRESSION_LZW},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        page_spec p = {.width = w, .height = h, .bits = 1, .spp = 1,
                       .photometric = cases[i].photometric,
                       .compression = cases[i].compression, .rows_per_strip = 8};
        p.samples = bits;
        size_t len;
        unsigned char *buf = make_tiff(&p, 1, 0, &len);
        CHECK(buf != NULL, "case %zu: not written", i);
        gimg_image im;
        if (buf && decode_checked(buf, len, 0, &im)) {
            int bad = im.channels != 1 || im.sample != GIMG_U8;
            for (uint32_t y = 0; !bad && y < h; y++)
                for (uint32_t x = 0; x < w; x++) {
                    int bit = bits[y * row + x / 8] >> (7 - x % 8) & 1;
                    int white = cases[i].photometric == PHOTOMETRIC_MINISWHITE ? !bit : bit;
                    if (gimg_row(&im, (int)y)[x] != (white ? 255 : 0))
                        bad = 1;
                }
            CHECK(!bad, "case %zu (photometric %u, compression %u): wrong samples", i,
                  cases[i].photometric, cases[i].compression);
            gimg_image_free(&im);
        }
        free(buf);
    }
    free(bits);
}

/* Palette: indices of 1, 2, 4, 8 and 16 bits through 16-bit colormaps, to
 * 8-bit RGB by each entry's high byte (16-bit RGB for 16-bit indices); a
 * colormap of small values is taken as 8-bit; a gray colormap gives gray. */
static void test_palette(void)
{
    const uint32_t w = 33, h = 9;
    const int depths[] = {1, 2, 4, 8, 16};
    for (int d = 0; d < 5; d++)
        for (int kind = 0; kind < 3; kind++) {   /* color, small (8-bit) values, gray */
            int bitsz = depths[d];
            size_t n = (size_t)1 << bitsz;
            uint16_t *map = malloc(3 * n * sizeof *map);
            uint64_t state = 77 + d;
            for (size_t i = 0; i < 3 * n; i++) {
                uint16_t v = (uint16_t)testimg_next(&state);
                map[i] = kind == 1 ? v % 256 : v;
            }
            if (kind == 1)
                map[0] = 255;   /* all below 256 */
            if (kind == 2)
                for (size_t i = 0; i < n; i++)
                    map[n + i] = map[2 * n + i] = map[i];
            size_t row = ((size_t)w * bitsz + 7) / 8;
            unsigned char *idx = malloc(row * h);
            for (size_t i = 0; i < row * h; i++)
                idx[i] = (unsigned char)testimg_next(&state);
            page_spec p = {.width = w, .height = h, .bits = (uint16_t)bitsz, .spp = 1,
                           .photometric = PHOTOMETRIC_PALETTE, .compression = COMPRESSION_LZW,
                           .rows_per_strip = 4};
            p.colormap = map;
            p.samples = idx;
            size_t len;
            unsigned char *buf = make_tiff(&p, 1, 0, &len);
            CHECK(buf != NULL, "%d-bit palette not written", bitsz);
            gimg_image im;
            if (buf && decode_checked(buf, len, 0, &im)) {
                int want_ch = kind == 2 ? 1 : 3;
                gimg_sample want_s = bitsz == 16 ? GIMG_U16 : GIMG_U8;
                int bad = im.channels != want_ch || im.sample != want_s;
                for (uint32_t y = 0; !bad && y < h; y++)
                    for (uint32_t x = 0; !bad && x < w; x++) {
                        unsigned v;
                        if (bitsz == 16)
                            v = ((uint16_t *)(idx + y * row))[x];
                        else {
                            size_t b = (size_t)x * bitsz;
                            v = idx[y * row + b / 8] >> (8 - bitsz - b % 8) & ((1u << bitsz) - 1);
                        }
                        for (int c = 0; c < want_ch; c++) {
                            unsigned m = map[c * n + v];
                            unsigned want = bitsz == 16 ? m : kind == 1 ? m : m >> 8;
                            unsigned got = bitsz == 16
                                               ? ((uint16_t *)gimg_row(&im, (int)y))[x * want_ch + c]
                                               : gimg_row(&im, (int)y)[x * want_ch + c];
                            if (got != want)
                                bad = 1;
                        }
                    }
                CHECK(!bad, "%d-bit palette, kind %d: wrong samples (c%d s%d)", bitsz, kind,
                      im.channels, (int)im.sample);
                gimg_image_free(&im);
            }
            free(buf);
            free(idx);
            free(map);
        }
}

/* Associated alpha is unpremultiplied: round(v * max / alpha), 0 at alpha 0. */
static void test_associated_alpha(void)
{
    for (int bits = 8; bits <= 16; bits += 8) {
        const uint32_t w = 40, h = 5;
        size_t n = (size_t)w * h * 4;
        uint16_t *v16 = malloc(n * 2);
        uint8_t *v8 = malloc(n);
        uint64_t state = 9;
        const unsigned max = bits == 8 ? 255 : 65535;
        for (size_t i = 0; i < n; i += 4) {
            unsigned a = (unsigned)(testimg_next(&state) % (max + 1));
            if (i == 0)
                a = 0;
            for (int c = 0; c < 4; c++) {
                unsigned s = c == 3 ? a : (unsigned)(a ? testimg_next(&state) % (a + 1) : 0);
                v16[i + c] = (uint16_t)s;
                v8[i + c] = (uint8_t)s;
            }
        }
        page_spec p = {.width = w, .height = h, .bits = (uint16_t)bits, .spp = 4,
                       .photometric = PHOTOMETRIC_RGB, .n_extra = 1,
                       .extra = {EXTRASAMPLE_ASSOCALPHA}};
        p.samples = bits == 8 ? (void *)v8 : (void *)v16;
        size_t len;
        unsigned char *buf = make_tiff(&p, 1, 0, &len);
        gimg_image im;
        if (buf && decode_checked(buf, len, 0, &im)) {
            int bad = im.channels != 4;
            for (size_t i = 0; !bad && i < n; i++) {
                size_t px = i / 4;
                unsigned a = v16[px * 4 + 3], s = v16[i];
                unsigned want = i % 4 == 3 ? a : a ? (unsigned)(((uint64_t)s * max + a / 2) / a) : 0;
                unsigned got = bits == 8 ? gimg_row(&im, 0)[i]
                                         : ((uint16_t *)gimg_row(&im, 0))[i];
                if (got != want)
                    bad = 1;
            }
            CHECK(!bad, "%d-bit associated alpha: wrong samples", bits);
            gimg_image_free(&im);
        } else {
            CHECK(0, "%d-bit associated alpha file not written or read", bits);
        }
        free(buf);
        free(v16);
        free(v8);
    }
}

/* JPEG-compressed TIFF (RGB as YCbCr, and gray): decoded to RGB/gray close
 * to the source (lossy; exact agreement with other decoders is the CLI
 * tests' job). */
static void test_jpeg(void)
{
    const uint32_t w = 64, h = 48;
    for (int gray = 0; gray <= 1; gray++)
        for (int tiled = 0; tiled <= 1; tiled++) {
            int spp = gray ? 1 : 3;
            uint8_t *s = malloc((size_t)w * h * spp);
            for (uint32_t y = 0; y < h; y++)
                for (uint32_t x = 0; x < w; x++)
                    for (int c = 0; c < spp; c++)
                        s[(y * w + x) * spp + c] = (uint8_t)(x * 2 + y + c * 40);   /* smooth */
            page_spec p = {.width = w, .height = h, .bits = 8, .spp = (uint16_t)spp,
                           .photometric = gray ? PHOTOMETRIC_MINISBLACK : PHOTOMETRIC_YCBCR,
                           .compression = COMPRESSION_JPEG, .rows_per_strip = 16,
                           .tile = tiled ? 16 : 0};
            p.jpeg_ycbcr = !gray;
            p.samples = s;
            size_t len;
            unsigned char *buf = make_tiff(&p, 1, 0, &len);
            CHECK(buf != NULL, "JPEG TIFF not written");
            gimg_image im;
            if (buf && decode_checked(buf, len, 0, &im)) {
                int worst = 0;
                CHECK(im.channels == spp && im.sample == GIMG_U8, "JPEG: c%d s%d", im.channels,
                      (int)im.sample);
                if (im.channels == spp)
                    for (uint32_t y = 0; y < h; y++)
                        for (uint32_t i = 0; i < w * spp; i++) {
                            int d = abs(gimg_row(&im, (int)y)[i] - s[y * w * spp + i]);
                            worst = d > worst ? d : worst;
                        }
                CHECK(worst <= 12, "JPEG (gray %d, tiled %d): off by %d", gray, tiled, worst);
                gimg_image_free(&im);
            }
            free(buf);
            free(s);
        }
}

/* Big-endian float with the floating-point predictor, built here byte by
 * byte as the specification (Adobe's Technical Note 3) lays it out: each
 * row's samples as big-endian bytes, regrouped most significant byte first,
 * then each byte less the byte one pixel (SamplesPerPixel bytes) before it,
 * then Deflate. (libtiff 4.5 cannot write
 * such a file correctly: it swaps the samples before its predictor.) */
static void test_bigendian_float_predictor(void)
{
    enum { W = 7, H = 3, SPP = 2 };
    float v[H][W * SPP];
    unsigned char rows[H][W * SPP * 4];
    for (int y = 0; y < H; y++) {
        for (int i = 0; i < W * SPP; i++)
            v[y][i] = (float)(y * 31 + i) * 0.375f - 7.0f;
        unsigned char planes[W * SPP * 4];
        for (int i = 0; i < W * SPP; i++) {
            uint32_t bits;
            memcpy(&bits, &v[y][i], 4);
            for (int k = 0; k < 4; k++)   /* byte k of the big-endian sample */
                planes[k * W * SPP + i] = (unsigned char)(bits >> (24 - 8 * k));
        }
        for (int i = 0; i < W * SPP * 4; i++)
            rows[y][i] = (unsigned char)(planes[i] - (i >= SPP ? planes[i - SPP] : 0));
    }
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(6);
    unsigned char z[1024];
    size_t zlen = c ? libdeflate_zlib_compress(c, rows, sizeof rows, z, sizeof z) : 0;
    libdeflate_free_compressor(c);
    if (!zlen)
        SKIP("libdeflate could not compress");
    /* Header, one IFD of 12 entries (SHORTs and LONGs, big-endian), data. */
    static const uint32_t e[][3] = {
        {256, 3, W}, {257, 3, H}, {258, 3, 32}, {259, 3, 8}, {262, 3, 1}, {273, 4, 0},
        {277, 3, SPP}, {278, 3, H}, {279, 4, 0}, {317, 3, 3}, {338, 3, 2}, {339, 3, 3},
    };
    const int n = sizeof e / sizeof e[0];
    unsigned char f[2048] = {'M', 'M', 0, 42, 0, 0, 0, 8};
    size_t data_at = 8 + 2 + 12 * (size_t)n + 4, at = 8;
    f[at++] = 0;
    f[at++] = (unsigned char)n;
    for (int i = 0; i < n; i++, at += 12) {
        uint32_t val = e[i][0] == 273 ? (uint32_t)data_at : e[i][0] == 279 ? (uint32_t)zlen
                                                                            : e[i][2];
        f[at] = (unsigned char)(e[i][0] >> 8);
        f[at + 1] = (unsigned char)e[i][0];
        f[at + 3] = (unsigned char)e[i][1];
        f[at + 7] = 1;   /* count */
        if (e[i][1] == 3) {
            f[at + 8] = (unsigned char)(val >> 8);
            f[at + 9] = (unsigned char)val;
        } else {
            for (int k = 0; k < 4; k++)
                f[at + 8 + k] = (unsigned char)(val >> (24 - 8 * k));
        }
    }
    memcpy(f + data_at, z, zlen);
    gimg_image im;
    if (decode_checked(f, data_at + zlen, 0, &im)) {
        CHECK(im.channels == 2 && im.sample == GIMG_F32, "c%d s%d", im.channels, (int)im.sample);
        int bad = 0;
        for (int y = 0; y < H && im.channels == 2; y++)
            bad |= memcmp(gimg_row(&im, y), v[y], sizeof v[y]) != 0;
        CHECK(!bad, "samples differ");
        gimg_image_free(&im);
    }
}

/* A strip larger than libtiff's default allocation cap (64 MiB): the
 * decoder raises the cap to one strip, no more. */
static void test_large_single_strip(void)
{
    const uint32_t w = 8300, h = 8200;
    uint8_t *s = malloc((size_t)w * h);
    if (!s)
        SKIP("no memory for a 68 MB image");
    for (size_t i = 0; i < (size_t)w * h; i++)
        s[i] = (uint8_t)(i * 7 + i / w);
    page_spec p = {.width = w, .height = h, .bits = 8, .spp = 1,
                   .photometric = PHOTOMETRIC_MINISBLACK, .compression = COMPRESSION_ADOBE_DEFLATE,
                   .predictor = 2};
    p.samples = s;
    size_t len;
    unsigned char *buf = make_tiff(&p, 1, 0, &len);
    CHECK(buf != NULL, "not written");
    gimg_image im;
    if (buf && decode_checked(buf, len, 0, &im)) {
        int pick[1] = {0};
        CHECK(samples_match(&im, &p, pick, 0), "samples differ");
        gimg_image_free(&im);
    }
    free(buf);
    free(s);
}

/* -------------------------------------------------------------- pages */

static void test_pages(void)
{
    void *s0 = seeded_samples(20, 10, 1, 8, 0, 1);
    void *s1 = seeded_samples(31, 7, 3, 16, 0, 2);
    void *s2 = seeded_samples(9, 13, 4, 32, 1, 3);
    page_spec pages[3] = {
        {.width = 20, .height = 10, .bits = 8, .spp = 1, .photometric = PHOTOMETRIC_MINISBLACK,
         .compression = COMPRESSION_LZW},
        {.width = 31, .height = 7, .bits = 16, .spp = 3, .photometric = PHOTOMETRIC_RGB,
         .compression = COMPRESSION_ADOBE_DEFLATE, .predictor = 2, .tile = 16},
        {.width = 9, .height = 13, .bits = 32, .spp = 4, .photometric = PHOTOMETRIC_RGB,
         .format = SAMPLEFORMAT_IEEEFP, .n_extra = 1, .extra = {EXTRASAMPLE_UNASSALPHA}},
    };
    pages[0].samples = s0;
    pages[1].samples = s1;
    pages[2].samples = s2;
    size_t len;
    unsigned char *buf = make_tiff(pages, 3, 0, &len);
    CHECK(buf != NULL, "3-page file not written");
    if (buf) {
        const int ch[3] = {1, 3, 4};
        const int pick[4] = {0, 1, 2, 3};
        for (int k = 0; k < 3; k++) {
            gimg_read_opts o = {.page = k};
            gimg_info info;
            CHECK(gimg_probe_page(buf, len, &o, &info) == GIMG_OK, "page %d: %s", k,
                  gimg_last_error());
            CHECK(info.pages == 3, "page %d: %d pages", k, info.pages);
            CHECK(info.width == (int)pages[k].width && info.height == (int)pages[k].height &&
                      info.channels == ch[k],
                  "page %d: probe %dx%d c%d", k, info.width, info.height, info.channels);
            gimg_image im;
            if (decode_checked(buf, len, k, &im)) {
                CHECK(samples_match(&im, &pages[k], pick, 0), "page %d: samples differ", k);
                gimg_image_free(&im);
            }
        }
        gimg_info info;
        CHECK(gimg_probe_memory(buf, len, &info) == GIMG_OK && info.pages == 3 &&
                  info.width == 20, "first page by default");
        gimg_read_opts past = {.page = 3};
        gimg_image im;
        gimg_status st = gimg_decode_page(buf, len, &past, &im);
        CHECK(st == GIMG_E_FORMAT && strstr(gimg_last_error(), "TIFF has 3 pages: no page 3"),
              "page 3: status %d, '%s'", (int)st, gimg_last_error());
        CHECK(im.data == NULL, "a failed decode left pixels");
        st = gimg_probe_page(buf, len, &past, &info);
        CHECK(st == GIMG_E_FORMAT && strstr(gimg_last_error(), "no page 3"), "probe page 3: '%s'",
              gimg_last_error());
        free(buf);
    }
    free(s0);
    free(s1);
    free(s2);
}

/* ------------------------------------------------------ refusals */

static void expect_refused(const unsigned char *buf, size_t len, gimg_status want,
                           const char *words, const char *what)
{
    gimg_image im;
    memset(&im, 0xAB, sizeof im);
    double t0 = cpu_seconds();
    gimg_fail(GIMG_OK, "%s", "");
    gimg_status st = gimg_decode_memory(buf, len, &im);
    double dt = cpu_seconds() - t0;
    CHECK(st != GIMG_OK, "%s: decoded", what);
    if (want)
        CHECK(st == want, "%s: status %d, want %d (%s)", what, (int)st, (int)want,
              gimg_last_error());
    CHECK(gimg_last_error()[0] != '\0', "%s: no message", what);
    if (words)
        CHECK(strstr(gimg_last_error(), words) != NULL, "%s: message '%s' lacks '%s'", what,
              gimg_last_error(), words);
    CHECK(im.data == NULL && im.width == 0, "%s: the image was not zeroed", what);
    CHECK(dt < 0.5, "%s: took %.2f s of CPU", what, dt);
    /* The codec's own entry points too, past read.c's checks. */
    gimg_read_opts o = {.page = 0};
    st = gimg_codec_tiff.decode(buf, len, &o, &im);
    CHECK(st != GIMG_OK && im.data == NULL, "%s: the row's decode accepted it", what);
    if (st == GIMG_OK)
        gimg_image_free(&im);
}

static void test_unsupported_layouts(void)
{
    struct {
        uint16_t bits, spp, photometric, format, compression;
        const char *words;
    } cases[] = {
        {8, 4, PHOTOMETRIC_SEPARATED, 0, 0, "CMYK"},
        {8, 3, PHOTOMETRIC_CIELAB, 0, 0, "L*a*b*"},
        {16, 1, PHOTOMETRIC_MINISBLACK, SAMPLEFORMAT_INT, 0, "signed"},
        {24, 1, PHOTOMETRIC_MINISBLACK, SAMPLEFORMAT_UINT, 0, "24-bit"},
        {17, 3, PHOTOMETRIC_RGB, SAMPLEFORMAT_UINT, 0, "17-bit"},
        {32, 1, PHOTOMETRIC_MINISBLACK, SAMPLEFORMAT_UINT, 0, "32-bit"},
        {64, 1, PHOTOMETRIC_MINISBLACK, SAMPLEFORMAT_IEEEFP, 0, "64-bit float"},
        {16, 1, PHOTOMETRIC_MINISBLACK, SAMPLEFORMAT_IEEEFP, 0, "16-bit float"},
        {8, 3, PHOTOMETRIC_YCBCR, 0, 0, "YCbCr"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n_bytes = (size_t)8 * 8 * cases[i].spp * cases[i].bits / 8;
        unsigned char *s = calloc(n_bytes, 1);
        page_spec p = {.width = 8, .height = 8, .bits = cases[i].bits, .spp = cases[i].spp,
                       .photometric = cases[i].photometric, .format = cases[i].format,
                       .compression = cases[i].compression};
        p.samples = s;
        size_t len;
        unsigned char *buf = make_tiff(&p, 1, 0, &len);
        CHECK(buf != NULL, "case %s not written", cases[i].words);
        if (buf) {
            gimg_info info;
            CHECK(gimg_probe_memory(buf, len, &info) == GIMG_E_FORMAT &&
                      strstr(gimg_last_error(), cases[i].words),
                  "probe of %s: '%s'", cases[i].words, gimg_last_error());
            expect_refused(buf, len, GIMG_E_FORMAT, cases[i].words, cases[i].words);
        }
        free(buf);
        free(s);
    }
}

/* ------------------------------------------------------ hostile files */

/* A little-endian classic TIFF built byte by byte: header, then IFDs. */
typedef struct {
    unsigned char b[4096];
    size_t n;
} bytes_t;

static void put16(bytes_t *t, size_t at, unsigned v)
{
    t->b[at] = (unsigned char)v;
    t->b[at + 1] = (unsigned char)(v >> 8);
}
static void put32(bytes_t *t, size_t at, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        t->b[at + i] = (unsigned char)(v >> (8 * i));
}

/* Writes an IFD at `at` with the entries (tag, type, count, value) and
 * the next-IFD offset; returns the offset after it. Types: 3 SHORT, 4 LONG. */
static size_t put_ifd(bytes_t *t, size_t at, const uint32_t (*e)[4], int n, uint32_t next)
{
    put16(t, at, (unsigned)n);
    for (int i = 0; i < n; i++) {
        size_t p = at + 2 + 12 * (size_t)i;
        put16(t, p, e[i][0]);
        put16(t, p + 2, e[i][1]);
        put32(t, p + 4, e[i][2]);
        if (e[i][1] == 3 && e[i][2] == 1)
            put16(t, p + 8, e[i][3]);
        else
            put32(t, p + 8, e[i][3]);
    }
    put32(t, at + 2 + 12 * (size_t)n, next);
    size_t end = at + 6 + 12 * (size_t)n;
    if (end > t->n)
        t->n = end;
    return end;
}

static void start_tiff(bytes_t *t, uint32_t first_ifd)
{
    memset(t, 0, sizeof *t);
    memcpy(t->b, "II*\0", 4);
    put32(t, 4, first_ifd);
    t->n = 8;
}

/* An 8-bit gray image's directory, w x h, one strip of `count` bytes at
 * `offset`. */
#define GRAY_IFD(w, h, offset, count)                                            \
    {256, 4, 1, (w)}, {257, 4, 1, (h)}, {258, 3, 1, 8}, {259, 3, 1, 1},            \
    {262, 3, 1, 1}, {273, 4, 1, (offset)}, {277, 3, 1, 1}, {278, 4, 1, (h)},       \
    {279, 4, 1, (count)}

static void test_hostile(void)
{
    bytes_t t;

    /* Sanity: the builder makes a valid file. */
    start_tiff(&t, 8);
    {
        const uint32_t e[][4] = {GRAY_IFD(4, 2, 200, 8)};
        put_ifd(&t, 8, e, 9, 0);
        for (int i = 0; i < 8; i++)
            t.b[200 + i] = (unsigned char)(i * 30);
        t.n = 208;
        gimg_image im;
        CHECK(gimg_decode_memory(t.b, t.n, &im) == GIMG_OK, "valid crafted file: %s",
              gimg_last_error());
        if (im.data) {
            CHECK(im.width == 4 && im.height == 2 && gimg_row(&im, 1)[3] == 210,
                  "valid crafted file decoded wrong");
            gimg_image_free(&im);
        }
        /* Truncated: the strip's last bytes missing, then the IFD itself cut. */
        expect_refused(t.b, 204, GIMG_E_FORMAT, "truncated", "truncated strip");
        expect_refused(t.b, 60, GIMG_E_FORMAT, NULL, "truncated directory");
        expect_refused(t.b, 6, GIMG_E_FORMAT, NULL, "truncated header");
    }
    /* Huge: 1,000,000 x 1,000,000 in 200 bytes: the limit, from the header. */
    start_tiff(&t, 8);
    {
        const uint32_t e[][4] = {GRAY_IFD(1000000, 1000000, 150, 8)};
        put_ifd(&t, 8, e, 9, 0);
        t.n = 200;
        gimg_set_max_pixels((uint64_t)1 << 28); /* the old default, given */
        expect_refused(t.b, t.n, GIMG_E_LIMIT, "limit", "1000000x1000000");
        gimg_info info;
        CHECK(gimg_probe_memory(t.b, t.n, &info) == GIMG_E_LIMIT, "huge probe: %s",
              gimg_last_error());
        gimg_set_max_pixels(GIMG_DEFAULT_MAX_PIXELS);
        /* With no pixel limit (the default), the memory budget refuses it. */
        expect_refused(t.b, t.n, GIMG_E_LIMIT, "--max-memory", "1000000x1000000, no pixel limit");
    }
    /* Within the limit but no data: 16000 x 16000 uncompressed in one tiny
     * strip claiming 256 MB. */
    start_tiff(&t, 8);
    {
        const uint32_t e[][4] = {GRAY_IFD(16000, 16000, 150, 256000000)};
        put_ifd(&t, 8, e, 9, 0);
        t.n = 200;
        expect_refused(t.b, t.n, GIMG_E_FORMAT, NULL, "16000x16000 strip past the end");
    }
    /* Zero sizes. */
    for (int k = 0; k < 2; k++) {
        start_tiff(&t, 8);
        const uint32_t e[][4] = {GRAY_IFD(k ? 0 : 5, k ? 5 : 0, 150, 0)};
        put_ifd(&t, 8, e, 9, 0);
        t.n = 200;
        expect_refused(t.b, t.n, GIMG_E_FORMAT, NULL, k ? "zero width" : "zero height");
    }
    /* The strip offset past the end of the file. */
    start_tiff(&t, 8);
    {
        const uint32_t e[][4] = {GRAY_IFD(4, 2, 5000, 8)};
        put_ifd(&t, 8, e, 9, 0);
        t.n = 200;
        expect_refused(t.b, t.n, GIMG_E_FORMAT, "truncated", "strip offset past the end");
    }
    /* Tiles whose size overflows: 2^31 x 2^31 tiles of 4 x 16-bit
     * samples on a 16x16 image, then 65536 x 65536 (16 GiB a tile). */
    for (int k = 0; k < 2; k++) {
        start_tiff(&t, 8);
        uint32_t side = k ? 65536 : 0x80000000u;
        const uint32_t e[][4] = {
            {256, 4, 1, 16}, {257, 4, 1, 16}, {258, 3, 1, 16}, {259, 3, 1, 1},
            {262, 3, 1, 2}, {277, 3, 1, 4}, {322, 4, 1, side}, {323, 4, 1, side},
            {324, 4, 1, 300}, {325, 4, 1, 8},
        };
        put_ifd(&t, 8, e, 10, 0);
        t.n = 400;
        expect_refused(t.b, t.n, GIMG_E_FORMAT, k ? "tile" : NULL,
                       k ? "65536^2 tiles" : "2^31 tiles");
    }
    /* An IFD that points to itself, and two that point to each other. */
    start_tiff(&t, 8);
    {
        const uint32_t e[][4] = {GRAY_IFD(4, 2, 300, 8)};
        put_ifd(&t, 8, e, 9, 8);
        t.n = 308;
        expect_refused(t.b, t.n, GIMG_E_FORMAT, NULL, "IFD pointing to itself");
        gimg_info info;
        CHECK(gimg_probe_memory(t.b, t.n, &info) == GIMG_E_FORMAT, "self loop probed: %s",
              gimg_last_error());
    }
    start_tiff(&t, 8);
    {
        const uint32_t e[][4] = {GRAY_IFD(4, 2, 300, 8)};
        put_ifd(&t, 8, e, 9, 150);
        put_ifd(&t, 150, e, 9, 8);
        t.n = 308;
        expect_refused(t.b, t.n, GIMG_E_FORMAT, NULL, "two IFDs pointing to each other");
        gimg_read_opts o = {.page = 1};
        gimg_image im;
        CHECK(gimg_decode_page(t.b, t.n, &o, &im) != GIMG_OK, "page 1 of a loop decoded");
    }
    /* Many IFDs, all valid and distinct: counted quickly. */
    {
        static unsigned char many[1 << 20];
        const size_t ifd = 2 + 12 * 9 + 4;
        size_t n = 8, count = 0;
        memcpy(many, "II*\0", 4);
        many[4] = 8;
        while (n + ifd <= sizeof many) {
            bytes_t one;
            memset(&one, 0, sizeof one);
            const uint32_t e[][4] = {GRAY_IFD(1, 1, 8, 1)};
            size_t next = n + ifd + ifd <= sizeof many ? n + ifd : 0;
            put_ifd(&one, 0, e, 9, (uint32_t)next);
            memcpy(many + n, one.b, ifd);
            n += ifd;
            count++;
        }
        double t0 = cpu_seconds();
        gimg_info info;
        gimg_status st = gimg_probe_memory(many, n, &info);
        double dt = cpu_seconds() - t0;
        CHECK(st == GIMG_OK && info.pages == (int)count, "%zu pages: status %d, %d pages (%s)",
              count, (int)st, info.pages, gimg_last_error());
        CHECK(dt < SANITIZER_SLOWDOWN, "counting %zu pages took %.2f s", count, dt);
        /* The last page, reached by libtiff's own walk. */
        gimg_read_opts last = {.page = (int)count - 1};
        gimg_image im;
        t0 = cpu_seconds();
        st = gimg_decode_page(many, n, &last, &im);
        dt = cpu_seconds() - t0;
        CHECK(st == GIMG_OK && im.width == 1, "page %zu: %s", count - 1, gimg_last_error());
        CHECK(dt < SANITIZER_SLOWDOWN, "reading page %zu took %.2f s", count - 1, dt);
        gimg_image_free(&im);
    }
}

/* Nothing is printed on stderr by the codec, even for hostile files or
 * warnings (unknown tags). */
static void test_silent(void)
{
    fflush(stderr);
    int saved = dup(2);
    FILE *sink = tmpfile();
    if (saved < 0 || !sink)
        SKIP("cannot redirect stderr");
    /* libtiff's process-wide handlers at their defaults, which print. */
    TIFFSetWarningHandler(default_warning);
    dup2(fileno(sink), 2);
    bytes_t t;
    gimg_image im;
    gimg_info info;
    /* Unknown tag (a warning), strip past the end, a loop, a huge size. */
    start_tiff(&t, 8);
    const uint32_t e[][4] = {GRAY_IFD(4, 2, 5000, 8), {40000, 3, 1, 7}};
    put_ifd(&t, 8, e, 10, 8);
    t.n = 200;
    gimg_decode_memory(t.b, t.n, &im);
    gimg_probe_memory(t.b, t.n, &info);
    put32(&t, 8 + 2 + 12 * 10, 0);
    gimg_decode_memory(t.b, t.n, &im);
    gimg_probe_memory(t.b, 30, &info);
    fflush(stderr);
    TIFFSetWarningHandler(quiet_libtiff);
    dup2(saved, 2);
    close(saved);
    long printed = ftell(sink) >= 0 ? (fseek(sink, 0, SEEK_END), ftell(sink)) : -1;
    CHECK(printed == 0, "the codec printed %ld bytes on stderr", printed);
    fclose(sink);
}

/* ------------------------------------------------------------ metadata */

/* An ICC profile's outline (128-byte header, an empty tag table), n >= 132
 * bytes, its bytes after the header seeded: enough for a pass-through. */
static unsigned char *fake_icc(size_t n, uint64_t seed)
{
    unsigned char *p = calloc(n, 1);
    uint64_t state = seed;
    for (size_t i = 132; i < n; i++)
        p[i] = (unsigned char)testimg_next(&state);
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(n >> (24 - 8 * i));
    memcpy(p + 12, "mntrRGB XYZ ", 12);
    memcpy(p + 36, "acsp", 4);
    p[8] = 2;   /* version 2.1 */
    p[9] = 0x10;
    return p;
}

static const char *const XMP_A =
    "<?xpacket begin='\xef\xbb\xbf' id='W5M0MpCehiHzreSzNTczkc9d'?>"
    "<x:xmpmeta xmlns:x='adobe:ns:meta/'><rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/"
    "22-rdf-syntax-ns#'><rdf:Description xmlns:dc='http://purl.org/dc/elements/1.1/' "
    "dc:format='image/tiff'/></rdf:RDF></x:xmpmeta><?xpacket end='w'?>";
static const char *const XMP_B =
    "<?xpacket begin='' id='W5M0MpCehiHzreSzNTczkc9d'?><x:xmpmeta xmlns:x='adobe:ns:meta/'>"
    "page two</x:xmpmeta><?xpacket end='r'?>";

/* 1 if m holds exactly these items (icc/xmp NULL: none; dpi 0: none). */
static int meta_is(const gimg_meta *m, const unsigned char *icc, size_t icc_bytes,
                   const char *xmp, double x_dpi, double y_dpi, int orientation, const char *what)
{
    int ok = 1;
    if (!m) {
        CHECK(!icc && !xmp && x_dpi == 0 && orientation == 0, "%s: no metadata decoded", what);
        return !icc && !xmp && x_dpi == 0 && orientation == 0;
    }
    if (icc)
        ok &= m->icc_bytes == icc_bytes && m->icc && memcmp(m->icc, icc, icc_bytes) == 0;
    else
        ok &= m->icc == NULL && m->icc_bytes == 0;
    CHECK(ok, "%s: ICC profile of %zu bytes, want %zu", what, m->icc_bytes, icc ? icc_bytes : 0);
    int xok = xmp ? m->xmp_bytes == strlen(xmp) && m->xmp && memcmp(m->xmp, xmp, m->xmp_bytes) == 0
                  : m->xmp == NULL && m->xmp_bytes == 0;
    CHECK(xok, "%s: XMP of %zu bytes, want %zu", what, m->xmp_bytes, xmp ? strlen(xmp) : 0);
    int rok = m->x_dpi == x_dpi && m->y_dpi == y_dpi;
    CHECK(rok, "%s: %g x %g dpi, want %g x %g", what, m->x_dpi, m->y_dpi, x_dpi, y_dpi);
    CHECK(m->orientation == orientation, "%s: orientation %d, want %d", what, m->orientation,
          orientation);
    CHECK(m->exif == NULL && m->n_texts == 0, "%s: EXIF or texts from a TIFF", what);
    return ok && xok && rok && m->orientation == orientation;
}

/* A copy of the given items as a gimg_meta (NULL items left out). */
static gimg_meta *make_meta(const unsigned char *icc, size_t icc_bytes, const char *xmp,
                            double x_dpi, double y_dpi, int orientation)
{
    gimg_meta *m = gimg_meta_new();
    if (!m)
        return NULL;
    if (icc) {
        m->icc = malloc(icc_bytes);
        memcpy(m->icc, icc, icc_bytes);
        m->icc_bytes = icc_bytes;
    }
    if (xmp) {
        m->xmp_bytes = strlen(xmp);
        m->xmp = malloc(m->xmp_bytes);
        memcpy(m->xmp, xmp, m->xmp_bytes);
    }
    m->x_dpi = x_dpi;
    m->y_dpi = y_dpi;
    m->orientation = orientation;
    return m;
}

static unsigned le16_at(const unsigned char *p) { return p[0] | (unsigned)p[1] << 8; }
static uint32_t le32_at(const unsigned char *p)
{
    return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void set_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* Two one-page classic little-endian TIFF files (gimg_encode's) as one
 * file of two pages: b appended to a, its offsets moved (values stored
 * outside their entries, and StripOffsets), a's IFD linked to b's. NULL
 * for files of another kind. The caller frees the result. */
static unsigned char *join_pages(const unsigned char *a, size_t a_len, const unsigned char *b,
                                 size_t b_len, size_t *len)
{
    static const unsigned type_bytes[17] = {0, 1, 1, 2, 4, 8, 1, 1, 2, 4, 8, 4, 8, 4, 0, 0, 8};
    if (a_len < 8 || b_len < 8 || memcmp(a, "II*\0", 4) || memcmp(b, "II*\0", 4))
        return NULL;
    const size_t base = (a_len + 1) & ~(size_t)1;
    unsigned char *out = calloc(base + b_len, 1);
    memcpy(out, a, a_len);
    memcpy(out + base, b, b_len);
    unsigned char *nb = out + base;
    uint32_t b_ifd = le32_at(nb + 4), a_ifd = le32_at(out + 4);
    if (b_ifd + 2 > b_len || a_ifd + 2 > a_len) {
        free(out);
        return NULL;
    }
    unsigned n = le16_at(nb + b_ifd);
    for (unsigned i = 0; i < n; i++) {
        unsigned char *e = nb + b_ifd + 2 + 12 * i;
        unsigned tag = le16_at(e), type = le16_at(e + 2);
        uint32_t count = le32_at(e + 4);
        uint64_t value_bytes = (uint64_t)count * (type < 17 ? type_bytes[type] : 0);
        if (value_bytes > 4)
            set_le32(e + 8, le32_at(e + 8) + (uint32_t)base);
        if (tag == 273 && type == 4) {
            unsigned char *v = value_bytes > 4 ? out + le32_at(e + 8) : e + 8;
            for (uint32_t k = 0; k < count; k++)
                set_le32(v + 4 * k, le32_at(v + 4 * k) + (uint32_t)base);
        }
    }
    unsigned an = le16_at(out + a_ifd);
    set_le32(out + a_ifd + 2 + 12 * an, b_ifd + (uint32_t)base);
    *len = base + b_len;
    return out;
}

/* ICC, XMP, resolution and orientation written by gimg_encode come back
 * byte for byte from gimg_decode_memory, under every compression, for
 * 8-bit and 12-bit images; libtiff reads the same tags from the file. */
static void test_meta_round_trip(void)
{
    size_t icc_bytes = 3000;
    unsigned char *icc = fake_icc(icc_bytes, 21);
    const gimg_tiff_compression comps[] = {GIMG_TIFF_DEFLATE, GIMG_TIFF_LZW, GIMG_TIFF_NONE};
    for (int k = 0; k < 3; k++)
        for (int deep = 0; deep < 2; deep++) {
            gimg_image im, back;
            if (gimg_image_alloc(&im, 41, 23, 3, deep ? GIMG_U16 : GIMG_U8))
                continue;
            testimg_fill_random(&im, 300 + k);
            if (deep) {
                im.maxval = 4095;
                for (int y = 0; y < im.height; y++)
                    for (int x = 0; x < im.width * 3; x++)
                        ((uint16_t *)gimg_row(&im, y))[x] &= 4095;
            }
            im.meta = make_meta(icc, icc_bytes, XMP_A, 300.0, 72.5, 6);
            gimg_write_opts o;
            gimg_write_opts_init(&o);
            o.tiff_compression = comps[k];
            unsigned char *buf;
            size_t len;
            if (gimg_encode(&im, GIMG_FMT_TIFF, &o, &buf, &len)) {
                CHECK(0, "encode: %s", gimg_last_error());
                gimg_image_free(&im);
                continue;
            }
            char what[64];
            snprintf(what, sizeof what, "compression %d, %s", (int)comps[k],
                     deep ? "12-bit" : "8-bit");
            if (decode_checked(buf, len, 0, &back)) {
                CHECK(same_pixels(&im, &back) && back.maxval == im.maxval, "%s: pixels differ",
                      what);
                meta_is(back.meta, icc, icc_bytes, XMP_A, 300.0, 72.5, 6, what);
                gimg_image_free(&back);
            }
            /* libtiff's reading of our tags. */
            TIFF *tif = open_buffer(buf, len);
            if (tif) {
                uint32_t n = 0;
                void *p = NULL;
                float xr = 0, yr = 0;
                uint16_t unit = 0, orient = 0;
                CHECK(TIFFGetField(tif, TIFFTAG_ICCPROFILE, &n, &p) && n == icc_bytes &&
                          memcmp(p, icc, n) == 0, "%s: libtiff reads no ICC profile", what);
                CHECK(TIFFGetField(tif, TIFFTAG_XMLPACKET, &n, &p) && n == strlen(XMP_A) &&
                          memcmp(p, XMP_A, n) == 0, "%s: libtiff reads no XMP", what);
                CHECK(TIFFGetField(tif, TIFFTAG_XRESOLUTION, &xr) &&
                          TIFFGetField(tif, TIFFTAG_YRESOLUTION, &yr) &&
                          TIFFGetField(tif, TIFFTAG_RESOLUTIONUNIT, &unit) && xr == 300.0f &&
                          yr == 72.5f && unit == RESUNIT_INCH,
                      "%s: resolution %g x %g unit %u", what, xr, yr, unit);
                CHECK(TIFFGetField(tif, TIFFTAG_ORIENTATION, &orient) && orient == 6,
                      "%s: orientation tag %u", what, orient);
                CHECK(!TIFFGetField(tif, TIFFTAG_EXIFIFD, &n), "%s: an EXIF IFD written", what);
                TIFFClose(tif);
            }
            free(buf);
            gimg_image_free(&im);
        }
    /* Orientation 1 is written when recorded; 0 writes no tag; no metadata
     * decodes as none; one resolution stands for both. */
    for (int k = 0; k < 4; k++) {
        gimg_image im, back;
        if (gimg_image_alloc(&im, 9, 7, 1, GIMG_U8))
            continue;
        testimg_fill_random(&im, 17);
        int orient = k == 0 ? 1 : 0;
        if (k == 0)
            im.meta = make_meta(NULL, 0, NULL, 0, 0, 1);
        else if (k == 1)
            im.meta = make_meta(NULL, 0, NULL, 0, 0, 0);   /* an empty gimg_meta */
        else if (k == 3)
            im.meta = make_meta(NULL, 0, NULL, 96.0, 0, 0);
        unsigned char *buf;
        size_t len;
        if (gimg_encode(&im, GIMG_FMT_TIFF, NULL, &buf, &len) == GIMG_OK) {
            TIFF *tif = open_buffer(buf, len);
            uint16_t v = 0;
            if (tif) {
                int has = TIFFGetField(tif, TIFFTAG_ORIENTATION, &v);
                CHECK(orient ? has && v == 1 : !has, "case %d: orientation tag %d (%u)", k, has,
                      v);
                TIFFClose(tif);
            }
            if (decode_checked(buf, len, 0, &back)) {
                if (k == 3)
                    meta_is(back.meta, NULL, 0, NULL, 96.0, 96.0, 0, "one resolution");
                else
                    CHECK(orient ? back.meta && back.meta->orientation == 1 : back.meta == NULL,
                          "case %d: decoded metadata %p", k, (void *)back.meta);
                gimg_image_free(&back);
            }
            free(buf);
        } else
            CHECK(0, "encode: %s", gimg_last_error());
        gimg_image_free(&im);
    }
    free(icc);
}

/* Each page keeps its own metadata: pages written by libtiff with
 * different tags (and resolution units), and pages gimg_encode wrote,
 * put together by tiffcp. */
static void test_meta_pages(void)
{
    size_t a_bytes = 700, b_bytes = 1301;
    unsigned char *a = fake_icc(a_bytes, 1), *b = fake_icc(b_bytes, 2);
    void *s0 = seeded_samples(20, 10, 1, 8, 0, 1), *s1 = seeded_samples(12, 8, 3, 16, 0, 2);
    page_spec pages[5] = {
        {.width = 20, .height = 10, .bits = 8, .spp = 1, .photometric = PHOTOMETRIC_MINISBLACK,
         .samples = s0, .icc = a, .icc_bytes = (uint32_t)a_bytes, .x_res = 100, .y_res = 50,
         .res_unit = RESUNIT_CENTIMETER, .orientation = 3},
        {.width = 12, .height = 8, .bits = 16, .spp = 3, .photometric = PHOTOMETRIC_RGB,
         .compression = COMPRESSION_LZW, .samples = s1, .icc = b, .icc_bytes = (uint32_t)b_bytes,
         .xmp = XMP_B, .x_res = 300, .y_res = 300, .res_unit = RESUNIT_INCH, .orientation = 8},
        /* No unit: inch, the specification's default. */
        {.width = 20, .height = 10, .bits = 8, .spp = 1, .photometric = PHOTOMETRIC_MINISBLACK,
         .samples = s0, .x_res = 200, .y_res = 150},
        /* Unit "none": a ratio, no resolution. */
        {.width = 20, .height = 10, .bits = 8, .spp = 1, .photometric = PHOTOMETRIC_MINISBLACK,
         .samples = s0, .x_res = 2, .y_res = 1, .res_unit = RESUNIT_NONE},
        {.width = 20, .height = 10, .bits = 8, .spp = 1, .photometric = PHOTOMETRIC_MINISBLACK,
         .samples = s0, .xmp = XMP_A, .orientation = 1},
    };
    size_t len;
    unsigned char *buf = make_tiff(pages, 5, 1, &len);
    CHECK(buf != NULL, "pages not written");
    for (int k = 0; buf && k < 5; k++) {
        gimg_image im;
        char what[32];
        snprintf(what, sizeof what, "page %d", k);
        if (!decode_checked(buf, len, k, &im))
            continue;
        switch (k) {
        case 0: meta_is(im.meta, a, a_bytes, NULL, 254.0, 127.0, 3, what); break;
        case 1: meta_is(im.meta, b, b_bytes, XMP_B, 300.0, 300.0, 8, what); break;
        case 2: meta_is(im.meta, NULL, 0, NULL, 200.0, 150.0, 0, what); break;
        case 3: CHECK(im.meta == NULL, "unit none: metadata decoded"); break;
        case 4: meta_is(im.meta, NULL, 0, XMP_A, 0, 0, 1, what); break;
        }
        gimg_image_free(&im);
    }
    free(buf);

    /* gimg_encode's pages, joined into one file here. */
    gimg_image im[2];
    gimg_meta *want[2] = {make_meta(a, a_bytes, XMP_A, 600.0, 600.0, 5),
                          make_meta(b, b_bytes, XMP_B, 72.0, 144.0, 1)};
    unsigned char *one[2] = {NULL, NULL};
    size_t one_len[2] = {0, 0};
    int ok = 1;
    for (int k = 0; k < 2; k++) {
        ok &= gimg_image_alloc(&im[k], 30 + k, 20, k ? 4 : 1, k ? GIMG_U16 : GIMG_U8) == GIMG_OK;
        if (!ok)
            break;
        testimg_fill_random(&im[k], 40 + k);
        gimg_meta_copy(want[k], &im[k].meta);
        ok &= gimg_encode(&im[k], GIMG_FMT_TIFF, NULL, &one[k], &one_len[k]) == GIMG_OK;
    }
    CHECK(ok, "encode: %s", gimg_last_error());
    buf = ok ? join_pages(one[0], one_len[0], one[1], one_len[1], &len) : NULL;
    CHECK(!ok || buf, "our files could not be joined");
    for (int k = 0; buf && k < 2; k++) {
        gimg_image back;
        if (!decode_checked(buf, len, k, &back))
            continue;
        char what[32];
        snprintf(what, sizeof what, "joined page %d", k);
        CHECK(same_pixels(&im[k], &back), "%s: pixels differ", what);
        const gimg_meta *w = want[k];
        meta_is(back.meta, w->icc, w->icc_bytes, k ? XMP_B : XMP_A, w->x_dpi, w->y_dpi,
                w->orientation, what);
        gimg_image_free(&back);
    }
    free(buf);
    for (int k = 0; k < 2; k++) {
        free(one[k]);
        gimg_image_free(&im[k]);
        gimg_meta_free(want[k]);
    }
    free(a);
    free(b);
    free(s0);
    free(s1);
}

/* Metadata tags that are broken, crafted byte by byte: an ICC profile or
 * XMP packet whose bytes lie past the end of the file, an orientation out
 * of range, a zero or negative resolution: the image decodes, the item is
 * left out (a broken ICC or XMP with a warning). */
static void test_meta_hostile(void)
{
    bytes_t t;
    start_tiff(&t, 8);
    /* Tag types: 7 UNDEFINED, 1 BYTE, 5 RATIONAL. */
    const uint32_t e[][4] = {
        GRAY_IFD(4, 2, 300, 8),
        {274, 3, 1, 9},                 /* Orientation 9 */
        {282, 5, 1, 400},               /* XResolution: 0/1 */
        {283, 5, 1, 408},               /* YResolution: 5/0 */
        {296, 3, 1, 2},
        {700, 1, 100000, 3000},         /* XMP past the end */
        {34675, 7, 5000, 4000},         /* ICC past the end */
    };
    put_ifd(&t, 8, e, 15, 0);
    put32(&t, 400, 0);
    put32(&t, 404, 1);
    put32(&t, 408, 5);
    put32(&t, 412, 0);
    for (int i = 0; i < 8; i++)
        t.b[300 + i] = (unsigned char)(i * 20);
    t.n = 420;
    gimg_image im;
    gimg_status st = gimg_decode_memory(t.b, t.n, &im);
    CHECK(st == GIMG_OK, "broken metadata refused the image: %s", gimg_last_error());
    if (st == GIMG_OK) {
        CHECK(gimg_row(&im, 1)[3] == 140, "pixels decoded wrong");
        const gimg_meta *m = im.meta;
        CHECK(m && !m->icc && !m->xmp && m->orientation == 0 && m->x_dpi == 0,
              "broken metadata kept: %p", (void *)m);
        CHECK(m && contains(m->warning, "ICC") && contains(m->warning, "dropped"),
              "no warning about the ICC profile: '%s'", m ? m->warning : "");
        gimg_image_free(&im);
    }
    /* Page 0: an orientation of 0 and a resolution unit of 7; page 1:
     * clean. Each page's warning is its own. */
    start_tiff(&t, 8);
    const uint32_t p0[][4] = {
        GRAY_IFD(4, 2, 300, 8), {274, 3, 1, 0}, {282, 5, 1, 400}, {283, 5, 1, 400},
        {296, 3, 1, 7},
    };
    const uint32_t p1[][4] = {GRAY_IFD(4, 2, 300, 8)};
    put_ifd(&t, 8, p0, 13, 200);
    put_ifd(&t, 200, p1, 9, 0);
    put32(&t, 400, 300);
    put32(&t, 404, 1);
    t.n = 420;
    for (int page = 0; page < 2; page++) {
        gimg_read_opts o = {.page = page};
        st = gimg_decode_page(t.b, t.n, &o, &im);
        CHECK(st == GIMG_OK, "page %d: %s", page, gimg_last_error());
        if (st)
            continue;
        if (page == 0)
            CHECK(im.meta && im.meta->x_dpi == 0 && im.meta->orientation == 0 &&
                      contains(im.meta->warning, "Bad value"),
                  "page 0: %s", im.meta ? im.meta->warning : "no metadata");
        else
            CHECK(im.meta == NULL, "page 1 has page 0's warning: '%s'",
                  im.meta ? im.meta->warning : "");
        gimg_image_free(&im);
    }
    /* An ICC profile's count so large that it cannot be in the file. */
    start_tiff(&t, 8);
    const uint32_t e2[][4] = {GRAY_IFD(4, 2, 300, 8), {34675, 7, 0xFFFFFFF0u, 100}};
    put_ifd(&t, 8, e2, 10, 0);
    t.n = 308;
    double t0 = cpu_seconds();
    st = gimg_decode_memory(t.b, t.n, &im);
    CHECK(st == GIMG_OK && im.meta && !im.meta->icc, "4 GiB ICC count: %s",
          st ? gimg_last_error() : "kept?");
    CHECK(cpu_seconds() - t0 < 0.5, "4 GiB ICC count: slow");
    gimg_image_free(&im);
}

/* --------------------------------------------------------- b-bit samples */

/* A page of b-bit samples (b in 1..16) written with libtiff from values
 * (interleaved, w * h * spp, each below 2^b), packed here bit by bit, most
 * significant first, each row of each strip or tile starting on a byte. */
typedef struct {
    const char *name;
    uint16_t bits, spp, photometric, planar, compression;
    uint32_t rows_per_strip, tile;    /* tile > 0: square tiles */
    int n_extra;
    uint16_t extra[2];
    int big_endian;
    int channels;                     /* expected */
    int pick[4];
    int invert, associated;
} packed_case;

static void pack_bits(unsigned char *dst, uint64_t *bitpos, unsigned v, unsigned bits)
{
    for (int i = (int)bits - 1; i >= 0; i--, (*bitpos)++)
        if (v >> i & 1)
            dst[*bitpos / 8] |= (unsigned char)(0x80 >> (*bitpos % 8));
}

static unsigned char *make_packed_tiff(const packed_case *k, uint32_t w, uint32_t h,
                                       const uint16_t *values, size_t *len)
{
    strcpy(tmp_path, "/tmp/unit_codec_tiff.XXXXXX");
    int fd = mkstemp(tmp_path);
    if (fd < 0)
        return NULL;
    close(fd);
    TIFF *tif = TIFFOpen(tmp_path, k->big_endian ? "wb" : "wl");
    if (!tif) {
        unlink(tmp_path);
        return NULL;
    }
    const int separate = k->planar == PLANARCONFIG_SEPARATE;
    const int planes = separate ? k->spp : 1, per = separate ? 1 : k->spp;
    TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, w);
    TIFFSetField(tif, TIFFTAG_IMAGELENGTH, h);
    TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, k->bits);
    TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, k->spp);
    TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, k->photometric);
    TIFFSetField(tif, TIFFTAG_PLANARCONFIG, separate ? PLANARCONFIG_SEPARATE : PLANARCONFIG_CONTIG);
    TIFFSetField(tif, TIFFTAG_COMPRESSION, k->compression ? k->compression : COMPRESSION_NONE);
    if (k->n_extra)
        TIFFSetField(tif, TIFFTAG_EXTRASAMPLES, (uint16_t)k->n_extra, k->extra);
    uint32_t cw = w, ch = k->rows_per_strip ? k->rows_per_strip : h;
    if (k->tile) {
        cw = ch = k->tile;
        TIFFSetField(tif, TIFFTAG_TILEWIDTH, cw);
        TIFFSetField(tif, TIFFTAG_TILELENGTH, ch);
    } else
        TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, ch);
    size_t row = ((size_t)cw * per * k->bits + 7) / 8;
    unsigned char *chunk = malloc(row * ch);
    int ok = 1;
    for (int pl = 0; ok && pl < planes; pl++)
        for (uint32_t y0 = 0; ok && y0 < h; y0 += ch)
            for (uint32_t x0 = 0; ok && x0 < w; x0 += cw) {
                memset(chunk, 0, row * ch);
                uint32_t rows = k->tile ? ch : (h - y0 < ch ? h - y0 : ch);
                for (uint32_t y = 0; y < rows; y++) {
                    uint64_t bit = 0;
                    for (uint32_t x = 0; x < cw; x++)
                        for (int s = 0; s < per; s++) {
                            unsigned v = 0;
                            if (y0 + y < h && x0 + x < w)
                                v = values[((size_t)(y0 + y) * w + x0 + x) * k->spp + pl + s];
                            pack_bits(chunk + y * row, &bit, v, k->bits);
                        }
                }
                if (k->tile)
                    ok = TIFFWriteEncodedTile(tif, TIFFComputeTile(tif, x0, y0, 0, (uint16_t)pl),
                                              chunk, (tmsize_t)(row * ch)) >= 0;
                else
                    ok = TIFFWriteEncodedStrip(tif, TIFFComputeStrip(tif, y0, (uint16_t)pl),
                                               chunk, (tmsize_t)(row * rows)) >= 0;
            }
    free(chunk);
    ok = ok && TIFFWriteDirectory(tif);
    TIFFClose(tif);
    unsigned char *buf = ok ? slurp(tmp_path, len) : NULL;
    unlink(tmp_path);
    return buf;
}

/* b-bit files in the layouts other programs write decode to the file's
 * samples with maxval 2^b - 1 (1-bit: 0/255, maxval 0), computed here from
 * the values written. */
static void test_packed_from_libtiff(void)
{
    const uint16_t U = EXTRASAMPLE_UNSPECIFIED, UA = EXTRASAMPLE_UNASSALPHA,
                   AA = EXTRASAMPLE_ASSOCALPHA;
    const uint16_t MB = PHOTOMETRIC_MINISBLACK, MW = PHOTOMETRIC_MINISWHITE,
                   RGB = PHOTOMETRIC_RGB, SEP = PLANARCONFIG_SEPARATE;
    const packed_case cases[] = {
        {"gray12", 12, 1, MB, 0, 0, 5, 0, 0, {0}, 0, 1, {0}, 0, 0},
        {"gray12-MM-lzw", 12, 1, MB, 0, COMPRESSION_LZW, 7, 0, 0, {0}, 1, 1, {0}, 0, 0},
        {"gray10-tiled-deflate", 10, 1, MB, 0, COMPRESSION_ADOBE_DEFLATE, 0, 16, 0, {0}, 0, 1,
         {0}, 0, 0},
        {"gray2", 2, 1, MB, 0, 0, 3, 0, 0, {0}, 0, 1, {0}, 0, 0},
        {"gray4-packbits", 4, 1, MB, 0, COMPRESSION_PACKBITS, 0, 0, 0, {0}, 0, 1, {0}, 0, 0},
        {"gray2-miniswhite", 2, 1, MW, 0, 0, 0, 0, 0, {0}, 0, 1, {0}, 1, 0},
        {"gray12-miniswhite-MM", 12, 1, MW, 0, 0, 0, 0, 0, {0}, 1, 1, {0}, 1, 0},
        {"gray3", 3, 1, MB, 0, 0, 0, 0, 0, {0}, 0, 1, {0}, 0, 0},
        {"gray5", 5, 1, MB, 0, COMPRESSION_LZW, 0, 0, 0, {0}, 0, 1, {0}, 0, 0},
        {"gray7", 7, 1, MB, 0, 0, 0, 0, 0, {0}, 0, 1, {0}, 0, 0},
        {"gray9", 9, 1, MB, 0, 0, 0, 0, 0, {0}, 0, 1, {0}, 0, 0},
        {"gray11", 11, 1, MB, 0, 0, 0, 0, 0, {0}, 0, 1, {0}, 0, 0},
        {"gray13", 13, 1, MB, 0, 0, 0, 0, 0, {0}, 0, 1, {0}, 0, 0},
        {"gray14", 14, 1, MB, 0, 0, 0, 0, 0, {0}, 0, 1, {0}, 0, 0},
        {"gray15", 15, 1, MB, 0, 0, 0, 0, 0, {0}, 0, 1, {0}, 0, 0},
        {"graya4", 4, 2, MB, 0, 0, 0, 0, 1, {UA}, 0, 2, {0, 1}, 0, 0},
        {"rgb12-deflate", 12, 3, RGB, 0, COMPRESSION_ADOBE_DEFLATE, 3, 0, 0, {0}, 0, 3,
         {0, 1, 2}, 0, 0},
        {"rgb10-separate", 10, 3, RGB, SEP, 0, 4, 0, 0, {0}, 0, 3, {0, 1, 2}, 0, 0},
        {"rgba12-tiled-separate-MM", 12, 4, RGB, SEP, COMPRESSION_LZW, 0, 16, 1, {UA}, 1, 4,
         {0, 1, 2, 3}, 0, 0},
        {"rgb14+unspecified", 14, 4, RGB, 0, 0, 0, 0, 1, {U}, 0, 4, {0, 1, 2, 3}, 0, 0},
        {"rgb6+unspecified+alpha", 6, 5, RGB, 0, COMPRESSION_LZW, 0, 0, 2, {U, UA}, 0, 4,
         {0, 1, 2, 4}, 0, 0},
        {"rgba12-associated", 12, 4, RGB, 0, 0, 0, 0, 1, {AA}, 0, 4, {0, 1, 2, 3}, 0, 1},
        {"rgb1", 1, 3, RGB, 0, 0, 0, 0, 0, {0}, 0, 3, {0, 1, 2}, 0, 0},
        {"graya1-separate", 1, 2, MB, SEP, 0, 0, 0, 1, {UA}, 0, 2, {0, 1}, 0, 0},
    };
    const uint32_t w = 45, h = 38;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const packed_case *k = &cases[i];
        const unsigned max = (1u << k->bits) - 1;
        size_t n = (size_t)w * h * k->spp;
        uint16_t *values = malloc(n * sizeof *values);
        uint64_t state = 900 + i;
        for (size_t j = 0; j < n; j++)
            values[j] = (uint16_t)(testimg_next(&state) & max);
        values[0] = (uint16_t)max;   /* both ends of the range present */
        values[k->spp] = 0;
        size_t len;
        unsigned char *buf = make_packed_tiff(k, w, h, values, &len);
        CHECK(buf != NULL, "%s: libtiff could not write it", k->name);
        gimg_image im;
        if (buf && decode_checked(buf, len, 0, &im)) {
            const unsigned want_max = k->bits == 1 ? 0 : max;
            const gimg_sample want_sample = k->bits > 8 ? GIMG_U16 : GIMG_U8;
            CHECK(im.maxval == want_max && im.sample == want_sample && im.channels == k->channels,
                  "%s: maxval %u sample %d channels %d", k->name, im.maxval, (int)im.sample,
                  im.channels);
            int bad = im.maxval != want_max || im.sample != want_sample ||
                      im.channels != k->channels;
            const unsigned top = k->bits == 1 ? 255 : max;
            for (uint32_t y = 0; !bad && y < h; y++)
                for (uint32_t x = 0; !bad && x < w; x++) {
                    const uint16_t *px = values + ((size_t)y * w + x) * k->spp;
                    unsigned alpha = k->associated ? px[k->pick[k->channels - 1]] : 0;
                    if (k->bits == 1)
                        alpha *= 255;
                    for (int c = 0; c < k->channels; c++) {
                        unsigned want = px[k->pick[c]];
                        if (k->bits == 1)
                            want *= 255;
                        if (k->invert && c == 0)
                            want = top - want;
                        if (k->associated && c < k->channels - 1) {
                            unsigned v = alpha ? (want * top + alpha / 2) / alpha : 0;
                            want = v > top ? top : v;
                        }
                        const unsigned char *r = gimg_row(&im, (int)y);
                        unsigned got = im.sample == GIMG_U16
                                           ? ((const uint16_t *)r)[(size_t)x * im.channels + c]
                                           : r[(size_t)x * im.channels + c];
                        if (got != want) {
                            CHECK(0, "%s: (%u,%u) channel %d is %u, want %u", k->name, x, y, c,
                                  got, want);
                            bad = 1;
                        }
                    }
                }
            gimg_image_free(&im);
        }
        free(buf);
        free(values);
    }
    /* Palette indices of 3 and 12 bits (1, 2, 4, 8 and 16: test_palette). */
    for (int bits = 3; bits <= 12; bits += 9) {
        size_t entries = (size_t)1 << bits;
        uint16_t *map = malloc(3 * entries * sizeof *map);
        uint64_t state = 5 + bits;
        for (size_t j = 0; j < 3 * entries; j++)
            map[j] = (uint16_t)testimg_next(&state);
        uint16_t *idx = malloc((size_t)w * h * sizeof *idx);
        for (size_t j = 0; j < (size_t)w * h; j++)
            idx[j] = (uint16_t)(testimg_next(&state) & (entries - 1));
        packed_case k = {"palette", (uint16_t)bits, 1, PHOTOMETRIC_PALETTE, 0, COMPRESSION_LZW,
                         0, 0, 0, {0}, 0, 3, {0}, 0, 0};
        /* make_packed_tiff writes no colormap: add it by writing the page
         * again through page_spec, from the packed rows. */
        size_t row = ((size_t)w * bits + 7) / 8;
        unsigned char *packed = calloc(row * h, 1);
        for (uint32_t y = 0; y < h; y++) {
            uint64_t bit = 0;
            for (uint32_t x = 0; x < w; x++)
                pack_bits(packed + y * row, &bit, idx[(size_t)y * w + x], (unsigned)bits);
        }
        page_spec p = {.width = w, .height = h, .bits = (uint16_t)bits, .spp = 1,
                       .photometric = PHOTOMETRIC_PALETTE, .compression = k.compression,
                       .rows_per_strip = 5, .colormap = map, .samples = packed};
        size_t len;
        unsigned char *buf = make_tiff(&p, 1, 0, &len);
        CHECK(buf != NULL, "%d-bit palette not written", bits);
        gimg_image im;
        if (buf && decode_checked(buf, len, 0, &im)) {
            int bad = im.channels != 3 || im.sample != GIMG_U8 || im.maxval != 0;
            for (size_t j = 0; !bad && j < (size_t)w * h; j++)
                for (int c = 0; c < 3; c++)
                    if (gimg_row(&im, (int)(j / w))[(j % w) * 3 + c] !=
                        map[c * entries + idx[j]] >> 8)
                        bad = 1;
            CHECK(!bad, "%d-bit palette: wrong samples", bits);
            gimg_image_free(&im);
        }
        free(buf);
        free(packed);
        free(idx);
        free(map);
    }
}

/* An image of maxval 2^b - 1 is written with BitsPerSample b, no
 * predictor, under each compression, and reads back exactly, maxval kept;
 * libtiff agrees on the tags. Maxval 1 makes a 1-bit file (read back as
 * 0/255), a 16-bit image of maxval 255 an 8-bit one; other maxvals are
 * written as their sample type. */
static void packed_round_trip(int w, int h, int channels, gimg_sample sample, unsigned bits,
                              gimg_tiff_compression c, uint64_t seed)
{
    gimg_image im, back;
    if (gimg_image_alloc(&im, w, h, channels, sample))
        return;
    const unsigned max = (1u << bits) - 1;
    im.maxval = max;
    uint64_t state = seed;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w * channels; x++) {
            unsigned v = (unsigned)testimg_next(&state) & max;
            if (sample == GIMG_U16)
                ((uint16_t *)gimg_row(&im, y))[x] = (uint16_t)v;
            else
                gimg_row(&im, y)[x] = (uint8_t)v;
        }
    gimg_write_opts o;
    gimg_write_opts_init(&o);
    o.tiff_compression = c;
    unsigned char *buf;
    size_t len;
    if (gimg_encode(&im, GIMG_FMT_TIFF, &o, &buf, &len)) {
        CHECK(0, "encode %u-bit c%d: %s", bits, channels, gimg_last_error());
        gimg_image_free(&im);
        return;
    }
    TIFF *tif = open_buffer(buf, len);
    if (tif) {
        uint16_t b = 0, pred = PREDICTOR_NONE, comp = 0;
        TIFFGetField(tif, TIFFTAG_BITSPERSAMPLE, &b);
        TIFFGetField(tif, TIFFTAG_PREDICTOR, &pred);
        TIFFGetField(tif, TIFFTAG_COMPRESSION, &comp);
        CHECK(b == bits, "maxval %u: BitsPerSample %u", max, b);
        CHECK(pred == PREDICTOR_NONE || bits == 8, "%u-bit: predictor %u", bits, pred);
        CHECK(comp == (c == GIMG_TIFF_NONE ? COMPRESSION_NONE
                       : c == GIMG_TIFF_LZW ? COMPRESSION_LZW : COMPRESSION_ADOBE_DEFLATE),
              "%u-bit: compression %u", bits, comp);
        TIFFClose(tif);
    }
    if (decode_checked(buf, len, 0, &back)) {
        int ok = back.channels == channels && back.width == w;
        if (bits == 1) {
            ok &= back.maxval == 0 && back.sample == GIMG_U8;
            for (int y = 0; ok && y < h; y++)
                for (int x = 0; x < w * channels; x++)
                    ok &= gimg_row(&back, y)[x] == gimg_row(&im, y)[x] * 255;
        } else if (bits == 8) {
            ok &= back.maxval == 0 && back.sample == GIMG_U8;
            for (int y = 0; ok && y < h; y++)
                for (int x = 0; x < w * channels; x++)
                    ok &= gimg_row(&back, y)[x] == ((uint16_t *)gimg_row(&im, y))[x];
        } else {
            ok &= back.maxval == max && same_pixels(&im, &back);
        }
        CHECK(ok, "%dx%d c%d %u-bit compression %d: maxval %u, samples differ", w, h, channels,
              bits, (int)c, back.maxval);
        gimg_image_free(&back);
    }
    free(buf);
    gimg_image_free(&im);
}

static void test_packed_round_trip(void)
{
    const gimg_tiff_compression comps[] = {GIMG_TIFF_DEFLATE, GIMG_TIFF_LZW, GIMG_TIFF_NONE};
    for (unsigned bits = 1; bits <= 15; bits++)
        for (int c = 1; c <= 4; c++)
            for (int k = 0; k < 3; k++) {
                if (bits == 8)   /* 16-bit samples of maxval 255: an 8-bit file */
                    packed_round_trip(23, 11, c, GIMG_U16, 8, comps[k], 5);
                else
                    packed_round_trip(23 + c, 11, c, bits > 8 ? GIMG_U16 : GIMG_U8, bits,
                                      comps[k], bits * 100 + c * 10 + k);
            }
    /* Several strips, and the two-thread decode (12 MB decoded). */
    packed_round_trip(1500, 1000, 4, GIMG_U16, 12, GIMG_TIFF_DEFLATE, 77);
    packed_round_trip(1500, 1000, 3, GIMG_U16, 10, GIMG_TIFF_NONE, 78);
    packed_round_trip(3000, 1000, 1, GIMG_U8, 4, GIMG_TIFF_LZW, 79);
    /* A maxval that is not 2^b - 1 (write.c rescales it before a TIFF
     * output; the codec itself writes the sample type). */
    gimg_image im, back;
    if (gimg_image_alloc(&im, 8, 8, 1, GIMG_U16) == GIMG_OK) {
        testimg_fill_random(&im, 3);
        for (int y = 0; y < 8; y++)
            for (int x = 0; x < 8; x++)
                ((uint16_t *)gimg_row(&im, y))[x] %= 1001;
        im.maxval = 1000;
        unsigned char *buf;
        size_t len;
        if (gimg_encode(&im, GIMG_FMT_TIFF, NULL, &buf, &len) == GIMG_OK) {
            if (decode_checked(buf, len, 0, &back)) {
                CHECK(back.sample == GIMG_U16 && back.maxval == 0 && back.channels == 1,
                      "maxval 1000: read back as s%d maxval %u", (int)back.sample, back.maxval);
                gimg_image_free(&back);
            }
            free(buf);
        }
        gimg_image_free(&im);
    }
}

/* A 12-bit file ImageMagick writes (convert -depth 12) decodes to its
 * samples, maxval 4095: compared with ImageMagick's own 16-bit reading
 * (v16 = round(v12 * 65535 / 4095)). */
static void test_packed_from_imagemagick(void)
{
    if (access("/usr/bin/convert", X_OK) != 0)
        SKIP("ImageMagick (/usr/bin/convert) not installed");
    char tif[64], pam[64], cmd[512];
    snprintf(tif, sizeof tif, "/tmp/unit_codec_tiff_im_%d.tif", (int)getpid());
    snprintf(pam, sizeof pam, "/tmp/unit_codec_tiff_im_%d.pam", (int)getpid());
    for (int color = 0; color < 2; color++) {
        snprintf(cmd, sizeof cmd,
                 "/usr/bin/convert -size 97x31 %s -depth 12 %s 2>/dev/null && "
                 "/usr/bin/convert %s -depth 16 %s 2>/dev/null",
                 color ? "plasma:fractal -seed 4" : "gradient:black-white", tif, tif, pam);
        if (run(cmd) != 0) {
            CHECK(0, "ImageMagick could not write a 12-bit file");
            break;
        }
        size_t len, ref_len;
        unsigned char *buf = slurp(tif, &len), *ref = slurp(pam, &ref_len);
        gimg_image im, want;
        if (buf && ref && decode_checked(buf, len, 0, &im)) {
            CHECK(gimg_decode_memory(ref, ref_len, &want) == GIMG_OK, "reference: %s",
                  gimg_last_error());
            CHECK(im.maxval == 4095 && im.sample == GIMG_U16, "%s: maxval %u sample %d",
                  color ? "rgb" : "gray", im.maxval, (int)im.sample);
            int bad = want.data == NULL || want.channels != im.channels ||
                      want.width != im.width || want.height != im.height ||
                      want.sample != GIMG_U16;
            for (int y = 0; !bad && y < im.height; y++)
                for (int x = 0; x < im.width * im.channels; x++) {
                    unsigned v = ((uint16_t *)gimg_row(&im, y))[x],
                             r = ((uint16_t *)gimg_row(&want, y))[x];
                    if (v > 4095 || (v * 65535 + 2047) / 4095 != r)
                        bad = 1;
                }
            CHECK(!bad, "%s: samples differ from ImageMagick's", color ? "rgb" : "gray");
            gimg_image_free(&im);
            gimg_image_free(&want);
        }
        free(buf);
        free(ref);
    }
    unlink(tif);
    unlink(pam);
}

/* Hostile 12-bit files: strips cut short by the end of the file, or
 * shorter than their rows, are refused as any truncated TIFF is. */
static void test_packed_hostile(void)
{
    bytes_t t;
    /* 4 x 2 gray, 12-bit: 6 bytes a row, 12 in the strip. */
#define GRAY12_IFD(count)                                                         \
    {256, 4, 1, 4}, {257, 4, 1, 2}, {258, 3, 1, 12}, {259, 3, 1, 1},              \
    {262, 3, 1, 1}, {273, 4, 1, 200}, {277, 3, 1, 1}, {278, 4, 1, 2},             \
    {279, 4, 1, (count)}
    start_tiff(&t, 8);
    const uint32_t e[][4] = {GRAY12_IFD(12)};
    put_ifd(&t, 8, e, 9, 0);
    /* Samples 0x123, 0x456, 0x789, 0xABC, 0xDEF, 0x012, 0x345, 0xFFF. */
    const unsigned char data[12] = {0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC,
                                    0xDE, 0xF0, 0x12, 0x34, 0x5F, 0xFF};
    memcpy(t.b + 200, data, 12);
    t.n = 212;
    gimg_image im;
    CHECK(gimg_decode_memory(t.b, t.n, &im) == GIMG_OK, "valid 12-bit file: %s",
          gimg_last_error());
    if (im.data) {
        const uint16_t want[8] = {0x123, 0x456, 0x789, 0xABC, 0xDEF, 0x012, 0x345, 0xFFF};
        int bad = im.maxval != 4095 || im.sample != GIMG_U16;
        for (int i = 0; !bad && i < 8; i++)
            bad = ((uint16_t *)gimg_row(&im, i / 4))[i % 4] != want[i];
        CHECK(!bad, "12-bit crafted file decoded wrong");
        gimg_image_free(&im);
    }
    expect_refused(t.b, 206, GIMG_E_FORMAT, "truncated", "12-bit strip cut by the file's end");
    /* Two strips of a row each (offsets at 150, counts at 160), each of 3
     * bytes where a row takes 6 (an 8-bit file so short is refused too). */
    for (int bits = 8; bits <= 12; bits += 4) {
        start_tiff(&t, 8);
        const uint32_t e2[][4] = {
            {256, 4, 1, 4}, {257, 4, 1, 2}, {258, 3, 1, (uint32_t)bits}, {259, 3, 1, 1},
            {262, 3, 1, 1}, {273, 4, 2, 150}, {277, 3, 1, 1}, {278, 4, 1, 1},
            {279, 4, 2, 160},
        };
        put_ifd(&t, 8, e2, 9, 0);
        put32(&t, 150, 200);
        put32(&t, 154, 210);
        put32(&t, 160, (uint32_t)bits / 4);
        put32(&t, 164, (uint32_t)bits / 4);
        memcpy(t.b + 200, data, 6);
        memcpy(t.b + 210, data + 6, 6);
        t.n = 216;
        expect_refused(t.b, t.n, GIMG_E_FORMAT, NULL,
                       bits == 8 ? "8-bit strips shorter than their rows"
                                 : "12-bit strips shorter than their rows");
    }
    /* A 12-bit file claiming a 65536 x 65536 tile of 4 samples. */
    start_tiff(&t, 8);
    const uint32_t e3[][4] = {
        {256, 4, 1, 16}, {257, 4, 1, 16}, {258, 3, 1, 12}, {259, 3, 1, 1},
        {262, 3, 1, 2}, {277, 3, 1, 4}, {322, 4, 1, 65536}, {323, 4, 1, 65536},
        {324, 4, 1, 300}, {325, 4, 1, 8},
    };
    put_ifd(&t, 8, e3, 10, 0);
    t.n = 400;
    expect_refused(t.b, t.n, GIMG_E_FORMAT, "tile", "12-bit 65536^2 tile");
#undef GRAY12_IFD
}

/* ------------------------------------------------------------ threads */

typedef struct {
    const unsigned char *good;
    size_t good_len;
    const gimg_image *want;
    int ok;
} thread_arg;

static void *decode_many(void *p)
{
    thread_arg *a = p;
    bytes_t t;
    start_tiff(&t, 8);
    const uint32_t e[][4] = {GRAY_IFD(4, 2, 5000, 8)};
    put_ifd(&t, 8, e, 9, 0);
    t.n = 200;
    a->ok = 1;
    for (int i = 0; i < 20; i++) {
        gimg_image im;
        if (gimg_decode_memory(a->good, a->good_len, &im) != GIMG_OK || !same_pixels(&im, a->want))
            a->ok = 0;
        gimg_image_free(&im);
        if (gimg_decode_memory(t.b, t.n, &im) == GIMG_OK || !strstr(gimg_last_error(), "truncated"))
            a->ok = 0;
    }
    return NULL;
}

static void test_threads(void)
{
    gimg_image im;
    if (gimg_image_alloc(&im, 700, 500, 3, GIMG_U16))
        return;
    testimg_fill_random(&im, 11);
    unsigned char *buf;
    size_t len;
    if (gimg_encode(&im, GIMG_FMT_TIFF, NULL, &buf, &len)) {
        CHECK(0, "%s", gimg_last_error());
        gimg_image_free(&im);
        return;
    }
    pthread_t th[4];
    thread_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (thread_arg){buf, len, &im, 0};
        pthread_create(&th[i], NULL, decode_many, &args[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(args[i].ok, "thread %d got a wrong image or message", i);
    }
    free(buf);
    gimg_image_free(&im);
}

int main(void)
{
    default_warning = TIFFSetWarningHandler(quiet_libtiff);
    RUN(test_round_trip_every_layout);
    RUN(test_round_trip_strided);
    RUN(test_tags_written);
    RUN(test_predictor_helps);
    RUN(test_layouts_from_libtiff);
    RUN(test_bilevel);
    RUN(test_palette);
    RUN(test_associated_alpha);
    RUN(test_jpeg);
    RUN(test_bigendian_float_predictor);
    RUN(test_large_single_strip);
    RUN(test_pages);
    RUN(test_meta_round_trip);
    RUN(test_meta_pages);
    RUN(test_meta_hostile);
    RUN(test_packed_from_libtiff);
    RUN(test_packed_round_trip);
    RUN(test_packed_from_imagemagick);
    RUN(test_packed_hostile);
    RUN(test_unsupported_layouts);
    RUN(test_hostile);
    RUN(test_silent);
    RUN(test_threads);
    return check_summary();
}
