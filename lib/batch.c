/* batch.c — input lists, output names and the overlapping pipeline. */
#include "batch.h"
#include "cli.h"
#include "io_internal.h"

#include <errno.h>
#include <limits.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ input lists */

/* Where the check of a list has got to: it reads the list as it arrives,
 * so that an endless input (/dev/zero, `yes`) is refused after its first
 * PATH_MAX bytes rather than read to the input limit. A list holds file
 * names: none longer than PATH_MAX, no NUL inside a line, and no run of
 * PATH_MAX empty entries (which only an endless or binary input has). */
typedef struct {
    char sep;
    size_t pos;          /* bytes checked */
    size_t entry_start;  /* where the current entry began */
    size_t entry_number; /* 1-based: the line (or NUL-ended name) it is */
    size_t empty_run;    /* empty entries just before it */
    int refused;         /* the check failed (not an empty file) */
} list_scan;

static gimg_status list_check(const unsigned char *buf, size_t len, int at_end, void *user)
{
    list_scan *sc = user;
    const char *what = sc->sep ? "line" : "name";
    sc->refused = 1; /* until it returns GIMG_OK */
    for (; sc->pos < len; sc->pos++) {
        const unsigned char ch = buf[sc->pos];
        if (ch != (unsigned char)sc->sep) {
            if (ch == '\0')
                return gimg_fail(GIMG_E_FORMAT, "line %zu holds a NUL byte (for a list of "
                                                "NUL-separated names, add -0)", sc->entry_number);
            if (sc->pos - sc->entry_start >= PATH_MAX)
                return gimg_fail(GIMG_E_FORMAT, "%s %zu is longer than a path can be (%d bytes): "
                                                "not a list of file names", what, sc->entry_number,
                                 PATH_MAX);
            continue;
        }
        sc->empty_run = sc->pos == sc->entry_start ? sc->empty_run + 1 : 0;
        if (sc->empty_run >= PATH_MAX)
            return gimg_fail(GIMG_E_FORMAT, "%zu empty %ss in a row: not a list of file names",
                             sc->empty_run, what);
        sc->entry_start = sc->pos + 1;
        sc->entry_number++;
    }
    sc->refused = 0;
    return GIMG_OK;
}

gimg_status gimg_read_file_list(const char *path, int nul, char ***paths, int *n)
{
    unsigned char *buf;
    size_t len;
    *paths = NULL;
    *n = 0;
    char sep = nul ? '\0' : '\n';
    list_scan scan = {.sep = sep, .entry_number = 1};
    gimg_status st = gimg_slurp_checked(path, 0, list_check, &scan, &buf, &len);
    if (st == GIMG_E_FORMAT && !scan.refused) { /* "empty file": an empty list */
        buf = NULL;
        len = 0;
    } else if (st) {
        return st;
    } else if ((st = list_check(buf, len, 1, &scan))) { /* a regular file, read whole */
        gimg_slurp_free(buf, len);
        return st;
    }
    size_t count = 0;
    for (size_t i = 0; i < len; i++)
        count += buf[i] == (unsigned char)sep;
    /* One block: the pointer array, then the names, each NUL-terminated. */
    size_t ptr_bytes = (count + 2) * sizeof(char *);
    char **list = malloc(ptr_bytes + len + 1);
    if (!list) {
        gimg_slurp_free(buf, len);
        return gimg_fail(GIMG_E_NOMEM, "out of memory reading the list of files");
    }
    char *text = (char *)list + ptr_bytes;
    if (len) /* memcpy's source must not be NULL, even for 0 bytes */
        memcpy(text, buf, len);
    text[len] = '\0';
    gimg_slurp_free(buf, len);
    int k = 0;
    for (size_t start = 0; start < len;) {
        char *end = memchr(text + start, sep, len - start);
        size_t stop = end ? (size_t)(end - text) : len;
        text[stop] = '\0';
        if (stop > start) {
            if (k == INT_MAX - 1) {
                free(list);
                return gimg_fail(GIMG_E_LIMIT, "too many files in the list");
            }
            list[k++] = text + start;
        }
        start = stop + 1;
    }
    list[k] = NULL;
    *paths = list;
    *n = k;
    return GIMG_OK;
}

