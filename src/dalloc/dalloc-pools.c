/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which pools the node sees (reference §4.1, upstream's GatherPools): slices whose nodeName is the
 * node, allNodes slices, slices whose single node selector term matches the node (matchFields on
 * metadata.name, matchExpressions on the labels of the Node object given in the input), slices
 * with perDeviceNodeSelection where a device is for the node, and slices with shared counters.
 * Among those, the newest generation of a pool counts; a pool with fewer of them than
 * resourceSliceCount is counted again over all its slices: obsolete (dropped) when another node
 * already has a newer generation, incomplete when still short. Pools with binding-condition
 * devices go last; duplicate device names across the node's slices, duplicate counter set names
 * and devices consuming unknown counters make a pool invalid. Shared counters
 * (DRAPartitionableDevices) live here: what each counter has left after the allocated devices
 * (also those of the pool's slices for other nodes), reserved and released by the search. Pools are
 * sorted by (driver, pool name), slices by name, and the usable pools' devices form the candidate
 * list the search walks.
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

/* Whether the node sees a device of s (kube-scheduler's relevance test for a slice): its
 * nodeName, allNodes or node selector match, or with perDeviceNodeSelection any of its devices'
 * does. Slices with shared counters count for every node. */
static bool slice_relevant(const struct dalloc *a, const struct dalloc_slice *s)
{
    if (s->shared_counters)
        return true;
    switch (s->node_kind) {
    case DALLOC_NODE_NAME:
        return strcmp(s->node_name, a->node) == 0;
    case DALLOC_NODE_ALL:
        return true;
    case DALLOC_NODE_SELECTOR:
        return dalloc_node_matches(a, s->node_selector);
    case DALLOC_NODE_PER_DEVICE:
        for (size_t i = 0; i < s->n_devices; i++)
            if (dalloc_device_on_node(a, &s->devices[i]))
                return true;
        return false;
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

static bool in_pool(const struct dalloc_pool *p, const struct dalloc_slice *s)
{
    return strcmp(p->driver, s->driver) == 0 && strcmp(p->name, s->pool) == 0;
}

static struct dalloc_pool *pool_find(struct dalloc *a, const struct dalloc_slice *s)
{
    for (size_t i = 0; i < a->pools.len; i++) {
        struct dalloc_pool *p = *VEC_AT(&a->pools, struct dalloc_pool *, i);
        if (in_pool(p, s))
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

/* Adds a slice the node sees to its pool: the newest generation among the node's slices wins (an
 * older slice is dropped, a newer one replaces what was collected); the pool's size is the
 * resourceSliceCount of the first slice of that generation. */
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
        p->generation = s->generation;
        p->count = s->count;
        vec_init(&p->slices, sizeof(struct dalloc_slice *), 1u << 16);
        vec_init(&p->others, sizeof(struct dalloc_slice *), 1u << 16);
        r = vec_push(&a->pools, &p);
        if (r < 0) {
            free(p);
            return r;
        }
    }
    if (s->generation < p->generation)
        return 0;
    if (s->generation > p->generation) {
        p->slices.len = 0;
        p->generation = s->generation;
        p->count = s->count;
    }
    return vec_push(&p->slices, &s);
}

static void pool_free(struct dalloc_pool *p)
{
    vec_release(&p->slices);
    vec_release(&p->others);
    free(p->counters);
    free(p);
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

/* Resolves the counters the devices of the slices in v consume against the pool's counter sets
 * and ties the devices to the pool: an unknown set or counter makes the pool invalid. */
static void pool_devices(struct dalloc_pool *p, struct vec *v)
{
    for (size_t i = 0; i < v->len; i++) {
        struct dalloc_slice *s = *VEC_AT(v, struct dalloc_slice *, i);
        for (size_t k = 0; k < s->n_devices; k++) {
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
}

/* The counter sets of the pool's counter slices (every node sees them), then what every device of
 * the generation consumes: also the devices of slices for other nodes, which hold counters when
 * allocated. */
static int pool_counters(struct dalloc_pool *p)
{
    size_t k;
    json_t *set;
    int r;

    for (size_t i = 0; i < p->slices.len; i++) {
        const struct dalloc_slice *s = *VEC_AT(&p->slices, struct dalloc_slice *, i);
        json_array_foreach(s->shared_counters, k,
                           set) if ((r = counters_add_set(p, set)) < 0) return r;
    }
    pool_devices(p, &p->slices);
    pool_devices(p, &p->others);
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

/* Two devices of the node's slices with one name make the pool invalid. */
static bool duplicate_names(const struct dalloc_pool *p)
{
    for (size_t i = 0; i < p->slices.len; i++) {
        const struct dalloc_slice *s = *VEC_AT(&p->slices, struct dalloc_slice *, i);
        for (size_t x = 0; x < s->n_devices; x++)
            for (size_t j = i; j < p->slices.len; j++) {
                const struct dalloc_slice *t = *VEC_AT(&p->slices, struct dalloc_slice *, j);
                for (size_t y = j == i ? x + 1 : 0; y < t->n_devices; y++)
                    if (strcmp(s->devices[x].name, t->devices[y].name) == 0)
                        return true;
            }
    }
    return false;
}

/*
 * A pool whose node slices fall short of its resourceSliceCount is looked at whole (upstream's
 * checkSlicesInPool): a newer generation elsewhere makes it obsolete (1: drop it — the driver is
 * replacing it and the new generation has nothing for this node); else all slices of its
 * generation are counted again, and the ones for other nodes kept in p->others for their
 * counters. 0 otherwise.
 */
static int pool_recount(struct dalloc *a, struct dalloc_pool *p)
{
    int64_t n = 0;
    int r;

    for (size_t i = 0; i < a->slices.len; i++) {
        struct dalloc_slice *s = *VEC_AT(&a->slices, struct dalloc_slice *, i);
        if (!in_pool(p, s) || s->generation < p->generation)
            continue;
        if (s->generation > p->generation)
            return 1;
        n++;
    }
    if (n != p->count) {
        p->incomplete = true;
        return 0;
    }
    for (size_t i = 0; i < a->slices.len; i++) {
        struct dalloc_slice *s = *VEC_AT(&a->slices, struct dalloc_slice *, i);
        bool mine = false;
        if (!in_pool(p, s) || s->generation != p->generation)
            continue;
        for (size_t j = 0; j < p->slices.len && !mine; j++)
            mine = *VEC_AT(&p->slices, struct dalloc_slice *, j) == s;
        if (!mine && (r = vec_push(&p->others, &s)) < 0)
            return r;
    }
    return 0;
}

/* Completeness and validity of a gathered pool: 1 when it is obsolete and must be dropped. An
 * incomplete pool is not validated; an invalid one (duplicate device names among the node's
 * slices, duplicate counter sets, unknown counters consumed) offers no devices. */
static int pool_check(struct dalloc *a, struct dalloc_pool *p)
{
    int r;

    qsort(p->slices.items, p->slices.len, sizeof(struct dalloc_slice *), cmp_slice);
    if ((int64_t)p->slices.len != p->count && (r = pool_recount(a, p)) != 0)
        return r;
    if (p->incomplete)
        return 0;
    p->invalid = duplicate_names(p);
    if (!p->invalid && (r = pool_counters(p)) < 0)
        return r;
    for (size_t i = 0; i < p->slices.len; i++) {
        const struct dalloc_slice *s = *VEC_AT(&p->slices, struct dalloc_slice *, i);
        for (size_t k = 0; k < s->n_devices; k++)
            p->binding = p->binding || s->devices[k].binding_conditions;
    }
    a->saw_invalid = a->saw_invalid || p->invalid;
    return 0;
}

/*
 * kube-scheduler's GatherPools for this node: the slices the node sees (slice_relevant; with
 * DRAPartitionableDevices off, slices with perDeviceNodeSelection or shared counters are skipped)
 * grouped by (driver, pool), each pool at the newest generation among them — so a pool that moved
 * to a new generation on other nodes still offers the complete old generation published for this
 * one — then checked (pool_check), sorted, and the devices of the usable pools listed as the
 * search's candidates.
 */
int dalloc_pools_gather(struct dalloc *a, struct diag *d)
{
    size_t kept = 0;
    int r;

    (void)d;
    for (size_t i = 0; i < a->slices.len; i++) {
        struct dalloc_slice *s = *VEC_AT(&a->slices, struct dalloc_slice *, i);
        if (s->has_counters && !a->gates.partitionable)
            continue;
        if (slice_relevant(a, s) && (r = pool_add(a, s)) < 0)
            return r;
    }
    for (size_t i = 0; i < a->pools.len; i++) {
        struct dalloc_pool *p = *VEC_AT(&a->pools, struct dalloc_pool *, i);
        if ((r = pool_check(a, p)) < 0)
            return r;
        if (r == 1)
            pool_free(p);
        else
            *VEC_AT(&a->pools, struct dalloc_pool *, kept++) = p;
    }
    a->pools.len = kept;
    if (a->pools.len)
        qsort(a->pools.items, a->pools.len, sizeof(struct dalloc_pool *), cmp_pool);
    for (size_t i = 0; i < a->pools.len; i++) {
        struct dalloc_pool *p = *VEC_AT(&a->pools, struct dalloc_pool *, i);
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
    for (size_t i = 0; i < a->pools.len; i++)
        pool_free(*VEC_AT(&a->pools, struct dalloc_pool *, i));
    vec_release(&a->pools);
    vec_release(&a->candidates);
}
