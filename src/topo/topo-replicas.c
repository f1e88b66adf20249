/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Choosing replicas of shared GPUs (time-slicing, MPS): "<uuid>::<n>" devices, several per GPU.
 * NVIDIA's allocator picks one replica at a time from the GPU that comes first by load (fewest
 * replicas in use for `distributed`, most for `packed`), then by fewest picked in this request, and
 * leaves ties to sort order. gpuplane keeps that load rule, so the per-GPU counts match what
 * operators expect from the policy flag, and spends the ties on topology: the GPUs a container ends
 * up seeing are the best connected among those the load rule allows.
 */
#include <errno.h>
#include <string.h>

#include "topo.h"

struct replicas {
    const struct topo_matrix *m;
    const struct topo_replica *avail;
    size_t n_avail;
    enum topo_replica_policy policy;
    unsigned load[TOPO_MAX_GPUS];   /* replicas in use by others or already picked */
    unsigned free[TOPO_MAX_GPUS];   /* replicas still available to pick */
    unsigned picked[TOPO_MAX_GPUS]; /* picked in this request, must-include ones too */
    size_t cursor[TOPO_MAX_GPUS];   /* where to look for a GPU's next free replica */
    bool taken[TOPO_MAX_REPLICAS];
};

static unsigned lowest(uint64_t x)
{
    return (unsigned)__builtin_ctzll(x);
}

static uint64_t bit(unsigned g)
{
    return UINT64_C(1) << g;
}

/* Counts per GPU; -EINVAL on a replica of an unknown GPU or more replicas than the GPU has. */
static int replicas_init(struct replicas *r, const unsigned *total, unsigned *ret_must)
{
    unsigned must = 0;

    for (size_t i = 0; i < r->n_avail; i++) {
        unsigned g = r->avail[i].gpu;
        if (g >= r->m->n)
            return -EINVAL;
        if (r->avail[i].must) {
            r->taken[i] = true;
            r->picked[g]++;
            must++;
        } else {
            r->free[g]++;
        }
    }
    for (unsigned g = 0; g < r->m->n; g++) {
        if (r->free[g] + r->picked[g] > total[g])
            return -EINVAL;
        /* As NVIDIA's: must-include replicas are not candidates, so they count as in use. */
        r->load[g] = total[g] - r->free[g];
    }
    *ret_must = must;
    return 0;
}

/* < 0 when GPU a comes before GPU b under the policy's load rule, 0 when they tie. */
static int load_cmp(const struct replicas *r, unsigned a, unsigned b)
{
    if (r->load[a] != r->load[b]) {
        bool less = r->load[a] < r->load[b];
        return (r->policy == TOPO_REPLICAS_DISTRIBUTED) == less ? -1 : 1;
    }
    if (r->picked[a] != r->picked[b])
        return r->picked[a] < r->picked[b] ? -1 : 1;
    return 0;
}

/* The GPUs that come first under the load rule, all tied. */
static uint64_t first_tier(const struct replicas *r)
{
    uint64_t tier = 0;
    unsigned lead = 0;

    for (unsigned g = 0; g < r->m->n; g++) {
        if (!r->free[g])
            continue;
        if (!tier || load_cmp(r, g, lead) < 0) {
            tier = bit(g);
            lead = g;
        } else if (load_cmp(r, g, lead) == 0) {
            tier |= bit(g);
        }
    }
    return tier;
}

static uint64_t in_answer(const struct replicas *r)
{
    uint64_t set = 0;

    for (unsigned g = 0; g < r->m->n; g++)
        if (r->picked[g])
            set |= bit(g);
    return set;
}

static void pick_one(struct replicas *r, unsigned g)
{
    size_t i = r->cursor[g];

    while (r->taken[i] || r->avail[i].gpu != g)
        i++;
    r->taken[i] = true;
    r->cursor[g] = i + 1;
    r->free[g]--;
    r->load[g]++;
    r->picked[g]++;
}

/* The first q GPUs of the tier (its lowest indices), or all of it when it has fewer. */
static uint64_t lowest_of(uint64_t tier, unsigned q)
{
    uint64_t out = 0;

    for (uint64_t x = tier; x && q > 0; x &= x - 1, q--)
        out |= bit(lowest(x));
    return out;
}

/*
 * A distributed round: every GPU of the tier would get one replica before any gets a second, so
 * with q picks left the question is which q GPUs of the tier. Tied on picks, the tier's GPUs are
 * either all already in the answer (topology cannot tell them apart) or all new: then they are
 * chosen as the best set together with the answer's GPUs.
 */
static int distributed_round(struct replicas *r, uint64_t tier, unsigned q, uint64_t *ret_gpus)
{
    uint64_t answer = in_answer(r);
    struct topo_choice c;
    int k;

    if ((unsigned)__builtin_popcountll(tier) <= q || (tier & answer)) {
        *ret_gpus = lowest_of(tier, q);
        return 0;
    }
    k = topo_choose(r->m, answer | tier, answer, (unsigned)__builtin_popcountll(answer) + q, NULL,
                    &c);
    if (k < 0)
        return k;
    *ret_gpus = c.mask & tier;
    return 0;
}

/* Packed: the tier's GPU to fill next. New to the answer: the one best linked to the answer's GPUs,
 * or with an empty answer the one with the strongest link inside the tier (the request may spill to
 * its partner). Otherwise, or on a tie, the lowest index. */
static unsigned packed_pick(const struct replicas *r, uint64_t tier)
{
    uint64_t answer = in_answer(r);
    uint64_t toward = answer ? answer : tier;
    unsigned best = lowest(tier);
    uint64_t best_v = 0;

    if (tier & answer)
        return best;
    for (uint64_t x = tier; x; x &= x - 1) {
        unsigned g = lowest(x);
        uint64_t v = 0;
        for (uint64_t y = toward & ~bit(g); y; y &= y - 1) {
            uint64_t s = r->m->score[g][lowest(y)];
            if (answer)
                v += s;
            else if (s > v)
                v = s;
        }
        if (v > best_v) {
            best = g;
            best_v = v;
        }
    }
    return best;
}

static int fill(struct replicas *r, unsigned need)
{
    while (need > 0) {
        uint64_t tier = first_tier(r), gpus;
        int k;

        if (r->policy == TOPO_REPLICAS_PACKED) {
            pick_one(r, packed_pick(r, tier));
            need--;
            continue;
        }
        k = distributed_round(r, tier, need, &gpus);
        if (k < 0)
            return k;
        for (uint64_t x = gpus; x; x &= x - 1, need--)
            pick_one(r, lowest(x));
    }
    return 0;
}

int topo_choose_replicas(const struct topo_matrix *m, const struct topo_replica *avail,
                         size_t n_avail, const unsigned *total, unsigned k,
                         enum topo_replica_policy policy, size_t *ret_picked)
{
    struct replicas r = {.m = m, .avail = avail, .n_avail = n_avail, .policy = policy};
    unsigned must = 0;
    size_t out = 0;
    int e;

    if (k == 0 || n_avail > TOPO_MAX_REPLICAS || n_avail < k || m->n == 0 || m->n > TOPO_MAX_GPUS)
        return -EINVAL;
    e = replicas_init(&r, total, &must);
    if (e < 0)
        return e;
    if (must > k)
        return -EINVAL;
    e = fill(&r, k - must);
    if (e < 0)
        return e;
    for (size_t i = 0; i < n_avail; i++)
        if (r.taken[i])
            ret_picked[out++] = i;
    return 0;
}
