/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which pools the node sees (reference §4.1): slices whose nodeName is the node, allNodes slices,
 * and slices whose single node selector term matches the node (matchFields on metadata.name,
 * matchExpressions on the labels of the Node object given in the input). Only the newest generation
 * of a pool counts; a pool with fewer slices of that generation than resourceSliceCount is
 * incomplete; pools with binding-condition devices go last; duplicate device names across its
 * slices, duplicate counter set names and devices consuming unknown counters make it invalid.
 * Shared counters (DRAPartitionableDevices) live here: what each counter has left after the
 * allocated devices, reserved and released by the search. Pools are sorted by (driver, pool name),
 * slices by name, and the usable pools' devices form the candidate list the search walks.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dalloc-model.h"

static bool in_values(const json_t *values, const char *v)
{
    size_t i;
    json_t *x;

    json_array_foreach(values, i, x) if (v && json_string_value(x) &&
                                         strcmp(json_string_value(x), v) == 0) return true;
    return false;
}

static bool req_matches(const json_t *req, const char *val, bool present)
{
    const char *op = json_string_value(json_object_get(req, "operator"));
    const json_t *values = json_object_get(req, "values");

    if (!op)
        return false;
    if (strcmp(op, "In") == 0)
        return present && in_values(values, val);
    if (strcmp(op, "NotIn") == 0)
        return !present || !in_values(values, val);
    if (strcmp(op, "Exists") == 0)
        return present;
    if (strcmp(op, "DoesNotExist") == 0)
        return !present;
    if ((strcmp(op, "Gt") == 0 || strcmp(op, "Lt") == 0) && present &&
        json_array_size(values) == 1) {
        char *end1, *end2;
        long long a = strtoll(val, &end1, 10);
        long long b = strtoll(json_string_value(json_array_get(values, 0)) ?: "", &end2, 10);
        if (*end1 || *end2 || end1 == val)
            return false;
        return op[0] == 'G' ? a > b : a < b;
    }
    return false;
}

bool dalloc_node_matches(const struct dalloc *a, const json_t *selector)
{
    const json_t *term = json_array_get(json_object_get(selector, "nodeSelectorTerms"), 0);
    const json_t *req;
    size_t i;

    if (!term)
        return false;
    json_array_foreach(json_object_get(term, "matchFields"), i, req)
    {
        const char *key = json_string_value(json_object_get(req, "key"));
        if (!key || strcmp(key, "metadata.name") != 0 || !req_matches(req, a->node, true))
            return false;
    }
    json_array_foreach(json_object_get(term, "matchExpressions"), i, req)
    {
        const char *key = json_string_value(json_object_get(req, "key"));
        const char *v = key ? json_string_value(json_object_get(a->node_labels, key)) : NULL;
        if (!key || !req_matches(req, v ? v : "", v != NULL))
            return false;
    }
    return true;
}

static bool slice_visible(const struct dalloc *a, const struct dalloc_slice *s)
{
    switch (s->node_kind) {
    case DALLOC_NODE_NAME:
        return strcmp(s->node_name, a->node) == 0;
    case DALLOC_NODE_ALL:
        return true;
    case DALLOC_NODE_SELECTOR:
        return dalloc_node_matches(a, s->node_selector);
    case DALLOC_NODE_PER_DEVICE:
        return true; /* decided per device when selecting */
    case DALLOC_NODE_IGNORED:
        return false;
    }
    return false;
}

bool dalloc_device_on_node(const struct dalloc *a, const struct dalloc_device *dev)
{
    if (dev->slice->node_kind != DALLOC_NODE_PER_DEVICE)
        return true;
    switch (dev->node_kind) {
    case DALLOC_NODE_NAME:
        return strcmp(dev->node_name, a->node) == 0;
    case DALLOC_NODE_ALL:
        return true;
    case DALLOC_NODE_SELECTOR:
        return dalloc_node_matches(a, dev->node_selector);
    default:
        return false;
    }
}

static struct dalloc_pool *pool_find(struct dalloc *a, const struct dalloc_slice *s)
{
    for (size_t i = 0; i < a->pools.len; i++) {
        struct dalloc_pool *p = *VEC_AT(&a->pools, struct dalloc_pool *, i);
        if (strcmp(p->driver, s->driver) == 0 && strcmp(p->name, s->pool) == 0)
            return p;
    }
    return NULL;
}

static int cmp_pool(const void *x, const void *y)
{
    const struct dalloc_pool *p = *(struct dalloc_pool *const *)x,
                             *q = *(struct dalloc_pool *const *)y;
    int c = (int)p->binding - (int)q->binding;

    if (c)
        return c;
    c = strcmp(p->driver, q->driver);
    return c ? c : strcmp(p->name, q->name);
}

