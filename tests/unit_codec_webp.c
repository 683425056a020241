/*
 * unit_codec_webp.c — the WebP codec (lib/codec_webp.c), through the public
 * API and its codec row.
 *
 *  - Lossless round trips bit for bit: RGB, RGBA (the colour under fully
 *    transparent pixels included), gray (read back as RGB with three equal
 *    channels), gray+alpha (as RGBA), 16-bit (narrowed by write.c first);
 *    an all-opaque RGBA image reads back as RGB (WebP marks no alpha).
 *  - Lossy: within a PSNR bound of the source (justified where it is
 *    checked), alpha kept exactly, smaller files at lower quality.
 *  - Decoding equals libwebp's own tool, dwebp -pam, sample for sample
 *    (skipped when dwebp is missing).
 *  - Animations built here chunk by chunk (frames with offsets, blending
 *    on and off, disposal to background) decode page by page to the
 *    canvas the WebP specification gives, computed here; one made by
 *    img2webp decodes to its source frames (skipped without img2webp).
 *  - Hostile files made byte by byte: truncated chunks, a RIFF size past
 *    the end, VP8X canvases with no data (16383x16383, over the limit),
 *    a broken VP8 start code, too many frames composited: refused with a
 *    message, quickly.
 *  - Encoding past WebP's 16383 pixels a side is refused.
 *  - Several threads decoding at once each get the right image.
 *  - Metadata: the ICCP, EXIF and XMP chunks through encode and decode
 *    twice (lossy, lossless, alpha, gray), the container's layout and
 *    flags, the resolution reported dropped; files made chunk by chunk
 *    (EXIF with JPEG's "Exif\0\0" first, unannounced chunks, a bad EXIF,
 *    a chunk list libwebpdemux refuses, an animation); webpmux and
 *    exiftool as cross-checks (skipped without them).
 */
#include "check.h"
#include "testfile.h"
#include "codec.h"
#include "testimg.h"
#include "testmeta.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The scratch folder for the peer tools' files (main() makes and removes it). */
static char g_dir[] = "/tmp/gimg-unit-webp-XXXXXX";

/* ------------------------------------------------------------ helpers */

static gimg_image random_image(int w, int h, int c, gimg_sample s, uint64_t seed)
{
    gimg_image im;
    if (gimg_image_alloc(&im, w, h, c, s) != GIMG_OK) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    testimg_fill_random(&im, seed);
    return im;
}

/* A smooth, photo-like 8-bit image: gradients, a few slow waves per
 * channel and light seeded grain, so that a lossy codec's error is what
 * it is on photographs rather than on noise (which no lossy coder keeps). */
static gimg_image photo_like(int w, int h, int c, uint64_t seed)
{
    gimg_image im = random_image(w, h, c, GIMG_U8, seed);
    uint64_t state = seed * 7 + 1;
    for (int y = 0; y < h; y++) {
        unsigned char *p = gimg_row(&im, y);
        for (int x = 0; x < w; x++)
            for (int k = 0; k < c; k++) {
                double v = 128 + 60 * sin(x * (0.05 + 0.02 * k) + y * 0.03) +
                           40 * cos(y * (0.07 - 0.015 * k) - x * 0.02) +
                           (double)(testimg_next(&state) % 9) - 4.0;
                p[(size_t)x * c + k] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
    }
    return im;
}

static unsigned char *encode(const gimg_image *im, int quality, int lossless, size_t *len)
{
    gimg_write_opts o;
    gimg_write_opts_init(&o);
    o.quality = quality;
    o.webp_lossless = lossless;
    unsigned char *buf = NULL;
    gimg_status st = gimg_encode(im, GIMG_FMT_WEBP, &o, &buf, len);
    CHECK(st == GIMG_OK, "encoding %dx%d c%d: %s", im->width, im->height, im->channels,
          gimg_last_error());
    return st == GIMG_OK ? buf : NULL;
}

/* PSNR over the colour channels of a and b (same size; b may have more
 * channels, e.g. gray widened to RGB: channel k of a against k of b). */
static double psnr(const gimg_image *a, const gimg_image *b, int channels)
{
    double se = 0;
    size_t n = 0;
    for (int y = 0; y < a->height; y++) {
        const unsigned char *p = gimg_row(a, y), *q = gimg_row(b, y);
        for (int x = 0; x < a->width; x++)
            for (int k = 0; k < channels; k++, n++) {
                double d = (double)p[x * a->channels + k] - q[x * b->channels + k];
                se += d * d;
            }
    }
    return se == 0 ? 99.0 : 10 * log10(255.0 * 255.0 * (double)n / se);
}

static char *scratch(const char *name)
{
    static char path[4][512];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, sizeof path[0], "%s/%s", g_dir, name);
    return p;
}

/* Decodes buf, expecting failure with a message holding `want`, within
 * `seconds` of CPU, *out left zeroed. */
static void expect_refusal(const char *what, const unsigned char *buf, size_t len,
                           gimg_status want_status, const char *want)
{
    gimg_image im;
    double t0 = cpu_seconds();
    gimg_status st = gimg_decode_memory(buf, len, &im);
    double t = cpu_seconds() - t0;
    CHECK(st == want_status && contains(gimg_last_error(), want),
          "%s: status %d, message \"%s\" (wanted %d, \"%s\")", what, st, gimg_last_error(),
          want_status, want);
    CHECK(im.data == NULL && im.width == 0, "%s: a failed decode left an image", what);
    CHECK(t < SANITIZER_SLOWDOWN, "%s: %.2f s of CPU", what, t);
    if (st == GIMG_OK)
        gimg_image_free(&im);
}

/* ------------------------------------------------------- the codec row */

static void test_row(void)
{
    const gimg_codec *c = gimg_codec_of(GIMG_FMT_WEBP);
    CHECK(c == &gimg_codec_webp, "the table's WebP row");
    CHECK(strcmp(gimg_codec_webp.extensions, "webp") == 0, "extensions \"%s\"",
          gimg_codec_webp.extensions);
    CHECK(gimg_codec_webp.multi_page == 1, "multi_page");
    CHECK(gimg_codec_webp.encode && gimg_codec_webp.layout && gimg_codec_webp.decode, "read and write");
    static const unsigned char riff[] = "RIFF\x10\x00\x00\x00WEBPVP8 ";
    CHECK(gimg_codec_webp.sniff(riff, 16), "sniff RIFF....WEBP");
    CHECK(!gimg_codec_webp.sniff((const unsigned char *)"RIFF\x10\x00\x00\x00WAVEfmt ", 16),
          "a WAV file is not WebP");
    CHECK(!gimg_codec_webp.sniff(riff, 11), "11 bytes are too few");
    CHECK(gimg_format_sniff(riff, 16) == GIMG_FMT_WEBP, "sniffed through the table");
    CHECK(gimg_format_from_path("a.WEBP") == GIMG_FMT_WEBP, "extension");
    CHECK(gimg_format_writable(GIMG_FMT_WEBP), "writable");
    /* Layout: 8-bit, channels kept (gray is widened by the encoder). */
    for (int ch = 1; ch <= 4; ch++) {
        int c2 = ch;
        gimg_sample s = GIMG_U16;
        gimg_codec_webp.layout(&c2, &s);
        CHECK(c2 == ch && s == GIMG_U8, "layout of %d channels: %d, sample %d", ch, c2, (int)s);
    }
}

