/*
 * unit_meta — an image's metadata (lib/meta.c): copies, caps, the EXIF
 * checks and edits (orientation, pixel dimensions) on blocks built here
 * byte by byte, hostile blocks, and what gimg_encode does with metadata a
 * format cannot hold (dropped and counted, or synthesised EXIF), --strip.
 */
#include "check.h"
#include "codec.h"
#include "testfile.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------ EXIF blocks built here */

typedef struct {
    unsigned char b[256];
    size_t n;
    int big;
} block;

static void put16_at(block *k, size_t at, unsigned v)
{
    k->b[at + (k->big ? 0 : 1)] = (unsigned char)(v >> 8);
    k->b[at + (k->big ? 1 : 0)] = (unsigned char)v;
}

static void put32_at(block *k, size_t at, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        k->b[at + (size_t)(k->big ? i : 3 - i)] = (unsigned char)(v >> (24 - 8 * i));
}

static unsigned get16_at(const unsigned char *b, int big, size_t at)
{
    return big ? (unsigned)b[at] << 8 | b[at + 1] : (unsigned)b[at + 1] << 8 | b[at];
}

static uint32_t get32_at(const unsigned char *b, int big, size_t at)
{
    return big ? (uint32_t)b[at] << 24 | (uint32_t)b[at + 1] << 16 | (uint32_t)b[at + 2] << 8 |
                     b[at + 3]
               : (uint32_t)b[at + 3] << 24 | (uint32_t)b[at + 2] << 16 |
                     (uint32_t)b[at + 1] << 8 | b[at];
}

static void entry(block *k, size_t at, unsigned tag, unsigned type, uint32_t count,
                  uint32_t value)
{
    put16_at(k, at, tag);
    put16_at(k, at + 2, type);
    put32_at(k, at + 4, count);
    if (type == 3 && count == 1)
        put16_at(k, at + 8, value);
    else
        put32_at(k, at + 8, value);
}

/* Offsets of the entries the tests look at. */
enum {
    IFD0 = 8,
    ORIENT_ENTRY = IFD0 + 2 + 12 * 1,  /* IFD0's second entry */
    EXIF_IFD = 64,
    PIXEL_X_ENTRY = EXIF_IFD + 2,
    PIXEL_Y_ENTRY = EXIF_IFD + 2 + 12,
    IFD1 = 120
};

/* IFD0: Make (an offset to text), Orientation, ExifIFD pointer; next IFD1.
 * Exif IFD: PixelXDimension SHORT, PixelYDimension LONG. IFD1: one entry. */
static block camera_block(int big, int orientation)
{
    block k;
    memset(&k, 0, sizeof k);
    k.big = big;
    k.n = 160;
    k.b[0] = k.b[1] = big ? 'M' : 'I';
    put16_at(&k, 2, 42);
    put32_at(&k, 4, IFD0);
    put16_at(&k, IFD0, 3);
    entry(&k, IFD0 + 2, 0x010f, 2, 6, 140); /* Make, "gimg\0" at 140 */
    entry(&k, ORIENT_ENTRY, 0x0112, 3, 1, (uint32_t)orientation);
    entry(&k, IFD0 + 2 + 24, 0x8769, 4, 1, EXIF_IFD);
    put32_at(&k, IFD0 + 2 + 36, IFD1);
    put16_at(&k, EXIF_IFD, 2);
    entry(&k, PIXEL_X_ENTRY, 0xa002, 3, 1, 640);
    entry(&k, PIXEL_Y_ENTRY, 0xa003, 4, 1, 480);
    put32_at(&k, EXIF_IFD + 2 + 24, 0);
    put16_at(&k, IFD1, 1);
    entry(&k, IFD1 + 2, 0x0103, 3, 1, 6);
    put32_at(&k, IFD1 + 14, 0);
    memcpy(k.b + 140, "gimg", 5);
    return k;
}

static void test_orientation_read_and_rewritten(void)
{
    for (int big = 0; big <= 1; big++)
        for (int o = 1; o <= 8; o++) {
            block k = camera_block(big, o);
            gimg_meta *m = NULL;
            CHECK(gimg_meta_add_exif(&m, k.b, k.n) == GIMG_OK);
            CHECK(m && m->exif_bytes == k.n && m->orientation == o, "big %d: orientation %d",
                  big, m ? m->orientation : -1);
            CHECK(m && m->warning[0] == '\0', "warning '%s'", m ? m->warning : "");
            gimg_meta_set_orientation(m, 1);
            CHECK(m->orientation == 1);
            CHECK(get16_at(m->exif, big, ORIENT_ENTRY + 8) == 1, "tag not rewritten");
            /* Only the value changed. */
            CHECK(!memcmp(m->exif, k.b, ORIENT_ENTRY + 8));
            CHECK(!memcmp(m->exif + ORIENT_ENTRY + 10, k.b + ORIENT_ENTRY + 10,
                          k.n - ORIENT_ENTRY - 10));
            gimg_meta_free(m);
        }
}

