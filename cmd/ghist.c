/*
 * ghist — histograms of images: counts per channel (and luma) as a table,
 * CSV or JSON, a plot as an image, or the histogram-equalized image.
 *
 *   ghist [options] INPUT...                   see ghist(1)
 *
 * Exit status: 0 success, 1 when any input failed (the others are still
 * reported), 2 usage error.
 */
#include "batch.h"
#include "driver.h"
#include "gimg_hist.h"
#include "report.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOOL "ghist"

enum { OPT_BINS, OPT_RANGE, OPT_CHANNEL, OPT_LUMA, OPT_CUMULATIVE, OPT_FRACTIONS, OPT_CSV,
       OPT_JSON, OPT_PLOT, OPT_EQUALIZE };

static const gimg_cli_option k_options[] = {
    {"bins", 0, "N", "number of bins, 1 to 65536 (default 256, or one per value up to "
                     "maxval 255)", OPT_BINS},
    {"range", 0, "LO:HI", "count over [LO, HI) (float: [LO, HI]); default 0 to the maxval "
                          "(the file's units), float 0 to 1", OPT_RANGE},
    {"channel", 'c', "LIST", "only these channels: gray, red, green, blue, alpha, luma",
     OPT_CHANNEL},
    {"luma", 0, NULL, "add a Rec. 709 luma histogram; with --equalize, equalize luma only",
     OPT_LUMA},
    {"cumulative", 0, NULL, "running sums (below the range included) instead of counts",
     OPT_CUMULATIVE},
    {"fractions", 0, NULL, "fractions of the pixel count instead of counts", OPT_FRACTIONS},
    {"csv", 0, NULL, "print CSV: bin,lo,hi and a column per channel", OPT_CSV},
    {"json", 0, NULL, "print one JSON object per input file, one per line", OPT_JSON},
    {"plot", 0, "FILE", "also draw the histogram into FILE (PNG by extension)", OPT_PLOT},
    {"equalize", 0, "OUTPUT", "write the histogram-equalized image to OUTPUT instead of counts",
     OPT_EQUALIZE},
    {NULL, 0, NULL, NULL, 0},
};

/* Old names: unknown options whose message names the new one. */
static const char *const k_renamed[] = {"normalize", "fractions", NULL};

static const char *const k_channel_names[] = {"gray", "red", "green", "blue", "alpha", "luma",
                                              NULL};
enum { CH_LUMA_BIT = 1u << 5 };

typedef struct {
    gimg_hist_params p;   /* bins when have_bins, the range when have_range */
    int have_bins, have_range;
    const char *channel_list;
    unsigned channel_mask;  /* 0: every channel (and luma with --luma) */
    int luma, cumulative, fractions, csv, json;
    const char *plot, *equalize;
} settings;

static gimg_status handle_option(void *user, int key, const char *arg)
{
    settings *s = user;
    long long n;
    switch (key) {
    case OPT_BINS:
        if (gimg_cli_parse_int("--bins", arg, 1, GIMG_HIST_MAX_BINS, &n))
            return GIMG_E_USAGE;
        s->p.bins = (int)n;
        s->have_bins = 1;
        break;
    case OPT_RANGE:
        s->have_range = 1;
        return gimg_hist_parse_range(arg, &s->p.lo, &s->p.hi);
    case OPT_CHANNEL:
        s->channel_list = arg;
        return gimg_parse_name_list("--channel", arg, k_channel_names, &s->channel_mask);
    case OPT_LUMA: s->luma = 1; break;
    case OPT_CUMULATIVE: s->cumulative = 1; break;
    case OPT_FRACTIONS: s->fractions = 1; break;
    case OPT_CSV: s->csv = 1; break;
    case OPT_JSON: s->json = 1; break;
    case OPT_PLOT:
    case OPT_EQUALIZE:
        if (!*arg)
            return gimg_fail(GIMG_E_USAGE, "%s: empty file name",
                             key == OPT_PLOT ? "--plot" : "--equalize");
        *(key == OPT_PLOT ? &s->plot : &s->equalize) = arg;
        break;
    }
    return GIMG_OK;
}

