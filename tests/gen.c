/*
 * gen — makes the test and sample images of the project.
 *
 *   gen [--seed N] [--pattern random|gradient|constant:V] [-f FMT]
 *       WIDTH HEIGHT CHANNELS DEPTH OUTPUT
 *
 * DEPTH is 8, 16 or 32 (float). OUTPUT "-" writes to stdout (PNM/PAM unless
 * -f says otherwise). Exit 0 on success, 1 on a runtime error, 2 on usage.
 */
#include "gimg.h"
#include "testimg.h"

#include <stdlib.h>
#include <string.h>

static int usage(void)
{
    fprintf(stderr, "usage: gen [--seed N] [--pattern random|gradient|constant:V] [-f FMT] "
                    "WIDTH HEIGHT CHANNELS DEPTH OUTPUT\n");
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
    const char *pattern = "random";
    gimg_write_opts wo;
    gimg_write_opts_init(&wo);
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--pattern") && i + 1 < argc)
            pattern = argv[++i];
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
    st = gimg_write(out, &im, &wo);
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