/* ----------------------------------------------------------- lossless */

static void test_lossless_round_trip(void)
{
    static const struct {
        int w, h, c;
    } cases[] = { {61, 37, 3}, {61, 37, 4}, {1, 1, 3}, {1, 1, 4}, {300, 7, 3}, {5, 257, 4} };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gimg_image im = random_image(cases[i].w, cases[i].h, cases[i].c, GIMG_U8, 100 + i);
        if (cases[i].c == 4)   /* fully transparent pixels, whose colour must survive too */
            for (int y = 0; y < im.height; y += 2)
                gimg_row(&im, y)[3] = 0;
        size_t len;
        unsigned char *buf = encode(&im, 90, 1, &len);
        gimg_image back;
        gimg_info info;
        CHECK(buf && gimg_probe_memory(buf, len, &info) == GIMG_OK && info.format == GIMG_FMT_WEBP &&
                  info.width == im.width && info.height == im.height &&
                  info.channels == im.channels && info.sample == GIMG_U8 && info.pages == 1,
              "probe of %dx%d c%d: %s", im.width, im.height, im.channels, gimg_last_error());
        gimg_status st = buf ? gimg_decode_memory(buf, len, &back) : GIMG_E_FORMAT;
        CHECK(st == GIMG_OK && same_pixels(&im, &back), "%dx%d c%d: not bit for bit (%s)",
              im.width, im.height, im.channels, st ? gimg_last_error() : "differs");
        if (st == GIMG_OK)
            gimg_image_free(&back);
        free(buf);
        gimg_image_free(&im);
    }
}

/* Gray reads back as RGB with three equal channels, gray+alpha as RGBA. */
static void test_lossless_gray(void)
{
    for (int c = 1; c <= 2; c++) {
        gimg_image im = random_image(45, 31, c, GIMG_U8, 7 + c);
        size_t len;
        unsigned char *buf = encode(&im, 90, 1, &len);
        gimg_image back;
        if (!buf || gimg_decode_memory(buf, len, &back) != GIMG_OK) {
            CHECK(0, "gray c%d: %s", c, gimg_last_error());
            free(buf);
            gimg_image_free(&im);
            continue;
        }
        CHECK(back.channels == (c == 1 ? 3 : 4) && back.width == 45 && back.height == 31,
              "gray c%d read back as %d channels", c, back.channels);
        int bad = 0;
        for (int y = 0; y < im.height && back.channels == c + 2; y++) {
            const unsigned char *g = gimg_row(&im, y), *p = gimg_row(&back, y);
            for (int x = 0; x < im.width; x++) {
                const unsigned char *q = p + (size_t)x * back.channels;
                unsigned v = g[x * c];
                bad += q[0] != v || q[1] != v || q[2] != v || (c == 2 && q[3] != g[x * c + 1]);
            }
        }
        CHECK(bad == 0, "gray c%d: %d pixels differ from the gray source", c, bad);
        gimg_image_free(&back);
        free(buf);
        gimg_image_free(&im);
    }
}

/* An RGBA image that is all opaque: libwebp marks no alpha, and it reads
 * back as RGB with the same colours, lossless or lossy alike. */
static void test_opaque_rgba(void)
{
    gimg_image im = photo_like(29, 23, 4, 31);
    for (int y = 0; y < im.height; y++)
        for (int x = 0; x < im.width; x++)
            gimg_row(&im, y)[x * 4 + 3] = 255;
    for (int lossless = 0; lossless < 2; lossless++) {
        size_t len;
        unsigned char *buf = encode(&im, 90, lossless, &len);
        gimg_image back;
        if (!buf || gimg_decode_memory(buf, len, &back) != GIMG_OK) {
            CHECK(0, "opaque RGBA, lossless %d: %s", lossless, gimg_last_error());
        } else {
            int bad = back.channels != 3;
            for (int y = 0; !bad && lossless && y < im.height; y++)
                for (int x = 0; x < im.width; x++)
                    bad += memcmp(gimg_row(&im, y) + x * 4, gimg_row(&back, y) + x * 3, 3) != 0;
            CHECK(!bad, "opaque RGBA, lossless %d: %d channels back, %d pixels differ", lossless,
                  back.channels, bad);
            CHECK(lossless || psnr(&im, &back, 3) >= 34.0, "opaque RGBA, lossy: PSNR %.2f",
                  psnr(&im, &back, 3));
            gimg_image_free(&back);
        }
        free(buf);
    }
    gimg_image_free(&im);
}

/* 16-bit samples are narrowed by write.c (round(v / 257)), then kept. */
static void test_lossless_16bit(void)
{
    gimg_image im = random_image(19, 13, 4, GIMG_U16, 55);
    size_t len;
    unsigned char *buf = encode(&im, 90, 1, &len);
    gimg_image back;
    if (!buf || gimg_decode_memory(buf, len, &back) != GIMG_OK) {
        CHECK(0, "16-bit: %s", gimg_last_error());
    } else {
        int bad = 0;
        for (int y = 0; y < im.height; y++) {
            const uint16_t *p = (const uint16_t *)gimg_row(&im, y);
            const unsigned char *q = gimg_row(&back, y);
            for (int i = 0; i < im.width * 4; i++)
                bad += q[i] != (unsigned)floor(p[i] / 257.0 + 0.5);
        }
        CHECK(back.sample == GIMG_U8 && bad == 0, "16-bit: %d samples not round(v/257)", bad);
        gimg_image_free(&back);
    }
    free(buf);
    gimg_image_free(&im);
}

/* --------------------------------------------------------------- lossy */

/* Lossy at quality 90 against the source. The bound: WebP's lossy mode is
 * VP8 with 4:2:0 chroma; on this smooth test image (waves of periods of 30
 * to 300 pixels plus +-4 of grain) libwebp 1.2.4 reaches 38.5 dB at quality
 * 90 (34.9 at 30). 34 dB leaves room for another libwebp's rate control,
 * yet fails any real fault: swapped channels or a row misplaced costs
 * 15 dB or more, and the quality ignored shows in the ordering and size
 * checks below (90 must beat 30 by 2 dB, and 30 be a quarter smaller). */
