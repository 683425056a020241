/*
 * unit_codec_png — the PNG decoder (lib/codec_png.c, libspng 0.7.3).
 *
 * The files are made here, by a small PNG writer of the test's own that
 * covers what ours (codec_png.c's encoder) never writes: every colour type
 * and bit depth, Adam7 interlacing, all five row filters, palettes and
 * tRNS, several IDAT chunks. What a file must decode to is worked out from
 * the samples it was made of and the PNG specification (low-depth gray
 * scaled by 255 / (2^depth - 1), tRNS giving alpha 0 to the pixels of its
 * colour, palettes looked up), then checked against ImageMagick (libpng),
 * when /usr/bin/convert is there.
 *
 * Then what must be refused, each with its message: palette indices past
 * PLTE's entries, an IDAT with no data, CRC errors, every truncation, a
 * decompression bomb in a text chunk (in bounded memory and time), sizes
 * over the limits.
 */
#include "gimg.h"
#include "codec.h"
#include "testimg.h"
#include "check.h"
#include "testfile.h"

#include <libdeflate.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------- a byte buffer */

static void put_be32(bytes *b, uint32_t v)
{
    const unsigned char q[4] = { (unsigned char)(v >> 24), (unsigned char)(v >> 16),
                                 (unsigned char)(v >> 8), (unsigned char)v };
    put(b, q, 4);
}

/* A chunk: length, type, data, CRC (flipped when bad_crc). */
static void put_chunk(bytes *b, const char *type, const void *data, size_t n, int bad_crc)
{
    put_be32(b, (uint32_t)n);
    size_t at = b->len;
    put(b, type, 4);
    put(b, data, n);
    put_be32(b, libdeflate_crc32(0, b->p + at, n + 4) ^ (bad_crc ? 1u : 0u));
}

/* ----------------------------------------------------- the PNG writer */

enum { GRAY = 0, RGB = 2, PALETTE = 3, GRAY_ALPHA = 4, RGBA = 6 };

/* What a test PNG holds. Samples are as stored: samples[(y * w + x) * n +
 * c] for the n = stored_channels() samples of a pixel (a palette index for
 * PALETTE), each below 2^depth. */
typedef struct {
    int w, h, color, depth, interlace;
    uint16_t *samples;
    int trns;                      /* a tRNS chunk (gray, RGB and palette) */
    uint16_t key[3];               /* its colour (gray: key[0]) */
    unsigned entries;              /* PLTE's entries (palette) */
    unsigned char plte[256][3];
    unsigned alphas;               /* tRNS's alphas of a palette */
    unsigned char alpha[256];
    int pad_ones;                  /* fill the unused bits of each row with ones */
    size_t idat_max;               /* split the zlib stream into IDATs of this many bytes */
} png_spec;

static int stored_channels(int color)
{
    return color == RGB ? 3 : color == GRAY_ALPHA ? 2 : color == RGBA ? 4 : 1;
}

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

/* The pixels of Adam7 pass p (0-6): columns x0, x0 + dx, ...; rows
 * likewise. Without interlacing one pass of every pixel. */
static const int adam7[7][4] = { { 0, 0, 8, 8 }, { 4, 0, 8, 8 }, { 0, 4, 4, 8 }, { 2, 0, 4, 4 },
                                 { 0, 2, 2, 4 }, { 1, 0, 2, 2 }, { 0, 1, 1, 2 } };

static unsigned char paeth(int a, int b, int c)
{
    int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    return (unsigned char)(pa <= pb && pa <= pc ? a : pb <= pc ? b : c);
}

/* Appends row (n bytes) filtered with `type` against prev (the pass's row
 * above, zeros for the first), bpp bytes a pixel (at least 1). */
static void put_filtered(bytes *raw, int type, const unsigned char *row,
                         const unsigned char *prev, size_t n, size_t bpp)
{
    unsigned char t = (unsigned char)type;
    put(raw, &t, 1);
    for (size_t i = 0; i < n; i++) {
        int a = i >= bpp ? row[i - bpp] : 0, b = prev[i], c = i >= bpp ? prev[i - bpp] : 0;
        int pred = type == 1 ? a : type == 2 ? b : type == 3 ? (a + b) / 2
                 : type == 4 ? paeth(a, b, c) : 0;
        unsigned char v = (unsigned char)(row[i] - pred);
        put(raw, &v, 1);
    }
}

