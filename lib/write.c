/*
 * write.c — encoding images through the codec table (codec.h), and writing
 * files atomically.
 *
 * Each codec says which layout its format stores (codec.layout); gimg_encode
 * converts to it here, once for every codec, and records what the
 * conversion lost for the tools' warning (gimg_take_losses):
 *   16 -> 8 bit: round(v / 257); float -> 8 bit: round(clamp(v, 0, 1) * 255);
 *   float -> 16 bit: round(clamp(v, 0, 1) * 65535); 8/16 bit -> float: v / 255
 *   or v / 65535; NaN counts as 0; alpha, where the format has none, dropped.
 * The layouts per format are listed in gimg(7), FORMATS.
 */
#include "codec.h"
#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void gimg_write_opts_init(gimg_write_opts *o)
{
    o->format = GIMG_FMT_UNKNOWN;
    o->quality = GIMG_DEFAULT_QUALITY;
    o->png_level = GIMG_DEFAULT_PNG_LEVEL;
    o->jpeg_subsampling = GIMG_SUBSAMPLE_AUTO;
    o->jpeg_progressive = 0;
    o->tiff_compression = GIMG_TIFF_DEFLATE;
    o->webp_lossless = 0;
}

gimg_format gimg_output_format(const char *path, const gimg_write_opts *o, const gimg_image *im)
{
    if (o && o->format != GIMG_FMT_UNKNOWN)
        return o->format;
    if (path && strcmp(path, "-") != 0) {
        gimg_format f = gimg_format_from_path(path);
        if (f != GIMG_FMT_UNKNOWN)
            return f;
    }
    return im && (im->channels == 2 || im->channels == 4) ? GIMG_FMT_PAM : GIMG_FMT_PNM;
}

/* --------------------------------------------------------- conversions */

/* In double: in float, v * 65535 + 0.5 can round up to the next integer
 * for a v just below a half-step (0x3f010101 gave 33025, not 33024). */
static inline uint8_t f32_to_u8(float v)
{
    if (!(v > 0.0f))   /* also NaN */
        return 0;
    if (v >= 1.0f)
        return 255;
    return (uint8_t)((double)v * 255.0 + 0.5);
}

static inline uint16_t f32_to_u16(float v)
{
    if (!(v > 0.0f))
        return 0;
    if (v >= 1.0f)
        return 65535;
    return (uint16_t)((double)v * 65535.0 + 0.5);
}

/* Applies EXPR (which converts in sample i to out sample o) over every
 * kept sample; the conversion is chosen once, outside the loops. */
#define CONVERT_LOOP(IN_T, OUT_T, EXPR)                                          \
    for (int y = 0; y < im->height; y++) {                                       \
        const IN_T *in = (const IN_T *)gimg_row(im, y);                          \
        OUT_T *out = (OUT_T *)gimg_row(view, y);                                 \
        for (size_t x = 0, i = 0, o = 0; x < (size_t)im->width; x++, i += skip)  \
            for (int c = 0; c < channels; c++, i++, o++)                         \
                out[o] = (EXPR);                                                 \
    }

/* *view gets im with `channels` channels (the same, or alpha dropped) and
 * `sample` samples. When nothing needs to change it shares im's pixels
 * and *owned is 0; otherwise the caller frees it. */
static gimg_status convert(const gimg_image *im, int channels, gimg_sample sample,
                           gimg_image *view, int *owned)
{
    *owned = 0;
    if (channels == im->channels && sample == im->sample) {
        *view = *im;
        return GIMG_OK;
    }
    gimg_status st = gimg_image_alloc(view, im->width, im->height, channels, sample);
    if (st)
        return st;
    *owned = 1;
    size_t skip = (size_t)(im->channels - channels);  /* dropped alpha */
    gimg_sample from = im->sample;
    if (from == GIMG_U8 && sample == GIMG_U8) {
        CONVERT_LOOP(uint8_t, uint8_t, in[i])
    } else if (from == GIMG_U8 && sample == GIMG_U16) {
        CONVERT_LOOP(uint8_t, uint16_t, (uint16_t)(in[i] * 257u))
    } else if (from == GIMG_U8) {
        CONVERT_LOOP(uint8_t, float, in[i] / 255.0f)
    } else if (from == GIMG_U16 && sample == GIMG_U8) {
        CONVERT_LOOP(uint16_t, uint8_t, (uint8_t)((in[i] + 128u) / 257u))
    } else if (from == GIMG_U16 && sample == GIMG_U16) {
        CONVERT_LOOP(uint16_t, uint16_t, in[i])
    } else if (from == GIMG_U16) {
        CONVERT_LOOP(uint16_t, float, in[i] / 65535.0f)
    } else if (sample == GIMG_U8) {
        CONVERT_LOOP(float, uint8_t, f32_to_u8(in[i]))
    } else if (sample == GIMG_U16) {
        CONVERT_LOOP(float, uint16_t, f32_to_u16(in[i]))
    } else {
        CONVERT_LOOP(float, float, in[i])
    }
    return GIMG_OK;
}

