/*
 * codec_pnm.c — our own netpbm codec, reader and writer: PBM/PGM/PPM (P1-P6), PAM (P7)
 * and PFM (Pf/PF).
 *
 * Reading
 *  - Samples keep the file's own units (gimg_image.maxval): maxval 1..255
 *    is read as 8-bit, 256..65535 as 16-bit, every sample unchanged; the
 *    image's maxval is the file's, except 255 (8-bit) and 65535 (16-bit),
 *    the full ranges, which are 0. A sample above maxval is an error. Plain
 *    P2/P3 alike.
 *  - P1/P4 bitmaps have no maxval: they become 8-bit gray (maxval 0),
 *    1 (black) -> 0 and 0 (white) -> 255.
 *  - PAM: DEPTH 1-4 with TUPLTYPE GRAYSCALE, GRAYSCALE_ALPHA, RGB, RGB_ALPHA,
 *    BLACKANDWHITE or BLACKANDWHITE_ALPHA (a known TUPLTYPE must agree with
 *    DEPTH); a missing or unknown TUPLTYPE is taken from DEPTH. Its MAXVAL
 *    is kept like any other (BLACKANDWHITE: samples 0 and 1, maxval 1).
 *    A comment is a line of its own; a NUL in a header line, a repeated
 *    WIDTH, HEIGHT, DEPTH or MAXVAL, or 16384 lines without ENDHDR are
 *    refused (netpbm 11 refuses a comment after a value too).
 *  - PFM: "Pf" gray or "PF" RGB; a negative scale means little-endian
 *    samples, a positive one big-endian. Only its sign is used: the magnitude
 *    is a free "scale" hint most writers set to 1 and readers ignore. Rows
 *    are stored bottom to top.
 *  - '#' comments are allowed wherever whitespace is allowed in a header
 *    (and in plain P1-P3 rasters, as netpbm allows).
 * Every header number is checked, and the size goes through
 * gimg_check_size() before anything is allocated.
 *
 * Writing: P5/P6 and P7 (with a named TUPLTYPE) with maxval
 * gimg_image_max(im) — the image's maxval, else 255 or 65535 — so a file's
 * units survive a read and a write (the row's maxval_rule is ANY); one
 * byte per sample up to maxval 255, two (big-endian) above, as netpbm
 * defines it, whatever the image's sample type. PFM little-endian with
 * scale -1.0. Samples are written as they are: the image's lie in
 * 0..maxval (gimg.h).
 */
#include "alloc_internal.h"
#include "codec.h"
#include "io_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define HOST_LITTLE_ENDIAN (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__)

/* ------------------------------------------------------------- sources */

/* Bytes come from memory (gimg_decode_memory) or from a FILE (a netpbm
 * stream, which must not be read beyond the current image). */
typedef struct {
    const unsigned char *p, *end;  /* memory source, when f is NULL */
    FILE *f;                       /* locked by the caller */
    unsigned char *row;            /* FILE source: one raster row */
    const char *kind;              /* "PNM", "PAM", "PFM": for messages */
    size_t skipped;                /* whitespace and comment bytes since the last token */
    int overlong;                  /* more than MAX_SKIPPED_BYTES of them: given up */
} src;

/* Whitespace and comments between two tokens (or before an image of a
 * stream) past this are refused: an endless stream of them (`yes ''`,
 * `yes '#'`) would otherwise be read for ever. */
#define MAX_SKIPPED_BYTES ((size_t)1 << 20)

static int src_getc(src *s)
{
    if (s->f)
        return getc_unlocked(s->f);
    return s->p < s->end ? *s->p++ : EOF;
}

static void src_ungetc(src *s, int c)
{
    if (c == EOF)
        return;
    if (s->f)
        ungetc(c, s->f);
    else
        s->p--;
}

/* The failure for an EOF met while reading `what` ("header" or "data"). */
static gimg_status src_eof(src *s, const char *what)
{
    if (s->f && ferror(s->f))
        return gimg_fail(GIMG_E_IO, "read error: %s", strerror(errno));
    if (s->overlong)
        return gimg_fail(GIMG_E_FORMAT, "invalid %s %s: over %zu bytes of whitespace and "
                                        "comments in a row", s->kind, what, MAX_SKIPPED_BYTES);
    return gimg_fail(GIMG_E_FORMAT, "truncated %s %s", s->kind, what);
}

/* Points *out at the next n raster bytes. */
static gimg_status src_take(src *s, size_t n, const unsigned char **out)
{
    if (!s->f) {
        if ((size_t)(s->end - s->p) < n)
            return src_eof(s, "data");
        *out = s->p;
        s->p += n;
        return GIMG_OK;
    }
    if (fread_unlocked(s->row, 1, n, s->f) != n)
        return src_eof(s, "data");
    *out = s->row;
    return GIMG_OK;
}

