/*
 * imgcmp A B — exit 0 if A and B decode to identical images (size, channels,
 * depth and every sample bit for bit), 1 if they differ (the first difference
 * on stderr), 2 on a usage or read error.
 */
#include "gimg.h"

#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: imgcmp A B\n");
        return 2;
    }
    gimg_image a, b;
    if (gimg_read(argv[1], &a)) {
        fprintf(stderr, "imgcmp: %s: %s\n", argv[1], gimg_last_error());
        return 2;
    }
    if (gimg_read(argv[2], &b)) {
        fprintf(stderr, "imgcmp: %s: %s\n", argv[2], gimg_last_error());
        return 2;
    }
    int differ = 0;
    if (a.width != b.width || a.height != b.height || a.channels != b.channels ||
        a.sample != b.sample) {
        fprintf(stderr, "imgcmp: layout differs: %dx%d %d channels %d-bit vs %dx%d %d channels %d-bit\n",
                a.width, a.height, a.channels, 8 * (int)a.sample, b.width, b.height, b.channels,
                8 * (int)b.sample);
        differ = 1;
    }
    size_t row = (size_t)a.width * gimg_pixel_bytes(&a);
    for (int y = 0; !differ && y < a.height; y++) {
        const unsigned char *ra = gimg_row(&a, y), *rb = gimg_row(&b, y);
        if (memcmp(ra, rb, row) != 0) {
            size_t i = 0;
            while (ra[i] == rb[i])
                i++;
            size_t px = i / gimg_pixel_bytes(&a);
            fprintf(stderr, "imgcmp: first difference at x=%zu y=%d channel %zu\n", px, y,
                    (i % gimg_pixel_bytes(&a)) / a.sample);
            differ = 1;
        }
    }
    gimg_image_free(&a);
    gimg_image_free(&b);
    return differ;
}
