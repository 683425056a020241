/*
 * fuzz.h — what the libFuzzer targets in tests/fuzz/ share.
 *
 * A target is one file, tests/fuzz/fuzz_NAME.c, defining
 * LLVMFuzzerTestOneInput(); `make fuzz` builds it with clang, libFuzzer,
 * AddressSanitizer and UBSan against libgimg's C sources (CPU only), and
 * `make fuzz-smoke` runs it for a bounded time from the seed corpus that
 * tests/fuzz/make_corpus writes (see smoke.sh).
 *
 * Besides memory errors, leaks, undefined behaviour and hangs, which the
 * sanitizers and libFuzzer catch by themselves, a target states the
 * library's own promises with FUZZ_CHECK: a failure always records a
 * message, a decoded image agrees with its header, and so on.
 */
#ifndef GIMG_FUZZ_H
#define GIMG_FUZZ_H

#include "gimg.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A broken promise: printed, then abort() so that libFuzzer saves the input. */
#define FUZZ_CHECK(cond, ...)                                                       \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed: ", __FILE__, __LINE__,    \
                    #cond);                                                         \
            fprintf(stderr, __VA_ARGS__);                                           \
            fputc('\n', stderr);                                                    \
            abort();                                                                \
        }                                                                           \
    } while (0)

/* Clears the calling thread's error message, so that a failure that records
 * none shows up as an empty message. */
static inline void fuzz_clear_error(void)
{
    gimg_fail(GIMG_OK, "%s", "");
}

/* A failed call must have said why. */
static inline void fuzz_check_failure(gimg_status st, const char *what)
{
    FUZZ_CHECK(st == GIMG_OK || gimg_last_error()[0] != '\0',
               "%s failed with status %d and no message", what, (int)st);
}

/* Image decoding allocates what the header asks for, up to the pixel limit;
 * under libFuzzer's memory ceiling (2 GiB) the limit is lowered so that a
 * header that asks for a legal but huge image is refused rather than
 * counted as an out-of-memory crash, and so that each input is quick: 2^20
 * pixels of 4 float channels is 16 MiB. */
#define FUZZ_MAX_PIXELS ((uint64_t)1 << 20)

#endif
