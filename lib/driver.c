/* driver.c — inputs, outputs, streams and the pipeline for every tool. */
#include "driver.h"
#include "band.h"
#include "batch.h"
#include "codec.h"
#include "ctx_internal.h"
#include "jpeg_internal.h"
#include "io_internal.h"

#include <ctype.h>
#include <errno.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    const gimg_driver *d;
    const gimg_cli_common *c;
    gimg_ctx *ctx;
    char **inputs;
    int n_inputs;
    /* The outputs of each input: a transform's (-o), or a report tool's
     * images (gimg_driver.images); o.spec NULL where there is none. */
    struct {
        gimg_driver_output o;
        const char *ext;    /* -f's extension for DIR/, or NULL */
        char **names;       /* per file input, named before any work */
    } out[GIMG_DRIVER_IMAGES];
    int stream;             /* reading a PNM stream from standard input */
    int stream_over;        /* the stream ended, or broke and cannot resync */
    int gpu_codecs;         /* JPEG goes to the GPU's codecs (gpu_jpeg.h) */
    int bands;              /* large images are read in bands (band.h) */
    char *as_folder[GIMG_DRIVER_IMAGES]; /* "NAME/" for an output spec NAME that is
                                            an existing folder */
    pthread_mutex_t lock;
    double ms[GIMG_T_COUNT];
    double megapixels;
    int n_failed;
    int stdout_errno;       /* why a report's write to standard output failed */
} job;

typedef struct {
    char name[96];      /* how messages name the input */
    const char *failed_on; /* the output whose writing failed, or NULL */
    gimg_image in;
    char *report;       /* report tools: the text, from open_memstream */
    size_t report_len;
    char *text_aside;   /* the text, when an image took standard output */
    size_t text_aside_len;
    /* The GPU codecs: the input JPEG, kept for the lane to decode on the
     * GPU (`in` is then its header: layout and metadata, no pixels), and
     * the output the GPU encoded (a bitstream without metadata). */
    unsigned char *file;
    size_t file_len;
    int file_mapped;    /* gimg_slurp's (else malloc'd: standard input) */
    unsigned char *jpeg_out;
    size_t jpeg_out_len;
    /* An image read in bands of band_rows rows (band.h) on the lane: the
     * file is kept (`file`), `in` is its layout, no pixels. */
    int band_rows;
    int page;
    gimg_driver_item info; /* what the callbacks know of it; its images are
                              the outputs (a transform's: image[0]); its
                              output paths are j->out[k].names' for file
                              inputs, the item's own (freed with it) for a
                              stream's */
} item;

static void add_ms(job *j, gimg_timer t, double ms)
{
    pthread_mutex_lock(&j->lock);
    j->ms[t] += ms;
    pthread_mutex_unlock(&j->lock);
}

/* 1 if an output spec is DIR/ (a folder, whether or not it exists yet). */
static int ends_with_slash(const char *spec)
{
    size_t n = strlen(spec);
    return n > 0 && spec[n - 1] == '/';
}

/* 1 if an output spec names one file whatever the input (a folder that
 * exists aside). */
static int names_one_file(const char *spec)
{
    return !strchr(spec, '%') && !ends_with_slash(spec);
}

/* 1 if a pattern's extension comes from the input (%e) or the number (%i):
 * only the names it makes can be judged. */
static int pattern_sets_extension(const char *spec)
{
    const char *slash = strrchr(spec, '/'), *base = slash ? slash + 1 : spec;
    const char *dot = strrchr(base, '.');
    return ends_with_slash(spec) || (dot && strchr(dot, '%'));
}

/* The path of output k of input i (0-based). One input and a plain name:
 * that name (an existing directory there is an error, as for any tool
 * writing one file); DIR/ (even for one input) or a pattern: the name
 * gimg_output_path gives. The images of a stream have no names of their
 * own: past the first they need a pattern that numbers them. */
static gimg_status output_of(const job *j, int k, const char *input, int i, char **out)
{
    const char *spec = j->out[k].o.spec;
    gimg_status st;
    if ((j->n_inputs + j->stream <= 1 && names_one_file(spec)) || !strcmp(spec, "-")) {
        *out = strdup(spec);
        st = *out ? GIMG_OK : gimg_fail(GIMG_E_NOMEM, "out of memory");
    } else if (j->stream && i > 0 && !gimg_pattern_numbers(spec)) {
        return gimg_fail(GIMG_E_USAGE, "standard input holds several images: name the "
                                       "outputs with %s PATTERN using %%i", j->out[k].o.option);
    } else {
        st = gimg_output_path(spec, input, i + 1, j->out[k].ext, out);
    }
    /* A name whose extension no codec writes ("out.gif", "out.xyz") is a
     * usage error now, not a silent PNM later. */
    if (!st && (st = gimg_check_output_name(*out, &j->c->write))) {
        free(*out);
        *out = NULL;
    }
    return st;
}

/* --------------------------------------------------------------- stages */

/* The rest of f, after is_stdin_stream() has looked at its first byte
 * through the FILE's buffer. *buf is malloc'd. Its first bytes must start
 * an image the codec table knows (gimg_check_image_head): /dev/zero or a
 * text is refused there, before the rest is read. */
static gimg_status read_rest(FILE *f, unsigned char **buf, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    const size_t limit = gimg_max_stream_bytes();
    unsigned char *b = malloc(cap);
    int sniffed = 0;
    for (size_t got = 1; b && got > 0;) {
        if (!sniffed && (n >= GIMG_SNIFF_BYTES || (n > 0 && feof(f)))) {
            gimg_status st = gimg_check_image_head(b, n, feof(f));
            if (st) {
                free(b);
                return st;
            }
            sniffed = 1;
        }
        if (n == cap && cap >= limit) {   /* an endless input, such as /dev/zero */
            free(b);
            return gimg_stream_over(limit);
        }
        if (n == cap) {
            unsigned char *bigger = cap > SIZE_MAX / 2 ? NULL : realloc(b, cap * 2);
            if (!bigger)
                break;
            b = bigger;
            cap *= 2;
        }
        got = fread(b + n, 1, cap - n, f);
        n += got;
    }
    if (!b || n == cap) {
        free(b);
        return gimg_fail(GIMG_E_NOMEM, "out of memory reading standard input");
    }
    if (ferror(f)) {
        free(b);
        return gimg_fail(GIMG_E_IO, "read error");
    }
    if (n == 0) {
        free(b);
        return gimg_fail(GIMG_E_FORMAT, "empty file");
    }
    *buf = b;
    *len = n;
    return GIMG_OK;
}

