/*
 * unit_precheck — files stb_image 2.27 mishandles, refused by precheck.c:
 * HDR that hangs its loader (a zero-length run, which is what it reads past
 * the end of truncated run-length data), BMP/TGA whose missing pixels it
 * would invent as zeros, BMP palette indices past the palette (stb reads
 * its uninitialised palette array) and TGA colour-map indices past the map
 * or a map's first entry index (which stb misreads).
 * An alarm turns a hang into a failure instead of a stuck test run.
 */
#include "gimg.h"
#include "precheck_internal.h"
#include "testimg.h"
#include "check.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL: hdr: the decoder hung (alarm)\n";
    (void)!write(STDOUT_FILENO, msg, sizeof msg - 1);
    _exit(1);
}

static unsigned char *encode(gimg_format f, int w, int h, int channels, gimg_sample s,
                             size_t *len)
{
    gimg_image im;
    unsigned char *buf = NULL;
    if (gimg_image_alloc(&im, w, h, channels, s))
        return NULL;
    testimg_fill_random(&im, (uint64_t)w * h);
    if (gimg_encode(&im, f, NULL, &buf, len))
        buf = NULL;
    gimg_image_free(&im);
    return buf;
}

static unsigned char *encode_hdr(int w, int h, size_t *len)
{
    return encode(GIMG_FMT_HDR, w, h, 3, GIMG_F32, len);
}

/* Every prefix of a file is refused as truncated or corrupt, never hangs. */
static void check_prefixes(int w, int h)
{
    size_t len;
    unsigned char *buf = encode_hdr(w, h, &len);
    CHECK(buf != NULL, "encode %dx%d: %s", w, h, gimg_last_error());
    if (!buf)
        return;
    gimg_image im;
    CHECK(gimg_decode_memory(buf, len, &im) == GIMG_OK, "whole file: %s", gimg_last_error());
    CHECK(im.width == w && im.height == h, "size %dx%d", im.width, im.height);
    gimg_image_free(&im);
    CHECK(gimg_hdr_validate(buf, len) == GIMG_OK, "whole file: %s", gimg_last_error());
    for (size_t n = 1; n < len; n++) {
        gimg_status st = gimg_decode_memory(buf, n, &im);
        CHECK(st == GIMG_E_FORMAT, "%dx%d cut at %zu of %zu bytes: status %d", w, h, n, len, st);
        gimg_image_free(&im);
    }
    free(buf);
}

static void test_truncated_rle(void) { check_prefixes(37, 5); }
static void test_truncated_flat(void) { check_prefixes(5, 7); }

static void test_zero_run(void)
{
    size_t len;
    unsigned char *buf = encode_hdr(16, 2, &len);
    CHECK(buf != NULL, "encode: %s", gimg_last_error());
    if (!buf)
        return;
    /* The first scanline's marker is 2 2 0 16; the count after it is the
     * first run of the red plane. A zero there is what stb cannot leave. */
    unsigned char *marker = NULL;
    for (size_t i = 0; i + 4 < len; i++)
        if (buf[i] == 2 && buf[i + 1] == 2 && buf[i + 2] == 0 && buf[i + 3] == 16) {
            marker = buf + i;
            break;
        }
    CHECK(marker != NULL, "no run-length-encoded scanline found");
    if (marker) {
        marker[4] = 0;
        gimg_image im;
        CHECK(gimg_decode_memory(buf, len, &im) == GIMG_E_FORMAT, "zero run accepted");
        CHECK(strstr(gimg_last_error(), "HDR") != NULL, "message: %s", gimg_last_error());
        gimg_image_free(&im);
    }
    free(buf);
}

