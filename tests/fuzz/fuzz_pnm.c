/*
 * fuzz_pnm — the netpbm readers of pnm.c (PBM/PGM/PPM plain and raw, PAM,
 * PFM) by all of their sources: a buffer in memory (gimg_decode_memory),
 * the buffer viewed in place (gimg_pnm_view, what the tools read 8-bit
 * files with) and a stream (gimg_read_pnm_stream, for concatenated images,
 * read here from fmemopen()).
 *
 * Checked: a failure says why; the probe agrees with the decoder; a view
 * is taken only of what decodes, to the same pixels and maxval, its rows
 * inside the buffer; when the buffer decodes, the stream's first image
 * decodes to the same pixels; the stream reader ends (at most as many
 * images as the input has bytes); the row decoder of band reading gives
 * the same rows, or the same refusal (fuzz_rows.h).
 */
#include "fuzz.h"
#include "fuzz_rows.h"
#include "io_internal.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    gimg_set_max_pixels(FUZZ_MAX_PIXELS);
    return 0;
}

static int same_pixels(const gimg_image *a, const gimg_image *b)
{
    if (a->width != b->width || a->height != b->height || a->channels != b->channels ||
        a->sample != b->sample)
        return 0;
    size_t row = (size_t)a->width * gimg_pixel_bytes(a);
    for (int y = 0; y < a->height; y++)
        if (memcmp(gimg_row(a, y), gimg_row(b, y), row) != 0)
            return 0;
    return 1;
}

static int is_netpbm(const uint8_t *data, size_t size)
{
    gimg_format f = gimg_format_sniff(data, size);
    return f == GIMG_FMT_PNM || f == GIMG_FMT_PAM || f == GIMG_FMT_PFM;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gimg_info info;
    gimg_image mem;
    fuzz_clear_error();
    gimg_status probe = gimg_pnm_probe(data, size, &info);
    fuzz_check_failure(probe, "gimg_pnm_probe");
    fuzz_clear_error();
    gimg_status st = gimg_decode_memory(data, size, &mem);
    fuzz_check_failure(st, "gimg_decode_memory");
    const int netpbm = is_netpbm(data, size);
    if (netpbm) { /* the row decoder of band reading: decode's rows, or its refusal */
        char message[512];
        snprintf(message, sizeof message, "%s", gimg_last_error());
        fuzz_rows_match(&gimg_codec_pnm, data, size, 0, st, message, &mem);
    }
    if (st == GIMG_OK && netpbm) {
        FUZZ_CHECK(probe == GIMG_OK, "decoded what the probe refused: %s", gimg_last_error());
        FUZZ_CHECK(mem.width == info.width && mem.height == info.height &&
                       mem.channels == info.channels && mem.sample == info.sample,
                   "probe and decoder disagree");
    }

    gimg_image view;
    int viewed = -1;
    FUZZ_CHECK(gimg_pnm_view(data, size, &view, &viewed) == GIMG_OK && viewed >= 0,
               "the view failed");
    if (viewed) {
        FUZZ_CHECK(st == GIMG_OK && same_pixels(&view, &mem) && view.maxval == mem.maxval,
                   "a view of what does not decode to it (%s)", st ? gimg_last_error() : "pixels");
        FUZZ_CHECK(view.data >= data && view.data + view.stride_bytes * (size_t)view.height <=
                                            data + size,
                   "a view past the buffer");
    } else {
        FUZZ_CHECK(!view.data && !view.width, "a refused view left an image");
    }

    if (size == 0)
        return 0;
    FILE *f = fmemopen((void *)data, size, "rb");
    if (!f) {
        gimg_image_free(&mem);
        return 0;
    }
    for (size_t n = 0;; n++) {
        FUZZ_CHECK(n <= size, "the stream reader returned more images than bytes");
        gimg_image im;
        fuzz_clear_error();
        gimg_status sst = gimg_read_pnm_stream(f, &im);
        fuzz_check_failure(sst, "gimg_read_pnm_stream");
        if (n == 0 && st == GIMG_OK && netpbm)
            FUZZ_CHECK(sst == GIMG_OK && im.data && same_pixels(&im, &mem),
                       "the stream's first image differs from the buffer's (%s)",
                       sst ? gimg_last_error() : "pixels");
        if (sst != GIMG_OK || !im.data)
            break;
        gimg_image_free(&im);
    }
    fclose(f);
    gimg_image_free(&mem);
    return 0;
}
