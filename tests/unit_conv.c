/*
 * unit_conv — gconv's library: the kernel-spec parser (flat lists,
 * normalization, the kernel file's size bound included), the reference's
 * semantics checked against hand-computed results (borders at every edge
 * and corner, anchors of even and odd kernels, convolution vs correlation,
 * named kernels' signs, alpha modes, chains), and the fast CPU path against
 * the reference, bit for bit, on seeded random images of every layout.
 */
#include "gimg.h"
#include "conv_internal.h"
#include "testimg.h"
#include "check.h"

#include <math.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* ------------------------------------------------------------------ helpers */

static gimg_kernel parse_ok(const char *spec, int correlate)
{
    gimg_kernel k;
    gimg_status st = gimg_kernel_parse(spec, correlate, 0, &k);
    CHECK(st == GIMG_OK, "'%s': %s", spec, gimg_last_error());
    return k;
}

static gimg_image float_image(int w, int h, int c, const float *v)
{
    gimg_image im;
    if (gimg_image_alloc(&im, w, h, c, GIMG_F32))
        abort();
    memcpy(im.data, v, (size_t)w * h * c * sizeof(float));
    return im;
}

static float fpx(const gimg_image *im, int x, int y, int c)
{
    return ((const float *)gimg_row(im, y))[(size_t)x * im->channels + c];
}

/* Runs one kernel with the given options through the reference. */
static gimg_image conv1(const gimg_image *in, const gimg_kernel *k, gimg_border b,
                        gimg_alpha_mode a)
{
    gimg_conv_opts o;
    gimg_conv_opts_init(&o);
    o.kernels = k;
    o.n_kernels = 1;
    o.border = b;
    o.alpha = a;
    gimg_image out;
    gimg_status st = gimg_conv_reference(in, &o, &out);
    CHECK(st == GIMG_OK, "%s", gimg_last_error());
    return out;
}

static int same_image(const gimg_image *a, const gimg_image *b)
{
    size_t row = (size_t)a->width * gimg_pixel_bytes(a);
    for (int y = 0; y < a->height; y++)
        if (memcmp(gimg_row(a, y), gimg_row(b, y), row))
            return 0;
    return 1;
}

/* ------------------------------------------------------------------ parser */

static void test_parse_inline_and_anchor(void)
{
    gimg_kernel k = parse_ok("1 2 3; 4,5,6 ;7 8 9", 1);
    CHECK(k.width == 3 && k.height == 3 && k.anchor_x == 1 && k.anchor_y == 1, "3x3");
    CHECK(k.taps[0] == 1 && k.taps[5] == 6 && k.taps[8] == 9, "correlation keeps the order");
    gimg_kernel_free(&k);
    k = parse_ok("1 2 3; 4 5 6; 7 8 9", 0);
    CHECK(k.taps[0] == 9 && k.taps[8] == 1 && k.taps[3] == 6, "convolution rotates by 180");
    gimg_kernel_free(&k);
    /* Even sizes: the anchor is the centre rounded up-left, and rotating
     * the kernel moves it to the rotated position. */
    k = parse_ok("1 2 3 4; 5 6 7 8", 1);
    CHECK(k.width == 4 && k.height == 2 && k.anchor_x == 1 && k.anchor_y == 0, "4x2 anchor");
    gimg_kernel_free(&k);
    k = parse_ok("1 2 3 4; 5 6 7 8", 0);
    CHECK(k.anchor_x == 2 && k.anchor_y == 1, "rotated anchor %d %d", k.anchor_x, k.anchor_y);
    gimg_kernel_free(&k);
    k = parse_ok("  -1.5e0  ; 2.25 ;", 1);
    CHECK(k.width == 1 && k.height == 2 && k.taps[0] == -1.5f && k.taps[1] == 2.25f, "1x2");
    gimg_kernel_free(&k);
}

static void test_parse_file_text(void)
{
    const char *text = "# a comment\n 1 2 1   # row one\n\n2 4 2\r\n1 2 1\n";
    gimg_kernel k;
    CHECK(gimg_kernel_parse_text(text, strlen(text), "f", 1, 1, &k) == GIMG_OK, "%s",
          gimg_last_error());
    CHECK(k.width == 3 && k.height == 3, "3x3");
    CHECK(k.taps[4] == 0.25f && k.taps[0] == 1.0f / 16, "normalized: %g", k.taps[4]);
    CHECK(k.kind == GIMG_KERNEL_SEPARABLE, "1 2 1 outer product is separable");
    gimg_kernel_free(&k);
    char path[] = "/tmp/unit_conv_kXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd >= 0) {
        CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text), "write");
        close(fd);
        char spec[64];
        snprintf(spec, sizeof spec, "@%s", path);
        k = parse_ok(spec, 1);
        CHECK(k.width == 3 && k.height == 3 && k.taps[4] == 4, "@file");
        gimg_kernel_free(&k);
        unlink(path);
        CHECK(gimg_kernel_parse(spec, 1, 0, &k) == GIMG_E_IO, "a missing file is an I/O error");
        CHECK(strstr(gimg_last_error(), path) != NULL, "the message names the file: %s",
              gimg_last_error());
        gimg_kernel_free(&k);
        /* An empty file is an empty kernel (a usage error), like an empty spec. */
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        CHECK(fd >= 0, "create %s", path);
        if (fd >= 0)
            close(fd);
        CHECK(gimg_kernel_parse(spec, 1, 0, &k) == GIMG_E_USAGE &&
                  strstr(gimg_last_error(), "empty kernel"),
              "empty file: %s", gimg_last_error());
        gimg_kernel_free(&k);
        unlink(path);
    }
}

static void test_parse_errors(void)
{
    static const struct { const char *spec, *want; } cases[] = {
        {"1 2 x", "bad number 'x'"},
        {"1 2; 3", "ragged rows"},
        {"1 2 3; 4 5", "ragged"},
        {"", "empty"},
        {" ; ;", "empty"},
        {"# nothing", "empty"},
        {"1 nan 2", "bad number 'nan'"},
        {"1 inf", "bad number"},
        {"0x10", "bad number"},
        {"1e99", "bad number"},
        {"frobnicate", "unknown kernel 'frobnicate'"},
        {"gaussian", "needs a parameter"},
        {"gaussian:abc", "SIGMA"},
        {"gaussian:0", "out of range"},
        {"gaussian:50", "too large"},
        {"gaussian:1:200", "RADIUS"},
        {"gaussian:1:2.5", "not an integer"},
        {"gaussian:1:2:3", "too many parameters"},
        {"box:1.5", "not an integer"},
        {"box:-1", "out of range"},
        {"box:200", "out of range"},
        {"sobel:2", "takes no parameters"},
        {"log", "needs a parameter"},
        {"@", "no file name"},
        {"box:", "R"},
        {"unsharp:1:x", "AMOUNT"},
        {"1 2; 3 4; 5", "ragged rows (row 3 has 1 values, row 1 has 2)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gimg_kernel k;
        gimg_status st = gimg_kernel_parse(cases[i].spec, 0, 0, &k);
        CHECK(st == GIMG_E_USAGE, "'%s': status %d", cases[i].spec, (int)st);
        CHECK(strstr(gimg_last_error(), cases[i].want) != NULL, "'%s': message '%s' lacks '%s'",
              cases[i].spec, gimg_last_error(), cases[i].want);
        gimg_kernel_free(&k);
    }
    /* Too large: 256 columns (one row, made so by its ';': 256 numbers
     * alone are a flat 16x16), and 256 rows. */
    char *big = malloc(256 * 3 + 2), *p = big;
    for (int i = 0; i < 256; i++)
        p += sprintf(p, "1 ");
    strcpy(p, ";");
    gimg_kernel k;
    CHECK(gimg_kernel_parse(big, 0, 0, &k) == GIMG_E_USAGE && strstr(gimg_last_error(), "too large"),
          "256 columns: %s", gimg_last_error());
    gimg_kernel_free(&k);
    for (char *q = big; *q; q++)
        if (*q == ' ')
            *q = ';';
    CHECK(gimg_kernel_parse(big, 0, 0, &k) == GIMG_E_USAGE && strstr(gimg_last_error(), "too large"),
          "256 rows: %s", gimg_last_error());
    gimg_kernel_free(&k);
    free(big);
    /* 127x127 and 255x255 are accepted. */
    k = parse_ok("box:63", 0);
    CHECK(k.width == 127 && k.kind == GIMG_KERNEL_SEPARABLE, "box:63");
    gimg_kernel_free(&k);
    k = parse_ok("unsharp:42.1", 0);
    CHECK(k.width == 255 && k.kind == GIMG_KERNEL_DENSE, "unsharp:42.1 is %dx%d", k.width, k.height);
    gimg_kernel_free(&k);
}

static void test_named_kernels(void)
{
    gimg_kernel k = parse_ok("gaussian:2", 0);
    CHECK(k.width == 13 && k.height == 13 && k.kind == GIMG_KERNEL_SEPARABLE, "gaussian:2 13x13");
    double sum = 0;
    for (int i = 0; i < 169; i++)
        sum += k.taps[i];
    CHECK(fabs(sum - 1) < 1e-5, "gaussian sums to %g", sum);
    CHECK(k.taps[6 * 13 + 6] > k.taps[6 * 13 + 7] && k.taps[0] > 0, "gaussian shape");
    gimg_kernel_free(&k);
    k = parse_ok("gaussian:1.5:2", 0);
    CHECK(k.width == 5, "explicit radius");
    gimg_kernel_free(&k);
    k = parse_ok("box:2", 0);
    CHECK(k.width == 5 && k.taps[7] == (1.0f / 5) * (1.0f / 5), "box:2");
    gimg_kernel_free(&k);
    k = parse_ok("unsharp:1:2", 0);
    sum = 0;
    for (int i = 0; i < k.width * k.height; i++)
        sum += k.taps[i];
    CHECK(fabs(sum - 1) < 1e-5 && k.taps[(k.width * k.height) / 2] > 2, "unsharp sums to 1");
    gimg_kernel_free(&k);
    k = parse_ok("log:1.4", 0);
    sum = 0;
    for (int i = 0; i < k.width * k.height; i++)
        sum += k.taps[i];
    CHECK(fabs(sum) < 1e-5 && k.taps[(k.width * k.height) / 2] < 0, "log: zero sum, negative centre");
    gimg_kernel_free(&k);
    k = parse_ok("sobel", 0);
    CHECK(k.kind == GIMG_KERNEL_MAGNITUDE && k.taps_y, "sobel is a magnitude");
    gimg_kernel_free(&k);
    k = parse_ok(" sobel-x \t", 0);
    CHECK(k.width == 3 && k.taps[2] == 1 && k.taps[0] == -1, "blanks around a name");
    gimg_kernel_free(&k);
    k = parse_ok("1 2 3; 4 5 6; 7 8 10", 0);
    CHECK(k.kind == GIMG_KERNEL_DENSE, "a rank-2 kernel stays dense");
    gimg_kernel_free(&k);
    k = parse_ok("1 4 6 4 1; 4 16 24 16 4; 6 24 36 24 6; 4 16 24 16 4; 1 4 6 4 1", 0);
    CHECK(k.kind == GIMG_KERNEL_SEPARABLE, "binomial 5x5 is separable");
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 5; j++)
            CHECK(k.col[i] * k.row[j] == k.taps[i * 5 + j], "factor (%d,%d)", i, j);
    gimg_kernel_free(&k);
    k = parse_ok("0.1 0.2; 0.3 0.7", 0);
    CHECK(k.kind == GIMG_KERNEL_DENSE, "not rank 1");
    gimg_kernel_free(&k);
}

