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

#ifdef __cplusplus
}
#endif

#endif
