/*
 * fuzz_cost — --device auto's cost table as files (lib/cost.h): the input
 * read as GIMG_COST_TABLE's text (gimg_cost_parse over the defaults), then
 * as the cache file (gimg_cost_cache_read, whose first line must be this
 * machine's identity: the seeds start with it).
 * Promises: a refusal says why and leaves the table as it was; a table
 * taken, or a cache read, holds finite figures of 0 or more, so that every
 * prediction is finite; a cache that is refused changes nothing.
 */
#include "fuzz.h"
#include "cost.h"

#include <math.h>
#include <unistd.h>

/* Every figure finite and not negative, every prediction finite. */
static void check_table(const gimg_cost_table *t, const char *what)
{
    const double *v = (const double *)t;
    for (size_t i = 0; i < sizeof *t / sizeof *v; i++)
        FUZZ_CHECK(isfinite(v[i]) && v[i] >= 0, "%s: figure %zu is %g", what, i, v[i]);
    for (int op = GIMG_COST_CONV; op <= GIMG_COST_ORIENT; op++)
        for (int start = GIMG_GPU_COLD; start <= GIMG_GPU_SERVER; start++) {
            gimg_cost_job job = {.op = (gimg_cost_op)op, .bytes = (size_t)1 << 26,
                                 .fmas_per_byte = 961, .threads = 16, .start_shared_by = 3};
            gimg_cost_prediction p = gimg_cost_predict(t, &job, (gimg_gpu_start)start);
            FUZZ_CHECK(isfinite(p.cpu_ms) && isfinite(p.gpu_ms) && isfinite(p.start_ms),
                       "%s: op %d: predicted %g %g", what, op, p.cpu_ms, p.gpu_ms);
        }
    gimg_cost_prediction p = gimg_cost_predict_jpeg(t, 1000, 16, GIMG_GPU_COLD);
    FUZZ_CHECK(isfinite(p.cpu_ms) && isfinite(p.gpu_ms), "%s: jpeg %g %g", what, p.cpu_ms,
               p.gpu_ms);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64], identity[512];
    if (fd < 0) {
        /* One file for every input, unlinked at once: read by its
         * descriptor's name. */
        char name[] = "/tmp/gimg-fuzz-cost.XXXXXX";
        fd = mkstemp(name);
        if (fd < 0)
            abort();
        unlink(name);
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        gimg_cost_identity(identity, sizeof identity);
    }
    gimg_cost_table defaults, t;
    gimg_cost_defaults(&defaults);

    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    t = defaults;
    fuzz_clear_error();
    gimg_status st = gimg_cost_parse(text, "input", &t);
    fuzz_check_failure(st, "gimg_cost_parse");
    if (st)
        FUZZ_CHECK(!memcmp(&t, &defaults, sizeof t), "a refused table changed the figures");
    check_table(&t, "table");
    free(text);

    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
        abort();
    t = defaults;
    char gpu[64] = "";
    const int has = gimg_cost_cache_read(path, identity, &t, gpu, sizeof gpu);
    FUZZ_CHECK(has >= 0 && has <= (GIMG_COST_HAS_CPU | GIMG_COST_HAS_GPU), "has %d", has);
    if (!has)
        FUZZ_CHECK(!memcmp(&t, &defaults, sizeof t), "a refused cache changed the figures");
    FUZZ_CHECK(memchr(gpu, '\0', sizeof gpu) != NULL, "the GPU's name is not terminated");
    check_table(&t, "cache");
    return 0;
}
