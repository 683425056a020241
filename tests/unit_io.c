/*
 * unit_io — libgimg's image I/O: round trips through every format, channel
 * count and depth; format recognition and choice; header facts; size
 * limits; truncated and corrupt input; the netpbm specifics; the atomic
 * file writer.
 *
 * Every image is made here from a seeded PRNG (testimg.h) or by hand;
 * files go to a mkdtemp directory that main() removes. Expected values are
 * computed independently from the conversions gimg(7) and write.c
 * document, in double precision, never by calling the library's own
 * converters. Lossless layouts are compared bit for bit; JPEG and HDR, the
 * lossy formats, within the bounds stated where they are checked.
 *
 * A decoder that hangs must fail the run rather than stall it: the whole
 * program runs under alarm(120), and the truncation and corruption sweeps
 * run in a child process with its own alarm, so that a crash or a hang is
 * reported with the input that caused it.
 */
#include "gimg.h"
#include "io_internal.h"
#include "testimg.h"
#include "check.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libdeflate.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The scratch directory, made by main() with mkdtemp. */
static char g_dir[] = "/tmp/gimg-unit-io-XXXXXX";

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL: io: still running after 120 s (a decoder or writer hung)\n";
    (void)!write(STDOUT_FILENO, msg, sizeof msg - 1);
    _exit(1);
}

/* ------------------------------------------------------------- helpers */

static const gimg_format k_formats[] = {
    GIMG_FMT_PNG, GIMG_FMT_JPEG, GIMG_FMT_BMP, GIMG_FMT_TGA,
    GIMG_FMT_HDR, GIMG_FMT_PNM,  GIMG_FMT_PAM, GIMG_FMT_PFM, GIMG_FMT_TIFF,
};
#define N_FORMATS (sizeof k_formats / sizeof k_formats[0])
static const gimg_sample k_samples[] = { GIMG_U8, GIMG_U16, GIMG_F32 };

static const char *depth_name(gimg_sample s)
{
    return s == GIMG_U8 ? "8-bit" : s == GIMG_U16 ? "16-bit" : "float";
}

static int contains(const char *haystack, const char *needle)
{
    return strstr(haystack, needle) != NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char *path_in_dir(const char *name)
{
    static char buf[4][512];
    static int k;
    char *p = buf[k++ & 3];
    snprintf(p, sizeof buf[0], "%s/%s", g_dir, name);
    return p;
}

/* A seeded random image; 0 (with a failed check) if it cannot be made. */
static int random_image(gimg_image *im, int w, int h, int c, gimg_sample s, uint64_t seed)
{
    gimg_status st = gimg_image_alloc(im, w, h, c, s);
    CHECK(st == GIMG_OK, "alloc %dx%dx%d: %s", w, h, c, gimg_last_error());
    if (st)
        return 0;
    testimg_fill_random(im, seed);
    return 1;
}

/* Puts the float samples that exercise the documented edge cases (clamping
 * both ways, NaN -> 0, infinities, signed zero, 1, and 0.5, an exact half
 * step of both the 8- and the 16-bit scale) at the start of the first row.
 * Floats next to the other half steps are test_conversion_boundaries'. */
static void add_float_specials(gimg_image *im)
{
    const float sp[] = { -0.25f, 1.5f, NAN, 0.0f, 1.0f, 0.5f, -0.0f, INFINITY, -INFINITY,
                         1e-30f, 0.999999f, 0.25f };
    size_t n = (size_t)im->width * (size_t)im->channels;
    float *row = (float *)gimg_row(im, 0);
    for (size_t i = 0; i < n && i < sizeof sp / sizeof sp[0]; i++)
        row[i] = sp[i];
}

/* A smooth image (low-frequency waves, 0.15..0.85 of full range), for the
 * lossy formats: JPEG's error on noise says nothing useful. */
static int smooth_image(gimg_image *im, int w, int h, int c, gimg_sample s)
{
    gimg_status st = gimg_image_alloc(im, w, h, c, s);
    CHECK(st == GIMG_OK, "alloc: %s", gimg_last_error());
    if (st)
        return 0;
    for (int y = 0; y < h; y++) {
        unsigned char *row = gimg_row(im, y);
        for (int x = 0; x < w; x++)
            for (int k = 0; k < c; k++) {
                double v = 0.5 + 0.35 * sin(0.09 * x + 0.7 * k) * cos(0.07 * y - 0.4 * k);
                size_t i = (size_t)x * (size_t)c + (size_t)k;
                if (s == GIMG_U8)
                    row[i] = (uint8_t)lround(v * 255.0);
                else if (s == GIMG_U16)
                    ((uint16_t *)row)[i] = (uint16_t)lround(v * 65535.0);
                else
                    ((float *)row)[i] = (float)v;
            }
    }
    return 1;
}

static double get_sample(const gimg_image *im, int x, int y, int k)
{
    const unsigned char *row = gimg_row(im, y);
    size_t i = (size_t)x * (size_t)im->channels + (size_t)k;
    if (im->sample == GIMG_U8)
        return row[i];
    if (im->sample == GIMG_U16)
        return ((const uint16_t *)row)[i];
    return ((const float *)row)[i];
}

/* The layout a format's decoder returns for an image of c channels and
 * sample s written in it (write.c's table and gimg(7)). */
static void written_layout(gimg_format f, int c, gimg_sample s, int *oc, gimg_sample *os)
{
    int color = c >= 3 ? 3 : 1;
    switch (f) {
    case GIMG_FMT_PNG:  *oc = c;                *os = s == GIMG_U8 ? GIMG_U8 : GIMG_U16; break;
    case GIMG_FMT_JPEG: *oc = color;            *os = GIMG_U8; break; /* gray stays gray */
    case GIMG_FMT_TIFF: *oc = c;                *os = s; break;
    case GIMG_FMT_WEBP: *oc = c == 2 || c == 4 ? 4 : 3; *os = GIMG_U8; break; /* no gray */
    case GIMG_FMT_BMP:  *oc = c == 4 ? 4 : 3;   *os = GIMG_U8; break;
    case GIMG_FMT_TGA:  *oc = c;                *os = GIMG_U8; break;
    case GIMG_FMT_HDR:  *oc = 3;                *os = GIMG_F32; break;
    case GIMG_FMT_PNM:  *oc = color;            *os = s == GIMG_U8 ? GIMG_U8 : GIMG_U16; break;
    case GIMG_FMT_PAM:  *oc = c;                *os = s == GIMG_U8 ? GIMG_U8 : GIMG_U16; break;
    default:            *oc = color;            *os = GIMG_F32; break; /* PFM */
    }
}

/* Which channel of a src_c-channel image channel k of a dst_c-channel one
 * comes from: alpha from alpha, color from color, gray repeated into RGB. */
static int source_channel(int src_c, int dst_c, int k)
{
    int dst_color = dst_c >= 3 ? 3 : 1;
    if (k >= dst_color)
        return src_c - 1;
    return src_c >= 3 ? k : 0;
}

/* Stores in out the documented conversion of src's sample (x, y, sk):
 * 16 -> 8: round(v / 257); float -> 8/16: round(clamp(v, 0, 1) * 255 or
 * 65535), NaN -> 0; 8/16 -> float: v / 255 or v / 65535. Computed in
 * double: v * 65535 of a float is exact there, and v / 255 rounded once to
 * double then to float is the correctly rounded float quotient. */
static void put_expected(gimg_image *out, int x, int y, int k, const gimg_image *src, int sk)
{
    const unsigned char *srow = gimg_row(src, y);
    unsigned char *drow = gimg_row(out, y);
    size_t si = (size_t)x * (size_t)src->channels + (size_t)sk;
    size_t di = (size_t)x * (size_t)out->channels + (size_t)k;
    if (src->sample == GIMG_F32) {
        float f;
        memcpy(&f, srow + 4 * si, 4);
        if (out->sample == GIMG_F32) {
            memcpy(drow + 4 * di, &f, 4);
            return;
        }
        double v = isnan(f) ? 0.0 : f < 0.0f ? 0.0 : f > 1.0f ? 1.0 : (double)f;
        if (out->sample == GIMG_U16)
            ((uint16_t *)drow)[di] = (uint16_t)round(v * 65535.0);
        else
            drow[di] = (uint8_t)round(v * 255.0);
        return;
    }
    unsigned v = src->sample == GIMG_U8 ? srow[si] : ((const uint16_t *)srow)[si];
    double full = src->sample == GIMG_U8 ? 255.0 : 65535.0;
    if (out->sample == GIMG_F32) {
        float f = (float)(v / full);
        memcpy(drow + 4 * di, &f, 4);
    } else if (out->sample == GIMG_U16) {
        ((uint16_t *)drow)[di] = (uint16_t)(src->sample == GIMG_U8 ? v * 257u : v);
    } else {
        drow[di] = (uint8_t)(src->sample == GIMG_U8 ? v : (unsigned)floor(v / 257.0 + 0.5));
    }
}

/* The image the documentation says comes back after writing src in a
 * format that holds oc channels of os samples. */
static int expected_image(const gimg_image *src, int oc, gimg_sample os, gimg_image *out)
{
    if (gimg_image_alloc(out, src->width, src->height, oc, os) != GIMG_OK)
        return 0;
    for (int y = 0; y < src->height; y++)
        for (int x = 0; x < src->width; x++)
            for (int k = 0; k < oc; k++)
                put_expected(out, x, y, k, src, source_channel(src->channels, oc, k));
    return 1;
}

static int same_layout(const gimg_image *got, const gimg_image *want, const char *what)
{
    int ok = got->width == want->width && got->height == want->height &&
             got->channels == want->channels && got->sample == want->sample;
    CHECK(ok, "%s: decoded %dx%d, %d channels, %s; expected %dx%d, %d channels, %s", what,
          got->width, got->height, got->channels, depth_name(got->sample), want->width,
          want->height, want->channels, depth_name(want->sample));
    return ok;
}

/* Bit-for-bit comparison (floats by their bits, so NaN equals NaN). */
static int images_equal(const gimg_image *got, const gimg_image *want, const char *what)
{
    if (!same_layout(got, want, what))
        return 0;
    size_t bad = 0, total = 0;
    int fx = 0, fy = 0, fk = 0;
    size_t sz = (size_t)want->sample;
    for (int y = 0; y < want->height; y++) {
        const unsigned char *a = gimg_row(got, y), *b = gimg_row(want, y);
        for (int x = 0; x < want->width; x++)
            for (int k = 0; k < want->channels; k++, total++) {
                size_t i = ((size_t)x * (size_t)want->channels + (size_t)k) * sz;
                if (memcmp(a + i, b + i, sz) != 0 && bad++ == 0)
                    fx = x, fy = y, fk = k;
            }
    }
    CHECK(bad == 0, "%s: %zu of %zu samples differ; first at x %d y %d channel %d: got %.9g, "
          "expected %.9g", what, bad, total, fx, fy, fk, get_sample(got, fx, fy, fk),
          get_sample(want, fx, fy, fk));
    return bad == 0;
}

static gimg_status encode(const gimg_image *im, gimg_format f, unsigned char **buf, size_t *len)
{
    return gimg_encode(im, f, NULL, buf, len);
}

/* Reads a whole file into a malloc'd buffer (not through the library). */
static unsigned char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    unsigned char *b = malloc(cap);
    for (size_t r; b && (r = fread(b + n, 1, cap - n, f)) > 0;) {
        n += r;
        if (n == cap) {
            unsigned char *nb = realloc(b, cap *= 2);
            if (!nb)
                free(b);
            b = nb;
        }
    }
    fclose(f);
    *len = n;
    return b;
}

static int write_raw(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    int ok = fwrite(buf, 1, len, f) == len;
    return fclose(f) == 0 && ok;
}

static int file_has(const char *path, const char *content)
{
    size_t len;
    unsigned char *b = read_file(path, &len);
    int ok = b && len == strlen(content) && memcmp(b, content, len) == 0;
    free(b);
    return ok;
}

/* Temporary files the writer left in dir (named ".BASE.gimg-XXXXXX"). */
static int leftover_temps(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (contains(e->d_name, ".gimg-"))
            n++;
    closedir(d);
    return n;
}

/* -------------------------------------------------- round trips (1) */

/* JPEG on a smooth image: the error of stb's baseline encoder at quality
 * 90 stays near one level on average. Measured on this image: mean 0.39,
 * largest 2 for gray; mean 1.02, largest 8 for color (4:2:0 chroma
 * subsampling at that quality). The bounds leave about 50% room for a
 * different but sound encoder, while a wrong conversion (16 -> 8 bit off
 * by a factor, swapped or lost channels, a shifted row) costs tens of
 * levels and fails them. */
#define JPEG_MAE_MAX 1.5
#define JPEG_ERR_MAX 12.0

static void compare_jpeg(const gimg_image *got, const gimg_image *want, const char *what,
                         double *mae_out)
{
    if (!same_layout(got, want, what))
        return;
    double sum = 0, worst = 0;
    size_t n = 0;
    for (int y = 0; y < want->height; y++)
        for (int x = 0; x < want->width; x++)
            for (int k = 0; k < want->channels; k++, n++) {
                double e = fabs(get_sample(got, x, y, k) - get_sample(want, x, y, k));
                sum += e;
                if (e > worst)
                    worst = e;
            }
    double mae = sum / (double)n;
    if (mae_out)
        *mae_out = mae;
    CHECK(mae <= JPEG_MAE_MAX, "%s: mean absolute error %.3f > %.1f", what, mae, JPEG_MAE_MAX);
    CHECK(worst <= JPEG_ERR_MAX, "%s: largest error %.0f > %.0f", what, worst, JPEG_ERR_MAX);
}

/* Radiance RGBE keeps an 8-bit mantissa per component under the exponent
 * of the pixel's largest component m, truncated (stb writes floor, reads
 * mantissa * 2^(e-8)): every component is off by less than 2^(e-8) <= m /
 * 128, so the largest component has a relative error below 1/128 and the
 * others an absolute one below m / 128. The 1e-6 slack covers float
 * rounding in stb's own arithmetic. */
static void compare_hdr(const gimg_image *got, const gimg_image *want, const char *what)
{
    if (!same_layout(got, want, what))
        return;
    size_t bad = 0;
    int fx = 0, fy = 0, fk = 0;
    for (int y = 0; y < want->height; y++)
        for (int x = 0; x < want->width; x++) {
            double m = 0;
            for (int k = 0; k < 3; k++)
                m = fmax(m, get_sample(want, x, y, k));
            for (int k = 0; k < 3; k++) {
                double e = get_sample(want, x, y, k), g = get_sample(got, x, y, k);
                double tol = m / 128.0 * (1 + 1e-6);
                int ok = fabs(g - e) <= tol;
                if (e == m && m > 0)
                    ok = ok && fabs(g - e) / m <= 1.0 / 128.0 * (1 + 1e-6);
                if (!ok && bad++ == 0)
                    fx = x, fy = y, fk = k;
            }
        }
    CHECK(bad == 0, "%s: %zu samples beyond RGBE precision; first at x %d y %d channel %d: "
          "got %.9g, expected %.9g", what, bad, fx, fy, fk, get_sample(got, fx, fy, fk),
          get_sample(want, fx, fy, fk));
}

/* Writes every channel count and depth in format f through gimg_encode
 * and back through gimg_decode_memory, and checks the result against the
 * documented conversion: exactly, or within the lossy format's bounds. */
static void roundtrip_format(gimg_format f)
{
    for (int c = 1; c <= 4; c++)
        for (size_t si = 0; si < 3; si++) {
            gimg_sample s = k_samples[si];
            char what[96];
            snprintf(what, sizeof what, "%s from %d-channel %s", gimg_format_name(f), c,
                     depth_name(s));
            gimg_image src, got, want;
            /* 13 wide: odd rows (BMP's row padding) and >= 8 (HDR's RLE). */
            uint64_t seed = 1000 + (uint64_t)f * 16 + (uint64_t)c * 4 + si;
            int ok = f == GIMG_FMT_JPEG ? smooth_image(&src, 61, 37, c, s)
                                        : random_image(&src, 13, 11, c, s, seed);
            if (!ok)
                continue;
            if (s == GIMG_F32 && f != GIMG_FMT_HDR && f != GIMG_FMT_JPEG)
                add_float_specials(&src);
            unsigned char *buf = NULL;
            size_t len = 0;
            gimg_status st = encode(&src, f, &buf, &len);
            CHECK(st == GIMG_OK, "%s: encode: %s", what, gimg_last_error());
            if (st == GIMG_OK) {
                CHECK(gimg_format_sniff(buf, len) == f, "%s: sniffed as %s", what,
                      gimg_format_name(gimg_format_sniff(buf, len)));
                st = gimg_decode_memory(buf, len, &got);
                CHECK(st == GIMG_OK, "%s: decode: %s", what, gimg_last_error());
                int oc;
                gimg_sample os;
                written_layout(f, c, s, &oc, &os);
                if (st == GIMG_OK && expected_image(&src, oc, os, &want)) {
                    if (f == GIMG_FMT_JPEG)
                        compare_jpeg(&got, &want, what, NULL);
                    else if (f == GIMG_FMT_HDR)
                        compare_hdr(&got, &want, what);
                    else
                        images_equal(&got, &want, what);
                    gimg_image_free(&want);
                }
                gimg_image_free(&got);
            }
            free(buf);
            gimg_image_free(&src);
        }
}

static void test_roundtrip_png(void) { roundtrip_format(GIMG_FMT_PNG); }
static void test_roundtrip_jpeg(void) { roundtrip_format(GIMG_FMT_JPEG); }
static void test_roundtrip_bmp(void) { roundtrip_format(GIMG_FMT_BMP); }
static void test_roundtrip_tga(void) { roundtrip_format(GIMG_FMT_TGA); }
static void test_roundtrip_hdr(void) { roundtrip_format(GIMG_FMT_HDR); }
static void test_roundtrip_pnm(void) { roundtrip_format(GIMG_FMT_PNM); }
static void test_roundtrip_pam(void) { roundtrip_format(GIMG_FMT_PAM); }
static void test_roundtrip_pfm(void) { roundtrip_format(GIMG_FMT_PFM); }

/* Every 16-bit value through the 16 -> 8 conversion (TGA stores it
 * losslessly afterwards), and every float nearest a half-step of the 8-
 * and 16-bit scales through float -> 8 (TGA) and float -> 16 (PAM): the
 * rounding boundaries are where a conversion is most likely to be off. */
