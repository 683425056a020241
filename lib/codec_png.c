/*
 * codec_png.c — PNG: reading with libspng 0.7.3 (Debian's libspng-dev)
 * and, for the image data of most files, png_idat.c;
 * writing with our own encoder on libdeflate (below), for 8- and 16-bit
 * images of 1-4 channels.
 *
 * Reading
 *
 * libspng is the decoder libvips uses: maintained, fuzzed (OSS-Fuzz), and
 * on a 4096x4096 photo here as fast as libpng 1.6 with the same checks
 * (354 against 358 ms of CPU; 340 against 337 without the Adler-32 check
 * below): three quarters of either is zlib's inflate. It decodes
 * the samples as stored (SPNG_FMT_PNG: deinterlaced, 16-bit in host order)
 * straight into the image's buffer, without a copy; what the layout adds
 * is done in place after (expand_rows()):
 *  - every colour type and bit depth, interlaced or not; 16-bit stays
 *    16-bit;
 *  - gray of 1, 2 and 4 bits is scaled to 8 (v * 255 / (2^depth - 1)), as
 *    libpng, ImageMagick and libvips do;
 *  - a palette becomes RGB, or RGBA when there is a tRNS (the entries past
 *    tRNS's alphas opaque); a pixel index past PLTE's entries is refused
 *    (libspng 0.7.3 looks it up as black);
 *  - gray and RGB with a tRNS become gray+alpha and RGBA: alpha 0 on the
 *    pixels of tRNS's colour, opaque elsewhere, as ImageMagick and libvips
 *    decode them;
 *  - sBIT: when it gives every channel (alpha included) the same b
 *    significant bits, fewer than the bit depth of an 8- or 16-bit gray or
 *    RGB image, the samples are brought down to them (v >> (depth - b),
 *    which undoes the specification's left bit replication exactly) and
 *    the image's maxval is 2^b - 1: a 12-bit scan in a 16-bit PNG reads as
 *    0..4095, as its PGM would. Channels that disagree (RGB 5,6,5, or an
 *    8-bit alpha beside 5-bit colours) have no one maxval: sBIT is then
 *    ignored and the samples keep the full range, as they are for palettes
 *    and gray below 8 bits (scaled to 8 as above); tRNS's alpha follows
 *    the maxval (0 or 2^b - 1);
 *  - gAMA, cHRM, sRGB and the like leave the samples as they are (as in
 *    libvips and ImageMagick).
 * Metadata (out->meta): the ICC profile (iCCP), EXIF (eXIf), the XMP
 * packet (the iTXt of keyword "XML:com.adobe.xmp"), the other text chunks
 * (tEXt, zTXt, iTXt, in file order, with their kind, language and
 * translated keyword) and the resolution (pHYs in pixels per metre, as
 * dpi = ppm * 0.0254, or the whole dpi that rounds to this ppm when there
 * is one: 11811 ppm is 300 dpi, not 299.9994; a pHYs of unknown unit
 * gives none). Malformed
 * metadata never refuses the file: it is dropped with a warning
 * (out->meta->warning) and the image decoded. libspng 0.7.3 parses these
 * chunks itself, and drops without a word one that is malformed,
 * misplaced, repeated (a second iCCP or eXIf) or whose CRC does not match:
 * the chunks are counted from the file (count_meta_chunks()) and what it
 * dropped is reported. meta.c caps what it keeps: an ICC profile, EXIF
 * block or XMP packet over 16 MiB, a text over 1 MiB (after inflation),
 * an EXIF block whose IFDs point past it or loop, are dropped with a
 * warning.
 * Checks and limits:
 *  - the size, from IHDR, goes through gimg_check_size() before anything is
 *    allocated for the pixels (libspng's own limit is set to 2^24 a side);
 *  - CRCs: a critical chunk's (IHDR, PLTE, IDAT, IEND) must match, or the
 *    file is refused, naming the chunk; an ancillary chunk with a bad CRC
 *    is dropped, as libpng and libspng do by default (tRNS too: the image
 *    then decodes without its transparency). libspng checks those before
 *    the image data; we check the critical ones from there on, with
 *    libdeflate, on a second thread for large images (side_work());
 *  - the zlib stream's Adler-32 is not checked (SPNG_CTX_IGNORE_ADLER32,
 *    as libvips sets it): the IDAT CRCs, which are, cover every byte of the
 *    stream, Adler-32 included, so it could only catch an encoder that
 *    computed it wrong, and it costs 4-6% of a photo's decode (14-20 ms);
 *  - the file must be whole up to IEND's CRC: libspng stops reading IDAT
 *    where the zlib stream ends and takes an IEND cut short for whole, so
 *    the rest is read with spng_decode_chunks() and the chunk headers are
 *    walked to IEND's end; data after IEND is ignored;
 *  - an IDAT with no data and nothing after it, or data short of the last
 *    row, is refused;
 *  - ancillary chunks (text, ICC profiles, Exif), which libspng reads and
 *    keeps whether asked or not: at most 64 MiB in one chunk, 64 MiB in
 *    all (decompressed), 1000 chunks (libspng's default); past those the
 *    file is refused (GIMG_E_LIMIT), as libvips refuses it past 60 MB.
 *    libspng inflates zTXt, compressed iTXt and iCCP into a buffer it
 *    doubles from 8 KiB up to what is left of those limits, and stops with
 *    that error there: a zTXt that inflates without end costs 64 MiB at
 *    most (96 while the last doubling copies), and the time to inflate
 *    that much. A bomb below the limits (a zTXt of 20 MB of text) is
 *    inflated, then dropped with a warning, being over meta.c's 1 MiB
 *    (libspng ends a text at its first NUL: one of zeros is empty);
 *  - libspng 0.7.3 puts the pixels of interlaced 1-, 2- and 4-bit images
 *    in place by OR-ing them into its output: that is zeroed first.
 * libspng's error codes are worded for people ("corrupt PNG file: ...",
 * "truncated PNG file (cut short ...)"); it prints nothing and has no
 * warnings. One libspng context per call: thread-safe.
 * The image data of our own: in a file not interlaced whose chunks are
 * whole up to IEND and whose IDAT chunks are one run (one_idat_run()),
 * the image data is inflated and unfiltered by png_idat.c, on two threads
 * for a large image, to the samples libspng gives (twice as fast: 3.4 s
 * against 7.6-8.0 for gstats on a 16384^2 photo-like RGB PNG on a 2-core
 * VM; png_idat.c says why), and libspng reads the rest of the file: the
 * same file with its IHDR made 1x1 and its IDAT chunks replaced by one of
 * a 1x1 image (read_around()), so that the chunks around the image data
 * are checked and kept by libspng's rules, as before. Any other file is
 * libspng's alone. unit_codec_png and fuzz_png hold the two ways to the
 * same pixels, statuses and messages.
 * Bands (band.h): a non-interlaced file is also read row by row, with
 * png_idat.c or libspng's progressive decoding, to the same bytes, checks
 * and messages (rows_open_png() and below); an interlaced one is decoded
 * whole.
 *
 * Writing
 *
 * stb_image_write's PNG writer is not used: on a 12-megapixel photo its row
 * filtering alone takes about as long as our whole encode, and it has no
 * 16-bit mode. Output: IHDR; what im->meta holds (write.c has removed
 * what --strip drops) and the maxval needs, in this order: iCCP (the
 * profile named "icc", as libvips names it), sBIT, pHYs (dpi to pixels per
 * metre, rounded), eXIf, the XMP packet as an uncompressed iTXt (as the
 * XMP specification asks), then the text chunks in their order: tEXt,
 * zTXt when compressed, iTXt when international (with its language and
 * translated keyword); then IDAT (in chunks of 8 MiB), IEND. iCCP and
 * compressed texts use the output's level (0: stored).
 *
 * Samples: an image of maxval 2^b - 1 (write.c rescales other maxvals:
 * the row's rule is GIMG_MAXVAL_BITS) is stored at its own 8 or 16 bits
 * (a PNM of maxval 255 or less reads as 8-bit, above as 16-bit), scaled
 * up by left bit replication (12.5 of the PNG specification: v << 4 |
 * v >> 8 for 12 bits in 16), with an sBIT of b: readers that honour sBIT
 * (ours) get 0..2^b - 1 back exactly, the others the full range.
 *
 * Filtering: each row gets the filter whose output has the smallest sum of
 * absolute values, bytes taken as signed (the heuristic libpng and most
 * encoders use). Rows are filtered in parallel (OpenMP).
 *
 * Compression, at png_level L: the filtered rows are cut in segments of
 * 2 MiB, coded in parallel, each ending on a byte boundary (an empty
 * stored block, as zlib's sync flush ends a stretch) so that the next can
 * follow: the file is the same whatever the threads, and whether the
 * image comes whole or band by band (band.h; the row writer below).
 *  - L = 0: stored blocks.
 *  - L >= 1: our own Huffman coder (png_deflate.c), or zlib's LZ at L (9
 *    for 10 to 12), whichever is smaller; zlib only where libdeflate at L
 *    on a block of the segment says LZ may win (lz_may_win). The Huffman coder
 *    exists because photographs' filtered rows are close to noise: LZ
 *    matching finds little there, and fast LZ levels take short matches
 *    that cost more than the literals they replace; plain entropy coding
 *    is both faster and 2-15% smaller on such images (and than
 *    ImageMagick's output). On drawn or flat images LZ wins by far. zlib,
 *    not libdeflate, codes the LZ segments: libdeflate ends every stream
 *    with a final block, and a segment's stream must leave the next one
 *    room to follow.
 */
#include "codec.h"
#include "io_internal.h"
#include "png_deflate.h"
#include "png_idat.h"

#include <libdeflate.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <pthread.h>
#include <spng.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

/* Largest IDAT payload we emit (PNG allows up to 2^31 - 1): 8 MiB, for
 * readers that check a chunk's CRC as they start it (libspng) and so
 * touch all of it at once; an image read in bands then holds 8 MiB of
 * its file, not the whole stream. */
#define IDAT_MAX ((size_t)8 << 20)
/* Bytes before the zlib stream: signature, IHDR chunk, first IDAT header. */
#define HEAD ((size_t)8 + 25 + 8)

/* ------------------------------------------------------------ filtering */

static inline unsigned paeth(unsigned a, unsigned b, unsigned c)
{
    int pa = abs((int)b - (int)c);             /* |p - a| with p = a + b - c */
    int pb = abs((int)a - (int)c);             /* |p - b| */
    int pc = abs((int)a + (int)b - 2 * (int)c); /* |p - c| */
    return (pa <= pb && pa <= pc) ? a : pb <= pc ? b : c;
}

static inline unsigned mag(unsigned v)
{
    v &= 255;
    return v < 128 ? v : 256 - v;
}

