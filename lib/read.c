/* read.c — reading files and decoding images (stb_image and pnm.c). */
#include "alloc_internal.h"
#include "precheck_internal.h"
#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stb_image.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The largest input gimg_slurp() accepts: generous for any image within the
 * pixel limit (64 bytes a pixel covers plain-text PAM with 4 16-bit samples
 * and room to spare, plus 64 MiB for metadata), yet it stops an endless
 * stream such as /dev/zero before it exhausts memory. */
size_t gimg_max_input_bytes(void)
{
    uint64_t px = gimg_max_pixels(), lim;
    if (__builtin_mul_overflow(px, (uint64_t)64, &lim) ||
        __builtin_add_overflow(lim, (uint64_t)64 << 20, &lim) || lim > (uint64_t)SIZE_MAX / 2)
        return SIZE_MAX / 2;
    return (size_t)lim;
}

/* Every buffer gimg_slurp() returns is a mapping: of the file itself for a
 * regular file (no copy at all: the pages come straight from the page
 * cache, MAP_POPULATE reads them in one go), or anonymous memory for pipes
 * and terminals, grown with mremap and backed by huge pages. Reading a
 * 48 MB file into fresh 4 KiB pages cost 40-90 ms here; mapping it, 3 ms. */
static gimg_status read_stream(int fd, unsigned char **buf, size_t *len)
{
    const size_t limit = gimg_max_input_bytes();
    size_t cap = (size_t)4 << 20, n = 0;
    unsigned char *b = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b == MAP_FAILED)
        return gimg_fail(GIMG_E_NOMEM, "out of memory allocating %zu bytes", cap);
    for (;;) {
        if (n == cap) {
            if (cap >= limit) {
                munmap(b, cap);
                return gimg_fail(GIMG_E_LIMIT, "input is over the limit of %zu bytes", limit);
            }
            size_t ncap = cap > limit / 2 ? limit : cap * 2;
            unsigned char *nb = mremap(b, cap, ncap, MREMAP_MAYMOVE);
            if (nb == MAP_FAILED) {
                munmap(b, cap);
                return gimg_fail(GIMG_E_NOMEM, "out of memory allocating %zu bytes", ncap);
            }
            b = nb;
            cap = ncap;
#ifdef MADV_HUGEPAGE
            madvise(b, cap, MADV_HUGEPAGE);
#endif
        }
        ssize_t r = read(fd, b + n, cap - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            munmap(b, cap);
            return gimg_fail(GIMG_E_IO, "read error: %s", strerror(errno));
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    if (n == 0) {
        munmap(b, cap);
        return gimg_fail(GIMG_E_FORMAT, "empty file");
    }
    /* Shrink to what was read, so that gimg_slurp_free() can unmap by length. */
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), used = (n + page - 1) / page * page;
    if (used < cap)
        munmap(b + used, cap - used);
    *buf = b;
    *len = n;
    return GIMG_OK;
}

gimg_status gimg_slurp(const char *path, unsigned char **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    const int is_stdin = strcmp(path, "-") == 0;
    const int fd = is_stdin ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return gimg_fail(GIMG_E_IO, "%s", strerror(errno));
    gimg_status res;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        res = gimg_fail(GIMG_E_IO, "%s", strerror(errno));
    } else if (S_ISDIR(st.st_mode)) {
        res = gimg_fail(GIMG_E_IO, "%s", strerror(EISDIR));
    } else if (S_ISREG(st.st_mode) && st.st_size > 0) {
        const size_t limit = gimg_max_input_bytes();
        if ((uint64_t)st.st_size > limit) {
            res = gimg_fail(GIMG_E_LIMIT, "file of %lld bytes is over the input limit of %zu",
                            (long long)st.st_size, limit);
        } else {
            void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
            if (m == MAP_FAILED) {
                res = gimg_fail(GIMG_E_IO, "%s", strerror(errno));
            } else {
                *buf = m;
                *len = (size_t)st.st_size;
                res = GIMG_OK;
            }
        }
    } else {
        res = read_stream(fd, buf, len);
    }
    if (!is_stdin)
        close(fd);
    return res;
}

