/* SPDX-License-Identifier: Apache-2.0 */
/*
 * op_render(): every state in NVIDIA's order, each object finished the same way (the controller
 * owner reference to the ClusterPolicy, then nvidia.com/last-applied-hash over the result), and
 * the two states that deploy no DaemonSet: pre-requisites (PSA labels on the namespace, the
 * RuntimeClasses) and state-operator-metrics (the operator's own Service).
 */
#include <errno.h>
#include <string.h>

#include "base-doc.h"
#include "operator-render-internal.h"

struct state_def {
    const char *name;
    op_state_fn fn;
    int comp; /* the component that enables it, or -1: always enabled */
};

static const struct state_def STATES[] = {
    {"pre-requisites", op_state_prerequisites, -1},
    {"state-operator-metrics", op_state_operator_metrics, -1},
    {"state-driver", op_state_driver, OP_DRIVER},
    {"state-container-toolkit", op_state_toolkit, OP_TOOLKIT},
    {"state-operator-validation", op_state_validation, OP_VALIDATOR},
    {"state-device-plugin", op_state_device_plugin, OP_DEVICE_PLUGIN},
    {"state-dra-driver", op_state_dra_driver, OP_DRA_DRIVER},
    {"state-dcgm-exporter", op_state_dcgm_exporter, OP_DCGM_EXPORTER},
    {"gpu-feature-discovery", op_state_gfd, OP_GFD},
};

static bool state_enabled(const struct op_policy *p, const struct state_def *s)
{
    if (s->comp < 0)
        return true;
    /* With NVIDIADriver objects, the ClusterPolicy's own driver DaemonSet goes away. */
    if (s->comp == OP_DRIVER && p->driver_use_nvidia_driver_crd)
        return false;
    return p->comp[s->comp].enabled;
}

int op_state_prerequisites(struct rctx *c, json_t *objects)
{
    static const char *const psa[] = {"enforce", "audit", "warn"};
    int r;

    /* PSA: the operands are privileged. Not owned by the ClusterPolicy (see finish()). */
    if (c->p->psa_enabled && !c->identity_only) {
        json_t *labels = json_object();
        char key[64];
        for (size_t i = 0; labels && i < ARRAY_SIZE(psa); i++) {
            snprintf(key, sizeof(key), "pod-security.kubernetes.io/%s", psa[i]);
            if (json_object_set_new(labels, key, json_string("privileged")) < 0)
                labels = (json_decref(labels), NULL);
        }
        if (!labels)
            return -ENOMEM;
        r = r_push(objects, r_object(c, "v1", "Namespace", c->ns, false, labels));
        if (r < 0)
            return r;
    }
    /* The runtime class every GPU pod of the operands runs with (name and handler as NVIDIA's),
     * and with CDI the two handlers NVIDIA's toolkit adds beside it. */
    const char *names[3] = {c->p->runtime_class, NULL, NULL};
    if (c->p->cdi_enabled || c->identity_only) {
        names[1] = "nvidia-cdi";
        names[2] = "nvidia-legacy";
    }
    for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
        json_t *rc;
        if (!names[i] || (i > 0 && strcmp(names[i], names[0]) == 0))
            continue;
        rc = r_object(c, "node.k8s.io/v1", "RuntimeClass", names[i], false,
                      json_pack("{s:s}", "app.kubernetes.io/component", "gpu-operator"));
        if (rc && r_set(rc, "handler", json_string(names[i])) < 0)
            rc = (json_decref(rc), NULL);
        r = r_push(objects, rc);
        if (r < 0)
            return r;
    }
    return 0;
}

int op_state_operator_metrics(struct rctx *c, json_t *objects)
{
    json_t *svc = r_object(c, "v1", "Service", "gpu-operator", true,
                           json_pack("{s:s}", "app", "gpu-operator"));

    if (svc && (r_set(json_object_get(svc, "metadata"), "annotations",
                      json_pack("{s:s}", "prometheus.io/scrape", "true")) < 0 ||
                r_set(svc, "spec",
                      json_pack("{s:{s:s},s:[{s:s,s:i,s:i,s:s}]}", "selector", "app",
                                "gpu-operator", "ports", "name", "gpu-operator-metrics", "port",
                                8080, "targetPort", 8080, "protocol", "TCP")) < 0))
        svc = (json_decref(svc), NULL);
    return r_push(objects, svc);
}

/* The owner reference to the ClusterPolicy, or NULL (no owner, or one without a uid). */
static int owner_refs(const json_t *owner, json_t **ret)
{
    json_t *meta = json_object_get(owner, "metadata");
    const char *name = json_string_value(json_object_get(meta, "name"));
    const char *uid = json_string_value(json_object_get(meta, "uid"));

    *ret = NULL;
    if (!name || !uid || !*name || !*uid)
        return 0;
    *ret = json_pack("[{s:s,s:s,s:s,s:s,s:b,s:b}]", "apiVersion", "nvidia.com/v1", "kind",
                     "ClusterPolicy", "name", name, "uid", uid, "controller", 1,
                     "blockOwnerDeletion", 1);
    return *ret ? 0 : -ENOMEM;
}

static bool same_identity(const json_t *a, const json_t *b)
{
    static const char *const keys[] = {"apiVersion", "kind"};
    json_t *ma = json_object_get(a, "metadata"), *mb = json_object_get(b, "metadata");

    for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
        if (!json_equal(json_object_get(a, keys[i]), json_object_get(b, keys[i])))
            return false;
    return json_equal(json_object_get(ma, "name"), json_object_get(mb, "name")) &&
           (json_object_get(ma, "namespace") == json_object_get(mb, "namespace") ||
            json_equal(json_object_get(ma, "namespace"), json_object_get(mb, "namespace")));
}

