/* nvjpeg_load.c — libnvjpeg loaded at run time (nvjpeg_api.h says why). */
#include "nvjpeg_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static gimg_nvjpeg_api g_api;
static const gimg_nvjpeg_api *g_loaded;
static const char *g_why = "nvJPEG was not loaded";
static char g_version[48];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* Each entry point by its name, into the table. */
#define ENTRY(name) {"nvjpeg" #name, (void **)&g_api.name}

static void load_once(void)
{
    const char *forced = getenv("GIMG_NVJPEG_LIBRARY");
    void *lib = NULL;
    if (forced && *forced) {
        lib = dlopen(forced, RTLD_NOW | RTLD_LOCAL);
    } else {
        lib = dlopen("libnvjpeg.so.13", RTLD_NOW | RTLD_LOCAL);
        if (!lib)
            lib = dlopen("libnvjpeg.so", RTLD_NOW | RTLD_LOCAL);
    }
    if (!lib) {
        g_why = "libnvjpeg was not found (it comes with the CUDA Toolkit, or the nvidia-nvjpeg "
                "wheel)";
        return;
    }
    const struct {
        const char *name;
        void **slot;
    } entries[] = {
        ENTRY(GetProperty), ENTRY(CreateEx), ENTRY(Destroy), ENTRY(JpegStateCreate),
        ENTRY(JpegStateDestroy), ENTRY(Decode), ENTRY(DecodeBatchedInitialize),
        ENTRY(DecodeBatched), ENTRY(EncoderStateCreate), ENTRY(EncoderStateDestroy),
        ENTRY(EncoderParamsCreate), ENTRY(EncoderParamsDestroy), ENTRY(EncoderParamsSetQuality),
        ENTRY(EncoderParamsSetOptimizedHuffman), ENTRY(EncoderParamsSetSamplingFactors),
        ENTRY(EncodeImage), ENTRY(EncodeYUV), ENTRY(EncodeRetrieveBitstream),
    };
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        /* POSIX's way to convert dlsym's object pointer to a function pointer. */
        *entries[i].slot = dlsym(lib, entries[i].name);
        if (!*entries[i].slot) {
            g_why = "libnvjpeg lacks an entry point the GPU codecs use (too old a version)";
            dlclose(lib);
            return;
        }
    }
    *(void **)&g_api.CreateExV2 = dlsym(lib, "nvjpegCreateExV2"); /* optional */
    int major = 0, minor = 0, patch = 0;
    if (g_api.GetProperty(GIMG_NVJPEG_MAJOR_VERSION, &major) ||
        g_api.GetProperty(GIMG_NVJPEG_MINOR_VERSION, &minor) ||
        g_api.GetProperty(GIMG_NVJPEG_PATCH_LEVEL, &patch) || major < 11) {
        g_why = "libnvjpeg is older than version 11";
        dlclose(lib);
        return;
    }
    snprintf(g_version, sizeof g_version, "nvJPEG %d.%d.%d", major, minor, patch);
    g_loaded = &g_api; /* the library stays loaded for the process */
}
#undef ENTRY

const gimg_nvjpeg_api *gimg_nvjpeg_load(const char **why)
{
    pthread_once(&g_once, load_once);
    if (!g_loaded && why)
        *why = g_why;
    return g_loaded;
}

const char *gimg_nvjpeg_version(void)
{
    return g_loaded ? g_version : NULL;
}

const char *gimg_nvjpeg_status_name(int status)
{
    static const char *const names[] = {
        "success", "not initialised", "invalid parameter", "bad JPEG", "JPEG not supported",
        "allocator failure", "execution failed", "architecture mismatch", "internal error",
        "not implemented", "incomplete bitstream",
    };
    return status >= 0 && status < (int)(sizeof names / sizeof names[0]) ? names[status]
                                                                       : "unknown status";
}
