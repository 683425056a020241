/*
 * unit_band — images read band by band (lib/band.h): for every codec with
 * a row decoder, the bands of a file are the rows that decoding it whole
 * gives, byte for byte, with its maxval, whatever the band's height (1,
 * awkward, the height - 1, the height, more); a file that decoding
 * refuses is refused by the band reader too, with the same status and
 * message; files whose variant has no row decoder are said so (the caller
 * decodes them whole).
 *
 * Images are made here from seeded PRNGs (testimg.h), encoded by libgimg's
 * writers or by hand; the reference is gimg_decode_page, the decoder
 * every tool uses today.
 */
#include "gimg.h"
#include "band.h"
#include "codec.h"
#include "testimg.h"
#include "check.h"
#include "testpng.h"
#include "testjpeg.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tiffio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* The band heights every file is read with, besides its height +- 1. */
static const int k_band_rows[] = {1, 2, 3, 7, 16};

/* Reads page o->page (o may be NULL) of buf in bands of `rows` rows and
 * compares each with whole's rows; 0 when all agree (else says where they
 * part). */
static int bands_equal(const char *what, const unsigned char *buf, size_t len,
                       const gimg_read_opts *o, const gimg_image *whole, int rows)
{
    gimg_band_reader *r;
    gimg_image header, band;
    gimg_status st = gimg_band_open(buf, len, 0, o, rows, &header, &r);
    CHECK(st == GIMG_OK && r, "%s: open with %d rows: %s", what, rows,
          st ? gimg_last_error() : "no row decoder");
    if (st || !r)
        return 1;
    int bad = 0;
    CHECK(header.width == whole->width && header.height == whole->height &&
              header.channels == whole->channels && header.sample == whole->sample &&
              header.maxval == whole->maxval && !header.data,
          "%s: header %dx%d c%d s%d maxval %u, decoding %dx%d c%d s%d maxval %u", what,
          header.width, header.height, header.channels, (int)header.sample, header.maxval,
          whole->width, whole->height, whole->channels, (int)whole->sample, whole->maxval);
    int y0, next = 0, bands = 0;
    const size_t row_bytes = (size_t)whole->width * gimg_pixel_bytes(whole);
    while (!bad && !(st = gimg_band_next(r, &band, &y0)) && band.height > 0) {
        bands++;
        int expect = whole->height - next < rows ? whole->height - next : rows;
        if (y0 != next || band.height != expect || band.maxval != whole->maxval ||
            band.width != whole->width) {
            CHECK(0, "%s: band %d with %d rows: y0 %d (want %d), %d rows (want %d), maxval %u",
                  what, bands, rows, y0, next, band.height, expect, band.maxval);
            bad = 1;
        }
        for (int i = 0; !bad && i < band.height; i++)
            if (memcmp(gimg_row(&band, i), gimg_row(whole, y0 + i), row_bytes)) {
                CHECK(0, "%s: bands of %d rows: row %d differs from decoding's", what, rows,
                      y0 + i);
                bad = 1;
            }
        next += band.height;
    }
    CHECK(st == GIMG_OK, "%s: bands of %d rows: %s", what, rows, gimg_last_error());
    CHECK(bad || next == whole->height, "%s: bands of %d rows gave %d rows of %d", what, rows,
          next, whole->height);
    /* The metadata: the header's, or what came with the last band. */
    gimg_meta *late = gimg_band_take_meta(r);
    const gimg_meta *m = header.meta ? header.meta : late;
    CHECK(!(header.meta && late), "%s: metadata both before and after the pixels", what);
    CHECK(gimg_meta_kinds(m) == gimg_meta_kinds(whole->meta) &&
              !strcmp(m ? m->warning : "", whole->meta ? whole->meta->warning : ""),
          "%s: metadata kinds %#x, decoding's %#x", what, gimg_meta_kinds(m),
          gimg_meta_kinds(whole->meta));
    gimg_meta_free(late);
    gimg_band_close(r);
    gimg_meta_free(header.meta);
    return bad || st || next != whole->height;
}

/* Every band height for page o->page (o may be NULL) of one file, against
 * its whole decoding. */
static void check_bands_page(const char *what, const unsigned char *buf, size_t len,
                             const gimg_read_opts *o)
{
    gimg_image whole;
    gimg_status st = gimg_decode_page(buf, len, o, &whole);
    CHECK(st == GIMG_OK, "%s: decoding: %s", what, gimg_last_error());
    if (st)
        return;
    for (size_t k = 0; k < sizeof k_band_rows / sizeof *k_band_rows; k++)
        if (bands_equal(what, buf, len, o, &whole, k_band_rows[k]))
            break;
    const int h = whole.height;
    if (h > 1)
        bands_equal(what, buf, len, o, &whole, h - 1);
    bands_equal(what, buf, len, o, &whole, h);
    bands_equal(what, buf, len, o, &whole, h + 1);
    gimg_image_free(&whole);
}

static void check_bands(const char *what, const unsigned char *buf, size_t len)
{
    check_bands_page(what, buf, len, NULL);
}

/* A file (its page o->page; o may be NULL) decoding refuses: the band
 * reader refuses it too, at its opening or at some band, with decoding's
 * status and message. */
static void check_refused_alike_page(const char *what, const unsigned char *buf, size_t len,
                                     const gimg_read_opts *o)
{
    gimg_image whole;
    gimg_status want = gimg_decode_page(buf, len, o, &whole);
    CHECK(want != GIMG_OK, "%s: decoding took it", what);
    if (want == GIMG_OK) {
        gimg_image_free(&whole);
        return;
    }
    char message[512];
    snprintf(message, sizeof message, "%s", gimg_last_error());
    for (int rows = 1; rows <= 5; rows += 4) {
        gimg_band_reader *r;
        gimg_image header, band;
        int y0;
        gimg_status st = gimg_band_open(buf, len, 0, o, rows, &header, &r);
        CHECK(st || r, "%s: no row decoder", what);
        while (!st && r && !(st = gimg_band_next(r, &band, &y0)) && band.height > 0)
            ;
        CHECK(st == want, "%s: bands of %d rows: status %d, decoding's %d", what, rows, (int)st,
              (int)want);
        CHECK(!st || !strcmp(gimg_last_error(), message), "%s: bands of %d rows: '%s', "
              "decoding: '%s'", what, rows, gimg_last_error(), message);
        gimg_band_close(r);
        gimg_meta_free(header.meta);
    }
}

static void check_refused_alike(const char *what, const unsigned char *buf, size_t len)
{
    check_refused_alike_page(what, buf, len, NULL);
}

/* An image of the layout, filled from the seed (maxval: 0 for the full
 * range). 0 on failure. */
static int make_image(gimg_image *im, int w, int h, int c, gimg_sample s, unsigned maxval,
                      uint64_t seed)
{
    if (gimg_image_alloc(im, w, h, c, s))
        return 0;
    if (s == GIMG_F32)
        testimg_fill_random(im, seed);
    else
        testimg_fill_maxval(im, seed, maxval ? maxval : s == GIMG_U8 ? 255 : 65535);
    return 1;
}

/* im encoded as format f by libgimg's writer. */
static unsigned char *encoded(const gimg_image *im, gimg_format f, size_t *len)
{
    gimg_write_opts o;
    gimg_write_opts_init(&o);
    unsigned char *buf = NULL;
    if (gimg_encode(im, f, &o, &buf, len))
        return NULL;
    return buf;
}

/* The sizes every codec is tried at: 1x1, a row, a column, awkward. */
static const int k_sizes[][2] = {{1, 1}, {37, 1}, {1, 29}, {17, 9}, {61, 40}};

static void test_pnm_pam_pfm(void)
{
    static const struct {
        gimg_format f;
        int channels;
        gimg_sample sample;
        unsigned maxval;
    } k[] = {
        {GIMG_FMT_PNM, 1, GIMG_U8, 0},    {GIMG_FMT_PNM, 3, GIMG_U8, 0},
        {GIMG_FMT_PNM, 3, GIMG_U8, 100},  {GIMG_FMT_PNM, 1, GIMG_U16, 0},
        {GIMG_FMT_PNM, 3, GIMG_U16, 1023}, {GIMG_FMT_PAM, 2, GIMG_U8, 0},
        {GIMG_FMT_PAM, 4, GIMG_U16, 0},   {GIMG_FMT_PFM, 1, GIMG_F32, 0},
        {GIMG_FMT_PFM, 3, GIMG_F32, 0},
    };
    for (size_t i = 0; i < sizeof k / sizeof *k; i++)
        for (size_t z = 0; z < sizeof k_sizes / sizeof *k_sizes; z++) {
            gimg_image im;
            size_t len;
            char what[96];
            if (!make_image(&im, k_sizes[z][0], k_sizes[z][1], k[i].channels, k[i].sample,
                            k[i].maxval, 7 + i * 31 + z)) {
                CHECK(0, "out of memory");
                return;
            }
            im.maxval = k[i].maxval;
            unsigned char *buf = encoded(&im, k[i].f, &len);
            snprintf(what, sizeof what, "%s %dx%d c%d %d-bit maxval %u",
                     gimg_format_name(k[i].f), im.width, im.height, im.channels,
                     8 * (int)im.sample, k[i].maxval);
            CHECK(buf, "%s: encoding: %s", what, gimg_last_error());
            if (buf)
                check_bands(what, buf, len);
            free(buf);
            gimg_image_free(&im);
        }
}

/* Plain (ASCII) PNMs and raw bitmaps, written by hand. */
static void test_pnm_plain_and_bitmaps(void)
{
    static const char plain_gray[] = "P2\n# a comment\n3 4\n9\n0 1 2\n3 4 5\n6 7 8\n9 0 1\n";
    static const char plain_rgb[] = "P3 2 2 255 1 2 3 4 5 6\n7 8 9 10 11 12\n";
    static const char plain_bits[] = "P1\n5 3\n10101\n01010\n1 1 1 0 0\n";
    static const unsigned char raw_bits[] = "P4\n10 3\n\xA5\x40\x3C\x80\xFF\xC0";
    check_bands("P2", (const unsigned char *)plain_gray, sizeof plain_gray - 1);
    check_bands("P3", (const unsigned char *)plain_rgb, sizeof plain_rgb - 1);
    check_bands("P1", (const unsigned char *)plain_bits, sizeof plain_bits - 1);
    check_bands("P4", raw_bits, sizeof raw_bits - 1);
}

/* Files decoding refuses: cut short, samples past the maxval (in a later
 * row than the first, so that a band reader that checks too late or
 * names another sample is caught). */
