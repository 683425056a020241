/*
 * plot.c — draws histograms as an image (ghist --plot): one filled curve
 * per channel in its colour, axes with "nice" ticks (1, 2 or 5 times a
 * power of ten) and their labels, a legend and a title, in an RGB 8-bit
 * image. Text is drawn with the 5x7 bitmap font below, doubled, so the
 * labels stay sharp in any viewer and no font library is needed.
 */
#include "gimg_hist.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------- font */

/* ASCII 32..126, 7 rows of 5 pixels each, bit 4 the leftmost. */
static const unsigned char k_font[95][7] = {
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, /*   */
    {0x04, 0x04, 0x04, 0x04, 0x04, 0x00, 0x04}, /* ! */
    {0x0A, 0x0A, 0x00, 0x00, 0x00, 0x00, 0x00}, /* " */
    {0x0A, 0x0A, 0x1F, 0x0A, 0x1F, 0x0A, 0x0A}, /* # */
    {0x04, 0x0F, 0x14, 0x0E, 0x05, 0x1E, 0x04}, /* $ */
    {0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03}, /* % */
    {0x08, 0x14, 0x14, 0x08, 0x15, 0x12, 0x0D}, /* & */
    {0x04, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00}, /* ' */
    {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02}, /* ( */
    {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08}, /* ) */
    {0x00, 0x04, 0x15, 0x0E, 0x15, 0x04, 0x00}, /* * */
    {0x00, 0x04, 0x04, 0x1F, 0x04, 0x04, 0x00}, /* + */
    {0x00, 0x00, 0x00, 0x00, 0x06, 0x04, 0x08}, /* , */
    {0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00}, /* - */
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C}, /* . */
    {0x01, 0x01, 0x02, 0x04, 0x08, 0x10, 0x10}, /* / */
    {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E}, /* 0 */
    {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E}, /* 1 */
    {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F}, /* 2 */
    {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E}, /* 3 */
    {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02}, /* 4 */
    {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E}, /* 5 */
    {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E}, /* 6 */
    {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08}, /* 7 */
    {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E}, /* 8 */
    {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C}, /* 9 */
    {0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x00}, /* : */
    {0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x04, 0x08}, /* ; */
    {0x02, 0x04, 0x08, 0x10, 0x08, 0x04, 0x02}, /* < */
    {0x00, 0x00, 0x1F, 0x00, 0x1F, 0x00, 0x00}, /* = */
    {0x08, 0x04, 0x02, 0x01, 0x02, 0x04, 0x08}, /* > */
    {0x0E, 0x11, 0x01, 0x02, 0x04, 0x00, 0x04}, /* ? */
    {0x0E, 0x11, 0x01, 0x0D, 0x15, 0x15, 0x0E}, /* @ */
    {0x0E, 0x11, 0x11, 0x11, 0x1F, 0x11, 0x11}, /* A */
    {0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E}, /* B */
    {0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E}, /* C */
    {0x1C, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1C}, /* D */
    {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F}, /* E */
    {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10}, /* F */
    {0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F}, /* G */
    {0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11}, /* H */
    {0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E}, /* I */
    {0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C}, /* J */
    {0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11}, /* K */
    {0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F}, /* L */
    {0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11}, /* M */
    {0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11}, /* N */
    {0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E}, /* O */
    {0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10}, /* P */
    {0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D}, /* Q */
    {0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11}, /* R */
    {0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E}, /* S */
    {0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04}, /* T */
    {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E}, /* U */
    {0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04}, /* V */
    {0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A}, /* W */
    {0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11}, /* X */
    {0x11, 0x11, 0x11, 0x0A, 0x04, 0x04, 0x04}, /* Y */
    {0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F}, /* Z */
    {0x0E, 0x08, 0x08, 0x08, 0x08, 0x08, 0x0E}, /* [ */
    {0x10, 0x10, 0x08, 0x04, 0x02, 0x01, 0x01}, /* \ */
    {0x0E, 0x02, 0x02, 0x02, 0x02, 0x02, 0x0E}, /* ] */
    {0x04, 0x0A, 0x11, 0x00, 0x00, 0x00, 0x00}, /* ^ */
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1F}, /* _ */
    {0x08, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00}, /* ` */
    {0x00, 0x00, 0x0E, 0x01, 0x0F, 0x11, 0x0F}, /* a */
    {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x1E}, /* b */
    {0x00, 0x00, 0x0E, 0x10, 0x10, 0x11, 0x0E}, /* c */
    {0x01, 0x01, 0x0D, 0x13, 0x11, 0x11, 0x0F}, /* d */
    {0x00, 0x00, 0x0E, 0x11, 0x1F, 0x10, 0x0E}, /* e */
    {0x06, 0x09, 0x08, 0x1C, 0x08, 0x08, 0x08}, /* f */
    {0x00, 0x00, 0x0F, 0x11, 0x0F, 0x01, 0x0E}, /* g */
    {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x11}, /* h */
    {0x04, 0x00, 0x0C, 0x04, 0x04, 0x04, 0x0E}, /* i */
    {0x02, 0x00, 0x06, 0x02, 0x02, 0x12, 0x0C}, /* j */
    {0x10, 0x10, 0x12, 0x14, 0x18, 0x14, 0x12}, /* k */
    {0x0C, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E}, /* l */
    {0x00, 0x00, 0x1A, 0x15, 0x15, 0x11, 0x11}, /* m */
    {0x00, 0x00, 0x16, 0x19, 0x11, 0x11, 0x11}, /* n */
    {0x00, 0x00, 0x0E, 0x11, 0x11, 0x11, 0x0E}, /* o */
    {0x00, 0x00, 0x1E, 0x11, 0x1E, 0x10, 0x10}, /* p */
    {0x00, 0x00, 0x0D, 0x13, 0x0F, 0x01, 0x01}, /* q */
    {0x00, 0x00, 0x16, 0x19, 0x10, 0x10, 0x10}, /* r */
    {0x00, 0x00, 0x0E, 0x10, 0x0E, 0x01, 0x1E}, /* s */
    {0x08, 0x08, 0x1C, 0x08, 0x08, 0x09, 0x06}, /* t */
    {0x00, 0x00, 0x11, 0x11, 0x11, 0x13, 0x0D}, /* u */
    {0x00, 0x00, 0x11, 0x11, 0x11, 0x0A, 0x04}, /* v */
    {0x00, 0x00, 0x11, 0x11, 0x15, 0x15, 0x0A}, /* w */
    {0x00, 0x00, 0x11, 0x0A, 0x04, 0x0A, 0x11}, /* x */
    {0x00, 0x00, 0x11, 0x11, 0x0F, 0x01, 0x0E}, /* y */
    {0x00, 0x00, 0x1F, 0x02, 0x04, 0x08, 0x1F}, /* z */
    {0x02, 0x04, 0x04, 0x08, 0x04, 0x04, 0x02}, /* { */
    {0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04}, /* | */
    {0x08, 0x04, 0x04, 0x02, 0x04, 0x04, 0x08}, /* } */
    {0x00, 0x00, 0x08, 0x15, 0x02, 0x00, 0x00}, /* ~ */
};

