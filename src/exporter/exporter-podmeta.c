/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pod metadata for `gpuplane exporter` (exporter-podmeta.h). What dcgm-exporter does with it is in
 * internal/pkg/transformation/kubernetes.go (createPodInfo, shouldIncludeLabel, the pod informer of
 * NewPodMapper) and internal/pkg/utils/utils.go (SanitizeLabelName). The allowlist is matched with
 * the project's RE2-on-PCRE2 engine (cel-lib-ext.h), so a pattern means what it means to Go's
 * regexp package, and PCRE2 is mapped only by an exporter that was given a pattern.
 *
 * The cache is a chained hash table keyed by namespace and name, so that a watch of a whole
 * cluster (NODE_NAME unset) still answers each series' lookup in constant time. It holds only what
 * is exported: the UID and the labels that passed the allowlist, renamed, never whole objects.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cel-lib-ext.h"
#include "exporter-kube.h"
#include "exporter-podmeta.h"

#define BUCKETS_MIN 64u

/* ---- label names ---- */

static bool name_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Whether s[0..n) is well-formed UTF-8 (cel_utf8_next decodes a malformed byte as U+FFFD of length
 * 1, a real U+FFFD takes 3 bytes). */
static bool utf8_ok(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = cel_utf8_next(s + i, n - i, &cp);
        if (cp == 0xFFFD && k == 1)
            return false;
        i += k;
    }
    return true;
}

int exporter_podmeta_sanitize(const char *key, char **ret)
{
    size_t n = strlen(key), j = 0;
    char *out = malloc(n + 1); /* a character never grows: at most one '_' per byte */
    if (!out)
        return -ENOMEM;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        if (name_char((unsigned char)key[i])) {
            out[j++] = key[i++];
            continue;
        }
        out[j++] = '_';
        i += cel_utf8_next(key + i, n - i, &cp);
    }
    out[j] = '\0';
    *ret = out;
    return 0;
}

bool exporter_podmeta_name_ok(const char *name)
{
    if (!name[0] || (name[0] >= '0' && name[0] <= '9') || (name[0] == '_' && name[1] == '_'))
        return false;
    for (const char *p = name; *p; p++)
        if (!name_char((unsigned char)*p))
            return false;
    return true;
}

/* ---- the allowlist ---- */

void exporter_allowlist_init(struct exporter_allowlist *al)
{
    *al = (struct exporter_allowlist){0};
}

void exporter_allowlist_release(struct exporter_allowlist *al)
{
    for (size_t i = 0; i < al->n; i++)
        cel_regex_free(al->v[i]);
    free(al->v);
    exporter_allowlist_init(al);
}

int exporter_allowlist_add(struct exporter_allowlist *al, const char *pattern, struct diag *d)
{
    struct cel_regex *re = NULL;
    size_t n = strlen(pattern);
    if (al->n >= EXPORTER_ALLOWLIST_MAX)
        return diag_fail(d, -EINVAL, "more than %d patterns", EXPORTER_ALLOWLIST_MAX);
    /* Go refuses it too ("invalid UTF-8"); PCRE2 is told not to check. */
    if (!utf8_ok(pattern, n))
        return diag_fail(d, -EINVAL, "invalid RE2 pattern: invalid UTF-8");
    struct cel_regex **v = realloc(al->v, (al->n + 1) * sizeof(*v));
    if (!v)
        return diag_fail(d, -ENOMEM, "out of memory");
    al->v = v;
    int r = cel_regex_compile(pattern, n, &re, d);
    if (r < 0)
        return r;
    al->v[al->n++] = re;
    return 0;
}

bool exporter_allowlist_pass(const struct exporter_allowlist *al, const char *key)
{
    size_t n = strlen(key), begin, end;
    if (!al || al->n == 0)
        return true;
    if (!utf8_ok(key, n)) /* the API's JSON cannot hold one; PCRE2 must not see one */
        return false;
    for (size_t i = 0; i < al->n; i++)
        if (cel_regex_search(al->v[i], key, n, 0, &begin, &end) == 1)
            return true;
    return false;
}

/* ---- one pod's labels ---- */

struct candidate {
    char *name; /* sanitized, owned */
    const char *key, *value;
};

static int compare_candidates(const void *a, const void *b)
{
    const struct candidate *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->key, y->key);
}

void exporter_pod_labels_release(struct exporter_pod_labels *l)
{
    free(l->v);
    free(l->strings);
    *l = (struct exporter_pod_labels){0};
}

/* Copies the candidates that stand alone under their name (at most EXPORTER_POD_LABELS_MAX) into
 * ret. c is sorted by name. */