/* Each named gradient is positive where brightness increases along its axis. */
static void test_named_signs(void)
{
    float ramp_x[5 * 5], ramp_y[5 * 5];
    for (int y = 0; y < 5; y++)
        for (int x = 0; x < 5; x++)
            ramp_x[y * 5 + x] = (float)x, ramp_y[y * 5 + x] = (float)y;
    gimg_image ix = float_image(5, 5, 1, ramp_x), iy = float_image(5, 5, 1, ramp_y);
    static const char *const names[] = {"sobel", "scharr", "prewitt"};
    static const float gain[] = {8, 32, 6};
    for (int n = 0; n < 3; n++) {
        char sx[32], sy[32];
        snprintf(sx, sizeof sx, "%s-x", names[n]);
        snprintf(sy, sizeof sy, "%s-y", names[n]);
        for (int corr = 0; corr < 2; corr++) {
            gimg_kernel kx = parse_ok(sx, corr), ky = parse_ok(sy, corr), km = parse_ok(names[n], corr);
            gimg_image a = conv1(&ix, &kx, GIMG_BORDER_CLAMP, GIMG_ALPHA_PREMULTIPLY);
            gimg_image b = conv1(&iy, &ky, GIMG_BORDER_CLAMP, GIMG_ALPHA_PREMULTIPLY);
            gimg_image c = conv1(&iy, &kx, GIMG_BORDER_CLAMP, GIMG_ALPHA_PREMULTIPLY);
            gimg_image m = conv1(&ix, &km, GIMG_BORDER_CLAMP, GIMG_ALPHA_PREMULTIPLY);
            CHECK(fpx(&a, 2, 2, 0) == gain[n], "%s on a rightward ramp: %g", sx, fpx(&a, 2, 2, 0));
            CHECK(fpx(&b, 2, 2, 0) == gain[n], "%s on a downward ramp: %g", sy, fpx(&b, 2, 2, 0));
            CHECK(fpx(&c, 2, 2, 0) == 0, "%s across the ramp", sx);
            CHECK(fpx(&m, 2, 2, 0) == gain[n], "%s magnitude %g", names[n], fpx(&m, 2, 2, 0));
            gimg_image_free(&a), gimg_image_free(&b), gimg_image_free(&c), gimg_image_free(&m);
            gimg_kernel_free(&kx), gimg_kernel_free(&ky), gimg_kernel_free(&km);
        }
    }
    /* A magnitude of a diagonal ramp: sqrt(8^2 + 8^2). */
    float d[25];
    for (int i = 0; i < 25; i++)
        d[i] = (float)(i % 5 + i / 5);
    gimg_image id = float_image(5, 5, 1, d);
    gimg_kernel km = parse_ok("sobel", 0);
    gimg_image m = conv1(&id, &km, GIMG_BORDER_CLAMP, GIMG_ALPHA_PREMULTIPLY);
    CHECK(fpx(&m, 2, 2, 0) == sqrtf(128), "diagonal magnitude %g", fpx(&m, 2, 2, 0));
    gimg_image_free(&m), gimg_kernel_free(&km), gimg_image_free(&id);
    /* laplacian: 0 on a ramp, negative on a bright dot; emboss and edge. */
    gimg_kernel kl = parse_ok("laplacian", 0);
    m = conv1(&ix, &kl, GIMG_BORDER_CLAMP, GIMG_ALPHA_PREMULTIPLY);
    CHECK(fpx(&m, 2, 2, 0) == 0, "laplacian of a ramp");
    gimg_image_free(&m);
    float dot[25] = {0};
    dot[12] = 1;
    gimg_image idot = float_image(5, 5, 1, dot);
    m = conv1(&idot, &kl, GIMG_BORDER_CLAMP, GIMG_ALPHA_PREMULTIPLY);
    CHECK(fpx(&m, 2, 2, 0) == -4 && fpx(&m, 2, 1, 0) == 1, "laplacian of a dot");
    gimg_image_free(&m), gimg_kernel_free(&kl);
    gimg_kernel ke = parse_ok("edge", 0);
    m = conv1(&idot, &ke, GIMG_BORDER_ZERO, GIMG_ALPHA_PREMULTIPLY);
    CHECK(fpx(&m, 2, 2, 0) == 8 && fpx(&m, 1, 1, 0) == -1, "edge of a dot");
    gimg_image_free(&m), gimg_kernel_free(&ke);
    gimg_kernel kb = parse_ok("emboss", 0);
    m = conv1(&ix, &kb, GIMG_BORDER_CLAMP, GIMG_ALPHA_PREMULTIPLY);
    /* columns weigh -3, 1, 3: -3*1 + 1*2 + 3*3 */
    CHECK(fpx(&m, 2, 2, 0) == 8, "emboss of a rightward ramp: %g", fpx(&m, 2, 2, 0));
    gimg_image_free(&m), gimg_kernel_free(&kb);
    gimg_image_free(&idot), gimg_image_free(&ix), gimg_image_free(&iy);
}

/* ---------------------------------------------------------------- semantics */

/* The issue's table, for a row a b c d (values 1 2 3 4), two samples of
 * border each side: positions -2 -1 | 0 1 2 3 | 4 5. */
static const float k_border_rows[5][8] = {
    {1, 1, 1, 2, 3, 4, 4, 4}, /* clamp   a a | a b c d | d d */
    {2, 1, 1, 2, 3, 4, 4, 3}, /* mirror  b a | a b c d | d c */
    {3, 2, 1, 2, 3, 4, 3, 2}, /* reflect c b | a b c d | c b */
    {3, 4, 1, 2, 3, 4, 1, 2}, /* wrap    c d | a b c d | a b */
    {0, 0, 1, 2, 3, 4, 0, 0}, /* zero    0 0 | a b c d | 0 0 */
};

/* A 5x5 correlation kernel with a single 1 at (i, j) moves the image by
 * (j - 2, i - 2): out(x, y) = in(x + j - 2, y + i - 2). On a 4x4 image
 * whose sample (x, y) is (x + 1) + 10 (y + 1), every output equals
 * border(x + j - 2) + 10 border(y + i - 2): every edge and every corner. */
static void test_borders_every_edge_and_corner(void)
{
    float v[16];
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 4; x++)
            v[y * 4 + x] = (float)(x + 1) + 10.0f * (float)(y + 1);
    gimg_image im = float_image(4, 4, 1, v);
    for (int b = 0; b < 5; b++)
        for (int i = 0; i < 5; i++)
            for (int j = 0; j < 5; j++) {
                char spec[128], *p = spec;
                for (int r = 0; r < 5; r++)
                    for (int c = 0; c < 5; c++)
                        p += sprintf(p, "%d%s", r == i && c == j, c == 4 ? (r == 4 ? "" : ";") : " ");
                gimg_kernel k = parse_ok(spec, 1);
                gimg_image out = conv1(&im, &k, (gimg_border)b, GIMG_ALPHA_PREMULTIPLY);
                for (int y = 0; y < 4; y++)
                    for (int x = 0; x < 4; x++) {
                        float bx = k_border_rows[b][x + j - 2 + 2], by = k_border_rows[b][y + i - 2 + 2];
                        float want = b == GIMG_BORDER_ZERO && (bx == 0 || by == 0) ? 0 : bx + 10 * by;
                        CHECK(fpx(&out, x, y, 0) == want, "border %d tap (%d,%d) at (%d,%d): %g, want %g",
                              b, i, j, x, y, fpx(&out, x, y, 0), want);
                    }
                gimg_image_free(&out);
                gimg_kernel_free(&k);
            }
    gimg_image_free(&im);
}

