/*
 * nvjpeg_api.h — the part of NVIDIA's nvJPEG that the GPU codecs use
 * (lib/gpu_jpeg.c), as a table of entry points that nvjpeg_load.c fills
 * from libnvjpeg at run time (dlopen), so that:
 *  - a binary built here runs where libnvjpeg is missing, with the CPU
 *    codecs (-v says which codecs ran);
 *  - every build compiles this code, CI's too, which has neither CUDA
 *    nor nvJPEG's header: the declarations below are ours, written from
 *    nvJPEG's documented API (CUDA Toolkit documentation, "nvJPEG"), for
 *    the functions and values we call. Where the build finds nvjpeg.h (the
 *    CUDA Toolkit's include folder, or the `nvidia-nvjpeg` wheel's
 *    include/: NVJPEG_INCLUDE=), tests/nvjpeg_abi.c checks every value and
 *    layout here against it at compile time.
 *
 * Handles are nvJPEG's opaque structs (the same tags, never defined
 * here); streams are CUDA's (struct CUstream_st *, cudaStream_t). Enums
 * are passed as int, as C passes them.
 */
#ifndef GIMG_NVJPEG_API_H
#define GIMG_NVJPEG_API_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st;
struct nvjpegHandle;
struct nvjpegJpegState;
struct nvjpegEncoderState;
struct nvjpegEncoderParams;

/* nvjpegStatus_t */
enum {
    GIMG_NVJPEG_SUCCESS = 0,
    GIMG_NVJPEG_NOT_INITIALIZED = 1,
    GIMG_NVJPEG_INVALID_PARAMETER = 2,
    GIMG_NVJPEG_BAD_JPEG = 3,
    GIMG_NVJPEG_JPEG_NOT_SUPPORTED = 4,
    GIMG_NVJPEG_ALLOCATOR_FAILURE = 5,
    GIMG_NVJPEG_EXECUTION_FAILED = 6,
    GIMG_NVJPEG_ARCH_MISMATCH = 7,
    GIMG_NVJPEG_INTERNAL_ERROR = 8,
    GIMG_NVJPEG_IMPLEMENTATION_NOT_SUPPORTED = 9,
    GIMG_NVJPEG_INCOMPLETE_BITSTREAM = 10,
};
/* nvjpegCreateEx's flags (NVJPEG_FLAGS_*): chroma upsampled by
 * interpolation, as libjpeg-turbo's "fancy" upsampling does, rather than
 * by repeating samples; bitstream anomalies refused, not decoded around. */
enum { GIMG_NVJPEG_FLAGS_BITSTREAM_STRICT = 1 << 2, GIMG_NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION = 1 << 5 };
/* nvjpegBackend_t */
enum { GIMG_NVJPEG_BACKEND_DEFAULT = 0, GIMG_NVJPEG_BACKEND_HARDWARE = 3 };
/* nvjpegChromaSubsampling_t */
enum {
    GIMG_NVJPEG_CSS_444 = 0,
    GIMG_NVJPEG_CSS_422 = 1,
    GIMG_NVJPEG_CSS_420 = 2,
    GIMG_NVJPEG_CSS_440 = 3,
    GIMG_NVJPEG_CSS_GRAY = 6,
};
/* nvjpegOutputFormat_t and nvjpegInputFormat_t */
enum { GIMG_NVJPEG_OUTPUT_Y = 2, GIMG_NVJPEG_OUTPUT_RGBI = 5 };
enum { GIMG_NVJPEG_INPUT_RGBI = 5 };
/* libraryPropertyType, for getProperty */
enum { GIMG_NVJPEG_MAJOR_VERSION = 0, GIMG_NVJPEG_MINOR_VERSION = 1, GIMG_NVJPEG_PATCH_LEVEL = 2 };

/* nvjpegImage_t: up to 4 planes (interleaved formats use plane 0). */
typedef struct {
    unsigned char *channel[4];
    size_t pitch[4];
} gimg_nvjpeg_image;

typedef struct nvjpegHandle *gimg_nvjpeg_handle;
typedef struct nvjpegJpegState *gimg_nvjpeg_state;
typedef struct nvjpegEncoderState *gimg_nvjpeg_enc_state;
typedef struct nvjpegEncoderParams *gimg_nvjpeg_enc_params;
typedef struct CUstream_st *gimg_nvjpeg_stream;

/* nvjpegDevAllocator_t: nvJPEG's device memory, as cudaMalloc and cudaFree
 * take it (0: success). */
typedef struct {
    int (*dev_malloc)(void **ptr, size_t bytes);
    int (*dev_free)(void *ptr);
} gimg_nvjpeg_dev_allocator;

/* nvjpegDevAllocatorV2_t: stream-ordered (nvJPEG names the stream its
 * work on the memory is queued on, and the size), with ctx passed back to
 * each call. */