enum { SCALE = 2, GLYPH_W = 6 * SCALE, GLYPH_H = 7 * SCALE };

typedef struct { unsigned char r, g, b; } rgb;

typedef struct {
    gimg_image *im;
} canvas;

static void put(const canvas *cv, int x, int y, rgb c)
{
    if (x < 0 || y < 0 || x >= cv->im->width || y >= cv->im->height)
        return;
    unsigned char *p = gimg_row(cv->im, y) + 3 * (size_t)x;
    p[0] = c.r;
    p[1] = c.g;
    p[2] = c.b;
}

/* Blends colour c over the pixel with weight a (0-256). */
static void blend(const canvas *cv, int x, int y, rgb c, int a)
{
    if (x < 0 || y < 0 || x >= cv->im->width || y >= cv->im->height)
        return;
    unsigned char *p = gimg_row(cv->im, y) + 3 * (size_t)x;
    p[0] = (unsigned char)((p[0] * (256 - a) + c.r * a) >> 8);
    p[1] = (unsigned char)((p[1] * (256 - a) + c.g * a) >> 8);
    p[2] = (unsigned char)((p[2] * (256 - a) + c.b * a) >> 8);
}

static void fill(const canvas *cv, int x0, int y0, int x1, int y1, rgb c)
{
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++)
            put(cv, x, y, c);
}

