/*
 * serve.c — gimgd's server (serve.h): the socket, a thread per
 * connection, the checks every request passes, the lanes it queues for,
 * and the exit when idle or asked.
 */
#include "serve.h"
#include "ctx_internal.h"
#include "jpeg_internal.h"
#include "wire.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* A client has this long to send its request once connected, and to let
 * go of a buffer once answered. */
#define REQUEST_WAIT_MS 10000
#define BUFFER_HOLD_MS 120000
/* The pool's buffers, held and free, stay within POOL_MAX_BYTES (requests
 * past it wait for buffers to come back), the free ones within
 * POOL_FREE_BYTES. */
#define POOL_MAX_BYTES ((size_t)4 << 30)
#define POOL_FREE_BYTES ((size_t)2 << 30)
/* Connections served at once; more wait in the socket's backlog. */
#define MAX_CONNECTIONS 256
#define MAX_LANES 1024

/* A buffer of the pool: a memory file the server keeps mapped. */
typedef struct pool_buf {
    int fd;
    unsigned char *map;
    size_t bytes;
    struct pool_buf *next;
} pool_buf;

typedef struct {
    const gimg_serve_opts *o;
    gimg_ctx *ctx;
    char socket_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    pthread_mutex_t lock;       /* all below */
    pthread_cond_t changed;     /* a connection ended, a lane came free */
    int connections;            /* threads serving a connection */
    int n_lanes;
    unsigned char lane_busy[MAX_LANES];
    int stopping;               /* STOP received */
    double last_ms;             /* when the last request ended (or the start) */
    double start_ms;
    uint64_t settings;          /* gimg_wire_settings() of this process at the start */
    long served, failed, refused;
    pool_buf *free_bufs;        /* the buffers no connection holds */
    size_t pool_bytes;          /* all buffers' bytes, held, free or being made */
    /* Each lane's copy of its request's memory file (not under the lock:
     * the lane's holder alone uses it). */
    unsigned char *lane_in[MAX_LANES];
    size_t lane_in_bytes[MAX_LANES];
} server;

typedef struct {
    server *s;
    int sock;
} connection;

static volatile sig_atomic_t g_signalled;

static void on_signal(int sig)
{
    (void)sig;
    g_signalled = 1;
}

static void log_line(const server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_line(const server *s, const char *fmt, ...)
{
    if (!s->o->log)
        return;
    time_t now = time(NULL);
    struct tm tm;
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime_r(&now, &tm));
    va_list ap;
    va_start(ap, fmt);
    flockfile(s->o->log);
    fprintf(s->o->log, "gimgd[%ld] %s: ", (long)getpid(), when);
    vfprintf(s->o->log, fmt, ap);
    fputc('\n', s->o->log);
    fflush(s->o->log);
    funlockfile(s->o->log);
    va_end(ap);
}

/* ---------------------------------------------------------------- lanes */

static int take_lane(server *s)
{
    pthread_mutex_lock(&s->lock);
    for (;;) {
        for (int l = 0; l < s->n_lanes; l++)
            if (!s->lane_busy[l]) {
                s->lane_busy[l] = 1;
                pthread_mutex_unlock(&s->lock);
                return l;
            }
        pthread_cond_wait(&s->changed, &s->lock);
    }
}

static void give_lane(server *s, int lane)
{
    pthread_mutex_lock(&s->lock);
    s->lane_busy[lane] = 0;
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->lock);
}

/* Room for a request's memory file (bytes) in lane's copy, *p. */
static gimg_status lane_input(server *s, int lane, size_t bytes, unsigned char **p)
{
    if (s->lane_in_bytes[lane] < bytes || !s->lane_in[lane]) {
        free(s->lane_in[lane]);
        s->lane_in_bytes[lane] = 0;
        if (!(s->lane_in[lane] = malloc(bytes ? bytes : 1)))
            return gimg_fail(GIMG_E_NOMEM, "out of memory for a request of %zu bytes", bytes);
        s->lane_in_bytes[lane] = bytes;
    }
    *p = s->lane_in[lane];
    return GIMG_OK;
}

