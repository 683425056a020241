/*
 * parsers.h — the string parsers the fuzz targets exercise, one line each.
 *
 *   X(NAME, SEEDS, BODY...)
 *
 * NAME names the parser (and, in fuzz_cli, the option --NAME that feeds
 * it); SEEDS are valid strings, one per line, from which make_corpus writes
 * the seed corpus; BODY is statements that parse the NUL-terminated string
 * `s`, set `st` to the parser's status, check what the parser promises with
 * FUZZ_CHECK and release whatever it made. fuzz_parse feeds each parser
 * strings directly; fuzz_cli feeds them through gimg_cli_parse() as option
 * values.
 *
 * When a tool lands, its parsers get a line here (and their header an
 * #include below), for example:
 *   X(kernel, "gauss:2\n3x3:1,2,1,2,4,2,1,2,1", gimg_kernel k;
 *     st = gimg_kernel_parse(s, &k); if (!st) gimg_kernel_free(&k);)
 */
#ifndef GIMG_FUZZ_PARSERS_H
#define GIMG_FUZZ_PARSERS_H

#include "cli.h"
#include "fuzz.h"
#include "gimg_orient.h"
#include "gimg_stats.h"

#include <math.h>

#define FUZZ_PARSERS(X)                                                                        \
    X(orient_op, "transpose\nrot90\nflop",                                                     \
      gimg_orient_op op = GIMG_ORIENT_TRANSPOSE; st = gimg_orient_parse(s, &op);               \
      FUZZ_CHECK(st || strcmp(gimg_orient_name(op), s) == 0, "'%s' parsed as %s", s,          \
                 gimg_orient_name(op));)                                                       \
    X(device, "auto\ncpu\ngpu\ngpu:1\ngpu:0,3\ngpu:all",                                      \
      gimg_device d; st = gimg_parse_device(s, &d);                                            \
      FUZZ_CHECK(st || d.all_gpus || (d.n_gpus >= 1 && d.n_gpus <= GIMG_MAX_GPUS),             \
                 "%d GPUs", d.n_gpus);                                                         \
      for (int i = 0; !st && i < d.n_gpus; i++)                                                \
          FUZZ_CHECK(d.gpus[i] >= 0 && d.gpus[i] < GIMG_MAX_GPUS, "gpu index %d", d.gpus[i]);) \
    X(format_name, "png\nJPEG\npfm",                                                           \
      gimg_format f = gimg_format_from_name(s);                                                \
      FUZZ_CHECK(f == GIMG_FMT_UNKNOWN || gimg_format_from_name(gimg_format_name(f)) == f,     \
                 "format %d does not round-trip", (int)f);)                                    \
    X(format_path, "a/b.png\n.hidden\nx.tar.PGM",                                              \
      (void)gimg_format_from_path(s);)                                                         \
    X(int, "0\n-17\n+42\n999999999999999999999",                                               \
      long long v = 7; st = gimg_cli_parse_int("--n", s, -1000, 1000, &v);                     \
      FUZZ_CHECK(st ? v == 7 : (v >= -1000 && v <= 1000), "'%s' gave %lld", s, v);)            \
    X(u64, "0\n18446744073709551615\n-0",                                                      \
      uint64_t v = 7; st = gimg_cli_parse_u64("--n", s, 1, UINT64_MAX - 1, &v);                \
      FUZZ_CHECK(st ? v == 7 : (v >= 1 && v < UINT64_MAX), "'%s' gave %llu", s,                \
                 (unsigned long long)v);)                                                      \
    X(size, "512M\n1.5G\n25%\n65536\n2GiB",                                                  \
      uint64_t v = 7; st = gimg_cli_parse_size("--max-memory", s, &v);                          \
      FUZZ_CHECK(st ? v == 7 : (v >= 65536 && v <= (uint64_t)1 << 62), "'%s' gave %llu", s,    \
                 (unsigned long long)v);)                                                      \
    X(double, "1.5\n-2e-3\n.5\n1e308",                                                         \
      double v = 7; st = gimg_cli_parse_double("--x", s, -1e6, 1e6, &v);                       \
      FUZZ_CHECK(st ? v == 7 : (isfinite(v) && v >= -1e6 && v <= 1e6), "'%s' gave %g", s, v);)                                                                                   \
    X(threshold, "psnr<40\nred.maxdiff >= 2\nssim<0.99\nall.pixels_differing!=0\nmse=inf",    \
      gimg_threshold t; st = gimg_parse_threshold(s, &t);                                      \
      FUZZ_CHECK(st || ((unsigned)t.metric < GIMG_METRIC_N && (unsigned)t.op <= GIMG_OP_NE &&   \
                        !isnan(t.value) && t.channel[0]), "'%s' parsed badly", s);)            \
    X(region, "10x10+5+5\n3x4\n10x10-5-5",                                                     \
      gimg_region r; st = gimg_parse_region(s, &r);                                            \
      FUZZ_CHECK(st || (r.width >= 1 && r.height >= 1), "'%s' gave %dx%d", s, r.width,          \
                 r.height);)                                                                   \
    X(percentile, "5\n99.9\n100\n0",                                                           \
      gimg_percentile p; st = gimg_parse_percentile("--p", s, &p);                             \
      FUZZ_CHECK(st || p.millionths <= 100000000u, "'%s' gave %u", s, p.millionths);)

/* Defines parse_NAME(s) for every parser, returning its status, and
 * k_parsers[], their table in FUZZ_PARSERS's order. */
#define FUZZ_PARSER_FUNCTION(name, seeds, ...)                                 \
    static gimg_status parse_##name(const char *s)                             \
    {                                                                          \
        gimg_status st = GIMG_OK;                                              \
        __VA_ARGS__                                                            \
        return st;                                                             \
    }
#define FUZZ_PARSER_ENTRY(name, seeds, ...) parse_##name,
#define FUZZ_DEFINE_PARSERS                                                    \
    FUZZ_PARSERS(FUZZ_PARSER_FUNCTION)                                         \
    static gimg_status (*const k_parsers[])(const char *) = { FUZZ_PARSERS(FUZZ_PARSER_ENTRY) };

#endif