static gimg_status finish_settings(const settings *s)
{
    if (s->csv && s->json)
        return gimg_fail(GIMG_E_USAGE, "--csv and --json exclude each other");
    if (s->equalize && (s->csv || s->json || s->cumulative || s->fractions || s->channel_list ||
                        s->have_range || s->have_bins))
        return gimg_fail(GIMG_E_USAGE, "--equalize takes no counting options (only --luma "
                                       "and --plot)");
    return GIMG_OK;
}

/* ---------------------------------------------------------------- output */

/* Which of h's channels are reported, and their names. */
typedef struct {
    int n;
    int idx[GIMG_HIST_MAX_CHANNELS];       /* h's channel */
    const char *name[GIMG_HIST_MAX_CHANNELS];
    unsigned mask;                          /* bit per h channel */
    unsigned columns;   /* bit per k_channel_names entry: the CSV's columns,
                           which come in that order */
    const char *all_names[GIMG_HIST_MAX_CHANNELS];
} selection;

static gimg_status select_channels(const settings *s, int image_channels, const gimg_hist *h,
                                   selection *sel)
{
    memset(sel, 0, sizeof *sel);
    for (int c = 0; c < h->channels; c++)
        sel->all_names[c] = c < image_channels ? gimg_channel_name(image_channels, c) : "luma";
    if (s->channel_mask) {
        for (int bit = 0; k_channel_names[bit]; bit++) {
            if (!(s->channel_mask & (1u << bit)))
                continue;
            int found = -1;
            for (int c = 0; c < h->channels; c++)
                if (!strcmp(sel->all_names[c], k_channel_names[bit]))
                    found = c;
            if (found < 0)
                return gimg_fail(GIMG_E_FORMAT, "the image has no %s channel",
                                 k_channel_names[bit]);
        }
    }
    for (int c = 0; c < h->channels; c++) {
        int bit = 0;
        while (k_channel_names[bit] && strcmp(sel->all_names[c], k_channel_names[bit]))
            bit++;
        if (!s->channel_mask || (s->channel_mask & (1u << bit))) {
            sel->idx[sel->n] = c;
            sel->name[sel->n++] = sel->all_names[c];
            sel->mask |= 1u << c;
            sel->columns |= 1u << bit;
        }
    }
    return GIMG_OK;
}

/* Running sums, computed once per channel for the printers. */
static double *values(const settings *s, const gimg_hist *h, const selection *sel, double pixels)
{
    const int rows = h->bins + 3;
    double *v = malloc(sizeof *v * rows * sel->n);
    if (!v)
        return NULL;
    for (int k = 0; k < sel->n; k++) {
        const int c = sel->idx[k];
        double sum = (double)h->below[c];
        for (int b = 0; b < h->bins; b++) {
            double cnt = (double)h->counts[(size_t)c * h->bins + b];
            sum += cnt;
            v[k * rows + b] = (s->cumulative ? sum : cnt) / (s->fractions ? pixels : 1);
        }
        const double div = s->fractions ? pixels : 1;
        v[k * rows + h->bins] = (double)h->below[c] / div;
        v[k * rows + h->bins + 1] = (double)h->above[c] / div;
        v[k * rows + h->bins + 2] = (double)h->nan[c] / div;
    }
    return v;
}

static double edge(const gimg_hist *h, int b)
{
    return h->lo + (h->hi - h->lo) * b / h->bins;
}

static void print_value(FILE *f, const settings *s, double v, int width)
{
    if (s->fractions)
        fprintf(f, " %*.*g", width, 9, v);
    else
        fprintf(f, " %*.0f", width, v);
}

