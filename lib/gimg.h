/*
 * gimg.h — the public interface of libgimg, the library behind the gimg tools.
 *
 * Conventions
 *  - Every function that can fail returns a gimg_status. On failure it has
 *    recorded one message (gimg_last_error(), per thread) at the place where
 *    the error was found; callers pass the status on without adding text.
 *    Only the programs in cmd/ print messages and exit.
 *  - Ownership is stated per function. Images filled by the library own their
 *    pixel buffer; gimg_image_free() releases it. Passing a zeroed image to
 *    gimg_image_free() is harmless.
 *  - Pixels are interleaved (gray, gray+alpha, RGB, RGBA), rows top to
 *    bottom, samples in host byte order, rows stride_bytes apart.
 */
#ifndef GIMG_H
#define GIMG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GIMG_VERSION "0.1.0"

/* ------------------------------------------------------------------ errors */

typedef enum {
    GIMG_OK = 0,
    GIMG_E_USAGE,   /* bad option or argument: the tools exit 2 */
    GIMG_E_IO,      /* a read or write failed */
    GIMG_E_FORMAT,  /* malformed, truncated or unsupported file */
    GIMG_E_LIMIT,   /* over a documented size limit */
    GIMG_E_NOMEM,   /* an allocation failed */
    GIMG_E_DEVICE   /* no usable GPU, or a CUDA call failed */
} gimg_status;