/* Kernels larger than the image: offsets far outside wrap, mirror and
 * reflect more than once. */
static void test_kernel_larger_than_image(void)
{
    const float row[3] = {1, 2, 3};
    gimg_image im = float_image(3, 1, 1, row);
    /* 1x13 correlation kernels picking offset d = j - 6 in [-6, 6]. */
    for (int j = 0; j < 13; j++) {
        char spec[64], *p = spec;
        for (int c = 0; c < 13; c++)
            p += sprintf(p, "%d ", c == j);
        gimg_kernel k = parse_ok(spec, 1);
        for (int b = 0; b < 5; b++) {
            gimg_image out = conv1(&im, &k, (gimg_border)b, GIMG_ALPHA_PREMULTIPLY);
            for (int x = 0; x < 3; x++) {
                long q = x + j - 6;
                /* Independent expectations from the definitions. */
                float want;
                if (b == GIMG_BORDER_CLAMP) want = row[q < 0 ? 0 : q > 2 ? 2 : q];
                else if (b == GIMG_BORDER_WRAP) want = row[((q % 3) + 3) % 3];
                else if (b == GIMG_BORDER_ZERO) want = q < 0 || q > 2 ? 0 : row[q];
                else if (b == GIMG_BORDER_MIRROR) { static const int m[6] = {0, 1, 2, 2, 1, 0}; want = row[m[((q % 6) + 6) % 6]]; }
                else { static const int r[4] = {0, 1, 2, 1}; want = row[r[((q % 4) + 4) % 4]]; }
                CHECK(fpx(&out, x, 0, 0) == want, "border %d offset %ld: %g, want %g", b, q - x,
                      fpx(&out, x, 0, 0), want);
            }
            gimg_image_free(&out);
        }
        gimg_kernel_free(&k);
    }
    gimg_image_free(&im);
}

/* Convolution = correlation with the kernel rotated: [1 2 3] convolved at
 * x is 1 in(x+1) + 2 in(x) + 3 in(x-1); even sizes anchor up-left. */
static void test_convolve_vs_correlate(void)
{
    const float row[5] = {1, 10, 100, 1000, 10000};
    gimg_image im = float_image(5, 1, 1, row);
    gimg_kernel kc = parse_ok("1 2 3", 0), kr = parse_ok("1 2 3", 1);
    gimg_image c = conv1(&im, &kc, GIMG_BORDER_ZERO, GIMG_ALPHA_PREMULTIPLY);
    gimg_image r = conv1(&im, &kr, GIMG_BORDER_ZERO, GIMG_ALPHA_PREMULTIPLY);
    CHECK(fpx(&c, 2, 0, 0) == 1000 + 200 + 30, "convolve: %g", fpx(&c, 2, 0, 0));
    CHECK(fpx(&r, 2, 0, 0) == 10 + 200 + 3000, "correlate: %g", fpx(&r, 2, 0, 0));
    gimg_image_free(&c), gimg_image_free(&r), gimg_kernel_free(&kc), gimg_kernel_free(&kr);
    /* Even: [1 2] correlated, anchor at index 0: out(x) = in(x) + 2 in(x+1);
     * convolved: the anchor moves with the rotation: out(x) = 2 in(x) + in(x-1)... */
    kc = parse_ok("1 2", 0), kr = parse_ok("1 2", 1);
    c = conv1(&im, &kc, GIMG_BORDER_ZERO, GIMG_ALPHA_PREMULTIPLY);
    r = conv1(&im, &kr, GIMG_BORDER_ZERO, GIMG_ALPHA_PREMULTIPLY);
    CHECK(fpx(&r, 2, 0, 0) == 100 + 2000, "even correlate: %g", fpx(&r, 2, 0, 0));
    /* out(x) = sum k[i] in(x - (i - a)), a = 0: 1 in(x) + 2 in(x - 1). */
    CHECK(fpx(&c, 2, 0, 0) == 100 + 20, "even convolve: %g", fpx(&c, 2, 0, 0));
    gimg_image_free(&c), gimg_image_free(&r), gimg_kernel_free(&kc), gimg_kernel_free(&kr);
    /* 2-D asymmetric: conv(K) == correlate(rot180(K)) on a random image. */
    gimg_image rnd;
    gimg_image_alloc(&rnd, 9, 7, 3, GIMG_U8);
    testimg_fill_random(&rnd, 5);
    kc = parse_ok("1 -2 3 0; 4 5 -6 1; 7 8 9 2", 0);
    kr = parse_ok("2 9 8 7; 1 -6 5 4; 0 3 -2 1", 1);
    c = conv1(&rnd, &kc, GIMG_BORDER_REFLECT, GIMG_ALPHA_INCLUDE);
    r = conv1(&rnd, &kr, GIMG_BORDER_REFLECT, GIMG_ALPHA_INCLUDE);
    CHECK(same_image(&c, &r), "convolve(K) != correlate(rot180 K)");
    gimg_image_free(&c), gimg_image_free(&r), gimg_kernel_free(&kc), gimg_kernel_free(&kr);
    gimg_image_free(&rnd);
    gimg_image_free(&im);
}

static void test_alpha_modes(void)
{
    /* Gray+alpha 8-bit, 3x1: white but transparent | black opaque | black opaque. */
    gimg_image im;
    gimg_image_alloc(&im, 3, 1, 2, GIMG_U8);
    const uint8_t px[6] = {255, 0, 0, 255, 0, 255};
    memcpy(im.data, px, 6);
    gimg_kernel k = parse_ok("1 1 1", 0);
    gimg_conv_opts o;
    gimg_conv_opts_init(&o);
    o.kernels = &k;
    o.n_kernels = 1;
    o.scale = 1.0f / 3;
    o.border = GIMG_BORDER_ZERO;
    gimg_image out;
    /* premultiply: no white bleeds in; alpha is the box average (the sum
     * divided by the kernel's gain, 3; --scale does not apply to it). */
    CHECK(gimg_conv_reference(&im, &o, &out) == GIMG_OK, "premultiply");
    CHECK(out.data[2] == 0 && out.data[0] == 0, "colours bled: %d %d", out.data[0], out.data[2]);
    CHECK(out.data[1] == 85 && out.data[3] == 170 && out.data[5] == 170, "alpha %d %d %d",
          out.data[1], out.data[3], out.data[5]);
    gimg_image_free(&out);
    /* keep: alpha unchanged, colours convolved as they are (white bleeds). */
    o.alpha = GIMG_ALPHA_KEEP;
    CHECK(gimg_conv_reference(&im, &o, &out) == GIMG_OK, "keep");
    CHECK(out.data[1] == 0 && out.data[3] == 255 && out.data[5] == 255, "keep alpha");
    CHECK(out.data[2] == 85 && out.data[0] == 85, "keep colours %d %d", out.data[0], out.data[2]);
    gimg_image_free(&out);
    /* include: alpha convolved like a colour, scaled too. */
    o.alpha = GIMG_ALPHA_INCLUDE;
    CHECK(gimg_conv_reference(&im, &o, &out) == GIMG_OK, "include");
    CHECK(out.data[3] == 170 && out.data[1] == 85 && out.data[2] == 85, "include: %d %d %d",
          out.data[1], out.data[2], out.data[3]);
    gimg_image_free(&out);
    /* An opaque image gives the same colours in every mode, whatever the
     * kernel's gain (here 3, then scaled by 1/3). */
    memcpy(im.data, (uint8_t[]){10, 255, 40, 255, 70, 255}, 6);
    o.border = GIMG_BORDER_CLAMP;
    gimg_image outs[3];
    for (int a = 0; a < 3; a++) {
        o.alpha = (gimg_alpha_mode)a;
        CHECK(gimg_conv_reference(&im, &o, &outs[a]) == GIMG_OK, "mode %d", a);
    }
    for (int x = 0; x < 3; x++)
        CHECK(outs[0].data[2 * x] == outs[1].data[2 * x] && outs[1].data[2 * x] == outs[2].data[2 * x],
              "opaque pixel %d: %d %d %d", x, outs[0].data[2 * x], outs[1].data[2 * x], outs[2].data[2 * x]);
    CHECK(outs[1].data[2] == 40, "box of 10 40 70 is 40");
    for (int a = 0; a < 3; a++)
        gimg_image_free(&outs[a]);
    gimg_kernel_free(&k);
    gimg_image_free(&im);
}

