/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the gpu files share and nothing outside src/gpu sees: the table of NVML function pointers
 * that gpu-nvml.c fills with dlsym, the NVML_CALL macro that turns an absent optional symbol into
 * NVML_ERROR_FUNCTION_NOT_FOUND, and the per-file entry points the inventory is assembled from.
 * Tests include it to reach the pieces that are hard to drive through the mock (the sysfs readers).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu-nvml-abi.h"
#include "gpu.h"

#define NVML_FN_POINTER(ret, name, params) ret(*name) params;
struct gpu_nvml_fns {
    NVML_FUNCTIONS(NVML_FN_POINTER)
};
#undef NVML_FN_POINTER

struct gpu_nvml {
    void *dl;
    bool initialised; /* nvmlInit succeeded, so close owes an nvmlShutdown */
    struct gpu_nvml_fns fn;
};

/* Calls an NVML function through the table; an absent symbol answers FUNCTION_NOT_FOUND, as the
 * driver would if it were too old to have it. */
#define NVML_CALL(nvml, name, ...)                                                                 \
    ((nvml)->fn.name ? (nvml)->fn.name(__VA_ARGS__) : NVML_ERROR_FUNCTION_NOT_FOUND)

/* Upper bound on what the inventory accepts from NVML: bounds every allocation that a broken (or
 * hostile) library could otherwise inflate. */
#define GPU_MAX_DEVICES 1024u
#define GPU_MAX_MIG_DEVICES 64u

/* Maps an NVML topology level to the `nvidia-smi topo -m` level; errors give GPU_LINK_UNKNOWN. */
enum gpu_link_level gpu_topology_level(nvmlReturn_t r, nvmlGpuTopologyLevel_t level);

/* Reads a PCI device's NUMA node from <sysfs_root>/sys/bus/pci/devices/<bdf>/numa_node (sysfs_root
 * NULL or "" means "/"). -1 is sysfs' own "no NUMA"; a missing file or bad contents also give -1.
 */
int gpu_sysfs_numa_node(const char *sysfs_root, const char *sysfs_bus_id);

/* The PCI class code (0xCCSSPP) from <sysfs_root>/sys/bus/pci/devices/<bdf>/class; 0 when the
 * file is missing or unreadable. */
uint32_t gpu_sysfs_pci_class(const char *sysfs_root, const char *sysfs_bus_id);
/* Whether a PCI config space (n bytes, at least 256 to be read at all) carries NVIDIA's vGPU
 * vendor capability; the host driver's version and branch when its record is there ("" else). */
bool gpu_vgpu_parse_config(const unsigned char *cfg, size_t n,
                           char ret_version[static GPU_VGPU_VERSION_MAX],
                           char ret_branch[static GPU_VGPU_VERSION_MAX]);
/* dev->vgpu_* from <sysfs_root>/sys/bus/pci/devices/<bdf>/config (not a guest when unreadable). */
void gpu_sysfs_vgpu(const char *sysfs_root, struct gpu_device *dev);
/* dev->pci_class: nvmlDeviceGetPciInfoExt, else sysfs. */
void gpu_pci_class_read(struct gpu_nvml *nvml, nvmlDevice_t h, const char *sysfs_root,
                        struct gpu_device *dev);
/* dev->fabric_*: nvmlDeviceGetGpuFabricInfoV, attached when registration completed. */
void gpu_fabric_read(struct gpu_nvml *nvml, nvmlDevice_t h, struct gpu_device *dev);

/* "00000000:3B:00.0" -> "0000:3b:00.0" (lower case, the 8-digit domain cut to 4 digits). */
void gpu_bus_id_to_sysfs(const char *nvml_bus_id, char out[static GPU_BUS_ID_MAX]);

/* Per-GPU NVLink facts gathered while reading topology, before the matrix is built. */
struct gpu_nvlink_remote {
    unsigned domain, bus, device;
};
struct gpu_nvlink_info {
    unsigned active;    /* active links */
    unsigned to_switch; /* active links that end at an NVSwitch */
    unsigned n_remote;  /* active links that end at a PCI device (GPU) */
    struct gpu_nvlink_remote remote[NVML_NVLINK_MAX_LINKS];
};

/* Walks the links of one GPU until NVML says there are no more. */
void gpu_nvlink_read(struct gpu_nvml *nvml, nvmlDevice_t handle, struct gpu_nvlink_info *ret);

/* Fills inv->links (allocated n x n by the caller) from the handles (NULL for unreadable GPUs), the
 * NVLink facts of each GPU and each GPU's PCI location. */
void gpu_topology_fill(struct gpu_nvml *nvml, struct gpu_inventory *inv,
                       const nvmlDevice_t *handles, const struct gpu_nvlink_info *nvlinks,
                       const nvmlPciInfo_t *pci);

/* Reads the MIG devices of a MIG-enabled GPU into dev->migs. parent_total_bytes is what
 * nvmlDeviceGetMemoryInfo says, the base of the profile name's memory figure. Returns 0, or the
 * NVML error that ended the walk (GPU_IS_LOST); individual unreadable MIG devices are skipped. */
nvmlReturn_t gpu_mig_read(struct gpu_nvml *nvml, nvmlDevice_t parent, uint64_t parent_total_bytes,
                          struct gpu_device *dev);

/* The NVML handle of GPU gpu (inventory index) or its MIG device mig (-1: the GPU), as telemetry
 * caches it (looked up at the first use), and the library to call it with. -EINVAL for a device the
 * inventory does not have, -ENODEV lost, -ENOENT gone (a MIG device reconfigured away), -EIO. */
_wur_ int gpu_telemetry_handle(struct gpu_telemetry *t, size_t gpu, int mig, nvmlDevice_t *ret,
                               struct gpu_nvml **ret_nvml);
/* Drops the cached handle after the device answered GPU_IS_LOST: the next use looks it up afresh.
 */
void gpu_telemetry_forget(struct gpu_telemetry *t, size_t gpu, int mig);
