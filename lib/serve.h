/*
 * serve.h — gimgd's server (gimgd(1)): listens on the user's socket
 * (wire.h) and computes the tools' requests on one context, held warm.
 *
 * Each connection gets a thread: its peer must be this user
 * (SO_PEERCRED), its request must come within a few seconds and pass
 * every check of wire.h before anything is allocated for it. Requests
 * then wait for a free lane of the context (gimg_ctx_lanes: two per GPU,
 * one on the CPU): that queue is what bounds the memory the server holds,
 * GPU memory included (GIMG_GPU_MEM_LIMIT as for the tools), so that many
 * clients at once (make -j32) wait rather than fail. A request that fails
 * gets its message in the reply; the client then does the work itself.
 *
 * A GPU device is started (CUDA, nvJPEG) before the socket listens, so
 * that a GPU that cannot be used fails the start, not the requests.
 *
 * The server exits after idle_s seconds without a request (none running),
 * on a STOP request once the running ones are answered, and on SIGTERM or
 * SIGINT likewise. Before exiting it removes the socket, then answers
 * whoever connected meanwhile.
 */
#ifndef GIMG_SERVE_H
#define GIMG_SERVE_H

#include "gimg.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    gimg_device device;  /* what the requests compute on (no_server is set) */
    double idle_s;       /* exit after this long without requests; 0: never */
    int lock_fd;         /* gimgd.lock, held (flock) by the caller */
    int ready_fd;        /* -1, or a descriptor that gets one byte once the socket
                            listens, and is closed */
    FILE *log;           /* one line per event worth keeping (start, refusals, exit) */
    int log_requests;    /* also one line per request */
} gimg_serve_opts;

/* The check every connection passes: its peer is this process's user
 * (SO_PEERCRED); *uid and *pid are the peer's (-1 when unknown). */
int gimg_serve_peer_ok(int sock, long *uid, long *pid);

/* Serves until it should exit. Fails (before serving) when the socket
 * cannot be made or the context not opened. */
gimg_status gimg_serve(const gimg_serve_opts *o);

#ifdef __cplusplus
}
#endif

#endif
