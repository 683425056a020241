/*
 * io_internal.h — declarations shared by the image I/O files of libgimg
 * (stb_impl.c, format.c, pnm.c, png.c, read.c, write.c; orient.c's spool
 * and wire.c's memory files read and write with gimg_pio). Not installed.
 */
#ifndef GIMG_IO_INTERNAL_H
#define GIMG_IO_INTERNAL_H

#include "gimg.h"

/* ------------------------------------------------------------ format.c */

/* If buf starts like a format we recognise but do not support (PSD, PIC),
 * its name; otherwise NULL. */
const char *gimg_io_unsupported_format(const unsigned char *buf, size_t len);
/* The extension outputs of format f get (DIR/ with -f): "jpg", "png", ...;
 * NULL for UNKNOWN. Points to per-thread storage. */
const char *gimg_format_extension(gimg_format f);

/* -------------------------------------------------------------- read.c */

/* All n bytes of p written to (write) or read from fd at offset at,
 * retried where interrupted: 0, or -1 with errno set (0 where the file
 * ended first). The caller says what failed. */
int gimg_pio(int fd, void *p, size_t n, uint64_t at, int write);

/* The largest input gimg_slurp() reads (from the pixel limit; see read.c),
 * and the largest stream it reads into memory (no more than the memory
 * budget). */
size_t gimg_max_input_bytes(void);
size_t gimg_max_stream_bytes(void);
/* The failure for a stream longer than limit (gimg_max_stream_bytes's):
 * the memory budget's message where the budget set it. */
gimg_status gimg_stream_over(size_t limit);

/* Looks at what has been read of a file so far (buf[0 .. len-1], the whole
 * file when at_end): GIMG_OK to read on, or a failure (one gimg_fail) that
 * ends the read. */
typedef gimg_status (*gimg_slurp_check)(const unsigned char *buf, size_t len, int at_end,
                                        void *user);
/* gimg_slurp for any content (lists, kernel files): reads at most max_bytes
 * (0: gimg_max_input_bytes()), calling check (if not NULL) after every read
 * of a stream (pipe, device, terminal; a regular file is mapped whole, its
 * size judged first), so that an endless input stops as soon as its
 * content shows it cannot be what the caller reads. Errors as
 * gimg_slurp's: GIMG_E_FORMAT is "empty file" unless check said otherwise.
 * gimg_slurp() itself is this with gimg_check_image_head(): use this one
 * for what is not an image. */
gimg_status gimg_slurp_checked(const char *path, size_t max_bytes, gimg_slurp_check check,
                               void *user, unsigned char **buf, size_t *len);
/* The bytes of an image's start that gimg_check_image_head() waits for
 * (every codec's sniff and PIC's magic at offset 88 fit in them). */
#define GIMG_SNIFF_BYTES 128
/* GIMG_OK while buf (len bytes read so far, all of them when at_end) may
 * start an image of the codec table; otherwise "PSD format not supported",
 * "unrecognised image format". gimg_slurp() and the driver's reading of
 * standard input refuse a stream with it before reading the rest. */
gimg_status gimg_check_image_head(const unsigned char *buf, size_t len, int at_end);
/* gimg_decode_page of a whole file gimg_slurp() read (buf, len), which
 * may take the buffer over instead of copying it: an 8-bit binary PNM or
 * PAM whose samples are already the image's (not a bitmap, in 0..maxval)
 * becomes an image whose rows are the file's own, in place (*kept = 1:
 * the image owns buf now and gimg_image_free() unmaps it; the caller must
 * not free it). Otherwise it decodes as gimg_decode_page does (*kept = 0).
 * No copy, and no page touched that the work does not read: the pixels
 * come from the page cache as they are used. */
gimg_status gimg_decode_in_place(unsigned char *buf, size_t len, const gimg_read_opts *o,
                                 gimg_image *out, int *kept);

/* --------------------------------------------------------------- pnm.c */

/* Header facts of the first image of a PNM/PAM/PFM buffer. */
gimg_status gimg_pnm_probe(const unsigned char *buf, size_t len, gimg_info *info);
/* Decodes the first image of a PNM/PAM/PFM buffer (trailing data ignored). */
gimg_status gimg_pnm_decode(const unsigned char *buf, size_t len, gimg_image *out);
/* The first image of buf as a view of buf itself, where its raster is
 * already the image's layout: binary (P5, P6, P7), 8-bit samples, none
 * past the maxval (a maxval below 255 is kept, as decoding keeps it).
 * *viewed = 1 then, out->data pointing into buf (which out does not own:
 * out->mapping is the caller's to set); otherwise *viewed = 0 and out
 * zeroed, for gimg_pnm_decode to decode or refuse the file. */
