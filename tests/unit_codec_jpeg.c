/*
 * unit_codec_jpeg — the JPEG codec (lib/codec_jpeg.c) through the public
 * API and its row: decoding equal to djpeg's sample for sample, encoding
 * equal to cjpeg's with the same settings byte for byte, CMYK and YCCK
 * against the documented formula and ImageMagick, crafted and hostile
 * files (each made here) refused quickly with a message, the scan limit at
 * its edge, the warning rule, threads. Large images, written by stripes
 * on several OpenMP threads: the bytes of libjpeg's optimising encoder
 * with restart markers at any thread count, the pixels of its file
 * without, read by djpeg -strict and ImageMagick; every allocation of an
 * encode failed in turn. Metadata: the ICC profile, EXIF and XMP bytes,
 * the JFIF resolution and the EXIF orientation through encode and decode
 * twice on every encoder path (a profile in several chunks on the striped
 * one at 1 and 4 threads: the same file), the markers' order, blocks too
 * large for a marker left out, markers made by hand (chunks out of order,
 * JFIF units), broken ICC sequences and EXIF blocks dropped with a warning
 * while the image decodes; exiftool, ImageMagick and cjpeg -icc as
 * cross-checks. Tests that need a peer tool (djpeg, cjpeg, exiftool,
 * ImageMagick's convert) print SKIP without it. GIMG_TEST_SLOW=1
 * (valgrind) skips the CPU-time checks and does less of the large work;
 * valgrind reaches the failed allocations with
 * --soname-synonyms=somalloc=nouserintercepts (see "allocation faults").
 */
#include "check.h"
#include "testfile.h"
#include "codec.h"
#include "jpeg_internal.h"
#include "gimg.h"
#include "testimg.h"
#include "testmeta.h"
#include "testjpeg.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jpeglib.h>
#include <jerror.h>

/* The codec's documented limit (lib/codec_jpeg.c, JPEG_MAX_COMPONENT_SCANS). */
#define MAX_COMPONENT_SCANS 48

/* ------------------------------------------------------------ helpers */

static char tmpdir[64];

static const char *tmp_path(const char *name)
{
    static char path[8][128];
    static int next;
    char *p = path[next++ % 8];
    snprintf(p, sizeof path[0], "%s/%s", tmpdir, name);
    return p;
}

static int have_tool(const char *tool)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", tool);
    return system(cmd) == 0;
}

static unsigned char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    unsigned char *b = malloc(cap);
    for (size_t k; b && (k = fread(b + n, 1, cap - n, f)) > 0;) {
        n += k;
        if (n == cap)
            b = realloc(b, cap *= 2);
    }
    fclose(f);
    *len = n;
    return b;
}

static int timing_checked(void)
{
    const char *slow = getenv("GIMG_TEST_SLOW");
    return !(slow && *slow && strcmp(slow, "0") != 0);
}

/* A photo-like image (testimg_fill_photo): smooth shading, hard edges and
 * a little grain, so that every part of the codec (DC, AC, chroma) has
 * work to do. */
static int photo_image(gimg_image *im, int w, int h, int c, uint64_t seed)
{
    if (gimg_image_alloc(im, w, h, c, GIMG_U8) != GIMG_OK)
        return 0;
    if (!testimg_fill_photo(im, seed)) {
        gimg_image_free(im);
        return 0;
    }
    return 1;
}

static int same_image(const gimg_image *a, const gimg_image *b, const char *what)
{
    if (a->width != b->width || a->height != b->height || a->channels != b->channels ||
        a->sample != b->sample) {
        CHECK(0, "%s: %dx%d c%d against %dx%d c%d", what, a->width, a->height, a->channels,
              b->width, b->height, b->channels);
        return 0;
    }
    size_t row = (size_t)a->width * gimg_pixel_bytes(a);
    for (int y = 0; y < a->height; y++)
        if (memcmp(gimg_row(a, y), gimg_row(b, y), row) != 0) {
            const unsigned char *p = gimg_row(a, y), *q = gimg_row(b, y);
            size_t i = 0;
            while (p[i] == q[i])
                i++;
            CHECK(0, "%s: row %d differs first at byte %zu (%d against %d)", what, y, i, p[i],
                  q[i]);
            return 0;
        }
    return 1;
}

static gimg_status encode_jpeg(const gimg_image *im, int quality, gimg_subsampling sub,
                               int progressive, unsigned char **buf, size_t *len)
{
    gimg_write_opts o;
    gimg_write_opts_init(&o);
    o.quality = quality;
    o.jpeg_subsampling = sub;
    o.jpeg_progressive = progressive;
    return gimg_encode(im, GIMG_FMT_JPEG, &o, buf, len);
}

/* Decodes through the row, as the fuzz target does. */
static gimg_status row_decode(const unsigned char *buf, size_t len, gimg_image *im)
{
    gimg_read_opts o = {0};
    return gimg_codec_jpeg.decode(buf, len, &o, im);
}

/* ---------------------------------------------------- crafted files */

static void put_byte(bytes *b, unsigned v)
{
    unsigned char c = (unsigned char)v;
    put(b, &c, 1);
}

static void put_segment(bytes *b, unsigned marker, const unsigned char *payload, size_t n)
{
    put_byte(b, 0xFF);
    put_byte(b, marker);
    put_byte(b, (unsigned)(n + 2) >> 8);
    put_byte(b, (unsigned)(n + 2) & 255);
    put(b, payload, n);
}

/* Entropy-coded bits, most significant first, with 0xFF stuffing. */
typedef struct {
    bytes *out;
    unsigned acc;
    int n;
} bit_writer;

static void put_bits(bit_writer *w, unsigned v, int n)
{
    for (int i = n - 1; i >= 0; i--) {
        w->acc = (w->acc << 1 | (v >> i & 1)) & 255;
        if (++w->n == 8) {
            put_byte(w->out, w->acc);
            if (w->acc == 255)
                put_byte(w->out, 0);
            w->acc = 0;
            w->n = 0;
        }
    }
}

static void flush_bits(bit_writer *w)
{
    while (w->n)
        put_bits(w, 1, 1);
}

static void put_dqt(bytes *b, int table, int value)
{
    unsigned char q[65];
    q[0] = (unsigned char)table;
    memset(q + 1, value, 64);
    put_segment(b, 0xDB, q, sizeof q);
}

/* SOFn of w x h with n components, all 1x1 and quantisation table `qt`. */
static void put_sof(bytes *b, unsigned marker, int precision, int w, int h, int n, int qt)
{
    unsigned char s[6 + 3 * 8] = {(unsigned char)precision, (unsigned char)(h >> 8),
                                  (unsigned char)h, (unsigned char)(w >> 8), (unsigned char)w,
                                  (unsigned char)n};
    for (int i = 0; i < n; i++) {
        s[6 + 3 * i] = (unsigned char)(i + 1);
        s[7 + 3 * i] = 0x11;
        s[8 + 3 * i] = (unsigned char)qt;
    }
    put_segment(b, marker, s, 6 + 3 * (size_t)n);
}

/* Huffman tables of the crafted scans: DC table 0 codes category 0 as
 * "0"; AC table 0 codes EOBn (runs of 2^n to 2^(n+1) - 1 blocks, n =
 * 0..14) as the 4-bit code n. */
static void put_dht(bytes *b)
{
    unsigned char dc[17 + 1] = {0x00, 1};
    put_segment(b, 0xC4, dc, sizeof dc);
    unsigned char ac[17 + 15] = {0x10};
    ac[4] = 15;
    for (int n = 0; n < 15; n++)
        ac[17 + n] = (unsigned char)(n << 4);
    put_segment(b, 0xC4, ac, sizeof ac);
}

static void put_sos(bytes *b, int first_comp, int ncomp, int ss, int se)
{
    unsigned char s[1 + 2 * 4 + 3];
    int k = 0;
    s[k++] = (unsigned char)ncomp;
    for (int i = 0; i < ncomp; i++) {
        s[k++] = (unsigned char)(first_comp + i);
        s[k++] = 0x00;
    }
    s[k++] = (unsigned char)ss;
    s[k++] = (unsigned char)se;
    s[k++] = 0;
    put_segment(b, 0xDA, s, (size_t)k);
}

enum { SCANS_EMPTY_HUFFMAN, SCANS_EOB_RUNS, SCANS_EMPTY_ARITHMETIC };

/* A progressive JPEG of w x h with n components (quantisers of 1) and
 * `scans` scans: the first a DC scan of every component, the others AC
 * scans (1..63) of one component each, in turn. EMPTY_HUFFMAN scans hold
 * no data (libjpeg warns: the data ends early); EOB_RUNS scans hold valid
 * data (DC differences of 0, then runs of empty blocks), 1 bit a block for
 * the DC scan and about 70 bytes an AC scan at 8192x8192; EMPTY_ARITHMETIC
 * scans hold no data, which an arithmetic decoder reads as zeros without a
 * warning. Each scan costs a decoder a pass over its blocks. */
static bytes progressive_file(int w, int h, int n, int kind, int scans)
{
    bytes b = {0};
    put_byte(&b, 0xFF);
    put_byte(&b, 0xD8);
    put_dqt(&b, 0, 1);
    put_sof(&b, kind == SCANS_EMPTY_ARITHMETIC ? 0xCA : 0xC2, 8, w, h, n, 0);
    if (kind != SCANS_EMPTY_ARITHMETIC)
        put_dht(&b);
    const size_t blocks = (size_t)((w + 7) / 8) * (size_t)((h + 7) / 8);
    for (int s = 0; s < scans; s++) {
        if (s == 0)
            put_sos(&b, 1, n, 0, 0);
        else
            put_sos(&b, 1 + (s - 1) % n, 1, 1, 63);
        if (kind != SCANS_EOB_RUNS)
            continue;
        bit_writer bw = {&b, 0, 0};
        if (s == 0) {
            for (size_t i = 0; i < blocks * (size_t)n; i++)
                put_bits(&bw, 0, 1);
        } else {
            for (size_t left = blocks; left > 0;) {
                unsigned run = left > 32767 ? 32767 : (unsigned)left;
                int e = 0;
                while ((2u << e) <= run)
                    e++;
                put_bits(&bw, (unsigned)e, 4);
                if (e)
                    put_bits(&bw, run - (1u << e), e);
                left -= run;
            }
        }
        flush_bits(&bw);
    }
    put_byte(&b, 0xFF);
    put_byte(&b, 0xD9);
    return b;
}

/* A baseline frame of w x h, n components, quantisation table `qt` (only
 * table 0 defined), one interleaved scan of zero blocks, or none. */
static bytes baseline_file(unsigned sof, int precision, int w, int h, int n, int qt, int with_scan)
{
    bytes b = {0};
    put_byte(&b, 0xFF);
    put_byte(&b, 0xD8);
    put_dqt(&b, 0, 1);
    put_sof(&b, sof, precision, w, h, n, qt);
    unsigned char dc[17 + 1] = {0x00, 1};
    put_segment(&b, 0xC4, dc, sizeof dc);
    unsigned char ac[17 + 1] = {0x10, 1};  /* EOB as "0" */
    put_segment(&b, 0xC4, ac, sizeof ac);
    if (with_scan) {
        put_sos(&b, 1, n, 0, 63);
        bit_writer bw = {&b, 0, 0};
        size_t blocks = (size_t)((w + 7) / 8) * (size_t)((h + 7) / 8) * (size_t)n;
        for (size_t i = 0; i < blocks; i++)
            put_bits(&bw, 0, 2);  /* DC category 0, EOB */
        flush_bits(&bw);
    }
    put_byte(&b, 0xFF);
    put_byte(&b, 0xD9);
    return b;
}

/* ------------------------------------------- libjpeg, used directly */

static void test_silent(j_common_ptr c, int level) {}

/* The colour space and Adobe marker of encode_cmyk's files. */
typedef struct {
    J_COLOR_SPACE space;
    int adobe;
} cmyk_coding;

static void cmyk_setup(j_compress_ptr c, void *user)
{
    const cmyk_coding *k = user;
    jpeg_set_colorspace(c, k->space);
    c->write_Adobe_marker = k->adobe ? TRUE : FALSE;
    jpeg_set_quality(c, 92, TRUE);
}

/* Encodes CMYK samples (4 a pixel) as a JPEG of the given colour space
 * (JCS_CMYK or JCS_YCCK), with or without the Adobe marker. */
static bytes encode_cmyk(const unsigned char *px, int w, int h, J_COLOR_SPACE space, int adobe)
{
    cmyk_coding k = {space, adobe};
    return testjpeg_encode(px, (size_t)w * 4, w, h, 4, JCS_CMYK, cmyk_setup, &k);
}

/* libjpeg's own CMYK samples of a CMYK or YCCK file (4 a pixel). */
static unsigned char *decode_cmyk_samples(const bytes *f)
{
    struct jpeg_decompress_struct c;
    test_error e;
    unsigned char *volatile px = NULL;
    c.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = test_error_exit;
    e.pub.emit_message = test_silent;
    if (setjmp(e.jump)) {
        jpeg_destroy_decompress(&c);
        free(px);
        return NULL;
    }
    jpeg_create_decompress(&c);
    jpeg_mem_src(&c, f->p, (unsigned long)f->len);
    jpeg_read_header(&c, TRUE);
    c.out_color_space = JCS_CMYK;
    jpeg_start_decompress(&c);
    px = malloc((size_t)c.output_width * c.output_height * 4);
    while (c.output_scanline < c.output_height) {
        JSAMPROW row = px + (size_t)c.output_scanline * c.output_width * 4;
        jpeg_read_scanlines(&c, &row, 1);
    }
    jpeg_finish_decompress(&c);
    jpeg_destroy_decompress(&c);
    return px;
}

/* libjpeg's own encoder, as cjpeg runs it: quality q, the first component
 * of a colour image sampled h x v, Huffman optimisation on or off, a
 * restart marker every `restart_rows` MCU rows (0: none) or else every
 * `restart_mcus` MCUs, and an optional scan script: what cjpeg
 * [-optimize] [-restart N[B]] [-scans F] writes. */
typedef struct {
    int quality, h, v, optimize, restart_rows;
    const jpeg_scan_info *script;
    int nscans;
    int restart_mcus;
} libjpeg_opts;

static void opts_setup(j_compress_ptr c, void *user)
{
    const libjpeg_opts *o = user;
    jpeg_set_quality(c, o->quality, TRUE);
    if (c->input_components == 3) {
        c->comp_info[0].h_samp_factor = o->h;
        c->comp_info[0].v_samp_factor = o->v;
    }
    c->optimize_coding = o->optimize ? TRUE : FALSE;
    c->restart_in_rows = o->restart_rows;
    c->restart_interval = (unsigned)o->restart_mcus;
    if (o->script) {
        c->scan_info = o->script;
        c->num_scans = o->nscans;
    }
}

static bytes libjpeg_encode(const gimg_image *im, const libjpeg_opts *o)
{
    return testjpeg_encode(im->data, im->stride_bytes, im->width, im->height, im->channels,
                           im->channels == 1 ? JCS_GRAYSCALE : JCS_RGB, opts_setup, (void *)o);
}

/* 4:4:4, optimisation on or off, an optional scan script. */
static bytes encode_direct(const gimg_image *im, int q, int optimize,
                           const jpeg_scan_info *script, int nscans)
{
    const libjpeg_opts o = {q, 1, 1, optimize, 0, script, nscans, 0};
    return libjpeg_encode(im, &o);
}

/* cjpeg -optimize [-restart N]: sampling h x v. */
static bytes libjpeg_optimised(const gimg_image *im, int q, int h, int v, int restart_rows)
{
    const libjpeg_opts o = {q, h, v, 1, restart_rows, NULL, 0, 0};
    return libjpeg_encode(im, &o);
}

/* ----------------------------------------- decoding in strips */

/* libjpeg's encoder at quality 85 with a restart interval of `mcus` MCUs
 * (or `rows` MCU rows), the first component sampled h x v. */