/* Records a printf-style message for the calling thread and returns st. */
gimg_status gimg_fail(gimg_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The message recorded by the last failure on this thread ("" if none). */
const char *gimg_last_error(void);
/* Exit status a tool should use for st: 0 ok, 2 usage, 1 otherwise. */
int gimg_exit_code(gimg_status st);

/* ------------------------------------------------------------------ images */

typedef enum { GIMG_U8 = 1, GIMG_U16 = 2, GIMG_F32 = 4 } gimg_sample; /* value = bytes */

typedef struct gimg_meta gimg_meta; /* the image's metadata: see "metadata" below */

typedef struct {
    int width, height;      /* >= 1 */
    int channels;           /* 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA */
    gimg_sample sample;
    size_t stride_bytes;    /* distance between row starts */
    unsigned char *data;    /* owned by the image (see mapping) */
    /* The samples' range in the file's own units: 0 is the sample type's
     * full range (255, 65535; 0..1 for float); otherwise 1..65535 for
     * integer samples, which then lie in 0..maxval (a PNM/PAM's maxval,
     * 2^b - 1 for a PNG's sBIT or a TIFF's BitsPerSample of b bits).
     * Statistics and histograms report in these units; operations keep
     * the samples in 0..maxval and pass it on. */
    unsigned maxval;
    /* NULL: none. Owned by the image (gimg_image_free frees it); an
     * operation that only moves or changes pixels passes it on. */
    gimg_meta *meta;
    /* Internal to libgimg, NULL in every image a caller makes: where the
     * pixels are while data is NULL, on a GPU, where the GPU codecs
     * decoded them or an operation left them for the GPU's encoder
     * (lib/gpu_jpeg.h). */
    const struct gimg_dimage *device;
    /* Internal to libgimg, NULL in every image a caller makes: the file
     * mapping (gimg_slurp's) that data points into, for an input read in
     * place (an 8-bit PNM or PAM: lib/read.c's gimg_decode_in_place);
     * gimg_image_free unmaps it instead of freeing data. */
    unsigned char *mapping;
    size_t mapping_bytes;
} gimg_image;

/* Size limits, checked from a file's header before any large allocation.
 * The pixels an image may have: by default no limit of their own, the
 * side's squared (an image is bounded by its sides and by the memory its
 * job may hold: gimg_max_memory; images too large to hold are read in
 * bands). --max-pixels sets one. */
#define GIMG_MAX_DIMENSION (1 << 24)                  /* per side, as stb_image */
#define GIMG_DEFAULT_MAX_PIXELS ((uint64_t)GIMG_MAX_DIMENSION * (uint64_t)GIMG_MAX_DIMENSION)
/* Process-wide pixel-count ceiling (the tools' --max-pixels). */
void gimg_set_max_pixels(uint64_t max_pixels);
uint64_t gimg_max_pixels(void);

/* Process-wide memory budget in bytes (the tools' --max-memory). A tool
 * plans each image's job from its header before reading its pixels: an
 * image whose whole-image job would need more is read in bands small
 * enough where its format and the job allow, and refused otherwise; and
 * every buffer that grows with an image is checked against the budget
 * before it is allocated (gimg_image_alloc). Default
 * (gimg_default_max_memory): half the machine's memory, or of the
 * process's cgroup limit or address space limit when that is lower. */
void gimg_set_max_memory(uint64_t bytes);
uint64_t gimg_max_memory(void);
uint64_t gimg_default_max_memory(void);
/* GIMG_E_LIMIT when bytes are over the budget, the message "WHAT needs N,
 * over the memory budget of M (raise it with --max-memory)". */
gimg_status gimg_check_memory(uint64_t bytes, const char *what);
/* bytes for people: "3.2 GiB", "768 KiB", "12 bytes". */
void gimg_format_bytes(uint64_t bytes, char *buf, size_t size);

/* Checks w x h x channels x sample against the limits and for overflow;
 * stores the tight row size and total size. */
gimg_status gimg_check_size(int64_t width, int64_t height, int channels,
                            gimg_sample sample, size_t *row_bytes, size_t *total_bytes);
/* Allocates a tightly packed image (stride = width * pixel bytes); data is
 * uninitialised. The caller frees it with gimg_image_free(). */
gimg_status gimg_image_alloc(gimg_image *im, int width, int height, int channels,
                             gimg_sample sample);
/* Frees the pixels and the metadata, and zeroes *im. */
void gimg_image_free(gimg_image *im);
/* The largest sample value of im: maxval, else 255, 65535 (1 for float). */
static inline unsigned gimg_image_max(const gimg_image *im)
{
    return im->maxval ? im->maxval : im->sample == GIMG_U8 ? 255u
                                   : im->sample == GIMG_U16 ? 65535u : 1u;
}
static inline size_t gimg_pixel_bytes(const gimg_image *im)
{
    return (size_t)im->channels * (size_t)im->sample;
}
static inline unsigned char *gimg_row(const gimg_image *im, int y)
{
    return im->data + (size_t)y * im->stride_bytes;
}

/* ---------------------------------------------------------------- metadata */

/*
 * What a file says about its image besides the pixels: kept from input to
 * output by every tool (gimg(7), METADATA). The decoders fill what their
 * format holds; the encoders write what theirs can hold (gimg_codec.meta)
 * and drop the rest (gimg_take_dropped_meta). Nothing is parsed beyond what
 * the tools need: the EXIF orientation and pixel dimensions.
 *
 * Ownership: a gimg_meta and every buffer in it are malloc'd and owned by
 * the gimg_meta; gimg_meta_free() releases all of it.
 */
typedef struct {
    char *keyword;            /* NUL-terminated, 1..79 bytes (Latin-1) */
    char *text;               /* NUL-terminated: UTF-8 for iTXt, Latin-1 otherwise */
    char *language;           /* iTXt's language tag, else NULL */
    char *translated_keyword; /* iTXt's, UTF-8, else NULL */
    int international;        /* 1: iTXt; 0: tEXt or zTXt */
    int compressed;           /* 1: zTXt, or a compressed iTXt */
} gimg_text;

struct gimg_meta {
    unsigned char *icc;   size_t icc_bytes;   /* the ICC profile, whole */
    unsigned char *exif;  size_t exif_bytes;  /* the TIFF-structured EXIF block ("II*\0" or
                                                 "MM\0*" onwards: no JPEG "Exif\0\0") */
    unsigned char *xmp;   size_t xmp_bytes;   /* the XMP packet */
    int orientation;      /* EXIF/TIFF orientation 1..8; 0: not recorded. Kept equal to
                             the EXIF block's tag (gimg_meta_set_orientation) */
    double x_dpi, y_dpi;  /* resolution in pixels per inch; 0: not recorded */
    gimg_text *texts;     /* PNG's text chunks, in file order */
    int n_texts;
    /* What the decoder dropped as malformed, for the tools' warning ("EXIF
     * dropped: its IFD0 points past the block"); "" for nothing. */
    char warning[128];
};

/* Kinds of metadata, as bits: what a format holds (gimg_codec.meta) and
 * what an output dropped. */
enum {
    GIMG_META_ICC = 1 << 0,
    GIMG_META_EXIF = 1 << 1,
    GIMG_META_XMP = 1 << 2,
    GIMG_META_RESOLUTION = 1 << 3,
    GIMG_META_TEXT = 1 << 4,
    GIMG_META_ORIENTATION = 1 << 5   /* a format's own orientation field (TIFF's tag) */
};

/* A new, empty gimg_meta (calloc'd); NULL when out of memory. */
gimg_meta *gimg_meta_new(void);
void gimg_meta_free(gimg_meta *m);
/* A deep copy of m into *out (NULL for m NULL). */
gimg_status gimg_meta_copy(const gimg_meta *m, gimg_meta **out);
/* The GIMG_META_* kinds m holds (0 for NULL or empty). */
unsigned gimg_meta_kinds(const gimg_meta *m);
/* Sets the orientation (1..8) in m and in its EXIF block's IFD0 tag, when
 * the block has one. */
void gimg_meta_set_orientation(gimg_meta *m, int orientation);
/* Records the image's new size in the EXIF block's PixelXDimension and
 * PixelYDimension, where it has them (gtranspose swaps them). */
void gimg_meta_set_dimensions(gimg_meta *m, int width, int height);
/* Words for kinds ("ICC profile, EXIF"), into buf; returns buf. */
const char *gimg_meta_kind_text(unsigned kinds, char *buf, size_t size);

/* ----------------------------------------------------------------- formats */

typedef enum {
    GIMG_FMT_UNKNOWN = 0,
    GIMG_FMT_PNG, GIMG_FMT_JPEG, GIMG_FMT_BMP, GIMG_FMT_TGA, GIMG_FMT_HDR,
    GIMG_FMT_PNM,   /* P5/P6 (P1-P4 read too); gray and RGB, maxval 1..65535 */
    GIMG_FMT_PAM,   /* P7, 1-4 channels */
    GIMG_FMT_PFM,   /* Pf/PF, 32-bit float */
    GIMG_FMT_TIFF, GIMG_FMT_WEBP,
    GIMG_FMT_GIF    /* read only; its frames are pages */
} gimg_format;

/* "png", "jpg", "jpeg", "ppm", "pgm", "pnm", "pam", "pfm", "hdr", "tif",
 * "webp", ... (any extension of the codec table, lib/codec.h); UNKNOWN if none. */
gimg_format gimg_format_from_name(const char *name);
/* From a path's extension, case-insensitive; UNKNOWN if none or unknown. */
gimg_format gimg_format_from_path(const char *path);
const char *gimg_format_name(gimg_format f);
/* 1 if libgimg can write format f (GIF, for one, is only read). */
int gimg_format_writable(gimg_format f);
/* From the first bytes of a file; UNKNOWN if not recognised. */
gimg_format gimg_format_sniff(const unsigned char *buf, size_t len);

/* ----------------------------------------------------------------- reading */

/* Reads a whole file ("-" = stdin) into memory: a read-only mapping of a
 * regular file, or memory filled from a pipe. A stream (pipe, device)
 * whose first bytes start no image format gimg knows is refused before the
 * rest is read ("unrecognised image format"). The caller releases it with
 * gimg_slurp_free(buf, len). */
gimg_status gimg_slurp(const char *path, unsigned char **buf, size_t *len);
void gimg_slurp_free(unsigned char *buf, size_t len);

/* Header facts, read without decoding the pixels (of the page asked for). */
typedef struct {
    gimg_format format;
    int width, height, channels;
    gimg_sample sample;
    int pages;              /* images in the file (TIFF pages, GIF and WebP
                               frames); 1 for the single-image formats */
} gimg_info;

/* Which image of a file to read: page 0 (the first) unless asked. Only
 * multi-page formats (TIFF, GIF, animated WebP) have pages past 0. */
typedef struct {
    int page;
    /* Internal to libgimg, 0 from callers: buf is a private file mapping
     * (gimg_slurp's) whose pages a decoder may let go once read, for they
     * come back from the file if touched again (images read in bands). */
    int drop_pages;
} gimg_read_opts;

/* With o NULL, the first page. */
gimg_status gimg_probe_memory(const unsigned char *buf, size_t len, gimg_info *info);
gimg_status gimg_probe_page(const unsigned char *buf, size_t len, const gimg_read_opts *o,
                            gimg_info *info);

/* Decodes one image from memory. Size limits are checked from the header
 * first. On success *out owns its pixels; on failure *out is zeroed. */
gimg_status gimg_decode_memory(const unsigned char *buf, size_t len, gimg_image *out);
gimg_status gimg_decode_page(const unsigned char *buf, size_t len, const gimg_read_opts *o,
                             gimg_image *out);
/* gimg_slurp + gimg_decode_page. A path that names no file but ends in
 * "[N]" (N >= 0) reads page N of the file before it, as ImageMagick reads
 * "scan.tif[2]". */
gimg_status gimg_read(const char *path, gimg_image *out);
/* How a path names its page: *page_out gets N and *file_len the length of
 * the file's name when path ends in "[N]" and path itself is not a file;
 * otherwise 0 and strlen(path). */
void gimg_path_page(const char *path, size_t *file_len, int *page_out);

/* Reads the next image of a PNM/PAM/PFM stream (netpbm's concatenated
 * images). Returns GIMG_OK with *out filled, or GIMG_OK with out->data ==
 * NULL at a clean end of stream. */
gimg_status gimg_read_pnm_stream(FILE *f, gimg_image *out);

/* ----------------------------------------------------------------- writing */

#define GIMG_DEFAULT_QUALITY 90
#define GIMG_DEFAULT_PNG_LEVEL 6

/* JPEG chroma subsampling. AUTO, the default, is 4:4:4 at quality 90 and
 * above and 4:2:0 below, as libvips and ImageMagick choose. */
typedef enum {
    GIMG_SUBSAMPLE_AUTO = 0, GIMG_SUBSAMPLE_444, GIMG_SUBSAMPLE_422, GIMG_SUBSAMPLE_420
} gimg_subsampling;

/* TIFF compression; Deflate (with a horizontal predictor) is the default. */
typedef enum { GIMG_TIFF_DEFLATE = 0, GIMG_TIFF_NONE, GIMG_TIFF_LZW } gimg_tiff_compression;

typedef struct {
    gimg_format format;  /* UNKNOWN: chosen by gimg_output_format() */
    int quality;         /* 1..100: JPEG, and WebP unless lossless */
    int png_level;       /* 0..12 (libdeflate levels; 0 = stored) */
    gimg_subsampling jpeg_subsampling;
    int jpeg_progressive;            /* 1: a progressive JPEG */
    gimg_tiff_compression tiff_compression;
    int webp_lossless;               /* 1: lossless WebP */
    int strip;                       /* 1: write no metadata (--strip) */
} gimg_write_opts;

void gimg_write_opts_init(gimg_write_opts *o);
/* The format an output gets: o->format, else the path's extension, else
 * (stdout, or no known extension) PNM for 1 and 3 channels, PAM for 2 and 4. */
gimg_format gimg_output_format(const char *path, const gimg_write_opts *o,
                               const gimg_image *im);

/* Usage error (GIMG_E_USAGE) if an output named path, with these options,
 * would get no format that libgimg writes: -f names a read-only format, or
 * the name's extension is unknown or read-only ("out.gif"). A name
 * without an extension, and "-", are PNM/PAM. */
gimg_status gimg_check_output_name(const char *path, const gimg_write_opts *o);

/* Encodes into a malloc'd buffer the caller frees. Converts where the format
 * needs it (e.g. 16-bit to 8-bit for JPEG, float to 8/16-bit for PNG and
 * float to RGB for HDR), as documented in gimg(7); what such a conversion
 * loses is recorded for gimg_take_losses(). */
gimg_status gimg_encode(const gimg_image *im, gimg_format f, const gimg_write_opts *o,
                        unsigned char **buf, size_t *len);

/* What encoding had to give up since the last call, process-wide (bits of
 * GIMG_LOSS_*), and the format of the first such loss; clears both. The
 * tools print one warning a run from it (unless -q). */
enum {
    GIMG_LOSS_ALPHA = 1 << 0,   /* the alpha channel dropped */
    GIMG_LOSS_DEPTH = 1 << 1,   /* 16-bit samples narrowed to 8-bit */
    GIMG_LOSS_FLOAT = 1 << 2    /* float samples clamped and quantised to integers */
};
unsigned gimg_take_losses(gimg_format *first_format);
/* The losses as words for a message, into buf: "alpha dropped, 16-bit
 * samples narrowed to 8-bit"; "" for none. Returns buf. */
const char *gimg_loss_text(unsigned losses, char *buf, size_t size);

/* The metadata kinds (GIMG_META_*) that encoding dropped since the last
 * call, process-wide, because the output format could not hold them, and
 * the first such format; clears both. The tools say so under -v. */
unsigned gimg_take_dropped_meta(gimg_format *first_format);

/* Writes buf to path atomically: a temporary file beside the target, renamed
 * over it only after a complete, checked write and close; nothing appears on
 * failure or on SIGINT/SIGTERM/SIGHUP/SIGPIPE. A replaced file keeps its
 * mode and, as root, its owner and group (it is a new file: hard links are
 * split). "-" writes to stdout (a failed write is an error). */
gimg_status gimg_write_file(const char *path, const unsigned char *buf, size_t len);
/* gimg_output_format + gimg_encode + gimg_write_file. */
gimg_status gimg_write(const char *path, const gimg_image *im, const gimg_write_opts *o);

/* Installs SIGINT/SIGTERM/SIGHUP/SIGPIPE handlers that remove pending
 * temporary files, and ignores SIGXFSZ so that a write past `ulimit -f`
 * fails with EFBIG. */
void gimg_install_signal_cleanup(void);

/* ---------------------------------------------------------------- devices */

typedef enum { GIMG_DEV_AUTO = 0, GIMG_DEV_CPU, GIMG_DEV_GPU } gimg_device_kind;

/* GPU indices run from 0 to GIMG_MAX_GPUS - 1. */
#define GIMG_MAX_GPUS 64

typedef struct {
    gimg_device_kind kind;
    int all_gpus;           /* gpu:all: every GPU the machine has */
    int n_gpus;             /* otherwise the GPUs to use, in gpus[] (auto and gpu: GPU 0) */
    int gpus[GIMG_MAX_GPUS];
    /* --codecs cpu: JPEG is decoded and encoded by libjpeg-turbo on every
     * device; 0 (auto): on a GPU device by the GPU's codecs where they
     * work (lib/gpu_jpeg.h). */
    int cpu_codecs;
    /* --no-server (or GIMG_SERVER=off): never send work to gimgd (gimgd(1));
     * the server's own context has it too. */
    int no_server;
} gimg_device;

/* "auto", "cpu", "gpu" (GPU 0), "gpu:N", "gpu:N,M,..." (a batch spread over
 * those GPUs; each at most once) or "gpu:all". */
gimg_status gimg_parse_device(const char *s, gimg_device *d);
/* 1 if this build has CUDA support. */
int gimg_built_with_cuda(void);

/* One per process: which backend runs, the GPUs' lanes (a stream each, with
 * reusable device and pinned buffers: two per GPU, so that one lane's
 * copies overlap the other's kernels; sixteen with the GPU's JPEG codecs),
 * timings for -v. Created by
 * gimg_ctx_open(), released by gimg_ctx_close(). */
typedef struct gimg_ctx gimg_ctx;

gimg_status gimg_ctx_open(const gimg_device *dev, int verbose, gimg_ctx **out);
void gimg_ctx_close(gimg_ctx *ctx);

/* Called with the input's size as soon as it is known (before decoding):
 * starts CUDA's initialisation on a background thread when the GPU will be
 * used (--device gpu), so that it overlaps the decode; --device auto's
 * operations start it when they choose the GPU. work_bytes is the image's
 * size in bytes. */
void gimg_ctx_prepare(gimg_ctx *ctx, size_t work_bytes);

/* How many lanes a batch may compute on at once: two per GPU of the device
 * list, sixteen with the GPU codecs (gpu:all asks CUDA how many GPUs there
 * are, waiting for that much of its start-up), 1 for the CPU. */
int gimg_ctx_lanes(gimg_ctx *ctx);
/* Binds the calling thread to lane `lane` (0 to gimg_ctx_lanes() - 1): the
 * operations it then runs use that lane's GPU and stream, whatever the
 * context (the lane is the thread's, not a context's). A thread never bound
 * uses lane 0. */
void gimg_ctx_bind_lane(int lane);

/* Timers reported by -v (milliseconds, accumulated). */
typedef enum { GIMG_T_DECODE, GIMG_T_COMPUTE, GIMG_T_ENCODE, GIMG_T_COUNT } gimg_timer;
double gimg_now_ms(void);
void gimg_ctx_add_time(gimg_ctx *ctx, gimg_timer t, double ms);
/* Prints the backend and the timers to f (for -v). */
void gimg_ctx_report(const gimg_ctx *ctx, FILE *f, const char *tool);

/* ------------------------------------------------------------ channels */

/* The names the tools print and accept for channel c of an image with
 * `channels` channels: gray (1-2 channels), red, green, blue (3-4), alpha
 * (the last of 2 and 4). NULL when c is out of range. */
const char *gimg_channel_name(int channels, int c);

/* Each operation has a header of its own: gimg_orient.h (gtranspose), ... */

#ifdef __cplusplus
}
#endif
#endif /* GIMG_H */
