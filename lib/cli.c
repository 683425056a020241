/*
 * cli.c — option parsing, --help and error reporting shared by the tools.
 * See cli.h for the conventions; the parser is hand-written rather than
 * getopt_long so that the same table produces the help text, so that
 * library-style errors (a status and one message) come out instead of
 * getopt's own prints, and so that it can be run many times in one process
 * (the unit tests).
 */
#include "cli.h"
#include "band.h"
#include "batch.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    K_OUTPUT = -1,
    K_FORMAT = -2,
    K_QUALITY = -3,
    K_PNG_LEVEL = -4,
    K_DEVICE = -5,
    K_MAX_PIXELS = -6,
    K_VERBOSE = -7,
    K_QUIET = -8,
    K_HELP = -9,
    K_VERSION = -10,
    K_JOBS = -11,
    K_FILES_FROM = -12,
    K_NULL = -13,
    K_FAIL_FAST = -14,
    K_PROGRESS = -15,
    K_NO_PROGRESS = -16,
    K_JPEG_SUBSAMPLING = -17,
    K_PROGRESSIVE = -18,
    K_COMPRESS = -19,
    K_LOSSLESS = -20,
    K_STRIP = -21,
    K_CODECS = -22,
    K_BAND_ROWS = -23,
    K_NO_SERVER = -24,
    K_MAX_MEMORY = -25
};

/* Help texts that need numbers are built by common_help(); NULL here. */
static const gimg_cli_option k_common[] = {
    {NULL, 'o', "FILE", NULL, K_OUTPUT},
    {"format", 'f', "FMT", "output format: png, jpg, tif, webp, bmp, tga, hdr, pnm, pam or pfm "
                           "(default: from the output's extension, else PNM, or PAM with alpha)",
     K_FORMAT},
    {"quality", 0, "N", NULL, K_QUALITY},
    {"jpeg-subsampling", 0, "S", "JPEG chroma subsampling: 444, 422 or 420 (default: 444 at "
                                 "quality 90 and above, else 420)",
     K_JPEG_SUBSAMPLING},
    {"progressive", 0, NULL, "write a progressive JPEG", K_PROGRESSIVE},
    {"png-level", 0, "N", NULL, K_PNG_LEVEL},
    {"compress", 0, "C", "TIFF compression: none, lzw or deflate (default deflate, with a "
                         "predictor)",
     K_COMPRESS},
    {"lossless", 0, NULL, "write a lossless WebP", K_LOSSLESS},
    {"strip", 0, NULL, "write no metadata (ICC profile, EXIF, XMP, resolution, text)", K_STRIP},
    {"device", 0, "DEV", "auto, cpu, gpu, gpu:N[,N...] or gpu:all (default: $GIMG_DEVICE "
                         "or auto)",
     K_DEVICE},
    {"codecs", 0, "C", "JPEG codecs on a GPU device: auto (the GPU's, where they work) or cpu "
                       "(libjpeg-turbo: the same output as --device cpu) (default: $GIMG_CODECS or "
                       "auto)",
     K_CODECS},
    {"no-server", 0, NULL, "compute in this process, never in the user's GPU server, gimgd "
                           "(as GIMG_SERVER=off does)",
     K_NO_SERVER},
    {"max-pixels", 0, "N", NULL, K_MAX_PIXELS},
    {"max-memory", 0, "SIZE", NULL, K_MAX_MEMORY},
    {"band-rows", 0, "N", NULL, K_BAND_ROWS},
    {"jobs", 'j', "N", NULL, K_JOBS},
    {"files-from", 0, "FILE", "read more inputs from FILE ('-': standard input), one per line",
     K_FILES_FROM},
    {"null", '0', NULL, "names in the --files-from list end with NUL, not newline", K_NULL},
    {"fail-fast", 0, NULL, "stop at the first input that fails", K_FAIL_FAST},
    {"progress", 0, NULL, "show progress on standard error (default: when it is a terminal)",
     K_PROGRESS},
    {"no-progress", 0, NULL, "never show progress", K_NO_PROGRESS},
    {"verbose", 'v', NULL, "print the backend and timings on standard error", K_VERBOSE},
    {"quiet", 'q', NULL, "print no warnings, only errors", K_QUIET},
    {"help", 'h', NULL, "print this help and exit", K_HELP},
    {"version", 0, NULL, "print the version and exit", K_VERSION},
    {NULL, 0, NULL, NULL, 0},
};