/* A lane keeps a copy's room for the requests after (a batch's JPEGs, a
 * few MB each), but not a large one's. */
#define LANE_INPUT_KEEP_BYTES ((size_t)16 << 20)

static void lane_input_done(server *s, int lane)
{
    if (s->lane_in_bytes[lane] > LANE_INPUT_KEEP_BYTES) {
        free(s->lane_in[lane]);
        s->lane_in[lane] = NULL;
        s->lane_in_bytes[lane] = 0;
    }
}

/* --------------------------------------------------------------- buffers */

static void drop_buffer(pool_buf *b)
{
    munmap(b->map, b->bytes);
    close(b->fd);
    free(b);
}

/* Drops the largest free buffer; 0 when none is free. Under s->lock. */
static int drop_largest_free(server *s)
{
    if (!s->free_bufs)
        return 0;
    pool_buf **largest = &s->free_bufs;
    for (pool_buf **p = &s->free_bufs; *p; p = &(*p)->next)
        if ((*p)->bytes > (*largest)->bytes)
            largest = p;
    pool_buf *gone = *largest;
    *largest = gone->next;
    s->pool_bytes -= gone->bytes;
    drop_buffer(gone);
    return 1;
}

/* A buffer of at least `need` bytes: the smallest free one that is not
 * more than twice as large, else a new one (2 MiB multiples, its pages
 * allocated now, once). All buffers together stay within POOL_MAX_BYTES:
 * free ones are let go to make room, and a request that would pass it
 * waits for others to give theirs back (one alone may pass it). NULL, with
 * the reason recorded, on failure. */
static pool_buf *take_buffer(server *s, size_t need)
{
    const size_t unit = (size_t)2 << 20;
    if (need > SIZE_MAX - unit) {
        gimg_fail(GIMG_E_LIMIT, "a buffer of %zu bytes", need);
        return NULL;
    }
    const size_t bytes = (need + unit - 1) / unit * unit;
    pool_buf *b = NULL;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        pool_buf **best = NULL;
        for (pool_buf **p = &s->free_bufs; *p; p = &(*p)->next)
            if ((*p)->bytes >= need && (*p)->bytes / 2 <= need &&
                (!best || (*p)->bytes < (*best)->bytes))
                best = p;
        if (best) {
            b = *best;
            *best = b->next;
            b->next = NULL;
            pthread_mutex_unlock(&s->lock);
            return b;
        }
        while (s->pool_bytes + bytes > POOL_MAX_BYTES && drop_largest_free(s))
            ;
        if (s->pool_bytes + bytes <= POOL_MAX_BYTES || s->pool_bytes == 0)
            break;
        pthread_cond_wait(&s->changed, &s->lock);
    }
    s->pool_bytes += bytes; /* reserved while it is made */
    pthread_mutex_unlock(&s->lock);
    void *map = MAP_FAILED;
    int fd = memfd_create("gimgd-buffer", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd >= 0 && ftruncate(fd, (off_t)bytes) == 0 &&
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0)
        map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (map == MAP_FAILED || !(b = calloc(1, sizeof *b))) {
        gimg_fail(GIMG_E_NOMEM, "a buffer of %zu bytes: %s", bytes, strerror(errno));
        if (map != MAP_FAILED)
            munmap(map, bytes);
        if (fd >= 0)
            close(fd);
        pthread_mutex_lock(&s->lock);
        s->pool_bytes -= bytes;
        pthread_cond_broadcast(&s->changed);
        pthread_mutex_unlock(&s->lock);
        return NULL;
    }
    b->fd = fd;
    b->map = map;
    b->bytes = bytes;
    return b;
}

/* Back to the pool (waking those who wait for room); the free ones beyond
 * POOL_FREE_BYTES are let go, largest first. */
static void give_buffer(server *s, pool_buf *b)
{
    pthread_mutex_lock(&s->lock);
    b->next = s->free_bufs;
    s->free_bufs = b;
    size_t free_bytes = 0;
    for (pool_buf *p = s->free_bufs; p; p = p->next)
        free_bytes += p->bytes;
    while (free_bytes > POOL_FREE_BYTES) {
        size_t before = s->pool_bytes;
        drop_largest_free(s);
        free_bytes -= before - s->pool_bytes;
    }
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->lock);
}

