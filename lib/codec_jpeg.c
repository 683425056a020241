/*
 * codec_jpeg.c — JPEG, read and written with libjpeg-turbo through its
 * libjpeg API (libjpeg62-turbo), the library libvips and ImageMagick use.
 * The libjpeg API rather than TurboJPEG 2.1's: it gives the progress
 * monitor that bounds the scan count, the Adobe marker, and control of the
 * encoder's scans and Huffman tables.
 *
 * Reading: baseline, extended and progressive JPEG, Huffman or arithmetic
 * coded, with 8-bit samples.
 *  - Gray (1 component) gives 1 channel; YCbCr and RGB give RGB, converted
 *    by libjpeg. Decoding is libjpeg-turbo's default, as djpeg's, libvips'
 *    and ImageMagick's: accurate integer IDCT (JDCT_ISLOW) and smooth
 *    ("fancy") chroma upsampling, so the samples equal djpeg's exactly.
 *  - CMYK and YCCK (libjpeg turns YCCK into CMYK) give RGB by the naive
 *    formula ImageMagick's `-colorspace sRGB` uses, no ICC profile:
 *        R = 255 (1 - c)(1 - k), G = 255 (1 - m)(1 - k), B = 255 (1 - y)(1 - k)
 *    with the inks c, m, y, k in 0..1, rounded to the nearest integer.
 *    A file with an Adobe APP14 marker stores inverted samples (255 = no
 *    ink: Photoshop's convention; libjpeg writes the marker with CMYK by
 *    default), so there R = round(C K / 255) of the stored C and K. A
 *    CMYK file without the marker is read as plain ink (0 = no ink), as
 *    libvips reads it (ImageMagick inverts every CMYK JPEG).
 *  - Refused: 12-bit, lossless and hierarchical JPEG (the library reads
 *    8-bit lossy only: "unsupported JPEG: ..."); 2 or more than 4
 *    components; an image over --max-pixels, judged from the frame header
 *    before libjpeg reads on, then again from libjpeg's header, before
 *    jpeg_start_decompress (which allocates the coefficients of a
 *    multi-scan file: 2 bytes a sample of every component, on top of the
 *    image itself); a file of too many scans (below).
 *  - The scan limit. A progressive file can repeat scans without end: each
 *    costs the decoder a pass over every block of the components it codes,
 *    though it may hold 10 bytes. libjpeg's progress monitor sees each scan
 *    start, and the file is refused, before that scan's data is read, once
 *    its scans have coded more than JPEG_MAX_COMPONENT_SCANS = 48
 *    components in all (a scan of 3 components counts 3: the cost of a
 *    scan is that of its components; djpeg's -maxscans counts scans).
 *    Encoders write far fewer: libjpeg's and jpegtran's progression of a
 *    colour file counts 12 (10 scans), of gray 6, of CMYK 24; a script of
 *    a few dozen single-component scans decodes. Measured at 8192x8192
 *    (tests/unit_codec_jpeg.c and cli_codec_jpeg.sh make these files), a
 *    component's scan costs 5.7 ms of CPU with Huffman coding, 7.6 ms with
 *    arithmetic coding (whose empty scans are legal: no warning stops
 *    them); the files of 10,000 scans are refused after 0.35-0.45 s of CPU
 *    for gray and 0.5-0.65 s for colour (0.2 s of it the system's, for the
 *    3 x 128 MB of coefficients), with 48; with 64 the colour ones took up
 *    to 1.1 s on this busy 2-core machine. Empty Huffman scans stop at the
 *    first, by the warning rule.
 *  - Warnings. libjpeg warns and goes on where data is missing or
 *    undecodable, filling the rest with gray. Such a warning is an error
 *    here: premature end of the file (JWRN_JPEG_EOF, which a file cut
 *    anywhere, its last byte included, gives) or of a scan's data
 *    (JWRN_HIT_MARKER), bad Huffman or arithmetic codes, lost restart
 *    markers (JWRN_MUST_RESYNC): the image would hold pixels the file does
 *    not (libvips refuses these with fail-on=error, djpeg with -strict,
 *    and the issue asks truncated files refused). The warnings after which every pixel still comes from the file's
 *    data are ignored, as libvips and ImageMagick decode such files: bytes
 *    between segments (JWRN_EXTRANEOUS_DATA, common in camera files), an
 *    unknown JFIF version or Adobe transform code (read as YCbCr/YCCK), a
 *    bad ICC marker (profiles are not read), odd SOS parameters of a
 *    sequential scan, an out-of-order progressive refinement. Any other
 *    warning is an error. Nothing is printed: libjpeg's messages become the
 *    error's text ("corrupt JPEG: bad Huffman code") or are dropped.
 *  - Every output byte is written by libjpeg's output pass or the CMYK
 *    conversion; libjpeg's coefficient buffers start zeroed, and its strip
 *    buffers are zeroed here (alloc_zeroed_rows says why).
 *  - Not applied: the Exif orientation and ICC profiles (as `vips copy`
 *    and `convert` without -auto-orient).
 *
 * Writing: 8-bit gray as a 1-component JPEG, RGB as YCbCr (alpha is
 * dropped and deeper samples narrowed by write.c, which reports it).
 * Quality o->quality (1-100, libjpeg's scaling of the standard tables,
 * kept baseline-compatible); chroma subsampling o->jpeg_subsampling: AUTO
 * is 4:4:4 at quality 90 and above and 4:2:0 below, as libvips and
 * ImageMagick choose; o->jpeg_progressive gives libjpeg's standard
 * progression (jpeg_simple_progression). Huffman tables are always
 * optimised for the image (smaller files, the same pixels) and the DCT is
 * the accurate integer one. Rows are handed to libjpeg in place, whatever
 * the stride. The output goes to a buffer of our own that grows with
 * realloc(), rather than jpeg_mem_dest's, which copies at each doubling
 * and cannot be freed after an error (its last buffer is private).
 *
 * Threads: everything is per call: an error manager with its own jmp_buf,
 * its own message and progress monitor; libjpeg keeps no global state.
 */
