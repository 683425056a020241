/*
 * unit_ssim — SSIM's CPU passes (lib/ssim.c) against independent
 * computations:
 *  - the weights against the closed form in long double;
 *  - the reference against a brute-force SSIM: every centre's 11x11 window
 *    summed directly in long double, with the five moments scikit-image
 *    filters (E[a], E[b], E[a^2], E[b^2], E[ab]), the data in the file's
 *    units and C1, C2 from R; awkward sizes (11x11, 12x11, 1000x13, and
 *    under 11 on a side: no centre), 1-4 channels, 8/16-bit and float;
 *  - the backend against the reference bit for bit (memcmp of the sums),
 *    on those sizes, on views with a stride wider than their rows, and at
 *    1, 2 and 3 threads;
 *  - an image against itself: exactly 1 per channel (lib/ssim.c says why
 *    its arithmetic gives exactly 1);
 *  - scale invariance: an 8-bit pair against the same pair x 257 as 16-bit;
 *  - float NaN or infinity: that channel's SSIM is NaN, the others not;
 *  - scikit-image 0.19's structural_similarity (when /usr/bin/python3 has
 *    it; tests/ssim_skimage.py) on photo-like pairs: gray, RGB, RGBA,
 *    8- and 16-bit.
 *
 * Tolerances: 1e-12 relative against the brute force (the reference
 * rounds each moment in double through two passes; its variances lose up
 * to a few digits to cancellation, E[a^2] - mx^2, on smooth content;
 * the largest difference measured is 1.1e-14, printed by the test); 1e-6
 * absolute against scikit-image, the bound (scipy's filters round
 * in another order and filter a^2 and b^2 apart; measured: 1.2e-14,
 * printed by the test).
 */
#include "gimg.h"
#include "gimg_stats.h"
#include "ssim_internal.h"
#include "testimg.h"
#include "check.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <unistd.h>

static const gimg_sample k_samples[] = {GIMG_U8, GIMG_U16, GIMG_F32};

/* Sizes (width, height) of the brute-force and bit-for-bit tests. */
static const int k_sizes[][2] = {{11, 11}, {12, 11}, {17, 9}, {1, 1},   {10, 40},
                                 {23, 31}, {64, 37}, {1000, 13}, {11, 30}};
#define N_SIZES (sizeof k_sizes / sizeof k_sizes[0])

static double rel_err(double a, double b)
{
    if (a == b)
        return 0;
    double m = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
    return fabs(a - b) / m;
}

static double uniform(uint64_t *state)
{
    return (double)(testimg_next(state) >> 11) * 0x1p-53;
}

static double full_range(gimg_sample s)
{
    return s == GIMG_U8 ? 255 : s == GIMG_U16 ? 65535 : 1;
}

static void put(gimg_image *im, int x, int y, int c, double v01)
{
    unsigned char *row = gimg_row(im, y);
    size_t i = (size_t)x * im->channels + c;
    double v = v01 < 0 ? 0 : v01 > 1 ? 1 : v01;
    if (im->sample == GIMG_U8)
        row[i] = (unsigned char)lround(v * 255);
    else if (im->sample == GIMG_U16)
        ((uint16_t *)row)[i] = (uint16_t)lround(v * 65535);
    else
        ((float *)row)[i] = (float)v;
}

static double get(const gimg_image *im, int x, int y, int c)
{
    const unsigned char *row = gimg_row(im, y);
    size_t i = (size_t)x * im->channels + c;
    return im->sample == GIMG_U8 ? row[i] : im->sample == GIMG_U16 ? ((const uint16_t *)row)[i]
                                                                    : ((const float *)row)[i];
}

/* A photo-like picture, 0..1: smooth shading, a disc and a slanted edge,
 * a stripe texture, and grain. */