/* The PNG file of s (the caller frees it). */
static unsigned char *make_png(const png_spec *s, size_t *len)
{
    const int n = stored_channels(s->color);
    const size_t bpp = (size_t)n * (size_t)s->depth / 8 ? (size_t)n * (size_t)s->depth / 8 : 1;
    bytes raw = { 0 }, out = { 0 };
    const size_t max_row = ((size_t)s->w * (size_t)n * (size_t)s->depth + 7) / 8;
    unsigned char *row = malloc(max_row + 1), *prev = malloc(max_row + 1);
    int filter = 0;
    for (int p = 0; p < (s->interlace ? 7 : 1); p++) {
        const int x0 = s->interlace ? adam7[p][0] : 0, y0 = s->interlace ? adam7[p][1] : 0;
        const int dx = s->interlace ? adam7[p][2] : 1, dy = s->interlace ? adam7[p][3] : 1;
        const int pw = s->w > x0 ? (s->w - x0 + dx - 1) / dx : 0;
        const int ph = s->h > y0 ? (s->h - y0 + dy - 1) / dy : 0;
        if (pw == 0 || ph == 0)
            continue;
        const size_t bits = (size_t)pw * (size_t)n * (size_t)s->depth, nb = (bits + 7) / 8;
        memset(prev, 0, nb);
        for (int j = 0; j < ph; j++) {
            memset(row, 0, nb);
            if (s->pad_ones && bits % 8)
                row[nb - 1] = (unsigned char)((1u << (8 - bits % 8)) - 1);
            size_t bit = 0;
            for (int i = 0; i < pw; i++) {
                const uint16_t *px = s->samples + ((size_t)(y0 + j * dy) * s->w + x0 + i * dx) * n;
                for (int c = 0; c < n; c++, bit += (size_t)s->depth) {
                    if (s->depth == 16) {
                        row[bit / 8] = (unsigned char)(px[c] >> 8);
                        row[bit / 8 + 1] = (unsigned char)px[c];
                    } else {
                        row[bit / 8] |= (unsigned char)(px[c] << (8 - s->depth - bit % 8));
                    }
                }
            }
            put_filtered(&raw, filter++ % 5, row, prev, nb, bpp);
            memcpy(prev, row, nb);
        }
    }
    free(row);
    free(prev);

    struct libdeflate_compressor *z = libdeflate_alloc_compressor(6);
    size_t cap = libdeflate_zlib_compress_bound(z, raw.len);
    unsigned char *zbuf = malloc(cap);
    size_t zlen = libdeflate_zlib_compress(z, raw.p, raw.len, zbuf, cap);
    libdeflate_free_compressor(z);
    free(raw.p);

    put(&out, "\x89PNG\r\n\x1a\n", 8);
    unsigned char ihdr[13];
    memcpy(ihdr, (unsigned char[]){ (unsigned char)(s->w >> 24), (unsigned char)(s->w >> 16),
                                    (unsigned char)(s->w >> 8), (unsigned char)s->w,
                                    (unsigned char)(s->h >> 24), (unsigned char)(s->h >> 16),
                                    (unsigned char)(s->h >> 8), (unsigned char)s->h },
           8);
    ihdr[8] = (unsigned char)s->depth, ihdr[9] = (unsigned char)s->color;
    ihdr[10] = ihdr[11] = 0, ihdr[12] = (unsigned char)s->interlace;
    put_chunk(&out, "IHDR", ihdr, 13, 0);
    if (s->color == PALETTE)
        put_chunk(&out, "PLTE", s->plte, 3 * (size_t)s->entries, 0);
    if (s->trns) {
        unsigned char t[256];
        size_t tn = 0;
        if (s->color == PALETTE) {
            memcpy(t, s->alpha, s->alphas);
            tn = s->alphas;
        } else {
            for (int c = 0; c < (s->color == GRAY ? 1 : 3); c++) {
                t[tn++] = (unsigned char)(s->key[c] >> 8);
                t[tn++] = (unsigned char)s->key[c];
            }
        }
        put_chunk(&out, "tRNS", t, tn, 0);
    }
    const size_t step = s->idat_max ? s->idat_max : zlen;
    for (size_t at = 0; at < zlen; at += step)
        put_chunk(&out, "IDAT", zbuf + at, zlen - at < step ? zlen - at : step, 0);
    put_chunk(&out, "IEND", NULL, 0, 0);
    free(zbuf);
    *len = out.len;
    return out.p;
}

