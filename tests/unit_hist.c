/*
 * unit_hist — the CPU histograms (lib/hist.c) against counts made here
 * independently: integer arithmetic on the samples (exact rationals for
 * ranges that do not divide evenly), never the library's slot function.
 * Then the fast backend against the reference on seeded random images of
 * every layout, views into larger images, the luma weights, --range
 * parsing, equalization and plotting.
 */
#include "check.h"
#include "gimg_hist.h"
#include "hist_internal.h"
#include "testimg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const gimg_sample k_samples[] = {GIMG_U8, GIMG_U16, GIMG_F32};

static uint64_t sum_channel(const gimg_hist *h, int c)
{
    uint64_t s = h->below[c] + h->above[c] + h->nan[c];
    for (int b = 0; b < h->bins; b++)
        s += h->counts[(size_t)c * h->bins + b];
    return s;
}

static int same_hist(const gimg_hist *a, const gimg_hist *b)
{
    if (a->channels != b->channels || a->bins != b->bins)
        return 0;
    for (int c = 0; c < a->channels; c++)
        if (a->below[c] != b->below[c] || a->above[c] != b->above[c] || a->nan[c] != b->nan[c])
            return 0;
    return memcmp(a->counts, b->counts, sizeof *a->counts * a->channels * a->bins) == 0;
}

static double sample(const gimg_image *im, int x, int y, int c)
{
    const unsigned char *row = gimg_row(im, y);
    size_t i = (size_t)x * im->channels + c;
    return im->sample == GIMG_U8 ? row[i]
         : im->sample == GIMG_U16 ? ((const uint16_t *)row)[i]
                                  : ((const float *)row)[i];
}

/* Default parameters: 256 bins of the full range. Counted here from the
 * values: v for 8-bit, v >> 8 for 16-bit, floor(256 v) for float (exact:
 * a power-of-two scaling), 1.0 in the last bin. */
static void check_default(gimg_image *im, const char *what)
{
    gimg_hist_params p;
    gimg_hist_default_params(im, &p);
    CHECK(p.bins == 256 && p.lo == 0 && !p.luma);
    gimg_hist h;
    gimg_status st = gimg_hist_compute_cpu(im, &p, &h);
    CHECK(st == GIMG_OK, "%s", gimg_last_error());
    if (st)
        return;
    uint64_t *want = calloc((size_t)im->channels * 256, sizeof *want);
    for (int y = 0; y < im->height; y++)
        for (int x = 0; x < im->width; x++)
            for (int c = 0; c < im->channels; c++) {
                double v = sample(im, x, y, c);
                int b = im->sample == GIMG_U8 ? (int)v
                      : im->sample == GIMG_U16 ? (int)v >> 8
                      : v >= 1 ? 255 : (int)floor((float)v * 256.0f);
                want[c * 256 + b]++;
            }
    CHECK(h.channels == im->channels && h.bins == 256);
    CHECK(memcmp(want, h.counts, sizeof *want * im->channels * 256) == 0,
          "%s: counts differ from the independent count", what);
    for (int c = 0; c < im->channels; c++) {
        CHECK(h.below[c] == 0 && h.above[c] == 0 && h.nan[c] == 0, "%s", what);
        CHECK(sum_channel(&h, c) == (uint64_t)im->width * im->height, "%s", what);
    }
    free(want);
    gimg_hist_free(&h);
}

static void test_default_every_layout(void)
{
    for (int s = 0; s < 3; s++)
        for (int c = 1; c <= 4; c++) {
            gimg_image im;
            CHECK(gimg_image_alloc(&im, 37, 23, c, k_samples[s]) == GIMG_OK);
            testimg_fill_random(&im, 100 + s * 10 + c);
            char what[64];
            snprintf(what, sizeof what, "%d channels, %d-bit", c, 8 * (int)k_samples[s]);
            check_default(&im, what);
            gimg_image_free(&im);
        }
}

