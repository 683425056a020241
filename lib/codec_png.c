/*
 * codec_png.c — PNG: reading with libspng 0.7.3 (Debian's libspng-dev);
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
 *  - gAMA, sBIT, iCCP and the like leave the samples as they are (as in
 *    libvips and ImageMagick).
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
 *    file is refused (GIMG_E_LIMIT), as libvips refuses it past 60 MB: a
 *    zTXt that inflates without end costs 64 MiB at most;
 *  - libspng 0.7.3 puts the pixels of interlaced 1-, 2- and 4-bit images
 *    in place by OR-ing them into its output: that is zeroed first.
 * libspng's error codes are worded for people ("corrupt PNG file: ...",
 * "truncated PNG file (cut short ...)"); it prints nothing and has no
 * warnings. One libspng context per call: thread-safe.
 *
 * Writing
 *
 * stb_image_write's PNG writer is not used: on a 12-megapixel photo its row
 * filtering alone takes about as long as our whole encode, and it has no
 * 16-bit mode. Output is the minimal valid file: IHDR, IDAT (split only
 * past 1 GiB), IEND.
 *
 * Filtering: each row gets the filter whose output has the smallest sum of
 * absolute values, bytes taken as signed (the heuristic libpng and most
 * encoders use). Rows are filtered in parallel (OpenMP).
 *
 * Compression, at png_level L:
 *  - L = 0: libdeflate level 0, stored blocks.
 *  - L >= 1: two encoders race on two threads and the smaller zlib stream
 *    wins: libdeflate at level L, and our own Huffman coder below. The
 *    second exists because photographs' filtered rows are close to noise:
 *    LZ matching finds little there, and libdeflate's fast levels (1.14)
 *    take short matches that cost more than the literals they replace;
 *    plain entropy coding is both faster and 2-15% smaller on such images
 *    (and than ImageMagick's output). On drawn or flat images LZ wins by
 *    far, and libdeflate's stream is kept.
 */
#include "codec.h"
#include "io_internal.h"

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

/* Largest IDAT payload we emit; PNG allows up to 2^31 - 1. */
#define IDAT_MAX ((size_t)1 << 30)
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

/* Fills raw with the filtered scanlines: per row a type byte then n bytes. */
static gimg_status filter_image(const gimg_image *im, size_t n, unsigned char *raw)
{
    size_t bpp = gimg_pixel_bytes(im);
    int failed = 0;
#pragma omp parallel
    {
        /* Per thread: a zero row (above the first), and for 16-bit the
         * big-endian current and previous rows. */
        unsigned char *work = calloc(3, n ? n : 1);
        if (!work) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (int y = 0; y < im->height; y++) {
            if (!work)
                continue;
            const unsigned char *cur, *prev;
            if (im->sample == GIMG_U8) {
                cur = gimg_row(im, y);
                prev = y ? gimg_row(im, y - 1) : work;
            } else {
                to_big_endian(gimg_row(im, y), n, work + n);
                if (y)
                    to_big_endian(gimg_row(im, y - 1), n, work + 2 * n);
                cur = work + n;
                prev = y ? work + 2 * n : work;
            }
            unsigned char *out = raw + (size_t)y * (n + 1);
            int type = choose_filter(cur, prev, n, bpp);
            out[0] = (unsigned char)type;
            apply_filter(type, cur, prev, n, bpp, out + 1);
        }
        free(work);
    }
    if (failed)
        return gimg_fail(GIMG_E_NOMEM, "out of memory filtering PNG rows");
    return GIMG_OK;
}

/* ------------------------------------------------ the entropy coder */

/* A zlib stream of dynamic-Huffman DEFLATE blocks whose only matches are
 * runs (distance 1) of at least MIN_RUN equal bytes: those cover the flat
 * parts of an image, where filtered bytes are runs of zeros, while short
 * matches, which cost more than they save on photographic data, are never
 * taken. Each block gets its own codes; a block that would code larger
 * than stored is stored. */

#define BLOCK_BYTES ((size_t)1 << 18)
#define MIN_RUN 8
#define MAX_RUN 258
#define RUN_FLAG 0x8000u   /* token: run of (token & 0x1ff) bytes */

typedef struct {
    unsigned char *out;
    uint64_t bits;
    unsigned nbits;
} bitw;