static void test_lossy(void)
{
    gimg_image im = photo_like(128, 96, 3, 11);
    size_t len90, len30;
    unsigned char *q90 = encode(&im, 90, 0, &len90), *q30 = encode(&im, 30, 0, &len30);
    gimg_image a, b;
    if (q90 && q30 && gimg_decode_memory(q90, len90, &a) == GIMG_OK &&
        gimg_decode_memory(q30, len30, &b) == GIMG_OK) {
        double p90 = psnr(&im, &a, 3), p30 = psnr(&im, &b, 3);
        CHECK(a.channels == 3 && b.channels == 3, "lossy RGB read back as %d, %d channels",
              a.channels, b.channels);
        CHECK(p90 >= 34.0, "quality 90: PSNR %.2f dB < 34", p90);
        CHECK(p90 > p30 + 2.0, "quality 90 (%.2f dB) not clearly better than 30 (%.2f dB)", p90,
              p30);
        CHECK(len30 < len90 * 3 / 4, "quality 30 (%zu bytes) not smaller than 90 (%zu bytes)",
              len30, len90);
        gimg_image_free(&a);
        gimg_image_free(&b);
    } else {
        CHECK(0, "lossy: %s", gimg_last_error());
    }
    free(q90);
    free(q30);
    gimg_image_free(&im);

    /* Lossy with alpha: the colour within the bound, the alpha exact
     * (alpha_quality 100 codes it losslessly) where it is not 0. */
    gimg_image rgba = photo_like(64, 48, 4, 12);
    for (int y = 0; y < rgba.height; y++)
        for (int x = 0; x < rgba.width; x++)
            gimg_row(&rgba, y)[x * 4 + 3] = (unsigned char)(x * 4 + y);
    size_t len;
    unsigned char *buf = encode(&rgba, 90, 0, &len);
    if (buf && gimg_decode_memory(buf, len, &a) == GIMG_OK) {
        int bad_alpha = 0;
        for (int y = 0; y < rgba.height; y++)
            for (int x = 0; x < rgba.width; x++)
                bad_alpha += gimg_row(&a, y)[x * 4 + 3] != gimg_row(&rgba, y)[x * 4 + 3];
        CHECK(a.channels == 4 && bad_alpha == 0, "lossy RGBA: %d alpha samples changed", bad_alpha);
        gimg_image_free(&a);
    } else {
        CHECK(0, "lossy RGBA: %s", gimg_last_error());
    }
    free(buf);
    gimg_image_free(&rgba);

    /* Lossy gray: RGB whose channels agree to within 2 (VP8's YUV->RGB
     * rounds R, G and B separately) and whose PSNR to the gray is in the
     * same bound. */
    gimg_image gray = photo_like(64, 48, 1, 13);
    buf = encode(&gray, 90, 0, &len);
    if (buf && gimg_decode_memory(buf, len, &a) == GIMG_OK) {
        int spread = 0;
        for (int y = 0; y < a.height; y++)
            for (int x = 0; x < a.width; x++) {
                const unsigned char *p = gimg_row(&a, y) + x * 3;
                int lo = p[0] < p[1] ? p[0] : p[1], hi = p[0] > p[1] ? p[0] : p[1];
                lo = p[2] < lo ? p[2] : lo;
                hi = p[2] > hi ? p[2] : hi;
                spread = hi - lo > spread ? hi - lo : spread;
            }
        double p = psnr(&gray, &a, 1);
        CHECK(a.channels == 3 && spread <= 2 && p >= 34.0,
              "lossy gray: %d channels, channels spread %d, PSNR %.2f", a.channels, spread, p);
        gimg_image_free(&a);
    } else {
        CHECK(0, "lossy gray: %s", gimg_last_error());
    }
    free(buf);
    gimg_image_free(&gray);
}

/* ---------------------------------------------------------- vs dwebp */

/* Decodes path with dwebp -pam (RGBA); NULL when it fails. */
static int dwebp_decode(const char *webp, gimg_image *out)
{
    char cmd[1200];
    const char *pam = scratch("dwebp.pam");
    snprintf(cmd, sizeof cmd, "dwebp -quiet -pam '%s' -o '%s' >/dev/null 2>&1", webp, pam);
    return system(cmd) == 0 && gimg_read(pam, out) == GIMG_OK;
}

static void test_equals_dwebp(void)
{
    if (!have_program("dwebp"))
        SKIP("dwebp is not installed");
    static const struct {
        int c, lossless, quality;
    } cases[] = { {3, 0, 90}, {3, 0, 40}, {4, 0, 75}, {3, 1, 90}, {4, 1, 90} };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gimg_image im = photo_like(97, 61, cases[i].c, 40 + i);
        size_t len;
        unsigned char *buf = encode(&im, cases[i].quality, cases[i].lossless, &len);
        const char *path = scratch("x.webp");
        gimg_image ours, theirs;
        if (!buf || !write_file(path, buf, len) || gimg_decode_memory(buf, len, &ours) != GIMG_OK) {
            CHECK(0, "case %zu: %s", i, gimg_last_error());
        } else {
            if (!dwebp_decode(path, &theirs)) {
                CHECK(0, "case %zu: dwebp could not decode our file", i);
            } else {
                int bad = theirs.channels != 4 || theirs.width != ours.width ||
                          theirs.height != ours.height;
                for (int y = 0; !bad && y < ours.height; y++)
                    for (int x = 0; x < ours.width; x++) {
                        const unsigned char *p = gimg_row(&ours, y) + x * ours.channels;
                        const unsigned char *q = gimg_row(&theirs, y) + x * 4;
                        bad += memcmp(p, q, 3) != 0 ||
                               (ours.channels == 4 ? p[3] != q[3] : q[3] != 255);
                    }
                CHECK(bad == 0, "case %zu (c%d, %s q%d): %d pixels differ from dwebp's", i,
                      cases[i].c, cases[i].lossless ? "lossless" : "lossy", cases[i].quality, bad);
                gimg_image_free(&theirs);
            }
            gimg_image_free(&ours);
        }
        free(buf);
        gimg_image_free(&im);
    }
}

/* --------------------------------------------------------- animations */

static void put_le(bytes *b, uint32_t v, int n)
{
    for (int i = 0; i < n; i++) {
        unsigned char c = (unsigned char)(v >> (8 * i));
        put(b, &c, 1);
    }
}

/* A RIFF chunk: FourCC, little-endian size, payload, pad to even. */
static void chunk(bytes *b, const char *fourcc, const void *data, size_t n)
{
    put(b, fourcc, 4);
    put_le(b, (uint32_t)n, 4);
    put(b, data, n);
    if (n & 1)
        put(b, "", 1);
}

/* Sets the RIFF size of a finished file. */
static void seal_riff(bytes *b)
{
    uint32_t n = (uint32_t)(b->len - 8);
    for (int i = 0; i < 4; i++)
        b->p[4 + i] = (unsigned char)(n >> (8 * i));
}

/* The VP8L chunk (header included) of a lossless WebP of im, as our
 * encoder writes it: the simple format, "RIFF" size "WEBP" "VP8L" ... */
static bytes vp8l_chunk_of(const gimg_image *im)
{
    bytes out = {0};
    size_t len;
    unsigned char *buf = encode(im, 90, 1, &len);
    if (buf && len >= 20 && memcmp(buf + 12, "VP8L", 4) == 0) {
        size_t n = gimg_le32(buf + 16);
        if (20 + n <= len)
            put(&out, buf + 12, 8 + n + (n & 1));
    }
    CHECK(out.len > 0, "our lossless file is not one VP8L chunk");
    free(buf);
    return out;
}

