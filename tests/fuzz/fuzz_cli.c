/*
 * fuzz_cli — the command-line parser, gimg_cli_parse(), on argument vectors
 * made from the input: its NUL-separated pieces are argv[1..] (at most 64).
 * The first byte picks the spec's shape (operand counts, omitted and added
 * common options); the tool's own options are one per parser of parsers.h
 * (--NAME VALUE, and -A, -B, ... for the first ones) plus a flag, so that
 * option values reach the parsers as they would from a tool.
 *
 * Checked: a failure says why and is a usage error; on success every string
 * the result holds points into argv, the operands are argv's non-option
 * words in order, and the counts agree with the spec.
 */
#include "parsers.h"

FUZZ_DEFINE_PARSERS
#define N_PARSERS (int)(sizeof k_parsers / sizeof k_parsers[0])

#define OPTION_ENTRY(name, seeds, ...) { #name, 0, "VALUE", "fuzzed parser", 0 },
static gimg_cli_option k_options[] = { FUZZ_PARSERS(OPTION_ENTRY)
                                       { "flag", 'F', NULL, "a flag", 0 },
                                       { NULL, 0, NULL, NULL, 0 } };
#define N_OPTIONS (int)(sizeof k_options / sizeof k_options[0] - 1)

enum { MAX_ARGS = 64 };

typedef struct {
    int flags;
} state;

static gimg_status handle(void *user, int key, const char *arg)
{
    state *s = user;
    if (key == N_PARSERS) {
        FUZZ_CHECK(arg == NULL, "a flag got an argument");
        s->flags++;
        return GIMG_OK;
    }
    FUZZ_CHECK(key >= 0 && key < N_PARSERS && arg != NULL, "key %d, arg %p", key,
               (const void *)arg);
    gimg_status st = k_parsers[key](arg);
    /* A tool's handler turns any bad value into a usage error. */
    return st ? GIMG_E_USAGE : GIMG_OK;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    for (int i = 0; i < N_OPTIONS; i++) {
        k_options[i].key = i;
        if (i < 26 && i < N_PARSERS)
            k_options[i].short_name = 'A' + i;
    }
    return 0;
}

/* Does p point into one of argv's strings? */
static int in_argv(const char *p, char *const *argv, int argc)
{
    for (int i = 0; i < argc; i++)
        if (p >= argv[i] && p <= argv[i] + strlen(argv[i]))
            return 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const unsigned shape = data[0];
    char *text = malloc(size);
    if (!text)
        return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';

    char *argv[MAX_ARGS + 2], *orig[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = "gfuzz";
    for (char *p = text; p < text + size && argc <= MAX_ARGS; p += strlen(p) + 1)
        argv[argc++] = p;
    argv[argc] = NULL;
    memcpy(orig, argv, sizeof argv);

    static const int shapes[][2] = { { 0, 0 }, { 1, 1 }, { 0, -1 }, { 2, 3 } };
    state st_user = { 0 };
    gimg_cli_spec spec = {
        .tool = "gfuzz",
        .description = "fuzzing",
        .min_operands = shapes[shape & 3][0],
        .max_operands = shapes[shape & 3][1],
        .options = k_options,
        .handle = handle,
        .user = &st_user,
        .omit = (shape >> 2) & 7,
        .with = (shape >> 5) & 1 ? GIMG_CLI_WITH_BATCH : 0,
    };
    /* GIMG_DEVICE is read when --device is not given. */
    if ((shape >> 6) & 1)
        setenv("GIMG_DEVICE", argc > 1 ? argv[argc - 1] : "", 1);
    else
        unsetenv("GIMG_DEVICE");

    gimg_cli_common c;
    fuzz_clear_error();
    gimg_status st = gimg_cli_parse(&spec, argc, argv, &c);
    fuzz_check_failure(st, "gimg_cli_parse");
    FUZZ_CHECK(st == GIMG_OK || st == GIMG_E_USAGE, "status %d: %s", (int)st, gimg_last_error());

    /* argv holds the same pointers, reordered. */
    for (int i = 0; i < argc; i++) {
        int found = 0;
        for (int j = 0; j < argc && !found; j++)
            found = argv[i] == orig[j];
        FUZZ_CHECK(found, "argv[%d] is not one of the original arguments", i);
    }
    if (st == GIMG_OK && c.action == GIMG_CLI_RUN) {
        FUZZ_CHECK(c.n_operands >= 0 && c.n_operands < argc, "%d operands", c.n_operands);
        /* No operand, standard input not a terminal: the input is "-",
         * which no argument spelled. */
        const int implied_stdin = c.n_operands == 1 && !strcmp(c.operands[0], "-") &&
                                  !in_argv(c.operands[0], orig, argc);
        FUZZ_CHECK(implied_stdin || c.operands == argv + 1, "operands are not at argv + 1");
        /* The operands keep their order among the original arguments. */
        for (int i = 1, j = 1; i < c.n_operands; i++) {
            while (j < argc && orig[j] != c.operands[i - 1])
                j++;
            int k = j + 1;
            while (k < argc && orig[k] != c.operands[i])
                k++;
            FUZZ_CHECK(k < argc, "operand %d out of order", i);
            j = k;
        }
        FUZZ_CHECK(c.output && (strcmp(c.output, "-") == 0 || in_argv(c.output, orig, argc)),
                   "output does not point into argv");
        FUZZ_CHECK(!c.input || implied_stdin || in_argv(c.input, orig, argc),
                   "input does not point into argv");
        FUZZ_CHECK(c.max_pixels == gimg_max_pixels(), "--max-pixels not applied");
        FUZZ_CHECK(c.write.quality >= 1 && c.write.quality <= 100, "quality %d",
                   c.write.quality);
        FUZZ_CHECK(c.write.png_level >= 0 && c.write.png_level <= 12, "png level %d",
                   c.write.png_level);
    }
    gimg_set_max_pixels(GIMG_DEFAULT_MAX_PIXELS);
    free(text);
    return 0;
}
