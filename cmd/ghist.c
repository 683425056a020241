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

enum { OPT_BINS, OPT_RANGE, OPT_CHANNEL, OPT_LUMA, OPT_CUMULATIVE, OPT_NORMALIZE, OPT_CSV,
       OPT_JSON, OPT_PLOT, OPT_EQUALIZE };

static const gimg_cli_option k_options[] = {
    {"bins", 0, "N", "number of bins, 1 to 65536 (default 256)", OPT_BINS},
    {"range", 0, "LO:HI", "count over [LO, HI) (float: [LO, HI]); default the sample type's "
                          "range", OPT_RANGE},
    {"channel", 'c', "LIST", "only these channels: gray, red, green, blue, alpha, luma",
     OPT_CHANNEL},
    {"luma", 0, NULL, "add a Rec. 709 luma histogram; with --equalize, equalize luma only",
     OPT_LUMA},
    {"cumulative", 0, NULL, "running sums (below the range included) instead of counts",
     OPT_CUMULATIVE},
    {"normalize", 0, NULL, "fractions of the pixel count instead of counts", OPT_NORMALIZE},
    {"csv", 0, NULL, "print CSV: bin,lo,hi and a column per channel", OPT_CSV},
    {"json", 0, NULL, "print one JSON object per input file, one per line", OPT_JSON},
    {"plot", 0, "FILE", "also draw the histogram into FILE (PNG by extension)", OPT_PLOT},
    {"equalize", 0, "OUTPUT", "write the histogram-equalized image to OUTPUT instead of counts",
     OPT_EQUALIZE},
    {NULL, 0, NULL, NULL, 0},
};

static const char *const k_channel_names[] = {"gray", "red", "green", "blue", "alpha", "luma",
                                              NULL};
enum { CH_LUMA_BIT = 1u << 5 };

typedef struct {
    gimg_hist_params p;   /* bins, and the range when have_range */
    int have_range;
    const char *channel_list;
    unsigned channel_mask;  /* 0: every channel (and luma with --luma) */
    int luma, cumulative, normalize, csv, json;
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
        break;
    case OPT_RANGE:
        s->have_range = 1;
        return gimg_hist_parse_range(arg, &s->p.lo, &s->p.hi);
    case OPT_CHANNEL:
        s->channel_list = arg;
        return gimg_parse_name_list("--channel", arg, k_channel_names, &s->channel_mask);
    case OPT_LUMA: s->luma = 1; break;
    case OPT_CUMULATIVE: s->cumulative = 1; break;
    case OPT_NORMALIZE: s->normalize = 1; break;
    case OPT_CSV: s->csv = 1; break;
    case OPT_JSON: s->json = 1; break;
    case OPT_PLOT: s->plot = arg; break;
    case OPT_EQUALIZE: s->equalize = arg; break;
    }
    return GIMG_OK;
}

static gimg_status finish_settings(const settings *s)
{
    if (s->csv && s->json)
        return gimg_fail(GIMG_E_USAGE, "--csv and --json exclude each other");
    if (s->equalize && (s->csv || s->json || s->cumulative || s->normalize || s->channel_list ||
                        s->have_range || s->p.bins != 256))
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
        int want = !s->channel_mask;
        for (int bit = 0; k_channel_names[bit] && !want; bit++)
            want = (s->channel_mask & (1u << bit)) && !strcmp(sel->all_names[c], k_channel_names[bit]);
        if (want) {
            sel->idx[sel->n] = c;
            sel->name[sel->n++] = sel->all_names[c];
            sel->mask |= 1u << c;
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
            v[k * rows + b] = (s->cumulative ? sum : cnt) / (s->normalize ? pixels : 1);
        }
        const double div = s->normalize ? pixels : 1;
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
    if (s->normalize)
        fprintf(f, " %*.*g", width, 9, v);
    else
        fprintf(f, " %*.0f", width, v);
}

