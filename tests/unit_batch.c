/*
 * unit_batch — tests of lib/batch.c: file lists, output names, collision
 * checks and the pipeline (order, every stage once per item, failures,
 * --fail-fast, streams of unknown length, the bound on items in flight).
 */
#include "batch.h"
#include "check.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[64];

static void write_text(const char *path, const char *s, size_t n)
{
    FILE *f = fopen(path, "wb");
    fwrite(s, 1, n, f);
    fclose(f);
}

static void test_file_list(void)
{
    char path[128], **list;
    int n;
    snprintf(path, sizeof path, "%s/list.txt", g_dir);
    static const char text[] = "a.png\nwith space.png\n\n  lead.png\nlast.png"; /* no final newline */
    write_text(path, text, sizeof text - 1);
    CHECK(gimg_read_file_list(path, 0, &list, &n) == GIMG_OK && n == 4);
    CHECK(!strcmp(list[0], "a.png") && !strcmp(list[1], "with space.png") &&
          !strcmp(list[2], "  lead.png") && !strcmp(list[3], "last.png") && !list[4]);
    gimg_file_list_free(list);

    static const char nul[] = "new\nline.png\0b.png\0\0c.png\0";
    write_text(path, nul, sizeof nul - 1);
    CHECK(gimg_read_file_list(path, 1, &list, &n) == GIMG_OK && n == 3);
    CHECK(!strcmp(list[0], "new\nline.png") && !strcmp(list[1], "b.png") &&
          !strcmp(list[2], "c.png"));
    gimg_file_list_free(list);

    write_text(path, "", 0);
    CHECK(gimg_read_file_list(path, 0, &list, &n) == GIMG_OK && n == 0 && !list[0]);
    gimg_file_list_free(list);
    snprintf(path, sizeof path, "%s/missing.txt", g_dir);
    CHECK(gimg_read_file_list(path, 0, &list, &n) == GIMG_E_IO && !list);
}

/* The output name, or the error message prefixed with "ERR ". */
static const char *outname(const char *spec, const char *input, int index, const char *ext)
{
    static char buf[512];
    char *s;
    if (gimg_output_path(spec, input, index, ext, &s) != GIMG_OK) {
        snprintf(buf, sizeof buf, "ERR %s", gimg_last_error());
        return buf;
    }
    snprintf(buf, sizeof buf, "%s", s);
    free(s);
    return buf;
}

static void test_output_path(void)
{
    CHECK(!strcmp(outname("out/", "a/b/photo.jpg", 1, NULL), "out/photo.jpg"));
    CHECK(!strcmp(outname("out//", "photo.jpg", 1, "png"), "out/photo.png"));
    CHECK(!strcmp(outname("/", "x.tar.gz", 1, NULL), "/x.tar.gz"));
    CHECK(!strcmp(outname("out/", ".hidden", 1, "png"), "out/.hidden.png"));
    /* An existing folder without the slash is a folder too. */
    CHECK(!strcmp(outname(g_dir, "p.png", 1, NULL) + strlen(g_dir), "/p.png"));
    CHECK(!strcmp(outname("%d/%f-blur.%e", "a/b/photo.jpg", 3, NULL), "a/b/photo-blur.jpg"));
    CHECK(!strcmp(outname("%d/%f.png", "photo.jpg", 3, NULL), "./photo.png"));
    CHECK(!strcmp(outname("%d/%f.png", "/photo.jpg", 3, NULL), "//photo.png"));
    CHECK(!strcmp(outname("frame%4i.ppm", "x.ppm", 7, NULL), "frame0007.ppm"));
    CHECK(!strcmp(outname("%i_%f%%.%e", "a.b.c", 12, NULL), "12_a.b%.c"));
    CHECK(!strcmp(outname("%f.png", "noext", 1, NULL), "noext.png"));
    CHECK(!strcmp(outname("s-%f.%e", "-", 1, NULL), "s-stdin."));
    CHECK(!strcmp(outname("fixed.png", "a.jpg", 2, NULL), "fixed.png"));
    CHECK(!strncmp(outname("x%q.png", "a.jpg", 1, NULL), "ERR -o: unknown '%q'", 20));
    CHECK(!strncmp(outname("x%", "a.jpg", 1, NULL), "ERR -o: unknown", 15));
    CHECK(!strncmp(outname("%0i", "a.jpg", 1, NULL), "ERR -o: unknown '%0'", 20));
}

