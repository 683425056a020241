/*
 * unit_server.c — gimgd's protocol and server (lib/wire.h, lib/serve.h,
 * lib/remote.h) without a GPU: a server on the CPU runs on a thread of
 * this program, in a private runtime folder.
 *
 *  - memory files written and read without a mapping: the bytes where
 *    they were put, sealed; unsealed, short files and reads past the end
 *    refused;
 *  - the options' bytes: round trips, and every truncation and every
 *    field out of range refused;
 *  - the operations through the server equal the CPU's, byte for byte, on
 *    awkward sizes of every sample type (the server's results are the
 *    CPU backend's: no tolerance);
 *  - malformed requests (sizes, versions, unsealed or short files, images
 *    over the pixel limit, extra descriptors, unknown operations) are
 *    refused with a reply saying why, and the server serves on;
 *  - a client that connects and sends nothing holds up no one; many
 *    clients at once all get their answers;
 *  - a client facing a server that answers badly (an image or a result
 *    outside its file, an unsealed file, another version, nothing in
 *    time) refuses the answer;
 *  - the folder must be the user's and closed to others; a peer of
 *    another user is refused (as root only: it needs a second user).
 */
#include "check.h"
#include "testimg.h"
#include "gimg_conv.h"
#include "gimg_hist.h"
#include "gimg_orient.h"
#include "gimg_stats.h"
#include "jpeg_internal.h"
#include "remote.h"
#include "serve.h"
#include "wire.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_runtime[48];      /* XDG_RUNTIME_DIR for the server's folder */
static pthread_t g_server;
static int g_server_up;

/* ------------------------------------------------------------ helpers */

static void *server_main(void *arg)
{
    gimg_serve_opts *o = arg;
    if (gimg_serve(o))
        printf("FAIL: setup: the server: %s\n", gimg_last_error());
    return NULL;
}

static int start_server(void)
{
    static gimg_serve_opts o;
    static int ready[2];
    memset(&o, 0, sizeof o);
    gimg_parse_device("cpu", &o.device);
    o.device.no_server = 1;
    o.lock_fd = -1;
    if (pipe(ready) != 0)
        return 0;
    o.ready_fd = ready[1];
    if (pthread_create(&g_server, NULL, server_main, &o) != 0)
        return 0;
    char c = 0;
    ssize_t n = read(ready[0], &c, 1);
    close(ready[0]);
    return n == 1 && c == 'R';
}

static void stop_server(void)
{
    gimg_wire_reply r;
    if (gimg_remote_call(GIMG_WIRE_STOP, 5000, &r) == GIMG_OK)
        pthread_join(g_server, NULL);
}

static gimg_remote *open_remote(void)
{
    gimg_device dev;
    gimg_parse_device("gpu", &dev);
    gimg_remote *r = NULL;
    CHECK(gimg_remote_open(&dev, &r) == GIMG_OK && r, "gimg_remote_open: %s", gimg_last_error());
    if (r)
        CHECK(gimg_remote_wanted(r), "the server is not found: %s", gimg_remote_why(r));
    return r;
}

/* What the tests of the server's results begin with: skipped when the
 * server did not start; r, a client of it (the test returns without). */
#define NEED_REMOTE(r)                                                        \
    if (!g_server_up)                                                         \
        SKIP("the server did not start");                                     \
    gimg_remote *r = open_remote();                                           \
    if (!r)                                                                   \
        return

static int connect_raw(void)
{
    char path[4096];
    if (gimg_wire_path("gimgd.sock", 0, path, sizeof path))
        return -1;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (snprintf(a.sun_path, sizeof a.sun_path, "%s", path) >= (int)sizeof a.sun_path)
        return -1;
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
        close(s);
        s = -1;
    }
    return s;
}

/* Sends raw bytes (with up to two descriptors) and returns the reply's
 * status, or -1 when no well-formed reply came. */
static int raw_request(const void *msg, size_t len, int fd1, int fd2, char *why, size_t why_size)
{
    int s = connect_raw();
    if (s < 0)
        return -1;
    struct iovec iov = {.iov_base = (void *)msg, .iov_len = len};
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(2 * sizeof(int))];
    } control;
    memset(&control, 0, sizeof control);
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    int fds[2] = {fd1, fd2}, n = (fd1 >= 0) + (fd2 >= 0);
    if (n) {
        m.msg_control = control.buf;
        m.msg_controllen = CMSG_SPACE(n * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(n * sizeof(int));
        memcpy(CMSG_DATA(c), fds, n * sizeof(int));
    }
    int status = -1;
    gimg_wire_reply r;
    int rfd;
    if (sendmsg(s, &m, MSG_NOSIGNAL) == (ssize_t)len &&
        gimg_wire_recv(s, &r, sizeof r, &rfd, 10000) == GIMG_OK) {
        status = r.status;
        snprintf(why, why_size, "%.*s", (int)sizeof r.message, r.message);
        if (rfd >= 0)
            close(rfd);
    }
    close(s);
    return status;
}

static int ping_ok(void)
{
    gimg_wire_reply r;
    return gimg_remote_call(GIMG_WIRE_PING, 5000, &r) == GIMG_OK;
}

static int same_pixels(const gimg_image *a, const gimg_image *b)
{
    if (a->width != b->width || a->height != b->height || a->channels != b->channels ||
        a->sample != b->sample || a->maxval != b->maxval)
        return 0;
    size_t row = (size_t)a->width * gimg_pixel_bytes(a);
    for (int y = 0; y < a->height; y++)
        if (memcmp(gimg_row(a, y), gimg_row(b, y), row))
            return 0;
    return 1;
}

/* A sealed memory file of `bytes` (filled with fill), or -1. */
static int sealed_file(size_t bytes, int fill, int seal)
{
    unsigned char *map;
    int fd = gimg_wire_memfd("unit", bytes, &map);
    if (fd < 0)
        return -1;
    if (map)
        memset(map, fill, bytes);
    if (seal) {
        if (gimg_wire_seal(fd, map, bytes)) {
            close(fd);
            return -1;
        }
    } else if (map) {
        munmap(map, bytes);
    }
    return fd;
}

