/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The depth-first search (reference §4.3, 1.36 semantics): claims in input order, requests in spec
 * order, firstAvailable sub-requests in order, and for ExactCount the candidates in pool order
 * trying combinations, not permutations (the next device of a request is looked for after the
 * previous one). Branches that cannot succeed whatever devices they get are cut before a device is
 * tried: a sub-request whose count, with the claim's picks so far and the fewest devices its later
 * requests need, exceeds the claim's 32 results (upstream reaches the same answers by reporting
 * the limit upward, so a choice of devices is not revised when only the counts were wrong), and a
 * branch with fewer candidates left than devices needed. Every candidate tried costs one step of
 * the budget, and an exhausted budget ends the run with an error. `All` requests take the devices
 * found before the search (every selectable device of the usable pools) and fail as a whole.
 * Constraints are checked against the claim's picks so far (a per-device multiset for
 * distinctAttribute, not Kubernetes' per-request-name quirk), so undo is just dropping the pick.
 *
 * Recursion depth is bounded: one frame per device picked (<= 32 per claim) plus one per request,
 * over at most DALLOC_MAX_CLAIMS claims.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dalloc-model.h"

struct search {
    struct dalloc *a;
    struct vec *pending; /* struct dalloc_claim * */
    struct diag *d;
};

static int next_request(struct search *s, size_t ci, size_t ri);

static bool attr_equal(const struct dalloc_device *x, const struct cel_dra_attr *p,
                       const struct dalloc_device *y, const struct cel_dra_attr *q)
{
    if (p->kind != q->kind)
        return false;
    switch (p->kind) {
    case CEL_DRA_ATTR_INT:
        return p->i == q->i;
    case CEL_DRA_ATTR_BOOL:
        return p->b == q->b;
    case CEL_DRA_ATTR_STRING:
        return p->str.len == q->str.len && memcmp(p->str.s, q->str.s, p->str.len) == 0;
    case CEL_DRA_ATTR_VERSION:
        return strcmp(x->vtext[p - x->attrs], y->vtext[q - y->attrs]) == 0;
    default:
        return false;
    }
}

static bool in_scope(const struct dalloc_constraint *k, const struct dalloc_claim *c, size_t ri,
                     size_t si)
{
    const struct dalloc_request *rq = &c->requests[ri];
    size_t n = strlen(rq->name);

    if (k->n_requests == 0)
        return true;
    for (size_t i = 0; i < k->n_requests; i++) {
        const char *ref = k->requests[i];
        if (strncmp(ref, rq->name, n) != 0)
            continue;
        if (ref[n] == '\0')
            return true;
        if (ref[n] == '/' && rq->first_available && strcmp(ref + n + 1, rq->subs[si].name) == 0)
            return true;
    }
    return false;
}

/* Whether adding dev for (ri, si) keeps every constraint of c satisfied. */
static bool constraints_ok(const struct dalloc_claim *c, size_t ri, size_t si,
                           const struct dalloc_device *dev)
{
    for (size_t k = 0; k < c->n_constraints; k++) {
        const struct dalloc_constraint *con = &c->constraints[k];
        const char *name = con->match ? con->match : con->distinct;
        const struct cel_dra_attr *at;

        if (!in_scope(con, c, ri, si))
            continue;
        at = dalloc_device_attr(dev, name);
        if (!at)
            return false;
        for (size_t i = 0; i < c->n_picks; i++) {
            const struct dalloc_pick *p = &c->picks[i];
            const struct cel_dra_attr *pa;
            if (!in_scope(con, c, p->request, p->sub))
                continue;
            pa = dalloc_device_attr(p->dev, name);
            if (con->match && (!pa || !attr_equal(dev, at, p->dev, pa)))
                return false;
            if (con->distinct && pa && attr_equal(dev, at, p->dev, pa))
                return false;
            if (con->match)
                break; /* every earlier pick holds the same value */
        }
    }
    return true;
}

