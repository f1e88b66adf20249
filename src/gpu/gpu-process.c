/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The processes running on a GPU or a MIG device, and each one's share of the GPU: what an exporter
 * needs to split a shared GPU's memory and utilisation between the pods using it. Two NVML calls,
 * both with NVML's two-step buffer protocol (ask how many, allocate, ask again; the list may grow
 * in between, so a short buffer is retried):
 *
 *   nvmlDeviceGetComputeRunningProcesses: the compute processes and the memory each one holds; the
 *     _v3 symbol, else _v2 (the same 24-byte entry), else the unversioned one of older drivers with
 *     its 16-byte entry.
 *   nvmlDeviceGetProcessUtilization: the samples the driver keeps of each process' SM and memory
 *     utilisation; NOT_FOUND means there is no sample (no process ran), which is an empty answer.
 *
 * The handles are telemetry's (gpu-telemetry.c caches them), so these calls share its rules: a
 * worker thread's calls, never two at once on one telemetry object.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpu-internal.h"

/* NVML grows the list between the two calls when processes start: retry a few times. */
#define LIST_TRIES 4
#define LIST_SLACK 8u

static int errno_of(nvmlReturn_t r)
{
    switch (r) {
    case NVML_ERROR_NOT_SUPPORTED:
    case NVML_ERROR_FUNCTION_NOT_FOUND:
        return -EOPNOTSUPP;
    case NVML_ERROR_GPU_IS_LOST:
        return -ENODEV;
    case NVML_ERROR_NO_PERMISSION:
        return -EACCES;
    default:
        return -EIO;
    }
}

/* The call's error as an errno; a lost device also forgets its handle. */
static int fail(struct gpu_telemetry *t, size_t gpu, int mig, nvmlReturn_t r)
{
    if (r == NVML_ERROR_GPU_IS_LOST)
        gpu_telemetry_forget(t, gpu, mig);
    return errno_of(r);
}

/* ---- compute processes ---- */

/* One call of the list in the form the library has: v3, v2 or v1 (v1 entries are widened). */
static nvmlReturn_t list_call(struct gpu_nvml *nvml, nvmlDevice_t h, unsigned *count,
                              nvmlProcessInfo_t *infos)
{
    nvmlReturn_t r = NVML_CALL(nvml, nvmlDeviceGetComputeRunningProcesses_v3, h, count, infos);
    if (r == NVML_ERROR_FUNCTION_NOT_FOUND)
        r = NVML_CALL(nvml, nvmlDeviceGetComputeRunningProcesses_v2, h, count, infos);
    if (r != NVML_ERROR_FUNCTION_NOT_FOUND)
        return r;
    nvmlProcessInfo_v1_t *v1 = NULL;
    if (infos && *count && !(v1 = calloc(*count, sizeof(*v1))))
        return NVML_ERROR_MEMORY;
    r = NVML_CALL(nvml, nvmlDeviceGetComputeRunningProcesses, h, count, v1);
    for (unsigned i = 0; r == NVML_SUCCESS && v1 && i < *count; i++)
        infos[i] = (nvmlProcessInfo_t){.pid = v1[i].pid,
                                       .usedGpuMemory = v1[i].usedGpuMemory,
                                       .gpuInstanceId = NVML_EVENT_NO_INSTANCE,
                                       .computeInstanceId = NVML_EVENT_NO_INSTANCE};
    free(v1);
    return r;
}

/* The whole list into *ret (free()), *ret_n entries. */
static nvmlReturn_t list_all(struct gpu_nvml *nvml, nvmlDevice_t h, nvmlProcessInfo_t **ret,
                             unsigned *ret_n)
{
    unsigned n = 0;
    nvmlReturn_t r = list_call(nvml, h, &n, NULL);
    for (int i = 0; i < LIST_TRIES && r == NVML_ERROR_INSUFFICIENT_SIZE; i++) {
        if (n > GPU_PROCESSES_MAX)
            return NVML_ERROR_INSUFFICIENT_SIZE;
        unsigned cap = n + LIST_SLACK;
        nvmlProcessInfo_t *infos = calloc(cap, sizeof(*infos));
        if (!infos)
            return NVML_ERROR_MEMORY;
        n = cap;
        r = list_call(nvml, h, &n, infos);
        if (r == NVML_SUCCESS) {
            *ret = infos;
            *ret_n = n < cap ? n : cap;
            return r;
        }
        free(infos);
    }
    if (r == NVML_SUCCESS) /* nothing runs */
        *ret_n = 0;
    return r;
}