/* ------------------------------------------------------- memory files */

/* gimg_wire_memfd_of and gimg_wire_read: the pieces where they were put,
 * zeros between, sealed; files that are not sealed, too short, or read
 * past their end refused, dst untouched. */
static void test_memory_files_written_and_read(void)
{
    unsigned char a[100], b[5000], got[4096 + 5000];
    for (size_t i = 0; i < sizeof a; i++)
        a[i] = (unsigned char)(i * 7 + 1);
    for (size_t i = 0; i < sizeof b; i++)
        b[i] = (unsigned char)(i * 13 + 5);
    const gimg_wire_piece pieces[2] = {{0, a, sizeof a, 1, 0}, {4096, b, sizeof b, 1, 0}};
    const size_t bytes = 4096 + sizeof b;
    int fd = gimg_wire_memfd_of("unit", bytes, pieces, 2);
    CHECK(fd >= 0, "made: %s", gimg_last_error());
    if (fd < 0)
        return;
    memset(got, 0xA5, sizeof got);
    CHECK(gimg_wire_read(fd, bytes, 0, got, bytes) == GIMG_OK, "read: %s", gimg_last_error());
    int zeros = 1;
    for (size_t i = sizeof a; i < 4096; i++)
        zeros &= got[i] == 0;
    CHECK(!memcmp(got, a, sizeof a) && zeros && !memcmp(got + 4096, b, sizeof b),
          "the pieces are not where they were put");
    CHECK(gimg_wire_read(fd, bytes, 4096 + 10, got, 20) == GIMG_OK && !memcmp(got, b + 10, 20),
          "a read from an offset");
    CHECK(fcntl(fd, F_GET_SEALS) & F_SEAL_WRITE, "not sealed against writing");
    CHECK(write(fd, "x", 1) < 0, "written after sealing");
    memset(got, 0xA5, sizeof got);
    CHECK(gimg_wire_read(fd, bytes + 1, 0, got, 1) == GIMG_E_FORMAT, "a file shorter than needed");
    CHECK(gimg_wire_read(fd, bytes, bytes - 10, got, 11) == GIMG_E_FORMAT, "a read past the end");
    CHECK(gimg_wire_read(fd, bytes, SIZE_MAX, got, 2) == GIMG_E_FORMAT, "an offset past the end");
    CHECK(got[0] == 0xA5 && got[10] == 0xA5, "a refused read wrote");
    close(fd);
    /* Rows stride apart in memory (b's 10 bytes of every 100), packed. */
    const gimg_wire_piece rows = {16, b, 10, 7, 100};
    fd = gimg_wire_memfd_of("unit", 16 + 70, &rows, 1);
    CHECK(fd >= 0 && gimg_wire_read(fd, 86, 0, got, 86) == GIMG_OK, "rows: %s", gimg_last_error());
    int rows_in_place = 1;
    for (int y = 0; y < 7; y++)
        rows_in_place &= !memcmp(got + 16 + 10 * y, b + 100 * y, 10);
    CHECK(rows_in_place, "rows not packed in place");
    if (fd >= 0)
        close(fd);
    int unsealed = sealed_file(64, 1, 0);
    CHECK(unsealed >= 0 && gimg_wire_read(unsealed, 64, 0, got, 64) == GIMG_E_FORMAT,
          "an unsealed file read");
    if (unsealed >= 0)
        close(unsealed);
    int empty = gimg_wire_memfd_of("unit", 0, NULL, 0);
    CHECK(empty >= 0 && gimg_wire_read(empty, 0, 0, got, 0) == GIMG_OK, "an empty file");
    if (empty >= 0)
        close(empty);
}

/* ------------------------------------------------------ options' bytes */

static void make_kernels(gimg_kernel k[3])
{
    memset(k, 0, 3 * sizeof *k);
    CHECK(gimg_kernel_parse("1 2 3 4 5; 6 7 8 9 10; 1 1 1 1 1", 0, 1, &k[0]) == GIMG_OK, "dense");
    CHECK(gimg_kernel_parse("gaussian:1.5", 0, 1, &k[1]) == GIMG_OK, "separable");
    CHECK(gimg_kernel_parse("sobel", 0, 1, &k[2]) == GIMG_OK, "magnitude");
}

static void test_conv_options_round_trip(void)
{
    gimg_kernel k[3];
    make_kernels(k);
    CHECK(k[1].kind == GIMG_KERNEL_SEPARABLE && k[2].kind == GIMG_KERNEL_MAGNITUDE,
          "the kernels are not of the kinds this test needs");
    gimg_conv_opts o;
    gimg_conv_opts_init(&o);
    o.kernels = k;
    o.n_kernels = 3;
    o.border = GIMG_BORDER_REFLECT;
    o.alpha = GIMG_ALPHA_KEEP;
    o.scale = 0.5f;
    o.bias = -3.25f;
    o.absolute = 1;
    size_t n = gimg_wire_conv_bytes(&o);
    unsigned char *b = malloc(n + 1);
    gimg_wire_put_conv(&o, b);
    gimg_conv_opts back;
    CHECK(gimg_wire_get_conv(b, n, &back) == GIMG_OK, "%s", gimg_last_error());
    CHECK(back.n_kernels == 3 && back.border == o.border && back.alpha == o.alpha &&
          back.scale == o.scale && back.bias == o.bias && back.absolute == 1, "the head");
    for (int i = 0; i < back.n_kernels && i < 3; i++) {
        const gimg_kernel *a = &k[i], *z = &back.kernels[i];
        size_t taps = (size_t)a->width * a->height;
        CHECK(!strcmp(a->name, z->name) && a->kind == z->kind && a->width == z->width &&
              a->height == z->height && a->anchor_x == z->anchor_x && a->anchor_y == z->anchor_y &&
              a->divided_by == z->divided_by, "kernel %d's head", i);
        CHECK(!memcmp(a->taps, z->taps, taps * sizeof(float)), "kernel %d's taps", i);
        if (a->kind == GIMG_KERNEL_MAGNITUDE)
            CHECK(z->taps_y && !memcmp(a->taps_y, z->taps_y, taps * sizeof(float)), "taps_y");
        if (a->kind == GIMG_KERNEL_SEPARABLE)
            CHECK(z->row && z->col && !memcmp(a->row, z->row, a->width * sizeof(float)) &&
                      !memcmp(a->col, z->col, a->height * sizeof(float)), "row and col");
    }
    gimg_wire_free_conv(&back);
    /* Every truncation, and one byte too many, are refused. */
    int refused = 0;
    for (size_t len = 0; len < n; len++)
        if (gimg_wire_get_conv(b, len, &back) == GIMG_E_FORMAT && back.kernels == NULL)
            refused++;
    CHECK(refused == (int)n, "%d of %zu truncations refused", refused, n);
    b[n] = 0;
    CHECK(gimg_wire_get_conv(b, n + 1, &back) == GIMG_E_FORMAT, "a byte too many");
    free(b);
    for (int i = 0; i < 3; i++)
        gimg_kernel_free(&k[i]);
}

