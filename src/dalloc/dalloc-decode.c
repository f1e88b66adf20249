/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jansson -> the allocator's model (dalloc-model.h), with the API server's validation where a bad
 * value would change what is allocated. Messages name the object and the field:
 * "ResourceClaim default/c1: spec.devices.requests[0].exactly.count: must be >= 1". Names are held
 * to the API server's formats (dalloc-names.h) wherever the reference lists one, so input the API
 * server would refuse is refused here too. Strings are borrowed from the objects, which the
 * allocator keeps referenced.
 *
 * Device taints and request tolerations are honoured with DRADeviceTaints on (ignored, as
 * Kubernetes drops them, when off). Fields of features gpuplane does not allocate yet: with their
 * gate on they are refused with -ENOTSUP (consumable capacities over 10^28); with it off Kubernetes
 * drops them (taints, tolerations, allowMultipleAllocations are ignored), never selects the device
 * (bindingConditions unless DRAResourceClaimDeviceStatus is on too, consumesCounters: shared
 * counters are decoded with DRAPartitionableDevices on) or refuses the request (capacity requests,
 * distinctAttribute).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dalloc-model.h"
#include "dalloc-names.h"

#define DALLOC_MAX_LIST 128

struct ctx {
    const char *kind;
    const char *ns, *name;
    struct diag *d;
};

_printf_(4, 5) static int fail(const struct ctx *c, int err, const char *field, const char *fmt,
                               ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (c->ns)
        return diag_fail(c->d, err, "%s %s/%s: %s: %s", c->kind, c->ns, c->name, field, msg);
    return diag_fail(c->d, err, "%s %s: %s: %s", c->kind, c->name, field, msg);
}

/* Fails with the API server's "Invalid value" when why, a name checker's verdict
 * (dalloc-names.h), is set. Long values are cut so that the reason stays in the message. */
static int check_name(const struct ctx *c, const char *field, const char *value, const char *why)
{
    size_t n = strlen(value);

    if (!why)
        return 0;
    return fail(c, -EINVAL, field, "Invalid value: \"%.*s%s\": %s", (int)(n > 64 ? 64 : n), value,
                n > 64 ? "..." : "", why);
}

static const char *str_at(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* An optional string member: NULL when absent; -EINVAL when present but not a non-empty string. */
static int get_str(const struct ctx *c, const json_t *o, const char *key, const char *field,
                   bool required, const char **ret)
{
    json_t *v = json_object_get(o, key);

    if (!v || json_is_null(v)) {
        if (required)
            return fail(c, -EINVAL, field, "required");
        *ret = NULL;
        return 0;
    }
    if (!json_is_string(v) || json_string_length(v) == 0)
        return fail(c, -EINVAL, field, "must be a non-empty string");
    *ret = json_string_value(v);
    return 0;
}

static int get_list(const struct ctx *c, const json_t *o, const char *key, const char *field,
                    size_t max, json_t **ret)
{
    json_t *v = json_object_get(o, key);

    if (!v || json_is_null(v)) {
        *ret = NULL;
        return 0;
    }
    if (!json_is_array(v))
        return fail(c, -EINVAL, field, "must be a list");
    if (json_array_size(v) > max)
        return fail(c, -EINVAL, field, "must have at most %zu items", max);
    *ret = v;
    return 0;
}

static bool has(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return v && !json_is_null(v);
}

static int meta(struct ctx *c, const json_t *obj, bool namespaced)
{
    json_t *m = json_object_get(obj, "metadata");
    int r;

    c->name = str_at(m, "name");
    c->ns = namespaced ? str_at(m, "namespace") : NULL;
    if (namespaced && !c->ns)
        c->ns = "default";
    if (!c->name || !*c->name) {
        c->name = "(unnamed)";
        return fail(c, -EINVAL, "metadata.name", "required");
    }
    if (c->ns && (r = check_name(c, "metadata.namespace", c->ns, dalloc_name_dns_label(c->ns))) < 0)
        return r;
    return check_name(c, "metadata.name", c->name, dalloc_name_dns_subdomain(c->name));
}

int dalloc_quantity(const json_t *v, struct cel_quantity *ret)
{
    if (json_is_integer(v)) {
        *ret = cel_quantity_from_int(json_integer_value(v));
        return 0;
    }
    if (!json_is_string(v))
        return -EINVAL;
    return cel_quantity_parse(json_string_value(v), json_string_length(v), NULL, ret) < 0 ? -EINVAL
                                                                                          : 0;
}

/* ---- ResourceSlice ---- */

static int decode_attr(const struct ctx *c, const char *field, const char *name, json_t *v,
                       struct cel_dra_attr *at, struct cel_semver_obj *ver, const char **vtext)
{
    struct diag vd;
    size_t n = json_object_size(v);

    at->name = name;
    at->name_len = strlen(name);
    if (!json_is_object(v) || n != 1)
        return fail(c, -EINVAL, field, "exactly one value must be specified");
    if (json_is_integer(json_object_get(v, "int"))) {
        at->kind = CEL_DRA_ATTR_INT;
        at->i = json_integer_value(json_object_get(v, "int"));
    } else if (json_is_boolean(json_object_get(v, "bool"))) {
        at->kind = CEL_DRA_ATTR_BOOL;
        at->b = json_is_true(json_object_get(v, "bool"));
    } else if (json_is_string(json_object_get(v, "string"))) {
        at->kind = CEL_DRA_ATTR_STRING;
        at->str.s = str_at(v, "string");
        at->str.len = strlen(at->str.s);
        if (at->str.len > CEL_DRA_MAX_STRING_LEN)
            return fail(c, -EINVAL, field, "must be at most 64 characters");
    } else if (json_is_string(json_object_get(v, "version"))) {
        const char *s = str_at(v, "version");
        at->kind = CEL_DRA_ATTR_VERSION;
        at->str.s = s;
        at->str.len = strlen(s);
        if (cel_dra_parse_version(s, strlen(s), ver, &vd) < 0)
            return fail(c, -EINVAL, field,
                        "must be a string compatible with semver.org spec 2.0.0");
        at->version = ver;
        *vtext = s;
    } else {
        return fail(c, -EINVAL, field, "exactly one value must be specified");
    }
    return 0;
}

static int decode_device_maps(const struct ctx *c, const char *dfield, json_t *jd,
                              struct dalloc_device *dev)
{
    json_t *attrs = json_object_get(jd, "attributes"), *caps = json_object_get(jd, "capacity");
    char field[256];
    const char *key;
    json_t *v;
    size_t i = 0;
    int r;

    if (json_object_size(attrs) + json_object_size(caps) > CEL_DRA_MAX_ATTRIBUTES)
        return fail(c, -EINVAL, dfield, "attributes and capacity: at most 32 entries");
    dev->attrs = calloc(json_object_size(attrs) + 1, sizeof(*dev->attrs));
    dev->versions = calloc(json_object_size(attrs) + 1, sizeof(*dev->versions));
    dev->vtext = calloc(json_object_size(attrs) + 1, sizeof(*dev->vtext));
    dev->caps = calloc(json_object_size(caps) + 1, sizeof(*dev->caps));
    dev->capvals = calloc(json_object_size(caps) + 1, sizeof(*dev->capvals));
    dev->capamt = calloc(json_object_size(caps) + 1, sizeof(*dev->capamt));
    dev->capamt_ok = calloc(json_object_size(caps) + 1, sizeof(*dev->capamt_ok));
    dev->consumed = calloc(json_object_size(caps) + 1, sizeof(*dev->consumed));
    if (!dev->capamt || !dev->capamt_ok || !dev->consumed)
        return -ENOMEM;
    if (!dev->attrs || !dev->versions || !dev->vtext || !dev->caps || !dev->capvals)
        return -ENOMEM;
    json_object_foreach(attrs, key, v)
    {
        snprintf(field, sizeof(field), "%s.attributes[%s]", dfield, key);
        if ((r = check_name(c, field, key, dalloc_name_qualified(key))) < 0)
            return r;
        r = decode_attr(c, field, key, v, &dev->attrs[i], &dev->versions[i], &dev->vtext[i]);
        if (r < 0)
            return r;
        i++;
    }
    dev->n_attrs = i;
    i = 0;
    json_object_foreach(caps, key, v)
    {
        struct cel_quantity q;
        json_t *qv = json_object_get(v, "value");

        snprintf(field, sizeof(field), "%s.capacity[%s]", dfield, key);
        if ((r = check_name(c, field, key, dalloc_name_qualified(key))) < 0)
            return r;
        snprintf(field, sizeof(field), "%s.capacity[%s].value", dfield, key);
        if (!qv)
            return fail(c, -EINVAL, field, "required");
        if (dalloc_quantity(qv, &q) < 0)
            return fail(c, -EINVAL, field, "not a quantity");
        dev->capamt_ok[i] = dalloc_amount_of(&q, &dev->capamt[i]) >= 0;
        cel_quantity_obj_init(&dev->capvals[i], &q);
        dev->caps[i] = (struct cel_dra_capacity){key, strlen(key), &dev->capvals[i]};
        i++;
    }
    dev->n_caps = i;
    return 0;
}

static bool one_of(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(s, *list) == 0)
            return true;
    return false;
}

