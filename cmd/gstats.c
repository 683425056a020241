/*
 * gstats — per-channel statistics of images, and the comparison of images
 * with a reference, as a table, bare numbers, JSON or CSV.
 *
 *   gstats [options] INPUT...                    see gstats(1)
 *   gstats --compare REFERENCE [options] INPUT...
 *
 * Exit status: 0 success, 1 when any input failed (the others are still
 * reported), 2 usage error. In compare mode, as cmp(1) and ImageMagick's
 * compare: 0 every input within the thresholds (--fail-if, --exact; with
 * none, whether or not the images differ), 1 some input beyond them, 2
 * trouble (an input or the reference unreadable, layouts that cannot be
 * compared, a usage error).
 */
#include "driver.h"
#include "gimg_stats.h"
#include "report.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define TOOL "gstats"

enum { OPT_CHANNEL, OPT_STAT, OPT_PERCENTILES, OPT_REGION, OPT_UNIT_SCALE, OPT_JSON, OPT_CSV,
       OPT_COMPARE, OPT_FAIL_IF, OPT_EXACT, OPT_PROMOTE, OPT_DIFF_IMAGE };

static const gimg_cli_option k_options[] = {
    {"channel", 'c', "LIST", "report only these channels: gray, red, green, blue, alpha, all",
     OPT_CHANNEL},
    {"stat", 's', "LIST", "report only these statistics (see below), in this order", OPT_STAT},
    {"percentiles", 0, "LIST", "also report these percentiles (nearest rank), e.g. 1,5,95,99",
     OPT_PERCENTILES},
    {"region", 0, "WxH+X+Y", "measure only this rectangle (ImageMagick geometry; clipped to "
                             "the image)", OPT_REGION},
    {"unit-scale", 0, NULL, "report values on a 0 to 1 scale (divided by the maxval: 255, "
                            "65535 or the file's own) instead of sample units", OPT_UNIT_SCALE},
    {"json", 0, NULL, "print one JSON object per input file, one per line", OPT_JSON},
    {"csv", 0, NULL, "print CSV: a header, then one row per file and channel", OPT_CSV},
    {"compare", 0, "REFERENCE", "compare each INPUT with REFERENCE instead", OPT_COMPARE},
    {"fail-if", 0, "EXPR", "with --compare: exit 1 when [CHANNEL.]METRIC OP NUMBER holds for "
                           "an input, e.g. 'psnr<40' (repeatable)", OPT_FAIL_IF},
    {"exact", 0, NULL, "with --compare: exit 1 when any sample differs", OPT_EXACT},
    {"promote", 0, NULL, "with --compare: compare gray against RGB as RGB", OPT_PROMOTE},
    {"diff-image", 0, "FILE", "with --compare: write |REFERENCE - INPUT| per sample to FILE",
     OPT_DIFF_IMAGE},
    {NULL, 0, NULL, NULL, 0},
};

/* Old names: unknown options whose message names the new one. */
static const char *const k_renamed[] = {"normalized", "unit-scale", NULL};

/* ------------------------------------------------------------- columns */

/* The statistics a report can show; percentiles are columns of their own. */
enum { ST_COUNT, ST_NAN, ST_INF, ST_MIN, ST_MAX, ST_SUM, ST_MEAN, ST_STDDEV, ST_MEDIAN,
       ST_ENTROPY, ST_N };
static const char *const k_stat_names[] = {"count", "nan", "inf", "min", "max", "sum", "mean",
                                           "stddev", "median", "entropy", NULL};
/* With --compare: gimg_metric_names (gimg_stats.h). */
static const char *const k_channel_names[] = {"gray", "red", "green", "blue", "alpha", "all",
                                              NULL};
enum { CH_ALL_BIT = 1u << 5 };

#define MAX_COLUMNS (ST_N + GIMG_STATS_MAX_PERCENTILES)

/* --fail-if, and --exact (differing > 0). */
#define MAX_CONDITIONS 32
typedef struct {
    gimg_threshold t;
    char text[80];   /* as given, for messages */
} condition;

typedef struct {
    int stat;        /* ST_* or CMP_*; -1 for a percentile */
    int percentile;  /* index into opts.percentiles */
} column;

typedef struct {
    const char *channel_list, *stat_list, *percentile_list;
    int have_region;
    gimg_region region;
    int unit_scale, json, csv;
    const char *reference;
    condition conditions[MAX_CONDITIONS];
    int n_conditions;
    int exact, promote;
    const char *diff_image;
    /* Derived once the options are all known. */
    unsigned channel_mask;  /* 0: every channel and all */
    int n_channel_names;
    column cols[MAX_COLUMNS];
    int n_cols;
    int stats_given;        /* -s was given: exactly its columns */
    int bare;
    int need_ssim;          /* a column or a condition needs SSIM */
    gimg_stats_opts opts;
} settings;

