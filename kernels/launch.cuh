/*
 * launch.cuh — what the kernel launchers size their grids by (the device's
 * SMs, compute capability and shared-memory limit, and how many blocks of
 * a kernel an SM holds), asked of the CUDA runtime once and remembered:
 * the calls cost several microseconds, as long as a kernel on a 64 MB
 * image, and a batch launches the same kernels for every image.
 * Header-only, for the launchers in kernels/; C++17 inline functions, so the
 * library has one cache, guarded by one lock.
 */
#ifndef GIMG_KERNELS_LAUNCH_CUH
#define GIMG_KERNELS_LAUNCH_CUH

#include <cuda_runtime.h>
#include <mutex>

/* Expands CASE(bytes, T, channels) for every layout the image kernels
 * take, 8/16-bit unsigned and float samples (T) by 1-4 channels: the
 * launchers' dispatch from run-time layout to template instance. */
#define GIMG_EACH_LAYOUT(CASE)                                                                \
    CASE(1, uint8_t, 1) CASE(1, uint8_t, 2) CASE(1, uint8_t, 3) CASE(1, uint8_t, 4)           \
    CASE(2, uint16_t, 1) CASE(2, uint16_t, 2) CASE(2, uint16_t, 3) CASE(2, uint16_t, 4)       \
    CASE(4, float, 1) CASE(4, float, 2) CASE(4, float, 3) CASE(4, float, 4)

namespace gimg_launch {

struct device_facts {
    int dev, sms, cc_major;
    int smem_optin; /* shared bytes a block may opt in to */
};

inline std::mutex &cache_lock()
{
    static std::mutex lock;
    return lock;
}

/* The current device's facts. */
inline cudaError_t current_device(device_facts *out)
{
    static device_facts known[16];
    static int n_known;
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess)
        return e;
    std::lock_guard<std::mutex> hold(cache_lock());
    for (int i = 0; i < n_known; i++)
        if (known[i].dev == dev) {
            *out = known[i];
            return cudaSuccess;
        }
    out->dev = dev;
    if ((e = cudaDeviceGetAttribute(&out->sms, cudaDevAttrMultiProcessorCount, dev)) ||
        (e = cudaDeviceGetAttribute(&out->cc_major, cudaDevAttrComputeCapabilityMajor, dev)) ||
        (e = cudaDeviceGetAttribute(&out->smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev)))
        return e;
    if (n_known < 16)
        known[n_known++] = *out;
    return cudaSuccess;
}

/* Blocks of `kernel` (threads a block, smem bytes of dynamic shared memory
 * within the default limit) that one SM of device dev holds at once. */
inline cudaError_t blocks_per_sm(const void *kernel, int dev, int threads, size_t smem, int *out)
{
    struct entry { const void *kernel; int dev, threads; size_t smem; int blocks; };
    static entry known[64];
    static int n_known;
    std::lock_guard<std::mutex> hold(cache_lock());
    for (int i = 0; i < n_known; i++)
        if (known[i].kernel == kernel && known[i].dev == dev && known[i].threads == threads &&
            known[i].smem == smem) {
            *out = known[i].blocks;
            return cudaSuccess;
        }
    const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(out, kernel, threads, smem);
    if (e != cudaSuccess)
        return e;
    if (n_known < 64)
        known[n_known++] = {kernel, dev, threads, smem, *out};
    return cudaSuccess;
}

} // namespace gimg_launch

#endif
