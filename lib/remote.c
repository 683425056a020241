/*
 * remote.c — a tool's side of gimgd (remote.h): finding or starting the
 * server, one connection per request, the image out and the result back
 * through sealed memory files, and every failure turned into "do it here".
 */
#include "remote.h"
#include "ctx_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* A ping is answered at once by a server that is not hung. */
#define PING_TIMEOUT_MS 2000
#define DEFAULT_TIMEOUT_S 120.0

typedef enum { UNKNOWN = 0, UP, DOWN } server_state;

struct gimg_remote {
    gimg_device_kind kind;
    pthread_mutex_t lock;      /* all below */
    server_state state;
    int started;               /* this job started the server */
    int was_up;                /* it served this job, at least at first */
    int lanes;                 /* the server's, from its ping */
    char backend[96];          /* the server's, from its ping */
    char why[512];             /* why the server does not serve (DOWN), for -v */
    int served;                /* operations it served */
    double served_ms;          /* their time, as the tool saw it */
    double server_ms;          /* the server's own time in them */
    int timeout_ms;            /* a request's limit */
    int jpeg_sent, jpeg_back;  /* JPEG files sent as they are; JPEGs that came back */
};

/* The lane's item, where the server's codecs serve the job (device.c):
 * the JPEG file its operation sends instead of pixels, the settings its
 * output is wanted in as a JPEG, and the JPEG the server sent back. */
static _Thread_local struct {
    const unsigned char *bits;
    size_t len;
    int want_jpeg;
    uint32_t quality, subsampling;
    unsigned char *out;
    size_t out_len;
} t_jpeg;

/* What out->device is for an output the server left as a JPEG (its pixels
 * are nowhere here). */
static const char k_remote_image;
const struct gimg_dimage *const gimg_remote_image = (const struct gimg_dimage *)&k_remote_image;

void gimg_remote_jpeg_input(const unsigned char *bits, size_t len)
{
    t_jpeg.bits = bits;
    t_jpeg.len = len;
}

int gimg_remote_has_jpeg_input(void)
{
    return t_jpeg.bits != NULL;
}

void gimg_remote_jpeg_output(const gimg_write_opts *w)
{
    t_jpeg.want_jpeg = w != NULL;
    if (w) {
        t_jpeg.quality = (uint32_t)w->quality;
        t_jpeg.subsampling = (uint32_t)w->jpeg_subsampling;
    }
}

gimg_status gimg_remote_take_jpeg(unsigned char **bits, size_t *len)
{
    if (!t_jpeg.out)
        return gimg_fail(GIMG_E_DEVICE, "no JPEG came back from the server");
    *bits = t_jpeg.out;
    *len = t_jpeg.out_len;
    t_jpeg.out = NULL;
    return GIMG_OK;
}

void gimg_remote_jpeg_done(void)
{
    free(t_jpeg.out);
    memset(&t_jpeg, 0, sizeof t_jpeg);
}

gimg_status gimg_remote_open(const gimg_device *dev, gimg_remote **out)
{
    *out = NULL;
    const char *env = getenv("GIMG_SERVER");
    if (dev->no_server || dev->kind == GIMG_DEV_CPU || (env && !strcmp(env, "off")))
        return GIMG_OK;
    /* A list of GPUs names GPUs of this process's choosing: the server
     * spreads its requests over its own. */
    if (dev->kind == GIMG_DEV_GPU && !dev->all_gpus && !(dev->n_gpus == 1 && dev->gpus[0] == 0))
        return GIMG_OK;
    gimg_remote *r = calloc(1, sizeof *r);
    if (!r)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    r->kind = dev->kind;
    pthread_mutex_init(&r->lock, NULL);
    double timeout_s = DEFAULT_TIMEOUT_S;
    const char *t = getenv("GIMG_SERVER_TIMEOUT");
    if (t && *t) {
        char *end;
        double v = strtod(t, &end);
        if (*end == '\0' && v > 0 && v <= 86400)
            timeout_s = v;
    }
    r->timeout_ms = (int)(timeout_s * 1e3);
    *out = r;
    return GIMG_OK;
}