/* The filter type the heuristic picks for row cur above prev. */
static int choose_filter(const unsigned char *cur, const unsigned char *prev, size_t n, size_t bpp)
{
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0;
    size_t i = 0;
    for (; i < bpp && i < n; i++) {
        unsigned x = cur[i], b = prev[i];
        s0 += mag(x);
        s1 += mag(x);
        s2 += mag(x - b);
        s3 += mag(x - (b >> 1));
        s4 += mag(x - b);
    }
    /* 32-bit partial sums (at most 4096 * 128 per stretch) keep the hot
     * loop in narrow arithmetic. */
    while (i < n) {
        size_t stop = n - i > 4096 ? i + 4096 : n;
        uint32_t t0 = 0, t1 = 0, t2 = 0, t3 = 0, t4 = 0;
#pragma omp simd reduction(+ : t0, t1, t2, t3, t4)
        for (size_t j = i; j < stop; j++) {
            unsigned x = cur[j], a = cur[j - bpp], b = prev[j], c = prev[j - bpp];
            t0 += mag(x);
            t1 += mag(x - a);
            t2 += mag(x - b);
            t3 += mag(x - ((a + b) >> 1));
            t4 += mag(x - paeth(a, b, c));
        }
        i = stop;
        s0 += t0, s1 += t1, s2 += t2, s3 += t3, s4 += t4;
    }
    uint64_t s[5] = { s0, s1, s2, s3, s4 }, best = s0;
    int type = 0;
    for (int t = 1; t < 5; t++)
        if (s[t] < best)
            best = s[t], type = t;
    return type;
}

static void apply_filter(int type, const unsigned char *cur, const unsigned char *prev, size_t n,
                         size_t bpp, unsigned char *out)
{
    size_t i, k = bpp < n ? bpp : n;
    switch (type) {
    case 0:
        memcpy(out, cur, n);
        break;
    case 1:
        memcpy(out, cur, k);
#pragma omp simd
        for (i = k; i < n; i++)
            out[i] = (unsigned char)(cur[i] - cur[i - bpp]);
        break;
    case 2:
#pragma omp simd
        for (i = 0; i < n; i++)
            out[i] = (unsigned char)(cur[i] - prev[i]);
        break;
    case 3:
        for (i = 0; i < k; i++)
            out[i] = (unsigned char)(cur[i] - (prev[i] >> 1));
#pragma omp simd
        for (i = k; i < n; i++)
            out[i] = (unsigned char)(cur[i] - ((cur[i - bpp] + prev[i]) >> 1));
        break;
    default:
        for (i = 0; i < k; i++)
            out[i] = (unsigned char)(cur[i] - prev[i]); /* paeth(0, b, 0) = b */
#pragma omp simd
        for (i = k; i < n; i++)
            out[i] = (unsigned char)(cur[i] - paeth(cur[i - bpp], prev[i], prev[i - bpp]));
        break;
    }
}

static void to_big_endian(const unsigned char *row, size_t n, unsigned char *out)
{
    const uint16_t *s = (const uint16_t *)row;
#pragma omp simd
    for (size_t k = 0; k < n / 2; k++) {
        out[2 * k] = (unsigned char)(s[k] >> 8);
        out[2 * k + 1] = (unsigned char)s[k];
    }
}

/* ------------------------------------------------------ the samples */

/* How an image's samples are stored: at their own 8 or 16 bits; samples
 * of b significant bits (maxval 2^b - 1, b below that) are scaled up by
 * left bit replication (PNG specification, 12.5: v << 4 | v >> 8 for 12
 * bits in 16), with an sBIT chunk saying b, so that readers that honour
 * sBIT shift them back exactly and the others see the full range. A
 * 16-bit image of maxval 255 or less stays 16-bit (sBIT 8 or less): it
 * reads back as it was, sample size included. */
typedef struct {
    unsigned depth;    /* stored bits a sample: 8 or 16 */
    unsigned sbit;     /* significant bits for sBIT; 0 for none */
    unsigned maxval;   /* the image's effective maxval */
    uint16_t *lut;     /* sample (at most maxval) -> stored value; NULL: stored as they are */
} png_samples;

/* v, of b bits, scaled to depth bits by repeating its bits from the top. */
static unsigned replicate_bits(unsigned v, unsigned b, unsigned depth)
{
    unsigned out = 0;
    for (int at = (int)depth - (int)b; at > -(int)b; at -= (int)b)
        out |= at >= 0 ? v << at : v >> -at;
    return out;
}

static gimg_status plan_samples(const gimg_image *im, png_samples *s)
{
    const unsigned full = im->sample == GIMG_U8 ? 255u : 65535u;
    memset(s, 0, sizeof *s);
    s->maxval = im->maxval && im->maxval < full ? im->maxval : full;
    s->depth = 8 * (unsigned)im->sample;
    if (s->maxval == full)
        return GIMG_OK;
    unsigned b = 1;
    while ((1u << b) - 1 < s->maxval)
        b++;
    /* write.c rescales other maxvals first (the row's GIMG_MAXVAL_BITS). */
    if ((1u << b) - 1 != s->maxval)
        return gimg_fail(GIMG_E_FORMAT, "PNG holds maxvals of 2^b - 1 only (sBIT), not %u",
                         s->maxval);
    s->sbit = b;
    if (!(s->lut = malloc((s->maxval + 1) * sizeof *s->lut)))
        return gimg_fail(GIMG_E_NOMEM, "out of memory encoding PNG");
    for (unsigned v = 0; v <= s->maxval; v++)
        s->lut[v] = (uint16_t)replicate_bits(v, b, s->depth);
    return GIMG_OK;
}

/* Row y as stored (n bytes, 16-bit samples big-endian): the image's own
 * row when it is stored as it is at 8 bits, else filled into work. A
 * sample over the maxval is stored as the maxval. */
static const unsigned char *stored_row(const gimg_image *im, const png_samples *s, int y,
                                       size_t n, unsigned char *work)
{
    const unsigned char *row = gimg_row(im, y);
    if (!s->lut) {
        if (im->sample == GIMG_U8)
            return row;
        to_big_endian(row, n, work);
        return work;
    }
    const size_t count = (size_t)im->width * (size_t)im->channels;
    const unsigned top = s->maxval;
    const uint16_t *lut = s->lut;
    if (im->sample == GIMG_U8) {
        for (size_t i = 0; i < count; i++)
            work[i] = (unsigned char)lut[row[i] < top ? row[i] : top];
    } else {
        const uint16_t *src = (const uint16_t *)row;
        for (size_t i = 0; i < count; i++) {
            const unsigned v = lut[src[i] < top ? src[i] : top];
            work[2 * i] = (unsigned char)(v >> 8);
            work[2 * i + 1] = (unsigned char)v;
        }
    }
    return work;
}

/* ------------------------------------------------------------ the file */

static unsigned char *put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
    return p + 4;
}

/* Frames data already at p + 8 as a chunk; returns the end of the chunk. */
static unsigned char *put_chunk(unsigned char *p, const char type[4], size_t n)
{
    put32(p, (uint32_t)n);
    memcpy(p + 4, type, 4);
    uint32_t crc = libdeflate_crc32(0, p + 4, n + 4);
    return put32(p + 8 + n, crc);
}

/* ------------------------------------------- the chunks before the data */

/* PNG's largest chunk. */
#define CHUNK_MAX ((size_t)0x7fffffff)
/* The name our iCCP chunks give their profile, as libvips names it. */
#define ICC_NAME "icc"
#define XMP_KEYWORD "XML:com.adobe.xmp"

/* The chunks written between IHDR and the image data, built before the
 * pixels are compressed so that the output can leave room for them. */
typedef struct {
    unsigned char *p;
    size_t len, cap;
    int level;                          /* the output's level, for iCCP and zTXt */
    struct libdeflate_compressor *z;    /* made when first needed */
} chunk_list;

/* Makes room for a chunk of up to n bytes of data: *data is where they go. */
static gimg_status chunk_room(chunk_list *c, size_t n, unsigned char **data)
{
    if (n > CHUNK_MAX)
        return gimg_fail(GIMG_E_LIMIT, "PNG metadata of %zu bytes is over the chunk limit of "
                                       "2^31 - 1", n);
    size_t need = c->len + 12 + n;
    if (need > c->cap) {
        size_t cap = c->cap * 2 > need ? c->cap * 2 : need;
        unsigned char *p = realloc(c->p, cap);
        if (!p)
            return gimg_fail(GIMG_E_NOMEM, "out of memory encoding PNG metadata");
        c->p = p;
        c->cap = cap;
    }
    *data = c->p + c->len + 8;
    return GIMG_OK;
}

/* Frames the n bytes of data written where chunk_room() said. */
static void chunk_close(chunk_list *c, const char type[4], size_t n)
{
    put_chunk(c->p + c->len, type, n);
    c->len += 12 + n;
}

/* Appends a chunk of the parts given (up to 5; a part of size 0 may be
 * NULL), the last compressed (a zlib stream) when `compress_last`. */
static gimg_status add_chunk(chunk_list *c, const char type[4], int parts,
                             const void *const *part, const size_t *size, int compress_last)
{
    size_t n = 0, bound = 0;
    for (int k = 0; k < parts; k++)
        if (__builtin_add_overflow(n, size[k], &n))
            return gimg_fail(GIMG_E_LIMIT, "PNG metadata too large");
    if (compress_last) {
        if (!c->z && !(c->z = libdeflate_alloc_compressor(c->level)))
            return gimg_fail(GIMG_E_NOMEM, "out of memory encoding PNG metadata");
        bound = libdeflate_zlib_compress_bound(c->z, size[parts - 1]);
        n = n - size[parts - 1];
        if (__builtin_add_overflow(n, bound, &bound))
            return gimg_fail(GIMG_E_LIMIT, "PNG metadata too large");
    }
    unsigned char *data = NULL;
    gimg_status st = chunk_room(c, compress_last ? bound : n, &data);
    if (st)
        return st;
    size_t at = 0;
    for (int k = 0; k < parts - (compress_last != 0); k++) {
        if (size[k])
            memcpy(data + at, part[k], size[k]);
        at += size[k];
    }
    if (compress_last) {
        size_t z = libdeflate_zlib_compress(c->z, part[parts - 1], size[parts - 1], data + at,
                                            bound - at);
        if (!z)   /* never: the bound holds the stream */
            return gimg_fail(GIMG_E_NOMEM, "PNG metadata did not compress");
        at += z;
        if (at > CHUNK_MAX)
            return gimg_fail(GIMG_E_LIMIT, "PNG metadata of %zu bytes is over the chunk limit "
                                           "of 2^31 - 1", at);
    }
    chunk_close(c, type, at);
    return GIMG_OK;
}

/* A keyword as PNG has them: 1-79 printable Latin-1 characters, no
 * leading, trailing or consecutive spaces (libspng drops others). */
static int valid_keyword(const char *k)
{
    const size_t n = k ? strlen(k) : 0;
    if (n < 1 || n > 79 || k[0] == ' ' || k[n - 1] == ' ')
        return 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char ch = (unsigned char)k[i];
        if (ch < 32 || (ch > 126 && ch < 161) || (ch == ' ' && k[i + 1] == ' '))
            return 0;
    }
    return 1;
}

/* An iTXt chunk: keyword, compression flag and method, language tag,
 * translated keyword, then the text (a zlib stream when compressed). */
static gimg_status add_itxt(chunk_list *c, const char *keyword, int compressed,
                            const char *language, const char *translated, const char *text,
                            size_t text_bytes)
{
    const unsigned char flags[2] = { compressed ? 1 : 0, 0 };
    language = language ? language : "";
    translated = translated ? translated : "";
    const void *part[5] = { keyword, flags, language, translated, text };
    const size_t size[5] = { strlen(keyword) + 1, 2, strlen(language) + 1,
                             strlen(translated) + 1, text_bytes };
    return add_chunk(c, "iTXt", 5, part, size, compressed);
}

