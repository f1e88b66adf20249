/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading a ClusterPolicy into struct op_policy. Each section of the spec has one reader; each
 * reader checks the types of the fields gpuplane uses and applies NVIDIA's default where a field
 * is absent or null (nil *bool => the default of gpu-operator's API types). A failure names the
 * JSON path of the value ("spec.devicePlugin.env[1].name: expected a string") and, when the
 * object came from a file, its line and column. Fields gpuplane does not use are not looked at:
 * the CRD keeps unknown fields, and so does gpuplane.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base-doc.h"
#include "base-strbuf.h"
#include "operator-policy-internal.h"

/* Where the reader is: the document (for positions, or NULL) and the JSON path so far. */
struct pctx {
    const struct doc *doc;
    struct diag *d;
    char path[OP_PATH_MAX];
    size_t len;
};

static size_t path_push(struct pctx *c, const char *key)
{
    size_t old = c->len;
    int n = snprintf(c->path + c->len, sizeof(c->path) - c->len, "%s%s", c->len ? "." : "", key);
    if (n > 0)
        c->len = c->len + (size_t)n < sizeof(c->path) ? c->len + (size_t)n : sizeof(c->path) - 1;
    return old;
}

static size_t path_push_index(struct pctx *c, size_t i)
{
    size_t old = c->len;
    int n = snprintf(c->path + c->len, sizeof(c->path) - c->len, "[%zu]", i);
    if (n > 0)
        c->len = c->len + (size_t)n < sizeof(c->path) ? c->len + (size_t)n : sizeof(c->path) - 1;
    return old;
}

static void path_pop(struct pctx *c, size_t old)
{
    c->len = old;
    c->path[old] = '\0';
}

/* Fails with "<path>: message" at the position of at (else of parent, which holds it). */
static int pfail(struct pctx *c, const json_t *at, const json_t *parent, const char *fmt, ...)
    _printf_(4, 5);
static int pfail(struct pctx *c, const json_t *at, const json_t *parent, const char *fmt, ...)
{
    char msg[DIAG_MSG_MAX];
    va_list ap;
    int line, col;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (c->doc) {
        if (at && doc_position(c->doc, at, &line, &col))
            return doc_fail(c->doc, at, c->d, -EINVAL, "%s: %s", c->path, msg);
        if (parent && doc_position(c->doc, parent, &line, &col))
            return doc_fail(c->doc, parent, c->d, -EINVAL, "%s: %s", c->path, msg);
        return diag_fail(c->d, -EINVAL, "%s: %s: %s", doc_name(c->doc), c->path, msg);
    }
    return diag_fail(c->d, -EINVAL, "%s: %s", c->path, msg);
}

/* Fails at member key of obj: "<path>.<key>: message". */
static int pfail_key(struct pctx *c, const json_t *obj, const char *key, const char *fmt, ...)
    _printf_(4, 5);
static int pfail_key(struct pctx *c, const json_t *obj, const char *key, const char *fmt, ...)
{
    char msg[DIAG_MSG_MAX];
    va_list ap;
    size_t old;
    int r;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    old = path_push(c, key);
    r = pfail(c, json_object_get(obj, key), obj, "%s", msg);
    path_pop(c, old);
    return r;
}

static int type_error(struct pctx *c, const json_t *obj, const char *key, const char *want)
{
    return pfail_key(c, obj, key, "expected %s, got %s", want,
                     doc_type_name(json_object_get(obj, key)));
}

/* A member that is absent or null reads as absent everywhere: the API server drops nulls. */
static json_t *member(const json_t *obj, const char *key)
{
    json_t *v = obj ? json_object_get(obj, key) : NULL;
    return json_is_null(v) ? NULL : v;
}

/* A mapping member, or NULL when absent. */
static int get_obj(struct pctx *c, const json_t *obj, const char *key, json_t **ret)
{
    json_t *v = member(obj, key);
    if (v && !json_is_object(v))
        return type_error(c, obj, key, "a mapping");
    *ret = v;
    return 0;
}

static int get_bool(struct pctx *c, const json_t *obj, const char *key, bool def, bool *ret)
{
    json_t *v = member(obj, key);
    if (!v) {
        *ret = def;
        return 0;
    }
    if (!json_is_boolean(v))
        return type_error(c, obj, key, "a boolean");
    *ret = json_is_true(v);
    return 0;
}

/* A string member, copied; absent, null or "" give def (copied, NULL stays NULL). */
static int get_str(struct pctx *c, const json_t *obj, const char *key, const char *def, char **ret)
{
    json_t *v = member(obj, key);
    const char *s = def;
    char *copy = NULL;

    if (v) {
        if (!json_is_string(v))
            return type_error(c, obj, key, "a string");
        if (json_string_length(v) > 0)
            s = json_string_value(v);
        if (strlen(json_string_value(v)) != json_string_length(v))
            return pfail_key(c, obj, key, "contains a NUL character");
    }
    if (s) {
        copy = strdup(s);
        if (!copy)
            return -ENOMEM;
    }
    free(*ret);
    *ret = copy;
    return 0;
}

/* A string member that must be one of names (NULL-terminated); absent gives def. */
static int get_enum(struct pctx *c, const json_t *obj, const char *key, const char *const *names,
                    int def, int *ret)
{
    json_t *v = member(obj, key);
    char want[256] = "";
    size_t n = 0;

    if (!v || (json_is_string(v) && json_string_length(v) == 0)) {
        *ret = def;
        return 0;
    }
    if (!json_is_string(v))
        return type_error(c, obj, key, "a string");
    for (int i = 0; names[i]; i++) {
        if (strcmp(json_string_value(v), names[i]) == 0) {
            *ret = i;
            return 0;
        }
        int w = snprintf(want + n, sizeof(want) - n, "%s%s", i ? ", " : "", names[i]);
        if (w > 0 && n + (size_t)w < sizeof(want))
            n += (size_t)w;
    }
    return pfail_key(c, obj, key, "invalid value \"%s\": want one of %s", json_string_value(v),
                     want);
}

/* A name that becomes part of another object (a ConfigMap, a Secret, a class). */
static int check_name_member(struct pctx *c, const json_t *obj, const char *key, const char *name)
{
    if (name && !op_valid_subdomain(name))
        return pfail_key(c, obj, key,
                         "\"%s\" is not a valid name (lower-case letters, digits, '-' and '.', "
                         "at most 253 characters)",
                         name);
    return 0;
}

/* A list of strings, deep-copied; absent gives []. unique drops repeats (pull secrets). */
static int get_str_array(struct pctx *c, const json_t *obj, const char *key, bool names,
                         bool unique, json_t **ret)
{
    json_t *v = member(obj, key);
    _cleanup_json_ json_t *out = json_array();
    size_t i;
    json_t *item;

    if (!out)
        return -ENOMEM;
    if (v && !json_is_array(v))
        return type_error(c, obj, key, "a sequence of strings");
    json_array_foreach(v, i, item)
    {
        if (!json_is_string(item)) {
            size_t o1 = path_push(c, key), o2 = path_push_index(c, i);
            int r = pfail(c, item, v, "expected a string, got %s", doc_type_name(item));
            path_pop(c, o2);
            path_pop(c, o1);
            return r;
        }
        if (names && !op_valid_subdomain(json_string_value(item))) {
            size_t o1 = path_push(c, key), o2 = path_push_index(c, i);
            int r = pfail(c, item, v, "\"%s\" is not a valid name", json_string_value(item));
            path_pop(c, o2);
            path_pop(c, o1);
            return r;
        }
        if (unique) {
            bool seen = false;
            size_t j;
            json_t *prev;
            json_array_foreach(out, j, prev) seen = seen || json_equal(prev, item);
            if (seen)
                continue;
        }
        if (json_array_append_new(out, json_string(json_string_value(item))) < 0)
            return -ENOMEM;
    }
    json_decref(*ret);
    *ret = TAKE_PTR(out);
    return 0;
}

/* env: [{name, value}], deep-copied as {name, value} (value "" when absent). */
static int get_env(struct pctx *c, const json_t *obj, const char *key, json_t **ret)
{
    json_t *v = member(obj, key);
    _cleanup_json_ json_t *out = NULL;
    size_t i, old = path_push(c, key);
    json_t *item;
    int r = 0;

    if (!v)
        goto done;
    if (!json_is_array(v)) {
        path_pop(c, old);
        return type_error(c, obj, key, "a sequence of {name, value}");
    }
    out = json_array();
    if (!out)
        return path_pop(c, old), -ENOMEM;
    json_array_foreach(v, i, item)
    {
        size_t o2 = path_push_index(c, i);
        _cleanup_free_ char *name = NULL, *value = NULL;

        if (!json_is_object(item)) {
            r = pfail(c, item, v, "expected a mapping {name, value}, got %s", doc_type_name(item));
            break;
        }
        r = get_str(c, item, "name", NULL, &name);
        if (r >= 0)
            r = get_str(c, item, "value", "", &value);
        if (r < 0)
            break;
        if (!name) {
            r = pfail(c, item, v, "name: required");
            break;
        }
        if (strchr(name, '=')) {
            r = pfail_key(c, item, "name", "\"%s\": an environment variable name has no '='", name);
            break;
        }
        if (json_array_append_new(out, json_pack("{s:s,s:s}", "name", name, "value", value)) < 0) {
            r = -ENOMEM;
            break;
        }
        path_pop(c, o2);
    }
done:
    path_pop(c, old);
    if (r < 0)
        return r;
    json_decref(*ret);
    *ret = TAKE_PTR(out);
    return 0;
}

/* A map of strings (labels, annotations), deep-copied; absent gives {}. */
static int get_str_map(struct pctx *c, const json_t *obj, const char *key, json_t **ret)
{
    json_t *v = member(obj, key);
    _cleanup_json_ json_t *out = json_object();
    const char *k;
    json_t *item;

    if (!out)
        return -ENOMEM;
    if (v && !json_is_object(v))
        return type_error(c, obj, key, "a mapping of strings");
    json_object_foreach(v, k, item)
    {
        if (!json_is_string(item)) {
            size_t old = path_push(c, key);
            int r = pfail_key(c, v, k, "expected a string, got %s", doc_type_name(item));
            path_pop(c, old);
            return r;
        }
        if (json_object_set_new(out, k, json_string(json_string_value(item))) < 0)
            return -ENOMEM;
    }
    json_decref(*ret);
    *ret = TAKE_PTR(out);
    return 0;
}

/* resources: {limits, requests}, each a map of quantities (strings or numbers, kept as strings). */
static int get_resources(struct pctx *c, const json_t *obj, const char *key, json_t **ret)
{
    static const char *const parts[] = {"limits", "requests"};
    json_t *v;
    _cleanup_json_ json_t *out = NULL;
    size_t old;
    int r = get_obj(c, obj, key, &v);

    if (r < 0 || !v)
        return r;
    out = json_object();
    if (!out)
        return -ENOMEM;
    old = path_push(c, key);
    for (size_t i = 0; i < ARRAY_SIZE(parts); i++) {
        json_t *m, *q;
        const char *name;
        json_t *copy;

        r = get_obj(c, v, parts[i], &m);
        if (r < 0)
            break;
        if (!m)
            continue;
        copy = json_object();
        if (!copy || json_object_set_new(out, parts[i], copy) < 0) {
            r = -ENOMEM;
            break;
        }
        json_object_foreach(m, name, q)
        {
            char buf[64];
            if (json_is_string(q) && json_string_length(q) > 0) {
                r = json_object_set_new(copy, name, json_string(json_string_value(q)));
            } else if (json_is_integer(q)) {
                snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(q));
                r = json_object_set_new(copy, name, json_string(buf));
            } else if (json_is_real(q)) {
                snprintf(buf, sizeof(buf), "%.15g", json_real_value(q));
                r = json_object_set_new(copy, name, json_string(buf));
            } else {
                size_t o2 = path_push(c, parts[i]);
                r = pfail_key(c, m, name, "expected a quantity (\"500m\", \"1Gi\", 2), got %s",
                              doc_type_name(q));
                path_pop(c, o2);
                break;
            }
            if (r < 0) {
                r = -ENOMEM;
                break;
            }
        }
        if (r < 0)
            break;
    }
    path_pop(c, old);
    if (r < 0)
        return r;
    json_decref(*ret);
    *ret = TAKE_PTR(out);
    return 0;
}