static bytes restart_file(const gimg_image *im, int h, int v, int rows, int mcus)
{
    const libjpeg_opts o = {85, h, v, 0, rows, NULL, 0, mcus};
    return libjpeg_encode(im, &o);
}

/* f decoded on `threads` threads: status, image, message. */
static gimg_status decode_threads(const unsigned char *f, size_t len, int threads, gimg_image *im,
                                  char *why, size_t why_size)
{
    const int before = omp_get_max_threads();
    omp_set_num_threads(threads);
    gimg_status st = row_decode(f, len, im);
    snprintf(why, why_size, "%s", st ? gimg_last_error() : "");
    omp_set_num_threads(before);
    return st;
}

/* The same status, message and pixels on 1 thread (the whole file) and on
 * 4 (in strips where the file qualifies, jpeg_strips.c). */
static void same_on_threads(const unsigned char *f, size_t len, const char *what)
{
    gimg_image one, four;
    char why1[512], why4[512];
    gimg_status s1 = decode_threads(f, len, 1, &one, why1, sizeof why1);
    gimg_status s4 = decode_threads(f, len, 4, &four, why4, sizeof why4);
    CHECK(s1 == s4 && !strcmp(why1, why4), "%s: 1 thread: %d '%s'; 4 threads: %d '%s'", what, s1,
          why1, s4, why4);
    if (!s1 && !s4 && same_image(&one, &four, what))
        CHECK(!four.meta == !one.meta, "%s: metadata lost in strips", what);
    if (!s1)
        gimg_image_free(&one);
    if (!s4)
        gimg_image_free(&four);
}

/* Each of n strips of p, as its own file decoded whole (its warnings
 * errors), holds the whole image's rows from its first_row, after its
 * overlap. */
static void strips_exact(const gimg_jpeg_strips *p, const unsigned char *f, size_t len, int n,
                         const char *what)
{
    gimg_image whole, part;
    char why[512];
    if (decode_threads(f, len, 1, &whole, why, sizeof why)) {
        CHECK(0, "%s: %s", what, why);
        return;
    }
    for (int k = 0; k < n; k++) {
        int a, b, first_row, rows, skip;
        gimg_jpeg_strip_span(p, k, n, &a, &b, &first_row, &rows, &skip);
        const size_t file_bytes = gimg_jpeg_strip_bytes(p, a, b);
        unsigned char *file = malloc(file_bytes);
        gimg_jpeg_strip_write(p, a, b, file);
        if (decode_threads(file, file_bytes, 1, &part, why, sizeof why)) {
            CHECK(0, "%s: strip %d of %d: %s", what, k, n, why);
        } else {
            CHECK(part.height == gimg_jpeg_strip_height(p, a, b) && part.width == whole.width &&
                  skip + rows <= part.height, "%s: strip %d of %d is %dx%d", what, k, n,
                  part.width, part.height);
            const size_t row = (size_t)whole.width * (size_t)whole.channels;
            for (int y = 0; y < rows && skip + rows <= part.height; y++)
                if (memcmp(gimg_row(&part, skip + y), gimg_row(&whole, first_row + y), row)) {
                    CHECK(0, "%s: strip %d of %d: row %d differs", what, k, n, first_row + y);
                    break;
                }
            gimg_image_free(&part);
        }
        free(file);
    }
    gimg_image_free(&whole);
}

/* Every sampling, intervals of whole rows and of MCUs that are not, odd
 * sizes: the plan cuts where it may (and only there: its steps), and the
 * strips' pixels are the whole file's, byte for byte. */
static void test_strips_equal_whole(void)
{
    static const struct {
        int w, h, c, hs, vs, rows, mcus, cuts;
    } cases[] = {
        {1100, 700, 3, 1, 1, 1, 0, 1},    /* 4:4:4, an interval a row */
        {1001, 999, 3, 2, 2, 1, 0, 1},    /* 4:2:0: strips overlap */
        {1003, 1001, 3, 2, 1, 2, 0, 1},   /* 4:2:2, two rows */
        {777, 1501, 3, 1, 2, 1, 0, 1},    /* 4:4:0: overlap */
        {1300, 800, 1, 1, 1, 1, 0, 1},    /* gray */
        {1024, 1024, 3, 2, 2, 0, 32, 1},  /* 32 MCUs: a row is 2 intervals */
        {1000, 1000, 3, 1, 1, 0, 250, 1}, /* 125 MCUs a row: cut every 2 rows */
        {1000, 1000, 3, 1, 1, 0, 7, 1},   /* cut every 7 rows */
        {2001, 300, 3, 2, 2, 0, 3000, 1}, /* an interval of 23.8 rows: every 3000 rows: none */
        {1200, 900, 3, 1, 1, 0, 0, 0},    /* no restart markers */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gimg_image im;
        char what[96];
        snprintf(what, sizeof what, "%dx%d c%d %dx%d rows %d mcus %d", cases[i].w, cases[i].h,
                 cases[i].c, cases[i].hs, cases[i].vs, cases[i].rows, cases[i].mcus);
        if (!photo_image(&im, cases[i].w, cases[i].h, cases[i].c, 40 + i)) {
            CHECK(0, "%s: image", what);
            continue;
        }
        bytes f = restart_file(&im, cases[i].hs, cases[i].vs, cases[i].rows, cases[i].mcus);
        gimg_image_free(&im);
        if (!f.p) {
            CHECK(0, "%s: libjpeg failed", what);
            continue;
        }
        gimg_jpeg_strips p;
        const int planned = gimg_jpeg_strips_plan(f.p, f.len, &p);
        if (cases[i].cuts && i != 8) {
            CHECK(planned && p.steps >= 2, "%s: not cut", what);
            if (planned) {
                /* Every step's rows, end to end, and the overlap where chroma is subsampled
                 * vertically. */
                const int mcu_rows = (cases[i].h + p.mcu_height - 1) / p.mcu_height;
                CHECK(p.steps == (mcu_rows * p.mcu_height + p.step_rows - 1) / p.step_rows,
                      "%s: %d steps of %d rows", what, p.steps, p.step_rows);
                CHECK(p.overlap == (cases[i].c == 3 && cases[i].vs == 2), "%s: overlap %d", what,
                      p.overlap);
                strips_exact(&p, f.p, f.len, 3, what);
                strips_exact(&p, f.p, f.len, p.steps, what);
            }
        } else {
            CHECK(!planned, "%s: cut where it may not be", what);
        }
        if (planned)
            gimg_jpeg_strips_free(&p);
        same_on_threads(f.p, f.len, what);
        free(f.p);
    }
}

/* What the strips must not change: a bad interval, markers out of order,
 * a file cut short, fill bytes before a marker, metadata. Each decodes on
 * 4 threads as on 1: the same pixels, or the same refusal. */
static void test_strips_hostile(void)
{
    gimg_image im;
    if (!photo_image(&im, 1024, 768, 3, 77)) {
        CHECK(0, "image");
        return;
    }
    bytes f = restart_file(&im, 2, 2, 1, 0);
    gimg_image_free(&im);
    if (!f.p) {
        CHECK(0, "libjpeg failed");
        return;
    }
    same_on_threads(f.p, f.len, "clean");
    /* The markers' places. */
    size_t rst[64];
    int n = 0;
    for (size_t at = 2; at + 1 < f.len && n < 64; at++)
        if (f.p[at] == 0xFF && f.p[at + 1] >= 0xD0 && f.p[at + 1] <= 0xD7)
            rst[n++] = at;
    CHECK(n >= 31, "only %d restart markers", n);
    if (n < 31) {
        free(f.p);
        return;
    }
    gimg_jpeg_strips p;
    /* An interval's data garbled: a marker in its middle. */
    bytes g = {malloc(f.len), f.len, f.len};
    memcpy(g.p, f.p, f.len);
    g.p[(rst[10] + rst[11]) / 2] = 0xFF;
    g.p[(rst[10] + rst[11]) / 2 + 1] = 0xC4;
    CHECK(!gimg_jpeg_strips_plan(g.p, g.len, &p), "a marker inside a scan: cut");
    same_on_threads(g.p, g.len, "a marker inside the scan");
    /* Bits garbled (no marker): libjpeg's warning, through the strips. */
    memcpy(g.p, f.p, f.len);
    for (size_t at = rst[12] + 2; at < rst[13] - 4; at += 7)
        if (g.p[at] != 0xFF && g.p[at - 1] != 0xFF)
            g.p[at] ^= 0x5A;
    same_on_threads(g.p, g.len, "garbled bits");
    /* Markers out of order. */
    memcpy(g.p, f.p, f.len);
    g.p[rst[5] + 1] = g.p[rst[6] + 1];
    CHECK(!gimg_jpeg_strips_plan(g.p, g.len, &p), "markers out of order: cut");
    same_on_threads(g.p, g.len, "markers out of order");
    /* Cut short before EOI, and inside the last interval. */
    CHECK(!gimg_jpeg_strips_plan(f.p, f.len - 2, &p), "no EOI: cut");
    same_on_threads(f.p, f.len - 2, "no EOI");
    same_on_threads(f.p, (rst[n - 1] + f.len) / 2, "cut in the last interval");
    same_on_threads(f.p, rst[15], "cut at a marker");
    /* A fill byte before markers 17 and 30, inside strips whose markers
     * are renumbered (each step is a row). */
    bytes h = {malloc(f.len + 2), f.len + 2, f.len + 2};
    memcpy(h.p, f.p, rst[17]);
    h.p[rst[17]] = 0xFF;
    memcpy(h.p + rst[17] + 1, f.p + rst[17], rst[30] - rst[17]);
    h.p[rst[30] + 1] = 0xFF;
    memcpy(h.p + rst[30] + 2, f.p + rst[30], f.len - rst[30]);
    CHECK(gimg_jpeg_strips_plan(h.p, h.len, &p), "fill bytes: not cut");
    strips_exact(&p, h.p, h.len, 4, "fill bytes");
    gimg_jpeg_strips_free(&p);
    same_on_threads(h.p, h.len, "fill bytes");
    free(h.p);
    free(g.p);
    free(f.p);
    /* Metadata, written by our encoder (which writes markers from 1 MP). */
    if (!photo_image(&im, 1200, 900, 3, 78)) {
        CHECK(0, "image");
        return;
    }
    im.meta = gimg_meta_new();
    if (im.meta && (im.meta->xmp = malloc(12))) {
        memcpy(im.meta->xmp, "<x:xmpmeta/>", 12);
        im.meta->xmp_bytes = 12;
    }
    unsigned char *buf;
    size_t len;
    if (encode_jpeg(&im, 90, GIMG_SUBSAMPLE_AUTO, 0, &buf, &len) == GIMG_OK) {
        CHECK(gimg_jpeg_strips_plan(buf, len, &p), "our own file: not cut");
        gimg_jpeg_strips_free(&p);
        gimg_image out;
        char why[512];
        if (decode_threads(buf, len, 4, &out, why, sizeof why) == GIMG_OK) {
            CHECK(out.meta && out.meta->xmp_bytes == 12, "the XMP packet lost in strips");
            gimg_image_free(&out);
        } else {
            CHECK(0, "decode: %s", why);
        }
        free(buf);
    } else {
        CHECK(0, "encode: %s", gimg_last_error());
    }
    gimg_image_free(&im);
}

/* ------------------------------------------------------------- tests */

static void test_sniff_and_probe(void)
{
    const gimg_codec *c = &gimg_codec_jpeg;
    CHECK(strcmp(c->name, "JPEG") == 0 && strcmp(c->extensions, "jpg jpeg jpe") == 0 &&
              c->multi_page == 0 && c->format == GIMG_FMT_JPEG, "the row's identity");
    CHECK(c->sniff((const unsigned char *)"\xff\xd8\xff", 3), "FF D8 FF is JPEG");
    CHECK(!c->sniff((const unsigned char *)"\xff\xd8\x00", 3), "FF D8 00 is not");
    CHECK(!c->sniff((const unsigned char *)"\xff\xd8", 2), "2 bytes are not");
    for (int ch = 1; ch <= 4; ch++) {
        gimg_image im;
        unsigned char *buf;
        size_t len;
        if (!photo_image(&im, 17, 9, ch, 7))
            continue;
        CHECK(encode_jpeg(&im, 80, GIMG_SUBSAMPLE_AUTO, 0, &buf, &len) == GIMG_OK, "encode: %s",
              gimg_last_error());
        gimg_info info;
        CHECK(gimg_probe_memory(buf, len, &info) == GIMG_OK, "probe: %s", gimg_last_error());
        int want = ch >= 3 ? 3 : 1;
        CHECK(info.format == GIMG_FMT_JPEG && info.width == 17 && info.height == 9 &&
                  info.channels == want && info.sample == GIMG_U8 && info.pages == 1,
              "%d channels: probe says %dx%d c%d pages %d", ch, info.width, info.height,
              info.channels, info.pages);
        free(buf);
        gimg_image_free(&im);
    }
}

/* Encoding: the layouts, the losses write.c reports, strides, quality. */
static void test_round_trip(void)
{
    for (int ch = 1; ch <= 4; ch++) {
        gimg_image im, back;
        unsigned char *buf;
        size_t len;
        if (!photo_image(&im, 64, 48, ch, 11 + (uint64_t)ch))
            continue;
        gimg_take_losses(NULL);
        CHECK(encode_jpeg(&im, 95, GIMG_SUBSAMPLE_444, 0, &buf, &len) == GIMG_OK, "encode: %s",
              gimg_last_error());
        unsigned lost = gimg_take_losses(NULL);
        CHECK(lost == (ch % 2 == 0 ? (unsigned)GIMG_LOSS_ALPHA : 0u), "%d channels: losses %u", ch,
              lost);
        CHECK(gimg_decode_memory(buf, len, &back) == GIMG_OK, "decode: %s", gimg_last_error());
        int want = ch >= 3 ? 3 : 1;
        CHECK(back.width == 64 && back.height == 48 && back.channels == want, "%d channels: "
              "decoded %dx%d c%d", ch, back.width, back.height, back.channels);
        if (back.channels == want) {
            /* Quality 95 without subsampling keeps a photo within a few
             * levels: PSNR over 35 dB. */
            double se = 0;
            for (int y = 0; y < 48; y++)
                for (int x = 0; x < 64; x++)
                    for (int k = 0; k < want; k++) {
                        double d = gimg_row(&back, y)[x * want + k] - gimg_row(&im, y)[x * ch + k];
                        se += d * d;
                    }
            double psnr = 10 * log10(255.0 * 255.0 / (se / (64.0 * 48 * want)));
            CHECK(psnr > 35, "%d channels: PSNR %.1f dB", ch, psnr);
        }
        gimg_image_free(&back);
        free(buf);
        gimg_image_free(&im);
    }

    /* 16-bit is narrowed (and reported); a strided image encodes as its
     * packed copy does. */
    gimg_image im16, im8, wide;
    if (gimg_image_alloc(&im16, 33, 21, 3, GIMG_U16) == GIMG_OK &&
        photo_image(&im8, 33, 21, 3, 5) &&
        gimg_image_alloc(&wide, 40, 21, 3, GIMG_U8) == GIMG_OK) {
        for (int y = 0; y < 21; y++)
            for (int i = 0; i < 33 * 3; i++)
                ((uint16_t *)gimg_row(&im16, y))[i] = (uint16_t)(gimg_row(&im8, y)[i] * 257);
        unsigned char *a, *b, *s;
        size_t la, lb, ls;
        gimg_take_losses(NULL);
        CHECK(encode_jpeg(&im16, 85, GIMG_SUBSAMPLE_AUTO, 0, &a, &la) == GIMG_OK, "16-bit");
        CHECK(gimg_take_losses(NULL) == GIMG_LOSS_DEPTH, "16-bit narrowing reported");
        CHECK(encode_jpeg(&im8, 85, GIMG_SUBSAMPLE_AUTO, 0, &b, &lb) == GIMG_OK, "8-bit");
        CHECK(la == lb && memcmp(a, b, la) == 0, "16-bit (v * 257) encodes as its 8-bit image");
        gimg_image view = wide;
        view.width = 33;  /* rows 120 bytes apart, 99 used */
        for (int y = 0; y < 21; y++) {
            memcpy(gimg_row(&view, y), gimg_row(&im8, y), 99);
            memset(gimg_row(&view, y) + 99, 0xA5, 21);
        }
        CHECK(encode_jpeg(&view, 85, GIMG_SUBSAMPLE_AUTO, 0, &s, &ls) == GIMG_OK, "strided");
        CHECK(ls == lb && memcmp(s, b, lb) == 0, "a strided image encodes as the packed one");
        free(a);
        free(b);
        free(s);
        gimg_image_free(&im16);
        gimg_image_free(&im8);
        gimg_image_free(&wide);
    }

    /* Higher quality: a larger file and a closer image. */
    gimg_image src;
    if (photo_image(&src, 80, 64, 3, 99)) {
        double mae[2];
        size_t size[2];
        const int q[2] = {20, 90};
        for (int t = 0; t < 2; t++) {
            unsigned char *buf;
            gimg_image back;
            mae[t] = -1;
            size[t] = 0;
            if (encode_jpeg(&src, q[t], GIMG_SUBSAMPLE_420, 0, &buf, &size[t]) != GIMG_OK ||
                gimg_decode_memory(buf, size[t], &back) != GIMG_OK) {
                CHECK(0, "quality %d: %s", q[t], gimg_last_error());
                continue;
            }
            double sum = 0;
            for (int y = 0; y < 64; y++)
                for (int i = 0; i < 80 * 3; i++)
                    sum += fabs((double)gimg_row(&back, y)[i] - gimg_row(&src, y)[i]);
            mae[t] = sum / (80.0 * 64 * 3);
            gimg_image_free(&back);
            free(buf);
        }
        CHECK(size[0] < size[1], "quality 20 (%zu bytes) not smaller than 90 (%zu)", size[0],
              size[1]);
        CHECK(mae[0] > mae[1], "quality 20 error %.2f not above quality 90's %.2f", mae[0], mae[1]);
        gimg_image_free(&src);
    }
}