void gimg_slurp_free(unsigned char *buf, size_t len)
{
    if (buf)
        munmap(buf, len);
}

/* stb's reason for the last failure. stb tries every format's signature in
 * turn, and a decoder that fails without a reason of its own leaves the PNG
 * test's "bad png sig" behind, which would name the wrong format. */
static const char *stb_reason(gimg_format f)
{
    const char *why = stbi_failure_reason();
    if (!why || (f != GIMG_FMT_PNG && strcmp(why, "bad png sig") == 0))
        return "corrupt data";
    return why;
}

static const char *stb_format_name(gimg_format f)
{
    switch (f) {
    case GIMG_FMT_PNG: return "PNG";
    case GIMG_FMT_JPEG: return "JPEG";
    case GIMG_FMT_BMP: return "BMP";
    case GIMG_FMT_TGA: return "TGA";
    case GIMG_FMT_HDR: return "HDR";
    default: return "image";
    }
}

/* Only the header matters to stb's probes, so capping a >2 GiB buffer at
 * INT_MAX for them is harmless; decoding such a buffer is refused. */
static int stb_len(size_t len)
{
    return len > INT_MAX ? INT_MAX : (int)len;
}

/* stb_image refuses PNGs of more than 2^30 samples as corrupt ("unknown
 * image type"); read the size from IHDR first, so that a large image is
 * refused as what it is: over gimg's limit, or over the decoder's. */
static gimg_status check_png_size(const unsigned char *buf, size_t len)
{
    if (len < 33 || memcmp(buf + 12, "IHDR", 4) != 0)
        return GIMG_OK;                                  /* stb reports it */
    const uint32_t w = (uint32_t)buf[16] << 24 | (uint32_t)buf[17] << 16 | buf[18] << 8 | buf[19];
    const uint32_t h = (uint32_t)buf[20] << 24 | (uint32_t)buf[21] << 16 | buf[22] << 8 | buf[23];
    const int depth = buf[24], type = buf[25];
    /* Samples per pixel as stored (a palette index is one). */
    const int stored = type == 0 ? 1 : type == 2 ? 3 : type == 3 ? 1 : type == 4 ? 2 : 4;
    const int decoded = type == 3 ? 3 : stored;
    gimg_status st = gimg_check_size(w, h, decoded, depth == 16 ? GIMG_U16 : GIMG_U8, NULL, NULL);
    if (st)
        return st;
    if ((uint64_t)w * h * (uint64_t)stored > ((uint64_t)1 << 30))
        return gimg_fail(GIMG_E_LIMIT, "PNG image %ux%u is beyond the PNG decoder's limit of "
                                       "2^30 samples", w, h);
    return GIMG_OK;
}

