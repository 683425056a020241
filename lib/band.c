/* band.c — images read band by band through their codecs' row decoders
 * (band.h). */
#include "band.h"
#include "codec.h"
#include "io_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ------------------------------------------------------------ a worker */

/* A thread that does one job at a time for its owner, the reader's
 * read-ahead or the writer's write-behind: the owner hands a job over
 * (worker_give) and later waits for it (worker_wait), touching what the
 * job touches only in between. */
typedef struct {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    int running;           /* the thread started */
    int pending, stop;
    void (*job)(void *arg);
    void *arg;
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->pending && !w->stop)
            pthread_cond_wait(&w->cv, &w->lock);
        if (!w->pending)
            break;
        pthread_mutex_unlock(&w->lock);
        w->job(w->arg);
        pthread_mutex_lock(&w->lock);
        w->pending = 0;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

/* 1 when the thread started (else the owner does its jobs itself). */
static int worker_start(worker *w, void (*job)(void *), void *arg)
{
    w->job = job;
    w->arg = arg;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->running = pthread_create(&w->thread, NULL, worker_main, w) == 0;
    if (!w->running) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->lock);
    }
    return w->running;
}

static void worker_wait(worker *w)
{
    if (!w->running)
        return;
    pthread_mutex_lock(&w->lock);
    while (w->pending)
        pthread_cond_wait(&w->cv, &w->lock);
    pthread_mutex_unlock(&w->lock);
}

/* The next job (the last one done: worker_wait first). */
static void worker_give(worker *w)
{
    pthread_mutex_lock(&w->lock);
    w->pending = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->lock);
}

/* Waits for the job in hand, and ends the thread. */
static void worker_stop(worker *w)
{
    if (!w->running)
        return;
    worker_wait(w);
    pthread_mutex_lock(&w->lock);
    w->stop = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->lock);
    w->running = 0;
}

/* ------------------------------------------------------------- reading */

/*
 * Read-ahead: while the caller works on band k, a thread of the reader's
 * decodes band k + 1 into the other of two buffers, so that decoding (a
 * PNG's inflate, a JPEG's IDCT: one thread each) overlaps the work. The
 * codec's state is used by one thread at a time (the lock hands it over);
 * a failure's message, recorded on the reader's thread, is recorded again
 * on the caller's.
 */
typedef struct {
    gimg_image band;         /* what rows_read gave (its data: buffer's, or a view) */
    gimg_status st;
    char why[512];
} decoded;

struct gimg_band_reader {
    const gimg_codec *codec;
    void *rows;              /* the codec's row decoder */
    gimg_image buffer[2];    /* bands' rows, when the codec does not view them */
    gimg_image layout;       /* the image's layout and maxval (no data) */
    int band_rows, next_row;
    int decoded_rows;        /* rows handed to the codec so far */
    /* The read-ahead: `ahead` is the band it decodes or decoded (into
     * buffer[ahead_slot]). */
    worker ahead_worker;
    int have_ahead, ahead_slot;
    decoded ahead;
    /* The file's mapping: its pages behind the bands read are let go
     * (release_pages). */
    const unsigned char *buf;
    size_t len;
    int mapped;
    uintptr_t released;      /* pages from here on may be in memory */
    gimg_meta *late_meta;    /* what the last band brought (codec.h) */
};

int gimg_band_rows(const gimg_info *info, int band_rows, uint64_t whole_bytes)
{
    if (band_rows > 0)
        return band_rows < info->height ? band_rows : 0;
    const uint64_t pixels = (uint64_t)info->width * (uint64_t)info->height;
    const uint64_t budget = gimg_max_memory();
    if (pixels <= GIMG_BAND_MIN_PIXELS && whole_bytes <= budget)
        return 0;
    const size_t row_bytes = (size_t)info->width * (size_t)info->channels * info->sample;
    size_t band_bytes = GIMG_BAND_BYTES;
    if (budget / GIMG_BAND_SHARE < band_bytes)
        band_bytes = (size_t)(budget / GIMG_BAND_SHARE);
    const size_t rows = band_bytes / row_bytes;
    return rows < 1 ? 1 : rows < (size_t)info->height ? (int)rows : 0;
}

