/*
 * jpeg_internal.h — what codec_jpeg.c (libjpeg-turbo) offers the GPU
 * codecs (gpu_jpeg.c, driver.c): a JPEG's header read without its pixels,
 * whether the GPU's decoders take it, and the headers (JFIF, metadata) put
 * on a bitstream the GPU's encoder made. Compiled in every build.
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

/* write.c: writes a bitstream of the GPU's encoder to path ("-": standard
 * output) as gimg_write writes a JPEG: meta as the JPEG codec gets it
 * (--strip, what does not fit dropped and reported), the headers by
 * gimg_jpeg_with_headers, the file replaced atomically. */
gimg_status gimg_write_jpeg_bits(const char *path, const unsigned char *bits, size_t len,
                                 gimg_meta *meta, const gimg_write_opts *o);

/* The chroma subsampling encode gives an RGB image under o (AUTO: 4:4:4
 * at quality 90 and above, else 4:2:0), as GIMG_NVJPEG_CSS_444, _422 or
 * _420, for the GPU's encoder to give the same. */
int gimg_jpeg_subsampling(const gimg_write_opts *o);

#endif
