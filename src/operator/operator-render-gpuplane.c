/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The states whose DaemonSets run gpuplane itself: the validator (gpuplane validate), the device
 * plugin, the DRA driver, the exporter and GPU feature discovery. Names, labels, selectors and
 * node selectors are NVIDIA's (so a cluster can switch operators without immutable-field errors),
 * the environment is what NVIDIA's operand would be given (gpuplane's daemons read the same
 * variables), and the pods ask for no more than each daemon needs: root only where a daemon writes
 * the kubelet's sockets or files, privileged only where a Bidirectional mount requires it,
 * read-only root filesystems, no capabilities.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "operator-render-internal.h"

#define VALIDATOR "nvidia-operator-validator"
#define DP_DS "nvidia-device-plugin-daemonset"
#define DP_SA "nvidia-device-plugin"
#define DRA_DS "nvidia-dra-driver-gpu-kubelet-plugin"
#define EXPORTER "nvidia-dcgm-exporter"
#define EXPORTER_READ_PODS "nvidia-dcgm-exporter-read-pods"
#define GFD_DS "gpu-feature-discovery"
#define GFD_SA "nvidia-gpu-feature-discovery"
#define CONFIGS_DIR "/available-configs"
#define METRICS_CSV "dcgm-metrics.csv"

static const char *const GET[] = {"get", NULL};
static const char *const GLW[] = {"get", "list", "watch", NULL};

/* Runs a gpuplane subcommand with the driver's root from driver-ready in the environment
 * (NVIDIA_DRIVER_ROOT, DRIVER_ROOT_CTR_PATH, NVIDIA_DEV_ROOT ...), as NVIDIA's device plugin
 * entrypoint does; the container's args are the subcommand's flags. */
static json_t *driver_root_command(const char *subcommand)
{
    return json_pack("[s,s,s,s]", "sh", "-c",
                     "set -a; f=" OP_VALIDATIONS_DIR "/driver-ready; if [ -f \"$f\" ]; then . "
                     "\"$f\"; fi; set +a; exec " OP_GPUPLANE " \"$0\" \"$@\"",
                     subcommand);
}

static int host_network(json_t *pod, const struct op_component_spec *s)
{
    int r = 0;

    if (s->host_network) {
        r = r_set(pod, "hostNetwork", json_true());
        if (r >= 0)
            r = r_set(pod, "dnsPolicy", json_string("ClusterFirstWithHostNet"));
    }
    return r;
}

/* Every gpuplane operand's end: its pull secrets and the validator's (its init container's
 * image), then r_ds_finish() with the runtime class. */
static int ds_finish(struct rctx *c, struct r_ds *ds, const struct op_component_spec *s, int r,
                     json_t *objects)
{
    if (r >= 0)
        r = r_pull_secrets(ds->pod, s->pull_secrets);
    if (r >= 0)
        r = r_pull_secrets(ds->pod, c->p->comp[OP_VALIDATOR].pull_secrets);
    return r_ds_finish(c, ds, r, true, objects);
}

/* MIG_STRATEGY as the ClusterPolicy says; without one the daemon decides, but watches every
 * device (NVIDIA's applyMIGConfiguration). */
static int mig_env(struct rctx *c, json_t *ctr)
{
    const char *s = op_mig_strategy_name(c->p->mig_strategy);
    int r = 0;

    if (s)
        r = r_env(ctr, "MIG_STRATEGY", s);
    if (r >= 0 && c->p->mig_strategy != OP_MIG_NONE)
        r = r_env(ctr, "NVIDIA_MIG_MONITOR_DEVICES", "all");
    return r;
}

/*
 * devicePlugin.config: the ConfigMap of named configs, mounted whole; the default entry is the
 * config file. (NVIDIA's config-manager sidecar also switches entries by the node label
 * nvidia.com/device-plugin.config; gpuplane has no such sidecar, see docs/operator.md.)
 */
static int plugin_config(struct rctx *c, json_t *pod, json_t *ctr)
{
    const struct op_component_spec *s = &c->p->comp[OP_DEVICE_PLUGIN];
    char file[512];
    int r;

    if (!s->config_name)
        return 0;
    r = r_configmap_volume(pod, "device-plugin-configs", s->config_name, -1, NULL);
    if (r >= 0)
        r = r_mount(ctr, "device-plugin-configs", CONFIGS_DIR, true, NULL, NULL);
    if (r >= 0 && s->config_default) {
        snprintf(file, sizeof(file), CONFIGS_DIR "/%s", s->config_default);
        r = r_env(ctr, "CONFIG_FILE", file);
    }
    return r;
}

/* Host paths of the runtime's configuration the toolkit's env may set. */
static const char *const RUNTIME_CONFIGS[] = {"CONTAINERD_CONFIG", "CRIO_CONFIG"};