/* A text chunk of m: tEXt, zTXt when compressed, iTXt when international. */
static gimg_status add_text(chunk_list *c, const gimg_text *t)
{
    if (!valid_keyword(t->keyword))
        return gimg_fail(GIMG_E_FORMAT, "PNG text keyword \"%.79s\" is not 1-79 printable "
                                        "Latin-1 characters", t->keyword ? t->keyword : "");
    const char *text = t->text ? t->text : "";
    if (t->international)
        return add_itxt(c, t->keyword, t->compressed, t->language, t->translated_keyword, text,
                        strlen(text));
    static const unsigned char method = 0;
    const void *part[3] = { t->keyword, &method, text };
    size_t size[3] = { strlen(t->keyword) + 1, 1, strlen(text) };
    if (t->compressed)
        return add_chunk(c, "zTXt", 3, part, size, 1);
    return add_chunk(c, "tEXt", 2, (const void *[]){ t->keyword, text },
                     (const size_t[]){ size[0], size[2] }, 0);
}

/* Pixels per metre for dpi, rounded; 0 for none. */
static uint32_t pixels_per_metre(double dpi)
{
    if (!(dpi > 0))
        return 0;
    const double ppm = dpi / 0.0254 + 0.5;
    return ppm >= 2147483647.0 ? 0x7fffffffu : (uint32_t)ppm;
}

/* The chunks im needs before its image data, in this order: iCCP, sBIT,
 * pHYs, eXIf, the XMP packet (an uncompressed iTXt, as the XMP
 * specification asks), then the text chunks in their order. */
static gimg_status build_chunks(const gimg_image *im, const png_samples *s, chunk_list *c)
{
    const gimg_meta *m = im->meta;
    gimg_status st = GIMG_OK;
    if (m && m->icc_bytes) {
        static const unsigned char method = 0;
        const void *part[3] = { ICC_NAME, &method, m->icc };
        const size_t size[3] = { sizeof ICC_NAME, 1, m->icc_bytes };
        if ((st = add_chunk(c, "iCCP", 3, part, size, 1)))
            return st;
    }
    if (s->sbit) {
        unsigned char bits[4];
        memset(bits, (int)s->sbit, sizeof bits);
        const void *part[1] = { bits };
        const size_t size[1] = { (size_t)im->channels };
        if ((st = add_chunk(c, "sBIT", 1, part, size, 0)))
            return st;
    }
    if (!m)
        return GIMG_OK;
    uint32_t x = pixels_per_metre(m->x_dpi), y = pixels_per_metre(m->y_dpi);
    if (x || y) {
        unsigned char phys[9];
        put32(phys, x ? x : y);
        put32(phys + 4, y ? y : x);
        phys[8] = 1;   /* the metre */
        const void *part[1] = { phys };
        const size_t size[1] = { sizeof phys };
        if ((st = add_chunk(c, "pHYs", 1, part, size, 0)))
            return st;
    }
    if (m->exif_bytes) {
        const void *part[1] = { m->exif };
        const size_t size[1] = { m->exif_bytes };
        if ((st = add_chunk(c, "eXIf", 1, part, size, 0)))
            return st;
    }
    if (m->xmp_bytes &&
        (st = add_itxt(c, XMP_KEYWORD, 0, NULL, NULL, (const char *)m->xmp, m->xmp_bytes)))
        return st;
    for (int i = 0; i < m->n_texts && !st; i++)
        st = add_text(c, &m->texts[i]);
    return st;
}

/* ------------------------------------------------- the writer (band.h) */

/*
 * An image written as PNG band by band (codec.h's wrows_*), and whole by
 * gimg_png_encode() as one band. At the opening: the signature, IHDR and
 * the chunks of build_chunks(), and the zlib header. Then each band's
 * rows are filtered (in parallel; the band's first row against the last
 * row of the band before) after the bytes not yet coded, and every
 * segment they complete is coded (in parallel), its stream going into
 * IDAT chunks of IDAT_MAX as it grows. With the image's last row: the
 * last segment, the Adler-32, IEND. A band gives the file's next bytes
 * up to the last complete IDAT chunk; the one being filled goes out with
 * a later band. Memory: the filtered rows of a band, or of MAX_BATCH
 * segments, and their streams, plus an IDAT chunk carried over.
 */
#define NO_IDAT SIZE_MAX
/* Segments a band's rows gather into before they are coded: up to one a
 * thread, at most this many (32 MiB of filtered rows). */
#define MAX_BATCH 16

typedef struct {
    gimg_image layout;      /* width, height, channels, sample (no data) */
    png_samples s;
    int level;
    size_t n;               /* a row's stored bytes */
    size_t bpp;             /* a pixel's stored bytes */
    int y;                  /* rows taken */
    unsigned char *prev;    /* the last row taken, as stored; then n bytes of scratch */
    unsigned char *raw;     /* raw[0]: the byte of the stream before raw[1]; from
                               raw[1]: the filtered bytes not yet coded */
    size_t raw_fill, raw_cap;   /* bytes at raw + 1, and room there */
    int coded_any;          /* a segment was coded: raw[0] is one of its bytes */
    uint32_t adler;         /* of the filtered bytes coded so far */
    unsigned char *out;     /* the file's bytes not yet given: whole chunks, then
                               the IDAT chunk being filled (its header at idat_at) */
    size_t out_len, out_cap, idat_at;
    size_t given;           /* out[0, given) went out with the last call */
} png_writer;

static gimg_status out_room(png_writer *w, size_t more)
{
    size_t need;
    if (__builtin_add_overflow(w->out_len, more, &need))
        return gimg_fail(GIMG_E_LIMIT, "image too large to encode as PNG");
    if (need <= w->out_cap)
        return GIMG_OK;
    size_t cap = w->out_cap > need / 2 ? 2 * w->out_cap : need;
    unsigned char *p = realloc(w->out, cap);
    if (!p)
        return gimg_fail(GIMG_E_NOMEM, "out of memory allocating %zu bytes", cap);
    w->out = p;
    w->out_cap = cap;
    return GIMG_OK;
}

/* Frames the IDAT chunk being filled. */
static void close_idat(png_writer *w)
{
    put_chunk(w->out + w->idat_at, "IDAT", w->out_len - w->idat_at - 8);
    w->out_len += 4;
    w->idat_at = NO_IDAT;
}

/* Appends n bytes of the zlib stream, in IDAT chunks of IDAT_MAX. */
static gimg_status put_stream(png_writer *w, const unsigned char *p, size_t n)
{
    gimg_status st;
    while (n > 0) {
        if (w->idat_at == NO_IDAT) {
            if ((st = out_room(w, 8)))
                return st;
            w->idat_at = w->out_len;
            w->out_len += 8;
        }
        const size_t in_chunk = w->out_len - w->idat_at - 8;
        const size_t take = n < IDAT_MAX - in_chunk ? n : IDAT_MAX - in_chunk;
        if ((st = out_room(w, take + 4)))   /* + the CRC */
            return st;
        memcpy(w->out + w->out_len, p, take);
        w->out_len += take;
        p += take;
        n -= take;
        if (in_chunk + take == IDAT_MAX)
            close_idat(w);
    }
    return GIMG_OK;
}

static void png_writer_free(png_writer *w)
{
    if (!w)
        return;
    free(w->s.lut);
    free(w->prev);
    free(w->raw);
    free(w->out);
    free(w);
}

/* Starts the file of an image of layout's size, samples and metadata. */
static gimg_status png_writer_open(const gimg_image *layout, int level, png_writer **out)
{
    *out = NULL;
    if ((layout->sample != GIMG_U8 && layout->sample != GIMG_U16) || layout->channels < 1 ||
        layout->channels > 4)
        return gimg_fail(GIMG_E_FORMAT, "PNG cannot hold a %d-channel %d-bit image",
                         layout->channels, (int)layout->sample * 8);
    if (level < 0 || level > 12)
        return gimg_fail(GIMG_E_USAGE, "PNG compression level %d is not in 0..12", level);
    if (layout->width < 1 || layout->height < 1 || (uint64_t)layout->width > 0x7fffffffu ||
        (uint64_t)layout->height > 0x7fffffffu)
        return gimg_fail(GIMG_E_LIMIT, "image too large to encode as PNG");
    png_writer *w = calloc(1, sizeof *w);
    if (!w)
        return gimg_fail(GIMG_E_NOMEM, "out of memory encoding PNG");
    w->layout = *layout;
    w->layout.data = NULL;
    w->layout.meta = NULL;
    w->level = level;
    w->adler = 1;
    w->idat_at = NO_IDAT;
    chunk_list c = { .level = level };
    gimg_status st = plan_samples(layout, &w->s);
    if (!st)
        st = build_chunks(layout, &w->s, &c);
    if (!st) {
        w->bpp = (size_t)layout->channels * w->s.depth / 8;
        w->n = (size_t)layout->width * w->bpp;
        if (!(w->prev = malloc(2 * w->n)))
            st = gimg_fail(GIMG_E_NOMEM, "out of memory encoding PNG");
    }
    if (!st)
        st = out_room(w, HEAD + c.len);
    if (!st) {
        static const unsigned char color_type[5] = { 0, 0, 4, 2, 6 };
        unsigned char *p = w->out;
        memcpy(p, "\x89PNG\r\n\x1a\n", 8);
        unsigned char *ihdr = p + 16;
        put32(ihdr, (uint32_t)layout->width);
        put32(ihdr + 4, (uint32_t)layout->height);
        ihdr[8] = (unsigned char)w->s.depth;
        ihdr[9] = color_type[layout->channels];
        ihdr[10] = ihdr[11] = ihdr[12] = 0;   /* deflate, adaptive filters, no interlace */
        p = put_chunk(p + 8, "IHDR", 13);
        if (c.len)
            memcpy(p, c.p, c.len);
        w->out_len = (size_t)(p - w->out) + c.len;
        /* The zlib header: CM 8, a 32 KiB window, FLEVEL 0 ((0x78 << 8 |
         * 0x01) % 31 == 0). */
        st = put_stream(w, (const unsigned char *)"\x78\x01", 2);
    }
    free(c.p);
    libdeflate_free_compressor(c.z);
    if (st) {
        png_writer_free(w);
        return st;
    }
    *out = w;
    return GIMG_OK;
}

/* Filters band's rows into to (n + 1 bytes a row), the first against the
 * last row taken (zeros above the image's first), and keeps the band's
 * last row as the next band's above. */
static gimg_status filter_rows(png_writer *w, const gimg_image *band, unsigned char *to)
{
    const png_samples *s = &w->s;
    const size_t n = w->n, bpp = w->bpp;
    const unsigned char *above = w->y ? w->prev : NULL;
    int failed = 0;
#pragma omp parallel if (band->height > 8)
    {
        /* Per thread: a zero row (above the image's first), and room for
         * the current and previous rows as stored. */
        unsigned char *work = calloc(3, n);
        if (!work) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (int y = 0; y < band->height; y++) {
            if (!work)
                continue;
            const unsigned char *cur = stored_row(band, s, y, n, work + n);
            const unsigned char *prev = y       ? stored_row(band, s, y - 1, n, work + 2 * n)
                                        : above ? above
                                                : work;
            unsigned char *row = to + (size_t)y * (n + 1);
            int type = choose_filter(cur, prev, n, bpp);
            row[0] = (unsigned char)type;
            apply_filter(type, cur, prev, n, bpp, row + 1);
        }
        free(work);
    }
    if (failed)
        return gimg_fail(GIMG_E_NOMEM, "out of memory filtering PNG rows");
    memmove(w->prev, stored_row(band, s, band->height - 1, n, w->prev + n), n);
    return GIMG_OK;
}