static void test_collisions(void)
{
    char *in[] = {"a/x.jpg", "b/x.jpg", "c.jpg", "-"};
    char *ok[] = {"out/a-x.png", "out/b-x.png", "out/c.png", "-"};
    CHECK(gimg_check_output_collisions(in, ok, 4) == GIMG_OK);
    char *clash[] = {"out/x.png", "out/c.png", "./out/x.png"};
    char *in3[] = {"a/x.jpg", "c.jpg", "b/x.jpg"};
    CHECK(gimg_check_output_collisions(in3, clash, 3) == GIMG_E_USAGE);
    CHECK(strstr(gimg_last_error(), "'a/x.jpg' and 'b/x.jpg' would both be written"));
    char *two_stdout[] = {"-", "-"};
    CHECK(gimg_check_output_collisions(in, two_stdout, 2) == GIMG_OK);
    /* The same folder by another name. */
    char p1[128], p2[128];
    snprintf(p1, sizeof p1, "%s/o.png", g_dir);
    snprintf(p2, sizeof p2, "%s/../%s/o.png", g_dir, strrchr(g_dir, '/') + 1);
    char *alias[] = {p1, p2};
    CHECK(gimg_check_output_collisions(in, alias, 2) == GIMG_E_USAGE);
}

/* --------------------------------------------------------------- pipeline */

#define N_ITEMS 200

typedef struct {
    pthread_mutex_t lock;
    int loads[N_ITEMS], computes[N_ITEMS], stores[N_ITEMS];
    int finished[N_ITEMS], order_ok, next;
    int live, max_live, lanes_seen[8];
    int fail_at;        /* item whose compute fails; -1: none */
    int stream_len;     /* for ordered loads of unknown length */
    int load_in_order;
    int last_loaded;
    gimg_status statuses[N_ITEMS];
} tally;

static void jitter(int i)
{
    usleep((useconds_t)((i * 7919) % 13) * 50);
}

static gimg_status t_load(void *user, int i, void **state)
{
    tally *t = user;
    jitter(i);
    pthread_mutex_lock(&t->lock);
    if (t->stream_len >= 0 && i >= t->stream_len) {
        pthread_mutex_unlock(&t->lock);
        *state = NULL;
        return GIMG_OK;
    }
    t->loads[i]++;
    t->load_in_order &= i == t->last_loaded + 1;
    t->last_loaded = i;
    if (++t->live > t->max_live)
        t->max_live = t->live;
    pthread_mutex_unlock(&t->lock);
    int *v = malloc(sizeof *v);
    *v = i;
    *state = v;
    return GIMG_OK;
}

static gimg_status t_compute(void *user, int lane, int i, void *state)
{
    tally *t = user;
    jitter(i + 3);
    pthread_mutex_lock(&t->lock);
    t->computes[i]++;
    t->lanes_seen[lane & 7] = 1;
    pthread_mutex_unlock(&t->lock);
    if (*(int *)state != i)
        return gimg_fail(GIMG_E_IO, "state of %d reached item %d", *(int *)state, i);
    if (i == t->fail_at)
        return gimg_fail(GIMG_E_FORMAT, "item %d is corrupt", i);
    return GIMG_OK;
}

static gimg_status t_store(void *user, int i, void *state)
{
    tally *t = user;
    jitter(i + 5);
    pthread_mutex_lock(&t->lock);
    t->stores[i]++;
    pthread_mutex_unlock(&t->lock);
    return GIMG_OK;
}

static void t_finish(void *user, int i, void *state, gimg_status st, const char *message)
{
    tally *t = user;
    pthread_mutex_lock(&t->lock);
    t->order_ok &= i == t->next++;
    t->finished[i]++;
    t->statuses[i] = st;
    if (st && !strstr(message, "is corrupt"))
        t->order_ok = 0;
    if (state)
        t->live--;
    pthread_mutex_unlock(&t->lock);
    free(state);
}

static gimg_pipeline_spec spec_for(tally *t, int n)
{
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->lock, NULL);
    t->order_ok = 1;
    t->fail_at = -1;
    t->stream_len = -1;
    t->load_in_order = 1;
    t->last_loaded = -1;
    return (gimg_pipeline_spec){.n_items = n, .workers = 3, .lanes = 2, .lane_threads = 1,
                                .max_in_flight = 5, .load = t_load, .compute = t_compute,
                                .store = t_store, .finish = t_finish, .user = t};
}

static int each_once(const int *counts, int n)
{
    for (int i = 0; i < n; i++)
        if (counts[i] != 1)
            return 0;
    return 1;
}