static gimg_status handle_option(void *user, int key, const char *arg)
{
    settings *s = user;
    switch (key) {
    case OPT_CHANNEL: s->channel_list = arg; break;
    case OPT_STAT: s->stat_list = arg; break;
    case OPT_PERCENTILES: s->percentile_list = arg; break;
    case OPT_REGION:
        s->have_region = 1;
        return gimg_parse_region(arg, &s->region);
    case OPT_UNIT_SCALE: s->unit_scale = 1; break;
    case OPT_JSON: s->json = 1; break;
    case OPT_CSV: s->csv = 1; break;
    case OPT_COMPARE: s->reference = arg; break;
    case OPT_FAIL_IF:
        if (s->n_conditions == MAX_CONDITIONS)
            return gimg_fail(GIMG_E_USAGE, "--fail-if: more than %d conditions", MAX_CONDITIONS);
        snprintf(s->conditions[s->n_conditions].text, sizeof s->conditions[0].text, "%s", arg);
        return gimg_parse_threshold(arg, &s->conditions[s->n_conditions++].t);
    case OPT_EXACT: s->exact = 1; break;
    case OPT_PROMOTE: s->promote = 1; break;
    case OPT_DIFF_IMAGE:
        if (!*arg)
            return gimg_fail(GIMG_E_USAGE, "--diff-image: empty file name");
        s->diff_image = arg;
        break;
    }
    return GIMG_OK;
}

/* Adds percentile p to the options (once) and returns its index. */
static int add_percentile(settings *s, const gimg_percentile *p)
{
    for (int i = 0; i < s->opts.n_percentiles; i++)
        if (s->opts.percentiles[i].millionths == p->millionths)
            return i;
    if (s->opts.n_percentiles == GIMG_STATS_MAX_PERCENTILES)
        return -1;
    s->opts.percentiles[s->opts.n_percentiles] = *p;
    return s->opts.n_percentiles++;
}

static void add_column(settings *s, int stat, int percentile)
{
    for (int i = 0; i < s->n_cols; i++)
        if (s->cols[i].stat == stat && (stat >= 0 || s->cols[i].percentile == percentile))
            return;
    s->cols[s->n_cols++] = (column){stat, percentile};
}

/* Calls fn on each comma-separated item of list (copied into item). */
static gimg_status each_item(const char *list, char *item, size_t size,
                             gimg_status (*fn)(settings *, const char *), settings *s)
{
    for (const char *p = list;;) {
        size_t n = strcspn(p, ",");
        if (n >= size)
            return gimg_fail(GIMG_E_USAGE, "'%.*s...' is too long", 20, p);
        memcpy(item, p, n);
        item[n] = '\0';
        gimg_status st = fn(s, item);
        if (st)
            return st;
        if (!p[n])
            return GIMG_OK;
        p += n + 1;
    }
}

static gimg_status percentile_item(settings *s, const char *item)
{
    gimg_percentile p;
    gimg_status st = gimg_parse_percentile("--percentiles", item, &p);
    if (st)
        return st;
    int i = add_percentile(s, &p);
    if (i < 0)
        return gimg_fail(GIMG_E_USAGE, "--percentiles: more than %d percentiles",
                         GIMG_STATS_MAX_PERCENTILES);
    add_column(s, -1, i);
    return GIMG_OK;
}

/* One item of -s: a statistic's name, or (statistics only) pN. */
static gimg_status stat_item(settings *s, const char *item)
{
    if (!s->reference && item[0] == 'p' && item[1] >= '0' && item[1] <= '9') {
        gimg_percentile p;
        if (gimg_parse_percentile("--stat", item + 1, &p))
            return GIMG_E_USAGE;
        int i = add_percentile(s, &p);
        if (i < 0)
            return gimg_fail(GIMG_E_USAGE, "--stat: more than %d percentiles",
                             GIMG_STATS_MAX_PERCENTILES);
        add_column(s, -1, i);
        return GIMG_OK;
    }
    unsigned mask;
    gimg_status st = gimg_parse_name_list("--stat", item,
                                          s->reference ? gimg_metric_names : k_stat_names, &mask);
    if (st)
        return s->reference ? st
                            : gimg_fail(GIMG_E_USAGE, "%s, or pN for a percentile",
                                        gimg_last_error());
    add_column(s, __builtin_ctz(mask), 0);
    return GIMG_OK;
}

