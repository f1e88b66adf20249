/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The renderer: the states and their objects in order, the DaemonSets' contract (selectors, node
 * selectors, tolerations, init containers, security), the device-plugin/DRA gating, GPU-node
 * gating, owner references, the hash annotation (stable, and changed exactly where the policy
 * changed), determinism, and the errors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base-doc.h"
#include "operator-render.h"

static const char *const ENV[] = {
    "GPUPLANE_IMAGE=ghcr.io/gpuplane/gpuplane:0.1.0",
    "DRIVER_IMAGE=nvcr.io/nvidia/driver:595.91.07",
    "CONTAINER_TOOLKIT_IMAGE=nvcr.io/nvidia/k8s/container-toolkit:v1.20.0",
    NULL,
};
static const char *const *test_env = ENV;

static const char *fake_getenv(const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; test_env && test_env[i]; i++)
        if (strncmp(test_env[i], name, n) == 0 && test_env[i][n] == '=')
            return test_env[i] + n + 1;
    return NULL;
}

static const char OWNER[] = "{\"apiVersion\": \"nvidia.com/v1\", \"kind\": \"ClusterPolicy\", "
                            "\"metadata\": {\"name\": \"cluster-policy\", \"uid\": \"u-1\"}}";

static struct op_policy *policy(const char *yaml)
{
    _cleanup_(doc_freep) struct doc *doc = NULL;
    struct op_policy *p = NULL;
    struct diag d;

    diag_init(&d);
    if (doc_load_string("t.yaml", yaml, strlen(yaml), &d, &doc) < 0 ||
        op_policy_from_json(doc_root(doc, 0), &p, &d) < 0)
        fail_msg("%s", d.msg);
    return p;
}

static void render(const struct op_policy *p, bool gpu_nodes, const json_t *owner,
                   struct op_rendered *out)
{
    struct op_render_env env = {
        .namespace_ = "gpu-operator", .getenv = fake_getenv, .gpu_nodes = gpu_nodes};
    struct diag d;

    diag_init(&d);
    if (op_render(p, &env, owner, out, &d) < 0)
        fail_msg("render: %s", d.msg);
}

static json_t *find(const struct op_state *s, const char *kind, const char *name)
{
    size_t i;
    json_t *o;

    json_array_foreach(s->objects, i, o)
    {
        if (strcmp(json_string_value(json_object_get(o, "kind")), kind) == 0 &&
            strcmp(json_string_value(json_object_get(json_object_get(o, "metadata"), "name")),
                   name) == 0)
            return o;
    }
    return NULL;
}

static const struct op_state *state(const struct op_rendered *r, const char *name)
{
    const struct op_state *s = op_rendered_state(r, name);
    if (!s)
        fail_msg("no state %s", name);
    return s;
}

/* spec.template.spec of a DaemonSet */
static json_t *pod_of(json_t *ds)
{
    return json_object_get(json_object_get(json_object_get(ds, "spec"), "template"), "spec");
}

static json_t *container(json_t *pod, const char *list, const char *name)
{
    size_t i;
    json_t *c;

    json_array_foreach(json_object_get(pod, list), i, c)
    {
        if (strcmp(json_string_value(json_object_get(c, "name")), name) == 0)
            return c;
    }
    return NULL;
}

/* The host path of a pod's volume. */
static const char *host_path(json_t *pod, const char *volume)
{
    size_t i;
    json_t *v;

    json_array_foreach(json_object_get(pod, "volumes"), i, v)
    {
        if (strcmp(json_string_value(json_object_get(v, "name")), volume) == 0)
            return json_string_value(json_object_get(json_object_get(v, "hostPath"), "path"));
    }
    return NULL;
}

static const char *env_of(json_t *ctr, const char *name)
{
    size_t i;
    json_t *e;

    json_array_foreach(json_object_get(ctr, "env"), i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "name")), name) == 0) {
            json_t *v = json_object_get(e, "value");
            return v ? json_string_value(v) : "(valueFrom)";
        }
    }
    return NULL;
}

/* The command (and args) of a container as one space-separated string. */
static void argv_of(json_t *ctr, char *buf, size_t size)
{
    static const char *const keys[] = {"command", "args"};
    size_t n = 0, i;
    json_t *a;

    buf[0] = '\0';
    for (size_t k = 0; k < 2; k++)
        json_array_foreach(json_object_get(ctr, keys[k]), i, a)
        {
            int w = snprintf(buf + n, size - n, "%s%s", n ? " " : "", json_string_value(a));
            if (w > 0 && n + (size_t)w < size)
                n += (size_t)w;
        }
}

static const char *str_at(json_t *obj, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", path);
    json_t *cur = obj;
    for (char *save = NULL, *tok = strtok_r(buf, "/", &save); tok && cur;
         tok = strtok_r(NULL, "/", &save))
        cur = json_is_array(cur) ? json_array_get(cur, (size_t)strtol(tok, NULL, 10))
                                 : json_object_get(cur, tok);
    return json_string_value(cur);
}

static const char *const ORDER[] = {
    "pre-requisites",          "state-operator-metrics",    "state-driver",
    "state-container-toolkit", "state-operator-validation", "state-device-plugin",
    "state-dra-driver",        "state-dcgm-exporter",       "gpu-feature-discovery",
};

struct want_obj {
    const char *kind, *name;
};

struct want_state {
    const char *state;
    struct want_obj objs[8];
};