static void test_pipeline(void)
{
    tally t;
    gimg_pipeline_spec spec = spec_for(&t, N_ITEMS);
    int done = -1;
    CHECK(gimg_pipeline_run(&spec, &done) == GIMG_OK && done == N_ITEMS);
    CHECK(t.order_ok, "finish out of order");
    CHECK(each_once(t.loads, N_ITEMS) && each_once(t.computes, N_ITEMS) &&
          each_once(t.stores, N_ITEMS) && each_once(t.finished, N_ITEMS));
    CHECK(t.max_live <= 5, "%d items in flight, bound 5", t.max_live);
    CHECK(t.lanes_seen[0] && t.lanes_seen[1] && !t.lanes_seen[2]);

    /* Without compute and store stages; zero items. */
    spec = spec_for(&t, 10);
    spec.compute = NULL;
    spec.store = NULL;
    CHECK(gimg_pipeline_run(&spec, &done) == GIMG_OK && done == 10 && t.order_ok &&
          each_once(t.finished, 10));
    spec = spec_for(&t, 0);
    CHECK(gimg_pipeline_run(&spec, &done) == GIMG_OK && done == 0);
}

static void test_pipeline_failures(void)
{
    tally t;
    gimg_pipeline_spec spec = spec_for(&t, 50);
    t.fail_at = 17;
    int done;
    CHECK(gimg_pipeline_run(&spec, &done) == GIMG_E_FORMAT && done == 50);
    CHECK(t.order_ok && each_once(t.finished, 50));
    CHECK(t.stores[17] == 0 && t.stores[16] == 1 && t.stores[18] == 1);
    CHECK(t.statuses[17] == GIMG_E_FORMAT && t.statuses[18] == GIMG_OK);

    /* --fail-fast: nothing is started after the failure, what was in flight
     * completes, and every loaded item is finished (its state released). */
    spec = spec_for(&t, 50);
    t.fail_at = 17;
    spec.fail_fast = 1;
    CHECK(gimg_pipeline_run(&spec, &done) == GIMG_E_FORMAT);
    CHECK(done >= 18 && done <= 17 + 5, "finished %d", done);
    int loaded = 0;
    for (int i = 0; i < 50; i++)
        loaded += t.loads[i];
    CHECK(loaded == done && t.live == 0 && t.order_ok);
}

static void test_pipeline_stream(void)
{
    tally t;
    gimg_pipeline_spec spec = spec_for(&t, -1);
    t.stream_len = 37;
    spec.ordered_load = 1;
    int done;
    CHECK(gimg_pipeline_run(&spec, &done) == GIMG_OK && done == 37);
    CHECK(t.order_ok && t.load_in_order && each_once(t.finished, 37) && t.loads[37] == 0);
    spec = spec_for(&t, -1);
    t.stream_len = 0;
    spec.ordered_load = 1;
    CHECK(gimg_pipeline_run(&spec, &done) == GIMG_OK && done == 0);
}

/* The byte budget: while the lanes cannot compute (CUDA starting: here the
 * first compute waits), workers load past workers + 2 * lanes items, but
 * only until the items in flight hold max_bytes_in_flight; the finished
 * give their bytes back, so the whole batch still flows. */
static size_t t_bytes(void *user, void *state)
{
    return 100;
}

static gimg_status t_compute_slow_start(void *user, int lane, int i, void *state)
{
    if (i == 0)
        usleep(100 * 1000);
    return t_compute(user, lane, i, state);
}

static void test_pipeline_byte_budget(void)
{
    tally t;
    gimg_pipeline_spec spec = spec_for(&t, N_ITEMS);
    spec.max_in_flight = 40;
    spec.max_bytes_in_flight = 1200; /* 12 items of 100 bytes */
    spec.item_bytes = t_bytes;
    spec.compute = t_compute_slow_start;
    int done = -1;
    CHECK(gimg_pipeline_run(&spec, &done) == GIMG_OK && done == N_ITEMS);
    CHECK(t.order_ok && each_once(t.finished, N_ITEMS), "items lost or out of order");
    /* Past the 7 (3 workers + 2 x 2 lanes) items of the count alone, and
     * within the budget plus the loads running when it was reached. */
    CHECK(t.max_live > 7 && t.max_live <= 12 + 3, "%d items in flight at most", t.max_live);
    /* Without item_bytes the count alone bounds them, as before. */
    spec = spec_for(&t, N_ITEMS);
    spec.compute = t_compute_slow_start;
    CHECK(gimg_pipeline_run(&spec, &done) == GIMG_OK && done == N_ITEMS);
    CHECK(t.max_live <= 5, "%d items in flight, max_in_flight 5", t.max_live);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/gimg-batch.XXXXXX");
    if (!mkdtemp(g_dir))
        return 1;
    RUN(test_file_list);
    RUN(test_output_path);
    RUN(test_collisions);
    RUN(test_pipeline);
    RUN(test_pipeline_failures);
    RUN(test_pipeline_stream);
    RUN(test_pipeline_byte_budget);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        return 1;
    return check_summary();
}
