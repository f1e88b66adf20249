/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GetPreferredAllocation: which of the kubelet's candidate ids a container should get. Full GPUs
 * go to src/topo's exact search over the score matrix (NVIDIA's weights), computed once per
 * inventory instead of on every call as NVIDIA does; replicas and MIG devices go to
 * topo_choose_replicas, which follows NVIDIA's load rule under the allocation policy and breaks its
 * ties by topology. The kubelet only takes this as advice (it tops up short answers and drops
 * unknown ids), so nothing here fails a call: anything odd — unknown ids, a lost GPU, more wanted
 * than offered — falls back to the must-include ids followed by the candidates in order.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dp.h"

static enum topo_pcie topo_pcie_of(enum gpu_link_level level)
{
    switch (level) {
    case GPU_LINK_PIX:
        return TOPO_PCIE_PIX;
    case GPU_LINK_PXB:
        return TOPO_PCIE_PXB;
    case GPU_LINK_PHB:
        return TOPO_PCIE_PHB;
    case GPU_LINK_NODE:
        return TOPO_PCIE_NODE;
    case GPU_LINK_SYS:
        return TOPO_PCIE_SYS;
    default:
        return TOPO_PCIE_UNKNOWN;
    }
}

/* GPUs behind one PCIe switch share a group: the lowest index of the GPUs at PIX from it. */
static int pcie_group(const struct gpu_inventory *inv, size_t i)
{
    for (size_t j = 0; j < i; j++) {
        const struct gpu_link *l = gpu_inventory_link(inv, i, j);
        if (l && l->pcie == GPU_LINK_PIX)
            return (int)j;
    }
    return (int)i;
}

void dp_topo_build(struct dp_topo *t, const struct gpu_inventory *inv)
{
    t->valid = inv->n_devices > 0 && inv->n_devices <= TOPO_MAX_GPUS &&
               topo_matrix_init(&t->m, (unsigned)inv->n_devices) >= 0;
    if (!t->valid)
        return;
    for (unsigned i = 0; i < t->m.n; i++) {
        t->m.numa[i] = inv->devices[i].numa_node;
        t->m.group[i] = pcie_group(inv, i);
        for (unsigned j = i + 1; j < t->m.n; j++) {
            const struct gpu_link *l = gpu_inventory_link(inv, i, j);
            unsigned score = l ? topo_link_score(l->nvlinks, topo_pcie_of(l->pcie)) : 0;
            if (topo_matrix_set(&t->m, i, j, score) < 0)
                t->valid = false;
        }
    }
}

/* ---- the answer ---- */

struct answer {
    V1beta1__ContainerPreferredAllocationResponse *out;
    size_t want;
};

static bool has(const struct answer *a, const char *id)
{
    for (size_t i = 0; i < a->out->n_deviceids; i++)
        if (strcmp(a->out->deviceids[i], id) == 0)
            return true;
    return false;
}

/* Appends id unless present or the answer is full. */
static int put(struct answer *a, const char *id)
{
    V1beta1__ContainerPreferredAllocationResponse *out = a->out;
    if (out->n_deviceids >= a->want || has(a, id))
        return 0;
    char **v = realloc(out->deviceids, (out->n_deviceids + 1) * sizeof(*v));
    if (!v)
        return -ENOMEM;
    out->deviceids = v;
    v[out->n_deviceids] = strdup(id);
    if (!v[out->n_deviceids])
        return -ENOMEM;
    out->n_deviceids++;
    return 0;
}

static int put_must(struct answer *a, const V1beta1__ContainerPreferredAllocationRequest *q)
{
    int r = 0;
    for (size_t i = 0; i < q->n_must_include_deviceids && r >= 0; i++)
        r = put(a, q->must_include_deviceids[i]);
    return r;
}

/* Must-include ids, then the candidates in the kubelet's order. */
static int fallback(struct answer *a, const V1beta1__ContainerPreferredAllocationRequest *q)
{
    int r = put_must(a, q);
    for (size_t i = 0; i < q->n_available_deviceids && r >= 0; i++)
        r = put(a, q->available_deviceids[i]);
    return r;
}

/* ---- full GPUs ---- */

static const struct dp_device *known(const struct dp_resource *r, const struct dp_topo *topo,
                                     const char *id)
{
    const struct dp_device *dev = dp_resource_find(r, id);
    return dev && dev->gpu < topo->m.n ? dev : NULL;
}

