/*
 * unit_stats — gstats' library on the CPU against independent computations:
 * sorted copies of the samples and long double sums, for every channel
 * count, 8/16-bit and float (with NaN and infinities), at awkward widths;
 * extremes (all zeros, all maxima, 1x1); regions and their clipping;
 * percentile parsing and ranks; comparisons with a known perturbation.
 *
 * Tolerances: integer statistics (count, min, max, sum, median,
 * percentiles) exactly; mean 1e-15 and stddev 1e-12 relative (the library
 * rounds once from exact integers, the check computes two-pass in long
 * double); float sums 1e-12 relative; entropy 1e-12 absolute. The fast CPU
 * path must equal the reference bit for bit. Float data far from zero with
 * a small spread (1000 +- 0.01, 1e6 +- 0.5): stddev within 1e-9 of the
 * two-pass long double one (sums of v and v^2 got the third digit wrong).
 */
#include "gimg.h"
#include "gimg_stats.h"
#include "stats_internal.h"
#include "testimg.h"
#include "check.h"

#include <math.h>
#include <stdlib.h>

static const gimg_sample k_samples[] = {GIMG_U8, GIMG_U16, GIMG_F32};

static gimg_ctx *g_cpu;

static double rel_err(double a, double b)
{
    if (a == b)
        return 0;
    double m = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
    return fabs(a - b) / m;
}

/* Equal, NaN included. */
static int same(double a, double b)
{
    return a == b || (isnan(a) && isnan(b));
}

