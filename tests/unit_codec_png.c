/*
 * unit_codec_png — the PNG decoder (lib/codec_png.c, libspng 0.7.3).
 *
 * The files are made here, by a small PNG writer of the tests' own
 * (testpng.h) that covers what ours (codec_png.c's encoder) never writes:
 * every colour type and bit depth, Adam7 interlacing, all five row
 * filters, palettes and tRNS, several IDAT chunks. What a file must
 * decode to is worked out from the samples it was made of and the PNG
 * specification (low-depth gray scaled by 255 / (2^depth - 1), tRNS
 * giving alpha 0 to the pixels of its colour, palettes looked up), then
 * checked against ImageMagick (libpng), when /usr/bin/convert is there.
 *
 * Then what must be refused, each with its message: palette indices past
 * PLTE's entries, an IDAT with no data, CRC errors, every truncation, a
 * decompression bomb in a text chunk past libspng's 64 MiB (in bounded
 * memory and time), sizes over the limits.
 *
 * Metadata and maxvals: an image with every kind of metadata PNG holds
 * round-trips through the public API (gimg_encode, gimg_decode_memory);
 * images of b significant bits keep their maxval through sBIT, their
 * samples stored scaled by left bit replication (read back here without
 * libspng: the IDATs inflated and unfiltered by the test); sBIT in files
 * made here is honoured where every channel agrees and ignored elsewhere;
 * hostile metadata below the limits (a 16 MB iTXt, a 20 MB zTXt bomb, EXIF
 * pointing past its block, bad CRCs, broken zlib streams, a second iCCP)
 * is dropped with a warning and the image decoded.
 *
 * Our own decoding of the image data (png_idat.c) against libspng's
 * (gimg_png_own_idat = 0): the same status, message, pixels and metadata
 * for every layout, whole and in bands, and for each file damaged 24
 * seeded ways (the image data changed, the stream cut, chunks after it).
 */
#include "gimg.h"
#include "codec.h"
#include "testimg.h"
#include "check.h"
#include "testfile.h"
#include "testpng.h"
#include "band.h"

#include <libdeflate.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *color_name(int color)
{
    switch (color) {
    case GRAY: return "gray";
    case RGB: return "RGB";
    case PALETTE: return "palette";
    case GRAY_ALPHA: return "gray+alpha";
    default: return "RGBA";
    }
}

/* ----------------------------------------- what a file must decode to */

/* The image s must decode to, worked out from its samples. */
static void expected_image(const png_spec *s, gimg_image *im)
{
    const int alpha = s->trns && (s->color == GRAY || s->color == RGB || s->color == PALETTE);
    const int channels = (s->color == PALETTE ? 3 : stored_channels(s->color)) + alpha;
    const gimg_sample sample = s->depth == 16 ? GIMG_U16 : GIMG_U8;
    if (gimg_image_alloc(im, s->w, s->h, channels, sample) != GIMG_OK)
        return;
    const int n = stored_channels(s->color);
    const unsigned max = sample == GIMG_U16 ? 65535 : 255;
    const unsigned scale = s->depth < 8 ? 255 / ((1u << s->depth) - 1) : 1;
    for (int y = 0; y < s->h; y++)
        for (int x = 0; x < s->w; x++) {
            const uint16_t *px = s->samples + ((size_t)y * s->w + x) * n;
            unsigned v[4], k = 0;
            if (s->color == PALETTE) {
                for (int c = 0; c < 3; c++)
                    v[k++] = s->plte[px[0]][c];
                if (alpha)
                    v[k++] = px[0] < s->alphas ? s->alpha[px[0]] : 255;
            } else {
                int is_key = 1;
                for (int c = 0; c < n; c++) {
                    v[k++] = px[c] * scale;
                    is_key &= c >= 3 || px[c] == s->key[c];
                }
                if (alpha)
                    v[k++] = is_key ? 0 : max;
            }
            for (int c = 0; c < channels; c++) {
                if (sample == GIMG_U16)
                    ((uint16_t *)gimg_row(im, y))[x * channels + c] = (uint16_t)v[c];
                else
                    gimg_row(im, y)[x * channels + c] = (unsigned char)v[c];
            }
        }
}

/* Where a and b first differ ("" if they are equal), in *why. */
static int same_image(const gimg_image *a, const gimg_image *b, char *why, size_t size)
{
    if (a->width != b->width || a->height != b->height || a->channels != b->channels ||
        a->sample != b->sample) {
        snprintf(why, size, "%dx%d c%d s%d against %dx%d c%d s%d", a->width, a->height,
                 a->channels, (int)a->sample, b->width, b->height, b->channels, (int)b->sample);
        return 0;
    }
    const size_t row = (size_t)a->width * gimg_pixel_bytes(a);
    for (int y = 0; y < a->height; y++)
        for (size_t i = 0; i < row; i++)
            if (gimg_row(a, y)[i] != gimg_row(b, y)[i]) {
                snprintf(why, size, "row %d byte %zu: %d against %d", y, i, gimg_row(a, y)[i],
                         gimg_row(b, y)[i]);
                return 0;
            }
    return 1;
}

/* The colour types and bit depths PNG allows. */
static const struct {
    int color, depth;
} layouts[] = {
    { GRAY, 1 },    { GRAY, 2 },    { GRAY, 4 },       { GRAY, 8 },       { GRAY, 16 },
    { RGB, 8 },     { RGB, 16 },    { PALETTE, 1 },    { PALETTE, 2 },    { PALETTE, 4 },
    { PALETTE, 8 }, { GRAY_ALPHA, 8 }, { GRAY_ALPHA, 16 }, { RGBA, 8 },   { RGBA, 16 },
};
#define N_LAYOUTS (sizeof layouts / sizeof layouts[0])

static const int sizes[][2] = { { 1, 1 }, { 3, 2 }, { 9, 5 }, { 37, 21 } };

/* Decodes s's file through the public API and compares with what it must
 * decode to; the probe must agree. */
static void check_spec(const png_spec *s, const char *what)
{
    size_t len;
    unsigned char *buf = make_png(s, &len);
    gimg_image want, got;
    expected_image(s, &want);
    gimg_info info;
    CHECK(gimg_probe_memory(buf, len, &info) == GIMG_OK, "%s: probe: %s", what,
          gimg_last_error());
    CHECK(info.format == GIMG_FMT_PNG && info.width == want.width &&
              info.height == want.height && info.channels == want.channels &&
              info.sample == want.sample,
          "%s: probe says %dx%d c%d s%d", what, info.width, info.height, info.channels,
          (int)info.sample);
    gimg_status st = gimg_decode_memory(buf, len, &got);
    CHECK(st == GIMG_OK, "%s: %s", what, gimg_last_error());
    char why[160];
    if (st == GIMG_OK)
        CHECK(same_image(&got, &want, why, sizeof why), "%s: decoded %s", what, why);
    gimg_image_free(&got);
    gimg_image_free(&want);
    free(buf);
}

/* Every colour type and bit depth, interlaced or not, with and without
 * tRNS, at sizes smaller and larger than Adam7's 8x8 block. */
static void test_layouts(void)
{
    uint64_t seed = 1;
    for (size_t l = 0; l < N_LAYOUTS; l++)
        for (int il = 0; il < 2; il++)
            for (int trns = 0; trns < 2; trns++) {
                const int color = layouts[l].color, depth = layouts[l].depth;
                if (trns && (color == GRAY_ALPHA || color == RGBA))
                    continue;   /* tRNS is not allowed there */
                for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
                    png_spec s;
                    fill_spec(&s, sizes[k][0], sizes[k][1], color, depth, il, trns, seed++);
                    char what[96];
                    snprintf(what, sizeof what, "%dx%d %s %d-bit%s%s", s.w, s.h,
                             color_name(color), depth, il ? " interlaced" : "",
                             trns ? " tRNS" : "");
                    check_spec(&s, what);
                    free(s.samples);
                }
            }
}

/* Unused bits at the end of a row of 1-, 2- and 4-bit samples are not
 * pixels: set to ones they change nothing (a palette of one colour). */
static void test_row_padding(void)
{
    for (int depth = 1; depth <= 4; depth *= 2)
        for (int il = 0; il < 2; il++) {
            png_spec s;
            fill_spec(&s, 11, 6, PALETTE, depth, il, 0, 77);
            s.entries = 1;
            for (int i = 0; i < s.w * s.h; i++)
                s.samples[i] = 0;
            s.pad_ones = 1;
            char what[64];
            snprintf(what, sizeof what, "%d-bit palette of 1 colour, padding bits set%s", depth,
                     il ? ", interlaced" : "");
            check_spec(&s, what);
            s.color = GRAY;
            snprintf(what, sizeof what, "%d-bit gray, padding bits set%s", depth,
                     il ? ", interlaced" : "");
            check_spec(&s, what);
            free(s.samples);
        }
}

/* Our encoder's files, every layout it writes, read back bit for bit
 * (16-bit samples in host order). */
static void test_round_trip(void)
{
    for (int c = 1; c <= 4; c++)
        for (int s = 1; s <= 2; s++) {
            gimg_image src, got;
            if (gimg_image_alloc(&src, 45, 23, c, (gimg_sample)s) != GIMG_OK)
                continue;
            testimg_fill_random(&src, 100 + 10 * (uint64_t)c + (uint64_t)s);
            unsigned char *buf = NULL;
            size_t len;
            CHECK(gimg_encode(&src, GIMG_FMT_PNG, NULL, &buf, &len) == GIMG_OK, "encode: %s",
                  gimg_last_error());
            gimg_status st = buf ? gimg_decode_memory(buf, len, &got) : GIMG_E_FORMAT;
            CHECK(st == GIMG_OK, "%d channels, %d-bit: %s", c, 8 * s, gimg_last_error());
            char why[160];
            if (st == GIMG_OK)
                CHECK(same_image(&got, &src, why, sizeof why), "%d channels, %d-bit: %s", c,
                      8 * s, why);
            gimg_image_free(&got);
            gimg_image_free(&src);
            free(buf);
        }
}

/* ------------------------------------------------- ImageMagick's view */

/* Compares ours with ImageMagick's decoding (a PAM, read with gimg), which
 * may add colour channels to a gray image (R = G = B then) but must agree
 * on everything else. */
