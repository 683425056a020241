/*
 * fuzz_decode — image decoding from memory, every format, through the
 * entry points the tools use: gimg_probe_memory() (the header, for -v and
 * for starting CUDA early) and gimg_decode_memory() (format sniffing, the
 * size limits, the prechecks of precheck.c, then stb_image or pnm.c).
 *
 * Checked: a failure says why; a decoded image is valid, agrees with what
 * the probe said, is within the limits, and every one of its bytes can be
 * read (ASan); small images survive a lossless round trip through PAM or
 * PFM, which exercises the encoders on every layout the decoders produce.
 */
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    gimg_set_max_pixels(FUZZ_MAX_PIXELS);
    return 0;
}

/* Reads every sample byte, so that a buffer shorter than the image claims
 * is an ASan report; the sum keeps the reads from being optimised away. */
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

static void round_trip(const gimg_image *im)
{
    /* PAM holds 8/16-bit of 1-4 channels, PFM float gray and RGB, losslessly. */
    gimg_format f = im->sample != GIMG_F32 ? GIMG_FMT_PAM
                  : (im->channels == 1 || im->channels == 3) ? GIMG_FMT_PFM
                                                              : GIMG_FMT_UNKNOWN;
    if (f == GIMG_FMT_UNKNOWN || (uint64_t)im->width * (uint64_t)im->height > 4096)
        return;
    unsigned char *buf;
    size_t len;
    gimg_status st = gimg_encode(im, f, NULL, &buf, &len);
    FUZZ_CHECK(st == GIMG_OK, "encoding a decoded image as %s: %s", gimg_format_name(f),
               gimg_last_error());
    gimg_image back;
    st = gimg_decode_memory(buf, len, &back);
    FUZZ_CHECK(st == GIMG_OK, "decoding our own %s: %s", gimg_format_name(f), gimg_last_error());
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
    gimg_info info;
    fuzz_clear_error();
    gimg_status probe = gimg_probe_memory(data, size, &info);
    fuzz_check_failure(probe, "gimg_probe_memory");

    gimg_image im;
    fuzz_clear_error();
    gimg_status st = gimg_decode_memory(data, size, &im);
    fuzz_check_failure(st, "gimg_decode_memory");
    FUZZ_CHECK(st != GIMG_E_USAGE && st != GIMG_E_DEVICE, "status %d: %s", (int)st,
               gimg_last_error());
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
    FUZZ_CHECK(gimg_check_size(im.width, im.height, im.channels, im.sample, NULL, NULL) ==
                   GIMG_OK, "decoded image over the limits: %s", gimg_last_error());
    FUZZ_CHECK(im.stride_bytes >= (size_t)im.width * gimg_pixel_bytes(&im), "short stride");
    volatile unsigned sum = touch(&im);
    (void)sum;
    round_trip(&im);
    gimg_image_free(&im);
    return 0;
}