static void test_conversion_boundaries(void)
{
    gimg_image src, got, want;
    unsigned char *buf;
    size_t len;
    /* 65536 samples: all 16-bit values. */
    if (gimg_image_alloc(&src, 256, 256, 1, GIMG_U16) == GIMG_OK) {
        for (int i = 0; i < 65536; i++)
            ((uint16_t *)src.data)[i] = (uint16_t)i;
        if (encode(&src, GIMG_FMT_TGA, &buf, &len) == GIMG_OK) {
            if (gimg_decode_memory(buf, len, &got) == GIMG_OK) {
                if (expected_image(&src, 1, GIMG_U8, &want)) {
                    images_equal(&got, &want, "all 16-bit values to 8-bit (TGA)");
                    gimg_image_free(&want);
                }
                gimg_image_free(&got);
            }
            free(buf);
        }
        gimg_image_free(&src);
    }
    /* Floats just below, at and above each (k + 0.5) / 65535 for a spread
     * of k, and likewise / 255. */
    static const gimg_format fmts[2] = { GIMG_FMT_PAM, GIMG_FMT_TGA };
    static const double scale[2] = { 65535.0, 255.0 };
    for (int t = 0; t < 2; t++) {
        if (gimg_image_alloc(&src, 3 * 255, 1, 1, GIMG_F32) != GIMG_OK)
            continue;
        float *p = (float *)src.data;
        for (int k = 0; k < 255; k++) {
            double step = scale[t] == 255.0 ? k : k * 257.0 + 128.0;
            float mid = (float)((step + 0.5) / scale[t]);
            p[3 * k] = nextafterf(mid, 0.0f);
            p[3 * k + 1] = mid;
            p[3 * k + 2] = nextafterf(mid, 1.0f);
        }
        char what[64];
        snprintf(what, sizeof what, "floats at half steps to %s (%s)",
                 t == 0 ? "16-bit" : "8-bit", gimg_format_name(fmts[t]));
        CHECK(encode(&src, fmts[t], &buf, &len) == GIMG_OK, "%s: %s", what, gimg_last_error());
        if (buf && gimg_decode_memory(buf, len, &got) == GIMG_OK) {
            if (expected_image(&src, 1, t == 0 ? GIMG_U16 : GIMG_U8, &want)) {
                images_equal(&got, &want, what);
                gimg_image_free(&want);
            }
            gimg_image_free(&got);
        }
        free(buf);
        buf = NULL;
        gimg_image_free(&src);
    }
}

/* HDR over a wide dynamic range (2^-20 .. 2^20), where the shared
 * exponent, not the mantissa, does the work; and the flat (not
 * run-length-encoded) layout stb uses below 8 pixels a row. */
static void test_hdr_range(void)
{
    static const int widths[2] = { 40, 5 };
    for (int t = 0; t < 2; t++) {
        gimg_image src, got;
        if (!random_image(&src, widths[t], 9, 3, GIMG_F32, 77 + t))
            continue;
        uint64_t state = 5;
        for (int y = 0; y < src.height; y++) {
            float *row = (float *)gimg_row(&src, y);
            for (int i = 0; i < src.width * 3; i++)
                row[i] = ldexpf(0.5f + row[i], (int)(testimg_next(&state) % 41) - 20);
        }
        unsigned char *buf;
        size_t len;
        char what[48];
        snprintf(what, sizeof what, "HDR wide range, %d wide", widths[t]);
        CHECK(encode(&src, GIMG_FMT_HDR, &buf, &len) == GIMG_OK, "%s: %s", what, gimg_last_error());
        if (buf && gimg_decode_memory(buf, len, &got) == GIMG_OK) {
            compare_hdr(&got, &src, what);
            gimg_image_free(&got);
        } else {
            CHECK(0, "%s: decode: %s", what, gimg_last_error());
        }
        free(buf);
        gimg_image_free(&src);
    }
}

/* Higher JPEG quality must mean a closer image; out-of-range qualities
 * and PNG levels are usage errors; every PNG level decodes exactly. */
static void test_encode_options(void)
{
    gimg_image src, got;
    if (!smooth_image(&src, 64, 48, 3, GIMG_U8))
        return;
    gimg_write_opts o;
    gimg_write_opts_init(&o);
    CHECK(o.format == GIMG_FMT_UNKNOWN && o.quality == GIMG_DEFAULT_QUALITY &&
          o.png_level == GIMG_DEFAULT_PNG_LEVEL, "gimg_write_opts_init: %d %d %d", o.format,
          o.quality, o.png_level);
    unsigned char *buf;
    size_t len;
    double mae[2] = { -1, -1 };
    static const int q[2] = { 100, 20 };
    for (int t = 0; t < 2; t++) {
        o.quality = q[t];
        if (gimg_encode(&src, GIMG_FMT_JPEG, &o, &buf, &len) != GIMG_OK) {
            CHECK(0, "JPEG quality %d: %s", q[t], gimg_last_error());
            continue;
        }
        if (gimg_decode_memory(buf, len, &got) == GIMG_OK) {
            double sum = 0;
            for (size_t i = 0; i < (size_t)64 * 48 * 3; i++)
                sum += fabs((double)got.data[i] - src.data[i]);
            mae[t] = sum / (64.0 * 48 * 3);
            gimg_image_free(&got);
        }
        free(buf);
    }
    CHECK(mae[0] >= 0 && mae[0] < mae[1], "JPEG mean error at quality 100 (%.3f) is not below "
          "quality 20's (%.3f)", mae[0], mae[1]);
    o.quality = 90;
    static const int bad_q[] = { 0, 101, -5 };
    for (size_t i = 0; i < 3; i++) {
        o.quality = bad_q[i];
        buf = (unsigned char *)1;
        CHECK(gimg_encode(&src, GIMG_FMT_JPEG, &o, &buf, &len) == GIMG_E_USAGE,
              "JPEG quality %d accepted", bad_q[i]);
        CHECK(buf == NULL && len == 0, "a failed encode leaves *buf set");
    }
    o.quality = 90;
    static const int bad_l[] = { -1, 13 };
    for (size_t i = 0; i < 2; i++) {
        o.png_level = bad_l[i];
        CHECK(gimg_encode(&src, GIMG_FMT_PNG, &o, &buf, &len) == GIMG_E_USAGE,
              "PNG level %d accepted", bad_l[i]);
    }
    for (int level = 0; level <= 12; level++) {
        o.png_level = level;
        char what[32];
        snprintf(what, sizeof what, "PNG level %d", level);
        if (gimg_encode(&src, GIMG_FMT_PNG, &o, &buf, &len) != GIMG_OK) {
            CHECK(0, "%s: %s", what, gimg_last_error());
            continue;
        }
        if (gimg_decode_memory(buf, len, &got) == GIMG_OK) {
            images_equal(&got, &src, what);
            gimg_image_free(&got);
        } else {
            CHECK(0, "%s: decode: %s", what, gimg_last_error());
        }
        free(buf);
    }
    CHECK(gimg_encode(&src, GIMG_FMT_UNKNOWN, NULL, &buf, &len) == GIMG_E_USAGE,
          "format UNKNOWN accepted");
    /* Invalid images are refused, not encoded. */
    gimg_image bad = src;
    bad.channels = 5;
    CHECK(gimg_encode(&bad, GIMG_FMT_PAM, NULL, &buf, &len) == GIMG_E_FORMAT, "5 channels");
    bad = src;
    bad.stride_bytes = (size_t)src.width * 3 - 1;
    CHECK(gimg_encode(&bad, GIMG_FMT_PNG, NULL, &buf, &len) == GIMG_E_FORMAT, "short stride");
    bad = src;
    bad.data = NULL;
    CHECK(gimg_encode(&bad, GIMG_FMT_TGA, NULL, &buf, &len) == GIMG_E_FORMAT, "no pixels");
    bad = src;
    bad.width = 0;
    CHECK(gimg_encode(&bad, GIMG_FMT_BMP, NULL, &buf, &len) == GIMG_E_FORMAT, "width 0");
    gimg_image_free(&src);
}

/* An image whose rows are further apart than their length (a view into a
 * larger buffer) must encode exactly as its packed copy, in every format:
 * the padding bytes must never reach the file. */
static void test_strided_source(void)
{
    for (size_t fi = 0; fi < N_FORMATS; fi++)
        for (size_t si = 0; si < 3; si++) {
            gimg_format f = k_formats[fi];
            gimg_sample s = k_samples[si];
            int c = 3 + (int)(si & 1);
            gimg_image tight;
            if (!random_image(&tight, 7, 5, c, s, 31 + fi * 3 + si))
                continue;
            size_t row = tight.stride_bytes, stride = row + 16 * (size_t)s;
            unsigned char *mem = malloc(stride * 5);
            memset(mem, 0xA5, stride * 5);
            for (int y = 0; y < 5; y++)
                memcpy(mem + (size_t)y * stride, gimg_row(&tight, y), row);
            gimg_image padded = tight;
            padded.data = mem;
            padded.stride_bytes = stride;
            unsigned char *a = NULL, *b = NULL;
            size_t la = 0, lb = 0;
            CHECK(encode(&tight, f, &a, &la) == GIMG_OK && encode(&padded, f, &b, &lb) == GIMG_OK,
                  "%s: %s", gimg_format_name(f), gimg_last_error());
            CHECK(a && b && la == lb && memcmp(a, b, la) == 0,
                  "%s %d-channel %s: padded rows encode differently", gimg_format_name(f), c,
                  depth_name(s));
            free(a);
            free(b);
            free(mem);
            gimg_image_free(&tight);
        }
}

/* BMP "keeps RGBA" (gimg(7)), which must include an all-transparent image:
 * stb_image's BMP reader turns an alpha channel that is 0 everywhere into
 * 255 in 32-bit BI_RGB files (it takes it for a writer that left alpha
 * unset). stb's writer uses BI_BITFIELDS with an alpha mask, which is read
 * as given; this guards that pairing. */
static void test_bmp_transparent_alpha(void)
{
    gimg_image src, got;
    if (!random_image(&src, 6, 4, 4, GIMG_U8, 9))
        return;
    for (size_t i = 3; i < (size_t)6 * 4 * 4; i += 4)
        src.data[i] = 0;
    unsigned char *buf;
    size_t len;
    CHECK(encode(&src, GIMG_FMT_BMP, &buf, &len) == GIMG_OK, "%s", gimg_last_error());
    if (buf && gimg_decode_memory(buf, len, &got) == GIMG_OK) {
        images_equal(&got, &src, "BMP RGBA with alpha 0 everywhere");
        gimg_image_free(&got);
    }
    free(buf);
    gimg_image_free(&src);
}

/* gimg_write + gimg_read on files, every format, channel count and depth:
 * the file holds exactly gimg_encode's bytes (gimg_write has its own path
 * for packed 8-bit PNM and PAM), and reads back as the buffer decodes. */
static void test_file_roundtrip(void)
{
    static const char *const ext[N_FORMATS] = { "png", "jpg", "bmp", "tga",
                                                "hdr", "ppm", "pam", "pfm", "tif" };
    for (size_t fi = 0; fi < N_FORMATS; fi++)
        for (int c = 1; c <= 4; c++)
            for (size_t si = 0; si < 3; si++) {
                gimg_format f = k_formats[fi];
                gimg_sample s = k_samples[si];
                char what[96], name[64];
                snprintf(what, sizeof what, "%s file from %d-channel %s", gimg_format_name(f), c,
                         depth_name(s));
                snprintf(name, sizeof name, "rt-%d-%zu.%s", c, si, ext[fi]);
                const char *path = path_in_dir(name);
                gimg_image src, fromfile, frombuf;
                if (!random_image(&src, 9, 6, c, s, 500 + fi * 12 + (size_t)c * 3 + si))
                    continue;
                unsigned char *buf = NULL, *file = NULL;
                size_t len = 0, flen = 0;
                gimg_status st = gimg_write(path, &src, NULL);
                CHECK(st == GIMG_OK, "%s: gimg_write: %s", what, gimg_last_error());
                CHECK(encode(&src, f, &buf, &len) == GIMG_OK, "%s: encode: %s", what,
                      gimg_last_error());
                if (st == GIMG_OK && buf) {
                    file = read_file(path, &flen);
                    CHECK(file && flen == len && memcmp(file, buf, len) == 0,
                          "%s: the file (%zu bytes) is not gimg_encode's output (%zu bytes)",
                          what, flen, len);
                    st = gimg_read(path, &fromfile);
                    CHECK(st == GIMG_OK, "%s: gimg_read: %s", what, gimg_last_error());
                    if (st == GIMG_OK) {
                        if (gimg_decode_memory(buf, len, &frombuf) == GIMG_OK) {
                            images_equal(&fromfile, &frombuf, what);
                            gimg_image_free(&frombuf);
                        }
                        gimg_image_free(&fromfile);
                    }
                }
                free(file);
                free(buf);
                unlink(path);
                gimg_image_free(&src);
            }
    CHECK(leftover_temps(g_dir) == 0, "temporary files left in %s", g_dir);
}

/* -f overrides the extension when writing; the content says what it is. */
static void test_write_format_override(void)
{
    gimg_image src, got;
    if (!random_image(&src, 5, 4, 2, GIMG_U16, 3))
        return;
    gimg_write_opts o;
    gimg_write_opts_init(&o);
    o.format = GIMG_FMT_PAM;
    const char *path = path_in_dir("looks-like.png");
    CHECK(gimg_write(path, &src, &o) == GIMG_OK, "%s", gimg_last_error());
    size_t len;
    unsigned char *b = read_file(path, &len);
    CHECK(b && gimg_format_sniff(b, len) == GIMG_FMT_PAM, "-f pam into .png did not write PAM");
    free(b);
    if (gimg_read(path, &got) == GIMG_OK) {
        images_equal(&got, &src, "PAM read back from a .png name");
        gimg_image_free(&got);
    }
    /* Upper-case extension. */
    path = path_in_dir("UPPER.TGA");
    CHECK(gimg_write(path, &src, NULL) == GIMG_OK, "%s", gimg_last_error());
    b = read_file(path, &len);
    CHECK(b && gimg_format_sniff(b, len) == GIMG_FMT_TGA, ".TGA did not write TGA");
    free(b);
    gimg_image_free(&src);
}

/* --------------------------------------------- format recognition (2) */

