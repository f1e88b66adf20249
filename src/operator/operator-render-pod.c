/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The renderer's builders: object metadata, RBAC, containers, volumes, and the DaemonSet shape
 * every operand shares (NVIDIA's: app=<name> selector, nvidia.com/gpu.deploy.<x>=true node
 * selector, the nvidia.com/gpu toleration, system-node-critical) with the ClusterPolicy's
 * spec.daemonsets applied on top, as gpu-operator's applyCommonDaemonsetConfig and
 * applyCommonDaemonsetMetadata do.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "operator-render-internal.h"

int r_push(json_t *objects, json_t *obj)
{
    if (!obj)
        return -ENOMEM;
    return json_array_append_new(objects, obj) < 0 ? -ENOMEM : 0;
}

int r_set(json_t *obj, const char *key, json_t *value)
{
    if (!value)
        return -ENOMEM;
    return json_object_set_new(obj, key, value) < 0 ? -ENOMEM : 0;
}

json_t *r_object(const struct rctx *c, const char *api_version, const char *kind, const char *name,
                 bool namespaced, json_t *labels)
{
    json_t *meta = json_pack("{s:s}", "name", name);
    json_t *obj;

    if (meta && namespaced && r_set(meta, "namespace", json_string(c->ns)) < 0)
        meta = (json_decref(meta), NULL);
    if (meta && labels && r_set(meta, "labels", json_incref(labels)) < 0)
        meta = (json_decref(meta), NULL);
    json_decref(labels);
    if (!meta)
        return NULL;
    obj = json_pack("{s:s,s:s,s:o}", "apiVersion", api_version, "kind", kind, "metadata", meta);
    return obj;
}

json_t *r_service_account(const struct rctx *c, const char *name, json_t *labels)
{
    return r_object(c, "v1", "ServiceAccount", name, true, labels);
}

json_t *r_role(const struct rctx *c, const char *kind, const char *name, json_t *rules)
{
    json_t *obj =
        r_object(c, "rbac.authorization.k8s.io/v1", kind, name, strcmp(kind, "Role") == 0, NULL);
    if (!rules || !obj || r_set(obj, "rules", json_incref(rules)) < 0)
        obj = (json_decref(obj), NULL);
    json_decref(rules);
    return obj;
}

json_t *r_binding(const struct rctx *c, const char *kind, const char *name, const char *role,
                  const char *sa)
{
    bool cluster = strcmp(kind, "ClusterRoleBinding") == 0;
    json_t *obj = r_object(c, "rbac.authorization.k8s.io/v1", kind, name, !cluster, NULL);

    if (obj && r_set(obj, "roleRef",
                     json_pack("{s:s,s:s,s:s}", "apiGroup", "rbac.authorization.k8s.io", "kind",
                               cluster ? "ClusterRole" : "Role", "name", role)) < 0)
        obj = (json_decref(obj), NULL);
    if (obj && r_set(obj, "subjects",
                     json_pack("[{s:s,s:s,s:s}]", "kind", "ServiceAccount", "name", sa, "namespace",
                               c->ns)) < 0)
        obj = (json_decref(obj), NULL);
    return obj;
}

int r_rbac(const struct rctx *c, const char *role_kind, const char *name, const char *sa,
           json_t *labels, json_t *rules, json_t *objects)
{
    bool cluster = strcmp(role_kind, "ClusterRole") == 0;
    json_t *role = r_role(c, role_kind, name, rules);
    json_t *binding = r_binding(c, cluster ? "ClusterRoleBinding" : "RoleBinding", name, name, sa);
    int r = 0;

    if (labels && role)
        r = r_set(json_object_get(role, "metadata"), "labels", json_deep_copy(labels));
    if (labels && binding && r >= 0)
        r = r_set(json_object_get(binding, "metadata"), "labels", json_deep_copy(labels));
    json_decref(labels);
    if (r >= 0)
        r = r_push(objects, role);
    else
        json_decref(role);
    if (r >= 0)
        r = r_push(objects, binding);
    else
        json_decref(binding);
    return r;
}