gimg_status gimg_pnm_view(const unsigned char *buf, size_t len, gimg_image *out, int *viewed);
/* The header of im as a PNM, PAM or PFM file, after checking that the
 * format holds its layout: *len bytes written to hdr. */
#define GIMG_PNM_HEADER_MAX 160
gimg_status gimg_pnm_header(const gimg_image *im, gimg_format f, char *hdr, size_t cap,
                            size_t *len);
/* The bytes of one of im's rows in a PNM, PAM or PFM file (0 if that
 * overflows), and row y of im as the file holds it (o: that many bytes).
 * gimg_pnm_encode is the header, then these rows (PFM: from the last). */
size_t gimg_pnm_row_bytes(const gimg_image *im);
void gimg_pnm_encode_row(const gimg_image *im, int y, unsigned char *o);
/* Encodes im, whose layout must already suit f:
 *   GIMG_FMT_PNM: 1 or 3 channels, U8 or U16 (P5/P6, maxval gimg_image_max(im))
 *   GIMG_FMT_PAM: 1-4 channels, U8 or U16 (P7 with a named TUPLTYPE)
 *   GIMG_FMT_PFM: 1 or 3 channels, F32 (Pf/PF, little-endian)
 * into a malloc'd buffer the caller frees. */
gimg_status gimg_pnm_encode(const gimg_image *im, gimg_format f,
                            unsigned char **buf, size_t *len);

/* --------------------------------------------------------------- png.c */

/* Encodes a U8 or U16 image of 1-4 channels (any stride) as PNG at level
 * 0-12 (see codec_png.c: segments coded by our entropy coder or zlib),
 * into a malloc'd buffer the caller frees: the bytes the codec's row
 * writer gives for the image in bands. */
gimg_status gimg_png_encode(const gimg_image *im, int level,
                            unsigned char **buf, size_t *len);

/* ------------------------------------------------------------- write.c */

/* The words of the set bits of `bits` (bit i: words[i]), joined by ", ",
 * into buf; returns buf. */
const char *gimg_io_bits_text(unsigned bits, const char *const *words, unsigned n_words,
                              char *buf, size_t size);

/* Records, for the tools' -v, the kinds of m's metadata that an output of
 * format f loses (what gimg_write records when it writes such a file). */
void gimg_io_note_dropped_meta(const gimg_meta *m, const gimg_write_opts *o, gimg_format f);
/* The metadata codec c gets for m (NULL: none), as gimg_encode gives it:
 * *owned = 1 when it is a copy the caller frees; what c loses is
 * recorded as gimg_io_note_dropped_meta records it. */
struct gimg_codec;
gimg_status gimg_io_meta_for(gimg_meta *m, const struct gimg_codec *c, const gimg_write_opts *o,
                             gimg_meta **out, int *owned);
/* 1 when an encoder under maxval rule `rule` (codec.h) receives im's
 * maxval as it is, 0 when write.c would rescale im first. */
int gimg_io_maxval_kept(const gimg_image *im, int rule);

/* A file written piece by piece (an image written in bands, band.h), as
 * gimg_write_file writes one: into a temporary beside it (registered for
 * the signal handler), renamed over it by commit, keeping the mode and
 * owner of a file it replaces; a device or FIFO is written in place. Not
 * standard output ("-": GIMG_E_USAGE). abort removes the temporary. Both
 * commit and abort free f. */
typedef struct gimg_out_file gimg_out_file;
gimg_status gimg_out_open(const char *path, gimg_out_file **f);
gimg_status gimg_out_write(gimg_out_file *f, const void *buf, size_t len);
/* len bytes at offset at (an output that is a file of its own: not a
 * device, a FIFO or standard output). */
gimg_status gimg_out_pwrite(gimg_out_file *f, const void *buf, size_t len, uint64_t at);
/* Room for bytes in f (not a device, a FIFO or standard output), its
 * size from then on: GIMG_E_IO where the file system has none. Where it
 * cannot reserve (no fallocate), GIMG_OK: writing will tell. */
gimg_status gimg_out_reserve(gimg_out_file *f, uint64_t bytes);
gimg_status gimg_out_commit(gimg_out_file *f);
void gimg_out_abort(gimg_out_file *f);

/* The registry of temporary files the signal handler removes. Registering
 * returns a slot; the registry grows as needed (-1 only when it cannot
 * grow: the file is then simply not cleaned up on a signal). Exposed for
 * the unit tests. */
int gimg_io_register_temp(const char *path);
void gimg_io_unregister_temp(int slot);
/* How many temporary files the registry holds now (it grows as needed). */
int gimg_io_temp_capacity(void);

#endif