/* Appends n <= 32 bits, first bit lowest, as DEFLATE packs them. */
static inline void put_bits(bitw *w, uint32_t v, unsigned n)
{
    w->bits |= (uint64_t)v << w->nbits;
    w->nbits += n;
    if (w->nbits >= 32) {
        w->out[0] = (unsigned char)w->bits;
        w->out[1] = (unsigned char)(w->bits >> 8);
        w->out[2] = (unsigned char)(w->bits >> 16);
        w->out[3] = (unsigned char)(w->bits >> 24);
        w->out += 4;
        w->bits >>= 32;
        w->nbits -= 32;
    }
}

/* Pads to a byte boundary with zero bits and writes out what is pending. */
static void align_bits(bitw *w)
{
    while (w->nbits > 0) {
        *w->out++ = (unsigned char)w->bits;
        w->bits >>= 8;
        w->nbits = w->nbits >= 8 ? w->nbits - 8 : 0;
    }
    w->bits = 0;
}

typedef struct {
    uint64_t w;
    int node;
} hitem;

static int cmp_item(const void *pa, const void *pb)
{
    const hitem *a = pa, *b = pb;
    if (a->w != b->w)
        return a->w < b->w ? -1 : 1;
    return a->node - b->node;
}

/* Huffman code lengths (at most maxlen) for freq[0..n), n <= 288; unused
 * symbols get 0. Over-long codes are rare: when they happen the
 * frequencies are flattened and the code rebuilt. */
static void huff_lengths(const uint32_t *freq, int n, unsigned maxlen, unsigned char *len)
{
    uint64_t f[288];
    hitem leaf[288];
    uint64_t iw[288];
    int parent[2 * 288], m = 0;
    unsigned char depth[2 * 288];
    for (int s = 0; s < n; s++)
        f[s] = freq[s];
    for (;;) {
        m = 0;
        memset(len, 0, (size_t)n);
        for (int s = 0; s < n; s++)
            if (f[s])
                leaf[m].w = f[s], leaf[m].node = s, m++;
        if (m == 0)
            return;
        if (m == 1) {
            len[leaf[0].node] = 1;
            return;
        }
        qsort(leaf, (size_t)m, sizeof leaf[0], cmp_item);
        /* Two queues: sorted leaves, and internal nodes, which are made in
         * nondecreasing weight order. Node ids: leaves 0..m-1 (in sorted
         * order), internal nodes m..2m-2. */
        int li = 0, ii = 0;
        for (int k = 0; k < m - 1; k++) {
            int pick[2];
            uint64_t w = 0;
            for (int j = 0; j < 2; j++) {
                if (li < m && (ii >= k || leaf[li].w <= iw[ii])) {
                    pick[j] = li;
                    w += leaf[li++].w;
                } else {
                    pick[j] = m + ii;
                    w += iw[ii++];
                }
            }
            iw[k] = w;
            parent[pick[0]] = parent[pick[1]] = m + k;
        }
        int root = 2 * m - 2;
        depth[root] = 0;
        unsigned longest = 0;
        for (int node = root - 1; node >= 0; node--) {
            unsigned d = depth[parent[node]] + 1u;
            depth[node] = (unsigned char)(d > 255 ? 255 : d);
            if (node < m && d > longest)
                longest = d;
        }
        if (longest <= maxlen) {
            for (int k = 0; k < m; k++)
                len[leaf[k].node] = depth[k];
            return;
        }
        for (int s = 0; s < n; s++)
            if (f[s])
                f[s] = (f[s] >> 1) | 1;
    }
}

/* Canonical codes (RFC 1951 3.2.2), bit-reversed for put_bits(). */
static void huff_codes(const unsigned char *len, int n, uint16_t *code)
{
    unsigned count[16] = { 0 }, next[16];
    for (int s = 0; s < n; s++)
        count[len[s]]++;
    count[0] = 0;
    unsigned c = 0;
    for (int b = 1; b < 16; b++) {
        c = (c + count[b - 1]) << 1;
        next[b] = c;
    }
    for (int s = 0; s < n; s++) {
        unsigned l = len[s];
        if (!l)
            continue;
        unsigned v = next[l]++, r = 0;
        for (unsigned b = 0; b < l; b++)
            r |= ((v >> b) & 1u) << (l - 1 - b);
        code[s] = (uint16_t)r;
    }
}

