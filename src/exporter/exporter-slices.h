/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The DRA devices of NVIDIA's GPU driver (gpu.nvidia.com), for `gpuplane exporter
 * --kubernetes-enable-dra`: the kubelet's pod-resources API names a claimed device only by driver,
 * pool and device name, so the driver's ResourceSlices are watched and each device is kept under
 * pool/device with what labelling needs: a full GPU's UUID, or a MIG device's UUID, profile and
 * parent GPU (dcgm-exporter's DRAResourceSliceManager, internal/pkg/transformation/dra.go).
 *
 * resource.k8s.io/v1: a device's attributes sit on the device itself (v1beta1, which dcgm-exporter
 * reads, wraps them in `basic`). The cache is fed by exporter_slices_apply(), which the watch calls
 * for every event and tests call directly; nothing here logs above debug. exporter-slices.c;
 * docs/exporter.md, "DRA devices".
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "kube.h"

#define EXPORTER_DRA_DRIVER "gpu.nvidia.com"

/* The most devices kept over all slices (a watch of a whole cluster when NODE_NAME is not set);
 * the devices of a slice that would go past it are left out, counted. */
#define EXPORTER_SLICES_MAX_DEVICES ((size_t)1 << 20)

enum exporter_dra_kind {
    EXPORTER_DRA_GPU, /* attribute type "gpu": a full GPU */
    EXPORTER_DRA_MIG, /* type "mig": a MIG device */
};

/* One device as a slice describes it; the strings are borrowed until the next change of the cache
 * and never NULL. */
struct exporter_dra_device {
    enum exporter_dra_kind kind;
    const char *uuid;        /* the GPU's UUID; for a MIG device its own ("" when not published) */
    const char *parent_uuid; /* MIG: its GPU's UUID; "" for a GPU */
    const char *profile;     /* MIG: "1g.10gb" ("" when not published); "" for a GPU */
};

/* What the cache holds after a (re)list: for the daemon's log. */
struct exporter_slices_status {
    size_t slices;
    size_t devices;
    size_t left_out; /* devices not kept because the cache was full, since the watch started */
};

struct exporter_slices_options {
    size_t max_devices; /* 0: EXPORTER_SLICES_MAX_DEVICES */
    /* Called at every SYNCED of the watch (the first list and each re-list); may be NULL. */
    void (*synced)(const struct exporter_slices_status *st, void *userdata);
    void *userdata;
};

struct exporter_slices;

/* An empty cache with options o (copied). -ENOMEM. */
_wur_ int exporter_slices_new(const struct exporter_slices_options *o,
                              struct exporter_slices **ret);
/* Stops the watch and frees everything; NULL allowed. Returns NULL. */
struct exporter_slices *exporter_slices_free(struct exporter_slices *s);
DEFINE_POINTER_CLEANUP(struct exporter_slices, exporter_slices_free)

/*
 * One event of the slices' watch (slice is borrowed). ADDED and MODIFIED replace everything known
 * of the slice (by metadata.name) with its devices now: those of type gpu with a uuid, and of type
 * mig with a parentUUID, under spec.pool.name/device name; other devices and a slice of another
 * driver are not kept. DELETED forgets the slice's devices, SYNCED marks the cache synced and calls
 * o.synced. -EINVAL for a slice without a name or pool (nothing changes), -ENOSPC when its devices
 * do not fit (counted; the slice's earlier devices are gone), -ENOMEM.
 */
_wur_ int exporter_slices_apply(struct exporter_slices *s, enum kube_event ev, json_t *slice);

/*
 * The device pool/device: true and *ret filled, or false when no slice has it. When several
 * slices of the pool list it (a pool being republished), the highest pool generation wins, as it
 * does for the scheduler.
 */
bool exporter_slices_find(const struct exporter_slices *s, const char *pool, const char *device,
                          struct exporter_dra_device *ret);

/* Whether the watch has delivered a whole list at least once. */
bool exporter_slices_synced(const struct exporter_slices *s);
/* The devices kept. */
size_t exporter_slices_count(const struct exporter_slices *s);

/*
 * The API path of the slices watched: /apis/resource.k8s.io/v1/resourceslices with the field
 * selector spec.driver=gpu.nvidia.com, and spec.nodeName=<node> (percent-encoded) when node_name
 * is neither NULL nor "". -ENAMETOOLONG when buf is too small.
 */
_wur_ int exporter_slices_path(const char *node_name, char *buf, size_t n);

/* Starts feeding the cache from the API server through kube (borrowed; it must outlive the cache's
 * watch): a watch of exporter_slices_path(node_name). -EINVAL with d for a node name too long,
 * -ENOMEM. The watch retries on its own once started. */
_wur_ int exporter_slices_watch(struct exporter_slices *s, struct kube_client *kube,
                                const char *node_name, struct diag *d);