/* ------------------------------------------------------------- requests */

static void reply_init(gimg_wire_reply *r)
{
    memset(r, 0, sizeof *r);
    r->magic = GIMG_WIRE_MAGIC;
    r->version = GIMG_WIRE_VERSION;
}

static void status_text(server *s, char *buf, size_t size)
{
    char backend[96];
    gimg_ctx_describe(s->ctx, backend, sizeof backend);
    pthread_mutex_lock(&s->lock);
    int busy = 0;
    for (int l = 0; l < s->n_lanes; l++)
        busy += s->lane_busy[l];
    const double now = gimg_now_ms();
    snprintf(buf, size,
             "pid %ld, up %.0f s\nbackend: %s, %d lane%s (%d busy)\nrequests: %ld served, %ld "
             "failed, %d connection%s open; %ld refused\nidle exit: %s\nsocket: %s\n",
             (long)getpid(), (now - s->start_ms) / 1e3, backend, s->n_lanes,
             s->n_lanes == 1 ? "" : "s", busy, s->served, s->failed, s->connections - 1,
             s->connections - 1 == 1 ? "" : "s", s->refused,
             s->o->idle_s > 0 ? "after the idle time below" : "never", s->socket_path);
    pthread_mutex_unlock(&s->lock);
    if (s->o->idle_s > 0) {
        size_t used = strlen(buf);
        snprintf(buf + used, size - used, "idle time: %.0f s\n", s->o->idle_s);
    }
    size_t used = strlen(buf);
    gimg_ctx_memory_text(s->ctx, buf + used, size - used);
    pthread_mutex_lock(&s->lock);
    int n_free = 0;
    for (pool_buf *b = s->free_bufs; b; b = b->next)
        n_free++;
    used = strlen(buf);
    snprintf(buf + used, size - used, "buffers: %.1f MB (%d free)\n", s->pool_bytes / 1e6,
             n_free);
    pthread_mutex_unlock(&s->lock);
}

/* What a request computed: an image, or a result's bytes (malloc'd). */
typedef struct {
    gimg_image image;
    unsigned char *result;
    size_t result_bytes;
    int jpeg;                /* result is the output, a JPEG of layout's layout */
    gimg_wire_image layout;
    double decode_ms, op_ms, encode_ms; /* for the log (-v) */
    double kernel_ms, transfer_ms;      /* the operation's GPU kernels and copies */
} outcome;

/* A gimg_hist and its counts as the reply's result. */
static gimg_status hist_result(gimg_hist *h, outcome *out)
{
    const size_t counts = (size_t)h->channels * (size_t)h->bins * sizeof(uint64_t);
    out->result_bytes = sizeof *h + counts;
    if (!(out->result = malloc(out->result_bytes)))
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    gimg_hist head = *h;
    head.counts = NULL;
    memcpy(out->result, &head, sizeof head);
    memcpy(out->result + sizeof head, h->counts, counts);
    return GIMG_OK;
}

/* The image request q (its file fd) computed into *out. */
static gimg_status run_op(server *s, const gimg_wire_request *q, gimg_wire_options *o,
                          const gimg_image *in, outcome *out)
{
    switch (q->op) {
    case GIMG_WIRE_CONV:
        return gimg_conv(s->ctx, in, &o->conv, &out->image);
    case GIMG_WIRE_ORIENT:
        return gimg_orient(s->ctx, in, (gimg_orient_op)o->orient, &out->image);
    case GIMG_WIRE_STATS:
        out->result_bytes = sizeof(gimg_stats);
        if (!(out->result = calloc(1, sizeof(gimg_stats))))
            return gimg_fail(GIMG_E_NOMEM, "out of memory");
        return gimg_stats_compute(s->ctx, in, &o->stats, (gimg_stats *)out->result);
    default: {
        gimg_hist h;
        gimg_status st = gimg_hist_compute(s->ctx, in, &o->hist, &h);
        if (!st)
            st = hist_result(&h, out);
        gimg_hist_free(&h);
        return st;
    }
    }
}

