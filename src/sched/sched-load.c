/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the simulator keeps of the objects it is given (sched_add), for clusters of thousands of
 * nodes: of Pods and Nodes only the fields the scheduler reads (a Pod's containers, a Node's
 * status, everybody's managedFields are dropped), and every kept value shared with the equal
 * values kept before (base-jdedup.h): the 40,000 devices of a 5,000-node cluster have a handful of
 * distinct product names and attribute objects, a workload's claims a handful of specs. The tables
 * (one per worker of sched_prepare, which the loader may run on two threads) live while objects
 * are added; sched_run drops them (the values stay with their holders).
 *
 * A reader of a Pod or Node field not listed here must add it to the lists below.
 */
#include <errno.h>
#include <string.h>

#include "base-doc.h"
#include "sched-internal.h"

/* The members of a mapping to keep, and for each the members of its own mapping value (NULL:
 * all of it). */
struct keep {
    const char *key;
    const char *const *sub;
};

static const char *const POD_META[] = {"name", "namespace", NULL};
static const char *const POD_SPEC[] = {"nodeName", "resourceClaims", "nodeSelector",
                                       "affinity", "tolerations",    NULL};
static const struct keep POD[] = {
    {"kind", NULL}, {"metadata", POD_META}, {"spec", POD_SPEC}, {NULL, NULL}};

/* The node filters read the labels, unschedulable and the taints; node selectors the name and
 * labels. */
static const char *const NODE_META[] = {"name", "labels", NULL};
static const char *const NODE_SPEC[] = {"unschedulable", "taints", NULL};
static const struct keep NODE[] = {
    {"kind", NULL}, {"metadata", NODE_META}, {"spec", NODE_SPEC}, {NULL, NULL}};

static bool listed(const char *const *names, const char *key)
{
    for (; *names; names++)
        if (strcmp(*names, key) == 0)
            return true;
    return false;
}

/* out, made of obj's members: obj itself when it kept all of them as they were (obj is then
 * shared still, when it was). */
static json_t *same_or(json_t *out, json_t *obj)
{
    json_t *v;
    const char *k;

    if (!out || json_object_size(out) != json_object_size(obj))
        return out;
    json_object_foreach(out, k, v)
    {
        if (json_object_get(obj, k) != v)
            return out;
    }
    json_decref(out);
    return json_incref(obj);
}

/* obj with only the listed members (in obj's order), a new reference. Anything but a mapping is
 * kept whole, so that the checks after see what they would have seen. */
static json_t *only(json_t *obj, const char *const *names)
{
    json_t *out, *v;
    const char *k;

    if (!json_is_object(obj))
        return json_incref(obj);
    out = json_object();
    json_object_foreach(obj, k, v)
    {
        if (out && listed(names, k) && json_object_set(out, k, v) < 0) {
            json_decref(out);
            return NULL;
        }
    }
    return same_or(out, obj);
}

static json_t *keep_fields(json_t *obj, const struct keep *keep)
{
    json_t *out = json_object(), *v;
    const char *k;

    if (!out)
        return NULL;
    json_object_foreach(obj, k, v)
    {
        const struct keep *f;
        json_t *part;

        for (f = keep; f->key && strcmp(f->key, k) != 0; f++)
            ;
        if (!f->key)
            continue;
        part = f->sub ? only(v, f->sub) : json_incref(v);
        if (!part || json_object_set_new(out, k, part) < 0) {
            json_decref(out);
            return NULL;
        }
    }
    return same_or(out, obj);
}

#define LAST_APPLIED "kubectl.kubernetes.io/last-applied-configuration"

/* obj without what no reader of any kind looks at: metadata.managedFields and kubectl's copy of
 * the whole object in an annotation (each as large as the object). */
static json_t *without_bookkeeping(json_t *obj)
{
    json_t *meta = json_object_get(obj, "metadata");
    json_t *ann = json_object_get(meta, "annotations");
    json_t *out, *m;

    if (!json_object_get(meta, "managedFields") && !json_object_get(ann, LAST_APPLIED))
        return json_incref(obj);
    out = json_copy(obj);
    m = json_copy(meta);
    if (!out || !m || json_object_set_new(out, "metadata", m) < 0) {
        json_decref(out);
        return NULL;
    }
    (void)json_object_del(m, "managedFields");
    if (json_object_get(ann, LAST_APPLIED)) {
        json_t *a = json_copy(ann);

        if (!a || json_object_set_new(m, "annotations", a) < 0) {
            json_decref(out);
            return NULL;
        }
        (void)json_object_del(a, LAST_APPLIED);
    }
    return out;
}

static const struct keep *keep_of(const char *kind)
{
    if (kind && strcmp(kind, "Pod") == 0)
        return POD;
    if (kind && strcmp(kind, "Node") == 0)
        return NODE;
    return NULL;
}

json_t *sched_prepare(struct sched *s, unsigned worker, json_t *obj)
{
    struct jdedup *t = &s->dedup[worker % ARRAY_SIZE(s->dedup)];
    const struct keep *keep = keep_of(json_string_value(json_object_get(obj, "kind")));
    bool shared = jdedup_holds(t, obj);
    json_t *kept = keep ? keep_fields(obj, keep) : without_bookkeeping(obj);
    json_t *out;

    if (!kept || (shared && kept == obj))
        return kept;
    /* what was read into the table already is taken as it is */
    out = shared ? jdedup_value_over(t, kept) : jdedup_value(t, kept);
    json_decref(kept);
    return out;
}

/* The reader's side of sched_prepare: of a Pod or a Node (known by a "kind" before the member)
 * only the listed members are built, of anything the bookkeeping is not. */
static bool keeps(void *arg, const char *kind, const struct jread_key *path, size_t depth)
{
    const struct keep *keep = keep_of(kind), *f;

    (void)arg;
    if (keep) {
        for (f = keep; f->key && !jread_key_is(&path[0], f->key); f++)
            ;
        if (!f->key)
            return false;
        if (depth == 1 || !f->sub)
            return true;
        if (depth == 2)
            for (const char *const *sub = f->sub; *sub; sub++)
                if (jread_key_is(&path[1], *sub))
                    return true;
        return depth > 2;
    }
    if (depth < 2 || !jread_key_is(&path[0], "metadata"))
        return true;
    if (depth == 2)
        return !jread_key_is(&path[1], "managedFields");
    return !(jread_key_is(&path[1], "annotations") && jread_key_is(&path[2], LAST_APPLIED));
}

static struct jdedup *table(void *arg, unsigned worker)
{
    struct sched *s = arg;

    return &s->dedup[worker % ARRAY_SIZE(s->dedup)];
}

static json_t *prepare(void *arg, unsigned worker, json_t *obj)
{
    return sched_prepare(arg, worker, obj);
}

struct doc_prep sched_doc_prep(struct sched *s)
{
    return (struct doc_prep){.fn = prepare, .arg = s, .table = table, .keep = keeps};
}

void sched_keep_done(struct sched *s)
{
    for (size_t i = 0; i < ARRAY_SIZE(s->dedup); i++)
        jdedup_release(&s->dedup[i]);
    /* the run shares the parts of the allocations it makes itself: no need to copy them */
    s->dedup[0].copy = false;
}

json_t *sched_keep_allocations(json_t *claims)
{
    _cleanup_json_ json_t *got = claims;
    json_t *out = json_array(), *c;
    size_t i;

    json_array_foreach(got, i, c)
    {
        json_t *alloc = json_object_get(json_object_get(c, "status"), "allocation");

        if (!out || json_array_append_new(
                        out, json_pack("{s:{s:O*}}", "status", "allocation", alloc)) < 0) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

json_t *sched_keep_claims(struct sched *s, json_t *claims)
{
    json_t *c;
    size_t i;

    json_array_foreach(claims, i, c)
    {
        /* allocated_copies made the status objects: they are the run's own to change */
        json_t *status = json_object_get(c, "status");
        json_t *alloc = json_object_get(status, "allocation");
        json_t *shared = alloc ? jdedup_value(&s->dedup[0], alloc) : NULL;

        if (alloc && (!shared || json_object_set_new(status, "allocation", shared) < 0)) {
            json_decref(claims);
            return NULL;
        }
    }
    return claims;
}
