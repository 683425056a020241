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
 *
 * Samples in the file's own units (gimg_image.maxval): each row's
 * maxval_rule says which maxvals its format keeps. ANY (PNM, PAM): all of
 * them; BITS (PNG, TIFF): 2^b - 1 only; FULL (the others): none. An
 * integer image whose maxval the format does not keep is first rescaled to
 * the full range of its own sample type, v' = round(v * full / maxval)
 * (full 255 or 65535, halves up, exact integer arithmetic: the same values
 * netpbm's pamdepth gives), and then converted as above like any
 * full-range image (so 12-bit -> JPEG is v * 65535 / 4095, then / 257).
 * A maxval is kept only while the sample type stays; to float, integers
 * are divided by their maxval (v / 4095), and float images have none.
 * Rescaling records no loss: every value stays distinct, as in a
 * full-range file; narrowing 16 to 8 bits is a loss only above maxval 255.
 */
#include "codec.h"
#include "io_internal.h"
#include "jpeg_internal.h"

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
    o->strip = 0;
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

/* 1 if im's integer samples have a maxval below their type's full range. */
static int has_own_maxval(const gimg_image *im)
{
    return im->maxval != 0 && im->sample != GIMG_F32 &&
           im->maxval < (im->sample == GIMG_U8 ? 255u : 65535u);
}

/* The maxval an encoder receives for im converted to `sample` samples,
 * under its row's maxval_rule (codec.h): im's own where the format keeps
 * it, else 0 (im is then rescaled to the full range). Integer samples
 * only, and only while the sample type stays. */
static unsigned kept_maxval(const gimg_image *im, gimg_sample sample, int rule)
{
    const unsigned m = im->maxval;
    if (!has_own_maxval(im) || sample != im->sample)
        return 0;
    if (rule == GIMG_MAXVAL_ANY || (rule == GIMG_MAXVAL_BITS && (m & (m + 1)) == 0))
        return m;
    return 0;
}

int gimg_io_maxval_kept(const gimg_image *im, int rule)
{
    return !has_own_maxval(im) || kept_maxval(im, im->sample, rule) == im->maxval;
}

/* *out gets im rescaled from 0..maxval to its sample type's full range:
 * v' = round(v * full / maxval), halves up, in exact integer arithmetic
 * (a sample over maxval counts as maxval). Every channel, alpha too. */
static gimg_status rescale_full(const gimg_image *im, gimg_image *out)
{
    const uint32_t m = im->maxval, full = im->sample == GIMG_U8 ? 255u : 65535u;
    uint16_t *lut = malloc((full + 1) * sizeof *lut);
    if (!lut)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    for (uint32_t v = 0; v <= full; v++)  /* (v * full + m / 2) < 2^32 */
        lut[v] = (uint16_t)(((v < m ? v : m) * full + m / 2) / m);
    gimg_status st = gimg_image_alloc(out, im->width, im->height, im->channels, im->sample);
    if (st) {
        free(lut);
        return st;
    }
    const size_t n = (size_t)im->width * (size_t)im->channels;
    for (int y = 0; y < im->height; y++) {
        if (im->sample == GIMG_U8) {
            const uint8_t *in = gimg_row(im, y);
            uint8_t *o = gimg_row(out, y);
            for (size_t i = 0; i < n; i++)
                o[i] = (uint8_t)lut[in[i]];
        } else {
            const uint16_t *in = (const uint16_t *)gimg_row(im, y);
            uint16_t *o = (uint16_t *)gimg_row(out, y);
            for (size_t i = 0; i < n; i++)
                o[i] = lut[in[i]];
        }
    }
    free(lut);
    return GIMG_OK;
}

/* The layout conversion proper, from full-range (or float) samples or
 * with maxval kept: see convert(). fmax divides integers going to float. */
static gimg_status convert_layout(const gimg_image *im, int channels, gimg_sample sample,
                                  float fmax, gimg_image *view, int *owned)
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
        CONVERT_LOOP(uint8_t, float, in[i] / fmax)
    } else if (from == GIMG_U16 && sample == GIMG_U8) {
        CONVERT_LOOP(uint16_t, uint8_t, (uint8_t)((in[i] + 128u) / 257u))
    } else if (from == GIMG_U16 && sample == GIMG_U16) {
        CONVERT_LOOP(uint16_t, uint16_t, in[i])
    } else if (from == GIMG_U16) {
        CONVERT_LOOP(uint16_t, float, in[i] / fmax)
    } else if (sample == GIMG_U8) {
        CONVERT_LOOP(float, uint8_t, f32_to_u8(in[i]))
    } else if (sample == GIMG_U16) {
        CONVERT_LOOP(float, uint16_t, f32_to_u16(in[i]))
    } else {
        CONVERT_LOOP(float, float, in[i])
    }
    return GIMG_OK;
}