/* Fills s with seeded samples; with tRNS, every seventh pixel has the key
 * colour (so that some pixels are transparent). */
static void fill_spec(png_spec *s, int w, int h, int color, int depth, int interlace, int trns,
                      uint64_t seed)
{
    memset(s, 0, sizeof *s);
    s->w = w, s->h = h, s->color = color, s->depth = depth, s->interlace = interlace;
    s->trns = trns;
    const int n = stored_channels(color);
    const unsigned max = depth == 16 ? 65535u : (1u << depth) - 1;
    uint64_t st = seed;
    if (color == PALETTE) {
        s->entries = 1 + (unsigned)(testimg_next(&st) % (max + 1));
        if (s->entries < 2 && max >= 1)
            s->entries = 2;
        for (unsigned i = 0; i < s->entries; i++)
            for (int c = 0; c < 3; c++)
                s->plte[i][c] = (unsigned char)testimg_next(&st);
        if (trns) {
            s->alphas = 1 + (unsigned)(testimg_next(&st) % s->entries);
            for (unsigned i = 0; i < s->alphas; i++)
                s->alpha[i] = (unsigned char)testimg_next(&st);
        }
    } else if (trns) {
        for (int c = 0; c < 3; c++)
            s->key[c] = (uint16_t)(testimg_next(&st) % (max + 1));
    }
    s->samples = malloc((size_t)w * h * n * sizeof *s->samples);
    for (size_t i = 0; i < (size_t)w * h; i++)
        for (int c = 0; c < n; c++) {
            uint64_t r = testimg_next(&st);
            s->samples[i * n + c] = color == PALETTE ? (uint16_t)(r % s->entries)
                                                     : (uint16_t)(r % (max + 1));
            if (trns && color != PALETTE && i % 7 == 0)
                s->samples[i * n + c] = s->key[c];
        }
    s->idat_max = 97;   /* several IDAT chunks */
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

/* The offset of the first chunk of type `type` in buf, 0 if none. */
static size_t find_chunk(const unsigned char *buf, size_t len, const char *type, int last)
{
    size_t found = 0;
    for (size_t p = 8; p + 12 <= len;) {
        uint32_t n = (uint32_t)buf[p] << 24 | (uint32_t)buf[p + 1] << 16 |
                     (uint32_t)buf[p + 2] << 8 | buf[p + 3];
        if (memcmp(buf + p + 4, type, 4) == 0) {
            found = p;
            if (!last)
                break;
        }
        p += 12 + (size_t)n;
    }
    return found;
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

/* A zlib stream that inflates to 1 + 258 * runs zero bytes: one fixed-
 * Huffman block of a literal 0 and `runs` matches of 258 bytes at
 * distance 1 (13 bits each, so about 1 : 160). */
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

static unsigned char *zero_bomb(uint32_t runs, size_t *len)
{
    bitw w = { { 0 }, 0, 0 };
    bits(&w, 0x78, 8), bits(&w, 0x01, 8);   /* zlib header */
    bits(&w, 1, 1), bits(&w, 1, 2);         /* final block, fixed Huffman */
    code(&w, 0x30, 8);                      /* literal 0 */
    for (uint32_t i = 0; i < runs; i++) {
        code(&w, 0xC5, 8);                  /* length 258 (symbol 285) */
        code(&w, 0, 5);                     /* distance 1 */
    }
    code(&w, 0, 7);                         /* end of block */
    if (w.nacc)
        bits(&w, 0, 8 - w.nacc);
    const uint64_t n = 1 + 258 * (uint64_t)runs;
    put_be32(&w.b, (uint32_t)((n % 65521) << 16 | 1));   /* Adler-32 of n zeros */
    *len = w.b.len;
    return w.b.p;
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
 * a 16 MiB iTXt is within the limits and decodes; a zTXt or iCCP that
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
                CHECK(cpu >= 0 && cpu < 1.0, "%s: %.2f s of CPU", what, cpu);
        }
        free(buf);
        free(chunk.p);
        free(data.p);
    }
    free(z);
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
    expect_refusal("20000x20000", buf, len, GIMG_E_LIMIT, "over the limit");
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
    RUN(test_limits);
    RUN(test_threads);
    return check_summary();
}