#include "codec.h"

#include <setjmp.h>
#include <stdio.h>   /* jpeglib.h needs FILE and size_t */
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

/* The most scans a file may have, a scan counting once for each component
 * it codes (see the head comment). */
#define JPEG_MAX_COMPONENT_SCANS 48

/* Rows handed to libjpeg per call: one iMCU row is at most 32 (4 x 8). */
#define JPEG_ROWS_PER_CALL 32

/* ------------------------------------------------------------ errors */

/* libjpeg's error manager, extended: where to jump and what to report. */
typedef struct {
    struct jpeg_error_mgr pub;  /* first: libjpeg sees only this part */
    jmp_buf jump;
    int decoding;               /* 1 when reading, for the messages */
    gimg_status status;
    char why[JMSG_LENGTH_MAX + 64];
} jpeg_guard;

/* libjpeg's text for its current message, with "Corrupt JPEG data: "
 * (which our prefix says) removed and a first capital lowered where the
 * next letter is lower case ("Bogus marker length", not "JPEG ..."). */
static void library_text(j_common_ptr cinfo, char *out, size_t size)
{
    char msg[JMSG_LENGTH_MAX];
    static const char corrupt[] = "Corrupt JPEG data: ";
    cinfo->err->format_message(cinfo, msg);
    const char *text = strncmp(msg, corrupt, sizeof corrupt - 1) == 0 ? msg + sizeof corrupt - 1
                                                                         : msg;
    snprintf(out, size, "%s", text);
    if (out[0] >= 'A' && out[0] <= 'Z' && out[1] >= 'a' && out[1] <= 'z')
        out[0] = (char)(out[0] - 'A' + 'a');
}

static void jump_out(j_common_ptr cinfo, gimg_status status, const char *prefix)
{
    jpeg_guard *g = (jpeg_guard *)cinfo->err;
    char text[JMSG_LENGTH_MAX];
    library_text(cinfo, text, sizeof text);
    g->status = status;
    snprintf(g->why, sizeof g->why, "%s%s", prefix, text);
    longjmp(g->jump, 1);
}

