/*
 * fuzz_gif — the GIF reader's row (lib/codec_gif.c) called directly on the
 * fuzzer's bytes, so that inputs whose "GIF8" magic a mutation broke still
 * reach our block walk and giflib: probe and decode of page 0, and of page
 * 1 when the probe counts more than one frame (compositing, disposal).
 *
 * Checked: a failure says why and leaves no image; a decoded image agrees
 * with the probe of the same page (size, channels, 8-bit RGB or RGBA), is
 * within the limits, and every one of its bytes can be read (ASan); page 1
 * has page 0's size and channels (they belong to the file, not the frame);
 * a small decoded image survives a round trip through PAM bit for bit.
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

static void round_trip(const gimg_image *im)
{
    if ((uint64_t)im->width * (uint64_t)im->height > 4096)
        return;
    unsigned char *buf;
    size_t len;
    gimg_status st = gimg_encode(im, GIMG_FMT_PAM, NULL, &buf, &len);
    FUZZ_CHECK(st == GIMG_OK, "encoding a decoded image as PAM: %s", gimg_last_error());
    gimg_image back;
    st = gimg_decode_memory(buf, len, &back);
    FUZZ_CHECK(st == GIMG_OK, "decoding our own PAM: %s", gimg_last_error());
    size_t row = (size_t)im->width * gimg_pixel_bytes(im);
    FUZZ_CHECK(back.width == im->width && back.height == im->height &&
                   back.channels == im->channels, "round trip changed the layout");
    for (int y = 0; y < im->height; y++)
        FUZZ_CHECK(memcmp(gimg_row(im, y), gimg_row(&back, y), row) == 0,
                   "round trip changed row %d", y);
    gimg_image_free(&back);
    free(buf);
}

/* Probe and decode of one page: the probe's page count (0 if it failed),
 * and the decoded layout in *layout (width, height, channels; zeros if
 * the decode failed). */
static int one_page(const uint8_t *data, size_t size, int page, int layout[3])
{
    gimg_read_opts o = {page};
    gimg_info info;
    memset(&info, 0, sizeof info);
    memset(layout, 0, 3 * sizeof *layout);
    fuzz_clear_error();
    gimg_status probe = gimg_codec_gif.probe(data, size, &o, &info);
    fuzz_check_failure(probe, "probe");
    FUZZ_CHECK(probe != GIMG_E_USAGE && probe != GIMG_E_DEVICE, "probe status %d", (int)probe);

    gimg_image im;
    memset(&im, 0x5A, sizeof im);
    fuzz_clear_error();
    gimg_status st = gimg_codec_gif.decode(data, size, &o, &im);
    fuzz_check_failure(st, "decode");
    FUZZ_CHECK(st != GIMG_E_USAGE && st != GIMG_E_DEVICE, "decode status %d: %s", (int)st,
               gimg_last_error());
    if (st != GIMG_OK) {
        FUZZ_CHECK(im.data == NULL && im.width == 0, "a failed decode left an image");
        return probe == GIMG_OK ? info.pages : 0;
    }
    FUZZ_CHECK(probe == GIMG_OK, "decoded what the probe refused: %s", gimg_last_error());
    FUZZ_CHECK(im.width == info.width && im.height == info.height &&
                   im.channels == info.channels && im.sample == info.sample &&
                   im.sample == GIMG_U8 && (im.channels == 3 || im.channels == 4),
               "page %d: decoded %dx%d c%d s%d, probe said %dx%d c%d s%d", page, im.width,
               im.height, im.channels, (int)im.sample, info.width, info.height, info.channels,
               (int)info.sample);
    FUZZ_CHECK(info.pages > page, "decoded page %d of %d", page, info.pages);
    FUZZ_CHECK(gimg_check_size(im.width, im.height, im.channels, im.sample, NULL, NULL) ==
                   GIMG_OK, "decoded image over the limits: %s", gimg_last_error());
    FUZZ_CHECK(im.stride_bytes >= (size_t)im.width * gimg_pixel_bytes(&im), "short stride");
    volatile unsigned sum = touch(&im);
    (void)sum;
    round_trip(&im);
    layout[0] = im.width;
    layout[1] = im.height;
    layout[2] = im.channels;
    gimg_image_free(&im);
    return info.pages;
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