/* tolerations: corev1.Toleration items, the fields Kubernetes knows copied and type-checked. */
static int get_tolerations(struct pctx *c, const json_t *obj, const char *key, json_t **ret)
{
    static const char *const strs[] = {"key", "operator", "value", "effect"};
    json_t *v = member(obj, key);
    _cleanup_json_ json_t *out = NULL;
    size_t i, old;
    json_t *item;
    int r = 0;

    if (!v)
        return 0;
    if (!json_is_array(v))
        return type_error(c, obj, key, "a sequence of tolerations");
    out = json_array();
    if (!out)
        return -ENOMEM;
    old = path_push(c, key);
    json_array_foreach(v, i, item)
    {
        size_t o2 = path_push_index(c, i);
        json_t *t = json_object(), *secs;

        if (!t || json_array_append_new(out, t) < 0) {
            r = -ENOMEM;
            break;
        }
        if (!json_is_object(item)) {
            r = pfail(c, item, v, "expected a toleration mapping, got %s", doc_type_name(item));
            break;
        }
        for (size_t k = 0; k < ARRAY_SIZE(strs) && r >= 0; k++) {
            _cleanup_free_ char *s = NULL;
            r = get_str(c, item, strs[k], NULL, &s);
            if (r >= 0 && s)
                r = json_object_set_new(t, strs[k], json_string(s)) < 0 ? -ENOMEM : 0;
        }
        if (r < 0)
            break;
        secs = member(item, "tolerationSeconds");
        if (secs && !json_is_integer(secs)) {
            r = type_error(c, item, "tolerationSeconds", "an integer");
            break;
        }
        if (secs && json_object_set_new(t, "tolerationSeconds",
                                        json_integer(json_integer_value(secs))) < 0) {
            r = -ENOMEM;
            break;
        }
        path_pop(c, o2);
    }
    path_pop(c, old);
    if (r < 0)
        return r;
    json_decref(*ret);
    *ret = TAKE_PTR(out);
    return 0;
}

