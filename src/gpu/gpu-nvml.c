/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Loading NVML at run time. The driver's library is dlopen'd (never linked), every symbol of
 * gpu-nvml-abi.h is looked up with dlsym, older unversioned names stand in for versioned ones the
 * library lacks (nvmlInit for nvmlInit_v2, ...), and nvmlInit is called. Only the handful of calls
 * without which there is no inventory at all are required; the rest degrade to
 * NVML_ERROR_FUNCTION_NOT_FOUND so gpuplane runs on drivers older than its declarations. Failures
 * are worded for an operator: a node without the driver is the common case, not a crash.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu-internal.h"
#include "gpu-nvml-errors.h"

#define NVML_DEFAULT_LIB "libnvidia-ml.so.1"

struct symbol {
    const char *name;
    size_t offset; /* of the pointer in struct gpu_nvml_fns */
};

#define NVML_SYMBOL(ret, name, params) {#name, offsetof(struct gpu_nvml_fns, name)},
static const struct symbol symbols[] = {NVML_FUNCTIONS(NVML_SYMBOL)};
#undef NVML_SYMBOL

/* The names older drivers export for the same function and struct (ABI facts §1.1). Memory info is
 * not here: nvmlDeviceGetMemoryInfo takes a different struct, so the inventory falls back itself.
 */
static const struct {
    const char *name;
    const char *fallback;
} fallbacks[] = {
    {"nvmlInit_v2", "nvmlInit"},
    {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"},
    {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"},
    {"nvmlDeviceGetHandleByPciBusId_v2", "nvmlDeviceGetHandleByPciBusId"},
    {"nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"},
    {"nvmlDeviceGetNvLinkRemotePciInfo_v2", "nvmlDeviceGetNvLinkRemotePciInfo"},
    {"nvmlEventSetWait_v2", "nvmlEventSetWait"},
    {"nvmlDeviceGetAttributes_v2", "nvmlDeviceGetAttributes"},
    {"nvmlComputeInstanceGetInfo_v2", "nvmlComputeInstanceGetInfo"},
};

/* Without these there is nothing to enumerate. */
static const char *const required[] = {
    "nvmlInit_v2",           "nvmlShutdown",
    "nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetUUID",     "nvmlDeviceGetName",
};

const char *gpu_nvml_strerror(const struct gpu_nvml *nvml, int nvml_return)
{
    if (nvml && nvml->fn.nvmlErrorString) {
        const char *s = nvml->fn.nvmlErrorString((nvmlReturn_t)nvml_return);
        if (s && s[0])
            return s;
    }
    return nvml_error_text(nvml_return);
}

static void **fn_slot(struct gpu_nvml *nvml, size_t offset)
{
    return (void **)((char *)&nvml->fn + offset);
}

static void *lookup(void *dl, const char *name)
{
    (void)dlerror(); /* a stale error must not be mistaken for this lookup's */
    return dlsym(dl, name);
}

static const char *fallback_of(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(fallbacks); i++)
        if (strcmp(fallbacks[i].name, name) == 0)
            return fallbacks[i].fallback;
    return NULL;
}

static void resolve_symbols(struct gpu_nvml *nvml)
{
    for (size_t i = 0; i < ARRAY_SIZE(symbols); i++) {
        void *p = lookup(nvml->dl, symbols[i].name);
        const char *fallback = fallback_of(symbols[i].name);
        if (!p && fallback) {
            p = lookup(nvml->dl, fallback);
            if (p)
                log_debug(4, "NVML: using the older symbol", "symbol", symbols[i].name, "fallback",
                          fallback);
        }
        *fn_slot(nvml, symbols[i].offset) = p;
    }
}

static size_t symbol_offset(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(symbols); i++)
        if (strcmp(symbols[i].name, name) == 0)
            return symbols[i].offset;
    abort(); /* required[] names a symbol the ABI list lacks: a programming error */
}

static int check_required(struct gpu_nvml *nvml, const char *path, struct diag *d)
{
    for (size_t i = 0; i < ARRAY_SIZE(required); i++) {
        if (*fn_slot(nvml, symbol_offset(required[i])))
            continue;
        const char *fallback = fallback_of(required[i]);
        if (fallback)
            return diag_fail(d, -ELIBBAD,
                             "%s is not a usable NVML library: it lacks the symbol %s (and %s)",
                             path, required[i], fallback);
        return diag_fail(d, -ELIBBAD, "%s is not a usable NVML library: it lacks the symbol %s",
                         path, required[i]);
    }
    return 0;
}

static int open_library(const char *path, struct diag *d, void **ret)
{
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        const char *why = dlerror();
        /* A file that exists but will not load is a different problem from no driver at all. */
        if (strchr(path, '/') && access(path, F_OK) == 0)
            return diag_fail(d, -ELIBBAD, "cannot load NVML library %s (%s)", path,
                             why ? why : "unknown error");
        return diag_fail(d, -ENOENT,
                         "NVML library not found: is the NVIDIA driver installed? Use --nvml-lib "
                         "to point at it (%s)",
                         why ? why : path);
    }
    *ret = dl;
    return 0;
}

static int init_errno(nvmlReturn_t r)
{
    switch (r) {
    case NVML_ERROR_DRIVER_NOT_LOADED:
    case NVML_ERROR_GPU_NOT_FOUND:
        return -ENODEV;
    case NVML_ERROR_NO_PERMISSION:
    case NVML_ERROR_OPERATING_SYSTEM:
        return -EACCES;
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        return -ELIBBAD;
    default:
        return -EIO;
    }
}

static int init_library(struct gpu_nvml *nvml, struct diag *d)
{
    nvmlReturn_t r = nvml->fn.nvmlInit_v2();
    if (r == NVML_SUCCESS) {
        nvml->initialised = true;
        return 0;
    }
    /* The mock knows why its profile did not load, with a file:line:col; NVML would only say
     * "Unknown Error". */
    const char *(*profile_error)(void) =
        (const char *(*)(void))lookup(nvml->dl, "mock_nvml_profile_error");
    const char *why = profile_error ? profile_error() : NULL;
    if (why)
        return diag_fail(d, -EINVAL, "%s", why);
    return diag_fail(d, init_errno(r), "NVML initialisation failed: %s (NVML error %d)",
                     gpu_nvml_strerror(nvml, (int)r), (int)r);
}

int gpu_nvml_open(const char *lib_path, struct diag *d, struct gpu_nvml **ret)
{
    _cleanup_(gpu_nvml_closep) struct gpu_nvml *nvml = NULL;
    const char *path = lib_path;
    int r;

    if (!path || !path[0])
        path = getenv("GPUPLANE_NVML_LIB");
    if (!path || !path[0])
        path = NVML_DEFAULT_LIB;

    nvml = calloc(1, sizeof(*nvml));
    if (!nvml)
        return diag_fail(d, -ENOMEM, "out of memory");
    r = open_library(path, d, &nvml->dl);
    if (r < 0)
        return r;
    resolve_symbols(nvml);
    r = check_required(nvml, path, d);
    if (r < 0)
        return r;
    r = init_library(nvml, d);
    if (r < 0)
        return r;
    log_debug(2, "NVML loaded", "library", path);
    *ret = TAKE_PTR(nvml);
    return 0;
}

struct gpu_nvml *gpu_nvml_close(struct gpu_nvml *nvml)
{
    if (!nvml)
        return NULL;
    if (nvml->initialised && nvml->fn.nvmlShutdown)
        (void)nvml->fn.nvmlShutdown();
    if (nvml->dl)
        dlclose(nvml->dl);
    free(nvml);
    return NULL;
}