/* The markers of our files: SOF0 or SOF2, the component count, the
 * sampling factors each option asks for, and quantisation tables that are
 * libjpeg's standard ones scaled by its quality formula. */
typedef struct {
    int sof, ncomp, h0, v0, h1, v1, dqt_luma[64], has_dqt0, huffman_tables;
    unsigned char dht_bits[4][16];
} jpeg_markers;

static int read_markers(const unsigned char *b, size_t len, jpeg_markers *m)
{
    memset(m, 0, sizeof *m);
    for (size_t at = 2; at + 4 <= len;) {
        if (b[at] != 0xFF)
            return 0;
        unsigned marker = b[at + 1];
        size_t seg = (size_t)b[at + 2] << 8 | b[at + 3];
        const unsigned char *p = b + at + 4;
        if (marker == 0xDA)
            return 1;
        if (marker >= 0xC0 && marker <= 0xC2) {
            m->sof = (int)marker;
            m->ncomp = p[5];
            m->h0 = p[7] >> 4;
            m->v0 = p[7] & 15;
            if (m->ncomp > 1) {
                m->h1 = p[10] >> 4;
                m->v1 = p[10] & 15;
            }
        } else if (marker == 0xDB) {
            for (size_t k = 0; k + 65 <= seg - 2; k += 65)
                if ((p[k] & 15) == 0) {
                    m->has_dqt0 = 1;
                    for (int i = 0; i < 64; i++)
                        m->dqt_luma[i] = p[k + 1 + i];  /* zigzag order */
                }
        } else if (marker == 0xC4) {
            for (size_t k = 0; k + 17 <= seg - 2;) {
                int n = 0, slot = (p[k] >> 4) * 2 + (p[k] & 1);
                for (int i = 0; i < 16; i++)
                    n += p[k + 1 + i];
                if (slot < 4)
                    memcpy(m->dht_bits[slot], p + k + 1, 16);
                m->huffman_tables++;
                k += 17 + (size_t)n;
            }
        }
        at += 2 + seg;
    }
    return 1;
}

static void test_encode_markers(void)
{
    /* The standard luminance table of the JPEG standard (Annex K), in zigzag order. */
    static const int std_luma_zigzag[64] = {
        16, 11, 12, 14, 12, 10, 16, 14, 13, 14, 18, 17, 16, 19, 24, 40,
        26, 24, 22, 22, 24, 49, 35, 37, 29, 40, 58, 51, 61, 60, 57, 51,
        56, 55, 64, 72, 92, 78, 64, 68, 87, 69, 55, 56, 80, 109, 81, 87,
        95, 98, 103, 104, 103, 62, 77, 113, 121, 112, 100, 120, 92, 101, 103, 99};
    /* The standard DC luminance code lengths (Annex K.3), which an
     * unoptimised file carries. */
    static const unsigned char std_dc_bits[16] = {0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
    static const struct {
        int quality, channels, progressive;
        gimg_subsampling sub;
        int sof, h, v;
    } cases[] = {
        {90, 3, 0, GIMG_SUBSAMPLE_AUTO, 0xC0, 1, 1}, {89, 3, 0, GIMG_SUBSAMPLE_AUTO, 0xC0, 2, 2},
        {100, 3, 0, GIMG_SUBSAMPLE_AUTO, 0xC0, 1, 1}, {1, 3, 0, GIMG_SUBSAMPLE_AUTO, 0xC0, 2, 2},
        {95, 3, 0, GIMG_SUBSAMPLE_420, 0xC0, 2, 2}, {50, 3, 0, GIMG_SUBSAMPLE_422, 0xC0, 2, 1},
        {50, 3, 0, GIMG_SUBSAMPLE_444, 0xC0, 1, 1}, {75, 3, 1, GIMG_SUBSAMPLE_AUTO, 0xC2, 2, 2},
        {75, 1, 0, GIMG_SUBSAMPLE_420, 0xC0, 1, 1}, {75, 1, 1, GIMG_SUBSAMPLE_AUTO, 0xC2, 1, 1},
    };
    gimg_image rgb, gray;
    if (!photo_image(&rgb, 40, 24, 3, 3) || !photo_image(&gray, 40, 24, 1, 4))
        return;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned char *buf;
        size_t len;
        const gimg_image *im = cases[i].channels == 1 ? &gray : &rgb;
        if (encode_jpeg(im, cases[i].quality, cases[i].sub, cases[i].progressive, &buf, &len)) {
            CHECK(0, "case %zu: %s", i, gimg_last_error());
            continue;
        }
        jpeg_markers m;
        CHECK(read_markers(buf, len, &m), "case %zu: markers unreadable", i);
        CHECK(m.sof == cases[i].sof, "case %zu: SOF 0x%02x", i, m.sof);
        CHECK(m.ncomp == cases[i].channels, "case %zu: %d components", i, m.ncomp);
        CHECK(m.h0 == cases[i].h && m.v0 == cases[i].v, "case %zu: luma sampled %dx%d", i, m.h0,
              m.v0);
        if (m.ncomp == 3)
            CHECK(m.h1 == 1 && m.v1 == 1, "case %zu: chroma sampled %dx%d", i, m.h1, m.v1);
        /* libjpeg's quality scaling: 5000 / q below 50, 200 - 2q from
         * 50; each entry (v * scale + 50) / 100, kept within 1..255. */
        int q = cases[i].quality, scale = q < 50 ? 5000 / q : 200 - 2 * q, bad = -1;
        for (int k = 0; k < 64 && m.has_dqt0; k++) {
            long v = ((long)std_luma_zigzag[k] * scale + 50) / 100;
            v = v < 1 ? 1 : v > 255 ? 255 : v;
            if (m.dqt_luma[k] != v && bad < 0)
                bad = k;
        }
        CHECK(m.has_dqt0 && bad < 0, "case %zu: quality %d luma table entry %d is %d", i, q, bad,
              bad >= 0 ? m.dqt_luma[bad] : 0);
        /* Optimised Huffman tables: the DC luminance table is not the
         * standard one (an 8-bit photo never uses all 12 categories). */
        CHECK(m.huffman_tables > 0 && memcmp(m.dht_bits[0], std_dc_bits, 16) != 0,
              "case %zu: standard Huffman tables", i);
        free(buf);
    }
    gimg_image_free(&rgb);
    gimg_image_free(&gray);
}

/* Optimised Huffman coding: a smaller file than libjpeg's standard
 * tables give, and the very same pixels. */
static void test_encode_optimised(void)
{
    gimg_image im;
    if (!photo_image(&im, 120, 90, 3, 21))
        return;
    unsigned char *ours;
    size_t len;
    CHECK(encode_jpeg(&im, 92, GIMG_SUBSAMPLE_444, 0, &ours, &len) == GIMG_OK, "encode");
    bytes plain = encode_direct(&im, 92, 0, NULL, 0);
    gimg_image a, b;
    CHECK(plain.len > 0, "libjpeg's encode failed");
    CHECK(len < plain.len, "optimised %zu bytes, standard tables %zu", len, plain.len);
    if (gimg_decode_memory(ours, len, &a) == GIMG_OK) {
        if (gimg_decode_memory(plain.p, plain.len, &b) == GIMG_OK) {
            same_image(&a, &b, "optimised against standard tables");
            gimg_image_free(&b);
        }
        gimg_image_free(&a);
    }
    free(ours);
    free(plain.p);
    gimg_image_free(&im);
}

/* Our encoder against cjpeg with the same settings (cjpeg -optimize):
 * the same bytes. */
static void test_encode_equals_cjpeg(void)
{
    if (!have_tool("cjpeg"))
        SKIP("cjpeg is not installed");
    static const struct {
        int quality, channels, progressive;
        gimg_subsampling sub;
        const char *args;
    } cases[] = {
        {90, 3, 0, GIMG_SUBSAMPLE_AUTO, "-quality 90 -sample 1x1"},
        {89, 3, 0, GIMG_SUBSAMPLE_AUTO, "-quality 89 -sample 2x2"},
        {75, 3, 0, GIMG_SUBSAMPLE_422, "-quality 75 -sample 2x1"},
        {60, 3, 1, GIMG_SUBSAMPLE_420, "-quality 60 -sample 2x2 -progressive"},
        {97, 1, 0, GIMG_SUBSAMPLE_AUTO, "-quality 97"},
        {40, 1, 1, GIMG_SUBSAMPLE_AUTO, "-quality 40 -progressive"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gimg_image im;
        if (!photo_image(&im, 77, 45, cases[i].channels, 40 + i))
            continue;
        unsigned char *pnm, *ours, *theirs = NULL;
        size_t pnm_len, len, their_len = 0;
        const char *src = tmp_path(cases[i].channels == 1 ? "src.pgm" : "src.ppm");
        const char *dst = tmp_path("cjpeg.jpg");
        char cmd[512];
        CHECK(gimg_encode(&im, GIMG_FMT_PNM, NULL, &pnm, &pnm_len) == GIMG_OK, "PNM");
        CHECK(write_file(src, pnm, pnm_len), "write %s", src);
        snprintf(cmd, sizeof cmd, "cjpeg -optimize %s %s > %s", cases[i].args, src, dst);
        CHECK(run(cmd) == 0, "%s failed", cmd);
        theirs = read_file(dst, &their_len);
        CHECK(encode_jpeg(&im, cases[i].quality, cases[i].sub, cases[i].progressive, &ours,
                          &len) == GIMG_OK, "encode: %s", gimg_last_error());
        CHECK(theirs && len == their_len && memcmp(ours, theirs, len) == 0,
              "case %zu (cjpeg %s): %zu bytes, cjpeg %zu, not the same", i, cases[i].args, len,
              their_len);
        free(pnm);
        free(ours);
        free(theirs);
        gimg_image_free(&im);
    }
}

/* Decoding equals djpeg's default (accurate integer IDCT, smooth
 * upsampling) sample for sample, on files cjpeg makes. */
static void test_decode_equals_djpeg(void)
{
    if (!have_tool("djpeg") || !have_tool("cjpeg"))
        SKIP("djpeg or cjpeg is not installed");
    static const struct {
        int w, h, channels;
        const char *args;
    } cases[] = {
        {97, 61, 3, "-sample 1x1"},           {97, 61, 3, "-sample 2x1"},
        {97, 61, 3, "-sample 2x2"},           {97, 61, 3, "-sample 1x2"},
        {97, 61, 3, "-sample 4x1"},           {97, 61, 1, ""},
        {97, 61, 3, "-progressive"},          {97, 61, 1, "-progressive"},
        {97, 61, 3, "-arithmetic"},           {97, 61, 3, "-arithmetic -progressive"},
        {97, 61, 3, "-restart 1 -sample 2x2"}, {97, 61, 3, "-rgb"},
        {97, 61, 3, "-quality 100 -sample 1x1"}, {97, 61, 3, "-quality 5"},
        {1, 1, 3, "-sample 2x2"},             {1, 1, 1, ""},
        {17, 9, 3, "-sample 2x2"},            {17, 9, 3, "-sample 2x1 -progressive"},
        {4097, 3, 3, "-sample 2x2"},          {4097, 3, 3, "-sample 2x1"},
        {3, 4097, 3, "-sample 2x2 -progressive"}, {4097, 3, 1, "-progressive"},
    };
    if (!have_tool("cjpeg"))
        SKIP("cjpeg is not installed");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gimg_image im, ours, ref;
        if (!photo_image(&im, cases[i].w, cases[i].h, cases[i].channels, 100 + i))
            continue;
        unsigned char *pnm, *jpg = NULL, *out = NULL;
        size_t pnm_len, jpg_len = 0, out_len = 0;
        const char *src = tmp_path(cases[i].channels == 1 ? "d.pgm" : "d.ppm");
        const char *jpath = tmp_path("d.jpg"), *opath = tmp_path("djpeg.pnm");
        char cmd[512], what[160];
        snprintf(what, sizeof what, "%dx%d c%d cjpeg %s", cases[i].w, cases[i].h,
                 cases[i].channels, cases[i].args);
        CHECK(gimg_encode(&im, GIMG_FMT_PNM, NULL, &pnm, &pnm_len) == GIMG_OK, "PNM");
        CHECK(write_file(src, pnm, pnm_len), "write");
        snprintf(cmd, sizeof cmd, "cjpeg %s %s > %s 2>/dev/null && djpeg -pnm %s > %s",
                 cases[i].args, src, jpath, jpath, opath);
        CHECK(run(cmd) == 0, "%s: %s failed", what, cmd);
        jpg = read_file(jpath, &jpg_len);
        out = read_file(opath, &out_len);
        if (jpg && out && gimg_decode_memory(out, out_len, &ref) == GIMG_OK) {
            if (row_decode(jpg, jpg_len, &ours) == GIMG_OK) {
                same_image(&ours, &ref, what);
                gimg_image_free(&ours);
            } else {
                CHECK(0, "%s: %s", what, gimg_last_error());
            }
            gimg_image_free(&ref);
        } else {
            CHECK(0, "%s: no djpeg output", what);
        }
        free(pnm);
        free(jpg);
        free(out);
        gimg_image_free(&im);
    }
}

/* CMYK and YCCK: the documented formula on libjpeg's own CMYK samples;
 * inverted where the Adobe marker is, plain ink where it is not. */