/* An absolute host path without "..": it becomes a hostPath volume. */
static int get_host_path(struct pctx *c, const json_t *obj, const char *key, const char *def,
                         char **ret)
{
    int r = get_str(c, obj, key, def, ret);
    if (r < 0)
        return r;
    if (!op_valid_host_path(*ret))
        return pfail_key(c, obj, key, "\"%s\" is not an absolute path without \"..\"", *ret);
    return 0;
}

/* The fields every component has. */
static int read_component(struct pctx *c, const json_t *spec, const char *key, bool def_enabled,
                          struct op_component_spec *ret)
{
    json_t *v, *cfg;
    size_t old;
    int r;

    r = get_obj(c, spec, key, &v);
    if (r < 0)
        return r;
    old = path_push(c, key);
    r = get_bool(c, v, "enabled", def_enabled, &ret->enabled);
    if (r >= 0)
        r = get_str(c, v, "repository", NULL, &ret->repository);
    if (r >= 0)
        r = get_str(c, v, "image", NULL, &ret->image);
    if (r >= 0)
        r = get_str(c, v, "version", NULL, &ret->version);
    if (r >= 0) {
        _cleanup_free_ char *pp = NULL;
        r = get_str(c, v, "imagePullPolicy", NULL, &pp);
        /* Anything but Always and Never is IfNotPresent, as NVIDIA's ImagePullPolicy(). */
        ret->pull_policy = !pp                         ? OP_PULL_IF_NOT_PRESENT
                           : strcmp(pp, "Always") == 0 ? OP_PULL_ALWAYS
                           : strcmp(pp, "Never") == 0  ? OP_PULL_NEVER
                                                       : OP_PULL_IF_NOT_PRESENT;
    }
    if (r >= 0)
        r = get_str_array(c, v, "imagePullSecrets", true, true, &ret->pull_secrets);
    if (r >= 0)
        r = get_str_array(c, v, "args", false, false, &ret->args);
    if (r >= 0)
        r = get_env(c, v, "env", &ret->env);
    if (r >= 0)
        r = get_resources(c, v, "resources", &ret->resources);
    if (r >= 0)
        r = get_bool(c, v, "hostNetwork", false, &ret->host_network);
    if (r >= 0)
        r = get_obj(c, v, "config", &cfg);
    if (r >= 0 && cfg) {
        size_t o2 = path_push(c, "config");
        r = get_str(c, cfg, "name", NULL, &ret->config_name);
        if (r >= 0)
            r = check_name_member(c, cfg, "name", ret->config_name);
        if (r >= 0)
            r = get_str(c, cfg, "default", NULL, &ret->config_default);
        if (r >= 0 && ret->config_default && !op_valid_config_key(ret->config_default))
            r = pfail_key(c, cfg, "default",
                          "\"%s\" is not a valid ConfigMap key (letters, digits, '-', '_', '.')",
                          ret->config_default);
        path_pop(c, o2);
    }
    path_pop(c, old);
    return r;
}