/* A JPEG input (bits) through the GPU's codecs where they take it, as a
 * tool's own GPU-codec path does (driver.c): decoded on the lane's GPU,
 * the output kept there and encoded by it when a JPEG is wanted (the
 * outcome's result, with out->jpeg set); anything the GPU's codecs fail
 * at is done again with libjpeg-turbo's decode, and pixels go back. */
static gimg_status run_jpeg(server *s, const gimg_wire_request *q, gimg_wire_options *o,
                            const unsigned char *bits, outcome *out)
{
    gimg_image in;
    gimg_jpeg_facts facts;
    gimg_status st = gimg_jpeg_read_header(bits, (size_t)q->input_bytes, &in, &facts);
    if (st)
        return st;
    if ((uint32_t)in.width != q->image.width || (uint32_t)in.height != q->image.height ||
        (uint32_t)in.channels != q->image.channels) {
        gimg_image_free(&in);
        return gimg_fail(GIMG_E_FORMAT, "the JPEG is not of the layout its request says");
    }
    gimg_write_opts w;
    gimg_write_opts_init(&w);
    w.quality = (int)q->jpeg_quality;
    w.jpeg_subsampling = (gimg_subsampling)q->jpeg_subsampling;
    double t0 = gimg_now_ms();
    int on_gpu = !facts.gpu_refusal &&
                 gimg_ctx_gpu_decode_jpeg(s->ctx, bits, (size_t)q->input_bytes, &in) == GIMG_OK;
    double t1 = gimg_now_ms();
    out->decode_ms = t1 - t0;
    if (on_gpu) {
        gimg_ctx_gpu_keep_outputs(s->ctx, q->jpeg_out ? &w : NULL);
        st = run_op(s, q, o, &in, out);
        double t2 = gimg_now_ms();
        out->op_ms = t2 - t1;
        if (!st && out->image.device) {
            st = gimg_ctx_gpu_encode_jpeg(s->ctx, &out->image, &w, &out->result,
                                          &out->result_bytes);
            out->encode_ms = gimg_now_ms() - t2;
            out->jpeg = !st;
            gimg_wire_image_of(&out->image, &out->layout);
            out->image.device = NULL;
        }
        gimg_ctx_gpu_item_done(s->ctx);
        in.device = NULL;
        if (st) { /* once more, on the CPU's codecs */
            gimg_image_free(&out->image);
            free(out->result);
            out->result = NULL;
            out->result_bytes = 0;
            out->jpeg = 0;
        }
    }
    if (!on_gpu || st) {
        gimg_image_free(&in);
        if (!(st = gimg_decode_memory(bits, (size_t)q->input_bytes, &in)))
            st = run_op(s, q, o, &in, out);
    }
    gimg_image_free(&in);
    return st;
}

/* The image request q computed into *out: its file is the connection's
 * buffer, or the memory file fd (mapped here). */
static gimg_status compute(server *s, const gimg_wire_request *q, int fd, const pool_buf *buf,
                           outcome *out)
{
    size_t file_bytes;
    gimg_status st = gimg_wire_check_request(q, &file_bytes);
    if (st)
        return st;
    if ((q->input == GIMG_WIRE_BUFFERED) != (buf != NULL))
        return gimg_fail(GIMG_E_FORMAT, "a request whose input is not where it says");
    if (!buf && fd < 0)
        return gimg_fail(GIMG_E_FORMAT, "a request without its image");
    if (buf && file_bytes > buf->bytes)
        return gimg_fail(GIMG_E_FORMAT, "a request larger than its buffer");
    /* A request's own memory file is read, not mapped (gimg_wire_read
     * says why), into the lane's copy. */
    const int lane = take_lane(s);
    unsigned char *map = buf ? buf->map : NULL;
    if (!buf && !(st = lane_input(s, lane, file_bytes, &map)))
        st = gimg_wire_read(fd, file_bytes, 0, map, file_bytes);
    gimg_wire_options o;
    if (!st && !(st = gimg_wire_get_options(q, map, &o))) {
        gimg_ctx_bind_lane(lane);
        double unused_ms;
        gimg_ctx_take_thread_gpu_times(&unused_ms, &unused_ms);
        if (q->input == GIMG_WIRE_JPEG) {
            st = run_jpeg(s, q, &o, map + q->pixels_offset, out);
        } else {
            gimg_image in;
            gimg_wire_view(&q->image, map + q->pixels_offset, &in);
            st = run_op(s, q, &o, &in, out);
        }
        gimg_ctx_take_thread_gpu_times(&out->kernel_ms, &out->transfer_ms);
        gimg_wire_free_options(q, &o);
    }
    lane_input_done(s, lane);
    give_lane(s, lane);
    return st;
}