/* libjpeg's fatal errors, sorted into the library's statuses. */
static void on_error(j_common_ptr cinfo)
{
    jpeg_guard *g = (jpeg_guard *)cinfo->err;
    switch (cinfo->err->msg_code) {
    case JERR_OUT_OF_MEMORY:
    case JERR_VIRTUAL_BUG:
        g->status = GIMG_E_NOMEM;
        snprintf(g->why, sizeof g->why, "out of memory %s JPEG",
                 g->decoding ? "decoding" : "encoding");
        longjmp(g->jump, 1);
    case JERR_IMAGE_TOO_BIG:
    case JERR_WIDTH_OVERFLOW:
        jump_out(cinfo, GIMG_E_LIMIT, "JPEG: ");
        break;
    case JERR_BAD_PRECISION:
        g->status = GIMG_E_FORMAT;
        snprintf(g->why, sizeof g->why,
                 "unsupported JPEG: %d-bit samples (only 8-bit JPEG is read)",
                 cinfo->err->msg_parm.i[0]);
        longjmp(g->jump, 1);
    case JERR_SOF_UNSUPPORTED:
        g->status = GIMG_E_FORMAT;
        snprintf(g->why, sizeof g->why, "unsupported JPEG: SOF type 0x%02x (lossless or "
                 "hierarchical JPEG is not read)", cinfo->err->msg_parm.i[0]);
        longjmp(g->jump, 1);
    case JERR_NOT_COMPILED:
    case JERR_NOTIMPL:
    case JERR_CONVERSION_NOTIMPL:
        jump_out(cinfo, GIMG_E_FORMAT, "unsupported JPEG: ");
        break;
    default:
        jump_out(cinfo, GIMG_E_FORMAT, g->decoding ? "corrupt JPEG: " : "JPEG encoder: ");
    }
}

/* Warnings after which every pixel still comes from the file's data (the
 * head comment's rule); any other warning is an error. */
static int warning_is_harmless(int code)
{
    switch (code) {
    case JWRN_EXTRANEOUS_DATA:
    case JWRN_JFIF_MAJOR:
    case JWRN_ADOBE_XFORM:
    case JWRN_BOGUS_ICC:
    case JWRN_NOT_SEQUENTIAL:
    case JWRN_BOGUS_PROGRESSION:
        return 1;
    default:
        return 0;
    }
}

/* Level -1 is a warning; 0 and above are trace messages, never shown. */
static void on_message(j_common_ptr cinfo, int level)
{
    if (level >= 0)
        return;
    if (warning_is_harmless(cinfo->err->msg_code)) {
        cinfo->err->num_warnings++;
        return;
    }
    const jpeg_guard *g = (const jpeg_guard *)cinfo->err;
    jump_out(cinfo, GIMG_E_FORMAT, !g->decoding ? "JPEG encoder: "
                                   : cinfo->err->msg_code == JWRN_JPEG_EOF ? "truncated JPEG: "
                                                                           : "corrupt JPEG: ");
}

static void print_nothing(j_common_ptr cinfo) {}

static void guard_init(jpeg_guard *g, int decoding)
{
    jpeg_std_error(&g->pub);
    g->pub.error_exit = on_error;
    g->pub.emit_message = on_message;
    g->pub.output_message = print_nothing;
    g->decoding = decoding;
    g->status = GIMG_OK;
    g->why[0] = '\0';
}

/* ----------------------------------------------------------- reading */

static int sniff(const unsigned char *buf, size_t len)
{
    return len >= 3 && buf[0] == 0xFF && buf[1] == 0xD8 && buf[2] == 0xFF;
}

/* The first frame header (SOFn) before the first scan, found by walking
 * the segments as libjpeg does (bytes between segments and fill bytes
 * skipped), so that the image's size is judged before libjpeg reads
 * anything else: a file of a huge SOF and no scan is refused for its size.
 * 0 when there is none before SOS or EOI; libjpeg then says what is wrong. */
static int find_frame(const unsigned char *buf, size_t len, unsigned *width, unsigned *height,
                      int *components)
{
    size_t at = 2;  /* after SOI */
    for (;;) {
        while (at < len && buf[at] != 0xFF)
            at++;
        while (at < len && buf[at] == 0xFF)
            at++;
        if (at >= len)
            return 0;
        const unsigned marker = buf[at++];
        if (marker == 0x00 || marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7))
            continue;  /* a stuffed byte, TEM, RSTn: no length */
        if (marker == 0xD8 || marker == 0xD9 || marker == 0xDA || len - at < 2)
            return 0;  /* SOI again, EOI, SOS, or the end */
        const size_t seg = (size_t)buf[at] << 8 | buf[at + 1];
        const int is_sof = marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 &&
                           marker != 0xC8 && marker != 0xCC;
        if (is_sof) {
            if (seg < 8 || len - at < 8)
                return 0;
            *height = (unsigned)buf[at + 3] << 8 | buf[at + 4];
            *width = (unsigned)buf[at + 5] << 8 | buf[at + 6];
            *components = buf[at + 7];
            return 1;
        }
        if (seg < 2)
            return 0;
        at += seg;
    }
}

