/*
 * wire.c — the protocol between the tools and gimgd (wire.h): the
 * server's folder, sealed memory files, one-message sends and receives
 * with a descriptor, and the operations' options as bytes.
 */
#include "wire.h"
#include "io_internal.h"

#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* --------------------------------------------------------------- places */

gimg_status gimg_wire_dir(char *dir, size_t size, int create)
{
    const char *runtime = getenv("XDG_RUNTIME_DIR");
    int n;
    if (runtime && runtime[0] == '/')
        n = snprintf(dir, size, "%s/gimg", runtime);
    else
        n = snprintf(dir, size, "/tmp/gimg-%ld", (long)geteuid());
    if (n < 0 || (size_t)n >= size)
        return gimg_fail(GIMG_E_IO, "the server's folder: name too long");
    if (create && mkdir(dir, 0700) != 0 && errno != EEXIST)
        return gimg_fail(GIMG_E_IO, "%s: %s", dir, strerror(errno));
    /* lstat: a link planted in /tmp by someone else is not our folder. */
    struct stat s;
    if (lstat(dir, &s) != 0) {
        int e = errno; /* ENOENT: no server has made it; the caller may look */
        gimg_fail(GIMG_E_IO, "%s: %s", dir, strerror(e));
        errno = e;
        return GIMG_E_IO;
    }
    if (!S_ISDIR(s.st_mode) || s.st_uid != geteuid())
        return gimg_fail(GIMG_E_IO, "%s: not a folder of this user's", dir);
    if (s.st_mode & 077)
        return gimg_fail(GIMG_E_IO, "%s: open to other users (mode %03o; it must be 0700)", dir,
                         (unsigned)(s.st_mode & 0777));
    return GIMG_OK;
}

gimg_status gimg_wire_path(const char *name, int create, char *path, size_t size)
{
    char dir[4096];
    gimg_status st = gimg_wire_dir(dir, sizeof dir, create);
    if (st)
        return st;
    int n = snprintf(path, size, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= size)
        return gimg_fail(GIMG_E_IO, "%s/%s: name too long", dir, name);
    return GIMG_OK;
}

uint64_t gimg_wire_settings(const char *program)
{
    static const char *const names[] = {"GIMG_GPU_MEM_LIMIT", "GIMG_NVJPEG_LIBRARY",
                                        "CUDA_VISIBLE_DEVICES"};
    uint64_t h = 14695981039346656037ull; /* FNV-1a */
    const char *version = GIMG_VERSION;
    for (const char *p = version; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        /* Unset and empty differ: a separator, then the value or a mark. */
        h = (h ^ 0xffu) * 1099511628211ull;
        for (const char *p = v ? v : "\x01unset"; *p; p++)
            h = (h ^ (unsigned char)*p) * 1099511628211ull;
    }
    struct stat st;
    uint64_t id[4] = {0, 0, 0, 0};
    if (program && stat(program, &st) == 0) {
        id[0] = (uint64_t)st.st_dev;
        id[1] = (uint64_t)st.st_ino;
        id[2] = (uint64_t)st.st_size;
        id[3] = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
    }
    for (int i = 0; i < 4; i++)
        h = (h ^ id[i]) * 1099511628211ull;
    return h;
}

size_t gimg_wire_align(size_t bytes, int *overflow)
{
    const size_t page = 4096;
    if (bytes > SIZE_MAX - (page - 1)) {
        *overflow = 1;
        return 0;
    }
    return (bytes + page - 1) / page * page;
}

/* --------------------------------------------------------- memory files */

#define SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)

int gimg_wire_memfd(const char *name, size_t bytes, unsigned char **map)
{
    *map = NULL;
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        gimg_fail(GIMG_E_IO, "memfd_create: %s", strerror(errno));
        return -1;
    }
    if (bytes == 0)
        return fd;
    if (ftruncate(fd, (off_t)bytes) != 0) {
        gimg_fail(errno == ENOMEM || errno == ENOSPC ? GIMG_E_NOMEM : GIMG_E_IO,
                  "a memory file of %zu bytes: %s", bytes, strerror(errno));
        close(fd);
        return -1;
    }
    /* Every page is written next: made at once rather than a fault each
     * (2048 for a 4096x4096 photo's 8 MB JPEG). */
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED) {
        gimg_fail(GIMG_E_NOMEM, "mapping a memory file of %zu bytes: %s", bytes, strerror(errno));
        close(fd);
        return -1;
    }
    *map = p;
    return fd;
}

