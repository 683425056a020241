/*
 * codec_webp.c — WebP, read and written with libwebp (libwebpdemux for
 * animations and metadata, libwebpmux to write metadata): Google's
 * reference codec, the one libvips, ImageMagick and the browsers use; no
 * other library in Debian encodes WebP.
 *
 * Reading
 *  - Lossy (VP8) and lossless (VP8L) files, with or without alpha: RGBA
 *    when the file has alpha (VP8X's alpha flag, an ALPH chunk, or VP8L's
 *    alpha bit, as WebPGetFeatures reports), else RGB; 8-bit. WebPDecode
 *    writes straight into the image's buffer, with its filtering on a
 *    second thread (use_threads, as libvips decodes).
 *  - Animations: every frame is a page (FILE[N]; info.pages is the frame
 *    count); page N is the canvas after frames 0 to N have been composited
 *    by libwebp's WebPAnimDecoder (blending and disposal as the format
 *    says; the canvas starts transparent and disposal clears to
 *    transparent, libwebp's reading of the background colour). An
 *    animation is always read as RGBA, whatever its frames hold.
 *  - Limits: a VP8X header's canvas goes through gimg_check_size() before
 *    libwebp parses anything past it, so that an oversized canvas is refused
 *    from its 30 bytes. Compositing page N decodes N + 1 frames, which
 *    bounds what a short file can ask for in two ways: page N is refused
 *    when (N + 1) x the canvas's pixels exceed 16 x --max-pixels, and
 *    pages from 10000 on are not read at all (libwebp finds frame k by
 *    walking k entries of a list, so reaching page N costs N^2 / 2 steps:
 *    1 s of CPU here for N = 20000, 0.3 s for 10000). Page 0 is never
 *    refused for either.
 *  - Metadata: the "ICCP", "EXIF" and "XMP " chunks of an extended
 *    (VP8X) file whose header's flags announce them, found by
 *    libwebpdemux (the first of each; it passes over unannounced ones, and
 *    so do libvips and webpmux): the ICC profile, the EXIF block (the WebP
 *    container holds it from its TIFF header on; the "Exif\0\0" some
 *    writers put first, as in JPEG, is skipped) and the XMP packet. Simple
 *    (VP8, VP8L) files have no room for any. The chunks lie within the
 *    file, and meta.c drops any over 16 MiB with a warning; a file whose
 *    chunks libwebpdemux cannot parse, though its image decodes, keeps no
 *    metadata and says so in a warning. Every page of an animation gets
 *    the file's. WebP has no resolution field.
 *  - Errors: libwebp reports through a VP8StatusCode only (it has no
 *    warning or message callbacks, so nothing can reach stderr).
 *    VP8_STATUS_NOT_ENOUGH_DATA (a chunk, or the RIFF size, running past
 *    the end of the file) is "truncated WebP data"; any other failure is
 *    "corrupt WebP data: " and the status in words.
 *
 * Writing (8-bit; write.c narrows 16-bit and float first)
 *  - Lossy at --quality (WebPConfigPreset's default preset, method 4: the
 *    settings of cwebp and of `vips webpsave`, whose effort 4 is method 4),
 *    alpha kept losslessly (alpha_quality 100, libwebp's default). Under
 *    fully transparent pixels libwebp may replace the colour to save space
 *    (exact = 0, as cwebp and libvips): it cannot be seen.
 *  - Lossless with --lossless (gimg_write_opts.webp_lossless): libwebp's
 *    default effort (quality 75, method 4, as `cwebp -lossless` and
 *    `vips webpsave --lossless`), exact = 1 so that the colour under
 *    transparent pixels survives too and RGBA round-trips bit for bit.
 *  - Gray is written as RGB with three equal channels, gray+alpha as RGBA
 *    (WebP has no gray mode); they read back as RGB and RGBA. libwebp
 *    marks a file as having alpha only when some pixel is not opaque, so
 *    an RGBA image whose alpha is all 255 reads back as RGB (nothing is
 *    lost: as cwebp and libvips write it).
 *  - At most 16383 pixels a side (WEBP_MAX_DIMENSION). Should the lossy
 *    encoder's first partition (prediction modes, at most 512 KiB)
 *    overflow, as can happen on huge images at high quality, the encode is
 *    repeated once with partition_limit 100, which coarsens those modes
 *    until they fit (cwebp's -partition_limit).
 *  - The output is written through a writer callback into a buffer of our
 *    own (malloc/realloc), which the caller frees with free().
 *  - Metadata: an image with an ICC profile, EXIF or XMP is assembled by
 *    libwebpmux (as cwebp -metadata and libvips do) from the encoded
 *    bitstream and ICCP, EXIF (the TIFF-structured block, no "Exif\0\0")
 *    and "XMP " chunks, in an extended (VP8X) file with their flags set;
 *    the file is then copied into a buffer of our own (libwebp's is freed
 *    with WebPFree, ours with free()). Without metadata the file is the
 *    encoder's, as before.
 *
 * Thread safety: each call owns its decoder or encoder; libwebp's only
 * global state is its once-only choice of CPU-specific functions.
 */
