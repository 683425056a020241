/*
 * testjpeg.h — JPEG files made by libjpeg directly, for tests that need
 * codings our encoder does not write (CMYK and YCCK, 4:1:1, arithmetic
 * coding, scan scripts, cjpeg's exact settings). Needs testfile.h's bytes.
 */
#ifndef GIMG_TESTJPEG_H
#define GIMG_TESTJPEG_H

#include "testfile.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

#include <jpeglib.h>

/* libjpeg's error manager, jumping back to the caller on an error. */
typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
} test_error;

static inline void test_error_exit(j_common_ptr c)
{
    longjmp(((test_error *)c->err)->jump, 1);
}

/* Adjusts libjpeg's defaults (jpeg_set_defaults has run) for one file. */
typedef void (*testjpeg_setup)(j_compress_ptr c, void *user);

/* A JPEG of w x h pixels of `components` samples in in_space (rows of
 * px stride bytes apart), coded with libjpeg's defaults as setup changes
 * them; .p is NULL if libjpeg failed. The caller frees .p. */
static inline bytes testjpeg_encode(const unsigned char *px, size_t stride, int w, int h,
                                    int components, J_COLOR_SPACE in_space,
                                    testjpeg_setup setup, void *user)
{
    bytes out = {0};
    struct jpeg_compress_struct c;
    test_error e;
    unsigned char *mem = NULL;
    unsigned long size = 0;
    c.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = test_error_exit;
    if (setjmp(e.jump)) {
        jpeg_destroy_compress(&c);
        free(mem);
        return out;
    }
    jpeg_create_compress(&c);
    jpeg_mem_dest(&c, &mem, &size);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = components;
    c.in_color_space = in_space;
    jpeg_set_defaults(&c);
    if (setup)
        setup(&c, user);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(px + (size_t)c.next_scanline * stride);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    put(&out, mem, size);
    free(mem);
    return out;
}

#endif
