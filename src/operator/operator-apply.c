/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Applying a rendered object, and deleting one of a disabled state, on the API server.
 *
 * Apply: GET; NotFound → create; found → compare the live nvidia.com/last-applied-hash with the
 * rendered one and update (PUT with the live resourceVersion) only when they differ, so an idle
 * operator writes nothing (NVIDIA's operator updates every object but its DaemonSets on every
 * pass). A 409 (someone wrote in between) starts over from the GET, at most three times. The
 * update keeps what others own on the live object: annotations the renderer does not set,
 * finalizers, and a Service's allocated cluster IPs (immutable once set). ServiceAccounts are
 * created only, as NVIDIA's are (their token secrets are the API server's business). A Namespace
 * (the pre-requisites state's PSA labels) is never created, owned or deleted: its labels are
 * merge-patched when they differ.
 *
 * Delete: GET; NotFound → nothing; an object a ClusterPolicy controls → DELETE; anything else is
 * left alone (someone else's object with the same name).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "operator-ctl.h"
#include "operator-render.h"

#define TRIES_MAX 3

/* ---- paths ---- */

struct kind {
    const char *kind;
    const char *group; /* "" for the core group */
    const char *plural;
    bool namespaced;
};

static const struct kind KINDS[] = {
    {"Namespace", "", "namespaces", false},
    {"ServiceAccount", "", "serviceaccounts", true},
    {"ConfigMap", "", "configmaps", true},
    {"Secret", "", "secrets", true},
    {"Service", "", "services", true},
    {"Role", "rbac.authorization.k8s.io", "roles", true},
    {"RoleBinding", "rbac.authorization.k8s.io", "rolebindings", true},
    {"ClusterRole", "rbac.authorization.k8s.io", "clusterroles", false},
    {"ClusterRoleBinding", "rbac.authorization.k8s.io", "clusterrolebindings", false},
    {"DaemonSet", "apps", "daemonsets", true},
    {"RuntimeClass", "node.k8s.io", "runtimeclasses", false},
    {"ServiceMonitor", "monitoring.coreos.com", "servicemonitors", true},
};

static const char *str_at(const json_t *obj, const char *a, const char *b)
{
    return json_string_value(json_object_get(json_object_get(obj, a), b));
}

int op_object_path(const json_t *obj, bool collection, char *buf, size_t n, struct diag *d)
{
    const char *api = json_string_value(json_object_get(obj, "apiVersion"));
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    const char *name = str_at(obj, "metadata", "name");
    const char *ns = str_at(obj, "metadata", "namespace");
    if (!api || !kind || !name)
        return diag_fail(d, -EINVAL, "an object without apiVersion, kind or metadata.name");
    const char *slash = strchr(api, '/');
    size_t glen = slash ? (size_t)(slash - api) : 0;
    for (size_t i = 0; i < ARRAY_SIZE(KINDS); i++) {
        const struct kind *k = &KINDS[i];
        if (strcmp(k->kind, kind) != 0 || strlen(k->group) != glen ||
            strncmp(k->group, api, glen) != 0)
            continue;
        if (k->namespaced && (!ns || !*ns))
            return diag_fail(d, -EINVAL, "%s %s has no namespace", kind, name);
        return kube_path(buf, n, api, k->plural, k->namespaced ? ns : NULL,
                         collection ? NULL : name, d);
    }
    return diag_fail(d, -EINVAL, "%s %s: kind %s is not one the operator applies", api, name, kind);
}

bool op_owned_by_policy(const json_t *obj)
{
    size_t i;
    const json_t *ref;
    json_array_foreach(json_object_get(json_object_get(obj, "metadata"), "ownerReferences"), i, ref)
    {
        const char *api = json_string_value(json_object_get(ref, "apiVersion"));
        const char *kind = json_string_value(json_object_get(ref, "kind"));
        if (json_is_true(json_object_get(ref, "controller")) && api &&
            strncmp(api, "nvidia.com/", 11) == 0 && kind && strcmp(kind, "ClusterPolicy") == 0)
            return true;
    }
    return false;
}

const char *op_apply_result_name(enum op_apply_result r)
{
    static const char *const names[] = {"unchanged", "created", "updated",
                                        "deleted",   "absent",  "not owned"};
    return (size_t)r < ARRAY_SIZE(names) ? names[r] : "?";
}

/* ---- one apply or delete ---- */

struct apply_op {
    struct op_inflight link; /* first: the list frees the whole */
    struct kube_client *kube;
    json_t *obj;
    bool delete_;
    int tries;
    char path[512], collection[512];
    char what[400]; /* "DaemonSet gpu-operator/nvidia-driver-daemonset", for messages */
    struct op_write_counts *writes;
    op_apply_done_fn fn;
    void *userdata;
};

static void op_free(struct op_inflight *link)
{
    struct apply_op *op = (struct apply_op *)link;
    json_decref(op->obj);
    free(op);
}

static void finish(struct apply_op *op, int result, const json_t *live, const char *error)
{
    op_inflight_remove(&op->link);
    op->fn(result, live, error, op->userdata);
    op_free(&op->link);
}

static void fail(struct apply_op *op, const char *verb, const struct kube_response *res)
{
    char msg[DIAG_MSG_MAX];
    if (res->status)
        snprintf(msg, sizeof(msg), "%s %s: %s%s%s", verb, op->what,
                 res->reason && res->reason[0] ? res->reason : "",
                 res->reason && res->reason[0] ? ": " : "", res->message);
    else
        snprintf(msg, sizeof(msg), "%s %s: %s", verb, op->what, res->message);
    finish(op, -EIO, NULL, msg);
}

static void fail_errno(struct apply_op *op, const char *verb, int r)
{
    char msg[DIAG_MSG_MAX];
    snprintf(msg, sizeof(msg), "%s %s: %s", verb, op->what, strerror(-r));
    finish(op, r, NULL, msg);
}

static void start_get(struct apply_op *op);

/* Counts a write of the kind field names (writes may be NULL). */
#define COUNT(op, field)                                                                           \
    do {                                                                                           \
        if ((op)->writes)                                                                          \
            (op)->writes->field++;                                                                 \
    } while (0)

static void on_written(const struct kube_response *res, void *userdata)
{
    struct apply_op *op = userdata;
    if (res->status == 409 && ++op->tries < TRIES_MAX) {
        start_get(op); /* AlreadyExists or Conflict: someone wrote first; read again */
        return;
    }
    if (res->status == 200 || res->status == 201)
        finish(op, OP_APPLY_UPDATED, res->body, NULL);
    else
        fail(op, res->status == 409 ? "write (conflicts)" : "write", res);
}

static void on_created(const struct kube_response *res, void *userdata)
{
    struct apply_op *op = userdata;
    if (res->status == 200 || res->status == 201) {
        finish(op, OP_APPLY_CREATED, res->body, NULL);
        return;
    }
    on_written(res, userdata);
}

static void on_deleted(const struct kube_response *res, void *userdata)
{
    struct apply_op *op = userdata;
    if (res->status == 404)
        finish(op, OP_APPLY_ABSENT, NULL, NULL);
    else if (res->status == 200 || res->status == 202)
        finish(op, OP_APPLY_DELETED, NULL, NULL);
    else
        fail(op, "delete", res);
}

static void create(struct apply_op *op)
{
    COUNT(op, create);
    int r = kube_create(op->kube, op->collection, op->obj, on_created, op);
    if (r < 0)
        fail_errno(op, "create", r);
}

/* The body of an update: the rendered object over what others own on the live one. */
static json_t *update_body(const json_t *rendered, const json_t *live)
{
    json_t *obj = json_deep_copy(rendered);
    json_t *meta = json_object_get(obj, "metadata");
    const json_t *live_meta = json_object_get(live, "metadata");
    if (!obj || !json_is_object(meta))
        return json_decref(obj), NULL;
    int r = json_object_set(meta, "resourceVersion", json_object_get(live_meta, "resourceVersion"));
    const json_t *live_ann = json_object_get(live_meta, "annotations");
    if (r >= 0 && json_is_object(live_ann)) {
        json_t *ann = json_deep_copy(live_ann);
        json_t *mine = json_object_get(meta, "annotations");
        if (ann && json_is_object(mine))
            r = json_object_update(ann, mine);
        r = r < 0 ? r : json_object_set_new(meta, "annotations", ann);
    }
    const json_t *fin = json_object_get(live_meta, "finalizers");
    if (r >= 0 && fin && !json_object_get(meta, "finalizers"))
        r = json_object_set(meta, "finalizers", (json_t *)fin);
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    json_t *spec = json_object_get(obj, "spec");
    const json_t *live_spec = json_object_get(live, "spec");
    if (r >= 0 && kind && strcmp(kind, "Service") == 0 && json_is_object(spec)) {
        static const char *const keep[] = {"clusterIP", "clusterIPs", "healthCheckNodePort"};
        for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(keep); i++) {
            const json_t *v = json_object_get(live_spec, keep[i]);
            if (v && !json_object_get(spec, keep[i]))
                r = json_object_set(spec, keep[i], (json_t *)v);
        }
    }
    if (r < 0)
        return json_decref(obj), NULL;
    return obj;
}

/* The Namespace's labels the rendered object asks for, as a patch; NULL when they are there. */
static json_t *namespace_patch(const json_t *rendered, const json_t *live)
{
    const json_t *want = json_object_get(json_object_get(rendered, "metadata"), "labels");
    const json_t *have = json_object_get(json_object_get(live, "metadata"), "labels");
    const char *key;
    const json_t *v;
    bool differs = false;
    json_object_foreach((json_t *)want, key, v)
    {
        if (!json_equal(json_object_get(have, key), v))
            differs = true;
    }
    return differs ? json_pack("{s:{s:O}}", "metadata", "labels", want) : NULL;
}

static void on_got(const struct kube_response *res, void *userdata)
{
    struct apply_op *op = userdata;
    const char *kind = json_string_value(json_object_get(op->obj, "kind"));
    bool is_ns = kind && strcmp(kind, "Namespace") == 0;
    int r;
    if (res->status == 404) {
        if (op->delete_)
            finish(op, OP_APPLY_ABSENT, NULL, NULL);
        else if (is_ns)
            finish(op, -ENOENT, NULL, "the operator namespace does not exist");
        else
            create(op);
        return;
    }
    if (res->status != 200) {
        fail(op, "get", res);
        return;
    }
    if (op->delete_) {
        if (is_ns || !op_owned_by_policy(res->body)) {
            finish(op, OP_APPLY_NOT_OWNED, res->body, NULL);
            return;
        }
        COUNT(op, delete_);
        r = kube_delete(op->kube, op->path, on_deleted, op);
        if (r < 0)
            fail_errno(op, "delete", r);
        return;
    }
    if (is_ns) {
        _cleanup_json_ json_t *patch = namespace_patch(op->obj, res->body);
        if (!patch) {
            finish(op, OP_APPLY_UNCHANGED, res->body, NULL);
            return;
        }
        COUNT(op, patch);
        r = kube_merge_patch(op->kube, op->path, patch, on_written, op);
        if (r < 0)
            fail_errno(op, "patch", r);
        return;
    }
    const char *want = json_string_value(json_object_get(
        json_object_get(json_object_get(op->obj, "metadata"), "annotations"), OP_HASH_ANNOTATION));
    const char *have = json_string_value(
        json_object_get(json_object_get(json_object_get(res->body, "metadata"), "annotations"),
                        OP_HASH_ANNOTATION));
    if ((kind && strcmp(kind, "ServiceAccount") == 0) || (want && have && !strcmp(want, have))) {
        finish(op, OP_APPLY_UNCHANGED, res->body, NULL);
        return;
    }
    _cleanup_json_ json_t *body = update_body(op->obj, res->body);
    if (!body) {
        fail_errno(op, "update", -ENOMEM);
        return;
    }
    COUNT(op, update);
    r = kube_update(op->kube, op->path, body, on_written, op);
    if (r < 0)
        fail_errno(op, "update", r);
}

static void start_get(struct apply_op *op)
{
    int r = kube_get(op->kube, op->path, on_got, op);
    if (r < 0)
        fail_errno(op, "get", r);
}

static int start(struct kube_client *kube, struct op_inflight *inflight, const json_t *obj,
                 bool delete_, struct op_write_counts *writes, op_apply_done_fn fn, void *userdata)
{
    struct diag d;
    diag_init(&d);
    struct apply_op *op = calloc(1, sizeof(*op));
    if (!op)
        return -ENOMEM;
    *op = (struct apply_op){
        .kube = kube, .delete_ = delete_, .writes = writes, .fn = fn, .userdata = userdata};
    int r = op_object_path(obj, false, op->path, sizeof(op->path), &d);
    if (r >= 0)
        r = op_object_path(obj, true, op->collection, sizeof(op->collection), &d);
    op->obj = r >= 0 ? json_deep_copy(obj) : NULL;
    if (r >= 0 && !op->obj)
        r = -ENOMEM;
    if (r >= 0) {
        const char *ns = str_at(obj, "metadata", "namespace");
        snprintf(op->what, sizeof(op->what), "%s %s%s%s",
                 json_string_value(json_object_get(obj, "kind")), ns ? ns : "", ns ? "/" : "",
                 str_at(obj, "metadata", "name"));
        r = kube_get(kube, op->path, on_got, op);
    }
    if (r < 0) {
        json_decref(op->obj);
        free(op);
        return r;
    }
    op_inflight_add(inflight, &op->link, op_free);
    return 0;
}

int op_apply(struct kube_client *kube, struct op_inflight *inflight, const json_t *obj,
             struct op_write_counts *writes, op_apply_done_fn fn, void *userdata)
{
    return start(kube, inflight, obj, false, writes, fn, userdata);
}

int op_delete(struct kube_client *kube, struct op_inflight *inflight, const json_t *obj,
              struct op_write_counts *writes, op_apply_done_fn fn, void *userdata)
{
    return start(kube, inflight, obj, true, writes, fn, userdata);
}

/* ---- requests in flight ---- */

void op_inflight_init(struct op_inflight *head)
{
    head->prev = head->next = head;
    head->free_fn = NULL;
}

void op_inflight_add(struct op_inflight *head, struct op_inflight *link,
                     void (*free_fn)(struct op_inflight *link))
{
    link->free_fn = free_fn;
    link->next = head->next;
    link->prev = head;
    head->next->prev = link;
    head->next = link;
}

void op_inflight_remove(struct op_inflight *link)
{
    if (!link->next)
        return;
    link->prev->next = link->next;
    link->next->prev = link->prev;
    link->prev = link->next = NULL;
}

void op_inflight_free_all(struct op_inflight *head)
{
    while (head->next && head->next != head) {
        struct op_inflight *link = head->next;
        op_inflight_remove(link);
        link->free_fn(link);
    }
}