/* One field of the head (at offset, 4 bytes) or of the first kernel's head
 * set to value: refused. */
static void refuses_field(const char *what, size_t offset, uint32_t value)
{
    gimg_kernel k;
    gimg_kernel_parse("1 2 1; 2 4 2; 1 2 1", 0, 1, &k);
    gimg_conv_opts o;
    gimg_conv_opts_init(&o);
    o.kernels = &k;
    o.n_kernels = 1;
    size_t n = gimg_wire_conv_bytes(&o);
    unsigned char *b = malloc(n);
    gimg_wire_put_conv(&o, b);
    memcpy(b + offset, &value, sizeof value);
    gimg_conv_opts back;
    CHECK(gimg_wire_get_conv(b, n, &back) == GIMG_E_FORMAT, "%s = %u was taken", what, value);
    free(b);
    gimg_kernel_free(&k);
}

static void test_conv_options_out_of_range(void)
{
    /* The head: n_kernels, border, alpha, absolute; then the kernel's
     * name[48], kind, width, height, anchor_x, anchor_y. */
    const size_t head = 24, kh = head + 48;
    refuses_field("n_kernels", 0, 0);
    refuses_field("n_kernels", 0, 65);
    refuses_field("border", 4, 5);
    refuses_field("alpha", 8, 3);
    refuses_field("absolute", 12, 2);
    refuses_field("kind", kh, 3);
    refuses_field("width", kh + 4, 0);
    refuses_field("width", kh + 4, 256);
    refuses_field("height", kh + 8, 0);
    refuses_field("anchor_x", kh + 12, 3);
    refuses_field("anchor_y", kh + 16, 0xffffffffu);
    /* A width that stays in range but leaves the taps short. */
    refuses_field("width", kh + 4, 5);
}

static void test_report_options(void)
{
    gimg_stats_opts s = {.order = 1, .n_percentiles = 1};
    s.percentiles[0].millionths = 100000000;
    strcpy(s.percentiles[0].name, "100");
    CHECK(gimg_wire_check_stats_opts(&s) == GIMG_OK, "%s", gimg_last_error());
    gimg_stats_opts bad = s;
    bad.order = 2;
    CHECK(gimg_wire_check_stats_opts(&bad) == GIMG_E_FORMAT, "order 2");
    bad = s;
    bad.n_percentiles = GIMG_STATS_MAX_PERCENTILES + 1;
    CHECK(gimg_wire_check_stats_opts(&bad) == GIMG_E_FORMAT, "too many percentiles");
    bad = s;
    bad.percentiles[0].millionths = 100000001; /* p * 10^6 for p in 0..100 */
    CHECK(gimg_wire_check_stats_opts(&bad) == GIMG_E_FORMAT, "a percentile past 100");
    bad = s;
    memset(bad.percentiles[0].name, 'x', sizeof bad.percentiles[0].name);
    CHECK(gimg_wire_check_stats_opts(&bad) == GIMG_E_FORMAT, "a name without its end");

    gimg_hist_params p = {.bins = 256, .lo = 0, .hi = 256, .luma = 1};
    CHECK(gimg_wire_check_hist_params(&p) == GIMG_OK, "%s", gimg_last_error());
    gimg_hist_params q = p;
    q.bins = 0;
    CHECK(gimg_wire_check_hist_params(&q) == GIMG_E_FORMAT, "0 bins");
    q = p;
    q.bins = GIMG_HIST_MAX_BINS + 1;
    CHECK(gimg_wire_check_hist_params(&q) == GIMG_E_FORMAT, "too many bins");
    q = p;
    q.lo = NAN;
    CHECK(gimg_wire_check_hist_params(&q) == GIMG_E_FORMAT, "lo NaN");
    q = p;
    q.hi = q.lo;
    CHECK(gimg_wire_check_hist_params(&q) == GIMG_E_FORMAT, "hi == lo");
    q = p;
    q.luma = 2;
    CHECK(gimg_wire_check_hist_params(&q) == GIMG_E_FORMAT, "luma 2");
}

/* ------------------------------------------------- the server's results */

typedef struct {
    int w, h, c;
    gimg_sample sample;
    unsigned maxval;
} layout;

static const layout k_layouts[] = {
    {37, 23, 3, GIMG_U8, 0},     {1, 1, 1, GIMG_U8, 0},    {19, 31, 1, GIMG_U16, 1000},
    {64, 17, 4, GIMG_U8, 0},     {13, 29, 2, GIMG_U16, 0}, {23, 11, 4, GIMG_F32, 0},
    {300, 7, 3, GIMG_U8, 200},
    {700, 600, 3, GIMG_U8, 0},   /* over 1 MiB: through a buffer of the server's */
};

