/*
 * gen — makes the test and sample images of the project.
 *
 *   gen [--seed N] [--pattern random|gradient|constant:V] [-f FMT]
 *       [--jpeg-coding cmyk|411] WIDTH HEIGHT CHANNELS DEPTH OUTPUT
 *
 * DEPTH is 8, 16 or 32 (float). OUTPUT "-" writes to stdout (PNM/PAM unless
 * -f says otherwise). --jpeg-coding writes a JPEG our encoder does not
 * (libjpeg's own, quality 90) of an 8-bit RGB image: CMYK (the RGB
 * samples and their mean as the four inks, Adobe marker) or YCbCr 4:1:1.
 * Exit 0 on success, 1 on a runtime error, 2 on usage.
 */
#include "gimg.h"
#include "testimg.h"
#include "testjpeg.h"

#include <stdlib.h>
#include <string.h>

static int usage(void)
{
    fprintf(stderr, "usage: gen [--seed N] [--pattern random|gradient|constant:V] [-f FMT] "
                    "[--jpeg-coding cmyk|411] WIDTH HEIGHT CHANNELS DEPTH OUTPUT\n");
    return 2;
}

/* A smooth image: each channel a different ramp, so orientation errors show. */
static void fill_gradient(gimg_image *im)
{
    double maxv = im->sample == GIMG_U8 ? 255 : im->sample == GIMG_U16 ? 65535 : 1;
    for (int y = 0; y < im->height; y++)
        for (int x = 0; x < im->width; x++)
            for (int c = 0; c < im->channels; c++) {
                double fx = im->width > 1 ? (double)x / (im->width - 1) : 0;
                double fy = im->height > 1 ? (double)y / (im->height - 1) : 0;
                double v = c == 0 ? fx : c == 1 ? fy : c == 2 ? (fx + fy) / 2 : 1 - fx * fy;
                size_t i = (size_t)x * im->channels + c;
                unsigned char *row = gimg_row(im, y);
                if (im->sample == GIMG_U8)
                    row[i] = (unsigned char)(v * maxv + 0.5);
                else if (im->sample == GIMG_U16)
                    ((uint16_t *)row)[i] = (uint16_t)(v * maxv + 0.5);
                else
                    ((float *)row)[i] = (float)v;
            }
}

static void coding_setup(j_compress_ptr c, void *user)
{
    const char *coding = user;
    jpeg_set_quality(c, 90, TRUE);
    if (!strcmp(coding, "cmyk")) {
        jpeg_set_colorspace(c, JCS_CMYK);
        c->write_Adobe_marker = TRUE;
    } else { /* 411 */
        c->comp_info[0].h_samp_factor = 4;
        c->comp_info[0].v_samp_factor = 1;
    }
}

/* --jpeg-coding: im (8-bit RGB) as a JPEG file of that coding. */
static int write_jpeg_coding(const gimg_image *im, const char *coding, const char *out)
{
    const int cmyk = !strcmp(coding, "cmyk");
    const size_t n = (size_t)im->width * im->height;
    unsigned char *px = malloc(n * (cmyk ? 4 : 3));
    if (!px)
        return 1;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *p = gimg_row(im, (int)(i / im->width)) + i % im->width * 3;
        if (cmyk) {
            for (int k = 0; k < 3; k++)
                px[4 * i + k] = p[k];
            px[4 * i + 3] = (unsigned char)((p[0] + p[1] + p[2]) / 3);
        } else {
            memcpy(px + 3 * i, p, 3);
        }
    }
    bytes f = testjpeg_encode(px, (size_t)im->width * (cmyk ? 4 : 3), im->width, im->height,
                              cmyk ? 4 : 3, cmyk ? JCS_CMYK : JCS_RGB, coding_setup,
                              (void *)coding);
    free(px);
    int rc = !f.p || gimg_write_file(out, f.p, f.len) != GIMG_OK;
    free(f.p);
    return rc;
}

static void fill_constant(gimg_image *im, double v)
{
    for (int y = 0; y < im->height; y++)
        for (size_t i = 0; i < (size_t)im->width * im->channels; i++) {
            unsigned char *row = gimg_row(im, y);
            if (im->sample == GIMG_U8)
                row[i] = (unsigned char)v;
            else if (im->sample == GIMG_U16)
                ((uint16_t *)row)[i] = (uint16_t)v;
            else
                ((float *)row)[i] = (float)v;
        }
}

int main(int argc, char **argv)
{
    uint64_t seed = 1;
    const char *pattern = "random", *coding = NULL;
    gimg_write_opts wo;
    gimg_write_opts_init(&wo);
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--pattern") && i + 1 < argc)
            pattern = argv[++i];
        else if (!strcmp(argv[i], "--jpeg-coding") && i + 1 < argc &&
                 (!strcmp(argv[i + 1], "cmyk") || !strcmp(argv[i + 1], "411")))
            coding = argv[++i];
        else if (!strcmp(argv[i], "-f") && i + 1 < argc) {
            wo.format = gimg_format_from_name(argv[++i]);
            if (wo.format == GIMG_FMT_UNKNOWN)
                return usage();
        } else
            return usage();
    }
    if (argc - i != 5)
        return usage();
    int w = atoi(argv[i]), h = atoi(argv[i + 1]), c = atoi(argv[i + 2]), d = atoi(argv[i + 3]);
    const char *out = argv[i + 4];
    if (d != 8 && d != 16 && d != 32)
        return usage();
    gimg_sample s = d == 8 ? GIMG_U8 : d == 16 ? GIMG_U16 : GIMG_F32;
    gimg_image im;
    gimg_status st = gimg_image_alloc(&im, w, h, c, s);
    if (st) {
        fprintf(stderr, "gen: %s\n", gimg_last_error());
        return 2;
    }
    if (!strcmp(pattern, "random"))
        testimg_fill_random(&im, seed);
    else if (!strcmp(pattern, "gradient"))
        fill_gradient(&im);
    else if (!strncmp(pattern, "constant:", 9))
        fill_constant(&im, atof(pattern + 9));
    else
        return usage();
    if (coding && (c != 3 || s != GIMG_U8))
        return usage();
    st = coding ? (write_jpeg_coding(&im, coding, out) ? GIMG_E_IO : GIMG_OK)
                : gimg_write(out, &im, &wo);
    gimg_image_free(&im);
    if (st) {
        fprintf(stderr, "gen: %s: %s\n", out, gimg_last_error());
        return 1;
    }
    if (fclose(stdout) != 0) {
        perror("gen: stdout");
        return 1;
    }
    return 0;
}