static bool picked(const struct dalloc_claim *c, const struct dalloc_device *dev)
{
    for (size_t i = 0; i < c->n_picks; i++)
        if (c->picks[i].dev == dev)
            return true;
    return false;
}

/* Records dev for (ri, si) consuming amounts (NULL: no capacity bookkeeping): 1, 0 when its
 * counters do not fit (nothing changed then), -ENOMEM. */
static int pick(struct dalloc_claim *c, size_t ri, size_t si, size_t pos, struct dalloc_device *dev,
                bool admin, const dalloc_amount *amounts)
{
    dalloc_amount *share = NULL;

    if (dev->multi && amounts) {
        share = calloc(dev->n_caps + 1, sizeof(*share));
        if (!share)
            return -ENOMEM;
        memcpy(share, amounts, dev->n_caps * sizeof(*share));
    }
    if (!dalloc_counters_take(dev)) {
        free(share);
        return 0;
    }
    c->picks[c->n_picks++] = (struct dalloc_pick){ri, si, dev, pos, share};
    if (share)
        dalloc_capacity_apply(dev, share, 1);
    else if (!admin)
        dev->in_use++;
    return 1;
}

static void unpick(struct dalloc_claim *c, bool admin)
{
    struct dalloc_pick *p = &c->picks[--c->n_picks];

    dalloc_counters_give(p->dev);
    if (p->consumed) {
        dalloc_capacity_apply(p->dev, p->consumed, -1);
        free(p->consumed);
        p->consumed = NULL;
    } else if (!admin) {
        p->dev->in_use--;
    }
}

/* Whether dev may serve e now: 1 with amounts filled (consumable capacity), 0, or <0. */
static int usable(struct search *s, struct dalloc_claim *c, size_t ri, size_t si,
                  struct dalloc_exact *e, size_t pos, dalloc_amount *amounts)
{
    struct dalloc_device *dev = *VEC_AT(&s->a->candidates, struct dalloc_device *, pos);
    int r;

    if (e->admin ? picked(c, dev) : dev->in_use > 0)
        return 0;
    if ((r = dalloc_selectable(s->a, c, e, pos, s->d)) <= 0)
        return r;
    if (!dalloc_tolerated(dev, e))
        return 0;
    if (s->a->gates.consumable_capacity && (r = dalloc_capacity_fits(dev, e, amounts, s->d)) <= 0)
        return r;
    return 1;
}

/* Places `need` more devices for (ri, si) starting at candidate `start`. 1 found, 0 not, <0. */
static int place(struct search *s, size_t ci, size_t ri, size_t si, int64_t need, size_t start)
{
    struct dalloc *a = s->a;
    struct dalloc_claim *c = *VEC_AT(s->pending, struct dalloc_claim *, ci);
    struct dalloc_exact *e = &c->requests[ri].subs[si];
    size_t n = a->candidates.len;
    dalloc_amount amounts[CEL_DRA_MAX_ATTRIBUTES + 1];
    int r;

    if (need == 0)
        return next_request(s, ci, ri + 1);
    if ((int64_t)c->n_picks + need > DALLOC_MAX_DEVICES_PER_CLAIM)
        return 0;
    for (size_t pos = start; pos < n && (int64_t)(n - pos) >= need; pos++) {
        struct dalloc_device *dev = *VEC_AT(&a->candidates, struct dalloc_device *, pos);
        if (++a->steps > a->budget)
            return diag_fail(s->d, -E2BIG,
                             "search budget of %llu steps exhausted (claim %s/%s, request %s)",
                             (unsigned long long)a->budget, c->ns, c->name, c->requests[ri].name);
        if ((r = usable(s, c, ri, si, e, pos, amounts)) < 0)
            return r;
        if (r == 0 || !constraints_ok(c, ri, si, dev))
            continue;
        if ((r = pick(c, ri, si, pos, dev, e->admin,
                      s->a->gates.consumable_capacity ? amounts : NULL)) < 0)
            return r;
        if (r == 0)
            continue;
        r = place(s, ci, ri, si, need - 1, pos + 1);
        if (r != 0)
            return r;
        unpick(c, e->admin);
    }
    return 0;
}

