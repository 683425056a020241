/*
 * kernel_spec.c — gconv's -k: named kernels, inline matrices and kernel
 * files, turned into a gimg_kernel (correlation form, anchor, plan).
 *
 * Custom kernels are read as ImageMagick users type them: a flat list of
 * n * n numbers is n x n, and (with normalize) a kernel is divided by its
 * sum unless that is zero (gimg_conv.h has the rules).
 *
 * Parsing never trusts its input: numbers are checked whole, sizes are
 * bounded before any allocation, a kernel file is read no further than the
 * largest kernel file can be (GIMG_KERNEL_MAX_FILE_BYTES), and every error
 * names what was wrong and where (a fuzz target can call
 * gimg_kernel_parse_text directly).
 */
#include "conv_internal.h"
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_SIDE GIMG_KERNEL_MAX_SIDE
#define MAX_RADIUS ((MAX_SIDE - 1) / 2)

void gimg_kernel_free(gimg_kernel *k)
{
    if (!k)
        return;
    free(k->taps);
    free(k->taps_y);
    free(k->row);
    free(k->col);
    memset(k, 0, sizeof *k);
}

const char *gimg_kernel_names(void)
{
    return "box:R, gaussian:SIGMA[:RADIUS], sharpen, unsharp:SIGMA[:AMOUNT], laplacian, "
           "log:SIGMA, emboss, edge, sobel-x, sobel-y, scharr-x, scharr-y, prewitt-x, "
           "prewitt-y, sobel, scharr, prewitt";
}

static gimg_status alloc_kernel(gimg_kernel *k, int w, int h, const char *name)
{
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "%s", name);
    k->width = w;
    k->height = h;
    k->anchor_x = (w - 1) / 2;
    k->anchor_y = (h - 1) / 2;
    k->taps = calloc((size_t)w * h, sizeof(float));
    if (!k->taps)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    return GIMG_OK;
}

/* Whether col[i] * row[j] reproduces every tap bit for bit. */
static int factors_exact(const gimg_kernel *k, const float *col, const float *row)
{
    for (int i = 0; i < k->height; i++)
        for (int j = 0; j < k->width; j++) {
            float t = col[i] * row[j], want = k->taps[i * k->width + j];
            if (t != want || signbit(t) != signbit(want))
                return 0;
        }
    return 1;
}

/* Plans k as separable with the factors col and row (taken over). */
static void set_separable(gimg_kernel *k, float *col, float *row)
{
    k->kind = GIMG_KERNEL_SEPARABLE;
    k->col = col;
    k->row = row;
}

/*
 * Exact separability: taps[i][j] == col[i] * row[j] in float for every tap.
 * A rank-1 kernel is a column times a row, where the column is any of its
 * nonzero columns (j0) and the row that column's pivot row (pi) divided by
 * taps[pi][j0], or the other way round. Candidates: the largest tap, and
 * the smallest nonzero tap of its row and of its column (which recovers
 * integer factors like 1 2 1); the first pair that reproduces every tap
 * bit for bit wins. Kernels of one row or one column are already one pass
 * and stay dense.
 */
static gimg_status plan_kernel(gimg_kernel *k)
{
    const int w = k->width, h = k->height;
    if (k->kind != GIMG_KERNEL_DENSE || w < 2 || h < 2)
        return GIMG_OK;
    const float *t = k->taps;
    int pi = 0, pj = 0;
    for (int i = 0; i < h; i++)
        for (int j = 0; j < w; j++)
            if (fabsf(t[i * w + j]) > fabsf(t[pi * w + pj]))
                pi = i, pj = j;
    if (t[pi * w + pj] == 0.0f)
        return GIMG_OK;
    int mj = pj, mi = pi;
    for (int j = 0; j < w; j++)
        if (t[pi * w + j] != 0.0f && fabsf(t[pi * w + j]) < fabsf(t[pi * w + mj]))
            mj = j;
    for (int i = 0; i < h; i++)
        if (t[i * w + pj] != 0.0f && fabsf(t[i * w + pj]) < fabsf(t[mi * w + pj]))
            mi = i;
    const int cand[3][2] = {{pi, pj}, {pi, mj}, {mi, pj}};
    float *row = malloc((size_t)w * sizeof *row), *col = malloc((size_t)h * sizeof *col);
    if (!row || !col) {
        free(row);
        free(col);
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    }
    for (int c = 0; c < 3; c++) {
        const int ci = cand[c][0], cj = cand[c][1];
        const float p = t[ci * w + cj];
        for (int attempt = 0; attempt < 2; attempt++) {
            for (int j = 0; j < w; j++)
                row[j] = attempt == 0 ? t[ci * w + j] : t[ci * w + j] / p;
            for (int i = 0; i < h; i++)
                col[i] = attempt == 0 ? t[i * w + cj] / p : t[i * w + cj];
            if (factors_exact(k, col, row)) {
                set_separable(k, col, row);
                return GIMG_OK;
            }
        }
    }
    free(row);
    free(col);
    return GIMG_OK;
}