static void test_pnm_refused(void)
{
    gimg_image im;
    size_t len;
    if (!make_image(&im, 19, 12, 3, GIMG_U8, 100, 5)) {
        CHECK(0, "out of memory");
        return;
    }
    im.maxval = 100;
    unsigned char *buf = encoded(&im, GIMG_FMT_PNM, &len);
    CHECK(buf, "encoding: %s", gimg_last_error());
    if (buf) {
        check_refused_alike("P6 cut in its last row", buf, len - 5);
        check_refused_alike("P6 cut in its header", buf, 6);
        /* Row 7 gets a sample of 150, row 9 one of 200. */
        const size_t raster = len - (size_t)19 * 3 * 12;
        buf[raster + (size_t)7 * 57 + 4] = 150;
        buf[raster + (size_t)9 * 57 + 10] = 200;
        check_refused_alike("P6 past its maxval", buf, len);
    }
    free(buf);
    gimg_image_free(&im);
    if (!make_image(&im, 7, 5, 1, GIMG_F32, 0, 9)) {
        CHECK(0, "out of memory");
        return;
    }
    buf = encoded(&im, GIMG_FMT_PFM, &len);
    if (buf)
        check_refused_alike("PFM cut short", buf, len - 1);
    free(buf);
    gimg_image_free(&im);
    static const char plain_bad[] = "P2\n3 3\n9\n0 1 2\n3 4 5\n6 7 12\n";
    check_refused_alike("P2 past its maxval", (const unsigned char *)plain_bad,
                        sizeof plain_bad - 1);
}

/* The default band: none below GIMG_BAND_MIN_PIXELS; --band-rows below
 * the height, else none; at least one row. */
static void test_band_rows(void)
{
    gimg_info small = {.width = 4096, .height = 4096, .channels = 3, .sample = GIMG_U8};
    gimg_info big = {.width = 16384, .height = 16384, .channels = 3, .sample = GIMG_U8};
    gimg_info wide = {.width = 1 << 24, .height = 8, .channels = 4, .sample = GIMG_F32};
    CHECK(gimg_band_rows(&small, 0, 0) == 0);
    CHECK(gimg_band_rows(&small, 100, 0) == 100);
    CHECK(gimg_band_rows(&small, 4096, 0) == 0);
    const int rows = gimg_band_rows(&big, 0, 0);
    const size_t band = gimg_band_bytes();
    CHECK(band >= GIMG_BAND_BYTES_MIN && band <= GIMG_BAND_BYTES_MAX, "%zu bytes", band);
    CHECK(rows >= 1 && (size_t)rows * 16384 * 3 <= band && (size_t)(rows + 1) * 16384 * 3 > band,
          "%d rows", rows);
    CHECK(gimg_band_rows(&wide, 0, 0) == 1, "%d", gimg_band_rows(&wide, 0, 0));

    /* The memory budget: a whole-image job over it is read in bands of at
     * most the budget / GIMG_BAND_SHARE, one at exactly the budget whole. */
    const uint64_t saved = gimg_max_memory(), budget = (uint64_t)8 << 20;
    gimg_set_max_memory(budget);
    const size_t share = (size_t)(budget / GIMG_BAND_SHARE), row = 4096 * 3;
    const int fit = gimg_band_rows(&small, 0, budget + 1);
    CHECK(fit >= 1 && (size_t)fit * row <= share && (size_t)(fit + 1) * row > share, "%d rows",
          fit);
    CHECK(gimg_band_rows(&small, 0, budget) == 0);
    CHECK(gimg_band_rows(&small, 7, budget + 1) == 7); /* --band-rows wins */
    const int big_fit = gimg_band_rows(&big, 0, 0);
    CHECK(big_fit >= 1 && (size_t)big_fit * 16384 * 3 <= share, "%d rows", big_fit);
    gimg_set_max_memory(saved);
}

/* ------------------------------------------------------------ writing */

/* The file gimg_band_writer writes for im, handed over in bands of `rows`
 * rows, read back (malloc'd; NULL when the writer declined or failed,
 * *declined saying which). */
static unsigned char *written_in_bands(const gimg_image *im, const char *path,
                                       const gimg_write_opts *o, int rows, size_t *len,
                                       int *declined)
{
    gimg_band_writer *w;
    *declined = 0;
    gimg_status st = gimg_band_writer_open(path, im, 1, o, &w);
    if (st || !w) {
        *declined = !st;
        return NULL;
    }
    for (int y = 0; !st && y < im->height; y += rows) {
        gimg_image band = *im;
        band.data = (unsigned char *)gimg_row(im, y);
        band.height = im->height - y < rows ? im->height - y : rows;
        band.meta = NULL;
        st = gimg_band_writer_rows(w, &band);
    }
    if (gimg_band_writer_close(w, !st) || st)
        return NULL;
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    if (f && !fseek(f, 0, SEEK_END) && (*len = (size_t)ftell(f)) > 0 && !fseek(f, 0, SEEK_SET) &&
        (buf = malloc(*len)) && fread(buf, 1, *len, f) != *len) {
        free(buf);
        buf = NULL;
    }
    if (f)
        fclose(f);
    remove(path);
    return buf;
}

/* im written band by band as format f (the extension `ext`) is the file
 * gimg_encode makes of it whole, byte for byte, for every band height
 * given (1, awkward, height - 1, height). */
static void check_written(const char *what, const gimg_image *im, const char *ext,
                          gimg_format f, const gimg_write_opts *o, const char *dir)
{
    size_t want_len, len = 0;
    unsigned char *want = NULL;
    gimg_status st = gimg_encode(im, f, o, &want, &want_len);
    CHECK(st == GIMG_OK, "%s: encoding: %s", what, gimg_last_error());
    char path[512];
    snprintf(path, sizeof path, "%s/out.%s", dir, ext);
    const int heights[] = {1, 7, 300, im->height > 1 ? im->height - 1 : 1, im->height};
    for (size_t k = 0; !st && k < sizeof heights / sizeof *heights; k++) {
        if (heights[k] == 1 && im->height > 400)
            continue;   /* a band a row: the small images */
        int declined;
        unsigned char *got = written_in_bands(im, path, o, heights[k], &len, &declined);
        CHECK(got, "%s, bands of %d rows: %s", what, heights[k],
              declined ? "the writer declined it" : gimg_last_error());
        CHECK(!got || (len == want_len && !memcmp(got, want, len)),
              "%s, bands of %d rows: %zu bytes, whole %zu, %s", what, heights[k], len,
              want_len, got && len == want_len ? "differing" : "sizes differ");
        free(got);
        if (!got)
            break;
    }
    free(want);
}

/* The row writers (codec.h's wrows_*, through gimg_band_writer): PNG at
 * every layout and level, with an sBIT and with metadata, over several of
 * its 2 MiB segments (noise, which the entropy coder takes, and flat
 * stretches, which LZ takes); PNM and PAM of 8 and 16 bits. What the
 * writer declines: PFM, a float PNG, alpha in a PNM, a maxval a PNG
 * rescales, standard output, a PNG whose metadata is not complete. */
static void test_written(void)
{
    char dir[] = "/tmp/unit_band.XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    gimg_write_opts o;
    gimg_write_opts_init(&o);
    static const struct {
        gimg_sample sample;
        unsigned maxval;
    } k[] = {{GIMG_U8, 0}, {GIMG_U8, 31}, {GIMG_U16, 0}, {GIMG_U16, 4095}};
    char what[128];
    for (size_t i = 0; i < sizeof k / sizeof *k; i++)
        for (int c = 1; c <= 4; c++)
            for (size_t z = 0; z < sizeof k_sizes / sizeof *k_sizes; z++) {
                gimg_image im;
                if (!make_image(&im, k_sizes[z][0], k_sizes[z][1], c, k[i].sample, k[i].maxval,
                                7 + i * 13 + (size_t)c + z)) {
                    CHECK(0, "out of memory");
                    break;
                }
                im.maxval = k[i].maxval;
                snprintf(what, sizeof what, "PNG %dx%d c%d %d-bit maxval %u", im.width,
                         im.height, c, 8 * (int)im.sample, im.maxval);
                check_written(what, &im, "png", GIMG_FMT_PNG, &o, dir);
                snprintf(what, sizeof what, "PAM %dx%d c%d %d-bit maxval %u", im.width,
                         im.height, c, 8 * (int)im.sample, im.maxval);
                check_written(what, &im, "pam", GIMG_FMT_PAM, &o, dir);
                if (c % 2) {
                    snprintf(what, sizeof what, "PNM %dx%d c%d %d-bit maxval %u", im.width,
                             im.height, c, 8 * (int)im.sample, im.maxval);
                    check_written(what, &im, "pnm", GIMG_FMT_PNM, &o, dir);
                }
                gimg_image_free(&im);
            }

    /* 1500 x 1500 RGB: 6.75 MB of filtered rows, four segments; the top
     * half noise, the bottom half flat bars, at levels 0, 1, 6 and 9;
     * RGBA 16-bit with metadata. */
    gimg_image big;
    if (make_image(&big, 1500, 1500, 3, GIMG_U8, 0, 99)) {
        for (int y = 750; y < big.height; y++)
            memset(gimg_row(&big, y), (y / 40) * 17 & 0xff, (size_t)big.width * 3);
        for (int level = 0; level <= 9; level += level < 6 ? (level ? 5 : 1) : 3) {
            o.png_level = level;
            snprintf(what, sizeof what, "PNG 1500x1500 RGB, level %d", level);
            check_written(what, &big, "png", GIMG_FMT_PNG, &o, dir);
        }
        o.png_level = GIMG_DEFAULT_PNG_LEVEL;
        gimg_image_free(&big);
    } else {
        CHECK(0, "out of memory");
    }
    if (make_image(&big, 700, 1100, 4, GIMG_U16, 0, 5) &&
        !gimg_meta_add_text(&big.meta, "Title", "bands", 5, NULL, NULL, 0, 0) &&
        !gimg_meta_add_icc(&big.meta, (const unsigned char *)"profile bytes", 13)) {
        big.meta->x_dpi = big.meta->y_dpi = 300;
        check_written("PNG 700x1100 RGBA 16-bit with metadata", &big, "png", GIMG_FMT_PNG, &o,
                      dir);
        o.strip = 1;
        check_written("PNG 700x1100 RGBA 16-bit, --strip", &big, "png", GIMG_FMT_PNG, &o, dir);
        o.strip = 0;
    } else {
        CHECK(0, "out of memory");
    }
    gimg_image_free(&big);

    /* Declined: the caller writes these whole. */
    gimg_image im;
    char path[512];
    static const struct {
        const char *ext;
        int channels;
        gimg_sample sample;
        unsigned maxval;
        int meta_complete;
    } no[] = {
        {"pfm", 3, GIMG_F32, 0, 1}, {"png", 3, GIMG_F32, 0, 1}, {"ppm", 4, GIMG_U8, 0, 1},
        {"png", 3, GIMG_U8, 200, 1}, {"png", 3, GIMG_U8, 0, 0},  {"tif", 3, GIMG_U8, 0, 1},
    };
    for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
        if (!make_image(&im, 9, 5, no[i].channels, no[i].sample, no[i].maxval, 3)) {
            CHECK(0, "out of memory");
            break;
        }
        im.maxval = no[i].maxval;
        gimg_band_writer *w = NULL;
        snprintf(path, sizeof path, "%s/out.%s", dir, no[i].ext);
        gimg_status st = gimg_band_writer_open(path, &im, no[i].meta_complete, &o, &w);
        CHECK(st == GIMG_OK && !w, "%s, %d channels, sample %d, maxval %u: %s", no[i].ext,
              no[i].channels, (int)no[i].sample, no[i].maxval, w ? "taken" : gimg_last_error());
        gimg_band_writer_close(w, 0);
        gimg_image_free(&im);
    }
    gimg_band_writer *w = NULL;
    if (make_image(&im, 9, 5, 3, GIMG_U8, 0, 3)) {
        CHECK(gimg_band_writer_open("-", &im, 1, &o, &w) == GIMG_OK && !w, "standard output");
        gimg_band_writer_close(w, 0);
        gimg_image_free(&im);
    }
    rmdir(dir);
}

