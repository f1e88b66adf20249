/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One GPU of a profile: its scalar fields (identity, bus id, minor number, memory, compute
 * capability, architecture and the rest), then its NVLink and MIG sections, and the node arrays
 * all GPUs share, sized up front so the handles NVML hands out never move.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mock-profile-internal.h"

static const char *const gpu_keys[] = {"busId",
                                       "uuid",
                                       "name",
                                       "memory",
                                       "memoryReserved",
                                       "memoryUsed",
                                       "multiprocessors",
                                       "computeCapability",
                                       "architecture",
                                       "brand",
                                       "pciDeviceId",
                                       "pciSubSystemId",
                                       "pciClass",
                                       "fabric",
                                       "minor",
                                       "serial",
                                       "vbios",
                                       "numa",
                                       "pciSwitch",
                                       "persistenceMode",
                                       "ecc",
                                       "lost",
                                       "nvlink",
                                       "mig",
                                       "telemetry",
                                       "processes",
                                       NULL};

static const struct name_value architectures[] = {
    {"kepler", NVML_DEVICE_ARCH_KEPLER},
    {"maxwell", NVML_DEVICE_ARCH_MAXWELL},
    {"pascal", NVML_DEVICE_ARCH_PASCAL},
    {"volta", NVML_DEVICE_ARCH_VOLTA},
    {"turing", NVML_DEVICE_ARCH_TURING},
    {"ampere", NVML_DEVICE_ARCH_AMPERE},
    {"ada", NVML_DEVICE_ARCH_ADA},
    {"hopper", NVML_DEVICE_ARCH_HOPPER},
    {"blackwell", NVML_DEVICE_ARCH_BLACKWELL},
};

static const struct name_value brands[] = {
    {"unknown", NVML_BRAND_UNKNOWN},
    {"tesla", NVML_BRAND_TESLA},
    {"nvidia", NVML_BRAND_NVIDIA},
};

static int read_cc(struct loader *L, const json_t *g, struct mock_gpu *gpu)
{
    const json_t *o = mock_pick(L, g, "computeCapability");
    const json_t *v = json_object_get(o, "computeCapability");
    long major, minor;
    char *end;

    if (!v)
        return doc_fail(L->doc, o, L->d, -EINVAL, "missing required key \"computeCapability\"");
    if (json_is_real(v) || json_is_integer(v)) {
        double x = json_number_value(v);

        major = (long)x;
        minor = (long)((x - (double)major) * 10.0 + 0.5);
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);

        major = strtol(s, &end, 10);
        minor = *end == '.' ? strtol(end + 1, &end, 10) : -1;
        if (*end || end == s)
            minor = -1;
    } else
        major = minor = -1;
    if (major < 1 || major > 99 || minor < 0 || minor > 9)
        return doc_fail(L->doc, v, L->d, -EINVAL,
                        "\"computeCapability\": expected \"MAJOR.MINOR\" such as \"9.0\"");
    gpu->cc_major = (int)major;
    gpu->cc_minor = (int)minor;
    return 0;
}

static int read_pci_switch(struct loader *L, const json_t *g, struct mock_gpu *gpu)
{
    const json_t *v = json_object_get(mock_pick(L, g, "pciSwitch"), "pciSwitch");

    if (!v)
        return 0;
    if (json_is_integer(v))
        snprintf(gpu->pci_switch, sizeof(gpu->pci_switch), "%lld",
                 (long long)json_integer_value(v));
    else if (json_is_string(v) && json_string_length(v) > 0 &&
             json_string_length(v) < sizeof(gpu->pci_switch))
        snprintf(gpu->pci_switch, sizeof(gpu->pci_switch), "%s", json_string_value(v));
    else
        return doc_fail(L->doc, v, L->d, -EINVAL,
                        "\"pciSwitch\": expected an integer or a short string");
    return 0;
}

static int read_bus(struct loader *L, const json_t *g, struct mock_gpu *gpu)
{
    const json_t *o = mock_pick(L, g, "busId");
    const char *s;
    int r;

    r = doc_get_string(L->doc, o, "busId", true, NULL, L->d, &s);
    if (r < 0)
        return r;
    r = mock_read_bus_id(L, json_object_get(o, "busId"), &gpu->pci);
    if (r < 0)
        return r;
    for (size_t i = 0; i < gpu->index; i++)
        if (memcmp(&L->node->gpus[i].pci, &gpu->pci, sizeof(gpu->pci)) == 0)
            return doc_fail(L->doc, json_object_get(o, "busId"), L->d, -EINVAL,
                            "duplicate busId \"%s\" (GPU %zu has it)", s, i);
    return 0;
}

