/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The states that run NVIDIA's own images: state-driver (the driver container) and
 * state-container-toolkit. Their DaemonSets follow gpu-operator's assets (assets/state-driver/
 * 0500_daemonset.yaml, assets/state-container-toolkit/0500_daemonset.yaml) and the transforms its
 * controller applies (controllers/object_controls.go: TransformDriver, TransformToolkit,
 * transformForRuntime) closely enough that NVIDIA's images find what they expect: the same
 * container names, commands, environment, host mounts and privileges. The scripts in the
 * ConfigMaps are gpuplane's, with the behaviour of NVIDIA's.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "operator-render-internal.h"

#define DRIVER_DS "nvidia-driver-daemonset"
#define DRIVER_SA "nvidia-driver"
#define DRIVER_PROBE_CM "nvidia-driver-startup-probe"
#define TOOLKIT_DS "nvidia-container-toolkit-daemonset"
#define TOOLKIT_SA "nvidia-container-toolkit"
#define TOOLKIT_CM "nvidia-container-toolkit-entrypoint"

/* The driver container's startup probe: the module is loaded, the driver's daemons (when they
 * report) are Ready and nvidia-smi answers; then the ready file the validator waits for. */
static const char DRIVER_STARTUP_PROBE[] =
    "#!/bin/sh\n"
    "# Ready: the nvidia module is loaded, the driver's daemons say Ready (when they report a\n"
    "# status) and nvidia-smi answers. Then .driver-ctr-ready tells the driver validation so.\n"
    "set -eu\n"
    "dir=/run/nvidia/validations\n"
    "mkdir -p \"$dir\"\n"
    "if [ ! -f /sys/module/nvidia/refcnt ]; then\n"
    "  echo \"the nvidia kernel module is not loaded\"\n"
    "  exit 1\n"
    "fi\n"
    "status=\"$dir/.driver-daemons-status\"\n"
    "if [ -f \"$status\" ] && [ \"$(cat \"$status\")\" != Ready ]; then\n"
    "  echo \"the driver's daemons are not ready: $(cat \"$status\")\"\n"
    "  exit 1\n"
    "fi\n"
    "if ! nvidia-smi; then\n"
    "  echo \"nvidia-smi failed\"\n"
    "  exit 1\n"
    "fi\n"
    "tmp=\"$dir/.driver-ctr-ready.tmp\"\n"
    "printf 'GDRCOPY_ENABLED: %s\\nGDS_ENABLED: %s\\nGPU_DIRECT_RDMA_ENABLED: %s\\n' \\\n"
    "  \"${GDRCOPY_ENABLED:-false}\" \"${GDS_ENABLED:-false}\" "
    "\"${GPU_DIRECT_RDMA_ENABLED:-false}\" "
    "> \"$tmp\"\n"
    "mv \"$tmp\" \"$dir/.driver-ctr-ready\"\n";

/* The toolkit's entrypoint: the driver's root (from driver-ready) in the environment, a pause for
 * containerd >= 1.6.9 (which signals a toolkit restarted right after it restarts the runtime),
 * then NVIDIA's installer. */
static const char TOOLKIT_ENTRYPOINT[] =
    "#!/bin/sh\n"
    "# The driver validation has written driver-ready (this pod's init container waited for it):\n"
    "# its variables say where the driver's root is.\n"
    "ready=/run/nvidia/validations/driver-ready\n"
    "until [ -f \"$ready\" ]; do\n"
    "  echo \"waiting for $ready\"\n"
    "  sleep 5\n"
    "done\n"
    "set -a\n"
    "cat \"$ready\"\n"
    ". \"$ready\"\n"
    "set +a\n"
    "# containerd 1.6.9 and later may stop a toolkit that restarts it too early after its own\n"
    "# start: give the runtime a moment.\n"
    "sleep 5\n"
    "exec nvidia-toolkit\n";