/* PNG: the tests of lib/codec_png.c's row decoder go here. */

/* libgimg's writer: gray, gray+alpha, RGB and RGBA of 8 and 16 bits, in
 * the full range and with an sBIT (maxvals 2^b - 1: 31 and 1 in 8 bits,
 * 1023 and 255 in 16), at every size. */
static void test_png_written(void)
{
    static const struct {
        gimg_sample sample;
        unsigned maxval;
    } k[] = {
        {GIMG_U8, 0},  {GIMG_U8, 31},    {GIMG_U8, 1},
        {GIMG_U16, 0}, {GIMG_U16, 1023}, {GIMG_U16, 255},
    };
    for (size_t i = 0; i < sizeof k / sizeof *k; i++)
        for (int c = 1; c <= 4; c++)
            for (size_t z = 0; z < sizeof k_sizes / sizeof *k_sizes; z++) {
                gimg_image im;
                size_t len;
                char what[96];
                if (!make_image(&im, k_sizes[z][0], k_sizes[z][1], c, k[i].sample, k[i].maxval,
                                101 + i * 31 + (size_t)c * 7 + z)) {
                    CHECK(0, "out of memory");
                    return;
                }
                im.maxval = k[i].maxval;
                unsigned char *buf = encoded(&im, GIMG_FMT_PNG, &len);
                snprintf(what, sizeof what, "PNG %dx%d c%d %d-bit maxval %u", im.width,
                         im.height, c, 8 * (int)im.sample, k[i].maxval);
                CHECK(buf, "%s: encoding: %s", what, gimg_last_error());
                if (buf)
                    check_bands(what, buf, len);
                free(buf);
                gimg_image_free(&im);
            }
}

/* Made by the tests' own writer (testpng.h), what libgimg's never writes:
 * gray of 1, 2, 4, 8 and 16 bits, gray and RGB with tRNS, palettes of
 * every depth with and without tRNS, all five row filters, the zlib
 * stream over several IDAT chunks, a row's unused bits zeros or ones, at
 * every size. */
static void test_png_by_hand(void)
{
    static const struct {
        int color, depth;
    } k[] = {
        {GRAY, 1},    {GRAY, 2},    {GRAY, 4},    {GRAY, 8},    {GRAY, 16},
        {GRAY_ALPHA, 8}, {GRAY_ALPHA, 16}, {RGB, 8}, {RGB, 16}, {RGBA, 8}, {RGBA, 16},
        {PALETTE, 1}, {PALETTE, 2}, {PALETTE, 4}, {PALETTE, 8},
    };
    for (size_t i = 0; i < sizeof k / sizeof *k; i++) {
        const int may_trns = k[i].color == GRAY || k[i].color == RGB || k[i].color == PALETTE;
        for (int trns = 0; trns <= may_trns; trns++)
            for (size_t z = 0; z < sizeof k_sizes / sizeof *k_sizes; z++) {
                png_spec s;
                fill_spec(&s, k_sizes[z][0], k_sizes[z][1], k[i].color, k[i].depth, 0, trns,
                          300 + i * 17 + (size_t)trns * 5 + z);
                s.pad_ones = (int)(z & 1);
                size_t len;
                unsigned char *buf = make_png(&s, &len);
                char what[96];
                snprintf(what, sizeof what, "PNG %dx%d colour type %d, %d-bit%s", s.w, s.h,
                         k[i].color, k[i].depth, trns ? ", tRNS" : "");
                check_bands(what, buf, len);
                free(buf);
                free(s.samples);
            }
    }
}

/* sBIT, by hand: honoured where every channel agrees, below the bit depth
 * of an 8- or 16-bit image (the samples shifted, the maxval 2^b - 1, a
 * tRNS's alpha 0 or that maxval), ignored elsewhere (channels that
 * disagree, palettes, gray below 8 bits). */
static void test_png_sbit(void)
{
    static const struct {
        int color, depth, trns;
        unsigned char bits[4];
        unsigned maxval;   /* what decoding gives */
    } k[] = {
        {GRAY, 16, 0, {12}, 4095},     {GRAY, 8, 1, {5}, 31},
        {GRAY, 16, 1, {9}, 511},       {GRAY_ALPHA, 16, 0, {10, 10}, 1023},
        {GRAY_ALPHA, 8, 0, {4, 8}, 0}, {RGB, 16, 1, {12, 12, 12}, 4095},
        {RGB, 8, 0, {5, 6, 5}, 0},     {RGBA, 8, 0, {7, 7, 7, 7}, 127},
        {PALETTE, 8, 1, {5, 5, 5}, 0}, {GRAY, 4, 0, {3}, 0},
    };
    for (size_t i = 0; i < sizeof k / sizeof *k; i++) {
        png_spec s;
        fill_spec(&s, 23, 13, k[i].color, k[i].depth, 0, k[i].trns, 500 + i);
        bytes sbit = {0};
        put_chunk(&sbit, "sBIT", k[i].bits,
                  k[i].color == PALETTE ? 3 : (size_t)stored_channels(k[i].color), 0);
        s.after_ihdr = &sbit;
        size_t len;
        unsigned char *buf = make_png(&s, &len);
        char what[96];
        snprintf(what, sizeof what, "PNG colour type %d, %d-bit%s, sBIT %d", k[i].color,
                 k[i].depth, k[i].trns ? ", tRNS" : "", k[i].bits[0]);
        gimg_image whole;
        if (gimg_decode_page(buf, len, NULL, &whole) == GIMG_OK) {
            CHECK(whole.maxval == k[i].maxval, "%s: maxval %u, want %u", what, whole.maxval,
                  k[i].maxval);
            gimg_image_free(&whole);
        }
        check_bands(what, buf, len);
        free(buf);
        free(sbit.p);
        free(s.samples);
    }
}

/* Interlaced files have no row decoder (their last pass completes the
 * first row): the caller is told to decode them whole. */
static void test_png_interlaced(void)
{
    static const struct {
        int color, depth, trns;
    } k[] = {{GRAY, 1, 0}, {GRAY, 16, 1}, {RGB, 8, 1}, {PALETTE, 4, 1}, {RGBA, 16, 0}};
    for (size_t i = 0; i < sizeof k / sizeof *k; i++) {
        png_spec s;
        fill_spec(&s, 19, 11, k[i].color, k[i].depth, 1, k[i].trns, 700 + i);
        size_t len;
        unsigned char *buf = make_png(&s, &len);
        free(s.samples);
        gimg_band_reader *r;
        gimg_image header, whole;
        gimg_status st = gimg_band_open(buf, len, 0, NULL, 4, &header, &r);
        CHECK(st == GIMG_OK && !r && !header.width && !header.meta,
              "interlaced colour type %d: status %d (%s), %s", k[i].color, (int)st,
              st ? gimg_last_error() : "", r ? "a row decoder" : "no row decoder");
        gimg_band_close(r);
        CHECK(gimg_decode_page(buf, len, NULL, &whole) == GIMG_OK,
              "interlaced colour type %d: decoding: %s", k[i].color, gimg_last_error());
        gimg_image_free(&whole);
        free(buf);
    }
}

static uint32_t png_be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* A copy of buf[0, n) in a block of exactly n bytes, so that a read past
 * it is caught (valgrind, ASan). */
static unsigned char *png_prefix(const unsigned char *buf, size_t n)
{
    unsigned char *p = malloc(n ? n : 1);
    if (p)
        memcpy(p, buf, n);
    return p;
}

/* Rewrites the CRC of the chunk at offset `at`, its data changed. */
static void png_fix_crc(unsigned char *buf, size_t at)
{
    const uint32_t n = png_be32(buf + at);
    const uint32_t crc = libdeflate_crc32(0, buf + at + 4, (size_t)n + 4);
    unsigned char *p = buf + at + 8 + n;
    p[0] = (unsigned char)(crc >> 24), p[1] = (unsigned char)(crc >> 16);
    p[2] = (unsigned char)(crc >> 8), p[3] = (unsigned char)crc;
}

/* Every cut of a file from its signature on is refused alike: in its
 * header, before, in and after its image data (IEND missing, or cut in
 * its CRC), with or without the layout's expansion; data after IEND is
 * ignored alike. */
static void test_png_cut(void)
{
    static const struct {
        int color, depth, trns;
    } k[] = {{RGBA, 16, 0}, {PALETTE, 4, 1}, {GRAY, 2, 1}};
    for (size_t i = 0; i < sizeof k / sizeof *k; i++) {
        png_spec s;
        fill_spec(&s, 17, 9, k[i].color, k[i].depth, 0, k[i].trns, 61 + i);
        size_t len;
        unsigned char *buf = make_png(&s, &len);
        free(s.samples);
        for (size_t n = 8; n < len; n++) {
            unsigned char *cut = png_prefix(buf, n);
            char what[96];
            snprintf(what, sizeof what, "PNG colour type %d cut to %zu of %zu bytes",
                     k[i].color, n, len);
            if (cut)
                check_refused_alike(what, cut, n);
            free(cut);
        }
        bytes more = {0};
        put(&more, buf, len);
        put(&more, "junk after IEND", 15);
        check_bands("PNG with data after IEND", more.p, more.len);
        free(more.p);
        free(buf);
    }
}

