/* SPDX-License-Identifier: Apache-2.0 */
/*
 * MIG devices: walking a MIG-enabled GPU's MIG handles and naming each one the way NVIDIA's tools
 * do ("1g.5gb", "1c.2g.10gb", "1g.10gb+me"). The name is not something NVML returns: it is derived
 * from the *index* of the GPU-instance and compute-instance profiles (found by matching profile
 * ids), the instance's memory and the parent's total memory (ABI facts §5.6). Device plugin
 * resource names, GFD labels and DRA attributes are all built from it, so the arithmetic must match
 * NVIDIA's to the byte. The GPU-instance profile that gives the index also gives the instance's
 * engine counts (copy engines, decoders, encoders, JPEG and OFA engines), kept for DRA capacities.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu-internal.h"

/* G of "<G>g" for a GPU-instance profile index; 0 when the index has no known slice count. */
static unsigned gi_slices(unsigned index)
{
    switch (index) {
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE:
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1:
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2:
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX:
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME:
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME:
        return 1;
    case NVML_GPU_INSTANCE_PROFILE_2_SLICE:
    case NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1:
    case NVML_GPU_INSTANCE_PROFILE_2_SLICE_GFX:
    case NVML_GPU_INSTANCE_PROFILE_2_SLICE_NO_ME:
    case NVML_GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME:
        return 2;
    case NVML_GPU_INSTANCE_PROFILE_3_SLICE:
    case NVML_GPU_INSTANCE_PROFILE_3_SLICE_GFX:
        /* go-nvlib v0.12 does not know 3_SLICE_GFX; naming it like its 1/2/4-slice siblings is
         * the obvious reading, and better than refusing a device the driver offers. */
        return 3;
    case NVML_GPU_INSTANCE_PROFILE_4_SLICE:
    case NVML_GPU_INSTANCE_PROFILE_4_SLICE_GFX:
        return 4;
    case NVML_GPU_INSTANCE_PROFILE_6_SLICE:
        return 6;
    case NVML_GPU_INSTANCE_PROFILE_7_SLICE:
        return 7;
    case NVML_GPU_INSTANCE_PROFILE_8_SLICE:
        return 8;
    default:
        return 0;
    }
}

/* C of "<C>c" for a compute-instance profile index; 0 when unknown. */
static unsigned ci_slices(unsigned index)
{
    switch (index) {
    case NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE:
    case NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1:
        return 1;
    case NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE:
        return 2;
    case NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE:
        return 3;
    case NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE:
        return 4;
    case NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE:
        return 6;
    case NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE:
    case NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE_NVL:
        return 7;
    case NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE:
        return 8;
    default:
        return 0;
    }
}

static const char *profile_suffix(unsigned gi_index)
{
    switch (gi_index) {
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1:
    case NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1:
        return "+me";
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME:
    case NVML_GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME:
        return "+me.all";
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX:
    case NVML_GPU_INSTANCE_PROFILE_2_SLICE_GFX:
    case NVML_GPU_INSTANCE_PROFILE_3_SLICE_GFX:
    case NVML_GPU_INSTANCE_PROFILE_4_SLICE_GFX:
        return "+gfx";
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME:
    case NVML_GPU_INSTANCE_PROFILE_2_SLICE_NO_ME:
        return "-me";
    default:
        return "";
    }
}

/*
 * GB = round(ceil(mig_bytes / parent_bytes * 8) / 8 * ceil(parent_bytes / 1 GiB)), NVIDIA's rule:
 * the instance's share of memory rounded up to eighths, times the card's nominal size. Done in
 * integers, so a share of exactly k/8 is not nudged over by floating-point error.
 */
static uint64_t profile_gb(uint64_t mig_mib, uint64_t parent_bytes)
{
    uint64_t eighths = ((mig_mib << 23) + parent_bytes - 1) / parent_bytes;
    uint64_t parent_gb = (parent_bytes + (UINT64_C(1) << 30) - 1) >> 30;
    return (eighths * parent_gb + 4) / 8;
}

int gpu_mig_profile_name(unsigned gi_profile_index, unsigned ci_profile_index,
                         uint64_t mig_memory_mib, uint64_t parent_total_bytes,
                         char buf[static GPU_PROFILE_MAX])
{
    unsigned g = gi_slices(gi_profile_index);
    unsigned c = ci_slices(ci_profile_index);
    int n;

    /* The bounds keep the shift in profile_gb from overflowing (2^40 MiB is far beyond any GPU). */
    if (g == 0 || c == 0 || parent_total_bytes == 0 || mig_memory_mib > (UINT64_C(1) << 40))
        return -EINVAL;
    uint64_t gb = profile_gb(mig_memory_mib, parent_total_bytes);
    const char *suffix = profile_suffix(gi_profile_index);
    if (c == g)
        n = snprintf(buf, GPU_PROFILE_MAX, "%ug.%" PRIu64 "gb%s", g, gb, suffix);
    else
        n = snprintf(buf, GPU_PROFILE_MAX, "%uc.%ug.%" PRIu64 "gb%s", c, g, gb, suffix);
    if (n < 0 || n >= GPU_PROFILE_MAX)
        return -ENOBUFS;
    return 0;
}

