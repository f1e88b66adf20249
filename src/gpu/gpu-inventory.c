/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading the inventory: every full GPU NVML counts, with identity, memory, PCI location, NUMA
 * node, compute capability, MIG state and devices, NVLink count, then the topology matrix. The rule
 * that shapes this file: one bad GPU never costs the node its other GPUs. A GPU whose handle lookup
 * or any later call says GPU_IS_LOST is listed as lost with what was read so far; any other failure
 * of an essential call (UUID, name, PCI, memory) is recorded as the device's error; optional facts
 * the driver does not offer are simply left at their "unknown" value.
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu-internal.h"

/* Everything NVML-side the matrix needs, gathered per GPU while reading the devices. */
struct reading {
    nvmlDevice_t *handles; /* NULL for GPUs without a usable handle (lost) */
    nvmlPciInfo_t *pci;
    struct gpu_nvlink_info *nvlinks;
};

static void reading_release(struct reading *rd)
{
    free(rd->handles);
    free(rd->pci);
    free(rd->nvlinks);
}

void gpu_bus_id_to_sysfs(const char *nvml_bus_id, char out[static GPU_BUS_ID_MAX])
{
    /* NVML's 8-digit domain is zero-padded to 4 digits more than sysfs uses. */
    size_t len = strlen(nvml_bus_id);
    const char *s = len > 12 && nvml_bus_id[8] == ':' ? nvml_bus_id + 4 : nvml_bus_id;
    size_t i = 0;
    for (; s[i] && i < GPU_BUS_ID_MAX - 1; i++)
        out[i] = (char)tolower((unsigned char)s[i]);
    out[i] = '\0';
}

int gpu_sysfs_numa_node(const char *sysfs_root, const char *sysfs_bus_id)
{
    _cleanup_free_ char *data = NULL;
    char path[4096];
    size_t len = 0;
    const char *root = sysfs_root && sysfs_root[0] ? sysfs_root : "";

    if (!sysfs_bus_id[0] || strchr(sysfs_bus_id, '/'))
        return -1;
    int n = snprintf(path, sizeof(path), "%s/sys/bus/pci/devices/%s/numa_node", root, sysfs_bus_id);
    if (n < 0 || (size_t)n >= sizeof(path))
        return -1;
    if (file_read_all(path, 64, &data, &len) < 0)
        return -1;
    char *end = NULL;
    errno = 0;
    long node = strtol(data, &end, 10);
    if (errno != 0 || end == data || (*end && *end != '\n') || node < 0 || node > 4095)
        return -1;
    return (int)node;
}

/* Notes a failed call. Returns true when the call failed: a lost GPU is marked lost, and the first
 * failure of an essential call becomes the device's error. */
static bool failed(struct gpu_device *dev, nvmlReturn_t r, bool essential)
{
    if (r == NVML_SUCCESS)
        return false;
    if (r == NVML_ERROR_GPU_IS_LOST) {
        dev->lost = true;
        dev->error = (int)r;
    } else if (essential && !dev->error) {
        dev->error = (int)r;
    }
    return true;
}

static void read_identity(struct gpu_nvml *nvml, nvmlDevice_t h, struct gpu_device *dev,
                          nvmlPciInfo_t *pci)
{
    if (failed(dev, NVML_CALL(nvml, nvmlDeviceGetUUID, h, dev->uuid, sizeof(dev->uuid)), true)) {
        dev->uuid[0] = '\0';
        if (dev->lost)
            return;
    }
    if (failed(dev, NVML_CALL(nvml, nvmlDeviceGetName, h, dev->name, sizeof(dev->name)), true)) {
        dev->name[0] = '\0';
        if (dev->lost)
            return;
    }
    if (!failed(dev, NVML_CALL(nvml, nvmlDeviceGetPciInfo_v3, h, pci), true)) {
        /* Drivers that predate the 8-digit form leave busId empty. */
        const char *bus_id = pci->busId[0] ? pci->busId : pci->busIdLegacy;
        snprintf(dev->pci_bus_id, sizeof(dev->pci_bus_id), "%.*s", GPU_BUS_ID_MAX - 1, bus_id);
        gpu_bus_id_to_sysfs(dev->pci_bus_id, dev->sysfs_bus_id);
        dev->pci_device_id = pci->pciDeviceId;
    }
    if (dev->lost)
        return;
    (void)failed(dev, NVML_CALL(nvml, nvmlDeviceGetMinorNumber, h, &dev->minor), false);
}

/* Total memory, v2 first; *ret_v1_total is nvmlDeviceGetMemoryInfo's figure (the MIG naming base),
 * or the v2 total when v1 is unavailable. */