static void print_table(const settings *s, const char *name, const gimg_image *im,
                        const gimg_hist *h, const selection *sel, const double *v)
{
    const int rows = h->bins + 3;
    printf("# %s: %dx%d, %d bins over [%.10g, %.10g%c%s%s\n", name, im->width, im->height,
           h->bins, h->lo, h->hi, im->sample == GIMG_F32 ? ']' : ')',
           s->cumulative ? ", cumulative" : "", s->normalize ? ", fractions" : "");
    printf("%6s %12s", "bin", "lo");
    for (int k = 0; k < sel->n; k++)
        printf(" %12s", sel->name[k]);
    printf("\n");
    for (int b = 0; b < h->bins; b++) {
        printf("%6d %12.6g", b, edge(h, b));
        for (int k = 0; k < sel->n; k++)
            print_value(stdout, s, v[k * rows + b], 12);
        printf("\n");
    }
    /* The samples outside the range, when there are any. */
    static const char *const k_outside[] = {"below", "above", "nan"};
    for (int o = 0; o < 3; o++) {
        int any = 0;
        for (int k = 0; k < sel->n; k++)
            any |= v[k * rows + h->bins + o] != 0;
        if (!any)
            continue;
        printf("%6s %12s", k_outside[o], "");
        for (int k = 0; k < sel->n; k++)
            print_value(stdout, s, v[k * rows + h->bins + o], 12);
        printf("\n");
    }
}

static void print_csv_number(const settings *s, double v)
{
    putchar(',');
    if (s->normalize)
        gimg_json_number(stdout, v);
    else
        printf("%.0f", v);
}

static void print_csv(const settings *s, const char *name, int with_file, const gimg_hist *h,
                      const selection *sel, const double *v, int header)
{
    const int rows = h->bins + 3;
    if (header) {
        printf("%sbin,lo,hi", with_file ? "file," : "");
        for (int k = 0; k < sel->n; k++)
            printf(",%s", sel->name[k]);
        printf("\n");
    }
    static const char *const k_outside[] = {"below", "above", "nan"};
    for (int b = 0; b < rows; b++) {
        if (with_file) {
            gimg_csv_field(stdout, name);
            putchar(',');
        }
        if (b < h->bins) {
            printf("%d,", b);
            gimg_json_number(stdout, edge(h, b));
            putchar(',');
            gimg_json_number(stdout, edge(h, b + 1));
        } else {
            printf("%s,,", k_outside[b - h->bins]);
        }
        for (int k = 0; k < sel->n; k++)
            print_csv_number(s, v[k * rows + b]);
        printf("\n");
    }
}

static void print_json_values(const settings *s, const double *v, int n)
{
    putchar('[');
    for (int i = 0; i < n; i++) {
        if (i)
            putchar(',');
        if (s->normalize)
            gimg_json_number(stdout, v[i]);
        else
            printf("%.0f", v[i]);
    }
    putchar(']');
}

static void print_json(const settings *s, const char *name, const gimg_hist *h,
                       const selection *sel, const double *v)
{
    const int rows = h->bins + 3;
    printf("{\"file\":");
    gimg_json_string(stdout, name);
    printf(",\"bins\":%d,\"range\":[", h->bins);
    gimg_json_number(stdout, h->lo);
    putchar(',');
    gimg_json_number(stdout, h->hi);
    printf("],\"cumulative\":%s,\"normalized\":%s,\"counts\":{", s->cumulative ? "true" : "false",
           s->normalize ? "true" : "false");
    for (int k = 0; k < sel->n; k++) {
        printf("%s\"%s\":", k ? "," : "", sel->name[k]);
        print_json_values(s, v + k * rows, h->bins);
    }
    static const char *const k_outside[] = {"below", "above", "nan"};
    for (int o = 0; o < 3; o++) {
        printf("},\"%s\":{", k_outside[o]);
        for (int k = 0; k < sel->n; k++) {
            printf("%s\"%s\":", k ? "," : "", sel->name[k]);
            if (s->normalize)
                gimg_json_number(stdout, v[k * rows + h->bins + o]);
            else
                printf("%.0f", v[k * rows + h->bins + o]);
        }
    }
    printf("}}\n");
}

/* ----------------------------------------------------------------- work */


typedef struct {
    const settings *s;
    const gimg_cli_common *c;
    gimg_ctx *ctx;
    int n_inputs;
    char **plots, **equalized;  /* per input, or NULL */
    int csv_header_done;
    selection csv_columns;      /* the channels the CSV header names */
} job;