static int driver_rbac(struct rctx *c, json_t *objects)
{
    static const char *const get_list[] = {"get", "list", NULL};
    static const char *const glw[] = {"get", "list", "watch", NULL};
    static const char *const node_verbs[] = {"get", "list", "patch", "update", "watch", NULL};
    static const char *const create[] = {"create", NULL};
    static const char *const get[] = {"get", NULL};
    json_t *rules;
    int r;

    /* What NVIDIA's k8s-driver-manager does before it replaces a driver: cordon and label the
     * node, evict GPU pods (found through their claims too), find the driver DaemonSet. */
    rules = json_array();
    if (!rules)
        return -ENOMEM;
    r = r_push(rules, r_rule("", (const char *const[]){"nodes", NULL}, node_verbs));
    if (r >= 0)
        r = r_push(rules, r_rule("", (const char *const[]){"pods", NULL}, glw));
    if (r >= 0)
        r = r_push(rules, r_rule("", (const char *const[]){"pods/eviction", NULL}, create));
    if (r >= 0)
        r = r_push(rules, r_rule("resource.k8s.io", (const char *const[]){"resourceclaims", NULL},
                                 get_list));
    if (r >= 0)
        r = r_push(rules, r_rule("apps", (const char *const[]){"daemonsets", NULL}, get));
    if (r >= 0)
        r = r_push(objects, r_service_account(c, DRIVER_SA, NULL));
    if (r >= 0)
        r = r_rbac(c, "ClusterRole", DRIVER_SA, DRIVER_SA, NULL, TAKE_PTR(rules), objects);
    json_decref(rules);
    return r;
}

/* GPUDirect RDMA as driver.rdma says, for the driver manager and the driver container alike. */
static int rdma_env(const struct op_policy *p, json_t *ctr)
{
    int r = 0;

    if (p->driver_rdma_enabled) {
        r = r_env(ctr, "GPU_DIRECT_RDMA_ENABLED", "true");
        if (r >= 0 && p->driver_rdma_use_host_mofed)
            r = r_env(ctr, "USE_HOST_MOFED", "true");
    }
    return r;
}

/* k8s-driver-manager, when its image can be named (driver.manager or DRIVER_MANAGER_IMAGE). */
static int driver_manager(struct rctx *c, json_t *pod, bool *ret_added)
{
    const struct op_policy *p = c->p;
    _cleanup_free_ char *image = NULL;
    json_t *ctr;
    int r;

    *ret_added = false;
    const struct op_component_spec *m = &p->driver_manager;
    bool named = m->repository || m->image || m->version;
    /* Named in part is a mistake; not named at all (and no DRIVER_MANAGER_IMAGE) leaves the
     * driver manager out: the driver container then installs over whatever is there. */
    r = op_image_path(m, "spec.driver.manager", "DRIVER_MANAGER_IMAGE", NULL, c->env->getenv,
                      &image, named && !c->identity_only ? c->d : NULL);
    if (r == -EINVAL && (!named || c->identity_only))
        return 0;
    if (r < 0)
        return r;
    ctr = r_container("k8s-driver-manager", image, p->driver_manager.pull_policy);
    if (!ctr)
        return -ENOMEM;
    r = r_set(ctr, "command", json_pack("[s]", "driver-manager"));
    if (r >= 0)
        r = r_set(ctr, "args", json_pack("[s]", "uninstall_driver"));
    if (r >= 0)
        r = r_env_field(ctr, "NODE_NAME", "spec.nodeName");
    /* The driver containers always run with runc's view of the GPUs: none. */
    if (r >= 0)
        r = r_env(ctr, "NVIDIA_VISIBLE_DEVICES", "void");
    if (r >= 0)
        r = r_env(ctr, "ENABLE_GPU_POD_EVICTION", "true");
    if (r >= 0)
        r = r_env(ctr, "ENABLE_AUTO_DRAIN", "false");
    if (r >= 0)
        r = r_env(ctr, "DRAIN_USE_FORCE", "false");
    if (r >= 0)
        r = r_env(ctr, "DRAIN_POD_SELECTOR_LABEL", "");
    if (r >= 0)
        r = r_env(ctr, "DRAIN_TIMEOUT_SECONDS", "0s");
    if (r >= 0)
        r = r_env(ctr, "DRAIN_DELETE_EMPTYDIR_DATA", "false");
    if (r >= 0)
        r = r_env_field(ctr, "OPERATOR_NAMESPACE", "metadata.namespace");
    if (r >= 0)
        r = rdma_env(p, ctr);
    if (r >= 0)
        r = r_env_list(ctr, p->driver_manager.env);
    if (r >= 0 && p->comp[OP_DRIVER].resources)
        r = r_set(ctr, "resources", json_deep_copy(p->comp[OP_DRIVER].resources));
    if (r >= 0)
        r = r_set(ctr, "securityContext", json_pack("{s:b}", "privileged", 1));
    if (r >= 0)
        r = r_mount(ctr, "run-nvidia", "/run/nvidia", false, "Bidirectional", NULL);
    if (r >= 0)
        r = r_mount(ctr, "host-root", "/host", true, "HostToContainer", NULL);
    if (r >= 0)
        r = r_mount(ctr, "host-sys", "/sys", false, NULL, NULL);
    if (r >= 0)
        r = r_mount(ctr, "run-mellanox-drivers", "/run/mellanox/drivers", false, "HostToContainer",
                    NULL);
    if (r < 0) {
        json_decref(ctr);
        return r;
    }
    r = r_add_init_container(pod, ctr);
    if (r >= 0)
        r = r_pull_secrets(pod, p->driver_manager.pull_secrets);
    *ret_added = r >= 0;
    return r;
}

