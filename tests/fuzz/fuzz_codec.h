/*
 * fuzz_codec.h — what the codec targets (fuzz_jpeg, fuzz_png, fuzz_tiff,
 * fuzz_webp, fuzz_gif) share. Each calls its codec's row directly on the
 * fuzzer's bytes, so that inputs whose magic a mutation broke still reach
 * the decoder, and states the promises every decoder keeps (lib/codec.h):
 *  - a failure says why, with a file's status (never a usage or device
 *    one), and leaves *out zeroed;
 *  - a decoded image is one the probe of the same page accepted, agrees
 *    with it, is within the limits, has a page the probe counted, and
 *    every one of its bytes can be read (ASan; unwritten bytes are
 *    valgrind's part, in the CLI suites);
 *  - a small decoded image survives an encode and decode (bit for bit
 *    where the format is lossless);
 *  - the row decoder, where the codec has one, agrees with decode
 *    (fuzz_rows_match).
 */
#ifndef GIMG_FUZZ_CODEC_H
#define GIMG_FUZZ_CODEC_H

#include "codec.h"
#include "fuzz.h"
#include "fuzz_rows.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    gimg_set_max_pixels(FUZZ_MAX_PIXELS);
    return 0;
}

/* Reads every sample byte; the sum keeps the reads from being optimised
 * away (and serves the targets as a seed). */
static inline unsigned fuzz_touch(const gimg_image *im)
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

/* Probe and decode of page `page` through row, with the promises above
 * checked. Returns the probe's page count (0 when it failed); *im holds the
 * decoded image (the caller frees it), or is zeroed. */
static inline int fuzz_codec_page(const gimg_codec *row, const uint8_t *data, size_t size,
                                  int page, gimg_image *im)
{
    const gimg_read_opts o = {.page = page};
    gimg_info info;
    memset(&info, 0, sizeof info);
    fuzz_clear_error();
    gimg_status probe = row->probe(data, size, &o, &info);
    fuzz_check_failure(probe, "probe");
    FUZZ_CHECK(probe != GIMG_E_USAGE && probe != GIMG_E_DEVICE && probe != GIMG_E_IO,
               "probe status %d: %s", (int)probe, gimg_last_error());

    memset(im, 0x5A, sizeof *im);
    fuzz_clear_error();
    gimg_status st = row->decode(data, size, &o, im);
    fuzz_check_failure(st, "decode");
    FUZZ_CHECK(st != GIMG_E_USAGE && st != GIMG_E_DEVICE && st != GIMG_E_IO,
               "decode status %d: %s", (int)st, gimg_last_error());
    char message[512];
    snprintf(message, sizeof message, "%s", gimg_last_error());
    fuzz_rows_match(row, data, size, page, st, message, im);
    if (st != GIMG_OK) {
        FUZZ_CHECK(im->data == NULL && im->width == 0 && im->height == 0,
                   "a failed decode left an image");
        return probe == GIMG_OK ? info.pages : 0;
    }
    FUZZ_CHECK(probe == GIMG_OK, "decoded what the probe refused: %s", gimg_last_error());
    FUZZ_CHECK(im->width == info.width && im->height == info.height &&
                   im->channels == info.channels && im->sample == info.sample,
               "page %d: decoded %dx%d c%d s%d, probe said %dx%d c%d s%d", page, im->width,
               im->height, im->channels, (int)im->sample, info.width, info.height,
               info.channels, (int)info.sample);
    FUZZ_CHECK(info.pages > page && (row->multi_page || info.pages == 1),
               "decoded page %d of %d", page, info.pages);
    FUZZ_CHECK(gimg_check_size(im->width, im->height, im->channels, im->sample, NULL, NULL) ==
                   GIMG_OK, "decoded image over the limits: %s", gimg_last_error());
    FUZZ_CHECK(im->stride_bytes >= (size_t)im->width * gimg_pixel_bytes(im), "short stride");
    volatile unsigned sum = fuzz_touch(im);
    (void)sum;
    return info.pages;
}

/* Encodes a small im with row and o (NULL: the defaults), decodes it again: the same size and
 * depth, and, when exact, the same channels and samples. Returns the image
 * read back (the caller frees it), for a format's own further checks. */
static inline gimg_image fuzz_round_trip(const gimg_codec *row, const gimg_image *im,
                                         const gimg_write_opts *o, int exact)
{
    gimg_image back;
    memset(&back, 0, sizeof back);
    if ((uint64_t)im->width * (uint64_t)im->height > 4096)
        return back;
    gimg_write_opts defaults;
    if (!o) {   /* rows take options always (write.c passes them) */
        gimg_write_opts_init(&defaults);
        o = &defaults;
    }
    unsigned char *buf;
    size_t len;
    gimg_status st = row->encode(im, o, &buf, &len);
    FUZZ_CHECK(st == GIMG_OK, "encoding a decoded %dx%d c%d image as %s: %s", im->width,
               im->height, im->channels, row->name, gimg_last_error());
    const gimg_read_opts first = {.page = 0};
    st = row->decode(buf, len, &first, &back);
    free(buf);
    FUZZ_CHECK(st == GIMG_OK, "decoding our own %s: %s", row->name, gimg_last_error());
    FUZZ_CHECK(back.width == im->width && back.height == im->height &&
                   back.sample == im->sample && (!exact || back.channels == im->channels),
               "the %s round trip changed the layout", row->name);
    size_t bytes = (size_t)im->width * gimg_pixel_bytes(im);
    for (int y = 0; exact && y < im->height; y++)
        FUZZ_CHECK(memcmp(gimg_row(im, y), gimg_row(&back, y), bytes) == 0,
                   "the %s round trip changed row %d", row->name, y);
    return back;
}

#endif