void gimg_file_list_free(char **paths)
{
    free(paths);
}

/* ----------------------------------------------------------- output names */

static int is_directory(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

gimg_status gimg_make_output_folder(const char *spec)
{
    if (!*spec || spec[strlen(spec) - 1] != '/' || is_directory(spec))
        return GIMG_OK;
    char *dir = strdup(spec);
    if (!dir)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    gimg_status st = GIMG_OK;
    for (char *p = dir + 1; *p && !st; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(dir, 0777) != 0 && errno != EEXIST)
            st = gimg_fail(GIMG_E_IO, "cannot create the folder %s: %s", gimg_cli_name(dir, 1),
                           strerror(errno));
        else if (!is_directory(dir))
            st = gimg_fail(GIMG_E_IO, "cannot create the folder %s: %s", gimg_cli_name(dir, 1),
                           "a file of that name is in the way");
        *p = '/';
    }
    free(dir);
    return st;
}

gimg_status gimg_make_parent_folders(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path)
        return GIMG_OK;
    char *dir = strndup(path, (size_t)(slash - path) + 1); /* with its '/' */
    if (!dir)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    gimg_status st = gimg_make_output_folder(dir);
    free(dir);
    return st;
}

int gimg_pattern_numbers(const char *spec)
{
    for (const char *p = strchr(spec, '%'); p; p = strchr(p + 2, '%')) {
        if (p[1] == 'i' || (p[1] >= '1' && p[1] <= '9' && p[2] == 'i'))
            return 1;
        if (!p[1])
            break;
    }
    return 0;
}

/* A growing string; on allocation failure ->data becomes NULL and stays so. */
typedef struct {
    char *data;
    size_t len, cap;
} strbuf;