/* A critical chunk's CRC that does not match is refused alike, wherever it
 * is (the first IDAT's, the last's, IEND's: before any band, as decoding
 * checks the whole file first); an ancillary chunk's is dropped alike (a
 * tRNS: the image read without its transparency). */
static void test_png_crc(void)
{
    png_spec s;
    fill_spec(&s, 23, 17, PALETTE, 8, 0, 1, 41);
    size_t len;
    unsigned char *buf = make_png(&s, &len);
    free(s.samples);
    static const struct {
        const char *type;
        int last, in_crc;
    } spots[] = {{"PLTE", 0, 0}, {"IDAT", 0, 0}, {"IDAT", 1, 0},
                 {"IDAT", 1, 1}, {"IEND", 0, 1}, {"tRNS", 0, 0}};
    for (size_t k = 0; k < sizeof spots / sizeof *spots; k++) {
        const size_t at = find_chunk(buf, len, spots[k].type, spots[k].last);
        CHECK(at, "no %s chunk", spots[k].type);
        if (!at)
            continue;
        const uint32_t n = png_be32(buf + at);
        const size_t byte = at + 8 + (spots[k].in_crc ? n : n / 2);
        char what[96];
        snprintf(what, sizeof what, "PNG with a bit flipped in the %s%s %s",
                 spots[k].last ? "last " : "", spots[k].type, spots[k].in_crc ? "CRC" : "data");
        buf[byte] ^= 0x10;
        if (spots[k].type[0] <= 'Z')
            check_refused_alike(what, buf, len);
        else
            check_bands(what, buf, len);
        buf[byte] ^= 0x10;
    }
    free(buf);
}

/* A byte of the compressed image data changed, its chunk's CRC made right,
 * at every fifth byte: refused alike (a broken stream, a bad row filter,
 * data short of the last row) or, where the stream still inflates, read
 * alike. */
static void test_png_corrupt_data(void)
{
    png_spec s;
    fill_spec(&s, 29, 13, RGB, 8, 0, 1, 77);
    size_t len;
    unsigned char *buf = make_png(&s, &len);
    free(s.samples);
    int refused = 0;
    for (size_t at = 8; at + 12 <= len; at += 12 + (size_t)png_be32(buf + at)) {
        const uint32_t n = png_be32(buf + at);
        if (memcmp(buf + at + 4, "IDAT", 4) != 0)
            continue;
        for (size_t i = 0; i < n; i += 5) {
            char what[96];
            snprintf(what, sizeof what, "PNG with IDAT byte %zu changed", at + 8 + i);
            buf[at + 8 + i] ^= 0x24;
            png_fix_crc(buf, at);
            gimg_image whole;
            if (gimg_decode_page(buf, len, NULL, &whole) == GIMG_OK) {
                gimg_image_free(&whole);
                check_bands(what, buf, len);
            } else {
                refused++;
                check_refused_alike(what, buf, len);
            }
            buf[at + 8 + i] ^= 0x24;
            png_fix_crc(buf, at);
        }
    }
    CHECK(refused > 0, "no changed byte was refused");
    free(buf);
}

/* Rows by hand, 8-bit gray: a filter type past 4 in row 5; the data of
 * fewer rows than IHDR says; a tiny file claiming 4000x4000 pixels
 * (refused before the pixels' allocation); an image over --max-pixels. */
static void test_png_bad_data(void)
{
    enum { W = 7, H = 9 };
    unsigned char raw[H * (W + 1)], z[512];
    for (size_t i = 0; i < sizeof raw; i++)
        raw[i] = i % (W + 1) ? (unsigned char)(i * 37) : 0;
    raw[5 * (W + 1)] = 7;
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(6);
    const size_t zn = c ? libdeflate_zlib_compress(c, raw, sizeof raw, z, sizeof z) : 0;
    libdeflate_free_compressor(c);
    CHECK(zn > 0, "compressing");
    bytes b = {0};
    put(&b, "\x89PNG\r\n\x1a\n", 8);
    const unsigned char ihdr[13] = {0, 0, 0, W, 0, 0, 0, H, 8, 0, 0, 0, 0};
    put_chunk(&b, "IHDR", ihdr, 13, 0);
    put_chunk(&b, "IDAT", z, zn, 0);
    put_chunk(&b, "IEND", NULL, 0, 0);
    check_refused_alike("PNG with filter type 7 in row 5", b.p, b.len);
    free(b.p);

    png_spec s;
    fill_spec(&s, 11, 6, GRAY, 8, 0, 0, 83);
    size_t len;
    unsigned char *buf = make_png(&s, &len);
    free(s.samples);
    buf[23] = 9; /* IHDR's height: 9 rows, the data of 6 */
    png_fix_crc(buf, 8);
    check_refused_alike("PNG with 6 rows' data for 9", buf, len);
    buf[18] = buf[22] = 0x0f, buf[19] = buf[23] = 0xa0; /* 4000x4000 */
    png_fix_crc(buf, 8);
    check_refused_alike("PNG of 4000x4000 pixels in a few bytes", buf, len);
    free(buf);

    fill_spec(&s, 17, 9, RGB, 8, 0, 0, 85);
    buf = make_png(&s, &len);
    free(s.samples);
    const uint64_t max = gimg_max_pixels();
    gimg_set_max_pixels(100);
    check_refused_alike("PNG over --max-pixels", buf, len);
    gimg_set_max_pixels(max);
    free(buf);
}

/* Indices past the palette: decoding names the last in the image, once it
 * has read the file whole; so do the bands, whichever meets the first; a
 * file also cut short in its image data, or before IEND, is refused as
 * cut short. */
static void test_png_palette_index(void)
{
    for (int depth = 4; depth <= 8; depth *= 2) {
        png_spec s;
        fill_spec(&s, 13, 11, PALETTE, depth, 0, depth == 8, 900 + (uint64_t)depth);
        s.entries = 5;
        s.alphas = s.alphas < s.entries ? s.alphas : s.entries;
        for (int i = 0; i < s.w * s.h; i++)
            s.samples[i] = (uint16_t)(s.samples[i] % s.entries);
        s.samples[2 * 13 + 3] = 9;
        s.samples[7 * 13 + 1] = 5;
        s.samples[7 * 13 + 9] = 6; /* the last: decoding names it */
        size_t len;
        unsigned char *buf = make_png(&s, &len);
        char what[96];
        snprintf(what, sizeof what, "%d-bit palette, indices past it in rows 2 and 7", depth);
        gimg_image whole;
        CHECK(gimg_decode_page(buf, len, NULL, &whole) == GIMG_E_FORMAT &&
                  contains(gimg_last_error(), "pixel 9, 7"),
              "%s: decoding: %s", what, gimg_last_error());
        check_refused_alike(what, buf, len);
        const size_t last_idat = find_chunk(buf, len, "IDAT", 1);
        const size_t cuts[2] = {last_idat + 8 + png_be32(buf + last_idat) / 2, len - 12};
        const char *const why[2] = {"truncated PNG file (cut short in the image data)",
                                    "truncated PNG file (cut short after the image data"};
        for (int k = 0; k < 2; k++) {
            unsigned char *cut = png_prefix(buf, cuts[k]);
            snprintf(what, sizeof what, "%d-bit palette, indices past it, cut to %zu bytes",
                     depth, cuts[k]);
            CHECK(gimg_decode_page(cut, cuts[k], NULL, &whole) == GIMG_E_FORMAT &&
                      contains(gimg_last_error(), why[k]),
                  "%s: decoding: %s", what, gimg_last_error());
            check_refused_alike(what, cut, cuts[k]);
            free(cut);
        }
        free(buf);
        /* One index past it, in the first pixel, then in the last. */
        s.samples[2 * 13 + 3] = s.samples[7 * 13 + 1] = s.samples[7 * 13 + 9] = 0;
        for (int k = 0; k < 2; k++) {
            const int at = k ? s.w * s.h - 1 : 0;
            s.samples[at] = 7;
            buf = make_png(&s, &len);
            snprintf(what, sizeof what, "%d-bit palette, index past it at pixel %d", depth, at);
            check_refused_alike(what, buf, len);
            free(buf);
            s.samples[at] = 0;
        }
        free(s.samples);
    }
}

/* In a child process, buf read whole (rows 0) or in bands of `rows`: how
 * much the child's peak memory grew (KiB); -1 when it failed. */
static long png_peak_growth_kib(const unsigned char *buf, size_t len, int rows)
{
    int fd[2];
    long grew = -1;
    if (pipe(fd) != 0)
        return -1;
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        struct rusage before, after;
        getrusage(RUSAGE_SELF, &before);
        gimg_status st;
        if (rows == 0) {
            gimg_image whole;
            st = gimg_decode_page(buf, len, NULL, &whole);
            gimg_image_free(&whole);
        } else {
            gimg_band_reader *r;
            gimg_image header, band;
            int y0;
            st = gimg_band_open(buf, len, 0, NULL, rows, &header, &r);
            if (!st && !r)
                st = GIMG_E_FORMAT;
            while (!st && !(st = gimg_band_next(r, &band, &y0)) && band.height > 0)
                ;
            gimg_band_close(r);
        }
        getrusage(RUSAGE_SELF, &after);
        grew = st ? -1 : after.ru_maxrss - before.ru_maxrss;
        (void)!write(fd[1], &grew, sizeof grew);
        _exit(0);
    }
    close(fd[1]);
    if (pid < 0 || read(fd[0], &grew, sizeof grew) != (ssize_t)sizeof grew)
        grew = -1;
    close(fd[0]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    return grew;
}

/* A band's memory, not the image's: a 2048x2048 RGBA 16-bit PNG (32 MiB
 * decoded) read in bands of 16 rows (256 KiB) raises the peak by a few
 * MiB at most, decoding it whole by the 32. */