static json_t *driver_container(struct rctx *c, const char *image)
{
    const struct op_policy *p = c->p;
    const struct op_component_spec *s = &p->comp[OP_DRIVER];
    json_t *ctr = r_container("nvidia-driver-ctr", image, s->pull_policy);
    int r;

    if (!ctr)
        return NULL;
    r = r_set(ctr, "command", json_pack("[s]", "nvidia-driver"));
    if (r >= 0)
        r = r_set(ctr, "args", json_pack("[s]", "init"));
    if (r >= 0)
        r = r_env_field(ctr, "NODE_NAME", "spec.nodeName");
    if (r >= 0)
        r = r_env_field(ctr, "NODE_IP", "status.hostIP");
    if (r >= 0)
        r = r_env(ctr, "KERNEL_MODULE_TYPE", p->driver_kernel_module_type);
    /* Older driver images only know the boolean. */
    if (r >= 0 && strcmp(p->driver_kernel_module_type, "open") == 0)
        r = r_env(ctr, "OPEN_KERNEL_MODULES_ENABLED", "true");
    if (r >= 0)
        r = rdma_env(p, ctr);
    if (r >= 0)
        r = r_apply_component(ctr, s);
    if (r >= 0)
        r = r_set(ctr, "securityContext", r_sc_privileged());
    struct {
        const char *vol, *path;
        bool ro;
        const char *prop, *sub;
    } mounts[] = {
        {"run-nvidia", "/run/nvidia", false, "Bidirectional", NULL},
        {"run-nvidia-fabricmanager", "/run/nvidia-fabricmanager", false, NULL, NULL},
        {"run-nvidia-topologyd", "/run/nvidia-topologyd", false, NULL, NULL},
        {"var-log", "/var/log", false, NULL, NULL},
        {"dev-log", "/dev/log", false, NULL, NULL},
        {"host-os-release", "/host-etc/os-release", true, NULL, NULL},
        {"mlnx-ofed-usr-src", "/run/mellanox/drivers/usr/src", false, "HostToContainer", NULL},
        {"run-mellanox-drivers", "/run/mellanox/drivers", false, "HostToContainer", NULL},
        {"host-sys-devices-system", "/sys/devices/system", false, NULL, NULL},
        {"firmware-search-path", "/sys/module/firmware_class/parameters/path", false, NULL, NULL},
        {"nv-firmware", "/lib/firmware", false, NULL, NULL},
        {"driver-startup-probe-script", "/usr/local/bin/startup-probe.sh", false, NULL,
         "startup-probe.sh"},
    };
    for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(mounts); i++)
        r = r_mount(ctr, mounts[i].vol, mounts[i].path, mounts[i].ro, mounts[i].prop,
                    mounts[i].sub);
    if (r >= 0)
        r = r_set(ctr, "startupProbe",
                  json_pack("{s:{s:[s,s]},s:i,s:i,s:i,s:i,s:i}", "exec", "command", "sh",
                            "/usr/local/bin/startup-probe.sh", "initialDelaySeconds", 60,
                            "failureThreshold", 120, "successThreshold", 1, "periodSeconds", 10,
                            "timeoutSeconds", 60));
    if (r >= 0)
        r = r_set(ctr, "lifecycle",
                  json_pack("{s:{s:{s:[s,s,s]}}}", "preStop", "exec", "command", "/bin/sh", "-c",
                            "rm -f /run/nvidia/validations/.driver-ctr-ready "
                            "/run/nvidia/validations/.driver-daemons-status"));
    if (r < 0)
        return json_decref(ctr), NULL;
    return ctr;
}