gimg_status gimg_probe_memory(const unsigned char *buf, size_t len, gimg_info *info)
{
    memset(info, 0, sizeof *info);
    if (!buf || len == 0)
        return gimg_fail(GIMG_E_FORMAT, "empty file");
    gimg_format f = gimg_format_sniff(buf, len);
    if (f == GIMG_FMT_UNKNOWN) {
        const char *name = gimg_io_unsupported_format(buf, len);
        if (name)
            return gimg_fail(GIMG_E_FORMAT, "%s format not supported", name);
        return gimg_fail(GIMG_E_FORMAT, "unrecognised image format");
    }
    if (f == GIMG_FMT_PNM || f == GIMG_FMT_PAM || f == GIMG_FMT_PFM)
        return gimg_pnm_probe(buf, len, info);

    gimg_status st;
    int png_channels = 0;
    if (f == GIMG_FMT_PNG &&
        ((st = check_png_size(buf, len)) || (st = gimg_png_precheck(buf, len, 0, &png_channels))))
        return st;
    /* stb's JPEG header parse already builds the Huffman tables. */
    if (f == GIMG_FMT_JPEG && (st = gimg_precheck(f, buf, len)))
        return st;
    int w, h, c, n = stb_len(len);
    if (!stbi_info_from_memory(buf, n, &w, &h, &c))
        return gimg_fail(GIMG_E_FORMAT, "invalid %s header (%s)", stb_format_name(f),
                         stb_reason(f));
    /* stb's BMP probe passes on a top-down file's negative height, which
     * its loader (and we) read as the image's height. */
    if (f == GIMG_FMT_BMP && h < 0 && h != INT_MIN)
        h = -h;
    info->format = f;
    info->width = w;
    info->height = h;
    /* stb's probe leaves out the alpha a PNG's tRNS chunk adds. */
    info->channels = f == GIMG_FMT_PNG ? png_channels : c;
    info->sample = f == GIMG_FMT_HDR && stbi_is_hdr_from_memory(buf, n) ? GIMG_F32
                 : stbi_is_16_bit_from_memory(buf, n)                  ? GIMG_U16
                                                                       : GIMG_U8;
    return GIMG_OK;
}

gimg_status gimg_decode_memory(const unsigned char *buf, size_t len, gimg_image *out)
{
    memset(out, 0, sizeof *out);
    gimg_info info;
    gimg_status st = gimg_probe_memory(buf, len, &info);
    if (st)
        return st;
    if (info.format == GIMG_FMT_PNM || info.format == GIMG_FMT_PAM || info.format == GIMG_FMT_PFM)
        return gimg_pnm_decode(buf, len, out);
    /* The limits are judged from the header, before stb allocates anything. */
    if ((st = gimg_check_size(info.width, info.height, info.channels, info.sample, NULL, NULL)))
        return st;
    if (len > INT_MAX)
        return gimg_fail(GIMG_E_LIMIT, "%s file of %zu bytes is too large for the decoder",
                         stb_format_name(info.format), len);

    /* What stb mishandles (hangs, overflows, invented pixels) is refused first. */
    if ((st = gimg_precheck(info.format, buf, len)))
        return st;
    int w = 0, h = 0, c = 0;
    void *px;
    if (info.sample == GIMG_F32)
        px = stbi_loadf_from_memory(buf, (int)len, &w, &h, &c, 0);
    else if (info.sample == GIMG_U16)
        px = stbi_load_16_from_memory(buf, (int)len, &w, &h, &c, 0);
    else
        px = stbi_load_from_memory(buf, (int)len, &w, &h, &c, 0);
    if (!px) {
        const char *why = stb_reason(info.format);
        if (strcmp(why, "outofmem") == 0)
            return gimg_fail(GIMG_E_NOMEM, "out of memory decoding %s", stb_format_name(info.format));
        return gimg_fail(GIMG_E_FORMAT, "corrupt or unsupported %s file (%s)",
                         stb_format_name(info.format), why);
    }
    size_t row;
    if ((st = gimg_check_size(w, h, c, info.sample, &row, NULL))) {
        free(px);
        return st;
    }
    /* stb_impl.c makes stb allocate like gimg_image_alloc() (64-byte
     * aligned, released by free()), so the image adopts stb's buffer. */
    out->width = w;
    out->height = h;
    out->channels = c;
    out->sample = info.sample;
    out->stride_bytes = row;
    out->data = px;
    return GIMG_OK;
}

gimg_status gimg_read(const char *path, gimg_image *out)
{
    unsigned char *buf;
    size_t len;
    memset(out, 0, sizeof *out);
    gimg_status st = gimg_slurp(path, &buf, &len);
    if (st)
        return st;
    st = gimg_decode_memory(buf, len, out);
    gimg_slurp_free(buf, len);
    return st;
}