static const char *common_help(const gimg_cli_spec *spec, const gimg_cli_option *o, char *buf,
                               size_t size)
{
    switch (o->key) {
    case K_OUTPUT:
        if (spec->with & GIMG_CLI_WITH_BATCH)
            return "write to FILE instead of OUTPUT (default: stdout); with DIR/ or a "
                   "PATTERN (%f, %e, %d, %i), every operand is an input";
        return "write to FILE instead of OUTPUT (default: stdout)";
    case K_JOBS:
        snprintf(buf, size, "CPU threads for decoding and encoding (default: %d, the cores)",
                 gimg_cpu_count());
        return buf;
    case K_QUALITY:
        snprintf(buf, size, "JPEG and WebP quality, 1 to 100 (default %d)", GIMG_DEFAULT_QUALITY);
        return buf;
    case K_PNG_LEVEL:
        snprintf(buf, size, "PNG compression level, 0 to 12 (default %d)",
                 GIMG_DEFAULT_PNG_LEVEL);
        return buf;
    case K_MAX_PIXELS:
        snprintf(buf, size, "refuse images of more than N pixels (default: none but %d a "
                 "side; --max-memory bounds a job)", GIMG_MAX_DIMENSION);
        return buf;
    case K_MAX_MEMORY: {
        char now[32];
        gimg_format_bytes(gimg_default_max_memory(), now, sizeof now);
        snprintf(buf, size, "keep each image's job within SIZE bytes (suffixes K, M, G, T; or "
                            "N%% of the memory), reading images in bands to stay within it "
                            "(default: half the memory, here %s)",
                 now);
        return buf;
    }
    case K_BAND_ROWS:
        snprintf(buf, size, "read an image taller than N rows N rows at a time (default: "
                            "images of more than %llu pixels, bands of 1 MB a thread from 4 to "
                            "16 MB, here %zu)",
                 (unsigned long long)GIMG_BAND_MIN_PIXELS, gimg_band_bytes() >> 20);
        return buf;
    default:
        return o->help ? o->help : "";
    }
}

static int table_end(const gimg_cli_option *o)
{
    return !o->long_name && !o->short_name;
}

static int common_enabled(const gimg_cli_spec *spec, int key)
{
    switch (key) {
    case K_FORMAT:
    case K_QUALITY:
    case K_PNG_LEVEL:
    case K_JPEG_SUBSAMPLING:
    case K_PROGRESSIVE:
    case K_COMPRESS:
    case K_LOSSLESS:
    case K_STRIP:
        return !(spec->omit & GIMG_CLI_NO_WRITE_OPTS);
    case K_DEVICE:
    case K_CODECS:
    case K_NO_SERVER:
        return !(spec->omit & GIMG_CLI_NO_DEVICE);
    case K_JOBS:
    case K_FILES_FROM:
    case K_NULL:
    case K_FAIL_FAST:
    case K_PROGRESS:
    case K_NO_PROGRESS:
        return (spec->with & GIMG_CLI_WITH_BATCH) != 0;
    case K_OUTPUT:
        return !(spec->omit & GIMG_CLI_NO_OUTPUT);
    case K_BAND_ROWS:
        return (spec->with & GIMG_CLI_WITH_BANDS) != 0;
    default:
        return 1;
    }
}

/* The tool's options are searched first; a name found in neither is unknown. */
static const gimg_cli_option *find_long(const gimg_cli_spec *spec, const char *name, size_t len)
{
    for (int pass = 0; pass < 2; pass++) {
        const gimg_cli_option *o = pass ? k_common : spec->options;
        for (; o && !table_end(o); o++)
            if (o->long_name && strlen(o->long_name) == len &&
                memcmp(o->long_name, name, len) == 0 && (!pass || common_enabled(spec, o->key)))
                return o;
    }
    return NULL;
}

static const gimg_cli_option *find_short(const gimg_cli_spec *spec, int letter)
{
    for (int pass = 0; pass < 2; pass++) {
        const gimg_cli_option *o = pass ? k_common : spec->options;
        for (; o && !table_end(o); o++)
            if (o->short_name && o->short_name == letter && (!pass || common_enabled(spec, o->key)))
                return o;
    }
    return NULL;
}

/* ------------------------------------------------- unknown long options */

enum { MAX_NAME = 48, MAX_SUGGESTIONS = 4 };

/* The edit distance between a[0..la) and b (insertions, deletions,
 * substitutions and swaps of neighbours, each 1): "--verbsoe" is one swap
 * from --verbose. Names longer than MAX_NAME are far from everything. */
static int edit_distance(const char *a, size_t la, const char *b)
{
    size_t lb = strlen(b);
    if (la > MAX_NAME || lb > MAX_NAME)
        return MAX_NAME;
    int d[MAX_NAME + 1][MAX_NAME + 1];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

/* What the user may have meant by an unknown long option: the options it
 * is the start of ("--verb": --verbose), else those nearest to it, within a
 * distance that grows with its length (1 up to 4 letters, 2 up to 8, then
 * 3). A renamed option's old name counts as its new one. */
typedef struct {
    const char *names[MAX_SUGGESTIONS];
    int n;
} suggestions;

static void consider(suggestions *s, const char *target)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->names[i], target))
            return;
    if (s->n < MAX_SUGGESTIONS)
        s->names[s->n++] = target;
}

/* Calls fn(name, target) for every long name the tool knows: its options,
 * the common ones it has, and the old names of renamed ones. */
