/*
 * remote.h — a tool's side of gimgd (gimgd(1)): the operations of a job
 * sent to the user's server, which holds the GPU warm, instead of paying
 * CUDA's start-up in every process. Internal to libgimg.
 *
 * A context (device.c) has one gimg_remote when its device may use the
 * server: --device gpu (the default GPU or gpu:all; a list naming GPUs
 * runs here) or auto, and neither --no-server nor GIMG_SERVER=off.
 *  - --device gpu: the first image's preparation connects to the server,
 *    starting it when none runs (the gimgd beside the tool's executable,
 *    else on PATH; a build without CUDA starts one only where GIMGD_DEVICE
 *    says which device it serves with, for tests), and CUDA is then never
 *    started in the tool.
 *  - --device auto: the operations its cost table (cost.h) predicts
 *    faster on the GPU, CUDA's start-up counted (or, once the server
 *    serves the job, a round trip and the pixels' way), and a batch of
 *    JPEGs that pays for the GPU's codecs, go to the server, started if
 *    none runs (the same start-up, paid once for the jobs after).
 * Whatever goes wrong with the server (none, refused, died, no answer
 * within GIMG_SERVER_TIMEOUT seconds, default 120, a malformed answer) is
 * recorded for -v, the server is left alone for the rest of the job, and
 * the operation runs here as it would have without it: the server costs
 * time at worst, never a failure.
 *
 * Thread-safe: a batch's lanes call it at once, each request on its own
 * connection.
 */
#ifndef GIMG_REMOTE_H
#define GIMG_REMOTE_H

#include "wire.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gimg_remote gimg_remote;

/* *out is NULL when dev may not use the server (cpu, a GPU list, or
 * no_server); fails only when out of memory. */
gimg_status gimg_remote_open(const gimg_device *dev, gimg_remote **out);
void gimg_remote_close(gimg_remote *r);

/* --device gpu: looks for the server (starting it as above) the first
 * time; auto: only says whether an operation found it already. 1 when it
 * serves this job. Cheap after the first call. */
int gimg_remote_prepare(gimg_remote *r, size_t work_bytes);
/* 1 when the server serves this job: --device auto calls it once its
 * cost table sends an operation to the server (gimg_ctx_server), and
 * looks for the server (starting it as above) the first time. */
int gimg_remote_wanted(gimg_remote *r);
/* 1 when a server already runs and serves this job: --device auto's
 * first question, so that a warm server's round trip, not a cold start,
 * is weighed. Looks the first time without starting one (none running:
 * a later gimg_remote_wanted may still start it). */
int gimg_remote_running(gimg_remote *r);
/* 1 while the server serves this job (none has failed); was_up: 1 once
 * it served it, even if it failed since. why: what it failed with, or "". */
int gimg_remote_up(gimg_remote *r);
int gimg_remote_was_up(gimg_remote *r);
const char *gimg_remote_why(gimg_remote *r);
/* How many requests the server computes at once (gimg_ctx_lanes). */
int gimg_remote_lanes(const gimg_remote *r);

/* The operations on the server: out gets the pixels (no metadata: the
 * caller carries it), owned by out (a private mapping of the reply,
 * released by gimg_image_free). On failure, out is empty, the reason is
 * recorded for -v, and the caller does the work itself. */
gimg_status gimg_remote_conv(gimg_remote *r, const gimg_image *in, const gimg_conv_opts *o,
                             gimg_image *out);
gimg_status gimg_remote_orient(gimg_remote *r, const gimg_image *in, gimg_orient_op op,
                               gimg_image *out);

/* The report operations on the server: *out as gimg_stats_compute and
 * gimg_hist_compute give it (out->counts malloc'd, gimg_hist_free). */
gimg_status gimg_remote_stats(gimg_remote *r, const gimg_image *in, const gimg_stats_opts *o,
                              gimg_stats *out);
gimg_status gimg_remote_hist(gimg_remote *r, const gimg_image *in, const gimg_hist_params *p,
                             gimg_hist *out);

/* The server's codecs (device.c, for the driver's GPU-codec path), per
 * lane thread: gimg_remote_jpeg_input has the thread's next operation on
 * an image without pixels send bits (a JPEG file, the caller's until
 * gimg_remote_jpeg_done) instead, for the server to decode;
 * gimg_remote_jpeg_output asks for the output as a JPEG under w's quality
 * and subsampling (NULL: pixels). Where the server encoded it, the
 * operation's out has no pixels and its device is gimg_remote_image, and
 * gimg_remote_take_jpeg hands over the file (no metadata; malloc'd).
 * Where it could not (no GPU codecs there), pixels come back as always. */
extern const struct gimg_dimage *const gimg_remote_image;
void gimg_remote_jpeg_input(const unsigned char *bits, size_t len);
int gimg_remote_has_jpeg_input(void);
void gimg_remote_jpeg_output(const gimg_write_opts *w);
gimg_status gimg_remote_take_jpeg(unsigned char **bits, size_t *len);
void gimg_remote_jpeg_done(void);

/* -v: whether the server served the job, its backend, the time spent in
 * it; or why it did not. Prints nothing for a job that never looked. */
void gimg_remote_report(const gimg_remote *r, FILE *f, const char *tool);
/* 1 once an operation ran on the server. */
int gimg_remote_served(const gimg_remote *r);

/* One request without an image to the running server (gimgd --status,
 * --stop); never starts one. */
gimg_status gimg_remote_call(gimg_wire_op op, int timeout_ms, gimg_wire_reply *reply);

#ifdef __cplusplus
}
#endif

#endif