/* The objects of each state of the default policy, in order. */
static const struct want_state DEFAULT_OBJECTS[] = {
    {"pre-requisites",
     {{"RuntimeClass", "nvidia"},
      {"RuntimeClass", "nvidia-cdi"},
      {"RuntimeClass", "nvidia-legacy"}}},
    {"state-operator-metrics", {{"Service", "gpu-operator"}}},
    {"state-driver",
     {{"ServiceAccount", "nvidia-driver"},
      {"ClusterRole", "nvidia-driver"},
      {"ClusterRoleBinding", "nvidia-driver"},
      {"ConfigMap", "nvidia-driver-startup-probe"},
      {"DaemonSet", "nvidia-driver-daemonset"}}},
    {"state-container-toolkit",
     {{"ServiceAccount", "nvidia-container-toolkit"},
      {"ConfigMap", "nvidia-container-toolkit-entrypoint"},
      {"DaemonSet", "nvidia-container-toolkit-daemonset"}}},
    {"state-operator-validation",
     {{"ServiceAccount", "nvidia-operator-validator"},
      {"Role", "nvidia-operator-validator"},
      {"ClusterRole", "nvidia-operator-validator"},
      {"RoleBinding", "nvidia-operator-validator"},
      {"ClusterRoleBinding", "nvidia-operator-validator"},
      {"DaemonSet", "nvidia-operator-validator"}}},
    {"state-device-plugin",
     {{"ServiceAccount", "nvidia-device-plugin"}, {"DaemonSet", "nvidia-device-plugin-daemonset"}}},
    {"state-dra-driver",
     {{"ServiceAccount", "nvidia-dra-driver-gpu-kubelet-plugin"},
      {"ClusterRole", "nvidia-dra-driver-gpu-kubelet-plugin"},
      {"ClusterRoleBinding", "nvidia-dra-driver-gpu-kubelet-plugin"},
      {"DaemonSet", "nvidia-dra-driver-gpu-kubelet-plugin"}}},
    {"state-dcgm-exporter",
     {{"ServiceAccount", "nvidia-dcgm-exporter"},
      {"Service", "nvidia-dcgm-exporter"},
      {"DaemonSet", "nvidia-dcgm-exporter"}}},
    {"gpu-feature-discovery",
     {{"ServiceAccount", "nvidia-gpu-feature-discovery"},
      {"Role", "nvidia-gpu-feature-discovery"},
      {"RoleBinding", "nvidia-gpu-feature-discovery"},
      {"DaemonSet", "gpu-feature-discovery"}}},
};

static void test_states_in_order(void **state_)
{
    (void)state_;
    _cleanup_(op_policy_freep) struct op_policy *p = policy("spec: {}\n");
    struct op_rendered r;

    render(p, true, NULL, &r);
    assert_int_equal(r.n, sizeof(ORDER) / sizeof(ORDER[0]));
    for (size_t i = 0; i < r.n; i++) {
        const struct want_state *w = &DEFAULT_OBJECTS[i];
        assert_string_equal(r.states[i].name, ORDER[i]);
        assert_string_equal(w->state, ORDER[i]);
        assert_int_equal(r.states[i].enabled, strcmp(ORDER[i], "state-dra-driver") != 0);
        size_t n = 0;
        while (n < 8 && w->objs[n].kind)
            n++;
        if (json_array_size(r.states[i].objects) != n)
            fail_msg("%s: %zu objects, want %zu", ORDER[i], json_array_size(r.states[i].objects),
                     n);
        for (size_t k = 0; k < n; k++) {
            json_t *o = json_array_get(r.states[i].objects, k);
            assert_string_equal(json_string_value(json_object_get(o, "kind")), w->objs[k].kind);
            assert_string_equal(str_at(o, "metadata/name"), w->objs[k].name);
        }
    }
    /* The disabled DRA state names its objects and nothing more. */
    json_t *ds =
        find(state(&r, "state-dra-driver"), "DaemonSet", "nvidia-dra-driver-gpu-kubelet-plugin");
    assert_non_null(ds);
    assert_int_equal(json_object_size(ds), 3);
    assert_string_equal(str_at(ds, "metadata/namespace"), "gpu-operator");
    assert_null(json_object_get(json_object_get(ds, "metadata"), "annotations"));
    op_rendered_release(&r);
}

