/*
 * make_corpus — writes the seed corpora of the fuzz targets, and the
 * valid files that tests/cli_hardening.sh truncates and corrupts:
 *
 *   make_corpus DIR
 *
 * makes DIR/decode (small valid files of every format and layout we read:
 * PNG of every colour type and bit depth, palette, transparency, Adam7 and
 * several IDAT chunks; baseline JPEG with and without chroma subsampling;
 * BMP 8-bit palette, 24-bit bottom-up and top-down, 32-bit; TGA raw,
 * run-length and colour-mapped; HDR flat and run-length; PNM plain and raw
 * of every kind, odd maxvals, PAM of every TUPLTYPE, PFM of both byte
 * orders), DIR/pnm (the netpbm ones, and a stream of two images),
 * DIR/cli (argument vectors), DIR/parse (the strings of parsers.h),
 * DIR/wire (gimgd's requests, one per operation) and DIR/cost (--device
 * auto's cost tables and caches, the caches with this machine's identity);
 * and DIR/hostile, files every tool must refuse quickly: headers claiming
 * huge, over-long or empty images with next to no data (also seeds of
 * DIR/decode, so that the fuzzer starts from the limits too).
 * Every file is made here, from seeded pixels: nothing is downloaded.
 * Exit status 0, or 1 when a file cannot be written.
 */
#include "codec.h"
#include "cost.h"
#include "gimg.h"
#include "parsers.h"
#include "testimg.h"
#include "wire.h"

#include <errno.h>
#include <gif_lib.h>
#include <libdeflate.h>
#include <stdio.h>
#include <sys/stat.h>

#include <jpeglib.h>

static const char *g_dir;
static int g_failed;

/* ------------------------------------------------------------- output */

static void put(const char *target, const char *name, const void *data, size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", g_dir, target);
    if (mkdir(path, 0777) != 0 && errno != EEXIST) {
        perror(path);
        g_failed = 1;
        return;
    }
    snprintf(path, sizeof path, "%s/%s/%s", g_dir, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        g_failed = 1;
    }
}

/* The decoder's corpus, and the corpus of the format's own target: pnm
 * for the netpbm files, fuzz_jpeg's, fuzz_png's, ... for the others. */
static void put_image(const char *name, const void *data, size_t len)
{
    put("decode", name, data, len);
    gimg_format f = gimg_format_sniff(data, len);
    if (f == GIMG_FMT_PNM || f == GIMG_FMT_PAM || f == GIMG_FMT_PFM)
        put("pnm", name, data, len);
    else if (f == GIMG_FMT_JPEG || f == GIMG_FMT_PNG || f == GIMG_FMT_TIFF ||
             f == GIMG_FMT_WEBP || f == GIMG_FMT_GIF)
        put(gimg_format_name(f), name, data, len);
}

typedef struct {
    unsigned char *p;
    size_t len, cap;
} buf;

static void add(buf *b, const void *data, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p) {
            fputs("make_corpus: out of memory\n", stderr);
            exit(1);
        }
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

static void add_str(buf *b, const char *s) { add(b, s, strlen(s)); }
static void add_u8(buf *b, unsigned v) { unsigned char c = (unsigned char)v; add(b, &c, 1); }
static void add_le16(buf *b, unsigned v) { add_u8(b, v & 255); add_u8(b, (v >> 8) & 255); }
static void add_le32(buf *b, uint32_t v) { add_le16(b, v & 0xffff); add_le16(b, v >> 16); }
static void add_be32(buf *b, uint32_t v)
{
    add_u8(b, v >> 24); add_u8(b, (v >> 16) & 255); add_u8(b, (v >> 8) & 255); add_u8(b, v & 255);
}

/* ------------------------------------------- files our encoders write */

static void encoded_with(const char *name, gimg_format f, int w, int h, int c, gimg_sample s,
                         const gimg_write_opts *o)
{
    gimg_image im;
    if (gimg_image_alloc(&im, w, h, c, s) != GIMG_OK) {
        fprintf(stderr, "make_corpus: %s\n", gimg_last_error());
        exit(1);
    }
    testimg_fill_random(&im, (uint64_t)w * 131 + (uint64_t)h * 7 + (uint64_t)c);
    unsigned char *data;
    size_t len;
    if (gimg_encode(&im, f, o, &data, &len) != GIMG_OK) {
        fprintf(stderr, "make_corpus: %s: %s\n", name, gimg_last_error());
        exit(1);
    }
    put_image(name, data, len);
    free(data);
    gimg_image_free(&im);
}

static void encoded(const char *name, gimg_format f, int w, int h, int c, gimg_sample s,
                    int quality, int level)
{
    gimg_write_opts o;
    gimg_write_opts_init(&o);
    o.quality = quality;
    o.png_level = level;
    encoded_with(name, f, w, h, c, s, &o);
}

/* A JPEG with a restart marker at the end of every MCU row (cjpeg
 * -restart 1), the first component sampled h x v: what jpeg_strips.c
 * cuts. Written by libjpeg itself (our encoder writes markers from 1 MP). */
static void restart_jpeg(const char *name, int w, int h, int hs, int vs)
{
    gimg_image im;
    if (gimg_image_alloc(&im, w, h, 3, GIMG_U8) != GIMG_OK) {
        fprintf(stderr, "make_corpus: %s\n", gimg_last_error());
        exit(1);
    }
    testimg_fill_random(&im, (uint64_t)w * 17 + (uint64_t)h);
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    unsigned char *mem = NULL;
    unsigned long size = 0;
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    jpeg_mem_dest(&c, &mem, &size);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 75, TRUE);
    c.comp_info[0].h_samp_factor = hs;
    c.comp_info[0].v_samp_factor = vs;
    c.restart_in_rows = 1;
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = gimg_row(&im, (int)c.next_scanline);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    put_image(name, mem, size);
    free(mem);
    gimg_image_free(&im);
}

