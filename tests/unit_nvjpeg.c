/*
 * unit_nvjpeg — the parts of the GPU codecs that need no GPU, in every
 * build (CI's included): libnvjpeg's loader when the library is missing;
 * which JPEGs gimg_jpeg_read_header gives the GPU's decoders (baseline
 * 4:4:4, 4:2:2, 4:2:0, 4:4:0 and gray) and which it keeps for libjpeg-
 * turbo, with why (progressive, arithmetic-coded, CMYK, 4:1:1, cut short,
 * a second scan), the header read giving decoding's layout and metadata;
 * gimg_jpeg_with_headers putting a file's headers on another encoder's
 * bitstream byte for byte as our encoder writes them (JFIF resolution,
 * EXIF, XMP, an ICC profile in several chunks, blocks too large left
 * out); --device auto's choice between the CPU's and the GPU's codecs.
 * Where the build finds nvJPEG's own header (the CUDA Toolkit's, or
 * NVJPEG_INCLUDE), lib/nvjpeg_api.h's values and layouts are checked
 * against it at compile time; otherwise that test is skipped.
 */
#include "check.h"
#include "ctx_internal.h"
#include "gimg.h"
#include "jpeg_internal.h"
#include "nvjpeg_api.h"
#include "testfile.h"
#include "testimg.h"
#include "testmeta.h"
#include "testjpeg.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


#if defined(__has_include)
#if __has_include(<nvjpeg.h>) && __has_include(<cuda_runtime_api.h>)
#include <nvjpeg.h>
#define HAVE_NVJPEG_HEADER 1
#endif
#endif

/* ------------------------------------------------ files made by libjpeg */

/* How a test file is coded. */
typedef struct {
    J_COLOR_SPACE space;     /* JCS_GRAYSCALE, JCS_YCbCr, JCS_RGB (no transform), JCS_CMYK */
    int h0, v0;              /* the first component's sampling factors */
    int progressive, arithmetic;
    int separate_scans;      /* one scan per component (sequential) */
} coding;

static void coding_setup(j_compress_ptr c, void *user)
{
    const coding *k = user;
    jpeg_set_colorspace(c, k->space);
    c->comp_info[0].h_samp_factor = k->h0;
    c->comp_info[0].v_samp_factor = k->v0;
    c->arith_code = k->arithmetic ? TRUE : FALSE;
    if (k->progressive)
        jpeg_simple_progression(c);
    static jpeg_scan_info scans[3];
    if (k->separate_scans) {
        for (int i = 0; i < 3; i++)
            scans[i] = (jpeg_scan_info){1, {i}, 0, 63, 0, 0};
        c->scan_info = scans;
        c->num_scans = c->num_components < 3 ? c->num_components : 3;
    }
}

/* A w x h JPEG of smooth content coded as k says; .p NULL on failure. */
static bytes make_jpeg(int w, int h, const coding *k)
{
    bytes out = {0};
    const int comps = k->space == JCS_GRAYSCALE ? 1 : k->space == JCS_CMYK ? 4 : 3;
    unsigned char *px = malloc((size_t)w * h * comps);
    if (!px)
        return out;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < comps; c++)
                px[((size_t)y * w + x) * comps + c] = (unsigned char)(40 + (x * 3 + y * 5 + c * 60) % 170);
    out = testjpeg_encode(px, (size_t)w * comps, w, h, comps,
                          comps == 1 ? JCS_GRAYSCALE : comps == 4 ? JCS_CMYK : JCS_RGB,
                          coding_setup, (void *)k);
    free(px);
    return out;
}

/* ------------------------------------------------------------- the loader */

static void test_loader_without_library(void)
{
    /* main() named a library that does not exist, before any load. */
    const char *why = NULL;
    const gimg_nvjpeg_api *api = gimg_nvjpeg_load(&why);
    CHECK(api == NULL, "a missing library loaded");
    CHECK(why && contains(why, "libnvjpeg was not found"), "why: %s", why ? why : "(null)");
    CHECK(gimg_nvjpeg_version() == NULL, "a version without a library");
    CHECK(!strcmp(gimg_nvjpeg_status_name(GIMG_NVJPEG_BAD_JPEG), "bad JPEG"), "status name");
    CHECK(!strcmp(gimg_nvjpeg_status_name(99), "unknown status"), "unknown status");
}