static void test_png_memory(void)
{
    if (under_valgrind())
        SKIP("peak memory under valgrind is valgrind's");
#ifdef UNDER_SANITIZER
    SKIP("peak memory under a sanitizer is its allocator's");
#endif
    gimg_image im;
    if (gimg_image_alloc(&im, 2048, 2048, 4, GIMG_U16)) {
        CHECK(0, "out of memory");
        return;
    }
    for (int y = 0; y < im.height; y++) {
        uint16_t *p = (uint16_t *)gimg_row(&im, y);
        for (int i = 0; i < im.width * 4; i++)
            p[i] = (uint16_t)(y * 29 + i * 3);
    }
    size_t len;
    unsigned char *buf = encoded(&im, GIMG_FMT_PNG, &len);
    gimg_image_free(&im);
    CHECK(buf, "encoding: %s", gimg_last_error());
    if (!buf)
        return;
    const long whole = png_peak_growth_kib(buf, len, 0);
    const long bands = png_peak_growth_kib(buf, len, 16);
    CHECK(whole >= 30 * 1024, "decoding whole raised the peak by %ld KiB", whole);
    CHECK(bands >= 0 && bands < 4 * 1024, "bands of 16 rows raised the peak by %ld KiB", bands);
    free(buf);
}

/* A PNG's metadata, before its image data (written by libgimg) and after
 * it (a tEXt spliced in before IEND): the band reader gives it with the
 * last band, as decoding gives it. */
static void test_png_meta(void)
{
    gimg_image im;
    if (!make_image(&im, 31, 17, 3, GIMG_U8, 0, 4) ||
        gimg_meta_add_text(&im.meta, "Title", "bands", 5, NULL, NULL, 0, 0)) {
        CHECK(0, "out of memory");
        return;
    }
    im.meta->x_dpi = im.meta->y_dpi = 300;
    size_t len;
    unsigned char *png = encoded(&im, GIMG_FMT_PNG, &len);
    gimg_image_free(&im);
    CHECK(png, "encoding: %s", gimg_last_error());
    if (!png)
        return;
    const size_t iend = find_chunk(png, len, "IEND", 1);
    bytes b = {0};
    put(&b, png, iend);
    static const char comment[] = "Comment\0after the pixels";
    put_chunk(&b, "tEXt", comment, sizeof comment - 1, 0);
    put(&b, png + iend, len - iend);
    free(png);
    check_bands("PNG with text before and after IDAT", b.p, b.len);
    gimg_band_reader *r;
    gimg_image header, band;
    int y0;
    gimg_status st = gimg_band_open(b.p, b.len, 0, NULL, 5, &header, &r);
    while (!st && r && !(st = gimg_band_next(r, &band, &y0)) && band.height)
        ;
    gimg_meta *m = r ? gimg_band_take_meta(r) : NULL;
    CHECK(!st && m && m->n_texts == 2 && m->x_dpi == 300 &&
              !strcmp(m->texts[1].keyword, "Comment"),
          "texts %d, dpi %g", m ? m->n_texts : -1, m ? m->x_dpi : 0);
    gimg_meta_free(m);
    gimg_band_close(r);
    free(b.p);
}

/* TIFF: the tests of lib/codec_tiff.c's row decoder go here. */

/* im as a TIFF by libgimg's writer, with compression c. */
static unsigned char *tiff_encoded(const gimg_image *im, gimg_tiff_compression c, size_t *len)
{
    gimg_write_opts o;
    gimg_write_opts_init(&o);
    o.tiff_compression = c;
    unsigned char *buf = NULL;
    return gimg_encode(im, GIMG_FMT_TIFF, &o, &buf, len) ? NULL : buf;
}

/* How libtiff stores an image here, for the layouts libgimg's writer does
 * not make. The samples are im's (a palette image's: indices into
 * colormap), in host order, b-bit ones packed most significant bit first. */
typedef struct {
    uint16_t bits;               /* 0: im's sample size */
    uint16_t photometric;        /* 0: MINISBLACK for 1-2 channels, RGB for 3-4 */
    uint16_t compression;        /* 0: none */
    uint16_t predictor;          /* 0: none */
    int separate;                /* planar configuration separate */
    uint32_t rows_per_strip;     /* 0: one strip */
    uint32_t tile_w, tile_h;     /* > 0: tiled */
    int associated;              /* the alpha (2 and 4 channels) is premultiplied */
    int dropped;                 /* one more extra sample, unspecified, which decoding drops */
    const uint16_t *colormap;    /* palette: 3 * 2^bits entries, r..., g..., b... */
    int jpeg_ycbcr;              /* JPEG-compressed YCbCr (libtiff converts RGB) */
} tiff_spec;

/* Sample s of pixel (x, y) into sample i of a zeroed row. Past im's
 * channels (the dropped extra sample): a pattern. */
static void put_tiff_sample(unsigned char *row, size_t i, unsigned bits, const gimg_image *im,
                            uint32_t x, uint32_t y, int s)
{
    const unsigned char *px = gimg_row(im, (int)y) + (size_t)x * gimg_pixel_bytes(im);
    if (bits == 8u * (unsigned)im->sample) {
        if (s < im->channels)
            memcpy(row + i * im->sample, px + (size_t)s * im->sample, im->sample);
        else
            memset(row + i * im->sample, 0x3A, im->sample);
        return;
    }
    const unsigned v = s >= im->channels ? (x + y) & ((1u << bits) - 1)
                       : im->sample == GIMG_U16 ? ((const uint16_t *)px)[s] : px[s];
    for (unsigned b = 0; b < bits; b++)
        if (v >> (bits - 1 - b) & 1)
            row[(i * bits + b) >> 3] |= (unsigned char)(0x80 >> ((i * bits + b) & 7));
}

/* Writes im as one page of tif, stored as t asks; 1 on success. */
static int write_tiff_page(TIFF *tif, const gimg_image *im, const tiff_spec *t)
{
    const uint32_t w = (uint32_t)im->width, h = (uint32_t)im->height;
    const int spp = im->channels + t->dropped;
    const unsigned bits = t->bits ? t->bits : 8u * (unsigned)im->sample;
    const int planes = t->separate ? spp : 1, per = t->separate ? 1 : spp;
    const int tiled = t->tile_w > 0;
    const uint32_t cw = tiled ? t->tile_w : w;
    const uint32_t ch = tiled ? t->tile_h : t->rows_per_strip ? t->rows_per_strip : h;
    uint16_t extra[2] = {t->associated ? EXTRASAMPLE_ASSOCALPHA : EXTRASAMPLE_UNASSALPHA,
                         EXTRASAMPLE_UNSPECIFIED};
    const int alpha = !t->colormap && !t->jpeg_ycbcr && im->channels % 2 == 0;
    const uint16_t photometric = t->photometric ? t->photometric
                                 : im->channels >= 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK;
    int ok = TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, w) && TIFFSetField(tif, TIFFTAG_IMAGELENGTH, h) &&
             TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, (uint16_t)bits) &&
             TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, (uint16_t)spp) &&
             TIFFSetField(tif, TIFFTAG_SAMPLEFORMAT,
                          im->sample == GIMG_F32 ? SAMPLEFORMAT_IEEEFP : SAMPLEFORMAT_UINT) &&
             TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, photometric) &&
             TIFFSetField(tif, TIFFTAG_PLANARCONFIG,
                          t->separate ? PLANARCONFIG_SEPARATE : PLANARCONFIG_CONTIG) &&
             TIFFSetField(tif, TIFFTAG_COMPRESSION,
                          t->compression ? t->compression : COMPRESSION_NONE) &&
             (!t->predictor || TIFFSetField(tif, TIFFTAG_PREDICTOR, t->predictor)) &&
             (alpha + t->dropped == 0 ||
              TIFFSetField(tif, TIFFTAG_EXTRASAMPLES, (uint16_t)(alpha + t->dropped),
                           extra + !alpha)) &&
             (!t->colormap || TIFFSetField(tif, TIFFTAG_COLORMAP, t->colormap,
                                           t->colormap + ((size_t)1 << bits),
                                           t->colormap + ((size_t)2 << bits))) &&
             (tiled ? TIFFSetField(tif, TIFFTAG_TILEWIDTH, cw) &&
                          TIFFSetField(tif, TIFFTAG_TILELENGTH, ch)
                    : TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, ch));
    if (ok && t->jpeg_ycbcr)
        ok = TIFFSetField(tif, TIFFTAG_YCBCRSUBSAMPLING, 2, 2) &&
             TIFFSetField(tif, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB);
    const size_t row_bytes = ((size_t)cw * (size_t)per * bits + 7) / 8;
    unsigned char *chunk = ok ? malloc(row_bytes * ch) : NULL;
    ok = chunk != NULL;
    uint32_t n = 0;   /* the chunk's number */
    for (int p = 0; ok && p < planes; p++)
        for (uint32_t y0 = 0; ok && y0 < h; y0 += ch)
            for (uint32_t x0 = 0; ok && x0 < w; x0 += cw, n++) {
                const uint32_t rows = tiled || h - y0 > ch ? ch : h - y0;
                memset(chunk, 0, row_bytes * ch);
                for (uint32_t y = 0; y < rows && y0 + y < h; y++)
                    for (uint32_t x = 0; x < cw && x0 + x < w; x++)
                        for (int s = 0; s < per; s++)
                            put_tiff_sample(chunk + y * row_bytes, (size_t)x * per + s, bits, im,
                                            x0 + x, y0 + y, t->separate ? p : s);
                tmsize_t size = (tmsize_t)(row_bytes * rows);
                ok = (tiled ? TIFFWriteEncodedTile(tif, n, chunk, size)
                            : TIFFWriteEncodedStrip(tif, n, chunk, size)) >= 0;
            }
    free(chunk);
    return ok && TIFFWriteDirectory(tif);
}

/* The images, page after page, each stored as its spec asks, by libtiff
 * (through a temporary file); NULL on failure. */
static unsigned char *libtiff_pages(const gimg_image *const *ims, const tiff_spec *specs, int n,
                                    size_t *len)
{
    char path[] = "/tmp/unit_band_tiff.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return NULL;
    TIFF *tif = TIFFFdOpen(fd, path, "w");
    int ok = tif != NULL;
    for (int i = 0; ok && i < n; i++)
        ok = write_tiff_page(tif, ims[i], &specs[i]);
    if (tif)
        TIFFClose(tif);   /* closes fd */
    else
        close(fd);
    unsigned char *buf = ok ? slurp(path, len) : NULL;
    unlink(path);
    return buf;
}

static unsigned char *libtiff_file(const gimg_image *im, const tiff_spec *t, size_t *len)
{
    return libtiff_pages(&im, t, 1, len);
}

/* libtiff's notes on what is written here (nonstandard tile sizes, the
 * JPEG codec's) are not the test's output. */
static void quiet_tiff(const char *module, const char *fmt, va_list ap) {}

/* The sizes of k_sizes, every layout libgimg's writer makes (b-bit samples
 * from maxval 2^b - 1), its three compressions; and a taller image, in
 * several strips of 256 KiB, the last one short. */