#include "codec.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <webp/decode.h>
#include <webp/demux.h>
#include <webp/encode.h>
#include <webp/mux.h>

/* Page N of an animation composites N + 1 frames of the canvas: refused
 * beyond this many times the larger of one canvas and the pixel limit
 * (gimg_animation_work_pixels), and past this page. */
#define ANIMATION_WORK_FACTOR 16
#define ANIMATION_MAX_PAGE 9999

/* --------------------------------------------------------------- reading */

static int sniff_webp(const unsigned char *buf, size_t len)
{
    return len >= 12 && memcmp(buf, "RIFF", 4) == 0 && memcmp(buf + 8, "WEBP", 4) == 0;
}

static const char *status_words(VP8StatusCode s)
{
    switch (s) {
    case VP8_STATUS_OK: return "no error";
    case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
    case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR: return "bitstream error";
    case VP8_STATUS_UNSUPPORTED_FEATURE: return "unsupported feature";
    case VP8_STATUS_SUSPENDED: return "decoding suspended";
    case VP8_STATUS_USER_ABORT: return "decoding aborted";
    case VP8_STATUS_NOT_ENOUGH_DATA: return "not enough data";
    }
    return "unknown error";
}

/* The one failure message for libwebp's status s. */
static gimg_status status_fail(VP8StatusCode s)
{
    if (s == VP8_STATUS_OUT_OF_MEMORY)
        return gimg_fail(GIMG_E_NOMEM, "out of memory decoding WebP");
    if (s == VP8_STATUS_NOT_ENOUGH_DATA)
        return gimg_fail(GIMG_E_FORMAT, "truncated WebP data");
    return gimg_fail(GIMG_E_FORMAT, "corrupt WebP data: %s", status_words(s));
}

/* The canvas size of an extended-format (VP8X) header, if buf starts with
 * one: "RIFF" size "WEBP" "VP8X" size, flags (4 bytes), then width - 1 and
 * height - 1 in 24 bits each. */
static int vp8x_canvas(const unsigned char *buf, size_t len, int64_t *width, int64_t *height)
{
    if (len < 30 || memcmp(buf + 12, "VP8X", 4) != 0)
        return 0;
    *width = 1 + (int64_t)(buf[24] | buf[25] << 8 | (uint32_t)buf[26] << 16);
    *height = 1 + (int64_t)(buf[27] | buf[28] << 8 | (uint32_t)buf[29] << 16);
    return 1;
}

/* The frame count of an animation, after libwebpdemux has parsed (and
 * validated) every chunk of the file. */
static gimg_status animation_frames(const unsigned char *buf, size_t len, int *frames)
{
    WebPData data = {buf, len};
    WebPDemuxState state;
    WebPDemuxer *dmux = WebPDemuxPartial(&data, &state);
    if (!dmux)
        return state == WEBP_DEMUX_PARSE_ERROR
                   ? gimg_fail(GIMG_E_FORMAT, "corrupt WebP data: invalid animation chunks")
                   : gimg_fail(GIMG_E_FORMAT, "truncated WebP data");
    /* A demuxer that is not DONE stopped at the end of the data. */
    int complete = state == WEBP_DEMUX_DONE;
    *frames = (int)WebPDemuxGetI(dmux, WEBP_FF_FRAME_COUNT);
    WebPDemuxDelete(dmux);
    if (!complete)
        return gimg_fail(GIMG_E_FORMAT, "truncated WebP data");
    if (*frames < 1)
        return gimg_fail(GIMG_E_FORMAT, "corrupt WebP data: an animation without frames");
    return GIMG_OK;
}