/* Codes the segments the filtered rows complete (after the last row, all
 * that are left, then the Adler-32 and IEND), in parallel, and puts their
 * streams in order. */
static gimg_status code_segments(png_writer *w, int last)
{
    const size_t segs = last ? (w->raw_fill + PNG_SEGMENT_BYTES - 1) / PNG_SEGMENT_BYTES
                             : w->raw_fill / PNG_SEGMENT_BYTES;
    const size_t done = segs * PNG_SEGMENT_BYTES < w->raw_fill ? segs * PNG_SEGMENT_BYTES : w->raw_fill;
    png_coded *part = segs ? calloc(segs, sizeof *part) : NULL;
    if (segs && !part)
        return gimg_fail(GIMG_E_NOMEM, "out of memory compressing PNG data");
    const unsigned char *data = w->raw + 1;
    gimg_status st = GIMG_OK;
    int failed = 0;
#pragma omp parallel for schedule(dynamic, 1) if (segs > 1)
    for (size_t k = 0; k < segs; k++) {
        const size_t at = k * PNG_SEGMENT_BYTES;
        const size_t n = done - at < PNG_SEGMENT_BYTES ? done - at : PNG_SEGMENT_BYTES;
        if (!png_code_segment(data + at, n, !w->coded_any && k == 0, last && k + 1 == segs,
                          w->level, &part[k])) {
#pragma omp atomic write
            failed = 1;
        }
    }
    if (failed)
        st = gimg_fail(GIMG_E_NOMEM, "out of memory compressing PNG data");
    /* Each stream let go once in place: one less held at once. */
    for (size_t k = 0; k < segs; k++) {
        if (!st)
            st = put_stream(w, part[k].p, part[k].len);
        free(part[k].p);
    }
    free(part);
    if (st)
        return st;
    if (done) {
        w->adler = libdeflate_adler32(w->adler, data, done);
        w->raw[0] = data[done - 1];
        memmove(w->raw + 1, data + done, w->raw_fill - done);
        w->raw_fill -= done;
        w->coded_any = 1;
    }
    if (!last)
        return GIMG_OK;
    unsigned char adler[4];
    put32(adler, w->adler);
    if ((st = put_stream(w, adler, 4)) || (st = out_room(w, 4 + 12)))   /* a CRC, IEND */
        return st;
    if (w->idat_at != NO_IDAT)
        close_idat(w);
    w->out_len = (size_t)(put_chunk(w->out + w->out_len, "IEND", 0) - w->out);
    return GIMG_OK;
}

/* Takes band's rows, the next of the image: *bytes gets the file's bytes
 * they complete (the writer's, valid until the next call), with the last
 * row the rest of the file. */
static gimg_status png_writer_put(png_writer *w, const gimg_image *band,
                                  const unsigned char **bytes, size_t *len)
{
    *bytes = NULL;
    *len = 0;
    if (w->given) {
        memmove(w->out, w->out + w->given, w->out_len - w->given);
        w->out_len -= w->given;
        if (w->idat_at != NO_IDAT)
            w->idat_at -= w->given;
        w->given = 0;
    }
    if (band->width != w->layout.width || band->channels != w->layout.channels ||
        band->sample != w->layout.sample || band->height < 1 ||
        band->height > w->layout.height - w->y)
        return gimg_fail(GIMG_E_USAGE, "PNG writer: a band of another layout, or past the "
                                       "image's rows");
    const size_t row = w->n + 1;
    size_t need;
    if (__builtin_mul_overflow(row, (size_t)band->height, &need) ||
        __builtin_add_overflow(need, w->raw_fill, &need) || need > SIZE_MAX - 1)
        return gimg_fail(GIMG_E_LIMIT, "image too large to encode as PNG");
    if (need > w->raw_cap) {
        unsigned char *p = realloc(w->raw, need + 1);
        if (!p)
            return gimg_fail(GIMG_E_NOMEM, "out of memory allocating %zu bytes", need + 1);
        w->raw = p;
        w->raw_cap = need;
    }
    gimg_status st = filter_rows(w, band, w->raw + 1 + w->raw_fill);
    if (st)
        return st;
    w->raw_fill = need;
    w->y += band->height;
    const int last = w->y == w->layout.height;

    /* Bands' rows gather until there is a segment for every thread (up
     * to MAX_BATCH), so that a small band does not leave threads idle. */
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    if (threads > MAX_BATCH)
        threads = MAX_BATCH;
    if ((last || w->raw_fill >= (size_t)threads * PNG_SEGMENT_BYTES) &&
        (st = code_segments(w, last)))
        return st;
    w->given = w->idat_at == NO_IDAT ? w->out_len : w->idat_at;
    *bytes = w->out;
    *len = w->given;
    return GIMG_OK;
}

gimg_status gimg_png_encode(const gimg_image *im, int level, unsigned char **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    png_writer *w;
    const unsigned char *bytes;
    size_t n;
    gimg_status st = png_writer_open(im, level, &w);
    if (st)
        return st;
    /* One band, the last: the head, still in out, and the rest, at once. */
    if (!(st = png_writer_put(w, im, &bytes, &n))) {
        unsigned char *shrunk = realloc(w->out, n);
        *buf = shrunk ? shrunk : w->out;
        *len = n;
        w->out = NULL;
    }
    png_writer_free(w);
    return st;
}

/* ------------------------------------------------------------ reading */

/* What libspng may hold of the ancillary chunks (text, ICC profiles, Exif,
 * ...), which it reads and keeps whether anyone asks for them or not: one
 * chunk as stored, and all of them together, decompressed text and
 * profiles included. libvips allows 60 MB ("we've seen 50mb XMP blocks in
 * the wild"); past these the file is refused, as libvips refuses it. The
 * number of text and unknown chunks kept is libspng's own limit (its
 * default, which 0.7.3 does not let a decoder change). */
#define ANCILLARY_COUNT_MAX 1000
#define ANCILLARY_CHUNK_MAX ((size_t)64 << 20)
#define ANCILLARY_TOTAL_MAX ((size_t)64 << 20)

/* Adler-32 unchecked (see the head comment): the CRCs of the IDAT chunks
 * already cover every byte of the zlib stream, its Adler-32 included. */
#define SPNG_FLAGS SPNG_CTX_IGNORE_ADLER32

/* A PNG's header and the layout its pixels decode to. */
typedef struct {
    struct spng_ihdr ihdr;
    int has_trns;
    struct spng_trns trns;
    int channels;
    gimg_sample sample;
} png_header;

/* How far libspng had read when it failed: what a truncation cut short. */
typedef enum { AT_HEADER, AT_CHUNKS, AT_IMAGE, AT_END } png_stage;

static int is_letter(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

/* Lets go of the pages of a private file mapping from the one holding
 * `from` up to `to`: read again from the file if touched after
 * (gimg_read_opts.drop_pages), so that the first, partly read, may go
 * too (a page left at each step kept the kernel's large folio mapped). */
static void drop_pages(const unsigned char *from, const unsigned char *to)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = (uintptr_t)from & ~(page - 1), b = (uintptr_t)to & ~(page - 1);
    if (b > a)
        madvise((void *)a, b - a, MADV_DONTNEED);
}

/* Walks the chunks from the first to IEND, checking the CRC of each
 * critical one (IHDR, PLTE, IDAT, IEND: libspng enforces no other). Returns
 * the offset of the first whose CRC does not match (*crc_ok = 0), or of
 * IEND when all match (*crc_ok = 1); len when the file ends, or stops
 * being chunks, before IEND's last byte. drop: buf is a private file
 * mapping whose pages are let go as the walk passes them (bands). */
static size_t check_chunks(const unsigned char *buf, size_t len, int drop, int *crc_ok)
{
    *crc_ok = 1;
    size_t end = len, dropped = 0;
    for (size_t p = 8; p < len && len - p >= 12;) {
        const uint32_t n = gimg_be32(buf + p);
        const unsigned char *t = buf + p + 4;
        if (!is_letter(t[0]) || !is_letter(t[1]) || !is_letter(t[2]) || !is_letter(t[3]) ||
            len - p - 12 < n)
            break;
        /* A critical chunk's CRC, 8 MiB at a time where the pages read
         * are let go (an IDAT may hold up to 2 GiB). */
        uint32_t crc = 0;
        for (size_t at = 0, step = (size_t)8 << 20; t[0] <= 'Z' && at < (size_t)n + 4;
             at += step) {
            const size_t piece = (size_t)n + 4 - at < step ? (size_t)n + 4 - at : step;
            crc = (uint32_t)libdeflate_crc32(crc, t + at, piece);
            if (drop && t + at + piece - buf - dropped >= step) {
                drop_pages(buf + dropped, t + at + piece);
                dropped = (size_t)(t + at + piece - buf);
            }
        }
        if (t[0] <= 'Z' && crc != gimg_be32(t + 4 + n)) {
            *crc_ok = 0;
            end = p;
            break;
        }
        if (memcmp(t, "IEND", 4) == 0) {
            end = p;
            break;
        }
        p += 12 + (size_t)n;
        /* drop: let the pages walked go, every 8 MiB (bands: the file is
         * read again as the rows are decoded, a page at a time). */
        if (drop && p - dropped >= ((size_t)8 << 20)) {
            drop_pages(buf + dropped, buf + p);
            dropped = p;
        }
    }
    /* All of it at the end: what idat_bytes() walked before is mapped
     * too (in the kernel's large folios, which the steps above may only
     * split). */
    if (drop)
        drop_pages(buf, buf + len);
    return end;
}

/* The bytes of image data (the IDAT chunks' payloads) in the file, a cut
 * last chunk's included (its truncation is reported as such later). */
static uint64_t idat_bytes(const unsigned char *buf, size_t len)
{
    uint64_t sum = 0;
    for (size_t p = 8; p < len && len - p >= 8;) {
        const uint32_t n = gimg_be32(buf + p);
        const size_t here = len - p - 8 < n ? len - p - 8 : n;
        if (memcmp(buf + p + 4, "IDAT", 4) == 0)
            sum += here;
        if (here < n || len - p - 8 - here < 4)
            break;
        p += 12 + (size_t)n;
    }
    return sum;
}

/* Deflate's best case: a length-258 match in 2 bits, 1032 bytes a byte. */
#define DEFLATE_MAX_RATIO 1032

static gimg_status crc_failure(const unsigned char *buf, size_t len)
{
    int crc_ok;
    size_t at = check_chunks(buf, len, 0, &crc_ok);
    return gimg_fail(GIMG_E_FORMAT, "corrupt PNG file: CRC mismatch in the %.4s chunk",
                     at < len && !crc_ok ? (const char *)buf + at + 4 : "????");
}