/* A variable toolkit.env sets to an absolute path, or NULL. */
static const char *toolkit_env(const struct op_policy *p, const char *name)
{
    size_t i;
    json_t *e;
    const char *v = NULL;

    json_array_foreach(p->comp[OP_TOOLKIT].env, i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "name")), name) == 0)
            v = json_string_value(json_object_get(e, "value"));
    }
    return v && op_valid_host_path(v) ? v : NULL;
}

static int validator_rbac(struct rctx *c, json_t *objects)
{
    json_t *rules = json_array(), *ns_rules = json_array();
    int r = rules && ns_rules ? 0 : -ENOMEM;

    /* The driver check looks for the operator's driver DaemonSet; the plugin check reads its
     * node's allocatable resources, or, with the DRA driver, the ResourceSlices published for
     * the node. */
    if (r >= 0)
        r = r_push(ns_rules, r_rule("apps", (const char *const[]){"daemonsets", NULL}, GLW));
    if (r >= 0)
        r = r_push(rules, r_rule("", (const char *const[]){"nodes", NULL}, GLW));
    if (r >= 0 && c->p->comp[OP_DRA_DRIVER].enabled)
        r = r_push(rules,
                   r_rule("resource.k8s.io", (const char *const[]){"resourceslices", NULL}, GLW));
    if (r >= 0)
        r = r_push(objects, r_service_account(c, VALIDATOR, NULL));
    if (r >= 0)
        r = r_push(objects, r_role(c, "Role", VALIDATOR, TAKE_PTR(ns_rules)));
    if (r >= 0)
        r = r_push(objects, r_role(c, "ClusterRole", VALIDATOR, TAKE_PTR(rules)));
    if (r >= 0)
        r = r_push(objects, r_binding(c, "RoleBinding", VALIDATOR, VALIDATOR, VALIDATOR));
    if (r >= 0)
        r = r_push(objects, r_binding(c, "ClusterRoleBinding", VALIDATOR, VALIDATOR, VALIDATOR));
    json_decref(rules);
    json_decref(ns_rules);
    return r;
}

/* One check of the validator DaemonSet: gpuplane validate <check>, privileged (its status file
 * reaches the host through a Bidirectional mount, which Kubernetes allows only so). */
static json_t *check_container(struct rctx *c, const char *check)
{
    const struct op_component_spec *v = &c->p->comp[OP_VALIDATOR];
    char name[64];
    json_t *ctr, *sc;
    int r;

    snprintf(name, sizeof(name), "%s-validation", check);
    ctr = r_container(name, c->validator_image, v->pull_policy);
    sc = r_sc_privileged();
    r = ctr && sc ? 0 : -ENOMEM;
    if (r >= 0)
        r = r_set(sc, "runAsUser", json_integer(0));
    if (r >= 0)
        r = r_set(ctr, "command", json_pack("[s,s,s]", OP_GPUPLANE, "validate", check));
    if (r >= 0)
        r = r_env(ctr, "COMPONENT", check);
    if (r >= 0)
        r = r_env_field(ctr, "NODE_NAME", "spec.nodeName");
    if (r >= 0)
        r = r_env_field(ctr, "OPERATOR_NAMESPACE", "metadata.namespace");
    if (r >= 0)
        r = r_env(ctr, "OUTPUT_DIR", OP_VALIDATIONS_DIR);
    if (r >= 0 && v->resources && json_object_size(v->resources) > 0)
        r = r_set(ctr, "resources", json_deep_copy(v->resources));
    if (r >= 0)
        r = r_mount(ctr, "run-nvidia-validations", OP_VALIDATIONS_DIR, false, "Bidirectional",
                    NULL);
    if (r >= 0) {
        r = r_set(ctr, "securityContext", sc);
        sc = NULL;
    }
    json_decref(sc);
    if (r < 0)
        return json_decref(ctr), NULL;
    return ctr;
}