/* The GPU-instance profiles of one parent GPU, by profile index; the id is UINT32_MAX where NVML
 * has no such profile. Read once per GPU: the index names the device, the rest gives its engines.
 */
struct gi_profiles {
    nvmlGpuInstanceProfileInfo_t info[NVML_GPU_INSTANCE_PROFILE_COUNT];
};

static void read_gi_profiles(struct gpu_nvml *nvml, nvmlDevice_t parent, struct gi_profiles *p)
{
    for (unsigned i = 0; i < NVML_GPU_INSTANCE_PROFILE_COUNT; i++) {
        nvmlGpuInstanceProfileInfo_t info = {0};
        nvmlReturn_t r = NVML_CALL(nvml, nvmlDeviceGetGpuInstanceProfileInfo, parent, i, &info);
        if (r != NVML_SUCCESS)
            info = (nvmlGpuInstanceProfileInfo_t){.id = UINT32_MAX};
        p->info[i] = info;
    }
}

static int gi_profile_index(const struct gi_profiles *p, unsigned profile_id, unsigned *ret)
{
    for (unsigned i = 0; i < NVML_GPU_INSTANCE_PROFILE_COUNT; i++)
        if (p->info[i].id == profile_id) {
            *ret = i;
            return 0;
        }
    return -ENOENT;
}

static int ci_profile_index(struct gpu_nvml *nvml, nvmlGpuInstance_t gi, unsigned profile_id,
                            unsigned *ret)
{
    for (unsigned j = 0; j < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; j++) {
        nvmlComputeInstanceProfileInfo_t info = {0};
        nvmlReturn_t r = NVML_CALL(nvml, nvmlGpuInstanceGetComputeInstanceProfileInfo, gi, j,
                                   NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &info);
        if (r == NVML_SUCCESS && info.id == profile_id) {
            *ret = j;
            return 0;
        }
    }
    return -ENOENT;
}

/* What naming a MIG device needs besides its own attributes: the GPU and compute instance info. */
static nvmlReturn_t read_instances(struct gpu_nvml *nvml, nvmlDevice_t parent,
                                   struct gpu_mig_device *mig, nvmlGpuInstance_t *ret_gi,
                                   nvmlComputeInstanceInfo_t *ret_ci)
{
    nvmlGpuInstance_t gi = NULL;
    nvmlComputeInstance_t ci = NULL;
    nvmlGpuInstanceInfo_t gi_info = {0};
    nvmlComputeInstanceInfo_t ci_info = {0};
    nvmlReturn_t r;

    r = NVML_CALL(nvml, nvmlDeviceGetGpuInstanceById, parent, mig->gi_id, &gi);
    if (r == NVML_SUCCESS)
        r = NVML_CALL(nvml, nvmlGpuInstanceGetInfo, gi, &gi_info);
    if (r == NVML_SUCCESS)
        r = NVML_CALL(nvml, nvmlGpuInstanceGetComputeInstanceById, gi, mig->ci_id, &ci);
    if (r == NVML_SUCCESS)
        r = NVML_CALL(nvml, nvmlComputeInstanceGetInfo_v2, ci, &ci_info);
    if (r != NVML_SUCCESS)
        return r;
    mig->gi_profile_id = gi_info.profileId;
    mig->ci_profile_id = ci_info.profileId;
    mig->placement_start = gi_info.placement.start;
    mig->placement_size = gi_info.placement.size;
    *ret_gi = gi;
    *ret_ci = ci_info;
    return NVML_SUCCESS;
}

/* The engine counts of the GPU instance's profile, which NVIDIA's DRA driver publishes as
 * capacities. */
static void set_engines(const nvmlGpuInstanceProfileInfo_t *info, struct gpu_mig_device *mig)
{
    mig->engines_known = true;
    mig->copy_engines = info->copyEngineCount;
    mig->decoders = info->decoderCount;
    mig->encoders = info->encoderCount;
    mig->jpeg_engines = info->jpegCount;
    mig->ofa_engines = info->ofaCount;
}

