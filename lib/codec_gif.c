/*
 * codec_gif.c — GIF, read only, with giflib: the GIF library Debian
 * maintains (GDAL reads GIFs with it, libvips did until 8.11), small and
 * fuzzed in OSS-Fuzz; stb's GIF loader, with open reports of out-of-bounds
 * reads, stays compiled out. We write no GIF: a palette format has nothing
 * to offer the images these tools make.
 *
 * Reading
 *  - The file's block structure (screen descriptor, colour maps,
 *    extensions, image descriptors, LZW sub-blocks) is walked here first,
 *    without decoding anything: that counts the frames (info.pages), finds
 *    each frame's rectangle and Graphic Control Extension, and gives the
 *    offset of each image descriptor. giflib (DGifOpen over the memory
 *    buffer) then decodes only the frames needed: the input callback starts
 *    it at the frame's descriptor, so the frames before are never decoded
 *    unless compositing needs them, and nothing is kept per frame (no
 *    DGifSlurp, whose memory and time grow with the frame count).
 *  - The image is the logical screen, grown to hold the first frame when
 *    that frame runs past it (as libvips does, for files with a 0x0 or too
 *    small screen); frames are clipped to it.
 *  - Channels, as libvips's gifload: RGBA when any frame's Graphic Control
 *    Extension names a transparent index, else RGB; 8-bit.
 *  - Page N (FILE[N]) is the screen after frames 0 to N, composited as
 *    libvips (libnsgif) and web browsers show them: the screen starts as
 *    the background; each frame is drawn at its offset, its transparent
 *    index leaving what is below; before frame k + 1, frame k's disposal
 *    is applied: 2 restores its rectangle to the background, 3 (and 4,
 *    which some encoders write for 3) restores the screen as it was before
 *    frame k was drawn, 0 and 1 leave it. The background is transparent
 *    black (0,0,0,0) in an RGBA image, as browsers show it (libvips
 *    differs in one case: it restores a frame without a transparent index
 *    to the background colour, even in RGBA); in an RGB one (no frame has
 *    a transparent index) it is the global colour map's entry at the
 *    background index, or black when there is no global map or the index
 *    is past it (as ImageMagick's -coalesce; libvips starts from black).
 *  - Colours: the frame's local colour map, else the global one, else
 *    (GIF87a allows none) black and white for indices 0 and 1, as libnsgif
 *    does. A pixel index past the colour map's entries is black,
 *    transparent black in an RGBA image (as libvips decodes it; no
 *    colour is ever read past a map).
 *  - Interlaced frames are deinterlaced (giflib returns rows in file
 *    order).
 *  - Bounds: the screen's size goes through gimg_check_size() before the
 *    image is allocated, and so does each frame drawn (giflib decodes
 *    whole frame rows). Page N costs the decoding of frames 0..N: it is
 *    refused when their pixels plus N + 1 screens (compositing) exceed
 *    16 x --max-pixels, which page 0 never does. The walk is linear in the
 *    file's size and keeps only the frames up to the one asked for.
 *  - Errors: a file cut short inside a frame's blocks, or bytes that begin
 *    no GIF block, end the file there: the complete frames before count (a
 *    truncated animation still reads), and a file without one complete
 *    frame is refused ("truncated GIF data", or "corrupt GIF data: ..."
 *    for junk). A frame that is decoded must be whole: LZW data that ends
 *    before the frame's last pixel, or that giflib finds defective, is
 *    refused ("corrupt GIF data: ..."). An LZW code past the decoder's
 *    table is refused when there is no string to build on (right after a
 *    clear code); later in the data giflib decodes it by its own rule, as
 *    the previous code's string and one more index: defined pixels, if
 *    arbitrary ones.
 *    giflib has no warning callback: it reports through error codes only.
 *
 * Thread safety: each call opens its own giflib handle; giflib keeps no
 * global state.
 */
#include "codec.h"

#include <gif_lib.h>
#include <stdlib.h>
#include <string.h>

/* Page N decodes N + 1 frames: refused beyond this many times the
 * larger of one screen and the pixel limit (gimg_animation_work_pixels). */
#define GIF_WORK_FACTOR 16

/* ------------------------------------------------------- the block walk */