gimg_status gimg_wire_seal(int fd, unsigned char *map, size_t bytes)
{
    /* F_SEAL_WRITE needs every writable shared mapping gone. */
    if (map)
        munmap(map, bytes);
    if (fcntl(fd, F_ADD_SEALS, SEALS | F_SEAL_SEAL) != 0)
        return gimg_fail(GIMG_E_IO, "sealing a memory file: %s", strerror(errno));
    return GIMG_OK;
}

/* bytes from p into fd at offset, whole; the failure recorded. */
static gimg_status write_at(int fd, const unsigned char *p, size_t bytes, size_t offset)
{
    if (gimg_pio(fd, (void *)p, bytes, offset, 1))
        return gimg_fail(errno == ENOMEM || errno == ENOSPC ? GIMG_E_NOMEM : GIMG_E_IO,
                         "writing a memory file: %s", errno ? strerror(errno) : "no progress");
    return GIMG_OK;
}

int gimg_wire_memfd_of(const char *name, size_t bytes, const gimg_wire_piece *pieces, int n)
{
    unsigned char *none;
    int fd = gimg_wire_memfd(name, 0, &none);
    if (fd < 0)
        return -1;
    gimg_status st = GIMG_OK;
    if (bytes > 0 && ftruncate(fd, (off_t)bytes) != 0)
        st = gimg_fail(errno == ENOMEM || errno == ENOSPC ? GIMG_E_NOMEM : GIMG_E_IO,
                       "a memory file of %zu bytes: %s", bytes, strerror(errno));
    for (int i = 0; i < n && !st; i++) {
        const gimg_wire_piece *c = &pieces[i];
        const size_t rows = c->rows > 1 ? (size_t)c->rows : 1;
        /* Rows packed in memory go in one write, others a row at a time. */
        const size_t runs = c->stride == c->bytes ? 1 : rows;
        const size_t run_bytes = c->bytes * (rows / runs);
        for (size_t y = 0; y < runs && !st; y++)
            st = write_at(fd, (const unsigned char *)c->data + y * c->stride, run_bytes,
                          c->offset + y * run_bytes);
    }
    if (st || gimg_wire_seal(fd, NULL, 0)) {
        close(fd);
        return -1;
    }
    return fd;
}

gimg_wire_piece gimg_wire_image_piece(size_t offset, const gimg_image *im)
{
    return (gimg_wire_piece){offset, im->data, (size_t)im->width * gimg_pixel_bytes(im),
                             im->height, im->stride_bytes};
}

/* fd's size, once checked to be a sealed memory file of at least need bytes. */
static gimg_status sealed_size(int fd, size_t need, size_t *size)
{
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & SEALS) != SEALS)
        return gimg_fail(GIMG_E_FORMAT, "the data did not come in a sealed memory file");
    struct stat s;
    if (fstat(fd, &s) != 0)
        return gimg_fail(GIMG_E_IO, "fstat: %s", strerror(errno));
    if (s.st_size < 0 || (uint64_t)s.st_size < need)
        return gimg_fail(GIMG_E_FORMAT, "a memory file of %lld bytes, where %zu are needed",
                         (long long)s.st_size, need);
    if ((uint64_t)s.st_size > SIZE_MAX)
        return gimg_fail(GIMG_E_LIMIT, "a memory file too large to map");
    *size = (size_t)s.st_size;
    return GIMG_OK;
}

gimg_status gimg_wire_read(int fd, size_t need, size_t offset, void *dst, size_t bytes)
{
    size_t size;
    gimg_status st = sealed_size(fd, need, &size);
    if (st)
        return st;
    if (offset > size || bytes > size - offset)
        return gimg_fail(GIMG_E_FORMAT, "a read past the end of a memory file");
    if (gimg_pio(fd, dst, bytes, offset, 0))
        return gimg_fail(GIMG_E_IO, "reading a memory file: %s",
                         errno ? strerror(errno) : "cut short");
    return GIMG_OK;
}