/*
 * Lets go of the mapping's whole pages from `released` up to `below`: a
 * file mapped privately and never written, its pages dropped, reads the
 * same bytes again from the page cache if touched after, so that this
 * only keeps the file's pages (which count in the process's memory) to
 * those near the rows being read. What a decoder has read is known for
 * a band viewed in place (its start); for decoded bands it is estimated
 * in proportion to the rows given, less a margin (a wrong guess costs a
 * page fault, never a byte).
 */
static void release_pages(gimg_band_reader *b, const unsigned char *below)
{
    if (!b->mapped)
        return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t end = (uintptr_t)below & ~(page - 1);
    const uintptr_t start = b->released & ~(page - 1); /* a page partly read may go too */
    if (end > start && madvise((void *)start, end - start, MADV_DONTNEED) == 0)
        b->released = end;
}

gimg_status gimg_band_open(const unsigned char *buf, size_t len, int mapped,
                           const gimg_read_opts *o, int rows, gimg_image *header,
                           gimg_band_reader **r)
{
    gimg_read_opts opts = {0};
    *r = NULL;
    memset(header, 0, sizeof *header);
    if (o)
        opts = *o;
    opts.drop_pages = mapped;
    o = &opts;
    const gimg_codec *codec = gimg_codec_sniff(buf, len);
    if (!codec || !codec->rows_open || rows < 1)
        return GIMG_OK;
    if (o->page > 0 && !codec->multi_page)
        return GIMG_OK; /* decoding says why not */
    void *state = NULL;
    gimg_status st = codec->rows_open(buf, len, o, header, &state);
    if (st || !state) {
        gimg_meta_free(header->meta);
        memset(header, 0, sizeof *header);
        return st;
    }
    gimg_band_reader *b = calloc(1, sizeof *b);
    if (!b) {
        codec->rows_close(state);
        gimg_meta_free(header->meta);
        memset(header, 0, sizeof *header);
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    }
    b->codec = codec;
    b->rows = state;
    b->layout = *header;
    b->layout.meta = NULL;
    b->band_rows = rows < header->height ? rows : header->height;
    b->buf = buf;
    b->len = len;
    b->mapped = mapped;
    b->released = (uintptr_t)buf;
    *r = b;
    return GIMG_OK;
}

/* Decodes the next band (rows from decoded_rows on) into buffer[slot]. */
static void decode_band(gimg_band_reader *b, int slot, decoded *d)
{
    memset(d, 0, sizeof *d);
    const int left = b->layout.height - b->decoded_rows;
    d->band = b->buffer[slot];
    d->band.height = left < b->band_rows ? left : b->band_rows;
    d->band.maxval = b->layout.maxval;
    b->decoded_rows += d->band.height;
    if ((d->st = b->codec->rows_read(b->rows, &d->band))) {
        snprintf(d->why, sizeof d->why, "%s", gimg_last_error());
        gimg_meta_free(d->band.meta);
        d->band.meta = NULL;
    }
}

static void read_ahead(void *arg)
{
    gimg_band_reader *b = arg;
    decode_band(b, b->ahead_slot, &b->ahead);
}

/* Both buffers, and the thread where there is more than one band (a
 * thread that cannot start leaves the reading to the caller). */
static gimg_status start_reading(gimg_band_reader *b)
{
    gimg_status st;
    const int bands = (b->layout.height + b->band_rows - 1) / b->band_rows;
    for (int k = 0; k < (bands > 1 ? 2 : 1); k++)
        if ((st = gimg_image_alloc(&b->buffer[k], b->layout.width, b->band_rows,
                                   b->layout.channels, b->layout.sample)))
            return st;
    if (bands > 1)
        worker_start(&b->ahead_worker, read_ahead, b);
    return GIMG_OK;
}

