/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The DRA services the kubelet calls (kubelet-apis.md §5): NodePrepareResources and
 * NodeUnprepareResources under both the v1 and the v1beta1 package paths. One call carries the
 * claims of one pod; each claim goes to the preparer on its own, and the answer is sent once every
 * claim has one, with an entry for every requested UID (a failed claim carries its error there).
 * Only a request that cannot be answered claim by claim — a claim without UID, namespace or name,
 * or a UID twice — fails as a whole, with INVALID_ARGUMENT. A call whose client went away still
 * lets its claims finish (their effects are idempotent), and nobody is answered.
 *
 * v1beta1's messages are v1's without Device.share_id (field 5): the same fields, the same numbers.
 * Both paths are served with v1's generated messages, and a v1beta1 answer never sets share_id, so
 * its bytes are exactly what v1beta1's own messages would give.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "dra-internal.h"
#include "dra/v1/api.pb-c.h"

#define V1 "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"
#define V1BETA1 "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/"

typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim Claim;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Device Device;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest PrepareRequest;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesRequest UnprepareRequest;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse PrepareResponse;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse__ClaimsEntry
    PrepareEntry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourceResponse PrepareAnswer;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse UnprepareResponse;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse__ClaimsEntry
    UnprepareEntry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourceResponse UnprepareAnswer;

enum api {
    API_V1,
    API_V1BETA1,
};

/* One call in progress. */
struct batch {
    struct rpc_call *call; /* NULL once the client is gone */
    enum api api;
    bool prepare;
    size_t n;
    size_t pending; /* claims without an answer, plus one while they are being started */
    char **uids;
    char **errors;     /* per claim: NULL, or the error */
    json_t **devices;  /* per claim: the devices (a reference), or NULL */
    uint64_t start_ms; /* for the log */
};

struct slot {
    struct batch *b;
    size_t i;
};

static void batch_free(struct batch *b)
{
    for (size_t i = 0; i < b->n; i++) {
        free(b->uids[i]);
        free(b->errors[i]);
        json_decref(b->devices[i]);
    }
    free(b->uids);
    free(b->errors);
    free(b->devices);
    free(b);
}

static void on_cancel(struct rpc_call *call, void *userdata)
{
    struct batch *b = userdata;
    b->call = NULL;
}

/* ---- answers ---- */

/* The strings of a JSON array of strings (borrowed), or NULL for an empty one. */
static char **strings(json_t *arr, size_t *n)
{
    size_t len = json_array_size(arr);
    *n = 0;
    if (len == 0)
        return NULL;
    char **v = calloc(len, sizeof(*v));
    if (!v)
        return NULL;
    for (size_t i = 0; i < len; i++) {
        const char *s = json_string_value(json_array_get(arr, i));
        v[i] = (char *)(s ? s : "");
    }
    *n = len;
    return v;
}

static const char *str(json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : "";
}

/* A Device of the answer from a checkpoint device entry; share_id only for v1. */
static int fill(Device *d, json_t *e, bool share_id)
{
    const char *share = json_string_value(json_object_get(e, "shareID"));
    *d = (Device)K8S__IO__KUBELET__PKG__APIS__DRA__V1__DEVICE__INIT;
    d->request_names = strings(json_object_get(e, "requests"), &d->n_request_names);
    d->cdi_device_ids = strings(json_object_get(e, "cdiDeviceIDs"), &d->n_cdi_device_ids);
    if ((json_array_size(json_object_get(e, "requests")) && !d->request_names) ||
        (json_array_size(json_object_get(e, "cdiDeviceIDs")) && !d->cdi_device_ids))
        return -ENOMEM;
    d->pool_name = (char *)str(e, "poolName");
    d->device_name = (char *)str(e, "deviceName");
    if (share && share_id) {
        d->_share_id_case = K8S__IO__KUBELET__PKG__APIS__DRA__V1__DEVICE___SHARE_ID_SHARE_ID;
        d->share_id = (char *)share;
    }
    return 0;
}

static void device_free(Device *d)
{
    if (!d)
        return;
    free(d->request_names);
    free(d->cdi_device_ids);
    free(d);
}

/* Claim i's devices: *ret (NULL when none), 0 or -ENOMEM. */
static int answer_devices(const struct batch *b, size_t i, Device ***ret, size_t *n)
{
    size_t nd = b->errors[i] ? 0 : json_array_size(b->devices[i]);
    Device **devs = nd ? calloc(nd, sizeof(*devs)) : NULL;

    *ret = devs;
    *n = 0;
    if (nd && !devs)
        return -ENOMEM;
    for (size_t k = 0; k < nd; k++) {
        devs[k] = calloc(1, sizeof(*devs[k]));
        if (!devs[k])
            return -ENOMEM;
        *n = k + 1;
        if (fill(devs[k], json_array_get(b->devices[i], k), b->api == API_V1) < 0)
            return -ENOMEM;
    }
    return 0;
}

