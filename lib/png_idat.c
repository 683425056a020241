/*
 * png_idat.c — a non-interlaced PNG's image data: its consecutive IDAT
 * chunks' zlib stream inflated, and its rows unfiltered (PNG's filters
 * None, Sub, Up, Average and Paeth) into the samples as stored, 16-bit
 * ones swapped to host order.
 *
 * Why not libspng, which reads the rest of the file (codec_png.c): it
 * inflates and unfilters each row in turn on one thread, and Debian's
 * build unfilters a byte at a time: on a 16384^2 photo-like RGB PNG on a
 * 2-core EPYC VM, 54% of its decoding time was unfiltering (Paeth: 4.8
 * ns a byte), 36% zlib's inflate. Here a large image is inflated on a
 * thread of its own into a ring of slots, a few MiB ahead of the rows
 * asked for, while the caller's thread unfilters them a pixel at a time
 * in SSE2's 16-bit lanes (Sub, Average, Paeth: a chain from each pixel to
 * the next) or a row at a time (Up: vectorised by the compiler). The
 * decoding then takes about as long as the inflate alone.
 *
 * The same answers as libspng (tests/unit_codec_png.c holds them to it on
 * seeded images and damaged files): the stream's 2-byte header checked as
 * zlib checks it (method 8, a window of at most 32 KiB, no preset
 * dictionary), the deflate data inflated raw (the Adler-32 unchecked, as
 * codec_png.c tells libspng: the IDAT chunks' CRCs cover it) in the
 * pieces libspng asks zlib for (inflate_rows() says why), data past
 * the last row ignored unread, a stream that ends, or a run of IDAT chunks
 * that ends, before the last row refused (PNG_IDAT_SHORT). The caller has
 * checked the chunks' lengths against the file and their CRCs.
 *
 * Memory: 4 slots of about 512 KiB (2 of one row when a row is larger),
 * the previous row, zlib's 32 KiB window: nothing that grows with the
 * height.
 */
#include "png_idat.h"
#include "codec.h"   /* gimg_be32 */

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#if defined(__SSE2__) && defined(__x86_64__)
#define PIXELS_SSE2 1
#include <emmintrin.h>
#endif

#define HOST_LITTLE_ENDIAN (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__)
#define SLOT_BYTES ((size_t)512 << 10)
#define SLOTS_MAX 4
/* Below this much filtered data the inflate runs on the caller's thread. */
#define THREAD_MIN_BYTES ((size_t)2 << 20)

/* Rows as inflated: row i's bytes at data + i * filtered_row, then the
 * next row's filter type (the stream's order, shifted by one byte). */
typedef struct {
    unsigned char *data;
    uint32_t rows;         /* whole rows inflated into it */
    png_idat_error err;    /* what stopped the inflate after them */
} slot;

struct png_idat {
    png_idat_layout l;
    size_t filtered_row;   /* 1 + row_bytes */
    uint32_t rows_per_slot;
    int nslots;
    slot slots[SLOTS_MAX];

    /* The inflating side: the stream, where it is in the file. */
    z_stream z;
    int z_open;
    size_t at, left;          /* the next byte of IDAT payload, and those left in its chunk */
    uint32_t rows_inflated;

    /* The ring between the two (threaded: under lock). */
    int threaded;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t filled, freed;
    unsigned produced, released;   /* slots published, slots given back */
    int holding, stop;

    /* The unfiltering side. */
    slot *cur;
    uint32_t cur_row;
    uint32_t rows_given;
    unsigned char *prev;   /* the previous row as stored (zeros before the first) */
    unsigned char filter;  /* the next row's filter type */
    png_idat_error err;    /* sticky */
};

/* ------------------------------------------------------------- inflating */

/* Moves to the next IDAT chunk's payload when this one is spent: SHORT at
 * the end of the run (the caller checked the chunks' lengths). */
static png_idat_error next_chunk(png_idat *d)
{
    while (d->left == 0) {
        const size_t p = d->at + 4;   /* past the CRC */
        if (p > d->l.len || d->l.len - p < 12 || memcmp(d->l.buf + p + 4, "IDAT", 4) != 0)
            return PNG_IDAT_SHORT;
        const uint32_t n = gimg_be32(d->l.buf + p);
        if (d->l.len - p - 12 < n)
            return PNG_IDAT_SHORT;
        d->at = p + 8;
        d->left = n;
    }
    return PNG_IDAT_OK;
}

/* The stream's 2-byte header, which may span chunks, checked as zlib's
 * inflate checks it (RFC 1950). */
static png_idat_error read_zlib_header(png_idat *d)
{
    unsigned char h[2];
    for (int i = 0; i < 2; i++) {
        png_idat_error e = next_chunk(d);
        if (e)
            return e;
        h[i] = d->l.buf[d->at++];
        d->left--;
    }
    if ((h[0] & 15) != 8 || (h[0] >> 4) > 7 || ((unsigned)h[0] << 8 | h[1]) % 31 != 0 ||
        (h[1] & 0x20))
        return PNG_IDAT_ZLIB;
    return PNG_IDAT_OK;
}