static void test_format_from_name(void)
{
    static const struct {
        const char *name;
        gimg_format f;
    } cases[] = {
        { "png", GIMG_FMT_PNG },  { "PNG", GIMG_FMT_PNG },   { "jpg", GIMG_FMT_JPEG },
        { "jpeg", GIMG_FMT_JPEG }, { "JpE", GIMG_FMT_JPEG },  { "bmp", GIMG_FMT_BMP },
        { "tga", GIMG_FMT_TGA },  { "hdr", GIMG_FMT_HDR },   { "pnm", GIMG_FMT_PNM },
        { "ppm", GIMG_FMT_PNM },  { "pgm", GIMG_FMT_PNM },   { "pbm", GIMG_FMT_PNM },
        { "pam", GIMG_FMT_PAM },  { "pfm", GIMG_FMT_PFM },   { "PFM", GIMG_FMT_PFM },
        { "gif", GIMG_FMT_GIF },  { "tiff", GIMG_FMT_TIFF }, { "TIF", GIMG_FMT_TIFF },
        { "webp", GIMG_FMT_WEBP }, { "psd", GIMG_FMT_UNKNOWN }, { "", GIMG_FMT_UNKNOWN },
        { ".png", GIMG_FMT_UNKNOWN }, { "png ", GIMG_FMT_UNKNOWN }, { "pn", GIMG_FMT_UNKNOWN },
        { "pngx", GIMG_FMT_UNKNOWN },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(gimg_format_from_name(cases[i].name) == cases[i].f, "\"%s\" -> %s, expected %s",
              cases[i].name, gimg_format_name(gimg_format_from_name(cases[i].name)),
              gimg_format_name(cases[i].f));
    CHECK(gimg_format_from_name(NULL) == GIMG_FMT_UNKNOWN, "NULL name");
    /* The names gimg_format_name gives are names gimg_format_from_name takes. */
    for (size_t i = 0; i < N_FORMATS; i++)
        CHECK(gimg_format_from_name(gimg_format_name(k_formats[i])) == k_formats[i], "%s",
              gimg_format_name(k_formats[i]));
    CHECK(strcmp(gimg_format_name(GIMG_FMT_UNKNOWN), "unknown") == 0, "unknown's name");
}

static void test_format_from_path(void)
{
    static const struct {
        const char *path;
        gimg_format f;
    } cases[] = {
        { "a.png", GIMG_FMT_PNG },          { "dir/a.JPG", GIMG_FMT_JPEG },
        { "/x/y.z/photo.jpeg", GIMG_FMT_JPEG }, { "a.tar.pgm", GIMG_FMT_PNM },
        { "out.Pam", GIMG_FMT_PAM },        { "/tmp/.hidden.pfm", GIMG_FMT_PFM },
        { "noext", GIMG_FMT_UNKNOWN },      { ".png", GIMG_FMT_UNKNOWN },
        { "dir/.png", GIMG_FMT_UNKNOWN },   { "dir.png/noext", GIMG_FMT_UNKNOWN },
        { "a.", GIMG_FMT_UNKNOWN },         { "a.gif", GIMG_FMT_GIF },
        { "a.xyz", GIMG_FMT_UNKNOWN },      { "scan.TIFF", GIMG_FMT_TIFF },
        { "-", GIMG_FMT_UNKNOWN },          { "", GIMG_FMT_UNKNOWN },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(gimg_format_from_path(cases[i].path) == cases[i].f, "\"%s\" -> %s, expected %s",
              cases[i].path, gimg_format_name(gimg_format_from_path(cases[i].path)),
              gimg_format_name(cases[i].f));
    CHECK(gimg_format_from_path(NULL) == GIMG_FMT_UNKNOWN, "NULL path");
}

static void test_output_format(void)
{
    gimg_image im[5];
    memset(im, 0, sizeof im);
    for (int c = 1; c <= 4; c++)
        im[c].channels = c;
    gimg_write_opts o;
    gimg_write_opts_init(&o);
    for (int c = 1; c <= 4; c++) {
        gimg_format dflt = c == 1 || c == 3 ? GIMG_FMT_PNM : GIMG_FMT_PAM;
        /* Standard output, no path, an unknown or no extension: the default. */
        CHECK(gimg_output_format("-", &o, &im[c]) == dflt, "stdout, %d channels", c);
        CHECK(gimg_output_format("-", NULL, &im[c]) == dflt, "stdout, no opts, %d channels", c);
        CHECK(gimg_output_format(NULL, &o, &im[c]) == dflt, "no path, %d channels", c);
        CHECK(gimg_output_format("out.xyz", &o, &im[c]) == dflt, "unknown extension, %d", c);
        CHECK(gimg_output_format("out", &o, &im[c]) == dflt, "no extension, %d", c);
        /* The extension decides, whatever the channels. */
        CHECK(gimg_output_format("x/out.PNG", &o, &im[c]) == GIMG_FMT_PNG, "png, %d", c);
        CHECK(gimg_output_format("out.pgm", NULL, &im[c]) == GIMG_FMT_PNM, "pgm, %d", c);
        CHECK(gimg_output_format("out.pam", &o, &im[c]) == GIMG_FMT_PAM, "pam, %d", c);
        /* -f beats the extension and the default. */
        o.format = GIMG_FMT_JPEG;
        CHECK(gimg_output_format("out.png", &o, &im[c]) == GIMG_FMT_JPEG, "-f over ext, %d", c);
        CHECK(gimg_output_format("-", &o, &im[c]) == GIMG_FMT_JPEG, "-f on stdout, %d", c);
        o.format = GIMG_FMT_UNKNOWN;
    }
    CHECK(gimg_output_format("-", NULL, NULL) == GIMG_FMT_PNM, "no image");
}

/* An output name no codec writes is refused before any work. */
static void test_check_output_name(void)
{
    gimg_write_opts o;
    gimg_write_opts_init(&o);
    static const char *const good[] = {"out.png", "out", "-", "dir/out.TIF", "x.webp",
                                       "a.b/noext", "shot.JPEG", "o.pfm", ".hidden"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        CHECK(gimg_check_output_name(good[i], &o) == GIMG_OK, "%s: %s", good[i],
              gimg_last_error());
    static const struct {
        const char *path, *why;
    } bad[] = {{"out.gif", "read but not written"}, {"out.xyz", "'.xyz'"},
               {"d/o.GIF", "read but not written"}, {"x.psd", "'.psd'"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(gimg_check_output_name(bad[i].path, &o) == GIMG_E_USAGE &&
              contains(gimg_last_error(), bad[i].why) && contains(gimg_last_error(), bad[i].path),
              "%s: %s", bad[i].path, gimg_last_error());
    /* -f decides over the extension, and must itself be writable. */
    o.format = GIMG_FMT_PNG;
    CHECK(gimg_check_output_name("out.xyz", &o) == GIMG_OK, "-f png out.xyz");
    o.format = GIMG_FMT_GIF;
    CHECK(gimg_check_output_name("out.png", &o) == GIMG_E_USAGE, "-f gif");
    CHECK(gimg_check_output_name("-", &o) == GIMG_E_USAGE, "-f gif to stdout");
    CHECK(!gimg_format_writable(GIMG_FMT_GIF) && gimg_format_writable(GIMG_FMT_WEBP) &&
          gimg_format_writable(GIMG_FMT_TIFF) && !gimg_format_writable(GIMG_FMT_UNKNOWN),
          "writable formats");
}

/* What a conversion on writing loses is recorded once, for the warning. */
static void test_losses(void)
{
    gimg_take_losses(NULL);
    static const struct {
        gimg_format f;
        int c;
        gimg_sample s;
        unsigned lost;
    } cases[] = {
        {GIMG_FMT_JPEG, 4, GIMG_U16, GIMG_LOSS_ALPHA | GIMG_LOSS_DEPTH},
        {GIMG_FMT_JPEG, 1, GIMG_U8, 0},
        {GIMG_FMT_PNG, 4, GIMG_U16, 0},
        {GIMG_FMT_PNG, 3, GIMG_F32, GIMG_LOSS_FLOAT},
        {GIMG_FMT_PNM, 2, GIMG_U16, GIMG_LOSS_ALPHA},
        {GIMG_FMT_PAM, 2, GIMG_U16, 0},
        {GIMG_FMT_PFM, 3, GIMG_U16, 0},
        {GIMG_FMT_TIFF, 4, GIMG_F32, 0},
        {GIMG_FMT_BMP, 2, GIMG_U8, GIMG_LOSS_ALPHA},
        {GIMG_FMT_WEBP, 4, GIMG_U16, GIMG_LOSS_DEPTH},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gimg_image im;
        if (!random_image(&im, 9, 5, cases[i].c, cases[i].s, 300 + i))
            continue;
        unsigned char *buf;
        size_t len;
        CHECK(encode(&im, cases[i].f, &buf, &len) == GIMG_OK, "case %zu: %s", i,
              gimg_last_error());
        free(buf);
        gimg_format first;
        unsigned lost = gimg_take_losses(&first);
        CHECK(lost == cases[i].lost, "case %zu (%s, %d channels): lost %#x, expected %#x", i,
              gimg_format_name(cases[i].f), cases[i].c, lost, cases[i].lost);
        CHECK(first == (lost ? cases[i].f : GIMG_FMT_UNKNOWN), "case %zu: first format %s", i,
              gimg_format_name(first));
        CHECK(gimg_take_losses(NULL) == 0, "case %zu: taking clears", i);
        gimg_image_free(&im);
    }
    char text[128];
    CHECK(!strcmp(gimg_loss_text(GIMG_LOSS_ALPHA | GIMG_LOSS_DEPTH, text, sizeof text),
                  "alpha dropped, 16-bit samples narrowed to 8-bit"), "text: %s", text);
    CHECK(!strcmp(gimg_loss_text(0, text, sizeof text), ""), "no loss: '%s'", text);
    CHECK(strlen(gimg_loss_text(7, text, 10)) < 10, "a short buffer is not overrun");
}

static void test_format_sniff(void)
{
    /* Each format's own output is recognised as that format. */
    for (size_t fi = 0; fi < N_FORMATS; fi++)
        for (int c = 1; c <= 4; c++) {
            gimg_image src;
            if (!random_image(&src, 4, 3, c, GIMG_U8, 60 + fi + (size_t)c))
                continue;
            unsigned char *buf;
            size_t len;
            if (encode(&src, k_formats[fi], &buf, &len) == GIMG_OK) {
                gimg_format g = gimg_format_sniff(buf, len);
                CHECK(g == k_formats[fi], "%s output from %d channels sniffed as %s",
                      gimg_format_name(k_formats[fi]), c, gimg_format_name(g));
                free(buf);
            }
            gimg_image_free(&src);
        }
    static const struct {
        const char *bytes;
        size_t len;
        gimg_format f;
    } cases[] = {
        { "\x89PNG\r\n\x1a\n", 8, GIMG_FMT_PNG },
        { "\x89PNG\r\n\x1a", 7, GIMG_FMT_UNKNOWN },
        { "\xff\xd8\xff", 3, GIMG_FMT_JPEG },
        { "BM", 2, GIMG_FMT_BMP },
        { "#?RADIANCE\n", 11, GIMG_FMT_HDR },
        { "#?RGBE\n", 7, GIMG_FMT_HDR },
        { "P6\n", 3, GIMG_FMT_PNM },
        { "P1 ", 3, GIMG_FMT_PNM },
        { "P4#", 3, GIMG_FMT_PNM },
        { "P5", 2, GIMG_FMT_PNM },   /* so the reader can call it truncated */
        { "P7\n", 3, GIMG_FMT_PAM },
        { "PF\n", 3, GIMG_FMT_PFM },
        { "Pf\t", 3, GIMG_FMT_PFM },
        { "P6x", 3, GIMG_FMT_UNKNOWN },
        { "P8 ", 3, GIMG_FMT_UNKNOWN },
        { "P0 ", 3, GIMG_FMT_UNKNOWN },
        { "GIF89a", 6, GIMG_FMT_GIF },
        { "GIF87a", 6, GIMG_FMT_GIF },
        { "GIF90a", 6, GIMG_FMT_UNKNOWN },
        { "II*\0", 4, GIMG_FMT_TIFF },
        { "MM\0*", 4, GIMG_FMT_TIFF },
        { "RIFF\0\0\0\0WEBP", 12, GIMG_FMT_WEBP },
        { "RIFF\0\0\0\0WAVE", 12, GIMG_FMT_UNKNOWN },
        { "8BPS\0\1", 6, GIMG_FMT_UNKNOWN },
        { "hello, this is not an image at all.", 35, GIMG_FMT_UNKNOWN },
        { "P", 1, GIMG_FMT_UNKNOWN },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gimg_format g = gimg_format_sniff((const unsigned char *)cases[i].bytes, cases[i].len);
        CHECK(g == cases[i].f, "case %zu (%.*s): %s, expected %s", i, (int)cases[i].len,
              cases[i].bytes, gimg_format_name(g), gimg_format_name(cases[i].f));
    }
    CHECK(gimg_format_sniff(NULL, 0) == GIMG_FMT_UNKNOWN, "NULL");
    CHECK(gimg_format_sniff((const unsigned char *)"BM", 0) == GIMG_FMT_UNKNOWN, "length 0");
}

/* ------------------------------------------------------ probing (3) */

static void test_probe(void)
{
    for (size_t fi = 0; fi < N_FORMATS; fi++)
        for (int c = 1; c <= 4; c++)
            for (size_t si = 0; si < 3; si++) {
                gimg_format f = k_formats[fi];
                gimg_sample s = k_samples[si];
                gimg_image src, got;
                if (!random_image(&src, 11, 7, c, s, 80 + fi * 12 + (size_t)c * 3 + si))
                    continue;
                unsigned char *buf;
                size_t len;
                if (encode(&src, f, &buf, &len) != GIMG_OK) {
                    CHECK(0, "%s: %s", gimg_format_name(f), gimg_last_error());
                    gimg_image_free(&src);
                    continue;
                }
                int oc;
                gimg_sample os;
                written_layout(f, c, s, &oc, &os);
                gimg_info info;
                gimg_status st = gimg_probe_memory(buf, len, &info);
                CHECK(st == GIMG_OK && info.format == f && info.width == 11 && info.height == 7 &&
                      info.channels == oc && info.sample == os,
                      "%s from %d-channel %s: probe %d: %s %dx%d, %d channels, %s; expected %d, %s",
                      gimg_format_name(f), c, depth_name(s), st, gimg_format_name(info.format),
                      info.width, info.height, info.channels, depth_name(info.sample), oc,
                      depth_name(os));
                /* The probe and the decoder agree. */
                if (gimg_decode_memory(buf, len, &got) == GIMG_OK) {
                    CHECK(got.width == info.width && got.height == info.height &&
                          got.channels == info.channels && got.sample == info.sample,
                          "%s: probe and decode disagree", gimg_format_name(f));
                    gimg_image_free(&got);
                }
                free(buf);
                gimg_image_free(&src);
            }
    gimg_info info;
    CHECK(gimg_probe_memory((const unsigned char *)"P6\n3 2\n255\n", 11, &info) == GIMG_OK &&
          info.width == 3 && info.height == 2 && info.channels == 3,
          "a PNM header alone is enough to probe");
    CHECK(gimg_probe_memory((const unsigned char *)"P6\n3 ", 5, &info) == GIMG_E_FORMAT,
          "a cut PNM header probes");
    CHECK(info.format == GIMG_FMT_UNKNOWN && info.width == 0, "failed probe leaves info set");
}

/* ------------------------------------------------ sizes and limits (4) */

static void test_check_size(void)
{
    size_t row = 0, total = 0;
    CHECK(gimg_check_size(640, 480, 3, GIMG_U16, &row, &total) == GIMG_OK && row == 640 * 3 * 2 &&
          total == (size_t)640 * 480 * 6, "640x480 RGB16: %s, row %zu total %zu",
          gimg_last_error(), row, total);
    CHECK(gimg_check_size(1, 1, 1, GIMG_U8, NULL, NULL) == GIMG_OK, "1x1, NULL outputs");
    static const int64_t bad_dim[] = { 0, -1, INT64_MIN, -((int64_t)1 << 40) };
    for (size_t i = 0; i < sizeof bad_dim / sizeof bad_dim[0]; i++) {
        CHECK(gimg_check_size(bad_dim[i], 10, 1, GIMG_U8, &row, &total) == GIMG_E_FORMAT,
              "width %lld", (long long)bad_dim[i]);
        CHECK(gimg_check_size(10, bad_dim[i], 1, GIMG_U8, &row, &total) == GIMG_E_FORMAT,
              "height %lld", (long long)bad_dim[i]);
    }
    CHECK(gimg_check_size(10, 10, 0, GIMG_U8, NULL, NULL) == GIMG_E_FORMAT, "0 channels");
    CHECK(gimg_check_size(10, 10, 5, GIMG_U8, NULL, NULL) == GIMG_E_FORMAT, "5 channels");
    CHECK(gimg_check_size(10, 10, 1, (gimg_sample)3, NULL, NULL) == GIMG_E_FORMAT,
          "3-byte samples");
    /* Per side: 2^24 is allowed (if the pixel count is), 2^24 + 1 is not. */
    CHECK(gimg_check_size(GIMG_MAX_DIMENSION, 1, 1, GIMG_U8, NULL, NULL) == GIMG_OK, "2^24 x 1");
    CHECK(gimg_check_size((int64_t)GIMG_MAX_DIMENSION + 1, 1, 1, GIMG_U8, NULL, NULL) ==
          GIMG_E_LIMIT, "2^24+1 x 1");
    CHECK(gimg_check_size(1, (int64_t)GIMG_MAX_DIMENSION + 1, 1, GIMG_U8, NULL, NULL) ==
          GIMG_E_LIMIT, "1 x 2^24+1");
    CHECK(gimg_check_size(INT64_MAX, INT64_MAX, 4, GIMG_F32, NULL, NULL) == GIMG_E_LIMIT,
          "INT64_MAX sides");
    /* By default no pixel limit but the sides'; a limit given, exactly at
     * and one past it. */
    CHECK(gimg_max_pixels() == GIMG_DEFAULT_MAX_PIXELS &&
              GIMG_DEFAULT_MAX_PIXELS == (uint64_t)GIMG_MAX_DIMENSION * GIMG_MAX_DIMENSION,
          "default limit %llu", (unsigned long long)gimg_max_pixels());
    CHECK(gimg_check_size(100000, 100000, 1, GIMG_U8, NULL, NULL) == GIMG_OK, "100000^2: %s",
          gimg_last_error());
    gimg_set_max_pixels((uint64_t)1 << 28);
    CHECK(gimg_check_size(16384, 16384, 1, GIMG_U8, NULL, NULL) == GIMG_OK, "16384^2");
    CHECK(gimg_check_size(16385, 16384, 1, GIMG_U8, NULL, NULL) == GIMG_E_LIMIT, "16385x16384");
    CHECK(contains(gimg_last_error(), "--max-pixels"), "message: %s", gimg_last_error());
    gimg_set_max_pixels(GIMG_DEFAULT_MAX_PIXELS);
    /* With the pixel limit out of the way, the largest image (2^24 x 2^24,
     * 16 bytes a pixel: 2^52 bytes) is sized without 32-bit or other
     * overflow. */
    gimg_set_max_pixels(UINT64_MAX);
    row = total = 0;
    CHECK(gimg_check_size(GIMG_MAX_DIMENSION, GIMG_MAX_DIMENSION, 4, GIMG_F32, &row, &total) ==
          GIMG_OK && row == (size_t)1 << 28 && total == (size_t)1 << 52,
          "2^24 x 2^24 RGBA float: %s, row %zu total %zu", gimg_last_error(), row, total);
    CHECK(gimg_check_size(70000, 70000, 4, GIMG_U16, &row, &total) == GIMG_OK &&
          row == (size_t)70000 * 8 && total == (size_t)70000 * 70000 * 8,
          "70000^2 RGBA16 (over 2^32 pixels and bytes): row %zu total %zu", row, total);
    gimg_set_max_pixels(GIMG_DEFAULT_MAX_PIXELS);
    /* An allocation through the same check refuses what the check refuses. */
    gimg_image im;
    CHECK(gimg_image_alloc(&im, 0, 5, 1, GIMG_U8) == GIMG_E_FORMAT && im.data == NULL, "alloc 0");
    gimg_set_max_pixels((uint64_t)1 << 28);
    CHECK(gimg_image_alloc(&im, 20000, 20000, 1, GIMG_U8) == GIMG_E_LIMIT && im.data == NULL,
          "alloc over the limit");
    gimg_set_max_pixels(GIMG_DEFAULT_MAX_PIXELS);
    gimg_image_free(&im);   /* harmless on a zeroed image */

    /* The memory budget: the default is half the machine's memory; an
     * image over the budget is refused before it is allocated, naming the
     * option; at the budget it is allocated. */
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    CHECK(gimg_default_max_memory() > 0 &&
              (pages <= 0 || gimg_default_max_memory() <= (uint64_t)pages * (uint64_t)page / 2),
          "default budget %llu", (unsigned long long)gimg_default_max_memory());
    gimg_set_max_memory((uint64_t)300 * 200 * 3);
    CHECK(gimg_image_alloc(&im, 300, 201, 3, GIMG_U8) == GIMG_E_LIMIT && im.data == NULL,
          "alloc over the budget");
    CHECK(contains(gimg_last_error(), "--max-memory") &&
              contains(gimg_last_error(), "a 300x201 image"),
          "message: %s", gimg_last_error());
    CHECK(gimg_image_alloc(&im, 300, 200, 3, GIMG_U8) == GIMG_OK && im.data, "alloc at it");
    gimg_image_free(&im);
    CHECK(gimg_check_memory(180000, "x") == GIMG_OK && gimg_check_memory(180001, "x") ==
          GIMG_E_LIMIT, "check_memory at and past the budget");
    CHECK(contains(gimg_last_error(), "x needs 176 KiB, over the memory budget of 176 KiB"),
          "message: %s", gimg_last_error());
    gimg_set_max_memory(0); /* the default again */
    CHECK(gimg_max_memory() == gimg_default_max_memory(), "default not restored");
    static const struct {
        uint64_t bytes;
        const char *text;
    } sizes[] = {
        {0, "0 bytes"},         {1023, "1023 bytes"},    {1024, "1.0 KiB"},
        {(uint64_t)3 << 29, "1.5 GiB"}, {(uint64_t)100 << 20, "100 MiB"},
        {UINT64_MAX, "16 EiB"},   {10 << 20, "10 MiB"}, {(uint64_t)9 << 20, "9.0 MiB"},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char buf[32];
        gimg_format_bytes(sizes[i].bytes, buf, sizeof buf);
        CHECK(!strcmp(buf, sizes[i].text), "%llu: '%s'", (unsigned long long)sizes[i].bytes,
              buf);
    }
}

/* A decode one pixel over a lowered limit fails before decoding, in every
 * format, with a message pointing at --max-pixels; at the limit it works. */
static void test_max_pixels_decode(void)
{
    for (size_t fi = 0; fi < N_FORMATS; fi++) {
        gimg_format f = k_formats[fi];
        gimg_image src, got;
        if (!random_image(&src, 11, 10, 3, f == GIMG_FMT_HDR || f == GIMG_FMT_PFM ? GIMG_F32
                                                                                  : GIMG_U8, fi))
            continue;
        unsigned char *buf;
        size_t len;
        if (encode(&src, f, &buf, &len) != GIMG_OK) {
            gimg_image_free(&src);
            continue;
        }
        gimg_set_max_pixels(110);
        gimg_status st = gimg_decode_memory(buf, len, &got);
        CHECK(st == GIMG_OK, "%s: 110 pixels at a limit of 110: %s", gimg_format_name(f),
              gimg_last_error());
        gimg_image_free(&got);
        gimg_set_max_pixels(109);
        st = gimg_decode_memory(buf, len, &got);
        CHECK(st == GIMG_E_LIMIT, "%s: 110 pixels at a limit of 109: status %d (%s)",
              gimg_format_name(f), st, gimg_last_error());
        CHECK(contains(gimg_last_error(), "--max-pixels"), "%s: message: %s", gimg_format_name(f),
              gimg_last_error());
        CHECK(got.data == NULL && got.width == 0, "%s: a failed decode leaves *out set",
              gimg_format_name(f));
        gimg_set_max_pixels(GIMG_DEFAULT_MAX_PIXELS);
        free(buf);
        gimg_image_free(&src);
    }
    CHECK(gimg_max_pixels() == GIMG_DEFAULT_MAX_PIXELS, "limit not restored");
}

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

static void put_le(unsigned char *p, uint32_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* A PNG of the signature, an IHDR (with a correct CRC) claiming w x h of
 * the given color type, an empty IDAT and IEND: all a header check needs. */
static size_t make_png_header(unsigned char *p, uint32_t w, uint32_t h, int color)
{
    memcpy(p, "\x89PNG\r\n\x1a\n", 8);
    unsigned char *c = p + 8;
    put_be32(c, 13);
    memcpy(c + 4, "IHDR", 4);
    put_be32(c + 8, w);
    put_be32(c + 12, h);
    c[16] = 8, c[17] = (unsigned char)color, c[18] = c[19] = c[20] = 0;
    put_be32(c + 21, libdeflate_crc32(0, c + 4, 17));
    c += 25;
    static const unsigned char tail[] = { 0, 0, 0, 0, 'I', 'D', 'A', 'T', 0x35, 0xaf, 0x06, 0x1e,
                                          0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82 };
    memcpy(c, tail, sizeof tail);
    return 8 + 25 + sizeof tail;
}

/* Headers claiming 60000 x 60000 (3.6 billion pixels, 10.8 GB as RGB) are
 * refused as over the limit from the header alone, at once: no decoder
 * may allocate, or walk, what the header claims. */
static void test_huge_headers(void)
{
    unsigned char b[256];
    struct {
        const char *what;
        size_t len;
    } cases[8];
    unsigned char store[8][256];
    int n = 0;

    cases[n].what = "PNG RGB 60000x60000";
    cases[n].len = make_png_header(store[n], 60000, 60000, 2);
    n++;
    cases[n].what = "PNG gray 20000x20000";
    cases[n].len = make_png_header(store[n], 20000, 20000, 0);
    n++;
    cases[n].what = "PNM P6 60000x60000";
    cases[n].len = (size_t)sprintf((char *)store[n], "P6\n60000 60000\n255\n");
    n++;
    cases[n].what = "PAM 60000x60000";
    cases[n].len = (size_t)sprintf((char *)store[n], "P7\nWIDTH 60000\nHEIGHT 60000\nDEPTH 4\n"
                                   "MAXVAL 65535\nTUPLTYPE RGB_ALPHA\nENDHDR\n");
    n++;
    cases[n].what = "PFM 60000x60000";
    cases[n].len = (size_t)sprintf((char *)store[n], "PF\n60000 60000\n-1.0\n");
    n++;
    cases[n].what = "HDR 60000x60000";
    cases[n].len = (size_t)sprintf((char *)store[n], "#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n"
                                   "-Y 60000 +X 60000\n");
    n++;
    /* BMP: 14-byte file header, 40-byte BITMAPINFOHEADER, 24-bit. */
    memset(b, 0, sizeof b);
    memcpy(b, "BM", 2);
    put_le(b + 2, 54 + 16, 4);
    put_le(b + 10, 54, 4);
    put_le(b + 14, 40, 4);
    put_le(b + 18, 60000, 4);
    put_le(b + 22, 60000, 4);
    put_le(b + 26, 1, 2);
    put_le(b + 28, 24, 2);
    memcpy(store[n], b, 70);
    cases[n].what = "BMP 60000x60000";
    cases[n].len = 70;
    n++;
    /* TGA: 18-byte header, uncompressed true color, 24-bit. */
    memset(b, 0, sizeof b);
    b[2] = 2;
    put_le(b + 12, 60000, 2);
    put_le(b + 14, 60000, 2);
    b[16] = 24;
    memcpy(store[n], b, 34);
    cases[n].what = "TGA 60000x60000";
    cases[n].len = 34;
    n++;

    /* A pixel limit given (the old default's): each refused for it. With
     * none (the default), by the memory budget (a 1 GiB one here) or for
     * the data that is not there: either way at once. */
    for (int limited = 1; limited >= 0; limited--) {
        gimg_set_max_pixels(limited ? (uint64_t)1 << 28 : GIMG_DEFAULT_MAX_PIXELS);
        gimg_set_max_memory(limited ? 0 : (uint64_t)1 << 30);
        for (int i = 0; i < n; i++) {
            gimg_image im;
            double t0 = now_s();
            gimg_status st = gimg_decode_memory(store[i], cases[i].len, &im);
            double dt = now_s() - t0;
            if (limited) {
                CHECK(st == GIMG_E_LIMIT, "%s: status %d, expected GIMG_E_LIMIT (%d): \"%s\"",
                      cases[i].what, st, GIMG_E_LIMIT, gimg_last_error());
                CHECK(st != GIMG_E_LIMIT || contains(gimg_last_error(), "--max-pixels"),
                      "%s: message: %s", cases[i].what, gimg_last_error());
            } else {
                CHECK(st == GIMG_E_FORMAT ||
                          (st == GIMG_E_LIMIT && contains(gimg_last_error(), "--max-memory")),
                      "%s with no pixel limit: status %d: \"%s\"", cases[i].what, st,
                      gimg_last_error());
            }
            /* "At once": 0.1 s is thousands of times a header parse, and far
             * below what touching even a fraction of the claimed size costs. */
            CHECK(dt < 0.1, "%s: refused after %.3f s", cases[i].what, dt);
            gimg_image_free(&im);
        }
    }
    gimg_set_max_memory(0);
}

/* The input-size limit (64 bytes per allowed pixel + 64 MiB) refuses a
 * file from its size, before reading it: a sparse file costs nothing. */
static void test_input_size_limit(void)
{
    const char *path = path_in_dir("sparse.pam");
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0, "%s: %s", path, strerror(errno));
    if (fd < 0)
        return;
    /* A valid header, then a hole to one byte past the limit at 1 pixel. */
    static const char hdr[] = "P7\nWIDTH 1\nHEIGHT 1\nDEPTH 1\nMAXVAL 255\nENDHDR\n";
    CHECK(write(fd, hdr, sizeof hdr - 1) == (ssize_t)(sizeof hdr - 1), "write");
    CHECK(ftruncate(fd, ((off_t)64 << 20) + 64 + 1) == 0, "ftruncate: %s", strerror(errno));
    close(fd);
    gimg_set_max_pixels(1);
    gimg_image im;
    gimg_status st = gimg_read(path, &im);
    CHECK(st == GIMG_E_LIMIT, "status %d: %s", st, gimg_last_error());
    gimg_image_free(&im);
    /* One byte less is within the limit, and decodes (trailing data is ignored). */
    CHECK(truncate(path, ((off_t)64 << 20) + 64) == 0, "truncate");
    st = gimg_read(path, &im);
    CHECK(st == GIMG_OK, "at the input limit: %s", gimg_last_error());
    gimg_image_free(&im);
    gimg_set_max_pixels(GIMG_DEFAULT_MAX_PIXELS);
    unlink(path);
}

/* -------------------------------------- truncated and corrupt input (5) */

/* Progress of the child doing a sweep, in shared memory, so that the
 * parent can name the input a crash or hang happened on. */
typedef struct {
    volatile int phase;      /* 0 prefixes, 1 byte flips */
    volatile size_t at;      /* prefix length or flipped offset */
} sweep_progress;

/* Decodes every prefix of buf (every length up to 4096 bytes; past that a
 * strided sample) and every single-byte corruption (each byte inverted,
 * and the middle byte through a few masks). Prefixes shorter than
 * strict_below must be refused as GIMG_E_FORMAT; the rest may decode. */
static void sweep_child(const char *what, const unsigned char *buf, size_t len,
                        size_t strict_below, int w, int h, sweep_progress *pr)
{
    gimg_image im;
    pr->phase = 0;
    size_t step = len <= 4096 ? 1 : len / 1024;
    for (size_t n = 0; n < len; n += n < 1024 ? 1 : step) {
        pr->at = n;
        /* An allocation of exactly n bytes: a read past the end of the
         * input is then a read past the end of the block (ASan sees it). */
        unsigned char *p = malloc(n ? n : 1);
        memcpy(p, buf, n);
        gimg_status st = gimg_decode_memory(p, n, &im);
        if (n < strict_below)
            CHECK(st == GIMG_E_FORMAT, "%s cut to %zu of %zu bytes: status %d (%s)", what, n, len,
                  st, st ? gimg_last_error() : "decoded");
        else
            CHECK(st == GIMG_E_FORMAT || st == GIMG_OK, "%s cut to %zu of %zu bytes: status %d "
                  "(%s)", what, n, len, st, gimg_last_error());
        if (st == GIMG_OK)
            CHECK(im.width == w && im.height == h && im.data, "%s cut to %zu: decoded as %dx%d",
                  what, n, im.width, im.height);
        else
            CHECK(im.data == NULL && gimg_last_error()[0], "%s cut to %zu: no message or "
                  "*out not zeroed", what, n);
        gimg_image_free(&im);
        free(p);
    }
    pr->phase = 1;
    unsigned char *p = malloc(len);
    static const unsigned char masks[] = { 0xff, 0x01, 0x80, 0x10 };
    for (size_t i = 0; i < len + 3; i++) {
        size_t at = i < len ? i : len / 2;
        unsigned char mask = masks[i < len ? 0 : i - len + 1];
        pr->at = at;
        memcpy(p, buf, len);
        p[at] ^= mask;
        gimg_status st = gimg_decode_memory(p, len, &im);
        /* A flipped size byte may claim an image over the limit: LIMIT. */
        CHECK(st == GIMG_OK || st == GIMG_E_FORMAT || st == GIMG_E_LIMIT,
              "%s with byte %zu ^ 0x%02x: status %d (%s)", what, at, mask, st, gimg_last_error());
        CHECK(st == GIMG_OK || im.data == NULL, "%s, byte %zu: *out not zeroed", what, at);
        gimg_image_free(&im);
    }
    free(p);
}

/* Runs sweep_child in a child process with its own alarm, so that a crash
 * or hang fails this test with the exact input, and the rest still run. */
static void sweep(const char *what, const unsigned char *buf, size_t len, size_t strict_below,
                  int w, int h)
{
    sweep_progress *pr = mmap(NULL, sizeof *pr, PROT_READ | PROT_WRITE,
                              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(pr != MAP_FAILED, "mmap: %s", strerror(errno));
    if (pr == MAP_FAILED)
        return;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        signal(SIGALRM, SIG_DFL);
        alarm(30);
        /* Corrupt size fields may claim large images: keep the limit low so
         * that those are refused (LIMIT) instead of decoded at length. */
        gimg_set_max_pixels(1 << 20);
        int before = check_failures_in_test;
        sweep_child(what, buf, len, strict_below, w, h, pr);
        fflush(stderr);
        /* 3: failed checks, already printed. Any other nonzero status is
         * an abnormal end, such as a sanitizer's report (exit status 1). */
        _exit(check_failures_in_test > before ? 3 : 0);
    }
    if (pid > 0) {
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        const char *on = pr->phase == 0 ? "prefix of length" : "byte flipped at offset";
        if (WIFSIGNALED(status)) {
            int sig = WTERMSIG(status);
            CHECK(0, "%s (%zu bytes): the decoder %s (signal %d) on the %s %zu", what, len,
                  sig == SIGALRM ? "hung" : "crashed", sig, on, pr->at);
        } else if (WEXITSTATUS(status) == 3) {
            CHECK(0, "%s: failed checks in the sweep (above)", what);
        } else {
            CHECK(WEXITSTATUS(status) == 0, "%s (%zu bytes): the sweep ended abnormally (exit "
                  "status %d, e.g. a sanitizer's report above) on the %s %zu", what, len,
                  WEXITSTATUS(status), on, pr->at);
        }
    }
    munmap(pr, sizeof *pr);
}

static void sweep_encoded(gimg_format f, int w, int h, int c, gimg_sample s, size_t strict_cut)
{
    gimg_image src;
    int ok = f == GIMG_FMT_JPEG ? smooth_image(&src, w, h, c, s)
                                : random_image(&src, w, h, c, s, 4242 + (uint64_t)f);
    if (!ok)
        return;
    unsigned char *buf;
    size_t len;
    if (encode(&src, f, &buf, &len) == GIMG_OK) {
        char what[64];
        snprintf(what, sizeof what, "%s %dx%d %d-channel %s", gimg_format_name(f), w, h, c,
                 depth_name(s));
        /* strict_cut: how many bytes at the end may be missing and the
         * file still decode (SIZE_MAX: no requirement). */
        sweep(what, buf, len, strict_cut == SIZE_MAX ? 0 : len - strict_cut, w, h);
        free(buf);
    }
    gimg_image_free(&src);
}

/* Our own readers (PNM, PAM, PFM) and the HDR check ahead of stb detect
 * every truncation. */
static void test_truncated_pnm(void)
{
    sweep_encoded(GIMG_FMT_PNM, 9, 7, 3, GIMG_U8, 0);
    sweep_encoded(GIMG_FMT_PNM, 9, 7, 1, GIMG_U16, 0);
    sweep_encoded(GIMG_FMT_PAM, 9, 7, 4, GIMG_U16, 0);
    sweep_encoded(GIMG_FMT_PAM, 5, 3, 2, GIMG_U8, 0);
    sweep_encoded(GIMG_FMT_PFM, 9, 7, 3, GIMG_F32, 0);
    sweep_encoded(GIMG_FMT_PFM, 5, 3, 1, GIMG_F32, 0);
    /* Plain formats: a cut inside the last number leaves a shorter, valid
     * number, so only cuts before the last sample must fail. */
    static const char p3[] = "P3\n# plain\n3 2\n255\n1 2 3  40 50 60  255 0 7\n"
                             "9 8 7  100 200 250  0 0 1\n";
    static const char p1[] = "P1\n5 2\n1 0 1 1 0\n0 1 0 0 1\n";
    static const char p2[] = "P2 3 2 1023 0 512 1023 7 1000 2\n";
    sweep("plain P3", (const unsigned char *)p3, sizeof p3 - 1, sizeof p3 - 2, 3, 2);
    sweep("plain P1", (const unsigned char *)p1, sizeof p1 - 1, sizeof p1 - 2, 5, 2);
    sweep("plain P2", (const unsigned char *)p2, sizeof p2 - 1, sizeof p2 - 2, 3, 2);
    static const unsigned char p4[] = "P4\n10 3\n\xff\xc0\x55\x40\x00\x00";
    sweep("raw P4", p4, sizeof p4 - 1, sizeof p4 - 1, 10, 3);
}

static void test_truncated_hdr(void)
{
    sweep_encoded(GIMG_FMT_HDR, 9, 7, 3, GIMG_F32, 0);   /* run-length encoded */
    sweep_encoded(GIMG_FMT_HDR, 5, 3, 3, GIMG_F32, 0);   /* flat */
}

/* The codecs on libraries: JPEG, TIFF and WebP refuse every cut; PNG every
 * cut but one into IEND's CRC, the last 4 bytes, which carries no pixels.
 * BMP and TGA are read by stb, whose prechecks refuse cut pixel data but
 * not every cut elsewhere: a cut file that decodes must have the header's
 * size, and nothing may crash or hang. */
static void test_truncated_codecs(void)
{
    sweep_encoded(GIMG_FMT_PNG, 9, 7, 4, GIMG_U8, 4);
    sweep_encoded(GIMG_FMT_PNG, 9, 7, 1, GIMG_U16, 4);
    sweep_encoded(GIMG_FMT_JPEG, 17, 9, 3, GIMG_U8, 0);
    sweep_encoded(GIMG_FMT_JPEG, 17, 9, 1, GIMG_U8, 0);
    sweep_encoded(GIMG_FMT_TIFF, 9, 7, 4, GIMG_U16, 0);
    sweep_encoded(GIMG_FMT_WEBP, 9, 7, 3, GIMG_U8, 0);
    sweep_encoded(GIMG_FMT_BMP, 9, 7, 3, GIMG_U8, SIZE_MAX);
    sweep_encoded(GIMG_FMT_BMP, 9, 7, 4, GIMG_U8, SIZE_MAX);
    sweep_encoded(GIMG_FMT_TGA, 9, 7, 4, GIMG_U8, SIZE_MAX);
    sweep_encoded(GIMG_FMT_TGA, 9, 7, 1, GIMG_U8, SIZE_MAX);
}

/* ----------------------------------------- unsupported and unknown (6) */

static void test_unsupported_and_unknown(void)
{
    static const struct {
        const char *bytes;
        size_t len;
        const char *name;
    } unsupported[] = {
        { "8BPS\x00\x01\x00\x00\x00\x00\x00\x00\x00\x03", 14, "PSD" },
    };
    gimg_image im;
    gimg_info info;
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++) {
        const unsigned char *b = (const unsigned char *)unsupported[i].bytes;
        gimg_status st = gimg_decode_memory(b, unsupported[i].len, &im);
        const char *msg = gimg_last_error();
        CHECK(st == GIMG_E_FORMAT && contains(msg, "not supported") &&
              contains(msg, unsupported[i].name), "%s: status %d, message \"%s\"",
              unsupported[i].name, st, msg);
        CHECK(im.data == NULL, "%s: *out not zeroed", unsupported[i].name);
        st = gimg_probe_memory(b, unsupported[i].len, &info);
        CHECK(st == GIMG_E_FORMAT && contains(gimg_last_error(), "not supported"),
              "probe %s: %d %s", unsupported[i].name, st, gimg_last_error());
    }
    /* Softimage PIC: magic, then "PICT" at offset 88. */
    unsigned char pic[100] = { 0x53, 0x80, 0xf6, 0x34 };
    memcpy(pic + 88, "PICT", 4);
    CHECK(gimg_decode_memory(pic, sizeof pic, &im) == GIMG_E_FORMAT &&
          contains(gimg_last_error(), "PIC format not supported"), "PIC: %s", gimg_last_error());

    static const char junk[] = "hello, this is not an image at all\n";
    CHECK(gimg_decode_memory((const unsigned char *)junk, sizeof junk - 1, &im) == GIMG_E_FORMAT &&
          contains(gimg_last_error(), "unrecognised image format"), "junk: %s", gimg_last_error());
    unsigned char zeros[64] = { 0 };
    CHECK(gimg_decode_memory(zeros, sizeof zeros, &im) == GIMG_E_FORMAT,
          "64 zero bytes: %s", gimg_last_error());
    CHECK(gimg_decode_memory(NULL, 0, &im) == GIMG_E_FORMAT &&
          contains(gimg_last_error(), "empty"), "NULL buffer: %s", gimg_last_error());
    CHECK(gimg_decode_memory(zeros, 0, &im) == GIMG_E_FORMAT &&
          contains(gimg_last_error(), "empty"), "zero length: %s", gimg_last_error());
    CHECK(gimg_probe_memory(zeros, 0, &info) == GIMG_E_FORMAT, "probe of nothing");

    /* Files: empty, missing, a directory. */
    const char *path = path_in_dir("empty.png");
    CHECK(write_raw(path, "", 0), "create %s", path);
    CHECK(gimg_read(path, &im) == GIMG_E_FORMAT && contains(gimg_last_error(), "empty"),
          "empty file: %s", gimg_last_error());
    unlink(path);
    CHECK(gimg_read(path_in_dir("missing.png"), &im) == GIMG_E_IO, "missing file: %s",
          gimg_last_error());
    CHECK(gimg_read(g_dir, &im) == GIMG_E_IO, "a directory: %s", gimg_last_error());
    CHECK(im.data == NULL, "*out not zeroed");
}

/* ----------------------------------------------- netpbm specifics (7) */

/* Decodes a literal (its length from sizeof, so NULs may be inside). */
#define DECODE(lit, im) gimg_decode_memory((const unsigned char *)(lit), sizeof(lit) - 1, (im))

static int expect_u8(const gimg_image *im, int c, const uint8_t *want, size_t n, const char *what)
{
    int ok = im->data && im->sample == GIMG_U8 && im->channels == c &&
             (size_t)im->width * im->height * (size_t)c == n;
    CHECK(ok, "%s: decoded %dx%d, %d channels, %s", what, im->width, im->height, im->channels,
          depth_name(im->sample));
    if (!ok)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (im->data[i] != want[i]) {
            CHECK(0, "%s: sample %zu is %u, expected %u", what, i, im->data[i], want[i]);
            return 0;
        }
    return 1;
}

static int expect_u16(const gimg_image *im, int c, const uint16_t *want, size_t n,
                      const char *what)
{
    int ok = im->data && im->sample == GIMG_U16 && im->channels == c &&
             (size_t)im->width * im->height * (size_t)c == n;
    CHECK(ok, "%s: decoded %dx%d, %d channels, %s", what, im->width, im->height, im->channels,
          depth_name(im->sample));
    if (!ok)
        return 0;
    const uint16_t *d = (const uint16_t *)im->data;
    for (size_t i = 0; i < n; i++)
        if (d[i] != want[i]) {
            CHECK(0, "%s: sample %zu is %u, expected %u", what, i, d[i], want[i]);
            return 0;
        }
    return 1;
}

static void test_pnm_comments_and_plain(void)
{
    gimg_image im;
    /* Comments wherever whitespace may be, including right after the magic
     * and between every header value. */
    static const char p6[] = "P6# after the magic\n# a whole line\n2 # width\n# between\n1\n"
                             "#before maxval\n255\n\x01\x02\x03\xfd\xfe\xff";
    CHECK(DECODE(p6, &im) == GIMG_OK, "P6 with comments: %s", gimg_last_error());
    expect_u8(&im, 3, (const uint8_t[]){ 1, 2, 3, 253, 254, 255 }, 6, "P6 with comments");
    gimg_image_free(&im);
    /* A raster byte that looks like '#' or whitespace is data, not a comment. */
    static const char p5[] = "P5\n3 1\n255\n#\n ";
    CHECK(DECODE(p5, &im) == GIMG_OK, "P5 '#' data: %s", gimg_last_error());
    expect_u8(&im, 1, (const uint8_t[]){ '#', '\n', ' ' }, 3, "P5 raster of '#', LF, space");
    gimg_image_free(&im);

    /* P1: 1 is black (0), 0 is white (255); comments in the raster; digits
     * need no separators. */
    static const char p1[] = "P1\n# bitmap\n5 2\n1 0 1 1 0\n# mid-raster\n01001";
    CHECK(DECODE(p1, &im) == GIMG_OK, "P1: %s", gimg_last_error());
    expect_u8(&im, 1, (const uint8_t[]){ 0, 255, 0, 0, 255, 255, 0, 255, 255, 0 }, 10, "P1");
    gimg_image_free(&im);
    CHECK(DECODE("P1\n2 1\n1 2\n", &im) == GIMG_E_FORMAT, "P1 digit 2 accepted");

    /* P4: rows padded to whole bytes, most significant bit first, 1 black. */
    static const char p4[] = "P4\n10 2\n\xA5\xC0\x0F\x3F";
    CHECK(DECODE(p4, &im) == GIMG_OK, "P4: %s", gimg_last_error());
    expect_u8(&im, 1, (const uint8_t[]){ 0, 255, 0, 255, 255, 0, 255, 0, 0, 0,
                                         255, 255, 255, 255, 0, 0, 0, 0, 255, 255 }, 20, "P4");
    gimg_image_free(&im);

    /* P2/P3 plain at maxval 255: unchanged; comments inside the raster. */
    static const char p3[] = "P3\n2 1\n255\n0 128 255 # c\n 7\n8 9\n";
    CHECK(DECODE(p3, &im) == GIMG_OK, "P3: %s", gimg_last_error());
    expect_u8(&im, 3, (const uint8_t[]){ 0, 128, 255, 7, 8, 9 }, 6, "P3");
    gimg_image_free(&im);
    static const char p2[] = "P2 4 1 65535 0 1 65534 65535";
    CHECK(DECODE(p2, &im) == GIMG_OK, "P2 16-bit: %s", gimg_last_error());
    expect_u16(&im, 1, (const uint16_t[]){ 0, 1, 65534, 65535 }, 4, "P2 maxval 65535");
    gimg_image_free(&im);
    /* Bad plain data. */
    CHECK(DECODE("P2 2 1 255 1 x\n", &im) == GIMG_E_FORMAT, "P2 letter accepted");
    CHECK(DECODE("P2 2 1 255 1 -3\n", &im) == GIMG_E_FORMAT, "P2 negative accepted");
    CHECK(DECODE("P2 2 1 255 1 256\n", &im) == GIMG_E_FORMAT &&
          contains(gimg_last_error(), "exceeds maxval"), "P2 256 > 255: %s", gimg_last_error());
    CHECK(DECODE("P2 2 1 255 1\n", &im) == GIMG_E_FORMAT &&
          contains(gimg_last_error(), "truncated"), "P2 short: %s", gimg_last_error());
    /* Bad headers. */
    CHECK(DECODE("P5\n0 1\n255\n", &im) == GIMG_E_FORMAT, "width 0");
    CHECK(DECODE("P5\n2 1\n0\n\0\0", &im) == GIMG_E_FORMAT, "maxval 0");
    CHECK(DECODE("P5\n2 1\n65536\n\0\0\0\0", &im) == GIMG_E_FORMAT, "maxval 65536");
    CHECK(DECODE("P5\n-2 1\n255\n\0\0", &im) == GIMG_E_FORMAT, "negative width");
    CHECK(DECODE("P5\n2x 1\n255\n\0\0", &im) == GIMG_E_FORMAT, "width 2x");
    CHECK(DECODE("P5\n2 1\n255", &im) == GIMG_E_FORMAT, "no raster");
    CHECK(DECODE("P5\n99999999999999999999 1\n255\n", &im) == GIMG_E_FORMAT, "20-digit width");
    CHECK(DECODE("P5\n16777217 1\n255\n", &im) == GIMG_E_LIMIT, "width 2^24 + 1: %s",
          gimg_last_error());
    CHECK(im.data == NULL, "*out not zeroed");
}

/* Samples keep the file's units: every value of each maxval is read
 * unchanged, raw and plain, into the smallest type holding it (8-bit up to
 * 255), and the image's maxval is the file's (0 for 255 and 65535, the
 * full ranges) (codec_pnm.c). */
static void check_maxval(unsigned maxval)
{
    int wide = maxval > 255;
    size_t n = maxval + 1;
    char head[64];
    int hl = snprintf(head, sizeof head, "P5\n%zu 1\n%u\n", n, maxval);
    size_t raw_len = (size_t)hl + n * (wide ? 2 : 1);
    unsigned char *raw = malloc(raw_len);
    char *plain = malloc(32 + n * 7);
    memcpy(raw, head, (size_t)hl);
    int pl = sprintf(plain, "P2\n%zu 1\n%u\n", n, maxval);
    for (unsigned v = 0; v <= maxval; v++) {
        if (wide) {
            raw[hl + 2 * v] = (unsigned char)(v >> 8);
            raw[hl + 2 * v + 1] = (unsigned char)v;
        } else {
            raw[hl + v] = (unsigned char)v;
        }
        pl += sprintf(plain + pl, "%u%c", v, v % 16 == 15 ? '\n' : ' ');
    }
    uint16_t *want16 = malloc(n * sizeof *want16);
    uint8_t *want8 = malloc(n);
    for (unsigned v = 0; v <= maxval; v++) {
        want16[v] = (uint16_t)v;
        want8[v] = (uint8_t)v;
    }
    const unsigned want_maxval = maxval == 255 || maxval == 65535 ? 0 : maxval;
    for (int t = 0; t < 2; t++) {
        gimg_image im;
        char what[48];
        snprintf(what, sizeof what, "%s maxval %u", t ? "plain" : "raw", maxval);
        gimg_status st = t ? gimg_decode_memory((unsigned char *)plain, (size_t)pl, &im)
                           : gimg_decode_memory(raw, raw_len, &im);
        CHECK(st == GIMG_OK, "%s: %s", what, gimg_last_error());
        if (st)
            continue;
        if (wide)
            expect_u16(&im, 1, want16, n, what);
        else
            expect_u8(&im, 1, want8, n, what);
        CHECK(im.maxval == want_maxval, "%s: maxval %u, expected %u", what, im.maxval,
              want_maxval);
        gimg_image_free(&im);
    }
    /* One above maxval is an error, raw and plain. */
    if (maxval < 255 || (maxval > 255 && maxval < 65535)) {
        if (wide) {
            raw[hl] = (unsigned char)((maxval + 1) >> 8);
            raw[hl + 1] = (unsigned char)(maxval + 1);
        } else {
            raw[hl] = (unsigned char)(maxval + 1);
        }
        gimg_image im;
        CHECK(gimg_decode_memory(raw, raw_len, &im) == GIMG_E_FORMAT &&
              contains(gimg_last_error(), "exceeds maxval"), "raw maxval %u: %u accepted (%s)",
              maxval, maxval + 1, gimg_last_error());
    }
    free(raw);
    free(plain);
    free(want16);
    free(want8);
}

static void test_pnm_maxval(void)
{
    /* 15 and 1023 as asked; 100 and 1000 are even, so v * 255 / maxval and
     * v * 65535 / maxval hit exact halves (v = 10; v = 500), where rounding
     * direction shows; 1, 256 and 65534 are the edges of each range. */
    static const unsigned mv[] = { 1, 15, 100, 254, 255, 256, 1000, 1023, 4095, 65534, 65535 };
    for (size_t i = 0; i < sizeof mv / sizeof mv[0]; i++)
        check_maxval(mv[i]);
    /* Examples spelled out, plain P2 and P3; bitmaps have no maxval. */
    gimg_image im;
    CHECK(DECODE("P2 3 1 1023 1 511 1022", &im) == GIMG_OK, "%s", gimg_last_error());
    expect_u16(&im, 1, (const uint16_t[]){ 1, 511, 1022 }, 3, "maxval 1023 examples");
    CHECK(im.maxval == 1023, "P2 maxval %u", im.maxval);
    gimg_image_free(&im);
    CHECK(DECODE("P2 3 1 15 1 7 8", &im) == GIMG_OK, "%s", gimg_last_error());
    expect_u8(&im, 1, (const uint8_t[]){ 1, 7, 8 }, 3, "maxval 15 examples");
    CHECK(im.maxval == 15, "P2 maxval %u", im.maxval);
    gimg_image_free(&im);
    CHECK(DECODE("P3 1 1 1023 1023 0 512", &im) == GIMG_OK, "%s", gimg_last_error());
    expect_u16(&im, 3, (const uint16_t[]){ 1023, 0, 512 }, 3, "P3 maxval 1023");
    CHECK(im.maxval == 1023, "P3 maxval %u", im.maxval);
    gimg_image_free(&im);
    CHECK(DECODE("P1 2 1 1 0", &im) == GIMG_OK && im.maxval == 0, "P1: maxval %u", im.maxval);
    gimg_image_free(&im);
    CHECK(DECODE("P4\n2 1\n\x80", &im) == GIMG_OK && im.maxval == 0, "P4: maxval %u",
          im.maxval);
    gimg_image_free(&im);
}

/* An image with a maxval, written as PNM and PAM (the maxval kept, one
 * byte a sample up to 255) and read back: samples and maxval unchanged.
 * Every channel count PAM holds, both depths. */
static void test_pnm_maxval_written(void)
{
    static const struct {
        gimg_sample s;
        unsigned maxval;
    } cases[] = { { GIMG_U8, 1 }, { GIMG_U8, 100 }, { GIMG_U16, 31 }, { GIMG_U16, 255 },
                  { GIMG_U16, 256 }, { GIMG_U16, 1023 }, { GIMG_U16, 4095 }, { GIMG_U16, 65534 } };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int c = 1; c <= 4; c++) {
            gimg_image im;
            if (gimg_image_alloc(&im, 7, 3, c, cases[i].s))
                continue;
            testimg_fill_maxval(&im, 40 + i, cases[i].maxval);
            const unsigned m = cases[i].maxval;
            for (int f = 0; f < 2; f++) {
                gimg_format fmt = f ? GIMG_FMT_PNM : GIMG_FMT_PAM;
                if (fmt == GIMG_FMT_PNM && c % 2 == 0)
                    continue;
                char what[64], want[160];
                snprintf(what, sizeof what, "%s %d channels %s maxval %u", gimg_format_name(fmt),
                         c, depth_name(cases[i].s), m);
                int hl = fmt == GIMG_FMT_PNM
                             ? snprintf(want, sizeof want, "P%c\n7 3\n%u\n", c == 1 ? '5' : '6', m)
                             : snprintf(want, sizeof want, "P7\nWIDTH 7\nHEIGHT 3\nDEPTH %d\n"
                                        "MAXVAL %u\n", c, m);
                unsigned char *buf;
                size_t len;
                if (encode(&im, fmt, &buf, &len) != GIMG_OK) {
                    CHECK(0, "%s: %s", what, gimg_last_error());
                    continue;
                }
                size_t body = (size_t)7 * 3 * (size_t)c * (m > 255 ? 2 : 1);
                CHECK(len > body && memcmp(buf, want, (size_t)hl) == 0,
                      "%s: header %.*s", what, hl, buf);
                CHECK(len > body && buf[len - body - 1] == '\n', "%s: %zu bytes for %zu samples",
                      what, len, body);
                gimg_image back;
                if (gimg_decode_memory(buf, len, &back) == GIMG_OK) {
                    /* Read back at the depth its maxval asks for. */
                    gimg_image want_im;
                    gimg_sample ws = m > 255 ? GIMG_U16 : GIMG_U8;
                    if (gimg_image_alloc(&want_im, 7, 3, c, ws) == GIMG_OK) {
                        for (int y = 0; y < 3; y++)
                            for (int x = 0; x < 7 * c; x++) {
                                double v = get_sample(&im, x / c, y, x % c);
                                if (ws == GIMG_U8)
                                    gimg_row(&want_im, y)[x] = (uint8_t)v;
                                else
                                    ((uint16_t *)gimg_row(&want_im, y))[x] = (uint16_t)v;
                            }
                        images_equal(&back, &want_im, what);
                        gimg_image_free(&want_im);
                    }
                    CHECK(back.maxval == (m == 255 ? 0 : m), "%s: read back maxval %u", what,
                          back.maxval);
                    gimg_image_free(&back);
                } else {
                    CHECK(0, "%s: read back: %s", what, gimg_last_error());
                }
                free(buf);
            }
            gimg_image_free(&im);
        }
}

/* Formats that cannot keep a maxval get the image rescaled to its sample
 * type's full range first, round(v * full / maxval) with halves up, then
 * the usual conversions (write.c); to float, v / maxval; PAM keeps it.
 * Expected values in double precision, independently of write.c. */
static void test_maxval_conversions(void)
{
    static const struct {
        gimg_sample s;
        unsigned maxval;
        gimg_format f;
    } cases[] = {
        { GIMG_U8, 100, GIMG_FMT_BMP },     /* 8-bit: to 255 */
        { GIMG_U8, 1, GIMG_FMT_BMP },
        { GIMG_U16, 4095, GIMG_FMT_BMP },   /* to 65535, then / 257 */
        { GIMG_U16, 200, GIMG_FMT_BMP },
        { GIMG_U16, 1000, GIMG_FMT_PNG },   /* not 2^b - 1: to 65535 for PNG too */
        { GIMG_U16, 4095, GIMG_FMT_PFM },   /* v / 4095 */
        { GIMG_U8, 15, GIMG_FMT_PFM },
        { GIMG_U16, 4095, GIMG_FMT_PAM },   /* kept */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const unsigned m = cases[i].maxval;
        const gimg_format f = cases[i].f;
        char what[64];
        snprintf(what, sizeof what, "%s maxval %u to %s", depth_name(cases[i].s), m,
                 gimg_format_name(f));
        gimg_image im;
        if (gimg_image_alloc(&im, 64, 2, 1, cases[i].s))
            continue;
        testimg_fill_maxval(&im, 70 + i, m);
        unsigned char *buf;
        size_t len;
        gimg_take_losses(NULL);
        if (encode(&im, f, &buf, &len) != GIMG_OK) {
            CHECK(0, "%s: %s", what, gimg_last_error());
            gimg_image_free(&im);
            continue;
        }
        /* Rescaling is no loss; 16 to 8 bits is, above maxval 255 only. */
        unsigned lost = gimg_take_losses(NULL);
        unsigned want_lost = cases[i].s == GIMG_U16 && f == GIMG_FMT_BMP && m > 255
                                 ? GIMG_LOSS_DEPTH : 0;
        CHECK(lost == want_lost, "%s: losses %#x, expected %#x", what, lost, want_lost);
        gimg_image back;
        gimg_status st = gimg_decode_memory(buf, len, &back);
        free(buf);
        CHECK(st == GIMG_OK, "%s: %s", what, gimg_last_error());
        if (st) {
            gimg_image_free(&im);
            continue;
        }
        int bad = 0;
        for (int y = 0; y < 2 && !bad; y++)
            for (int x = 0; x < 64 && !bad; x++) {
                double v = get_sample(&im, x, y, 0), want;
                if (f == GIMG_FMT_PFM)
                    want = (double)(float)((float)v / (float)m);
                else if (f == GIMG_FMT_PAM)
                    want = v;
                else if (back.sample == GIMG_U8 && cases[i].s == GIMG_U8)
                    want = floor(v * 255.0 / m + 0.5);
                else if (back.sample == GIMG_U8)
                    want = floor(floor(v * 65535.0 / m + 0.5) / 257.0 + 0.5);
                else
                    want = floor(v * 65535.0 / m + 0.5);
                double got = get_sample(&back, x, y, 0);
                if (got != want) {
                    CHECK(0, "%s: sample %g became %.9g, expected %.9g", what, v, got, want);
                    bad = 1;
                }
            }
        unsigned want_maxval = f == GIMG_FMT_PAM ? m : 0;
        CHECK(back.maxval == want_maxval, "%s: read back with maxval %u, expected %u", what,
              back.maxval, want_maxval);
        gimg_image_free(&back);
        gimg_image_free(&im);
    }
    /* A sample over the maxval (a caller's broken promise) counts as the
     * maxval: white, never a wrapped value. */
    gimg_image im;
    if (gimg_image_alloc(&im, 2, 1, 1, GIMG_U16) == GIMG_OK) {
        ((uint16_t *)im.data)[0] = 4095;
        ((uint16_t *)im.data)[1] = 9000;
        im.maxval = 4095;
        unsigned char *buf;
        size_t len;
        gimg_image back;
        if (encode(&im, GIMG_FMT_BMP, &buf, &len) == GIMG_OK) {
            if (gimg_decode_memory(buf, len, &back) == GIMG_OK) {
                CHECK(back.data[0] == 255 && back.data[1] == 255, "over maxval: %u %u",
                      back.data[0], back.data[1]);
                gimg_image_free(&back);
            }
            free(buf);
        }
        gimg_take_losses(NULL);
        gimg_image_free(&im);
    }
}

/* What gimg writes: P5/P6 with maxval 255 or 65535 and 16-bit samples
 * big-endian; P7 with the TUPLTYPE of its channels; PFM little-endian
 * (scale -1.0) with the bottom row first. */
static void test_pnm_written_bytes(void)
{
    gimg_image im;
    unsigned char *buf;
    size_t len;
    if (gimg_image_alloc(&im, 2, 2, 1, GIMG_U16) == GIMG_OK) {
        uint16_t v[4] = { 0x0102, 0xA0B0, 0xFFFF, 0x0001 };
        memcpy(im.data, v, sizeof v);
        if (encode(&im, GIMG_FMT_PNM, &buf, &len) == GIMG_OK) {
            static const char want[] = "P5\n2 2\n65535\n\x01\x02\xA0\xB0\xFF\xFF\x00\x01";
            CHECK(len == sizeof want - 1 && memcmp(buf, want, len) == 0,
                  "16-bit P5 is not big-endian behind \"P5\\n2 2\\n65535\\n\"");
            free(buf);
        }
        gimg_image_free(&im);
    }
    static const char *const tupl[5] = { "", "GRAYSCALE", "GRAYSCALE_ALPHA", "RGB", "RGB_ALPHA" };
    for (int c = 1; c <= 4; c++)
        for (int wide = 0; wide < 2; wide++) {
            if (!random_image(&im, 3, 2, c, wide ? GIMG_U16 : GIMG_U8, 7))
                continue;
            char want[160];
            int hl = snprintf(want, sizeof want, "P7\nWIDTH 3\nHEIGHT 2\nDEPTH %d\nMAXVAL %d\n"
                              "TUPLTYPE %s\nENDHDR\n", c, wide ? 65535 : 255, tupl[c]);
            if (encode(&im, GIMG_FMT_PAM, &buf, &len) == GIMG_OK) {
                CHECK(len == (size_t)hl + 6 * (size_t)c * (wide ? 2 : 1) &&
                      memcmp(buf, want, (size_t)hl) == 0, "PAM header for %d channels: %.*s", c,
                      (int)(len < 100 ? len : 100), buf);
                if (wide && len > (size_t)hl + 1)
                    CHECK(buf[hl] == im.data[1] && buf[hl + 1] == im.data[0],
                          "16-bit PAM not big-endian");
                free(buf);
            }
            if (c == 1 || c == 3) {
                snprintf(want, sizeof want, "P%c\n3 2\n%d\n", c == 1 ? '5' : '6',
                         wide ? 65535 : 255);
                if (encode(&im, GIMG_FMT_PNM, &buf, &len) == GIMG_OK) {
                    CHECK(memcmp(buf, want, strlen(want)) == 0, "PNM header: %.*s",
                          (int)strlen(want), buf);
                    free(buf);
                }
            }
            gimg_image_free(&im);
        }
    if (gimg_image_alloc(&im, 2, 3, 1, GIMG_F32) == GIMG_OK) {
        const float v[6] = { 1.0f, 2.0f, 3.0f, 4.0f, 5.0f, -6.5f };
        memcpy(im.data, v, sizeof v);
        if (encode(&im, GIMG_FMT_PFM, &buf, &len) == GIMG_OK) {
            static const char head[] = "Pf\n2 3\n-1.0\n";
            size_t hl = sizeof head - 1;
            CHECK(len == hl + 24 && memcmp(buf, head, hl) == 0, "PFM header: %.*s", (int)hl, buf);
            /* Bottom row (5, -6.5) first, then (3, 4), then (1, 2); little-endian. */
            static const float order[6] = { 5.0f, -6.5f, 3.0f, 4.0f, 1.0f, 2.0f };
            for (int i = 0; i < 6 && len == hl + 24; i++) {
                const unsigned char *q = buf + hl + 4 * i;
                uint32_t bits = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 |
                                (uint32_t)q[3] << 24;
                float f;
                memcpy(&f, &bits, 4);
                CHECK(f == order[i], "PFM sample %d on file is %g, expected %g", i, f, order[i]);
            }
            free(buf);
        }
        gimg_image_free(&im);
    }
}

/* PFM by hand: rows bottom to top; scale < 0 little-endian, > 0
 * big-endian, magnitude ignored; a zero or non-numeric scale refused. */
/* Writes n bytes to a file of the scratch directory and maps it as the
 * tools read it (gimg_slurp); 1 if done. */
static int slurp_bytes(const char *name, const void *bytes, size_t n, unsigned char **buf,
                       size_t *len)
{
    const char *path = path_in_dir(name);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(bytes, 1, n, f) == n;
    ok = f && fclose(f) == 0 && ok;
    CHECK(ok, "writing %s", path);
    if (!ok)
        return 0;
    gimg_status st = gimg_slurp(path, buf, len);
    CHECK(st == GIMG_OK, "slurp %s: %s", name, gimg_last_error());
    return st == GIMG_OK;
}

/* gimg_decode_in_place: 8-bit binary PNM and PAM files become images over
 * the file's own mapping, equal to their decoding (header comments, maxval
 * below 255 kept, odd sizes); the others decode as before and leave the
 * buffer to the caller; the file stays as it was when the image is
 * written to (copy on write); gimg_image_free unmaps it (valgrind and ASan
 * see a leak or a double unmap otherwise). */
static void test_pnm_in_place(void)
{
    static const struct {
        const char *what;
        gimg_format f;
        int w, h, c;
        gimg_sample s;
        unsigned maxval;
        int kept;
    } cases[] = {
        {"P6 RGB", GIMG_FMT_PNM, 37, 11, 3, GIMG_U8, 0, 1},
        {"P5 gray", GIMG_FMT_PNM, 1, 1, 1, GIMG_U8, 0, 1},
        {"P5 gray maxval 100", GIMG_FMT_PNM, 13, 7, 1, GIMG_U8, 100, 1},
        {"P7 RGBA", GIMG_FMT_PAM, 5, 9, 4, GIMG_U8, 0, 1},
        {"P7 gray+alpha", GIMG_FMT_PAM, 8, 3, 2, GIMG_U8, 0, 1},
        {"P6 16-bit", GIMG_FMT_PNM, 6, 4, 3, GIMG_U16, 0, 0},
        {"PFM", GIMG_FMT_PFM, 6, 4, 3, GIMG_F32, 0, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        gimg_image src, want, got;
        unsigned char *file = NULL, *buf = NULL;
        size_t file_len = 0, len = 0;
        int kept = -1;
        if (!random_image(&src, cases[k].w, cases[k].h, cases[k].c, cases[k].s, 40 + k))
            continue;
        if (cases[k].maxval) {
            for (size_t i = 0; i < (size_t)src.height * src.stride_bytes; i++)
                src.data[i] %= cases[k].maxval + 1;
            src.maxval = cases[k].maxval;
        }
        gimg_write_opts o;
        gimg_write_opts_init(&o);
        CHECK(gimg_encode(&src, cases[k].f, &o, &file, &file_len) == GIMG_OK, "%s: encode: %s",
              cases[k].what, gimg_last_error());
        if (!file || !slurp_bytes("in-place", file, file_len, &buf, &len)) {
            free(file);
            gimg_image_free(&src);
            continue;
        }
        CHECK(gimg_decode_page(buf, len, NULL, &want) == GIMG_OK, "%s", gimg_last_error());
        CHECK(gimg_decode_in_place(buf, len, NULL, &got, &kept) == GIMG_OK, "%s: %s",
              cases[k].what, gimg_last_error());
        CHECK(kept == cases[k].kept, "%s: kept %d", cases[k].what, kept);
        images_equal(&got, &want, cases[k].what);
        CHECK(got.maxval == want.maxval, "%s: maxval %u, decoding %u", cases[k].what, got.maxval,
              want.maxval);
        if (kept == 1) {
            CHECK(got.data > buf && got.data + got.stride_bytes * got.height <= buf + len &&
                      got.mapping == buf,
                  "%s: not a view of the file's mapping", cases[k].what);
            got.data[0] ^= 0xff; /* the image's own copy of that page */
            gimg_image_free(&got);
            unsigned char *again = NULL;
            size_t again_len = 0;
            CHECK(gimg_slurp(path_in_dir("in-place"), &again, &again_len) == GIMG_OK &&
                      again_len == file_len && !memcmp(again, file, file_len),
                  "%s: writing to the image changed the file", cases[k].what);
            gimg_slurp_free(again, again_len);
        } else {
            CHECK(got.mapping == NULL, "%s: a mapping without keeping it", cases[k].what);
            gimg_image_free(&got);
            gimg_slurp_free(buf, len);
        }
        gimg_image_free(&want);
        gimg_image_free(&src);
        free(file);
    }

    /* Files the view leaves to the decoder, which then says what it says
     * of them: comments in the header (viewed), a sample past the maxval,
     * a raster cut short, a bitmap, a plain PNM. */
    static const struct {
        const char *what;
        const char *bytes;
        size_t n;
        int kept;
        gimg_status st;
    } files[] = {
        {"comments", "P6# c\n2 # w\n1\n#m\n255\n\x01\x02\x03\xfd\xfe\xff", 27, 1, GIMG_OK},
        {"sample past maxval", "P5\n2 1\n100\n\x05\x65", 13, 0, GIMG_E_FORMAT},
        {"cut short", "P6\n2 2\n255\n\x01\x02\x03\x04\x05", 16, 0, GIMG_E_FORMAT},
        {"bitmap", "P4\n8 1\n\xa5", 8, 0, GIMG_OK},
        {"plain", "P2\n2 1\n255\n7 9\n", 15, 0, GIMG_OK},
    };
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        unsigned char *buf = NULL;
        size_t len = 0;
        gimg_image got, want;
        int kept = -1;
        if (!slurp_bytes("in-place-file", files[k].bytes, files[k].n, &buf, &len))
            continue;
        const gimg_status want_st = gimg_decode_page(buf, len, NULL, &want);
        const gimg_status st = gimg_decode_in_place(buf, len, NULL, &got, &kept);
        CHECK(st == files[k].st && want_st == files[k].st, "%s: %d (decoding %d): %s",
              files[k].what, (int)st, (int)want_st, gimg_last_error());
        CHECK(kept == files[k].kept, "%s: kept %d", files[k].what, kept);
        if (!st && !want_st)
            images_equal(&got, &want, files[k].what);
        gimg_image_free(&got);
        gimg_image_free(&want);
        if (kept != 1)
            gimg_slurp_free(buf, len);
    }
}

static void test_pfm_read(void)
{
    /* 2x2 gray: top row (1, 2), bottom row (3, 4); file has 3 4 1 2. */
    static const float top_first[4] = { 1.0f, 2.0f, 3.0f, 4.0f };
    static const float file_order[4] = { 3.0f, 4.0f, 1.0f, 2.0f };
    static const char *const scales[] = { "-1.0", "1.0", "-0.003", "250", "-1e3", "+2" };
    for (size_t si = 0; si < sizeof scales / sizeof scales[0]; si++) {
        int little = scales[si][0] == '-';
        unsigned char buf[64];
        int hl = sprintf((char *)buf, "Pf\n2 2\n%s\n", scales[si]);
        for (int i = 0; i < 4; i++) {
            uint32_t bits;
            memcpy(&bits, &file_order[i], 4);
            for (int b = 0; b < 4; b++)
                buf[hl + 4 * i + b] = (unsigned char)(bits >> (little ? 8 * b : 8 * (3 - b)));
        }
        gimg_image im;
        gimg_status st = gimg_decode_memory(buf, (size_t)hl + 16, &im);
        CHECK(st == GIMG_OK, "scale %s: %s", scales[si], gimg_last_error());
        if (st)
            continue;
        CHECK(im.sample == GIMG_F32 && im.channels == 1 && im.width == 2 && im.height == 2,
              "scale %s: layout", scales[si]);
        for (int i = 0; i < 4 && im.sample == GIMG_F32; i++)
            CHECK(((const float *)im.data)[i] == top_first[i], "scale %s (%s-endian): sample %d "
                  "is %g, expected %g", scales[si], little ? "little" : "big", i,
                  ((const float *)im.data)[i], top_first[i]);
        gimg_image_free(&im);
    }
    /* RGB, big-endian: one pixel per row, two rows. */
    static const char pf[] = "PF\n1 2\n1\n\x40\x40\x00\x00\x40\x80\x00\x00\x40\xa0\x00\x00"
                             "\x3f\x80\x00\x00\x40\x00\x00\x00\x3f\x00\x00\x00";
    gimg_image im;
    CHECK(DECODE(pf, &im) == GIMG_OK, "PF: %s", gimg_last_error());
    if (im.data) {
        static const float want[6] = { 1.0f, 2.0f, 0.5f, 3.0f, 4.0f, 5.0f };
        CHECK(im.channels == 3 && memcmp(im.data, want, sizeof want) == 0,
              "PF big-endian RGB, bottom row first: got %g %g %g / %g %g %g",
              ((float *)im.data)[0], ((float *)im.data)[1], ((float *)im.data)[2],
              ((float *)im.data)[3], ((float *)im.data)[4], ((float *)im.data)[5]);
        gimg_image_free(&im);
    }
    CHECK(DECODE("Pf\n1 1\n0.0\n\0\0\0\0", &im) == GIMG_E_FORMAT, "scale 0 accepted");
    CHECK(DECODE("Pf\n1 1\nabc\n\0\0\0\0", &im) == GIMG_E_FORMAT, "scale abc accepted");
    CHECK(DECODE("Pf\n1 1\nnan\n\0\0\0\0", &im) == GIMG_E_FORMAT, "scale nan accepted");
    CHECK(DECODE("Pf\n1 1\n-1\n\0\0\0", &im) == GIMG_E_FORMAT, "short PFM raster accepted");
}

static void test_pam_tupltypes(void)
{
    static const struct {
        const char *header;   /* after "P7\nWIDTH 2\nHEIGHT 1\n" */
        int ok, channels;
    } cases[] = {
        { "DEPTH 1\nMAXVAL 255\nTUPLTYPE GRAYSCALE\nENDHDR\n", 1, 1 },
        { "DEPTH 2\nMAXVAL 255\nTUPLTYPE GRAYSCALE_ALPHA\nENDHDR\n", 1, 2 },
        { "DEPTH 3\nMAXVAL 255\nTUPLTYPE RGB\nENDHDR\n", 1, 3 },
        { "DEPTH 4\nMAXVAL 255\nTUPLTYPE RGB_ALPHA\nENDHDR\n", 1, 4 },
        { "DEPTH 1\nMAXVAL 255\nENDHDR\n", 1, 1 },                          /* none */
        { "DEPTH 4\nMAXVAL 255\nTUPLTYPE CMYK\nENDHDR\n", 1, 4 },           /* unknown */
        { "# comment\nDEPTH 3\n\nMAXVAL 255\n  # indented\nTUPLTYPE RGB\nENDHDR\n", 1, 3 },
        { "DEPTH 3\r\nMAXVAL 255\r\nTUPLTYPE RGB\r\nENDHDR\r\n", 1, 3 },   /* CRLF */
        { "DEPTH 3\nMAXVAL 255\nTUPLTYPE GRAYSCALE\nENDHDR\n", 0, 0 },     /* disagrees */
        { "DEPTH 1\nMAXVAL 255\nTUPLTYPE RGB_ALPHA\nENDHDR\n", 0, 0 },
        { "DEPTH 5\nMAXVAL 255\nENDHDR\n", 0, 0 },
        { "DEPTH 0\nMAXVAL 255\nENDHDR\n", 0, 0 },
        { "MAXVAL 255\nENDHDR\n", 0, 0 },                                   /* no DEPTH */
        { "DEPTH 1\nENDHDR\n", 0, 0 },                                      /* no MAXVAL */
        { "DEPTH 1\nMAXVAL 255\nCOLORS 3\nENDHDR\n", 0, 0 },                /* unknown key */
        { "DEPTH 1\nMAXVAL 255\nTUPLTYPE GRAYSCALE\n", 0, 0 },             /* no ENDHDR */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[256];
        int hl = snprintf(buf, sizeof buf, "P7\nWIDTH 2\nHEIGHT 1\n%s", cases[i].header);
        memset(buf + hl, 0x40, 8);   /* room for 2 pixels of up to 4 channels */
        gimg_image im;
        gimg_status st = gimg_decode_memory((unsigned char *)buf, (size_t)hl + 8, &im);
        if (cases[i].ok)
            CHECK(st == GIMG_OK && im.channels == cases[i].channels && im.sample == GIMG_U8,
                  "case %zu: status %d (%s), %d channels", i, st, gimg_last_error(), im.channels);
        else
            CHECK(st == GIMG_E_FORMAT, "case %zu accepted: %s", i, cases[i].header);
        gimg_image_free(&im);
    }
    /* BLACKANDWHITE is maxval 1 with 0 black (the opposite of PBM's bits):
     * kept as it is, samples 0 and 1 with maxval 1; alpha alike. */
    gimg_image im;
    static const char bw[] = "P7\nWIDTH 3\nHEIGHT 1\nDEPTH 1\nMAXVAL 1\nTUPLTYPE BLACKANDWHITE\n"
                             "ENDHDR\n\x00\x01\x00";
    CHECK(DECODE(bw, &im) == GIMG_OK, "BLACKANDWHITE: %s", gimg_last_error());
    expect_u8(&im, 1, (const uint8_t[]){ 0, 1, 0 }, 3, "BLACKANDWHITE");
    CHECK(im.maxval == 1, "BLACKANDWHITE: maxval %u", im.maxval);
    gimg_image_free(&im);
    static const char bwa[] = "P7\nWIDTH 2\nHEIGHT 1\nDEPTH 2\nMAXVAL 1\n"
                              "TUPLTYPE BLACKANDWHITE_ALPHA\nENDHDR\n\x01\x00\x00\x01";
    CHECK(DECODE(bwa, &im) == GIMG_OK, "BLACKANDWHITE_ALPHA: %s", gimg_last_error());
    expect_u8(&im, 2, (const uint8_t[]){ 1, 0, 0, 1 }, 4, "BLACKANDWHITE_ALPHA");
    CHECK(im.maxval == 1, "BLACKANDWHITE_ALPHA: maxval %u", im.maxval);
    gimg_image_free(&im);
    CHECK(DECODE("P7\nWIDTH 1\nHEIGHT 1\nDEPTH 1\nMAXVAL 1\nENDHDR\n\x02", &im) == GIMG_E_FORMAT,
          "sample 2 over maxval 1 accepted");
    /* Several TUPLTYPE lines join with a space ("GRAYSCALE ALPHA" is no
     * known type, so DEPTH decides). */
    static const char two[] = "P7\nWIDTH 1\nHEIGHT 1\nDEPTH 2\nMAXVAL 65535\nTUPLTYPE GRAYSCALE\n"
                              "TUPLTYPE ALPHA\nENDHDR\n\x12\x34\xab\xcd";
    CHECK(DECODE(two, &im) == GIMG_OK, "two TUPLTYPE lines: %s", gimg_last_error());
    expect_u16(&im, 2, (const uint16_t[]){ 0x1234, 0xabcd }, 2, "16-bit PAM, two TUPLTYPEs");
    gimg_image_free(&im);
    CHECK(DECODE("P7 WIDTH 1\n", &im) == GIMG_E_FORMAT, "P7 not on its own line accepted");
}

/* Several images in one file through gimg_read_pnm_stream: each read in
 * turn, without reading into the next, then a clean end. */
static void test_pnm_stream(void)
{
    gimg_image src[4];
    int ok = random_image(&src[0], 5, 4, 3, GIMG_U8, 1) &&
             random_image(&src[1], 3, 7, 2, GIMG_U16, 2) &&
             random_image(&src[2], 4, 2, 3, GIMG_F32, 3);
    if (!ok)
        return;
    static const gimg_format fmt[3] = { GIMG_FMT_PNM, GIMG_FMT_PAM, GIMG_FMT_PFM };
    const char *path = path_in_dir("stream.pnm");
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "%s: %s", path, strerror(errno));
    if (!f)
        return;
    long ends[4];
    for (int i = 0; i < 3; i++) {
        unsigned char *buf;
        size_t len;
        if (encode(&src[i], fmt[i], &buf, &len) == GIMG_OK) {
            fwrite(buf, 1, len, f);
            free(buf);
        }
        ends[i] = ftell(f);
    }
    /* A plain image last, after whitespace, then trailing whitespace. */
    fputs("\n\n P2\n2 1\n1023\n1023 1\n", f);
    ends[3] = ftell(f);
    fputs(" \n\t\n", f);
    fclose(f);
    static const uint16_t plain_want[2] = { 1023, 1 };

    f = fopen(path, "rb");
    CHECK(f != NULL, "%s: %s", path, strerror(errno));
    if (!f)
        return;
    int count = 0;
    for (int guard = 0; guard < 10; guard++) {
        gimg_image im;
        gimg_status st = gimg_read_pnm_stream(f, &im);
        CHECK(st == GIMG_OK, "image %d: %s", count, gimg_last_error());
        if (st || !im.data)
            break;
        char what[32];
        snprintf(what, sizeof what, "stream image %d", count);
        if (count < 3) {
            images_equal(&im, &src[count], what);
            /* Raw rasters: the stream stops right at the image's end. */
            CHECK(ftell(f) == ends[count], "%s: stream at %ld, the image ends at %ld", what,
                  ftell(f), ends[count]);
        } else if (count == 3) {
            expect_u16(&im, 1, plain_want, 2, what);
            CHECK(im.maxval == 1023, "%s: maxval %u", what, im.maxval);
        }
        gimg_image_free(&im);
        count++;
    }
    CHECK(count == 4, "read %d images, expected 4", count);
    gimg_image im;
    CHECK(gimg_read_pnm_stream(f, &im) == GIMG_OK && im.data == NULL, "a second end of stream");
    fclose(f);

    /* Trailing garbage after an image, and a cut second image, are errors
     * (after the first image is returned). */
    static const char *const tails[] = { "garbage", "\nP5\n4 4\n255\n\x01\x02", "\nP9\n" };
    static const char *const msg[] = { "not the start of an image", "truncated", "" };
    for (int t = 0; t < 3; t++) {
        f = fopen(path, "wb");
        unsigned char *buf;
        size_t len;
        if (!f || encode(&src[0], GIMG_FMT_PNM, &buf, &len) != GIMG_OK) {
            CHECK(0, "setup");
            if (f)
                fclose(f);
            continue;
        }
        fwrite(buf, 1, len, f);
        free(buf);
        fputs(tails[t], f);
        fclose(f);
        f = fopen(path, "rb");
        if (!f)
            continue;
        CHECK(gimg_read_pnm_stream(f, &im) == GIMG_OK && im.data, "tail %d: first image: %s", t,
              gimg_last_error());
        gimg_image_free(&im);
        gimg_status st = gimg_read_pnm_stream(f, &im);
        CHECK(st == GIMG_E_FORMAT && im.data == NULL && contains(gimg_last_error(), msg[t]),
              "tail %d: status %d, \"%s\"", t, st, gimg_last_error());
        gimg_image_free(&im);
        fclose(f);
    }
    /* An empty stream is a clean end at once. */
    f = fopen(path, "wb");
    if (f)
        fclose(f);
    f = fopen(path, "rb");
    if (f) {
        CHECK(gimg_read_pnm_stream(f, &im) == GIMG_OK && im.data == NULL, "empty stream");
        fclose(f);
    }
    /* In memory, by contrast, only the first image is read and what
     * follows is ignored (gimg(7): "Only the first image of a file is
     * read"). */
    static const char two[] = "P5\n1 1\n255\nzP5\n1 1\n255\ny";
    CHECK(DECODE(two, &im) == GIMG_OK && im.width == 1 && im.data[0] == 'z',
          "first of two images in memory: %s", gimg_last_error());
    gimg_image_free(&im);
    unlink(path);
    for (int i = 0; i < 3; i++)
        gimg_image_free(&src[i]);
}

/* ----------------------------------------------- the atomic writer (8) */

static void test_write_missing_dir(void)
{
    const char *path = path_in_dir("no-such-dir/out.png");
    gimg_status st = gimg_write_file(path, (const unsigned char *)"x", 1);
    CHECK(st == GIMG_E_IO, "status %d: %s", st, gimg_last_error());
    struct stat sb;
    CHECK(stat(path_in_dir("no-such-dir"), &sb) != 0, "the directory was created");
    CHECK(gimg_write_file("", (const unsigned char *)"x", 1) == GIMG_E_USAGE, "empty path");
    CHECK(gimg_write_file(g_dir, (const unsigned char *)"x", 1) == GIMG_E_IO,
          "a directory as output: %s", gimg_last_error());
    CHECK(leftover_temps(g_dir) == 0, "temporary files left");
}

static void test_write_replaces(void)
{
    const char *path = path_in_dir("replace.bin");
    CHECK(write_raw(path, "old contents, longer than the new", 33), "setup");
    struct stat before, after;
    stat(path, &before);
    CHECK(gimg_write_file(path, (const unsigned char *)"new", 3) == GIMG_OK, "%s",
          gimg_last_error());
    CHECK(file_has(path, "new"), "contents not replaced");
    /* Replaced by rename: a new inode, not the old file rewritten. */
    CHECK(stat(path, &after) == 0 && after.st_ino != before.st_ino,
          "the old file was rewritten in place");
    CHECK(leftover_temps(g_dir) == 0, "temporary files left");
    /* An empty buffer makes an empty file. */
    CHECK(gimg_write_file(path, NULL, 0) == GIMG_OK && stat(path, &after) == 0 &&
          after.st_size == 0, "empty write: %s", gimg_last_error());
    /* Through a symlink: the file it names is replaced, the link stays. */
    const char *lnk = path_in_dir("link.bin");
    CHECK(symlink("replace.bin", lnk) == 0, "symlink: %s", strerror(errno));
    CHECK(gimg_write_file(lnk, (const unsigned char *)"via link", 8) == GIMG_OK, "%s",
          gimg_last_error());
    struct stat ls;
    CHECK(lstat(lnk, &ls) == 0 && S_ISLNK(ls.st_mode), "the symlink was replaced");
    CHECK(file_has(path, "via link"), "the link's target was not written");
    CHECK(leftover_temps(g_dir) == 0, "temporary files left");
    unlink(lnk);
    unlink(path);
}

static void check_failed_write_leaves_file(const char *dir, const char *path, const char *what)
{
    static const char old[] = "the old file";
    unsigned char big[65536];
    memset(big, 'n', sizeof big);
    gimg_status st = gimg_write_file(path, big, sizeof big);
    CHECK(st == GIMG_E_IO, "%s: status %d (%s)", what, st, gimg_last_error());
    CHECK(file_has(path, old), "%s: the existing file changed", what);
    CHECK(leftover_temps(dir) == 0, "%s: a temporary file was left in %s", what, dir);
}

/* A write that cannot happen (a directory the writer may not add to)
 * leaves the existing file as it was and no temporary file. Root ignores
 * directory permissions, so as root this says nothing: skipped. */
static void test_write_readonly_dir(void)
{
    if (geteuid() == 0)
        SKIP("running as root, which ignores directory permissions");
    char dir[600];
    snprintf(dir, sizeof dir, "%s/ro", g_dir);
    char path[700];
    snprintf(path, sizeof path, "%s/keep.png", dir);
    CHECK(mkdir(dir, 0755) == 0 && write_raw(path, "the old file", 12), "setup");
    CHECK(chmod(dir, 0555) == 0, "chmod: %s", strerror(errno));
    check_failed_write_leaves_file(dir, path, "read-only directory");
    chmod(dir, 0755);
    unlink(path);
    rmdir(dir);
}

/* A write that fails half-way (over the process's file-size limit, which
 * binds root too): the temporary file is removed and the target kept. */
static void test_write_fails_midway(void)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/fsize", g_dir);
    char path[700];
    snprintf(path, sizeof path, "%s/keep.png", dir);
    CHECK(mkdir(dir, 0755) == 0 && write_raw(path, "the old file", 12), "setup");
    struct rlimit old, lim;
    if (getrlimit(RLIMIT_FSIZE, &old) != 0)
        SKIP("getrlimit failed");
    /* EFBIG instead of SIGXFSZ, which would end the process. */
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = 4096;
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0, "setrlimit: %s", strerror(errno));
    check_failed_write_leaves_file(dir, path, "file size limit");
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, old_handler);
    /* /dev/full is written in place (a device is never replaced) and its
     * ENOSPC is an error. */
    struct stat sb;
    if (stat("/dev/full", &sb) == 0 && S_ISCHR(sb.st_mode)) {
        CHECK(gimg_write_file("/dev/full", (const unsigned char *)"x", 1) == GIMG_E_IO,
              "/dev/full: %s", gimg_last_error());
        CHECK(stat("/dev/full", &sb) == 0 && S_ISCHR(sb.st_mode), "/dev/full replaced!");
    }
    unlink(path);
    rmdir(dir);
}