/* What every operand DaemonSet shares. */
static void test_daemonset_contract(void **state_)
{
    (void)state_;
    static const struct {
        const char *state, *ds, *deploy, *sa;
        bool runtime_class;
    } rows[] = {
        {"state-driver", "nvidia-driver-daemonset", "driver", "nvidia-driver", false},
        {"state-container-toolkit", "nvidia-container-toolkit-daemonset", "container-toolkit",
         "nvidia-container-toolkit", false},
        {"state-operator-validation", "nvidia-operator-validator", "operator-validator",
         "nvidia-operator-validator", false},
        {"state-device-plugin", "nvidia-device-plugin-daemonset", "device-plugin",
         "nvidia-device-plugin", true},
        {"state-dcgm-exporter", "nvidia-dcgm-exporter", "dcgm-exporter", "nvidia-dcgm-exporter",
         true},
        {"gpu-feature-discovery", "gpu-feature-discovery", "gpu-feature-discovery",
         "nvidia-gpu-feature-discovery", true},
    };
    _cleanup_(op_policy_freep) struct op_policy *p = policy("spec: {}\n");
    struct op_rendered r;

    render(p, true, NULL, &r);
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        json_t *ds = find(state(&r, rows[i].state), "DaemonSet", rows[i].ds);
        char key[128];
        assert_non_null(ds);
        json_t *pod = pod_of(ds);
        snprintf(key, sizeof(key), "nvidia.com/gpu.deploy.%s", rows[i].deploy);
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(pod, "nodeSelector"), key)), "true");
        assert_int_equal(json_object_size(json_object_get(pod, "nodeSelector")), 1);
        assert_string_equal(str_at(pod, "tolerations/0/key"), "nvidia.com/gpu");
        assert_string_equal(str_at(pod, "tolerations/0/operator"), "Exists");
        assert_string_equal(str_at(pod, "tolerations/0/effect"), "NoSchedule");
        assert_string_equal(str_at(pod, "priorityClassName"), "system-node-critical");
        assert_string_equal(str_at(pod, "serviceAccountName"), rows[i].sa);
        assert_string_equal(str_at(ds, "spec/selector/matchLabels/app"), rows[i].ds);
        assert_string_equal(str_at(ds, "spec/template/metadata/labels/app"), rows[i].ds);
        assert_string_equal(str_at(ds, "metadata/labels/app"), rows[i].ds);
        assert_non_null(json_object_get(
            json_object_get(
                json_object_get(json_object_get(json_object_get(ds, "spec"), "template"),
                                "metadata"),
                "labels"),
            "app.kubernetes.io/part-of"));
        if (rows[i].runtime_class)
            assert_string_equal(str_at(pod, "runtimeClassName"), "nvidia");
        else
            assert_null(json_object_get(pod, "runtimeClassName"));
        /* Only the driver declares a strategy by default. */
        if (strcmp(rows[i].deploy, "driver") == 0)
            assert_string_equal(str_at(ds, "spec/updateStrategy/type"), "OnDelete");
        else
            assert_null(json_object_get(json_object_get(ds, "spec"), "updateStrategy"));
    }
    /* Selectors are NVIDIA's, so a switch from gpu-operator updates rather than fails. */
    json_t *v =
        find(state(&r, "state-operator-validation"), "DaemonSet", "nvidia-operator-validator");
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(json_object_get(json_object_get(v, "spec"), "selector"), "matchLabels"),
            "app.kubernetes.io/part-of")),
        "gpu-operator");
    json_t *g = find(state(&r, "gpu-feature-discovery"), "DaemonSet", "gpu-feature-discovery");
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(json_object_get(json_object_get(g, "spec"), "selector"), "matchLabels"),
            "app.kubernetes.io/part-of")),
        "nvidia-gpu");
    op_rendered_release(&r);
}

/* The per-node order: who waits for which status file, and the validator's checks. */
static void test_init_containers(void **state_)
{
    (void)state_;
    _cleanup_(op_policy_freep) struct op_policy *p = policy("spec: {}\n");
    struct op_rendered r;
    char buf[512];

    render(p, true, NULL, &r);
    json_t *tk = pod_of(find(state(&r, "state-container-toolkit"), "DaemonSet",
                             "nvidia-container-toolkit-daemonset"));
    argv_of(container(tk, "initContainers", "driver-validation"), buf, sizeof(buf));
    assert_string_equal(buf, "gpuplane validate wait --output-dir /run/nvidia/validations "
                             "driver-ready");
    assert_string_equal(str_at(container(tk, "initContainers", "driver-validation"), "image"),
                        "ghcr.io/gpuplane/gpuplane:0.1.0");

    json_t *v = pod_of(
        find(state(&r, "state-operator-validation"), "DaemonSet", "nvidia-operator-validator"));
    static const char *const checks[] = {"driver", "toolkit", "plugin"};
    assert_int_equal(json_array_size(json_object_get(v, "initContainers")), 3);
    for (size_t i = 0; i < 3; i++) {
        json_t *c = json_array_get(json_object_get(v, "initContainers"), i);
        char want[64];
        snprintf(want, sizeof(want), "gpuplane validate %s", checks[i]);
        argv_of(c, buf, sizeof(buf));
        assert_string_equal(buf, want);
        assert_string_equal(str_at(c, "volumeMounts/0/mountPropagation") ?: "", "Bidirectional");
        assert_true(
            json_is_true(json_object_get(json_object_get(c, "securityContext"), "privileged")));
    }
    json_t *main_ctr = container(v, "containers", "nvidia-operator-validator");
    assert_string_equal(str_at(main_ctr, "lifecycle/preStop/exec/command/2"), "cleanup");
    json_t *vol = json_array_get(json_object_get(v, "volumes"), 0);
    assert_string_equal(str_at(vol, "hostPath/path"), "/run/nvidia/validations");
    assert_string_equal(str_at(vol, "hostPath/type"), "DirectoryOrCreate");

    json_t *dp = pod_of(
        find(state(&r, "state-device-plugin"), "DaemonSet", "nvidia-device-plugin-daemonset"));
    argv_of(container(dp, "initContainers", "toolkit-validation"), buf, sizeof(buf));
    assert_string_equal(buf, "gpuplane validate wait --output-dir /run/nvidia/validations "
                             "toolkit-ready driver-ready");
    json_t *ex =
        pod_of(find(state(&r, "state-dcgm-exporter"), "DaemonSet", "nvidia-dcgm-exporter"));
    argv_of(container(ex, "initContainers", "toolkit-validation"), buf, sizeof(buf));
    assert_string_equal(buf, "gpuplane validate wait --output-dir /run/nvidia/validations "
                             "toolkit-ready");
    json_t *gfd =
        pod_of(find(state(&r, "gpu-feature-discovery"), "DaemonSet", "gpu-feature-discovery"));
    argv_of(container(gfd, "initContainers", "toolkit-validation"), buf, sizeof(buf));
    assert_string_equal(buf, "gpuplane validate wait --output-dir /run/nvidia/validations "
                             "toolkit-ready");
    /* The waiters need no privilege. */
    json_t *sc =
        json_object_get(container(gfd, "initContainers", "toolkit-validation"), "securityContext");
    assert_true(json_is_true(json_object_get(sc, "runAsNonRoot")));
    assert_true(json_is_true(json_object_get(sc, "readOnlyRootFilesystem")));
    op_rendered_release(&r);
}