static int is_space(int c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* The next byte, counted as skipped: EOF once too many were. */
static int src_skip_getc(src *s)
{
    if (++s->skipped > MAX_SKIPPED_BYTES) {
        s->overlong = 1;
        return EOF;
    }
    return src_getc(s);
}

static void skip_comment(src *s)
{
    int c;
    do
        c = src_skip_getc(s);
    while (c != EOF && c != '\n' && c != '\r');
}

/* The next character that is neither whitespace nor part of a comment. */
static int next_significant(src *s)
{
    int c;
    for (;;) {
        c = src_skip_getc(s);
        if (c == '#')
            skip_comment(s);
        else if (!is_space(c))
            break;
    }
    s->skipped = 0;
    return c;
}

/* Reads the next whitespace-separated token into buf, skipping comments,
 * and consumes the one whitespace character (or comment) that ends it: after
 * a raw format's last header value exactly one such character precedes the
 * raster. */
static gimg_status read_token(src *s, char *buf, size_t cap, const char *what)
{
    int c = next_significant(s);
    if (c == EOF)
        return src_eof(s, what);
    size_t n = 0;
    while (c != EOF && !is_space(c) && c != '#') {
        if (n + 1 >= cap)
            return gimg_fail(GIMG_E_FORMAT, "invalid %s %s: value too long", s->kind, what);
        buf[n++] = (char)c;
        c = src_getc(s);
    }
    buf[n] = '\0';
    if (c == '#')
        skip_comment(s);
    return GIMG_OK;
}

/* Decimal digits only. 15 digits are far beyond any valid value yet keep the
 * arithmetic exact; gimg_check_size() then judges sizes. */
static int parse_uint(const char *t, uint64_t *v)
{
    size_t n = strlen(t);
    if (n == 0 || n > 15)
        return 0;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i] < '0' || t[i] > '9')
            return 0;
        x = x * 10 + (uint64_t)(t[i] - '0');
    }
    *v = x;
    return 1;
}

static gimg_status read_uint(src *s, const char *field, const char *what, uint64_t *v)
{
    char tok[32];
    gimg_status st = read_token(s, tok, sizeof tok, what);
    if (st)
        return st;
    if (!parse_uint(tok, v))
        return gimg_fail(GIMG_E_FORMAT, "invalid %s %s: bad %s \"%s\"", s->kind, what, field, tok);
    return GIMG_OK;
}

/* -------------------------------------------------------------- headers */

typedef struct {
    char magic;           /* '1'..'7', 'F' or 'f' */
    int64_t width, height;
    int depth;            /* samples per pixel on file */
    unsigned maxval;      /* 1..65535; unused for PFM */
    int little;           /* PFM: samples are little-endian */
} header;

static gimg_sample header_sample(const header *h)
{
    if (h->magic == 'F' || h->magic == 'f')
        return GIMG_F32;
    return h->maxval > 255 ? GIMG_U16 : GIMG_U8;
}

static gimg_status check_maxval(src *s, uint64_t v)
{
    if (v < 1 || v > 65535)
        return gimg_fail(GIMG_E_FORMAT, "invalid %s header: maxval %llu is not in 1..65535",
                         s->kind, (unsigned long long)v);
    return GIMG_OK;
}

static gimg_status read_classic_header(src *s, header *h)
{
    uint64_t w, ht, mv = 1;
    gimg_status st;
    if ((st = read_uint(s, "width", "header", &w)) || (st = read_uint(s, "height", "header", &ht)))
        return st;
    if (h->magic != '1' && h->magic != '4') {
        if ((st = read_uint(s, "maxval", "header", &mv)) || (st = check_maxval(s, mv)))
            return st;
    }
    h->width = (int64_t)w;
    h->height = (int64_t)ht;
    h->maxval = (unsigned)mv;
    h->depth = (h->magic == '3' || h->magic == '6') ? 3 : 1;
    return GIMG_OK;
}

static gimg_status read_pfm_header(src *s, header *h)
{
    uint64_t w, ht;
    char tok[64];
    gimg_status st;
    if ((st = read_uint(s, "width", "header", &w)) || (st = read_uint(s, "height", "header", &ht)) ||
        (st = read_token(s, tok, sizeof tok, "header")))
        return st;
    char *end;
    errno = 0;
    double scale = strtod(tok, &end);
    if (*end || end == tok || errno == ERANGE || !isfinite(scale) || scale == 0.0)
        return gimg_fail(GIMG_E_FORMAT, "invalid PFM header: bad scale \"%s\"", tok);
    h->width = (int64_t)w;
    h->height = (int64_t)ht;
    h->depth = h->magic == 'F' ? 3 : 1;
    h->little = scale < 0;
    return GIMG_OK;
}

static const struct {
    const char *name;
    int depth;
} tupltypes[] = {
    { "BLACKANDWHITE", 1 }, { "GRAYSCALE", 1 }, { "RGB", 3 },
    { "BLACKANDWHITE_ALPHA", 2 }, { "GRAYSCALE_ALPHA", 2 }, { "RGB_ALPHA", 4 },
};

/* Reads one header line (without its newline) into buf. */
static gimg_status read_line(src *s, char *buf, size_t cap)
{
    size_t n = 0;
    for (;;) {
        int c = src_getc(s);
        if (c == EOF)
            return src_eof(s, "header");
        if (c == '\n')
            break;
        /* A NUL would end the line early for a C reader (netpbm's fgets):
         * what follows it would be read differently by different tools. */
        if (c == '\0')
            return gimg_fail(GIMG_E_FORMAT, "invalid PAM header: NUL byte in a header line");
        if (n + 1 >= cap)
            return gimg_fail(GIMG_E_FORMAT, "invalid PAM header: line too long");
        buf[n++] = (char)c;
    }
    /* Tolerate CRLF line ends and trailing blanks. */
    while (n > 0 && is_space((unsigned char)buf[n - 1]))
        n--;
    buf[n] = '\0';
    return GIMG_OK;
}

