/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Running processes: the compute processes of each GPU and MIG device with the memory they hold
 * and their share of the SMs, from the profile's `processes` list of a GPU and from `process` and
 * `process-exit` lines of the fault file, answered as the driver answers
 * nvmlDeviceGetComputeRunningProcesses (_v3, _v2, and the unversioned form with its shorter entry)
 * and nvmlDeviceGetProcessUtilization.
 *
 * A process lives on a full GPU, or on one compute instance of a GPU in MIG mode (gi, ci). A full
 * GPU's handle lists every process of the GPU (the aggregate view a privileged caller gets in MIG
 * mode), a MIG device's handle those of its compute instance. Utilisation samples exist on full
 * GPUs not in MIG mode (the driver has none per MIG device); every process has one, stamped with
 * the time of the call, so a caller asking for samples newer than its last read always gets them.
 * Values do not wander: a test adds up exactly what it wrote.
 */
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include "mock-internal.h"

#include "mock-profile-internal.h"

#define PID_MAX 4194304 /* Linux' PID_MAX_LIMIT */
#define MIB 1048576ULL

/* ---- reading one process (profile entry or fault line) ---- */

static bool find_instance(const struct mock_gpu *g, unsigned gi, unsigned ci)
{
    for (size_t i = 0; i < g->n_gis; i++)
        if (g->gis[i].id == gi)
            for (size_t c = 0; c < g->gis[i].n_cis; c++)
                if (g->gis[i].cis[c].id == ci)
                    return true;
    return false;
}

/* An optional unsigned member up to max; false with *bad set when present and not one. */
static bool member(const json_t *obj, const char *key, unsigned long long max, bool *present,
                   unsigned long long *ret, const json_t **bad)
{
    const json_t *v = json_object_get(obj, key);

    *present = v != NULL;
    if (!v)
        return true;
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        (unsigned long long)json_integer_value(v) > max) {
        *bad = v;
        return false;
    }
    *ret = (unsigned long long)json_integer_value(v);
    return true;
}

/*
 * A process from obj on GPU g: pid (required), memory (MiB; absent: the driver cannot tell),
 * smUtil, memUtil (%), and on a GPU in MIG mode its compute instance (gi required unless given by
 * the caller in gi_def, ci default 0). On failure the reason is in why, the value at fault in *bad.
 */
static bool parse_process(const struct mock_gpu *g, const json_t *obj, unsigned gi_def,
                          unsigned ci_def, struct mock_process *ret, char *why, size_t n,
                          const json_t **bad)
{
    unsigned long long pid = 0, mem = 0, sm = 0, mu = 0, gi = gi_def, ci = ci_def;
    bool has_pid, has_mem, has_sm, has_mu, has_gi, has_ci;
    bool mig = g->mig_enabled && g->n_gis > 0;

    *bad = obj;
    if (!member(obj, "pid", PID_MAX, &has_pid, &pid, bad) || !has_pid || pid == 0) {
        snprintf(why, n, "\"pid\": expected an integer from 1 to %d", PID_MAX);
        return false;
    }
    if (!member(obj, "memory", g->mem_mib, &has_mem, &mem, bad)) {
        snprintf(why, n, "\"memory\": expected MiB from 0 to the GPU's %llu", g->mem_mib);
        return false;
    }
    if (!member(obj, "smUtil", 100, &has_sm, &sm, bad) ||
        !member(obj, "memUtil", 100, &has_mu, &mu, bad)) {
        snprintf(why, n, "\"smUtil\", \"memUtil\": expected an integer from 0 to 100");
        return false;
    }
    if (!member(obj, "gi", 0xFFFFFFFEull, &has_gi, &gi, bad) ||
        !member(obj, "ci", 0xFFFFFFFEull, &has_ci, &ci, bad)) {
        snprintf(why, n, "\"gi\", \"ci\": expected instance ids");
        return false;
    }
    if (!mig && (gi != NVML_EVENT_NO_INSTANCE || has_ci)) {
        snprintf(why, n, "\"gi\", \"ci\": the GPU is not in MIG mode");
        return false;
    }
    if (mig && !has_ci && ci == NVML_EVENT_NO_INSTANCE)
        ci = 0;
    if (mig && (gi == NVML_EVENT_NO_INSTANCE || !find_instance(g, (unsigned)gi, (unsigned)ci))) {
        snprintf(why, n,
                 "\"gi\", \"ci\": the GPU is in MIG mode: name one of its compute instances");
        return false;
    }
    *ret = (struct mock_process){
        .pid = (unsigned)pid,
        .mem_bytes = has_mem ? mem * MIB : NVML_VALUE_NOT_AVAILABLE,
        .sm_util = (unsigned)sm,
        .mem_util = (unsigned)mu,
        .gi = (unsigned)gi,
        .ci = mig ? (unsigned)ci : NVML_EVENT_NO_INSTANCE,
    };
    return true;
}

