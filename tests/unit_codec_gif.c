/*
 * unit_codec_gif.c — the GIF reader (lib/codec_gif.c), through the public
 * API and its codec row.
 *
 *  - Files written here with giflib's own encoder (EGifOpen to memory):
 *    palette images, a transparent index (RGBA), interlaced frames, local
 *    colour maps, 1x1, animations with offsets and every disposal method,
 *    indices past the colour map. Each page decodes to the image that the
 *    rules of codec_gif.c's head comment give, computed here by a
 *    compositor of this file's own.
 *  - The same files decoded by libvips (vips rawsave) and ImageMagick
 *    (/usr/bin/convert) give the same samples, where codec_gif.c says they
 *    agree (skipped when the tools are missing).
 *  - Hostile files made byte by byte (LZW written here): truncated, LZW
 *    data that ends early or is defective, codes past the table, a
 *    65535x65535 screen in a tiny file, a code size over 8, too many
 *    frames composited, a huge frame on a small screen: refused with a
 *    message (or decoded to defined pixels, where so documented), quickly.
 *  - 20000 frames: counted, and the last one decoded, in bounded time.
 *  - Several threads decoding at once each get the right image.
 */
#include "check.h"
#include "testfile.h"
#include "codec.h"
#include "testimg.h"

#include <gif_lib.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char g_dir[] = "/tmp/gimg-unit-gif-XXXXXX";

/* ------------------------------------------------------------ helpers */

/* Where two images differ first, for messages. */
static const char *first_difference(const gimg_image *a, const gimg_image *b)
{
    static char why[128];
    if (a->width != b->width || a->height != b->height || a->channels != b->channels) {
        snprintf(why, sizeof why, "%dx%d c%d against %dx%d c%d", a->width, a->height,
                 a->channels, b->width, b->height, b->channels);
        return why;
    }
    for (int y = 0; y < a->height; y++)
        for (int x = 0; x < a->width * a->channels; x++)
            if (gimg_row(a, y)[x] != gimg_row(b, y)[x]) {
                snprintf(why, sizeof why, "x=%d y=%d channel %d: %d against %d", x / a->channels,
                         y, x % a->channels, gimg_row(a, y)[x], gimg_row(b, y)[x]);
                return why;
            }
    return "no difference";
}

static char *scratch(const char *name)
{
    static char path[4][512];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, sizeof path[0], "%s/%s", g_dir, name);
    return p;
}

static void put_u8(bytes *b, unsigned v)
{
    unsigned char c = (unsigned char)v;
    put(b, &c, 1);
}

static void put_u16(bytes *b, unsigned v)
{
    put_u8(b, v & 255);
    put_u8(b, v >> 8);
}

/* -------------------------------------------- GIFs described, and built */

typedef struct {
    int x, y, w, h;
    int interlaced;
    int transparent;             /* index, or -1 */
    int disposal;                /* 0-3 (4 too, in crafted files) */
    const unsigned char *pixels; /* w x h indices, rows top to bottom */
    const unsigned char *map;    /* local colour map (3 bytes an entry), or NULL */
    int map_count;               /* a power of two */
} test_frame;

typedef struct {
    int w, h;
    const unsigned char *map;    /* global colour map, or NULL */
    int map_count;
    int background;
    int n;
    const test_frame *frames;
} test_gif;

static int write_to_bytes(GifFileType *gif, const GifByteType *data, int n)
{
    put(gif->UserData, data, (size_t)n);
    return n;
}

static ColorMapObject *make_map(const unsigned char *rgb, int count)
{
    GifColorType colours[256];
    for (int i = 0; i < count; i++)
        colours[i] = (GifColorType){rgb[3 * i], rgb[3 * i + 1], rgb[3 * i + 2]};
    return GifMakeMapObject(count, colours);
}

/* The GIF g, written by giflib's encoder. */
static bytes build_with_giflib(const test_gif *g)
{
    bytes out = {0};
    int error = 0;
    GifFileType *gif = EGifOpen(&out, write_to_bytes, &error);
    CHECK(gif != NULL, "EGifOpen: %d", error);
    if (!gif)
        return out;
    EGifSetGifVersion(gif, true);
    ColorMapObject *global = g->map ? make_map(g->map, g->map_count) : NULL;
    int ok = EGifPutScreenDesc(gif, g->w, g->h, 8, g->background, global) == GIF_OK;
    GifFreeMapObject(global);
    for (int k = 0; ok && k < g->n; k++) {
        const test_frame *f = &g->frames[k];
        if (f->transparent >= 0 || f->disposal) {
            GraphicsControlBlock gcb = {f->disposal, false, 10, f->transparent};
            GifByteType ext[4];
            EGifGCBToExtension(&gcb, ext);
            ok = EGifPutExtension(gif, GRAPHICS_EXT_FUNC_CODE, 4, ext) == GIF_OK;
        }
        ColorMapObject *local = f->map ? make_map(f->map, f->map_count) : NULL;
        ok = ok && EGifPutImageDesc(gif, f->x, f->y, f->w, f->h, f->interlaced, local) == GIF_OK;
        GifFreeMapObject(local);
        GifPixelType line[4096];
        for (int r = 0; ok && r < f->h; r++) {
            /* An interlaced frame's rows go in pass order. */
            int y = r;
            if (f->interlaced) {
                int k8 = (f->h + 7) / 8, k4 = (f->h + 3) / 8, k2 = (f->h + 1) / 4;
                y = r < k8 ? r * 8 : r < k8 + k4 ? 4 + (r - k8) * 8
                  : r < k8 + k4 + k2 ? 2 + (r - k8 - k4) * 4 : 1 + (r - k8 - k4 - k2) * 2;
            }
            memcpy(line, f->pixels + (size_t)y * f->w, (size_t)f->w);
            ok = EGifPutLine(gif, line, f->w) == GIF_OK;
        }
    }
    CHECK(ok, "giflib could not write the test GIF: %d", gif->Error);
    EGifCloseFile(gif, &error);
    return out;
}

