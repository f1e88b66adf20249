/* SPDX-License-Identifier: Apache-2.0 */
/*
 * MIG: the GPU instance profile tables of the MIG-capable GPUs the mock models (as `nvidia-smi mig
 * -lgip` lists them), the driver's GPU instance numbering, and the NVML calls on MIG: mode, MIG
 * device handles, GPU and compute instances and their profile info.
 *
 * The table names ("1g.5gb") are what NVIDIA's naming rule derives from each profile's memory and
 * the parent's total memory (40960 MiB for A100-SXM4-40GB, 81559 MiB for H100 80GB); the unit tests
 * check that by recomputing them.
 */
#include <string.h>

#include "mock-internal.h"

#define P1 {0, 1, 2, 3, 4, 5, 6}, 7
#define P1W {0, 2, 4, 6}, 4
#define P2 {0, 2, 4}, 3
#define P3 {0, 4}, 2
#define P0 {0}, 1

/* index, id, name, slices, mem slices, instances, SMs, CE, DEC, ENC, JPG, OFA, p2p, MiB, starts */
static const struct mock_mig_table tables[] = {
    {"a100-40gb",
     {"A100", "40GB"},
     7,
     {
         {0x0, 19, "1g.5gb", 1, 1, 7, 14, 1, 0, 0, 0, 0, false, 4864, P1},
         {0x1, 14, "2g.10gb", 2, 2, 3, 28, 2, 1, 0, 0, 0, false, 9984, P2},
         {0x2, 9, "3g.20gb", 3, 4, 2, 42, 3, 2, 0, 0, 0, false, 19968, P3},
         {0x3, 5, "4g.20gb", 4, 4, 1, 56, 4, 2, 0, 0, 0, false, 19968, P0},
         {0x4, 0, "7g.40gb", 7, 8, 1, 98, 7, 5, 0, 1, 1, false, 40192, P0},
         {0x7, 20, "1g.5gb+me", 1, 1, 1, 14, 1, 1, 0, 1, 1, false, 4864, P1},
         {0x9, 15, "1g.10gb", 1, 2, 4, 14, 1, 1, 0, 0, 0, false, 9984, P1W},
     }},
    {"h100-80gb",
     {"H100", "80GB"},
     7,
     {
         {0x0, 19, "1g.10gb", 1, 1, 7, 16, 1, 1, 0, 1, 0, true, 9856, P1},
         {0x1, 14, "2g.20gb", 2, 2, 3, 32, 2, 2, 0, 2, 0, true, 19968, P2},
         {0x2, 9, "3g.40gb", 3, 4, 2, 60, 3, 3, 0, 3, 0, true, 40192, P3},
         {0x3, 5, "4g.40gb", 4, 4, 1, 64, 4, 4, 0, 4, 0, true, 40192, P0},
         {0x4, 0, "7g.80gb", 7, 8, 1, 132, 8, 7, 0, 7, 1, true, 80384, P0},
         {0x7, 20, "1g.10gb+me", 1, 1, 1, 16, 1, 1, 0, 1, 1, true, 9856, P1},
         {0x9, 15, "1g.20gb", 1, 2, 4, 26, 1, 1, 0, 1, 0, true, 19968, P1W},
     }},
};

const struct mock_mig_table *mock_mig_table_by_name(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(tables); i++)
        if (strcmp(tables[i].name, name) == 0)
            return &tables[i];
    return NULL;
}

const struct mock_mig_table *mock_mig_table_for_gpu(const char *gpu_name)
{
    for (size_t i = 0; i < ARRAY_SIZE(tables); i++)
        if (strstr(gpu_name, tables[i].match[0]) && strstr(gpu_name, tables[i].match[1]))
            return &tables[i];
    return NULL;
}

const struct mock_gi_profile *mock_mig_profile_by_name(const struct mock_mig_table *t,
                                                       const char *name)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->p[i].name, name) == 0)
            return &t->p[i];
    return NULL;
}

