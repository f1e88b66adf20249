/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The NodeFeature output (nfd.k8s-sigs.io/v1alpha1): the object nfd-master turns into node labels
 * when GFD runs with the NodeFeature API, NVIDIA's default. One object per node,
 * "nvidia-features-for-<node>", labelled nfd.node.kubernetes.io/node-name=<node>, its spec the
 * label set and empty features (NVIDIA's GFD, internal/lm/output.go). It is read first and written
 * only when something differs, so a node whose labels stay the same costs one GET per interval;
 * a 409 on update starts over from a fresh read (kube_modify).
 *
 * Owners: when the pod's name is known the object is owned by the pod's DaemonSet (the controller)
 * and the pod, as nfd-worker owns its own NodeFeature, so uninstalling removes it. NVIDIA's GFD
 * sets no owner; nothing reads them but the garbage collector.
 */
#include <errno.h>
#include <string.h>

#include "discover-internal.h"
#include "kube.h"

#define NF_GROUP_VERSION "nfd.k8s-sigs.io/v1alpha1"
#define NF_RESOURCE "nodefeatures"
#define NF_PREFIX "nvidia-features-for-"
#define NF_NODE_LABEL "nfd.node.kubernetes.io/node-name"

struct discover_nf {
    struct kube_client *c;
    char *node, *namespace_, *pod;
    char name[254];
    json_t *owners;  /* ownerReferences once the pod was read; NULL before */
    json_t *pending; /* the spec being published */
    bool busy;
    bool written;         /* the last read-modify-write wrote the object */
    struct nf_call *call; /* the request in flight */
    discover_nf_done_fn fn;
    void *userdata;
};

/* Callbacks of requests still in flight hold this, not the publisher itself: freeing the
 * publisher clears it, and the late callback then only frees the call. */
struct nf_call {
    struct discover_nf *nf;
};

int discover_nf_name(const char *node, char *buf, size_t n)
{
    int k = snprintf(buf, n, NF_PREFIX "%s", node);
    return k < 0 || (size_t)k >= n ? -ENAMETOOLONG : 0;
}

static int nf_path(const struct discover_nf *nf, const char *name, char *buf, size_t n,
                   struct diag *d)
{
    return kube_path(buf, n, NF_GROUP_VERSION, NF_RESOURCE, nf->namespace_, name, d);
}

/* ---- the object ---- */

static json_t *spec_for(const struct discover_labels *l)
{
    json_t *labels = json_object();
    for (size_t i = 0; labels && i < l->n; i++)
        if (json_object_set_new(labels, l->v[i].key, json_string(l->v[i].value)) < 0)
            return json_decref(labels), NULL;
    return json_pack("{s:{s:{},s:{},s:{}},s:o*}", "features", "flags", "attributes", "instances",
                     "labels", labels);
}

static json_t *meta_labels(const struct discover_nf *nf)
{
    return json_pack("{s:s}", NF_NODE_LABEL, nf->node);
}

/* Brings obj to what it should be; 1 when it already was. */
static int converge(struct discover_nf *nf, json_t *obj)
{
    json_t *meta = json_object_get(obj, "metadata");
    if (!json_is_object(meta))
        return -EINVAL;
    json_t *want_labels = meta_labels(nf);
    if (!want_labels)
        return -ENOMEM;
    bool same = json_equal(json_object_get(meta, "labels"), want_labels) &&
                json_equal(json_object_get(obj, "spec"), nf->pending) &&
                (!nf->owners || json_equal(json_object_get(meta, "ownerReferences"), nf->owners));
    if (same) {
        json_decref(want_labels);
        return 1;
    }
    int r = json_object_set_new(meta, "labels", want_labels);
    if (r >= 0 && nf->owners)
        r = json_object_set(meta, "ownerReferences", nf->owners);
    if (r >= 0)
        r = json_object_set(obj, "spec", nf->pending);
    return r < 0 ? -ENOMEM : 0;
}

static json_t *new_object(struct discover_nf *nf)
{
    json_t *obj = json_pack("{s:s,s:s,s:{s:s,s:s,s:o},s:O}", "apiVersion", NF_GROUP_VERSION, "kind",
                            "NodeFeature", "metadata", "name", nf->name, "namespace",
                            nf->namespace_, "labels", meta_labels(nf), "spec", nf->pending);
    if (obj && nf->owners &&
        json_object_set(json_object_get(obj, "metadata"), "ownerReferences", nf->owners) < 0)
        return json_decref(obj), NULL;
    return obj;
}

/* ---- finishing ---- */

static void finish(struct discover_nf *nf, int result, const char *error)
{
    nf->busy = false;
    json_decref(nf->pending);
    nf->pending = NULL;
    nf->fn(result, error, nf->userdata);
}

/* The message for a failed request; RBAC refusals say which permissions are missing. */
static void fail(struct discover_nf *nf, const char *verb, const struct kube_response *res)
{
    char msg[DIAG_MSG_MAX];
    if (res->status == 403)
        snprintf(msg, sizeof(msg),
                 "%s NodeFeature %s/%s: forbidden: %s (the service account needs get, create "
                 "and update on nodefeatures.nfd.k8s-sigs.io in namespace %s)",
                 verb, nf->namespace_, nf->name, res->message, nf->namespace_);
    else
        snprintf(msg, sizeof(msg), "%s NodeFeature %s/%s: %s%s%s", verb, nf->namespace_, nf->name,
                 res->reason && res->reason[0] ? res->reason : "",
                 res->reason && res->reason[0] ? ": " : "", res->message);
    finish(nf, -EIO, msg);
}

static struct discover_nf *call_target(struct nf_call *call)
{
    struct discover_nf *nf = call->nf;
    if (nf)
        nf->call = NULL;
    free(call);
    return nf;
}

static void on_created(const struct kube_response *res, void *userdata)
{
    struct discover_nf *nf = call_target(userdata);
    if (!nf)
        return;
    if (res->status == 201 || res->status == 200)
        finish(nf, DISCOVER_NF_CREATED, NULL);
    else
        fail(nf, "create", res);
}

static int start_call(struct discover_nf *nf, struct nf_call **ret)
{
    struct nf_call *call = calloc(1, sizeof(*call));
    if (!call)
        return -ENOMEM;
    call->nf = nf;
    nf->call = call;
    *ret = call;
    return 0;
}

static void create(struct discover_nf *nf)
{
    char path[512];
    struct diag d;
    diag_init(&d);
    struct nf_call *call = NULL;
    json_t *obj = new_object(nf);
    int r = obj ? nf_path(nf, NULL, path, sizeof(path), &d) : -ENOMEM;
    if (r >= 0)
        r = start_call(nf, &call);
    if (r >= 0)
        r = kube_create(nf->c, path, obj, on_created, call);
    json_decref(obj);
    if (r < 0) {
        if (call)
            call_target(call);
        finish(nf, r, d.msg[0] ? d.msg : strerror(-r));
    }
}

static int on_mutate(json_t *obj, void *userdata)
{
    struct nf_call *call = userdata;
    if (!call->nf)
        return 1;
    int r = converge(call->nf, obj);
    call->nf->written = r == 0;
    return r;
}

static void on_modified(const struct kube_response *res, void *userdata)
{
    struct nf_call *call = userdata;
    struct discover_nf *nf = call->nf;
    if (nf && res->status == 404) {
        call_target(call);
        create(nf);
        return;
    }
    call_target(call);
    if (!nf)
        return;
    if (res->status != 200 && res->status != 201) {
        fail(nf, "update", res);
        return;
    }
    /* kube_modify hands back the object as read when nothing needed writing; an object that was
     * written comes back with a new resourceVersion, which the read one does not know. */
    finish(nf, nf->written ? DISCOVER_NF_UPDATED : DISCOVER_NF_UNCHANGED, NULL);
}

static void modify(struct discover_nf *nf)
{
    char path[512];
    struct diag d;
    diag_init(&d);
    struct nf_call *call = NULL;
    nf->written = false;
    int r = nf_path(nf, nf->name, path, sizeof(path), &d);
    if (r >= 0)
        r = start_call(nf, &call);
    if (r >= 0)
        r = kube_modify(nf->c, path, on_mutate, on_modified, call);
    if (r < 0) {
        if (call)
            call_target(call);
        finish(nf, r, d.msg[0] ? d.msg : strerror(-r));
    }
}

/* ---- owners ---- */

/* The pod's controller (its DaemonSet) as the controlling owner, then the pod. */
static json_t *owners_of(const json_t *pod)
{
    const json_t *meta = json_object_get(pod, "metadata");
    const char *uid = json_string_value(json_object_get(meta, "uid"));
    const char *name = json_string_value(json_object_get(meta, "name"));
    if (!uid || !name)
        return NULL;
    json_t *out = json_array();
    size_t i;
    const json_t *ref;
    json_array_foreach(json_object_get(meta, "ownerReferences"), i, ref)
    {
        if (!json_is_true(json_object_get(ref, "controller")))
            continue;
        json_t *owner =
            json_pack("{s:O,s:O,s:O,s:O,s:b,s:b}", "apiVersion", json_object_get(ref, "apiVersion"),
                      "kind", json_object_get(ref, "kind"), "name", json_object_get(ref, "name"),
                      "uid", json_object_get(ref, "uid"), "controller", 1, "blockOwnerDeletion", 1);
        if (owner)
            json_array_append_new(out, owner);
    }
    json_array_append_new(out, json_pack("{s:s,s:s,s:s,s:s}", "apiVersion", "v1", "kind", "Pod",
                                         "name", name, "uid", uid));
    return out;
}

static void on_pod(const struct kube_response *res, void *userdata)
{
    struct discover_nf *nf = call_target(userdata);
    if (!nf)
        return;
    if (res->status != 200) {
        char msg[DIAG_MSG_MAX];
        snprintf(msg, sizeof(msg), "read pod %s/%s for the NodeFeature's owners: %s%s%s",
                 nf->namespace_, nf->pod, res->reason && res->reason[0] ? res->reason : "",
                 res->reason && res->reason[0] ? ": " : "", res->message);
        finish(nf, -EIO, msg);
        return;
    }
    nf->owners = owners_of(res->body);
    if (!nf->owners) {
        finish(nf, -EINVAL, "the pod has no name or uid");
        return;
    }
    modify(nf);
}

static void read_owners(struct discover_nf *nf)
{
    char path[512];
    struct diag d;
    diag_init(&d);
    struct nf_call *call = NULL;
    int r = kube_path(path, sizeof(path), "v1", "pods", nf->namespace_, nf->pod, &d);
    if (r >= 0)
        r = start_call(nf, &call);
    if (r >= 0)
        r = kube_get(nf->c, path, on_pod, call);
    if (r < 0) {
        if (call)
            call_target(call);
        finish(nf, r, d.msg[0] ? d.msg : strerror(-r));
    }
}

/* ---- the publisher ---- */

int discover_nf_publish(struct discover_nf *nf, const struct discover_labels *l,
                        discover_nf_done_fn fn, void *userdata)
{
    if (nf->busy)
        return -EBUSY;
    nf->pending = spec_for(l);
    if (!nf->pending)
        return -ENOMEM;
    nf->busy = true;
    nf->fn = fn;
    nf->userdata = userdata;
    /* The kube client never calls back inside the call that starts a request, so neither do we. */
    if (nf->pod && !nf->owners)
        read_owners(nf);
    else
        modify(nf);
    return 0;
}

struct discover_nf *discover_nf_free(struct discover_nf *nf)
{
    if (!nf)
        return NULL;
    if (nf->call)
        nf->call->nf = NULL;
    json_decref(nf->owners);
    json_decref(nf->pending);
    free(nf->node);
    free(nf->namespace_);
    free(nf->pod);
    free(nf);
    return NULL;
}

int discover_nf_new(struct kube_client *c, const struct discover_nf_options *o,
                    struct discover_nf **ret)
{
    _cleanup_(discover_nf_freep) struct discover_nf *nf = calloc(1, sizeof(*nf));
    if (!nf)
        return -ENOMEM;
    nf->c = c;
    nf->node = strdup(o->node);
    nf->namespace_ = strdup(o->namespace_);
    nf->pod = o->pod && o->pod[0] ? strdup(o->pod) : NULL;
    if (!nf->node || !nf->namespace_ || (o->pod && o->pod[0] && !nf->pod))
        return -ENOMEM;
    int r = discover_nf_name(o->node, nf->name, sizeof(nf->name));
    if (r < 0)
        return r;
    *ret = TAKE_PTR(nf);
    return 0;
}