static int decode_taints(const struct ctx *c, const char *dfield, json_t *list, json_t **ret)
{
    static const char *const EFFECTS[] = {"None", "NoSchedule", "NoExecute", NULL};
    char f[160], kf[176];
    json_t *t;
    size_t i;
    int r;

    if (!json_is_array(list) || json_array_size(list) > 16)
        return fail(c, -EINVAL, dfield, "taints: must be a list of at most 16 items");
    json_array_foreach(list, i, t)
    {
        const char *key = str_at(t, "key"), *effect = str_at(t, "effect");
        snprintf(f, sizeof(f), "%s.taints[%zu]", dfield, i);
        if (!key || !*key)
            return fail(c, -EINVAL, f, "key: required");
        snprintf(kf, sizeof(kf), "%s.key", f);
        if ((r = check_name(c, kf, key, dalloc_name_label_key(key))) < 0)
            return r;
        if (!effect || !one_of(effect, EFFECTS))
            return fail(c, -EINVAL, f,
                        "effect: supported values: \"NoExecute\", \"NoSchedule\", \"None\"");
        if (has(t, "value") && !json_is_string(json_object_get(t, "value")))
            return fail(c, -EINVAL, f, "value: must be a string");
    }
    *ret = list;
    return 0;
}

static int decode_tolerations(const struct ctx *c, const char *rfield, json_t *list, json_t **ret)
{
    static const char *const OPS[] = {"Equal", "Exists", NULL};
    static const char *const EFFECTS[] = {"", "NoSchedule", "NoExecute", NULL};
    char f[200], kf[216];
    json_t *t;
    size_t i;
    int r;

    if (!json_is_array(list) || json_array_size(list) > 16)
        return fail(c, -EINVAL, rfield, "tolerations: must be a list of at most 16 items");
    json_array_foreach(list, i, t)
    {
        const char *key = str_at(t, "key"), *op = str_at(t, "operator");
        const char *effect = str_at(t, "effect");
        snprintf(f, sizeof(f), "%s.tolerations[%zu]", rfield, i);
        if (!json_is_object(t) || (op && !one_of(op, OPS)))
            return fail(c, -EINVAL, f, "operator: supported values: \"Equal\", \"Exists\"");
        if (effect && !one_of(effect, EFFECTS))
            return fail(c, -EINVAL, f, "effect: supported values: \"NoExecute\", \"NoSchedule\"");
        if ((!key || !*key) && !(op && strcmp(op, "Exists") == 0))
            return fail(c, -EINVAL, f, "operator: must be Exists when `key` is empty");
        snprintf(kf, sizeof(kf), "%s.key", f);
        if (key && *key && (r = check_name(c, kf, key, dalloc_name_label_key(key))) < 0)
            return r;
        if (op && strcmp(op, "Exists") == 0 && str_at(t, "value") && *str_at(t, "value"))
            return fail(c, -EINVAL, f, "value: must be empty when `operator` is 'Exists'");
    }
    *ret = list;
    return 0;
}