/* Page `page` of g as codec_gif.c's head comment defines it, by a
 * compositor of this file's own: channels 4 when a frame has a
 * transparent index; the screen grown to frame 0; the background
 * transparent black (RGBA) or the global map's colour (RGB, black without
 * one); disposal 2 to the background, 3 and 4 to the screen before the
 * frame; indices past the map transparent black (black in RGB); no map at
 * all: black and white. */
static gimg_image composite(const test_gif *g, int page)
{
    int channels = 3;
    for (int k = 0; k < g->n; k++)
        if (g->frames[k].transparent >= 0)
            channels = 4;
    int w = g->w, h = g->h;
    if (g->n) {
        const test_frame *f0 = &g->frames[0];
        w = f0->x + f0->w > w ? f0->x + f0->w : w;
        h = f0->y + f0->h > h ? f0->y + f0->h : h;
    }
    gimg_image im, saved;
    gimg_image_alloc(&im, w, h, channels, GIMG_U8);
    gimg_image_alloc(&saved, w, h, channels, GIMG_U8);
    unsigned char bg[4] = {0, 0, 0, 0};
    if (channels == 3 && g->map && g->background < g->map_count)
        memcpy(bg, g->map + 3 * g->background, 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            memcpy(gimg_row(&im, y) + x * channels, bg, (size_t)channels);
    for (int k = 0; k <= page; k++) {
        const test_frame *f = &g->frames[k];
        if (k > 0) {
            const test_frame *p = &g->frames[k - 1];
            if (p->disposal == 2) {
                for (int y = p->y; y < p->y + p->h && y < h; y++)
                    for (int x = p->x; x < p->x + p->w && x < w; x++)
                        memcpy(gimg_row(&im, y) + x * channels, bg, (size_t)channels);
            } else if (p->disposal == 3 || p->disposal == 4) {
                memcpy(im.data, saved.data, im.stride_bytes * (size_t)h);
            }
        }
        if (f->disposal == 3 || f->disposal == 4)
            memcpy(saved.data, im.data, im.stride_bytes * (size_t)h);
        static const unsigned char black_white[6] = {0, 0, 0, 255, 255, 255};
        const unsigned char *map = f->map ? f->map : g->map ? g->map : black_white;
        int count = f->map ? f->map_count : g->map ? g->map_count : 2;
        for (int y = 0; y < f->h; y++)
            for (int x = 0; x < f->w; x++) {
                int v = f->pixels[(size_t)y * f->w + x];
                if (f->y + y >= h || f->x + x >= w || v == f->transparent)
                    continue;
                unsigned char *out = gimg_row(&im, f->y + y) + (f->x + x) * channels;
                if (v < count) {
                    memcpy(out, map + 3 * v, 3);
                    if (channels == 4)
                        out[3] = 255;
                } else {
                    memset(out, 0, (size_t)channels);
                }
            }
    }
    gimg_image_free(&saved);
    return im;
}

/* Decodes page `page` of buf and compares it with composite(g, page). */
static void check_page(const char *what, const test_gif *g, const bytes *file, int page)
{
    gimg_read_opts o = {.page = page};
    gimg_image got, want = composite(g, page);
    gimg_info info;
    gimg_status st = gimg_probe_page(file->p, file->len, &o, &info);
    CHECK(st == GIMG_OK && info.format == GIMG_FMT_GIF && info.width == want.width &&
              info.height == want.height && info.channels == want.channels &&
              info.sample == GIMG_U8 && info.pages == g->n,
          "%s page %d: probe %s (%dx%d c%d, %d pages)", what, page, st ? gimg_last_error() : "",
          info.width, info.height, info.channels, info.pages);
    st = gimg_decode_page(file->p, file->len, &o, &got);
    CHECK(st == GIMG_OK && same_pixels(&got, &want), "%s page %d: %s", what, page,
          st ? gimg_last_error() : first_difference(&got, &want));
    if (st == GIMG_OK)
        gimg_image_free(&got);
    gimg_image_free(&want);
}

/* Seeded indices below `below`. */
static unsigned char *indices(int w, int h, int below, uint64_t seed)
{
    unsigned char *p = malloc((size_t)w * h + 1);
    uint64_t s = seed;
    for (int i = 0; i < w * h; i++)
        p[i] = (unsigned char)(testimg_next(&s) % (uint64_t)below);
    return p;
}

static unsigned char *palette(int count, uint64_t seed)
{
    unsigned char *p = malloc(3 * (size_t)count);
    uint64_t s = seed;
    for (int i = 0; i < 3 * count; i++)
        p[i] = (unsigned char)testimg_next(&s);
    return p;
}

/* -------------------------------------------------- crafted, byte by byte */

/* LZW data coding every index as a literal: codes of m + 1 bits, a clear
 * code before the table would need a wider code. */
static void lzw_literal(bytes *b, const unsigned char *px, size_t n, int m)
{
    unsigned clear = 1u << m, end = clear + 1, width = (unsigned)m + 1;
    size_t run = ((size_t)1 << m) - 2;
    uint32_t acc = 0;
    unsigned nbits = 0;
    bytes data = {0};
#define CODE(c)                                          \
    do {                                                 \
        acc |= (uint32_t)(c) << nbits;                   \
        nbits += width;                                  \
        while (nbits >= 8) {                             \
            put_u8(&data, acc & 255);                    \
            acc >>= 8;                                   \
            nbits -= 8;                                  \
        }                                                \
    } while (0)
    CODE(clear);
    for (size_t i = 0; i < n; i++) {
        if (i && i % run == 0)
            CODE(clear);
        CODE(px[i]);
    }
    CODE(end);
#undef CODE
    if (nbits)
        put_u8(&data, acc & 255);
    put(b, data.p, data.len);
    free(data.p);
}

/* Raw LZW codes (code, width) pairs, packed LSB first. */
static void lzw_codes(bytes *b, const unsigned *codes, const unsigned *widths, int n)
{
    uint32_t acc = 0;
    unsigned nbits = 0;
    for (int i = 0; i < n; i++) {
        acc |= codes[i] << nbits;
        nbits += widths[i];
        while (nbits >= 8) {
            put_u8(b, acc & 255);
            acc >>= 8;
            nbits -= 8;
        }
    }
    if (nbits)
        put_u8(b, acc & 255);
}

static void sub_blocks(bytes *b, const bytes *data)
{
    for (size_t i = 0; i < data->len; i += 255) {
        size_t k = data->len - i < 255 ? data->len - i : 255;
        put_u8(b, (unsigned)k);
        put(b, data->p + i, k);
    }
    put_u8(b, 0);
}

static const unsigned char k_map4[12] = {255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 0};

/* Header, screen w x h, a 4-entry global map. */
static bytes gif_head(int w, int h)
{
    bytes b = {0};
    put(&b, "GIF89a", 6);
    put_u16(&b, (unsigned)w);
    put_u16(&b, (unsigned)h);
    put_u8(&b, 0x80 | 0x70 | 1);
    put_u8(&b, 0);
    put_u8(&b, 0);
    put(&b, k_map4, sizeof k_map4);
    return b;
}

static void image_descriptor(bytes *b, int x, int y, int w, int h, int code_size)
{
    put_u8(b, 0x2C);
    put_u16(b, (unsigned)x);
    put_u16(b, (unsigned)y);
    put_u16(b, (unsigned)w);
    put_u16(b, (unsigned)h);
    put_u8(b, 0);
    put_u8(b, (unsigned)code_size);
}

/* A frame of w x h indices px (below 4), at x, y, coded as literals. */
static void frame_of(bytes *b, int x, int y, int w, int h, const unsigned char *px)
{
    image_descriptor(b, x, y, w, h, 2);
    bytes data = {0};
    lzw_literal(&data, px, (size_t)w * h, 2);
    sub_blocks(b, &data);
    free(data.p);
}

/* A frame of w x h literal indices, all `v`, at x, y. */
static void literal_frame(bytes *b, int x, int y, int w, int h, unsigned v)
{
    unsigned char *px = malloc((size_t)w * h + 1);
    memset(px, (int)v, (size_t)w * h);
    frame_of(b, x, y, w, h, px);
    free(px);
}

/* A GIF87a-style file with no colour map at all (giflib's encoder will not
 * write one): header, screen, one frame of indices px. */
static bytes without_map(int w, int h, const unsigned char *px)
{
    bytes b = {0};
    put(&b, "GIF87a", 6);
    put_u16(&b, (unsigned)w);
    put_u16(&b, (unsigned)h);
    put(&b, "\0\0\0", 3);
    frame_of(&b, 0, 0, w, h, px);
    put_u8(&b, 0x3B);
    return b;
}

/* ----------------------------------------------------------- the row */

static void test_row(void)
{
    CHECK(gimg_codec_of(GIMG_FMT_GIF) == &gimg_codec_gif, "the table's GIF row");
    CHECK(strcmp(gimg_codec_gif.extensions, "gif") == 0, "extensions");
    CHECK(gimg_codec_gif.multi_page == 1, "multi_page");
    CHECK(gimg_codec_gif.layout == NULL && gimg_codec_gif.encode == NULL, "GIF is read only");
    CHECK(!gimg_format_writable(GIMG_FMT_GIF), "not writable");
    CHECK(gimg_codec_gif.sniff((const unsigned char *)"GIF89a", 6) &&
              gimg_codec_gif.sniff((const unsigned char *)"GIF87a", 6),
          "sniff GIF87a and GIF89a");
    CHECK(!gimg_codec_gif.sniff((const unsigned char *)"GIF9", 4) &&
              !gimg_codec_gif.sniff((const unsigned char *)"GIF", 3),
          "GIF9 and GIF alone are not GIF");
    CHECK(gimg_format_from_path("x.GIF") == GIMG_FMT_GIF, "extension");
    unsigned char *buf = NULL;
    size_t len = 0;
    gimg_image im;
    gimg_image_alloc(&im, 2, 2, 3, GIMG_U8);
    memset(im.data, 0, im.stride_bytes * 2);
    CHECK(gimg_encode(&im, GIMG_FMT_GIF, NULL, &buf, &len) == GIMG_E_USAGE && buf == NULL,
          "encoding GIF: %s", gimg_last_error());
    gimg_image_free(&im);
}

/* ------------------------------------------------------ still images */

static void test_palette(void)
{
    unsigned char *map = palette(256, 1), *px = indices(37, 23, 256, 2);
    test_frame f = {0, 0, 37, 23, 0, -1, 0, px, NULL, 0};
    test_gif g = {37, 23, map, 256, 0, 1, &f};
    bytes file = build_with_giflib(&g);
    check_page("256 colours", &g, &file, 0);
    free(file.p);
    /* 4 colours, background index 2, a frame that covers part of the
     * screen: RGB, the rest the background colour. */
    unsigned char *px4 = indices(5, 3, 4, 3);
    test_frame f4 = {2, 1, 5, 3, 0, -1, 0, px4, NULL, 0};
    test_gif g4 = {9, 7, map, 4, 2, 1, &f4};
    file = build_with_giflib(&g4);
    check_page("frame inside a larger screen", &g4, &file, 0);
    free(file.p);
    /* A frame that runs past the screen grows it (first frame only). */
    test_frame grow = {3, 2, 5, 3, 0, -1, 0, px4, NULL, 0};
    test_gif gg = {4, 4, map, 4, 0, 1, &grow};
    file = build_with_giflib(&gg);
    check_page("frame past the screen", &gg, &file, 0);
    gimg_info info;
    CHECK(gimg_probe_memory(file.p, file.len, &info) == GIMG_OK && info.width == 8 &&
              info.height == 5, "grown screen: %dx%d", info.width, info.height);
    free(file.p);
    /* 1x1. */
    test_frame one = {0, 0, 1, 1, 0, -1, 0, px4 + 1, NULL, 0};
    test_gif g1 = {1, 1, map, 4, 0, 1, &one};
    file = build_with_giflib(&g1);
    check_page("1x1", &g1, &file, 0);
    free(file.p);
    free(px4);
    free(px);
    free(map);
}

static void test_transparent(void)
{
    unsigned char *map = palette(16, 4), *px = indices(21, 17, 16, 5);
    test_frame f = {0, 0, 21, 17, 0, 5, 0, px, NULL, 0};
    test_gif g = {21, 17, map, 16, 3, 1, &f};
    bytes file = build_with_giflib(&g);
    check_page("transparent index", &g, &file, 0);
    gimg_image im;
    if (gimg_decode_memory(file.p, file.len, &im) == GIMG_OK) {
        int transparent = 0;
        for (int i = 0; i < 21 * 17; i++)
            transparent += px[i] == 5;
        int zero_alpha = 0;
        for (int y = 0; y < 17; y++)
            for (int x = 0; x < 21; x++)
                zero_alpha += gimg_row(&im, y)[x * 4 + 3] == 0;
        CHECK(im.channels == 4 && transparent > 0 && zero_alpha == transparent,
              "%d pixels of the transparent index, %d with alpha 0", transparent, zero_alpha);
        gimg_image_free(&im);
    }
    free(file.p);
    free(px);
    free(map);
}

static void test_interlaced(void)
{
    unsigned char *map = palette(64, 6);
    for (int h = 1; h <= 17; h += 4) {
        unsigned char *px = indices(13, h, 64, 7 + h);
        test_frame f = {0, 0, 13, h, 1, -1, 0, px, NULL, 0};
        test_gif g = {13, h, map, 64, 0, 1, &f};
        bytes file = build_with_giflib(&g);
        char what[32];
        snprintf(what, sizeof what, "interlaced 13x%d", h);
        check_page(what, &g, &file, 0);
        free(file.p);
        free(px);
    }
    free(map);
}

/* Local maps, indices past the map, and no map at all. */
static void test_colour_maps(void)
{
    unsigned char *global = palette(8, 8), *local = palette(4, 9), *px = indices(11, 7, 4, 10);
    test_frame f = {0, 0, 11, 7, 0, -1, 0, px, local, 4};
    test_gif g = {11, 7, global, 8, 0, 1, &f};
    bytes file = build_with_giflib(&g);
    check_page("local colour map", &g, &file, 0);
    free(file.p);

    /* A 2-entry map, indices 0-3 (LZW code size 2): 2 and 3 are past it. */
    test_frame past = {0, 0, 11, 7, 0, -1, 0, px, NULL, 0};
    test_gif gp = {11, 7, global, 2, 0, 1, &past};
    file = build_with_giflib(&gp);
    check_page("indices past the map (RGB)", &gp, &file, 0);
    free(file.p);
    test_frame past_t = {0, 0, 11, 7, 0, 1, 0, px, NULL, 0};
    test_gif gpt = {11, 7, global, 2, 0, 1, &past_t};
    file = build_with_giflib(&gpt);
    check_page("indices past the map (RGBA)", &gpt, &file, 0);
    free(file.p);

    /* No colour map anywhere: black and white, and past them transparent
     * black, black in RGB. */
    unsigned char *bw = indices(11, 7, 4, 11);
    test_frame none = {0, 0, 11, 7, 0, -1, 0, bw, NULL, 0};
    test_gif gn = {11, 7, NULL, 0, 0, 1, &none};
    file = without_map(11, 7, bw);
    check_page("no colour map", &gn, &file, 0);
    free(file.p);
    free(bw);
    free(px);
    free(local);
    free(global);
}

/* --------------------------------------------------------- animations */

/* Five frames with offsets, transparency and each disposal method; in
 * the RGBA file and in an RGB one (no transparent index). */
static void test_animation(void)
{
    unsigned char *map = palette(16, 12);
    unsigned char *p0 = indices(15, 12, 16, 13), *p1 = indices(6, 5, 16, 14),
                  *p2 = indices(7, 8, 16, 15), *p3 = indices(9, 9, 16, 16),
                  *p4 = indices(8, 6, 16, 17);
    test_frame rgba[] = {
        {0, 0, 15, 12, 0, 3, 1, p0, NULL, 0},
        {2, 3, 6, 5, 0, 5, 2, p1, NULL, 0},    /* disposed to the background */
        {4, 1, 7, 8, 1, -1, 3, p2, NULL, 0},   /* interlaced, restored after */
        {1, 2, 9, 9, 0, 7, 0, p3, NULL, 0},
        {10, 8, 8, 6, 0, 2, 0, p4, NULL, 0},   /* clipped at the screen's edge */
    };
    test_gif g = {15, 12, map, 16, 4, 5, rgba};
    bytes file = build_with_giflib(&g);
    for (int page = 0; page < 5; page++)
        check_page("RGBA animation", &g, &file, page);
    gimg_read_opts o = {.page = 5};
    gimg_image none;
    CHECK(gimg_decode_page(file.p, file.len, &o, &none) == GIMG_E_FORMAT &&
              contains(gimg_last_error(), "GIF has 5 frames: no frame 5"),
          "page 5: %s", gimg_last_error());
    CHECK(none.data == NULL, "page 5 left an image");
    free(file.p);

    test_frame rgb[] = {
        {0, 0, 15, 12, 0, -1, 1, p0, NULL, 0},
        {3, 2, 6, 5, 0, -1, 2, p1, NULL, 0},
        {1, 1, 7, 8, 0, -1, 3, p2, NULL, 0},
        {6, 3, 9, 9, 1, -1, 0, p3, NULL, 0},
        {0, 0, 8, 6, 0, -1, 4, p4, NULL, 0},
    };
    test_gif g2 = {15, 12, map, 16, 4, 5, rgb};
    file = build_with_giflib(&g2);
    for (int page = 0; page < 5; page++)
        check_page("RGB animation", &g2, &file, page);
    free(file.p);

    /* Two frames, the second at an offset, with its own local map. */
    unsigned char *local = palette(4, 18), *q = indices(5, 4, 4, 19);
    test_frame two[] = {
        {0, 0, 15, 12, 0, -1, 0, p0, NULL, 0},
        {7, 5, 5, 4, 0, 1, 0, q, local, 4},
    };
    test_gif g3 = {15, 12, map, 16, 0, 2, two};
    file = build_with_giflib(&g3);
    check_page("2 frames", &g3, &file, 0);
    check_page("2 frames", &g3, &file, 1);
    free(file.p);
    free(q);
    free(local);
    free(p0);
    free(p1);
    free(p2);
    free(p3);
    free(p4);
    free(map);
}

/* ------------------------------------------------- libvips and ImageMagick */

/* Our decoding of page `page` against libvips's (vips rawsave of FILE[page=N]). */
static void compare_vips(const char *what, const bytes *file, int page)
{
    const char *gif = scratch("v.gif"), *raw = scratch("v.raw");
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "vips rawsave '%s[page=%d]' '%s' >/dev/null 2>&1", gif, page, raw);
    gimg_read_opts o = {.page = page};
    gimg_image ours;
    size_t len = 0;
    unsigned char *theirs = NULL;
    if (!write_file(gif, file->p, file->len) || system(cmd) != 0 || !(theirs = slurp(raw, &len))) {
        CHECK(0, "%s: vips could not read our test file", what);
    } else if (gimg_decode_page(file->p, file->len, &o, &ours) != GIMG_OK) {
        CHECK(0, "%s: %s", what, gimg_last_error());
    } else {
        size_t row = (size_t)ours.width * ours.channels;
        int bad = len != row * (size_t)ours.height;   /* also: vips's band count */
        for (int y = 0; !bad && y < ours.height; y++)
            bad = memcmp(gimg_row(&ours, y), theirs + (size_t)y * row, row) != 0;
        CHECK(!bad, "%s page %d: differs from libvips (%zu bytes, ours %dx%dx%d)", what, page,
              len, ours.width, ours.height, ours.channels);
        gimg_image_free(&ours);
    }
    free(theirs);
}