static void each_long_name(const gimg_cli_spec *spec,
                           void (*fn)(void *, const char *, const char *), void *arg)
{
    for (int pass = 0; pass < 2; pass++) {
        const gimg_cli_option *o = pass ? k_common : spec->options;
        for (; o && !table_end(o); o++)
            if (o->long_name && (!pass || common_enabled(spec, o->key)))
                fn(arg, o->long_name, o->long_name);
    }
    for (const char *const *r = spec->renamed; r && r[0] && r[1]; r += 2)
        fn(arg, r[0], r[1]);
}

typedef struct {
    const char *typed;
    size_t len;
    int prefix;        /* 1: collect the names typed is the start of */
    int max_distance;  /* otherwise: collect those this near */
    suggestions *out;
} search;

static void by_prefix(void *arg, const char *name, const char *target)
{
    search *s = arg;
    if (strlen(name) > s->len && !memcmp(name, s->typed, s->len))
        consider(s->out, target);
}

static void by_distance(void *arg, const char *name, const char *target)
{
    search *s = arg;
    if (edit_distance(s->typed, s->len, name) == s->max_distance)
        consider(s->out, target);
}

static void nearest_distance(void *arg, const char *name, const char *target)
{
    (void)target;
    search *s = arg;
    int d = edit_distance(s->typed, s->len, name);
    if (d < s->max_distance)
        s->max_distance = d;
}

/* The message for an unknown long option name[0..len). */
static gimg_status unknown_long(const gimg_cli_spec *spec, const char *name, size_t len)
{
    for (const char *const *r = spec->renamed; r && r[0] && r[1]; r += 2)
        if (strlen(r[0]) == len && !memcmp(r[0], name, len))
            return gimg_fail(GIMG_E_USAGE, "unknown option '--%.*s' (it is now --%s)", (int)len,
                             name, r[1]);
    suggestions found = {{0}, 0};
    search s = {name, len, 1, 0, &found};
    if (len >= 2)
        each_long_name(spec, by_prefix, &s);
    if (!found.n) {
        const int limit = len <= 4 ? 1 : len <= 8 ? 2 : 3;
        s.max_distance = limit + 1;
        each_long_name(spec, nearest_distance, &s);
        if (s.max_distance <= limit)
            each_long_name(spec, by_distance, &s);
    }
    if (!found.n)
        return gimg_fail(GIMG_E_USAGE, "unknown option '--%.*s'", (int)len, name);
    char list[256] = "";
    size_t used = 0;
    for (int i = 0; i < found.n; i++) {
        int w = snprintf(list + used, sizeof list - used, "%s--%s",
                         i == 0 ? "" : i == found.n - 1 ? " or " : ", ", found.names[i]);
        if (w < 0 || (size_t)w >= sizeof list - used)
            break;
        used += (size_t)w;
    }
    return gimg_fail(GIMG_E_USAGE, "unknown option '--%.*s' (did you mean %s?)", (int)len, name,
                     list);
}

static void operand_limits(const gimg_cli_spec *spec, int *min, int *max)
{
    if (spec->omit & GIMG_CLI_NO_OPERANDS) {
        *min = *max = 0;
    } else if (spec->min_operands == 0 && spec->max_operands == 0) {
        *min = 1;
        *max = 2;
    } else {
        *min = spec->min_operands;
        *max = spec->max_operands;
    }
}

/* ------------------------------------------------------------------ numbers */

static gimg_status not_a_number(const char *what, const char *s, const char *kind)
{
    return gimg_fail(GIMG_E_USAGE, "%s: '%s' is not %s", what, s, kind);
}

gimg_status gimg_cli_parse_int(const char *what, const char *s, long long min, long long max,
                               long long *out)
{
    if (!s)
        return not_a_number(what, "", "an integer");
    const char *p = s + (*s == '+' || *s == '-');
    /* strtoll would skip blanks and take "0x"; checking the first digit here
     * and the end below leaves only plain decimal. */
    if (!isdigit((unsigned char)*p))
        return not_a_number(what, s, "an integer");
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end != '\0')
        return not_a_number(what, s, "an integer");
    if (errno == ERANGE || v < min || v > max)
        return gimg_fail(GIMG_E_USAGE, "%s: '%s' is out of range (%lld to %lld)", what, s, min,
                         max);
    *out = v;
    return GIMG_OK;
}

gimg_status gimg_cli_parse_u64(const char *what, const char *s, uint64_t min, uint64_t max,
                               uint64_t *out)
{
    if (!s)
        return not_a_number(what, "", "an integer");
    int negative = *s == '-';
    const char *p = s + (*s == '+' || *s == '-');
    if (!isdigit((unsigned char)*p))
        return not_a_number(what, s, "an integer");
    char *end;
    errno = 0;
    /* strtoull accepts "-5" and negates it; parse the digits alone. */
    unsigned long long v = strtoull(p, &end, 10);
    if (*end != '\0')
        return not_a_number(what, s, "an integer");
    if (errno == ERANGE || (negative && v != 0) || v < min || v > max)
        return gimg_fail(GIMG_E_USAGE, "%s: '%s' is out of range (%llu to %llu)", what, s,
                         (unsigned long long)min, (unsigned long long)max);
    *out = v;
    return GIMG_OK;
}