/* ----------------------------------------------------- which JPEGs go */

static void test_gpu_takes(void)
{
    static const struct {
        const char *what;
        coding k;
        int channels;
        int css;           /* the facts' subsampling when taken */
        const char *refusal; /* NULL: taken */
    } cases[] = {
        {"4:4:4", {JCS_YCbCr, 1, 1, 0, 0, 0}, 3, GIMG_NVJPEG_CSS_444, NULL},
        {"4:2:2", {JCS_YCbCr, 2, 1, 0, 0, 0}, 3, GIMG_NVJPEG_CSS_422, NULL},
        {"4:2:0", {JCS_YCbCr, 2, 2, 0, 0, 0}, 3, GIMG_NVJPEG_CSS_420, NULL},
        {"4:4:0", {JCS_YCbCr, 1, 2, 0, 0, 0}, 3, GIMG_NVJPEG_CSS_440, NULL},
        {"gray", {JCS_GRAYSCALE, 1, 1, 0, 0, 0}, 1, GIMG_NVJPEG_CSS_GRAY, NULL},
        {"4:1:1", {JCS_YCbCr, 4, 1, 0, 0, 0}, 3, 0, "chroma subsampling"},
        {"progressive", {JCS_YCbCr, 2, 2, 1, 0, 0}, 3, 0, "progressive"},
        {"arithmetic", {JCS_YCbCr, 2, 2, 0, 1, 0}, 3, 0, "arithmetic"},
        {"CMYK", {JCS_CMYK, 1, 1, 0, 0, 0}, 3, 0, "CMYK"},
        {"RGB components", {JCS_RGB, 1, 1, 0, 0, 0}, 3, 0, "RGB components"},
        {"separate scans", {JCS_YCbCr, 1, 1, 0, 0, 1}, 3, 0, "separate scans"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bytes f = make_jpeg(37, 21, &cases[i].k);
        CHECK(f.p != NULL, "%s: libjpeg made no file", cases[i].what);
        if (!f.p)
            continue;
        gimg_image shell, full;
        gimg_jpeg_facts facts;
        gimg_status st = gimg_jpeg_read_header(f.p, f.len, &shell, &facts);
        CHECK(st == GIMG_OK, "%s: %s", cases[i].what, gimg_last_error());
        CHECK(gimg_decode_memory(f.p, f.len, &full) == GIMG_OK, "%s: decode: %s",
              cases[i].what, gimg_last_error());
        /* The header gives decoding's layout, and no pixels. */
        CHECK(shell.width == full.width && shell.height == full.height &&
                  shell.channels == full.channels && shell.sample == full.sample &&
                  shell.channels == cases[i].channels && !shell.data && !shell.device,
              "%s: header %dx%dx%d, decoded %dx%dx%d", cases[i].what, shell.width, shell.height,
              shell.channels, full.width, full.height, full.channels);
        if (cases[i].refusal)
            CHECK(facts.gpu_refusal && contains(facts.gpu_refusal, cases[i].refusal),
                  "%s: refusal '%s'", cases[i].what,
                  facts.gpu_refusal ? facts.gpu_refusal : "(none)");
        else
            CHECK(!facts.gpu_refusal && facts.subsampling == cases[i].css,
                  "%s: refusal '%s', subsampling %d", cases[i].what,
                  facts.gpu_refusal ? facts.gpu_refusal : "(none)", facts.subsampling);
        gimg_image_free(&shell);
        gimg_image_free(&full);
        free(f.p);
    }
}

/* A file cut anywhere in its data, or with bytes after a marker inside
 * its scan, stays with libjpeg-turbo (which refuses what it must). */
static void test_cut_and_odd_scans(void)
{
    const coding k = {JCS_YCbCr, 2, 2, 0, 0, 0};
    bytes f = make_jpeg(64, 48, &k);
    CHECK(f.p != NULL);
    if (!f.p)
        return;
    gimg_image shell;
    gimg_jpeg_facts facts;
    CHECK(gimg_jpeg_read_header(f.p, f.len, &shell, &facts) == GIMG_OK && !facts.gpu_refusal,
          "the whole file is taken");
    gimg_image_free(&shell);
    /* Its scan's data starts after the header; cut within it, and before EOI. */
    for (size_t cut = f.len - 1; cut > f.len - 40; cut -= 7) {
        gimg_status st = gimg_jpeg_read_header(f.p, cut, &shell, &facts);
        CHECK(st == GIMG_OK && facts.gpu_refusal && contains(facts.gpu_refusal, "whole scan"),
              "cut at %zu of %zu: status %d, refusal %s", cut, f.len, st,
              facts.gpu_refusal ? facts.gpu_refusal : "(none)");
        gimg_image_free(&shell);
    }
    /* Trailing bytes after EOI are allowed, as libjpeg allows them. */
    bytes g = {0};
    put(&g, f.p, f.len);
    put(&g, "trailing", 8);
    CHECK(gimg_jpeg_read_header(g.p, g.len, &shell, &facts) == GIMG_OK && !facts.gpu_refusal,
          "trailing bytes: %s", facts.gpu_refusal ? facts.gpu_refusal : "taken");
    gimg_image_free(&shell);
    /* A DNL-like marker inside the scan: not one whole scan. */
    g.p[f.len - 2] = 0xFF;
    g.p[f.len - 1] = 0xDC;
    CHECK(gimg_jpeg_read_header(g.p, g.len, &shell, &facts) == GIMG_OK &&
              facts.gpu_refusal,
          "a marker before EOI was taken");
    gimg_image_free(&shell);
    /* A broken header is decoding's error, not a refusal. */
    CHECK(gimg_jpeg_read_header(f.p, 40, &shell, &facts) != GIMG_OK && !shell.meta,
          "a header cut short was read");
    free(g.p);
    free(f.p);
}

/* The header read keeps the file's metadata as decoding does. */
static void test_header_metadata(void)
{
    gimg_image im, shell, full;
    CHECK(gimg_image_alloc(&im, 40, 30, 3, GIMG_U8) == GIMG_OK);
    testimg_fill_random(&im, 7);
    set_meta(&im, 3000, 200, 6, 500, 300, 150);
    unsigned char *buf = NULL;
    size_t len = 0;
    gimg_write_opts o;
    gimg_write_opts_init(&o);
    CHECK(gimg_encode(&im, GIMG_FMT_JPEG, &o, &buf, &len) == GIMG_OK, "%s", gimg_last_error());
    gimg_jpeg_facts facts;
    CHECK(gimg_jpeg_read_header(buf, len, &shell, &facts) == GIMG_OK && !facts.gpu_refusal);
    CHECK(gimg_decode_memory(buf, len, &full) == GIMG_OK);
    char why[128];
    CHECK(shell.meta && full.meta && !meta_blobs_differ(shell.meta, full.meta, why, sizeof why),
          "%s", shell.meta ? why : "no metadata");
    CHECK(shell.meta && shell.meta->x_dpi == full.meta->x_dpi &&
              shell.meta->y_dpi == full.meta->y_dpi,
          "resolution");
    gimg_image_free(&shell);
    gimg_image_free(&full);
    gimg_image_free(&im);
    free(buf);
}

/* ------------------------------------------------ headers on a bitstream */

/* Our encoder's file for im with its metadata equals the headers put by
 * gimg_jpeg_with_headers on our encoder's file of im without it: the
 * markers, their order and bytes are the encoder's own. */
static void check_headers_equal(gimg_image *im, const char *what)
{
    gimg_write_opts o;
    gimg_write_opts_init(&o);
    unsigned char *with = NULL, *bare = NULL, *spliced = NULL;
    size_t with_len = 0, bare_len = 0, spliced_len = 0;
    gimg_meta *m = im->meta;
    CHECK(gimg_encode(im, GIMG_FMT_JPEG, &o, &with, &with_len) == GIMG_OK, "%s: %s", what,
          gimg_last_error());
    im->meta = NULL;
    CHECK(gimg_encode(im, GIMG_FMT_JPEG, &o, &bare, &bare_len) == GIMG_OK, "%s", what);
    im->meta = m;
    /* Some other encoder's headers are replaced: a COM and an APP15 first. */
    bytes other = {0};
    put(&other, bare, 2);
    static const unsigned char com[] = {0xFF, 0xFE, 0x00, 0x06, 'n', 'v', 'j', 'p'};
    static const unsigned char app15[] = {0xFF, 0xEF, 0x00, 0x03, 0x00};
    put(&other, com, sizeof com);
    put(&other, app15, sizeof app15);
    put(&other, bare + 2, bare_len - 2);
    CHECK(gimg_jpeg_with_headers(other.p, other.len, m, &spliced, &spliced_len) == GIMG_OK,
          "%s: %s", what, gimg_last_error());
    CHECK(spliced_len == with_len && !memcmp(spliced, with, with_len),
          "%s: %zu bytes with the headers put on, %zu from the encoder", what, spliced_len,
          with_len);
    /* Written as the tools write it (the headers, then the bitstream as it
     * is): the same file. */
    char path[] = "/tmp/gimg-nvjpeg-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd >= 0) {
        close(fd);
        CHECK(gimg_write_jpeg_bits(path, other.p, other.len, m, &o) == GIMG_OK, "%s: %s", what,
              gimg_last_error());
        FILE *f = fopen(path, "rb");
        unsigned char *got = malloc(with_len + 1);
        size_t got_len = f && got ? fread(got, 1, with_len + 1, f) : 0;
        CHECK(got_len == with_len && !memcmp(got, with, with_len),
              "%s: the file written is %zu bytes, the encoder's %zu", what, got_len, with_len);
        if (f)
            fclose(f);
        free(got);
        unlink(path);
    }
    free(with);
    free(bare);
    free(spliced);
    free(other.p);
}

