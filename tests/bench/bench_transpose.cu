/*
 * bench_transpose — validates, then times, the symmetry kernels.
 *
 * For 8192x8192 gray, RGB and RGBA images of 8 and 16 bits, and each op:
 *  1. checks the kernel's output against the CPU reference (bit for bit,
 *     output poisoned first); a mismatch stops the benchmark with exit 1;
 *  2. times it with CUDA events (warm-up, then the median of many runs),
 *     rotating over several buffer pairs so that the data is several times
 *     the L2 and the cache cannot serve repeated runs;
 *  3. prints GB/s (bytes read + written), the ratio to a device-to-device
 *     copy of the same bytes measured in the same run, and the same figures
 *     for nppiTranspose when NPP is present.
 * Then it measures the end-to-end break-even of --device auto: the CPU
 * backend against upload + kernel + download, from host memory as the tools
 * hold it.
 */
#include "gimg.h"
#include "gpu_internal.h"
#include "orient_internal.h"
#include "testimg.h"
#include "transpose.h"
#include "bench.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef GIMG_HAVE_NPP
#include <nppi.h>
#endif

static const int kSide = 8192, kSets = 4, kWarmup = 3, kRuns = 30;

static const gimg_orient_op kOps[] = {GIMG_ORIENT_TRANSPOSE, GIMG_ORIENT_ROT90,
                                      GIMG_ORIENT_ROT270,    GIMG_ORIENT_TRANSVERSE,
                                      GIMG_ORIENT_FLIP,      GIMG_ORIENT_FLOP,
                                      GIMG_ORIENT_ROT180};

#ifdef GIMG_HAVE_NPP
static NppStatus npp_transpose(const BenchLayout &l, const void *in, int in_step, void *out,
                               int out_step, NppStreamContext c)
{
    NppiSize roi = {kSide, kSide};
    if (l.sample == GIMG_U8) {
        const Npp8u *s = (const Npp8u *)in;
        Npp8u *d = (Npp8u *)out;
        return l.channels == 1 ? nppiTranspose_8u_C1R_Ctx(s, in_step, d, out_step, roi, c)
             : l.channels == 3 ? nppiTranspose_8u_C3R_Ctx(s, in_step, d, out_step, roi, c)
                               : nppiTranspose_8u_C4R_Ctx(s, in_step, d, out_step, roi, c);
    }
    const Npp16u *s = (const Npp16u *)in;
    Npp16u *d = (Npp16u *)out;
    return l.channels == 1 ? nppiTranspose_16u_C1R_Ctx(s, in_step, d, out_step, roi, c)
         : l.channels == 3 ? nppiTranspose_16u_C3R_Ctx(s, in_step, d, out_step, roi, c)
                           : nppiTranspose_16u_C4R_Ctx(s, in_step, d, out_step, roi, c);
}
#endif

static int validate(gimg_gpu *g, const BenchLayout &l, gimg_orient_op op, const gimg_image &h_in,
                    const void *d_in, size_t pitch, void *d_out)
{
    gimg_orient_plan p = gimg_orient_plan_of(op);
    gimg_image ref, got;
    if (gimg_orient_cpu(&h_in, op, &ref) || gimg_orient_alloc_output(&h_in, op, &got)) {
        fprintf(stderr, "bench: %s\n", gimg_last_error());
        exit(1);
    }
    CK(cudaMemsetAsync(d_out, 0xA5, pitch * kSide, g->stream));
    CK(gimg_cuda_orient(d_in, pitch, kSide, kSide, d_out, pitch, (int)gimg_pixel_bytes(&h_in),
                        p.transpose, p.rev_rows, p.rev_cols, g->stream));
    CK(cudaMemcpy2DAsync(got.data, got.stride_bytes, d_out, pitch, got.stride_bytes, kSide,
                         cudaMemcpyDeviceToHost, g->stream));
    CK(cudaStreamSynchronize(g->stream));
    int ok = memcmp(ref.data, got.data, ref.stride_bytes * kSide) == 0;
    if (!ok)
        printf("MISMATCH: %s %s differs from the CPU reference\n", l.name, gimg_orient_name(op));
    gimg_image_free(&ref);
    gimg_image_free(&got);
    return ok;
}

