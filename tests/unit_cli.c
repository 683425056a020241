/*
 * unit_cli — tests of lib/cli.c: the parsing forms, operand handling, the
 * common options, number parsing, GIMG_DEVICE, the help text and the
 * error printing.
 */
#include "check.h"
#include "cli.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A mutable argv from string literals, with argv[0] = "tool". */
#define ARGV(...) ((char *[]){"tool", __VA_ARGS__, NULL})
#define ARGC(...) ((int)(sizeof((char *[]){"tool", __VA_ARGS__}) / sizeof(char *)))
#define PARSE(c, ...) gimg_cli_parse(&g_spec, ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), (c))

enum { K_OP = 1, K_LEVEL, K_FAST, K_X };

static const gimg_cli_option k_opts[] = {
    {"op", 0, "OP", "the operation", K_OP},
    {"level", 'l', "N", "a level, 0 to 9", K_LEVEL},
    {"fast", 'F', NULL, "go fast", K_FAST},
    {NULL, 'x', NULL, "a short-only flag", K_X},
    {NULL, 0, NULL, NULL, 0},
};

static struct {
    const char *op;
    long long level;
    int fast, x, calls;
} g_seen;

static gimg_status handler(void *user, int key, const char *arg)
{
    (void)user;
    g_seen.calls++;
    switch (key) {
    case K_OP:
        if (strcmp(arg, "bad") == 0)
            return gimg_fail(GIMG_E_USAGE, "unknown operation '%s'", arg);
        g_seen.op = arg;
        return GIMG_OK;
    case K_LEVEL:
        return gimg_cli_parse_int("--level", arg, 0, 9, &g_seen.level);
    case K_FAST:
        g_seen.fast++;
        return GIMG_OK;
    case K_X:
        g_seen.x++;
        return GIMG_OK;
    }
    return GIMG_OK;
}

static gimg_cli_spec g_spec = {
    .tool = "tool",
    .description = "Does a thing to an image.",
    .options = k_opts,
    .handle = handler,
};

static void reset(void)
{
    memset(&g_seen, 0, sizeof g_seen);
    g_seen.level = -1;
    unsetenv("GIMG_DEVICE");
}

static int has(const char *haystack, const char *needle)
{
    return strstr(haystack, needle) != NULL;
}

static void test_long_forms(void)
{
    gimg_cli_common c;
    reset();
    CHECK(PARSE(&c, "--op=rot90", "in") == GIMG_OK, "%s", gimg_last_error());
    CHECK(g_seen.op && !strcmp(g_seen.op, "rot90"), "op %s", g_seen.op);
    reset();
    CHECK(PARSE(&c, "--op", "flip", "in") == GIMG_OK, "%s", gimg_last_error());
    CHECK(g_seen.op && !strcmp(g_seen.op, "flip"), "op %s", g_seen.op);
    CHECK(c.n_operands == 1 && !strcmp(c.input, "in"), "operands %d", c.n_operands);
    reset();
    /* An empty value after '=' is the value "", passed on to be judged. */
    CHECK(PARSE(&c, "--op=", "in") == GIMG_OK, "%s", gimg_last_error());
    CHECK(g_seen.op && !strcmp(g_seen.op, ""), "op '%s'", g_seen.op);
    reset();
    /* A required argument takes the next word even when it starts with '-'. */
    CHECK(PARSE(&c, "--level", "-3", "in") == GIMG_E_USAGE, "negative level accepted");
    CHECK(has(gimg_last_error(), "out of range"), "%s", gimg_last_error());
    reset();
    CHECK(PARSE(&c, "--op", "--fast", "in") == GIMG_OK, "%s", gimg_last_error());
    CHECK(g_seen.op && !strcmp(g_seen.op, "--fast") && !g_seen.fast, "op %s", g_seen.op);
    reset();
    CHECK(PARSE(&c, "--fast", "--format=png", "--quality=50", "in") == GIMG_OK, "%s",
          gimg_last_error());
    CHECK(g_seen.fast == 1 && c.write.format == GIMG_FMT_PNG && c.write.quality == 50,
          "fast %d format %d quality %d", g_seen.fast, c.write.format, c.write.quality);
}

static void test_short_forms(void)
{
    gimg_cli_common c;
    reset();
    CHECK(PARSE(&c, "-o", "out.png", "in") == GIMG_OK, "%s", gimg_last_error());
    CHECK(!strcmp(c.output, "out.png"), "output %s", c.output);
    reset();
    CHECK(PARSE(&c, "-oout.png", "in") == GIMG_OK, "%s", gimg_last_error());
    CHECK(!strcmp(c.output, "out.png"), "output %s", c.output);
    reset();
    CHECK(PARSE(&c, "-l7", "in") == GIMG_OK && g_seen.level == 7, "level %lld", g_seen.level);
    reset();
    CHECK(PARSE(&c, "-l", "3", "in") == GIMG_OK && g_seen.level == 3, "level %lld",
          g_seen.level);
    reset();
    CHECK(PARSE(&c, "-fjpg", "in") == GIMG_OK && c.write.format == GIMG_FMT_JPEG, "format %d",
          c.write.format);
    reset();
    CHECK(PARSE(&c, "-f", "pam", "in") == GIMG_OK && c.write.format == GIMG_FMT_PAM,
          "format %d", c.write.format);
}