static int read_daemonsets(struct pctx *c, const json_t *spec, struct op_daemonsets_spec *ds)
{
    static const char *const strategies[] = {"RollingUpdate", "OnDelete", NULL};
    json_t *v, *ru;
    size_t old;
    int r, strategy = 0;

    r = get_obj(c, spec, "daemonsets", &v);
    if (r < 0)
        return r;
    old = path_push(c, "daemonsets");
    r = get_str_map(c, v, "labels", &ds->labels);
    if (r >= 0)
        r = get_str_map(c, v, "annotations", &ds->annotations);
    if (r >= 0)
        r = get_tolerations(c, v, "tolerations", &ds->tolerations);
    if (r >= 0)
        r = get_str(c, v, "priorityClassName", "system-node-critical", &ds->priority_class_name);
    if (r >= 0)
        r = check_name_member(c, v, "priorityClassName", ds->priority_class_name);
    if (r >= 0)
        r = get_enum(c, v, "updateStrategy", strategies, 0, &strategy);
    ds->update_strategy = strategy == 1 ? OP_UPDATE_ON_DELETE : OP_UPDATE_ROLLING;
    if (r >= 0)
        r = get_obj(c, v, "rollingUpdate", &ru);
    if (r >= 0 && ru) {
        size_t o2 = path_push(c, "rollingUpdate");
        json_t *mu = member(ru, "maxUnavailable");
        char buf[32];
        /* A string in NVIDIA's type; an integer is what a Helm values file often holds. */
        if (json_is_integer(mu)) {
            snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(mu));
            ds->max_unavailable = strdup(buf);
            if (!ds->max_unavailable)
                r = -ENOMEM;
        } else {
            r = get_str(c, ru, "maxUnavailable", NULL, &ds->max_unavailable);
        }
        if (r >= 0 && ds->max_unavailable && !op_valid_max_unavailable(ds->max_unavailable))
            r = pfail_key(c, ru, "maxUnavailable",
                          "\"%s\" is neither a number nor a percentage (\"1\", \"25%%\")",
                          ds->max_unavailable);
        path_pop(c, o2);
    }
    if (r >= 0) {
        json_t *psc;
        r = get_obj(c, v, "podSecurityContext", &psc);
        if (r >= 0 && psc) {
            ds->pod_security_context = json_deep_copy(psc);
            if (!ds->pod_security_context)
                r = -ENOMEM;
        }
    }
    path_pop(c, old);
    return r;
}