/* counters: map[name]{value: Quantity}; calls fn for each. */
static int decode_counter_map(const struct ctx *c, const char *field, json_t *m,
                              int (*fn)(void *u, const char *name, struct cel_quantity *q), void *u)
{
    char f[256];
    const char *key;
    json_t *v;
    int r;

    if (!json_is_object(m) || json_object_size(m) == 0 || json_object_size(m) > 32)
        return fail(c, -EINVAL, field, "counters: must have 1 to 32 entries");
    json_object_foreach(m, key, v)
    {
        struct cel_quantity q;
        snprintf(f, sizeof(f), "%s.counters[%s]", field, key);
        if ((r = check_name(c, f, key, dalloc_name_dns_label(key))) < 0)
            return r;
        snprintf(f, sizeof(f), "%s.counters[%s].value", field, key);
        if (dalloc_quantity(json_object_get(v, "value"), &q) < 0 || cel_quantity_sign(&q) < 0)
            return fail(c, -EINVAL, f, "must be a non-negative quantity");
        if (fn && (r = fn(u, key, &q)) < 0)
            return r;
    }
    return 0;
}

struct consume_ctx {
    struct dalloc_device *dev;
    const char *set;
};

static int add_consume(void *u, const char *name, struct cel_quantity *q)
{
    struct consume_ctx *cc = u;
    struct dalloc_device *dev = cc->dev;
    struct dalloc_consume *n = reallocarray(dev->consume, dev->n_consume + 1, sizeof(*n));

    if (!n)
        return -ENOMEM;
    dev->consume = n;
    n[dev->n_consume++] = (struct dalloc_consume){cc->set, name, *q, 0};
    return 0;
}

static int decode_consumes(const struct ctx *c, const char *dfield, json_t *list,
                           struct dalloc_device *dev)
{
    char f[160], nf[176];
    json_t *e;
    size_t i;
    int r;

    if (!json_is_array(list) || json_array_size(list) > 2)
        return fail(c, -EINVAL, dfield, "consumesCounters: must be a list of at most 2 items");
    json_array_foreach(list, i, e)
    {
        struct consume_ctx cc = {dev, str_at(e, "counterSet")};
        snprintf(f, sizeof(f), "%s.consumesCounters[%zu]", dfield, i);
        if (!cc.set || !*cc.set)
            return fail(c, -EINVAL, f, "counterSet: required");
        snprintf(nf, sizeof(nf), "%s.counterSet", f);
        if ((r = check_name(c, nf, cc.set, dalloc_name_dns_label(cc.set))) < 0)
            return r;
        if ((r = decode_counter_map(c, f, json_object_get(e, "counters"), add_consume, &cc)) < 0)
            return r;
    }
    return 0;
}

static int decode_shared_counters(const struct ctx *c, json_t *list)
{
    char f[96], nf[112];
    json_t *e;
    size_t i;
    int r;

    if (!json_is_array(list) || json_array_size(list) > 8)
        return fail(c, -EINVAL, "spec.sharedCounters", "must be a list of at most 8 items");
    json_array_foreach(list, i, e)
    {
        const char *name = str_at(e, "name");
        snprintf(f, sizeof(f), "spec.sharedCounters[%zu]", i);
        if (!name || !*name)
            return fail(c, -EINVAL, f, "name: required");
        snprintf(nf, sizeof(nf), "%s.name", f);
        if ((r = check_name(c, nf, name, dalloc_name_dns_label(name))) < 0)
            return r;
        if ((r = decode_counter_map(c, f, json_object_get(e, "counters"), NULL, NULL)) < 0)
            return r;
    }
    return 0;
}

/* A device's own nodeName / nodeSelector / allNodes: exactly one with perDeviceNodeSelection,
 * none otherwise (checked by the slice, which knows). */
static int device_node(const struct ctx *c, const char *field, json_t *jd,
                       struct dalloc_device *dev)
{
    int n = 0, r;

    if ((r = get_str(c, jd, "nodeName", field, false, &dev->node_name)) < 0)
        return r;
    if (dev->node_name) {
        dev->node_kind = DALLOC_NODE_NAME;
        n++;
    }
    if (has(jd, "allNodes")) {
        if (!json_is_true(json_object_get(jd, "allNodes")))
            return fail(c, -EINVAL, field, "allNodes: must be unset or true");
        dev->node_kind = DALLOC_NODE_ALL;
        n++;
    }
    if (has(jd, "nodeSelector")) {
        json_t *sel = json_object_get(jd, "nodeSelector");
        if (json_array_size(json_object_get(sel, "nodeSelectorTerms")) != 1)
            return fail(c, -EINVAL, field,
                        "nodeSelector.nodeSelectorTerms: must have exactly one item");
        dev->node_kind = DALLOC_NODE_SELECTOR;
        dev->node_selector = sel;
        n++;
    }
    if (n > 1)
        return fail(c, -EINVAL, field,
                    "exactly one of `nodeName`, `nodeSelector` or `allNodes` is required");
    dev->node_kind = n ? dev->node_kind : DALLOC_NODE_IGNORED; /* "none set" */
    return 0;
}