static int make_image(const layout *l, uint64_t seed, gimg_image *im)
{
    if (gimg_image_alloc(im, l->w, l->h, l->c, l->sample))
        return 0;
    if (l->maxval)
        testimg_fill_maxval(im, seed, l->maxval);
    else
        testimg_fill_random(im, seed);
    return 1;
}

static void test_operations_equal_the_cpu(void)
{
    NEED_REMOTE(r);
    gimg_kernel k[3];
    make_kernels(k);
    for (size_t i = 0; i < sizeof k_layouts / sizeof k_layouts[0]; i++) {
        const layout *l = &k_layouts[i];
        gimg_image in, a, b;
        if (!make_image(l, 100 + i, &in))
            continue;
        /* A convolution chain, each alpha mode in turn. */
        gimg_conv_opts o;
        gimg_conv_opts_init(&o);
        o.kernels = k;
        o.n_kernels = 3;
        o.alpha = (gimg_alpha_mode)(i % 3);
        o.border = (gimg_border)(i % 5);
        CHECK(gimg_remote_conv(r, &in, &o, &a) == GIMG_OK, "layout %zu: conv: %s", i,
              gimg_last_error());
        CHECK(gimg_conv_cpu(&in, &o, &b) == GIMG_OK, "conv on the CPU");
        CHECK(same_pixels(&a, &b), "layout %zu: conv differs from the CPU's", i);
        gimg_image_free(&a);
        gimg_image_free(&b);
        /* Every symmetry. */
        for (int op = 0; op < GIMG_ORIENT_AUTO; op++) {
            CHECK(gimg_remote_orient(r, &in, (gimg_orient_op)op, &a) == GIMG_OK,
                  "layout %zu: orient %d: %s", i, op, gimg_last_error());
            gimg_orient_cpu(&in, (gimg_orient_op)op, &b);
            b.maxval = in.maxval;
            CHECK(same_pixels(&a, &b), "layout %zu: orient %d differs", i, op);
            gimg_image_free(&a);
            gimg_image_free(&b);
        }
        /* Statistics with order statistics, where they apply. */
        gimg_stats_opts so = {.order = l->sample != GIMG_F32, .n_percentiles = 1};
        CHECK(gimg_parse_percentile("p", "99.5", &so.percentiles[0]) == GIMG_OK, "parse");
        gimg_stats sa, sb;
        memset(&sa, 0, sizeof sa);
        CHECK(gimg_remote_stats(r, &in, &so, &sa) == GIMG_OK, "layout %zu: stats: %s", i,
              gimg_last_error());
        CHECK(gimg_stats_compute_cpu(&in, &so, &sb) == GIMG_OK, "stats on the CPU");
        CHECK(!memcmp(&sa, &sb, sizeof sa), "layout %zu: stats differ", i);
        /* A histogram with luma. */
        gimg_hist_params p;
        gimg_hist_default_params(&in, &p);
        p.luma = l->c >= 3;
        gimg_hist ha, hb;
        CHECK(gimg_remote_hist(r, &in, &p, &ha) == GIMG_OK, "layout %zu: hist: %s", i,
              gimg_last_error());
        CHECK(gimg_hist_compute_cpu(&in, &p, &hb) == GIMG_OK, "hist on the CPU");
        CHECK(ha.counts && ha.channels == hb.channels && ha.bins == hb.bins &&
                  !memcmp(ha.counts, hb.counts, (size_t)hb.channels * hb.bins * 8) &&
                  !memcmp(ha.below, hb.below, sizeof ha.below) &&
                  !memcmp(ha.above, hb.above, sizeof ha.above) &&
                  !memcmp(ha.nan, hb.nan, sizeof ha.nan),
              "layout %zu: histograms differ", i);
        gimg_hist_free(&ha);
        gimg_hist_free(&hb);
        gimg_image_free(&in);
    }
    CHECK(gimg_remote_up(r), "the server went down: %s", gimg_remote_why(r));
    for (int i = 0; i < 3; i++)
        gimg_kernel_free(&k[i]);
    gimg_remote_close(r);
}

/* A JPEG sent as it is: decoded by the server (libjpeg-turbo on a CPU
 * server), the same pixels as decoding here. */
static void test_jpeg_input(void)
{
    NEED_REMOTE(r);
    gimg_image im, shell, want, decoded, out;
    const layout l = {77, 45, 3, GIMG_U8, 0};
    unsigned char *jpeg = NULL;
    size_t len = 0;
    if (!make_image(&l, 21, &im))
        return;
    gimg_write_opts w;
    gimg_write_opts_init(&w);
    CHECK(gimg_encode(&im, GIMG_FMT_JPEG, &w, &jpeg, &len) == GIMG_OK, "encode");
    gimg_jpeg_facts facts;
    CHECK(jpeg && gimg_jpeg_read_header(jpeg, len, &shell, &facts) == GIMG_OK, "header");
    gimg_remote_jpeg_input(jpeg, len);
    gimg_remote_jpeg_output(&w); /* a CPU server encodes nothing: pixels come back */
    CHECK(gimg_remote_orient(r, &shell, GIMG_ORIENT_ROT270, &out) == GIMG_OK, "%s",
          gimg_last_error());
    gimg_remote_jpeg_done();
    CHECK(gimg_decode_memory(jpeg, len, &decoded) == GIMG_OK, "decode");
    gimg_orient_cpu(&decoded, GIMG_ORIENT_ROT270, &want);
    CHECK(out.data && out.device == NULL && same_pixels(&out, &want),
          "the server's decode and turn differ from this process's");
    gimg_image_free(&out);
    gimg_image_free(&want);
    gimg_image_free(&decoded);
    gimg_image_free(&shell);
    gimg_image_free(&im);
    free(jpeg);
    gimg_remote_close(r);
}