static int read_identity(struct loader *L, const json_t *g, struct mock_gpu *gpu)
{
    char seed[2 * MOCK_STR_MAX], serial[32];
    int r;

    r = read_bus(L, g, gpu);
    if (r >= 0)
        r = mock_read_str(L, mock_pick(L, g, "name"), "name", true, NULL, gpu->name,
                          sizeof(gpu->name));
    if (r < 0)
        return r;
    snprintf(seed, sizeof(seed), "%s@%08X:%02X:%02X.%X", gpu->name, gpu->pci.domain, gpu->pci.bus,
             gpu->pci.device, gpu->pci.function);
    r = mock_read_uuid(L, mock_pick(L, g, "uuid"), "GPU-", seed, gpu->uuid);
    snprintf(serial, sizeof(serial), "1650000000%03u", gpu->index);
    if (r >= 0)
        r = mock_read_str(L, mock_pick(L, g, "serial"), "serial", false, serial, gpu->serial,
                          NVML_DEVICE_SERIAL_BUFFER_SIZE);
    if (r >= 0)
        r = mock_read_str(L, mock_pick(L, g, "vbios"), "vbios", false, "00.00.00.00.00", gpu->vbios,
                          NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE);
    return r;
}

static int read_minor(struct loader *L, const json_t *g, struct mock_gpu *gpu)
{
    const json_t *o = mock_pick(L, g, "minor");
    int r;

    r = mock_read_uint(L, o, "minor", false, gpu->index, 253, &gpu->minor);
    if (r < 0)
        return r;
    for (size_t i = 0; i < gpu->index; i++)
        if (L->node->gpus[i].minor == gpu->minor)
            return doc_fail(L->doc, json_object_get(o, "minor") ? json_object_get(o, "minor") : g,
                            L->d, -EINVAL, "duplicate minor number %u (GPU %zu has it)", gpu->minor,
                            i);
    return 0;
}

static int read_memory(struct loader *L, const json_t *g, struct mock_gpu *gpu)
{
    unsigned total = 0, reserved = 0, used = 0, sms = 0;
    int r;

    r = mock_read_uint(L, mock_pick(L, g, "memory"), "memory", true, 0, 1 << 24, &total);
    if (r >= 0)
        r = mock_read_uint(L, mock_pick(L, g, "memoryReserved"), "memoryReserved", false, 0,
                           1 << 24, &reserved);
    if (r >= 0)
        r = mock_read_uint(L, mock_pick(L, g, "memoryUsed"), "memoryUsed", false, 0, 1 << 24,
                           &used);
    if (r >= 0)
        r = mock_read_uint(L, mock_pick(L, g, "multiprocessors"), "multiprocessors", false, 0, 4096,
                           &sms);
    if (r < 0)
        return r;
    if (total == 0 || (unsigned long long)reserved + used > total)
        return doc_fail(L->doc, json_object_get(mock_pick(L, g, "memory"), "memory"), L->d, -EINVAL,
                        "\"memory\": must be positive and hold memoryReserved + memoryUsed");
    gpu->mem_mib = total;
    gpu->reserved_mib = reserved;
    gpu->used_mib = used;
    gpu->sms = sms;
    return 0;
}