static gimg_status read_pam_header(src *s, header *h)
{
    char line[1024], tupltype[256] = "";
    /* Comment lines are skipped, but not without end: an endless stream of
     * them (`yes '#'` after "P7") is no header. */
    enum { MAX_HEADER_LINES = 16384 };
    uint64_t val[4];
    int seen[4] = { 0, 0, 0, 0 };
    static const char *const keys[4] = { "WIDTH", "HEIGHT", "DEPTH", "MAXVAL" };
    gimg_status st;

    /* The magic must end its line. */
    int c = src_getc(s);
    if (c == EOF)
        return src_eof(s, "header");
    if (c == '\r')
        c = src_getc(s);
    if (c != '\n')
        return gimg_fail(GIMG_E_FORMAT, "invalid PAM header: \"P7\" not followed by a newline");

    for (int lines = 0;; lines++) {
        if (lines == MAX_HEADER_LINES)
            return gimg_fail(GIMG_E_FORMAT, "invalid PAM header: no ENDHDR in %d lines",
                             MAX_HEADER_LINES);
        if ((st = read_line(s, line, sizeof line)))
            return st;
        char *p = line;
        while (is_space((unsigned char)*p))
            p++;
        if (*p == '\0' || *p == '#')
            continue;
        char *key = p;
        while (*p && !is_space((unsigned char)*p))
            p++;
        if (*p)
            *p++ = '\0';
        while (is_space((unsigned char)*p))
            p++;
        if (strcmp(key, "ENDHDR") == 0)
            break;
        if (strcmp(key, "TUPLTYPE") == 0) {
            /* Several TUPLTYPE lines concatenate, separated by a space. */
            size_t used = strlen(tupltype), add = strlen(p);
            if (used + (used ? 1 : 0) + add >= sizeof tupltype)
                return gimg_fail(GIMG_E_FORMAT, "invalid PAM header: TUPLTYPE too long");
            if (used)
                tupltype[used++] = ' ';
            memcpy(tupltype + used, p, add + 1);
            continue;
        }
        int k = 0;
        while (k < 4 && strcmp(key, keys[k]) != 0)
            k++;
        if (k == 4)
            return gimg_fail(GIMG_E_FORMAT, "invalid PAM header: unknown keyword \"%.40s\"", key);
        /* netpbm takes the last of repeated lines; other readers the
         * first: a file that means two sizes is refused. */
        if (seen[k])
            return gimg_fail(GIMG_E_FORMAT, "invalid PAM header: %s given twice", key);
        /* No comment after a value: netpbm (11.01) refuses "HEIGHT 1 # c"
         * as a non-numeric value, and so do we. */
        if (!parse_uint(p, &val[k]))
            return gimg_fail(GIMG_E_FORMAT, "invalid PAM header: bad %s \"%.40s\"", key, p);
        seen[k] = 1;
    }
    for (int k = 0; k < 4; k++)
        if (!seen[k])
            return gimg_fail(GIMG_E_FORMAT, "invalid PAM header: no %s", keys[k]);
    if (val[2] < 1 || val[2] > 4)
        return gimg_fail(GIMG_E_FORMAT, "unsupported PAM depth %llu (1 to 4 are supported)",
                         (unsigned long long)val[2]);
    if ((st = check_maxval(s, val[3])))
        return st;
    for (size_t i = 0; i < sizeof tupltypes / sizeof tupltypes[0]; i++)
        if (strcmp(tupltype, tupltypes[i].name) == 0 && (uint64_t)tupltypes[i].depth != val[2])
            return gimg_fail(GIMG_E_FORMAT, "invalid PAM header: TUPLTYPE %s with DEPTH %llu",
                             tupltype, (unsigned long long)val[2]);
    h->width = (int64_t)val[0];
    h->height = (int64_t)val[1];
    h->depth = (int)val[2];
    h->maxval = (unsigned)val[3];
    return GIMG_OK;
}

static gimg_status read_header(src *s, header *h)
{
    memset(h, 0, sizeof *h);
    s->kind = "PNM";
    int c0 = src_getc(s), c1 = src_getc(s);
    if (c0 == EOF || c1 == EOF)
        return src_eof(s, "header");
    if (c0 != 'P' || !((c1 >= '1' && c1 <= '7') || c1 == 'F' || c1 == 'f'))
        return gimg_fail(GIMG_E_FORMAT, "not a PNM, PAM or PFM image");
    h->magic = (char)c1;
    if (c1 == '7') {
        s->kind = "PAM";
        return read_pam_header(s, h);
    }
    if (c1 == 'F' || c1 == 'f')
        s->kind = "PFM";
    /* "P6" must be followed by whitespace or a comment, not run into the width. */
    int c = src_getc(s);
    if (c == EOF)
        return src_eof(s, "header");
    if (!is_space(c) && c != '#')
        return gimg_fail(GIMG_E_FORMAT, "invalid %s header: bad magic number", s->kind);
    src_ungetc(s, c);
    return (c1 == 'F' || c1 == 'f') ? read_pfm_header(s, h) : read_classic_header(s, h);
}

/* --------------------------------------------------------------- rasters */

static gimg_status bad_sample(src *s, unsigned v, unsigned maxval)
{
    return gimg_fail(GIMG_E_FORMAT, "invalid %s data: sample %u exceeds maxval %u", s->kind, v,
                     maxval);
}