gimg_status gimg_band_next(gimg_band_reader *b, gimg_image *band, int *y0)
{
    *y0 = b->next_row;
    memset(band, 0, sizeof *band);
    if (b->next_row >= b->layout.height)
        return GIMG_OK;
    gimg_status st;
    if (!b->buffer[0].data && (st = start_reading(b)))
        return st;
    /* The band asked for: read ahead already, or decoded now. */
    decoded d;
    int slot = 0;
    if (b->have_ahead) {
        worker_wait(&b->ahead_worker);
        d = b->ahead;
        b->ahead.band.meta = NULL; /* d's now */
        slot = b->ahead_slot;
        b->have_ahead = 0;
    } else {
        decode_band(b, 0, &d);
    }
    if (d.st)
        return gimg_fail(d.st, "%s", d.why);
    *band = d.band;
    if (band->meta) {
        gimg_meta_free(b->late_meta);
        b->late_meta = band->meta;
        band->meta = NULL;
    }
    /* The next band, into the other buffer, while the caller works. */
    if (b->ahead_worker.running && b->decoded_rows < b->layout.height) {
        b->ahead_slot = 1 - slot;
        b->have_ahead = 1;
        worker_give(&b->ahead_worker);
    }
    /* A view into the file: what lies before it has been read; else a
     * share of the file like the rows' share of the image, less 1/16. */
    const unsigned char *at = band->data;
    if (at >= b->buf && at < b->buf + b->len) {
        release_pages(b, at);
    } else {
        const double share = (double)b->next_row / b->layout.height - 1.0 / 16;
        if (share > 0)
            release_pages(b, b->buf + (size_t)(share * (double)b->len));
    }
    b->next_row += band->height;
    return GIMG_OK;
}

int gimg_band_meta_follows(const gimg_band_reader *b)
{
    return b->codec->rows_meta_follows;
}

gimg_meta *gimg_band_take_meta(gimg_band_reader *b)
{
    gimg_meta *m = b->late_meta;
    b->late_meta = NULL;
    return m;
}

void gimg_band_close(gimg_band_reader *b)
{
    if (!b)
        return;
    worker_stop(&b->ahead_worker); /* after a band the caller will not take */
    gimg_meta_free(b->ahead.band.meta);
    gimg_meta_free(b->late_meta);
    b->codec->rows_close(b->rows);
    gimg_image_free(&b->buffer[0]);
    gimg_image_free(&b->buffer[1]);
    free(b);
}

/* -------------------------------------------------------------- writing */

/*
 * Write-behind: rows are encoded into one of two buffers, which a thread
 * of the writer's writes to the file while the caller computes the next
 * rows (a write() of the page cache costs about what a blur of the rows
 * does). A write's failure, recorded on that thread, is recorded again
 * on the caller's when it next hands rows over, or at close.
 */
struct gimg_band_writer {
    const char *path;
    gimg_format format;
    gimg_image layout;     /* width, height, channels, sample (no data) */
    gimg_out_file *file;   /* opened with the first rows */
    size_t row_bytes;      /* a row as the file holds it */
    int rows_written;      /* rows handed over */
    unsigned char *buf[2]; /* rows as the file holds them */
    size_t cap[2], fill[2];
    int slot;              /* the buffer the caller fills next; the other, the
                              worker's while it writes it */
    worker behind;
    gimg_status write_st;  /* the worker's first failure */
    char why[512];
};

static void write_behind(void *arg)
{
    gimg_band_writer *b = arg;
    const int k = 1 - b->slot;
    if (!b->write_st && (b->write_st = gimg_out_write(b->file, b->buf[k], b->fill[k])))
        snprintf(b->why, sizeof b->why, "%s", gimg_last_error());
}

/* Waits for the buffer being written; its failure, if any. */
static gimg_status wait_written(gimg_band_writer *b)
{
    worker_wait(&b->behind);
    return b->write_st ? gimg_fail(b->write_st, "%s", b->why) : GIMG_OK;
}