gimg_status gimg_wire_map(int fd, size_t need, int private_copy, unsigned char **map,
                          size_t *map_bytes)
{
    *map = NULL;
    *map_bytes = 0;
    size_t bytes;
    gimg_status st = sealed_size(fd, need, &bytes);
    if (st || bytes == 0)
        return st;
    /* A shared view is read whole: its pages mapped at once. (A private
     * copy's would be copied at once: it is left to its faults.) */
    void *p = private_copy ? mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0)
                           : mmap(NULL, bytes, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED)
        return gimg_fail(GIMG_E_NOMEM, "mapping a memory file of %zu bytes: %s", bytes,
                         strerror(errno));
    *map = p;
    *map_bytes = bytes;
    return GIMG_OK;
}

/* ------------------------------------------------------------- messages */

gimg_status gimg_wire_send(int sock, const void *msg, size_t size, int fd)
{
    struct iovec iov = {.iov_base = (void *)msg, .iov_len = size};
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int))];
    } control;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        memset(&control, 0, sizeof control);
        m.msg_control = control.buf;
        m.msg_controllen = sizeof control.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    ssize_t n;
    do
        n = sendmsg(sock, &m, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return gimg_fail(GIMG_E_IO, "send: %s", strerror(errno));
    if ((size_t)n != size)
        return gimg_fail(GIMG_E_IO, "send: %zd of %zu bytes", n, size);
    return GIMG_OK;
}

gimg_status gimg_wire_recv(int sock, void *msg, size_t size, int *fd, int timeout_ms)
{
    *fd = -1;
    struct pollfd p = {.fd = sock, .events = POLLIN};
    int r;
    do
        r = poll(&p, 1, timeout_ms);
    while (r < 0 && errno == EINTR);
    if (r == 0)
        return gimg_fail(GIMG_E_IO, "no answer within %.1f s", timeout_ms / 1e3);
    if (r < 0)
        return gimg_fail(GIMG_E_IO, "poll: %s", strerror(errno));
    /* Room for more than one descriptor, so that extra ones are received
     * (and closed), not left to the kernel to discard silently. */
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(4 * sizeof(int))];
    } control;
    struct iovec iov = {.iov_base = msg, .iov_len = size};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                       .msg_controllen = sizeof control.buf};
    ssize_t n;
    do
        n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return gimg_fail(GIMG_E_IO, "receive: %s", strerror(errno));
    int fds = 0, bad = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
            bad = 1;
            continue;
        }
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; i++) {
            int got;
            memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
            if (fds++ == 0)
                *fd = got;
            else
                close(got);
        }
    }
    if (n == 0 && fds == 0)
        return gimg_fail(GIMG_E_IO, "the connection closed");
    if (fds > 1 || bad || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || (size_t)n != size) {
        if (*fd >= 0)
            close(*fd);
        *fd = -1;
        return gimg_fail(GIMG_E_FORMAT, "a malformed message (%zd bytes, %d descriptors)", n, fds);
    }
    return GIMG_OK;
}

/* --------------------------------------------------------------- images */

gimg_status gimg_wire_image_check(const gimg_wire_image *w, size_t *bytes)
{
    if (w->sample != GIMG_U8 && w->sample != GIMG_U16 && w->sample != GIMG_F32)
        return gimg_fail(GIMG_E_FORMAT, "a sample type of %u bytes", w->sample);
    if (w->channels < 1 || w->channels > 4)
        return gimg_fail(GIMG_E_FORMAT, "%u channels", w->channels);
    if (w->maxval > (w->sample == GIMG_U8 ? 255u : w->sample == GIMG_U16 ? 65535u : 0u))
        return gimg_fail(GIMG_E_FORMAT, "a maxval of %u for %u-byte samples", w->maxval,
                         w->sample);
    if (w->width < 1 || w->height < 1 || w->width > INT32_MAX || w->height > INT32_MAX)
        return gimg_fail(GIMG_E_FORMAT, "an image of %u x %u", w->width, w->height);
    return gimg_check_size(w->width, w->height, (int)w->channels, (gimg_sample)w->sample, NULL,
                           bytes);
}