static void test_bundled_flags(void)
{
    gimg_cli_common c;
    reset();
    CHECK(PARSE(&c, "-Fxv", "in") == GIMG_OK, "%s", gimg_last_error());
    CHECK(g_seen.fast == 1 && g_seen.x == 1 && c.verbose == 1, "fast %d x %d v %d", g_seen.fast,
          g_seen.x, c.verbose);
    /* The last letter may take an argument, from the same word or the next. */
    reset();
    CHECK(PARSE(&c, "-vFl5", "in") == GIMG_OK, "%s", gimg_last_error());
    CHECK(c.verbose && g_seen.fast == 1 && g_seen.level == 5, "v %d fast %d level %lld",
          c.verbose, g_seen.fast, g_seen.level);
    reset();
    CHECK(PARSE(&c, "-vo", "out.pam", "in") == GIMG_OK, "%s", gimg_last_error());
    CHECK(c.verbose && !strcmp(c.output, "out.pam"), "output %s", c.output);
    /* Letters after an argument-taking letter are its argument, not flags. */
    reset();
    CHECK(PARSE(&c, "-ovx", "in") == GIMG_OK, "%s", gimg_last_error());
    CHECK(!strcmp(c.output, "vx") && !c.verbose && !g_seen.x, "output %s", c.output);
    /* -q after -v wins, and the other way round. */
    reset();
    CHECK(PARSE(&c, "-vq", "in") == GIMG_OK && c.quiet && !c.verbose, "q %d v %d", c.quiet,
          c.verbose);
    reset();
    CHECK(PARSE(&c, "-qv", "in") == GIMG_OK && !c.quiet && c.verbose, "q %d v %d", c.quiet,
          c.verbose);
}

static void test_double_dash_and_lone_dash(void)
{
    gimg_cli_common c;
    reset();
    CHECK(PARSE(&c, "-v", "--", "-in", "--out") == GIMG_OK, "%s", gimg_last_error());
    CHECK(c.verbose && c.n_operands == 2, "operands %d", c.n_operands);
    CHECK(c.input && !strcmp(c.input, "-in"), "input %s", c.input);
    CHECK(!strcmp(c.output, "--out"), "output %s", c.output);
    reset();
    CHECK(PARSE(&c, "-", "-") == GIMG_OK, "%s", gimg_last_error());
    CHECK(c.input && !strcmp(c.input, "-") && !strcmp(c.output, "-"), "in %s out %s", c.input,
          c.output);
    reset();
    CHECK(PARSE(&c, "-") == GIMG_OK, "%s", gimg_last_error());
    CHECK(c.input && !strcmp(c.input, "-") && !strcmp(c.output, "-"), "default output %s",
          c.output);
    reset();
    /* After "--", "--" itself is an operand. */
    CHECK(PARSE(&c, "--", "--", "x") == GIMG_OK, "%s", gimg_last_error());
    CHECK(c.input && !strcmp(c.input, "--") && !strcmp(c.output, "x"), "in %s out %s", c.input,
          c.output);
}

static void test_operands_anywhere(void)
{
    gimg_cli_common c;
    char *argv[] = {"tool", "in.png", "--op", "rot90", "out.png", "-v", NULL};
    reset();
    CHECK(gimg_cli_parse(&g_spec, 6, argv, &c) == GIMG_OK, "%s", gimg_last_error());
    CHECK(c.input && !strcmp(c.input, "in.png") && !strcmp(c.output, "out.png"), "in %s out %s",
          c.input, c.output);
    CHECK(c.verbose && g_seen.op && !strcmp(g_seen.op, "rot90"), "verbose %d", c.verbose);
    /* Operands end up first in argv, in order. */
    CHECK(c.operands == argv + 1 && !strcmp(argv[1], "in.png") && !strcmp(argv[2], "out.png"),
          "argv %s %s", argv[1], argv[2]);
}

static void test_unknown_options(void)
{
    gimg_cli_common c;
    reset();
    CHECK(PARSE(&c, "--frob", "in") == GIMG_E_USAGE, "accepted --frob");
    CHECK(!strcmp(gimg_last_error(), "unknown option '--frob'"), "%s", gimg_last_error());
    reset();
    CHECK(PARSE(&c, "--frob=3", "in") == GIMG_E_USAGE, "accepted --frob=3");
    CHECK(!strcmp(gimg_last_error(), "unknown option '--frob'"), "%s", gimg_last_error());
    reset();
    CHECK(PARSE(&c, "-Z", "in") == GIMG_E_USAGE, "accepted -Z");
    CHECK(!strcmp(gimg_last_error(), "unknown option '-Z'"), "%s", gimg_last_error());
    reset();
    CHECK(PARSE(&c, "-vZ", "in") == GIMG_E_USAGE, "accepted -vZ");
    CHECK(has(gimg_last_error(), "'-Z'"), "%s", gimg_last_error());
    /* No abbreviations: adding an option must never change an old command. */
    reset();
    CHECK(PARSE(&c, "--verb", "in") == GIMG_E_USAGE, "accepted --verb");
    reset();
    /* A flag given a value. */
    CHECK(PARSE(&c, "--verbose=yes", "in") == GIMG_E_USAGE, "accepted --verbose=yes");
    CHECK(has(gimg_last_error(), "--verbose") && has(gimg_last_error(), "no argument"), "%s",
          gimg_last_error());
    /* The first mistake is the one reported; later ones are not reached. */
    reset();
    CHECK(PARSE(&c, "--bogus", "--help") == GIMG_E_USAGE, "--help hid an earlier error");
}

