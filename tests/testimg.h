/*
 * testimg.h — seeded test images shared by the test programs and benchmarks.
 * The same seed gives the same image on every machine (splitmix64).
 */
#ifndef GIMG_TESTIMG_H
#define GIMG_TESTIMG_H

#include "gimg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A context that computes on the CPU, the tests' reference; NULL, with
 * the reason printed as a FAIL line, if it cannot be opened. The caller
 * closes it with gimg_ctx_close. */
static inline gimg_ctx *testimg_cpu_ctx(void)
{
    gimg_device dev;
    gimg_ctx *ctx = NULL;
    gimg_parse_device("cpu", &dev);
    if (gimg_ctx_open(&dev, 0, &ctx) != GIMG_OK) {
        printf("FAIL: setup: a CPU context: %s\n", gimg_last_error());
        return NULL;
    }
    return ctx;
}

static inline uint64_t testimg_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Fills every sample of im with seeded random values over the sample type's
 * whole range ([0,1) for float). Row padding, if any, is left alone. */
static inline void testimg_fill_random(gimg_image *im, uint64_t seed)
{
    uint64_t state = seed;
    size_t n = (size_t)im->width * (size_t)im->channels;
    for (int y = 0; y < im->height; y++) {
        unsigned char *row = gimg_row(im, y);
        for (size_t i = 0; i < n; i++) {
            uint64_t r = testimg_next(&state);
            if (im->sample == GIMG_U8)
                row[i] = (unsigned char)r;
            else if (im->sample == GIMG_U16)
                ((uint16_t *)row)[i] = (uint16_t)r;
            else
                ((float *)row)[i] = (float)(r >> 40) / (float)(1u << 24);
        }
    }
}

/* Fills an 8-bit image like a photo for the codecs: smooth shading (a
 * different phase per channel), sharp-edged patches and a little seeded
 * grain. The shading is separable, its factors computed once per column
 * and row, which keeps megapixel images quick to make under valgrind.
 * Returns 0 when out of memory (im untouched). */
static inline int testimg_fill_photo(gimg_image *im, uint64_t seed)
{
    const int w = im->width, c = im->channels;
    double *across = (double *)malloc(sizeof(double) * (size_t)w * (size_t)c);
    if (!across)
        return 0;
    for (int x = 0; x < w; x++)
        for (int k = 0; k < c; k++)
            across[(size_t)x * c + k] = sin(0.045 * x + 1.3 * k);
    uint64_t state = seed;
    for (int y = 0; y < im->height; y++) {
        unsigned char *row = gimg_row(im, y);
        double down[4];
        for (int k = 0; k < c && k < 4; k++)
            down[k] = cos(0.031 * y - 0.5 * k);
        for (int x = 0; x < w; x++)
            for (int k = 0; k < c; k++) {
                double v = 128 + 70 * across[(size_t)x * c + k] * down[k & 3];
                if ((x / 13 + y / 11 + k) % 5 == 0)
                    v += 60; /* edges */
                v += (double)(testimg_next(&state) % 17) - 8.0;
                row[(size_t)x * c + k] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
    }
    free(across);
    return 1;
}

/* Fills an 8/16-bit image with seeded random values in 0..maxval (samples
 * in a file's own units, gimg_image.maxval) and sets its maxval; a maxval
 * of the type's full range (255, 65535) leaves it 0. The first samples
 * are 0 and maxval, so both ends are always present. */
static inline void testimg_fill_maxval(gimg_image *im, uint64_t seed, unsigned maxval)
{
    uint64_t state = seed;
    size_t n = (size_t)im->width * (size_t)im->channels, k = 0;
    for (int y = 0; y < im->height; y++) {
        unsigned char *row = gimg_row(im, y);
        for (size_t i = 0; i < n; i++, k++) {
            unsigned v = k == 0 ? 0u : k == 1 ? maxval
                                              : (unsigned)(testimg_next(&state) % (maxval + 1u));
            if (im->sample == GIMG_U8)
                row[i] = (unsigned char)v;
            else
                ((uint16_t *)row)[i] = (uint16_t)v;
        }
    }
    im->maxval = maxval == (im->sample == GIMG_U8 ? 255u : 65535u) ? 0 : maxval;
}

#ifdef __cplusplus
}
#endif

#endif