int op_state_validation(struct rctx *c, json_t *objects)
{
    const struct op_policy *p = c->p;
    const struct op_component_spec *v = &p->comp[OP_VALIDATOR];
    struct r_ds ds = {0};
    json_t *drv = NULL, *tk = NULL, *plugin = NULL, *main_ctr = NULL, *sc;
    bool custom_dir = strcmp(p->driver_install_dir, "/run/nvidia/driver") != 0;
    int r;

    r = validator_rbac(c, objects);
    if (r < 0)
        return r;
    r = r_ds_new(
        c, VALIDATOR,
        json_pack("{s:s,s:s}", "app", VALIDATOR, "app.kubernetes.io/part-of", "gpu-operator"),
        "operator-validator", VALIDATOR, &ds);
    if (r < 0)
        return r;

    /* driver: the host's driver or the driver container's, waiting until it is there. */
    drv = check_container(c, "driver");
    r = drv ? 0 : -ENOMEM;
    if (r >= 0)
        r = r_env(drv, "WITH_WAIT", "true");
    if (r >= 0 && custom_dir) {
        r = r_env(drv, "DRIVER_INSTALL_DIR", p->driver_install_dir);
        if (r >= 0)
            r = r_env(drv, "DRIVER_INSTALL_DIR_CTR_PATH", p->driver_install_dir);
    }
    if (r >= 0)
        r = r_env_list(drv, p->validator_env[OP_CHECK_DRIVER]);
    if (r >= 0)
        r = r_mount(drv, "host-root", "/host", true, "HostToContainer", NULL);
    if (r >= 0)
        r = r_mount(drv, "driver-install-dir", p->driver_install_dir, false, "HostToContainer",
                    NULL);
    if (r >= 0) {
        r = r_add_init_container(ds.pod, drv);
        drv = NULL;
    }

    /* toolkit: the runtime can hand GPUs to containers (CDI specs or the runtime's config, read
     * from the host's root). */
    if (r >= 0) {
        tk = check_container(c, "toolkit");
        r = tk ? 0 : -ENOMEM;
    }
    if (r >= 0)
        r = r_env(tk, "NVIDIA_VISIBLE_DEVICES", "all");
    if (r >= 0)
        r = r_env(tk, "WITH_WAIT", "false");
    /* The runtime handler and config files the toolkit was told to use. */
    if (r >= 0)
        r = r_env(tk, "VALIDATOR_RUNTIME_CLASS", p->runtime_class);
    for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(RUNTIME_CONFIGS); i++) {
        const char *cfg = toolkit_env(p, RUNTIME_CONFIGS[i]);
        if (cfg)
            r = r_env(tk, RUNTIME_CONFIGS[i], cfg);
    }
    if (r >= 0)
        r = r_env_list(tk, p->validator_env[OP_CHECK_TOOLKIT]);
    if (r >= 0)
        r = r_mount(tk, "host-root", "/host", true, "HostToContainer", NULL);
    if (r >= 0) {
        r = r_add_init_container(ds.pod, tk);
        tk = NULL;
    }

    /* plugin: the node advertises GPUs (device plugin) or publishes their slices (DRA driver). */
    if (r >= 0 && (p->comp[OP_DEVICE_PLUGIN].enabled || p->comp[OP_DRA_DRIVER].enabled)) {
        plugin = check_container(c, "plugin");
        r = plugin ? 0 : -ENOMEM;
        if (r >= 0)
            r = r_env(plugin, "WITH_WAIT", "false");
        if (r >= 0)
            r = r_env(plugin, "WITH_WORKLOAD", "false");
        if (r >= 0 && op_mig_strategy_name(p->mig_strategy))
            r = r_env(plugin, "MIG_STRATEGY", op_mig_strategy_name(p->mig_strategy));
        if (r >= 0)
            r = r_env_list(plugin, p->validator_env[OP_CHECK_PLUGIN]);
        if (r >= 0) {
            r = r_add_init_container(ds.pod, plugin);
            plugin = NULL;
        }
    }

    /* The main container only holds the pod up; stopping it removes the status files, so the
     * next validator starts from nothing. */
    if (r >= 0) {
        main_ctr = r_container(VALIDATOR, c->validator_image, v->pull_policy);
        r = main_ctr ? 0 : -ENOMEM;
    }
    if (r >= 0)
        r = r_set(main_ctr, "command",
                  json_pack("[s,s,s]", "sh", "-c",
                            "echo all validations are successful; while true; do sleep 86400; "
                            "done"));
    if (r >= 0)
        r = r_set(main_ctr, "lifecycle",
                  json_pack("{s:{s:{s:[s,s,s,s,s]}}}", "preStop", "exec", "command", OP_GPUPLANE,
                            "validate", "cleanup", "--output-dir", OP_VALIDATIONS_DIR));
    if (r >= 0)
        r = r_apply_component(main_ctr, v);
    sc = r >= 0 ? r_sc_privileged() : NULL;
    if (r >= 0 && (!sc || r_set(sc, "runAsUser", json_integer(0)) < 0))
        r = -ENOMEM;
    if (r >= 0) {
        r = r_set(main_ctr, "securityContext", sc);
        sc = NULL;
    }
    json_decref(sc);
    if (r >= 0)
        r = r_mount(main_ctr, "run-nvidia-validations", OP_VALIDATIONS_DIR, false, "Bidirectional",
                    NULL);
    if (r >= 0) {
        r = r_add_container(ds.pod, main_ctr);
        main_ctr = NULL;
    }
    if (r >= 0)
        r = host_network(ds.pod, v);
    if (r >= 0)
        r = r_pull_secrets(ds.pod, v->pull_secrets);
    if (r >= 0)
        r = r_validations_volume(ds.pod);
    if (r >= 0)
        r = r_hostpath_volume(ds.pod, "driver-install-dir", p->driver_install_dir, NULL);
    if (r >= 0)
        r = r_hostpath_volume(ds.pod, "host-root", p->host_root, NULL);
    if (r >= 0)
        r = r_host_root_env(c, ds.pod);
    json_decref(drv);
    json_decref(tk);
    json_decref(plugin);
    json_decref(main_ctr);
    /* No runtime class: the checks read the host (privileged) and need no GPU injected, and the
     * validator must start before the toolkit has installed the runtime's nvidia handler, since
     * the toolkit waits for the driver-ready this pod writes. */
    return r_ds_finish(c, &ds, r, false, objects);
}