static void test_tiff_written(void)
{
    static const struct {
        int channels;
        gimg_sample sample;
        unsigned maxval;
    } k[] = {
        {1, GIMG_U8, 0},  {2, GIMG_U8, 0},   {3, GIMG_U8, 0},     {4, GIMG_U8, 0},
        {1, GIMG_U16, 0}, {4, GIMG_U16, 0},  {3, GIMG_F32, 0},    {2, GIMG_F32, 0},
        {1, GIMG_U8, 1},  {3, GIMG_U8, 15},  {1, GIMG_U16, 4095}, {4, GIMG_U16, 1023},
    };
    static const gimg_tiff_compression comp[] = {GIMG_TIFF_DEFLATE, GIMG_TIFF_NONE,
                                                 GIMG_TIFF_LZW};
    for (size_t i = 0; i < sizeof k / sizeof *k; i++)
        for (size_t z = 0; z <= sizeof k_sizes / sizeof *k_sizes; z++) {
            const int tall = z == sizeof k_sizes / sizeof *k_sizes;
            gimg_image im;
            size_t len;
            char what[96];
            if (!make_image(&im, tall ? 300 : k_sizes[z][0], tall ? 1000 : k_sizes[z][1],
                            k[i].channels, k[i].sample, k[i].maxval, 11 + i * 37 + z)) {
                CHECK(0, "out of memory");
                return;
            }
            im.maxval = k[i].maxval;
            const gimg_tiff_compression c = comp[(i + z) % 3];
            unsigned char *buf = tiff_encoded(&im, c, &len);
            snprintf(what, sizeof what, "TIFF %dx%d c%d %d-bit maxval %u compression %d",
                     im.width, im.height, im.channels, 8 * (int)im.sample, k[i].maxval, (int)c);
            CHECK(buf, "%s: encoding: %s", what, gimg_last_error());
            if (buf)
                check_bands(what, buf, len);
            free(buf);
            gimg_image_free(&im);
        }
}

/* A layout written by libtiff: the image's channels, samples and maxval
 * (maxval 2^b - 1 for b-bit samples; a palette's index range), and how it
 * is stored. */
typedef struct {
    const char *name;
    int channels;
    gimg_sample sample;
    unsigned maxval;
    tiff_spec t;
} tiff_case;

/* Colormaps: 256 colors, and 16 grays (which decode to a gray image). */
static uint16_t k_colors[3 * 256], k_grays[3 * 16];

static void make_colormaps(void)
{
    for (int i = 0; i < 256; i++) {
        k_colors[i] = (uint16_t)(i * 257);
        k_colors[256 + i] = (uint16_t)((255 - i) * 257);
        k_colors[512 + i] = (uint16_t)((i * 7 % 256) * 257);
    }
    for (int i = 0; i < 16; i++)
        k_grays[i] = k_grays[16 + i] = k_grays[32 + i] = (uint16_t)(i * 4369);
}

/* Each case at every size of k_sizes; with strips, at each of the strip
 * heights (0: one strip). */
static void check_tiff_cases(const tiff_case *k, size_t n, const uint32_t *strip_rows,
                             size_t n_strip_rows)
{
    for (size_t i = 0; i < n; i++)
        for (size_t z = 0; z < sizeof k_sizes / sizeof *k_sizes; z++)
            for (size_t r = 0; r < n_strip_rows; r++) {
                gimg_image im;
                size_t len;
                char what[128];
                if (!make_image(&im, k_sizes[z][0], k_sizes[z][1], k[i].channels, k[i].sample,
                                k[i].maxval, 3 + i * 41 + z * 7 + r)) {
                    CHECK(0, "out of memory");
                    return;
                }
                tiff_spec t = k[i].t;
                t.rows_per_strip = strip_rows[r];
                unsigned char *buf = libtiff_file(&im, &t, &len);
                snprintf(what, sizeof what, "TIFF %s %dx%d, %u rows per strip, tiles %ux%u",
                         k[i].name, im.width, im.height, t.rows_per_strip, t.tile_w, t.tile_h);
                CHECK(buf, "%s: libtiff could not write it", what);
                if (buf)
                    check_bands(what, buf, len);
                free(buf);
                gimg_image_free(&im);
            }
}

/* Strips as libtiff writes them: strip heights of 1, dividing the height
 * or not, the height, more; every sample depth, alpha, MINISWHITE,
 * palettes, separate planes, an extra sample dropped. */
static void test_tiff_strips(void)
{
    make_colormaps();
    const tiff_case k[] = {
        {"gray 8-bit LZW predictor", 1, GIMG_U8, 0,
         {.compression = COMPRESSION_LZW, .predictor = PREDICTOR_HORIZONTAL}},
        {"RGB 8-bit Deflate", 3, GIMG_U8, 0, {.compression = COMPRESSION_ADOBE_DEFLATE}},
        {"gray+alpha associated", 2, GIMG_U8, 0, {.associated = 1}},
        {"RGBA 16-bit associated", 4, GIMG_U16, 0,
         {.associated = 1, .compression = COMPRESSION_ADOBE_DEFLATE,
          .predictor = PREDICTOR_HORIZONTAL}},
        {"RGB float predictor 3", 3, GIMG_F32, 0,
         {.compression = COMPRESSION_ADOBE_DEFLATE, .predictor = PREDICTOR_FLOATINGPOINT}},
        {"gray float MINISWHITE", 1, GIMG_F32, 0, {.photometric = PHOTOMETRIC_MINISWHITE}},
        {"gray 16-bit MINISWHITE", 1, GIMG_U16, 0,
         {.photometric = PHOTOMETRIC_MINISWHITE, .compression = COMPRESSION_PACKBITS}},
        {"gray 8-bit MINISWHITE", 1, GIMG_U8, 0, {.photometric = PHOTOMETRIC_MINISWHITE}},
        {"gray 12-bit", 1, GIMG_U16, 4095, {.bits = 12, .compression = COMPRESSION_LZW}},
        {"RGB 4-bit", 3, GIMG_U8, 15, {.bits = 4}},
        {"gray 1-bit", 1, GIMG_U8, 1, {.bits = 1, .compression = COMPRESSION_PACKBITS}},
        {"gray 1-bit MINISWHITE", 1, GIMG_U8, 1,
         {.bits = 1, .photometric = PHOTOMETRIC_MINISWHITE}},
        {"RGBA 2-bit", 4, GIMG_U8, 3, {.bits = 2}},
        {"RGB separate", 3, GIMG_U8, 0,
         {.separate = 1, .compression = COMPRESSION_ADOBE_DEFLATE}},
        {"RGBA 16-bit separate", 4, GIMG_U16, 0, {.separate = 1}},
        {"gray+alpha 12-bit separate", 2, GIMG_U16, 4095, {.bits = 12, .separate = 1}},
        {"RGBA + a dropped sample, separate", 4, GIMG_U8, 0, {.separate = 1, .dropped = 1}},
        {"RGBA + a dropped sample", 4, GIMG_U16, 0, {.dropped = 1}},
        {"palette 8-bit", 1, GIMG_U8, 0,
         {.photometric = PHOTOMETRIC_PALETTE, .colormap = k_colors,
          .compression = COMPRESSION_LZW}},
        {"palette 4-bit of grays", 1, GIMG_U8, 15,
         {.bits = 4, .photometric = PHOTOMETRIC_PALETTE, .colormap = k_grays}},
    };
    static const uint32_t strip_rows[] = {1, 3, 7, 16, 39, 0, 41};
    check_tiff_cases(k, sizeof k / sizeof *k, strip_rows, sizeof strip_rows / sizeof *strip_rows);
}

/* Tiles, edge tiles partly outside the image, contiguous and separate. */
static void test_tiff_tiles(void)
{
    make_colormaps();
    const tiff_case k[] = {
        {"RGB 8-bit", 3, GIMG_U8, 0,
         {.tile_w = 16, .tile_h = 16, .compression = COMPRESSION_ADOBE_DEFLATE}},
        {"gray 8-bit", 1, GIMG_U8, 0, {.tile_w = 32, .tile_h = 16}},
        {"RGBA 16-bit separate", 4, GIMG_U16, 0,
         {.tile_w = 16, .tile_h = 32, .separate = 1, .compression = COMPRESSION_LZW}},
        {"gray float", 1, GIMG_F32, 0, {.tile_w = 48, .tile_h = 16}},
        {"gray 12-bit", 1, GIMG_U16, 4095, {.tile_w = 16, .tile_h = 16, .bits = 12}},
        {"RGBA + a dropped sample, separate", 4, GIMG_U8, 0,
         {.tile_w = 16, .tile_h = 16, .separate = 1, .dropped = 1}},
        {"palette 8-bit", 1, GIMG_U8, 0,
         {.tile_w = 16, .tile_h = 16, .photometric = PHOTOMETRIC_PALETTE,
          .colormap = k_colors}},
        {"gray+alpha associated, MINISWHITE", 2, GIMG_U8, 0,
         {.tile_w = 16, .tile_h = 16, .associated = 1,
          .photometric = PHOTOMETRIC_MINISWHITE}},
    };
    static const uint32_t one[] = {0};
    check_tiff_cases(k, sizeof k / sizeof *k, one, 1);
}

/* JPEG-compressed: YCbCr (2x2 subsampled; libtiff's codec gives RGB) and
 * gray, in strips of 16 rows and in one strip. */
static void test_tiff_jpeg(void)
{
    TIFFErrorHandler warnings = TIFFSetWarningHandler(quiet_tiff);
    const tiff_case k[] = {
        {"JPEG YCbCr", 3, GIMG_U8, 0,
         {.compression = COMPRESSION_JPEG, .photometric = PHOTOMETRIC_YCBCR, .jpeg_ycbcr = 1}},
        {"JPEG gray", 1, GIMG_U8, 0, {.compression = COMPRESSION_JPEG}},
    };
    static const uint32_t strip_rows[] = {16, 0};
    check_tiff_cases(k, sizeof k / sizeof *k, strip_rows, sizeof strip_rows / sizeof *strip_rows);
    TIFFSetWarningHandler(warnings);
}

/* A JPEG strip whose stream holds fewer rows than the strip (libtiff
 * warns, "Improper JPEG strip/tile size", and decodes it, as ImageMagick
 * and vips do): the rows it lacks are black, decoded whole and in bands
 * alike, whatever the buffers held before (the fuzzer found bands giving
 * the previous strip's rows there, and decoding uninitialised bytes).
 * Strips of 4 rows of 600 pixels: 4, then 2 of 4, then 4. */
