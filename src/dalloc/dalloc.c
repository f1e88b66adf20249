/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The allocator's front: feature gates, the object intake (dispatch by kind, List unpacking) and a
 * run: gather the node's pools, mark the devices of already-allocated claims in use, resolve the
 * requests' classes, search, and write the results.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dalloc-model.h"

#define DALLOC_MAX_LIST_DEPTH 4

struct gate_def {
    const char *name;
    size_t off;
};

static const struct gate_def GATES[] = {
    {"DRAAdminAccess", offsetof(struct dalloc_gates, admin_access)},
    {"DRAPrioritizedList", offsetof(struct dalloc_gates, prioritized_list)},
    {"DRADeviceTaints", offsetof(struct dalloc_gates, device_taints)},
    {"DRAPartitionableDevices", offsetof(struct dalloc_gates, partitionable)},
    {"DRAConsumableCapacity", offsetof(struct dalloc_gates, consumable_capacity)},
    {"DRADeviceBindingConditions", offsetof(struct dalloc_gates, binding_conditions)},
    {"DRAResourceClaimDeviceStatus", offsetof(struct dalloc_gates, device_status)},
    {"DRAExtendedResource", offsetof(struct dalloc_gates, extended_resource)},
};

void dalloc_gates_default(struct dalloc_gates *g)
{
    *g = (struct dalloc_gates){
        .admin_access = true,
        .prioritized_list = true,
        .device_status = true,
    };
}

static int gate_set(struct dalloc_gates *g, const char *item, size_t len, struct diag *d)
{
    const char *eq = memchr(item, '=', len);
    size_t nlen = eq ? (size_t)(eq - item) : len, vlen = eq ? len - nlen - 1 : 0;
    bool v;

    if (!eq)
        return diag_fail(d, -EINVAL, "feature gate \"%.*s\": expected Name=true|false", (int)len,
                         item);
    if (vlen == 4 && strncmp(eq + 1, "true", 4) == 0)
        v = true;
    else if (vlen == 5 && strncmp(eq + 1, "false", 5) == 0)
        v = false;
    else
        return diag_fail(d, -EINVAL, "feature gate %.*s: invalid value \"%.*s\"", (int)nlen, item,
                         (int)vlen, eq + 1);
    for (size_t i = 0; i < ARRAY_SIZE(GATES); i++)
        if (strlen(GATES[i].name) == nlen && strncmp(GATES[i].name, item, nlen) == 0) {
            *(bool *)((char *)g + GATES[i].off) = v;
            return 0;
        }
    return diag_fail(d, -EINVAL, "unrecognized feature gate: %.*s", (int)nlen, item);
}

int dalloc_gates_parse(struct dalloc_gates *g, const char *spec, struct diag *d)
{
    struct dalloc_gates tmp = *g;
    int r;

    while (*spec) {
        size_t len = strcspn(spec, ",");
        if (len && (r = gate_set(&tmp, spec, len, d)) < 0)
            return r;
        spec += len + (spec[len] == ',');
    }
    *g = tmp;
    return 0;
}

int dalloc_new(const char *node, const struct dalloc_gates *gates, struct dalloc **ret)
{
    struct dalloc *a = calloc(1, sizeof(*a));

    if (!a)
        return -ENOMEM;
    a->node = strdup(node);
    if (!a->node) {
        free(a);
        return -ENOMEM;
    }
    a->gates = *gates;
    a->budget = DALLOC_DEFAULT_BUDGET;
    vec_init(&a->slices, sizeof(struct dalloc_slice *), 1u << 16);
    vec_init(&a->classes, sizeof(struct dalloc_class *), 1u << 14);
    vec_init(&a->claims, sizeof(struct dalloc_claim *), DALLOC_MAX_CLAIMS);
    vec_init(&a->objs, sizeof(json_t *), 1u << 18);
    vec_init(&a->pools, sizeof(struct dalloc_pool *), 1u << 16);
    vec_init(&a->candidates, sizeof(struct dalloc_device *), 1u << 20);
    *ret = a;
    return 0;
}

struct dalloc *dalloc_free(struct dalloc *a)
{
    if (!a)
        return NULL;
    dalloc_pools_release(a);
    dalloc_select_release(a);
    for (size_t i = 0; i < a->slices.len; i++)
        dalloc_slice_free(*VEC_AT(&a->slices, struct dalloc_slice *, i));
    for (size_t i = 0; i < a->classes.len; i++)
        dalloc_class_free(*VEC_AT(&a->classes, struct dalloc_class *, i));
    for (size_t i = 0; i < a->claims.len; i++)
        dalloc_claim_free(*VEC_AT(&a->claims, struct dalloc_claim *, i));
    for (size_t i = 0; i < a->objs.len; i++)
        json_decref(*VEC_AT(&a->objs, json_t *, i));
    vec_release(&a->slices);
    vec_release(&a->classes);
    vec_release(&a->claims);
    vec_release(&a->objs);
    json_decref(a->namespaces);
    free(a->node);
    free(a);
    return NULL;
}