static double sample_at(const gimg_image *im, int x, int y, int c)
{
    const unsigned char *row = gimg_row(im, y);
    size_t i = (size_t)x * im->channels + c;
    return im->sample == GIMG_U8 ? row[i] : im->sample == GIMG_U16 ? ((const uint16_t *)row)[i]
                                                                    : ((const float *)row)[i];
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The independent answer for channel c (or all channels with c < 0). */
typedef struct {
    uint64_t n, nan, inf;
    long double sum, mean, stddev, entropy;
    double min, max, *sorted;
} expected;

static void expect(const gimg_image *im, int c, expected *e)
{
    memset(e, 0, sizeof *e);
    size_t cap = (size_t)im->width * im->height * im->channels;
    e->sorted = malloc(cap * sizeof *e->sorted + 1);
    for (int y = 0; y < im->height; y++)
        for (int x = 0; x < im->width; x++)
            for (int k = 0; k < im->channels; k++) {
                if (c >= 0 && k != c)
                    continue;
                double v = sample_at(im, x, y, k);
                if (isnan(v))
                    e->nan++;
                else if (isinf(v))
                    e->inf++;
                else
                    e->sorted[e->n++] = v == 0 ? 0 : v;
            }
    qsort(e->sorted, e->n, sizeof *e->sorted, cmp_double);
    if (!e->n)
        return;
    e->min = e->sorted[0];
    e->max = e->sorted[e->n - 1];
    for (uint64_t i = 0; i < e->n; i++)
        e->sum += e->sorted[i];
    e->mean = e->sum / e->n;
    long double ss = 0;
    for (uint64_t i = 0; i < e->n; i++)
        ss += (e->sorted[i] - e->mean) * (e->sorted[i] - e->mean);
    e->stddev = sqrtl(ss / e->n);
    for (uint64_t i = 0; i < e->n;) {
        uint64_t j = i;
        while (j < e->n && e->sorted[j] == e->sorted[i])
            j++;
        long double p = (long double)(j - i) / e->n;
        e->entropy -= p * log2l(p);
        i = j;
    }
}

/* The p/q-th percentile's nearest rank, by integer arithmetic. */
static double nearest_rank(const expected *e, uint64_t p, uint64_t q)
{
    uint64_t k = (p * e->n + 100 * q - 1) / (100 * q);
    return e->sorted[(k ? k : 1) - 1];
}

static gimg_stats_opts order_opts(void)
{
    gimg_stats_opts o = {.order = 1};
    const char *ps[] = {"0", "1", "5", "25", "99.9", "100"};
    for (int i = 0; i < 6; i++)
        gimg_parse_percentile("test", ps[i], &o.percentiles[o.n_percentiles++]);
    return o;
}

/* Checks st (computed for im) against the independent answers. */
static void check_stats(const gimg_image *im, const gimg_stats *st, const char *what)
{
    static const uint64_t pct[6][2] = {{0, 1}, {1, 1}, {5, 1}, {25, 1}, {999, 10}, {100, 1}};
    for (int c = 0; c <= im->channels; c++) {
        expected e;
        expect(im, c < im->channels ? c : -1, &e);
        const gimg_channel_stats *s = &st->ch[c];
        CHECK(s->count == e.n && s->nan == e.nan && s->inf == e.inf,
              "%s ch %d: count %llu/%llu/%llu, expected %llu/%llu/%llu", what, c,
              (unsigned long long)s->count, (unsigned long long)s->nan,
              (unsigned long long)s->inf, (unsigned long long)e.n, (unsigned long long)e.nan,
              (unsigned long long)e.inf);
        if (e.n) {
            CHECK(s->min == e.min && s->max == e.max, "%s ch %d: min/max %g %g, expected %g %g",
                  what, c, s->min, s->max, e.min, e.max);
            if (im->sample == GIMG_F32) {
                CHECK(rel_err(s->sum, (double)e.sum) < 1e-12, "%s ch %d: sum %.17g vs %.17Lg",
                      what, c, s->sum, e.sum);
                CHECK(rel_err(s->mean, (double)e.mean) < 1e-12, "%s ch %d: mean", what, c);
            } else {
                CHECK(s->sum == (double)e.sum, "%s ch %d: sum %.17g vs %.17Lg", what, c, s->sum,
                      e.sum);
                CHECK(rel_err(s->mean, (double)e.mean) < 1e-15, "%s ch %d: mean %.17g vs %.17Lg",
                      what, c, s->mean, e.mean);
            }
            CHECK(rel_err(s->stddev, (double)e.stddev) < 1e-12 ||
                      fabs(s->stddev - (double)e.stddev) < 1e-12,
                  "%s ch %d: stddev %.17g vs %.17Lg", what, c, s->stddev, e.stddev);
            CHECK(fabs(s->entropy - (double)e.entropy) < 1e-12, "%s ch %d: entropy %.17g vs %.17Lg",
                  what, c, s->entropy, e.entropy);
            CHECK(s->median == nearest_rank(&e, 50, 1), "%s ch %d: median %g vs %g", what, c,
                  s->median, nearest_rank(&e, 50, 1));
            for (int i = 0; i < 6; i++)
                CHECK(s->percentile[i] == nearest_rank(&e, pct[i][0], pct[i][1]),
                      "%s ch %d: percentile %llu/%llu: %g vs %g", what, c,
                      (unsigned long long)pct[i][0], (unsigned long long)pct[i][1],
                      s->percentile[i], nearest_rank(&e, pct[i][0], pct[i][1]));
        } else {
            CHECK(isnan(s->mean) && isnan(s->min) && isnan(s->median), "%s ch %d: empty channel",
                  what, c);
        }
        free(e.sorted);
    }
}

/* Both backends on the CPU, with and without order statistics, against the
 * independent answers and against each other. */
static void check_image(const gimg_image *im, const char *what)
{
    gimg_stats_opts o = order_opts(), plain = {0};
    gimg_stats ref, fast, ref_plain, fast_plain;
    CHECK(gimg_stats_compute_cpu(im, &o, &ref) == GIMG_OK, "%s: %s", what, gimg_last_error());
    CHECK(gimg_stats_compute(g_cpu, im, &o, &fast) == GIMG_OK, "%s: %s", what, gimg_last_error());
    CHECK(gimg_stats_compute_cpu(im, &plain, &ref_plain) == GIMG_OK, "%s", what);
    CHECK(gimg_stats_compute(g_cpu, im, &plain, &fast_plain) == GIMG_OK, "%s", what);
    check_stats(im, &ref, what);
    CHECK(memcmp(&ref, &fast, sizeof ref) == 0, "%s: fast path differs from the reference", what);
    /* Moments with and without the histogram: the same numbers. */
    for (int c = 0; c <= im->channels; c++) {
        const gimg_channel_stats *a = &fast.ch[c], *b = &fast_plain.ch[c], *r = &ref_plain.ch[c];
        CHECK(a->count == b->count && same(a->sum, b->sum) && same(a->mean, b->mean) &&
                  same(a->stddev, b->stddev) && same(a->min, b->min) && same(a->max, b->max),
              "%s ch %d: moments differ with and without order statistics", what, c);
        CHECK(same(r->sum, b->sum) && same(r->stddev, b->stddev) && same(r->min, b->min),
              "%s ch %d: plain reference and fast differ", what, c);
    }
    gimg_moments m1, m2;
    gimg_moments_ref(im, &m1);
    gimg_moments_fast(im, &m2);
    CHECK(memcmp(&m1, &m2, sizeof m1) == 0, "%s: raw moments differ (ref vs fast)", what);
}

static void test_random_layouts(void)
{
    /* Widths around the fast path's 48-sample groups and its tails. */
    static const int sizes[][2] = {{1, 1}, {7, 3}, {16, 5}, {47, 4}, {48, 2}, {97, 13}, {257, 31}};
    char what[96];
    for (size_t s = 0; s < 3; s++)
        for (int ch = 1; ch <= 4; ch++)
            for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
                gimg_image im;
                if (gimg_image_alloc(&im, sizes[z][0], sizes[z][1], ch, k_samples[s]))
                    continue;
                testimg_fill_random(&im, 100 * s + 10 * ch + z);
                snprintf(what, sizeof what, "%dx%d c%d %d-bit", sizes[z][0], sizes[z][1], ch,
                         8 * (int)k_samples[s]);
                check_image(&im, what);
                gimg_image_free(&im);
            }
}

