/*
 * fuzz_tiff — the TIFF codec's row (lib/codec_tiff.c) called directly on the
 * fuzzer's bytes, so that inputs whose magic number a mutation broke still
 * reach libtiff and our own IFD walk: probe and decode of page 0, and of
 * page 1 when the probe counts more than one page.
 *
 * Checked: a failure says why and leaves no image; a decoded image agrees
 * with the probe of the same page, is within the limits, and every one of
 * its bytes can be read (ASan; MSan-style uninitialised bytes are valgrind's
 * job in the CLI suite); a small decoded image survives a round trip through
 * our TIFF encoder bit for bit, under one of the three compressions.
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

static void round_trip(const gimg_image *im, unsigned which)
{
    if ((uint64_t)im->width * (uint64_t)im->height > 4096)
        return;
    gimg_write_opts o;
    gimg_write_opts_init(&o);
    o.tiff_compression = which % 3 == 0 ? GIMG_TIFF_DEFLATE : which % 3 == 1 ? GIMG_TIFF_LZW
                                                                             : GIMG_TIFF_NONE;
    unsigned char *buf;
    size_t len;
    gimg_status st = gimg_codec_tiff.encode(im, &o, &buf, &len);
    FUZZ_CHECK(st == GIMG_OK, "encoding a decoded image: %s", gimg_last_error());
    gimg_image back;
    gimg_read_opts first = {0};
    st = gimg_codec_tiff.decode(buf, len, &first, &back);
    FUZZ_CHECK(st == GIMG_OK, "decoding our own TIFF: %s", gimg_last_error());
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

/* Probe and decode of one page; returns the probe's page count (0 if it
 * failed). */
static int one_page(const uint8_t *data, size_t size, int page)
{
    gimg_read_opts o = {page};
    gimg_info info;
    memset(&info, 0, sizeof info);
    fuzz_clear_error();
    gimg_status probe = gimg_codec_tiff.probe(data, size, &o, &info);
    fuzz_check_failure(probe, "probe");
    FUZZ_CHECK(probe != GIMG_E_USAGE && probe != GIMG_E_DEVICE, "probe status %d", (int)probe);

    gimg_image im;
    memset(&im, 0x5A, sizeof im);
    fuzz_clear_error();
    gimg_status st = gimg_codec_tiff.decode(data, size, &o, &im);
    fuzz_check_failure(st, "decode");
    FUZZ_CHECK(st != GIMG_E_USAGE && st != GIMG_E_DEVICE, "decode status %d: %s", (int)st,
               gimg_last_error());
    if (st != GIMG_OK) {
        FUZZ_CHECK(im.data == NULL && im.width == 0, "a failed decode left an image");
        return probe == GIMG_OK ? info.pages : 0;
    }
    FUZZ_CHECK(probe == GIMG_OK, "decoded what the probe refused: %s", gimg_last_error());
    FUZZ_CHECK(im.width == info.width && im.height == info.height &&
                   im.channels == info.channels && im.sample == info.sample,
               "page %d: decoded %dx%d c%d s%d, probe said %dx%d c%d s%d", page, im.width,
               im.height, im.channels, (int)im.sample, info.width, info.height, info.channels,
               (int)info.sample);
    FUZZ_CHECK(info.pages > page, "decoded page %d of %d", page, info.pages);
    FUZZ_CHECK(gimg_check_size(im.width, im.height, im.channels, im.sample, NULL, NULL) ==
                   GIMG_OK, "decoded image over the limits: %s", gimg_last_error());
    FUZZ_CHECK(im.stride_bytes >= (size_t)im.width * gimg_pixel_bytes(&im), "short stride");
    volatile unsigned sum = touch(&im);
    round_trip(&im, sum);
    gimg_image_free(&im);
    return info.pages;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (one_page(data, size, 0) > 1)
        one_page(data, size, 1);
    return 0;
}