/* Channels of the output for a frame of n components (0 if not read). */
static int channels_of(int components)
{
    return components == 1 ? 1 : components == 3 || components == 4 ? 3 : 0;
}

/* The size limits, from the frame header alone. */
static gimg_status check_frame(const unsigned char *buf, size_t len)
{
    unsigned w, h;
    int n;
    if (!find_frame(buf, len, &w, &h, &n))
        return GIMG_OK;
    const int channels = channels_of(n);
    return gimg_check_size(w, h, channels ? channels : 1, GIMG_U8, NULL, NULL);
}

typedef struct {
    struct jpeg_decompress_struct cinfo;
    jpeg_guard guard;
    struct jpeg_progress_mgr progress;
    int created;          /* jpeg_create_decompress has run */
    int channels;         /* of the output: 1 or 3 */
    int cmyk, inverted;   /* CMYK converted here; stored inverted (Adobe) */
    unsigned char *cmyk_rows;
    int scans_seen, component_scans;  /* for the scan limit */
    /* libjpeg's own row allocator, which alloc_zeroed_rows wraps */
    JSAMPARRAY (*alloc_sarray)(j_common_ptr, int, JDIMENSION, JDIMENSION);
} jpeg_reader;

/* libjpeg's strip buffers (the decoded, upsampled and colour-converted
 * rows it works in) with every byte zeroed, padding included. Its SIMD
 * code (libjpeg-turbo's AVX2 h1v2 upsampling, for one: 4:4:0 files of
 * odd widths) computes whole vectors past a row's last sample from the
 * allocation's uninitialised padding; the samples it returns do not
 * depend on them, but memcheck cannot tell, and flags our output. Rows are
 * asked 64-byte rounded (libjpeg pads to 2 x its 32-byte alignment, so
 * its padding is then ours) and zeroed: a few rows of the image's width,
 * once per decode. */
static JSAMPARRAY alloc_zeroed_rows(j_common_ptr cinfo, int pool, JDIMENSION samples,
                                    JDIMENSION rows)
{
    jpeg_reader *r = ((j_decompress_ptr)cinfo)->client_data;
    const JDIMENSION padded = samples <= 0xFFFFFF00u ? (samples + 63) & ~(JDIMENSION)63 : samples;
    JSAMPARRAY array = r->alloc_sarray(cinfo, pool, padded, rows);
    for (JDIMENSION i = 0; i < rows; i++)
        memset(array[i], 0, padded);
    return array;
}

/* The progress monitor: called before each step of input while the scans
 * of a multi-scan file are read (and before each batch of output rows).
 * A new scan is counted once for each component it codes, and the scan
 * that goes past the limit is refused before its data is read. */
static void count_scans(j_common_ptr cinfo)
{
    j_decompress_ptr d = (j_decompress_ptr)cinfo;
    jpeg_reader *r = d->client_data;
    if (d->input_scan_number == r->scans_seen)
        return;
    r->scans_seen = d->input_scan_number;
    r->component_scans += d->comps_in_scan;
    if (r->component_scans > JPEG_MAX_COMPONENT_SCANS) {
        jpeg_guard *g = (jpeg_guard *)cinfo->err;
        g->status = GIMG_E_LIMIT;
        snprintf(g->why, sizeof g->why,
                 "JPEG has too many scans (over the limit of %d, a scan counting once for "
                 "each component it holds)", JPEG_MAX_COMPONENT_SCANS);
        longjmp(g->jump, 1);
    }
}

/* Reads the header up to the first scan, decides the output's layout and
 * checks the size limits (the frame header's before libjpeg reads, then
 * libjpeg's own facts), all before libjpeg allocates anything that grows
 * with the image. Runs under the caller's setjmp; returns a status for
 * what the file may hold but we do not read. */