/* Few distinct values (so medians, percentiles and entropy are not trivial),
 * on a larger 16-bit image: the histogram path against the sort. */
static void test_few_values(void)
{
    gimg_image im;
    CHECK(gimg_image_alloc(&im, 301, 211, 3, GIMG_U16) == GIMG_OK, "alloc");
    uint64_t state = 5;
    for (int y = 0; y < im.height; y++)
        for (int i = 0; i < im.width * 3; i++)
            ((uint16_t *)gimg_row(&im, y))[i] = (uint16_t)(testimg_next(&state) % 7 * 9000);
    check_image(&im, "few values");
    gimg_image_free(&im);
}

/* Float with NaN, infinities, negatives and both zeros. */
static void test_float_special(void)
{
    for (int ch = 1; ch <= 4; ch++) {
        gimg_image im;
        CHECK(gimg_image_alloc(&im, 131, 37, ch, GIMG_F32) == GIMG_OK, "alloc");
        testimg_fill_random(&im, 77 + ch);
        uint64_t state = ch;
        for (int y = 0; y < im.height; y++) {
            float *row = (float *)gimg_row(&im, y);
            for (int i = 0; i < im.width * ch; i++) {
                uint64_t r = testimg_next(&state) % 50;
                row[i] = r == 0 ? NAN : r == 1 ? INFINITY : r == 2 ? -INFINITY
                       : r == 3 ? -0.0f : r == 4 ? 0.0f : r < 10 ? -row[i] * 1000 : row[i];
            }
        }
        char what[32];
        snprintf(what, sizeof what, "float special c%d", ch);
        check_image(&im, what);
        gimg_image_free(&im);
    }
    /* A channel of NaN only: count 0, the rest NaN; the other channel fine. */
    gimg_image im;
    CHECK(gimg_image_alloc(&im, 5, 4, 2, GIMG_F32) == GIMG_OK, "alloc");
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 5; x++) {
            ((float *)gimg_row(&im, y))[2 * x] = NAN;
            ((float *)gimg_row(&im, y))[2 * x + 1] = (float)(x + y);
        }
    check_image(&im, "nan channel");
    gimg_image_free(&im);
}

/*
 * Floats near 1000 with a spread of 0.01, and near 1e6 with a spread of
 * 0.5, NaN and infinities among them (the first sample NaN, so the shift is
 * not the first sample of the row): the one-pass sums must not cancel. The
 * stddev of every channel and of "all" against a two-pass long double one
 * within 1e-9 relative; NaN and infinities counted apart and left out.
 */
static void test_float_offset(void)
{
    static const double base[2] = {1000, 1e6}, spread[2] = {0.01, 0.5};
    for (int b = 0; b < 2; b++)
        for (int ch = 1; ch <= 4; ch++) {
            gimg_image im;
            const int w = 311, h = 173;
            CHECK(gimg_image_alloc(&im, w, h, ch, GIMG_F32) == GIMG_OK, "alloc");
            uint64_t state = 1234 + 10 * b + ch, n_nan = 0, n_inf = 0;
            for (int y = 0; y < h; y++) {
                float *row = (float *)gimg_row(&im, y);
                for (int i = 0; i < w * ch; i++) {
                    uint64_t r = testimg_next(&state);
                    double u = (double)(r >> 11) / 9007199254740992.0; /* [0, 1) */
                    /* channels a little apart, so "all" merges unequal means */
                    row[i] = (float)(base[b] + spread[b] * (u - 0.5) + 0.1 * spread[b] * (i % ch));
                    if ((y == 0 && i == 0) || r % 101 == 0) {
                        row[i] = NAN;
                        n_nan++;
                    } else if (r % 103 == 0) {
                        row[i] = r & 1 ? INFINITY : -INFINITY;
                        n_inf++;
                    }
                }
            }
            char what[64];
            snprintf(what, sizeof what, "offset %g c%d", base[b], ch);
            gimg_stats_opts o = {0};
            gimg_stats ref, fast;
            CHECK(gimg_stats_compute_cpu(&im, &o, &ref) == GIMG_OK, "%s", gimg_last_error());
            CHECK(gimg_stats_compute(g_cpu, &im, &o, &fast) == GIMG_OK, "%s", gimg_last_error());
            CHECK(memcmp(&ref, &fast, sizeof ref) == 0, "%s: fast differs from the reference",
                  what);
            CHECK(ref.ch[ch].nan == n_nan && ref.ch[ch].inf == n_inf &&
                      ref.ch[ch].count == (uint64_t)w * h * ch - n_nan - n_inf,
                  "%s: all: count %llu nan %llu inf %llu", what,
                  (unsigned long long)ref.ch[ch].count, (unsigned long long)ref.ch[ch].nan,
                  (unsigned long long)ref.ch[ch].inf);
            for (int c = 0; c <= ch; c++) {
                expected e;
                expect(&im, c < ch ? c : -1, &e);
                const gimg_channel_stats *st = &ref.ch[c];
                CHECK(st->count == e.n && st->nan == e.nan && st->inf == e.inf,
                      "%s ch %d: counts %llu/%llu/%llu, expected %llu/%llu/%llu", what, c,
                      (unsigned long long)st->count, (unsigned long long)st->nan,
                      (unsigned long long)st->inf, (unsigned long long)e.n,
                      (unsigned long long)e.nan, (unsigned long long)e.inf);
                CHECK(e.stddev > 0.2 * spread[b] && rel_err(st->stddev, (double)e.stddev) < 1e-9,
                      "%s ch %d: stddev %.17g, two-pass %.17Lg", what, c, st->stddev, e.stddev);
                CHECK(rel_err(st->mean, (double)e.mean) < 1e-12 &&
                          rel_err(st->sum, (double)e.sum) < 1e-12,
                      "%s ch %d: mean %.17g vs %.17Lg, sum %.17g vs %.17Lg", what, c, st->mean,
                      e.mean, st->sum, e.sum);
                free(e.sorted);
            }
            check_image(&im, what);
            gimg_image_free(&im);
        }
}

