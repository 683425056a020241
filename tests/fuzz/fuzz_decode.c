/*
 * fuzz_decode — image decoding from memory, every format, through the
 * entry points the tools use: gimg_probe_memory() (the header, for -v and
 * for starting CUDA early) and gimg_decode_memory() (format sniffing, the
 * size limits, then the codec of the format: lib/codec.h).
 *
 * Checked: a failure says why; a decoded image is valid, agrees with what
 * the probe said, is within the limits, and every one of its bytes can be
 * read (ASan); small images survive a lossless round trip through PAM or
 * PFM, which exercises the encoders on every layout the decoders produce.
 */
#include "fuzz_codec.h"

/* PAM holds 8/16-bit of 1-4 channels, PFM float gray and RGB, losslessly. */
static void round_trip(const gimg_image *im)
{
    const gimg_codec *row = im->sample != GIMG_F32                        ? &gimg_codec_pam
                          : (im->channels == 1 || im->channels == 3) ? &gimg_codec_pfm
                                                                     : NULL;
    if (row) {
        gimg_image back = fuzz_round_trip(row, im, NULL, 1);
        gimg_image_free(&back);
    }
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
    volatile unsigned sum = fuzz_touch(&im);
    (void)sum;
    round_trip(&im);
    gimg_image_free(&im);
    return 0;
}