/* Inflates n bytes to `to`, as libspng reads them: PNG_IDAT_OK, or why
 * not all of them came. More of the file only when zlib can make no
 * progress without it: the bits it holds may finish the piece. */
static png_idat_error inflate_bytes(png_idat *d, unsigned char *to, size_t n)
{
    d->z.next_out = to;
    d->z.avail_out = (uInt)n;
    while (d->z.avail_out > 0) {
        const int r = inflate(&d->z, Z_NO_FLUSH);
        const size_t used = (size_t)(d->z.next_in - (d->l.buf + d->at));
        d->at += used;
        d->left -= used;
        if (r == Z_STREAM_END)
            return d->z.avail_out > 0 ? PNG_IDAT_SHORT : PNG_IDAT_OK;
        if (r == Z_MEM_ERROR)
            return PNG_IDAT_NOMEM;
        if (r == Z_BUF_ERROR) {
            png_idat_error e = next_chunk(d);
            if (e)
                return e;
            d->z.next_in = (Bytef *)(d->l.buf + d->at);
            d->z.avail_in = d->left > UINT32_MAX ? UINT32_MAX : (uInt)d->left;
        } else if (r != Z_OK) {
            return PNG_IDAT_ZLIB;
        }
    }
    return PNG_IDAT_OK;
}

/* Inflates up to `want` rows into s, in libspng's pieces: a row's bytes
 * with the next row's filter type (the image's last row alone), each
 * piece a call of its own and its filter type checked after it. zlib
 * finds damage a code ahead of the output it was asked for (the slow
 * path decodes a match before it looks for room), so that where an error
 * is met, and whether as damage or as a bad filter type, depends on how
 * much output each call asked for: asked as libspng asks, the answers
 * are libspng's. s->rows: the rows whose pieces came whole and checked;
 * s->err: what stopped it short of `want`. */
static void inflate_rows(png_idat *d, slot *s, uint32_t want)
{
    s->rows = 0;
    s->err = PNG_IDAT_OK;
    for (uint32_t i = 0; i < want; i++) {
        const int last = d->rows_inflated + i == d->l.height - 1;
        unsigned char *piece = s->data + (size_t)i * d->filtered_row;
        if ((s->err = inflate_bytes(d, piece, last ? d->l.row_bytes : d->filtered_row)))
            break;
        if (!last && piece[d->l.row_bytes] > 4) {
            s->err = PNG_IDAT_FILTER;
            break;
        }
        s->rows++;
    }
    d->rows_inflated += s->rows;
}

/* The rows of the next slot to inflate: 0 when all are inflated. */
static uint32_t rows_to_inflate(const png_idat *d)
{
    const uint32_t left = d->l.height - d->rows_inflated;
    return left < d->rows_per_slot ? left : d->rows_per_slot;
}

static void *inflater(void *arg)
{
    png_idat *d = arg;
    for (;;) {
        const uint32_t want = rows_to_inflate(d);
        pthread_mutex_lock(&d->lock);
        while (!d->stop && d->produced - d->released >= (unsigned)d->nslots)
            pthread_cond_wait(&d->freed, &d->lock);
        const int stop = d->stop;
        pthread_mutex_unlock(&d->lock);
        if (stop || want == 0)
            return NULL;
        slot *s = &d->slots[d->produced % (unsigned)d->nslots];
        inflate_rows(d, s, want);
        pthread_mutex_lock(&d->lock);
        d->produced++;
        pthread_cond_signal(&d->filled);
        pthread_mutex_unlock(&d->lock);
        if (s->err)
            return NULL;
    }
}

/* The unfiltering side's next slot: waits for the inflater, or inflates
 * it here when unthreaded. */
static slot *take_slot(png_idat *d)
{
    if (!d->threaded) {
        inflate_rows(d, &d->slots[0], rows_to_inflate(d));
        return &d->slots[0];
    }
    pthread_mutex_lock(&d->lock);
    if (d->holding) {
        d->released++;
        pthread_cond_signal(&d->freed);
    }
    while (d->produced == d->released)
        pthread_cond_wait(&d->filled, &d->lock);
    d->holding = 1;
    slot *s = &d->slots[d->released % (unsigned)d->nslots];
    pthread_mutex_unlock(&d->lock);
    return s;
}

/* ----------------------------------------------------------- unfiltering */