static void name_mig(struct gpu_nvml *nvml, const struct gi_profiles *profiles,
                     nvmlGpuInstance_t gi, uint64_t memory_mib, uint64_t parent_total_bytes,
                     struct gpu_mig_device *mig)
{
    unsigned gi_index = 0, ci_index = 0;

    if (gi_profile_index(profiles, mig->gi_profile_id, &gi_index) < 0) {
        log_debug(3, "MIG device with an unknown GPU instance profile id", "uuid", mig->uuid);
        return;
    }
    set_engines(&profiles->info[gi_index], mig);
    if (ci_profile_index(nvml, gi, mig->ci_profile_id, &ci_index) < 0) {
        log_debug(3, "MIG device with an unknown compute instance profile id", "uuid", mig->uuid);
        return;
    }
    mig->gi_slices = gi_slices(gi_index);
    mig->ci_slices = ci_slices(ci_index);
    if (gpu_mig_profile_name(gi_index, ci_index, memory_mib, parent_total_bytes, mig->profile) < 0)
        mig->profile[0] = '\0';
}

/* Reads one MIG device; NVML errors other than the parent being lost only leave fields unset. */
static nvmlReturn_t read_one(struct gpu_nvml *nvml, nvmlDevice_t parent, nvmlDevice_t handle,
                             const struct gi_profiles *profiles, uint64_t parent_total_bytes,
                             struct gpu_mig_device *mig)
{
    nvmlDeviceAttributes_t attrs = {0};
    nvmlComputeInstanceInfo_t ci_info = {0};
    nvmlGpuInstance_t gi = NULL;
    nvmlReturn_t r;

    r = NVML_CALL(nvml, nvmlDeviceGetUUID, handle, mig->uuid, sizeof(mig->uuid));
    if (r == NVML_SUCCESS)
        r = NVML_CALL(nvml, nvmlDeviceGetGpuInstanceId, handle, &mig->gi_id);
    if (r == NVML_SUCCESS)
        r = NVML_CALL(nvml, nvmlDeviceGetComputeInstanceId, handle, &mig->ci_id);
    if (r == NVML_SUCCESS)
        r = NVML_CALL(nvml, nvmlDeviceGetAttributes_v2, handle, &attrs);
    if (r != NVML_SUCCESS)
        return r;
    mig->multiprocessors = attrs.multiprocessorCount;
    mig->memory_bytes = (uint64_t)attrs.memorySizeMB << 20;
    r = read_instances(nvml, parent, mig, &gi, &ci_info);
    if (r != NVML_SUCCESS)
        return r;
    name_mig(nvml, profiles, gi, attrs.memorySizeMB, parent_total_bytes, mig);
    return NVML_SUCCESS;
}

nvmlReturn_t gpu_mig_read(struct gpu_nvml *nvml, nvmlDevice_t parent, uint64_t parent_total_bytes,
                          struct gpu_device *dev)
{
    struct gi_profiles profiles;
    unsigned max = 0;
    nvmlReturn_t r;

    r = NVML_CALL(nvml, nvmlDeviceGetMaxMigDeviceCount, parent, &max);
    if (r != NVML_SUCCESS)
        return r == NVML_ERROR_GPU_IS_LOST ? r : NVML_SUCCESS;
    if (max > GPU_MAX_MIG_DEVICES)
        max = GPU_MAX_MIG_DEVICES;
    dev->migs = calloc(max ? max : 1, sizeof(*dev->migs));
    if (!dev->migs)
        return NVML_ERROR_MEMORY;
    read_gi_profiles(nvml, parent, &profiles);
    for (unsigned i = 0; i < max; i++) {
        nvmlDevice_t handle = NULL;
        r = NVML_CALL(nvml, nvmlDeviceGetMigDeviceHandleByIndex, parent, i, &handle);
        if (r == NVML_ERROR_NOT_FOUND || r == NVML_ERROR_INVALID_ARGUMENT)
            continue; /* an empty slot */
        if (r == NVML_SUCCESS) {
            struct gpu_mig_device *mig = &dev->migs[dev->n_migs];
            memset(mig, 0, sizeof(*mig));
            mig->index = i;
            r = read_one(nvml, parent, handle, &profiles, parent_total_bytes, mig);
            if (r == NVML_SUCCESS)
                dev->n_migs++;
        }
        if (r == NVML_ERROR_GPU_IS_LOST)
            return r;
        if (r != NVML_SUCCESS)
            log_debug(3, "skipping an unreadable MIG device", "gpu", LOG_INT(dev->index), "mig",
                      LOG_INT(i), "nvml", gpu_nvml_strerror(nvml, (int)r));
    }
    return NVML_SUCCESS;
}