static int same_as_magick(const gimg_image *ours, const gimg_image *im, char *why, size_t size)
{
    const int gray_as_rgb = (ours->channels == 1 && im->channels == 3) ||
                            (ours->channels == 2 && im->channels == 4);
    if (ours->width != im->width || ours->height != im->height || ours->sample != im->sample ||
        (ours->channels != im->channels && !gray_as_rgb)) {
        snprintf(why, size, "ours %dx%d c%d s%d, ImageMagick's %dx%d c%d s%d", ours->width,
                 ours->height, ours->channels, (int)ours->sample, im->width, im->height,
                 im->channels, (int)im->sample);
        return 0;
    }
    for (int y = 0; y < ours->height; y++)
        for (int x = 0; x < ours->width; x++)
            for (int c = 0; c < im->channels; c++) {
                const int oc = gray_as_rgb ? (c == im->channels - 1 && ours->channels == 2 ? 1 : 0)
                                           : c;
                unsigned a, b;
                if (ours->sample == GIMG_U16) {
                    a = ((const uint16_t *)gimg_row(ours, y))[x * ours->channels + oc];
                    b = ((const uint16_t *)gimg_row(im, y))[x * im->channels + c];
                } else {
                    a = gimg_row(ours, y)[x * ours->channels + oc];
                    b = gimg_row(im, y)[x * im->channels + c];
                }
                if (a != b) {
                    snprintf(why, size, "pixel (%d, %d) channel %d: ours %u, ImageMagick's %u", x,
                             y, c, a, b);
                    return 0;
                }
            }
    return 1;
}

/* Every colour type and depth, interlaced and not, with and without tRNS,
 * as ImageMagick (libpng) decodes them. */
static void test_imagemagick(void)
{
    if (access("/usr/bin/convert", X_OK) != 0)
        SKIP("/usr/bin/convert (ImageMagick) is not installed");
    char dir[] = "/tmp/gimg-unit-png.XXXXXX";
    if (!mkdtemp(dir))
        SKIP("no temporary folder");
    char png[64], pam[64], cmd[256];
    snprintf(png, sizeof png, "%s/in.png", dir);
    snprintf(pam, sizeof pam, "%s/out.pam", dir);
    int compared = 0, attempts = 0;
    uint64_t seed = 500;
    for (size_t l = 0; l < N_LAYOUTS; l++)
        for (int il = 0; il < 2; il++)
            for (int trns = 0; trns < 2; trns++) {
                const int color = layouts[l].color, depth = layouts[l].depth;
                if (trns && (color == GRAY_ALPHA || color == RGBA))
                    continue;
                png_spec s;
                fill_spec(&s, 37, 21, color, depth, il, trns, seed++);
                attempts++;
                char what[96];
                snprintf(what, sizeof what, "%s %d-bit%s%s", color_name(color), depth,
                         il ? " interlaced" : "", trns ? " tRNS" : "");
                size_t len;
                unsigned char *buf = make_png(&s, &len);
                gimg_image ours, theirs;
                unlink(pam);
                snprintf(cmd, sizeof cmd, "/usr/bin/convert %s -depth %d %s 2>/dev/null", png,
                         depth == 16 ? 16 : 8, pam);
                if (!write_file(png, buf, len) || run(cmd) != 0 ||
                    gimg_read(pam, &theirs) != GIMG_OK) {
                    CHECK(0, "%s: ImageMagick did not decode it", what);
                } else {
                    CHECK(gimg_decode_memory(buf, len, &ours) == GIMG_OK, "%s: %s", what,
                          gimg_last_error());
                    char why[160];
                    if (ours.data)
                        CHECK(same_as_magick(&ours, &theirs, why, sizeof why), "%s: %s", what,
                              why);
                    compared++;
                    gimg_image_free(&ours);
                    gimg_image_free(&theirs);
                }
                free(buf);
                free(s.samples);
            }
    unlink(png);
    unlink(pam);
    rmdir(dir);
    CHECK(compared == attempts, "compared %d files of %d", compared, attempts);
}

/* ------------------------------------------------------ what is refused */

/* Decodes buf (through the row, so that a broken signature still reaches
 * the decoder) and expects a refusal with status want and a message that
 * contains `reason`. */
static void expect_refusal(const char *what, const unsigned char *buf, size_t len,
                           gimg_status want, const char *reason)
{
    gimg_image im;
    memset(&im, 0xAB, sizeof im);
    gimg_status st = gimg_codec_png.decode(buf, len, NULL, &im);
    CHECK(st == want, "%s: status %d, expected %d (%s)", what, st, want,
          st ? gimg_last_error() : "decoded");
    CHECK(st == GIMG_OK || strstr(gimg_last_error(), reason), "%s: message '%s', expected '%s'",
          what, gimg_last_error(), reason);
    CHECK(st == GIMG_OK || (im.data == NULL && im.width == 0), "%s: *out not zeroed", what);
    if (st == GIMG_OK)
        gimg_image_free(&im);
}

/* libspng (0.7.3) looks a palette index past PLTE's entries up as black:
 * every such index, at each depth, interlaced or not, wherever it is, is
 * refused. */
static void test_palette_index_past_plte(void)
{
    for (int depth = 1; depth <= 8; depth *= 2)
        for (int il = 0; il < 2; il++) {
            png_spec s;
            fill_spec(&s, 13, 9, PALETTE, depth, il, depth == 4, 900 + (uint64_t)depth);
            s.entries = depth == 1 ? 1 : (1u << depth) - 1 - (depth == 8 ? 50 : 0);
            if (s.alphas > s.entries)
                s.alphas = s.entries;
            for (int i = 0; i < s.w * s.h; i++)
                s.samples[i] = (uint16_t)(s.samples[i] % s.entries);
            char what[96];
            snprintf(what, sizeof what, "%d-bit palette%s, indices within its %u entries", depth,
                     il ? " interlaced" : "", s.entries);
            check_spec(&s, what);
            const int spots[3] = { 0, 5 * 13 + 6, 13 * 9 - 1 };
            for (int k = 0; k < 3; k++) {
                const uint16_t keep = s.samples[spots[k]];
                s.samples[spots[k]] = (uint16_t)s.entries;
                size_t len;
                unsigned char *buf = make_png(&s, &len);
                snprintf(what, sizeof what, "%d-bit palette%s, index %u at pixel %d", depth,
                         il ? " interlaced" : "", s.entries, spots[k]);
                expect_refusal(what, buf, len, GIMG_E_FORMAT, "past the palette");
                free(buf);
                s.samples[spots[k]] = keep;
            }
            free(s.samples);
        }
}

/* A small gray PNG, by parts: the signature and IHDR (33 bytes), then
 * IDAT chunks of the zlib stream split as asked, then IEND. */
static unsigned char *gray_png_with(const unsigned char *before_idat, size_t before_len,
                                    int empty_idat, int no_idat, size_t *len)
{
    png_spec s;
    fill_spec(&s, 6, 4, GRAY, 8, 0, 0, 31);
    size_t n;
    unsigned char *full = make_png(&s, &n);
    free(s.samples);
    bytes out = { 0 };
    put(&out, full, 33);
    put(&out, before_idat, before_len);
    if (empty_idat)
        put_chunk(&out, "IDAT", NULL, 0, 0);
    if (!no_idat)
        put(&out, full + 33, n - 33 - 12);   /* the IDATs */
    put(&out, full + n - 12, 12);           /* IEND */
    free(full);
    *len = out.len;
    return out.p;
}

/* A zero-length IDAT with nothing else is no image; before the real data
 * it is allowed (PNG concatenates every IDAT's bytes). No IDAT at all, and
 * data short of the last row, are refused too. */
static void test_empty_idat(void)
{
    size_t len;
    unsigned char *buf = gray_png_with(NULL, 0, 1, 1, &len);
    expect_refusal("an empty IDAT and nothing else", buf, len, GIMG_E_FORMAT,
                   "corrupt PNG file: the image data (IDAT) ends before the last row");
    free(buf);
    buf = gray_png_with(NULL, 0, 0, 1, &len);
    expect_refusal("no IDAT", buf, len, GIMG_E_FORMAT, "corrupt PNG file:");
    free(buf);
    buf = gray_png_with(NULL, 0, 1, 0, &len);
    gimg_image im;
    CHECK(gimg_decode_memory(buf, len, &im) == GIMG_OK, "an empty IDAT before the data: %s",
          gimg_last_error());
    gimg_image_free(&im);
    free(buf);
    /* Three rows' data in a four-row image. */
    bytes b = { 0 };
    put(&b, "\x89PNG\r\n\x1a\n", 8);
    const unsigned char ihdr[13] = { 0, 0, 0, 6, 0, 0, 0, 4, 8, 0, 0, 0, 0 };
    put_chunk(&b, "IHDR", ihdr, 13, 0);
    unsigned char raw[3 * 7] = { 0 }, z[128];
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(6);
    size_t zn = libdeflate_zlib_compress(c, raw, sizeof raw, z, sizeof z);
    libdeflate_free_compressor(c);
    put_chunk(&b, "IDAT", z, zn, 0);
    put_chunk(&b, "IEND", NULL, 0, 0);
    expect_refusal("3 rows of data for 4", b.p, b.len, GIMG_E_FORMAT, "ends before the last row");
    free(b.p);
}

/* A bit flipped in any critical chunk (its data or its CRC) is refused and
 * named; ancillary chunks with bad CRCs are ignored, as libpng and libspng
 * do by default (tRNS too: the image decodes without its transparency). */
static void test_crc(void)
{
    png_spec s;
    fill_spec(&s, 9, 7, PALETTE, 8, 0, 1, 41);
    size_t len;
    unsigned char *buf = make_png(&s, &len);
    static const struct {
        const char *type;
        int last;
    } spots[] = { { "IHDR", 0 }, { "PLTE", 0 }, { "IDAT", 0 }, { "IDAT", 1 }, { "IEND", 0 } };
    for (size_t k = 0; k < sizeof spots / sizeof spots[0]; k++) {
        size_t at = find_chunk(buf, len, spots[k].type, spots[k].last);
        CHECK(at != 0, "no %s chunk", spots[k].type);
        uint32_t n = (uint32_t)buf[at + 2] << 8 | buf[at + 3];
        for (int in_crc = 0; in_crc < 2 && at; in_crc++) {
            if (!in_crc && n == 0)
                continue;
            const size_t byte = at + 8 + (in_crc ? n : n / 2);
            buf[byte] ^= 0x10;
            char what[64];
            snprintf(what, sizeof what, "a bit flipped in the %s%s %s",
                     spots[k].last ? "last " : "", spots[k].type, in_crc ? "CRC" : "data");
            char reason[64];
            snprintf(reason, sizeof reason, "CRC mismatch in the %s chunk", spots[k].type);
            expect_refusal(what, buf, len, GIMG_E_FORMAT, reason);
            buf[byte] ^= 0x10;
        }
    }
    free(buf);
    free(s.samples);

    /* tEXt and tRNS with bad CRCs, in a gray image. */
    fill_spec(&s, 5, 3, GRAY, 8, 0, 0, 43);
    unsigned char *plain = make_png(&s, &len);
    free(s.samples);
    bytes b = { 0 };
    put(&b, plain, 33);
    put_chunk(&b, "tEXt", "Title\0x", 7, 1);
    put_chunk(&b, "tRNS", "\0\7", 2, 1);
    put(&b, plain + 33, len - 33);
    gimg_image im, want;
    CHECK(gimg_decode_memory(b.p, b.len, &im) == GIMG_OK, "bad tEXt and tRNS CRCs: %s",
          gimg_last_error());
    CHECK(gimg_decode_memory(plain, len, &want) == GIMG_OK, "%s", gimg_last_error());
    char why[160];
    if (im.data && want.data)
        CHECK(same_image(&im, &want, why, sizeof why), "bad CRCs changed the pixels: %s", why);
    gimg_image_free(&im);
    gimg_image_free(&want);
    free(b.p);
    free(plain);
}