/* An image output into the connection's buffer, where the input's pixels
 * were; 0 when it does not fit there (it then goes in a memory file). */
static int reply_in_buffer(const outcome *out, const gimg_wire_request *q, pool_buf *buf,
                           gimg_wire_reply *r)
{
    const gimg_image *im = &out->image;
    if (!buf || !im->data || out->result_bytes)
        return 0;
    size_t bytes = (size_t)im->width * gimg_pixel_bytes(im) * (size_t)im->height;
    if (q->pixels_offset > buf->bytes || bytes > buf->bytes - q->pixels_offset)
        return 0;
    gimg_wire_pack(im, buf->map + q->pixels_offset);
    gimg_wire_image_of(im, &r->image);
    r->pixels_offset = q->pixels_offset;
    r->in_buffer = 1;
    return 1;
}

/* BUFFER: a buffer of the pool for this connection, sent to the client;
 * *buf NULL on failure (the reply says why). */
static gimg_status lend_buffer(server *s, int sock, const gimg_wire_request *q, pool_buf **buf)
{
    *buf = NULL;
    gimg_wire_reply r;
    reply_init(&r);
    /* The most a request may need: its options, and pixels of 4 float
     * channels at the pixel limit; and no more than the memory budget
     * (the pixel limit, by default, is none). */
    gimg_status st = GIMG_OK;
    if (q->input_bytes == 0 || q->input_bytes > GIMG_WIRE_MAX_OPTIONS_BYTES + 4096 +
                                                    gimg_max_pixels() * 16)
        st = gimg_fail(GIMG_E_LIMIT, "a buffer of %llu bytes", (unsigned long long)q->input_bytes);
    if (!st)
        st = gimg_check_memory(q->input_bytes, "a request's buffer");
    if (!st && !(*buf = take_buffer(s, (size_t)q->input_bytes)))
        st = GIMG_E_NOMEM;
    if (st) {
        r.status = st;
        snprintf(r.message, sizeof r.message, "%s", gimg_last_error());
        gimg_wire_send(sock, &r, sizeof r, -1);
        return st;
    }
    r.result_bytes = (*buf)->bytes;
    if ((st = gimg_wire_send(sock, &r, sizeof r, (*buf)->fd))) {
        give_buffer(s, *buf);
        *buf = NULL;
    }
    return st;
}

/* Waits (BUFFER_HOLD_MS at most) until the client closes the connection:
 * until then it may read its output from the buffer. */
static void wait_for_close(int sock)
{
    char c;
    struct pollfd p = {.fd = sock, .events = POLLIN};
    while (poll(&p, 1, BUFFER_HOLD_MS) == 1 && recv(sock, &c, 1, MSG_DONTWAIT) > 0)
        ;
}

/* The outcome in a sealed memory file, for the reply: the result at 0,
 * the image's pixels at the next page. -1 on failure. */