static int read_misc(struct loader *L, const json_t *g, struct mock_gpu *gpu)
{
    unsigned arch = 0, brand = 0;
    int64_t numa = -1;
    int r;

    r = mock_read_name(L, mock_pick(L, g, "architecture"), "architecture", NULL, architectures,
                       ARRAY_SIZE(architectures), &arch);
    if (r >= 0)
        r = mock_read_name(L, mock_pick(L, g, "brand"), "brand", "nvidia", brands,
                           ARRAY_SIZE(brands), &brand);
    if (r >= 0)
        r = mock_read_uint(L, mock_pick(L, g, "pciDeviceId"), "pciDeviceId", false, 0, 0xFFFFFFFFll,
                           &gpu->pci_device_id);
    if (r >= 0)
        r = mock_read_uint(L, mock_pick(L, g, "pciSubSystemId"), "pciSubSystemId", false, 0,
                           0xFFFFFFFFll, &gpu->pci_subsystem_id);
    if (r >= 0)
        r = mock_read_uint(L, mock_pick(L, g, "pciClass"), "pciClass", false, 0x030200, 0xFFFFFF,
                           &gpu->pci_class);
    if (r >= 0)
        r = doc_get_int(L->doc, mock_pick(L, g, "numa"), "numa", false, -1, -1, 1023, L->d, &numa);
    if (r >= 0)
        r = doc_get_bool(L->doc, mock_pick(L, g, "persistenceMode"), "persistenceMode", false, true,
                         L->d, &gpu->persistence);
    if (r >= 0)
        r = doc_get_bool(L->doc, mock_pick(L, g, "ecc"), "ecc", false, true, L->d, &gpu->ecc);
    if (r >= 0)
        r = doc_get_bool(L->doc, mock_pick(L, g, "lost"), "lost", false, false, L->d,
                         &gpu->lost_at_start);
    if (r < 0)
        return r;
    gpu->arch = arch;
    gpu->brand = (nvmlBrandType_t)brand;
    gpu->numa = (int)numa;
    return 0;
}

static const struct name_value fabric_states[] = {
    {"not-started", NVML_GPU_FABRIC_STATE_NOT_STARTED},
    {"in-progress", NVML_GPU_FABRIC_STATE_IN_PROGRESS},
    {"completed", NVML_GPU_FABRIC_STATE_COMPLETED},
};