/* One row of n samples of a plain (ASCII) PNM. */
static gimg_status plain_row(src *s, const header *h, unsigned char *row, size_t n,
                             gimg_sample sample)
{
    for (size_t i = 0; i < n; i++) {
        if (h->magic == '1') {
            int c = next_significant(s);
            if (c == EOF)
                return src_eof(s, "data");
            if (c != '0' && c != '1')
                return gimg_fail(GIMG_E_FORMAT, "invalid PNM data: '%c' in a plain bitmap", c);
            row[i] = c == '1' ? 0 : 255;
            continue;
        }
        uint64_t v;
        gimg_status st = read_uint(s, "sample", "data", &v);
        if (st)
            return st;
        if (v > h->maxval)
            return bad_sample(s, v > 0xffffffffu ? 0xffffffffu : (unsigned)v, h->maxval);
        if (sample == GIMG_U8)
            row[i] = (uint8_t)v;
        else
            ((uint16_t *)row)[i] = (uint16_t)v;
    }
    return GIMG_OK;
}

static gimg_status read_plain(src *s, const header *h, gimg_image *im)
{
    size_t n = (size_t)im->width * (size_t)im->channels;
    gimg_status st = GIMG_OK;
    for (int y = 0; y < im->height && !st; y++)
        st = plain_row(s, h, gimg_row(im, y), n, im->sample);
    return st;
}

/* The largest of n 8-bit samples (a loop that vectorises). */
static unsigned top_u8(const unsigned char *in, size_t n)
{
    unsigned char top = 0;
    for (size_t i = 0; i < n; i++)
        top = in[i] > top ? in[i] : top;
    return top;
}

/* One raw row (in: its bytes on file) to n samples of the image's row;
 * row NULL: only checked, for a row used where it lies (8-bit). */
static gimg_status raw_row(src *s, const header *h, const unsigned char *in, unsigned char *row,
                           size_t n, gimg_sample sample)
{
    const unsigned maxval = h->maxval;
    if (h->magic == '4') {
        for (size_t x = 0; x < n; x++)
            row[x] = (in[x >> 3] >> (7 - (x & 7))) & 1 ? 0 : 255;
    } else if (sample == GIMG_U8) {
        unsigned top;
        if (maxval < 255 && (top = top_u8(in, n)) > maxval)
            return bad_sample(s, top, maxval); /* the check first */
        if (row)
            memcpy(row, in, n);
    } else {
        uint16_t *out = (uint16_t *)row;
        unsigned top = 0;
        for (size_t i = 0; i < n; i++) {
            unsigned v = (unsigned)in[2 * i] << 8 | in[2 * i + 1];
            top = v > top ? v : top;
            out[i] = (uint16_t)v;
        }
        if (top > maxval)
            return bad_sample(s, top, maxval);
    }
    return GIMG_OK;
}

static gimg_status read_raw(src *s, const header *h, gimg_image *im, size_t file_row)
{
    size_t n = (size_t)im->width * (size_t)im->channels;
    for (int y = 0; y < im->height; y++) {
        const unsigned char *in;
        gimg_status st = src_take(s, file_row, &in);
        if (!st)
            st = raw_row(s, h, in, gimg_row(im, y), n, im->sample);
        if (st)
            return st;
    }
    return GIMG_OK;
}

/* One PFM row (in: its bytes on file) to n float samples. */
static void pfm_row(const header *h, const unsigned char *in, unsigned char *row, size_t n)
{
    if (h->little == HOST_LITTLE_ENDIAN) {
        memcpy(row, in, n * 4);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        row[4 * i + 0] = in[4 * i + 3];
        row[4 * i + 1] = in[4 * i + 2];
        row[4 * i + 2] = in[4 * i + 1];
        row[4 * i + 3] = in[4 * i + 0];
    }
}

static gimg_status read_pfm(src *s, const header *h, gimg_image *im, size_t file_row)
{
    size_t n = (size_t)im->width * (size_t)im->channels;
    for (int y = im->height - 1; y >= 0; y--) {
        const unsigned char *in;
        gimg_status st = src_take(s, file_row, &in);
        if (st)
            return st;
        pfm_row(h, in, gimg_row(im, y), n);
    }
    return GIMG_OK;
}

/* What a header says of the image and its raster, the size checked
 * against the limits (gimg_check_size): the sample type, the maxval the
 * image keeps (0: the full range), and a raw row's bytes on file (never
 * longer than the image's row, which the check has just bounded). */
typedef struct {
    gimg_sample sample;
    unsigned maxval;
    size_t file_row;
    int plain;           /* P1-P3: ASCII samples */
} raster;

static gimg_status plan_raster(const header *h, raster *r)
{
    memset(r, 0, sizeof *r);
    r->sample = header_sample(h);
    size_t row_bytes;
    gimg_status st = gimg_check_size(h->width, h->height, h->depth, r->sample, &row_bytes, NULL);
    if (st)
        return st;
    if (h->magic == '4')
        r->file_row = ((size_t)h->width + 7) / 8;
    else if (h->magic == 'F' || h->magic == 'f')
        r->file_row = row_bytes;
    else
        r->file_row = (size_t)h->width * (size_t)h->depth * (h->maxval > 255 ? 2 : 1);
    r->plain = h->magic >= '1' && h->magic <= '3';
    /* Bitmaps (maxval 1 here) become 0/255 samples: the full range. */
    const int bitmap = h->magic == '1' || h->magic == '4';
    if (!bitmap && r->sample != GIMG_F32 && h->maxval != (r->sample == GIMG_U8 ? 255u : 65535u))
        r->maxval = h->maxval;
    return GIMG_OK;
}