static void fill_constant(gimg_image *im, double v)
{
    for (int y = 0; y < im->height; y++)
        for (int i = 0; i < im->width * im->channels; i++) {
            unsigned char *row = gimg_row(im, y);
            if (im->sample == GIMG_U8)
                row[i] = (unsigned char)v;
            else if (im->sample == GIMG_U16)
                ((uint16_t *)row)[i] = (uint16_t)v;
            else
                ((float *)row)[i] = (float)v;
        }
}

static void test_extremes(void)
{
    static const int sizes[][2] = {{1, 1}, {3, 1}, {1, 5}, {640, 480}};
    for (size_t s = 0; s < 3; s++)
        for (int ch = 1; ch <= 4; ch++)
            for (size_t z = 0; z < 4; z++)
                for (int hi = 0; hi < 2; hi++) {
                    double v = hi ? (k_samples[s] == GIMG_U8 ? 255 : k_samples[s] == GIMG_U16 ? 65535 : 1) : 0;
                    gimg_image im;
                    CHECK(gimg_image_alloc(&im, sizes[z][0], sizes[z][1], ch, k_samples[s]) == GIMG_OK, "alloc");
                    fill_constant(&im, v);
                    gimg_stats_opts o = order_opts();
                    gimg_stats st;
                    CHECK(gimg_stats_compute(g_cpu, &im, &o, &st) == GIMG_OK, "%s", gimg_last_error());
                    uint64_t n = (uint64_t)sizes[z][0] * sizes[z][1];
                    for (int c = 0; c <= ch; c++) {
                        uint64_t nc = c < ch ? n : n * ch;
                        const gimg_channel_stats *x = &st.ch[c];
                        CHECK(x->count == nc && x->min == v && x->max == v && x->mean == v &&
                                  x->stddev == 0 && x->median == v && x->entropy == 0 &&
                                  x->percentile[0] == v && x->percentile[5] == v &&
                                  x->sum == v * (double)nc,
                              "constant %g %dx%d c%d %d-bit ch %d: min %g max %g mean %g sd %g "
                              "median %g entropy %g sum %g", v, sizes[z][0], sizes[z][1], ch,
                              8 * (int)k_samples[s], c, x->min, x->max, x->mean, x->stddev,
                              x->median, x->entropy, x->sum);
                    }
                    gimg_image_free(&im);
                }
}

/* 16-bit maxima over many pixels: sums of squares past 2^32 per channel,
 * and the "all" channel's past 2^64 would be if it were 64-bit. */
static void test_large_sums(void)
{
    gimg_image im;
    CHECK(gimg_image_alloc(&im, 4096, 2048, 4, GIMG_U16) == GIMG_OK, "alloc");
    fill_constant(&im, 65535);
    gimg_stats_opts o = {0};
    gimg_stats st;
    CHECK(gimg_stats_compute(g_cpu, &im, &o, &st) == GIMG_OK, "%s", gimg_last_error());
    double n = 4096.0 * 2048;
    CHECK(st.ch[0].sum == 65535 * n && st.ch[4].sum == 4 * 65535 * n, "sums %.17g %.17g",
          st.ch[0].sum, st.ch[4].sum);
    CHECK(st.ch[4].stddev == 0 && st.ch[4].mean == 65535, "all: mean %g sd %g", st.ch[4].mean,
          st.ch[4].stddev);
    /* Half 0, half 65535: stddev exactly 32767.5. */
    for (int y = 0; y < im.height; y += 2)
        memset(gimg_row(&im, y), 0, im.stride_bytes);
    CHECK(gimg_stats_compute(g_cpu, &im, &o, &st) == GIMG_OK, "%s", gimg_last_error());
    CHECK(st.ch[2].stddev == 32767.5 && st.ch[4].stddev == 32767.5 && st.ch[4].mean == 32767.5,
          "half and half: sd %.17g all sd %.17g mean %.17g", st.ch[2].stddev, st.ch[4].stddev,
          st.ch[4].mean);
    gimg_image_free(&im);
}