static void describe(const job *j, const char *name, const gimg_info *info, int page)
{
    static const char *const k_layout[] = {"", "gray", "gray+alpha", "RGB", "RGBA"};
    int ch = info->channels >= 1 && info->channels <= 4 ? info->channels : 0;
    char pages[64] = "";
    if (info->pages > 1)
        snprintf(pages, sizeof pages, " (image %d of %d%s)", page + 1, info->pages,
                 page == 0 ? ": name FILE[N] for another" : "");
    fprintf(stderr, "%s: %s: %s %dx%d %s, %d-bit%s%s\n", j->d->tool, name,
            gimg_format_name(info->format), info->width, info->height, k_layout[ch],
            8 * (int)info->sample, info->sample == GIMG_F32 ? " float" : "", pages);
}

static void release_file(item *it)
{
    if (it->file_mapped)
        gimg_slurp_free(it->file, it->file_len);
    else
        free(it->file);
    it->file = NULL;
    it->file_len = 0;
}

/* A JPEG the GPU's decoders take stays a bitstream in `it` (its header
 * read into *im); 1 if so. Others are counted for -v, with why. */
static int keep_for_gpu(job *j, item *it, unsigned char *buf, size_t len, int mapped,
                        gimg_image *im, gimg_status *st)
{
    gimg_jpeg_facts facts;
    if ((*st = gimg_jpeg_read_header(buf, len, im, &facts)))
        return 0; /* decoding would give the same error: let it */
    if (facts.gpu_refusal) {
        gimg_ctx_count_cpu_codec(j->ctx, facts.gpu_refusal);
        gimg_image_free(im);
        return 0;
    }
    it->file = buf;
    it->file_len = len;
    it->file_mapped = mapped;
    return 1;
}

/* What the job holds for an image of info's layout read whole: the image,
 * and each image the tool makes of its size beside it (a transform's
 * output, ghist's equalized image). */
static uint64_t whole_bytes(const job *j, const gimg_info *info)
{
    const uint64_t image = (uint64_t)info->width * (uint64_t)info->height *
                           (uint64_t)info->channels * (uint64_t)info->sample;
    uint64_t copies = 1 + (j->d->transform != NULL);
    for (int k = 0; k < GIMG_DRIVER_IMAGES; k++)
        copies += j->out[k].o.keeps_meta && j->out[k].o.spec;
    return image * copies;
}

/* The memory budget's check of an image about to be read whole (why: what
 * keeps it from bands, or NULL). */
static gimg_status check_whole(const job *j, const gimg_info *info, const char *why)
{
    /* The pixel limit first: its message is the decoder's. */
    gimg_status st = gimg_check_size(info->width, info->height, info->channels, info->sample,
                                     NULL, NULL);
    if (st)
        return st;
    const uint64_t need = whole_bytes(j, info);
    if (need <= gimg_max_memory())
        return GIMG_OK;
    char what[160];
    snprintf(what, sizeof what, "reading it whole%s%s", why ? " " : "", why ? why : "");
    return gimg_check_memory(need, what);
}

static gimg_status decode_file(job *j, const char *path, const char *name, gimg_image *im,
                               item *it)
{
    unsigned char *buf = NULL;
    size_t len = 0, file_len;
    int from_stdin = strcmp(path, "-") == 0;
    gimg_read_opts o = {0};
    gimg_status st;
    if (from_stdin) {
        st = read_rest(stdin, &buf, &len);
    } else {
        /* "scan.tif[2]": page 2 of scan.tif, unless a file is named so. */
        gimg_path_page(path, &file_len, &o.page);
        char *file = strndup(path, file_len);
        st = file ? gimg_slurp(file, &buf, &len) : gimg_fail(GIMG_E_NOMEM, "out of memory");
        free(file);
    }
    if (st)
        return st;
    /* Knowing the size from the header lets CUDA start up while we decode.
     * A header the probe rejects is left to the decoder to report. */
    gimg_info info;
    size_t bytes;
    if (gimg_probe_page(buf, len, &o, &info) == GIMG_OK) {
        /* A large image is kept as a file, for the lane to read in bands
         * (whether its codec and the tool's settings can is known there). */
        const int band_rows = j->bands && !from_stdin
                                  ? gimg_band_rows(&info, j->c->band_rows, whole_bytes(j, &info))
                                  : 0;
        if (j->c->verbose)
            describe(j, name, &info, o.page);
        /* Read whole: within the memory budget, or refused before any
         * pixel is decoded. */
        if (!band_rows &&
            (st = check_whole(j, &info, from_stdin    ? "(from standard input)"
                                        : j->bands      ? NULL
                                        : j->d->bands.begin
                                            ? "(for a GPU; --device cpu reads it in bands)"
                                            : "(this tool reads no image in bands)"))) {
            if (from_stdin)
                free(buf);
            else
                gimg_slurp_free(buf, len);
            return st;
        }
        if (band_rows) {
            im->width = info.width;
            im->height = info.height;
            im->channels = info.channels;
            im->sample = info.sample;
            it->file = buf;
            it->file_len = len;
            it->file_mapped = 1;
            it->band_rows = band_rows;
            it->page = o.page;
            return GIMG_OK;
        }
        if (gimg_check_size(info.width, info.height, info.channels, info.sample, NULL,
                            &bytes) == GIMG_OK) {
            pthread_mutex_lock(&j->lock);
            gimg_ctx_prepare(j->ctx, bytes);
            pthread_mutex_unlock(&j->lock);
        }
        if (j->gpu_codecs && info.format == GIMG_FMT_JPEG &&
            keep_for_gpu(j, it, buf, len, !from_stdin, im, &st))
            return GIMG_OK;
        st = GIMG_OK;
    }
    if (from_stdin) {
        st = gimg_decode_page(buf, len, &o, im);
        free(buf);
        return st;
    }
    /* An 8-bit PNM or PAM is used where the file's mapping has it. */
    int kept = 0;
    st = gimg_decode_in_place(buf, len, &o, im, &kept);
    if (!kept)
        gimg_slurp_free(buf, len);
    return st;
}

