/*
 * unit_hdr — Radiance HDR files that used to hang the decoder: stb_image's
 * loader spins forever on a zero-length run, which is what it reads past
 * the end of a truncated run-length-encoded file. Every prefix of a valid
 * file must be refused (or decoded) promptly; an alarm turns a hang into a
 * failure instead of a stuck test run.
 */
#include "gimg.h"
#include "hdr_internal.h"
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

static unsigned char *encode_hdr(int w, int h, size_t *len)
{
    gimg_image im;
    unsigned char *buf = NULL;
    if (gimg_image_alloc(&im, w, h, 3, GIMG_F32))
        return NULL;
    testimg_fill_random(&im, (uint64_t)w * h);
    if (gimg_encode(&im, GIMG_FMT_HDR, NULL, &buf, len))
        buf = NULL;
    gimg_image_free(&im);
    return buf;
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

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(60);
    RUN(test_truncated_rle);
    RUN(test_truncated_flat);
    RUN(test_zero_run);
    return check_summary();
}
