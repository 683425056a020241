/* band.c — images read band by band through their codecs' row decoders
 * (band.h). */
#include "band.h"
#include "codec.h"
#include "io_internal.h"

#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
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

/* What release_pages keeps behind a decoder's estimated place in the file
 * (bytes): a proportional guess that runs ahead of the decoder costs only
 * page faults, and 1/16 of the file (before stop 44) kept 23 MB of a
 * 16384^2 PNG's mapping in memory, 90 MB of a 32768^2 one's. */
#define GIMG_BAND_PAGES_MARGIN ((double)(1 << 20))

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

size_t gimg_band_bytes(void)
{
    const size_t bytes = (size_t)omp_get_max_threads() * GIMG_BAND_BYTES_PER_THREAD;
    return bytes < GIMG_BAND_BYTES_MIN   ? GIMG_BAND_BYTES_MIN
           : bytes > GIMG_BAND_BYTES_MAX ? GIMG_BAND_BYTES_MAX
                                         : bytes;
}

int gimg_band_rows(const gimg_info *info, int band_rows, uint64_t whole_bytes)
{
    if (band_rows > 0)
        return band_rows < info->height ? band_rows : 0;
    const uint64_t pixels = (uint64_t)info->width * (uint64_t)info->height;
    const uint64_t budget = gimg_max_memory();
    if (pixels <= GIMG_BAND_MIN_PIXELS && whole_bytes <= budget)
        return 0;
    const size_t row_bytes = (size_t)info->width * (size_t)info->channels * info->sample;
    size_t band_bytes = gimg_band_bytes();
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

gimg_status gimg_band_set_rows(gimg_band_reader *b, int rows)
{
    if (rows < 1 || b->next_row || b->buffer[0].data)
        return gimg_fail(GIMG_E_USAGE, "gimg_band_set_rows: after the first band, or no rows");
    b->band_rows = rows < b->layout.height ? rows : b->layout.height;
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
     * share of the file like the rows' share of the image, less
     * GIMG_BAND_PAGES_MARGIN: the decoder is a band ahead of that (the
     * read-ahead's), or less where the rows given took fewer bytes than
     * their share. */
    const unsigned char *at = band->data;
    if (at >= b->buf && at < b->buf + b->len) {
        release_pages(b, at);
    } else {
        const double share_bytes = (double)b->next_row / b->layout.height * (double)b->len;
        if (share_bytes > GIMG_BAND_PAGES_MARGIN)
            release_pages(b, b->buf + (size_t)(share_bytes - GIMG_BAND_PAGES_MARGIN));
    }
    b->next_row += band->height;
    return GIMG_OK;
}

int gimg_band_meta_follows(const gimg_band_reader *b)
{
    return b->codec->rows_meta_follows && b->codec->rows_meta_follows(b->rows);
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
 * Write-behind: the caller's rows are copied into one of two buffers,
 * which a thread of the writer's encodes (the codec's row writer:
 * codec.h's wrows_*) and writes to the file while the caller computes
 * the next rows (a write() of the page cache, or a PNG's compression,
 * costs about what a blur of the rows does). A failure there, recorded
 * on that thread, is recorded again on the caller's when it next hands
 * rows over, or at close.
 */
struct gimg_band_writer {
    const char *path;
    const gimg_codec *codec;
    gimg_write_opts opts;
    gimg_image layout;     /* the output's size, layout, metadata (borrowed) */
    gimg_meta *meta;       /* what the format gets of it (write.c's rule) */
    int meta_owned;
    void *rows;            /* the codec's row writer, opened with the first rows */
    gimg_out_file *file;   /* opened with the first rows */
    int rows_written;      /* rows handed over */
    gimg_image buf[2];     /* copies of the rows handed over */
    int buf_rows[2];       /* the rows each was allocated for */
    int slot;              /* the buffer the caller fills next; the other, the
                              worker's while it encodes and writes it */
    worker behind;
    gimg_status write_st;  /* the worker's first failure */
    char why[512];
    /* Placing (gimg_band_writer_block): the block the worker writes, and
     * the pixels handed over. */
    int placing;
    gimg_image block;
    int block_x0, block_y0;
    uint64_t pixels_placed;
    int failed;            /* a block was refused, or its writing failed */
};

/* Encodes the rows of buf[k] and writes what they complete. */
static gimg_status encode_rows(gimg_band_writer *b, int k)
{
    const unsigned char *bytes;
    size_t len;
    gimg_status st = b->codec->wrows_put(b->rows, &b->buf[k], &bytes, &len);
    return st || !len ? st : gimg_out_write(b->file, bytes, len);
}

/* Writes each row of the block handed over at its place. */
static gimg_status place_block(gimg_band_writer *b)
{
    gimg_status st = GIMG_OK;
    for (int y = 0; y < b->block.height && !st; y++) {
        const unsigned char *bytes;
        size_t len;
        uint64_t at;
        if (!(st = b->codec->wrows_place(b->rows, &b->block, b->block_x0, b->block_y0, y, &bytes,
                                         &len, &at)))
            st = gimg_out_pwrite(b->file, bytes, len, at);
    }
    return st;
}

static void write_behind(void *arg)
{
    gimg_band_writer *b = arg;
    if (!b->write_st &&
        (b->write_st = b->placing ? place_block(b) : encode_rows(b, 1 - b->slot)))
        snprintf(b->why, sizeof b->why, "%s", gimg_last_error());
}

/* Waits for the buffer being written; its failure, if any. */
static gimg_status wait_written(gimg_band_writer *b)
{
    worker_wait(&b->behind);
    return b->write_st ? gimg_fail(b->write_st, "%s", b->why) : GIMG_OK;
}

gimg_status gimg_band_writer_open(const char *path, const gimg_image *layout, int meta_complete,
                                  const gimg_write_opts *o, gimg_band_writer **w)
{
    *w = NULL;
    if (!path || !strcmp(path, "-"))
        return GIMG_OK;
    const gimg_format f = gimg_output_format(path, o, layout);
    const gimg_codec *c = gimg_codec_of(f);
    if (!c || !c->wrows_open || (c->meta && !meta_complete))
        return GIMG_OK;
    /* Only an image the codec takes as it is (write.c converts others). */
    int channels = layout->channels;
    gimg_sample sample = layout->sample;
    c->layout(&channels, &sample);
    if (channels != layout->channels || sample != layout->sample ||
        !gimg_io_maxval_kept(layout, c->maxval_rule))
        return GIMG_OK;
    gimg_band_writer *b = calloc(1, sizeof *b);
    if (!b)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    b->path = path;
    b->codec = c;
    b->opts = *o;
    b->layout = *layout;
    b->layout.data = NULL;
    gimg_status st = gimg_io_meta_for(layout->meta, c, o, &b->meta, &b->meta_owned);
    if (st) {
        free(b);
        return st;
    }
    *w = b;
    return GIMG_OK;
}

/* The codec's row writer, with the maxval the first rows have, the file
 * and its first bytes, and the thread (a thread that cannot start leaves
 * the work to the caller). */
static gimg_status start_writing(gimg_band_writer *b, unsigned maxval)
{
    gimg_image head = b->layout;
    head.maxval = maxval;
    head.meta = b->meta;
    b->layout.maxval = maxval;
    if (!gimg_io_maxval_kept(&head, b->codec->maxval_rule))
        return gimg_fail(GIMG_E_USAGE, "gimg_band_writer_rows: a maxval the format would "
                                       "rescale");
    const unsigned char *bytes;
    size_t len;
    gimg_status st;
    if ((st = b->codec->wrows_open(&head, &b->opts, &b->rows, &bytes, &len)) ||
        (st = gimg_out_open(b->path, &b->file)) || (len && (st = gimg_out_write(b->file, bytes, len))))
        return st;
    worker_start(&b->behind, write_behind, b);
    return GIMG_OK;
}

/* Copies band into buffer k (packed rows, grown as needed). */
static gimg_status copy_band(gimg_band_writer *b, int k, const gimg_image *band)
{
    gimg_image *to = &b->buf[k];
    const size_t row = (size_t)band->width * gimg_pixel_bytes(band);
    if (b->buf_rows[k] < band->height) {
        gimg_image_free(to);
        b->buf_rows[k] = 0;
        gimg_status st = gimg_image_alloc(to, band->width, band->height, band->channels,
                                          band->sample);
        if (st)
            return st;
        b->buf_rows[k] = band->height;
    }
    to->height = band->height;
    to->maxval = band->maxval;
    for (int y = 0; y < band->height; y++)
        memcpy(gimg_row(to, y), gimg_row(band, y), row);
    return GIMG_OK;
}

gimg_status gimg_band_writer_rows(gimg_band_writer *b, const gimg_image *band)
{
    gimg_status st;
    if (band->width != b->layout.width || band->channels != b->layout.channels ||
        band->sample != b->layout.sample || band->height > b->layout.height - b->rows_written)
        return gimg_fail(GIMG_E_USAGE, "gimg_band_writer_rows: a band of another layout, or "
                                       "past the image's rows");
    if (band->height < 1)
        return GIMG_OK;
    if (b->placing)
        return gimg_fail(GIMG_E_USAGE, "gimg_band_writer_rows: rows after blocks");
    if (!b->file && (st = start_writing(b, band->maxval)))
        return st;
    if (band->maxval != b->layout.maxval)
        return gimg_fail(GIMG_E_USAGE, "gimg_band_writer_rows: bands of another maxval");
    const int k = b->slot;
    if ((st = copy_band(b, k, band)))
        return st;
    b->rows_written += band->height;
    if (!b->behind.running)
        return encode_rows(b, k);
    /* The other buffer written, this one goes. */
    if ((st = wait_written(b)))
        return st;
    b->slot = 1 - k;
    worker_give(&b->behind);
    return GIMG_OK;
}

int gimg_band_writer_places(const gimg_band_writer *b)
{
    struct stat s;
    return b && b->codec->wrows_place && !b->rows_written &&
           (stat(b->path, &s) != 0 || S_ISREG(s.st_mode));
}

static gimg_status hand_block(gimg_band_writer *b, const gimg_image *block, int x0, int y0)
{
    gimg_status st;
    if (!(b->placing || gimg_band_writer_places(b)) || block->channels != b->layout.channels ||
        block->sample != b->layout.sample || x0 < 0 || y0 < 0 ||
        block->width > b->layout.width - x0 || block->height > b->layout.height - y0)
        return gimg_fail(GIMG_E_USAGE, "gimg_band_writer_block: not a file that takes blocks, "
                                       "or a block of another layout or outside the image");
    if (block->width < 1 || block->height < 1)
        return GIMG_OK;
    if (!b->file && (st = start_writing(b, block->maxval)))
        return st;
    if (block->maxval != b->layout.maxval)
        return gimg_fail(GIMG_E_USAGE, "gimg_band_writer_block: blocks of another maxval");
    if (!b->placing) {
        /* The file's room first, its size the end of its last pixel: the
         * file system then has no holes to fill (ext4 zeroed each write's
         * partial blocks anew in a file grown by writes placed out of
         * order: 2 KB writes over a 16384^2 RGB image took 3.3 s, 1.2 s
         * into the room reserved). */
        gimg_image last = *block;
        const unsigned char *bytes;
        size_t len;
        uint64_t at;
        last.width = last.height = 1;
        if ((st = b->codec->wrows_place(b->rows, &last, b->layout.width - 1,
                                        b->layout.height - 1, 0, &bytes, &len, &at)) ||
            (st = gimg_out_reserve(b->file, at + len)))
            return st;
    }
    if ((st = wait_written(b)))
        return st;
    b->placing = 1;
    b->block = *block;
    b->block.meta = NULL;
    b->block_x0 = x0;
    b->block_y0 = y0;
    b->pixels_placed += (uint64_t)block->width * (uint64_t)block->height;
    if (!b->behind.running)
        return place_block(b);
    worker_give(&b->behind);
    return GIMG_OK;
}

gimg_status gimg_band_writer_block(gimg_band_writer *b, const gimg_image *block, int x0, int y0)
{
    const gimg_status st = hand_block(b, block, x0, y0);
    b->failed |= st != GIMG_OK;
    return st;
}

int gimg_band_writer_failed(const gimg_band_writer *b)
{
    return b && b->failed;
}

void gimg_band_writer_sync(gimg_band_writer *b)
{
    if (b)
        worker_wait(&b->behind);
}

gimg_status gimg_band_writer_close(gimg_band_writer *b, int commit)
{
    if (!b)
        return GIMG_OK;
    gimg_status st = wait_written(b);
    worker_stop(&b->behind);
    const uint64_t pixels = (uint64_t)b->layout.width * (uint64_t)b->layout.height;
    if (!st && commit && b->placing && b->pixels_placed != pixels)
        st = gimg_fail(GIMG_E_USAGE, "gimg_band_writer_close: %llu of the image's %llu pixels "
                                     "were placed", (unsigned long long)b->pixels_placed,
                                     (unsigned long long)pixels);
    if (!st && commit && !b->placing && b->rows_written != b->layout.height)
        st = gimg_fail(GIMG_E_USAGE, "gimg_band_writer_close: %d of the image's %d rows were "
                                     "written", b->rows_written, b->layout.height);
    if (b->file) {
        if (commit && !st)
            st = gimg_out_commit(b->file);
        else
            gimg_out_abort(b->file);
    }
    if (b->codec->wrows_close)
        b->codec->wrows_close(b->rows);
    if (b->meta_owned)
        gimg_meta_free(b->meta);
    gimg_image_free(&b->buf[0]);
    gimg_image_free(&b->buf[1]);
    free(b);
    return st;
}
