/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The allocation result of each pending claim (reference §4.9): status.allocation.devices.results
 * ({request ("req" or "req/sub"), driver, pool, device, adminAccess when set, the request's
 * tolerations, the device's binding conditions, shareID and consumedCapacity for a share of a
 * multi-allocatable device}) in allocation order;
 * devices.config with the classes' configs (once per class, naming the requests that used it,
 * source FromClass) followed by the claim's own configs that apply (each once, source FromClaim);
 * and the nodeSelector: the node's name when any device is node-local, else the merged single-term
 * selectors of the slices, else none (all devices from allNodes slices); and, with
 * DRADeviceBindingConditions and DRAResourceClaimDeviceStatus on, the allocationTimestamp the
 * binding timeout counts from (SOURCE_DATE_EPOCH replaces the clock when set).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "dalloc-model.h"

#define OK(x)                                                                                      \
    do {                                                                                           \
        if ((x) < 0)                                                                               \
            return -ENOMEM;                                                                        \
    } while (0)

static const char *pick_request(const struct dalloc_claim *c, size_t ri, size_t si, char *buf,
                                size_t len)
{
    const struct dalloc_request *rq = &c->requests[ri];

    if (!rq->first_available)
        return rq->name;
    snprintf(buf, len, "%s/%s", rq->name, rq->subs[si].name);
    return buf;
}

/* A random (version 4) UUID, lower-case, as Kubernetes' shareID. */
static int share_id(char out[37])
{
    uint8_t b[16];
    ssize_t n = getrandom(b, sizeof(b), 0);

    if (n != (ssize_t)sizeof(b))
        return -EIO;
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
    return 0;
}

/* shareID and consumedCapacity (every capacity of the device) of a share. */
static int share_fields(const struct dalloc_pick *p, json_t *r)
{
    char id[37], q[CEL_QUANTITY_STR_MAX];
    json_t *cc = json_object();
    int e;

    if (!cc)
        return -ENOMEM;
    for (size_t i = 0; i < p->dev->n_caps; i++) {
        struct cel_quantity v = dalloc_amount_quantity(p->consumed[i]);
        cel_quantity_format(&v, q);
        if (json_object_set_new(cc, p->dev->caps[i].name, json_string(q)) < 0) {
            json_decref(cc);
            return -ENOMEM;
        }
    }
    if ((e = share_id(id)) < 0) {
        json_decref(cc);
        return e;
    }
    if (json_object_set_new(r, "shareID", json_string(id)) < 0 ||
        json_object_set_new(r, "consumedCapacity", cc) < 0)
        return -ENOMEM;
    return 0;
}

static int results(const struct dalloc_claim *c, json_t *out)
{
    char buf[160];

    for (size_t i = 0; i < c->n_picks; i++) {
        const struct dalloc_pick *p = &c->picks[i];
        json_t *r =
            json_pack("{s:s, s:s, s:s, s:s}", "request",
                      pick_request(c, p->request, p->sub, buf, sizeof(buf)), "driver",
                      p->dev->slice->driver, "pool", p->dev->slice->pool, "device", p->dev->name);
        if (!r)
            return -ENOMEM;
        if (p->consumed && share_fields(p, r) < 0) {
            json_decref(r);
            return -ENOMEM;
        }
        if (c->requests[p->request].subs[p->sub].admin)
            OK(json_object_set_new(r, "adminAccess", json_true()));
        if (p->dev->binding_conditions &&
            (json_object_set(r, "bindingConditions", p->dev->binding_conditions) < 0 ||
             json_object_set(r, "bindingFailureConditions", p->dev->binding_failure_conditions) <
                 0))
            return -ENOMEM;
        if (c->requests[p->request].subs[p->sub].tolerations)
            OK(json_object_set(r, "tolerations", c->requests[p->request].subs[p->sub].tolerations));
        OK(json_array_append_new(out, r));
    }
    return 0;
}

