/*
 * tune_transpose — times other tile shapes of kernels/transpose.cu against
 * the ones it uses, for the pixel sizes whose speed depends most on them.
 * The kernel source is included so that its templates can be instantiated
 * with other shapes; each variant is checked against the CPU reference
 * before it is timed. `make tune` (needs a GPU); the shapes it finds best
 * go into shape_of().
 */
#include "../../kernels/transpose.cu"

#include "gimg.h"
#include "orient_internal.h"
#include "testimg.h"
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int kSide = 8192, kSets = 4, kRuns = 20;

struct Buffers {
    gimg_image h_in;
    size_t pitch;
    void *d_in[kSets], *d_out[kSets];
};

static Buffers make_buffers(int channels, gimg_sample s)
{
    Buffers b;
    if (gimg_image_alloc(&b.h_in, kSide, kSide, channels, s)) {
        fprintf(stderr, "tune: %s\n", gimg_last_error());
        exit(1);
    }
    testimg_fill_random(&b.h_in, 99);
    b.pitch = (b.h_in.stride_bytes + 15) & ~(size_t)15;
    for (int i = 0; i < kSets; i++) {
        CK(cudaMalloc(&b.d_in[i], b.pitch * kSide));
        CK(cudaMalloc(&b.d_out[i], b.pitch * kSide));
        bench_upload(b.d_in[i], b.pitch, b.h_in.data, b.h_in.stride_bytes, b.h_in.stride_bytes,
                     kSide);
    }
    return b;
}

static void free_buffers(Buffers &b)
{
    for (int i = 0; i < kSets; i++) {
        CK(cudaFree(b.d_in[i]));
        CK(cudaFree(b.d_out[i]));
    }
    gimg_image_free(&b.h_in);
}

/* Checks, then times, one shape for one op; prints a line. */
template <int E, bool T, int R, int C, int P, bool S>
static void variant(Buffers &b, gimg_orient_op op)
{
    gimg_orient_plan p = gimg_orient_plan_of(op);
    if (p.transpose != (int)T)
        return;
    auto run = [&](int i) {
        CK((launch_shape<E, T, R, C, P, S>(b.d_in[i % kSets], b.pitch, kSide, kSide,
                                           b.d_out[i % kSets], b.pitch, p.rev_rows, p.rev_cols,
                                           0)));
    };
    gimg_image ref, got;
    if (gimg_orient_cpu(&b.h_in, op, &ref) || gimg_orient_alloc_output(&b.h_in, op, &got))
        exit(1);
    CK(cudaMemset(b.d_out[0], 0xA5, b.pitch * kSide));
    run(0);
    CK(cudaMemcpy2D(got.data, got.stride_bytes, b.d_out[0], b.pitch, got.stride_bytes, kSide,
                    cudaMemcpyDeviceToHost));
    const bool ok = memcmp(ref.data, got.data, ref.stride_bytes * kSide) == 0;
    gimg_image_free(&ref);
    gimg_image_free(&got);
    if (!ok) {
        printf("MISMATCH E=%d %s %dx%d pad %d spread %d\n", E, gimg_orient_name(op), R, C, P, S);
        exit(1);
    }
    const double ms = median_ms(0, 3, kRuns, run);
    printf("E=%-2d %-10s %4dx%-4d pad %2d spread %d  %8.3f ms %6.0f GB/s%s\n", E,
           gimg_orient_name(op), R, C, P, S, ms, 2.0 * b.pitch * kSide / ms / 1e6,
           (R == shape_of(E, T).rows && C == shape_of(E, T).cols && P == shape_of(E, T).pad &&
            S == shape_of(E, T).spread) ? "  (current)" : "");
}

int main(void)
{
    const gimg_orient_op tr = GIMG_ORIENT_ROT90, fl = GIMG_ORIENT_FLOP;
    Buffers b = make_buffers(1, GIMG_U8);
    variant<1, true, 128, 32, 0, true>(b, tr);
    variant<1, true, 256, 32, 0, true>(b, tr);
    variant<1, true, 128, 64, 0, true>(b, tr);
    variant<1, true, 256, 64, 0, true>(b, tr);
    variant<1, false, 16, 512, 0, true>(b, fl);
    variant<1, false, 32, 512, 0, true>(b, fl);
    variant<1, false, 16, 1024, 0, true>(b, fl);
    free_buffers(b);
    b = make_buffers(3, GIMG_U8);
    variant<3, true, 128, 16, 28, false>(b, tr);
    variant<3, true, 128, 32, 0, true>(b, tr);
    variant<3, true, 256, 16, 28, false>(b, tr);
    variant<3, true, 128, 32, 28, false>(b, tr);
    variant<3, true, 64, 32, 44, false>(b, tr);
    variant<3, false, 8, 512, 0, true>(b, fl);
    variant<3, false, 16, 512, 0, true>(b, fl);
    variant<3, false, 8, 1024, 0, true>(b, fl);
    free_buffers(b);
    b = make_buffers(3, GIMG_U16);
    variant<6, true, 64, 16, 8, false>(b, tr);
    variant<6, true, 32, 32, 0, true>(b, tr);
    variant<6, false, 8, 256, 0, true>(b, fl);
    variant<6, false, 16, 256, 0, true>(b, fl);
    variant<6, false, 8, 512, 0, true>(b, fl);
    free_buffers(b);
    return 0;
}