/* New files get 0666 less the umask, as a file the shell creates. */
static void test_write_umask(void)
{
    static const struct {
        mode_t mask, mode;
    } cases[] = { { 022, 0644 }, { 077, 0600 }, { 002, 0664 } };
    mode_t saved = umask(022);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        umask(cases[i].mask);
        char name[32];
        snprintf(name, sizeof name, "mode-%zu.bin", i);
        const char *path = path_in_dir(name);
        CHECK(gimg_write_file(path, (const unsigned char *)"m", 1) == GIMG_OK, "%s",
              gimg_last_error());
        struct stat sb;
        CHECK(stat(path, &sb) == 0 && (sb.st_mode & 07777) == cases[i].mode,
              "umask %03o: mode %04o, expected %04o", (unsigned)cases[i].mask,
              (unsigned)(sb.st_mode & 07777), (unsigned)cases[i].mode);
        unlink(path);
    }
    umask(saved);
    mode_t now = umask(saved);
    CHECK(now == saved, "umask not restored");
}

/* "-" is standard output; the bytes go there and nothing else does. */
static void test_write_stdout(void)
{
    const char *path = path_in_dir("stdout.bin");
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (saved < 0 || fd < 0)
        SKIP("cannot redirect standard output");
    dup2(fd, STDOUT_FILENO);
    close(fd);
    gimg_status st = gimg_write_file("-", (const unsigned char *)"to stdout\n", 10);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    CHECK(st == GIMG_OK, "%s", gimg_last_error());
    CHECK(file_has(path, "to stdout\n"), "standard output did not get the bytes");
    unlink(path);
}

