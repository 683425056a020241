/*
 * testpng.h — a PNG writer of the tests' own (tests/unit_codec_png.c,
 * tests/unit_band.c), for the files codec_png.c's encoder never writes:
 * every colour type and bit depth, Adam7 interlacing, all five row
 * filters, palettes and tRNS, several IDAT chunks, chunks of the test's
 * choosing before and after the image data. make_png() and put() (for
 * bytes) allocate; the caller frees.
 */
#ifndef GIMG_TESTPNG_H
#define GIMG_TESTPNG_H

#include "testfile.h"
#include "testimg.h"

#include <libdeflate.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ chunks */

static inline void put_be32(bytes *b, uint32_t v)
{
    const unsigned char q[4] = { (unsigned char)(v >> 24), (unsigned char)(v >> 16),
                                 (unsigned char)(v >> 8), (unsigned char)v };
    put(b, q, 4);
}

/* A chunk: length, type, data, CRC (flipped when bad_crc). */
static inline void put_chunk(bytes *b, const char *type, const void *data, size_t n,
                             int bad_crc)
{
    put_be32(b, (uint32_t)n);
    size_t at = b->len;
    put(b, type, 4);
    if (n)   /* data may be NULL then (IEND), which memcpy may not be given */
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
    const bytes *after_ihdr;       /* whole chunks put right after IHDR, if any */
    const bytes *after_idat;       /* and after the image data */
} png_spec;

static inline int stored_channels(int color)
{
    return color == RGB ? 3 : color == GRAY_ALPHA ? 2 : color == RGBA ? 4 : 1;
}

/* The pixels of Adam7 pass p (0-6): columns x0, x0 + dx, ...; rows
 * likewise. Without interlacing one pass of every pixel. */
static const int adam7[7][4] = { { 0, 0, 8, 8 }, { 4, 0, 8, 8 }, { 0, 4, 4, 8 }, { 2, 0, 4, 4 },
                                 { 0, 2, 2, 4 }, { 1, 0, 2, 2 }, { 0, 1, 1, 2 } };

static inline unsigned char paeth(int a, int b, int c)
{
    int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    return (unsigned char)(pa <= pb && pa <= pc ? a : pb <= pc ? b : c);
}

/* Appends row (n bytes) filtered with `type` against prev (the pass's row
 * above, zeros for the first), bpp bytes a pixel (at least 1). */
static inline void put_filtered(bytes *raw, int type, const unsigned char *row,
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
static inline unsigned char *make_png(const png_spec *s, size_t *len)
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
    if (s->after_ihdr)
        put(&out, s->after_ihdr->p, s->after_ihdr->len);
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
    if (s->after_idat)
        put(&out, s->after_idat->p, s->after_idat->len);
    put_chunk(&out, "IEND", NULL, 0, 0);
    free(zbuf);
    *len = out.len;
    return out.p;
}

/* Fills s with seeded samples; with tRNS, every seventh pixel has the key
 * colour (so that some pixels are transparent). */
static inline void fill_spec(png_spec *s, int w, int h, int color, int depth, int interlace,
                             int trns, uint64_t seed)
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

/* The offset of the first chunk of type `type` in buf (the last one when
 * `last`), 0 if none. */
static inline size_t find_chunk(const unsigned char *buf, size_t len, const char *type, int last)
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

#endif