/* nvidia-peermem-ctr: with GPUDirect RDMA, reloads nvidia_peermem when MOFED is reinstalled. */
static json_t *peermem_container(struct rctx *c, const char *image)
{
    const struct op_policy *p = c->p;
    json_t *ctr = r_container("nvidia-peermem-ctr", image, p->comp[OP_DRIVER].pull_policy);
    json_t *probe = json_pack("{s:{s:[s,s,s]},s:i,s:i,s:i,s:i,s:i}", "exec", "command", "sh", "-c",
                              "nvidia-driver probe_nvidia_peermem", "initialDelaySeconds", 10,
                              "failureThreshold", 120, "successThreshold", 1, "periodSeconds", 10,
                              "timeoutSeconds", 10);
    int r = ctr && probe ? 0 : -ENOMEM;

    if (r >= 0)
        r = r_set(ctr, "command", json_pack("[s]", "nvidia-driver"));
    if (r >= 0)
        r = r_set(ctr, "args", json_pack("[s]", "reload_nvidia_peermem"));
    if (r >= 0 && p->driver_rdma_use_host_mofed)
        r = r_env(ctr, "USE_HOST_MOFED", "true");
    if (r >= 0 && p->comp[OP_DRIVER].resources)
        r = r_set(ctr, "resources", json_deep_copy(p->comp[OP_DRIVER].resources));
    if (r >= 0)
        r = r_set(ctr, "securityContext", r_sc_privileged());
    if (r >= 0)
        r = r_mount(ctr, "run-nvidia", "/run/nvidia", false, "Bidirectional", NULL);
    if (r >= 0)
        r = r_mount(ctr, "var-log", "/var/log", false, NULL, NULL);
    if (r >= 0)
        r = r_mount(ctr, "dev-log", "/dev/log", true, NULL, NULL);
    if (r >= 0)
        r = r_mount(ctr, "run-mellanox-drivers", "/run/mellanox/drivers", false, "HostToContainer",
                    NULL);
    if (r >= 0)
        r = r_set(ctr, "startupProbe", json_incref(probe));
    if (r >= 0)
        r = r_set(ctr, "livenessProbe",
                  json_pack("{s:{s:[s,s,s]},s:i,s:i,s:i,s:i,s:i}", "exec", "command", "sh", "-c",
                            "nvidia-driver probe_nvidia_peermem", "periodSeconds", 30,
                            "initialDelaySeconds", 30, "failureThreshold", 1, "successThreshold", 1,
                            "timeoutSeconds", 10));
    json_decref(probe);
    if (r < 0)
        return json_decref(ctr), NULL;
    return ctr;
}