/* ------------------------------------------------- PNG encoder, large */

/* A photo-like 8-bit image: smooth waves plus seeded noise of +-12 levels,
 * the kind whose PNG goes through png.c's own entropy coder. */
static int photo_image(gimg_image *im, int w, int h, int c, gimg_sample s, uint64_t seed)
{
    if (!smooth_image(im, w, h, c, s))
        return 0;
    uint64_t state = seed;
    for (int y = 0; y < h; y++) {
        unsigned char *row = gimg_row(im, y);
        for (size_t i = 0; i < (size_t)w * (size_t)c; i++) {
            int d = (int)(testimg_next(&state) % 25) - 12;
            if (s == GIMG_U8) {
                int v = row[i] + d;
                row[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            } else {
                int v = ((uint16_t *)row)[i] + d * 257;
                ((uint16_t *)row)[i] = (uint16_t)(v < 0 ? 0 : v > 65535 ? 65535 : v);
            }
        }
    }
    return 1;
}

/* A drawn image: flat bands and a repeated tile, where LZ wins by far. */
static int drawn_image(gimg_image *im, int w, int h, int c)
{
    if (gimg_image_alloc(im, w, h, c, GIMG_U8) != GIMG_OK)
        return 0;
    for (int y = 0; y < h; y++) {
        unsigned char *row = gimg_row(im, y);
        for (int x = 0; x < w; x++)
            for (int k = 0; k < c; k++) {
                unsigned v = (y / 100) % 2 ? (unsigned)(40 * k + 60)
                                           : (unsigned)(((x / 7) ^ (y / 5)) & 3) * 60u + (unsigned)k;
                row[(size_t)x * (size_t)c + (size_t)k] = (uint8_t)v;
            }
    }
    return 1;
}

static void png_exact(const gimg_image *src, int level, const char *what, size_t *size_out)
{
    gimg_write_opts o;
    gimg_write_opts_init(&o);
    o.png_level = level;
    unsigned char *buf;
    size_t len;
    if (gimg_encode(src, GIMG_FMT_PNG, &o, &buf, &len) != GIMG_OK) {
        CHECK(0, "%s, level %d: %s", what, level, gimg_last_error());
        return;
    }
    gimg_image got;
    if (gimg_decode_memory(buf, len, &got) == GIMG_OK) {
        char w2[128];
        snprintf(w2, sizeof w2, "%s, level %d", what, level);
        images_equal(&got, src, w2);
        gimg_image_free(&got);
    } else {
        CHECK(0, "%s, level %d: decode: %s", what, level, gimg_last_error());
    }
    if (size_out)
        *size_out = len;
    free(buf);
}

/* Images of several MB take png.c's paths that small ones do not: the
 * sampled choice between libdeflate and the entropy coder, the entropy
 * coder's segments coded in parallel and joined, runs across blocks. */
static void test_png_large(void)
{
    gimg_image im;
    size_t size = 0;
    if (photo_image(&im, 1500, 1000, 3, GIMG_U8, 71)) {
        png_exact(&im, 0, "photo-like 1500x1000 RGB", NULL);
        png_exact(&im, 1, "photo-like 1500x1000 RGB", NULL);
        png_exact(&im, GIMG_DEFAULT_PNG_LEVEL, "photo-like 1500x1000 RGB", &size);
        CHECK(size > 0 && size < (size_t)1500 * 1000 * 3 * 3 / 4,
              "photo-like image: %zu bytes, not compressed", size);
        gimg_image_free(&im);
    }
    if (drawn_image(&im, 1500, 1000, 4)) {
        png_exact(&im, GIMG_DEFAULT_PNG_LEVEL, "drawn 1500x1000 RGBA", &size);
        CHECK(size > 0 && size < (size_t)1500 * 1000 * 4 / 100,
              "drawn image: %zu bytes, over 1%% of its raw size", size);
        gimg_image_free(&im);
    }
    if (photo_image(&im, 1200, 1000, 2, GIMG_U16, 72)) {
        png_exact(&im, GIMG_DEFAULT_PNG_LEVEL, "photo-like 1200x1000 16-bit gray+alpha", NULL);
        gimg_image_free(&im);
    }
    /* One flat color: runs of zeros across every block boundary. */
    if (gimg_image_alloc(&im, 2000, 1100, 3, GIMG_U8) == GIMG_OK) {
        memset(im.data, 0x5a, im.stride_bytes * (size_t)im.height);
        png_exact(&im, 1, "flat 2000x1100 RGB", &size);
        CHECK(size > 0 && size < 40000, "flat image: %zu bytes", size);
        gimg_image_free(&im);
    }
}

/* Encoders on several threads at once, each with its own level, give the
 * same files as one at a time (nothing in the writers is shared). */
typedef struct {
    gimg_image im;
    int level;
    unsigned char *buf[2];
    size_t len[2];
    gimg_status st;
} enc_job;

static void *enc_thread(void *arg)
{
    enc_job *j = arg;
    gimg_write_opts o;
    gimg_write_opts_init(&o);
    o.png_level = j->level;
    j->st = gimg_encode(&j->im, GIMG_FMT_PNG, &o, &j->buf[1], &j->len[1]);
    return NULL;
}

static void test_png_threads(void)
{
    enum { N = 4 };
    enc_job job[N];
    memset(job, 0, sizeof job);
    static const int levels[N] = { 0, 3, 6, 9 };
    for (int t = 0; t < N; t++) {
        if (!photo_image(&job[t].im, 640, 400 + 16 * t, 1 + t, t % 2 ? GIMG_U16 : GIMG_U8,
                         (uint64_t)t + 90))
            return;
        job[t].level = levels[t];
        gimg_write_opts o;
        gimg_write_opts_init(&o);
        o.png_level = levels[t];
        CHECK(gimg_encode(&job[t].im, GIMG_FMT_PNG, &o, &job[t].buf[0], &job[t].len[0]) ==
                  GIMG_OK, "serial encode: %s", gimg_last_error());
    }
    pthread_t th[N];
    int started[N];
    for (int t = 0; t < N; t++)
        started[t] = pthread_create(&th[t], NULL, enc_thread, &job[t]) == 0;
    for (int t = 0; t < N; t++) {
        if (started[t])
            pthread_join(th[t], NULL);
        else
            enc_thread(&job[t]);
        CHECK(job[t].st == GIMG_OK, "thread %d: status %d", t, job[t].st);
        CHECK(job[t].buf[0] && job[t].buf[1] && job[t].len[0] == job[t].len[1] &&
                  memcmp(job[t].buf[0], job[t].buf[1], job[t].len[0]) == 0,
              "thread %d (level %d): concurrent output differs from serial", t, job[t].level);
        free(job[t].buf[0]);
        free(job[t].buf[1]);
        gimg_image_free(&job[t].im);
    }
}

/* ---------------------------------------- signals, same path, ImageMagick */

/* A pending temporary is removed when SIGTERM arrives, and the process
 * still dies of that signal; files not registered stay; a signal ignored
 * before the handlers were installed stays ignored. */
static void test_signal_cleanup(void)
{
    char pending[700], other[700];
    snprintf(pending, sizeof pending, "%s/.sig.png.gimg-abcdef", g_dir);
    snprintf(other, sizeof other, "%s/sig-keep.bin", g_dir);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        SKIP("fork failed");
    if (pid == 0) {
        gimg_install_signal_cleanup();
        if (!write_raw(pending, "partial", 7) || !write_raw(other, "keep", 4) ||
            gimg_io_register_temp(pending) < 0)
            _exit(3);
        raise(SIGTERM);
        _exit(4);   /* not reached if the handler re-raised */
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM,
          "the child did not die of SIGTERM (status 0x%x)", (unsigned)status);
    struct stat sb;
    CHECK(stat(pending, &sb) != 0 && errno == ENOENT, "the pending temporary was left");
    CHECK(file_has(other, "keep"), "an unregistered file was removed");
    unlink(pending);
    unlink(other);

    pid = fork();
    if (pid < 0)
        SKIP("fork failed");
    if (pid == 0) {
        signal(SIGINT, SIG_IGN);
        gimg_install_signal_cleanup();
        raise(SIGINT);
        _exit(0);
    }
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "an ignored SIGINT was not left ignored (status 0x%x)", (unsigned)status);
}

