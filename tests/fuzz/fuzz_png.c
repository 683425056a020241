/*
 * fuzz_png — the PNG decoder (lib/codec_png.c: libspng and what it adds:
 * the palette check, the in-place expansion of low depths, palettes and
 * tRNS, the IEND walk, the image data decoded by png_idat.c), through
 * fuzz_codec.h's checks; the same answer as libspng alone gives
 * (gimg_png_own_idat = 0): status, message, pixels; a decoded image is 8
 * or 16-bit and survives our PNG encoder and decoder bit for bit.
 */
#include "fuzz_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gimg_image im, theirs;
    fuzz_codec_page(&gimg_codec_png, data, size, 0, &im);
    /* Ours again, to compare its message with libspng's. */
    fuzz_clear_error();
    gimg_image ours;
    const gimg_status st_ours = gimg_codec_png.decode(data, size, NULL, &ours);
    char message[512];
    snprintf(message, sizeof message, "%s", st_ours ? gimg_last_error() : "");
    gimg_png_own_idat = 0;
    fuzz_clear_error();
    const gimg_status st = gimg_codec_png.decode(data, size, NULL, &theirs);
    gimg_png_own_idat = 1;
    FUZZ_CHECK(st == st_ours && (!st || !strcmp(message, gimg_last_error())),
               "ours: %s; libspng alone: %s", st_ours ? message : "decoded",
               st ? gimg_last_error() : "decoded");
    if (!st && !st_ours) {
        const size_t bytes = (size_t)ours.height * ours.stride_bytes;
        FUZZ_CHECK(ours.maxval == theirs.maxval && theirs.stride_bytes == ours.stride_bytes &&
                       !memcmp(ours.data, theirs.data, bytes),
                   "our pixels differ from libspng's");
    }
    gimg_image_free(&ours);
    gimg_image_free(&theirs);
    if (!im.data)
        return 0;
    FUZZ_CHECK(im.sample == GIMG_U8 || im.sample == GIMG_U16, "sample size %d", (int)im.sample);
    gimg_image back = fuzz_round_trip(&gimg_codec_png, &im, NULL, 1);
    gimg_image_free(&back);
    gimg_image_free(&im);
    return 0;
}
