/*
 * unit_precheck — files stb_image 2.27 mishandles, refused by precheck.c:
 * HDR that hangs its loader (a zero-length run, which is what it reads past
 * the end of truncated run-length data), a JPEG Huffman table it would
 * overflow or one it would use undefined, and BMP/TGA whose missing pixels it would invent as zeros.
 * An alarm turns a hang into a failure instead of a stuck test run.
 */
#include "gimg.h"
#include "precheck_internal.h"
#include "testimg.h"
#include "check.h"

#include <libdeflate.h>
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

/* A 17x9 RGB JPEG of ours (the caller frees it) and the offset of its
 * first `marker` segment in *at (0: none, reported). */
static unsigned char *jpeg_with(unsigned marker, size_t *len, size_t *at)
{
    *at = 0;
    unsigned char *buf = encode(GIMG_FMT_JPEG, 17, 9, 3, GIMG_U8, len);
    CHECK(buf != NULL, "encode: %s", gimg_last_error());
    for (size_t i = 2; buf && i + 7 < *len && !*at; i++)
        if (buf[i] == 0xFF && buf[i + 1] == marker)
            *at = i;
    CHECK(!buf || *at != 0, "no %02X segment", marker);
    return buf;
}

/* A DHT segment whose 16 counts add up past 256 codes. */
static void test_jpeg_huffman_overflow(void)
{
    size_t len, dht;
    unsigned char *buf = jpeg_with(0xC4, &len, &dht);
    if (dht) {
        buf[dht + 5] = 0xFF;   /* the first table's count of 1-bit codes */
        gimg_image im;
        gimg_info info;
        CHECK(gimg_probe_memory(buf, len, &info) == GIMG_E_FORMAT, "probe accepted it");
        CHECK(gimg_decode_memory(buf, len, &im) == GIMG_E_FORMAT, "decode accepted it");
        CHECK(strstr(gimg_last_error(), "Huffman") != NULL, "message: %s", gimg_last_error());
        gimg_image_free(&im);
    }
    free(buf);
}

/* Found by fuzz_decode: a scan that names a Huffman table no DHT defined,
 * which stb decodes with uninitialized memory (an assertion that fired in
 * some runs and not in others). Our JPEG's scan, its first component
 * pointed at DC table 2, then at AC table 3: both refused; the file as
 * written decodes. */
static void test_jpeg_undefined_huffman(void)
{
    size_t len, sos;
    unsigned char *buf = jpeg_with(0xDA, &len, &sos);
    if (sos) {
        gimg_image im;
        CHECK(gimg_decode_memory(buf, len, &im) == GIMG_OK, "the written JPEG: %s",
              gimg_last_error());
        gimg_image_free(&im);
        const unsigned char tables = buf[sos + 6];  /* component 1: DC << 4 | AC */
        const unsigned char wrong[2] = {(unsigned char)(0x20 | (tables & 15)),
                                        (unsigned char)((tables & 0xF0) | 3)};
        for (int k = 0; k < 2; k++) {
            buf[sos + 6] = wrong[k];
            CHECK(gimg_decode_memory(buf, len, &im) == GIMG_E_FORMAT, "decode accepted %02x",
                  wrong[k]);
            CHECK(strstr(gimg_last_error(), "Huffman table that no DHT defines") != NULL,
                  "message: %s", gimg_last_error());
            gimg_image_free(&im);
        }
    }
    free(buf);
}

/* Found by fuzz_decode: a DHT segment whose length runs past the end of the
 * file. stb reads its second table's counts (and zeros after the end), and
 * the walk used to stop at the segment that did not fit. */