/* A kernel of n x n taps that is f[i] * f[j] by construction. */
static gimg_status outer_kernel(gimg_kernel *k, const char *spec, int n, const float *f)
{
    gimg_status st = alloc_kernel(k, n, n, spec);
    if (st)
        return st;
    float *row = malloc((size_t)n * sizeof *row), *col = malloc((size_t)n * sizeof *col);
    if (!row || !col) {
        free(row);
        free(col);
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    }
    memcpy(row, f, (size_t)n * sizeof *row);
    memcpy(col, f, (size_t)n * sizeof *col);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            k->taps[i * n + j] = f[i] * f[j];
    set_separable(k, col, row);
    return GIMG_OK;
}

/* ------------------------------------------------------------ named kernels */

typedef struct { const char *name; int w, h; float taps[9]; } fixed_kernel;

/* Correlation weights: out(x, y) = sum taps[i][j] * in(x + j - 1, y + i - 1).
 * An -x kernel is positive where brightness increases to the right, a -y
 * kernel where it increases downward. */
static const fixed_kernel k_fixed[] = {
    {"sharpen", 3, 3, {0, -1, 0, -1, 5, -1, 0, -1, 0}},
    {"laplacian", 3, 3, {0, 1, 0, 1, -4, 1, 0, 1, 0}},
    {"emboss", 3, 3, {-2, -1, 0, -1, 1, 1, 0, 1, 2}},
    {"edge", 3, 3, {-1, -1, -1, -1, 8, -1, -1, -1, -1}},
    {"sobel-x", 3, 3, {-1, 0, 1, -2, 0, 2, -1, 0, 1}},
    {"sobel-y", 3, 3, {-1, -2, -1, 0, 0, 0, 1, 2, 1}},
    {"scharr-x", 3, 3, {-3, 0, 3, -10, 0, 10, -3, 0, 3}},
    {"scharr-y", 3, 3, {-3, -10, -3, 0, 0, 0, 3, 10, 3}},
    {"prewitt-x", 3, 3, {-1, 0, 1, -1, 0, 1, -1, 0, 1}},
    {"prewitt-y", 3, 3, {-1, -1, -1, 0, 0, 0, 1, 1, 1}},
};
#define N_FIXED (sizeof k_fixed / sizeof k_fixed[0])

static const fixed_kernel *find_fixed(const char *name)
{
    for (size_t i = 0; i < N_FIXED; i++)
        if (!strcmp(k_fixed[i].name, name))
            return &k_fixed[i];
    return NULL;
}

/* The normalized 1-D Gaussian of n = 2r + 1 taps, in double. */
static void gaussian_1d(double sigma, int r, double *g)
{
    double sum = 0;
    for (int i = -r; i <= r; i++)
        sum += g[i + r] = exp(-(double)i * i / (2 * sigma * sigma));
    for (int i = 0; i < 2 * r + 1; i++)
        g[i] /= sum;
}

static gimg_status parse_arg(const char *spec, const char *what, const char *s, double min,
                             double max, double *v)
{
    char w[256];
    snprintf(w, sizeof w, "kernel '%s': %s", spec, what);
    return gimg_cli_parse_double(w, s, min, max, v);
}