/* 1 if nothing but whitespace is left on f (which it then has read). Past
 * 64 KiB of whitespace the answer is 0: the next image's reader judges an
 * endless run of it. */
static int stream_ends(FILE *f)
{
    int ch;
    size_t spaces = 0;
    do
        ch = getc(f);
    while (ch != EOF && isspace(ch) && ++spaces < ((size_t)64 << 10));
    if (ch == EOF)
        return 1;
    ungetc(ch, f);
    return 0;
}

static gimg_status load(void *user, int i, void **state)
{
    job *j = user;
    *state = NULL;
    if (j->stream && j->stream_over)
        return GIMG_OK;
    item *it = calloc(1, sizeof *it);
    if (!it)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    *state = it;
    double t0 = gimg_now_ms();
    gimg_status st;
    it->info.index = i;
    it->info.name = it->name;
    if (j->stream) {
        snprintf(it->name, sizeof it->name, "standard input (image %d)", i + 1);
        st = gimg_read_pnm_stream(stdin, &it->in);
        if (st)
            j->stream_over = 1;
        else if (!it->in.data) {
            j->stream_over = 1;
            free(it);
            *state = NULL;
            return GIMG_OK;
        }
        /* A report names a stream of one image as it names any single
         * input: "standard input". Whether another image follows is known
         * from the next byte that is not whitespace (waiting for it delays
         * only the first image). */
        if (i == 0 && j->d->report && (st ? feof(stdin) : stream_ends(stdin))) {
            snprintf(it->name, sizeof it->name, "standard input");
            it->info.single = 1;
        }
        /* A name refused now would be refused for every image after. */
        for (int k = 0; k < GIMG_DRIVER_IMAGES && !st; k++) {
            char *path = NULL;
            if (j->out[k].o.spec && (st = output_of(j, k, "-", i, &path)))
                j->stream_over = 1;
            else if (path && strchr(j->out[k].o.spec, '%'))
                st = gimg_make_parent_folders(path);
            it->info.output[k] = path;
        }
    } else {
        const char *path = j->inputs[i];
        it->info.single = j->n_inputs == 1;
        snprintf(it->name, sizeof it->name, "%s", gimg_cli_name(path, 0));
        if (strlen(path) >= sizeof it->name)
            snprintf(it->name, sizeof it->name, "...%s", path + strlen(path) - 80);
        st = decode_file(j, path, it->name, &it->in, it);
        if (!st && it->in.meta && it->in.meta->warning[0] && !j->c->quiet)
            fprintf(stderr, "%s: %s: warning: %s\n", j->d->tool, it->name,
                    it->in.meta->warning);
        for (int k = 0; k < GIMG_DRIVER_IMAGES; k++)
            if (j->out[k].names)
                it->info.output[k] = j->out[k].names[i];
    }
    for (int k = 0; k < GIMG_DRIVER_IMAGES; k++)
        it->info.write[k] = j->c->write;
    add_ms(j, GIMG_T_DECODE, gimg_now_ms() - t0);
    return st;
}

/* The kept JPEG decoded by libjpeg-turbo after all (the GPU could not),
 * into it->in. */
static gimg_status decode_kept(item *it)
{
    gimg_image_free(&it->in);
    gimg_status st = gimg_decode_page(it->file, it->file_len, NULL, &it->in);
    release_file(it);
    return st;
}

/* A transform's image, with the GPU codecs where the job has them: its
 * input decoded on the lane's GPU (a kept JPEG), its output left there
 * and encoded by the GPU when it goes to a JPEG. Whatever the GPU's codecs
 * fail at (nvJPEG refusing a file, the GPU's memory), the CPU's do
 * instead: a job that the CPU codecs can do never fails for the GPU's. */
static gimg_status transform_item(job *j, item *it)
{
    const gimg_driver *d = j->d;
    gimg_image *out = &it->info.image[0];
    const gimg_write_opts *w = &it->info.write[0];
    const char *path = it->info.output[0];
    /* Samples below their type's full range are rescaled by write.c before
     * a JPEG encoder sees them (and the operation clamps them on the host
     * first): those go to the CPU's. */
    const int full_range = it->in.maxval == 0 || it->in.maxval == 255;
    const int gpu_encode = j->gpu_codecs && path && !w->jpeg_progressive && full_range &&
                           gimg_output_format(path, w, &it->in) == GIMG_FMT_JPEG;
    gimg_status st = GIMG_OK;
    int gpu_codecs_used = 0;
    if (it->file && gimg_ctx_gpu_decode_jpeg(j->ctx, it->file, it->file_len, &it->in)) {
        gimg_ctx_count_cpu_codec(j->ctx, gimg_last_error());
        st = decode_kept(it);
    }
    if (!st) {
        gpu_codecs_used = it->in.device != NULL;
        gimg_ctx_gpu_keep_outputs(j->ctx, gpu_encode ? w : NULL);
        st = d->transform(d->user, j->ctx, &it->in, out);
        if (!st && out->device) {
            gpu_codecs_used = 1;
            st = gimg_ctx_gpu_encode_jpeg(j->ctx, out, w, &it->jpeg_out, &it->jpeg_out_len);
        }
        gimg_ctx_gpu_item_done(j->ctx);
        out->device = NULL;
        it->in.device = NULL;
    }
    if (st && st != GIMG_E_USAGE && gpu_codecs_used) {
        /* Once more, on the CPU's codecs. */
        gimg_ctx_count_cpu_codec(j->ctx, gimg_last_error());
        gimg_image_free(out);
        free(it->jpeg_out);
        it->jpeg_out = NULL;
        st = it->file ? decode_kept(it) : GIMG_OK;
        if (!st)
            st = d->transform(d->user, j->ctx, &it->in, out);
    }
    if (it->file)
        release_file(it);
    return st;
}