static void encoded_files(void)
{
    static const gimg_sample depth[] = { GIMG_U8, GIMG_U16 };
    char name[64];
    for (int c = 1; c <= 4; c++)
        for (int d = 0; d < 2; d++) {
            int bits = 8 * (int)depth[d];
            snprintf(name, sizeof name, "png-c%d-d%d", c, bits);
            encoded(name, GIMG_FMT_PNG, 7, 5, c, depth[d], 90, 6);
            snprintf(name, sizeof name, "pam-c%d-d%d", c, bits);
            encoded(name, GIMG_FMT_PAM, 5, 3, c, depth[d], 90, 6);
        }
    encoded("png-stored", GIMG_FMT_PNG, 9, 4, 3, GIMG_U8, 90, 0);
    encoded("png-level12", GIMG_FMT_PNG, 16, 16, 4, GIMG_U16, 90, 12);
    for (int d = 0; d < 2; d++) {
        snprintf(name, sizeof name, "pgm-d%d", 8 * (int)depth[d]);
        encoded(name, GIMG_FMT_PNM, 6, 4, 1, depth[d], 90, 6);
        snprintf(name, sizeof name, "ppm-d%d", 8 * (int)depth[d]);
        encoded(name, GIMG_FMT_PNM, 6, 4, 3, depth[d], 90, 6);
    }
    encoded("pfm-gray", GIMG_FMT_PFM, 4, 3, 1, GIMG_F32, 90, 6);
    encoded("pfm-rgb", GIMG_FMT_PFM, 4, 3, 3, GIMG_F32, 90, 6);
    /* JPEG: 4:2:0 below quality 90, 4:4:4 from 90; gray is one component. */
    encoded("jpeg-q50-420", GIMG_FMT_JPEG, 19, 11, 3, GIMG_U8, 50, 6);
    encoded("jpeg-q100-444", GIMG_FMT_JPEG, 9, 9, 3, GIMG_U8, 100, 6);
    encoded("jpeg-gray-source", GIMG_FMT_JPEG, 8, 8, 1, GIMG_U8, 75, 6);
    gimg_write_opts o;
    gimg_write_opts_init(&o);
    o.jpeg_subsampling = GIMG_SUBSAMPLE_422;
    o.jpeg_progressive = 1;
    encoded_with("jpeg-progressive-422", GIMG_FMT_JPEG, 21, 13, 3, GIMG_U8, &o);
    restart_jpeg("jpeg-restarts-444", 24, 40, 1, 1);
    restart_jpeg("jpeg-restarts-420", 40, 50, 2, 2);
    /* TIFF: each compression, each depth. */
    static const gimg_tiff_compression tiff_c[] = {GIMG_TIFF_DEFLATE, GIMG_TIFF_LZW,
                                                   GIMG_TIFF_NONE};
    static const gimg_sample tiff_s[] = {GIMG_U8, GIMG_U16, GIMG_F32};
    for (int k = 0; k < 3; k++) {
        gimg_write_opts_init(&o);
        o.tiff_compression = tiff_c[k];
        snprintf(name, sizeof name, "tiff-c%d-%s-d%d", k + 1,
                 k == 0 ? "deflate" : k == 1 ? "lzw" : "none", 8 * (int)tiff_s[k]);
        encoded_with(name, GIMG_FMT_TIFF, 7, 5, k + 2, tiff_s[k], &o);
    }
    /* WebP: lossy and lossless, with and without alpha. */
    encoded("webp-lossy-rgb", GIMG_FMT_WEBP, 17, 9, 3, GIMG_U8, 80, 6);
    encoded("webp-lossy-rgba", GIMG_FMT_WEBP, 9, 7, 4, GIMG_U8, 60, 6);
    gimg_write_opts_init(&o);
    o.webp_lossless = 1;
    encoded_with("webp-lossless-rgba", GIMG_FMT_WEBP, 11, 6, 4, GIMG_U8, &o);
    encoded("bmp-rgb", GIMG_FMT_BMP, 5, 3, 3, GIMG_U8, 90, 6);
    encoded("bmp-rgba", GIMG_FMT_BMP, 5, 3, 4, GIMG_U8, 90, 6);
    for (int c = 1; c <= 4; c++) {
        snprintf(name, sizeof name, "tga-rle-c%d", c);
        encoded(name, GIMG_FMT_TGA, 9, 4, c, GIMG_U8, 90, 6);
    }
    /* Radiance writes run-length scanlines for widths 8 to 32767, flat ones otherwise. */
    encoded("hdr-rle", GIMG_FMT_HDR, 17, 3, 3, GIMG_F32, 90, 6);
    encoded("hdr-flat", GIMG_FMT_HDR, 5, 3, 3, GIMG_F32, 90, 6);
}

/* -------------------------------------------------- hand-made PNG */

static uint8_t sample_at(int x, int y, int c, unsigned max)
{
    return (uint8_t)(((unsigned)x * 37u + (unsigned)y * 101u + (unsigned)c * 53u) % (max + 1));
}

static void png_chunk(buf *b, const char *type, const void *data, size_t len)
{
    add_be32(b, (uint32_t)len);
    size_t at = b->len;
    add(b, type, 4);
    if (len)
        add(b, data, len);
    add_be32(b, libdeflate_crc32(0, b->p + at, len + 4));
}

/* One row of a (sub)image: its filter byte (0, none) and packed samples. */
static void png_row(buf *raw, int x0, int dx, int w, int y, int spp, int depth)
{
    add_u8(raw, 0);
    unsigned max = depth == 16 ? 255 : (1u << (depth < 8 ? depth : 8)) - 1;
    unsigned acc = 0;
    int bits = 0;
    for (int i = 0; i < w; i++)
        for (int c = 0; c < spp; c++) {
            unsigned v = sample_at(x0 + i * dx, y, c, max);
            if (depth == 16) {
                add_u8(raw, v);
                add_u8(raw, 255 - v);
            } else if (depth == 8) {
                add_u8(raw, v);
            } else {
                acc = acc << depth | v;
                bits += depth;
                if (bits == 8) {
                    add_u8(raw, acc);
                    acc = 0;
                    bits = 0;
                }
            }
        }
    if (bits)
        add_u8(raw, acc << (8 - bits));
}

/* A PNG of colour type `type` (0 gray, 2 RGB, 3 palette, 4 gray+alpha,
 * 6 RGBA) and bit depth `depth`; Adam7 when interlace; tRNS when trns; the
 * zlib stream split over two IDAT chunks. */