static void print_table(FILE *f, const settings *s, const char *name, const gimg_image *im,
                        const gimg_hist *h, const selection *sel, const double *v)
{
    const int rows = h->bins + 3;
    fprintf(f, "# %s: %dx%d, %d bins over [%.10g, %.10g%c%s%s\n", name, im->width, im->height,
           h->bins, h->lo, h->hi, im->sample == GIMG_F32 ? ']' : ')',
           s->cumulative ? ", cumulative" : "", s->fractions ? ", fractions" : "");
    fprintf(f, "%6s %12s", "bin", "lo");
    for (int k = 0; k < sel->n; k++)
        fprintf(f, " %12s", sel->name[k]);
    fprintf(f, "\n");
    for (int b = 0; b < h->bins; b++) {
        fprintf(f, "%6d %12.6g", b, edge(h, b));
        for (int k = 0; k < sel->n; k++)
            print_value(f, s, v[k * rows + b], 12);
        fprintf(f, "\n");
    }
    /* The samples outside the range, when there are any. */
    static const char *const k_outside[] = {"below", "above", "nan"};
    for (int o = 0; o < 3; o++) {
        int any = 0;
        for (int k = 0; k < sel->n; k++)
            any |= v[k * rows + h->bins + o] != 0;
        if (!any)
            continue;
        fprintf(f, "%6s %12s", k_outside[o], "");
        for (int k = 0; k < sel->n; k++)
            print_value(f, s, v[k * rows + h->bins + o], 12);
        fprintf(f, "\n");
    }
}

static void print_csv_number(FILE *f, const settings *s, double v)
{
    fputc(',', f);
    if (s->fractions)
        gimg_json_number(f, v);
    else
        fprintf(f, "%.0f", v);
}

static void print_csv(FILE *f, const settings *s, const char *name, int with_file, const gimg_hist *h,
                      const selection *sel, const double *v)
{
    const int rows = h->bins + 3;
    fprintf(f, "%sbin,lo,hi", with_file ? "file," : "");
    for (int k = 0; k < sel->n; k++)
        fprintf(f, ",%s", sel->name[k]);
    fprintf(f, "\n");
    static const char *const k_outside[] = {"below", "above", "nan"};
    for (int b = 0; b < rows; b++) {
        if (with_file) {
            gimg_csv_field(f, name);
            fputc(',', f);
        }
        if (b < h->bins) {
            fprintf(f, "%d,", b);
            gimg_json_number(f, edge(h, b));
            fputc(',', f);
            gimg_json_number(f, edge(h, b + 1));
        } else {
            fprintf(f, "%s,,", k_outside[b - h->bins]);
        }
        for (int k = 0; k < sel->n; k++)
            print_csv_number(f, s, v[k * rows + b]);
        fprintf(f, "\n");
    }
}

static void print_json_values(FILE *f, const settings *s, const double *v, int n)
{
    fputc('[', f);
    for (int i = 0; i < n; i++) {
        if (i)
            fputc(',', f);
        if (s->fractions)
            gimg_json_number(f, v[i]);
        else
            fprintf(f, "%.0f", v[i]);
    }
    fputc(']', f);
}

static void print_json(FILE *f, const settings *s, const char *name, const gimg_hist *h,
                       const selection *sel, const double *v)
{
    const int rows = h->bins + 3;
    fprintf(f, "{\"file\":");
    gimg_json_string(f, name);
    fprintf(f, ",\"bins\":%d,\"range\":[", h->bins);
    gimg_json_number(f, h->lo);
    fputc(',', f);
    gimg_json_number(f, h->hi);
    fprintf(f, "],\"cumulative\":%s,\"fractions\":%s,\"counts\":{", s->cumulative ? "true" : "false",
           s->fractions ? "true" : "false");
    for (int k = 0; k < sel->n; k++) {
        fprintf(f, "%s\"%s\":", k ? "," : "", sel->name[k]);
        print_json_values(f, s, v + k * rows, h->bins);
    }
    static const char *const k_outside[] = {"below", "above", "nan"};
    for (int o = 0; o < 3; o++) {
        fprintf(f, "},\"%s\":{", k_outside[o]);
        for (int k = 0; k < sel->n; k++) {
            fprintf(f, "%s\"%s\":", k ? "," : "", sel->name[k]);
            if (s->fractions)
                gimg_json_number(f, v[k * rows + h->bins + o]);
            else
                fprintf(f, "%.0f", v[k * rows + h->bins + o]);
        }
    }
    fprintf(f, "}}\n");
}

/* ----------------------------------------------------------------- work */

/* What the callbacks share; emit's, which runs in order. */
typedef struct {
    const settings *s;
    unsigned csv_columns;  /* the CSV header's (selection.columns), once one
                              is printed; 0 before */
    int tables;            /* tables printed so far */
} job;

/* The images the driver writes for ghist, in the order they go to
 * standard output when both do. */
