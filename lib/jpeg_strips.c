/*
 * jpeg_strips.c — a JPEG with restart markers cut into strips of whole
 * MCU rows, each a JPEG file of its own, so that one large image decodes
 * on several CPU threads (codec_jpeg.c) or several of the GPU's JPEG
 * engines (gpu_jpeg.c) at once. See jpeg_internal.h for the promise.
 *
 * Why it is exact. A restart marker ends an interval of R MCUs: the
 * decoder's DC predictions and bit buffer start again after it (T.81
 * F.1.2.1.3, F.2.2.1), so the intervals' data are independent. Where an
 * interval ends with an MCU row, the rows below are a JPEG of their own:
 * the file's tables and frame header with that strip's height, its
 * intervals' data (markers renumbered from RST0, B.2.1), and EOI. Its
 * blocks are the image's, and so are its rows, but for one thing:
 * vertical chroma upsampling (4:2:0, 4:4:0) reads the chroma row above
 * and below (libjpeg-turbo's "fancy" upsampling, nvJPEG's interpolation),
 * which at a strip's edge is the next strip's. Such files' strips are
 * decoded with one cut step more on each side (overlap), whose rows are
 * thrown away.
 *
 * Where a file may be cut: after interval k when k x R MCUs are whole MCU
 * rows, i.e. every R / gcd(R, M) rows of M MCUs (our encoder's intervals
 * are whole rows: every interval; cjpeg -restart N rows likewise). The
 * walk over the scan checks everything the cut relies on, and a file
 * that is not exactly so is left whole (its decoder then says what is
 * wrong): baseline or extended sequential Huffman, 8-bit, 1 or 3
 * components in one interleaved scan, a height in the frame header (no
 * DNL), every marker RST0..RST7 in sequence, as many as the intervals
 * less one, then EOI.
 *
 * The header of a strip is the file's segments up to its SOS but APPn
 * and COM (metadata: up to megabytes), keeping APP0 (JFIF) and APP14
 * (Adobe), from which libjpeg decides the colour space.
 */
#include "jpeg_internal.h"

#include <stdlib.h>
#include <string.h>

int gimg_jpeg_next_marker(const unsigned char *buf, size_t len, size_t *at, unsigned *marker)
{
    for (;;) {
        while (*at < len && buf[*at] != 0xFF)
            (*at)++;
        while (*at < len && buf[*at] == 0xFF)
            (*at)++;
        if (*at >= len)
            return 0;
        *marker = buf[(*at)++];
        if (!(*marker == 0x00 || *marker == 0x01 || (*marker >= 0xD0 && *marker <= 0xD7)))
            return 1;
    }
}

int gimg_jpeg_scan_walk(const unsigned char *buf, size_t len, size_t at,
                        void (*on_restart)(void *user, long k, size_t ff, size_t next), void *user,
                        size_t *eoi)
{
    unsigned next_restart = 0;
    long k = 0;
    while (at < len) {
        const unsigned char *ff = memchr(buf + at, 0xFF, len - at);
        if (!ff)
            return 0;
        at = (size_t)(ff - buf) + 1;
        while (at < len && buf[at] == 0xFF) /* fill bytes before a marker */
            at++;
        if (at >= len)
            return 0;
        const unsigned m = buf[at++];
        if (m == 0x00)
            continue;
        if (m >= 0xD0 && m <= 0xD7) {
            if (m - 0xD0 != next_restart)
                return 0;
            if (on_restart)
                on_restart(user, k, at - 2, at);
            k++;
            next_restart = (next_restart + 1) & 7;
            continue;
        }
        if (m != 0xD9)
            return 0;
        if (eoi)
            *eoi = at - 2;
        return 1;
    }
    return 0;
}

static long gcd(long a, long b)
{
    while (b) {
        long t = a % b;
        a = b;
        b = t;
    }
    return a;
}

typedef struct {
    gimg_jpeg_strips *p;
    long intervals_per_step;
    long restarts;
} walk_state;

