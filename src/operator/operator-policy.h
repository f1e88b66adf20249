/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ClusterPolicy model: the spec of NVIDIA's ClusterPolicy (nvidia.com/v1) read into a struct,
 * with NVIDIA's defaults applied, so the renderer and the reconciler never look at raw JSON or ask
 * "was this set?". Every field the renderer uses is checked here; a malformed value (wrong type,
 * bad enum) fails with a message naming its JSON path ("spec.devicePlugin.imagePullPolicy: ...").
 * Unknown fields are ignored (the CRD preserves them), as are the fields of the NVIDIA operands
 * gpuplane does not deploy (dcgm, migManager's images, node-status-exporter, the sandbox operands),
 * beyond the few the node labeller reads.
 *
 * Ownership: a struct op_policy owns everything it points to (strings, json_t references);
 * op_policy_free() releases it. The json_t members hold their own references (deep copies of the
 * input), so the policy outlives the object it was read from.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "base-diag.h"
#include "base-macro.h"

/* The components gpuplane deploys, in the order of their states. */
enum op_component {
    OP_DRIVER,        /* spec.driver: NVIDIA's driver container */
    OP_TOOLKIT,       /* spec.toolkit: NVIDIA's container toolkit */
    OP_VALIDATOR,     /* spec.validator: gpuplane validate */
    OP_DEVICE_PLUGIN, /* spec.devicePlugin: gpuplane device-plugin */
    OP_DRA_DRIVER,    /* spec.draDriver (gpuplane's own field): gpuplane dra-driver */
    OP_DCGM_EXPORTER, /* spec.dcgmExporter: gpuplane exporter */
    OP_GFD,           /* spec.gfd: gpuplane discover */
    OP_COMPONENT_MAX,
};

/* The spec key of a component ("devicePlugin"). */
const char *op_component_key(enum op_component c);

enum op_pull_policy {
    OP_PULL_IF_NOT_PRESENT, /* also what any other string means, as NVIDIA's */
    OP_PULL_ALWAYS,
    OP_PULL_NEVER,
};
const char *op_pull_policy_name(enum op_pull_policy p);

enum op_mig_strategy {
    OP_MIG_UNSET, /* spec.mig.strategy absent: the plugin decides (no MIG_STRATEGY passed) */
    OP_MIG_NONE,
    OP_MIG_SINGLE,
    OP_MIG_MIXED,
};
/* "none", "single", "mixed"; NULL for OP_MIG_UNSET. */
const char *op_mig_strategy_name(enum op_mig_strategy s);

enum op_workload {
    OP_WORKLOAD_CONTAINER,
    OP_WORKLOAD_VM_PASSTHROUGH,
    OP_WORKLOAD_VM_VGPU,
};
/* "container", "vm-passthrough", "vm-vgpu". */
const char *op_workload_name(enum op_workload w);

/* The fields every component has. Strings are NULL when unset (never ""). */
struct op_component_spec {
    bool enabled;     /* nil: true, except draDriver (false) */
    char *repository; /* image path parts, composed by op_component_image() */
    char *image;
    char *version;
    enum op_pull_policy pull_policy;
    json_t *pull_secrets; /* array of strings, duplicates dropped (never NULL, maybe empty) */
    json_t *args;         /* array of strings; non-empty replaces the rendered args */
    json_t *env;          /* array of {name, value}: overrides same name, else appended */
    json_t *resources;    /* {limits, requests} or NULL: replaces the rendered resources */
    bool host_network;    /* nil: false */
    char *config_name;    /* config.name: a ConfigMap in the operator namespace, or NULL */
    char *config_default; /* config.default, or NULL */
};

enum op_update_strategy {
    OP_UPDATE_ROLLING, /* default */
    OP_UPDATE_ON_DELETE,
};

/* spec.daemonsets: applied to every operand DaemonSet. */
struct op_daemonsets_spec {
    json_t *labels;            /* object of strings (never NULL) */
    json_t *annotations;       /* object of strings (never NULL) */
    json_t *tolerations;       /* array of tolerations; NULL or empty: the rendered default */
    char *priority_class_name; /* default "system-node-critical" */
    enum op_update_strategy update_strategy;
    char *max_unavailable;        /* rollingUpdate.maxUnavailable ("1", "25%") or NULL */
    json_t *pod_security_context; /* object or NULL */
};

/* The validator's per-check env lists (spec.validator.<check>.env), arrays or NULL. */
enum op_validator_check {
    OP_CHECK_DRIVER,
    OP_CHECK_TOOLKIT,
    OP_CHECK_CUDA,
    OP_CHECK_PLUGIN,
    OP_CHECK_MAX,
};

struct op_policy {
    struct op_component_spec comp[OP_COMPONENT_MAX];
    struct op_daemonsets_spec daemonsets;

    char *runtime_class; /* operator.runtimeClass, default "nvidia" */
    bool psa_enabled;    /* psa.enabled, nil false */
    bool cdi_enabled;    /* cdi.enabled, nil true */
    bool cdi_default;    /* cdi.default, nil false */
    bool cdi_nri_plugin; /* cdi.nriPluginEnabled, nil false (needs cdi.enabled and the toolkit) */

    /* hostPaths, defaults "/", "/run/nvidia/driver", "/var/lib/kubelet" (absolute, no "..") */
    char *host_root;
    char *driver_install_dir;
    char *kubelet_root_dir;

    enum op_mig_strategy mig_strategy;

    /* driver */
    char *driver_kernel_module_type; /* "auto" (default), "open", "proprietary" */
    bool driver_use_precompiled;
    bool driver_use_nvidia_driver_crd;
    bool driver_rdma_enabled;
    bool driver_rdma_use_host_mofed;
    bool driver_auto_upgrade; /* driver.upgradePolicy.autoUpgrade, nil false */
    /* driver.manager: the k8s-driver-manager init container (image fields, pull policy, secrets,
     * env); its enabled is unused */
    struct op_component_spec driver_manager;
    /* toolkit */
    char *toolkit_install_dir; /* default "/usr/local/nvidia" */
    /* validator */
    json_t *validator_env[OP_CHECK_MAX];
    /* dcgmExporter */
    bool exporter_host_pid;
    bool exporter_pod_labels;
    bool exporter_pod_uid;
    char *exporter_pod_label_allowlist;     /* podLabelAllowlistRegex or NULL */
    char *exporter_service_type;            /* service.type or NULL (ClusterIP) */
    char *exporter_internal_traffic_policy; /* service.internalTrafficPolicy or NULL */
    json_t *exporter_annotations; /* dcgmExporter.annotations: pod template extras (never NULL) */
    /* (comp[OP_DCGM_EXPORTER].config_name: the metrics CSV ConfigMap, key dcgm-metrics.csv) */
    /* devicePlugin */
    char *mps_root; /* devicePlugin.mps.root, default "/run/nvidia/mps" */

    /* Read for the node labeller; gpuplane deploys none of these. */
    bool dcgm_enabled;                 /* dcgm.enabled, nil true */
    bool mig_manager_enabled;          /* migManager.enabled, nil true */
    char *mig_manager_config_default;  /* migManager.config.default, default "all-disabled" */
    bool node_status_exporter_enabled; /* nil false */
    bool sandbox_enabled;              /* sandboxWorkloads.enabled, nil false */
    enum op_workload sandbox_default_workload; /* default container */
    char *sandbox_mode;                        /* "kubevirt" (default) or "kata" */
};

/*
 * Reads a whole ClusterPolicy object (apiVersion, kind, metadata, spec; spec may be absent or {}).
 * On success *ret is a new policy the caller frees. On failure -EINVAL (or -ENOMEM) and d holds
 * "spec.x.y: message".
 */
_wur_ int op_policy_from_json(const json_t *cluster_policy, struct op_policy **ret, struct diag *d);

/*
 * Reads a ClusterPolicy from a YAML or JSON file (one document). On success *ret is the policy and,
 * if ret_object is not NULL, *ret_object a new reference to the object as read. Errors are
 * "file:line:col: spec.x.y: message" (the position of the offending value).
 */
_wur_ int op_policy_from_file(const char *path, struct op_policy **ret, json_t **ret_object,
                              struct diag *d);

struct op_policy *op_policy_free(struct op_policy *p);
DEFINE_POINTER_CLEANUP(struct op_policy, op_policy_free)

/* Whether a component's state is enabled (the draDriver default is false, every other true). */
bool op_policy_enabled(const struct op_policy *p, enum op_component c);

/*
 * The image of a component by NVIDIA's rule: image verbatim when repository and version are unset;
 * repository/image:version (or @version for "sha256:..."); when all three are unset, the operator
 * pod's env (getenv: DRIVER_IMAGE, CONTAINER_TOOLKIT_IMAGE, VALIDATOR_IMAGE, DEVICE_PLUGIN_IMAGE,
 * DCGM_EXPORTER_IMAGE, GFD_IMAGE; then GPUPLANE_IMAGE for the gpuplane components). The driver gets
 * "-<os_tag>" appended when os_tag is set and the path has no digest. On success *ret is a new
 * string; -EINVAL with "spec.<component>: ..." in d when the fields are incomplete or nothing is
 * set.
 */
_wur_ int op_component_image(const struct op_policy *p, enum op_component c,
                             const char *(*getenv_fn)(const char *name), const char *os_tag,
                             char **ret, struct diag *d);