int op_state_driver(struct rctx *c, json_t *objects)
{
    const struct op_policy *p = c->p;
    _cleanup_free_ char *image = NULL, *firmware = NULL;
    struct r_ds ds = {0};
    json_t *cm, *labels;
    bool manager;
    int r;

    r = driver_rbac(c, objects);
    if (r < 0)
        return r;
    labels =
        json_pack("{s:s,s:s}", "app", DRIVER_DS, "app.kubernetes.io/component", "nvidia-driver");
    cm = r_object(c, "v1", "ConfigMap", DRIVER_PROBE_CM, true, labels);
    if (cm && r_set(cm, "data", json_pack("{s:s}", "startup-probe.sh", DRIVER_STARTUP_PROBE)) < 0)
        cm = (json_decref(cm), NULL);
    r = r_push(objects, cm);
    if (r < 0)
        return r;

    r = r_image(c, OP_DRIVER, &image);
    if (r < 0)
        return r;
    r = r_ds_new(c, DRIVER_DS, json_pack("{s:s}", "app", DRIVER_DS), "driver", DRIVER_SA, &ds);
    if (r < 0)
        return r;
    /* The validator finds the driver DaemonSet by this label. */
    r = r_set(json_object_get(json_object_get(ds.ds, "metadata"), "labels"),
              "app.kubernetes.io/component", json_string("nvidia-driver"));
    if (r >= 0)
        r = r_set(json_object_get(ds.tmpl_meta, "labels"), "app.kubernetes.io/component",
                  json_string("nvidia-driver"));
    if (r >= 0)
        r = r_set(
            ds.tmpl_meta, "annotations",
            json_pack("{s:s}", "kubectl.kubernetes.io/default-container", "nvidia-driver-ctr"));
    /* One driver pod per node, whichever DaemonSet it comes from. */
    if (r >= 0)
        r = r_set(ds.pod, "affinity",
                  json_pack("{s:{s:[{s:{s:[{s:s,s:s,s:[s]}]},s:s}]}}", "podAntiAffinity",
                            "requiredDuringSchedulingIgnoredDuringExecution", "labelSelector",
                            "matchExpressions", "key", "app.kubernetes.io/component", "operator",
                            "In", "values", "nvidia-driver", "topologyKey",
                            "kubernetes.io/hostname"));
    if (r >= 0)
        r = r_set(ds.pod, "hostPID", json_true());
    if (r >= 0 && p->comp[OP_DRIVER].host_network) {
        r = r_set(ds.pod, "hostNetwork", json_true());
        if (r >= 0)
            r = r_set(ds.pod, "dnsPolicy", json_string("ClusterFirstWithHostNet"));
    }
    if (r >= 0)
        r = driver_manager(c, ds.pod, &manager);
    if (r >= 0)
        r = r_add_container(ds.pod, driver_container(c, image));
    if (r >= 0 && p->driver_rdma_enabled)
        r = r_add_container(ds.pod, peermem_container(c, image));
    if (r >= 0)
        r = r_pull_secrets(ds.pod, p->comp[OP_DRIVER].pull_secrets);
    if (r >= 0 && asprintf(&firmware, "%s/lib/firmware", p->driver_install_dir) < 0) {
        firmware = NULL;
        r = -ENOMEM;
    }
    struct {
        const char *name, *path, *type;
    } vols[] = {
        {"run-nvidia", "/run/nvidia", "DirectoryOrCreate"},
        {"var-log", "/var/log", NULL},
        {"dev-log", "/dev/log", NULL},
        {"host-os-release", "/etc/os-release", NULL},
        {"run-nvidia-fabricmanager", "/run/nvidia-fabricmanager", "DirectoryOrCreate"},
        {"run-nvidia-topologyd", "/run/nvidia-topologyd", "DirectoryOrCreate"},
        {"mlnx-ofed-usr-src",
         p->driver_rdma_enabled && p->driver_rdma_use_host_mofed ? "/usr/src"
                                                                 : "/run/mellanox/drivers/usr/src",
         "DirectoryOrCreate"},
        {"run-mellanox-drivers", "/run/mellanox/drivers", "DirectoryOrCreate"},
        {"run-nvidia-validations", OP_VALIDATIONS_DIR, "DirectoryOrCreate"},
        {"host-root", p->host_root, NULL},
        {"host-sys", "/sys", "Directory"},
        {"firmware-search-path", "/sys/module/firmware_class/parameters/path", NULL},
        {"host-sys-devices-system", "/sys/devices/system", "Directory"},
        {"nv-firmware", firmware ? firmware : "", "DirectoryOrCreate"},
    };
    for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(vols); i++)
        r = r_hostpath_volume(ds.pod, vols[i].name, vols[i].path, vols[i].type);
    if (r >= 0)
        r = r_configmap_volume(ds.pod, "driver-startup-probe-script", DRIVER_PROBE_CM, 0755, NULL);
    if (r >= 0)
        r = r_host_root_env(c, ds.pod);
    return r_ds_finish(c, &ds, r, false, objects);
}

/* The runtime the toolkit configures: RUNTIME in toolkit.env (containerd, docker, crio), else
 * containerd. NVIDIA's operator detects it from the nodes; gpuplane's renderer is pure. */
static const char *toolkit_runtime(const struct op_policy *p)
{
    size_t i;
    json_t *e;

    json_array_foreach(p->comp[OP_TOOLKIT].env, i, e)
    {
        const char *v = json_string_value(json_object_get(e, "value"));
        if (strcmp(json_string_value(json_object_get(e, "name")), "RUNTIME") == 0 &&
            (strcmp(v, "docker") == 0 || strcmp(v, "crio") == 0))
            return v;
    }
    return "containerd";
}