static int condition_list(const struct ctx *c, const char *field, const char *key, json_t *jd,
                          json_t **ret)
{
    json_t *l = json_object_get(jd, key), *x;
    size_t i;

    *ret = NULL;
    if (!l || json_is_null(l))
        return 0;
    if (!json_is_array(l) || json_array_size(l) > 4)
        return fail(c, -EINVAL, field, "%s: must be a list of at most 4 items", key);
    json_array_foreach(l, i, x) if (!json_is_string(x) || json_string_length(x) == 0) return fail(
        c, -EINVAL, field, "%s[%zu]: must be a non-empty string", key, i);
    *ret = json_array_size(l) ? l : NULL;
    return 0;
}

/* bindingConditions, bindingFailureConditions, bindsToNode (DRADeviceBindingConditions on). */
static int decode_binding(const struct ctx *c, const char *field, json_t *jd,
                          struct dalloc_device *dev)
{
    json_t *b = json_object_get(jd, "bindsToNode");
    int r;

    if ((r = condition_list(c, field, "bindingConditions", jd, &dev->binding_conditions)) < 0 ||
        (r = condition_list(c, field, "bindingFailureConditions", jd,
                            &dev->binding_failure_conditions)) < 0)
        return r;
    if (!dev->binding_conditions != !dev->binding_failure_conditions)
        return fail(c, -EINVAL, field,
                    "bindingConditions and bindingFailureConditions must be set together");
    if (b && !json_is_null(b) && !json_is_boolean(b))
        return fail(c, -EINVAL, field, "bindsToNode: must be a boolean");
    dev->binds_to_node = json_is_true(b);
    return 0;
}

/* The capacities' requestPolicy (DRAConsumableCapacity on). */
static int decode_policies(const struct ctx *c, const char *dfield, json_t *jd,
                           struct dalloc_device *dev)
{
    json_t *caps = json_object_get(jd, "capacity");
    char f[256];

    dev->policy = calloc(dev->n_caps + 1, sizeof(*dev->policy));
    if (!dev->policy)
        return -ENOMEM;
    for (size_t i = 0; i < dev->n_caps; i++) {
        json_t *pol = json_object_get(json_object_get(caps, dev->caps[i].name), "requestPolicy");
        int r;
        snprintf(f, sizeof(f), "%s.capacity[%s]", dfield, dev->caps[i].name);
        if (dev->multi && !dev->capamt_ok[i])
            return fail(c, -ENOTSUP, f, "values beyond 10^28 are not supported by gpuplane");
        if (!pol || json_is_null(pol))
            continue;
        if (!dev->multi)
            return fail(c, -EINVAL, f,
                        "requestPolicy: only allowed when allowMultipleAllocations is true");
        r = dalloc_policy_parse(pol, dev->capamt[i], &dev->policy[i]);
        if (r == -ERANGE)
            return fail(c, -ENOTSUP, f,
                        "requestPolicy: values beyond 10^28 are not supported by gpuplane");
        if (r < 0)
            return fail(c, r, f, "requestPolicy: invalid");
    }
    return 0;
}

static int decode_device(const struct ctx *c, const struct dalloc_gates *g, size_t idx, json_t *jd,
                         struct dalloc_device *dev)
{
    char field[64], nfield[80];
    int r;

    snprintf(field, sizeof(field), "spec.devices[%zu]", idx);
    if (!json_is_object(jd))
        return fail(c, -EINVAL, field, "must be a mapping");
    r = get_str(c, jd, "name", field, true, &dev->name);
    if (r < 0)
        return r;
    snprintf(nfield, sizeof(nfield), "%s.name", field);
    if ((r = check_name(c, nfield, dev->name, dalloc_name_dns_label(dev->name))) < 0)
        return r;
    if (has(jd, "taints") && g->device_taints &&
        (r = decode_taints(c, field, json_object_get(jd, "taints"), &dev->taints)) < 0)
        return r;
    if (has(jd, "consumesCounters") && !g->partitionable)
        dev->unallocatable = true; /* never allocatable while the feature is off */
    else if (has(jd, "consumesCounters") &&
             (r = decode_consumes(c, field, json_object_get(jd, "consumesCounters"), dev)) < 0)
        return r;
    if (g->binding_conditions && (r = decode_binding(c, field, jd, dev)) < 0)
        return r;
    /* kube-scheduler's DeviceBindingAndStatus needs both gates: with either off such a device is
     * never selected */
    if (!(g->binding_conditions && g->device_status) &&
        json_array_size(json_object_get(jd, "bindingConditions")) > 0)
        dev->unallocatable = true;
    dev->multi_field = json_is_true(json_object_get(jd, "allowMultipleAllocations"));
    dev->multi = g->consumable_capacity && dev->multi_field;
    if ((r = device_node(c, field, jd, dev)) < 0 || (r = decode_device_maps(c, field, jd, dev)) < 0)
        return r;
    return g->consumable_capacity ? decode_policies(c, field, jd, dev) : 0;
}

static int slice_node(const struct ctx *c, json_t *spec, struct dalloc_slice *s)
{
    int n = 0, r;

    r = get_str(c, spec, "nodeName", "spec.nodeName", false, &s->node_name);
    if (r < 0)
        return r;
    if (s->node_name) {
        s->node_kind = DALLOC_NODE_NAME;
        n++;
    }
    if (has(spec, "allNodes")) {
        if (!json_is_true(json_object_get(spec, "allNodes")))
            return fail(c, -EINVAL, "spec.allNodes", "must be unset or true");
        s->node_kind = DALLOC_NODE_ALL;
        n++;
    }
    if (has(spec, "nodeSelector")) {
        json_t *terms = json_object_get(json_object_get(spec, "nodeSelector"), "nodeSelectorTerms");
        if (json_array_size(terms) != 1)
            return fail(c, -EINVAL, "spec.nodeSelector.nodeSelectorTerms",
                        "must have exactly one item");
        s->node_kind = DALLOC_NODE_SELECTOR;
        s->node_selector = json_object_get(spec, "nodeSelector");
        n++;
    }
    if (has(spec, "perDeviceNodeSelection")) {
        if (!json_is_true(json_object_get(spec, "perDeviceNodeSelection")))
            return fail(c, -EINVAL, "spec.perDeviceNodeSelection", "must be unset or true");
        s->node_kind = DALLOC_NODE_PER_DEVICE;
        n++;
    }
    if (n != 1)
        return fail(c, -EINVAL, "spec",
                    "exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
                    "`perDeviceNodeSelection` is required");
    return 0;
}