typedef struct {
    size_t descriptor;   /* offset of the image descriptor's 0x2C */
    int x, y, w, h;
    int interlaced;
    int lzw_bits;        /* LZW minimum code size */
    int disposal;        /* Graphic Control Extension's disposal method */
    int transparent;     /* transparent index, or -1 */
} gif_frame;

typedef struct {
    int width, height;   /* the image: the screen, grown to frame 0 */
    int frames;          /* complete frames in the file */
    int any_transparent; /* a frame names a transparent index */
    const unsigned char *global_map;  /* NULL or 3 x global_count bytes */
    int global_count;
    int background;      /* background colour index */
    gif_frame *kept;     /* frames 0 .. keep-1 (of those that exist) */
    int keep;
} gif_scan;

static int sniff_gif(const unsigned char *buf, size_t len)
{
    return len >= 4 && memcmp(buf, "GIF8", 4) == 0;
}

/* Skips the data sub-blocks that start at *pos, up to and past their
 * terminator; 0 when the file ends first. */
static int skip_sub_blocks(const unsigned char *buf, size_t len, size_t *pos)
{
    size_t p = *pos;
    while (p < len && buf[p] != 0)
        p += 1 + (size_t)buf[p];
    if (p >= len)
        return 0;
    *pos = p + 1;
    return 1;
}

/* Walks the file's blocks (see the head comment), keeping the first `keep`
 * frames in s->kept (malloc'd; the caller frees it). */
static gimg_status scan_gif(const unsigned char *buf, size_t len, int keep, gif_scan *s)
{
    memset(s, 0, sizeof *s);
    if (len < 13)
        return gimg_fail(GIMG_E_FORMAT, "truncated GIF data");
    int screen_w = (int)gimg_le16(buf + 6), screen_h = (int)gimg_le16(buf + 8);
    unsigned flags = buf[10];
    s->background = buf[11];
    size_t pos = 13;
    if (flags & 0x80) {
        s->global_count = 2 << (flags & 7);
        if (len - pos < 3 * (size_t)s->global_count)
            return gimg_fail(GIMG_E_FORMAT, "truncated GIF data");
        s->global_map = buf + pos;
        pos += 3 * (size_t)s->global_count;
    }
    if (keep > 0 && !(s->kept = calloc((size_t)keep, sizeof *s->kept)))
        return gimg_fail(GIMG_E_NOMEM, "out of memory reading GIF");
    s->keep = keep;

    int disposal = 0, transparent = -1;   /* of the pending Graphic Control Extension */
    const char *stop = NULL;              /* why the walk ended before a trailer */
    while (!stop) {
        if (pos >= len) {
            stop = "truncated GIF data";
        } else if (buf[pos] == 0x3B) {    /* trailer */
            break;
        } else if (buf[pos] == 0x21) {    /* extension: label, sub-blocks */
            size_t p = pos + 2;
            if (p > len) {
                stop = "truncated GIF data";
                break;
            }
            /* A Graphic Control Extension: one 4-byte sub-block. */
            if (buf[pos + 1] == 0xF9 && p + 5 <= len && buf[p] == 4) {
                disposal = (buf[p + 1] >> 2) & 7;
                transparent = (buf[p + 1] & 1) ? buf[p + 4] : -1;
            }
            if (!skip_sub_blocks(buf, len, &p))
                stop = "truncated GIF data";
            else
                pos = p;
        } else if (buf[pos] == 0x2C) {    /* image: descriptor, map, LZW data */
            size_t p = pos + 10;
            if (p + 1 > len) {
                stop = "truncated GIF data";
                break;
            }
            unsigned image_flags = buf[pos + 9];
            if (image_flags & 0x80)
                p += 3 * ((size_t)2 << (image_flags & 7));
            if (p + 1 > len) {
                stop = "truncated GIF data";
                break;
            }
            gif_frame f = {
                .descriptor = pos,
                .x = (int)gimg_le16(buf + pos + 1),
                .y = (int)gimg_le16(buf + pos + 3),
                .w = (int)gimg_le16(buf + pos + 5),
                .h = (int)gimg_le16(buf + pos + 7),
                .interlaced = (image_flags & 0x40) != 0,
                .lzw_bits = buf[p],
                .disposal = disposal,
                .transparent = transparent,
            };
            p++;
            if (!skip_sub_blocks(buf, len, &p)) {
                stop = "truncated GIF data";
                break;
            }
            pos = p;
            if (s->frames == 0) {
                screen_w = f.x + f.w > screen_w ? f.x + f.w : screen_w;
                screen_h = f.y + f.h > screen_h ? f.y + f.h : screen_h;
            }
            if (s->frames < keep)
                s->kept[s->frames] = f;
            s->any_transparent |= transparent >= 0;
            disposal = 0;
            transparent = -1;
            if (++s->frames == 0x7fffffff)
                break;
        } else {
            stop = "corrupt GIF data: no GIF block begins here";
        }
    }
    if (s->frames == 0) {
        free(s->kept);
        s->kept = NULL;
        return gimg_fail(GIMG_E_FORMAT, "%s", stop ? stop : "GIF file without an image");
    }
    s->width = screen_w;
    s->height = screen_h;
    return GIMG_OK;
}