/* The channel names of sel, comma-separated, in buf. */
static const char *join_names(const selection *sel, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int k = 0; k < sel->n && len < size; k++)
        len += (size_t)snprintf(buf + len, size - len, "%s%s", k ? "," : "", sel->name[k]);
    return buf;
}

/* Whether sel names the same channels, in the same order, as the CSV
 * header already printed. */
static int same_columns(const selection *a, const selection *b)
{
    if (a->n != b->n)
        return 0;
    for (int k = 0; k < a->n; k++)
        if (strcmp(a->name[k], b->name[k]))
            return 0;
    return 1;
}

/* One input: count, print, plot, or equalize. Prints its own error;
 * returns 1 on failure. */
static int one_input(job *j, int i)
{
    const settings *s = j->s;
    const char *path = j->c->operands[i];
    const char *name = gimg_cli_name(path, 0);
    gimg_image im = {0}, eq = {0}, plot = {0};
    gimg_hist h = {0};
    selection sel;
    double *v = NULL;
    const char *failed_on = name;
    gimg_status st = gimg_ctx_read(j->ctx, path, &im);
    if (!st && s->equalize) {
        double t0 = gimg_now_ms();
        st = gimg_hist_equalize(j->ctx, &im, s->luma, &eq);
        gimg_ctx_add_time(j->ctx, GIMG_T_COMPUTE, gimg_now_ms() - t0);
        if (!st) {
            t0 = gimg_now_ms();
            st = gimg_write(j->equalized[i], &eq, &j->c->write);
            gimg_ctx_add_time(j->ctx, GIMG_T_ENCODE, gimg_now_ms() - t0);
            if (st)
                failed_on = gimg_cli_name(j->equalized[i], 1);
        }
        if (st || !s->plot)
            goto done;
    }
    if (!st) {
        gimg_hist_params p;
        gimg_hist_default_params(&im, &p);
        if (!s->equalize) {
            p.bins = s->p.bins;
            if (s->have_range) {
                p.lo = s->p.lo;
                p.hi = s->p.hi;
            }
        }
        p.luma = s->luma || (s->channel_mask & CH_LUMA_BIT);
        double t0 = gimg_now_ms();
        st = gimg_hist_compute(j->ctx, &im, &p, &h);
        gimg_ctx_add_time(j->ctx, GIMG_T_COMPUTE, gimg_now_ms() - t0);
    }
    if (!st)
        st = select_channels(s, im.channels, &h, &sel);
    /* One CSV, one header: an input whose channels are not the header's
     * would give rows of other columns. */
    if (!st && s->csv && !s->equalize && j->csv_header_done &&
        !same_columns(&sel, &j->csv_columns)) {
        char mine[64], header[64];
        st = gimg_fail(GIMG_E_FORMAT, "its channels (%s) are not the CSV header's (%s): "
                                      "select common ones with -c (luma: any image), or use "
                                      "--json",
                       join_names(&sel, mine, sizeof mine),
                       join_names(&j->csv_columns, header, sizeof header));
    }
    const double pixels = (double)im.width * im.height;
    if (!st && !s->equalize) {
        if (!(v = values(s, &h, &sel, pixels)))
            st = gimg_fail(GIMG_E_NOMEM, "out of memory");
        else if (s->json)
            print_json(s, name, &h, &sel, v);
        else if (s->csv) {
            print_csv(s, name, j->n_inputs > 1, &h, &sel, v, !j->csv_header_done);
            if (!j->csv_header_done)
                j->csv_columns = sel;
            j->csv_header_done = 1;
        } else {
            if (i > 0)
                printf("\n");
            print_table(s, name, &im, &h, &sel, v);
        }
    }
    if (!st && s->plot) {
        gimg_hist_plot_opts o = {.title = name, .cumulative = s->cumulative,
                                 .normalize = s->normalize, .pixels = (uint64_t)pixels};
        double t0 = gimg_now_ms();
        st = gimg_hist_plot(&h, sel.mask, sel.all_names, &o, &plot);
        if (!st) {
            gimg_write_opts wo = j->c->write;
            wo.format = GIMG_FMT_UNKNOWN;  /* the plot's format is its extension's */
            if (gimg_format_from_path(j->plots[i]) == GIMG_FMT_UNKNOWN)
                wo.format = GIMG_FMT_PNG;
            st = gimg_write(j->plots[i], &plot, &wo);
            if (st)
                failed_on = gimg_cli_name(j->plots[i], 1);
        }
        gimg_ctx_add_time(j->ctx, GIMG_T_ENCODE, gimg_now_ms() - t0);
    }
done:
    free(v);
    gimg_hist_free(&h);
    gimg_image_free(&im);
    gimg_image_free(&eq);
    gimg_image_free(&plot);
    if (st) {
        fflush(stdout);
        gimg_cli_error(TOOL, failed_on, st);
        return 1;
    }
    return 0;
}