static gimg_status radius_of(const char *spec, double sigma, const char *arg, int *r)
{
    if (arg) {
        double v;
        gimg_status st = parse_arg(spec, "RADIUS", arg, 0, MAX_RADIUS, &v);
        if (st)
            return st;
        if (v != floor(v))
            return gimg_fail(GIMG_E_USAGE, "kernel '%s': RADIUS '%s' is not an integer", spec,
                             arg);
        *r = (int)v;
        return GIMG_OK;
    }
    double d = ceil(3 * sigma);
    if (d > MAX_RADIUS)
        return gimg_fail(GIMG_E_USAGE,
                         "kernel '%s': too large (radius %.0f; at most %d, a %dx%d kernel)",
                         spec, d, MAX_RADIUS, MAX_SIDE, MAX_SIDE);
    *r = (int)d;
    return GIMG_OK;
}

static gimg_status parse_named(const char *spec, gimg_kernel *k)
{
    char buf[128];
    if (strlen(spec) >= sizeof buf)
        return gimg_fail(GIMG_E_USAGE, "unknown kernel '%.40s...' (named kernels: %s)", spec,
                         gimg_kernel_names());
    strcpy(buf, spec);
    /* Blanks around a name are not part of it ("sobel " is sobel). */
    for (size_t n = strlen(buf); n > 0 && isspace((unsigned char)buf[n - 1]); n--)
        buf[n - 1] = '\0';
    char *args[4] = {0};
    int nargs = 0;
    char *p = strchr(buf, ':');
    while (p) {
        *p++ = '\0';
        if (nargs == 3)
            return gimg_fail(GIMG_E_USAGE, "kernel '%s': too many parameters", spec);
        args[nargs++] = p;
        p = strchr(p, ':');
    }
    const char *name = buf;
    gimg_status st;
    const fixed_kernel *f = find_fixed(name);
    int magnitude = !strcmp(name, "sobel") || !strcmp(name, "scharr") || !strcmp(name, "prewitt");
    const int max_args = !strcmp(name, "box") || !strcmp(name, "log") ? 1 : 2;
    if (f || magnitude) {
        if (nargs)
            return gimg_fail(GIMG_E_USAGE, "kernel '%s': '%s' takes no parameters", spec, name);
        if (f) {
            if ((st = alloc_kernel(k, f->w, f->h, spec)))
                return st;
            memcpy(k->taps, f->taps, sizeof f->taps);
            return plan_kernel(k);
        }
        char nx[160], ny[160];
        snprintf(nx, sizeof nx, "%s-x", name);
        snprintf(ny, sizeof ny, "%s-y", name);
        const fixed_kernel *gx = find_fixed(nx), *gy = find_fixed(ny);
        if ((st = alloc_kernel(k, 3, 3, spec)))
            return st;
        k->kind = GIMG_KERNEL_MAGNITUDE;
        k->taps_y = malloc(9 * sizeof(float));
        if (!k->taps_y)
            return gimg_fail(GIMG_E_NOMEM, "out of memory");
        memcpy(k->taps, gx->taps, sizeof gx->taps);
        memcpy(k->taps_y, gy->taps, sizeof gy->taps);
        return GIMG_OK;
    }
    if (strcmp(name, "box") && strcmp(name, "gaussian") && strcmp(name, "unsharp") &&
        strcmp(name, "log"))
        return gimg_fail(GIMG_E_USAGE, "unknown kernel '%s' (named kernels: %s)", name,
                         gimg_kernel_names());
    if (nargs < 1)
        return gimg_fail(GIMG_E_USAGE, "kernel '%s': '%s' needs a parameter (%s)", spec, name,
                         !strcmp(name, "box") ? "box:R" : !strcmp(name, "gaussian")
                             ? "gaussian:SIGMA[:RADIUS]" : !strcmp(name, "unsharp")
                             ? "unsharp:SIGMA[:AMOUNT]" : "log:SIGMA");
    if (nargs > max_args)
        return gimg_fail(GIMG_E_USAGE, "kernel '%s': too many parameters", spec);

    if (!strcmp(name, "box")) {
        double r;
        if ((st = parse_arg(spec, "R", args[0], 0, MAX_RADIUS, &r)))
            return st;
        if (r != floor(r))
            return gimg_fail(GIMG_E_USAGE, "kernel '%s': R '%s' is not an integer", spec, args[0]);
        int n = 2 * (int)r + 1;
        float b[MAX_SIDE];
        for (int i = 0; i < n; i++)
            b[i] = 1.0f / (float)n;
        return outer_kernel(k, spec, n, b);
    }

    double sigma;
    if ((st = parse_arg(spec, "SIGMA", args[0], 1e-3, 1000, &sigma)))
        return st;
    int r = 0;
    if ((st = radius_of(spec, sigma, !strcmp(name, "gaussian") ? args[1] : NULL, &r)))
        return st;
    int n = 2 * r + 1;
    double g[MAX_SIDE];
    gaussian_1d(sigma, r, g);
    if (!strcmp(name, "gaussian")) {
        float gf[MAX_SIDE];
        for (int i = 0; i < n; i++)
            gf[i] = (float)g[i];
        return outer_kernel(k, spec, n, gf);
    }
    if ((st = alloc_kernel(k, n, n, spec)))
        return st;
    if (!strcmp(name, "unsharp")) {
        /* in + AMOUNT * (in - gaussian(in)) */
        double amount = 1;
        if (args[1] && (st = parse_arg(spec, "AMOUNT", args[1], -1000, 1000, &amount)))
            return st;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                k->taps[i * n + j] = (float)((i == r && j == r ? 1 + amount : 0) - amount * g[i] * g[j]);
        return plan_kernel(k);
    }
    /* log: the Laplacian of the Gaussian, -1/(pi s^4) (1 - q) e^-q with
     * q = (x^2 + y^2) / 2s^2, made to sum to zero (a flat area gives 0);
     * negative at the centre, like laplacian. */
    double *t = malloc((size_t)n * n * sizeof *t), mean = 0;
    if (!t)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double q = ((double)(i - r) * (i - r) + (double)(j - r) * (j - r)) / (2 * sigma * sigma);
            mean += t[i * n + j] = -1 / (M_PI * sigma * sigma * sigma * sigma) * (1 - q) * exp(-q);
        }
    mean /= (double)n * n;
    for (int i = 0; i < n * n; i++)
        k->taps[i] = (float)(t[i] - mean);
    free(t);
    return plan_kernel(k);
}