/* Reading a file and writing the result over it: the input buffer (which
 * may map the file) keeps the old bytes, and the new file replaces it. */
static void test_rewrite_same_path(void)
{
    const char *path = path_in_dir("same.png");
    gimg_image a, b, got;
    if (!random_image(&a, 40, 30, 3, GIMG_U8, 301) || !random_image(&b, 33, 21, 4, GIMG_U8, 302))
        return;
    CHECK(gimg_write(path, &a, NULL) == GIMG_OK, "%s", gimg_last_error());
    unsigned char *in;
    size_t in_len;
    if (gimg_slurp(path, &in, &in_len) != GIMG_OK) {
        CHECK(0, "slurp: %s", gimg_last_error());
        return;
    }
    CHECK(gimg_write(path, &b, NULL) == GIMG_OK, "rewrite: %s", gimg_last_error());
    if (gimg_decode_memory(in, in_len, &got) == GIMG_OK) {
        images_equal(&got, &a, "the input read before the rewrite");
        gimg_image_free(&got);
    } else {
        CHECK(0, "the input read before the rewrite no longer decodes: %s", gimg_last_error());
    }
    gimg_slurp_free(in, in_len);
    if (gimg_read(path, &got) == GIMG_OK) {
        images_equal(&got, &b, "the rewritten file");
        gimg_image_free(&got);
    } else {
        CHECK(0, "reading the rewritten file: %s", gimg_last_error());
    }
    CHECK(leftover_temps(g_dir) == 0, "temporary files left");
    unlink(path);
    gimg_image_free(&a);
    gimg_image_free(&b);
}

