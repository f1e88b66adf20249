/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What NodePrepareResources needs from a ResourceClaim, and what it makes of it: the claim as the
 * API server returned it is checked (the UID the kubelet named, allocated, reserved for a pod) and
 * this driver's results on this node are taken with the opaque configs that apply to them; the
 * configs (NVIDIA's resource.nvidia.com/v1beta1 GpuConfig / MigDeviceConfig) are decoded and
 * checked; and a per-claim CDI spec (kind k8s.gpu.nvidia.com/claim, devices
 * "<claim UID>-<device>") is written atomically under the CDI root, or removed.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base.h"
#include "gpu.h"
#include "nvcdi.h"

/* How a device is shared, from the GpuConfig / MigDeviceConfig that applies to it. */
enum dra_sharing {
    DRA_SHARING_NONE,        /* no config: exclusive use */
    DRA_SHARING_TIMESLICING, /* sharing.strategy TimeSlicing (the default strategy) */
    DRA_SHARING_MPS,         /* sharing.strategy MPS */
};

enum dra_timeslice {
    DRA_TIMESLICE_DEFAULT,
    DRA_TIMESLICE_SHORT,
    DRA_TIMESLICE_MEDIUM,
    DRA_TIMESLICE_LONG,
};

struct dra_config {
    enum dra_sharing sharing;
    enum dra_timeslice interval;      /* TimeSlicing */
    int mps_active_thread_percentage; /* MPS defaultActiveThreadPercentage; -1 when unset */
    char *mps_pinned_memory_limit;    /* MPS defaultPinnedDeviceMemoryLimit (a Quantity), or NULL */
    json_t *mps_per_device_limits;    /* MPS defaultPerDevicePinnedMemoryLimit: device (UUID or
                                         index) -> Quantity string; owned, or NULL when unset */
    bool mig;                         /* decoded from a MigDeviceConfig (else a GpuConfig) */
};

/* One device allocated to the claim by this driver on this node. */
struct dra_claim_device {
    char *request;      /* the result's request as written ("gpu" or "gpu/sub") */
    char *base_request; /* the request name the kubelet wants ("gpu") */
    char *pool;
    char *device;   /* "gpu-0", "gpu-0-mig-1g5gb-19-0" */
    char *share_id; /* or NULL */
    bool admin_access;
    struct dra_config config; /* the last applicable config (class configs, then claim configs) */
};

struct dra_claim {
    char *uid, *ns, *name;
    size_t n_devices;
    struct dra_claim_device *devices;
};

/*
 * Decodes the ResourceClaim obj (as GET returned it) for driver on node: the UID must equal uid,
 * status.allocation must be present and status.reservedFor non-empty; results of other drivers or
 * pools are skipped (pool == node, as gpuplane publishes one pool per node). Configs: from
 * status.allocation.devices.config, opaque ones of this driver, source FromClass before FromClaim,
 * each applying to the results whose request it lists ("gpu" also covers "gpu/sub"), or when it
 * lists none to every result of its kind (GpuConfig: full GPUs, MigDeviceConfig: MIG devices); a
 * later one wins. A config that lists a result's request but is of the other kind is refused, as
 * NVIDIA's driver refuses it. An opaque config of another API group/version or kind, or an invalid
 * one, is refused: -EINVAL with d ("config #1: unsupported kind \"Foo\" (want GpuConfig or
 * MigDeviceConfig of resource.nvidia.com/v1beta1)"), as are a claim not allocated ("not
 * allocated"), not reserved, or with another UID ("UID mismatch: ..."). Claims without devices of
 * this driver on this node decode to n_devices 0.
 */
_wur_ int dra_claim_decode(json_t *obj, const char *uid, const char *driver, const char *node,
                           struct diag *d, struct dra_claim **ret);
struct dra_claim *dra_claim_free(struct dra_claim *c);
DEFINE_POINTER_CLEANUP(struct dra_claim, dra_claim_free)

/* Decodes one opaque config's parameters (a GpuConfig or MigDeviceConfig object) into *ret;
 * -EINVAL with d otherwise. Exposed for tests and the fuzz target. */
_wur_ int dra_config_decode(const json_t *params, struct diag *d, struct dra_config *ret);
void dra_config_release(struct dra_config *c);
/* A deep copy of src into *ret (released with dra_config_release). */
_wur_ int dra_config_copy(const struct dra_config *src, struct dra_config *ret);

/* Frees a NULL-terminated string array (the CDI IDs of dra_cdi_write) and its strings; returns
 * NULL. */
char **dra_strv_free(char **v);

/* The CDI spec file of a claim under cdi_root: "<root>/k8s.gpu.nvidia.com-claim_<uid>.yaml". */
_wur_ int dra_cdi_path(const char *cdi_root, const char *uid, char *buf, size_t n);

/*
 * Writes the claim's CDI spec atomically (temporary file, fsync, rename; mode 0644): spec-level
 * edits from nvcdi_add_common_edits, one device "<uid>-<device>" per claim device with the
 * device's edits (nvcdi_add_device_edits for the GPU or MIG device named by the device; the
 * sharing config adds what it needs, e.g. MPS's CUDA_MPS_PIPE_DIRECTORY). *ret_ids gets the
 * qualified CDI IDs ("k8s.gpu.nvidia.com/claim=<uid>-gpu-0"), one per claim device, in order
 * (a NULL-terminated array, free with dra_strv_free). -ENOENT with d for a device not in inv.
 * A claim without devices gets no spec (CDI refuses an empty one): any old file is removed and
 * *ret_ids is an empty array. -EINVAL for a UID dra_claim_uid_valid refuses.
 */
_wur_ int dra_cdi_write(const struct nvcdi *nv, const struct gpu_inventory *inv,
                        const char *cdi_root, const struct dra_claim *claim, struct diag *d,
                        char ***ret_ids);
/* Removes the claim's spec; a missing file is fine (idempotent). */
_wur_ int dra_cdi_remove(const char *cdi_root, const char *uid, struct diag *d);

/* Where MPS sharing's per-claim directories live on the host unless told otherwise (NVIDIA's
 * place: <kubelet plugins dir>/gpu.nvidia.com/mps). */
#define DRA_MPS_ROOT_DEFAULT "/var/lib/kubelet/plugins/gpu.nvidia.com/mps"
/* The container path of the MPS pipe directory (CUDA_MPS_PIPE_DIRECTORY). */
#define DRA_MPS_PIPE_DIR "/tmp/nvidia-mps"

struct dra_cdi_options {
    /* A device shared with MPS gets <mps_root>/<uid>/pipe mounted at DRA_MPS_PIPE_DIR and
     * <mps_root>/<uid>/shm at /dev/shm; both are created by dra_cdi_write_with. NULL:
     * DRA_MPS_ROOT_DEFAULT (the driver passes <--kubelet-plugins-directory-path>/<driver>/mps). */
    const char *mps_root;
};

/* dra_cdi_write / dra_cdi_remove with options (NULL: the defaults, which is what the plain
 * functions use); remove also deletes the claim's MPS directory <mps_root>/<uid> and whatever a
 * control daemon left in it. */
_wur_ int dra_cdi_write_with(const struct nvcdi *nv, const struct gpu_inventory *inv,
                             const char *cdi_root, const struct dra_claim *claim,
                             const struct dra_cdi_options *opts, struct diag *d, char ***ret_ids);
_wur_ int dra_cdi_remove_with(const char *cdi_root, const char *uid,
                              const struct dra_cdi_options *opts, struct diag *d);

/* The device name gpuplane publishes for a GPU ("gpu-<minor>") or a MIG device
 * ("gpu-<parent minor>-mig-<profile, RFC 1123>-<GI profile id>-<placement start>"). */
_wur_ int dra_device_name(const struct gpu_device *gpu, const struct gpu_mig_device *mig, char *buf,
                          size_t n);
/* The GPU (and MIG device, or NULL) inv has under a published device name; -ENOENT. */
_wur_ int dra_device_find(const struct gpu_inventory *inv, const char *name,
                          const struct gpu_device **gpu, const struct gpu_mig_device **mig);

enum dra_device_type {
    DRA_DEVICE_GPU, /* "gpu-<minor>" */
    DRA_DEVICE_MIG, /* "gpu-<minor>-mig-<label>" */
};
/* Which kind of device a name has the shape of, without an inventory (a claim names devices that
 * a config must match); -EINVAL for a name gpuplane never publishes. */
_wur_ int dra_device_type(const char *name, enum dra_device_type *ret);