static int reply_file(const outcome *out, gimg_wire_reply *r)
{
    const gimg_image *im = &out->image;
    int overflow = 0;
    size_t offset = im->data ? gimg_wire_align(out->result_bytes, &overflow) : out->result_bytes;
    size_t pixels = im->data ? (size_t)im->width * gimg_pixel_bytes(im) * (size_t)im->height : 0;
    /* Written, not mapped (gimg_wire_read says why). */
    const gimg_wire_piece pieces[2] = {{0, out->result, out->result_bytes, 1, 0},
                                       gimg_wire_image_piece(offset, im)};
    int fd = gimg_wire_memfd_of("gimgd-reply", offset + pixels, pieces, im->data ? 2 : 1);
    if (fd < 0)
        return -1;
    r->result_bytes = out->result_bytes;
    r->jpeg = (uint32_t)out->jpeg;
    if (out->jpeg)
        r->image = out->layout;
    if (im->data) {
        gimg_wire_image_of(im, &r->image);
        r->pixels_offset = offset;
    }
    return fd;
}

static const char *op_name(uint32_t op)
{
    static const char *const names[] = {"conv", "orient", "stats", "hist"};
    return op >= GIMG_WIRE_CONV && op <= GIMG_WIRE_HIST ? names[op - GIMG_WIRE_CONV] : "?";
}

int gimg_serve_peer_ok(int sock, long *uid, long *pid)
{
    struct ucred peer;
    socklen_t len = sizeof peer;
    if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0) {
        *uid = *pid = -1;
        return 0;
    }
    *uid = (long)peer.uid;
    *pid = peer.pid;
    return peer.uid == geteuid();
}

/* A request on sock, within REQUEST_WAIT_MS, of this version of the
 * protocol (its descriptor in *fd, or -1). */
static gimg_status receive_request(int sock, gimg_wire_request *q, int *fd)
{
    gimg_status st = gimg_wire_recv(sock, q, sizeof *q, fd, REQUEST_WAIT_MS);
    if (!st && (q->magic != GIMG_WIRE_MAGIC || q->version != GIMG_WIRE_VERSION))
        st = gimg_fail(GIMG_E_FORMAT, "a request of another version of gimg (%u; this server "
                       "speaks %u)", q->version, GIMG_WIRE_VERSION);
    return st;
}

static void serve_connection(server *s, int sock)
{
    struct {
        long uid, pid;
    } peer;
    if (!gimg_serve_peer_ok(sock, &peer.uid, &peer.pid)) {
        pthread_mutex_lock(&s->lock);
        s->refused++;
        pthread_mutex_unlock(&s->lock);
        log_line(s, "refused a connection from uid %ld (pid %ld): not this server's user",
                 peer.uid, peer.pid);
        return;
    }
    const double t0 = gimg_now_ms();
    gimg_wire_request q;
    int fd = -1;
    gimg_wire_reply r;
    reply_init(&r);
    gimg_status st = receive_request(sock, &q, &fd);
    /* A buffer first, then the request itself. */
    pool_buf *buf = NULL;
    if (!st && q.op == GIMG_WIRE_BUFFER) {
        if (fd >= 0)
            close(fd);
        fd = -1;
        if (lend_buffer(s, sock, &q, &buf))
            return;
        st = receive_request(sock, &q, &fd);
        if (!st && (q.op < GIMG_WIRE_CONV || q.op > GIMG_WIRE_HIST))
            st = gimg_fail(GIMG_E_FORMAT, "a buffer not followed by an image request");
    }
    if (st) {
        if (fd >= 0)
            close(fd);
        pthread_mutex_lock(&s->lock);
        s->refused++;
        pthread_mutex_unlock(&s->lock);
        log_line(s, "refused a request from pid %ld: %s", peer.pid, gimg_last_error());
        /* An answer, where the client still listens: why, in its -v. */
        r.status = st;
        snprintf(r.message, sizeof r.message, "%s", gimg_last_error());
        gimg_wire_send(sock, &r, sizeof r, -1);
        if (buf)
            give_buffer(s, buf);
        return;
    }
    gimg_ctx_describe(s->ctx, r.backend, sizeof r.backend);
    int out_fd = -1;
    outcome out = {0};
    switch (q.op) {
    case GIMG_WIRE_PING:
        r.lanes = (uint32_t)s->n_lanes;
        r.settings = s->settings;
        break;
    case GIMG_WIRE_STATUS:
        status_text(s, r.message, sizeof r.message);
        break;
    case GIMG_WIRE_STOP:
        pthread_mutex_lock(&s->lock);
        s->stopping = 1;
        pthread_mutex_unlock(&s->lock);
        log_line(s, "stopping, as pid %ld asked", peer.pid);
        break;
    default: /* an image request; compute refuses any other */
        st = compute(s, &q, fd, buf, &out);
        if (!st && !reply_in_buffer(&out, &q, buf, &r) && (out_fd = reply_file(&out, &r)) < 0)
            st = GIMG_E_NOMEM;
    }
    if (fd >= 0)
        close(fd);
    gimg_image_free(&out.image);
    free(out.result);
    if (st) {
        r.status = st;
        snprintf(r.message, sizeof r.message, "%s", gimg_last_error());
    }
    r.server_ms = gimg_now_ms() - t0;
    gimg_status sent = gimg_wire_send(sock, &r, sizeof r, out_fd);
    if (out_fd >= 0)
        close(out_fd);
    if (buf) {
        wait_for_close(sock);
        give_buffer(s, buf);
    }
    if (q.op >= GIMG_WIRE_CONV) {
        pthread_mutex_lock(&s->lock);
        if (st || sent)
            s->failed++;
        else
            s->served++;
        pthread_mutex_unlock(&s->lock);
        if (st)
            log_line(s, "request from pid %ld failed: %s", peer.pid, r.message);
        else if (s->o->log_requests)
            log_line(s, "%s %ux%ux%u%s for pid %ld: %.2f ms (JPEG decode %.2f, operation %.2f: "
                     "GPU kernels %.2f and copies %.2f; JPEG encode %.2f)", op_name(q.op),
                     q.image.width, q.image.height, q.image.channels,
                     q.input == GIMG_WIRE_JPEG ? " (a JPEG)" : "", peer.pid, r.server_ms,
                     out.decode_ms, out.op_ms, out.kernel_ms, out.transfer_ms, out.encode_ms);
    }
}