/* Checks the options together and works out the columns. */
static gimg_status finish_settings(settings *s)
{
    char item[64];
    gimg_status st;
    if (s->json && s->csv)
        return gimg_fail(GIMG_E_USAGE, "--json and --csv exclude each other");
    if (s->reference && s->percentile_list)
        return gimg_fail(GIMG_E_USAGE, "--percentiles does not apply to --compare");
    if (!s->reference && (s->n_conditions || s->exact || s->promote || s->diff_image))
        return gimg_fail(GIMG_E_USAGE, "%s needs --compare REFERENCE",
                         s->n_conditions ? "--fail-if" : s->exact ? "--exact"
                         : s->promote ? "--promote" : "--diff-image");
    if (s->exact) {
        if (s->n_conditions == MAX_CONDITIONS)
            return gimg_fail(GIMG_E_USAGE, "--fail-if: more than %d conditions", MAX_CONDITIONS);
        condition *c = &s->conditions[s->n_conditions++];
        *c = (condition){.t = {.channel = "all", .metric = GIMG_METRIC_DIFFERING,
                               .op = GIMG_OP_GT, .value = 0}};
        snprintf(c->text, sizeof c->text, "--exact");
    }
    if (s->channel_list) {
        if ((st = gimg_parse_name_list("--channel", s->channel_list, k_channel_names,
                                       &s->channel_mask)))
            return st;
        s->n_channel_names = __builtin_popcount(s->channel_mask);
    }
    if (s->stat_list) {
        s->stats_given = 1;
        if ((st = each_item(s->stat_list, item, sizeof item, stat_item, s)))
            return st;
    } else if (s->reference) {
        for (int c = 0; c < GIMG_METRIC_N; c++)
            add_column(s, c, 0);
    } else {
        for (int c = 0; c < ST_N; c++)
            add_column(s, c, 0); /* nan and inf are dropped for integer images in tables */
    }
    /* Percentiles asked for are reported, with or without -s. */
    if (s->percentile_list && (st = each_item(s->percentile_list, item, sizeof item,
                                              percentile_item, s)))
        return st;
    for (int i = 0; i < s->n_cols; i++)
        if (!s->reference && (s->cols[i].stat < 0 || s->cols[i].stat == ST_MEDIAN ||
                              s->cols[i].stat == ST_ENTROPY))
            s->opts.order = 1;
    for (int i = 0; i < s->n_cols; i++)
        s->need_ssim |= s->reference && s->cols[i].stat == GIMG_METRIC_SSIM;
    for (int i = 0; i < s->n_conditions; i++)
        s->need_ssim |= s->conditions[i].t.metric == GIMG_METRIC_SSIM;
    /* With one input only (gimg_driver_item.single). A comparison's one
     * metric without -c is the "all" row's. */
    s->bare = !s->json && !s->csv && s->n_cols == 1 &&
              (s->n_channel_names == 1 || (s->reference && !s->channel_list));
    return GIMG_OK;
}

/* ------------------------------------------------------------- values */

/* One cell: a value and whether it is an integer count. */
typedef struct {
    double v;
    int is_count;
} cell;

static cell stat_cell(const settings *s, const gimg_channel_stats *c, double peak,
                      const column *col)
{
    const double k = s->unit_scale ? 1 / peak : 1;
    if (col->stat < 0)
        return (cell){c->percentile[col->percentile] * k, 0};
    switch (col->stat) {
    case ST_COUNT: return (cell){(double)c->count, 1};
    case ST_NAN: return (cell){(double)c->nan, 1};
    case ST_INF: return (cell){(double)c->inf, 1};
    case ST_MIN: return (cell){c->min * k, 0};
    case ST_MAX: return (cell){c->max * k, 0};
    case ST_SUM: return (cell){c->sum * k, 0};
    case ST_MEAN: return (cell){c->mean * k, 0};
    case ST_STDDEV: return (cell){c->stddev * k, 0};
    case ST_MEDIAN: return (cell){c->median * k, 0};
    default: return (cell){c->entropy, 0};
    }
}

static cell diff_cell(const settings *s, const gimg_channel_diff *d, double peak,
                      const column *col)
{
    const double k = s->unit_scale ? 1 / peak : 1;
    switch (col->stat) {
    case GIMG_METRIC_COUNT: return (cell){(double)d->count, 1};
    case GIMG_METRIC_DIFFERING: return (cell){(double)d->differing, 1};
    case GIMG_METRIC_MAXDIFF: return (cell){d->max_abs * k, 0};
    case GIMG_METRIC_MAE: return (cell){d->mae * k, 0};
    case GIMG_METRIC_MSE: return (cell){d->mse * k * k, 0};
    case GIMG_METRIC_PIXELS_DIFFERING: return (cell){(double)d->pixels_differing, 1};
    case GIMG_METRIC_RMSE: return (cell){d->rmse * k, 0};
    case GIMG_METRIC_SSIM: return (cell){d->ssim, 0};
    default: return (cell){d->psnr, 0};
    }
}