int dalloc_all_devices(struct dalloc *a, const struct dalloc_claim *c, size_t ri,
                       struct dalloc_exact *e, struct diag *d)
{
    dalloc_amount amounts[CEL_DRA_MAX_ATTRIBUTES + 1];
    int r;

    for (size_t i = 0; i < a->pools.len; i++) {
        const struct dalloc_pool *p = *VEC_AT(&a->pools, struct dalloc_pool *, i);
        if (p->incomplete || p->invalid)
            return diag_fail(d, -EINVAL,
                             "claim %s/%s, request %s: asks for all devices, but resource pool "
                             "%s/%s is currently %s",
                             c->ns, c->name, c->requests[ri].name, p->driver, p->name,
                             p->incomplete ? "being updated" : "invalid");
    }
    free(e->all);
    e->n_all = 0;
    e->all = calloc(a->candidates.len + 1, sizeof(*e->all));
    if (!e->all)
        return -ENOMEM;
    for (size_t pos = 0; pos < a->candidates.len; pos++) {
        const struct dalloc_device *dev = *VEC_AT(&a->candidates, struct dalloc_device *, pos);
        if ((r = dalloc_selectable(a, c, e, pos, d)) < 0)
            return r;
        if (r == 0)
            continue;
        if (a->gates.consumable_capacity && (r = dalloc_capacity_fits(dev, e, amounts, d)) <= 0) {
            if (r < 0)
                return r;
            continue;
        }
        e->all[e->n_all++] = pos;
    }
    return 0;
}

/* Takes every device dalloc_all_devices found for (ri, si), with "must" semantics: any device
 * that cannot be added fails the request (a constraint that rejects one is an error). */
static int place_all(struct search *s, size_t ci, size_t ri, size_t si)
{
    struct dalloc *a = s->a;
    struct dalloc_claim *c = *VEC_AT(s->pending, struct dalloc_claim *, ci);
    struct dalloc_exact *e = &c->requests[ri].subs[si];
    size_t before = c->n_picks;
    dalloc_amount amounts[CEL_DRA_MAX_ATTRIBUTES + 1];
    int r = 0;

    if (e->n_all == 0)
        return 0; /* at least one device is needed */
    for (size_t k = 0; k < e->n_all; k++) {
        size_t pos = e->all[k];
        struct dalloc_device *dev = *VEC_AT(&a->candidates, struct dalloc_device *, pos);
        if ((r = usable(s, c, ri, si, e, pos, amounts)) <= 0 ||
            c->n_picks >= DALLOC_MAX_DEVICES_PER_CLAIM)
            goto undo;
        if (!constraints_ok(c, ri, si, dev)) {
            r = diag_fail(s->d, -EINVAL,
                          "claim %s/%s, request %s: cannot add device %s/%s/%s because a claim "
                          "constraint would not be satisfied",
                          c->ns, c->name, c->requests[ri].name, dev->slice->driver,
                          dev->slice->pool, dev->name);
            goto undo;
        }
        if ((r = pick(c, ri, si, pos, dev, e->admin,
                      a->gates.consumable_capacity ? amounts : NULL)) <= 0)
            goto undo;
    }
    if ((r = next_request(s, ci, ri + 1)) != 0)
        return r;
undo:
    while (c->n_picks > before)
        unpick(c, e->admin);
    return r;
}

static void note_failure(struct dalloc *a, size_t ci, size_t ri)
{
    if (!a->failed_any || ci > a->fail_claim || (ci == a->fail_claim && ri > a->fail_request)) {
        a->failed_any = true;
        a->fail_claim = ci;
        a->fail_request = ri;
    }
}