/* The gpuplane daemons: their commands, environment and security. */
static void test_gpuplane_daemons(void **state_)
{
    (void)state_;
    _cleanup_(op_policy_freep) struct op_policy *p = policy("spec: {mig: {strategy: single}}\n");
    struct op_rendered r;
    char buf[512];

    render(p, true, NULL, &r);
    json_t *dp = pod_of(
        find(state(&r, "state-device-plugin"), "DaemonSet", "nvidia-device-plugin-daemonset"));
    json_t *c = container(dp, "containers", "nvidia-device-plugin");
    argv_of(c, buf, sizeof(buf));
    assert_non_null(strstr(buf, "exec gpuplane \"$0\" \"$@\" device-plugin"));
    assert_string_equal(env_of(c, "MIG_STRATEGY"), "single");
    assert_string_equal(env_of(c, "DEVICE_LIST_STRATEGY"), "cdi-annotations,cdi-cri");
    assert_string_equal(env_of(c, "NVIDIA_CDI_HOOK_PATH"),
                        "/usr/local/nvidia/toolkit/nvidia-cdi-hook");
    json_t *sc = json_object_get(c, "securityContext");
    assert_false(json_is_true(json_object_get(sc, "privileged")));
    assert_int_equal(json_integer_value(json_object_get(sc, "runAsUser")), 0);
    assert_true(json_is_true(json_object_get(sc, "readOnlyRootFilesystem")));
    assert_string_equal(host_path(dp, "device-plugin"), "/var/lib/kubelet/device-plugins");
    assert_null(json_object_get(dp, "affinity"));

    json_t *ex =
        pod_of(find(state(&r, "state-dcgm-exporter"), "DaemonSet", "nvidia-dcgm-exporter"));
    c = container(ex, "containers", "nvidia-dcgm-exporter");
    argv_of(c, buf, sizeof(buf));
    assert_string_equal(buf, "gpuplane exporter");
    assert_string_equal(env_of(c, "DCGM_EXPORTER_LISTEN"), ":9400");
    assert_string_equal(env_of(c, "NODE_NAME"), "(valueFrom)");
    assert_string_equal(str_at(c, "livenessProbe/httpGet/path"), "/health");
    assert_string_equal(str_at(c, "readinessProbe/httpGet/path"), "/health");
    assert_false(json_is_true(json_object_get(ex, "automountServiceAccountToken")));
    assert_null(env_of(c, "DCGM_EXPORTER_COLLECTORS"));
    assert_null(
        find(state(&r, "state-dcgm-exporter"), "ClusterRole", "nvidia-dcgm-exporter-read-pods"));
    json_t *svc = find(state(&r, "state-dcgm-exporter"), "Service", "nvidia-dcgm-exporter");
    assert_string_equal(str_at(svc, "spec/ports/0/name"), "gpu-metrics");

    json_t *gfd =
        pod_of(find(state(&r, "gpu-feature-discovery"), "DaemonSet", "gpu-feature-discovery"));
    c = container(gfd, "containers", "gpu-feature-discovery");
    argv_of(c, buf, sizeof(buf));
    assert_string_equal(buf, "gpuplane discover");
    assert_string_equal(env_of(c, "MIG_STRATEGY"), "single");
    assert_true(
        json_is_true(json_object_get(json_object_get(c, "securityContext"), "runAsNonRoot")));

    json_t *drv = pod_of(find(state(&r, "state-driver"), "DaemonSet", "nvidia-driver-daemonset"));
    c = container(drv, "containers", "nvidia-driver-ctr");
    assert_string_equal(str_at(c, "image"), "nvcr.io/nvidia/driver:595.91.07");
    assert_true(json_is_true(json_object_get(json_object_get(c, "securityContext"), "privileged")));
    assert_true(json_is_true(json_object_get(drv, "hostPID")));
    assert_null(container(drv, "initContainers", "k8s-driver-manager")); /* no image named */
    assert_null(container(drv, "containers", "nvidia-peermem-ctr"));
    json_t *tk = pod_of(find(state(&r, "state-container-toolkit"), "DaemonSet",
                             "nvidia-container-toolkit-daemonset"));
    c = container(tk, "containers", "nvidia-container-toolkit-ctr");
    assert_string_equal(env_of(c, "RUNTIME"), "containerd");
    assert_string_equal(env_of(c, "CONTAINERD_CONFIG"), "/runtime/config-dir/config.toml");
    assert_string_equal(env_of(c, "RUNTIME_DROP_IN_CONFIG_HOST_PATH"),
                        "/etc/containerd/conf.d/99-nvidia.toml");
    assert_string_equal(env_of(c, "CONTAINERD_SOCKET"), "/runtime/sock-dir/containerd.sock");
    assert_string_equal(env_of(c, "CONTAINERD_RUNTIME_CLASS"), "nvidia");
    assert_string_equal(env_of(c, "CDI_ENABLED"), "true");
    op_rendered_release(&r);
}