/* The first of the names found on PATH, or NULL. */
static const char *find_program(const char *const *names)
{
    static char found[1024];
    const char *path = getenv("PATH");
    for (; *names; names++) {
        for (const char *p = path; p && *p;) {
            const char *colon = strchr(p, ':');
            size_t n = colon ? (size_t)(colon - p) : strlen(p);
            snprintf(found, sizeof found, "%.*s/%s", (int)n, p, *names);
            if (n && access(found, X_OK) == 0)
                return found;
            p = colon ? colon + 1 : NULL;
        }
    }
    return NULL;
}

/* Runs ImageMagick: `prog from to` (with options between), 1 on success. */
static int magick(const char *prog, const char *from, const char *opts, const char *to)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' '%s' %s '%s' >/dev/null 2>&1", prog, from, opts, to);
    return system(cmd) == 0;
}

/* Our PNG and PNM files as ImageMagick (libpng, zlib) reads them, and
 * ImageMagick's as we read them, pixel for pixel. */
static void test_imagemagick(void)
{
    static const char *const names[] = { "magick", "convert", NULL };
    const char *prog = find_program(names);
    char cmd[1100];
    /* A `convert` that is not ImageMagick's (a stand-in) does not count. */
    snprintf(cmd, sizeof cmd, "'%s' -version 2>/dev/null | grep -q ImageMagick", prog ? prog : "");
    if (!prog || system(cmd) != 0)
        SKIP("ImageMagick (magick or convert) is not installed");
    char im_prog[1024];
    snprintf(im_prog, sizeof im_prog, "%s", prog);
    static const struct {
        int w, h, c;
        gimg_sample s;
        const char *ours, *opts, *theirs;
        int photo;
    } cases[] = {
        { 61, 37, 3, GIMG_U8, "x-rgb8.png", "-depth 8", "x-rgb8.pam", 0 },
        { 29, 17, 4, GIMG_U16, "x-rgba16.png", "-depth 16", "x-rgba16.pam", 0 },
        { 23, 19, 2, GIMG_U8, "x-ga8.png", "-depth 8", "x-ga8.pam", 0 },
        { 1100, 1000, 3, GIMG_U8, "x-photo.png", "-depth 8", "x-photo.pam", 1 },
        { 41, 13, 1, GIMG_U8, "x-gray8.pgm", "-depth 8 -type Grayscale", "x-gray8.png", 0 },
        { 37, 11, 3, GIMG_U16, "x-rgb16.ppm", "-depth 16", "PNG48:x-rgb16.png", 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gimg_image src, got;
        int ok = cases[i].photo
                     ? photo_image(&src, cases[i].w, cases[i].h, cases[i].c, cases[i].s, 400 + i)
                     : random_image(&src, cases[i].w, cases[i].h, cases[i].c, cases[i].s, 400 + i);
        if (!ok)
            continue;
        char ours[700], theirs[700], target[700];
        snprintf(ours, sizeof ours, "%s/%s", g_dir, cases[i].ours);
        const char *colon = strchr(cases[i].theirs, ':');
        snprintf(target, sizeof target, "%.*s%s/%s", colon ? (int)(colon - cases[i].theirs + 1) : 0,
                 cases[i].theirs, g_dir, colon ? colon + 1 : cases[i].theirs);
        snprintf(theirs, sizeof theirs, "%s/%s", g_dir, colon ? colon + 1 : cases[i].theirs);
        CHECK(gimg_write(ours, &src, NULL) == GIMG_OK, "%s: %s", ours, gimg_last_error());
        if (!magick(im_prog, ours, cases[i].opts, target)) {
            CHECK(0, "ImageMagick failed to convert %s to %s", ours, target);
        } else if (gimg_read(theirs, &got) != GIMG_OK) {
            CHECK(0, "reading ImageMagick's %s: %s", theirs, gimg_last_error());
        } else {
            char what[200];
            snprintf(what, sizeof what, "%s through ImageMagick", cases[i].ours);
            images_equal(&got, &src, what);
            gimg_image_free(&got);
        }
        unlink(ours);
        unlink(theirs);
        gimg_image_free(&src);
    }
}

/* ---------------------------------------------- file handling faults */

/* Replacing a file keeps its permission bits and, as root, its owner and
 * group; it is a new file all the same (a hard link keeps the old bytes). */
static void test_write_keeps_mode_and_owner(void)
{
    const char *path = path_in_dir("kept.bin");
    const char *link2 = path_in_dir("kept-link.bin");
    static const mode_t modes[] = {0600, 0640, 0751, 0444};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        CHECK(write_raw(path, "old", 3) && chmod(path, modes[i]) == 0, "setup");
        CHECK(gimg_write_file(path, (const unsigned char *)"new", 3) == GIMG_OK, "%s",
              gimg_last_error());
        struct stat sb;
        CHECK(stat(path, &sb) == 0 && (sb.st_mode & 07777) == modes[i],
              "mode %04o became %04o", (unsigned)modes[i], (unsigned)(sb.st_mode & 07777));
        CHECK(file_has(path, "new"), "not replaced");
        chmod(path, 0644);
        unlink(path);
    }
    if (geteuid() == 0) {
        const uid_t uid = 65534;
        const gid_t gid = 65534;
        CHECK(write_raw(path, "old", 3) && chown(path, uid, gid) == 0, "chown");
        CHECK(gimg_write_file(path, (const unsigned char *)"new", 3) == GIMG_OK, "%s",
              gimg_last_error());
        struct stat sb;
        CHECK(stat(path, &sb) == 0 && sb.st_uid == uid && sb.st_gid == gid,
              "owner %u:%u, expected %u:%u", (unsigned)sb.st_uid, (unsigned)sb.st_gid,
              (unsigned)uid, (unsigned)gid);
        unlink(path);
    }
    CHECK(write_raw(path, "old", 3) && link(path, link2) == 0, "link");
    CHECK(gimg_write_file(path, (const unsigned char *)"new", 3) == GIMG_OK, "%s",
          gimg_last_error());
    CHECK(file_has(path, "new") && file_has(link2, "old"), "a hard link was not split");
    unlink(path);
    unlink(link2);
}