typedef struct {
    const gimg_image *im;
    int x, y;            /* even */
    int blend, dispose;  /* blend with the canvas; dispose to background after */
} anim_frame;

/* An animated WebP: VP8X (animation, alpha), ANIM (a white background
 * colour, which readers ignore), one ANMF per frame. */
static bytes build_animation(int w, int h, const anim_frame *frames, int n)
{
    bytes b = {0};
    put(&b, "RIFF\0\0\0\0WEBP", 12);
    unsigned char vp8x[10] = {0x02 | 0x10};
    for (int i = 0; i < 3; i++) {
        vp8x[4 + i] = (unsigned char)((w - 1) >> (8 * i));
        vp8x[7 + i] = (unsigned char)((h - 1) >> (8 * i));
    }
    chunk(&b, "VP8X", vp8x, sizeof vp8x);
    static const unsigned char anim[6] = {255, 255, 255, 255, 0, 0};
    chunk(&b, "ANIM", anim, sizeof anim);
    for (int k = 0; k < n; k++) {
        bytes f = {0};
        put_le(&f, (uint32_t)frames[k].x / 2, 3);
        put_le(&f, (uint32_t)frames[k].y / 2, 3);
        put_le(&f, (uint32_t)frames[k].im->width - 1, 3);
        put_le(&f, (uint32_t)frames[k].im->height - 1, 3);
        put_le(&f, 100, 3);
        put_le(&f, (frames[k].blend ? 0 : 2) | (frames[k].dispose ? 1 : 0), 1);
        bytes data = vp8l_chunk_of(frames[k].im);
        put(&f, data.p, data.len);
        chunk(&b, "ANMF", f.p, f.len);
        free(f.p);
        free(data.p);
    }
    seal_riff(&b);
    return b;
}

/* The canvas after frames 0..page as the WebP specification composites
 * them, for frames whose blending cannot matter (opaque, or not blended):
 * transparent black to start; a frame replaces its rectangle; a frame
 * disposed to background leaves its rectangle transparent black. */
static gimg_image expected_canvas(int w, int h, const anim_frame *frames, int page)
{
    gimg_image c;
    if (gimg_image_alloc(&c, w, h, 4, GIMG_U8) != GIMG_OK)
        exit(1);
    memset(c.data, 0, c.stride_bytes * (size_t)h);
    for (int k = 0; k <= page; k++) {
        if (k > 0 && frames[k - 1].dispose)
            for (int y = 0; y < frames[k - 1].im->height; y++)
                memset(gimg_row(&c, frames[k - 1].y + y) + frames[k - 1].x * 4, 0,
                       (size_t)frames[k - 1].im->width * 4);
        const gimg_image *f = frames[k].im;
        for (int y = 0; y < f->height; y++)
            for (int x = 0; x < f->width; x++) {
                unsigned char *out = gimg_row(&c, frames[k].y + y) + (frames[k].x + x) * 4;
                const unsigned char *in = gimg_row(f, y) + x * f->channels;
                memcpy(out, in, 3);
                out[3] = f->channels == 4 ? in[3] : 255;
            }
    }
    return c;
}

static void test_animation(void)
{
    gimg_image f0 = random_image(24, 20, 3, GIMG_U8, 1);
    gimg_image f1 = random_image(10, 8, 4, GIMG_U8, 2);   /* any alpha, 0 included */
    gimg_image f2 = random_image(6, 6, 3, GIMG_U8, 3);
    for (int x = 0; x < 10; x++)
        gimg_row(&f1, 0)[x * 4 + 3] = 0;
    const anim_frame frames[] = {
        {&f0, 0, 0, 1, 0},
        {&f1, 4, 6, 0, 1},    /* not blended: its alpha replaces; then disposed */
        {&f2, 12, 2, 1, 0},   /* opaque, blended */
    };
    bytes file = build_animation(24, 20, frames, 3);
    gimg_info info;
    gimg_read_opts o = {.page = 0};
    CHECK(gimg_probe_memory(file.p, file.len, &info) == GIMG_OK && info.pages == 3 &&
              info.width == 24 && info.height == 20 && info.channels == 4,
          "probe: %s (pages %d, %dx%d c%d)", gimg_last_error(), info.pages, info.width,
          info.height, info.channels);
    for (int page = 0; page < 3; page++) {
        o.page = page;
        gimg_image got, want = expected_canvas(24, 20, frames, page);
        gimg_status st = gimg_decode_page(file.p, file.len, &o, &got);
        CHECK(st == GIMG_OK && same_pixels(&got, &want), "page %d: %s", page,
              st ? gimg_last_error() : "differs from the specification's canvas");
        if (st == GIMG_OK)
            gimg_image_free(&got);
        gimg_image_free(&want);
        CHECK(gimg_probe_page(file.p, file.len, &o, &info) == GIMG_OK && info.pages == 3,
              "probe of page %d", page);
    }
    o.page = 3;
    gimg_image none;
    CHECK(gimg_decode_page(file.p, file.len, &o, &none) == GIMG_E_FORMAT &&
              contains(gimg_last_error(), "has 3 frames: no frame 3"),
          "page 3: %s", gimg_last_error());
    CHECK(none.data == NULL, "page 3 left an image");

    /* Truncated anywhere within a frame: refused as truncated. */
    for (size_t cut = file.len - 1; cut > 40; cut -= file.len / 7) {
        char what[64];
        snprintf(what, sizeof what, "animation cut to %zu of %zu bytes", cut, file.len);
        expect_refusal(what, file.p, cut, GIMG_E_FORMAT, "truncated WebP data");
    }
    free(file.p);

    /* Many frames: page N composites N + 1 canvases; with the limit at 500
     * pixels, 16 x 500 allows 16 canvases of 480: page 15, not page 16. */
    anim_frame many[20];
    for (int k = 0; k < 20; k++)
        many[k] = (anim_frame){k % 2 ? &f2 : &f0, k % 2 ? 2 * k % 16 : 0, k % 2 ? 2 : 0, 1, 0};
    file = build_animation(24, 20, many, 20);
    gimg_set_max_pixels(500);
    o.page = 15;
    gimg_image got;
    gimg_status st = gimg_decode_page(file.p, file.len, &o, &got);
    CHECK(st == GIMG_OK, "page 15 of 20 under a 500-pixel limit: %s", gimg_last_error());
    if (st == GIMG_OK) {
        gimg_image want = expected_canvas(24, 20, many, 15);
        CHECK(same_pixels(&got, &want), "page 15 differs from the specification's canvas");
        gimg_image_free(&want);
        gimg_image_free(&got);
    }
    o.page = 16;
    st = gimg_decode_page(file.p, file.len, &o, &got);
    CHECK(st == GIMG_E_LIMIT && contains(gimg_last_error(), "over the limit of 8000 pixels' work"),
          "page 16 under a 500-pixel limit: %d %s", st, gimg_last_error());
    gimg_set_max_pixels(GIMG_DEFAULT_MAX_PIXELS);
    free(file.p);

    /* 10001 frames of 1x1: page 9999 is read (in well under a second of
     * CPU, SANITIZER_SLOWDOWN seconds under a sanitizer, where it took
     * 1.43 s; unless GIMG_TEST_SLOW says a checker slows us down), page
     * 10000 is past the pages read. */
    gimg_image dot = random_image(1, 1, 3, GIMG_U8, 77);
    anim_frame *dots = malloc(10001 * sizeof *dots);
    for (int k = 0; k < 10001; k++)
        dots[k] = (anim_frame){&dot, 0, 0, 1, 0};
    file = build_animation(1, 1, dots, 10001);
    o.page = 9999;
    double t0 = cpu_seconds();
    st = gimg_decode_page(file.p, file.len, &o, &got);
    double t = cpu_seconds() - t0;
    CHECK(st == GIMG_OK && memcmp(got.data, dot.data, 3) == 0 && got.data[3] == 255,
          "page 9999 of 10001: %s", st ? gimg_last_error() : "wrong pixel");
    CHECK(t < SANITIZER_SLOWDOWN || getenv("GIMG_TEST_SLOW"), "page 9999 of 10001: %.2f s of CPU",
          t);
    if (st == GIMG_OK)
        gimg_image_free(&got);
    o.page = 10000;
    st = gimg_decode_page(file.p, file.len, &o, &got);
    CHECK(st == GIMG_E_LIMIT && contains(gimg_last_error(), "past 9999"),
          "page 10000 of 10001: %d %s", st, gimg_last_error());
    free(file.p);
    free(dots);
    gimg_image_free(&dot);
    gimg_image_free(&f0);
    gimg_image_free(&f1);
    gimg_image_free(&f2);
}