static gimg_status read_header(jpeg_reader *r, const unsigned char *buf, size_t len)
{
    gimg_status st = check_frame(buf, len);
    if (st)
        return st;
    j_decompress_ptr c = &r->cinfo;
    c->err = &r->guard.pub;
    jpeg_create_decompress(c);
    r->created = 1;
    c->client_data = r;
    r->alloc_sarray = c->mem->alloc_sarray;
    c->mem->alloc_sarray = alloc_zeroed_rows;
    if ((unsigned long)len != len)
        return gimg_fail(GIMG_E_LIMIT, "JPEG file of %zu bytes is too large", len);
    jpeg_mem_src(c, buf, (unsigned long)len);
    jpeg_read_header(c, TRUE);
    switch (c->jpeg_color_space) {
    case JCS_GRAYSCALE:
        c->out_color_space = JCS_GRAYSCALE;
        break;
    case JCS_YCbCr:
    case JCS_RGB:
        c->out_color_space = JCS_RGB;
        break;
    case JCS_CMYK:
    case JCS_YCCK:
        c->out_color_space = JCS_CMYK;
        r->cmyk = 1;
        r->inverted = c->saw_Adobe_marker;
        break;
    default:
        return gimg_fail(GIMG_E_FORMAT, "unsupported JPEG: %d components in no known colour space",
                         c->num_components);
    }
    r->channels = channels_of(c->num_components);
    if (!r->channels)  /* libjpeg gives 1, 3 or 4 components the spaces above */
        return gimg_fail(GIMG_E_FORMAT, "unsupported JPEG: %d components", c->num_components);
    return gimg_check_size(c->image_width, c->image_height, r->channels, GIMG_U8, NULL, NULL);
}

static gimg_status probe_run(jpeg_reader *r, const unsigned char *buf, size_t len, gimg_info *info)
{
    if (setjmp(r->guard.jump))
        return gimg_fail(r->guard.status, "%s", r->guard.why);
    gimg_status st = read_header(r, buf, len);
    if (st)
        return st;
    info->width = (int)r->cinfo.image_width;
    info->height = (int)r->cinfo.image_height;
    info->channels = r->channels;
    info->sample = GIMG_U8;
    info->pages = 1;
    return GIMG_OK;
}

static gimg_status probe(const unsigned char *buf, size_t len, const gimg_read_opts *o,
                         gimg_info *info)
{
    jpeg_reader r;
    memset(&r, 0, sizeof r);
    guard_init(&r.guard, 1);
    gimg_status st = probe_run(&r, buf, len, info);
    if (r.created)
        jpeg_destroy_decompress(&r.cinfo);
    return st;
}

/* One row of CMYK (stored samples) to RGB, by the head comment's formula:
 * with inverted samples x = 255 - ink, 255 (1 - c)(1 - k) = x_c x_k / 255.
 * The product is never an odd multiple of 127.5, so adding 127 before the
 * division rounds to nearest exactly. */
static void cmyk_to_rgb(const unsigned char *in, unsigned char *out, size_t width, int inverted)
{
    const unsigned flip = inverted ? 0 : 255;
    for (size_t x = 0; x < width; x++, in += 4, out += 3) {
        unsigned k = in[3] ^ flip;
        out[0] = (unsigned char)(((in[0] ^ flip) * k + 127) / 255);
        out[1] = (unsigned char)(((in[1] ^ flip) * k + 127) / 255);
        out[2] = (unsigned char)(((in[2] ^ flip) * k + 127) / 255);
    }
}

/* Decodes into r's image: libjpeg writes the image's own rows, several
 * per call; CMYK goes through a strip of JPEG_ROWS_PER_CALL rows. */