static json_t *string_list(const char *const *items)
{
    json_t *a = json_array();

    for (size_t i = 0; a && items[i]; i++)
        if (json_array_append_new(a, json_string(items[i])) < 0)
            a = (json_decref(a), NULL);
    return a;
}

json_t *r_rule(const char *group, const char *const *resources, const char *const *verbs)
{
    json_t *g = json_pack("[s]", group);
    json_t *res = string_list(resources);
    json_t *v = string_list(verbs);

    if (!g || !res || !v) {
        json_decref(g);
        json_decref(res);
        json_decref(v);
        return NULL;
    }
    return json_pack("{s:o,s:o,s:o}", "apiGroups", g, "resources", res, "verbs", v);
}

int r_image(struct rctx *c, enum op_component comp, char **ret)
{
    int r = op_component_image(c->p, comp, c->env->getenv, c->env->os_tag, ret,
                               c->identity_only ? NULL : c->d);
    if (r == -EINVAL && c->identity_only) {
        *ret = strdup("");
        return *ret ? 0 : -ENOMEM;
    }
    return r;
}

json_t *r_container(const char *name, const char *image, enum op_pull_policy pull)
{
    return json_pack("{s:s,s:s,s:s}", "name", name, "image", image, "imagePullPolicy",
                     op_pull_policy_name(pull));
}

static json_t *env_array(json_t *ctr)
{
    json_t *env = json_object_get(ctr, "env");

    if (env)
        return env;
    env = json_array();
    if (!env || json_object_set_new(ctr, "env", env) < 0)
        return NULL;
    return env;
}

static int env_put(json_t *ctr, json_t *var)
{
    json_t *env = env_array(ctr), *item;
    const char *name = json_string_value(json_object_get(var, "name"));
    size_t i;

    if (!env || !var) {
        json_decref(var);
        return -ENOMEM;
    }
    json_array_foreach(env, i, item)
    {
        if (strcmp(json_string_value(json_object_get(item, "name")), name) == 0)
            return json_array_set_new(env, i, var) < 0 ? -ENOMEM : 0;
    }
    return json_array_append_new(env, var) < 0 ? -ENOMEM : 0;
}

int r_env(json_t *ctr, const char *name, const char *value)
{
    return env_put(ctr, json_pack("{s:s,s:s}", "name", name, "value", value));
}

int r_env_field(json_t *ctr, const char *name, const char *field_path)
{
    return env_put(ctr, json_pack("{s:s,s:{s:{s:s}}}", "name", name, "valueFrom", "fieldRef",
                                  "fieldPath", field_path));
}

int r_env_list(json_t *ctr, const json_t *env)
{
    size_t i;
    json_t *item;
    int r;

    json_array_foreach(env, i, item)
    {
        r = r_env(ctr, json_string_value(json_object_get(item, "name")),
                  json_string_value(json_object_get(item, "value")));
        if (r < 0)
            return r;
    }
    return 0;
}

const char *r_env_get(const json_t *ctr, const char *name)
{
    size_t i;
    json_t *item;

    json_array_foreach(json_object_get(ctr, "env"), i, item)
    {
        if (strcmp(json_string_value(json_object_get(item, "name")), name) == 0)
            return json_string_value(json_object_get(item, "value"));
    }
    return NULL;
}

static int append_to(json_t *obj, const char *key, json_t *item)
{
    json_t *a = json_object_get(obj, key);

    if (!item)
        return -ENOMEM;
    if (!a) {
        a = json_array();
        if (!a || json_object_set_new(obj, key, a) < 0) {
            json_decref(item);
            return -ENOMEM;
        }
    }
    return json_array_append_new(a, item) < 0 ? -ENOMEM : 0;
}

