/*
 * fuzz_gif — the GIF reader (lib/codec_gif.c: our block walk and giflib),
 * through fuzz_codec.h's checks, on page 0 and, when the probe counts more
 * frames, page 1 (compositing, disposal): a decoded frame is 8-bit RGB or
 * RGBA, page 1 has page 0's size and channels (they are the file's, not a
 * frame's), and a frame survives a round trip through PAM bit for bit.
 */
#include "fuzz_codec.h"

/* The decoded layout of one page in layout[] (zeros if it failed); the
 * probe's page count. */
static int one_page(const uint8_t *data, size_t size, int page, int layout[3])
{
    gimg_image im;
    int pages = fuzz_codec_page(&gimg_codec_gif, data, size, page, &im);
    memset(layout, 0, 3 * sizeof *layout);
    if (!im.data)
        return pages;
    FUZZ_CHECK(im.sample == GIMG_U8 && (im.channels == 3 || im.channels == 4),
               "decoded c%d s%d", im.channels, (int)im.sample);
    gimg_image back = fuzz_round_trip(&gimg_codec_pam, &im, NULL, 1);
    gimg_image_free(&back);
    layout[0] = im.width;
    layout[1] = im.height;
    layout[2] = im.channels;
    gimg_image_free(&im);
    return pages;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int first[3], second[3];
    if (one_page(data, size, 0, first) > 1) {
        one_page(data, size, 1, second);
        FUZZ_CHECK(!first[0] || !second[0] || memcmp(first, second, sizeof first) == 0,
                   "page 0 is %dx%d c%d, page 1 %dx%d c%d", first[0], first[1], first[2],
                   second[0], second[1], second[2]);
    }
    return 0;
}
