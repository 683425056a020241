/*
 * codec.h — the codec table: one row per image format, one file per codec
 * (lib/codec_<name>.c), as libvips' foreign/. read.c and write.c dispatch
 * through the table only; adding a format is a file and a row (format.c).
 *
 *   format   codec file       library            reads / writes
 *   JPEG     codec_jpeg.c     libjpeg-turbo      yes / yes
 *   PNG      codec_png.c      libspng / ours+libdeflate  yes / yes
 *   TIFF     codec_tiff.c     libtiff            yes / yes
 *   WebP     codec_webp.c     libwebp            yes / yes
 *   GIF      codec_gif.c      giflib             yes (first frame) / no
 *   BMP, TGA, HDR  codec_stb.c  stb_image(_write) yes / yes
 *   PNM, PAM, PFM  codec_pnm.c  ours (pnm.c)      yes / yes
 *
 * The contract every codec keeps:
 *  - probe reads header facts only: no pixel decoding, no large allocation.
 *  - decode checks the header's size with gimg_check_size() (which applies
 *    --max-pixels) before any allocation that grows with the image, and
 *    bounds its time: a file may not make it work without limit (e.g.
 *    JPEG's scan count). On success *out owns a tightly packed or strided
 *    image (gimg_image_alloc) whose every byte was written by the decoder;
 *    on failure *out is zeroed and one message is recorded with gimg_fail()
 *    (GIMG_E_FORMAT for a bad file, GIMG_E_LIMIT, GIMG_E_NOMEM), naming the
 *    problem ("corrupt JPEG: ...", "truncated TIFF ..."), never the path.
 *  - encode receives an image already converted to the layout that
 *    `layout` asked for (write.c converts and reports what was lost), and
 *    returns a malloc'd buffer the caller frees.
 *  - Codecs are thread-safe: the batch decodes and encodes on many threads.
 */
#ifndef GIMG_CODEC_H
#define GIMG_CODEC_H

#include "gimg.h"

typedef struct gimg_codec {
    gimg_format format;
    const char *name;        /* for messages: "JPEG" */
    /* Extensions, lower case, space-separated; the first is the one
     * outputs named by DIR/ and -f get ("jpg jpeg jpe"). */
    const char *extensions;
    /* 1 if files may hold several images (o->page > 0 is asked only of
     * such rows: read.c refuses it for the others). */
    int multi_page;
    /* 1 if buf starts as this format's files do. TGA has no magic number:
     * its row checks the header's plausibility and is tried last. */
    int (*sniff)(const unsigned char *buf, size_t len);
    /* Header facts of page o->page without decoding the pixels; sets
     * info->pages (1 for single-image formats; read.c sets it when left 0).
     * A page past the last is GIMG_E_FORMAT ("TIFF has 3 pages: no page 5"). */
    gimg_status (*probe)(const unsigned char *buf, size_t len, const gimg_read_opts *o,
                         gimg_info *info);
    /* Decodes page o->page. NULL when the format is not read. */
    gimg_status (*decode)(const unsigned char *buf, size_t len, const gimg_read_opts *o,
                          gimg_image *out);
    /* The layout the format stores an image of *channels channels and
     * *sample samples in: updates both (e.g. JPEG: alpha dropped, 8-bit).
     * NULL when the format is not written. */
    void (*layout)(int *channels, gimg_sample *sample);
    gimg_status (*encode)(const gimg_image *im, const gimg_write_opts *o, unsigned char **buf,
                          size_t *len);
    /* The metadata the format holds (GIMG_META_* bits): decode fills
     * out->meta with those the file has (NULL if none); encode writes
     * those of im->meta (which may be NULL). write.c drops the others,
     * and all of them under --strip, before encode sees the image. */
    unsigned meta;
    /* Which maxvals (gimg_image.maxval) encode receives as they are:
     * GIMG_MAXVAL_FULL: none, write.c rescales such images to the full
     * range first; GIMG_MAXVAL_ANY: any (PNM, PAM); GIMG_MAXVAL_BITS:
     * 2^b - 1 only (PNG's sBIT, TIFF's BitsPerSample), others rescaled. */
    int maxval_rule;
    /* Optional: the kinds of m the format holds but cannot hold at m's
     * size (JPEG: a marker holds 64 KiB), dropped as the others are. */
    unsigned (*unfit_meta)(const gimg_meta *m);
    /* Optional, for band streaming (lib/band.h): page o->page decoded row
     * by row, in order, giving what decode gives, byte for byte, band by
     * band. rows_open checks what decode checks before its allocation
     * (the size limits with gimg_check_size) and sets *header to the
     * image's layout and maxval (data NULL; meta NULL or what precedes
     * the pixels, owned by the caller). *rows NULL with GIMG_OK: this
     * file cannot be read so (an interlaced PNG), decode it whole.
     * rows_read fills the next band->height rows (at least 1, no more
     * than are left) of band, a buffer of header's layout that the caller
     * owns, or points band->data and stride_bytes at them where buf holds
     * them as they are (PNM in place); with the last row it reads on to
     * the end as decode does (a file cut after its image is refused), and
     * may set band->meta to metadata that follows the pixels (PNG's
     * chunks after IDAT), which the caller then owns.
     * Errors as decode's, the same messages; after one, only rows_close.
     * rows_close frees the state (any time, NULL too). */
    gimg_status (*rows_open)(const unsigned char *buf, size_t len, const gimg_read_opts *o,
                             gimg_image *header, void **rows);
    /* Optional: 1 when rows_read's last band brings metadata the header
     * lacked (a PNG with chunks after its image data); NULL: never. */
    int (*rows_meta_follows)(const void *rows);
    gimg_status (*rows_read)(void *rows, gimg_image *band);
    void (*rows_close)(void *rows);
    /* Optional, for band streaming (lib/band.h): an image written band by
     * band, the file's bytes what encode gives for the whole image, byte
     * for byte. wrows_open takes the image as encode would (data NULL:
     * its size, layout, maxval and metadata, converted as write.c
     * converts) and gives the file's first bytes; wrows_put takes the
     * next rows (a band of the layout, in order, any stride) and gives
     * the bytes they complete, with the image's last row the rest of the
     * file. The bytes given (*bytes, *len; possibly none) are the
     * state's, valid until its next call. Errors as encode's; after one,
     * only wrows_close, which frees the state (NULL too). */
    gimg_status (*wrows_open)(const gimg_image *layout, const gimg_write_opts *o, void **rows,
                              const unsigned char **bytes, size_t *len);
    gimg_status (*wrows_put)(void *rows, const gimg_image *band, const unsigned char **bytes,
                             size_t *len);
    /* Optional, with the row writer, for a format that stores each pixel
     * at a fixed place after its first bytes (PNM, PAM), so that blocks
     * of the image may be written out of order (band.h's
     * gimg_band_writer_block; no wrows_put then): the bytes of row y of
     * block, which holds the image's pixels [x0, x0 + block->width) of
     * rows [y0, y0 + block->height), as the file holds them (*bytes,
     * *len: the block's own where they are already, else the state's,
     * valid until its next call), and where they go in the file (*at). */
    gimg_status (*wrows_place)(void *rows, const gimg_image *block, int x0, int y0, int y,
                               const unsigned char **bytes, size_t *len, uint64_t *at);
    void (*wrows_close)(void *rows);
} gimg_codec;