/* The output rows a transform gave for an image read in bands: to the
 * band writer, or into the assembled output image (allocated with the
 * first rows). */
static gimg_status put_rows(item *it, gimg_band_writer *w, const gimg_image *header,
                            const gimg_image *rows, int y0)
{
    if (w)
        return gimg_band_writer_rows(w, rows);
    gimg_image *out = &it->info.image[0];
    gimg_status st;
    if (!out->data &&
        (st = gimg_image_alloc(out, header->width, header->height, rows->channels, rows->sample)))
        return st;
    out->maxval = rows->maxval;
    const size_t row_bytes = (size_t)rows->width * gimg_pixel_bytes(rows);
    for (int i = 0; i < rows->height; i++)
        memcpy(gimg_row(out, y0 + i), gimg_row(rows, i), row_bytes);
    return GIMG_OK;
}

/* The rows a spooled output has ready (after the last band: all that are
 * left) to the band writer; reading them back counts as encode time. */
static gimg_status spool_out(job *j, item *it, gimg_band_writer *w, void *state,
                             double *write_ms)
{
    const double t = gimg_now_ms();
    gimg_image rows;
    int y0;
    gimg_status st;
    while (!(st = j->d->bands.next(j->d->user, state, &rows, &y0)) && rows.height) {
        if ((st = gimg_band_writer_rows(w, &rows))) {
            it->failed_on = it->info.output[0];
            break;
        }
    }
    *write_ms += gimg_now_ms() - t;
    return st;
}

/* Bands of the driver's placed_band_bytes for an output placed (within
 * the memory budget's share), where that is more rows than *rows. */
static gimg_status place_in_larger_bands(const gimg_driver *d, const gimg_image *header,
                                         gimg_band_reader *r, int *rows)
{
    uint64_t bytes = gimg_max_memory() / GIMG_BAND_SHARE;
    if (bytes > d->bands.placed_band_bytes)
        bytes = d->bands.placed_band_bytes;
    const uint64_t row_bytes = (uint64_t)header->width * gimg_pixel_bytes(header);
    const uint64_t want = bytes / row_bytes;
    if (want <= (uint64_t)*rows)
        return GIMG_OK;
    *rows = want < (uint64_t)header->height ? (int)want : header->height;
    return gimg_band_set_rows(r, *rows);
}

/* The job of a kept file read in bands (band.h): a report's, or a
 * transform's with its output written as the rows come (band.h) or
 * assembled; or, where the file's codec or the tool's settings cannot,
 * the image decoded whole after all. Band reading counts as decode time,
 * the band writer's as encode time. */
static gimg_status run_bands(job *j, item *it, FILE *out)
{
    const gimg_driver *d = j->d;
    const gimg_read_opts o = {.page = it->page};
    gimg_band_reader *r = NULL;
    gimg_band_writer *w = NULL;
    gimg_image header, band, rows;
    void *state = NULL;
    double t0 = gimg_now_ms(), write_ms = 0;
    gimg_status st = gimg_band_open(it->file, it->file_len, it->file_mapped, &o, it->band_rows,
                                    &header, &r);
    const int warned = !st && r && header.meta && header.meta->warning[0];
    if (warned && !j->c->quiet)
        fprintf(stderr, "%s: %s: warning: %s\n", d->tool, it->name, header.meta->warning);
    /* A transform that places bands in its output sets the output's
     * metadata at the start: it needs it all then. Its output is spooled
     * where it can be written as its rows come, else held whole. */
    const int place_ok = !st && r && !(d->bands.place && gimg_band_meta_follows(r));
    gimg_image spooled = {0};   /* the spooled output's layout and metadata */
    if (place_ok && d->bands.spool_begin &&
        !(st = d->bands.spool_begin(d->user, j->ctx, &it->info, &header, it->band_rows,
                                    &spooled, &state)) &&
        state) {
        st = gimg_band_writer_open(it->info.output[0], &spooled, 1, &it->info.write[0], &w);
        it->info.placer = gimg_band_writer_places(w) ? w : NULL;
        if (it->info.placer && d->bands.placed_band_bytes && !j->c->band_rows)
            st = place_in_larger_bands(d, &header, r, &it->band_rows);
        if (!w) {
            d->bands.end(d->user, state, &it->info, NULL);
            state = NULL;
            gimg_meta_free(spooled.meta);
            spooled.meta = NULL;
        }
    }
    if (place_ok && !st && !w)
        st = d->bands.begin(d->user, j->ctx, &it->info, &header, &state);
    if (!st && !state) {
        const gimg_info layout = {.width = it->in.width, .height = it->in.height,
                                  .channels = it->in.channels, .sample = it->in.sample};
        st = check_whole(j, &layout, r ? "(the job needs every pixel at once)"
                                       : "(its format has no row decoder)");
    }
    if (!st && !state) {
        gimg_band_close(r);
        gimg_meta_free(header.meta);
        int kept = 0;
        gimg_image_free(&it->in);
        st = gimg_decode_in_place(it->file, it->file_len, &o, &it->in, &kept);
        if (kept) /* the image owns the mapping now */
            it->file = NULL;
        else
            release_file(it);
        if (!st && !warned && it->in.meta && it->in.meta->warning[0] && !j->c->quiet)
            fprintf(stderr, "%s: %s: warning: %s\n", d->tool, it->name, it->in.meta->warning);
        add_ms(j, GIMG_T_DECODE, gimg_now_ms() - t0);
        if (st)
            return st;
        return d->transform ? transform_item(j, it)
                            : d->report(d->user, j->ctx, &it->info, &it->in, out);
    }
    if (!st && d->transform && !d->bands.place)
        st = gimg_band_writer_open(it->info.output[0], &header, !gimg_band_meta_follows(r),
                                   &it->info.write[0], &w);
    double decode_ms = gimg_now_ms() - t0;
    int y0, out_y0, n_bands = 0;
    while (!st) {
        double t = gimg_now_ms();
        st = gimg_band_next(r, &band, &y0);
        decode_ms += gimg_now_ms() - t;
        if (st || band.height == 0)
            break;
        n_bands++;
        if (!d->transform) {
            st = d->bands.add(d->user, state, &band, y0);
            continue;
        }
        if (d->bands.place) { /* spooled (w): with the rows it makes ready */
            st = d->bands.place(d->user, state, &it->info, &band, y0);
            if (st && gimg_band_writer_failed(it->info.placer))
                it->failed_on = it->info.output[0];
            if (!st && w)
                st = spool_out(j, it, w, state, &write_ms);
            continue;
        }
        if ((st = d->bands.transform(d->user, state, &band, y0, &rows, &out_y0)) || !rows.height)
            continue;
        t = gimg_now_ms();
        if ((st = put_rows(it, w, &header, &rows, out_y0)) && w)
            it->failed_on = it->info.output[0];
        write_ms += gimg_now_ms() - t;
    }
    if (!st && d->bands.place && w) /* spooled: the rest */
        st = spool_out(j, it, w, state, &write_ms);
    if (!st && !header.meta) { /* a PNG's metadata comes with its last rows */
        header.meta = gimg_band_take_meta(r);
        if (header.meta && header.meta->warning[0] && !j->c->quiet)
            fprintf(stderr, "%s: %s: warning: %s\n", d->tool, it->name, header.meta->warning);
        if (header.meta && w) /* what the output written as it came cannot hold, for -v */
            gimg_io_note_dropped_meta(header.meta, &it->info.write[0],
                                      gimg_output_format(it->info.output[0],
                                                         &it->info.write[0], &header));
    }
    if (j->c->verbose)
        fprintf(stderr, "%s: %s: read in %d bands of %d rows%s\n", d->tool, it->name, n_bands,
                it->band_rows,
                !d->transform ? "" : it->info.placer ? ", written where they go"
                                  : w ? ", written as they came" : "");
    if (state) {
        gimg_status end = d->bands.end(d->user, state, &it->info, st || d->transform ? NULL : out);
        st = st ? st : end;
    }
    double t = gimg_now_ms();
    it->info.placer = NULL;
    gimg_status closed = gimg_band_writer_close(w, !st);
    write_ms += gimg_now_ms() - t;
    gimg_meta_free(spooled.meta);
    if (closed && !st) {
        st = closed;
        it->failed_on = it->info.output[0];
    }
    if (!st && d->transform && !w && !d->bands.place) /* assembled: the metadata goes on */
        it->info.image[0].meta = header.meta;
    else
        gimg_meta_free(header.meta);
    if (st)
        gimg_image_free(&it->info.image[0]);
    gimg_band_close(r);
    release_file(it);
    add_ms(j, GIMG_T_DECODE, decode_ms);
    add_ms(j, GIMG_T_ENCODE, write_ms);
    /* compute() counts the whole call as compute time: this much was not. */
    add_ms(j, GIMG_T_COMPUTE, -decode_ms - write_ms);
    return st;
}