/* Length symbol (257-285), extra bits and their value for a run of l. */
static inline void length_code(unsigned l, unsigned *sym, unsigned *nextra, unsigned *extra)
{
    if (l == 258) {
        *sym = 285, *nextra = 0, *extra = 0;
    } else if (l < 11) {
        *sym = 254 + l, *nextra = 0, *extra = 0;
    } else {
        unsigned d = l - 3, e = (unsigned)(31 - __builtin_clz(d)) - 2;
        *sym = 257 + 4 * (e + 1) + (d >> e) - 4;
        *nextra = e;
        *extra = d & ((1u << e) - 1);
    }
}

/* Splits data[start, end) into literals and runs; data[start - 1] (if
 * start > 0) is already in the stream, so a run may continue it. */
static inline uint64_t load64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Splits data[start, end) into literals and runs; data[start - 1] (if
 * start > 0) is already in the stream, so a run may continue it. */
static size_t tokenize(const unsigned char *data, size_t start, size_t end, uint16_t *tok,
                       uint32_t *freq)
{
    _Static_assert(MIN_RUN == 8, "the run test below compares 8 bytes at once");
    size_t nt = 0, i = start;
    while (i < end) {
        unsigned char b = data[i];
        uint64_t all_b = b * 0x0101010101010101ull;
        if (i > 0 && data[i - 1] == b && end - i >= MIN_RUN && load64(data + i) == all_b) {
            size_t lim = end - i < MAX_RUN ? end - i : MAX_RUN, r = 8;
            while (r + 8 <= lim && load64(data + i + r) == all_b)
                r += 8;
            while (r < lim && data[i + r] == b)
                r++;
            unsigned sym, ne, ex;
            length_code((unsigned)r, &sym, &ne, &ex);
            freq[sym]++;
            tok[nt++] = (uint16_t)(RUN_FLAG | r);
            i += r;
            continue;
        }
        freq[b]++;
        tok[nt++] = b;
        i++;
    }
    return nt;
}

static const unsigned char cl_order[19] = { 16, 17, 18, 0, 8, 7, 9, 6, 10, 5,
                                            11, 4, 12, 3, 13, 2, 14, 1, 15 };

static void put_stored(bitw *w, const unsigned char *data, size_t n, int final)
{
    do {
        size_t m = n > 65535 ? 65535 : n;
        n -= m;
        put_bits(w, final && n == 0, 1);
        put_bits(w, 0, 2);
        align_bits(w);
        w->out[0] = (unsigned char)m;
        w->out[1] = (unsigned char)(m >> 8);
        w->out[2] = (unsigned char)~m;
        w->out[3] = (unsigned char)(~m >> 8);
        memcpy(w->out + 4, data, m);
        w->out += 4 + m;
        data += m;
    } while (n > 0);
}