/* Never a device plugin and the DRA driver on one node. */
static void test_dra_gating(void **state_)
{
    (void)state_;
    _cleanup_(op_policy_freep) struct op_policy *p =
        policy("spec: {draDriver: {enabled: true, args: [--v=2]}}\n");
    struct op_rendered r;

    render(p, true, NULL, &r);
    const struct op_state *s = state(&r, "state-dra-driver");
    assert_true(s->enabled);
    json_t *ds = find(s, "DaemonSet", "nvidia-dra-driver-gpu-kubelet-plugin");
    json_t *pod = pod_of(ds);
    assert_string_equal(json_string_value(json_object_get(json_object_get(pod, "nodeSelector"),
                                                          "nvidia.com/gpu.deploy.dra-driver")),
                        "true");
    json_t *c = container(pod, "containers", "gpus");
    assert_string_equal(str_at(c, "args/0"), "--v=2");
    assert_string_equal(env_of(c, "KUBELET_PLUGINS_DIRECTORY_PATH"), "/var/lib/kubelet/plugins");
    json_t *dp = pod_of(
        find(state(&r, "state-device-plugin"), "DaemonSet", "nvidia-device-plugin-daemonset"));
    json_t *expr = json_array_get(
        json_object_get(
            json_array_get(
                json_object_get(json_object_get(json_object_get(json_object_get(dp, "affinity"),
                                                                "nodeAffinity"),
                                                "requiredDuringSchedulingIgnored"
                                                "DuringExecution"),
                                "nodeSelectorTerms"),
                0),
            "matchExpressions"),
        0);
    assert_string_equal(str_at(expr, "key"), "nvidia.com/gpu.deploy.dra-driver");
    assert_string_equal(str_at(expr, "operator"), "NotIn");
    assert_string_equal(str_at(expr, "values/0"), "true");
    /* The validator may read the slices the DRA driver publishes. */
    json_t *role =
        find(state(&r, "state-operator-validation"), "ClusterRole", "nvidia-operator-validator");
    assert_string_equal(str_at(role, "rules/1/resources/0"), "resourceslices");
    op_rendered_release(&r);
}

/* No GPU node: no DaemonSet in an enabled state, everything else still there. */
static void test_no_gpu_nodes(void **state_)
{
    (void)state_;
    _cleanup_(op_policy_freep) struct op_policy *p = policy("spec: {}\n");
    struct op_rendered r;

    render(p, false, NULL, &r);
    for (size_t i = 0; i < r.n; i++) {
        size_t k;
        json_t *o;
        json_array_foreach(r.states[i].objects, k, o)
        {
            if (r.states[i].enabled)
                assert_string_not_equal(json_string_value(json_object_get(o, "kind")), "DaemonSet");
        }
    }
    assert_non_null(
        find(state(&r, "state-device-plugin"), "ServiceAccount", "nvidia-device-plugin"));
    /* The disabled DRA state still names its DaemonSet, for deletion. */
    assert_non_null(
        find(state(&r, "state-dra-driver"), "DaemonSet", "nvidia-dra-driver-gpu-kubelet-plugin"));
    op_rendered_release(&r);
}

static void test_owner_and_hash(void **state_)
{
    (void)state_;
    _cleanup_(op_policy_freep) struct op_policy *p = policy("spec: {psa: {enabled: true}}\n");
    _cleanup_json_ json_t *owner = json_loads(OWNER, 0, NULL);
    struct op_rendered r, plain;
    char hash[24];

    render(p, true, owner, &r);
    render(p, true, NULL, &plain);
    for (size_t i = 0; i < r.n; i++) {
        if (!r.states[i].enabled)
            continue;
        size_t k;
        json_t *o;
        json_array_foreach(r.states[i].objects, k, o)
        {
            json_t *meta = json_object_get(o, "metadata");
            const char *h = json_string_value(
                json_object_get(json_object_get(meta, "annotations"), OP_HASH_ANNOTATION));
            assert_non_null(h);
            assert_string_equal(op_object_hash(o, hash), h);
            json_t *refs = json_object_get(meta, "ownerReferences");
            if (strcmp(json_string_value(json_object_get(o, "kind")), "Namespace") == 0) {
                assert_null(refs); /* never collected with the ClusterPolicy */
                continue;
            }
            assert_int_equal(json_array_size(refs), 1);
            json_t *ref = json_array_get(refs, 0);
            assert_string_equal(str_at(ref, "apiVersion"), "nvidia.com/v1");
            assert_string_equal(str_at(ref, "kind"), "ClusterPolicy");
            assert_string_equal(str_at(ref, "name"), "cluster-policy");
            assert_string_equal(str_at(ref, "uid"), "u-1");
            assert_true(json_is_true(json_object_get(ref, "controller")));
            assert_true(json_is_true(json_object_get(ref, "blockOwnerDeletion")));
            json_t *twin = json_array_get(plain.states[i].objects, k);
            assert_null(json_object_get(json_object_get(twin, "metadata"), "ownerReferences"));
        }
    }
    json_t *ns = find(state(&r, "pre-requisites"), "Namespace", "gpu-operator");
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_object_get(ns, "metadata"), "labels"),
                            "pod-security.kubernetes.io/enforce")),
                        "privileged");
    op_rendered_release(&r);
    op_rendered_release(&plain);
}

/* The hash ignores itself and status, and changes with any rendered field. */
static void test_hash_function(void **state_)
{
    (void)state_;
    char a[24], b[24];
    _cleanup_json_ json_t *o1 = json_loads(
        "{\"kind\":\"X\",\"metadata\":{\"name\":\"n\"},\"spec\":{\"a\":1,\"b\":2}}", 0, NULL);
    _cleanup_json_ json_t *o2 = json_loads(
        "{\"spec\":{\"b\":2,\"a\":1},\"metadata\":{\"name\":\"n\",\"annotations\":"
        "{\"nvidia.com/last-applied-hash\":\"123\"}},\"kind\":\"X\",\"status\":{\"x\":1}}",
        0, NULL);
    _cleanup_json_ json_t *o3 = json_loads(
        "{\"kind\":\"X\",\"metadata\":{\"name\":\"n\"},\"spec\":{\"a\":1,\"b\":3}}", 0, NULL);

    assert_string_equal(op_object_hash(o1, a), op_object_hash(o2, b));
    assert_string_not_equal(op_object_hash(o1, a), op_object_hash(o3, b));
    /* the input is left as it was */
    assert_non_null(json_object_get(o2, "status"));
    /* a known value: the hash is the same in every build */
    _cleanup_json_ json_t *empty = json_object();
    assert_string_equal(op_object_hash(empty, a), "645223143103797797"); /* FNV-1a("{}") */
}

