/* SPDX-License-Identifier: Apache-2.0 */
/* The DRA scheduling simulator: see sched.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base-doc.h"
#include "sched.h"

struct sched {
    struct dalloc_gates gates;
    uint64_t budget;
    json_t *state;     /* slices, classes, nodes, namespaces: added to every allocator */
    json_t *claims;    /* "ns/name" -> ResourceClaim (pending or allocated) */
    json_t *order;     /* claim keys in input order */
    json_t *templates; /* "ns/name" -> ResourceClaimTemplate */
    json_t *pods;      /* pending Pods in input order */
    json_t *nodes;     /* Node names */
    json_t *bound;     /* "ns/name" -> the node a claim was allocated for in this run */
};

int sched_new(const struct dalloc_gates *gates, struct sched **ret)
{
    struct sched *s = calloc(1, sizeof(*s));

    if (!s)
        return -ENOMEM;
    s->gates = *gates;
    s->state = json_array();
    s->claims = json_object();
    s->order = json_array();
    s->templates = json_object();
    s->pods = json_array();
    s->nodes = json_array();
    s->bound = json_object();
    if (!s->state || !s->claims || !s->order || !s->templates || !s->pods || !s->nodes ||
        !s->bound) {
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
    json_decref(s->state);
    json_decref(s->claims);
    json_decref(s->order);
    json_decref(s->templates);
    json_decref(s->pods);
    json_decref(s->nodes);
    json_decref(s->bound);
    free(s);
    return NULL;
}

void sched_set_budget(struct sched *s, uint64_t steps)
{
    s->budget = steps;
}

static const char *str_at(json_t *o, const char *a, const char *b)
{
    json_t *v = json_object_get(o, a);

    if (b)
        v = json_object_get(v, b);
    return json_string_value(v);
}

static int key_of(json_t *obj, char *buf, size_t n)
{
    const char *ns = str_at(obj, "metadata", "namespace");
    const char *name = str_at(obj, "metadata", "name");

    if (!name)
        return -EINVAL;
    if ((size_t)snprintf(buf, n, "%s/%s", ns ? ns : "default", name) >= n)
        return -ENAMETOOLONG;
    return 0;
}

int sched_add(struct sched *s, json_t *obj, struct diag *d)
{
    const char *kind = str_at(obj, "kind", NULL);
    char key[512];
    int r;

    if (!json_is_object(obj) || !kind)
        return diag_fail(d, -EINVAL, "an object without kind");
    if (strcmp(kind, "List") == 0) {
        size_t i;
        json_t *it;

        json_array_foreach(json_object_get(obj, "items"), i,
                           it) if ((r = sched_add(s, it, d)) < 0) return r;
        return 0;
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
    if (strcmp(kind, "ResourceClaim") == 0) {
        if (!json_object_get(s->claims, key) &&
            json_array_append_new(s->order, json_string(key)) < 0)
            return -ENOMEM;
        return json_object_set(s->claims, key, obj) < 0 ? -ENOMEM : 0;
    }
    if (strcmp(kind, "ResourceClaimTemplate") == 0)
        return json_object_set(s->templates, key, obj) < 0 ? -ENOMEM : 0;
    if (strcmp(kind, "Node") == 0) {
        const char *name = str_at(obj, "metadata", "name");

        if (!name)
            return diag_fail(d, -EINVAL, "Node: metadata.name is required");
        if (json_array_append_new(s->nodes, json_string(name)) < 0)
            return -ENOMEM;
    }
    return json_array_append(s->state, obj) < 0 ? -ENOMEM : 0;
}

static bool allocated(json_t *claim)
{
    return json_object_get(json_object_get(claim, "status"), "allocation") != NULL;
}

/* The pod's pending claims, generated from templates or named; -ENOENT with d for unknown ones.
 * *pin: the node a named claim was allocated for earlier in this run (the pod must go there). */
static int pod_claims(struct sched *s, json_t *pod, struct diag *d, json_t *out, const char **pin)
{
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

                if (b)
                    *pin = b;
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

/* False for the objects of other nodes: ResourceSlices with another spec.nodeName (never visible
 * to this node) and other Nodes. */
static bool visible(json_t *obj, const char *node)
{
    const char *kind = str_at(obj, "kind", NULL);
    const char *n;

    if (kind && strcmp(kind, "ResourceSlice") == 0) {
        n = str_at(obj, "spec", "nodeName");
        return !n || strcmp(n, node) == 0;
    }
    if (kind && strcmp(kind, "Node") == 0) {
        n = str_at(obj, "metadata", "name");
        return !n || strcmp(n, node) == 0;
    }
    return true;
}

static int try_node(struct sched *s, const char *node, json_t *mine, struct diag *d, json_t **ret)
{
    _cleanup_(dalloc_freep) struct dalloc *a = NULL;
    json_t *v;
    const char *k;
    size_t i;
    int r;

    if ((r = dalloc_new(node, &s->gates, &a)) < 0)
        return r;
    dalloc_set_budget(a, s->budget);
    json_array_foreach(s->state, i, v)
    {
        if (visible(v, node) && (r = dalloc_add(a, v, d)) < 0)
            return r;
    }
    json_object_foreach(s->claims, k, v)
    {
        if (allocated(v) && (r = dalloc_add(a, v, d)) < 0)
            return r;
    }
    json_array_foreach(mine, i, v)
    {
        if ((r = dalloc_add(a, v, d)) < 0)
            return r;
    }
    return dalloc_run(a, d, ret);
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

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
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

/* Removes " on node NODE" from msg so that reasons count across nodes. */
static void strip_node(char *msg, const char *node)
{
    char pat[300];
    char *p;
    size_t n;

    if ((size_t)snprintf(pat, sizeof(pat), " on node %s", node) >= sizeof(pat))
        return;
    n = strlen(pat);
    while ((p = strstr(msg, pat)) && (p[n] == '\0' || p[n] == ';' || p[n] == ',' || p[n] == ' '))
        memmove(p, p + n, strlen(p + n) + 1);
}

/* Schedules one pod into *out. */
static int sched_pod(struct sched *s, json_t *pod, const char **names, size_t nn, struct diag *d,
                     struct sched_stats *st, json_t **out)
{
    _cleanup_json_ json_t *mine = json_array();
    _cleanup_json_ json_t *reasons = json_object();
    _cleanup_json_ json_t *best = NULL;
    const char *best_node = NULL, *pin = NULL;
    long best_score = 0;
    char key[512];
    double t;
    int r;

    if (!mine || !reasons)
        return -ENOMEM;
    if ((r = pod_claims(s, pod, d, mine, &pin)) < 0)
        return r;
    for (size_t i = 0; i < nn; i++) {
        json_t *got = NULL;
        struct diag nd;

        if (pin && strcmp(pin, names[i]) != 0) {
            static const char PINNED[] = "a claim of the pod is allocated for another node";
            json_t *n = json_object_get(reasons, PINNED);

            if (json_object_set_new(reasons, PINNED,
                                    json_integer(n ? json_integer_value(n) + 1 : 1)) < 0)
                return -ENOMEM;
            continue;
        }

        diag_init(&nd);
        t = now_s();
        r = try_node(s, names[i], mine, &nd, &got);
        st->filter_s += now_s() - t;
        st->attempts++;
        if (r < 0) {
            *d = nd;
            return r;
        }
        if (r == 1) {
            json_t *n;

            strip_node(nd.msg, names[i]);
            n = json_object_get(reasons, nd.msg);
            if (json_object_set_new(reasons, nd.msg,
                                    json_integer(n ? json_integer_value(n) + 1 : 1)) < 0)
                return -ENOMEM;
            continue;
        }
        t = now_s();
        long sc = sched_score(got);
        st->score_s += now_s() - t;
        if (!best_node || sc > best_score) {
            json_decref(best);
            best = got;
            best_node = names[i];
            best_score = sc;
        } else {
            json_decref(got);
        }
    }
    if (key_of(pod, key, sizeof(key)) < 0)
        return -EINVAL;
    if (!best_node) {
        *out = json_pack("{s:s, s:n, s:i, s:[], s:O}", "pod", key, "node", "score", 0, "devices",
                         "reasons", reasons);
        return *out ? 0 : -ENOMEM;
    }
    t = now_s();
    json_t *c;
    size_t i;
    json_array_foreach(best, i, c)
    {
        char ck[512];

        if (key_of(c, ck, sizeof(ck)) < 0)
            return -EINVAL;
        if (!json_object_get(s->claims, ck) && json_array_append_new(s->order, json_string(ck)) < 0)
            return -ENOMEM;
        if (json_object_set(s->claims, ck, c) < 0 ||
            json_object_set_new(s->bound, ck, json_string(best_node)) < 0)
            return -ENOMEM;
    }
    st->commit_s += now_s() - t;
    st->scheduled++;
    *out = json_pack("{s:s, s:s, s:I, s:o, s:O}", "pod", key, "node", best_node, "score",
                     (json_int_t)best_score, "devices", devices_of(best), "reasons", reasons);
    return *out ? 0 : -ENOMEM;
}

int sched_run(struct sched *s, struct diag *d, struct sched_stats *stats,
              void (*progress)(size_t done, size_t total, void *arg), void *arg, json_t **ret)
{
    _cleanup_json_ json_t *out = json_array();
    struct sched_stats st = {0};
    size_t nn = json_array_size(s->nodes), i;
    _cleanup_free_ const char **names = calloc(nn ? nn : 1, sizeof(*names));
    double t0 = now_s();
    json_t *pod;
    int r;

    if (!out || !names)
        return -ENOMEM;
    for (i = 0; i < nn; i++)
        names[i] = json_string_value(json_array_get(s->nodes, i));
    qsort(names, nn, sizeof(*names), cmp_str);
    json_array_foreach(s->pods, i, pod)
    {
        json_t *one = NULL;

        if ((r = sched_pod(s, pod, names, nn, d, &st, &one)) < 0)
            return r;
        if (json_array_append_new(out, one) < 0)
            return -ENOMEM;
        st.pods++;
        if (progress)
            progress(i + 1, json_array_size(s->pods), arg);
    }
    st.total_s = now_s() - t0;
    if (stats)
        *stats = st;
    *ret = json_incref(out);
    return 0;
}