/* Every prefix of a file is refused as truncated, up to a missing IEND;
 * data after IEND is ignored. */
static void test_truncated(void)
{
    for (int il = 0; il < 2; il++) {
        png_spec s;
        fill_spec(&s, 17, 9, RGBA, 16, il, 0, 61);
        size_t len;
        unsigned char *buf = make_png(&s, &len);
        free(s.samples);
        for (size_t n = 0; n < len; n++) {
            unsigned char *cut = malloc(n ? n : 1);   /* exactly n bytes, for ASan */
            memcpy(cut, buf, n);
            char what[96];
            snprintf(what, sizeof what, "%s cut to %zu of %zu bytes",
                     il ? "interlaced" : "plain", n, len);
            expect_refusal(what, cut, n, GIMG_E_FORMAT, "truncated PNG file");
            free(cut);
        }
        bytes more = { 0 };
        put(&more, buf, len);
        put(&more, "junk after IEND", 15);
        gimg_image im;
        CHECK(gimg_decode_memory(more.p, more.len, &im) == GIMG_OK, "data after IEND: %s",
              gimg_last_error());
        gimg_image_free(&im);
        free(more.p);
        free(buf);
    }
}

/* Large images (4 MiB and more) check their CRCs and fault their pages in
 * on a second thread while libspng decodes: the same answers as small
 * ones. */
static void test_large(void)
{
    gimg_image src, got;
    if (gimg_image_alloc(&src, 1300, 1100, 3, GIMG_U8) != GIMG_OK)   /* 4.3 MB */
        return;
    testimg_fill_random(&src, 1234);
    unsigned char *buf = NULL;
    size_t len;
    CHECK(gimg_encode(&src, GIMG_FMT_PNG, NULL, &buf, &len) == GIMG_OK, "encode: %s",
          gimg_last_error());
    if (!buf) {
        gimg_image_free(&src);
        return;
    }
    CHECK(gimg_decode_memory(buf, len, &got) == GIMG_OK, "decode: %s", gimg_last_error());
    char why[160];
    if (got.data)
        CHECK(same_image(&got, &src, why, sizeof why), "decoded %s", why);
    gimg_image_free(&got);
    /* A bit flipped in the middle of the image data, then in IEND's CRC. */
    const size_t spots[2] = { len / 2, len - 1 };
    const char *const chunk[2] = { "IDAT", "IEND" };
    for (int k = 0; k < 2; k++) {
        buf[spots[k]] ^= 0x04;
        char reason[64];
        snprintf(reason, sizeof reason, "CRC mismatch in the %s chunk", chunk[k]);
        expect_refusal(reason, buf, len, GIMG_E_FORMAT, reason);
        buf[spots[k]] ^= 0x04;
    }
    /* Cut in IEND's CRC; cut in the image data. */
    expect_refusal("cut in IEND", buf, len - 2, GIMG_E_FORMAT,
                   "truncated PNG file (cut short after the image data");
    expect_refusal("cut in half", buf, len / 2, GIMG_E_FORMAT,
                   "truncated PNG file (cut short in the image data)");
    /* IHDR claiming 16 times the rows the data holds. */
    buf[16 + 6] = (unsigned char)((1100 * 16) >> 8), buf[16 + 7] = (unsigned char)(1100 * 16);
    const uint32_t crc = libdeflate_crc32(0, buf + 12, 17);
    buf[29] = (unsigned char)(crc >> 24), buf[30] = (unsigned char)(crc >> 16);
    buf[31] = (unsigned char)(crc >> 8), buf[32] = (unsigned char)crc;
    expect_refusal("16 times the rows", buf, len, GIMG_E_FORMAT, "ends before the last row");
    free(buf);
    gimg_image_free(&src);
}

/* --------------------------------------------------- bounded memory */

/* A zlib stream that inflates to 1 + 258 * runs bytes of value `byte`:
 * one fixed-Huffman block of a literal and `runs` matches of 258 bytes
 * at distance 1 (13 bits each, so about 1 : 160). */
typedef struct {
    bytes b;
    uint64_t acc;
    int nacc;
} bitw;

static void bits(bitw *w, uint32_t v, int n)
{
    w->acc |= (uint64_t)v << w->nacc;
    w->nacc += n;
    while (w->nacc >= 8) {
        unsigned char c = (unsigned char)w->acc;
        put(&w->b, &c, 1);
        w->acc >>= 8;
        w->nacc -= 8;
    }
}

/* A Huffman code of n bits, sent from its first bit (the high one). */
static void code(bitw *w, uint32_t c, int n)
{
    for (int i = n - 1; i >= 0; i--)
        bits(w, c >> i & 1, 1);
}

static unsigned char *byte_bomb(unsigned char byte, uint32_t runs, size_t *len)
{
    bitw w = { { 0 }, 0, 0 };
    bits(&w, 0x78, 8), bits(&w, 0x01, 8);   /* zlib header */
    bits(&w, 1, 1), bits(&w, 1, 2);         /* final block, fixed Huffman */
    if (byte < 144)
        code(&w, 0x30u + byte, 8);          /* the literal */
    else
        code(&w, 0x190u + byte - 144, 9);
    for (uint32_t i = 0; i < runs; i++) {
        code(&w, 0xC5, 8);                  /* length 258 (symbol 285) */
        code(&w, 0, 5);                     /* distance 1 */
    }
    code(&w, 0, 7);                         /* end of block */
    if (w.nacc)
        bits(&w, 0, 8 - w.nacc);
    /* Adler-32 of n bytes c: A = 1 + n c, B = n + c n (n + 1) / 2, mod
     * 65521, whose inverse of 2 is 32761. */
    const uint64_t m = 65521, n = 1 + 258 * (uint64_t)runs;
    const uint64_t a = (1 + n % m * byte) % m;
    const uint64_t b = (n % m + n % m * ((n + 1) % m) % m * byte % m * 32761) % m;
    put_be32(&w.b, (uint32_t)(b << 16 | a));
    *len = w.b.len;
    return w.b.p;
}

static unsigned char *zero_bomb(uint32_t runs, size_t *len)
{
    return byte_bomb(0, runs, len);
}

/* Decodes buf in a child process; stores the status, how much the child's
 * peak memory grew (KiB) and its CPU time (s). */
static void decode_measured(const unsigned char *buf, size_t len, int *status, long *grew_kib,
                            double *cpu_s)
{
    int fd[2];
    *status = -1, *grew_kib = -1, *cpu_s = -1;
    if (pipe(fd) != 0)
        return;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        struct rusage before, after;
        getrusage(RUSAGE_SELF, &before);
        gimg_image im;
        gimg_status st = gimg_decode_memory(buf, len, &im);
        gimg_image_free(&im);
        getrusage(RUSAGE_SELF, &after);
        long r[3] = { (long)st, after.ru_maxrss - before.ru_maxrss,
                      (after.ru_utime.tv_sec - before.ru_utime.tv_sec) * 1000000L +
                          (after.ru_utime.tv_usec - before.ru_utime.tv_usec) +
                          (after.ru_stime.tv_sec - before.ru_stime.tv_sec) * 1000000L +
                          (after.ru_stime.tv_usec - before.ru_stime.tv_usec) };
        (void)!write(fd[1], r, sizeof r);
        _exit(0);
    }
    close(fd[1]);
    long r[3];
    if (pid > 0 && read(fd[0], r, sizeof r) == (ssize_t)sizeof r)
        *status = (int)r[0], *grew_kib = r[1], *cpu_s = (double)r[2] / 1e6;
    close(fd[0]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
}

/* libspng keeps text chunks, profiles and the like in memory (inflated):
 * a 16 MiB iTXt is within the limits and decodes (an XMP packet of 16 MiB
 * less 2 bytes, kept as the image's XMP); a zTXt or iCCP that
 * inflates to 256 MiB (from 1.7 MB) is refused at the limit (64 MiB),
 * before or after the image data, quickly and without the memory; so are
 * more than 1000 text chunks. */
static void test_ancillary_limits(void)
{
    const size_t big = (size_t)16 << 20;
    unsigned char *itxt = calloc(1, 20 + big);
    memcpy(itxt, "XML:com.adobe.xmp", 17);   /* keyword, then 0 0 0 0 0 */
    memset(itxt + 22, 'x', big - 2);
    size_t len;
    unsigned char *buf;
    bytes b = { 0 };
    put_chunk(&b, "iTXt", itxt, big + 20, 0);
    free(itxt);
    buf = gray_png_with(b.p, b.len, 0, 0, &len);
    gimg_image im;
    CHECK(gimg_decode_memory(buf, len, &im) == GIMG_OK, "a 16 MiB iTXt: %s", gimg_last_error());
    CHECK(im.meta && im.meta->xmp_bytes == big - 2 && im.meta->xmp[0] == 'x',
          "a 16 MiB XMP packet (within meta.c's cap) not kept");
    gimg_image_free(&im);
    free(buf);
    free(b.p);

    /* 1001 text chunks: past libspng's count of 1000. */
    b = (bytes){ 0 };
    for (int k = 0; k <= 1000; k++) {
        char text[32];
        int n = snprintf(text, sizeof text, "Key%c%d", 0, k);
        put_chunk(&b, "tEXt", text, (size_t)n, 0);
    }
    buf = gray_png_with(b.p, b.len, 0, 0, &len);
    expect_refusal("1001 tEXt chunks", buf, len, GIMG_E_LIMIT, "at most 1000 ancillary chunks");
    free(buf);
    free(b.p);

    size_t zlen;
    unsigned char *z = zero_bomb(1u << 20, &zlen);   /* 256 MiB */
    static const struct {
        const char *type, *head;
        size_t head_len;
        int after_idat;
    } bombs[] = {
        { "zTXt", "Comment\0", 9, 0 },
        { "iCCP", "profile\0", 9, 0 },
        { "zTXt", "Comment\0", 9, 1 },
    };
    for (size_t k = 0; k < sizeof bombs / sizeof bombs[0]; k++) {
        bytes chunk = { 0 }, data = { 0 };
        put(&data, bombs[k].head, bombs[k].head_len);   /* keyword, NUL, method 0 */
        put(&data, z, zlen);
        put_chunk(&chunk, bombs[k].type, data.p, data.len, 0);
        if (bombs[k].after_idat) {
            unsigned char *plain = gray_png_with(NULL, 0, 0, 0, &len);
            bytes f = { 0 };
            put(&f, plain, len - 12);
            put(&f, chunk.p, chunk.len);
            put(&f, plain + len - 12, 12);
            free(plain);
            buf = f.p, len = f.len;
        } else {
            buf = gray_png_with(chunk.p, chunk.len, 0, 0, &len);
        }
        char what[64];
        snprintf(what, sizeof what, "a %s bomb%s", bombs[k].type,
                 bombs[k].after_idat ? " after the image data" : "");
        expect_refusal(what, buf, len, GIMG_E_LIMIT, "PNG metadata over the limits");
        int status;
        long grew;
        double cpu;
        decode_measured(buf, len, &status, &grew, &cpu);
        CHECK(status == GIMG_E_LIMIT, "%s: status %d in the child", what, status);
        if (!under_valgrind()) {
            CHECK(grew >= 0 && grew < 128 * 1024, "%s: memory grew by %ld KiB", what, grew);
            if (!getenv("GIMG_TEST_SLOW"))
                CHECK(cpu >= 0 && cpu < SANITIZER_SLOWDOWN, "%s: %.2f s of CPU", what, cpu);
        }
        free(buf);
        free(chunk.p);
        free(data.p);
    }
    free(z);
}

