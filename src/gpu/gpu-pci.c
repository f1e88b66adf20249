/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the inventory learns about a GPU from outside NVML's core calls: its PCI class
 * (nvmlDeviceGetPciInfoExt, else sysfs), its NVLink fabric membership
 * (nvmlDeviceGetGpuFabricInfoV) and whether it is a vGPU guest (the vendor capability of its PCI
 * config space, as NVIDIA's GFD reads it in internal/vgpu). Every fact here is optional: a driver
 * without the call, or a sysfs file that cannot be read, leaves the "unknown" value and never
 * fails the GPU.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu-internal.h"

/* sysfs gives unprivileged readers the first 64 bytes of a config space; root gets 256, or 4096
 * with the PCIe extended space. */
#define PCI_CONFIG_MAX 4096
#define PCI_STATUS 0x06
#define PCI_STATUS_CAP_LIST 0x10
#define PCI_CAP_POINTER 0x34
#define PCI_CAP_VENDOR 0x09
/* NVIDIA's vGPU capability: id, next, length, "VF", then records from byte 5; the host driver
 * record holds the version and the branch in 10 bytes each. */
#define VGPU_RECORDS 5
#define VGPU_FIELD 10

static int sysfs_path(const char *sysfs_root, const char *bus_id, const char *file, char *buf,
                      size_t n)
{
    const char *root = sysfs_root && sysfs_root[0] ? sysfs_root : "";
    if (!bus_id[0] || strchr(bus_id, '/'))
        return -EINVAL;
    int r = snprintf(buf, n, "%s/sys/bus/pci/devices/%s/%s", root, bus_id, file);
    return r < 0 || (size_t)r >= n ? -ENAMETOOLONG : 0;
}

uint32_t gpu_sysfs_pci_class(const char *sysfs_root, const char *sysfs_bus_id)
{
    _cleanup_free_ char *data = NULL;
    char path[4096], *end = NULL;
    size_t len = 0;

    if (sysfs_path(sysfs_root, sysfs_bus_id, "class", path, sizeof(path)) < 0 ||
        file_read_all(path, 64, &data, &len) < 0)
        return 0;
    errno = 0;
    unsigned long v = strtoul(data, &end, 16);
    if (errno != 0 || end == data || (*end && *end != '\n') || v > 0xFFFFFF)
        return 0;
    return (uint32_t)v;
}

/* A field of the host driver record: the bytes up to the first NUL, printable ASCII only (the
 * value becomes a label). */
static void record_field(const unsigned char *p, char out[static GPU_VGPU_VERSION_MAX])
{
    size_t o = 0, i = 0;
    while (i < VGPU_FIELD && p[i] == 0)
        i++;
    for (; i < VGPU_FIELD && p[i] != 0 && o + 1 < GPU_VGPU_VERSION_MAX; i++)
        if (p[i] > 0x20 && p[i] < 0x7f)
            out[o++] = (char)p[i];
    out[o] = '\0';
}

bool gpu_vgpu_parse_config(const unsigned char *cfg, size_t n,
                           char ret_version[static GPU_VGPU_VERSION_MAX],
                           char ret_branch[static GPU_VGPU_VERSION_MAX])
{
    bool visited[256] = {false};

    ret_version[0] = ret_branch[0] = '\0';
    /* Without the whole standard header the capability list is not there to walk. */
    if (n < 256 || !(cfg[PCI_STATUS] & PCI_STATUS_CAP_LIST))
        return false;
    unsigned pos = cfg[PCI_CAP_POINTER];
    while (pos != 0 && pos + 2 < 256 && !visited[pos]) {
        unsigned id = cfg[pos], next = cfg[pos + 1], len = cfg[pos + 2];
        if (id == 0xff)
            return false;
        visited[pos] = true;
        if (id != PCI_CAP_VENDOR) {
            pos = next;
            continue;
        }
        if (pos + len > 256 || len < VGPU_RECORDS || cfg[pos + 3] != 'V' || cfg[pos + 4] != 'F')
            return false;
        const unsigned char *cap = cfg + pos;
        /* Records: type, length, data; type 0 is the host driver's version and branch. */
        unsigned r = VGPU_RECORDS;
        while (r + 1 < len && cap[r] != 0) {
            if (cap[r + 1] == 0)
                return true; /* a vGPU, with records that cannot be walked */
            r += cap[r + 1];
        }
        if (r < len && cap[r] == 0 && r + 2 + 2 * VGPU_FIELD <= len) {
            record_field(cap + r + 2, ret_version);
            record_field(cap + r + 2 + VGPU_FIELD, ret_branch);
        }
        return true;
    }
    return false;
}

void gpu_sysfs_vgpu(const char *sysfs_root, struct gpu_device *dev)
{
    _cleanup_free_ char *data = NULL;
    char path[4096];
    size_t len = 0;

    if (sysfs_path(sysfs_root, dev->sysfs_bus_id, "config", path, sizeof(path)) < 0 ||
        file_read_all(path, PCI_CONFIG_MAX, &data, &len) < 0)
        return;
    dev->vgpu_guest =
        gpu_vgpu_parse_config((const unsigned char *)data, len, dev->vgpu_host_driver_version,
                              dev->vgpu_host_driver_branch);
}

void gpu_pci_class_read(struct gpu_nvml *nvml, nvmlDevice_t h, const char *sysfs_root,
                        struct gpu_device *dev)
{
    nvmlPciInfoExt_t ext = {.version = nvmlPciInfoExt_v1};
    nvmlReturn_t r = NVML_CALL(nvml, nvmlDeviceGetPciInfoExt, h, &ext);
    if (r == NVML_SUCCESS && (ext.baseClass || ext.subClass)) {
        dev->pci_class = (ext.baseClass & 0xFFu) << 16 | (ext.subClass & 0xFFu) << 8;
        return;
    }
    if (r == NVML_ERROR_GPU_IS_LOST)
        return;
    /* Older drivers lack the call; the kernel has the class of every PCI device. */
    dev->pci_class = gpu_sysfs_pci_class(sysfs_root, dev->sysfs_bus_id);
}

void gpu_fabric_read(struct gpu_nvml *nvml, nvmlDevice_t h, struct gpu_device *dev)
{
    nvmlGpuFabricInfoV_t info = {.version = nvmlGpuFabricInfo_v2};
    static const unsigned char zero[NVML_GPU_FABRIC_UUID_LEN] = {0};
    const unsigned char *u = info.clusterUuid;

    if (NVML_CALL(nvml, nvmlDeviceGetGpuFabricInfoV, h, &info) != NVML_SUCCESS)
        return;
    /* NVIDIA's rule for "fabric attached": registration completed, and completed well. */
    if (info.state != NVML_GPU_FABRIC_STATE_COMPLETED || info.status != NVML_SUCCESS ||
        memcmp(u, zero, sizeof(zero)) == 0)
        return;
    snprintf(dev->fabric_cluster_uuid, sizeof(dev->fabric_cluster_uuid),
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
             u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
             u[15]);
    dev->fabric_clique_id = info.cliqueId;
    dev->fabric_attached = true;
}