static void test_cmyk(void)
{
    const int w = 41, h = 23;
    unsigned char *px = malloc((size_t)w * h * 4);
    uint64_t state = 77;
    for (int i = 0; i < w * h; i++)
        for (int k = 0; k < 4; k++)
            px[i * 4 + k] = (unsigned char)((i % w) * 6 + (i / w) * (k + 3) +
                                            (int)(testimg_next(&state) % 9));
    static const struct {
        J_COLOR_SPACE space;
        int adobe;
        const char *name;
    } cases[] = {{JCS_CMYK, 1, "Adobe CMYK"}, {JCS_YCCK, 1, "Adobe YCCK"},
                 {JCS_CMYK, 0, "CMYK without the Adobe marker"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bytes f = encode_cmyk(px, w, h, cases[i].space, cases[i].adobe);
        unsigned char *cmyk = f.len ? decode_cmyk_samples(&f) : NULL;
        gimg_image im;
        gimg_info info;
        CHECK(cmyk != NULL, "%s: libjpeg could not make or read it", cases[i].name);
        CHECK(gimg_probe_memory(f.p, f.len, &info) == GIMG_OK && info.channels == 3,
              "%s: probe: %s", cases[i].name, gimg_last_error());
        if (cmyk && gimg_decode_memory(f.p, f.len, &im) == GIMG_OK) {
            int bad = -1;
            for (int y = 0; y < h && bad < 0; y++)
                for (int x = 0; x < w && bad < 0; x++) {
                    const unsigned char *s = cmyk + ((size_t)y * w + x) * 4;
                    for (int k = 0; k < 3; k++) {
                        /* Inks in 0..1: stored inverted with the marker. */
                        double ink = cases[i].adobe ? 1 - s[k] / 255.0 : s[k] / 255.0;
                        double black = cases[i].adobe ? 1 - s[3] / 255.0 : s[3] / 255.0;
                        long want = lround(255 * (1 - ink) * (1 - black));
                        if (gimg_row(&im, y)[x * 3 + k] != want)
                            bad = (y * w + x) * 3 + k;
                    }
                }
            CHECK(im.channels == 3 && bad < 0, "%s: sample %d differs from the formula",
                  cases[i].name, bad);
            gimg_image_free(&im);
        } else if (cmyk) {
            CHECK(0, "%s: %s", cases[i].name, gimg_last_error());
        }
        free(cmyk);
        free(f.p);
    }
    free(px);
}

/* ImageMagick's own CMYK JPEG (inverted, with the Adobe marker) and its
 * `-colorspace sRGB`: the same samples. */
static void test_cmyk_against_imagemagick(void)
{
    if (access("/usr/bin/convert", X_OK) != 0)
        SKIP("ImageMagick's /usr/bin/convert is not installed");
    gimg_image im, ours, ref;
    if (!photo_image(&im, 57, 31, 3, 8))
        return;
    unsigned char *pnm, *jpg = NULL, *out = NULL;
    size_t pnm_len, jpg_len = 0, out_len = 0;
    const char *src = tmp_path("im.ppm"), *jpath = tmp_path("im-cmyk.jpg"),
               *opath = tmp_path("im-rgb.ppm");
    char cmd[512];
    CHECK(gimg_encode(&im, GIMG_FMT_PNM, NULL, &pnm, &pnm_len) == GIMG_OK, "PNM");
    CHECK(write_file(src, pnm, pnm_len), "write");
    snprintf(cmd, sizeof cmd, "/usr/bin/convert %s -colorspace CMYK -quality 90 %s && "
             "/usr/bin/convert %s -colorspace sRGB %s", src, jpath, jpath, opath);
    if (run(cmd) != 0) {
        free(pnm);
        gimg_image_free(&im);
        SKIP("ImageMagick could not write a CMYK JPEG");
    }
    jpg = read_file(jpath, &jpg_len);
    out = read_file(opath, &out_len);
    jpeg_markers m;
    CHECK(jpg && read_markers(jpg, jpg_len, &m) && m.ncomp == 4, "not a 4-component JPEG");
    if (jpg && out && gimg_decode_memory(out, out_len, &ref) == GIMG_OK) {
        if (gimg_decode_memory(jpg, jpg_len, &ours) == GIMG_OK) {
            same_image(&ours, &ref, "CMYK JPEG against ImageMagick's -colorspace sRGB");
            gimg_image_free(&ours);
        } else {
            CHECK(0, "%s", gimg_last_error());
        }
        gimg_image_free(&ref);
    }
    free(pnm);
    free(jpg);
    free(out);
    gimg_image_free(&im);
}

/* Refusal with the status and words expected, within a second of CPU
 * (SANITIZER_SLOWDOWN seconds under a sanitizer). */
static void expect_refusal(const bytes *f, gimg_status want, const char *words, const char *what)
{
    gimg_image im;
    memset(&im, 0x5A, sizeof im);
    double t0 = cpu_seconds();
    gimg_status st = gimg_decode_memory(f->p, f->len, &im);
    double cpu = cpu_seconds() - t0;
    CHECK(st == want, "%s: status %d, expected %d (%s)", what, (int)st, (int)want,
          gimg_last_error());
    CHECK(strstr(gimg_last_error(), words) != NULL, "%s: message '%s' lacks '%s'", what,
          gimg_last_error(), words);
    CHECK(im.data == NULL && im.width == 0, "%s: a failed decode left an image", what);
    /* The row itself refuses too, when the probe is not asked first. */
    st = row_decode(f->p, f->len, &im);
    CHECK(st == want && im.data == NULL, "%s: the row's decode gave %d", what, (int)st);
    if (timing_checked())
        CHECK(cpu < SANITIZER_SLOWDOWN, "%s: %.2f s of CPU", what, cpu);
    if (st == GIMG_OK)
        gimg_image_free(&im);
}

static void test_crafted_headers(void)
{
    bytes f;
    f = baseline_file(0xC0, 8, 16, 16, 1, 0, 0);
    expect_refusal(&f, GIMG_E_FORMAT, "corrupt JPEG", "no scan before EOI");
    free(f.p);
    f = baseline_file(0xC0, 8, 16, 16, 3, 1, 1);
    expect_refusal(&f, GIMG_E_FORMAT, "table 0x01 was not defined", "undefined DQT");
    free(f.p);
    f = baseline_file(0xC1, 12, 16, 16, 1, 0, 1);
    expect_refusal(&f, GIMG_E_FORMAT, "12-bit", "12-bit JPEG");
    free(f.p);
    f = baseline_file(0xC3, 8, 16, 16, 1, 0, 1);
    expect_refusal(&f, GIMG_E_FORMAT, "unsupported JPEG", "lossless JPEG");
    free(f.p);
    f = baseline_file(0xC0, 8, 16, 16, 2, 0, 1);
    expect_refusal(&f, GIMG_E_FORMAT, "unsupported JPEG", "2 components");
    free(f.p);
    f = baseline_file(0xC0, 8, 16, 0, 1, 0, 1);
    expect_refusal(&f, GIMG_E_FORMAT, "size", "zero height");
    free(f.p);
    /* Huge frames with tiny files: refused from the frame header, with
     * or without a scan, under a pixel limit given (with none, the
     * default, a frame without a scan is corrupt, and the progressive
     * one's coefficients are judged by the memory budget:
     * huge_no_big_allocation). */
    gimg_set_max_pixels((uint64_t)1 << 28);
    f = baseline_file(0xC0, 8, 65535, 65535, 1, 0, 0);
    expect_refusal(&f, GIMG_E_LIMIT, "limit", "65535x65535, no scan");
    free(f.p);
    f = baseline_file(0xC2, 8, 65500, 65500, 3, 0, 0);
    f.len -= 2;  /* no EOI either */
    put_sos(&f, 1, 3, 0, 0);
    expect_refusal(&f, GIMG_E_LIMIT, "limit", "65500x65500 progressive");
    free(f.p);
    gimg_set_max_pixels(GIMG_DEFAULT_MAX_PIXELS);
    f = baseline_file(0xC0, 8, 65500, 65500, 1, 0, 0);
    expect_refusal(&f, GIMG_E_FORMAT, "corrupt JPEG", "65500x65500, no scan, no pixel limit");
    free(f.p);
    /* Beyond libjpeg's own 65500 a side, with the pixel limit raised. */
    uint64_t saved = gimg_max_pixels();
    gimg_set_max_pixels((uint64_t)1 << 40);
    f = baseline_file(0xC0, 8, 65535, 16, 1, 0, 1);
    expect_refusal(&f, GIMG_E_LIMIT, "65500", "65535 wide, pixel limit raised");
    free(f.p);
    gimg_set_max_pixels(saved);
    /* The valid counterparts decode: every pixel mid-gray. */
    f = baseline_file(0xC0, 8, 19, 7, 3, 0, 1);
    gimg_image im;
    if (gimg_decode_memory(f.p, f.len, &im) == GIMG_OK) {
        int bad = 0;
        for (int y = 0; y < 7; y++)
            for (int i = 0; i < 19 * 3; i++)
                bad += gimg_row(&im, y)[i] != 128;
        CHECK(im.channels == 3 && bad == 0, "zero blocks: %d samples are not 128", bad);
        gimg_image_free(&im);
    } else {
        CHECK(0, "a valid crafted baseline file: %s", gimg_last_error());
    }
    free(f.p);
}

/* Huge sizes are refused before anything large is allocated: with the
 * address space held to 256 MiB, still a size refusal (allocating the
 * coefficients first, 1.5 GB for 20000x20000 progressive, would be out of
 * memory): for a pixel limit given, or with none (the default) for the
 * memory budget, which the address space's limit lowers. */
static void test_huge_no_big_allocation(void)
{
    const char *preload = getenv("LD_PRELOAD");
    if (preload && strstr(preload, "vgpreload"))
        SKIP("under valgrind, which needs the address space");
    static const int sides[] = {20000, 65500};
    for (size_t i = 0; i < sizeof sides / sizeof sides[0]; i++) {
        bytes f = baseline_file(0xC2, 8, sides[i], sides[i], 3, 0, 0);
        f.len -= 2;  /* a DC scan instead of EOI */
        put_sos(&f, 1, 3, 0, 0);
        put(&f, "\0\0\0\0", 4);
        for (int limited = 0; limited <= 1; limited++) {
#ifdef UNDER_SANITIZER
            /* The default's path allocates a little before the budget
             * refuses; AddressSanitizer, whose shadow holds terabytes of
             * address space, can then map nothing under the limit. */
            if (!limited)
                continue;
#endif
            fflush(NULL);
            pid_t pid = fork();
            if (pid == 0) {
                struct rlimit r = {(rlim_t)256 << 20, (rlim_t)256 << 20};
                setrlimit(RLIMIT_AS, &r);
                gimg_set_max_memory(0); /* the default again, under the new limit */
                if (limited)
                    gimg_set_max_pixels((uint64_t)1 << 28);
                gimg_image im;
                gimg_status st = row_decode(f.p, f.len, &im);  /* the codec's own check */
                int named = strstr(gimg_last_error(),
                                   limited ? "--max-pixels" : "--max-memory") != NULL;
                _exit(st == GIMG_E_LIMIT && named ? 0 : 10 + (int)st);
            }
            int status = 0;
            waitpid(pid, &status, 0);
            CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "%dx%d in 256 MiB%s: %s %d (status 10 + %d)", sides[i], sides[i],
                  limited ? " under --max-pixels" : "", WIFEXITED(status) ? "exit" : "signal",
                  WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                  WIFEXITED(status) ? WEXITSTATUS(status) - 10 : 0);
        }
        gimg_set_max_pixels((uint64_t)1 << 28);
        expect_refusal(&f, GIMG_E_LIMIT, "--max-pixels", "huge progressive frame");
        gimg_set_max_pixels(GIMG_DEFAULT_MAX_PIXELS);
        free(f.p);
    }
}

/* Every cut of a file is refused, its last byte included (JWRN_JPEG_EOF
 * is an error here), for baseline and progressive. */
static void test_truncated(void)
{
    gimg_image im;
    if (!photo_image(&im, 37, 21, 3, 12))
        return;
    for (int progressive = 0; progressive <= 1; progressive++) {
        unsigned char *buf;
        size_t len;
        if (encode_jpeg(&im, 80, GIMG_SUBSAMPLE_420, progressive, &buf, &len) != GIMG_OK)
            continue;
        gimg_image back;
        CHECK(gimg_decode_memory(buf, len, &back) == GIMG_OK, "whole file: %s",
              gimg_last_error());
        gimg_image_free(&back);
        size_t accepted = 0, first = 0;
        for (size_t cut = 1; cut < len; cut++) {
            gimg_status st = row_decode(buf, cut, &back);
            if (st == GIMG_OK) {
                if (!accepted++)
                    first = cut;
                gimg_image_free(&back);
            } else {
                CHECK(gimg_last_error()[0] != '\0', "cut at %zu: no message", cut);
            }
        }
        CHECK(accepted == 0, "%s: %zu cuts decoded, the first at %zu of %zu bytes",
              progressive ? "progressive" : "baseline", accepted, first, len);
        /* A segment after the scan, then the end: the scan is whole, the
         * file is not (libjpeg reads on to EOI). */
        bytes f = {0};
        put(&f, buf, len - 2);
        put(&f, "\xff\xfe\x00\x06note", 8);
        expect_refusal(&f, GIMG_E_FORMAT, "truncated JPEG", "no EOI after a last segment");
        put(&f, "\xff\xd9", 2);
        CHECK(gimg_decode_memory(f.p, f.len, &back) == GIMG_OK, "with its EOI: %s",
              gimg_last_error());
        gimg_image_free(&back);
        free(f.p);
        /* The message of a cut in the pixel data. */
        CHECK(row_decode(buf, len - 1, &back) != GIMG_OK &&
                  strstr(gimg_last_error(), "truncated JPEG") != NULL,
              "one byte short: '%s'", gimg_last_error());
        free(buf);
    }
    gimg_image_free(&im);
}

/* The warning rule: bytes between segments are skipped (the same
 * pixels); data that cannot be decoded is refused. */
static void test_warnings(void)
{
    gimg_image im, clean, got;
    unsigned char *buf;
    size_t len;
    if (!photo_image(&im, 45, 30, 3, 31))
        return;
    if (encode_jpeg(&im, 85, GIMG_SUBSAMPLE_420, 0, &buf, &len) != GIMG_OK ||
        gimg_decode_memory(buf, len, &clean) != GIMG_OK) {
        CHECK(0, "%s", gimg_last_error());
        return;
    }
    /* Garbage before the first DHT. */
    size_t at = 2;
    while (at + 4 < len && buf[at + 1] != 0xC4)
        at += 2 + ((size_t)buf[at + 2] << 8 | buf[at + 3]);
    bytes f = {0};
    put(&f, buf, at);
    put(&f, "\x12\x34\x00", 3);
    put(&f, buf + at, len - at);
    if (gimg_decode_memory(f.p, f.len, &got) == GIMG_OK) {
        same_image(&got, &clean, "extraneous bytes between segments");
        gimg_image_free(&got);
    } else {
        CHECK(0, "extraneous bytes refused: %s", gimg_last_error());
    }
    free(f.p);
    /* The scan's data replaced by 1 bits: no code of an optimised table
     * is that long, so libjpeg finds a bad Huffman code. */
    size_t sos = 2;
    while (sos + 4 < len && buf[sos + 1] != 0xDA)
        sos += 2 + ((size_t)buf[sos + 2] << 8 | buf[sos + 3]);
    size_t data = sos + 2 + ((size_t)buf[sos + 2] << 8 | buf[sos + 3]);
    f = (bytes){0};
    put(&f, buf, data);
    for (int i = 0; i < 64; i++)
        put(&f, "\xff\x00", 2);
    put(&f, "\xff\xd9", 2);
    expect_refusal(&f, GIMG_E_FORMAT, "corrupt JPEG", "bad Huffman codes");
    free(f.p);
    /* A marker inside the scan's data: the data segment ends early. */
    f = (bytes){0};
    put(&f, buf, data + 8);
    put(&f, "\xff\xd9", 2);
    expect_refusal(&f, GIMG_E_FORMAT, "JPEG", "scan cut by EOI");
    free(f.p);
    free(buf);
    gimg_image_free(&clean);
    gimg_image_free(&im);
}

/* The scan limit at its edge: 48 component scans decode, 49 do not; a
 * scan of 3 components counts 3. */