/* Text of a value: integers in full; other values with every digit needed
 * to read them back (the table: 8 significant digits); nan, inf. */
static void format_cell(char *buf, size_t size, cell c, int table)
{
    if (isnan(c.v))
        snprintf(buf, size, "nan");
    else if (isinf(c.v))
        snprintf(buf, size, c.v > 0 ? "inf" : "-inf");
    else if (c.is_count || (c.v == floor(c.v) && fabs(c.v) < 9007199254740992.0))
        snprintf(buf, size, "%.0f", c.v + 0.0);
    else if (table)
        snprintf(buf, size, "%.8g", c.v);
    else {
        /* gimg_json_number's digits: the fewest that read back as v. */
        FILE *f = fmemopen(buf, size, "w");
        if (f) {
            gimg_json_number(f, c.v);
            fclose(f);
        } else {
            snprintf(buf, size, "%.17g", c.v);
        }
    }
}

static void column_name(const settings *s, const column *col, char *buf, size_t size)
{
    if (col->stat < 0)
        snprintf(buf, size, "p%s", s->opts.percentiles[col->percentile].name);
    else
        snprintf(buf, size, "%s", (s->reference ? gimg_metric_names : k_stat_names)[col->stat]);
}

/* ------------------------------------------------------------ reports */

/* What one input's report needs, whichever mode. */
typedef struct {
    const char *name;       /* as printed */
    const gimg_image *im;   /* the whole image */
    gimg_region region;     /* the clipped region measured */
    const gimg_stats *stats; /* or: */
    const gimg_diff *diff;
    int channels;
    gimg_sample sample;
    unsigned maxval;        /* the image's (gimg_image.maxval; 0: the full range) */
} report;

/* Report rows: the image's channels (those selected), then "all". Returns
 * their count; rows[i] is a channel index, channels meaning all. */
static int report_rows(const settings *s, const report *r, int *rows)
{
    int n = 0;
    for (int c = 0; c <= r->channels; c++) {
        const char *name = c < r->channels ? gimg_channel_name(r->channels, c) : "all";
        int bit = 0;
        while (strcmp(k_channel_names[bit], name))
            bit++;
        if (!s->channel_mask || (s->channel_mask & (1u << bit)))
            rows[n++] = c;
    }
    return n;
}

static const char *row_name(const report *r, int c)
{
    return c < r->channels ? gimg_channel_name(r->channels, c) : "all";
}

/* Whether column col is shown for this report: tables and JSON leave out
 * nan and inf for integer images unless -s asked for them. */
static int column_shown(const settings *s, const report *r, const column *col)
{
    if (s->reference || s->stats_given || s->csv || r->sample == GIMG_F32)
        return 1;
    return col->stat != ST_NAN && col->stat != ST_INF;
}

static cell report_cell(const settings *s, const report *r, int c, const column *col)
{
    return r->diff ? diff_cell(s, &r->diff->ch[c], r->diff->peak, col)
                   : stat_cell(s, &r->stats->ch[c], gimg_image_max(r->im), col);
}

static void describe(const report *r, char *buf, size_t size)
{
    static const char *const k_layout[] = {"", "gray", "gray+alpha", "RGB", "RGBA"};
    int len = snprintf(buf, size, "%dx%d %s %d-bit%s", r->im->width, r->im->height,
                       k_layout[r->im->channels], 8 * (int)r->sample,
                       r->sample == GIMG_F32 ? " float" : "");
    if (r->maxval)
        len += snprintf(buf + len, size - (size_t)len, ", maxval %u", r->maxval);
    if (r->diff && r->diff->adjusted) {
        static const char *const k_how[] = {"reference's samples scaled up",
                                            "input's samples scaled up",
                                            "opaque alpha left out", "opaque alpha added",
                                            "gray promoted to RGB"};
        len += snprintf(buf + len, size - (size_t)len, "; compared as %s",
                        k_layout[r->channels]);
        for (int b = 0; b < 5; b++)
            if (r->diff->adjusted & (1u << b))
                len += snprintf(buf + len, size - (size_t)len, ", %s", k_how[b]);
    }
    if (r->region.width != r->im->width || r->region.height != r->im->height)
        snprintf(buf + len, size - (size_t)len, ", region %dx%d+%d+%d", r->region.width,
                 r->region.height, r->region.x, r->region.y);
}

enum { CELL = 40 };