static void test_constant_and_two_value(void)
{
    gimg_image im;
    CHECK(gimg_image_alloc(&im, 50, 40, 3, GIMG_U8) == GIMG_OK);
    memset(im.data, 77, im.stride_bytes * im.height);
    gimg_hist_params p;
    gimg_hist_default_params(&im, &p);
    gimg_hist h;
    CHECK(gimg_hist_compute_cpu(&im, &p, &h) == GIMG_OK);
    for (int c = 0; c < 3; c++)
        for (int b = 0; b < 256; b++)
            CHECK(h.counts[c * 256 + b] == (b == 77 ? 2000u : 0u), "c %d b %d", c, b);
    gimg_hist_free(&h);
    /* Two values, in a checkerboard: 1000 each. */
    for (int y = 0; y < 40; y++)
        for (int x = 0; x < 50; x++)
            memset(gimg_row(&im, y) + 3 * x, (x + y) % 2 ? 255 : 0, 3);
    check_default(&im, "two values");
    CHECK(gimg_hist_compute_cpu(&im, &p, &h) == GIMG_OK);
    CHECK(h.counts[0] == 1000 && h.counts[255] == 1000 && h.counts[256 + 255] == 1000);
    gimg_hist_free(&h);
    gimg_image_free(&im);
}

static void test_one_pixel(void)
{
    gimg_image im;
    CHECK(gimg_image_alloc(&im, 1, 1, 4, GIMG_U16) == GIMG_OK);
    uint16_t *px = (uint16_t *)im.data;
    px[0] = 0;
    px[1] = 65535;
    px[2] = 256;
    px[3] = 255;
    gimg_hist_params p;
    gimg_hist_default_params(&im, &p);
    gimg_hist h;
    CHECK(gimg_hist_compute_cpu(&im, &p, &h) == GIMG_OK);
    CHECK(h.counts[0] == 1 && h.counts[256 + 255] == 1 && h.counts[512 + 1] == 1 &&
          h.counts[768 + 0] == 1);
    for (int c = 0; c < 4; c++)
        CHECK(sum_channel(&h, c) == 1);
    gimg_hist_free(&h);
    /* 65536 bins: each value its own bin. */
    p.bins = 65536;
    CHECK(gimg_hist_compute_cpu(&im, &p, &h) == GIMG_OK);
    CHECK(h.counts[0] == 1 && h.counts[65536 + 65535] == 1 && h.counts[2 * 65536 + 256] == 1 &&
          h.counts[3 * 65536 + 255] == 1);
    gimg_hist_free(&h);
    gimg_image_free(&im);
}

/* 8-bit samples, bins and a range [lo_num/4, hi_num/4) that need not divide
 * evenly: bin = floor((4v - lo_num) * bins / (hi_num - lo_num)), in
 * integers. */
static void check_uneven(const gimg_image *im, int bins, long lo_num, long hi_num)
{
    gimg_hist_params p = {bins, lo_num / 4.0, hi_num / 4.0, 0};
    gimg_hist h;
    gimg_status st = gimg_hist_compute_cpu(im, &p, &h);
    CHECK(st == GIMG_OK, "%s", gimg_last_error());
    if (st)
        return;
    uint64_t *want = calloc((size_t)bins, sizeof *want), below = 0, above = 0;
    for (int y = 0; y < im->height; y++)
        for (int x = 0; x < im->width; x++) {
            long v4 = 4 * (long)sample(im, x, y, 0);
            if (v4 < lo_num)
                below++;
            else if (v4 >= hi_num)
                above++;
            else
                want[(v4 - lo_num) * bins / (hi_num - lo_num)]++;
        }
    CHECK(memcmp(want, h.counts, sizeof *want * bins) == 0, "bins %d range [%g, %g)", bins,
          p.lo, p.hi);
    CHECK(h.below[0] == below && h.above[0] == above, "bins %d: below %llu/%llu above %llu/%llu",
          bins, (unsigned long long)h.below[0], (unsigned long long)below,
          (unsigned long long)h.above[0], (unsigned long long)above);
    free(want);
    gimg_hist_free(&h);
}

static void test_uneven_bins_and_ranges(void)
{
    gimg_image im;
    CHECK(gimg_image_alloc(&im, 61, 29, 1, GIMG_U8) == GIMG_OK);
    testimg_fill_random(&im, 5);
    check_uneven(&im, 7, 40, 800);     /* [10, 200) in 7 bins */
    check_uneven(&im, 13, 2, 401);     /* [0.5, 100.25) */
    check_uneven(&im, 1, 0, 1024);     /* one bin */
    check_uneven(&im, 255, 0, 1024);   /* 255 bins of 256 values */
    check_uneven(&im, 1000, 0, 1024);  /* more bins than values */
    check_uneven(&im, 3, -400, 404);   /* [-100, 101) */
    gimg_image_free(&im);
}