/* Records libspng's error err, met at stage, in plain words. */
static gimg_status spng_failure(int err, png_stage stage, const unsigned char *buf, size_t len)
{
    static const char *const cut[] = {
        [AT_HEADER] = "in its header",
        [AT_CHUNKS] = "before the image data",
        [AT_IMAGE] = "in the image data",
        [AT_END] = "after the image data: no IEND chunk",
    };
    const char *why;
    switch (err) {
    case SPNG_IO_EOF:
    case SPNG_EOF:
        return gimg_fail(GIMG_E_FORMAT, "truncated PNG file (cut short %s)", cut[stage]);
    case SPNG_EMEM:
        return gimg_fail(GIMG_E_NOMEM, "out of memory decoding PNG");
    case SPNG_ECHUNK_LIMITS:
        return gimg_fail(GIMG_E_LIMIT,
                         "PNG metadata over the limits (at most %d ancillary chunks and %zu "
                         "MiB of text, profiles and other metadata, decompressed)",
                         ANCILLARY_COUNT_MAX, ANCILLARY_TOTAL_MAX >> 20);
    case SPNG_EUSER_WIDTH:
    case SPNG_EUSER_HEIGHT:
        /* The IHDR is the first chunk: gimg_check_size() words the limit. */
        if (len >= 24 && gimg_check_size(gimg_be32(buf + 16), gimg_be32(buf + 20), 1, GIMG_U8,
                                         NULL, NULL) == GIMG_E_LIMIT)
            return GIMG_E_LIMIT;
        return gimg_fail(GIMG_E_LIMIT, "PNG image over the limit of %d pixels per side",
                         GIMG_MAX_DIMENSION);
    case SPNG_ECHUNK_CRC:
        return crc_failure(buf, len);
    case SPNG_ESIGNATURE: why = "no PNG signature"; break;
    case SPNG_EWIDTH: why = "invalid width in IHDR (0, or over PNG's limit of 2^31 - 1)"; break;
    case SPNG_EHEIGHT: why = "invalid height in IHDR (0, or over PNG's limit of 2^31 - 1)"; break;
    case SPNG_EBIT_DEPTH: why = "invalid bit depth for the colour type in IHDR"; break;
    case SPNG_ECOLOR_TYPE: why = "invalid colour type in IHDR"; break;
    case SPNG_ECOMPRESSION_METHOD: why = "unknown compression method in IHDR"; break;
    case SPNG_EFILTER_METHOD: why = "unknown filter method in IHDR"; break;
    case SPNG_EINTERLACE_METHOD: why = "unknown interlace method in IHDR"; break;
    case SPNG_EIHDR_SIZE: why = "IHDR chunk of the wrong size"; break;
    case SPNG_ENOIHDR: why = "the first chunk is not IHDR"; break;
    case SPNG_ECHUNK_POS:
        why = "a chunk out of place (no image data before IEND, or a second IHDR, a PLTE "
              "after the image data...)";
        break;
    case SPNG_ECHUNK_SIZE: why = "a chunk length over 2^31 - 1"; break;
    case SPNG_ECHUNK_STDLEN: why = "a chunk of the wrong length"; break;
    case SPNG_ECHUNK_TYPE: why = "invalid chunk type"; break;
    case SPNG_ECHUNK_UNKNOWN_CRITICAL: why = "unknown critical chunk"; break;
    case SPNG_EDUP_PLTE: why = "two PLTE chunks"; break;
    case SPNG_ENOPLTE: why = "a palette image without a PLTE chunk"; break;
    case SPNG_ETRNS_COLOR_TYPE:
    case SPNG_ETRNS_NO_PLTE: why = "invalid tRNS chunk"; break;
    case SPNG_EIDAT_TOO_SHORT:
        why = "the image data (IDAT) ends before the last row, or there is none";
        break;
    case SPNG_EIDAT_STREAM:
    case SPNG_EZLIB: why = "invalid compressed image data (IDAT)"; break;
    case SPNG_EFILTER: why = "invalid row filter type"; break;
    default: why = spng_strerror(err); break;
    }
    return gimg_fail(GIMG_E_FORMAT, "corrupt PNG file: %s", why);
}

/* Opens buf with libspng under our limits and reads what comes before the
 * image data: the header, the palette and tRNS (which decides the layout,
 * and which libspng drops when its CRC or length is wrong), and the other
 * chunks, which libspng checks and keeps (within the limits above: the
 * probe's worst case). *ctx is set even on failure (NULL or a context to
 * free). */
static gimg_status open_png(const unsigned char *buf, size_t len, spng_ctx **ctx, png_header *h)
{
    memset(h, 0, sizeof *h);
    if (!(*ctx = spng_ctx_new(SPNG_FLAGS)))
        return gimg_fail(GIMG_E_NOMEM, "out of memory decoding PNG");
    if (!buf || len < 8)
        return spng_failure(buf && memcmp(buf, "\x89PNG\r\n\x1a\n", len) == 0 ? SPNG_IO_EOF
                                                                            : SPNG_ESIGNATURE,
                            AT_HEADER, buf, len);
    int err;
    if ((err = spng_set_image_limits(*ctx, GIMG_MAX_DIMENSION, GIMG_MAX_DIMENSION)) ||
        (err = spng_set_chunk_limits(*ctx, ANCILLARY_CHUNK_MAX, ANCILLARY_TOTAL_MAX)) ||
        (err = spng_set_png_buffer(*ctx, buf, len)) || (err = spng_get_ihdr(*ctx, &h->ihdr)))
        return spng_failure(err, AT_HEADER, buf, len);
    err = spng_get_trns(*ctx, &h->trns);
    if (err && err != SPNG_ECHUNKAVAIL)
        return spng_failure(err, AT_CHUNKS, buf, len);
    h->has_trns = err == 0;
    switch (h->ihdr.color_type) {
    case SPNG_COLOR_TYPE_GRAYSCALE: h->channels = 1 + h->has_trns; break;
    case SPNG_COLOR_TYPE_GRAYSCALE_ALPHA: h->channels = 2; break;
    case SPNG_COLOR_TYPE_TRUECOLOR_ALPHA: h->channels = 4; break;
    default: h->channels = 3 + h->has_trns; break;   /* RGB, palette */
    }
    h->sample = h->ihdr.bit_depth == 16 ? GIMG_U16 : GIMG_U8;
    return GIMG_OK;
}

/* Whether libspng's output (SPNG_FMT_PNG: the samples as stored) needs
 * expanding into the image's layout. */
static int needs_expansion(const png_header *h)
{
    switch (h->ihdr.color_type) {
    case SPNG_COLOR_TYPE_GRAYSCALE: return h->ihdr.bit_depth < 8 || h->has_trns;
    case SPNG_COLOR_TYPE_TRUECOLOR: return h->has_trns;
    case SPNG_COLOR_TYPE_INDEXED: return 1;
    default: return 0;
    }
}

/* Sample x of a row of 1-, 2-, 4- or 8-bit samples, packed from the high
 * bits of each byte down. */
static inline unsigned packed_sample(const unsigned char *row, uint32_t x, unsigned depth)
{
    if (depth == 8)
        return row[x];
    const size_t bit = (size_t)x * depth;
    return (unsigned)(row[bit / 8] >> (8 - depth - bit % 8)) & ((1u << depth) - 1);
}

/* A pixel whose palette index is past PLTE's entries (libspng would read
 * it as black), in image rows. */
typedef struct {
    unsigned index, x;
    int y;
} bad_index;

static gimg_status palette_failure(const bad_index *b, const struct spng_plte *plte)
{
    return gimg_fail(GIMG_E_FORMAT,
                     "corrupt PNG file: palette index %u (pixel %u, %d) past the palette's %u "
                     "colours",
                     b->index, b->x, b->y, plte->n_entries);
}

/* Rewrites rows decoded by libspng as stored (rows of packed_row bytes
 * from the start of im's buffer) in the image's layout, in place: gray
 * below 8 bits scaled to 8 (v * 255 / (2^depth - 1), as libpng,
 * ImageMagick and libvips do), palette indices looked up, and the tRNS
 * alpha added (0 where a gray or RGB pixel equals tRNS's colour, else
 * opaque; the palette's alphas, opaque past tRNS's entries). im is the
 * whole image or a band of it whose first row is the image's first_row.
 * Rows from the last, pixels from the last: each pixel's output lies at
 * or after its input, and after the input of every pixel not yet read, so
 * a pixel is read before anything overwrites it. Returns 1 when an index
 * lies past the palette, *bad the last such pixel (the first met going
 * backwards) and im's rows left part rewritten; 0 otherwise. */
static int expand_rows(gimg_image *im, const png_header *h, const struct spng_plte *plte,
                       size_t packed_row, int first_row, bad_index *bad)
{
    const unsigned depth = h->ihdr.bit_depth;
    const int alpha = h->has_trns;
    const uint32_t w = (uint32_t)im->width;
    /* The palette as RGBA, opaque unless tRNS says otherwise. */
    unsigned char lut[256][4];
    if (h->ihdr.color_type == SPNG_COLOR_TYPE_INDEXED)
        for (uint32_t i = 0; i < plte->n_entries && i < 256; i++) {
            lut[i][0] = plte->entries[i].red;
            lut[i][1] = plte->entries[i].green;
            lut[i][2] = plte->entries[i].blue;
            lut[i][3] = alpha && i < h->trns.n_type3_entries ? h->trns.type3_alpha[i] : 255;
        }
    for (int y = im->height - 1; y >= 0; y--) {
        const unsigned char *src = im->data + (size_t)y * packed_row;
        unsigned char *dst = gimg_row(im, y);
        switch (h->ihdr.color_type) {
        case SPNG_COLOR_TYPE_GRAYSCALE:
            if (depth == 16) {   /* with tRNS */
                const uint16_t *s = (const uint16_t *)src;
                uint16_t *d = (uint16_t *)dst;
                for (uint32_t x = w; x-- > 0;) {
                    const uint16_t v = s[x];
                    d[2 * x] = v;
                    d[2 * x + 1] = v == h->trns.gray ? 0 : 65535;
                }
            } else {
                const unsigned scale = 255 / ((1u << depth) - 1);
                for (uint32_t x = w; x-- > 0;) {
                    const unsigned v = packed_sample(src, x, depth);
                    if (alpha) {
                        dst[2 * x] = (unsigned char)(v * scale);
                        dst[2 * x + 1] = v == h->trns.gray ? 0 : 255;
                    } else {
                        dst[x] = (unsigned char)(v * scale);
                    }
                }
            }
            break;
        case SPNG_COLOR_TYPE_TRUECOLOR:   /* with tRNS */
            if (depth == 16) {
                const uint16_t *s = (const uint16_t *)src;
                uint16_t *d = (uint16_t *)dst;
                for (uint32_t x = w; x-- > 0;) {
                    const uint16_t r = s[3 * x], g = s[3 * x + 1], b = s[3 * x + 2];
                    d[4 * x] = r;
                    d[4 * x + 1] = g;
                    d[4 * x + 2] = b;
                    d[4 * x + 3] = r == h->trns.red && g == h->trns.green && b == h->trns.blue
                                 ? 0 : 65535;
                }
            } else {
                for (uint32_t x = w; x-- > 0;) {
                    const unsigned char r = src[3 * x], g = src[3 * x + 1], b = src[3 * x + 2];
                    dst[4 * x] = r;
                    dst[4 * x + 1] = g;
                    dst[4 * x + 2] = b;
                    dst[4 * x + 3] = r == h->trns.red && g == h->trns.green && b == h->trns.blue
                                   ? 0 : 255;
                }
            }
            break;
        default: {   /* palette */
            const int n = alpha ? 4 : 3;
            for (uint32_t x = w; x-- > 0;) {
                const unsigned i = packed_sample(src, x, depth);
                if (i >= plte->n_entries) {
                    *bad = (bad_index){ .index = i, .x = x, .y = first_row + y };
                    return 1;
                }
                memcpy(dst + (size_t)n * x, lut[i], (size_t)n);
            }
            break;
        }
        }
    }
    return 0;
}

/* ------------------------------------------------- beside the decoder */

/* Images from this size on are decoded with the side work below on a
 * second thread; smaller ones check their CRCs first, on the same one. */
#define SIDE_THREAD_MIN ((size_t)4 << 20)
/* The side thread faults the image's pages in this much at a time. */
#define PREFAULT_STEP ((size_t)8 << 20)

