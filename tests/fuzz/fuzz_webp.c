/*
 * fuzz_webp — the WebP codec (lib/codec_webp.c: libwebp, and WebPDemux and
 * WebPAnimDecoder for animations), through fuzz_codec.h's checks, on page 0
 * and, when the probe counts more frames, page 1: a decoded image is 8-bit
 * RGB or RGBA, and survives our lossless encoder and decoder bit for bit
 * (exact mode keeps even the colour under transparent pixels; an RGBA
 * image that is all opaque comes back as RGB, as WebP stores it).
 */
#include "fuzz_codec.h"

static void lossless_round_trip(const gimg_image *im)
{
    gimg_write_opts o;
    gimg_write_opts_init(&o);
    o.webp_lossless = 1;
    gimg_image back = fuzz_round_trip(&gimg_codec_webp, im, &o, 0);
    if (!back.data)
        return;
    /* WebP marks alpha only when some pixel is not opaque. */
    const int dropped_alpha = im->channels == 4 && back.channels == 3;
    FUZZ_CHECK(back.channels == im->channels || dropped_alpha,
               "round trip changed the layout: c%d to c%d", im->channels, back.channels);
    for (int y = 0; y < im->height; y++) {
        const unsigned char *a = gimg_row(im, y), *b = gimg_row(&back, y);
        if (!dropped_alpha) {
            FUZZ_CHECK(memcmp(a, b, (size_t)im->width * gimg_pixel_bytes(im)) == 0,
                       "round trip changed row %d", y);
            continue;
        }
        for (int x = 0; x < im->width; x++)
            FUZZ_CHECK(a[4 * x + 3] == 255 && memcmp(a + 4 * x, b + 3 * x, 3) == 0,
                       "round trip dropped a non-opaque alpha or changed a colour at %d,%d", x, y);
    }
    gimg_image_free(&back);
}

static int one_page(const uint8_t *data, size_t size, int page)
{
    gimg_image im;
    int pages = fuzz_codec_page(&gimg_codec_webp, data, size, page, &im);
    if (!im.data)
        return pages;
    FUZZ_CHECK(im.sample == GIMG_U8 && (im.channels == 3 || im.channels == 4),
               "decoded c%d s%d", im.channels, (int)im.sample);
    lossless_round_trip(&im);
    gimg_image_free(&im);
    return pages;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (one_page(data, size, 0) > 1)
        one_page(data, size, 1);
    return 0;
}
