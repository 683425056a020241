/*
 * cli.h — the command-line layer shared by the gimg tools.
 *
 * One option table drives both the parsing and the --help text, so the two
 * cannot drift apart. A tool describes itself with a gimg_cli_spec (its name,
 * a one-line description, its own options and a handler for them);
 * gimg_cli_parse() adds the options every tool has and fills a
 * gimg_cli_common:
 *
 *   -o FILE, -f/--format FMT, --quality N, --png-level N,
 *   --device auto|cpu|gpu|gpu:N, --codecs auto|cpu, --max-pixels N,
 *   --max-memory SIZE,
 *   -v/--verbose, -q/--quiet, -h/--help, --version
 *
 * --band-rows N for tools that read large images in bands
 * (spec.with = GIMG_CLI_WITH_BANDS),
 *
 * and, for tools that take many inputs (spec.with = GIMG_CLI_WITH_BATCH),
 *
 *   -j/--jobs N, --files-from FILE, -0/--null, --fail-fast, --progress,
 *   --no-progress
 *
 * Parsing is GNU-style: "--name=value", "--name value", "-o value",
 * "-ovalue", bundled short flags ("-vq"), options and operands in any order,
 * "--" ends the options, and a lone "-" is an operand (stdin or stdout).
 * Long options must be spelt out in full (no abbreviations), so that adding
 * an option never breaks a script; an unknown one is an error that names
 * the options meant ("unknown option '--verb' (did you mean --verbose?)"):
 * those it is the start of, else the nearest by edit distance, else a
 * renamed option's new name (gimg_cli_spec.renamed).
 *
 * With no operand where an INPUT is needed, no --files-from, and standard
 * input not a terminal, the input is standard input ("-"), as for netpbm's
 * filters: "... | gtranspose --op rot90 >out.pam". At a terminal it is
 * still "missing operand".
 *
 * Errors follow libgimg's convention: a function that fails records one
 * message (gimg_last_error()) and returns a gimg_status; every command-line
 * mistake is GIMG_E_USAGE (exit status 2). Only gimg_cli_done(),
 * gimg_cli_error(), gimg_cli_print_help(), gimg_cli_print_version() and
 * gimg_cli_close_stdout() print; nothing here exits.
 *
 * Ownership: nothing here allocates. Every string gimg_cli_parse() stores
 * (input, output, operands, option arguments passed to handlers) points into
 * argv, which must outlive its use. The spec and its tables belong to the
 * tool (normally static const data).
 *
 * A tool's main() is typically:
 *
 *   gimg_cli_common c;
 *   int rc = gimg_cli_done(&spec, &c, gimg_cli_parse(&spec, argc, argv, &c));
 *   if (rc >= 0)
 *       return rc;             (usage error, --help or --version handled)
 *   ... work; on failure: return gimg_cli_error(tool, path, st);
 *   return gimg_cli_close_stdout(tool);
 */
#ifndef GIMG_CLI_H
#define GIMG_CLI_H

#include "gimg.h"

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One entry of an option table. A table ends with an entry whose long_name
 * and short_name are both 0. */
typedef struct {
    const char *long_name; /* without the leading "--"; NULL for a short-only option */
    int short_name;        /* the letter after "-", or 0 for a long-only option */
    const char *metavar;   /* the argument's name in --help ("FILE"); NULL for a flag */
    const char *help;      /* one sentence, no final period; wrapped by --help */
    int key;               /* passed to the tool's handler; >= 0 (negative keys are the
                              common options') */
} gimg_cli_option;

/* Called once per occurrence of one of the tool's options, in command-line
 * order; arg is NULL for a flag. Returns GIMG_OK, or records a message and
 * returns GIMG_E_USAGE for a bad value (e.g. with gimg_cli_parse_int). */
typedef gimg_status (*gimg_cli_handler)(void *user, int key, const char *arg);

/* Common options a tool may leave out of its command line (spec.omit). */
enum {
    GIMG_CLI_NO_WRITE_OPTS = 1 << 0, /* -f/--format, --quality, --png-level */
    GIMG_CLI_NO_DEVICE = 1 << 1,     /* --device (and GIMG_DEVICE is not read) */
    GIMG_CLI_NO_OUTPUT = 1 << 2,     /* -o */
    GIMG_CLI_NO_OPERANDS = 1 << 3    /* no operand at all (gimgd) */
};