static void test_vips(void)
{
    if (!have_program("vips"))
        SKIP("vips is not installed");
    unsigned char *map = palette(16, 20), *p0 = indices(15, 12, 16, 21),
                  *p1 = indices(6, 5, 16, 22), *p2 = indices(7, 8, 16, 23),
                  *p3 = indices(9, 9, 16, 24);
    /* libvips (libnsgif) agrees with our rules on these: frame 0 covers
     * the screen of the RGB file; disposal 2 is used on a frame with a
     * transparent index (libnsgif fills the others with the background
     * colour even in RGBA). */
    test_frame rgba[] = {
        {0, 0, 15, 12, 0, 3, 1, p0, NULL, 0},
        {2, 3, 6, 5, 0, 5, 2, p1, NULL, 0},
        {4, 1, 7, 8, 1, -1, 3, p2, NULL, 0},
        {1, 2, 9, 9, 0, 7, 0, p3, NULL, 0},
    };
    test_gif g = {15, 12, map, 16, 4, 4, rgba};
    bytes file = build_with_giflib(&g);
    for (int page = 0; page < 4; page++)
        compare_vips("RGBA animation", &file, page);
    free(file.p);
    test_frame rgb[] = {
        {0, 0, 15, 12, 1, -1, 1, p0, NULL, 0},
        {3, 2, 6, 5, 0, -1, 2, p1, NULL, 0},
        {1, 1, 7, 8, 0, -1, 3, p2, NULL, 0},
        {6, 3, 9, 9, 0, -1, 0, p3, NULL, 0},
    };
    test_gif g2 = {15, 12, map, 16, 4, 4, rgb};
    file = build_with_giflib(&g2);
    for (int page = 0; page < 4; page++)
        compare_vips("RGB animation", &file, page);
    free(file.p);
    /* Indices past a 2-entry map; no map at all; a frame larger than the screen. */
    test_frame past = {0, 0, 6, 5, 0, -1, 0, p1, NULL, 0};
    test_gif gp = {6, 5, map, 2, 0, 1, &past};
    file = build_with_giflib(&gp);
    compare_vips("indices past the map", &file, 0);
    free(file.p);
    unsigned char *bw = indices(6, 5, 4, 25);
    file = without_map(6, 5, bw);
    compare_vips("no colour map", &file, 0);
    free(file.p);
    test_frame grow = {0, 0, 9, 9, 0, 2, 0, p3, NULL, 0};
    test_gif gg = {4, 3, map, 16, 0, 1, &grow};
    file = build_with_giflib(&gg);
    compare_vips("a first frame larger than the screen", &file, 0);
    free(file.p);
    free(bw);
    free(p0);
    free(p1);
    free(p2);
    free(p3);
    free(map);
}

