/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The library's life cycle and the plain device queries: the reference-counted init that loads the
 * node profile named by MOCK_NVML_PROFILE, shutdown, NVIDIA's error texts, the system versions,
 * device enumeration and handle lookup, identity (UUID, name, serial, VBIOS, brand, architecture,
 * compute capability), memory and PCI information. Also the checks every entry point starts with.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* First: it declares the NVML prototypes with default visibility, so they are exported. */
#include "mock-internal.h"

#include "gpu-nvml-errors.h"

struct mock_state mock = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
};

struct mock_state *mock_lock(void)
{
    pthread_mutex_lock(&mock.lock);
    return &mock;
}

void mock_unlockp(struct mock_state **s)
{
    if (*s)
        pthread_mutex_unlock(&(*s)->lock);
}

nvmlReturn_t mock_ready(void)
{
    return mock.refcount > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

nvmlReturn_t mock_enter(void)
{
    nvmlReturn_t r = mock_ready();

    if (r == NVML_SUCCESS)
        mock_events_poll();
    return r;
}

bool mock_handle_in(const void *h, const void *base, size_t n, size_t size)
{
    uintptr_t p = (uintptr_t)h, b = (uintptr_t)base;

    return h && n > 0 && p >= b && p < b + n * size && (p - b) % size == 0;
}

bool mock_gpu_lost_at_start(const struct mock_gpu *gpu)
{
    return gpu->lost_at_start && mock.lost[gpu->index] == MOCK_LOST_PROFILE;
}

bool mock_gpu_lost(const struct mock_gpu *gpu)
{
    return mock.lost[gpu->index] == MOCK_LOST_RUNTIME || mock_gpu_lost_at_start(gpu);
}

nvmlReturn_t mock_device(nvmlDevice_t h, bool ptr_ok, struct nvmlDevice_st **ret)
{
    nvmlReturn_t r = mock_enter();

    if (r != NVML_SUCCESS)
        return r;
    if (!mock_handle_in(h, mock.node->handles, mock.node->n_handles, sizeof(*h)) || !ptr_ok)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (mock_gpu_lost(h->gpu))
        return NVML_ERROR_GPU_IS_LOST;
    *ret = h;
    return NVML_SUCCESS;
}

nvmlReturn_t mock_full_gpu(nvmlDevice_t h, bool ptr_ok, nvmlReturn_t on_mig, struct mock_gpu **ret)
{
    struct nvmlDevice_st *dev;
    nvmlReturn_t r;

    r = mock_device(h, ptr_ok, &dev);
    if (r != NVML_SUCCESS)
        return r;
    if (dev->ci)
        return on_mig;
    *ret = dev->gpu;
    return NVML_SUCCESS;
}

nvmlReturn_t mock_copy_string(char *buf, unsigned length, const char *s)
{
    size_t n = strlen(s);

    if (!buf)
        return NVML_ERROR_INVALID_ARGUMENT;
    if ((size_t)length < n + 1)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buf, s, n + 1);
    return NVML_SUCCESS;
}

/* ---- life cycle ---- */

static void record_error(const char *msg)
{
    snprintf(mock.error, sizeof(mock.error), "%s", msg);
    mock.has_error = true;
    fprintf(stderr, "mock-nvml: %s\n", msg);
}

static nvmlReturn_t first_init(void)
{
    _cleanup_(mock_node_freep) struct mock_node *node = NULL;
    struct diag d;
    const char *path = getenv("MOCK_NVML_PROFILE");
    const char *events = getenv("MOCK_NVML_EVENTS");

    mock.has_error = false;
    if (!path || !*path)
        return NVML_ERROR_DRIVER_NOT_LOADED;
    diag_init(&d);
    if (mock_profile_load(path, &d, &node) < 0) {
        record_error(d.msg);
        return NVML_ERROR_UNKNOWN;
    }
    mock_events_attach(events && *events ? events : node->events_path);
    mock_telemetry_start(node);
    mock.node = TAKE_PTR(node);
    return NVML_SUCCESS;
}

static void cond_setup(void)
{
    pthread_condattr_t attr;

    if (mock.cond_ready)
        return;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&mock.cond, &attr);
    pthread_condattr_destroy(&attr);
    mock.cond_ready = true;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    MOCK_LOCKED;
    nvmlReturn_t r;

    cond_setup();
    if (mock.refcount == 0) {
        r = first_init();
        if (r != NVML_SUCCESS)
            return r;
    }
    mock.refcount++;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void)
{
    return nvmlInitWithFlags(0);
}

