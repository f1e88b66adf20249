/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cluster as the simulator keeps it: Nodes sorted by name, each with the ResourceSlices bound
 * to it and an allocator made on first use that holds only what the node sees (its slices, the
 * slices not bound to one node, the other nodes' slices of pools it shares with them, classes,
 * Namespaces, allocated claims). Which node alone sees a pool decides where a commit goes: to that
 * node's allocator, or — for a pool several nodes see — to every allocator, changing every node.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base-doc.h"
#include "sched-internal.h"

void sched_nodes_free(struct sched *s)
{
    for (size_t i = 0; i < s->n_nodes; i++) {
        json_decref(s->nodes[i].slices);
        json_decref(s->nodes[i].claims);
        json_decref(s->nodes[i].alloc);
        dalloc_free(s->nodes[i].a);
    }
    free(s->nodes);
    free(s->states);
    s->nodes = NULL;
    s->states = NULL;
    s->n_nodes = 0;
}

/* "driver\npool" of a slice or an allocation result (neither name can hold a newline). */
static int pool_key(const char *driver, const char *pool, char *buf, size_t n)
{
    if (!driver || !pool)
        return -EINVAL;
    return (size_t)snprintf(buf, n, "%s\n%s", driver, pool) >= n ? -ENAMETOOLONG : 0;
}

static int cmp_node(const void *x, const void *y)
{
    return strcmp(((const struct snode *)x)->name, ((const struct snode *)y)->name);
}

static struct snode *node_named(struct sched *s, const char *name)
{
    json_t *i = name ? json_object_get(s->node_index, name) : NULL;

    return i ? &s->nodes[json_integer_value(i)] : NULL;
}

static int nodes_build(struct sched *s)
{
    size_t n = json_array_size(s->node_objs), i;
    json_t *obj;

    s->nodes = calloc(n ? n : 1, sizeof(*s->nodes));
    s->states = calloc(n ? n : 1, sizeof(*s->states));
    if (!s->nodes || !s->states)
        return -ENOMEM;
    json_array_foreach(s->node_objs, i, obj)
    {
        struct snode *sn = &s->nodes[s->n_nodes++];

        sn->name = str_at(obj, "metadata", "name");
        sn->obj = obj;
        sn->slices = json_array();
        sn->claims = json_array();
        if (!sn->slices || !sn->claims)
            return -ENOMEM;
    }
    qsort(s->nodes, s->n_nodes, sizeof(*s->nodes), cmp_node);
    for (i = 0; i < s->n_nodes; i++)
        if (json_object_set_new(s->node_index, s->nodes[i].name, json_integer((json_int_t)i)) < 0)
            return -ENOMEM;
    return 0;
}