/* ImageMagick 6 (/usr/bin/convert, not a stand-in) on single frames:
 * equal samples, except that it keeps the palette colour under transparent
 * pixels where we write transparent black: there only alpha is compared. */
static void test_imagemagick(void)
{
    const char *convert = "/usr/bin/convert";
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "%s -version 2>/dev/null | grep -q ImageMagick", convert);
    if (access(convert, X_OK) != 0 || system(cmd) != 0)
        SKIP("ImageMagick's /usr/bin/convert is not installed");
    unsigned char *map = palette(32, 30), *px = indices(23, 19, 32, 31);
    static const int transparent[2] = {-1, 9};
    for (int t = 0; t < 2; t++)
        for (int interlaced = 0; interlaced < 2; interlaced++) {
            test_frame f = {0, 0, 23, 19, interlaced, transparent[t], 0, px, NULL, 0};
            test_gif g = {23, 19, map, 32, 0, 1, &f};
            bytes file = build_with_giflib(&g);
            const char *gif = scratch("m.gif"), *pam = scratch("m.pam");
            snprintf(cmd, sizeof cmd, "%s '%s' '%s' >/dev/null 2>&1", convert, gif, pam);
            gimg_image ours, theirs;
            if (!write_file(gif, file.p, file.len) || system(cmd) != 0 ||
                gimg_read(pam, &theirs) != GIMG_OK) {
                CHECK(0, "ImageMagick could not convert our test GIF");
            } else {
                if (gimg_decode_memory(file.p, file.len, &ours) == GIMG_OK) {
                    int bad = ours.channels != theirs.channels || ours.width != theirs.width ||
                              ours.height != theirs.height;
                    for (int y = 0; !bad && y < ours.height; y++)
                        for (int x = 0; x < ours.width; x++) {
                            const unsigned char *a = gimg_row(&ours, y) + x * ours.channels;
                            const unsigned char *b = gimg_row(&theirs, y) + x * ours.channels;
                            int visible = ours.channels == 3 || a[3] != 0;
                            bad += (visible && memcmp(a, b, 3) != 0) ||
                                   (ours.channels == 4 && a[3] != b[3]);
                        }
                    CHECK(!bad, "transparent %d, interlaced %d: %d pixels differ from ImageMagick's",
                          transparent[t], interlaced, bad);
                    gimg_image_free(&ours);
                } else {
                    CHECK(0, "%s", gimg_last_error());
                }
                gimg_image_free(&theirs);
            }
            free(file.p);
        }
    free(px);
    free(map);
}

