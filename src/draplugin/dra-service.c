/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The DRA services the kubelet calls (kubelet-apis.md §5): NodePrepareResources and
 * NodeUnprepareResources under both the v1 and the v1beta1 package paths. One call carries the
 * claims of one pod; each claim goes to the preparer on its own, and the answer is sent once every
 * claim has one, with an entry for every requested UID (a failed claim carries its error there).
 * Only a request that cannot be answered claim by claim — a claim without UID, namespace or name,
 * or a UID twice — fails as a whole, with INVALID_ARGUMENT. A call whose client went away still
 * lets its claims finish (their effects are idempotent), and nobody is answered.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "dra-internal.h"
#include "dra/v1/api.pb-c.h"
#include "dra/v1beta1/api.pb-c.h"

#define V1 "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"
#define V1BETA1 "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/"

typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim ClaimV1;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Device DeviceV1;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1beta1__Device DeviceV1b;

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

static int fill_v1(DeviceV1 *d, json_t *e)
{
    const char *share = json_string_value(json_object_get(e, "shareID"));
    *d = (DeviceV1)K8S__IO__KUBELET__PKG__APIS__DRA__V1__DEVICE__INIT;
    d->request_names = strings(json_object_get(e, "requests"), &d->n_request_names);
    d->cdi_device_ids = strings(json_object_get(e, "cdiDeviceIDs"), &d->n_cdi_device_ids);
    d->pool_name = (char *)str(e, "poolName");
    d->device_name = (char *)str(e, "deviceName");
    if (share) {
        d->_share_id_case = K8S__IO__KUBELET__PKG__APIS__DRA__V1__DEVICE___SHARE_ID_SHARE_ID;
        d->share_id = (char *)share;
    }
    return 0;
}

static int fill_v1beta1(DeviceV1b *d, json_t *e)
{
    *d = (DeviceV1b)K8S__IO__KUBELET__PKG__APIS__DRA__V1BETA1__DEVICE__INIT;
    d->request_names = strings(json_object_get(e, "requests"), &d->n_request_names);
    d->cdi_device_ids = strings(json_object_get(e, "cdiDeviceIDs"), &d->n_cdi_device_ids);
    d->pool_name = (char *)str(e, "poolName");
    d->device_name = (char *)str(e, "deviceName");
    return 0;
}

/*
 * The prepare answer. Both versions have the same shape; the macro spells it out once per
 * version's generated names (P: the type prefix, M: the macro prefix, FILL: the device filler).
 */