static void encode_block(bitw *w, const unsigned char *data, size_t start, size_t end, int final,
                         uint16_t *tok)
{
    uint32_t freq[286] = { 0 };
    size_t nt = tokenize(data, start, end, tok, freq);
    freq[256] = 1;   /* end of block */

    unsigned char len[286 + 30];
    unsigned char *dlen = len + 286;
    uint16_t code[286], dcode[1];
    huff_lengths(freq, 286, 15, len);
    /* A lone code would be a one-symbol (incomplete) code, which some
     * decoders refuse for literal/lengths: pair it with a second one. */
    int used = 0;
    for (int s = 0; s < 286; s++)
        used += len[s] != 0;
    if (used < 2)
        len[0] = len[256] = 1;
    huff_codes(len, 286, code);
    /* One distance, 1: a single 1-bit code, as RFC 1951 allows. */
    memset(dlen, 0, 30);
    dlen[0] = 1;
    dcode[0] = 0;
    int nlit = 286, ndist = 1;
    while (nlit > 257 && len[nlit - 1] == 0)
        nlit--;

    /* The code lengths, run-length coded (symbols 16, 17, 18). */
    unsigned char all[286 + 30];
    memcpy(all, len, (size_t)nlit);
    memcpy(all + nlit, dlen, (size_t)ndist);
    int total = nlit + ndist, ncl = 0;
    unsigned char clsym[286 + 30], clext[286 + 30];
    uint32_t clfreq[19] = { 0 };
    for (int i = 0; i < total;) {
        unsigned char v = all[i];
        int run = 1;
        while (i + run < total && all[i + run] == v)
            run++;
        i += run;
        if (v == 0) {
            while (run >= 11) {
                int r = run > 138 ? 138 : run;
                clsym[ncl] = 18, clext[ncl++] = (unsigned char)(r - 11);
                run -= r;
            }
            if (run >= 3) {
                clsym[ncl] = 17, clext[ncl++] = (unsigned char)(run - 3);
                run = 0;
            }
        } else {
            clsym[ncl] = v, clext[ncl++] = 0;
            run--;
            while (run >= 3) {
                int r = run > 6 ? 6 : run;
                clsym[ncl] = 16, clext[ncl++] = (unsigned char)(r - 3);
                run -= r;
            }
        }
        while (run-- > 0)
            clsym[ncl] = v, clext[ncl++] = 0;
    }
    for (int k = 0; k < ncl; k++)
        clfreq[clsym[k]]++;
    /* zlib refuses an incomplete code-length code: keep two codes at least. */
    int clused = 0;
    for (int k = 0; k < 19; k++)
        clused += clfreq[k] != 0;
    if (clused < 2)
        clfreq[clfreq[0] ? 1 : 0]++;
    unsigned char cllen[19];
    uint16_t clcode[19];
    huff_lengths(clfreq, 19, 7, cllen);
    huff_codes(cllen, 19, clcode);
    int nclen = 19;
    while (nclen > 4 && cllen[cl_order[nclen - 1]] == 0)
        nclen--;

    /* Exact size of the dynamic block, to compare with storing. */
    static const unsigned char clx[19] = { [16] = 2, [17] = 3, [18] = 7 };
    uint64_t bitsz = 3 + 5 + 5 + 4 + 3 * (uint64_t)nclen;
    for (int k = 0; k < ncl; k++)
        bitsz += cllen[clsym[k]] + clx[clsym[k]];
    for (int s = 0; s < 286; s++) {
        if (!freq[s])
            continue;
        unsigned extra = 0;
        if (s >= 265 && s < 285)
            extra = (unsigned)(s - 261) / 4;
        bitsz += (uint64_t)freq[s] * (len[s] + extra + (s > 256 ? dlen[0] : 0));
    }
    size_t n = end - start;
    /* Storing: per 65535-byte piece a 3-bit header padded to a byte, LEN
     * and NLEN, then the bytes; the first pad depends on where we are. */
    unsigned at = w->nbits % 8;
    uint64_t pieces = (n + 65534) / 65535;
    uint64_t stored = ((at + 3 + 7) / 8 * 8 - at) + 32 + 8 * (uint64_t)n + 40 * (pieces - 1);
    if (bitsz >= stored) {
        put_stored(w, data + start, n, final);
        return;
    }

    put_bits(w, final ? 1 : 0, 1);
    put_bits(w, 2, 2);
    put_bits(w, (uint32_t)(nlit - 257), 5);
    put_bits(w, (uint32_t)(ndist - 1), 5);
    put_bits(w, (uint32_t)(nclen - 4), 4);
    for (int k = 0; k < nclen; k++)
        put_bits(w, cllen[cl_order[k]], 3);
    for (int k = 0; k < ncl; k++) {
        put_bits(w, clcode[clsym[k]], cllen[clsym[k]]);
        if (clx[clsym[k]])
            put_bits(w, clext[k], clx[clsym[k]]);
    }
    uint32_t rc[259];   /* run code + dist code, by run length; built lazily */
    unsigned rn[259];
    memset(rn, 0, sizeof rn);
    for (size_t k = 0; k < nt; k++) {
        unsigned t = tok[k];
        if (!(t & RUN_FLAG)) {
            put_bits(w, code[t], len[t]);
            continue;
        }
        unsigned r = t & 0x1ff;
        if (!rn[r]) {
            unsigned sym, ne, ex;
            length_code(r, &sym, &ne, &ex);
            rc[r] = code[sym] | ex << len[sym] | (uint32_t)dcode[0] << (len[sym] + ne);
            rn[r] = len[sym] + ne + dlen[0];
        }
        put_bits(w, rc[r], rn[r]);
    }
    put_bits(w, code[256], len[256]);
}

/* Up to this many segments of a large image are coded in parallel. */
#define MAX_SEGMENTS 16

/* The largest stream deflate_entropy() writes for n bytes: every block is
 * at most its stored size, plus an empty stored block after each segment. */
static size_t entropy_bound(size_t n)
{
    size_t blocks = n / BLOCK_BYTES + 1;
    return n + 6 * (n / 65535 + blocks + 1) + 8 * MAX_SEGMENTS + 16;
}

/* Codes data[start, end) as blocks into out and returns the bytes written.
 * Segments other than the last end with an empty stored block, which
 * brings the stream to a byte boundary (as zlib's sync flush does) so that
 * the next segment, coded separately, can simply follow. */