/* Every prefix longer than the header is refused: no pixel is invented. */
static void check_truncations(gimg_format f, int channels, size_t header)
{
    size_t len;
    unsigned char *buf = encode(f, 17, 9, channels, GIMG_U8, &len);
    CHECK(buf != NULL, "encode %s: %s", gimg_format_name(f), gimg_last_error());
    if (!buf)
        return;
    gimg_image im;
    CHECK(gimg_decode_memory(buf, len, &im) == GIMG_OK, "whole file: %s", gimg_last_error());
    gimg_image_free(&im);
    for (size_t n = header; n < len; n++) {
        gimg_status st = gimg_decode_memory(buf, n, &im);
        CHECK(st == GIMG_E_FORMAT, "%s %d channels cut at %zu of %zu bytes: status %d",
              gimg_format_name(f), channels, n, len, st);
        gimg_image_free(&im);
    }
    free(buf);
}

static void test_truncated_bmp(void)
{
    check_truncations(GIMG_FMT_BMP, 3, 18);
    check_truncations(GIMG_FMT_BMP, 4, 18);
}

/* Found by tests/cli_hardening.sh: a palette BMP cut inside its header or
 * palette decoded, stb reading the missing bytes as zeros. */
static void test_truncated_bmp_palette(void)
{
    /* 4x2, 8-bit, a palette of 4 colours (header says so), rows of 4 bytes. */
    unsigned char bmp[14 + 40 + 16 + 8] = { 'B', 'M' };
    bmp[10] = 14 + 40 + 16;                 /* pixel data offset */
    bmp[14] = 40;                           /* header size */
    bmp[18] = 4, bmp[22] = 2, bmp[26] = 1, bmp[28] = 8;
    bmp[46] = 4;                            /* colours used */
    for (int i = 0; i < 16; i++)
        bmp[54 + i] = (unsigned char)(i * 16);
    for (int i = 0; i < 8; i++)
        bmp[70 + i] = (unsigned char)(i % 4);
    gimg_image im;
    CHECK(gimg_decode_memory(bmp, sizeof bmp, &im) == GIMG_OK, "whole file: %s", gimg_last_error());
    gimg_image_free(&im);
    for (size_t n = 2; n < sizeof bmp; n++) {
        gimg_status st = gimg_decode_memory(bmp, n, &im);
        CHECK(st == GIMG_E_FORMAT, "cut at %zu of %zu bytes: status %d", n, sizeof bmp, st);
        gimg_image_free(&im);
    }
}

static void test_truncated_tga(void)
{
    check_truncations(GIMG_FMT_TGA, 3, 18);
    check_truncations(GIMG_FMT_TGA, 4, 18);
}

/* Found by make_corpus's seeds: stb's BMP probe reports a top-down file's
 * height as negative, and such files were refused as "invalid size". */
static void test_bmp_top_down(void)
{
    gimg_image src, im;
    CHECK(gimg_image_alloc(&src, 5, 3, 3, GIMG_U8) == GIMG_OK, "alloc");
    testimg_fill_random(&src, 3);
    unsigned char *buf = NULL;
    size_t len;
    CHECK(gimg_encode(&src, GIMG_FMT_BMP, NULL, &buf, &len) == GIMG_OK, "%s", gimg_last_error());
    if (!buf) {
        gimg_image_free(&src);
        return;
    }
    /* Make it top-down: negate the height and store the rows in reverse. */
    const uint32_t offset = buf[10] | buf[11] << 8 | (uint32_t)buf[12] << 16;
    const size_t row = (5 * 3 + 3) / 4 * 4;
    int32_t h = -3;
    memcpy(buf + 22, &h, 4);
    unsigned char tmp[16];
    memcpy(tmp, buf + offset, row);
    memcpy(buf + offset, buf + offset + 2 * row, row);
    memcpy(buf + offset + 2 * row, tmp, row);
    gimg_info info;
    CHECK(gimg_probe_memory(buf, len, &info) == GIMG_OK && info.height == 3, "probe: %s, height %d",
          gimg_last_error(), info.height);
    CHECK(gimg_decode_memory(buf, len, &im) == GIMG_OK, "decode: %s", gimg_last_error());
    if (im.data) {
        CHECK(im.width == 5 && im.height == 3 && im.channels == 3, "decoded %dx%d c%d", im.width,
              im.height, im.channels);
        for (int y = 0; y < 3 && im.height == 3; y++)
            CHECK(memcmp(gimg_row(&im, y), gimg_row(&src, y), 15) == 0, "row %d differs", y);
        gimg_image_free(&im);
    }
    gimg_image_free(&src);
    free(buf);
}