/* Reads one image from s: its header and (unless info is given) its raster. */
static gimg_status read_image(src *s, gimg_image *out, gimg_info *info)
{
    header h;
    raster r;
    gimg_status st = read_header(s, &h);
    if (st || (st = plan_raster(&h, &r)))
        return st;
    if (info) {
        info->format = h.magic == '7' ? GIMG_FMT_PAM
                     : (h.magic == 'F' || h.magic == 'f') ? GIMG_FMT_PFM : GIMG_FMT_PNM;
        info->width = (int)h.width;
        info->height = (int)h.height;
        info->channels = h.depth;
        info->sample = r.sample;
        return GIMG_OK;
    }
    if ((st = gimg_image_alloc(out, (int)h.width, (int)h.height, h.depth, r.sample)))
        return st;
    if (s->f && !r.plain && !(s->row = malloc(r.file_row))) {
        gimg_image_free(out);
        return gimg_fail(GIMG_E_NOMEM, "out of memory allocating %zu bytes", r.file_row);
    }
    out->maxval = r.maxval;
    if (r.plain)
        st = read_plain(s, &h, out);
    else if (r.sample == GIMG_F32)
        st = read_pfm(s, &h, out, r.file_row);
    else
        st = read_raw(s, &h, out, r.file_row);
    free(s->row);
    s->row = NULL;
    if (st)
        gimg_image_free(out);
    return st;
}

gimg_status gimg_pnm_probe(const unsigned char *buf, size_t len, gimg_info *info)
{
    src s = { .p = buf, .end = buf + len };
    return read_image(&s, NULL, info);
}

gimg_status gimg_pnm_decode(const unsigned char *buf, size_t len, gimg_image *out)
{
    src s = { .p = buf, .end = buf + len };
    memset(out, 0, sizeof *out);
    return read_image(&s, out, NULL);
}

gimg_status gimg_pnm_view(const unsigned char *buf, size_t len, gimg_image *out, int *viewed)
{
    src s = { .p = buf, .end = buf + len };
    header h;
    size_t row_bytes;
    memset(out, 0, sizeof *out);
    *viewed = 0;
    if (read_header(&s, &h) != GIMG_OK || (h.magic != '5' && h.magic != '6' && h.magic != '7') ||
        header_sample(&h) != GIMG_U8 ||
        gimg_check_size(h.width, h.height, h.depth, GIMG_U8, &row_bytes, NULL) != GIMG_OK ||
        (size_t)(s.end - s.p) / row_bytes < (size_t)h.height)
        return GIMG_OK; /* decoding says what is wrong, or copies what needs it */
    const size_t n = row_bytes * (size_t)h.height;
    if (h.maxval < 255) {
        /* As read_raw's check: one pass that vectorises. */
        unsigned char top = 0;
        for (size_t i = 0; i < n; i++)
            top = s.p[i] > top ? s.p[i] : top;
        if (top > h.maxval)
            return GIMG_OK;
        out->maxval = h.maxval;
    }
    out->width = (int)h.width;
    out->height = (int)h.height;
    out->channels = h.depth;
    out->sample = GIMG_U8;
    out->stride_bytes = row_bytes;
    out->data = (unsigned char *)s.p;
    *viewed = 1;
    return GIMG_OK;
}

/* ------------------------------------------------------ rows (band.h) */

/* A PNM, PAM or PFM in memory, row by row: the rows decoding gives. 8-bit
 * raw rows are used where they lie in buf (checked against the maxval as
 * decoding checks them); PFM's, stored from the last, are found by their
 * place. */
typedef struct {
    src s;               /* at the next row's bytes (PFM: at the raster) */
    header h;
    raster r;
    int y;               /* the next row */
} pnm_rows;

static gimg_status rows_open_netpbm(const unsigned char *buf, size_t len,
                                    const gimg_read_opts *o, gimg_image *header_out,
                                    void **rows)
{
    *rows = NULL;
    pnm_rows *p = calloc(1, sizeof *p);
    if (!p)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    p->s = (src){.p = buf, .end = buf + len};
    gimg_status st = read_header(&p->s, &p->h);
    if (!st)
        st = plan_raster(&p->h, &p->r);
    /* A PFM cut short is refused before any band, as decoding refuses it
     * (its first row read is the image's last, and a float is never out
     * of range); the others' rows are checked in order, as decoding does,
     * so that a bad sample before the cut is the one reported. */
    if (!st && p->r.sample == GIMG_F32 &&
        (size_t)(p->s.end - p->s.p) / p->r.file_row < (size_t)p->h.height)
        st = src_eof(&p->s, "data");
    if (st) {
        free(p);
        return st;
    }
    header_out->width = (int)p->h.width;
    header_out->height = (int)p->h.height;
    header_out->channels = p->h.depth;
    header_out->sample = p->r.sample;
    header_out->maxval = p->r.maxval;
    *rows = p;
    return GIMG_OK;
}

static gimg_status rows_read_netpbm(void *rows, gimg_image *band)
{
    pnm_rows *p = rows;
    const size_t n = (size_t)band->width * (size_t)band->channels;
    const size_t file_row = p->r.file_row;
    const int in_place = !p->r.plain && band->sample == GIMG_U8 && p->h.magic != '4';
    gimg_status st = GIMG_OK;
    if (in_place) {
        band->data = (unsigned char *)p->s.p;
        band->stride_bytes = file_row;
    }
    for (int i = 0; i < band->height && !st; i++) {
        unsigned char *row = in_place ? NULL : gimg_row(band, i);
        const unsigned char *in;
        if (p->r.plain) {
            st = plain_row(&p->s, &p->h, row, n, band->sample);
        } else if (band->sample == GIMG_F32) {
            in = p->s.p + (size_t)(p->h.height - 1 - (p->y + i)) * file_row;
            pfm_row(&p->h, in, row, n);
        } else if (!(st = src_take(&p->s, file_row, &in))) {
            st = raw_row(&p->s, &p->h, in, row, n, band->sample);
        }
    }
    p->y += band->height;
    return st;
}