nvmlReturn_t nvmlShutdown(void)
{
    MOCK_LOCKED;

    if (mock.refcount == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (--mock.refcount > 0)
        return NVML_SUCCESS;
    mock_events_release();
    mock_telemetry_release();
    mock.node = mock_node_free(mock.node);
    /* Wake waiters so they notice the shutdown instead of sleeping out their timeout. */
    pthread_cond_broadcast(&mock.cond);
    return NVML_SUCCESS;
}

/* When the library is unloaded (dlclose) without a final nvmlShutdown, or with the fault reader's
 * path still held: free what is left, so leak checkers see a clean unload. */
__attribute__((destructor)) static void mock_unload(void)
{
    mock_events_release();
    mock_telemetry_release();
    mock.node = mock_node_free(mock.node);
    free(mock.tail.path);
    mock.tail.path = NULL;
    if (mock.cond_ready)
        pthread_cond_destroy(&mock.cond);
}

const char *mock_nvml_profile_error(void)
{
    MOCK_LOCKED;

    return mock.has_error ? mock.error : NULL;
}

const char *nvmlErrorString(nvmlReturn_t result)
{
    return nvml_error_text((int)result);
}

/* ---- system ---- */

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    MOCK_LOCKED;
    nvmlReturn_t r = mock_ready();

    return r != NVML_SUCCESS ? r : mock_copy_string(version, length, mock.node->driver_version);
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    MOCK_LOCKED;
    nvmlReturn_t r = mock_ready();

    return r != NVML_SUCCESS ? r : mock_copy_string(version, length, mock.node->nvml_version);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
    MOCK_LOCKED;
    nvmlReturn_t r = mock_ready();

    if (r != NVML_SUCCESS)
        return r;
    if (!cudaDriverVersion)
        return NVML_ERROR_INVALID_ARGUMENT;
    *cudaDriverVersion = mock.node->cuda_version;
    return NVML_SUCCESS;
}

/* ---- enumeration ---- */

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    MOCK_LOCKED;
    nvmlReturn_t r = mock_enter();

    if (r != NVML_SUCCESS)
        return r;
    if (!deviceCount)
        return NVML_ERROR_INVALID_ARGUMENT;
    *deviceCount = (unsigned)mock.node->n_gpus;
    return NVML_SUCCESS;
}

/* Hands out a handle: a GPU lost before attach cannot be acquired. */
static nvmlReturn_t acquire(struct nvmlDevice_st *dev, nvmlDevice_t *ret)
{
    if (mock_gpu_lost_at_start(dev->gpu))
        return NVML_ERROR_GPU_IS_LOST;
    *ret = dev;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    MOCK_LOCKED;
    nvmlReturn_t r = mock_enter();

    if (r != NVML_SUCCESS)
        return r;
    if (!device || index >= mock.node->n_gpus)
        return NVML_ERROR_INVALID_ARGUMENT;
    return acquire(mock.node->gpus[index].handle, device);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    MOCK_LOCKED;
    struct nvmlDevice_st *dev;
    nvmlReturn_t r = mock_enter();

    if (r != NVML_SUCCESS)
        return r;
    if (!uuid || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    dev = mock_find_uuid(mock.node, uuid);
    if (!dev)
        return NVML_ERROR_NOT_FOUND;
    return acquire(dev, device);
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
    MOCK_LOCKED;
    struct mock_pci want;
    nvmlReturn_t r = mock_enter();

    if (r != NVML_SUCCESS)
        return r;
    if (!pciBusId || !device || !mock_parse_bus_id(pciBusId, &want))
        return NVML_ERROR_INVALID_ARGUMENT;
    for (size_t i = 0; i < mock.node->n_gpus; i++) {
        const struct mock_pci *p = &mock.node->gpus[i].pci;

        if (p->domain == want.domain && p->bus == want.bus && p->device == want.device &&
            p->function == want.function)
            return acquire(mock.node->gpus[i].handle, device);
    }
    return NVML_ERROR_NOT_FOUND;
}

/* ---- identity ---- */

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    MOCK_LOCKED;
    struct nvmlDevice_st *dev;
    nvmlReturn_t r;

    r = mock_device(device, uuid != NULL, &dev);
    if (r != NVML_SUCCESS)
        return r;
    return mock_copy_string(uuid, length, dev->ci ? dev->ci->uuid : dev->gpu->uuid);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    MOCK_LOCKED;
    struct nvmlDevice_st *dev;
    char mig[MOCK_STR_MAX + 64];
    nvmlReturn_t r;

    r = mock_device(device, name != NULL, &dev);
    if (r != NVML_SUCCESS)
        return r;
    if (!dev->ci)
        return mock_copy_string(name, length, dev->gpu->name);
    snprintf(mig, sizeof(mig), "%s MIG %s", dev->gpu->name, dev->ci->profile_name);
    return mock_copy_string(name, length, mig);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    MOCK_LOCKED;
    struct mock_gpu *gpu;
    nvmlReturn_t r;

    r = mock_full_gpu(device, index != NULL, NVML_ERROR_NOT_SUPPORTED, &gpu);
    if (r != NVML_SUCCESS)
        return r;
    *index = gpu->index;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor)
{
    MOCK_LOCKED;
    struct mock_gpu *gpu;
    nvmlReturn_t r;

    r = mock_full_gpu(device, minor != NULL, NVML_ERROR_NOT_SUPPORTED, &gpu);
    if (r != NVML_SUCCESS)
        return r;
    *minor = gpu->minor;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length)
{
    MOCK_LOCKED;
    struct mock_gpu *gpu;
    nvmlReturn_t r;

    r = mock_full_gpu(device, serial != NULL, NVML_ERROR_NOT_SUPPORTED, &gpu);
    return r != NVML_SUCCESS ? r : mock_copy_string(serial, length, gpu->serial);
}

nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t device, char *version, unsigned int length)
{
    MOCK_LOCKED;
    struct mock_gpu *gpu;
    nvmlReturn_t r;

    r = mock_full_gpu(device, version != NULL, NVML_ERROR_NOT_SUPPORTED, &gpu);
    return r != NVML_SUCCESS ? r : mock_copy_string(version, length, gpu->vbios);
}

nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t *type)
{
    MOCK_LOCKED;
    struct nvmlDevice_st *dev;
    nvmlReturn_t r;

    r = mock_device(device, type != NULL, &dev);
    if (r != NVML_SUCCESS)
        return r;
    *type = dev->gpu->brand;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t *arch)
{
    MOCK_LOCKED;
    struct nvmlDevice_st *dev;
    nvmlReturn_t r;

    r = mock_device(device, arch != NULL, &dev);
    if (r != NVML_SUCCESS)
        return r;
    *arch = dev->gpu->arch;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor)
{
    MOCK_LOCKED;
    struct mock_gpu *gpu;
    nvmlReturn_t r;

    r = mock_full_gpu(device, major && minor, NVML_ERROR_NOT_SUPPORTED, &gpu);
    if (r != NVML_SUCCESS)
        return r;
    *major = gpu->cc_major;
    *minor = gpu->cc_minor;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t *mode)
{
    MOCK_LOCKED;
    struct mock_gpu *gpu;
    nvmlReturn_t r;

    r = mock_full_gpu(device, mode != NULL, NVML_ERROR_NOT_SUPPORTED, &gpu);
    if (r != NVML_SUCCESS)
        return r;
    *mode = gpu->persistence ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
}

/* ---- memory ---- */

#define MIB 1048576ULL