static gimg_status compute(void *user, int lane, int i, void *state)
{
    job *j = user;
    item *it = state;
    double t0 = gimg_now_ms();
    gimg_status st;
    gimg_ctx_bind_lane(lane);
    if (j->d->transform) {
        st = it->band_rows ? run_bands(j, it, NULL) : transform_item(j, it);
        /* An operation that only changes pixels leaves the metadata to us:
         * it moves on to the output. */
        if (!st && !it->info.image[0].meta) {
            it->info.image[0].meta = it->in.meta;
            it->in.meta = NULL;
        }
    } else {
        FILE *f = open_memstream(&it->report, &it->report_len);
        if (!f)
            return gimg_fail(GIMG_E_NOMEM, "out of memory");
        st = it->band_rows ? run_bands(j, it, f)
                           : j->d->report(j->d->user, j->ctx, &it->info, &it->in, f);
        if (fclose(f) != 0 && !st)
            st = gimg_fail(GIMG_E_NOMEM, "out of memory");
        for (int k = 0; k < GIMG_DRIVER_IMAGES && !st; k++) {
            gimg_image *im = &it->info.image[k];
            if (j->out[k].o.keeps_meta && im->data && !im->meta) {
                im->meta = it->in.meta;
                it->in.meta = NULL;
            }
        }
    }
    pthread_mutex_lock(&j->lock);
    j->ms[GIMG_T_COMPUTE] += gimg_now_ms() - t0;
    j->megapixels += (double)it->in.width * it->in.height / 1e6;
    pthread_mutex_unlock(&j->lock);
    gimg_image_free(&it->in);
    return st;
}

/* A report tool's image for standard output: the report's bytes become
 * the image (the text is set aside: finish prints it on standard error
 * under -v, else nowhere), so that standard output holds one image file,
 * printed in order by finish. A second image for standard output follows
 * the first (a stream's images, each its own item, make a PNM stream). */
static gimg_status append_encoded(item *it, const gimg_image *im, const gimg_write_opts *o)
{
    if (!it->text_aside) {
        it->text_aside = it->report ? it->report : strdup("");
        it->text_aside_len = it->report ? it->report_len : 0;
        it->report = NULL;
        it->report_len = 0;
        if (!it->text_aside)
            return gimg_fail(GIMG_E_NOMEM, "out of memory");
    }
    unsigned char *buf = NULL;
    size_t len = 0;
    gimg_status st = gimg_encode(im, gimg_output_format("-", o, im), o, &buf, &len);
    char *longer = st ? NULL : realloc(it->report, it->report_len + len);
    if (longer) {
        memcpy(longer + it->report_len, buf, len);
        it->report = longer;
        it->report_len += len;
    } else if (!st) {
        st = gimg_fail(GIMG_E_NOMEM, "out of memory");
    }
    free(buf);
    return st;
}