/* What a second thread does while libspng or png_idat.c decodes a large
 * image, so that the decoder does neither: check the critical chunks'
 * CRCs (with libdeflate,
 * several times faster than the zlib crc32 libspng calls), and fault the
 * image's pages in ahead of the decoder (the kernel zeroing them took 6%
 * of a photo's decode), a step at a time until the decoder has returned.
 * On a 4096x4096 photo the decoding thread then spends 332 ms instead of
 * 345. */
typedef struct {
    const unsigned char *buf;
    size_t len;
    unsigned char *pixels;
    size_t bytes;
    atomic_int stop;   /* set when the decoder has returned */
    size_t end;        /* check_chunks()'s answer */
    int crc_ok;
} side_job;

static void *side_work(void *arg)
{
    side_job *j = arg;
#ifdef MADV_POPULATE_WRITE
    /* Faulting pages in never changes what the decoder has written. */
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t at = ((uintptr_t)j->pixels + page - 1) & ~(page - 1);
    const uintptr_t end = ((uintptr_t)j->pixels + j->bytes) & ~(page - 1);
    while (at < end && !atomic_load_explicit(&j->stop, memory_order_relaxed)) {
        const size_t n = end - at < PREFAULT_STEP ? (size_t)(end - at) : PREFAULT_STEP;
        if (madvise((void *)at, n, MADV_POPULATE_WRITE) != 0)
            break;
        at += n;
    }
#endif
    j->end = check_chunks(j->buf, j->len, 0, &j->crc_ok);
    return NULL;
}

/* -------------------------------------------------- the metadata read */

/* The metadata chunks the file holds, counted by walking it up to IEND,
 * against which what libspng kept is compared: it drops an ancillary
 * chunk that is malformed, misplaced, repeated or whose CRC does not
 * match without a word, and we say so. */
enum { K_ICCP, K_EXIF, K_TEXT, K_ZTXT, K_ITXT, K_KINDS };
static const char meta_chunk_type[K_KINDS][5] = { "iCCP", "eXIf", "tEXt", "zTXt", "iTXt" };

typedef struct {
    unsigned present[K_KINDS], bad_crc[K_KINDS];
} chunk_census;

static void count_meta_chunks(const unsigned char *buf, size_t len, chunk_census *c)
{
    memset(c, 0, sizeof *c);
    for (size_t p = 8; p < len && len - p >= 12;) {
        const uint32_t n = gimg_be32(buf + p);
        const unsigned char *t = buf + p + 4;
        if (len - p - 12 < n || memcmp(t, "IEND", 4) == 0)
            break;
        for (int k = 0; k < K_KINDS; k++)
            if (memcmp(t, meta_chunk_type[k], 4) == 0) {
                c->present[k]++;
                c->bad_crc[k] += libdeflate_crc32(0, t, (size_t)n + 4) != gimg_be32(t + 4 + n);
            }
        p += 12 + (size_t)n;
    }
}

/* The significant bits sBIT gives every channel of an 8- or 16-bit gray
 * or RGB image (with or without alpha), when they agree and are fewer
 * than the bit depth; 0 otherwise (no sBIT, a palette, gray below 8 bits,
 * or channels that disagree, as RGB 5,6,5: the samples are then left as
 * they are, in the full range). */
static unsigned significant_bits(spng_ctx *ctx, const png_header *h)
{
    struct spng_sbit sb;
    if (h->ihdr.bit_depth < 8 || h->ihdr.color_type == SPNG_COLOR_TYPE_INDEXED ||
        spng_get_sbit(ctx, &sb) != 0)
        return 0;
    unsigned bits[4], n = 0;
    switch (h->ihdr.color_type) {
    case SPNG_COLOR_TYPE_GRAYSCALE: bits[n++] = sb.grayscale_bits; break;
    case SPNG_COLOR_TYPE_GRAYSCALE_ALPHA:
        bits[n++] = sb.grayscale_bits;
        bits[n++] = sb.alpha_bits;
        break;
    default:   /* RGB, RGBA */
        bits[n++] = sb.red_bits;
        bits[n++] = sb.green_bits;
        bits[n++] = sb.blue_bits;
        if (h->ihdr.color_type == SPNG_COLOR_TYPE_TRUECOLOR_ALPHA)
            bits[n++] = sb.alpha_bits;
        break;
    }
    for (unsigned k = 1; k < n; k++)
        if (bits[k] != bits[0])
            return 0;
    return bits[0] >= 1 && bits[0] < h->ihdr.bit_depth ? bits[0] : 0;
}

/* Brings every sample of im, the image or a band of it (tRNS's alpha
 * too: 0 or the maxval then), down to its b significant bits, the top b
 * of the stored depth: v >> (depth - b) undoes the left bit replication
 * (or zero filling) writers scale with. */
static void keep_significant_bits(gimg_image *im, unsigned shift)
{
    const size_t count = (size_t)im->width * (size_t)im->channels;
    const int big = (size_t)im->height * count * (size_t)im->sample >= SIDE_THREAD_MIN;
#pragma omp parallel for schedule(static) if (big)
    for (int y = 0; y < im->height; y++) {
        if (im->sample == GIMG_U16) {
            uint16_t *p = (uint16_t *)gimg_row(im, y);
#pragma omp simd
            for (size_t i = 0; i < count; i++)
                p[i] = (uint16_t)(p[i] >> shift);
        } else {
            unsigned char *p = gimg_row(im, y);
#pragma omp simd
            for (size_t i = 0; i < count; i++)
                p[i] = (unsigned char)(p[i] >> shift);
        }
    }
}

/* dpi for pixels per metre: ppm * 0.0254, or the whole number of dpi
 * that is written as this ppm when there is one (pHYs rounds: 300 dpi is
 * 11811 ppm, which is 299.9994 dpi), so that a whole dpi comes back as it
 * was through a PNG. */
static double dpi_of(uint32_t ppm)
{
    const double dpi = ppm * 0.0254, whole = (double)(uint64_t)(dpi + 0.5);
    return whole >= 1 && pixels_per_metre(whole) == ppm ? whole : dpi;
}

static const char *dropped_why(const chunk_census *c, int k)
{
    return c->bad_crc[k] ? "its CRC does not match" : "malformed, misplaced or repeated";
}

/* Fills out->meta with the metadata libspng kept: the ICC profile (iCCP),
 * EXIF (eXIf), the XMP packet (the iTXt of keyword XML:com.adobe.xmp),
 * the other text chunks in file order, and the resolution (pHYs in pixels
 * per metre; one of unknown unit says nothing of it). What libspng
 * dropped, and what is over meta.c's caps, is dropped with a warning. */
static gimg_status read_meta(spng_ctx *ctx, const unsigned char *buf, size_t len,
                             gimg_image *out)
{
    chunk_census census;
    unsigned kept[K_KINDS] = { 0 };
    gimg_status st = GIMG_OK;
    count_meta_chunks(buf, len, &census);

    struct spng_iccp iccp;
    if (census.present[K_ICCP] && spng_get_iccp(ctx, &iccp) == 0) {
        kept[K_ICCP] = 1;
        st = gimg_meta_add_icc(&out->meta, (const unsigned char *)iccp.profile,
                               iccp.profile_len);
    }
    struct spng_exif exif;
    if (!st && census.present[K_EXIF] && spng_get_exif(ctx, &exif) == 0) {
        kept[K_EXIF] = 1;
        st = gimg_meta_add_exif(&out->meta, (const unsigned char *)exif.data, exif.length);
    }
    uint32_t n_texts = 0;
    struct spng_text *texts = NULL;
    if (!st && spng_get_text(ctx, NULL, &n_texts) == 0 && n_texts > 0) {
        if (!(texts = calloc(n_texts, sizeof *texts)))
            st = gimg_fail(GIMG_E_NOMEM, "out of memory reading PNG metadata");
        else if (spng_get_text(ctx, texts, &n_texts) != 0)
            n_texts = 0;
    }
    for (uint32_t i = 0; !st && i < n_texts; i++) {
        const struct spng_text *t = &texts[i];
        const int itxt = t->type == SPNG_ITXT;
        kept[t->type == SPNG_TEXT ? K_TEXT : t->type == SPNG_ZTXT ? K_ZTXT : K_ITXT]++;
        if (itxt && strcmp(t->keyword, XMP_KEYWORD) == 0)
            st = gimg_meta_add_xmp(&out->meta, (const unsigned char *)t->text, t->length);
        else
            st = gimg_meta_add_text(&out->meta, t->keyword, t->text, t->length,
                                    itxt ? t->language_tag : NULL,
                                    itxt ? t->translated_keyword : NULL, itxt,
                                    t->type == SPNG_ZTXT || (itxt && t->compression_flag));
    }
    free(texts);
    struct spng_phys phys;
    if (!st && spng_get_phys(ctx, &phys) == 0 && phys.unit_specifier == 1 &&
        (phys.ppu_x || phys.ppu_y)) {
        gimg_meta *m = out->meta ? out->meta : (out->meta = gimg_meta_new());
        if (!m)
            return gimg_fail(GIMG_E_NOMEM, "out of memory reading PNG metadata");
        m->x_dpi = phys.ppu_x ? dpi_of(phys.ppu_x) : 0;
        m->y_dpi = phys.ppu_y ? dpi_of(phys.ppu_y) : 0;
    }
    for (int k = 0; !st && k < K_KINDS; k++)
        if (census.present[k] > kept[k]) {
            const unsigned lost = census.present[k] - kept[k];
            if (lost == 1)
                gimg_meta_warn(&out->meta, "a PNG %s chunk dropped: %s", meta_chunk_type[k],
                               dropped_why(&census, k));
            else
                gimg_meta_warn(&out->meta, "%u PNG %s chunks dropped: %s", lost,
                               meta_chunk_type[k], dropped_why(&census, k));
        }
    return st;
}

/* ------------------------------------------------------ the codec row */

static int sniff_png(const unsigned char *buf, size_t len)
{
    return len >= 8 && memcmp(buf, "\x89PNG\r\n\x1a\n", 8) == 0;
}

static gimg_status probe_png(const unsigned char *buf, size_t len, const gimg_read_opts *o,
                             gimg_info *info)
{
    spng_ctx *ctx;
    png_header h;
    gimg_status st = open_png(buf, len, &ctx, &h);
    spng_ctx_free(ctx);
    if (st)
        return st;
    info->format = GIMG_FMT_PNG;
    info->width = (int)h.ihdr.width;
    info->height = (int)h.ihdr.height;
    info->channels = h.channels;
    info->sample = h.sample;
    info->pages = 1;
    return GIMG_OK;
}

/* What decoding checks before it allocates for the pixels, the same for
 * the whole image (decode_png) and for bands (rows_open_png): the size
 * against the limits (gimg_check_size: *total, the image's bytes), the
 * samples as stored (*stored bytes, SPNG_FMT_PNG), the palette, and image
 * data that could inflate to them. Last, libspng leaves the critical
 * chunks' CRCs to the caller (check_chunks()): it checked IHDR's and
 * PLTE's in open_png(), and still drops ancillary chunks whose CRC is
 * wrong. */