static void png_file(const char *name, int w, int h, int type, int depth, int interlace,
                     int trns)
{
    static const int spp_of[7] = { 1, 0, 3, 1, 2, 0, 4 };
    const int spp = spp_of[type];
    buf raw = { 0 }, out = { 0 };
    if (!interlace) {
        for (int y = 0; y < h; y++)
            png_row(&raw, 0, 1, w, y, spp, depth);
    } else {
        static const int pass[7][4] = { { 0, 0, 8, 8 }, { 4, 0, 8, 8 }, { 0, 4, 4, 8 },
                                        { 2, 0, 4, 4 }, { 0, 2, 2, 4 }, { 1, 0, 2, 2 },
                                        { 0, 1, 1, 2 } };
        for (int p = 0; p < 7; p++) {
            int pw = (w - pass[p][0] + pass[p][2] - 1) / pass[p][2];
            int ph = (h - pass[p][1] + pass[p][3] - 1) / pass[p][3];
            if (pw <= 0 || ph <= 0)
                continue;
            for (int j = 0; j < ph; j++)
                png_row(&raw, pass[p][0], pass[p][2], pw, pass[p][1] + j * pass[p][3], spp,
                        depth);
        }
    }
    struct libdeflate_compressor *z = libdeflate_alloc_compressor(6);
    size_t cap = libdeflate_zlib_compress_bound(z, raw.len);
    unsigned char *zdata = malloc(cap);
    size_t zlen = z && zdata ? libdeflate_zlib_compress(z, raw.p, raw.len, zdata, cap) : 0;
    libdeflate_free_compressor(z);
    if (!zlen) {
        fprintf(stderr, "make_corpus: %s: compression failed\n", name);
        exit(1);
    }

    add(&out, "\x89PNG\r\n\x1a\n", 8);
    buf ihdr = { 0 };
    add_be32(&ihdr, (uint32_t)w);
    add_be32(&ihdr, (uint32_t)h);
    add_u8(&ihdr, depth);
    add_u8(&ihdr, type);
    add_u8(&ihdr, 0);
    add_u8(&ihdr, 0);
    add_u8(&ihdr, interlace);
    png_chunk(&out, "IHDR", ihdr.p, ihdr.len);
    if (type == 3) {
        buf plte = { 0 };
        for (int i = 0; i < (1 << depth); i++) {
            add_u8(&plte, i * 255 / ((1 << depth) - 1));
            add_u8(&plte, 255 - i * 13);
            add_u8(&plte, i * 77);
        }
        png_chunk(&out, "PLTE", plte.p, plte.len);
        free(plte.p);
    }
    if (trns) {
        buf t = { 0 };
        if (type == 3) {
            for (int i = 0; i < 3; i++)
                add_u8(&t, i * 100);
        } else {
            for (int c = 0; c < (type == 2 ? 3 : 1); c++) {
                add_u8(&t, 0);
                add_u8(&t, sample_at(0, 0, c, depth == 16 ? 255 : (1u << depth) - 1));
            }
        }
        png_chunk(&out, "tRNS", t.p, t.len);
        free(t.p);
    }
    png_chunk(&out, "tEXt", "Comment\0made by gimg's make_corpus", 34);
    png_chunk(&out, "IDAT", zdata, zlen / 2);
    png_chunk(&out, "IDAT", zdata + zlen / 2, zlen - zlen / 2);
    png_chunk(&out, "IEND", NULL, 0);
    put_image(name, out.p, out.len);
    free(ihdr.p);
    free(out.p);
    free(raw.p);
    free(zdata);
}

static void png_files(void)
{
    png_file("png-gray1", 13, 5, 0, 1, 0, 0);
    png_file("png-gray2", 11, 3, 0, 2, 0, 0);
    png_file("png-gray4-trns", 9, 4, 0, 4, 0, 1);
    png_file("png-rgb8-trns", 6, 4, 2, 8, 0, 1);
    png_file("png-rgb16-adam7", 11, 9, 2, 16, 1, 0);
    png_file("png-gray8-adam7", 3, 2, 0, 8, 1, 0);
    png_file("png-palette1", 17, 3, 3, 1, 0, 0);
    png_file("png-palette4-trns", 7, 5, 3, 4, 0, 1);
    png_file("png-palette8-adam7", 10, 10, 3, 8, 1, 1);
    png_file("png-graya8", 5, 4, 4, 8, 0, 0);
    png_file("png-rgba16-adam7", 9, 9, 6, 16, 1, 0);
}

/* ------------------------------------------ hand-made BMP and TGA */

static void bmp_file(const char *name, int w, int h, int bpp, int top_down)
{
    const int colours = bpp <= 8 ? 1 << bpp : 0;
    const uint32_t row = (uint32_t)((bpp * w + 31) / 32 * 4);
    const uint32_t offset = 14 + 40 + 4u * (uint32_t)colours;
    buf b = { 0 };
    add_str(&b, "BM");
    add_le32(&b, offset + row * (uint32_t)h);
    add_le32(&b, 0);
    add_le32(&b, offset);
    add_le32(&b, 40);
    add_le32(&b, (uint32_t)w);
    add_le32(&b, (uint32_t)(top_down ? -h : h));
    add_le16(&b, 1);
    add_le16(&b, (unsigned)bpp);
    add_le32(&b, 0);                 /* BI_RGB */
    add_le32(&b, row * (uint32_t)h);
    add_le32(&b, 2835);
    add_le32(&b, 2835);
    add_le32(&b, (uint32_t)colours);
    add_le32(&b, 0);
    for (int i = 0; i < colours; i++) {
        add_u8(&b, i * 255 / (colours - 1));
        add_u8(&b, 255 - i * 255 / (colours - 1));
        add_u8(&b, (i * 91) & 255);
        add_u8(&b, 0);
    }
    for (int y = 0; y < h; y++) {
        size_t start = b.len;
        if (bpp <= 8) {
            unsigned acc = 0;
            int bits = 0;
            for (int x = 0; x < w; x++) {
                acc = acc << bpp | sample_at(x, y, 0, (unsigned)colours - 1);
                if ((bits += bpp) == 8) {
                    add_u8(&b, acc);
                    acc = 0;
                    bits = 0;
                }
            }
            if (bits)
                add_u8(&b, acc << (8 - bits));
        } else {
            for (int x = 0; x < w; x++)
                for (int c = 0; c < bpp / 8; c++)
                    add_u8(&b, sample_at(x, y, c, 255));
        }
        while (b.len - start < row)
            add_u8(&b, 0);
    }
    put_image(name, b.p, b.len);
    free(b.p);
}

/* type 1 colour-mapped, 2 true-colour, 3 gray (all uncompressed). */
static void tga_file(const char *name, int w, int h, int type, int bpp)
{
    const int map = type == 1 ? 16 : 0;
    buf b = { 0 };
    add_u8(&b, 3);                   /* image ID length */
    add_u8(&b, map ? 1 : 0);
    add_u8(&b, type);
    add_le16(&b, 0);
    add_le16(&b, map);
    add_u8(&b, map ? 24 : 0);
    add_le16(&b, 0);
    add_le16(&b, 0);
    add_le16(&b, w);
    add_le16(&b, h);
    add_u8(&b, bpp);
    add_u8(&b, 0x20 | (bpp == 32 ? 8 : 0));  /* top-left origin; alpha bits */
    add_str(&b, "ids");
    for (int i = 0; i < map; i++) {
        add_u8(&b, i * 16);
        add_u8(&b, 255 - i * 16);
        add_u8(&b, i * 5);
    }
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < bpp / 8; c++)
                add_u8(&b, sample_at(x, y, c, map ? (unsigned)map - 1 : 255));
    put_image(name, b.p, b.len);
    free(b.p);
}