static void test_missing_argument(void)
{
    gimg_cli_common c;
    reset();
    CHECK(PARSE(&c, "in", "--op") == GIMG_E_USAGE, "accepted --op without value");
    CHECK(has(gimg_last_error(), "'--op'") && has(gimg_last_error(), "argument"), "%s",
          gimg_last_error());
    reset();
    CHECK(PARSE(&c, "in", "-o") == GIMG_E_USAGE, "accepted -o without value");
    CHECK(has(gimg_last_error(), "'-o'") && has(gimg_last_error(), "argument"), "%s",
          gimg_last_error());
    reset();
    CHECK(PARSE(&c, "in", "-vl") == GIMG_E_USAGE, "accepted -vl without value");
    reset();
    CHECK(PARSE(&c, "in", "--quality") == GIMG_E_USAGE, "accepted --quality without value");
    reset();
    CHECK(PARSE(&c, "in", "-o", "") == GIMG_E_USAGE, "accepted an empty -o");
}

/* Standard input as a terminal (a pseudo-terminal's far end) or as
 * /dev/null, for the rule that a missing INPUT is standard input unless it
 * is a terminal. Returns the old standard input to give back to
 * restore_stdin, or -1 (nothing changed) when there is no such device. */
static int stdin_from(int terminal)
{
    int fd = -1;
    if (terminal) {
        int master = posix_openpt(O_RDWR | O_NOCTTY);
        if (master < 0 || grantpt(master) || unlockpt(master) || !ptsname(master))
            return -1; /* the master stays open: the terminal must live */
        fd = open(ptsname(master), O_RDWR | O_NOCTTY);
    } else {
        fd = open("/dev/null", O_RDONLY);
    }
    int saved = fd < 0 ? -1 : dup(STDIN_FILENO);
    if (saved >= 0 && dup2(fd, STDIN_FILENO) < 0) {
        close(saved);
        saved = -1;
    }
    if (fd >= 0)
        close(fd);
    return saved;
}

static void restore_stdin(int saved)
{
    if (saved >= 0) {
        dup2(saved, STDIN_FILENO);
        close(saved);
    }
}

static void test_missing_operand_at_terminal(void)
{
    gimg_cli_common c;
    int saved = stdin_from(1);
    if (saved < 0)
        SKIP("no pseudo-terminal to make standard input");
    reset();
    CHECK(PARSE(&c, "-v") == GIMG_E_USAGE, "accepted no operand at a terminal");
    CHECK(has(gimg_last_error(), "missing operand"), "%s", gimg_last_error());
    restore_stdin(saved);
}

static void test_operand_counts(void)
{
    gimg_cli_common c;
    reset();
    CHECK(PARSE(&c, "a", "b", "c") == GIMG_E_USAGE, "accepted three operands");
    CHECK(!strcmp(gimg_last_error(), "extra operand 'c'"), "%s", gimg_last_error());
    reset();
    CHECK(PARSE(&c, "-o", "x", "a", "b") == GIMG_E_USAGE, "accepted -o and an OUTPUT operand");
    reset();
    CHECK(PARSE(&c, "-o", "x", "a") == GIMG_OK && !strcmp(c.output, "x"), "%s",
          gimg_last_error());
    reset();
    CHECK(PARSE(&c, "") == GIMG_E_USAGE, "accepted an empty input name");
    /* A tool with its own operand rules. */
    gimg_cli_spec spec = g_spec;
    spec.operands = "INPUT...";
    spec.min_operands = 1;
    spec.max_operands = -1;
    char *argv[] = {"tool", "a", "b", "c", "d", NULL};
    reset();
    CHECK(gimg_cli_parse(&spec, 5, argv, &c) == GIMG_OK && c.n_operands == 4, "n %d: %s",
          c.n_operands, gimg_last_error());
}

static void test_help_and_version_actions(void)
{
    gimg_cli_common c;
    reset();
    CHECK(PARSE(&c, "--help") == GIMG_OK && c.action == GIMG_CLI_HELP, "action %d", c.action);
    reset();
    CHECK(PARSE(&c, "-h") == GIMG_OK && c.action == GIMG_CLI_HELP, "action %d", c.action);
    reset();
    CHECK(PARSE(&c, "a", "b", "c", "--help") == GIMG_OK && c.action == GIMG_CLI_HELP,
          "operand count checked with --help");
    reset();
    CHECK(PARSE(&c, "--version") == GIMG_OK && c.action == GIMG_CLI_VERSION, "action %d",
          c.action);
    reset();
    /* Anything after --help is not looked at, as in GNU tools. */
    CHECK(PARSE(&c, "--help", "--bogus") == GIMG_OK && c.action == GIMG_CLI_HELP, "%s",
          gimg_last_error());
    reset();
    CHECK(PARSE(&c, "in") == GIMG_OK && c.action == GIMG_CLI_RUN, "action %d", c.action);
}

static void test_handler_errors(void)
{
    gimg_cli_common c;
    reset();
    CHECK(PARSE(&c, "--op", "bad", "in") == GIMG_E_USAGE, "handler's error lost");
    CHECK(!strcmp(gimg_last_error(), "unknown operation 'bad'"), "%s", gimg_last_error());
    reset();
    CHECK(PARSE(&c, "--level=10", "in") == GIMG_E_USAGE, "level 10 accepted");
    reset();
    /* Repeated options: each reaches the handler, the last value wins. */
    CHECK(PARSE(&c, "--op", "a", "--op=b", "in") == GIMG_OK && !strcmp(g_seen.op, "b") &&
              g_seen.calls == 2,
          "op %s calls %d", g_seen.op, g_seen.calls);
}