static void *connection_main(void *arg)
{
    connection *c = arg;
    server *s = c->s;
    serve_connection(s, c->sock);
    close(c->sock);
    free(c);
    pthread_mutex_lock(&s->lock);
    s->connections--;
    s->last_ms = gimg_now_ms();
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* Serves sock on a thread of its own (here when none can be made). */
static void spawn_connection(server *s, int sock)
{
    connection *c = malloc(sizeof *c);
    pthread_t t;
    pthread_mutex_lock(&s->lock);
    while (s->connections >= MAX_CONNECTIONS)
        pthread_cond_wait(&s->changed, &s->lock);
    s->connections++;
    pthread_mutex_unlock(&s->lock);
    if (c) {
        c->s = s;
        c->sock = sock;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int e = pthread_create(&t, &attr, connection_main, c);
        pthread_attr_destroy(&attr);
        if (e == 0)
            return;
        connection_main(c);
        return;
    }
    close(sock);
    pthread_mutex_lock(&s->lock);
    s->connections--;
    pthread_mutex_unlock(&s->lock);
}

/* ------------------------------------------------------------ the socket */

static int listen_socket(server *s)
{
    if (gimg_wire_path("gimgd.sock", 1, s->socket_path, sizeof s->socket_path))
        return -1;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(s->socket_path) >= sizeof a.sun_path) {
        gimg_fail(GIMG_E_IO, "%s: name too long for a socket", s->socket_path);
        return -1;
    }
    strcpy(a.sun_path, s->socket_path);
    int sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (sock < 0) {
        gimg_fail(GIMG_E_IO, "socket: %s", strerror(errno));
        return -1;
    }
    /* The caller holds the lock: a socket there is a dead server's. */
    unlink(s->socket_path);
    mode_t old = umask(077);
    int e = bind(sock, (struct sockaddr *)&a, sizeof a);
    umask(old);
    if (e != 0 || chmod(s->socket_path, 0600) != 0 || listen(sock, 128) != 0) {
        gimg_fail(GIMG_E_IO, "%s: %s", s->socket_path, strerror(errno));
        close(sock);
        return -1;
    }
    return sock;
}