/* img2webp (libwebp's animation encoder, which crops frames to what
 * changed and picks blending itself) from two PPM frames: lossless, so each
 * page is its frame exactly. */
static void test_img2webp(void)
{
    if (!have_program("img2webp"))
        SKIP("img2webp is not installed");
    gimg_image f0 = photo_like(40, 30, 3, 5), f1;
    gimg_image_alloc(&f1, 40, 30, 3, GIMG_U8);
    memcpy(f1.data, f0.data, f0.stride_bytes * 30);
    for (int y = 12; y < 20; y++)   /* a changed block: frame 1 becomes a sub-rectangle */
        for (int x = 17 * 3; x < 29 * 3; x++)
            gimg_row(&f1, y)[x] ^= 0x5a;
    char cmd[2000];
    const char *p0 = scratch("f0.ppm"), *p1 = scratch("f1.ppm"), *anim = scratch("anim.webp");
    CHECK(gimg_write(p0, &f0, NULL) == GIMG_OK && gimg_write(p1, &f1, NULL) == GIMG_OK, "frames");
    snprintf(cmd, sizeof cmd, "img2webp -lossless '%s' '%s' -o '%s' >/dev/null 2>&1", p0, p1, anim);
    size_t len = 0;
    unsigned char *buf = system(cmd) == 0 ? slurp(anim, &len) : NULL;
    if (!buf) {
        CHECK(0, "img2webp failed: %s", cmd);
    } else {
        const gimg_image *src[2] = {&f0, &f1};
        for (int page = 0; page < 2; page++) {
            gimg_read_opts o = {.page = page};
            gimg_image got;
            gimg_status st = gimg_decode_page(buf, len, &o, &got);
            int bad = st != GIMG_OK || got.channels != 4 || got.width != 40 || got.height != 30;
            for (int y = 0; !bad && y < 30; y++)
                for (int x = 0; x < 40; x++) {
                    const unsigned char *p = gimg_row(&got, y) + x * 4;
                    bad += memcmp(p, gimg_row(src[page], y) + x * 3, 3) != 0 || p[3] != 255;
                }
            CHECK(bad == 0, "img2webp page %d: %s", page, st ? gimg_last_error() : "differs");
            if (st == GIMG_OK)
                gimg_image_free(&got);
        }
        free(buf);
    }
    gimg_image_free(&f0);
    gimg_image_free(&f1);
}

/* ------------------------------------------------------------- hostile */

static bytes vp8x_only(uint32_t w, uint32_t h)
{
    bytes b = {0};
    put(&b, "RIFF\0\0\0\0WEBP", 12);
    unsigned char vp8x[10] = {0};
    for (int i = 0; i < 3; i++) {
        vp8x[4 + i] = (unsigned char)((w - 1) >> (8 * i));
        vp8x[7 + i] = (unsigned char)((h - 1) >> (8 * i));
    }
    chunk(&b, "VP8X", vp8x, sizeof vp8x);
    seal_riff(&b);
    return b;
}