/* ----------------------------------------------------------- custom kernels */

/* A flat list of n * n values (n >= 2) is an n x n kernel: the exact
 * square root of count, or 0 when count is not a square. */
static int flat_side(int count)
{
    int n = (int)lround(sqrt((double)count));
    return n >= 2 && n * n == count ? n : 0;
}

/* Divides the taps by their sum, unless the sum is zero within the taps'
 * own precision: each decimal tap is within 2^-24 of its value as a float,
 * so a sum under 1e-6 of the taps' magnitudes is a zero-sum kernel (an edge
 * detector such as "0.1 0.2 -0.3") whose true sum is 0, and dividing by the
 * rounding left over would blow it up. */
static void normalize_taps(gimg_kernel *k)
{
    const int n = k->width * k->height;
    double sum = 0, magnitude = 0;
    for (int t = 0; t < n; t++) {
        sum += k->taps[t];
        magnitude += fabs(k->taps[t]);
    }
    if (fabs(sum) <= 1e-6 * magnitude || sum == 1)
        return;
    for (int t = 0; t < n; t++) {
        k->taps[t] = (float)(k->taps[t] / sum);
        if (k->taps[t] == 0) /* a negative sum makes -0 of 0: keep +0, for the plan */
            k->taps[t] = 0;
    }
    k->divided_by = sum;
}

/* Rows of numbers: rows end at ';' or a newline; numbers are separated by
 * blanks or commas; '#' starts a comment to the end of the line (files).
 * One row with no ';' anywhere is a flat list (see gimg_conv.h): until a
 * ';' or a second row shows otherwise, the first row may hold up to
 * MAX_SIDE * MAX_SIDE values. */