/* Common options a tool may add (spec.with). */
enum {
    GIMG_CLI_WITH_BATCH = 1 << 0, /* many inputs: -j/--jobs, --files-from, -0/--null,
                                     --fail-fast, --progress, --no-progress; with -o
                                     every operand is an input */
    GIMG_CLI_WITH_BANDS = 1 << 1  /* --band-rows: large images read in bands (band.h) */
};

typedef struct {
    const char *tool;              /* "gtranspose" */
    const char *description;       /* one line for --help */
    const char *operands;          /* usage's operand part; NULL = "INPUT [OUTPUT]" */
    int min_operands, max_operands; /* both 0 = 1 and 2 (INPUT [OUTPUT]); max -1 =
                                       no limit. With max >= 2 the second operand is
                                       the output (an alternative to -o) */
    const gimg_cli_option *options; /* the tool's own options; NULL if none */
    gimg_cli_handler handle;       /* required when options has entries */
    void *user;                    /* passed to handle */
    unsigned omit;                 /* GIMG_CLI_NO_* */
    unsigned with;                 /* GIMG_CLI_WITH_* */
    const char *epilogue;          /* optional lines printed after the options */
    const char *const *renamed;    /* optional: pairs of long names {old, new, ...,
                                      NULL}: old is unknown, its message names new */
} gimg_cli_spec;

typedef enum {
    GIMG_CLI_RUN = 0, /* do the work */
    GIMG_CLI_HELP,    /* -h/--help was given: print help, exit 0 */
    GIMG_CLI_VERSION  /* --version was given: print the version, exit 0 */
} gimg_cli_action;

/* The first call of every tool's main (before any thread starts): on a
 * busy machine (half its CPUs or more have other threads to run), where
 * neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set, sets
 * OMP_WAIT_POLICY=passive and starts the program again with it, as it was
 * started (execv of /proc/self/exe: the same process, its descriptors
 * kept). libgomp reads the policy once, before main; by default an idle
 * thread spins for a while (300000 turns of a pause loop, milliseconds)
 * after every parallel region, which is free on an idle machine and ruins
 * a loaded one: samples/Makefile with make -j16 on a 16-core host took
 * 13.4 s with the spin and 4.6 s without it (cli.c has the figures).
 * Returns only when it did not start again: an idle machine, a policy of
 * the user's, a program run under valgrind (which would not follow it),
 * or no /proc. */
void gimg_cli_settle_threads(char **argv);

/* The settings every tool has. Filled by gimg_cli_parse(). */
typedef struct {
    gimg_cli_action action;
    const char *input;       /* first operand ("-" = stdin); NULL if none */
    const char *output;      /* -o FILE, else the second operand, else "-" (stdout) */
    int output_is_operand;   /* 1: output is the second operand (OUTPUT), not -o's */
    gimg_write_opts write;   /* -f, --quality, --png-level; format UNKNOWN if no -f */
    gimg_device device;      /* --device, else $GIMG_DEVICE, else auto; with --codecs */
    int cpu_codecs;          /* --codecs cpu (copied into device.cpu_codecs) */
    int no_server;           /* --no-server (copied into device.no_server) */
    uint64_t max_pixels;     /* --max-pixels; already passed to gimg_set_max_pixels() */
    uint64_t max_memory;     /* --max-memory, 0 if not given (the default); already
                                passed to gimg_set_max_memory() */
    int band_rows;           /* GIMG_CLI_WITH_BANDS: --band-rows, else 0 (the default
                                bands, gimg_band_rows) */
    int verbose;             /* -v: report backend and timings on stderr */
    int quiet;               /* -q: no warnings on stderr */
    /* GIMG_CLI_WITH_BATCH only: */
    int jobs;                /* -j; default: the CPU count */
    const char *files_from;  /* --files-from FILE, or NULL */
    int null_separated;      /* -0 */
    int fail_fast;           /* --fail-fast */
    int progress;            /* --progress 1, --no-progress 0, default -1 (a terminal) */
    int n_inputs;            /* the operands that are inputs: operands[0 .. n_inputs-1] */
    int n_operands;
    char **operands;         /* all operands in order: argv reordered in place, see
                                gimg_cli_parse() */
} gimg_cli_common;