/* ------------------------------------------------ hand-made netpbm */

/* A file from a string literal, NUL bytes included. */
#define text_file(name, literal) put_image(name, literal, sizeof literal - 1)

static void netpbm_files(void)
{
    text_file("pbm-plain", "P1\n# a comment\n5 3\n1 0 1 0 1\n0 1 0 1 0\n11111\n");
    text_file("pgm-plain-maxval1000", "P2 4 2 1000\n0 250 500 1000\n# mid-raster comment\n1 2 3 999\n");
    text_file("ppm-plain-maxval15", "P3\n2 2\n15\n0 0 0 15 15 15\n1 2 3 4 5 6\n");
    text_file("pbm-raw", "P4\n# bits\n10 2\n\xA5\xC0\x5A\x40");
    text_file("pgm-raw-maxval100", "P5\n3 2\n100\n\x00\x32\x64\x01\x02\x03");
    text_file("pgm-raw-maxval4095", "P5\n2 1\n4095\n\x0f\xff\x08\x00");
    text_file("pam-blackandwhite",
              "P7\nWIDTH 3\nHEIGHT 1\nDEPTH 1\nMAXVAL 1\nTUPLTYPE BLACKANDWHITE\nENDHDR\n\x01\x00\x01");
    text_file("pam-graya-maxval300",
              "P7\n# comment\nWIDTH 2\nHEIGHT 1\nDEPTH 2\nMAXVAL 300\nTUPLTYPE GRAYSCALE_ALPHA\n"
              "ENDHDR\n\x00\x01\x01\x2c\x00\x96\x00\x00");
    text_file("pam-no-tupltype", "P7\nWIDTH 1\nHEIGHT 2\nDEPTH 3\nMAXVAL 255\nENDHDR\nabcdef");
    /* Big-endian PFM: a positive scale. 1.0f and 0.5f. */
    text_file("pfm-big-endian", "Pf\n2 1\n1.0\n\x3f\x80\x00\x00\x3f\x00\x00\x00");
    /* A stream of two images, as netpbm programs concatenate them. */
    static const char two[] = "P5\n2 1\n255\n\x10\x20\nP6 1 1 255 \x01\x02\x03\n";
    put("pnm", "stream-two-images", two, sizeof two - 1);
}

/* ------------------------------------------------- hostile headers */

static void put_hostile(const char *name, const void *data, size_t len)
{
    put("hostile", name, data, len);
    put("decode", name, data, len);
}

#define hostile_text(name, literal) put_hostile(name, literal, sizeof literal - 1)

/* A PNG whose IHDR claims w x h RGB 8-bit, with a valid but tiny IDAT. */
static void png_claiming(const char *name, uint32_t w, uint32_t h)
{
    buf b = { 0 }, ihdr = { 0 };
    add(&b, "\x89PNG\r\n\x1a\n", 8);
    add_be32(&ihdr, w);
    add_be32(&ihdr, h);
    add(&ihdr, "\x08\x02\x00\x00\x00", 5);
    png_chunk(&b, "IHDR", ihdr.p, ihdr.len);
    static const unsigned char z[] = { 0x78, 0x9c, 0x63, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01 };
    png_chunk(&b, "IDAT", z, sizeof z);
    png_chunk(&b, "IEND", NULL, 0);
    put_hostile(name, b.p, b.len);
    free(b.p);
    free(ihdr.p);
}

static void bmp_claiming(const char *name, int32_t w, int32_t h)
{
    buf b = { 0 };
    add_str(&b, "BM");
    add_le32(&b, 70);
    add_le32(&b, 0);
    add_le32(&b, 54);
    add_le32(&b, 40);
    add_le32(&b, (uint32_t)w);
    add_le32(&b, (uint32_t)h);
    add_le16(&b, 1);
    add_le16(&b, 24);
    for (int i = 0; i < 6; i++)
        add_le32(&b, 0);
    add(&b, "\1\2\3\0\4\5\6\0\7\10\11\0\12\13\14\0", 16);
    put_hostile(name, b.p, b.len);
    free(b.p);
}

/* A TIFF of one strip of 8-bit gray claiming these sizes and offsets
 * (next: the next IFD's offset; 8 points back at this one, a loop). */
static void tiff_claiming(const char *name, uint32_t w, uint32_t h, uint32_t offset,
                          uint32_t count, uint32_t next)
{
    static const uint16_t tags[9] = { 256, 257, 258, 259, 262, 273, 277, 278, 279 };
    const uint32_t values[9] = { w, h, 8, 1, 1, offset, 1, 1, count };
    buf b = { 0 };
    add(&b, "II*\0", 4);
    add_le32(&b, 8);
    add_le16(&b, 9);
    for (int i = 0; i < 9; i++) {
        add_le16(&b, tags[i]);
        add_le16(&b, tags[i] <= 257 || tags[i] == 273 || tags[i] >= 278 ? 4 : 3);
        add_le32(&b, 1);
        add_le32(&b, values[i]);   /* a SHORT sits in the low half */
    }
    add_le32(&b, next);
    while (b.len < 256)
        add_u8(&b, 0);
    put_hostile(name, b.p, b.len);
    free(b.p);
}

