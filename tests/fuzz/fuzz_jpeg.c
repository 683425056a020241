/*
 * fuzz_jpeg — the JPEG codec's row (lib/codec_jpeg.c) on the fuzzer's
 * bytes: probe and decode called directly, so that inputs whose magic
 * bytes a mutation broke still reach libjpeg and our header walk.
 *
 * Checked: a failure says why and leaves no image; a decoded image agrees
 * with the probe, is within the limits, is 8-bit gray or RGB, and every
 * byte of it can be read (ASan; MSan-style uninitialised bytes are
 * valgrind's part, in the tests); a small decoded image encodes again and
 * reads back with the same layout (the encoder on every layout the decoder
 * gives, baseline and progressive).
 */
#include "codec.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    gimg_set_max_pixels(FUZZ_MAX_PIXELS);
    return 0;
}

/* Reads every sample byte; the sum keeps the reads from being optimised away. */
static unsigned touch(const gimg_image *im)
{
    unsigned sum = 0;
    size_t row = (size_t)im->width * gimg_pixel_bytes(im);
    for (int y = 0; y < im->height; y++) {
        const unsigned char *p = gimg_row(im, y);
        for (size_t i = 0; i < row; i++)
            sum += p[i];
    }
    return sum;
}

static void round_trip(const gimg_image *im, unsigned seed)
{
    if ((uint64_t)im->width * (uint64_t)im->height > 65536)
        return;
    gimg_write_opts o;
    gimg_write_opts_init(&o);
    o.quality = 1 + (int)(seed % 100);
    o.jpeg_subsampling = (gimg_subsampling)(seed / 100 % 4);
    o.jpeg_progressive = (int)(seed / 400 % 2);
    unsigned char *buf;
    size_t len;
    fuzz_clear_error();
    gimg_status st = gimg_codec_jpeg.encode(im, &o, &buf, &len);
    FUZZ_CHECK(st == GIMG_OK, "encoding a decoded %dx%d c%d image: %s", im->width, im->height,
               im->channels, gimg_last_error());
    gimg_read_opts ro = {0};
    gimg_image back;
    st = gimg_codec_jpeg.decode(buf, len, &ro, &back);
    FUZZ_CHECK(st == GIMG_OK, "decoding our own JPEG: %s", gimg_last_error());
    FUZZ_CHECK(back.width == im->width && back.height == im->height &&
                   back.channels == im->channels && back.sample == GIMG_U8,
               "round trip changed the layout");
    gimg_image_free(&back);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const gimg_read_opts o = {0};
    gimg_info info;
    memset(&info, 0, sizeof info);
    fuzz_clear_error();
    gimg_status probe = gimg_codec_jpeg.probe(data, size, &o, &info);
    fuzz_check_failure(probe, "probe");

    gimg_image im;
    memset(&im, 0x5A, sizeof im);
    fuzz_clear_error();
    gimg_status st = gimg_codec_jpeg.decode(data, size, &o, &im);
    fuzz_check_failure(st, "decode");
    FUZZ_CHECK(st == GIMG_OK || st == GIMG_E_FORMAT || st == GIMG_E_LIMIT || st == GIMG_E_NOMEM,
               "status %d: %s", (int)st, gimg_last_error());
    if (st != GIMG_OK) {
        FUZZ_CHECK(im.data == NULL && im.width == 0, "a failed decode left an image");
        return 0;
    }
    FUZZ_CHECK(probe == GIMG_OK, "decoded what the probe refused: %s", gimg_last_error());
    FUZZ_CHECK(im.width == info.width && im.height == info.height &&
                   im.channels == info.channels && im.sample == info.sample,
               "decoded %dx%d c%d s%d, probe said %dx%d c%d s%d", im.width, im.height,
               im.channels, (int)im.sample, info.width, info.height, info.channels,
               (int)info.sample);
    FUZZ_CHECK(im.sample == GIMG_U8 && (im.channels == 1 || im.channels == 3),
               "decoded c%d s%d", im.channels, (int)im.sample);
    FUZZ_CHECK(gimg_check_size(im.width, im.height, im.channels, im.sample, NULL, NULL) ==
                   GIMG_OK, "decoded image over the limits: %s", gimg_last_error());
    FUZZ_CHECK(im.stride_bytes >= (size_t)im.width * gimg_pixel_bytes(&im), "short stride");
    volatile unsigned sum = touch(&im);
    (void)sum;
    round_trip(&im, size > 0 ? (unsigned)data[size - 1] * 7u + (unsigned)size : 0);
    gimg_image_free(&im);
    return 0;
}