/* A strided input (a region's view) crosses packed. */
static void test_strided_input(void)
{
    NEED_REMOTE(r);
    gimg_image big, a, b;
    const layout l = {50, 40, 3, GIMG_U8, 0};
    if (!make_image(&l, 7, &big))
        return;
    gimg_image view = big;
    view.width = 17;
    view.height = 9;
    view.data = gimg_row(&big, 5) + 3 * 3;
    CHECK(gimg_remote_orient(r, &view, GIMG_ORIENT_ROT90, &a) == GIMG_OK, "%s",
          gimg_last_error());
    gimg_orient_cpu(&view, GIMG_ORIENT_ROT90, &b);
    CHECK(same_pixels(&a, &b), "a strided view, turned, differs");
    gimg_image_free(&a);
    gimg_image_free(&b);
    gimg_image_free(&big);
    gimg_remote_close(r);
}

/* ------------------------------------------------- malformed requests */

static gimg_wire_request good_head(void)
{
    gimg_wire_request q = {.magic = GIMG_WIRE_MAGIC, .version = GIMG_WIRE_VERSION,
                           .op = GIMG_WIRE_ORIENT, .options_bytes = 4, .pixels_offset = 4096};
    q.image.width = 8;
    q.image.height = 8;
    q.image.channels = 1;
    q.image.sample = GIMG_U8;
    return q;
}

static void refused(const char *what, const void *msg, size_t len, int fd1, int fd2, int want,
                    const char *words)
{
    char why[1024] = "";
    int st = raw_request(msg, len, fd1, fd2, why, sizeof why);
    CHECK(st == want, "%s: status %d, expected %d (%s)", what, st, want, why);
    CHECK(!words || strstr(why, words), "%s: '%s' lacks '%s'", what, why, words);
    CHECK(ping_ok(), "%s: the server does not answer since", what);
}

static void test_malformed_requests(void)
{
    if (!g_server_up)
        SKIP("the server did not start");
    gimg_wire_request q = good_head();
    int good = sealed_file(4096 + 64, 0, 1);
    /* The good request itself is served. */
    char why[1024];
    CHECK(raw_request(&q, sizeof q, good, -1, why, sizeof why) == GIMG_OK, "the good one: %s",
          why);
    refused("a short message", &q, 10, -1, -1, GIMG_E_FORMAT, "malformed");
    gimg_wire_request b = q;
    b.magic = 0x12345678;
    refused("another magic", &b, sizeof b, good, -1, GIMG_E_FORMAT, "another version");
    b = q;
    b.version = GIMG_WIRE_VERSION + 1;
    refused("another version", &b, sizeof b, good, -1, GIMG_E_FORMAT, "another version");
    refused("no file", &q, sizeof q, -1, -1, GIMG_E_FORMAT, "without");
    int unsealed = sealed_file(4096 + 64, 0, 0);
    refused("an unsealed file", &q, sizeof q, unsealed, -1, GIMG_E_FORMAT, "sealed");
    int small = sealed_file(4096 + 63, 0, 1);
    refused("a file short of the image", &q, sizeof q, small, -1, GIMG_E_FORMAT, "bytes");
    refused("two files", &q, sizeof q, good, good, GIMG_E_FORMAT, "malformed");
    b = q;
    b.image.width = b.image.height = 100000; /* 10^10 pixels */
    gimg_set_max_pixels((uint64_t)1 << 28);    /* the server's --max-pixels (a thread here) */
    refused("an image over the pixel limit", &b, sizeof b, good, -1, GIMG_E_LIMIT, "--max-pixels");
    gimg_set_max_pixels(GIMG_DEFAULT_MAX_PIXELS);
    refused("an image over its memory file", &b, sizeof b, good, -1, GIMG_E_FORMAT, "bytes");
    b = q;
    b.image.channels = 5;
    refused("5 channels", &b, sizeof b, good, -1, GIMG_E_FORMAT, "channels");
    b = q;
    b.image.sample = 3;
    refused("3-byte samples", &b, sizeof b, good, -1, GIMG_E_FORMAT, "sample");
    b = q;
    b.image.maxval = 256;
    refused("a maxval over 255 for 8 bits", &b, sizeof b, good, -1, GIMG_E_FORMAT, "maxval");
    b = q;
    b.pixels_offset = 4;
    refused("pixels not page-aligned", &b, sizeof b, good, -1, GIMG_E_FORMAT, "layout");
    b = q;
    b.options_bytes = 0xffffffffu;
    refused("options over the limit", &b, sizeof b, good, -1, GIMG_E_FORMAT, "layout");
    b = q;
    b.options_bytes = 3;
    b.pixels_offset = 4096;
    refused("options of the wrong size", &b, sizeof b, good, -1, GIMG_E_FORMAT, "options");
    b = q;
    b.op = 99;
    refused("an unknown operation", &b, sizeof b, good, -1, GIMG_E_FORMAT, "unknown");
    /* orientation 7 is auto, which needs metadata: the client's to resolve. */
    unsigned char *map;
    int seven = gimg_wire_memfd("unit", 4096 + 64, &map);
    if (seven >= 0) {
        uint32_t op = GIMG_ORIENT_AUTO;
        memcpy(map, &op, sizeof op);
        gimg_wire_seal(seven, map, 4096 + 64);
        refused("orientation auto", &q, sizeof q, seven, -1, GIMG_E_FORMAT, "out of range");
        close(seven);
    }
    b = q;
    b.op = GIMG_WIRE_CONV;
    refused("convolution options of 4 bytes", &b, sizeof b, good, -1, GIMG_E_FORMAT,
            "truncated");
    /* JPEG inputs and outputs. */
    b = q;
    b.input = 3;
    refused("an input of kind 3", &b, sizeof b, good, -1, GIMG_E_FORMAT, "unknown kind");
    b.input = GIMG_WIRE_BUFFERED;
    refused("an input in a buffer never lent", &b, sizeof b, good, -1, GIMG_E_FORMAT,
            "not where it says");
    b = q;
    b.op = GIMG_WIRE_BUFFER;
    b.input_bytes = (uint64_t)1 << 62;
    refused("a buffer of 2^62 bytes", &b, sizeof b, -1, -1, GIMG_E_LIMIT, "buffer");
    b = q;
    b.input = GIMG_WIRE_JPEG;
    b.input_bytes = 0;
    refused("a JPEG of 0 bytes", &b, sizeof b, good, -1, GIMG_E_FORMAT, "JPEG input");
    b.input_bytes = 64;
    b.image.sample = GIMG_U16;
    refused("a 16-bit JPEG", &b, sizeof b, good, -1, GIMG_E_FORMAT, "JPEG input");
    b.image.sample = GIMG_U8;
    b.op = GIMG_WIRE_STATS;
    refused("a JPEG for statistics", &b, sizeof b, good, -1, GIMG_E_FORMAT, "JPEG input");
    b.op = GIMG_WIRE_ORIENT;
    refused("a JPEG that is not one", &b, sizeof b, good, -1, GIMG_E_FORMAT, NULL);
    b = q;
    b.jpeg_out = 1;
    b.jpeg_quality = 0;
    refused("JPEG quality 0", &b, sizeof b, good, -1, GIMG_E_FORMAT, "JPEG output");
    b.jpeg_quality = 90;
    b.jpeg_subsampling = 4;
    refused("JPEG subsampling 4", &b, sizeof b, good, -1, GIMG_E_FORMAT, "JPEG output");
    /* A real JPEG whose header says another size than the request. */
    gimg_image im;
    unsigned char *jpeg = NULL;
    size_t jpeg_len = 0;
    const layout l = {10, 6, 3, GIMG_U8, 0};
    if (make_image(&l, 9, &im)) {
        gimg_write_opts w;
        gimg_write_opts_init(&w);
        gimg_encode(&im, GIMG_FMT_JPEG, &w, &jpeg, &jpeg_len);
        gimg_image_free(&im);
    }
    int jf = jpeg ? gimg_wire_memfd("unit", 4096 + jpeg_len, &map) : -1;
    if (jf >= 0) {
        uint32_t op = GIMG_ORIENT_FLIP;
        memcpy(map, &op, sizeof op);
        memcpy(map + 4096, jpeg, jpeg_len);
        gimg_wire_seal(jf, map, 4096 + jpeg_len);
        b = q;
        b.input = GIMG_WIRE_JPEG;
        b.input_bytes = jpeg_len;
        b.image.channels = 3;
        b.image.width = 10;
        b.image.height = 6;
        CHECK(raw_request(&b, sizeof b, jf, -1, why, sizeof why) == GIMG_OK, "the JPEG: %s", why);
        b.image.width = 11;
        refused("a JPEG of another size", &b, sizeof b, jf, -1, GIMG_E_FORMAT, "layout");
        close(jf);
    }
    free(jpeg);
    close(good);
    close(unsealed);
    close(small);
}