/* Same policy, same bytes; a change re-hashes exactly the objects it touches. */
static void test_determinism_and_change(void **state_)
{
    (void)state_;
    _cleanup_(op_policy_freep) struct op_policy *p1 = policy("spec: {}\n");
    _cleanup_(op_policy_freep) struct op_policy *p2 =
        policy("spec: {devicePlugin: {env: [{name: FAIL_ON_INIT_ERROR, value: 'false'}]}}\n");
    _cleanup_json_ json_t *owner = json_loads(OWNER, 0, NULL);
    struct op_rendered a, b, c;

    render(p1, true, owner, &a);
    render(p1, true, owner, &b);
    render(p2, true, owner, &c);
    for (size_t i = 0; i < a.n; i++) {
        char *sa = json_dumps(a.states[i].objects, JSON_COMPACT);
        char *sb = json_dumps(b.states[i].objects, JSON_COMPACT);
        assert_string_equal(sa, sb);
        free(sa);
        free(sb);
        size_t k;
        json_t *o;
        json_array_foreach(a.states[i].objects, k, o)
        {
            if (!a.states[i].enabled)
                continue;
            json_t *ann1 = json_object_get(json_object_get(o, "metadata"), "annotations");
            json_t *o2 = json_array_get(c.states[i].objects, k);
            json_t *ann2 = json_object_get(json_object_get(o2, "metadata"), "annotations");
            bool changed = !json_equal(json_object_get(ann1, OP_HASH_ANNOTATION),
                                       json_object_get(ann2, OP_HASH_ANNOTATION));
            bool is_dp = strcmp(str_at(o, "metadata/name"), "nvidia-device-plugin-daemonset") == 0;
            if (changed != is_dp)
                fail_msg("%s: hash changed=%d", str_at(o, "metadata/name"), changed);
        }
    }
    json_t *dp = pod_of(
        find(state(&c, "state-device-plugin"), "DaemonSet", "nvidia-device-plugin-daemonset"));
    assert_string_equal(
        env_of(container(dp, "containers", "nvidia-device-plugin"), "FAIL_ON_INIT_ERROR"), "false");
    op_rendered_release(&a);
    op_rendered_release(&b);
    op_rendered_release(&c);
}

/* spec.daemonsets on every DaemonSet, as NVIDIA applies it. */
static void test_daemonsets_spec(void **state_)
{
    (void)state_;
    _cleanup_(op_policy_freep) struct op_policy *p =
        policy("spec:\n"
               "  daemonsets:\n"
               "    labels: {team: gpu, app: mine, app.kubernetes.io/part-of: me}\n"
               "    annotations: {note: x}\n"
               "    tolerations: [{operator: Exists}]\n"
               "    priorityClassName: gpu-critical\n"
               "    rollingUpdate: {maxUnavailable: '25%'}\n");
    _cleanup_(op_policy_freep) struct op_policy *p2 =
        policy("spec: {daemonsets: {rollingUpdate: {maxUnavailable: '2'}}}\n");
    _cleanup_(op_policy_freep) struct op_policy *p3 =
        policy("spec: {daemonsets: {updateStrategy: OnDelete}}\n");
    struct op_rendered r;

    render(p, true, NULL, &r);
    json_t *ds = find(state(&r, "gpu-feature-discovery"), "DaemonSet", "gpu-feature-discovery");
    json_t *tlabels = json_object_get(
        json_object_get(json_object_get(json_object_get(ds, "spec"), "template"), "metadata"),
        "labels");
    assert_string_equal(json_string_value(json_object_get(tlabels, "team")), "gpu");
    assert_string_equal(json_string_value(json_object_get(tlabels, "app")),
                        "gpu-feature-discovery");
    assert_string_equal(json_string_value(json_object_get(tlabels, "app.kubernetes.io/part-of")),
                        "nvidia-gpu");
    json_t *labels = json_object_get(json_object_get(ds, "metadata"), "labels");
    assert_string_equal(json_string_value(json_object_get(labels, "team")), "gpu");
    json_t *pod = pod_of(ds);
    assert_string_equal(str_at(pod, "priorityClassName"), "gpu-critical");
    assert_int_equal(json_array_size(json_object_get(pod, "tolerations")), 1);
    assert_null(str_at(pod, "tolerations/0/key"));
    assert_string_equal(str_at(ds, "spec/updateStrategy/type"), "RollingUpdate");
    assert_string_equal(str_at(ds, "spec/updateStrategy/rollingUpdate/maxUnavailable"), "25%");
    json_t *drv = find(state(&r, "state-driver"), "DaemonSet", "nvidia-driver-daemonset");
    assert_string_equal(str_at(drv, "spec/updateStrategy/type"), "OnDelete");
    op_rendered_release(&r);

    render(p2, true, NULL, &r);
    ds = find(state(&r, "gpu-feature-discovery"), "DaemonSet", "gpu-feature-discovery");
    assert_int_equal(
        json_integer_value(json_object_get(
            json_object_get(json_object_get(json_object_get(ds, "spec"), "updateStrategy"),
                            "rollingUpdate"),
            "maxUnavailable")),
        2);
    op_rendered_release(&r);

    render(p3, true, NULL, &r);
    ds = find(state(&r, "state-dcgm-exporter"), "DaemonSet", "nvidia-dcgm-exporter");
    assert_string_equal(str_at(ds, "spec/updateStrategy/type"), "OnDelete");
    op_rendered_release(&r);
}