static int class_configs(const struct dalloc_claim *c, json_t *out)
{
    char buf[160];

    for (size_t i = 0; i < c->n_requests; i++) {
        const struct dalloc_class *cls = c->requests[i].subs[c->chosen_sub[i]].cls;
        json_t *names, *entry;
        size_t k;
        bool seen = false;

        for (size_t j = 0; j < i; j++)
            seen = seen || c->requests[j].subs[c->chosen_sub[j]].cls == cls;
        if (seen || !cls->config)
            continue;
        names = json_array();
        if (!names)
            return -ENOMEM;
        for (size_t j = i; j < c->n_requests; j++)
            if (c->requests[j].subs[c->chosen_sub[j]].cls == cls &&
                json_array_append_new(names, json_string(pick_request(c, j, c->chosen_sub[j], buf,
                                                                      sizeof(buf)))) < 0) {
                json_decref(names);
                return -ENOMEM;
            }
        json_array_foreach(cls->config, k, entry)
        {
            json_t *o = json_pack("{s:s, s:O, s:O*}", "source", "FromClass", "requests", names,
                                  "opaque", json_object_get(entry, "opaque"));
            if (!o || json_array_append_new(out, o) < 0) {
                json_decref(names);
                return -ENOMEM;
            }
        }
        json_decref(names);
    }
    return 0;
}

static bool config_applies(const struct dalloc_claim *c, const json_t *reqs)
{
    char buf[160];
    size_t k;
    json_t *ref;

    if (json_array_size(reqs) == 0)
        return true;
    json_array_foreach(reqs, k, ref)
    {
        const char *s = json_string_value(ref);
        for (size_t i = 0; s && i < c->n_requests; i++)
            if (strcmp(s, c->requests[i].name) == 0 ||
                strcmp(s, pick_request(c, i, c->chosen_sub[i], buf, sizeof(buf))) == 0)
                return true;
    }
    return false;
}

static int claim_configs(const struct dalloc_claim *c, json_t *out)
{
    size_t k;
    json_t *entry;

    json_array_foreach(c->config, k, entry)
    {
        json_t *reqs = json_object_get(entry, "requests"), *o;
        if (!config_applies(c, reqs))
            continue;
        o = json_pack("{s:s, s:O*, s:O*}", "source", "FromClaim", "requests", reqs, "opaque",
                      json_object_get(entry, "opaque"));
        if (!o)
            return -ENOMEM;
        OK(json_array_append_new(out, o));
    }
    return 0;
}

static int merge_reqs(json_t *dst, const json_t *src)
{
    size_t i, j;
    json_t *x, *y;

    json_array_foreach(src, i, x)
    {
        bool dup = false;
        json_array_foreach(dst, j, y) dup = dup || json_equal(x, y);
        if (!dup)
            OK(json_array_append(dst, x));
    }
    return 0;
}

static int node_selector(const struct dalloc *a, const struct dalloc_claim *c, json_t **ret)
{
    json_t *exprs = json_array(), *fields = json_array(), *term;

    *ret = NULL;
    for (size_t i = 0; i < c->n_picks; i++) {
        const struct dalloc_device *dev = c->picks[i].dev;
        const struct dalloc_slice *s = dev->slice;
        enum dalloc_node_kind kind = s->node_kind;
        const json_t *selector = s->node_selector;
        if (kind == DALLOC_NODE_PER_DEVICE) {
            kind = dev->node_kind;
            selector = dev->node_selector;
        }
        if (kind == DALLOC_NODE_NAME || dev->binds_to_node) {
            json_decref(exprs);
            json_decref(fields);
            *ret = json_pack("{s:[{s:[{s:s, s:s, s:[s]}]}]}", "nodeSelectorTerms", "matchFields",
                             "key", "metadata.name", "operator", "In", "values", a->node);
            return *ret ? 0 : -ENOMEM;
        }
        if (kind == DALLOC_NODE_SELECTOR) {
            term = json_array_get(json_object_get(selector, "nodeSelectorTerms"), 0);
            if (exprs && fields &&
                (merge_reqs(exprs, json_object_get(term, "matchExpressions")) < 0 ||
                 merge_reqs(fields, json_object_get(term, "matchFields")) < 0))
                break;
        }
    }
    if (!exprs || !fields) {
        json_decref(exprs);
        json_decref(fields);
        return -ENOMEM;
    }
    term = json_object();
    if (term && json_array_size(exprs))
        OK(json_object_set(term, "matchExpressions", exprs));
    if (term && json_array_size(fields))
        OK(json_object_set(term, "matchFields", fields));
    json_decref(exprs);
    json_decref(fields);
    if (!term)
        return -ENOMEM;
    if (json_object_size(term) == 0) {
        json_decref(term);
        return 0;
    }
    *ret = json_pack("{s:[o]}", "nodeSelectorTerms", term);
    return *ret ? 0 : -ENOMEM;
}