gimg_status gimg_band_writer_open(const char *path, const gimg_image *layout,
                                  const gimg_write_opts *o, gimg_band_writer **w)
{
    *w = NULL;
    if (!path || !strcmp(path, "-"))
        return GIMG_OK;
    const gimg_format f = gimg_output_format(path, o, layout);
    const int fits = (f == GIMG_FMT_PAM && layout->sample != GIMG_F32) ||
                     (f == GIMG_FMT_PNM && layout->sample != GIMG_F32 && layout->channels % 2);
    if (!fits)
        return GIMG_OK;
    gimg_band_writer *b = calloc(1, sizeof *b);
    if (!b)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    b->path = path;
    b->format = f;
    b->layout = *layout;
    b->layout.data = NULL;
    b->layout.meta = NULL;
    gimg_io_note_dropped_meta(layout->meta, o, f);
    *w = b;
    return GIMG_OK;
}

/* The header, with the maxval the first rows have, and the thread (a
 * thread that cannot start leaves the writing to the caller). */
static gimg_status start_writing(gimg_band_writer *b, unsigned maxval)
{
    gimg_image head = b->layout;
    head.maxval = maxval;
    b->layout.maxval = maxval;
    char hdr[GIMG_PNM_HEADER_MAX];
    size_t len;
    gimg_status st;
    if (!(b->row_bytes = gimg_pnm_row_bytes(&head)))
        return gimg_fail(GIMG_E_LIMIT, "image too large to encode");
    if ((st = gimg_pnm_header(&head, b->format, hdr, sizeof hdr, &len)) ||
        (st = gimg_out_open(b->path, &b->file)) || (st = gimg_out_write(b->file, hdr, len)))
        return st;
    worker_start(&b->behind, write_behind, b);
    return GIMG_OK;
}

gimg_status gimg_band_writer_rows(gimg_band_writer *b, const gimg_image *band)
{
    gimg_status st;
    if (band->width != b->layout.width || band->channels != b->layout.channels ||
        band->sample != b->layout.sample || band->height > b->layout.height - b->rows_written)
        return gimg_fail(GIMG_E_USAGE, "gimg_band_writer_rows: a band of another layout, or "
                                       "past the image's rows");
    if (!b->file && (st = start_writing(b, band->maxval)))
        return st;
    if (band->maxval != b->layout.maxval)
        return gimg_fail(GIMG_E_USAGE, "gimg_band_writer_rows: bands of another maxval");
    const int k = b->slot;
    const size_t bytes = b->row_bytes * (size_t)band->height;
    if (bytes > b->cap[k]) {
        free(b->buf[k]);
        if (!(b->buf[k] = malloc(bytes))) {
            b->cap[k] = 0;
            return gimg_fail(GIMG_E_NOMEM, "out of memory");
        }
        b->cap[k] = bytes;
    }
    for (int y = 0; y < band->height; y++) {
        unsigned char *to = b->buf[k] + (size_t)y * b->row_bytes;
        if (band->sample == GIMG_U8) /* the file's bytes already */
            memcpy(to, gimg_row(band, y), b->row_bytes);
        else
            gimg_pnm_encode_row(band, y, to);
    }
    b->fill[k] = bytes;
    b->rows_written += band->height;
    if (!b->behind.running)
        return gimg_out_write(b->file, b->buf[k], bytes);
    /* The other buffer written, this one goes. */
    if ((st = wait_written(b)))
        return st;
    b->slot = 1 - k;
    worker_give(&b->behind);
    return GIMG_OK;
}

gimg_status gimg_band_writer_close(gimg_band_writer *b, int commit)
{
    if (!b)
        return GIMG_OK;
    gimg_status st = wait_written(b);
    worker_stop(&b->behind);
    if (!st && commit && b->rows_written != b->layout.height)
        st = gimg_fail(GIMG_E_USAGE, "gimg_band_writer_close: %d of the image's %d rows were "
                                     "written", b->rows_written, b->layout.height);
    if (b->file) {
        if (commit && !st)
            st = gimg_out_commit(b->file);
        else
            gimg_out_abort(b->file);
    }
    free(b->buf[0]);
    free(b->buf[1]);
    free(b);
    return st;
}