static int slice_spec(const struct ctx *c, const struct dalloc_gates *g, json_t *spec,
                      struct dalloc_slice *s)
{
    json_t *pool = json_object_get(spec, "pool"), *devs;
    json_t *gen = json_object_get(pool, "generation"),
           *cnt = json_object_get(pool, "resourceSliceCount");
    bool ignored = false;
    int r;

    if ((r = get_str(c, spec, "driver", "spec.driver", true, &s->driver)) < 0 ||
        (r = get_str(c, pool, "name", "spec.pool.name", true, &s->pool)) < 0)
        return r;
    if ((r = check_name(c, "spec.driver", s->driver, dalloc_name_driver(s->driver))) < 0 ||
        (r = check_name(c, "spec.pool.name", s->pool, dalloc_name_pool(s->pool))) < 0)
        return r;
    if (!json_is_integer(gen) || json_integer_value(gen) < 0)
        return fail(c, -EINVAL, "spec.pool.generation", "must be an integer >= 0");
    if (!json_is_integer(cnt) || json_integer_value(cnt) < 1)
        return fail(c, -EINVAL, "spec.pool.resourceSliceCount", "must be an integer > 0");
    s->generation = json_integer_value(gen);
    s->count = json_integer_value(cnt);
    s->has_counters = has(spec, "sharedCounters");
    if ((r = slice_node(c, spec, s)) < 0)
        return r;
    if (s->node_kind == DALLOC_NODE_PER_DEVICE && !g->partitionable)
        ignored = true; /* Kubernetes skips such slices while the feature is off */
    if (has(spec, "sharedCounters") && g->partitionable) {
        if ((r = decode_shared_counters(c, json_object_get(spec, "sharedCounters"))) < 0)
            return r;
        if (has(spec, "devices"))
            return fail(c, -EINVAL, "spec",
                        "only one of `sharedCounters` or `devices` may be specified");
        s->shared_counters = json_object_get(spec, "sharedCounters");
    }
    if ((r = get_list(c, spec, "devices", "spec.devices", DALLOC_MAX_LIST, &devs)) < 0)
        return r;
    s->devices = calloc(json_array_size(devs) + 1, sizeof(*s->devices));
    if (!s->devices)
        return -ENOMEM;
    for (size_t i = 0; i < json_array_size(devs); i++) {
        s->devices[i].slice = s;
        s->n_devices = i + 1;
        r = decode_device(c, g, i, json_array_get(devs, i), &s->devices[i]);
        if (r < 0)
            return r;
        if ((s->node_kind == DALLOC_NODE_PER_DEVICE) !=
            (s->devices[i].node_kind != DALLOC_NODE_IGNORED))
            return fail(
                c, -EINVAL, "spec.devices",
                s->node_kind == DALLOC_NODE_PER_DEVICE
                    ? "device %s: exactly one of `nodeName`, `nodeSelector` or `allNodes` is "
                      "required with perDeviceNodeSelection"
                    : "device %s: node selection is only allowed with perDeviceNodeSelection",
                s->devices[i].name);
        for (size_t j = 0; j < i; j++)
            if (strcmp(s->devices[j].name, s->devices[i].name) == 0)
                return fail(c, -EINVAL, "spec.devices", "duplicate device name %s",
                            s->devices[i].name);
    }
    if (ignored)
        s->node_kind = DALLOC_NODE_IGNORED;
    return 0;
}

void dalloc_slice_free(struct dalloc_slice *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_devices; i++) {
        free(s->devices[i].attrs);
        free(s->devices[i].versions);
        free(s->devices[i].vtext);
        free(s->devices[i].consume);
        free(s->devices[i].policy);
        free(s->devices[i].capamt);
        free(s->devices[i].capamt_ok);
        free(s->devices[i].consumed);
        free(s->devices[i].caps);
        free(s->devices[i].capvals);
    }
    free(s->devices);
    free(s);
}

int dalloc_decode_slice(struct dalloc *a, json_t *obj, struct diag *d)
{
    struct ctx c = {.kind = "ResourceSlice", .d = d};
    struct dalloc_slice *s;
    int r;

    if ((r = meta(&c, obj, false)) < 0)
        return r;
    s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->obj = obj;
    s->name = c.name;
    r = slice_spec(&c, &a->gates, json_object_get(obj, "spec"), s);
    if (r >= 0)
        r = vec_push(&a->slices, &s);
    if (r < 0)
        dalloc_slice_free(s);
    return r < 0 ? r : 0;
}

/* ---- request references and opaque configs (claims and classes) ---- */

/* Whether ref ("req" or "req/sub") names a request (and sub-request) of the claim. */
static bool ref_ok(const struct dalloc_claim *cl, const char *ref)
{
    const char *slash = strchr(ref, '/');
    size_t n = slash ? (size_t)(slash - ref) : strlen(ref);

    for (size_t i = 0; i < cl->n_requests; i++) {
        const struct dalloc_request *rq = &cl->requests[i];
        if (strlen(rq->name) != n || strncmp(rq->name, ref, n) != 0)
            continue;
        if (!slash)
            return true;
        for (size_t k = 0; rq->first_available && k < rq->n_subs; k++)
            if (strcmp(rq->subs[k].name, slash + 1) == 0)
                return true;
    }
    return false;
}

