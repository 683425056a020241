/*
 * testfile.h — what the codec unit tests (tests/unit_codec_*.c) share:
 * files in and out of memory, peer programs, CPU time, and comparing
 * decoded images, and a byte buffer for hand-made files. Nothing here
 * allocates but slurp() and put(), whose buffers the caller frees.
 */
#ifndef GIMG_TESTFILE_H
#define GIMG_TESTFILE_H

#include "gimg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

static inline double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline int contains(const char *haystack, const char *needle)
{
    return strstr(haystack, needle) != NULL;
}

/* 1 if a and b have the same layout and samples (rows compared, not the
 * padding between them). */
static inline int same_pixels(const gimg_image *a, const gimg_image *b)
{
    if (a->width != b->width || a->height != b->height || a->channels != b->channels ||
        a->sample != b->sample)
        return 0;
    size_t row = (size_t)a->width * gimg_pixel_bytes(a);
    for (int y = 0; y < a->height; y++)
        if (memcmp(gimg_row(a, y), gimg_row(b, y), row) != 0)
            return 0;
    return 1;
}

/* The whole of a file in a malloc'd buffer, or NULL. */
static inline unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc(n > 0 ? (size_t)n : 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return p;
}

static inline int write_file(const char *path, const unsigned char *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    int ok = fwrite(buf, 1, len, f) == len;
    return fclose(f) == 0 && ok;
}

/* Runs a shell command; its exit status (-1 if it did not exit). */
static inline int run(const char *cmd)
{
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* 1 if a peer program is on the PATH (tests using it skip otherwise). */
static inline int have_program(const char *name)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", name);
    return system(cmd) == 0;
}

/* A growing byte buffer, for files the tests build by hand; put() exits
 * the test program if memory runs out. The caller frees p. */
typedef struct {
    unsigned char *p;
    size_t len, cap;
} bytes;

static inline void put(bytes *b, const void *data, size_t n)
{
    if (n == 0) /* data may then be NULL, which memcpy may not be given */
        return;
    if (b->cap - b->len < n) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < n)
            cap *= 2;
        unsigned char *p = realloc(b->p, cap);
        if (!p) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

/* Defined in a build with a sanitizer, whose allocator pads and holds
 * back freed blocks: memory figures, and replacing malloc, are its own. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer) || \
    __has_feature(thread_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#endif

/* What a time limit on CPU seconds is multiplied by: AddressSanitizer's
 * instrumentation makes code 2-3 times slower by its own account. The
 * limits stay far below what the unbounded work they guard against takes. */
#ifdef UNDER_SANITIZER
#define SANITIZER_SLOWDOWN 3.0
#else
#define SANITIZER_SLOWDOWN 1.0
#endif

/* 1 under valgrind, where timing limits mean nothing. */
static inline int under_valgrind(void)
{
    const char *preload = getenv("LD_PRELOAD");
    return preload && strstr(preload, "vgpreload");
}

#endif