static gimg_status decode_run(jpeg_reader *r, const unsigned char *buf, size_t len,
                              gimg_image *im)
{
    if (setjmp(r->guard.jump))
        return gimg_fail(r->guard.status, "%s", r->guard.why);
    gimg_status st = read_header(r, buf, len);
    if (st)
        return st;
    j_decompress_ptr c = &r->cinfo;
    c->dct_method = JDCT_ISLOW;
    c->do_fancy_upsampling = TRUE;
    c->do_block_smoothing = TRUE;
    r->progress.progress_monitor = count_scans;
    c->progress = &r->progress;
    jpeg_start_decompress(c);
    const int width = (int)c->output_width, height = (int)c->output_height;
    if (width != (int)c->image_width || height != (int)c->image_height ||
        c->output_components != (r->cmyk ? 4 : r->channels))
        return gimg_fail(GIMG_E_FORMAT, "JPEG decoder gave an unexpected layout");
    if ((st = gimg_image_alloc(im, width, height, r->channels, GIMG_U8)))
        return st;
    JSAMPROW rows[JPEG_ROWS_PER_CALL];
    if (r->cmyk) {
        const size_t row_bytes = (size_t)width * 4;
        if (!(r->cmyk_rows = malloc(row_bytes * JPEG_ROWS_PER_CALL)))
            return gimg_fail(GIMG_E_NOMEM, "out of memory decoding JPEG");
        for (int i = 0; i < JPEG_ROWS_PER_CALL; i++)
            rows[i] = r->cmyk_rows + (size_t)i * row_bytes;
    }
    while (c->output_scanline < c->output_height) {
        const int y = (int)c->output_scanline;
        const int want = height - y < JPEG_ROWS_PER_CALL ? height - y : JPEG_ROWS_PER_CALL;
        if (!r->cmyk)
            for (int i = 0; i < want; i++)
                rows[i] = gimg_row(im, y + i);
        const int got = (int)jpeg_read_scanlines(c, rows, (JDIMENSION)want);
        if (got <= 0)  /* a memory source never suspends */
            return gimg_fail(GIMG_E_FORMAT, "corrupt JPEG: the decoder stopped at row %d", y);
        if (r->cmyk)
            for (int i = 0; i < got; i++)
                cmyk_to_rgb(rows[i], gimg_row(im, y + i), (size_t)width, r->inverted);
    }
    /* Reads on to the end of the image: a file cut after its last scan
     * is refused too. */
    jpeg_finish_decompress(c);
    return GIMG_OK;
}

static gimg_status decode(const unsigned char *buf, size_t len, const gimg_read_opts *o,
                          gimg_image *out)
{
    jpeg_reader r;
    gimg_image im;
    memset(&r, 0, sizeof r);
    memset(&im, 0, sizeof im);
    memset(out, 0, sizeof *out);
    guard_init(&r.guard, 1);
    gimg_status st = decode_run(&r, buf, len, &im);
    if (r.created)
        jpeg_destroy_decompress(&r.cinfo);
    free(r.cmyk_rows);
    if (st)
        gimg_image_free(&im);
    else
        *out = im;
    return st;
}

/* ----------------------------------------------------------- writing */

static void layout(int *channels, gimg_sample *sample)
{
    *channels = *channels >= 3 ? 3 : 1;
    *sample = GIMG_U8;
}

/* libjpeg's output: a malloc'd buffer that doubles with realloc() (which
 * moves large blocks by remapping, without copying). */
typedef struct {
    struct jpeg_destination_mgr pub;  /* first: libjpeg sees only this part */
    unsigned char *data;
    size_t cap;
} jpeg_sink;

static void sink_start(j_compress_ptr cinfo) {}

static boolean sink_grow(j_compress_ptr cinfo)
{
    jpeg_sink *s = (jpeg_sink *)cinfo->dest;
    size_t used = s->cap;  /* libjpeg asks only when the buffer is full */
    unsigned char *p = s->cap <= SIZE_MAX / 2 ? realloc(s->data, s->cap * 2) : NULL;
    if (!p)
        ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 0);
    s->data = p;
    s->cap *= 2;
    s->pub.next_output_byte = p + used;
    s->pub.free_in_buffer = s->cap - used;
    return TRUE;
}

static void sink_end(j_compress_ptr cinfo) {}

typedef struct {
    struct jpeg_compress_struct cinfo;
    jpeg_guard guard;
    jpeg_sink sink;
    int created;
} jpeg_writer;

/* The chroma sampling factors (horizontal, vertical) of the first
 * component for the options; the others stay 1x1. */
static void luma_factors(const gimg_write_opts *o, int *h, int *v)
{
    gimg_subsampling s = o->jpeg_subsampling;
    if (s == GIMG_SUBSAMPLE_AUTO)
        s = o->quality >= 90 ? GIMG_SUBSAMPLE_444 : GIMG_SUBSAMPLE_420;
    *h = s == GIMG_SUBSAMPLE_444 ? 1 : 2;
    *v = s == GIMG_SUBSAMPLE_420 ? 2 : 1;
}