static struct mock_process *find_pid(struct mock_gpu *g, unsigned pid)
{
    for (size_t i = 0; i < g->n_procs; i++)
        if (g->procs[i].pid == pid)
            return &g->procs[i];
    return NULL;
}

/* ---- profile ---- */

int mock_read_processes(struct loader *L, const json_t *g, struct mock_gpu *gpu)
{
    static const char *const keys[] = {"pid", "memory", "smUtil", "memUtil", "gi", "ci", NULL};
    json_t *list = NULL, *p;
    size_t i;
    char why[160];
    int r;

    r = doc_get_array(L->doc, mock_pick(L, g, "processes"), "processes", false, L->d, &list);
    if (r < 0 || !list)
        return r;
    if (json_array_size(list) > MOCK_MAX_PROCESSES)
        return doc_fail(L->doc, list, L->d, -EINVAL, "\"processes\": more than %d",
                        MOCK_MAX_PROCESSES);
    json_array_foreach(list, i, p)
    {
        struct mock_process proc;
        const json_t *bad = NULL;

        if (!json_is_object(p))
            return doc_fail(L->doc, p, L->d, -EINVAL, "a process is a mapping");
        r = doc_check_keys(L->doc, p, keys, L->d);
        if (r < 0)
            return r;
        if (!parse_process(gpu, p, NVML_EVENT_NO_INSTANCE, NVML_EVENT_NO_INSTANCE, &proc, why,
                           sizeof(why), &bad))
            return doc_fail(L->doc, bad, L->d, -EINVAL, "%s", why);
        if (find_pid(gpu, proc.pid))
            return doc_fail(L->doc, p, L->d, -EINVAL, "pid %u listed twice", proc.pid);
        gpu->procs[gpu->n_procs++] = proc;
    }
    return 0;
}

/* ---- fault lines ---- */

bool mock_process_type(const char *type)
{
    return strcmp(type, "process") == 0 || strcmp(type, "process-exit") == 0;
}

static bool only_keys(const json_t *obj, const char *const *allowed, void (*err)(const char *msg))
{
    const char *key;
    json_t *v;
    char msg[128];

    json_object_foreach((json_t *)obj, key, v)
    {
        size_t i = 0;
        while (allowed[i] && strcmp(allowed[i], key) != 0)
            i++;
        if (!allowed[i]) {
            snprintf(msg, sizeof(msg), "unknown key \"%s\"", key);
            err(msg);
            return false;
        }
    }
    return true;
}

static bool process_exit(struct mock_gpu *g, const json_t *obj, void (*err)(const char *msg))
{
    static const char *const keys[] = {"gpu", "type", "pid", NULL};
    const json_t *v = json_object_get(obj, "pid");
    struct mock_process *p;

    if (!only_keys(obj, keys, err))
        return false;
    if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > PID_MAX ||
        !(p = find_pid(g, (unsigned)json_integer_value(v)))) {
        err("\"pid\": not a process of this GPU");
        return false;
    }
    *p = g->procs[--g->n_procs];
    return true;
}

bool mock_process_event(unsigned gpu, unsigned gi, unsigned ci, const char *type, const json_t *obj,
                        void (*err)(const char *msg))
{
    static const char *const keys[] = {"gpu",     "type", "pid", "memory", "smUtil",
                                       "memUtil", "gi",   "ci",  NULL};
    struct mock_gpu *g = &mock.node->gpus[gpu];
    struct mock_process proc, *old;
    const json_t *bad;
    char why[160];

    if (strcmp(type, "process-exit") == 0)
        return process_exit(g, obj, err);
    if (!only_keys(obj, keys, err))
        return false;
    if (!parse_process(g, obj, gi, ci, &proc, why, sizeof(why), &bad)) {
        err(why);
        return false;
    }
    old = find_pid(g, proc.pid);
    if (!old && g->n_procs == MOCK_MAX_PROCESSES) {
        err("too many processes on this GPU");
        return false;
    }
    *(old ? old : &g->procs[g->n_procs++]) = proc;
    return true;
}

