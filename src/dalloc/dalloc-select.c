/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Device selection (reference §4.4): a candidate is selectable for a (sub-)request when every
 * selector of its class and then every selector of the request evaluates to true. Selectors are
 * compiled through a program cache (one compile per distinct expression), the `device` value is
 * built once per device, and each (device, claim, request, sub-request) result is cached for the
 * run. Compile errors, runtime errors and non-bool results abort the allocation with Kubernetes'
 * messages ("class gpu: selector #0: CEL runtime error: no such key: x").
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dalloc-model.h"

/* What evaluating selectors needs, independent of any node: one environment, one program cache
 * (each distinct expression compiled once), an evaluator and the `device` activation. */
struct dalloc_cel {
    unsigned refs;
    struct cel_env *env;
    struct cel_cache *cache;
    struct cel_evaluator *ev;
    struct cel_activation *act;
    int device_var;
};

int dalloc_cel_new(struct dalloc_cel **ret)
{
    struct dalloc_cel *c = calloc(1, sizeof(*c));
    int r;

    if (!c)
        return -ENOMEM;
    c->refs = 1;
    if ((r = cel_env_new_dra(&c->env)) < 0)
        goto fail;
    cel_env_require_bool(c->env, true);
    if ((r = cel_cache_new(c->env, 1024, &c->cache)) < 0 || (r = cel_evaluator_new(&c->ev)) < 0 ||
        (r = cel_activation_new(c->env, &c->act)) < 0)
        goto fail;
    c->device_var = cel_env_var_index(c->env, "device");
    if ((r = c->device_var) < 0)
        goto fail;
    *ret = c;
    return 0;
fail:
    c->refs = 1;
    dalloc_cel_unref(c);
    return r;
}

struct dalloc_cel *dalloc_cel_unref(struct dalloc_cel *c)
{
    if (!c || --c->refs > 0)
        return NULL;
    cel_activation_free(c->act);
    cel_evaluator_free(c->ev);
    cel_cache_free(c->cache);
    cel_env_free(c->env);
    free(c);
    return NULL;
}

void dalloc_set_cel(struct dalloc *a, struct dalloc_cel *c)
{
    c->refs++;
    dalloc_cel_unref(a->cel);
    a->cel = c;
}

int dalloc_select_init(struct dalloc *a, struct diag *d)
{
    int r;

    cel_region_init(&a->region, 0);
    if (!a->cel && (r = dalloc_cel_new(&a->cel)) < 0)
        return diag_fail(d, r, "CEL environment: %s", strerror(-r));
    return 0;
}

void dalloc_select_release(struct dalloc *a)
{
    a->cel = dalloc_cel_unref(a->cel);
    cel_region_release(&a->region);
}

/*
 * What `device.allowMultipleAllocations` reads. kube-scheduler hands the device's field to CEL in
 * the allocator variants that support DRAConsumableCapacity or DeviceBindingAndStatus; the
 * variant it picks with neither on (its "stable" one) leaves it unset, so selectors read false —
 * also for a slice written with the field while the API server would have dropped it.
 */
static bool cel_multi(const struct dalloc *a, const struct dalloc_device *dev)
{
    const struct dalloc_gates *g = &a->gates;

    return dev->multi_field &&
           (g->consumable_capacity || (g->binding_conditions && g->device_status));
}

static int device_value(struct dalloc *a, struct dalloc_device *dev, struct diag *d)
{
    struct cel_dra_device cd = {
        .driver = dev->slice->driver,
        .driver_len = strlen(dev->slice->driver),
        .attrs = dev->attrs,
        .n_attrs = dev->n_attrs,
        .caps = dev->caps,
        .n_caps = dev->n_caps,
        .allow_multiple_allocations = cel_multi(a, dev),
    };
    struct diag vd;
    int r;

    if (dev->value_built)
        return 0;
    diag_init(&vd);
    r = cel_dra_device_value(&a->region, &cd, &vd, &dev->value);
    if (r < 0)
        return diag_fail(d, r == -ENOMEM ? r : -EDOM, "device %s/%s/%s: %s", dev->slice->driver,
                         dev->slice->pool, dev->name, vd.msg);
    dev->value_built = true;
    return 0;
}