static void test_hostile(void)
{
    gimg_image im = photo_like(64, 48, 3, 21);
    size_t len;
    unsigned char *lossy = encode(&im, 80, 0, &len);
    if (!lossy)
        return;
    /* Truncated: every cut fails as truncated (or, cut inside a header, as
     * corrupt): never a partial image. */
    for (size_t cut = 13; cut < len; cut += cut < 64 ? 7 : len / 5) {
        gimg_image out;
        char what[64];
        snprintf(what, sizeof what, "lossy cut to %zu of %zu bytes", cut, len);
        gimg_status st = gimg_decode_memory(lossy, cut, &out);
        CHECK(st == GIMG_E_FORMAT && (contains(gimg_last_error(), "truncated WebP data") ||
                                      contains(gimg_last_error(), "corrupt WebP data")),
              "%s: %d %s", what, st, gimg_last_error());
        CHECK(out.data == NULL, "%s: left an image", what);
    }
    expect_refusal("lossy cut by one byte", lossy, len - 1, GIMG_E_FORMAT, "truncated WebP data");

    /* A RIFF size past the end of the file. */
    unsigned char *big = malloc(len);
    memcpy(big, lossy, len);
    uint32_t riff = gimg_le32(big + 4) + 1000;
    for (int i = 0; i < 4; i++)
        big[4 + i] = (unsigned char)(riff >> (8 * i));
    expect_refusal("RIFF size past the end", big, len, GIMG_E_FORMAT, "truncated WebP data");

    /* A VP8 chunk whose key frame start code (9d 01 2a) is broken. */
    memcpy(big, lossy, len);
    CHECK(memcmp(big + 12, "VP8 ", 4) == 0 && big[23] == 0x9d, "our lossy file is one VP8 chunk");
    big[23] = 0x9c;
    expect_refusal("broken VP8 start code", big, len, GIMG_E_FORMAT, "corrupt WebP data: ");
    free(big);

    /* A lossless file whose VP8L signature byte is wrong. */
    size_t llen;
    unsigned char *lossless = encode(&im, 90, 1, &llen);
    if (lossless) {
        lossless[20] ^= 0xff;
        expect_refusal("broken VP8L signature", lossless, llen, GIMG_E_FORMAT,
                       "corrupt WebP data: ");
        free(lossless);
    }

    /* VP8X canvases with no image data: 16383 x 16383 (within the pixel
     * limit) is truncated; 20000 x 20000 is over it, from the header. */
    bytes b = vp8x_only(16383, 16383);
    expect_refusal("VP8X 16383x16383 without data", b.p, b.len, GIMG_E_FORMAT,
                   "truncated WebP data");
    free(b.p);
    b = vp8x_only(20000, 20000);
    gimg_set_max_pixels((uint64_t)1 << 28); /* the old default, given */
    expect_refusal("VP8X 20000x20000", b.p, b.len, GIMG_E_LIMIT, "--max-pixels");
    gimg_info info;
    CHECK(gimg_probe_memory(b.p, b.len, &info) == GIMG_E_LIMIT, "probe of VP8X 20000x20000");
    gimg_set_max_pixels(GIMG_DEFAULT_MAX_PIXELS);
    expect_refusal("VP8X 20000x20000, no pixel limit", b.p, b.len, GIMG_E_FORMAT,
                   "truncated WebP data");
    free(b.p);
    /* Past WebP's own 16383 a side: what the header says is not WebP. */
    b = vp8x_only(1u << 24, 1u << 24);
    expect_refusal("VP8X 2^24 x 2^24", b.p, b.len, GIMG_E_FORMAT, "corrupt WebP data");
    free(b.p);

    /* --max-pixels applies to plain files too. */
    gimg_set_max_pixels(64 * 48 - 1);
    expect_refusal("64x48 under a limit of 3071 pixels", lossy, len, GIMG_E_LIMIT, "--max-pixels");
    gimg_set_max_pixels(64 * 48);
    gimg_image ok;
    CHECK(gimg_decode_memory(lossy, len, &ok) == GIMG_OK, "64x48 at a limit of 3072: %s",
          gimg_last_error());
    gimg_image_free(&ok);
    gimg_set_max_pixels(GIMG_DEFAULT_MAX_PIXELS);

    /* A still image has one page. */
    gimg_read_opts o = {.page = 1};
    CHECK(gimg_decode_page(lossy, len, &o, &ok) == GIMG_E_FORMAT &&
              contains(gimg_last_error(), "WebP has 1 frame: no frame 1"),
          "page 1 of a still image: %s", gimg_last_error());
    free(lossy);
    gimg_image_free(&im);
}

static void test_encode_limits(void)
{
    gimg_image wide = random_image(16384, 1, 3, GIMG_U8, 3);
    unsigned char *buf = NULL;
    size_t len = 0;
    gimg_status st = gimg_encode(&wide, GIMG_FMT_WEBP, NULL, &buf, &len);
    CHECK(st == GIMG_E_LIMIT && contains(gimg_last_error(), "16383") && buf == NULL,
          "16384 wide: %d %s", st, gimg_last_error());
    gimg_image_free(&wide);
    gimg_image edge = random_image(16383, 2, 3, GIMG_U8, 4);
    st = gimg_encode(&edge, GIMG_FMT_WEBP, NULL, &buf, &len);
    CHECK(st == GIMG_OK, "16383 wide: %s", gimg_last_error());
    free(buf);
    gimg_image_free(&edge);
}

/* ------------------------------------------------------------- threads */

typedef struct {
    const unsigned char *buf;
    size_t len;
    const gimg_image *want;
    int ok;
} thread_job;

static void *decode_job(void *arg)
{
    thread_job *j = arg;
    j->ok = 1;
    for (int i = 0; i < 20 && j->ok; i++) {
        gimg_image im;
        j->ok = gimg_decode_memory(j->buf, j->len, &im) == GIMG_OK && same_pixels(&im, j->want);
        gimg_image_free(&im);
    }
    return NULL;
}