static gimg_status check_before_pixels(spng_ctx *ctx, const png_header *h,
                                       const unsigned char *buf, size_t len, int drop,
                                       struct spng_plte *plte, size_t *stored, size_t *total)
{
    int err;
    gimg_status st =
        gimg_check_size(h->ihdr.width, h->ihdr.height, h->channels, h->sample, NULL, total);
    if (st)
        return st;
    if ((err = spng_decoded_image_size(ctx, SPNG_FMT_PNG, stored)) ||
        (h->ihdr.color_type == SPNG_COLOR_TYPE_INDEXED && (err = spng_get_plte(ctx, plte))))
        return spng_failure(err, AT_CHUNKS, buf, len);
    if (*stored > *total)   /* never: a stored sample is never wider than ours */
        return gimg_fail(GIMG_E_FORMAT, "corrupt PNG file: unexpected layout");
    /* A tiny file claiming a huge image (with --max-pixels raised) is
     * refused before its pixels are allocated: its image data could not
     * inflate to them. */
    const uint64_t idat = idat_bytes(buf, len);
    if (drop) /* the walk mapped a page, or a large folio, of each chunk */
        drop_pages(buf, buf + len);
    if ((uint64_t)*stored / DEFLATE_MAX_RATIO > idat + 1)
        return gimg_fail(GIMG_E_FORMAT, "corrupt PNG file: the image data (IDAT) ends before "
                                        "the last row: %llu bytes cannot hold a %ux%u image",
                         (unsigned long long)idat, h->ihdr.width, h->ihdr.height);
    if ((err = spng_set_crc_action(ctx, SPNG_CRC_USE, SPNG_CRC_DISCARD)))
        return spng_failure(err, AT_CHUNKS, buf, len);
    return GIMG_OK;
}

/* ---------------------------------------- the image data decoded by us */

/* 1 when buf's chunks are whole up to IEND's last byte, each of a length
 * libspng takes (at most 2^31 - 1), and its IDAT chunks one run:
 * *first_idat the run's first chunk, *tail the chunk after it. Such a
 * file's image data is decoded by png_idat.c (twice as fast: it says why)
 * and the rest of it by libspng (read_around() below); any other file,
 * and an interlaced one, by libspng alone. */
static int one_idat_run(const unsigned char *buf, size_t len, size_t *first_idat, size_t *tail)
{
    int run = 0;   /* 0 before the IDAT chunks, 1 in them, 2 after */
    for (size_t p = 8; p < len && len - p >= 12;) {
        const uint32_t n = gimg_be32(buf + p);
        const unsigned char *t = buf + p + 4;
        if (n > 0x7fffffffu || len - p - 12 < n)
            return 0;
        const int idat = memcmp(t, "IDAT", 4) == 0;
        if (idat && run == 0) {
            *first_idat = p;
            run = 1;
        } else if (!idat && run == 1) {
            *tail = p;
            run = 2;
        }
        if (memcmp(t, "IEND", 4) == 0)
            return run == 2;
        p += 12 + (size_t)n;
    }
    return 0;
}

int gimg_png_own_idat = 1;

/* libspng's error code for png_idat's, worded by spng_failure(). */
static int idat_spng_error(png_idat_error e)
{
    switch (e) {
    case PNG_IDAT_OK: return 0;
    case PNG_IDAT_SHORT: return SPNG_EIDAT_TOO_SHORT;
    case PNG_IDAT_ZLIB: return SPNG_EZLIB;
    case PNG_IDAT_FILTER: return SPNG_EFILTER;
    default: return SPNG_EMEM;
    }
}

/* A pixel's bits as stored: its samples (1 to 4) times the bit depth. */
static unsigned stored_pixel_bits(unsigned color_type, unsigned depth)
{
    const unsigned samples = color_type == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA ? 2
                           : color_type == SPNG_COLOR_TYPE_TRUECOLOR       ? 3
                           : color_type == SPNG_COLOR_TYPE_TRUECOLOR_ALPHA ? 4
                                                                           : 1;
    return samples * depth;
}

static png_idat_error open_idat(const unsigned char *buf, size_t len, const png_header *h,
                                size_t first_idat, size_t packed_row, png_idat **d)
{
    const unsigned bits = stored_pixel_bits(h->ihdr.color_type, h->ihdr.bit_depth);
    const png_idat_layout layout = {
        .buf = buf,
        .len = len,
        .first_idat = first_idat,
        .height = h->ihdr.height,
        .row_bytes = packed_row,
        .filter_bpp = bits < 8 ? 1 : bits / 8,
        .sixteen = h->ihdr.bit_depth == 16,
    };
    return png_idat_open(&layout, d);
}

/* What libspng reads around our decoding of the image data: the file
 * but for its IHDR, made 1x1, and its run of IDAT chunks, replaced by one
 * of a 1x1 image; what comes before and after is read from the file
 * itself (stand_in_read). libspng then checks and keeps the chunks around
 * the image data (metadata, IEND, chunks out of place) as it does when it
 * decodes all of it: its rules for those do not depend on the image's
 * size, and it ignores IDAT data past the last row. */
typedef struct {
    unsigned char ihdr[33], idat[64];
    const unsigned char *part[4];
    size_t part_len[4];
    int k;
    size_t at;
} stand_in;

static int stand_in_read(spng_ctx *ctx, void *user, void *dest, size_t n)
{
    (void)ctx;
    stand_in *s = user;
    unsigned char *to = dest;
    while (n > 0) {
        if (s->k == 4)
            return SPNG_IO_EOF;
        const size_t left = s->part_len[s->k] - s->at, take = left < n ? left : n;
        memcpy(to, s->part[s->k] + s->at, take);
        to += take;
        n -= take;
        if ((s->at += take) == s->part_len[s->k]) {
            s->k++;
            s->at = 0;
        }
    }
    return 0;
}

/* Reads the stand-in (s, which must outlive *ctx) with a libspng context
 * of its own, up to IEND: libspng's error, at *stage. */
static int read_around(const unsigned char *buf, size_t len, size_t first_idat, size_t tail,
                       stand_in *s, spng_ctx **ctx, png_stage *stage)
{
    memset(s, 0, sizeof *s);
    memcpy(s->ihdr, buf, 33);
    put32(s->ihdr + 16, 1);
    put32(s->ihdr + 20, 1);
    put_chunk(s->ihdr + 8, "IHDR", 13);   /* its CRC again */
    /* One row of one pixel, zero (a palette has at least one entry). */
    unsigned char row[9] = { 0 };
    uLongf zlen = sizeof s->idat - 12;
    const unsigned bits = stored_pixel_bits(buf[25], buf[24]);   /* IHDR's */
    if (compress2(s->idat + 8, &zlen, row, 1 + (bits + 7) / 8, 9) != Z_OK) {
        *stage = AT_IMAGE;
        return SPNG_EMEM;
    }
    put_chunk(s->idat, "IDAT", zlen);
    s->part[0] = s->ihdr;
    s->part_len[0] = sizeof s->ihdr;
    s->part[1] = buf + 33;
    s->part_len[1] = first_idat - 33;
    s->part[2] = s->idat;
    s->part_len[2] = 12 + zlen;
    s->part[3] = buf + tail;
    s->part_len[3] = len - tail;
    int err;
    *stage = AT_HEADER;
    if (!(*ctx = spng_ctx_new(SPNG_FLAGS)))
        return SPNG_EMEM;
    if ((err = spng_set_chunk_limits(*ctx, ANCILLARY_CHUNK_MAX, ANCILLARY_TOTAL_MAX)) ||
        (err = spng_set_png_stream(*ctx, stand_in_read, s)) ||
        (err = spng_set_crc_action(*ctx, SPNG_CRC_USE, SPNG_CRC_DISCARD)))
        return err;
    *stage = AT_IMAGE;
    if ((err = spng_decode_image(*ctx, row, sizeof row, SPNG_FMT_PNG, 0)))
        return err;
    *stage = AT_END;
    return spng_decode_chunks(*ctx);
}

/* What decoding met, in the order decode_png reports it (GIMG_OK for
 * nothing): a critical chunk's CRC mismatch first (check_chunks(): crc_ok,
 * and end, IEND's offset or len), the likely cause of any other error;
 * then libspng's error err, met at stage; then a file that ends before
 * IEND's last byte, which libspng takes for whole. */
static gimg_status decoding_failure(int crc_ok, size_t end, int err, png_stage stage,
                                    const unsigned char *buf, size_t len)
{
    if (!crc_ok)
        return crc_failure(buf, len);
    if (err)
        return spng_failure(err, stage, buf, len);
    if (end == len)
        return spng_failure(SPNG_IO_EOF, AT_END, buf, len);
    return GIMG_OK;
}

/* png_idat.c or libspng decodes the samples as stored (deinterlaced,
 * 16-bit in host order) straight into the image's buffer, which is at
 * least as large; expand_rows() then widens them in place where the
 * layout asks for it. */
static gimg_status decode_png(const unsigned char *buf, size_t len, const gimg_read_opts *o,
                              gimg_image *out)
{
    memset(out, 0, sizeof *out);
    spng_ctx *ctx;
    png_header h;
    struct spng_plte plte = { 0 };
    size_t total, stored;
    gimg_status st = open_png(buf, len, &ctx, &h);
    if (st || (st = check_before_pixels(ctx, &h, buf, len, 0, &plte, &stored, &total)) ||
        (st = gimg_image_alloc(out, (int)h.ihdr.width, (int)h.ihdr.height, h.channels,
                               h.sample)))
        goto done;
    /* libspng 0.7.3 puts the pixels of interlaced 1-, 2- and 4-bit images
     * in place by OR-ing them into its output, which must start zeroed. */
    if (h.ihdr.interlace_method && h.ihdr.bit_depth < 8)
        memset(out->data, 0, stored);
    side_job side = { .buf = buf, .len = len, .pixels = out->data, .bytes = total };
    atomic_init(&side.stop, 0);
    pthread_t side_thread;
    const int threaded =
        total >= SIDE_THREAD_MIN && pthread_create(&side_thread, NULL, side_work, &side) == 0;
    if (!threaded)
        side.end = check_chunks(buf, len, 0, &side.crc_ok);
    png_stage stage = AT_IMAGE;
    int err;
    size_t first_idat, tail;
    spng_ctx *around = NULL;   /* ours: libspng's reading around the image data */
    stand_in *around_in = NULL;
    if (gimg_png_own_idat && !h.ihdr.interlace_method &&
        one_idat_run(buf, len, &first_idat, &tail)) {
        const size_t packed_row = stored / h.ihdr.height;
        png_idat *d;
        png_idat_error e = open_idat(buf, len, &h, first_idat, packed_row, &d);
        if (!e)
            e = png_idat_read(d, out->data, packed_row, h.ihdr.height);
        png_idat_close(d);
        if (!(err = idat_spng_error(e)))
            err = (around_in = malloc(sizeof *around_in))
                      ? read_around(buf, len, first_idat, tail, around_in, &around, &stage)
                      : SPNG_EMEM;
    } else {
        err = spng_decode_image(ctx, out->data, total, SPNG_FMT_PNG, 0);
        /* Then the chunks after the image data, up to IEND (libspng stops
         * reading IDAT where the compressed stream ends): it finds a file
         * cut after its image data, but takes an IEND cut inside its CRC
         * for whole, which check_chunks() does not. */
        if (!err) {
            stage = AT_END;
            err = spng_decode_chunks(ctx);
        }
    }
    if (threaded) {
        atomic_store(&side.stop, 1);
        pthread_join(side_thread, NULL);
    }
    st = decoding_failure(side.crc_ok, side.end, err, stage, buf, len);
    bad_index bad;
    if (!st && needs_expansion(&h) &&
        expand_rows(out, &h, &plte, stored / h.ihdr.height, 0, &bad))
        st = palette_failure(&bad, &plte);
    if (!st) {
        const unsigned bits = significant_bits(ctx, &h);
        if (bits) {
            keep_significant_bits(out, h.ihdr.bit_depth - bits);
            out->maxval = (1u << bits) - 1;
        }
        st = read_meta(around ? around : ctx, buf, len, out);
    }
    spng_ctx_free(around);
    free(around_in);
done:
    spng_ctx_free(ctx);
    if (st) {
        gimg_image_free(out);
        memset(out, 0, sizeof *out);
    }
    return st;
}