static void test_scan_limit_edge(void)
{
    for (int n = 1; n <= 3; n += 2) {
        for (int extra = 0; extra <= 1; extra++) {
            /* The DC scan counts n, each AC scan 1. */
            int scans = 1 + (MAX_COMPONENT_SCANS - n) + extra;
            bytes f = progressive_file(64, 40, n, SCANS_EOB_RUNS, scans);
            char what[96];
            snprintf(what, sizeof what, "%d components, %d scans (%d component scans)", n, scans,
                     n + scans - 1);
            if (!extra) {
                gimg_image im;
                if (gimg_decode_memory(f.p, f.len, &im) == GIMG_OK) {
                    int bad = 0;
                    for (int y = 0; y < 40; y++)
                        for (int i = 0; i < 64 * im.channels; i++)
                            bad += gimg_row(&im, y)[i] != 128;
                    CHECK(bad == 0, "%s: %d samples are not 128", what, bad);
                    gimg_image_free(&im);
                } else {
                    CHECK(0, "%s: %s", what, gimg_last_error());
                }
            } else {
                expect_refusal(&f, GIMG_E_LIMIT, "too many scans", what);
            }
            free(f.p);
        }
    }
    /* A real script of a few dozen scans (libjpeg checks it is valid):
     * DC, then the 63 AC coefficients in bands of one and two. */
    gimg_image im, back;
    if (photo_image(&im, 50, 30, 1, 61)) {
        jpeg_scan_info script[48];
        int k = 0, ss = 1;
        script[k++] = (jpeg_scan_info){1, {0}, 0, 0, 0, 0};
        while (ss <= 63) {
            int se = ss + (ss < 20 ? 0 : 1);
            if (se > 63)
                se = 63;
            script[k++] = (jpeg_scan_info){1, {0}, ss, se, 0, 0};
            ss = se + 1;
        }
        bytes f = encode_direct(&im, 90, 1, script, k);
        CHECK(f.len > 0 && k > 36 && k <= MAX_COMPONENT_SCANS, "script of %d scans", k);
        CHECK(f.len > 0 && gimg_decode_memory(f.p, f.len, &back) == GIMG_OK,
              "a valid %d-scan file: %s", k, gimg_last_error());
        if (f.len > 0 && back.data)
            gimg_image_free(&back);
        free(f.p);
        gimg_image_free(&im);
    }
}

/* The hostile files of the issue: 8192x8192, 10,000 scans, refused
 * within a second of CPU whatever the scans hold. (Under valgrind,
 * GIMG_TEST_SLOW=1, 1024x1024: the same paths, 64 times less work.) */
static void test_ten_thousand_scans(void)
{
    static const struct {
        int n, kind;
        const char *name;
    } cases[] = {
        {1, SCANS_EMPTY_HUFFMAN, "gray, empty Huffman scans"},
        {3, SCANS_EMPTY_HUFFMAN, "colour, empty Huffman scans"},
        {1, SCANS_EMPTY_ARITHMETIC, "gray, empty arithmetic scans"},
        {3, SCANS_EMPTY_ARITHMETIC, "colour, empty arithmetic scans"},
        {1, SCANS_EOB_RUNS, "gray, valid Huffman scans"},
        {3, SCANS_EOB_RUNS, "colour, valid Huffman scans"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int side = timing_checked() ? 8192 : 1024;
        bytes f = progressive_file(side, side, cases[i].n, cases[i].kind, 10000);
        char what[128];
        snprintf(what, sizeof what, "%dx%d %s (%zu bytes)", side, side, cases[i].name, f.len);
        /* Refused for its count before any scan is decoded, the empty
         * Huffman scans included (whose first would have been refused as
         * corrupt). */
        expect_refusal(&f, GIMG_E_LIMIT, "too many scans", what);
        free(f.p);
    }
}

/* Many threads decoding and encoding at once get what one thread gets. */
typedef struct {
    const unsigned char *good, *bad;
    size_t good_len, bad_len;
    const gimg_image *want, *src;
    const unsigned char *want_jpeg;
    size_t want_jpeg_len;
    int failures;
} thread_job;

static void *thread_main(void *arg)
{
    thread_job *j = arg;
    for (int i = 0; i < 12; i++) {
        gimg_image im;
        unsigned char *buf;
        size_t len;
        if (gimg_decode_memory(j->good, j->good_len, &im) != GIMG_OK) {
            j->failures++;
        } else {
            size_t row = (size_t)im.width * 3;
            for (int y = 0; y < im.height; y++)
                j->failures += memcmp(gimg_row(&im, y), gimg_row(j->want, y), row) != 0;
            gimg_image_free(&im);
        }
        j->failures += gimg_decode_memory(j->bad, j->bad_len, &im) == GIMG_OK ||
                       strstr(gimg_last_error(), "JPEG") == NULL;
        if (encode_jpeg(j->src, 88, GIMG_SUBSAMPLE_AUTO, i & 1, &buf, &len) != GIMG_OK) {
            j->failures++;
        } else {
            if (!(i & 1))
                j->failures += len != j->want_jpeg_len || memcmp(buf, j->want_jpeg, len) != 0;
            free(buf);
        }
    }
    return NULL;
}

static void test_threads(void)
{
    gimg_image src, want;
    unsigned char *good, *bad;
    size_t good_len, bad_len;
    if (!photo_image(&src, 300, 200, 3, 71))
        return;
    if (encode_jpeg(&src, 88, GIMG_SUBSAMPLE_AUTO, 1, &good, &good_len) != GIMG_OK ||
        gimg_decode_memory(good, good_len, &want) != GIMG_OK) {
        CHECK(0, "%s", gimg_last_error());
        return;
    }
    unsigned char *want_jpeg;
    size_t want_jpeg_len;
    CHECK(encode_jpeg(&src, 88, GIMG_SUBSAMPLE_AUTO, 0, &want_jpeg, &want_jpeg_len) == GIMG_OK,
          "encode");
    bad_len = good_len / 2;
    bad = good;
    thread_job jobs[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (thread_job){good, bad, good_len, bad_len, &want, &src, want_jpeg,
                               want_jpeg_len, 0};
        pthread_create(&t[i], NULL, thread_main, &jobs[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        CHECK(jobs[i].failures == 0, "thread %d: %d failures", i, jobs[i].failures);
    }
    free(good);
    free(want_jpeg);
    gimg_image_free(&want);
    gimg_image_free(&src);
}

/* ------------------------------------- stripes on several threads */

/* The codec's documented rules (lib/codec_jpeg.c): sequential images of
 * JPEG_TWO_PASS_MIN_PIXELS or more are counted and coded by the codec's
 * own two passes; of JPEG_STRIPE_MIN_PIXELS or more, by stripes, with a
 * restart interval of the fewest MCU rows that hold
 * JPEG_RESTART_MIN_MCUS MCUs. */
#define TWO_PASS_MIN_PIXELS 10000
#define STRIPE_MIN_PIXELS 1000000
#define RESTART_MIN_MCUS 512

/* Timing limits are checked neither under valgrind nor where
 * timing_checked() says the machine's clock cannot be trusted. */
static int timing_off(void)
{
    return under_valgrind() || !timing_checked();
}

/* The restart structure of a JPEG, read from its bytes: the DRI interval
 * (0 without one) and the RSTn markers in the scan data, which must run
 * RST0..RST7 in turn (1 if they do and the data ends with EOI). */
static int read_restarts(const unsigned char *b, size_t len, unsigned *interval, long *markers)
{
    *interval = 0;
    *markers = 0;
    size_t at = 2;
    for (;;) {
        if (at + 4 > len || b[at] != 0xFF)
            return 0;
        const unsigned marker = b[at + 1];
        const size_t seg = (size_t)b[at + 2] << 8 | b[at + 3];
        if (marker == 0xDD && seg == 4)
            *interval = (unsigned)b[at + 4] << 8 | b[at + 5];
        at += 2 + seg;
        if (marker == 0xDA)
            break;
    }
    for (; at + 1 < len; at++) {
        if (b[at] != 0xFF)
            continue;
        const unsigned next = b[at + 1];
        if (next == 0xD9)
            return at + 2 == len;
        if (next >= 0xD0 && next <= 0xD7) {
            if ((long)(next - 0xD0) != *markers % 8)
                return 0;
            ++*markers;
        } else if (next != 0x00) {
            return 0;  /* no other marker inside a scan */
        }
        at++;
    }
    return 0;
}

typedef struct {
    int w, h, channels, quality;
    gimg_subsampling sub;
    int h0, v0;  /* the first component's sampling, as cjpeg's -sample */
} stripe_case;

/* Our file of a stripe case at each thread count: the same bytes as
 * libjpeg's own optimising encoder with the documented restart interval
 * (cjpeg -optimize -restart N), whatever the count; the markers as the
 * standard numbers them, read from the bytes; the same pixels as
 * libjpeg's file without restarts, and at most 0.5% larger. Below the
 * threshold, libjpeg's file without restarts, byte for byte. */
static void check_stripe_case(const stripe_case *t, uint64_t seed)
{
    static const int thread_counts[] = {1, 2, 3, 8};
    const int counts = timing_off() ? 2 : 4;
    char what[96];
    snprintf(what, sizeof what, "%dx%d c%d q%d %dx%d", t->w, t->h, t->channels, t->quality, t->h0,
             t->v0);
    gimg_image im;
    if (!photo_image(&im, t->w, t->h, t->channels, seed)) {
        CHECK(0, "%s: no image", what);
        return;
    }
    const int stripes = (uint64_t)t->w * (uint64_t)t->h >= STRIPE_MIN_PIXELS;
    const int mcu_w = 8 * (t->channels == 3 ? t->h0 : 1);
    const int mcu_h = 8 * (t->channels == 3 ? t->v0 : 1);
    const long mcus_per_row = (t->w + mcu_w - 1) / mcu_w, mcu_rows = (t->h + mcu_h - 1) / mcu_h;
    const int restart_rows = (int)((RESTART_MIN_MCUS + mcus_per_row - 1) / mcus_per_row);
    bytes plain = libjpeg_optimised(&im, t->quality, t->h0, t->v0, 0);
    bytes restarted =
        stripes ? libjpeg_optimised(&im, t->quality, t->h0, t->v0, restart_rows) : plain;
    const bytes *want = &restarted;
    CHECK(plain.len > 0 && restarted.len > 0, "%s: libjpeg failed", what);
    const int saved = omp_get_max_threads();
    for (int i = 0; i < counts && want->len; i++) {
        omp_set_num_threads(thread_counts[i]);
        unsigned char *buf;
        size_t len;
        if (encode_jpeg(&im, t->quality, t->sub, 0, &buf, &len) != GIMG_OK) {
            CHECK(0, "%s, %d threads: %s", what, thread_counts[i], gimg_last_error());
            continue;
        }
        CHECK(len == want->len && memcmp(buf, want->p, len) == 0,
              "%s, %d threads: %zu bytes, not libjpeg's %zu (cjpeg -optimize -restart %d)",
              what, thread_counts[i], len, want->len, stripes ? restart_rows : 0);
        unsigned interval;
        long markers;
        CHECK(read_restarts(buf, len, &interval, &markers), "%s: restart markers out of order",
              what);
        const long intervals = (mcu_rows + restart_rows - 1) / restart_rows;
        if (stripes)
            CHECK(interval == (unsigned)(restart_rows * mcus_per_row) && markers == intervals - 1,
                  "%s: DRI %u and %ld markers, expected %ld and %ld", what, interval, markers,
                  restart_rows * mcus_per_row, intervals - 1);
        else
            CHECK(interval == 0 && markers == 0, "%s: restart markers below the threshold", what);
        if (i == 0) {
            CHECK((double)len <= (double)plain.len * 1.005, "%s: %zu bytes, %.3f%% over %zu", what,
                  len, 100.0 * ((double)len / (double)plain.len - 1), plain.len);
            gimg_image a, b;
            if (gimg_decode_memory(buf, len, &a) == GIMG_OK) {
                if (gimg_decode_memory(plain.p, plain.len, &b) == GIMG_OK) {
                    same_image(&a, &b, what);
                    gimg_image_free(&b);
                }
                gimg_image_free(&a);
            } else {
                CHECK(0, "%s: our file does not decode: %s", what, gimg_last_error());
            }
        }
        free(buf);
    }
    omp_set_num_threads(saved);
    if (restarted.p != plain.p)
        free(restarted.p);
    free(plain.p);
    gimg_image_free(&im);
}

static void test_stripes_equal_libjpeg(void)
{
    static const stripe_case cases[] = {
        /* Stripes: exactly the threshold, odd heights and widths, every
         * subsampling, gray, a partial last group, tall and thin, the
         * widest JPEG (DRI 8188) and a single group. */
        {1000, 1000, 3, 90, GIMG_SUBSAMPLE_AUTO, 1, 1},
        {1000, 1001, 3, 75, GIMG_SUBSAMPLE_420, 2, 2},
        {1001, 1000, 3, 85, GIMG_SUBSAMPLE_422, 2, 1},
        {1000, 1003, 1, 90, GIMG_SUBSAMPLE_AUTO, 1, 1},
        {4099, 245, 3, 80, GIMG_SUBSAMPLE_420, 2, 2},
        {61, 16411, 3, 92, GIMG_SUBSAMPLE_444, 1, 1},
        {65500, 16, 1, 88, GIMG_SUBSAMPLE_AUTO, 1, 1},
        {65500, 17, 3, 50, GIMG_SUBSAMPLE_420, 2, 2},
        /* Below it: the codec's two passes without restarts, then
         * libjpeg's own, the same bytes as cjpeg -optimize. */
        {999, 1000, 3, 90, GIMG_SUBSAMPLE_420, 2, 2},
        {4097, 3, 3, 90, GIMG_SUBSAMPLE_422, 2, 1},
        {3, 4097, 3, 85, GIMG_SUBSAMPLE_420, 2, 2},
        {100, 100, 1, 90, GIMG_SUBSAMPLE_AUTO, 1, 1},
        {17, 9, 3, 90, GIMG_SUBSAMPLE_420, 2, 2},
        {1, 1, 3, 90, GIMG_SUBSAMPLE_AUTO, 1, 1},
    };
    const size_t n = sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < n; i++) {
        /* Under valgrind: the first three and the small ones. */
        if (timing_off() && i >= 3 && (uint64_t)cases[i].w * cases[i].h >= STRIPE_MIN_PIXELS)
            continue;
        check_stripe_case(&cases[i], 500 + i);
    }
    CHECK(TWO_PASS_MIN_PIXELS <= 100 * 100 && 99 * 101 < TWO_PASS_MIN_PIXELS,
          "the cases no longer straddle the two-pass threshold");
}

/* djpeg -strict (every warning an error) reads our striped files to the
 * pixels of libjpeg's file without restarts; so does ImageMagick with
 * -regard-warnings. */
static void test_stripes_peers(void)
{
    const int djpeg = have_tool("djpeg"), magick = access("/usr/bin/identify", X_OK) == 0;
    if (!djpeg && !magick)
        SKIP("neither djpeg nor ImageMagick's identify is installed");
    static const stripe_case cases[] = {
        {1000, 1001, 3, 75, GIMG_SUBSAMPLE_420, 2, 2},
        {1003, 1000, 1, 90, GIMG_SUBSAMPLE_AUTO, 1, 1},
        {1001, 1000, 3, 95, GIMG_SUBSAMPLE_422, 2, 1},
    };
    const int saved = omp_get_max_threads();
    omp_set_num_threads(3);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const stripe_case *t = &cases[i];
        gimg_image im, want, got;
        if (!photo_image(&im, t->w, t->h, t->channels, 700 + i))
            continue;
        bytes plain = libjpeg_optimised(&im, t->quality, t->h0, t->v0, 0);
        unsigned char *buf = NULL, *out = NULL;
        size_t len = 0, out_len = 0;
        char what[64], cmd[512];
        snprintf(what, sizeof what, "%dx%d c%d %dx%d", t->w, t->h, t->channels, t->h0, t->v0);
        const char *jpath = tmp_path("striped.jpg"), *opath = tmp_path("striped.pnm");
        if (encode_jpeg(&im, t->quality, t->sub, 0, &buf, &len) == GIMG_OK &&
            write_file(jpath, buf, len) && plain.len > 0 &&
            gimg_decode_memory(plain.p, plain.len, &want) == GIMG_OK) {
            if (djpeg) {
                snprintf(cmd, sizeof cmd, "djpeg -strict -pnm %s > %s 2>/dev/null", jpath, opath);
                CHECK(run(cmd) == 0, "%s: djpeg -strict refused it", what);
                out = read_file(opath, &out_len);
                if (out && gimg_decode_memory(out, out_len, &got) == GIMG_OK) {
                    same_image(&got, &want, what);
                    gimg_image_free(&got);
                } else {
                    CHECK(0, "%s: no djpeg output", what);
                }
                free(out);
            }
            if (magick) {
                snprintf(cmd, sizeof cmd,
                         "/usr/bin/identify -regard-warnings -verbose %s > %s 2>&1", jpath,
                         opath);
                CHECK(run(cmd) == 0, "%s: ImageMagick's identify refused it", what);
            }
            gimg_image_free(&want);
        } else {
            CHECK(0, "%s: %s", what, gimg_last_error());
        }
        free(buf);
        free(plain.p);
        gimg_image_free(&im);
    }
    omp_set_num_threads(saved);
}

/* Several threads each encoding with OpenMP threads of their own (as the
 * batch's workers do), and an encode inside a parallel region: the bytes
 * one thread writes. */
typedef struct {
    const gimg_image *im;
    const bytes *want;
    int omp_threads, failures;
} stripe_job;

static void *stripe_thread(void *arg)
{
    stripe_job *j = arg;
    omp_set_num_threads(j->omp_threads);
    for (int i = 0; i < 3; i++) {
        unsigned char *buf;
        size_t len;
        if (encode_jpeg(j->im, 85, GIMG_SUBSAMPLE_420, 0, &buf, &len) != GIMG_OK) {
            j->failures++;
            continue;
        }
        j->failures += len != j->want->len || memcmp(buf, j->want->p, len) != 0;
        free(buf);
    }
    return NULL;
}

static void test_stripes_concurrent(void)
{
    gimg_image im;
    if (!photo_image(&im, 1024, 1000, 3, 900))
        return;
    bytes want = libjpeg_optimised(&im, 85, 2, 2, 8);  /* 8 MCU rows of 64 MCUs */
    CHECK(want.len > 0, "libjpeg failed");
    stripe_job jobs[3];
    pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        jobs[i] = (stripe_job){&im, &want, 1 + i, 0};
        pthread_create(&t[i], NULL, stripe_thread, &jobs[i]);
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
        CHECK(jobs[i].failures == 0, "thread %d (%d OpenMP threads): %d failures", i,
              jobs[i].omp_threads, jobs[i].failures);
    }
    int nested_failures = 0;
#pragma omp parallel num_threads(2) reduction(+ : nested_failures)
    {
        unsigned char *buf;
        size_t len;
        if (encode_jpeg(&im, 85, GIMG_SUBSAMPLE_420, 0, &buf, &len) != GIMG_OK) {
            nested_failures++;
        } else {
            nested_failures += len != want.len || memcmp(buf, want.p, len) != 0;
            free(buf);
        }
    }
    CHECK(nested_failures == 0, "inside a parallel region: %d failures", nested_failures);
    free(want.p);
    gimg_image_free(&im);
}

