/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The series of one snapshot: each device read in a collection, joined with the pods using it
 * (dcgm-exporter's Kubernetes transformation, internal/pkg/transformation/kubernetes.go, Process):
 * the kubelet's pod-resources entries name devices by UUID, nvidia<N> or GKE's and NVIDIA's
 * sharing forms; DRA claim results name a driver, pool and device that NVIDIA's ResourceSlices
 * resolve to a GPU or MIG device; the API server's pod objects add pod_uid and the pods' labels.
 *
 * With --kubernetes-virtual-gpus, DCGM_FI_DEV_GPU_UTIL and DCGM_FI_DEV_FB_USED of a device used by
 * pods are also split per pod from the device's processes (process_metrics.go): the device's own
 * series, and one per pod with the sum over its processes.
 *
 * Pure: it reads the inventory, the mapping and the caches it is given and allocates the series;
 * nothing here calls NVML, logs or touches the network. exporter-series.c.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "exporter-internal.h"
#include "exporter-options.h"
#include "exporter-podmeta.h"
#include "exporter-pods.h"
#include "exporter-procs.h"
#include "exporter-slices.h"
#include "gpu.h"

/* The most extra labels of one series: pod, namespace, container, pod_uid, vgpu, five dra_* and
 * the two of DRA MIG devices. */
#define EXPORTER_SERIES_LABELS_MAX 12

/* A device read in a collection: a full GPU (mig -1) or a GPU instance, through its first MIG
 * device (compute instances of one GPU instance share a series). */
struct exporter_dev {
    size_t gpu;           /* inventory index */
    int mig;              /* index into the GPU's migs, or -1 */
    bool ok;              /* the read answered: only then is the device a series */
    uint64_t unsupported; /* the metrics the read found unsupported (for the daemon's log) */
    struct gpu_sample sample;
};

/* One GPU's counts over the windows for one snapshot. */
struct exporter_counts {
    struct exporter_window_count *xid, *clock;
    size_t n_xid, n_clock;
};

/* What the devices are joined with; everything borrowed, any pointer but inv may be NULL. */
struct exporter_join {
    const struct gpu_inventory *inv;
    const uint64_t *last_xid;               /* per GPU: the last XID (0: none yet) */
    const struct exporter_counts *counts;   /* per GPU; NULL: no windows */
    const struct exporter_pods *pods;       /* the kubelet's last answer */
    const struct exporter_podmeta *podmeta; /* the pods' UIDs and labels */
    const struct exporter_slices *slices;   /* NVIDIA's DRA devices */
    const struct exporter_procs *procs;     /* per device of devs: its processes, or NULL */
    enum exporter_gpu_id_type id_type;      /* --kubernetes-gpu-id-type */
    bool virtual_gpus;                      /* --kubernetes-virtual-gpus */
    bool pod_uid;                           /* --kubernetes-enable-pod-uid */
    bool pod_labels;                        /* --kubernetes-enable-pod-labels */
};

/* The series of a snapshot and the storage their labels point into; owned. */
struct exporter_series_set {
    struct exporter_series *v;
    size_t n, cap;
    struct exporter_label *labels; /* EXPORTER_SERIES_LABELS_MAX per series */
    char (*numbers)[24];           /* per series: its vgpu number */
};

/* Whether device dv is used by a pod (claim or device plugin): with virtual GPUs, whether its
 * processes are worth reading. */
bool exporter_series_has_pods(const struct exporter_join *j, const struct exporter_dev *dv);

/*
 * The series of the devices (those ok, in their order), each joined with its pods:
 *   - claim results of gpu.nvidia.com whose pool/device the slices resolve to the device (a GPU by
 *     its UUID, a MIG device to its GPU instance's series, or to its GPU's when the GPU is exported
 *     whole): one series per pod and container, with the dra_* labels;
 *   - otherwise the device plugins' entries: the first pod using the device, or with virtual GPUs
 *     one series per pod (vgpu the replica given to it);
 *   - a device without pods is one series without pod labels.
 * pod_uid comes with j->pod_uid, the pods' labels with j->pod_labels, for pods the cache knows.
 * With virtual GPUs, pod metadata (the pods' UIDs) and the device's processes read, each of
 * DCGM_FI_DEV_GPU_UTIL and DCGM_FI_DEV_FB_USED the device has and whose process list was read is
 * printed by the device's series without pod labels, then per pod by a series with the sum over
 * the pod's processes (0 without any) and pod_uid; a pod whose UID is not known has none. The
 * pods' other series leave those fields out.
 * The series borrow strings from j's inventory, mapping and caches: render before they change.
 * -ENOMEM; *ret is written only on success.
 */
_wur_ int exporter_series_join(const struct exporter_join *j, const struct exporter_dev *devs,
                               size_t n, struct exporter_series_set *ret);
void exporter_series_set_release(struct exporter_series_set *s);