/* Hands each node-bound slice to its node and records which pools one node alone sees. */
static int slices_index(struct sched *s)
{
    json_t *obj;
    size_t i;
    char key[1024];

    json_array_foreach(s->common, i, obj)
    {
        const char *kind = str_at(obj, "kind", NULL);

        if (strcmp(kind, "ResourceSlice") == 0 &&
            pool_key(str_at(obj, "spec", "driver"),
                     str_at(json_object_get(obj, "spec"), "pool", "name"), key, sizeof(key)) == 0 &&
            json_object_set_new(s->pool_owner, key, json_string("")) < 0)
            return -ENOMEM;
    }
    json_array_foreach(s->slices, i, obj)
    {
        const char *node = str_at(obj, "spec", "nodeName");
        const char *owner;
        struct snode *sn = node_named(s, node);

        if (pool_key(str_at(obj, "spec", "driver"),
                     str_at(json_object_get(obj, "spec"), "pool", "name"), key, sizeof(key)) < 0)
            continue; /* the allocator reports the malformed slice on the node */
        owner = json_string_value(json_object_get(s->pool_owner, key));
        if (!owner || strcmp(owner, node) != 0)
            if (json_object_set_new(s->pool_owner, key, json_string(owner ? "" : node)) < 0)
                return -ENOMEM;
        if (sn && json_array_append(sn->slices, obj) < 0)
            return -ENOMEM;
    }
    /* A pool whose node-bound slices are on several nodes is judged whole on each node (is it
     * complete, has another node a newer generation, what do the other nodes' devices hold of its
     * counters), so every node's allocator gets all of them; it offers only its own. */
    json_array_clear(s->spread_slices);
    json_array_foreach(s->slices, i, obj)
    {
        const char *owner;

        if (pool_key(str_at(obj, "spec", "driver"),
                     str_at(json_object_get(obj, "spec"), "pool", "name"), key, sizeof(key)) < 0)
            continue;
        owner = json_string_value(json_object_get(s->pool_owner, key));
        if (owner && !*owner && json_array_append(s->spread_slices, obj) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* The node that alone sees every device of the claims' allocations, or NULL when some result is on
 * a pool several nodes see (*shared) or on no known node. */
static struct snode *claims_owner(struct sched *s, json_t *claims, bool *shared)
{
    struct snode *owner = NULL;
    json_t *c, *res;
    size_t i, j;
    char key[1024];

    *shared = false;
    json_array_foreach(claims, i, c)
    {
        json_t *results = json_object_get(
            json_object_get(json_object_get(json_object_get(c, "status"), "allocation"), "devices"),
            "results");

        json_array_foreach(results, j, res)
        {
            const char *o;
            struct snode *sn;

            if (pool_key(str_at(res, "driver", NULL), str_at(res, "pool", NULL), key, sizeof(key)) <
                0)
                continue;
            o = json_string_value(json_object_get(s->pool_owner, key));
            sn = o ? node_named(s, o) : NULL;
            if (o && !*o)
                *shared = true;
            if (sn && owner && sn != owner)
                *shared = true;
            if (sn)
                owner = sn;
        }
    }
    return *shared ? NULL : owner;
}

/* The claims allocated before the run go to the node whose devices they hold, or to every node. */
static int claims_index(struct sched *s)
{
    const char *k;
    json_t *c;

    json_object_foreach(s->claims, k, c)
    {
        _cleanup_json_ json_t *one = json_pack("[O]", c);
        struct snode *sn;
        bool shared;

        if (!one)
            return -ENOMEM;
        if (!allocated(c))
            continue;
        sn = claims_owner(s, one, &shared);
        if (shared && json_array_append(s->shared_claims, c) < 0)
            return -ENOMEM;
        if (sn && json_array_append(sn->claims, c) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* The node's allocator: the common objects, the Node, its slices and the allocated claims. */
int sched_node_allocator(struct sched *s, struct snode *sn, struct diag *d)
{
    json_t *v;
    size_t i;
    int r;

    if (sn->a)
        return 0;
    if ((r = dalloc_new(sn->name, &s->gates, &sn->a)) < 0)
        return r;
    dalloc_set_budget(sn->a, s->budget);
    if (!s->cel && (r = dalloc_cel_new(&s->cel)) < 0)
        return r;
    dalloc_set_cel(sn->a, s->cel);
    json_array_foreach(s->common, i, v) if ((r = dalloc_add(sn->a, v, d)) < 0) return r;
    if ((r = dalloc_add(sn->a, sn->obj, d)) < 0)
        return r;
    json_array_foreach(sn->slices, i, v) if ((r = dalloc_add(sn->a, v, d)) < 0) return r;
    json_array_foreach(s->spread_slices, i, v)
    {
        if (strcmp(str_at(v, "spec", "nodeName"), sn->name) != 0 &&
            (r = dalloc_add(sn->a, v, d)) < 0)
            return r;
    }
    if ((r = dalloc_commit(sn->a, s->shared_claims, d)) < 0 ||
        (r = dalloc_commit(sn->a, sn->claims, d)) < 0)
        return r;
    json_decref(sn->claims);
    sn->claims = NULL;
    return 0;
}

/* Makes the claims allocated on sn the cluster's state. */
int sched_commit(struct sched *s, struct snode *sn, json_t *claims, struct diag *d)
{
    bool shared;
    json_t *c;
    size_t i;
    char ck[512];
    int r;

    claims_owner(s, claims, &shared);
    if (!shared) {
        s->states[sn - s->nodes].version++;
        if ((r = dalloc_commit(sn->a, claims, d)) < 0)
            return r;
    } else {
        s->global_version++;
        for (i = 0; i < s->n_nodes; i++)
            if (s->nodes[i].a && (r = dalloc_commit(s->nodes[i].a, claims, d)) < 0)
                return r;
        if (json_array_extend(s->shared_claims, claims) < 0)
            return -ENOMEM;
    }
    json_array_foreach(claims, i, c)
    {
        if (key_of(c, ck, sizeof(ck)) < 0)
            return -EINVAL;
        if (json_object_set(s->claims, ck, c) < 0 ||
            json_object_set_new(s->bound, ck, json_string(sn->name)) < 0)
            return -ENOMEM;
    }
    return 0;
}

int sched_nodes_build(struct sched *s)
{
    int r;

    sched_nodes_free(s);
    if ((r = nodes_build(s)) < 0 || (r = slices_index(s)) < 0 || (r = claims_index(s)) < 0)
        return r;
    return 0;
}