/* ------------------------------------------------ allocation faults */

/* The out-of-memory test fails, one at a time, each allocation the codec
 * and libjpeg make while encoding (libgomp's and libc's own are left
 * alone: they abort or cannot fail cleanly), and checks the status, the
 * message and that every block the encoder took is given back. It
 * replaces malloc, calloc, realloc and free with glibc's own behind a
 * counter; a sanitizer's allocator cannot be replaced so (the test is
 * then left out). valgrind replaces them in its turn unless told not to:
 * run it with --soname-synonyms=somalloc=nouserintercepts to check these
 * failure paths too (its memcheck still sees every block, through glibc's
 * __libc_malloc and friends, which it replaces); without, the test
 * says SKIP. */
#if defined(__GLIBC__) && !defined(UNDER_SANITIZER) /* testfile.h */
#define ALLOC_FAULTS 1
#include <link.h>

void *__libc_malloc(size_t size);
void *__libc_calloc(size_t count, size_t size);
void *__libc_realloc(void *block, size_t size);
void __libc_free(void *block);

#define FAULT_LIVE_MAX 8192

static struct {
    pthread_mutex_t lock;
    uintptr_t lo[2], hi[2];  /* the code of this program (the codec) and libjpeg */
    int armed;               /* their allocations are counted, and may fail */
    long countdown;          /* the one that brings it to 0 fails (0: none) */
    long counted, failed;
    void *live[FAULT_LIVE_MAX];  /* their blocks not given back yet */
    int nlive, overflow;
} faults = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int fault_find_code(struct dl_phdr_info *info, size_t size, void *unused)
{
    const int slot = info->dlpi_name[0] == '\0'                ? 0
                     : strstr(info->dlpi_name, "libjpeg.so") ? 1
                                                              : -1;
    if (slot < 0)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        const uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (!faults.lo[slot] || lo < faults.lo[slot])
            faults.lo[slot] = lo;
        if (hi > faults.hi[slot])
            faults.hi[slot] = hi;
    }
    return 0;
}

/* Whether an allocation called from `at` is one of the encoder's. */
static int fault_ours(const void *at)
{
    const uintptr_t a = (uintptr_t)at;
    return (a >= faults.lo[0] && a < faults.hi[0]) || (a >= faults.lo[1] && a < faults.hi[1]);
}

/* Counts an allocation of the encoder's; 1 if it is the one to fail.
 * The caller holds the lock. */
static int fault_now(void)
{
    faults.counted++;
    if (faults.countdown > 0 && --faults.countdown == 0) {
        faults.failed++;
        return 1;
    }
    return 0;
}

static void fault_track(void *block)
{
    if (!block)
        return;
    if (faults.nlive < FAULT_LIVE_MAX)
        faults.live[faults.nlive++] = block;
    else
        faults.overflow = 1;
}

static int fault_untrack(void *block)
{
    for (int i = 0; i < faults.nlive; i++)
        if (faults.live[i] == block) {
            faults.live[i] = faults.live[--faults.nlive];
            return 1;
        }
    return 0;
}

void *malloc(size_t size)
{
    if (!__atomic_load_n(&faults.armed, __ATOMIC_ACQUIRE) ||
        !fault_ours(__builtin_return_address(0)))
        return __libc_malloc(size);
    pthread_mutex_lock(&faults.lock);
    void *block = fault_now() ? NULL : __libc_malloc(size);
    fault_track(block);
    pthread_mutex_unlock(&faults.lock);
    return block;
}

void *calloc(size_t count, size_t size)
{
    if (!__atomic_load_n(&faults.armed, __ATOMIC_ACQUIRE) ||
        !fault_ours(__builtin_return_address(0)))
        return __libc_calloc(count, size);
    pthread_mutex_lock(&faults.lock);
    void *block = fault_now() ? NULL : __libc_calloc(count, size);
    fault_track(block);
    pthread_mutex_unlock(&faults.lock);
    return block;
}

void *realloc(void *block, size_t size)
{
    const int ours = __atomic_load_n(&faults.armed, __ATOMIC_ACQUIRE) &&
                     fault_ours(__builtin_return_address(0));
    if (!ours && !__atomic_load_n(&faults.nlive, __ATOMIC_ACQUIRE))
        return __libc_realloc(block, size);
    pthread_mutex_lock(&faults.lock);
    void *moved = ours && fault_now() ? NULL : __libc_realloc(block, size);
    if (moved && (fault_untrack(block) || ours))
        fault_track(moved);
    pthread_mutex_unlock(&faults.lock);
    return moved;
}

void free(void *block)
{
    if (block && __atomic_load_n(&faults.nlive, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&faults.lock);
        fault_untrack(block);
        pthread_mutex_unlock(&faults.lock);
    }
    __libc_free(block);
}

/* Counts the encoder's allocations from now, failing the n-th (0: none). */
static void faults_arm(long n)
{
    pthread_mutex_lock(&faults.lock);
    faults.countdown = n;
    faults.counted = faults.failed = 0;
    faults.nlive = faults.overflow = 0;
    pthread_mutex_unlock(&faults.lock);
    __atomic_store_n(&faults.armed, 1, __ATOMIC_RELEASE);
}

static void faults_disarm(void)
{
    __atomic_store_n(&faults.armed, 0, __ATOMIC_RELEASE);
}
#endif

/* Each allocation of an encode failed in turn (all of them; a twelfth
 * under valgrind): an out-of-memory status and message, no output, every
 * block given back; or, where the encoder can do without it (libjpeg
 * retries a pool with less slack; a buffer that is not shrunk), the same
 * file as without the failure. Stripes on 2 threads, the two passes on
 * one, libjpeg's own encoder for progressive and small images. */
static void test_encode_out_of_memory(void)
{
#if !defined(ALLOC_FAULTS)
    SKIP("needs glibc's allocator, not a sanitizer's");
#else
    dl_iterate_phdr(fault_find_code, NULL);
    if (!faults.hi[0] || !faults.hi[1])
        SKIP("could not find libjpeg's code in memory");
    static const struct {
        int w, h, channels, threads, progressive;
        gimg_subsampling sub;
        const char *what;
    } cases[] = {
        {1000, 1000, 3, 2, 0, GIMG_SUBSAMPLE_420, "stripes on 2 threads"},
        {300, 200, 3, 1, 0, GIMG_SUBSAMPLE_444, "two passes"},
        {120, 80, 3, 1, 1, GIMG_SUBSAMPLE_AUTO, "progressive"},
        {60, 40, 1, 1, 0, GIMG_SUBSAMPLE_AUTO, "small"},
    };
    const int saved = omp_get_max_threads();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gimg_image im;
        if (!photo_image(&im, cases[i].w, cases[i].h, cases[i].channels, 300 + i))
            continue;
        gimg_write_opts o;
        gimg_write_opts_init(&o);
        o.quality = 85;
        o.jpeg_subsampling = cases[i].sub;
        o.jpeg_progressive = cases[i].progressive;
        omp_set_num_threads(cases[i].threads);
        unsigned char *want = NULL, *buf;
        size_t want_len = 0, len;
        faults_arm(0);
        gimg_status st = gimg_codec_jpeg.encode(&im, &o, &want, &want_len);
        faults_disarm();
        const long total = faults.counted;
        if (st != GIMG_OK || total == 0) {
            free(want);
            gimg_image_free(&im);
            omp_set_num_threads(saved);
            if (st != GIMG_OK)
                CHECK(0, "%s: %s", cases[i].what, gimg_last_error());
            else
                SKIP("the allocator is not replaceable here (valgrind: add "
                     "--soname-synonyms=somalloc=nouserintercepts)");
            return;
        }
        const long step = timing_off() && total > 12 ? total / 12 : 1;
        long refused = 0;
        for (long n = 1; n <= total; n += step) {
            faults_arm(n);
            st = gimg_codec_jpeg.encode(&im, &o, &buf, &len);
            faults_disarm();
            const int live = faults.nlive;
            CHECK(!faults.overflow, "%s: too many blocks to follow", cases[i].what);
            if (st == GIMG_OK) {
                CHECK(len == want_len && memcmp(buf, want, len) == 0 && live == 1,
                      "%s, allocation %ld of %ld failed: %zu bytes (not %zu), %d blocks live",
                      cases[i].what, n, total, len, want_len, live);
                free(buf);
                continue;
            }
            refused++;
            CHECK(st == GIMG_E_NOMEM && strstr(gimg_last_error(), "out of memory") != NULL,
                  "%s, allocation %ld of %ld failed: status %d '%s'", cases[i].what, n, total,
                  (int)st, gimg_last_error());
            CHECK(buf == NULL && len == 0, "%s, allocation %ld: an output", cases[i].what, n);
            CHECK(live == 0, "%s, allocation %ld of %ld failed: %d blocks leaked",
                  cases[i].what, n, total, live);
        }
        CHECK(refused > 0, "%s: no failure was refused (%ld allocations)", cases[i].what, total);
        free(want);
        gimg_image_free(&im);
    }
    omp_set_num_threads(saved);
#endif
}

/* ------------------------------------------------------------ metadata */

/* CHECKs that got's ICC, EXIF and XMP are want's, byte for byte, and the
 * orientation; the resolution when want_dpi. */
static void check_meta(const gimg_meta *got, const gimg_meta *want, int want_dpi,
                       const char *what)
{
    CHECK(got != NULL, "%s: no metadata decoded", what);
    if (!got || !want)
        return;
    char why[128];
    CHECK(!meta_blobs_differ(got, want, why, sizeof why), "%s: %s", what, why);
    if (want_dpi)
        CHECK(fabs(got->x_dpi - floor(want->x_dpi + 0.5)) < 1e-9 &&
                  fabs(got->y_dpi - floor(want->y_dpi + 0.5)) < 1e-9,
              "%s: %g x %g dpi, wanted %g x %g", what, got->x_dpi, got->y_dpi, want->x_dpi,
              want->y_dpi);
    CHECK(got->warning[0] == '\0', "%s: warning \"%s\"", what, got->warning);
}

/* The segments of a JPEG before its first scan: marker codes and the
 * first bytes of their data. */
typedef struct {
    int n;
    unsigned marker[600];
    size_t length[600];      /* of the data, after the length field */
    size_t at[600];          /* where the data starts */
} segment_list;

static void list_segments(const unsigned char *b, size_t len, segment_list *s)
{
    s->n = 0;
    for (size_t at = 2; at + 4 <= len && b[at] == 0xFF && s->n < 600;) {
        const unsigned marker = b[at + 1];
        const size_t seg = (size_t)b[at + 2] << 8 | b[at + 3];
        s->marker[s->n] = marker;
        s->length[s->n] = seg - 2;
        s->at[s->n] = at + 4;
        s->n++;
        if (marker == 0xDA)
            return;
        at += 2 + seg;
    }
}

/* How many segments are APPn marker `app` whose data starts with id. */
static int count_app(const unsigned char *b, const segment_list *s, unsigned app, const char *id,
                     size_t id_bytes)
{
    int n = 0;
    for (int i = 0; i < s->n; i++)
        n += s->marker[i] == app && s->length[i] >= id_bytes && memcmp(b + s->at[i], id, id_bytes) == 0;
    return n;
}

static gimg_status encode_meta(const gimg_image *im, int progressive, unsigned char **buf,
                               size_t *len)
{
    return encode_jpeg(im, 85, GIMG_SUBSAMPLE_AUTO, progressive, buf, len);
}

static void test_meta_row(void)
{
    CHECK(gimg_codec_jpeg.meta == (GIMG_META_ICC | GIMG_META_EXIF | GIMG_META_XMP |
                                   GIMG_META_RESOLUTION),
          "the row's metadata kinds: %#x", gimg_codec_jpeg.meta);
    CHECK(gimg_codec_jpeg.maxval_rule == GIMG_MAXVAL_FULL, "maxval rule %d",
          gimg_codec_jpeg.maxval_rule);
    /* A file without metadata decodes with none. */
    gimg_image im, back;
    unsigned char *buf;
    size_t len;
    if (!photo_image(&im, 40, 30, 3, 5))
        return;
    if (encode_meta(&im, 0, &buf, &len) == GIMG_OK) {
        if (gimg_decode_memory(buf, len, &back) == GIMG_OK) {
            CHECK(back.meta == NULL, "a plain file decoded with metadata");
            gimg_image_free(&back);
        }
        segment_list s;
        list_segments(buf, len, &s);
        CHECK(s.n > 0 && s.marker[0] == 0xE0, "no JFIF marker first");
        CHECK(s.n > 0 && buf[s.at[0] + 7] == 0, "a plain file has density unit %d, not 0",
              buf[s.at[0] + 7]);
        free(buf);
    }
    gimg_image_free(&im);
}