static void fill_photo(gimg_image *im, uint64_t seed)
{
    uint64_t state = seed;
    for (int y = 0; y < im->height; y++)
        for (int x = 0; x < im->width; x++) {
            double u = (double)x / im->width, v = (double)y / im->height;
            for (int c = 0; c < im->channels; c++) {
                double s = 0.45 + 0.25 * sin(6.1 * u + 1.7 * c) * cos(4.3 * v - 0.9 * c) +
                           0.15 * u * v;
                double dx = u - 0.42, dy = v - 0.55;
                if (dx * dx + dy * dy < 0.06)
                    s += 0.22;
                if (u + 0.3 * v > 0.85 + 0.05 * c)
                    s -= 0.25;
                if ((x / 9 + y / 13) % 7 == 0)
                    s += 0.05;
                s += (uniform(&state) + uniform(&state) - 1) * 0.04;
                put(im, x, y, c, s);
            }
        }
}

/* b: a blurred (3x3 box) and noisier copy of a. */
static void fill_degraded(const gimg_image *a, gimg_image *b, uint64_t seed)
{
    uint64_t state = seed;
    const double top = a->sample == GIMG_F32 ? 1 : full_range(a->sample);
    for (int y = 0; y < a->height; y++)
        for (int x = 0; x < a->width; x++)
            for (int c = 0; c < a->channels; c++) {
                double s = 0;
                int n = 0;
                for (int dy = -1; dy <= 1; dy++)
                    for (int dx = -1; dx <= 1; dx++) {
                        int xx = x + dx, yy = y + dy;
                        if (xx >= 0 && yy >= 0 && xx < a->width && yy < a->height) {
                            s += get(a, xx, yy, c);
                            n++;
                        }
                    }
                s = s / n / top + (uniform(&state) - 0.5) * 0.08;
                put(b, x, y, c, s);
            }
}

static int make_pair(gimg_image *a, gimg_image *b, int w, int h, int C, gimg_sample s,
                     uint64_t seed)
{
    if (gimg_image_alloc(a, w, h, C, s) != GIMG_OK)
        return 0;
    if (gimg_image_alloc(b, w, h, C, s) != GIMG_OK) {
        gimg_image_free(a);
        return 0;
    }
    fill_photo(a, seed);
    fill_degraded(a, b, seed + 1000);
    return 1;
}

/* The closed form g(i) = exp(-i^2 / (2 sigma^2)) / sum, in long double. */
static void closed_form_weights(long double g[GIMG_SSIM_TAPS])
{
    long double sum = 0;
    for (int i = 0; i < GIMG_SSIM_TAPS; i++) {
        long double d = i - GIMG_SSIM_RADIUS;
        g[i] = expl(-(d * d) / (2.0L * 1.5L * 1.5L));
        sum += g[i];
    }
    for (int i = 0; i < GIMG_SSIM_TAPS; i++)
        g[i] /= sum;
}

/* Brute force: per channel, the mean over centres of S from the five
 * moments of each centre's whole 11x11 window, in the images' own units.
 * NAN per channel when there is no centre. */
static void brute_ssim(const gimg_image *a, const gimg_image *b, double range, double ssim[4])
{
    long double g[GIMG_SSIM_TAPS];
    closed_form_weights(g);
    const long double c1 = (0.01L * range) * (0.01L * range);
    const long double c2 = (0.03L * range) * (0.03L * range);
    const int r = GIMG_SSIM_RADIUS;
    for (int c = 0; c < a->channels; c++) {
        long double total = 0;
        long n = 0;
        for (int y = r; y + r < a->height; y++)
            for (int x = r; x + r < a->width; x++) {
                long double mx = 0, my = 0, exx = 0, eyy = 0, exy = 0;
                for (int j = -r; j <= r; j++)
                    for (int i = -r; i <= r; i++) {
                        long double wt = g[i + r] * g[j + r];
                        long double va = get(a, x + i, y + j, c), vb = get(b, x + i, y + j, c);
                        mx += wt * va;
                        my += wt * vb;
                        exx += wt * va * va;
                        eyy += wt * vb * vb;
                        exy += wt * va * vb;
                    }
                long double vx = exx - mx * mx, vy = eyy - my * my, vxy = exy - mx * my;
                total += (2 * mx * my + c1) * (2 * vxy + c2) /
                         ((mx * mx + my * my + c1) * (vx + vy + c2));
                n++;
            }
        ssim[c] = n ? (double)(total / n) : NAN;
    }
}

static double range_of(const gimg_image *im)
{
    return (double)gimg_image_max(im);
}

/* ---------------------------------------------------------------- tests */