enum { IMG_EQUALIZED, IMG_PLOT };

/* The bins for im (its layout; no pixels needed): the defaults follow the
 * maxval (gimg_hist_default_params); a range given alone gets 256 bins,
 * as it always had; --equalize counts with the defaults. */
static void bins_for(const settings *s, const gimg_image *im, gimg_hist_params *p)
{
    gimg_hist_default_params(im, p);
    if (!s->equalize) {
        if (s->have_bins || s->have_range)
            p->bins = s->have_bins ? s->p.bins : 256;
        if (s->have_range) {
            p->lo = s->p.lo;
            p->hi = s->p.hi;
        }
    }
    p->luma = s->luma || (s->channel_mask & CH_LUMA_BIT);
}

/* The report of h, the histogram of im (its layout), and its plot. */
static gimg_status report_hist(const settings *s, gimg_driver_item *item, const gimg_image *im,
                               const gimg_hist *h, FILE *out)
{
    selection sel;
    double *v = NULL;
    gimg_status st = select_channels(s, im->channels, h, &sel);
    if (!st)
        item->tag = sel.columns;
    const double pixels = (double)im->width * im->height;
    if (!st && !s->equalize) {
        /* CSV: the header on every report; emit prints the first and checks
         * that the others have its columns (item->tag). */
        if (!(v = values(s, h, &sel, pixels)))
            st = gimg_fail(GIMG_E_NOMEM, "out of memory");
        else if (s->json)
            print_json(out, s, item->name, h, &sel, v);
        else if (s->csv)
            print_csv(out, s, item->name, !item->single, h, &sel, v);
        else
            print_table(out, s, item->name, im, h, &sel, v);
    }
    if (!st && s->plot) {
        gimg_hist_plot_opts o = {.title = item->name, .cumulative = s->cumulative,
                                 .normalize = s->fractions, .pixels = (uint64_t)pixels};
        st = gimg_hist_plot(h, sel.mask, sel.all_names, &o, &item->image[IMG_PLOT]);
        /* The plot's format is its extension's (-f is the equalized image's),
         * PNG without one. */
        item->write[IMG_PLOT].format =
            gimg_format_from_path(item->output[IMG_PLOT]) == GIMG_FMT_UNKNOWN ? GIMG_FMT_PNG
                                                                              : GIMG_FMT_UNKNOWN;
    }
    free(v);
    return st;
}

/* One input: count and report, plot, or equalize. */
static gimg_status report(void *user, gimg_ctx *ctx, gimg_driver_item *item,
                          const gimg_image *im, FILE *out)
{
    const job *j = user;
    const settings *s = j->s;
    gimg_hist h = {0};
    gimg_status st = GIMG_OK;
    if (s->equalize) {
        st = gimg_hist_equalize(ctx, im, s->luma, &item->image[IMG_EQUALIZED]);
        if (st || !s->plot)
            return st;
    }
    gimg_hist_params p;
    bins_for(s, im, &p);
    if (!(st = gimg_hist_compute(ctx, im, &p, &h)))
        st = report_hist(s, item, im, &h, out);
    gimg_hist_free(&h);
    return st;
}

/* ------------------------------------------------------ large images */

/* An image read in bands (gimg(7) LARGE IMAGES): the bands' counts added
 * up, which are the whole image's (counts are exact). --equalize, which
 * maps every pixel by the whole histogram, reads the image whole. */
typedef struct {
    gimg_ctx *ctx;
    gimg_image header;
    gimg_hist_params p;
    gimg_hist h;
} banded;

static gimg_status bands_begin(void *user, gimg_ctx *ctx, gimg_driver_item *item,
                               const gimg_image *header, void **state)
{
    const job *j = user;
    *state = NULL;
    if (j->s->equalize)
        return GIMG_OK;
    banded *b = calloc(1, sizeof *b);
    if (!b)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    b->ctx = ctx;
    b->header = *header;
    b->header.meta = NULL;
    bins_for(j->s, header, &b->p);
    *state = b;
    return GIMG_OK;
}

static gimg_status bands_add(void *user, void *state, const gimg_image *band, int y0)
{
    banded *b = state;
    gimg_hist part = {0};
    gimg_status st = gimg_hist_compute(b->ctx, band, &b->p, &part);
    if (!st)
        st = gimg_hist_add(&b->h, &part);
    gimg_hist_free(&part);
    return st;
}