static void read_memory(struct gpu_nvml *nvml, nvmlDevice_t h, struct gpu_device *dev,
                        uint64_t *ret_v1_total)
{
    nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
    nvmlMemory_t m1 = {0};

    nvmlReturn_t r2 = NVML_CALL(nvml, nvmlDeviceGetMemoryInfo_v2, h, &m2);
    if (r2 == NVML_ERROR_GPU_IS_LOST) {
        (void)failed(dev, r2, true);
        return;
    }
    nvmlReturn_t r1 = NVML_CALL(nvml, nvmlDeviceGetMemoryInfo, h, &m1);
    if (r2 == NVML_SUCCESS) {
        dev->memory_bytes = m2.total;
        *ret_v1_total = r1 == NVML_SUCCESS ? m1.total : m2.total;
        return;
    }
    if (!failed(dev, r1, true)) {
        dev->memory_bytes = m1.total;
        *ret_v1_total = m1.total;
    }
}

static void read_numa(struct gpu_nvml *nvml, nvmlDevice_t h, const struct gpu_read_options *opts,
                      struct gpu_device *dev)
{
    unsigned node = 0;
    nvmlReturn_t r = NVML_CALL(nvml, nvmlDeviceGetNumaNodeId, h, &node);
    if (r == NVML_SUCCESS) {
        dev->numa_node = node > 4095 ? -1 : (int)node;
        return;
    }
    if (failed(dev, r, false) && dev->lost)
        return;
    /* Older drivers lack the call; the kernel knows the answer for any PCI device. */
    dev->numa_node = gpu_sysfs_numa_node(opts->sysfs_root, dev->sysfs_bus_id);
}

static void read_capabilities(struct gpu_nvml *nvml, nvmlDevice_t h, struct gpu_device *dev)
{
    unsigned current = 0, pending = 0;
    int major = -1, minor = -1;

    if (!failed(dev, NVML_CALL(nvml, nvmlDeviceGetCudaComputeCapability, h, &major, &minor),
                false)) {
        dev->cc_major = major;
        dev->cc_minor = minor;
    }
    if (dev->lost)
        return;
    if (failed(dev, NVML_CALL(nvml, nvmlDeviceGetArchitecture, h, &dev->architecture), false))
        dev->architecture = NVML_DEVICE_ARCH_UNKNOWN;
    if (dev->lost)
        return;
    nvmlBrandType_t brand = NVML_BRAND_UNKNOWN;
    if (!failed(dev, NVML_CALL(nvml, nvmlDeviceGetBrand, h, &brand), false))
        dev->brand = (unsigned)brand;
    if (dev->lost)
        return;
    if (!failed(dev, NVML_CALL(nvml, nvmlDeviceGetMigMode, h, &current, &pending), false)) {
        dev->mig_capable = true;
        dev->mig_enabled = current == NVML_DEVICE_MIG_ENABLE;
    }
}

static void read_device(struct gpu_nvml *nvml, const struct gpu_read_options *opts, unsigned index,
                        struct gpu_device *dev, struct reading *rd)
{
    nvmlDevice_t h = NULL;
    uint64_t v1_total = 0;

    dev->index = index;
    dev->numa_node = -1;
    dev->cc_major = dev->cc_minor = -1;
    dev->architecture = NVML_DEVICE_ARCH_UNKNOWN;
    if (failed(dev, NVML_CALL(nvml, nvmlDeviceGetHandleByIndex_v2, index, &h), true))
        return; /* no handle, nothing more to ask */
    read_identity(nvml, h, dev, &rd->pci[index]);
    if (!dev->lost)
        read_memory(nvml, h, dev, &v1_total);
    if (!dev->lost)
        read_numa(nvml, h, opts, dev);
    if (!dev->lost)
        read_capabilities(nvml, h, dev);
    if (!dev->lost && dev->mig_enabled) {
        nvmlReturn_t r = gpu_mig_read(nvml, h, v1_total, dev);
        (void)failed(dev, r, r == NVML_ERROR_MEMORY);
    }
    if (!dev->lost) {
        gpu_pci_class_read(nvml, h, opts->sysfs_root, dev);
        gpu_fabric_read(nvml, h, dev);
        gpu_sysfs_vgpu(opts->sysfs_root, dev);
    }
    if (!dev->lost && !opts->skip_topology) {
        gpu_nvlink_read(nvml, h, &rd->nvlinks[index]);
        dev->nvlinks_active = rd->nvlinks[index].active;
        dev->nvswitch = rd->nvlinks[index].to_switch > 0;
    }
    if (dev->lost)
        log_debug(2, "GPU is lost", "index", LOG_INT(index), "uuid", dev->uuid);
    else
        rd->handles[index] = h;
}

static void read_versions(struct gpu_nvml *nvml, struct gpu_inventory *inv)
{
    int cuda = 0;
    if (NVML_CALL(nvml, nvmlSystemGetDriverVersion, inv->driver_version,
                  sizeof(inv->driver_version)) != NVML_SUCCESS)
        inv->driver_version[0] = '\0';
    if (NVML_CALL(nvml, nvmlSystemGetNVMLVersion, inv->nvml_version, sizeof(inv->nvml_version)) !=
        NVML_SUCCESS)
        inv->nvml_version[0] = '\0';
    if (NVML_CALL(nvml, nvmlSystemGetCudaDriverVersion_v2, &cuda) == NVML_SUCCESS && cuda > 0)
        inv->cuda_driver_version = cuda;
}