static int choose_gpus(const struct dp_resource *r, const struct dp_topo *topo,
                       const V1beta1__ContainerPreferredAllocationRequest *q, struct answer *a)
{
    const struct dp_device *by_gpu[TOPO_MAX_GPUS] = {0};
    uint64_t avail = 0, must = 0;
    struct topo_choice choice;
    for (size_t i = 0; i < q->n_available_deviceids; i++) {
        const struct dp_device *dev = known(r, topo, q->available_deviceids[i]);
        if (dev) {
            avail |= 1ull << dev->gpu;
            by_gpu[dev->gpu] = dev;
        }
    }
    for (size_t i = 0; i < q->n_must_include_deviceids; i++) {
        const struct dp_device *dev = known(r, topo, q->must_include_deviceids[i]);
        if (dev) {
            must |= 1ull << dev->gpu;
            by_gpu[dev->gpu] = dev;
        }
    }
    if (topo_choose(&topo->m, avail | must, must, (unsigned)a->want, NULL, &choice) < 0)
        return fallback(a, q);
    int ret = put_must(a, q);
    for (unsigned g = 0; g < topo->m.n && ret >= 0; g++)
        if (choice.mask & (1ull << g))
            ret = put(a, by_gpu[g]->id);
    return ret;
}

/* ---- replicas and MIG devices ---- */

struct candidates {
    struct topo_replica v[TOPO_MAX_REPLICAS];
    const char *id[TOPO_MAX_REPLICAS];
    size_t n;
};

static void add_candidate(struct candidates *c, const struct dp_resource *r,
                          const struct dp_topo *topo, const char *id, bool must)
{
    const struct dp_device *dev = known(r, topo, id);
    if (!dev || c->n == TOPO_MAX_REPLICAS)
        return;
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->id[i], id) == 0)
            return;
    c->v[c->n] = (struct topo_replica){.gpu = dev->gpu, .must = must};
    c->id[c->n++] = dev->id;
}

static int choose_replicas(const struct dp_config *cfg, const struct dp_resource *r,
                           const struct dp_topo *topo,
                           const V1beta1__ContainerPreferredAllocationRequest *q, struct answer *a)
{
    _cleanup_free_ struct candidates *c = calloc(1, sizeof(*c));
    _cleanup_free_ size_t *picked = calloc(a->want, sizeof(*picked));
    enum topo_replica_policy policy = cfg->shared_alloc_policy == DP_ALLOC_PACKED
                                          ? TOPO_REPLICAS_PACKED
                                          : TOPO_REPLICAS_DISTRIBUTED;
    if (!c || !picked)
        return -ENOMEM;
    for (size_t i = 0; i < q->n_must_include_deviceids; i++)
        add_candidate(c, r, topo, q->must_include_deviceids[i], true);
    for (size_t i = 0; i < q->n_available_deviceids; i++)
        add_candidate(c, r, topo, q->available_deviceids[i], false);
    if (topo_choose_replicas(&topo->m, c->v, c->n, r->per_gpu, (unsigned)a->want, policy, picked) <
        0)
        return fallback(a, q);
    int ret = put_must(a, q);
    for (size_t i = 0; i < a->want && ret >= 0; i++)
        ret = put(a, c->id[picked[i]]);
    return ret;
}

static bool whole_gpus(const struct dp_resource *r)
{
    for (size_t i = 0; i < r->n_devices; i++)
        if (r->devices[i].replica >= 0 || r->devices[i].mig >= 0)
            return false;
    return true;
}

static int prefer_one(const struct dp_config *cfg, const struct dp_resource *r,
                      const struct dp_topo *topo,
                      const V1beta1__ContainerPreferredAllocationRequest *q, struct answer *a)
{
    if (q->allocation_size <= 0)
        return 0;
    a->want = (size_t)q->allocation_size;
    if (!topo->valid || a->want > TOPO_MAX_REPLICAS)
        return fallback(a, q);
    if (whole_gpus(r))
        return choose_gpus(r, topo, q, a);
    return choose_replicas(cfg, r, topo, q, a);
}

static void preferred_freep(V1beta1__PreferredAllocationResponse **p)
{
    if (*p)
        protobuf_c_message_free_unpacked(&(*p)->base, NULL);
}

int dp_prefer(const struct dp_config *cfg, const struct dp_resource *r, const struct dp_topo *topo,
              const V1beta1__PreferredAllocationRequest *req,
              V1beta1__PreferredAllocationResponse **ret)
{
    _cleanup_(preferred_freep) V1beta1__PreferredAllocationResponse *resp = malloc(sizeof(*resp));
    size_t n = req->n_container_requests;
    if (!resp)
        return -ENOMEM;
    v1beta1__preferred_allocation_response__init(resp);
    resp->container_responses = calloc(n ? n : 1, sizeof(*resp->container_responses));
    if (!resp->container_responses)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        struct answer a = {.out = malloc(sizeof(*a.out))};
        if (!a.out)
            return -ENOMEM;
        v1beta1__container_preferred_allocation_response__init(a.out);
        resp->container_responses[resp->n_container_responses++] = a.out;
        int r2 = prefer_one(cfg, r, topo, req->container_requests[i], &a);
        if (r2 < 0)
            return r2;
    }
    *ret = TAKE_PTR(resp);
    return 0;
}
