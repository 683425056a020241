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
 *    though it may hold 10 bytes. A file whose scans code more than
 *    JPEG_MAX_COMPONENT_SCANS = 48 components in all (a scan of 3
 *    components counts 3: the cost of a scan is that of its components;
 *    djpeg's -maxscans counts scans) is refused. The scans are counted by
 *    walking the file's markers before jpeg_start_decompress, which
 *    allocates (and the system zeroes) the coefficients of a multi-scan
 *    file: 384 MB at 8192x8192 in colour, 0.4 s of CPU before the first
 *    scan. libjpeg's progress monitor counts again as it reads, and
 *    refuses the scan past the limit before its data is read. Encoders
 *    write far fewer: libjpeg's and jpegtran's progression of a colour
 *    file counts 12 (10 scans), of gray 6, of CMYK 24; a script of a few
 *    dozen single-component scans decodes. Measured at 8192x8192
 *    (tests/unit_codec_jpeg.c and cli_codec_jpeg.sh make these files), a
 *    component's scan costs 5.7 ms of CPU with Huffman coding, 7.6 ms with
 *    arithmetic coding (whose empty scans are legal: no warning stops
 *    them), so 48 of them cost at most 0.4 s after the allocation; the
 *    files of 10,000 scans are refused in well under a millisecond.
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
 *    bad ICC marker (libjpeg's own ICC reader, which is not called: see
 *    "Metadata"), odd SOS parameters of a
 *    sequential scan, an out-of-order progressive refinement. Any other
 *    warning is an error. Nothing is printed: libjpeg's messages become the
 *    error's text ("corrupt JPEG: bad Huffman code") or are dropped.
 *  - Every output byte is written by libjpeg's output pass or the CMYK
 *    conversion; libjpeg's coefficient buffers start zeroed, and its strip
 *    buffers are zeroed here (alloc_zeroed_rows says why).
 *  - Not applied: the Exif orientation and ICC profiles (as `vips copy`
 *    and `convert` without -auto-orient); they are kept (below).
 *
 * Metadata (gimg_meta), read from the markers before the first scan (as
 * libvips reads them) and written after the JFIF marker:
 *  - EXIF: the first APP1 marker that starts "Exif\0\0"; the block after
 *    those 6 bytes (gimg_meta_add_exif checks it and takes the
 *    orientation from it, or drops it with a warning).
 *  - XMP: the first APP1 marker that starts with the namespace
 *    "http://ns.adobe.com/xap/1.0/" and its NUL (29 bytes); the packet
 *    after it. Extended XMP (APP1 "http://ns.adobe.com/xmp/extension/",
 *    the part of a packet over 64 KiB) is not read, nor written.
 *  - ICC: the APP2 markers that start "ICC_PROFILE\0", then a chunk's
 *    number (1..count) and the count (ICC.1 annex B.4), joined in number
 *    order. A sequence that is not whole (a chunk missing or twice, numbered
 *    0 or past the count, counts that disagree, all chunks empty) is
 *    dropped with a warning saying which, the image decoded as ever. Our
 *    own joining rather than libjpeg's jpeg_read_icc_profile: that one
 *    refuses the same sequences, but says only "bad ICC marker", and the
 *    warning names the fault. The profile of a CMYK or YCCK file is dropped
 *    with a warning too: it describes inks, and the samples are read as RGB.
 *  - Resolution: the JFIF marker's density, unit 1 (dots per inch) or 2
 *    (dots per cm, times 2.54); unit 0 gives only the aspect ratio: no
 *    resolution. (A resolution only in EXIF stays inside the block.)
 *  - Bounds: libjpeg keeps the APP1 and APP2 markers whole (each at most
 *    65533 bytes, all of them within the file); a profile has at most 255
 *    chunks of 65519 bytes (under 16 MiB, meta.c's cap).
 *  - Writing: the JFIF density from x_dpi and y_dpi (dots per inch,
 *    rounded to 1..65535); then EXIF as APP1 "Exif\0\0" and the block,
 *    XMP as APP1 with its namespace, the ICC profile in APP2 chunks of at
 *    most 65519 bytes by libjpeg's jpeg_write_icc_profile (cjpeg -icc's),
 *    the order libvips and ImageMagick write. A block one marker cannot
 *    hold (EXIF over 65527 bytes, XMP over 65504, a profile over 255
 *    chunks) is left out (unfit_meta). Every path writes them once, in
 *    the file's headers: libjpeg's own, and the striped one's stripe 0.
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
 * the stride. The output goes to buffers of our own that grow with
 * realloc(), rather than jpeg_mem_dest's, which copies at each doubling
 * and cannot be freed after an error (its last buffer is private).
 *  - How the tables are optimised. libjpeg's own way (optimize_coding)
 *    keeps every quantised coefficient of the image (2 bytes a sample: 96
 *    MB for a 4096x4096 RGB photo at 4:4:4), counts their symbols in a
 *    pass of plain C, then codes them: 2.7x the CPU of coding with the
 *    standard tables (0.239 s against 0.087 s for the photo below). A
 *    sequential image of JPEG_TWO_PASS_MIN_PIXELS or more is instead
 *    compressed twice from its pixels. The first time,
 *    libjpeg's Huffman coder is replaced by count_mcu (through the entropy
 *    coder's interface in jpegint.h, which libjpeg's development headers
 *    install, unchanged since libjpeg 6), which counts each MCU's symbols
 *    as libjpeg makes its blocks (T.81 F.1.2; SSE2 finds the zeros);
 *    libjpeg's own jpeg_gen_optimal_table makes the tables of the counts
 *    (Annex K.2); the second compression codes with them. The file is the
 *    very one libjpeg's optimize_coding writes (cjpeg -optimize: the same
 *    counts, table builder and coder), for about 35% less CPU (the photo
 *    of tests/bench/photo.sh, 4096x4096 at quality 90: 0.158 s against
 *    0.239 s at 4:4:4, 0.105 s against 0.167 s at 4:2:0) and without the
 *    coefficient buffer. Smaller images, whose cost is mostly libjpeg's
 *    setup (paid twice here), and progressive files (whose scans' EOB
 *    runs and refinement bits libjpeg's progressive coder counts per
 *    scan) use optimize_coding.
 *  - Stripes on several threads. A sequential image of
 *    JPEG_STRIPE_MIN_PIXELS or more is written with restart markers: an
 *    interval of the fewest whole MCU rows that hold
 *    JPEG_RESTART_MIN_MCUS MCUs (one row from 4096 pixels wide at 4:4:4;
 *    the DRI interval stays under 8700 MCUs, within its 65535). Each
 *    interval's coded data is then independent of the others: the DC
 *    predictions restart at 0 (F.1.2.1.3), and the markers run
 *    RST0..RST7 in turn (B.2.1). The intervals are shared out in stripes,
 *    JPEG_STRIPES_PER_THREAD per OpenMP thread (omp_get_max_threads(),
 *    which the batch sets for each worker; 1 inside an active parallel
 *    region). Each stripe is compressed as a JPEG of its own, counted then
 *    coded as above, with the tables of all the stripes' counts. Its
 *    blocks are the whole image's: colour conversion and downsampling
 *    work within an MCU row (libjpeg does no smoothing by default), and
 *    the last stripe's bottom edge is padded as the image's. Its restart
 *    markers are renumbered from its first interval's place in the image
 *    (a pass over its 0xFF bytes). The file is stripe 0's headers with
 *    the image's height, each stripe's scan data with the marker that
 *    ends the interval before it, then EOI: byte for byte the file
 *    libjpeg writes for the whole image with that restart_in_rows and
 *    optimize_coding (cjpeg -optimize -restart N), whatever the number of
 *    threads: one thread codes the same intervals, and the bytes depend
 *    on the image and the options only. The restarts cost 0.04% of the
 *    photo at 4:4:4, 0.01% at 4:2:0 (one a row would cost 0.1-0.2% at
 *    1000 pixels wide, 2.4% at 61). On two free cores the photo's encode
 *    takes half its time on one (0.093 s against 0.182 s at 4:4:4, 0.073
 *    s against 0.124 s at 4:2:0, a 16-core host held to 2 CPUs; 0.02 s on
 *    all 16), for the same CPU time within 5%; on a machine whose other
 *    work leaves one core free, as this 2-core one often is, it gains
 *    nothing and loses nothing.
 *
 * Threads: everything is per call: an error manager with its own jmp_buf,
 * its own message and progress monitor; libjpeg keeps no global state. The
 * stripes' compressors are per stripe, and a stripe's failure is recorded
 * in it and reported (gimg_fail) from the calling thread, whose message it
 * is. libjpeg's warnings while writing are errors ("JPEG encoder: ...").
 */
#include "codec.h"
#include "jpeg_internal.h"
#include "nvjpeg_api.h"