#define PREPARE_REPLY(P, M, FILL)                                                                  \
    do {                                                                                           \
        P##NodePrepareResourcesResponse resp = M##NODE_PREPARE_RESOURCES_RESPONSE__INIT;           \
        P##NodePrepareResourcesResponse__ClaimsEntry *entries = calloc(n, sizeof(*entries));       \
        P##NodePrepareResourcesResponse__ClaimsEntry **eptrs = calloc(n, sizeof(*eptrs));          \
        P##NodePrepareResourceResponse *vals = calloc(n, sizeof(*vals));                           \
        P##Device ***devs = calloc(n, sizeof(*devs));                                              \
        int ok = entries && eptrs && vals && devs;                                                 \
        for (size_t i = 0; ok && i < n; i++) {                                                     \
            size_t nd = b->errors[i] ? 0 : json_array_size(b->devices[i]);                         \
            vals[i] = (P##NodePrepareResourceResponse)M##NODE_PREPARE_RESOURCE_RESPONSE__INIT;     \
            vals[i].error = b->errors[i] ? b->errors[i] : (char *)"";                              \
            devs[i] = nd ? calloc(nd, sizeof(*devs[i])) : NULL;                                    \
            for (size_t k = 0; devs[i] && k < nd; k++) {                                           \
                devs[i][k] = calloc(1, sizeof(*devs[i][k]));                                       \
                if (!devs[i][k] || FILL(devs[i][k], json_array_get(b->devices[i], k)) < 0) {       \
                    ok = 0;                                                                        \
                    break;                                                                         \
                }                                                                                  \
            }                                                                                      \
            if (nd && !devs[i])                                                                    \
                ok = 0;                                                                            \
            vals[i].n_devices = ok ? nd : 0;                                                       \
            vals[i].devices = devs[i];                                                             \
            entries[i] = (P##NodePrepareResourcesResponse__ClaimsEntry)                            \
                M##NODE_PREPARE_RESOURCES_RESPONSE__CLAIMS_ENTRY__INIT;                            \
            entries[i].key = b->uids[i];                                                           \
            entries[i].value = &vals[i];                                                           \
            eptrs[i] = &entries[i];                                                                \
        }                                                                                          \
        resp.n_claims = n;                                                                         \
        resp.claims = eptrs;                                                                       \
        if (!ok)                                                                                   \
            rpc_call_finish(b->call, RPC_INTERNAL, "out of memory");                               \
        else if (rpc_call_reply(b->call, &resp.base) < 0)                                          \
            log_warn("cannot send the NodePrepareResources answer");                               \
        for (size_t i = 0; devs && i < n; i++) {                                                   \
            size_t nd = b->errors[i] ? 0 : json_array_size(b->devices[i]);                         \
            for (size_t k = 0; devs[i] && k < nd; k++) {                                           \
                if (devs[i][k]) {                                                                  \
                    free(devs[i][k]->request_names);                                               \
                    free(devs[i][k]->cdi_device_ids);                                              \
                }                                                                                  \
                free(devs[i][k]);                                                                  \
            }                                                                                      \
            free(devs[i]);                                                                         \
        }                                                                                          \
        free(devs);                                                                                \
        free(vals);                                                                                \
        free(eptrs);                                                                               \
        free(entries);                                                                             \
    } while (0)

#define UNPREPARE_REPLY(P, M)                                                                      \
    do {                                                                                           \
        P##NodeUnprepareResourcesResponse resp = M##NODE_UNPREPARE_RESOURCES_RESPONSE__INIT;       \
        P##NodeUnprepareResourcesResponse__ClaimsEntry *entries = calloc(n, sizeof(*entries));     \
        P##NodeUnprepareResourcesResponse__ClaimsEntry **eptrs = calloc(n, sizeof(*eptrs));        \
        P##NodeUnprepareResourceResponse *vals = calloc(n, sizeof(*vals));                         \
        if (n && (!entries || !eptrs || !vals)) {                                                  \
            rpc_call_finish(b->call, RPC_INTERNAL, "out of memory");                               \
        } else {                                                                                   \
            for (size_t i = 0; i < n; i++) {                                                       \
                vals[i] =                                                                          \
                    (P##NodeUnprepareResourceResponse)M##NODE_UNPREPARE_RESOURCE_RESPONSE__INIT;   \
                vals[i].error = b->errors[i] ? b->errors[i] : (char *)"";                          \
                entries[i] = (P##NodeUnprepareResourcesResponse__ClaimsEntry)                      \
                    M##NODE_UNPREPARE_RESOURCES_RESPONSE__CLAIMS_ENTRY__INIT;                      \
                entries[i].key = b->uids[i];                                                       \
                entries[i].value = &vals[i];                                                       \
                eptrs[i] = &entries[i];                                                            \
            }                                                                                      \
            resp.n_claims = n;                                                                     \
            resp.claims = eptrs;                                                                   \
            if (rpc_call_reply(b->call, &resp.base) < 0)                                           \
                log_warn("cannot send the NodeUnprepareResources answer");                         \
        }                                                                                          \
        free(vals);                                                                                \
        free(eptrs);                                                                               \
        free(entries);                                                                             \
    } while (0)

static void reply(struct batch *b)
{
    size_t n = b->n;
    if (b->prepare && b->api == API_V1)
        PREPARE_REPLY(K8s__Io__Kubelet__Pkg__Apis__Dra__V1__,
                      K8S__IO__KUBELET__PKG__APIS__DRA__V1__, fill_v1);
    else if (b->prepare)
        PREPARE_REPLY(K8s__Io__Kubelet__Pkg__Apis__Dra__V1beta1__,
                      K8S__IO__KUBELET__PKG__APIS__DRA__V1BETA1__, fill_v1beta1);
    else if (b->api == API_V1)
        UNPREPARE_REPLY(K8s__Io__Kubelet__Pkg__Apis__Dra__V1__,
                        K8S__IO__KUBELET__PKG__APIS__DRA__V1__);
    else
        UNPREPARE_REPLY(K8s__Io__Kubelet__Pkg__Apis__Dra__V1beta1__,
                        K8S__IO__KUBELET__PKG__APIS__DRA__V1BETA1__);
}

static void one_less(struct batch *b)
{
    if (--b->pending > 0)
        return;
    if (b->call)
        reply(b);
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

/* The four request messages are {base, n_claims, claims} and both Claims {base, namespace_, uid,
 * name}: the handlers read them through the v1 prepare types. */
#define SAME_FIELD(A, B, f) _Static_assert(offsetof(A, f) == offsetof(B, f), #A "." #f)
SAME_FIELD(K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest,
           K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesRequest, claims);
SAME_FIELD(K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest,
           K8s__Io__Kubelet__Pkg__Apis__Dra__V1beta1__NodePrepareResourcesRequest, claims);
SAME_FIELD(K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest,
           K8s__Io__Kubelet__Pkg__Apis__Dra__V1beta1__NodeUnprepareResourcesRequest, claims);
SAME_FIELD(K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest,
           K8s__Io__Kubelet__Pkg__Apis__Dra__V1beta1__NodeUnprepareResourcesRequest, n_claims);
SAME_FIELD(ClaimV1, K8s__Io__Kubelet__Pkg__Apis__Dra__V1beta1__Claim, namespace_);
SAME_FIELD(ClaimV1, K8s__Io__Kubelet__Pkg__Apis__Dra__V1beta1__Claim, uid);
SAME_FIELD(ClaimV1, K8s__Io__Kubelet__Pkg__Apis__Dra__V1beta1__Claim, name);

/* What the handlers need of a Claim. */
static const ClaimV1 *claim_at(const ProtobufCMessage *req, size_t i)
{
    /* NodePrepareResourcesRequest and NodeUnprepareResourcesRequest of both versions are
     * {base, n_claims, claims} with Claim {base, namespace_, uid, name}. */
    const K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest *r = (const void *)req;
    return r->claims[i];
}

static size_t n_claims(const ProtobufCMessage *req)
{
    return ((const K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest *)req)
        ->n_claims;
}

/* A request the claims cannot be answered one by one for: the message for INVALID_ARGUMENT. */
static bool malformed(const ProtobufCMessage *req, char *msg, size_t len)
{
    size_t n = n_claims(req);
    for (size_t i = 0; i < n; i++) {
        const ClaimV1 *c = claim_at(req, i);
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
        const ClaimV1 *c = claim_at(req, i);
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
        {V1BETA1 "NodePrepareResources",
         &k8s__io__kubelet__pkg__apis__dra__v1beta1__node_prepare_resources_request__descriptor,
         &k8s__io__kubelet__pkg__apis__dra__v1beta1__node_prepare_resources_response__descriptor,
         false, on_prepare_v1beta1, p},
        {V1BETA1 "NodeUnprepareResources",
         &k8s__io__kubelet__pkg__apis__dra__v1beta1__node_unprepare_resources_request__descriptor,
         &k8s__io__kubelet__pkg__apis__dra__v1beta1__node_unprepare_resources_response__descriptor,
         false, on_unprepare_v1beta1, p},
    };
    for (size_t i = 0; i < ARRAY_SIZE(methods); i++) {
        int r = rpc_server_add_method(srv, &methods[i]);
        if (r < 0)
            return r;
    }
    return 0;
}