/* ------------------------------------------------ palette indices */

static void put16(unsigned char *p, unsigned v)
{
    p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8);
}
static void put32le(unsigned char *p, uint32_t v)
{
    put16(p, v & 0xffff), put16(p + 2, v >> 16);
}

/* The colour of palette entry i in the files below. */
static void entry_colour(unsigned i, unsigned char rgb[3])
{
    rgb[0] = (unsigned char)(40 + 13 * i), rgb[1] = (unsigned char)(200 - 7 * i),
    rgb[2] = (unsigned char)(i * i);
}

/* A w x 1 BMP of `bits` bits a pixel (1, 4, 8) whose palette holds
 * `stored` entries, header biClrUsed `used`, and whose pixels have the
 * indices idx[0..w); the row's padding bits are all ones. OS/2 (12-byte
 * header, 3-byte entries) when os2. The caller frees it. */
static unsigned char *make_bmp(unsigned bits, int w, unsigned stored, uint32_t used, int os2,
                               const unsigned *idx, size_t *len)
{
    const size_t header = os2 ? 12 : 40, entry = os2 ? 3 : 4;
    const size_t row = ((size_t)bits * (size_t)w + 31) / 32 * 4;
    const size_t offset = 14 + header + stored * entry;
    *len = offset + row;
    unsigned char *b = calloc(1, *len);
    if (!b)
        return NULL;
    b[0] = 'B', b[1] = 'M';
    put32le(b + 2, (uint32_t)*len);
    put32le(b + 10, (uint32_t)offset);
    put32le(b + 14, (uint32_t)header);
    if (os2) {
        put16(b + 18, (unsigned)w), put16(b + 20, 1), put16(b + 22, 1), put16(b + 24, bits);
    } else {
        put32le(b + 18, (uint32_t)w), put32le(b + 22, 1), put16(b + 26, 1), put16(b + 28, bits);
        put32le(b + 46, used);
    }
    for (unsigned i = 0; i < stored; i++) {
        unsigned char rgb[3];
        entry_colour(i, rgb);
        unsigned char *e = b + 14 + header + i * entry;
        e[0] = rgb[2], e[1] = rgb[1], e[2] = rgb[0];   /* BGR */
    }
    unsigned char *px = b + offset;
    memset(px, 0xff, row);
    for (int x = 0; x < w; x++) {
        const size_t bit = (size_t)x * bits;
        const unsigned shift = 8 - bits - bit % 8, mask = ((1u << bits) - 1) << shift;
        px[bit / 8] = (unsigned char)((px[bit / 8] & ~mask) | (idx[x] << shift));
    }
    return b;
}

/* Decodes buf: when want_ok, it must decode to the colours of the indices
 * idx (entry_colour); otherwise be refused as GIMG_E_FORMAT with a
 * message containing `reason`. */
static void expect_palette(const char *what, const unsigned char *buf, size_t len, int want_ok,
                           const unsigned *idx, int w, const char *reason)
{
    gimg_image im;
    gimg_status st = gimg_decode_memory(buf, len, &im);
    if (!want_ok) {
        CHECK(st == GIMG_E_FORMAT, "%s: status %d (%s)", what, st,
              st ? gimg_last_error() : "decoded");
        CHECK(st == GIMG_OK || strstr(gimg_last_error(), reason), "%s: message '%s'", what,
              gimg_last_error());
        CHECK(im.data == NULL, "%s: an image left on failure", what);
        gimg_image_free(&im);
        return;
    }
    CHECK(st == GIMG_OK, "%s: %s", what, gimg_last_error());
    if (st)
        return;
    CHECK(im.width == w && im.height == 1 && im.channels == 3, "%s: decoded %dx%d c%d", what,
          im.width, im.height, im.channels);
    for (int x = 0; x < w && im.channels == 3 && im.width == w; x++) {
        unsigned char rgb[3];
        entry_colour(idx[x], rgb);
        CHECK(memcmp(im.data + 3 * x, rgb, 3) == 0,
              "%s: pixel %d is %d %d %d, entry %u is %d %d %d", what, x, im.data[3 * x],
              im.data[3 * x + 1], im.data[3 * x + 2], idx[x], rgb[0], rgb[1], rgb[2]);
    }
    gimg_image_free(&im);
}

