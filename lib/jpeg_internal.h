/*
 * jpeg_internal.h — what codec_jpeg.c (libjpeg-turbo) offers the GPU
 * codecs (gpu_jpeg.c, driver.c): a JPEG's header read without its pixels,
 * whether the GPU's decoders take it, and the headers (JFIF, metadata) put
 * on a bitstream the GPU's encoder made; and jpeg_strips.c's cutting of a
 * file at its restart markers, which both decoders use. Compiled in every
 * build.
 */
#ifndef GIMG_JPEG_INTERNAL_H
#define GIMG_JPEG_INTERNAL_H

#include "gimg.h"

/* What the GPU decoders need to know of a JPEG. */
typedef struct {
    /* NULL when nvJPEG's hardware decoder (and its other backends) take
     * the file; otherwise why not, for -v: "progressive", "CMYK", ... */
    const char *gpu_refusal;
    int subsampling;   /* GIMG_NVJPEG_CSS_* (nvjpeg_api.h) when taken */
} gimg_jpeg_facts;

/*
 * Reads buf's header as decoding does (the same checks, --max-pixels
 * included, and the same metadata) without decoding the pixels: *shell
 * gets the layout decoding would give (8-bit gray or RGB), its meta, and
 * data NULL; the caller frees it with gimg_image_free. The GPU decoders
 * take a file that is baseline or extended sequential Huffman-coded
 * 8-bit, of 1 component (1x1) or YCbCr (4:4:4, 4:2:2, 4:2:0 or 4:4:0), in
 * one scan that runs whole to EOI (restart markers in sequence, no
 * marker inside): so that a file cut short is refused by libjpeg-turbo on
 * every path, never half-decoded by the GPU. Errors as decoding's.
 */
gimg_status gimg_jpeg_read_header(const unsigned char *buf, size_t len, gimg_image *shell,
                                  gimg_jpeg_facts *facts);

/*
 * bits, a JPEG file from another encoder (the GPU's), with the headers
 * this codec's encoder writes for meta (which may be NULL) in place of the
 * APPn and COM markers the file starts with: JFIF with meta's resolution,
 * then EXIF, XMP and the ICC profile's chunks, each left out when too
 * large for JPEG's markers as encode leaves it. So a file of ours and of
 * the GPU's differ only from the quantisation tables on. *out is
 * malloc'd. Errors: GIMG_E_FORMAT (bits is not a JPEG), GIMG_E_NOMEM.
 */
gimg_status gimg_jpeg_with_headers(const unsigned char *bits, size_t len, const gimg_meta *meta,
                                   unsigned char **out, size_t *out_len);
/* The same file in two parts, without copying bits: *head (malloc'd: SOI
 * and the headers) and then bits from *rest_at to its end. */
gimg_status gimg_jpeg_headers(const unsigned char *bits, size_t len, const gimg_meta *meta,
                              unsigned char **head, size_t *head_len, size_t *rest_at);

/* write.c: writes a bitstream of the GPU's encoder to path ("-": standard
 * output) as gimg_write writes a JPEG: meta as the JPEG codec gets it
 * (--strip, what does not fit dropped and reported), the headers by
 * gimg_jpeg_with_headers, the file replaced atomically. */
gimg_status gimg_write_jpeg_bits(const char *path, const unsigned char *bits, size_t len,
                                 gimg_meta *meta, const gimg_write_opts *o);

/*
 * jpeg_strips.c: a JPEG cut at its restart markers into strips of whole
 * MCU rows, each a JPEG of its own whose rows are the image's, for one
 * image decoded on several threads or GPU engines at once (its head
 * comment says why that is exact, and which files qualify).
 *
 * gimg_jpeg_strips_plan walks buf (which must outlive the plan): 1 when it
 * can be cut in two or more steps of step_rows rows (the last may be
 * shorter), 0 otherwise (also when out of memory: decode it whole).
 * Strip k of n (gimg_jpeg_strip_span) is the image's rows first_row ..
 * first_row + rows - 1; its file holds steps first_step .. end_step - 1,
 * whose first skip_rows rows (and any past `rows`) are the overlap that
 * vertical chroma upsampling needs, to be thrown away. Its file is
 * gimg_jpeg_strip_bytes long, written by gimg_jpeg_strip_write, and
 * decodes to gimg_jpeg_strip_height rows.
 */
typedef struct {
    const unsigned char *file;
    int width, height;
    int mcu_height;          /* pixels */
    int step_rows;           /* rows between two places the scan may be cut */
    int steps;
    int overlap;             /* vertical chroma upsampling: strips decode a step more each side */
    int intervals_per_step;
    size_t *start, *stop;    /* [s]: where step s's data starts; where step s-1's ends */
    unsigned char *header;   /* SOI and the kept segments up to and with SOS */
    size_t header_bytes, height_at;
} gimg_jpeg_strips;

int gimg_jpeg_strips_plan(const unsigned char *buf, size_t len, gimg_jpeg_strips *p);
void gimg_jpeg_strips_free(gimg_jpeg_strips *p);
void gimg_jpeg_strip_span(const gimg_jpeg_strips *p, int k, int n, int *first_step,
                          int *end_step, int *first_row, int *rows, int *skip_rows);
size_t gimg_jpeg_strip_bytes(const gimg_jpeg_strips *p, int first_step, int end_step);
int gimg_jpeg_strip_height(const gimg_jpeg_strips *p, int first_step, int end_step);
void gimg_jpeg_strip_write(const gimg_jpeg_strips *p, int first_step, int end_step,
                           unsigned char *out);

/* The next marker from *at, walked as libjpeg walks a file (bytes between
 * segments and fill bytes skipped, markers of no length stepped over: a
 * stuffed byte, TEM, RSTn): 1 with *marker, *at then at its length field;
 * 0 at the end of the file. */
int gimg_jpeg_next_marker(const unsigned char *buf, size_t len, size_t *at, unsigned *marker);

/* 1 if the entropy-coded data from `at` runs whole to EOI: stuffed bytes
 * and restart markers in sequence only, no other marker (a second scan,
 * DNL), not cut short; *eoi (if not NULL) then EOI's place. on_restart
 * (if not NULL) hears of each marker: the k-th (from 0), its 0xFF's place
 * and the place after it. */
int gimg_jpeg_scan_walk(const unsigned char *buf, size_t len, size_t at,
                        void (*on_restart)(void *user, long k, size_t ff, size_t next), void *user,
                        size_t *eoi);

/* The chroma subsampling encode gives an RGB image under o (AUTO: 4:4:4
 * at quality 90 and above, else 4:2:0), as GIMG_NVJPEG_CSS_444, _422 or
 * _420, for the GPU's encoder to give the same. */
int gimg_jpeg_subsampling(const gimg_write_opts *o);

#endif
