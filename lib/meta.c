/*
 * meta.c — an image's metadata (gimg_meta, gimg.h): making, copying and
 * freeing it, the helpers the codecs fill it with, and the little EXIF
 * parsing the tools need.
 *
 * EXIF is kept as the block the file holds (TIFF-structured: a byte-order
 * mark, 42, the offset of IFD0) and is parsed only for three things:
 *  - checking it, when a decoder hands it over: the header, IFD0, the IFDs
 *    chained after it and the Exif IFD it points to (tag 0x8769) must lie
 *    inside the block, and no IFD may be visited twice (a loop). A block
 *    that fails is dropped with a warning: the image is still processed;
 *  - the orientation (IFD0 tag 0x0112, a SHORT of 1..8), read when the
 *    block is taken and rewritten in place by gimg_meta_set_orientation;
 *  - the pixel dimensions (Exif IFD tags 0xA002/0xA003, SHORT or LONG),
 *    rewritten in place by gimg_meta_set_dimensions.
 * Values in the block are never followed further, so a crafted block costs
 * at most a walk over MAX_IFDS directories of at most the block's size.
 *
 * Caps: an ICC profile, EXIF block or XMP packet over 16 MiB, or a text
 * over 1 MiB, is dropped with a warning (ImageMagick and libvips hold
 * less in practice: a JPEG marker holds 64 KiB).
 */
#include "codec.h"
#include "io_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BLOB_BYTES ((size_t)16 << 20)
#define MAX_TEXT_BYTES ((size_t)1 << 20)
#define MAX_TEXTS 4096
#define MAX_IFDS 8

enum {
    TAG_IMAGE_WIDTH = 0x0100,
    TAG_IMAGE_LENGTH = 0x0101,
    TAG_ORIENTATION = 0x0112,
    TAG_EXIF_IFD = 0x8769,
    TAG_PIXEL_X = 0xA002,
    TAG_PIXEL_Y = 0xA003
};
enum { TYPE_SHORT = 3, TYPE_LONG = 4 };

/* ------------------------------------------------------------- the struct */

gimg_meta *gimg_meta_new(void) { return calloc(1, sizeof(gimg_meta)); }

static void free_text(gimg_text *t)
{
    free(t->keyword);
    free(t->text);
    free(t->language);
    free(t->translated_keyword);
}

void gimg_meta_free(gimg_meta *m)
{
    if (!m)
        return;
    gimg_meta_drop(m, ~0u);
    free(m);
}

static unsigned char *dup_bytes(const unsigned char *p, size_t n)
{
    unsigned char *q = malloc(n ? n : 1);
    if (q && n)
        memcpy(q, p, n);
    return q;
}

/* strdup of s (NULL stays NULL); *ok cleared when out of memory. */
static char *dup_string(const char *s, int *ok)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *ok = 0;
    return d;
}

gimg_status gimg_meta_copy(const gimg_meta *m, gimg_meta **out)
{
    *out = NULL;
    if (!m)
        return GIMG_OK;
    gimg_meta *c = gimg_meta_new();
    int ok = c != NULL;
    if (ok) {
        *c = *m;
        c->icc = c->exif = c->xmp = NULL;
        c->texts = NULL;
        c->n_texts = 0;
        if (m->icc_bytes && !(c->icc = dup_bytes(m->icc, m->icc_bytes)))
            ok = 0;
        if (m->exif_bytes && !(c->exif = dup_bytes(m->exif, m->exif_bytes)))
            ok = 0;
        if (m->xmp_bytes && !(c->xmp = dup_bytes(m->xmp, m->xmp_bytes)))
            ok = 0;
        if (ok && m->n_texts > 0) {
            c->texts = calloc((size_t)m->n_texts, sizeof *c->texts);
            ok = c->texts != NULL;
            for (int i = 0; ok && i < m->n_texts; i++, c->n_texts++) {
                const gimg_text *s = &m->texts[i];
                gimg_text *d = &c->texts[i];
                *d = *s;
                d->keyword = dup_string(s->keyword, &ok);
                d->text = dup_string(s->text, &ok);
                d->language = dup_string(s->language, &ok);
                d->translated_keyword = dup_string(s->translated_keyword, &ok);
            }
        }
    }
    if (!ok) {
        gimg_meta_free(c);
        return gimg_fail(GIMG_E_NOMEM, "out of memory copying metadata");
    }
    *out = c;
    return GIMG_OK;
}

