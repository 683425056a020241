/*
 * stb_impl.c — the one translation unit that compiles stb_image and
 * stb_image_write (Debian's libstb-dev headers), configured for libgimg:
 *
 *  - Only the formats we route to stb are compiled in: BMP, TGA and HDR
 *    (codec_stb.c). JPEG, PNG and GIF have codecs of their own on
 *    libjpeg-turbo, libspng and giflib; PNM is codec_pnm.c's.
 *  - stb_image allocates with 64-byte alignment, like gimg_image_alloc(), so
 *    codec_stb.c can adopt a decoded buffer as an image's pixels without a copy
 *    and gimg_image_free() (plain free()) releases it.
 *  - stb_image_write serves BMP, TGA and HDR only. PNG is written by
 *    codec_png.c with libdeflate: stb's PNG writer, even with libdeflate
 *    plugged in through STBIW_ZLIB_COMPRESS, spends as long choosing row
 *    filters (single-threaded) as codec_png.c takes for the whole file, and
 *    has no 16-bit mode; JPEG by codec_jpeg.c with libjpeg-turbo.
 */
#include "io_internal.h"

#include <stdlib.h>
#include <string.h>


/* -------------------------------------------------- stb_image allocation */

static void *aligned_malloc(size_t size)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, size ? size : 1) != 0)
        return NULL;
    return p;
}

/* realloc() would not keep the 64-byte alignment, so grow by copying. stb
 * requires a realloc, though none of the three formats compiled in grows
 * a buffer. */
__attribute__((unused)) static void *aligned_realloc_sized(void *old, size_t old_size, size_t new_size)
{
    void *p = aligned_malloc(new_size);
    if (!p)
        return NULL;
    if (old) {
        memcpy(p, old, old_size < new_size ? old_size : new_size);
        free(old);
    }
    return p;
}

/* ---------------------------------------------------------------- stb */

#define STBI_ONLY_BMP
#define STBI_ONLY_TGA
#define STBI_ONLY_HDR
#define STBI_NO_STDIO
#define STBI_MAX_DIMENSIONS GIMG_MAX_DIMENSION
#define STBI_MALLOC(sz) aligned_malloc(sz)
#define STBI_REALLOC_SIZED(p, oldsz, newsz) aligned_realloc_sized((p), (oldsz), (newsz))
#define STBI_FREE(p) free(p)
#define STB_IMAGE_IMPLEMENTATION

/* Not STBI_WRITE_NO_STDIO: in this stb_image_write it also removes the HDR
 * writer, callback variant included. */
#define STBIW_MALLOC(sz) malloc(sz)
#define STBIW_REALLOC(p, newsz) realloc((p), (newsz))
#define STBIW_FREE(p) free(p)
#define STB_IMAGE_WRITE_IMPLEMENTATION

/* stb is third-party code: keep its warnings out of our -Wall -Wextra build
 * even when STB_INCLUDE is given with -I rather than -isystem. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wall"
#pragma GCC diagnostic ignored "-Wextra"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wmisleading-indentation"
#pragma GCC diagnostic ignored "-Wtype-limits"
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wdouble-promotion"
#pragma GCC diagnostic ignored "-Wcast-qual"
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wsign-conversion"
#pragma GCC diagnostic ignored "-Wfloat-conversion"
#include <stb_image.h>
#include <stb_image_write.h>
#pragma GCC diagnostic pop