static void test_parse_region(void)
{
    gimg_region r;
    CHECK(gimg_parse_region("10x20+3+4", &r) == GIMG_OK && r.width == 10 && r.height == 20 &&
              r.x == 3 && r.y == 4, "10x20+3+4");
    CHECK(gimg_parse_region("7X5", &r) == GIMG_OK && r.width == 7 && r.height == 5 && r.x == 0 &&
              r.y == 0, "7X5");
    CHECK(gimg_parse_region("8x9-2+-0", &r) != GIMG_OK, "8x9-2+-0 accepted");
    CHECK(gimg_parse_region("8x9-2-3", &r) == GIMG_OK && r.x == -2 && r.y == -3, "8x9-2-3");
    const char *bad[] = {"", "10", "10x", "x10", "0x5", "5x0", "10x10+5", "10x10++5+5",
                         "10x10+5+5junk", "a", "-5x5", "10x10+ 5+5", "99999999999x5",
                         "5x5+99999999999+0", "10x10+5+"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        gimg_region keep = {1, 2, 3, 4};
        gimg_status st = gimg_parse_region(bad[i], &keep);
        CHECK(st == GIMG_E_USAGE && keep.width == 1 && keep.x == 3, "'%s' accepted", bad[i]);
    }
}

static void test_region_clip(void)
{
    struct { gimg_region in; int ok; gimg_region out; } cases[] = {
        {{10, 10, 0, 0}, 1, {10, 10, 0, 0}},
        {{10, 10, 60, 40}, 1, {4, 8, 60, 40}},   /* past the right and bottom edges */
        {{10, 10, -5, -3}, 1, {5, 7, 0, 0}},     /* negative offsets: ImageMagick's -crop */
        {{1, 1, 63, 47}, 1, {1, 1, 63, 47}},     /* the last pixel */
        {{100, 100, 0, 0}, 1, {64, 48, 0, 0}},   /* larger than the image */
        {{10, 10, 64, 0}, 0, {0, 0, 0, 0}},      /* just outside */
        {{10, 10, 0, 48}, 0, {0, 0, 0, 0}},
        {{5, 5, -5, 0}, 0, {0, 0, 0, 0}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        gimg_region got = {0};
        gimg_status st = gimg_region_clip(&cases[i].in, 64, 48, &got);
        if (cases[i].ok)
            CHECK(st == GIMG_OK && !memcmp(&got, &cases[i].out, sizeof got),
                  "case %zu: %dx%d+%d+%d", i, got.width, got.height, got.x, got.y);
        else
            CHECK(st == GIMG_E_LIMIT && strstr(gimg_last_error(), "outside"), "case %zu: %d", i,
                  st);
    }
}

/* A region's statistics equal those of a copy of the rectangle. */
static void test_region_view(void)
{
    for (size_t s = 0; s < 3; s++) {
        gimg_image im, crop, view;
        CHECK(gimg_image_alloc(&im, 77, 41, 3, k_samples[s]) == GIMG_OK, "alloc");
        testimg_fill_random(&im, 9 + s);
        gimg_region r = {30, 20, 47, 21}, clipped;
        CHECK(gimg_region_clip(&r, im.width, im.height, &clipped) == GIMG_OK, "clip");
        gimg_image_view(&im, &clipped, &view);
        CHECK(gimg_image_alloc(&crop, clipped.width, clipped.height, 3, k_samples[s]) == GIMG_OK,
              "alloc");
        for (int y = 0; y < crop.height; y++)
            memcpy(gimg_row(&crop, y), gimg_row(&view, y), (size_t)crop.width * gimg_pixel_bytes(&crop));
        gimg_stats_opts o = order_opts();
        gimg_stats a, b;
        CHECK(gimg_stats_compute(g_cpu, &view, &o, &a) == GIMG_OK, "%s", gimg_last_error());
        CHECK(gimg_stats_compute(g_cpu, &crop, &o, &b) == GIMG_OK, "%s", gimg_last_error());
        CHECK(memcmp(&a, &b, sizeof a) == 0, "%d-bit: view and copy differ", 8 * (int)k_samples[s]);
        CHECK(a.ch[0].count == 30 * 20, "count %llu", (unsigned long long)a.ch[0].count);
        check_stats(&crop, &a, "region");
        gimg_image_free(&im);
        gimg_image_free(&crop);
    }
}

static void test_percentile_parse(void)
{
    struct { const char *s; uint32_t m; const char *name; } good[] = {
        {"5", 5000000, "5"}, {"99.9", 99900000, "99.9"}, {"100", 100000000, "100"},
        {"0", 0, "0"}, {"50.500", 50500000, "50.5"}, {"007", 7000000, "7"},
        {"0.000001", 1, "0.000001"}, {"12.25", 12250000, "12.25"}};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        gimg_percentile p;
        CHECK(gimg_parse_percentile("t", good[i].s, &p) == GIMG_OK && p.millionths == good[i].m &&
                  !strcmp(p.name, good[i].name),
              "'%s': %u '%s'", good[i].s, p.millionths, p.name);
    }
    const char *bad[] = {"", "101", "100.000001", "-1", "+5", "1e2", "5.", ".5", "1.1234567",
                         "5%", "nan", "1,2", "10000"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        gimg_percentile p;
        CHECK(gimg_parse_percentile("t", bad[i], &p) == GIMG_E_USAGE, "'%s' accepted", bad[i]);
    }
    struct { const char *p; uint64_t n, k; } ranks[] = {
        {"10", 10, 1}, {"0", 10, 1}, {"100", 10, 10}, {"50", 3, 2}, {"50", 4, 2},
        {"99.9", 1000, 999}, {"99.9", 1001, 1000}, {"1", 1, 1}, {"0.000001", 100000000, 1},
        {"0.000001", 100000001, 2}, {"33.333333", 300000000, 99999999}};
    for (size_t i = 0; i < sizeof ranks / sizeof *ranks; i++) {
        gimg_percentile p;
        gimg_parse_percentile("t", ranks[i].p, &p);
        uint64_t k = gimg_percentile_rank(&p, ranks[i].n);
        CHECK(k == ranks[i].k, "rank of %s%% of %llu: %llu, expected %llu", ranks[i].p,
              (unsigned long long)ranks[i].n, (unsigned long long)k,
              (unsigned long long)ranks[i].k);
    }
}

