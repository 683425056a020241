/*
 * wire.h — how the tools and gimgd talk: the server's folder and socket,
 * one request and one reply per connection, and the operations' options
 * as bytes. Shared by the client (remote.c) and the server (serve.c).
 * Internal to libgimg.
 *
 * Place: $XDG_RUNTIME_DIR/gimg/, else /tmp/gimg-UID/, a folder of the
 * user's, mode 0700 (gimg_wire_dir makes it, and refuses one that is not
 * a folder of this user's that no one else may enter); in it the socket
 * gimgd.sock (0600), the lock gimgd.lock (held by the running server, its
 * pid inside) and the log gimgd.log.
 *
 * A connection carries one request and one reply, each a single
 * SOCK_SEQPACKET message of a fixed-size header, with at most one file
 * descriptor (SCM_RIGHTS): a memory file (memfd) holding the options (at
 * offset 0, options_bytes) and the pixels (at pixels_offset, page-aligned,
 * rows packed). Nothing else crosses the socket: the pixels are mapped
 * from the memory file on the other side, not copied through the kernel.
 * The sender seals the file against writing, shrinking and growing before
 * sending it, and the receiver refuses one that is not sealed so: a file
 * that shrank under a mapping would kill the reader (SIGBUS), one written
 * after its checks could change what was checked.
 *
 * A large image goes through a buffer of the server's instead (BUFFER,
 * then the request on the same connection with input BUFFERED and no
 * descriptor): a memory file the server keeps mapped and reuses from
 * request to request, sealed against shrinking and growing, which the
 * client maps, fills, and reads the output back from (in_buffer), then
 * closes the connection, which gives the buffer back. Fresh memory files
 * cost their pages' allocation on both sides (about 30 ms for 48 MB);
 * the server's buffers are allocated once.
 *
 * Both ends are one build of one machine: the headers are native structs,
 * and a version that differs is refused.
 */
#ifndef GIMG_WIRE_H
#define GIMG_WIRE_H

#include "gimg.h"
#include "gimg_conv.h"
#include "gimg_hist.h"
#include "gimg_orient.h"
#include "gimg_stats.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GIMG_WIRE_MAGIC 0x67696d64u /* "gimd" */
#define GIMG_WIRE_VERSION 1
/* The largest options a request may carry: 64 kernels of 255 x 255 taps,
 * twice (a gradient magnitude's two), with their factors. */
#define GIMG_WIRE_MAX_OPTIONS_BYTES ((size_t)64 << 20)

typedef enum {
    GIMG_WIRE_PING = 1, /* no image: the reply says the server's backend and lanes */
    GIMG_WIRE_STATUS,   /* no image: the reply's message is gimgd --status's text */
    GIMG_WIRE_STOP,     /* no image: the server stops accepting and exits when idle */
    GIMG_WIRE_CONV,     /* options gimg_wire_put_conv's; the reply: the image convolved */
    GIMG_WIRE_ORIENT,   /* options: one uint32_t, the op (never auto); the reply: the
                           image turned (pixels only: the client carries the metadata) */
    GIMG_WIRE_STATS,    /* options: a gimg_stats_opts; the reply's result: a gimg_stats */
    GIMG_WIRE_HIST,     /* options: a gimg_hist_params; the reply's result: a gimg_hist
                           (counts NULL) then its counts, channels * bins uint64_t */
    GIMG_WIRE_BUFFER    /* no image: input_bytes, the size wanted; the reply: a buffer of
                           the server's (result_bytes long) for this connection's next
                           request, input GIMG_WIRE_BUFFERED */
} gimg_wire_op;

/* An image's pixels as they cross: the layout, the rows packed. */
typedef struct {
    uint32_t width, height, channels, sample, maxval;
} gimg_wire_image;

/* How a transform's input comes, and its output may go back: as pixels,
 * or as a JPEG file (the GPU codecs' path through the server: the file
 * as it is, no metadata back). */
enum { GIMG_WIRE_PIXELS = 0, GIMG_WIRE_JPEG = 1, GIMG_WIRE_BUFFERED = 2 };