gimg_status gimg_cli_parse_size(const char *what, const char *s, uint64_t *out)
{
    /* A decimal number, then a binary suffix (K, M, G, T, alone or with
     * "iB" or "B", either case) or "%" of the machine's memory. */
    const char *p = s ? s : "";
    if (!isdigit((unsigned char)*p))
        return not_a_number(what, s ? s : "", "a size (as 512M, 2G or 25%)");
    char *end;
    errno = 0;
    const double v = strtod(p, &end);
    double unit = 1;
    int percent = 0;
    if (*end == '%' && end[1] == '\0') {
        percent = 1;
    } else if (*end) {
        const char *units = "KMGT", *u = strchr(units, toupper((unsigned char)*end));
        const char *rest = end + 1;
        if (!u || !(rest[0] == '\0' || !strcmp(rest, "B") || !strcmp(rest, "iB") ||
                    !strcmp(rest, "b") || !strcmp(rest, "ib")))
            return not_a_number(what, s, "a size (as 512M, 2G or 25%)");
        unit = ldexp(1.0, 10 * (int)(u - units + 1));
    }
    if (strpbrk(s, "xXeE"))
        return not_a_number(what, s, "a size (as 512M, 2G or 25%)");
    const double min = 65536, max = 0x1p62;
    double bytes = percent ? v / 100 * 2.0 * (double)gimg_default_max_memory() : v * unit;
    if (errno == ERANGE || !isfinite(v) || (percent && (v <= 0 || v > 100)) || bytes < min ||
        bytes > max)
        return gimg_fail(GIMG_E_USAGE, "%s: '%s' is out of range (64K to 4096P%s)", what, s,
                         percent ? ", or 1% to 100% of the memory" : "");
    *out = (uint64_t)bytes;
    return GIMG_OK;
}

gimg_status gimg_cli_parse_double(const char *what, const char *s, double min, double max,
                                  double *out)
{
    if (!s)
        return not_a_number(what, "", "a number");
    const char *p = s + (*s == '+' || *s == '-');
    /* Plain decimal only: no blanks, "inf", "nan" or hexadecimal floats. */
    int starts_ok = isdigit((unsigned char)p[0]) || (p[0] == '.' && isdigit((unsigned char)p[1]));
    if (!starts_ok || strpbrk(p, "xX"))
        return not_a_number(what, s, "a number");
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end != '\0')
        return not_a_number(what, s, "a number");
    /* ERANGE also flags underflow to a tiny value, which is harmless here. */
    int overflow = errno == ERANGE && fabs(v) > 1.0;
    if (overflow || !isfinite(v) || v < min || v > max)
        return gimg_fail(GIMG_E_USAGE, "%s: '%s' is out of range (%g to %g)", what, s, min, max);
    *out = v;
    return GIMG_OK;
}

/* ------------------------------------------------------------------ parsing */

static void option_name(const gimg_cli_option *o, char *buf, size_t size)
{
    if (o->long_name)
        snprintf(buf, size, "--%s", o->long_name);
    else
        snprintf(buf, size, "-%c", o->short_name);
}

/* gimg_parse_device's own status is the library's; on a command line any
 * bad value is a usage error, so re-record its message as one. */
static gimg_status parse_device(const char *s, const char *prefix, gimg_device *d)
{
    if (gimg_parse_device(s, d) == GIMG_OK)
        return GIMG_OK;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", gimg_last_error());
    if (!msg[0])
        snprintf(msg, sizeof msg, "unknown device '%s'", s);
    return gimg_fail(GIMG_E_USAGE, "%s%s", prefix, msg);
}

/* --codecs or GIMG_CODECS: auto or cpu. */
static gimg_status parse_codecs(const char *s, const char *name, int *cpu)
{
    if (strcmp(s, "auto") && strcmp(s, "cpu"))
        return gimg_fail(GIMG_E_USAGE, "%s: unknown codecs '%s' (auto or cpu)", name, s);
    *cpu = !strcmp(s, "cpu");
    return GIMG_OK;
}

