/*
 * unit_compare — gimg_compare's layouts, pixel counts, SSIM and difference
 * image on the CPU, against computations made here by hand.
 *
 * Rules checked (gimg_stats.h): sizes must match; 8-bit against 16-bit is
 * compared with the 8-bit samples times 257 and reported on the
 * reference's scale; maxvals that are not multiples of each other, and
 * float against integer, are refused; an all-opaque alpha on one side only
 * is left out (the figures equal those without it, bit for bit), a
 * non-opaque one is compared against an opaque alpha added to the other
 * side; gray against RGB is refused unless promoted, and promoted equals
 * comparing RGB images whose three channels are the gray. pixels_differing
 * counts pixels with any channel differing. The difference image equals
 * |a - b| per sample computed here. SSIM: each channel's equals
 * gimg_ssim_sums_ref's sum over count, "all" their mean (scikit-image's
 * rule), NaN under 11 pixels a side; the fast path equals the reference
 * bit for bit.
 *
 * Tolerances: every integer figure exactly; |d| figures after a division
 * by 257 within 1e-15 relative (one rounding each side); nothing else.
 */
#include "gimg.h"
#include "gimg_stats.h"
#include "ssim_internal.h"
#include "testimg.h"
#include "check.h"

#include <math.h>
#include <stdlib.h>

static gimg_ctx *g_cpu;

static unsigned get(const gimg_image *im, int x, int y, int c)
{
    const unsigned char *row = gimg_row(im, y);
    const size_t i = (size_t)x * im->channels + (size_t)c;
    return im->sample == GIMG_U8 ? row[i] : ((const uint16_t *)row)[i];
}

static void put(gimg_image *im, int x, int y, int c, unsigned v)
{
    unsigned char *row = gimg_row(im, y);
    const size_t i = (size_t)x * im->channels + (size_t)c;
    if (im->sample == GIMG_U8)
        row[i] = (unsigned char)v;
    else
        ((uint16_t *)row)[i] = (uint16_t)v;
}

static gimg_image make(int w, int h, int channels, gimg_sample s, uint64_t seed)
{
    gimg_image im;
    if (gimg_image_alloc(&im, w, h, channels, s)) {
        fprintf(stderr, "alloc: %s\n", gimg_last_error());
        exit(1);
    }
    testimg_fill_random(&im, seed);
    return im;
}

/* Both functions, and fast == reference bit for bit. */
static gimg_status compare_both(const gimg_image *ref, const gimg_image *im,
                                const gimg_compare_opts *o, gimg_diff *d)
{
    gimg_diff dr;
    gimg_status st = gimg_compare(g_cpu, ref, im, o, d);
    gimg_status st_ref = gimg_compare_cpu(ref, im, o, &dr);
    CHECK(st == st_ref, "fast %d, reference %d", st, st_ref);
    if (!st && !st_ref)
        CHECK(memcmp(d, &dr, sizeof dr) == 0, "fast and reference figures differ");
    return st;
}

static int same_figures(const gimg_diff *a, const gimg_diff *b)
{
    if (a->channels != b->channels || a->peak != b->peak)
        return 0;
    return memcmp(a->ch, b->ch, sizeof a->ch[0] * (size_t)(a->channels + 1)) == 0;
}

static void test_sizes_and_types(void)
{
    gimg_image a = make(4, 3, 3, GIMG_U8, 1), b = make(3, 4, 3, GIMG_U8, 2);
    gimg_image f = make(4, 3, 3, GIMG_F32, 3);
    gimg_diff d;
    CHECK(gimg_compare(g_cpu, &a, &b, NULL, &d) == GIMG_E_FORMAT &&
              strstr(gimg_last_error(), "3x4") && strstr(gimg_last_error(), "4x3"),
          "size: %s", gimg_last_error());
    CHECK(gimg_compare(g_cpu, &a, &f, NULL, &d) == GIMG_E_FORMAT &&
              strstr(gimg_last_error(), "float"), "float: %s", gimg_last_error());
    /* Maxvals: 1023 against 255 is no multiple; 15 against 255 is (17). */
    gimg_image m = make(4, 3, 3, GIMG_U16, 4);
    testimg_fill_maxval(&m, 5, 1023);
    m.maxval = 1023;
    CHECK(gimg_compare(g_cpu, &a, &m, NULL, &d) == GIMG_E_FORMAT &&
              strstr(gimg_last_error(), "1023"), "maxval 1023: %s", gimg_last_error());
    gimg_image four = make(4, 3, 3, GIMG_U8, 6), full = make(4, 3, 3, GIMG_U8, 7);
    testimg_fill_maxval(&four, 8, 15);
    four.maxval = 15;
    for (int y = 0; y < 3; y++)
        for (int x = 0; x < 4; x++)
            for (int c = 0; c < 3; c++)
                put(&full, x, y, c, get(&four, x, y, c) * 17);
    put(&full, 1, 1, 2, get(&full, 1, 1, 2) ^ 1); /* one sample off by 1 at the 255 scale */
    CHECK(compare_both(&four, &full, NULL, &d) == GIMG_OK, "%s", gimg_last_error());
    CHECK(d.ch[3].differing == 1 && d.peak == 15 && d.adjusted == GIMG_COMPARE_SCALED_REF &&
              fabs(d.ch[3].max_abs - 1.0 / 17) < 1e-15,
          "maxval 15 vs 255: differing %llu peak %g max %g adjusted %u",
          (unsigned long long)d.ch[3].differing, d.peak, d.ch[3].max_abs, d.adjusted);
    gimg_image_free(&a);
    gimg_image_free(&b);
    gimg_image_free(&f);
    gimg_image_free(&m);
    gimg_image_free(&four);
    gimg_image_free(&full);
}

