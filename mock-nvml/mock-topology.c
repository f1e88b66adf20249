/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How GPUs are connected: the PCIe common ancestor of two GPUs (from the profile's PCIe switches
 * and NUMA nodes, or its explicit override table), the NUMA node of a GPU, and NVLink: per-link
 * state, what is at the far end of each link (an NVSwitch or a peer GPU) and its PCI address.
 */
#include <string.h>

#include "mock-internal.h"

nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int *node)
{
    MOCK_LOCKED;
    struct mock_gpu *gpu;
    nvmlReturn_t r;

    r = mock_full_gpu(device, node != NULL, NVML_ERROR_NOT_SUPPORTED, &gpu);
    if (r != NVML_SUCCESS)
        return r;
    if (gpu->numa < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *node = (unsigned)gpu->numa;
    return NVML_SUCCESS;
}

static nvmlGpuTopologyLevel_t common_ancestor(const struct mock_gpu *a, const struct mock_gpu *b)
{
    const struct mock_node *node = mock.node;

    for (size_t i = 0; i < node->n_overrides; i++) {
        const struct mock_topology_override *o = &node->overrides[i];

        if ((o->a == a->index && o->b == b->index) || (o->a == b->index && o->b == a->index))
            return o->level;
    }
    if (a == b)
        return NVML_TOPOLOGY_INTERNAL;
    if (a->pci_switch[0] && strcmp(a->pci_switch, b->pci_switch) == 0)
        return NVML_TOPOLOGY_SINGLE;
    if (a->numa >= 0 && a->numa == b->numa)
        return NVML_TOPOLOGY_NODE;
    return NVML_TOPOLOGY_SYSTEM;
}

nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                 nvmlGpuTopologyLevel_t *pathInfo)
{
    MOCK_LOCKED;
    struct mock_gpu *a, *b;
    nvmlReturn_t r;

    r = mock_full_gpu(device1, pathInfo != NULL, NVML_ERROR_NOT_SUPPORTED, &a);
    if (r != NVML_SUCCESS)
        return r;
    r = mock_full_gpu(device2, true, NVML_ERROR_NOT_SUPPORTED, &b);
    if (r != NVML_SUCCESS)
        return r;
    *pathInfo = common_ancestor(a, b);
    return NVML_SUCCESS;
}

/* A full GPU's existing NVLink link: INVALID_ARGUMENT past NVML_NVLINK_MAX_LINKS, NOT_SUPPORTED
 * on a GPU without NVLink, for a link it does not have, and on MIG handles. */
static nvmlReturn_t nvlink(nvmlDevice_t h, unsigned link, bool ptr_ok, struct mock_gpu **ret)
{
    struct mock_gpu *gpu;
    nvmlReturn_t r;

    r = mock_full_gpu(h, ptr_ok, NVML_ERROR_NOT_SUPPORTED, &gpu);
    if (r != NVML_SUCCESS)
        return r;
    if (link >= NVML_NVLINK_MAX_LINKS)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (link >= gpu->nvlink.n_links)
        return NVML_ERROR_NOT_SUPPORTED;
    *ret = gpu;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                      nvmlEnableState_t *isActive)
{
    MOCK_LOCKED;
    struct mock_gpu *gpu;
    nvmlReturn_t r;

    r = nvlink(device, link, isActive != NULL, &gpu);
    if (r != NVML_SUCCESS)
        return r;
    *isActive = gpu->nvlink.down & (1ULL << link) ? NVML_FEATURE_DISABLED : NVML_FEATURE_ENABLED;
    return NVML_SUCCESS;
}

/* The switch a link ends at: links are spread over the switches in contiguous blocks. */
static const struct mock_pci *switch_of(const struct mock_gpu *gpu, unsigned link)
{
    const struct mock_node *node = mock.node;

    return &node->switches[(size_t)link * node->n_switches / gpu->nvlink.n_links];
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                 nvmlPciInfo_t *pci)
{
    MOCK_LOCKED;
    const struct mock_gpu *peer;
    struct mock_gpu *gpu;
    nvmlReturn_t r;

    r = nvlink(device, link, pci != NULL, &gpu);
    if (r != NVML_SUCCESS)
        return r;
    if (gpu->nvlink.to_switch) {
        mock_format_pci(switch_of(gpu, link), mock.node->switch_device_id, 0, pci);
        return NVML_SUCCESS;
    }
    peer = &mock.node->gpus[gpu->nvlink.peer[link]];
    /* NVML does not fill the remote end's subsystem id. */
    mock_format_pci(&peer->pci, peer->pci_device_id, 0, pci);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                 nvmlIntNvLinkDeviceType_t *type)
{
    MOCK_LOCKED;
    struct mock_gpu *gpu;
    nvmlReturn_t r;

    r = nvlink(device, link, type != NULL, &gpu);
    if (r != NVML_SUCCESS)
        return r;
    *type = gpu->nvlink.to_switch ? NVML_NVLINK_DEVICE_TYPE_SWITCH : NVML_NVLINK_DEVICE_TYPE_GPU;
    return NVML_SUCCESS;
}