static gimg_status apply(const gimg_cli_spec *spec, const gimg_cli_option *o, const char *arg,
                         gimg_cli_common *c, int *device_given, int *codecs_given)
{
    char name[64];
    option_name(o, name, sizeof name);
    long long v;
    gimg_status st;
    switch (o->key) {
    case K_OUTPUT:
        if (!*arg)
            return gimg_fail(GIMG_E_USAGE, "%s: empty file name", name);
        c->output = arg;
        return GIMG_OK;
    case K_FORMAT:
        c->write.format = gimg_format_from_name(arg);
        if (c->write.format == GIMG_FMT_UNKNOWN || !gimg_format_writable(c->write.format))
            return gimg_fail(GIMG_E_USAGE, "%s: %s '%s' (png, jpg, tif, webp, bmp, tga, hdr, "
                             "pnm, ppm, pgm, pam or pfm)", name,
                             c->write.format == GIMG_FMT_UNKNOWN ? "unknown format"
                                                                 : "cannot write the format",
                             arg);
        return GIMG_OK;
    case K_JPEG_SUBSAMPLING: {
        static const struct {
            const char *name, *colons;
            gimg_subsampling value;
        } modes[] = {{"444", "4:4:4", GIMG_SUBSAMPLE_444},
                     {"422", "4:2:2", GIMG_SUBSAMPLE_422},
                     {"420", "4:2:0", GIMG_SUBSAMPLE_420}};
        for (int i = 0; i < 3; i++)
            if (!strcmp(arg, modes[i].name) || !strcmp(arg, modes[i].colons)) {
                c->write.jpeg_subsampling = modes[i].value;
                return GIMG_OK;
            }
        return gimg_fail(GIMG_E_USAGE, "%s: unknown subsampling '%s' (444, 422 or 420)", name,
                         arg);
    }
    case K_PROGRESSIVE:
        c->write.jpeg_progressive = 1;
        return GIMG_OK;
    case K_COMPRESS:
        if (!strcmp(arg, "none"))
            c->write.tiff_compression = GIMG_TIFF_NONE;
        else if (!strcmp(arg, "lzw"))
            c->write.tiff_compression = GIMG_TIFF_LZW;
        else if (!strcmp(arg, "deflate"))
            c->write.tiff_compression = GIMG_TIFF_DEFLATE;
        else
            return gimg_fail(GIMG_E_USAGE, "%s: unknown compression '%s' (none, lzw or deflate)",
                             name, arg);
        return GIMG_OK;
    case K_LOSSLESS:
        c->write.webp_lossless = 1;
        return GIMG_OK;
    case K_STRIP:
        c->write.strip = 1;
        return GIMG_OK;
    case K_QUALITY:
        if ((st = gimg_cli_parse_int(name, arg, 1, 100, &v)))
            return st;
        c->write.quality = (int)v;
        return GIMG_OK;
    case K_PNG_LEVEL:
        if ((st = gimg_cli_parse_int(name, arg, 0, 12, &v)))
            return st;
        c->write.png_level = (int)v;
        return GIMG_OK;
    case K_DEVICE:
        *device_given = 1;
        return parse_device(arg, "", &c->device);
    case K_CODECS:
        *codecs_given = 1;
        return parse_codecs(arg, name, &c->cpu_codecs);
    case K_NO_SERVER:
        c->no_server = 1;
        return GIMG_OK;
    case K_MAX_PIXELS:
        /* No image can have more pixels than the side limit squared. */
        return gimg_cli_parse_u64(name, arg, 1,
                                  (uint64_t)GIMG_MAX_DIMENSION * (uint64_t)GIMG_MAX_DIMENSION,
                                  &c->max_pixels);
    case K_MAX_MEMORY:
        return gimg_cli_parse_size(name, arg, &c->max_memory);
    case K_BAND_ROWS:
        if ((st = gimg_cli_parse_int(name, arg, 1, GIMG_MAX_DIMENSION, &v)))
            return st;
        c->band_rows = (int)v;
        return GIMG_OK;
    case K_JOBS:
        if ((st = gimg_cli_parse_int(name, arg, 1, 1024, &v)))
            return st;
        c->jobs = (int)v;
        return GIMG_OK;
    case K_FILES_FROM:
        if (!*arg)
            return gimg_fail(GIMG_E_USAGE, "%s: empty file name", name);
        c->files_from = arg;
        return GIMG_OK;
    case K_NULL:
        c->null_separated = 1;
        return GIMG_OK;
    case K_FAIL_FAST:
        c->fail_fast = 1;
        return GIMG_OK;
    case K_PROGRESS:
        c->progress = 1;
        return GIMG_OK;
    case K_NO_PROGRESS:
        c->progress = 0;
        return GIMG_OK;
    case K_VERBOSE:
        c->verbose = 1;
        c->quiet = 0;
        return GIMG_OK;
    case K_QUIET:
        c->quiet = 1;
        c->verbose = 0;
        return GIMG_OK;
    case K_HELP:
        c->action = GIMG_CLI_HELP;
        return GIMG_OK;
    case K_VERSION:
        c->action = GIMG_CLI_VERSION;
        return GIMG_OK;
    default:
        if (!spec->handle)
            return gimg_fail(GIMG_E_USAGE, "%s: option not handled", name);
        return spec->handle(spec->user, o->key, arg);
    }
}

/* 1 when at least half the CPUs have a thread to run besides this one
 * (/proc/loadavg's count of runnable threads, this one included). */
static int cpus_busy(void)
{
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f)
        return 0;
    double l1, l5, l15;
    long running = 0, total = 0;
    const int got = fscanf(f, "%lf %lf %lf %ld/%ld", &l1, &l5, &l15, &running, &total);
    fclose(f);
    const long cpus = gimg_cpu_count();
    return got == 5 && (running - 1) * 2 >= cpus;
}

