/*
 * batch.h — many images per process: input lists, output names, and the
 * pipeline that overlaps the reading, computing and writing of successive
 * images.
 *
 * The pipeline has three stages per item and one in-order step:
 *
 *   load     on a CPU worker: read and decode input i
 *   compute  on a lane: one per GPU stream, or CPU threads
 *   store    on a CPU worker: encode and write
 *   finish   on the calling thread, in input order: print the report or
 *            the error, update the progress line
 *
 * so that while a lane computes image i, workers decode image i+1 and
 * encode image i-1. Items are bounded in flight (max_in_flight), so memory
 * stays that of a few images however long the batch is.
 *
 * Ownership: the list and path functions allocate what they return; the
 * caller frees it as stated. The pipeline owns nothing of the items: each
 * item's state is the tool's, created by load and released by finish.
 */
#ifndef GIMG_BATCH_H
#define GIMG_BATCH_H

#include "gimg.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ input lists */

/* Reads paths from path ("-" = standard input): one per line, or separated
 * by NUL bytes when nul is set (for names holding newlines: find -print0).
 * Empty entries are skipped; nothing else is trimmed. A NUL in a line
 * (without nul), an entry of PATH_MAX bytes or more, or PATH_MAX empty
 * entries in a row is refused (GIMG_E_FORMAT) as soon as it is read, so an
 * endless list (/dev/zero) ends at once. *paths is a NULL-terminated array
 * the caller releases with gimg_file_list_free(). */
gimg_status gimg_read_file_list(const char *path, int nul, char ***paths, int *n);
void gimg_file_list_free(char **paths);

/* ----------------------------------------------------------- output names */

/* The output path of input number index (1-based) under the -o value spec:
 *  - spec ends with '/', or names an existing directory: DIR/NAME, where NAME
 *    is the input's file name, its extension replaced by that of ext when
 *    ext is not NULL (the tools pass -f's format name);
 *  - otherwise a pattern: %f the input's file name without its extension,
 *    %e its extension (without the dot; empty if none), %d its directory
 *    ("." if none), %i the index, %Ni the index zero-padded to N digits (N
 *    1-9), %% a percent sign. Any other %-sequence is a usage error.
 * A spec without '%' names one file, whatever the input. Standard input
 * ("-") is named "stdin". *out is malloc'd; the caller frees. */
gimg_status gimg_output_path(const char *spec, const char *input, int index, const char *ext,
                             char **out);
/* 1 if a pattern numbers its files (%i or %Ni), as the images of a stream,
 * which have no names of their own, need. */
int gimg_pattern_numbers(const char *spec);
/* An output spec DIR/ (ending in '/'): makes the folder with its parents,
 * as mkdir -p does, when it does not exist; other specs: nothing. Called
 * after every check and before any work. */
gimg_status gimg_make_output_folder(const char *spec);
/* The folders an output path names (those of "out/%d/%f.png" once named,
 * for each input), made with their parents when they do not exist. */
gimg_status gimg_make_parent_folders(const char *path);
/* Fails with GIMG_E_USAGE, naming both inputs, when two outputs name the
 * same file (compared after resolving their folders), before any work. */
gimg_status gimg_check_output_collisions(char *const *inputs, char *const *outputs, int n);

/* --------------------------------------------------------------- pipeline */

typedef struct {
    int n_items;       /* >= 0, or -1: until load reports the end */
    int workers;       /* CPU threads for load and store (>= 1) */
    int lanes;         /* compute threads (>= 1): one per GPU stream, or per CPU
                          worker for single-threaded CPU work */
    int lane_threads;  /* OpenMP threads each lane's compute may use (>= 1) */
    int worker_threads; /* OpenMP threads each worker's load and store may use (>= 1) */
    int max_busy;      /* the most stage callbacks (load, compute, store) running at
                          once, so that workers and lanes together use no more CPU
                          threads than that; 0 = no bound (GPU lanes, which wait) */
    int max_in_flight; /* items loaded but not finished; 0 = workers + 2 * lanes */
    /* With item_bytes: past workers + 2 * lanes items in flight, load more
     * (up to max_in_flight) only while those in flight hold fewer bytes
     * than this, so that workers go on decoding while the lanes cannot
     * compute yet (CUDA starting) without a bound on memory; 0 = none. */
    size_t max_bytes_in_flight;
    size_t (*item_bytes)(void *user, void *state); /* memory a loaded item holds */
    int ordered_load;  /* 1: load is called in index order, one at a time (a
                          stream read from a pipe) */
    int fail_fast;     /* 1: after a failure, start no new item */
    int progress;      /* 1: a one-line progress display on stderr */
    const char *progress_unit; /* "images" */

    /* Stage callbacks; a stage may be NULL (skipped). Each returns a status;
     * on failure the item skips its later stages and finish gets the status
     * and the message the failing stage recorded. load sets *state (NULL with
     * GIMG_OK from an ordered load: the end of the input). */
    gimg_status (*load)(void *user, int index, void **state);
    gimg_status (*compute)(void *user, int lane, int index, void *state);
    gimg_status (*store)(void *user, int index, void *state);
    /* In order, for every item loaded (state may be NULL after a failed
     * load); st and message say how it went. Releases the state. */
    void (*finish)(void *user, int index, void *state, gimg_status st, const char *message);
    void *user;
} gimg_pipeline_spec;

/* Runs the items through the stages. Returns GIMG_OK when every item
 * succeeded, otherwise the status of the first failure (its message was
 * passed to finish; the batch went on unless fail_fast). *n_done (if not
 * NULL) is the number of items finished. */
gimg_status gimg_pipeline_run(const gimg_pipeline_spec *spec, int *n_done);

/* The number of CPU threads the machine offers this process. */
int gimg_cpu_count(void);

#ifdef __cplusplus
}
#endif
#endif /* GIMG_BATCH_H */