static size_t encode_segment(const unsigned char *data, size_t start, size_t end, int last,
                             unsigned char *out, uint16_t *tok)
{
    bitw w = { .out = out };
    do {
        size_t stop = end - start > BLOCK_BYTES ? start + BLOCK_BYTES : end;
        encode_block(&w, data, start, stop, last && stop == end, tok);
        start = stop;
    } while (start < end);
    if (!last) {
        put_bits(&w, 0, 3);
        align_bits(&w);
        memcpy(w.out, "\0\0\xff\xff", 4);
        w.out += 4;
    }
    align_bits(&w);
    return (size_t)(w.out - out);
}

/* Writes a zlib stream of data[0, n) at out (room: entropy_bound(n)) and
 * returns its size, 0 if memory ran out. */
static size_t deflate_entropy(const unsigned char *data, size_t n, unsigned char *out)
{
    size_t blocks = (n + BLOCK_BYTES - 1) / BLOCK_BYTES;
    int segs = 1;
#ifdef _OPENMP
    segs = omp_get_max_threads();
#endif
    /* Segments of 4 blocks at least, so the sync blocks cost nothing. */
    if ((size_t)segs > blocks / 4)
        segs = (int)(blocks / 4);
    if (segs > MAX_SEGMENTS)
        segs = MAX_SEGMENTS;
    if (segs < 1)
        segs = 1;
    size_t per = (blocks + (size_t)segs - 1) / (size_t)segs * BLOCK_BYTES;

    unsigned char *part[MAX_SEGMENTS] = { NULL };
    size_t part_len[MAX_SEGMENTS] = { 0 };
    int failed = 0;
    out[0] = 0x78;   /* CM 8, 32 KiB window */
    out[1] = 0x01;   /* FLEVEL 0; (0x78 << 8 | 0x01) % 31 == 0 */
    part[0] = out + 2;
#pragma omp parallel for num_threads(segs) schedule(static, 1)
    for (int k = 0; k < segs; k++) {
        size_t start = (size_t)k * per;
        if (start >= n)
            continue;
        size_t end = n - start > per ? start + per : n;
        uint16_t *tok = malloc(BLOCK_BYTES * sizeof *tok);
        if (k > 0)
            part[k] = malloc(entropy_bound(end - start));
        if (tok && part[k]) {
            part_len[k] = encode_segment(data, start, end, end == n, part[k], tok);
        } else {
#pragma omp atomic write
            failed = 1;
        }
        free(tok);
    }
    unsigned char *p = out + 2 + part_len[0];
    for (int k = 1; k < segs; k++) {
        if (part[k])
            memcpy(p, part[k], part_len[k]);
        p += part_len[k];
        free(part[k]);
    }
    if (failed)
        return 0;
    uint32_t adler = libdeflate_adler32(1, data, n);
    for (int k = 3; k >= 0; k--)
        *p++ = (unsigned char)(adler >> (8 * k));
    return (size_t)(p - out);
}

/* --------------------------------------------------- libdeflate, racing */

typedef struct {
    const unsigned char *raw;
    size_t raw_size;
    int level;
    unsigned char *out;   /* HEAD bytes, then the zlib stream */
    size_t avail;
    size_t zlen;          /* 0 on failure */
} ldjob;

static void *run_libdeflate(void *arg)
{
    ldjob *j = arg;
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(j->level);
    j->zlen = c ? libdeflate_zlib_compress(c, j->raw, j->raw_size, j->out + HEAD, j->avail) : 0;
    libdeflate_free_compressor(c);
    return NULL;
}

/* Whether LZ may pay here: libdeflate at `level` and the entropy coder
 * both compress SAMPLES stretches spread over the data (5% of a 12 MP RGB
 * image), and LZ is tried only where it does better there.
 * Photographs skip LZ and its cost; drawn images take it. scratch holds
 * entropy_bound(SAMPLE_BYTES) bytes at least. */
#define SAMPLES 8
#define SAMPLE_BYTES ((size_t)1 << 18)