/* ------------------------------------------------------------ metadata */

/* The types of buf's chunks, space-separated ("IHDR iCCP ... IEND"). */
static void chunk_types(const unsigned char *buf, size_t len, char *out, size_t size)
{
    size_t at = 0;
    out[0] = '\0';
    for (size_t p = 8; p + 12 <= len && at + 6 < size;) {
        const uint32_t n = (uint32_t)buf[p] << 24 | (uint32_t)buf[p + 1] << 16 |
                           (uint32_t)buf[p + 2] << 8 | buf[p + 3];
        at += (size_t)snprintf(out + at, size - at, "%s%.4s", at ? " " : "",
                               (const char *)buf + p + 4);
        if (len - p - 12 < n)
            break;
        p += 12 + (size_t)n;
    }
}

/* The data of the first chunk of `type` in buf (NULL if none); *n its size. */
static const unsigned char *chunk_data(const unsigned char *buf, size_t len, const char *type,
                                       size_t *n)
{
    for (size_t p = 8; p + 12 <= len;) {
        const uint32_t k = (uint32_t)buf[p] << 24 | (uint32_t)buf[p + 1] << 16 |
                           (uint32_t)buf[p + 2] << 8 | buf[p + 3];
        if (len - p - 12 < k)
            return NULL;
        if (memcmp(buf + p + 4, type, 4) == 0) {
            *n = k;
            return buf + p + 8;
        }
        p += 12 + (size_t)k;
    }
    return NULL;
}

/* The samples of a non-interlaced 8- or 16-bit PNG as stored (before any
 * sBIT), read here without libspng: the IDATs inflated with libdeflate
 * and the rows unfiltered. malloc'd (the caller frees); NULL on failure. */
static uint16_t *stored_samples(const unsigned char *buf, size_t len, int channels)
{
    size_t n;
    const unsigned char *ihdr = chunk_data(buf, len, "IHDR", &n);
    if (!ihdr || ihdr[12] != 0 || (ihdr[8] != 8 && ihdr[8] != 16))
        return NULL;
    const size_t w = gimg_be32(ihdr), h = gimg_be32(ihdr + 4), sample_bytes = ihdr[8] / 8;
    const size_t bpp = (size_t)channels * sample_bytes, row = w * bpp;
    bytes z = { 0 };
    for (size_t p = 8; p + 12 <= len;) {
        const uint32_t k = gimg_be32(buf + p);
        if (len - p - 12 < k)
            break;
        if (memcmp(buf + p + 4, "IDAT", 4) == 0)
            put(&z, buf + p + 8, k);
        p += 12 + (size_t)k;
    }
    unsigned char *raw = malloc(h * (row + 1));
    uint16_t *out = malloc(w * h * (size_t)channels * sizeof *out);
    struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
    size_t got = 0;
    int ok = raw && out && d && z.p &&
             libdeflate_zlib_decompress(d, z.p, z.len, raw, h * (row + 1), &got) ==
                 LIBDEFLATE_SUCCESS &&
             got == h * (row + 1);
    libdeflate_free_decompressor(d);
    free(z.p);
    for (size_t y = 0; ok && y < h; y++) {
        unsigned char *cur = raw + y * (row + 1) + 1, *prev = y ? cur - (row + 1) : NULL;
        const int type = cur[-1];
        for (size_t i = 0; i < row; i++) {
            const int a = i >= bpp ? cur[i - bpp] : 0, b = prev ? prev[i] : 0,
                      c = prev && i >= bpp ? prev[i - bpp] : 0;
            cur[i] = (unsigned char)(cur[i] + (type == 1 ? a : type == 2 ? b
                                               : type == 3 ? (a + b) / 2
                                               : type == 4 ? paeth(a, b, c) : 0));
        }
        for (size_t i = 0; i < w * (size_t)channels; i++)
            out[y * w * channels + i] =
                sample_bytes == 2 ? (uint16_t)(cur[2 * i] << 8 | cur[2 * i + 1]) : cur[i];
    }
    free(raw);
    if (!ok) {
        free(out);
        return NULL;
    }
    return out;
}

/* A valid-looking ICC profile of n bytes (n >= 132): the header's size,
 * version 2.1, a display RGB profile with the 'acsp' signature, no tags,
 * then seeded bytes. malloc'd. */
static unsigned char *make_icc(size_t n, uint64_t seed)
{
    unsigned char *p = malloc(n);
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)testimg_next(&seed);
    memset(p, 0, 132);
    p[0] = (unsigned char)(n >> 24), p[1] = (unsigned char)(n >> 16);
    p[2] = (unsigned char)(n >> 8), p[3] = (unsigned char)n;
    p[8] = 2, p[9] = 0x10;
    memcpy(p + 12, "mntrRGB XYZ ", 12);
    memcpy(p + 36, "acsp", 4);
    return p;
}

/* A little-endian EXIF block: IFD0 with ImageDescription ("gimg test")
 * and Orientation; `ifd0_at` overrides where the header says IFD0 is. */
static unsigned char *make_exif(int orientation, uint32_t ifd0_at, size_t *n)
{
    static const unsigned char k[] = {
        'I', 'I', 42, 0, 8, 0, 0, 0,                      /* header, IFD0 at 8 */
        2, 0,                                             /* 2 entries */
        0x0e, 0x01, 2, 0, 10, 0, 0, 0, 38, 0, 0, 0,       /* ImageDescription, at 38 */
        0x12, 0x01, 3, 0, 1, 0, 0, 0, 1, 0, 0, 0,         /* Orientation */
        0, 0, 0, 0,                                       /* no IFD1 */
        'g', 'i', 'm', 'g', ' ', 't', 'e', 's', 't', 0,
    };
    unsigned char *p = malloc(sizeof k);
    memcpy(p, k, sizeof k);
    p[30] = (unsigned char)orientation;
    if (ifd0_at) {
        p[4] = (unsigned char)ifd0_at, p[5] = (unsigned char)(ifd0_at >> 8);
        p[6] = (unsigned char)(ifd0_at >> 16), p[7] = (unsigned char)(ifd0_at >> 24);
    }
    *n = sizeof k;
    return p;
}

static const char xmp_packet[] =
    "<?xpacket begin=\"\xef\xbb\xbf\" id=\"W5M0MpCehiHzreSzNTczkc9d\"?>\n"
    "<x:xmpmeta xmlns:x=\"adobe:ns:meta/\"><rdf:RDF "
    "xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\"><rdf:Description "
    "rdf:about=\"\" xmlns:dc=\"http://purl.org/dc/elements/1.1/\"><dc:creator><rdf:Seq>"
    "<rdf:li>gimg</rdf:li></rdf:Seq></dc:creator></rdf:Description></rdf:RDF></x:xmpmeta>\n"
    "<?xpacket end=\"w\"?>";

/* Text chunks of every kind, in an order that mixes them. */
static const gimg_text sample_texts[] = {
    { "Title", "A title", NULL, NULL, 0, 0 },
    { "Comment", "Much repeated text, much repeated text, much repeated text.", NULL, NULL, 0,
      1 },
    { "Description", "\xc3\xa9t\xc3\xa9 \xe2\x80\x94 summer", "fr", "Beschreibung", 1, 0 },
    { "Author", "\xc3\x9cn\xc3\xaf" "code, compressed", "", "", 1, 1 },
    { "Software", "gimg", NULL, NULL, 0, 0 },
};
#define N_SAMPLE_TEXTS ((int)(sizeof sample_texts / sizeof sample_texts[0]))