int op_state_device_plugin(struct rctx *c, json_t *objects)
{
    static const char *const waits[] = {"toolkit-ready", "driver-ready", NULL};
    const struct op_policy *p = c->p;
    const struct op_component_spec *s = &p->comp[OP_DEVICE_PLUGIN];
    _cleanup_free_ char *image = NULL, *plugins_dir = NULL, *mps_shm = NULL, *hook = NULL;
    struct r_ds ds = {0};
    json_t *ctr = NULL;
    int r;

    /* The plugin talks to the kubelet only: a service account and nothing else. */
    r = r_push(objects, r_service_account(c, DP_SA, NULL));
    if (r < 0)
        return r;
    r = r_image(c, OP_DEVICE_PLUGIN, &image);
    if (r < 0)
        return r;
    if (asprintf(&plugins_dir, "%s/device-plugins", p->kubelet_root_dir) < 0 ||
        asprintf(&mps_shm, "%s/shm", p->mps_root) < 0 ||
        asprintf(&hook, "%s/toolkit/nvidia-cdi-hook", p->toolkit_install_dir) < 0)
        return -ENOMEM;
    r = r_ds_new(c, DP_DS, json_pack("{s:s}", "app", DP_DS), "device-plugin", DP_SA, &ds);
    if (r < 0)
        return r;
    /* Never a device plugin where the DRA driver serves the GPUs. */
    if (p->comp[OP_DRA_DRIVER].enabled)
        r = r_set(ds.pod, "affinity",
                  json_pack("{s:{s:{s:[{s:[{s:s,s:s,s:[s]}]}]}}}", "nodeAffinity",
                            "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms",
                            "matchExpressions", "key", "nvidia.com/gpu.deploy.dra-driver",
                            "operator", "NotIn", "values", "true"));
    if (r >= 0)
        r = r_add_init_container(ds.pod, r_wait_container(c, "toolkit-validation", waits));
    if (r >= 0) {
        ctr = r_container("nvidia-device-plugin", image, s->pull_policy);
        r = ctr ? 0 : -ENOMEM;
    }
    if (r >= 0)
        r = r_set(ctr, "command", driver_root_command("device-plugin"));
    if (r >= 0)
        r = r_env(ctr, "PASS_DEVICE_SPECS", "true");
    if (r >= 0)
        r = r_env(ctr, "FAIL_ON_INIT_ERROR", "true");
    if (r >= 0)
        r = r_env(ctr, "DEVICE_LIST_STRATEGY", "envvar");
    if (r >= 0)
        r = r_env(ctr, "DEVICE_ID_STRATEGY", "uuid");
    if (r >= 0)
        r = r_env(ctr, "NVIDIA_VISIBLE_DEVICES", "all");
    if (r >= 0)
        r = r_env(ctr, "NVIDIA_DRIVER_CAPABILITIES", "all");
    if (r >= 0)
        r = r_env(ctr, "MPS_ROOT", p->mps_root);
    if (r >= 0)
        r = plugin_config(c, ds.pod, ctr);
    if (r >= 0)
        r = mig_env(c, ctr);
    /* With CDI the runtime injects the devices the plugin names in CDI annotations and CRI
     * fields. */
    if (r >= 0 && p->cdi_enabled) {
        r = r_env(ctr, "CDI_ENABLED", "true");
        if (r >= 0)
            r = r_env(ctr, "DEVICE_LIST_STRATEGY", "cdi-annotations,cdi-cri");
        if (r >= 0)
            r = r_env(ctr, "CDI_ANNOTATION_PREFIX", "cdi.k8s.io/");
        if (r >= 0 && p->comp[OP_TOOLKIT].enabled)
            r = r_env(ctr, "NVIDIA_CDI_HOOK_PATH", hook);
    }
    if (r >= 0)
        r = r_apply_component(ctr, s);
    if (r >= 0)
        r = r_set(ctr, "securityContext", r_sc_root());
    struct {
        const char *vol, *path;
        bool ro;
        const char *prop;
    } mounts[] = {
        {"device-plugin", "/var/lib/kubelet/device-plugins", false, NULL},
        {"run-nvidia-validations", OP_VALIDATIONS_DIR, true, "HostToContainer"},
        {"driver-install-dir", "/driver-root", true, "HostToContainer"},
        {"host-root", "/host", true, "HostToContainer"},
        {"cdi-root", "/var/run/cdi", false, NULL},
        {"mps-shm", "/dev/shm", false, NULL},
        {"mps-root", "/mps", false, NULL},
    };
    for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(mounts); i++)
        r = r_mount(ctr, mounts[i].vol, mounts[i].path, mounts[i].ro, mounts[i].prop, NULL);
    if (r >= 0) {
        r = r_add_container(ds.pod, ctr);
        ctr = NULL;
    }
    struct {
        const char *name, *path, *type;
    } vols[] = {
        {"device-plugin", plugins_dir, NULL},
        {"run-nvidia-validations", OP_VALIDATIONS_DIR, "DirectoryOrCreate"},
        {"driver-install-dir", p->driver_install_dir, "DirectoryOrCreate"},
        {"host-root", p->host_root, NULL},
        {"cdi-root", "/var/run/cdi", "DirectoryOrCreate"},
        {"mps-root", p->mps_root, "DirectoryOrCreate"},
        {"mps-shm", mps_shm, NULL},
    };
    for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(vols); i++)
        r = r_hostpath_volume(ds.pod, vols[i].name, vols[i].path, vols[i].type);
    if (r >= 0)
        r = host_network(ds.pod, s);
    json_decref(ctr);
    return ds_finish(c, &ds, s, r, objects);
}