/* A buffer lent must be followed by an image request that uses it; the
 * buffer is reused by the next request of its size. */
static void test_buffer_misuse(void)
{
    if (!g_server_up)
        SKIP("the server did not start");
    int s = connect_raw();
    CHECK(s >= 0, "connect");
    if (s < 0)
        return;
    gimg_wire_request b = {.magic = GIMG_WIRE_MAGIC, .version = GIMG_WIRE_VERSION,
                           .op = GIMG_WIRE_BUFFER, .input_bytes = 5000};
    gimg_wire_reply r;
    int fd = -1;
    CHECK(gimg_wire_send(s, &b, sizeof b, -1) == GIMG_OK &&
              gimg_wire_recv(s, &r, sizeof r, &fd, 5000) == GIMG_OK && r.status == GIMG_OK &&
              fd >= 0 && r.result_bytes >= 5000,
          "no buffer lent: %s", r.message);
    int seals = fd >= 0 ? fcntl(fd, F_GET_SEALS) : 0;
    CHECK((seals & (F_SEAL_SHRINK | F_SEAL_GROW)) == (F_SEAL_SHRINK | F_SEAL_GROW),
          "a buffer the client could shrink under the server");
    CHECK(fd < 0 || ftruncate(fd, 0) != 0, "the buffer was shrunk");
    if (fd >= 0)
        close(fd);
    gimg_wire_request ping = {.magic = GIMG_WIRE_MAGIC, .version = GIMG_WIRE_VERSION,
                              .op = GIMG_WIRE_PING};
    CHECK(gimg_wire_send(s, &ping, sizeof ping, -1) == GIMG_OK &&
              gimg_wire_recv(s, &r, sizeof r, &fd, 5000) == GIMG_OK &&
              r.status == GIMG_E_FORMAT && strstr(r.message, "not followed"),
          "a ping after a buffer: status %d (%s)", r.status, r.message);
    close(s);
    CHECK(ping_ok(), "the server does not answer since");
}

/* A client that connects and says nothing holds up no one. */
static void test_stalled_client(void)
{
    if (!g_server_up)
        SKIP("the server did not start");
    int stalled = connect_raw();
    CHECK(stalled >= 0, "connect");
    const double t0 = gimg_now_ms();
    CHECK(ping_ok(), "a ping behind a stalled client");
    CHECK(gimg_now_ms() - t0 < 2000, "the ping waited %.0f ms", gimg_now_ms() - t0);
    if (stalled >= 0)
        close(stalled);
}

typedef struct {
    const gimg_image *in, *want;
    const gimg_conv_opts *o;
    int failures;
} worker_job;

static void *worker(void *arg)
{
    worker_job *j = arg;
    gimg_device dev;
    gimg_parse_device("gpu", &dev);
    gimg_remote *r;
    if (gimg_remote_open(&dev, &r) || !r) {
        j->failures++;
        return NULL;
    }
    for (int i = 0; i < 6; i++) {
        gimg_image out;
        if (!gimg_remote_wanted(r) || gimg_remote_conv(r, j->in, j->o, &out)) {
            j->failures++;
            continue;
        }
        j->failures += !same_pixels(&out, j->want);
        gimg_image_free(&out);
    }
    gimg_remote_close(r);
    return NULL;
}