/* ---------------------------------------------------------- encoding */

static gimg_status check_image(const gimg_image *im)
{
    if (!im || !im->data || im->width < 1 || im->height < 1 || im->width > GIMG_MAX_DIMENSION ||
        im->height > GIMG_MAX_DIMENSION || im->channels < 1 || im->channels > 4 ||
        (im->sample != GIMG_U8 && im->sample != GIMG_U16 && im->sample != GIMG_F32) ||
        im->stride_bytes < (size_t)im->width * gimg_pixel_bytes(im))
        return gimg_fail(GIMG_E_FORMAT, "invalid image to encode");
    return GIMG_OK;
}

/* ------------------------------------------------------------- losses */

static atomic_uint g_losses;
static _Atomic gimg_format g_loss_format;

static unsigned losses_of(const gimg_image *im, int channels, gimg_sample sample)
{
    unsigned l = 0;
    if (channels < im->channels && im->channels % 2 == 0)
        l |= GIMG_LOSS_ALPHA;
    if (im->sample == GIMG_U16 && sample == GIMG_U8)
        l |= GIMG_LOSS_DEPTH;
    if (im->sample == GIMG_F32 && sample != GIMG_F32)
        l |= GIMG_LOSS_FLOAT;
    return l;
}

unsigned gimg_take_losses(gimg_format *first_format)
{
    unsigned l = atomic_exchange(&g_losses, 0);
    gimg_format f = atomic_exchange(&g_loss_format, GIMG_FMT_UNKNOWN);
    if (first_format)
        *first_format = f;
    return l;
}

const char *gimg_loss_text(unsigned losses, char *buf, size_t size)
{
    static const char *const words[] = {"alpha dropped", "16-bit samples narrowed to 8-bit",
                                        "float samples clamped to 0..1 and quantised"};
    size_t n = 0;
    if (size)
        buf[0] = '\0';
    for (unsigned i = 0; i < sizeof words / sizeof words[0] && n < size; i++)
        if (losses >> i & 1) {
            int k = snprintf(buf + n, size - n, "%s%s", n ? ", " : "", words[i]);
            n += k > 0 ? (size_t)k : 0;
        }
    return buf;
}

gimg_status gimg_encode(const gimg_image *im, gimg_format f, const gimg_write_opts *o,
                        unsigned char **buf, size_t *len)
{
    gimg_write_opts defaults;
    *buf = NULL;
    *len = 0;
    if (!o) {
        gimg_write_opts_init(&defaults);
        o = &defaults;
    }
    gimg_status st = check_image(im);
    if (st)
        return st;
    if (o->quality < 1 || o->quality > 100)
        return gimg_fail(GIMG_E_USAGE, "quality %d is not in 1..100", o->quality);
    if (o->png_level < 0 || o->png_level > 12)
        return gimg_fail(GIMG_E_USAGE, "PNG compression level %d is not in 0..12", o->png_level);

    const gimg_codec *c = gimg_codec_of(f);
    if (!c)
        return gimg_fail(GIMG_E_USAGE, "no output format given");
    if (!c->encode)
        return gimg_fail(GIMG_E_USAGE, "%s files can be read but not written", c->name);
    int channels = im->channels;
    gimg_sample sample = im->sample;
    c->layout(&channels, &sample);
    unsigned lost = losses_of(im, channels, sample);
    if (lost) {
        gimg_format none = GIMG_FMT_UNKNOWN;
        atomic_compare_exchange_strong(&g_loss_format, &none, f);
        atomic_fetch_or(&g_losses, lost);
    }
    gimg_image v;
    int owned;
    if ((st = convert(im, channels, sample, &v, &owned)))
        return st;
    st = c->encode(&v, o, buf, len);
    if (owned)
        gimg_image_free(&v);
    return st;
}