int op_state_dra_driver(struct rctx *c, json_t *objects)
{
    static const char *const waits[] = {"toolkit-ready", "driver-ready", NULL};
    static const char *const slice_verbs[] = {"get",    "list",  "watch",  "create",
                                              "update", "patch", "delete", NULL};
    const struct op_policy *p = c->p;
    const struct op_component_spec *s = &p->comp[OP_DRA_DRIVER];
    _cleanup_free_ char *image = NULL, *plugins = NULL, *registry = NULL, *hook = NULL;
    struct r_ds ds = {0};
    json_t *ctr = NULL, *rules;
    int r;

    /* Publishing the node's ResourceSlices, reading the claims it prepares. */
    rules = json_array();
    r = rules ? 0 : -ENOMEM;
    if (r >= 0)
        r = r_push(rules, r_rule("resource.k8s.io", (const char *const[]){"resourceslices", NULL},
                                 slice_verbs));
    if (r >= 0)
        r = r_push(rules,
                   r_rule("resource.k8s.io", (const char *const[]){"resourceclaims", NULL}, GLW));
    if (r >= 0)
        r = r_push(rules, r_rule("", (const char *const[]){"nodes", NULL}, GET));
    if (r >= 0)
        r = r_push(objects, r_service_account(c, DRA_DS, NULL));
    if (r >= 0)
        r = r_rbac(c, "ClusterRole", DRA_DS, DRA_DS, NULL, TAKE_PTR(rules), objects);
    json_decref(rules);
    if (r < 0)
        return r;

    r = r_image(c, OP_DRA_DRIVER, &image);
    if (r < 0)
        return r;
    /* The kubelet is told where the sockets are: inside the pod they sit at the host's paths. */
    if (asprintf(&plugins, "%s/plugins", p->kubelet_root_dir) < 0 ||
        asprintf(&registry, "%s/plugins_registry", p->kubelet_root_dir) < 0 ||
        asprintf(&hook, "%s/toolkit/nvidia-cdi-hook", p->toolkit_install_dir) < 0)
        return -ENOMEM;
    r = r_ds_new(c, DRA_DS, json_pack("{s:s}", "app", DRA_DS), "dra-driver", DRA_DS, &ds);
    if (r < 0)
        return r;
    r = r_add_init_container(ds.pod, r_wait_container(c, "toolkit-validation", waits));
    if (r >= 0) {
        ctr = r_container("gpus", image, s->pull_policy);
        r = ctr ? 0 : -ENOMEM;
    }
    if (r >= 0)
        r = r_set(ctr, "command", driver_root_command("dra-driver"));
    if (r >= 0)
        r = r_env_field(ctr, "NODE_NAME", "spec.nodeName");
    if (r >= 0)
        r = r_env(ctr, "NVIDIA_VISIBLE_DEVICES", "all");
    if (r >= 0)
        r = r_env(ctr, "NVIDIA_DRIVER_CAPABILITIES", "all");
    if (r >= 0)
        r = r_env(ctr, "KUBELET_REGISTRAR_DIRECTORY_PATH", registry);
    if (r >= 0)
        r = r_env(ctr, "KUBELET_PLUGINS_DIRECTORY_PATH", plugins);
    if (r >= 0)
        r = r_env(ctr, "CDI_ROOT", "/var/run/cdi");
    if (r >= 0 && p->comp[OP_TOOLKIT].enabled)
        r = r_env(ctr, "NVIDIA_CDI_HOOK_PATH", hook);
    if (r >= 0)
        r = r_apply_component(ctr, s);
    /* Privileged, as NVIDIA's kubelet plugin: claims' MPS directories are mounted into
     * containers from the plugins directory (Bidirectional). */
    if (r >= 0)
        r = r_set(ctr, "securityContext", r_sc_privileged());
    if (r >= 0)
        r = r_mount(ctr, "plugins-registry", registry, false, NULL, NULL);
    if (r >= 0)
        r = r_mount(ctr, "plugins", plugins, false, "Bidirectional", NULL);
    if (r >= 0)
        r = r_mount(ctr, "cdi-root", "/var/run/cdi", false, NULL, NULL);
    if (r >= 0)
        r = r_mount(ctr, "run-nvidia-validations", OP_VALIDATIONS_DIR, true, "HostToContainer",
                    NULL);
    if (r >= 0)
        r = r_mount(ctr, "driver-install-dir", p->driver_install_dir, true, "HostToContainer",
                    NULL);
    if (r >= 0) {
        r = r_add_container(ds.pod, ctr);
        ctr = NULL;
    }
    if (r >= 0)
        r = r_hostpath_volume(ds.pod, "plugins-registry", registry, "DirectoryOrCreate");
    if (r >= 0)
        r = r_hostpath_volume(ds.pod, "plugins", plugins, "DirectoryOrCreate");
    if (r >= 0)
        r = r_hostpath_volume(ds.pod, "cdi-root", "/var/run/cdi", "DirectoryOrCreate");
    if (r >= 0)
        r = r_validations_volume(ds.pod);
    if (r >= 0)
        r = r_hostpath_volume(ds.pod, "driver-install-dir", p->driver_install_dir,
                              "DirectoryOrCreate");
    if (r >= 0)
        r = host_network(ds.pod, s);
    json_decref(ctr);
    return ds_finish(c, &ds, s, r, objects);
}