/* Byte by byte: any bpp, and the reference for the pixel-wise loops. */
static void unfilter_bytes(unsigned type, const unsigned char *f, const unsigned char *prev,
                           unsigned char *out, size_t n, unsigned bpp)
{
    for (size_t i = 0; i < n; i++) {
        const unsigned a = i >= bpp ? out[i - bpp] : 0, b = prev[i];
        const unsigned c = i >= bpp ? prev[i - bpp] : 0;
        unsigned pred = 0;
        switch (type) {
        case 1: pred = a; break;
        case 2: pred = b; break;
        case 3: pred = (a + b) >> 1; break;
        case 4: {
            const int p = (int)a + (int)b - (int)c;
            const int pa = abs(p - (int)a), pb = abs(p - (int)b), pc = abs(p - (int)c);
            pred = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
            break;
        }
        }
        out[i] = (unsigned char)(f[i] + pred);
    }
}

#ifdef PIXELS_SSE2
/* A pixel of bpp (2 to 8) bytes in the 16-bit lanes of a vector, and
 * back, through a general register: a memcpy of 3 or 6 bytes goes through
 * the stack, whose wider load then waits for the narrower stores (a
 * failed store forwarding: twice as slow in all). */
static inline __m128i load_px(const unsigned char *p, unsigned bpp)
{
    uint64_t v = 0;
    for (unsigned k = 0; k < bpp; k++)
        v |= (uint64_t)p[k] << (8 * k);
    return _mm_unpacklo_epi8(_mm_cvtsi64_si128((long long)v), _mm_setzero_si128());
}

static inline void store_px(unsigned char *p, __m128i x, unsigned bpp)
{
    const uint64_t v = (uint64_t)_mm_cvtsi128_si64(_mm_packus_epi16(x, x));
    for (unsigned k = 0; k < bpp; k++)
        p[k] = (unsigned char)(v >> (8 * k));
}

static inline __m128i abs16(__m128i x)
{
    return _mm_max_epi16(x, _mm_sub_epi16(_mm_setzero_si128(), x));
}

/* m ? u : v, lane by lane. */
static inline __m128i select16(__m128i m, __m128i u, __m128i v)
{
    return _mm_or_si128(_mm_and_si128(m, u), _mm_andnot_si128(m, v));
}

/* Sub, Average and Paeth a pixel at a time; bpp a constant where inlined. */
static inline void unfilter_pixels(unsigned type, const unsigned char *f,
                                   const unsigned char *prev, unsigned char *out, size_t n,
                                   unsigned bpp)
{
    const __m128i bytes = _mm_set1_epi16(0xff);
    __m128i a = _mm_setzero_si128(), c = _mm_setzero_si128();
    for (size_t i = 0; i < n; i += bpp) {
        const __m128i x = load_px(f + i, bpp);
        __m128i pred;
        if (type == 1) {
            pred = a;
        } else {
            const __m128i b = load_px(prev + i, bpp);
            if (type == 3) {
                pred = _mm_srli_epi16(_mm_add_epi16(a, b), 1);
            } else {
                /* p = a + b - c: |p - a| = |b - c|, |p - b| = |a - c|,
                 * |p - c| = |(b - c) + (a - c)|. */
                const __m128i bc = _mm_sub_epi16(b, c), ac = _mm_sub_epi16(a, c);
                const __m128i pa = abs16(bc), pb = abs16(ac), pc = abs16(_mm_add_epi16(bc, ac));
                const __m128i not_a = _mm_or_si128(_mm_cmpgt_epi16(pa, pb), _mm_cmpgt_epi16(pa, pc));
                pred = select16(not_a, select16(_mm_cmpgt_epi16(pb, pc), c, b), a);
            }
            c = b;
        }
        a = _mm_and_si128(_mm_add_epi16(x, pred), bytes);
        store_px(out + i, a, bpp);
    }
}
#endif

static void unfilter_row(unsigned type, const unsigned char *f, const unsigned char *prev,
                         unsigned char *out, size_t n, unsigned bpp)
{
    if (type == 0) {
        memcpy(out, f, n);
        return;
    }
    if (type == 2) {
        for (size_t i = 0; i < n; i++)
            out[i] = (unsigned char)(f[i] + prev[i]);
        return;
    }
#ifdef PIXELS_SSE2
    switch (bpp) {   /* the constant lets the loads and stores be plain */
    case 2: unfilter_pixels(type, f, prev, out, n, 2); return;
    case 3: unfilter_pixels(type, f, prev, out, n, 3); return;
    case 4: unfilter_pixels(type, f, prev, out, n, 4); return;
    case 6: unfilter_pixels(type, f, prev, out, n, 6); return;
    case 8: unfilter_pixels(type, f, prev, out, n, 8); return;
    }
#endif
    unfilter_bytes(type, f, prev, out, n, bpp);
}

static void swap16(unsigned char *p, size_t n)
{
    for (size_t i = 0; i + 1 < n; i += 2) {
        uint16_t v;
        memcpy(&v, p + i, 2);
        v = (uint16_t)(v >> 8 | v << 8);
        memcpy(p + i, &v, 2);
    }
}

