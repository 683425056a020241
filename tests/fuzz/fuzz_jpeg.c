/*
 * fuzz_jpeg — the JPEG codec (lib/codec_jpeg.c: libjpeg-turbo and our
 * header walk, scan limit and warning rules), through fuzz_codec.h's
 * checks; a decoded image is 8-bit gray or RGB, and encodes again, under
 * options drawn from the input (quality, subsampling, progressive), into a
 * JPEG that reads back with the same layout.
 */
#include "fuzz_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gimg_image im;
    fuzz_codec_page(&gimg_codec_jpeg, data, size, 0, &im);
    if (!im.data)
        return 0;
    FUZZ_CHECK(im.sample == GIMG_U8 && (im.channels == 1 || im.channels == 3),
               "decoded c%d s%d", im.channels, (int)im.sample);
    unsigned seed = fuzz_touch(&im) + (unsigned)size;
    gimg_write_opts o;
    gimg_write_opts_init(&o);
    o.quality = 1 + (int)(seed % 100);
    o.jpeg_subsampling = (gimg_subsampling)(seed / 100 % 4);
    o.jpeg_progressive = (int)(seed / 400 % 2);
    gimg_image back = fuzz_round_trip(&gimg_codec_jpeg, &im, &o, 0);
    FUZZ_CHECK(!back.data || back.channels == im.channels, "the round trip changed channels");
    gimg_image_free(&back);
    gimg_image_free(&im);
    return 0;
}