static int should_exit(server *s)
{
    pthread_mutex_lock(&s->lock);
    int idle = s->connections == 0 && s->o->idle_s > 0 &&
               gimg_now_ms() - s->last_ms >= s->o->idle_s * 1e3;
    int stop = s->stopping || g_signalled || idle;
    pthread_mutex_unlock(&s->lock);
    if (idle && !s->stopping && !g_signalled)
        log_line(s, "exiting after %.0f s idle", s->o->idle_s);
    else if (g_signalled && stop)
        log_line(s, "exiting on a signal");
    return stop;
}

gimg_status gimg_serve(const gimg_serve_opts *o)
{
    server s;
    memset(&s, 0, sizeof s);
    s.o = o;
    pthread_mutex_init(&s.lock, NULL);
    pthread_cond_init(&s.changed, NULL);
    gimg_status st = gimg_ctx_open(&o->device, 0, &s.ctx);
    /* CUDA (and nvJPEG, for JPEG requests) starts before the server says
     * it is ready: a GPU that cannot be used is the starter's error, not
     * every request's. The tool that started it would wait for it anyway. */
    if (!st && o->device.kind == GIMG_DEV_GPU) {
        gimg_ctx_want_gpu_codecs(s.ctx, 0, 1);
        gimg_ctx_prepare(s.ctx, SIZE_MAX);
        st = gimg_ctx_wait_ready(s.ctx);
    }
    int sock = -1;
    if (!st && (sock = listen_socket(&s)) < 0)
        st = GIMG_E_IO;
    if (st) {
        gimg_ctx_close(s.ctx);
        return st;
    }
    s.n_lanes = o->device.kind == GIMG_DEV_CPU ? 1 : gimg_ctx_lanes(s.ctx);
    if (s.n_lanes > MAX_LANES)
        s.n_lanes = MAX_LANES;
    s.start_ms = s.last_ms = gimg_now_ms();
    s.settings = gimg_wire_settings("/proc/self/exe");

    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* Connection threads leave the signals to this one, whose poll they end. */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    pthread_sigmask(SIG_BLOCK, &block, &old);

    char backend[96];
    gimg_ctx_describe(s.ctx, backend, sizeof backend);
    log_line(&s, "listening on %s (%s, %d lane%s, idle exit %s)", s.socket_path, backend,
             s.n_lanes, s.n_lanes == 1 ? "" : "s", o->idle_s > 0 ? "on" : "off");
    if (o->ready_fd >= 0) {
        (void)!write(o->ready_fd, "R", 1);
        close(o->ready_fd);
    }
    for (;;) {
        struct pollfd p = {.fd = sock, .events = POLLIN};
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        int r = poll(&p, 1, 200);
        pthread_sigmask(SIG_BLOCK, &block, NULL);
        if (should_exit(&s))
            break;
        if (r <= 0)
            continue;
        int c = accept4(sock, NULL, NULL, SOCK_CLOEXEC);
        if (c >= 0)
            spawn_connection(&s, c);
    }
    /* Gone from the folder first, so that no one else connects; then
     * whoever connected meanwhile is answered. */
    unlink(s.socket_path);
    fcntl(sock, F_SETFL, O_NONBLOCK);
    for (int c; (c = accept4(sock, NULL, NULL, SOCK_CLOEXEC)) >= 0;)
        spawn_connection(&s, c);
    close(sock);
    pthread_mutex_lock(&s.lock);
    while (s.connections > 0)
        pthread_cond_wait(&s.changed, &s.lock);
    pthread_mutex_unlock(&s.lock);
    for (int l = 0; l < MAX_LANES; l++)
        free(s.lane_in[l]);
    while (s.free_bufs) {
        pool_buf *b = s.free_bufs;
        s.free_bufs = b->next;
        drop_buffer(b);
    }
    log_line(&s, "served %ld request%s (%ld failed, %ld refused)", s.served,
             s.served == 1 ? "" : "s", s.failed, s.refused);
    gimg_ctx_close(s.ctx);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return GIMG_OK;
}