/* Parses argv against spec's options and the common ones; fills *c (always,
 * defaults first, even on failure). Stops at the first mistake and returns
 * GIMG_E_USAGE with its message, e.g. "unknown option '--frob'". When -h/--help
 * or --version is seen, c->action says so and the operand count is not
 * checked (so "gtranspose --help" works alone). Reorders the pointers in argv
 * (not the strings) so that the operands come first, from argv[1], as GNU
 * getopt does; c->operands points there. On GIMG_CLI_RUN it also calls
 * gimg_set_max_pixels(c->max_pixels). */
gimg_status gimg_cli_parse(const gimg_cli_spec *spec, int argc, char **argv,
                           gimg_cli_common *c);

/* Acts on gimg_cli_parse()'s result: on a failure prints the usage error (see
 * gimg_cli_error) and returns 2; on --help or --version prints to stdout and
 * returns 0 (1 if stdout cannot be written); otherwise returns -1: go on. */
int gimg_cli_done(const gimg_cli_spec *spec, const gimg_cli_common *c, gimg_status st);

/* Prints "Usage: TOOL [options] OPERANDS", the description, the tool's
 * options and the common options, aligned and wrapped to 80 columns. */
void gimg_cli_print_help(const gimg_cli_spec *spec, FILE *f);
/* Writes "Usage: TOOL [options] OPERANDS" (no newline) into buf, truncated to
 * size; returns the length it needed, like snprintf. */
int gimg_cli_usage_line(const gimg_cli_spec *spec, char *buf, size_t size);
/* Prints "TOOL (gimg) VERSION" and whether this build has CUDA. */
void gimg_cli_print_version(const gimg_cli_spec *spec, FILE *f);

/* Prints "tool: file: <gimg_last_error()>" to stderr, or "tool: <message>"
 * when file is NULL (name "-" with gimg_cli_name first). For GIMG_E_USAGE it
 * adds "Try 'tool --help'.". Returns the exit status for st (gimg_exit_code). */
int gimg_cli_error(const char *tool, const char *file, gimg_status st);
/* How messages name a path: "standard input" / "standard output" for "-"
 * (is_output picks which), otherwise path, its control characters escaped
 * as `ls -b` does (in per-thread storage that holds a few at a time). */
const char *gimg_cli_name(const char *path, int is_output);
/* Closes stdout and checks it, so that a failed final write (a full disk, a
 * closed pipe) is not lost: returns 0, or prints "tool: standard output:
 * <reason>" and returns 1. Call once, at the very end. */
int gimg_cli_close_stdout(const char *tool);

/* Range-checked numbers. s must be the whole number: no leading blanks, no
 * trailing junk, base 10, an optional sign; what names it in the message
 * (e.g. "--quality"). On failure *out is unchanged and the status is
 * GIMG_E_USAGE with a message such as "--quality: '150' is out of range
 * (1 to 100)" or "--quality: 'ten' is not an integer". */
gimg_status gimg_cli_parse_int(const char *what, const char *s, long long min, long long max,
                               long long *out);
gimg_status gimg_cli_parse_u64(const char *what, const char *s, uint64_t min, uint64_t max,
                               uint64_t *out);
/* Doubles: also decimal point and exponent ("1.5e3"); NaN, infinities and
 * hexadecimal floats are rejected. */
gimg_status gimg_cli_parse_double(const char *what, const char *s, double min, double max,
                                  double *out);
/* Byte sizes (--max-memory): a decimal number, then K, M, G or T (powers
 * of 1024, alone or followed by "B" or "iB"), or "%" of the machine's
 * memory (twice gimg_default_max_memory); 64 KiB to 2^62 bytes. */
gimg_status gimg_cli_parse_size(const char *what, const char *s, uint64_t *out);

#ifdef __cplusplus
}
#endif
#endif /* GIMG_CLI_H */