static gimg_status probe_gif(const unsigned char *buf, size_t len, const gimg_read_opts *o,
                             gimg_info *info)
{
    gif_scan s;
    gimg_status st = scan_gif(buf, len, 0, &s);
    if (st)
        return st;
    if (o->page >= s.frames)
        return gimg_fail(GIMG_E_FORMAT, "GIF has %d frame%s: no frame %d", s.frames,
                         s.frames == 1 ? "" : "s", o->page);
    info->width = s.width;
    info->height = s.height;
    info->channels = s.any_transparent ? 4 : 3;
    info->sample = GIMG_U8;
    info->pages = s.frames;
    return GIMG_OK;
}

/* ------------------------------------------------------------- decoding */

/* giflib's input callback: reads from memory, from a position we move. */
typedef struct {
    const unsigned char *buf;
    size_t len, pos;
} gif_reader;

static int read_bytes(GifFileType *gif, GifByteType *dst, int n)
{
    gif_reader *r = gif->UserData;
    size_t left = r->len - r->pos, k = n > 0 ? (size_t)n : 0;
    if (k > left)
        k = left;
    memcpy(dst, r->buf + r->pos, k);
    r->pos += k;
    return (int)k;
}

static gimg_status giflib_fail(int error)
{
    switch (error) {
    case D_GIF_ERR_NOT_ENOUGH_MEM:
        return gimg_fail(GIMG_E_NOMEM, "out of memory decoding GIF");
    case D_GIF_ERR_READ_FAILED:
        return gimg_fail(GIMG_E_FORMAT, "truncated GIF data");
    case D_GIF_ERR_EOF_TOO_SOON:
        return gimg_fail(GIMG_E_FORMAT,
                         "corrupt GIF data: image data ends before the frame's last pixel");
    case D_GIF_ERR_IMAGE_DEFECT:
        return gimg_fail(GIMG_E_FORMAT, "corrupt GIF data: defective LZW image data");
    default: {
        const char *why = GifErrorString(error);
        return gimg_fail(GIMG_E_FORMAT, "corrupt GIF data: %s", why ? why : "unknown error");
    }
    }
}

/* Rows of an interlaced frame come in four passes: every 8th row from 0,
 * every 8th from 4, every 4th from 2, every 2nd from 1. The row that the
 * r-th row of the file is, in a frame of h rows. */
static int interlaced_row(int r, int h)
{
    int pass1 = (h + 7) / 8, pass2 = (h + 3) / 8, pass3 = (h + 1) / 4;
    if (r < pass1)
        return r * 8;
    r -= pass1;
    if (r < pass2)
        return 4 + r * 8;
    r -= pass2;
    if (r < pass3)
        return 2 + r * 4;
    return 1 + (r - pass3) * 2;
}

/* Fills rectangle x, y, w, h (already clipped) of im with one pixel value. */
static void fill_rect(gimg_image *im, int x, int y, int w, int h, const unsigned char *pixel)
{
    size_t c = (size_t)im->channels;
    for (int j = y; j < y + h; j++) {
        unsigned char *p = gimg_row(im, j) + (size_t)x * c;
        for (int i = 0; i < w; i++, p += c)
            memcpy(p, pixel, c);
    }
}