/* The requests list of a constraint or a claim config: at most 32 distinct entries, each "req" or
 * "req/sub" naming a request (and sub-request) of the claim. */
static int request_refs(const struct ctx *c, const struct dalloc_claim *cl, const char *field,
                        const json_t *reqs)
{
    if (json_array_size(reqs) > 32)
        return fail(c, -EINVAL, field, "requests: must have at most 32 items");
    for (size_t i = 0; i < json_array_size(reqs); i++) {
        const char *ref = json_string_value(json_array_get(reqs, i));
        if (!ref || !ref_ok(cl, ref))
            return fail(c, -EINVAL, field,
                        "requests[%zu]: must be the name of a request in the claim or the name of "
                        "a request and a subrequest separated by '/'",
                        i);
        for (size_t k = 0; k < i; k++)
            if (strcmp(json_string_value(json_array_get(reqs, k)), ref) == 0)
                return fail(c, -EINVAL, field, "requests[%zu]: Duplicate value: \"%s\"", i, ref);
    }
    return 0;
}

/* The opaque configs of a class (cl NULL) or a claim: the driver a driver name, and a claim's
 * requests naming its requests. */
static int decode_configs(const struct ctx *c, const struct dalloc_claim *cl, const char *field,
                          const json_t *list)
{
    char f[96], df[128];
    json_t *e;
    size_t i;
    int r;

    json_array_foreach(list, i, e)
    {
        json_t *opaque = json_object_get(e, "opaque"), *reqs = json_object_get(e, "requests");
        const char *driver;
        snprintf(f, sizeof(f), "%s[%zu]", field, i);
        if (!json_is_object(e))
            return fail(c, -EINVAL, f, "must be a mapping");
        if (opaque && !json_is_null(opaque)) {
            snprintf(df, sizeof(df), "%s.opaque.driver", f);
            if ((r = get_str(c, opaque, "driver", df, true, &driver)) < 0 ||
                (r = check_name(c, df, driver, dalloc_name_driver(driver))) < 0)
                return r;
        }
        if (!cl)
            continue;
        if (reqs && !json_is_null(reqs) && !json_is_array(reqs))
            return fail(c, -EINVAL, f, "requests: must be a list");
        if ((r = request_refs(c, cl, f, reqs)) < 0)
            return r;
    }
    return 0;
}

/* ---- DeviceClass ---- */

static int decode_selectors(const struct ctx *c, json_t *list, const char *field, const char ***ret,
                            size_t *ret_n)
{
    char f[160];
    size_t n = json_array_size(list);
    const char **sel;

    if (n > 32)
        return fail(c, -EINVAL, field, "must have at most 32 items");
    sel = calloc(n + 1, sizeof(*sel));
    if (!sel)
        return -ENOMEM;
    *ret = sel;
    *ret_n = n;
    for (size_t i = 0; i < n; i++) {
        const char *e = str_at(json_object_get(json_array_get(list, i), "cel"), "expression");
        snprintf(f, sizeof(f), "%s[%zu].cel.expression", field, i);
        if (!e || !*e)
            return fail(c, -EINVAL, f, "required");
        if (strlen(e) > 10 * 1024)
            return fail(c, -EINVAL, f, "too long (more than 10240 bytes)");
        sel[i] = e;
    }
    return 0;
}

void dalloc_class_free(struct dalloc_class *c)
{
    if (!c)
        return;
    free(c->selectors);
    free(c);
}

int dalloc_decode_class(struct dalloc *a, json_t *obj, struct diag *d)
{
    struct ctx c = {.kind = "DeviceClass", .d = d};
    struct dalloc_class *cls;
    json_t *spec = json_object_get(obj, "spec"), *sel = NULL;
    int r;

    if ((r = meta(&c, obj, false)) < 0)
        return r;
    cls = calloc(1, sizeof(*cls));
    if (!cls)
        return -ENOMEM;
    cls->obj = obj;
    cls->name = c.name;
    if ((r = get_list(&c, spec, "config", "spec.config", 32, &cls->config)) >= 0 &&
        (r = decode_configs(&c, NULL, "spec.config", cls->config)) >= 0 &&
        (r = get_list(&c, spec, "selectors", "spec.selectors", 32, &sel)) >= 0 &&
        (r = decode_selectors(&c, sel, "spec.selectors", &cls->selectors, &cls->n_selectors)) >= 0)
        r = vec_push(&a->classes, &cls);
    if (r < 0)
        dalloc_class_free(cls);
    return r < 0 ? r : 0;
}

/* ---- ResourceClaim ---- */

static int decode_capreqs(const struct ctx *c, const char *field, json_t *m, struct dalloc_exact *e)
{
    char f[256];
    const char *key;
    json_t *v;
    int r;

    if (!json_is_object(m) || json_object_size(m) > 32)
        return fail(c, -EINVAL, field, "requests: must be a map of at most 32 entries");
    e->capreq_names = calloc(json_object_size(m) + 1, sizeof(*e->capreq_names));
    e->capreq_vals = calloc(json_object_size(m) + 1, sizeof(*e->capreq_vals));
    if (!e->capreq_names || !e->capreq_vals)
        return -ENOMEM;
    json_object_foreach(m, key, v)
    {
        struct cel_quantity q;
        snprintf(f, sizeof(f), "%s.requests[%s]", field, key);
        if ((r = check_name(c, f, key, dalloc_name_qualified(key))) < 0)
            return r;
        if (dalloc_quantity(v, &q) < 0 || cel_quantity_sign(&q) < 0)
            return fail(c, -EINVAL, field, "requests[%s]: must be a non-negative quantity", key);
        /* beyond DALLOC_AMOUNT_MAX it saturates: larger than any capacity, it fits nowhere */
        (void)dalloc_amount_of(&q, &e->capreq_vals[e->n_capreq]);
        e->capreq_names[e->n_capreq++] = key;
    }
    return 0;
}