/* ---- what other calls see ---- */

static bool on_device(const struct nvmlDevice_st *dev, const struct mock_process *p)
{
    return !dev->ci || (p->gi == dev->ci->gi->id && p->ci == dev->ci->id);
}

unsigned long long mock_process_memory(const struct nvmlDevice_st *dev)
{
    unsigned long long sum = 0;

    for (size_t i = 0; i < dev->gpu->n_procs; i++) {
        const struct mock_process *p = &dev->gpu->procs[i];
        /* A MIG device's memory is its GPU instance's, shared by its compute instances. */
        bool here = !dev->ci || p->gi == dev->ci->gi->id;
        if (here && p->mem_bytes != NVML_VALUE_NOT_AVAILABLE)
            sum += p->mem_bytes;
    }
    return sum;
}

/* ---- NVML ---- */

/* The processes of the device into infos (entries of size bytes, each built by fill), NVML's way:
 * *count too small (NULL infos with 0 included) answers INSUFFICIENT_SIZE with the number needed.
 */
static nvmlReturn_t list(nvmlDevice_t device, unsigned int *count, void *infos, size_t size,
                         void (*fill)(void *entry, const struct mock_process *p))
{
    MOCK_LOCKED;
    struct nvmlDevice_st *dev;
    unsigned n = 0;
    nvmlReturn_t r;

    r = mock_device(device, count != NULL && (infos != NULL || *count == 0), &dev);
    if (r != NVML_SUCCESS)
        return r;
    for (size_t i = 0; i < dev->gpu->n_procs; i++)
        n += on_device(dev, &dev->gpu->procs[i]);
    if (*count < n) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    n = 0;
    for (size_t i = 0; i < dev->gpu->n_procs; i++)
        if (on_device(dev, &dev->gpu->procs[i]))
            fill((char *)infos + size * n++, &dev->gpu->procs[i]);
    *count = n;
    return NVML_SUCCESS;
}

static void fill_v2(void *entry, const struct mock_process *p)
{
    *(nvmlProcessInfo_t *)entry = (nvmlProcessInfo_t){.pid = p->pid,
                                                      .usedGpuMemory = p->mem_bytes,
                                                      .gpuInstanceId = p->gi,
                                                      .computeInstanceId = p->ci};
}

static void fill_v1(void *entry, const struct mock_process *p)
{
    *(nvmlProcessInfo_v1_t *)entry =
        (nvmlProcessInfo_v1_t){.pid = p->pid, .usedGpuMemory = p->mem_bytes};
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos)
{
    return list(device, infoCount, infos, sizeof(*infos), fill_v2);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos)
{
    return list(device, infoCount, infos, sizeof(*infos), fill_v2);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                  nvmlProcessInfo_v1_t *infos)
{
    return list(device, infoCount, infos, sizeof(*infos), fill_v1);
}

static unsigned long long now_us(void)
{
    struct timeval tv;

    gettimeofday(&tv, NULL);
    return (unsigned long long)tv.tv_sec * 1000000ull + (unsigned long long)tv.tv_usec;
}

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                             nvmlProcessUtilizationSample_t *utilization,
                                             unsigned int *processSamplesCount,
                                             unsigned long long lastSeenTimeStamp)
{
    MOCK_LOCKED;
    unsigned long long now = now_us();
    struct mock_gpu *g;
    nvmlReturn_t r;

    r = mock_full_gpu(device, processSamplesCount != NULL, NVML_ERROR_NOT_SUPPORTED, &g);
    if (r != NVML_SUCCESS)
        return r;
    if (g->mig_enabled)
        return NVML_ERROR_NOT_SUPPORTED;
    if (g->n_procs == 0 || lastSeenTimeStamp >= now)
        return NVML_ERROR_NOT_FOUND;
    if (!utilization || *processSamplesCount < g->n_procs) {
        *processSamplesCount = (unsigned)g->n_procs;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (size_t i = 0; i < g->n_procs; i++)
        utilization[i] = (nvmlProcessUtilizationSample_t){.pid = g->procs[i].pid,
                                                          .timeStamp = now,
                                                          .smUtil = g->procs[i].sm_util,
                                                          .memUtil = g->procs[i].mem_util};
    *processSamplesCount = (unsigned)g->n_procs;
    return NVML_SUCCESS;
}