static void test_weights(void)
{
    double w[GIMG_SSIM_TAPS];
    long double g[GIMG_SSIM_TAPS];
    gimg_ssim_weights(w);
    closed_form_weights(g);
    long double sum = 0;
    for (int i = 0; i < GIMG_SSIM_TAPS; i++) {
        sum += w[i];
        /* exp of a differently rounded argument, another divisor: a few ulp. */
        CHECK(fabsl(w[i] - g[i]) <= 1e-15L * g[i], "w[%d] = %.17g, closed form %.17Lg", i, w[i],
              g[i]);
        CHECK(w[i] == w[GIMG_SSIM_TAPS - 1 - i], "w[%d] != w[%d]: not symmetric", i,
              GIMG_SSIM_TAPS - 1 - i);
    }
    CHECK(fabsl(sum - 1) <= 1e-15L, "the weights sum to %.17Lg", sum);
    /* The centre and the ends, worked by hand: g(0) / g(5) = exp(25 / 4.5). */
    CHECK(fabs(w[5] / w[0] - exp(25 / 4.5)) <= 1e-12 * exp(25 / 4.5), "w[5] / w[0] = %.17g",
          w[5] / w[0]);
}

static void test_brute_force(void)
{
    double worst = 0;
    for (size_t k = 0; k < N_SIZES; k++)
        for (int C = 1; C <= 4; C++)
            for (size_t t = 0; t < 3; t++) {
                const int w = k_sizes[k][0], h = k_sizes[k][1];
                const gimg_sample s = k_samples[t];
                gimg_image a, b;
                if (!make_pair(&a, &b, w, h, C, s, 7 + k * 31 + (uint64_t)C * 7 + t)) {
                    CHECK(0, "allocation");
                    continue;
                }
                double range = range_of(&a), want[4];
                gimg_ssim_sums sums;
                gimg_status st = gimg_ssim_sums_ref(&a, &b, range, &sums);
                CHECK(st == GIMG_OK, "%s", gimg_last_error());
                uint64_t centres = w >= 11 && h >= 11 ? (uint64_t)(w - 10) * (uint64_t)(h - 10) : 0;
                CHECK(sums.count == centres, "%dx%d: count %llu, expected %llu", w, h,
                      (unsigned long long)sums.count, (unsigned long long)centres);
                brute_ssim(&a, &b, range, want);
                for (int c = 0; c < 4; c++) {
                    if (c >= C || !centres) {
                        CHECK(sums.sum[c] == 0, "%dx%d c%d: sum %g, expected 0", w, h, c,
                              sums.sum[c]);
                        continue;
                    }
                    double got = sums.sum[c] / (double)sums.count, e = rel_err(got, want[c]);
                    worst = e > worst ? e : worst;
                    CHECK(e <= 1e-12, "%dx%d, %d channels, %d bytes, channel %d: %.17g, brute "
                          "force %.17g (relative %.3g)", w, h, C, (int)s, c, got, want[c], e);
                    CHECK(want[c] > 0.2 && want[c] < 0.999, "%dx%d: SSIM %g: the pair is not "
                          "the similar-but-different one it should be", w, h, want[c]);
                }
                gimg_image_free(&a);
                gimg_image_free(&b);
            }
    printf("  largest relative difference to the brute force: %.3g\n", worst);
}

/* Runs both passes and requires the same bits at each thread count. */
static void expect_identical(const gimg_image *a, const gimg_image *b, const char *what)
{
    gimg_ssim_sums ref, fast;
    double range = range_of(a);
    const int threads_before = omp_get_max_threads();
    CHECK(gimg_ssim_sums_ref(a, b, range, &ref) == GIMG_OK, "%s", gimg_last_error());
    for (int threads = 1; threads <= 3; threads++) {
        omp_set_num_threads(threads);
        memset(&fast, 0x55, sizeof fast);
        CHECK(gimg_ssim_sums_fast(a, b, range, &fast) == GIMG_OK, "%s", gimg_last_error());
        CHECK(memcmp(&ref, &fast, sizeof ref) == 0,
              "%s, %dx%d, %d channels, %d bytes, %d threads: fast %.17g %.17g %.17g %.17g "
              "(%llu), ref %.17g %.17g %.17g %.17g (%llu)", what, a->width, a->height,
              a->channels, (int)a->sample, threads, fast.sum[0], fast.sum[1], fast.sum[2],
              fast.sum[3], (unsigned long long)fast.count, ref.sum[0], ref.sum[1], ref.sum[2],
              ref.sum[3], (unsigned long long)ref.count);
    }
    omp_set_num_threads(threads_before);
}