/* 16-bit and float keep their type; --scale, --bias, --abs; rounding. */
static void test_types_and_epilogue(void)
{
    gimg_image im;
    gimg_image_alloc(&im, 3, 1, 1, GIMG_U16);
    const uint16_t v[3] = {1000, 60000, 3};
    memcpy(im.data, v, sizeof v);
    gimg_kernel k = parse_ok("-1 0 1", 1);
    gimg_conv_opts o;
    gimg_conv_opts_init(&o);
    o.kernels = &k;
    o.n_kernels = 1;
    gimg_image out;
    CHECK(gimg_conv_reference(&im, &o, &out) == GIMG_OK, "16-bit");
    const uint16_t *q = (const uint16_t *)out.data;
    CHECK(q[0] == 59000 && q[1] == 0 && q[2] == 0, "clamped: %d %d %d", q[0], q[1], q[2]);
    gimg_image_free(&out);
    o.absolute = 1;
    o.scale = 0.5f;
    o.bias = 0.5f; /* |0.5 v + 0.5|: 29500.5 rounds to even; -997 and -59997 turn positive */
    CHECK(gimg_conv_reference(&im, &o, &out) == GIMG_OK, "abs");
    q = (const uint16_t *)out.data;
    CHECK(q[0] == 29500 && q[1] == 498 && q[2] == 29998, "abs/scale/bias: %d %d %d", q[0], q[1], q[2]);
    gimg_image_free(&out);
    gimg_image_free(&im);
    const float fv[3] = {0.25f, -2.0f, 8.0f};
    gimg_image fi = float_image(3, 1, 1, fv);
    o.absolute = 0;
    o.scale = 1;
    o.bias = 0;
    CHECK(gimg_conv_reference(&fi, &o, &out) == GIMG_OK, "float");
    CHECK(out.sample == GIMG_F32 && fpx(&out, 0, 0, 0) == -2.25f && fpx(&out, 1, 0, 0) == 7.75f,
          "float stays float, unclamped: %g %g", fpx(&out, 0, 0, 0), fpx(&out, 1, 0, 0));
    gimg_image_free(&out);
    gimg_image_free(&fi);
    gimg_kernel_free(&k);
}

/* The fast path's 8-bit narrowing against integer arithmetic: v / 2 ties
 * round to even, --bias clamps at both ends, --abs after --scale -1;
 * 100 samples a row cover the vector blocks and the scalar tail. */
static void test_u8_rounding_fast(void)
{
    gimg_image im;
    gimg_image_alloc(&im, 100, 3, 1, GIMG_U8);
    for (int y = 0; y < 3; y++)
        for (int x = 0; x < 100; x++)
            gimg_row(&im, y)[x] = (uint8_t)(x * 37 + y * 101);
    gimg_kernel k = parse_ok("1", 0);
    gimg_conv_opts o;
    gimg_conv_opts_init(&o);
    o.kernels = &k;
    o.n_kernels = 1;
    static const struct { float scale, bias; int absolute; } cases[] = {
        {0.5f, 0, 0}, {1, -300, 0}, {1, 300, 0}, {-1, 0, 1}, {-1, 0, 0}, {-0.5f, 0, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        o.scale = cases[c].scale;
        o.bias = cases[c].bias;
        o.absolute = cases[c].absolute;
        gimg_image out;
        CHECK(gimg_conv_cpu(&im, &o, &out) == GIMG_OK, "%s", gimg_last_error());
        for (int y = 0; y < 3; y++)
            for (int x = 0; x < 100; x++) {
                int v = gimg_row(&im, y)[x], want;
                if (c == 0 || c == 5)
                    want = v / 2 + (v % 2 && (v / 2) % 2); /* ties to even */
                else if (c == 1 || c == 4)
                    want = 0;
                else if (c == 2)
                    want = 255;
                else
                    want = v;
                CHECK(gimg_row(&out, y)[x] == want, "case %zu: %d gives %d, want %d", c, v,
                      gimg_row(&out, y)[x], want);
            }
        gimg_image_free(&out);
    }
    gimg_kernel_free(&k);
    gimg_image_free(&im);
}

/* Chains stay in float: two shifts by one pixel are a shift by two, and
 * scaling by 1/3 then by 3 loses nothing to 8-bit rounding in between. */
static void test_chains(void)
{
    gimg_image im;
    gimg_image_alloc(&im, 7, 3, 3, GIMG_U8);
    testimg_fill_random(&im, 11);
    gimg_kernel k[3] = {parse_ok("0 0 1", 1), parse_ok("0 0 1", 1), parse_ok("0 0 0 0 1", 1)};
    gimg_conv_opts o;
    gimg_conv_opts_init(&o);
    o.kernels = k;
    o.n_kernels = 2;
    gimg_image a, b;
    CHECK(gimg_conv_reference(&im, &o, &a) == GIMG_OK, "chain");
    o.kernels = &k[2];
    o.n_kernels = 1;
    CHECK(gimg_conv_reference(&im, &o, &b) == GIMG_OK, "shift 2");
    CHECK(same_image(&a, &b), "two shifts by 1 != one shift by 2");
    gimg_image_free(&a), gimg_image_free(&b);
    gimg_kernel s[2] = {parse_ok("0.33333334", 1), parse_ok("3", 1)};
    o.kernels = s;
    o.n_kernels = 2;
    CHECK(gimg_conv_reference(&im, &o, &a) == GIMG_OK, "scale chain");
    CHECK(same_image(&a, &im), "1/3 then 3 in float is the identity on 8-bit samples");
    gimg_image_free(&a);
    for (int i = 0; i < 3; i++)
        gimg_kernel_free(&k[i]);
    gimg_kernel_free(&s[0]), gimg_kernel_free(&s[1]);
    gimg_image_free(&im);
}

/* Separable plans agree with the dense sum to within rounding. */
static void test_separable_close_to_dense(void)
{
    gimg_image im;
    gimg_image_alloc(&im, 40, 30, 3, GIMG_U8);
    testimg_fill_random(&im, 3);
    gimg_kernel ks = parse_ok("gaussian:1.5", 0), kd = parse_ok("gaussian:1.5", 0);
    kd.kind = GIMG_KERNEL_DENSE;
    gimg_image a = conv1(&im, &ks, GIMG_BORDER_MIRROR, GIMG_ALPHA_INCLUDE);
    gimg_image b = conv1(&im, &kd, GIMG_BORDER_MIRROR, GIMG_ALPHA_INCLUDE);
    int worst = 0;
    for (size_t i = 0; i < (size_t)40 * 30 * 3; i++) {
        int d = abs((int)a.data[i] - (int)b.data[i]);
        worst = d > worst ? d : worst;
    }
    CHECK(worst <= 1, "separable vs dense differ by %d", worst);
    gimg_image_free(&a), gimg_image_free(&b), gimg_kernel_free(&ks), gimg_kernel_free(&kd);
    gimg_image_free(&im);
}

/* ------------------------------------------------------ fast path == reference */

static int fast_equals_reference(const gimg_image *in, const gimg_conv_opts *o, const char *what)
{
    gimg_image ref, fast;
    gimg_status a = gimg_conv_reference(in, o, &ref), b = gimg_conv_cpu(in, o, &fast);
    CHECK(a == GIMG_OK && b == GIMG_OK, "%s: %s", what, gimg_last_error());
    if (a || b)
        return 0;
    int ok = same_image(&ref, &fast);
    CHECK(ok, "%s: %dx%d c%d %d-bit: fast path differs from the reference", what, in->width,
          in->height, in->channels, 8 * (int)in->sample);
    gimg_image_free(&ref);
    gimg_image_free(&fast);
    return ok;
}

static void test_fast_path_bit_identical(void)
{
    static const char *const specs[] = {
        "3 -1 2; 0.5 7 -4; 1 1 -2.5",       /* dense odd */
        "1 2 -3 4; 5 -6 7 8",               /* dense even */
        "1 2 1; 2 4 2; 1 2 1",              /* separable custom */
        "gaussian:1.2", "box:2", "sobel", "unsharp:0.8:1.5", "log:1", "emboss",
        "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 "
        "32 33 34 35 36 37 38 39 40 41", /* 41x1, wider than the image */
        "1;2;3;4;5;6;7;8;9;10;11;12;13;14;15;16;17;18;19;20;21;22;23", /* 1x23 */
    };
    static const gimg_sample samples[] = {GIMG_U8, GIMG_U16, GIMG_F32};
    static const int sizes[][2] = {{1, 1}, {37, 13}, {5, 40}, {67, 9}};
    uint64_t seed = 1;
    for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
        gimg_kernel k = parse_ok(specs[s], s % 2);
        for (size_t t = 0; t < 3; t++)
            for (int c = 1; c <= 4; c++)
                for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
                    gimg_image im;
                    gimg_image_alloc(&im, sizes[z][0], sizes[z][1], c, samples[t]);
                    testimg_fill_random(&im, seed++);
                    gimg_conv_opts o;
                    gimg_conv_opts_init(&o);
                    o.kernels = &k;
                    o.n_kernels = 1;
                    o.border = (gimg_border)(seed % 5);
                    o.alpha = (gimg_alpha_mode)(seed % 3);
                    if (seed % 4 == 0) {
                        o.scale = 0.75f;
                        o.bias = samples[t] == GIMG_F32 ? 0.5f : 100.0f;
                        o.absolute = 1;
                    }
                    char what[160];
                    snprintf(what, sizeof what, "'%s' border %d alpha %d", specs[s], o.border, o.alpha);
                    fast_equals_reference(&im, &o, what);
                    gimg_image_free(&im);
                }
        gimg_kernel_free(&k);
    }
}