static const struct mock_gi_profile *profile_by_index(const struct mock_mig_table *t,
                                                      unsigned index)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->p[i].index == index)
            return &t->p[i];
    return NULL;
}

/* The driver numbers GPU instances by placement: the whole GPU 0, halves 1-2, quarters 3-6, eighths
 * 7-14. Overlapping placements share ids, which is fine since they cannot coexist. */
unsigned mock_mig_default_gi_id(const struct mock_gi_profile *p, unsigned start)
{
    switch (p->mem_slices) {
    case 8:
        return 0;
    case 4:
        return 1 + start / 4;
    case 2:
        return 3 + start / 2;
    default:
        return 7 + start;
    }
}

/* Compute instance sizes by profile index (1_SLICE .. 7_SLICE). */
static const unsigned ci_sizes[] = {1, 2, 3, 4, 7};

bool mock_mig_ci_profile(unsigned gi_slices, unsigned ci_slices, unsigned *ret_index)
{
    /* A 4-slice GPU instance splits into 1, 2 or 4 compute slices, not 3. */
    if (ci_slices > gi_slices || (gi_slices == 4 && ci_slices == 3))
        return false;
    for (unsigned i = 0; i < ARRAY_SIZE(ci_sizes); i++)
        if (ci_sizes[i] == ci_slices) {
            *ret_index = i;
            return true;
        }
    return false;
}

/* A full, MIG-capable GPU; NOT_SUPPORTED for one that is not, INVALID_ARGUMENT for a MIG handle. */
static nvmlReturn_t mig_gpu(nvmlDevice_t h, bool ptr_ok, struct mock_gpu **ret)
{
    struct mock_gpu *gpu;
    nvmlReturn_t r;

    r = mock_full_gpu(h, ptr_ok, NVML_ERROR_INVALID_ARGUMENT, &gpu);
    if (r != NVML_SUCCESS)
        return r;
    if (!gpu->mig_capable)
        return NVML_ERROR_NOT_SUPPORTED;
    *ret = gpu;
    return NVML_SUCCESS;
}

/* A MIG device handle. */
static nvmlReturn_t mig_device(nvmlDevice_t h, bool ptr_ok, struct nvmlComputeInstance_st **ret)
{
    struct nvmlDevice_st *dev;
    nvmlReturn_t r;

    r = mock_device(h, ptr_ok, &dev);
    if (r != NVML_SUCCESS)
        return r;
    if (!dev->ci)
        return NVML_ERROR_INVALID_ARGUMENT;
    *ret = dev->ci;
    return NVML_SUCCESS;
}

static nvmlReturn_t gpu_instance(nvmlGpuInstance_t h, bool ptr_ok, struct nvmlGpuInstance_st **ret)
{
    nvmlReturn_t r = mock_enter();

    if (r != NVML_SUCCESS)
        return r;
    if (!mock_handle_in(h, mock.node->gis, mock.node->n_gis, sizeof(*h)) || !ptr_ok)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (mock_gpu_lost(h->gpu))
        return NVML_ERROR_GPU_IS_LOST;
    *ret = h;
    return NVML_SUCCESS;
}

static nvmlReturn_t compute_instance(nvmlComputeInstance_t h, bool ptr_ok,
                                     struct nvmlComputeInstance_st **ret)
{
    nvmlReturn_t r = mock_enter();