/* -------------------------------------------------- crafted, byte by byte */

static void expect_refusal(const char *what, const unsigned char *buf, size_t len, int page,
                           gimg_status want_status, const char *want)
{
    gimg_read_opts o = {.page = page};
    gimg_image im;
    double t0 = cpu_seconds();
    gimg_status st = gimg_decode_page(buf, len, &o, &im);
    double t = cpu_seconds() - t0;
    CHECK(st == want_status && contains(gimg_last_error(), want),
          "%s: status %d, \"%s\" (wanted %d, \"%s\")", what, st, gimg_last_error(), want_status,
          want);
    CHECK(im.data == NULL && im.width == 0, "%s: a failed decode left an image", what);
    CHECK(t < SANITIZER_SLOWDOWN, "%s: %.2f s of CPU", what, t);
    if (st == GIMG_OK)
        gimg_image_free(&im);
}

static void test_hostile(void)
{
    /* The old default's pixel limit, given: huge sizes name it. */
    gimg_set_max_pixels((uint64_t)1 << 28);
    /* A valid 6x4 file, cut inside its frame at every length: truncated. */
    bytes ok = gif_head(6, 4);
    literal_frame(&ok, 0, 0, 6, 4, 1);
    put_u8(&ok, 0x3B);
    gimg_image im;
    CHECK(gimg_decode_memory(ok.p, ok.len, &im) == GIMG_OK, "the valid file: %s",
          gimg_last_error());
    gimg_image_free(&im);
    for (size_t cut = 6; cut < ok.len - 1; cut++) {
        char what[48];
        snprintf(what, sizeof what, "cut to %zu of %zu bytes", cut, ok.len);
        expect_refusal(what, ok.p, cut, 0, GIMG_E_FORMAT, "truncated GIF data");
    }
    /* Without its trailer the file is whole. */
    CHECK(gimg_decode_memory(ok.p, ok.len - 1, &im) == GIMG_OK, "no trailer: %s",
          gimg_last_error());
    gimg_image_free(&im);

    /* A second frame cut short: the first still reads, as a 1-page file. */
    bytes two = gif_head(6, 4);
    literal_frame(&two, 0, 0, 6, 4, 1);
    size_t second = two.len;
    literal_frame(&two, 0, 0, 6, 4, 2);
    gimg_info info;
    CHECK(gimg_probe_memory(two.p, second + 12, &info) == GIMG_OK && info.pages == 1,
          "a cut second frame: %s, %d pages", gimg_last_error(), info.pages);
    CHECK(gimg_decode_memory(two.p, second + 12, &im) == GIMG_OK, "cut second frame: %s",
          gimg_last_error());
    gimg_image_free(&im);
    expect_refusal("page 1 of a file whose frame 1 is cut", two.p, second + 12, 1, GIMG_E_FORMAT,
                   "GIF has 1 frame: no frame 1");
    free(two.p);

    /* Junk where a block should begin, before any frame. */
    bytes junk = gif_head(6, 4);
    put(&junk, "\x99junk", 5);
    expect_refusal("junk after the header", junk.p, junk.len, 0, GIMG_E_FORMAT,
                   "corrupt GIF data");
    free(junk.p);

    /* LZW data ending (EOI) before the last pixel, and sub-blocks ending
     * before it: refused. */
    static const unsigned early_codes[] = {4, 1, 2, 5}, early_w[] = {3, 3, 3, 3};
    bytes early = gif_head(4, 4), data = {0};
    image_descriptor(&early, 0, 0, 4, 4, 2);
    lzw_codes(&data, early_codes, early_w, 4);
    sub_blocks(&early, &data);
    put_u8(&early, 0x3B);
    expect_refusal("EOI before the last pixel", early.p, early.len, 0, GIMG_E_FORMAT,
                   "corrupt GIF data");
    free(early.p);
    data.len = 0;
    bytes stop = gif_head(4, 4);
    image_descriptor(&stop, 0, 0, 4, 4, 2);
    lzw_codes(&data, early_codes, early_w, 3);
    sub_blocks(&stop, &data);
    put_u8(&stop, 0x3B);
    expect_refusal("data before the last pixel", stop.p, stop.len, 0, GIMG_E_FORMAT,
                   "corrupt GIF data");
    free(stop.p);

    /* Codes past the table: right after a clear code giflib finds no
     * string to extend and refuses; later, it decodes the code by its rule
     * (the previous string and one more index), into defined pixels whose
     * first ones, before the bad code, are right. */
    static const unsigned bad1[] = {4, 7, 1, 5}, bad1_w[] = {3, 3, 3, 3};
    data.len = 0;
    bytes beyond = gif_head(4, 1);
    image_descriptor(&beyond, 0, 0, 4, 1, 2);
    lzw_codes(&data, bad1, bad1_w, 4);
    sub_blocks(&beyond, &data);
    put_u8(&beyond, 0x3B);
    expect_refusal("a code past the table after a clear", beyond.p, beyond.len, 0, GIMG_E_FORMAT,
                   "corrupt GIF data");
    free(beyond.p);
    /* clear, 1, 2, 3 (3 bits; the table then has 6 and 7, and the next
     * code is 4 bits wide), 12 (past the table: its next entry is 8), end. */
    static const unsigned bad2[] = {4, 1, 2, 3, 12, 5}, bad2_w[] = {3, 3, 3, 3, 4, 4};
    data.len = 0;
    bytes lenient = gif_head(5, 1);
    image_descriptor(&lenient, 0, 0, 5, 1, 2);
    lzw_codes(&data, bad2, bad2_w, 6);
    sub_blocks(&lenient, &data);
    put_u8(&lenient, 0x3B);
    gimg_status st = gimg_decode_memory(lenient.p, lenient.len, &im);
    if (st == GIMG_OK) {
        const unsigned char *p = gimg_row(&im, 0);
        CHECK(im.width == 5 && memcmp(p, k_map4 + 3, 9) == 0,
              "the pixels before the bad code are not indices 1, 2, 3");
        gimg_image_free(&im);
    } else {
        CHECK(st == GIMG_E_FORMAT && contains(gimg_last_error(), "corrupt GIF data"), "%s",
              gimg_last_error());
    }
    free(lenient.p);
    free(data.p);

    /* A code size over 8 (giflib's limit). */
    bytes wide = gif_head(4, 4);
    image_descriptor(&wide, 0, 0, 4, 4, 12);
    put(&wide, "\x01\x00\x00\x3B", 4);
    expect_refusal("LZW code size 12", wide.p, wide.len, 0, GIMG_E_FORMAT, "code size 12");
    free(wide.p);

    /* A 65535x65535 screen in a 40-byte file: over the limit, from the
     * header, quickly. */
    bytes huge = gif_head(65535, 65535);
    literal_frame(&huge, 0, 0, 1, 1, 1);
    put_u8(&huge, 0x3B);
    expect_refusal("65535x65535 screen", huge.p, huge.len, 0, GIMG_E_LIMIT, "--max-pixels");
    free(huge.p);

    /* A 60000x60000 second frame on a 4x4 screen: the frame is over the
     * limit (giflib decodes whole rows), from its descriptor. */
    bytes big_frame = gif_head(4, 4);
    literal_frame(&big_frame, 0, 0, 4, 4, 1);
    image_descriptor(&big_frame, 0, 0, 60000, 60000, 2);
    put(&big_frame, "\x02\x4c\x01\x00\x3B", 5);
    expect_refusal("60000x60000 frame on a 4x4 screen", big_frame.p, big_frame.len, 1,
                   GIMG_E_LIMIT, "limit");
    CHECK(gimg_decode_memory(big_frame.p, big_frame.len, &im) == GIMG_OK,
          "page 0 of that file: %s", gimg_last_error());
    gimg_image_free(&im);
    free(big_frame.p);

    /* Compositing work: with the limit at 100 pixels, page N of 8x8 frames
     * on an 8x8 screen costs (N + 1) x 128 pixels, against 1600: page 11
     * is allowed, page 12 is not. */
    bytes many = gif_head(8, 8);
    for (int k = 0; k < 14; k++)
        literal_frame(&many, 0, 0, 8, 8, (unsigned)k % 4);
    put_u8(&many, 0x3B);
    gimg_set_max_pixels(100);
    gimg_read_opts o = {.page = 11};
    st = gimg_decode_page(many.p, many.len, &o, &im);
    /* Frame 11 is all index 3: yellow. */
    CHECK(st == GIMG_OK && memcmp(gimg_row(&im, 7) + 7 * 3, k_map4 + 9, 3) == 0,
          "page 11 under a 100-pixel limit: %s", st ? gimg_last_error() : "wrong colour");
    if (st == GIMG_OK)
        gimg_image_free(&im);
    expect_refusal("page 12 under a 100-pixel limit", many.p, many.len, 12, GIMG_E_LIMIT,
                   "over the limit of 1600 pixels' work");
    gimg_set_max_pixels(GIMG_DEFAULT_MAX_PIXELS);
    free(many.p);
    free(ok.p);
}