static void test_fast_path_chains_and_large(void)
{
    gimg_kernel k[3] = {parse_ok("gaussian:2", 0), parse_ok("sharpen", 0), parse_ok("scharr", 0)};
    for (int c = 1; c <= 4; c++)
        for (int a = 0; a < 3; a++) {
            gimg_image im;
            gimg_image_alloc(&im, 70, 33, c, c % 2 ? GIMG_U8 : GIMG_U16);
            testimg_fill_random(&im, 100 + c);
            gimg_conv_opts o;
            gimg_conv_opts_init(&o);
            o.kernels = k;
            o.n_kernels = 3;
            o.alpha = (gimg_alpha_mode)a;
            o.border = (gimg_border)((c + a) % 5);
            fast_equals_reference(&im, &o, "chain gaussian:2 sharpen scharr");
            gimg_image_free(&im);
        }
    for (int i = 0; i < 3; i++)
        gimg_kernel_free(&k[i]);
    /* A 127x127 dense kernel on an image smaller than it, and a large
     * image through the threaded, vectorized path. */
    gimg_kernel big = parse_ok("unsharp:21:1", 0);
    CHECK(big.width == 127 && big.kind == GIMG_KERNEL_DENSE, "127x127 dense");
    gimg_image im;
    gimg_image_alloc(&im, 50, 40, 3, GIMG_U8);
    testimg_fill_random(&im, 9);
    gimg_conv_opts o;
    gimg_conv_opts_init(&o);
    o.kernels = &big;
    o.n_kernels = 1;
    for (int b = 0; b < 5; b++) {
        o.border = (gimg_border)b;
        fast_equals_reference(&im, &o, "127x127");
    }
    gimg_image_free(&im);
    gimg_kernel_free(&big);
    gimg_kernel g = parse_ok("gaussian:3", 0);
    gimg_image_alloc(&im, 613, 411, 3, GIMG_U8);
    testimg_fill_random(&im, 10);
    o.kernels = &g;
    o.border = GIMG_BORDER_CLAMP;
    fast_equals_reference(&im, &o, "613x411 gaussian:3");
    gimg_image_free(&im);
    gimg_kernel_free(&g);
}

/* ------------------------------------------- premultiply: alpha is averaged */

static double px_get(const gimg_image *im, int x, int y, int c)
{
    const unsigned char *row = gimg_row(im, y);
    size_t i = (size_t)x * im->channels + c;
    switch (im->sample) {
    case GIMG_U8: return row[i];
    case GIMG_U16: return ((const uint16_t *)row)[i];
    default: return ((const float *)row)[i];
    }
}

static void px_set(gimg_image *im, int x, int y, int c, double v)
{
    unsigned char *row = gimg_row(im, y);
    size_t i = (size_t)x * im->channels + c;
    switch (im->sample) {
    case GIMG_U8: row[i] = (uint8_t)v; break;
    case GIMG_U16: ((uint16_t *)row)[i] = (uint16_t)v; break;
    default: ((float *)row)[i] = (float)v;
    }
}

/* Runs o through the reference and the fast path, which must agree bit for
 * bit; returns the reference's result. */
static gimg_image conv_both(const gimg_image *in, const gimg_conv_opts *o, const char *what)
{
    gimg_image out;
    CHECK(gimg_conv_reference(in, o, &out) == GIMG_OK, "%s: %s", what, gimg_last_error());
    fast_equals_reference(in, o, what);
    return out;
}

/* Each layout: samples, a tolerance for colours (one step of the type, or
 * relative for float) and a semi-transparent alpha. */
static const struct { gimg_sample s; double max, tol, alpha; } k_alpha_types[] = {
    {GIMG_U8, 255, 1, 100}, {GIMG_U16, 65535, 1, 30000}, {GIMG_F32, 1, 2e-6, 0.4},
};

/* RGBA (and gray+alpha) w x h, colours a seeded pattern in [0, max/2],
 * alpha a, or for a < 0 a gradient along x. */
static gimg_image alpha_image(int w, int h, int C, gimg_sample s, double max, double a)
{
    gimg_image im;
    if (gimg_image_alloc(&im, w, h, C, s))
        abort();
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            for (int c = 0; c < C - 1; c++) {
                double v = (double)((x * 37 + y * 11 + c * 53) % 128) / 255;
                px_set(&im, x, y, c, s == GIMG_F32 ? v * max : floor(v * max));
            }
            /* gradient: 20, 40, ... in 8-bit terms (max * (x + 1) / 12.75) */
            double g = s == GIMG_F32 ? max * (x + 1) * 20 / 255 : floor(max * (x + 1) * 20 / 255);
            px_set(&im, x, y, C - 1, a < 0 ? g : a);
        }
    return im;
}

/* A uniform semi-transparent alpha stays as it is through "1 1 1" (gain 3)
 * with --scale 1/3, and the colours are the box average, as --alpha keep
 * gives them (the old code tripled alpha). */
static void test_premultiply_alpha_gain(void)
{
    gimg_kernel k = parse_ok("1 1 1", 0);
    for (size_t t = 0; t < 3; t++)
        for (int C = 2; C <= 4; C += 2) {
            const double max = k_alpha_types[t].max, A = k_alpha_types[t].alpha;
            gimg_image im = alpha_image(9, 4, C, k_alpha_types[t].s, max, A);
            gimg_conv_opts o;
            gimg_conv_opts_init(&o);
            o.kernels = &k;
            o.n_kernels = 1;
            o.scale = 1.0f / 3;
            gimg_image pre = conv_both(&im, &o, "1 1 1 premultiply");
            o.alpha = GIMG_ALPHA_KEEP;
            gimg_image keep = conv_both(&im, &o, "1 1 1 keep");
            for (int y = 0; y < 4; y++)
                for (int x = 0; x < 9; x++) {
                    double a = px_get(&pre, x, y, C - 1);
                    CHECK(t == 2 ? fabs(a - A) <= 1e-6 : a == A, "%d-bit c%d (%d,%d): alpha %g, want %g",
                          8 * (int)im.sample, C, x, y, a, A);
                    for (int c = 0; c < C - 1; c++) {
                        double p = px_get(&pre, x, y, c), q = px_get(&keep, x, y, c);
                        /* the box average of the input, by hand */
                        double want = 0;
                        for (int j = -1; j <= 1; j++)
                            want += px_get(&im, x + j < 0 ? 0 : x + j > 8 ? 8 : x + j, y, c) / 3;
                        double tol = k_alpha_types[t].tol;
                        CHECK(fabs(p - q) <= tol && fabs(p - want) <= (t == 2 ? tol : 0.5 + 1e-9),
                              "%d-bit c%d (%d,%d,%d): premultiply %g, keep %g, average %g",
                              8 * (int)im.sample, C, x, y, c, p, q, want);
                    }
                }
            gimg_image_free(&pre), gimg_image_free(&keep), gimg_image_free(&im);
        }
    gimg_kernel_free(&k);
}

/* Zero-sum kernels keep the input's alpha: an opaque image stays opaque,
 * with exactly --alpha keep's colours; a uniform semi-transparent alpha
 * stays too, with keep's colours to within rounding; a gradient's alpha is
 * kept sample for sample (the old code made them all transparent). */
static void test_premultiply_alpha_zero_gain(void)
{
    static const char *const specs[] = {"sobel-x", "laplacian", "edge", "sobel", "log:1",
                                        "1 -2 1"};
    for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
        gimg_kernel k = parse_ok(specs[s], 0);
        for (size_t t = 0; t < 3; t++)
            for (int C = 2; C <= 4; C += 2)
                for (int mode = 0; mode < 3; mode++) { /* opaque, uniform, gradient */
                    const double max = k_alpha_types[t].max;
                    const double A = mode == 0 ? max : mode == 1 ? k_alpha_types[t].alpha : -1;
                    gimg_image im = alpha_image(9, 5, C, k_alpha_types[t].s, max, A);
                    gimg_conv_opts o;
                    gimg_conv_opts_init(&o);
                    o.kernels = &k;
                    o.n_kernels = 1;
                    o.border = (gimg_border)(s % 5);
                    if (s % 2) {
                        o.absolute = 1;
                        o.scale = 0.5f;
                    }
                    char what[96];
                    snprintf(what, sizeof what, "'%s' %d-bit c%d alpha mode %d", specs[s],
                             8 * (int)im.sample, C, mode);
                    gimg_image pre = conv_both(&im, &o, what);
                    o.alpha = GIMG_ALPHA_KEEP;
                    gimg_image keep = conv_both(&im, &o, what);
                    for (int y = 0; y < 5; y++)
                        for (int x = 0; x < 9; x++) {
                            CHECK(px_get(&pre, x, y, C - 1) == px_get(&im, x, y, C - 1),
                                  "%s (%d,%d): alpha %g, input %g", what, x, y,
                                  px_get(&pre, x, y, C - 1), px_get(&im, x, y, C - 1));
                            if (mode == 2)
                                continue;
                            for (int c = 0; c < C - 1; c++) {
                                double p = px_get(&pre, x, y, c), q = px_get(&keep, x, y, c);
                                double tol = mode == 0 ? 0 : t == 2 ? 1e-5 * (1 + fabs(q)) : 1;
                                CHECK(fabs(p - q) <= tol, "%s (%d,%d,%d): premultiply %g, keep %g",
                                      what, x, y, c, p, q);
                            }
                        }
                    gimg_image_free(&pre), gimg_image_free(&keep), gimg_image_free(&im);
                }
        gimg_kernel_free(&k);
    }
}