static int decode_exact(const struct ctx *c, const struct dalloc_gates *g, json_t *j,
                        const char *field, bool sub, struct dalloc_exact *e)
{
    char f[160];
    const char *mode;
    json_t *cnt = json_object_get(j, "count"), *sel = NULL;
    int r;

    snprintf(f, sizeof(f), "%s.deviceClassName", field);
    if ((r = get_str(c, j, "deviceClassName", f, true, &e->class_name)) < 0)
        return r;
    if ((r = check_name(c, f, e->class_name, dalloc_name_dns_subdomain(e->class_name))) < 0)
        return r;
    snprintf(f, sizeof(f), "%s.selectors", field);
    if ((r = get_list(c, j, "selectors", f, 32, &sel)) < 0 ||
        (r = decode_selectors(c, sel, f, &e->selectors, &e->n_selectors)) < 0)
        return r;
    snprintf(f, sizeof(f), "%s.allocationMode", field);
    if ((r = get_str(c, j, "allocationMode", f, false, &mode)) < 0)
        return r;
    if (!mode || strcmp(mode, "ExactCount") == 0)
        e->mode = DALLOC_EXACT_COUNT;
    else if (strcmp(mode, "All") == 0)
        e->mode = DALLOC_ALL;
    else
        return fail(c, -EINVAL, f,
                    "Unsupported value: \"%s\": supported values: \"All\", \"ExactCount\"", mode);
    snprintf(f, sizeof(f), "%s.count", field);
    if (cnt && !json_is_null(cnt) && !json_is_integer(cnt))
        return fail(c, -EINVAL, f, "must be an integer");
    e->count = cnt && json_is_integer(cnt) ? json_integer_value(cnt) : 0;
    if (e->mode == DALLOC_ALL && e->count != 0)
        return fail(c, -EINVAL, f, "must not be specified when allocationMode is 'All'");
    if (e->mode == DALLOC_EXACT_COUNT && cnt && json_is_integer(cnt) && e->count < 1)
        return fail(c, -EINVAL, f, "must be >= 1");
    if (e->mode == DALLOC_EXACT_COUNT && e->count == 0)
        e->count = 1;
    snprintf(f, sizeof(f), "%s.adminAccess", field);
    if (has(j, "adminAccess")) {
        if (sub)
            return fail(c, -EINVAL, f, "field not allowed in sub-requests");
        if (!json_is_boolean(json_object_get(j, "adminAccess")))
            return fail(c, -EINVAL, f, "must be a boolean");
        e->admin = json_is_true(json_object_get(j, "adminAccess"));
    }
    if (has(j, "tolerations") && g->device_taints &&
        (r = decode_tolerations(c, field, json_object_get(j, "tolerations"), &e->tolerations)) < 0)
        return r;
    if (has(j, "capacity")) {
        snprintf(f, sizeof(f), "%s.capacity", field);
        if (!g->consumable_capacity)
            return fail(c, -EINVAL, f,
                        "has capacity requests, but the DRAConsumableCapacity feature is disabled");
        return decode_capreqs(c, f, json_object_get(json_object_get(j, "capacity"), "requests"), e);
    }
    return 0;
}

static int decode_request(const struct ctx *c, const struct dalloc_gates *g, json_t *j, size_t idx,
                          struct dalloc_request *rq)
{
    char field[96], f[160], nf[176];
    json_t *fa = json_object_get(j, "firstAvailable"), *ex = json_object_get(j, "exactly");
    int r;

    snprintf(field, sizeof(field), "spec.devices.requests[%zu]", idx);
    snprintf(f, sizeof(f), "%s.name", field);
    if ((r = get_str(c, j, "name", f, true, &rq->name)) < 0)
        return r;
    if ((r = check_name(c, f, rq->name, dalloc_name_dns_label(rq->name))) < 0)
        return r;
    if (!!(ex && !json_is_null(ex)) == !!(fa && !json_is_null(fa)))
        return fail(c, -EINVAL, field, "exactly one of `exactly` or `firstAvailable` is required");
    if (ex && !json_is_null(ex)) {
        rq->subs = calloc(1, sizeof(*rq->subs));
        if (!rq->subs)
            return -ENOMEM;
        rq->n_subs = 1;
        rq->subs[0].name = rq->name;
        snprintf(f, sizeof(f), "%s.exactly", field);
        return decode_exact(c, g, ex, f, false, &rq->subs[0]);
    }
    snprintf(f, sizeof(f), "%s.firstAvailable", field);
    if (!g->prioritized_list)
        return fail(c, -EINVAL, f,
                    "has subrequests, but the DRAPrioritizedList feature is disabled");
    if (!json_is_array(fa) || json_array_size(fa) < 1 || json_array_size(fa) > 8)
        return fail(c, -EINVAL, f, "must have 1 to 8 items");
    rq->first_available = true;
    rq->subs = calloc(json_array_size(fa), sizeof(*rq->subs));
    if (!rq->subs)
        return -ENOMEM;
    for (size_t i = 0; i < json_array_size(fa); i++) {
        json_t *s = json_array_get(fa, i);
        rq->n_subs = i + 1;
        snprintf(f, sizeof(f), "%s.firstAvailable[%zu]", field, i);
        snprintf(nf, sizeof(nf), "%s.name", f);
        if ((r = get_str(c, s, "name", nf, true, &rq->subs[i].name)) < 0 ||
            (r = check_name(c, nf, rq->subs[i].name, dalloc_name_dns_label(rq->subs[i].name))) <
                0 ||
            (r = decode_exact(c, g, s, f, true, &rq->subs[i])) < 0)
            return r;
        for (size_t k = 0; k < i; k++)
            if (strcmp(rq->subs[k].name, rq->subs[i].name) == 0)
                return fail(c, -EINVAL, f, "name: duplicate sub-request name %s", rq->subs[i].name);
    }
    return 0;
}