static void print_table(FILE *f, const settings *s, const report *r, const char *reference)
{
    int rows[GIMG_STATS_MAX_CHANNELS], n_rows = report_rows(s, r, rows);
    char head[256];
    describe(r, head, sizeof head);
    if (reference)
        fprintf(f, "%s vs %s: %s\n", reference, r->name, head);
    else
        fprintf(f, "%s: %s\n", r->name, head);
    /* Cells first, for the widths. */
    char text[GIMG_STATS_MAX_CHANNELS + 1][MAX_COLUMNS + 1][CELL]; /* 10 kB */
    int width[MAX_COLUMNS + 1] = {0}, shown[MAX_COLUMNS], n_shown = 0;
    for (int i = 0; i < s->n_cols; i++)
        if (column_shown(s, r, &s->cols[i]))
            shown[n_shown++] = i;
    snprintf(text[0][0], CELL, "channel");
    for (int j = 0; j < n_shown; j++)
        column_name(s, &s->cols[shown[j]], text[0][j + 1], CELL);
    for (int i = 0; i < n_rows; i++) {
        snprintf(text[i + 1][0], CELL, "%s", row_name(r, rows[i]));
        for (int j = 0; j < n_shown; j++)
            format_cell(text[i + 1][j + 1], CELL, report_cell(s, r, rows[i], &s->cols[shown[j]]),
                        1);
    }
    for (int i = 0; i <= n_rows; i++)
        for (int j = 0; j <= n_shown; j++) {
            int w = (int)strlen(text[i][j]);
            if (w > width[j])
                width[j] = w;
        }
    for (int i = 0; i <= n_rows; i++) {
        fprintf(f, "%-*s", width[0], text[i][0]);
        for (int j = 1; j <= n_shown; j++)
            fprintf(f, "  %*s", width[j], text[i][j]);
        fputc('\n', f);
    }
}

static void json_cell(FILE *f, cell c, int is_psnr)
{
    if (is_psnr && isinf(c.v) && c.v > 0)
        fputs("\"inf\"", f); /* JSON has no infinity; see gstats(1) */
    else if (c.is_count)
        fprintf(f, "%.0f", c.v);
    else
        gimg_json_number(f, c.v);
}

static void print_json(FILE *f, const settings *s, const report *r, const char *reference)
{
    int rows[GIMG_STATS_MAX_CHANNELS], n_rows = report_rows(s, r, rows);
    fputc('{', f);
    if (reference) {
        fputs("\"reference\": ", f);
        gimg_json_string(f, reference);
        fputs(", ", f);
    }
    fputs("\"file\": ", f);
    gimg_json_string(f, r->name);
    fprintf(f, ", \"width\": %d, \"height\": %d, \"channels\": %d, \"depth\": %d", r->im->width,
           r->im->height, r->im->channels, 8 * (int)r->sample);
    if (r->maxval)
        fprintf(f, ", \"maxval\": %u", r->maxval);
    if (s->have_region)
        fprintf(f, ", \"region\": {\"width\": %d, \"height\": %d, \"x\": %d, \"y\": %d}",
               r->region.width, r->region.height, r->region.x, r->region.y);
    if (s->unit_scale)
        fputs(", \"unit_scale\": true", f);
    fputs(", \"stats\": {", f);
    for (int i = 0; i < n_rows; i++) {
        fprintf(f, "%s\"%s\": {", i ? ", " : "", row_name(r, rows[i]));
        int n = 0, n_pct = 0;
        for (int j = 0; j < s->n_cols; j++) {
            const column *col = &s->cols[j];
            if (col->stat < 0) {
                n_pct++;
                continue;
            }
            if (!column_shown(s, r, col))
                continue;
            fprintf(f, "%s\"%s\": ", n++ ? ", " : "", (s->reference ? gimg_metric_names : k_stat_names)[col->stat]);
            json_cell(f, report_cell(s, r, rows[i], col), s->reference && col->stat == GIMG_METRIC_PSNR);
        }
        if (n_pct) {
            fprintf(f, "%s\"percentiles\": {", n ? ", " : "");
            int k = 0;
            for (int j = 0; j < s->n_cols; j++) {
                const column *col = &s->cols[j];
                if (col->stat >= 0)
                    continue;
                fprintf(f, "%s\"%s\": ", k++ ? ", " : "", s->opts.percentiles[col->percentile].name);
                json_cell(f, report_cell(s, r, rows[i], col), 0);
            }
            fputc('}', f);
        }
        fputc('}', f);
    }
    fputs("}}\n", f);
}

static void print_csv_header(FILE *f, const settings *s)
{
    fputs(s->reference ? "reference,file,channel" : "file,channel", f);
    char name[CELL];
    for (int j = 0; j < s->n_cols; j++) {
        column_name(s, &s->cols[j], name, sizeof name);
        fputc(',', f);
        gimg_csv_field(f, name);
    }
    fputc('\n', f);
}