static void hostile_files(void)
{
    png_claiming("huge-png-60000x60000", 60000, 60000);
    png_claiming("huge-png-side-20000000x1", 20000000, 1);
    png_claiming("huge-png-2pow31", 0x80000000u, 1);
    png_claiming("zero-png-0x0", 0, 0);
    png_claiming("zero-png-5x0", 5, 0);
    /* SOF0 of 65535x65535, one component. */
    hostile_text("huge-jpeg-65535x65535", "\xff\xd8\xff\xc0\x00\x0b\x08\xff\xff\xff\xff\x01"
                                          "\x01\x11\x00\xff\xd9");
    hostile_text("zero-jpeg-height", "\xff\xd8\xff\xc0\x00\x0b\x08\x00\x00\x00\x10\x01"
                                     "\x01\x11\x00\xff\xd9");
    bmp_claiming("huge-bmp-100000x100000", 100000, 100000);
    bmp_claiming("zero-bmp-0x4", 0, 4);
    bmp_claiming("negative-bmp-width", -4, 4);
    /* TGA true-colour 65535x65535, 24-bit. */
    hostile_text("huge-tga-65535x65535", "\0\0\2\0\0\0\0\0\0\0\0\0\xff\xff\xff\xff\x18\x20"
                                         "\1\2\3");
    hostile_text("huge-hdr-60000x60000", "#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 60000 +X 60000\n"
                                         "\1\1\1\1");
    hostile_text("zero-hdr-0x5", "#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 0 +X 5\n\1\1\1\1");
    hostile_text("negative-hdr-height", "#?RADIANCE\n\n-Y -3 +X 5\n\1\1\1\1");
    hostile_text("huge-ppm-60000x60000", "P6\n60000 60000\n255\n\1\2\3");
    hostile_text("huge-pgm-side-20000000x1", "P5\n20000000 1\n255\n\1");
    hostile_text("huge-pam-60000x60000", "P7\nWIDTH 60000\nHEIGHT 60000\nDEPTH 4\nMAXVAL 65535\n"
                                         "ENDHDR\n\1\2");
    hostile_text("huge-pfm-60000x60000", "PF\n60000 60000\n-1.0\n\1\2\3\4");
    hostile_text("huge-ppm-digits", "P6\n99999999999999999999 2\n255\n");
    hostile_text("zero-pgm-0x0", "P5\n0 0\n255\n");
    hostile_text("zero-pam-width", "P7\nWIDTH 0\nHEIGHT 2\nDEPTH 1\nMAXVAL 255\nENDHDR\n\1\2");
    hostile_text("zero-pfm-0x1", "Pf\n0 1\n-1.0\n\0\0\0\0");
    hostile_text("negative-ppm-width", "P6\n-3 2\n255\n\1\2\3\4\5\6");
    tiff_claiming("huge-tiff-1000000x1000000", 1000000, 1000000, 200, 64, 0);
    tiff_claiming("zero-tiff-width", 0, 10, 200, 10, 0);
    tiff_claiming("zero-tiff-height", 10, 0, 200, 10, 0);
    tiff_claiming("bad-tiff-strip-past-end", 16, 16, 100000, 256, 0);
    tiff_claiming("bad-tiff-ifd-loop", 4, 2, 200, 8, 8);
}

/* ------------------------------------------------ WebP and GIF seeds */

static void add_le24(buf *b, uint32_t v) { add_le16(b, v & 0xffff); add_u8(b, (v >> 16) & 255); }

/* A RIFF chunk: FourCC, size, payload, a pad byte to even length. */
static void riff_chunk(buf *b, const char *fourcc, const void *data, size_t n)
{
    add(b, fourcc, 4);
    add_le32(b, (uint32_t)n);
    add(b, data, n);
    if (n & 1)
        add_u8(b, 0);
}

/* The VP8L chunk (header, payload, pad) of our lossless WebP of a seeded
 * w x h image of c channels: the encoder writes the simple format, "RIFF"
 * size "WEBP" and then that chunk, at offset 12. */
static void vp8l_chunk(buf *out, int w, int h, int c, uint64_t seed)
{
    gimg_image im;
    gimg_write_opts o;
    gimg_write_opts_init(&o);
    o.webp_lossless = 1;
    unsigned char *data;
    size_t len;
    if (gimg_image_alloc(&im, w, h, c, GIMG_U8) != GIMG_OK)
        exit(1);
    testimg_fill_random(&im, seed);
    if (gimg_encode(&im, GIMG_FMT_WEBP, &o, &data, &len) != GIMG_OK || len < 20 ||
        memcmp(data + 12, "VP8L", 4) != 0) {
        fprintf(stderr, "make_corpus: lossless WebP: %s\n", gimg_last_error());
        exit(1);
    }
    uint32_t n = data[16] | data[17] << 8 | data[18] << 16 | (uint32_t)data[19] << 24;
    add(out, data + 12, 8 + n + (n & 1));
    free(data);
    gimg_image_free(&im);
}

/* "RIFF" (size set by webp_seal) "WEBP", and a VP8X header of a w x h
 * canvas with these flags (0x10 alpha, 0x02 animation). */
static void webp_head(buf *b, uint32_t w, uint32_t h, unsigned flags)
{
    buf x = { 0 };
    add(b, "RIFF\0\0\0\0WEBP", 12);
    add_u8(&x, flags);
    add_u8(&x, 0);
    add_le16(&x, 0);
    add_le24(&x, w - 1);
    add_le24(&x, h - 1);
    riff_chunk(b, "VP8X", x.p, x.len);
    free(x.p);
}

static void webp_seal(buf *b)
{
    uint32_t n = (uint32_t)b->len - 8;
    for (int i = 0; i < 4; i++)
        b->p[4 + i] = (unsigned char)(n >> (8 * i));
}

/* An animation on a 24x20 canvas: a whole opaque frame; a 10x8 RGBA frame
 * at (4,6), not blended, disposed to the background; a 6x6 RGBA frame at
 * (12,2), blended. ANMF flags: 2 = do not blend, 1 = dispose. */
static void webp_animation(void)
{
    static const struct {
        int x, y, w, h, c, flags;
    } f[] = { { 0, 0, 24, 20, 3, 0 }, { 4, 6, 10, 8, 4, 2 | 1 }, { 12, 2, 6, 6, 4, 0 } };
    buf b = { 0 };
    webp_head(&b, 24, 20, 0x10 | 0x02);
    riff_chunk(&b, "ANIM", "\xff\xff\xff\xff\0\0", 6);
    for (int k = 0; k < 3; k++) {
        buf a = { 0 };
        add_le24(&a, (uint32_t)f[k].x / 2);
        add_le24(&a, (uint32_t)f[k].y / 2);
        add_le24(&a, (uint32_t)f[k].w - 1);
        add_le24(&a, (uint32_t)f[k].h - 1);
        add_le24(&a, 100);
        add_u8(&a, (unsigned)f[k].flags);
        vp8l_chunk(&a, f[k].w, f[k].h, f[k].c, 50 + (uint64_t)k);
        riff_chunk(&b, "ANMF", a.p, a.len);
        free(a.p);
    }
    webp_seal(&b);
    put_image("webp-animation-3", b.p, b.len);
    free(b.p);
}

static void webp_files(void)
{
    gimg_write_opts o;
    gimg_write_opts_init(&o);
    o.webp_lossless = 1;
    encoded_with("webp-lossless-rgb", GIMG_FMT_WEBP, 13, 5, 3, GIMG_U8, &o);
    encoded("webp-lossy-from-gray", GIMG_FMT_WEBP, 8, 8, 1, GIMG_U8, 90, 6);
    encoded("webp-lossy-1x1", GIMG_FMT_WEBP, 1, 1, 3, GIMG_U8, 90, 6);
    webp_animation();
    /* VP8X canvases with nothing after them. */
    buf b = { 0 };
    webp_head(&b, 20000, 20000, 0);
    webp_seal(&b);
    put_hostile("huge-webp-vp8x-20000x20000", b.p, b.len);
    b.len = 0;
    webp_head(&b, 16383, 16383, 0);
    webp_seal(&b);
    put_hostile("bad-webp-vp8x-16383x16383-no-data", b.p, b.len);
    free(b.p);
}