/* Encode, decode, encode the decoded image again, decode: the ICC profile,
 * EXIF and XMP bytes kept, the resolution, the orientation read from the
 * EXIF, through each encoder path; the markers in libvips' order, once. */
static void test_meta_round_trip(void)
{
    static const struct {
        int w, h, channels, progressive;
        const char *path;
    } cases[] = {
        {40, 30, 3, 0, "libjpeg's encoder (small)"},
        {200, 120, 3, 0, "counted and coded (sequential)"},
        {200, 120, 3, 1, "progressive"},
        {150, 90, 1, 0, "gray"},
        {64, 64, 1, 1, "gray progressive"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gimg_image im;
        if (!photo_image(&im, cases[i].w, cases[i].h, cases[i].channels, 40 + i))
            continue;
        set_meta(&im, 3000 + i, 200 + 2 * i, 6, 700 + i, 300, 150.4);
        unsigned char *buf, *buf2;
        size_t len, len2;
        gimg_image back, back2;
        if (encode_meta(&im, cases[i].progressive, &buf, &len) != GIMG_OK) {
            CHECK(0, "%s: encode: %s", cases[i].path, gimg_last_error());
            gimg_image_free(&im);
            continue;
        }
        segment_list s;
        list_segments(buf, len, &s);
        CHECK(s.n >= 5 && s.marker[0] == 0xE0 && s.marker[1] == 0xE1 && s.marker[2] == 0xE1 &&
                  s.marker[3] == 0xE2 && s.marker[4] == 0xDB,
              "%s: markers not JFIF, EXIF, XMP, ICC, DQT: %02x %02x %02x %02x %02x", cases[i].path,
              s.marker[0], s.marker[1], s.marker[2], s.marker[3], s.marker[4]);
        CHECK(count_app(buf, &s, 0xE1, "Exif\0", 6) == 1 &&
                  count_app(buf, &s, 0xE1, "http://ns.adobe.com/xap/1.0/", 29) == 1 &&
                  count_app(buf, &s, 0xE2, "ICC_PROFILE", 12) == 1,
              "%s: each marker once", cases[i].path);
        /* JFIF: density unit 1 (dpi), 300 x 150. */
        const unsigned char *jfif = buf + s.at[0];
        CHECK(memcmp(jfif, "JFIF", 5) == 0 && jfif[7] == 1 && (jfif[8] << 8 | jfif[9]) == 300 &&
                  (jfif[10] << 8 | jfif[11]) == 150,
              "%s: JFIF density unit %d, %d x %d", cases[i].path, jfif[7], jfif[8] << 8 | jfif[9],
              jfif[10] << 8 | jfif[11]);
        if (gimg_decode_memory(buf, len, &back) != GIMG_OK) {
            CHECK(0, "%s: decode: %s", cases[i].path, gimg_last_error());
        } else {
            check_meta(back.meta, im.meta, 1, cases[i].path);
            if (encode_meta(&back, cases[i].progressive, &buf2, &len2) == GIMG_OK) {
                if (gimg_decode_memory(buf2, len2, &back2) == GIMG_OK) {
                    check_meta(back2.meta, im.meta, 1, cases[i].path);
                    gimg_image_free(&back2);
                }
                free(buf2);
            }
            gimg_image_free(&back);
        }
        /* The pixels do not depend on the metadata: the file without its
         * markers decodes to the same samples. */
        gimg_image plain = im, a, b;
        plain.meta = NULL;
        unsigned char *pbuf;
        size_t plen;
        if (encode_meta(&plain, cases[i].progressive, &pbuf, &plen) == GIMG_OK) {
            if (gimg_decode_memory(pbuf, plen, &a) == GIMG_OK) {
                if (gimg_decode_memory(buf, len, &b) == GIMG_OK) {
                    same_image(&a, &b, cases[i].path);
                    gimg_image_free(&b);
                }
                gimg_image_free(&a);
            }
            free(pbuf);
        }
        free(buf);
        gimg_image_free(&im);
    }
}

/* The APP2 chunks of a file: their count and the profile they join to,
 * read here from the bytes (numbers and counts checked). */
static int icc_chunks(const unsigned char *b, size_t len, bytes *profile)
{
    segment_list s;
    list_segments(b, len, &s);
    int n = 0, count = -1;
    for (int i = 0; i < s.n; i++) {
        if (s.marker[i] != 0xE2 || s.length[i] < 14 || memcmp(b + s.at[i], "ICC_PROFILE", 12))
            continue;
        n++;
        const unsigned char *p = b + s.at[i];
        if (p[12] != n || (count >= 0 && p[13] != count))
            return -1;
        count = p[13];
        put(profile, p + 14, s.length[i] - 14);
    }
    return n == count || n == 0 ? n : -1;
}

/* A profile over one marker's 65519 bytes: in chunks of 65519, numbered
 * 1..n, by every encoder path, the striped one at 1 and 4 threads (the
 * same file); read back whole. */
static void test_meta_multi_chunk_icc(void)
{
    static const struct {
        size_t icc_bytes;
        int chunks;
    } sizes[] = {{65519, 1}, {65520, 2}, {150000, 3}, {3 * 65519, 3}};
    static const struct {
        int w, h, progressive;
        const char *path;
    } paths[] = {
        {60, 40, 0, "small"},
        {300, 200, 0, "sequential"},
        {300, 200, 1, "progressive"},
        {1280, 800, 0, "striped"},
    };
    const int slow = !timing_checked();
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
        gimg_image im;
        if (!photo_image(&im, paths[p].w, paths[p].h, 3, 7 + p))
            continue;
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            if (slow && p == 3 && k != 2)
                continue;  /* under valgrind: the striped path once */
            set_meta(&im, sizes[k].icc_bytes, 120, 3, 0, 0, 0);
            const int threads[2] = {1, 4};
            unsigned char *buf[2] = {NULL, NULL};
            size_t len[2] = {0, 0};
            for (int t = 0; t < (p == 3 ? 2 : 1); t++) {
                omp_set_num_threads(threads[t]);
                if (encode_meta(&im, paths[p].progressive, &buf[t], &len[t]) != GIMG_OK)
                    CHECK(0, "%s, %zu bytes: encode: %s", paths[p].path, sizes[k].icc_bytes,
                          gimg_last_error());
            }
            omp_set_num_threads(1);
            if (!buf[0])
                continue;
            if (p == 3)
                CHECK(buf[1] && len[1] == len[0] && memcmp(buf[0], buf[1], len[0]) == 0,
                      "striped, %zu bytes: 4 threads wrote another file than 1",
                      sizes[k].icc_bytes);
            bytes profile = {0};
            int n = icc_chunks(buf[0], len[0], &profile);
            CHECK(n == sizes[k].chunks, "%s, %zu bytes: %d chunks, wanted %d", paths[p].path,
                  sizes[k].icc_bytes, n, sizes[k].chunks);
            CHECK(same_blob(profile.p, profile.len, im.meta->icc, im.meta->icc_bytes),
                  "%s, %zu bytes: the chunks hold another profile", paths[p].path,
                  sizes[k].icc_bytes);
            gimg_image back;
            if (gimg_decode_memory(buf[0], len[0], &back) == GIMG_OK) {
                check_meta(back.meta, im.meta, 0, paths[p].path);
                gimg_image_free(&back);
            } else {
                CHECK(0, "%s: decode: %s", paths[p].path, gimg_last_error());
            }
            free(profile.p);
            free(buf[0]);
            free(buf[1]);
        }
        gimg_image_free(&im);
    }
}

/* Blocks one marker cannot hold are left out, the others written: EXIF
 * up to 65527 bytes, XMP up to 65504, a profile up to 255 chunks; write.c
 * counts them dropped (unfit_meta). */