/* After the restart marker that ends interval k: a cut where the next
 * interval starts a step. */
static void on_restart(void *user, long k, size_t ff, size_t next)
{
    walk_state *w = user;
    w->restarts = k + 1;
    if ((k + 1) % w->intervals_per_step == 0) {
        const long s = (k + 1) / w->intervals_per_step;
        if (s < w->p->steps) {
            w->p->stop[s] = ff;
            w->p->start[s] = next;
        }
    }
}

/* A segment of the header that strips keep. */
static int kept(unsigned marker)
{
    if (marker == 0xFE)
        return 0;  /* COM */
    if (marker >= 0xE0 && marker <= 0xEF)
        return marker == 0xE0 || marker == 0xEE;  /* JFIF, Adobe */
    return 1;
}

void gimg_jpeg_strips_free(gimg_jpeg_strips *p)
{
    free(p->start);
    free(p->stop);
    free(p->header);
    memset(p, 0, sizeof *p);
}

int gimg_jpeg_strips_plan(const unsigned char *buf, size_t len, gimg_jpeg_strips *p)
{
    memset(p, 0, sizeof *p);
    if (len < 4 || buf[0] != 0xFF || buf[1] != 0xD8)
        return 0;
    unsigned hmax = 0, vmax = 0, vmin = 16, restart = 0;
    int sof = 0, components = 0;
    size_t at = 2, sos_end = 0;
    unsigned marker;
    /* The header's segments: the frame, the restart interval, the scan. */
    size_t header_bytes = 2;
    while (!sos_end && gimg_jpeg_next_marker(buf, len, &at, &marker)) {
        if (marker == 0xD8 || marker == 0xD9 || len - at < 2)
            return 0;
        const size_t seg = (size_t)buf[at] << 8 | buf[at + 1];
        if (seg < 2 || seg > len - at)
            return 0;
        const unsigned char *s = buf + at + 2;
        if (marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 &&
            marker != 0xCC) {
            if ((marker != 0xC0 && marker != 0xC1) || sof || seg < 8 || s[0] != 8)
                return 0;
            sof = 1;
            p->height = s[1] << 8 | s[2];
            p->width = s[3] << 8 | s[4];
            components = s[5];
            if ((components != 1 && components != 3) || seg != 8 + 3u * (unsigned)components ||
                !p->height || !p->width)
                return 0;
            for (int i = 0; i < components; i++) {
                const unsigned h = s[7 + 3 * i] >> 4, v = s[7 + 3 * i] & 15;
                if (!h || !v || h > 4 || v > 4)
                    return 0;
                hmax = h > hmax ? h : hmax;
                vmax = v > vmax ? v : vmax;
                vmin = v < vmin ? v : vmin;
            }
        } else if (marker == 0xDD) {
            if (seg != 4)
                return 0;
            restart = (unsigned)s[0] << 8 | s[1];
        } else if (marker == 0xDA) {
            if (!sof || seg < 3 || s[0] != components)
                return 0;
            sos_end = at + seg;
        }
        if (kept(marker))
            header_bytes += 2 + seg;
        at += seg;
    }
    if (!sos_end || !restart)
        return 0;
    /* One interleaved scan (a gray scan's MCU is one block whatever its
     * sampling factors). */
    if (components == 1)
        hmax = vmax = vmin = 1;
    p->mcu_height = 8 * (int)vmax;
    const long mcus_per_row = (p->width + 8L * hmax - 1) / (8L * hmax);
    const long mcu_rows = (p->height + p->mcu_height - 1L) / p->mcu_height;
    const long step = restart / gcd(restart, mcus_per_row);
    if (step >= mcu_rows)
        return 0;
    p->step_rows = (int)step * p->mcu_height;
    p->steps = (int)((mcu_rows + step - 1) / step);
    p->overlap = vmin < vmax;
    p->intervals_per_step = (int)(step * mcus_per_row / restart);
    const long intervals = (mcus_per_row * mcu_rows + restart - 1) / restart;
    p->start = calloc((size_t)p->steps + 1, sizeof *p->start);
    p->stop = calloc((size_t)p->steps + 1, sizeof *p->stop);
    p->header = malloc(header_bytes);
    if (!p->start || !p->stop || !p->header) {
        gimg_jpeg_strips_free(p);
        return 0;
    }
    walk_state w = {p, p->intervals_per_step, 0};
    size_t eoi;
    if (!gimg_jpeg_scan_walk(buf, len, sos_end, on_restart, &w, &eoi) ||
        w.restarts != intervals - 1) {
        gimg_jpeg_strips_free(p);
        return 0;
    }
    p->start[0] = sos_end;
    p->stop[p->steps] = eoi;
    /* The strips' header: SOI and the kept segments, walked again. */
    unsigned char *h = p->header;
    h[0] = 0xFF;
    h[1] = 0xD8;
    size_t used = 2;
    at = 2;
    while (gimg_jpeg_next_marker(buf, len, &at, &marker)) {
        const size_t seg = (size_t)buf[at] << 8 | buf[at + 1];
        if (kept(marker)) {
            h[used] = 0xFF;
            h[used + 1] = (unsigned char)marker;
            memcpy(h + used + 2, buf + at, seg);
            if (marker == 0xC0 || marker == 0xC1)
                p->height_at = used + 5;
            used += 2 + seg;
        }
        at += seg;
        if (marker == 0xDA)
            break;
    }
    p->header_bytes = used;
    p->file = buf;
    return 1;
}