void gimg_wire_image_of(const gimg_image *im, gimg_wire_image *w)
{
    w->width = (uint32_t)im->width;
    w->height = (uint32_t)im->height;
    w->channels = (uint32_t)im->channels;
    w->sample = (uint32_t)im->sample;
    w->maxval = im->maxval;
}

void gimg_wire_pack(const gimg_image *im, unsigned char *dst)
{
    const size_t row = (size_t)im->width * gimg_pixel_bytes(im);
    if (im->stride_bytes == row) {
        memcpy(dst, im->data, row * (size_t)im->height);
        return;
    }
    for (int y = 0; y < im->height; y++)
        memcpy(dst + row * (size_t)y, gimg_row(im, y), row);
}

void gimg_wire_view(const gimg_wire_image *w, unsigned char *pixels, gimg_image *im)
{
    memset(im, 0, sizeof *im);
    im->width = (int)w->width;
    im->height = (int)w->height;
    im->channels = (int)w->channels;
    im->sample = (gimg_sample)w->sample;
    im->maxval = w->maxval;
    im->stride_bytes = (size_t)im->width * gimg_pixel_bytes(im);
    im->data = pixels;
}

/* ------------------------------------------------- convolution options */

/* The options' bytes: a head, then each kernel's head and its floats
 * (taps; taps_y for a magnitude; row and col for a separable kernel). */
typedef struct {
    uint32_t n_kernels, border, alpha, absolute;
    float scale, bias;
} conv_head;

typedef struct {
    char name[48];
    uint32_t kind, width, height, anchor_x, anchor_y;
    double divided_by;
} kernel_head;

static size_t kernel_floats(const gimg_kernel *k)
{
    size_t taps = (size_t)k->width * (size_t)k->height;
    return taps + (k->kind == GIMG_KERNEL_MAGNITUDE ? taps : 0) +
           (k->kind == GIMG_KERNEL_SEPARABLE ? (size_t)k->width + (size_t)k->height : 0);
}

size_t gimg_wire_conv_bytes(const gimg_conv_opts *o)
{
    size_t n = sizeof(conv_head);
    for (int i = 0; i < o->n_kernels; i++)
        n += sizeof(kernel_head) + kernel_floats(&o->kernels[i]) * sizeof(float);
    return n;
}

static unsigned char *put_floats(unsigned char *p, const float *v, size_t n)
{
    memcpy(p, v, n * sizeof(float));
    return p + n * sizeof(float);
}

void gimg_wire_put_conv(const gimg_conv_opts *o, unsigned char *p)
{
    conv_head h = {(uint32_t)o->n_kernels, (uint32_t)o->border, (uint32_t)o->alpha,
                   (uint32_t)o->absolute, o->scale, o->bias};
    memcpy(p, &h, sizeof h);
    p += sizeof h;
    for (int i = 0; i < o->n_kernels; i++) {
        const gimg_kernel *k = &o->kernels[i];
        kernel_head kh;
        memset(&kh, 0, sizeof kh);
        memcpy(kh.name, k->name, sizeof kh.name);
        kh.kind = (uint32_t)k->kind;
        kh.width = (uint32_t)k->width;
        kh.height = (uint32_t)k->height;
        kh.anchor_x = (uint32_t)k->anchor_x;
        kh.anchor_y = (uint32_t)k->anchor_y;
        kh.divided_by = k->divided_by;
        memcpy(p, &kh, sizeof kh);
        p += sizeof kh;
        const size_t taps = (size_t)k->width * (size_t)k->height;
        p = put_floats(p, k->taps, taps);
        if (k->kind == GIMG_KERNEL_MAGNITUDE)
            p = put_floats(p, k->taps_y, taps);
        if (k->kind == GIMG_KERNEL_SEPARABLE) {
            p = put_floats(p, k->row, (size_t)k->width);
            p = put_floats(p, k->col, (size_t)k->height);
        }
    }
}

/* n floats from *src (left bytes), malloc'd into *dst. */
static gimg_status get_floats(const unsigned char **src, size_t *left, size_t n, float **dst)
{
    if (n > *left / sizeof(float))
        return gimg_fail(GIMG_E_FORMAT, "convolution options: truncated");
    if (!(*dst = malloc(n * sizeof(float))))
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    memcpy(*dst, *src, n * sizeof(float));
    *src += n * sizeof(float);
    *left -= n * sizeof(float);
    return GIMG_OK;
}