static void test_orientation_out_of_range_ignored(void)
{
    block k = camera_block(0, 9);
    gimg_meta *m = NULL;
    CHECK(gimg_meta_add_exif(&m, k.b, k.n) == GIMG_OK);
    CHECK(m && m->exif_bytes == k.n && m->orientation == 0);
    gimg_meta_free(m);
}

static void test_dimensions_rewritten(void)
{
    for (int big = 0; big <= 1; big++) {
        block k = camera_block(big, 6);
        gimg_meta *m = NULL;
        CHECK(gimg_meta_add_exif(&m, k.b, k.n) == GIMG_OK && m);
        gimg_meta_set_dimensions(m, 480, 640);
        CHECK(get16_at(m->exif, big, PIXEL_X_ENTRY + 2) == 3, "X stays a SHORT");
        CHECK(get16_at(m->exif, big, PIXEL_X_ENTRY + 8) == 480);
        CHECK(get32_at(m->exif, big, PIXEL_Y_ENTRY + 8) == 640);
        /* A SHORT that cannot hold the width becomes a LONG. */
        gimg_meta_set_dimensions(m, 70000, 3);
        CHECK(get16_at(m->exif, big, PIXEL_X_ENTRY + 2) == 4, "X became a LONG");
        CHECK(get32_at(m->exif, big, PIXEL_X_ENTRY + 8) == 70000);
        CHECK(get32_at(m->exif, big, PIXEL_Y_ENTRY + 8) == 3);
        CHECK(m->orientation == 6, "dimensions leave the orientation");
        gimg_meta_free(m);
    }
}

/* Each broken block is dropped with the reason, never an error. */
static void expect_dropped(block *k, const char *why)
{
    gimg_meta *m = NULL;
    CHECK(gimg_meta_add_exif(&m, k->b, k->n) == GIMG_OK);
    CHECK(m && !m->exif && m->exif_bytes == 0 && m->orientation == 0, "%s: kept", why);
    CHECK(m && contains(m->warning, why), "warning '%s', want '%s'", m ? m->warning : "", why);
    gimg_meta_free(m);
}

static void test_hostile_blocks_dropped(void)
{
    block k = camera_block(0, 6);
    put32_at(&k, IFD0 + 2 + 36, IFD0); /* IFD0's next is IFD0 */
    expect_dropped(&k, "loop");
    k = camera_block(1, 6);
    put32_at(&k, IFD1 + 14, IFD1); /* IFD1 points at itself */
    expect_dropped(&k, "loop");
    k = camera_block(0, 6);
    put32_at(&k, IFD0 + 2 + 36, EXIF_IFD); /* the chain runs into the Exif IFD */
    expect_dropped(&k, "loop");
    k = camera_block(0, 6);
    put32_at(&k, 4, 4000);
    expect_dropped(&k, "IFD0 points past the block");
    k = camera_block(0, 6);
    put16_at(&k, IFD0, 60000); /* more entries than the block holds */
    expect_dropped(&k, "IFD0 points past the block");
    k = camera_block(1, 6);
    entry(&k, IFD0 + 2 + 24, 0x8769, 4, 1, 0xfffffff0u);
    expect_dropped(&k, "Exif IFD points past the block");
    k = camera_block(0, 6);
    put32_at(&k, IFD0 + 2 + 36, (uint32_t)k.n - 3);
    expect_dropped(&k, "an IFD points past the block");
    k = camera_block(0, 6);
    k.b[0] = 'X';
    expect_dropped(&k, "byte-order");
    k = camera_block(0, 6);
    put16_at(&k, 2, 43);
    expect_dropped(&k, "TIFF");
    k = camera_block(0, 6);
    k.n = 7;
    expect_dropped(&k, "header");
    k = camera_block(0, 6);
    put32_at(&k, 4, 0);
    expect_dropped(&k, "no IFD0");
}

/* Eight IFDs chained one after the other: walked, and no further. */
static void test_ifd_chain_bounded(void)
{
    block k;
    memset(&k, 0, sizeof k);
    k.n = 8 + 20 * 9;
    k.b[0] = k.b[1] = 'I';
    put16_at(&k, 2, 42);
    put32_at(&k, 4, 8);
    for (int i = 0; i < 9; i++) {
        size_t at = 8 + 20 * (size_t)i;
        put16_at(&k, at, 1);
        entry(&k, at + 2, i == 0 ? 0x0112 : 0x0103, 3, 1, i == 0 ? 3 : 1);
        put32_at(&k, at + 14, i == 8 ? 0 : (uint32_t)(at + 20));
    }
    expect_dropped(&k, "too many IFDs");
    k.n = 8 + 20 * 8;
    put32_at(&k, 8 + 20 * 7 + 14, 0);
    gimg_meta *m = NULL;
    CHECK(gimg_meta_add_exif(&m, k.b, k.n) == GIMG_OK && m && m->orientation == 3);
    gimg_meta_free(m);
}