static void test_fast_equals_ref(void)
{
    /* The brute-force sizes, and some with enough rows for several bands
     * and columns for several strips (lib/ssim.c: 256 pixels). */
    static const int more[][2] = {{301, 203}, {150, 97}, {37, 260}, {700, 40}};
    const size_t n_more = sizeof more / sizeof more[0];
    for (size_t k = 0; k < N_SIZES + n_more; k++)
        for (int C = 1; C <= 4; C++)
            for (size_t t = 0; t < 3; t++) {
                const int w = k < N_SIZES ? k_sizes[k][0] : more[k - N_SIZES][0];
                const int h = k < N_SIZES ? k_sizes[k][1] : more[k - N_SIZES][1];
                gimg_image a, b;
                if (!make_pair(&a, &b, w, h, C, k_samples[t], 100 + k * 13 + (uint64_t)C + t)) {
                    CHECK(0, "allocation");
                    continue;
                }
                expect_identical(&a, &b, "whole image");
                gimg_image_free(&a);
                gimg_image_free(&b);
            }
}

/* Views: a region of a larger image whose rows are padded as well. */
static void test_views(void)
{
    const int W = 90, H = 70;
    const gimg_region r = {61, 43, 7, 11};
    for (int C = 1; C <= 4; C++)
        for (size_t t = 0; t < 3; t++) {
            const gimg_sample s = k_samples[t];
            gimg_image a, b, tight_a, tight_b;
            if (!make_pair(&tight_a, &tight_b, W, H, C, s, 500 + (uint64_t)C * 3 + t)) {
                CHECK(0, "allocation");
                continue;
            }
            /* The same pixels, each row followed by 12 bytes of padding
             * (a multiple of every sample's size) filled with garbage. */
            a = tight_a;
            b = tight_b;
            a.stride_bytes = b.stride_bytes = tight_a.stride_bytes + 12;
            a.data = malloc(a.stride_bytes * H);
            b.data = malloc(b.stride_bytes * H);
            if (!a.data || !b.data) {
                CHECK(0, "allocation");
                free(a.data);
                free(b.data);
                gimg_image_free(&tight_a);
                gimg_image_free(&tight_b);
                continue;
            }
            memset(a.data, 0xA5, a.stride_bytes * H);
            memset(b.data, 0x5A, b.stride_bytes * H);
            for (int y = 0; y < H; y++) {
                memcpy(gimg_row(&a, y), gimg_row(&tight_a, y), tight_a.stride_bytes);
                memcpy(gimg_row(&b, y), gimg_row(&tight_b, y), tight_b.stride_bytes);
            }
            gimg_image va, vb;
            gimg_image_view(&a, &r, &va);
            gimg_image_view(&b, &r, &vb);
            expect_identical(&va, &vb, "view");

            /* The view equals a tight copy of its pixels, bit for bit, and
             * the brute force. */
            gimg_image ca, cb;
            if (gimg_image_alloc(&ca, r.width, r.height, C, s) == GIMG_OK &&
                gimg_image_alloc(&cb, r.width, r.height, C, s) == GIMG_OK) {
                for (int y = 0; y < r.height; y++) {
                    memcpy(gimg_row(&ca, y), gimg_row(&va, y), ca.stride_bytes);
                    memcpy(gimg_row(&cb, y), gimg_row(&vb, y), cb.stride_bytes);
                }
                gimg_ssim_sums from_view, from_copy;
                double range = range_of(&va), want[4];
                CHECK(gimg_ssim_sums_fast(&va, &vb, range, &from_view) == GIMG_OK, "fast");
                CHECK(gimg_ssim_sums_ref(&ca, &cb, range, &from_copy) == GIMG_OK, "ref");
                CHECK(memcmp(&from_view, &from_copy, sizeof from_view) == 0,
                      "%d channels, %d bytes: the view's sums differ from its copy's", C,
                      (int)s);
                brute_ssim(&ca, &cb, range, want);
                for (int c = 0; c < C; c++)
                    CHECK(rel_err(from_view.sum[c] / (double)from_view.count, want[c]) <= 1e-12,
                          "view, channel %d: %.17g, brute force %.17g", c,
                          from_view.sum[c] / (double)from_view.count, want[c]);
            } else {
                CHECK(0, "allocation");
            }
            gimg_image_free(&ca);
            gimg_image_free(&cb);
            free(a.data);
            free(b.data);
            gimg_image_free(&tight_a);
            gimg_image_free(&tight_b);
        }
}