/* -------------------------------------------- pending temporary files */

/* A fixed table, because the signal handler may only read memory it can
 * trust mid-update: a slot's path is complete before its state says so. */
#define MAX_PENDING 64
enum { SLOT_FREE, SLOT_FILLING, SLOT_ACTIVE };
static struct {
    atomic_int state;
    char path[PATH_MAX];
} pending[MAX_PENDING];

int gimg_io_register_temp(const char *path)
{
    size_t n = strlen(path);
    if (n >= PATH_MAX)
        return -1;
    for (int i = 0; i < MAX_PENDING; i++) {
        int expected = SLOT_FREE;
        if (atomic_compare_exchange_strong(&pending[i].state, &expected, SLOT_FILLING)) {
            memcpy(pending[i].path, path, n + 1);
            atomic_store(&pending[i].state, SLOT_ACTIVE);
            return i;
        }
    }
    return -1;
}

void gimg_io_unregister_temp(int slot)
{
    if (slot >= 0 && slot < MAX_PENDING)
        atomic_store(&pending[slot].state, SLOT_FREE);
}

/* Async-signal-safe: lock-free atomic loads, unlink() and raise() only. The
 * handler was installed with SA_RESETHAND | SA_NODEFER, so raise() now
 * ends the process with the signal's default action and the parent sees
 * the usual "killed by signal" status. */
static void cleanup_handler(int sig)
{
    for (int i = 0; i < MAX_PENDING; i++)
        if (atomic_load(&pending[i].state) == SLOT_ACTIVE)
            unlink(pending[i].path);
    raise(sig);
}

void gimg_install_signal_cleanup(void)
{
    static const int sigs[] = { SIGINT, SIGTERM };
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old, sa;
        if (sigaction(sigs[i], NULL, &old) != 0)
            continue;
        /* A signal ignored at start (e.g. SIGINT for a background job) stays
         * ignored; a handler the program set itself is left alone too. */
        if (old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO))
            continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = cleanup_handler;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESETHAND | SA_NODEFER;
        sigaction(sigs[i], &sa, NULL);
    }
}

/* ------------------------------------------------------------- writing */

static gimg_status write_all(int fd, const unsigned char *buf, size_t len)
{
    while (len > 0) {
        size_t chunk = len > ((size_t)1 << 30) ? (size_t)1 << 30 : len;
        ssize_t w = write(fd, buf, chunk);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return gimg_fail(GIMG_E_IO, "write error: %s", strerror(errno));
        }
        buf += w;
        len -= (size_t)w;
    }
    return GIMG_OK;
}

/* An output is written as two parts, so that a file's header and an
 * image's own pixel rows can go out without first being copied together. */
typedef struct {
    const unsigned char *head, *body;
    size_t head_len, body_len;
} parts;

static gimg_status write_parts_fd(int fd, const parts *p)
{
    gimg_status st = write_all(fd, p->head, p->head_len);
    return st ? st : write_all(fd, p->body, p->body_len);
}

static gimg_status write_stdout(const parts *p)
{
    if ((p->head_len && fwrite(p->head, 1, p->head_len, stdout) != p->head_len) ||
        (p->body_len && fwrite(p->body, 1, p->body_len, stdout) != p->body_len))
        return gimg_fail(GIMG_E_IO, "write error: %s", strerror(errno));
    if (fflush(stdout) != 0)
        return gimg_fail(GIMG_E_IO, "write error: %s", strerror(errno));
    return GIMG_OK;
}

/* Devices, FIFOs and sockets (e.g. /dev/stdout, /dev/null) are written in
 * place: renaming a file over them would replace the device node. */
static gimg_status write_in_place(const char *path, const parts *p)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return gimg_fail(GIMG_E_IO, "%s", strerror(errno));
    gimg_status st = write_parts_fd(fd, p);
    if (close(fd) != 0 && !st)
        st = gimg_fail(GIMG_E_IO, "write error: %s", strerror(errno));
    return st;
}

/* A hard-to-guess suffix: the name is created with O_EXCL, so a collision
 * only costs a retry. */