static gimg_status store(void *user, int i, void *state)
{
    job *j = user;
    item *it = state;
    double t0 = gimg_now_ms();
    gimg_status st = GIMG_OK;
    for (int k = 0; k < GIMG_DRIVER_IMAGES && !st; k++) {
        gimg_image *im = &it->info.image[k];
        const char *path = it->info.output[k];
        const int gpu_encoded = k == 0 && it->jpeg_out;
        if ((!im->data && !gpu_encoded) || !path)
            continue;
        if (strcmp(path, "-") != 0)
            st = gpu_encoded ? gimg_write_jpeg_bits(path, it->jpeg_out, it->jpeg_out_len,
                                                    im->meta, &it->info.write[k])
                             : gimg_write(path, im, &it->info.write[k]);
        else if (j->d->transform)
            continue; /* a transform's standard output is written in order, by finish */
        else
            st = append_encoded(it, im, &it->info.write[k]);
        if (st)
            it->failed_on = path;
        gimg_image_free(im);
        if (gpu_encoded) {
            free(it->jpeg_out);
            it->jpeg_out = NULL;
        }
    }
    add_ms(j, GIMG_T_ENCODE, gimg_now_ms() - t0);
    return st;
}

/* A decoded input, and the images made of it (a transform's output,
 * ghist's equalized image), of about its size, until they are written. */
static size_t item_bytes(void *user, void *state)
{
    const job *j = user;
    const item *it = state;
    /* A JPEG kept for the GPU holds its file until a lane decodes it. */
    const size_t in = it->in.data ? it->in.stride_bytes * (size_t)it->in.height : it->file_len;
    int makes_images = 0;
    for (int k = 0; k < GIMG_DRIVER_IMAGES; k++)
        makes_images |= j->out[k].o.spec != NULL;
    return makes_images ? 2 * in : in;
}

/* The decoded images a GPU batch may hold while CUDA starts (about 0.4 s
 * on an H100 machine, the time of hundreds of decodes): 2 GiB, or an eighth
 * of the memory if that is less. */
static size_t gpu_bytes_in_flight(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t budget = (size_t)2 << 30;
    if (pages > 0 && page > 0 && (size_t)pages / 8 < budget / (size_t)page)
        budget = (size_t)pages / 8 * (size_t)page;
    return budget;
}

static void finish(void *user, int i, void *state, gimg_status st, const char *message)
{
    job *j = user;
    item *it = state;
    if (!st && it) {
        if (it->text_aside && j->c->verbose)
            fwrite(it->text_aside, 1, it->text_aside_len, stderr);
        if (it->report) {
            errno = 0;
            if (j->d->emit && !it->text_aside) {
                st = j->d->emit(j->d->user, &it->info, it->report, it->report_len, stdout);
                if (st)
                    message = gimg_last_error();
            } else {
                fwrite(it->report, 1, it->report_len, stdout);
            }
            /* Why writing failed is known only now (errno): said once, at the end. */
            if (ferror(stdout) && !j->stdout_errno)
                j->stdout_errno = errno ? errno : EIO;
        } else if (it->info.image[0].data || it->jpeg_out) {
            double t0 = gimg_now_ms();
            st = it->jpeg_out ? gimg_write_jpeg_bits("-", it->jpeg_out, it->jpeg_out_len,
                                                     it->info.image[0].meta, &it->info.write[0])
                              : gimg_write("-", &it->info.image[0], &it->info.write[0]);
            add_ms(j, GIMG_T_ENCODE, gimg_now_ms() - t0);
            if (st) {
                it->failed_on = "-";
                message = gimg_last_error();
            }
        }
    }
    if (!st && it && it->info.note) {
        fflush(stdout);
        if (!j->c->quiet)
            fprintf(stderr, "%s: %s: %s\n", j->d->tool, it->name, it->info.note);
    }
    if (st) {
        j->n_failed++;
        const char *name = it ? it->name : gimg_cli_name(j->stream ? "-" : j->inputs[i], 0);
        if (it && it->failed_on)
            name = gimg_cli_name(it->failed_on, 1);
        fflush(stdout); /* the reports before it come first */
        fprintf(stderr, "%s: %s: %s\n", j->d->tool, name, message);
    }
    if (it) {
        gimg_image_free(&it->in);
        if (it->file)
            release_file(it);
        free(it->jpeg_out);
        free(it->report);
        free(it->text_aside);
        free(it->info.note);
        for (int k = 0; k < GIMG_DRIVER_IMAGES; k++) {
            gimg_image_free(&it->info.image[k]);
            if (!j->out[k].names)
                free((char *)it->info.output[k]);
        }
        free(it);
    }
}

/* ------------------------------------------------------------- the job */

/* --device auto's estimate of a batch's JPEG for the choice of codecs:
 * the inputs named as JPEG, each of the first one's size (a folder of
 * photos is mostly of one camera, and reading every header first would
 * cost more than the choice saves), in megapixels; 0 for none. */
static double batch_jpeg_megapixels(const job *j)
{
    int n = 0, first = -1;
    for (int i = 0; i < j->n_inputs; i++)
        if (gimg_format_from_path(j->inputs[i]) == GIMG_FMT_JPEG && n++ == 0)
            first = i;
    if (n < 2)
        return 0;
    unsigned char *buf = NULL;
    size_t len = 0;
    gimg_info info;
    double mp = 0;
    if (gimg_slurp(j->inputs[first], &buf, &len) == GIMG_OK) {
        if (gimg_probe_page(buf, len, NULL, &info) == GIMG_OK && info.format == GIMG_FMT_JPEG)
            mp = (double)info.width * info.height / 1e6 * n;
        gimg_slurp_free(buf, len);
    }
    return mp;
}

/* Whether a JPEG may come into or go out of the job: an input named as
 * one, or of a name that says no format (standard input too), or an
 * output that may be one. --device gpu starts the GPU's codecs (nvJPEG,
 * and a GPU's sixteen lanes for them) only then: a job of PNM or PNG
 * files pays CUDA's start-up alone. */