void gimg_remote_close(gimg_remote *r)
{
    if (!r)
        return;
    pthread_mutex_destroy(&r->lock);
    free(r);
}

/* Set by connect_server: whether its last failure found no server at all
 * (no socket, or no one listening on it), not one that misbehaves. */
static _Thread_local int t_no_server;

/* A connection to the server's socket, or -1 (the reason recorded). */
static int connect_server(void)
{
    char path[4096];
    /* No folder yet: no server has run (a client does not make it). */
    errno = 0;
    if (gimg_wire_path("gimgd.sock", 0, path, sizeof path)) {
        t_no_server = errno == ENOENT;
        return -1;
    }
    t_no_server = 0;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path) {
        gimg_fail(GIMG_E_IO, "%s: name too long for a socket", path);
        return -1;
    }
    strcpy(a.sun_path, path);
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0) {
        gimg_fail(GIMG_E_IO, "socket: %s", strerror(errno));
        return -1;
    }
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
        t_no_server = errno == ENOENT || errno == ECONNREFUSED;
        gimg_fail(GIMG_E_IO, "%s: %s", path, strerror(errno));
        close(s);
        return -1;
    }
    return s;
}

/* A reply on sock (its descriptor in *fd, or -1): of this version of the
 * protocol, its texts ended; else refused (GIMG_E_FORMAT), *fd closed. */
static gimg_status receive_reply(int sock, gimg_wire_reply *y, int *fd, int timeout_ms)
{
    gimg_status st = gimg_wire_recv(sock, y, sizeof *y, fd, timeout_ms);
    if (st)
        return st;
    if (y->magic != GIMG_WIRE_MAGIC || y->version != GIMG_WIRE_VERSION) {
        if (*fd >= 0)
            close(*fd);
        *fd = -1;
        return gimg_fail(GIMG_E_FORMAT, "a reply of another version of gimgd");
    }
    y->backend[sizeof y->backend - 1] = '\0';
    y->message[sizeof y->message - 1] = '\0';
    return GIMG_OK;
}

/* One request and its reply; *fd the reply's memory file or -1. */
static gimg_status exchange(const gimg_wire_request *q, int q_fd, int timeout_ms,
                            gimg_wire_reply *reply, int *fd)
{
    *fd = -1;
    int s = connect_server();
    if (s < 0)
        return GIMG_E_IO;
    gimg_status st = gimg_wire_send(s, q, sizeof *q, q_fd);
    if (!st)
        st = receive_reply(s, reply, fd, timeout_ms);
    close(s);
    return st;
}

gimg_status gimg_remote_call(gimg_wire_op op, int timeout_ms, gimg_wire_reply *reply)
{
    gimg_wire_request q = {.magic = GIMG_WIRE_MAGIC, .version = GIMG_WIRE_VERSION, .op = op};
    int fd;
    gimg_status st = exchange(&q, -1, timeout_ms, reply, &fd);
    if (fd >= 0)
        close(fd);
    if (!st && reply->status != GIMG_OK)
        st = gimg_fail((gimg_status)reply->status, "%s", reply->message);
    return st;
}

/* The gimgd to start: $GIMGD where set, else the one beside this
 * executable, else the first on PATH (just "gimgd" when none is). */
static void server_program(char *path, size_t size)
{
    const char *forced = getenv("GIMGD");
    if (forced && *forced) {
        snprintf(path, size, "%s", forced);
        return;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            snprintf(path, size, "%s/gimgd", self);
            if (access(path, X_OK) == 0)
                return;
        }
    }
    const char *dirs = getenv("PATH");
    while (dirs && *dirs) {
        size_t len = strcspn(dirs, ":");
        if (len > 0 && (size_t)snprintf(path, size, "%.*s/gimgd", (int)len, dirs) < size &&
            access(path, X_OK) == 0)
            return;
        dirs += len + (dirs[len] == ':');
    }
    snprintf(path, size, "gimgd");
}

/* Starts gimgd, which returns once it listens (or another server does):
 * its standard streams go nowhere, so that a pipe the tool writes to is
 * not held open by the server. */