static void prepare_reply(struct batch *b)
{
    PrepareResponse resp =
        K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCES_RESPONSE__INIT;
    size_t n = b->n;
    PrepareEntry *entries = calloc(n ? n : 1, sizeof(*entries));
    PrepareEntry **eptrs = calloc(n ? n : 1, sizeof(*eptrs));
    PrepareAnswer *vals = calloc(n ? n : 1, sizeof(*vals));
    bool ok = entries && eptrs && vals;

    for (size_t i = 0; ok && i < n; i++) {
        vals[i] = (PrepareAnswer)
            K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCE_RESPONSE__INIT;
        vals[i].error = b->errors[i] ? b->errors[i] : (char *)"";
        ok = answer_devices(b, i, &vals[i].devices, &vals[i].n_devices) == 0;
        entries[i] = (PrepareEntry)
            K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCES_RESPONSE__CLAIMS_ENTRY__INIT;
        entries[i].key = b->uids[i];
        entries[i].value = &vals[i];
        eptrs[i] = &entries[i];
    }
    resp.n_claims = n;
    resp.claims = eptrs;
    if (!ok)
        rpc_call_finish(b->call, RPC_INTERNAL, "out of memory");
    else if (rpc_call_reply(b->call, &resp.base) < 0)
        log_warn("cannot send the NodePrepareResources answer");
    for (size_t i = 0; vals && i < n; i++) {
        for (size_t k = 0; k < vals[i].n_devices; k++)
            device_free(vals[i].devices[k]);
        free(vals[i].devices);
    }
    free(vals);
    free(eptrs);
    free(entries);
}

static void unprepare_reply(struct batch *b)
{
    UnprepareResponse resp =
        K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCES_RESPONSE__INIT;
    size_t n = b->n;
    UnprepareEntry *entries = calloc(n ? n : 1, sizeof(*entries));
    UnprepareEntry **eptrs = calloc(n ? n : 1, sizeof(*eptrs));
    UnprepareAnswer *vals = calloc(n ? n : 1, sizeof(*vals));

    if (!entries || !eptrs || !vals) {
        rpc_call_finish(b->call, RPC_INTERNAL, "out of memory");
    } else {
        for (size_t i = 0; i < n; i++) {
            vals[i] = (UnprepareAnswer)
                K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCE_RESPONSE__INIT;
            vals[i].error = b->errors[i] ? b->errors[i] : (char *)"";
            entries[i] = (UnprepareEntry)
                K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCES_RESPONSE__CLAIMS_ENTRY__INIT;
            entries[i].key = b->uids[i];
            entries[i].value = &vals[i];
            eptrs[i] = &entries[i];
        }
        resp.n_claims = n;
        resp.claims = eptrs;
        if (rpc_call_reply(b->call, &resp.base) < 0)
            log_warn("cannot send the NodeUnprepareResources answer");
    }
    free(vals);
    free(eptrs);
    free(entries);
}

static void one_less(struct batch *b)
{
    if (--b->pending > 0)
        return;
    if (b->call && b->prepare)
        prepare_reply(b);
    else if (b->call)
        unprepare_reply(b);
    else
        log_info("the kubelet went away before the answer; claims were handled anyway", "claims",
                 LOG_INT(b->n));
    batch_free(b);
}

static void claim_done(const struct dra_claim_result *res, void *userdata)
{
    struct slot *s = userdata;
    struct batch *b = s->b;
    size_t i = s->i;
    free(s);
    if (res->error) {
        b->errors[i] = strdup(res->error);
        if (!b->errors[i])
            b->errors[i] = strdup("out of memory");
    } else {
        b->devices[i] = json_incref(res->devices);
    }
    one_less(b);
}

/* ---- requests ---- */

/* Both request messages are {base, n_claims, claims}: read them through the prepare type. */
_Static_assert(offsetof(PrepareRequest, claims) == offsetof(UnprepareRequest, claims) &&
                   offsetof(PrepareRequest, n_claims) == offsetof(UnprepareRequest, n_claims),
               "NodePrepareResourcesRequest and NodeUnprepareResourcesRequest differ");

static const Claim *claim_at(const ProtobufCMessage *req, size_t i)
{
    return ((const PrepareRequest *)req)->claims[i];
}

static size_t n_claims(const ProtobufCMessage *req)
{
    return ((const PrepareRequest *)req)->n_claims;
}