/* 8-bit against 16-bit, either way round, against the 16-bit comparison
 * of the 8-bit image times 257. */
static void test_8_against_16(void)
{
    const int W = 37, H = 23;
    for (int C = 1; C <= 4; C++) {
        gimg_image a8 = make(W, H, C, GIMG_U8, 10 + C), a16 = make(W, H, C, GIMG_U16, 0);
        gimg_image b16 = make(W, H, C, GIMG_U16, 20 + C);
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                for (int c = 0; c < C; c++)
                    put(&a16, x, y, c, get(&a8, x, y, c) * 257);
        gimg_diff d, want, same;
        gimg_compare_opts o = {.ssim = 1};
        CHECK(compare_both(&a16, &b16, &o, &want) == GIMG_OK, "%s", gimg_last_error());
        /* The 16-bit reference: figures in 16-bit units, as want's. */
        CHECK(compare_both(&b16, &a8, &o, &d) == GIMG_OK, "%s", gimg_last_error());
        CHECK(d.adjusted == GIMG_COMPARE_SCALED_IM, "adjusted %u", d.adjusted);
        for (int c = 0; c <= C; c++) {
            CHECK(d.ch[c].differing == want.ch[c].differing &&
                      d.ch[c].pixels_differing == want.ch[c].pixels_differing &&
                      d.ch[c].max_abs == want.ch[c].max_abs && d.ch[c].mse == want.ch[c].mse &&
                      d.ch[c].psnr == want.ch[c].psnr,
                  "C=%d channel %d: 16-bit reference", C, c);
            /* SSIM is symmetric in a and b up to rounding. */
            CHECK(fabs(d.ch[c].ssim - want.ch[c].ssim) < 1e-12, "C=%d ssim %.17g vs %.17g", C,
                  d.ch[c].ssim, want.ch[c].ssim);
        }
        /* The 8-bit reference: |d| on the 8-bit scale, PSNR unchanged. */
        CHECK(compare_both(&a8, &b16, &o, &d) == GIMG_OK, "%s", gimg_last_error());
        CHECK(d.adjusted == GIMG_COMPARE_SCALED_REF && d.peak == 255, "adjusted %u peak %g",
              d.adjusted, d.peak);
        for (int c = 0; c <= C; c++) {
            CHECK(d.ch[c].differing == want.ch[c].differing &&
                      fabs(d.ch[c].max_abs * 257 - want.ch[c].max_abs) <=
                          1e-15 * want.ch[c].max_abs &&
                      fabs(d.ch[c].mse * 257 * 257 - want.ch[c].mse) <= 1e-12 * want.ch[c].mse &&
                      fabs(d.ch[c].psnr - want.ch[c].psnr) < 1e-12 &&
                      d.ch[c].ssim == want.ch[c].ssim,
                  "C=%d channel %d: 8-bit reference: max %.17g (want %.17g/257) psnr %.17g "
                  "(want %.17g)", C, c, d.ch[c].max_abs, want.ch[c].max_abs, d.ch[c].psnr,
                  want.ch[c].psnr);
        }
        /* An 8-bit image against itself times 257: equal. */
        CHECK(compare_both(&a8, &a16, &o, &same) == GIMG_OK && same.ch[C].differing == 0 &&
                  isinf(same.ch[C].psnr) && same.ch[C].ssim == 1,
              "C=%d: a8 vs a8 x 257: differing %llu ssim %.17g", C,
              (unsigned long long)same.ch[C].differing, same.ch[C].ssim);
        gimg_image_free(&a8);
        gimg_image_free(&a16);
        gimg_image_free(&b16);
    }
}