/* Text, its top-left corner at (x, y); bytes outside ASCII print as '?'. */
static void text(const canvas *cv, int x, int y, const char *s, rgb c)
{
    for (; *s; s++, x += GLYPH_W) {
        unsigned ch = (unsigned char)*s;
        const unsigned char *g = k_font[(ch >= 32 && ch <= 126 ? ch : '?') - 32];
        for (int row = 0; row < 7; row++)
            for (int col = 0; col < 5; col++)
                if (g[row] & (0x10 >> col))
                    fill(cv, x + col * SCALE, y + row * SCALE, x + (col + 1) * SCALE,
                         y + (row + 1) * SCALE, c);
    }
}

static int text_width(const char *s)
{
    return (int)strlen(s) * GLYPH_W - SCALE;
}

/* ------------------------------------------------------------------- axes */

/* A tick step of 1, 2 or 5 times a power of ten giving about n ticks. */
static double nice_step(double span, int n)
{
    double raw = span / n, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

/* A tick label: counts with k/M/G suffixes, other values in %g. */
static void label(char *buf, size_t size, double v, int counts)
{
    const double a = fabs(v);
    if (counts && a >= 1e9)
        snprintf(buf, size, "%gG", v / 1e9);
    else if (counts && a >= 1e6)
        snprintf(buf, size, "%gM", v / 1e6);
    else if (counts && a >= 1e4)
        snprintf(buf, size, "%gk", v / 1e3);
    else
        snprintf(buf, size, "%.6g", fabs(v) < 1e-12 ? 0.0 : v);
}

static rgb colour_of(const char *name)
{
    static const struct { const char *name; rgb c; } k[] = {
        {"red", {215, 38, 38}},   {"green", {30, 150, 50}},   {"blue", {40, 80, 215}},
        {"gray", {70, 70, 70}},   {"alpha", {150, 95, 190}},  {"luma", {225, 140, 0}},
    };
    for (size_t i = 0; i < sizeof k / sizeof *k; i++)
        if (name && !strcmp(name, k[i].name))
            return k[i].c;
    return (rgb){0, 0, 0};
}

gimg_status gimg_hist_plot(const gimg_hist *h, unsigned mask, const char *const *names,
                           const gimg_hist_plot_opts *o, gimg_image *out)
{
    const int W = o->width > 0 ? o->width : 800, H = o->height > 0 ? o->height : 480;
    if (W < 200 || H < 150 || W > 8192 || H > 8192)
        return gimg_fail(GIMG_E_USAGE, "plot size %dx%d out of range (200x150 to 8192x8192)",
                         W, H);
    gimg_status st = gimg_image_alloc(out, W, H, 3, GIMG_U8);
    if (st)
        return st;
    const canvas cv = {out};
    const rgb white = {255, 255, 255}, black = {0, 0, 0}, grid = {225, 225, 225},
              dim = {90, 90, 90};
    fill(&cv, 0, 0, W, H, white);

    /* The plot area. */
    const int left = 14 + 7 * GLYPH_W, right = W - 24, top = 24 + 2 * GLYPH_H,
              bottom = H - 20 - 3 * GLYPH_H;
    const int pw = right - left, ph = bottom - top;

    /* Each column's value per channel: the highest of the bins it covers. */
    const double scale = o->normalize && o->pixels ? 1.0 / (double)o->pixels : 1.0;
    double ymax = 0;
    double *col = calloc((size_t)pw * GIMG_HIST_MAX_CHANNELS, sizeof *col);
    if (!col) {
        gimg_image_free(out);
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    }
    for (int c = 0; c < h->channels; c++) {
        if (!(mask & (1u << c)))
            continue;
        uint64_t run = h->below[c];
        int b = 0;
        for (int x = 0; x < pw; x++) {
            const int b_end = (int)(((int64_t)(x + 1) * h->bins + pw - 1) / pw);  /* exclusive */
            double v = 0;
            if (b >= b_end)  /* wider bins than columns: this column shows bin b - 1 */
                v = col[c * pw + x - 1];
            for (; b < b_end && b < h->bins; b++) {
                const uint64_t n = h->counts[(size_t)c * h->bins + b];
                run += n;
                const double y = (double)(o->cumulative ? run : n) * scale;
                if (y > v)
                    v = y;
            }
            col[c * pw + x] = v;
            if (v > ymax)
                ymax = v;
        }
    }
    if (ymax <= 0)
        ymax = 1;

    /* Grid and y ticks. */
    const int counts = !o->normalize;
    double ystep = nice_step(ymax, 5);
    if (counts && ystep < 1)
        ystep = 1;
    char buf[64];
    for (int k = 0; k * ystep <= ymax * 1.0000001; k++) {
        const int y = bottom - (int)lround(k * ystep / ymax * ph);
        if (k)
            fill(&cv, left + 1, y, right, y + 1, grid);
        fill(&cv, left - 6, y, left, y + 1, black);
        label(buf, sizeof buf, k * ystep, counts);
        text(&cv, left - 10 - text_width(buf), y - GLYPH_H / 2, buf, black);
    }
    /* x ticks over [lo, hi]. */
    const double xspan = h->hi - h->lo, xstep = nice_step(xspan, 6);
    for (double v = ceil(h->lo / xstep) * xstep; v <= h->hi + xstep * 1e-9; v += xstep) {
        const int x = left + (int)lround((v - h->lo) / xspan * pw);
        fill(&cv, x, bottom, x + 1, bottom + 6, black);
        label(buf, sizeof buf, v, 0);
        int tx = x - text_width(buf) / 2;
        if (tx + text_width(buf) > W - 2)
            tx = W - 2 - text_width(buf);
        text(&cv, tx, bottom + 10, buf, black);
    }

    /* The curves: a light fill under each, then its outline. */
    for (int c = 0; c < h->channels; c++) {
        if (!(mask & (1u << c)))
            continue;
        const rgb cc = colour_of(names[c]);
        for (int x = 0; x < pw; x++) {
            const int y = bottom - (int)lround(col[c * pw + x] / ymax * ph);
            for (int yy = y; yy < bottom; yy++)
                blend(&cv, left + x, yy, cc, 56);
        }
    }
    for (int c = 0; c < h->channels; c++) {
        if (!(mask & (1u << c)))
            continue;
        const rgb cc = colour_of(names[c]);
        int prev = bottom - (int)lround(col[c * pw] / ymax * ph);
        for (int x = 0; x < pw; x++) {
            const int y = bottom - (int)lround(col[c * pw + x] / ymax * ph);
            const int y0 = y < prev ? y : prev, y1 = y < prev ? prev : y;
            for (int yy = y0; yy <= y1; yy++) {
                put(&cv, left + x, yy, cc);
                put(&cv, left + x, yy - 1, cc);
            }
            prev = y;
        }
    }
    free(col);

    /* Axes, title, axis names, legend. */
    fill(&cv, left, top, left + 1, bottom + 1, black);
    fill(&cv, left, bottom, right + 1, bottom + 1, black);
    if (o->title) {
        char t[128];
        snprintf(t, sizeof t, "%s", o->title);
        const int max_chars = (W - 20) / GLYPH_W;
        if ((int)strlen(t) > max_chars && max_chars > 3) {
            memmove(t + 3, t + strlen(t) - (max_chars - 3), (size_t)max_chars - 2);
            memcpy(t, "...", 3);
        }
        text(&cv, (W - text_width(t)) / 2, 12, t, black);
    }
    const char *xname = "sample value";
    text(&cv, left + (pw - text_width(xname)) / 2, H - 8 - GLYPH_H, xname, dim);
    const char *yname = o->cumulative ? (o->normalize ? "cumulative fraction" : "cumulative count")
                                      : (o->normalize ? "fraction" : "count");
    text(&cv, 8, top - GLYPH_H - 8, yname, dim);
    int ly = top + 8, widest = 0, n_names = 0;
    for (int c = 0; c < h->channels; c++)
        if ((mask & (1u << c)) && names[c]) {
            n_names++;
            if (text_width(names[c]) > widest)
                widest = text_width(names[c]);
        }
    if (n_names)  /* a white box, so the curves do not run through the names */
        fill(&cv, right - 14 - widest - 2 * GLYPH_H, ly - 6, right - 2,
             ly + n_names * (GLYPH_H + 6), white);
    for (int c = 0; c < h->channels; c++) {
        if (!(mask & (1u << c)) || !names[c])
            continue;
        const int lx = right - 8 - text_width(names[c]) - 2 * GLYPH_H;
        fill(&cv, lx, ly, lx + GLYPH_H, ly + GLYPH_H, colour_of(names[c]));
        text(&cv, lx + GLYPH_H + GLYPH_W / 2, ly, names[c], black);
        ly += GLYPH_H + 6;
    }
    return GIMG_OK;
}