void dalloc_set_budget(struct dalloc *a, uint64_t steps)
{
    a->budget = steps ? steps : DALLOC_DEFAULT_BUDGET;
}

uint64_t dalloc_steps(const struct dalloc *a)
{
    return a->steps;
}

static int add_node(struct dalloc *a, json_t *obj)
{
    const char *name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));

    if (name && strcmp(name, a->node) == 0)
        a->node_labels = json_object_get(json_object_get(obj, "metadata"), "labels");
    return 0;
}

/* A Namespace's labels decide whether its claims may ask for admin access. */
static int add_namespace(struct dalloc *a, json_t *obj)
{
    json_t *meta = json_object_get(obj, "metadata"), *labels = json_object_get(meta, "labels");
    const char *name = json_string_value(json_object_get(meta, "name"));

    if (!name)
        return 0;
    if (!a->namespaces && !(a->namespaces = json_object()))
        return -ENOMEM;
    return json_object_set(a->namespaces, name, labels ? labels : json_null()) < 0 ? -ENOMEM : 0;
}

/* A ResourceClaimTemplate stands for the claim a pod referencing it would get: named after the
 * template (with the template's labels and annotations), spec = spec.spec, pending. */
static int add_template(struct dalloc *a, json_t *obj, struct diag *d)
{
    json_t *meta = json_object_get(obj, "metadata"), *spec = json_object_get(obj, "spec");
    json_t *tmeta = json_object_get(spec, "metadata"), *claim;
    int r;

    claim =
        json_pack("{s:s, s:s, s:{s:O*, s:O*, s:O*, s:O*}, s:O*}", "apiVersion",
                  "resource.k8s.io/v1", "kind", "ResourceClaim", "metadata", "name",
                  json_object_get(meta, "name"), "namespace", json_object_get(meta, "namespace"),
                  "labels", json_object_get(tmeta, "labels"), "annotations",
                  json_object_get(tmeta, "annotations"), "spec", json_object_get(spec, "spec"));
    if (!claim)
        return -ENOMEM;
    if ((r = vec_push(&a->objs, &claim)) < 0) {
        json_decref(claim);
        return r;
    }
    return dalloc_decode_claim(a, claim, d);
}

static int add_one(struct dalloc *a, json_t *obj, unsigned depth, struct diag *d)
{
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    size_t i;
    json_t *item;
    int r;

    if (!json_is_object(obj) || !kind)
        return diag_fail(d, -EINVAL, "object without a kind");
    if (strcmp(kind, "List") == 0 ||
        (strlen(kind) > 4 && strcmp(kind + strlen(kind) - 4, "List") == 0)) {
        if (depth >= DALLOC_MAX_LIST_DEPTH)
            return diag_fail(d, -EINVAL, "%s: nested too deeply", kind);
        json_array_foreach(json_object_get(obj, "items"), i,
                           item) if ((r = add_one(a, item, depth + 1, d)) < 0) return r;
        return 0;
    }
    if (strcmp(kind, "ResourceSlice") == 0)
        return dalloc_decode_slice(a, obj, d);
    if (strcmp(kind, "DeviceClass") == 0)
        return dalloc_decode_class(a, obj, d);
    if (strcmp(kind, "ResourceClaim") == 0)
        return dalloc_decode_claim(a, obj, d);
    if (strcmp(kind, "Node") == 0)
        return add_node(a, obj);
    if (strcmp(kind, "Namespace") == 0)
        return add_namespace(a, obj);
    if (strcmp(kind, "ResourceClaimTemplate") == 0)
        return add_template(a, obj, d);
    return diag_fail(d, -EINVAL, "unsupported kind %s", kind);
}

/* Adds obj to the kept documents and decodes it; counts the pending claims it brought. */
static int add_kept(struct dalloc *a, json_t *obj, struct diag *d)
{
    size_t before = a->claims.len;
    int r;

    json_incref(obj);
    if ((r = vec_push(&a->objs, &obj)) < 0) {
        json_decref(obj);
        return r;
    }
    r = add_one(a, obj, 0, d);
    for (size_t i = before; i < a->claims.len; i++)
        a->n_pending += !(*VEC_AT(&a->claims, struct dalloc_claim *, i))->allocation;
    return r;
}

int dalloc_add(struct dalloc *a, json_t *obj, struct diag *d)
{
    if (a->prepared)
        return diag_fail(d, -EBUSY, "objects must be added before the first allocation");
    return add_kept(a, obj, d);
}

