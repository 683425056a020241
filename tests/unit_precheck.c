/*
 * unit_precheck — files stb_image 2.27 mishandles, refused by precheck.c:
 * HDR that hangs its loader (a zero-length run, which is what it reads past
 * the end of truncated run-length data), a JPEG Huffman table it would
 * overflow, and BMP/TGA whose missing pixels it would invent as zeros.
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
    check_truncations(GIMG_FMT_BMP, 3, 54);
    check_truncations(GIMG_FMT_BMP, 4, 54);
}

static void test_truncated_tga(void)
{
    check_truncations(GIMG_FMT_TGA, 3, 18);
    check_truncations(GIMG_FMT_TGA, 4, 18);
}

/* A DHT segment whose 16 counts add up past 256 codes. */
static void test_jpeg_huffman_overflow(void)
{
    size_t len;
    unsigned char *buf = encode(GIMG_FMT_JPEG, 17, 9, 3, GIMG_U8, &len);
    CHECK(buf != NULL, "encode: %s", gimg_last_error());
    if (!buf)
        return;
    size_t dht = 0;
    for (size_t i = 2; i + 5 < len && !dht; i++)
        if (buf[i] == 0xFF && buf[i + 1] == 0xC4)
            dht = i;
    CHECK(dht != 0, "no DHT segment");
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

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(60);
    RUN(test_truncated_rle);
    RUN(test_truncated_flat);
    RUN(test_zero_run);
    RUN(test_truncated_bmp);
    RUN(test_truncated_tga);
    RUN(test_jpeg_huffman_overflow);
    return check_summary();
}