static void print_csv(FILE *f, const settings *s, const report *r, const char *reference)
{
    int rows[GIMG_STATS_MAX_CHANNELS], n_rows = report_rows(s, r, rows);
    char text[CELL];
    for (int i = 0; i < n_rows; i++) {
        if (reference) {
            gimg_csv_field(f, reference);
            fputc(',', f);
        }
        gimg_csv_field(f, r->name);
        fprintf(f, ",%s", row_name(r, rows[i]));
        for (int j = 0; j < s->n_cols; j++) {
            format_cell(text, sizeof text, report_cell(s, r, rows[i], &s->cols[j]), 0);
            fprintf(f, ",%s", text);
        }
        fputc('\n', f);
    }
}

static void print_bare(FILE *f, const settings *s, const report *r)
{
    int rows[GIMG_STATS_MAX_CHANNELS];
    const int n = report_rows(s, r, rows); /* one, or (compare, no -c) every row: "all" */
    char text[CELL];
    format_cell(text, sizeof text, report_cell(s, r, rows[n - 1], &s->cols[0]), 0);
    fputs(text, f);
    fputc('\n', f);
}

/* --------------------------------------------------------------- work */


/* The rectangle measured: --region clipped, or the whole image. */
static gimg_status measured(const settings *s, const gimg_image *im, gimg_region *r,
                            gimg_image *view)
{
    gimg_region whole = {im->width, im->height, 0, 0};
    *r = whole;
    if (s->have_region) {
        gimg_status st = gimg_region_clip(&s->region, im->width, im->height, r);
        if (st)
            return st;
    }
    gimg_image_view(im, r, view);
    return GIMG_OK;
}

/* Every selected channel must exist in the image. */
static gimg_status check_channels(const settings *s, int channels)
{
    for (int bit = 0; k_channel_names[bit]; bit++) {
        if (!(s->channel_mask & (1u << bit)) || (1u << bit) == CH_ALL_BIT)
            continue;
        int found = 0;
        for (int c = 0; c < channels; c++)
            found |= !strcmp(gimg_channel_name(channels, c), k_channel_names[bit]);
        if (!found)
            return gimg_fail(GIMG_E_FORMAT, "no %s channel in a %s image", k_channel_names[bit],
                             channels == 1 ? "gray" : channels == 2 ? "gray+alpha"
                             : channels == 3 ? "RGB" : "RGBA");
    }
    return GIMG_OK;
}

/* What the callbacks share: the reference, read once by prepare before any
 * input, and whether a table was printed (emit, in order). */
typedef struct {
    const settings *s;
    gimg_image ref;
    int have_ref;
    int tables;
    atomic_int beyond;  /* inputs beyond a --fail-if (reports run in parallel) */
} job;

static gimg_status prepare(void *user, gimg_ctx *ctx, char *const *inputs, int n_inputs,
                           int stream)
{
    job *j = user;
    if (j->s->reference) {
        gimg_status st = gimg_read(j->s->reference, &j->ref);
        if (st)
            return gimg_fail(st, "%s: %s", gimg_cli_name(j->s->reference, 0), gimg_last_error());
        j->have_ref = 1;
    }
    /* One header, whatever the inputs; none when the difference image has
     * standard output (the reports are set aside then, gimg_driver_output). */
    if (j->s->csv && !(j->s->diff_image && !strcmp(j->s->diff_image, "-")))
        print_csv_header(stdout, j->s);
    return GIMG_OK;
}

/* The index of channel `name` in a `channels`-channel layout, channels for
 * "all", -1 when it has none. */
static int channel_index(const char *name, int channels)
{
    if (!strcmp(name, "all"))
        return channels;
    for (int c = 0; c < channels; c++)
        if (!strcmp(gimg_channel_name(channels, c), name))
            return c;
    return -1;
}

/* The --fail-if conditions (and --exact) that hold for d: 0 when none; else
 * their count, and *note (malloc'd) says which with their values. A metric
 * that is NaN (SSIM of an image under 11x11, float images without a finite
 * pair) cannot be within a threshold: it counts as holding. */