enum { GIMG_MAXVAL_FULL = 0, GIMG_MAXVAL_ANY, GIMG_MAXVAL_BITS };

/* The table's rows (each defined in its codec file). */
extern const gimg_codec gimg_codec_jpeg, gimg_codec_png, gimg_codec_tiff, gimg_codec_webp,
    gimg_codec_gif, gimg_codec_bmp, gimg_codec_tga, gimg_codec_hdr, gimg_codec_pnm,
    gimg_codec_pam, gimg_codec_pfm;

/* 1 (the default): codec_png.c decodes the image data of a PNG whose
 * IDAT chunks are one run itself (png_idat.c); 0: with libspng, as it
 * did before. For tests (unit_codec_png holds the two to the same
 * answers); set it before decoding, not while. */
extern int gimg_png_own_idat;

/* The row of format f, or NULL (GIMG_FMT_UNKNOWN). */
const gimg_codec *gimg_codec_of(gimg_format f);
/* The row whose magic buf starts with, or NULL. */
const gimg_codec *gimg_codec_sniff(const unsigned char *buf, size_t len);

/* Helpers for codec files (meta.c): each takes a copy of p[0 .. n-1]
 * into *m, creating *m when NULL. gimg_meta_add_exif checks the block
 * (its header, IFD0 and the Exif IFD within it, no loops) and sets the
 * orientation from it; a block that fails is dropped with m->warning
 * saying why, not an error. Errors: GIMG_E_NOMEM only. */
gimg_status gimg_meta_add_icc(gimg_meta **m, const unsigned char *p, size_t n);
gimg_status gimg_meta_add_exif(gimg_meta **m, const unsigned char *p, size_t n);
gimg_status gimg_meta_add_xmp(gimg_meta **m, const unsigned char *p, size_t n);
/* Appends a text chunk (copies of the strings; language and
 * translated_keyword may be NULL). */
gimg_status gimg_meta_add_text(gimg_meta **m, const char *keyword, const char *text,
                               size_t text_bytes, const char *language,
                               const char *translated_keyword, int international,
                               int compressed);
/* Removes the kinds (GIMG_META_* bits) from m. */
void gimg_meta_drop(gimg_meta *m, unsigned kinds);
/* Records a warning in *m (the first one wins), creating *m when NULL. */
void gimg_meta_warn(gimg_meta **m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A minimal EXIF block holding only the orientation (for a format that
 * keeps it only in EXIF when the source had no EXIF block, e.g. TIFF to
 * JPEG). malloc'd; NULL when out of memory. */
unsigned char *gimg_exif_minimal(int orientation, size_t *bytes);

/* Helpers for codec files. */
static inline uint32_t gimg_be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint32_t gimg_le32(const unsigned char *p)
{
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}
static inline unsigned gimg_le16(const unsigned char *p) { return (unsigned)p[1] << 8 | p[0]; }

/* The pixels a decoder may composite to give one page of an animation
 * (GIF, WebP frames drawn on a canvas): factor times the larger of one
 * canvas and the pixel limit, the limit counted at most
 * GIMG_ANIMATION_BASE_PIXELS, so that the default (no pixel limit) still
 * bounds the time a small file of many frames may cost. */
#define GIMG_ANIMATION_BASE_PIXELS ((uint64_t)1 << 28)
static inline uint64_t gimg_animation_work_pixels(uint64_t canvas, unsigned factor)
{
    uint64_t base = gimg_max_pixels();
    if (base > GIMG_ANIMATION_BASE_PIXELS)
        base = GIMG_ANIMATION_BASE_PIXELS;
    if (canvas > base)
        base = canvas; /* below 2^48: no overflow */
    return base * factor;
}

#endif