#include <omp.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>   /* jpeglib.h needs FILE and size_t */
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* jpegint.h (installed with libjpeg's headers) for the entropy coder's
 * interface, struct jpeg_entropy_encoder, whose encode_mcu the counting
 * pass replaces (see "Writing" above); jpeglib.h reads it, and jerror.h,
 * when JPEG_INTERNALS is defined. */
#define JPEG_INTERNALS
#include <jpeglib.h>
#include <jerror.h>

/* The most scans a file may have, a scan counting once for each component
 * it codes (see the head comment). */
#define JPEG_MAX_COMPONENT_SCANS 48
#define TOO_MANY_SCANS \
    "JPEG has too many scans (over the limit of %d, a scan counting once for each component " \
    "it holds)"

/* Rows handed to libjpeg per call: one iMCU row is at most 32 (4 x 8). */
#define JPEG_ROWS_PER_CALL 32

/* Sequential images of this many pixels or more have their Huffman
 * tables optimised by our counting pass, smaller ones by libjpeg's (see
 * "Writing" above). */
#define JPEG_TWO_PASS_MIN_PIXELS 10000

/* Sequential images of this many pixels or more are written with a
 * restart marker after every MCU row, by stripes, on several threads
 * where OpenMP gives them (see "Writing" above). */
#define JPEG_STRIPE_MIN_PIXELS 1000000

/* The least MCUs in a restart interval of a striped image: each costs 4-5
 * bytes (the marker, the padding to a byte, the DC predictions from 0),
 * under 0.05% of a photo's data when an interval holds 512 MCUs or more. */
#define JPEG_RESTART_MIN_MCUS 512

/* Stripes per thread: more than one, so that a thread slowed by another
 * process leaves its share to the others. */
#define JPEG_STRIPES_PER_THREAD 2

/* A file with restart markers of JPEG_STRIP_DECODE_MIN_PIXELS or more is
 * decoded in strips on several threads (jpeg_strips.c), a strip a thread:
 * below it, a thread's start and each strip's setup weigh more than the
 * decoding they share. */
#define JPEG_STRIP_DECODE_MIN_PIXELS 500000

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
 * the segments as libjpeg does (gimg_jpeg_next_marker()), so that the
 * image's size is judged before libjpeg reads anything else: a file of a
 * huge SOF and no scan is refused for its size. 0 when there is none
 * before SOS or EOI; libjpeg then says what is wrong. */
static int find_frame(const unsigned char *buf, size_t len, unsigned *width, unsigned *height,
                      int *components)
{
    size_t at = 2;  /* after SOI */
    unsigned marker;
    while (gimg_jpeg_next_marker(buf, len, &at, &marker)) {
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
    return 0;
}

/* The components the file's scans code, counted as the scan limit counts
 * them (the head comment), up to EOI or the end of the file; the count
 * stops once it passes `limit`. The segments are walked as find_frame
 * walks them; a scan's entropy-coded data holds 0xFF only before a
 * stuffed 0x00 or an RSTn marker, which the walk steps over, so the next
 * marker it meets is the one libjpeg meets. */
static int count_component_scans(const unsigned char *buf, size_t len, int limit)
{
    size_t at = 2;  /* after SOI */
    unsigned marker;
    int count = 0;
    while (count <= limit && gimg_jpeg_next_marker(buf, len, &at, &marker)) {
        if (marker == 0xD8 || marker == 0xD9 || len - at < 2)
            break;
        const size_t seg = (size_t)buf[at] << 8 | buf[at + 1];
        if (seg < 2)
            break;
        if (marker == 0xDA && seg >= 3 && len - at >= 3)
            count += buf[at + 2];
        at += seg < len - at ? seg : len - at;
    }
    return count;
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
    int want_meta;        /* decoding: APP1 and APP2 are kept for read_metadata */
    gimg_meta *meta;      /* what read_metadata found; the image's on success */
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
        snprintf(g->why, sizeof g->why, TOO_MANY_SCANS, JPEG_MAX_COMPONENT_SCANS);
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
    if (r->want_meta) {
        /* Whole markers (one holds at most 65533 bytes), in libjpeg's
         * pool: together no more than the file. */
        jpeg_save_markers(c, JPEG_APP0 + 1, 0xFFFF);
        jpeg_save_markers(c, JPEG_APP0 + 2, 0xFFFF);
    }
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

/* ---------------------------------------------------- reading metadata */

/* The identifiers that open the metadata markers (the NUL included). */
static const unsigned char exif_id[6] = {'E', 'x', 'i', 'f', 0, 0};
static const char xmp_id[] = "http://ns.adobe.com/xap/1.0/";  /* 29 bytes with its NUL */
static const char icc_id[] = "ICC_PROFILE";                    /* 12 bytes with its NUL */
#define ICC_CHUNK_HEADER_BYTES 14  /* icc_id, the chunk's number, the chunk count */

static int marker_starts(jpeg_saved_marker_ptr k, const void *id, size_t id_bytes)
{
    return k->data_length >= id_bytes && memcmp(k->data, id, id_bytes) == 0;
}

/* The ICC profile of the APP2 "ICC_PROFILE" chunks (ICC.1, annex B.4):
 * each gives its number, 1..count, and the count; the profile is their data
 * in number order. *icc is NULL when there are none; a sequence that is not
 * whole (a chunk missing, twice, numbered 0 or past the count, counts that
 * disagree) gives NULL and why in `why`. *icc is malloc'd. */
static gimg_status join_icc(j_decompress_ptr c, unsigned char **icc, size_t *icc_bytes,
                            char *why, size_t why_size)
{
    jpeg_saved_marker_ptr chunk[256] = {NULL};
    int count = 0;
    *icc = NULL;
    *icc_bytes = 0;
    why[0] = '\0';
    for (jpeg_saved_marker_ptr k = c->marker_list; k; k = k->next) {
        if (k->marker != JPEG_APP0 + 2 || !marker_starts(k, icc_id, sizeof icc_id))
            continue;
        if (k->data_length < ICC_CHUNK_HEADER_BYTES) {
            snprintf(why, why_size, "a chunk is shorter than its header");
            return GIMG_OK;
        }
        const int number = k->data[12], n = k->data[13];
        if (count && n != count) {
            snprintf(why, why_size, "its chunks give counts of %d and %d", count, n);
            return GIMG_OK;
        }
        if (number < 1 || number > n) {
            snprintf(why, why_size, "a chunk is numbered %d of %d", number, n);
            return GIMG_OK;
        }
        if (chunk[number]) {
            snprintf(why, why_size, "chunk %d of %d appears twice", number, n);
            return GIMG_OK;
        }
        count = n;
        chunk[number] = k;
    }
    size_t total = 0;
    for (int i = 1; i <= count; i++) {
        if (!chunk[i]) {
            snprintf(why, why_size, "chunk %d of %d is missing", i, count);
            return GIMG_OK;
        }
        total += chunk[i]->data_length - ICC_CHUNK_HEADER_BYTES;
    }
    if (!count)
        return GIMG_OK;
    if (!total) {
        snprintf(why, why_size, "its chunks are empty");
        return GIMG_OK;
    }
    if (!(*icc = malloc(total)))
        return gimg_fail(GIMG_E_NOMEM, "out of memory decoding JPEG");
    size_t at = 0;
    for (int i = 1; i <= count; i++) {
        const size_t n = chunk[i]->data_length - ICC_CHUNK_HEADER_BYTES;
        memcpy(*icc + at, chunk[i]->data + ICC_CHUNK_HEADER_BYTES, n);
        at += n;
    }
    *icc_bytes = total;
    return GIMG_OK;
}

/* The file's metadata (the head comment's "Metadata"), from the markers
 * libjpeg kept while reading the header, into r->meta (left NULL when the
 * file has none). Malformed metadata is dropped with a warning. */
static gimg_status read_metadata(jpeg_reader *r)
{
    j_decompress_ptr c = &r->cinfo;
    gimg_status st = GIMG_OK;
    int have_exif = 0, have_xmp = 0;
    for (jpeg_saved_marker_ptr k = c->marker_list; k && !st; k = k->next) {
        if (k->marker != JPEG_APP0 + 1)
            continue;
        if (!have_exif && marker_starts(k, exif_id, sizeof exif_id)) {
            have_exif = 1;
            if (k->data_length > sizeof exif_id)
                st = gimg_meta_add_exif(&r->meta, k->data + sizeof exif_id,
                                        k->data_length - sizeof exif_id);
        } else if (!have_xmp && marker_starts(k, xmp_id, sizeof xmp_id)) {
            have_xmp = 1;
            if (k->data_length > sizeof xmp_id)
                st = gimg_meta_add_xmp(&r->meta, k->data + sizeof xmp_id,
                                       k->data_length - sizeof xmp_id);
        }
    }
    unsigned char *icc = NULL;
    size_t icc_bytes;
    char why[96];
    if (!st)
        st = join_icc(c, &icc, &icc_bytes, why, sizeof why);
    if (!st && why[0])
        gimg_meta_warn(&r->meta, "ICC profile dropped: %s", why);
    else if (!st && icc && r->cmyk)
        gimg_meta_warn(&r->meta, "ICC profile dropped: it describes the file's CMYK inks, "
                                 "which are read as RGB");
    else if (!st && icc)
        st = gimg_meta_add_icc(&r->meta, icc, icc_bytes);
    free(icc);
    /* JFIF's density: unit 1 is dots per inch, 2 dots per cm; 0 gives
     * only the pixels' aspect ratio, no resolution. */
    const int per_inch = c->density_unit == 1, per_cm = c->density_unit == 2;
    if (!st && c->saw_JFIF_marker && (per_inch || per_cm) && c->X_density && c->Y_density) {
        if (!r->meta && !(r->meta = gimg_meta_new()))
            return gimg_fail(GIMG_E_NOMEM, "out of memory decoding JPEG");
        r->meta->x_dpi = c->X_density * (per_cm ? 2.54 : 1.0);
        r->meta->y_dpi = c->Y_density * (per_cm ? 2.54 : 1.0);
    }
    return st;
}

static const char *gpu_refusal(j_decompress_ptr c, const unsigned char *buf, size_t len,
                               size_t at, int *subsampling);

/* A multi-scan file's coefficients (2 bytes a sample of every component,
 * each component's blocks rounded up to its sampling factors, as libjpeg
 * allocates them zeroed in jpeg_start_decompress), beside the image,
 * within the memory budget: the pixel limit, by default, does not bound
 * them (65535 x 65535 in colour would be 25 GB). */
static gimg_status check_coefficients(j_decompress_ptr c)
{
    uint64_t bytes = (uint64_t)c->image_width * c->image_height * (uint64_t)c->num_components;
    for (int i = 0; i < c->num_components; i++) {
        const jpeg_component_info *k = &c->comp_info[i];
        const uint64_t w = ((uint64_t)k->width_in_blocks + k->h_samp_factor - 1) /
                           k->h_samp_factor * k->h_samp_factor;
        const uint64_t h = ((uint64_t)k->height_in_blocks + k->v_samp_factor - 1) /
                           k->v_samp_factor * k->v_samp_factor;
        bytes += w * h * DCTSIZE2 * sizeof(JCOEF);
    }
    return gimg_check_memory(bytes, "decoding this multi-scan JPEG (its coefficients)");
}

/* Reads the header and metadata and starts the decompressor, checking
 * the layout it gives. Runs under the caller's setjmp. */
static gimg_status start_run(jpeg_reader *r, const unsigned char *buf, size_t len)
{
    gimg_status st = read_header(r, buf, len);
    if (st || (st = read_metadata(r)))
        return st;
    j_decompress_ptr c = &r->cinfo;
    c->dct_method = JDCT_ISLOW;
    c->do_fancy_upsampling = TRUE;
    c->do_block_smoothing = TRUE;
    /* Counted in the file first, so that a file of thousands of scans is
     * refused before jpeg_start_decompress allocates the coefficients of
     * a multi-scan image (384 MB at 8192x8192 in colour, whose zeroing
     * alone took 0.4 s of CPU); the monitor counts again as libjpeg reads. */
    if (jpeg_has_multiple_scans(c) &&
        count_component_scans(buf, len, JPEG_MAX_COMPONENT_SCANS) > JPEG_MAX_COMPONENT_SCANS)
        return gimg_fail(GIMG_E_LIMIT, TOO_MANY_SCANS, JPEG_MAX_COMPONENT_SCANS);
    if (jpeg_has_multiple_scans(c) && (st = check_coefficients(c)))
        return st;
    r->progress.progress_monitor = count_scans;
    c->progress = &r->progress;
    jpeg_start_decompress(c);
    if (c->output_width != c->image_width || c->output_height != c->image_height ||
        c->output_components != (r->cmyk ? 4 : r->channels))
        return gimg_fail(GIMG_E_FORMAT, "JPEG decoder gave an unexpected layout");
    if (r->cmyk) {
        const size_t row_bytes = (size_t)c->output_width * 4;
        if (!(r->cmyk_rows = malloc(row_bytes * JPEG_ROWS_PER_CALL)))
            return gimg_fail(GIMG_E_NOMEM, "out of memory decoding JPEG");
    }
    return GIMG_OK;
}

/* The next im->height rows of the started decompressor into im's rows:
 * libjpeg writes them there, several per call; CMYK goes through a strip
 * of JPEG_ROWS_PER_CALL rows. After the image's last row, reads on to its
 * end: a file cut after its last scan is refused too. Runs under the
 * caller's setjmp. */
static gimg_status read_rows(jpeg_reader *r, gimg_image *im)
{
    j_decompress_ptr c = &r->cinfo;
    const int first = (int)c->output_scanline;
    JSAMPROW rows[JPEG_ROWS_PER_CALL];
    for (int i = 0; r->cmyk && i < JPEG_ROWS_PER_CALL; i++)
        rows[i] = r->cmyk_rows + (size_t)i * c->output_width * 4;
    for (int y = 0; y < im->height;) {
        const int want = im->height - y < JPEG_ROWS_PER_CALL ? im->height - y
                                                             : JPEG_ROWS_PER_CALL;
        if (!r->cmyk)
            for (int i = 0; i < want; i++)
                rows[i] = gimg_row(im, y + i);
        const int got = (int)jpeg_read_scanlines(c, rows, (JDIMENSION)want);
        if (got <= 0)  /* a memory source never suspends */
            return gimg_fail(GIMG_E_FORMAT, "corrupt JPEG: the decoder stopped at row %d",
                             first + y);
        if (r->cmyk)
            for (int i = 0; i < got; i++)
                cmyk_to_rgb(rows[i], gimg_row(im, y + i), (size_t)im->width, r->inverted);
        y += got;
    }
    if (c->output_scanline == c->output_height)
        jpeg_finish_decompress(c);
    return GIMG_OK;
}

/* Decodes into r's image. With facts (gimg_jpeg_read_header), reads the
 * header only: im gets the layout, no pixels, and facts whether the GPU's
 * decoders take the file. */
static gimg_status decode_run(jpeg_reader *r, const unsigned char *buf, size_t len,
                              gimg_image *im, gimg_jpeg_facts *facts)
{
    if (setjmp(r->guard.jump))
        return gimg_fail(r->guard.status, "%s", r->guard.why);
    gimg_status st;
    if (facts) {
        if ((st = read_header(r, buf, len)) || (st = read_metadata(r)))
            return st;
        j_decompress_ptr c = &r->cinfo;
        im->width = (int)c->image_width;
        im->height = (int)c->image_height;
        im->channels = r->channels;
        im->sample = GIMG_U8;
        /* After jpeg_read_header, the source's next byte is the first scan's data. */
        const size_t at = (size_t)(c->src->next_input_byte - buf);
        facts->gpu_refusal = gpu_refusal(c, buf, len, at, &facts->subsampling);
        return GIMG_OK;
    }
    if ((st = start_run(r, buf, len)) ||
        (st = gimg_image_alloc(im, (int)r->cinfo.output_width, (int)r->cinfo.output_height,
                               r->channels, GIMG_U8)))
        return st;
    return read_rows(r, im);
}

static void reader_free(jpeg_reader *r)
{
    if (r->created)
        jpeg_destroy_decompress(&r->cinfo);
    free(r->cmyk_rows);
    gimg_meta_free(r->meta);
}

static int usable_threads(void);

/* Reads the header and metadata only. */
static gimg_status header_run(jpeg_reader *r, const unsigned char *buf, size_t len)
{
    if (setjmp(r->guard.jump))
        return gimg_fail(r->guard.status, "%s", r->guard.why);
    gimg_status st = read_header(r, buf, len);
    return st ? st : read_metadata(r);
}

/* Strip k of n of p (jpeg_strips.c) into im's rows: its own file, decoded
 * as any file is (warnings are errors), its overlap rows read into a
 * scratch row (r's CMYK row buffer: strips are never CMYK) and dropped.
 * Stops after the strip's last row (the rows below are the next
 * strip's). */
static gimg_status strip_run(jpeg_reader *r, const gimg_jpeg_strips *p, int k, int n,
                             gimg_image *im, unsigned char **file)
{
    int a, b, first_row, rows, skip;
    gimg_jpeg_strip_span(p, k, n, &a, &b, &first_row, &rows, &skip);
    const size_t bytes = gimg_jpeg_strip_bytes(p, a, b);
    if (!(*file = malloc(bytes)) ||
        !(r->cmyk_rows = malloc((size_t)im->width * (size_t)im->channels)))
        return gimg_fail(GIMG_E_NOMEM, "out of memory decoding JPEG");
    gimg_jpeg_strip_write(p, a, b, *file);
    if (setjmp(r->guard.jump))
        return gimg_fail(r->guard.status, "%s", r->guard.why);
    gimg_status st = start_run(r, *file, bytes);
    if (st)
        return st;
    j_decompress_ptr c = &r->cinfo;
    if (r->cmyk || c->output_width != (JDIMENSION)im->width ||
        (int)c->output_height != gimg_jpeg_strip_height(p, a, b) || r->channels != im->channels)
        return gimg_fail(GIMG_E_FORMAT, "a strip unlike its image");
    JSAMPROW out[JPEG_ROWS_PER_CALL];
    for (int y = -skip; y < rows;) {
        const int left = y < 0 ? -y : rows - y;
        const int want = left < JPEG_ROWS_PER_CALL ? left : JPEG_ROWS_PER_CALL;
        for (int i = 0; i < want; i++)
            out[i] = y < 0 ? r->cmyk_rows : gimg_row(im, first_row + y + i);
        const int got = (int)jpeg_read_scanlines(c, out, (JDIMENSION)want);
        if (got <= 0)
            return gimg_fail(GIMG_E_FORMAT, "corrupt JPEG: the decoder stopped in a strip");
        y += got;
    }
    return GIMG_OK;
}

/* Decodes buf in strips on the threads there are, into *out with the
 * file's metadata: 1 when it did; 0 when the file does not qualify or
 * anything went wrong, *out then empty (the whole file is decoded as
 * ever, and its decoder gives the message a bad file deserves). */
static int decode_in_strips(const unsigned char *buf, size_t len, gimg_image *out)
{
    unsigned w, h;
    int components;
    const int threads = usable_threads();
    if (threads < 2 || !find_frame(buf, len, &w, &h, &components) ||
        (uint64_t)w * h < JPEG_STRIP_DECODE_MIN_PIXELS)
        return 0;
    gimg_jpeg_strips p;
    if (!gimg_jpeg_strips_plan(buf, len, &p))
        return 0;
    jpeg_reader head;
    memset(&head, 0, sizeof head);
    guard_init(&head.guard, 1);
    head.want_meta = 1;
    gimg_image im;
    memset(&im, 0, sizeof im);
    int ok = !header_run(&head, buf, len) && !head.cmyk &&
             !gimg_image_alloc(&im, (int)head.cinfo.image_width, (int)head.cinfo.image_height,
                               head.channels, GIMG_U8);
    const int n = p.steps < threads ? p.steps : threads;
    if (ok) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(n) reduction(&& : ok)
        for (int k = 0; k < n; k++) {
            jpeg_reader r;
            memset(&r, 0, sizeof r);
            guard_init(&r.guard, 1);
            unsigned char *file = NULL;
            if (strip_run(&r, &p, k, n, &im, &file))
                ok = 0;
            reader_free(&r);
            free(file);
        }
    }
    if (ok) {
        im.meta = head.meta;
        head.meta = NULL;
        *out = im;
    } else {
        gimg_image_free(&im);
    }
    reader_free(&head);
    gimg_jpeg_strips_free(&p);
    return ok;
}

static gimg_status decode(const unsigned char *buf, size_t len, const gimg_read_opts *o,
                          gimg_image *out)
{
    jpeg_reader r;
    gimg_image im;
    memset(&r, 0, sizeof r);
    memset(&im, 0, sizeof im);
    memset(out, 0, sizeof *out);
    if (decode_in_strips(buf, len, out))
        return GIMG_OK;
    guard_init(&r.guard, 1);
    r.want_meta = 1;
    gimg_status st = decode_run(&r, buf, len, &im, NULL);
    if (st) {
        gimg_image_free(&im);
    } else {
        im.meta = r.meta;
        r.meta = NULL;
        *out = im;
    }
    reader_free(&r);
    return st;
}

/* ------------------------------------------------------ rows (band.h) */

/* The decompressor started as decode starts it, read a band at a time:
 * libjpeg decodes row by row anyway (a progressive file's coefficients
 * are held whole by libjpeg, as decoding holds them). The metadata
 * precedes the first scan: the header gets all of it. */
static gimg_status rows_start(jpeg_reader *r, const unsigned char *buf, size_t len)
{
    if (setjmp(r->guard.jump))
        return gimg_fail(r->guard.status, "%s", r->guard.why);
    return start_run(r, buf, len);
}

static gimg_status rows_open_jpeg(const unsigned char *buf, size_t len, const gimg_read_opts *o,
                                  gimg_image *header, void **rows)
{
    *rows = NULL;
    jpeg_reader *r = calloc(1, sizeof *r);
    if (!r)
        return gimg_fail(GIMG_E_NOMEM, "out of memory decoding JPEG");
    guard_init(&r->guard, 1);
    r->want_meta = 1;
    gimg_status st = rows_start(r, buf, len);
    if (st) {
        reader_free(r);
        free(r);
        return st;
    }
    header->width = (int)r->cinfo.output_width;
    header->height = (int)r->cinfo.output_height;
    header->channels = r->channels;
    header->sample = GIMG_U8;
    header->meta = r->meta;
    r->meta = NULL;
    *rows = r;
    return GIMG_OK;
}

static gimg_status rows_read_jpeg(void *rows, gimg_image *band)
{
    jpeg_reader *r = rows;
    if (setjmp(r->guard.jump))
        return gimg_fail(r->guard.status, "%s", r->guard.why);
    return read_rows(r, band);
}

static void rows_close_jpeg(void *rows)
{
    if (rows)
        reader_free(rows);
    free(rows);
}

/* ----------------------------------------------------------- writing */

static void layout(int *channels, gimg_sample *sample)
{
    *channels = *channels >= 3 ? 3 : 1;
    *sample = GIMG_U8;
}

/* libjpeg's output: a malloc'd buffer that doubles with realloc() (which
 * moves large blocks by remapping, without copying); or, for the counting
 * pass, a small buffer written over and over (`discard`). */
typedef struct {
    struct jpeg_destination_mgr pub;  /* first: libjpeg sees only this part */
    unsigned char *data;
    size_t cap;
    int discard;
} jpeg_sink;

static void sink_start(j_compress_ptr cinfo) {}

static boolean sink_grow(j_compress_ptr cinfo)
{
    jpeg_sink *s = (jpeg_sink *)cinfo->dest;
    if (s->discard) {
        s->pub.next_output_byte = s->data;
        s->pub.free_in_buffer = s->cap;
        return TRUE;
    }
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

static void sink_init(jpeg_sink *s, unsigned char *data, size_t cap, int discard)
{
    s->data = data;
    s->cap = cap;
    s->discard = discard;
    s->pub.next_output_byte = data;
    s->pub.free_in_buffer = cap;
    s->pub.init_destination = sink_start;
    s->pub.empty_output_buffer = sink_grow;
    s->pub.term_destination = sink_end;
}

typedef struct {
    struct jpeg_compress_struct cinfo;
    jpeg_guard guard;
    jpeg_sink sink;
    int created;
} jpeg_writer;

/* Starts w's compressor, whose errors jump to w->guard.jump. `created` is
 * set first: jpeg_create_compress zeroes the object before it allocates,
 * so jpeg_destroy_compress is safe on one whose creation failed. */
static void writer_create(jpeg_writer *w)
{
    w->cinfo.err = &w->guard.pub;
    w->created = 1;
    jpeg_create_compress(&w->cinfo);
}

/* The chroma sampling factors (horizontal, vertical) of the first
 * component for the options; the others stay 1x1. */
int gimg_jpeg_subsampling(const gimg_write_opts *o)
{
    gimg_subsampling s = o->jpeg_subsampling;
    if (s == GIMG_SUBSAMPLE_AUTO)
        s = o->quality >= 90 ? GIMG_SUBSAMPLE_444 : GIMG_SUBSAMPLE_420;
    return s == GIMG_SUBSAMPLE_444 ? GIMG_NVJPEG_CSS_444
           : s == GIMG_SUBSAMPLE_422 ? GIMG_NVJPEG_CSS_422
                                     : GIMG_NVJPEG_CSS_420;
}

static void luma_factors(const gimg_write_opts *o, int *h, int *v)
{
    const int css = gimg_jpeg_subsampling(o);
    *h = css == GIMG_NVJPEG_CSS_444 ? 1 : 2;
    *v = css == GIMG_NVJPEG_CSS_420 ? 2 : 1;
}

/* The parameters of every compressor of an image: `rows` rows of it (a
 * stripe, or all), a restart interval of restart_rows MCU rows (0: no
 * restart markers). */
static void set_parameters(j_compress_ptr c, const gimg_image *im, const gimg_write_opts *o,
                           int rows, int restart_rows)
{
    c->image_width = (JDIMENSION)im->width;
    c->image_height = (JDIMENSION)rows;
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
    c->dct_method = JDCT_ISLOW;
    c->restart_in_rows = restart_rows;
    const gimg_meta *m = im->meta;
    if (m && (m->x_dpi > 0 || m->y_dpi > 0)) {
        /* JFIF's density in dots per inch, rounded, within its 16 bits;
         * one direction given stands for both. */
        const double x = m->x_dpi > 0 ? m->x_dpi : m->y_dpi, y = m->y_dpi > 0 ? m->y_dpi : x;
        c->density_unit = 1;
        c->X_density = (UINT16)(x < 1 ? 1 : x >= 65535 ? 65535 : x + 0.5);
        c->Y_density = (UINT16)(y < 1 ? 1 : y >= 65535 ? 65535 : y + 0.5);
    }
}

/* What one marker holds: its data, after its 2-byte length, is at most
 * 65533 bytes; after the identifiers, an EXIF block of 65527 bytes, an XMP
 * packet of 65504 and an ICC chunk of 65519, with at most 255 chunks. */
#define JPEG_MARKER_MAX_BYTES 65533u
#define JPEG_MAX_EXIF_BYTES (JPEG_MARKER_MAX_BYTES - sizeof exif_id)
#define JPEG_MAX_XMP_BYTES (JPEG_MARKER_MAX_BYTES - sizeof xmp_id)
#define JPEG_ICC_CHUNK_BYTES (JPEG_MARKER_MAX_BYTES - ICC_CHUNK_HEADER_BYTES)
#define JPEG_MAX_ICC_BYTES ((size_t)255 * JPEG_ICC_CHUNK_BYTES)

/* The kinds of m (GIMG_META_*) too large for JPEG's markers, which the
 * encoder leaves out. */
static unsigned unfit_meta(const gimg_meta *m)
{
    if (!m)
        return 0;
    return (m->exif_bytes > JPEG_MAX_EXIF_BYTES ? GIMG_META_EXIF : 0u) |
           (m->xmp_bytes > JPEG_MAX_XMP_BYTES ? GIMG_META_XMP : 0u) |
           (m->icc_bytes > JPEG_MAX_ICC_BYTES ? GIMG_META_ICC : 0u);
}

/* One marker: the identifier, then the payload (its sum within a
 * marker's size: unfit_meta says). */
static void write_marker(j_compress_ptr c, int marker, const void *id, size_t id_bytes,
                         const unsigned char *p, size_t n)
{
    jpeg_write_m_header(c, marker, (unsigned)(id_bytes + n));
    for (size_t i = 0; i < id_bytes; i++)
        jpeg_write_m_byte(c, ((const unsigned char *)id)[i]);
    for (size_t i = 0; i < n; i++)
        jpeg_write_m_byte(c, p[i]);
}

/* The image's metadata markers, after the JFIF marker libjpeg has written
 * (between jpeg_start_compress and the first row), in the order of libvips
 * and ImageMagick: EXIF APP1, XMP APP1, ICC APP2 chunks. What does not fit
 * is left out (unfit_meta). */
static void write_metadata(j_compress_ptr c, const gimg_meta *m)
{
    if (!m)
        return;
    const unsigned unfit = unfit_meta(m);
    if (m->exif_bytes && !(unfit & GIMG_META_EXIF))
        write_marker(c, JPEG_APP0 + 1, exif_id, sizeof exif_id, m->exif, m->exif_bytes);
    if (m->xmp_bytes && !(unfit & GIMG_META_XMP))
        write_marker(c, JPEG_APP0 + 1, xmp_id, sizeof xmp_id, m->xmp, m->xmp_bytes);
    /* libjpeg's own chunking (cjpeg -icc's): JPEG_ICC_CHUNK_BYTES a chunk. */
    if (m->icc_bytes && !(unfit & GIMG_META_ICC))
        jpeg_write_icc_profile(c, m->icc, (unsigned)m->icc_bytes);
}

/* Hands libjpeg the image's rows first_row.. in place, whatever the
 * stride, up to the compressor's height. */
static void write_rows(j_compress_ptr c, const gimg_image *im, int first_row)
{
    JSAMPROW rows[JPEG_ROWS_PER_CALL];
    const int height = (int)c->image_height;
    while ((int)c->next_scanline < height) {
        const int y = (int)c->next_scanline;
        const int n = height - y < JPEG_ROWS_PER_CALL ? height - y : JPEG_ROWS_PER_CALL;
        for (int i = 0; i < n; i++)
            rows[i] = gimg_row(im, first_row + y + i);  /* libjpeg only reads them */
        jpeg_write_scanlines(c, rows, (JDIMENSION)n);
    }
}

/* --- libjpeg's own optimising encoder: progressive and small images */

/* Runs under w's setjmp; w->sink is set up by the caller. */
static gimg_status libjpeg_run(jpeg_writer *w, const gimg_image *im, const gimg_write_opts *o)
{
    if (setjmp(w->guard.jump))
        return w->guard.status;
    writer_create(w);
    j_compress_ptr c = &w->cinfo;
    c->dest = &w->sink.pub;
    set_parameters(c, im, o, im->height, 0);
    if (o->jpeg_progressive)
        jpeg_simple_progression(c);
    c->optimize_coding = TRUE;
    jpeg_start_compress(c, TRUE);
    write_metadata(c, im->meta);
    write_rows(c, im, 0);
    jpeg_finish_compress(c);
    return GIMG_OK;
}

static gimg_status encode_libjpeg(const gimg_image *im, const gimg_write_opts *o,
                                  unsigned char **buf, size_t *len)
{
    jpeg_writer w;
    memset(&w, 0, sizeof w);
    guard_init(&w.guard, 0);
    /* A first guess at the size: a quarter of the pixels' bytes, which a
     * photo at quality 90 stays below; the buffer doubles if not. */
    const size_t guess = (size_t)im->width * (size_t)im->height * (size_t)im->channels / 4 + 4096;
    unsigned char *data = malloc(guess);
    if (!data)
        return gimg_fail(GIMG_E_NOMEM, "out of memory encoding JPEG");
    sink_init(&w.sink, data, guess, 0);
    gimg_status st = libjpeg_run(&w, im, o);
    const size_t used = w.sink.cap - w.sink.pub.free_in_buffer;
    if (w.created)
        jpeg_destroy_compress(&w.cinfo);
    if (st) {
        free(w.sink.data);
        return gimg_fail(st, "%s", w.guard.why);
    }
    /* Give back what the first guess left unused. */
    unsigned char *fit = realloc(w.sink.data, used);
    *buf = fit ? fit : w.sink.data;
    *len = used;
    return GIMG_OK;
}

/* --- sequential: stripes, counted, then coded with the counts' tables */

/* libjpeg's builder of the optimal Huffman table for symbol counts
 * (JPEG Annex K.2, with its length limit), the one its own optimising
 * encoder calls, so that our tables are the ones cjpeg -optimize writes.
 * libjpeg.so.62 exports it (version LIBJPEG_6.2); only the library's
 * private jchuff.h declares it, hence the declaration here. It reads
 * counts of 257 symbols (the last its own) and overwrites them. */
void jpeg_gen_optimal_table(j_compress_ptr cinfo, JHUFF_TBL *htbl, long freq[]);

/* How often each symbol of each Huffman table (by slot) is coded. */
typedef struct {
    long dc[NUM_HUFF_TBLS][257];
    long ac[NUM_HUFF_TBLS][257];
} huffman_counts;

/* A band of whole restart intervals of the image, compressed by one
 * thread. */
typedef struct {
    int first_row, rows;
    int first_interval;  /* the index of its first restart interval in the image */
    /* The counting pass. */
    huffman_counts counts;
    int last_dc[MAX_COMPS_IN_SCAN];  /* the DC predictions, as the coder keeps them */
    unsigned restarts_left;          /* MCUs before the next restart */
    /* The coding pass: the stripe as a JPEG file of its own, where its
     * scan data starts, and where its frame header's height is. */
    unsigned char *file;
    size_t len, scan, height_at;
    gimg_status status;
    char why[JMSG_LENGTH_MAX + 64];
} jpeg_stripe;

/* Zigzag order (JPEG Figure A.6): zigzag[k] is the index, in the block's
 * row-major order, of the k-th coefficient coded. */
static const unsigned char zigzag[64] = {
    0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,
    12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6,  7,  14, 21, 28,
    35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
    58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63};

/* The magnitude category of a coefficient or DC difference (F.1.2.1):
 * the bit length of |v|. */
static inline int magnitude_category(int v)
{
    unsigned a = (unsigned)(v < 0 ? -v : v);
    return a ? 32 - __builtin_clz(a) : 0;
}

/* The zigzag positions 1..63 of a block's nonzero AC coefficients, as
 * bits, its coefficients laid out in zigzag order in `zz`. */
static inline uint64_t nonzero_ac(const JCOEF *block, JCOEF *zz)
{
#pragma GCC unroll 64
    for (int k = 0; k < 64; k++)
        zz[k] = block[zigzag[k]];
    uint64_t zero = 0;
#if defined(__SSE2__)
    const __m128i z = _mm_setzero_si128();
    for (int k = 0; k < 64; k += 16) {
        const __m128i a = _mm_load_si128((const __m128i *)(zz + k));
        const __m128i b = _mm_load_si128((const __m128i *)(zz + k + 8));
        const __m128i eq = _mm_packs_epi16(_mm_cmpeq_epi16(a, z), _mm_cmpeq_epi16(b, z));
        zero |= (uint64_t)(unsigned)_mm_movemask_epi8(eq) << k;
    }
#else
    for (int k = 0; k < 64; k++)
        zero |= (uint64_t)(zz[k] == 0) << k;
#endif
    return ~zero & ~(uint64_t)1;
}

/* libjpeg's Huffman coder, replaced for the counting pass: counts the
 * symbols an MCU's blocks would be coded with (F.1.2: the DC difference's
 * category; for the AC coefficients in zigzag order, run/size symbols, ZRL
 * (0xF0) for each 16 zeros before a nonzero coefficient, EOB (0x00) after
 * the last nonzero one unless it is the 63rd), resetting the DC
 * predictions at each restart, as jchuff.c's gathering pass does. The
 * blocks are those libjpeg's coder would get, edge padding included. */
static boolean count_mcu(j_compress_ptr c, JBLOCKROW *mcu)
{
    jpeg_stripe *s = c->client_data;
    if (c->restart_interval) {
        if (s->restarts_left == 0) {
            memset(s->last_dc, 0, sizeof s->last_dc);
            s->restarts_left = c->restart_interval;
        }
        s->restarts_left--;
    }
    for (int b = 0; b < c->blocks_in_MCU; b++) {
        const int ci = c->MCU_membership[b];
        const jpeg_component_info *comp = c->cur_comp_info[ci];
        const JCOEF *block = mcu[b][0];
        long *dc = s->counts.dc[comp->dc_tbl_no], *ac = s->counts.ac[comp->ac_tbl_no];
        dc[magnitude_category(block[0] - s->last_dc[ci])]++;
        s->last_dc[ci] = block[0];
        JCOEF zz[64] __attribute__((aligned(16)));
        uint64_t nonzero = nonzero_ac(block, zz);
        if (!nonzero) {
            ac[0x00]++;
            continue;
        }
        const int last = 63 - __builtin_clzll(nonzero);
        for (int prev = 0; nonzero; nonzero &= nonzero - 1) {
            const int k = __builtin_ctzll(nonzero);
            int run = k - prev - 1;
            prev = k;
            if (run > 15) {
                ac[0xF0] += run >> 4;
                run &= 15;
            }
            ac[run << 4 | magnitude_category(zz[k])]++;
        }
        if (last < 63)
            ac[0x00]++;
    }
    return TRUE;
}

/* The MCU's size in pixels for the options: 8 x 8 for gray (a scan of
 * one component codes single blocks), 8 x the largest sampling factors
 * for colour (the first component's). */
static void mcu_size(const gimg_image *im, const gimg_write_opts *o, int *width, int *height)
{
    int h = 1, v = 1;
    if (im->channels == 3)
        luma_factors(o, &h, &v);
    *width = DCTSIZE * h;
    *height = DCTSIZE * v;
}

/* The counting pass of a stripe: libjpeg converts, downsamples,
 * transforms and quantises its rows, and hands each MCU's blocks to
 * count_mcu in place of its coder; the headers it writes are thrown away.
 * Runs under w's setjmp. */
static gimg_status count_run(jpeg_writer *w, jpeg_stripe *s, const gimg_image *im,
                             const gimg_write_opts *o, int restart_rows)
{
    if (setjmp(w->guard.jump))
        return w->guard.status;
    writer_create(w);
    j_compress_ptr c = &w->cinfo;
    c->dest = &w->sink.pub;
    c->client_data = s;
    set_parameters(c, im, o, s->rows, restart_rows);
    c->optimize_coding = FALSE;
    jpeg_start_compress(c, TRUE);
    /* The plan's stripes hold whole restart intervals of restart_rows MCU
     * rows: check that libjpeg sees them so. */
    int mcu_width, mcu_height;
    mcu_size(im, o, &mcu_width, &mcu_height);
    const int scan_mcu_height =
        c->comps_in_scan == 1 ? DCTSIZE : c->max_v_samp_factor * DCTSIZE;
    if (!c->entropy || scan_mcu_height != mcu_height ||
        (restart_rows && c->restart_interval != (unsigned)restart_rows * c->MCUs_per_row)) {
        snprintf(w->guard.why, sizeof w->guard.why,
                 "JPEG encoder: libjpeg laid out the MCUs unexpectedly");
        return GIMG_E_FORMAT;
    }
    c->entropy->encode_mcu = count_mcu;
    write_rows(c, im, s->first_row);
    jpeg_finish_compress(c);
    return GIMG_OK;
}

/* Installs the optimal tables of the counts in the slots c's components
 * use (the others are not written). */
static void install_tables(j_compress_ptr c, const huffman_counts *counts)
{
    int done_dc = 0, done_ac = 0;
    long freq[257];
    for (int i = 0; i < c->num_components; i++) {
        const int dc = c->comp_info[i].dc_tbl_no, ac = c->comp_info[i].ac_tbl_no;
        if (!(done_dc >> dc & 1)) {
            if (!c->dc_huff_tbl_ptrs[dc])
                c->dc_huff_tbl_ptrs[dc] = jpeg_alloc_huff_table((j_common_ptr)c);
            memcpy(freq, counts->dc[dc], sizeof freq);
            jpeg_gen_optimal_table(c, c->dc_huff_tbl_ptrs[dc], freq);
            done_dc |= 1 << dc;
        }
        if (!(done_ac >> ac & 1)) {
            if (!c->ac_huff_tbl_ptrs[ac])
                c->ac_huff_tbl_ptrs[ac] = jpeg_alloc_huff_table((j_common_ptr)c);
            memcpy(freq, counts->ac[ac], sizeof freq);
            jpeg_gen_optimal_table(c, c->ac_huff_tbl_ptrs[ac], freq);
            done_ac |= 1 << ac;
        }
    }
}

/* The coding pass of a stripe: a JPEG file of its rows, coded with the
 * tables of the whole image's counts, into w->sink. Runs under w's
 * setjmp. */
static gimg_status code_run(jpeg_writer *w, const jpeg_stripe *s, const gimg_image *im,
                            const gimg_write_opts *o, int restart_rows,
                            const huffman_counts *counts)
{
    if (setjmp(w->guard.jump))
        return w->guard.status;
    writer_create(w);
    j_compress_ptr c = &w->cinfo;
    c->dest = &w->sink.pub;
    set_parameters(c, im, o, s->rows, restart_rows);
    install_tables(c, counts);
    c->optimize_coding = FALSE;
    jpeg_start_compress(c, TRUE);
    if (s->first_interval == 0)  /* the stripe whose headers the file keeps */
        write_metadata(c, im->meta);
    write_rows(c, im, s->first_row);
    jpeg_finish_compress(c);
    return GIMG_OK;
}

/* Where the scan data of a stripe's file starts (after its SOS segment),
 * and where its frame header's height is; 0 if the file is not as libjpeg
 * writes it: SOI, segments, SOS, data, EOI. */
static size_t scan_data_at(const unsigned char *f, size_t len, size_t *height_at)
{
    if (len < 4 || f[0] != 0xFF || f[1] != 0xD8 || f[len - 2] != 0xFF || f[len - 1] != 0xD9)
        return 0;
    *height_at = 0;
    for (size_t at = 2; at + 4 <= len - 2 && f[at] == 0xFF;) {
        const unsigned marker = f[at + 1];
        const size_t seg = (size_t)f[at + 2] << 8 | f[at + 3];
        if (seg < 2 || seg > len - 2 - at - 2)
            return 0;
        if (marker >= 0xC0 && marker <= 0xC2 && seg >= 8)
            *height_at = at + 5;
        at += 2 + seg;
        if (marker == 0xDA)
            return *height_at ? at : 0;
    }
    return 0;
}

/* Renumbers the RSTn markers of a stripe's scan data as the whole image
 * numbers them: its m-th marker, RST(m mod 8) in its own file, ends the
 * image's (first_interval + m)-th interval and is RST((first_interval +
 * m) mod 8) there (B.2.1). In scan data libjpeg writes 0xFF only before a
 * stuffed 0x00 or a marker. */
static void renumber_restarts(unsigned char *data, size_t len, int first_interval)
{
    const int shift = first_interval & 7;
    if (!shift)
        return;
    unsigned char *p = data, *end = data + len;
    while (p + 1 < end && (p = memchr(p, 0xFF, (size_t)(end - p - 1)))) {
        if (p[1] >= 0xD0 && p[1] <= 0xD7)
            p[1] = (unsigned char)(0xD0 + ((p[1] - 0xD0 + shift) & 7));
        p += 2;
    }
}

/* Records a stripe's failure: the caller's thread reports it (gimg_fail's
 * message is per thread). */
static void stripe_failed(jpeg_stripe *s, gimg_status st, const char *why)
{
    s->status = st;
    snprintf(s->why, sizeof s->why, "%s", why);
}

static void count_stripe(jpeg_stripe *s, const gimg_image *im, const gimg_write_opts *o,
                         int restart_rows)
{
    jpeg_writer w;
    unsigned char scrap[4096];
    memset(&w, 0, sizeof w);
    guard_init(&w.guard, 0);
    sink_init(&w.sink, scrap, sizeof scrap, 1);
    gimg_status st = count_run(&w, s, im, o, restart_rows);
    if (w.created)
        jpeg_destroy_compress(&w.cinfo);
    if (st)
        stripe_failed(s, st, w.guard.why);
}

static void code_stripe(jpeg_stripe *s, const gimg_image *im, const gimg_write_opts *o,
                        int restart_rows, const huffman_counts *counts)
{
    jpeg_writer w;
    memset(&w, 0, sizeof w);
    guard_init(&w.guard, 0);
    /* A first guess at the size, as encode_libjpeg's. */
    const size_t guess = (size_t)im->width * (size_t)s->rows * (size_t)im->channels / 4 + 4096;
    unsigned char *data = malloc(guess);
    if (!data) {
        stripe_failed(s, GIMG_E_NOMEM, "out of memory encoding JPEG");
        return;
    }
    sink_init(&w.sink, data, guess, 0);
    gimg_status st = code_run(&w, s, im, o, restart_rows, counts);
    if (w.created)
        jpeg_destroy_compress(&w.cinfo);
    if (st) {
        free(w.sink.data);
        stripe_failed(s, st, w.guard.why);
        return;
    }
    s->file = w.sink.data;
    s->len = w.sink.cap - w.sink.pub.free_in_buffer;
    if (!(s->scan = scan_data_at(s->file, s->len, &s->height_at))) {
        stripe_failed(s, GIMG_E_FORMAT, "JPEG encoder: a stripe is not a whole JPEG file");
        return;
    }
    renumber_restarts(s->file + s->scan, s->len - 2 - s->scan, s->first_interval);
}

/* The stripes' files as one: stripe 0's headers with the image's height,
 * each stripe's scan data in turn (renumbered by code_stripe), with the
 * restart marker that ends the interval before it between, then EOI.
 * Takes stripe 0's file. */
static gimg_status splice(jpeg_stripe *stripes, int n, int height, unsigned char **buf,
                          size_t *len)
{
    size_t total = stripes[0].len;
    for (int k = 1; k < n; k++)
        total += stripes[k].len - stripes[k].scan;  /* its data and a marker for its EOI */
    unsigned char *out = realloc(stripes[0].file, total);
    if (!out)
        return gimg_fail(GIMG_E_NOMEM, "out of memory encoding JPEG");
    stripes[0].file = NULL;
    out[stripes[0].height_at] = (unsigned char)(height >> 8);
    out[stripes[0].height_at + 1] = (unsigned char)height;
    size_t at = stripes[0].len - 2;  /* over its EOI */
    for (int k = 1; k < n; k++) {
        const size_t data = stripes[k].len - 2 - stripes[k].scan;
        out[at++] = 0xFF;
        out[at++] = (unsigned char)(0xD0 + ((stripes[k].first_interval - 1) & 7));
        memcpy(out + at, stripes[k].file + stripes[k].scan, data);
        at += data;
    }
    out[at++] = 0xFF;
    out[at++] = 0xD9;
    *buf = out;
    *len = at;
    return GIMG_OK;
}

/* The threads this encode may use: OpenMP's count for the calling thread
 * (the batch sets each worker's), or 1 where a parallel region here would
 * get one thread anyway (inside an active one, nesting off). */
static int usable_threads(void)
{
    if (omp_get_active_level() >= omp_get_max_active_levels())
        return 1;
    const int n = omp_get_max_threads();
    return n > 1 ? n : 1;
}

/* The first failure of the stripes, reported from the caller's thread. */
static gimg_status stripes_status(const jpeg_stripe *stripes, int n)
{
    for (int k = 0; k < n; k++)
        if (stripes[k].status)
            return gimg_fail(stripes[k].status, "%s", stripes[k].why);
    return GIMG_OK;
}

static gimg_status encode_sequential(const gimg_image *im, const gimg_write_opts *o,
                                     unsigned char **buf, size_t *len)
{
    /* The plan: one stripe without restart markers; or, for an image of
     * JPEG_STRIPE_MIN_PIXELS or more, restart intervals of whole MCU rows,
     * at least JPEG_RESTART_MIN_MCUS MCUs each, shared out in stripes. */
    int restart_rows = 0, interval_height = im->height, intervals = 1;
    if ((uint64_t)im->width * (uint64_t)im->height >= JPEG_STRIPE_MIN_PIXELS) {
        int mcu_width, mcu_height;
        mcu_size(im, o, &mcu_width, &mcu_height);
        const int mcus_per_row = (im->width + mcu_width - 1) / mcu_width;
        restart_rows = (JPEG_RESTART_MIN_MCUS + mcus_per_row - 1) / mcus_per_row;
        interval_height = restart_rows * mcu_height;
        intervals = (im->height + interval_height - 1) / interval_height;
    }
    const int threads = restart_rows ? usable_threads() : 1;
    int n = 1;
    if (threads > 1)
        n = intervals < threads * JPEG_STRIPES_PER_THREAD ? intervals
                                                          : threads * JPEG_STRIPES_PER_THREAD;
    const int team = threads < n ? threads : n;
    jpeg_stripe *stripes = calloc((size_t)n, sizeof *stripes);
    if (!stripes)
        return gimg_fail(GIMG_E_NOMEM, "out of memory encoding JPEG");
    for (int k = 0; k < n; k++) {
        const int i0 = (int)((int64_t)intervals * k / n);
        const int i1 = (int)((int64_t)intervals * (k + 1) / n);
        const int end = i1 * interval_height < im->height ? i1 * interval_height : im->height;
        stripes[k].first_interval = i0;
        stripes[k].first_row = i0 * interval_height;
        stripes[k].rows = end - stripes[k].first_row;
    }

#pragma omp parallel for schedule(dynamic, 1) num_threads(team) if (team > 1)
    for (int k = 0; k < n; k++)
        count_stripe(&stripes[k], im, o, restart_rows);
    gimg_status st = stripes_status(stripes, n);

    huffman_counts *all = NULL;
    if (!st && !(all = calloc(1, sizeof *all)))
        st = gimg_fail(GIMG_E_NOMEM, "out of memory encoding JPEG");
    if (!st) {
        for (int k = 0; k < n; k++)
            for (int t = 0; t < NUM_HUFF_TBLS; t++)
                for (int i = 0; i < 257; i++) {
                    all->dc[t][i] += stripes[k].counts.dc[t][i];
                    all->ac[t][i] += stripes[k].counts.ac[t][i];
                }
#pragma omp parallel for schedule(dynamic, 1) num_threads(team) if (team > 1)
        for (int k = 0; k < n; k++)
            code_stripe(&stripes[k], im, o, restart_rows, all);
        st = stripes_status(stripes, n);
    }
    if (!st && n == 1) {
        /* Give back what the first guess left unused. */
        unsigned char *fit = realloc(stripes[0].file, stripes[0].len);
        *buf = fit ? fit : stripes[0].file;
        *len = stripes[0].len;
        stripes[0].file = NULL;
    } else if (!st) {
        st = splice(stripes, n, im->height, buf, len);
    }
    for (int k = 0; k < n; k++)
        free(stripes[k].file);
    free(stripes);
    free(all);
    return st;
}

static gimg_status encode(const gimg_image *im, const gimg_write_opts *o, unsigned char **buf,
                          size_t *len)
{
    *buf = NULL;
    *len = 0;
    if (im->sample != GIMG_U8 || (im->channels != 1 && im->channels != 3))
        return gimg_fail(GIMG_E_FORMAT,
                         "JPEG stores 8-bit gray or RGB, not %d channels of %d bytes",
                         im->channels, (int)im->sample);
    if (im->width > JPEG_MAX_DIMENSION || im->height > JPEG_MAX_DIMENSION)
        return gimg_fail(GIMG_E_LIMIT, "image %dx%d is over JPEG's limit of %d pixels a side",
                         im->width, im->height, (int)JPEG_MAX_DIMENSION);
    const uint64_t pixels = (uint64_t)im->width * (uint64_t)im->height;
    if (!o->jpeg_progressive && pixels >= JPEG_TWO_PASS_MIN_PIXELS)
        return encode_sequential(im, o, buf, len);
    return encode_libjpeg(im, o, buf, len);
}

/* ------------------------------------------- for the GPU codecs */

/* Why the GPU decoders should not take the file whose header c read (up
 * to its first scan, whose data starts at `at`), or NULL. */
static const char *gpu_refusal(j_decompress_ptr c, const unsigned char *buf, size_t len,
                               size_t at, int *subsampling)
{
    if (c->progressive_mode)
        return "progressive";
    if (c->arith_code)
        return "arithmetic-coded";
    if (c->data_precision != 8)
        return "not 8-bit";
    if (c->jpeg_color_space != JCS_GRAYSCALE && c->jpeg_color_space != JCS_YCbCr)
        return c->num_components == 4 ? "CMYK" : "RGB components";
    if (c->comps_in_scan != c->num_components)
        return "components in separate scans";
    const jpeg_component_info *k = c->comp_info;
    if (c->num_components == 1) {
        if (k[0].h_samp_factor != 1 || k[0].v_samp_factor != 1)
            return "gray with sampling factors";
        *subsampling = GIMG_NVJPEG_CSS_GRAY;
    } else {
        for (int i = 1; i < 3; i++)
            if (k[i].h_samp_factor != 1 || k[i].v_samp_factor != 1)
                return "chroma subsampling nvJPEG does not decode";
        const int h = k[0].h_samp_factor, v = k[0].v_samp_factor;
        if (h == 1 && v == 1)
            *subsampling = GIMG_NVJPEG_CSS_444;
        else if (h == 2 && v == 1)
            *subsampling = GIMG_NVJPEG_CSS_422;
        else if (h == 2 && v == 2)
            *subsampling = GIMG_NVJPEG_CSS_420;
        else if (h == 1 && v == 2)
            *subsampling = GIMG_NVJPEG_CSS_440;
        else
            return "chroma subsampling nvJPEG does not decode";
    }
    if (!gimg_jpeg_scan_walk(buf, len, at, NULL, NULL, NULL))
        return "not one whole scan up to the end of the image";
    return NULL;
}

gimg_status gimg_jpeg_read_header(const unsigned char *buf, size_t len, gimg_image *shell,
                                  gimg_jpeg_facts *facts)
{
    jpeg_reader r;
    memset(&r, 0, sizeof r);
    memset(shell, 0, sizeof *shell);
    memset(facts, 0, sizeof *facts);
    guard_init(&r.guard, 1);
    r.want_meta = 1;
    gimg_status st = decode_run(&r, buf, len, shell, facts);
    if (st) {
        memset(shell, 0, sizeof *shell);
    } else {
        shell->meta = r.meta;
        r.meta = NULL;
    }
    reader_free(&r);
    return st;
}

/* A growing output of marker bytes. */
typedef struct {
    unsigned char *p;
    size_t len, cap;
} marker_buf;

static unsigned char *mb_room(marker_buf *b, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = (b->len + n) * 2;
        unsigned char *q = realloc(b->p, cap);
        if (!q)
            return NULL;
        b->p = q;
        b->cap = cap;
    }
    unsigned char *at = b->p + b->len;
    b->len += n;
    return at;
}

/* One marker: FF, its code, the length, id, then payload (id_bytes + n +
 * extra within 65533; extra bytes, e.g. an ICC chunk's number and count,
 * come between id and payload). */
static int mb_marker(marker_buf *b, int code, const void *id, size_t id_bytes,
                     const unsigned char *extra, size_t extra_bytes, const unsigned char *p,
                     size_t n)
{
    const size_t body = id_bytes + extra_bytes + n;
    unsigned char *at = mb_room(b, 4 + body);
    if (!at)
        return 0;
    at[0] = 0xFF;
    at[1] = (unsigned char)code;
    at[2] = (unsigned char)((body + 2) >> 8);
    at[3] = (unsigned char)(body + 2);
    memcpy(at + 4, id, id_bytes);
    if (extra_bytes)
        memcpy(at + 4 + id_bytes, extra, extra_bytes);
    if (n)
        memcpy(at + 4 + id_bytes + extra_bytes, p, n);
    return 1;
}

gimg_status gimg_jpeg_headers(const unsigned char *bits, size_t len, const gimg_meta *meta,
                              unsigned char **head, size_t *head_len, size_t *rest_at)
{
    *head = NULL;
    *head_len = *rest_at = 0;
    if (!sniff(bits, len))
        return gimg_fail(GIMG_E_FORMAT, "the GPU's encoder gave no JPEG file");
    /* Past SOI and the APPn and COM segments the file starts with. */
    size_t rest = 2;
    while (rest <= len && len - rest >= 4 && bits[rest] == 0xFF &&
           ((bits[rest + 1] >= 0xE0 && bits[rest + 1] <= 0xEF) || bits[rest + 1] == 0xFE))
        rest += 2 + ((size_t)bits[rest + 2] << 8 | bits[rest + 3]);
    if (rest > len)
        return gimg_fail(GIMG_E_FORMAT, "the GPU's encoder gave a cut JPEG file");
    marker_buf b = {NULL, 0, 0};
    /* JFIF 1.01, as libjpeg writes it: its density from set_parameters'
     * rule, else 1:1 with no unit. */
    unsigned char jfif[9] = {1, 1, 0, 0, 1, 0, 1, 0, 0};
    if (meta && (meta->x_dpi > 0 || meta->y_dpi > 0)) {
        const double x = meta->x_dpi > 0 ? meta->x_dpi : meta->y_dpi,
                     y = meta->y_dpi > 0 ? meta->y_dpi : x;
        const unsigned xd = (unsigned)(x < 1 ? 1 : x >= 65535 ? 65535 : x + 0.5),
                       yd = (unsigned)(y < 1 ? 1 : y >= 65535 ? 65535 : y + 0.5);
        jfif[2] = 1;
        jfif[3] = (unsigned char)(xd >> 8);
        jfif[4] = (unsigned char)xd;
        jfif[5] = (unsigned char)(yd >> 8);
        jfif[6] = (unsigned char)yd;
    }
    static const unsigned char soi[2] = {0xFF, 0xD8};
    unsigned char *at = mb_room(&b, 2);
    int ok = at != NULL;
    if (ok)
        memcpy(at, soi, 2);
    ok = ok && mb_marker(&b, 0xE0, "JFIF", 5, NULL, 0, jfif, sizeof jfif);
    const unsigned unfit = unfit_meta(meta);
    if (ok && meta && meta->exif_bytes && !(unfit & GIMG_META_EXIF))
        ok = mb_marker(&b, 0xE1, exif_id, sizeof exif_id, NULL, 0, meta->exif, meta->exif_bytes);
    if (ok && meta && meta->xmp_bytes && !(unfit & GIMG_META_XMP))
        ok = mb_marker(&b, 0xE1, xmp_id, sizeof xmp_id, NULL, 0, meta->xmp, meta->xmp_bytes);
    if (ok && meta && meta->icc_bytes && !(unfit & GIMG_META_ICC)) {
        const size_t chunks = (meta->icc_bytes + JPEG_ICC_CHUNK_BYTES - 1) / JPEG_ICC_CHUNK_BYTES;
        for (size_t i = 0; ok && i < chunks; i++) {
            const size_t from = i * JPEG_ICC_CHUNK_BYTES,
                         n = meta->icc_bytes - from < JPEG_ICC_CHUNK_BYTES ? meta->icc_bytes - from
                                                                          : JPEG_ICC_CHUNK_BYTES;
            const unsigned char number[2] = {(unsigned char)(i + 1), (unsigned char)chunks};
            ok = mb_marker(&b, 0xE2, icc_id, sizeof icc_id, number, 2, meta->icc + from, n);
        }
    }
    if (!ok) {
        free(b.p);
        return gimg_fail(GIMG_E_NOMEM, "out of memory writing JPEG headers");
    }
    *head = b.p;
    *head_len = b.len;
    *rest_at = rest;
    return GIMG_OK;
}

gimg_status gimg_jpeg_with_headers(const unsigned char *bits, size_t len, const gimg_meta *meta,
                                   unsigned char **out, size_t *out_len)
{
    unsigned char *head;
    size_t head_len, rest;
    *out = NULL;
    *out_len = 0;
    gimg_status st = gimg_jpeg_headers(bits, len, meta, &head, &head_len, &rest);
    if (st)
        return st;
    unsigned char *file = realloc(head, head_len + (len - rest));
    if (!file) {
        free(head);
        return gimg_fail(GIMG_E_NOMEM, "out of memory writing JPEG headers");
    }
    memcpy(file + head_len, bits + rest, len - rest);
    *out = file;
    *out_len = head_len + (len - rest);
    return GIMG_OK;
}

const gimg_codec gimg_codec_jpeg = {
    .format = GIMG_FMT_JPEG,
    .name = "JPEG",
    .extensions = "jpg jpeg jpe",
    .multi_page = 0,
    .sniff = sniff,
    .probe = probe,
    .decode = decode,
    .layout = layout,
    .encode = encode,
    .meta = GIMG_META_ICC | GIMG_META_EXIF | GIMG_META_XMP | GIMG_META_RESOLUTION,
    .maxval_rule = GIMG_MAXVAL_FULL,
    .unfit_meta = unfit_meta,
    .rows_open = rows_open_jpeg,
    .rows_read = rows_read_jpeg,
    .rows_close = rows_close_jpeg,
};