typedef struct {
    uint32_t magic, version, op, reserved;
    gimg_wire_image image;   /* ops with an image; zero otherwise. For a JPEG input, the
                                layout its header gives (8-bit gray or RGB) */
    uint32_t options_bytes;  /* at offset 0 of the memory file */
    uint64_t pixels_offset;  /* of the memory file; a multiple of the page size: where
                                the pixels are, or the JPEG file */
    uint32_t input;          /* GIMG_WIRE_PIXELS or GIMG_WIRE_JPEG (CONV, ORIENT) */
    uint32_t jpeg_out;       /* 1: the output wanted as a JPEG, where the server's GPU
                                encodes it; else, and otherwise, pixels come back */
    uint64_t input_bytes;    /* a JPEG input's length */
    uint32_t jpeg_quality;   /* jpeg_out: 1..100 */
    uint32_t jpeg_subsampling; /* jpeg_out: a gimg_subsampling */
} gimg_wire_request;

typedef struct {
    uint32_t magic, version;
    int32_t status;          /* gimg_status; not GIMG_OK: message says why */
    uint32_t lanes;          /* PING: how many requests the server computes at once */
    gimg_wire_image image;   /* the output, when the op makes one */
    uint64_t result_bytes;   /* the result's, at offset 0 of the reply's memory file */
    uint32_t jpeg;           /* 1: the result is the output as a JPEG file without
                                metadata (image: its layout), and no pixels follow */
    uint32_t in_buffer;      /* 1: the output's pixels are in the connection's buffer, at
                                pixels_offset, and no memory file came */
    uint64_t pixels_offset;  /* the output's pixels', in that file (page-aligned) */
    uint64_t settings;       /* PING: the server's gimg_wire_settings() */
    double server_ms;        /* the request's time in the server, queueing included */
    char backend[96];        /* "gpu 0 (NVIDIA H100 80GB HBM3)", "cpu (16 threads)" */
    char message[1024];      /* the error, or STATUS's text */
} gimg_wire_reply;

/* The server's folder in dir[size] (made 0700 when missing and create is
 * 1; the server's side makes it, a client only looks); fails with
 * GIMG_E_IO naming the folder when it is missing (and not to be made) or
 * cannot be made, or is not a folder of this user's closed to others. The
 * socket, lock and log paths are the folder's with their names
 * (gimg_wire_path). */
gimg_status gimg_wire_dir(char *dir, size_t size, int create);
gimg_status gimg_wire_path(const char *name, int create, char *path, size_t size);

/* A fingerprint of what, besides the request, changes how a server
 * computes: gimg's version, the environment variables that GPU work reads
 * (GIMG_GPU_MEM_LIMIT, GIMG_NVJPEG_LIBRARY, CUDA_VISIBLE_DEVICES), and the
 * gimgd executable `program` (its device, inode, size and time: another
 * build is another server). A tool uses only a server whose fingerprint
 * is the one it would start; GIMG_WIRE_SETTINGS names them for messages. */
uint64_t gimg_wire_settings(const char *program);
#define GIMG_WIRE_SETTINGS "GIMG_GPU_MEM_LIMIT, GIMG_NVJPEG_LIBRARY, CUDA_VISIBLE_DEVICES"

/* The page-aligned offset after `bytes` (the pixels' place after the
 * options); 0 with *overflow set where it would not fit in size_t. */
size_t gimg_wire_align(size_t bytes, int *overflow);

/* Memory files. gimg_wire_memfd: a file of `bytes`, mapped for writing at
 * *map (NULL when bytes is 0); gimg_wire_seal unmaps that and seals the
 * file; both return -1 and record an error on failure. gimg_wire_map:
 * checks that fd is a sealed memory file of at least need bytes (sealed
 * against writing and shrinking) and maps it whole, read-only (writable
 * copy-on-write when private is 1); *map_bytes is its size. */
int gimg_wire_memfd(const char *name, size_t bytes, unsigned char **map);
gimg_status gimg_wire_seal(int fd, unsigned char *map, size_t bytes);
/* The same without a mapping, for what is copied in and out whole (a
 * JPEG's bits, a result, a small image): gimg_wire_memfd_of makes a
 * sealed file of `bytes` holding the n pieces (zeros elsewhere), written
 * with pwrite (a piece: `rows` runs of `bytes`, stride apart in memory,
 * one after the other in the file from offset; rows 0 is one run;
 * gimg_wire_image_piece gives an image's pixels, packed);
 * gimg_wire_read checks fd as gimg_wire_map does and reads [offset,
 * offset + bytes) of it into dst. A mapping's undoing (munmap) stops
 * every other thread of the process for a moment (their TLBs are
 * flushed), which at 2000 requests a second in a server or a batch of
 * 32 lanes costs more than the copy: 16 MP photos through gimgd went
 * from 141-152 to 166-168 a second on one H200, from 157-182 to 305-309
 * on two (tests/bench/RESULTS.md, stop 48). */