static gimg_status start_server(void)
{
    char program[PATH_MAX + 8];
    server_program(program, sizeof program);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    for (int fd = 0; fd < 3; fd++)
        posix_spawn_file_actions_addopen(&fa, fd, "/dev/null", fd ? O_WRONLY : O_RDONLY, 0);
    char *argv[] = {program, NULL};
    pid_t pid;
    int e = strchr(program, '/') ? posix_spawn(&pid, program, &fa, NULL, argv, environ)
                                 : posix_spawnp(&pid, program, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (e != 0)
        return gimg_fail(GIMG_E_IO, "could not start %s: %s", program, strerror(e));
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return gimg_fail(GIMG_E_IO, "waiting for %s: %s", program, strerror(errno));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return gimg_fail(GIMG_E_IO, "%s could not start (exit status %d; see gimgd.log in "
                         "the server's folder)", program,
                         WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    return GIMG_OK;
}

static gimg_status ping(gimg_remote *r)
{
    gimg_wire_reply reply;
    gimg_status st = gimg_remote_call(
        GIMG_WIRE_PING, r->timeout_ms < PING_TIMEOUT_MS ? r->timeout_ms : PING_TIMEOUT_MS, &reply);
    if (st)
        return st;
    char program[PATH_MAX + 8];
    server_program(program, sizeof program);
    if (reply.settings != gimg_wire_settings(program))
        return gimg_fail(GIMG_E_DEVICE, "the running gimgd is another build than %s, or was "
                         "started with other settings (%s): gimgd --stop stops it", program,
                         GIMG_WIRE_SETTINGS);
    r->lanes = reply.lanes >= 1 && reply.lanes <= 1024 ? (int)reply.lanes : 1;
    snprintf(r->backend, sizeof r->backend, "%s", reply.backend);
    return GIMG_OK;
}

/* May this job start a server? --device gpu's first look, and auto's once
 * an operation (or the batch's JPEGs) would pay for CUDA's start-up: a
 * server costs the same to start, and the jobs after find it warm. A
 * build without CUDA starts one only where GIMGD_DEVICE says which device
 * it serves with (tests: cpu). */
static int may_start(const gimg_remote *r)
{
    const char *dev = getenv("GIMGD_DEVICE");
    return gimg_built_with_cuda() || (dev && *dev);
}

/* The first look for the server, once per job (starting it where this
 * job may); 1 when it serves the job. */
static int look(gimg_remote *r)
{
    pthread_mutex_lock(&r->lock);
    if (r->state == UNKNOWN) {
        gimg_status st = ping(r);
        /* Only where none runs: one that hangs would hold its lock. */
        if (st && t_no_server && may_start(r)) {
            if (!(st = start_server())) {
                r->started = 1;
                st = ping(r);
            }
        }
        r->state = st ? DOWN : UP;
        r->was_up = !st;
        if (st)
            snprintf(r->why, sizeof r->why, "%s", gimg_last_error());
    }
    int up = r->state == UP;
    pthread_mutex_unlock(&r->lock);
    return up;
}

int gimg_remote_running(gimg_remote *r)
{
    if (!r)
        return 0;
    pthread_mutex_lock(&r->lock);
    if (r->state == UNKNOWN) {
        gimg_status st = ping(r);
        if (!st) {
            r->state = UP;
            r->was_up = 1;
        } else if (!t_no_server) { /* one runs, and fails: not to be asked again */
            r->state = DOWN;
            snprintf(r->why, sizeof r->why, "%s", gimg_last_error());
        }
    }
    int up = r->state == UP;
    pthread_mutex_unlock(&r->lock);
    return up;
}

int gimg_remote_prepare(gimg_remote *r, size_t work_bytes)
{
    (void)work_bytes;
    /* auto looks when its cost table sends an operation (wanted). */
    if (!r || r->kind != GIMG_DEV_GPU)
        return gimg_remote_up(r);
    return look(r);
}

int gimg_remote_wanted(gimg_remote *r)
{
    return r ? look(r) : 0;
}

int gimg_remote_was_up(gimg_remote *r)
{
    if (!r)
        return 0;
    pthread_mutex_lock(&r->lock);
    int was = r->was_up;
    pthread_mutex_unlock(&r->lock);
    return was;
}

const char *gimg_remote_why(gimg_remote *r)
{
    return r && r->state == DOWN ? r->why : "";
}

int gimg_remote_up(gimg_remote *r)
{
    if (!r)
        return 0;
    pthread_mutex_lock(&r->lock);
    int up = r->state == UP;
    pthread_mutex_unlock(&r->lock);
    return up;
}

int gimg_remote_lanes(const gimg_remote *r)
{
    return r && r->state == UP ? r->lanes : 0;
}

/* The server failed this job: the rest of it runs here. */
static gimg_status went_down(gimg_remote *r, gimg_status st)
{
    pthread_mutex_lock(&r->lock);
    r->state = DOWN;
    snprintf(r->why, sizeof r->why, "%s; the job ran here instead", gimg_last_error());
    pthread_mutex_unlock(&r->lock);
    return st;
}

/* A reply, its memory file mapped privately (map NULL: none came); for a
 * request through a buffer of the server's, that buffer (buf) and the
 * connection, held until the output is read (release gives them back). */
typedef struct {
    gimg_wire_reply reply;
    unsigned char *map;          /* the reply's file, mapped; or read (heap) */
    size_t map_bytes;
    int heap;                    /* map is malloc'd: a copy of the result */
    unsigned char *buf;
    size_t buf_bytes;
    int sock;
    double t0_ms;
} answer;

static void release(answer *a)
{
    if (a->heap)
        free(a->map);
    else if (a->map)
        munmap(a->map, a->map_bytes);
    if (a->buf)
        munmap(a->buf, a->buf_bytes);
    if (a->sock >= 0)
        close(a->sock);
    a->map = a->buf = NULL;
    a->sock = -1;
}

/* Images from this size on go through a buffer of the server's: below it,
 * a memory file of the request's own costs less than the round trip. */
#define BUFFERED_BYTES ((size_t)1 << 20)

/* BUFFER on a new connection (a->sock): a buffer of the server's of at
 * least `bytes`, mapped for writing at a->buf. */
static gimg_status borrow_buffer(gimg_remote *r, size_t bytes, answer *a)
{
    if ((a->sock = connect_server()) < 0)
        return GIMG_E_IO;
    gimg_wire_request b = {.magic = GIMG_WIRE_MAGIC, .version = GIMG_WIRE_VERSION,
                           .op = GIMG_WIRE_BUFFER, .input_bytes = bytes};
    gimg_wire_reply y;
    int fd = -1;
    gimg_status st = gimg_wire_send(a->sock, &b, sizeof b, -1);
    if (!st)
        st = receive_reply(a->sock, &y, &fd, r->timeout_ms);
    if (!st && y.status != GIMG_OK)
        st = gimg_fail((gimg_status)y.status, "the server: %s", y.message);
    else if (!st && (fd < 0 || y.result_bytes < bytes || y.result_bytes > SIZE_MAX))
        st = gimg_fail(GIMG_E_FORMAT, "a buffer that is not one");
    struct stat fs;
    int seals = fd >= 0 ? fcntl(fd, F_GET_SEALS) : -1;
    if (!st && (fstat(fd, &fs) != 0 || (uint64_t)fs.st_size < y.result_bytes || seals < 0 ||
                !(seals & F_SEAL_SHRINK)))
        st = gimg_fail(GIMG_E_FORMAT, "a buffer that may shrink under its mapping");
    if (!st) {
        void *p = mmap(NULL, (size_t)y.result_bytes, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_POPULATE, fd, 0);
        if (p == MAP_FAILED)
            st = gimg_fail(GIMG_E_NOMEM, "mapping the server's buffer: %s", strerror(errno));
        else {
            a->buf = p;
            a->buf_bytes = (size_t)y.result_bytes;
        }
    }
    if (fd >= 0)
        close(fd);
    return st;
}

/* op with options[0 .. options_bytes) and in's pixels: *a holds the
 * reply, whose result and output pixels lie inside its file or buffer. On
 * failure nothing is held (and the server is down for the job). */
static gimg_status ask(gimg_remote *r, gimg_wire_op op, const void *options, size_t options_bytes,
                       const gimg_image *in, answer *a)
{
    memset(a, 0, sizeof *a);
    a->sock = -1;
    a->t0_ms = gimg_now_ms();
    gimg_wire_request q = {.magic = GIMG_WIRE_MAGIC, .version = GIMG_WIRE_VERSION, .op = op,
                           .options_bytes = (uint32_t)options_bytes};
    gimg_wire_image_of(in, &q.image);
    size_t pixel_bytes;
    int overflow = 0;
    gimg_status st = gimg_wire_image_check(&q.image, &pixel_bytes);
    if (st)
        return went_down(r, st);
    /* An input without pixels here is a JPEG for the server to decode. */
    const int jpeg_in = !in->data && t_jpeg.bits;
    if (jpeg_in) {
        pthread_mutex_lock(&r->lock);
        r->jpeg_sent++;
        pthread_mutex_unlock(&r->lock);
        q.input = GIMG_WIRE_JPEG;
        q.input_bytes = t_jpeg.len;
        pixel_bytes = t_jpeg.len;
    }
    if (t_jpeg.want_jpeg && (op == GIMG_WIRE_CONV || op == GIMG_WIRE_ORIENT)) {
        q.jpeg_out = 1;
        q.jpeg_quality = t_jpeg.quality;
        q.jpeg_subsampling = t_jpeg.subsampling;
    }
    q.pixels_offset = gimg_wire_align(options_bytes, &overflow);
    if (overflow || options_bytes > GIMG_WIRE_MAX_OPTIONS_BYTES ||
        pixel_bytes > SIZE_MAX - q.pixels_offset)
        return went_down(r, gimg_fail(GIMG_E_LIMIT, "a request too large for the server"));
    const size_t bytes = q.pixels_offset + pixel_bytes;
    int fd = -1, reply_fd = -1;
    if (!jpeg_in && bytes >= BUFFERED_BYTES) {
        if ((st = borrow_buffer(r, bytes, a))) {
            release(a);
            return went_down(r, st);
        }
        q.input = GIMG_WIRE_BUFFERED;
        memcpy(a->buf, options, options_bytes);
        gimg_wire_pack(in, a->buf + q.pixels_offset);
        if (!(st = gimg_wire_send(a->sock, &q, sizeof q, -1)))
            st = receive_reply(a->sock, &a->reply, &reply_fd, r->timeout_ms);
    } else {
        /* Written, not mapped (gimg_wire_read says why). */
        const gimg_wire_piece pieces[2] = {
            {0, options, options_bytes, 1, 0},
            jpeg_in ? (gimg_wire_piece){q.pixels_offset, t_jpeg.bits, t_jpeg.len, 1, 0}
                    : gimg_wire_image_piece(q.pixels_offset, in)};
        fd = gimg_wire_memfd_of("gimg-request", bytes, pieces, 2);
        st = fd < 0 ? GIMG_E_NOMEM : GIMG_OK;
        if (!st)
            st = exchange(&q, fd, r->timeout_ms, &a->reply, &reply_fd);
        if (fd >= 0)
            close(fd);
    }
    if (st) {
        if (reply_fd >= 0)
            close(reply_fd);
        release(a);
        return went_down(r, st);
    }
    gimg_wire_reply *y = &a->reply;
    size_t out_bytes = 0;
    const int in_buffer = y->in_buffer == 1;
    if (y->status != GIMG_OK)
        st = gimg_fail((gimg_status)y->status, "the server: %s", y->message);
    else if (y->in_buffer > 1 || (in_buffer && (!a->buf || !y->image.width || y->jpeg ||
                                               y->result_bytes || reply_fd >= 0)))
        st = gimg_fail(GIMG_E_FORMAT, "an output in a buffer it has not");
    else if (!in_buffer && reply_fd < 0)
        st = gimg_fail(GIMG_E_FORMAT, "a reply without its data");
    else if (y->image.width && (st = gimg_wire_image_check(&y->image, &out_bytes)))
        ;
    else if (y->jpeg > 1 || (y->jpeg && !q.jpeg_out))
        st = gimg_fail(GIMG_E_FORMAT, "a JPEG that was not asked for");
    else if (in_buffer ? (y->pixels_offset > a->buf_bytes ||
                          out_bytes > a->buf_bytes - (size_t)y->pixels_offset)
                       : (y->result_bytes > SIZE_MAX ||
                          (y->image.width && !y->jpeg &&
                           (y->pixels_offset % 4096 || y->pixels_offset < y->result_bytes ||
                            out_bytes > SIZE_MAX - y->pixels_offset))))
        st = gimg_fail(GIMG_E_FORMAT, "a reply whose data lies outside its file");
    if (!st && !in_buffer && y->image.width && !y->jpeg) /* pixels: the output's own */
        st = gimg_wire_map(reply_fd, (size_t)y->pixels_offset + out_bytes, 1, &a->map,
                           &a->map_bytes);
    else if (!st && !in_buffer) { /* a result, or a JPEG: read, not mapped */
        const size_t n = (size_t)y->result_bytes;
        a->heap = 1;
        if (!(a->map = malloc(n ? n : 1)))
            st = gimg_fail(GIMG_E_NOMEM, "out of memory for a reply of %zu bytes", n);
        else
            st = gimg_wire_read(reply_fd, n, 0, a->map, n);
        a->map_bytes = n;
    }
    if (reply_fd >= 0)
        close(reply_fd);
    if (st) {
        release(a);
        return went_down(r, st);
    }
    return GIMG_OK;
}

/* The operation came back whole. */
static gimg_status served(gimg_remote *r, const answer *a)
{
    pthread_mutex_lock(&r->lock);
    r->served++;
    r->served_ms += gimg_now_ms() - a->t0_ms;
    r->server_ms += a->reply.server_ms;
    if (a->reply.backend[0])
        snprintf(r->backend, sizeof r->backend, "%s", a->reply.backend);
    pthread_mutex_unlock(&r->lock);
    return GIMG_OK;
}

/* An image operation's answer: its pixels become out's, in place; or, a
 * JPEG, kept for gimg_remote_take_jpeg, and out a layout without pixels. */
static gimg_status image_answer(gimg_remote *r, answer *a, gimg_image *out)
{
    if (!a->reply.image.width) {
        release(a);
        return went_down(r, gimg_fail(GIMG_E_FORMAT, "a reply without its image"));
    }
    if (a->reply.in_buffer) {
        /* Copied out of the server's buffer, which it reuses once we let go. */
        gimg_image view;
        gimg_wire_view(&a->reply.image, a->buf + a->reply.pixels_offset, &view);
        gimg_status st = gimg_image_alloc(out, view.width, view.height, view.channels,
                                          view.sample);
        if (!st) {
            memcpy(out->data, view.data, view.stride_bytes * (size_t)view.height);
            out->maxval = view.maxval;
        }
        release(a);
        return st ? went_down(r, st) : served(r, a);
    }
    if (a->reply.jpeg) {
        free(t_jpeg.out);
        t_jpeg.out_len = (size_t)a->reply.result_bytes;
        t_jpeg.out = a->map; /* read into the heap (ask): ours now */
        a->map = NULL;
        release(a);
        gimg_wire_view(&a->reply.image, NULL, out);
        out->device = gimg_remote_image;
        pthread_mutex_lock(&r->lock);
        r->jpeg_back++;
        pthread_mutex_unlock(&r->lock);
        return served(r, a);
    }
    gimg_wire_view(&a->reply.image, a->map + a->reply.pixels_offset, out);
    out->mapping = a->map;
    out->mapping_bytes = a->map_bytes;
    a->map = NULL; /* out's now; the rest (a buffer the output did not fit) goes back */
    release(a);
    return served(r, a);
}

gimg_status gimg_remote_conv(gimg_remote *r, const gimg_image *in, const gimg_conv_opts *o,
                             gimg_image *out)
{
    memset(out, 0, sizeof *out);
    size_t n = gimg_wire_conv_bytes(o);
    unsigned char *blob = malloc(n);
    if (!blob)
        return went_down(r, gimg_fail(GIMG_E_NOMEM, "out of memory"));
    gimg_wire_put_conv(o, blob);
    answer a;
    gimg_status st = ask(r, GIMG_WIRE_CONV, blob, n, in, &a);
    free(blob);
    return st ? st : image_answer(r, &a, out);
}

gimg_status gimg_remote_orient(gimg_remote *r, const gimg_image *in, gimg_orient_op op,
                               gimg_image *out)
{
    memset(out, 0, sizeof *out);
    uint32_t code = (uint32_t)op;
    answer a;
    gimg_status st = ask(r, GIMG_WIRE_ORIENT, &code, sizeof code, in, &a);
    return st ? st : image_answer(r, &a, out);
}

gimg_status gimg_remote_stats(gimg_remote *r, const gimg_image *in, const gimg_stats_opts *o,
                              gimg_stats *out)
{
    answer a;
    gimg_status st = ask(r, GIMG_WIRE_STATS, o, sizeof *o, in, &a);
    if (st)
        return st;
    int ok = a.reply.result_bytes == sizeof *out;
    if (ok) {
        memcpy(out, a.map, sizeof *out);
        ok = out->channels == in->channels && out->sample == in->sample;
    }
    release(&a);
    if (!ok)
        return went_down(r, gimg_fail(GIMG_E_FORMAT, "a malformed statistics reply"));
    return served(r, &a);
}

gimg_status gimg_remote_hist(gimg_remote *r, const gimg_image *in, const gimg_hist_params *p,
                             gimg_hist *out)
{
    memset(out, 0, sizeof *out);
    answer a;
    gimg_status st = ask(r, GIMG_WIRE_HIST, p, sizeof *p, in, &a);
    if (st)
        return st;
    gimg_hist h;
    const int channels = in->channels + (p->luma ? 1 : 0);
    const size_t counts = (size_t)channels * (size_t)p->bins;
    int ok = a.reply.result_bytes == sizeof h + counts * sizeof(uint64_t);
    if (ok) {
        memcpy(&h, a.map, sizeof h);
        ok = h.channels == channels && h.bins == p->bins && h.lo == p->lo && h.hi == p->hi;
    }
    if (ok && (h.counts = malloc(counts * sizeof(uint64_t)))) {
        memcpy(h.counts, a.map + sizeof h, counts * sizeof(uint64_t));
        *out = h;
    }
    release(&a);
    if (!ok)
        return went_down(r, gimg_fail(GIMG_E_FORMAT, "a malformed histogram reply"));
    if (!out->counts)
        return went_down(r, gimg_fail(GIMG_E_NOMEM, "out of memory"));
    return served(r, &a);
}

int gimg_remote_served(const gimg_remote *r)
{
    return r && r->served > 0;
}

void gimg_remote_report(const gimg_remote *r, FILE *f, const char *tool)
{
    if (!r || r->state == UNKNOWN)
        return;
    if (r->served)
        fprintf(f, "%s: backend: %s, in gimgd\n", tool, r->backend);
    if (r->served)
        fprintf(f, "%s: server: gimgd%s served %d operation%s (%s): %.2f ms, %.2f ms of it in "
                   "the server\n",
                tool, r->started ? ", started for this job," : "", r->served,
                r->served == 1 ? "" : "s", r->backend, r->served_ms, r->server_ms);
    if (r->jpeg_sent || r->jpeg_back)
        fprintf(f, "%s: codecs: the server's: %d JPEG%s sent as %s, %d came back encoded on its "
                   "GPU\n",
                tool, r->jpeg_sent, r->jpeg_sent == 1 ? "" : "s",
                r->jpeg_sent == 1 ? "it is" : "they are", r->jpeg_back);
    if (r->state == DOWN)
        fprintf(f, "%s: server: not used: %s\n", tool, r->why);
}
