/* image.c — image allocation and the size checks every allocation goes through. */
#include "gimg.h"
#include "alloc_internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

static _Atomic uint64_t g_max_pixels = GIMG_DEFAULT_MAX_PIXELS;

void gimg_set_max_pixels(uint64_t max_pixels) { g_max_pixels = max_pixels; }
uint64_t gimg_max_pixels(void) { return g_max_pixels; }

/* 0: not set, the default then. */
static _Atomic uint64_t g_max_memory;

uint64_t gimg_default_max_memory(void)
{
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t ram = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : (uint64_t)4 << 30;
    /* A container's limit (cgroup v2: a number, or "max"). */
    FILE *f = fopen("/sys/fs/cgroup/memory.max", "re");
    if (f) {
        unsigned long long limit;
        if (fscanf(f, "%llu", &limit) == 1 && limit > 0 && limit < ram)
            ram = limit;
        fclose(f);
    }
    /* The process's address space (ulimit -v), where it is held lower. */
    struct rlimit as;
    if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY && as.rlim_cur < ram)
        ram = as.rlim_cur;
    return ram / 2;
}

void gimg_set_max_memory(uint64_t bytes) { g_max_memory = bytes; }

uint64_t gimg_max_memory(void)
{
    uint64_t m = g_max_memory;
    if (!m) {
        uint64_t unset = 0;
        m = gimg_default_max_memory();
        /* The first caller's answer stays (a set value wins the race). */
        if (!atomic_compare_exchange_strong(&g_max_memory, &unset, m))
            m = g_max_memory;
    }
    return m;
}

void gimg_format_bytes(uint64_t bytes, char *buf, size_t size)
{
    static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buf, size, "%llu bytes", (unsigned long long)bytes);
        return;
    }
    double v = (double)bytes / 1024;
    int u = 0;
    while (v >= 1024 && u < 5) {
        v /= 1024;
        u++;
    }
    snprintf(buf, size, v < 10 ? "%.1f %s" : "%.0f %s", v, unit[u]);
}

gimg_status gimg_check_memory(uint64_t bytes, const char *what)
{
    const uint64_t budget = gimg_max_memory();
    if (bytes <= budget)
        return GIMG_OK;
    char need[32], have[32];
    gimg_format_bytes(bytes, need, sizeof need);
    gimg_format_bytes(budget, have, sizeof have);
    return gimg_fail(GIMG_E_LIMIT, "%s needs %s, over the memory budget of %s (raise it with "
                                   "--max-memory)", what, need, have);
}

gimg_status gimg_check_size(int64_t width, int64_t height, int channels,
                            gimg_sample sample, size_t *row_bytes, size_t *total_bytes)
{
    if (width < 1 || height < 1)
        return gimg_fail(GIMG_E_FORMAT, "invalid image size %lldx%lld",
                         (long long)width, (long long)height);
    if (channels < 1 || channels > 4)
        return gimg_fail(GIMG_E_FORMAT, "unsupported channel count %d", channels);
    if (sample != GIMG_U8 && sample != GIMG_U16 && sample != GIMG_F32)
        return gimg_fail(GIMG_E_FORMAT, "unsupported sample size %d bytes", (int)sample);
    if (width > GIMG_MAX_DIMENSION || height > GIMG_MAX_DIMENSION)
        return gimg_fail(GIMG_E_LIMIT, "image %lldx%lld exceeds the limit of %d pixels per side",
                         (long long)width, (long long)height, GIMG_MAX_DIMENSION);
    /* Both sides are below 2^24, so the product fits comfortably in 64 bits. */
    uint64_t pixels = (uint64_t)width * (uint64_t)height;
    if (pixels > g_max_pixels)
        return gimg_fail(GIMG_E_LIMIT,
                         "image %lldx%lld has %llu pixels, over the limit of %llu "
                         "(raise it with --max-pixels)",
                         (long long)width, (long long)height, (unsigned long long)pixels,
                         (unsigned long long)g_max_pixels);
    uint64_t row = (uint64_t)width * (uint64_t)channels * (uint64_t)sample;
    uint64_t total = row * (uint64_t)height;
    if (total / row != (uint64_t)height || total > (uint64_t)SIZE_MAX / 2)
        return gimg_fail(GIMG_E_LIMIT, "image %lldx%lld is too large for this machine",
                         (long long)width, (long long)height);
    if (row_bytes)
        *row_bytes = (size_t)row;
    if (total_bytes)
        *total_bytes = (size_t)total;
    return GIMG_OK;
}

gimg_status gimg_image_alloc(gimg_image *im, int width, int height, int channels,
                             gimg_sample sample)
{
    size_t row, total;
    memset(im, 0, sizeof *im);
    gimg_status st = gimg_check_size(width, height, channels, sample, &row, &total);
    if (st)
        return st;
    if (total > gimg_max_memory()) {
        char what[64];
        snprintf(what, sizeof what, "a %dx%d image of %d channels", width, height, channels);
        return gimg_check_memory(total, what);
    }
    void *p = gimg_alloc_large(total ? total : 1);
    if (!p)
        return gimg_fail(GIMG_E_NOMEM, "out of memory allocating %zu bytes", total);
    im->width = width;
    im->height = height;
    im->channels = channels;
    im->sample = sample;
    im->stride_bytes = row;
    im->data = p;
    return GIMG_OK;
}

void *gimg_alloc_large(size_t bytes)
{
    /* 64-byte alignment keeps rows friendly to vector loads and DMA; huge
     * pages also keep a transpose's row-hopping accesses within the TLB. */
    const size_t huge = (size_t)2 << 20;
    void *p = NULL;
    if (posix_memalign(&p, bytes >= huge ? huge : 64, bytes) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    if (bytes >= huge)
        madvise(p, (bytes + huge - 1) & ~(huge - 1), MADV_HUGEPAGE);
#endif
    return p;
}

void gimg_image_free(gimg_image *im)
{
    if (!im)
        return;
    if (im->mapping)
        gimg_slurp_free(im->mapping, im->mapping_bytes);
    else
        free(im->data);
    gimg_meta_free(im->meta);
    memset(im, 0, sizeof *im);
}

const char *gimg_channel_name(int channels, int c)
{
    static const char *const gray[] = {"gray", "alpha"};
    static const char *const rgb[] = {"red", "green", "blue", "alpha"};
    if (channels < 1 || channels > 4 || c < 0 || c >= channels)
        return NULL;
    return channels <= 2 ? gray[c] : rgb[c];
}
