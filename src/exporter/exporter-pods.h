/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which pod uses which GPU, from the kubelet's pod-resources API (List): the pure mapping of
 * dcgm-exporter's Kubernetes mode (shared/reference/nvidia-compat.md §3.4). Device ids are taken
 * apart (MIG UUIDs, `<id>::<n>` replicas, GKE's `nvidia<N>/gi<M>/vgpu<K>` and `<id>/vgpu<K>`) and
 * kept under the GPU (or MIG device) they name; with DRA, claim results are kept under their
 * driver, pool and device. exporter-pods.c; the calls to the kubelet are the daemon's.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "base.h"
#include "podresources/v1/api.pb-c.h"

/* One container's use of one device. */
struct exporter_pod_ref {
    char *device; /* the device as named: a GPU UUID, a MIG UUID, or "nvidia<N>" */
    int gi;       /* GKE's GPU instance (nvidia<N>/gi<M>), or -1 */
    int vgpu;     /* the replica of a shared GPU (`::<n>`, `/vgpu<K>`), or -1 */
    char *pod;
    char *namespace_;
    char *container;
    /* DRA claims only (device NULL then): */
    char *claim_name, *claim_namespace, *driver, *pool, *dra_device;
};

struct exporter_pods {
    struct exporter_pod_ref *v;
    size_t n;
};

struct exporter_pods_options {
    const char *const *extra_resources; /* --nvidia-resource-names, NULL-terminated (may be NULL) */
    bool dra;                           /* --kubernetes-enable-dra: keep claim results */
};

/* Builds the mapping from a List response. -ENOMEM only: entries that name no GPU resource are
 * left out. */
_wur_ int exporter_pods_from_list(const V1__ListPodResourcesResponse *resp,
                                  const struct exporter_pods_options *o, struct exporter_pods *ret);
void exporter_pods_release(struct exporter_pods *p);

/* Whether resource_name is one dcgm-exporter maps: nvidia.com/gpu, nvidia.com/mig-*, or extra. */
bool exporter_pods_resource_wanted(const char *resource_name, const char *const *extra);

/* Takes a device id apart: the device it names, and the GKE GPU instance and replica, or -1. */
_wur_ int exporter_pods_parse_id(const char *id, char **ret_device, int *ret_gi, int *ret_vgpu);