static gimg_status probe_features(const unsigned char *buf, size_t len, const gimg_read_opts *o,
                                  gimg_info *info, WebPBitstreamFeatures *f)
{
    int64_t cw, ch;
    gimg_status st;
    /* The limits first, from the header alone. */
    if (vp8x_canvas(buf, len, &cw, &ch) &&
        (st = gimg_check_size(cw, ch, 4, GIMG_U8, NULL, NULL)))
        return st;
    VP8StatusCode s = WebPGetFeatures(buf, len, f);
    if (s != VP8_STATUS_OK)
        return status_fail(s);
    info->width = f->width;
    info->height = f->height;
    info->sample = GIMG_U8;
    if (!f->has_animation) {
        info->channels = f->has_alpha ? 4 : 3;
        info->pages = 1;
    } else {
        info->channels = 4;
        if ((st = animation_frames(buf, len, &info->pages)))
            return st;
    }
    if (o->page >= info->pages)
        return gimg_fail(GIMG_E_FORMAT, "WebP has %d frame%s: no frame %d", info->pages,
                         info->pages == 1 ? "" : "s", o->page);
    return GIMG_OK;
}

static gimg_status probe_webp(const unsigned char *buf, size_t len, const gimg_read_opts *o,
                              gimg_info *info)
{
    WebPBitstreamFeatures f;
    return probe_features(buf, len, o, info, &f);
}

/* A still image, decoded by libwebp into out's own rows. */
static gimg_status decode_still(const unsigned char *buf, size_t len, const gimg_info *info,
                                gimg_image *out)
{
    gimg_status st = gimg_image_alloc(out, info->width, info->height, info->channels, GIMG_U8);
    if (st)
        return st;
    WebPDecoderConfig config;
    if (!WebPInitDecoderConfig(&config)) {
        gimg_image_free(out);
        return gimg_fail(GIMG_E_FORMAT, "libwebp's decoder does not match its header");
    }
    config.options.use_threads = 1;
    config.output.colorspace = info->channels == 4 ? MODE_RGBA : MODE_RGB;
    config.output.is_external_memory = 1;
    config.output.u.RGBA.rgba = out->data;
    config.output.u.RGBA.stride = (int)out->stride_bytes;   /* <= 4 x 16383 */
    config.output.u.RGBA.size = out->stride_bytes * (size_t)out->height;
    VP8StatusCode s = WebPDecode(buf, len, &config);
    WebPFreeDecBuffer(&config.output);   /* frees nothing of ours: external memory */
    if (s != VP8_STATUS_OK) {
        gimg_image_free(out);
        return status_fail(s);
    }
    return GIMG_OK;
}

/* Page o->page of an animation: the canvas after frames 0..page. */
static gimg_status decode_animation(const unsigned char *buf, size_t len, int page,
                                    const gimg_info *info, gimg_image *out)
{
    uint64_t canvas = (uint64_t)info->width * (uint64_t)info->height;
    if (page > ANIMATION_MAX_PAGE)
        return gimg_fail(GIMG_E_LIMIT, "WebP frame %d: frames past %d of an animation are not read",
                         page, ANIMATION_MAX_PAGE);
    const uint64_t budget = gimg_animation_work_pixels(canvas, ANIMATION_WORK_FACTOR);
    if ((uint64_t)(page + 1) * canvas > budget)
        return gimg_fail(GIMG_E_LIMIT,
                         "WebP frame %d needs %d frames of %dx%d composited: over the limit of "
                         "%llu pixels' work",
                         page, page + 1, info->width, info->height, (unsigned long long)budget);
    gimg_status st = gimg_image_alloc(out, info->width, info->height, 4, GIMG_U8);
    if (st)
        return st;
    WebPAnimDecoderOptions options;
    if (!WebPAnimDecoderOptionsInit(&options)) {
        gimg_image_free(out);
        return gimg_fail(GIMG_E_FORMAT, "libwebpdemux does not match its header");
    }
    options.color_mode = MODE_RGBA;
    options.use_threads = 1;
    WebPData data = {buf, len};
    WebPAnimDecoder *dec = WebPAnimDecoderNew(&data, &options);
    WebPAnimInfo anim;
    if (!dec) {
        gimg_image_free(out);
        /* The probe's demuxer parsed this file: what fails now is memory. */
        return gimg_fail(GIMG_E_NOMEM, "out of memory decoding a WebP animation");
    }
    if (!WebPAnimDecoderGetInfo(dec, &anim) || (int)anim.canvas_width != info->width ||
        (int)anim.canvas_height != info->height || (int)anim.frame_count <= page) {
        WebPAnimDecoderDelete(dec);
        gimg_image_free(out);
        return gimg_fail(GIMG_E_FORMAT, "corrupt WebP data: the animation disagrees with its header");
    }
    uint8_t *canvas_rgba = NULL;
    for (int i = 0; i <= page; i++) {
        int timestamp;
        if (!WebPAnimDecoderGetNext(dec, &canvas_rgba, &timestamp)) {
            WebPAnimDecoderDelete(dec);
            gimg_image_free(out);
            return gimg_fail(GIMG_E_FORMAT, "corrupt WebP data: frame %d cannot be decoded", i);
        }
    }
    size_t row = (size_t)info->width * 4;
    for (int y = 0; y < info->height; y++)
        memcpy(gimg_row(out, y), canvas_rgba + (size_t)y * row, row);
    WebPAnimDecoderDelete(dec);
    return GIMG_OK;
}

