/*
 * fuzz_jpeg — the JPEG codec (lib/codec_jpeg.c: libjpeg-turbo and our
 * header walk, scan limit and warning rules), through fuzz_codec.h's
 * checks; a decoded image is 8-bit gray or RGB, and encodes again, under
 * options drawn from the input (quality, subsampling, progressive), into a
 * JPEG that reads back with the same layout. The GPU codecs' parts that
 * run on the CPU (lib/jpeg_internal.h): the header read without the
 * pixels agrees with decoding wherever decoding succeeds, and the headers
 * put on the input as if the GPU's encoder had made it.
 */
#include "fuzz_codec.h"
#include "jpeg_internal.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gimg_image im, shell;
    gimg_jpeg_facts facts;
    const gimg_status header = gimg_jpeg_read_header(data, size, &shell, &facts);
    FUZZ_CHECK(header != GIMG_OK || (!shell.data && !shell.device), "the header read gave pixels");
    fuzz_codec_page(&gimg_codec_jpeg, data, size, 0, &im);
    unsigned char *with = NULL;
    size_t with_len = 0;
    if (gimg_jpeg_with_headers(data, size, im.meta, &with, &with_len) == GIMG_OK)
        FUZZ_CHECK(with_len >= 20 && with[0] == 0xFF && with[1] == 0xD8 && with[3] == 0xE0,
                   "the headers put on are not SOI and JFIF");
    free(with);
    if (im.data)
        FUZZ_CHECK(header == GIMG_OK && shell.width == im.width && shell.height == im.height &&
                       shell.channels == im.channels,
                   "the header read (status %d) disagrees with decoding", header);
    gimg_image_free(&shell);
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