static int read_validator(struct pctx *c, const json_t *spec, struct op_policy *p)
{
    static const char *const checks[OP_CHECK_MAX] = {
        [OP_CHECK_DRIVER] = "driver",
        [OP_CHECK_TOOLKIT] = "toolkit",
        [OP_CHECK_CUDA] = "cuda",
        [OP_CHECK_PLUGIN] = "plugin",
    };
    json_t *v;
    size_t old;
    int r = get_obj(c, spec, "validator", &v);

    if (r < 0)
        return r;
    old = path_push(c, "validator");
    for (size_t i = 0; i < OP_CHECK_MAX && r >= 0; i++) {
        json_t *check;
        r = get_obj(c, v, checks[i], &check);
        if (r >= 0 && check) {
            size_t o2 = path_push(c, checks[i]);
            r = get_env(c, check, "env", &p->validator_env[i]);
            path_pop(c, o2);
        }
    }
    path_pop(c, old);
    return r;
}

static int read_driver(struct pctx *c, const json_t *spec, struct op_policy *p)
{
    static const char *const kmt[] = {"auto", "open", "proprietary", NULL};
    static const char *const kmt_names[] = {"auto", "open", "proprietary"};
    json_t *v, *sub;
    size_t old;
    int r, type = 0;

    r = get_obj(c, spec, "driver", &v);
    if (r < 0)
        return r;
    old = path_push(c, "driver");
    r = get_enum(c, v, "kernelModuleType", kmt, 0, &type);
    if (r >= 0) {
        p->driver_kernel_module_type = strdup(kmt_names[type]);
        if (!p->driver_kernel_module_type)
            r = -ENOMEM;
    }
    if (r >= 0)
        r = get_bool(c, v, "usePrecompiled", false, &p->driver_use_precompiled);
    if (r >= 0)
        r = get_bool(c, v, "useNvidiaDriverCRD", false, &p->driver_use_nvidia_driver_crd);
    if (r >= 0)
        r = get_obj(c, v, "rdma", &sub);
    if (r >= 0 && sub) {
        size_t o2 = path_push(c, "rdma");
        r = get_bool(c, sub, "enabled", false, &p->driver_rdma_enabled);
        if (r >= 0)
            r = get_bool(c, sub, "useHostMofed", false, &p->driver_rdma_use_host_mofed);
        path_pop(c, o2);
    }
    if (r >= 0)
        r = get_obj(c, v, "upgradePolicy", &sub);
    if (r >= 0 && sub) {
        size_t o2 = path_push(c, "upgradePolicy");
        r = get_bool(c, sub, "autoUpgrade", false, &p->driver_auto_upgrade);
        path_pop(c, o2);
    }
    if (r >= 0)
        r = read_component(c, v, "manager", true, &p->driver_manager);
    path_pop(c, old);
    return r;
}