/* The metadata chunks of an extended file (the head comment's
 * "Metadata"), into *m (left NULL when there are none). */
static gimg_status read_metadata(const unsigned char *buf, size_t len, gimg_meta **m)
{
    static const unsigned char exif_prefix[6] = {'E', 'x', 'i', 'f', 0, 0};
    if (len < 16 || memcmp(buf + 12, "VP8X", 4) != 0)
        return GIMG_OK;
    WebPData data = {buf, len};
    WebPDemuxer *dmux = WebPDemux(&data);
    if (!dmux) {
        gimg_meta_warn(m, "metadata not read: libwebpdemux cannot parse the WebP chunks");
        return GIMG_OK;
    }
    gimg_status st = GIMG_OK;
    WebPChunkIterator it;
    if (WebPDemuxGetChunk(dmux, "ICCP", 1, &it)) {
        if (it.chunk.size)
            st = gimg_meta_add_icc(m, it.chunk.bytes, it.chunk.size);
        WebPDemuxReleaseChunkIterator(&it);
    }
    if (!st && WebPDemuxGetChunk(dmux, "EXIF", 1, &it)) {
        const unsigned char *p = it.chunk.bytes;
        size_t n = it.chunk.size;
        if (n >= sizeof exif_prefix && memcmp(p, exif_prefix, sizeof exif_prefix) == 0) {
            p += sizeof exif_prefix;
            n -= sizeof exif_prefix;
        }
        if (n)
            st = gimg_meta_add_exif(m, p, n);
        WebPDemuxReleaseChunkIterator(&it);
    }
    if (!st && WebPDemuxGetChunk(dmux, "XMP ", 1, &it)) {
        if (it.chunk.size)
            st = gimg_meta_add_xmp(m, it.chunk.bytes, it.chunk.size);
        WebPDemuxReleaseChunkIterator(&it);
    }
    WebPDemuxDelete(dmux);
    return st;
}

static gimg_status decode_webp(const unsigned char *buf, size_t len, const gimg_read_opts *o,
                               gimg_image *out)
{
    memset(out, 0, sizeof *out);
    gimg_info info;
    WebPBitstreamFeatures f;
    memset(&info, 0, sizeof info);
    gimg_status st = probe_features(buf, len, o, &info, &f);
    if (st)
        return st;
    if ((st = gimg_check_size(info.width, info.height, info.channels, GIMG_U8, NULL, NULL)))
        return st;
    gimg_meta *meta = NULL;
    if ((st = read_metadata(buf, len, &meta))) {
        gimg_meta_free(meta);
        return st;
    }
    st = f.has_animation ? decode_animation(buf, len, o->page, &info, out)
                         : decode_still(buf, len, &info, out);
    if (st)
        gimg_meta_free(meta);
    else
        out->meta = meta;
    return st;
}

/* --------------------------------------------------------------- writing */

/* 8-bit, and the channels as they are: the encoder itself widens gray to
 * RGB and gray+alpha to RGBA. */