static void bench_kernels(gimg_gpu *g)
{
    printf("Kernel: %dx%d images, median of %d runs, %d buffer sets rotated; GB/s counts bytes "
           "read + written\n", kSide, kSide, kRuns, kSets);
    printf("%-7s %-10s %9s %9s %7s %9s %9s %8s\n", "layout", "op", "ms", "GB/s", "/copy",
           "npp ms", "npp GB/s", "vs npp");
    for (const BenchLayout &l : kBenchLayouts) {
        gimg_image h_in;
        if (gimg_image_alloc(&h_in, kSide, kSide, l.channels, l.sample)) {
            fprintf(stderr, "bench: %s\n", gimg_last_error());
            exit(1);
        }
        testimg_fill_random(&h_in, 42 + l.channels);
        const size_t row = h_in.stride_bytes, pitch = (row + 15) & ~(size_t)15;
        const size_t bytes = pitch * kSide;
        void *d_in[kSets], *d_out[kSets];
        for (int i = 0; i < kSets; i++) {
            CK(cudaMalloc(&d_in[i], bytes));
            CK(cudaMalloc(&d_out[i], bytes));
            bench_upload(d_in[i], pitch, h_in.data, row, row, kSide);
        }
        const double copy_ms = median_ms(g->stream, kWarmup, kRuns, [&](int i) {
            CK(cudaMemcpyAsync(d_out[i % kSets], d_in[i % kSets], bytes,
                               cudaMemcpyDeviceToDevice, g->stream));
        });
        const double gb = 2.0 * bytes / 1e9;
        printf("%-7s %-10s %9.3f %9.0f %7.2f\n", l.name, "copy", copy_ms, gb / copy_ms * 1e3, 1.0);
        double npp_ms = 0;
#ifdef GIMG_HAVE_NPP
        NppStreamContext nc = npp_context(g->stream);
        npp_ms = median_ms(g->stream, kWarmup, kRuns, [&](int i) {
            if (npp_transpose(l, d_in[i % kSets], (int)pitch, d_out[i % kSets], (int)pitch, nc)) {
                fprintf(stderr, "bench: nppiTranspose failed\n");
                exit(1);
            }
        });
#endif
        for (gimg_orient_op op : kOps) {
            if (!validate(g, l, op, h_in, d_in[0], pitch, d_out[0]))
                exit(1);
            gimg_orient_plan p = gimg_orient_plan_of(op);
            const double ms = median_ms(g->stream, kWarmup, kRuns, [&](int i) {
                CK(gimg_cuda_orient(d_in[i % kSets], pitch, kSide, kSide, d_out[i % kSets], pitch,
                                    (int)gimg_pixel_bytes(&h_in), p.transpose, p.rev_rows,
                                    p.rev_cols, g->stream));
            });
            printf("%-7s %-10s %9.3f %9.0f %7.2f", l.name, gimg_orient_name(op), ms,
                   gb / ms * 1e3, copy_ms / ms);
            if (npp_ms > 0 && op == GIMG_ORIENT_TRANSPOSE)
                printf(" %9.3f %9.0f %7.2fx", npp_ms, gb / npp_ms * 1e3, npp_ms / ms);
            printf("\n");
        }
        for (int i = 0; i < kSets; i++) {
            CK(cudaFree(d_in[i]));
            CK(cudaFree(d_out[i]));
        }
        gimg_image_free(&h_in);
    }
}

/* --device auto's threshold: CPU backend vs GPU including transfers. */
static void bench_break_even(gimg_gpu *g)
{
    printf("\nEnd to end (rot90, RGB 8-bit, host memory as the tools hold it; CPU: %d threads)\n",
           omp_get_max_threads());
    printf("%-11s %9s %9s %9s\n", "size", "MB", "cpu ms", "gpu ms");
    const int sides[] = {256, 512, 1024, 2048, 4096, 8192};
    for (int side : sides) {
        gimg_image in, out;
        if (gimg_image_alloc(&in, side, side, 3, GIMG_U8) ||
            gimg_orient_alloc_output(&in, GIMG_ORIENT_ROT90, &out)) {
            fprintf(stderr, "bench: %s\n", gimg_last_error());
            exit(1);
        }
        testimg_fill_random(&in, side);
        std::vector<double> cpu, gpu;
        for (int r = 0; r < 7; r++) {
            double t0 = gimg_now_ms();
            gimg_orient_cpu_into(&in, GIMG_ORIENT_ROT90, &out);
            cpu.push_back(gimg_now_ms() - t0);
            gimg_dimage d_in, d_out;
            gimg_orient_plan p = gimg_orient_plan_of(GIMG_ORIENT_ROT90);
            t0 = gimg_now_ms();
            if (gimg_gpu_image(g, 0, side, side, 3, GIMG_U8, &d_in) ||
                gimg_gpu_image(g, 1, side, side, 3, GIMG_U8, &d_out) ||
                gimg_gpu_upload(g, &in, &d_in))
                exit(1);
            CK(gimg_cuda_orient(d_in.d_data, d_in.pitch_bytes, side, side, d_out.d_data,
                                d_out.pitch_bytes, 3, p.transpose, p.rev_rows, p.rev_cols,
                                g->stream));
            if (gimg_gpu_download(g, &d_out, &out))
                exit(1);
            gpu.push_back(gimg_now_ms() - t0);
        }
        std::sort(cpu.begin(), cpu.end());
        std::sort(gpu.begin(), gpu.end());
        printf("%5dx%-5d %9.1f %9.2f %9.2f\n", side, side, side * (double)side * 3 / 1e6,
               cpu[3], gpu[3]);
        gimg_image_free(&in);
        gimg_image_free(&out);
    }
}

int main(void)
{
    cudaDeviceProp p;
    gimg_gpu *g = bench_open(&p);
    bench_kernels(g);
    bench_break_even(g);
    gimg_gpu_close(g);
    return 0;
}