png_idat_error png_idat_read(png_idat *d, unsigned char *out, size_t stride, uint32_t n)
{
    const size_t row_bytes = d->l.row_bytes;
    const unsigned char *prev = d->prev;
    for (uint32_t i = 0; i < n && !d->err; i++) {
        if (!d->cur || d->cur_row == d->cur->rows) {
            if ((d->cur && d->cur->err) || d->rows_given == d->l.height) {
                d->err = d->cur && d->cur->err ? d->cur->err : PNG_IDAT_SHORT;
                break;
            }
            d->cur = take_slot(d);
            d->cur_row = 0;
            if (d->cur->rows == 0) {
                d->err = d->cur->err ? d->cur->err : PNG_IDAT_SHORT;
                break;
            }
        }
        const unsigned char *data = d->cur->data + (size_t)d->cur_row++ * d->filtered_row;
        d->rows_given++;
        unsigned char *row = out + (size_t)i * stride;
        unfilter_row(d->filter, data, prev, row, row_bytes, d->l.filter_bpp);
        if (d->rows_given < d->l.height)   /* the last row has no next */
            d->filter = data[row_bytes];
        if (d->l.sixteen && HOST_LITTLE_ENDIAN) {   /* the next row's filters need it as stored */
            memcpy(d->prev, row, row_bytes);
            swap16(row, row_bytes);
            prev = d->prev;
        } else {
            prev = row;
        }
    }
    /* The caller may change its rows before the next call. */
    if (prev != d->prev)
        memcpy(d->prev, prev, row_bytes);
    return d->err;
}

/* ---------------------------------------------------------------- set-up */

void png_idat_close(png_idat *d)
{
    if (!d)
        return;
    if (d->threaded) {
        pthread_mutex_lock(&d->lock);
        d->stop = 1;
        pthread_cond_signal(&d->freed);
        pthread_mutex_unlock(&d->lock);
        pthread_join(d->thread, NULL);
        pthread_mutex_destroy(&d->lock);
        pthread_cond_destroy(&d->filled);
        pthread_cond_destroy(&d->freed);
    }
    if (d->z_open)
        inflateEnd(&d->z);
    for (int i = 0; i < SLOTS_MAX; i++)
        free(d->slots[i].data);
    free(d->prev);
    free(d);
}

png_idat_error png_idat_open(const png_idat_layout *layout, png_idat **out)
{
    *out = NULL;
    png_idat *d = calloc(1, sizeof *d);
    if (!d)
        return PNG_IDAT_NOMEM;
    d->l = *layout;
    d->filtered_row = 1 + layout->row_bytes;
    d->rows_per_slot = d->filtered_row >= SLOT_BYTES ? 1 : (uint32_t)(SLOT_BYTES / d->filtered_row);
    if (d->rows_per_slot > layout->height)
        d->rows_per_slot = layout->height;
    const size_t filtered = d->filtered_row * layout->height;
    d->threaded = filtered >= THREAD_MIN_BYTES;
    d->nslots = !d->threaded ? 1 : d->filtered_row > SLOT_BYTES ? 2 : SLOTS_MAX;
    d->at = layout->first_idat + 8;
    d->left = gimg_be32(layout->buf + layout->first_idat);
    png_idat_error e = PNG_IDAT_NOMEM;
    if (!(d->prev = calloc(1, layout->row_bytes)))
        goto fail;
    for (int i = 0; i < d->nslots; i++)
        if (!(d->slots[i].data = malloc(d->rows_per_slot * d->filtered_row)))
            goto fail;
    if ((e = read_zlib_header(d)))
        goto fail;
    if (inflateInit2(&d->z, -15) != Z_OK) {
        e = PNG_IDAT_NOMEM;
        goto fail;
    }
    d->z_open = 1;
    d->z.next_in = (Bytef *)(d->l.buf + d->at);
    d->z.avail_in = d->left > UINT32_MAX ? UINT32_MAX : (uInt)d->left;
    /* The first row's filter type, alone, as libspng reads it. */
    if ((e = inflate_bytes(d, &d->filter, 1)) || (e = d->filter > 4 ? PNG_IDAT_FILTER : 0))
        goto fail;
    if (d->threaded) {
        pthread_mutex_init(&d->lock, NULL);
        pthread_cond_init(&d->filled, NULL);
        pthread_cond_init(&d->freed, NULL);
        if (pthread_create(&d->thread, NULL, inflater, d) != 0) {
            pthread_mutex_destroy(&d->lock);
            pthread_cond_destroy(&d->filled);
            pthread_cond_destroy(&d->freed);
            d->threaded = 0;   /* inflate on this thread, into the first slot */
        }
    }
    *out = d;
    return PNG_IDAT_OK;
fail:
    png_idat_close(d);
    return e;
}
