/* read.c — reading files, and decoding them through the codec table (codec.h). */
#include "alloc_internal.h"
#include "codec.h"
#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The largest input gimg_slurp() accepts: generous for any image within the
 * pixel limit (64 bytes a pixel covers plain-text PAM with 4 16-bit samples
 * and room to spare, plus 64 MiB for metadata). A regular file is mapped,
 * not read: its pages come and go as it is read. */
size_t gimg_max_input_bytes(void)
{
    uint64_t px = gimg_max_pixels(), lim;
    if (__builtin_mul_overflow(px, (uint64_t)64, &lim) ||
        __builtin_add_overflow(lim, (uint64_t)64 << 20, &lim) || lim > (uint64_t)SIZE_MAX / 2)
        return SIZE_MAX / 2;
    return (size_t)lim;
}

/* A stream (a pipe, a device) is read into memory: at most the memory
 * budget, which is also what bounds an endless stream now that the pixel
 * limit, by default, does not. */
size_t gimg_max_stream_bytes(void)
{
    const size_t files = gimg_max_input_bytes();
    const uint64_t budget = gimg_max_memory();
    return budget < files ? (size_t)budget : files;
}

gimg_status gimg_stream_over(size_t limit)
{
    if (limit == gimg_max_memory()) {
        char have[32];
        gimg_format_bytes(limit, have, sizeof have);
        return gimg_fail(GIMG_E_LIMIT, "input of more than %s is over the memory budget of %s "
                                       "(raise it with --max-memory)", have, have);
    }
    return gimg_fail(GIMG_E_LIMIT, "input is over the limit of %zu bytes", limit);
}

/* Files up to this size are mapped with MAP_POPULATE (below). */
#define GIMG_POPULATE_MAX_BYTES ((uint64_t)64 << 20)

/* Every buffer gimg_slurp() returns is a mapping: of the file itself for a
 * regular file (no copy at all: the pages come straight from the page
 * cache, MAP_POPULATE reads them in one go up to 64 MiB), or anonymous memory for pipes
 * and terminals, grown with mremap and backed by huge pages. Reading a
 * 48 MB file into fresh 4 KiB pages cost 40-90 ms here; mapping it, 3 ms.
 * check, when given, sees the data after each read, so that an endless
 * stream such as /dev/zero stops as soon as its content shows it is not
 * what the caller reads, not at the byte limit. (A regular file's size is
 * known before it is read: the limit judges it, and the caller its
 * content.) */