typedef struct {
    int (*dev_malloc)(void *ctx, void **ptr, size_t bytes, gimg_nvjpeg_stream stream);
    int (*dev_free)(void *ctx, void *ptr, size_t bytes, gimg_nvjpeg_stream stream);
    void *dev_ctx;
} gimg_nvjpeg_dev_allocator_v2;

/* nvjpegPinnedAllocatorV2_t: the same for pinned host memory. */
typedef struct {
    int (*pinned_malloc)(void *ctx, void **ptr, size_t bytes, gimg_nvjpeg_stream stream);
    int (*pinned_free)(void *ctx, void *ptr, size_t bytes, gimg_nvjpeg_stream stream);
    void *pinned_ctx;
} gimg_nvjpeg_pinned_allocator_v2;

/* The entry points, each named as nvJPEG names it without "nvjpeg". */
typedef struct {
    int (*GetProperty)(int type, int *value);
    /* dev_allocator, pinned_allocator: NULL for cudaMalloc, cudaHostAlloc. */
    int (*CreateEx)(int backend, gimg_nvjpeg_dev_allocator *dev_allocator,
                    void *pinned_allocator, unsigned flags, gimg_nvjpeg_handle *handle);
    /* NULL where the library lacks it (an old one). */
    int (*CreateExV2)(int backend, gimg_nvjpeg_dev_allocator_v2 *dev_allocator,
                      gimg_nvjpeg_pinned_allocator_v2 *pinned_allocator, unsigned flags,
                      gimg_nvjpeg_handle *handle);
    int (*Destroy)(gimg_nvjpeg_handle handle);
    int (*JpegStateCreate)(gimg_nvjpeg_handle handle, gimg_nvjpeg_state *state);
    int (*JpegStateDestroy)(gimg_nvjpeg_state state);
    int (*Decode)(gimg_nvjpeg_handle handle, gimg_nvjpeg_state state, const unsigned char *data,
                  size_t length, int output_format, gimg_nvjpeg_image *destination,
                  gimg_nvjpeg_stream stream);
    int (*DecodeBatchedInitialize)(gimg_nvjpeg_handle handle, gimg_nvjpeg_state state,
                                   int batch_size, int max_cpu_threads, int output_format);
    int (*DecodeBatched)(gimg_nvjpeg_handle handle, gimg_nvjpeg_state state,
                         const unsigned char *const *data, const size_t *lengths,
                         gimg_nvjpeg_image *destinations, gimg_nvjpeg_stream stream);
    int (*EncoderStateCreate)(gimg_nvjpeg_handle handle, gimg_nvjpeg_enc_state *state,
                              gimg_nvjpeg_stream stream);
    int (*EncoderStateDestroy)(gimg_nvjpeg_enc_state state);
    int (*EncoderParamsCreate)(gimg_nvjpeg_handle handle, gimg_nvjpeg_enc_params *params,
                               gimg_nvjpeg_stream stream);
    int (*EncoderParamsDestroy)(gimg_nvjpeg_enc_params params);
    int (*EncoderParamsSetQuality)(gimg_nvjpeg_enc_params params, int quality,
                                   gimg_nvjpeg_stream stream);
    int (*EncoderParamsSetOptimizedHuffman)(gimg_nvjpeg_enc_params params, int optimized,
                                            gimg_nvjpeg_stream stream);
    int (*EncoderParamsSetSamplingFactors)(gimg_nvjpeg_enc_params params, int subsampling,
                                           gimg_nvjpeg_stream stream);
    int (*EncodeImage)(gimg_nvjpeg_handle handle, gimg_nvjpeg_enc_state state,
                       gimg_nvjpeg_enc_params params, const gimg_nvjpeg_image *source,
                       int input_format, int width, int height, gimg_nvjpeg_stream stream);
    int (*EncodeYUV)(gimg_nvjpeg_handle handle, gimg_nvjpeg_enc_state state,
                     gimg_nvjpeg_enc_params params, const gimg_nvjpeg_image *source,
                     int subsampling, int width, int height, gimg_nvjpeg_stream stream);
    /* data NULL: *length is set to the bitstream's size. */
    int (*EncodeRetrieveBitstream)(gimg_nvjpeg_handle handle, gimg_nvjpeg_enc_state state,
                                   unsigned char *data, size_t *length,
                                   gimg_nvjpeg_stream stream);
} gimg_nvjpeg_api;

/*
 * Loads libnvjpeg once per process (thread-safe): $GIMG_NVJPEG_LIBRARY if
 * set (a path or a name for dlopen; tests name a missing one), else
 * libnvjpeg.so.13, then libnvjpeg.so. Returns the table, or NULL with *why
 * (static text, for -v) saying what was missing: the library, or one of
 * its entry points.
 */
const gimg_nvjpeg_api *gimg_nvjpeg_load(const char **why);
/* "nvJPEG 13.3.2" (static) once loaded, else NULL. */
const char *gimg_nvjpeg_version(void);
/* nvJPEG's status as words: "bad JPEG" (static). */
const char *gimg_nvjpeg_status_name(int status);

#ifdef __cplusplus
}
#endif
#endif