/* The registry of temporary files grows to hold as many as the workers
 * write at once (-j allows 1024), and the handler removes every one of
 * them on SIGHUP and SIGPIPE as on SIGTERM; SIGXFSZ is ignored. */
static void test_signal_registry_grows(void)
{
    enum { N = 1100 };
    static int slot[N];
    char name[64];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "%s/.r%d.gimg-abcdef", g_dir, i);
        slot[i] = gimg_io_register_temp(name);
        CHECK(slot[i] >= 0, "slot %d: registry full at %d", i, gimg_io_temp_capacity());
        for (int k = 0; k < i && slot[i] >= 0; k += 97)
            CHECK(slot[k] != slot[i], "slots %d and %d share %d", k, i, slot[i]);
    }
    CHECK(gimg_io_temp_capacity() >= N, "capacity %d", gimg_io_temp_capacity());
    for (int i = 0; i < N; i++)
        gimg_io_unregister_temp(slot[i]);
    /* Freed slots are taken again: the registry does not grow without need. */
    const int capacity = gimg_io_temp_capacity();
    for (int i = 0; i < N; i++)
        slot[i] = gimg_io_register_temp("/nonexistent/.x.gimg-abcdef");
    CHECK(gimg_io_temp_capacity() == capacity, "grew from %d to %d", capacity,
          gimg_io_temp_capacity());
    for (int i = 0; i < N; i++)
        gimg_io_unregister_temp(slot[i]);

    static const int sigs[] = {SIGHUP, SIGPIPE};
    for (size_t s = 0; s < sizeof sigs / sizeof sigs[0]; s++) {
        enum { FILES = 300 };
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0)
            SKIP("fork failed");
        if (pid == 0) {
            gimg_install_signal_cleanup();
            struct sigaction sa;
            if (sigaction(SIGXFSZ, NULL, &sa) != 0 || sa.sa_handler != SIG_IGN)
                _exit(5);
            for (int i = 0; i < FILES; i++) {
                snprintf(name, sizeof name, "%s/.s%d.gimg-abcdef", g_dir, i);
                if (!write_raw(name, "partial", 7) || gimg_io_register_temp(name) < 0)
                    _exit(3);
            }
            raise(sigs[s]);
            _exit(4);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == sigs[s],
              "the child did not die of signal %d (status 0x%x)", sigs[s], (unsigned)status);
        int left = 0;
        for (int i = 0; i < FILES; i++) {
            snprintf(name, sizeof name, "%s/.s%d.gimg-abcdef", g_dir, i);
            left += unlink(name) == 0;
        }
        CHECK(left == 0, "signal %d left %d of %d temporary files", sigs[s], left, FILES);
    }
}

/* A child that writes len bytes of buf into the FIFO at path, then ends
 * (or dies of SIGPIPE when the reader stops first). */
static pid_t fifo_writer(const char *path, const void *buf, size_t len, int forever)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    signal(SIGPIPE, SIG_DFL);
    int fd = open(path, O_WRONLY);
    if (fd < 0)
        _exit(3);
    do
        if (write(fd, buf, len) < 0)
            _exit(0);
    while (forever);
    _exit(0);
}

/* A stream is refused from its first bytes when they start no image we
 * know, before the rest is read; images through a pipe are still read,
 * and text readers (gimg_slurp_checked) take any content within a bound. */
static void test_slurp_sniffs_streams(void)
{
    unsigned char *buf;
    size_t len;
    CHECK(gimg_slurp("/dev/zero", &buf, &len) == GIMG_E_FORMAT && !buf &&
              strstr(gimg_last_error(), "unrecognised image format"),
          "/dev/zero: %s", gimg_last_error());
    CHECK(gimg_slurp_checked("/dev/zero", (size_t)1 << 20, NULL, NULL, &buf, &len) ==
                  GIMG_E_LIMIT && !buf,
          "a bounded text read of /dev/zero: %s", gimg_last_error());

    CHECK(gimg_check_image_head((const unsigned char *)"P5", 2, 0) == GIMG_OK, "too early");
    CHECK(gimg_check_image_head((const unsigned char *)"hello", 5, 1) == GIMG_E_FORMAT,
          "a short text accepted");
    unsigned char head[GIMG_SNIFF_BYTES] = "8BPS";
    CHECK(gimg_check_image_head(head, sizeof head, 0) == GIMG_E_FORMAT &&
              strstr(gimg_last_error(), "PSD format not supported"),
          "PSD: %s", gimg_last_error());

    const char *fifo = path_in_dir("stream.fifo");
    if (mkfifo(fifo, 0600) != 0)
        SKIP("mkfifo failed");
    /* An image of 2x1 gray through the FIFO: read whole. */
    static const char pgm[] = "P5\n2 1\n255\n\x01\x02";
    pid_t pid = fifo_writer(fifo, pgm, sizeof pgm - 1, 0);
    gimg_image im;
    CHECK(pid > 0 && gimg_read(fifo, &im) == GIMG_OK && im.width == 2 &&
              ((unsigned char *)im.data)[1] == 2,
          "a PGM through a FIFO: %s", gimg_last_error());
    gimg_image_free(&im);
    waitpid(pid, NULL, 0);
    /* Endless text: refused after its first bytes. */
    static const char text[] = "this is not an image, and it never ends ";
    pid = fifo_writer(fifo, text, sizeof text - 1, 1);
    CHECK(pid > 0 && gimg_slurp(fifo, &buf, &len) == GIMG_E_FORMAT &&
              strstr(gimg_last_error(), "unrecognised image format"),
          "endless text through a FIFO: %s", gimg_last_error());
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    unlink(fifo);
}

/* An HDR size beyond an int is refused with the numbers the file states. */
static void test_hdr_stated_size(void)
{
    static const struct {
        const char *res, *want;
    } cases[] = {
        {"-Y 99999999999 +X 10", "HDR image 10x99999999999 exceeds"},
        {"-Y 4294967297 +X 4294967298", "HDR image 4294967298x4294967297 exceeds"},
        {"-Y 16777217 +X 8", "HDR image 8x16777217 exceeds"},
        {"-Y 0 +X 8", "invalid HDR image size 8x0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char file[160];
        int n = snprintf(file, sizeof file, "#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n%s\n",
                         cases[i].res);
        gimg_info info;
        gimg_image im;
        CHECK(gimg_probe_memory((const unsigned char *)file, (size_t)n, &info) != GIMG_OK &&
                  strstr(gimg_last_error(), cases[i].want),
              "%s: probe said '%s'", cases[i].res, gimg_last_error());
        CHECK(gimg_decode_memory((const unsigned char *)file, (size_t)n, &im) != GIMG_OK &&
                  strstr(gimg_last_error(), cases[i].want),
              "%s: decode said '%s'", cases[i].res, gimg_last_error());
    }
}

/* PAM header lines: a NUL inside one, and a size or maxval given twice,
 * are refused; a comment is a line of its own (after a value it is not a
 * number: netpbm 11.01's pamfile refuses "HEIGHT 1 # c" too). */
static void test_pam_header_lines(void)
{
    static const struct {
        const char *lines; /* between "P7\n" and "ENDHDR\n" */
        size_t len;        /* of lines, which may hold a NUL */
        const char *want;  /* NULL: read */
    } cases[] = {
        {"WIDTH 1\nHEIGHT 1\nDEPTH 1\nMAXVAL 255\n", 0, NULL},
        {"# a comment\nWIDTH 1\n  # another\nHEIGHT 1\nDEPTH 1\nMAXVAL 255\n", 0, NULL},
        {"WIDTH 1\nHEIGHT 1\nHEIGHT 2\nDEPTH 1\nMAXVAL 255\n", 0, "HEIGHT given twice"},
        {"WIDTH 1\nWIDTH 1\nHEIGHT 1\nDEPTH 1\nMAXVAL 255\n", 0, "WIDTH given twice"},
        {"WIDTH 1\nHEIGHT 1\nDEPTH 1\nDEPTH 1\nMAXVAL 255\n", 0, "DEPTH given twice"},
        {"WIDTH 1\nHEIGHT 1\nDEPTH 1\nMAXVAL 255\nMAXVAL 1\n", 0, "MAXVAL given twice"},
        {"WIDTH 1\nHEIGHT 1\0junk\nDEPTH 1\nMAXVAL 255\n", 38, "NUL byte in a header line"},
        {"WIDTH 1\nHEIGHT 1 # c\nDEPTH 1\nMAXVAL 255\n", 0, "bad HEIGHT"},
    };
    /* Comment lines without end (a stream of `yes '#'`) are no header;
     * a few thousand of them are. */
    for (int lines = 1000; lines <= 20000; lines += 19000) {
        size_t cap = (size_t)lines * 2 + 64, n = 0;
        unsigned char *many = malloc(cap);
        if (!many)
            continue;
        n += (size_t)sprintf((char *)many, "P7\n");
        for (int i = 0; i < lines; i++, n += 2)
            memcpy(many + n, "#\n", 2);
        n += (size_t)sprintf((char *)many + n, "WIDTH 1\nHEIGHT 1\nDEPTH 1\nMAXVAL 255\nENDHDR\n\x80");
        gimg_image im;
        gimg_status st = gimg_decode_memory(many, n, &im);
        if (lines < 16384)
            CHECK(st == GIMG_OK, "%d comment lines: %s", lines, gimg_last_error());
        else
            CHECK(st == GIMG_E_FORMAT && strstr(gimg_last_error(), "no ENDHDR"),
                  "%d comment lines: %s", lines, st ? gimg_last_error() : "read");
        gimg_image_free(&im);
        free(many);
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned char file[256];
        size_t n = cases[i].len ? cases[i].len : strlen(cases[i].lines);
        memcpy(file, "P7\n", 3);
        memcpy(file + 3, cases[i].lines, n);
        memcpy(file + 3 + n, "ENDHDR\n\x80\x80", 9);
        gimg_image im;
        gimg_status st = gimg_decode_memory(file, 3 + n + 9, &im);
        if (!cases[i].want) {
            CHECK(st == GIMG_OK && im.width == 1 && im.height == 1, "case %zu: %s", i,
                  gimg_last_error());
            gimg_image_free(&im);
        } else {
            CHECK(st == GIMG_E_FORMAT && strstr(gimg_last_error(), cases[i].want),
                  "case %zu: %s, expected '%s'", i, st ? gimg_last_error() : "read",
                  cases[i].want);
        }
    }
}

/* ------------------------------------------------------------------ main */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    chmod(path, 0700);   /* in case a test left a directory read-only */
    remove(path);
    return 0;
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(120);
    if (!mkdtemp(g_dir)) {
        printf("FAIL: io: mkdtemp: %s\n", strerror(errno));
        return 1;
    }

    RUN(test_roundtrip_png);
    RUN(test_roundtrip_jpeg);
    RUN(test_roundtrip_bmp);
    RUN(test_roundtrip_tga);
    RUN(test_roundtrip_hdr);
    RUN(test_roundtrip_pnm);
    RUN(test_roundtrip_pam);
    RUN(test_roundtrip_pfm);
    RUN(test_conversion_boundaries);
    RUN(test_hdr_range);
    RUN(test_encode_options);
    RUN(test_strided_source);
    RUN(test_bmp_transparent_alpha);
    RUN(test_file_roundtrip);
    RUN(test_write_format_override);

    RUN(test_format_from_name);
    RUN(test_format_from_path);
    RUN(test_output_format);
    RUN(test_check_output_name);
    RUN(test_losses);
    RUN(test_format_sniff);

    RUN(test_probe);

    RUN(test_check_size);
    RUN(test_max_pixels_decode);
    RUN(test_huge_headers);
    RUN(test_input_size_limit);

    RUN(test_truncated_pnm);
    RUN(test_truncated_hdr);
    RUN(test_truncated_codecs);

    RUN(test_unsupported_and_unknown);

    RUN(test_pnm_comments_and_plain);
    RUN(test_pnm_maxval);
    RUN(test_pnm_maxval_written);
    RUN(test_maxval_conversions);
    RUN(test_pnm_written_bytes);
    RUN(test_pnm_in_place);
    RUN(test_pfm_read);
    RUN(test_pam_tupltypes);
    RUN(test_pnm_stream);

    RUN(test_write_missing_dir);
    RUN(test_write_replaces);
    RUN(test_write_readonly_dir);
    RUN(test_write_fails_midway);
    RUN(test_write_umask);
    RUN(test_write_stdout);
    RUN(test_signal_cleanup);
    RUN(test_write_keeps_mode_and_owner);
    RUN(test_signal_registry_grows);
    RUN(test_slurp_sniffs_streams);
    RUN(test_hdr_stated_size);
    RUN(test_pam_header_lines);
    RUN(test_rewrite_same_path);
    RUN(test_png_large);
    RUN(test_png_threads);
    RUN(test_imagemagick);

    nftw(g_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return check_summary();
}