static void test_common_defaults(void)
{
    gimg_cli_common c;
    reset();
    CHECK(PARSE(&c, "in") == GIMG_OK, "%s", gimg_last_error());
    CHECK(c.write.format == GIMG_FMT_UNKNOWN, "format %d", c.write.format);
    CHECK(c.write.quality == GIMG_DEFAULT_QUALITY, "quality %d", c.write.quality);
    CHECK(c.write.png_level == GIMG_DEFAULT_PNG_LEVEL, "level %d", c.write.png_level);
    CHECK(c.device.kind == GIMG_DEV_AUTO, "device %d", c.device.kind);
    CHECK(c.max_pixels == GIMG_DEFAULT_MAX_PIXELS, "max %llu", (unsigned long long)c.max_pixels);
    CHECK(gimg_max_pixels() == GIMG_DEFAULT_MAX_PIXELS, "global max not reset");
    CHECK(!c.verbose && !c.quiet && !strcmp(c.output, "-"), "v %d q %d out %s", c.verbose,
          c.quiet, c.output);
}

static void test_common_values(void)
{
    gimg_cli_common c;
    reset();
    CHECK(PARSE(&c, "--quality", "1", "--png-level", "12", "--max-pixels", "1000", "in") ==
              GIMG_OK,
          "%s", gimg_last_error());
    CHECK(c.write.quality == 1 && c.write.png_level == 12, "q %d l %d",
          c.write.quality, c.write.png_level);
    CHECK(c.max_pixels == 1000 && gimg_max_pixels() == 1000, "max %llu",
          (unsigned long long)gimg_max_pixels());
    reset();
    CHECK(PARSE(&c, "--quality=100", "--png-level=0", "in") == GIMG_OK &&
              c.write.quality == 100 && c.write.png_level == 0,
          "%s", gimg_last_error());
    const char *bad[][2] = {
        {"--quality", "0"},     {"--quality", "101"},  {"--quality", "9x"},
        {"--quality", ""},      {"--quality", " 5"},   {"--png-level", "13"},
        {"--png-level", "-1"},  {"--max-pixels", "0"}, {"--max-pixels", "-5"},
        {"--max-pixels", "1e6"}, {"--max-pixels", "99999999999999999999999"},
        {"--format", "gif"},    {"--format", "psd"},   {"--device", "tpu"},
        {"--device", "gpu:x"},  {"--device", "gpu:1,1"}, {"--device", "gpu:0,"},
        {"--device", "gpu:,0"}, {"--device", "gpu:64"}, {"--device", "gpu:-1"},
        {"--device", "gpu:al"}, {"--device", "gpu:0;1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *argv[] = {"tool", (char *)bad[i][0], (char *)bad[i][1], "in", NULL};
        reset();
        gimg_status st = gimg_cli_parse(&g_spec, 4, argv, &c);
        CHECK(st == GIMG_E_USAGE, "%s '%s' gave status %d", bad[i][0], bad[i][1], st);
        CHECK(*gimg_last_error(), "%s '%s': no message", bad[i][0], bad[i][1]);
    }
    /* --max-memory: set on success; not given, the default. */
    reset();
    CHECK(PARSE(&c, "--max-memory", "3M", "in") == GIMG_OK && c.max_memory == (3 << 20) &&
              gimg_max_memory() == (3 << 20),
          "%s: %llu", gimg_last_error(), (unsigned long long)gimg_max_memory());
    reset();
    CHECK(PARSE(&c, "in") == GIMG_OK && c.max_memory == 0 &&
              gimg_max_memory() == gimg_default_max_memory(),
          "default budget %llu", (unsigned long long)gimg_max_memory());
    reset();
    CHECK(PARSE(&c, "--max-memory", "1", "in") == GIMG_E_USAGE &&
              strstr(gimg_last_error(), "out of range"),
          "%s", gimg_last_error());
    /* --max-pixels is applied only when parsing succeeds. */
    reset();
    PARSE(&c, "--max-pixels", "5", "in");
    PARSE(&c, "--max-pixels", "7", "a", "b", "c");
    CHECK(gimg_max_pixels() == 5, "max %llu", (unsigned long long)gimg_max_pixels());
    reset();
    PARSE(&c, "in");
}

static void test_device(void)
{
    gimg_cli_common c;
    reset();
    CHECK(PARSE(&c, "--device", "cpu", "in") == GIMG_OK && c.device.kind == GIMG_DEV_CPU,
          "%s", gimg_last_error());
    reset();
    CHECK(PARSE(&c, "--device=gpu:1", "in") == GIMG_OK && c.device.kind == GIMG_DEV_GPU &&
              c.device.n_gpus == 1 && c.device.gpus[0] == 1 && !c.device.all_gpus,
          "%s", gimg_last_error());
    reset();
    setenv("GIMG_DEVICE", "cpu", 1);
    CHECK(PARSE(&c, "in") == GIMG_OK && c.device.kind == GIMG_DEV_CPU, "env not used: %d",
          c.device.kind);
    setenv("GIMG_DEVICE", "cpu", 1);
    CHECK(PARSE(&c, "--device", "auto", "in") == GIMG_OK && c.device.kind == GIMG_DEV_AUTO,
          "option did not override env: %d", c.device.kind);
    setenv("GIMG_DEVICE", "gpu:2", 1);
    CHECK(PARSE(&c, "in") == GIMG_OK && c.device.kind == GIMG_DEV_GPU && c.device.gpus[0] == 2,
          "env gpu:2: %d %d", c.device.kind, c.device.gpus[0]);
    reset();
    CHECK(PARSE(&c, "--device", "gpu:3,0,63", "in") == GIMG_OK && c.device.n_gpus == 3 &&
              c.device.gpus[0] == 3 && c.device.gpus[1] == 0 && c.device.gpus[2] == 63,
          "gpu:3,0,63: %s, %d GPUs", gimg_last_error(), c.device.n_gpus);
    reset();
    CHECK(PARSE(&c, "--device", "gpu:all", "in") == GIMG_OK && c.device.all_gpus,
          "gpu:all: %s", gimg_last_error());
    reset();
    CHECK(PARSE(&c, "--device", "gpu", "in") == GIMG_OK && c.device.n_gpus == 1 &&
              c.device.gpus[0] == 0 && !c.device.all_gpus,
          "gpu: %d GPUs, first %d", c.device.n_gpus, c.device.gpus[0]);
    setenv("GIMG_DEVICE", "bogus", 1);
    CHECK(PARSE(&c, "in") == GIMG_E_USAGE, "bad GIMG_DEVICE accepted");
    CHECK(has(gimg_last_error(), "GIMG_DEVICE"), "%s", gimg_last_error());
    /* A bad environment does not matter when the option decides. */
    setenv("GIMG_DEVICE", "bogus", 1);
    CHECK(PARSE(&c, "--device", "cpu", "in") == GIMG_OK, "%s", gimg_last_error());
    setenv("GIMG_DEVICE", "", 1);
    CHECK(PARSE(&c, "in") == GIMG_OK && c.device.kind == GIMG_DEV_AUTO, "empty env: %d",
          c.device.kind);
    setenv("GIMG_DEVICE", "bogus", 1);
    CHECK(PARSE(&c, "--help") == GIMG_OK, "env checked for --help");
    reset();
}

static void test_parse_int(void)
{
    long long v = 42;
    struct { const char *s; long long min, max; int ok; long long want; } t[] = {
        {"0", 0, 10, 1, 0},          {"10", 0, 10, 1, 10},
        {"+7", 0, 10, 1, 7},         {"-3", -5, 5, 1, -3},
        {"007", 0, 10, 1, 7},        {"11", 0, 10, 0, 0},
        {"-1", 0, 10, 0, 0},         {"", 0, 10, 0, 0},
        {" 1", 0, 10, 0, 0},         {"1 ", 0, 10, 0, 0},
        {"1x", 0, 10, 0, 0},         {"0x5", 0, 10, 0, 0},
        {"--1", -5, 5, 0, 0},        {"+", 0, 10, 0, 0},
        {"1.0", 0, 10, 0, 0},        {"9223372036854775807", 0, LLONG_MAX, 1, LLONG_MAX},
        {"9223372036854775808", 0, LLONG_MAX, 0, 0},
        {"-9223372036854775809", LLONG_MIN, 0, 0, 0},
        {"99999999999999999999999999", 0, 100, 0, 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        v = 42;
        gimg_status st = gimg_cli_parse_int("--n", t[i].s, t[i].min, t[i].max, &v);
        if (t[i].ok) {
            CHECK(st == GIMG_OK && v == t[i].want, "'%s': status %d value %lld", t[i].s, st, v);
        } else {
            CHECK(st == GIMG_E_USAGE && v == 42, "'%s' accepted (%lld)", t[i].s, v);
            CHECK(has(gimg_last_error(), "--n: '"), "'%s': message %s", t[i].s,
                  gimg_last_error());
        }
    }
    gimg_cli_parse_int("--quality", "150", 1, 100, &v);
    CHECK(!strcmp(gimg_last_error(), "--quality: '150' is out of range (1 to 100)"), "%s",
          gimg_last_error());
    gimg_cli_parse_int("--quality", "ten", 1, 100, &v);
    CHECK(!strcmp(gimg_last_error(), "--quality: 'ten' is not an integer"), "%s",
          gimg_last_error());
}

static void test_parse_u64(void)
{
    uint64_t v = 42;
    CHECK(gimg_cli_parse_u64("--n", "18446744073709551615", 0, UINT64_MAX, &v) == GIMG_OK &&
              v == UINT64_MAX,
          "max u64");
    v = 42;
    CHECK(gimg_cli_parse_u64("--n", "18446744073709551616", 0, UINT64_MAX, &v) == GIMG_E_USAGE &&
              v == 42,
          "overflow accepted");
    CHECK(gimg_cli_parse_u64("--n", "-1", 0, UINT64_MAX, &v) == GIMG_E_USAGE && v == 42,
          "-1 accepted as %llu", (unsigned long long)v);
    CHECK(gimg_cli_parse_u64("--n", "-0", 0, 10, &v) == GIMG_OK && v == 0, "-0 refused");
    CHECK(gimg_cli_parse_u64("--n", "12abc", 0, 100, &v) == GIMG_E_USAGE, "junk accepted");
    CHECK(gimg_cli_parse_u64("--n", "5", 6, 100, &v) == GIMG_E_USAGE, "below min accepted");
    CHECK(gimg_cli_parse_u64("--n", "268435456", 1, UINT64_MAX, &v) == GIMG_OK &&
              v == 268435456u,
          "2^28");
}

/* Sizes: binary suffixes, alone or with B / iB, either case; a percentage
 * of the machine's memory; 64 KiB to 2^62; nothing else. */
static void test_parse_size(void)
{
    static const struct {
        const char *s;
        uint64_t bytes;
    } good[] = {
        {"65536", 65536},          {"64K", 65536},
        {"64k", 65536},            {"512M", (uint64_t)512 << 20},
        {"512MiB", (uint64_t)512 << 20}, {"1.5G", (uint64_t)3 << 29},
        {"2GB", (uint64_t)2 << 30}, {"1t", (uint64_t)1 << 40},
        {"4194304T", (uint64_t)1 << 62},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        uint64_t v = 0;
        CHECK(gimg_cli_parse_size("--max-memory", good[i].s, &v) == GIMG_OK &&
                  v == good[i].bytes,
              "'%s': %s, %llu", good[i].s, gimg_last_error(), (unsigned long long)v);
    }
    /* A percentage is of the machine's memory: twice the default budget. */
    uint64_t half = 0, all = 0;
    CHECK(gimg_cli_parse_size("--max-memory", "50%", &half) == GIMG_OK &&
              gimg_cli_parse_size("--max-memory", "100%", &all) == GIMG_OK,
          "%s", gimg_last_error());
    const uint64_t def = gimg_default_max_memory();
    CHECK(half + 1 >= def && half <= def + 1 && all + 2 >= 2 * def && all <= 2 * def + 2,
          "50%% %llu, 100%% %llu, default %llu", (unsigned long long)half,
          (unsigned long long)all, (unsigned long long)def);
    static const char *const bad[] = {
        "", "K", "-1M", "+1M", "1Q", "1MM", "1 M", " 1M", "1e9", "0x100000", "65535",
        "0", "4194305T", "0%", "101%", "50%%", "1%M", "inf", "nan", "1.5.2G", "1Mi",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 42;
        CHECK(gimg_cli_parse_size("--max-memory", bad[i], &v) == GIMG_E_USAGE && v == 42,
              "'%s' accepted as %llu", bad[i], (unsigned long long)v);
        CHECK(strstr(gimg_last_error(), "--max-memory"), "'%s': %s", bad[i],
              gimg_last_error());
    }
}

static void test_parse_double(void)
{
    double v = 42;
    struct { const char *s; int ok; double want; } t[] = {
        {"0", 1, 0},       {"1.5", 1, 1.5},    {".5", 1, 0.5},    {"-2", 1, -2},
        {"1e2", 1, 100},   {"+3.25", 1, 3.25}, {"5.", 1, 5},      {"1e-400", 1, 0},
        {"", 0, 0},        {"abc", 0, 0},      {"1.5x", 0, 0},    {" 1", 0, 0},
        {"nan", 0, 0},     {"inf", 0, 0},      {"-inf", 0, 0},    {"0x10", 0, 0},
        {"1e999", 0, 0},   {"1000.5", 0, 0},   {"-1000.5", 0, 0}, {".", 0, 0},
        {"1e", 0, 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        v = 42;
        gimg_status st = gimg_cli_parse_double("--x", t[i].s, -1000, 1000, &v);
        if (t[i].ok)
            CHECK(st == GIMG_OK && v == t[i].want, "'%s': status %d value %g", t[i].s, st, v);
        else
            CHECK(st == GIMG_E_USAGE && v == 42, "'%s' accepted (%g)", t[i].s, v);
    }
}

/* Runs gimg_cli_print_help into a string (caller frees). */
static char *help_text(const gimg_cli_spec *spec)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    gimg_cli_print_help(spec, f);
    fclose(f);
    return buf;
}

static void test_help_text(void)
{
    char *h = help_text(&g_spec);
    CHECK(h != NULL, "no help");
    if (!h)
        return;
    CHECK(!strncmp(h, "Usage: tool [options] INPUT [OUTPUT]\nDoes a thing to an image.\n", 63),
          "head: %.80s", h);
    static const char *const want[] = {
        "--op OP", "-l, --level N", "-F, --fast", "-x ", "-o FILE", "-f, --format FMT",
        "--quality N", "--png-level N", "--device DEV", "--max-pixels N", "-v, --verbose",
        "-q, --quiet", "-h, --help", "--version", "Options:", "Common options:",
        "default 90", "default 6", "16777216 a side", "GIMG_DEVICE",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECK(has(h, want[i]), "help lacks '%s'", want[i]);
    /* Lines fit 80 columns, and each option's text starts in one column. */
    int col = -1, lines = 0;
    for (char *line = h; *line;) {
        char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        CHECK(len <= 79, "line of %zu columns: %.*s", len, (int)len, line);
        size_t k = 0;
        while (k < len && line[k] == ' ')
            k++;
        /* Option lines start with "  -x" or "      --long"; wrapped text is
         * indented further. */
        if (k >= 2 && k <= 6 && k < len && line[k] == '-') {
            char *gap = strstr(line + k, "  ");
            if (gap && gap < line + len) {
                int c = (int)(gap - line);
                while (line[c] == ' ')
                    c++;
                if (col < 0)
                    col = c;
                CHECK(c == col, "misaligned (column %d, not %d): %.*s", c, col, (int)len, line);
            }
            lines++;
        }
        line += len + (nl != NULL);
    }
    CHECK(lines >= 14, "only %d option lines", lines);
    free(h);

    /* Leaving out common options removes them from parsing and help. */
    gimg_cli_spec spec = g_spec;
    spec.omit = GIMG_CLI_NO_WRITE_OPTS | GIMG_CLI_NO_DEVICE;
    spec.operands = "INPUT";
    spec.min_operands = spec.max_operands = 1;
    h = help_text(&spec);
    CHECK(h && !has(h, "--quality") && !has(h, "--format") && !has(h, "--device") &&
              has(h, "Usage: tool [options] INPUT\n"),
          "omitted options shown");
    free(h);
    gimg_cli_common c;
    reset();
    char *argv[] = {"tool", "--quality", "5", "in", NULL};
    CHECK(gimg_cli_parse(&spec, 4, argv, &c) == GIMG_E_USAGE, "omitted --quality accepted");
}

static void test_usage_and_version(void)
{
    char buf[128];
    int n = gimg_cli_usage_line(&g_spec, buf, sizeof buf);
    CHECK(n == (int)strlen("Usage: tool [options] INPUT [OUTPUT]") &&
              !strcmp(buf, "Usage: tool [options] INPUT [OUTPUT]"),
          "usage '%s'", buf);
    char *v = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&v, &len);
    gimg_cli_print_version(&g_spec, f);
    fclose(f);
    CHECK(v && !strncmp(v, "tool (gimg) " GIMG_VERSION "\n", strlen("tool (gimg) " GIMG_VERSION "\n")),
          "version '%s'", v);
    CHECK(v && has(v, "CUDA"), "version does not say whether CUDA is built in: %s", v);
    free(v);
}

/* Runs fn with stderr sent to a temporary file; returns what it printed. */
static char *capture_stderr(int (*fn)(void), int *rc)
{
    FILE *tmp = tmpfile();
    if (!tmp)
        return NULL;
    fflush(stderr);
    int saved = dup(2);
    dup2(fileno(tmp), 2);
    *rc = fn();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    static char buf[1024];
    rewind(tmp);
    size_t n = fread(buf, 1, sizeof buf - 1, tmp);
    buf[n] = 0;
    fclose(tmp);
    return buf;
}

static int print_file_error(void)
{
    return gimg_cli_error("tool", "a.png", gimg_fail(GIMG_E_FORMAT, "truncated PNG"));
}
static int print_usage_error(void)
{
    return gimg_cli_error("tool", NULL, gimg_fail(GIMG_E_USAGE, "unknown option '--frob'"));
}
static int print_device_error(void)
{
    return gimg_cli_error("tool", NULL, gimg_fail(GIMG_E_DEVICE, "no usable GPU"));
}

static void test_error_messages(void)
{
    int rc;
    char *s = capture_stderr(print_file_error, &rc);
    CHECK(s && !strcmp(s, "tool: a.png: truncated PNG\n") && rc == 1, "rc %d '%s'", rc, s);
    s = capture_stderr(print_usage_error, &rc);
    CHECK(s && !strcmp(s, "tool: unknown option '--frob'\nTry 'tool --help'.\n") && rc == 2,
          "rc %d '%s'", rc, s);
    s = capture_stderr(print_device_error, &rc);
    CHECK(s && !strcmp(s, "tool: no usable GPU\n") && rc == 1, "rc %d '%s'", rc, s);
    CHECK(!strcmp(gimg_cli_name("-", 0), "standard input") &&
              !strcmp(gimg_cli_name("-", 1), "standard output") &&
              !strcmp(gimg_cli_name("x.png", 1), "x.png"),
          "names");
}

static gimg_cli_common g_done_c;
static int done_usage(void)
{
    return gimg_cli_done(&g_spec, &g_done_c, gimg_fail(GIMG_E_USAGE, "extra operand 'c'"));
}

static void test_done(void)
{
    int rc;
    reset();
    CHECK(PARSE(&g_done_c, "in") == GIMG_OK, "%s", gimg_last_error());
    CHECK(gimg_cli_done(&g_spec, &g_done_c, GIMG_OK) == -1, "run not passed on");
    char *s = capture_stderr(done_usage, &rc);
    CHECK(rc == 2 && s && !strcmp(s, "tool: extra operand 'c'\nTry 'tool --help'.\n"),
          "rc %d '%s'", rc, s);
}

/* GIMG_CLI_WITH_BATCH: the batch options, and operands as inputs with -o. */
static void test_batch_options(void)
{
    gimg_cli_common c;
    reset();
    g_spec.with = GIMG_CLI_WITH_BATCH;
    CHECK(PARSE(&c, "-o", "out/", "a", "b", "c") == GIMG_OK && c.n_inputs == 3 &&
          !strcmp(c.output, "out/") && !strcmp(c.operands[2], "c"));
    CHECK(PARSE(&c, "a", "b") == GIMG_OK && c.n_inputs == 1 && !strcmp(c.output, "b"));
    CHECK(PARSE(&c, "a", "b", "c") == GIMG_E_USAGE &&
          has(gimg_last_error(), "several inputs need -o"));
    CHECK(PARSE(&c, "--files-from", "list", "-o", "d/") == GIMG_OK && c.n_inputs == 0 &&
          !strcmp(c.files_from, "list") && !c.null_separated);
    CHECK(PARSE(&c, "--files-from=-", "-0", "-j", "3", "-o", "d/", "x") == GIMG_OK &&
          c.null_separated && c.jobs == 3 && c.n_inputs == 1);
    CHECK(PARSE(&c, "--files-from", "list", "a", "b") == GIMG_E_USAGE &&
          has(gimg_last_error(), "-o DIR/"));
    CHECK(PARSE(&c, "-0", "a") == GIMG_E_USAGE && has(gimg_last_error(), "--files-from"));
    CHECK(PARSE(&c, "-j", "0", "a") == GIMG_E_USAGE);
    CHECK(PARSE(&c, "--jobs=1025", "a") == GIMG_E_USAGE);
    CHECK(PARSE(&c, "a") == GIMG_OK && c.progress == -1 && !c.fail_fast && c.jobs >= 1);
    CHECK(PARSE(&c, "--progress", "--fail-fast", "a") == GIMG_OK && c.progress == 1 &&
          c.fail_fast);
    CHECK(PARSE(&c, "--progress", "--no-progress", "a") == GIMG_OK && c.progress == 0);
    CHECK(PARSE(&c, "-o", "d/", "a", "") == GIMG_E_USAGE);
    /* A tool without the batch options does not know them. */
    g_spec.with = 0;
    CHECK(PARSE(&c, "-j", "2", "a") == GIMG_E_USAGE);
    CHECK(PARSE(&c, "--files-from", "x", "a") == GIMG_E_USAGE);
    CHECK(PARSE(&c, "-o", "out", "a", "b") == GIMG_E_USAGE);
}

static void test_stdin_when_no_operand(void)
{
    gimg_cli_common c;
    int saved = stdin_from(0);
    CHECK(saved >= 0, "cannot make /dev/null standard input");
    reset();
    CHECK(PARSE(&c, "-v") == GIMG_OK, "%s", gimg_last_error());
    CHECK(c.input && !strcmp(c.input, "-") && c.n_inputs == 1 && c.n_operands == 1 &&
              !strcmp(c.operands[0], "-") && !strcmp(c.output, "-"),
          "input %s, %d inputs, %d operands", c.input ? c.input : "(none)", c.n_inputs,
          c.n_operands);
    /* -o names the output; the input is still standard input. */
    reset();
    CHECK(PARSE(&c, "-o", "out.png") == GIMG_OK && c.input && !strcmp(c.input, "-") &&
              !strcmp(c.output, "out.png"),
          "%s", gimg_last_error());
    /* A batch whose inputs come from --files-from reads no image from it. */
    gimg_cli_spec batch = g_spec;
    batch.with = GIMG_CLI_WITH_BATCH;
    char *argv[] = {"tool", "--files-from", "list.txt", "-o", "out/", NULL};
    reset();
    CHECK(gimg_cli_parse(&batch, 5, argv, &c) == GIMG_OK && c.n_inputs == 0 && !c.input,
          "%d inputs, input %s: %s", c.n_inputs, c.input ? c.input : "(none)",
          gimg_last_error());
    restore_stdin(saved);
    /* At a terminal the operand is missing: test_missing_operand_at_terminal. */
}

/* An unknown long option names what was meant, and never runs it. */
static void test_suggestions(void)
{
    static const char *const renamed[] = {"old-op", "op", NULL};
    gimg_cli_spec spec = g_spec;
    spec.renamed = renamed;
    spec.with = GIMG_CLI_WITH_BATCH;
    static const struct {
        const char *typed, *message;
    } cases[] = {
        {"--verb", "unknown option '--verb' (did you mean --verbose?)"},     /* a prefix */
        {"--verbsoe", "unknown option '--verbsoe' (did you mean --verbose?)"}, /* a swap */
        {"--levle", "unknown option '--levle' (did you mean --level?)"},
        {"--lvel", "unknown option '--lvel' (did you mean --level?)"},       /* a deletion */
        {"--fasst", "unknown option '--fasst' (did you mean --fast?)"},      /* an insertion */
        {"--qiet", "unknown option '--qiet' (did you mean --quiet?)"},
        {"--prog", "unknown option '--prog' (did you mean --progressive or --progress?)"},
        {"--old-op", "unknown option '--old-op' (it is now --op)"},
        {"--old-opp", "unknown option '--old-opp' (did you mean --op?)"},
        {"--frob", "unknown option '--frob'"},  /* nothing near */
        {"--jsonx", "unknown option '--jsonx'"}, /* gimg_cli has no --json */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gimg_cli_common c;
        char *argv[] = {"tool", (char *)cases[i].typed, "in", NULL};
        reset();
        gimg_status st = gimg_cli_parse(&spec, 3, argv, &c);
        CHECK(st == GIMG_E_USAGE && !strcmp(gimg_last_error(), cases[i].message),
              "%s: status %d, '%s'", cases[i].typed, st, gimg_last_error());
        CHECK(!c.verbose && !c.quiet && g_seen.calls == 0 && c.progress == -1,
              "%s was acted on", cases[i].typed);
    }
    /* The "=value" part is not part of the name looked up. */
    gimg_cli_common c;
    char *argv[] = {"tool", "--levle=3", "in", NULL};
    reset();
    CHECK(gimg_cli_parse(&spec, 3, argv, &c) == GIMG_E_USAGE &&
              !strcmp(gimg_last_error(), "unknown option '--levle' (did you mean --level?)"),
          "%s", gimg_last_error());
    CHECK(g_seen.level == -1, "--levle=3 set the level to %lld", g_seen.level);
}

int main(void)
{
    RUN(test_batch_options);
    RUN(test_long_forms);
    RUN(test_short_forms);
    RUN(test_bundled_flags);
    RUN(test_double_dash_and_lone_dash);
    RUN(test_operands_anywhere);
    RUN(test_unknown_options);
    RUN(test_missing_argument);
    RUN(test_operand_counts);
    RUN(test_missing_operand_at_terminal);
    RUN(test_stdin_when_no_operand);
    RUN(test_suggestions);
    RUN(test_help_and_version_actions);
    RUN(test_handler_errors);
    RUN(test_common_defaults);
    RUN(test_common_values);
    RUN(test_device);
    RUN(test_parse_int);
    RUN(test_parse_u64);
    RUN(test_parse_size);
    RUN(test_parse_double);
    RUN(test_help_text);
    RUN(test_usage_and_version);
    RUN(test_error_messages);
    RUN(test_done);
    return check_summary();
}