/* "8-4-4-4-12" hex digits -> 16 bytes. */
static bool parse_uuid(const char *s, unsigned char out[static NVML_GPU_FABRIC_UUID_LEN])
{
    size_t o = 0;
    if (strlen(s) != 36)
        return false;
    for (size_t i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-')
                return false;
            continue;
        }
        int hi = hex_digit_value(s[i]), lo = hex_digit_value(s[i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[o++] = (unsigned char)(hi << 4 | lo);
        i++;
    }
    return o == NVML_GPU_FABRIC_UUID_LEN;
}

/* fabric: {clusterUuid: UUID, cliqueId: N, state: completed}: what nvmlDeviceGetGpuFabricInfoV
 * answers; without it the call is NOT_SUPPORTED. */
static int read_fabric(struct loader *L, const json_t *g, struct mock_gpu *gpu)
{
    static const char *const keys[] = {"clusterUuid", "cliqueId", "state", NULL};
    const json_t *o = mock_pick(L, g, "fabric");
    json_t *f = NULL;
    const char *uuid = NULL;
    int r;

    r = doc_get_object(L->doc, o, "fabric", false, L->d, &f);
    if (r < 0 || !f)
        return r;
    r = doc_check_keys(L->doc, f, keys, L->d);
    if (r >= 0)
        r = doc_get_string(L->doc, f, "clusterUuid", true, NULL, L->d, &uuid);
    if (r >= 0 && !parse_uuid(uuid, gpu->fabric_cluster))
        r = doc_fail(L->doc, json_object_get(f, "clusterUuid"), L->d, -EINVAL,
                     "\"clusterUuid\": expected a UUID (8-4-4-4-12 hex digits)");
    if (r >= 0)
        r = mock_read_uint(L, f, "cliqueId", true, 0, 0xFFFFFFFFll, &gpu->fabric_clique);
    if (r >= 0)
        r = mock_read_name(L, f, "state", "completed", fabric_states, ARRAY_SIZE(fabric_states),
                           &gpu->fabric_state);
    if (r >= 0)
        gpu->fabric = true;
    return r;
}

/* ---- GPUs ---- */

static int load_gpu(struct loader *L, const json_t *g, struct mock_gpu *gpu)
{
    int r;

    r = doc_check_keys(L->doc, g, gpu_keys, L->d);
    if (r >= 0)
        r = read_identity(L, g, gpu);
    if (r >= 0)
        r = read_minor(L, g, gpu);
    if (r >= 0)
        r = read_memory(L, g, gpu);
    if (r >= 0)
        r = read_cc(L, g, gpu);
    if (r >= 0)
        r = read_misc(L, g, gpu);
    if (r >= 0)
        r = read_pci_switch(L, g, gpu);
    if (r >= 0)
        r = read_fabric(L, g, gpu);
    if (r >= 0)
        r = mock_read_nvlink(L, g, gpu);
    if (r >= 0)
        r = mock_read_mig(L, g, gpu);
    if (r >= 0)
        r = mock_read_telemetry(L, g, gpu);
    if (r >= 0)
        r = mock_read_processes(L, g, gpu);
    return r;
}

/* Upper bounds of the GPU and compute instances the profile can create, to size the arrays. */
static void count_instances(const struct loader *L, const json_t *gpus, size_t *n_gi, size_t *n_ci)
{
    const json_t *g, *inst;
    size_t i, j;

    *n_gi = *n_ci = 0;
    json_array_foreach((json_t *)gpus, i, g)
    {
        const json_t *mig = json_object_get(mock_pick(L, g, "mig"), "mig");
        const json_t *list = json_object_get(mig, "instances");

        json_array_foreach((json_t *)list, j, inst)
        {
            const json_t *cis = json_object_get(inst, "computeInstances");

            (*n_gi)++;
            *n_ci += json_is_array(cis) ? json_array_size(cis) : 1;
        }
    }
}

static int alloc_arrays(struct loader *L, const json_t *gpus)
{
    struct mock_node *node = L->node;
    size_t n_gi, n_ci;

    count_instances(L, gpus, &n_gi, &n_ci);
    node->n_gpus = json_array_size(gpus);
    node->gpus = calloc(node->n_gpus + 1, sizeof(*node->gpus));
    node->gis = calloc(n_gi + 1, sizeof(*node->gis));
    node->cis = calloc(n_ci + 1, sizeof(*node->cis));
    node->handles = calloc(node->n_gpus + n_ci + 1, sizeof(*node->handles));
    if (!node->gpus || !node->gis || !node->cis || !node->handles)
        return -ENOMEM;
    for (size_t i = 0; i < node->n_gpus; i++) {
        node->gpus[i].index = (unsigned)i;
        node->gpus[i].handle = &node->handles[i];
        node->handles[i].gpu = &node->gpus[i];
    }
    return 0;
}

/* MIG device handles follow the full GPUs, in compute instance order (GPU by GPU). */
static void link_mig_devices(struct mock_node *node)
{
    node->n_gis = 0;
    node->n_handles = node->n_gpus;
    for (size_t i = 0; i < node->n_gpus; i++) {
        struct mock_gpu *gpu = &node->gpus[i];

        gpu->migs = &node->handles[node->n_handles];
        for (size_t g = 0; g < gpu->n_gis; g++)
            for (size_t c = 0; c < gpu->gis[g].n_cis; c++) {
                struct nvmlDevice_st *dev = &node->handles[node->n_handles++];

                dev->gpu = gpu;
                dev->ci = &gpu->gis[g].cis[c];
                dev->ci->dev = dev;
                gpu->n_migs++;
            }
        node->n_gis += gpu->n_gis;
    }
}

int mock_load_gpus(struct loader *L, const json_t *root)
{
    json_t *gpus, *g, *defaults;
    size_t i;
    int r;

    r = doc_get_object(L->doc, root, "defaults", false, L->d, &defaults);
    L->defaults = defaults;
    if (r >= 0 && L->defaults)
        r = doc_check_keys(L->doc, L->defaults, gpu_keys, L->d);
    if (r >= 0)
        r = doc_get_array(L->doc, root, "gpus", true, L->d, &gpus);
    if (r < 0)
        return r;
    if (json_array_size(gpus) > MOCK_MAX_GPUS)
        return doc_fail(L->doc, gpus, L->d, -EINVAL, "\"gpus\": more than %d GPUs", MOCK_MAX_GPUS);
    r = alloc_arrays(L, gpus);
    if (r < 0)
        return r;
    json_array_foreach(gpus, i, g)
    {
        r = load_gpu(L, g, &L->node->gpus[i]);
        if (r < 0)
            return r;
    }
    L->node->n_cis = L->ci_next;
    link_mig_devices(L->node);
    return mock_check_peers(L);
}
