/*
 * fuzz_tiff — the TIFF codec (lib/codec_tiff.c: libtiff and our own IFD
 * walk, strip checks and conversions), through fuzz_codec.h's checks, on
 * page 0 and, when the probe counts more, page 1; a decoded image survives
 * our TIFF encoder and decoder bit for bit under one of the three
 * compressions.
 */
#include "fuzz_codec.h"

static int one_page(const uint8_t *data, size_t size, int page)
{
    gimg_image im;
    int pages = fuzz_codec_page(&gimg_codec_tiff, data, size, page, &im);
    if (!im.data)
        return pages;
    static const gimg_tiff_compression modes[] = {GIMG_TIFF_DEFLATE, GIMG_TIFF_LZW,
                                                  GIMG_TIFF_NONE};
    gimg_write_opts o;
    gimg_write_opts_init(&o);
    o.tiff_compression = modes[fuzz_touch(&im) % 3];
    gimg_image back = fuzz_round_trip(&gimg_codec_tiff, &im, &o, 1);
    gimg_image_free(&back);
    gimg_image_free(&im);
    return pages;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (one_page(data, size, 0) > 1)
        one_page(data, size, 1);
    return 0;
}