/* 20000 1x1 frames: the count comes from the block walk, and the last
 * frame decodes, within a second of CPU and without memory per frame. */
static void test_many_frames(void)
{
    bytes b = gif_head(1, 1);
    for (int k = 0; k < 20000; k++)
        literal_frame(&b, 0, 0, 1, 1, (unsigned)k % 4);
    put_u8(&b, 0x3B);
    double t0 = cpu_seconds();
    gimg_info info;
    CHECK(gimg_probe_memory(b.p, b.len, &info) == GIMG_OK && info.pages == 20000,
          "probe: %s, %d pages", gimg_last_error(), info.pages);
    gimg_read_opts o = {.page = 19999};
    gimg_image im;
    gimg_status st = gimg_decode_page(b.p, b.len, &o, &im);
    double t = cpu_seconds() - t0;
    /* Frame 19999 has index 19999 % 4 = 3: yellow. */
    CHECK(st == GIMG_OK && memcmp(im.data, k_map4 + 9, 3) == 0, "page 19999: %s",
          st ? gimg_last_error() : "wrong colour");
    CHECK(t < SANITIZER_SLOWDOWN, "20000 frames: %.2f s of CPU", t);
    if (st == GIMG_OK)
        gimg_image_free(&im);
    free(b.p);
}

/* ------------------------------------------------------------- threads */