static void test_threads(void)
{
    gimg_image a = random_image(33, 21, 4, GIMG_U8, 8), b = random_image(17, 40, 3, GIMG_U8, 9);
    size_t la, lb;
    unsigned char *fa = encode(&a, 90, 1, &la), *fb = encode(&b, 90, 1, &lb);
    thread_job jobs[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (thread_job){i % 2 ? fb : fa, i % 2 ? lb : la, i % 2 ? &b : &a, 0};
        pthread_create(&t[i], NULL, decode_job, &jobs[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        CHECK(jobs[i].ok, "thread %d decoded a wrong image", i);
    }
    free(fa);
    free(fb);
    gimg_image_free(&a);
    gimg_image_free(&b);
}

/* ------------------------------------------------------------ metadata */

/* got's ICC, EXIF, XMP and orientation are want's; no resolution, no
 * warning. */
static void check_meta(const gimg_meta *got, const gimg_meta *want, const char *what)
{
    CHECK(got != NULL, "%s: no metadata decoded", what);
    if (!got)
        return;
    char why[128];
    CHECK(!meta_blobs_differ(got, want, why, sizeof why), "%s: %s", what, why);
    CHECK(got->x_dpi == 0 && got->y_dpi == 0, "%s: a resolution from WebP", what);
    CHECK(got->warning[0] == '\0', "%s: warning \"%s\"", what, got->warning);
}

/* The chunks of a RIFF WebP file, in order: their FourCCs joined
 * ("VP8X ICCP VP8L EXIF XMP "); "" if the chunk sizes do not add up. */
static void chunk_list(const unsigned char *b, size_t len, char *out, size_t size)
{
    size_t n = 0;
    out[0] = '\0';
    for (size_t at = 12; at < len; n += 5) {
        if (at + 8 > len || n + 6 > size) {
            out[0] = '\0';
            return;
        }
        const size_t k = gimg_le32(b + at + 4);
        memcpy(out + n, b + at, 4);
        out[n + 4] = ' ';
        out[n + 5] = '\0';
        at += 8 + k + (k & 1);
        if (at > len) {
            out[0] = '\0';
            return;
        }
    }
    if (n)
        out[n - 1] = '\0';
}

/* Where chunk `fourcc` of b starts (its header), or 0. */
static size_t find_chunk(const unsigned char *b, size_t len, const char *fourcc)
{
    for (size_t at = 12; at + 8 <= len;) {
        if (memcmp(b + at, fourcc, 4) == 0)
            return at;
        const size_t k = gimg_le32(b + at + 4);
        at += 8 + k + (k & 1);
    }
    return 0;
}

static void test_meta_row(void)
{
    CHECK(gimg_codec_webp.meta == (GIMG_META_ICC | GIMG_META_EXIF | GIMG_META_XMP),
          "the row's metadata kinds: %#x", gimg_codec_webp.meta);
    CHECK(gimg_codec_webp.maxval_rule == GIMG_MAXVAL_FULL, "maxval rule %d",
          gimg_codec_webp.maxval_rule);
}

/* Encode, decode, encode the decoded image, decode: the profile, EXIF
 * (orientation read from it) and XMP bytes kept, lossy and lossless, with
 * and without alpha, gray; the file laid out as the container asks
 * (VP8X flags, ICCP before the image, EXIF and XMP after); the pixels
 * those of the file without metadata; the resolution dropped (and said
 * so by write.c). */
static void test_meta_round_trip(void)
{
    static const struct {
        int channels, lossless;
        size_t icc, exif, xmp;
        const char *chunks;
        unsigned flags;
    } cases[] = {
        {3, 0, 3001, 301, 401, "VP8X ICCP VP8  EXIF XMP ", 0x2C},
        {4, 0, 3000, 300, 400, "VP8X ICCP ALPH VP8  EXIF XMP ", 0x3C},
        {3, 1, 70000, 0, 0, "VP8X ICCP VP8L", 0x20},
        {4, 1, 0, 120, 0, "VP8X VP8L EXIF", 0x18},
        {1, 1, 0, 0, 999, "VP8X VP8L XMP ", 0x04},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gimg_image im = photo_like(50, 30, cases[i].channels, 60 + i);
        if (cases[i].channels == 4)
            for (int x = 0; x < 50; x++)
                gimg_row(&im, 3)[x * 4 + 3] = (unsigned char)(x * 5);  /* some alpha */
        set_meta(&im, cases[i].icc, cases[i].exif, 6, cases[i].xmp, 300, 300);
        char what[64], list[128];
        snprintf(what, sizeof what, "case %zu (%d channels, %s)", i, cases[i].channels,
                 cases[i].lossless ? "lossless" : "lossy");
        size_t len, len2, plain_len;
        gimg_take_dropped_meta(NULL);
        unsigned char *buf = encode(&im, 80, cases[i].lossless, &len);
        gimg_format f;
        const unsigned dropped = gimg_take_dropped_meta(&f);
        CHECK(dropped == GIMG_META_RESOLUTION && f == GIMG_FMT_WEBP,
              "%s: write.c says %#x dropped, format %d", what, dropped, (int)f);
        if (!buf) {
            gimg_image_free(&im);
            continue;
        }
        chunk_list(buf, len, list, sizeof list);
        CHECK(strcmp(list, cases[i].chunks) == 0, "%s: chunks \"%s\", wanted \"%s\"", what, list,
              cases[i].chunks);
        CHECK(len >= 21 && (buf[20] & 0x3E) == cases[i].flags, "%s: VP8X flags %#x, wanted %#x",
              what, len >= 21 ? buf[20] : 0, cases[i].flags);
        const size_t exif_at = find_chunk(buf, len, "EXIF");
        CHECK(!exif_at || memcmp(buf + exif_at + 8, "II*", 4) == 0,
              "%s: the EXIF chunk does not start with the TIFF header", what);
        CHECK(gimg_le32(buf + 4) + 8 == len, "%s: RIFF size %u of a %zu-byte file", what,
              gimg_le32(buf + 4), len);
        gimg_image back, back2, plain_back;
        if (gimg_decode_memory(buf, len, &back) != GIMG_OK) {
            CHECK(0, "%s: decode: %s", what, gimg_last_error());
        } else {
            check_meta(back.meta, im.meta, what);
            unsigned char *buf2 = encode(&back, 80, cases[i].lossless, &len2);
            if (buf2 && gimg_decode_memory(buf2, len2, &back2) == GIMG_OK) {
                check_meta(back2.meta, im.meta, what);
                gimg_image_free(&back2);
            }
            free(buf2);
            /* The image is the one written without metadata. */
            gimg_meta *m = im.meta;
            im.meta = NULL;
            unsigned char *plain = encode(&im, 80, cases[i].lossless, &plain_len);
            im.meta = m;
            if (plain && gimg_decode_memory(plain, plain_len, &plain_back) == GIMG_OK) {
                CHECK(plain_back.meta == NULL, "%s: a plain file has metadata", what);
                CHECK(same_pixels(&back, &plain_back), "%s: the pixels changed", what);
                gimg_image_free(&plain_back);
            }
            free(plain);
            gimg_image_free(&back);
        }
        free(buf);
        gimg_image_free(&im);
    }
}

/* Files assembled here chunk by chunk: the EXIF of writers that put
 * JPEG's "Exif\0\0" first, odd sizes (padded), an animation; chunks the
 * VP8X flags do not announce passed over (libwebpdemux's reading); a bad
 * EXIF dropped with a warning; chunks libwebpdemux refuses behind an image
 * that decodes. */
static void test_meta_crafted(void)
{
    gimg_image im = photo_like(20, 14, 3, 5);
    bytes vp8l = vp8l_chunk_of(&im);
    unsigned char *icc = fake_icc(1001, 2), *exif = make_exif(77, 7, 0, 50, 30), *xmp = make_xmp(301);
    if (!vp8l.len)
        return;
    for (int variant = 0; variant < 4; variant++) {
        bytes b = {0};
        put(&b, "RIFF\0\0\0\0WEBP", 12);
        unsigned char vp8x[10] = {variant == 2 ? 0 : 0x2C, 0, 0, 0, 19, 0, 0, 13, 0, 0};
        chunk(&b, "VP8X", vp8x, sizeof vp8x);
        chunk(&b, "ICCP", icc, 1001);
        put(&b, vp8l.p, vp8l.len);
        bytes ex = {0};
        if (variant == 1)
            put(&ex, "Exif\0\0", 6);
        put(&ex, exif, 77);
        if (variant == 3)
            ex.p[ex.len - 77 + 4] = 200;  /* IFD0 past the block */
        chunk(&b, "EXIF", ex.p, ex.len);
        chunk(&b, "XMP ", xmp, 301);
        seal_riff(&b);
        static const char *const what[] = {"plain EXIF", "Exif-prefixed EXIF",
                                           "flags not set", "bad EXIF"};
        gimg_image back;
        if (gimg_decode_memory(b.p, b.len, &back) != GIMG_OK) {
            CHECK(0, "%s: refused: %s", what[variant], gimg_last_error());
        } else if (variant == 2) {
            CHECK(same_pixels(&back, &im), "%s: pixels", what[variant]);
            CHECK(back.meta == NULL, "%s: unannounced chunks read", what[variant]);
            gimg_image_free(&back);
        } else {
            const gimg_meta *m = back.meta;
            CHECK(same_pixels(&back, &im), "%s: pixels", what[variant]);
            CHECK(m && same_blob(m->icc, m->icc_bytes, icc, 1001), "%s: profile", what[variant]);
            CHECK(m && same_blob(m->xmp, m->xmp_bytes, xmp, 301), "%s: XMP", what[variant]);
            if (variant < 2)
                CHECK(m && same_blob(m->exif, m->exif_bytes, exif, 77) && m->orientation == 7 &&
                          !m->warning[0],
                      "%s: EXIF of %zu bytes, orientation %d, \"%s\"", what[variant],
                      m ? m->exif_bytes : 0, m ? m->orientation : -1, m ? m->warning : "");
            else
                CHECK(m && !m->exif && m->orientation == 0 && contains(m->warning, "EXIF dropped"),
                      "%s: EXIF of %zu bytes, \"%s\"", what[variant], m ? m->exif_bytes : 0,
                      m ? m->warning : "");
            gimg_image_free(&back);
        }
        free(ex.p);
        free(b.p);
    }

    /* A chunk after the image whose size runs past the RIFF's end: the
     * image decodes; the metadata is not read, and the warning says so. */
    bytes b = {0};
    put(&b, "RIFF\0\0\0\0WEBP", 12);
    unsigned char vp8x[10] = {0x2C, 0, 0, 0, 19, 0, 0, 13, 0, 0};
    chunk(&b, "VP8X", vp8x, sizeof vp8x);
    put(&b, vp8l.p, vp8l.len);
    chunk(&b, "XMP ", xmp, 301);
    seal_riff(&b);
    b.p[b.len - 301 - 4] = 0xFF;  /* the XMP chunk's size: 301 + 255 * 256 */
    gimg_image back;
    if (gimg_decode_memory(b.p, b.len, &back) == GIMG_OK) {
        CHECK(same_pixels(&back, &im), "a broken chunk list: pixels");
        CHECK(back.meta && !back.meta->xmp && contains(back.meta->warning, "metadata not read"),
              "a broken chunk list: \"%s\"", back.meta ? back.meta->warning : "(no metadata)");
        gimg_image_free(&back);
    } else {
        CHECK(0, "a broken chunk list after the image: refused: %s", gimg_last_error());
    }
    free(b.p);

    /* An animation's metadata belongs to every page. */
    const anim_frame frames[] = {{&im, 0, 0, 0, 0}, {&im, 2, 2, 0, 0}};
    bytes a = build_animation(24, 18, frames, 2);
    a.p[20] |= 0x08;  /* EXIF */
    chunk(&a, "EXIF", exif, 77);
    seal_riff(&a);
    for (int page = 0; page < 2; page++) {
        gimg_read_opts o = {.page = page};
        if (gimg_decode_page(a.p, a.len, &o, &back) != GIMG_OK) {
            CHECK(0, "animation page %d: %s", page, gimg_last_error());
            continue;
        }
        CHECK(back.meta && same_blob(back.meta->exif, back.meta->exif_bytes, exif, 77) &&
                  back.meta->orientation == 7,
              "animation page %d: EXIF not read", page);
        gimg_image_free(&back);
    }
    free(a.p);

    /* A simple file has no metadata. */
    size_t len;
    gimg_image_free(&im);
    im = photo_like(20, 14, 3, 6);
    unsigned char *simple = encode(&im, 70, 0, &len);
    if (simple && gimg_decode_memory(simple, len, &back) == GIMG_OK) {
        CHECK(back.meta == NULL, "a simple file decoded with metadata");
        gimg_image_free(&back);
    }
    free(simple);
    free(vp8l.p);
    free(icc);
    free(exif);
    free(xmp);
    gimg_image_free(&im);
}

/* libwebp's webpmux and exiftool read our chunks; webpmux's read by us. */
static void test_meta_peers(void)
{
    const int webpmux = have_program("webpmux"), exiftool = have_program("exiftool");
    if (!webpmux && !exiftool)
        SKIP("neither webpmux nor exiftool is installed");
    gimg_image im = photo_like(40, 30, 3, 8);
    set_meta(&im, 5000, 200, 6, 600, 0, 0);
    size_t len, n;
    unsigned char *buf = encode(&im, 80, 0, &len);
    if (!buf) {
        gimg_image_free(&im);
        return;
    }
    char ours[512];  /* scratch() reuses its buffers */
    snprintf(ours, sizeof ours, "%s", scratch("ours.webp"));
    write_file(ours, buf, len);
    char cmd[1200];
    if (webpmux) {
        static const char *const kinds[] = {"icc", "exif", "xmp"};
        const gimg_meta *m = im.meta;
        const unsigned char *want[] = {m->icc, m->exif, m->xmp};
        const size_t want_bytes[] = {m->icc_bytes, m->exif_bytes, m->xmp_bytes};
        for (int k = 0; k < 3; k++) {
            snprintf(cmd, sizeof cmd, "webpmux -get %s '%s' -o '%s' >/dev/null 2>&1", kinds[k],
                     ours, scratch("got.bin"));
            unsigned char *got = run(cmd) == 0 ? slurp(scratch("got.bin"), &n) : NULL;
            CHECK(got && same_blob(got, n, want[k], want_bytes[k]),
                  "webpmux -get %s: %zu bytes, wanted %zu", kinds[k], got ? n : 0,
                  want_bytes[k]);
            free(got);
        }
        /* webpmux -set icc on a plain file of ours: we read the profile. */
        gimg_meta *keep = im.meta;
        im.meta = NULL;
        size_t plain_len;
        unsigned char *plain = encode(&im, 80, 0, &plain_len);
        im.meta = keep;
        write_file(scratch("plain.webp"), plain, plain_len);
        write_file(scratch("prof.icc"), keep->icc, keep->icc_bytes);
        snprintf(cmd, sizeof cmd, "webpmux -set icc '%s' '%s' -o '%s' >/dev/null 2>&1",
                 scratch("prof.icc"), scratch("plain.webp"), scratch("set.webp"));
        unsigned char *theirs = run(cmd) == 0 ? slurp(scratch("set.webp"), &n) : NULL;
        gimg_image back;
        CHECK(theirs != NULL, "webpmux -set icc failed");
        if (theirs && gimg_decode_memory(theirs, n, &back) == GIMG_OK) {
            CHECK(back.meta && same_blob(back.meta->icc, back.meta->icc_bytes, keep->icc,
                                         keep->icc_bytes),
                  "webpmux's ICCP chunk not read");
            gimg_image_free(&back);
        }
        free(theirs);
        free(plain);
    }
    if (exiftool) {
        snprintf(cmd, sizeof cmd, "exiftool -s3 -n -Orientation '%s' > '%s' 2>/dev/null", ours,
                 scratch("o.txt"));
        unsigned char *got = run(cmd) == 0 ? slurp(scratch("o.txt"), &n) : NULL;
        CHECK(got && n == 2 && memcmp(got, "6\n", 2) == 0, "exiftool reads orientation \"%.*s\"",
              got ? (int)n : 0, got ? (const char *)got : "");
        free(got);
    }
    free(buf);
    gimg_image_free(&im);
}

int main(void)
{
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_row);
    RUN(test_lossless_round_trip);
    RUN(test_lossless_gray);
    RUN(test_lossless_16bit);
    RUN(test_opaque_rgba);
    RUN(test_lossy);
    RUN(test_equals_dwebp);
    RUN(test_animation);
    RUN(test_img2webp);
    RUN(test_hostile);
    RUN(test_encode_limits);
    RUN(test_threads);
    RUN(test_meta_row);
    RUN(test_meta_round_trip);
    RUN(test_meta_crafted);
    RUN(test_meta_peers);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
    return check_summary();
}