static void test_minimal_exif(void)
{
    size_t n = 0;
    unsigned char *p = gimg_exif_minimal(8, &n);
    CHECK(p && n == 26);
    gimg_meta *m = NULL;
    CHECK(p && gimg_meta_add_exif(&m, p, n) == GIMG_OK && m && m->orientation == 8 &&
          !m->warning[0]);
    gimg_meta_free(m);
    free(p);
}

/* ------------------------------------------------------- the struct */

static void test_copy_is_deep_and_complete(void)
{
    gimg_meta *m = NULL;
    const unsigned char icc[] = {1, 2, 3, 4, 5}, xmp[] = "<x:xmpmeta/>";
    block k = camera_block(0, 5);
    CHECK(gimg_meta_add_icc(&m, icc, sizeof icc) == GIMG_OK);
    CHECK(gimg_meta_add_xmp(&m, xmp, sizeof xmp - 1) == GIMG_OK);
    CHECK(gimg_meta_add_exif(&m, k.b, k.n) == GIMG_OK);
    CHECK(gimg_meta_add_text(&m, "Title", "ab", 1, NULL, NULL, 0, 0) == GIMG_OK);
    CHECK(gimg_meta_add_text(&m, "Author", "Ünï", strlen("Ünï"), "de", "Autor", 1, 1) ==
          GIMG_OK);
    m->x_dpi = 300, m->y_dpi = 150;
    CHECK(gimg_meta_kinds(m) == (GIMG_META_ICC | GIMG_META_EXIF | GIMG_META_XMP |
                                 GIMG_META_RESOLUTION | GIMG_META_TEXT |
                                 GIMG_META_ORIENTATION));
    gimg_meta *c = NULL;
    CHECK(gimg_meta_copy(m, &c) == GIMG_OK && c);
    if (!c) {
        gimg_meta_free(m);
        return;
    }
    CHECK(c->icc != m->icc && c->icc_bytes == sizeof icc && !memcmp(c->icc, icc, sizeof icc));
    CHECK(c->xmp != m->xmp && c->xmp_bytes == sizeof xmp - 1);
    CHECK(c->exif != m->exif && c->exif_bytes == k.n && !memcmp(c->exif, k.b, k.n));
    CHECK(c->orientation == 5 && c->x_dpi == 300 && c->y_dpi == 150);
    CHECK(c->n_texts == 2 && c->texts != m->texts);
    /* text_bytes counts: one byte of "ab" taken, and terminated. */
    CHECK(!strcmp(c->texts[0].keyword, "Title") && !strcmp(c->texts[0].text, "a"));
    CHECK(c->texts[1].international && c->texts[1].compressed &&
          !strcmp(c->texts[1].language, "de") && !strcmp(c->texts[1].translated_keyword, "Autor") &&
          c->texts[1].language != m->texts[1].language);
    CHECK(!c->texts[0].language && !c->texts[0].translated_keyword);
    gimg_meta_drop(c, GIMG_META_ICC | GIMG_META_TEXT);
    CHECK(gimg_meta_kinds(c) == (GIMG_META_EXIF | GIMG_META_XMP | GIMG_META_RESOLUTION |
                                 GIMG_META_ORIENTATION));
    char words[128];
    CHECK(!strcmp(gimg_meta_kind_text(GIMG_META_ICC | GIMG_META_XMP, words, sizeof words),
                  "ICC profile, XMP"), "'%s'", words);
    gimg_meta_free(c);
    gimg_meta_free(m);
    gimg_meta *none = (gimg_meta *)&none;
    CHECK(gimg_meta_copy(NULL, &none) == GIMG_OK && none == NULL);
    CHECK(gimg_meta_kinds(NULL) == 0);
}

static void test_caps(void)
{
    size_t big = ((size_t)16 << 20) + 1;
    unsigned char *p = calloc(1, big);
    gimg_meta *m = NULL;
    CHECK(p && gimg_meta_add_icc(&m, p, big) == GIMG_OK);
    CHECK(m && !m->icc && contains(m->warning, "ICC profile dropped"), "'%s'",
          m ? m->warning : "");
    gimg_meta_free(m);
    m = NULL;
    CHECK(p && gimg_meta_add_text(&m, "Comment", (char *)p, ((size_t)1 << 20) + 1, NULL, NULL,
                                  0, 1) == GIMG_OK);
    CHECK(m && m->n_texts == 0 && contains(m->warning, "Comment"), "'%s'", m ? m->warning : "");
    gimg_meta_free(m);
    free(p);
}