void gimg_cli_settle_threads(char **argv)
{
    /* Measured with make -j16 over 160 photos (samples/Makefile, an H200
     * host of 16 cores, --device cpu): 13.4 s as libgomp spins, 4.6 s
     * passive. On an idle machine the spin costs nothing and the restart
     * would (about 1 ms, 4 on a small VM): only a busy one restarts. */
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT") || !argv || !argv[0] ||
        !cpus_busy())
        return;
    const char *preload = getenv("LD_PRELOAD");
    if (preload && strstr(preload, "vgpreload"))
        return;
    if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0)
        return;
    execv("/proc/self/exe", argv);
    unsetenv("OMP_WAIT_POLICY"); /* it did not take effect here */
}

static void set_defaults(gimg_cli_common *c, char **argv)
{
    memset(c, 0, sizeof *c);
    c->action = GIMG_CLI_RUN;
    c->output = "-";
    gimg_write_opts_init(&c->write);
    gimg_parse_device("auto", &c->device);
    c->max_pixels = GIMG_DEFAULT_MAX_PIXELS;
    c->jobs = gimg_cpu_count();
    c->progress = -1;
    c->operands = argv ? argv + 1 : NULL;
}

gimg_status gimg_cli_parse(const gimg_cli_spec *spec, int argc, char **argv,
                           gimg_cli_common *c)
{
    set_defaults(c, argv);
    int device_given = 0, codecs_given = 0, only_operands = 0;
    const char *o_output = NULL;
    int nops = 0;
    gimg_status st;

    for (int i = 1; i < argc && c->action == GIMG_CLI_RUN; i++) {
        char *a = argv[i];
        if (only_operands || a[0] != '-' || a[1] == '\0') {
            /* Operands move to the front. The slot written is at or before i,
             * and every slot before i has been read already. */
            argv[1 + nops++] = a;
            continue;
        }
        if (a[1] == '-' && a[2] == '\0') {
            only_operands = 1;
            continue;
        }
        if (a[1] == '-') {
            const char *name = a + 2, *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            const gimg_cli_option *o = find_long(spec, name, len);
            if (!o)
                return unknown_long(spec, name, len);
            const char *arg = NULL;
            if (!o->metavar) {
                if (eq)
                    return gimg_fail(GIMG_E_USAGE, "option '--%s' takes no argument",
                                     o->long_name);
            } else if (eq) {
                arg = eq + 1;
            } else if (i + 1 < argc) {
                arg = argv[++i];
            } else {
                return gimg_fail(GIMG_E_USAGE, "option '--%s' needs an argument (%s)",
                                 o->long_name, o->metavar);
            }
            if ((st = apply(spec, o, arg, c, &device_given, &codecs_given)))
                return st;
            if (o->key == K_OUTPUT)
                o_output = arg;
            continue;
        }
        /* A cluster of short options: flags, the last of which may take the
         * rest of the word or the next word as its argument. */
        for (const char *p = a + 1; *p && c->action == GIMG_CLI_RUN; p++) {
            const gimg_cli_option *o = find_short(spec, (unsigned char)*p);
            if (!o) {
                if (isprint((unsigned char)*p))
                    return gimg_fail(GIMG_E_USAGE, "unknown option '-%c'", *p);
                return gimg_fail(GIMG_E_USAGE, "unknown option in '%s'", a);
            }
            const char *arg = NULL;
            if (o->metavar) {
                if (p[1])
                    arg = p + 1;
                else if (i + 1 < argc)
                    arg = argv[++i];
                else
                    return gimg_fail(GIMG_E_USAGE, "option '-%c' needs an argument (%s)", *p,
                                     o->metavar);
            }
            if ((st = apply(spec, o, arg, c, &device_given, &codecs_given)))
                return st;
            if (o->key == K_OUTPUT)
                o_output = arg;
            if (arg)
                break;
        }
    }
    c->n_operands = nops;
    if (c->action != GIMG_CLI_RUN)
        return GIMG_OK;

    int min, max;
    operand_limits(spec, &min, &max);
    const char *what = spec->operands ? spec->operands : "INPUT [OUTPUT]";
    int batch = (spec->with & GIMG_CLI_WITH_BATCH) != 0;
    /* In a batch, -o names the outputs and every operand is an input; and
     * --files-from may bring all of them. */
    int outputs_by_o = batch && o_output && !(spec->omit & GIMG_CLI_NO_OUTPUT);
    if (batch && c->files_from && min > 0)
        min = 0;
    if (outputs_by_o)
        max = -1;
    if (c->null_separated && !c->files_from)
        return gimg_fail(GIMG_E_USAGE, "-0/--null applies to --files-from, which is missing");
    /* No input named, and data coming in through a pipe or a file: the
     * input is standard input, as netpbm's filters do. At a terminal, the
     * user forgot the operand. */
    if (nops == 0 && min > 0 && !c->files_from && !isatty(STDIN_FILENO)) {
        static char dash[] = "-";
        static char *stdin_operand[] = {dash, NULL};
        c->operands = stdin_operand;
        c->n_operands = nops = 1;
        c->input = dash;
    }
    if (nops < min)
        return gimg_fail(GIMG_E_USAGE, "missing operand (expected %s)", what);
    if (max >= 0 && nops > max) {
        if (batch && !(spec->omit & GIMG_CLI_NO_OUTPUT))
            return gimg_fail(GIMG_E_USAGE, "extra operand '%s' (several inputs need -o DIR/ or "
                                           "-o PATTERN)", c->operands[max]);
        return gimg_fail(GIMG_E_USAGE, "extra operand '%s'", c->operands[max]);
    }
    c->n_inputs = outputs_by_o || max < 0 ? nops : nops < 1 ? nops : 1;
    if (c->files_from && !outputs_by_o && max == 2 && nops == 2)
        return gimg_fail(GIMG_E_USAGE, "with --files-from, outputs are named by -o DIR/ or -o "
                                       "PATTERN");
    if (nops >= 1)
        c->input = c->operands[0];
    if (max >= 2 && nops >= 2 && !outputs_by_o) {
        if (o_output)
            return gimg_fail(GIMG_E_USAGE, "the output is given twice: -o %s and %s", o_output,
                             c->operands[1]);
        if (!c->operands[1][0])
            return gimg_fail(GIMG_E_USAGE, "empty output file name");
        c->output = c->operands[1];
        c->output_is_operand = 1;
    }
    for (int i = 0; i < c->n_inputs; i++)
        if (!c->operands[i][0])
            return gimg_fail(GIMG_E_USAGE, "empty input file name");

    if (!device_given && !(spec->omit & GIMG_CLI_NO_DEVICE)) {
        const char *env = getenv("GIMG_DEVICE");
        if (env && *env && (st = parse_device(env, "GIMG_DEVICE: ", &c->device)))
            return st;
    }
    if (!codecs_given && !(spec->omit & GIMG_CLI_NO_DEVICE)) {
        const char *env = getenv("GIMG_CODECS");
        if (env && *env && (st = parse_codecs(env, "GIMG_CODECS", &c->cpu_codecs)))
            return st;
    }
    c->device.cpu_codecs = c->cpu_codecs; /* --device, given after --codecs, reset it */
    c->device.no_server = c->no_server;   /* and after --no-server */
    gimg_set_max_pixels(c->max_pixels);
    gimg_set_max_memory(c->max_memory); /* 0: the default */
    return GIMG_OK;
}