static void layout_webp(int *channels, gimg_sample *sample)
{
    *sample = GIMG_U8;
}

typedef struct {
    unsigned char *p;
    size_t len, cap;
} out_buffer;

/* libwebp's writer callback: appends to our own buffer; 0 stops the encode
 * (VP8_ENC_ERROR_BAD_WRITE) when memory runs out. */
static int append_output(const uint8_t *data, size_t size, const WebPPicture *pic)
{
    out_buffer *b = pic->custom_ptr;
    if (b->cap - b->len < size) {
        size_t cap = b->cap ? b->cap : (size_t)64 << 10;
        while (cap - b->len < size) {
            if (cap > SIZE_MAX / 2)
                return 0;
            cap *= 2;
        }
        unsigned char *p = realloc(b->p, cap);
        if (!p)
            return 0;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, size);
    b->len += size;
    return 1;
}

static gimg_status encode_fail(WebPEncodingError e)
{
    switch (e) {
    case VP8_ENC_ERROR_OUT_OF_MEMORY:
    case VP8_ENC_ERROR_BITSTREAM_OUT_OF_MEMORY:
    case VP8_ENC_ERROR_BAD_WRITE:   /* our writer: only for lack of memory */
        return gimg_fail(GIMG_E_NOMEM, "out of memory encoding WebP");
    case VP8_ENC_ERROR_BAD_DIMENSION:
        return gimg_fail(GIMG_E_LIMIT, "image size not encodable as WebP");
    case VP8_ENC_ERROR_PARTITION0_OVERFLOW:
    case VP8_ENC_ERROR_PARTITION_OVERFLOW:
        return gimg_fail(GIMG_E_LIMIT, "image too large for a lossy WebP at this quality "
                                       "(its partition is over libwebp's limit)");
    case VP8_ENC_ERROR_FILE_TOO_BIG:
        return gimg_fail(GIMG_E_LIMIT, "WebP output would be over 4 GiB");
    default:
        return gimg_fail(GIMG_E_FORMAT, "WebP encoding failed (libwebp error %d)", (int)e);
    }
}

/* Gray (1 channel) or gray+alpha (2) widened to RGB or RGBA, tightly packed. */
static unsigned char *widen_gray(const gimg_image *im, int *out_channels)
{
    int c = im->channels == 1 ? 3 : 4;
    size_t row = (size_t)im->width * (size_t)c;
    unsigned char *rgb = malloc(row * (size_t)im->height);
    if (!rgb)
        return NULL;
    for (int y = 0; y < im->height; y++) {
        const unsigned char *in = gimg_row(im, y);
        unsigned char *out = rgb + (size_t)y * row;
        if (c == 3)
            for (int x = 0; x < im->width; x++, out += 3)
                out[0] = out[1] = out[2] = in[x];
        else
            for (int x = 0; x < im->width; x++, out += 4, in += 2) {
                out[0] = out[1] = out[2] = in[0];
                out[3] = in[1];
            }
    }
    *out_channels = c;
    return rgb;
}

/* The encoded file *out made again by libwebpmux with m's ICC profile,
 * EXIF and XMP chunks; *out unchanged when m has none of them. */
static gimg_status add_metadata(const gimg_meta *m, out_buffer *out)
{
    if (!m || !(m->icc_bytes || m->exif_bytes || m->xmp_bytes))
        return GIMG_OK;
    WebPMux *mux = WebPMuxNew();
    if (!mux)
        return gimg_fail(GIMG_E_NOMEM, "out of memory encoding WebP");
    const WebPData image = {out->p, out->len};
    WebPMuxError e = WebPMuxSetImage(mux, &image, 0);
    const struct {
        const char *fourcc;
        const unsigned char *p;
        size_t n;
    } chunks[] = {{"ICCP", m->icc, m->icc_bytes},
                  {"EXIF", m->exif, m->exif_bytes},
                  {"XMP ", m->xmp, m->xmp_bytes}};
    for (size_t i = 0; i < sizeof chunks / sizeof chunks[0] && e == WEBP_MUX_OK; i++)
        if (chunks[i].n) {
            const WebPData chunk = {chunks[i].p, chunks[i].n};
            e = WebPMuxSetChunk(mux, chunks[i].fourcc, &chunk, 0);
        }
    WebPData file = {NULL, 0};
    if (e == WEBP_MUX_OK)
        e = WebPMuxAssemble(mux, &file);
    WebPMuxDelete(mux);
    const size_t file_bytes = file.size;
    unsigned char *copy = e == WEBP_MUX_OK ? malloc(file_bytes ? file_bytes : 1) : NULL;
    if (copy)
        memcpy(copy, file.bytes, file_bytes);
    WebPDataClear(&file);
    if (e == WEBP_MUX_MEMORY_ERROR || (e == WEBP_MUX_OK && !copy))
        return gimg_fail(GIMG_E_NOMEM, "out of memory encoding WebP");
    if (e != WEBP_MUX_OK)
        return gimg_fail(GIMG_E_FORMAT, "WebP metadata could not be added (libwebpmux error %d)",
                         (int)e);
    free(out->p);
    out->p = copy;
    out->len = out->cap = file_bytes;
    return GIMG_OK;
}