/* A request the claims cannot be answered one by one for: the message for INVALID_ARGUMENT. */
static bool malformed(const ProtobufCMessage *req, char *msg, size_t len)
{
    size_t n = n_claims(req);
    for (size_t i = 0; i < n; i++) {
        const Claim *c = claim_at(req, i);
        if (!c || !c->uid || !c->uid[0]) {
            snprintf(msg, len, "claim #%zu: uid is required", i);
            return true;
        }
        if (!c->namespace_ || !c->namespace_[0] || !c->name || !c->name[0]) {
            snprintf(msg, len, "claim %s: namespace and name are required", c->uid);
            return true;
        }
        for (size_t k = 0; k < i; k++) {
            if (strcmp(claim_at(req, k)->uid, c->uid) == 0) {
                snprintf(msg, len, "claim %s is listed twice", c->uid);
                return true;
            }
        }
    }
    return false;
}

static struct batch *batch_new(struct rpc_call *call, enum api api, bool prepare, size_t n)
{
    struct batch *b = calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    *b = (struct batch){.call = call, .api = api, .prepare = prepare, .n = n, .pending = 1};
    b->uids = calloc(n ? n : 1, sizeof(*b->uids));
    b->errors = calloc(n ? n : 1, sizeof(*b->errors));
    b->devices = calloc(n ? n : 1, sizeof(*b->devices));
    if (!b->uids || !b->errors || !b->devices) {
        b->n = 0;
        batch_free(b);
        return NULL;
    }
    return b;
}

static void handle(struct rpc_call *call, const ProtobufCMessage *req, struct dra_preparer *p,
                   enum api api, bool prepare)
{
    char msg[512];
    if (malformed(req, msg, sizeof(msg))) {
        log_warn("malformed DRA request", "path", rpc_call_path(call), "error", msg);
        rpc_call_finish(call, RPC_INVALID_ARGUMENT, "%s", msg);
        return;
    }
    size_t n = n_claims(req);
    struct batch *b = batch_new(call, api, prepare, n);
    if (!b) {
        rpc_call_finish(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    rpc_call_on_cancel(call, on_cancel, b);
    log_debug(1, "DRA request", "path", rpc_call_path(call), "claims", LOG_INT(n));
    for (size_t i = 0; i < n; i++) {
        const Claim *c = claim_at(req, i);
        struct slot *s = calloc(1, sizeof(*s));
        b->uids[i] = strdup(c->uid);
        if (!s || !b->uids[i]) {
            free(s);
            b->errors[i] = strdup("out of memory");
            continue;
        }
        *s = (struct slot){.b = b, .i = i};
        b->pending++;
        if (prepare)
            dra_prepare_claim(p, c->namespace_, c->name, c->uid, claim_done, s);
        else
            dra_unprepare_claim(p, c->namespace_, c->name, c->uid, claim_done, s);
    }
    one_less(b); /* the claims may all have been answered already */
}

static void on_prepare_v1(struct rpc_call *call, const ProtobufCMessage *req, void *userdata)
{
    handle(call, req, userdata, API_V1, true);
}

static void on_unprepare_v1(struct rpc_call *call, const ProtobufCMessage *req, void *userdata)
{
    handle(call, req, userdata, API_V1, false);
}

static void on_prepare_v1beta1(struct rpc_call *call, const ProtobufCMessage *req, void *userdata)
{
    handle(call, req, userdata, API_V1BETA1, true);
}

static void on_unprepare_v1beta1(struct rpc_call *call, const ProtobufCMessage *req, void *userdata)
{
    handle(call, req, userdata, API_V1BETA1, false);
}

int dra_service_add(struct rpc_server *srv, struct dra_preparer *p)
{
    const struct rpc_method methods[] = {
        {V1 "NodePrepareResources",
         &k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__descriptor,
         &k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__descriptor, false,
         on_prepare_v1, p},
        {V1 "NodeUnprepareResources",
         &k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_request__descriptor,
         &k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__descriptor,
         false, on_unprepare_v1, p},
        /* v1beta1 on the wire is v1 without share_id (see the top of this file) */
        {V1BETA1 "NodePrepareResources",
         &k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__descriptor,
         &k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__descriptor, false,
         on_prepare_v1beta1, p},
        {V1BETA1 "NodeUnprepareResources",
         &k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_request__descriptor,
         &k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__descriptor,
         false, on_unprepare_v1beta1, p},
    };
    for (size_t i = 0; i < ARRAY_SIZE(methods); i++) {
        int r = rpc_server_add_method(srv, &methods[i]);
        if (r < 0)
            return r;
    }
    return 0;
}