static int cmp_slice(const void *x, const void *y)
{
    return strcmp((*(struct dalloc_slice *const *)x)->name,
                  (*(struct dalloc_slice *const *)y)->name);
}

/* Highest generation per pool over ALL slices (also those not for this node). */
static int64_t newest_generation(const struct dalloc *a, const char *driver, const char *pool,
                                 int64_t *ret_count, size_t *ret_have)
{
    int64_t gen = -1;

    for (size_t i = 0; i < a->slices.len; i++) {
        const struct dalloc_slice *s = *VEC_AT(&a->slices, struct dalloc_slice *, i);
        if (strcmp(s->driver, driver) == 0 && strcmp(s->pool, pool) == 0 && s->generation > gen)
            gen = s->generation;
    }
    *ret_have = 0;
    for (size_t i = 0; i < a->slices.len; i++) {
        const struct dalloc_slice *s = *VEC_AT(&a->slices, struct dalloc_slice *, i);
        if (strcmp(s->driver, driver) == 0 && strcmp(s->pool, pool) == 0 && s->generation == gen) {
            (*ret_have)++;
            *ret_count = s->count;
        }
    }
    return gen;
}

static int pool_add(struct dalloc *a, struct dalloc_slice *s)
{
    struct dalloc_pool *p = pool_find(a, s);
    int r;

    if (!p) {
        p = calloc(1, sizeof(*p));
        if (!p)
            return -ENOMEM;
        p->driver = s->driver;
        p->name = s->pool;
        vec_init(&p->slices, sizeof(struct dalloc_slice *), 1024);
        r = vec_push(&a->pools, &p);
        if (r < 0) {
            free(p);
            return r;
        }
    }
    for (size_t i = 0; i < s->n_devices; i++)
        p->binding = p->binding || s->devices[i].binding_conditions;
    return vec_push(&p->slices, &s);
}

static bool same_pool(const struct dalloc_pool *p, const struct dalloc_slice *s)
{
    return s->generation == p->generation && strcmp(s->driver, p->driver) == 0 &&
           strcmp(s->pool, p->name) == 0;
}

static int counters_add_set(struct dalloc_pool *p, const json_t *set)
{
    const char *setname = json_string_value(json_object_get(set, "name")), *key;
    json_t *v;

    for (size_t i = 0; i < p->n_counters; i++)
        if (strcmp(p->counters[i].set, setname) == 0)
            p->invalid = true; /* duplicate counter set name in the pool */
    json_object_foreach(json_object_get(set, "counters"), key, v)
    {
        struct dalloc_counter *n = reallocarray(p->counters, p->n_counters + 1, sizeof(*n));
        if (!n)
            return -ENOMEM;
        p->counters = n;
        n[p->n_counters] = (struct dalloc_counter){setname, key, {0}};
        if (dalloc_quantity(json_object_get(v, "value"), &n[p->n_counters].avail) < 0)
            p->invalid = true; /* validated by decode; cannot happen */
        p->n_counters++;
    }
    return 0;
}

/* The counter sets of every slice of the pool's generation (on any node), then every device's
 * consumption resolved against them: an unknown set or counter makes the pool invalid. */
static int pool_counters(struct dalloc *a, struct dalloc_pool *p)
{
    size_t i, k;
    json_t *set;
    int r;

    for (i = 0; i < a->slices.len; i++) {
        const struct dalloc_slice *s = *VEC_AT(&a->slices, struct dalloc_slice *, i);
        if (!same_pool(p, s))
            continue;
        json_array_foreach(s->shared_counters, k,
                           set) if ((r = counters_add_set(p, set)) < 0) return r;
    }
    for (i = 0; i < a->slices.len; i++) {
        struct dalloc_slice *s = *VEC_AT(&a->slices, struct dalloc_slice *, i);
        if (!same_pool(p, s))
            continue;
        for (k = 0; k < s->n_devices; k++) {
            struct dalloc_device *dev = &s->devices[k];
            dev->pool = p;
            for (size_t c = 0; c < dev->n_consume; c++) {
                size_t x = 0;
                while (x < p->n_counters &&
                       (strcmp(p->counters[x].set, dev->consume[c].set) != 0 ||
                        strcmp(p->counters[x].name, dev->consume[c].name) != 0))
                    x++;
                if (x == p->n_counters)
                    p->invalid = true;
                dev->consume[c].counter = x;
            }
        }
    }
    return 0;
}

/* The counter consumption i of dev draws from, or NULL (no pool, or an unknown counter: the
 * pool is invalid then). */
static struct dalloc_counter *counter_of(const struct dalloc_device *dev, size_t i)
{
    if (!dev->pool || dev->consume[i].counter >= dev->pool->n_counters)
        return NULL;
    return &dev->pool->counters[dev->consume[i].counter];
}