static void test_meta_too_large(void)
{
    gimg_image im;
    if (!photo_image(&im, 48, 32, 3, 9))
        return;
    static const struct {
        size_t exif, xmp, icc;
        int exif_kept, xmp_kept, icc_kept;
    } cases[] = {
        {65527, 65504, 1000, 1, 1, 1},
        {65528, 65504, 1000, 0, 1, 1},
        {65527, 65505, 1000, 1, 0, 1},
        {400, 300, (size_t)255 * 65519, 1, 1, 1},
        {400, 300, (size_t)255 * 65519 + 1, 1, 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        set_meta(&im, cases[i].icc, cases[i].exif, 8, cases[i].xmp, 0, 0);
        unsigned char *buf;
        size_t len;
        gimg_image back;
        if (encode_meta(&im, 0, &buf, &len) != GIMG_OK) {
            CHECK(0, "case %zu: encode: %s", i, gimg_last_error());
            continue;
        }
        if (gimg_decode_memory(buf, len, &back) != GIMG_OK) {
            CHECK(0, "case %zu: decode: %s", i, gimg_last_error());
            free(buf);
            continue;
        }
        const gimg_meta *m = back.meta, *w = im.meta;
        CHECK(m != NULL, "case %zu: no metadata", i);
        if (m) {
            /* An EXIF block left out still leaves its orientation (8): in
             * a block of its own (gimg_exif_minimal, 26 bytes). */
            CHECK(cases[i].exif_kept ? same_blob(m->exif, m->exif_bytes, w->exif, w->exif_bytes)
                                     : m->exif_bytes == 26 && m->orientation == 8,
                  "case %zu: EXIF of %zu bytes read back as %zu", i, cases[i].exif, m->exif_bytes);
            CHECK(cases[i].xmp_kept ? same_blob(m->xmp, m->xmp_bytes, w->xmp, w->xmp_bytes)
                                    : m->xmp_bytes == 0,
                  "case %zu: XMP of %zu bytes read back as %zu", i, cases[i].xmp, m->xmp_bytes);
            CHECK(cases[i].icc_kept ? same_blob(m->icc, m->icc_bytes, w->icc, w->icc_bytes)
                                    : m->icc_bytes == 0,
                  "case %zu: profile of %zu bytes read back as %zu", i, cases[i].icc,
                  m->icc_bytes);
        }
        gimg_image_free(&back);
        free(buf);
    }
    gimg_image_free(&im);
}

/* A plain file of ours (no metadata) with `segments` put after its JFIF
 * marker, or in its place when drop_jfif. */
static bytes with_segments(const bytes *segments, int drop_jfif, int channels)
{
    bytes out = {0};
    gimg_image im;
    unsigned char *buf;
    size_t len;
    if (!photo_image(&im, 32, 24, channels, 77))
        exit(1);
    if (encode_meta(&im, 0, &buf, &len) != GIMG_OK)
        exit(1);
    const size_t jfif_end = 4 + ((size_t)buf[4] << 8 | buf[5]);
    put(&out, buf, drop_jfif ? 2 : jfif_end);
    put(&out, segments->p, segments->len);
    put(&out, buf + jfif_end, len - jfif_end);
    free(buf);
    gimg_image_free(&im);
    return out;
}

static void put_app(bytes *b, unsigned marker, const void *id, size_t id_bytes,
                    const unsigned char *p, size_t n)
{
    put_byte(b, 0xFF);
    put_byte(b, marker);
    put_byte(b, (unsigned)(id_bytes + n + 2) >> 8);
    put_byte(b, (unsigned)(id_bytes + n + 2) & 255);
    put(b, id, id_bytes);
    put(b, p, n);
}

/* An ICC chunk: number `seq` of `count`, holding p[0..n-1]. */
static void put_icc_chunk(bytes *b, int seq, int count, const unsigned char *p, size_t n)
{
    unsigned char head[14];
    memcpy(head, "ICC_PROFILE", 12);
    head[12] = (unsigned char)seq;
    head[13] = (unsigned char)count;
    put_app(b, 0xE2, head, sizeof head, p, n);
}

/* Decodes f: it must decode; returns its metadata (the caller frees it)
 * and checks its pixels against `plain`'s. */
static gimg_meta *decode_meta(const bytes *f, const bytes *plain, const char *what)
{
    gimg_image a, b;
    gimg_meta *m = NULL;
    if (gimg_decode_memory(f->p, f->len, &a) != GIMG_OK) {
        CHECK(0, "%s: refused: %s", what, gimg_last_error());
        return NULL;
    }
    if (plain && gimg_decode_memory(plain->p, plain->len, &b) == GIMG_OK) {
        same_image(&a, &b, what);
        gimg_image_free(&b);
    }
    m = a.meta;
    a.meta = NULL;
    gimg_image_free(&a);
    return m;
}

/* Files made here, markers by hand: what the decoder takes of them. */
static void test_meta_decode_crafted(void)
{
    unsigned char *icc = fake_icc(5000, 3);
    unsigned char *exif6 = make_exif(100, 6, 1, 32, 24), *exif3 = make_exif(90, 3, 0, 32, 24);
    unsigned char *xmp = make_xmp(400), *xmp2 = make_xmp(300);
    bytes none = {0};
    bytes plain = with_segments(&none, 0, 3);

    /* Chunks out of order, joined by number; the first EXIF and XMP only;
     * Extended XMP and unknown APP1s passed over; big-endian EXIF. */
    bytes seg = {0};
    put_app(&seg, 0xE1, "http://ns.adobe.com/xmp/extension/", 35, xmp2, 300);
    put_icc_chunk(&seg, 2, 3, icc + 2000, 2000);
    put_app(&seg, 0xE1, "Exif\0\0", 6, exif6, 100);
    put_app(&seg, 0xE1, "XYZ\0", 4, xmp2, 50);
    put_icc_chunk(&seg, 3, 3, icc + 4000, 1000);
    put_app(&seg, 0xE1, "http://ns.adobe.com/xap/1.0/", 29, xmp, 400);
    put_app(&seg, 0xE1, "Exif\0\0", 6, exif3, 90);
    put_app(&seg, 0xE1, "http://ns.adobe.com/xap/1.0/", 29, xmp2, 300);
    put_icc_chunk(&seg, 1, 3, icc, 2000);
    bytes f = with_segments(&seg, 0, 3);
    gimg_meta *m = decode_meta(&f, &plain, "crafted");
    CHECK(m && same_blob(m->icc, m->icc_bytes, icc, 5000), "the chunks not joined in order");
    CHECK(m && same_blob(m->exif, m->exif_bytes, exif6, 100), "not the first EXIF block");
    CHECK(m && m->orientation == 6, "orientation %d, wanted 6", m ? m->orientation : -1);
    CHECK(m && same_blob(m->xmp, m->xmp_bytes, xmp, 400), "not the first XMP packet");
    CHECK(m && m->warning[0] == '\0', "warning \"%s\"", m ? m->warning : "");
    CHECK(m && m->x_dpi == 0 && m->y_dpi == 0, "our plain file has no density, yet %g dpi",
          m ? m->x_dpi : 0);
    gimg_meta_free(m);
    free(f.p);
    free(seg.p);

    /* JFIF densities: unit 1 (dpi), 2 (dots per cm), 0 (aspect only); no JFIF. */
    static const struct {
        int unit, x, y;
        double x_dpi, y_dpi;
    } dens[] = {{1, 72, 96, 72, 96}, {2, 118, 40, 299.72, 101.6}, {0, 1, 2, 0, 0},
                {1, 0, 0, 0, 0}};
    for (size_t i = 0; i < sizeof dens / sizeof dens[0]; i++) {
        unsigned char jfif[14] = {'J', 'F', 'I', 'F', 0, 1, 2, (unsigned char)dens[i].unit,
                                  (unsigned char)(dens[i].x >> 8), (unsigned char)dens[i].x,
                                  (unsigned char)(dens[i].y >> 8), (unsigned char)dens[i].y, 0, 0};
        bytes js = {0};
        put_segment(&js, 0xE0, jfif, sizeof jfif);
        bytes jf = with_segments(&js, 1, 3);
        m = decode_meta(&jf, &plain, "JFIF density");
        const double x = m ? m->x_dpi : 0, y = m ? m->y_dpi : 0;
        CHECK(fabs(x - dens[i].x_dpi) < 1e-9 && fabs(y - dens[i].y_dpi) < 1e-9,
              "unit %d, %d x %d: %g x %g dpi, wanted %g x %g", dens[i].unit, dens[i].x, dens[i].y,
              x, y, dens[i].x_dpi, dens[i].y_dpi);
        CHECK(dens[i].x_dpi > 0 || m == NULL, "unit %d: metadata without any", dens[i].unit);
        gimg_meta_free(m);
        free(jf.p);
        free(js.p);
    }
    /* No JFIF marker: no resolution. */
    bytes nj = with_segments(&none, 1, 3);
    m = decode_meta(&nj, &plain, "no JFIF");
    CHECK(m == NULL, "a file without JFIF has metadata");
    gimg_meta_free(m);
    free(nj.p);

    free(plain.p);
    free(icc);
    free(exif6);
    free(exif3);
    free(xmp);
    free(xmp2);
}

/* Broken ICC sequences and EXIF blocks: the image decodes as without
 * them, the profile (or block) dropped with a warning saying why, the
 * rest of the metadata kept. */
static void test_meta_hostile(void)
{
    unsigned char *icc = fake_icc(3000, 5);
    unsigned char *exif = make_exif(80, 5, 0, 32, 24);
    bytes none = {0};
    bytes plain = with_segments(&none, 0, 3);
    typedef struct {
        int seq, count;
        size_t from, n;
    } chunk_spec;
    static const struct {
        const char *what, *words;
        int n;
        chunk_spec c[4];
    } cases[] = {
        {"a gap", "chunk 2 of 3 is missing", 2, {{1, 3, 0, 1000}, {3, 3, 2000, 1000}}},
        {"the last missing", "chunk 2 of 2 is missing", 1, {{1, 2, 0, 3000}}},
        {"counts disagree", "counts of 2 and 3", 2, {{1, 2, 0, 1500}, {2, 3, 1500, 1500}}},
        {"a duplicate", "chunk 1 of 2 appears twice", 3,
         {{1, 2, 0, 1500}, {1, 2, 0, 1500}, {2, 2, 1500, 1500}}},
        {"number 0", "numbered 0 of 1", 1, {{0, 1, 0, 3000}}},
        {"past the count", "numbered 3 of 2", 2, {{1, 2, 0, 1500}, {3, 2, 1500, 1500}}},
        {"a count of 0", "numbered 1 of 0", 1, {{1, 0, 0, 3000}}},
        {"empty chunks", "empty", 2, {{1, 2, 0, 0}, {2, 2, 0, 0}}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bytes seg = {0};
        put_app(&seg, 0xE1, "Exif\0\0", 6, exif, 80);
        for (int k = 0; k < cases[i].n; k++)
            put_icc_chunk(&seg, cases[i].c[k].seq, cases[i].c[k].count, icc + cases[i].c[k].from,
                          cases[i].c[k].n);
        bytes f = with_segments(&seg, 0, 3);
        gimg_meta *m = decode_meta(&f, &plain, cases[i].what);
        CHECK(m && m->icc == NULL && m->icc_bytes == 0, "%s: a profile kept", cases[i].what);
        CHECK(m && contains(m->warning, "ICC profile dropped") && contains(m->warning, cases[i].words),
              "%s: warning \"%s\", wanted \"%s\"", cases[i].what, m ? m->warning : "",
              cases[i].words);
        CHECK(m && same_blob(m->exif, m->exif_bytes, exif, 80) && m->orientation == 5,
              "%s: the EXIF block lost", cases[i].what);
        gimg_meta_free(m);
        free(f.p);
        free(seg.p);
    }

    /* A chunk shorter than its 14-byte header. */
    bytes seg = {0};
    put_app(&seg, 0xE2, "ICC_PROFILE\0\1", 13, NULL, 0);
    bytes f = with_segments(&seg, 0, 3);
    gimg_meta *m = decode_meta(&f, &plain, "short chunk");
    CHECK(m && !m->icc && contains(m->warning, "shorter than its header"), "short chunk: \"%s\"",
          m ? m->warning : "");
    gimg_meta_free(m);
    free(f.p);
    free(seg.p);

    /* 255 chunks of 65519 bytes: the largest profile, joined (bounded by
     * the file); 256 markers claiming 255: a duplicate, dropped. */
    if (timing_checked()) {
        unsigned char *big = fake_icc((size_t)255 * 65519, 1);
        for (int extra = 0; extra < 2; extra++) {
            bytes s2 = {0};
            for (int k = 1; k <= 255; k++)
                put_icc_chunk(&s2, k, 255, big + (size_t)(k - 1) * 65519, 65519);
            if (extra)
                put_icc_chunk(&s2, 7, 255, big, 65519);
            bytes f2 = with_segments(&s2, 0, 3);
            m = decode_meta(&f2, &plain, "255 chunks");
            if (!extra)
                CHECK(m && same_blob(m->icc, m->icc_bytes, big, (size_t)255 * 65519),
                      "255 chunks not joined: %zu bytes", m ? m->icc_bytes : 0);
            else
                CHECK(m && !m->icc && contains(m->warning, "chunk 7 of 255 appears twice"),
                      "256 chunks: \"%s\"", m ? m->warning : "");
            gimg_meta_free(m);
            free(f2.p);
            free(s2.p);
        }
        free(big);
    }

    /* EXIF whose IFD loops, or points past the block: dropped, the
     * profile kept. */
    for (int kind = 0; kind < 2; kind++) {
        unsigned char bad[80];
        memcpy(bad, exif, 80);
        if (kind == 0)
            bad[34] = 8;     /* IFD0's next IFD: IFD0 again */
        else
            bad[4] = 200;    /* IFD0 at 200 of 80 bytes */
        bytes s3 = {0};
        put_app(&s3, 0xE1, "Exif\0\0", 6, bad, 80);
        put_icc_chunk(&s3, 1, 1, icc, 3000);
        bytes f3 = with_segments(&s3, 0, 3);
        m = decode_meta(&f3, &plain, kind ? "EXIF past its block" : "EXIF loop");
        CHECK(m && !m->exif && m->orientation == 0 && contains(m->warning, "EXIF dropped"),
              "EXIF case %d: %zu bytes kept, warning \"%s\"", kind, m ? m->exif_bytes : 0,
              m ? m->warning : "");
        CHECK(m && same_blob(m->icc, m->icc_bytes, icc, 3000), "EXIF case %d: profile lost", kind);
        gimg_meta_free(m);
        free(f3.p);
        free(s3.p);
    }

    /* A truncated metadata marker is a truncated file: refused. */
    bytes s4 = {0};
    put_icc_chunk(&s4, 1, 1, icc, 3000);
    bytes f4 = with_segments(&s4, 0, 3);
    gimg_image im;
    f4.len = 200;
    CHECK(gimg_decode_memory(f4.p, f4.len, &im) == GIMG_E_FORMAT && im.meta == NULL,
          "a file cut inside an ICC chunk: %s", gimg_last_error());
    free(f4.p);
    free(s4.p);

    free(plain.p);
    free(icc);
    free(exif);
}

/* A CMYK file's profile describes inks; its samples are read as RGB: the
 * profile is dropped, with a warning. */
static void test_meta_cmyk_profile(void)
{
    enum { W = 16, H = 8 };
    unsigned char px[W * H * 4];
    uint64_t state = 3;
    for (size_t i = 0; i < sizeof px; i++)
        px[i] = (unsigned char)testimg_next(&state);
    bytes cmyk = encode_cmyk(px, W, H, JCS_CMYK, 1);
    if (!cmyk.len) {
        CHECK(0, "libjpeg's CMYK encode failed");
        return;
    }
    unsigned char *icc = fake_icc(600, 8);
    memcpy(icc + 16, "CMYK", 4);
    bytes f = {0};
    put(&f, cmyk.p, 2);
    put_icc_chunk(&f, 1, 1, icc, 600);
    put(&f, cmyk.p + 2, cmyk.len - 2);
    gimg_meta *m = decode_meta(&f, &cmyk, "CMYK");
    CHECK(m && !m->icc && contains(m->warning, "CMYK"), "CMYK profile: %zu bytes, \"%s\"",
          m ? m->icc_bytes : 0, m ? m->warning : "");
    gimg_meta_free(m);
    free(f.p);
    free(cmyk.p);
    free(icc);
}

/* A real profile for the peers' checks: Pillow's sRGB (lcms), when
 * /usr/bin/python3 has it; else NULL. malloc'd. */
static unsigned char *real_icc(size_t *n)
{
    const char *path = tmp_path("srgb.icc");
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c 'from PIL import ImageCms; import sys; "
             "open(sys.argv[1], \"wb\").write(ImageCms.ImageCmsProfile("
             "ImageCms.createProfile(\"sRGB\")).tobytes())' %s 2>/dev/null",
             path);
    if (run(cmd) != 0)
        return NULL;
    return read_file(path, n);
}

/* Our files read by exiftool and ImageMagick: the same profile bytes, our
 * EXIF's orientation, the resolution; theirs (cjpeg -icc, exiftool's
 * EXIF) read by us. */
static void test_meta_peers(void)
{
    const int exiftool = have_tool("exiftool"), convert = access("/usr/bin/convert", X_OK) == 0;
    if (!exiftool && !convert)
        SKIP("neither exiftool nor ImageMagick's /usr/bin/convert is installed");
    size_t real_bytes = 0;
    unsigned char *real = real_icc(&real_bytes);
    const struct {
        const char *what;
        int w, h;
        size_t fake_bytes;
        int progressive;
    } cases[] = {
        {"small", 40, 30, 0, 0},
        {"three chunks, progressive", 200, 100, 150000, 1},
        {"three chunks, striped", 1200, 900, 150000, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gimg_image im;
        if (!photo_image(&im, cases[i].w, cases[i].h, 3, 30 + i))
            continue;
        set_meta(&im, cases[i].fake_bytes ? cases[i].fake_bytes : 1000, 300, 6, 500, 240, 240);
        if (!cases[i].fake_bytes && real) {
            free(im.meta->icc);
            im.meta->icc = malloc(real_bytes);
            memcpy(im.meta->icc, real, real_bytes);
            im.meta->icc_bytes = real_bytes;
        }
        unsigned char *buf;
        size_t len, got_bytes;
        omp_set_num_threads(2);
        gimg_status st = encode_meta(&im, cases[i].progressive, &buf, &len);
        omp_set_num_threads(1);
        if (st != GIMG_OK) {
            CHECK(0, "%s: encode: %s", cases[i].what, gimg_last_error());
            gimg_image_free(&im);
            continue;
        }
        const char *jpg = tmp_path("meta.jpg"), *icc_out = tmp_path("meta.icc");
        const char *out = tmp_path("exiftool.txt");
        write_file(jpg, buf, len);
        char cmd[1024];
        if (exiftool) {
            snprintf(cmd, sizeof cmd, "exiftool -b -ICC_Profile %s > %s 2>/dev/null", jpg, icc_out);
            unsigned char *got = run(cmd) == 0 ? read_file(icc_out, &got_bytes) : NULL;
            CHECK(got && same_blob(got, got_bytes, im.meta->icc, im.meta->icc_bytes),
                  "%s: exiftool's profile has %zu bytes, ours %zu", cases[i].what,
                  got ? got_bytes : 0, im.meta->icc_bytes);
            free(got);
            snprintf(cmd, sizeof cmd,
                     "exiftool -s3 -n -Orientation -JFIF:XResolution -JFIF:ResolutionUnit "
                     "-ExifImageWidth %s > %s 2>/dev/null", jpg, out);
            got = run(cmd) == 0 ? read_file(out, &got_bytes) : NULL;
            char want[64];
            snprintf(want, sizeof want, "6\n240\n1\n%d\n", cases[i].w);
            CHECK(got && got_bytes == strlen(want) && memcmp(got, want, got_bytes) == 0,
                  "%s: exiftool reads \"%.*s\", wanted \"%s\"", cases[i].what,
                  got ? (int)got_bytes : 0, got ? (const char *)got : "", want);
            free(got);
        }
        if (convert) {
            snprintf(cmd, sizeof cmd, "/usr/bin/convert %s %s 2>/dev/null", jpg, icc_out);
            unsigned char *got = run(cmd) == 0 ? read_file(icc_out, &got_bytes) : NULL;
            CHECK(got && same_blob(got, got_bytes, im.meta->icc, im.meta->icc_bytes),
                  "%s: ImageMagick's profile has %zu bytes, ours %zu", cases[i].what,
                  got ? got_bytes : 0, im.meta->icc_bytes);
            free(got);
        }
        free(buf);
        gimg_image_free(&im);
    }

    /* Theirs, read by us: cjpeg -icc (libjpeg's own chunking), then
     * exiftool's Orientation and JFIF resolution. */
    if (exiftool && have_tool("cjpeg") && real) {
        const char *ppm = tmp_path("src.ppm"), *icc_path = tmp_path("srgb.icc");
        const char *jpg = tmp_path("theirs.jpg");
        FILE *f = fopen(ppm, "wb");
        if (f) {
            fprintf(f, "P6\n20 10\n255\n");
            for (int k = 0; k < 20 * 10 * 3; k++)
                fputc(k * 7 & 255, f);
            fclose(f);
        }
        char cmd[1024];
        snprintf(cmd, sizeof cmd,
                 "cjpeg -icc %s %s > %s 2>/dev/null && exiftool -q -overwrite_original "
                 "-Orientation#=8 -XResolution=72 -JFIF:XResolution=180 -JFIF:YResolution=90 "
                 "-JFIF:ResolutionUnit=inches %s >/dev/null 2>&1",
                 icc_path, ppm, jpg, jpg);
        size_t len;
        unsigned char *buf = run(cmd) == 0 ? read_file(jpg, &len) : NULL;
        gimg_image back;
        CHECK(buf != NULL, "cjpeg -icc or exiftool failed");
        if (buf && gimg_decode_memory(buf, len, &back) == GIMG_OK) {
            const gimg_meta *m = back.meta;
            CHECK(m && same_blob(m->icc, m->icc_bytes, real, real_bytes),
                  "cjpeg -icc: profile of %zu bytes, wanted %zu", m ? m->icc_bytes : 0,
                  real_bytes);
            CHECK(m && m->orientation == 8 && m->exif_bytes > 0, "exiftool's orientation: %d",
                  m ? m->orientation : -1);
            CHECK(m && m->x_dpi == 180 && m->y_dpi == 90, "exiftool's JFIF: %g x %g dpi",
                  m ? m->x_dpi : 0, m ? m->y_dpi : 0);
            gimg_image_free(&back);
        } else if (buf) {
            CHECK(0, "their file refused: %s", gimg_last_error());
        }
        free(buf);
    }
    free(real);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "%s/gimg-jpeg.XXXXXX", "/tmp");
    if (!mkdtemp(tmpdir)) {
        printf("FAIL: setup: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    RUN(test_sniff_and_probe);
    RUN(test_round_trip);
    RUN(test_encode_markers);
    RUN(test_encode_optimised);
    RUN(test_encode_equals_cjpeg);
    RUN(test_decode_equals_djpeg);
    RUN(test_cmyk);
    RUN(test_cmyk_against_imagemagick);
    RUN(test_crafted_headers);
    RUN(test_huge_no_big_allocation);
    RUN(test_truncated);
    RUN(test_warnings);
    RUN(test_scan_limit_edge);
    RUN(test_ten_thousand_scans);
    RUN(test_threads);
    RUN(test_strips_equal_whole);
    RUN(test_strips_hostile);
    RUN(test_stripes_equal_libjpeg);
    RUN(test_stripes_peers);
    RUN(test_stripes_concurrent);
    RUN(test_encode_out_of_memory);
    RUN(test_meta_row);
    RUN(test_meta_round_trip);
    RUN(test_meta_multi_chunk_icc);
    RUN(test_meta_too_large);
    RUN(test_meta_decode_crafted);
    RUN(test_meta_hostile);
    RUN(test_meta_cmyk_profile);
    RUN(test_meta_peers);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return check_summary();
}