static int lz_may_win(const unsigned char *raw, size_t n, int level, unsigned char *scratch,
                      size_t scratch_size)
{
    if (n < 2 * SAMPLES * SAMPLE_BYTES)
        return 1;   /* small: just race */
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(level);
    if (!c)
        return 1;
    uint64_t lz = 0, en = 0;
    size_t step = (n - SAMPLE_BYTES) / (SAMPLES - 1);
    for (int k = 0; k < SAMPLES; k++) {
        const unsigned char *p = raw + (size_t)k * step;
        size_t z = libdeflate_zlib_compress(c, p, SAMPLE_BYTES, scratch, scratch_size);
        lz += z ? z : SAMPLE_BYTES;
        z = deflate_entropy(p, SAMPLE_BYTES, scratch);
        en += z ? z : SAMPLE_BYTES;
    }
    libdeflate_free_compressor(c);
    return lz < en;
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

/* Room a candidate output needs around a zlib stream of up to `bound`. */
static int output_capacity(size_t bound, size_t *cap)
{
    size_t max_chunks = bound / IDAT_MAX + 1;
    return !__builtin_add_overflow(bound, HEAD + 12 * max_chunks + 12, cap);
}

/* Turns out (HEAD bytes, then a zlib stream of zlen) into the PNG file. */
static size_t finish_png(const gimg_image *im, unsigned char *out, size_t zlen)
{
    static const unsigned char color_type[5] = { 0, 0, 4, 2, 6 };
    unsigned char *p = out;
    memcpy(p, "\x89PNG\r\n\x1a\n", 8);
    p += 8;
    unsigned char *ihdr = p + 8;
    put32(ihdr, (uint32_t)im->width);
    put32(ihdr + 4, (uint32_t)im->height);
    ihdr[8] = (unsigned char)(im->sample * 8);   /* bit depth */
    ihdr[9] = color_type[im->channels];
    ihdr[10] = ihdr[11] = ihdr[12] = 0;          /* deflate, adaptive filters, no interlace */
    p = put_chunk(p, "IHDR", 13);

    /* Spread the chunks out, from the last back, each moving by the 12
     * bytes of framing of every chunk before it; then frame them. */
    size_t chunks = (zlen + IDAT_MAX - 1) / IDAT_MAX;
    for (size_t k = chunks; k-- > 1;)
        memmove(out + HEAD + k * IDAT_MAX + 12 * k, out + HEAD + k * IDAT_MAX,
                k + 1 == chunks ? zlen - k * IDAT_MAX : IDAT_MAX);
    for (size_t k = 0; k < chunks; k++)
        p = put_chunk(p, "IDAT", k + 1 == chunks ? zlen - k * IDAT_MAX : IDAT_MAX);
    p = put_chunk(p, "IEND", 0);
    return (size_t)(p - out);
}

gimg_status gimg_png_encode(const gimg_image *im, int level, unsigned char **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    if ((im->sample != GIMG_U8 && im->sample != GIMG_U16) || im->channels < 1 ||
        im->channels > 4)
        return gimg_fail(GIMG_E_FORMAT, "PNG cannot hold a %d-channel %d-bit image",
                         im->channels, (int)im->sample * 8);
    if (level < 0 || level > 12)
        return gimg_fail(GIMG_E_USAGE, "PNG compression level %d is not in 0..12", level);

    size_t n = (size_t)im->width * gimg_pixel_bytes(im), raw_size;
    if (__builtin_add_overflow(n, 1, &raw_size) ||
        __builtin_mul_overflow(raw_size, (size_t)im->height, &raw_size))
        return gimg_fail(GIMG_E_LIMIT, "image too large to encode as PNG");
    unsigned char *raw = malloc(raw_size);
    if (!raw)
        return gimg_fail(GIMG_E_NOMEM, "out of memory allocating %zu bytes", raw_size);
    gimg_status st = filter_image(im, n, raw);
    if (st) {
        free(raw);
        return st;
    }

    /* Two candidate outputs, each with room for the PNG around its zlib
     * stream: libdeflate's (job.out) and the entropy coder's (en_out). */
    ldjob job = { .raw = raw, .raw_size = raw_size, .level = level };
    size_t ld_cap = 0, en_cap = 0, en_len = 0;
    unsigned char *en_out = NULL;
    if (!output_capacity(entropy_bound(raw_size), &en_cap)) {
        free(raw);
        return gimg_fail(GIMG_E_LIMIT, "image too large to encode as PNG");
    }
    if (level > 0 && !(en_out = malloc(en_cap))) {
        free(raw);
        return gimg_fail(GIMG_E_NOMEM, "out of memory allocating %zu bytes", en_cap);
    }
    if (level == 0 || lz_may_win(raw, raw_size, level, en_out, en_cap)) {
        struct libdeflate_compressor *probe = libdeflate_alloc_compressor(level);
        size_t bound = probe ? libdeflate_zlib_compress_bound(probe, raw_size) : 0;
        libdeflate_free_compressor(probe);
        if (!bound || !output_capacity(bound, &ld_cap) || !(job.out = malloc(ld_cap))) {
            free(en_out);
            free(raw);
            return gimg_fail(GIMG_E_NOMEM, "out of memory allocating the PNG output");
        }
        job.avail = bound;
    }

    if (job.out && en_out) {
        pthread_t t;
        int threaded = pthread_create(&t, NULL, run_libdeflate, &job) == 0;
        en_len = deflate_entropy(raw, raw_size, en_out + HEAD);
        if (threaded)
            pthread_join(t, NULL);
        else
            run_libdeflate(&job);
    } else if (job.out) {
        run_libdeflate(&job);
    } else {
        en_len = deflate_entropy(raw, raw_size, en_out + HEAD);
    }
    free(raw);

    unsigned char *out = job.out;
    size_t zlen = job.zlen;
    if (en_len && (!zlen || en_len < zlen)) {
        free(job.out);
        out = en_out;
        zlen = en_len;
    } else {
        free(en_out);
    }
    if (!zlen) {
        free(out);
        return gimg_fail(GIMG_E_NOMEM, "out of memory compressing PNG data");
    }
    size_t total = finish_png(im, out, zlen);
    unsigned char *shrunk = realloc(out, total);
    *buf = shrunk ? shrunk : out;
    *len = total;
    return GIMG_OK;
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

/* Walks the chunks from the first to IEND, checking the CRC of each
 * critical one (IHDR, PLTE, IDAT, IEND: libspng enforces no other). Returns
 * the offset of the first whose CRC does not match (*crc_ok = 0), or of
 * IEND when all match (*crc_ok = 1); len when the file ends, or stops
 * being chunks, before IEND's last byte. */
static size_t check_chunks(const unsigned char *buf, size_t len, int *crc_ok)
{
    *crc_ok = 1;
    for (size_t p = 8; p < len && len - p >= 12;) {
        const uint32_t n = gimg_be32(buf + p);
        const unsigned char *t = buf + p + 4;
        if (!is_letter(t[0]) || !is_letter(t[1]) || !is_letter(t[2]) || !is_letter(t[3]) ||
            len - p - 12 < n)
            break;
        if (t[0] <= 'Z' && libdeflate_crc32(0, t, (size_t)n + 4) != gimg_be32(t + 4 + n)) {
            *crc_ok = 0;
            return p;
        }
        if (memcmp(t, "IEND", 4) == 0)
            return p;
        p += 12 + (size_t)n;
    }
    return len;
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
    size_t at = check_chunks(buf, len, &crc_ok);
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

/* Rewrites the image, decoded by libspng as stored (rows of packed_row
 * bytes from the start of the buffer), in the image's layout, in place:
 * gray below 8 bits scaled to 8 (v * 255 / (2^depth - 1), as libpng,
 * ImageMagick and libvips do), palette indices looked up (an index past
 * the palette's entries is refused: libspng would read it as black), and
 * the tRNS alpha added (0 where a gray or RGB pixel equals tRNS's colour,
 * else opaque; the palette's alphas, opaque past tRNS's entries). Rows
 * from the last, pixels from the last: each pixel's output lies at or
 * after its input, and after the input of every pixel not yet read, so a
 * pixel is read before anything overwrites it. */
static gimg_status expand_rows(gimg_image *im, const png_header *h,
                               const struct spng_plte *plte, size_t packed_row)
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
                if (i >= plte->n_entries)
                    return gimg_fail(GIMG_E_FORMAT,
                                     "corrupt PNG file: palette index %u (pixel %u, %d) past "
                                     "the palette's %u colours",
                                     i, x, y, plte->n_entries);
                memcpy(dst + (size_t)n * x, lut[i], (size_t)n);
            }
            break;
        }
        }
    }
    return GIMG_OK;
}