/* A GIF frame's image data: LZW minimum code size m, then LZW data that
 * codes each index as a literal (codes of m + 1 bits, with a clear code
 * before the table would need wider ones), in sub-blocks. */
static void gif_literal_data(buf *b, const unsigned char *px, size_t n, int m)
{
    buf d = { 0 };
    unsigned clear = 1u << m, width = (unsigned)m + 1, nbits = 0;
    size_t run = ((size_t)1 << m) - 2;
    uint32_t acc = 0;
    for (size_t i = 0; i < n + 2; i++) {
        int clear_first = i > 1 && i <= n && (i - 1) % run == 0;
        for (int k = clear_first; k >= 0; k--) {
            unsigned code = k || i == 0 ? clear : i == n + 1 ? clear + 1 : px[i - 1];
            acc |= (uint32_t)code << nbits;
            for (nbits += width; nbits >= 8; nbits -= 8, acc >>= 8)
                add_u8(&d, acc & 255);
        }
    }
    if (nbits)
        add_u8(&d, acc & 255);
    add_u8(b, (unsigned)m);
    for (size_t i = 0; i < d.len; i += 255) {
        size_t k = d.len - i < 255 ? d.len - i : 255;
        add_u8(b, (unsigned)k);
        add(b, d.p + i, k);
    }
    add_u8(b, 0);
    free(d.p);
}

typedef struct {
    int x, y, w, h;
    int transparent;   /* index, or -1 */
    int disposal;
    int interlaced;
} gif_frame_spec;

/* A GIF89a of a w x h screen with a global map of 2^map_bits entries (none
 * for 0), background index 1, and frames whose indices run 0 .. 2^m - 1
 * (m the LZW code size, at least 2: past a 2-entry map when map_bits is 1). */
static void gif_file(const char *name, int w, int h, int map_bits, const gif_frame_spec *f, int n)
{
    buf b = { 0 };
    add_str(&b, "GIF89a");
    add_le16(&b, (unsigned)w);
    add_le16(&b, (unsigned)h);
    add_u8(&b, map_bits ? 0xF0u | (unsigned)(map_bits - 1) : 0);
    add_u8(&b, 1);
    add_u8(&b, 0);
    for (int i = 0; i < (map_bits ? 3 << map_bits : 0); i++)
        add_u8(&b, (unsigned)(i * 47 + 11) & 255);
    int m = map_bits < 2 ? 2 : map_bits;
    for (int k = 0; k < n; k++) {
        if (f[k].transparent >= 0 || f[k].disposal) {
            add(&b, "\x21\xf9\x04", 3);
            add_u8(&b, (unsigned)(f[k].disposal << 2 | (f[k].transparent >= 0)));
            add_le16(&b, 10);
            add_u8(&b, f[k].transparent >= 0 ? (unsigned)f[k].transparent : 0);
            add_u8(&b, 0);
        }
        add_u8(&b, 0x2C);
        add_le16(&b, (unsigned)f[k].x);
        add_le16(&b, (unsigned)f[k].y);
        add_le16(&b, (unsigned)f[k].w);
        add_le16(&b, (unsigned)f[k].h);
        add_u8(&b, f[k].interlaced ? 0x40 : 0);
        size_t npx = (size_t)f[k].w * (size_t)f[k].h;
        unsigned char *px = malloc(npx + 1);
        if (!px)
            exit(1);
        for (size_t i = 0; i < npx; i++)
            px[i] = (unsigned char)((i * 7 + (size_t)k * 3 + i / (size_t)f[k].w) % (1u << m));
        gif_literal_data(&b, px, npx, m);
        free(px);
    }
    add_u8(&b, 0x3B);
    if (w == 65535)
        put_hostile(name, b.p, b.len);
    else
        put_image(name, b.p, b.len);
    free(b.p);
}

static int gif_to_buf(GifFileType *gif, const GifByteType *data, int n)
{
    add(gif->UserData, data, (size_t)n);
    return n;
}

/* A 64x48 GIF compressed by giflib's own encoder (LZW codes of every width,
 * the table filled and cleared), 256 colours. */
static void gif_giflib_file(void)
{
    buf b = { 0 };
    int error = 0;
    GifFileType *gif = EGifOpen(&b, gif_to_buf, &error);
    GifColorType colours[256];
    for (int i = 0; i < 256; i++)
        colours[i] = (GifColorType){ (GifByteType)i, (GifByteType)(255 - i), (GifByteType)(i * 3) };
    ColorMapObject *map = GifMakeMapObject(256, colours);
    GifPixelType line[64];
    int ok = gif && map && EGifPutScreenDesc(gif, 64, 48, 8, 0, map) == GIF_OK &&
             EGifPutImageDesc(gif, 0, 0, 64, 48, false, NULL) == GIF_OK;
    for (int y = 0; ok && y < 48; y++) {
        for (int x = 0; x < 64; x++)
            line[x] = (GifPixelType)((x / 4 + y / 3 + (x * y) % 7) & 255);
        ok = EGifPutLine(gif, line, 64) == GIF_OK;
    }
    GifFreeMapObject(map);
    if (gif)
        EGifCloseFile(gif, &error);
    if (!ok) {
        fputs("make_corpus: giflib could not write a GIF\n", stderr);
        exit(1);
    }
    put_image("gif-giflib-256", b.p, b.len);
    free(b.p);
}

static void gif_files(void)
{
    static const gif_frame_spec still = { 0, 0, 23, 17, -1, 0, 0 };
    static const gif_frame_spec transparent = { 0, 0, 9, 7, 5, 0, 0 };
    static const gif_frame_spec interlaced = { 0, 0, 13, 11, -1, 0, 1 };
    static const gif_frame_spec one = { 0, 0, 1, 1, -1, 0, 0 };
    static const gif_frame_spec anim[] = {
        { 0, 0, 15, 12, 3, 1, 0 }, { 2, 3, 6, 5, 5, 2, 0 }, { 4, 1, 7, 8, -1, 3, 1 },
        { 10, 8, 8, 6, 2, 0, 0 },   /* runs past the screen: clipped */
    };
    gif_file("gif-palette-16", 23, 17, 4, &still, 1);
    gif_file("gif-transparent", 9, 7, 4, &transparent, 1);
    gif_file("gif-interlaced", 13, 11, 4, &interlaced, 1);
    gif_file("gif-1x1", 1, 1, 2, &one, 1);
    gif_file("gif-animation-4", 15, 12, 4, anim, 4);
    gif_file("gif-no-colour-map", 9, 7, 0, &transparent, 1);
    gif_file("gif-indices-past-map", 9, 7, 1, &still, 1);
    gif_file("gif-first-frame-past-screen", 4, 3, 4, &transparent, 1);
    gif_file("huge-gif-65535x65535", 65535, 65535, 2, &one, 1);
    gif_giflib_file();
}