static void rows_close_netpbm(void *rows)
{
    free(rows);
}

gimg_status gimg_read_pnm_stream(FILE *f, gimg_image *out)
{
    memset(out, 0, sizeof *out);
    src s = { .f = f, .kind = "PNM" };
    flockfile(f);
    /* Whitespace after an image, then EOF, is a clean end of the stream. */
    int c;
    size_t spaces = 0;
    do
        c = getc_unlocked(f);
    while (is_space(c) && ++spaces <= MAX_SKIPPED_BYTES);
    gimg_status st;
    if (spaces > MAX_SKIPPED_BYTES) {
        st = gimg_fail(GIMG_E_FORMAT, "invalid PNM stream: over %zu bytes of whitespace "
                                      "between images", MAX_SKIPPED_BYTES);
    } else if (c == EOF) {
        st = ferror(f) ? gimg_fail(GIMG_E_IO, "read error: %s", strerror(errno)) : GIMG_OK;
    } else if (c != 'P') {
        st = gimg_fail(GIMG_E_FORMAT, "invalid data in PNM stream (not the start of an image)");
    } else {
        ungetc(c, f);
        st = read_image(&s, out, NULL);
    }
    funlockfile(f);
    return st;
}

/* --------------------------------------------------------------- writing */

/* The maxval a PNM/PAM file of im gets: the image's own, else the full
 * range of its samples (an 8-bit image's maxval cannot pass 255). */
static unsigned file_maxval(const gimg_image *im)
{
    unsigned m = gimg_image_max(im);
    return im->sample == GIMG_U8 && m > 255 ? 255 : m;
}

gimg_status gimg_pnm_header(const gimg_image *im, gimg_format f, char *hdr, size_t cap,
                            size_t *len)
{
    static const char *const tupl[5] = { "", "GRAYSCALE", "GRAYSCALE_ALPHA", "RGB", "RGB_ALPHA" };
    int c = im->channels;
    int ok = f == GIMG_FMT_PAM ? (c >= 1 && c <= 4 && im->sample != GIMG_F32)
           : f == GIMG_FMT_PNM ? ((c == 1 || c == 3) && im->sample != GIMG_F32)
           : f == GIMG_FMT_PFM ? ((c == 1 || c == 3) && im->sample == GIMG_F32)
           : 0;
    if (!ok)
        return gimg_fail(GIMG_E_FORMAT, "%s cannot hold a %d-channel %d-bit image",
                         gimg_format_name(f), c, (int)im->sample * 8);
    unsigned maxval = file_maxval(im);
    int hl;
    if (f == GIMG_FMT_PNM)
        hl = snprintf(hdr, cap, "P%c\n%d %d\n%u\n", c == 1 ? '5' : '6', im->width,
                      im->height, maxval);
    else if (f == GIMG_FMT_PAM)
        hl = snprintf(hdr, cap,
                      "P7\nWIDTH %d\nHEIGHT %d\nDEPTH %d\nMAXVAL %u\nTUPLTYPE %s\nENDHDR\n",
                      im->width, im->height, c, maxval, tupl[c]);
    else
        hl = snprintf(hdr, cap, "P%c\n%d %d\n-1.0\n", c == 1 ? 'f' : 'F', im->width,
                      im->height);
    if (hl < 0 || (size_t)hl >= cap)
        return gimg_fail(GIMG_E_LIMIT, "image too large to encode");
    *len = (size_t)hl;
    return GIMG_OK;
}

size_t gimg_pnm_row_bytes(const gimg_image *im)
{
    /* Bytes per sample on file: netpbm's rule, by the maxval alone. */
    const int wide = im->sample == GIMG_U16 && file_maxval(im) > 255;
    const size_t file_sample = im->sample == GIMG_F32 ? 4 : wide ? 2 : 1;
    size_t row;
    if (__builtin_mul_overflow((size_t)im->width * (size_t)im->channels, file_sample, &row))
        return 0;
    return row;
}

void gimg_pnm_encode_row(const gimg_image *im, int y, unsigned char *o)
{
    const size_t n = (size_t)im->width * (size_t)im->channels;   /* samples per row */
    const unsigned char *in = gimg_row(im, y);
    if (im->sample == GIMG_U8) {
        memcpy(o, in, n);
    } else if (im->sample == GIMG_U16 && file_maxval(im) <= 255) {
        /* A 16-bit image whose maxval is at most 255. */
        const uint16_t *s16 = (const uint16_t *)in;
        for (size_t k = 0; k < n; k++)
            o[k] = (unsigned char)s16[k];
    } else if (im->sample == GIMG_U16) {
        const uint16_t *s16 = (const uint16_t *)in;
        for (size_t k = 0; k < n; k++) {
            o[2 * k] = (unsigned char)(s16[k] >> 8);
            o[2 * k + 1] = (unsigned char)s16[k];
        }
    } else if (HOST_LITTLE_ENDIAN) {
        memcpy(o, in, n * 4);
    } else {
        for (size_t k = 0; k < n; k++)
            for (int b = 0; b < 4; b++)
                o[4 * k + (size_t)b] = in[4 * k + 3 - (size_t)b];
    }
}