void gimg_meta_drop(gimg_meta *m, unsigned kinds)
{
    if (!m)
        return;
    if (kinds & GIMG_META_ICC)
        free(m->icc), m->icc = NULL, m->icc_bytes = 0;
    if (kinds & GIMG_META_EXIF)
        free(m->exif), m->exif = NULL, m->exif_bytes = 0;
    if (kinds & GIMG_META_XMP)
        free(m->xmp), m->xmp = NULL, m->xmp_bytes = 0;
    if (kinds & GIMG_META_RESOLUTION)
        m->x_dpi = m->y_dpi = 0;
    if (kinds & GIMG_META_TEXT) {
        for (int i = 0; i < m->n_texts; i++)
            free_text(&m->texts[i]);
        free(m->texts);
        m->texts = NULL;
        m->n_texts = 0;
    }
    if (kinds & GIMG_META_ORIENTATION)
        m->orientation = 0;
}

unsigned gimg_meta_kinds(const gimg_meta *m)
{
    if (!m)
        return 0;
    return (m->icc_bytes ? GIMG_META_ICC : 0u) | (m->exif_bytes ? GIMG_META_EXIF : 0u) |
           (m->xmp_bytes ? GIMG_META_XMP : 0u) |
           (m->x_dpi > 0 || m->y_dpi > 0 ? GIMG_META_RESOLUTION : 0u) |
           (m->n_texts ? GIMG_META_TEXT : 0u) | (m->orientation ? GIMG_META_ORIENTATION : 0u);
}

const char *gimg_meta_kind_text(unsigned kinds, char *buf, size_t size)
{
    static const char *const words[] = {"ICC profile", "EXIF", "XMP", "resolution",
                                        "text chunks", "orientation"};
    return gimg_io_bits_text(kinds, words, sizeof words / sizeof words[0], buf, size);
}