/* Total, reserved and allocated bytes of a GPU or a MIG device (a GPU instance's memory). */
static void memory_of(const struct nvmlDevice_st *dev, unsigned long long *total,
                      unsigned long long *reserved, unsigned long long *used)
{
    unsigned long long procs = mock_process_memory(dev);

    if (dev->ci) {
        *total = dev->ci->gi->prof->mem_mib * MIB;
        *reserved = 0;
        *used = procs < *total ? procs : *total;
        return;
    }
    *total = dev->gpu->mem_mib * MIB;
    *reserved = dev->gpu->reserved_mib * MIB;
    /* What the profile says is allocated, or more when its processes hold more. */
    *used = dev->gpu->used_mib * MIB;
    if (procs > *used)
        *used = procs < *total - *reserved ? procs : *total - *reserved;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    MOCK_LOCKED;
    struct nvmlDevice_st *dev;
    unsigned long long total, reserved, used;
    nvmlReturn_t r;

    r = mock_device(device, memory != NULL, &dev);
    if (r != NVML_SUCCESS)
        return r;
    memory_of(dev, &total, &reserved, &used);
    *memory =
        (nvmlMemory_t){.total = total, .free = total - reserved - used, .used = reserved + used};
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    MOCK_LOCKED;
    struct nvmlDevice_st *dev;
    unsigned long long total, reserved, used;
    nvmlReturn_t r;

    r = mock_device(device, memory != NULL, &dev);
    if (r != NVML_SUCCESS)
        return r;
    if (memory->version != nvmlMemory_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    memory_of(dev, &total, &reserved, &used);
    memory->total = total;
    memory->reserved = reserved;
    memory->free = total - reserved - used;
    memory->used = used;
    return NVML_SUCCESS;
}

/* ---- PCI ---- */

bool mock_parse_bus_id(const char *s, struct mock_pci *ret)
{
    unsigned long v[4];
    const char seps[] = {':', ':', '.', '\0'};
    const unsigned long max[] = {0xFFFFFFFFul, 0xFFul, 0x1Ful, 0x7ul};
    const char *p = s;

    for (size_t i = 0; i < 4; i++) {
        char *end;

        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || (*p >= 'A' && *p <= 'F')))
            return false;
        v[i] = strtoul(p, &end, 16);
        if (*end != seps[i] || v[i] > max[i] || end - p > 8)
            return false;
        p = end + (i < 3);
    }
    *ret = (struct mock_pci){(unsigned)v[0], (unsigned)v[1], (unsigned)v[2], (unsigned)v[3]};
    return true;
}

void mock_format_pci(const struct mock_pci *pci, unsigned device_id, unsigned subsystem_id,
                     nvmlPciInfo_t *ret)
{
    memset(ret, 0, sizeof(*ret));
    snprintf(ret->busIdLegacy, sizeof(ret->busIdLegacy), "%04X:%02X:%02X.%X", pci->domain & 0xFFFFu,
             pci->bus, pci->device, pci->function);
    snprintf(ret->busId, sizeof(ret->busId), "%08X:%02X:%02X.%X", pci->domain, pci->bus,
             pci->device, pci->function);
    ret->domain = pci->domain;
    ret->bus = pci->bus;
    ret->device = pci->device;
    ret->pciDeviceId = device_id;
    ret->pciSubSystemId = subsystem_id;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    MOCK_LOCKED;
    struct mock_gpu *gpu;
    nvmlReturn_t r;

    r = mock_full_gpu(device, pci != NULL, NVML_ERROR_NOT_SUPPORTED, &gpu);
    if (r != NVML_SUCCESS)
        return r;
    mock_format_pci(&gpu->pci, gpu->pci_device_id, gpu->pci_subsystem_id, pci);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfoExt(nvmlDevice_t device, nvmlPciInfoExt_t *pci)
{
    MOCK_LOCKED;
    struct mock_gpu *gpu;
    nvmlPciInfo_t base;
    nvmlReturn_t r;

    r = mock_full_gpu(device, pci != NULL, NVML_ERROR_NOT_SUPPORTED, &gpu);
    if (r != NVML_SUCCESS)
        return r;
    if (pci->version != nvmlPciInfoExt_v1)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    mock_format_pci(&gpu->pci, gpu->pci_device_id, gpu->pci_subsystem_id, &base);
    pci->domain = base.domain;
    pci->bus = base.bus;
    pci->device = base.device;
    pci->pciDeviceId = base.pciDeviceId;
    pci->pciSubSystemId = base.pciSubSystemId;
    pci->baseClass = (gpu->pci_class >> 16) & 0xFFu;
    pci->subClass = (gpu->pci_class >> 8) & 0xFFu;
    memcpy(pci->busId, base.busId, sizeof(pci->busId));
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, nvmlGpuFabricInfoV_t *info)
{
    MOCK_LOCKED;
    struct mock_gpu *gpu;
    nvmlReturn_t r;

    r = mock_full_gpu(device, info != NULL, NVML_ERROR_NOT_SUPPORTED, &gpu);
    if (r != NVML_SUCCESS)
        return r;
    if (!gpu->fabric)
        return NVML_ERROR_NOT_SUPPORTED;
    if (info->version != nvmlGpuFabricInfo_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    memcpy(info->clusterUuid, gpu->fabric_cluster, sizeof(info->clusterUuid));
    info->status = NVML_SUCCESS;
    info->cliqueId = gpu->fabric_clique;
    info->state = (unsigned char)gpu->fabric_state;
    info->healthMask = 0;
    return NVML_SUCCESS;
}