static int read_exporter(struct pctx *c, const json_t *spec, struct op_policy *p)
{
    static const char *const types[] = {"ClusterIP", "NodePort", "LoadBalancer", "ExternalName",
                                        NULL};
    static const char *const policies[] = {"Cluster", "Local", NULL};
    json_t *v, *svc, *allow = NULL;
    size_t old;
    int r;

    r = get_obj(c, spec, "dcgmExporter", &v);
    if (r < 0)
        return r;
    old = path_push(c, "dcgmExporter");
    r = get_bool(c, v, "hostPID", false, &p->exporter_host_pid);
    if (r >= 0)
        r = get_bool(c, v, "enablePodLabels", false, &p->exporter_pod_labels);
    if (r >= 0)
        r = get_bool(c, v, "enablePodUID", false, &p->exporter_pod_uid);
    if (r >= 0)
        r = get_str_array(c, v, "podLabelAllowlistRegex", false, false, &allow);
    if (r >= 0 && json_array_size(allow) > 0) {
        _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
        size_t i;
        json_t *re;
        json_array_foreach(allow, i, re)
        {
            if (r >= 0 && i > 0)
                r = strbuf_addch(&sb, ',');
            if (r >= 0)
                r = strbuf_addstr(&sb, json_string_value(re));
        }
        if (r >= 0) {
            p->exporter_pod_label_allowlist = strbuf_detach(&sb, NULL);
            if (!p->exporter_pod_label_allowlist)
                r = -ENOMEM;
        }
    }
    json_decref(allow);
    if (r >= 0)
        r = get_str_map(c, v, "annotations", &p->exporter_annotations);
    if (r >= 0)
        r = get_obj(c, v, "service", &svc);
    if (r >= 0 && svc) {
        size_t o2 = path_push(c, "service");
        int t = -1, itp = -1;
        r = get_enum(c, svc, "type", types, -1, &t);
        if (r >= 0 && t >= 0 && !(p->exporter_service_type = strdup(types[t])))
            r = -ENOMEM;
        if (r >= 0)
            r = get_enum(c, svc, "internalTrafficPolicy", policies, -1, &itp);
        if (r >= 0 && itp >= 0 && !(p->exporter_internal_traffic_policy = strdup(policies[itp])))
            r = -ENOMEM;
        path_pop(c, o2);
    }
    path_pop(c, old);
    return r;
}