/* Options that add or remove objects and fields. */
static void test_options(void **state_)
{
    (void)state_;
    _cleanup_(op_policy_freep) struct op_policy *p = policy(
        "spec:\n"
        "  cdi: {enabled: false}\n"
        "  operator: {runtimeClass: nvidia-x}\n"
        "  hostPaths: {kubeletRootDir: /data/kubelet, driverInstallDir: /opt/drv, rootFS: "
        "/rootfs}\n"
        "  devicePlugin: {config: {name: plugin-configs, default: ts.yaml}, imagePullSecrets: "
        "[s1]}\n"
        "  validator: {imagePullSecrets: [s1, s2]}\n"
        "  dcgmExporter:\n"
        "    config: {name: metrics}\n"
        "    enablePodUID: true\n"
        "    podLabelAllowlistRegex: [a, b]\n"
        "    service: {type: NodePort, internalTrafficPolicy: Local}\n"
        "    hostPID: true\n"
        "  gfd: {env: [{name: GFD_USE_NODE_FEATURE_API, value: 'false'}]}\n"
        "  driver:\n"
        "    rdma: {enabled: true}\n"
        "    manager: {repository: nvcr.io/nvidia/cloud-native, image: k8s-driver-manager, "
        "version: v0.12.0}\n"
        "  toolkit: {env: [{name: RUNTIME, value: crio}]}\n");
    struct op_rendered r;

    render(p, true, NULL, &r);
    const struct op_state *pre = state(&r, "pre-requisites");
    assert_int_equal(json_array_size(pre->objects), 1);
    assert_string_equal(str_at(json_array_get(pre->objects, 0), "handler"), "nvidia-x");

    json_t *dp = pod_of(
        find(state(&r, "state-device-plugin"), "DaemonSet", "nvidia-device-plugin-daemonset"));
    json_t *c = container(dp, "containers", "nvidia-device-plugin");
    assert_string_equal(env_of(c, "CONFIG_FILE"), "/available-configs/ts.yaml");
    assert_string_equal(env_of(c, "DEVICE_LIST_STRATEGY"), "envvar");
    assert_null(env_of(c, "CDI_ENABLED"));
    assert_string_equal(host_path(dp, "device-plugin"), "/data/kubelet/device-plugins");
    assert_int_equal(json_array_size(json_object_get(dp, "imagePullSecrets")), 2);
    assert_string_equal(str_at(dp, "runtimeClassName"), "nvidia-x");

    json_t *ex =
        pod_of(find(state(&r, "state-dcgm-exporter"), "DaemonSet", "nvidia-dcgm-exporter"));
    c = container(ex, "containers", "nvidia-dcgm-exporter");
    assert_string_equal(env_of(c, "DCGM_EXPORTER_COLLECTORS"),
                        "/etc/dcgm-exporter/dcgm-metrics.csv");
    assert_string_equal(env_of(c, "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_UID"), "true");
    assert_string_equal(env_of(c, "DCGM_EXPORTER_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX"), "a,b");
    assert_true(json_is_true(json_object_get(ex, "automountServiceAccountToken")));
    assert_true(json_is_true(json_object_get(ex, "hostPID")));
    assert_non_null(
        find(state(&r, "state-dcgm-exporter"), "ClusterRole", "nvidia-dcgm-exporter-read-pods"));
    assert_non_null(find(state(&r, "state-dcgm-exporter"), "ClusterRoleBinding",
                         "nvidia-dcgm-exporter-read-pods"));
    json_t *svc = find(state(&r, "state-dcgm-exporter"), "Service", "nvidia-dcgm-exporter");
    assert_string_equal(str_at(svc, "spec/type"), "NodePort");
    assert_string_equal(str_at(svc, "spec/internalTrafficPolicy"), "Local");

    json_t *gfd =
        pod_of(find(state(&r, "gpu-feature-discovery"), "DaemonSet", "gpu-feature-discovery"));
    c = container(gfd, "containers", "gpu-feature-discovery");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(c, "securityContext"), "runAsUser")), 0);
    assert_null(find(state(&r, "gpu-feature-discovery"), "Role", "nvidia-gpu-feature-discovery"));

    json_t *drv = pod_of(find(state(&r, "state-driver"), "DaemonSet", "nvidia-driver-daemonset"));
    json_t *dm = container(drv, "initContainers", "k8s-driver-manager");
    assert_string_equal(str_at(dm, "image"),
                        "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0");
    assert_string_equal(env_of(dm, "GPU_DIRECT_RDMA_ENABLED"), "true");
    assert_non_null(container(drv, "containers", "nvidia-peermem-ctr"));
    assert_string_equal(env_of(container(drv, "containers", "nvidia-driver-ctr"), "HOST_ROOT"),
                        "/rootfs");

    json_t *tk = pod_of(find(state(&r, "state-container-toolkit"), "DaemonSet",
                             "nvidia-container-toolkit-daemonset"));
    c = container(tk, "containers", "nvidia-container-toolkit-ctr");
    assert_string_equal(env_of(c, "RUNTIME"), "crio");
    assert_string_equal(env_of(c, "CRIO_CONFIG_MODE"), "hook");
    assert_string_equal(env_of(c, "CRIO_CONFIG"), "/runtime/config-dir/config.toml");
    assert_null(env_of(c, "CONTAINERD_SOCKET"));
    op_rendered_release(&r);
}

