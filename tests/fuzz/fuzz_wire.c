/*
 * fuzz_wire — gimgd's requests as the server reads them (lib/wire.h): the
 * input is a request's header (gimg_wire_request) then its memory file's
 * bytes. What gimgd checks before it maps or allocates anything
 * (gimg_wire_check_request), then the options (gimg_wire_get_options),
 * then the operation itself on the CPU, as the server would run it (a
 * JPEG input decoded by libjpeg-turbo, as a server without GPU codecs
 * does).
 * Promises: a refusal says why; options taken are in range; an operation
 * on what was taken does not fail for want of sense in its input.
 */
#include "fuzz.h"
#include "gimg_conv.h"
#include "gimg_hist.h"
#include "gimg_orient.h"
#include "gimg_stats.h"
#include "jpeg_internal.h"
#include "wire.h"

/* Convolutions cost pixels x taps: bounded so that each input is quick. */
#define MAX_WORK 20000000.0

static gimg_ctx *cpu_ctx(void)
{
    static gimg_ctx *ctx;
    if (!ctx) {
        gimg_device dev;
        gimg_parse_device("cpu", &dev);
        dev.no_server = 1;
        gimg_ctx_open(&dev, 0, &ctx);
    }
    return ctx;
}

static double conv_work(const gimg_conv_opts *o, const gimg_image *in)
{
    double taps = 0;
    for (int i = 0; i < o->n_kernels; i++)
        taps += (double)o->kernels[i].width * o->kernels[i].height;
    return taps * in->width * in->height * in->channels;
}

static void run(const gimg_wire_request *q, gimg_wire_options *o, const gimg_image *in)
{
    gimg_ctx *ctx = cpu_ctx();
    gimg_image out;
    gimg_status st = GIMG_OK;
    switch (q->op) {
    case GIMG_WIRE_CONV:
        if (conv_work(&o->conv, in) > MAX_WORK)
            return;
        st = gimg_conv(ctx, in, &o->conv, &out);
        break;
    case GIMG_WIRE_ORIENT:
        FUZZ_CHECK(o->orient < GIMG_ORIENT_AUTO, "orientation %u taken", o->orient);
        st = gimg_orient(ctx, in, (gimg_orient_op)o->orient, &out);
        break;
    case GIMG_WIRE_STATS: {
        gimg_stats s;
        st = gimg_stats_compute(ctx, in, &o->stats, &s);
        fuzz_check_failure(st, "stats");
        return;
    }
    default: {
        gimg_hist h;
        st = gimg_hist_compute(ctx, in, &o->hist, &h);
        fuzz_check_failure(st, "hist");
        if (!st)
            gimg_hist_free(&h);
        return;
    }
    }
    fuzz_check_failure(st, "the operation");
    if (st == GIMG_OK) {
        FUZZ_CHECK(out.channels == in->channels && out.sample == in->sample,
                   "an output of another layout");
        gimg_image_free(&out);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gimg_wire_request q;
    if (size < sizeof q)
        return 0;
    gimg_set_max_pixels(FUZZ_MAX_PIXELS);
    memcpy(&q, data, sizeof q);
    /* The fuzzer's pixel offsets would almost never be the page's. */
    int overflow = 0;
    q.pixels_offset = gimg_wire_align(q.options_bytes, &overflow);
    const unsigned char *file = data + sizeof q;
    size_t file_len = size - sizeof q;
    fuzz_clear_error();
    size_t need;
    gimg_status st = gimg_wire_check_request(&q, &need);
    fuzz_check_failure(st, "the request's check");
    if (st || need > file_len)
        return 0;
    /* An exact-size copy, so that reading past what was checked is caught. */
    unsigned char *copy = malloc(need ? need : 1);
    if (!copy)
        return 0;
    memcpy(copy, file, need);
    gimg_wire_options o;
    st = gimg_wire_get_options(&q, copy, &o);
    fuzz_check_failure(st, "the options");
    if (!st && q.input == GIMG_WIRE_JPEG) {
        /* As the server does without GPU codecs: the header must give the
         * layout the request says, then libjpeg-turbo decodes. */
        gimg_image shell, in;
        gimg_jpeg_facts facts;
        const unsigned char *bits = copy + q.pixels_offset;
        if (gimg_jpeg_read_header(bits, (size_t)q.input_bytes, &shell, &facts) == GIMG_OK) {
            int same = (uint32_t)shell.width == q.image.width &&
                       (uint32_t)shell.height == q.image.height &&
                       (uint32_t)shell.channels == q.image.channels;
            gimg_image_free(&shell);
            if (same && gimg_decode_memory(bits, (size_t)q.input_bytes, &in) == GIMG_OK) {
                run(&q, &o, &in);
                gimg_image_free(&in);
            }
        }
        gimg_wire_free_options(&q, &o);
    } else if (!st) {
        gimg_image in;
        gimg_wire_view(&q.image, copy + q.pixels_offset, &in);
        run(&q, &o, &in);
        gimg_wire_free_options(&q, &o);
    }
    free(copy);
    return 0;
}
