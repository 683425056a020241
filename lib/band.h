/*
 * band.h — images read band by band, for images too large to hold whole
 * (issue 32; gimg(7) LARGE IMAGES). Not installed.
 *
 * An image of more than GIMG_BAND_MIN_PIXELS pixels (or, with --band-rows
 * N, one taller than N rows) is decoded N rows at a time through its
 * codec's row decoder (codec.h: rows_open, rows_read), where the format
 * has one, and handed to the tool band by band: memory holds one band,
 * not the image. The bands are what decoding the whole image gives, row
 * for row, byte for byte (tests/unit_band.c holds every codec to that).
 *
 * A band of a PNM/PAM held in place is a view of the file's mapping;
 * the pages of the bands already read are let go (MADV_DONTNEED) so that
 * they do not stay in the process's memory. Other bands are decoded one
 * ahead, on a thread of the reader's, while the caller works on the last
 * (two bands' buffers).
 */
#ifndef GIMG_BAND_H
#define GIMG_BAND_H

#include "gimg.h"

#include <stdint.h>

/* Images of more pixels than this are read in bands by default: 64 MP
 * (a 192 MB RGB image), as libvips' threshold for its own disc caching
 * is of the same order. */
#define GIMG_BAND_MIN_PIXELS ((uint64_t)64 << 20)
/* A default band's bytes (at least one row): 1 MiB a thread, from 4 to
 * 16 MiB. On a 2-core VM at 12000^2, bands of 4 MB took the time of 16 MB
 * ones with a third of the memory (gconv PNG to PNG 69 MB against 155,
 * gtranspose rot90 PPM 19 against 66); on the 16 cores of an H100 host
 * they made gconv on the CPU 5-15% slower, its threads sharing fewer rows
 * (RESULTS.md, stop 44). */
#define GIMG_BAND_BYTES_MIN ((size_t)4 << 20)
#define GIMG_BAND_BYTES_MAX ((size_t)16 << 20)
#define GIMG_BAND_BYTES_PER_THREAD ((size_t)1 << 20)
size_t gimg_band_bytes(void);

/* A job in bands holds about this many bands' bytes (read-ahead, the
 * work's rows, the writer's two buffers): a band takes at most the memory
 * budget / GIMG_BAND_SHARE. */
#define GIMG_BAND_SHARE 8

/* The rows of a band for an image of info's layout: --band-rows's
 * band_rows when it is > 0 and less than the height; otherwise the
 * default band when the image has more than GIMG_BAND_MIN_PIXELS pixels
 * or its whole-image job (whole_bytes: what the tool holds for it) is
 * over the memory budget (gimg_max_memory), a band then of at most the
 * budget / GIMG_BAND_SHARE; 0 (read it whole) otherwise. */
int gimg_band_rows(const gimg_info *info, int band_rows, uint64_t whole_bytes);

typedef struct gimg_band_reader gimg_band_reader;

/* Opens page o->page (o may be NULL) of buf for reading in bands of
 * `rows` rows (>= 1). *header gets the image's layout, maxval and what
 * metadata precedes the pixels (data NULL; its meta is the caller's to
 * free). *r NULL with GIMG_OK: the file has no row decoder (its format,
 * or its variant: an interlaced PNG): decode it whole. mapped: buf is a
 * file mapping (gimg_slurp's) whose pages may be let go once read. buf
 * must outlive the reader. Errors as decoding's. */
gimg_status gimg_band_open(const unsigned char *buf, size_t len, int mapped,
                           const gimg_read_opts *o, int rows, gimg_image *header,
                           gimg_band_reader **r);
/* Before the first band: bands of `rows` rows (>= 1) from then on, for a
 * caller that finds, once its output is known, that larger bands pay. */
gimg_status gimg_band_set_rows(gimg_band_reader *r, int rows);
/* The next band: *band holds rows [*y0, *y0 + band->height) of the image
 * (a view, valid until the next call; band->meta NULL); band->height is 0
 * after the last band. Errors as decoding's; then only close. */
gimg_status gimg_band_next(gimg_band_reader *r, gimg_image *band, int *y0);
/* 1 when this file's metadata follows some of its pixels (a PNG with
 * chunks after its image data): the header then has none of it, and the
 * last band brings it all (gimg_band_take_meta). */
int gimg_band_meta_follows(const gimg_band_reader *r);
/* After the last band: the metadata of a file whose metadata follows its
 * pixels, or NULL; the caller owns it. */
gimg_meta *gimg_band_take_meta(gimg_band_reader *r);
/* Frees r (NULL too). */
void gimg_band_close(gimg_band_reader *r);

/*
 * An output written band by band, where its format's codec has a row
 * writer (codec.h's wrows_*: PNM, PAM, PNG), into a file put in place at
 * the end as gimg_write puts one (no half-written file). The bytes are
 * what gimg_write writes for the whole image. open gives *w NULL
 * (GIMG_OK) where the output cannot be written so: standard output
 * ("-"), another format, an image the format would first convert (alpha
 * in a PNM, a float PAM or PNG, a maxval a PNG rescales), or a format
 * that holds metadata when layout's is not complete yet (meta_complete
 * 0: a PNG's chunks after its pixels); the caller then writes the whole
 * image. layout: the image's size and layout, and its metadata (borrowed
 * until close); rows come in order, each band of the image's layout (its
 * maxval, which a PNM header states, is the first band's); they are
 * copied, and encoded and written by a thread of the writer's while the
 * caller computes the next (a failure there is reported by the next
 * call, or by close). close commits the file when every row was written
 * and commit is 1, else removes it; it frees w (NULL too).
 */
typedef struct gimg_band_writer gimg_band_writer;
gimg_status gimg_band_writer_open(const char *path, const gimg_image *layout, int meta_complete,
                                  const gimg_write_opts *o, gimg_band_writer **w);
gimg_status gimg_band_writer_rows(gimg_band_writer *w, const gimg_image *band);
gimg_status gimg_band_writer_close(gimg_band_writer *w, int commit);

/*
 * Or placed: an output whose rows do not come in order (a rotation's
 * columns, a flip's rows from the bottom) written in blocks, each where
 * it goes, where the format stores every pixel at a fixed place (codec.h's
 * wrows_place: PNM, PAM) and the output is a file of its own (not a
 * device, a FIFO or standard output): places says whether w can. block
 * holds the image's pixels [x0, x0 + block->width) of rows [y0, y0 +
 * block->height); the blocks, of the image's layout and maxval, must
 * cover it once. A block is not copied: a thread of the writer's writes
 * it while the caller computes the next, and reads it until the next
 * call of block, or sync, which waits for it (a failure comes with the
 * next call, or close), or close. Rows and blocks are not mixed: a
 * writer that has had rows does not place. close commits the file when
 * every pixel was placed.
 */
int gimg_band_writer_places(const gimg_band_writer *w);
gimg_status gimg_band_writer_block(gimg_band_writer *w, const gimg_image *block, int x0, int y0);
void gimg_band_writer_sync(gimg_band_writer *w);
/* 1 when a call of block failed (the output's fault, for messages). */
int gimg_band_writer_failed(const gimg_band_writer *w);

#endif