int r_mount(json_t *ctr, const char *volume, const char *path, bool read_only,
            const char *propagation, const char *sub_path)
{
    json_t *m = json_pack("{s:s,s:s}", "name", volume, "mountPath", path);

    if (m && read_only && r_set(m, "readOnly", json_true()) < 0)
        m = (json_decref(m), NULL);
    if (m && sub_path && r_set(m, "subPath", json_string(sub_path)) < 0)
        m = (json_decref(m), NULL);
    if (m && propagation && r_set(m, "mountPropagation", json_string(propagation)) < 0)
        m = (json_decref(m), NULL);
    return append_to(ctr, "volumeMounts", m);
}

json_t *r_sc_privileged(void)
{
    return json_pack("{s:b,s:{s:s}}", "privileged", 1, "seLinuxOptions", "level", "s0");
}

json_t *r_sc_root(void)
{
    return json_pack("{s:i,s:b,s:b,s:b,s:{s:[s]}}", "runAsUser", 0, "privileged", 0,
                     "allowPrivilegeEscalation", 0, "readOnlyRootFilesystem", 1, "capabilities",
                     "drop", "ALL");
}

json_t *r_sc_nonroot(void)
{
    return json_pack("{s:i,s:i,s:b,s:b,s:b,s:{s:[s]}}", "runAsUser", OP_NONROOT_UID, "runAsGroup",
                     OP_NONROOT_UID, "runAsNonRoot", 1, "allowPrivilegeEscalation", 0,
                     "readOnlyRootFilesystem", 1, "capabilities", "drop", "ALL");
}

int r_hostpath_volume(json_t *pod, const char *name, const char *path, const char *type)
{
    json_t *hp = json_pack("{s:s}", "path", path);

    if (hp && type && r_set(hp, "type", json_string(type)) < 0)
        hp = (json_decref(hp), NULL);
    if (!hp)
        return -ENOMEM;
    return append_to(pod, "volumes", json_pack("{s:s,s:o}", "name", name, "hostPath", hp));
}

int r_configmap_volume(json_t *pod, const char *name, const char *configmap, int mode,
                       const char *key)
{
    json_t *cm = json_pack("{s:s}", "name", configmap);

    if (cm && mode >= 0 && r_set(cm, "defaultMode", json_integer(mode)) < 0)
        cm = (json_decref(cm), NULL);
    if (cm && key && r_set(cm, "items", json_pack("[{s:s,s:s}]", "key", key, "path", key)) < 0)
        cm = (json_decref(cm), NULL);
    if (!cm)
        return -ENOMEM;
    return append_to(pod, "volumes", json_pack("{s:s,s:o}", "name", name, "configMap", cm));
}

int r_add_container(json_t *pod, json_t *ctr)
{
    return append_to(pod, "containers", ctr);
}

int r_add_init_container(json_t *pod, json_t *ctr)
{
    return append_to(pod, "initContainers", ctr);
}

int r_pull_secrets(json_t *pod, const json_t *secrets)
{
    size_t i, j;
    json_t *name, *have;
    int r;

    json_array_foreach(secrets, i, name)
    {
        bool seen = false;
        json_array_foreach(json_object_get(pod, "imagePullSecrets"), j, have)
        {
            if (json_equal(json_object_get(have, "name"), name))
                seen = true;
        }
        if (seen)
            continue;
        r = append_to(pod, "imagePullSecrets", json_pack("{s:s}", "name", json_string_value(name)));
        if (r < 0)
            return r;
    }
    return 0;
}

int r_apply_component(json_t *ctr, const struct op_component_spec *s)
{
    int r;

    if (s->resources && json_object_size(s->resources) > 0) {
        r = r_set(ctr, "resources", json_deep_copy(s->resources));
        if (r < 0)
            return r;
    }
    if (json_array_size(s->args) > 0) {
        r = r_set(ctr, "args", json_deep_copy(s->args));
        if (r < 0)
            return r;
    }
    return r_env_list(ctr, s->env);
}