static void test_concurrent_clients(void)
{
    if (!g_server_up)
        SKIP("the server did not start");
    const layout l = {97, 61, 3, GIMG_U8, 0};
    gimg_image in, want;
    if (!make_image(&l, 11, &in))
        return;
    gimg_kernel k;
    gimg_kernel_parse("box:3", 0, 1, &k);
    gimg_conv_opts o;
    gimg_conv_opts_init(&o);
    o.kernels = &k;
    o.n_kernels = 1;
    gimg_conv_cpu(&in, &o, &want);
    enum { N = 12 };
    pthread_t t[N];
    worker_job jobs[N];
    for (int i = 0; i < N; i++) {
        jobs[i] = (worker_job){&in, &want, &o, 0};
        pthread_create(&t[i], NULL, worker, &jobs[i]);
    }
    int failures = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        failures += jobs[i].failures;
    }
    CHECK(failures == 0, "%d of %d requests failed or differed", failures, N * 6);
    gimg_kernel_free(&k);
    gimg_image_free(&in);
    gimg_image_free(&want);
}

/* ------------------------------------------- a server that answers badly */

typedef struct {
    int listen_fd;
    int kind; /* which bad answer */
} fake_server;

enum { BAD_OUTSIDE, BAD_UNSEALED, BAD_VERSION, BAD_STATUS, BAD_NO_FILE, BAD_SILENCE, BAD_SLOW,
       BAD_KINDS };

static void *fake_main(void *arg)
{
    fake_server *f = arg;
    for (;;) {
        int c = accept(f->listen_fd, NULL, NULL);
        if (c < 0)
            return NULL;
        gimg_wire_request q;
        int fd;
        if (gimg_wire_recv(c, &q, sizeof q, &fd, 5000) == GIMG_OK) {
            if (fd >= 0)
                close(fd);
            gimg_wire_reply r;
            memset(&r, 0, sizeof r);
            r.magic = GIMG_WIRE_MAGIC;
            r.version = GIMG_WIRE_VERSION;
            r.lanes = 1;
            r.settings = gimg_wire_settings("/proc/self/exe");
            int out = -1;
            if (q.op == GIMG_WIRE_STATS) {
                /* A result, read rather than mapped: one byte past the file. */
                r.result_bytes = sizeof(gimg_stats);
                out = sealed_file(sizeof(gimg_stats) - (f->kind == BAD_OUTSIDE), 1,
                                  f->kind != BAD_UNSEALED);
            } else if (q.op != GIMG_WIRE_PING) {
                r.image = q.image;
                r.image.height += f->kind == BAD_OUTSIDE; /* one row past the file */
                out = sealed_file(64, 1, f->kind != BAD_UNSEALED);
            }
            if (q.op != GIMG_WIRE_PING) {
                if (f->kind == BAD_VERSION)
                    r.version++;
                if (f->kind == BAD_STATUS) {
                    r.status = GIMG_E_DEVICE;
                    strcpy(r.message, "the fake's failure");
                }
                if (f->kind == BAD_NO_FILE) {
                    close(out);
                    out = -1;
                }
            }
            if (q.op != GIMG_WIRE_PING && f->kind == BAD_SLOW)
                usleep(1500 * 1000); /* past the client's time limit (1 s) */
            if (q.op == GIMG_WIRE_PING || f->kind != BAD_SILENCE)
                gimg_wire_send(c, &r, sizeof r, out);
            if (out >= 0)
                close(out);
        }
        close(c);
    }
}

static void test_bad_answers(void)
{
    /* A folder of its own, where the fake listens instead of gimgd. */
    char dir[sizeof g_runtime + 16];
    snprintf(dir, sizeof dir, "%s/fake", g_runtime);
    mkdir(dir, 0700);
    setenv("XDG_RUNTIME_DIR", dir, 1);
    setenv("GIMG_SERVER_TIMEOUT", "1", 1);
    char path[4096];
    CHECK(gimg_wire_path("gimgd.sock", 1, path, sizeof path) == GIMG_OK, "%s", gimg_last_error());
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    CHECK(snprintf(a.sun_path, sizeof a.sun_path, "%s", path) < (int)sizeof a.sun_path, "long");
    fake_server f = {socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0), 0};
    CHECK(f.listen_fd >= 0 && bind(f.listen_fd, (struct sockaddr *)&a, sizeof a) == 0 &&
              listen(f.listen_fd, 8) == 0, "the fake's socket: %s", strerror(errno));
    pthread_t t;
    pthread_create(&t, NULL, fake_main, &f);
    const layout l = {8, 8, 1, GIMG_U8, 0};
    gimg_image in, out;
    make_image(&l, 3, &in);
    static const char *const names[] = {"an image outside its file", "an unsealed file",
                                        "another version", "a failure", "no file", "silence",
                                        "no answer in time"};
    for (int kind = 0; kind < BAD_KINDS; kind++) {
        f.kind = kind;
        gimg_device dev;
        gimg_parse_device("gpu", &dev);
        gimg_remote *r;
        CHECK(gimg_remote_open(&dev, &r) == GIMG_OK && r, "open");
        if (!r)
            continue;
        CHECK(gimg_remote_wanted(r), "%s: the fake's ping: %s", names[kind],
              gimg_remote_why(r));
        memset(&out, 0x5A, sizeof out);
        gimg_status st = gimg_remote_orient(r, &in, GIMG_ORIENT_FLIP, &out);
        CHECK(st != GIMG_OK, "%s: taken", names[kind]);
        CHECK(out.data == NULL && out.mapping == NULL, "%s: left an image", names[kind]);
        CHECK(!gimg_remote_up(r) && gimg_remote_why(r)[0], "%s: the server is still trusted",
              names[kind]);
        if (kind == BAD_SLOW)
            CHECK(strstr(gimg_remote_why(r), "no answer within 1.0 s"), "%s: %s", names[kind],
                  gimg_remote_why(r));
        if (st == GIMG_OK)
            gimg_image_free(&out);
        gimg_remote_close(r);
        /* A statistics reply: its result read from the file. */
        CHECK(gimg_remote_open(&dev, &r) == GIMG_OK && r, "open");
        if (!r)
            continue;
        gimg_stats_opts so;
        gimg_stats s;
        memset(&so, 0, sizeof so);
        CHECK(gimg_remote_stats(r, &in, &so, &s) != GIMG_OK, "%s: statistics taken", names[kind]);
        CHECK(!gimg_remote_up(r), "%s: the server is still trusted (statistics)", names[kind]);
        if (kind == BAD_OUTSIDE || kind == BAD_UNSEALED)
            CHECK(strstr(gimg_remote_why(r), kind == BAD_OUTSIDE ? "are needed" : "sealed"),
                  "%s (statistics): %s", names[kind], gimg_remote_why(r));
        gimg_remote_close(r);
    }
    shutdown(f.listen_fd, SHUT_RDWR);
    close(f.listen_fd);
    pthread_join(t, NULL);
    unlink(path);
    gimg_image_free(&in);
    unsetenv("GIMG_SERVER_TIMEOUT");
    setenv("XDG_RUNTIME_DIR", g_runtime, 1);
}