static bool exporter_reads_pods(const struct op_policy *p)
{
    return p->exporter_pod_labels || p->exporter_pod_uid;
}

/* With gpuplane's DRA driver on, the exporter maps claims to GPUs through the node's
 * ResourceSlices (--kubernetes-enable-dra). */
static bool exporter_reads_slices(const struct op_policy *p)
{
    return p->comp[OP_DRA_DRIVER].enabled;
}

/* The exporter's reads on the API server: pods for their labels and UIDs, ResourceSlices for DRA
 * claims. Named as NVIDIA's read-pods role, which holds the first. */
static json_t *exporter_read_rules(struct rctx *c)
{
    const struct op_policy *p = c->p;
    json_t *rules = json_array();
    int r = rules ? 0 : -ENOMEM;

    if (r >= 0 && (exporter_reads_pods(p) || c->identity_only))
        r = r_push(rules, r_rule("", (const char *const[]){"pods", NULL}, GLW));
    if (r >= 0 && (exporter_reads_slices(p) || c->identity_only))
        r = r_push(rules,
                   r_rule("resource.k8s.io", (const char *const[]){"resourceslices", NULL}, GLW));
    if (r < 0)
        return json_decref(rules), NULL;
    return rules;
}

static json_t *exporter_service(struct rctx *c)
{
    const struct op_policy *p = c->p;
    json_t *svc = r_object(c, "v1", "Service", EXPORTER, true, json_pack("{s:s}", "app", EXPORTER));
    json_t *spec =
        json_pack("{s:{s:s},s:[{s:s,s:i,s:i,s:s}]}", "selector", "app", EXPORTER, "ports", "name",
                  "gpu-metrics", "port", 9400, "targetPort", 9400, "protocol", "TCP");
    int r = svc && spec ? 0 : -ENOMEM;

    if (r >= 0 && p->exporter_service_type)
        r = r_set(spec, "type", json_string(p->exporter_service_type));
    if (r >= 0 && p->exporter_internal_traffic_policy)
        r = r_set(spec, "internalTrafficPolicy", json_string(p->exporter_internal_traffic_policy));
    if (r >= 0)
        r = r_set(json_object_get(svc, "metadata"), "annotations",
                  json_pack("{s:s}", "prometheus.io/scrape", "true"));
    if (r >= 0) {
        r = r_set(svc, "spec", spec);
        spec = NULL;
    }
    json_decref(spec);
    if (r < 0)
        return json_decref(svc), NULL;
    return svc;
}