int r_ds_new(struct rctx *c, const char *name, json_t *selector, const char *deploy, const char *sa,
             struct r_ds *ret)
{
    char key[128];
    json_t *labels, *ds;
    json_t *v;

    if (!selector)
        return -ENOMEM;
    /* Pods and the DaemonSet carry the selector's labels and the operator's. */
    labels = json_deep_copy(selector);
    if (!labels || (!json_object_get(labels, "app.kubernetes.io/part-of") &&
                    json_object_set_new(labels, "app.kubernetes.io/part-of",
                                        json_string("gpu-operator")) < 0)) {
        json_decref(labels);
        json_decref(selector);
        return -ENOMEM;
    }
    snprintf(key, sizeof(key), "nvidia.com/gpu.deploy.%s", deploy);
    ds = r_object(c, "apps/v1", "DaemonSet", name, true, json_incref(labels));
    if (ds &&
        r_set(ds, "spec",
              json_pack("{s:{s:o},s:{s:{s:o},s:{s:{s:s},s:[{s:s,s:s,s:s}],s:s,s:s}}}", "selector",
                        "matchLabels", json_incref(selector), "template", "metadata", "labels",
                        json_deep_copy(labels), "spec", "nodeSelector", key, "true", "tolerations",
                        "key", "nvidia.com/gpu", "operator", "Exists", "effect", "NoSchedule",
                        "priorityClassName", "system-node-critical", "serviceAccountName", sa)) < 0)
        ds = (json_decref(ds), NULL);
    json_decref(labels);
    json_decref(selector);
    if (!ds)
        return -ENOMEM;
    ret->ds = ds;
    v = json_object_get(json_object_get(ds, "spec"), "template");
    ret->tmpl_meta = json_object_get(v, "metadata");
    ret->pod = json_object_get(v, "spec");
    return 0;
}

void r_ds_release(struct r_ds *ds)
{
    json_decref(ds->ds);
    ds->ds = ds->pod = ds->tmpl_meta = NULL;
}

static int merge_strings(json_t *meta, const char *key, const json_t *add, bool pod)
{
    json_t *m = json_object_get(meta, key);
    const char *k;
    json_t *v;

    if (json_object_size(add) == 0)
        return 0;
    if (!m) {
        m = json_object();
        if (!m || json_object_set_new(meta, key, m) < 0)
            return -ENOMEM;
    }
    json_object_foreach((json_t *)add, k, v)
    {
        /* The pod template's selector labels are immutable in effect: never overridden. */
        if (pod && (strcmp(k, "app") == 0 || strcmp(k, "app.kubernetes.io/part-of") == 0))
            continue;
        if (json_object_set(m, k, v) < 0)
            return -ENOMEM;
    }
    return 0;
}