static int next_request(struct search *s, size_t ci, size_t ri)
{
    struct dalloc_claim *c;
    int r;

    if (ci >= s->pending->len)
        return 1;
    c = *VEC_AT(s->pending, struct dalloc_claim *, ci);
    if (ri >= c->n_requests)
        return next_request(s, ci + 1, 0);
    for (size_t si = 0; si < c->requests[ri].n_subs; si++) {
        struct dalloc_exact *e = &c->requests[ri].subs[si];
        int64_t need = e->mode == DALLOC_ALL ? (int64_t)e->n_all : e->count;
        /* The 32 results of a claim bound every branch: a sub-request whose devices cannot fit
         * next to the fewest the later requests need is skipped before any device is tried. */
        if ((int64_t)c->n_picks + need + c->rest_min[ri + 1] > DALLOC_MAX_DEVICES_PER_CLAIM)
            continue;
        c->chosen_sub[ri] = si;
        r = e->mode == DALLOC_ALL ? place_all(s, ci, ri, si) : place(s, ci, ri, si, e->count, 0);
        if (r != 0)
            return r;
    }
    note_failure(s->a, ci, ri);
    return 0;
}

/* The no-solution message for request ri of c: what it needs, how many candidates match its
 * selectors and how many of those other claims do not already hold. */
static void explain(struct dalloc *a, struct dalloc_claim *c, size_t ri, struct diag *d)
{
    struct dalloc_exact *e = &c->requests[ri].subs[0];
    size_t match = 0, free_ = 0;
    struct diag scratch;
    char need[32];

    for (size_t pos = 0; pos < a->candidates.len; pos++) {
        struct dalloc_device *dev = *VEC_AT(&a->candidates, struct dalloc_device *, pos);
        if (dalloc_selectable(a, c, e, pos, &scratch) != 1)
            continue;
        match++;
        free_ += dev->in_use == 0 || e->admin;
    }
    if (e->mode == DALLOC_ALL)
        snprintf(need, sizeof(need), "all matching devices");
    else
        snprintf(need, sizeof(need), "%lld device%s", (long long)e->count,
                 e->count == 1 ? "" : "s");
    diag_fail(d, -ENOENT,
              DALLOC_REASON_NO_FIT
              ": claim %s/%s, request %s%s%s: needs %s on node %s; %zu device%s match%s the "
              "selectors, %zu of them not allocated to other claims%s",
              c->ns, c->name, c->requests[ri].name, c->requests[ri].first_available ? "/" : "",
              c->requests[ri].first_available ? e->name : "", need, a->node, match,
              match == 1 ? "" : "s", match == 1 ? "es" : "", free_,
              c->n_constraints || a->gates.device_taints || a->gates.partitionable ||
                      a->gates.consumable_capacity
                  ? " (constraints, taints, counters or capacity may exclude more)"
                  : "");
}

int dalloc_search(struct dalloc *a, struct diag *d)
{
    struct vec pending;
    struct search s = {a, &pending, d};
    int r = 0;

    a->steps = 0;
    a->failed_any = false;
    vec_init(&pending, sizeof(struct dalloc_claim *), DALLOC_MAX_CLAIMS);
    for (size_t i = 0; i < a->claims.len && r >= 0; i++) {
        struct dalloc_claim *c = *VEC_AT(&a->claims, struct dalloc_claim *, i);
        if (!c->allocation)
            r = vec_push(&pending, &c);
    }
    if (r >= 0)
        r = next_request(&s, 0, 0);
    if (r == 0 && a->failed_any) {
        struct dalloc_claim *c = *VEC_AT(&pending, struct dalloc_claim *, a->fail_claim);
        if (a->saw_invalid)
            diag_fail(d, -ENOENT, "%s", DALLOC_REASON_INVALID_POOLS);
        else
            explain(a, c, a->fail_request, d);
    }
    vec_release(&pending);
    if (r < 0)
        return r;
    return r == 1 ? 0 : 1;
}

void dalloc_search_undo(struct dalloc *a, size_t first)
{
    for (size_t i = first; i < a->claims.len; i++) {
        struct dalloc_claim *c = *VEC_AT(&a->claims, struct dalloc_claim *, i);
        while (c->n_picks > 0) {
            const struct dalloc_pick *p = &c->picks[c->n_picks - 1];
            unpick(c, c->requests[p->request].subs[p->sub].admin);
        }
    }
}
