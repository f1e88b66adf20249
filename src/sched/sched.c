/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The DRA scheduling simulator: see sched.h.
 *
 * Speed comes from three things. Every node keeps its own allocator (dalloc_try/dalloc_commit)
 * holding only what the node sees: its ResourceSlices, the slices not bound to one node, the
 * classes and the allocated claims, so pools are gathered and selectors compiled once per node,
 * not once per attempt. Each node remembers the outcome of its last evaluation with the pod's
 * "shape" (its pending claims' namespaces and specs) and the node's state version: pods of the same
 * shape reuse it until a commit changes the node. A commit on devices of a pool bound to one node
 * changes only that node; a commit on a pool visible to several nodes changes them all.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base-doc.h"
#include "sched-internal.h"
#include "sched-nodes.h"

int sched_new(const struct dalloc_gates *gates, struct sched **ret)
{
    struct sched *s = calloc(1, sizeof(*s));

    if (!s)
        return -ENOMEM;
    s->gates = *gates;
    s->common = json_array();
    s->slices = json_array();
    s->claims = json_object();
    s->templates = json_object();
    s->pods = json_array();
    s->node_objs = json_array();
    s->bound = json_object();
    s->node_index = json_object();
    s->pool_owner = json_object();
    s->spread_slices = json_array();
    s->shared_claims = json_array();
    s->shapes = json_object();
    s->reasons = json_array();
    s->reason_ids = json_object();
    /* What is kept while loading is copied out of the parser's memory, so that it lies in one
     * run of memory instead of between the holes parsing leaves (sched-load.c). */
    s->dedup[0].copy = s->dedup[1].copy = true;
    if (!s->common || !s->slices || !s->claims || !s->templates || !s->pods || !s->node_objs ||
        !s->bound || !s->node_index || !s->pool_owner || !s->spread_slices || !s->shared_claims ||
        !s->shapes || !s->reasons || !s->reason_ids) {
        sched_free(s);
        return -ENOMEM;
    }
    *ret = s;
    return 0;
}

struct sched *sched_free(struct sched *s)
{
    if (!s)
        return NULL;
    sched_nodes_free(s);
    dalloc_cel_unref(s->cel);
    json_decref(s->common);
    json_decref(s->slices);
    json_decref(s->claims);
    json_decref(s->templates);
    json_decref(s->pods);
    json_decref(s->node_objs);
    json_decref(s->bound);
    json_decref(s->node_index);
    json_decref(s->pool_owner);
    json_decref(s->spread_slices);
    json_decref(s->shared_claims);
    json_decref(s->shapes);
    json_decref(s->last_shape);
    json_decref(s->reasons);
    json_decref(s->reason_ids);
    sched_keep_done(s);
    free(s);
    return NULL;
}

void sched_set_budget(struct sched *s, uint64_t steps)
{
    s->budget = steps;
}

static int add_claim(struct sched *s, json_t *obj, const char *key)
{
    return json_object_set(s->claims, key, obj) < 0 ? -ENOMEM : 0;
}

/* Adds an object (or a List), prepared already unless in a List. */
static int add(struct sched *s, json_t *obj, bool prepared, struct diag *d)
{
    const char *kind = str_at(obj, "kind", NULL);
    _cleanup_json_ json_t *kept = NULL;
    char key[512];
    int r;

    if (!json_is_object(obj) || !kind)
        return diag_fail(d, -EINVAL, "an object without kind");
    if (strcmp(kind, "List") == 0) {
        size_t i;
        json_t *it;

        json_array_foreach(json_object_get(obj, "items"), i,
                           it) if ((r = add(s, it, false, d)) < 0) return r;
        return 0;
    }
    if (!prepared) {
        kept = sched_prepare(s, 0, obj);
        if (!kept)
            return -ENOMEM;
        obj = kept;
        kind = str_at(obj, "kind", NULL);
    }
    if (strcmp(kind, "Pod") == 0 || strcmp(kind, "ResourceClaim") == 0 ||
        strcmp(kind, "ResourceClaimTemplate") == 0) {
        if (key_of(obj, key, sizeof(key)) < 0)
            return diag_fail(d, -EINVAL, "%s: metadata.name is required", kind);
    }
    if (strcmp(kind, "Pod") == 0) {
        if (str_at(obj, "spec", "nodeName"))
            return 0; /* bound already; its claims are in the cluster state */
        return json_array_append(s->pods, obj) < 0 ? -ENOMEM : 0;
    }
    if (strcmp(kind, "ResourceClaim") == 0)
        return add_claim(s, obj, key);
    if (strcmp(kind, "ResourceClaimTemplate") == 0)
        return json_object_set(s->templates, key, obj) < 0 ? -ENOMEM : 0;
    if (strcmp(kind, "Node") == 0) {
        if (!str_at(obj, "metadata", "name"))
            return diag_fail(d, -EINVAL, "Node: metadata.name is required");
        return json_array_append(s->node_objs, obj) < 0 ? -ENOMEM : 0;
    }
    if (strcmp(kind, "ResourceSlice") == 0 && str_at(obj, "spec", "nodeName"))
        return json_array_append(s->slices, obj) < 0 ? -ENOMEM : 0;
    return json_array_append(s->common, obj) < 0 ? -ENOMEM : 0;
}

int sched_add(struct sched *s, json_t *obj, struct diag *d)
{
    return add(s, obj, false, d);
}

int sched_add_prepared(struct sched *s, json_t *obj, struct diag *d)
{
    return add(s, obj, true, d);
}

/* What a pod brings: its pending claims, and where its allocated claims let it go. */
struct spod {
    json_t *pod;
    json_t *mine;      /* pending claims, generated from templates or named */
    const char *pin;   /* the node a named claim was allocated for earlier in this run */
    json_t *selectors; /* the node selectors of named claims allocated before the run */
};

/* Fills p->mine, p->pin and p->selectors; -ENOENT with d for unknown claims or templates. */
static int pod_claims(struct sched *s, struct spod *p, struct diag *d)
{
    json_t *pod = p->pod, *out = p->mine;
    const char *ns = str_at(pod, "metadata", "namespace");
    const char *pname = str_at(pod, "metadata", "name");
    json_t *prc, *c;
    size_t i;
    char key[512];

    ns = ns ? ns : "default";
    json_array_foreach(json_object_get(json_object_get(pod, "spec"), "resourceClaims"), i, prc)
    {
        const char *name = str_at(prc, "name", NULL);
        const char *cn = str_at(prc, "resourceClaimName", NULL);
        const char *tn = str_at(prc, "resourceClaimTemplateName", NULL);

        if (!name || (!cn == !tn))
            return diag_fail(d, -EINVAL,
                             "Pod %s/%s: spec.resourceClaims[%zu]: name and exactly one of "
                             "resourceClaimName or resourceClaimTemplateName are required",
                             ns, pname, i);
        if (cn) {
            snprintf(key, sizeof(key), "%s/%s", ns, cn);
            c = json_object_get(s->claims, key);
            if (!c)
                return diag_fail(d, -ENOENT, "Pod %s/%s: ResourceClaim %s not found", ns, pname,
                                 key);
            if (allocated(c)) {
                const char *b = json_string_value(json_object_get(s->bound, key));
                json_t *sel = json_object_get(
                    json_object_get(json_object_get(c, "status"), "allocation"), "nodeSelector");

                if (b)
                    p->pin = b;
                else if (sel && json_array_append(p->selectors, sel) < 0)
                    return -ENOMEM;
                continue;
            }
            if (json_array_append(out, c) < 0)
                return -ENOMEM;
            continue;
        }
        snprintf(key, sizeof(key), "%s/%s", ns, tn);
        c = json_object_get(s->templates, key);
        if (!c)
            return diag_fail(d, -ENOENT, "Pod %s/%s: ResourceClaimTemplate %s not found", ns, pname,
                             key);
        snprintf(key, sizeof(key), "%s-%s", pname, name);
        json_t *gen = json_pack("{s:s, s:s, s:{s:s, s:s}, s:O}", "apiVersion", "resource.k8s.io/v1",
                                "kind", "ResourceClaim", "metadata", "name", key, "namespace", ns,
                                "spec", json_object_get(json_object_get(c, "spec"), "spec"));
        if (!gen || json_array_append_new(out, gen) < 0)
            return -ENOMEM;
    }
    return 0;
}

long sched_score(json_t *claims)
{
    json_t *c, *res, *req;
    size_t i, j, k;
    long score = 0;

    json_array_foreach(claims, i, c)
    {
        json_t *reqs = json_object_get(json_object_get(c, "spec"), "devices");

        reqs = json_object_get(reqs, "requests");
        json_array_foreach(
            json_object_get(
                json_object_get(json_object_get(json_object_get(c, "status"), "allocation"),
                                "devices"),
                "results"),
            j, res)
        {
            const char *rq = str_at(res, "request", NULL);
            const char *slash = rq ? strchr(rq, '/') : NULL;

            if (!slash)
                continue;
            json_array_foreach(reqs, k, req)
            {
                const char *n = str_at(req, "name", NULL);
                json_t *subs = json_object_get(req, "firstAvailable");
                json_t *sub;
                size_t m;

                if (!n || strlen(n) != (size_t)(slash - rq) || strncmp(n, rq, strlen(n)) != 0)
                    continue;
                json_array_foreach(subs, m, sub)
                {
                    const char *sn = str_at(sub, "name", NULL);

                    if (sn && strcmp(sn, slash + 1) == 0)
                        score += (long)(json_array_size(subs) - 1 - m);
                }
            }
        }
    }
    return score;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static json_t *devices_of(json_t *claims)
{
    json_t *out = json_array(), *c, *res;
    size_t i, j;

    json_array_foreach(claims, i, c)
    {
        const char *cn = str_at(c, "metadata", "name");

        json_array_foreach(
            json_object_get(
                json_object_get(json_object_get(json_object_get(c, "status"), "allocation"),
                                "devices"),
                "results"),
            j, res)
        {
            char buf[1024];

            snprintf(buf, sizeof(buf), "%s/%s=%s/%s/%s", cn ? cn : "",
                     str_at(res, "request", NULL) ?: "", str_at(res, "driver", NULL) ?: "",
                     str_at(res, "pool", NULL) ?: "", str_at(res, "device", NULL) ?: "");
            json_array_append_new(out, json_string(buf));
        }
    }
    return out;
}

/* The id of the pod's shape: what decides its outcome on a node — its pending claims' namespaces
 * and specs (claim names only name the results) and what the node filters read (node selector,
 * affinity, tolerations). Consecutive pods mostly share one, so the last is compared first. */
static int shape_id(struct sched *s, json_t *pod, json_t *mine, size_t *ret)
{
    json_t *spec = json_object_get(pod, "spec");
    _cleanup_json_ json_t *key =
        json_pack("[O?O?O?]", json_object_get(spec, "nodeSelector"),
                  json_object_get(json_object_get(spec, "affinity"), "nodeAffinity"),
                  json_object_get(spec, "tolerations"));
    _cleanup_free_ char *text = NULL;
    json_t *c, *id;
    size_t i;

    if (!key)
        return -ENOMEM;
    json_array_foreach(mine, i, c)
    {
        if (json_array_append_new(key, json_pack("[s?O?]", str_at(c, "metadata", "namespace"),
                                                 json_object_get(c, "spec"))) < 0)
            return -ENOMEM;
    }
    if (s->last_shape && json_equal(key, s->last_shape)) {
        *ret = s->last_shape_id;
        return 0;
    }
    text = json_dumps(key, JSON_COMPACT | JSON_SORT_KEYS);
    if (!text)
        return -ENOMEM;
    id = json_object_get(s->shapes, text);
    if (!id) {
        id = json_integer((json_int_t)json_object_size(s->shapes));
        if (!id || json_object_set_new(s->shapes, text, id) < 0)
            return -ENOMEM;
    }
    json_decref(s->last_shape);
    s->last_shape = json_incref(key);
    *ret = s->last_shape_id = (size_t)json_integer_value(id);
    return 0;
}

/* Whether an allocation may be reused for another pod: not when it holds what must be unique
 * per allocation (a share ID) or a point in time. */
static bool reusable(json_t *claims)
{
    json_t *c, *res;
    size_t i, j;

    json_array_foreach(claims, i, c)
    {
        json_t *alloc = json_object_get(json_object_get(c, "status"), "allocation");

        if (json_object_get(alloc, "allocationTimestamp"))
            return false;
        json_array_foreach(json_object_get(json_object_get(alloc, "devices"), "results"), j, res)
        {
            if (json_object_get(res, "shareID"))
                return false;
        }
    }
    return true;
}

/* Keeps outcome `reason` (an id, or SSTATE_FITS) of the pod's shape on node i; shape SIZE_MAX:
 * not to be reused. */
static int keep_outcome(struct sched *s, size_t i, size_t shape, size_t reason)
{
    struct sstate *st = &s->states[i];

    if (reason > SSTATE_FITS || (shape != SIZE_MAX && shape >= UINT32_MAX))
        return -E2BIG;
    st->reason = (uint32_t)reason;
    st->shape = shape == SIZE_MAX ? 0 : (uint32_t)(shape + 1);
    st->seen = st->version + s->global_version;
    return 0;
}

/* Records that a node filter rejected the pod's shape on node i. */
static int node_rejects(struct sched *s, size_t i, const char *reason, size_t shape)
{
    struct snode *sn = &s->nodes[i];
    size_t id;
    int r;

    json_decref(sn->alloc);
    sn->alloc = NULL;
    if ((r = sched_reason_fixed(s, reason, &id)) < 0)
        return r;
    return keep_outcome(s, i, shape, id);
}

/* Evaluates the pod (claims `mine`, shape id) on node i unless its kept outcome still holds: the
 * node filters, then the allocator. */
static int evaluate(struct sched *s, size_t i, json_t *pod, json_t *mine, size_t shape,
                    struct diag *d, struct sched_stats *st)
{
    struct snode *sn = &s->nodes[i];
    const struct sstate *kept = &s->states[i];
    char why[SCHED_NODE_REASON_MAX];
    const char *reason;
    json_t *got = NULL;
    struct diag nd;
    size_t id = SSTATE_FITS;
    double t;
    int r;

    st->evaluations++;
    if (kept->shape == shape + 1 && kept->seen == kept->version + s->global_version)
        return 0;
    if (!sched_node_fits(pod, sn->obj, why, sizeof(why), &reason))
        return node_rejects(s, i, reason, shape);
    diag_init(&nd);
    t = now_s();
    r = sched_node_allocator(s, sn, &nd);
    if (r >= 0)
        r = dalloc_try(sn->a, mine, &nd, &got);
    st->filter_s += now_s() - t;
    st->attempts++;
    if (r < 0) {
        *d = nd;
        return r;
    }
    json_decref(sn->alloc);
    sn->alloc = NULL;
    if (r == 1) {
        if ((r = sched_reason_id(s, nd.msg, sn->name, mine, &id)) < 0)
            return r;
        return keep_outcome(s, i, shape, id);
    }
    t = now_s();
    s->states[i].score = sched_score(got);
    st->score_s += now_s() - t;
    r = keep_outcome(s, i, reusable(got) ? shape : SIZE_MAX, SSTATE_FITS);
    if (!(sn->alloc = sched_keep_allocations(got)))
        return -ENOMEM;
    return r;
}

/* The pod's claims with the allocation sn keeps (made for a pod of the same shape). */
static json_t *allocated_copies(json_t *mine, json_t *alloc)
{
    json_t *out = json_array(), *c;
    size_t i;

    json_array_foreach(mine, i, c)
    {
        json_t *from = json_object_get(json_array_get(alloc, i), "status");
        json_t *copy = json_copy(c);
        json_t *status = json_copy(json_object_get(c, "status"));

        if (!status)
            status = json_object();
        if (!copy || !status ||
            json_object_set(status, "allocation", json_object_get(from, "allocation")) < 0 ||
            json_object_set_new(copy, "status", status) < 0 ||
            json_array_append_new(out, copy) < 0) {
            json_decref(copy);
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

/* Whether node sn is outside where the pod's claims allocated elsewhere let it go; *reason. */
static bool claim_elsewhere(const struct spod *p, const struct snode *sn, const char **reason)
{
    json_t *sel;
    size_t i;

    if (p->pin && strcmp(p->pin, sn->name) != 0) {
        *reason = SCHED_REASON_PINNED;
        return true;
    }
    json_array_foreach(p->selectors, i, sel)
    {
        if (!sched_node_selector_matches(sel, sn->obj)) {
            *reason = SCHED_REASON_CLAIM_NODE;
            return true;
        }
    }
    return false;
}

/* Tries every node (in name order) for the pod; *best the first of the highest score (an index
 * into nodes, or SIZE_MAX). */
static int filter(struct sched *s, struct spod *p, struct diag *d, struct sched_stats *st,
                  size_t *best, struct tally **t, size_t *nt)
{
    /* most pods have no claim allocated elsewhere: no need to ask for each node */
    bool bound = p->pin || json_array_size(p->selectors) > 0;
    const char *elsewhere;
    size_t shape, id;
    int r;

    if ((r = shape_id(s, p->pod, p->mine, &shape)) < 0)
        return r;
    *best = SIZE_MAX;
    for (size_t i = 0; i < s->n_nodes; i++) {
        const struct sstate *kept = &s->states[i];

        if (bound && claim_elsewhere(p, &s->nodes[i], &elsewhere)) {
            if ((r = sched_reason_fixed(s, elsewhere, &id)) < 0 ||
                (r = sched_tally_add(t, nt, id)) < 0)
                return r;
            continue;
        }
        if ((r = evaluate(s, i, p->pod, p->mine, shape, d, st)) < 0)
            return r;
        if (kept->reason != SSTATE_FITS)
            r = sched_tally_add(t, nt, kept->reason);
        else if (*best == SIZE_MAX || kept->score > s->states[*best].score)
            *best = i;
        if (r < 0)
            return r;
    }
    return 0;
}

/* Schedules one pod into *out. */
static int sched_pod(struct sched *s, json_t *pod, struct diag *d, struct sched_stats *st,
                     json_t **out)
{
    _cleanup_json_ json_t *mine = json_array();
    _cleanup_json_ json_t *selectors = json_array();
    _cleanup_json_ json_t *claims = NULL;
    _cleanup_free_ struct tally *t = NULL;
    struct spod p = {pod, mine, NULL, selectors};
    struct snode *best;
    size_t nt = 0, bi;
    char key[512];
    double t0;
    long score;
    int r;

    if (!mine || !selectors)
        return -ENOMEM;
    if ((r = pod_claims(s, &p, d)) < 0 || (r = filter(s, &p, d, st, &bi, &t, &nt)) < 0)
        return r;
    if (key_of(pod, key, sizeof(key)) < 0)
        return -EINVAL;
    if (bi == SIZE_MAX) {
        *out = json_pack("{s:s, s:n, s:i, s:[], s:o, s:o}", "pod", key, "node", "score", 0,
                         "devices", "reasons", sched_tally_json(s, t, nt, mine), "message",
                         sched_tally_message(s, t, nt, mine, s->n_nodes));
        return *out ? 0 : -ENOMEM;
    }
    best = &s->nodes[bi];
    score = s->states[bi].score;
    t0 = now_s();
    claims = sched_keep_claims(s, allocated_copies(mine, best->alloc));
    if (!claims)
        return -ENOMEM;
    if ((r = sched_commit(s, best, claims, d)) < 0)
        return r;
    st->commit_s += now_s() - t0;
    st->scheduled++;
    *out = json_pack("{s:s, s:s, s:I, s:o, s:o}", "pod", key, "node", best->name, "score",
                     (json_int_t)score, "devices", devices_of(claims), "reasons",
                     sched_tally_json(s, t, nt, mine));
    return *out ? 0 : -ENOMEM;
}

int sched_run_each(struct sched *s, struct diag *d, struct sched_stats *stats,
                   void (*progress)(size_t done, size_t total, void *arg), void *arg,
                   sched_emit_fn emit, void *emit_arg)
{
    struct sched_stats st = {0};
    double t0 = now_s(), t;
    json_t *pod;
    size_t i;
    int r;

    sched_keep_done(s);
    if ((r = sched_nodes_build(s)) < 0)
        return r;
    json_array_foreach(s->pods, i, pod)
    {
        _cleanup_json_ json_t *one = NULL;

        if ((r = sched_pod(s, pod, d, &st, &one)) < 0)
            return r;
        /* Scheduled: nothing reads the pod again. */
        if (json_array_set(s->pods, i, json_null()) < 0)
            return -ENOMEM;
        t = now_s();
        r = emit(emit_arg, one);
        st.emit_s += now_s() - t;
        if (r < 0)
            return r;
        st.pods++;
        if (progress)
            progress(i + 1, json_array_size(s->pods), arg);
    }
    st.total_s = now_s() - t0 - st.emit_s;
    if (stats)
        *stats = st;
    return 0;
}

static int collect(void *arg, json_t *result)
{
    return json_array_append(arg, result) < 0 ? -ENOMEM : 0;
}

int sched_run(struct sched *s, struct diag *d, struct sched_stats *stats,
              void (*progress)(size_t done, size_t total, void *arg), void *arg, json_t **ret)
{
    _cleanup_json_ json_t *out = json_array();
    int r;

    if (!out)
        return -ENOMEM;
    if ((r = sched_run_each(s, d, stats, progress, arg, collect, out)) < 0)
        return r;
    *ret = TAKE_PTR(out);
    return 0;
}