static void test_float_nan_inf_edges(void)
{
    gimg_image im;
    CHECK(gimg_image_alloc(&im, 8, 1, 1, GIMG_F32) == GIMG_OK);
    float *f = (float *)im.data;
    const float vals[8] = {NAN, -INFINITY, INFINITY, 0.0f, 1.0f, 0.5f, -0.25f, 1.5f};
    memcpy(f, vals, sizeof vals);
    gimg_hist_params p;
    gimg_hist_default_params(&im, &p);
    CHECK(p.hi == 1);
    gimg_hist h;
    CHECK(gimg_hist_compute_cpu(&im, &p, &h) == GIMG_OK);
    CHECK(h.nan[0] == 1 && h.below[0] == 2 && h.above[0] == 2);
    CHECK(h.counts[0] == 1 && h.counts[255] == 1 && h.counts[128] == 1);
    CHECK(sum_channel(&h, 0) == 8);
    gimg_hist_free(&h);
    /* Four bins over [0, 2]: 0.5 on an edge lands in the bin above it. */
    p.bins = 4;
    p.hi = 2;
    CHECK(gimg_hist_compute_cpu(&im, &p, &h) == GIMG_OK);
    CHECK(h.counts[0] == 1 && h.counts[1] == 1 && h.counts[2] == 1 && h.counts[3] == 1 &&
          h.above[0] == 1 && h.below[0] == 2);
    gimg_hist_free(&h);
    gimg_image_free(&im);
}

static void test_luma_weights(void)
{
    CHECK(GIMG_LUMA_WR + GIMG_LUMA_WG + GIMG_LUMA_WB == 65536);
    /* Gray stays gray, for every 16-bit value; within half a level (plus
     * the weights' rounding) of Rec. 709 otherwise. */
    int gray_ok = 1, close_ok = 1;
    for (uint32_t v = 0; v < 65536; v++)
        gray_ok &= gimg_luma_int(v, v, v) == v;
    uint64_t state = 9;
    for (int i = 0; i < 100000; i++) {
        uint32_t r = testimg_next(&state) & 0xffff, g = testimg_next(&state) & 0xffff,
                 b = testimg_next(&state) & 0xffff;
        double exact = 0.2126 * r + 0.7152 * g + 0.0722 * b;
        close_ok &= fabs(gimg_luma_int(r, g, b) - exact) <= 0.5 + 65535 * 1e-5;
    }
    CHECK(gray_ok, "luma of gray is not the gray value");
    CHECK(close_ok, "luma far from Rec. 709");
    CHECK(gimg_luma_float(1, 1, 1) == 1.0f);
    CHECK(fabsf(gimg_luma_float(1, 0, 0) - 0.2126f) < 1e-7f);
    CHECK(isnan(gimg_luma_float(NAN, 0, 0)));

    /* The luma channel counts each pixel's luma. */
    gimg_image im;
    CHECK(gimg_image_alloc(&im, 19, 7, 4, GIMG_U8) == GIMG_OK);
    testimg_fill_random(&im, 3);
    gimg_hist_params p;
    gimg_hist_default_params(&im, &p);
    p.luma = 1;
    gimg_hist h;
    CHECK(gimg_hist_compute_cpu(&im, &p, &h) == GIMG_OK);
    CHECK(h.channels == 5);
    uint64_t want[256] = {0};
    for (int y = 0; y < 7; y++)
        for (int x = 0; x < 19; x++) {
            const unsigned char *px = gimg_row(&im, y) + 4 * x;
            double exact = 0.2126 * px[0] + 0.7152 * px[1] + 0.0722 * px[2];
            int l = gimg_luma_int(px[0], px[1], px[2]);
            CHECK(fabs(l - exact) < 0.51, "luma %d vs %g", l, exact);
            want[l]++;
        }
    CHECK(memcmp(want, h.counts + 4 * 256, sizeof want) == 0);
    gimg_hist_free(&h);
    gimg_image_free(&im);
}