/* Sizes below 11 on either side: no centre, count 0 and sums 0 (the
 * caller reports NaN), from both passes. */
static void test_too_small(void)
{
    static const int sizes[][2] = {{10, 10}, {10, 500}, {500, 10}, {1, 1}, {1, 11}, {11, 1}};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (int C = 1; C <= 4; C++) {
            gimg_image a, b;
            if (!make_pair(&a, &b, sizes[k][0], sizes[k][1], C, GIMG_U8, 9 + k)) {
                CHECK(0, "allocation");
                continue;
            }
            gimg_ssim_sums ref, fast;
            memset(&ref, 0x55, sizeof ref);
            memset(&fast, 0x55, sizeof fast);
            CHECK(gimg_ssim_sums_ref(&a, &b, 255, &ref) == GIMG_OK, "ref");
            CHECK(gimg_ssim_sums_fast(&a, &b, 255, &fast) == GIMG_OK, "fast");
            for (int c = 0; c < 4; c++)
                CHECK(ref.sum[c] == 0 && fast.sum[c] == 0, "%dx%d: sums %g %g", sizes[k][0],
                      sizes[k][1], ref.sum[c], fast.sum[c]);
            CHECK(ref.count == 0 && fast.count == 0, "%dx%d: counts %llu %llu", sizes[k][0],
                  sizes[k][1], (unsigned long long)ref.count, (unsigned long long)fast.count);
            gimg_image_free(&a);
            gimg_image_free(&b);
        }
}

/* An image against itself: S is exactly 1 at every centre (the numerator's
 * terms are the denominator's doubled exactly, see lib/ssim.c), so every
 * sum is exactly the count. */
static void test_identical(void)
{
    for (int C = 1; C <= 4; C++)
        for (size_t t = 0; t < 3; t++) {
            gimg_image a, b;
            if (!make_pair(&a, &b, 64, 37, C, k_samples[t], 77 + (uint64_t)C + t)) {
                CHECK(0, "allocation");
                continue;
            }
            gimg_ssim_sums ref, fast;
            double range = range_of(&a);
            CHECK(gimg_ssim_sums_ref(&a, &a, range, &ref) == GIMG_OK, "ref");
            CHECK(gimg_ssim_sums_fast(&b, &b, range, &fast) == GIMG_OK, "fast");
            for (int c = 0; c < C; c++) {
                CHECK(ref.sum[c] / (double)ref.count == 1.0, "%d channels, %d bytes, channel "
                      "%d: SSIM %.17g", C, (int)k_samples[t], c, ref.sum[c] / (double)ref.count);
                CHECK(fast.sum[c] / (double)fast.count == 1.0, "%d channels, %d bytes, channel "
                      "%d: SSIM %.17g (fast)", C, (int)k_samples[t], c,
                      fast.sum[c] / (double)fast.count);
            }
            gimg_image_free(&a);
            gimg_image_free(&b);
        }
}

/* The same picture in 8 and in 16 bits (v * 257): SSIM is scale invariant.
 * Bound 1e-12; lib/ssim.c's correctly rounded v / R makes them equal. */