static gimg_status read_stream(int fd, size_t limit, gimg_slurp_check check, void *user,
                               unsigned char **buf, size_t *len)
{
    size_t cap = (size_t)4 << 20, n = 0;
    if (cap > limit)
        cap = limit;
    unsigned char *b = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b == MAP_FAILED)
        return gimg_fail(GIMG_E_NOMEM, "out of memory allocating %zu bytes", cap);
    for (;;) {
        if (n == cap) {
            if (cap >= limit) {
                munmap(b, cap);
                return gimg_stream_over(limit);
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
        n += (size_t)r;
        gimg_status st = check && n > 0 ? check(b, n, r == 0, user) : GIMG_OK;
        if (st) {
            munmap(b, cap);
            return st;
        }
        if (r == 0)
            break;
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

gimg_status gimg_slurp_checked(const char *path, size_t max_bytes, gimg_slurp_check check,
                               void *user, unsigned char **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    const size_t limit = max_bytes ? max_bytes : gimg_max_input_bytes();
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
        if ((uint64_t)st.st_size > limit) {
            res = gimg_fail(GIMG_E_LIMIT, "file of %lld bytes is over the input limit of %zu",
                            (long long)st.st_size, limit);
        } else {
            /* A large file is left to be paged in as it is read: an image
             * read in bands (band.h) lets its pages go behind it. */
            const int populate = (uint64_t)st.st_size <= GIMG_POPULATE_MAX_BYTES;
            void *m = mmap(NULL, (size_t)st.st_size, PROT_READ,
                           MAP_PRIVATE | (populate ? MAP_POPULATE : 0), fd, 0);
            if (m == MAP_FAILED) {
                res = gimg_fail(GIMG_E_IO, "%s", strerror(errno));
            } else {
                *buf = m;
                *len = (size_t)st.st_size;
                res = GIMG_OK;
            }
        }
    } else {
        const size_t stream_limit = gimg_max_stream_bytes();
        res = read_stream(fd, limit < stream_limit ? limit : stream_limit, check, user, buf, len);
    }
    if (!is_stdin)
        close(fd);
    return res;
}

gimg_status gimg_check_image_head(const unsigned char *buf, size_t len, int at_end)
{
    if (len < GIMG_SNIFF_BYTES && !at_end)
        return GIMG_OK; /* too early to tell */
    const char *unsupported = gimg_io_unsupported_format(buf, len);
    if (unsupported)
        return gimg_fail(GIMG_E_FORMAT, "%s format not supported", unsupported);
    if (!gimg_codec_sniff(buf, len))
        return gimg_fail(GIMG_E_FORMAT, "unrecognised image format");
    return GIMG_OK;
}

/* gimg_slurp's check: the first bytes must start an image we know. */
static gimg_status image_head_check(const unsigned char *buf, size_t len, int at_end, void *user)
{
    int *sniffed = user;
    if (*sniffed)
        return GIMG_OK;
    gimg_status st = gimg_check_image_head(buf, len, at_end);
    *sniffed = !st && (len >= GIMG_SNIFF_BYTES || at_end);
    return st;
}

gimg_status gimg_slurp(const char *path, unsigned char **buf, size_t *len)
{
    int sniffed = 0;
    return gimg_slurp_checked(path, 0, image_head_check, &sniffed, buf, len);
}

void gimg_slurp_free(unsigned char *buf, size_t len)
{
    if (buf)
        munmap(buf, len);
}

gimg_status gimg_probe_page(const unsigned char *buf, size_t len, const gimg_read_opts *o,
                            gimg_info *info)
{
    static const gimg_read_opts first = {0};
    memset(info, 0, sizeof *info);
    if (!o)
        o = &first;
    if (!buf || len == 0)
        return gimg_fail(GIMG_E_FORMAT, "empty file");
    const char *unsupported = gimg_io_unsupported_format(buf, len);
    if (unsupported)
        return gimg_fail(GIMG_E_FORMAT, "%s format not supported", unsupported);
    const gimg_codec *c = gimg_codec_sniff(buf, len);
    if (!c)
        return gimg_fail(GIMG_E_FORMAT, "unrecognised image format");
    if (!c->decode)
        return gimg_fail(GIMG_E_FORMAT, "%s files are not read", c->name);
    if (o->page < 0 || (o->page > 0 && !c->multi_page))
        return gimg_fail(GIMG_E_FORMAT, "a %s file holds one image: no page %d", c->name,
                         o->page);
    gimg_status st = c->probe(buf, len, o, info);
    if (st) {
        memset(info, 0, sizeof *info);
        return st;
    }
    info->format = c->format;
    if (info->pages < 1)
        info->pages = 1;
    return GIMG_OK;
}

gimg_status gimg_probe_memory(const unsigned char *buf, size_t len, gimg_info *info)
{
    return gimg_probe_page(buf, len, NULL, info);
}

gimg_status gimg_decode_page(const unsigned char *buf, size_t len, const gimg_read_opts *o,
                             gimg_image *out)
{
    static const gimg_read_opts first = {0};
    memset(out, 0, sizeof *out);
    if (!o)
        o = &first;
    gimg_info info;
    gimg_status st = gimg_probe_page(buf, len, o, &info);
    if (st)
        return st;
    /* The limits are judged from the header, before the decoder allocates. */
    if ((st = gimg_check_size(info.width, info.height, info.channels, info.sample, NULL, NULL)))
        return st;
    st = gimg_codec_of(info.format)->decode(buf, len, o, out);
    if (st)
        memset(out, 0, sizeof *out);
    return st;
}

gimg_status gimg_decode_in_place(unsigned char *buf, size_t len, const gimg_read_opts *o,
                                 gimg_image *out, int *kept)
{
    *kept = 0;
    const gimg_codec *c = gimg_codec_sniff(buf, len);
    if ((!o || o->page == 0) && (c == &gimg_codec_pnm || c == &gimg_codec_pam)) {
        int viewed = 0;
        gimg_status st = gimg_pnm_view(buf, len, out, &viewed);
        /* The mapping is read-only: made writable (copy on write, the file
         * unchanged), whatever touches the image's rows can. */
        if (!st && viewed && mprotect(buf, len, PROT_READ | PROT_WRITE) == 0) {
            out->mapping = buf;
            out->mapping_bytes = len;
            *kept = 1;
            return GIMG_OK;
        }
        memset(out, 0, sizeof *out);
    }
    return gimg_decode_page(buf, len, o, out);
}

gimg_status gimg_decode_memory(const unsigned char *buf, size_t len, gimg_image *out)
{
    return gimg_decode_page(buf, len, NULL, out);
}

void gimg_path_page(const char *path, size_t *file_len, int *page_out)
{
    size_t n = strlen(path);
    *file_len = n;
    *page_out = 0;
    if (n < 4 || path[n - 1] != ']')
        return;
    size_t open = n - 1;
    while (open > 0 && path[open - 1] >= '0' && path[open - 1] <= '9')
        open--;
    if (open == 0 || open == n - 1 || path[open - 1] != '[' || n - 1 - open > 9)
        return;
    struct stat st;
    if (stat(path, &st) == 0)                    /* a file really named so */
        return;
    *file_len = open - 1;
    *page_out = atoi(path + open);
}

gimg_status gimg_read(const char *path, gimg_image *out)
{
    unsigned char *buf;
    size_t len, file_len;
    gimg_read_opts o = {0};
    memset(out, 0, sizeof *out);
    gimg_path_page(path, &file_len, &o.page);
    char *file = strndup(path, file_len);
    if (!file)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    gimg_status st = gimg_slurp(file, &buf, &len);
    free(file);
    if (st)
        return st;
    st = gimg_decode_page(buf, len, &o, out);
    gimg_slurp_free(buf, len);
    return st;
}

int gimg_pio(int fd, void *p, size_t n, uint64_t at, int write)
{
    unsigned char *b = p;
    while (n > 0) {
        ssize_t k = write ? pwrite(fd, b, n, (off_t)at) : pread(fd, b, n, (off_t)at);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (k == 0)
                errno = 0;
            return -1;
        }
        b += k;
        n -= (size_t)k;
        at += (uint64_t)k;
    }
    return 0;
}