static void test_jpeg_huffman_past_end(void)
{
    static const unsigned char jpeg[] = {
        0xFF, 0xD8, 0xFF, 0xC4, 0x01, 0x00,              /* DHT of 254 bytes... */
        0x00, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7,  /* 1 code */
        0x10, 200, 200, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 400 codes */
    };                                                   /* ...cut short here */
    gimg_image im;
    gimg_info info;
    CHECK(gimg_probe_memory(jpeg, sizeof jpeg, &info) == GIMG_E_FORMAT, "probe accepted it");
    CHECK(gimg_decode_memory(jpeg, sizeof jpeg, &im) == GIMG_E_FORMAT, "decode accepted it");
    CHECK(strstr(gimg_last_error(), "Huffman") != NULL, "message: %s", gimg_last_error());
    /* Stray bytes between segments, which stb skips, do not hide a DHT. */
    static const unsigned char comment[] = { 0xFF, 0xFE, 0x00, 0x03, 'x', 'a', 'b', 'c' };
    unsigned char stray[sizeof jpeg + sizeof comment];
    memcpy(stray, jpeg, 2);
    memcpy(stray + 2, comment, sizeof comment);
    memcpy(stray + 2 + sizeof comment, jpeg + 2, sizeof jpeg - 2);
    CHECK(gimg_decode_memory(stray, sizeof stray, &im) == GIMG_E_FORMAT &&
              strstr(gimg_last_error(), "Huffman") != NULL, "after stray bytes: %s",
          gimg_last_error());
    /* Nor do 0xFF fill bytes before SOI, which stb also skips: such a file
     * used to be taken for TGA and reach stb's JPEG decoder unchecked. */
    unsigned char fill[sizeof jpeg + 2] = { 0xFF, 0xFF };
    memcpy(fill + 2, jpeg, sizeof jpeg);
    CHECK(gimg_format_sniff(fill, sizeof fill) == GIMG_FMT_JPEG, "not sniffed as JPEG");
    CHECK(gimg_decode_memory(fill, sizeof fill, &im) == GIMG_E_FORMAT &&
              strstr(gimg_last_error(), "Huffman") != NULL, "after fill bytes: %s",
          gimg_last_error());
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

/* A PNG of 5x3 gray (8-bit), from our encoder. */
static unsigned char *gray_png(size_t *len)
{
    return encode(GIMG_FMT_PNG, 5, 3, 1, GIMG_U8, len);
}

/* buf with a chunk inserted at offset; the CRC is right unless bad_crc. */
static unsigned char *insert_chunk(const unsigned char *buf, size_t len, size_t offset,
                                   const char *type, const void *data, uint32_t n, int bad_crc,
                                   size_t *out_len)
{
    unsigned char *out = malloc(len + 12 + n);
    if (!out)
        return NULL;
    memcpy(out, buf, offset);
    unsigned char *c = out + offset;
    c[0] = (unsigned char)(n >> 24), c[1] = (unsigned char)(n >> 16);
    c[2] = (unsigned char)(n >> 8), c[3] = (unsigned char)n;
    memcpy(c + 4, type, 4);
    memcpy(c + 8, data, n);
    uint32_t crc = libdeflate_crc32(0, c + 4, n + 4) ^ (bad_crc ? 1u : 0u);
    c[8 + n] = (unsigned char)(crc >> 24), c[9 + n] = (unsigned char)(crc >> 16);
    c[10 + n] = (unsigned char)(crc >> 8), c[11 + n] = (unsigned char)crc;
    memcpy(c + 12 + n, buf + offset, len - offset);
    *out_len = len + 12 + n;
    return out;
}

/* gimg checks the CRCs of the chunks that make the pixels (critical ones
 * and tRNS), as libpng does; stb checks none. */
static void test_png_crc(void)
{
    size_t len, n;
    unsigned char *buf = gray_png(&len);
    CHECK(buf != NULL, "encode: %s", gimg_last_error());
    if (!buf)
        return;
    gimg_image im;
    CHECK(gimg_decode_memory(buf, len, &im) == GIMG_OK, "intact: %s", gimg_last_error());
    gimg_image_free(&im);
    /* A flipped bit in each critical chunk's data or CRC: IHDR's data, then
     * the IDAT's first data byte, then IEND's CRC. */
    const size_t spots[] = { 16 + 12, 33 + 8, len - 1 };
    for (size_t i = 0; i < sizeof spots / sizeof spots[0]; i++) {
        buf[spots[i]] ^= 0x10;
        gimg_status st = gimg_decode_memory(buf, len, &im);
        CHECK(st == GIMG_E_FORMAT && strstr(gimg_last_error(), "CRC"),
              "bit flipped at byte %zu: status %d, %s", spots[i], st, gimg_last_error());
        gimg_image_free(&im);
        buf[spots[i]] ^= 0x10;
    }
    /* A bad CRC in tRNS is refused; in a text chunk, ignored. */
    const unsigned char key[2] = { 0, 7 };
    unsigned char *t = insert_chunk(buf, len, 33, "tRNS", key, 2, 1, &n);
    CHECK(t && gimg_decode_memory(t, n, &im) == GIMG_E_FORMAT, "bad tRNS CRC accepted");
    free(t);
    t = insert_chunk(buf, len, 33, "tEXt", "Title\0x", 7, 1, &n);
    CHECK(t && gimg_decode_memory(t, n, &im) == GIMG_OK, "bad tEXt CRC refused: %s",
          gimg_last_error());
    gimg_image_free(&im);
    free(t);
    free(buf);
}

/* Found by fuzz_decode: stb's probe leaves out the alpha channel that tRNS
 * gives a gray or RGB PNG, so the probe and the decoder disagreed. */
static void test_png_trns_channels(void)
{
    size_t len, n;
    unsigned char *buf = gray_png(&len);
    CHECK(buf != NULL, "encode: %s", gimg_last_error());
    if (!buf)
        return;
    const unsigned char key[2] = { 0, 7 };
    unsigned char *t = insert_chunk(buf, len, 33, "tRNS", key, 2, 0, &n);
    gimg_info info;
    gimg_image im;
    CHECK(t && gimg_probe_memory(t, n, &info) == GIMG_OK, "probe: %s", gimg_last_error());
    CHECK(info.channels == 2, "probe says %d channels", info.channels);
    CHECK(t && gimg_decode_memory(t, n, &im) == GIMG_OK, "decode: %s", gimg_last_error());
    CHECK(im.channels == 2, "decoded %d channels", im.channels);
    gimg_image_free(&im);
    free(t);
    free(buf);
}

/* Every prefix of a PNG is refused as truncated, up to and including a
 * missing IEND; data after IEND is ignored. */
static void test_png_truncated(void)
{
    size_t len;
    unsigned char *buf = encode(GIMG_FMT_PNG, 17, 9, 4, GIMG_U16, &len);
    CHECK(buf != NULL, "encode: %s", gimg_last_error());
    if (!buf)
        return;
    gimg_image im;
    for (size_t n = 1; n < len; n++) {
        gimg_status st = gimg_decode_memory(buf, n, &im);
        CHECK(st == GIMG_E_FORMAT, "cut at %zu of %zu bytes: status %d", n, len, st);
        gimg_image_free(&im);
    }
    CHECK(strstr(gimg_last_error(), "truncated PNG") != NULL, "message: %s", gimg_last_error());
    unsigned char *more = malloc(len + 5);
    if (more) {
        memcpy(more, buf, len);
        memcpy(more + len, "junk!", 5);
        CHECK(gimg_decode_memory(more, len + 5, &im) == GIMG_OK, "data after IEND: %s",
              gimg_last_error());
        gimg_image_free(&im);
        free(more);
    }
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
    RUN(test_jpeg_huffman_overflow);
    RUN(test_jpeg_huffman_past_end);
    RUN(test_jpeg_undefined_huffman);
    RUN(test_bmp_top_down);
    RUN(test_png_crc);
    RUN(test_png_trns_channels);
    RUN(test_png_truncated);
    return check_summary();
}