static int keep_unique(const struct candidate *c, size_t n, struct exporter_pod_labels *ret)
{
    struct exporter_pod_labels l = {0};
    size_t bytes = 0, kept = 0;
    bool *keep = calloc(n + 1, sizeof(*keep));
    if (!keep)
        return -ENOMEM;
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && strcmp(c[j].name, c[i].name) == 0)
            j++;
        if (j == i + 1 && kept < EXPORTER_POD_LABELS_MAX) {
            keep[i] = true;
            kept++;
            bytes += strlen(c[i].name) + strlen(c[i].value) + 2;
        }
        i = j;
    }
    l.v = calloc(kept + 1, sizeof(*l.v));
    l.strings = malloc(bytes + 1);
    if (!l.v || !l.strings) {
        free(keep);
        exporter_pod_labels_release(&l);
        return -ENOMEM;
    }
    char *p = l.strings;
    for (size_t i = 0; i < n; i++) {
        if (!keep[i])
            continue;
        size_t kn = strlen(c[i].name) + 1, vn = strlen(c[i].value) + 1;
        memcpy(p, c[i].name, kn);
        memcpy(p + kn, c[i].value, vn);
        l.v[l.n++] = (struct exporter_label){p, p + kn};
        p += kn + vn;
    }
    free(keep);
    *ret = l;
    return 0;
}

int exporter_pod_labels_build(const struct exporter_allowlist *al, json_t *labels,
                              struct exporter_pod_labels *ret)
{
    const char *key;
    json_t *value;
    size_t n = 0;
    int r = 0;

    if (!json_is_object(labels) || json_object_size(labels) == 0) {
        *ret = (struct exporter_pod_labels){0};
        return 0;
    }
    struct candidate *c = calloc(json_object_size(labels), sizeof(*c));
    if (!c)
        return -ENOMEM;
    json_object_foreach(labels, key, value)
    {
        const char *v = json_string_value(value);
        if (!v || !exporter_allowlist_pass(al, key))
            continue;
        r = exporter_podmeta_sanitize(key, &c[n].name);
        if (r < 0)
            break;
        if (!exporter_podmeta_name_ok(c[n].name)) {
            free(c[n].name);
            c[n].name = NULL;
            continue;
        }
        c[n].key = key;
        c[n].value = v;
        n++;
    }
    if (r >= 0 && n > 1)
        qsort(c, n, sizeof(*c), compare_candidates);
    if (r >= 0)
        r = keep_unique(c, n, ret);
    for (size_t i = 0; i < n; i++)
        free(c[i].name);
    free(c);
    return r;
}

/* ---- the cache ---- */

struct entry {
    struct entry *next;
    uint64_t hash;
    char *ns, *name, *uid; /* one allocation, ns first */
    struct exporter_pod_labels labels;
};

struct exporter_podmeta {
    struct exporter_podmeta_options o;
    struct entry **buckets;
    size_t n_buckets, n;
    size_t left_out;
    bool synced;
    struct kube_watch *watch;
};

/* FNV-1a of namespace, a NUL, name. */
static uint64_t key_hash(const char *ns, const char *name)
{
    uint64_t h = UINT64_C(14695981039346656037);
    for (const char *p = ns; *p; p++)
        h = (h ^ (unsigned char)*p) * UINT64_C(1099511628211);
    h *= UINT64_C(1099511628211);
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * UINT64_C(1099511628211);
    return h;
}

static void entry_free(struct entry *e)
{
    if (!e)
        return;
    exporter_pod_labels_release(&e->labels);
    free(e->ns);
    free(e);
}

/* The link that points at the entry of ns/name, or at the NULL ending its bucket's chain. */
static struct entry **find_link(const struct exporter_podmeta *pm, uint64_t h, const char *ns,
                                const char *name)
{
    struct entry **link = &pm->buckets[h & (pm->n_buckets - 1)];
    for (; *link; link = &(*link)->next)
        if ((*link)->hash == h && strcmp((*link)->ns, ns) == 0 && strcmp((*link)->name, name) == 0)
            return link;
    return link;
}

/* Doubles the table when it holds as many entries as buckets; a failure only keeps chains long. */
static void maybe_grow(struct exporter_podmeta *pm)
{
    if (pm->n < pm->n_buckets)
        return;
    size_t nb = pm->n_buckets * 2;
    struct entry **b = calloc(nb, sizeof(*b));
    if (!b)
        return;
    for (size_t i = 0; i < pm->n_buckets; i++)
        for (struct entry *e = pm->buckets[i], *next; e; e = next) {
            next = e->next;
            e->next = b[e->hash & (nb - 1)];
            b[e->hash & (nb - 1)] = e;
        }
    free(pm->buckets);
    pm->buckets = b;
    pm->n_buckets = nb;
}