static void test_compare(void)
{
    char what[64];
    for (size_t s = 0; s < 3; s++)
        for (int ch = 1; ch <= 4; ch++) {
            gimg_image a, b;
            CHECK(gimg_image_alloc(&a, 53, 29, ch, k_samples[s]) == GIMG_OK, "alloc");
            CHECK(gimg_image_alloc(&b, 53, 29, ch, k_samples[s]) == GIMG_OK, "alloc");
            testimg_fill_random(&a, 40 + ch + 10 * s);
            for (int y = 0; y < a.height; y++)
                memcpy(gimg_row(&b, y), gimg_row(&a, y), (size_t)a.width * gimg_pixel_bytes(&a));
            snprintf(what, sizeof what, "c%d %d-bit", ch, 8 * (int)k_samples[s]);
            gimg_diff d, dr;
            CHECK(gimg_compare(g_cpu, &a, &b, NULL, &d) == GIMG_OK, "%s", gimg_last_error());
            const uint64_t n = 53 * 29;
            for (int c = 0; c <= ch; c++)
                CHECK(d.ch[c].count == (c < ch ? n : n * ch) && d.ch[c].differing == 0 &&
                          d.ch[c].max_abs == 0 && d.ch[c].mse == 0 && isinf(d.ch[c].psnr) &&
                          d.ch[c].psnr > 0,
                      "%s: identical ch %d: psnr %g", what, c, d.ch[c].psnr);
            /* Perturb every 7th sample of the last channel by +delta (clamped
             * into range by construction: those samples are set first). */
            const int last = ch - 1;
            const double delta = k_samples[s] == GIMG_U8 ? 9 : k_samples[s] == GIMG_U16 ? 1000 : 0.25;
            uint64_t k = 0, idx = 0;
            for (int y = 0; y < a.height; y++)
                for (int x = 0; x < a.width; x++, idx++) {
                    if (idx % 7)
                        continue;
                    size_t i = (size_t)x * ch + last;
                    unsigned char *ra = gimg_row(&a, y), *rb = gimg_row(&b, y);
                    if (k_samples[s] == GIMG_U8) {
                        ra[i] = 100;
                        rb[i] = (unsigned char)(100 + delta);
                    } else if (k_samples[s] == GIMG_U16) {
                        ((uint16_t *)ra)[i] = 30000;
                        ((uint16_t *)rb)[i] = (uint16_t)(30000 + delta);
                    } else {
                        ((float *)ra)[i] = 0.5f;
                        ((float *)rb)[i] = (float)(0.5 + delta);
                    }
                    k++;
                }
            CHECK(gimg_compare(g_cpu, &a, &b, NULL, &d) == GIMG_OK, "%s", gimg_last_error());
            CHECK(gimg_compare_cpu(&a, &b, NULL, &dr) == GIMG_OK, "%s", gimg_last_error());
            CHECK(memcmp(&d, &dr, sizeof d) == 0, "%s: fast and reference differ", what);
            const gimg_channel_diff *l = &d.ch[last], *all = &d.ch[ch];
            const double mse = delta * delta * (double)k / (double)n;
            const double peak = k_samples[s] == GIMG_U8 ? 255 : k_samples[s] == GIMG_U16 ? 65535 : 1;
            CHECK(l->differing == k && l->max_abs == delta && rel_err(l->mae, delta * k / n) < 1e-15 &&
                      rel_err(l->mse, mse) < 1e-15 && rel_err(l->rmse, sqrt(mse)) < 1e-15 &&
                      rel_err(l->psnr, 10 * log10(peak * peak / mse)) < 1e-14,
                  "%s: perturbed: differing %llu (want %llu) max %g mae %g mse %g psnr %g", what,
                  (unsigned long long)l->differing, (unsigned long long)k, l->max_abs, l->mae,
                  l->mse, l->psnr);
            CHECK(all->differing == k && all->max_abs == delta &&
                      rel_err(all->mse, mse / ch) < 1e-15,
                  "%s: all: differing %llu mse %g", what, (unsigned long long)all->differing,
                  all->mse);
            for (int c = 0; c < last; c++)
                CHECK(d.ch[c].differing == 0 && isinf(d.ch[c].psnr), "%s: ch %d changed", what, c);
            gimg_image_free(&a);
            gimg_image_free(&b);
        }
}