gimg_status gimg_pnm_encode(const gimg_image *im, gimg_format f, unsigned char **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    char hdr[GIMG_PNM_HEADER_MAX];
    size_t hl;
    gimg_status st = gimg_pnm_header(im, f, hdr, sizeof hdr, &hl);
    if (st)
        return st;
    const size_t row = gimg_pnm_row_bytes(im);
    size_t data, total;
    if (!row || __builtin_mul_overflow(row, (size_t)im->height, &data) ||
        __builtin_add_overflow(data, hl, &total))
        return gimg_fail(GIMG_E_LIMIT, "image too large to encode");
    unsigned char *out = gimg_alloc_large(total);
    if (!out)
        return gimg_fail(GIMG_E_NOMEM, "out of memory allocating %zu bytes", total);
    memcpy(out, hdr, hl);
    unsigned char *o = out + hl;
    /* PFM stores the bottom row first. */
    for (int i = 0; i < im->height; i++, o += row)
        gimg_pnm_encode_row(im, f == GIMG_FMT_PFM ? im->height - 1 - i : i, o);
    *buf = out;
    *len = total;
    return GIMG_OK;
}

/* ------------------------------------------------------ the codec rows */

static int is_pnm_space(int c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* "P1".."P7", "PF" or "Pf", then whitespace or a comment. A two-byte file
 * still counts, so that the reader can say it is truncated rather than
 * unrecognised. Returns the letter after 'P', or 0. */
static int netpbm_kind(const unsigned char *buf, size_t len)
{
    if (len >= 2 && buf[0] == 'P' &&
        ((buf[1] >= '1' && buf[1] <= '7') || buf[1] == 'F' || buf[1] == 'f') &&
        (len == 2 || is_pnm_space(buf[2]) || buf[2] == '#'))
        return buf[1];
    return 0;
}

static int sniff_pnm(const unsigned char *buf, size_t len)
{
    int k = netpbm_kind(buf, len);
    return k >= '1' && k <= '6';
}
static int sniff_pam(const unsigned char *buf, size_t len) { return netpbm_kind(buf, len) == '7'; }
static int sniff_pfm(const unsigned char *buf, size_t len)
{
    int k = netpbm_kind(buf, len);
    return k == 'F' || k == 'f';
}

static int alpha_dropped(int c) { return c == 2 ? 1 : c == 4 ? 3 : c; }

static void layout_pnm(int *channels, gimg_sample *sample)
{
    *channels = alpha_dropped(*channels);
    *sample = *sample == GIMG_U8 ? GIMG_U8 : GIMG_U16;
}
static void layout_pam(int *channels, gimg_sample *sample)
{
    *sample = *sample == GIMG_U8 ? GIMG_U8 : GIMG_U16;
}
static void layout_pfm(int *channels, gimg_sample *sample)
{
    *channels = alpha_dropped(*channels);
    *sample = GIMG_F32;
}

static gimg_status probe_netpbm(const unsigned char *buf, size_t len, const gimg_read_opts *o,
                                gimg_info *info)
{
    return gimg_pnm_probe(buf, len, info);
}
static gimg_status decode_netpbm(const unsigned char *buf, size_t len, const gimg_read_opts *o,
                                 gimg_image *out)
{
    return gimg_pnm_decode(buf, len, out);
}

static gimg_status encode_pnm(const gimg_image *im, const gimg_write_opts *o, unsigned char **buf,
                              size_t *len)
{
    return gimg_pnm_encode(im, GIMG_FMT_PNM, buf, len);
}
static gimg_status encode_pam(const gimg_image *im, const gimg_write_opts *o, unsigned char **buf,
                              size_t *len)
{
    return gimg_pnm_encode(im, GIMG_FMT_PAM, buf, len);
}
static gimg_status encode_pfm(const gimg_image *im, const gimg_write_opts *o, unsigned char **buf,
                              size_t *len)
{
    return gimg_pnm_encode(im, GIMG_FMT_PFM, buf, len);
}

/* PNM and PAM written band by band (codec.h's wrows_*): the header, then
 * the rows as the file holds them, which are an 8-bit band's own rows
 * where they lie packed; or in blocks, each row of a block at its place
 * (wrows_place). PFM, which stores the bottom row first, has no row
 * writer. */
typedef struct {
    gimg_image layout;     /* size, channels, sample, maxval (no data) */
    size_t row_bytes;      /* a row as the file holds it */
    int rows_left;
    char head[GIMG_PNM_HEADER_MAX];
    size_t head_len;
    unsigned char *buf;    /* rows of a band, as the file holds them */
    size_t cap;
} pnm_writer;

static gimg_status wrows_open_netpbm(const gimg_image *layout, gimg_format f, void **rows,
                                     const unsigned char **bytes, size_t *len)
{
    *rows = NULL;
    pnm_writer *w = calloc(1, sizeof *w);
    if (!w)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    w->layout = *layout;
    w->layout.data = NULL;
    w->layout.meta = NULL;
    w->rows_left = layout->height;
    gimg_status st = gimg_pnm_header(layout, f, w->head, sizeof w->head, len);
    w->head_len = *len;
    if (!st && !(w->row_bytes = gimg_pnm_row_bytes(layout)))
        st = gimg_fail(GIMG_E_LIMIT, "image too large to encode");
    if (st) {
        free(w);
        return st;
    }
    *bytes = (const unsigned char *)w->head;
    *rows = w;
    return GIMG_OK;
}
static gimg_status wrows_open_pnm(const gimg_image *layout, const gimg_write_opts *o, void **rows,
                                  const unsigned char **bytes, size_t *len)
{
    return wrows_open_netpbm(layout, GIMG_FMT_PNM, rows, bytes, len);
}
static gimg_status wrows_open_pam(const gimg_image *layout, const gimg_write_opts *o, void **rows,
                                  const unsigned char **bytes, size_t *len)
{
    return wrows_open_netpbm(layout, GIMG_FMT_PAM, rows, bytes, len);
}

static gimg_status grow_buf(pnm_writer *w, size_t len)
{
    if (len <= w->cap)
        return GIMG_OK;
    free(w->buf);
    if (!(w->buf = malloc(len))) {
        w->cap = 0;
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    }
    w->cap = len;
    return GIMG_OK;
}

static gimg_status wrows_put_netpbm(void *rows, const gimg_image *band,
                                    const unsigned char **bytes, size_t *len)
{
    pnm_writer *w = rows;
    if (band->width != w->layout.width || band->channels != w->layout.channels ||
        band->sample != w->layout.sample || band->maxval != w->layout.maxval ||
        band->height < 1 || band->height > w->rows_left)
        return gimg_fail(GIMG_E_USAGE, "PNM writer: a band of another layout, or past the "
                                       "image's rows");
    w->rows_left -= band->height;
    *len = w->row_bytes * (size_t)band->height;
    if (band->sample == GIMG_U8 && band->stride_bytes == w->row_bytes) {
        *bytes = band->data;   /* the file's bytes already */
        return GIMG_OK;
    }
    gimg_status st = grow_buf(w, *len);
    if (st)
        return st;
    for (int y = 0; y < band->height; y++)
        gimg_pnm_encode_row(band, y, w->buf + (size_t)y * w->row_bytes);
    *bytes = w->buf;
    return GIMG_OK;
}

/* A pixel's place: the header, then the rows as the file holds them. */
static gimg_status wrows_place_netpbm(void *rows, const gimg_image *block, int x0, int y0,
                                      int y, const unsigned char **bytes, size_t *len,
                                      uint64_t *at)
{
    pnm_writer *w = rows;
    if (block->channels != w->layout.channels || block->sample != w->layout.sample ||
        block->maxval != w->layout.maxval || x0 < 0 || y0 < 0 || y < 0 ||
        y >= block->height || block->width > w->layout.width - x0 ||
        block->height > w->layout.height - y0)
        return gimg_fail(GIMG_E_USAGE, "PNM writer: a block of another layout, or outside "
                                       "the image");
    const size_t pixel_bytes = w->row_bytes / (size_t)w->layout.width;
    *len = (size_t)block->width * pixel_bytes;
    *at = w->head_len + (uint64_t)(y0 + y) * w->row_bytes + (uint64_t)x0 * pixel_bytes;
    if (block->sample == GIMG_U8) {
        *bytes = gimg_row(block, y);   /* the file's bytes already */
        return GIMG_OK;
    }
    gimg_status st = grow_buf(w, *len);
    if (!st) {
        gimg_pnm_encode_row(block, y, w->buf);
        *bytes = w->buf;
    }
    return st;
}

static void wrows_close_netpbm(void *rows)
{
    pnm_writer *w = rows;
    if (w)
        free(w->buf);
    free(w);
}

/* No metadata in any of the three; PNM and PAM keep any maxval, PFM's
 * float samples have none. */
const gimg_codec gimg_codec_pnm = {
    .format = GIMG_FMT_PNM,
    .name = "PNM",
    .extensions = "pnm ppm pgm pbm",
    .sniff = sniff_pnm,
    .probe = probe_netpbm,
    .decode = decode_netpbm,
    .layout = layout_pnm,
    .encode = encode_pnm,
    .meta = 0,
    .rows_open = rows_open_netpbm,
    .rows_read = rows_read_netpbm,
    .rows_close = rows_close_netpbm,
    .maxval_rule = GIMG_MAXVAL_ANY,
    .wrows_open = wrows_open_pnm,
    .wrows_put = wrows_put_netpbm,
    .wrows_place = wrows_place_netpbm,
    .wrows_close = wrows_close_netpbm,
};
const gimg_codec gimg_codec_pam = {
    .format = GIMG_FMT_PAM,
    .name = "PAM",
    .extensions = "pam",
    .sniff = sniff_pam,
    .probe = probe_netpbm,
    .decode = decode_netpbm,
    .layout = layout_pam,
    .encode = encode_pam,
    .meta = 0,
    .rows_open = rows_open_netpbm,
    .rows_read = rows_read_netpbm,
    .rows_close = rows_close_netpbm,
    .maxval_rule = GIMG_MAXVAL_ANY,
    .wrows_open = wrows_open_pam,
    .wrows_put = wrows_put_netpbm,
    .wrows_place = wrows_place_netpbm,
    .wrows_close = wrows_close_netpbm,
};
const gimg_codec gimg_codec_pfm = {
    .format = GIMG_FMT_PFM,
    .name = "PFM",
    .extensions = "pfm",
    .sniff = sniff_pfm,
    .probe = probe_netpbm,
    .decode = decode_netpbm,
    .layout = layout_pfm,
    .encode = encode_pfm,
    .meta = 0,
    .rows_open = rows_open_netpbm,
    .rows_read = rows_read_netpbm,
    .rows_close = rows_close_netpbm,
    .maxval_rule = GIMG_MAXVAL_FULL,
};