/* ---------------------------------------------- metadata through encoding */

static gimg_image small_image(void)
{
    gimg_image im;
    gimg_image_alloc(&im, 5, 3, 3, GIMG_U8);
    for (size_t i = 0; i < 45; i++)
        im.data[i] = (unsigned char)(i * 5);
    return im;
}

static void test_encode_counts_what_a_format_drops(void)
{
    gimg_image im = small_image();
    const unsigned char icc[] = {9, 9, 9};
    CHECK(gimg_meta_add_icc(&im.meta, icc, sizeof icc) == GIMG_OK);
    im.meta->x_dpi = im.meta->y_dpi = 72;
    unsigned char *buf = NULL;
    size_t len = 0;
    gimg_format f = GIMG_FMT_UNKNOWN;
    gimg_take_dropped_meta(NULL);
    CHECK(gimg_encode(&im, GIMG_FMT_PNM, NULL, &buf, &len) == GIMG_OK);
    CHECK(gimg_take_dropped_meta(&f) == (GIMG_META_ICC | GIMG_META_RESOLUTION) &&
          f == GIMG_FMT_PNM);
    CHECK(gimg_take_dropped_meta(&f) == 0 && f == GIMG_FMT_UNKNOWN, "taken once");
    free(buf);
    /* --strip drops it all, and that is no loss to report. */
    gimg_write_opts o;
    gimg_write_opts_init(&o);
    o.strip = 1;
    CHECK(gimg_encode(&im, GIMG_FMT_PNM, &o, &buf, &len) == GIMG_OK);
    CHECK(gimg_take_dropped_meta(NULL) == 0);
    free(buf);
    /* The image keeps its own metadata whatever encoding did. */
    CHECK(im.meta && im.meta->icc_bytes == sizeof icc && im.meta->x_dpi == 72);
    gimg_image_free(&im);
}

/* The formats that hold metadata give it back; --strip writes none. */
static void test_round_trip_per_format(void)
{
    static const gimg_format formats[] = {GIMG_FMT_JPEG, GIMG_FMT_PNG, GIMG_FMT_TIFF,
                                          GIMG_FMT_WEBP};
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        const gimg_codec *c = gimg_codec_of(formats[i]);
        gimg_image im = small_image();
        unsigned char icc[300];
        for (size_t b = 0; b < sizeof icc; b++)
            icc[b] = (unsigned char)(b * 7);
        CHECK(gimg_meta_add_icc(&im.meta, icc, sizeof icc) == GIMG_OK);
        im.meta->orientation = 6; /* as a TIFF tag would give it: no EXIF */
        gimg_write_opts o;
        gimg_write_opts_init(&o);
        for (int strip = 0; strip <= 1; strip++) {
            o.strip = strip;
            unsigned char *buf = NULL;
            size_t len = 0;
            gimg_image back = {0};
            CHECK(gimg_encode(&im, formats[i], &o, &buf, &len) == GIMG_OK, "%s", c->name);
            CHECK(gimg_decode_memory(buf, len, &back) == GIMG_OK, "%s: %s", c->name,
                  gimg_last_error());
            if (strip) {
                CHECK(gimg_meta_kinds(back.meta) == 0, "%s --strip: kinds %#x", c->name,
                      gimg_meta_kinds(back.meta));
            } else {
                CHECK(back.meta && back.meta->icc_bytes == sizeof icc &&
                          !memcmp(back.meta->icc, icc, sizeof icc),
                      "%s: ICC lost", c->name);
                /* Orientation: the TIFF tag, or EXIF made for the formats
                 * that keep it only there. */
                CHECK(back.meta && back.meta->orientation == 6, "%s: orientation %d", c->name,
                      back.meta ? back.meta->orientation : -1);
            }
            gimg_image_free(&back);
            free(buf);
        }
        gimg_image_free(&im);
    }
}

int main(void)
{
    RUN(test_orientation_read_and_rewritten);
    RUN(test_orientation_out_of_range_ignored);
    RUN(test_dimensions_rewritten);
    RUN(test_hostile_blocks_dropped);
    RUN(test_ifd_chain_bounded);
    RUN(test_minimal_exif);
    RUN(test_copy_is_deep_and_complete);
    RUN(test_caps);
    RUN(test_encode_counts_what_a_format_drops);
    RUN(test_round_trip_per_format);
    return check_summary();
}
