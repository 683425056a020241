/*
 * fuzz_rows.h — the codecs' row decoders (lib/codec.h: rows_open,
 * rows_read; lib/band.h), held to their codec's decode by the targets of
 * the codecs that have one (fuzz_codec.h's, fuzz_pnm).
 */
#ifndef GIMG_FUZZ_ROWS_H
#define GIMG_FUZZ_ROWS_H

#include "codec.h"
#include "fuzz.h"

/* The row decoder (codec.h: rows_open, rows_read), where row has one, on
 * the same bytes and page as decode, in bands of 3 rows: it refuses what
 * decode refused, with its status and message (at the opening or at some
 * band), and gives what decode gave (st GIMG_OK, *im), row for row, with
 * its maxval, and its metadata (in the header, or with a band). Nothing else is asked of it: it may say that a file has no
 * row decoder (an interlaced PNG). */
static inline void fuzz_rows_match(const gimg_codec *row, const uint8_t *data, size_t size,
                                   int page, gimg_status st, const char *message,
                                   const gimg_image *im)
{
    if (!row->rows_open)
        return;
    const gimg_read_opts o = {.page = page};
    gimg_image header, band;
    gimg_meta *late = NULL;   /* metadata that came with a band */
    void *rows = NULL;
    memset(&header, 0, sizeof header);
    memset(&band, 0, sizeof band);
    fuzz_clear_error();
    gimg_status got = row->rows_open(data, size, &o, &header, &rows);
    if (!got && rows && st == GIMG_OK)
        FUZZ_CHECK(header.width == im->width && header.height == im->height &&
                       header.channels == im->channels && header.sample == im->sample &&
                       header.maxval == im->maxval,
                   "rows_open's layout is not decode's");
    if (!got && rows)
        got = gimg_image_alloc(&band, header.width, header.height < 3 ? header.height : 3,
                               header.channels, header.sample);
    const size_t bytes = (size_t)header.width * gimg_pixel_bytes(&header);
    unsigned char *buffer = band.data;
    for (int y = 0; !got && rows && y < header.height; y += band.height) {
        band.data = buffer;
        band.stride_bytes = bytes;
        band.height = header.height - y < 3 ? header.height - y : 3;
        band.maxval = header.maxval;
        fuzz_clear_error();
        got = row->rows_read(rows, &band);
        if (band.meta) {
            FUZZ_CHECK(!header.meta && !late, "metadata in the header and with a band too");
            gimg_meta_free(late);
            late = band.meta;
            band.meta = NULL;
        }
        for (int i = 0; !got && st == GIMG_OK && i < band.height; i++)
            FUZZ_CHECK(memcmp(gimg_row(&band, i), gimg_row(im, y + i), bytes) == 0,
                       "rows_read's row %d is not decode's", y + i);
    }
    if (rows && !got && st == GIMG_OK) {
        const gimg_meta *m = header.meta ? header.meta : late;
        FUZZ_CHECK(gimg_meta_kinds(m) == gimg_meta_kinds(im->meta) &&
                       !strcmp(m ? m->warning : "", im->meta ? im->meta->warning : ""),
                   "bands' metadata (kinds %#x) is not decode's (%#x)", gimg_meta_kinds(m),
                   gimg_meta_kinds(im->meta));
    }
    gimg_meta_free(late);
    if (rows || got) {
        FUZZ_CHECK(got == st, "bands: status %d, decode's %d (%s)", (int)got, (int)st,
                   got ? gimg_last_error() : message);
        FUZZ_CHECK(st == GIMG_OK || strcmp(gimg_last_error(), message) == 0,
                   "bands: '%s', decode: '%s'", gimg_last_error(), message);
    }
    band.data = buffer;
    gimg_image_free(&band);
    gimg_meta_free(header.meta);
    row->rows_close(rows);
}

#endif