/* *view gets im with `channels` channels (the same, or alpha dropped) and
 * `sample` samples, its maxval as the format's maxval_rule allows (see the
 * top): integer samples whose maxval the format cannot keep are rescaled
 * to the full range first, then converted as full-range samples are;
 * integers going to float are divided by their maxval. When nothing needs
 * to change it shares im's pixels and *owned is 0; otherwise the caller
 * frees it (its meta is NULL). */
static gimg_status convert(const gimg_image *im, int channels, gimg_sample sample,
                           int maxval_rule, gimg_image *view, int *owned)
{
    const unsigned kept = kept_maxval(im, sample, maxval_rule);
    const int rescale = has_own_maxval(im) && kept == 0 && sample != GIMG_F32;
    gimg_status st;
    if (!rescale) {
        if ((st = convert_layout(im, channels, sample, (float)gimg_image_max(im), view, owned)))
            return st;
        view->maxval = kept;
        return GIMG_OK;
    }
    gimg_image full;
    if ((st = rescale_full(im, &full)))
        return st;
    st = convert_layout(&full, channels, sample, (float)gimg_image_max(&full), view,
                        owned);
    if (st || *owned) {
        gimg_image_free(&full);
        return st;
    }
    *view = full;  /* nothing more to change: the rescaled image is the view */
    *owned = 1;
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
    /* A 16-bit image whose maxval is at most 255 narrows without loss. */
    if (im->sample == GIMG_U16 && sample == GIMG_U8 && gimg_image_max(im) > 255)
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

const char *gimg_io_bits_text(unsigned bits, const char *const *words, unsigned n_words,
                              char *buf, size_t size)
{
    size_t n = 0;
    if (size)
        buf[0] = '\0';
    for (unsigned i = 0; i < n_words && n < size; i++)
        if (bits >> i & 1) {
            int k = snprintf(buf + n, size - n, "%s%s", n ? ", " : "", words[i]);
            n += k > 0 ? (size_t)k : 0;
        }
    return buf;
}

const char *gimg_loss_text(unsigned losses, char *buf, size_t size)
{
    static const char *const words[] = {"alpha dropped", "16-bit samples narrowed to 8-bit",
                                        "float samples clamped to 0..1 and quantised"};
    return gimg_io_bits_text(losses, words, sizeof words / sizeof words[0], buf, size);
}

/* ----------------------------------------------------------- metadata */

static atomic_uint g_dropped;
static _Atomic gimg_format g_dropped_format;

unsigned gimg_take_dropped_meta(gimg_format *first_format)
{
    unsigned d = atomic_exchange(&g_dropped, 0);
    gimg_format f = atomic_exchange(&g_dropped_format, GIMG_FMT_UNKNOWN);
    if (first_format)
        *first_format = f;
    return d;
}

/* Records what of the kinds `present` codec c cannot hold. */
static void record_dropped(unsigned present, unsigned held, gimg_format f)
{
    unsigned dropped = present & ~held;
    if (present & GIMG_META_EXIF || held & GIMG_META_EXIF)
        dropped &= ~(unsigned)GIMG_META_ORIENTATION; /* said as EXIF, or kept inside it */
    if (dropped) {
        gimg_format none = GIMG_FMT_UNKNOWN;
        atomic_compare_exchange_strong(&g_dropped_format, &none, f);
        atomic_fetch_or(&g_dropped, dropped);
    }
}

void gimg_io_note_dropped_meta(const gimg_meta *m, const gimg_write_opts *o, gimg_format f)
{
    record_dropped(o->strip ? 0 : gimg_meta_kinds(m), gimg_codec_of(f)->meta, f);
}

/* The metadata codec c gets for m: none under --strip; m itself when c
 * holds all of it; otherwise a copy (*owned = 1) without what c cannot
 * hold (the format has no place for it, or no room: c->unfit_meta), which
 * is recorded as dropped. The orientation travels inside the EXIF block
 * for the formats that keep it only there: such a format gets a minimal
 * block when m has an orientation (from a TIFF tag, or in an EXIF block
 * too large for it) but no EXIF it can hold; a TIFF output writes
 * m->orientation as its own tag. */
gimg_status gimg_io_meta_for(gimg_meta *m, const gimg_codec *c, const gimg_write_opts *o,
                             gimg_meta **out, int *owned)
{
    *out = NULL;
    *owned = 0;
    unsigned present = o->strip ? 0 : gimg_meta_kinds(m);
    if (!present)
        return GIMG_OK;
    unsigned held = c->meta & ~(c->unfit_meta ? c->unfit_meta(m) : 0u);
    int add_exif = (c->meta & GIMG_META_EXIF) && !(c->meta & GIMG_META_ORIENTATION) &&
                   !(present & held & GIMG_META_EXIF) && m->orientation > 1;
    record_dropped(present, held, c->format);
    unsigned kept_whole = held & GIMG_META_EXIF ? held | GIMG_META_ORIENTATION : held;
    if (!(present & ~kept_whole) && !add_exif) {
        *out = m;
        return GIMG_OK;
    }
    if (!(present & held) && !add_exif)
        return GIMG_OK;
    gimg_meta *d;
    gimg_status st = gimg_meta_copy(m, &d);
    if (st)
        return st;
    gimg_meta_drop(d, ~held & ~(unsigned)GIMG_META_ORIENTATION);
    if (add_exif && !(d->exif = gimg_exif_minimal(d->orientation, &d->exif_bytes))) {
        gimg_meta_free(d);
        return gimg_fail(GIMG_E_NOMEM, "out of memory for metadata");
    }
    *out = d;
    *owned = 1;
    return GIMG_OK;
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
    /* The memory budget: what an encoder allocates beside the image, about
     * its size (the stream), three times for PNG (the filtered rows and
     * the two candidate streams that race: codec_png.c). */
    char what[64];
    snprintf(what, sizeof what, "encoding it as %s", c->name);
    const uint64_t image = (uint64_t)im->width * (uint64_t)im->height * (uint64_t)channels *
                           (uint64_t)sample;
    if ((st = gimg_check_memory(f == GIMG_FMT_PNG ? 3 * image : image, what)))
        return st;
    gimg_image v;
    int owned;
    gimg_meta *meta = NULL;
    int meta_owned = 0;
    if ((st = gimg_io_meta_for(im->meta, c, o, &meta, &meta_owned)))
        return st;
    if ((st = convert(im, channels, sample, c->maxval_rule, &v, &owned))) {
        if (meta_owned)
            gimg_meta_free(meta);
        return st;
    }
    v.meta = meta;
    st = c->encode(&v, o, buf, len);
    v.meta = NULL; /* borrowed, or freed below */
    if (owned)
        gimg_image_free(&v);
    if (meta_owned)
        gimg_meta_free(meta);
    return st;
}

/* -------------------------------------------- pending temporary files */

/* The registry is read by a signal handler, which may only read memory it
 * can trust mid-update: a slot's path is complete before its state says
 * so, and memory once part of the registry is never freed or reused for
 * anything else (a torn read can at worst name another temporary file, or
 * none). It starts with one static block of slots and grows by blocks
 * linked in with a compare-and-swap, so that it holds as many temporary
 * files as there are writers at once (-j allows 1024 workers) without
 * reserving room for all of them up front. */
#define SLOTS_PER_BLOCK 64
enum { SLOT_FREE, SLOT_FILLING, SLOT_ACTIVE };
typedef struct slot_block {
    struct {
        atomic_int state;
        char path[PATH_MAX];
    } slot[SLOTS_PER_BLOCK];
    _Atomic(struct slot_block *) next;
} slot_block;
static slot_block first_block;

int gimg_io_register_temp(const char *path)
{
    size_t n = strlen(path);
    if (n >= PATH_MAX)
        return -1;
    slot_block *b = &first_block;
    for (int base = 0;; base += SLOTS_PER_BLOCK) {
        for (int i = 0; i < SLOTS_PER_BLOCK; i++) {
            int expected = SLOT_FREE;
            if (atomic_compare_exchange_strong(&b->slot[i].state, &expected, SLOT_FILLING)) {
                memcpy(b->slot[i].path, path, n + 1);
                atomic_store(&b->slot[i].state, SLOT_ACTIVE);
                return base + i;
            }
        }
        slot_block *next = atomic_load(&b->next);
        if (!next) {
            slot_block *fresh = calloc(1, sizeof *fresh);
            if (!fresh)
                return -1; /* not cleaned up on a signal, but written all the same */
            slot_block *none = NULL;
            if (atomic_compare_exchange_strong(&b->next, &none, fresh))
                next = fresh;
            else {        /* another thread linked one in first */
                free(fresh);
                next = none;
            }
        }
        b = next;
    }
}

void gimg_io_unregister_temp(int slot)
{
    slot_block *b = &first_block;
    for (; slot >= SLOTS_PER_BLOCK && b; slot -= SLOTS_PER_BLOCK)
        b = atomic_load(&b->next);
    if (slot >= 0 && b)
        atomic_store(&b->slot[slot].state, SLOT_FREE);
}

int gimg_io_temp_capacity(void)
{
    int n = 0;
    for (slot_block *b = &first_block; b; b = atomic_load(&b->next))
        n += SLOTS_PER_BLOCK;
    return n;
}

/* Async-signal-safe: lock-free atomic loads, unlink() and raise() only. The
 * handler was installed with SA_RESETHAND | SA_NODEFER, so raise() now
 * ends the process with the signal's default action and the parent sees
 * the usual "killed by signal" status. */
static void cleanup_handler(int sig)
{
    for (slot_block *b = &first_block; b; b = atomic_load(&b->next))
        for (int i = 0; i < SLOTS_PER_BLOCK; i++)
            if (atomic_load(&b->slot[i].state) == SLOT_ACTIVE)
                unlink(b->slot[i].path);
    raise(sig);
}

void gimg_install_signal_cleanup(void)
{
    /* SIGPIPE: a report tool writing into `head`; SIGHUP: the terminal
     * closed. Each ends the tool as it would, its temporary files removed. */
    static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGPIPE };
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
    /* A write past `ulimit -f` raises SIGXFSZ, whose default action kills
     * the process in the middle of a temporary file. Ignored, the write
     * fails with EFBIG instead: reported, and the temporary file removed. */
    struct sigaction old;
    if (sigaction(SIGXFSZ, NULL, &old) == 0 && old.sa_handler == SIG_DFL &&
        !(old.sa_flags & SA_SIGINFO))
        signal(SIGXFSZ, SIG_IGN);
}

