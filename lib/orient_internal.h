/* orient_internal.h — what orient.c shares with the GPU dispatch and tests. */
#ifndef GIMG_ORIENT_INTERNAL_H
#define GIMG_ORIENT_INTERNAL_H

#include "gimg_orient.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every symmetry is: maybe transpose, then index the source's rows and/or
 * columns backwards. With T = transpose:
 *   out(r, c) = in(rr(T ? c : r), cc(T ? r : c)),
 * rr(i) = rev_rows ? H-1-i : i, cc(j) = rev_cols ? W-1-j : j. */
typedef struct { int transpose, rev_rows, rev_cols; } gimg_orient_plan;

/* --device auto and the symmetries: they move each byte once, so the GPU
 * saves milliseconds at most: on an H100 machine with 16 cores, rot90 of
 * 8192x8192 RGB took 19 ms on the CPU and 37 ms on the GPU with its
 * transfers from pageable memory, 11 ms since they go through pinned
 * staging, 3.9 and 2.7 ms at 4096x4096 (tests/bench/bench_transpose, "end
 * to end"). CUDA's start-up (about 0.4 s there) is far more than that
 * saving, so the cost table (cost.h, whose defaults these figures are)
 * keeps them on the CPU but for images of gigabytes, or few threads;
 * --device gpu still uses the GPU. */

/* The plan of op; AUTO's is the identity {0, 0, 0} (a copy): callers
 * resolve AUTO from the image first. */
gimg_orient_plan gimg_orient_plan_of(gimg_orient_op op);
/* Allocates the output image of op for in (caller frees); AUTO is
 * resolved from in's orientation, here and in gimg_orient_cpu_into. */
gimg_status gimg_orient_alloc_output(const gimg_image *in, gimg_orient_op op, gimg_image *out);
/* CPU work into an already allocated output of the right size. */
void gimg_orient_cpu_into(const gimg_image *in, gimg_orient_op op, gimg_image *out);

/* Where a transpose's bands are placed, they are gathered in blocks of
 * output columns, so that each of the output's rows gets
 * GIMG_ORIENT_SEGMENT_BYTES at a time, one write each (the file's lock
 * makes a file's writes one at a time, and each costs a system call and
 * zeroes the file system's partial blocks: 3.2 GB written 2 KB at a time
 * took 8.9-10.3 s on a 2-core VM, 8 KB at a time 7.0 s, 16 KB 4.7 s), in
 * at most GIMG_ORIENT_BLOCK_BYTES (two are held: one filled while the
 * other is written) and the memory budget / GIMG_BAND_SHARE. The bands
 * of GIMG_ORIENT_BAND_BYTES: a band of few rows writes a few bytes into
 * each of the block's rows, each a cache line read and written back
 * (rot90 of a 32768^2 RGB PPM: 12.0 s in bands of 42 rows, 8.7 s of 680). */
#define GIMG_ORIENT_SEGMENT_BYTES ((size_t)8 << 10)
#define GIMG_ORIENT_BLOCK_BYTES ((size_t)256 << 20)
#define GIMG_ORIENT_BAND_BYTES ((size_t)64 << 20)

struct gimg_band_writer;
/* gimg_orient_spool_add, the bands placed straight into the output w
 * instead of the temporary file where w takes blocks at their places
 * (band.h's gimg_band_writer_places): a transpose's bands gathered in
 * blocks of output columns (above), the others' each written where it
 * goes. next then gives no rows. Every band goes the same way (w NULL:
 * spooled); w must outlive s, whose free waits for w's writing of its
 * blocks. */
gimg_status gimg_orient_spool_place(gimg_orient_spool *s, const gimg_image *band, int y0,
                                    struct gimg_band_writer *w);

#ifdef __cplusplus
}
#endif

#endif