static struct dalloc_class *class_find(const struct dalloc *a, const char *name)
{
    for (size_t i = 0; i < a->classes.len; i++) {
        struct dalloc_class *c = *VEC_AT(&a->classes, struct dalloc_class *, i);
        if (strcmp(c->name, name) == 0)
            return c;
    }
    return NULL;
}

/* Whether ns may hold admin-access claims: true unless its Namespace was given without the
 * label resource.kubernetes.io/admin-access: "true". */
static bool admin_namespace(const struct dalloc *a, const char *ns)
{
    json_t *labels = json_object_get(a->namespaces, ns);
    const char *v =
        json_string_value(json_object_get(labels, "resource.kubernetes.io/admin-access"));

    if (!json_object_get(a->namespaces, ns))
        return true;
    return v && strcmp(v, "true") == 0;
}

/* Resolves the classes of c's requests and checks them as upstream does before searching: admin
 * access allowed, the devices of each `All` (sub-)request found (dalloc_all_devices), and the
 * fewest devices the claim can take within the limit of 32 results; fills c->rest_min. */
static int resolve_classes(struct dalloc *a, struct dalloc_claim *c, struct diag *d)
{
    int64_t min_total = 0;
    int r;

    for (size_t i = 0; i < c->n_requests; i++) {
        int64_t min = INT64_MAX;
        for (size_t k = 0; k < c->requests[i].n_subs; k++) {
            struct dalloc_exact *e = &c->requests[i].subs[k];
            int64_t need;
            e->cls = class_find(a, e->class_name);
            if (!e->cls)
                return diag_fail(d, -ENOENT,
                                 "claim %s/%s, request %s: could not retrieve device class %s: "
                                 "deviceclass.resource.k8s.io \"%s\" not found",
                                 c->ns, c->name, c->requests[i].name, e->class_name, e->class_name);
            if (e->admin && !a->gates.admin_access)
                return diag_fail(d, -EINVAL,
                                 "claim %s/%s, request %s: admin access is requested, but the "
                                 "feature is disabled",
                                 c->ns, c->name, c->requests[i].name);
            if (e->admin && !admin_namespace(a, c->ns))
                return diag_fail(d, -EPERM,
                                 "claim %s/%s, request %s: admin access to devices requires the "
                                 "label resource.kubernetes.io/admin-access: \"true\" on namespace "
                                 "%s",
                                 c->ns, c->name, c->requests[i].name, c->ns);
            if (e->mode == DALLOC_ALL && (r = dalloc_all_devices(a, c, i, e, d)) < 0)
                return r;
            need = e->mode == DALLOC_ALL ? (int64_t)e->n_all : e->count;
            min = need < min ? need : min;
        }
        c->rest_min[i] = min;
        min_total += min;
        if (min_total > DALLOC_MAX_DEVICES_PER_CLAIM)
            return diag_fail(d, -EINVAL,
                             "claim %s/%s: number of requested devices %lld exceeds the claim "
                             "limit of %d",
                             c->ns, c->name, (long long)min_total, DALLOC_MAX_DEVICES_PER_CLAIM);
    }
    c->rest_min[c->n_requests] = 0;
    for (size_t i = c->n_requests; i-- > 0;)
        c->rest_min[i] += c->rest_min[i + 1];
    return 0;
}

/* An allocated share (a result with shareID) consumes its consumedCapacity; anything else makes
 * the device in use. Either way the device holds its counters. */
static void mark_device(struct dalloc_device *dev, const json_t *result)
{
    const json_t *cc = json_object_get(result, "consumedCapacity");

    dalloc_counters_force(dev);
    if (!json_object_get(result, "shareID") || !dev->multi) {
        dev->in_use++;
        return;
    }
    for (size_t i = 0; i < dev->n_caps; i++) {
        struct cel_quantity q;
        dalloc_amount v;
        if (dalloc_quantity(json_object_get(cc, dev->caps[i].name), &q) >= 0) {
            (void)dalloc_amount_of(&q, &v); /* saturates beyond DALLOC_AMOUNT_MAX */
            dev->consumed[i] = dalloc_amount_add(dev->consumed[i], v);
        }
    }
}

/* The devices of an allocation's non-admin results are in use and hold their counters (also
 * devices of the pool's slices for other nodes). */