/* ------------------------------------------------------- EXIF blocks */

static void add_16(buf *b, int big, unsigned v)
{
    add_u8(b, big ? v >> 8 & 255 : v & 255);
    add_u8(b, big ? v & 255 : v >> 8 & 255);
}
static void add_32(buf *b, int big, uint32_t v)
{
    add_16(b, big, big ? v >> 16 : v & 0xffff);
    add_16(b, big, big ? v & 0xffff : v >> 16);
}
/* One IFD entry of count 1: a SHORT's value sits in the field's first bytes. */
static void add_entry(buf *b, int big, unsigned tag, unsigned type, uint32_t value)
{
    add_16(b, big, tag);
    add_16(b, big, type);
    add_32(b, big, 1);
    if (type == 3) {
        add_16(b, big, value);
        add_16(b, big, 0);
    } else {
        add_32(b, big, value);
    }
}

/* IFD0 with an orientation and a pointer to an Exif IFD holding the pixel
 * dimensions, then IFD1; little- and big-endian; and the minimal block. */
static void exif_files(void)
{
    for (int big = 0; big <= 1; big++) {
        buf b = {0};
        add_str(&b, big ? "MM" : "II");
        add_16(&b, big, 42);
        add_32(&b, big, 8);                 /* IFD0 at 8 */
        add_16(&b, big, 2);
        add_entry(&b, big, 0x0112, 3, 6);   /* Orientation */
        add_entry(&b, big, 0x8769, 4, 38);  /* the Exif IFD at 38 */
        add_32(&b, big, 68);                /* IFD1 at 68 */
        add_16(&b, big, 2);                 /* 38: the Exif IFD */
        add_entry(&b, big, 0xa002, 3, 640); /* PixelXDimension */
        add_entry(&b, big, 0xa003, 4, 480); /* PixelYDimension */
        add_32(&b, big, 0);
        add_16(&b, big, 1);                 /* 68: IFD1 */
        add_entry(&b, big, 0x0103, 3, 6);
        add_32(&b, big, 0);
        put("exif", big ? "exif-big-endian" : "exif-little-endian", b.p, b.len);
        free(b.p);
    }
    size_t n = 0;
    unsigned char *p = gimg_exif_minimal(6, &n);
    if (p)
        put("exif", "exif-minimal", p, n);
    free(p);
}

/* -------------------------------------------- command lines, strings */