static void test_tiff_jpeg_short_strip(void)
{
    enum { W = 600, H = 12, STRIP = 4 };
    static const int rows_coded[] = {4, 2, 4};
    unsigned char *px = malloc((size_t)W * STRIP);
    char path[] = "/tmp/unit_band_tiff.XXXXXX";
    int fd = mkstemp(path);
    TIFF *tif = fd < 0 ? NULL : TIFFFdOpen(fd, path, "w");
    int ok = tif && px;
    if (ok) {
        TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, (uint32_t)W);
        TIFFSetField(tif, TIFFTAG_IMAGELENGTH, (uint32_t)H);
        TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 8);
        TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, 1);
        TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
        TIFFSetField(tif, TIFFTAG_COMPRESSION, COMPRESSION_JPEG);
        TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, (uint32_t)STRIP);
    }
    /* Bright, so that black rows cannot pass for coded ones. */
    for (int s = 0; ok && s < 3; s++) {
        for (int i = 0; i < W * STRIP; i++)
            px[i] = (unsigned char)(128 + (i % W * 7 + i / W * 13 + s * 40) % 120);
        bytes jpeg = testjpeg_encode(px, W, W, rows_coded[s], 1, JCS_GRAYSCALE, NULL, NULL);
        ok = jpeg.p && TIFFWriteRawStrip(tif, (uint32_t)s, jpeg.p, (tmsize_t)jpeg.len) >= 0;
        free(jpeg.p);
    }
    ok = ok && TIFFWriteDirectory(tif);
    if (tif)
        TIFFClose(tif);   /* closes fd */
    else if (fd >= 0)
        close(fd);
    size_t len = 0;
    unsigned char *buf = ok ? slurp(path, &len) : NULL;
    if (fd >= 0)
        unlink(path);
    free(px);
    CHECK(buf != NULL, "JPEG TIFF with a short strip not written");
    if (!buf)
        return;
    TIFFErrorHandler warnings = TIFFSetWarningHandler(quiet_tiff);
    gimg_image whole;
    gimg_status st = gimg_decode_page(buf, len, NULL, &whole);
    CHECK(st == GIMG_OK, "short JPEG strip: %s", gimg_last_error());
    for (int y = 0; !st && y < H; y++) {
        int lo = 255, hi = 0;
        for (int x = 0; x < W; x++) {
            int v = gimg_row(&whole, y)[x];
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        const int black = y == 6 || y == 7;
        CHECK(black ? hi == 0 : lo >= 100, "short JPEG strip: row %d spans %d..%d, %s", y, lo,
              hi, black ? "not coded: should be black" : "coded: should be bright");
    }
    if (!st)
        gimg_image_free(&whole);
    check_bands("JPEG TIFF with a short strip", buf, len);
    TIFFSetWarningHandler(warnings);
    free(buf);
}

/* Pages 0 to 2 of one file, each its own layout, page 1 and 2 through
 * gimg_read_opts; a page past the last is refused alike. */
static void test_tiff_pages(void)
{
    gimg_image a, b, c;
    if (!make_image(&a, 23, 17, 3, GIMG_U8, 0, 1) || !make_image(&b, 31, 29, 1, GIMG_U16, 0, 2) ||
        !make_image(&c, 40, 35, 4, GIMG_U8, 0, 3)) {
        CHECK(0, "out of memory");
        return;
    }
    const gimg_image *ims[] = {&a, &b, &c};
    const tiff_spec specs[] = {
        {.rows_per_strip = 5},
        {.rows_per_strip = 3, .compression = COMPRESSION_ADOBE_DEFLATE},
        {.tile_w = 16, .tile_h = 16, .separate = 1},
    };
    size_t len;
    unsigned char *buf = libtiff_pages(ims, specs, 3, &len);
    CHECK(buf, "libtiff could not write the pages");
    if (buf) {
        for (int page = 0; page < 3; page++) {
            gimg_read_opts o = {.page = page};
            char what[64];
            snprintf(what, sizeof what, "TIFF page %d of 3", page);
            check_bands_page(what, buf, len, &o);
        }
        gimg_read_opts past = {.page = 3};
        check_refused_alike_page("TIFF page 3 of 3", buf, len, &past);
    }
    free(buf);
    gimg_image_free(&a);
    gimg_image_free(&b);
    gimg_image_free(&c);
}

/* The header's metadata is what decoding gives (ICC, XMP, resolution,
 * orientation and the warning of a tag libtiff refused); the Orientation
 * tag is kept, not applied, so the file streams. */
static void test_tiff_meta(void)
{
    static const char xmp[] = "<x:xmpmeta xmlns:x='adobe:ns:meta/'/>";
    static const unsigned char icc[] = "not a real profile, but bytes all the same";
    gimg_image im;
    if (!make_image(&im, 29, 21, 3, GIMG_U8, 0, 8) || !(im.meta = gimg_meta_new())) {
        CHECK(0, "out of memory");
        gimg_image_free(&im);
        return;
    }
    im.meta->xmp = malloc(sizeof xmp - 1);
    im.meta->icc = malloc(sizeof icc);
    if (im.meta->xmp) {
        memcpy(im.meta->xmp, xmp, sizeof xmp - 1);
        im.meta->xmp_bytes = sizeof xmp - 1;
    }
    if (im.meta->icc) {
        memcpy(im.meta->icc, icc, sizeof icc);
        im.meta->icc_bytes = sizeof icc;
    }
    im.meta->x_dpi = 300;
    im.meta->y_dpi = 150;
    im.meta->orientation = 6;
    size_t len;
    unsigned char *buf = tiff_encoded(&im, GIMG_TIFF_DEFLATE, &len);
    CHECK(buf, "encoding: %s", gimg_last_error());
    gimg_image_free(&im);
    if (!buf)
        return;
    check_bands("TIFF with orientation 6", buf, len);
    gimg_image whole, header;
    gimg_band_reader *r = NULL;
    gimg_status st = gimg_decode_page(buf, len, NULL, &whole);
    CHECK(st == GIMG_OK, "decoding: %s", gimg_last_error());
    gimg_status band_st = gimg_band_open(buf, len, 0, NULL, 4, &header, &r);
    CHECK(band_st == GIMG_OK && r, "band open: %s", gimg_last_error());
    if (!st && !band_st && r) {
        const gimg_meta *m = header.meta, *w = whole.meta;
        CHECK(m && w, "metadata: bands %p, decoding %p", (const void *)m, (const void *)w);
        if (m && w) {
            CHECK(m->orientation == 6 && m->orientation == w->orientation, "orientation %d, %d",
                  m->orientation, w->orientation);
            CHECK(m->x_dpi == w->x_dpi && m->y_dpi == w->y_dpi && w->x_dpi == 300,
                  "resolution %gx%g, decoding's %gx%g", m->x_dpi, m->y_dpi, w->x_dpi, w->y_dpi);
            CHECK(m->xmp_bytes == w->xmp_bytes && w->xmp_bytes == sizeof xmp - 1 &&
                      !memcmp(m->xmp, w->xmp, w->xmp_bytes),
                  "XMP");
            CHECK(m->icc_bytes == w->icc_bytes && w->icc_bytes == sizeof icc &&
                      !memcmp(m->icc, w->icc, w->icc_bytes),
                  "ICC profile");
            CHECK(!strcmp(m->warning, w->warning), "warning '%s', decoding's '%s'", m->warning,
                  w->warning);
        }
    }
    gimg_band_close(r);
    if (!band_st)
        gimg_meta_free(header.meta);
    if (!st)
        gimg_image_free(&whole);
    free(buf);
}