bool dalloc_counters_take(struct dalloc_device *dev)
{
    size_t i;

    for (i = 0; i < dev->n_consume; i++) {
        struct dalloc_counter *ctr = counter_of(dev, i);
        struct cel_quantity left;
        if (!ctr || cel_quantity_cmp(&ctr->avail, &dev->consume[i].q) < 0 ||
            cel_quantity_sub(&ctr->avail, &dev->consume[i].q, NULL, &left) < 0)
            break;
        ctr->avail = left;
    }
    if (i == dev->n_consume)
        return true;
    while (i-- > 0) {
        struct dalloc_counter *ctr = counter_of(dev, i);
        struct cel_quantity back;
        if (cel_quantity_add(&ctr->avail, &dev->consume[i].q, NULL, &back) >= 0)
            ctr->avail = back;
    }
    return false;
}

void dalloc_counters_force(struct dalloc_device *dev)
{
    for (size_t i = 0; i < dev->n_consume; i++) {
        struct dalloc_counter *ctr = counter_of(dev, i);
        struct cel_quantity left = {0};
        if (!ctr)
            continue;
        if (cel_quantity_cmp(&ctr->avail, &dev->consume[i].q) < 0 ||
            cel_quantity_sub(&ctr->avail, &dev->consume[i].q, NULL, &left) < 0)
            left = (struct cel_quantity){0};
        ctr->avail = left;
    }
}

void dalloc_counters_give(struct dalloc_device *dev)
{
    for (size_t i = 0; i < dev->n_consume; i++) {
        struct dalloc_counter *ctr = counter_of(dev, i);
        struct cel_quantity back;
        if (ctr && cel_quantity_add(&ctr->avail, &dev->consume[i].q, NULL, &back) >= 0)
            ctr->avail = back;
    }
}

static int pool_check(struct dalloc *a, struct dalloc_pool *p)
{
    int r;

    int64_t count = 0;
    size_t have = 0;

    p->generation = newest_generation(a, p->driver, p->name, &count, &have);
    if ((int64_t)have != count)
        p->incomplete = true;
    for (size_t i = 0; i < p->slices.len; i++)
        for (size_t j = i + 1; j < p->slices.len; j++) {
            const struct dalloc_slice *s = *VEC_AT(&p->slices, struct dalloc_slice *, i);
            const struct dalloc_slice *t = *VEC_AT(&p->slices, struct dalloc_slice *, j);
            for (size_t x = 0; x < s->n_devices; x++)
                for (size_t y = 0; y < t->n_devices; y++)
                    if (strcmp(s->devices[x].name, t->devices[y].name) == 0)
                        p->invalid = true;
        }
    if ((r = pool_counters(a, p)) < 0)
        return r;
    if (p->invalid)
        a->saw_invalid = true;
    return 0;
}

int dalloc_pools_gather(struct dalloc *a, struct diag *d)
{
    int r;

    (void)d;
    for (size_t i = 0; i < a->slices.len; i++) {
        struct dalloc_slice *s = *VEC_AT(&a->slices, struct dalloc_slice *, i);
        int64_t count;
        size_t have;
        if (!slice_visible(a, s) ||
            s->generation != newest_generation(a, s->driver, s->pool, &count, &have))
            continue;
        if ((r = pool_add(a, s)) < 0)
            return r;
    }
    if (a->pools.len)
        qsort(a->pools.items, a->pools.len, sizeof(struct dalloc_pool *), cmp_pool);
    for (size_t i = 0; i < a->pools.len; i++) {
        struct dalloc_pool *p = *VEC_AT(&a->pools, struct dalloc_pool *, i);
        qsort(p->slices.items, p->slices.len, sizeof(struct dalloc_slice *), cmp_slice);
        if ((r = pool_check(a, p)) < 0)
            return r;
        if (p->incomplete || p->invalid)
            continue;
        for (size_t j = 0; j < p->slices.len; j++) {
            struct dalloc_slice *s = *VEC_AT(&p->slices, struct dalloc_slice *, j);
            for (size_t k = 0; k < s->n_devices; k++) {
                struct dalloc_device *dev = &s->devices[k];
                if ((r = vec_push(&a->candidates, &dev)) < 0)
                    return r;
            }
        }
    }
    return 0;
}

void dalloc_pools_release(struct dalloc *a)
{
    for (size_t i = 0; i < a->pools.len; i++) {
        struct dalloc_pool *p = *VEC_AT(&a->pools, struct dalloc_pool *, i);
        vec_release(&p->slices);
        free(p->counters);
        free(p);
    }
    vec_release(&a->pools);
    vec_release(&a->candidates);
}