/* A semi-transparent gradient through box:1 (gain 1) and through the same
 * box unnormalized (gain 9) with --scale 1/9: alpha is the box average of
 * alpha, colours the alpha-weighted average of the colours. */
static void test_premultiply_alpha_box_average(void)
{
    gimg_kernel ks[2] = {parse_ok("box:1", 0), parse_ok("1 1 1; 1 1 1; 1 1 1", 0)};
    for (int n = 0; n < 2; n++)
        for (size_t t = 0; t < 3; t++)
            for (int C = 2; C <= 4; C += 2) {
                const double max = k_alpha_types[t].max;
                const int W = 11, H = 4;
                gimg_image im = alpha_image(W, H, C, k_alpha_types[t].s, max, -1);
                gimg_conv_opts o;
                gimg_conv_opts_init(&o);
                o.kernels = &ks[n];
                o.n_kernels = 1;
                o.scale = n ? 1.0f / 9 : 1.0f; /* colours: sums; alpha: never scaled */
                char what[96];
                snprintf(what, sizeof what, "%s %d-bit c%d", n ? "box sum" : "box:1",
                         8 * (int)im.sample, C);
                gimg_image out = conv_both(&im, &o, what);
                for (int y = 0; y < H; y++)
                    for (int x = 0; x < W; x++) {
                        double asum = 0, csum[3] = {0};
                        for (int i = -1; i <= 1; i++)
                            for (int j = -1; j <= 1; j++) {
                                int xx = x + j < 0 ? 0 : x + j >= W ? W - 1 : x + j;
                                int yy = y + i < 0 ? 0 : y + i >= H ? H - 1 : y + i;
                                double a = px_get(&im, xx, yy, C - 1);
                                asum += a;
                                for (int c = 0; c < C - 1; c++)
                                    csum[c] += a * px_get(&im, xx, yy, c);
                            }
                        double want = asum / 9, got = px_get(&out, x, y, C - 1);
                        double tol = t == 2 ? 1e-6 : 0.5 + 1e-6;
                        CHECK(fabs(got - want) <= tol, "%s (%d,%d): alpha %g, box average %g",
                              what, x, y, got, want);
                        for (int c = 0; c < C - 1; c++) {
                            double cw = csum[c] / asum, cg = px_get(&out, x, y, c);
                            CHECK(fabs(cg - cw) <= (t == 2 ? 1e-5 : 0.5 + 1e-3),
                                  "%s (%d,%d,%d): colour %g, weighted average %g", what, x, y,
                                  c, cg, cw);
                        }
                    }
                gimg_image_free(&out), gimg_image_free(&im);
            }
    gimg_kernel_free(&ks[0]), gimg_kernel_free(&ks[1]);
}

/* ------------------------------------------ samples in the file's units */

/* An image with a maxval (samples in 0..maxval): every 8/16-bit result is
 * clamped to the maxval, and the output keeps it. The plain convolution of
 * the same samples as a full-range image, clamped here, is the answer;
 * the reference, the fast path and gimg_conv (CPU) give it bit for bit.
 * Kernels with gains over 1 and negative lobes, every alpha mode, with and
 * without scale and bias. */
static void test_maxval_clamp(void)
{
    gimg_ctx *ctx = testimg_cpu_ctx();
    CHECK(ctx != NULL, "no CPU context");
    if (!ctx)
        return;
    static const char *const specs[] = {"0 0 0; 0 2 0; 0 0 0", "sharpen", "gaussian:1.5",
                                        "sobel", "1 2 1; 2 4 2; 1 2 1"};
    static const struct {
        gimg_sample s;
        unsigned maxval;
    } types[] = {{GIMG_U16, 4095}, {GIMG_U16, 1023}, {GIMG_U8, 100}, {GIMG_U16, 255}};
    uint64_t seed = 7000;
    for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) {
        gimg_kernel ker = parse_ok(specs[k], 0);
        for (size_t t = 0; t < sizeof types / sizeof *types; t++)
            for (int c = 1; c <= 4; c++) {
                const unsigned m = types[t].maxval;
                gimg_image im, plain_in;
                gimg_image_alloc(&im, 23, 11, c, types[t].s);
                testimg_fill_maxval(&im, seed++, m);
                plain_in = im;
                plain_in.maxval = 0;
                gimg_conv_opts o;
                gimg_conv_opts_init(&o);
                o.kernels = &ker;
                o.n_kernels = 1;
                o.alpha = (gimg_alpha_mode)(seed % 3);
                if (seed % 2) {
                    o.scale = 1.5f;
                    o.bias = 7.0f;
                }
                char what[96];
                snprintf(what, sizeof what, "'%s' maxval %u c%d alpha %d", specs[k], m, c, o.alpha);
                gimg_image want, ref, fast, pub;
                if (gimg_conv_reference(&plain_in, &o, &want) ||
                    gimg_conv_reference(&im, &o, &ref) || gimg_conv_cpu(&im, &o, &fast) ||
                    gimg_conv(ctx, &im, &o, &pub)) {
                    CHECK(0, "%s: %s", what, gimg_last_error());
                    gimg_image_free(&im);
                    continue;
                }
                int clamped = 0, bad = 0;
                for (int y = 0; y < 11 && !bad; y++)
                    for (int x = 0; x < 23 && !bad; x++)
                        for (int ch = 0; ch < c && !bad; ch++) {
                            double w = px_get(&want, x, y, ch), g = px_get(&ref, x, y, ch);
                            clamped += w > m;
                            if (g != (w > m ? m : w)) {
                                CHECK(0, "%s: (%d,%d,%d) is %g, want min(%g, %u)", what, x, y,
                                      ch, g, w, m);
                                bad = 1;
                            }
                        }
                CHECK(same_image(&ref, &fast) && same_image(&ref, &pub),
                      "%s: fast or public path differs from the reference", what);
                CHECK(ref.maxval == m && fast.maxval == m && pub.maxval == m,
                      "%s: output maxval %u %u %u", what, ref.maxval, fast.maxval, pub.maxval);
                if (k == 0 && o.alpha == GIMG_ALPHA_INCLUDE)
                    CHECK(clamped > 0, "%s: a gain of 2 clamped nothing", what);
                gimg_image_free(&want), gimg_image_free(&ref), gimg_image_free(&fast);
                gimg_image_free(&pub), gimg_image_free(&im);
            }
        gimg_kernel_free(&ker);
    }
    gimg_ctx_close(ctx);
}

/* Premultiplication with a maxval: an opaque alpha is the maxval, and
 * gives the colours of the image without alpha (to within a step of
 * rounding) and an alpha that stays the maxval. */
static void test_maxval_premultiply_opaque(void)
{
    gimg_kernel ker = parse_ok("gaussian:1.2", 0);
    for (int C = 2; C <= 4; C += 2) {
        gimg_image rgba, colours;
        gimg_image_alloc(&rgba, 19, 9, C, GIMG_U16);
        gimg_image_alloc(&colours, 19, 9, C - 1, GIMG_U16);
        testimg_fill_maxval(&colours, 31 + C, 4095);
        for (int y = 0; y < 9; y++)
            for (int x = 0; x < 19; x++) {
                for (int c = 0; c < C - 1; c++)
                    px_set(&rgba, x, y, c, px_get(&colours, x, y, c));
                px_set(&rgba, x, y, C - 1, 4095);
            }
        rgba.maxval = 4095;
        gimg_conv_opts o;
        gimg_conv_opts_init(&o);
        o.kernels = &ker;
        o.n_kernels = 1;
        gimg_image a = conv_both(&rgba, &o, "opaque maxval 4095"),
                   b = conv_both(&colours, &o, "colours maxval 4095");
        double worst = 0;
        int alpha_ok = 1;
        for (int y = 0; y < 9; y++)
            for (int x = 0; x < 19; x++) {
                for (int c = 0; c < C - 1; c++)
                    worst = fmax(worst, fabs(px_get(&a, x, y, c) - px_get(&b, x, y, c)));
                alpha_ok &= px_get(&a, x, y, C - 1) == 4095;
            }
        CHECK(worst <= 1 && alpha_ok, "c%d: colours differ by %g, alpha kept %d", C, worst,
              alpha_ok);
        gimg_image_free(&a), gimg_image_free(&b), gimg_image_free(&rgba);
        gimg_image_free(&colours);
    }
    gimg_kernel_free(&ker);
}

/* --device auto's model: the GPU never for kernels cheaper than the
 * transfers, sooner for larger kernels and fewer CPU threads, never below
 * the floor. */
static void test_auto_threshold(void)
{
    gimg_kernel k3 = parse_ok("1 2 3; 4 5 6; 7 8 10", 0), k31 = parse_ok("unsharp:5", 0),
                k127 = parse_ok("unsharp:21", 0);
    gimg_conv_opts o;
    gimg_conv_opts_init(&o);
    o.n_kernels = 1;
    o.kernels = &k3;
    CHECK(gimg_conv_auto_min_bytes(&o, GIMG_U8, 16) == SIZE_MAX, "3x3 with 16 threads stays on the CPU");
    o.kernels = &k31;
    size_t a16 = gimg_conv_auto_min_bytes(&o, GIMG_U8, 16), a2 = gimg_conv_auto_min_bytes(&o, GIMG_U8, 2);
    size_t f16 = gimg_conv_auto_min_bytes(&o, GIMG_F32, 16);
    /* Issue 31: 4096x4096 RGB (50.3 MB) through a dense 31x31 kernel on 16
     * threads is the CPU's (221-248 ms against 482-575 on the GPU). */
    CHECK(a16 > 50331648 && a16 < 70000000, "31x31, 16 threads: from %zu bytes", a16);
    CHECK(a2 < a16 && f16 > a16, "fewer threads: sooner (%zu); float (4 bytes a sample): later (%zu)", a2, f16);
    o.kernels = &k127;
    CHECK(gimg_conv_auto_min_bytes(&o, GIMG_U8, 1) == GIMG_CONV_GPU_MIN_BYTES, "127x127 on one thread: the floor");
    gimg_kernel_free(&k3), gimg_kernel_free(&k31), gimg_kernel_free(&k127);
}

