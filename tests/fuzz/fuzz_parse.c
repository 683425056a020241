/*
 * fuzz_parse — every string parser of parsers.h, fed directly. The first
 * byte of the input picks the parser; the rest, up to its first NUL, is the
 * string.
 */
#include "parsers.h"

FUZZ_DEFINE_PARSERS
#define N_PARSERS (sizeof k_parsers / sizeof k_parsers[0])

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    /* An exact-size copy, so that reading past the string's end is caught. */
    char *s = malloc(size);
    if (!s)
        return 0;
    memcpy(s, data + 1, size - 1);
    s[size - 1] = '\0';
    fuzz_clear_error();
    gimg_status st = k_parsers[data[0] % N_PARSERS](s);
    fuzz_check_failure(st, "parser");
    free(s);
    return 0;
}
