/*
 * check.h — the unit tests' harness. Each test program prints one line per
 * test, "PASS: name", "FAIL: name: why" or "SKIP: name: why", which
 * tests/run.sh counts. A test is a function; CHECK records a failure with
 * its place and keeps going, so one run shows every broken assertion.
 *
 *   static void test_round_trip(void) { CHECK(x == 1, "x is %d", x); }
 *   int main(void) { RUN(test_round_trip); return check_summary(); }
 */
#ifndef GIMG_CHECK_H
#define GIMG_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_failures_in_test;
static int check_total_failed;
static const char *check_skip_reason;

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            if (check_failures_in_test++ < 5) {                               \
                fprintf(stderr, "  %s:%d: CHECK(%s) failed: ", __FILE__,      \
                        __LINE__, #cond);                                     \
                fprintf(stderr, " " __VA_ARGS__); /* message optional */ \
                fputc('\n', stderr);                                          \
            }                                                                 \
        }                                                                     \
    } while (0)

/* Marks the running test skipped (e.g. a peer tool is not installed). */
#define SKIP(reason) do { check_skip_reason = (reason); return; } while (0)

#define RUN(fn) check_run(#fn, fn)

static inline void check_run(const char *name, void (*fn)(void))
{
    check_failures_in_test = 0;
    check_skip_reason = NULL;
    fn();
    if (strncmp(name, "test_", 5) == 0)
        name += 5;
    if (check_failures_in_test) {
        printf("FAIL: %s: %d failed checks\n", name, check_failures_in_test);
        check_total_failed++;
    } else if (check_skip_reason) {
        printf("SKIP: %s: %s\n", name, check_skip_reason);
    } else {
        printf("PASS: %s\n", name);
    }
    fflush(stdout);
}

static inline int check_summary(void)
{
    return check_total_failed ? 1 : 0;
}

#endif