static gimg_status get_kernel(const unsigned char **src, size_t *left, gimg_kernel *k)
{
    kernel_head kh;
    if (*left < sizeof kh)
        return gimg_fail(GIMG_E_FORMAT, "convolution options: truncated");
    memcpy(&kh, *src, sizeof kh);
    *src += sizeof kh;
    *left -= sizeof kh;
    if (kh.kind > GIMG_KERNEL_MAGNITUDE || kh.width < 1 || kh.width > GIMG_KERNEL_MAX_SIDE ||
        kh.height < 1 || kh.height > GIMG_KERNEL_MAX_SIDE || kh.anchor_x >= kh.width ||
        kh.anchor_y >= kh.height)
        return gimg_fail(GIMG_E_FORMAT, "convolution options: a kernel out of range");
    memcpy(k->name, kh.name, sizeof k->name);
    k->name[sizeof k->name - 1] = '\0';
    k->kind = (gimg_kernel_kind)kh.kind;
    k->width = (int)kh.width;
    k->height = (int)kh.height;
    k->anchor_x = (int)kh.anchor_x;
    k->anchor_y = (int)kh.anchor_y;
    k->divided_by = kh.divided_by;
    const size_t taps = (size_t)k->width * (size_t)k->height;
    gimg_status st = get_floats(src, left, taps, &k->taps);
    if (!st && k->kind == GIMG_KERNEL_MAGNITUDE)
        st = get_floats(src, left, taps, &k->taps_y);
    if (!st && k->kind == GIMG_KERNEL_SEPARABLE && !(st = get_floats(src, left, kh.width, &k->row)))
        st = get_floats(src, left, kh.height, &k->col);
    return st;
}

gimg_status gimg_wire_get_conv(const unsigned char *src, size_t len, gimg_conv_opts *o)
{
    gimg_conv_opts_init(o);
    o->kernels = NULL;
    o->n_kernels = 0;
    conv_head h;
    if (len < sizeof h)
        return gimg_fail(GIMG_E_FORMAT, "convolution options: truncated");
    memcpy(&h, src, sizeof h);
    src += sizeof h;
    len -= sizeof h;
    if (h.n_kernels < 1 || h.n_kernels > 64 || h.border > GIMG_BORDER_ZERO ||
        h.alpha > GIMG_ALPHA_INCLUDE || h.absolute > 1)
        return gimg_fail(GIMG_E_FORMAT, "convolution options out of range");
    gimg_kernel *k = calloc(h.n_kernels, sizeof *k);
    if (!k)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    o->kernels = k;
    o->n_kernels = (int)h.n_kernels;
    o->border = (gimg_border)h.border;
    o->alpha = (gimg_alpha_mode)h.alpha;
    o->absolute = (int)h.absolute;
    o->scale = h.scale;
    o->bias = h.bias;
    gimg_status st = GIMG_OK;
    for (uint32_t i = 0; i < h.n_kernels && !st; i++)
        st = get_kernel(&src, &len, &k[i]);
    if (!st && len != 0)
        st = gimg_fail(GIMG_E_FORMAT, "convolution options: %zu bytes too many", len);
    if (st)
        gimg_wire_free_conv(o);
    return st;
}

void gimg_wire_free_conv(gimg_conv_opts *o)
{
    gimg_kernel *k = (gimg_kernel *)o->kernels;
    for (int i = 0; k && i < o->n_kernels; i++)
        gimg_kernel_free(&k[i]);
    free(k);
    o->kernels = NULL;
    o->n_kernels = 0;
}

/* --------------------------------------------------- report options */

gimg_status gimg_wire_check_stats_opts(const gimg_stats_opts *o)
{
    if ((o->order != 0 && o->order != 1) || o->n_percentiles < 0 ||
        o->n_percentiles > GIMG_STATS_MAX_PERCENTILES)
        return gimg_fail(GIMG_E_FORMAT, "statistics options out of range");
    for (int i = 0; i < o->n_percentiles; i++)
        if (o->percentiles[i].millionths > 100000000 || /* p% in millionths: 100% */
            !memchr(o->percentiles[i].name, '\0', sizeof o->percentiles[i].name))
            return gimg_fail(GIMG_E_FORMAT, "a percentile out of range");
    return GIMG_OK;
}