typedef struct {
    gif_scan scan;
    GifFileType *gif;
    gif_reader reader;
    GifPixelType *line;          /* one frame row of indices */
    unsigned char background[4];
    unsigned char *saved;        /* the screen before a frame with disposal 3 */
} gif_decoder;

/* Clips frame f to the image: 0 when nothing of it is inside. */
static int clip(const gif_frame *f, const gimg_image *im, int *w, int *h)
{
    if (f->x >= im->width || f->y >= im->height || f->w == 0 || f->h == 0)
        return 0;
    *w = f->x + f->w > im->width ? im->width - f->x : f->w;
    *h = f->y + f->h > im->height ? im->height - f->y : f->h;
    return 1;
}

/* Decodes frame f with giflib and draws it onto im. */
static gimg_status draw_frame(gif_decoder *d, const gif_frame *f, gimg_image *im)
{
    int w, h;
    if (!clip(f, im, &w, &h))
        return GIMG_OK;
    if (f->lzw_bits > 8)
        return gimg_fail(GIMG_E_FORMAT, "corrupt GIF data: LZW code size %d", f->lzw_bits);
    d->reader.pos = f->descriptor;
    GifRecordType type;
    if (DGifGetRecordType(d->gif, &type) == GIF_ERROR || type != IMAGE_DESC_RECORD_TYPE ||
        DGifGetImageDesc(d->gif) == GIF_ERROR)
        return giflib_fail(d->gif->Error);

    /* The frame's palette as pixels of the image's layout: entries past the
     * map stay transparent black (black in RGB). */
    static const unsigned char black_white[6] = {0, 0, 0, 255, 255, 255};
    const ColorMapObject *local = d->gif->Image.ColorMap;
    const unsigned char *map = d->scan.global_map;
    int count = d->scan.global_count;
    if (!map) {
        map = black_white;
        count = 2;
    }
    unsigned char palette[256][4];
    memset(palette, 0, sizeof palette);
    for (int i = 0; i < 256; i++) {
        if (local && i < local->ColorCount) {
            palette[i][0] = local->Colors[i].Red;
            palette[i][1] = local->Colors[i].Green;
            palette[i][2] = local->Colors[i].Blue;
            palette[i][3] = 255;
        } else if (!local && i < count) {
            memcpy(palette[i], map + 3 * i, 3);
            palette[i][3] = 255;
        }
    }

    const size_t c = (size_t)im->channels;
    gimg_status st = GIMG_OK;
    for (int r = 0; r < f->h; r++) {
        int y = f->interlaced ? interlaced_row(r, f->h) : r;
        /* Rows in file order: none left inside the image. */
        if (!f->interlaced && y >= h)
            break;
        if (DGifGetLine(d->gif, d->line, f->w) == GIF_ERROR) {
            st = giflib_fail(d->gif->Error);
            break;
        }
        if (y >= h)
            continue;
        unsigned char *out = gimg_row(im, f->y + y) + (size_t)f->x * c;
        for (int x = 0; x < w; x++, out += c) {
            int index = d->line[x];
            if (index != f->transparent)
                memcpy(out, palette[index], c);
        }
    }
    /* giflib records every image descriptor it reads: drop the record, so
     * that memory stays flat however many frames are decoded. */
    GifFreeSavedImages(d->gif);
    d->gif->ImageCount = 0;
    return st;
}

/* Applies frame f's disposal before the next frame is drawn. */
static void dispose(gif_decoder *d, const gif_frame *f, gimg_image *im)
{
    int w, h;
    if ((f->disposal == 3 || f->disposal == 4) && d->saved) {
        size_t row = (size_t)im->width * (size_t)im->channels;
        for (int y = 0; y < im->height; y++)
            memcpy(gimg_row(im, y), d->saved + (size_t)y * row, row);
    } else if (f->disposal == 2 && clip(f, im, &w, &h)) {
        fill_rect(im, f->x, f->y, w, h, d->background);
    }
}

static gimg_status save_screen(gif_decoder *d, const gimg_image *im)
{
    size_t row = (size_t)im->width * (size_t)im->channels;
    if (!d->saved && !(d->saved = malloc(row * (size_t)im->height)))
        return gimg_fail(GIMG_E_NOMEM, "out of memory decoding GIF");
    for (int y = 0; y < im->height; y++)
        memcpy(d->saved + (size_t)y * row, gimg_row(im, y), row);
    return GIMG_OK;
}