/* A flat list of n*n numbers is n x n (as ImageMagick's -convolve reads
 * it); other counts, and any list with a ';', keep their rows. */
static void test_parse_flat_lists(void)
{
    gimg_kernel k = parse_ok("1,2,3,4,5,6,7,8,9", 1);
    CHECK(k.width == 3 && k.height == 3 && k.anchor_x == 1 && k.anchor_y == 1, "9 values: %dx%d",
          k.width, k.height);
    for (int t = 0; t < 9; t++)
        CHECK(k.taps[t] == (float)(t + 1), "row-major, as written: tap %d is %g", t, k.taps[t]);
    gimg_kernel_free(&k);
    k = parse_ok(" 1 2 3 4 5 6 7 8 9 ", 0);
    CHECK(k.width == 3 && k.height == 3 && k.taps[0] == 9 && k.taps[8] == 1 && k.taps[5] == 4,
          "blanks, convolution rotates the 3x3");
    gimg_kernel_free(&k);
    k = parse_ok("1 2 3 4", 1);
    CHECK(k.width == 2 && k.height == 2 && k.taps[2] == 3 && k.anchor_x == 0 && k.anchor_y == 0,
          "4 values: 2x2, anchor up-left");
    gimg_kernel_free(&k);
    static const struct { const char *spec; int w, h; } keep[] = {
        {"1", 1, 1}, {"1 2", 2, 1}, {"1 2 1", 3, 1}, {"1,1,1,1,1,1,1,1", 8, 1},
        {"1 2 3 4;", 4, 1}, {"1 2 3 4 5 6 7 8 9;", 9, 1}, {"1;2;3;4", 1, 4},
        {"1 2 3 4\n", 2, 2}, /* a newline ends the only row: still a flat list */
    };
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        k = parse_ok(keep[i].spec, 1);
        CHECK(k.width == keep[i].w && k.height == keep[i].h, "'%s': %dx%d, want %dx%d",
              keep[i].spec, k.width, k.height, keep[i].w, keep[i].h);
        gimg_kernel_free(&k);
    }
    /* A file's one line is a flat list too. */
    const char *text = "# a 5x5 binomial, as one line\n1 4 6 4 1 4 16 24 16 4 6 24 36 24 6 "
                       "4 16 24 16 4 1 4 6 4 1\n";
    CHECK(gimg_kernel_parse_text(text, strlen(text), "f", 1, 0, &k) == GIMG_OK && k.width == 5 &&
              k.height == 5 && k.taps[12] == 36 && k.kind == GIMG_KERNEL_SEPARABLE,
          "one line of 25: %dx%d %s", k.width, k.height, gimg_last_error());
    gimg_kernel_free(&k);
    /* The largest flat list: 255 * 255 values; one more is too large. */
    const int most = GIMG_KERNEL_MAX_SIDE * GIMG_KERNEL_MAX_SIDE;
    char *big = malloc((size_t)(most + 1) * 2 + 1), *p = big;
    for (int i = 0; i < most; i++)
        p += sprintf(p, "1 ");
    k = parse_ok(big, 0);
    CHECK(k.width == 255 && k.height == 255, "255*255 values: %dx%d", k.width, k.height);
    gimg_kernel_free(&k);
    strcpy(p, "1");
    CHECK(gimg_kernel_parse(big, 0, 0, &k) == GIMG_E_USAGE && strstr(gimg_last_error(), "too large"),
          "255*255 + 1 values: %s", gimg_last_error());
    gimg_kernel_free(&k);
    /* 300 values: no square, one row, over 255 columns. */
    big[600] = '\0';
    CHECK(gimg_kernel_parse(big, 0, 0, &k) == GIMG_E_USAGE && strstr(gimg_last_error(), "too large"),
          "a row of 300: %s", gimg_last_error());
    gimg_kernel_free(&k);
    /* A first line of 256 values followed by a second line is no flat list. */
    big[512] = '\n';
    big[513] = '\0';
    strcat(big, "1 2\n");
    CHECK(gimg_kernel_parse_text(big, strlen(big), "f", 0, 0, &k) == GIMG_E_USAGE &&
              strstr(gimg_last_error(), "too large"),
          "256 columns then a row: %s", gimg_last_error());
    gimg_kernel_free(&k);
    free(big);
}

/* normalize: divided by the sum unless it is zero (within the taps'
 * precision); named kernels never. */
static void test_parse_normalize(void)
{
    gimg_kernel k;
    const char *binomial = "1 4 6 4 1; 4 16 24 16 4; 6 24 36 24 6; 4 16 24 16 4; 1 4 6 4 1";
    CHECK(gimg_kernel_parse(binomial, 0, 1, &k) == GIMG_OK, "%s", gimg_last_error());
    double sum = 0;
    for (int t = 0; t < 25; t++)
        sum += k.taps[t];
    CHECK(sum == 1 && k.taps[12] == 36.0f / 256 && k.taps[0] == 1.0f / 256,
          "binomial / 256: sum %g, centre %g", sum, k.taps[12]);
    CHECK(k.kind == GIMG_KERNEL_SEPARABLE && k.divided_by == 256, "still separable, divided by %g",
          k.divided_by);
    gimg_kernel_free(&k);
    CHECK(gimg_kernel_parse(binomial, 0, 0, &k) == GIMG_OK && k.taps[12] == 36 && k.divided_by == 0,
          "as written");
    gimg_kernel_free(&k);
    /* A negative sum divides too: -2 at the centre is the identity, its
     * zeros +0 (not -0), so that it is planned as separable. */
    CHECK(gimg_kernel_parse("0 0 0; 0 -2 0; 0 0 0", 0, 1, &k) == GIMG_OK && k.taps[4] == 1 &&
              !signbit(k.taps[0]) && k.divided_by == -2 && k.kind == GIMG_KERNEL_SEPARABLE,
          "negative sum: centre %g, corner %g", k.taps[4], k.taps[0]);
    gimg_kernel_free(&k);
    /* Zero sums, exact and within the decimals' rounding, stay as written. */
    static const char *const zero[] = {"-1 0 1", "0.1 0.2 -0.3", "0.7 -0.1; -0.2 -0.4", "0"};
    for (size_t i = 0; i < sizeof zero / sizeof *zero; i++) {
        gimg_kernel a, b;
        CHECK(gimg_kernel_parse(zero[i], 1, 1, &a) == GIMG_OK &&
                  gimg_kernel_parse(zero[i], 1, 0, &b) == GIMG_OK,
              "'%s': %s", zero[i], gimg_last_error());
        CHECK(a.width == b.width && a.divided_by == 0 &&
                  !memcmp(a.taps, b.taps, (size_t)a.width * a.height * sizeof(float)),
              "'%s' (sum 0) is not normalized", zero[i]);
        gimg_kernel_free(&a);
        gimg_kernel_free(&b);
    }
    /* A kernel summing to 1 is unchanged, bit for bit. */
    gimg_kernel a, b;
    CHECK(gimg_kernel_parse("0.25 0.5 0.25", 1, 1, &a) == GIMG_OK &&
              gimg_kernel_parse("0.25 0.5 0.25", 1, 0, &b) == GIMG_OK &&
              !memcmp(a.taps, b.taps, 3 * sizeof(float)) && a.divided_by == 0,
          "sum 1 unchanged");
    gimg_kernel_free(&a);
    gimg_kernel_free(&b);
    /* Named kernels ignore it (sharpen sums to 1, edge to 0, both as defined). */
    CHECK(gimg_kernel_parse("emboss", 0, 1, &a) == GIMG_OK && a.taps[0] == -2 && a.taps[8] == 2,
          "emboss unchanged");
    gimg_kernel_free(&a);
}

/* A kernel file is read no further than GIMG_KERNEL_MAX_FILE_BYTES: a file
 * of exactly that size (255 x 255 taps of 64 bytes) is a kernel, one byte
 * more is refused, and endless devices are refused at once. */