/* Copies the color channels of im (dropping alpha) into a new image. */
static gimg_image without_alpha(const gimg_image *im)
{
    gimg_image out = make(im->width, im->height, im->channels - 1, im->sample, 0);
    for (int y = 0; y < im->height; y++)
        for (int x = 0; x < im->width; x++)
            for (int c = 0; c < out.channels; c++)
                put(&out, x, y, c, get(im, x, y, c));
    return out;
}

static void test_alpha(void)
{
    const int W = 29, H = 17;
    for (int C = 2; C <= 4; C += 2)
        for (int s = 1; s <= 2; s++) {
            const gimg_sample sample = s == 1 ? GIMG_U8 : GIMG_U16;
            const unsigned max = s == 1 ? 255 : 65535;
            gimg_image with = make(W, H, C, sample, 30 + C), other = make(W, H, C - 1, sample, 40);
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++)
                    put(&with, x, y, C - 1, max);
            gimg_image plain = without_alpha(&with);
            gimg_diff d, want;
            gimg_compare_opts o = {.ssim = 1};
            CHECK(compare_both(&plain, &other, &o, &want) == GIMG_OK, "%s", gimg_last_error());
            CHECK(compare_both(&with, &other, &o, &d) == GIMG_OK, "%s", gimg_last_error());
            CHECK(d.adjusted == GIMG_COMPARE_ALPHA_DROPPED && same_figures(&d, &want),
                  "C=%d: opaque alpha (reference): adjusted %u", C, d.adjusted);
            CHECK(compare_both(&other, &with, &o, &d) == GIMG_OK, "%s", gimg_last_error());
            CHECK(d.adjusted == GIMG_COMPARE_ALPHA_DROPPED && d.channels == C - 1,
                  "C=%d: opaque alpha (input): adjusted %u", C, d.adjusted);
            /* One translucent pixel: the alpha channels are compared. */
            put(&with, 3, 5, C - 1, max - 7);
            CHECK(compare_both(&with, &plain, NULL, &d) == GIMG_OK, "%s", gimg_last_error());
            CHECK(d.adjusted == GIMG_COMPARE_ALPHA_ADDED && d.channels == C &&
                      d.ch[C - 1].differing == 1 && d.ch[C - 1].max_abs == 7 &&
                      d.ch[C].pixels_differing == 1 && d.ch[0].differing == 0,
                  "C=%d: translucent: adjusted %u channels %d alpha differing %llu", C,
                  d.adjusted, d.channels, (unsigned long long)d.ch[C - 1].differing);
            gimg_image_free(&with);
            gimg_image_free(&other);
            gimg_image_free(&plain);
        }
}

static void test_promote(void)
{
    const int W = 23, H = 19;
    gimg_image gray = make(W, H, 1, GIMG_U8, 50), rgb = make(W, H, 3, GIMG_U8, 51);
    gimg_image as_rgb = make(W, H, 3, GIMG_U8, 0);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int c = 0; c < 3; c++)
                put(&as_rgb, x, y, c, get(&gray, x, y, 0));
    gimg_diff d, want;
    CHECK(gimg_compare(g_cpu, &rgb, &gray, NULL, &d) == GIMG_E_FORMAT &&
              strstr(gimg_last_error(), "channel") && strstr(gimg_last_error(), "--promote"),
          "no promotion: %s", gimg_last_error());
    gimg_compare_opts o = {.ssim = 1, .promote = 1};
    CHECK(compare_both(&rgb, &as_rgb, &o, &want) == GIMG_OK, "%s", gimg_last_error());
    CHECK(compare_both(&rgb, &gray, &o, &d) == GIMG_OK, "%s", gimg_last_error());
    CHECK(d.adjusted == GIMG_COMPARE_PROMOTED && same_figures(&d, &want), "promoted: %u",
          d.adjusted);
    CHECK(compare_both(&as_rgb, &gray, &o, &d) == GIMG_OK && d.ch[3].differing == 0,
          "gray vs its RGB: differing %llu", (unsigned long long)d.ch[3].differing);
    /* Gray+alpha (translucent) against RGB: RGBA against RGB + opaque alpha. */
    gimg_image ga = make(W, H, 2, GIMG_U8, 52);
    CHECK(compare_both(&rgb, &ga, &o, &d) == GIMG_OK && d.channels == 4 &&
              d.adjusted == (GIMG_COMPARE_ALPHA_ADDED | GIMG_COMPARE_PROMOTED),
          "gray+alpha vs RGB: channels %d adjusted %u", d.channels, d.adjusted);
    gimg_image_free(&gray);
    gimg_image_free(&rgb);
    gimg_image_free(&as_rgb);
    gimg_image_free(&ga);
}