static gimg_status bands_end(void *user, void *state, gimg_driver_item *item, FILE *out)
{
    const job *j = user;
    banded *b = state;
    gimg_status st = out ? report_hist(j->s, item, &b->header, &b->h, out) : GIMG_OK;
    gimg_hist_free(&b->h);
    free(b);
    return st;
}

/* The names of CSV columns (selection.columns) as the header has them:
 * "red,green,blue". */
static const char *column_names(unsigned columns, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int bit = 0; k_channel_names[bit] && n < size; bit++)
        if (columns & (1u << bit))
            n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? "," : "", k_channel_names[bit]);
    return buf;
}

/* In input order: tables apart by a blank line; one CSV header, the first
 * report's, and a report whose channels are not its columns refused (its
 * rows would not fit them). */
static gimg_status emit(void *user, gimg_driver_item *item, const char *text, size_t len,
                        FILE *out)
{
    job *j = user;
    const settings *s = j->s;
    if (s->csv && !s->equalize) {
        const char *nl = memchr(text, '\n', len);
        size_t header_len = nl ? (size_t)(nl - text) + 1 : len;
        if (!j->csv_columns) {
            j->csv_columns = item->tag;
        } else if (item->tag != j->csv_columns) {
            char have[64], want[64];
            return gimg_fail(GIMG_E_FORMAT, "its channels (%s) are not the CSV header's (%s): "
                                            "select common ones with -c (luma: any image), or "
                                            "use --json",
                             column_names(item->tag, have, sizeof have),
                             column_names(j->csv_columns, want, sizeof want));
        } else {
            text += header_len;
            len -= header_len;
        }
    } else if (!s->json && !s->equalize && j->tables++) {
        fputc('\n', out); /* not before the first table printed, whichever input */
    }
    fwrite(text, 1, len, out);
    return GIMG_OK;
}

int main(int argc, char **argv)
{
    gimg_cli_settle_threads(argv);
    settings s = {0};
    const gimg_cli_spec spec = {
        .tool = TOOL,
        .description = "Count the samples of images per channel, plot the histograms or "
                       "equalize the images.",
        .operands = "INPUT...",
        .min_operands = 1,
        .max_operands = -1,
        .options = k_options,
        .handle = handle_option,
        .user = &s,
        .omit = GIMG_CLI_NO_OUTPUT,
        .with = GIMG_CLI_WITH_BATCH | GIMG_CLI_WITH_BANDS,
        .renamed = k_renamed,
        .epilogue =
            "Prints a table of bin, lower edge and a count per channel; samples outside\n"
            "the range are counted apart (below, above, nan). INPUT may be '-' for standard\n"
            "input (read too when no INPUT is given and it is not a terminal); a PNM/PAM\n"
            "stream there is counted image by image. One report per input, in order.\n"
            "With several inputs, --plot and --equalize take a pattern (%f: the input's\n"
            "name without its extension, %i: its number) or a folder (DIR/); see gimg(7).",
    };
    gimg_cli_common c;
    gimg_status st = gimg_cli_parse(&spec, argc, argv, &c);
    if (!st && c.action == GIMG_CLI_RUN)
        st = finish_settings(&s);
    int rc = gimg_cli_done(&spec, &c, st);
    if (rc >= 0)
        return rc;
    if (s.equalize && !strcmp(s.equalize, "-") && isatty(STDOUT_FILENO))
        return gimg_cli_error(TOOL, NULL,
                              gimg_fail(GIMG_E_USAGE, "refusing to write image data to a "
                                                      "terminal (give OUTPUT or redirect)"));
    gimg_install_signal_cleanup();
    job j = {.s = &s};
    const gimg_driver driver = {
        .tool = TOOL,
        .report = report,
        .emit = emit,
        .images = {[IMG_EQUALIZED] = {s.equalize, "--equalize", 1},
                   [IMG_PLOT] = {s.plot, "--plot", 0}},
        .bands = {.begin = bands_begin, .add = bands_add, .end = bands_end},
        .user = &j,
    };
    return gimg_drive(&driver, &c);
}