static void cli_files(void)
{
    /* Pieces are NUL-separated; the first byte picks the spec's shape. */
    static const struct {
        const char *name;
        const char *data;
        size_t len;
    } k[] = {
#define ARGS(name, s) { name, s, sizeof s - 1 }
        ARGS("plain", "\x00in.png\0out.png"),
        ARGS("options", "\x00--orient_op\0rot90\0-v\0--device=gpu:1\0in.pam\0-o\0out.png"),
        ARGS("short-bundle", "\x00-vqF\0-Arot180\0-Bcpu\0-\0-"),
        ARGS("numbers", "\x01--quality=90\0--png-level\0" "12\0--max-pixels\0" "1000\0--int=-5\0x"),
        ARGS("double-dash", "\x03--\0-odd\0--flag\0b\0c"),
        ARGS("batch", "\x22-j\0" "4\0--files-from\0list.txt\0-0\0--fail-fast\0--progress\0-o\0out/\0a\0b"),
        ARGS("help", "\x00--help\0--version"),
        ARGS("env-device", "\x40in.png\0gpu:0"),
        ARGS("format", "\x00-f\0png\0--format=pam\0--double\0" "1.5e3\0in"),
#undef ARGS
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        put("cli", k[i].name, k[i].data, k[i].len);
}

#define SEED_FILES(name, seeds, ...) parse_seeds(index++, #name, seeds);
static void parse_seeds(int index, const char *name, const char *seeds)
{
    char file[128], data[512];
    int n = 0;
    for (const char *p = seeds; *p; n++) {
        size_t len = strcspn(p, "\n");
        data[0] = (char)index;
        memcpy(data + 1, p, len < sizeof data - 1 ? len : sizeof data - 1);
        snprintf(file, sizeof file, "%s-%d", name, n);
        put("parse", file, data, 1 + len);
        p += len + (p[len] == '\n');
    }
}

/* DIR/wire: gimgd's requests (fuzz_wire): a header, then the memory
 * file's bytes (options, then pixels at the next page), one per operation. */
static void wire_request(const char *name, uint32_t op, const void *opts, size_t opts_len, int w,
                         int h, int c, gimg_sample s)
{
    gimg_wire_request q = {.magic = GIMG_WIRE_MAGIC, .version = GIMG_WIRE_VERSION, .op = op,
                           .options_bytes = (uint32_t)opts_len};
    q.image.width = (uint32_t)w;
    q.image.height = (uint32_t)h;
    q.image.channels = (uint32_t)c;
    q.image.sample = (uint32_t)s;
    int overflow = 0;
    q.pixels_offset = gimg_wire_align(opts_len, &overflow);
    size_t pixels = (size_t)w * h * c * s;
    buf b = {0};
    add(&b, &q, sizeof q);
    add(&b, opts, opts_len);
    for (size_t i = opts_len; i < q.pixels_offset + pixels; i++)
        add_u8(&b, (unsigned)(i * 37 + i / 7));
    put("wire", name, b.p, b.len);
    free(b.p);
}

static void wire_jpeg_request(const char *name, const void *opts, size_t opts_len,
                              const unsigned char *jpeg, size_t jpeg_len, int w, int h)
{
    gimg_wire_request q = {.magic = GIMG_WIRE_MAGIC, .version = GIMG_WIRE_VERSION,
                           .op = GIMG_WIRE_ORIENT, .options_bytes = (uint32_t)opts_len,
                           .input = GIMG_WIRE_JPEG, .input_bytes = jpeg_len, .jpeg_out = 1,
                           .jpeg_quality = 90};
    q.image.width = (uint32_t)w;
    q.image.height = (uint32_t)h;
    q.image.channels = 3;
    q.image.sample = GIMG_U8;
    int overflow = 0;
    q.pixels_offset = gimg_wire_align(opts_len, &overflow);
    buf b = {0};
    add(&b, &q, sizeof q);
    add(&b, opts, opts_len);
    for (size_t i = opts_len; i < q.pixels_offset; i++)
        add_u8(&b, 0);
    add(&b, jpeg, jpeg_len);
    put("wire", name, b.p, b.len);
    free(b.p);
}

static void wire_files(void)
{
    gimg_kernel k[2];
    gimg_kernel_parse("gaussian:1", 0, 1, &k[0]);
    gimg_kernel_parse("1 2 3; 4 5 6", 0, 1, &k[1]);
    gimg_conv_opts o;
    gimg_conv_opts_init(&o);
    o.kernels = k;
    o.n_kernels = 2;
    size_t n = gimg_wire_conv_bytes(&o);
    unsigned char *blob = malloc(n);
    gimg_wire_put_conv(&o, blob);
    wire_request("conv-rgb8", GIMG_WIRE_CONV, blob, n, 9, 7, 3, GIMG_U8);
    wire_request("conv-ga16", GIMG_WIRE_CONV, blob, n, 5, 6, 2, GIMG_U16);
    free(blob);
    gimg_kernel_free(&k[0]);
    gimg_kernel_free(&k[1]);
    /* A JPEG input: the file in place of the pixels. */
    gimg_image im;
    unsigned char *jpeg = NULL;
    size_t jpeg_len = 0;
    if (gimg_image_alloc(&im, 12, 9, 3, GIMG_U8) == GIMG_OK) {
        testimg_fill_random(&im, 5);
        gimg_write_opts w;
        gimg_write_opts_init(&w);
        gimg_encode(&im, GIMG_FMT_JPEG, &w, &jpeg, &jpeg_len);
        gimg_image_free(&im);
    }
    if (jpeg) {
        uint32_t flop = GIMG_ORIENT_FLOP;
        wire_jpeg_request("orient-jpeg", &flop, sizeof flop, jpeg, jpeg_len, 12, 9);
        free(jpeg);
    }
    uint32_t op = GIMG_ORIENT_ROT90;
    wire_request("orient-rgba-float", GIMG_WIRE_ORIENT, &op, sizeof op, 4, 3, 4, GIMG_F32);
    gimg_stats_opts so = {.order = 1, .n_percentiles = 1};
    so.percentiles[0].millionths = 250000;
    strcpy(so.percentiles[0].name, "25");
    wire_request("stats-gray8", GIMG_WIRE_STATS, &so, sizeof so, 8, 8, 1, GIMG_U8);
    gimg_hist_params hp = {.bins = 16, .lo = 0, .hi = 256, .luma = 1};
    wire_request("hist-rgb8", GIMG_WIRE_HIST, &hp, sizeof hp, 6, 5, 3, GIMG_U8);
}

/* DIR/cost: cost tables (fuzz_cost): every key, some, comments and a key
 * of a later version, a refused value; and caches as gimg_cost_cache_write
 * writes them, with this machine's first line. */
static void cost_files(void)
{
    static const char full[] =
        "# every key\n"
        "conv_cpu_fmas_per_ms_per_thread 1e7\nstats_cpu_bytes_per_ms_per_thread 4e5\n"
        "hist_cpu_bytes_per_ms_per_thread 6e5\norient_cpu_bytes_per_ms_per_thread 6e5\n"
        "conv_gpu_fmas_per_ms 1e10\nstats_gpu_bytes_per_ms 2.5e8\nhist_gpu_bytes_per_ms 2e8\n"
        "orient_gpu_bytes_per_ms 1e9\ngpu_transfer_ms_per_byte 3e-8\ncuda_start_ms 350\n"
        "nvjpeg_start_ms 650\njpeg_cpu_ms_per_mp 29\njpeg_gpu_ms_per_mp 0.45\n"
        "server_round_trip_ms 3\nserver_ms_per_byte 5e-7\n";
    static const char partial[] = "cuda_start_ms 120 # measured\n\n  a_later_key 7\n"
                                  "conv_gpu_fmas_per_ms\t2e10\n";
    static const char refused[] = "cuda_start_ms -1\nconv_gpu_fmas_per_ms 0\n";
    put("cost", "full", full, sizeof full - 1);
    put("cost", "partial", partial, sizeof partial - 1);
    put("cost", "refused", refused, sizeof refused - 1);
    char id[512], path[4096];
    gimg_cost_identity(id, sizeof id);
    gimg_cost_table t;
    gimg_cost_defaults(&t);
    static const struct { const char *name; int has; const char *gpu; } caches[] = {
        {"cache-cpu", GIMG_COST_HAS_CPU, NULL},
        {"cache-both", GIMG_COST_HAS_CPU | GIMG_COST_HAS_GPU, "NVIDIA H100 80GB HBM3"},
    };
    for (size_t i = 0; i < sizeof caches / sizeof caches[0]; i++) {
        snprintf(path, sizeof path, "%s/cost/%s", g_dir, caches[i].name);
        if (gimg_cost_cache_write(path, id, &t, caches[i].has, caches[i].gpu) != GIMG_OK) {
            fprintf(stderr, "%s: %s\n", path, gimg_last_error());
            g_failed = 1;
        }
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fputs("usage: make_corpus DIR\n", stderr);
        return 2;
    }
    g_dir = argv[1];
    if (mkdir(g_dir, 0777) != 0 && errno != EEXIST) {
        perror(g_dir);
        return 1;
    }
    encoded_files();
    png_files();
    bmp_file("bmp-pal1", 13, 3, 1, 0);
    bmp_file("bmp-pal4", 5, 4, 4, 0);
    bmp_file("bmp-pal8-topdown", 6, 3, 8, 1);
    bmp_file("bmp-rgb24-topdown", 3, 5, 24, 1);
    bmp_file("bmp-rgb32", 4, 2, 32, 0);
    tga_file("tga-colormap", 5, 3, 1, 8);
    tga_file("tga-raw-rgb", 4, 3, 2, 24);
    tga_file("tga-raw-rgba", 3, 2, 2, 32);
    tga_file("tga-raw-gray", 6, 2, 3, 8);
    netpbm_files();
    hostile_files();
    webp_files();
    gif_files();
    cli_files();
    exif_files();
    wire_files();
    cost_files();
    int index = 0;
    FUZZ_PARSERS(SEED_FILES)
    return g_failed;
}