/* The fast backend equals the reference, on views (stride > row) too. */
static void test_fast_equals_reference(void)
{
    const struct { int bins; double lo, hi; } ranges[][3] = {
        /* per sample type: default-like, shift form, table form */
        {{256, 0, 256}, {64, 0, 256}, {7, 10.5, 200}},
        {{256, 0, 65536}, {65536, 0, 65536}, {1000, -3, 60000.5}},
        {{256, 0, 1}, {10, -0.5, 0.5}, {65536, 0.25, 0.75}},
    };
    uint64_t state = 77;
    for (int s = 0; s < 3; s++)
        for (int c = 1; c <= 4; c++)
            for (int r = 0; r < 3; r++)
                for (int luma = 0; luma <= 1; luma++) {
                    int w = 1 + (int)(testimg_next(&state) % 300),
                        hgt = 1 + (int)(testimg_next(&state) % 300);
                    gimg_image big, view;
                    CHECK(gimg_image_alloc(&big, w + 5, hgt + 2, c, k_samples[s]) == GIMG_OK);
                    testimg_fill_random(&big, testimg_next(&state));
                    if (k_samples[s] == GIMG_F32) {
                        /* Some NaN, infinities and exact edges. */
                        float *f = (float *)big.data;
                        size_t n = big.stride_bytes * big.height / 4;
                        for (int k = 0; k < 50; k++) {
                            float specials[] = {NAN, INFINITY, -INFINITY, 0, 1, 0.5f, 0.75f};
                            f[testimg_next(&state) % n] = specials[k % 7];
                        }
                    }
                    view = big;
                    view.width = w;
                    view.height = hgt;
                    view.data = gimg_row(&big, 1) + 3 * gimg_pixel_bytes(&big);
                    gimg_hist_params p = {ranges[s][r].bins, ranges[s][r].lo, ranges[s][r].hi,
                                          luma};
                    gimg_hist ref, fast;
                    CHECK(gimg_hist_compute_cpu(&view, &p, &ref) == GIMG_OK);
                    CHECK(gimg_hist_compute_fast(&view, &p, &fast) == GIMG_OK);
                    CHECK(same_hist(&ref, &fast), "%d-bit %d ch luma %d, %d bins [%g, %g]: "
                          "fast differs", 8 * (int)k_samples[s], c, luma, p.bins, p.lo, p.hi);
                    for (int k = 0; k < ref.channels; k++)
                        CHECK(sum_channel(&ref, k) == (uint64_t)w * hgt);
                    gimg_hist_free(&ref);
                    gimg_hist_free(&fast);
                    gimg_image_free(&big);
                }
}

/* Big enough for several threads and the replicated counters; constant. */
static void test_fast_large_constant(void)
{
    gimg_image im;
    CHECK(gimg_image_alloc(&im, 1001, 700, 3, GIMG_U8) == GIMG_OK);
    memset(im.data, 200, im.stride_bytes * im.height);
    gimg_hist_params p;
    gimg_hist_default_params(&im, &p);
    p.luma = 1;
    gimg_hist h;
    CHECK(gimg_hist_compute_fast(&im, &p, &h) == GIMG_OK);
    for (int c = 0; c < 4; c++)
        CHECK(h.counts[c * 256 + 200] == 700700u && sum_channel(&h, c) == 700700u);
    gimg_hist_free(&h);
    gimg_image_free(&im);
}

static void test_shift_and_table_agree(void)
{
    /* Every value's slot through the intmap equals gimg_hist_slot_of. */
    const gimg_hist_params ps[] = {{256, 0, 256, 0},   {64, 0, 256, 0},   {256, 0, 65536, 0},
                                   {65536, 0, 65536, 0}, {3, 1, 7, 0},     {100, -50, 350, 0},
                                   {1, 0, 1e9, 0},      {65536, 0.5, 1.5, 0}};
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++)
        for (int s = 0; s < 2; s++) {
            gimg_hist_intmap m;
            CHECK(gimg_hist_intmap_init(k_samples[s], &ps[i], &m) == GIMG_OK);
            int bad = 0;
            for (int v = 0; v < m.lut_size; v++) {
                int want = gimg_hist_slot_of(v, ps[i].lo, ps[i].hi, ps[i].hi - ps[i].lo,
                                             ps[i].bins, 0);
                int got = m.lut ? (int)m.lut[v]
                        : v < m.first ? ps[i].bins + GIMG_HIST_SLOT_BELOW
                        : ((v - m.first) >> m.shift) < ps[i].bins ? (v - m.first) >> m.shift
                                                                  : ps[i].bins + GIMG_HIST_SLOT_ABOVE;
                bad += want != got;
            }
            CHECK(bad == 0, "params %zu sample %d: %d values differ", i, s, bad);
            if (i < 4)
                CHECK(m.use_shift, "params %zu should take the shift form", i);
            gimg_hist_intmap_free(&m);
        }
}