    if (r != NVML_SUCCESS)
        return r;
    if (!mock_handle_in(h, mock.node->cis, mock.node->n_cis, sizeof(*h)) || !ptr_ok)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (mock_gpu_lost(h->gi->gpu))
        return NVML_ERROR_GPU_IS_LOST;
    *ret = h;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
                                  unsigned int *pendingMode)
{
    MOCK_LOCKED;
    struct mock_gpu *gpu;
    nvmlReturn_t r;

    r = mig_gpu(device, currentMode && pendingMode, &gpu);
    if (r != NVML_SUCCESS)
        return r;
    *currentMode = gpu->mig_enabled ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
    *pendingMode = gpu->mig_pending ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
    MOCK_LOCKED;
    struct mock_gpu *gpu;
    nvmlReturn_t r;

    r = mig_gpu(device, count != NULL, &gpu);
    if (r != NVML_SUCCESS)
        return r;
    *count = gpu->mig_enabled ? MOCK_MAX_MIG_DEVICES : 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                 nvmlDevice_t *migDevice)
{
    MOCK_LOCKED;
    struct mock_gpu *gpu;
    nvmlReturn_t r;

    r = mig_gpu(device, migDevice != NULL, &gpu);
    if (r != NVML_SUCCESS)
        return r;
    if (!gpu->mig_enabled || index >= MOCK_MAX_MIG_DEVICES)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (index >= gpu->n_migs)
        return NVML_ERROR_NOT_FOUND;
    *migDevice = &gpu->migs[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMig)
{
    MOCK_LOCKED;
    struct nvmlDevice_st *dev;
    nvmlReturn_t r;

    r = mock_device(device, isMig != NULL, &dev);
    if (r != NVML_SUCCESS)
        return r;
    *isMig = dev->ci != NULL;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice,
                                                          nvmlDevice_t *device)
{
    MOCK_LOCKED;
    struct nvmlComputeInstance_st *ci;
    nvmlReturn_t r;

    r = mig_device(migDevice, device != NULL, &ci);
    if (r != NVML_SUCCESS)
        return r;
    *device = ci->gi->gpu->handle;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id)
{
    MOCK_LOCKED;
    struct nvmlComputeInstance_st *ci;
    nvmlReturn_t r;

    r = mig_device(device, id != NULL, &ci);
    if (r != NVML_SUCCESS)
        return r;
    *id = ci->gi->id;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id)
{
    MOCK_LOCKED;
    struct nvmlComputeInstance_st *ci;
    nvmlReturn_t r;

    r = mig_device(device, id != NULL, &ci);
    if (r != NVML_SUCCESS)
        return r;
    *id = ci->id;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes)
{
    MOCK_LOCKED;
    struct nvmlDevice_st *dev;
    const struct mock_gi_profile *p;
    const struct nvmlComputeInstance_st *ci;
    nvmlReturn_t r;

    r = mock_device(device, attributes != NULL, &dev);
    if (r != NVML_SUCCESS)
        return r;
    if (!dev->ci)
        return NVML_ERROR_NOT_SUPPORTED;
    ci = dev->ci;
    p = ci->gi->prof;
    *attributes = (nvmlDeviceAttributes_t){
        .multiprocessorCount = p->sms * ci->slices / p->slices,
        .sharedCopyEngineCount = p->ce,
        .sharedDecoderCount = p->dec,
        .sharedEncoderCount = p->enc,
        .sharedJpegCount = p->jpg,
        .sharedOfaCount = p->ofa,
        .gpuInstanceSliceCount = p->slices,
        .computeInstanceSliceCount = ci->slices,
        .memorySizeMB = p->mem_mib,
    };
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                          nvmlGpuInstance_t *gpuInstance)
{
    MOCK_LOCKED;
    struct mock_gpu *gpu;
    nvmlReturn_t r;

    r = mig_gpu(device, gpuInstance != NULL, &gpu);
    if (r != NVML_SUCCESS)
        return r;
    if (!gpu->mig_enabled)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (size_t i = 0; i < gpu->n_gis; i++)
        if (gpu->gis[i].id == id) {
            *gpuInstance = &gpu->gis[i];
            return NVML_SUCCESS;
        }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t *info)
{
    MOCK_LOCKED;
    struct nvmlGpuInstance_st *gi;
    nvmlReturn_t r;

    r = gpu_instance(gpuInstance, info != NULL, &gi);
    if (r != NVML_SUCCESS)
        return r;
    *info = (nvmlGpuInstanceInfo_t){
        .device = gi->gpu->handle,
        .id = gi->id,
        .profileId = gi->prof->id,
        .placement = {.start = gi->start, .size = gi->prof->mem_slices},
    };
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t gpuInstance, unsigned int id,
                                                   nvmlComputeInstance_t *computeInstance)
{
    MOCK_LOCKED;
    struct nvmlGpuInstance_st *gi;
    nvmlReturn_t r;

    r = gpu_instance(gpuInstance, computeInstance != NULL, &gi);
    if (r != NVML_SUCCESS)
        return r;
    for (size_t i = 0; i < gi->n_cis; i++)
        if (gi->cis[i].id == id) {
            *computeInstance = &gi->cis[i];
            return NVML_SUCCESS;
        }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t computeInstance,
                                           nvmlComputeInstanceInfo_t *info)
{
    MOCK_LOCKED;
    struct nvmlComputeInstance_st *ci;
    nvmlReturn_t r;

    r = compute_instance(computeInstance, info != NULL, &ci);
    if (r != NVML_SUCCESS)
        return r;
    *info = (nvmlComputeInstanceInfo_t){
        .device = ci->gi->gpu->handle,
        .gpuInstance = ci->gi,
        .id = ci->id,
        .profileId = ci->profile_index,
        .placement = {.start = ci->start, .size = ci->slices},
    };
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                 nvmlGpuInstanceProfileInfo_t *info)
{
    MOCK_LOCKED;
    const struct mock_gi_profile *p;
    struct mock_gpu *gpu;
    nvmlReturn_t r;

    r = mig_gpu(device, info != NULL, &gpu);
    if (r != NVML_SUCCESS)
        return r;
    if (profile >= NVML_GPU_INSTANCE_PROFILE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    p = profile_by_index(gpu->mig_table, profile);
    if (!p)
        return NVML_ERROR_NOT_SUPPORTED;
    *info = (nvmlGpuInstanceProfileInfo_t){
        .id = p->id,
        .isP2pSupported = p->p2p,
        .sliceCount = p->slices,
        .instanceCount = p->instances,
        .multiprocessorCount = p->sms,
        .copyEngineCount = p->ce,
        .decoderCount = p->dec,
        .encoderCount = p->enc,
        .jpegCount = p->jpg,
        .ofaCount = p->ofa,
        .memorySizeMB = p->mem_mib,
    };
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gpuInstance,
                                                          unsigned int profile,
                                                          unsigned int engProfile,
                                                          nvmlComputeInstanceProfileInfo_t *info)
{
    MOCK_LOCKED;
    const struct mock_gi_profile *p;
    struct nvmlGpuInstance_st *gi;
    unsigned index, slices;
    nvmlReturn_t r;

    r = gpu_instance(gpuInstance, info != NULL, &gi);
    if (r != NVML_SUCCESS)
        return r;
    if (profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT ||
        engProfile != NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
        return NVML_ERROR_INVALID_ARGUMENT;
    p = gi->prof;
    if (profile >= ARRAY_SIZE(ci_sizes))
        return NVML_ERROR_NOT_SUPPORTED;
    slices = ci_sizes[profile];
    if (!mock_mig_ci_profile(p->slices, slices, &index))
        return NVML_ERROR_NOT_SUPPORTED;
    *info = (nvmlComputeInstanceProfileInfo_t){
        .id = index,
        .sliceCount = slices,
        .instanceCount = p->slices / slices,
        .multiprocessorCount = p->sms * slices / p->slices,
        .sharedCopyEngineCount = p->ce,
        .sharedDecoderCount = p->dec,
        .sharedEncoderCount = p->enc,
        .sharedJpegCount = p->jpg,
        .sharedOfaCount = p->ofa,
    };
    return NVML_SUCCESS;
}