/* ------------------------------------------------------------------- output */

int gimg_cli_usage_line(const gimg_cli_spec *spec, char *buf, size_t size)
{
    if (spec->omit & GIMG_CLI_NO_OPERANDS)
        return snprintf(buf, size, "Usage: %s [options]", spec->tool);
    return snprintf(buf, size, "Usage: %s [options] %s", spec->tool,
                    spec->operands ? spec->operands : "INPUT [OUTPUT]");
}

enum { HELP_WIDTH = 79, MAX_LEFT = 30 };

static void left_column(const gimg_cli_option *o, char *buf, size_t size)
{
    char sh[8] = "", lg[64] = "";
    if (o->short_name)
        snprintf(sh, sizeof sh, "-%c", o->short_name);
    if (o->long_name)
        snprintf(lg, sizeof lg, "--%s", o->long_name);
    snprintf(buf, size, "  %s%s%s%s%s", o->short_name ? sh : "  ",
             o->short_name && o->long_name ? ", " : o->long_name ? "  " : "",
             lg, o->metavar ? " " : "", o->metavar ? o->metavar : "");
}

/* Words of text, wrapped to HELP_WIDTH, starting at column col (the cursor
 * is at column start). */
static void print_wrapped(FILE *f, const char *text, int start, int col)
{
    int x = start;
    if (x < col) {
        fprintf(f, "%*s", col - x, "");
        x = col;
    }
    int first = 1;
    const char *p = text;
    while (*p) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        int len = (int)strcspn(p, " ");
        if (!first && x + 1 + len > HELP_WIDTH) {
            fprintf(f, "\n%*s", col, "");
            x = col;
            first = 1;
        }
        fprintf(f, "%s%.*s", first ? "" : " ", len, p);
        x += len + !first;
        first = 0;
        p += len;
    }
    fputc('\n', f);
}

static int left_width(const gimg_cli_spec *spec)
{
    int w = 0;
    char buf[128];
    for (int pass = 0; pass < 2; pass++) {
        const gimg_cli_option *o = pass ? k_common : spec->options;
        for (; o && !table_end(o); o++) {
            if (pass && !common_enabled(spec, o->key))
                continue;
            left_column(o, buf, sizeof buf);
            int len = (int)strlen(buf);
            if (len <= MAX_LEFT && len > w)
                w = len;
        }
    }
    return w;
}

