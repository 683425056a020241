/*
 * png_deflate.c — the zlib stream of a PNG's filtered rows (png_deflate.h),
 * without the 2-byte zlib header and the Adler-32, which the writer adds
 * (codec_png.c says how the encoder chooses between the coders).
 */
#include "png_deflate.h"

#include "gimg.h"

#include <libdeflate.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* ------------------------------------------------ the entropy coder */

/* A zlib stream of dynamic-Huffman DEFLATE blocks whose only matches are
 * runs (distance 1) of at least PNG_MIN_RUN equal bytes: those cover the flat
 * parts of an image, where filtered bytes are runs of zeros, while short
 * matches, which cost more than they save on photographic data, are never
 * taken. Each block gets its own codes; a block that would code larger
 * than stored is stored. */

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
static void length_code(unsigned l, unsigned *sym, unsigned *nextra, unsigned *extra)
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
    _Static_assert(PNG_MIN_RUN == 8, "the run test below compares 8 bytes at once");
    size_t nt = 0, i = start;
    while (i < end) {
        unsigned char b = data[i];
        uint64_t all_b = b * 0x0101010101010101ull;
        if (i > 0 && data[i - 1] == b && end - i >= PNG_MIN_RUN && load64(data + i) == all_b) {
            size_t lim = end - i < PNG_MAX_RUN ? end - i : PNG_MAX_RUN, r = 8;
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

void png_plan_block(const uint32_t *freq, size_t n, int final, unsigned at,
                    png_block_plan *plan)
{
    unsigned char *len = plan->len;
    uint16_t *code = plan->code;
    huff_lengths(freq, PNG_LITLEN, 15, len);
    /* A lone code would be a one-symbol (incomplete) code, which some
     * decoders refuse for literal/lengths: pair it with a second one. */
    int used = 0;
    for (int s = 0; s < PNG_LITLEN; s++)
        used += len[s] != 0;
    if (used < 2)
        len[0] = len[256] = 1;
    huff_codes(len, PNG_LITLEN, code);
    /* One distance, 1: a single 1-bit code, as RFC 1951 allows. */
    unsigned char dlen[30];
    memset(dlen, 0, 30);
    dlen[0] = 1;
    int nlit = PNG_LITLEN, ndist = 1;
    while (nlit > 257 && len[nlit - 1] == 0)
        nlit--;

    /* The code lengths, run-length coded (symbols 16, 17, 18). */
    unsigned char all[PNG_LITLEN + 30];
    memcpy(all, len, (size_t)nlit);
    memcpy(all + nlit, dlen, (size_t)ndist);
    int total = nlit + ndist, ncl = 0;
    unsigned char clsym[PNG_LITLEN + 30], clext[PNG_LITLEN + 30];
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

    /* The header's bits. */
    static const unsigned char clx[19] = { [16] = 2, [17] = 3, [18] = 7 };
    memset(plan->head, 0, sizeof plan->head);
    bitw h = { .out = plan->head };
    put_bits(&h, final ? 1 : 0, 1);
    put_bits(&h, 2, 2);
    put_bits(&h, (uint32_t)(nlit - 257), 5);
    put_bits(&h, (uint32_t)(ndist - 1), 5);
    put_bits(&h, (uint32_t)(nclen - 4), 4);
    for (int k = 0; k < nclen; k++)
        put_bits(&h, cllen[cl_order[k]], 3);
    for (int k = 0; k < ncl; k++) {
        put_bits(&h, clcode[clsym[k]], cllen[clsym[k]]);
        if (clx[clsym[k]])
            put_bits(&h, clext[k], clx[clsym[k]]);
    }
    plan->head_bits = (unsigned)((size_t)(h.out - plan->head) * 8 + h.nbits);
    align_bits(&h);

    /* Exact size of the dynamic block, to compare with storing. */
    uint64_t bitsz = plan->head_bits;
    for (int s = 0; s < PNG_LITLEN; s++) {
        if (!freq[s])
            continue;
        unsigned extra = 0;
        if (s >= 265 && s < 285)
            extra = (unsigned)(s - 261) / 4;
        bitsz += (uint64_t)freq[s] * (len[s] + extra + (s > 256 ? dlen[0] : 0));
    }
    /* Storing: per 65535-byte piece a 3-bit header padded to a byte, LEN
     * and NLEN, then the bytes; the first pad depends on where we are. */
    uint64_t pieces = (n + 65534) / 65535;
    uint64_t stored = ((at + 3 + 7) / 8 * 8 - at) + 32 + 8 * (uint64_t)n + 40 * (pieces - 1);
    plan->stored = bitsz >= stored;
    plan->bits = plan->stored ? stored : bitsz;
}

static void encode_block(bitw *w, const unsigned char *data, size_t start, size_t end, int final,
                         uint16_t *tok)
{
    uint32_t freq[PNG_LITLEN] = { 0 };
    size_t nt = tokenize(data, start, end, tok, freq);
    freq[256] = 1;   /* end of block */
    png_block_plan plan;
    png_plan_block(freq, end - start, final, w->nbits % 8, &plan);
    if (plan.stored) {
        put_stored(w, data + start, end - start, final);
        return;
    }
    const unsigned char *len = plan.len;
    const uint16_t *code = plan.code;
    unsigned k = 0;
    for (; k + 8 <= plan.head_bits; k += 8)
        put_bits(w, plan.head[k / 8], 8);
    if (k < plan.head_bits)
        put_bits(w, plan.head[k / 8], plan.head_bits - k);
    uint32_t rc[259];   /* run code + dist code 0, by run length; built lazily */
    unsigned rn[259];
    memset(rn, 0, sizeof rn);
    for (size_t t = 0; t < nt; t++) {
        unsigned v = tok[t];
        if (!(v & RUN_FLAG)) {
            put_bits(w, code[v], len[v]);
            continue;
        }
        unsigned r = v & 0x1ff;
        if (!rn[r]) {
            unsigned sym, ne, ex;
            length_code(r, &sym, &ne, &ex);
            rc[r] = code[sym] | ex << len[sym];
            rn[r] = len[sym] + ne + 1;
        }
        put_bits(w, rc[r], rn[r]);
    }
    put_bits(w, code[256], len[256]);
}

/* ------------------------------------------------ the stream, in segments */

/* The filtered rows (per row its filter type, then its filtered bytes) are
 * coded in segments of PNG_SEGMENT_BYTES, the same whatever the image's size,
 * the bands it comes in (band.h) or the threads: each segment is coded on
 * its own, in parallel with the others, and ends on a byte boundary (an
 * empty stored block, as zlib's sync flush leaves) but the last, whose last
 * block is final. So an image gives the same file written whole or band by
 * band, on any machine. */
/* (4 MiB until stop 46: gconv -k gaussian:2 from a 16384^2 RGB PNG to a
 * PNG held 72.7 MB on 2 cores, 66.8 MB with 2 MiB and each stream let go
 * once in place; the file 929 bytes larger, of 367 MB.) */

/* The largest entropy-coded segment of n bytes: every block at most its
 * stored size, and the empty stored block that ends it. */
static size_t entropy_bound(size_t n)
{
    return n + 6 * (n / 65535 + n / PNG_BLOCK_BYTES + 2) + 16;
}

/* Codes data[start, end) as blocks into out, the last final when `last`,
 * else followed by an empty stored block, and returns the bytes written.
 * *sample_bits gets the bits of the block that starts at sample_at. */
static size_t code_entropy(const unsigned char *data, size_t start, size_t end, int last,
                           size_t sample_at, unsigned char *out, uint16_t *tok,
                           uint64_t *sample_bits)
{
    bitw w = { .out = out };
    do {
        size_t stop = end - start > PNG_BLOCK_BYTES ? start + PNG_BLOCK_BYTES : end;
        const uint64_t before = (uint64_t)(w.out - out) * 8 + w.nbits;
        encode_block(&w, data, start, stop, last && stop == end, tok);
        if (start == sample_at)
            *sample_bits = (uint64_t)(w.out - out) * 8 + w.nbits - before;
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

/* Whether LZ may pay on a segment: libdeflate at `level` compresses one of
 * its blocks (the middle one), and LZ is tried only where it does better
 * there than the entropy coder did: up to the default level by 5% or more,
 * above it by any margin. Photographs skip LZ and its cost; drawn images
 * take it; smooth ones, where LZ gains a little, skip it at the default:
 * LZ at levels 5 to 9 takes several times the entropy coder's time
 * (blurred noise, 4096^2 RGB, level 6: 2.7% smaller in 1.8 s against
 * 0.35 s on a 2-core VM). Segments of two blocks or less just try it. */
static int lz_may_win(const unsigned char *block, size_t n, uint64_t entropy_bits, int level)
{
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(level);
    size_t room = n + n / 8 + 64;
    unsigned char *scratch = c ? malloc(room) : NULL;
    size_t z = scratch ? libdeflate_deflate_compress(c, block, n, scratch, room) : 0;
    free(scratch);
    libdeflate_free_compressor(c);
    if (!z)
        return 1;
    const uint64_t lz_bits = (uint64_t)z * 8;
    return level <= GIMG_DEFAULT_PNG_LEVEL ? lz_bits * 20 < entropy_bits * 19
                                           : lz_bits < entropy_bits;
}

/* data[0, n) (a segment: n <= PNG_SEGMENT_BYTES) coded by zlib at `level` (at
 * most 9) as raw DEFLATE, ending as code_entropy() ends a segment, into a
 * malloc'd *out: its size, or 0 (out of memory). The window starts empty,
 * so that segments stay independent of one another. Z_FILTERED, as libpng
 * codes filtered rows: it drops matches shorter than 6, which cost more
 * than their literals on such data (on blurred noise, 1400^2 RGB: 3.6%
 * smaller than the default strategy, at level 6 and 9 alike; 1% larger
 * on a drawing). */
static size_t code_lz(const unsigned char *data, size_t n, int last, int level,
                      unsigned char **out)
{
    *out = NULL;
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, level > 9 ? 9 : level, Z_DEFLATED, -15, 9, Z_FILTERED) != Z_OK)
        return 0;
    size_t size = 0;
    const uLong cap = deflateBound(&z, (uLong)n) + 16;   /* + the sync flush's block */
    if ((*out = malloc(cap))) {
        z.next_in = (unsigned char *)data;
        z.avail_in = (uInt)n;
        z.next_out = *out;
        z.avail_out = (uInt)cap;
        const int r = deflate(&z, last ? Z_FINISH : Z_SYNC_FLUSH);
        if (last ? r == Z_STREAM_END : r == Z_OK && !z.avail_in && z.avail_out)
            size = (size_t)z.total_out;
    }
    deflateEnd(&z);
    if (!size) {
        free(*out);
        *out = NULL;
    }
    return size;
}

/* The block whose Huffman-coded size tells whether LZ may win on a
 * segment of n bytes: the middle one. */
static size_t middle_block_at(size_t n)
{
    return n / PNG_BLOCK_BYTES / 2 * PNG_BLOCK_BYTES;
}

/* The segment seg[0, n) was coded by the Huffman coder into *out, its
 * middle block taking sample_bits: zlib's LZ at `level` replaces it where
 * lz_may_win lets LZ race (segments of two blocks or less always race)
 * and its stream is smaller. 0 when memory ran out. */
static int lz_race(const unsigned char *seg, size_t n, int last, int level,
                       uint64_t sample_bits, png_coded *out)
{
    const size_t sample_at = middle_block_at(n);
    const size_t sample_n = n - sample_at < PNG_BLOCK_BYTES ? n - sample_at : PNG_BLOCK_BYTES;
    if (n > 2 * PNG_BLOCK_BYTES && !lz_may_win(seg + sample_at, sample_n, sample_bits, level))
        return 1;
    unsigned char *lz;
    size_t lz_len = code_lz(seg, n, last, level, &lz);
    if (!lz_len)
        return 0;
    if (lz_len < out->len) {
        free(out->p);
        out->p = lz;
        out->len = lz_len;
    } else {
        free(lz);
    }
    return 1;
}

int png_code_segment(const unsigned char *seg, size_t n, int first, int last, int level,
                     png_coded *out)
{
    out->p = malloc(entropy_bound(n));
    out->len = 0;
    if (!out->p)
        return 0;
    if (level == 0) {
        bitw w = { .out = out->p };
        put_stored(&w, seg, n, last);
        out->len = (size_t)(w.out - out->p);
        return 1;
    }
    uint16_t *tok = malloc(PNG_BLOCK_BYTES * sizeof *tok);
    if (!tok)
        return 0;
    uint64_t sample_bits = 0;
    const size_t lead = first ? 0 : 1;
    out->len = code_entropy(seg - lead, lead, lead + n, last, lead + middle_block_at(n), out->p,
                            tok, &sample_bits);
    free(tok);
    return lz_race(seg, n, last, level, sample_bits, out);
}