static void mark_allocated(struct dalloc *a, const json_t *allocation)
{
    json_t *res = json_object_get(json_object_get(allocation, "devices"), "results"), *r;
    size_t i;

    json_array_foreach(res, i, r)
    {
        const char *drv = json_string_value(json_object_get(r, "driver"));
        const char *pool = json_string_value(json_object_get(r, "pool"));
        const char *dev = json_string_value(json_object_get(r, "device"));
        if (!drv || !pool || !dev || json_is_true(json_object_get(r, "adminAccess")))
            continue;
        for (size_t k = 0; k < a->slices.len; k++) {
            struct dalloc_slice *s = *VEC_AT(&a->slices, struct dalloc_slice *, k);
            if (strcmp(s->pool, pool) != 0 || strcmp(s->driver, drv) != 0)
                continue;
            for (size_t x = 0; x < s->n_devices; x++)
                if (s->devices[x].pool && strcmp(s->devices[x].name, dev) == 0)
                    mark_device(&s->devices[x], r);
        }
    }
}

/* What every allocation on this node shares: the pools, the CEL machinery and the devices the
 * allocated claims hold. Built once. */
static int prepare(struct dalloc *a, struct diag *d)
{
    int r;

    if (a->prepared)
        return 0;
    if ((r = dalloc_pools_gather(a, d)) < 0 || (r = dalloc_select_init(a, d)) < 0)
        return r;
    for (size_t i = 0; i < a->claims.len; i++) {
        struct dalloc_claim *c = *VEC_AT(&a->claims, struct dalloc_claim *, i);
        if (c->allocation)
            mark_allocated(a, c->allocation);
    }
    a->prepared = true;
    return 0;
}

/* Resolves the classes of the pending claims a->claims[first..]. */
static int resolve_pending(struct dalloc *a, size_t first, struct diag *d)
{
    int r;

    for (size_t i = first; i < a->claims.len; i++) {
        struct dalloc_claim *c = *VEC_AT(&a->claims, struct dalloc_claim *, i);
        if (!c->allocation && (r = resolve_classes(a, c, d)) < 0)
            return r;
    }
    return 0;
}

int dalloc_run(struct dalloc *a, struct diag *d, json_t **ret)
{
    int r;

    if ((r = prepare(a, d)) < 0 || (r = resolve_pending(a, 0, d)) < 0)
        return r;
    r = dalloc_search(a, d);
    if (r != 0)
        return r;
    return dalloc_result(a, d, ret);
}

/* Forgets a->claims[claims..] and a->objs[objs..]: what a dalloc_try brought. */
static void drop_since(struct dalloc *a, size_t claims, size_t objs)
{
    for (size_t i = claims; i < a->claims.len; i++)
        dalloc_claim_free(*VEC_AT(&a->claims, struct dalloc_claim *, i));
    for (size_t i = objs; i < a->objs.len; i++)
        json_decref(*VEC_AT(&a->objs, json_t *, i));
    a->claims.len = claims;
    a->objs.len = objs;
}

int dalloc_try(struct dalloc *a, json_t *claims, struct diag *d, json_t **ret)
{
    size_t first = a->claims.len, objs = a->objs.len, i;
    json_t *c;
    int r = 0;

    if (a->n_pending)
        return diag_fail(d, -EINVAL, "pending claims were added to the allocator");
    json_array_foreach(claims, i, c)
    {
        const char *kind = json_string_value(json_object_get(c, "kind"));
        if (!kind || strcmp(kind, "ResourceClaim") != 0) {
            r = diag_fail(d, -EINVAL, "only ResourceClaims can be allocated");
            break;
        }
        if ((r = add_kept(a, c, d)) < 0)
            break;
    }
    a->n_pending = 0;
    for (i = first; r >= 0 && i < a->claims.len; i++)
        if ((*VEC_AT(&a->claims, struct dalloc_claim *, i))->allocation)
            r = diag_fail(d, -EINVAL, "claim %s/%s is allocated already",
                          (*VEC_AT(&a->claims, struct dalloc_claim *, i))->ns,
                          (*VEC_AT(&a->claims, struct dalloc_claim *, i))->name);
    if (r >= 0 && (r = prepare(a, d)) >= 0 && (r = resolve_pending(a, first, d)) >= 0) {
        r = dalloc_search(a, d);
        if (r == 0)
            r = dalloc_result(a, d, ret);
        dalloc_search_undo(a, first);
    }
    drop_since(a, first, objs);
    return r;
}

int dalloc_commit(struct dalloc *a, json_t *claims, struct diag *d)
{
    json_t *c;
    size_t i;
    int r;

    if ((r = prepare(a, d)) < 0)
        return r;
    json_array_foreach(claims, i, c)
    {
        json_t *alloc = json_object_get(json_object_get(c, "status"), "allocation");
        if (!json_is_object(alloc))
            return diag_fail(d, -EINVAL, "a committed claim needs status.allocation");
    }
    json_array_foreach(claims, i, c)
        mark_allocated(a, json_object_get(json_object_get(c, "status"), "allocation"));
    return 0;
}