/* pixels_differing against a count made here, and the difference image
 * against |a - b|. */
static void test_pixels_and_diff_image(void)
{
    static const gimg_sample k_samples[] = {GIMG_U8, GIMG_U16, GIMG_F32};
    for (int k = 0; k < 3; k++)
        for (int C = 1; C <= 4; C++) {
            const int W = 31, H = 13;
            gimg_image a = make(W, H, C, k_samples[k], 60 + C), b = make(W, H, C, k_samples[k], 0);
            memcpy(b.data, a.data, b.stride_bytes * H);
            /* Change some samples: pixel (x, y) gets (x * 7 + y) % 5 channels changed. */
            uint64_t want_pixels = 0, want_samples = 0;
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++) {
                    int n = (x * 7 + y) % 5;
                    if (n > C)
                        n = C;
                    want_pixels += n > 0;
                    want_samples += (uint64_t)n;
                    for (int c = 0; c < n; c++) {
                        unsigned char *row = gimg_row(&b, y);
                        size_t i = (size_t)x * C + (size_t)c;
                        if (k_samples[k] == GIMG_F32)
                            ((float *)row)[i] += 0.25f;
                        else
                            put(&b, x, y, c, get(&a, x, y, c) ^ 3);
                    }
                }
            gimg_image diff;
            gimg_compare_opts o = {.diff_image = &diff};
            gimg_diff d;
            CHECK(gimg_compare(g_cpu, &a, &b, &o, &d) == GIMG_OK, "%s", gimg_last_error());
            CHECK(d.ch[C].pixels_differing == want_pixels && d.ch[C].differing == want_samples,
                  "sample %d C=%d: pixels %llu (want %llu) samples %llu (want %llu)",
                  (int)k_samples[k], C, (unsigned long long)d.ch[C].pixels_differing,
                  (unsigned long long)want_pixels, (unsigned long long)d.ch[C].differing,
                  (unsigned long long)want_samples);
            for (int c = 0; c < C; c++)
                CHECK(d.ch[c].pixels_differing == d.ch[c].differing, "channel rows");
            CHECK(isnan(d.ch[C].ssim), "ssim not asked for: %g", d.ch[C].ssim);
            int bad = 0;
            CHECK(diff.width == W && diff.height == H && diff.channels == C &&
                      diff.sample == k_samples[k] && !diff.meta, "diff image layout");
            for (int y = 0; y < H && !bad; y++)
                for (int x = 0; x < W; x++)
                    for (int c = 0; c < C; c++) {
                        size_t i = (size_t)x * C + (size_t)c;
                        if (k_samples[k] == GIMG_F32) {
                            float fa = ((float *)gimg_row(&a, y))[i],
                                  fb = ((float *)gimg_row(&b, y))[i];
                            float want = fa > fb ? fa - fb : fb - fa;
                            float got = ((float *)gimg_row(&diff, y))[i];
                            bad |= !(got == want || (isnan(got) && isnan(want)));
                        } else {
                            unsigned va = get(&a, x, y, c), vb = get(&b, x, y, c);
                            bad |= get(&diff, x, y, c) != (va > vb ? va - vb : vb - va);
                        }
                    }
            CHECK(!bad, "sample %d C=%d: difference image", (int)k_samples[k], C);
            gimg_image diff_ref;
            o.diff_image = &diff_ref;
            gimg_diff dr;
            CHECK(gimg_compare_cpu(&a, &b, &o, &dr) == GIMG_OK &&
                      memcmp(diff.data, diff_ref.data, diff.stride_bytes * H) == 0,
                  "fast and reference difference images differ");
            gimg_image_free(&diff);
            gimg_image_free(&diff_ref);
            gimg_image_free(&a);
            gimg_image_free(&b);
        }
}