gimg_status gimg_kernel_parse_text(const char *text, size_t len, const char *full_name,
                                   int correlate, int normalize, gimg_kernel *k)
{
    memset(k, 0, sizeof *k);
    /* Messages quote the specification, shortened. */
    char name[48];
    snprintf(name, sizeof name, "%s", full_name);
    if (strlen(full_name) >= sizeof name)
        memcpy(name + sizeof name - 4, "...", 4);
    size_t cap = 64, n = 0;
    float *v = malloc(cap * sizeof *v);
    if (!v)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    int w = 0, h = 0, in_row = 0;
    int number_before = 0; /* a number since the row's start or the last ',' */
    int saw_semicolon = 0; /* then no flat list: every row is a row */
    gimg_status st = GIMG_OK;
    size_t i = 0;
    while (i <= len && !st) {
        char ch = i < len ? text[i] : '\n';
        if (ch == '#') {
            while (i < len && text[i] != '\n')
                i++;
            continue;
        }
        if (ch == ';' || ch == '\n' || i == len) {
            if (ch == ';' && i < len)
                saw_semicolon = 1;
            if (in_row) {
                if (h == 0)
                    w = in_row;
                /* The first row was no flat list: it is a row, too wide. */
                if ((h > 0 || saw_semicolon) && w > MAX_SIDE)
                    st = gimg_fail(GIMG_E_USAGE, "kernel '%s': too large (more than %d columns)",
                                   name, MAX_SIDE);
                else if (h > 0 && in_row != w)
                    st = gimg_fail(GIMG_E_USAGE,
                                   "kernel '%s': ragged rows (row %d has %d values, row 1 has %d)",
                                   name, h + 1, in_row, w);
                if (++h > MAX_SIDE && !st)
                    st = gimg_fail(GIMG_E_USAGE, "kernel '%s': too large (more than %d rows)",
                                   name, MAX_SIDE);
            }
            in_row = 0;
            number_before = 0;
            i++;
            if (i > len)
                break;
            continue;
        }
        if (ch == ',') { /* "1,,2" or ", 1" would silently lose a value */
            if (!number_before) {
                st = gimg_fail(GIMG_E_USAGE, "kernel '%s': a ',' with no number before it (row %d)",
                               name, h + 1);
                break;
            }
            number_before = 0;
            i++;
            continue;
        }
        if (ch == ' ' || ch == '\t' || ch == '\r' || ch == '\f' || ch == '\v') {
            i++;
            continue;
        }
        size_t s = i;
        while (i < len && !strchr(" \t\r\n,;#\f\v", text[i]) && text[i] != '\0')
            i++;
        if (i == s) { /* an embedded NUL */
            st = gimg_fail(GIMG_E_USAGE, "kernel '%s': bad character at byte %zu", name, s);
            break;
        }
        char tok[64];
        size_t tl = i - s;
        if (tl >= sizeof tok) {
            st = gimg_fail(GIMG_E_USAGE, "kernel '%s': bad number '%.20s...' (row %d)", name,
                           text + s, h + 1);
            break;
        }
        memcpy(tok, text + s, tl);
        tok[tl] = '\0';
        double d;
        char what[128];
        snprintf(what, sizeof what, "kernel '%s': row %d", name, h + 1);
        if ((st = gimg_cli_parse_double(what, tok, -1e30, 1e30, &d))) {
            st = gimg_fail(GIMG_E_USAGE, "kernel '%s': bad number '%s' (row %d)", name, tok, h + 1);
            break;
        }
        const int may_be_flat = h == 0 && !saw_semicolon;
        if (++in_row > (may_be_flat ? MAX_SIDE * MAX_SIDE : MAX_SIDE)) {
            if (may_be_flat)
                st = gimg_fail(GIMG_E_USAGE,
                               "kernel '%s': too large (more than %d values, a %dx%d kernel)",
                               name, MAX_SIDE * MAX_SIDE, MAX_SIDE, MAX_SIDE);
            else
                st = gimg_fail(GIMG_E_USAGE, "kernel '%s': too large (more than %d columns)",
                               name, MAX_SIDE);
            break;
        }
        if (n == cap) {
            float *nv = realloc(v, 2 * cap * sizeof *nv);
            if (!nv) {
                st = gimg_fail(GIMG_E_NOMEM, "out of memory");
                break;
            }
            v = nv;
            cap *= 2;
        }
        v[n++] = (float)d;
        number_before = 1;
    }
    if (!st && h == 0)
        st = gimg_fail(GIMG_E_USAGE, "kernel '%s': empty kernel (no numbers)", name);
    if (!st && h == 1 && !saw_semicolon && flat_side(w)) {
        w = h = flat_side(w); /* v is row-major: the same values, n rows of n */
    } else if (!st && w > MAX_SIDE) {
        st = gimg_fail(GIMG_E_USAGE,
                       "kernel '%s': too large (one row of %d values: at most %d columns; "
                       "a flat list of n*n values is n x n)", name, w, MAX_SIDE);
    }
    if (!st) {
        char label[64]; /* "%.30s %dx%d" always fits; k->name keeps 47 bytes */
        snprintf(label, sizeof label, "%.30s %dx%d", name, w, h);
        st = alloc_kernel(k, w, h, label);
    }
    if (st) {
        free(v);
        return st;
    }
    /* Convolution: the kernel rotated by 180 degrees, its anchor with it. */
    for (int r = 0; r < h; r++)
        for (int c = 0; c < w; c++)
            k->taps[r * w + c] = correlate ? v[r * w + c] : v[(h - 1 - r) * w + (w - 1 - c)];
    if (!correlate) {
        k->anchor_x = w - 1 - k->anchor_x;
        k->anchor_y = h - 1 - k->anchor_y;
    }
    free(v);
    if (normalize)
        normalize_taps(k);
    return plan_kernel(k);
}