int op_state_dcgm_exporter(struct rctx *c, json_t *objects)
{
    static const char *const waits[] = {"toolkit-ready", NULL};
    const struct op_policy *p = c->p;
    const struct op_component_spec *s = &p->comp[OP_DCGM_EXPORTER];
    _cleanup_free_ char *image = NULL, *pod_resources = NULL;
    struct r_ds ds = {0};
    json_t *ctr = NULL, *probe;
    int r;

    r = r_push(objects, r_service_account(c, EXPORTER, json_pack("{s:s}", "app", EXPORTER)));
    /* Pod labels and UIDs, and DRA slices, come from the API server: only then may it read. */
    if (r >= 0 && (exporter_reads_pods(p) || exporter_reads_slices(p) || c->identity_only)) {
        r = r_rbac(c, "ClusterRole", EXPORTER_READ_PODS, EXPORTER,
                   json_pack("{s:s}", "app", EXPORTER), exporter_read_rules(c), objects);
    }
    if (r >= 0)
        r = r_push(objects, exporter_service(c));
    if (r < 0)
        return r;

    r = r_image(c, OP_DCGM_EXPORTER, &image);
    if (r < 0)
        return r;
    if (asprintf(&pod_resources, "%s/pod-resources", p->kubelet_root_dir) < 0)
        return -ENOMEM;
    r = r_ds_new(c, EXPORTER, json_pack("{s:s}", "app", EXPORTER), "dcgm-exporter", EXPORTER, &ds);
    if (r < 0)
        return r;
    r = r_set(ds.pod, "automountServiceAccountToken",
              json_boolean(exporter_reads_pods(p) || exporter_reads_slices(p)));
    if (r >= 0 && p->exporter_host_pid)
        r = r_set(ds.pod, "hostPID", json_true());
    if (r >= 0)
        r = host_network(ds.pod, s);
    if (r >= 0 && json_object_size(p->exporter_annotations) > 0)
        r = r_set(ds.tmpl_meta, "annotations", json_deep_copy(p->exporter_annotations));
    if (r >= 0)
        r = r_add_init_container(ds.pod, r_wait_container(c, "toolkit-validation", waits));
    if (r >= 0) {
        ctr = r_container(EXPORTER, image, s->pull_policy);
        r = ctr ? 0 : -ENOMEM;
    }
    if (r >= 0)
        r = r_set(ctr, "command", json_pack("[s,s]", OP_GPUPLANE, "exporter"));
    if (r >= 0)
        r = r_env(ctr, "DCGM_EXPORTER_LISTEN", ":9400");
    if (r >= 0)
        r = r_env(ctr, "DCGM_EXPORTER_KUBERNETES", "true");
    if (r >= 0)
        r = r_env_field(ctr, "NODE_NAME", "spec.nodeName");
    if (r >= 0)
        r = r_env(ctr, "NVIDIA_VISIBLE_DEVICES", "all");
    if (r >= 0 && p->exporter_pod_labels)
        r = r_env(ctr, "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS", "true");
    if (r >= 0 && p->exporter_pod_uid)
        r = r_env(ctr, "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_UID", "true");
    if (r >= 0 && p->exporter_pod_label_allowlist)
        r = r_env(ctr, "DCGM_EXPORTER_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX",
                  p->exporter_pod_label_allowlist);
    if (r >= 0 && exporter_reads_slices(p))
        r = r_env(ctr, "DCGM_EXPORTER_KUBERNETES_ENABLE_DRA", "true");
    /* dcgmExporter.config.name: the metrics CSV, key dcgm-metrics.csv of that ConfigMap. */
    if (r >= 0 && s->config_name) {
        r = r_configmap_volume(ds.pod, "metrics-config", s->config_name, -1, METRICS_CSV);
        if (r >= 0)
            r = r_mount(ctr, "metrics-config", "/etc/dcgm-exporter/" METRICS_CSV, true, NULL,
                        METRICS_CSV);
        if (r >= 0)
            r = r_env(ctr, "DCGM_EXPORTER_COLLECTORS", "/etc/dcgm-exporter/" METRICS_CSV);
    }
    if (r >= 0)
        r = r_apply_component(ctr, s);
    if (r >= 0)
        r = r_set(ctr, "ports",
                  json_pack("[{s:s,s:i,s:s}]", "name", "metrics", "containerPort", 9400, "protocol",
                            "TCP"));
    probe = json_pack("{s:{s:i,s:s},s:i,s:i}", "httpGet", "port", 9400, "path", "/health",
                      "initialDelaySeconds", 5, "periodSeconds", 5);
    if (r >= 0 && !probe)
        r = -ENOMEM;
    if (r >= 0)
        r = r_set(ctr, "livenessProbe", json_deep_copy(probe));
    if (r >= 0)
        r = r_set(ctr, "readinessProbe", json_incref(probe));
    json_decref(probe);
    /* Root for the kubelet's pod-resources socket; nothing else. */
    if (r >= 0)
        r = r_set(ctr, "securityContext", r_sc_root());
    if (r >= 0)
        r = r_mount(ctr, "pod-gpu-resources", "/var/lib/kubelet/pod-resources", true, NULL, NULL);
    if (r >= 0) {
        r = r_add_container(ds.pod, ctr);
        ctr = NULL;
    }
    if (r >= 0)
        r = r_hostpath_volume(ds.pod, "pod-gpu-resources", pod_resources, NULL);
    if (r >= 0)
        r = r_validations_volume(ds.pod);
    json_decref(ctr);
    return ds_finish(c, &ds, s, r, objects);
}