static gimg_status encode_run(jpeg_writer *w, const gimg_image *im, const gimg_write_opts *o)
{
    if (setjmp(w->guard.jump))
        return gimg_fail(w->guard.status, "%s", w->guard.why);
    if (im->sample != GIMG_U8 || (im->channels != 1 && im->channels != 3))
        return gimg_fail(GIMG_E_FORMAT,
                         "JPEG stores 8-bit gray or RGB, not %d channels of %d bytes",
                         im->channels, (int)im->sample);
    if (im->width > JPEG_MAX_DIMENSION || im->height > JPEG_MAX_DIMENSION)
        return gimg_fail(GIMG_E_LIMIT, "image %dx%d is over JPEG's limit of %d pixels a side",
                         im->width, im->height, (int)JPEG_MAX_DIMENSION);
    j_compress_ptr c = &w->cinfo;
    c->err = &w->guard.pub;
    jpeg_create_compress(c);
    w->created = 1;

    /* A first guess at the size: a quarter of the pixels' bytes, which a
     * photo at quality 90 stays below; the buffer doubles if not. */
    size_t guess = (size_t)im->width * (size_t)im->height * (size_t)im->channels / 4 + 4096;
    if (!(w->sink.data = malloc(guess)))
        return gimg_fail(GIMG_E_NOMEM, "out of memory encoding JPEG");
    w->sink.cap = guess;
    w->sink.pub.next_output_byte = w->sink.data;
    w->sink.pub.free_in_buffer = guess;
    w->sink.pub.init_destination = sink_start;
    w->sink.pub.empty_output_buffer = sink_grow;
    w->sink.pub.term_destination = sink_end;
    c->dest = &w->sink.pub;

    c->image_width = (JDIMENSION)im->width;
    c->image_height = (JDIMENSION)im->height;
    c->input_components = im->channels;
    c->in_color_space = im->channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(c);
    jpeg_set_quality(c, o->quality, TRUE);
    if (im->channels == 3) {
        int h, v;
        luma_factors(o, &h, &v);
        c->comp_info[0].h_samp_factor = h;
        c->comp_info[0].v_samp_factor = v;
        for (int i = 1; i < 3; i++)
            c->comp_info[i].h_samp_factor = c->comp_info[i].v_samp_factor = 1;
    }
    if (o->jpeg_progressive)
        jpeg_simple_progression(c);
    c->optimize_coding = TRUE;
    c->dct_method = JDCT_ISLOW;
    jpeg_start_compress(c, TRUE);
    JSAMPROW rows[JPEG_ROWS_PER_CALL];
    while (c->next_scanline < c->image_height) {
        const int y = (int)c->next_scanline;
        const int n = im->height - y < JPEG_ROWS_PER_CALL ? im->height - y : JPEG_ROWS_PER_CALL;
        for (int i = 0; i < n; i++)
            rows[i] = gimg_row(im, y + i);  /* libjpeg only reads them */
        jpeg_write_scanlines(c, rows, (JDIMENSION)n);
    }
    jpeg_finish_compress(c);
    return GIMG_OK;
}

static gimg_status encode(const gimg_image *im, const gimg_write_opts *o, unsigned char **buf,
                          size_t *len)
{
    jpeg_writer w;
    memset(&w, 0, sizeof w);
    guard_init(&w.guard, 0);
    *buf = NULL;
    *len = 0;
    gimg_status st = encode_run(&w, im, o);
    size_t used = w.sink.cap - w.sink.pub.free_in_buffer;
    if (w.created)
        jpeg_destroy_compress(&w.cinfo);
    if (st) {
        free(w.sink.data);
        return st;
    }
    /* Give back what the first guess left unused. */
    unsigned char *fit = realloc(w.sink.data, used);
    *buf = fit ? fit : w.sink.data;
    *len = used;
    return GIMG_OK;
}

const gimg_codec gimg_codec_jpeg = {
    GIMG_FMT_JPEG, "JPEG", "jpg jpeg jpe", 0, sniff, probe, decode, layout, encode,
};