static void test_compare_float_special(void)
{
    gimg_image a, b;
    CHECK(gimg_image_alloc(&a, 4, 1, 1, GIMG_F32) == GIMG_OK, "alloc");
    CHECK(gimg_image_alloc(&b, 4, 1, 1, GIMG_F32) == GIMG_OK, "alloc");
    float va[4] = {NAN, INFINITY, 1.0f, -0.0f}, vb[4] = {NAN, 2.0f, 0.5f, 0.0f};
    memcpy(a.data, va, sizeof va);
    memcpy(b.data, vb, sizeof vb);
    gimg_diff d;
    CHECK(gimg_compare(g_cpu, &a, &b, NULL, &d) == GIMG_OK, "%s", gimg_last_error());
    /* NaN == NaN and -0 == +0; inf vs 2 differs but is left out of the sums. */
    CHECK(d.ch[0].differing == 2 && d.ch[0].count == 2 && d.ch[0].max_abs == 0.5 &&
              d.ch[0].mae == 0.25 && d.ch[0].mse == 0.125,
          "differing %llu count %llu max %g mae %g mse %g", (unsigned long long)d.ch[0].differing,
          (unsigned long long)d.ch[0].count, d.ch[0].max_abs, d.ch[0].mae, d.ch[0].mse);
    gimg_image_free(&a);
    gimg_image_free(&b);
}

/* Samples in a file's own units (gimg_image.maxval): the statistics are
 * of the samples as they are, the comparison's PSNR peak is the maxval
 * (as netpbm's pnmpsnr), and images of different maxvals are refused. */
static void test_maxval(void)
{
    static const struct {
        gimg_sample s;
        unsigned maxval;
    } cases[] = {{GIMG_U16, 4095}, {GIMG_U16, 1023}, {GIMG_U8, 100}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const unsigned m = cases[i].maxval;
        char what[48];
        snprintf(what, sizeof what, "maxval %u", m);
        gimg_image a, b;
        CHECK(gimg_image_alloc(&a, 41, 17, 3, cases[i].s) == GIMG_OK, "alloc");
        CHECK(gimg_image_alloc(&b, 41, 17, 3, cases[i].s) == GIMG_OK, "alloc");
        testimg_fill_maxval(&a, 500 + i, m);
        testimg_fill_maxval(&b, 600 + i, m);
        check_image(&a, what);
        gimg_stats st;
        gimg_stats_opts o = order_opts();
        CHECK(gimg_stats_compute(g_cpu, &a, &o, &st) == GIMG_OK, "%s", gimg_last_error());
        CHECK(st.ch[3].max == m && st.ch[3].min == 0, "%s: min %g max %g", what, st.ch[3].min,
              st.ch[3].max);
        /* The comparison, by hand in long double: PSNR over the maxval. */
        long double sq = 0;
        const size_t n = (size_t)41 * 17 * 3;
        for (int y = 0; y < 17; y++)
            for (int x = 0; x < 41; x++)
                for (int c = 0; c < 3; c++) {
                    long double d = (long double)sample_at(&a, x, y, c) - sample_at(&b, x, y, c);
                    sq += d * d;
                }
        const double mse = (double)(sq / n);
        gimg_diff d, dr;
        CHECK(gimg_compare(g_cpu, &a, &b, NULL, &d) == GIMG_OK, "%s: %s", what, gimg_last_error());
        CHECK(gimg_compare_cpu(&a, &b, NULL, &dr) == GIMG_OK, "%s: %s", what, gimg_last_error());
        CHECK(memcmp(&d, &dr, sizeof d) == 0, "%s: fast and reference differ", what);
        CHECK(d.peak == m && rel_err(d.ch[3].mse, mse) < 1e-12 &&
                  rel_err(d.ch[3].psnr, 10 * log10((double)m * m / mse)) < 1e-12,
              "%s: peak %g mse %g psnr %g (want %g)", what, d.peak, d.ch[3].mse, d.ch[3].psnr,
              10 * log10((double)m * m / mse));
        /* Identical images: infinite PSNR still. */
        CHECK(gimg_compare(g_cpu, &a, &a, NULL, &d) == GIMG_OK && isinf(d.ch[3].psnr), "%s: self", what);
        /* A different maxval (here the full range) is refused, naming both. */
        b.maxval = 0;
        char m_text[16];
        snprintf(m_text, sizeof m_text, "%u", m);
        CHECK(gimg_compare(g_cpu, &a, &b, NULL, &d) == GIMG_E_FORMAT &&
                  strstr(gimg_last_error(), "maxval") && strstr(gimg_last_error(), m_text),
              "%s: against the full range: %s", what, gimg_last_error());
        gimg_image_free(&a);
        gimg_image_free(&b);
    }
}