static int batch_may_have_jpeg(const job *j)
{
    if (j->stream)
        return 1;
    for (int i = 0; i < j->n_inputs; i++) {
        const gimg_format f = gimg_format_from_path(j->inputs[i]);
        if (f == GIMG_FMT_JPEG || f == GIMG_FMT_UNKNOWN)
            return 1;
    }
    const gimg_format out = j->c->write.format;
    return out == GIMG_FMT_JPEG || (out == GIMG_FMT_UNKNOWN && j->out[0].o.spec &&
                                    gimg_format_from_path(j->out[0].o.spec) == GIMG_FMT_JPEG);
}

/* Inputs: the operands that are inputs, then the --files-from list. */
static gimg_status gather_inputs(job *j, char ***list_storage)
{
    const gimg_cli_common *c = j->c;
    char **list = NULL;
    int n_list = 0;
    if (c->files_from) {
        gimg_status st = gimg_read_file_list(c->files_from, c->null_separated, &list, &n_list);
        if (st)
            return gimg_fail(st, "--files-from %s: %s", gimg_cli_name(c->files_from, 0),
                             gimg_last_error());
    }
    *list_storage = list;
    j->inputs = malloc(((size_t)c->n_inputs + (size_t)n_list + 1) * sizeof *j->inputs);
    if (!j->inputs)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    for (int i = 0; i < c->n_inputs; i++)
        j->inputs[j->n_inputs++] = c->operands[i];
    for (int i = 0; i < n_list; i++)
        j->inputs[j->n_inputs++] = list[i];
    if (j->n_inputs == 0)
        return gimg_fail(GIMG_E_USAGE, "no input (the --files-from list is empty)");
    return GIMG_OK;
}

/* Standard input as a PNM stream: when it is the only input and its data
 * starts with 'P' (a PNM, PAM or PFM header). */
static int is_stdin_stream(const job *j)
{
    if (j->n_inputs != 1 || strcmp(j->inputs[0], "-") != 0)
        return 0;
    int ch = getc(stdin);
    if (ch == EOF)
        return 0;
    ungetc(ch, stdin);
    return ch == 'P';
}

/* An output spec NAME given to an option (-o, --plot) that is an existing
 * folder means NAME/: each output goes into it under its input's name,
 * whether one input or many. An OUTPUT operand names a file, always. */
static gimg_status existing_folder_as_dir(job *j, int k)
{
    const char *spec = j->out[k].o.spec;
    struct stat sb;
    if (!spec || (k == 0 && j->d->transform && j->c->output_is_operand) ||
        !strcmp(spec, "-") || !names_one_file(spec) || stat(spec, &sb) != 0 ||
        !S_ISDIR(sb.st_mode))
        return GIMG_OK;
    size_t n = strlen(spec);
    char *dir = malloc(n + 2);
    if (!dir)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    memcpy(dir, spec, n);
    memcpy(dir + n, "/", 2);
    j->as_folder[k] = dir;
    j->out[k].o.spec = dir;
    return GIMG_OK;
}

/* The paths of output k of the file inputs, checked before any work.
 * Several images to standard output are a stream. */
static gimg_status name_outputs(job *j, int k)
{
    const char *spec = j->out[k].o.spec;
    struct stat sb;
    /* Say what is missing rather than which two inputs collide. */
    if (j->n_inputs > 1 && strcmp(spec, "-") != 0 && names_one_file(spec) &&
        !(stat(spec, &sb) == 0 && S_ISDIR(sb.st_mode)))
        return gimg_fail(GIMG_E_USAGE, "%s: several inputs need a pattern (%%f) or a folder "
                                       "(DIR/) for their outputs", j->out[k].o.option);
    char **names = calloc((size_t)j->n_inputs, sizeof *names);
    if (!names)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    j->out[k].names = names;
    for (int i = 0; i < j->n_inputs; i++) {
        gimg_status st = output_of(j, k, j->inputs[i], i, &names[i]);
        if (st)
            return st;
    }
    return gimg_check_output_collisions(j->inputs, names, j->n_inputs);
}

/* The folders output k needs, made after every check and before any work:
 * DIR/, or those a pattern names ("out/%d/%f.png"), as mkdir -p would, so
 * that no input fails for want of one. A stream's are made per image. */
static gimg_status make_folders(const job *j, int k)
{
    const char *spec = j->out[k].o.spec;
    gimg_status st = gimg_make_output_folder(spec);
    for (int i = 0; i < j->n_inputs && !st && j->out[k].names && strchr(spec, '%'); i++)
        st = gimg_make_parent_folders(j->out[k].names[i]);
    return st;
}

static void report_rate(const job *j, int n_done, double wall_ms)
{
    fprintf(stderr, "%s: %d image%s in %.1f ms: %.1f images/s, %.1f megapixels/s\n",
            j->d->tool, n_done, n_done == 1 ? "" : "s", wall_ms, n_done / (wall_ms / 1e3),
            j->megapixels / (wall_ms / 1e3));
}

/* One warning a run for what the output formats could not hold. */
static void warn_losses(const char *tool, int quiet)
{
    gimg_format f;
    unsigned lost = gimg_take_losses(&f);
    char text[160];
    if (lost && !quiet)
        fprintf(stderr, "%s: warning: %s output: %s (-q silences this)\n", tool,
                gimg_codec_of(f)->name, gimg_loss_text(lost, text, sizeof text));
}

/* Under -v: the metadata the output formats could not hold. */
static void report_dropped_meta(const char *tool, int verbose)
{
    gimg_format f;
    unsigned dropped = gimg_take_dropped_meta(&f);
    char text[160];
    if (dropped && verbose)
        fprintf(stderr, "%s: %s output: %s dropped (the format cannot hold %s)\n", tool,
                gimg_codec_of(f)->name, gimg_meta_kind_text(dropped, text, sizeof text),
                dropped & (dropped - 1) ? "them" : "it");
}