/* 1 match, 0 no match, -EDOM error. who is "class <c>" or "claim <ns/name>". */
static int eval_one(struct dalloc *a, const char *who, size_t idx, const char *expr, struct diag *d)
{
    _cleanup_(cel_program_unrefp) struct cel_program *p = NULL;
    struct diag cd;
    struct cel_value v;
    int r;

    diag_init(&cd);
    r = cel_cache_get(a->cel->cache, expr, strlen(expr), &p, &cd);
    if (r < 0)
        return diag_fail(d, r == -ENOMEM ? r : -EDOM, "%s: selector #%zu: CEL compile error: %s",
                         who, idx, cd.msg);
    v = cel_eval(a->cel->ev, p, a->cel->act, NULL);
    if (v.kind == CEL_ERROR)
        return diag_fail(d, -EDOM, "%s: selector #%zu: CEL runtime error: %s", who, idx,
                         v.err->msg);
    if (v.kind != CEL_BOOL)
        return diag_fail(d, -EDOM,
                         "%s: selector #%zu: CEL runtime error: expression must evaluate to bool",
                         who, idx);
    return v.b ? 1 : 0;
}

static int eval_all(struct dalloc *a, const struct dalloc_claim *c, const struct dalloc_exact *e,
                    struct diag *d)
{
    char who[320];
    int r;

    snprintf(who, sizeof(who), "class %s", e->cls->name);
    for (size_t i = 0; i < e->cls->n_selectors; i++)
        if ((r = eval_one(a, who, i, e->cls->selectors[i], d)) <= 0)
            return r;
    snprintf(who, sizeof(who), "claim %s/%s", c->ns, c->name);
    for (size_t i = 0; i < e->n_selectors; i++)
        if ((r = eval_one(a, who, i, e->selectors[i], d)) <= 0)
            return r;
    return 1;
}

int dalloc_selectable(struct dalloc *a, const struct dalloc_claim *c, struct dalloc_exact *e,
                      size_t pos, struct diag *d)
{
    struct dalloc_device *dev = *VEC_AT(&a->candidates, struct dalloc_device *, pos);
    int r;

    if (!e->sel_cache) {
        e->sel_cache = calloc(a->candidates.len + 1, 1);
        if (!e->sel_cache)
            return -ENOMEM;
    }
    if (e->sel_cache[pos])
        return e->sel_cache[pos] - 1;
    if (dev->unallocatable || !dalloc_device_on_node(a, dev)) {
        e->sel_cache[pos] = 1;
        return 0;
    }
    if ((r = device_value(a, dev, d)) < 0)
        return r;
    cel_activation_set(a->cel->act, a->cel->device_var, dev->value);
    r = eval_all(a, c, e, d);
    if (r < 0)
        return r;
    e->sel_cache[pos] = (uint8_t)(r + 1);
    return r;
}

const struct cel_dra_attr *dalloc_device_attr(const struct dalloc_device *dev, const char *fqname)
{
    const char *slash = strchr(fqname, '/');
    size_t dlen = slash ? (size_t)(slash - fqname) : 0;
    const char *driver = dev->slice->driver;

    for (size_t i = 0; i < dev->n_attrs; i++) {
        const struct cel_dra_attr *at = &dev->attrs[i];
        if (at->name_len == strlen(fqname) && memcmp(at->name, fqname, at->name_len) == 0)
            return at;
        /* a bare name belongs to the driver's domain */
        if (slash && !memchr(at->name, '/', at->name_len) && strlen(driver) == dlen &&
            memcmp(driver, fqname, dlen) == 0 && strcmp(at->name, slash + 1) == 0)
            return at;
    }
    return NULL;
}

/* Kubernetes' ToleratesTaint. */
static bool tolerates(const json_t *tol, const json_t *taint)
{
    const char *te = json_string_value(json_object_get(tol, "effect"));
    const char *tk = json_string_value(json_object_get(tol, "key"));
    const char *op = json_string_value(json_object_get(tol, "operator"));
    const char *tv = json_string_value(json_object_get(tol, "value"));
    const char *v = json_string_value(json_object_get(taint, "value"));

    if (te && *te && strcmp(te, json_string_value(json_object_get(taint, "effect"))) != 0)
        return false;
    if (tk && *tk && strcmp(tk, json_string_value(json_object_get(taint, "key"))) != 0)
        return false;
    if (op && strcmp(op, "Exists") == 0)
        return true;
    return strcmp(tv ? tv : "", v ? v : "") == 0;
}

bool dalloc_tolerated(const struct dalloc_device *dev, const struct dalloc_exact *e)
{
    size_t i, k;
    json_t *taint, *tol;

    json_array_foreach(dev->taints, i, taint)
    {
        const char *effect = json_string_value(json_object_get(taint, "effect"));
        bool ok = false;
        if (!effect || (strcmp(effect, "NoSchedule") != 0 && strcmp(effect, "NoExecute") != 0))
            continue; /* None and unknown effects are ignored */
        json_array_foreach(e->tolerations, k, tol) ok = ok || tolerates(tol, taint);
        if (!ok)
            return false;
    }
    return true;
}