/* dirname into buf ("/etc/containerd/config.toml" -> "/etc/containerd"). */
static const char *dir_of(const char *path, char *buf, size_t size)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 0;

    snprintf(buf, size, "%.*s", (int)(n ? n : 1), n ? path : "/");
    return buf;
}

static const char *base_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Mounts the runtime's config (top level and drop-in) and socket directories, and tells the
 * toolkit where they are inside the container (NVIDIA's transformForRuntime). */
static int toolkit_runtime_mounts(struct rctx *c, json_t *pod, json_t *ctr, const char *runtime)
{
    const char *top, *dropin = NULL, *sock = NULL, *v, *cfg_env, *sock_env = NULL;
    char vol[64], dir[4096], value[4200];
    int r;

    if (c->p->cdi_nri_plugin) {
        /* The NRI plugin configures nothing: only the NRI socket is needed. */
        const char *nri = r_env_get(ctr, "NRI_SOCKET");
        if (!nri || !*nri || nri[0] != '/')
            nri = "/var/run/nri/nri.sock";
        snprintf(value, sizeof(value), "/runtime/nri-sock-dir/%s", base_of(nri));
        r = r_hostpath_volume(pod, "nri-socket", dir_of(nri, dir, sizeof(dir)),
                              "DirectoryOrCreate");
        if (r >= 0)
            r = r_env(ctr, "NRI_SOCKET", value);
        if (r >= 0)
            r = r_mount(ctr, "nri-socket", "/runtime/nri-sock-dir/", false, NULL, NULL);
        return r;
    }
    if (strcmp(runtime, "docker") == 0) {
        cfg_env = "DOCKER_CONFIG";
        top = "/etc/docker/daemon.json";
        sock_env = "DOCKER_SOCKET";
        sock = "/var/run/docker.sock";
    } else if (strcmp(runtime, "crio") == 0) {
        cfg_env = "CRIO_CONFIG";
        top = "/etc/crio/config.toml";
        dropin = "/etc/crio/crio.conf.d/99-nvidia.conf";
    } else {
        cfg_env = "CONTAINERD_CONFIG";
        top = "/etc/containerd/config.toml";
        dropin = "/etc/containerd/conf.d/99-nvidia.toml";
        sock_env = "CONTAINERD_SOCKET";
        sock = "/run/containerd/containerd.sock";
        r = r_env(ctr, "CONTAINERD_RUNTIME_CLASS", c->p->runtime_class);
        if (r < 0)
            return r;
    }
    /* A path the user set in toolkit.env is the host's; it must be absolute. */
    if ((v = r_env_get(ctr, cfg_env)) && op_valid_host_path(v))
        top = v;
    else if ((v = r_env_get(ctr, "RUNTIME_CONFIG")) && op_valid_host_path(v))
        top = v;
    if (dropin && (v = r_env_get(ctr, "RUNTIME_DROP_IN_CONFIG")) && op_valid_host_path(v))
        dropin = v;
    if (sock_env && (v = r_env_get(ctr, sock_env)) && op_valid_host_path(v))
        sock = v;

    /* Copies: r_env() below may replace the strings these point into. */
    char top_s[4096], dropin_s[4096], sock_s[4096];
    snprintf(top_s, sizeof(top_s), "%s", top);
    snprintf(dropin_s, sizeof(dropin_s), "%s", dropin ? dropin : "");
    snprintf(sock_s, sizeof(sock_s), "%s", sock ? sock : "");

    snprintf(value, sizeof(value), "/runtime/config-dir/%s", base_of(top_s));
    snprintf(vol, sizeof(vol), "%s-config", runtime);
    r = r_env(ctr, "RUNTIME_CONFIG", value);
    if (r >= 0)
        r = r_env(ctr, cfg_env, value);
    if (r >= 0)
        r = r_mount(ctr, vol, "/runtime/config-dir/", false, NULL, NULL);
    if (r >= 0)
        r = r_hostpath_volume(pod, vol, dir_of(top_s, dir, sizeof(dir)), "DirectoryOrCreate");
    if (r >= 0 && dropin) {
        snprintf(value, sizeof(value), "/runtime/config-dir.d/%s", base_of(dropin_s));
        snprintf(vol, sizeof(vol), "%s-drop-in-config", runtime);
        r = r_env(ctr, "RUNTIME_DROP_IN_CONFIG", value);
        if (r >= 0)
            r = r_env(ctr, "RUNTIME_DROP_IN_CONFIG_HOST_PATH", dropin_s);
        if (r >= 0)
            r = r_mount(ctr, vol, "/runtime/config-dir.d/", false, NULL, NULL);
        if (r >= 0)
            r = r_hostpath_volume(pod, vol, dir_of(dropin_s, dir, sizeof(dir)),
                                  "DirectoryOrCreate");
    }
    if (r >= 0 && sock) {
        snprintf(value, sizeof(value), "/runtime/sock-dir/%s", base_of(sock_s));
        snprintf(vol, sizeof(vol), "%s-socket", runtime);
        r = r_env(ctr, "RUNTIME_SOCKET", value);
        if (r >= 0)
            r = r_env(ctr, sock_env, value);
        if (r >= 0)
            r = r_mount(ctr, vol, "/runtime/sock-dir/", false, NULL, NULL);
        if (r >= 0)
            r = r_hostpath_volume(pod, vol, dir_of(sock_s, dir, sizeof(dir)), NULL);
    }
    return r;
}

static json_t *toolkit_container(struct rctx *c, const char *image, const char **ret_runtime)
{
    const struct op_policy *p = c->p;
    const struct op_component_spec *s = &p->comp[OP_TOOLKIT];
    json_t *ctr = r_container("nvidia-container-toolkit-ctr", image, s->pull_policy);
    int r = ctr ? 0 : -ENOMEM;

    if (r >= 0)
        r = r_set(ctr, "command", json_pack("[s,s]", "/bin/sh", "-c"));
    if (r >= 0)
        r = r_set(ctr, "args", json_pack("[s]", "/bin/entrypoint.sh"));
    if (r >= 0)
        r = r_env(ctr, "ROOT", p->toolkit_install_dir);
    if (r >= 0)
        r = r_env(ctr, "NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND",
                  "management.nvidia.com/gpu");
    if (r >= 0)
        r = r_env(ctr, "NVIDIA_VISIBLE_DEVICES", "void");
    if (r >= 0)
        r = r_env(ctr, "TOOLKIT_PID_FILE", "/run/nvidia/toolkit/toolkit.pid");
    if (r >= 0)
        r = r_env_field(ctr, "NRI_NAMESPACE", "metadata.namespace");
    /* With CDI the runtimes inject GPUs themselves; "nvidia" is only the management runtime
     * class, not the default runtime. */
    if (r >= 0 && p->cdi_enabled) {
        r = r_env(ctr, "CDI_ENABLED", "true");
        if (r >= 0)
            r = r_env(ctr, "NVIDIA_RUNTIME_SET_AS_DEFAULT", "false");
        if (r >= 0)
            r = r_env(ctr, "NVIDIA_CONTAINER_RUNTIME_MODE", "cdi");
        if (r >= 0)
            r = r_env(ctr, "CRIO_CONFIG_MODE", "config");
        if (r >= 0 && p->cdi_nri_plugin)
            r = r_env(ctr, "ENABLE_NRI_PLUGIN", "true");
    } else if (r >= 0 && strcmp(toolkit_runtime(p), "crio") == 0) {
        /* Without CDI, cri-o keeps NVIDIA's OCI prestart hook (toolkit.env may say otherwise). */
        r = r_env(ctr, "CRIO_CONFIG_MODE", "hook");
    }
    if (r >= 0 && s->resources && json_object_size(s->resources) > 0)
        r = r_set(ctr, "resources", json_deep_copy(s->resources));
    if (r >= 0)
        r = r_env_list(ctr, s->env);
    *ret_runtime = toolkit_runtime(p);
    if (r >= 0)
        r = r_env(ctr, "RUNTIME", *ret_runtime);
    if (r >= 0)
        r = r_set(ctr, "securityContext", r_sc_privileged());
    if (r >= 0)
        r = r_mount(ctr, "nvidia-container-toolkit-entrypoint", "/bin/entrypoint.sh", true, NULL,
                    "entrypoint.sh");
    if (r >= 0)
        r = r_mount(ctr, "toolkit-root", "/run/nvidia/toolkit", false, NULL, NULL);
    if (r >= 0)
        r = r_mount(ctr, "run-nvidia-validations", OP_VALIDATIONS_DIR, false, NULL, NULL);
    if (r >= 0)
        r = r_mount(ctr, "toolkit-install-dir", p->toolkit_install_dir, false, NULL, NULL);
    if (r >= 0)
        r = r_mount(ctr, "crio-hooks", "/usr/share/containers/oci/hooks.d", false, NULL, NULL);
    if (r >= 0)
        r = r_mount(ctr, "driver-install-dir", "/driver-root", false, "HostToContainer", NULL);
    if (r >= 0)
        r = r_mount(ctr, "host-root", "/host", true, "HostToContainer", NULL);
    if (r >= 0)
        r = r_mount(ctr, "cdi-root", "/var/run/cdi", false, NULL, NULL);
    if (r < 0)
        return json_decref(ctr), NULL;
    return ctr;
}

int op_state_toolkit(struct rctx *c, json_t *objects)
{
    const struct op_policy *p = c->p;
    static const char *const wait_files[] = {"driver-ready", NULL};
    _cleanup_free_ char *image = NULL;
    struct r_ds ds = {0};
    const char *runtime = toolkit_runtime(p);
    json_t *cm, *ctr;
    int r;

    r = r_push(objects, r_service_account(c, TOOLKIT_SA, NULL));
    if (r < 0)
        return r;
    cm = r_object(c, "v1", "ConfigMap", TOOLKIT_CM, true, json_pack("{s:s}", "app", TOOLKIT_DS));
    if (cm && r_set(cm, "data", json_pack("{s:s}", "entrypoint.sh", TOOLKIT_ENTRYPOINT)) < 0)
        cm = (json_decref(cm), NULL);
    r = r_push(objects, cm);
    if (r < 0)
        return r;
    r = r_image(c, OP_TOOLKIT, &image);
    if (r < 0)
        return r;
    r = r_ds_new(c, TOOLKIT_DS, json_pack("{s:s}", "app", TOOLKIT_DS), "container-toolkit",
                 TOOLKIT_SA, &ds);
    if (r < 0)
        return r;
    r = r_set(ds.pod, "hostPID", json_true());
    if (r >= 0 && p->comp[OP_TOOLKIT].host_network) {
        r = r_set(ds.pod, "hostNetwork", json_true());
        if (r >= 0)
            r = r_set(ds.pod, "dnsPolicy", json_string("ClusterFirstWithHostNet"));
    }
    if (r >= 0)
        r = r_add_init_container(ds.pod, r_wait_container(c, "driver-validation", wait_files));
    ctr = r >= 0 ? toolkit_container(c, image, &runtime) : NULL;
    if (r >= 0 && !ctr)
        r = -ENOMEM;
    /* The pod holds the container from here on; ctr stays a borrowed pointer into it. */
    if (r >= 0)
        r = r_add_container(ds.pod, json_incref(ctr));
    json_decref(ctr);
    if (r >= 0)
        r = r_pull_secrets(ds.pod, p->comp[OP_TOOLKIT].pull_secrets);
    if (r >= 0)
        r = r_pull_secrets(ds.pod, p->comp[OP_VALIDATOR].pull_secrets);
    struct {
        const char *name, *path, *type;
    } vols[] = {
        {"toolkit-root", "/run/nvidia/toolkit", "DirectoryOrCreate"},
        {"run-nvidia-validations", OP_VALIDATIONS_DIR, "DirectoryOrCreate"},
        {"driver-install-dir", p->driver_install_dir, "DirectoryOrCreate"},
        {"host-root", p->host_root, NULL},
        {"toolkit-install-dir", p->toolkit_install_dir, NULL},
        {"crio-hooks",
         strcmp(runtime, "crio") == 0 ? "/usr/share/containers/oci/hooks.d"
                                      : "/run/containers/oci/hooks.d",
         NULL},
        {"cdi-root", "/var/run/cdi", "DirectoryOrCreate"},
    };
    if (r >= 0)
        r = r_configmap_volume(ds.pod, "nvidia-container-toolkit-entrypoint", TOOLKIT_CM, 0700,
                               NULL);
    for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(vols); i++)
        r = r_hostpath_volume(ds.pod, vols[i].name, vols[i].path, vols[i].type);
    if (r >= 0)
        r = toolkit_runtime_mounts(c, ds.pod, ctr, runtime);
    if (r >= 0)
        r = r_host_root_env(c, ds.pod);
    return r_ds_finish(c, &ds, r, false, objects);
}
