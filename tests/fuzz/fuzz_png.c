/*
 * fuzz_png — the PNG decoder (lib/codec_png.c: libspng and what it adds:
 * the palette check, the in-place expansion of low depths, palettes and
 * tRNS, the IEND walk), called through its codec row so that inputs whose
 * signature a mutation broke still reach it.
 *
 * Checked: a failure says why and leaves *out zeroed; a decoded image is
 * one the probe accepted and agrees with it, is within the limits, and
 * every one of its bytes can be read (ASan; MSan would see unwritten
 * ones); small images survive a round trip through our PNG encoder and
 * back, bit for bit.
 */
#include "fuzz.h"
#include "codec.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    gimg_set_max_pixels(FUZZ_MAX_PIXELS);
    return 0;
}

/* Reads every sample byte; the sum keeps the reads. */
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

/* Our encoder writes every layout the decoder produces (8/16-bit, 1-4
 * channels): what it writes must decode to the same samples. */
static void round_trip(const gimg_image *im)
{
    if ((uint64_t)im->width * (uint64_t)im->height > 4096)
        return;
    unsigned char *buf;
    size_t len;
    gimg_status st = gimg_encode(im, GIMG_FMT_PNG, NULL, &buf, &len);
    FUZZ_CHECK(st == GIMG_OK, "encoding a decoded image as PNG: %s", gimg_last_error());
    gimg_image back;
    st = gimg_codec_png.decode(buf, len, NULL, &back);
    FUZZ_CHECK(st == GIMG_OK, "decoding our own PNG: %s", gimg_last_error());
    FUZZ_CHECK(back.width == im->width && back.height == im->height &&
                   back.channels == im->channels && back.sample == im->sample,
               "round trip changed the layout");
    size_t row = (size_t)im->width * gimg_pixel_bytes(im);
    for (int y = 0; y < im->height; y++)
        FUZZ_CHECK(memcmp(gimg_row(im, y), gimg_row(&back, y), row) == 0,
                   "round trip changed row %d", y);
    gimg_image_free(&back);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const gimg_read_opts first = { 0 };
    gimg_info info;
    memset(&info, 0, sizeof info);
    fuzz_clear_error();
    gimg_status probe = gimg_codec_png.probe(data, size, &first, &info);
    fuzz_check_failure(probe, "probe");
    FUZZ_CHECK(probe != GIMG_E_USAGE && probe != GIMG_E_DEVICE && probe != GIMG_E_IO,
               "probe status %d: %s", (int)probe, gimg_last_error());

    gimg_image im;
    fuzz_clear_error();
    gimg_status st = gimg_codec_png.decode(data, size, &first, &im);
    fuzz_check_failure(st, "decode");
    FUZZ_CHECK(st != GIMG_E_USAGE && st != GIMG_E_DEVICE && st != GIMG_E_IO, "decode status %d: %s",
               (int)st, gimg_last_error());
    if (st != GIMG_OK) {
        FUZZ_CHECK(im.data == NULL && im.width == 0 && im.height == 0,
                   "a failed decode left an image");
        return 0;
    }
    FUZZ_CHECK(probe == GIMG_OK, "decoded what the probe refused: %s", gimg_last_error());
    FUZZ_CHECK(info.format == GIMG_FMT_PNG && info.pages == 1, "probe: format %d, %d pages",
               (int)info.format, info.pages);
    FUZZ_CHECK(im.width == info.width && im.height == info.height &&
                   im.channels == info.channels && im.sample == info.sample,
               "decoded %dx%d c%d s%d, probe said %dx%d c%d s%d", im.width, im.height,
               im.channels, (int)im.sample, info.width, info.height, info.channels,
               (int)info.sample);
    FUZZ_CHECK(im.sample == GIMG_U8 || im.sample == GIMG_U16, "sample size %d", (int)im.sample);
    FUZZ_CHECK(gimg_check_size(im.width, im.height, im.channels, im.sample, NULL, NULL) ==
                   GIMG_OK, "decoded image over the limits: %s", gimg_last_error());
    FUZZ_CHECK(im.stride_bytes >= (size_t)im.width * gimg_pixel_bytes(&im), "short stride");
    volatile unsigned sum = touch(&im);
    (void)sum;
    round_trip(&im);
    gimg_image_free(&im);
    return 0;
}