static void test_kernel_file_bound(void)
{
    char path[] = "/tmp/unit_conv_bigXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0)
        return;
    FILE *f = fdopen(fd, "w");
    const int side = GIMG_KERNEL_MAX_SIDE;
    for (int i = 0; i < side; i++)
        for (int j = 0; j < side; j++) /* "1." and 61 zeros: 63 characters, and a separator */
            fprintf(f, "1.%061d%c", 0, j == side - 1 ? '\n' : ' ');
    fclose(f);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && (size_t)sb.st_size == GIMG_KERNEL_MAX_FILE_BYTES,
          "the file is %lld bytes", (long long)sb.st_size);
    char spec[64];
    snprintf(spec, sizeof spec, "@%s", path);
    gimg_kernel k;
    CHECK(gimg_kernel_parse(spec, 0, 0, &k) == GIMG_OK && k.width == side && k.height == side &&
              k.taps[0] == 1,
          "the largest kernel file: %s", gimg_last_error());
    gimg_kernel_free(&k);
    fd = open(path, O_WRONLY | O_APPEND);
    CHECK(fd >= 0 && write(fd, "\n", 1) == 1, "append");
    if (fd >= 0)
        close(fd);
    CHECK(gimg_kernel_parse(spec, 0, 0, &k) == GIMG_E_USAGE && strstr(gimg_last_error(), "too large"),
          "one byte more: %s", gimg_last_error());
    gimg_kernel_free(&k);
    unlink(path);
    static const char *const endless[] = {"@/dev/zero", "@/dev/urandom"};
    for (size_t i = 0; i < 2; i++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        CHECK(gimg_kernel_parse(endless[i], 0, 0, &k) == GIMG_E_USAGE &&
                  strstr(gimg_last_error(), "too large"),
              "%s: %s", endless[i], gimg_last_error());
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
        CHECK(ms < 1000, "%s refused in %.0f ms", endless[i], ms);
        gimg_kernel_free(&k);
    }
}

/* ------------------------------------------------------------ bands */

/* in convolved band by band (gimg_conv_bands_*) in bands of `rows` rows:
 * every output row given once, in order, equal to whole's. */
static int bands_match(const gimg_image *in, const gimg_conv_opts *o, const gimg_image *whole,
                       int rows, const char *what)
{
    gimg_conv_bands *cb;
    gimg_status st = gimg_conv_bands_begin(NULL, in, o, &cb);
    CHECK(st == GIMG_OK && cb, "%s: begin: %s", what, st ? gimg_last_error() : "no bands");
    if (st || !cb)
        return 0;
    const size_t row_bytes = (size_t)in->width * gimg_pixel_bytes(in);
    int next = 0, ok = 1;
    for (int y = 0; ok && y < in->height; y += rows) {
        gimg_image band = *in, out;
        band.data = gimg_row(in, y);
        band.height = in->height - y < rows ? in->height - y : rows;
        int y0;
        if ((st = gimg_conv_bands_add(cb, &band, &out, &y0))) {
            CHECK(0, "%s: bands of %d: %s", what, rows, gimg_last_error());
            ok = 0;
            break;
        }
        if (out.height && y0 != next) {
            CHECK(0, "%s: bands of %d: rows from %d, expected %d", what, rows, y0, next);
            ok = 0;
        }
        for (int i = 0; ok && i < out.height; i++)
            if (memcmp(gimg_row(&out, i), gimg_row(whole, y0 + i), row_bytes)) {
                CHECK(0, "%s: bands of %d: row %d differs", what, rows, y0 + i);
                ok = 0;
            }
        CHECK(!ok || !out.height || out.maxval == whole->maxval, "%s: maxval %u, whole %u", what,
              out.maxval, whole->maxval);
        next += out.height;
    }
    CHECK(!ok || next == in->height, "%s: bands of %d gave %d rows of %d", what, rows, next,
          in->height);
    gimg_conv_bands_free(cb);
    return ok && next == in->height;
}

/* By sub-images of at most m rows (how the GPU computes an image too
 * large for it: gimg_conv_cpu_sub_images is its CPU reference), equal to
 * whole; refused (GIMG_E_LIMIT) only where m is under the rows one output
 * row reads, which every kernel here has more than 1 of, and none more
 * than the image's 37. Small m put sub-images' edges near every row and
 * both image edges. */
static void sub_images_match(const gimg_image *in, const gimg_conv_opts *o,
                             const gimg_image *whole, const char *what)
{
    static const int max_rows[] = {1, 6, 9, 13, 14, 19, 36, 40};
    const size_t row_bytes = (size_t)in->width * gimg_pixel_bytes(in);
    for (size_t i = 0; i < sizeof max_rows / sizeof *max_rows; i++) {
        const int m = max_rows[i];
        gimg_image sub;
        gimg_status st = gimg_conv_cpu_sub_images(in, o, m, &sub);
        CHECK(st == GIMG_OK || (st == GIMG_E_LIMIT && m < in->height),
              "%s: sub-images of %d rows: %s", what, m, gimg_last_error());
        CHECK(m > 1 || st == GIMG_E_LIMIT, "%s: sub-images of 1 row were not refused", what);
        if (st)
            continue;
        int bad = -1;
        for (int y = 0; y < in->height && bad < 0; y++)
            if (memcmp(gimg_row(&sub, y), gimg_row(whole, y), row_bytes))
                bad = y;
        CHECK(bad < 0 && sub.maxval == whole->maxval,
              "%s: sub-images of %d rows: row %d differs (maxval %u, whole %u)", what, m, bad,
              sub.maxval, whole->maxval);
        gimg_image_free(&sub);
    }
}

/* Band by band equals whole, bit for bit: separable, dense with anchors
 * off centre, magnitudes, chains, every border but wrap (which has no
 * bands), every alpha mode, a maxval, and bands of 1 row, awkward
 * heights, shorter than the kernels' halos and taller than the image. */
static void test_bands(void)
{
    static const char *const specs[] = {"gaussian:2", "1 2 3; 4 5 6; 7 8 9; 1 1 1; 0 2 0",
                                        "sobel", "unsharp:3:1.5"};
    gimg_kernel chain[3] = {parse_ok("box:5", 0), parse_ok("1; 2; 3; 4; 5; 6; 7", 1),
                            parse_ok("scharr", 0)};
    for (int s = 0; s < 5; s++)
        for (int c = 1; c <= 4; c++) {
            gimg_kernel k = s < 4 ? parse_ok(specs[s], 0) : (gimg_kernel){0};
            gimg_image im;
            const gimg_sample sample = c == 2 ? GIMG_U16 : c == 3 && s == 1 ? GIMG_F32 : GIMG_U8;
            if (gimg_image_alloc(&im, 23 + s, 37, c, sample))
                return;
            testimg_fill_random(&im, 200 + s * 4 + c);
            if (sample == GIMG_U8 && c == 1)
                for (int y = 0; y < im.height; y++) /* a maxval: samples 0..200 */
                    for (int x = 0; x < im.width; x++)
                        gimg_row(&im, y)[x] = (unsigned char)(gimg_row(&im, y)[x] % 201);
            if (sample == GIMG_U8 && c == 1)
                im.maxval = 200;
            gimg_conv_opts o;
            gimg_conv_opts_init(&o);
            o.kernels = s < 4 ? &k : chain;
            o.n_kernels = s < 4 ? 1 : 3;
            for (int b = 0; b < 5; b++) {
                o.border = (gimg_border)b;
                o.alpha = (gimg_alpha_mode)((b + s) % 3);
                char what[160];
                snprintf(what, sizeof what, "'%s' %d channels border %d alpha %d",
                         s < 4 ? specs[s] : "box:5, 7x1, scharr", c, b, (int)o.alpha);
                if (o.border == GIMG_BORDER_WRAP) {
                    gimg_conv_bands *cb = (gimg_conv_bands *)1;
                    CHECK(gimg_conv_bands_begin(NULL, &im, &o, &cb) == GIMG_OK && !cb,
                          "%s: wrap has bands", what);
                    continue;
                }
                gimg_image whole;
                if (gimg_conv_cpu(&im, &o, &whole)) {
                    CHECK(0, "%s: %s", what, gimg_last_error());
                    continue;
                }
                static const int rows[] = {1, 2, 3, 5, 36, 37, 40};
                for (size_t r = 0; r < sizeof rows / sizeof *rows; r++)
                    if (!bands_match(&im, &o, &whole, rows[r], what))
                        break;
                sub_images_match(&im, &o, &whole, what);
                gimg_image_free(&whole);
            }
            gimg_image_free(&im);
            if (s < 4)
                gimg_kernel_free(&k);
        }
    for (int i = 0; i < 3; i++)
        gimg_kernel_free(&chain[i]);
}

int main(void)
{
    /* --device auto's break-even from the built-in cost table (lib/cost.h),
     * not one this machine measured or the environment gives. */
    setenv("GIMG_COST_CACHE", "off", 1);
    unsetenv("GIMG_COST_TABLE");
    RUN(test_parse_inline_and_anchor);
    RUN(test_parse_file_text);
    RUN(test_parse_errors);
    RUN(test_parse_flat_lists);
    RUN(test_parse_normalize);
    RUN(test_kernel_file_bound);
    RUN(test_named_kernels);
    RUN(test_named_signs);
    RUN(test_borders_every_edge_and_corner);
    RUN(test_kernel_larger_than_image);
    RUN(test_convolve_vs_correlate);
    RUN(test_alpha_modes);
    RUN(test_types_and_epilogue);
    RUN(test_u8_rounding_fast);
    RUN(test_chains);
    RUN(test_separable_close_to_dense);
    RUN(test_fast_path_bit_identical);
    RUN(test_fast_path_chains_and_large);
    RUN(test_premultiply_alpha_gain);
    RUN(test_premultiply_alpha_zero_gain);
    RUN(test_premultiply_alpha_box_average);
    RUN(test_auto_threshold);
    RUN(test_maxval_clamp);
    RUN(test_bands);
    RUN(test_maxval_premultiply_opaque);
    return check_summary();
}