static int read_misc(struct pctx *c, const json_t *spec, struct op_policy *p)
{
    static const char *const strategies[] = {"none", "single", "mixed", NULL};
    static const char *const workloads[] = {"container", "vm-passthrough", "vm-vgpu", NULL};
    static const char *const modes[] = {"kubevirt", "kata", NULL};
    json_t *v;
    size_t old;
    int r, i;

    /* operator */
    r = get_obj(c, spec, "operator", &v);
    if (r < 0)
        return r;
    old = path_push(c, "operator");
    r = get_str(c, v, "runtimeClass", "nvidia", &p->runtime_class);
    if (r >= 0)
        r = check_name_member(c, v, "runtimeClass", p->runtime_class);
    path_pop(c, old);
    if (r < 0)
        return r;

#define SECTION(key, body)                                                                         \
    do {                                                                                           \
        r = get_obj(c, spec, key, &v);                                                             \
        if (r < 0)                                                                                 \
            return r;                                                                              \
        old = path_push(c, key);                                                                   \
        body;                                                                                      \
        path_pop(c, old);                                                                          \
        if (r < 0)                                                                                 \
            return r;                                                                              \
    } while (0)

    SECTION("psa", r = get_bool(c, v, "enabled", false, &p->psa_enabled));
    SECTION("cdi", {
        r = get_bool(c, v, "enabled", true, &p->cdi_enabled);
        if (r >= 0)
            r = get_bool(c, v, "default", false, &p->cdi_default);
        if (r >= 0)
            r = get_bool(c, v, "nriPluginEnabled", false, &p->cdi_nri_plugin);
    });
    SECTION("hostPaths", {
        r = get_host_path(c, v, "rootFS", "/", &p->host_root);
        if (r >= 0)
            r = get_host_path(c, v, "driverInstallDir", "/run/nvidia/driver",
                              &p->driver_install_dir);
        if (r >= 0)
            r = get_host_path(c, v, "kubeletRootDir", "/var/lib/kubelet", &p->kubelet_root_dir);
    });
    SECTION("mig", {
        i = -1;
        r = get_enum(c, v, "strategy", strategies, -1, &i);
        p->mig_strategy = i == 0   ? OP_MIG_NONE
                          : i == 1 ? OP_MIG_SINGLE
                          : i == 2 ? OP_MIG_MIXED
                                   : OP_MIG_UNSET;
    });
    SECTION("toolkit", {
        r = get_host_path(c, v, "installDir", "/usr/local/nvidia", &p->toolkit_install_dir);
    });
    SECTION("devicePlugin", {
        json_t *mps;
        r = get_obj(c, v, "mps", &mps);
        if (r >= 0) {
            size_t o2 = path_push(c, "mps");
            r = get_host_path(c, mps, "root", "/run/nvidia/mps", &p->mps_root);
            path_pop(c, o2);
        }
    });
    SECTION("dcgm", r = get_bool(c, v, "enabled", true, &p->dcgm_enabled));
    SECTION("nodeStatusExporter",
            r = get_bool(c, v, "enabled", false, &p->node_status_exporter_enabled));
    SECTION("migManager", {
        json_t *cfg;
        r = get_bool(c, v, "enabled", true, &p->mig_manager_enabled);
        if (r >= 0)
            r = get_obj(c, v, "config", &cfg);
        if (r >= 0) {
            size_t o2 = path_push(c, "config");
            /* "" is a value here (NVIDIA's enum: all-disabled or ""): no default config. */
            json_t *def = member(cfg, "default");
            if (json_is_string(def) && json_string_length(def) == 0)
                r = get_str(c, cfg, "default", "", &p->mig_manager_config_default);
            else
                r = get_str(c, cfg, "default", "all-disabled", &p->mig_manager_config_default);
            path_pop(c, o2);
        }
    });
    SECTION("sandboxWorkloads", {
        r = get_bool(c, v, "enabled", false, &p->sandbox_enabled);
        i = 0;
        if (r >= 0)
            r = get_enum(c, v, "defaultWorkload", workloads, 0, &i);
        p->sandbox_default_workload = (enum op_workload)i;
        i = 0;
        if (r >= 0)
            r = get_enum(c, v, "mode", modes, 0, &i);
        if (r >= 0 && !(p->sandbox_mode = strdup(modes[i])))
            r = -ENOMEM;
    });
#undef SECTION
    return 0;
}

static const char *const COMPONENT_KEYS[OP_COMPONENT_MAX] = {
    [OP_DRIVER] = "driver",
    [OP_TOOLKIT] = "toolkit",
    [OP_VALIDATOR] = "validator",
    [OP_DEVICE_PLUGIN] = "devicePlugin",
    [OP_DRA_DRIVER] = "draDriver",
    [OP_DCGM_EXPORTER] = "dcgmExporter",
    [OP_GFD] = "gfd",
};

const char *op_component_key(enum op_component c)
{
    return (unsigned)c < OP_COMPONENT_MAX ? COMPONENT_KEYS[c] : NULL;
}

static int read_policy(struct pctx *c, const json_t *cp, struct op_policy **ret)
{
    _cleanup_(op_policy_freep) struct op_policy *p = NULL;
    json_t *spec, *kind;
    int r;

    if (!json_is_object(cp))
        return pfail(c, cp, NULL, "a ClusterPolicy must be a mapping, got %s", doc_type_name(cp));
    kind = member(cp, "kind");
    if (kind && (!json_is_string(kind) || strcmp(json_string_value(kind), "ClusterPolicy") != 0))
        return pfail_key(c, cp, "kind", "expected ClusterPolicy");
    p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    r = get_obj(c, cp, "spec", &spec);
    if (r < 0)
        return r;
    path_push(c, "spec");

    for (int i = 0; i < OP_COMPONENT_MAX; i++) {
        /* The validator cannot be turned off (NVIDIA's state-operator-validation is always on);
         * draDriver is gpuplane's, off unless asked for. */
        r = read_component(c, spec, COMPONENT_KEYS[i], i != OP_DRA_DRIVER, &p->comp[i]);
        if (r < 0)
            return r;
    }
    p->comp[OP_VALIDATOR].enabled = true;
    r = read_daemonsets(c, spec, &p->daemonsets);
    if (r >= 0)
        r = read_validator(c, spec, p);
    if (r >= 0)
        r = read_driver(c, spec, p);
    if (r >= 0)
        r = read_exporter(c, spec, p);
    if (r >= 0)
        r = read_misc(c, spec, p);
    if (r < 0)
        return r;
    if (!p->exporter_annotations && !(p->exporter_annotations = json_object()))
        return -ENOMEM;
    if (p->cdi_nri_plugin && (!p->cdi_enabled || !p->comp[OP_TOOLKIT].enabled)) {
        json_t *cdi = member(spec, "cdi");
        size_t old = path_push(c, "cdi");
        r = pfail_key(c, cdi, "nriPluginEnabled",
                      "the NRI plugin needs cdi.enabled and toolkit.enabled");
        path_pop(c, old);
        return r;
    }
    *ret = TAKE_PTR(p);
    return 0;
}