static unsigned tiff_le16(const unsigned char *p) { return (unsigned)p[1] << 8 | p[0]; }
static uint32_t tiff_le32(const unsigned char *p)
{
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

/* A band and a chunk row's memory, not the image's: a 2048x2048 RGBA
 * 16-bit image (32 MiB decoded), in libgimg's strips (256 KiB) and in
 * separate planes of 64x64 tiles (a row of them: 1 MiB), read in bands of
 * 16 rows (256 KiB), raises the peak by a few MiB at most, decoding it
 * whole by the 32. (png_peak_growth_kib measures any format.) */
static void test_tiff_memory(void)
{
    if (under_valgrind())
        SKIP("peak memory under valgrind is valgrind's");
#ifdef UNDER_SANITIZER
    SKIP("peak memory under a sanitizer is its allocator's");
#endif
    gimg_image im;
    if (!make_image(&im, 2048, 2048, 4, GIMG_U16, 0, 21)) {
        CHECK(0, "out of memory");
        return;
    }
    const tiff_spec tiles = {.tile_w = 64, .tile_h = 64, .separate = 1,
                             .compression = COMPRESSION_ADOBE_DEFLATE};
    size_t len[2];
    unsigned char *buf[2] = {tiff_encoded(&im, GIMG_TIFF_DEFLATE, &len[0]),
                             libtiff_file(&im, &tiles, &len[1])};
    gimg_image_free(&im);
    for (int k = 0; k < 2; k++) {
        const char *what = k ? "separate planes of tiles" : "strips";
        CHECK(buf[k], "%s: writing", what);
        if (!buf[k])
            continue;
        const long whole = png_peak_growth_kib(buf[k], len[k], 0);
        const long bands = png_peak_growth_kib(buf[k], len[k], 16);
        CHECK(whole >= 30 * 1024, "%s: decoding whole raised the peak by %ld KiB", what, whole);
        CHECK(bands >= 0 && bands < 4 * 1024, "%s: bands of 16 rows raised the peak by %ld KiB",
              what, bands);
        free(buf[k]);
    }
}

/* Where strip or tile i's offset and byte count are in a little-endian
 * classic TIFF's first IFD (libtiff's and libgimg's writers on this
 * machine): *at_off and *at_count, each of *size bytes (SHORT or LONG);
 * 0 if not found. */
static int tiff_chunk_entry(const unsigned char *buf, size_t len, uint32_t i, size_t *at_off,
                            size_t *at_count, int *size)
{
    if (len < 8 || buf[0] != 'I')
        return 0;
    const size_t ifd = tiff_le32(buf + 4);
    if (ifd + 2 > len)
        return 0;
    const unsigned n = tiff_le16(buf + ifd);
    int found = 0;
    for (unsigned e = 0; e < n && ifd + 2 + 12 * (size_t)(e + 1) <= len; e++) {
        const unsigned char *p = buf + ifd + 2 + 12 * (size_t)e;
        const unsigned tag = tiff_le16(p), type = tiff_le16(p + 2);
        const uint32_t count = tiff_le32(p + 4);
        const int value_bytes = type == 3 ? 2 : 4;
        if ((tag != 273 && tag != 279 && tag != 324 && tag != 325) || i >= count)
            continue;
        const size_t values = (size_t)count * value_bytes <= 4 ? (size_t)(p + 8 - buf)
                                                               : tiff_le32(p + 8);
        const size_t at = values + (size_t)i * value_bytes;
        if (at + value_bytes > len)
            return 0;
        if (tag == 273 || tag == 324)
            *at_off = at;
        else
            *at_count = at;
        *size = value_bytes;
        found++;
    }
    return found == 2;
}

static uint32_t tiff_value(const unsigned char *p, int size)
{
    return size == 2 ? tiff_le16(p) : tiff_le32(p);
}

/* Files decoding refuses, refused alike: cut short (in its directory, in
 * its header), a strip or tile past the end of the file or corrupt in a
 * later band, two corrupt strips in separate planes (decoding names the
 * first plane's, which the bands meet second), the size limits (before
 * anything the size of the image is allocated), a tile larger than the
 * image, an unsupported layout. */
static void test_tiff_refused(void)
{
    TIFFErrorHandler warnings = TIFFSetWarningHandler(quiet_tiff);
    gimg_image im;
    if (!make_image(&im, 61, 40, 3, GIMG_U8, 0, 12)) {
        CHECK(0, "out of memory");
        return;
    }
    size_t len, at_off, at_count;
    int size;
    unsigned char *buf = tiff_encoded(&im, GIMG_TIFF_DEFLATE, &len);
    CHECK(buf, "encoding: %s", gimg_last_error());
    if (buf) {
        check_refused_alike("TIFF cut in its directory", buf, len - 9);
        check_refused_alike("TIFF cut in its header", buf, 6);
        const uint64_t max_pixels = gimg_max_pixels();
        gimg_set_max_pixels(61 * 39);
        check_refused_alike("TIFF over --max-pixels", buf, len);
        gimg_set_max_pixels(max_pixels);
    }
    free(buf);

    /* Deflate strips of 7 rows: strip 4 (rows 28 to 34) spoilt. */
    const tiff_spec strips = {.rows_per_strip = 7, .compression = COMPRESSION_ADOBE_DEFLATE};
    buf = libtiff_file(&im, &strips, &len);
    CHECK(buf && tiff_chunk_entry(buf, len, 4, &at_off, &at_count, &size), "writing");
    if (buf && tiff_chunk_entry(buf, len, 4, &at_off, &at_count, &size)) {
        const uint32_t off = tiff_value(buf + at_off, size), count = tiff_value(buf + at_count, size);
        unsigned char *spoilt = malloc(len);
        if (spoilt) {
            memcpy(spoilt, buf, len);
            memset(spoilt + off + count / 3, 0xFF, count / 3);
            check_refused_alike("TIFF with a corrupt strip 4", spoilt, len);
            memcpy(spoilt, buf, len);
            spoilt[at_count] = 0xFF;
            spoilt[at_count + 1] = 0xFF;
            check_refused_alike("TIFF with strip 4 past the end", spoilt, len);
            memcpy(spoilt, buf, len);
            memset(spoilt + at_count, 0, size);
            check_refused_alike("TIFF with strip 4 empty", spoilt, len);
        }
        free(spoilt);
    }
    free(buf);

    /* Separate planes, strips of 3 rows: 14 a plane. */
    const tiff_spec planes = {.rows_per_strip = 3, .separate = 1,
                              .compression = COMPRESSION_ADOBE_DEFLATE};
    buf = libtiff_file(&im, &planes, &len);
    size_t at_off2, at_count2;
    const int found = buf && tiff_chunk_entry(buf, len, 14, &at_off, &at_count, &size) &&
                      tiff_chunk_entry(buf, len, 9, &at_off2, &at_count2, &size);
    CHECK(found, "writing separate planes");
    if (found) {
        /* Plane 1's first strip (14), and plane 0's strip 9. */
        const uint32_t off14 = tiff_value(buf + at_off, size);
        const uint32_t count14 = tiff_value(buf + at_count, size);
        const uint32_t off9 = tiff_value(buf + at_off2, size);
        const uint32_t count9 = tiff_value(buf + at_count2, size);
        memset(buf + off14 + count14 / 3, 0xFF, count14 / 3);
        check_refused_alike("TIFF with plane 1's first strip corrupt", buf, len);
        memset(buf + off9 + count9 / 3, 0xFF, count9 / 3);
        check_refused_alike("TIFF with strip 9 and plane 1's first strip corrupt", buf, len);
        buf[at_count2] = 0xFF;
        buf[at_count2 + 1] = 0xFF;
        check_refused_alike("TIFF with strip 9 past the end, plane 1's first corrupt", buf, len);
    }
    free(buf);

    /* Tiles of 16: the second row of tiles' first tile (4) past the end. */
    const tiff_spec tiles = {.tile_w = 16, .tile_h = 16};
    buf = libtiff_file(&im, &tiles, &len);
    CHECK(buf && tiff_chunk_entry(buf, len, 4, &at_off, &at_count, &size), "writing tiles");
    if (buf && tiff_chunk_entry(buf, len, 4, &at_off, &at_count, &size)) {
        buf[at_off] = 0xF0;
        buf[at_off + 1] = 0xFF;
        check_refused_alike("TIFF with tile 4 past the end", buf, len);
    }
    free(buf);
    gimg_image_free(&im);

    /* One tile of 4112x4112 (16.1 MiB) for a 20x20 image. */
    if (make_image(&im, 20, 20, 1, GIMG_U8, 0, 13)) {
        const tiff_spec huge = {.tile_w = 4112, .tile_h = 4112,
                                .compression = COMPRESSION_ADOBE_DEFLATE};
        buf = libtiff_file(&im, &huge, &len);
        CHECK(buf, "writing a huge tile");
        if (buf)
            check_refused_alike("TIFF with a tile larger than the image", buf, len);
        free(buf);
        gimg_image_free(&im);
    }
    if (make_image(&im, 9, 5, 3, GIMG_U8, 0, 14)) {
        const tiff_spec cmyk = {.photometric = PHOTOMETRIC_SEPARATED};
        buf = libtiff_file(&im, &cmyk, &len);
        CHECK(buf, "writing CMY");
        if (buf)
            check_refused_alike("CMY TIFF", buf, len);
        free(buf);
        gimg_image_free(&im);
    }
    TIFFSetWarningHandler(warnings);
}


/* JPEG: the tests of lib/codec_jpeg.c's row decoder go here. */

/* gray, and RGB at every chroma sampling our writer takes, baseline and
 * progressive (libjpeg holds a progressive file's coefficients, not its
 * pixels: it reads in bands all the same). */
static void test_jpeg(void)
{
    static const struct {
        int channels;
        gimg_subsampling sub;
        int progressive;
    } k[] = {
        {1, GIMG_SUBSAMPLE_AUTO, 0}, {3, GIMG_SUBSAMPLE_444, 0},
        {3, GIMG_SUBSAMPLE_422, 0},     {3, GIMG_SUBSAMPLE_420, 0},
        {3, GIMG_SUBSAMPLE_420, 1},     {1, GIMG_SUBSAMPLE_AUTO, 1},
    };
    for (size_t i = 0; i < sizeof k / sizeof *k; i++)
        for (size_t z = 0; z < sizeof k_sizes / sizeof *k_sizes; z++) {
            gimg_image im;
            if (gimg_image_alloc(&im, k_sizes[z][0], k_sizes[z][1] * 3, k[i].channels,
                                 GIMG_U8) ||
                !testimg_fill_photo(&im, 11 + i * 7 + z)) {
                CHECK(0, "out of memory");
                return;
            }
            gimg_write_opts o;
            gimg_write_opts_init(&o);
            o.jpeg_subsampling = k[i].sub;
            o.jpeg_progressive = k[i].progressive;
            unsigned char *buf = NULL;
            size_t len;
            char what[96];
            snprintf(what, sizeof what, "JPEG %dx%d c%d sampling %d%s", im.width, im.height,
                     im.channels, (int)k[i].sub, k[i].progressive ? " progressive" : "");
            gimg_status st = gimg_encode(&im, GIMG_FMT_JPEG, &o, &buf, &len);
            CHECK(st == GIMG_OK, "%s: encoding: %s", what, gimg_last_error());
            if (!st)
                check_bands(what, buf, len);
            free(buf);
            gimg_image_free(&im);
        }
}

/* Refused alike: cut in its data, cut before its end (EOI), a corrupt
 * marker. */
static void test_jpeg_refused(void)
{
    gimg_image im;
    if (gimg_image_alloc(&im, 64, 48, 3, GIMG_U8) || !testimg_fill_photo(&im, 3)) {
        CHECK(0, "out of memory");
        return;
    }
    gimg_write_opts o;
    gimg_write_opts_init(&o);
    unsigned char *buf = NULL;
    size_t len;
    CHECK(gimg_encode(&im, GIMG_FMT_JPEG, &o, &buf, &len) == GIMG_OK, "%s", gimg_last_error());
    if (buf) {
        check_refused_alike("JPEG cut in its data", buf, len * 2 / 3);
        check_refused_alike("JPEG cut before its header ends", buf, 40);
        /* A DHT marker's length pointing past the file. */
        for (size_t i = 2; i + 3 < len; i++)
            if (buf[i] == 0xFF && buf[i + 1] == 0xC4) {
                buf[i + 2] = 0xFF;
                break;
            }
        check_refused_alike("JPEG with a bad marker length", buf, len);
    }
    free(buf);
    gimg_image_free(&im);
}

int main(void)
{
    RUN(test_band_rows);
    RUN(test_pnm_pam_pfm);
    RUN(test_pnm_plain_and_bitmaps);
    RUN(test_pnm_refused);
    RUN(test_written);
    /* PNG's RUNs */
    RUN(test_png_written);
    RUN(test_png_by_hand);
    RUN(test_png_sbit);
    RUN(test_png_interlaced);
    RUN(test_png_cut);
    RUN(test_png_crc);
    RUN(test_png_corrupt_data);
    RUN(test_png_bad_data);
    RUN(test_png_palette_index);
    RUN(test_png_memory);
    RUN(test_png_meta);
    /* TIFF's RUNs */
    RUN(test_tiff_written);
    RUN(test_tiff_strips);
    RUN(test_tiff_tiles);
    RUN(test_tiff_jpeg);
    RUN(test_tiff_jpeg_short_strip);
    RUN(test_tiff_pages);
    RUN(test_tiff_meta);
    RUN(test_tiff_refused);
    RUN(test_tiff_memory);
    /* JPEG's RUNs */
    RUN(test_jpeg);
    RUN(test_jpeg_refused);
    return check_summary();
}