static void random_suffix(char out[7])
{
    static atomic_ulong counter;
    static const char digits[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t z = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
                 ((uint64_t)getpid() << 40) ^ (atomic_fetch_add(&counter, 1) * 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    for (int i = 0; i < 6; i++, z /= 62)
        out[i] = digits[z % 62];
    out[6] = '\0';
}

static gimg_status write_file_parts(const char *path, const parts *p)
{
    if (!path || !*path)
        return gimg_fail(GIMG_E_USAGE, "empty output path");
    if (strcmp(path, "-") == 0)
        return write_stdout(p);

    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return gimg_fail(GIMG_E_IO, "%s", strerror(EISDIR));
        if (!S_ISREG(st.st_mode))
            return write_in_place(path, p);
    } else if (errno != ENOENT) {
        return gimg_fail(GIMG_E_IO, "%s", strerror(errno));
    }

    /* Through a symlink, replace the file it names and keep the link. */
    char *real = NULL;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
        real = realpath(path, NULL);
    const char *target = real ? real : path;

    /* The temporary lives beside the target so that rename() is atomic. */
    const char *slash = strrchr(target, '/');
    size_t dir_len = slash ? (size_t)(slash - target) + 1 : 0;
    const char *base = target + dir_len;
    size_t base_len = strlen(base);
    if (base_len > 200)   /* keep ".BASE.gimg-XXXXXX" within NAME_MAX */
        base_len = 200;
    char tmp[PATH_MAX];
    if (dir_len + base_len + 20 > sizeof tmp) {
        free(real);
        return gimg_fail(GIMG_E_IO, "%s", strerror(ENAMETOOLONG));
    }

    int fd = -1, slot = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        char sfx[7];
        random_suffix(sfx);
        snprintf(tmp, sizeof tmp, "%.*s.%.*s.gimg-%s", (int)dir_len, target, (int)base_len, base,
                 sfx);
        /* Registered before it exists, so that a signal on any thread at
         * any moment from now on finds it. Mode 0666 lets the kernel apply
         * the umask (and any default ACL), as for a file the shell creates. */
        slot = gimg_io_register_temp(tmp);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0) {
            int e = errno;
            gimg_io_unregister_temp(slot);
            if (e != EEXIST) {
                free(real);
                return gimg_fail(GIMG_E_IO, "cannot create a temporary file: %s", strerror(e));
            }
        }
    }
    if (fd < 0) {
        free(real);
        return gimg_fail(GIMG_E_IO, "cannot create a temporary file: %s", strerror(EEXIST));
    }

    gimg_status res = write_parts_fd(fd, p);
    if (close(fd) != 0 && !res)
        res = gimg_fail(GIMG_E_IO, "write error: %s", strerror(errno));
    if (!res && rename(tmp, target) != 0)
        res = gimg_fail(GIMG_E_IO, "cannot replace the file: %s", strerror(errno));
    if (res)
        unlink(tmp);
    gimg_io_unregister_temp(slot);
    free(real);
    return res;
}

gimg_status gimg_write_file(const char *path, const unsigned char *buf, size_t len)
{
    parts p = {buf, NULL, len, 0};
    return write_file_parts(path, &p);
}

gimg_status gimg_write(const char *path, const gimg_image *im, const gimg_write_opts *o)
{
    gimg_write_opts defaults;
    if (!o) {
        gimg_write_opts_init(&defaults);
        o = &defaults;
    }
    gimg_format f = gimg_output_format(path, o, im);
    /* 8-bit PAM, and PNM of gray or RGB, store the image's own bytes: send
     * its rows as they are, behind the header, rather than copy them into an
     * encoded buffer. (PNM drops alpha: that goes through gimg_encode.) */
    if ((f == GIMG_FMT_PAM || (f == GIMG_FMT_PNM && im->channels % 2 == 1)) &&
        im->sample == GIMG_U8 && im->stride_bytes == (size_t)im->width * gimg_pixel_bytes(im)) {
        char hdr[GIMG_PNM_HEADER_MAX];
        size_t hl;
        gimg_status st = gimg_pnm_header(im, f, hdr, sizeof hdr, &hl);
        if (st)
            return st;
        parts p = {(const unsigned char *)hdr, im->data, hl, im->stride_bytes * (size_t)im->height};
        return write_file_parts(path, &p);
    }
    unsigned char *buf;
    size_t len;
    gimg_status st = gimg_encode(im, f, o, &buf, &len);
    if (st)
        return st;
    st = gimg_write_file(path, buf, len);
    free(buf);
    return st;
}