/* With skip_topology the matrix still exists (callers index it freely) but says nothing. */
static void fill_unknown_links(struct gpu_inventory *inv)
{
    size_t n = inv->n_devices;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            inv->links[i * n + j] = i == j
                                        ? (struct gpu_link){GPU_LINK_SELF, GPU_LINK_SELF, 0}
                                        : (struct gpu_link){GPU_LINK_UNKNOWN, GPU_LINK_UNKNOWN, 0};
}

static int allocate(struct gpu_inventory *inv, struct reading *rd, unsigned count)
{
    size_t n = count ? count : 1; /* calloc(0) may return NULL */
    inv->devices = calloc(n, sizeof(*inv->devices));
    inv->links = calloc(n * n, sizeof(*inv->links));
    rd->handles = calloc(n, sizeof(*rd->handles));
    rd->pci = calloc(n, sizeof(*rd->pci));
    rd->nvlinks = calloc(n, sizeof(*rd->nvlinks));
    if (!inv->devices || !inv->links || !rd->handles || !rd->pci || !rd->nvlinks)
        return -ENOMEM;
    inv->n_devices = count;
    return 0;
}

int gpu_inventory_read(struct gpu_nvml *nvml, const struct gpu_read_options *opts, struct diag *d,
                       struct gpu_inventory **ret)
{
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = NULL;
    _cleanup_(reading_release) struct reading rd = {0};
    static const struct gpu_read_options defaults = {0};
    unsigned count = 0;

    assert(nvml);
    if (!opts)
        opts = &defaults;
    inv = calloc(1, sizeof(*inv));
    if (!inv)
        return diag_fail(d, -ENOMEM, "out of memory");
    read_versions(nvml, inv);
    nvmlReturn_t r = NVML_CALL(nvml, nvmlDeviceGetCount_v2, &count);
    if (r != NVML_SUCCESS)
        return diag_fail(d, -EIO, "cannot count the GPUs: %s (NVML error %d)",
                         gpu_nvml_strerror(nvml, (int)r), (int)r);
    if (count > GPU_MAX_DEVICES)
        return diag_fail(d, -E2BIG, "NVML reports %u GPUs, more than the %u gpuplane handles",
                         count, GPU_MAX_DEVICES);
    if (allocate(inv, &rd, count) < 0)
        return diag_fail(d, -ENOMEM, "out of memory");
    for (unsigned i = 0; i < count; i++)
        read_device(nvml, opts, i, &inv->devices[i], &rd);
    for (unsigned i = 0; i < count; i++)
        if (inv->devices[i].error == NVML_ERROR_MEMORY)
            return diag_fail(d, -ENOMEM, "out of memory");
    if (opts->skip_topology)
        fill_unknown_links(inv);
    else
        gpu_topology_fill(nvml, inv, rd.handles, rd.nvlinks, rd.pci);
    *ret = TAKE_PTR(inv);
    return 0;
}

struct gpu_inventory *gpu_inventory_free(struct gpu_inventory *inv)
{
    if (!inv)
        return NULL;
    for (size_t i = 0; inv->devices && i < inv->n_devices; i++)
        free(inv->devices[i].migs);
    free(inv->devices);
    free(inv->links);
    free(inv);
    return NULL;
}

const struct gpu_link *gpu_inventory_link(const struct gpu_inventory *inv, size_t i, size_t j)
{
    if (!inv || i >= inv->n_devices || j >= inv->n_devices)
        return NULL;
    return &inv->links[i * inv->n_devices + j];
}

const struct gpu_device *gpu_inventory_find(const struct gpu_inventory *inv, const char *uuid)
{
    if (!inv || !uuid || !uuid[0])
        return NULL;
    for (size_t i = 0; i < inv->n_devices; i++)
        if (strcmp(inv->devices[i].uuid, uuid) == 0)
            return &inv->devices[i];
    return NULL;
}

const char *gpu_architecture_name(unsigned architecture)
{
    switch (architecture) {
    case NVML_DEVICE_ARCH_KEPLER:
        return "Kepler";
    case NVML_DEVICE_ARCH_MAXWELL:
        return "Maxwell";
    case NVML_DEVICE_ARCH_PASCAL:
        return "Pascal";
    case NVML_DEVICE_ARCH_VOLTA:
        return "Volta";
    case NVML_DEVICE_ARCH_TURING:
        return "Turing";
    case NVML_DEVICE_ARCH_AMPERE:
        return "Ampere";
    case NVML_DEVICE_ARCH_ADA:
        return "Ada Lovelace";
    case NVML_DEVICE_ARCH_HOPPER:
        return "Hopper";
    case NVML_DEVICE_ARCH_BLACKWELL:
        return "Blackwell";
    default:
        return "Unknown";
    }
}