static gimg_status file_too_large(const char *path)
{
    return gimg_fail(GIMG_E_USAGE,
                     "kernel file '%.200s': too large (over %zu bytes, 64 a tap of the largest "
                     "kernel, %dx%d)", path, GIMG_KERNEL_MAX_FILE_BYTES, MAX_SIDE, MAX_SIDE);
}

/* Reads a kernel file ("-": standard input) into *text (malloc'd), no
 * further than GIMG_KERNEL_MAX_FILE_BYTES + 1 bytes: a longer file is
 * refused from its size when it has one, else as soon as it passes the
 * limit, so an endless stream costs a few milliseconds and 4 MB. */
static gimg_status read_kernel_file(const char *path, char **text, size_t *len)
{
    const size_t limit = GIMG_KERNEL_MAX_FILE_BYTES;
    *text = NULL;
    *len = 0;
    const int is_stdin = !strcmp(path, "-");
    const int fd = is_stdin ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return gimg_fail(GIMG_E_IO, "kernel file '%.200s': %s", path, strerror(errno));
    gimg_status st = GIMG_OK;
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        st = gimg_fail(GIMG_E_IO, "kernel file '%.200s': %s", path, strerror(errno));
    else if (S_ISDIR(sb.st_mode))
        st = gimg_fail(GIMG_E_IO, "kernel file '%.200s': %s", path, strerror(EISDIR));
    else if (S_ISREG(sb.st_mode) && (uint64_t)sb.st_size > limit)
        st = file_too_large(path);
    char *b = NULL;
    size_t cap = 0, n = 0;
    while (!st) {
        if (n == cap) {
            if (cap > limit) { /* limit + 1 bytes read: too long */
                st = file_too_large(path);
                break;
            }
            size_t ncap = cap ? 2 * cap : 64 * 1024;
            if (ncap > limit + 1)
                ncap = limit + 1;
            char *nb = realloc(b, ncap);
            if (!nb) {
                st = gimg_fail(GIMG_E_NOMEM, "out of memory");
                break;
            }
            b = nb;
            cap = ncap;
        }
        ssize_t r = read(fd, b + n, cap - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            st = gimg_fail(GIMG_E_IO, "kernel file '%.200s': read error: %s", path,
                           strerror(errno));
            break;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    if (!is_stdin)
        close(fd);
    if (st) {
        free(b);
        return st;
    }
    *text = b;
    *len = n;
    return GIMG_OK;
}

gimg_status gimg_kernel_parse(const char *spec, int correlate, int normalize, gimg_kernel *k)
{
    memset(k, 0, sizeof *k);
    while (isspace((unsigned char)*spec))
        spec++;
    if (*spec == '\0')
        return gimg_fail(GIMG_E_USAGE, "kernel '': empty kernel");
    if (isalpha((unsigned char)*spec))
        return parse_named(spec, k);
    if (*spec != '@')
        return gimg_kernel_parse_text(spec, strlen(spec), spec, correlate, normalize, k);
    if (spec[1] == '\0')
        return gimg_fail(GIMG_E_USAGE, "kernel '@': no file name after '@'");
    char *text;
    size_t len;
    gimg_status st = read_kernel_file(spec + 1, &text, &len);
    if (st)
        return st;
    if (len == 0)
        st = gimg_fail(GIMG_E_USAGE, "kernel '%.200s': empty kernel (empty file)", spec);
    else
        st = gimg_kernel_parse_text(text, len, spec, correlate, normalize, k);
    free(text);
    return st;
}