typedef struct {
    size_t offset;
    const void *data;
    size_t bytes;
    int rows;
    size_t stride;
} gimg_wire_piece;
int gimg_wire_memfd_of(const char *name, size_t bytes, const gimg_wire_piece *pieces, int n);
gimg_wire_piece gimg_wire_image_piece(size_t offset, const gimg_image *im);
gimg_status gimg_wire_read(int fd, size_t need, size_t offset, void *dst, size_t bytes);
gimg_status gimg_wire_map(int fd, size_t need, int private_copy, unsigned char **map,
                          size_t *map_bytes);

/* One message of a fixed size with at most one descriptor. send: fd -1 for
 * none. recv: waits up to timeout_ms (-1: no limit); a message of another
 * size, a truncated one, or more than one descriptor is refused
 * (GIMG_E_FORMAT); the end of the connection is GIMG_E_IO "closed"; *fd is
 * -1 when none came. Neither raises SIGPIPE. */
gimg_status gimg_wire_send(int sock, const void *msg, size_t size, int fd);
gimg_status gimg_wire_recv(int sock, void *msg, size_t size, int *fd, int timeout_ms);

/* The pixels of a wire image: its sizes checked against the pixel limit
 * and for overflow, the samples' type and maxval for sense (GIMG_E_LIMIT,
 * GIMG_E_FORMAT). *bytes: its packed size. */
gimg_status gimg_wire_image_check(const gimg_wire_image *w, size_t *bytes);
void gimg_wire_image_of(const gimg_image *im, gimg_wire_image *w);
/* Copies im's rows, packed, to dst. */
void gimg_wire_pack(const gimg_image *im, unsigned char *dst);
/* An image over a mapping of pixels (the caller checked w and its bytes):
 * data points into it, nothing is owned. */
void gimg_wire_view(const gimg_wire_image *w, unsigned char *pixels, gimg_image *im);

/* Convolution options as bytes: gimg_wire_conv_bytes, the size
 * gimg_wire_put_conv writes; gimg_wire_get_conv reads them back into *o
 * (kernels malloc'd, freed by gimg_wire_free_conv), refusing any size,
 * kind, anchor, mode or count out of range and any length that does not
 * add up (GIMG_E_FORMAT). */
size_t gimg_wire_conv_bytes(const gimg_conv_opts *o);
void gimg_wire_put_conv(const gimg_conv_opts *o, unsigned char *dst);
gimg_status gimg_wire_get_conv(const unsigned char *src, size_t len, gimg_conv_opts *o);
void gimg_wire_free_conv(gimg_conv_opts *o);

/* The report operations' options, checked as they arrive (GIMG_E_FORMAT
 * for any field out of range). */
gimg_status gimg_wire_check_stats_opts(const gimg_stats_opts *o);
gimg_status gimg_wire_check_hist_params(const gimg_hist_params *p);

/* The largest JPEG file a request may carry. */
#define GIMG_WIRE_MAX_JPEG_BYTES ((uint64_t)1 << 30)

/* An image request as the server reads it:
 *  - gimg_wire_check_request: the header alone (an operation with an
 *    image, the image's sizes against the pixel limit, the options' size
 *    and the pixels' offset, a JPEG input's and output's settings), before
 *    anything is mapped or allocated; *file_bytes: the least the memory
 *    file must hold;
 *  - gimg_wire_get_options: the options at the file's start (file:
 *    file_bytes at least), checked; gimg_wire_free_options releases
 *    what they hold. */
typedef union {
    gimg_conv_opts conv;     /* GIMG_WIRE_CONV */
    uint32_t orient;         /* GIMG_WIRE_ORIENT: a gimg_orient_op, never auto */
    gimg_stats_opts stats;   /* GIMG_WIRE_STATS */
    gimg_hist_params hist;   /* GIMG_WIRE_HIST */
} gimg_wire_options;
gimg_status gimg_wire_check_request(const gimg_wire_request *q, size_t *file_bytes);
gimg_status gimg_wire_get_options(const gimg_wire_request *q, const unsigned char *file,
                                  gimg_wire_options *o);
void gimg_wire_free_options(const gimg_wire_request *q, gimg_wire_options *o);

#ifdef __cplusplus
}
#endif

#endif