void gimg_jpeg_strip_span(const gimg_jpeg_strips *p, int k, int n, int *first_step,
                          int *end_step, int *first_row, int *rows, int *skip_rows)
{
    const int a = (int)((long)p->steps * k / n), b = (int)((long)p->steps * (k + 1) / n);
    const int fa = p->overlap && a > 0 ? a - 1 : a;
    const int fb = p->overlap && b < p->steps ? b + 1 : b;
    const long bottom = (long)b * p->step_rows < p->height ? (long)b * p->step_rows : p->height;
    *first_step = fa;
    *end_step = fb;
    *first_row = a * p->step_rows;
    *rows = (int)(bottom - *first_row);
    *skip_rows = (a - fa) * p->step_rows;
}

size_t gimg_jpeg_strip_bytes(const gimg_jpeg_strips *p, int first_step, int end_step)
{
    return p->header_bytes + (p->stop[end_step] - p->start[first_step]) + 2;
}

int gimg_jpeg_strip_height(const gimg_jpeg_strips *p, int first_step, int end_step)
{
    const long bottom = (long)end_step * p->step_rows;
    return (int)((bottom < p->height ? bottom : p->height) - (long)first_step * p->step_rows);
}

void gimg_jpeg_strip_write(const gimg_jpeg_strips *p, int first_step, int end_step,
                           unsigned char *out)
{
    memcpy(out, p->header, p->header_bytes);
    const int height = gimg_jpeg_strip_height(p, first_step, end_step);
    out[p->height_at] = (unsigned char)(height >> 8);
    out[p->height_at + 1] = (unsigned char)height;
    unsigned char *data = out + p->header_bytes;
    const size_t n = p->stop[end_step] - p->start[first_step];
    memcpy(data, p->file + p->start[first_step], n);
    /* The strip's first marker ends its first interval: RST0 in its file. */
    const int shift = (int)(((long)first_step * p->intervals_per_step) & 7);
    if (shift) {
        unsigned char *q = data, *end = data + n;
        while (q + 1 < end && (q = memchr(q, 0xFF, (size_t)(end - q - 1)))) {
            if (q[1] >= 0xD0 && q[1] <= 0xD7)
                q[1] = (unsigned char)(0xD0 + ((q[1] - 0xD0 - shift) & 7));
            q += q[1] == 0xFF ? 1 : 2; /* a fill byte may come before the marker */
        }
    }
    data[n] = 0xFF;
    data[n + 1] = 0xD9;
}