/* ------------------------------------------------------------ security */

static void test_folder_must_be_private(void)
{
    char base[sizeof g_runtime + 16], dir[4096];
    snprintf(base, sizeof base, "%s/priv", g_runtime);
    mkdir(base, 0700);
    setenv("XDG_RUNTIME_DIR", base, 1);
    CHECK(gimg_wire_dir(dir, sizeof dir, 0) == GIMG_E_IO, "a client made the folder");
    CHECK(gimg_wire_dir(dir, sizeof dir, 1) == GIMG_OK, "%s", gimg_last_error());
    struct stat s;
    CHECK(stat(dir, &s) == 0 && (s.st_mode & 0777) == 0700, "made with mode %03o",
          (unsigned)(s.st_mode & 0777));
    chmod(dir, 0755);
    CHECK(gimg_wire_dir(dir, sizeof dir, 1) == GIMG_E_IO && strstr(gimg_last_error(), "open to"),
          "a folder open to others was taken");
    rmdir(dir);
    char target[4096];
    snprintf(target, sizeof target, "%s/elsewhere", base);
    mkdir(target, 0700);
    CHECK(symlink(target, dir) == 0, "symlink");
    CHECK(gimg_wire_dir(dir, sizeof dir, 1) == GIMG_E_IO, "a link was taken for the folder");
    unlink(dir);
    rmdir(target);
    setenv("XDG_RUNTIME_DIR", g_runtime, 1);
}

static void test_peer_of_another_user(void)
{
    if (geteuid() != 0)
        SKIP("needs root, to connect as another user");
    /* A socket in a folder anyone may enter, so that the peer reaches
     * the check itself. */
    char dir[sizeof g_runtime + 16], path[sizeof dir + 8];
    snprintf(dir, sizeof dir, "%s/open", g_runtime);
    mkdir(dir, 0777);
    chmod(dir, 0777);
    chmod(g_runtime, 0711);
    snprintf(path, sizeof path, "%s/s", dir);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    CHECK(snprintf(a.sun_path, sizeof a.sun_path, "%s", path) < (int)sizeof a.sun_path, "long");
    int l = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    CHECK(bind(l, (struct sockaddr *)&a, sizeof a) == 0 && listen(l, 2) == 0, "bind");
    chmod(path, 0777);
    pid_t pid = fork();
    if (pid == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(2);
        int c = socket(AF_UNIX, SOCK_SEQPACKET, 0);
        if (connect(c, (struct sockaddr *)&a, sizeof a) != 0)
            _exit(3);
        char b;
        (void)!read(c, &b, 1);
        _exit(0);
    }
    int c = accept(l, NULL, NULL);
    long uid = 0, peer_pid = 0;
    CHECK(c >= 0 && !gimg_serve_peer_ok(c, &uid, &peer_pid) && uid == 65534,
          "another user's peer was taken (uid %ld)", uid);
    if (c >= 0)
        close(c);
    int status;
    waitpid(pid, &status, 0);
    /* And this user's own peer passes. */
    int self = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    CHECK(connect(self, (struct sockaddr *)&a, sizeof a) == 0, "connect");
    c = accept(l, NULL, NULL);
    CHECK(c >= 0 && gimg_serve_peer_ok(c, &uid, &peer_pid) && peer_pid == getpid(),
          "this user's own peer was refused");
    close(c);
    close(self);
    close(l);
    unlink(path);
    chmod(g_runtime, 0700);
}

int main(void)
{
    snprintf(g_runtime, sizeof g_runtime, "/tmp/gimg-unit-server-XXXXXX");
    if (!mkdtemp(g_runtime)) {
        printf("FAIL: setup: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    setenv("XDG_RUNTIME_DIR", g_runtime, 1);
    unsetenv("GIMG_SERVER");
    /* The server is this program: the build the clients expect. */
    setenv("GIMGD", "/proc/self/exe", 1);
    g_server_up = start_server();
    if (!g_server_up)
        printf("FAIL: setup: the server did not start\n");
    RUN(test_memory_files_written_and_read);
    RUN(test_conv_options_round_trip);
    RUN(test_conv_options_out_of_range);
    RUN(test_report_options);
    RUN(test_operations_equal_the_cpu);
    RUN(test_strided_input);
    RUN(test_jpeg_input);
    RUN(test_malformed_requests);
    RUN(test_buffer_misuse);
    RUN(test_stalled_client);
    RUN(test_concurrent_clients);
    RUN(test_bad_answers);
    RUN(test_folder_must_be_private);
    RUN(test_peer_of_another_user);
    if (g_server_up)
        stop_server();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_runtime);
    (void)!system(cmd);
    return check_summary() || !g_server_up;
}