/* Refuses page `page` when a frame to draw is over the limits, or when
 * the decoding work it asks for, in pixels (its frames, and a screen each
 * for compositing), is over gimg_animation_work_pixels. */
static gimg_status check_work(const gif_scan *s, int page)
{
    uint64_t work = 0, screen = (uint64_t)s->width * (uint64_t)s->height;
    const uint64_t budget = gimg_animation_work_pixels(screen, GIF_WORK_FACTOR);
    for (int i = 0; i <= page && work <= budget; i++) {
        const gif_frame *f = &s->kept[i];
        if (f->w > 0 && f->h > 0) {
            gimg_status st = gimg_check_size(f->w, f->h, 1, GIMG_U8, NULL, NULL);
            if (st)
                return st;
        }
        /* Each term is below 2^35: no overflow before the budget stops it. */
        work += (uint64_t)f->w * (uint64_t)f->h + screen;
    }
    if (work > budget)
        return gimg_fail(GIMG_E_LIMIT,
                         "GIF frame %d needs %d frames of %dx%d composited: over the limit of "
                         "%llu pixels' work",
                         page, page + 1, s->width, s->height, (unsigned long long)budget);
    return GIMG_OK;
}

static gimg_status decode_gif(const unsigned char *buf, size_t len, const gimg_read_opts *o,
                              gimg_image *out)
{
    memset(out, 0, sizeof *out);
    gif_decoder d;
    memset(&d, 0, sizeof d);
    const int page = o->page;
    gimg_status st = scan_gif(buf, len, page + 1, &d.scan);
    if (st)
        return st;
    const gif_scan *s = &d.scan;
    const int channels = s->any_transparent ? 4 : 3;
    int max_w = 0;
    if (page >= s->frames)
        st = gimg_fail(GIMG_E_FORMAT, "GIF has %d frame%s: no frame %d", s->frames,
                       s->frames == 1 ? "" : "s", page);
    if (!st)
        st = gimg_check_size(s->width, s->height, channels, GIMG_U8, NULL, NULL);
    if (!st)
        st = check_work(s, page);
    if (!st)
        st = gimg_image_alloc(out, s->width, s->height, channels, GIMG_U8);
    for (int i = 0; !st && i <= page; i++)
        max_w = s->kept[i].w > max_w ? s->kept[i].w : max_w;
    if (!st && !(d.line = malloc((size_t)max_w + 1)))
        st = gimg_fail(GIMG_E_NOMEM, "out of memory decoding GIF");
    if (!st) {
        int error = 0;
        d.reader = (gif_reader){buf, len, 0};
        if (!(d.gif = DGifOpen(&d.reader, read_bytes, &error)))
            st = giflib_fail(error);
    }
    if (!st) {
        /* The background: transparent black, or (RGB) the colour of the
         * background index in the global map. */
        if (channels == 3 && s->global_map && s->background < s->global_count)
            memcpy(d.background, s->global_map + 3 * s->background, 3);
        fill_rect(out, 0, 0, out->width, out->height, d.background);
    }
    for (int i = 0; !st && i <= page; i++) {
        const gif_frame *f = &s->kept[i];
        if (i > 0)
            dispose(&d, &s->kept[i - 1], out);
        if (i < page && (f->disposal == 3 || f->disposal == 4))
            st = save_screen(&d, out);
        if (!st)
            st = draw_frame(&d, f, out);
    }
    if (d.gif)
        DGifCloseFile(d.gif, NULL);
    free(d.line);
    free(d.saved);
    free(d.scan.kept);
    if (st)
        gimg_image_free(out);
    return st;
}

/* Read only; its ICC and XMP extensions are not read. */
const gimg_codec gimg_codec_gif = {
    .format = GIMG_FMT_GIF,
    .name = "GIF",
    .extensions = "gif",
    .multi_page = 1,
    .sniff = sniff_gif,
    .probe = probe_gif,
    .decode = decode_gif,
    .maxval_rule = GIMG_MAXVAL_FULL,
};