/* "2026-11-22T04:05:06Z" and its NUL. */
#define TIMESTAMP_SIZE 21
/* The last second a four-digit year can show: 9999-12-31T23:59:59Z. */
#define TIMESTAMP_MAX_SECONDS 253402300799LL

/*
 * allocation.allocationTimestamp. kube-scheduler sets it when it stores an allocation with
 * DRADeviceBindingConditions and DRAResourceClaimDeviceStatus on (whether or not the devices have
 * binding conditions); the binding timeout of devices with binding conditions counts from it. The
 * form is metav1.Time's: RFC 3339 in UTC, whole seconds. SOURCE_DATE_EPOCH (seconds since 1970),
 * when set and not empty, replaces the clock so that a result can be reproduced.
 */
static int allocation_timestamp(struct diag *d, char out[static TIMESTAMP_SIZE])
{
    const char *env = getenv("SOURCE_DATE_EPOCH");
    struct tm tm;
    time_t t;

    if (env && *env) {
        char *end;
        long long v;

        errno = 0;
        v = strtoll(env, &end, 10);
        if (!isdigit((unsigned char)env[0]) || errno != 0 || *end != '\0' ||
            v > TIMESTAMP_MAX_SECONDS)
            return diag_fail(
                d, -EINVAL,
                "SOURCE_DATE_EPOCH=%.32s: expected whole seconds since 1970 (0 to %lld)", env,
                TIMESTAMP_MAX_SECONDS);
        t = (time_t)v;
    } else {
        struct timespec now;

        /* Not time(): glibc reads a coarse clock there, which can lag a second boundary. */
        if (clock_gettime(CLOCK_REALTIME, &now) < 0)
            return diag_fail(d, -errno, "reading the clock: %s", strerror(errno));
        t = now.tv_sec;
    }
    if (!gmtime_r(&t, &tm) || strftime(out, TIMESTAMP_SIZE, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        return diag_fail(d, -EOVERFLOW, "the time %lld cannot be written as RFC 3339",
                         (long long)t);
    return 0;
}

/* stamp: the allocationTimestamp, or NULL for none. */
static int claim_result(const struct dalloc *a, const struct dalloc_claim *c, const char *stamp,
                        json_t **ret)
{
    _cleanup_json_ json_t *out = json_deep_copy(c->obj);
    json_t *res = json_array(), *cfg = json_array(), *alloc, *status, *sel = NULL;
    int r;

    alloc = json_pack("{s:{s:o, s:o}}", "devices", "results", res, "config", cfg);
    if (!out || !alloc)
        return -ENOMEM;
    status = json_object_get(out, "status");
    if (!json_is_object(status)) {
        status = json_object();
        if (!status || json_object_set_new(out, "status", status) < 0) {
            json_decref(alloc);
            return -ENOMEM;
        }
    }
    OK(json_object_set_new(status, "allocation", alloc));
    if ((r = results(c, res)) < 0 || (r = class_configs(c, cfg)) < 0 ||
        (r = claim_configs(c, cfg)) < 0 || (r = node_selector(a, c, &sel)) < 0)
        return r;
    if (json_array_size(cfg) == 0)
        OK(json_object_del(json_object_get(alloc, "devices"), "config"));
    if (sel)
        OK(json_object_set_new(alloc, "nodeSelector", sel));
    if (stamp)
        OK(json_object_set_new(alloc, "allocationTimestamp", json_string(stamp)));
    *ret = TAKE_PTR(out);
    return 0;
}

int dalloc_result(struct dalloc *a, struct diag *d, json_t **ret)
{
    _cleanup_json_ json_t *list = json_array();
    bool want_stamp = a->gates.binding_conditions && a->gates.device_status;
    char stamp[TIMESTAMP_SIZE] = "";
    int r;

    if (!list)
        return -ENOMEM;
    for (size_t i = 0; i < a->claims.len; i++) {
        const struct dalloc_claim *c = *VEC_AT(&a->claims, struct dalloc_claim *, i);
        json_t *o;
        if (c->allocation)
            continue;
        /* Read once, when a claim needs it: every claim of one run gets the same time. */
        if (want_stamp && !stamp[0] && (r = allocation_timestamp(d, stamp)) < 0)
            return r;
        if ((r = claim_result(a, c, want_stamp ? stamp : NULL, &o)) < 0)
            return diag_fail(d, r, "claim %s/%s: building the result: %s", c->ns, c->name,
                             strerror(-r));
        OK(json_array_append_new(list, o));
    }
    *ret = TAKE_PTR(list);
    return 0;
}