static int same_string(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

/* Where m's texts differ from want (n of them), or "" if they agree. */
static void compare_texts(const gimg_meta *m, const gimg_text *want, int n, char *why,
                          size_t size)
{
    why[0] = '\0';
    if (!m || m->n_texts != n) {
        snprintf(why, size, "%d texts, expected %d", m ? m->n_texts : 0, n);
        return;
    }
    for (int i = 0; i < n; i++) {
        const gimg_text *a = &m->texts[i], *b = &want[i];
        if (!same_string(a->keyword, b->keyword) || !same_string(a->text, b->text) ||
            a->international != b->international || a->compressed != b->compressed ||
            (b->international && (!same_string(a->language, b->language) ||
                                  !same_string(a->translated_keyword, b->translated_keyword))) ||
            (!b->international && (a->language || a->translated_keyword))) {
            snprintf(why, size, "text %d: \"%s\" (%d, %d) \"%.30s\", expected \"%s\" (%d, %d)",
                     i, a->keyword ? a->keyword : "(null)", a->international, a->compressed,
                     a->text ? a->text : "(null)", b->keyword, b->international, b->compressed);
            return;
        }
    }
}

/* An image with metadata of every kind PNG holds goes through the public
 * API (gimg_encode, gimg_decode_memory) and comes back whole: the chunks
 * in their order, the ICC profile, EXIF (orientation 6) and XMP byte for
 * byte, the resolution within the rounding of 1 pixel per metre (a whole
 * dpi exactly), the texts in order with their kinds; at every level, 0
 * (stored) included. --strip writes none of it. */
static void test_meta_round_trip(void)
{
    static const struct {
        int channels;
        gimg_sample sample;
        int level;
        double x_dpi, y_dpi;
    } cases[] = {
        { 3, GIMG_U8, 6, 300, 300 },     { 2, GIMG_U16, 0, 72, 96 },
        { 4, GIMG_U8, 12, 299.5, 0 },    { 1, GIMG_U16, 1, 2540.0, 1.0 },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        gimg_image src, got;
        if (gimg_image_alloc(&src, 29, 17, cases[k].channels, cases[k].sample) != GIMG_OK)
            continue;
        testimg_fill_random(&src, 300 + k);
        gimg_meta *m = gimg_meta_new();
        unsigned char *icc = make_icc(3000, k);
        size_t exif_bytes;
        unsigned char *exif = make_exif(6, 0, &exif_bytes);
        gimg_meta_add_icc(&m, icc, 3000);
        gimg_meta_add_exif(&m, exif, exif_bytes);
        gimg_meta_add_xmp(&m, (const unsigned char *)xmp_packet, strlen(xmp_packet));
        for (int i = 0; i < N_SAMPLE_TEXTS; i++) {
            const gimg_text *t = &sample_texts[i];
            gimg_meta_add_text(&m, t->keyword, t->text, strlen(t->text), t->language,
                               t->translated_keyword, t->international, t->compressed);
        }
        m->x_dpi = cases[k].x_dpi;
        m->y_dpi = cases[k].y_dpi;
        src.meta = m;
        char what[64];
        snprintf(what, sizeof what, "%d channels, %d-bit, level %d", src.channels,
                 8 * (int)src.sample, cases[k].level);
        gimg_write_opts o;
        gimg_write_opts_init(&o);
        o.png_level = cases[k].level;
        unsigned char *buf = NULL;
        size_t len = 0;
        CHECK(gimg_encode(&src, GIMG_FMT_PNG, &o, &buf, &len) == GIMG_OK, "%s: encode: %s",
              what, gimg_last_error());
        if (!buf) {
            gimg_image_free(&src);
            free(icc);
            free(exif);
            continue;
        }
        char types[256];
        chunk_types(buf, len, types, sizeof types);
        CHECK(strcmp(types, "IHDR iCCP pHYs eXIf iTXt tEXt zTXt iTXt iTXt tEXt IDAT IEND") == 0,
              "%s: chunks %s", what, types);
        size_t n;
        const unsigned char *iccp = chunk_data(buf, len, "iCCP", &n);
        CHECK(iccp && n > 5 && memcmp(iccp, "icc\0\0", 5) == 0, "%s: iCCP's name", what);
        gimg_status st = gimg_decode_memory(buf, len, &got);
        CHECK(st == GIMG_OK, "%s: decode: %s", what, gimg_last_error());
        if (st == GIMG_OK) {
            CHECK(same_pixels(&got, &src) && got.maxval == 0, "%s: pixels differ", what);
            const gimg_meta *g = got.meta;
            CHECK(g != NULL, "%s: no metadata", what);
            if (g) {
                CHECK(g->icc_bytes == 3000 && memcmp(g->icc, icc, 3000) == 0,
                      "%s: ICC profile of %zu bytes", what, g->icc_bytes);
                CHECK(g->exif_bytes == exif_bytes && memcmp(g->exif, exif, exif_bytes) == 0,
                      "%s: EXIF of %zu bytes", what, g->exif_bytes);
                CHECK(g->orientation == 6, "%s: orientation %d", what, g->orientation);
                CHECK(g->xmp_bytes == strlen(xmp_packet) &&
                          memcmp(g->xmp, xmp_packet, g->xmp_bytes) == 0,
                      "%s: XMP of %zu bytes", what, g->xmp_bytes);
                /* One pixel per metre is 0.0254 dpi: rounding moves by half
                 * that; a whole number of dpi comes back exactly. */
                const double want_x = cases[k].x_dpi;
                const double want_y = cases[k].y_dpi ? cases[k].y_dpi : want_x;
                const double slack_x = want_x == (int)want_x ? 0 : 0.0127 + 1e-9;
                const double slack_y = want_y == (int)want_y ? 0 : 0.0127 + 1e-9;
                CHECK(fabs(g->x_dpi - want_x) <= slack_x && fabs(g->y_dpi - want_y) <= slack_y,
                      "%s: %.9g x %.9g dpi, expected %g x %g", what, g->x_dpi, g->y_dpi,
                      want_x, want_y);
                char why[200];
                compare_texts(g, sample_texts, N_SAMPLE_TEXTS, why, sizeof why);
                CHECK(!why[0], "%s: %s", what, why);
                CHECK(g->warning[0] == '\0', "%s: warning '%s'", what, g->warning);
            }
        }
        gimg_image_free(&got);
        /* --strip: nothing but the pixels. */
        free(buf);
        buf = NULL;
        o.strip = 1;
        CHECK(gimg_encode(&src, GIMG_FMT_PNG, &o, &buf, &len) == GIMG_OK, "%s: --strip: %s",
              what, gimg_last_error());
        if (buf) {
            chunk_types(buf, len, types, sizeof types);
            CHECK(strcmp(types, "IHDR IDAT IEND") == 0, "%s: --strip wrote %s", what, types);
            if (gimg_decode_memory(buf, len, &got) == GIMG_OK)
                CHECK(got.meta == NULL, "%s: --strip: metadata read back", what);
            gimg_image_free(&got);
        }
        free(buf);
        free(icc);
        free(exif);
        gimg_image_free(&src);
    }
}

/* b significant bits of v scaled to depth bits, worked out bit by bit:
 * bit i from the top is bit (i mod b) of v from its top (PNG 12.5). */
static unsigned replicated(unsigned v, unsigned b, unsigned depth)
{
    unsigned out = 0;
    for (unsigned i = 0; i < depth; i++)
        out = out << 1 | ((v >> (b - 1 - i % b)) & 1u);
    return out;
}

/* Images of b significant bits (maxval 2^b - 1) come back exactly, with
 * their maxval and sample size; the file holds sBIT b for every channel
 * and the samples scaled up by left bit replication (read here without
 * libspng), at the image's own 8 or 16 bits. A maxval of the full range
 * writes no sBIT and reads back as maxval 0. */
static void test_sbit_round_trip(void)
{
    static const struct {
        int channels;
        gimg_sample sample;
        unsigned maxval, depth, sbit;
    } cases[] = {
        { 1, GIMG_U16, 4095, 16, 12 }, { 3, GIMG_U16, 1023, 16, 10 },
        { 4, GIMG_U8, 31, 8, 5 },      { 2, GIMG_U16, 32767, 16, 15 },
        { 1, GIMG_U8, 1, 8, 1 },       { 3, GIMG_U16, 255, 16, 8 },
        { 2, GIMG_U16, 7, 16, 3 },     { 3, GIMG_U16, 511, 16, 9 },
        { 1, GIMG_U8, 255, 8, 0 },     { 1, GIMG_U16, 65535, 16, 0 },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const unsigned maxval = cases[k].maxval;
        gimg_image src, got;
        if (gimg_image_alloc(&src, 33, 19, cases[k].channels, cases[k].sample) != GIMG_OK)
            continue;
        src.maxval = maxval;
        uint64_t seed = 900 + k;
        const size_t count = (size_t)src.width * src.height * src.channels;
        for (size_t i = 0; i < count; i++) {
            /* the maxval, the low values in order, seeded ones between */
            const unsigned r = (unsigned)(testimg_next(&seed) % (maxval + 1));
            const unsigned v = i == 1 ? maxval : i % 2 == 0 && i / 2 <= maxval ? (unsigned)(i / 2) : r;
            if (src.sample == GIMG_U8)
                src.data[i] = (unsigned char)v;
            else
                ((uint16_t *)src.data)[i] = (uint16_t)v;
        }
        char what[64];
        snprintf(what, sizeof what, "%d channels, %d-bit, maxval %u", src.channels,
                 8 * (int)src.sample, maxval);
        unsigned char *buf = NULL;
        size_t len = 0, n = 0;
        CHECK(gimg_encode(&src, GIMG_FMT_PNG, NULL, &buf, &len) == GIMG_OK, "%s: encode: %s",
              what, gimg_last_error());
        if (!buf) {
            gimg_image_free(&src);
            continue;
        }
        const unsigned char *ihdr = chunk_data(buf, len, "IHDR", &n);
        CHECK(ihdr && ihdr[8] == cases[k].depth, "%s: stored at %d bits", what,
              ihdr ? ihdr[8] : -1);
        const unsigned char *sbit = chunk_data(buf, len, "sBIT", &n);
        if (cases[k].sbit) {
            int all = sbit && n == (size_t)src.channels;
            for (size_t i = 0; all && i < n; i++)
                all = sbit[i] == cases[k].sbit;
            CHECK(all, "%s: no sBIT of %u bits per channel", what, cases[k].sbit);
        } else {
            CHECK(!sbit, "%s: an sBIT chunk", what);
        }
        uint16_t *stored = stored_samples(buf, len, src.channels);
        CHECK(stored != NULL, "%s: the test could not read the stored samples", what);
        const unsigned b = cases[k].sbit ? cases[k].sbit : cases[k].depth;
        size_t bad = count;
        for (size_t i = 0; stored && i < count && bad == count; i++) {
            const unsigned v = src.sample == GIMG_U8 ? src.data[i] : ((uint16_t *)src.data)[i];
            if (stored[i] != replicated(v, b, cases[k].depth))
                bad = i;
        }
        CHECK(!stored || bad == count, "%s: stored sample %zu is %u, expected %u", what, bad,
              stored && bad < count ? stored[bad] : 0,
              bad < count ? replicated(src.sample == GIMG_U8 ? src.data[bad]
                                                             : ((uint16_t *)src.data)[bad],
                                       b, cases[k].depth)
                          : 0);
        free(stored);
        gimg_status st = gimg_decode_memory(buf, len, &got);
        CHECK(st == GIMG_OK, "%s: decode: %s", what, gimg_last_error());
        if (st == GIMG_OK) {
            const gimg_sample want_sample = src.sample;
            const unsigned want_maxval = cases[k].sbit ? maxval : 0;
            CHECK(got.sample == want_sample && got.maxval == want_maxval,
                  "%s: read back as %d-bit, maxval %u", what, 8 * (int)got.sample, got.maxval);
            size_t diff = count;
            for (size_t i = 0; i < count && diff == count && got.sample == want_sample; i++) {
                const unsigned a = src.sample == GIMG_U8 ? src.data[i] : ((uint16_t *)src.data)[i];
                const unsigned g = got.sample == GIMG_U8 ? got.data[i] : ((uint16_t *)got.data)[i];
                if (a != g)
                    diff = i;
            }
            CHECK(diff == count, "%s: sample %zu differs", what, diff);
        }
        gimg_image_free(&got);
        free(buf);
        gimg_image_free(&src);
    }
}

/* sBIT in files made here: every channel's bits equal and below the
 * depth of an 8- or 16-bit image bring the samples down (v >> (depth -
 * b)) and set the maxval; channels that disagree, palettes, gray below 8
 * bits, and bits equal to the depth leave the samples as they are. */
static void test_sbit_decode(void)
{
    static const struct {
        int color, depth, trns;
        unsigned char bits[4];
        unsigned shift;   /* 0: sBIT ignored */
    } cases[] = {
        { GRAY, 16, 0, { 12 }, 4 },           { RGB, 16, 0, { 10, 10, 10 }, 6 },
        { RGBA, 8, 0, { 5, 5, 5, 5 }, 3 },    { GRAY_ALPHA, 8, 0, { 3, 3 }, 5 },
        { GRAY, 8, 1, { 4 }, 4 },             { RGB, 16, 1, { 11, 11, 11 }, 5 },
        { RGB, 8, 0, { 5, 6, 5 }, 0 },        { RGBA, 8, 0, { 5, 5, 5, 8 }, 0 },
        { GRAY, 4, 0, { 3 }, 0 },             { PALETTE, 8, 0, { 5, 5, 5 }, 0 },
        { GRAY, 16, 0, { 16 }, 0 },           { GRAY_ALPHA, 16, 0, { 12, 13 }, 0 },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        png_spec s;
        fill_spec(&s, 23, 11, cases[k].color, cases[k].depth, 0, cases[k].trns, 40 + k);
        const int n = cases[k].color == GRAY_ALPHA ? 2 : cases[k].color == RGBA ? 4
                    : cases[k].color == GRAY ? 1 : 3;
        bytes extra = { 0 };
        put_chunk(&extra, "sBIT", cases[k].bits, (size_t)n, 0);
        s.after_ihdr = &extra;
        size_t len;
        unsigned char *buf = make_png(&s, &len);
        gimg_image want, got;
        expected_image(&s, &want);
        const size_t count = (size_t)want.width * want.height * want.channels;
        for (size_t i = 0; i < count; i++) {
            if (want.sample == GIMG_U16)
                ((uint16_t *)want.data)[i] >>= cases[k].shift;
            else
                want.data[i] >>= cases[k].shift;
        }
        char what[64];
        snprintf(what, sizeof what, "%s %d-bit%s, sBIT %u %u %u %u", color_name(cases[k].color),
                 cases[k].depth, cases[k].trns ? " tRNS" : "", cases[k].bits[0],
                 cases[k].bits[1], cases[k].bits[2], cases[k].bits[3]);
        gimg_status st = gimg_decode_memory(buf, len, &got);
        CHECK(st == GIMG_OK, "%s: %s", what, gimg_last_error());
        if (st == GIMG_OK) {
            const unsigned want_maxval =
                cases[k].shift ? (1u << (cases[k].depth - cases[k].shift)) - 1 : 0;
            char why[160];
            CHECK(got.maxval == want_maxval, "%s: maxval %u, expected %u", what, got.maxval,
                  want_maxval);
            CHECK(same_image(&got, &want, why, sizeof why), "%s: %s", what, why);
        }
        gimg_image_free(&got);
        gimg_image_free(&want);
        free(buf);
        free(extra.p);
        free(s.samples);
    }
}

/* zlib stream of p[0 .. n-1], malloc'd. */
static unsigned char *zlib_of(const void *p, size_t n, size_t *zn)
{
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(9);
    size_t cap = libdeflate_zlib_compress_bound(c, n);
    unsigned char *z = malloc(cap);
    *zn = libdeflate_zlib_compress(c, p, n, z, cap);
    libdeflate_free_compressor(c);
    return z;
}

/* A chunk of keyword, the bytes `mid` (flags, language...) and text,
 * compressed when asked. */
static void put_text_chunk(bytes *b, const char *type, const char *keyword, const void *mid,
                           size_t mid_len, const char *text, int compress)
{
    bytes d = { 0 };
    put(&d, keyword, strlen(keyword) + 1);
    put(&d, mid, mid_len);
    if (compress) {
        size_t zn;
        unsigned char *z = zlib_of(text, strlen(text), &zn);
        put(&d, z, zn);
        free(z);
    } else {
        put(&d, text, strlen(text));
    }
    put_chunk(b, type, d.p, d.len, 0);
    free(d.p);
}

/* A file made here with metadata of every kind, some of it after the
 * image data, reads as written: the compressed XMP iTXt is the XMP
 * packet, texts keep their order and kinds wherever they are; a pHYs of
 * unknown unit gives no resolution. */
static void test_meta_decode(void)
{
    for (int unit = 0; unit < 2; unit++) {
        png_spec s;
        fill_spec(&s, 9, 7, RGB, 8, 0, 0, 61);
        bytes before = { 0 }, after = { 0 };
        unsigned char *icc = make_icc(700, 5);
        size_t zn, exif_bytes;
        unsigned char *z = zlib_of(icc, 700, &zn);
        bytes iccp = { 0 };
        put(&iccp, "Some profile\0\0", 14);
        put(&iccp, z, zn);
        put_chunk(&before, "iCCP", iccp.p, iccp.len, 0);
        unsigned char phys[9] = { 0, 0, 0x0e, 0xc4, 0, 0, 0x0b, 0x12, (unsigned char)unit };
        put_chunk(&before, "pHYs", phys, 9, 0);   /* 3780 x 2834 ppm */
        unsigned char *exif = make_exif(3, 0, &exif_bytes);
        put_chunk(&before, "eXIf", exif, exif_bytes, 0);
        put_text_chunk(&before, "tEXt", "Title", NULL, 0, "A title", 0);
        put_text_chunk(&before, "iTXt", "XML:com.adobe.xmp", "\1\0\0\0", 4, xmp_packet, 1);
        put_text_chunk(&before, "zTXt", "Comment", "\0", 1,
                       "Much repeated text, much repeated text, much repeated text.", 1);
        put_text_chunk(&after, "iTXt", "Description", "\0\0fr\0Beschreibung\0", 18,
                       "\xc3\xa9t\xc3\xa9 \xe2\x80\x94 summer", 0);
        put_text_chunk(&after, "iTXt", "Author", "\1\0\0\0", 4,
                       "\xc3\x9cn\xc3\xaf" "code, compressed", 1);
        put_text_chunk(&after, "tEXt", "Software", NULL, 0, "gimg", 0);
        s.after_ihdr = &before;
        s.after_idat = &after;
        size_t len;
        unsigned char *buf = make_png(&s, &len);
        gimg_image got, want;
        expected_image(&s, &want);
        gimg_status st = gimg_decode_memory(buf, len, &got);
        CHECK(st == GIMG_OK, "unit %d: %s", unit, gimg_last_error());
        if (st == GIMG_OK) {
            char why[200];
            CHECK(same_image(&got, &want, why, sizeof why), "unit %d: %s", unit, why);
            const gimg_meta *m = got.meta;
            CHECK(m && m->icc_bytes == 700 && memcmp(m->icc, icc, 700) == 0, "ICC profile");
            CHECK(m && m->exif_bytes == exif_bytes && m->orientation == 3, "EXIF");
            CHECK(m && m->xmp_bytes == strlen(xmp_packet) &&
                      memcmp(m->xmp, xmp_packet, m->xmp_bytes) == 0,
                  "XMP");
            if (unit)
                /* 3780 ppm is what 96 dpi writes: 96; no whole dpi writes 2834. */
                CHECK(m && m->x_dpi == 96 && fabs(m->y_dpi - 71.9836) < 1e-9,
                      "pHYs in metres: %g x %g dpi", m ? m->x_dpi : 0, m ? m->y_dpi : 0);
            else
                CHECK(m && m->x_dpi == 0 && m->y_dpi == 0, "pHYs of unknown unit: %g x %g dpi",
                      m ? m->x_dpi : 0, m ? m->y_dpi : 0);
            compare_texts(m, sample_texts, N_SAMPLE_TEXTS, why, sizeof why);
            CHECK(!why[0], "%s", why);
            CHECK(m && !m->warning[0], "warning '%s'", m ? m->warning : "");
        }
        gimg_image_free(&got);
        gimg_image_free(&want);
        free(buf);
        free(before.p);
        free(after.p);
        free(iccp.p);
        free(z);
        free(icc);
        free(exif);
        free(s.samples);
    }
}

/* Decodes buf, which must give the pixels of plain (the same file without
 * the hostile chunks), a warning holding `warning`, and no metadata of
 * the kinds `absent`; returns the decoded image's metadata kinds. */
static unsigned decodes_with_warning(const char *what, const unsigned char *buf, size_t len,
                                     const gimg_image *plain, const char *warning,
                                     unsigned absent)
{
    gimg_image im;
    unsigned kinds = 0;
    gimg_status st = gimg_decode_memory(buf, len, &im);
    CHECK(st == GIMG_OK, "%s: %s", what, gimg_last_error());
    if (st != GIMG_OK)
        return 0;
    char why[160];
    CHECK(same_image(&im, plain, why, sizeof why), "%s: %s", what, why);
    CHECK(im.meta && strstr(im.meta->warning, warning), "%s: warning '%s', expected '%s'",
          what, im.meta ? im.meta->warning : "(no metadata)", warning);
    kinds = gimg_meta_kinds(im.meta);
    CHECK(!(kinds & absent), "%s: metadata kinds %#x kept", what, kinds);
    gimg_image_free(&im);
    return kinds;
}

/* Hostile metadata is dropped with a warning and the image decoded: a 16
 * MB iTXt, a 17 MiB XMP packet, a zTXt that inflates to 20 MB (in
 * bounded memory and time), an iCCP that inflates past the 16 MiB cap, an
 * EXIF block whose IFD0 points past it, an eXIf with JPEG's "Exif\0\0"
 * prefix, text chunks with a bad CRC or a broken zlib stream, a second
 * iCCP (the first kept). */
static void test_meta_hostile(void)
{
    png_spec s;
    fill_spec(&s, 6, 4, GRAY, 8, 0, 0, 31);
    size_t len;
    unsigned char *plain_buf = make_png(&s, &len);
    gimg_image plain;
    if (gimg_decode_memory(plain_buf, len, &plain) != GIMG_OK) {
        CHECK(0, "the plain file: %s", gimg_last_error());
        return;
    }
    free(plain_buf);

    /* A 16 MB iTXt, and a 17 MiB XMP packet. */
    static const struct {
        const char *keyword;
        size_t bytes;
        const char *warning;
        unsigned absent;
    } big[] = {
        { "Comment", 16000000, "text chunk \"Comment\" dropped", GIMG_META_TEXT },
        { "XML:com.adobe.xmp", (size_t)17 << 20, "XMP dropped", GIMG_META_XMP },
    };
    for (int k = 0; k < 2; k++) {
        bytes b = { 0 }, d = { 0 };
        put(&d, big[k].keyword, strlen(big[k].keyword) + 1);
        put(&d, "\0\0\0\0", 4);
        unsigned char *text = malloc(big[k].bytes);
        memset(text, 'x', big[k].bytes);
        put(&d, text, big[k].bytes);
        free(text);
        put_chunk(&b, "iTXt", d.p, d.len, 0);
        s.after_ihdr = &b;
        unsigned char *buf = make_png(&s, &len);
        char what[64];
        snprintf(what, sizeof what, "a %zu-byte iTXt %s", big[k].bytes, big[k].keyword);
        decodes_with_warning(what, buf, len, &plain, big[k].warning, big[k].absent);
        free(buf);
        free(b.p);
        free(d.p);
    }

    /* zTXt and iCCP bombs under libspng's limits: 20 MB of one byte ('x',
     * not 0: libspng ends a text at its first NUL). */
    size_t zlen;
    unsigned char *z = byte_bomb('x', 20000000 / 258, &zlen);
    static const struct {
        const char *type, *head, *warning;
        size_t head_len;
        unsigned absent;
    } bombs[] = {
        { "zTXt", "Comment\0", "text chunk \"Comment\" dropped", 9, GIMG_META_TEXT },
        { "iCCP", "icc\0", "ICC profile dropped", 5, GIMG_META_ICC },
    };
    for (int k = 0; k < 2; k++) {
        bytes b = { 0 }, d = { 0 };
        put(&d, bombs[k].head, bombs[k].head_len);
        put(&d, z, zlen);
        put_chunk(&b, bombs[k].type, d.p, d.len, 0);
        s.after_ihdr = &b;
        unsigned char *buf = make_png(&s, &len);
        char what[64];
        snprintf(what, sizeof what, "a %s inflating to 20 MB (%zu bytes)", bombs[k].type, zlen);
        decodes_with_warning(what, buf, len, &plain, bombs[k].warning, bombs[k].absent);
        int status;
        long grew;
        double cpu;
        decode_measured(buf, len, &status, &grew, &cpu);
        CHECK(status == GIMG_OK, "%s: status %d in the child", what, status);
        if (!under_valgrind()) {
#ifndef UNDER_SANITIZER /* whose allocator's redzones and quarantine are its own */
            CHECK(grew >= 0 && grew < 80 * 1024, "%s: memory grew by %ld KiB", what, grew);
#endif
            if (!getenv("GIMG_TEST_SLOW"))
                CHECK(cpu >= 0 && cpu < SANITIZER_SLOWDOWN, "%s: %.2f s of CPU", what, cpu);
        }
        free(buf);
        free(b.p);
        free(d.p);
    }
    free(z);

    /* EXIF whose IFD0 points past the block; eXIf with a JPEG prefix. */
    size_t exif_bytes;
    unsigned char *exif = make_exif(6, 4000, &exif_bytes);
    bytes b = { 0 };
    put_chunk(&b, "eXIf", exif, exif_bytes, 0);
    s.after_ihdr = &b;
    unsigned char *buf = make_png(&s, &len);
    decodes_with_warning("EXIF with IFD0 past the block", buf, len, &plain,
                         "EXIF dropped: its IFD0 points past the block", GIMG_META_EXIF);
    free(buf);
    free(b.p);
    free(exif);
    exif = make_exif(6, 0, &exif_bytes);
    b = (bytes){ 0 };
    bytes d = { 0 };
    put(&d, "Exif\0\0", 6);
    put(&d, exif, exif_bytes);
    put_chunk(&b, "eXIf", d.p, d.len, 0);
    buf = make_png(&s, &len);
    decodes_with_warning("eXIf with an Exif\\0\\0 prefix", buf, len, &plain,
                         "a PNG eXIf chunk dropped: malformed", GIMG_META_EXIF);
    free(buf);
    free(b.p);
    free(d.p);
    free(exif);

    /* A tEXt kept beside a zTXt with a bad CRC, then one with a broken
     * zlib stream. */
    for (int k = 0; k < 2; k++) {
        b = (bytes){ 0 };
        put_text_chunk(&b, "tEXt", "Title", NULL, 0, "kept", 0);
        d = (bytes){ 0 };
        put(&d, "Comment\0\0", 9);
        put(&d, k ? "\x78\x9c\xff\xff\xff\xff" : "\x78\x9c\x03\x00\x00\x00\x00\x01", k ? 6 : 8);
        put_chunk(&b, "zTXt", d.p, d.len, k == 0);
        s.after_ihdr = &b;
        buf = make_png(&s, &len);
        const char *what = k ? "a zTXt with a broken zlib stream" : "a zTXt with a bad CRC";
        unsigned kinds = decodes_with_warning(
            what, buf, len, &plain,
            k ? "a PNG zTXt chunk dropped: malformed" : "a PNG zTXt chunk dropped: its CRC", 0);
        CHECK(kinds == GIMG_META_TEXT, "%s: the tEXt beside it lost", what);
        free(buf);
        free(b.p);
        free(d.p);
    }

    /* Two iCCP chunks: the first kept. */
    b = (bytes){ 0 };
    unsigned char *icc[2] = { make_icc(200, 1), make_icc(300, 2) };
    for (int k = 0; k < 2; k++) {
        d = (bytes){ 0 };
        put(&d, "icc\0\0", 5);
        z = zlib_of(icc[k], k ? 300 : 200, &zlen);
        put(&d, z, zlen);
        put_chunk(&b, "iCCP", d.p, d.len, 0);
        free(z);
        free(d.p);
    }
    buf = make_png(&s, &len);
    gimg_image im;
    if (gimg_decode_memory(buf, len, &im) == GIMG_OK) {
        CHECK(im.meta && im.meta->icc_bytes == 200 && memcmp(im.meta->icc, icc[0], 200) == 0,
              "two iCCP: the first not kept");
        CHECK(im.meta && strstr(im.meta->warning, "a PNG iCCP chunk dropped"),
              "two iCCP: warning '%s'", im.meta ? im.meta->warning : "");
    } else {
        CHECK(0, "two iCCP: %s", gimg_last_error());
    }
    gimg_image_free(&im);
    free(buf);
    free(b.p);
    free(icc[0]);
    free(icc[1]);
    free(s.samples);
    gimg_image_free(&plain);
}

/* ------------------------------------------------------------- limits */

static unsigned char *header_only(uint32_t w, uint32_t h, size_t *len)
{
    bytes b = { 0 };
    put(&b, "\x89PNG\r\n\x1a\n", 8);
    unsigned char ihdr[13] = { (unsigned char)(w >> 24), (unsigned char)(w >> 16),
                               (unsigned char)(w >> 8),  (unsigned char)w,
                               (unsigned char)(h >> 24), (unsigned char)(h >> 16),
                               (unsigned char)(h >> 8),  (unsigned char)h,
                               8, 6, 0, 0, 0 };
    put_chunk(&b, "IHDR", ihdr, 13, 0);
    unsigned char z[64], raw[8] = { 0 };
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(6);
    size_t zn = libdeflate_zlib_compress(c, raw, sizeof raw, z, sizeof z);
    libdeflate_free_compressor(c);
    put_chunk(&b, "IDAT", z, zn, 0);
    put_chunk(&b, "IEND", NULL, 0, 0);
    *len = b.len;
    return b.p;
}

/* Sizes over the limits are refused from the header, before anything is
 * allocated for the pixels; the probe reports the header as it is. */
static void test_limits(void)
{
    size_t len;
    unsigned char *buf = header_only(20000, 20000, &len);
    /* Under the old default's pixel limit, given: refused for its size;
     * with none (the default), for its data, which cannot hold it. */
    gimg_set_max_pixels((uint64_t)1 << 28);
    expect_refusal("20000x20000", buf, len, GIMG_E_LIMIT, "over the limit");
    gimg_set_max_pixels(GIMG_DEFAULT_MAX_PIXELS);
    expect_refusal("20000x20000, no pixel limit", buf, len, GIMG_E_FORMAT, "before the last row");
    gimg_info info;
    CHECK(gimg_codec_png.probe(buf, len, NULL, &info) == GIMG_OK && info.width == 20000,
          "probe: %s", gimg_last_error());
    free(buf);
    buf = header_only((1u << 24) + 1, 1, &len);
    expect_refusal("a side of 2^24 + 1", buf, len, GIMG_E_LIMIT, "pixels per side");
    free(buf);
    buf = header_only(0, 5, &len);
    expect_refusal("width 0", buf, len, GIMG_E_FORMAT, "corrupt PNG file: invalid width");
    free(buf);
    buf = header_only(100, 100, &len);
    gimg_set_max_pixels(9999);
    expect_refusal("100x100 under --max-pixels 9999", buf, len, GIMG_E_LIMIT,
                   "over the limit of 9999");
    gimg_set_max_pixels(GIMG_DEFAULT_MAX_PIXELS);
    expect_refusal("100x100 with 8 bytes of data", buf, len, GIMG_E_FORMAT, "before the last row");
    free(buf);
}

/* ------------------------------------------------------------ threads */

typedef struct {
    png_spec s;
    unsigned char *buf;
    size_t len;
    int failures;
} thread_job;

static void *decode_many(void *arg)
{
    thread_job *j = arg;
    gimg_image want;
    expected_image(&j->s, &want);
    for (int k = 0; k < 20; k++) {
        gimg_image got;
        char why[160];
        if (gimg_decode_memory(j->buf, j->len, &got) != GIMG_OK ||
            !same_image(&got, &want, why, sizeof why))
            j->failures++;
        gimg_image_free(&got);
    }
    gimg_image_free(&want);
    return NULL;
}

/* Decoders run on many threads at once (the batch): four layouts decoded
 * side by side, each always to its own pixels. */
static void test_threads(void)
{
    enum { T = 4 };
    thread_job job[T];
    pthread_t t[T];
    static const int kinds[T][3] = { { PALETTE, 4, 1 }, { RGB, 16, 1 }, { GRAY, 2, 0 },
                                     { RGBA, 8, 1 } };
    for (int i = 0; i < T; i++) {
        fill_spec(&job[i].s, 61, 47, kinds[i][0], kinds[i][1], kinds[i][2],
                  kinds[i][0] != RGBA, 7000 + (uint64_t)i);
        job[i].buf = make_png(&job[i].s, &job[i].len);
        job[i].failures = 0;
    }
    int started[T];
    for (int i = 0; i < T; i++)
        started[i] = pthread_create(&t[i], NULL, decode_many, &job[i]) == 0;
    for (int i = 0; i < T; i++) {
        if (started[i])
            pthread_join(t[i], NULL);
        else
            decode_many(&job[i]);
        CHECK(job[i].failures == 0, "thread %d: %d bad decodes", i, job[i].failures);
        free(job[i].buf);
        free(job[i].s.samples);
    }
}


/* ------------------------------------ our image data against libspng's */

/* What decoding a file gave: status, message, image. */
typedef struct {
    gimg_status st;
    char msg[256];
    gimg_image im;
} outcome;

static void decode_whole(const unsigned char *buf, size_t len, int own, outcome *o)
{
    gimg_png_own_idat = own;
    o->st = gimg_codec_png.decode(buf, len, NULL, &o->im);
    gimg_png_own_idat = 1;
    snprintf(o->msg, sizeof o->msg, "%s", o->st ? gimg_last_error() : "");
}

/* The same file in bands of `rows` (band.h's reader, our image data):
 * the status and message it ends with, and the rows into o->im. */
static void decode_in_bands(const unsigned char *buf, size_t len, int rows, outcome *o)
{
    memset(o, 0, sizeof *o);
    gimg_band_reader *r = NULL;
    gimg_image header, band;
    int y0;
    o->st = gimg_band_open(buf, len, 0, NULL, rows, &header, &r);
    if (!o->st && r &&
        !(o->st = gimg_image_alloc(&o->im, header.width, header.height, header.channels,
                                   header.sample))) {
        o->im.maxval = header.maxval;
        while (!(o->st = gimg_band_next(r, &band, &y0)) && band.height > 0)
            for (int i = 0; i < band.height; i++)
                memcpy(gimg_row(&o->im, y0 + i), gimg_row(&band, i),
                       (size_t)band.width * gimg_pixel_bytes(&band));
    }
    snprintf(o->msg, sizeof o->msg, "%s", o->st ? gimg_last_error() : "");
    if (r)
        gimg_meta_free(gimg_band_take_meta(r));
    gimg_band_close(r);
    if (!o->st)
        gimg_meta_free(header.meta);
}

/* Whole with png_idat.c against whole with libspng, and in bands of 7 rows
 * against whole: the same status, message, layout, pixels, metadata. */
static void same_as_libspng(const char *what, const unsigned char *buf, size_t len)
{
    outcome ours, theirs, bands;
    char why[160];
    decode_whole(buf, len, 1, &ours);
    decode_whole(buf, len, 0, &theirs);
    CHECK(ours.st == theirs.st && !strcmp(ours.msg, theirs.msg),
          "%s: ours %d '%s', libspng's %d '%s'", what, ours.st, ours.msg, theirs.st, theirs.msg);
    if (!ours.st && !theirs.st) {
        CHECK(same_image(&ours.im, &theirs.im, why, sizeof why) &&
                  ours.im.maxval == theirs.im.maxval,
              "%s: ours against libspng's: %s (maxval %u, %u)", what, why, ours.im.maxval,
              theirs.im.maxval);
        CHECK(gimg_meta_kinds(ours.im.meta) == gimg_meta_kinds(theirs.im.meta) &&
                  !strcmp(ours.im.meta ? ours.im.meta->warning : "",
                          theirs.im.meta ? theirs.im.meta->warning : ""),
              "%s: metadata %#x against libspng's %#x", what, gimg_meta_kinds(ours.im.meta),
              gimg_meta_kinds(theirs.im.meta));
    }
    if (ours.im.height > 7) {
        decode_in_bands(buf, len, 7, &bands);
        CHECK(bands.st == ours.st && !strcmp(bands.msg, ours.msg),
              "%s: in bands %d '%s', whole %d '%s'", what, bands.st, bands.msg, ours.st,
              ours.msg);
        CHECK(bands.st || same_image(&bands.im, &ours.im, why, sizeof why),
              "%s: in bands against whole: %s", what, why);
        gimg_image_free(&bands.im);
    }
    gimg_image_free(&ours.im);
    gimg_image_free(&theirs.im);
}

/* Every chunk's CRC made right again, so that a change is met as itself. */
static void fix_crcs(unsigned char *buf, size_t len)
{
    for (size_t p = 8; p + 12 <= len;) {
        const uint32_t n = gimg_be32(buf + p);
        if (len - p - 12 < n)
            break;
        const uint32_t crc = libdeflate_crc32(0, buf + p + 4, (size_t)n + 4);
        unsigned char *c = buf + p + 8 + n;
        c[0] = (unsigned char)(crc >> 24), c[1] = (unsigned char)(crc >> 16);
        c[2] = (unsigned char)(crc >> 8), c[3] = (unsigned char)crc;
        p += 12 + (size_t)n;
    }
}

/* buf's chunks up to its last IDAT, `extra` (whole chunks), the rest;
 * with cut, the last IDAT's data cut to `cut` bytes. */
static unsigned char *with_after_idat(const unsigned char *buf, size_t len, const bytes *extra,
                                      int cut, size_t keep, size_t *out_len)
{
    const size_t last = find_chunk(buf, len, "IDAT", 1);
    const size_t n = gimg_be32(buf + last), end = last + 12 + n;
    bytes b = { 0 };
    put(&b, buf, last);
    if (cut) {
        put_chunk(&b, "IDAT", buf + last + 8, keep < n ? keep : n, 0);
    } else {
        put(&b, buf + last, end - last);
    }
    if (extra)
        put(&b, extra->p, extra->len);
    put(&b, buf + end, len - end);
    *out_len = b.len;
    return b.p;
}

/* codec_png.c decodes the image data of a file whose IDAT chunks are one
 * run itself (png_idat.c) and the rest with libspng: the two ways must
 * give the same answers. Seeded images of every layout and awkward sizes
 * (two large enough for png_idat's inflating thread), then each damaged
 * in seeded ways, its CRCs made right so that the damage itself is met: a
 * byte of the image data changed (bad zlib data, bad filter types, index
 * past the palette), the zlib stream cut, chunks put after the image data
 * (text, a second IDAT, PLTE, IHDR, unknown chunks, an IEND with data). */
static void test_same_as_libspng(void)
{
    static const int dims[][2] = { { 1, 1 }, { 13, 9 }, { 3, 40 }, { 131, 17 } };
    static const struct {
        const char *type;
        const char *data;
        size_t n;
    } extras[] = {
        { "tEXt", "key\0value", 9 }, { "tIME", "\x07\xea\x0b\x1c\x0c\x00\x00", 7 },
        { "tIME", "\x07\xea", 2 },   { "PLTE", "\1\2\3", 3 },
        { "IHDR", "\0\0\0\1\0\0\0\1\10\0\0\0\0", 13 }, { "IDAT", "junk", 4 },
        { "XyZw", "x", 1 },          { "xyZw", "x", 1 },
        { "sRGB", "\0", 1 },         { "zTXt", "k\0\0\x78\x9c\x03\0\0\0\0\1", 11 },
        { "IEND", "x", 1 },          { "iCCP", "p\0\0junk", 7 },
    };
    uint64_t rng = 0x5eed1da7;
    int files = 0;
    for (size_t l = 0; l < sizeof layouts / sizeof *layouts; l++)
        for (size_t z = 0; z < sizeof dims / sizeof *dims; z++) {
            png_spec s;
            fill_spec(&s, dims[z][0], dims[z][1], layouts[l].color, layouts[l].depth, 0,
                      (int)(z % 2) && layouts[l].color != GRAY_ALPHA && layouts[l].color != RGBA,
                      1000 + l * 10 + z);
            size_t len;
            unsigned char *buf = make_png(&s, &len);
            char what[160];
            snprintf(what, sizeof what, "%s %d-bit %dx%d", color_name(s.color), s.depth, s.w,
                     s.h);
            same_as_libspng(what, buf, len);
            files++;
            for (int k = 0; k < 24; k++, files++) {
                size_t n = len;
                unsigned char *d;
                const int kind = k % 3;
                if (kind == 0) {   /* a byte of the image data changed */
                    d = malloc(len);
                    memcpy(d, buf, len);
                    const size_t first = find_chunk(d, len, "IDAT", 0);
                    const size_t last = find_chunk(d, len, "IDAT", 1);
                    const size_t span = last + 8 + gimg_be32(d + last) - first;
                    size_t at = first + 8 + (size_t)(testimg_next(&rng) % span);
                    d[at] ^= (unsigned char)(1 + testimg_next(&rng) % 255);
                    fix_crcs(d, len);
                    snprintf(what, sizeof what, "%s %d-bit %dx%d, byte %zu changed",
                             color_name(s.color), s.depth, s.w, s.h, at);
                } else if (kind == 1) {   /* the stream cut in its last chunk */
                    const size_t keep = (size_t)(testimg_next(&rng) % 98);
                    d = with_after_idat(buf, len, NULL, 1, keep, &n);
                    snprintf(what, sizeof what, "%s %d-bit %dx%d, last IDAT cut to %zu",
                             color_name(s.color), s.depth, s.w, s.h, keep);
                } else {   /* a chunk after the image data */
                    const size_t e = (size_t)(testimg_next(&rng) % (sizeof extras / sizeof *extras));
                    bytes x = { 0 };
                    put_chunk(&x, extras[e].type, extras[e].data, extras[e].n, 0);
                    d = with_after_idat(buf, len, &x, 0, 0, &n);
                    free(x.p);
                    snprintf(what, sizeof what, "%s %d-bit %dx%d, %.4s after the image data",
                             color_name(s.color), s.depth, s.w, s.h, extras[e].type);
                }
                same_as_libspng(what, d, n);
                free(d);
            }
            free(buf);
            free(s.samples);
        }
    /* Large enough for the inflating thread (2 MiB of rows and more), rows
     * crossing its slots of 512 KiB; damaged near the end. */
    static const int large[][4] = { { 1201, 701, RGB, 16 }, { 1100, 613, RGBA, 8 },
                                    { 300001, 3, GRAY, 8 } };
    for (size_t i = 0; i < sizeof large / sizeof *large; i++) {
        png_spec s;
        fill_spec(&s, large[i][0], large[i][1], large[i][2], large[i][3], 0, 0, 77 + i);
        s.idat_max = 1 << 16;
        size_t len, n;
        unsigned char *buf = make_png(&s, &len);
        char what[160];
        snprintf(what, sizeof what, "large %s %d-bit %dx%d", color_name(s.color), s.depth, s.w,
                 s.h);
        same_as_libspng(what, buf, len);
        unsigned char *d = with_after_idat(buf, len, NULL, 1, 1000, &n);
        same_as_libspng("large, cut", d, n);
        free(d);
        d = malloc(len);
        memcpy(d, buf, len);
        d[len - 12 - 4 - 500] ^= 0x55;
        fix_crcs(d, len);
        same_as_libspng("large, changed near the end", d, len);
        free(d);
        free(buf);
        free(s.samples);
        files += 3;
    }
    CHECK(files > 1000, "only %d files", files);
}

int main(void)
{
    RUN(test_layouts);
    RUN(test_row_padding);
    RUN(test_round_trip);
    RUN(test_imagemagick);
    RUN(test_palette_index_past_plte);
    RUN(test_empty_idat);
    RUN(test_crc);
    RUN(test_truncated);
    RUN(test_large);
    RUN(test_ancillary_limits);
    RUN(test_meta_round_trip);
    RUN(test_sbit_round_trip);
    RUN(test_sbit_decode);
    RUN(test_meta_decode);
    RUN(test_meta_hostile);
    RUN(test_limits);
    RUN(test_threads);
    RUN(test_same_as_libspng);
    return check_summary();
}