static void test_bad_params(void)
{
    gimg_image im;
    CHECK(gimg_image_alloc(&im, 2, 2, 1, GIMG_U8) == GIMG_OK);
    memset(im.data, 0, im.stride_bytes * 2);
    gimg_hist h;
    gimg_hist_params p = {0, 0, 256, 0};
    CHECK(gimg_hist_compute_cpu(&im, &p, &h) == GIMG_E_USAGE && h.counts == NULL);
    p.bins = 65537;
    CHECK(gimg_hist_compute_cpu(&im, &p, &h) == GIMG_E_USAGE);
    p = (gimg_hist_params){10, 5, 5, 0};
    CHECK(gimg_hist_compute_cpu(&im, &p, &h) == GIMG_E_USAGE);
    gimg_hist_free(&h);  /* zeroed: harmless */
    gimg_image_free(&im);
}

static void test_parse_range(void)
{
    double lo = -7, hi = -7;
    CHECK(gimg_hist_parse_range("0:255", &lo, &hi) == GIMG_OK && lo == 0 && hi == 255);
    CHECK(gimg_hist_parse_range("-1.5:2e3", &lo, &hi) == GIMG_OK && lo == -1.5 && hi == 2000);
    lo = hi = -7;
    const char *bad[] = {"", ":", "1:", ":2", "2:1", "1:1", "a:2", "1:2:3", "1-2", "nan:1",
                         "0:inf", " 1:2", "1:2 ", "0x10:20", "-1e308:1e308"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(gimg_hist_parse_range(bad[i], &lo, &hi) == GIMG_E_USAGE && lo == -7 && hi == -7,
              "'%s' accepted", bad[i]);
    CHECK(strstr(gimg_last_error(), "--range"));
}

/* Samples in a file's own units (gimg_image.maxval): the default
 * histogram counts 0..maxval, one bin per value up to maxval 255, else 256
 * bins of ceil((maxval + 1) / 256) values from 0; the full-range images
 * keep 256 bins over [0, 256) and [0, 65536). */
static void test_maxval_defaults(void)
{
    static const struct {
        gimg_sample s;
        unsigned maxval;
        int bins, width;  /* bins and values a bin, worked out by hand */
    } cases[] = {
        {GIMG_U8, 1, 2, 1},       {GIMG_U8, 100, 101, 1},    {GIMG_U8, 255, 256, 1},
        {GIMG_U16, 31, 32, 1},    {GIMG_U16, 256, 256, 2},   {GIMG_U16, 700, 256, 3},
        {GIMG_U16, 1000, 256, 4}, {GIMG_U16, 1023, 256, 4},  {GIMG_U16, 4095, 256, 16},
        {GIMG_U16, 65534, 256, 256}, {GIMG_U16, 65535, 256, 256},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const unsigned m = cases[i].maxval;
        const int bins = cases[i].bins, width = cases[i].width;
        gimg_image im;
        CHECK(gimg_image_alloc(&im, 67, 31, 2, cases[i].s) == GIMG_OK);
        testimg_fill_maxval(&im, 900 + i, m);
        gimg_hist_params p;
        gimg_hist_default_params(&im, &p);
        CHECK(p.bins == bins && p.lo == 0 && p.hi == (double)bins * width && !p.luma,
              "maxval %u: %d bins over [%g, %g), expected %d over [0, %d)", m, p.bins, p.lo,
              p.hi, bins, bins * width);
        gimg_hist h;
        if (gimg_hist_compute_cpu(&im, &p, &h) != GIMG_OK) {
            CHECK(0, "%s", gimg_last_error());
            gimg_image_free(&im);
            continue;
        }
        uint64_t *want = calloc((size_t)2 * bins, sizeof *want);
        for (int y = 0; y < im.height; y++)
            for (int x = 0; x < im.width; x++)
                for (int c = 0; c < 2; c++)
                    want[c * bins + (int)sample(&im, x, y, c) / width]++;
        CHECK(memcmp(want, h.counts, sizeof *want * 2 * bins) == 0,
              "maxval %u: counts differ from the independent count", m);
        for (int c = 0; c < 2; c++)
            CHECK(h.below[c] == 0 && h.above[c] == 0 && sum_channel(&h, c) == 67u * 31u,
                  "maxval %u: outside counts", m);
        gimg_hist fast;
        CHECK(gimg_hist_compute_fast(&im, &p, &fast) == GIMG_OK && same_hist(&h, &fast),
              "maxval %u: fast differs", m);
        gimg_hist_free(&fast);
        free(want);
        gimg_hist_free(&h);
        gimg_image_free(&im);
    }
}

/* Equalizing an image with a maxval maps onto 0..maxval, by the formula of
 * gimg_hist.h with max the maxval (computed here in long double), and
 * keeps the maxval; --luma alike never passes it. */
static void test_maxval_equalize(void)
{
    gimg_ctx *ctx = testimg_cpu_ctx();
    CHECK(ctx != NULL, "no CPU context");
    if (!ctx)
        return;
    static const struct {
        gimg_sample s;
        unsigned maxval;
    } cases[] = {{GIMG_U16, 4095}, {GIMG_U16, 1023}, {GIMG_U8, 100}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const unsigned m = cases[i].maxval;
        gimg_image im, out;
        CHECK(gimg_image_alloc(&im, 53, 19, 1, cases[i].s) == GIMG_OK);
        testimg_fill_maxval(&im, 950 + i, m);
        /* Squeeze the values into the lower quarter, so that equalizing
         * has something to stretch. */
        for (int y = 0; y < im.height; y++)
            for (int x = 0; x < im.width; x++) {
                unsigned v = (unsigned)sample(&im, x, y, 0) / 4;
                if (im.sample == GIMG_U8)
                    gimg_row(&im, y)[x] = (uint8_t)v;
                else
                    ((uint16_t *)gimg_row(&im, y))[x] = (uint16_t)v;
            }
        if (gimg_hist_equalize(ctx, &im, 0, &out) != GIMG_OK) {
            CHECK(0, "maxval %u: %s", m, gimg_last_error());
            gimg_image_free(&im);
            continue;
        }
        CHECK(out.maxval == m, "maxval %u: equalized maxval %u", m, out.maxval);
        uint64_t *cnt = calloc(m + 1, sizeof *cnt), n = (uint64_t)im.width * im.height;
        for (int y = 0; y < im.height; y++)
            for (int x = 0; x < im.width; x++)
                cnt[(int)sample(&im, x, y, 0)]++;
        uint64_t cdf_min = 0;
        for (unsigned v = 0; v <= m && !cdf_min; v++)
            cdf_min = cnt[v];
        int bad = 0;
        double top = 0;
        for (int y = 0; y < im.height && !bad; y++)
            for (int x = 0; x < im.width && !bad; x++) {
                unsigned v = (unsigned)sample(&im, x, y, 0);
                uint64_t cdf = 0;
                for (unsigned u = 0; u <= v; u++)
                    cdf += cnt[u];
                long double t = (long double)(cdf - cdf_min) / (long double)(n - cdf_min) * m;
                double want = (double)floorl(t + 0.5L), got = sample(&out, x, y, 0);
                top = got > top ? got : top;
                if (got != want) {
                    CHECK(0, "maxval %u: %u became %g, expected %g", m, v, got, want);
                    bad = 1;
                }
            }
        CHECK(top == m, "maxval %u: the brightest equalized value is %g", m, top);
        free(cnt);
        gimg_image_free(&out);
        gimg_image_free(&im);
    }
    /* Luma only: RGB stays within 0..maxval. */
    gimg_image rgb, out;
    CHECK(gimg_image_alloc(&rgb, 31, 7, 3, GIMG_U16) == GIMG_OK);
    testimg_fill_maxval(&rgb, 999, 4095);
    if (gimg_hist_equalize(ctx, &rgb, 1, &out) == GIMG_OK) {
        double top = 0;
        for (int y = 0; y < out.height; y++)
            for (int x = 0; x < out.width * 3; x++)
                top = fmax(top, sample(&out, x / 3, y, x % 3));
        CHECK(top <= 4095 && out.maxval == 4095, "luma: max %g, maxval %u", top, out.maxval);
        gimg_image_free(&out);
    } else {
        CHECK(0, "luma: %s", gimg_last_error());
    }
    gimg_image_free(&rgb);
    gimg_ctx_close(ctx);
}

int main(void)
{
    RUN(test_default_every_layout);
    RUN(test_constant_and_two_value);
    RUN(test_one_pixel);
    RUN(test_uneven_bins_and_ranges);
    RUN(test_float_nan_inf_edges);
    RUN(test_luma_weights);
    RUN(test_fast_equals_reference);
    RUN(test_fast_large_constant);
    RUN(test_shift_and_table_agree);
    RUN(test_bad_params);
    RUN(test_parse_range);
    RUN(test_maxval_defaults);
    RUN(test_maxval_equalize);
    return check_summary();
}