int op_policy_from_json(const json_t *cluster_policy, struct op_policy **ret, struct diag *d)
{
    struct pctx c = {.d = d};
    return read_policy(&c, cluster_policy, ret);
}

int op_policy_from_file(const char *path, struct op_policy **ret, json_t **ret_object,
                        struct diag *d)
{
    _cleanup_(doc_freep) struct doc *doc = NULL;
    struct op_policy *p = NULL;
    struct pctx c = {.d = d};
    json_t *root;
    int r;

    r = doc_load_file(path, d, &doc);
    if (r < 0)
        return r;
    if (doc_count(doc) != 1)
        return diag_fail(d, -EINVAL, "%s: expected one ClusterPolicy document, found %zu", path,
                         doc_count(doc));
    root = doc_root(doc, 0);
    c.doc = doc;
    r = read_policy(&c, root, &p);
    if (r < 0)
        return r;
    *ret = p;
    if (ret_object)
        *ret_object = json_incref(root);
    return 0;
}

static void component_release(struct op_component_spec *s)
{
    free(s->repository);
    free(s->image);
    free(s->version);
    json_decref(s->pull_secrets);
    json_decref(s->args);
    json_decref(s->env);
    json_decref(s->resources);
    free(s->config_name);
    free(s->config_default);
}

struct op_policy *op_policy_free(struct op_policy *p)
{
    if (!p)
        return NULL;
    for (int i = 0; i < OP_COMPONENT_MAX; i++)
        component_release(&p->comp[i]);
    component_release(&p->driver_manager);
    json_decref(p->daemonsets.labels);
    json_decref(p->daemonsets.annotations);
    json_decref(p->daemonsets.tolerations);
    free(p->daemonsets.priority_class_name);
    free(p->daemonsets.max_unavailable);
    json_decref(p->daemonsets.pod_security_context);
    free(p->runtime_class);
    free(p->host_root);
    free(p->driver_install_dir);
    free(p->kubelet_root_dir);
    free(p->driver_kernel_module_type);
    free(p->toolkit_install_dir);
    for (int i = 0; i < OP_CHECK_MAX; i++)
        json_decref(p->validator_env[i]);
    free(p->exporter_pod_label_allowlist);
    free(p->exporter_service_type);
    free(p->exporter_internal_traffic_policy);
    json_decref(p->exporter_annotations);
    free(p->mps_root);
    free(p->mig_manager_config_default);
    free(p->sandbox_mode);
    free(p);
    return NULL;
}

bool op_policy_enabled(const struct op_policy *p, enum op_component c)
{
    return (unsigned)c < OP_COMPONENT_MAX && p->comp[c].enabled;
}

const char *op_pull_policy_name(enum op_pull_policy p)
{
    switch (p) {
    case OP_PULL_ALWAYS:
        return "Always";
    case OP_PULL_NEVER:
        return "Never";
    case OP_PULL_IF_NOT_PRESENT:
        break;
    }
    return "IfNotPresent";
}

const char *op_mig_strategy_name(enum op_mig_strategy s)
{
    switch (s) {
    case OP_MIG_NONE:
        return "none";
    case OP_MIG_SINGLE:
        return "single";
    case OP_MIG_MIXED:
        return "mixed";
    case OP_MIG_UNSET:
        break;
    }
    return NULL;
}

const char *op_workload_name(enum op_workload w)
{
    switch (w) {
    case OP_WORKLOAD_VM_PASSTHROUGH:
        return "vm-passthrough";
    case OP_WORKLOAD_VM_VGPU:
        return "vm-vgpu";
    case OP_WORKLOAD_CONTAINER:
        break;
    }
    return "container";
}