/* stb 2.27 looks BMP palette indices up in a 256-entry array of which it
 * fills only the entries the file stores: an index past them read
 * uninitialised memory into the image. Every such index is refused, at
 * 1, 4 and 8 bits, wherever it is in the row; the last valid index, and
 * set padding bits past the row's last pixel, are not. */
static void test_bmp_palette_indices(void)
{
    static const unsigned bits[3] = { 1, 4, 8 };
    for (int k = 0; k < 3; k++) {
        const unsigned b = bits[k], stored = b == 1 ? 1 : b == 4 ? 3 : 5;
        enum { W = 13 };
        unsigned idx[W];
        for (int x = 0; x < W; x++)
            idx[x] = (unsigned)x % stored;
        char what[80];
        size_t len;
        /* Every index valid; padding bits set. */
        unsigned char *buf = make_bmp(b, W, stored, stored, 0, idx, &len);
        snprintf(what, sizeof what, "%u-bit BMP, valid indices", b);
        if (buf)
            expect_palette(what, buf, len, 1, idx, W, NULL);
        free(buf);
        /* biClrUsed 0 means all 2^bits colours, of which the 1-bit file
         * stores one, the row ending where the second would (a file too
         * short for all of them is refused as truncated). */
        if (b == 1) {
            buf = make_bmp(b, W, stored, 0, 0, idx, &len);
            if (buf)
                expect_palette("1-bit BMP, biClrUsed 0", buf, len, 1, idx, W, NULL);
            free(buf);
        }
        /* One index past the stored entries: first, middle and last pixel. */
        const int spots[3] = { 0, W / 2, W - 1 };
        for (int s = 0; s < 3; s++) {
            unsigned bad[W];
            memcpy(bad, idx, sizeof bad);
            bad[spots[s]] = stored;
            buf = make_bmp(b, W, stored, stored, 0, bad, &len);
            snprintf(what, sizeof what, "%u-bit BMP, index %u at pixel %d", b, stored, spots[s]);
            if (buf)
                expect_palette(what, buf, len, 0, bad, W, "past the palette");
            free(buf);
        }
    }
    /* The entries the header declares bound the indices, even where the
     * file stores more. */
    unsigned idx[4] = { 0, 1, 3, 2 };
    size_t len;
    unsigned char *buf = make_bmp(8, 4, 4, 2, 0, idx, &len);
    if (buf)
        expect_palette("8-bit BMP, biClrUsed 2 of 4 stored", buf, len, 0, idx, 4,
                       "past the palette's 2 colours");
    free(buf);
    /* No palette at all before the pixel data. */
    buf = make_bmp(8, 4, 0, 1, 0, idx, &len);
    if (buf)
        expect_palette("8-bit BMP without palette", buf, len, 0, idx, 4, "no palette");
    free(buf);
    /* OS/2 headers: stb loads four entries fewer than the file stores (it
     * sizes the palette 12 bytes short), so those four are refused too. */
    unsigned os2_ok[4] = { 0, 11, 1, 2 }, os2_bad[4] = { 0, 12, 1, 2 };
    buf = make_bmp(4, 4, 16, 0, 1, os2_ok, &len);
    if (buf)
        expect_palette("OS/2 4-bit BMP, indices 0-11 of 16", buf, len, 1, os2_ok, 4, NULL);
    free(buf);
    buf = make_bmp(4, 4, 16, 0, 1, os2_bad, &len);
    if (buf)
        expect_palette("OS/2 4-bit BMP, index 12 of 16", buf, len, 0, os2_bad, 4,
                       "past the palette's 12 colours");
    free(buf);
}