/* The output names, one per input: the name itself for one input, else a
 * pattern or folder (gimg_output_path); no two may collide. */
static gimg_status output_names(job *j, const char *spec, const char *what, char ***out)
{
    char **names = calloc((size_t)j->n_inputs, sizeof *names);
    if (!names)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    *out = names;
    if (j->n_inputs > 1 && !strchr(spec, '%') && spec[strlen(spec) - 1] != '/')
        return gimg_fail(GIMG_E_USAGE, "%s: several inputs need a pattern (%%f) or a folder "
                                       "(DIR/) for their outputs", what);
    for (int i = 0; i < j->n_inputs; i++) {
        gimg_status st = j->n_inputs == 1 ? ((names[i] = strdup(spec)) ? GIMG_OK
                                             : gimg_fail(GIMG_E_NOMEM, "out of memory"))
                                          : gimg_output_path(spec, j->c->operands[i], i + 1,
                                                             NULL, &names[i]);
        if (st)
            return st;
    }
    return j->n_inputs > 1 ? gimg_check_output_collisions(j->c->operands, names, j->n_inputs)
                           : GIMG_OK;
}

static void free_names(char **names, int n)
{
    if (!names)
        return;
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

int main(int argc, char **argv)
{
    settings s = {.p = {.bins = 256}};
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
        .epilogue =
            "Prints a table of bin, lower edge and a count per channel; samples outside\n"
            "the range are counted apart (below, above, nan). INPUT may be '-' for standard\n"
            "input. With several inputs, --plot and --equalize take a pattern (%f: the\n"
            "input's name without its extension) or a folder (DIR/).",
    };
    gimg_cli_common c;
    gimg_status st = gimg_cli_parse(&spec, argc, argv, &c);
    if (!st && c.action == GIMG_CLI_RUN)
        st = finish_settings(&s);
    int rc = gimg_cli_done(&spec, &c, st);
    if (rc >= 0)
        return rc;

    job j = {.s = &s, .c = &c, .n_inputs = c.n_operands};
    if ((s.plot && (st = output_names(&j, s.plot, "--plot", &j.plots))) ||
        (s.equalize && (st = output_names(&j, s.equalize, "--equalize", &j.equalized)))) {
        free_names(j.plots, j.n_inputs);
        free_names(j.equalized, j.n_inputs);
        return gimg_cli_error(TOOL, NULL, st);
    }
    if (s.equalize && j.n_inputs == 1 && !strcmp(s.equalize, "-") && isatty(STDOUT_FILENO)) {
        free_names(j.equalized, j.n_inputs);
        return gimg_cli_error(TOOL, NULL,
                              gimg_fail(GIMG_E_USAGE, "refusing to write image data to a "
                                                      "terminal (give OUTPUT or redirect)"));
    }
    gimg_install_signal_cleanup();
    if ((st = gimg_ctx_open(&c.device, c.verbose, &j.ctx))) {
        free_names(j.plots, j.n_inputs);
        free_names(j.equalized, j.n_inputs);
        return gimg_cli_error(TOOL, NULL, st);
    }
    int failed = 0;
    for (int i = 0; i < j.n_inputs; i++)
        failed |= one_input(&j, i);
    if (c.verbose)
        gimg_ctx_report(j.ctx, stderr, TOOL);
    gimg_ctx_close(j.ctx);
    free_names(j.plots, j.n_inputs);
    free_names(j.equalized, j.n_inputs);
    rc = gimg_cli_close_stdout(TOOL);
    return failed ? 1 : rc;
}