static gimg_status check_conditions(const settings *s, const report *r, int *n_held,
                                    char **note)
{
    *n_held = 0;
    *note = NULL;
    size_t len = 0;
    FILE *f = NULL;
    for (int i = 0; i < s->n_conditions; i++) {
        const condition *c = &s->conditions[i];
        const int ch = channel_index(c->t.channel, r->channels);
        if (ch < 0) {
            if (f)
                fclose(f);
            free(*note);
            *note = NULL;
            return gimg_fail(GIMG_E_FORMAT, "--fail-if '%s': no %s channel in a %d-channel "
                                            "comparison", c->text, c->t.channel,
                             r->channels);
        }
        const column col = {(int)c->t.metric, 0};
        const cell v = report_cell(s, r, ch, &col);
        if (!gimg_threshold_broken(&c->t, v.v))
            continue;
        if (!f && !(f = open_memstream(note, &len)))
            return gimg_fail(GIMG_E_NOMEM, "out of memory");
        char text[CELL];
        format_cell(text, sizeof text, v, 1);
        fprintf(f, "%s%s %s %s%s%s", (*n_held)++ ? "; " : "beyond the threshold: ",
                c->t.channel, gimg_metric_names[c->t.metric], text, isnan(v.v) ? "" : " ",
                isnan(v.v) ? "" : gimg_op_names[c->t.op]);
        if (!isnan(v.v)) {
            format_cell(text, sizeof text, (cell){c->t.value, 0}, 1);
            fprintf(f, " %s", text);
        }
        if (strcmp(c->text, "--exact"))
            fprintf(f, " (--fail-if '%s')", c->text);
        else
            fputs(" (--exact)", f);
    }
    if (f && fclose(f))
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    return GIMG_OK;
}

/* The report, in the form the options ask for. */
static void print_report(FILE *out, const settings *s, const gimg_driver_item *item,
                         const report *r, const char *ref_name)
{
    if (s->bare && item->single)
        print_bare(out, s, r);
    else if (s->json)
        print_json(out, s, r, ref_name);
    else if (s->csv)
        print_csv(out, s, r, ref_name);
    else
        print_table(out, s, r, ref_name);
}

/* One input: measure, and print the report to out. */
static gimg_status report_one(void *user, gimg_ctx *ctx, gimg_driver_item *item,
                              const gimg_image *im, FILE *out)
{
    job *j = user;
    const settings *s = j->s;
    const gimg_image *ref = j->have_ref ? &j->ref : NULL;
    gimg_image view, ref_view;
    gimg_stats stats;
    gimg_diff diff;
    report r = {.name = item->name, .im = im};
    gimg_status st = GIMG_OK;
    if (ref && (im->width != ref->width || im->height != ref->height))
        st = gimg_fail(GIMG_E_FORMAT, "size %dx%d differs from the reference %s (%dx%d)",
                       im->width, im->height, gimg_cli_name(s->reference, 0), ref->width,
                       ref->height);
    if (!st && !ref)
        st = check_channels(s, im->channels);
    if (!st)
        st = measured(s, im, &r.region, &view);
    if (!st && ref) {
        gimg_image_view(ref, &r.region, &ref_view);
        gimg_compare_opts o = {.ssim = s->need_ssim, .promote = s->promote,
                               .diff_image = item->output[0] ? &item->image[0] : NULL};
        st = gimg_compare(ctx, &ref_view, &view, &o, &diff);
        if (st) /* the layouts: name the reference */
            st = gimg_fail(st, "%s (reference: %s)", gimg_last_error(),
                           gimg_cli_name(s->reference, 0));
        r.diff = &diff;
        if (!st && (st = check_channels(s, diff.channels)))
            gimg_image_free(&item->image[0]);
    } else if (!st) {
        st = gimg_stats_compute(ctx, &view, &s->opts, &stats);
        r.stats = &stats;
    }
    if (st)
        return st;
    r.channels = ref ? diff.channels : im->channels;
    r.sample = im->sample;
    r.maxval = im->sample == GIMG_F32 ? 0 : im->maxval;
    if (ref && s->n_conditions) {
        int n_held;
        if ((st = check_conditions(s, &r, &n_held, &item->note))) {
            gimg_image_free(&item->image[0]);
            return st;
        }
        if (n_held)
            atomic_fetch_add(&j->beyond, 1);
    }
    print_report(out, s, item, &r, ref ? gimg_cli_name(s->reference, 0) : NULL);
    return GIMG_OK;
}

/* ------------------------------------------------------ large images */

/* Statistics of an image read in bands (gimg(7) LARGE IMAGES): the rows
 * of the region, as they come, to gimg_stats_add; the same figures as the
 * whole image's. Compare mode, and float order statistics, read the
 * image whole. */
typedef struct {
    gimg_stats_acc *acc;
    gimg_image header;
    gimg_region region;
} banded;

