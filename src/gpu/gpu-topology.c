/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The GPU-to-GPU matrix of `nvidia-smi topo -m`: for every pair, the PCIe path level NVML reports
 * and the number of NVLink links between them. Direct links are counted by matching each active
 * link's remote PCI address against the other GPU's; GPUs that both hang off NVSwitches reach each
 * other through the switch fabric with as many links as the poorer of the two has to it — which is
 * how a DGX H100 shows NV18 between every pair although no GPU links to another directly.
 */
#include <stdio.h>
#include <string.h>

#include "gpu-internal.h"

enum gpu_link_level gpu_topology_level(nvmlReturn_t r, nvmlGpuTopologyLevel_t level)
{
    if (r != NVML_SUCCESS)
        return GPU_LINK_UNKNOWN;
    switch (level) {
    case NVML_TOPOLOGY_INTERNAL:
    case NVML_TOPOLOGY_SINGLE:
        return GPU_LINK_PIX;
    case NVML_TOPOLOGY_MULTIPLE:
        return GPU_LINK_PXB;
    case NVML_TOPOLOGY_HOSTBRIDGE:
        return GPU_LINK_PHB;
    case NVML_TOPOLOGY_NODE:
        return GPU_LINK_NODE;
    case NVML_TOPOLOGY_SYSTEM:
        return GPU_LINK_SYS;
    default:
        return GPU_LINK_UNKNOWN;
    }
}

const char *gpu_link_name(const struct gpu_link *link, char buf[static 16])
{
    if (!link)
        return "N/A";
    switch (link->level) {
    case GPU_LINK_SELF:
        return "X";
    case GPU_LINK_NVLINK:
        snprintf(buf, 16, "NV%u", link->nvlinks);
        return buf;
    case GPU_LINK_PIX:
        return "PIX";
    case GPU_LINK_PXB:
        return "PXB";
    case GPU_LINK_PHB:
        return "PHB";
    case GPU_LINK_NODE:
        return "NODE";
    case GPU_LINK_SYS:
        return "SYS";
    case GPU_LINK_UNKNOWN:
    default:
        return "N/A";
    }
}

/* One link: is it active, where does it end. false when there is no such link (the end of the
 * list); NVML says so with INVALID_ARGUMENT or NOT_SUPPORTED, and anything else also ends the walk
 * since the links after it cannot be trusted either. */
static bool read_link(struct gpu_nvml *nvml, nvmlDevice_t handle, unsigned link,
                      struct gpu_nvlink_info *info)
{
    nvmlEnableState_t active = NVML_FEATURE_DISABLED;
    nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
    nvmlPciInfo_t pci;

    if (NVML_CALL(nvml, nvmlDeviceGetNvLinkState, handle, link, &active) != NVML_SUCCESS)
        return false;
    if (active != NVML_FEATURE_ENABLED)
        return true;
    info->active++;
    if (NVML_CALL(nvml, nvmlDeviceGetNvLinkRemoteDeviceType, handle, link, &type) == NVML_SUCCESS &&
        type == NVML_NVLINK_DEVICE_TYPE_SWITCH) {
        info->to_switch++;
        return true;
    }
    memset(&pci, 0, sizeof(pci));
    if (NVML_CALL(nvml, nvmlDeviceGetNvLinkRemotePciInfo_v2, handle, link, &pci) == NVML_SUCCESS)
        info->remote[info->n_remote++] =
            (struct gpu_nvlink_remote){.domain = pci.domain, .bus = pci.bus, .device = pci.device};
    return true;
}

void gpu_nvlink_read(struct gpu_nvml *nvml, nvmlDevice_t handle, struct gpu_nvlink_info *ret)
{
    memset(ret, 0, sizeof(*ret));
    if (!handle)
        return;
    for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; link++)
        if (!read_link(nvml, handle, link, ret))
            break;
}

/* Links from a to the GPU at pci, counted on a's side. Domain, bus and device are compared rather
 * than the bus id text, so the older unversioned remote-PCI call (whose struct has no 8-digit
 * busId) works too. */
static unsigned direct_links(const struct gpu_nvlink_info *a, const nvmlPciInfo_t *pci)
{
    unsigned n = 0;
    for (unsigned k = 0; k < a->n_remote; k++)
        if (a->remote[k].domain == pci->domain && a->remote[k].bus == pci->bus &&
            a->remote[k].device == pci->device)
            n++;
    return n;
}

static unsigned pair_links(const struct gpu_nvlink_info *a, const struct gpu_nvlink_info *b,
                           const nvmlPciInfo_t *b_pci)
{
    unsigned n = direct_links(a, b_pci);
    if (n == 0 && a->to_switch > 0 && b->to_switch > 0)
        n = a->to_switch < b->to_switch ? a->to_switch : b->to_switch;
    return n;
}

static struct gpu_link pair_link(struct gpu_nvml *nvml, const nvmlDevice_t *handles,
                                 const struct gpu_nvlink_info *nvlinks, const nvmlPciInfo_t *pci,
                                 size_t i, size_t j)
{
    struct gpu_link link = {.level = GPU_LINK_UNKNOWN, .pcie = GPU_LINK_UNKNOWN, .nvlinks = 0};
    nvmlGpuTopologyLevel_t level = NVML_TOPOLOGY_SYSTEM;

    if (i == j)
        return (struct gpu_link){.level = GPU_LINK_SELF, .pcie = GPU_LINK_SELF, .nvlinks = 0};
    if (!handles[i] || !handles[j])
        return link;
    nvmlReturn_t r =
        NVML_CALL(nvml, nvmlDeviceGetTopologyCommonAncestor, handles[i], handles[j], &level);
    link.pcie = gpu_topology_level(r, level);
    link.nvlinks = pair_links(&nvlinks[i], &nvlinks[j], &pci[j]);
    link.level = link.nvlinks > 0 ? GPU_LINK_NVLINK : link.pcie;
    return link;
}

void gpu_topology_fill(struct gpu_nvml *nvml, struct gpu_inventory *inv,
                       const nvmlDevice_t *handles, const struct gpu_nvlink_info *nvlinks,
                       const nvmlPciInfo_t *pci)
{
    size_t n = inv->n_devices;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            inv->links[i * n + j] = pair_link(nvml, handles, nvlinks, pci, i, j);
}