/* ------------------------------------------------------------- writing */

/* All of buf, at offset at (< 0: at the file's position). */
static gimg_status write_all(int fd, const unsigned char *buf, size_t len, int64_t at)
{
    while (len > 0) {
        size_t chunk = len > ((size_t)1 << 30) ? (size_t)1 << 30 : len;
        ssize_t w = at < 0 ? write(fd, buf, chunk) : pwrite(fd, buf, chunk, (off_t)at);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return gimg_fail(GIMG_E_IO, "write error: %s", strerror(errno));
        }
        buf += w;
        len -= (size_t)w;
        at += at < 0 ? 0 : w;
    }
    return GIMG_OK;
}

/* An output is written as two parts, so that a file's header and an
 * image's own pixel rows can go out without first being copied together. */
typedef struct {
    const unsigned char *head, *body;
    size_t head_len, body_len;
} parts;

/* The reason alone, as gimg_cli_close_stdout() says it: the tools name
 * standard output ("gtranspose: standard output: No space left on device"). */
static gimg_status write_stdout(const parts *p)
{
    if ((p->head_len && fwrite(p->head, 1, p->head_len, stdout) != p->head_len) ||
        (p->body_len && fwrite(p->body, 1, p->body_len, stdout) != p->body_len) ||
        fflush(stdout) != 0)
        return gimg_fail(GIMG_E_IO, "%s", strerror(errno));
    return GIMG_OK;
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

/* The new file takes the place of old: it gets old's permission bits
 * (a 0600 file stays 0600, not 0666 less the umask) and, where the system
 * lets us (as root), its owner and group; the owner first, since changing
 * it clears the set-user-ID bits. Like every atomic writer it is still a
 * new file: hard links to old keep the old contents, and ACLs and extended
 * attributes are not copied. */
static gimg_status keep_mode_and_owner(int fd, const struct stat *old)
{
    if ((old->st_uid != geteuid() || old->st_gid != getegid()) &&
        fchown(fd, old->st_uid, old->st_gid) != 0 && geteuid() == 0)
        return gimg_fail(GIMG_E_IO, "cannot keep the owner of the file: %s", strerror(errno));
    /* Without the right to the owner (not root), the group alone if we may. */
    struct stat now;
    if (fstat(fd, &now) == 0 && now.st_gid != old->st_gid)
        (void)!fchown(fd, (uid_t)-1, old->st_gid);
    if (fchmod(fd, old->st_mode & 07777) != 0)
        return gimg_fail(GIMG_E_IO, "cannot keep the permissions of the file: %s",
                         strerror(errno));
    return GIMG_OK;
}

struct gimg_out_file {
    int fd;
    int slot;             /* the temporary's in the signal registry; -1: in place */
    char tmp[PATH_MAX];   /* the temporary, renamed to target by commit */
    char *target;
};

gimg_status gimg_out_open(const char *path, gimg_out_file **out)
{
    *out = NULL;
    if (!path || !*path || strcmp(path, "-") == 0)
        return gimg_fail(GIMG_E_USAGE, "gimg_out_open: no file named");
    gimg_out_file *f = calloc(1, sizeof *f);
    if (!f)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    f->fd = -1;
    f->slot = -1;
    struct stat st, old;
    int replacing = 0; /* old: the file replaced, whose mode and owner stay */
    if (stat(path, &old) == 0) {
        if (S_ISDIR(old.st_mode)) {
            free(f);
            return gimg_fail(GIMG_E_IO, "%s", strerror(EISDIR));
        }
        if (!S_ISREG(old.st_mode)) {
            /* Devices, FIFOs and sockets (e.g. /dev/stdout, /dev/null) are
             * written in place: renaming a file over them would replace the
             * device node. */
            if ((f->fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY)) < 0) {
                free(f);
                return gimg_fail(GIMG_E_IO, "%s", strerror(errno));
            }
            *out = f;
            return GIMG_OK;
        }
        replacing = 1;
    } else if (errno != ENOENT) {
        free(f);
        return gimg_fail(GIMG_E_IO, "%s", strerror(errno));
    }

    /* Through a symlink, replace the file it names and keep the link. */
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
        f->target = realpath(path, NULL);
    if (!f->target && !(f->target = strdup(path))) {
        free(f);
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    }
    const char *target = f->target;

    /* The temporary lives beside the target so that rename() is atomic. */
    const char *slash = strrchr(target, '/');
    size_t dir_len = slash ? (size_t)(slash - target) + 1 : 0;
    const char *base = target + dir_len;
    size_t base_len = strlen(base);
    if (base_len > 200)   /* keep ".BASE.gimg-XXXXXX" within NAME_MAX */
        base_len = 200;
    if (dir_len + base_len + 20 > sizeof f->tmp) {
        free(f->target);
        free(f);
        return gimg_fail(GIMG_E_IO, "%s", strerror(ENAMETOOLONG));
    }
    for (int attempt = 0; attempt < 100 && f->fd < 0; attempt++) {
        char sfx[7];
        random_suffix(sfx);
        snprintf(f->tmp, sizeof f->tmp, "%.*s.%.*s.gimg-%s", (int)dir_len, target,
                 (int)base_len, base, sfx);
        /* Registered before it exists, so that a signal on any thread at
         * any moment from now on finds it. Mode 0666 lets the kernel apply
         * the umask (and any default ACL), as for a file the shell creates. */
        f->slot = gimg_io_register_temp(f->tmp);
        f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (f->fd < 0) {
            int e = errno;
            gimg_io_unregister_temp(f->slot);
            f->slot = -1;
            if (e != EEXIST) {
                free(f->target);
                free(f);
                return gimg_fail(GIMG_E_IO, "cannot create a temporary file: %s", strerror(e));
            }
        }
    }
    if (f->fd < 0) {
        free(f->target);
        free(f);
        return gimg_fail(GIMG_E_IO, "cannot create a temporary file: %s", strerror(EEXIST));
    }
    gimg_status res = replacing ? keep_mode_and_owner(f->fd, &old) : GIMG_OK;
    if (res) {
        gimg_out_abort(f);
        return res;
    }
    *out = f;
    return GIMG_OK;
}