static gimg_status bands_begin(void *user, gimg_ctx *ctx, gimg_driver_item *item,
                               const gimg_image *header, void **state)
{
    const job *j = user;
    const settings *s = j->s;
    *state = NULL;
    if (j->have_ref || (s->opts.order && header->sample == GIMG_F32))
        return GIMG_OK;
    banded *b = calloc(1, sizeof *b);
    if (!b)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    gimg_region whole = {header->width, header->height, 0, 0};
    b->header = *header;
    b->header.meta = NULL;
    b->region = whole;
    gimg_status st = check_channels(s, header->channels);
    if (!st && s->have_region)
        st = gimg_region_clip(&s->region, header->width, header->height, &b->region);
    gimg_image measured_layout = b->header;
    measured_layout.width = b->region.width;
    measured_layout.height = b->region.height;
    if (!st)
        st = gimg_stats_begin(&measured_layout, &s->opts, &b->acc);
    if (st) {
        free(b);
        return st;
    }
    *state = b;
    return GIMG_OK;
}

static gimg_status bands_add(void *user, void *state, const gimg_image *band, int y0)
{
    banded *b = state;
    const gimg_region *g = &b->region;
    const int top = y0 > g->y ? y0 : g->y;
    const int end = y0 + band->height < g->y + g->height ? y0 + band->height : g->y + g->height;
    if (top >= end)
        return GIMG_OK;
    gimg_region part = {g->width, end - top, g->x, top - y0};
    gimg_image view;
    gimg_image_view(band, &part, &view);
    return gimg_stats_add(b->acc, &view);
}

static gimg_status bands_end(void *user, void *state, gimg_driver_item *item, FILE *out)
{
    const job *j = user;
    banded *b = state;
    gimg_stats stats;
    gimg_status st = gimg_stats_end(b->acc, out ? &stats : NULL);
    if (!st && out) {
        const gimg_image *im = &b->header;
        const report r = {.name = item->name, .im = im, .region = b->region, .stats = &stats,
                          .channels = im->channels, .sample = im->sample,
                          .maxval = im->sample == GIMG_F32 ? 0 : im->maxval};
        print_report(out, j->s, item, &r, NULL);
    }
    free(b);
    return st;
}

/* In input order: tables apart by a blank line. */
static gimg_status emit(void *user, gimg_driver_item *item, const char *text, size_t len,
                        FILE *out)
{
    job *j = user;
    const settings *s = j->s;
    if (!s->json && !s->csv && !(s->bare && item->single) && j->tables++)
        fputc('\n', out);
    fwrite(text, 1, len, out);
    return GIMG_OK;
}

int main(int argc, char **argv)
{
    gimg_cli_settle_threads(argv);
    settings s = {0};
    const gimg_cli_spec spec = {
        .tool = TOOL,
        .description = "Report per-channel statistics of images, or compare them with a "
                       "reference.",
        .operands = "INPUT ...",
        .min_operands = 1,
        .max_operands = -1,
        .options = k_options,
        .handle = handle_option,
        .user = &s,
        .omit = GIMG_CLI_NO_WRITE_OPTS | GIMG_CLI_NO_OUTPUT,
        .with = GIMG_CLI_WITH_BATCH | GIMG_CLI_WITH_BANDS,
        .epilogue =
            "Statistics: count, nan, inf, min, max, sum, mean, stddev, median, entropy and\n"
            "pN (the N-th percentile). With --compare: count, differing, pixels_differing,\n"
            "maxdiff, mae, mse, rmse, psnr, ssim; exit 0 within the --fail-if thresholds, 1\n"
            "beyond them, 2 on trouble. One input, one channel (-c) and one statistic (-s)\n"
            "print the bare number (with --compare, -s alone: the \"all\" row's). INPUT may\n"
            "be '-' for standard input (read too when no INPUT is given and it is not a\n"
            "terminal); a PNM/PAM stream there is measured image by image. One report per\n"
            "input, in order; see gstats(1) and gimg(7).",
        .renamed = k_renamed,
    };
    gimg_cli_common c;
    gimg_status st = gimg_cli_parse(&spec, argc, argv, &c);
    if (!st && c.action == GIMG_CLI_RUN)
        st = finish_settings(&s);
    int rc = gimg_cli_done(&spec, &c, st);
    if (rc >= 0)
        return rc;

    job j = {.s = &s};
    const gimg_driver driver = {.tool = TOOL, .report = report_one, .emit = emit,
                                .prepare = prepare, .user = &j,
                                .images = {{s.diff_image, "--diff-image", 0}},
                                .bands = {.begin = bands_begin, .add = bands_add,
                                          .end = bands_end}};
    rc = gimg_drive(&driver, &c);
    gimg_image_free(&j.ref);
    /* Compare mode's statuses are cmp(1)'s: 1 beyond a threshold, 2 trouble. */
    if (s.reference && rc == 1)
        rc = 2;
    else if (s.reference && rc == 0 && atomic_load(&j.beyond))
        rc = 1;
    return rc;
}