/* GFD publishes a NodeFeature object unless its env turns the API off (then it writes NFD's
 * features file on the host, which takes root). */
static bool gfd_uses_node_feature_api(const struct op_policy *p)
{
    size_t i;
    json_t *e;

    json_array_foreach(p->comp[OP_GFD].env, i, e)
    {
        const char *name = json_string_value(json_object_get(e, "name"));
        const char *value = json_string_value(json_object_get(e, "value"));
        if ((strcmp(name, "GFD_USE_NODE_FEATURE_API") == 0 ||
             strcmp(name, "USE_NODE_FEATURE_API") == 0) &&
            (strcmp(value, "false") == 0 || strcmp(value, "0") == 0 ||
             strcmp(value, "False") == 0 || strcmp(value, "FALSE") == 0 ||
             strcmp(value, "f") == 0 || strcmp(value, "F") == 0))
            return false;
    }
    return true;
}

int op_state_gfd(struct rctx *c, json_t *objects)
{
    static const char *const waits[] = {"toolkit-ready", NULL};
    static const char *const nf_verbs[] = {"get", "create", "update", NULL};
    const struct op_policy *p = c->p;
    const struct op_component_spec *s = &p->comp[OP_GFD];
    bool nf = gfd_uses_node_feature_api(p);
    _cleanup_free_ char *image = NULL;
    struct r_ds ds = {0};
    json_t *ctr = NULL;
    int r;

    r = r_push(objects, r_service_account(c, GFD_SA, NULL));
    /* Its own NodeFeature object, and its pod (the NodeFeature's owners). */
    if (r >= 0 && (nf || c->identity_only)) {
        json_t *rules = json_array();
        r = rules ? 0 : -ENOMEM;
        if (r >= 0)
            r = r_push(rules, r_rule("nfd.k8s-sigs.io", (const char *const[]){"nodefeatures", NULL},
                                     nf_verbs));
        if (r >= 0)
            r = r_push(rules, r_rule("", (const char *const[]){"pods", NULL}, GET));
        if (r >= 0)
            r = r_rbac(c, "Role", GFD_SA, GFD_SA, NULL, TAKE_PTR(rules), objects);
        json_decref(rules);
    }
    if (r < 0)
        return r;
    r = r_image(c, OP_GFD, &image);
    if (r < 0)
        return r;
    r = r_ds_new(c, GFD_DS,
                 json_pack("{s:s,s:s}", "app", GFD_DS, "app.kubernetes.io/part-of", "nvidia-gpu"),
                 "gpu-feature-discovery", GFD_SA, &ds);
    if (r < 0)
        return r;
    r = r_add_init_container(ds.pod, r_wait_container(c, "toolkit-validation", waits));
    if (r >= 0) {
        ctr = r_container("gpu-feature-discovery", image, s->pull_policy);
        r = ctr ? 0 : -ENOMEM;
    }
    if (r >= 0)
        r = r_set(ctr, "command", json_pack("[s,s]", OP_GPUPLANE, "discover"));
    if (r >= 0)
        r = r_env(ctr, "GFD_SLEEP_INTERVAL", "60s");
    if (r >= 0)
        r = r_env(ctr, "GFD_FAIL_ON_INIT_ERROR", "true");
    if (r >= 0)
        r = r_env_field(ctr, "NAMESPACE", "metadata.namespace");
    if (r >= 0)
        r = r_env_field(ctr, "NODE_NAME", "spec.nodeName");
    if (r >= 0)
        r = r_env_field(ctr, "POD_NAME", "metadata.name");
    if (r >= 0)
        r = r_env(ctr, "NVIDIA_VISIBLE_DEVICES", "all");
    if (r >= 0)
        r = plugin_config(c, ds.pod, ctr);
    if (r >= 0)
        r = mig_env(c, ctr);
    if (r >= 0)
        r = r_apply_component(ctr, s);
    if (r >= 0)
        r = r_set(ctr, "securityContext", nf ? r_sc_nonroot() : r_sc_root());
    if (r >= 0)
        r = r_mount(ctr, "host-sys", "/sys", true, NULL, NULL);
    if (r >= 0 && !nf)
        r = r_mount(ctr, "output-dir", "/etc/kubernetes/node-feature-discovery/features.d", false,
                    NULL, NULL);
    if (r >= 0) {
        r = r_add_container(ds.pod, ctr);
        ctr = NULL;
    }
    if (r >= 0)
        r = r_hostpath_volume(ds.pod, "host-sys", "/sys", NULL);
    if (r >= 0 && !nf)
        r = r_hostpath_volume(ds.pod, "output-dir",
                              "/etc/kubernetes/node-feature-discovery/features.d",
                              "DirectoryOrCreate");
    if (r >= 0)
        r = r_validations_volume(ds.pod);
    if (r >= 0)
        r = host_network(ds.pod, s);
    json_decref(ctr);
    return ds_finish(c, &ds, s, r, objects);
}