/* ------------------------------------------------------ rows (band.h) */

/* A non-interlaced PNG decoded band by band, with png_idat.c (then
 * read_around() with the last band) or libspng's progressive decoding:
 * the rows decode_png gives, through the same checks, in the same order,
 * with the same messages. An interlaced one has no row
 * decoder (its last pass completes the first row): it is decoded whole.
 *  - At the opening: decode_png's checks before its allocation, then the
 *    critical chunks' CRCs over the whole file (a CRC mismatch anywhere
 *    outranks every other error, as in decode_png), then libspng's first
 *    read of the image data.
 *  - A band: its rows as stored, packed at the start of the band's
 *    buffer (a stored row is never longer than the image's), widened in
 *    place by expand_rows() and brought to their significant bits as
 *    decode_png does. libspng's error is met at the band whose rows it is
 *    in; with the last row, the rest of the file is read as decode_png
 *    reads it (spng_decode_chunks(), IEND whole).
 *  - An index past the palette: decode_png names the last in the image,
 *    and only once the file was read whole without error. So the band
 *    that meets one reads on to the end, the band's buffer taking the
 *    rows left, and gives what decode_png would: libspng's error, a file
 *    cut short, else the last such index.
 * Memory: libspng's context and its scanline buffers (a row or two), or
 * png_idat's slots (about 2 MiB), nothing that grows with the height. Metadata: in the header where all
 * its chunks precede the image data (libspng has read them then), else
 * all of it with the last band (band->meta): PNG's text and eXIf may
 * follow the image data. */
typedef struct {
    const unsigned char *buf;
    size_t len;
    spng_ctx *ctx;
    png_header h;
    struct spng_plte plte;
    size_t packed_row;   /* a row's bytes as stored (SPNG_FMT_PNG) */
    size_t end;          /* check_chunks()'s: IEND's offset, len when cut short */
    unsigned shift;      /* sBIT: samples >> shift (0: none) */
    int y;               /* the next row */
    int has_bad;         /* an index past the palette met: the last in bad */
    bad_index bad;
    int drop_pages;      /* gimg_read_opts.drop_pages */
    int meta_late;       /* metadata chunks follow the image data */
    png_idat *idat;      /* ours: the image data decoded by png_idat.c, */
    size_t first_idat, tail;   /* ... its run of IDAT chunks, */
    spng_ctx *around;    /* ... the rest read by libspng (read_around()) */
    stand_in around_in;
} png_rows;

/* 1 when a chunk of metadata (what read_meta() reads, and pHYs) follows
 * the first IDAT: the metadata is then complete only at the end. */
static int meta_after_idat(const unsigned char *buf, size_t len)
{
    static const char late[6][5] = { "iCCP", "eXIf", "tEXt", "zTXt", "iTXt", "pHYs" };
    int in_data = 0;
    for (size_t p = 8; p < len && len - p >= 12;) {
        const uint32_t n = gimg_be32(buf + p);
        const unsigned char *t = buf + p + 4;
        if (len - p - 12 < n || memcmp(t, "IEND", 4) == 0)
            break;
        in_data |= memcmp(t, "IDAT", 4) == 0;
        for (int k = 0; k < 6 && in_data; k++)
            if (memcmp(t, late[k], 4) == 0)
                return 1;
        p += 12 + (size_t)n;
    }
    return 0;
}

static int rows_meta_follows_png(const void *rows)
{
    return ((const png_rows *)rows)->meta_late;
}

static void rows_close_png(void *rows)
{
    png_rows *p = rows;
    if (!p)
        return;
    png_idat_close(p->idat);
    spng_ctx_free(p->around);
    spng_ctx_free(p->ctx);
    free(p);
}

static gimg_status rows_open_png(const unsigned char *buf, size_t len, const gimg_read_opts *o,
                                 gimg_image *header, void **rows)
{
    *rows = NULL;
    png_rows *p = calloc(1, sizeof *p);
    if (!p)
        return gimg_fail(GIMG_E_NOMEM, "out of memory decoding PNG");
    p->buf = buf;
    p->len = len;
    p->drop_pages = o && o->drop_pages;
    size_t stored, total;
    int crc_ok, err;
    gimg_status st = open_png(buf, len, &p->ctx, &p->h);
    if (st || p->h.ihdr.interlace_method ||
        (st = check_before_pixels(p->ctx, &p->h, buf, len, p->drop_pages, &p->plte, &stored,
                                  &total)))
        goto fail;
    p->end = check_chunks(buf, len, o && o->drop_pages, &crc_ok);
    if (!crc_ok) {
        st = crc_failure(buf, len);
        goto fail;
    }
    p->packed_row = stored / p->h.ihdr.height;
    if (gimg_png_own_idat && one_idat_run(buf, len, &p->first_idat, &p->tail))
        err = idat_spng_error(open_idat(buf, len, &p->h, p->first_idat, p->packed_row, &p->idat));
    else
        err = spng_decode_image(p->ctx, NULL, 0, SPNG_FMT_PNG, SPNG_DECODE_PROGRESSIVE);
    if (err) {
        st = spng_failure(err, AT_IMAGE, buf, len);
        goto fail;
    }
    const unsigned bits = significant_bits(p->ctx, &p->h);
    p->shift = bits ? p->h.ihdr.bit_depth - bits : 0;
    header->width = (int)p->h.ihdr.width;
    header->height = (int)p->h.ihdr.height;
    header->channels = p->h.channels;
    header->sample = p->h.sample;
    header->maxval = bits ? (1u << bits) - 1 : 0;
    /* The metadata now where all of it precedes the image data (libspng
     * has read those chunks), else with the last band. */
    if (!(p->meta_late = meta_after_idat(buf, len))) {
        gimg_image found = {0};
        st = read_meta(p->ctx, buf, len, &found);
        header->meta = found.meta;
        if (p->drop_pages)
            drop_pages(buf, buf + len);
        if (st) {
            gimg_meta_free(header->meta);
            header->meta = NULL;
            goto fail;
        }
    }
    *rows = p;
    return GIMG_OK;
fail:
    rows_close_png(p);
    return st;
}

/* Decodes the next band->height rows into band, in the image's layout
 * (sBIT aside), keeping the last index past the palette they hold; with
 * the image's last row, reads on to IEND's end. */
static gimg_status decode_band(png_rows *p, gimg_image *band)
{
    const int expand = needs_expansion(&p->h);
    const int height = (int)p->h.ihdr.height;
    const size_t stride = expand ? p->packed_row : band->stride_bytes;
    if (p->idat) {
        const int err = idat_spng_error(png_idat_read(p->idat, band->data, stride,
                                                      (uint32_t)band->height));
        if (err)
            return decoding_failure(1, p->end, err, AT_IMAGE, p->buf, p->len);
    }
    for (int i = 0; !p->idat && i < band->height; i++) {
        int err = spng_decode_row(p->ctx, band->data + (size_t)i * stride, p->packed_row);
        if (err == SPNG_EOI && p->y + i == height - 1)
            err = 0;   /* the last row, decoded */
        if (err)
            return decoding_failure(1, p->end, err, AT_IMAGE, p->buf, p->len);
    }
    const int first_row = p->y;
    p->y += band->height;
    gimg_status st;
    png_stage stage = AT_END;
    if (p->y == height &&
        (st = decoding_failure(1, p->end,
                               p->idat ? read_around(p->buf, p->len, p->first_idat, p->tail,
                                                     &p->around_in, &p->around, &stage)
                                       : spng_decode_chunks(p->ctx),
                               stage, p->buf, p->len)))
        return st;
    bad_index bad;
    if (expand && expand_rows(band, &p->h, &p->plte, p->packed_row, first_row, &bad)) {
        p->bad = bad;
        p->has_bad = 1;
    }
    return GIMG_OK;
}

static gimg_status rows_read_png(void *rows, gimg_image *band)
{
    png_rows *p = rows;
    const int height = (int)p->h.ihdr.height;
    gimg_status st = decode_band(p, band);
    /* Past the palette: on to the end, the band's buffer as scratch. */
    while (!st && p->has_bad && p->y < height) {
        gimg_image rest = *band;
        rest.height = height - p->y < band->height ? height - p->y : band->height;
        st = decode_band(p, &rest);
    }
    if (!st && p->has_bad)
        st = palette_failure(&p->bad, &p->plte);
    if (!st && p->shift)
        keep_significant_bits(band, p->shift);
    /* The metadata, whose chunks may follow the image data, with the last
     * rows (codec.h); its walk over the chunks maps pages of the whole
     * file, let go again. */
    if (!st && p->y == height && p->meta_late) {
        gimg_image found = {0};
        if ((st = read_meta(p->around ? p->around : p->ctx, p->buf, p->len, &found)))
            gimg_meta_free(found.meta);
        else
            band->meta = found.meta;
        if (p->drop_pages)
            drop_pages(p->buf, p->buf + p->len);
    }
    return st;
}

/* Float is written as 16-bit. */
static void layout_png(int *channels, gimg_sample *sample)
{
    *sample = *sample == GIMG_U8 ? GIMG_U8 : GIMG_U16;
}

static gimg_status encode_png(const gimg_image *im, const gimg_write_opts *o, unsigned char **buf,
                              size_t *len)
{
    return gimg_png_encode(im, o->png_level, buf, len);
}

static gimg_status wrows_open_png(const gimg_image *layout, const gimg_write_opts *o,
                                  void **rows, const unsigned char **bytes, size_t *len)
{
    png_writer *w;
    gimg_status st = png_writer_open(layout, o->png_level, &w);
    *rows = st ? NULL : w;
    *bytes = st ? NULL : w->out;
    *len = st ? 0 : (w->given = w->idat_at == NO_IDAT ? w->out_len : w->idat_at);
    return st;
}

static gimg_status wrows_put_png(void *rows, const gimg_image *band, const unsigned char **bytes,
                                 size_t *len)
{
    return png_writer_put(rows, band, bytes, len);
}

static void wrows_close_png(void *rows)
{
    png_writer_free(rows);
}

/* A chunk holds far more than meta.c's caps: no unfit_meta. */
const gimg_codec gimg_codec_png = {
    .format = GIMG_FMT_PNG,
    .name = "PNG",
    .extensions = "png",
    .sniff = sniff_png,
    .probe = probe_png,
    .decode = decode_png,
    .layout = layout_png,
    .encode = encode_png,
    .meta = GIMG_META_ICC | GIMG_META_EXIF | GIMG_META_XMP | GIMG_META_RESOLUTION |
            GIMG_META_TEXT,
    .maxval_rule = GIMG_MAXVAL_BITS,
    .rows_open = rows_open_png,
    .rows_meta_follows = rows_meta_follows_png,
    .rows_read = rows_read_png,
    .rows_close = rows_close_png,
    .wrows_open = wrows_open_png,
    .wrows_put = wrows_put_png,
    .wrows_close = wrows_close_png,
};