gimg_status gimg_out_write(gimg_out_file *f, const void *buf, size_t len)
{
    return write_all(f->fd, buf, len, -1);
}

gimg_status gimg_out_pwrite(gimg_out_file *f, const void *buf, size_t len, uint64_t at)
{
    if (f->slot < 0 || at > (uint64_t)INT64_MAX - len)
        return gimg_fail(GIMG_E_USAGE, "gimg_out_pwrite: not a file of its own, or past its end");
    return write_all(f->fd, buf, len, (int64_t)at);
}

gimg_status gimg_out_reserve(gimg_out_file *f, uint64_t bytes)
{
    if (f->slot < 0 || bytes > (uint64_t)INT64_MAX)
        return gimg_fail(GIMG_E_USAGE, "gimg_out_reserve: not a file of its own, or too large");
    int e = fallocate(f->fd, 0, 0, (off_t)bytes) ? errno : 0;
    if (e == ENOSPC || e == EFBIG || e == EDQUOT) {
        char need[32];
        gimg_format_bytes(bytes, need, sizeof need);
        return gimg_fail(GIMG_E_IO, "no room for the output's %s: %s", need, strerror(e));
    }
    return GIMG_OK;
}

gimg_status gimg_out_commit(gimg_out_file *f)
{
    gimg_status res = GIMG_OK;
    if (close(f->fd) != 0)
        res = gimg_fail(GIMG_E_IO, "write error: %s", strerror(errno));
    f->fd = -1;
    if (!res && f->slot >= 0 && rename(f->tmp, f->target) != 0)
        res = gimg_fail(GIMG_E_IO, "cannot replace the file: %s", strerror(errno));
    if (res && f->slot >= 0)
        unlink(f->tmp);
    if (f->slot >= 0)
        gimg_io_unregister_temp(f->slot);
    free(f->target);
    free(f);
    return res;
}