typedef struct {
    const bytes *file;
    int page;
    const gimg_image *want;
    int ok;
} thread_job;

static void *decode_job(void *arg)
{
    thread_job *j = arg;
    j->ok = 1;
    for (int i = 0; i < 30 && j->ok; i++) {
        gimg_read_opts o = {.page = j->page};
        gimg_image im;
        j->ok = gimg_decode_page(j->file->p, j->file->len, &o, &im) == GIMG_OK &&
                same_pixels(&im, j->want);
        gimg_image_free(&im);
    }
    return NULL;
}

static void test_threads(void)
{
    unsigned char *map = palette(16, 40), *p0 = indices(31, 23, 16, 41), *p1 = indices(9, 7, 16, 42);
    test_frame frames[] = {{0, 0, 31, 23, 1, -1, 3, p0, NULL, 0}, {5, 6, 9, 7, 0, 2, 0, p1, NULL, 0}};
    test_gif g = {31, 23, map, 16, 0, 2, frames};
    bytes file = build_with_giflib(&g);
    gimg_image want[2] = {composite(&g, 0), composite(&g, 1)};
    thread_job jobs[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (thread_job){&file, i % 2, &want[i % 2], 0};
        pthread_create(&t[i], NULL, decode_job, &jobs[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        CHECK(jobs[i].ok, "thread %d decoded a wrong image", i);
    }
    gimg_image_free(&want[0]);
    gimg_image_free(&want[1]);
    free(file.p);
    free(p0);
    free(p1);
    free(map);
}

int main(void)
{
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_row);
    RUN(test_palette);
    RUN(test_transparent);
    RUN(test_interlaced);
    RUN(test_colour_maps);
    RUN(test_animation);
    RUN(test_vips);
    RUN(test_imagemagick);
    RUN(test_hostile);
    RUN(test_many_frames);
    RUN(test_threads);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
    return check_summary();
}