static void test_scale_invariance(void)
{
    for (int C = 1; C <= 4; C++) {
        gimg_image a8, b8, a16, b16;
        if (!make_pair(&a8, &b8, 57, 41, C, GIMG_U8, 300 + (uint64_t)C)) {
            CHECK(0, "allocation");
            continue;
        }
        if (gimg_image_alloc(&a16, 57, 41, C, GIMG_U16) != GIMG_OK ||
            gimg_image_alloc(&b16, 57, 41, C, GIMG_U16) != GIMG_OK) {
            CHECK(0, "allocation");
            return;
        }
        for (int y = 0; y < 41; y++)
            for (size_t i = 0; i < (size_t)57 * C; i++) {
                ((uint16_t *)gimg_row(&a16, y))[i] = (uint16_t)(gimg_row(&a8, y)[i] * 257);
                ((uint16_t *)gimg_row(&b16, y))[i] = (uint16_t)(gimg_row(&b8, y)[i] * 257);
            }
        gimg_ssim_sums s8, s16, f8, f16;
        CHECK(gimg_ssim_sums_ref(&a8, &b8, 255, &s8) == GIMG_OK, "ref 8");
        CHECK(gimg_ssim_sums_ref(&a16, &b16, 65535, &s16) == GIMG_OK, "ref 16");
        CHECK(gimg_ssim_sums_fast(&a8, &b8, 255, &f8) == GIMG_OK, "fast 8");
        CHECK(gimg_ssim_sums_fast(&a16, &b16, 65535, &f16) == GIMG_OK, "fast 16");
        for (int c = 0; c < C; c++) {
            double v8 = s8.sum[c] / (double)s8.count, v16 = s16.sum[c] / (double)s16.count;
            CHECK(fabs(v8 - v16) <= 1e-12, "channel %d: 8-bit %.17g, 16-bit %.17g", c, v8, v16);
            CHECK(v8 > 0.2 && v8 < 0.999, "channel %d: SSIM %g", c, v8);
            CHECK(f8.sum[c] == s8.sum[c] && f16.sum[c] == s16.sum[c], "channel %d: fast", c);
        }
        /* A smaller data range is another SSIM (C1, C2 shrink). */
        gimg_ssim_sums other;
        CHECK(gimg_ssim_sums_ref(&a16, &b16, 255, &other) == GIMG_OK, "ref, R 255");
        CHECK(other.sum[0] != s16.sum[0], "the data range made no difference");
        gimg_image_free(&a8);
        gimg_image_free(&b8);
        gimg_image_free(&a16);
        gimg_image_free(&b16);
    }
}

/* Float with NaN in channel 1 and an infinity in channel 2 (of 4):
 * those channels give NaN, the others what the brute force gives. */
static void test_float_nan(void)
{
    gimg_image a, b;
    if (!make_pair(&a, &b, 23, 31, 4, GIMG_F32, 4242)) {
        CHECK(0, "allocation");
        return;
    }
    double clean[4];
    brute_ssim(&a, &b, 1, clean);
    ((float *)gimg_row(&a, 3))[7 * 4 + 1] = NAN;
    ((float *)gimg_row(&b, 30))[22 * 4 + 1] = NAN;
    ((float *)gimg_row(&a, 15))[0 * 4 + 2] = INFINITY;
    gimg_ssim_sums ref, fast;
    CHECK(gimg_ssim_sums_ref(&a, &b, 1, &ref) == GIMG_OK, "ref");
    CHECK(gimg_ssim_sums_fast(&a, &b, 1, &fast) == GIMG_OK, "fast");
    for (int c = 0; c < 4; c++) {
        double r = ref.sum[c] / (double)ref.count, f = fast.sum[c] / (double)fast.count;
        if (c == 1 || c == 2) {
            CHECK(isnan(r) && isnan(f), "channel %d: %g %g, expected NaN", c, r, f);
        } else {
            CHECK(rel_err(r, clean[c]) <= 1e-12 && r == f, "channel %d: %.17g %.17g, brute "
                  "force %.17g", c, r, f, clean[c]);
        }
    }
    gimg_image_free(&a);
    gimg_image_free(&b);
}

static void test_refused(void)
{
    gimg_image a, b, c;
    if (!make_pair(&a, &b, 20, 20, 3, GIMG_U8, 1) ||
        gimg_image_alloc(&c, 20, 21, 3, GIMG_U8) != GIMG_OK) {
        CHECK(0, "allocation");
        return;
    }
    gimg_ssim_sums s;
    CHECK(gimg_ssim_sums_fast(&a, &c, 255, &s) == GIMG_E_USAGE, "different sizes accepted");
    CHECK(gimg_ssim_sums_ref(&a, &c, 255, &s) == GIMG_E_USAGE, "different sizes accepted");
    CHECK(gimg_ssim_sums_fast(&a, &b, 0, &s) == GIMG_E_USAGE, "data range 0 accepted");
    CHECK(gimg_ssim_sums_ref(&a, &b, NAN, &s) == GIMG_E_USAGE, "data range NaN accepted");
    CHECK(strlen(gimg_last_error()) > 0, "no message");
    gimg_image_free(&a);
    gimg_image_free(&b);
    gimg_image_free(&c);
}