void gimg_out_abort(gimg_out_file *f)
{
    if (!f)
        return;
    if (f->fd >= 0)
        close(f->fd);
    if (f->slot >= 0) {
        unlink(f->tmp);
        gimg_io_unregister_temp(f->slot);
    }
    free(f->target);
    free(f);
}

static gimg_status write_file_parts(const char *path, const parts *p)
{
    if (!path || !*path)
        return gimg_fail(GIMG_E_USAGE, "empty output path");
    if (strcmp(path, "-") == 0)
        return write_stdout(p);
    gimg_out_file *f;
    gimg_status st = gimg_out_open(path, &f);
    if (st)
        return st;
    if ((st = gimg_out_write(f, p->head, p->head_len)) ||
        (st = gimg_out_write(f, p->body, p->body_len))) {
        gimg_out_abort(f);
        return st;
    }
    return gimg_out_commit(f);
}

gimg_status gimg_write_file(const char *path, const unsigned char *buf, size_t len)
{
    parts p = {buf, NULL, len, 0};
    return write_file_parts(path, &p);
}

gimg_status gimg_write_jpeg_bits(const char *path, const unsigned char *bits, size_t len,
                                 gimg_meta *meta, const gimg_write_opts *o)
{
    gimg_meta *m = NULL;
    int owned = 0;
    unsigned char *head = NULL;
    size_t head_len = 0, rest = 0;
    gimg_status st = gimg_io_meta_for(meta, &gimg_codec_jpeg, o, &m, &owned);
    if (!st)
        st = gimg_jpeg_headers(bits, len, m, &head, &head_len, &rest);
    if (owned)
        gimg_meta_free(m);
    /* The bitstream goes out as it is, behind the headers (a 4096x4096
     * photo's 8 MB: a copy and its page faults saved). */
    parts p = {head, bits + rest, head_len, len - rest};
    if (!st)
        st = write_file_parts(path, &p);
    free(head);
    return st;
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
        gimg_io_note_dropped_meta(im->meta, o, f);
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