/* The objects of every (identity-only) rendering of the state that this one lacks. */
static int absent_objects(struct rctx *c, op_state_fn fn, const json_t *objects, json_t **ret)
{
    _cleanup_json_ json_t *all = json_array(), *out = json_array();
    size_t i, k;
    json_t *o, *have;
    int r;

    if (!all || !out)
        return -ENOMEM;
    c->identity_only = true;
    r = fn(c, all);
    c->identity_only = false;
    if (r < 0)
        return r;
    json_array_foreach(all, i, o)
    {
        const char *kind = json_string_value(json_object_get(o, "kind"));
        bool found = false;
        if (strcmp(kind, "DaemonSet") == 0 && !c->env->gpu_nodes)
            continue;
        json_array_foreach(objects, k, have) found = found || same_identity(o, have);
        if (found)
            continue;
        json_t *meta = json_object_get(o, "metadata");
        json_t *id = json_pack("{s:O,s:O,s:{s:O}}", "apiVersion", json_object_get(o, "apiVersion"),
                               "kind", json_object_get(o, "kind"), "metadata", "name",
                               json_object_get(meta, "name"));
        json_t *ns = json_object_get(meta, "namespace");
        if (id && ns && r_set(json_object_get(id, "metadata"), "namespace", json_incref(ns)) < 0)
            id = (json_decref(id), NULL);
        r = r_push(out, id);
        if (r < 0)
            return r;
    }
    *ret = TAKE_PTR(out);
    return 0;
}

/* Owner reference and hash; for a disabled state, only what names the object. */
static int finish(struct rctx *c, json_t *objects)
{
    size_t i;
    json_t *obj;
    char hash[24];

    json_array_foreach(objects, i, obj)
    {
        json_t *meta = json_object_get(obj, "metadata");
        bool is_ns = strcmp(json_string_value(json_object_get(obj, "kind")), "Namespace") == 0;

        if (c->identity_only) {
            json_t *id = json_pack(
                "{s:O,s:O,s:{s:O}}", "apiVersion", json_object_get(obj, "apiVersion"), "kind",
                json_object_get(obj, "kind"), "metadata", "name", json_object_get(meta, "name"));
            json_t *ns = json_object_get(meta, "namespace");
            if (id && ns &&
                r_set(json_object_get(id, "metadata"), "namespace", json_incref(ns)) < 0)
                id = (json_decref(id), NULL);
            if (!id || json_array_set_new(objects, i, id) < 0)
                return -ENOMEM;
            continue;
        }
        /* The operator's namespace must never be garbage-collected with the ClusterPolicy. */
        if (c->owner_refs && !is_ns &&
            r_set(meta, "ownerReferences", json_deep_copy(c->owner_refs)) < 0)
            return -ENOMEM;
        op_object_hash(obj, hash);
        json_t *ann = json_object_get(meta, "annotations");
        if (!ann) {
            ann = json_object();
            if (r_set(meta, "annotations", ann) < 0)
                return -ENOMEM;
        }
        if (r_set(ann, OP_HASH_ANNOTATION, json_string(hash)) < 0)
            return -ENOMEM;
    }
    return 0;
}

int op_render(const struct op_policy *p, const struct op_render_env *env, const json_t *owner,
              struct op_rendered *ret, struct diag *d)
{
    struct rctx c = {.p = p, .env = env, .ns = env->namespace_, .d = d};
    struct op_rendered out = {0};
    int r;

    if (!c.ns || !op_valid_label(c.ns))
        return diag_fail(d, -EINVAL, "namespace \"%s\" is not a valid namespace name",
                         c.ns ? c.ns : "");
    if (env->os_tag && *env->os_tag && !op_valid_config_key(env->os_tag))
        return diag_fail(d, -EINVAL, "OS tag \"%s\" is not a valid image tag part", env->os_tag);
    r = owner_refs(owner, &c.owner_refs);
    if (r < 0)
        return r;
    /* Every operand's init containers run the validator's image. */
    r = r_image(&c, OP_VALIDATOR, &c.validator_image);
    if (r < 0)
        goto out;
    out.states = calloc(ARRAY_SIZE(STATES), sizeof(*out.states));
    if (!out.states) {
        r = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < ARRAY_SIZE(STATES); i++) {
        struct op_state *s = &out.states[out.n++];
        s->name = STATES[i].name;
        s->enabled = state_enabled(p, &STATES[i]);
        s->objects = json_array();
        if (!s->objects) {
            r = -ENOMEM;
            goto out;
        }
        c.identity_only = !s->enabled;
        r = STATES[i].fn(&c, s->objects);
        if (r >= 0)
            r = finish(&c, s->objects);
        if (r >= 0 && s->enabled)
            r = absent_objects(&c, STATES[i].fn, s->objects, &s->absent);
        if (r >= 0 && !s->absent && !(s->absent = json_array()))
            r = -ENOMEM;
        if (r < 0) {
            if (r == -ENOMEM)
                diag_fail(d, r, "%s: out of memory", s->name);
            goto out;
        }
    }
    *ret = out;
    out = (struct op_rendered){0};
out:
    op_rendered_release(&out);
    json_decref(c.owner_refs);
    free(c.validator_image);
    return r < 0 ? r : 0;
}

void op_rendered_release(struct op_rendered *r)
{
    for (size_t i = 0; i < r->n; i++) {
        json_decref(r->states[i].objects);
        json_decref(r->states[i].absent);
    }
    free(r->states);
    r->states = NULL;
    r->n = 0;
}

const struct op_state *op_rendered_state(const struct op_rendered *r, const char *name)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->states[i].name, name) == 0)
            return &r->states[i];
    return NULL;
}