/* ------------------------------------------------- beside the decoder */

/* Images from this size on are decoded with the side work below on a
 * second thread; smaller ones check their CRCs first, on the same one. */
#define SIDE_THREAD_MIN ((size_t)4 << 20)
/* The side thread faults the image's pages in this much at a time. */
#define PREFAULT_STEP ((size_t)8 << 20)

/* What a second thread does while libspng decodes a large image, so that
 * libspng does neither: check the critical chunks' CRCs (with libdeflate,
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
    j->end = check_chunks(j->buf, j->len, &j->crc_ok);
    return NULL;
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

/* libspng decodes the samples as stored (deinterlaced, 16-bit in host
 * order) straight into the image's buffer, which is at least as large;
 * expand_rows() then widens them in place where the layout asks for it. */
static gimg_status decode_png(const unsigned char *buf, size_t len, const gimg_read_opts *o,
                              gimg_image *out)
{
    memset(out, 0, sizeof *out);
    spng_ctx *ctx;
    png_header h;
    struct spng_plte plte = { 0 };
    size_t total, stored;
    int err = 0;
    gimg_status st = open_png(buf, len, &ctx, &h);
    if (st)
        goto done;
    /* The limits, from the header, before any allocation for the pixels. */
    if ((st = gimg_check_size(h.ihdr.width, h.ihdr.height, h.channels, h.sample, NULL, &total)))
        goto done;
    if ((err = spng_decoded_image_size(ctx, SPNG_FMT_PNG, &stored)) ||
        (h.ihdr.color_type == SPNG_COLOR_TYPE_INDEXED && (err = spng_get_plte(ctx, &plte)))) {
        st = spng_failure(err, AT_CHUNKS, buf, len);
        goto done;
    }
    if (stored > total) {   /* never: a stored sample is never wider than ours */
        st = gimg_fail(GIMG_E_FORMAT, "corrupt PNG file: unexpected layout");
        goto done;
    }
    /* A tiny file claiming a huge image (with --max-pixels raised) is
     * refused before its pixels are allocated: its image data could not
     * inflate to them. */
    const uint64_t idat = idat_bytes(buf, len);
    if ((uint64_t)stored / DEFLATE_MAX_RATIO > idat + 1) {
        st = gimg_fail(GIMG_E_FORMAT, "corrupt PNG file: the image data (IDAT) ends before the "
                                      "last row: %llu bytes cannot hold a %ux%u image",
                       (unsigned long long)idat, h.ihdr.width, h.ihdr.height);
        goto done;
    }
    if ((st = gimg_image_alloc(out, (int)h.ihdr.width, (int)h.ihdr.height, h.channels,
                               h.sample)))
        goto done;
    /* libspng 0.7.3 puts the pixels of interlaced 1-, 2- and 4-bit images
     * in place by OR-ing them into its output, which must start zeroed. */
    if (h.ihdr.interlace_method && h.ihdr.bit_depth < 8)
        memset(out->data, 0, stored);
    /* The critical chunks' CRCs are ours from here on (side_work): libspng
     * checked IHDR's and PLTE's in open_png(); it still drops ancillary
     * chunks whose CRC is wrong. */
    if ((err = spng_set_crc_action(ctx, SPNG_CRC_USE, SPNG_CRC_DISCARD))) {
        st = spng_failure(err, AT_CHUNKS, buf, len);
        goto done;
    }
    side_job side = { .buf = buf, .len = len, .pixels = out->data, .bytes = total };
    atomic_init(&side.stop, 0);
    pthread_t side_thread;
    const int threaded =
        total >= SIDE_THREAD_MIN && pthread_create(&side_thread, NULL, side_work, &side) == 0;
    if (!threaded)
        side.end = check_chunks(buf, len, &side.crc_ok);
    png_stage stage = AT_IMAGE;
    err = spng_decode_image(ctx, out->data, total, SPNG_FMT_PNG, 0);
    /* Then the chunks after the image data, up to IEND (libspng stops
     * reading IDAT where the compressed stream ends): it finds a file cut
     * after its image data, but takes an IEND cut inside its CRC for
     * whole, which check_chunks() does not. */
    if (!err) {
        stage = AT_END;
        err = spng_decode_chunks(ctx);
    }
    if (threaded) {
        atomic_store(&side.stop, 1);
        pthread_join(side_thread, NULL);
    }
    if (!side.crc_ok)   /* the likely cause of any other error */
        st = crc_failure(buf, len);
    else if (err)
        st = spng_failure(err, stage, buf, len);
    else if (side.end == len)
        st = spng_failure(SPNG_IO_EOF, AT_END, buf, len);
    else if (needs_expansion(&h))
        st = expand_rows(out, &h, &plte, stored / h.ihdr.height);
done:
    spng_ctx_free(ctx);
    if (st) {
        gimg_image_free(out);
        memset(out, 0, sizeof *out);
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

const gimg_codec gimg_codec_png = {
    GIMG_FMT_PNG, "PNG", "png", 0, sniff_png, probe_png, decode_png, layout_png, encode_png,
};