int gimg_drive(const gimg_driver *d, const gimg_cli_common *c)
{
    job j = {.d = d, .c = c};
    char **list = NULL;
    int rc = 0;
    /* This thread's parallel regions too (prepare, finish, -v's report). */
    omp_set_num_threads(c->jobs > 0 ? c->jobs : 1);
    pthread_mutex_init(&j.lock, NULL);
    gimg_status st = gather_inputs(&j, &list);
    if (!st) {
        j.stream = is_stdin_stream(&j);
        for (int k = 0; k < GIMG_DRIVER_IMAGES; k++)
            j.out[k].o = d->images[k];
        if (d->transform) {
            j.out[0].o = (gimg_driver_output){.spec = c->output, .option = "-o"};
            j.out[0].ext = gimg_format_extension(c->write.format);
        }
        for (int k = 0; k < GIMG_DRIVER_IMAGES && !st; k++)
            st = existing_folder_as_dir(&j, k);
    }
    for (int k = 0; k < GIMG_DRIVER_IMAGES && !st && !j.stream; k++)
        if (j.out[k].o.spec)
            st = name_outputs(&j, k);
    if (!st && d->transform && isatty(STDOUT_FILENO) && !strcmp(c->output, "-"))
        st = gimg_fail(GIMG_E_USAGE, "refusing to write image data to a terminal (give OUTPUT, "
                                     "-o, or redirect)");
    for (int k = 0; k < GIMG_DRIVER_IMAGES && !st; k++)
        if (j.out[k].o.spec && j.stream && !pattern_sets_extension(j.out[k].o.spec))
            st = gimg_check_output_name(j.out[k].o.spec, &c->write); /* before reading */
    for (int k = 0; k < GIMG_DRIVER_IMAGES && !st; k++)
        if (j.out[k].o.spec)
            st = make_folders(&j, k);
    if (!st)
        st = gimg_ctx_open(&c->device, c->verbose, &j.ctx);
    if (!st)
        gimg_ctx_set_batch_images(j.ctx, j.stream ? 1 : j.n_inputs);
    /* Transforms only, so far: their operations reach an input on the GPU
     * through gimg_gpu_upload alone. */
    if (!st && d->transform && (c->device.kind != GIMG_DEV_GPU || batch_may_have_jpeg(&j)))
        j.gpu_codecs = gimg_ctx_want_gpu_codecs(
            j.ctx,
            c->device.kind == GIMG_DEV_AUTO && !c->device.cpu_codecs && !j.stream &&
                    gimg_built_with_cuda()
                ? batch_jpeg_megapixels(&j)
                : 0,
            c->jobs > 0 ? c->jobs : 1);
    /* Bands are computed on the CPU, unless the tool's go where ctx says
     * (on_gpu): a transform asked to use the GPU, or which may use it,
     * reads its images whole. */
    j.bands = d->bands.begin &&
              (d->bands.on_gpu ||
               (d->transform ? c->device.kind == GIMG_DEV_CPU || !gimg_built_with_cuda()
                             : c->device.kind != GIMG_DEV_GPU));
    if (!st && d->prepare)
        st = d->prepare(d->user, j.ctx, j.inputs, j.n_inputs, j.stream);
    if (st) {
        rc = gimg_cli_error(d->tool, NULL, st);
        gimg_ctx_close(j.ctx);
        goto out;
    }

    /* The CPU works best with one image per core once there are several;
     * the GPUs serve two lanes each, and workers decode and encode around
     * them. -j bounds the CPU threads of it all, OpenMP's included: one
     * image gets them all, several one each, and on the CPU no more
     * stages run at once than -j allows. */
    const int jobs = c->jobs > 0 ? c->jobs : 1;
    int n = j.stream ? -1 : j.n_inputs;
    int many = n != 1;
    int cpu_lanes = c->device.kind == GIMG_DEV_CPU || !gimg_built_with_cuda();
    int lanes = !many ? 1 : cpu_lanes ? jobs : gimg_ctx_lanes(j.ctx);
    gimg_pipeline_spec spec = {
        .n_items = n,
        .workers = many ? jobs : 1,
        .lanes = lanes,
        .lane_threads = jobs / lanes > 1 ? jobs / lanes : 1,
        .worker_threads = many ? 1 : jobs,
        .max_busy = cpu_lanes ? jobs : 0,
        .ordered_load = j.stream,
        /* While CUDA starts, the workers decode ahead, within a budget. */
        .max_in_flight = cpu_lanes ? 0 : 1024,
        .max_bytes_in_flight = cpu_lanes ? 0 : gpu_bytes_in_flight(),
        .item_bytes = item_bytes,
        .fail_fast = c->fail_fast,
        .progress = c->progress == 1 || (c->progress < 0 && many && isatty(STDERR_FILENO)),
        .load = load,
        .compute = compute,
        .store = store,
        .finish = finish,
        .user = &j,
    };
    double t0 = gimg_now_ms();
    int n_done = 0;
    st = gimg_pipeline_run(&spec, &n_done);
    if (st && !j.n_failed) /* the pipeline itself failed */
        fprintf(stderr, "%s: %s\n", d->tool, gimg_last_error());
    rc = st || j.n_failed ? 1 : 0; /* finish's own writes to stdout fail there */
    warn_losses(d->tool, c->quiet);
    report_dropped_meta(d->tool, c->verbose);
    if (c->verbose) {
        for (int t = 0; t < GIMG_T_COUNT; t++)
            gimg_ctx_add_time(j.ctx, (gimg_timer)t, j.ms[t]);
        gimg_ctx_report(j.ctx, stderr, d->tool);
        report_rate(&j, n_done, gimg_now_ms() - t0);
    }
    gimg_ctx_close(j.ctx);
out:
    for (int k = 0; k < GIMG_DRIVER_IMAGES; k++) {
        for (int i = 0; j.out[k].names && i < j.n_inputs; i++)
            free(j.out[k].names[i]);
        free(j.out[k].names);
    }
    free(j.inputs);
    for (int k = 0; k < GIMG_DRIVER_IMAGES; k++)
        free(j.as_folder[k]);
    gimg_file_list_free(list);
    pthread_mutex_destroy(&j.lock);
    if (j.stdout_errno) {
        fprintf(stderr, "%s: standard output: %s\n", d->tool, strerror(j.stdout_errno));
        fclose(stdout);
        rc = 1;
    } else if (rc == 0) {
        rc = gimg_cli_close_stdout(d->tool);
    }
    return rc;
}