gimg_status gimg_wire_check_hist_params(const gimg_hist_params *p)
{
    if (p->bins < 1 || p->bins > GIMG_HIST_MAX_BINS || !isfinite(p->lo) || !isfinite(p->hi) ||
        !(p->lo < p->hi) || (p->luma != 0 && p->luma != 1))
        return gimg_fail(GIMG_E_FORMAT, "histogram options out of range");
    return GIMG_OK;
}

/* ------------------------------------------------------- image requests */

gimg_status gimg_wire_check_request(const gimg_wire_request *q, size_t *file_bytes)
{
    *file_bytes = 0;
    if (q->op < GIMG_WIRE_CONV || q->op > GIMG_WIRE_HIST)
        return gimg_fail(GIMG_E_FORMAT, "unknown request %u", q->op);
    size_t pixel_bytes;
    gimg_status st = gimg_wire_image_check(&q->image, &pixel_bytes);
    if (st)
        return st;
    const int transform = q->op == GIMG_WIRE_CONV || q->op == GIMG_WIRE_ORIENT;
    if (q->input == GIMG_WIRE_JPEG) {
        if (!transform || q->image.sample != GIMG_U8 ||
            (q->image.channels != 1 && q->image.channels != 3) || q->input_bytes == 0 ||
            q->input_bytes > GIMG_WIRE_MAX_JPEG_BYTES)
            return gimg_fail(GIMG_E_FORMAT, "a JPEG input out of range");
        pixel_bytes = (size_t)q->input_bytes;
    } else if ((q->input != GIMG_WIRE_PIXELS && q->input != GIMG_WIRE_BUFFERED) ||
               q->input_bytes != 0) {
        return gimg_fail(GIMG_E_FORMAT, "an input of unknown kind %u", q->input);
    }
    if (q->jpeg_out > 1 || (q->jpeg_out && (!transform || q->jpeg_quality < 1 ||
                                            q->jpeg_quality > 100 ||
                                            q->jpeg_subsampling > GIMG_SUBSAMPLE_420)))
        return gimg_fail(GIMG_E_FORMAT, "JPEG output settings out of range");
    int overflow = 0;
    size_t offset = gimg_wire_align(q->options_bytes, &overflow);
    if (q->options_bytes > GIMG_WIRE_MAX_OPTIONS_BYTES || q->pixels_offset != offset ||
        overflow || pixel_bytes > SIZE_MAX - offset)
        return gimg_fail(GIMG_E_FORMAT, "a request whose layout does not add up");
    *file_bytes = offset + pixel_bytes;
    return GIMG_OK;
}

gimg_status gimg_wire_get_options(const gimg_wire_request *q, const unsigned char *file,
                                  gimg_wire_options *o)
{
    memset(o, 0, sizeof *o);
    if (q->op == GIMG_WIRE_CONV)
        return gimg_wire_get_conv(file, q->options_bytes, &o->conv);
    size_t want = q->op == GIMG_WIRE_ORIENT ? sizeof o->orient
                  : q->op == GIMG_WIRE_STATS ? sizeof o->stats
                                             : sizeof o->hist;
    if (q->options_bytes != want)
        return gimg_fail(GIMG_E_FORMAT, "options of %u bytes, where %zu are expected",
                         q->options_bytes, want);
    memcpy(o, file, want);
    switch (q->op) {
    case GIMG_WIRE_ORIENT: /* auto reads metadata: the client resolves it */
        return o->orient < GIMG_ORIENT_AUTO
                   ? GIMG_OK
                   : gimg_fail(GIMG_E_FORMAT, "orientation %u out of range", o->orient);
    case GIMG_WIRE_STATS:
        return gimg_wire_check_stats_opts(&o->stats);
    default:
        return gimg_wire_check_hist_params(&o->hist);
    }
}

void gimg_wire_free_options(const gimg_wire_request *q, gimg_wire_options *o)
{
    if (q->op == GIMG_WIRE_CONV)
        gimg_wire_free_conv(&o->conv);
}