/* A w x 1 colour-mapped TGA (24-bit map of `entries` entries, first entry
 * index `first`, stored after `first` bytes of filler as stb reads it),
 * 8- or 16-bit indices idx[0..w), raw or run-length encoded (one packet
 * per pixel, alternately raw and repeated). The caller frees it. */
static unsigned char *make_tga(unsigned entries, unsigned first, unsigned index_bits, int rle,
                               int w, const unsigned *idx, size_t *len)
{
    const size_t ib = index_bits / 8;
    *len = 18 + first + 3 * (size_t)entries + (size_t)w * (ib + (rle ? 1 : 0));
    unsigned char *b = calloc(1, *len);
    if (!b)
        return NULL;
    b[1] = 1;                               /* colour-mapped */
    b[2] = rle ? 9 : 1;
    put16(b + 3, first), put16(b + 5, entries);
    b[7] = 24;
    put16(b + 12, (unsigned)w), put16(b + 14, 1);
    b[16] = (unsigned char)index_bits;
    b[17] = 0x20;                           /* top-left origin */
    unsigned char *p = b + 18 + first;
    for (unsigned i = 0; i < entries; i++, p += 3) {
        unsigned char rgb[3];
        entry_colour(i, rgb);
        p[0] = rgb[2], p[1] = rgb[1], p[2] = rgb[0];   /* BGR */
    }
    for (int x = 0; x < w; x++) {
        if (rle)
            *p++ = x % 2 ? 0x80 : 0x00;     /* one pixel, repeated or raw */
        if (ib == 1)
            *p++ = (unsigned char)idx[x];
        else
            put16(p, idx[x]), p += 2;
    }
    return b;
}

/* stb takes colour-map entry 0 for an index past the map, and reads a
 * map's first entry index as bytes to skip: both are refused. */
static void test_tga_colour_map(void)
{
    enum { W = 7 };
    unsigned idx[W] = { 0, 1, 2, 3, 4, 2, 0 };
    char what[96];
    size_t len;
    for (int rle = 0; rle < 2; rle++)
        for (unsigned ib = 8; ib <= 16; ib += 8) {
            unsigned char *buf = make_tga(5, 0, ib, rle, W, idx, &len);
            snprintf(what, sizeof what, "TGA %u-bit indices%s", ib, rle ? ", RLE" : "");
            if (buf)
                expect_palette(what, buf, len, 1, idx, W, NULL);
            free(buf);
            for (int at = 0; at < W; at += 3) {
                unsigned bad[W];
                memcpy(bad, idx, sizeof bad);
                bad[at] = ib == 8 ? 5 : 300;
                buf = make_tga(5, 0, ib, rle, W, bad, &len);
                snprintf(what, sizeof what, "TGA %u-bit indices%s, index %u at pixel %d", ib,
                         rle ? ", RLE" : "", bad[at], at);
                if (buf)
                    expect_palette(what, buf, len, 0, bad, W, "past the colour map's 5 entries");
                free(buf);
            }
        }
    /* A first entry index of 5 in a file without the 5 bytes stb skips
     * for it: stb reads the map late and the last 5 indices past the end
     * of the file (zeros, before); one of 2 with those bytes, which fits,
     * would shift the colours. */
    unsigned char *buf = make_tga(5, 0, 8, 0, W, idx, &len);
    if (buf) {
        put16(buf + 3, 5);
        expect_palette("TGA, first entry index 5", buf, len, 0, idx, W,
                       "truncated TGA data (the colour map's first entry index, 5,");
        free(buf);
    }
    buf = make_tga(5, 2, 8, 0, W, idx, &len);
    if (buf)
        expect_palette("TGA, first entry index 2", buf, len, 0, idx, W, "unsupported TGA");
    free(buf);
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(60);
    RUN(test_truncated_rle);
    RUN(test_truncated_flat);
    RUN(test_zero_run);
    RUN(test_truncated_bmp);
    RUN(test_truncated_bmp_palette);
    RUN(test_truncated_tga);
    RUN(test_bmp_top_down);
    RUN(test_bmp_palette_indices);
    RUN(test_tga_colour_map);
    return check_summary();
}