static void test_errors(void **state_)
{
    (void)state_;
    _cleanup_(op_policy_freep) struct op_policy *p = policy("spec: {}\n");
    struct op_render_env env = {.namespace_ = "Bad_NS", .getenv = fake_getenv, .gpu_nodes = true};
    struct op_rendered r = {0};
    struct diag d;

    diag_init(&d);
    assert_int_equal(op_render(p, &env, NULL, &r, &d), -EINVAL);
    assert_non_null(strstr(d.msg, "Bad_NS"));
    assert_null(r.states);

    /* No image for a gpuplane component: the error names the field. */
    static const char *const no_gp[] = {"DRIVER_IMAGE=d", "CONTAINER_TOOLKIT_IMAGE=t", NULL};
    test_env = no_gp;
    env.namespace_ = "gpu-operator";
    diag_init(&d);
    assert_int_equal(op_render(p, &env, NULL, &r, &d), -EINVAL);
    assert_non_null(strstr(d.msg, "spec.validator: no image"));

    /* A disabled component needs no image. */
    static const char *const gp_only[] = {"GPUPLANE_IMAGE=gp", NULL};
    test_env = gp_only;
    _cleanup_(op_policy_freep) struct op_policy *p2 =
        policy("spec: {driver: {enabled: false}, toolkit: {enabled: false}}\n");
    diag_init(&d);
    assert_int_equal(op_render(p2, &env, NULL, &r, &d), 0);
    assert_false(state(&r, "state-driver")->enabled);
    assert_non_null(find(state(&r, "state-driver"), "DaemonSet", "nvidia-driver-daemonset"));
    op_rendered_release(&r);
    diag_init(&d);
    assert_int_equal(op_render(p, &env, NULL, &r, &d), -EINVAL);
    assert_non_null(strstr(d.msg, "spec.driver: no image"));
    test_env = ENV;

    /* The driver manager named in part is an error, not a silent omission. */
    _cleanup_(op_policy_freep) struct op_policy *p3 =
        policy("spec: {driver: {manager: {image: k8s-driver-manager, version: v1}}}\n");
    diag_init(&d);
    assert_int_equal(op_render(p3, &env, NULL, &r, &d), -EINVAL);
    assert_non_null(strstr(d.msg, "spec.driver.manager: repository, image and version must all"));
}

/* What an enabled state owns under other settings, for the operator to delete. */
static void test_absent(void **state_)
{
    (void)state_;
    _cleanup_(op_policy_freep) struct op_policy *p = policy("spec: {}\n");
    _cleanup_(op_policy_freep) struct op_policy *p2 = policy(
        "spec: {cdi: {enabled: false}, dcgmExporter: {enablePodLabels: true, enabled: false},\n"
        "  gfd: {env: [{name: GFD_USE_NODE_FEATURE_API, value: 'false'}]}}\n");
    struct op_rendered r;

    render(p, true, NULL, &r);
    for (size_t i = 0; i < r.n; i++) {
        const struct op_state *s = &r.states[i];
        size_t want = strcmp(s->name, "state-dcgm-exporter") == 0 ? 2 : 0;
        if (json_array_size(s->absent) != want)
            fail_msg("%s: %zu absent, want %zu", s->name, json_array_size(s->absent), want);
    }
    const struct op_state *ex = state(&r, "state-dcgm-exporter");
    json_t *a = json_array_get(ex->absent, 0);
    assert_string_equal(str_at(a, "kind"), "ClusterRole");
    assert_string_equal(str_at(a, "metadata/name"), "nvidia-dcgm-exporter-read-pods");
    assert_string_equal(str_at(a, "apiVersion"), "rbac.authorization.k8s.io/v1");
    assert_null(json_object_get(json_object_get(a, "metadata"), "namespace"));
    assert_string_equal(str_at(json_array_get(ex->absent, 1), "kind"), "ClusterRoleBinding");
    op_rendered_release(&r);

    render(p2, false, NULL, &r);
    const struct op_state *pre = state(&r, "pre-requisites");
    assert_int_equal(json_array_size(pre->absent), 2);
    assert_string_equal(str_at(json_array_get(pre->absent, 0), "metadata/name"), "nvidia-cdi");
    assert_string_equal(str_at(json_array_get(pre->absent, 1), "metadata/name"), "nvidia-legacy");
    const struct op_state *gfd = state(&r, "gpu-feature-discovery");
    assert_int_equal(json_array_size(gfd->absent), 2); /* Role, RoleBinding; no DaemonSet */
    assert_string_equal(str_at(json_array_get(gfd->absent, 0), "kind"), "Role");
    assert_string_equal(str_at(json_array_get(gfd->absent, 0), "metadata/namespace"),
                        "gpu-operator");
    /* A disabled state lists everything it can own, and nothing is absent from it. */
    ex = state(&r, "state-dcgm-exporter");
    assert_false(ex->enabled);
    assert_int_equal(json_array_size(ex->absent), 0);
    assert_non_null(find(ex, "ClusterRole", "nvidia-dcgm-exporter-read-pods"));
    assert_non_null(find(ex, "DaemonSet", "nvidia-dcgm-exporter"));
    op_rendered_release(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_states_in_order),
        cmocka_unit_test(test_daemonset_contract),
        cmocka_unit_test(test_init_containers),
        cmocka_unit_test(test_gpuplane_daemons),
        cmocka_unit_test(test_dra_gating),
        cmocka_unit_test(test_no_gpu_nodes),
        cmocka_unit_test(test_owner_and_hash),
        cmocka_unit_test(test_hash_function),
        cmocka_unit_test(test_determinism_and_change),
        cmocka_unit_test(test_daemonsets_spec),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_absent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