static void test_with_headers(void)
{
    static const struct {
        int w, h;
        size_t icc, exif, xmp;
        double dpi;
        const char *what;
    } cases[] = {
        {40, 30, 0, 0, 0, 0, "no metadata"},
        {40, 30, 0, 0, 0, 300, "resolution only"},
        {40, 30, 3000, 200, 500, 72, "small, libjpeg's path"},
        {300, 200, 150000, 60000, 20000, 96.4, "striped path, ICC in 3 chunks"},
        {120, 100, 0, 70000, 70000, 0, "EXIF and XMP too large for a marker"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gimg_image im;
        CHECK(gimg_image_alloc(&im, cases[i].w, cases[i].h, 3, GIMG_U8) == GIMG_OK);
        testimg_fill_random(&im, i + 1);
        if (cases[i].icc || cases[i].exif || cases[i].xmp || cases[i].dpi)
            set_meta(&im, cases[i].icc, cases[i].exif, 1, cases[i].xmp, cases[i].dpi,
                     cases[i].dpi);
        check_headers_equal(&im, cases[i].what);
        gimg_image_free(&im);
    }
    /* Not a JPEG, or cut inside its headers: refused. */
    unsigned char *out = NULL;
    size_t out_len = 0;
    static const unsigned char png[] = {0x89, 'P', 'N', 'G', 13, 10, 26, 10};
    CHECK(gimg_jpeg_with_headers(png, sizeof png, NULL, &out, &out_len) == GIMG_E_FORMAT && !out);
    static const unsigned char cut[] = {0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x40, 'J', 'F'};
    CHECK(gimg_jpeg_with_headers(cut, sizeof cut, NULL, &out, &out_len) == GIMG_E_FORMAT && !out);
}

/* ---------------------------------------------- against nvJPEG's header */

#ifdef HAVE_NVJPEG_HEADER
#define SAME(ours, theirs) _Static_assert((int)(ours) == (int)(theirs), #ours " != " #theirs)
SAME(GIMG_NVJPEG_SUCCESS, NVJPEG_STATUS_SUCCESS);
SAME(GIMG_NVJPEG_NOT_INITIALIZED, NVJPEG_STATUS_NOT_INITIALIZED);
SAME(GIMG_NVJPEG_INVALID_PARAMETER, NVJPEG_STATUS_INVALID_PARAMETER);
SAME(GIMG_NVJPEG_BAD_JPEG, NVJPEG_STATUS_BAD_JPEG);
SAME(GIMG_NVJPEG_JPEG_NOT_SUPPORTED, NVJPEG_STATUS_JPEG_NOT_SUPPORTED);
SAME(GIMG_NVJPEG_ALLOCATOR_FAILURE, NVJPEG_STATUS_ALLOCATOR_FAILURE);
SAME(GIMG_NVJPEG_EXECUTION_FAILED, NVJPEG_STATUS_EXECUTION_FAILED);
SAME(GIMG_NVJPEG_ARCH_MISMATCH, NVJPEG_STATUS_ARCH_MISMATCH);
SAME(GIMG_NVJPEG_INTERNAL_ERROR, NVJPEG_STATUS_INTERNAL_ERROR);
SAME(GIMG_NVJPEG_IMPLEMENTATION_NOT_SUPPORTED, NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED);
SAME(GIMG_NVJPEG_INCOMPLETE_BITSTREAM, NVJPEG_STATUS_INCOMPLETE_BITSTREAM);
SAME(GIMG_NVJPEG_FLAGS_BITSTREAM_STRICT, NVJPEG_FLAGS_BITSTREAM_STRICT);
SAME(GIMG_NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION, NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION);
SAME(GIMG_NVJPEG_BACKEND_DEFAULT, NVJPEG_BACKEND_DEFAULT);
SAME(GIMG_NVJPEG_BACKEND_HARDWARE, NVJPEG_BACKEND_HARDWARE);
SAME(GIMG_NVJPEG_CSS_444, NVJPEG_CSS_444);
SAME(GIMG_NVJPEG_CSS_422, NVJPEG_CSS_422);
SAME(GIMG_NVJPEG_CSS_420, NVJPEG_CSS_420);
SAME(GIMG_NVJPEG_CSS_440, NVJPEG_CSS_440);
SAME(GIMG_NVJPEG_CSS_GRAY, NVJPEG_CSS_GRAY);
SAME(GIMG_NVJPEG_OUTPUT_Y, NVJPEG_OUTPUT_Y);
SAME(GIMG_NVJPEG_OUTPUT_RGBI, NVJPEG_OUTPUT_RGBI);
SAME(GIMG_NVJPEG_INPUT_RGBI, NVJPEG_INPUT_RGBI);
SAME(GIMG_NVJPEG_MAJOR_VERSION, MAJOR_VERSION);
SAME(GIMG_NVJPEG_MINOR_VERSION, MINOR_VERSION);
SAME(GIMG_NVJPEG_PATCH_LEVEL, PATCH_LEVEL);
_Static_assert(sizeof(gimg_nvjpeg_image) == sizeof(nvjpegImage_t), "nvjpegImage_t's size");
_Static_assert(offsetof(gimg_nvjpeg_image, pitch) == offsetof(nvjpegImage_t, pitch),
               "nvjpegImage_t's layout");
_Static_assert(sizeof(gimg_nvjpeg_dev_allocator) == sizeof(nvjpegDevAllocator_t) &&
                   offsetof(gimg_nvjpeg_dev_allocator, dev_free) ==
                       offsetof(nvjpegDevAllocator_t, dev_free) &&
                   __builtin_types_compatible_p(__typeof__(((gimg_nvjpeg_dev_allocator *)0)->dev_malloc),
                                                tDevMalloc) &&
                   __builtin_types_compatible_p(__typeof__(((gimg_nvjpeg_dev_allocator *)0)->dev_free),
                                                tDevFree),
               "nvjpegDevAllocator_t");
#define FIELD_AS(ours, theirs, field)                                                      \
    (offsetof(ours, field) == offsetof(theirs, field) &&                                  \
     __builtin_types_compatible_p(__typeof__(((ours *)0)->field), __typeof__(((theirs *)0)->field)))
_Static_assert(sizeof(gimg_nvjpeg_dev_allocator_v2) == sizeof(nvjpegDevAllocatorV2_t) &&
                   FIELD_AS(gimg_nvjpeg_dev_allocator_v2, nvjpegDevAllocatorV2_t, dev_malloc) &&
                   FIELD_AS(gimg_nvjpeg_dev_allocator_v2, nvjpegDevAllocatorV2_t, dev_free) &&
                   FIELD_AS(gimg_nvjpeg_dev_allocator_v2, nvjpegDevAllocatorV2_t, dev_ctx),
               "nvjpegDevAllocatorV2_t");
_Static_assert(sizeof(gimg_nvjpeg_pinned_allocator_v2) == sizeof(nvjpegPinnedAllocatorV2_t) &&
                   FIELD_AS(gimg_nvjpeg_pinned_allocator_v2, nvjpegPinnedAllocatorV2_t,
                            pinned_malloc) &&
                   FIELD_AS(gimg_nvjpeg_pinned_allocator_v2, nvjpegPinnedAllocatorV2_t,
                            pinned_free) &&
                   FIELD_AS(gimg_nvjpeg_pinned_allocator_v2, nvjpegPinnedAllocatorV2_t,
                            pinned_ctx),
               "nvjpegPinnedAllocatorV2_t");
#undef FIELD_AS
_Static_assert(sizeof(int) == sizeof(nvjpegStatus_t) && sizeof(int) == sizeof(nvjpegBackend_t) &&
                   sizeof(int) == sizeof(nvjpegChromaSubsampling_t),
               "enums passed as int");
_Static_assert(__builtin_types_compatible_p(gimg_nvjpeg_handle, nvjpegHandle_t) &&
                   __builtin_types_compatible_p(gimg_nvjpeg_state, nvjpegJpegState_t) &&
                   __builtin_types_compatible_p(gimg_nvjpeg_enc_state, nvjpegEncoderState_t) &&
                   __builtin_types_compatible_p(gimg_nvjpeg_enc_params, nvjpegEncoderParams_t) &&
                   __builtin_types_compatible_p(gimg_nvjpeg_stream, cudaStream_t),
               "handle types");
#undef SAME
#endif

static void test_abi_against_header(void)
{
#ifdef HAVE_NVJPEG_HEADER
    /* The checks above compiled: the declarations agree with this header. */
    CHECK(NVJPEG_VER_MAJOR >= 11, "nvjpeg.h %d", NVJPEG_VER_MAJOR);
#else
    SKIP("nvjpeg.h not found (the CUDA Toolkit's, or NVJPEG_CFLAGS=-I<the wheel's include>)");
#endif
}

/* The smallest batch (megapixels, in steps of 1) for which --device auto
 * takes the GPU's codecs on `threads` threads; 0 if none up to 100000. */
static int auto_threshold(int threads)
{
    for (int mp = 1; mp <= 100000; mp++)
        if (gimg_auto_gpu_codecs(mp, threads))
            return mp;
    return 0;
}

static void test_auto_choice(void)
{
    /* Nothing to decode, or one photo: the start-up never pays. */
    CHECK(!gimg_auto_gpu_codecs(0, 16));
    CHECK(!gimg_auto_gpu_codecs(1, 16));
    CHECK(!gimg_auto_gpu_codecs(24, 1));
    /* A batch past the threshold stays on the GPU however much larger (64
     * threads may match the GPU: no threshold then, below). */
    for (int t = 1; t <= 16; t *= 2) {
        const int at = auto_threshold(t);
        CHECK(at > 1, "%d threads: from %d MP", t, at);
        for (int mp = at; at > 0 && mp <= 100000; mp += 997)
            CHECK(gimg_auto_gpu_codecs(mp, t), "%d threads, %d MP", t, mp);
        CHECK(!gimg_auto_gpu_codecs(at - 1, t));
    }
    /* More CPU threads make the CPU's codecs worth it for larger batches. */
    CHECK(auto_threshold(2) < auto_threshold(16), "%d %d", auto_threshold(2),
          auto_threshold(16));
    CHECK(auto_threshold(16) < auto_threshold(64) || auto_threshold(64) == 0);
}

int main(void)
{
    setenv("GIMG_NVJPEG_LIBRARY", "/nonexistent/libnvjpeg.so.13", 1);
    /* auto's choice from the built-in cost table (lib/cost.h). */
    setenv("GIMG_COST_CACHE", "off", 1);
    unsetenv("GIMG_COST_TABLE");
    RUN(test_loader_without_library);
    RUN(test_gpu_takes);
    RUN(test_cut_and_odd_scans);
    RUN(test_header_metadata);
    RUN(test_with_headers);
    RUN(test_abi_against_header);
    RUN(test_auto_choice);
    return check_summary();
}
