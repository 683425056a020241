/*
 * fuzz_png — the PNG decoder (lib/codec_png.c: libspng and what it adds:
 * the palette check, the in-place expansion of low depths, palettes and
 * tRNS, the IEND walk), through fuzz_codec.h's checks; a decoded image is
 * 8 or 16-bit and survives our PNG encoder and decoder bit for bit.
 */
#include "fuzz_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gimg_image im;
    fuzz_codec_page(&gimg_codec_png, data, size, 0, &im);
    if (!im.data)
        return 0;
    FUZZ_CHECK(im.sample == GIMG_U8 || im.sample == GIMG_U16, "sample size %d", (int)im.sample);
    gimg_image back = fuzz_round_trip(&gimg_codec_png, &im, NULL, 1);
    gimg_image_free(&back);
    gimg_image_free(&im);
    return 0;
}