/* -------------------------------------------------- against scikit-image */

static const char *k_script = "tests/ssim_skimage.py";

static int write_raw(const char *path, const gimg_image *im)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    int ok = 1;
    for (int y = 0; y < im->height; y++)
        ok = ok && fwrite(gimg_row(im, y), gimg_pixel_bytes(im), (size_t)im->width, f) ==
                       (size_t)im->width;
    return fclose(f) == 0 && ok;
}

static void test_skimage(void)
{
    if (access("/usr/bin/python3", X_OK) != 0)
        SKIP("/usr/bin/python3 is not installed");
    if (access(k_script, R_OK) != 0)
        SKIP("tests/ssim_skimage.py not found: run from the repository's root");
    if (system("/usr/bin/python3 -c 'import numpy, skimage.metrics' 2>/dev/null") != 0)
        SKIP("/usr/bin/python3 has no scikit-image");
    char dir[] = "/tmp/unit_ssim.XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    static const int sizes[][2] = {{257, 131}, {640, 480}, {11, 11}};
    static const int channel_counts[] = {1, 3, 4};
    double worst = 0;
    char pa[64], pb[64], cmd[512];
    snprintf(pa, sizeof pa, "%s/a.raw", dir);
    snprintf(pb, sizeof pb, "%s/b.raw", dir);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (size_t n = 0; n < 3; n++)
            for (int bytes = 1; bytes <= 2; bytes++) {
                const int w = sizes[k][0], h = sizes[k][1], C = channel_counts[n];
                gimg_image a, b;
                if (!make_pair(&a, &b, w, h, C, bytes == 1 ? GIMG_U8 : GIMG_U16,
                               900 + k * 10 + n * 2 + (uint64_t)bytes)) {
                    CHECK(0, "allocation");
                    continue;
                }
                double range = range_of(&a);
                gimg_ssim_sums fast;
                CHECK(gimg_ssim_sums_fast(&a, &b, range, &fast) == GIMG_OK, "fast");
                if (!write_raw(pa, &a) || !write_raw(pb, &b)) {
                    CHECK(0, "writing %s", dir);
                } else {
                    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %d %d %d %d %g %s %s",
                             k_script, w, h, C, bytes * 8, range, pa, pb);
                    FILE *p = popen(cmd, "r");
                    int got = 0;
                    double theirs;
                    while (p && got < C && fscanf(p, "%lf", &theirs) == 1) {
                        double ours = fast.sum[got] / (double)fast.count;
                        double d = fabs(ours - theirs);
                        worst = d > worst ? d : worst;
                        CHECK(d <= 1e-6, "%dx%d, %d channels, %d-bit, channel %d: ours %.17g, "
                              "scikit-image %.17g", w, h, C, bytes * 8, got, ours, theirs);
                        CHECK(theirs > 0.2 && theirs < 0.999, "scikit-image's SSIM %g: the "
                              "pair is not similar-but-different", theirs);
                        got++;
                    }
                    int status = p ? pclose(p) : -1;
                    CHECK(got == C && status == 0, "%s: %d values, status %d", cmd, got, status);
                }
                gimg_image_free(&a);
                gimg_image_free(&b);
            }
    unlink(pa);
    unlink(pb);
    rmdir(dir);
    printf("  largest |ours - scikit-image|: %.3g\n", worst);
}

int main(void)
{
    RUN(test_weights);
    RUN(test_brute_force);
    RUN(test_fast_equals_ref);
    RUN(test_views);
    RUN(test_too_small);
    RUN(test_identical);
    RUN(test_scale_invariance);
    RUN(test_float_nan);
    RUN(test_refused);
    RUN(test_skimage);
    return check_summary();
}