static void sb_add(strbuf *b, const char *s, size_t n)
{
    if (!b->data)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->len + n + 1) * 2;
        char *p = realloc(b->data, cap);
        if (!p) {
            free(b->data);
            b->data = NULL;
            return;
        }
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void sb_str(strbuf *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

/* The parts of an input path: its folder, its file name, and where the
 * name's extension starts (the last dot, not a leading one). */
typedef struct {
    const char *dir, *name;
    size_t dir_len, stem_len;
    const char *ext; /* after the dot, or "" */
} path_parts;

static path_parts split_path(const char *input)
{
    path_parts p;
    if (!strcmp(input, "-"))
        input = "stdin";
    const char *slash = strrchr(input, '/');
    if (slash) {
        p.dir = input;
        p.dir_len = slash == input ? 1 : (size_t)(slash - input);
        p.name = slash + 1;
    } else {
        p.dir = ".";
        p.dir_len = 1;
        p.name = input;
    }
    const char *dot = strrchr(p.name, '.');
    if (dot && dot != p.name) {
        p.stem_len = (size_t)(dot - p.name);
        p.ext = dot + 1;
    } else {
        p.stem_len = strlen(p.name);
        p.ext = "";
    }
    return p;
}

gimg_status gimg_output_path(const char *spec, const char *input, int index, const char *ext,
                             char **out)
{
    path_parts p = split_path(input);
    strbuf b = {malloc(64), 0, 64};
    if (b.data)
        b.data[0] = '\0';
    size_t spec_len = strlen(spec);
    if (spec_len > 0 && (spec[spec_len - 1] == '/' || is_directory(spec))) {
        while (spec_len > 1 && spec[spec_len - 1] == '/')
            spec_len--;
        sb_add(&b, spec, spec_len);
        if (spec_len != 1 || spec[0] != '/')
            sb_str(&b, "/");
        if (ext) {
            sb_add(&b, p.name, p.stem_len);
            sb_str(&b, ".");
            sb_str(&b, ext);
        } else {
            sb_str(&b, p.name);
        }
    } else {
        for (const char *s = spec; *s; s++) {
            if (*s != '%') {
                sb_add(&b, s, 1);
                continue;
            }
            int width = 0;
            if (s[1] >= '1' && s[1] <= '9' && s[2] == 'i')
                width = *++s - '0';
            char num[32];
            switch (*++s) {
            case 'f': sb_add(&b, p.name, p.stem_len); break;
            case 'e': sb_str(&b, p.ext); break;
            case 'd': sb_add(&b, p.dir, p.dir_len); break;
            case '%': sb_str(&b, "%"); break;
            case 'i':
                snprintf(num, sizeof num, "%0*d", width, index);
                sb_str(&b, num);
                break;
            default:
                free(b.data);
                return gimg_fail(GIMG_E_USAGE,
                                 "-o: unknown '%%%.1s' in '%s' (use %%f, %%e, %%d, %%i, %%Ni "
                                 "or %%%%)",
                                 s, spec);
            }
            if (!*s)
                break;
        }
    }
    if (!b.data)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    if (b.len == 0) {
        free(b.data);
        return gimg_fail(GIMG_E_USAGE, "-o: '%s' gives an empty name for %s",
                         gimg_cli_name(spec, 1), gimg_cli_name(input, 0));
    }
    *out = b.data;
    return GIMG_OK;
}

/* dir without "." components and repeated slashes, in place. */
static void tidy_dir(char *dir)
{
    char *w = dir;
    for (const char *r = dir; *r;) {
        if (r[0] == '/' && (r[1] == '/' || (r[1] == '.' && (r[2] == '/' || !r[2])))) {
            r += r[1] == '/' ? 1 : 2;
            continue;
        }
        if (r == dir && r[0] == '.' && r[1] == '/') {
            r += 2;
            continue;
        }
        *w++ = *r++;
    }
    *w = '\0';
    if (w > dir + 1 && w[-1] == '/')
        w[-1] = '\0';
}

/* A comparable name for an output: its folder resolved (tidied when it does
 * not exist yet), then its file name. */
static char *output_key(const char *path)
{
    path_parts p = split_path(path);
    char dir[PATH_MAX], resolved[PATH_MAX];
    snprintf(dir, sizeof dir, "%.*s", (int)p.dir_len, p.dir);
    const char *d = realpath(dir, resolved) ? resolved : dir;
    if (d == dir)
        tidy_dir(dir);
    size_t n = strlen(d) + strlen(p.name) + 2;
    char *key = malloc(n);
    if (key)
        snprintf(key, n, "%s/%s", d, p.name);
    return key;
}

typedef struct {
    char *key;
    int index;
} keyed;

static int by_key(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

gimg_status gimg_check_output_collisions(char *const *inputs, char *const *outputs, int n)
{
    keyed *k = calloc((size_t)n + 1, sizeof *k);
    if (!k)
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    gimg_status st = GIMG_OK;
    int m = 0;
    for (int i = 0; i < n && !st; i++) {
        if (!strcmp(outputs[i], "-"))
            continue;
        k[m].index = i;
        if (!(k[m++].key = output_key(outputs[i])))
            st = gimg_fail(GIMG_E_NOMEM, "out of memory");
    }
    if (!st) {
        qsort(k, (size_t)m, sizeof *k, by_key);
        for (int i = 1; i < m; i++)
            if (!strcmp(k[i - 1].key, k[i].key)) {
                st = gimg_fail(GIMG_E_USAGE, "'%s' and '%s' would both be written to '%s'",
                               gimg_cli_name(inputs[k[i - 1].index], 0),
                               gimg_cli_name(inputs[k[i].index], 0),
                               gimg_cli_name(outputs[k[i].index], 1));
                break;
            }
    }
    for (int i = 0; i < m; i++)
        free(k[i].key);
    free(k);
    return st;
}

/* --------------------------------------------------------------- pipeline */

int gimg_cpu_count(void)
{
    int n = omp_get_num_procs();
    return n > 0 ? n : 1;
}

enum { SLOT_FREE, SLOT_LOADING, SLOT_LOADED, SLOT_COMPUTING, SLOT_COMPUTED, SLOT_STORING,
       SLOT_DONE };

typedef struct {
    int state;
    void *data;
    size_t bytes;      /* spec->item_bytes of a loaded item */
    gimg_status st;
    char message[512];
} slot;

/* Items waiting for a stage, first come first served: a ring of item
 * indices (at most cap items are in flight, so cap entries suffice). */
typedef struct {
    int *item;
    int head, count;
} queue;

/* Items live in a ring of max_in_flight slots: item i in slot i % cap. Item
 * i is loaded only once item i - cap is finished, so slots never clash.
 * Loaded items queue for the lanes, computed ones for the workers, so that
 * a thread finds its next item at once however many are in flight (a
 * GPU batch loads hundreds ahead while CUDA starts), and each kind of
 * thread sleeps on its own condition: an event wakes one thread that can
 * act on it, not all of them. */
typedef struct {
    const gimg_pipeline_spec *spec;
    pthread_mutex_t lock;
    pthread_cond_t lanes_cv;    /* an item was loaded */
    pthread_cond_t workers_cv;  /* an item was computed, or another may load */
    pthread_cond_t finish_cv;   /* the next item to finish is done */
    slot *ring;
    queue loaded, computed;
    int cap;           /* slots: the most items in flight */
    int base;          /* items in flight whatever their bytes */
    size_t bytes_in_flight;
    int next_load, next_finish;
    int n_total;       /* items in all: spec->n_items, or known at the end */
    int loading;       /* an ordered load is running */
    int stopped;       /* fail_fast after a failure: no new loads */
    int shutdown;      /* the finisher is done: threads exit */
    int busy;          /* stage callbacks running now (for spec->max_busy) */
    gimg_status first_failure;
    int lane_counter;
} pipeline;

static slot *slot_of(pipeline *p, int i)
{
    return &p->ring[i % p->cap];
}

static void push(pipeline *p, queue *q, int i)
{
    q->item[(q->head + q->count++) % p->cap] = i;
}

static int pop(pipeline *p, queue *q)
{
    int i = q->item[q->head];
    q->head = (q->head + 1) % p->cap;
    q->count--;
    return i;
}

/* Every thread re-examines its conditions (a stop, the end, a stage
 * slot freed under max_busy). */
static void wake_all(pipeline *p)
{
    pthread_cond_broadcast(&p->lanes_cv);
    pthread_cond_broadcast(&p->workers_cv);
    pthread_cond_broadcast(&p->finish_cv);
}

/* The state after `state` when the stage that follows may be absent. */
static int after(const gimg_pipeline_spec *spec, int state)
{
    if (state == SLOT_LOADED && !spec->compute)
        state = SLOT_COMPUTED;
    if (state == SLOT_COMPUTED && !spec->store)
        state = SLOT_DONE;
    return state;
}

/* Records the outcome of a stage and hands the item on; the caller holds
 * the lock. */
static void stage_done(pipeline *p, int i, gimg_status st, int next_state)
{
    slot *s = slot_of(p, i);
    if (st) {
        s->st = st;
        snprintf(s->message, sizeof s->message, "%s", gimg_last_error());
        next_state = SLOT_DONE;
        if (p->spec->fail_fast && !p->stopped) {
            p->stopped = 1;
            wake_all(p);
        }
    }
    s->state = next_state;
    if (next_state == SLOT_LOADED) {
        push(p, &p->loaded, i);
        pthread_cond_signal(&p->lanes_cv);
    } else if (next_state == SLOT_COMPUTED) {
        push(p, &p->computed, i);
        pthread_cond_signal(&p->workers_cv);
    } else if (next_state == SLOT_DONE && i == p->next_finish) {
        pthread_cond_signal(&p->finish_cv);
    }
}

static int may_load(const pipeline *p)
{
    const int in_flight = p->next_load - p->next_finish;
    if (p->stopped || p->loading || in_flight >= p->cap)
        return 0;
    if (p->spec->max_bytes_in_flight && in_flight >= p->base &&
        p->bytes_in_flight >= p->spec->max_bytes_in_flight)
        return 0;
    return p->n_total < 0 || p->next_load < p->n_total;
}

/* 1 if a stage may start now under spec->max_busy; the caller holds the lock.
 * A stage that starts counts itself in p->busy until it ends (end_stage). */
static int may_start(const pipeline *p)
{
    return p->spec->max_busy <= 0 || p->busy < p->spec->max_busy;
}

static void end_stage(pipeline *p)
{
    p->busy--;
    if (p->spec->max_busy > 0) /* whoever waits for a stage slot */
        wake_all(p);
}

/* Worker: stores finished computations first (they free memory), else loads. */
static void *worker_main(void *arg)
{
    pipeline *p = arg;
    const gimg_pipeline_spec *spec = p->spec;
    omp_set_num_threads(spec->worker_threads > 0 ? spec->worker_threads : 1);
    pthread_mutex_lock(&p->lock);
    while (!p->shutdown) {
        if (!may_start(p)) {
            pthread_cond_wait(&p->workers_cv, &p->lock);
            continue;
        }
        if (p->computed.count > 0) {
            const int i = pop(p, &p->computed);
            slot *s = slot_of(p, i);
            s->state = SLOT_STORING;
            p->busy++;
            pthread_mutex_unlock(&p->lock);
            gimg_status st = spec->store(spec->user, i, s->data);
            pthread_mutex_lock(&p->lock);
            end_stage(p);
            stage_done(p, i, st, SLOT_DONE);
            continue;
        }
        if (spec->load && may_load(p)) {
            const int i = p->next_load++;
            slot *s = slot_of(p, i);
            *s = (slot){.state = SLOT_LOADING};
            p->loading = spec->ordered_load;
            p->busy++;
            pthread_mutex_unlock(&p->lock);
            void *data = NULL;
            gimg_status st = spec->load(spec->user, i, &data);
            pthread_mutex_lock(&p->lock);
            end_stage(p);
            if (p->loading) {
                p->loading = 0;
                pthread_cond_signal(&p->workers_cv); /* the next ordered load */
            }
            if (!st && !data && spec->n_items < 0) {
                /* The end of an ordered input: item i does not exist. */
                p->n_total = i;
                p->next_load = i;
                s->state = SLOT_FREE;
                wake_all(p);
                continue;
            }
            s->data = data;
            if (!st && data && spec->item_bytes) {
                s->bytes = spec->item_bytes(spec->user, data);
                p->bytes_in_flight += s->bytes;
            }
            stage_done(p, i, st, after(spec, SLOT_LOADED));
            continue;
        }
        pthread_cond_wait(&p->workers_cv, &p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static void *lane_main(void *arg)
{
    pipeline *p = arg;
    const gimg_pipeline_spec *spec = p->spec;
    omp_set_num_threads(spec->lane_threads > 0 ? spec->lane_threads : 1);
    pthread_mutex_lock(&p->lock);
    int lane = p->lane_counter++;
    while (!p->shutdown) {
        if (p->loaded.count == 0 || !may_start(p)) {
            pthread_cond_wait(&p->lanes_cv, &p->lock);
            continue;
        }
        const int i = pop(p, &p->loaded);
        slot *s = slot_of(p, i);
        s->state = SLOT_COMPUTING;
        p->busy++;
        pthread_mutex_unlock(&p->lock);
        gimg_status st = spec->compute(spec->user, lane, i, s->data);
        pthread_mutex_lock(&p->lock);
        end_stage(p);
        stage_done(p, i, st, after(spec, SLOT_COMPUTED));
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* The progress line: "12/48 images, 5.1 images/s, 7 s left". */
static void show_progress(const gimg_pipeline_spec *spec, int done, double t0_ms)
{
    static double last_ms;
    double now = gimg_now_ms();
    if (now - last_ms < 100 && done != spec->n_items)
        return;
    last_ms = now;
    double rate = done / ((now - t0_ms) / 1e3 + 1e-9);
    const char *unit = spec->progress_unit ? spec->progress_unit : "images";
    if (spec->n_items >= 0 && rate > 0)
        fprintf(stderr, "\r\033[K%d/%d %s, %.1f %s/s, %.0f s left", done, spec->n_items, unit,
                rate, unit, (spec->n_items - done) / rate);
    else
        fprintf(stderr, "\r\033[K%d %s, %.1f %s/s", done, unit, rate, unit);
    fflush(stderr);
}

gimg_status gimg_pipeline_run(const gimg_pipeline_spec *spec, int *n_done)
{
    pipeline p = {.spec = spec, .n_total = spec->n_items};
    int workers = spec->workers > 0 ? spec->workers : 1;
    int lanes = spec->compute ? (spec->lanes > 0 ? spec->lanes : 1) : 0;
    p.cap = spec->max_in_flight > 0 ? spec->max_in_flight : workers + 2 * lanes;
    p.base = workers + 2 * lanes < p.cap ? workers + 2 * lanes : p.cap;
    if (n_done)
        *n_done = 0;
    p.ring = calloc((size_t)p.cap, sizeof *p.ring);
    p.loaded.item = calloc((size_t)p.cap, sizeof *p.loaded.item);
    p.computed.item = calloc((size_t)p.cap, sizeof *p.computed.item);
    pthread_t *threads = calloc((size_t)(workers + lanes), sizeof *threads);
    if (!p.ring || !p.loaded.item || !p.computed.item || !threads) {
        free(p.ring);
        free(p.loaded.item);
        free(p.computed.item);
        free(threads);
        return gimg_fail(GIMG_E_NOMEM, "out of memory");
    }
    pthread_mutex_init(&p.lock, NULL);
    pthread_cond_init(&p.lanes_cv, NULL);
    pthread_cond_init(&p.workers_cv, NULL);
    pthread_cond_init(&p.finish_cv, NULL);
    int started = 0;
    gimg_status st = GIMG_OK;
    for (int t = 0; t < workers + lanes && !st; t++) {
        if (pthread_create(&threads[t], NULL, t < workers ? worker_main : lane_main, &p) != 0)
            st = gimg_fail(GIMG_E_NOMEM, "cannot start a thread: %s", strerror(errno));
        else
            started++;
    }
    /* Without every thread the stages might never run; stop at once. */
    if (st) {
        pthread_mutex_lock(&p.lock);
        p.stopped = 1;
        p.n_total = 0;
        wake_all(&p);
        pthread_mutex_unlock(&p.lock);
    }

    double t0 = gimg_now_ms();
    pthread_mutex_lock(&p.lock);
    for (;;) {
        int i = p.next_finish;
        int all_done = (p.n_total >= 0 && i >= p.n_total) || (p.stopped && i >= p.next_load);
        if (all_done)
            break;
        slot *s = slot_of(&p, i);
        if (i >= p.next_load || s->state != SLOT_DONE || !may_start(&p)) {
            pthread_cond_wait(&p.finish_cv, &p.lock);
            continue;
        }
        p.busy++; /* finish may encode (a transform's standard output) */
        pthread_mutex_unlock(&p.lock);
        if (spec->progress)
            fputs("\r\033[K", stderr);
        if (s->st && !p.first_failure)
            p.first_failure = s->st;
        if (spec->finish)
            spec->finish(spec->user, i, s->data, s->st, s->message);
        if (spec->progress)
            show_progress(spec, i + 1, t0);
        pthread_mutex_lock(&p.lock);
        p.busy--;
        s->state = SLOT_FREE;
        s->data = NULL;
        p.bytes_in_flight -= s->bytes;
        s->bytes = 0;
        p.next_finish++;
        if (spec->max_busy > 0)
            wake_all(&p);
        pthread_cond_signal(&p.workers_cv); /* a slot to load into */
    }
    p.shutdown = 1;
    wake_all(&p);
    pthread_mutex_unlock(&p.lock);
    for (int t = 0; t < started; t++)
        pthread_join(threads[t], NULL);
    if (spec->progress) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    if (n_done)
        *n_done = p.next_finish;
    pthread_cond_destroy(&p.lanes_cv);
    pthread_cond_destroy(&p.workers_cv);
    pthread_cond_destroy(&p.finish_cv);
    pthread_mutex_destroy(&p.lock);
    free(p.ring);
    free(p.loaded.item);
    free(p.computed.item);
    free(threads);
    if (st)
        return st;
    if (p.first_failure)
        return gimg_fail(p.first_failure, "%s", "some items failed");
    return GIMG_OK;
}
