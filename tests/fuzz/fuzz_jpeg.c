/*
 * fuzz_jpeg — the JPEG codec (lib/codec_jpeg.c: libjpeg-turbo and our
 * header walk, scan limit and warning rules), through fuzz_codec.h's
 * checks; a decoded image is 8-bit gray or RGB, and encodes again, under
 * options drawn from the input (quality, subsampling, progressive), into a
 * JPEG that reads back with the same layout. The GPU codecs' parts that
 * run on the CPU (lib/jpeg_internal.h): the header read without the
 * pixels agrees with decoding wherever decoding succeeds, and the headers
 * put on the input as if the GPU's encoder had made it. The strips a file
 * with restart markers is cut in (lib/jpeg_strips.c): their rows cover the
 * image's once, and where the whole file decodes, each strip's file
 * decodes to the whole image's rows.
 */
#include "fuzz_codec.h"
#include "jpeg_internal.h"

#include <stdlib.h>
#include <string.h>

/* The strips of data in n parts: the spans tile the image, and each
 * strip's file, decoded, holds the rows of whole (when it decoded). */
static void check_strips(const gimg_jpeg_strips *p, int n, const gimg_image *whole)
{
    int next_row = 0;
    for (int k = 0; k < n; k++) {
        int a, b, first_row, rows, skip;
        gimg_jpeg_strip_span(p, k, n, &a, &b, &first_row, &rows, &skip);
        FUZZ_CHECK(first_row == next_row && rows > 0 && a <= b && b <= p->steps &&
                       skip + rows <= gimg_jpeg_strip_height(p, a, b),
                   "strip %d of %d: rows %d+%d, steps %d..%d", k, n, first_row, rows, a, b);
        next_row = first_row + rows;
        if (!whole->data)
            continue;
        const size_t bytes = gimg_jpeg_strip_bytes(p, a, b);
        unsigned char *file = malloc(bytes);
        FUZZ_CHECK(file != NULL, "out of memory");
        gimg_jpeg_strip_write(p, a, b, file);
        gimg_image part;
        gimg_read_opts o = {0};
        FUZZ_CHECK(gimg_codec_jpeg.decode(file, bytes, &o, &part) == GIMG_OK,
                   "strip %d of %d does not decode: %s", k, n, gimg_last_error());
        const size_t row = (size_t)whole->width * (size_t)whole->channels;
        for (int y = 0; y < rows; y++)
            FUZZ_CHECK(!memcmp(gimg_row(&part, skip + y), gimg_row(whole, first_row + y), row),
                       "strip %d of %d: row %d differs", k, n, first_row + y);
        gimg_image_free(&part);
        free(file);
    }
    FUZZ_CHECK(next_row == p->height, "the strips end at row %d of %d", next_row, p->height);
}

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
    gimg_jpeg_strips p;
    if (gimg_jpeg_strips_plan(data, size, &p)) {
        FUZZ_CHECK(p.steps >= 2, "a plan of %d steps", p.steps);
        check_strips(&p, 2, &im);
        if (p.steps <= 16)
            check_strips(&p, p.steps, &im);
        gimg_jpeg_strips_free(&p);
    }
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