static gimg_status encode_webp(const gimg_image *im, const gimg_write_opts *o,
                               unsigned char **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    if (im->width > WEBP_MAX_DIMENSION || im->height > WEBP_MAX_DIMENSION)
        return gimg_fail(GIMG_E_LIMIT, "image %dx%d is too large for WebP (at most %d pixels a side)",
                         im->width, im->height, WEBP_MAX_DIMENSION);
    const int lossless = o->webp_lossless != 0;
    WebPConfig config;
    if (!WebPConfigPreset(&config, WEBP_PRESET_DEFAULT, lossless ? 75.0f : (float)o->quality))
        return gimg_fail(GIMG_E_FORMAT, "libwebp's encoder does not match its header");
    config.lossless = lossless;
    config.method = 4;
    config.exact = lossless;
    config.thread_level = 1;
    if (!WebPValidateConfig(&config))
        return gimg_fail(GIMG_E_USAGE, "invalid WebP settings (quality %d)", o->quality);

    WebPPicture pic;
    if (!WebPPictureInit(&pic))
        return gimg_fail(GIMG_E_FORMAT, "libwebp's encoder does not match its header");
    pic.width = im->width;
    pic.height = im->height;
    /* Lossless works on ARGB; lossy imports straight to YUV. */
    pic.use_argb = lossless;

    const unsigned char *pixels = im->data;
    size_t stride = im->stride_bytes;
    int channels = im->channels;
    unsigned char *widened = NULL;
    if (channels <= 2) {
        if (!(widened = widen_gray(im, &channels)))
            return gimg_fail(GIMG_E_NOMEM, "out of memory encoding WebP");
        pixels = widened;
        stride = (size_t)im->width * (size_t)channels;
    }
    if (stride > INT_MAX) {
        free(widened);
        return gimg_fail(GIMG_E_LIMIT, "image rows too far apart for libwebp");
    }
    int imported = channels == 3 ? WebPPictureImportRGB(&pic, pixels, (int)stride)
                                 : WebPPictureImportRGBA(&pic, pixels, (int)stride);
    free(widened);
    if (!imported) {
        WebPPictureFree(&pic);
        return encode_fail(pic.error_code);
    }

    out_buffer out = {0};
    pic.writer = append_output;
    pic.custom_ptr = &out;
    int ok = WebPEncode(&config, &pic);
    if (!ok && pic.error_code == VP8_ENC_ERROR_PARTITION0_OVERFLOW) {
        out.len = 0;
        config.partition_limit = 100;
        ok = WebPEncode(&config, &pic);
    }
    WebPEncodingError error = pic.error_code;
    WebPPictureFree(&pic);
    if (!ok) {
        free(out.p);
        return encode_fail(error);
    }
    gimg_status st = add_metadata(im->meta, &out);
    if (st) {
        free(out.p);
        return st;
    }
    *buf = out.p;
    *len = out.len;
    return GIMG_OK;
}

const gimg_codec gimg_codec_webp = {
    .format = GIMG_FMT_WEBP,
    .name = "WebP",
    .extensions = "webp",
    .multi_page = 1,
    .sniff = sniff_webp,
    .probe = probe_webp,
    .decode = decode_webp,
    .layout = layout_webp,
    .encode = encode_webp,
    .meta = GIMG_META_ICC | GIMG_META_EXIF | GIMG_META_XMP,
    .maxval_rule = GIMG_MAXVAL_FULL,
};