/* Statistics added band by band (gimg_stats_begin/add/end) equal the
 * whole image's, bit for bit: every sample type, with and without order
 * statistics (not float's), bands of heights that split the float blocks
 * (a block of a 37x3 float image is 147 rows) and a channel whose first
 * finite sample comes late (its shift is found in a later band). */
static void test_bands(void)
{
    static const gimg_sample samples[] = {GIMG_U8, GIMG_U16, GIMG_F32};
    static const int band_heights[] = {1, 50, 146, 147, 148, 399, 400};
    for (size_t t = 0; t < 3; t++)
        for (int order = 0; order <= (samples[t] != GIMG_F32); order++) {
            gimg_image im;
            if (gimg_image_alloc(&im, 37, 400, 3, samples[t])) {
                CHECK(0, "out of memory");
                return;
            }
            testimg_fill_random(&im, 77 + t);
            if (samples[t] == GIMG_F32)
                for (int y = 0; y < 200; y++) { /* green: NaN, then inf, up to row 200 */
                    float *row = (float *)gimg_row(&im, y);
                    for (int x = 0; x < 37; x++)
                        row[3 * x + 1] = y < 150 ? NAN : INFINITY;
                }
            gimg_stats_opts o = {.order = order, .n_percentiles = 1};
            gimg_parse_percentile("test", "95", &o.percentiles[0]);
            gimg_stats whole, banded;
            CHECK(gimg_stats_compute(g_cpu, &im, &o, &whole) == GIMG_OK, "%s",
                  gimg_last_error());
            for (size_t b = 0; b < sizeof band_heights / sizeof *band_heights; b++) {
                gimg_stats_acc *acc;
                gimg_status st = gimg_stats_begin(&im, &o, &acc);
                for (int y = 0; !st && y < im.height; y += band_heights[b]) {
                    gimg_image band = im;
                    band.data = gimg_row(&im, y);
                    band.height = im.height - y < band_heights[b] ? im.height - y
                                                                  : band_heights[b];
                    st = gimg_stats_add(acc, &band);
                }
                memset(&banded, 0xA5, sizeof banded);
                if (!st)
                    st = gimg_stats_end(acc, &banded);
                else
                    gimg_stats_end(acc, NULL);
                CHECK(st == GIMG_OK, "%s", gimg_last_error());
                CHECK(!memcmp(&whole, &banded, sizeof whole),
                      "%d-bit order %d bands of %d: all.mean %.17g / %.17g, stddev %.17g / "
                      "%.17g", 8 * (int)samples[t], order, band_heights[b], whole.ch[3].mean,
                      banded.ch[3].mean, whole.ch[3].stddev, banded.ch[3].stddev);
            }
            /* Too few rows is an error, not statistics of part of it. */
            gimg_stats_acc *acc;
            if (gimg_stats_begin(&im, &o, &acc) == GIMG_OK) {
                gimg_image band = im;
                band.height = 10;
                CHECK(gimg_stats_add(acc, &band) == GIMG_OK);
                CHECK(gimg_stats_end(acc, &banded) == GIMG_E_USAGE);
            }
            gimg_image_free(&im);
        }
    gimg_image f;
    gimg_stats_acc *acc = NULL;
    gimg_stats_opts o = {.order = 1};
    if (!gimg_image_alloc(&f, 4, 4, 1, GIMG_F32)) {
        CHECK(gimg_stats_begin(&f, &o, &acc) == GIMG_E_USAGE && !acc,
              "float order statistics in bands");
        gimg_image_free(&f);
    }
}

int main(void)
{
    if (!(g_cpu = testimg_cpu_ctx()))
        return 1;
    RUN(test_random_layouts);
    RUN(test_few_values);
    RUN(test_float_special);
    RUN(test_float_offset);
    RUN(test_extremes);
    RUN(test_large_sums);
    RUN(test_parse_region);
    RUN(test_region_clip);
    RUN(test_region_view);
    RUN(test_percentile_parse);
    RUN(test_compare);
    RUN(test_compare_float_special);
    RUN(test_maxval);
    RUN(test_bands);
    gimg_ctx_close(g_cpu);
    return check_summary();
}