static void test_ssim(void)
{
    static const int sizes[][2] = {{11, 11}, {40, 23}, {10, 30}, {64, 7}, {1, 1}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (int C = 1; C <= 4; C++) {
            const int W = sizes[i][0], H = sizes[i][1];
            gimg_image a = make(W, H, C, GIMG_U16, 70 + C), b = make(W, H, C, GIMG_U16, 80 + C);
            gimg_ssim_sums s;
            CHECK(gimg_ssim_sums_ref(&a, &b, 65535, &s) == GIMG_OK, "%s", gimg_last_error());
            gimg_compare_opts o = {.ssim = 1};
            gimg_diff d;
            CHECK(compare_both(&a, &b, &o, &d) == GIMG_OK, "%s", gimg_last_error());
            const int valid = W >= 11 && H >= 11;
            CHECK(s.count == (valid ? (uint64_t)(W - 10) * (H - 10) : 0), "%dx%d count %llu", W,
                  H, (unsigned long long)s.count);
            double mean = 0;
            for (int c = 0; c < C; c++) {
                const double want = valid ? s.sum[c] / (double)s.count : NAN;
                CHECK(d.ch[c].ssim == want || (isnan(want) && isnan(d.ch[c].ssim)),
                      "%dx%d C=%d channel %d: %.17g want %.17g", W, H, C, c, d.ch[c].ssim, want);
                mean += want;
            }
            mean /= C;
            CHECK(d.ch[C].ssim == mean || (isnan(mean) && isnan(d.ch[C].ssim)),
                  "%dx%d C=%d all: %.17g want %.17g", W, H, C, d.ch[C].ssim, mean);
            gimg_image_free(&a);
            gimg_image_free(&b);
        }
}

static void test_thresholds(void)
{
    static const struct {
        const char *expr;
        const char *channel;
        gimg_metric metric;
        gimg_op op;
        double value;
    } good[] = {
        {"psnr<40", "all", GIMG_METRIC_PSNR, GIMG_OP_LT, 40},
        {" red.maxdiff >= 2 ", "red", GIMG_METRIC_MAXDIFF, GIMG_OP_GE, 2},
        {"ssim<0.99", "all", GIMG_METRIC_SSIM, GIMG_OP_LT, 0.99},
        {"alpha.pixels_differing!=0", "alpha", GIMG_METRIC_PIXELS_DIFFERING, GIMG_OP_NE, 0},
        {"mse=1e-3", "all", GIMG_METRIC_MSE, GIMG_OP_EQ, 1e-3},
        {"psnr==inf", "all", GIMG_METRIC_PSNR, GIMG_OP_EQ, INFINITY},
        {"all.mae<=-1", "all", GIMG_METRIC_MAE, GIMG_OP_LE, -1},
        {"gray.differing>5", "gray", GIMG_METRIC_DIFFERING, GIMG_OP_GT, 5},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        gimg_threshold t;
        gimg_status st = gimg_parse_threshold(good[i].expr, &t);
        CHECK(st == GIMG_OK && !strcmp(t.channel, good[i].channel) &&
                  t.metric == good[i].metric && t.op == good[i].op && t.value == good[i].value,
              "'%s': status %d channel %s metric %d op %d value %g (%s)", good[i].expr, st,
              t.channel, t.metric, t.op, t.value, st ? gimg_last_error() : "");
    }
    static const char *const bad[] = {"", "psnr", "psnr<", "<3", "psnr<x", "psnr<3x", "psnr<>3",
                                      "psnr<nan", "median<3", "purple.psnr<3", "red.<3",
                                      "psnr,mse<3", "psnr!3", "red.green.psnr<3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gimg_threshold t;
        CHECK(gimg_parse_threshold(bad[i], &t) == GIMG_E_USAGE && strlen(gimg_last_error()) > 10,
              "'%s' accepted", bad[i]);
    }
    /* Broken: the comparison holds, or the value is NaN. */
    gimg_threshold t;
    gimg_parse_threshold("psnr<40", &t);
    CHECK(gimg_threshold_broken(&t, 39.9) && !gimg_threshold_broken(&t, 40) &&
              !gimg_threshold_broken(&t, INFINITY) && gimg_threshold_broken(&t, NAN),
          "psnr<40");
    gimg_parse_threshold("maxdiff>=2", &t);
    CHECK(gimg_threshold_broken(&t, 2) && !gimg_threshold_broken(&t, 1.999), "maxdiff>=2");
}

int main(void)
{
    if (!(g_cpu = testimg_cpu_ctx()))
        return 1;
    RUN(test_sizes_and_types);
    RUN(test_8_against_16);
    RUN(test_alpha);
    RUN(test_promote);
    RUN(test_pixels_and_diff_image);
    RUN(test_ssim);
    RUN(test_thresholds);
    gimg_ctx_close(g_cpu);
    return check_summary();
}