static void print_table(const gimg_cli_spec *spec, const gimg_cli_option *o, int common, FILE *f,
                        int col)
{
    char left[128], help[256];
    for (; o && !table_end(o); o++) {
        if (common && !common_enabled(spec, o->key))
            continue;
        left_column(o, left, sizeof left);
        const char *text = common ? common_help(spec, o, help, sizeof help)
                                  : o->help ? o->help : "";
        fputs(left, f);
        int len = (int)strlen(left);
        if (len + 2 > col) {
            fputc('\n', f);
            len = 0;
        }
        print_wrapped(f, text, len, col);
    }
}

void gimg_cli_print_help(const gimg_cli_spec *spec, FILE *f)
{
    char usage[256];
    gimg_cli_usage_line(spec, usage, sizeof usage);
    fprintf(f, "%s\n", usage);
    if (spec->description)
        fprintf(f, "%s\n", spec->description);
    int col = left_width(spec) + 2;
    if (spec->options && !table_end(spec->options)) {
        fputs("\nOptions:\n", f);
        print_table(spec, spec->options, 0, f, col);
    }
    fputs("\nCommon options:\n", f);
    print_table(spec, k_common, 1, f, col);
    if (spec->epilogue)
        fprintf(f, "\n%s\n", spec->epilogue);
}

void gimg_cli_print_version(const gimg_cli_spec *spec, FILE *f)
{
    fprintf(f, "%s (gimg) %s\n", spec->tool, GIMG_VERSION);
    fprintf(f, "%s\n", gimg_built_with_cuda() ? "CUDA support: built in"
                                              : "CUDA support: not built in (CPU only)");
}

/* 1 if p starts a byte a terminal may act on: an ASCII control character
 * (ESC starts the sequences that move the cursor or retitle the window),
 * DEL, or a C1 control in UTF-8 (U+0080..U+009F: U+009B is a CSI too). */
static int control_at(const unsigned char *p)
{
    return *p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f);
}

/* Names are escaped as GNU ls -b escapes them: \n, \r, \t and the other C
 * letters, \ooo in octal for the rest, each byte of a UTF-8 C1 control
 * too, and then backslashes doubled so that the result is unambiguous.
 * A name with nothing to escape is returned as it is (no copy, whatever
 * its length); an escaped one lives in one of a few per-thread buffers,
 * so that a message may name several files, and is cut with "..." past
 * PATH_MAX bytes. */
const char *gimg_cli_name(const char *path, int is_output)
{
    enum { RING = 4, CAP = PATH_MAX };
    static _Thread_local char ring[RING][CAP];
    static _Thread_local unsigned next;
    if (!path)
        return path;
    if (strcmp(path, "-") == 0)
        return is_output ? "standard output" : "standard input";
    const unsigned char *p = (const unsigned char *)path;
    size_t i = 0;
    while (p[i] && !control_at(p + i))
        i++;
    if (!p[i])
        return path;
    char *out = ring[next++ % RING];
    size_t n = 0;
    for (i = 0; p[i] && n + 8 < CAP; i++) {
        if (p[i] == '\\') {
            out[n++] = '\\';
            out[n++] = '\\';
        } else if (p[i] >= '\a' && p[i] <= '\r') { /* 7..13: \a \b \t \n \v \f \r */
            out[n++] = '\\';
            out[n++] = "abtnvfr"[p[i] - '\a'];
        } else if (control_at(p + i)) {
            int bytes = p[i] == 0xc2 ? 2 : 1;
            for (int k = 0; k < bytes; k++, n += 4)
                snprintf(out + n, CAP - n, "\\%03o", p[i + (size_t)k]);
            i += (size_t)bytes - 1;
        } else {
            out[n++] = (char)p[i];
        }
    }
    if (p[i])
        n += (size_t)snprintf(out + n, CAP - n, "...");
    out[n] = '\0';
    return out;
}

int gimg_cli_error(const char *tool, const char *file, gimg_status st)
{
    const char *msg = gimg_last_error();
    if (!msg || !*msg)
        msg = "unknown error";
    if (file)
        fprintf(stderr, "%s: %s: %s\n", tool, file, msg);
    else
        fprintf(stderr, "%s: %s\n", tool, msg);
    if (st == GIMG_E_USAGE)
        fprintf(stderr, "Try '%s --help'.\n", tool);
    return gimg_exit_code(st);
}

int gimg_cli_close_stdout(const char *tool)
{
    int had_error = ferror(stdout);
    errno = 0;
    int closed = fclose(stdout) == 0;
    if (closed && !had_error)
        return 0;
    fprintf(stderr, "%s: standard output: %s\n", tool,
            !closed && errno ? strerror(errno) : "write error");
    return 1;
}

int gimg_cli_done(const gimg_cli_spec *spec, const gimg_cli_common *c, gimg_status st)
{
    if (st)
        return gimg_cli_error(spec->tool, NULL, st);
    switch (c->action) {
    case GIMG_CLI_HELP:
        gimg_cli_print_help(spec, stdout);
        return gimg_cli_close_stdout(spec->tool);
    case GIMG_CLI_VERSION:
        gimg_cli_print_version(spec, stdout);
        return gimg_cli_close_stdout(spec->tool);
    default:
        return -1;
    }
}
