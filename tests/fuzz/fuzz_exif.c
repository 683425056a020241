/*
 * fuzz_exif — the EXIF checks and edits of meta.c on any bytes: the block a
 * JPEG's APP1, a PNG's eXIf or a WebP's EXIF chunk hands over as it is.
 *
 * Checked: a block is kept whole or dropped with a warning, never an
 * error; a kept block's orientation is 0 or 1..8; rewriting the orientation
 * and the pixel dimensions keeps the block's size and structure (it is
 * taken again, with the orientation just written), or drops a crafted
 * block the edit would break.
 */
#include "fuzz.h"
#include "codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gimg_meta *m = NULL;
    gimg_status st = gimg_meta_add_exif(&m, data, size);
    FUZZ_CHECK(st == GIMG_OK, "status %d: %s", (int)st, gimg_last_error());
    if (!m)
        return 0; /* size 0 */
    if (!m->exif) {
        FUZZ_CHECK(size == 0 || m->warning[0], "a dropped block says why");
    } else {
        FUZZ_CHECK(m->exif_bytes == size && !memcmp(m->exif, data, size), "kept whole");
        FUZZ_CHECK(m->orientation >= 0 && m->orientation <= 8, "orientation %d",
                   m->orientation);
        int had_tag = m->orientation != 0;
        int o = 1 + (int)(size % 8);
        gimg_meta_set_orientation(m, o);
        gimg_meta_set_dimensions(m, 1 + (int)(size % 70001), 1 + (int)(size % 13));
        gimg_meta *again = NULL;
        if (m->exif) { /* else the edits broke a crafted block, which was dropped */
            st = gimg_meta_add_exif(&again, m->exif, m->exif_bytes);
            FUZZ_CHECK(st == GIMG_OK && again && again->exif, "an edited block stays valid: %s",
                       again ? again->warning : "");
            FUZZ_CHECK(!had_tag || again->orientation == o, "orientation %d written, %d read",
                       o, again->orientation);
        }
        FUZZ_CHECK(m->orientation == o, "the orientation is kept when the block goes");
        gimg_meta_free(again);
    }
    gimg_meta_free(m);
    return 0;
}