int gpu_processes_read(struct gpu_telemetry *t, size_t gpu, int mig, struct gpu_process **ret,
                       size_t *ret_n)
{
    _cleanup_free_ nvmlProcessInfo_t *infos = NULL;
    struct gpu_nvml *nvml;
    nvmlDevice_t h;
    unsigned n = 0;

    int e = gpu_telemetry_handle(t, gpu, mig, &h, &nvml);
    if (e < 0)
        return e;
    nvmlReturn_t r = list_all(nvml, h, &infos, &n);
    if (r == NVML_ERROR_MEMORY)
        return -ENOMEM;
    if (r != NVML_SUCCESS)
        return fail(t, gpu, mig, r);
    struct gpu_process *out = n ? calloc(n, sizeof(*out)) : NULL;
    if (n && !out)
        return -ENOMEM;
    for (unsigned i = 0; i < n; i++)
        out[i] = (struct gpu_process){
            .pid = infos[i].pid,
            .memory_bytes = infos[i].usedGpuMemory == NVML_VALUE_NOT_AVAILABLE
                                ? GPU_PROCESS_MEMORY_UNKNOWN
                                : infos[i].usedGpuMemory,
        };
    *ret = out;
    *ret_n = n;
    return 0;
}

/* ---- utilisation samples ---- */

static int by_pid_newest_first(const void *a, const void *b)
{
    const nvmlProcessUtilizationSample_t *x = a, *y = b;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    if (x->timeStamp != y->timeStamp)
        return x->timeStamp > y->timeStamp ? -1 : 1;
    return 0;
}

/* The samples into *ret (free()); none is success with *ret_n 0. */
static nvmlReturn_t samples_all(struct gpu_nvml *nvml, nvmlDevice_t h, uint64_t since,
                                nvmlProcessUtilizationSample_t **ret, unsigned *ret_n)
{
    unsigned n = 0;
    nvmlReturn_t r = NVML_CALL(nvml, nvmlDeviceGetProcessUtilization, h, NULL, &n, since);
    for (int i = 0; i < LIST_TRIES && r == NVML_ERROR_INSUFFICIENT_SIZE; i++) {
        if (n > GPU_PROCESSES_MAX * 16u)
            return NVML_ERROR_INSUFFICIENT_SIZE;
        unsigned cap = n + LIST_SLACK;
        nvmlProcessUtilizationSample_t *s = calloc(cap, sizeof(*s));
        if (!s)
            return NVML_ERROR_MEMORY;
        n = cap;
        r = NVML_CALL(nvml, nvmlDeviceGetProcessUtilization, h, s, &n, since);
        if (r == NVML_SUCCESS) {
            *ret = s;
            *ret_n = n < cap ? n : cap;
            return r;
        }
        free(s);
    }
    if (r == NVML_SUCCESS || r == NVML_ERROR_NOT_FOUND) { /* no sample: nothing ran */
        *ret_n = 0;
        return NVML_SUCCESS;
    }
    return r;
}

int gpu_process_utilization_read(struct gpu_telemetry *t, size_t gpu, int mig, uint64_t since_us,
                                 struct gpu_process_util **ret, size_t *ret_n)
{
    _cleanup_free_ nvmlProcessUtilizationSample_t *s = NULL;
    struct gpu_nvml *nvml;
    nvmlDevice_t h;
    unsigned n = 0;
    size_t k = 0;

    int e = gpu_telemetry_handle(t, gpu, mig, &h, &nvml);
    if (e < 0)
        return e;
    nvmlReturn_t r = samples_all(nvml, h, since_us, &s, &n);
    if (r == NVML_ERROR_MEMORY)
        return -ENOMEM;
    if (r != NVML_SUCCESS)
        return fail(t, gpu, mig, r);
    struct gpu_process_util *out = n ? calloc(n, sizeof(*out)) : NULL;
    if (n && !out)
        return -ENOMEM;
    if (n > 1)
        qsort(s, n, sizeof(*s), by_pid_newest_first);
    for (unsigned i = 0; i < n; i++) {
        if (i > 0 && s[i].pid == s[i - 1].pid)
            continue; /* an older sample of the same process */
        out[k++] = (struct gpu_process_util){.pid = s[i].pid,
                                             .timestamp_us = s[i].timeStamp,
                                             .sm_util = s[i].smUtil,
                                             .mem_util = s[i].memUtil};
    }
    *ret = out;
    *ret_n = k;
    return 0;
}