int r_ds_finish(struct rctx *c, struct r_ds *ds, int r, bool runtime_class, json_t *objects)
{
    const struct op_daemonsets_spec *s = &c->p->daemonsets;
    json_t *spec, *meta;
    const char *name;
    bool driver;

    if (r < 0) {
        r_ds_release(ds);
        return r;
    }
    spec = json_object_get(ds->ds, "spec");
    meta = json_object_get(ds->ds, "metadata");
    name = json_string_value(json_object_get(meta, "name"));
    driver = strncmp(name, "nvidia-driver-daemonset", 23) == 0;

    /* NVIDIA: OnDelete for every DaemonSet when asked; otherwise the driver stays OnDelete (its
     * upgrades are the driver manager's) and the others roll with maxUnavailable when set. */
    if (s->update_strategy == OP_UPDATE_ON_DELETE || driver)
        r = r_set(spec, "updateStrategy", json_pack("{s:s}", "type", "OnDelete"));
    else if (s->max_unavailable) {
        bool percent = strchr(s->max_unavailable, '%') != NULL;
        json_t *mu = percent ? json_string(s->max_unavailable)
                             : json_integer(strtol(s->max_unavailable, NULL, 10));
        if (!mu)
            r = -ENOMEM;
        else
            r = r_set(spec, "updateStrategy",
                      json_pack("{s:s,s:{s:o}}", "type", "RollingUpdate", "rollingUpdate",
                                "maxUnavailable", mu));
    }
    if (r >= 0 && s->priority_class_name)
        r = r_set(ds->pod, "priorityClassName", json_string(s->priority_class_name));
    if (r >= 0 && json_array_size(s->tolerations) > 0)
        r = r_set(ds->pod, "tolerations", json_deep_copy(s->tolerations));
    if (r >= 0 && s->pod_security_context)
        r = r_set(ds->pod, "securityContext", json_deep_copy(s->pod_security_context));
    if (r >= 0 && runtime_class && !c->p->cdi_nri_plugin)
        r = r_set(ds->pod, "runtimeClassName", json_string(c->p->runtime_class));
    if (r >= 0)
        r = merge_strings(ds->tmpl_meta, "labels", s->labels, true);
    if (r >= 0)
        r = merge_strings(ds->tmpl_meta, "annotations", s->annotations, true);
    if (r >= 0)
        r = merge_strings(meta, "labels", s->labels, false);
    if (r >= 0)
        r = merge_strings(meta, "annotations", s->annotations, false);
    if (r < 0) {
        r_ds_release(ds);
        return r;
    }
    /* NVIDIA creates no DaemonSet while no node has a GPU; the identity of a disabled state's
     * DaemonSet is always wanted (to delete it). */
    if (!c->env->gpu_nodes && !c->identity_only) {
        r_ds_release(ds);
        return 0;
    }
    r = r_push(objects, ds->ds);
    ds->ds = ds->pod = ds->tmpl_meta = NULL;
    return r;
}

int r_validations_volume(json_t *pod)
{
    return r_hostpath_volume(pod, "run-nvidia-validations", OP_VALIDATIONS_DIR,
                             "DirectoryOrCreate");
}

json_t *r_wait_container(struct rctx *c, const char *name, const char *const *files)
{
    const struct op_component_spec *v = &c->p->comp[OP_VALIDATOR];
    json_t *ctr = r_container(name, c->validator_image, v->pull_policy);
    json_t *cmd = json_pack("[s,s,s,s,s]", OP_GPUPLANE, "validate", "wait", "--output-dir",
                            OP_VALIDATIONS_DIR);

    for (size_t i = 0; cmd && files[i]; i++)
        if (json_array_append_new(cmd, json_string(files[i])) < 0)
            cmd = (json_decref(cmd), NULL);
    if (!ctr || r_set(ctr, "command", cmd) < 0 ||
        r_set(ctr, "securityContext", r_sc_nonroot()) < 0 ||
        r_mount(ctr, "run-nvidia-validations", OP_VALIDATIONS_DIR, true, "HostToContainer", NULL) <
            0) {
        json_decref(ctr);
        return NULL;
    }
    if (v->resources && json_object_size(v->resources) > 0 &&
        r_set(ctr, "resources", json_deep_copy(v->resources)) < 0)
        return json_decref(ctr), NULL;
    return ctr;
}

/* HOST_ROOT on every container of a pod that mounts the host's root, when it is not "/". */
int r_host_root_env(struct rctx *c, json_t *pod)
{
    static const char *const lists[] = {"initContainers", "containers"};
    size_t i;
    json_t *ctr;
    int r;

    if (strcmp(c->p->host_root, "/") == 0)
        return 0;
    for (size_t l = 0; l < ARRAY_SIZE(lists); l++)
        json_array_foreach(json_object_get(pod, lists[l]), i, ctr)
        {
            r = r_env(ctr, "HOST_ROOT", c->p->host_root);
            if (r < 0)
                return r;
        }
    return 0;
}
