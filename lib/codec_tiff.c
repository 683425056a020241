/* codec_tiff.c — TIFF (placeholder while the codec is written: refuses every file). */
#include "codec.h"

#include <string.h>

static int sniff(const unsigned char *buf, size_t len) { (void)buf; (void)len; return 0; }
static gimg_status probe(const unsigned char *buf, size_t len, const gimg_read_opts *o,
                         gimg_info *info)
{
    return gimg_fail(GIMG_E_FORMAT, "TIFF is not read yet");
}
static gimg_status decode(const unsigned char *buf, size_t len, const gimg_read_opts *o,
                          gimg_image *out)
{
    memset(out, 0, sizeof *out);
    return gimg_fail(GIMG_E_FORMAT, "TIFF is not read yet");
}
const gimg_codec gimg_codec_tiff = { GIMG_FMT_TIFF, "TIFF", "tif tiff", 1, sniff, probe, decode, NULL, NULL };