static int decode_constraint(const struct ctx *c, const struct dalloc_gates *g,
                             const struct dalloc_claim *cl, json_t *j, size_t idx,
                             struct dalloc_constraint *k)
{
    char f[96], af[128];
    const char *attr;
    json_t *reqs = json_object_get(j, "requests");
    int r;

    snprintf(f, sizeof(f), "spec.devices.constraints[%zu]", idx);
    if ((r = get_str(c, j, "matchAttribute", f, false, &k->match)) < 0 ||
        (r = get_str(c, j, "distinctAttribute", f, false, &k->distinct)) < 0)
        return r;
    if (k->distinct && !g->consumable_capacity)
        return fail(c, -EINVAL, f,
                    "distinctAttribute needs the DRAConsumableCapacity feature, which is disabled");
    if (!k->match == !k->distinct)
        return fail(c, -EINVAL, f,
                    "exactly one of `matchAttribute` or `distinctAttribute` is required");
    snprintf(af, sizeof(af), "%s.%s", f, k->match ? "matchAttribute" : "distinctAttribute");
    attr = k->match ? k->match : k->distinct;
    if ((r = check_name(c, af, attr, dalloc_name_fully_qualified(attr))) < 0)
        return r;
    if (reqs && !json_is_null(reqs) && !json_is_array(reqs))
        return fail(c, -EINVAL, f, "requests: must be a list");
    k->requests = calloc(json_array_size(reqs) + 1, sizeof(*k->requests));
    if (!k->requests)
        return -ENOMEM;
    if ((r = request_refs(c, cl, f, reqs)) < 0)
        return r;
    for (size_t i = 0; i < json_array_size(reqs); i++)
        k->requests[k->n_requests++] = json_string_value(json_array_get(reqs, i));
    return 0;
}

void dalloc_claim_free(struct dalloc_claim *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n_requests; i++) {
        for (size_t k = 0; k < c->requests[i].n_subs; k++) {
            free(c->requests[i].subs[k].selectors);
            free(c->requests[i].subs[k].sel_cache);
            free(c->requests[i].subs[k].capreq_names);
            free(c->requests[i].subs[k].capreq_vals);
            free(c->requests[i].subs[k].all);
        }
        free(c->requests[i].subs);
    }
    free(c->requests);
    for (size_t i = 0; i < c->n_constraints; i++)
        free(c->constraints[i].requests);
    free(c->constraints);
    free(c->chosen_sub);
    free(c->rest_min);
    for (size_t i = 0; i < c->n_picks; i++)
        free(c->picks[i].consumed);
    free(c);
}

static int claim_devices(const struct ctx *c, const struct dalloc_gates *g, json_t *devs,
                         struct dalloc_claim *cl)
{
    json_t *reqs, *cons;
    int r;

    if ((r = get_list(c, devs, "requests", "spec.devices.requests", 32, &reqs)) < 0 ||
        (r = get_list(c, devs, "constraints", "spec.devices.constraints", 32, &cons)) < 0 ||
        (r = get_list(c, devs, "config", "spec.devices.config", 32, &cl->config)) < 0)
        return r;
    cl->requests = calloc(json_array_size(reqs) + 1, sizeof(*cl->requests));
    cl->chosen_sub = calloc(json_array_size(reqs) + 1, sizeof(*cl->chosen_sub));
    cl->rest_min = calloc(json_array_size(reqs) + 1, sizeof(*cl->rest_min));
    cl->constraints = calloc(json_array_size(cons) + 1, sizeof(*cl->constraints));
    if (!cl->requests || !cl->chosen_sub || !cl->rest_min || !cl->constraints)
        return -ENOMEM;
    for (size_t i = 0; i < json_array_size(reqs); i++) {
        cl->n_requests = i + 1;
        if ((r = decode_request(c, g, json_array_get(reqs, i), i, &cl->requests[i])) < 0)
            return r;
        for (size_t k = 0; k < i; k++)
            if (strcmp(cl->requests[k].name, cl->requests[i].name) == 0)
                return fail(c, -EINVAL, "spec.devices.requests", "duplicate request name %s",
                            cl->requests[i].name);
    }
    for (size_t i = 0; i < json_array_size(cons); i++) {
        cl->n_constraints = i + 1;
        r = decode_constraint(c, g, cl, json_array_get(cons, i), i, &cl->constraints[i]);
        if (r < 0)
            return r;
    }
    return decode_configs(c, cl, "spec.devices.config", cl->config);
}

int dalloc_decode_claim(struct dalloc *a, json_t *obj, struct diag *d)
{
    struct ctx c = {.kind = "ResourceClaim", .d = d};
    struct dalloc_claim *cl;
    json_t *alloc = json_object_get(json_object_get(obj, "status"), "allocation");
    int r;

    if ((r = meta(&c, obj, true)) < 0)
        return r;
    if (a->claims.len >= DALLOC_MAX_CLAIMS)
        return fail(&c, -E2BIG, "metadata", "more than %d claims", DALLOC_MAX_CLAIMS);
    cl = calloc(1, sizeof(*cl));
    if (!cl)
        return -ENOMEM;
    cl->obj = obj;
    cl->ns = c.ns;
    cl->name = c.name;
    cl->allocation = alloc && !json_is_null(alloc) ? alloc : NULL;
    r = claim_devices(&c, &a->gates, json_object_get(json_object_get(obj, "spec"), "devices"), cl);
    if (r >= 0)
        r = vec_push(&a->claims, &cl);
    if (r < 0)
        dalloc_claim_free(cl);
    return r < 0 ? r : 0;
}