void gimg_meta_warn(gimg_meta **m, const char *fmt, ...)
{
    if (!*m && !(*m = gimg_meta_new()))
        return; /* out of memory: the warning is lost, nothing else */
    if ((*m)->warning[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf((*m)->warning, sizeof (*m)->warning, fmt, ap);
    va_end(ap);
}

static gimg_status ensure(gimg_meta **m)
{
    if (!*m && !(*m = gimg_meta_new()))
        return gimg_fail(GIMG_E_NOMEM, "out of memory for metadata");
    return GIMG_OK;
}

/* Replaces blob `kind` (ICC, EXIF or XMP) of *m with a copy of p[0 .. n-1],
 * unless it is over the cap. */
static gimg_status set_blob(gimg_meta **m, unsigned kind, const unsigned char *p, size_t n)
{
    static const char *const names[] = {"ICC profile", "EXIF", "XMP"};
    gimg_status st = ensure(m);
    if (st || n == 0)
        return st;
    gimg_meta *mm = *m;
    int k = kind == GIMG_META_ICC ? 0 : kind == GIMG_META_EXIF ? 1 : 2;
    unsigned char **slot = k == 0 ? &mm->icc : k == 1 ? &mm->exif : &mm->xmp;
    size_t *slot_bytes = k == 0 ? &mm->icc_bytes : k == 1 ? &mm->exif_bytes : &mm->xmp_bytes;
    if (n > MAX_BLOB_BYTES) {
        gimg_meta_warn(m, "%s dropped: %zu bytes, over the limit of %zu", names[k], n,
                       MAX_BLOB_BYTES);
        return GIMG_OK;
    }
    unsigned char *copy = dup_bytes(p, n);
    if (!copy)
        return gimg_fail(GIMG_E_NOMEM, "out of memory for metadata");
    free(*slot);
    *slot = copy;
    *slot_bytes = n;
    return GIMG_OK;
}

gimg_status gimg_meta_add_icc(gimg_meta **m, const unsigned char *p, size_t n)
{
    return set_blob(m, GIMG_META_ICC, p, n);
}

gimg_status gimg_meta_add_xmp(gimg_meta **m, const unsigned char *p, size_t n)
{
    return set_blob(m, GIMG_META_XMP, p, n);
}

gimg_status gimg_meta_add_text(gimg_meta **m, const char *keyword, const char *text,
                               size_t text_bytes, const char *language,
                               const char *translated_keyword, int international,
                               int compressed)
{
    gimg_status st = ensure(m);
    if (st)
        return st;
    gimg_meta *mm = *m;
    if (text_bytes > MAX_TEXT_BYTES) {
        gimg_meta_warn(m, "text chunk \"%.40s\" dropped: %zu bytes, over the limit of %zu",
                       keyword, text_bytes, MAX_TEXT_BYTES);
        return GIMG_OK;
    }
    if (mm->n_texts >= MAX_TEXTS) {
        gimg_meta_warn(m, "text chunks past the first %d dropped", MAX_TEXTS);
        return GIMG_OK;
    }
    gimg_text *grown = realloc(mm->texts, ((size_t)mm->n_texts + 1) * sizeof *grown);
    if (!grown)
        return gimg_fail(GIMG_E_NOMEM, "out of memory for metadata");
    mm->texts = grown;
    gimg_text t = {.international = international != 0, .compressed = compressed != 0};
    int ok = 1;
    t.keyword = dup_string(keyword, &ok);
    t.text = malloc(text_bytes + 1);
    if (t.text) {
        memcpy(t.text, text, text_bytes);
        t.text[text_bytes] = '\0';
    }
    t.language = dup_string(language, &ok);
    t.translated_keyword = dup_string(translated_keyword, &ok);
    if (!ok || !t.text || !t.keyword) {
        free_text(&t);
        return gimg_fail(GIMG_E_NOMEM, "out of memory for metadata");
    }
    mm->texts[mm->n_texts++] = t;
    return GIMG_OK;
}

/* ------------------------------------------------------------------- EXIF */

typedef struct {
    unsigned char *p; /* the block (written only by the setters) */
    size_t n;
    int big_endian;
} exif_block;

static unsigned get16(const exif_block *b, size_t at)
{
    const unsigned char *q = b->p + at;
    return b->big_endian ? (unsigned)q[0] << 8 | q[1] : (unsigned)q[1] << 8 | q[0];
}

static uint32_t get32(const exif_block *b, size_t at)
{
    return b->big_endian ? gimg_be32(b->p + at) : gimg_le32(b->p + at);
}

static void put16(exif_block *b, size_t at, unsigned v)
{
    unsigned char *q = b->p + at;
    q[b->big_endian ? 0 : 1] = (unsigned char)(v >> 8);
    q[b->big_endian ? 1 : 0] = (unsigned char)v;
}

static void put32(exif_block *b, size_t at, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b->p[at + (size_t)(b->big_endian ? i : 3 - i)] = (unsigned char)(v >> (24 - 8 * i));
}

/* The block's header; NULL when it is fine, else why not. */
static const char *exif_open(exif_block *b, unsigned char *p, size_t n)
{
    b->p = p;
    b->n = n;
    if (n < 8)
        return "shorter than its header";
    if (p[0] == 'I' && p[1] == 'I')
        b->big_endian = 0;
    else if (p[0] == 'M' && p[1] == 'M')
        b->big_endian = 1;
    else
        return "no byte-order mark";
    if (get16(b, 2) != 42)
        return "not TIFF-structured";
    return NULL;
}

/* 1 if an IFD can start at `at`: its count, entries and next offset
 * within the block. */
static int ifd_fits(const exif_block *b, uint32_t at)
{
    if (at < 8 || (size_t)at > b->n - 2)
        return 0;
    return (size_t)at + 2 + 12 * (size_t)get16(b, at) + 4 <= b->n;
}

enum { IFD_ZERO, IFD_EXIF, IFD_OTHER }; /* IFD0, the Exif IFD, IFD1 and after */

typedef struct {
    uint32_t at[MAX_IFDS];
    int n;
} ifd_set;

/* NULL when the IFD at `at` may be walked (inside the block, not seen
 * before, within MAX_IFDS), else why not. */
static const char *enter_ifd(const exif_block *b, ifd_set *seen, uint32_t at, const char *past)
{
    for (int i = 0; i < seen->n; i++)
        if (seen->at[i] == at)
            return "its IFDs loop";
    if (seen->n == MAX_IFDS)
        return "too many IFDs";
    if (!ifd_fits(b, at))
        return past;
    seen->at[seen->n++] = at;
    return NULL;
}

/* Calls visit(b, entry's offset, which IFD, user) for every entry of IFD0,
 * of the IFDs chained after it, and of the Exif IFD IFD0 points to. NULL
 * when the structure holds, else why not. */
typedef void (*entry_visit)(exif_block *b, size_t entry, int ifd, void *user);
static const char *exif_walk(exif_block *b, entry_visit visit, void *user)
{
    ifd_set seen = {.n = 0};
    uint32_t at = get32(b, 4), exif_ifd = 0;
    const char *why;
    if (at == 0)
        return "it has no IFD0";
    for (int ifd = IFD_ZERO; at; ifd = IFD_OTHER) {
        if ((why = enter_ifd(b, &seen, at, ifd == IFD_ZERO ? "its IFD0 points past the block"
                                                          : "an IFD points past the block")))
            return why;
        unsigned count = get16(b, at);
        for (unsigned e = 0; e < count; e++) {
            size_t entry = (size_t)at + 2 + 12 * (size_t)e;
            if (ifd == IFD_ZERO && get16(b, entry) == TAG_EXIF_IFD &&
                get16(b, entry + 2) == TYPE_LONG && get32(b, entry + 4) == 1)
                exif_ifd = get32(b, entry + 8);
            if (visit)
                visit(b, entry, ifd, user);
        }
        at = get32(b, (size_t)at + 2 + 12 * (size_t)count);
    }
    if (exif_ifd) {
        if ((why = enter_ifd(b, &seen, exif_ifd, "its Exif IFD points past the block")))
            return why;
        unsigned count = get16(b, exif_ifd);
        for (unsigned e = 0; e < count && visit; e++)
            visit(b, (size_t)exif_ifd + 2 + 12 * (size_t)e, IFD_EXIF, user);
    }
    return NULL;
}

/* A SHORT or LONG entry of count 1: its value; -1 otherwise. */
static int64_t entry_number(const exif_block *b, size_t entry)
{
    unsigned type = get16(b, entry + 2);
    if (get32(b, entry + 4) != 1)
        return -1;
    return type == TYPE_SHORT ? (int64_t)get16(b, entry + 8)
           : type == TYPE_LONG ? (int64_t)get32(b, entry + 8) : -1;
}

static void find_orientation(exif_block *b, size_t entry, int ifd, void *user)
{
    int *orientation = user;
    if (ifd == IFD_ZERO && get16(b, entry) == TAG_ORIENTATION &&
        get16(b, entry + 2) == TYPE_SHORT) {
        int64_t v = entry_number(b, entry);
        *orientation = v >= 1 && v <= 8 ? (int)v : 0;
    }
}

static void write_orientation(exif_block *b, size_t entry, int ifd, void *user)
{
    if (ifd == IFD_ZERO && get16(b, entry) == TAG_ORIENTATION &&
        get16(b, entry + 2) == TYPE_SHORT && get32(b, entry + 4) == 1)
        put16(b, entry + 8, (unsigned)*(const int *)user);
}

/* Pixel dimensions: a SHORT that cannot hold the new value becomes a
 * LONG, which fits in the same entry. */
static void write_dimensions(exif_block *b, size_t entry, int ifd, void *user)
{
    const int *wh = user;
    unsigned tag = get16(b, entry);
    if (ifd != IFD_EXIF || (tag != TAG_PIXEL_X && tag != TAG_PIXEL_Y) || entry_number(b, entry) < 0)
        return;
    uint32_t v = (uint32_t)(tag == TAG_PIXEL_X ? wh[0] : wh[1]);
    if (get16(b, entry + 2) == TYPE_SHORT && v <= 0xffff) {
        put16(b, entry + 8, v);
    } else {
        put16(b, entry + 2, TYPE_LONG);
        put32(b, entry + 8, v);
    }
}

gimg_status gimg_meta_add_exif(gimg_meta **m, const unsigned char *p, size_t n)
{
    gimg_status st = ensure(m);
    if (st || n == 0)
        return st;
    exif_block b;
    int orientation = 0;
    const char *why = exif_open(&b, (unsigned char *)p, n);
    if (!why)
        why = exif_walk(&b, find_orientation, &orientation); /* reads only */
    if (why) {
        gimg_meta_warn(m, "EXIF dropped: %s", why);
        return GIMG_OK;
    }
    if ((st = set_blob(m, GIMG_META_EXIF, p, n)))
        return st;
    if ((*m)->exif_bytes == n)
        (*m)->orientation = orientation;
    return GIMG_OK;
}

/* Applies an edit to m's EXIF block in place. A crafted block whose IFDs
 * overlap could be broken by the edit (a value written over another IFD's
 * entry): such a block is dropped, as it would have been on reading had it
 * looked like that, or where it would say another orientation. */
static void edit_exif(gimg_meta *m, entry_visit edit, void *user)
{
    exif_block b;
    int before = 0, after = 0;
    if (!m->exif || exif_open(&b, m->exif, m->exif_bytes))
        return;
    /* The orientation it read as must come out as the image's: an edit of
     * overlapping entries (the Exif IFD's dimensions written over IFD0's
     * orientation) could change it. */
    if (exif_walk(&b, find_orientation, &before) || exif_walk(&b, edit, user) ||
        exif_walk(&b, find_orientation, &after) ||
        (before ? after != m->orientation : after != 0 && after != m->orientation))
        gimg_meta_drop(m, GIMG_META_EXIF);
}

void gimg_meta_set_orientation(gimg_meta *m, int orientation)
{
    if (!m || orientation < 1 || orientation > 8)
        return;
    m->orientation = orientation;
    edit_exif(m, write_orientation, &orientation);
}

void gimg_meta_set_dimensions(gimg_meta *m, int width, int height)
{
    int wh[2] = {width, height};
    if (m)
        edit_exif(m, write_dimensions, wh);
}

unsigned char *gimg_exif_minimal(int orientation, size_t *bytes)
{
    /* Little-endian header, IFD0 at 8 with one entry, no next IFD. */
    static const unsigned char k_block[26] = {'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0,
                                              0x12, 0x01, TYPE_SHORT, 0, 1, 0, 0, 0,
                                              1, 0, 0, 0, 0, 0, 0, 0};
    unsigned char *p = dup_bytes(k_block, sizeof k_block);
    if (p) {
        p[18] = (unsigned char)(orientation >= 1 && orientation <= 8 ? orientation : 1);
        *bytes = sizeof k_block;
    }
    return p;
}
