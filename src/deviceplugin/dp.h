/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuplane device-plugin`: the kubelet device plugin (API v1beta1) for NVIDIA GPUs, a drop-in for
 * NVIDIA's k8s-device-plugin. This header is the module's API: the daemon's entry point and the
 * pure parts the daemon is built from, each testable without sockets or threads:
 *
 *  - resources: which resources (nvidia.com/gpu, nvidia.com/mig-1g.10gb, ...) the node advertises
 *    and the device ids in each, from the inventory and the config (MIG strategy, time-slicing and
 *    MPS replicas, rename, per-GPU replica counts, resource patterns) — dp-devices.c;
 *  - health: the XID policy and the per-GPU / per-MIG-device state machine with recovery after a
 *    quiet window, driven by events and probes with explicit timestamps — dp-health.c;
 *  - Allocate: the container response of each device-list strategy, exactly as NVIDIA builds it —
 *    dp-allocate.c;
 *  - GetPreferredAllocation: topology-aware choice through src/topo — dp-prefer.c.
 *
 * The served endpoints, registration, directory watch and the daemon's wiring are internal
 * (dp-internal.h).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base.h"
#include "deviceplugin/v1beta1/api.pb-c.h"
#include "dp-config.h"
#include "gpu.h"
#include "rpc.h"
#include "topo.h"

/*
 * The whole command line of `gpuplane device-plugin`: NVIDIA's flags (as `--flag value`,
 * `--flag=value`, or with one dash as Go allows; booleans as `--flag` or `--flag=true|false`), the
 * common options of src/cli (into cfg->common; the caller still calls cli_common_finish), the
 * environment, and the config file named by --config-file or CONFIG_FILE, merged flag > env > file
 * > default into cfg, which the caller initialised with dp_config_init() and releases either way.
 * Then dp_config_validate(). Returns 0; -EINVAL for a usage error (unknown option, stray argument,
 * bad common option: exit 2; already printed on stderr by src/cli for a common option); another
 * negative errno (-EBADMSG for an invalid value, -ENOENT etc. for an unreadable file: exit 1) with
 * the reason in d. (dp-flags.c; the config model and loader are src/dpconfig's.)
 */
_wur_ int dp_config_parse_args(int argc, char **argv, struct dp_config *cfg, struct diag *d);

/* Prints the --help text of `gpuplane device-plugin`, the common options included, built from
 * dp_settings so that it lists every flag with its variable and default. */
void dp_config_print_help(FILE *f);

#define DP_API_VERSION "v1beta1"
#define DP_HEALTHY "Healthy"
#define DP_UNHEALTHY "Unhealthy"
#define DP_KUBELET_SOCKET_NAME "kubelet.sock"
/* "GPU-<uuid>::<replica>" and "MIG-<uuid>" fit; the kubelet's own comment says 63 characters. */
#define DP_ID_MAX 128
#define DP_INDEX_ID_MAX 24
/* Device nodes a MIG device needs besides its parent's: the GPU and compute instance caps. */
#define DP_MIG_CAPS 2

/* `gpuplane device-plugin [OPTIONS]`: the subcommand (src/main.c). Returns an exit code. */
int dp_main(int argc, char **argv);

/* ---- resources and device ids (dp-devices.c) ---- */

/* One device as advertised to the kubelet. */
struct dp_device {
    char id[DP_ID_MAX];             /* "GPU-…", "MIG-…", replicas "GPU-…::3" */
    char index_id[DP_INDEX_ID_MAX]; /* "0", MIG "1:0" (--device-id-strategy=index) */
    char uuid[GPU_UUID_MAX];        /* the physical device: GPU or MIG UUID */
    unsigned gpu;                   /* inventory index of the GPU (a MIG device's parent) */
    int mig;                        /* index into the GPU's migs, or -1 for a full GPU */
    int replica;                    /* 0.. for a replica of a shared device, else -1 */
    int numa;                       /* NUMA node, -1 when unknown (no topology is sent) */
    unsigned minor;                 /* /dev/nvidia<minor> of the GPU */
    int caps[DP_MIG_CAPS];          /* MIG: GI and CI capability minors (-1 = not found) */
    bool healthy;                   /* what ListAndWatch says; the daemon keeps it current */
};

struct dp_resource {
    char *name;     /* "nvidia.com/gpu" */
    char *endpoint; /* socket file name: "nvidia-gpu.sock" */
    struct dp_device *devices;
    size_t n_devices;
    size_t *by_id; /* device indices sorted by id, for dp_resource_find */
    bool shared;   /* holds replicas of time-slicing or MPS */
    bool mps;      /* shared through MPS */
    bool fail_requests_greater_than_one;
    unsigned per_gpu[TOPO_MAX_GPUS]; /* devices of this resource on each GPU */
};

struct dp_resources {
    struct dp_resource *items;
    size_t n;
};

/*
 * The resources of a node: NVIDIA's rules (nvidia-compat.md §1.4, §1.5) plus what gpuplane honours
 * (resource patterns, rename, per-device replica counts; lost GPUs are advertised Unhealthy rather
 * than dropped). mig_minors is the text of /proc/driver/nvidia-caps/mig-minors (NULL when absent)
 * for the capability nodes of MIG devices. Errors (MIG single on a mixed node, a model that matches
 * no pattern, ...) are -EINVAL with the reason in d. Every device starts healthy unless its GPU is
 * lost. The caller frees *ret with dp_resources_free().
 */
_wur_ int dp_resources_build(const struct dp_config *cfg, const struct gpu_inventory *inv,
                             const char *mig_minors, struct diag *d, struct dp_resources **ret);
struct dp_resources *dp_resources_free(struct dp_resources *res);
DEFINE_POINTER_CLEANUP(struct dp_resources, dp_resources_free)

/* The device with this advertised id, or NULL. */
const struct dp_device *dp_resource_find(const struct dp_resource *r, const char *id);
/* The resource with this name, or NULL. */
struct dp_resource *dp_resources_get(const struct dp_resources *res, const char *name);

/* Whether a and b advertise the same devices: the same ids in the same order, with the same
 * health and NUMA node (what a ListAndWatch snapshot says). */
bool dp_resource_same_devices(const struct dp_resource *a, const struct dp_resource *b);

/* ---- health (dp-health.c) ---- */

struct dp_tracker;

/* Why a device is unhealthy. */
enum dp_cause {
    DP_CAUSE_NONE,
    DP_CAUSE_XID,      /* a fatal XID */
    DP_CAUSE_LOST,     /* NVML says the GPU is lost (or cannot reach it) */
    DP_CAUSE_REGISTER, /* events could not be registered on the GPU */
};

/* What one event or probe did to a device, for the daemon's log. */
struct dp_change {
    const char *uuid; /* GPU or MIG UUID */
    bool healthy;     /* the new state */
    enum dp_cause cause;
    unsigned long long xid;
};

typedef void (*dp_change_fn)(const struct dp_change *change, void *userdata);

/* The health state of every GPU and MIG device of inv (lost GPUs start unhealthy) under a policy
 * (copied). now_ms is the caller's clock. */
_wur_ int dp_tracker_new(const struct gpu_inventory *inv, const struct dp_health *policy,
                         uint64_t now_ms, struct dp_tracker **ret);
struct dp_tracker *dp_tracker_free(struct dp_tracker *t);
DEFINE_POINTER_CLEANUP(struct dp_tracker, dp_tracker_free)

enum dp_event_result {
    DP_EVENT_IGNORED, /* nothing changed (ignored XID, ECC, unknown GPU, already unhealthy) */
    DP_EVENT_CHANGED, /* a device became unhealthy (or a fatal XID restarted its window) */
    DP_EVENT_PROBE,   /* the wait itself failed: probe the GPUs rather than guess */
};

/* Applies one event from gpu_health at now_ms. A fatal XID marks the GPU (and so all its replicas
 * and MIG devices), or only the MIG device the event names by GPU/compute instance. fn (may be
 * NULL) hears of each device that changed state. */
enum dp_event_result dp_tracker_event(struct dp_tracker *t, const struct gpu_health_event *e,
                                      uint64_t now_ms, dp_change_fn fn, void *userdata);

/*
 * Applies a probe: probe is a fresh inventory read (NULL when the read failed: then nothing is
 * decided). A GPU that is missing or failing in it is lost (unhealthy, its quiet window restarts);
 * an unhealthy GPU or MIG device whose GPU answers and whose last fatal event is at least the
 * recovery window old becomes healthy (never when the window is 0). Returns true when a device
 * changed state.
 */
bool dp_tracker_probe(struct dp_tracker *t, const struct gpu_inventory *probe, uint64_t now_ms,
                      dp_change_fn fn, void *userdata);

/*
 * Carries the state of every GPU and MIG device of old over to the same device (by UUID) in t, a
 * tracker just made from a fresh inventory, so that a rebuild (SIGHUP, a GPU that came back) keeps
 * what events and probes decided. A GPU the fresh inventory could not read keeps its new (lost)
 * state; devices old does not know keep theirs.
 */
void dp_tracker_inherit(struct dp_tracker *t, const struct dp_tracker *old);

/*
 * Whether probe (a fresh inventory read) holds a device that cur could not name: a GPU that
 * answers in probe but had no UUID or an NVML error in cur (lost before it could be read, or lost
 * at the last build), or a MIG device cur does not have. Such a device can only be advertised
 * after a rebuild. Devices that went away are not a gain: the tracker marks them lost.
 */
bool dp_inventory_gained(const struct gpu_inventory *cur, const struct gpu_inventory *probe);

/* Whether any device is unhealthy (the daemon probes only then). */
bool dp_tracker_any_unhealthy(const struct dp_tracker *t);
/* The state of GPU gpu (mig -1) or of one of its MIG devices. */
bool dp_tracker_healthy(const struct dp_tracker *t, unsigned gpu, int mig);

/* Copies the tracker's state into every device of res; true when one changed. */
bool dp_resource_apply_health(struct dp_resource *r, const struct dp_tracker *t);

/* ---- Allocate (dp-allocate.c) ---- */

/* An RPC failure with its gRPC code and text. */
struct dp_error {
    enum rpc_code code;
    char msg[512];
};

/* The control device nodes NVIDIA passes when they exist (checked once under the dev root). */
enum {
    DP_NODE_NVIDIACTL,
    DP_NODE_UVM,
    DP_NODE_UVM_TOOLS,
    DP_NODE_MODESET,
    DP_N_NODES,
};

struct dp_alloc_ctx {
    const struct dp_config *cfg;
    bool node_present[DP_N_NODES];
    /* A random UUID v4 for the CDI annotation key; NULL: from getrandom. Tests set it. */
    void (*uuid_fn)(char out[37]);
};

/* Fills ctx for cfg, checking which control nodes exist under the dev root. */
void dp_alloc_ctx_init(struct dp_alloc_ctx *ctx, const struct dp_config *cfg);

/*
 * The Allocate answer for a request against resource r: one container response per container
 * request, NVIDIA's per strategy (nvidia-compat.md §1.6). Unknown id: -EINVAL with
 * INVALID_ARGUMENT; an unhealthy one: FAILED_PRECONDITION; a shared resource with
 * failRequestsGreaterThanOne and more than one id: INVALID_ARGUMENT; the id is in the message.
 * The caller frees *ret with protobuf_c_message_free_unpacked(…, NULL).
 */
_wur_ int dp_allocate(const struct dp_alloc_ctx *ctx, const struct dp_resource *r,
                      const V1beta1__AllocateRequest *req, struct dp_error *err,
                      V1beta1__AllocateResponse **ret);

/* ---- CDI specs (dp-cdi.c) ---- */

#define DP_CDI_VENDOR "k8s.device-plugin.nvidia.com"

/* The classes of the kinds DP_CDI_VENDOR/<class>, each a spec file <vendor>-<class>.json. */
enum dp_cdi_class {
    DP_CDI_GPU,          /* GPUs and MIG devices, named as Allocate names them, and "all" */
    DP_CDI_IMEX_CHANNEL, /* "<channel>" per configured IMEX channel whose node exists */
    DP_CDI_GDRCOPY,      /* "all": /dev/gdrdrv */
    DP_CDI_GDS,          /* "all": /dev/nvidia-fs<N> */
    DP_CDI_MOFED,        /* "all": the nodes under /dev/infiniband */
    DP_CDI_N,
};

struct cdi_spec;

/* The specs of a configuration: NULL for a class not wanted or that would be empty. */
struct dp_cdi {
    struct cdi_spec *specs[DP_CDI_N];
};

/* "gpu", "imex-channel", ...; NULL out of range. */
const char *dp_cdi_class_name(enum dp_cdi_class c);
/* Whether cfg's device-list strategies include a CDI one (then the specs are written). */
bool dp_cdi_wanted(const struct dp_config *cfg);
/*
 * The specs cfg needs (all NULL without a CDI strategy): the gpu class from the devices of res,
 * whose GPUs are in inv, with the driver's files scanned under the driver root and device nodes
 * under the dev root; the other classes from the config and the nodes present under the dev
 * root. -errno with the reason in d (no driver files, a missing /dev/nvidia<minor>). Release *ret
 * with dp_cdi_release().
 */
_wur_ int dp_cdi_build(const struct dp_config *cfg, const struct gpu_inventory *inv,
                       const struct dp_resources *res, struct diag *d, struct dp_cdi *ret);
void dp_cdi_release(struct dp_cdi *c);
/* Writes each spec of c atomically into dir (created when missing) and removes the files of the
 * classes c has none for. */
_wur_ int dp_cdi_write(const struct dp_cdi *c, const char *dir, struct diag *d);
/* Removes every spec file of the device plugin's kinds from dir (absent ones are fine). */
_wur_ int dp_cdi_remove(const char *dir, struct diag *d);

/* ---- GetPreferredAllocation (dp-prefer.c) ---- */

/* The GPU score matrix of an inventory, computed once (nvidia-compat.md §1.9 weights). */
struct dp_topo {
    bool valid; /* false with more than TOPO_MAX_GPUS GPUs: the choice is then by order */
    struct topo_matrix m;
};

void dp_topo_build(struct dp_topo *t, const struct gpu_inventory *inv);

/*
 * The preferred ids for each container request: allocation_size ids from available_deviceIDs,
 * must_include_deviceIDs first. Full GPUs: the best-connected set (topo_choose); replicas and MIG
 * devices: topo_choose_replicas under the allocation policy. Never fails on what the kubelet might
 * send (unknown or unhealthy ids, a size larger than the candidates): it then answers as well as it
 * can and the kubelet tops up. The caller frees *ret with protobuf_c_message_free_unpacked.
 */
_wur_ int dp_prefer(const struct dp_config *cfg, const struct dp_resource *r,
                    const struct dp_topo *topo, const V1beta1__PreferredAllocationRequest *req,
                    V1beta1__PreferredAllocationResponse **ret);