static int entry_new(const struct exporter_podmeta *pm, uint64_t h, const char *ns,
                     const char *name, json_t *meta, struct entry **ret)
{
    const char *uid = json_string_value(json_object_get(meta, "uid"));
    size_t nsn = strlen(ns) + 1, nn = strlen(name) + 1, un = strlen(uid ? uid : "") + 1;
    struct entry *e = calloc(1, sizeof(*e));
    if (!e || !(e->ns = malloc(nsn + nn + un))) {
        free(e);
        return -ENOMEM;
    }
    e->hash = h;
    e->name = e->ns + nsn;
    e->uid = e->name + nn;
    memcpy(e->ns, ns, nsn);
    memcpy(e->name, name, nn);
    memcpy(e->uid, uid ? uid : "", un);
    if (pm->o.labels) {
        int r =
            exporter_pod_labels_build(pm->o.allowlist, json_object_get(meta, "labels"), &e->labels);
        if (r < 0) {
            entry_free(e);
            return r;
        }
    }
    *ret = e;
    return 0;
}

int exporter_podmeta_new(const struct exporter_podmeta_options *o, struct exporter_podmeta **ret)
{
    struct exporter_podmeta *pm = calloc(1, sizeof(*pm));
    if (!pm || !(pm->buckets = calloc(BUCKETS_MIN, sizeof(*pm->buckets)))) {
        free(pm);
        return -ENOMEM;
    }
    pm->o = *o;
    if (!pm->o.max_pods)
        pm->o.max_pods = EXPORTER_PODMETA_MAX_PODS;
    pm->n_buckets = BUCKETS_MIN;
    *ret = pm;
    return 0;
}

struct exporter_podmeta *exporter_podmeta_free(struct exporter_podmeta *pm)
{
    if (!pm)
        return NULL;
    pm->watch = kube_watch_free(pm->watch);
    for (size_t i = 0; i < pm->n_buckets; i++)
        for (struct entry *e = pm->buckets[i], *next; e; e = next) {
            next = e->next;
            entry_free(e);
        }
    free(pm->buckets);
    free(pm);
    return NULL;
}

int exporter_podmeta_apply(struct exporter_podmeta *pm, enum kube_event ev, json_t *pod)
{
    if (ev == KUBE_SYNCED) {
        pm->synced = true;
        if (pm->o.synced) {
            const struct exporter_podmeta_status st = {.pods = pm->n, .left_out = pm->left_out};
            pm->o.synced(&st, pm->o.userdata);
        }
        return 0;
    }
    json_t *meta = json_object_get(pod, "metadata");
    const char *ns = json_string_value(json_object_get(meta, "namespace"));
    const char *name = json_string_value(json_object_get(meta, "name"));
    if (!ns || !name || !*ns || !*name)
        return -EINVAL;
    uint64_t h = key_hash(ns, name);
    struct entry **link = find_link(pm, h, ns, name), *old = *link, *e = NULL;
    if (ev == KUBE_DELETED) {
        if (old) {
            *link = old->next;
            entry_free(old);
            pm->n--;
        }
        return 0;
    }
    if (!old && pm->n >= pm->o.max_pods) {
        pm->left_out++;
        return -ENOSPC;
    }
    int r = entry_new(pm, h, ns, name, meta, &e);
    if (r < 0)
        return r;
    if (old) { /* in place: the chain keeps its order */
        e->next = old->next;
        *link = e;
        entry_free(old);
        return 0;
    }
    e->next = NULL;
    *link = e;
    pm->n++;
    maybe_grow(pm);
    return 0;
}

bool exporter_podmeta_find(const struct exporter_podmeta *pm, const char *namespace_,
                           const char *name, struct exporter_podmeta_pod *ret)
{
    if (!pm || !namespace_ || !name)
        return false;
    const struct entry *e = *find_link(pm, key_hash(namespace_, name), namespace_, name);
    if (!e)
        return false;
    *ret = (struct exporter_podmeta_pod){
        .uid = e->uid, .labels = e->labels.v, .n_labels = e->labels.n};
    return true;
}

bool exporter_podmeta_synced(const struct exporter_podmeta *pm)
{
    return pm && pm->synced;
}

size_t exporter_podmeta_count(const struct exporter_podmeta *pm)
{
    return pm ? pm->n : 0;
}

/* ---- the watch ---- */

#define PODS "/api/v1/pods"

int exporter_podmeta_path(const char *node_name, char *buf, size_t n)
{
    return exporter_watch_path(PODS, NULL, node_name, buf, n);
}

static void on_pod_event(enum kube_event ev, json_t *obj, void *userdata)
{
    struct exporter_podmeta *pm = userdata;
    int r = exporter_podmeta_apply(pm, ev, obj);
    if (r < 0 && r != -ENOSPC)
        log_debug(2, "pod event not applied", "error", strerror(-r));
}

int exporter_podmeta_watch(struct exporter_podmeta *pm, struct kube_client *kube,
                           const char *node_name, struct diag *d)
{
    return exporter_watch_start(kube, PODS, NULL, node_name, "pods", on_pod_event, pm, &pm->watch,
                                d);
}
